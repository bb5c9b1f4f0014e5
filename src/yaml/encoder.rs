//! Node to emitter events (go-yaml v3 `encode.go` node rules): implicit tags,
//! forced quoting, key foot comments, compact or wide sequences per document.
//!
//! The encoder walks one document's node tree and feeds borrowed events to
//! `yaml::emitter` one at a time, which writes the text into the caller's
//! `String`; no event list is ever built (a render's `-o stdout` list is one
//! document of millions of events). The decisions made here (which tag is written, which style is
//! requested, where a key's foot comment goes) are go-yaml's; the emitter
//! may still downgrade the requested style (spec §4.5).

use std::ops::Range;

use rayon::prelude::*;

use super::emitter::{
    DocumentEmitter, Event, EventKind, Resume, ScalarStyle, Stacks, StreamState, append_piece,
};
use super::node::{Node, NodeKind, Style, tag};
use super::resolve::resolve_plain;

/// Sequence indentation of one document (kyaml's `seqindent` annotation).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum SeqIndent {
    /// `- ` in the column of the parent key (kyaml's default).
    #[default]
    Compact,
    /// `- ` two columns right of the parent key (go-yaml's default).
    Wide,
}

impl SeqIndent {
    /// Parses kyaml's annotation value: `wide` is wide, anything else compact.
    pub fn from_annotation(value: Option<&str>) -> SeqIndent {
        match value {
            Some("wide") => SeqIndent::Wide,
            _ => SeqIndent::Compact,
        }
    }

    /// The annotation value kyaml writes for this style.
    pub fn as_str(self) -> &'static str {
        match self {
            SeqIndent::Compact => "compact",
            SeqIndent::Wide => "wide",
        }
    }
}

/// How an encoder writes a long list: a block sequence's items, or the
/// documents of [`Encoder::encode_all`]. The bytes are the same whichever is
/// chosen.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Chunking {
    /// In chunks on rayon when the list is long (a render's `-o stdout`
    /// list, a big package's stream) and rayon has more than one thread.
    #[default]
    Auto,
    /// In order, on the calling thread.
    Sequential,
    /// Every list of two or more cut into chunks of this many (at least
    /// one), on rayon: how tests cut lists everywhere.
    Items(usize),
}

/// Lists at least this long are written in chunks ([`Chunking::Auto`]).
pub(crate) const PARALLEL_FROM: usize = 256;

impl Chunking {
    /// The chunk length for a list of `len`, or `None` to write it in order.
    pub(crate) fn chunk_len(self, len: usize) -> Option<usize> {
        match self {
            Chunking::Sequential => None,
            Chunking::Items(_) if len < 2 => None,
            Chunking::Items(items) => Some(items.max(1)),
            Chunking::Auto => {
                let threads = rayon::current_num_threads();
                if len < PARALLEL_FROM || threads < 2 {
                    return None;
                }
                // A few chunks per thread, so uneven items even out.
                const MIN_CHUNK: usize = 64;
                Some(MIN_CHUNK.max(len / (4 * threads)))
            }
        }
    }
}

/// `0..len` cut into runs of `chunk_len` (the last may be shorter).
fn chunk_ranges(start: usize, len: usize, chunk_len: usize) -> Vec<Range<usize>> {
    (start..len)
        .step_by(chunk_len.max(1))
        .map(|from| from..len.min(from + chunk_len.max(1)))
        .collect()
}

/// A multi-document encoder: every document after the first is preceded by
/// a `---` line, like one go-yaml `Encoder` used for several `Encode` calls.
pub struct Encoder<'a> {
    out: &'a mut String,
    /// Where the text goes in pieces, before `out`'s (see [`to_pieces_spliced`]).
    pieces: Option<&'a mut Vec<String>>,
    seq_indent: SeqIndent,
    stream: StreamState,
    chunking: Chunking,
    /// The emitter's stacks, reused by every document.
    stacks: Stacks,
}

