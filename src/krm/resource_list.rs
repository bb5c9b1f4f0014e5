//! The KRM function wire format: the `ResourceList` document kpt writes to a
//! function's stdin and reads back from its stdout (spec §8.1, §8.2), and the
//! same list as `fn render -o stdout` prints it and `-o unwrap` re-reads it
//! (spec §10).
//!
//! Encoding mirrors kyaml's `ByteWriter` with a wrapping kind: one document,
//! a mapping of untagged scalars `apiVersion`, `kind`, `items` (each item the
//! resource's *mapping* node, so document-level comments are not on the
//! wire), then optionally `functionConfig`, emitted with compact sequences.
//! Decoding mirrors kyaml's `ByteReader`: the §7.2 document split, one fresh
//! parse per piece, fresh index annotations on every document, and the
//! `ResourceList`/`List` unwrap.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::sync::LazyLock;

use rayon::prelude::*;
use regex::Regex;

use super::resource::{self, set_annotation};
use crate::yaml::node::{Node, NodeKind, Style, tag};
use crate::yaml::{Encoder, SeqIndent, YamlError, parse_document};

/// `apiVersion` of the wrapping list.
pub const RESOURCE_LIST_API_VERSION: &str = "config.kubernetes.io/v1";
/// `kind` of the wrapping list.
pub const RESOURCE_LIST_KIND: &str = "ResourceList";

/// A problem reading a function's output or doing the annotation
/// bookkeeping around a call. `Display` is kyaml's text.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error, miette::Diagnostic)]
pub enum WireError {
    /// A line starting with `---` that is not a document separator.
    #[error("invalid document separator: {0}")]
    #[diagnostic(code(krender::krm::invalid_separator))]
    InvalidSeparator(String),
    /// go-yaml rejected a document of the output.
    #[error("MalformedYAMLError: {0}")]
    #[diagnostic(code(krender::krm::malformed_yaml))]
    Malformed(YamlError),
    /// A `ResourceList` came with other documents.
    #[error("a single document is expected")]
    #[diagnostic(code(krender::krm::multiple_documents))]
    NotSingleDocument,
    /// A node where another kind was expected (kyaml's `ErrorIfInvalid`),
    /// e.g. a function that turned a mapping into a scalar.
    #[error("wrong node kind: expected {expected} but got {found}: node contents:\n{contents}")]
    #[diagnostic(code(krender::krm::wrong_node_kind))]
    WrongNodeKind {
        /// go-yaml's name of the expected kind (`MappingNode`).
        expected: &'static str,
        /// go-yaml's name of the kind found.
        found: &'static str,
        /// The offending node, encoded.
        contents: String,
    },
    /// kyaml's field-order sync failed (`failed to sync field order: "…"`).
    #[error("failed to sync field order: {0}")]
    #[diagnostic(code(krender::krm::sync_order))]
    SyncOrder(String),
    /// A document has neither `apiVersion`, `kind` nor `metadata`.
    #[error("missing Resource metadata")]
    #[diagnostic(code(krender::krm::missing_metadata))]
    MissingMetadata,
    /// Legacy and internal path/index/id annotations disagree
    /// (`resource input to function has mismatched legacy and internal path annotations`).
    #[error("resource input to function has mismatched legacy and internal {0} annotations")]
    #[diagnostic(code(krender::krm::mismatched_annotations))]
    MismatchedAnnotations(&'static str),
    /// Some input resources use the legacy annotations and others the
    /// internal ones.
    #[error("the annotation formatting in the input resources is not consistent")]
    #[diagnostic(code(krender::krm::inconsistent_annotations))]
    InconsistentAnnotations,
}

/// go-yaml's name for a node kind, as kyaml prints it.
pub(crate) fn kind_name(kind: NodeKind) -> &'static str {
    match kind {
        NodeKind::Document => "DocumentNode",
        NodeKind::Sequence => "SequenceNode",
        NodeKind::Mapping => "MappingNode",
        NodeKind::Scalar => "ScalarNode",
        NodeKind::Alias => "AliasNode",
    }
}

/// kyaml's `ErrorIfInvalid` failure for `node`.
pub(crate) fn wrong_node_kind(expected: NodeKind, node: &Node) -> WireError {
    WireError::WrongNodeKind {
        expected: kind_name(expected),
        found: kind_name(node.kind),
        contents: crate::yaml::to_string(node, SeqIndent::Compact),
    }
}

