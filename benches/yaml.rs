//! YAML parse+emit throughput against serde_yaml, measured in the same run.
//!
//! The corpus is generated in code: a multi-document stream of Deployments
//! and ConfigMaps with comments, compact sequences, block scalars and quoted
//! strings, already in kpt's canonical formatting, so krender's round trip
//! must reproduce it byte for byte (asserted before timing). serde_yaml
//! parses to `Value` and writes with `to_string` (dropping comments); its
//! result is checked to parse back to equal values.
//!
//! The table's rows run on one thread (a pool of one), so they measure the
//! parser itself. A second table parses a long stream (50 MB by default,
//! `KRENDER_BENCH_STREAM_MB`) on one thread and on two, where `yaml::split`
//! cuts it into pieces, and checks both results are equal.
//!
//! Run: `cargo bench --bench yaml` (set `KRENDER_BENCH_DOCS` to resize).

#![allow(clippy::print_stdout)]

use std::hint::black_box;
use std::time::{Duration, Instant};

use krender::yaml::{Encoder, SeqIndent, parse_documents};

// The allocator the shipped binary uses (src/main.rs), for both sides.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn corpus(documents: usize) -> String {
    let mut out = String::new();
    for i in 0..documents {
        if i > 0 {
            out.push_str("---\n");
        }
        if i % 2 == 0 {
            out.push_str(&format!(
                "\
# Deployment number {i}
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web-{i} # the name
  namespace: team-{ns}
  labels:
    app: web
    tier: \"frontend\"
  annotations:
    note: 'a: quoted value'
spec:
  replicas: {replicas}
  selector:
    matchLabels:
      app: web
  template:
    metadata:
      labels:
        app: web
    spec:
      containers:
      - name: app
        image: registry.example.com/web:1.{i}.0
        args: [--port, \"8080\", --verbose]
        env:
        # proxy settings
        - name: HTTP_PROXY
          value: http://proxy:3128
        - name: FLAG
          value: \"true\"
        ports:
        - containerPort: 8080
          protocol: TCP
      - name: sidecar
        image: busybox
        command:
        - sh
        - -c
        - |
          while true; do
            echo tick {i}
            sleep 5
          done
",
                ns = i % 7,
                replicas = i % 5 + 1,
            ));
        } else {
            out.push_str(&format!(
                "\
apiVersion: v1
kind: ConfigMap
metadata:
  name: config-{i}
data:
  key: value-{i}
  number: \"{i}\"
  empty: \"\"
  script: |
    #!/bin/sh
    echo hello {i}
  # trailing comment
"
            ));
        }
    }
    out
}

fn krender_round_trip(text: &str) -> String {
    let documents = parse_documents(text).unwrap_or_else(|error| panic!("corpus parses: {error}"));
    let mut out = String::with_capacity(text.len());
    let mut encoder = Encoder::new(&mut out);
    encoder.set_seq_indent(SeqIndent::Compact);
    for document in &documents {
        encoder.encode(document);
    }
    out
}

fn serde_yaml_round_trip(text: &str) -> Vec<String> {
    use serde::Deserialize;
    serde_yaml::Deserializer::from_str(text)
        .map(|document| {
            let value = serde_yaml::Value::deserialize(document).expect("serde_yaml parses");
            serde_yaml::to_string(&value).expect("serde_yaml writes")
        })
        .collect()
}

/// Median wall time of `runs` runs of `f`.
fn measure(runs: usize, mut f: impl FnMut()) -> Duration {
    let mut times: Vec<Duration> = (0..runs)
        .map(|_| {
            let start = Instant::now();
            f();
            start.elapsed()
        })
        .collect();
    times.sort();
    times[times.len() / 2]
}

fn main() {
    let one = rayon::ThreadPoolBuilder::new()
        .num_threads(1)
        .build()
        .expect("a one-thread pool");
    one.install(single_thread_table);
    stream_table();
}

