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
//! parser and the emitter themselves; the emit rows write already parsed
//! trees (krender's nodes, serde_yaml's `Value`s), and krender's parse and
//! emit allocations are counted. The parse rows include the frozen
//! reference parser (`yaml::reference`, the parser before its speed work).
//! The peak memory of a parse per input byte is measured in child
//! processes, for both parsers, with the heap bytes the parsed documents
//! hold (the peak also pays the allocator's rounding to its size classes).
//! Rows time their work only: results are dropped after the clock stops.
//! A second table parses a long stream (50 MB by
//! default, `KRENDER_BENCH_STREAM_MB`) on one thread and on two, where
//! `yaml::split` cuts it into pieces, and writes it back on one thread and
//! on two (the encoder writes long lists in chunks), as a stream and as one
//! ResourceList of its documents; it checks the results are equal.
//!
//! Run: `cargo bench --bench yaml` (set `KRENDER_BENCH_DOCS` to resize;
//! `KRENDER_BENCH_PARSE_ONLY=<runs>` only parses, for instruction counts).

#![allow(clippy::print_stdout)]

use std::alloc::{GlobalAlloc, Layout};
use std::hint::black_box;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use krender::yaml::{Encoder, Node, SeqIndent, SplicedItem, parse_documents, to_string_spliced};

// The allocator the shipped binary uses (src/main.rs), for both sides,
// counting allocations while `COUNTING` is set (the emit table's
// allocations per document).
#[global_allocator]
static GLOBAL: Counting = Counting;

static COUNTING: AtomicBool = AtomicBool::new(false);
static ALLOCATIONS: AtomicU64 = AtomicU64::new(0);
/// Heap bytes allocated and not freed while `COUNTING` is set.
static HELD: AtomicI64 = AtomicI64::new(0);

struct Counting;

