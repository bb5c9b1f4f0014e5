//! The YAML document model: a tree equivalent to go-yaml v3's `yaml.Node`.
//!
//! The parser (`yaml::parser`) builds it, the emitter (`yaml::emitter`) writes
//! it, and everything else in krender (resources, Kptfiles, function wire
//! data) edits it. It keeps exactly what go-yaml keeps — kind, style bits, tag,
//! value, anchor, head/line/foot comments and positions — so that writing it
//! back produces kpt's bytes.
//!
//! Mappings store keys and values alternately in `content`, as go-yaml does;
//! the helper methods below hide that layout for ordinary edits.

use std::fmt;

pub use ecow::EcoString;
pub use thin_vec::{ThinVec, thin_vec};

/// What sort of node this is (go-yaml `Kind`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum NodeKind {
    /// A document wrapper: exactly one child (the root), plus document-level
    /// head and foot comments.
    Document,
    /// A sequence; `content` holds the items.
    Sequence,
    /// A mapping; `content` holds key, value, key, value, ...
    Mapping,
    /// A scalar; `value` holds the decoded text.
    Scalar,
    /// An alias (`*name`); `value` holds the anchor name it refers to.
    Alias,
}

/// Style bits of a node (go-yaml `Style`). Several may be set at once
/// (`TAGGED | DOUBLE_QUOTED`); the empty set means plain / block.
#[derive(Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct Style(u8);

impl Style {
    /// The tag was written explicitly in the source and must be written back.
    pub const TAGGED: Style = Style(1);
    /// `"double quoted"` scalar.
    pub const DOUBLE_QUOTED: Style = Style(2);
    /// `'single quoted'` scalar.
    pub const SINGLE_QUOTED: Style = Style(4);
    /// `|` literal block scalar.
    pub const LITERAL: Style = Style(8);
    /// `>` folded block scalar.
    pub const FOLDED: Style = Style(16);
    /// `[...]` / `{...}` flow collection.
    pub const FLOW: Style = Style(32);

    /// No style bits: a plain scalar or a block collection.
    pub const PLAIN: Style = Style(0);

    /// True if every bit of `other` is set in `self`.
    pub fn contains(self, other: Style) -> bool {
        self.0 & other.0 == other.0 && other.0 != 0
    }

    /// True if no bit is set.
    pub fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// Sets the bits of `other`.
    pub fn insert(&mut self, other: Style) {
        self.0 |= other.0;
    }

    /// Clears the bits of `other`.
    pub fn remove(&mut self, other: Style) {
        self.0 &= !other.0;
    }

    /// The raw bit set.
    pub fn bits(self) -> u8 {
        self.0
    }

    /// The style with the raw bits `bits` (unknown bits dropped).
    pub(crate) fn from_bits(bits: u8) -> Style {
        Style(bits & 63)
    }
}

impl std::ops::BitOr for Style {
    type Output = Style;
    fn bitor(self, rhs: Style) -> Style {
        Style(self.0 | rhs.0)
    }
}

impl fmt::Debug for Style {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names = [
            (Style::TAGGED, "TAGGED"),
            (Style::DOUBLE_QUOTED, "DOUBLE_QUOTED"),
            (Style::SINGLE_QUOTED, "SINGLE_QUOTED"),
            (Style::LITERAL, "LITERAL"),
            (Style::FOLDED, "FOLDED"),
            (Style::FLOW, "FLOW"),
        ];
        let set: Vec<&str> = names
            .iter()
            .filter(|(bit, _)| self.contains(*bit))
            .map(|(_, name)| *name)
            .collect();
        if set.is_empty() {
            f.write_str("PLAIN")
        } else {
            f.write_str(&set.join("|"))
        }
    }
}