/// A long stream parsed on one thread and on two.
fn stream_table() {
    let megabytes: usize = std::env::var("KRENDER_BENCH_STREAM_MB")
        .ok()
        .and_then(|value| value.parse().ok())
        .unwrap_or(50);
    // The corpus averages about 530 bytes a document.
    let text = corpus(megabytes * 1_000_000 / 530);
    let size = text.len() as f64 / 1_000_000.0;
    let pool = |threads| {
        rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .expect("a pool")
    };
    let (one, two) = (pool(1), pool(2));
    let before = resident_bytes();
    let sequential = one.install(|| parse_documents(&text)).expect("parses");
    // What the parsed tree holds per input byte (the resident set's growth
    // while the nodes are alive; the input text was resident before).
    let node_bytes_per_input_byte =
        resident_bytes().saturating_sub(before) as f64 / text.len() as f64;
    let split = two.install(|| parse_documents(&text)).expect("parses");
    assert!(
        sequential == split,
        "the two-thread parse must equal the sequential one"
    );
    drop((sequential, split));
    let runs = 3;
    let on = |pool: &rayon::ThreadPool| {
        measure(runs, || {
            black_box(pool.install(|| parse_documents(black_box(&text))).ok());
        })
    };
    let (t1, t2) = (on(&one), on(&two));
    println!(
        "\nstream: {size:.1} MB, median of {runs} runs\n\
         | parse                | time (ms) |   MB/s | speed-up |\n\
         |----------------------|----------:|-------:|---------:|\n\
         | one thread           | {:9.1} | {:6.1} |    1.00x |\n\
         | two threads (pieces) | {:9.1} | {:6.1} | {:7.2}x |\n\
         parsed tree: {node_bytes_per_input_byte:.1} bytes of memory per input byte",
        t1.as_secs_f64() * 1000.0,
        size / t1.as_secs_f64(),
        t2.as_secs_f64() * 1000.0,
        size / t2.as_secs_f64(),
        t1.as_secs_f64() / t2.as_secs_f64(),
    );
}

/// This process's resident set in bytes (Linux `/proc/self/statm`; 0
/// elsewhere).
fn resident_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|statm| statm.split_whitespace().nth(1)?.parse::<u64>().ok())
        .map_or(0, |pages| pages * 4096)
}

/// Parse and emit against serde_yaml, on one thread.
fn single_thread_table() {
    let documents: usize = std::env::var("KRENDER_BENCH_DOCS")
        .ok()
        .and_then(|value| value.parse().ok())
        .unwrap_or(4000);
    let text = corpus(documents);
    let megabytes = text.len() as f64 / 1_000_000.0;

    // Correctness first: a fast wrong answer must not look good.
    assert!(
        krender_round_trip(&text) == text,
        "krender's round trip must reproduce the canonical corpus byte for byte"
    );
    let serde_output = serde_yaml_round_trip(&text);
    assert_eq!(serde_output.len(), documents);
    let reparsed: serde_yaml::Value =
        serde_yaml::from_str(&serde_output[documents - 1]).expect("serde_yaml output parses");
    assert!(reparsed.get("kind").is_some());

    let runs = 5;
    let ours = measure(runs, || {
        black_box(krender_round_trip(black_box(&text)));
    });
    let theirs = measure(runs, || {
        black_box(serde_yaml_round_trip(black_box(&text)));
    });
    let documents_parsed = parse_documents(&text).expect("corpus parses");
    let parse_only = measure(runs, || {
        black_box(parse_documents(black_box(&text)).ok());
    });
    let emit_only = measure(runs, || {
        let mut out = String::with_capacity(text.len());
        let mut encoder = Encoder::new(&mut out);
        for document in &documents_parsed {
            encoder.encode(document);
        }
        black_box(out);
    });
    let rate = |time: Duration| megabytes / time.as_secs_f64();
    println!(
        "corpus: {documents} documents, {megabytes:.2} MB, median of {runs} runs\n\
         | implementation                         | time (ms) |   MB/s | vs serde_yaml |\n\
         |----------------------------------------|----------:|-------:|--------------:|\n\
         | krender parse+emit (comments kept)     | {:9.1} | {:6.1} | {:12.2}x |\n\
         | serde_yaml Value + to_string (lossy)   | {:9.1} | {:6.1} | {:12.2}x |\n\
         | krender parse only                     | {:9.1} | {:6.1} |               |\n\
         | krender emit only                      | {:9.1} | {:6.1} |               |",
        ours.as_secs_f64() * 1000.0,
        rate(ours),
        rate(ours) / rate(theirs),
        theirs.as_secs_f64() * 1000.0,
        rate(theirs),
        1.0,
        parse_only.as_secs_f64() * 1000.0,
        rate(parse_only),
        emit_only.as_secs_f64() * 1000.0,
        rate(emit_only),
    );
}