/// What a function wrote to stdout, read as kyaml's `ByteReader` reads it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FunctionOutput {
    /// The resources: the list's items (bare nodes, usually mappings) when
    /// the output was a `ResourceList`/`List`, otherwise each document
    /// (Document nodes) with fresh index annotations.
    pub items: Vec<Node>,
    /// The list's `results` value, when present.
    pub results: Option<Node>,
    /// The list's `functionConfig` value, when present.
    pub function_config: Option<Node>,
}

/// The `ResourceList` kpt writes to a function's stdin: `items` are the
/// resources (Document or Mapping nodes; only their root mapping goes on
/// the wire) with all their annotations, `function_config` the step's
/// config (its root node is embedded).
pub fn encode_function_input(items: &[Node], function_config: Option<&Node>) -> String {
    encode_list(items.iter().map(wire_item).collect(), function_config, &[])
}

/// The `ResourceList` `fn render -o stdout` prints: the reader annotations
/// are kept except `internal.config.kubernetes.io/package-path`; no
/// `functionConfig`, no `results`.
pub fn encode_output_list(items: &[Node]) -> String {
    encode_output_list_owned(items.iter().map(|item| item.root().clone()).collect())
}

/// [`encode_output_list`] on resources the caller gives up (a render's
/// final output: no copy of the whole tree is made).
pub fn encode_output_list_owned(items: Vec<Node>) -> String {
    encode_list(items, None, &[resource::PACKAGE_PATH])
}

fn encode_list(items: Vec<Node>, function_config: Option<&Node>, clear: &[&str]) -> String {
    let prepare = |item: Node| {
        let mut root = item.into_root();
        for key in clear {
            resource::remove_annotation(&mut root, key);
        }
        clear_empty_annotations_only(&mut root);
        root
    };
    if items.len() < PARALLEL_ENCODE_FROM {
        let roots = items.into_iter().map(prepare).collect();
        return encode_wrapped(roots, function_config);
    }
    let roots: Vec<Node> = items.into_par_iter().map(prepare).collect();
    let chunk_len = chunk_len(roots.len());
    encode_chunked(roots, function_config, chunk_len)
}

/// Lists at least this long are encoded in chunks on rayon (a DFS root's
/// output or input: the whole tree).
const PARALLEL_ENCODE_FROM: usize = 256;

/// Items per chunk: a few chunks per thread, so uneven items even out.
fn chunk_len(items: usize) -> usize {
    const MIN_CHUNK: usize = 64;
    MIN_CHUNK.max(items / (4 * rayon::current_num_threads()).max(1))
}

/// The wrapping ResourceList document of `roots`, encoded.
fn encode_wrapped(roots: Vec<Node>, function_config: Option<&Node>) -> String {
    let mut sequence = Node::new_sequence();
    sequence.tag = Cow::Borrowed("");
    sequence.content = roots;
    let mut list = Node::new_mapping();
    list.tag = Cow::Borrowed("");
    let entries = [
        (
            "apiVersion",
            Node::new_untagged_scalar(RESOURCE_LIST_API_VERSION),
        ),
        ("kind", Node::new_untagged_scalar(RESOURCE_LIST_KIND)),
        ("items", sequence),
    ];
    for (key, value) in entries {
        list.content.push(Node::new_untagged_scalar(key));
        list.content.push(value);
    }
    if let Some(config) = function_config {
        list.content
            .push(Node::new_untagged_scalar("functionConfig"));
        list.content.push(config.root().clone());
    }
    crate::yaml::to_string(&Node::new_document(list), SeqIndent::Compact)
}

/// What every encoded ResourceList with items starts with.
const LIST_HEADER: &str = "apiVersion: config.kubernetes.io/v1\nkind: ResourceList\nitems:\n";

