//! A compact binary form of [`Node`] lists, for the action cache: a cached
//! package run's output is read back many times more often than it is
//! written, and decoding this costs a fraction of parsing the YAML (no
//! scanning, no implicit-tag resolution, no comment placement).
//!
//! Every field of a node is kept (positions included), so a decoded list is
//! `==` to the encoded one. Both directions walk the tree with an explicit
//! stack: nesting is bounded only by go-yaml's depth limit on the way in.
//!
//! Layout: the magic, a varint count of top-level nodes, then each node in
//! pre-order: kind, style bits, a flags byte saying which optional texts
//! follow, the tag (an index into [`tag::KNOWN`], or 255 and the text), the
//! value, the present texts (anchor, head, line, foot comments), line,
//! column and offset as varints, and the number of children.

use super::node::{EcoString, Node, NodeKind, Style, ThinVec, tag};

/// Magic prefix; bumped when the layout changes.
const MAGIC: &[u8; 4] = b"KRN1";

/// Magic prefix of the canonical form of one node (see [`encode_canonical`]).
const CANONICAL_MAGIC: &[u8; 4] = b"KRC1";

const HAS_ANCHOR: u8 = 1;
const HAS_HEAD: u8 = 2;
const HAS_LINE: u8 = 4;
const HAS_FOOT: u8 = 8;
const OTHER_TAG: u8 = u8::MAX;

/// Encodes `nodes` (appending to `out`).
pub(crate) fn encode(nodes: &[Node], out: &mut Vec<u8>) {
    out.extend_from_slice(MAGIC);
    put_varint(out, nodes.len() as u64);
    let mut stack: Vec<std::slice::Iter<'_, Node>> = vec![nodes.iter()];
    while let Some(top) = stack.last_mut() {
        let Some(node) = top.next() else {
            stack.pop();
            continue;
        };
        put_node(out, node);
        if !node.content.is_empty() {
            stack.push(node.content.iter());
        }
    }
}

/// The canonical form of one node tree: [`encode`]'s layout without source
/// positions, so that two trees that write the same text (a resource that
/// moved down its file) have the same bytes, and so the same digest.
/// `replace` gives the value written for one node of the tree, found by
/// address (the engine writes a package path relative to the render root
/// there, so that the form does not name the checkout).
pub(crate) fn encode_canonical(node: &Node, replace: Option<(&Node, &str)>, out: &mut Vec<u8>) {
    out.extend_from_slice(CANONICAL_MAGIC);
    let mut stack: Vec<std::slice::Iter<'_, Node>> = vec![std::slice::from_ref(node).iter()];
    while let Some(top) = stack.last_mut() {
        let Some(node) = top.next() else {
            stack.pop();
            continue;
        };
        let value = match replace {
            Some((target, value)) if std::ptr::eq(target, node) => value,
            _ => node.value.as_str(),
        };
        put_head(out, node, value);
        put_varint(out, node.content.len() as u64);
        if !node.content.is_empty() {
            stack.push(node.content.iter());
        }
    }
}

/// Decodes [`encode_canonical`]'s output (positions read as 0); `None` for
/// anything malformed or with bytes left over.
pub(crate) fn decode_canonical(bytes: &[u8]) -> Option<Node> {
    let mut input = Reader {
        rest: bytes.strip_prefix(CANONICAL_MAGIC.as_slice())?,
        positions: false,
    };
    let (root, children) = input.node()?;
    let mut stack: Vec<(Node, ThinVec<Node>, usize)> =
        vec![(root, ThinVec::with_capacity(children), children)];
    loop {
        let (_, list, expected) = stack.last_mut()?;
        if list.len() == *expected {
            let (mut done, content, _) = stack.pop()?;
            done.content = content;
            match stack.last_mut() {
                Some((_, parent, _)) => parent.push(done),
                None => return input.rest.is_empty().then_some(done),
            }
            continue;
        }
        let (node, children) = input.node()?;
        stack.push((node, ThinVec::with_capacity(children), children));
    }
}

fn put_node(out: &mut Vec<u8>, node: &Node) {
    put_head(out, node, &node.value);
    put_varint(out, u64::from(node.line));
    put_varint(out, u64::from(node.column));
    put_varint(out, u64::from(node.offset));
    put_varint(out, node.content.len() as u64);
}

