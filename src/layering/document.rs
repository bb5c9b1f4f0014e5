//! Input documents and the metadata rendering reads from them: identity,
//! layer, labels, parentSelector, actions and substitutions, checked for the
//! structure rendering relies on (`InvalidDocumentFormat`).
//!
//! The checks are deliberately lenient where Deckhand's unit tests render
//! without schema validation (spec §3): missing `storagePolicy`, a selector
//! without actions, empty labels and unknown top-level keys are accepted.

use std::sync::Arc;

use super::error::{DocumentRef, LayeringError};
use super::value::{Key, Map, Value};

/// One decoded input document and where it came from.
#[derive(Clone, Debug, PartialEq)]
pub struct InputDocument {
    /// The whole document (`schema`, `metadata`, `data`, ...).
    pub body: Value,
    /// The file it was read from, as displayed in messages.
    pub file: Arc<str>,
    /// 1-based line of the document in `file` (0 when unknown).
    pub line: usize,
}

/// A layering action (`metadata.layeringDefinition.actions[]`).
#[derive(Clone, Debug, PartialEq)]
pub struct Action {
    /// `method` as written; anything but merge/replace/delete fails when applied.
    pub method: Option<String>,
    /// `path` as written.
    pub path: String,
}

/// `src` of a substitution.
#[derive(Clone, Debug, PartialEq)]
pub struct SubstitutionSource {
    /// `src.schema`.
    pub schema: String,
    /// `src.name`.
    pub name: String,
    /// `src.path`.
    pub path: String,
    /// `src.pattern`.
    pub pattern: Option<String>,
    /// `src.match_group` (default 0).
    pub match_group: usize,
    /// `src.deepcopy`: the destination gets an independent copy, where
    /// Deckhand otherwise shares the value's insides with the source.
    pub deepcopy: bool,
}

/// One `dest` of a substitution.
#[derive(Clone, Debug, PartialEq)]
pub struct SubstitutionDest {
    /// `dest.path`.
    pub path: String,
    /// `dest.pattern`.
    pub pattern: Option<String>,
    /// `dest.recurse.depth` (-1 = unlimited), when `recurse` is given.
    pub recurse_depth: Option<i64>,
}

/// One `metadata.substitutions[]` entry.
#[derive(Clone, Debug, PartialEq)]
pub struct Substitution {
    /// Where the value comes from.
    pub src: SubstitutionSource,
    /// Where it goes (one or more).
    pub dests: Vec<SubstitutionDest>,
}

/// A document with its rendering metadata extracted.
#[derive(Clone, Debug, PartialEq)]
pub struct Document {
    /// Index in the input list.
    pub input: usize,
    /// Identity and location, for messages.
    pub reference: Arc<DocumentRef>,
    /// `schema`.
    pub schema: String,
    /// `metadata.name`.
    pub name: String,
    /// `metadata.layeringDefinition.layer`.
    pub layer: Option<String>,
    /// True for control documents (`metadata.schema: metadata/Control/...`).
    pub is_control: bool,
    /// `metadata.labels` (empty when absent).
    pub labels: Map,
    /// `metadata.layeringDefinition.parentSelector` (empty when absent).
    pub parent_selector: Map,
    /// `layeringDefinition.abstract` is the boolean `true`.
    pub is_abstract: bool,
    /// `metadata.replacement` is the boolean `true`.
    pub is_replacement: bool,
    /// `metadata.storagePolicy` is `encrypted`: a destination taking a
    /// value from it is redacted under `redact_encrypted`.
    pub is_encrypted: bool,
    /// The layering actions, in order.
    pub actions: Vec<Action>,
    /// The substitutions, in order.
    pub substitutions: Vec<Substitution>,
    /// `data` as written (null when absent).
    pub data: Value,
}