// SAFETY: every call is passed to mimalloc unchanged; the counter is a side
// effect only.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count();
        held(layout.size() as i64);
        // SAFETY: the caller's contract is passed on.
        unsafe { mimalloc::MiMalloc.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        held(-(layout.size() as i64));
        // SAFETY: the caller's contract is passed on.
        unsafe { mimalloc::MiMalloc.dealloc(ptr, layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        count();
        held(layout.size() as i64);
        // SAFETY: the caller's contract is passed on.
        unsafe { mimalloc::MiMalloc.alloc_zeroed(layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, size: usize) -> *mut u8 {
        count();
        held(size as i64 - layout.size() as i64);
        // SAFETY: the caller's contract is passed on.
        unsafe { mimalloc::MiMalloc.realloc(ptr, layout, size) }
    }
}

fn count() {
    if COUNTING.load(Ordering::Relaxed) {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
    }
}

fn held(bytes: i64) {
    if COUNTING.load(Ordering::Relaxed) {
        HELD.fetch_add(bytes, Ordering::Relaxed);
    }
}

/// How many allocations (reallocations included) `f` makes.
fn allocations(f: impl FnOnce()) -> u64 {
    ALLOCATIONS.store(0, Ordering::Relaxed);
    COUNTING.store(true, Ordering::Relaxed);
    f();
    COUNTING.store(false, Ordering::Relaxed);
    ALLOCATIONS.load(Ordering::Relaxed)
}

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
/// The median time of `runs` calls of `f`. What `f` returns is dropped
/// after the clock stops: a row times the parse (or the write), not the
/// freeing of what it built, which would otherwise run on one thread after
/// a two-thread parse.
fn measure<T>(runs: usize, mut f: impl FnMut() -> T) -> Duration {
    let mut times: Vec<Duration> = (0..runs)
        .map(|_| {
            let start = Instant::now();
            let output = black_box(f());
            let elapsed = start.elapsed();
            drop(output);
            elapsed
        })
        .collect();
    times.sort();
    times[times.len() / 2]
}

fn main() {
    // Parse only, `runs` times, with no table: for counting instructions
    // (`valgrind --tool=callgrind`), which a busy machine does not skew.
    if let Some(runs) = std::env::var("KRENDER_BENCH_PARSE_ONLY")
        .ok()
        .and_then(|runs| runs.parse::<usize>().ok())
    {
        let text = corpus(4000);
        // `KRENDER_BENCH_PARSER=reference`: the frozen pre-rewrite parser.
        let reference = std::env::var("KRENDER_BENCH_PARSER").is_ok_and(|p| p == "reference");
        let mut held = 0;
        for _ in 0..runs {
            HELD.store(0, Ordering::Relaxed);
            COUNTING.store(true, Ordering::Relaxed);
            let parsed = if reference {
                krender::yaml::reference::parse_documents(black_box(&text))
            } else {
                krender::yaml::parse_documents_in_pieces(black_box(&text), 1)
            };
            COUNTING.store(false, Ordering::Relaxed);
            held = HELD.load(Ordering::Relaxed);
            black_box(parsed.ok());
        }
        // For `peak_memory_rows`: this process's peak resident set, and the
        // heap bytes the parsed documents hold (before the allocator's
        // rounding to its size classes).
        println!(
            "peak {} input {} held {held}",
            peak_resident_bytes(),
            text.len()
        );
        return;
    }
    let one = rayon::ThreadPoolBuilder::new()
        .num_threads(1)
        .build()
        .expect("a one-thread pool");
    one.install(single_thread_table);
    print!("\n{}", peak_memory_rows());
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
    let sequential = one.install(|| parse_documents(&text)).expect("parses");
    let split = two.install(|| parse_documents(&text)).expect("parses");
    assert!(
        sequential == split,
        "the two-thread parse must equal the sequential one"
    );
    drop(split);
    let runs = 3;
    let on = |pool: &rayon::ThreadPool| {
        measure(runs, || {
            pool.install(|| parse_documents(black_box(&text))).ok()
        })
    };
    let (t1, t2) = (on(&one), on(&two));
    // The parsed stream written back: as a stream, and as one ResourceList
    // whose items are the documents' roots (a render's `-o stdout`).
    let list = list_wrapper();
    let emits = |pool: &rayon::ThreadPool| {
        let stream = pool.install(|| emit_stream(&sequential));
        let items = pool.install(|| emit_list(&list, &sequential));
        (stream, items)
    };
    let (stream1, list1) = emits(&one);
    assert!(
        stream1 == text,
        "the stream must be written back byte for byte"
    );
    assert!(
        emits(&two) == (stream1, list1),
        "the two-thread emit must equal the sequential one"
    );
    let emit_on = |pool: &rayon::ThreadPool, list_form: bool| {
        measure(runs, || {
            pool.install(|| {
                if list_form {
                    emit_list(&list, black_box(&sequential))
                } else {
                    emit_stream(black_box(&sequential))
                }
            })
        })
    };
    let (s1, s2) = (emit_on(&one, false), emit_on(&two, false));
    let (l1, l2) = (emit_on(&one, true), emit_on(&two, true));
    let row = |name: &str, time: Duration, base: Duration| {
        format!(
            "| {name:<20} | {:9.1} | {:6.1} | {:7.2}x |\n",
            time.as_secs_f64() * 1000.0,
            size / time.as_secs_f64(),
            base.as_secs_f64() / time.as_secs_f64(),
        )
    };
    println!(
        "\nstream: {size:.1} MB, median of {runs} runs\n\
         | parse                | time (ms) |   MB/s | speed-up |\n\
         |----------------------|----------:|-------:|---------:|\n\
         {}{}\
         | emit                 |           |        |          |\n\
         {}{}{}{}",
        row("one thread", t1, t1),
        row("two threads (pieces)", t2, t1),
        row("stream, one thread", s1, s1),
        row("stream, two threads", s2, s1),
        row("list, one thread", l1, l1),
        row("list, two threads", l2, l1),
    );
}

/// `documents` written as one stream (in chunks on rayon when it has more
/// than one thread).
fn emit_stream(documents: &[Node]) -> String {
    let mut out = String::new();
    Encoder::new(&mut out).encode_all(documents);
    out
}

/// A ResourceList document whose `items:` is a block sequence (its one
/// placeholder item is replaced): a flow `[]` would write the items in flow
/// style, which is neither what a render writes nor chunked.
fn list_wrapper() -> Node {
    let text = "apiVersion: config.kubernetes.io/v1\nkind: ResourceList\nitems:\n- placeholder\n";
    parse_documents(text)
        .ok()
        .and_then(|mut documents| documents.pop())
        .expect("the wrapper parses")
}

/// `documents`' roots written as the items of `list` (see [`list_wrapper`]).
fn emit_list(list: &Node, documents: &[Node]) -> String {
    let items: Vec<SplicedItem<'_>> = documents
        .iter()
        .map(|document| SplicedItem {
            node: document.root(),
            edits: &[],
        })
        .collect();
    let slot = list.root().get("items").expect("the wrapper has items");
    to_string_spliced(list, slot, &items, SeqIndent::Compact)
}

/// This process's peak resident set in bytes (Linux `VmHWM` in
/// `/proc/self/status`; 0 elsewhere).
fn peak_resident_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            let line = status.lines().find(|line| line.starts_with("VmHWM:"))?;
            line.split_whitespace().nth(1)?.parse::<u64>().ok()
        })
        .map_or(0, |kib| kib * 1024)
}

