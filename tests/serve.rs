//! `krender serve` through a real gRPC client that krender did not write:
//! Python stubs generated with grpcio-tools from proto/evaluator.proto at
//! test time (tests/serve-client.py), and grpcio-health-checking's health
//! client. Every builtin answers as the catalog image does (the recorded
//! outputs under fixtures/builtins), and `krender fn eval` through the
//! server (an `--exec` function forwarding to it, as Porch's gRPC runner
//! sits under kpt's function filter) prints what `fn eval --image` prints;
//! FunctionConfig binaryExecutors run; unknown functions are NOT_FOUND;
//! deadlines, malformed input, oversized requests, backpressure, health,
//! reloading and SIGTERM behave. `.ci/run` installs the Python packages;
//! without them these tests fail, unless `KRENDER_SKIP_SERVICES=1`.
#![allow(clippy::print_stderr)]

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

const CATALOG: &str = "ghcr.io/kptdev/krm-functions-catalog/";

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// True when the Python client can run; false (with a note) when
/// `KRENDER_SKIP_SERVICES` is set; panics when it is missing otherwise.
fn client_available() -> bool {
    if std::env::var_os("KRENDER_SKIP_SERVICES").is_some() {
        eprintln!("skipping krender serve tests (KRENDER_SKIP_SERVICES)");
        return false;
    }
    let probe = Command::new("python3")
        .args(["-c", "import grpc, grpc_tools, grpc_health"])
        .status();
    assert!(
        probe.is_ok_and(|status| status.success()),
        "python3 with grpcio-tools and grpcio-health-checking must be installed for the krender serve tests (.ci/run installs them; KRENDER_SKIP_SERVICES=1 skips them)"
    );
    true
}

/// A running `krender serve` on 127.0.0.1, killed when dropped.
struct Server {
    child: Child,
    address: String,
    stderr: BufReader<std::process::ChildStderr>,
    cache: tempfile::TempDir,
}

impl Server {
    fn start(args: &[&str], env: &[(&str, &str)]) -> Server {
        let cache = tempfile::tempdir().unwrap();
        let mut child = Command::new(env!("CARGO_BIN_EXE_krender"))
            .args(["serve", "--host", "127.0.0.1", "--port", "0"])
            .args(args)
            .env("KRENDER_CACHE_DIR", cache.path())
            .env("KRENDER_CONFIG", cache.path().join("no-render.toml"))
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut stderr = BufReader::new(child.stderr.take().unwrap());
        let mut line = String::new();
        stderr.read_line(&mut line).unwrap();
        let address = line
            .trim()
            .strip_prefix("krender serve: listening on ")
            .unwrap_or_else(|| panic!("unexpected first line: {line:?}"))
            .to_owned();
        Server {
            child,
            address,
            stderr,
            cache,
        }
    }

    /// Runs a plan (see tests/serve-client.py) and returns its results.
    fn client(&self, plan: &Value) -> Vec<Value> {
        client(&self.address, plan)
    }

    fn terminate(&self) {
        // SAFETY: kill on our own child's pid touches no memory.
        unsafe {
            libc::kill(self.child.id() as i32, libc::SIGTERM);
        }
    }