/// [`encode_wrapped`] with the items encoded in chunks, in parallel: each
/// chunk is a whole list of its own, and the lists are joined by dropping
/// every header but the first. The emitter writes an item the same way
/// whatever item comes next, except for comments it holds back past the
/// item's end (a foot comment, and the blank line go-yaml puts after one)
/// or writes before the "- " (a head comment on the item): chunks are cut
/// only between items without either. The function config goes with the
/// last chunk.
fn encode_chunked(roots: Vec<Node>, function_config: Option<&Node>, chunk_len: usize) -> String {
    let cut_after: Vec<bool> = roots
        .par_iter()
        .map(|root| !has_foot_comment(root))
        .collect();
    let cut_before: Vec<bool> = roots
        .par_iter()
        .map(|root| root.head_comment.is_empty())
        .collect();
    let mut chunks: Vec<Vec<Node>> = Vec::new();
    let mut current = Vec::with_capacity(chunk_len);
    let count = roots.len();
    for (i, root) in roots.into_iter().enumerate() {
        current.push(root);
        let can_cut = i + 1 < count
            && cut_after.get(i).copied().unwrap_or(false)
            && cut_before.get(i + 1).copied().unwrap_or(false);
        if current.len() >= chunk_len && can_cut {
            chunks.push(std::mem::replace(
                &mut current,
                Vec::with_capacity(chunk_len),
            ));
        }
    }
    chunks.push(current);
    let last = chunks.len() - 1;
    let texts: Vec<String> = chunks
        .into_par_iter()
        .enumerate()
        .map(|(i, chunk)| encode_wrapped(chunk, function_config.filter(|_| i == last)))
        .collect();
    let mut joined = String::with_capacity(texts.iter().map(String::len).sum());
    for (i, text) in texts.iter().enumerate() {
        // Every chunk has items, so every text starts with the header.
        debug_assert!(text.starts_with(LIST_HEADER));
        let body = match text.strip_prefix(LIST_HEADER) {
            Some(body) if i > 0 => body,
            _ => text,
        };
        joined.push_str(body);
    }
    joined
}

/// Whether any node of `node`'s tree has a foot comment.
fn has_foot_comment(node: &Node) -> bool {
    !node.foot_comment.is_empty() || node.content.iter().any(has_foot_comment)
}

/// The node kyaml writes for `item` in a function input's `items` (see
/// `encode_list`): its root (document comments stay behind), without empty
/// annotations.
pub(crate) fn wire_item(item: &Node) -> Node {
    let mut root = item.root().clone();
    clear_empty_annotations_only(&mut root);
    root
}

/// kyaml's `ClearEmptyAnnotations`: drops `metadata.annotations` when it is
/// an empty mapping or null (but, unlike the package writer, keeps an empty
/// `metadata`).
pub(crate) fn clear_empty_annotations_only(resource: &mut Node) {
    let Some(metadata) = resource.root_mut().get_mut("metadata") else {
        return;
    };
    let empty = metadata.get("annotations").is_some_and(|annotations| {
        annotations.content.is_empty() && annotations.kind != NodeKind::Alias
    });
    if empty {
        metadata.remove("annotations");
    }
}

/// kyaml's `SetAnnotation` as kyaml's own code calls it: new values are
/// single-quoted (see [`set_annotation`] for the rest).
pub(crate) fn kyaml_set_annotation(resource: &mut Node, key: &str, value: &str) {
    set_annotation(resource, key, value, Style::SINGLE_QUOTED);
}

/// The `functionConfig` kpt builds from a step's `configMap:` — a
/// `ConfigMap` named `function-input` whose `data` is a flow mapping with
/// the keys sorted and every value tagged `!!str` (so values that would
/// read as another type are double-quoted on the wire).
pub fn config_map_function_config(data: &BTreeMap<String, String>) -> Node {
    let mut metadata = Node::new_mapping();
    metadata.content.push(Node::new_untagged_scalar("name"));
    metadata
        .content
        .push(Node::new_untagged_scalar("function-input"));
    let mut values = Node::new_mapping();
    values.style = Style::FLOW;
    for (key, value) in data {
        values.content.push(Node::new_untagged_scalar(key.as_str()));
        values.content.push(Node::new_string(value.as_str()));
    }
    let mut config = Node::new_mapping();
    let entries = [
        ("apiVersion", Node::new_untagged_scalar("v1")),
        ("kind", Node::new_untagged_scalar("ConfigMap")),
        ("metadata", metadata),
        ("data", values),
    ];
    for (key, value) in entries {
        config.content.push(Node::new_untagged_scalar(key));
        config.content.push(value);
    }
    config
}

static SEPARATOR: LazyLock<Regex> = LazyLock::new(|| {
    // A literal pattern; failing to compile it is caught by every test run.
    Regex::new(r"\n---.*\n").unwrap_or_else(|_| unreachable!("valid separator regex"))
});