impl Document {
    /// Extracts and checks a document's rendering metadata.
    pub fn from_input(input: usize, document: &InputDocument) -> Result<Document, LayeringError> {
        let body = &document.body;
        let text_at = |keys: &[&str]| {
            body.get_path(keys)
                .and_then(Value::as_str)
                .map(str::to_owned)
        };
        let schema = text_at(&["schema"]).unwrap_or_default();
        let name = text_at(&["metadata", "name"]).unwrap_or_default();
        let layer = text_at(&["metadata", "layeringDefinition", "layer"]);
        let reference = Arc::new(DocumentRef {
            schema: schema.clone(),
            name: name.clone(),
            layer: layer.clone(),
            file: document.file.clone(),
            line: document.line,
        });
        let invalid = |reason: String| LayeringError::InvalidDocumentFormat {
            document: reference.clone(),
            reason,
        };

        if body.as_map().is_none() {
            return Err(invalid(format!(
                "a document must be a mapping, found a {}",
                body.type_name()
            )));
        }
        if body.get("schema").and_then(Value::as_str).is_none() {
            return Err(invalid("`schema` must be a string".to_owned()));
        }
        let Some(metadata) = body.get("metadata").filter(|m| m.as_map().is_some()) else {
            return Err(invalid("`metadata` must be a mapping".to_owned()));
        };
        if metadata.get("name").and_then(Value::as_str).is_none() {
            return Err(invalid("`metadata.name` must be a string".to_owned()));
        }
        let definition = optional_map(metadata, "layeringDefinition").map_err(|found| {
            invalid(format!(
                "`metadata.layeringDefinition` must be a mapping, found a {found}"
            ))
        })?;
        if let Some(found) = definition
            .get("layer")
            .filter(|l| !l.is_null() && l.as_str().is_none())
        {
            return Err(invalid(format!(
                "`metadata.layeringDefinition.layer` must be a string, found a {}",
                found.type_name()
            )));
        }
        let labels = optional_map(metadata, "labels").map_err(|found| {
            invalid(format!(
                "`metadata.labels` must be a mapping, found a {found}"
            ))
        })?;
        let parent_selector = optional_map(&definition, "parentSelector").map_err(|found| {
            invalid(format!(
                "`metadata.layeringDefinition.parentSelector` must be a mapping, found a {found}"
            ))
        })?;
        let actions = parse_actions(definition.get("actions")).map_err(&invalid)?;
        let substitutions = parse_substitutions(metadata.get("substitutions")).map_err(&invalid)?;

        let is_control = metadata
            .get("schema")
            .and_then(Value::as_str)
            .is_some_and(|s| s.starts_with("metadata/Control"));
        Ok(Document {
            input,
            reference,
            schema,
            name,
            layer,
            is_control,
            labels: labels.as_map().cloned().unwrap_or_default(),
            parent_selector: parent_selector.as_map().cloned().unwrap_or_default(),
            is_abstract: definition.get("abstract") == Some(&Value::Bool(true)),
            is_replacement: metadata.get("replacement") == Some(&Value::Bool(true)),
            is_encrypted: metadata.get("storagePolicy").and_then(Value::as_str)
                == Some("encrypted"),
            actions,
            substitutions,
            data: body.get("data").cloned().unwrap_or(Value::Null),
        })
    }

    /// True for the LayeringPolicy document kind.
    pub fn is_layering_policy(&self) -> bool {
        self.schema.starts_with("deckhand/LayeringPolicy")
    }
}

/// The mapping under `key`, an empty one when absent or null, or the type
/// found instead.
fn optional_map(parent: &Value, key: &str) -> Result<Value, &'static str> {
    match parent.get(key) {
        None | Some(Value::Null) => Ok(Value::empty_map()),
        Some(map @ Value::Map(_)) => Ok(map.clone()),
        Some(other) => Err(other.type_name()),
    }
}

fn parse_actions(actions: Option<&Value>) -> Result<Vec<Action>, String> {
    let items = match actions {
        None | Some(Value::Null) => return Ok(Vec::new()),
        Some(Value::Seq(items)) => items,
        Some(other) => {
            return Err(format!(
                "`metadata.layeringDefinition.actions` must be a list, found a {}",
                other.type_name()
            ));
        }
    };
    items
        .iter()
        .enumerate()
        .map(|(i, item)| {
            let field = format!("metadata.layeringDefinition.actions[{i}]");
            if item.as_map().is_none() {
                return Err(format!("`{field}` must be a mapping"));
            }
            let path = item
                .get("path")
                .and_then(Value::as_str)
                .ok_or_else(|| format!("`{field}.path` must be a string"))?;
            Ok(Action {
                method: item
                    .get("method")
                    .and_then(Value::as_str)
                    .map(str::to_owned),
                path: path.to_owned(),
            })
        })
        .collect()
}