impl<'a> Encoder<'a> {
    /// An encoder appending to `out`.
    pub fn new(out: &'a mut String) -> Encoder<'a> {
        Encoder {
            out,
            pieces: None,
            seq_indent: SeqIndent::Compact,
            stream: StreamState::default(),
            chunking: Chunking::Auto,
            stacks: Stacks::default(),
        }
    }

    /// An encoder appending documents that follow an earlier one in the same
    /// stream, assuming that one ended plainly (see
    /// [`Encoder::ended_plainly`]): the first document written gets its `---`
    /// line. Lets a caller encode documents separately (and cache them) and
    /// still produce exactly the bytes of one encoder writing them all.
    pub fn continuing(out: &'a mut String) -> Encoder<'a> {
        let mut encoder = Encoder::new(out);
        encoder.stream = StreamState::after_plain_document();
        encoder
    }

    /// True when the documents written so far ended plainly: the next
    /// document is then written exactly as by [`Encoder::continuing`].
    pub fn ended_plainly(&self) -> bool {
        self.stream == StreamState::after_plain_document()
    }

    /// Sets the sequence style for the following documents.
    pub fn set_seq_indent(&mut self, seq_indent: SeqIndent) {
        self.seq_indent = seq_indent;
    }

    /// Sets how long lists are written from now on (the bytes do not change).
    pub fn set_chunking(&mut self, chunking: Chunking) {
        self.chunking = chunking;
    }

    /// Writes one document. A non-document node is wrapped in an implicit
    /// document without comments.
    pub fn encode(&mut self, node: &Node) {
        self.encode_spliced(node, self.splice(None, &[]));
    }

    /// Writes `documents` in order: the bytes of [`Encoder::encode`] on
    /// each, from chunks of documents encoded on rayon when the stream is
    /// long. A chunk after the first is encoded as if the document before it
    /// ended plainly ([`Encoder::continuing`]); where one did not, the chunk
    /// is encoded again in order. Anchors and aliases need no care: the
    /// emitter writes their names as they are.
    pub fn encode_all(&mut self, documents: &[Node]) {
        let Some(chunk_len) = self.chunking.chunk_len(documents.len()) else {
            for document in documents {
                self.encode(document);
            }
            return;
        };
        let (seq_indent, chunking, first) = (self.seq_indent, self.chunking, self.stream);
        let assumed = StreamState::after_plain_document();
        let ranges = chunk_ranges(0, documents.len(), chunk_len);
        let chunks: Vec<(String, StreamState)> = ranges
            .par_iter()
            .enumerate()
            .map(|(i, range)| {
                let mut text = String::new();
                let mut encoder = Encoder {
                    out: &mut text,
                    pieces: None,
                    seq_indent,
                    stream: if i == 0 { first } else { assumed },
                    chunking,
                    stacks: Stacks::default(),
                };
                for document in &documents[range.clone()] {
                    encoder.encode(document);
                }
                let end = encoder.stream;
                (text, end)
            })
            .collect();
        if self.pieces.is_none() {
            self.out
                .reserve(chunks.iter().map(|(text, _)| text.len()).sum());
        }
        for (i, (range, (text, end))) in ranges.into_iter().zip(chunks).enumerate() {
            if i == 0 || self.stream == assumed {
                append_piece(self.out, self.pieces.as_deref_mut(), text);
                self.stream = end;
            } else {
                for document in &documents[range] {
                    self.encode(document);
                }
            }
        }
    }

    /// Encodes `node` with `edits` made as it is written: the bytes of
    /// [`Encoder::encode`] on an edited copy, without making the copy.
    pub fn encode_edited(&mut self, node: &Node, edits: &[Edit<'_>]) {
        self.encode_spliced(node, self.splice(None, edits));
    }

    /// Writes `node` with `items` as the content of `slot` (see
    /// [`to_string_spliced`]).
    pub fn encode_with_items(&mut self, node: &Node, slot: &Node, items: &[SplicedItem<'_>]) {
        self.encode_spliced(node, self.splice(Some((slot, items)), &[]));
    }

    fn splice<'n>(
        &self,
        items: Option<(&'n Node, &'n [SplicedItem<'n>])>,
        edits: &'n [Edit<'n>],
    ) -> Splice<'n> {
        Splice {
            items,
            edits,
            chunking: self.chunking,
        }
    }

    fn encode_spliced<'n>(&mut self, node: &'n Node, splice: Splice<'n>) {
        let compact = self.seq_indent == SeqIndent::Compact;
        let stacks = std::mem::take(&mut self.stacks);
        let mut events = DocumentEmitter::new(self.out, &self.stream, compact, stacks)
            .with_pieces(self.pieces.as_deref_mut());
        if node.kind == NodeKind::Document {
            let mut start = Event::new(EventKind::DocumentStart);
            start.head_comment = node.head_comment();
            events.push(start);
            if node.content.is_empty() {
                // go-yaml would fail on a document without content; write
                // an empty (null) document instead of nothing.
                events.push(Event::new(EventKind::Scalar));
            }
            for child in &node.content {
                push_node(&mut events, child, "", false, splice);
            }
            let mut end = Event::new(EventKind::DocumentEnd);
            end.foot_comment = node.foot_comment();
            events.push(end);
        } else {
            events.push(Event::new(EventKind::DocumentStart));
            push_node(&mut events, node, "", false, splice);
            events.push(Event::new(EventKind::DocumentEnd));
        }
        self.stacks = events.finish(&mut self.stream);
    }
}

/// An item of a list written from borrowed nodes (see [`to_string_spliced`]).
#[derive(Clone, Copy, Debug)]
pub struct SplicedItem<'n> {
    /// The item.
    pub node: &'n Node,
    /// Changes to nodes inside `node` (found by address), made as it is
    /// written: lets a caller change a few values of a big item (a
    /// resource's annotations) without copying it.
    pub edits: &'n [Edit<'n>],
}

