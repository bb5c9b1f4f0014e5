//! `krender serve` under load, on 127.0.0.1 only: N concurrent tonic
//! clients (one HTTP/2 connection each) call the server for a fixed time,
//! and the table reports calls/s, p50/p99 latency and failed calls:
//! set-namespace on a 10-resource list with 16 clients, answered from the
//! function-result cache (the same call every time) and uncached (a
//! distinct namespace per call); the same list through an executable
//! function (a FunctionConfig binaryExecutor, fixtures/serve/fn-echo.sh);
//! the uncached load on a server started with `--no-cache` (what the
//! cache's writes cost); then 64 clients for 30 s (uncached set-namespace) with the server's RSS
//! at the start and the end.
//!
//! The server is the `krender` binary this bench builds, in a process of
//! its own (its RSS is its own); the clients share the machine's cores
//! with it. Each client's loop is bounded in time and in count.
//!
//! Run: `cargo bench --bench serve` (`KRENDER_BENCH_SECONDS` sets the
//! 16-client runs' length, default 10; `KRENDER_BENCH_SOAK_SECONDS` the
//! 64-client run's, default 30).

#![allow(clippy::print_stdout)] // A bench reports on stdout.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use krender::serve::proto::EvaluateFunctionRequest;
use krender::serve::proto::function_evaluator_client::FunctionEvaluatorClient;

/// No client makes more calls than this in one run.
const MAX_CALLS_PER_CLIENT: usize = 1_000_000;

const SET_NAMESPACE: &str = "ghcr.io/kptdev/krm-functions-catalog/set-namespace:v0.4.1";
const ECHO: &str = "example.com/fns/echo:v1";

/// A ResourceList of 10 resources whose functionConfig sets `namespace`.
fn resource_list(namespace: &str) -> Vec<u8> {
    let mut out = String::from("apiVersion: config.kubernetes.io/v1\nkind: ResourceList\nitems:\n");
    for i in 0..10 {
        out.push_str(&format!(
            "\
- apiVersion: apps/v1
  kind: Deployment
  metadata:
    name: web-{i}
    labels:
      app: web
    annotations:
      config.kubernetes.io/index: '0'
      config.kubernetes.io/path: 'web-{i}.yaml'
      internal.config.kubernetes.io/index: '0'
      internal.config.kubernetes.io/path: 'web-{i}.yaml'
  spec:
    replicas: 3
    template:
      spec:
        containers:
        - name: web
          image: nginx:1.{i}
"
        ));
    }
    out.push_str(&format!(
        "functionConfig:\n  apiVersion: v1\n  kind: ConfigMap\n  metadata:\n    name: function-input\n  data:\n    namespace: {namespace}\n"
    ));
    out.into_bytes()
}

struct Server {
    child: Child,
    address: String,
    _dir: tempfile::TempDir,
}