/// A node's kind, style, texts and tag, and `value` for its value.
fn put_head(out: &mut Vec<u8>, node: &Node, value: &str) {
    out.push(match node.kind {
        NodeKind::Document => 0,
        NodeKind::Sequence => 1,
        NodeKind::Mapping => 2,
        NodeKind::Scalar => 3,
        NodeKind::Alias => 4,
    });
    out.push(node.style.bits());
    let texts = [
        (HAS_ANCHOR, node.anchor()),
        (HAS_HEAD, node.head_comment()),
        (HAS_LINE, node.line_comment()),
        (HAS_FOOT, node.foot_comment()),
    ];
    let flags = texts
        .iter()
        .filter(|(_, text)| !text.is_empty())
        .fold(0, |flags, (bit, _)| flags | bit);
    out.push(flags);
    match node.known_tag_index() {
        Some(index) => out.push(index),
        None => {
            out.push(OTHER_TAG);
            put_str(out, node.tag());
        }
    }
    put_str(out, value);
    for (_, text) in texts.iter().filter(|(_, text)| !text.is_empty()) {
        put_str(out, text);
    }
}

fn put_str(out: &mut Vec<u8>, text: &str) {
    put_varint(out, text.len() as u64);
    out.extend_from_slice(text.as_bytes());
}