/// Well-known short tags.
pub mod tag {
    /// `!!str`
    pub const STR: &str = "!!str";
    /// `!!int`
    pub const INT: &str = "!!int";
    /// `!!float`
    pub const FLOAT: &str = "!!float";
    /// `!!bool`
    pub const BOOL: &str = "!!bool";
    /// `!!null`
    pub const NULL: &str = "!!null";
    /// `!!timestamp`
    pub const TIMESTAMP: &str = "!!timestamp";
    /// `!!binary`
    pub const BINARY: &str = "!!binary";
    /// `!!merge`
    pub const MERGE: &str = "!!merge";
    /// `!!seq`
    pub const SEQ: &str = "!!seq";
    /// `!!map`
    pub const MAP: &str = "!!map";

    /// The tags a node stores as an index (the binary form writes that
    /// index too); any other tag is kept as text beside the node.
    pub(crate) const KNOWN: [&str; 12] = [
        "", STR, INT, FLOAT, BOOL, NULL, TIMESTAMP, BINARY, MERGE, SEQ, MAP, "!!set",
    ];
}

/// The children of a node: one pointer wide (a sequence's items, or a
/// mapping's keys and values), with no allocation while empty.
pub type Content = ThinVec<Node>;

/// One YAML node, as go-yaml v3 models it. Cloning copies the whole subtree.
///
/// A resource tree holds millions of nodes, so a node is 48 bytes: the tag is
/// an index into [`tag::KNOWN`], and what most nodes lack (a custom tag, an
/// anchor, comments) sits behind one pointer that stays null until one is
/// set. Read and set those through the accessors ([`Node::tag`],
/// [`Node::head_comment`], [`Node::set_anchor`], ...).
#[derive(Clone, PartialEq, Eq)]
pub struct Node {
    /// The node's kind.
    pub kind: NodeKind,
    /// Style bits.
    pub style: Style,
    /// Index of the tag in [`tag::KNOWN`], or [`CUSTOM_TAG`] for a tag kept
    /// in `extras`.
    tag: u8,
    /// Scalar text with escapes resolved; the anchor name for an alias.
    /// 16 bytes, inline up to 15: most keys and values are short, so most
    /// scalars cost no allocation of their own (and longer ones clone by
    /// sharing).
    pub value: EcoString,
    /// Children: document root, sequence items, or alternating map keys and values.
    pub content: Content,
    extras: Extras,
    /// 1-based line of the node in its source piece (0 for nodes built in code).
    pub line: u32,
    /// 1-based column of the node in its source piece (0 for nodes built in code).
    pub column: u32,
    /// Byte offset of the node's first character in its source piece
    /// (saturating: past 4 GiB every offset reads as `u32::MAX`).
    pub offset: u32,
}

/// `Node::tag` for a tag that is not one of [`tag::KNOWN`].
const CUSTOM_TAG: u8 = u8::MAX;

/// A node's rarely set parts (see [`Field`]), allocated on the first
/// non-empty one.
#[derive(Clone, Default)]
struct Extras(Option<Box<ExtraText>>);

/// The five texts of [`Extras`], in the order they are stored.
#[derive(Clone, Copy)]
enum Field {
    /// A custom tag (`!foo`, `!!python/tuple`).
    Tag,
    /// Anchor name (`&name`) without the `&`.
    Anchor,
    /// Comment lines before the node, each starting with `#`, joined by `\n`.
    Head,
    /// Comment at the end of the node's line, starting with `#`.
    Line,
    /// Comment lines after the node, joined by `\n`.
    Foot,
}

/// The five texts back to back in one buffer (48 bytes and one text
/// allocation, where five `String`s took 120 bytes and five allocations).
#[derive(Clone, Default, PartialEq, Eq)]
struct ExtraText {
    text: String,
    /// Where each field ends in `text`. Offsets are `u32`: a node's texts
    /// past 4 GiB in all would be cut (no input gets near).
    ends: [u32; 5],
}

static NO_EXTRAS: ExtraText = ExtraText {
    text: String::new(),
    ends: [0; 5],
};

impl ExtraText {
    fn range(&self, field: Field) -> std::ops::Range<usize> {
        let i = field as usize;
        let start = if i == 0 { 0 } else { self.ends[i - 1] as usize };
        start..self.ends[i] as usize
    }

