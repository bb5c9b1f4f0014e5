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

use std::collections::BTreeMap;
use std::sync::LazyLock;

use rayon::prelude::*;
use regex::Regex;

use super::resource::{self, set_annotation};
use crate::yaml::encoder::PARALLEL_FROM;
use crate::yaml::node::{Node, NodeKind, Style, tag};
use crate::yaml::{Edit, Encoder, SeqIndent, SplicedItem, YamlError, parse_document};

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
    // Written from the items themselves: only one whose annotations kyaml
    // would re-create is copied (see `ItemEdits::of`).
    let Ok(views) = item_views(items, no_values, &[]);
    encode_views(items, &views, function_config)
}

/// The `ResourceList` `fn render -o stdout` prints: the reader annotations
/// are kept except `internal.config.kubernetes.io/package-path`; no
/// `functionConfig`, no `results`.
pub fn encode_output_list(items: &[Node]) -> String {
    let Ok(text) = encode_output_list_adjusted(items, no_values);
    text
}

/// No annotation to set, for [`item_views`].
fn no_values(_: &Node) -> Result<Vec<(&'static str, String)>, std::convert::Infallible> {
    Ok(Vec::new())
}

/// [`encode_output_list`] on resources the caller gives up (a render's
/// final output: no copy of the whole tree is made).
pub fn encode_output_list_owned(items: Vec<Node>) -> String {
    encode_list(items, None, &[resource::PACKAGE_PATH])
}

/// [`encode_output_list_owned`] written to `out` in pieces: a whole
/// tree's list is written chunk by chunk as it was encoded, not joined into
/// one more copy of itself first.
pub fn write_output_list_owned(
    items: Vec<Node>,
    out: &mut dyn std::io::Write,
) -> std::io::Result<()> {
    for piece in encode_list_texts(items, None, &[resource::PACKAGE_PATH]) {
        out.write_all(piece.as_bytes())?;
    }
    Ok(())
}

