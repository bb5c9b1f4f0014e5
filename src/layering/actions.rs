//! Layering actions (spec §5): a child's data is its parent's rendered data
//! with the child's `merge`, `replace` and `delete` actions applied in order.

use super::document::{Action, Document};
use super::error::LayeringError;
use super::path::{JsonPath, Padding};
use super::value::{Map, Value};

/// Computes a child's layered data from its parent's rendered data.
/// `parent` is the document whose data is `parent_data` (for messages).
pub fn apply_actions(
    child: &Document,
    parent: &Document,
    parent_data: &Value,
) -> Result<Value, LayeringError> {
    // Null data on either side is a placeholder for an empty mapping.
    let mut result = if parent_data.is_null() {
        Value::empty_map()
    } else {
        parent_data.clone()
    };
    let empty = Value::empty_map();
    let child_data = if child.data.is_null() {
        &empty
    } else {
        &child.data
    };

    let mut padding = Padding::per_document();
    for action in &child.actions {
        let path_text = normalize_action_path(&action.path);
        let path =
            JsonPath::parse(&path_text).map_err(|error| LayeringError::InvalidActionPath {
                document: child.reference.clone(),
                path: action.path.clone(),
                reason: error.to_string(),
            })?;
        let missing = || LayeringError::MissingDocumentKey {
            document: child.reference.clone(),
            parent: parent.reference.clone(),
            action: describe(action),
            path: action.path.clone(),
        };
        let write_failed = |error: super::path::PathError| LayeringError::InvalidActionPath {
            document: child.reference.clone(),
            path: action.path.clone(),
            reason: error.to_string(),
        };
        match action.method.as_deref() {
            Some("delete") => {
                if path.is_root() {
                    result = Value::empty_map();
                } else {
                    let target = path.get_present(&result).ok_or_else(missing)?.clone();
                    delete_first_equal(&mut result, &target);
                }
            }
            Some("merge") => {
                let from_child = path.get_present(child_data).ok_or_else(missing)?;
                let merged = match (path.get(&result), from_child) {
                    (Some(Value::Map(from_parent)), Value::Map(from_child)) => {
                        let mut merged = from_parent.clone();
                        deep_merge(&mut merged, from_child);
                        Value::Map(merged)
                    }
                    // Lists and scalars are not merged: the child's value wins.
                    _ => from_child.clone(),
                };
                path.write(&mut result, merged, &mut padding)
                    .map_err(write_failed)?;
            }
            Some("replace") => {
                let from_child = path.get_present(child_data).ok_or_else(missing)?;
                path.write(&mut result, from_child.clone(), &mut padding)
                    .map_err(write_failed)?;
            }
            _ => {
                return Err(LayeringError::UnsupportedActionMethod {
                    document: child.reference.clone(),
                    action: describe(action),
                });
            }
        }
    }
    Ok(result)
}

/// Deckhand's action path normalisation: drop a leading `.data` / `$.data`
/// (a plain prefix test, so `.database` loses its first four letters too,
/// as in Deckhand), then make the path start with `.`.
pub fn normalize_action_path(path: &str) -> String {
    let stripped = if let Some(rest) = path.strip_prefix(".data") {
        rest
    } else if let Some(rest) = path.strip_prefix("$.data") {
        rest
    } else {
        path
    };
    if stripped == "$" || stripped.starts_with('.') || stripped.starts_with("$.") {
        stripped.to_owned()
    } else {
        format!(".{stripped}")
    }
}

fn describe(action: &Action) -> String {
    format!(
        "{{method: {}, path: {}}}",
        action.method.as_deref().unwrap_or("<missing>"),
        action.path
    )
}

/// Deep merge of `source` into `target`: mappings merge key by key, anything
/// else in `source` (lists, scalars, an explicit null) replaces the target's
/// value. Existing keys keep their position; new keys are appended.
pub fn deep_merge(target: &mut Map, source: &Map) {
    for (key, value) in source {
        match (target.get_mut(key), value) {
            (Some(Value::Map(existing)), Value::Map(incoming)) => deep_merge(existing, incoming),
            _ => {
                target.insert(key.clone(), value.clone());
            }
        }
    }
}

/// Deckhand's value-based delete: walks `container` depth-first in key and
/// list order and removes the first entry whose value equals `target`
/// (Python equality). Returns whether something was removed.
pub fn delete_first_equal(container: &mut Value, target: &Value) -> bool {
    match container {
        Value::Map(map) => {
            for index in 0..map.len() {
                let Some((_, value)) = map.get_index(index) else {
                    break;
                };
                if value.py_eq(target) {
                    map.shift_remove_index(index);
                    return true;
                }
                if let Some((_, value)) = map.get_index_mut(index)
                    && delete_first_equal(value, target)
                {
                    return true;
                }
            }
            false
        }
        Value::Seq(items) => {
            for index in 0..items.len() {
                if items[index].py_eq(target) {
                    items.remove(index);
                    return true;
                }
                if delete_first_equal(&mut items[index], target) {
                    return true;
                }
            }
            false
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layering::value::Key;

    fn map(entries: &[(&str, Value)]) -> Value {
        Value::Map(
            entries
                .iter()
                .map(|(k, v)| (Key::str(*k), v.clone()))
                .collect(),
        )
    }

    #[test]
    fn normalizes_paths_like_deckhand() {
        assert_eq!(normalize_action_path(".data.a"), ".a");
        assert_eq!(normalize_action_path("$.data.a"), ".a");
        assert_eq!(normalize_action_path(".data"), ".");
        assert_eq!(normalize_action_path("a.b"), ".a.b");
        assert_eq!(normalize_action_path("."), ".");
        // The prefix quirk.
        assert_eq!(normalize_action_path(".database.x"), ".base.x");
    }

    #[test]
    fn deep_merge_keeps_parent_keys_and_replaces_lists() {
        let Value::Map(mut target) = map(&[
            ("a", map(&[("x", Value::Int(1)), ("y", Value::Int(2))])),
            ("l", Value::Seq(vec![Value::Int(1)])),
        ]) else {
            unreachable!()
        };
        let Value::Map(source) = map(&[
            ("a", map(&[("y", Value::Int(3))])),
            ("l", Value::Seq(vec![Value::Int(2)])),
        ]) else {
            unreachable!()
        };
        deep_merge(&mut target, &source);
        assert_eq!(
            Value::Map(target),
            map(&[
                ("a", map(&[("x", Value::Int(1)), ("y", Value::Int(3))])),
                ("l", Value::Seq(vec![Value::Int(2)])),
            ])
        );
    }

    #[test]
    fn delete_removes_the_first_equal_value() {
        let mut data = map(&[
            ("a", map(&[("x", Value::Int(1))])),
            ("b", map(&[("x", Value::Int(1))])),
        ]);
        let target = map(&[("x", Value::Int(1))]);
        assert!(delete_first_equal(&mut data, &target));
        assert_eq!(data, map(&[("b", map(&[("x", Value::Int(1))]))]));
    }
}
