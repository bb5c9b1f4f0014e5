//! The shared Deckhand conformance cases (`../shared/conformance/deckhand`),
//! run through the layering engine directly: inputs are decoded with
//! serde_yaml (independent of our YAML layer, so engine and YAML bugs are told
//! apart) and compared by the runner's rules — `(schema, name)` key sets,
//! strictly typed `data`, error class names — in input and reversed order.
//! Needs the shared data (see [`shared_dir`]).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::support::{shared_cases, shared_dir};
use krender::layering::value::{Key, Map};
use krender::layering::{InputDocument, Value, render};

/// Converts a serde_yaml value into the engine's value model.
pub(crate) fn from_serde(value: &serde_yaml::Value) -> Value {
    match value {
        serde_yaml::Value::Null => Value::Null,
        serde_yaml::Value::Bool(b) => Value::Bool(*b),
        serde_yaml::Value::Number(n) => {
            if let Some(i) = n.as_i64() {
                Value::Int(i128::from(i))
            } else if let Some(u) = n.as_u64() {
                Value::Int(i128::from(u))
            } else {
                Value::Float(n.as_f64().unwrap_or(f64::NAN))
            }
        }
        serde_yaml::Value::String(s) => Value::Str(s.clone()),
        serde_yaml::Value::Sequence(items) => Value::Seq(items.iter().map(from_serde).collect()),
        serde_yaml::Value::Mapping(map) => {
            let mut out = Map::default();
            for (key, value) in map {
                let key = match key {
                    serde_yaml::Value::String(s) => Key::Str(s.clone()),
                    other => Key::Str(
                        serde_yaml::to_string(other)
                            .unwrap_or_default()
                            .trim()
                            .to_owned(),
                    ),
                };
                out.insert(key, from_serde(value));
            }
            Value::Map(out)
        }
        serde_yaml::Value::Tagged(tagged) => from_serde(&tagged.value),
    }
}

pub(crate) fn parse_all(text: &str) -> Vec<Value> {
    serde_yaml::Deserializer::from_str(text)
        .map(|document| {
            let value: serde_yaml::Value =
                serde::Deserialize::deserialize(document).expect("case YAML parses");
            from_serde(&value)
        })
        .filter(|value| !value.is_null())
        .collect()
}

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

#[test]
fn deckhand_conformance_cases() {
    let Some(dir) = shared_dir("conformance/deckhand") else {
        return;
    };
    let mut cases: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("read the shared cases")
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|path| path.join("input.yaml").exists())
        .collect();
    cases.sort();
    let mut failures = Vec::new();
    for case in &cases {
        let text = std::fs::read_to_string(case.join("input.yaml")).expect("input.yaml reads");
        let documents = parse_all(&text);
        let mut reason = check(case, &documents);
        if reason.is_none() {
            let reversed: Vec<Value> = documents.iter().rev().cloned().collect();
            reason = check(case, &reversed).map(|r| format!("reversed order: {r}"));
        }
        if let Some(reason) = reason {
            failures.push(format!(
                "{}: {reason}",
                case.file_name().unwrap_or_default().to_string_lossy()
            ));
        }
    }
    shared_cases("layering_conformance", cases.len());
    assert!(
        failures.is_empty(),
        "{} failing cases:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
