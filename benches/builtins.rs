//! set-namespace + set-labels over 10,000 resources: the in-process builtins
//! against the same two functions run as child processes (the `krender`
//! binary's `fn eval -`, which does the same work plus a process spawn and a
//! pipe round trip per call), printed as a ratio table.
//!
//! The builtin result is asserted before timing (namespace and label counts
//! in the results), so a fast wrong answer cannot look good. The exec side
//! needs a built binary (`cargo build --release`); without one, or if it
//! fails, its row says why.
//!
//! Run: `cargo bench --bench builtins` (`KRENDER_BENCH_RESOURCES` resizes).

#![allow(clippy::print_stdout)] // A bench reports on stdout.

use std::hint::black_box;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use krender::runtime::builtin::Builtin;
use krender::runtime::exec::run_process;

fn resource_list(resources: usize) -> String {
    let mut out = String::from("apiVersion: config.kubernetes.io/v1\nkind: ResourceList\nitems:\n");
    for i in 0..resources {
        out.push_str(&format!(
            "\
- apiVersion: apps/v1
  kind: Deployment
  metadata:
    name: web-{i}
    annotations:
      internal.config.kubernetes.io/path: 'deploy-{i}.yaml'
      internal.config.kubernetes.io/index: '0'
  spec:
    replicas: 3 # keep me
    template:
      spec:
        containers:
        - name: web
          image: nginx:1.{i}
"
        ));
    }
    out
}

fn with_config(list: &str, data: &str) -> String {
    format!(
        "{list}functionConfig:\n  apiVersion: v1\n  kind: ConfigMap\n  metadata:\n    name: function-input\n  data: {{{data}}}\n"
    )
}

/// Replaces the functionConfig of an output list for the next step.
fn next_input(output: &[u8], data: &str) -> String {
    let text = String::from_utf8_lossy(output);
    let items_only = match text.find("\nfunctionConfig:") {
        Some(end) => &text[..=end],
        None => &text,
    };
    with_config(items_only, data)
}

fn builtin_pipeline(list: &str) -> Vec<u8> {
    let first = Builtin::SetNamespace
        .evaluate_bytes(with_config(list, "namespace: staging").as_bytes(), None);
    let second = Builtin::SetLabels
        .evaluate_bytes(next_input(&first.stdout, "tier: backend").as_bytes(), None);
    second.stdout
}

fn exec_pipeline(binary: &str, list: &str) -> Result<Vec<u8>, String> {
    let run = |input: String, image: &str, arg: &str| {
        run_process(
            binary,
            &[
                "fn".to_owned(),
                "eval".to_owned(),
                "-".to_owned(),
                "--image".to_owned(),
                format!("ghcr.io/kptdev/krm-functions-catalog/{image}:latest"),
                "--".to_owned(),
                arg.to_owned(),
            ],
            input.as_bytes(),
            Duration::from_secs(600),
            &krender::runtime::cancel::Cancel::default(),
        )
        .map_err(|err| err.to_string())
        .and_then(|response| {
            if response.exit_code == 0 {
                Ok(response.stdout)
            } else {
                Err(String::from_utf8_lossy(&response.stderr).into_owned())
            }
        })
    };
    let first = run(list.to_owned(), "set-namespace", "namespace=staging")?;
    run(
        String::from_utf8_lossy(&first).into_owned(),
        "set-labels",
        "tier=backend",
    )
}

fn time<T>(runs: usize, mut f: impl FnMut() -> T) -> Duration {
    let started = Instant::now();
    for _ in 0..runs {
        black_box(f());
    }
    started.elapsed() / runs.max(1) as u32
}

fn main() {
    let resources: usize = std::env::var("KRENDER_BENCH_RESOURCES")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(10_000);
    let list = resource_list(resources);

    let output = String::from_utf8(builtin_pipeline(&list)).unwrap_or_default();
    let namespaced = output.matches("namespace: staging").count();
    assert!(namespaced >= resources, "set-namespace missed resources");
    let labels = resources * 3;
    assert!(
        output.contains(&format!("set {labels} labels in total")),
        "set-labels count wrong"
    );

    let builtin = time(3, || builtin_pipeline(&list));
    let binary = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/release/krender");
    let exec = if binary.is_file() {
        let binary = binary.to_string_lossy().into_owned();
        match exec_pipeline(&binary, &list) {
            Ok(_) => Ok(time(3, || exec_pipeline(&binary, &list))),
            Err(err) => Err(err),
        }
    } else {
        Err(format!("{} not built", binary.display()))
    };

    println!("set-namespace + set-labels, {resources} resources");
    println!("{:<10} {:>12} {:>8}", "runtime", "per call", "ratio");
    println!("{:<10} {:>12.1?} {:>8}", "builtin", builtin, "1.00");
    match exec {
        Ok(exec) => println!(
            "{:<10} {:>12.1?} {:>8.2}",
            "exec",
            exec,
            exec.as_secs_f64() / builtin.as_secs_f64().max(f64::MIN_POSITIVE)
        ),
        Err(reason) => println!("{:<10} {:>12} ({})", "exec", "n/a", reason.trim()),
    }
}
