//! The shared Deckhand conformance cases (`../shared/conformance/deckhand`),
//! one test each, run through the layering engine directly: inputs are
//! decoded with serde_yaml (independent of our YAML layer, so engine and YAML
//! bugs are told apart) and compared by the runner's rules — `(schema, name)`
//! key sets, strictly typed `data`, error class names — in input and
//! reversed order.

use std::path::Path;
use std::sync::Arc;

use krender::layering::{InputDocument, Value, render};
use libtest_mimic::Trial;

use crate::support::parse_all;

mod incremental;

fn is_control(document: &Value) -> bool {
    document
        .get_path(&["metadata", "schema"])
        .and_then(Value::as_str)
        .is_some_and(|schema| schema.starts_with("metadata/Control"))
}

fn key(document: &Value) -> (String, String) {
    let text = |keys: &[&str]| {
        document
            .get_path(keys)
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned()
    };
    (text(&["schema"]), text(&["metadata", "name"]))
}

/// Runs one case on `documents`; `None` on success, else the reason.
fn check(case: &Path, documents: &[Value]) -> Option<String> {
    let inputs: Vec<InputDocument> = documents
        .iter()
        .map(|body| InputDocument {
            body: body.clone(),
            file: Arc::from("input.yaml"),
            line: 0,
        })
        .collect();
    let result = render(&inputs);
    let error_file = case.join("expected-error.txt");
    if error_file.exists() {
        let text = std::fs::read_to_string(&error_file).expect("expected-error.txt reads");
        let class = text
            .lines()
            .map(str::trim)
            .find(|line| !line.is_empty() && !line.starts_with('#'))
            .unwrap_or("");
        return match result {
            Ok(_) => Some(format!("expected {class}, rendered fine")),
            Err(error) if error.class() == class => None,
            Err(error) => Some(format!("expected {class}, got {}: {error}", error.class())),
        };
    }
    let rendered = match result {
        Ok(rendered) => rendered,
        Err(error) => return Some(format!("unexpected error {}: {error}", error.class())),
    };
    let expected_text =
        std::fs::read_to_string(case.join("expected.yaml")).expect("expected.yaml reads");
    let mut expected: Vec<(String, String, Value)> = parse_all(&expected_text)
        .into_iter()
        .filter(|document| !is_control(document))
        .map(|document| {
            let (schema, name) = key(&document);
            (
                schema,
                name,
                document.get("data").cloned().unwrap_or(Value::Null),
            )
        })
        .collect();
    let mut actual: Vec<(String, String, Value)> = rendered
        .iter()
        .filter(|document| !is_control(&documents[document.input]))
        .map(|document| {
            let (schema, name) = key(&documents[document.input]);
            (schema, name, document.data.clone())
        })
        .collect();
    let by_key =
        |a: &(String, String, Value), b: &(String, String, Value)| (&a.0, &a.1).cmp(&(&b.0, &b.1));
    expected.sort_by(by_key);
    actual.sort_by(by_key);
    let keys = |list: &[(String, String, Value)]| {
        list.iter()
            .map(|(s, n, _)| format!("{s}/{n}"))
            .collect::<Vec<_>>()
    };
    if keys(&expected) != keys(&actual) {
        return Some(format!(
            "document set differs: expected {:?}, got {:?}",
            keys(&expected),
            keys(&actual)
        ));
    }
    for (e, a) in expected.iter().zip(&actual) {
        if e.2 != a.2 {
            return Some(format!(
                "{}/{}: data differs:\n expected {:?}\n got      {:?}",
                e.0, e.1, e.2, a.2
            ));
        }
    }
    None
}

/// One trial per case, and per case of [`incremental`].
pub(crate) fn trials() -> Vec<Trial> {
    let mut trials = crate::shared_suite("deckhand", "conformance/deckhand", |dir| {
        crate::case_dirs(dir, "input.yaml")
            .into_iter()
            .map(|case| {
                Trial::test(format!("deckhand::{}", crate::name_of(&case)), move || {
                    run(&case)
                })
            })
            .collect()
    });
    trials.extend(incremental::trials());
    trials
}

/// A case in input order, then reversed.
fn run(case: &Path) -> crate::Outcome {
    let text = std::fs::read_to_string(case.join("input.yaml"))?;
    let documents = parse_all(&text);
    if let Some(reason) = check(case, &documents) {
        return Err(reason.into());
    }
    let reversed: Vec<Value> = documents.iter().rev().cloned().collect();
    match check(case, &reversed) {
        Some(reason) => Err(format!("reversed order: {reason}").into()),
        None => Ok(()),
    }
}
