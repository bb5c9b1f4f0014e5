//! `krender serve`: Porch's function runner over gRPC (see
//! [`crate::serve`]). The command reads its flags and environment, binds
//! the socket, and stops on SIGINT/SIGTERM: new calls are refused, calls in
//! flight are answered, then the process exits 0 (a second signal ends it
//! at once).

use std::io::Write;
use std::time::Duration;

use super::args::ServeArgs;
use super::render::print_report;
use super::signals::Interrupts;
use crate::serve::{Limits, ServeOptions, Server};

/// Runs the server until a signal stops it; returns the exit code.
pub(super) fn run(args: &ServeArgs, interrupts: &Interrupts, err: &mut dyn Write) -> i32 {
    let render_toml = super::config_path(None);
    if let Some(report) = super::config_error(&render_toml) {
        print_report(&report, err);
        return 1;
    }
    let remote = match args.cache.options().resolved_dir() {
        Some(_) => match super::cache::open_remote(&args.cache, &render_toml) {
            Ok(remote) => remote,
            Err(report) => {
                print_report(&report, err);
                return 1;
            }
        },
        None => None,
    };
    let defaults = Limits::default();
    let options = ServeOptions {
        function_configs: args.config.clone(),
        render_toml,
        cache: args.cache.options(),
        remote,
        runtime: super::container_runtime(),
        limits: Limits {
            timeout: Duration::from_secs(args.timeout_seconds.max(1)),
            max_concurrent: args
                .max_concurrent
                .unwrap_or(defaults.max_concurrent)
                .max(1),
            max_queued: args.max_queued,
            max_message_bytes: args.max_request_bytes,
        },
    };
    let server = match Server::new(options) {
        Ok(server) => server,
        Err(error) => {
            let _ = writeln!(err, "krender serve: {error}");
            return 1;
        }
    };
    let listener = match std::net::TcpListener::bind((args.host.as_str(), args.port)) {
        Ok(listener) => listener,
        Err(error) => {
            let _ = writeln!(
                err,
                "krender serve: cannot listen on {}:{}: {error}",
                args.host, args.port
            );
            return 1;
        }
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        // Functions run on the blocking pool and recurse as deep as YAML
        // nests, like a render's workers.
        .thread_stack_size(crate::hydrate::WORKER_STACK_BYTES)
        .thread_name("krender-serve")
        .build();
    let runtime = match runtime {
        Ok(runtime) => runtime,
        Err(error) => {
            let _ = writeln!(err, "krender serve: cannot start: {error}");
            return 1;
        }
    };
    match listener.local_addr() {
        Ok(address) => {
            let _ = writeln!(err, "krender serve: listening on {address}");
        }
        Err(error) => {
            let _ = writeln!(err, "krender serve: cannot listen: {error}");
            return 1;
        }
    }
    let _ = err.flush();
    let signalled = interrupts.cancel().clone();
    let shutdown = async move {
        while !signalled.is_cancelled() {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    };
    match runtime.block_on(server.run(listener, shutdown)) {
        Ok(()) => {
            let _ = writeln!(
                err,
                "krender serve: stopped; the calls in flight were answered"
            );
            0
        }
        Err(error) => {
            let _ = writeln!(err, "krender serve: {error}");
            1
        }
    }
}