/// kyaml's `splitDocuments` (spec §7.2) on CRLF-normalised text: pieces
/// between `\n---…\n` separator lines, each but the last keeping its final
/// `\n`. A separator line with anything but a comment after `---` is an
/// error.
pub(crate) fn split_documents(text: &str) -> Result<Vec<&str>, WireError> {
    let mut pieces = Vec::new();
    let mut previous = 0;
    for found in SEPARATOR.find_iter(text) {
        let line = found.as_str().trim();
        let rest = line.get(3..).unwrap_or("").trim();
        if !rest.is_empty() && !rest.starts_with('#') {
            return Err(WireError::InvalidSeparator(line.to_owned()));
        }
        pieces.push(&text[previous..found.start() + 1]);
        previous = found.end();
    }
    pieces.push(&text[previous..]);
    Ok(pieces)
}

/// Reads a function's stdout as kyaml's `ByteReader` does.
pub fn decode_function_output(text: &str) -> Result<FunctionOutput, WireError> {
    let normalized = text.replace("\r\n", "\n");
    let pieces = split_documents(&normalized)?;
    let n_pieces = pieces.len();
    let mut output = FunctionOutput::default();
    let mut index = 0usize;
    for piece in pieces {
        let Some(mut document) = parse_document(piece).map_err(WireError::Malformed)? else {
            continue;
        };
        if document.content.is_empty() || document.root().is_null() {
            continue;
        }
        if is_list(document.root()) {
            if n_pieces != 1 {
                return Err(WireError::NotSingleDocument);
            }
            let mut root = std::mem::replace(document.root_mut(), Node::new_mapping());
            if let Some((_, items)) = root.remove("items") {
                output.items.extend(items.content);
            }
            output.function_config = root.remove("functionConfig").map(|(_, value)| value);
            output.results = root.remove("results").map(|(_, value)| value);
            continue;
        }
        // kyaml annotates every document it reads with its stream index.
        if !document.root().is_mapping() {
            return Err(wrong_node_kind(NodeKind::Mapping, document.root()));
        }
        copy_legacy_annotations(&mut document);
        let index_text = index.to_string();
        kyaml_set_annotation(&mut document, resource::LEGACY_INDEX, &index_text);
        kyaml_set_annotation(&mut document, resource::INDEX, &index_text);
        output.items.push(document);
        index += 1;
    }
    Ok(output)
}

/// kyaml unwraps a document whose `kind` is `ResourceList` or `List` and
/// that has `items` or `functionConfig`.
fn is_list(root: &Node) -> bool {
    root.is_mapping()
        && matches!(root.get_str(&["kind"]), Some("ResourceList" | "List"))
        && (root.get("items").is_some() || root.get("functionConfig").is_some())
}

/// kyaml's `CopyLegacyAnnotations`: for path, index and id, fills whichever
/// of the legacy/internal pair is empty from the other.
pub(crate) fn copy_legacy_annotations(resource: &mut Node) {
    let pairs = [
        (resource::LEGACY_PATH, resource::PATH),
        (resource::LEGACY_INDEX, resource::INDEX),
        (resource::LEGACY_ID, resource::ID),
    ];
    for (legacy, internal) in pairs {
        // Read both through one lookup of the annotations mapping; copy
        // (allocate) only when one side is missing, the rare case.
        let (legacy_value, internal_value) = {
            let annotations = resource::annotations(resource);
            (
                resource::annotation_in(annotations, legacy),
                resource::annotation_in(annotations, internal),
            )
        };
        if !internal_value.is_empty() {
            if legacy_value.is_empty() {
                let value = internal_value.to_owned();
                kyaml_set_annotation(resource, legacy, &value);
            }
        } else if !legacy_value.is_empty() {
            let value = legacy_value.to_owned();
            kyaml_set_annotation(resource, internal, &value);
        }
    }
}

/// `fn render -o unwrap`: re-reads the `-o stdout` list and prints its items
/// as a `---`-joined stream, each in its own sequence-indent style, with the
/// path, index and seqindent annotations removed.
pub fn unwrap_output_list(text: &str) -> Result<String, WireError> {
    let output = decode_function_output(text)?;
    let mut out = String::new();
    let mut encoder = Encoder::new(&mut out);
    for mut item in output.items {
        let seq_indent = match resource::annotation(&item, resource::SEQ_INDENT) {
            Some("wide") => SeqIndent::Wide,
            _ => SeqIndent::Compact,
        };
        for key in [
            resource::INDEX,
            resource::LEGACY_INDEX,
            resource::SEQ_INDENT,
            resource::PATH,
            resource::LEGACY_PATH,
        ] {
            resource::remove_annotation(&mut item, key);
        }
        clear_empty_annotations_only(&mut item);
        encoder.set_seq_indent(seq_indent);
        encoder.encode(&item);
    }
    Ok(out)
}

