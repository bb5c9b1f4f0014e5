//! Substitution (spec §9): copying values from source documents' rendered
//! data into a destination's data, at a path or into pattern matches.

use std::sync::Arc;

use regex::{NoExpand, Regex};

use super::document::{Document, SubstitutionDest};
use super::error::{DocumentRef, LayeringError};
use super::path::{JsonPath, Padding};
use super::value::Value;

/// A resolved substitution source: the document and its rendered data.
pub struct SourceData<'a> {
    /// The source document.
    pub reference: &'a Arc<DocumentRef>,
    /// Its rendered data.
    pub data: &'a Value,
}

/// How substitution treats a source that is not there.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct SubstitutionOptions {
    /// Pegleg's `fail_on_missing_sub_src=False`: a missing source document
    /// skips the substitution, and a missing source value is written as
    /// null, each with Deckhand's warning, instead of failing the render.
    pub allow_missing_sources: bool,
}

/// Applies `document`'s substitutions, in order, to `data` (the document's
/// data after layering). `source` resolves `(schema, name)` to a concrete
/// source's rendered data. Deckhand's warnings for what `options` let
/// through are pushed onto `warnings`.
pub fn apply_substitutions<'a>(
    document: &Document,
    data: &mut Value,
    source: impl Fn(&str, &str) -> Option<SourceData<'a>>,
    options: SubstitutionOptions,
    warnings: &mut Vec<String>,
) -> Result<(), LayeringError> {
    let mut padding = Padding::per_document();
    for substitution in &document.substitutions {
        let src = &substitution.src;
        let Some(found) = source(&src.schema, &src.name) else {
            if options.allow_missing_sources {
                warnings.push(format!(
                    "Could not find substitution source document [{}] {} among the provided substitution sources.",
                    src.schema, src.name
                ));
                continue;
            }
            return Err(LayeringError::SubstitutionSourceNotFound {
                document: document.reference.clone(),
                src_schema: src.schema.clone(),
                src_name: src.name.clone(),
            });
        };
        let unknown = |dest_path: &str, details: String| LayeringError::UnknownSubstitutionError {
            document: document.reference.clone(),
            dest_path: dest_path.to_owned(),
            details,
        };
        let first_dest_path = substitution
            .dests
            .first()
            .map_or("", |dest| dest.path.as_str());

        // A non-mapping source data section is the value itself.
        let value = if found.data.as_map().is_some() {
            let path = JsonPath::parse(&src.path)
                .map_err(|error| unknown(first_dest_path, format!("source path: {error}")))?;
            path.get_present(found.data)
        } else {
            Some(found.data).filter(|value| !value.is_null())
        };
        let mut value = match value {
            Some(value) => value.clone(),
            // Deckhand warns and goes on with None, which lands as null.
            None if options.allow_missing_sources => {
                let (source_doc, dest_doc) = (found.reference, &document.reference);
                warnings.push(format!(
                    "Could not find source path {} in source document or the secret extracted is None. Source document: [{}, {}] {}. Destination document: [{}, {}] {}.",
                    src.path,
                    source_doc.schema,
                    source_doc.layer.as_deref().unwrap_or("None"),
                    source_doc.name,
                    dest_doc.schema,
                    dest_doc.layer.as_deref().unwrap_or("None"),
                    dest_doc.name
                ));
                Value::Null
            }
            None => {
                return Err(LayeringError::SubstitutionSourceDataNotFound {
                    document: document.reference.clone(),
                    source_document: found.reference.clone(),
                    path: src.path.clone(),
                });
            }
        };

        if let Some(pattern) = &src.pattern {
            let Value::Str(text) = &value else {
                return Err(unknown(
                    first_dest_path,
                    format!(
                        "src.pattern needs a string source value, found a {}",
                        value.type_name()
                    ),
                ));
            };
            let regex = Regex::new(pattern)
                .map_err(|error| unknown(first_dest_path, format!("src.pattern: {error}")))?;
            if let Some(captures) = regex.captures(text) {
                let group = captures.get(src.match_group).ok_or_else(|| {
                    unknown(
                        first_dest_path,
                        format!(
                            "src.match_group {} did not match in src.pattern {pattern}",
                            src.match_group
                        ),
                    )
                })?;
                value = Value::Str(group.as_str().to_owned());
            }
        }

        for dest in &substitution.dests {
            write_dest(data, &value, dest, &mut padding)
                .map_err(|details| unknown(&dest.path, details))?;
        }
    }
    Ok(())
}

/// Writes `value` into `data` at one destination; the error is the detail
/// text of an `UnknownSubstitutionError`.
fn write_dest(
    data: &mut Value,
    value: &Value,
    dest: &SubstitutionDest,
    padding: &mut Padding,
) -> Result<(), String> {
    let text = if dest.path == "." {
        "$"
    } else {
        dest.path.as_str()
    };
    if text != "$" && !text.starts_with('.') && !text.starts_with("$.") {
        return Err(format!(
            "the path {} does not begin with \".\" or \"$\"",
            dest.path
        ));
    }
    let path = JsonPath::parse(text).map_err(|error| error.to_string())?;
    let Some(pattern) = &dest.pattern else {
        return path
            .write(data, value.clone(), padding)
            .map_err(|error| error.to_string());
    };
    let regex = Regex::new(pattern).map_err(|error| format!("dest.pattern: {error}"))?;
    let replacement = value.python_str();
    let slot = path
        .slot_mut(data, padding)
        .map_err(|error| error.to_string())?;
    let not_a_string = |found: &Value| {
        format!(
            "dest.pattern {pattern} needs a string at {}, found a {}",
            dest.path,
            found.type_name()
        )
    };
    match (slot, dest.recurse_depth) {
        (Value::Str(text), _) => {
            *text = regex.replace_all(text, NoExpand(&replacement)).into_owned();
            Ok(())
        }
        (slot @ (Value::Map(_) | Value::Seq(_)), Some(max_depth)) => {
            replace_recursively(slot, 0, max_depth, pattern, &regex, &replacement);
            Ok(())
        }
        (other, _) => Err(not_a_string(other)),
    }
}

/// Replaces `regex` in every string child of `value` down to `max_depth`
/// levels (-1 = unlimited) that contains `pattern` literally (Deckhand's
/// pre-check, which is why regex patterns never match here).
fn replace_recursively(
    value: &mut Value,
    depth: i64,
    max_depth: i64,
    pattern: &str,
    regex: &Regex,
    replacement: &str,
) {
    if depth == max_depth {
        return;
    }
    let children: Box<dyn Iterator<Item = &mut Value>> = match value {
        Value::Map(map) => Box::new(map.values_mut()),
        Value::Seq(items) => Box::new(items.iter_mut()),
        _ => return,
    };
    for child in children {
        match child {
            Value::Str(text) if text.contains(pattern) => {
                *text = regex.replace_all(text, NoExpand(replacement)).into_owned();
            }
            other => replace_recursively(other, depth + 1, max_depth, pattern, regex, replacement),
        }
    }
}
