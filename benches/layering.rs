//! `krender layer render` on a generated site set: 10,000 documents over
//! three layers (100 global, 900 type, 8,000 site documents, 999 secrets and
//! the policy) with 1,000 substitutions, rendered cold (nothing is cached
//! between runs). Prints a table: the engine alone, and the whole command
//! path (YAML parse, render, encode). Then the same set as a directory of
//! files: a fresh `render_paths`, a [`LayeringSession`]'s first render, and
//! the session re-rendering after one global document is edited, with the
//! number of documents it rendered again.
//!
//! Run: `cargo bench --bench layering`. Every run checks its answer.

#![allow(clippy::print_stdout)]

use std::fmt::Write as _;
use std::sync::Arc;
use std::time::{Duration, Instant};

use krender::layering::{self, InputDocument, LayeringSession, Value, render, render_paths};

const N_GLOBAL: usize = 100;
const N_TYPE: usize = 900;
const N_SITE: usize = 8_000;
const N_SECRET: usize = 999;
const N_SUBSTITUTIONS: usize = 1_000;
const RUNS: usize = 5;

/// The corpus: each document with the file it goes in when the set is
/// written out as a directory (one file per global document, 100 documents
/// per file for the others).
fn documents() -> Vec<(String, String)> {
    let mut out = Vec::new();
    out.push((
        "policy.yaml".to_owned(),
        "schema: deckhand/LayeringPolicy/v1\nmetadata:\n  schema: metadata/Control/v1\n  name: policy\ndata:\n  layerOrder: [global, type, site]\n".to_owned(),
    ));
    for g in 0..N_GLOBAL {
        out.push((format!("global/app{g:03}.yaml"), global_document(g, 0)));
    }
    for t in 0..N_TYPE {
        let g = t % N_GLOBAL;
        out.push((
            format!("type/{:03}.yaml", t / 100),
            format!(
                "schema: armada/Chart/v1\nmetadata:\n  schema: metadata/Document/v1\n  name: app{g}-type{t}\n  labels: {{app: a{g}, type: t{t}, layer: type}}\n  layeringDefinition:\n    abstract: true\n    layer: type\n    parentSelector: {{app: a{g}, layer: global}}\n    actions: [{{method: merge, path: .values}}]\ndata:\n  values:\n    replicas: 3\n    pool: {{size: 20}}\n"
            ),
        ));
    }
    for s in 0..N_SITE {
        let t = s % N_TYPE;
        let g = t % N_GLOBAL;
        let mut text = String::new();
        let _ = write!(
            text,
            "schema: armada/Chart/v1\nmetadata:\n  schema: metadata/Document/v1\n  name: app{g}-site{s}\n  labels: {{site: s{s}}}\n  layeringDefinition:\n    abstract: false\n    layer: site\n    parentSelector: {{type: t{t}, layer: type}}\n    actions:\n      - {{method: merge, path: .}}\n      - {{method: replace, path: .values.image}}\n      - {{method: delete, path: .values.features}}\n"
        );
        if s < N_SUBSTITUTIONS {
            let secret = s % N_SECRET;
            let _ = write!(
                text,
                "  substitutions:\n    - src: {{schema: deckhand/Passphrase/v1, name: secret{secret}, path: .}}\n      dest: {{path: .values.endpoint, pattern: PASSWORD}}\n"
            );
        }
        let _ = write!(text, "data:\n  values:\n    image: app{g}:2.{s}\n");
        out.push((format!("site/{:03}.yaml", s / 100), text));
    }
    for secret in 0..N_SECRET {
        out.push((
            format!("secrets/{:03}.yaml", secret / 100),
            format!(
                "schema: deckhand/Passphrase/v1\nmetadata:\n  schema: metadata/Document/v1\n  name: secret{secret}\n  layeringDefinition: {{abstract: false, layer: site}}\ndata: pw{secret}\n"
            ),
        ));
    }
    out
}

