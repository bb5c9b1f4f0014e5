//! Rendering a document set: the checks of spec §3 in Deckhand's order, the
//! dependency levels, then each level rendered in parallel on rayon.
//!
//! Per-document rendering ([`render_document`]) is a pure function of the
//! document, its parent's rendered data and its sources' rendered data, so
//! it can become a memoized query without changing its shape.
//!
//! Output order: the concrete, non-replaced documents in dependency order
//! — level by level (a level's documents depend only on earlier levels), and
//! in input order within a level. Control documents are not output.

use std::collections::{BTreeMap, HashMap};

use rayon::prelude::*;

use super::actions::apply_actions;
use super::document::{Document, InputDocument};
use super::error::{DocumentList, LayeringError};
use super::graph;
use super::parent::{Family, check_replacements, select_parents};
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

/// A checked document set, ready to render: documents, relations and the
/// dependency levels.
pub(crate) struct Plan {
    pub(crate) documents: Vec<Document>,
    pub(crate) family: Family,
    /// Concrete substitution source per `(schema, name)`.
    pub(crate) sources: BTreeMap<(String, String), usize>,
    pub(crate) levels: graph::Levels,
    /// Each document's parent and sources (what it waits for).
    pub(crate) dependencies: Vec<Vec<usize>>,
    /// Each document's position in Deckhand's own rendering order: of
    /// several documents that fail, Deckhand reports the first in it.
    pub(crate) ranks: Vec<usize>,
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

pub(crate) fn plan(inputs: &[&InputDocument]) -> Result<Plan, LayeringError> {
    let mut documents: Vec<Document> = Vec::with_capacity(inputs.len());
    // Deckhand refuses a bucket holding two documents with the same
    // (schema, layer, name) when it is uploaded (DuplicateDocumentExists):
    // rendering one of them silently would hide the other's edits. Its
    // layering engine keeps the first of several control documents (a
    // repeated LayeringPolicy only logs a warning), and so do we.
    let mut seen: HashMap<(String, Option<String>, String), usize> = HashMap::new();
    for (index, input) in inputs.iter().enumerate() {
        let document = Document::from_input(index, input)?;
        let key = (
            document.schema.clone(),
            document.layer.clone(),
            document.name.clone(),
        );
        if let Some(&first) = seen.get(&key) {
            if document.is_control {
                continue;
            }
            return Err(LayeringError::DuplicateDocumentExists {
                first: documents[first].reference.clone(),
                second: document.reference.clone(),
            });
        }
        seen.insert(key, documents.len());
        documents.push(document);
    }

    let Some(policy) = documents.iter().find(|d| d.is_layering_policy()) else {
        let mut files: Vec<&str> = inputs.iter().map(|i| &*i.file).collect();
        files.dedup();
        return Err(LayeringError::LayeringPolicyNotFound {
            files: files.join(", "),
        });
    };
    let layer_order = layer_order(policy)?;

    let mut layer_index = vec![None; documents.len()];
    for (index, document) in documents.iter().enumerate() {
        let Some(layer) = &document.layer else {
            continue;
        };
        let Some(position) = layer_order.iter().position(|l| l == layer) else {
            return Err(LayeringError::InvalidDocumentLayer {
                document: document.reference.clone(),
                layer: layer.clone(),
                layer_order,
                policy: policy.name.clone(),
            });
        };
        if !document.is_control {
            layer_index[index] = Some(position);
        }
    }

    let parents = select_parents(&documents, &layer_index)?;
    let family = check_replacements(&documents, parents)?;

    // Deckhand's map (`_calc_replacements_and_substitutions`): every
    // concrete document, a replaced one standing for its replacement (two
    // other documents with one schema and name were refused above).
    let mut sources = BTreeMap::new();
    for (index, document) in documents.iter().enumerate() {
        if !document.is_control && !document.is_abstract {
            let source = family.replaced_by[index].unwrap_or(index);
            sources.insert((document.schema.clone(), document.name.clone()), source);
        }
    }

    let dependencies: Vec<Vec<usize>> = documents
        .iter()
        .enumerate()
        .map(|(index, document)| {
            if document.is_control {
                return Vec::new();
            }
            // Deckhand's edge order: the parent, then each source.
            let mut needs: Vec<usize> = family.effective_parent(index).into_iter().collect();
            for substitution in &document.substitutions {
                let key = (
                    substitution.src.schema.clone(),
                    substitution.src.name.clone(),
                );
                if let Some(&source) = sources.get(&key)
                    && !needs.contains(&source)
                {
                    needs.push(source);
                }
            }
            needs
        })
        .collect();
    let levels = graph::level(&dependencies).map_err(|cycle| {
        LayeringError::SubstitutionDependencyCycle {
            cycle: DocumentList(
                cycle
                    .iter()
                    .map(|&i| documents[i].reference.clone())
                    .collect(),
            ),
        }
    })?;

    let ranks = graph::deckhand_ranks(&dependencies);
    Ok(Plan {
        documents,
        family,
        sources,
        levels,
        dependencies,
        ranks,
    })
}

fn layer_order(policy: &Document) -> Result<Vec<String>, LayeringError> {
    let invalid = |reason: &str| LayeringError::InvalidDocumentFormat {
        document: policy.reference.clone(),
        reason: reason.to_owned(),
    };
    match policy.data.get("layerOrder") {
        Some(Value::Seq(layers)) => layers
            .iter()
            .map(|layer| {
                layer
                    .as_str()
                    .map(str::to_owned)
                    .ok_or_else(|| invalid("`data.layerOrder` entries must be strings"))
            })
            .collect(),
        Some(Value::Null) => Ok(Vec::new()),
        _ => Err(invalid("`data.layerOrder` must be a list of layer names")),
    }
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