/// [`encode_output_list`] of `items` after
/// `set_annotation(item, key, value, SINGLE_QUOTED)` for each pair that
/// `annotations(item)` gives (its first error, in item order, is
/// returned), without copying the items: a render's final list, still held
/// by the engine (a watch session's memo), is written as it stands, the new
/// values and left-out annotations edited in as it is written. An item
/// whose annotations cannot be edited that way (one of the keys is missing
/// or not a scalar) is copied and changed.
pub fn encode_output_list_adjusted<E: Send>(
    items: &[Node],
    annotations: impl Fn(&Node) -> Result<Vec<(&'static str, String)>, E> + Sync,
) -> Result<String, E> {
    let views = item_views(items, annotations, &[resource::PACKAGE_PATH])?;
    Ok(encode_views(items, &views, None))
}

/// [`encode_output_list_adjusted`], taking each item's text from `texts`
/// where an earlier list written with them had an item written from the
/// same fields (with the same edits), and adding this list's texts to
/// `texts` (older ones are dropped once there are twice as many texts as
/// items). A watch session writes the whole tree's list after every edit,
/// and most items come out as they did last time: finding that out (a walk
/// over each item and a blake3 hash) costs a fraction of writing them.
pub fn encode_output_list_remembered<E: Send>(
    items: &[Node],
    annotations: impl Fn(&Node) -> Result<Vec<(&'static str, String)>, E> + Sync,
    texts: &ItemTexts,
) -> Result<String, E> {
    let views = item_views(items, annotations, &[resource::PACKAGE_PATH])?;
    let edits: Vec<Vec<Edit<'_>>> = views.iter().map(ItemView::edits).collect();
    let spliced = spliced_items(items, &views, &edits);
    Ok(encode_remembered(&spliced, texts).unwrap_or_else(|| encode_items(&spliced, None)))
}

/// The texts of the items of the lists written with them, by blake3 of
/// what each item is written from ([`crate::yaml::encoder::spliced_item_fingerprint`]).
/// A key covers a run of items where the list cannot be cut between them
/// (see [`cut_where`]); usually one item.
#[derive(Default)]
pub struct ItemTexts {
    texts: std::sync::Mutex<std::collections::HashMap<blake3::Hash, std::sync::Arc<str>>>,
}

impl ItemTexts {
    /// How many texts are kept.
    pub fn len(&self) -> usize {
        self.texts.lock().map_or(0, |texts| texts.len())
    }

    /// True when none is.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl std::fmt::Debug for ItemTexts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ItemTexts")
            .field("len", &self.len())
            .finish()
    }
}

/// The list of `items` from `texts` and, for the items not there, the
/// encoder; `None` where `texts` cannot be used (the caller writes the list
/// itself).
fn encode_remembered(items: &[SplicedItem<'_>], texts: &ItemTexts) -> Option<String> {
    use std::sync::Arc;
    if items.len() < PARALLEL_FROM {
        return None;
    }
    // One walk over each item gives both its key and whether the list may
    // be cut after it (no foot comment written).
    let facts: Vec<(blake3::Hash, bool)> = items
        .par_iter()
        .map_init(Vec::new, |buffer, item| {
            buffer.clear();
            let foot = crate::yaml::encoder::spliced_item_fingerprint(item, buffer);
            (blake3::hash(buffer), !foot)
        })
        .collect();
    let cut_after: Vec<bool> = facts.iter().map(|(_, cut)| *cut).collect();
    let runs = cut_where(items, 1, &cut_after);
    let mut keys = Vec::with_capacity(runs.len());
    let mut start = 0;
    for run in &runs {
        let hashes = &facts[start..start + run.len()];
        start += run.len();
        keys.push(match hashes {
            [(hash, _)] => *hash,
            _ => {
                let mut hasher = blake3::Hasher::new();
                for (hash, _) in hashes {
                    hasher.update(hash.as_bytes());
                }
                hasher.finalize()
            }
        });
    }
    let known: Vec<Option<Arc<str>>> = {
        let map = texts.texts.lock().ok()?;
        keys.iter().map(|key| map.get(key).cloned()).collect()
    };
    let bodies: Vec<Option<Arc<str>>> = runs
        .par_iter()
        .zip(known)
        .map(|(run, known)| {
            known.or_else(|| {
                // Each run written as a list of its own, as a chunk is.
                let text = join_pieces(encode_wrapped(run, None));
                text.strip_prefix(LIST_HEADER).map(Arc::from)
            })
        })
        .collect();
    let bodies: Vec<Arc<str>> = bodies.into_iter().collect::<Option<_>>()?;
    let length = bodies.iter().map(|body| body.len()).sum::<usize>();
    let mut out = String::with_capacity(LIST_HEADER.len() + length);
    out.push_str(LIST_HEADER);
    for body in &bodies {
        out.push_str(body);
    }
    // Add this list's texts; older ones go once the map has more than
    // twice as many texts as this list.
    let mut map = texts.texts.lock().ok()?;
    if map.len() > 2 * keys.len() {
        map.clear();
    }
    for (key, body) in keys.into_iter().zip(bodies) {
        map.entry(key).or_insert(body);
    }
    Some(out)
}

/// How each of `items` is written with the annotations `values` gives it
/// set and the `clear` ones removed (in parallel for long lists); the first
/// error in item order.
fn item_views<'i, E: Send>(
    items: &'i [Node],
    values: impl Fn(&Node) -> Result<Vec<(&'static str, String)>, E> + Sync,
    clear: &[&str],
) -> Result<Vec<ItemView<'i>>, E> {
    let view = |item: &'i Node| values(item).map(|values| item_view(item, &values, clear));
    let views: Vec<Result<ItemView<'i>, E>> = if items.len() < PARALLEL_FROM {
        items.iter().map(view).collect()
    } else {
        items.par_iter().map(view).collect()
    };
    views.into_iter().collect()
}

/// The list of `items`, each written as its view says.
fn encode_views(items: &[Node], views: &[ItemView<'_>], function_config: Option<&Node>) -> String {
    let edits: Vec<Vec<Edit<'_>>> = views.iter().map(ItemView::edits).collect();
    encode_items(&spliced_items(items, views, &edits), function_config)
}

/// Each of `items` as its view writes it, with the view's `edits`.
fn spliced_items<'a>(
    items: &'a [Node],
    views: &'a [ItemView<'_>],
    edits: &'a [Vec<Edit<'a>>],
) -> Vec<SplicedItem<'a>> {
    items
        .iter()
        .zip(views)
        .zip(edits)
        .map(|((item, view), edits)| SplicedItem {
            node: match view {
                ItemView::Copy(copy) => copy,
                ItemView::Edited(_) => item.root(),
            },
            edits,
        })
        .collect()
}

