//! Redaction of destinations that take values from encrypted sources
//! (spec §9.8), as Deckhand's engine does when it is not asked for
//! cleartext secrets (Pegleg's default): such a destination's
//! `metadata.storagePolicy` becomes `encrypted`, and the `src.path` and
//! `dest.path` of each substitution that read an encrypted source are
//! replaced by the SHA-256 hex digest of their JSON text (Python's
//! `json.dumps`). The rendered data itself is left as it is.

use sha2::{Digest, Sha256};

use super::document::Document;
use super::plan::Plan;
use crate::yaml::Node;

/// The substitutions of document `index` (positions in its
/// `metadata.substitutions`) whose source is an encrypted document.
pub(crate) fn encrypted_substitutions(plan: &Plan, index: usize) -> Vec<usize> {
    let Some(document) = plan.documents.get(index) else {
        return Vec::new();
    };
    encrypted_positions(document, |schema, name| {
        plan.sources
            .get(&(schema.to_owned(), name.to_owned()))
            .and_then(|&source| plan.documents.get(source))
            .is_some_and(|source| source.is_encrypted)
    })
}

/// The positions of `document`'s substitutions whose source (schema, name)
/// `is_encrypted` says is an encrypted document.
pub(crate) fn encrypted_positions(
    document: &Document,
    is_encrypted: impl Fn(&str, &str) -> bool,
) -> Vec<usize> {
    document
        .substitutions
        .iter()
        .enumerate()
        .filter(|(_, substitution)| is_encrypted(&substitution.src.schema, &substitution.src.name))
        .map(|(position, _)| position)
        .collect()
}

/// Redacts the output node of a document whose substitutions at
/// `positions` read encrypted sources; does nothing when there are none.
pub(crate) fn redact_node(document: &mut Node, positions: &[usize]) {
    if positions.is_empty() {
        return;
    }
    let Some(metadata) = document.get_mut("metadata") else {
        return;
    };
    metadata.set("storagePolicy", Node::new_string("encrypted"));
    let Some(substitutions) = metadata.get_mut("substitutions") else {
        return;
    };
    for &position in positions {
        let Some(substitution) = substitutions.content.get_mut(position) else {
            continue;
        };
        if let Some(src) = substitution.get_mut("src") {
            hash_path(src);
        }
        match substitution.get_mut("dest") {
            Some(dest) if dest.is_sequence() => dest.content.iter_mut().for_each(hash_path),
            Some(dest) => hash_path(dest),
            None => {}
        }
    }
}

/// Replaces `path` in a `src` or `dest` mapping by its digest.
fn hash_path(place: &mut Node) {
    let Some(path) = place.get("path").filter(|path| path.is_scalar()) else {
        return;
    };
    let digest = json_sha256(&path.value);
    place.set("path", Node::new_string(digest));
}

/// SHA-256 hex of `json.dumps(text)` (Python's defaults: ASCII only).
fn json_sha256(text: &str) -> String {
    let digest = Sha256::digest(python_json_string(text).as_bytes());
    digest.iter().map(|byte| format!("{byte:02x}")).collect()
}

/// A string as Python's `json.dumps` writes it with `ensure_ascii=True`:
/// serde_json's escapes (the same for `"`, `\\` and control characters),
/// then everything outside printable ASCII as `\uXXXX` UTF-16 units.
fn python_json_string(text: &str) -> String {
    let json = serde_json::Value::from(text).to_string();
    let mut out = String::with_capacity(json.len());
    for c in json.chars() {
        if matches!(c, ' '..='~') {
            out.push(c);
        } else {
            for unit in c.encode_utf16(&mut [0u16; 2]) {
                out.push_str(&format!("\\u{unit:04x}"));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strings_are_written_as_python_json_dumps_writes_them() {
        assert_eq!(python_json_string(".a.b"), "\".a.b\"");
        assert_eq!(
            python_json_string("q\"\\\n\u{1}"),
            "\"q\\\"\\\\\\n\\u0001\""
        );
        assert_eq!(python_json_string("é😀"), "\"\\u00e9\\ud83d\\ude00\"");
        assert_eq!(
            python_json_string("\u{8}\u{c}\u{1f}\u{7f}"),
            "\"\\b\\f\\u001f\\u007f\""
        );
    }

    #[test]
    fn digests_are_sha256_of_the_json_text() {
        // hashlib.sha256(json.dumps(".").encode()).hexdigest()
        assert_eq!(
            json_sha256("."),
            "7299b59de0b5dad3b622afc3bdf57544e505249c77a6d4254bd14b1fc9a4ade8"
        );
    }
}
