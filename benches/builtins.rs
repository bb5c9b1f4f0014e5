//! Builtins against the same functions run as child processes (the
//! `krender` binary's `fn eval -`, which does the same work plus a process
//! spawn and a pipe round trip per call), printed as ratio tables:
//!
//! 1. set-namespace + set-labels over 10,000 resources, on the wire (bytes
//!    in, bytes out) in process;
//! 2. every builtin that runs from a `key=value` config, one call over a
//!    1,000-resource package (plus its package context object), native (nodes in, nodes out: what `fn
//!    render` does) against the child process. The target is a ratio of at
//!    least 5 for each.
//!
//! Builtin results are asserted before timing (the first table's counts,
//! the second's exit codes), so a fast wrong answer cannot look good. The
//! exec side needs a built binary (`cargo build --release`); without one,
//! or if it fails, its row says why.
//!
//! Run: `cargo bench --bench builtins` (`KRENDER_BENCH_RESOURCES` resizes
//! the first table, `KRENDER_BENCH_PACKAGE` the second).

#![allow(clippy::print_stdout)] // A bench reports on stdout.

use std::hint::black_box;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use krender::runtime::builtin::Builtin;
use krender::runtime::exec::run_process;
use krender::yaml::{Node, parse_document};

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
    selector:
      matchLabels:
        app: web
    template:
      metadata:
        labels:
          app: web
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

/// One `fn eval -` child process: `function` on `input` with `args`.
fn exec_call(binary: &str, input: &str, function: &str, args: &[&str]) -> Result<Vec<u8>, String> {
    let mut argv: Vec<String> = ["fn", "eval", "-", "--image"]
        .iter()
        .map(|arg| (*arg).to_owned())
        .collect();
    argv.push(format!(
        "ghcr.io/kptdev/krm-functions-catalog/{function}:latest"
    ));
    if !args.is_empty() {
        argv.push("--".to_owned());
        argv.extend(args.iter().map(|arg| (*arg).to_owned()));
    }
    run_process(
        binary,
        &argv,
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
}

fn exec_pipeline(binary: &str, list: &str) -> Result<Vec<u8>, String> {
    let first = exec_call(binary, list, "set-namespace", &["namespace=staging"])?;
    exec_call(
        binary,
        &String::from_utf8_lossy(&first),
        "set-labels",
        &["tier=backend"],
    )
}

/// The builtins of the second table and their `key=value` configs.
const PER_FUNCTION: &[(&str, &[&str])] = &[
    ("set-namespace", &["namespace=staging"]),
    ("set-labels", &["tier=backend"]),
    ("set-annotations", &["team=payments"]),
    ("set-image", &["name=nginx", "newTag=2.0"]),
    ("search-replace", &["by-value=web-1", "put-value=front-1"]),
    ("ensure-name-substring", &["prepend=dev-"]),
    (
        "delete-annotations",
        &["annotationKeys=internal.config.kubernetes.io/index"],
    ),
    ("remove-local-config-resources", &[]),
    ("apply-setters", &["tier=backend"]),
    ("list-setters", &[]),
    ("kubeconform", &[]),
    ("format", &[]),
    ("no-op", &[]),
    // Renames the one object named `web-1` (the function renames the
    // objects named after the package placeholder, usually a few) and
    // walks every resource for references to it.
    ("set-name-prefix", &["oldPrefix=web-1", "prefix=shop"]),
];

/// The package context object (`kptfile.kpt.dev`) kpt adds to a package,
/// which set-name-prefix reads its default prefix from.
const PACKAGE_CONTEXT: &str = "\
- apiVersion: v1
  kind: ConfigMap
  metadata:
    name: kptfile.kpt.dev
    annotations:
      config.kubernetes.io/local-config: \"true\"
      internal.config.kubernetes.io/path: 'package-context.yaml'
      internal.config.kubernetes.io/index: '0'
  data:
    name: shop
";

/// The function config `fn eval` builds from `key=value` arguments.
fn config_map(args: &[&str]) -> Option<Node> {
    if args.is_empty() {
        return None;
    }
    let mut text =
        String::from("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: function-input\ndata:\n");
    for arg in args {
        let (key, value) = arg.split_once('=').unwrap_or((arg, ""));
        text.push_str(&format!("  {key}: {value:?}\n"));
    }
    parse_document(&text).ok().flatten().map(Node::into_root)
}

/// Each builtin once over a package: native against a child process.
fn per_function_table(binary: Option<&str>, resources: usize) {
    let list = resource_list(resources) + PACKAGE_CONTEXT;
    let items: Vec<Node> = parse_document(&list)
        .ok()
        .flatten()
        .map(Node::into_root)
        .and_then(|root| root.get("items").cloned())
        .map(|items| items.content.into())
        .unwrap_or_default();
    assert_eq!(items.len(), resources + 1, "the package did not parse");
    println!();
    println!("one call over {resources} resources: native builtin against a child process");
    println!(
        "{:<31} {:>12} {:>14} {:>8}",
        "function", "native", "child process", "ratio"
    );
    for (name, args) in PER_FUNCTION {
        let Some(builtin) = Builtin::from_name(name) else {
            println!("{name:<31} (no builtin)");
            continue;
        };
        let config = config_map(args);
        let run = || {
            builtin
                .run_native(items.clone(), config.as_ref(), Duration::from_secs(600))
                .map(|outcome| outcome.exit_code)
        };
        match run() {
            Ok(0) => {}
            other => {
                println!("{name:<31} native run failed: {other:?}");
                continue;
            }
        }
        // The clone of the items is part of what the hydrator hands over.
        let native = time(5, run);
        let exec = match binary {
            Some(binary) => exec_call(binary, &list, name, args)
                .map(|_| time(3, || exec_call(binary, &list, name, args))),
            None => Err("no release binary".to_owned()),
        };
        match exec {
            Ok(exec) => println!(
                "{name:<31} {native:>12.1?} {exec:>14.1?} {:>8.1}",
                exec.as_secs_f64() / native.as_secs_f64().max(f64::MIN_POSITIVE)
            ),
            Err(reason) => println!(
                "{name:<31} {native:>12.1?} {:>14} ({})",
                "n/a",
                reason.lines().next().unwrap_or_default()
            ),
        }
    }
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

    let package: usize = std::env::var("KRENDER_BENCH_PACKAGE")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(1_000);
    let binary = binary
        .is_file()
        .then(|| binary.to_string_lossy().into_owned());
    per_function_table(binary.as_deref(), package);
}