/// Global document `g`; a revision other than 0 changes its chart name
/// (the edit of the incremental runs, which reaches every descendant).
fn global_document(g: usize, revision: usize) -> String {
    let revision = if revision == 0 {
        String::new()
    } else {
        format!("-rev{revision}")
    };
    format!(
        "schema: armada/Chart/v1\nmetadata:\n  schema: metadata/Document/v1\n  name: app{g}-global\n  labels: {{app: a{g}, layer: global}}\n  layeringDefinition: {{abstract: true, layer: global}}\ndata:\n  chart: app{g}{revision}\n  values:\n    replicas: 1\n    image: app{g}:1.0\n    endpoint: http://admin:PASSWORD@app{g}:8080\n    pool: {{size: 10, timeout: 30}}\n    features: [a, b, c]\n"
    )
}

/// The corpus as one multi-document YAML text.
fn corpus() -> String {
    let texts: Vec<String> = documents().into_iter().map(|(_, text)| text).collect();
    texts.join("---\n")
}

/// Writes the corpus as a directory tree; returns its root.
fn write_tree() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut files: std::collections::BTreeMap<String, Vec<String>> = Default::default();
    for (file, text) in documents() {
        files.entry(file).or_default().push(text);
    }
    for (file, texts) in files {
        let path = dir.path().join(file);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).expect("mkdir");
        }
        std::fs::write(path, texts.join("---\n")).expect("write");
    }
    dir
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
    incremental();
}

/// The directory form: `krender layer render DIR` from scratch, a
/// [`LayeringSession`]'s first render, and the session after editing one
/// global document (a different value each run). Every session output is
/// compared with a fresh render of the same files.
fn incremental() {
    let tree = write_tree();
    let root = tree.path().to_owned();
    let paths = vec![root.clone()];
    let (dir_min, dir_median, fresh) = time(|| render_paths(&paths).expect("renders"));
    let (cold_min, cold_median, (mut session, cold)) = time(|| {
        let mut session = LayeringSession::new(&paths).expect("session");
        let render = session.render().expect("renders");
        (session, render)
    });
    assert_eq!(cold.output_bytes, fresh.as_bytes(), "cold session output");

    let edited = root.join("global/app007.yaml");
    let mut run = 0;
    let (edit_min, edit_median, edit) = time(|| {
        run += 1;
        let text = global_document(7, run + 1);
        session.apply_change(&edited, Some(text.into_bytes()));
        session.render().expect("renders")
    });
    std::fs::write(&edited, global_document(7, run + 1)).expect("write");
    let fresh = render_paths(&paths).expect("renders");
    assert_eq!(edit.output_bytes, fresh.as_bytes(), "incremental output");
    assert!(fresh.contains(&format!("chart: app7-rev{}\n", run + 1)));
    // app7-global, its 9 type documents and their site documents.
    let descendants =
        1 + N_TYPE / N_GLOBAL + (0..N_SITE).filter(|s| s % N_TYPE % N_GLOBAL == 7).count();
    assert_eq!(
        edit.recomputed, descendants,
        "{:?}",
        edit.recomputed_documents
    );

    println!();
    println!(
        "directory form: {} files; incremental: edit one global document (app7-global)",
        documents()
            .into_iter()
            .map(|(file, _)| file)
            .collect::<std::collections::BTreeSet<_>>()
            .len()
    );
    println!("| run | min | median | documents rendered |");
    println!("|---|---|---|---|");
    println!(
        "| `render_paths` (fresh, files) | {dir_min:.2?} | {dir_median:.2?} | {} |",
        cold.recomputed
    );
    println!(
        "| session: first render (cold) | {cold_min:.2?} | {cold_median:.2?} | {} |",
        cold.recomputed
    );
    println!(
        "| session: after editing one global document | {edit_min:.2?} | {edit_median:.2?} | {} |",
        edit.recomputed
    );
}
