//! Layering engine behaviours beyond the shared cases: dependency-ordered
//! output, cycles named in full, deterministic parallel rendering and error
//! choice, abstract documents as (non-)sources, Deckhand's quirks we keep.
//! Inputs are written as YAML and decoded with serde_yaml.

use std::sync::Arc;

use krender::layering::{InputDocument, LayeringError, RenderedDocument, Value, render};

use crate::support::parse_all;

const POLICY: &str = "
schema: deckhand/LayeringPolicy/v1
metadata: {schema: metadata/Control/v1, name: policy}
data: {layerOrder: [global, site]}
";

fn inputs(text: &str) -> Vec<InputDocument> {
    parse_all(text)
        .into_iter()
        .enumerate()
        .map(|(i, body)| InputDocument {
            body,
            file: Arc::from("set.yaml"),
            line: i + 1,
        })
        .collect()
}

fn render_text(
    text: &str,
) -> (
    Vec<InputDocument>,
    Result<Vec<RenderedDocument>, LayeringError>,
) {
    let inputs = inputs(text);
    let result = render(&inputs);
    (inputs, result)
}

fn names(inputs: &[InputDocument], rendered: &[RenderedDocument]) -> Vec<String> {
    rendered
        .iter()
        .map(|d| {
            inputs[d.input]
                .body
                .get_path(&["metadata", "name"])
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_owned()
        })
        .collect()
}

fn doc(name: &str, layer: &str, extra_metadata: &str, data: &str) -> String {
    format!(
        "---\nschema: example/Kind/v1\nmetadata:\n  schema: metadata/Document/v1\n  name: {name}\n  layeringDefinition: {{abstract: false, layer: {layer}}}\n{extra_metadata}data: {data}\n"
    )
}

fn substitution(from: &str, src_path: &str, dest: &str) -> String {
    format!(
        "  substitutions:\n    - src: {{schema: example/Kind/v1, name: {from}, path: '{src_path}'}}\n      dest: {dest}\n"
    )
}

#[test]
fn output_is_in_dependency_order_then_input_order() {
    let text = format!(
        "{POLICY}{}{}{}",
        doc(
            "dest",
            "site",
            &substitution("src", ".a", "{path: .b}"),
            "{}"
        ),
        doc("alone", "site", "", "{x: 1}"),
        doc("src", "global", "", "{a: 1}"),
    );
    let (inputs, result) = render_text(&text);
    let rendered = result.expect("renders");
    assert_eq!(names(&inputs, &rendered), ["alone", "src", "dest"]);
    assert_eq!(rendered[2].data, parse_all("{b: 1}")[0]);
}

#[test]
fn a_cycle_names_every_document_in_it() {
    let text = format!(
        "{POLICY}{}{}{}",
        doc(
            "a",
            "site",
            &substitution("b", ".x", "{path: .y}"),
            "{x: 1}"
        ),
        doc(
            "b",
            "site",
            &substitution("c", ".x", "{path: .y}"),
            "{x: 1}"
        ),
        doc(
            "c",
            "site",
            &substitution("a", ".x", "{path: .y}"),
            "{x: 1}"
        ),
    );
    let (_, result) = render_text(&text);
    let error = result.expect_err("cycle");
    assert_eq!(error.class(), "SubstitutionDependencyCycle");
    let message = error.to_string();
    assert!(
        message.contains("[example/Kind/v1, site] a (set.yaml:2) -> [example/Kind/v1, site] b (set.yaml:3) -> [example/Kind/v1, site] c (set.yaml:4) -> [example/Kind/v1, site] a"),
        "{message}"
    );
}

#[test]
fn abstract_documents_are_not_output_and_not_sources() {
    let abstract_src = "---\nschema: example/Kind/v1\nmetadata:\n  schema: metadata/Document/v1\n  name: src\n  layeringDefinition: {abstract: true, layer: global}\ndata: {a: 1}\n";
    let (inputs, result) = render_text(&format!(
        "{POLICY}{abstract_src}{}",
        doc("other", "site", "", "{}")
    ));
    assert_eq!(names(&inputs, &result.expect("renders")), ["other"]);

    let text = format!(
        "{POLICY}{abstract_src}{}",
        doc(
            "dest",
            "site",
            &substitution("src", ".a", "{path: .b}"),
            "{}"
        )
    );
    let error = render_text(&text).1.expect_err("abstract source");
    assert_eq!(error.class(), "SubstitutionSourceNotFound");
}

