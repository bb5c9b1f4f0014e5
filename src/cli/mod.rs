//! The command line: argument parsing and the commands, printing exactly what
//! kpt prints where kpt fixes the text. This is the only module that talks
//! to the process's stdout and stderr.

pub mod args;
mod cache;
mod diagnostics;
mod eval;
mod kpt;
pub mod layer;
mod ls;
mod progress;
mod render;
mod rpkg;
mod serve;
mod signals;
mod watch;

use std::io::Write;
use std::process::ExitCode;

use clap::Parser;

use args::{Cli, Command, FnCommand, LayerCommand};
use signals::Interrupts;

/// Runs krender with the given command-line arguments and returns the exit code.
pub fn run(args: Vec<std::ffi::OsString>) -> ExitCode {
    // Commands handed to kpt get the words as they were typed.
    let words = args.get(1..).unwrap_or_default().to_vec();
    let cli = match Cli::try_parse_from(args) {
        Ok(cli) => cli,
        Err(error) => {
            let code = if error.use_stderr() { 1 } else { 0 };
            let _ = error.print();
            return ExitCode::from(code);
        }
    };
    init_tracing();
    // Rendering recurses as deep as YAML nests: every thread that renders
    // gets a large stack (only touched pages are committed), the command's
    // own thread and rayon's workers alike. Building the global pool fails
    // only if it was built before (tests running commands in process).
    let _ = rayon::ThreadPoolBuilder::new()
        .stack_size(crate::hydrate::WORKER_STACK_BYTES)
        .build_global();
    let command = std::thread::Builder::new()
        .name("krender".to_owned())
        .stack_size(crate::hydrate::WORKER_STACK_BYTES)
        .spawn(move || run_command(cli, &words));
    match command.map(std::thread::JoinHandle::join) {
        Ok(Ok(code)) => code,
        // The command's panic was printed by the panic hook.
        Ok(Err(_)) => ExitCode::from(101),
        Err(error) => {
            let _ = writeln!(std::io::stderr(), "krender: cannot start: {error}");
            ExitCode::from(1)
        }
    }
}

/// Runs the parsed command and returns its exit code.
fn run_command(cli: Cli, words: &[std::ffi::OsString]) -> ExitCode {
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    // Not locked for the whole command, unlike stdout: the progress bar's
    // tick thread and the render's workers draw on stderr too, and waiting
    // for a lock held here deadlocked them against the main thread.
    let mut err = std::io::stderr();
    let truncate_output = cli.truncate_output;
    let diagnostics = cli.diagnostics.resolve();
    let code = match cli.command {
        Command::Fn {
            command: FnCommand::Render(mut args),
        }
        | Command::Render(mut args) => {
            args.render.truncate_output = truncate_output;
            args.render.diagnostics = diagnostics;
            render::run(&args, &Interrupts::install(), &mut out, &mut err)
        }
        Command::Fn {
            command: FnCommand::Eval(mut args),
        } => {
            args.truncate_output = truncate_output;
            eval::run(&args, &Interrupts::install(), &mut out, &mut err)
        }
        Command::Fn {
            command: FnCommand::Source(args),
        } => eval::source(&args, &mut out, &mut err),
        Command::Fn {
            command: FnCommand::Sink(args),
        } => eval::sink(&args, &mut err),
        Command::Fn {
            command: FnCommand::Ls(args),
        } => ls::run(&args, &mut out, &mut err),
        Command::Layer {
            command: LayerCommand::Render { paths, options },
        } => layer::render_command(&paths, options.substitution(), &mut out, &mut err),
        Command::Cache { command } => cache::run(&command, &mut out, &mut err),
        Command::Watch(mut args) => {
            args.render.truncate_output = truncate_output;
            args.render.diagnostics = diagnostics;
            watch::run(&args, &Interrupts::install(), &mut out, &mut err)
        }
        Command::Rpkg(args) => rpkg::run(&args, &mut out, &mut err),
        Command::Serve(args) => serve::run(&args, &Interrupts::install(), &mut err),
        Command::Version => {
            let _ = writeln!(
                out,
                "krender {}\n\
                 output: kpt's main branch at {} (its fn render e2e suite): a status block \
                 in the root Kptfile, ghcr.io/kptdev image names, krm-fn attribution; \
                 kpt {} writes none of these\n\
                 flags and help texts: kpt {}",
                env!("CARGO_PKG_VERSION"),
                kpt::KPT_E2E_COMMIT,
                kpt::KPT_TEXTS,
                kpt::KPT_TEXTS
            );
            0
        }
        Command::Completions { shell } => {
            use clap::CommandFactory;
            // Into a buffer: the generator panics on a write error (`| head`).
            let mut script = Vec::new();
            clap_complete::generate(shell, &mut Cli::command(), "krender", &mut script);
            let _ = out.write_all(&script);
            0
        }
        Command::Man { dir: Some(dir) } => {
            use clap::CommandFactory;
            // One page per command, named as the top page's SEE ALSO names
            // them (`krender-fn-render.1`).
            let written = std::fs::create_dir_all(&dir)
                .and_then(|()| clap_mangen::generate_to(Cli::command(), &dir));
            match written {
                Ok(()) => {
                    let _ = writeln!(err, "wrote the man pages to {}", dir.display());
                    0
                }
                Err(error) => {
                    let _ = writeln!(
                        err,
                        "error: cannot write the man pages to {}: {error}",
                        dir.display()
                    );
                    1
                }
            }
        }
        Command::Man { dir: None } => {
            use clap::CommandFactory;
            let mut page = Vec::new();
            // As `man DIR` writes them: no page for `help`, so none named.
            let command = Cli::command().disable_help_subcommand(true);
            match clap_mangen::Man::new(command).render(&mut page) {
                Ok(()) => {
                    let _ = out.write_all(&page);
                    0
                }
                Err(error) => {
                    let _ = writeln!(err, "error: cannot write the man page: {error}");
                    1
                }
            }
        }
        Command::Kpt(_)
        | Command::Fn {
            command: FnCommand::Kpt(_),
        } => kpt::hand_over_or_suggest(words, &mut err),
    };
    let _ = out.flush();
    let _ = err.flush();
    ExitCode::from(u8::try_from(code).unwrap_or(1))
}

