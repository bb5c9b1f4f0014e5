//! Deckhand-style document layering and substitution (`krender layer render`),
//! per `../shared/spec/deckhand-layering.md`.
//!
//! Layering is a pure function over decoded documents: files are parsed with
//! the YAML layer ([`crate::yaml`]), each document is converted into a plain
//! [`Value`], [`render()`] computes the rendered data, and the output documents
//! are the input nodes with their `data` replaced, encoded back with the YAML
//! layer. Nothing is written to stdout unless rendering succeeded.
//!
//! Modules: `document` (metadata and format checks), `parent` (parent
//! selection, replacement rules), `actions` (merge/replace/delete), `path`
//! (the JSONPath subset), `substitution`, `graph` (Kahn levels, cycles),
//! `render` (orchestration, parallel levels), `value` (the value model) and
//! `error` (one variant per Deckhand error class).

pub mod actions;
pub mod document;
pub mod error;
pub mod graph;
pub mod incremental;
pub mod parent;
pub mod path;
mod plan;
mod redact;
pub mod render;
mod shared;
pub mod substitution;
pub mod value;
pub(crate) mod yaml11;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rayon::prelude::*;

pub use document::InputDocument;
pub use error::LayeringError;
pub use incremental::{LayerRender, LayeringSession};
pub use render::{RenderedDocument, render, render_with};
pub use substitution::SubstitutionOptions;
pub use value::Value;

use crate::yaml::{Encoder, Node};

/// A document read from a file: its YAML node (kept for output, so metadata
/// is written back as it was read) and its decoded form.
#[derive(Clone, Debug)]
pub struct LoadedDocument {
    /// The document's root node.
    pub node: Node,
    /// The decoded document.
    pub input: InputDocument,
}

/// Loads, renders and encodes the document set in `paths`; returns the
/// multi-document YAML to print.
pub fn render_paths(paths: &[PathBuf]) -> Result<String, LayeringError> {
    render_paths_with(paths, SubstitutionOptions::default()).map(|(text, _)| text)
}

/// [`render_paths`] under `options`, with the warnings of what they let
/// through.
pub fn render_paths_with(
    paths: &[PathBuf],
    options: SubstitutionOptions,
) -> Result<(String, Vec<String>), LayeringError> {
    let loaded = load_paths(paths)?;
    let (mut nodes, inputs): (Vec<Node>, Vec<InputDocument>) =
        loaded.into_iter().map(|l| (l.node, l.input)).unzip();
    let (rendered, warnings) = render_with(&inputs, options)?;
    drop_in_background(inputs);
    let text = encode_output(&mut nodes, &rendered);
    drop_in_background((nodes, rendered));
    Ok((text, warnings))
}

/// Frees a large tree on a short-lived thread: freeing tens of thousands of
/// small allocations took a tenth of the command's time, and nothing waits
/// for it (at process exit the thread is simply abandoned). If no thread can
/// be started, the value is freed here.
fn drop_in_background<T: Send + 'static>(value: T) {
    let _ = std::thread::Builder::new()
        .name("krender-free".to_owned())
        .spawn(move || drop(value));
}

/// Encodes the rendered documents: each is its input node (`nodes` is
/// indexed by [`RenderedDocument::input`]) with `data` set to the rendered
/// value. The nodes' `data` entries are overwritten in place rather than
/// cloning whole documents, which dominated the command's time.
pub fn encode_output(nodes: &mut [Node], rendered: &[RenderedDocument]) -> String {
    let mut out = String::with_capacity(rendered.len() * 256);
    let mut encoder = Encoder::new(&mut out);
    for document in rendered {
        let Some(node) = nodes.get_mut(document.input) else {
            continue;
        };
        node.set("data", document.data.to_node());
        redact::redact_node(node, &document.redacted_substitutions);
        encoder.encode(node);
    }
    out
}

/// Reads every file in `paths` (directories are walked recursively for
/// `.yaml`/`.yml` files, in sorted order) and decodes its documents.
/// Empty documents are skipped.
pub fn load_paths(paths: &[PathBuf]) -> Result<Vec<LoadedDocument>, LayeringError> {
    let mut files = Vec::new();
    for path in paths {
        collect_files(path, &mut files)?;
    }
    // Files are read and parsed in parallel; results are joined in file
    // order and the first error in file order wins, as a sequential loop
    // would report it.
    let per_file: Vec<Result<Vec<LoadedDocument>, LayeringError>> = files
        .par_iter()
        .map(|file| {
            let text = std::fs::read_to_string(file).map_err(|error| LayeringError::Read {
                path: file.display().to_string(),
                message: error.to_string(),
            })?;
            let display: Arc<str> = Arc::from(file.display().to_string());
            load_text(&text, &display)
        })
        .collect();
    let mut loaded = Vec::new();
    for documents in per_file {
        loaded.extend(documents?);
    }
    Ok(loaded)
}

/// Decodes the documents of one file's text.
pub fn load_text(text: &str, file: &Arc<str>) -> Result<Vec<LoadedDocument>, LayeringError> {
    let documents = crate::yaml::parse_documents(text).map_err(|error| LayeringError::Yaml {
        path: file.to_string(),
        message: error.to_string(),
    })?;
    let mut loaded = Vec::with_capacity(documents.len());
    for mut document in documents {
        // Move the root out of its document wrapper; cloning it cost as
        // much as parsing.
        let root = std::mem::replace(document.root_mut(), Node::new_mapping());
        let body = Value::from_node(&root).map_err(|message| LayeringError::Yaml {
            path: file.to_string(),
            message: message.to_owned(),
        })?;
        if body.is_null() {
            continue;
        }
        loaded.push(LoadedDocument {
            input: InputDocument {
                body,
                file: file.clone(),
                line: root.line as usize,
            },
            node: root,
        });
    }
    Ok(loaded)
}

fn collect_files(path: &Path, files: &mut Vec<PathBuf>) -> Result<(), LayeringError> {
    let metadata = std::fs::metadata(path).map_err(|error| LayeringError::Read {
        path: path.display().to_string(),
        message: error.to_string(),
    })?;
    if !metadata.is_dir() {
        files.push(path.to_owned());
        return Ok(());
    }
    let read_error = |error: std::io::Error| LayeringError::Read {
        path: path.display().to_string(),
        message: error.to_string(),
    };
    let mut entries: Vec<PathBuf> = std::fs::read_dir(path)
        .map_err(read_error)?
        .map(|entry| entry.map(|e| e.path()))
        .collect::<Result<_, _>>()
        .map_err(read_error)?;
    entries.sort();
    for entry in entries {
        if entry.is_dir() {
            collect_files(&entry, files)?;
        } else if entry
            .extension()
            .is_some_and(|ext| ext == "yaml" || ext == "yml")
        {
            files.push(entry);
        }
    }
    Ok(())
}