/// Peak memory of parsing the 2.1 MB corpus, per input byte, for the live
/// and the reference parser: each parse runs in a fresh child process (this
/// bench in its parse-only mode), and a child that only builds the corpus
/// is the floor subtracted. A process's peak is what a render pays; freed
/// memory an earlier measurement left behind cannot hide in it.
fn peak_memory_rows() -> String {
    let child = |runs: usize, parser: &str| -> Option<(f64, f64, f64)> {
        let output = std::process::Command::new(std::env::current_exe().ok()?)
            .env("KRENDER_BENCH_PARSE_ONLY", runs.to_string())
            .env("KRENDER_BENCH_PARSER", parser)
            .output()
            .ok()?;
        let text = String::from_utf8(output.stdout).ok()?;
        let mut words = text.split_whitespace();
        let peak = words.nth(1)?.parse::<f64>().ok()?;
        let input = words.nth(1)?.parse::<f64>().ok()?;
        let held = words.nth(1)?.parse::<f64>().ok()?;
        Some((peak, input, held))
    };
    let Some((floor, input, _)) = child(0, "live") else {
        return "peak memory: not measured (the child process failed)\n".to_owned();
    };
    ["live", "reference"]
        .iter()
        .map(|parser| match child(1, parser) {
            Some((peak, _, held)) => format!(
                "peak memory, {parser} parser: {:.1} bytes per input byte; \
                 heap the documents hold: {:.1}\n",
                (peak - floor) / input,
                held / input
            ),
            None => format!("peak memory, {parser} parser: not measured\n"),
        })
        .collect()
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
    let ours = measure(runs, || krender_round_trip(black_box(&text)));
    let theirs = measure(runs, || serde_yaml_round_trip(black_box(&text)));
    let documents_parsed = parse_documents(&text).expect("corpus parses");
    let parse_only = measure(runs, || parse_documents(black_box(&text)).ok());
    // The parser as it was before its speed work (the differential tests'
    // reference): the before of the parse row, measured in the same run.
    let reference_parse = measure(runs, || {
        krender::yaml::reference::parse_documents(black_box(&text)).ok()
    });
    let emit = |documents: &[Node]| {
        let mut out = String::with_capacity(text.len());
        let mut encoder = Encoder::new(&mut out);
        for document in documents {
            encoder.encode(document);
        }
        out
    };
    let emit_only = measure(runs, || emit(black_box(&documents_parsed)));
    let emit_allocations = allocations(|| {
        black_box(emit(&documents_parsed));
    });
    let parse_allocations = allocations(|| {
        black_box(parse_documents(black_box(&text)).ok());
    });
    let serde_parse = |text: &str| -> Vec<serde_yaml::Value> {
        use serde::Deserialize;
        serde_yaml::Deserializer::from_str(text)
            .map(|document| serde_yaml::Value::deserialize(document).expect("serde_yaml parses"))
            .collect()
    };
    let serde_values = serde_parse(&text);
    let serde_parse_only = measure(runs, || serde_parse(black_box(&text)));
    let serde_emit_only = measure(runs, || {
        for value in black_box(&serde_values) {
            black_box(serde_yaml::to_string(value).expect("serde_yaml writes"));
        }
    });
    let rate = |time: Duration| megabytes / time.as_secs_f64();
    println!(
        "corpus: {documents} documents, {megabytes:.2} MB, median of {runs} runs\n\
         | implementation                         | time (ms) |   MB/s | vs serde_yaml |\n\
         |----------------------------------------|----------:|-------:|--------------:|\n\
         | krender parse+emit (comments kept)     | {:9.1} | {:6.1} | {:12.2}x |\n\
         | serde_yaml Value + to_string (lossy)   | {:9.1} | {:6.1} | {:12.2}x |\n\
         | krender parse only                     | {:9.1} | {:6.1} | {:12.2}x |\n\
         | serde_yaml parse only (to Value)       | {:9.1} | {:6.1} | {:12.2}x |\n\
         | krender parse, reference (before)      | {:9.1} | {:6.1} | {:12.2}x |\n\
         | krender emit only                      | {:9.1} | {:6.1} | {:12.2}x |\n\
         | serde_yaml emit only (to_string)       | {:9.1} | {:6.1} | {:12.2}x |\n\
         krender emit: {emit_allocations} allocations ({:.2} per document; the output \
         buffer is presized)\n\
         krender parse: {parse_allocations} allocations ({:.1} per document)",
        ours.as_secs_f64() * 1000.0,
        rate(ours),
        rate(ours) / rate(theirs),
        theirs.as_secs_f64() * 1000.0,
        rate(theirs),
        1.0,
        parse_only.as_secs_f64() * 1000.0,
        rate(parse_only),
        rate(parse_only) / rate(serde_parse_only),
        serde_parse_only.as_secs_f64() * 1000.0,
        rate(serde_parse_only),
        1.0,
        reference_parse.as_secs_f64() * 1000.0,
        rate(reference_parse),
        rate(reference_parse) / rate(serde_parse_only),
        emit_only.as_secs_f64() * 1000.0,
        rate(emit_only),
        rate(emit_only) / rate(serde_emit_only),
        serde_emit_only.as_secs_f64() * 1000.0,
        rate(serde_emit_only),
        1.0,
        emit_allocations as f64 / documents as f64,
        parse_allocations as f64 / documents as f64,
    );
}
