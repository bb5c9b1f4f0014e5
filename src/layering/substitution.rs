//! Substitution (spec §9): copying values from source documents' rendered
//! data into a destination's data, at a path or into pattern matches.

use std::sync::Arc;

use regex::{NoExpand, Regex};

use super::document::{Document, Substitution, SubstitutionDest};
use super::error::{DocumentRef, LayeringError};
use super::path::{JsonPath, Padding, Segment};
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
    /// Deckhand without cleartext secrets (Pegleg's default): a document
    /// that takes a value from an encrypted source is output with
    /// `storagePolicy: encrypted` and those substitutions' paths hashed.
    pub redact_encrypted: bool,
}

/// Applies `document`'s substitutions, in order, to `data` (the document's
/// data after layering). `source` resolves `(schema, name)` to a concrete
/// source's rendered data. Deckhand's warnings for what `options` let
/// through are pushed onto `warnings`. Values are copied: see
/// `super::shared` for the renders where Deckhand's sharing shows.
pub fn apply_substitutions<'a>(
    document: &Document,
    data: &mut Value,
    source: impl Fn(&str, &str) -> Option<SourceData<'a>>,
    options: SubstitutionOptions,
    warnings: &mut Vec<String>,
) -> Result<(), LayeringError> {
    let mut padding = Padding::per_document();
    for substitution in &document.substitutions {
        let found = source(&substitution.src.schema, &substitution.src.name);
        let Some(taken) = take_value(document, substitution, found, options, warnings)? else {
            continue;
        };
        for dest in &substitution.dests {
            write_dest(data, &taken.value, dest, &mut padding, None)
                .map_err(|details| unknown_error(document, &dest.path, details))?;
        }
    }
    Ok(())
}

/// What a substitution takes from its source.
pub(crate) struct Taken {
    /// The value (a copy).
    pub(crate) value: Value,
    /// Where in the source it was, when Deckhand's copy of it is shallow
    /// (not `src.deepcopy`, no `src.pattern`): the copy's insides are then
    /// the source's own.
    pub(crate) from: Option<Vec<Segment>>,
}

pub(crate) fn unknown_error(
    document: &Document,
    dest_path: &str,
    details: String,
) -> LayeringError {
    LayeringError::UnknownSubstitutionError {
        document: document.reference.clone(),
        dest_path: dest_path.to_owned(),
        details,
    }
}

