//! Hostile input, generated: the Kptfile decoder, the Starlark builtin's
//! conversions and layering answer any document with a value or an error,
//! never a panic (the fuzz targets in `fuzz/` explore the same code with
//! coverage guidance; these run in `cargo test`).

use std::sync::Arc;

use krender::pkg::kptfile::Kptfile;
use krender::runtime::builtin::BuiltinEvaluator;
use krender::runtime::{Evaluator, FunctionRequest, FunctionTarget};
use proptest::prelude::*;

/// A YAML value of bounded size: scalars of every resolved kind, flow and
/// block collections, anchors and aliases (some to unknown anchors).
fn value(depth: u32) -> BoxedStrategy<String> {
    let scalar = prop::sample::select(vec![
        "x",
        "1",
        "-0.5",
        "true",
        "null",
        "~",
        "''",
        "\"a b\"",
        "0x1F",
        "on",
        "[]",
        "{}",
        "*a",
        "&a v",
        "!!str 3",
        "2001-12-14",
        "'\u{e9}'",
        "|\n  text",
    ])
    .prop_map(str::to_owned);
    if depth == 0 {
        return scalar.boxed();
    }
    let inner = value(depth - 1);
    prop_oneof![
        3 => scalar,
        1 => prop::collection::vec(inner.clone(), 0..4).prop_map(|items| format!("[{}]", items.join(", "))),
        1 => prop::collection::vec((prop::sample::select(vec!["a", "b", "metadata", "name", "data", "items"]), inner), 0..4)
            .prop_map(|pairs| {
                let body: Vec<String> = pairs.iter().map(|(k, v)| format!("{k}: {v}")).collect();
                format!("{{{}}}", body.join(", "))
            }),
    ]
    .boxed()
}

/// A Kptfile-shaped document: mostly well-formed, with any value in a few
/// fields (a wrong kind, an alias, a bad version).
fn kptfile_text() -> impl Strategy<Value = String> {
    let field_value = prop_oneof![
        4 => prop::sample::select(vec!["set-labels", "sed", "fn.yaml", "'a b'", "gcr.io/x/y:v1"]).prop_map(str::to_owned),
        1 => value(2),
    ];
    (
        prop::sample::select(vec!["kpt.dev/v1", "kpt.dev/v1", "kpt.dev/v1", "kpt.dev/v1alpha2", "v1", "kpt.dev/v9"]),
        prop::sample::select(vec!["Kptfile", "Kptfile", "Kptfile", "ConfigMap"]),
        prop_oneof![4 => Just("{name: app}".to_owned()), 1 => value(2)],
        prop::collection::vec(
            (
                prop::sample::select(vec!["image", "image", "exec", "configPath", "name"]),
                field_value,
            ),
            0..3,
        ),
    )
        .prop_map(|(api, kind, metadata, step)| {
            let step: Vec<String> = step.iter().map(|(k, v)| format!("{k}: {v}")).collect();
            format!(
                "apiVersion: {api}\nkind: {kind}\nmetadata: {metadata}\npipeline:\n  mutators:\n    - {{{}}}\n",
                step.join(", ")
            )
        })
}

/// A layered document set: a policy and documents with parents, actions
/// and substitutions between them, on paths that may not exist.
fn layered_set() -> impl Strategy<Value = String> {
    let path = prop::sample::select(vec![
        ".", ".a", ".a.b", ".a[0]", ".a[3].b", ".x[12]", "a", ".a..b", "$.a",
    ]);
    let document = (
        prop::sample::select(vec!["g", "t", "s"]),
        prop::sample::select(vec!["one", "two", "three"]),
        prop::sample::select(vec!["global", "type", "site", "nope"]),
        prop::option::of(prop::sample::select(vec!["one", "two", "three"])),
        prop::collection::vec((prop::sample::select(vec!["merge", "replace", "delete", "bogus"]), path.clone()), 0..3),
        prop::collection::vec((prop::sample::select(vec!["one", "two", "three"]), path.clone(), path), 0..3),
        value(3),
    )
        .prop_map(|(schema, name, layer, parent, actions, substitutions, data)| {
            let mut text = format!(
                "schema: {schema}/Doc/v1\nmetadata:\n  schema: metadata/Document/v1\n  name: {name}\n  labels: {{name: {name}}}\n  layeringDefinition:\n    abstract: false\n    layer: {layer}\n"
            );
            if let Some(parent) = parent {
                text.push_str(&format!("    parentSelector: {{name: {parent}}}\n"));
            }
            text.push_str("    actions:\n");
            for (method, path) in actions {
                text.push_str(&format!("      - {{method: {method}, path: '{path}'}}\n"));
            }
            text.push_str("  substitutions:\n");
            for (source, src_path, dest_path) in substitutions {
                text.push_str(&format!(
                    "    - {{src: {{schema: {schema}/Doc/v1, name: {source}, path: '{src_path}'}}, dest: {{path: '{dest_path}'}}}}\n"
                ));
            }
            text.push_str(&format!("data: {data}\n"));
            text
        });
    prop::collection::vec(document, 1..5).prop_map(|documents| {
        let policy = "schema: deckhand/LayeringPolicy/v1\nmetadata:\n  schema: metadata/Control/v1\n  name: policy\ndata:\n  layerOrder: [global, type, site]\n";
        format!("{policy}---\n{}", documents.join("---\n"))
    })
}