    fn get(&self, field: Field) -> &str {
        self.text.get(self.range(field)).unwrap_or_default()
    }

    fn replace(&mut self, field: Field, new: &str) {
        let range = self.range(field);
        let room = (u32::MAX as usize).saturating_sub(self.text.len() - range.len());
        let mut cut = new.len().min(room);
        while !new.is_char_boundary(cut) {
            cut -= 1;
        }
        let new = &new[..cut];
        let old_len = range.len();
        self.text.replace_range(range, new);
        for end in &mut self.ends[field as usize..] {
            // In range: the buffer stays within u32::MAX bytes (above).
            *end = (*end as usize + new.len() - old_len) as u32;
        }
    }
}

impl Extras {
    fn get(&self, field: Field) -> &str {
        self.0.as_deref().unwrap_or(&NO_EXTRAS).get(field)
    }

    /// Sets one field; setting an empty text on a node without extras
    /// allocates nothing, and emptying the last one frees them.
    // The test inlined: a parse sets four empty texts on most nodes.
    #[inline]
    fn set(&mut self, field: Field, text: &str) {
        if !text.is_empty() || self.0.is_some() {
            self.replace(field, text);
        }
    }

    fn replace(&mut self, field: Field, text: &str) {
        match &mut self.0 {
            None if text.is_empty() => {}
            None => {
                let mut extra = Box::<ExtraText>::default();
                extra.replace(field, text);
                self.0 = Some(extra);
            }
            Some(extra) => {
                extra.replace(field, text);
                if extra.text.is_empty() {
                    self.0 = None;
                }
            }
        }
    }

    fn take(&mut self, field: Field) -> String {
        let text = self.get(field).to_owned();
        if !text.is_empty() {
            self.set(field, "");
        }
        text
    }
}

impl PartialEq for Extras {
    fn eq(&self, other: &Extras) -> bool {
        self.0.as_deref().unwrap_or(&NO_EXTRAS) == other.0.as_deref().unwrap_or(&NO_EXTRAS)
    }
}

impl Eq for Extras {}

impl fmt::Debug for Node {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Node")
            .field("kind", &self.kind)
            .field("style", &self.style)
            .field("tag", &self.tag())
            .field("value", &self.value)
            .field("anchor", &self.anchor())
            .field("content", &self.content)
            .field("head_comment", &self.head_comment())
            .field("line_comment", &self.line_comment())
            .field("foot_comment", &self.foot_comment())
            .field("line", &self.line)
            .field("column", &self.column)
            .field("offset", &self.offset)
            .finish()
    }
}

impl Node {
    fn empty(kind: NodeKind, tag: &str) -> Node {
        let mut node = Node::at(kind, 0, 0, 0);
        node.set_tag(tag);
        node
    }

    /// An empty node of `kind` with no tag, at a source position (1-based
    /// line and column, byte offset): what the composers start from.
    pub(crate) fn at(kind: NodeKind, line: u32, column: u32, offset: u32) -> Node {
        Node {
            kind,
            style: Style::PLAIN,
            tag: 0,
            value: EcoString::new(),
            content: ThinVec::new(),
            extras: Extras(None),
            line,
            column,
            offset,
        }
    }

    /// Short tag (`!!str`, `!!map`, a custom `!foo`), or empty when unknown
    /// (nodes built in code; the encoder then infers it).
    pub fn tag(&self) -> &str {
        match tag::KNOWN.get(usize::from(self.tag)) {
            Some(known) => known,
            None => self.extras.get(Field::Tag),
        }
    }

    /// The tag's index in [`tag::KNOWN`], or `None` for a custom tag.
    pub(crate) fn known_tag_index(&self) -> Option<u8> {
        (self.tag != CUSTOM_TAG).then_some(self.tag)
    }

    /// Sets the short tag (see [`Node::tag`]).
    pub fn set_tag(&mut self, tag: &str) {
        match tag::KNOWN.iter().position(|known| *known == tag) {
            Some(index) => {
                // KNOWN has 12 entries.
                self.tag = index as u8;
                self.extras.set(Field::Tag, "");
            }
            None => {
                self.tag = CUSTOM_TAG;
                self.extras.set(Field::Tag, tag);
            }
        }
    }