    /// Waits for the server to exit; its exit code and the rest of stderr.
    fn wait(mut self) -> (Option<i32>, String) {
        let started = Instant::now();
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                let mut rest = String::new();
                let _ = std::io::Read::read_to_string(&mut self.stderr, &mut rest);
                return (status.code(), rest);
            }
            assert!(
                started.elapsed() < Duration::from_secs(20),
                "krender serve did not exit"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn client(address: &str, plan: &Value) -> Vec<Value> {
    let dir = tempfile::tempdir().unwrap();
    let plan_path = dir.path().join("plan.json");
    std::fs::write(&plan_path, plan.to_string()).unwrap();
    let output = Command::new("python3")
        .arg(repo().join("tests/serve-client.py"))
        .arg(address)
        .arg(repo().join("proto"))
        .arg(&plan_path)
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "client failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).unwrap()
}

/// Every `fixtures/builtins/<function>/<case>/` directory.
fn builtin_cases() -> Vec<(String, PathBuf)> {
    let mut cases = Vec::new();
    for function in std::fs::read_dir(repo().join("fixtures/builtins")).unwrap() {
        let function = function.unwrap();
        let name = function.file_name().to_string_lossy().into_owned();
        for case in std::fs::read_dir(function.path()).unwrap() {
            let case = case.unwrap().path();
            if case.join("input.yaml").is_file() {
                cases.push((name.clone(), case));
            }
        }
    }
    cases.sort();
    cases
}

/// The serve client's plan entry for one call.
fn call(image: &str, input: &Path, out: &Path) -> Value {
    json!({"op": "call", "image": image, "input": input, "out": out})
}

#[test]
fn serve_builtins_answer_as_the_catalog_images_and_fn_eval() {
    if !client_available() {
        return;
    }
    let server = Server::start(&[], &[]);
    let out = tempfile::tempdir().unwrap();
    let cases = builtin_cases();
    assert!(cases.len() > 20, "{} builtin cases", cases.len());
    let plan: Vec<Value> = cases
        .iter()
        .enumerate()
        .map(|(i, (name, dir))| {
            call(
                &format!("{CATALOG}{name}:latest"),
                &dir.join("input.yaml"),
                &out.path().join(i.to_string()),
            )
        })
        .collect();
    let results = server.client(&Value::Array(plan));
    let mut failures = Vec::new();
    let mut functions = std::collections::BTreeSet::new();
    for (i, ((name, dir), result)) in cases.iter().zip(&results).enumerate() {
        let failing = dir.join("expected-exit-code").is_file();
        let code = result["code"].as_str().unwrap_or_default();
        functions.insert(name.clone());
        if failing {
            // Porch's runners answer a failing function with INTERNAL.
            if code != "INTERNAL" {
                failures.push(format!("{}: {result}", dir.display()));
            }
            continue;
        }
        if code != "OK" {
            failures.push(format!("{}: {result}", dir.display()));
            continue;
        }
        let prefix = out.path().join(i.to_string());
        let answer = std::fs::read(prefix.with_extension("yaml")).unwrap();
        let log = std::fs::read(prefix.with_extension("log")).unwrap();
        let expected = std::fs::read(dir.join("expected.yaml")).unwrap();
        let expected_log = std::fs::read(dir.join("expected-stderr.txt")).unwrap_or_default();
        if answer != expected || log != expected_log {
            failures.push(format!(
                "{}: answer differs from expected.yaml",
                dir.display()
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(functions.len() >= 24, "{functions:?}");

    // `fn eval` through the server: one passing case per builtin.
    let mut seen = std::collections::BTreeSet::new();
    let mut evaluated = 0;
    for (name, dir) in &cases {
        if dir.join("expected-exit-code").is_file() || !seen.insert(name.clone()) {
            continue;
        }
        let input = std::fs::read(dir.join("input.yaml")).unwrap();
        let text = String::from_utf8(input.clone()).unwrap();
        let decoded = krender::krm::resource_list::decode_function_output(&text).unwrap();
        let config = out.path().join(format!("{name}-config.yaml"));
        let mut config_args = Vec::new();
        if let Some(node) = &decoded.function_config {
            std::fs::write(
                &config,
                krender::yaml::to_string(node, krender::yaml::SeqIndent::Compact),
            )
            .unwrap();
            config_args = vec!["--fn-config".to_owned(), config.display().to_string()];
        }
        let image = format!("{CATALOG}{name}:latest");
        let forward = format!(
            "python3 {} --forward {} {} {image}",
            repo().join("tests/serve-client.py").display(),
            server.address,
            repo().join("proto").display()
        );
        let eval = |how: &[&str]| {
            let mut child = Command::new(env!("CARGO_BIN_EXE_krender"))
                .args(["fn", "eval", "-", "-o", "stdout", "--no-cache"])
                .args(how)
                .args(&config_args)
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap();
            let mut stdin = child.stdin.take().unwrap();
            std::io::Write::write_all(&mut stdin, &input).unwrap();
            drop(stdin);
            child.wait_with_output().unwrap()
        };
        let direct = eval(&["--image", &image]);
        let served = eval(&["--exec", &forward]);
        // Some fixtures hold what `fn eval` refuses before any function
        // runs (non-KRM items): both ways refuse them alike.
        assert_eq!(
            served.status.code(),
            direct.status.code(),
            "{name}: {}\n{}",
            String::from_utf8_lossy(&direct.stderr),
            String::from_utf8_lossy(&served.stderr)
        );
        evaluated += usize::from(direct.status.success());
        assert_eq!(
            String::from_utf8_lossy(&served.stdout),
            String::from_utf8_lossy(&direct.stdout),
            "{name}: fn eval through krender serve differs from fn eval --image\n{}",
            String::from_utf8_lossy(&served.stderr)
        );
    }
    assert!(seen.len() >= 24, "{seen:?}");
    assert!(
        evaluated >= 20,
        "only {evaluated} builtins ran through fn eval"
    );
}

/// Whether a `sleep SECONDS` process runs (fixtures/serve/fn-slow.sh).
fn sleeping(seconds: &str) -> bool {
    let wanted = format!("sleep\0{seconds}\0");
    std::fs::read_dir("/proc")
        .map(|entries| {
            entries.flatten().any(|entry| {
                std::fs::read(entry.path().join("cmdline"))
                    .is_ok_and(|cmdline| cmdline == wanted.as_bytes())
            })
        })
        .unwrap_or(false)
}

/// FunctionConfigs for the fixture functions, written into `dir`.
fn write_function_configs(dir: &Path) {
    let script = |name: &str| repo().join("fixtures/serve").join(name);
    let config = |name: &str, image: &str, spec: String| {
        format!(
            "apiVersion: config.porch.kpt.dev/v1alpha1\nkind: FunctionConfig\nmetadata:\n  name: {name}\nspec:\n  image: {image}\n{spec}"
        )
    };
    let binary = |tags: &str, path: PathBuf| {
        format!(
            "  binaryExecutor:\n    tags: [{tags}]\n    path: {}\n",
            path.display()
        )
    };
    let text = [
        config(
            "echo",
            "example.com/fns/echo",
            binary("v1", script("fn-echo.sh"))
                + "  podExecutor:\n    tags: [v2]\n    timeToLive: 30m\n",
        ),
        config(
            "fail",
            "example.com/fns/fail",
            binary("v1", script("fn-fail.sh")),
        ),
        config(
            "slow",
            "example.com/fns/slow",
            binary("v1", script("fn-slow.sh")),
        ),
        config(
            "set-namespace",
            "ghcr.io/kptdev/krm-functions-catalog/set-namespace",
            "  prefixes: [\"registry.example.com/mirror/\"]\n  podExecutor:\n    tags: [v0.4.1]\n"
                .to_owned(),
        ),
    ]
    .join("---\n");
    std::fs::write(dir.join("functions.yaml"), text).unwrap();
}

#[test]
fn serve_runs_function_configs_and_answers_porch_status_codes() {
    if !client_available() {
        return;
    }
    let configs = tempfile::tempdir().unwrap();
    write_function_configs(configs.path());
    // No container engine: podExecutor tags are NOT_FOUND.
    let server = Server::start(
        &[
            "--config",
            &configs.path().display().to_string(),
            "--max-request-body-size",
            "1048576",
        ],
        &[
            ("KPT_FN_RUNTIME", "nerdctl"),
            ("PATH", "/usr/bin:/bin"),
            ("FN_SLOW_SECONDS", "30"),
        ],
    );
    let work = tempfile::tempdir().unwrap();
    let input = repo().join("fixtures/builtins/set-namespace/basicpipeline/input.yaml");
    let malformed = work.path().join("malformed.yaml");
    std::fs::write(&malformed, "items: [\n").unwrap();
    let big = work.path().join("big.yaml");
    std::fs::write(
        &big,
        format!(
            "apiVersion: config.kubernetes.io/v1\nkind: ResourceList\nitems: []\n# {}\n",
            "x".repeat((1 << 20) + 1000)
        ),
    )
    .unwrap();
    let huge = work.path().join("huge.yaml");
    std::fs::write(
        &huge,
        format!(
            "apiVersion: config.kubernetes.io/v1\nkind: ResourceList\nitems: []\n# {}\n",
            "x".repeat(3 << 20)
        ),
    )
    .unwrap();
    let out = |name: &str| work.path().join(name);
    let mut slow = call("example.com/fns/slow:v1", &input, &out("slow"));
    slow["timeout"] = json!(0.5);
    let plan = json!([
        call("example.com/fns/echo:v1", &input, &out("echo")),
        call("example.com/fns/fail:v1", &input, &out("fail")),
        slow,
        call("example.com/fns/echo:v2", &input, &out("pod")),
        call("example.com/fns/echo:v3", &input, &out("v3")),
        call("example.com/unknown:v1", &input, &out("unknown")),
        call("registry.example.com/mirror/set-namespace:v0.4.1", &input, &out("mirror")),
        call(&format!("{CATALOG}set-namespace:latest"), &malformed, &out("malformed")),
        call("", &input, &out("empty")),
        call(&format!("{CATALOG}set-namespace:latest"), &big, &out("big")),
        call(&format!("{CATALOG}set-namespace:latest"), &huge, &out("huge")),
        {"op": "health", "service": ""},
        {"op": "health", "service": "evaluator.FunctionEvaluator"},
    ]);
    let started = Instant::now();
    let results = server.client(&plan);
    let codes: Vec<&str> = results
        .iter()
        .map(|result| result["code"].as_str().unwrap_or_default())
        .collect();
    assert_eq!(
        codes,
        [
            "OK",
            "INTERNAL",
            "DEADLINE_EXCEEDED",
            "NOT_FOUND",
            "NOT_FOUND",
            "NOT_FOUND",
            "OK",
            "INVALID_ARGUMENT",
            "INVALID_ARGUMENT",
            "RESOURCE_EXHAUSTED",
            "OUT_OF_RANGE",
            "OK",
            "OK"
        ],
        "{results:#?}"
    );
    // The slow function was stopped at its deadline, not waited for.
    assert!(
        started.elapsed() < Duration::from_secs(15),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(
        std::fs::read(out("echo.yaml")).unwrap(),
        std::fs::read(&input).unwrap()
    );
    assert_eq!(
        std::fs::read_to_string(out("echo.log")).unwrap(),
        "fn-echo: returning the input unchanged\n"
    );
    let fail = results[1]["details"].as_str().unwrap_or_default();
    assert!(
        fail.contains("structured results: [error] the input is not acceptable")
            && fail.contains("fn-fail: refusing"),
        "{fail}"
    );
    assert_eq!(
        std::fs::read(out("mirror.yaml")).unwrap(),
        std::fs::read(repo().join("fixtures/builtins/set-namespace/basicpipeline/expected.yaml"))
            .unwrap()
    );
    assert_eq!(results[11]["status"], "SERVING");
    assert_eq!(results[12]["status"], "SERVING");

    // The builtin's answer went to the function-result cache (written off
    // the call's path, so it may take a moment).
    let started = Instant::now();
    loop {
        let stats = Command::new(env!("CARGO_BIN_EXE_krender"))
            .args(["cache", "stats", "--cache-dir"])
            .arg(server.cache.path())
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&stats.stdout).into_owned();
        if text.contains("function results: ") && !text.contains("function results: 0 entries") {
            break;
        }
        assert!(started.elapsed() < Duration::from_secs(10), "{text}");
        std::thread::sleep(Duration::from_millis(50));
    }

    // A FunctionConfig added while serving is picked up.
    std::fs::write(
        configs.path().join("late.yml"),
        format!(
            "apiVersion: config.porch.kpt.dev/v1alpha1\nkind: FunctionConfig\nmetadata:\n  name: late\nspec:\n  image: example.com/fns/late\n  binaryExecutor:\n    path: {}\n",
            repo().join("fixtures/serve/fn-echo.sh").display()
        ),
    )
    .unwrap();
    let late = json!([call("example.com/fns/late:v9", &input, &out("late"))]);
    let started = Instant::now();
    while server.client(&late)[0]["code"] != "OK" {
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "the new FunctionConfig was not picked up"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn serve_bounds_concurrency_and_finishes_calls_on_sigterm() {
    if !client_available() {
        return;
    }
    let configs = tempfile::tempdir().unwrap();
    write_function_configs(configs.path());
    let server = Server::start(
        &[
            "--config",
            &configs.path().display().to_string(),
            "--max-concurrent",
            "1",
            "--max-queued",
            "0",
        ],
        // Long enough for the probes below to start under a loaded
        // machine (each is a Python process).
        &[("FN_SLOW_SECONDS", "6")],
    );
    let work = tempfile::tempdir().unwrap();
    let input = repo().join("fixtures/builtins/set-namespace/basicpipeline/input.yaml");
    let plan = json!([call(
        "example.com/fns/slow:v1",
        &input,
        &work.path().join("slow")
    )]);
    let plan_path = work.path().join("plan.json");
    std::fs::write(&plan_path, plan.to_string()).unwrap();
    let in_flight = Command::new("python3")
        .arg(repo().join("tests/serve-client.py"))
        .arg(&server.address)
        .arg(repo().join("proto"))
        .arg(&plan_path)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    // Wait until the slow call holds the only slot (its `sleep 6` runs):
    // then a second call is refused at once (no queue).
    let started = Instant::now();
    while !sleeping("6") {
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "the slow function did not start"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let refused = loop {
        let results = server.client(&json!([call(
            "example.com/fns/echo:v1",
            &input,
            &work.path().join("echo")
        )]));
        if results[0]["code"] == "RESOURCE_EXHAUSTED" {
            break results;
        }
        assert!(started.elapsed() < Duration::from_secs(15), "{results:?}");
    };
    assert_eq!(refused[0]["code"], "RESOURCE_EXHAUSTED");
    server.terminate();
    let address = server.address.clone();
    let output = in_flight.wait_with_output().unwrap();
    let results: Vec<Value> = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(
        results[0]["code"], "OK",
        "the call in flight was not answered: {results:?}"
    );
    let (code, stderr) = server.wait();
    assert_eq!(code, Some(0), "{stderr}");
    assert!(stderr.contains("krender serve: stopped"), "{stderr}");
    let after = client(&address, &json!([{"op": "health", "service": ""}]));
    assert_eq!(after[0]["code"], "UNAVAILABLE", "{after:?}");
}