/// The Starlark builtin's ResourceList for `items` and a program that
/// reads and writes every item.
fn starlark_list(items: &[String]) -> String {
    let mut list =
        String::from("apiVersion: config.kubernetes.io/v1\nkind: ResourceList\nitems:\n");
    for item in items {
        list.push_str(&format!(
            "- {{apiVersion: v1, kind: ConfigMap, metadata: {{name: cm}}, data: {item}}}\n"
        ));
    }
    list.push_str("functionConfig:\n  apiVersion: v1\n  kind: ConfigMap\n  metadata:\n    name: probe\n  data:\n    source: |\n      for r in ctx.resource_list['items']:\n        r['copy'] = r.get('data')\n");
    list
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    #[test]
    fn kptfiles_decode_or_fail(text in kptfile_text()) {
        let dir = std::path::Path::new("/pkg");
        if let Ok(kptfile) = Kptfile::parse_bytes(text.as_bytes(), dir) {
            let _ = kptfile.validate(dir);
        }
    }

    #[test]
    fn layering_renders_or_fails(text in layered_set()) {
        let file: Arc<str> = Arc::from("set.yaml");
        if let Ok(loaded) = krender::layering::load_text(&text, &file) {
            let inputs: Vec<_> = loaded.into_iter().map(|document| document.input).collect();
            let _ = krender::layering::render(&inputs);
        }
    }

    #[test]
    fn starlark_converts_any_resource(items in prop::collection::vec(value(4), 1..4)) {
        let list = starlark_list(&items);
        let request = FunctionRequest {
            target: FunctionTarget::Image("ghcr.io/kptdev/krm-functions-catalog/starlark:latest"),
            input: list.as_bytes(),
            timeout: std::time::Duration::from_secs(20),
        };
        // A response (success or the function's own failure), never a
        // panic of the builtin.
        let response = BuiltinEvaluator::default().evaluate(&request);
        prop_assert!(response.is_ok(), "{response:?}\n{list}");
    }
}

/// The generators are worth something only if what they make gets past
/// the parsers: count how many samples decode, load and render.
#[test]
fn generated_inputs_reach_the_code() {
    use proptest::strategy::ValueTree;
    use proptest::test_runner::TestRunner;
    let mut runner = TestRunner::deterministic();
    let (mut kptfiles, mut loaded, mut rendered, mut starlark_ok) = (0, 0, 0, 0);
    for _ in 0..200 {
        let text = kptfile_text()
            .new_tree(&mut runner)
            .expect("sample")
            .current();
        kptfiles += usize::from(
            Kptfile::parse_bytes(text.as_bytes(), std::path::Path::new("/pkg")).is_ok(),
        );
        let set = layered_set()
            .new_tree(&mut runner)
            .expect("sample")
            .current();
        let file: Arc<str> = Arc::from("set.yaml");
        if let Ok(documents) = krender::layering::load_text(&set, &file) {
            loaded += 1;
            let inputs: Vec<_> = documents
                .into_iter()
                .map(|document| document.input)
                .collect();
            rendered += usize::from(krender::layering::render(&inputs).is_ok());
        }
        let items = prop::collection::vec(value(4), 1..4)
            .new_tree(&mut runner)
            .expect("sample")
            .current();
        let list = starlark_list(&items);
        let request = FunctionRequest {
            target: FunctionTarget::Image("ghcr.io/kptdev/krm-functions-catalog/starlark:latest"),
            input: list.as_bytes(),
            timeout: std::time::Duration::from_secs(20),
        };
        starlark_ok += usize::from(
            BuiltinEvaluator::default()
                .evaluate(&request)
                .is_ok_and(|response| response.exit_code == 0),
        );
    }
    assert!(
        kptfiles > 0 && loaded > 20 && rendered > 0 && starlark_ok > 20,
        "of 200: {kptfiles} Kptfiles decode, {loaded} sets load, {rendered} render, {starlark_ok} starlark runs succeed"
    );
}