    /// Anchor name (`&name`) without the `&`, or empty.
    pub fn anchor(&self) -> &str {
        self.extras.get(Field::Anchor)
    }

    /// Sets the anchor name (empty for none).
    pub fn set_anchor(&mut self, anchor: impl AsRef<str>) {
        self.extras.set(Field::Anchor, anchor.as_ref());
    }

    /// Comment lines before the node, each starting with `#`, joined by `\n`.
    pub fn head_comment(&self) -> &str {
        self.extras.get(Field::Head)
    }

    /// Comment at the end of the node's line, starting with `#`.
    pub fn line_comment(&self) -> &str {
        self.extras.get(Field::Line)
    }

    /// Comment lines after the node, joined by `\n`.
    pub fn foot_comment(&self) -> &str {
        self.extras.get(Field::Foot)
    }

    /// Replaces the head comment.
    pub fn set_head_comment(&mut self, comment: impl AsRef<str>) {
        self.extras.set(Field::Head, comment.as_ref());
    }

    /// Replaces the line comment.
    pub fn set_line_comment(&mut self, comment: impl AsRef<str>) {
        self.extras.set(Field::Line, comment.as_ref());
    }

    /// Replaces the foot comment.
    pub fn set_foot_comment(&mut self, comment: impl AsRef<str>) {
        self.extras.set(Field::Foot, comment.as_ref());
    }

    /// Sets each of the three comments that is empty to the given text
    /// (kyaml's comment copy).
    pub fn fill_empty_comments(&mut self, head: &str, line: &str, foot: &str) {
        if self.head_comment().is_empty() {
            self.set_head_comment(head);
        }
        if self.line_comment().is_empty() {
            self.set_line_comment(line);
        }
        if self.foot_comment().is_empty() {
            self.set_foot_comment(foot);
        }
    }

    /// Takes the head comment, leaving it empty.
    pub fn take_head_comment(&mut self) -> String {
        self.extras.take(Field::Head)
    }

    /// Takes the line comment, leaving it empty.
    pub fn take_line_comment(&mut self) -> String {
        self.extras.take(Field::Line)
    }

    /// Takes the foot comment, leaving it empty.
    pub fn take_foot_comment(&mut self) -> String {
        self.extras.take(Field::Foot)
    }

    /// A copy of this node without its children (which can be large).
    pub fn clone_without_content(&self) -> Node {
        Node {
            kind: self.kind,
            style: self.style,
            tag: self.tag,
            value: self.value.clone(),
            content: ThinVec::new(),
            extras: self.extras.clone(),
            line: self.line,
            column: self.column,
            offset: self.offset,
        }
    }

    /// A new empty block mapping tagged `!!map`.
    pub fn new_mapping() -> Node {
        Node::empty(NodeKind::Mapping, tag::MAP)
    }

    /// A new empty block sequence tagged `!!seq`.
    pub fn new_sequence() -> Node {
        Node::empty(NodeKind::Sequence, tag::SEQ)
    }

    /// A document wrapping `root`.
    pub fn new_document(root: Node) -> Node {
        let mut doc = Node::empty(NodeKind::Document, "");
        doc.content.push(root);
        doc
    }

    /// A `!!str` scalar with no style: the encoder quotes it if its text
    /// would otherwise read back as another type (go-yaml's rule for a
    /// `Node{Kind: ScalarNode, Tag: "!!str"}`), as kyaml's `NewStringRNode` does.
    pub fn new_string(value: impl Into<EcoString>) -> Node {
        let mut node = Node::empty(NodeKind::Scalar, tag::STR);
        node.value = value.into();
        node
    }

    /// A scalar with the given tag and no style.
    pub fn new_scalar(tag: &str, value: impl Into<EcoString>) -> Node {
        let mut node = Node::empty(NodeKind::Scalar, tag);
        node.value = value.into();
        node
    }

