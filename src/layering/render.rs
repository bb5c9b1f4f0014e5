//! Rendering a document set: its plan (the checks of spec §3 in Deckhand's
//! order and the dependency levels, see `plan`), then each level rendered
//! in parallel on rayon.
//!
//! Per-document rendering ([`render_document`]) is a pure function of the
//! document, its parent's rendered data and its sources' rendered data, so
//! it can become a memoized query without changing its shape.
//!
//! Output order: the concrete, non-replaced documents in dependency order
//! — level by level (a level's documents depend only on earlier levels), and
//! in input order within a level. Control documents are not output.

use rayon::prelude::*;

use super::actions::apply_actions;
use super::document::{Document, InputDocument};
use super::error::LayeringError;
pub(crate) use super::plan::{Plan, plan};
use super::substitution::{SourceData, SubstitutionOptions, apply_substitutions};
use super::value::Value;

/// One rendered output document.
#[derive(Clone, Debug, PartialEq)]
pub struct RenderedDocument {
    /// Index of the document in the input list.
    pub input: usize,
    /// The rendered `data`.
    pub data: Value,
    /// Under `redact_encrypted`, the positions of the substitutions that
    /// read encrypted sources (their paths are output hashed).
    pub redacted_substitutions: Vec<usize>,
}

/// Renders `inputs` as Deckhand does. Fails on the first problem found (in
/// Deckhand's check order); on success returns the output documents in the
/// documented order.
pub fn render(inputs: &[InputDocument]) -> Result<Vec<RenderedDocument>, LayeringError> {
    render_with(inputs, SubstitutionOptions::default()).map(|(documents, _)| documents)
}

/// [`render`] under `options`, with the warnings of what they let through
/// (in rendering order).
pub fn render_with(
    inputs: &[InputDocument],
    options: SubstitutionOptions,
) -> Result<(Vec<RenderedDocument>, Vec<String>), LayeringError> {
    let inputs: Vec<&InputDocument> = inputs.iter().collect();
    let plan = plan(&inputs)?;
    // Only when a document writes inside a value it took by substitution
    // can Deckhand's sharing of such values show; then render as it does.
    let (mut rendered, warnings) = if super::shared::needed(&plan) {
        super::shared::render(&plan, options)?
    } else {
        render_levels(&plan, options)?
    };
    let mut output = Vec::new();
    for level in &plan.levels {
        for &index in level {
            let document = &plan.documents[index];
            if document.is_control
                || document.is_abstract
                || plan.family.replaced_by[index].is_some()
            {
                continue;
            }
            // Each rendered value is output once: move it out.
            if let Some(data) = rendered[index].take() {
                let redacted_substitutions = if options.redact_encrypted {
                    super::redact::encrypted_substitutions(&plan, index)
                } else {
                    Vec::new()
                };
                output.push(RenderedDocument {
                    input: document.input,
                    data,
                    redacted_substitutions,
                });
            }
        }
    }
    Ok((output, warnings))
}

/// One document's rendered data and warnings; `None` for control
/// documents and those waiting on a failure.
type DocumentResult = Result<Option<(Value, Vec<String>)>, LayeringError>;

/// Renders level by level; documents of one level run in parallel and their
/// results are stored in index order, so the outcome does not depend on
/// scheduling. A failure does not stop the levels: every document whose
/// parent and sources rendered is tried, and the error reported is the
/// failing document's that comes first in Deckhand's order (Deckhand renders
/// one document at a time and stops at the first that fails).
fn render_levels(
    plan: &Plan,
    options: SubstitutionOptions,
) -> Result<(Vec<Option<Value>>, Vec<String>), LayeringError> {
    let mut rendered: Vec<Option<Value>> = vec![None; plan.documents.len()];
    let mut warnings = Vec::new();
    let mut failed = vec![false; plan.documents.len()];
    let mut errors: Vec<(usize, LayeringError)> = Vec::new();
    for level in &plan.levels {
        // Waiting on a document that failed: Deckhand never gets this far.
        let blocked: Vec<bool> = level
            .iter()
            .map(|&index| {
                plan.dependencies
                    .get(index)
                    .is_some_and(|needs| needs.iter().any(|&need| failed[need]))
            })
            .collect();
        let results: Vec<DocumentResult> = level
            .par_iter()
            .zip(&blocked)
            .map(|(&index, &blocked)| {
                let document = &plan.documents[index];
                if document.is_control || blocked {
                    return Ok(None);
                }
                let parent = plan.family.effective_parent(index).map(|parent| {
                    (
                        &plan.documents[parent],
                        rendered[parent].as_ref().unwrap_or(&Value::Null),
                    )
                });
                let source = |schema: &str, name: &str| {
                    let &source = plan.sources.get(&(schema.to_owned(), name.to_owned()))?;
                    Some(SourceData {
                        reference: &plan.documents[source].reference,
                        data: rendered[source].as_ref()?,
                    })
                };
                render_document(document, parent, source, options).map(Some)
            })
            .collect();
        for ((&index, result), blocked) in level.iter().zip(results).zip(blocked) {
            if blocked {
                failed[index] = true;
                continue;
            }
            match result {
                Ok(Some((data, mut said))) => {
                    rendered[index] = Some(data);
                    warnings.append(&mut said);
                }
                Ok(None) => {}
                Err(error) => {
                    failed[index] = true;
                    errors.push((index, error));
                }
            }
        }
    }
    match errors
        .into_iter()
        .min_by_key(|(index, _)| plan.ranks.get(*index).copied().unwrap_or(usize::MAX))
    {
        Some((_, error)) => Err(error),
        None => Ok((rendered, warnings)),
    }
}

/// Renders one document: layering onto its parent's rendered data (when it
/// has a parent and actions), then its substitutions in order. Returns the
/// data and the warnings of what `options` let through.
pub fn render_document<'a>(
    document: &Document,
    parent: Option<(&Document, &Value)>,
    source: impl Fn(&str, &str) -> Option<SourceData<'a>>,
    options: SubstitutionOptions,
) -> Result<(Value, Vec<String>), LayeringError> {
    let mut data = match parent {
        Some((parent, parent_data)) if !document.actions.is_empty() => {
            apply_actions(document, parent, parent_data)?
        }
        _ => document.data.clone(),
    };
    let mut warnings = Vec::new();
    apply_substitutions(document, &mut data, source, options, &mut warnings)?;
    Ok((data, warnings))
}
