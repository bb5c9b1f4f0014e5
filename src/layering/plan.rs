//! Checking a document set and planning its render (spec §3, in Deckhand's
//! check order): the documents, their parents and substitution sources, and
//! the dependency levels the renderer walks.

use std::collections::{BTreeMap, HashMap};

use super::document::{Document, InputDocument};
use super::error::{DocumentList, LayeringError};
use super::graph;
use super::parent::{Family, check_replacements, select_parents};
use super::value::Value;

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

/// Checks `inputs` and plans their render: the first problem found, in
/// Deckhand's check order, is the error.
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