/// The value `substitution` takes from its source (`found`, `None` when no
/// concrete document has that schema and name), after `src.pattern`; `None`
/// when `options` let a missing source document skip the substitution.
pub(crate) fn take_value(
    document: &Document,
    substitution: &Substitution,
    found: Option<SourceData<'_>>,
    options: SubstitutionOptions,
    warnings: &mut Vec<String>,
) -> Result<Option<Taken>, LayeringError> {
    let src = &substitution.src;
    let Some(found) = found else {
        if options.allow_missing_sources {
            warnings.push(format!(
                "Could not find substitution source document [{}] {} among the provided substitution sources.",
                src.schema, src.name
            ));
            return Ok(None);
        }
        return Err(LayeringError::SubstitutionSourceNotFound {
            document: document.reference.clone(),
            src_schema: src.schema.clone(),
            src_name: src.name.clone(),
        });
    };
    let first_dest_path = substitution
        .dests
        .first()
        .map_or("", |dest| dest.path.as_str());
    let unknown = |details: String| unknown_error(document, first_dest_path, details);

    // A non-mapping source data section is the value itself.
    let (value, from) = if found.data.as_map().is_some() {
        let path =
            JsonPath::parse(&src.path).map_err(|error| unknown(format!("source path: {error}")))?;
        (path.get_present(found.data), path.segments)
    } else {
        (
            Some(found.data).filter(|value| !value.is_null()),
            Vec::new(),
        )
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
    let mut shared = !src.deepcopy;

    if let Some(pattern) = &src.pattern {
        let Value::Str(text) = &value else {
            return Err(unknown(format!(
                "src.pattern needs a string source value, found a {}",
                value.type_name()
            )));
        };
        let regex =
            Regex::new(pattern).map_err(|error| unknown(format!("src.pattern: {error}")))?;
        if let Some(captures) = regex.captures(text) {
            let group = captures.get(src.match_group).ok_or_else(|| {
                unknown(format!(
                    "src.match_group {} did not match in src.pattern {pattern}",
                    src.match_group
                ))
            })?;
            value = Value::Str(group.as_str().to_owned());
        }
        shared = false;
    }
    Ok(Some(Taken {
        value,
        from: shared.then_some(from),
    }))
}

/// What one destination write changed: each slot (path from the data's
/// root) and the value now in it.
pub(crate) type Written = Vec<(Vec<Segment>, Value)>;

/// A destination's path (`.` is the root); the error is the detail text of
/// an `UnknownSubstitutionError`.
pub(crate) fn dest_path(dest: &SubstitutionDest) -> Result<JsonPath, String> {
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
    JsonPath::parse(text).map_err(|error| error.to_string())
}

/// Writes `value` into `data` at one destination; the error is the detail
/// text of an `UnknownSubstitutionError`. With `written`, every slot it
/// changed is recorded there.
pub(crate) fn write_dest(
    data: &mut Value,
    value: &Value,
    dest: &SubstitutionDest,
    padding: &mut Padding,
    written: Option<&mut Written>,
) -> Result<(), String> {
    let path = dest_path(dest)?;
    let Some(pattern) = &dest.pattern else {
        path.write(data, value.clone(), padding)
            .map_err(|error| error.to_string())?;
        if let Some(written) = written {
            written.push((path.segments, value.clone()));
        }
        return Ok(());
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
            if let Some(written) = written {
                written.push((path.segments, Value::Str(text.clone())));
            }
            Ok(())
        }
        (slot @ (Value::Map(_) | Value::Seq(_)), Some(max_depth)) => {
            let replace = Replace {
                max_depth,
                pattern,
                regex: &regex,
                replacement: &replacement,
            };
            let mut at = path.segments;
            replace.recursively(slot, 0, &mut at, written);
            Ok(())
        }
        (other, _) => Err(not_a_string(other)),
    }
}

/// A recursive `dest.pattern` replacement.
struct Replace<'a> {
    max_depth: i64,
    pattern: &'a str,
    regex: &'a Regex,
    replacement: &'a str,
}

impl Replace<'_> {
    /// Replaces the regex in every string child of `value` down to
    /// `max_depth` levels (-1 = unlimited) that contains the pattern
    /// literally (Deckhand's pre-check, which is why regex patterns never
    /// match here). `at` is `value`'s path; changed slots go to `written`.
    fn recursively(
        &self,
        value: &mut Value,
        depth: i64,
        at: &mut Vec<Segment>,
        mut written: Option<&mut Written>,
    ) {
        if depth == self.max_depth {
            return;
        }
        let children: Box<dyn Iterator<Item = (Segment, &mut Value)>> = match value {
            Value::Map(map) => Box::new(
                map.iter_mut()
                    .map(|(key, child)| (Segment::Field(key.text().to_owned()), child)),
            ),
            Value::Seq(items) => Box::new(
                items
                    .iter_mut()
                    .enumerate()
                    .map(|(index, child)| (Segment::Index(index), child)),
            ),
            _ => return,
        };
        for (segment, child) in children {
            at.push(segment);
            match child {
                Value::Str(text) if text.contains(self.pattern) => {
                    *text = self
                        .regex
                        .replace_all(text, NoExpand(self.replacement))
                        .into_owned();
                    if let Some(written) = written.as_deref_mut() {
                        written.push((at.clone(), Value::Str(text.clone())));
                    }
                }
                other => self.recursively(other, depth + 1, at, written.as_deref_mut()),
            }
            at.pop();
        }
    }
}