#[test]
fn parallel_rendering_is_deterministic() {
    let mut text = POLICY.to_owned();
    text.push_str("---\nschema: example/Kind/v1\nmetadata:\n  schema: metadata/Document/v1\n  name: base\n  labels: {k: base}\n  layeringDefinition: {abstract: false, layer: global}\ndata: {v: {n: 0, s: base}}\n");
    for i in 0..200 {
        text.push_str(&format!(
            "---\nschema: example/Kind/v1\nmetadata:\n  schema: metadata/Document/v1\n  name: child{i}\n  layeringDefinition:\n    abstract: false\n    layer: site\n    parentSelector: {{k: base}}\n    actions: [{{method: merge, path: .v}}]\n{}data: {{v: {{n: {i}}}}}\n",
            if i % 3 == 0 { substitution("base", ".v.s", "{path: .copied}") } else { String::new() }
        ));
    }
    let first = render_text(&text).1.expect("renders");
    for _ in 0..5 {
        assert_eq!(render_text(&text).1.expect("renders"), first);
    }
    assert_eq!(first.len(), 201);
    assert_eq!(
        first[4].data,
        parse_all("{v: {n: 3, s: base}, copied: base}")[0]
    );
}

#[test]
fn the_first_failing_document_of_a_level_is_reported() {
    let text = format!(
        "{POLICY}{}{}",
        doc(
            "first",
            "site",
            &substitution("missing1", ".a", "{path: .b}"),
            "{}"
        ),
        doc(
            "second",
            "site",
            &substitution("missing2", ".a", "{path: .b}"),
            "{}"
        ),
    );
    for _ in 0..5 {
        let error = render_text(&text).1.expect_err("missing source");
        assert!(error.to_string().contains("missing1"), "{error}");
    }
}

/// Deckhand renders one document at a time in its own order (a networkx
/// topological sort of the documents with a parent or a source, reversed,
/// then the rest in input order) and stops at the first failure. Here
/// `early` (no parent, its source missing: outside that graph) comes first
/// in the input and in krender's levels, but `late`, which takes a missing
/// path from an existing source, is the one Deckhand reports; so do the
/// one-shot render and a session.
#[test]
fn of_several_failures_deckhand_reports_the_first_in_its_own_order() {
    let text = format!(
        "{POLICY}{}{}{}",
        doc(
            "early",
            "site",
            &substitution("not-there", ".a", "{path: .b}"),
            "{}"
        ),
        doc("source", "global", "", "{a: 1}"),
        doc(
            "late",
            "site",
            &substitution("source", ".nope", "{path: .b}"),
            "{}"
        ),
    );
    let error = render_text(&text).1.expect_err("two failures");
    assert_eq!(error.class(), "SubstitutionSourceDataNotFound", "{error}");
    assert!(error.to_string().contains("late"), "{error}");
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("set.yaml"), &text).expect("write");
    let mut session =
        krender::layering::LayeringSession::new(&[dir.path().to_owned()]).expect("reads");
    let session_error = session.render().expect_err("two failures");
    assert_eq!(session_error.class(), error.class());
    assert!(
        session_error.to_string().contains("late"),
        "{session_error}"
    );
}

#[test]
fn pattern_substitution_writes_python_text_of_non_strings() {
    let text = format!(
        "{POLICY}{}{}",
        doc("src", "global", "", "{flag: true, ratio: 0.5, n: 7}"),
        doc(
            "dest",
            "site",
            "  substitutions:\n    - src: {schema: example/Kind/v1, name: src, path: .flag}\n      dest: {path: .s, pattern: FLAG}\n    - src: {schema: example/Kind/v1, name: src, path: .ratio}\n      dest: [{path: .s, pattern: RATIO}, {path: .t, pattern: RATIO}]\n",
            "{s: 'flag=FLAG ratio=RATIO', t: RATIO}"
        ),
    );
    let (_, result) = render_text(&text);
    let rendered = result.expect("renders");
    assert_eq!(
        rendered[1].data,
        parse_all("{s: 'flag=True ratio=0.5', t: '0.5'}")[0]
    );
}