/// How `item` is written with `values` set and `clear` removed.
fn item_view<'i>(item: &'i Node, values: &[(&str, String)], clear: &[&str]) -> ItemView<'i> {
    if let Some(edits) = ItemEdits::of(item.root(), values, clear) {
        return ItemView::Edited(edits);
    }
    let mut copy = item.root().clone();
    for (key, value) in values {
        set_annotation(&mut copy, key, value, Style::SINGLE_QUOTED);
    }
    ItemView::Copy(prepare_item(copy, clear))
}

/// How a list written from borrowed items writes one of them.
enum ItemView<'i> {
    /// The item itself, edited as it is written.
    Edited(ItemEdits<'i>),
    /// A changed copy of the item.
    Copy(Node),
}

impl ItemView<'_> {
    fn edits(&self) -> Vec<Edit<'_>> {
        match self {
            ItemView::Edited(edits) => edits.edits(),
            ItemView::Copy(_) => Vec::new(),
        }
    }
}

/// The edits that write a resource root as [`prepare_item`] would leave it
/// after setting some existing annotations: new value nodes, and the
/// entries left out.
struct ItemEdits<'i> {
    values: Vec<(&'i Node, Node)>,
    omitted: Vec<&'i Node>,
}

impl<'i> ItemEdits<'i> {
    /// The edits for `root` with `values` set on its existing annotations
    /// and the `clear` annotations removed; `None` when only a copy can
    /// show the result (a key to set is missing or not a scalar, or is set
    /// twice).
    fn of(root: &'i Node, values: &[(&str, String)], clear: &[&str]) -> Option<ItemEdits<'i>> {
        let mut edits = ItemEdits {
            values: Vec::with_capacity(values.len()),
            omitted: Vec::new(),
        };
        let metadata = root.key_index("metadata").map(|i| &root.content[i + 1]);
        let entry =
            metadata.and_then(|metadata| metadata.key_index("annotations").map(|j| (metadata, j)));
        let Some((metadata, j)) = entry else {
            // No annotations: nothing to clear, and nothing can be set.
            return values.is_empty().then_some(edits);
        };
        let (annotations_key, annotations) = (&metadata.content[j], &metadata.content[j + 1]);
        // kyaml's ClearEmptyAnnotations drops an empty (or null) value;
        // setting one would re-create it elsewhere.
        let empty = annotations.content.is_empty() && annotations.kind != NodeKind::Alias;
        if empty {
            edits.omitted.push(annotations_key);
            return values.is_empty().then_some(edits);
        }
        if !annotations.is_mapping() {
            return values.is_empty().then_some(edits);
        }
        for (n, (key, value)) in values.iter().enumerate() {
            if values[..n].iter().any(|(earlier, _)| earlier == key) {
                return None;
            }
            let target = annotations.get(key).filter(|target| target.is_scalar())?;
            let mut with = target.clone();
            with.value = value.as_str().into();
            with.set_tag(tag::STR);
            edits.values.push((target, with));
        }
        let mut remaining = annotations.content.len() / 2;
        for key in clear {
            if let Some(i) = annotations.key_index(key) {
                edits.omitted.push(&annotations.content[i]);
                remaining -= 1;
            }
        }
        if remaining == 0 {
            edits.omitted.push(annotations_key);
        }
        Some(edits)
    }

    fn edits(&self) -> Vec<Edit<'_>> {
        let replaced = self
            .values
            .iter()
            .map(|(target, with)| Edit::Replace { target, with });
        let omitted = self.omitted.iter().map(|key| Edit::Omit { key });
        replaced.chain(omitted).collect()
    }
}

/// An item as a list writes it: its root, without the `clear` annotations
/// and without empty annotations.
fn prepare_item(item: Node, clear: &[&str]) -> Node {
    let mut root = item.into_root();
    for key in clear {
        resource::remove_annotation(&mut root, key);
    }
    clear_empty_annotations_only(&mut root);
    root
}

fn encode_list(items: Vec<Node>, function_config: Option<&Node>, clear: &[&str]) -> String {
    join_pieces(encode_list_texts(items, function_config, clear))
}