impl Server {
    fn start(extra: &[&str]) -> Server {
        let dir = tempfile::tempdir().expect("temp dir");
        let configs = dir.path().join("functionconfigs");
        std::fs::create_dir_all(&configs).expect("config dir");
        let echo = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/serve/fn-echo.sh");
        std::fs::write(
            configs.join("echo.yaml"),
            format!(
                "apiVersion: config.porch.kpt.dev/v1alpha1\nkind: FunctionConfig\nmetadata:\n  name: echo\nspec:\n  image: example.com/fns/echo\n  binaryExecutor:\n    tags: [v1]\n    path: {}\n",
                echo.display()
            ),
        )
        .expect("FunctionConfig");
        let mut child = Command::new(env!("CARGO_BIN_EXE_krender"))
            .args(["serve", "--host", "127.0.0.1", "--port", "0", "--config"])
            .arg(&configs)
            .args(extra)
            .env("KRENDER_CACHE_DIR", dir.path().join("cache"))
            .env("KRENDER_CONFIG", dir.path().join("render.toml"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("krender serve starts");
        let mut line = String::new();
        if let Some(stderr) = child.stderr.take() {
            let _ = BufReader::new(stderr).read_line(&mut line);
        }
        let address = line
            .trim()
            .strip_prefix("krender serve: listening on ")
            .unwrap_or_else(|| panic!("krender serve did not start: {line:?}"))
            .to_owned();
        Server {
            child,
            address,
            _dir: dir,
        }
    }

    /// The server's resident set size, in KiB.
    fn rss_kib(&self) -> u64 {
        rss_kib(self.child.id())
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The resident set size of process `pid`, in KiB (0 when unknown).
fn rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|value| value.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

/// What the calls of one run should be.
#[derive(Clone, Copy)]
enum Load {
    /// The same set-namespace call every time (answered from the cache).
    Cached,
    /// set-namespace with a namespace no call used before.
    Uncached,
    /// The executable function.
    Executable,
}

struct Outcome {
    calls: usize,
    failed: u64,
    elapsed: Duration,
    p50: Duration,
    p99: Duration,
}

async fn run(address: &str, clients: usize, length: Duration, load: Load) -> Outcome {
    let failed = Arc::new(AtomicU64::new(0));
    let serial = Arc::new(AtomicU64::new(0));
    let cached = Arc::new(resource_list("cached"));
    let mut tasks = Vec::new();
    let started = Instant::now();
    for _ in 0..clients {
        let endpoint = format!("http://{address}");
        let (failed, serial, cached) = (failed.clone(), serial.clone(), cached.clone());
        tasks.push(tokio::spawn(async move {
            let mut latencies = Vec::new();
            let channel = match tonic::transport::Endpoint::from_shared(endpoint) {
                Ok(endpoint) => endpoint.tcp_nodelay(true).connect().await,
                Err(error) => panic!("{error}"),
            };
            let Ok(channel) = channel else {
                failed.fetch_add(1, Ordering::Relaxed);
                return latencies;
            };
            let mut client = FunctionEvaluatorClient::new(channel);
            while started.elapsed() < length && latencies.len() < MAX_CALLS_PER_CLIENT {
                let (image, input) = match load {
                    Load::Cached => (SET_NAMESPACE, (*cached).clone()),
                    Load::Uncached => {
                        let n = serial.fetch_add(1, Ordering::Relaxed);
                        (SET_NAMESPACE, resource_list(&format!("ns-{n}")))
                    }
                    Load::Executable => (ECHO, (*cached).clone()),
                };
                let mut request = tonic::Request::new(EvaluateFunctionRequest {
                    resource_list: input,
                    image: image.to_owned(),
                });
                request.set_timeout(Duration::from_secs(30));
                let call = Instant::now();
                match client.evaluate_function(request).await {
                    Ok(response) if !response.get_ref().resource_list.is_empty() => {
                        latencies.push(call.elapsed());
                    }
                    _ => {
                        failed.fetch_add(1, Ordering::Relaxed);
                    }
                }
            }
            latencies
        }));
    }
    let mut latencies = Vec::new();
    for task in tasks {
        latencies.extend(task.await.unwrap_or_default());
    }
    let elapsed = started.elapsed();
    latencies.sort();
    let at = |q: f64| {
        latencies
            .get(((latencies.len() as f64 * q) as usize).min(latencies.len().saturating_sub(1)))
            .copied()
            .unwrap_or_default()
    };
    Outcome {
        calls: latencies.len(),
        failed: failed.load(Ordering::Relaxed),
        elapsed,
        p50: at(0.50),
        p99: at(0.99),
    }
}

fn seconds(variable: &str, default: u64) -> Duration {
    Duration::from_secs(
        std::env::var(variable)
            .ok()
            .and_then(|value| value.parse().ok())
            .unwrap_or(default),
    )
}

fn main() {
    let length = seconds("KRENDER_BENCH_SECONDS", 10);
    let soak = seconds("KRENDER_BENCH_SOAK_SECONDS", 30);
    let server = Server::start(&[]);
    // The clients get one core's worth of threads; the server has its own.
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("tokio runtime");
    println!(
        "krender serve on {} (10-resource ResourceList)",
        server.address
    );
    println!(
        "{:<34} {:>7} {:>10} {:>9} {:>9} {:>7}",
        "load", "clients", "calls/s", "p50", "p99", "failed"
    );
    // Warm-up: connections, page cache, the cache directory.
    runtime.block_on(run(
        &server.address,
        4,
        Duration::from_secs(1),
        Load::Cached,
    ));
    let rows = [
        ("set-namespace, cached", 16, length, Load::Cached),
        ("set-namespace, uncached", 16, length, Load::Uncached),
        ("executable (binaryExecutor)", 16, length, Load::Executable),
    ];
    let row = |name: &str, clients: usize, outcome: &Outcome| {
        println!(
            "{:<34} {:>7} {:>10.0} {:>9.2?} {:>9.2?} {:>7}",
            name,
            clients,
            outcome.calls as f64 / outcome.elapsed.as_secs_f64(),
            outcome.p50,
            outcome.p99,
            outcome.failed
        );
    };
    for (name, clients, length, load) in rows {
        let outcome = runtime.block_on(run(&server.address, clients, length, load));
        row(name, clients, &outcome);
    }
    // What the cache's writes cost: a server without the cache.
    {
        let bare = Server::start(&["--no-cache"]);
        let outcome = runtime.block_on(run(&bare.address, 16, length, Load::Uncached));
        row("set-namespace, --no-cache", 16, &outcome);
    }
    let start_rss = server.rss_kib();
    // The RSS every 5 s of the run: flat, or growing?
    let pid = server.child.id();
    let sampler = std::thread::spawn(move || {
        let mut samples = Vec::new();
        let started = Instant::now();
        while started.elapsed() + Duration::from_secs(5) <= soak {
            std::thread::sleep(Duration::from_secs(5));
            samples.push(rss_kib(pid));
        }
        samples
    });
    let outcome = runtime.block_on(run(&server.address, 64, soak, Load::Uncached));
    let end_rss = server.rss_kib();
    let samples = sampler.join().unwrap_or_default();
    row(
        &format!("set-namespace, uncached, {}s", soak.as_secs()),
        64,
        &outcome,
    );
    let mib = |kib: u64| format!("{:.1}", kib as f64 / 1024.0);
    println!(
        "server RSS (MiB): {} before the 64-client run, every 5 s during it: {}; {} after",
        mib(start_rss),
        samples
            .iter()
            .map(|&kib| mib(kib))
            .collect::<Vec<_>>()
            .join(" "),
        mib(end_rss)
    );
}