fn put_varint(out: &mut Vec<u8>, mut value: u64) {
    while value >= 0x80 {
        out.push((value as u8) | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

/// Decodes what [`encode`] wrote at the start of `bytes`, returning the
/// nodes and the bytes after them; `None` for anything malformed (a
/// corrupt cache entry is recomputed, never served).
pub(crate) fn decode(bytes: &[u8]) -> Option<(Vec<Node>, &[u8])> {
    let mut input = Reader {
        rest: bytes.strip_prefix(MAGIC.as_slice())?,
        positions: true,
    };
    let count = input.count()?;
    // Each open list, with the number of children it still expects.
    let mut stack: Vec<(ThinVec<Node>, usize)> = vec![(ThinVec::with_capacity(count), count)];
    loop {
        let (list, expected) = stack.last_mut()?;
        if list.len() == *expected {
            let (done, _) = stack.pop()?;
            match stack.last_mut() {
                Some((parent, _)) => parent.last_mut()?.content = done,
                None => return Some((done.into(), input.rest)),
            }
            continue;
        }
        let (node, children) = input.node()?;
        list.push(node);
        if children > 0 {
            stack.push((ThinVec::with_capacity(children), children));
        }
    }
}

struct Reader<'a> {
    rest: &'a [u8],
    /// Whether nodes carry their line, column and offset.
    positions: bool,
}

impl<'a> Reader<'a> {
    fn node(&mut self) -> Option<(Node, usize)> {
        let kind = match self.byte()? {
            0 => NodeKind::Document,
            1 => NodeKind::Sequence,
            2 => NodeKind::Mapping,
            3 => NodeKind::Scalar,
            4 => NodeKind::Alias,
            _ => return None,
        };
        let style = Style::from_bits(self.byte()?);
        let flags = self.byte()?;
        let tag = match self.byte()? {
            OTHER_TAG => self.str()?,
            index => tag::KNOWN.get(usize::from(index))?,
        };
        let value = EcoString::from(self.str()?);
        let mut texts = [""; 4];
        for (text, bit) in texts
            .iter_mut()
            .zip([HAS_ANCHOR, HAS_HEAD, HAS_LINE, HAS_FOOT])
        {
            if flags & bit != 0 {
                *text = self.str()?;
            }
        }
        let [anchor, head, line_comment, foot] = texts;
        let (line, column, offset) = if self.positions {
            (
                u32::try_from(self.varint()?).ok()?,
                u32::try_from(self.varint()?).ok()?,
                u32::try_from(self.varint()?).ok()?,
            )
        } else {
            (0, 0, 0)
        };
        let children = self.count()?;
        let mut node = Node::at(kind, line, column, offset);
        node.style = style;
        node.set_tag(tag);
        node.value = value;
        node.set_anchor(anchor);
        node.set_head_comment(head);
        node.set_line_comment(line_comment);
        node.set_foot_comment(foot);
        Some((node, children))
    }

    fn byte(&mut self) -> Option<u8> {
        let (first, rest) = self.rest.split_first()?;
        self.rest = rest;
        Some(*first)
    }

    fn varint(&mut self) -> Option<u64> {
        let mut value = 0u64;
        for shift in (0..64).step_by(7) {
            let byte = self.byte()?;
            value |= u64::from(byte & 0x7f) << shift;
            if byte < 0x80 {
                return Some(value);
            }
        }
        None
    }

    /// A count of items still to read: each takes at least one byte, so a
    /// count larger than the input left is corrupt (and must not size an
    /// allocation).
    fn count(&mut self) -> Option<usize> {
        let count = usize::try_from(self.varint()?).ok()?;
        (count <= self.rest.len()).then_some(count)
    }

    fn str(&mut self) -> Option<&'a str> {
        let len = usize::try_from(self.varint()?).ok()?;
        if self.rest.len() < len {
            return None;
        }
        let (text, rest) = self.rest.split_at(len);
        self.rest = rest;
        std::str::from_utf8(text).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::yaml::parse_documents;

    const SAMPLE: &str = "# head\napiVersion: v1\nkind: ConfigMap # line\nmetadata:\n  name: &a x\n  labels: {app: \"q\", n: !custom 3}\ndata:\n  text: |\n    literal\n  ref: *a\n  list: [1, 2.5, ~, true]\n# foot\n---\nplain: 'single'\n";

    #[test]
    fn a_decoded_list_equals_the_encoded_one() {
        let nodes = parse_documents(SAMPLE).unwrap();
        let mut bytes = Vec::new();
        encode(&nodes, &mut bytes);
        bytes.extend_from_slice(b"tail");
        let (decoded, rest) = decode(&bytes).unwrap();
        assert_eq!(decoded, nodes);
        assert_eq!(rest, b"tail");
    }

    #[test]
    fn the_canonical_form_leaves_positions_out_and_replaces_one_value() {
        let nodes = parse_documents(SAMPLE).unwrap();
        let first = &nodes[0];
        let mut moved = first.clone();
        fn shift(node: &mut Node) {
            node.line += 7;
            node.offset += 100;
            node.content.iter_mut().for_each(shift);
        }
        shift(&mut moved);
        let canonical = |node: &Node| {
            let mut bytes = Vec::new();
            encode_canonical(node, None, &mut bytes);
            bytes
        };
        assert_eq!(canonical(first), canonical(&moved));
        let decoded = decode_canonical(&canonical(first)).unwrap();
        assert!(decoded.same_content(first));
        assert_eq!(decoded.root().line, 0);
        // One node's value replaced, found by address.
        let kind = first.root().get("kind").unwrap();
        let mut bytes = Vec::new();
        encode_canonical(first, Some((kind, "Secret")), &mut bytes);
        let decoded = decode_canonical(&bytes).unwrap();
        assert_eq!(decoded.root().get_str(&["kind"]), Some("Secret"));
        assert_ne!(bytes, canonical(first));
        // Truncated or extended forms are rejected.
        let bytes = canonical(first);
        for len in 0..bytes.len() {
            assert!(
                decode_canonical(&bytes[..len]).is_none(),
                "truncated to {len}"
            );
        }
        let mut longer = bytes.clone();
        longer.push(0);
        assert!(decode_canonical(&longer).is_none());
    }

    #[test]
    fn deep_nesting_round_trips_without_recursion() {
        let depth = 200_000;
        let mut node = Node::new_sequence();
        for _ in 0..depth {
            let mut outer = Node::new_sequence();
            outer.content.push(node);
            node = outer;
        }
        let nodes = vec![node];
        let mut bytes = Vec::new();
        encode(&nodes, &mut bytes);
        let (decoded, _) = decode(&bytes).unwrap();
        assert_eq!(decoded.len(), 1);
        // Dropping a 200,000-deep tree recurses in `Drop`; unnest first.
        for mut tree in [nodes, decoded] {
            let mut next = tree.pop();
            let mut levels = 0;
            while let Some(mut current) = next {
                next = current.content.pop();
                levels += 1;
            }
            assert_eq!(levels, depth + 1);
        }
    }

    #[test]
    fn every_truncation_and_corruption_is_rejected_or_decodes_without_panic() {
        let nodes = parse_documents(SAMPLE).unwrap();
        let mut bytes = Vec::new();
        encode(&nodes, &mut bytes);
        for len in 0..bytes.len() {
            assert!(decode(&bytes[..len]).is_none(), "truncated to {len}");
        }
        for index in 0..bytes.len() {
            let mut corrupt = bytes.clone();
            corrupt[index] ^= 0xff;
            let _ = decode(&corrupt);
        }
    }
}