fn parse_substitutions(substitutions: Option<&Value>) -> Result<Vec<Substitution>, String> {
    let items = match substitutions {
        None | Some(Value::Null) => return Ok(Vec::new()),
        Some(Value::Seq(items)) => items,
        Some(other) => {
            return Err(format!(
                "`metadata.substitutions` must be a list, found a {}",
                other.type_name()
            ));
        }
    };
    items
        .iter()
        .enumerate()
        .map(|(i, item)| parse_substitution(&format!("metadata.substitutions[{i}]"), item))
        .collect()
}

fn required_str(parent: &Value, key: &str, field: &str) -> Result<String, String> {
    match parent.get(key) {
        Some(Value::Str(text)) => Ok(text.clone()),
        Some(other) => Err(format!(
            "`{field}.{key}` must be a string, found a {}",
            other.type_name()
        )),
        None => Err(format!("`{field}.{key}` is required")),
    }
}

fn optional_str(parent: &Value, key: &str, field: &str) -> Result<Option<String>, String> {
    match parent.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Str(text)) => Ok(Some(text.clone())),
        Some(other) => Err(format!(
            "`{field}.{key}` must be a string, found a {}",
            other.type_name()
        )),
    }
}

fn parse_substitution(field: &str, item: &Value) -> Result<Substitution, String> {
    if item.as_map().is_none() {
        return Err(format!("`{field}` must be a mapping"));
    }
    let src_field = format!("{field}.src");
    let src = match item.get("src") {
        Some(src @ Value::Map(_)) => src,
        Some(_) => return Err(format!("`{src_field}` must be a mapping")),
        None => return Err(format!("`{src_field}` is required")),
    };
    let match_group = match src.get("match_group") {
        None | Some(Value::Null) => 0,
        Some(Value::Int(n)) if *n >= 0 => usize::try_from(*n).unwrap_or(usize::MAX),
        Some(_) => {
            return Err(format!(
                "`{src_field}.match_group` must be a non-negative integer"
            ));
        }
    };
    let src = SubstitutionSource {
        schema: required_str(src, "schema", &src_field)?,
        name: required_str(src, "name", &src_field)?,
        path: required_str(src, "path", &src_field)?,
        pattern: optional_str(src, "pattern", &src_field)?,
        match_group,
        deepcopy: matches!(src.get("deepcopy"), Some(Value::Bool(true))),
    };
    let dest_field = format!("{field}.dest");
    let dest_values: Vec<&Value> = match item.get("dest") {
        Some(dest @ Value::Map(_)) => vec![dest],
        Some(Value::Seq(dests)) if !dests.is_empty() => dests.iter().collect(),
        Some(_) => {
            return Err(format!(
                "`{dest_field}` must be a mapping or a non-empty list of mappings"
            ));
        }
        None => return Err(format!("`{dest_field}` is required")),
    };
    let dests = dest_values
        .into_iter()
        .map(|dest| {
            if dest.as_map().is_none() {
                return Err(format!("`{dest_field}` entries must be mappings"));
            }
            let recurse_depth = match dest.get("recurse") {
                None | Some(Value::Null) => None,
                Some(recurse @ Value::Map(_)) => match recurse.get("depth") {
                    None | Some(Value::Null) => Some(-1),
                    Some(Value::Int(depth)) if *depth >= -1 => {
                        Some(i64::try_from(*depth).unwrap_or(i64::MAX))
                    }
                    Some(_) => {
                        return Err(format!(
                            "`{dest_field}.recurse.depth` must be an integer >= -1"
                        ));
                    }
                },
                Some(_) => return Err(format!("`{dest_field}.recurse` must be a mapping")),
            };
            Ok(SubstitutionDest {
                path: required_str(dest, "path", &dest_field)?,
                pattern: optional_str(dest, "pattern", &dest_field)?,
                recurse_depth,
            })
        })
        .collect::<Result<Vec<_>, String>>()?;
    Ok(Substitution { src, dests })
}

/// Returns the label-key index used by parent selection: every label as
/// `(key text, label_index_text)`.
pub(crate) fn label_entries(labels: &Map) -> impl Iterator<Item = (String, String)> + '_ {
    labels
        .iter()
        .map(|(key, value): (&Key, &Value)| (key.text().to_owned(), value.label_index_text()))
}