    /// A scalar with an empty tag: the encoder treats it as untyped text and
    /// writes it plain where the emitter allows (go-yaml `Node{Kind: ScalarNode}`).
    pub fn new_untagged_scalar(value: impl Into<EcoString>) -> Node {
        Node::new_scalar("", value)
    }

    /// Equality of everything that is written (kind, style, tag, value,
    /// anchor, comments, children), ignoring source positions.
    pub fn same_content(&self, other: &Node) -> bool {
        self.kind == other.kind
            && self.style == other.style
            && self.tag() == other.tag()
            && self.value == other.value
            && self.anchor() == other.anchor()
            && self.head_comment() == other.head_comment()
            && self.line_comment() == other.line_comment()
            && self.foot_comment() == other.foot_comment()
            && self.content.len() == other.content.len()
            && self
                .content
                .iter()
                .zip(&other.content)
                .all(|(a, b)| a.same_content(b))
    }

    /// True for a mapping node.
    pub fn is_mapping(&self) -> bool {
        self.kind == NodeKind::Mapping
    }

    /// True for a sequence node.
    pub fn is_sequence(&self) -> bool {
        self.kind == NodeKind::Sequence
    }

    /// True for a scalar node.
    pub fn is_scalar(&self) -> bool {
        self.kind == NodeKind::Scalar
    }

    /// True for a scalar that reads as null (`!!null` tag).
    pub fn is_null(&self) -> bool {
        self.kind == NodeKind::Scalar && self.tag() == tag::NULL
    }

    /// kyaml `IsNilOrEmpty`: null, or a mapping or sequence without entries.
    pub fn is_nil_or_empty(&self) -> bool {
        self.is_null()
            || (matches!(self.kind, NodeKind::Mapping | NodeKind::Sequence)
                && self.content.is_empty())
    }

    /// The root of a document node, or the node itself for any other kind.
    pub fn root(&self) -> &Node {
        match self.kind {
            NodeKind::Document if !self.content.is_empty() => &self.content[0],
            _ => self,
        }
    }

    /// [`Node::root`] by value (the document's comments are dropped).
    pub fn into_root(self) -> Node {
        match self.kind {
            NodeKind::Document if !self.content.is_empty() => self
                .content
                .into_iter()
                .next()
                .unwrap_or_else(Node::new_mapping),
            _ => self,
        }
    }

    /// Mutable form of [`Node::root`].
    pub fn root_mut(&mut self) -> &mut Node {
        if self.kind == NodeKind::Document && !self.content.is_empty() {
            &mut self.content[0]
        } else {
            self
        }
    }

    /// Iterates a mapping's (key, value) pairs in order; empty for other kinds.
    pub fn pairs(&self) -> impl Iterator<Item = (&Node, &Node)> {
        let content: &[Node] = if self.is_mapping() {
            &self.content
        } else {
            &[]
        };
        content.chunks_exact(2).map(|pair| (&pair[0], &pair[1]))
    }

    /// Index in `content` of the first key equal to `key` in a mapping.
    pub fn key_index(&self, key: &str) -> Option<usize> {
        if !self.is_mapping() {
            return None;
        }
        (0..self.content.len() / 2)
            .map(|i| i * 2)
            .find(|&i| self.content[i].value == key)
    }

    /// The value of the first entry whose key is `key`, in a mapping.
    pub fn get(&self, key: &str) -> Option<&Node> {
        self.key_index(key).map(|i| &self.content[i + 1])
    }

    /// Mutable form of [`Node::get`].
    pub fn get_mut(&mut self, key: &str) -> Option<&mut Node> {
        self.key_index(key).map(move |i| &mut self.content[i + 1])
    }

    /// Follows a path of mapping keys.
    pub fn get_path(&self, path: &[&str]) -> Option<&Node> {
        path.iter().try_fold(self, |node, key| node.get(key))
    }

    /// The scalar text at a path of mapping keys.
    pub fn get_str(&self, path: &[&str]) -> Option<&str> {
        self.get_path(path)
            .filter(|node| node.is_scalar())
            .map(|node| node.value.as_str())
    }

