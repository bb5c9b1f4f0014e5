//! `krender layer render` on a generated site set: 10,000 documents over
//! three layers (100 global, 900 type, 8,000 site documents, 999 secrets and
//! the policy) with 1,000 substitutions, rendered cold (nothing is cached
//! between runs). Prints a table: the engine alone, and the whole command
//! path (YAML parse, render, encode).
//!
//! Run: `cargo bench --bench layering`. Every run checks its answer.

#![allow(clippy::print_stdout)]

use std::fmt::Write as _;
use std::sync::Arc;
use std::time::{Duration, Instant};

use krender::layering::{self, InputDocument, Value, render};

const N_GLOBAL: usize = 100;
const N_TYPE: usize = 900;
const N_SITE: usize = 8_000;
const N_SECRET: usize = 999;
const N_SUBSTITUTIONS: usize = 1_000;
const RUNS: usize = 5;

/// The corpus as multi-document YAML text.
fn corpus() -> String {
    let mut out = String::new();
    let _ = write!(
        out,
        "schema: deckhand/LayeringPolicy/v1\nmetadata:\n  schema: metadata/Control/v1\n  name: policy\ndata:\n  layerOrder: [global, type, site]\n"
    );
    for g in 0..N_GLOBAL {
        let _ = write!(
            out,
            "---\nschema: armada/Chart/v1\nmetadata:\n  schema: metadata/Document/v1\n  name: app{g}-global\n  labels: {{app: a{g}, layer: global}}\n  layeringDefinition: {{abstract: true, layer: global}}\ndata:\n  chart: app{g}\n  values:\n    replicas: 1\n    image: app{g}:1.0\n    endpoint: http://admin:PASSWORD@app{g}:8080\n    pool: {{size: 10, timeout: 30}}\n    features: [a, b, c]\n"
        );
    }
    for t in 0..N_TYPE {
        let g = t % N_GLOBAL;
        let _ = write!(
            out,
            "---\nschema: armada/Chart/v1\nmetadata:\n  schema: metadata/Document/v1\n  name: app{g}-type{t}\n  labels: {{app: a{g}, type: t{t}, layer: type}}\n  layeringDefinition:\n    abstract: true\n    layer: type\n    parentSelector: {{app: a{g}, layer: global}}\n    actions: [{{method: merge, path: .values}}]\ndata:\n  values:\n    replicas: 3\n    pool: {{size: 20}}\n"
        );
    }
    for s in 0..N_SITE {
        let t = s % N_TYPE;
        let g = t % N_GLOBAL;
        let _ = write!(
            out,
            "---\nschema: armada/Chart/v1\nmetadata:\n  schema: metadata/Document/v1\n  name: app{g}-site{s}\n  labels: {{site: s{s}}}\n  layeringDefinition:\n    abstract: false\n    layer: site\n    parentSelector: {{type: t{t}, layer: type}}\n    actions:\n      - {{method: merge, path: .}}\n      - {{method: replace, path: .values.image}}\n      - {{method: delete, path: .values.features}}\n"
        );
        if s < N_SUBSTITUTIONS {
            let secret = s % N_SECRET;
            let _ = write!(
                out,
                "  substitutions:\n    - src: {{schema: deckhand/Passphrase/v1, name: secret{secret}, path: .}}\n      dest: {{path: .values.endpoint, pattern: PASSWORD}}\n"
            );
        }
        let _ = write!(out, "data:\n  values:\n    image: app{g}:2.{s}\n");
    }
    for secret in 0..N_SECRET {
        let _ = write!(
            out,
            "---\nschema: deckhand/Passphrase/v1\nmetadata:\n  schema: metadata/Document/v1\n  name: secret{secret}\n  layeringDefinition: {{abstract: false, layer: site}}\ndata: pw{secret}\n"
        );
    }
    out
}

/// Checks the rendered set: every concrete document, and a substituted one.
fn check(inputs: &[InputDocument], rendered: &[layering::RenderedDocument]) {
    assert_eq!(rendered.len(), N_SITE + N_SECRET, "concrete documents");
    let site7 = rendered
        .iter()
        .find(|d| {
            inputs[d.input].body.get_path(&["metadata", "name"])
                == Some(&Value::Str("app7-site7".into()))
        })
        .expect("app7-site7 rendered");
    let values = site7.data.get("values").expect("values");
    assert_eq!(
        values.get("endpoint"),
        Some(&Value::Str("http://admin:pw7@app7:8080".into()))
    );
    assert_eq!(values.get("replicas"), Some(&Value::Int(3)));
    assert_eq!(values.get("image"), Some(&Value::Str("app7:2.7".into())));
    assert_eq!(values.get("features"), None);
}

fn time<T>(mut f: impl FnMut() -> T) -> (Duration, Duration, T) {
    let mut times = Vec::new();
    let mut last = None;
    for _ in 0..RUNS {
        let start = Instant::now();
        last = Some(f());
        times.push(start.elapsed());
    }
    times.sort();
    let Some(last) = last else {
        unreachable!("RUNS > 0")
    };
    (times[0], times[times.len() / 2], last)
}

fn main() {
    let text = corpus();
    let file: Arc<str> = Arc::from("bench.yaml");
    let loaded = match layering::load_text(&text, &file) {
        Ok(loaded) => loaded,
        Err(error) => {
            println!("cannot parse the corpus: {error}");
            return;
        }
    };
    let inputs: Vec<InputDocument> = loaded.iter().map(|l| l.input.clone()).collect();
    assert_eq!(inputs.len(), 1 + N_GLOBAL + N_TYPE + N_SITE + N_SECRET);

    let (engine_min, engine_median, rendered) = time(|| render(&inputs).expect("renders"));
    check(&inputs, &rendered);

    let (full_min, full_median, output) = time(|| {
        let loaded = layering::load_text(&text, &file).expect("parses");
        let (mut nodes, inputs): (Vec<_>, Vec<InputDocument>) =
            loaded.into_iter().map(|l| (l.node, l.input)).unzip();
        let rendered = render(&inputs).expect("renders");
        layering::encode_output(&mut nodes, &rendered)
    });
    assert!(output.contains("endpoint: http://admin:pw7@app7:8080"));

    println!(
        "layering: {} documents ({} global, {} type, {} site, {} secrets, 1 policy), {} substitutions, {} cold runs, {} rayon threads",
        inputs.len(),
        N_GLOBAL,
        N_TYPE,
        N_SITE,
        N_SECRET,
        N_SUBSTITUTIONS,
        RUNS,
        rayon::current_num_threads()
    );
    println!("| phase | min | median |");
    println!("|---|---|---|");
    println!("| render (engine, decoded input) | {engine_min:.2?} | {engine_median:.2?} |");
    println!(
        "| parse + render + encode ({} KiB in) | {full_min:.2?} | {full_median:.2?} |",
        text.len() / 1024
    );
}