/// [`encode_list`] in pieces (see [`encode_wrapped`]).
fn encode_list_texts(
    items: Vec<Node>,
    function_config: Option<&Node>,
    clear: &[&str],
) -> Vec<String> {
    let roots: Vec<Node> = if items.len() < PARALLEL_FROM {
        items
            .into_iter()
            .map(|item| prepare_item(item, clear))
            .collect()
    } else {
        items
            .into_par_iter()
            .map(|item| prepare_item(item, clear))
            .collect()
    };
    encode_wrapped(&as_spliced(&roots), function_config)
}

/// `roots` written as they are.
fn as_spliced(roots: &[Node]) -> Vec<SplicedItem<'_>> {
    roots
        .iter()
        .map(|node| SplicedItem { node, edits: &[] })
        .collect()
}

/// The list of `items` (roots); the encoder writes a long one in chunks on
/// rayon.
fn encode_items(items: &[SplicedItem<'_>], function_config: Option<&Node>) -> String {
    join_pieces(encode_wrapped(items, function_config))
}

/// The pieces of [`encode_wrapped`] as one text; a list written in one
/// piece (most are) is not copied.
fn join_pieces(mut pieces: Vec<String>) -> String {
    if pieces.len() == 1 {
        return pieces.pop().unwrap_or_default();
    }
    pieces.concat()
}

/// The wrapping ResourceList document of `items` (roots), encoded, in the
/// pieces the encoder wrote it in (one, or a few for a long list): a whole
/// tree's list is written out piece by piece, not joined into one more
/// copy of itself first.
fn encode_wrapped(items: &[SplicedItem<'_>], function_config: Option<&Node>) -> Vec<String> {
    let mut sequence = Node::new_sequence();
    sequence.set_tag("");
    let mut list = Node::new_mapping();
    list.set_tag("");
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
    let document = Node::new_document(list);
    match document.root().get("items") {
        Some(slot) => {
            crate::yaml::encoder::to_pieces_spliced(&document, slot, items, SeqIndent::Compact)
        }
        None => Vec::new(),
    }
}

/// What every encoded ResourceList with items starts with.
const LIST_HEADER: &str = "apiVersion: config.kubernetes.io/v1\nkind: ResourceList\nitems:\n";

/// `items` cut into runs of at least `chunk_len` items (but the last),
/// only where the list can be cut: after an item that writes no foot
/// comment (`cut_after`; the emitter holds such a comment, and the blank
/// line go-yaml puts after one, past the item's end) and before one without
/// a head comment (written before the "- "). Each run written as a list of
/// its own then has the bytes it has in the whole list.
fn cut_where<'s, 'n>(
    items: &'s [SplicedItem<'n>],
    chunk_len: usize,
    cut_after: &[bool],
) -> Vec<&'s [SplicedItem<'n>]> {
    let mut chunks = Vec::new();
    let mut start = 0;
    for i in 0..items.len() {
        let can_cut = i + 1 < items.len()
            && cut_after.get(i).copied().unwrap_or(false)
            && items[i + 1].node.head_comment().is_empty();
        if i + 1 - start >= chunk_len && can_cut {
            chunks.push(&items[start..=i]);
            start = i + 1;
        }
    }
    chunks.push(&items[start..]);
    chunks
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
    node.kind == NodeKind::Scalar && node.tag() == tag::NULL
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::{
        ItemTexts, WireError, as_spliced, config_map_function_config, encode_function_input,
        encode_list, encode_output_list_adjusted, encode_output_list_owned,
        encode_output_list_remembered, encode_wrapped, resource, set_annotation, split_documents,
        wire_item,
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
    fn lists_written_in_pieces_join_to_the_whole_list() {
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
        let pool = |threads| {
            rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .build()
                .unwrap()
        };
        let (one, two) = (pool(1), pool(2));
        for function_config in [None, Some(&config)] {
            let items = as_spliced(&roots);
            let whole = one.install(|| encode_wrapped(&items, function_config));
            assert_eq!(whole.len(), 1, "one thread writes one piece");
            let pieces = two.install(|| encode_wrapped(&items, function_config));
            assert!(pieces.len() > 1, "two threads write the list in chunks");
            assert_eq!(pieces.concat(), whole.concat());
        }
    }

    #[test]
    fn lists_written_from_borrowed_items_match_the_edited_copies() {
        // Annotation shapes the edits must leave to a copy or get right:
        // missing, empty, null, aliased, non-scalar and repeated keys,
        // comments on the entries changed or left out, and an item whose
        // only annotation is cleared.
        let edges = "\
# document comment
apiVersion: v1
kind: A
metadata:
  name: plain
  annotations:
    # about the path
    config.kubernetes.io/path: a.yaml # line
    internal.config.kubernetes.io/path: \"a.yaml\"
    internal.config.kubernetes.io/package-path: /pkg # gone
    other: x
---
kind: B
metadata:
  name: none
---
kind: C
metadata:
  name: empty
  annotations: {}
---
kind: D
metadata:
  name: null
  annotations:
---
kind: E
base: &shared {config.kubernetes.io/path: x}
metadata:
  name: alias
  annotations: *shared
---
kind: F
metadata:
  name: listed
  annotations:
    config.kubernetes.io/path: [a]
    internal.config.kubernetes.io/path: b
---
kind: G
metadata:
  name: twice
  annotations:
    config.kubernetes.io/path: one
    config.kubernetes.io/path: two
    internal.config.kubernetes.io/path: b
---
kind: H
metadata:
  name: keep-only-package
  annotations:
    internal.config.kubernetes.io/package-path: /pkg
    # foot of the package path
---
kind: I
metadata:
  name: keep-other
  annotations: {other: y, internal.config.kubernetes.io/package-path: /pkg}
";
        let mut items: Vec<Node> = crate::yaml::parse_documents(edges).unwrap();
        fixture_roots(
            &std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures"),
            &mut items,
        );
        // Items named keep-* get no new values, the rest new paths.
        let values = |item: &Node| -> Result<Vec<(&'static str, String)>, String> {
            let name = item.root().get_str(&["metadata", "name"]).unwrap_or("");
            if name.starts_with("keep") {
                return Ok(Vec::new());
            }
            let path = format!("sub/{name}.yaml");
            Ok(vec![
                (resource::PATH, path.clone()),
                (resource::LEGACY_PATH, path),
            ])
        };
        // The items as the writer should see them: copies with the values set.
        fn copies(
            items: &[Node],
            values: impl Fn(&Node) -> Result<Vec<(&'static str, String)>, String>,
        ) -> Vec<Node> {
            items
                .iter()
                .map(|item| {
                    let mut copy = item.clone();
                    for (key, value) in values(item).unwrap() {
                        set_annotation(&mut copy, key, &value, Style::SINGLE_QUOTED);
                    }
                    copy
                })
                .collect()
        }
        // The edge cases alone (one list) and with the fixtures (chunks).
        for items in [&items[..9], &items[..]] {
            assert_eq!(
                encode_output_list_adjusted(items, values).unwrap(),
                encode_output_list_owned(copies(items, values)),
            );
            let wire_items: Vec<Node> = items.iter().map(wire_item).collect();
            assert_eq!(
                encode_function_input(items, None),
                encode_list(wire_items, None, &[]),
            );
        }
        assert!(items.len() > 300, "only {} documents", items.len());
        // Remembered texts: a first list fills them; a second, with one
        // item's value changed, another's comment, and other new values for
        // a third, is written as the copies are, not from stale texts.
        let texts = ItemTexts::default();
        assert_eq!(
            encode_output_list_remembered(&items, values, &texts).unwrap(),
            encode_output_list_owned(copies(&items, values)),
        );
        assert!(texts.len() > 300, "{} texts", texts.len());
        let mut changed = items.clone();
        changed[20]
            .root_mut()
            .set("kind", Node::new_string("Changed"));
        if let Some(kind) = changed[30].root_mut().get_mut("kind") {
            kind.set_line_comment("# changed");
        }
        let moved = |item: &Node| -> Result<Vec<(&'static str, String)>, String> {
            let mut values = values(item)?;
            if item.root().get_str(&["metadata", "name"]) == Some("plain") {
                values = vec![(resource::PATH, "moved.yaml".to_owned())];
            }
            Ok(values)
        };
        let expected = encode_output_list_owned(copies(&changed, moved));
        assert!(expected.contains("kind: Changed") && expected.contains("# changed"));
        assert_eq!(
            encode_output_list_remembered(&changed, moved, &texts).unwrap(),
            expected
        );
        let failing =
            |_: &Node| -> Result<Vec<(&'static str, String)>, String> { Err("no".to_owned()) };
        assert_eq!(
            encode_output_list_adjusted(&items, failing),
            Err("no".to_owned())
        );
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
                .all(|(_, v)| v.tag() == tag::STR && v.kind == NodeKind::Scalar)
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