    /// Sets `key` to `value` in a mapping: replaces the value of an existing
    /// key in place (keeping the key node, hence its comments), or appends a
    /// new `!!str` key at the end. Does nothing on non-mappings.
    pub fn set(&mut self, key: &str, value: Node) {
        if !self.is_mapping() {
            return;
        }
        match self.key_index(key) {
            Some(i) => self.content[i + 1] = value,
            None => self.push_pair(Node::new_string(key), value),
        }
    }

    /// Appends a key and its value to `content`, growing it by a little
    /// rather than doubling: builtins add a key or two to thousands of small
    /// mappings (labels, annotations), and doubling a vector of 200-byte
    /// nodes for each left most of a render's memory unused.
    pub fn push_pair(&mut self, key: Node, value: Node) {
        let len = self.content.len();
        if self.content.capacity() < len + 2 {
            // Still amortised for big mappings: grow by a quarter from 32 up.
            self.content.reserve_exact((len / 4).max(2));
        }
        self.content.push(key);
        self.content.push(value);
    }

    /// Returns the value for `key`, creating it with `make` (appended at the
    /// end) when absent. Returns `None` when `self` is not a mapping.
    pub fn entry_or_insert_with(
        &mut self,
        key: &str,
        make: impl FnOnce() -> Node,
    ) -> Option<&mut Node> {
        if !self.is_mapping() {
            return None;
        }
        let i = match self.key_index(key) {
            Some(i) => i,
            None => {
                self.push_pair(Node::new_string(key), make());
                self.content.len() - 2
            }
        };
        Some(&mut self.content[i + 1])
    }

    /// Removes the first entry for `key` from a mapping and returns its
    /// (key, value) nodes.
    pub fn remove(&mut self, key: &str) -> Option<(Node, Node)> {
        let i = self.key_index(key)?;
        let value = self.content.remove(i + 1);
        let key_node = self.content.remove(i);
        Some((key_node, value))
    }
}

/// Where a piece of a longer stream starts in it: the lines and bytes
/// before it. Nodes are placed at their position in the whole stream.
#[derive(Clone, Copy, Default)]
pub(crate) struct Origin {
    pub(crate) lines: u32,
    pub(crate) offset: u32,
}

#[cfg(test)]
mod tests {
    use super::Node;

    /// A render holds millions of nodes: keep them small (200 bytes with
    /// `String` comments and `usize` positions, 120 with inline tags, comments,
    /// a `Vec` of children and a 24-byte scalar).
    #[test]
    fn nodes_stay_small() {
        assert_eq!(std::mem::size_of::<Node>(), 48);
    }

    #[test]
    fn tag_anchor_and_comments_are_set_taken_and_compared_independently() {
        let plain = Node::new_string("v");
        let mut node = Node::new_string("v");
        node.set_foot_comment("# foot");
        node.set_head_comment("# head\n# more");
        node.set_tag("!custom");
        node.set_line_comment("# line");
        node.set_anchor("a");
        assert_eq!(node.tag(), "!custom");
        assert_eq!(node.anchor(), "a");
        assert_eq!(node.head_comment(), "# head\n# more");
        assert_eq!(node.line_comment(), "# line");
        assert_eq!(node.foot_comment(), "# foot");
        node.set_head_comment("# h");
        assert_eq!(node.head_comment(), "# h");
        assert_eq!(
            node.line_comment(),
            "# line",
            "a shorter head moves the rest"
        );
        assert_eq!(node.take_line_comment(), "# line");
        assert_eq!(node.line_comment(), "");
        assert_eq!(node.foot_comment(), "# foot");
        assert_ne!(node, plain);
        node.set_tag(super::tag::STR);
        node.set_anchor("");
        node.set_head_comment("");
        node.set_foot_comment(String::new());
        assert_eq!(node, plain, "emptied extras equal none at all");
        assert!(node.extras.0.is_none(), "emptying the last text frees them");
        let mut copy = node.clone_without_content();
        copy.set_line_comment("# c");
        assert!(!copy.same_content(&plain));
    }
}
