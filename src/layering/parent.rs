//! Parent selection (spec §4) and the replacement rules (spec §8).
//!
//! A document's parent is the matching document (labels ⊇ parentSelector)
//! in the nearest higher layer. Every match is an assertion: a match of
//! another schema, or in the same or a lower layer, is an error even when a
//! valid parent exists. Candidates are found through a label index so that
//! selection stays linear in the number of documents.

use std::collections::{BTreeMap, HashMap};

use super::document::{Document, label_entries};
use super::error::{DocumentList, LayeringError};

/// Parent and replacement relations between documents (indexes into the
/// document list).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Family {
    /// The selected parent of each document.
    pub parent: Vec<Option<usize>>,
    /// For a replaced parent, the document replacing it.
    pub replaced_by: Vec<Option<usize>>,
}

impl Family {
    /// The document whose rendered data `child` layers onto: its parent, or
    /// the parent's replacement unless `child` is that replacement.
    pub fn effective_parent(&self, child: usize) -> Option<usize> {
        let parent = self.parent.get(child).copied().flatten()?;
        match self.replaced_by.get(parent).copied().flatten() {
            Some(replacement) if replacement != child => Some(replacement),
            _ => Some(parent),
        }
    }
}

/// Selects every document's parent. `layer_index[i]` is the position of
/// document `i`'s layer in the layerOrder (`None` for documents without a
/// layer and for control documents; they take no part).
pub fn select_parents(
    documents: &[Document],
    layer_index: &[Option<usize>],
) -> Result<Vec<Option<usize>>, LayeringError> {
    // Index candidate parents by each of their labels.
    let mut by_label: HashMap<(String, String), Vec<usize>> = HashMap::new();
    for (i, document) in documents.iter().enumerate() {
        if layer_index[i].is_none() {
            continue;
        }
        for entry in label_entries(&document.labels) {
            by_label.entry(entry).or_default().push(i);
        }
    }

    let mut parents = vec![None; documents.len()];
    for (child_index, child) in documents.iter().enumerate() {
        let Some(child_layer) = layer_index[child_index] else {
            continue;
        };
        let Some((first_key, first_value)) = child.parent_selector.first() else {
            continue;
        };
        let lookup = (first_key.text().to_owned(), first_value.label_index_text());
        let Some(candidates) = by_label.get(&lookup) else {
            continue;
        };
        let mut matches: Vec<(usize, usize)> = Vec::new();
        for &candidate_index in candidates {
            if candidate_index == child_index {
                continue;
            }
            let candidate = &documents[candidate_index];
            let is_match = child.parent_selector.iter().all(|(key, wanted)| {
                candidate
                    .labels
                    .get(key)
                    .is_some_and(|label| label.py_eq(wanted))
            });
            if !is_match {
                continue;
            }
            if candidate.schema != child.schema {
                return Err(LayeringError::InvalidDocumentParent {
                    document: child.reference.clone(),
                    parent: candidate.reference.clone(),
                    reason: "Child has parentSelector which references parent, but their `schema`s do not match.".to_owned(),
                });
            }
            let Some(candidate_layer) = layer_index[candidate_index] else {
                continue;
            };
            if candidate_layer >= child_layer {
                return Err(LayeringError::InvalidDocumentParent {
                    document: child.reference.clone(),
                    parent: candidate.reference.clone(),
                    reason: format!(
                        "Child has parentSelector which references parent, but the child layer {} must be lower than the parent layer {}.",
                        child.layer.as_deref().unwrap_or(""),
                        candidate.layer.as_deref().unwrap_or("")
                    ),
                });
            }
            matches.push((candidate_layer, candidate_index));
        }
        // Deckhand's count: walking layers from the top, every match adds
        // one and a match that displaces the parent from a higher layer
        // takes one away again. So duplicates in any layer that was the
        // nearest at its time count.
        matches.sort();
        let mut count = 0;
        let mut parent: Option<(usize, usize)> = None;
        for &(layer, index) in &matches {
            match parent {
                Some((parent_layer, _)) if layer > parent_layer => parent = Some((layer, index)),
                Some(_) => count += 1,
                None => {
                    parent = Some((layer, index));
                    count = 1;
                }
            }
        }
        if count > 1 {
            return Err(LayeringError::IndeterminateDocumentParent {
                document: child.reference.clone(),
                found: count,
                candidates: DocumentList(
                    matches
                        .iter()
                        .map(|&(_, index)| documents[index].reference.clone())
                        .collect(),
                ),
            });
        }
        parents[child_index] = parent.map(|(_, index)| index);
    }
    Ok(parents)
}

/// Checks the replacement rules and links replaced parents to their
/// replacement.
pub fn check_replacements(
    documents: &[Document],
    parents: Vec<Option<usize>>,
) -> Result<Family, LayeringError> {
    let invalid = |index: usize, reason: &str| LayeringError::InvalidDocumentReplacement {
        document: documents[index].reference.clone(),
        reason: reason.to_owned(),
    };
    let mut replaced_by: Vec<Option<usize>> = vec![None; documents.len()];
    for (index, document) in documents.iter().enumerate() {
        if document.is_control {
            continue;
        }
        let parent = parents[index];
        if document.is_replacement {
            let Some(parent) = parent else {
                return Err(invalid(
                    index,
                    "The document has `replacement: true` but does not have a parent.",
                ));
            };
            let parent_document = &documents[parent];
            if parent_document.schema != document.schema || parent_document.name != document.name {
                return Err(invalid(
                    index,
                    "Replacement document must have the same `schema` and `metadata.name` as its parent.",
                ));
            }
            if parent_document.is_replacement {
                return Err(invalid(
                    parent,
                    "A replacement document cannot itself be replaced by another document.",
                ));
            }
            if replaced_by[parent].is_some() {
                return Err(invalid(
                    index,
                    "Its parent is already replaced by another replacement document.",
                ));
            }
            replaced_by[parent] = Some(index);
        } else if let Some(parent) = parent {
            let parent_document = &documents[parent];
            if parent_document.schema == document.schema && parent_document.name == document.name {
                return Err(invalid(
                    index,
                    "Non-replacement documents cannot have the same `schema` and `metadata.name` as their parent. Either add a parent selector or set `replacement: true`.",
                ));
            }
        }
    }

    let mut by_identity: BTreeMap<(&str, &str), usize> = BTreeMap::new();
    for (index, document) in documents.iter().enumerate() {
        if document.is_control || document.is_replacement {
            continue;
        }
        let key = (document.schema.as_str(), document.name.as_str());
        if by_identity.insert(key, index).is_some() {
            return Err(invalid(
                index,
                "More than one document with the same name and schema was found, but none has `replacement: true`. Ensure that only 2 documents exist for each replacement and that one has `replacement: true` and the other `replacement: false`.",
            ));
        }
    }
    Ok(Family {
        parent: parents,
        replaced_by,
    })
}