/// A change [`to_string_spliced`] makes to an item as it writes it.
#[derive(Clone, Copy, Debug)]
pub enum Edit<'n> {
    /// `target` is written as `with`.
    Replace {
        /// The node replaced.
        target: &'n Node,
        /// What is written in its place.
        with: &'n Node,
    },
    /// The mapping entry whose key is `key` is left out.
    Omit {
        /// The entry's key node.
        key: &'n Node,
    },
}

/// Where [`push_node`] writes something other than the tree it walks: the
/// items of one sequence, and the edits of the current item; and how it
/// writes long sequences.
#[derive(Clone, Copy)]
struct Splice<'n> {
    /// A sequence (compared by address) whose content is replaced by these
    /// items.
    items: Option<(&'n Node, &'n [SplicedItem<'n>])>,
    /// The current item's edits.
    edits: &'n [Edit<'n>],
    chunking: Chunking,
}

/// Encodes one node as a single document.
pub fn to_string(node: &Node, seq_indent: SeqIndent) -> String {
    let mut out = String::new();
    let mut encoder = Encoder::new(&mut out);
    encoder.set_seq_indent(seq_indent);
    encoder.encode(node);
    out
}

/// Encodes `node` as a single document, writing `items` as the content of
/// `slot`, a sequence inside `node` (found by address; its own content is
/// ignored), each item with its edits. The bytes are exactly those of
/// [`to_string`] on a copy of `node` whose `slot` holds copies of the items
/// with their edits made, without making that copy.
pub fn to_string_spliced(
    node: &Node,
    slot: &Node,
    items: &[SplicedItem<'_>],
    seq_indent: SeqIndent,
) -> String {
    let mut out = String::new();
    let mut encoder = Encoder::new(&mut out);
    encoder.set_seq_indent(seq_indent);
    encoder.encode_with_items(node, slot, items);
    out
}

/// [`to_string_spliced`] in the pieces the encoder wrote it in (their
/// concatenation is its text): the chunks of a long list are handed over as
/// they were written instead of being copied into one more buffer.
pub(crate) fn to_pieces_spliced(
    node: &Node,
    slot: &Node,
    items: &[SplicedItem<'_>],
    seq_indent: SeqIndent,
) -> Vec<String> {
    let mut out = String::new();
    let mut pieces = Vec::new();
    {
        let mut encoder = Encoder::new(&mut out);
        encoder.pieces = Some(&mut pieces);
        encoder.set_seq_indent(seq_indent);
        encoder.encode_with_items(node, slot, items);
    }
    pieces.push(out);
    pieces
}

/// Appends to `out` every field of `item` that its written bytes depend on,
/// walked as [`to_string_spliced`] writes it (edits made, omitted entries
/// left out), in a form no two different items share: two items with the
/// same bytes here are written the same. Positions (line, column, offset)
/// are left out; the encoder does not read them. Returns whether a written
/// node has a foot comment (a list cannot be cut after such an item).
pub fn spliced_item_fingerprint(item: &SplicedItem<'_>, out: &mut Vec<u8>) -> bool {
    fn walk(node: &Node, edits: &[Edit<'_>], out: &mut Vec<u8>) -> bool {
        let mut node = node;
        for edit in edits {
            if let Edit::Replace { target, with } = edit
                && std::ptr::eq(node, *target)
            {
                node = with;
            }
        }
        let texts: [&str; 6] = [
            node.tag(),
            &node.value,
            node.anchor(),
            node.head_comment(),
            node.line_comment(),
            node.foot_comment(),
        ];
        // Which texts follow (most nodes have no comment and no anchor).
        let present = texts.iter().enumerate().fold(0u8, |mask, (i, text)| {
            mask | (u8::from(!text.is_empty()) << i)
        });
        out.extend_from_slice(&[node.kind as u8, node.style.bits(), present]);
        for text in texts.iter().filter(|text| !text.is_empty()) {
            out.extend_from_slice(&(text.len() as u32).to_le_bytes());
            out.extend_from_slice(text.as_bytes());
        }
        let mut foot = !node.foot_comment().is_empty();
        if node.kind == NodeKind::Mapping {
            let omitted = |key: &Node| {
                edits.iter().any(
                    |edit| matches!(edit, Edit::Omit { key: omitted } if std::ptr::eq(key, *omitted)),
                )
            };
            let kept = || {
                node.content
                    .chunks_exact(2)
                    .filter(|pair| !omitted(&pair[0]))
            };
            out.extend_from_slice(&(kept().count() as u32).to_le_bytes());
            for pair in kept() {
                foot |= walk(&pair[0], edits, out);
                foot |= walk(&pair[1], edits, out);
            }
        } else {
            out.extend_from_slice(&(node.content.len() as u32).to_le_bytes());
            for child in &node.content {
                foot |= walk(child, edits, out);
            }
        }
        foot
    }
    walk(item.node, item.edits, out)
}

/// True when `tag` is the short tag `short` (`!!str`), in its short or its
/// long form (`tag:yaml.org,2002:str`); compared in place, as the encoder
/// asks this for every tagged node it writes.
fn is_tag(tag: &str, short: &str) -> bool {
    if tag == short {
        return true;
    }
    match (
        tag.strip_prefix("tag:yaml.org,2002:"),
        short.strip_prefix("!!"),
    ) {
        (Some(long), Some(short)) => long == short,
        _ => false,
    }
}

/// Appends the events of `node`. `tail` is the previous key's held-back foot
/// comment; `drop_foot` suppresses the node's own foot comment (a mapping key,
/// whose foot is written after its value instead).
fn push_node<'n>(
    events: &mut DocumentEmitter<'_, 'n>,
    node: &'n Node,
    tail: &'n str,
    drop_foot: bool,
    splice: Splice<'n>,
) {
    let mut node = node;
    for edit in splice.edits {
        if let Edit::Replace { target, with } = edit
            && std::ptr::eq(node, *target)
        {
            node = with;
        }
    }
    // Drop the tag when it was not written explicitly and leaving it out
    // does not change how the value reads back (go-yaml encode.go).
    let stag: &str = node.tag();
    let mut write_tag = !node.tag().is_empty();
    let mut force_quoting = false;
    if write_tag && !node.style.contains(Style::TAGGED) {
        match node.kind {
            NodeKind::Scalar => {
                let quoted_or_block = node.style.contains(Style::SINGLE_QUOTED)
                    || node.style.contains(Style::DOUBLE_QUOTED)
                    || node.style.contains(Style::LITERAL)
                    || node.style.contains(Style::FOLDED);
                if is_tag(stag, tag::STR) && quoted_or_block {
                    write_tag = false;
                } else {
                    let resolved = resolve_plain(&node.value);
                    if is_tag(stag, resolved) {
                        write_tag = false;
                    } else if is_tag(stag, tag::STR) {
                        write_tag = false;
                        force_quoting = true;
                    }
                }
            }
            NodeKind::Mapping => write_tag = !is_tag(stag, tag::MAP),
            NodeKind::Sequence => write_tag = !is_tag(stag, tag::SEQ),
            NodeKind::Document | NodeKind::Alias => {}
        }
    }
    // The emitter shortens a long `tag:yaml.org,2002:` tag itself.
    let event_tag: &'n str = if write_tag { node.tag() } else { "" };
    let foot: &'n str = if drop_foot { "" } else { node.foot_comment() };

    match node.kind {
        NodeKind::Document => {
            // A nested document node is not valid go-yaml input; encode its
            // content in place.
            for child in &node.content {
                push_node(events, child, "", false, splice);
            }
        }
        NodeKind::Sequence => {
            let mut start = Event::new(EventKind::SequenceStart);
            start.anchor = node.anchor();
            start.tag = event_tag;
            start.flow = node.style.contains(Style::FLOW);
            start.head_comment = node.head_comment();
            events.push(start);
            let block = !node.style.contains(Style::FLOW);
            match splice.items {
                Some((slot, items)) if std::ptr::eq(node, slot) => {
                    let item = |i: usize| {
                        let item: &'n SplicedItem<'n> = &items[i];
                        let splice = Splice {
                            items: None,
                            edits: item.edits,
                            chunking: splice.chunking,
                        };
                        (item.node, splice)
                    };
                    push_items(events, items.len(), block, splice.chunking, &item);
                }
                _ => {
                    let item = |i: usize| (&node.content[i], splice);
                    push_items(events, node.content.len(), block, splice.chunking, &item);
                }
            }
            let mut end = Event::new(EventKind::SequenceEnd);
            end.line_comment = node.line_comment();
            end.foot_comment = foot;
            events.push(end);
        }
        NodeKind::Mapping => {
            let mut start = Event::new(EventKind::MappingStart);
            start.anchor = node.anchor();
            start.tag = event_tag;
            start.flow = node.style.contains(Style::FLOW);
            start.head_comment = node.head_comment();
            start.tail_comment = tail;
            events.push(start);
            // A key's foot comment is held back and written after the key's
            // whole value: as the next key's tail, or at the mapping end.
            let mut key_tail: &'n str = "";
            for pair in node.content.chunks_exact(2) {
                let (key, value) = (&pair[0], &pair[1]);
                let omitted = splice.edits.iter().any(
                    |edit| matches!(edit, Edit::Omit { key: omitted } if std::ptr::eq(key, *omitted)),
                );
                if omitted {
                    continue;
                }
                push_node(events, key, key_tail, true, splice);
                key_tail = key.foot_comment();
                push_node(events, value, "", false, splice);
            }
            let mut end = Event::new(EventKind::MappingEnd);
            end.tail_comment = key_tail;
            end.line_comment = node.line_comment();
            end.foot_comment = foot;
            events.push(end);
        }
        NodeKind::Alias => {
            let mut alias = Event::new(EventKind::Alias);
            alias.anchor = &node.value;
            alias.head_comment = node.head_comment();
            alias.line_comment = node.line_comment();
            alias.foot_comment = foot;
            events.push(alias);
        }
        NodeKind::Scalar => {
            let style = if node.style.contains(Style::DOUBLE_QUOTED) {
                ScalarStyle::DoubleQuoted
            } else if node.style.contains(Style::SINGLE_QUOTED) {
                ScalarStyle::SingleQuoted
            } else if node.style.contains(Style::LITERAL) {
                ScalarStyle::Literal
            } else if node.style.contains(Style::FOLDED) {
                ScalarStyle::Folded
            } else if node.value.contains('\n') {
                ScalarStyle::Literal
            } else if force_quoting {
                ScalarStyle::DoubleQuoted
            } else {
                ScalarStyle::Plain
            };
            let mut scalar = Event::new(EventKind::Scalar);
            scalar.anchor = node.anchor();
            scalar.tag = event_tag;
            scalar.value = &node.value;
            scalar.style = style;
            scalar.head_comment = node.head_comment();
            scalar.line_comment = node.line_comment();
            scalar.foot_comment = foot;
            scalar.tail_comment = tail;
            events.push(scalar);
        }
    }
}

/// Pushes the `count` items of the sequence whose start event was just
/// pushed, `item(i)` giving each with how it is walked: in order, or, for a
/// long block sequence, in chunks on rayon. Each chunk is written from where
/// the first item leaves the emitter; a chunk's text is taken where the
/// emitter, having written the items before it, stands there too (see
/// [`Resume`]), and the chunk is written again in order where it does not
/// (an item ending in a foot comment, a kept block scalar). Anchors and
/// aliases need no care: the emitter writes their names as they are.
fn push_items<'n, F>(
    events: &mut DocumentEmitter<'_, 'n>,
    count: usize,
    block: bool,
    chunking: Chunking,
    item: &F,
) where
    F: Fn(usize) -> (&'n Node, Splice<'n>) + Sync,
{
    let chunk_len = if block {
        chunking.chunk_len(count)
    } else {
        None
    };
    let Some(chunk_len) = chunk_len else {
        push_range(events, 0..count, item);
        return;
    };
    push_range(events, 0..1, item);
    let Some(start) = events.pause() else {
        push_range(events, 1..count, item);
        return;
    };
    let ranges = chunk_ranges(1, count, chunk_len);
    let chunks: Vec<(String, Option<Resume<'n>>)> = ranges
        .par_iter()
        .map(|range| {
            let mut text = String::new();
            let mut chunk = DocumentEmitter::resumed(&mut text, &start);
            push_range(&mut chunk, range.clone(), item);
            let end = chunk.pause();
            drop(chunk);
            (text, end)
        })
        .collect();
    events.reserve(chunks.iter().map(|(text, _)| text.len()).sum());
    for (range, (text, end)) in ranges.into_iter().zip(chunks) {
        match end {
            Some(end) if events.stands_at(&start) => events.skip(text, end),
            _ => push_range(events, range, item),
        }
    }
}

/// Pushes the items `range` of a sequence (see [`push_items`]).
fn push_range<'n, F>(events: &mut DocumentEmitter<'_, 'n>, range: Range<usize>, item: &F)
where
    F: Fn(usize) -> (&'n Node, Splice<'n>),
{
    for i in range {
        let (node, splice) = item(i);
        push_node(events, node, "", false, splice);
    }
}

#[cfg(test)]
mod tests {
    use super::{SeqIndent, to_string};
    use crate::yaml::node::{Node, Style, tag};

    fn key_values(pairs: Vec<(&str, Node)>) -> Node {
        let mut map = Node::new_mapping();
        for (key, value) in pairs {
            map.content.push(Node::new_scalar(tag::STR, key));
            map.content.push(value);
        }
        map
    }

    fn plain(value: &str) -> Node {
        Node::new_scalar(crate::yaml::resolve::resolve_plain(value), value)
    }

    /// Documents encoded one by one with `continuing` join into exactly what
    /// one encoder writes, whenever the earlier document ended plainly.
    #[test]
    fn continuing_encoders_join_like_one_stream() {
        let text = "# head\na: 1 # line\nb: |\n  text\n---\n- x\n- y: [1, 2]\n---\nc: 'q'\n# foot\n---\nplain\n---\nk: |+\n  keep\n\n---\nlast: 1\n";
        let documents = crate::yaml::parse_documents(text).expect("parses");
        let mut whole = String::new();
        let mut encoder = super::Encoder::new(&mut whole);
        for document in &documents {
            encoder.encode(document);
        }
        let mut joined = String::new();
        let mut plain_end = true;
        for (i, document) in documents.iter().enumerate() {
            let mut piece = String::new();
            let mut encoder = if i == 0 {
                super::Encoder::new(&mut piece)
            } else {
                super::Encoder::continuing(&mut piece)
            };
            encoder.encode(document);
            let ended_plainly = encoder.ended_plainly();
            if !plain_end {
                break;
            }
            joined.push_str(&piece);
            plain_end = ended_plainly;
        }
        assert!(whole.starts_with(&joined), "{whole:?} vs {joined:?}");
        // Every document up to the root plain scalar (which leaves the
        // stream open-ended) ends plainly.
        assert!(joined.ends_with("---\nplain\n"), "{joined:?}");
        assert!(joined.contains("last: 1") || !plain_end);
    }

    #[test]
    fn simple_mapping_and_compact_vs_wide_sequence() {
        let mut seq = Node::new_sequence();
        seq.content.push(plain("a"));
        seq.content
            .push(key_values(vec![("name", plain("x")), ("val", plain("1"))]));
        let root = key_values(vec![("list", seq), ("k", plain("v"))]);
        assert_eq!(
            to_string(&root, SeqIndent::Compact),
            "list:\n- a\n- name: x\n  val: 1\nk: v\n"
        );
        assert_eq!(
            to_string(&root, SeqIndent::Wide),
            "list:\n  - a\n  - name: x\n    val: 1\nk: v\n"
        );
    }

    #[test]
    fn nested_sequences_and_empty_collections() {
        let mut inner = Node::new_sequence();
        inner.content.push(plain("deep1"));
        inner.content.push(plain("deep2"));
        let mut outer = Node::new_sequence();
        outer.content.push(inner);
        let root = key_values(vec![
            ("nested", outer),
            ("empty", Node::new_sequence()),
            ("none", Node::new_mapping()),
        ]);
        assert_eq!(
            to_string(&root, SeqIndent::Compact),
            "nested:\n- - deep1\n  - deep2\nempty: []\nnone: {}\n"
        );
    }

    #[test]
    fn string_tag_forces_quotes_when_needed() {
        let root = key_values(vec![
            ("a", Node::new_string("true")),
            ("b", Node::new_string("yes")),
            ("c", Node::new_string("1.0")),
            ("d", Node::new_string("")),
            ("e", Node::new_string("1:20")),
            ("f", Node::new_untagged_scalar("true")),
            ("g", Node::new_string("key: value")),
            ("h", Node::new_string("a\tb")),
            ("i", Node::new_string("\u{1F600}")),
            ("j", Node::new_string("- dash")),
            ("k", Node::new_string("caf\u{e9}")),
        ]);
        assert_eq!(
            to_string(&root, SeqIndent::Compact),
            "a: \"true\"\nb: yes\nc: \"1.0\"\nd: \"\"\ne: 1:20\nf: true\ng: 'key: value'\n\
             h: \"a\\tb\"\ni: \"\\U0001F600\"\nj: '- dash'\nk: caf\u{e9}\n"
        );
    }

    #[test]
    fn block_scalars_and_folded_quirk() {
        let mut folded = Node::new_string("folded text\npara\n");
        folded.style = Style::FOLDED;
        let mut keep = Node::new_string("line1\n\n");
        keep.style = Style::LITERAL;
        let root = key_values(vec![
            ("lit", Node::new_string("line1\nline2\n")),
            ("strip", Node::new_string("a\nb")),
            ("lead", Node::new_string("  x\ny\n")),
            ("folded", folded),
            ("trail", Node::new_string("sp \nnext\n")),
            ("keep", keep),
        ]);
        assert_eq!(
            to_string(&root, SeqIndent::Compact),
            "lit: |\n  line1\n  line2\nstrip: |-\n  a\n  b\nlead: |2\n    x\n  y\n\
             folded: >\n  folded text\n\n  para\n\ntrail: \"sp \\nnext\\n\"\nkeep: |+\n  line1\n\n"
        );
    }

    #[test]
    fn comments_head_line_foot() {
        let mut name_key = Node::new_string("name");
        name_key.set_head_comment("# head of name");
        name_key.set_foot_comment("# foot of name");
        let mut value = plain("x");
        value.set_line_comment("# line");
        let mut map = Node::new_mapping();
        map.content.push(name_key);
        map.content.push(value);
        map.content.push(Node::new_string("other"));
        map.content.push(plain("y"));
        let root = key_values(vec![("metadata", map), ("next", plain("z"))]);
        let mut doc = Node::new_document(root);
        doc.set_head_comment("# doc head");
        doc.set_foot_comment("# doc foot");
        assert_eq!(
            to_string(&doc, SeqIndent::Compact),
            "# doc head\n\nmetadata:\n  # head of name\n  name: x # line\n  # foot of name\n\n  other: y\nnext: z\n\n# doc foot\n"
        );
    }

    #[test]
    fn dash_comment_and_multi_document() {
        let mut key = Node::new_string("name");
        key.set_head_comment("# dash line comment");
        let mut item = Node::new_mapping();
        item.content.push(key);
        item.content.push(plain("x"));
        let mut seq = Node::new_sequence();
        seq.content.push(item);
        let root = key_values(vec![("items", seq)]);
        let mut out = String::new();
        let mut encoder = super::Encoder::new(&mut out);
        encoder.encode(&root);
        encoder.set_seq_indent(SeqIndent::Wide);
        encoder.encode(&root);
        assert_eq!(
            out,
            "items:\n- # dash line comment\n  name: x\n---\nitems:\n  - # dash line comment\n    name: x\n"
        );
    }

    #[test]
    fn flow_collections_tags_anchors_and_long_keys() {
        let mut flow = Node::new_sequence();
        flow.style = Style::FLOW;
        let mut anchored = plain("x");
        anchored.set_anchor("anc");
        flow.content.push(anchored);
        let mut alias = Node::new_untagged_scalar("anc");
        alias.kind = crate::yaml::node::NodeKind::Alias;
        flow.content.push(alias);
        flow.content.push(Node::new_string(""));
        let mut tagged = Node::new_scalar(tag::STR, "123");
        tagged.style = Style::TAGGED;
        let mut merge = Node::new_scalar(tag::MERGE, "<<");
        merge.style = Style::PLAIN;
        let long_key = "a".repeat(130);
        let mut root = key_values(vec![("h", flow), ("t", tagged)]);
        root.content.push(merge);
        root.content.push(plain("v"));
        root.content.push(Node::new_string(long_key.clone()));
        root.content.push(plain("longkey"));
        assert_eq!(
            to_string(&root, SeqIndent::Compact),
            format!(
                "h: [&anc x, *anc, \"\"]\nt: !!str 123\n!!merge <<: v\n? {long_key}\n: longkey\n"
            )
        );
    }

    /// Items that write no event (a nested document node without content)
    /// leave the emitter where it was: a list of them is written in chunks
    /// as in order.
    #[test]
    fn chunked_sequences_of_items_that_write_nothing() {
        let mut empty = Node::new_document(plain("x"));
        empty.content.clear();
        let lists = [
            vec![empty.clone(), empty.clone(), empty.clone()],
            vec![empty.clone(), plain("a"), empty.clone(), plain("b")],
            vec![plain("a"), empty.clone(), empty.clone()],
        ];
        for items in lists {
            let mut list = Node::new_sequence();
            list.content = items.into();
            let root = key_values(vec![("k", list)]);
            let write = |chunking| {
                let mut out = String::new();
                let mut encoder = super::Encoder::new(&mut out);
                encoder.set_chunking(chunking);
                encoder.encode(&root);
                out
            };
            for chunk in 1..3 {
                assert_eq!(
                    write(super::Chunking::Items(chunk)),
                    write(super::Chunking::Sequential)
                );
            }
        }
    }

    mod roundtrip {
        use super::super::{Chunking, Encoder, SeqIndent, to_string};
        use crate::yaml::node::{Node, NodeKind, Style, tag};
        use crate::yaml::parse_documents;
        use proptest::prelude::*;

        /// Characters that exercise the emitter's analysis: indicators,
        /// whitespace, breaks, escapes, non-ASCII and non-BMP text.
        const POOL: &[char] = &[
            'a',
            'b',
            '1',
            '0',
            '.',
            ' ',
            ' ',
            '\n',
            '\t',
            ':',
            '#',
            '-',
            '\'',
            '"',
            '\\',
            ',',
            '[',
            ']',
            '{',
            '}',
            '?',
            '!',
            '&',
            '*',
            '|',
            '>',
            '%',
            '@',
            '`',
            '~',
            '\r',
            '\0',
            '\u{7f}',
            '\u{85}',
            '\u{a0}',
            '\u{e9}',
            '\u{feff}',
            '\u{fffe}',
            '\u{1f600}',
            '=',
        ];

        fn text() -> impl Strategy<Value = String> {
            prop::collection::vec(prop::sample::select(POOL), 0..12)
                .prop_map(|chars| chars.into_iter().collect())
        }

        fn scalar() -> impl Strategy<Value = Node> {
            (text(), 0..4usize, any::<bool>()).prop_map(|(value, style, tagged)| {
                let mut node = Node::new_scalar(if tagged { tag::STR } else { "" }, value);
                // Folded is left out: go-yaml's folded writer changes values
                // on purpose (spec §4.6), which kpt reproduces.
                node.style = [
                    Style::PLAIN,
                    Style::SINGLE_QUOTED,
                    Style::DOUBLE_QUOTED,
                    Style::LITERAL,
                ][style];
                // go-yaml writes a block scalar whose line starts with a TAB
                // but cannot read it back ("found a tab character where an
                // indentation space is expected"); kpt shares that flaw.
                let block = node.style == Style::LITERAL || node.value.contains('\n');
                if block && node.value.split('\n').any(|line| line.starts_with('\t')) {
                    node.style = Style::DOUBLE_QUOTED;
                }
                node
            })
        }

        fn tree() -> impl Strategy<Value = Node> {
            scalar().prop_recursive(4, 32, 4, |inner| {
                prop_oneof![
                    (prop::collection::vec(inner.clone(), 0..4), any::<bool>()).prop_map(
                        |(items, flow)| {
                            let mut node = Node::new_sequence();
                            node.content = items.into();
                            if flow {
                                node.style = Style::FLOW;
                            }
                            node
                        }
                    ),
                    (
                        prop::collection::vec((scalar(), inner), 0..4),
                        any::<bool>()
                    )
                        .prop_map(|(pairs, flow)| {
                            let mut node = Node::new_mapping();
                            for (key, value) in pairs {
                                node.content.push(key);
                                node.content.push(value);
                            }
                            if flow {
                                node.style = Style::FLOW;
                            }
                            node
                        }),
                ]
            })
        }

        /// Same structure and scalar text (styles and tags may differ).
        fn same(a: &Node, b: &Node) -> bool {
            a.kind == b.kind
                && (a.kind != NodeKind::Scalar || a.value == b.value)
                && a.content.len() == b.content.len()
                && a.content.iter().zip(&b.content).all(|(x, y)| same(x, y))
        }

        /// `node` with comments on some of its nodes, chosen by the bits of
        /// `seed` (the round-trip trees have none).
        fn with_comments(node: &mut Node, seed: &mut u64) {
            *seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let bits = *seed >> 40;
            if bits & 7 == 0 {
                node.set_head_comment("# head");
            }
            if bits & 56 == 0 && node.kind == NodeKind::Scalar {
                node.set_line_comment("# line");
            }
            if bits & 448 == 0 {
                node.set_foot_comment("# foot");
            }
            for child in &mut node.content {
                with_comments(child, seed);
            }
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(400))]

            /// Sequences written in chunks come out as written in order,
            /// whatever the items and their comments.
            #[test]
            fn chunked_sequences_write_as_sequential_ones(
                items in prop::collection::vec(tree(), 0..12),
                seed in any::<u64>(),
                wide in any::<bool>(),
                chunk in 1..4usize,
            ) {
                let mut root = Node::new_sequence();
                root.content = items.into();
                let mut seed = seed;
                with_comments(&mut root, &mut seed);
                let indent = if wide { SeqIndent::Wide } else { SeqIndent::Compact };
                let write = |chunking| {
                    let mut out = String::new();
                    let mut encoder = Encoder::new(&mut out);
                    encoder.set_seq_indent(indent);
                    encoder.set_chunking(chunking);
                    encoder.encode(&root);
                    out
                };
                prop_assert_eq!(write(Chunking::Items(chunk)), write(Chunking::Sequential));
            }

            /// Whatever the requested styles, the emitted text parses back
            /// to the same values, and emitting again is a fixed point.
            #[test]
            fn emitted_text_reads_back(root in tree(), wide in any::<bool>()) {
                let indent = if wide { SeqIndent::Wide } else { SeqIndent::Compact };
                let text = to_string(&root, indent);
                // Every document, null ones included: `parse_document` drops
                // a null root (`~`), whose text must still read back.
                let parsed = parse_documents(&text)
                    .map_err(|error| TestCaseError::fail(format!("{error}\n{text}")))?;
                let reparsed = parsed
                    .into_iter()
                    .next()
                    .unwrap_or_else(|| Node::new_document(Node::new_scalar(tag::NULL, "")));
                prop_assert!(same(&root, reparsed.root()), "value changed:\n{text}\n{reparsed:#?}");
                prop_assert_eq!(to_string(&reparsed, indent), text);
            }
        }
    }
}