#[test]
fn recursive_pattern_stops_at_the_depth_and_needs_a_literal_match() {
    let text = format!(
        "{POLICY}{}{}",
        doc("src", "global", "", "{v: X}"),
        doc(
            "dest",
            "site",
            "  substitutions:\n    - src: {schema: example/Kind/v1, name: src, path: .v}\n      dest: {path: ., pattern: KEY, recurse: {depth: 2}}\n    - src: {schema: example/Kind/v1, name: src, path: .v}\n      dest: {path: ., pattern: 'R[E]G', recurse: {depth: -1}}\n",
            "{a: KEY1, b: {c: KEY2, d: {e: KEY3}}, l: [KEY4, [KEY5]], r: REG}"
        ),
    );
    let rendered = render_text(&text).1.expect("renders");
    assert_eq!(
        rendered[1].data,
        parse_all("{a: X1, b: {c: X2, d: {e: KEY3}}, l: [X4, [KEY5]], r: REG}")[0]
    );
}

#[test]
fn delete_removes_the_first_equal_value_like_deckhand() {
    let text = format!(
        "{POLICY}---\nschema: example/Kind/v1\nmetadata:\n  schema: metadata/Document/v1\n  name: parent\n  labels: {{p: '1'}}\n  layeringDefinition: {{abstract: true, layer: global}}\ndata: {{a: {{x: 1}}, b: {{x: 1}}, c: 2}}\n---\nschema: example/Kind/v1\nmetadata:\n  schema: metadata/Document/v1\n  name: child\n  layeringDefinition:\n    abstract: false\n    layer: site\n    parentSelector: {{p: '1'}}\n    actions: [{{method: delete, path: .b}}]\ndata: {{}}\n"
    );
    let rendered = render_text(&text).1.expect("renders");
    assert_eq!(rendered[0].data, parse_all("{b: {x: 1}, c: 2}")[0]);
}

#[test]
fn selector_values_match_type_strictly_except_python_numbers() {
    let parent = |label: &str| {
        format!(
            "---\nschema: example/Kind/v1\nmetadata:\n  schema: metadata/Document/v1\n  name: parent\n  labels: {{p: {label}}}\n  layeringDefinition: {{abstract: true, layer: global}}\ndata: {{a: 1}}\n"
        )
    };
    let child = "---\nschema: example/Kind/v1\nmetadata:\n  schema: metadata/Document/v1\n  name: child\n  layeringDefinition:\n    abstract: false\n    layer: site\n    parentSelector: {p: 1}\n    actions: [{method: merge, path: .}]\ndata: {b: 2}\n";
    let inherited = |label: &str| {
        render_text(&format!("{POLICY}{}{child}", parent(label)))
            .1
            .expect("renders")[0]
            .data
            .clone()
    };
    assert_eq!(inherited("'1'"), parse_all("{b: 2}")[0]);
    assert_eq!(inherited("1"), parse_all("{a: 1, b: 2}")[0]);
    assert_eq!(inherited("1.0"), parse_all("{a: 1, b: 2}")[0]);
}

#[test]
fn errors_name_the_document_file_and_line() {
    let text = format!(
        "{POLICY}---\nschema: example/Kind/v1\nmetadata:\n  schema: metadata/Document/v1\n  name: parent\n  labels: {{p: x}}\n  layeringDefinition: {{abstract: true, layer: global}}\ndata: {{a: 1}}\n---\nschema: example/Kind/v1\nmetadata:\n  schema: metadata/Document/v1\n  name: child\n  layeringDefinition:\n    abstract: false\n    layer: site\n    parentSelector: {{p: x}}\n    actions: [{{method: merge, path: .missing}}]\ndata: {{}}\n"
    );
    let error = render_text(&text).1.expect_err("missing key");
    assert_eq!(error.class(), "MissingDocumentKey");
    assert_eq!(
        error.to_string(),
        "Missing action path in {method: merge, path: .missing} needed for layering from either the data section of the parent [example/Kind/v1, global] parent (set.yaml:2) or child [example/Kind/v1, site] child (set.yaml:3): path .missing"
    );
}