/// True when `node` is a scalar tagged `!!null` or missing — kyaml's
/// `IsMissingOrNull` for a present node.
pub(crate) fn is_null(node: &Node) -> bool {
    node.kind == NodeKind::Scalar && node.tag == tag::NULL
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::{
        WireError, config_map_function_config, encode_chunked, encode_wrapped, split_documents,
    };
    use crate::yaml::node::{Node, NodeKind, Style, tag};

    /// The root of every mapping document in the YAML files below `dir`.
    fn fixture_roots(dir: &std::path::Path, roots: &mut Vec<Node>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        let mut paths: Vec<_> = entries.flatten().map(|entry| entry.path()).collect();
        paths.sort();
        for path in paths {
            if path.is_dir() {
                fixture_roots(&path, roots);
            } else if path
                .extension()
                .is_some_and(|ext| ext == "yaml" || ext == "yml")
            {
                let text = std::fs::read_to_string(&path).unwrap_or_default();
                if let Ok(documents) = crate::yaml::parse_documents(&text) {
                    roots.extend(
                        documents
                            .iter()
                            .map(Node::root)
                            .filter(|root| root.is_mapping())
                            .cloned(),
                    );
                }
            }
        }
    }

    #[test]
    fn lists_encoded_in_chunks_join_to_the_whole_list() {
        // Comments at item edges (kept whole), block scalars with kept
        // trailing lines, flow collections and anchors, then every
        // document of the fixtures.
        let edges = "# head of a\na: 1 # line\nb:\n  c: 2\n  # foot of c\n---\n# head of b\nk: |+\n  text\n\n---\nflow: {x: 1, y: [1, 2]}\nz: &anchor v\nw: *anchor\n---\nlast: x\n# foot of last\n---\nafter: foot\n";
        let mut roots: Vec<Node> = crate::yaml::parse_documents(edges)
            .unwrap()
            .iter()
            .map(|document| document.root().clone())
            .collect();
        fixture_roots(
            &std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures"),
            &mut roots,
        );
        assert!(roots.len() > 300, "only {} documents", roots.len());
        let config =
            config_map_function_config(&BTreeMap::from([("k".to_owned(), "v".to_owned())]));
        for function_config in [None, Some(&config)] {
            let whole = encode_wrapped(roots.clone(), function_config);
            for chunk_len in [1, 2, 7, 64] {
                let chunked = encode_chunked(roots.clone(), function_config, chunk_len);
                assert_eq!(chunked, whole, "chunks of {chunk_len}");
            }
        }
    }

    #[test]
    fn config_map_is_sorted_flow_with_string_values() {
        let mut data = BTreeMap::new();
        data.insert("num".to_owned(), "1".to_owned());
        data.insert("flag".to_owned(), "true".to_owned());
        data.insert("namespace".to_owned(), "staging".to_owned());
        let config = config_map_function_config(&data);
        let values = config.get("data").unwrap();
        assert_eq!(values.style, Style::FLOW);
        let keys: Vec<&str> = values.pairs().map(|(k, _)| k.value.as_str()).collect();
        assert_eq!(keys, ["flag", "namespace", "num"]);
        assert!(
            values
                .pairs()
                .all(|(_, v)| v.tag == tag::STR && v.kind == NodeKind::Scalar)
        );
        assert_eq!(
            config.get_str(&["metadata", "name"]),
            Some("function-input")
        );
    }

    #[test]
    fn split_keeps_newlines_and_rejects_bad_separators() {
        assert_eq!(
            split_documents("a: 1\n---\nb: 2\n").unwrap(),
            ["a: 1\n", "b: 2\n"]
        );
        assert_eq!(
            split_documents("a: 1\n--- # c\nb: 2").unwrap(),
            ["a: 1\n", "b: 2"]
        );
        assert_eq!(
            split_documents("a: 1\n---foo\nb: 2\n").unwrap_err(),
            WireError::InvalidSeparator("---foo".to_owned())
        );
        assert_eq!(split_documents("---\na: 1\n").unwrap(), ["---\na: 1\n"]);
    }
}