/// Sends `tracing` events to stderr when `RUST_LOG` asks for them (for
/// example `RUST_LOG=krender=debug`), each span with its time when it
/// closes (`RUST_LOG=krender=info` times a render's phases); silent
/// otherwise, so kpt's stderr stays byte-identical.
fn init_tracing() {
    let Ok(filter) = tracing_subscriber::EnvFilter::try_from_env("RUST_LOG") else {
        return;
    };
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_span_events(tracing_subscriber::fmt::format::FmtSpan::CLOSE)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_writer(std::io::stderr)
        .try_init();
}

/// kpt's `KRM_DISABLE_ATTRIBUTION`: set (to anything) turns off the
/// `cnrm.cloud.google.com/blueprint` annotation on written resources.
fn attribution_enabled() -> bool {
    std::env::var_os("KRM_DISABLE_ATTRIBUTION").is_none()
}

/// `KRENDER_NATIVE=off|verify`: builtins through the wire, or both ways
/// with a check (see `runtime::function_filter::NativeMode`).
fn native_mode() -> crate::runtime::function_filter::NativeMode {
    std::env::var("KRENDER_NATIVE")
        .map(|value| crate::runtime::function_filter::NativeMode::parse(&value))
        .unwrap_or_default()
}

/// The function table's file: `$KRENDER_CONFIG`, else the nearest
/// `render.toml` in `package` or a directory above it, else the nearest in
/// the working directory or above; else `./render.toml`, which need not
/// exist (no table: the defaults).
fn config_path(package: Option<&std::path::Path>) -> std::path::PathBuf {
    use crate::runtime::chain::DEFAULT_CONFIG;
    if let Some(path) = std::env::var_os("KRENDER_CONFIG") {
        return path.into();
    }
    let cwd = std::env::current_dir().unwrap_or_default();
    let nearest = |start: &std::path::Path| {
        start
            .ancestors()
            .map(|dir| dir.join(DEFAULT_CONFIG))
            .find(|candidate| candidate.is_file())
    };
    package
        .map(|package| cwd.join(package))
        .and_then(|package| nearest(&package))
        .or_else(|| nearest(&cwd))
        .unwrap_or_else(|| DEFAULT_CONFIG.into())
}

/// A function table that does not load, as a command error: reported
/// before anything runs, not as the first step's failure.
fn config_error(path: &std::path::Path) -> Option<crate::hydrate::Report> {
    crate::runtime::config::FunctionTable::load(path)
        .err()
        .map(|error| crate::hydrate::Report::Command(error.to_string()))
}

/// The container engine `KPT_FN_RUNTIME` names (docker, podman, nerdctl).
fn container_runtime() -> crate::runtime::container::EngineChoice {
    crate::runtime::container::EngineChoice::parse(
        &std::env::var("KPT_FN_RUNTIME").unwrap_or_default(),
    )
}

/// `KRENDER_FSYNC=0`: commits skip their flushes (atomic against a crash
/// of the process, not a power loss; see `pkg::commit::Durability`).
fn durability() -> crate::pkg::commit::Durability {
    match std::env::var_os("KRENDER_FSYNC") {
        Some(value) if value == "0" => crate::pkg::commit::Durability::Unflushed,
        _ => crate::pkg::commit::Durability::Flushed,
    }
}

/// kpt's check of `--image-pull-policy` (a flag error, before anything
/// runs): `Always`, `IfNotPresent` or `Never`, in any letter case.
fn image_pull_policy_error(value: Option<&str>) -> Option<crate::hydrate::Report> {
    let value = value?;
    let known = ["Always", "IfNotPresent", "Never"]
        .iter()
        .any(|policy| policy.eq_ignore_ascii_case(value));
    (!known).then(|| {
        crate::hydrate::Report::Command(format!(
            "invalid argument {} for \"--image-pull-policy\" flag: must be one of: Always, IfNotPresent, Never",
            crate::runtime::builtin::sdk::go_quote(value)
        ))
    })
}
