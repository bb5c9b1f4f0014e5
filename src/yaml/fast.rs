//! A one-pass parser for the block YAML that packages are made of: bytes
//! straight to [`Node`]s, line by line, with no tokens and no events.
//!
//! It covers a subset: printable text with `\n` line ends and no tabs;
//! block mappings with plain keys and block sequences; plain, single-line
//! quoted, `|` and `|-` scalars, one-line flow sequences of scalars and
//! `{}`; `---` between documents; and comments only where go-yaml's
//! placement of them is known (see [`Fast::comment_block_before`]). On
//! anything else (an anchor, a tag, a tab, a multi-line plain scalar, a
//! comment elsewhere, any error) it gives up and returns `None`, and the
//! caller parses the text with the full scanner, parser and composer,
//! which then gives the result or the error. It is a fast path, not a
//! second parser: the tests below compare it with the full parser on
//! package-like documents (hand-picked and generated) and on arbitrary
//! lines, and the differential tests and fuzz target compare the live
//! parser, this path included, with the frozen reference.

use super::node::Origin;
use super::node::{Node, NodeKind, Style, tag};
use super::resolve::resolve_plain;

/// Deeper nesting is left to the full parser (and its depth limit).
const MAX_DEPTH: usize = 100;

/// go-yaml rejects simple keys longer than 1024 characters; longer keys
/// are left to the full parser.
const MAX_KEY: usize = 1000;

/// Parses every document of `src`, placed at `origin`, or `None` when the
/// text is outside the subset this parser covers (or empty).
pub(crate) fn parse(src: &str, origin: Origin) -> Option<Vec<Node>> {
    let bytes = src.as_bytes();
    // Printable text and `\n` only: no tab, carriage return or control
    // character needs go-yaml's rules.
    let mut ascii = true;
    for chunk in bytes.chunks(64) {
        let (mut control, mut high) = (false, false);
        for &b in chunk {
            control |= (b < b' ' && b != b'\n') || b == 0x7f;
            high |= b >= 0x80;
        }
        if control {
            return None;
        }
        ascii &= !high;
    }
    // Past ASCII, columns count characters; a BOM, C1 controls (NEL among
    // them), Unicode line and paragraph separators and non-characters are
    // left to the full parser.
    if !ascii
        && src.chars().any(|c| {
            matches!(
                c,
                '\u{80}'
                    ..='\u{9f}' | '\u{2028}' | '\u{2029}' | '\u{feff}' | '\u{fffe}' | '\u{ffff}'
            )
        })
    {
        return None;
    }
    let mut fast = Fast {
        src,
        bytes,
        ascii,
        pos: 0,
        end: 0,
        line: 0,
        origin,
        stack: Vec::new(),
        children: Vec::new(),
        docs: Vec::new(),
        doc: None,
        doc_head: None,
        comments: None,
        blank: false,
        plain_last: false,
    };
    fast.stream()?;
    if fast.docs.is_empty() {
        return None;
    }
    Some(fast.docs)
}

/// A block collection being built; its children so far are
/// `Fast::children[start..]`.
struct Frame {
    node: Node,
    indent: usize,
    start: usize,
    /// A mapping key (or a `-`) whose value has not started.
    awaiting: Option<Awaiting>,
}

/// Where the null value of a key with no value would be placed, unless the
/// key has a line comment (go-yaml's placement of which is then not
/// known here).
#[derive(Clone, Copy)]
struct Awaiting {
    line: u32,
    line_start: usize,
    offset: usize,
    commented: bool,
}

/// Consecutive comment lines at one indentation.
struct Comments<'a> {
    indent: usize,
    lines: Vec<&'a str>,
}

impl Comments<'_> {
    fn text(&self) -> String {
        self.lines.join("\n")
    }
}

/// The document being built.
struct Document {
    node: Node,
    explicit: bool,
    started: bool,
}

struct Fast<'a> {
    src: &'a str,
    bytes: &'a [u8],
    /// No byte past ASCII: a column is a byte count.
    ascii: bool,
    /// Start of the current line.
    pos: usize,
    /// End of the current line (its `\n`, or the end of the text).
    end: usize,
    /// 0-based number of the current line in `src`.
    line: u32,
    origin: Origin,
    stack: Vec<Frame>,
    children: Vec<Node>,
    docs: Vec<Node>,
    doc: Option<Document>,
    /// The first document's head comment, before its first content.
    doc_head: Option<String>,
    comments: Option<Comments<'a>>,
    /// A blank line since the last content line.
    blank: bool,
    /// The last content line ended in a plain scalar with no comment, or
    /// a `|` scalar's lines.
    plain_last: bool,
}

/// `Option`'s `?` reads as "give up" below.
type Bail<T = ()> = Option<T>;

impl<'a> Fast<'a> {
    fn line_end(&self) -> usize {
        memchr::memchr(b'\n', &self.bytes[self.pos..]).map_or(self.bytes.len(), |i| self.pos + i)
    }

    /// Moves to the line after the one ending at `end`.
    fn next_line(&mut self, end: usize) {
        self.pos = (end + 1).min(self.bytes.len());
        self.line += 1;
    }

    /// A node of `kind` at byte `offset` of the current line.
    fn node(&self, kind: NodeKind, offset: usize) -> Node {
        self.node_on(kind, self.line, self.pos, offset)
    }

    fn node_on(&self, kind: NodeKind, line: u32, line_start: usize, offset: usize) -> Node {
        let column = if self.ascii {
            offset - line_start
        } else {
            self.src[line_start..offset].chars().count()
        };
        Node::at(
            kind,
            (line + 1).saturating_add(self.origin.lines),
            u32::try_from(column + 1).unwrap_or(u32::MAX),
            u32::try_from(offset)
                .unwrap_or(u32::MAX)
                .saturating_add(self.origin.offset),
        )
    }

    fn stream(&mut self) -> Bail {
        while self.pos < self.bytes.len() {
            self.end = self.line_end();
            let end = self.end;
            let line = &self.bytes[self.pos..end];
            let indent = line.iter().take_while(|&&b| b == b' ').count();
            if indent == line.len() {
                if !line.is_empty() {
                    return None; // spaces only: left to the full parser
                }
                self.blank_line()?;
            } else if indent == 0 && (line.starts_with(b"---") || line.starts_with(b"...")) {
                if line != b"---" {
                    return None;
                }
                self.end_document(true)?;
                let node = self.node(NodeKind::Document, self.pos);
                self.doc = Some(Document {
                    node,
                    explicit: true,
                    started: false,
                });
                self.blank = false;
            } else if line[indent] == b'#' {
                self.comment_line(indent, end)?;
            } else if indent == 0 && line[0] == b'%' {
                return None;
            } else {
                self.content_line(indent, end)?;
            }
            // A `|` scalar may have read further lines.
            self.next_line(self.end);
        }
        self.end_document(false)
    }

    /// A blank line after comments makes them the head comment of the
    /// first document (when it is implicit and has no content yet), which
    /// go-yaml then places at its first content; anywhere else the
    /// placement is left to the full parser.
    fn blank_line(&mut self) -> Bail {
        let Some(comments) = self.comments.take() else {
            self.blank = true;
            return Some(());
        };
        if !self.docs.is_empty() {
            return None;
        }
        if self.doc.is_some() || self.doc_head.is_some() {
            return None;
        }
        self.doc_head = Some(comments.text());
        Some(())
    }

    fn comment_line(&mut self, indent: usize, end: usize) -> Bail {
        if self.bytes[end - 1] == b' ' {
            return None;
        }
        let text = &self.src[self.pos + indent..end];
        match self.comments.as_mut() {
            Some(comments) => {
                if comments.indent != indent {
                    return None;
                }
                comments.lines.push(text);
            }
            None => {
                let placed = self
                    .doc
                    .as_ref()
                    .is_some_and(|doc| doc.started || doc.explicit);
                if placed && self.blank {
                    return None;
                }
                self.comments = Some(Comments {
                    indent,
                    lines: vec![text],
                });
            }
        }
        Some(())
    }

    /// The last entry of the innermost collection: a mapping's last key or
    /// a sequence's last item (where a foot comment goes).
    fn last_entry(&mut self) -> Bail<&mut Node> {
        let top = self.stack.last()?;
        if top.awaiting.is_some() {
            return None;
        }
        let len = self.children.len();
        let back = if top.node.kind == NodeKind::Mapping {
            2
        } else {
            1
        };
        if len < top.start + back {
            return None;
        }
        Some(&mut self.children[len - back])
    }

    /// Places the comments before a content line at `indent`, as go-yaml
    /// does in the cases covered: the head comment of the entry that
    /// follows at their indentation, or the foot comment of the last entry
    /// of the innermost collection when they are at its indentation and
    /// what follows is less indented. Returns the head comment to set.
    fn comment_block_before(&mut self, indent: usize) -> Bail<Option<String>> {
        let Some(comments) = self.comments.take() else {
            return Some(None);
        };
        if comments.indent == indent {
            return Some(Some(comments.text()));
        }
        let started = self.doc.as_ref().is_some_and(|doc| doc.started);
        if !started || comments.indent < indent || self.stack.last()?.indent != comments.indent {
            return None;
        }
        self.set_foot(&comments)?;
        Some(None)
    }

    fn set_foot(&mut self, comments: &Comments<'_>) -> Bail {
        let entry = self.last_entry()?;
        if !entry.foot_comment().is_empty() {
            return None;
        }
        entry.set_foot_comment(comments.text());
        Some(())
    }

    fn content_line(&mut self, indent: usize, end: usize) -> Bail {
        let head = self.comment_block_before(indent)?;
        if self.doc.is_none() {
            // An implicit document sits at its first content.
            let mut node = self.node(NodeKind::Document, self.pos + indent);
            if let Some(head) = self.doc_head.take() {
                node.set_head_comment(head);
            }
            self.doc = Some(Document {
                node,
                explicit: false,
                started: false,
            });
        }
        let doc = self.doc.as_mut()?;
        doc.started = true;
        self.blank = false;
        self.plain_last = false;
        let line = &self.bytes[self.pos..end];
        let seq_line = line[indent] == b'-' && line.get(indent + 1).is_none_or(|&b| b == b' ');
        self.close_to(indent, seq_line)?;
        let open_new = match self.stack.last_mut() {
            None => {
                if !self.children.is_empty() {
                    return None; // a second root
                }
                true
            }
            Some(top) if top.awaiting.is_some() => {
                top.awaiting = None;
                true
            }
            Some(top) if top.indent == indent => {
                if (top.node.kind == NodeKind::Sequence) != seq_line {
                    return None;
                }
                false
            }
            Some(_) => return None,
        };
        if open_new {
            if self.stack.len() >= MAX_DEPTH {
                return None;
            }
            if self.stack.is_empty() && seq_line && head.is_some() {
                return None;
            }
            let kind = if seq_line {
                NodeKind::Sequence
            } else {
                NodeKind::Mapping
            };
            let mut node = self.node(kind, self.pos + indent);
            node.set_tag(if seq_line { tag::SEQ } else { tag::MAP });
            self.stack.push(Frame {
                node,
                indent,
                start: self.children.len(),
                awaiting: None,
            });
        }
        if seq_line {
            self.sequence_entry(indent, end, head)
        } else {
            self.mapping_entry(indent, end, head)
        }
    }

    /// Ends the collections that a content line at `indent` closes, and
    /// gives awaited mapping values that never started their null.
    fn close_to(&mut self, indent: usize, seq_line: bool) -> Bail {
        while let Some(top) = self.stack.last_mut() {
            if let Some(awaiting) = top.awaiting {
                if indent > top.indent
                    || (indent == top.indent && seq_line && top.node.kind == NodeKind::Mapping)
                {
                    return Some(());
                }
                if top.node.kind == NodeKind::Sequence || awaiting.commented {
                    return None;
                }
                top.awaiting = None;
                let mut null = self.node_on(
                    NodeKind::Scalar,
                    awaiting.line,
                    awaiting.line_start,
                    awaiting.offset,
                );
                null.set_tag(tag::NULL);
                self.children.push(null);
                continue;
            }
            let (top_indent, top_kind) = (top.indent, top.node.kind);
            let depth = self.stack.len();
            let indentless_end = top_indent == indent
                && top_kind == NodeKind::Sequence
                && !seq_line
                && depth >= 2
                && self.stack[depth - 2].indent == indent;
            if top_indent > indent || indentless_end {
                self.finish_top()?;
            } else {
                break;
            }
        }
        Some(())
    }

    /// Ends the innermost collection and adds it to its parent (or makes it
    /// the document's root).
    fn finish_top(&mut self) -> Bail {
        let frame = self.stack.pop()?;
        let mut node = frame.node;
        node.content = self.children.drain(frame.start..).collect();
        self.children.push(node);
        Some(())
    }

    fn end_document(&mut self, at_marker: bool) -> Bail {
        let Some(doc) = self.doc.take() else {
            return if self.comments.is_some() || self.doc_head.is_some() {
                None
            } else {
                Some(())
            };
        };
        if !doc.started {
            return None;
        }
        if let Some(comments) = self.comments.take() {
            // Comments at the innermost collection's indentation are its
            // last entry's foot: at the end of the stream after a plain or
            // `|` value, and before a `---` when indented. Elsewhere go-yaml
            // may give them to the document.
            if self.stack.last()?.indent != comments.indent
                || !self.plain_last
                || (at_marker && comments.indent == 0)
            {
                return None;
            }
            self.set_foot(&comments)?;
        }
        self.close_to(0, false)?;
        while !self.stack.is_empty() {
            self.finish_top()?;
        }
        let root = self.children.pop()?;
        if !self.children.is_empty() {
            return None;
        }
        let mut node = doc.node;
        node.content.push(root);
        self.docs.push(node);
        self.blank = false;
        Some(())
    }

    /// The first byte at or after `from` (and before `end`) that is not a
    /// space.
    fn skip_blanks(&self, from: usize, end: usize) -> usize {
        from + self.bytes[from..end]
            .iter()
            .take_while(|&&b| b == b' ')
            .count()
    }

    /// Marks the innermost collection's last entry as having its value on
    /// the lines below; a null value would sit at `offset`.
    fn await_value(&mut self, offset: usize, commented: bool) -> Bail {
        let (line, line_start) = (self.line, self.pos);
        self.stack.last_mut()?.awaiting = Some(Awaiting {
            line,
            line_start,
            offset,
            commented,
        });
        Some(())
    }

    /// `- item` at `indent`.
    fn sequence_entry(&mut self, indent: usize, end: usize, head: Option<String>) -> Bail {
        let dash = self.pos + indent;
        if dash + 1 >= end {
            if head.is_some() {
                return None;
            }
            return self.await_value(dash + 1, false);
        }
        let at = self.skip_blanks(dash + 1, end);
        if at == end
            || (self.bytes[at] == b'-'
                && self
                    .bytes
                    .get(at + 1)
                    .is_none_or(|&b| b == b' ' || b == b'\n'))
        {
            return None;
        }
        if self.bytes[at] == b'#' {
            // `- # comment` above the item (how kyaml writes an item's head
            // comment): the head comment of the item's first entry, with
            // any comment lines below at its indentation.
            if head.is_some() || self.bytes[end - 1] == b' ' {
                return None;
            }
            self.comments = Some(Comments {
                indent: at - self.pos,
                lines: vec![&self.src[at..end]],
            });
            return self.await_value(dash + 1, true);
        }
        if self.key_end(at, end)?.is_some() {
            // A compact mapping: `- key: value` and the keys below it.
            if self.stack.len() >= MAX_DEPTH {
                return None;
            }
            let mut node = self.node(NodeKind::Mapping, at);
            node.set_tag(tag::MAP);
            if let Some(head) = head {
                node.set_head_comment(head);
            }
            self.stack.push(Frame {
                node,
                indent: at - self.pos,
                start: self.children.len(),
                awaiting: None,
            });
            return self.mapping_entry(at - self.pos, end, None);
        }
        let min_indent = indent + 1;
        let mut item = self.value(at, end, min_indent)?;
        if let Some(head) = head {
            item.set_head_comment(head);
        }
        self.children.push(item);
        Some(())
    }

    /// `key: value` (or `key:` with the value below) at `indent`.
    fn mapping_entry(&mut self, indent: usize, end: usize, head: Option<String>) -> Bail {
        let start = self.pos + indent;
        let colon = self.key_end(start, end)??;
        let text = &self.src[start..colon];
        let mut key = self.node(NodeKind::Scalar, start);
        key.set_tag(plain_tag(text));
        key.value = text.into();
        if let Some(head) = head {
            key.set_head_comment(head);
        }
        let at = self.skip_blanks(colon + 1, end);
        let commented = at > colon + 1 && at < end && self.bytes[at] == b'#';
        if commented {
            // `key: # comment` above its value (kpt's `metadata: #
            // kpt-merge: ...`): the key's line comment.
            if self.bytes[end - 1] == b' ' {
                return None;
            }
            key.set_line_comment(&self.src[at..end]);
        }
        self.children.push(key);
        if colon + 1 == end || commented {
            return self.await_value(colon + 1, commented);
        }
        if at == end {
            return None;
        }
        let value = self.value(at, end, indent + 1)?;
        self.children.push(value);
        Some(())
    }

    /// Where the plain key starting at `start` ends (its `:`), `None`
    /// inside when the text there is not a key line, or `None` outside
    /// (give up) when it is something this parser leaves alone.
    fn key_end(&self, start: usize, end: usize) -> Bail<Option<usize>> {
        let first = self.bytes[start];
        if !plain_start(first, self.bytes.get(start + 1).copied()) {
            return if matches!(first, b'"' | b'\'' | b'|' | b'[' | b'{') {
                Some(None)
            } else {
                None
            };
        }
        let line = &self.bytes[start..end];
        let mut from = 0;
        while let Some(i) = memchr::memchr2(b':', b'#', &line[from..]).map(|i| from + i) {
            if line[i] == b'#' {
                if line[i - 1] == b' ' {
                    return Some(None); // a plain scalar with a comment
                }
            } else if i + 1 == line.len() || line[i + 1] == b' ' {
                if i > MAX_KEY || line[i - 1] == b' ' {
                    return None;
                }
                return Some(Some(start + i));
            }
            from = i + 1;
        }
        Some(None)
    }

    /// A scalar or one-line flow value starting at `at` (not at `end`),
    /// with its line comment; a `|` scalar reads the lines below it,
    /// which must be indented at least `min_indent`.
    fn value(&mut self, at: usize, end: usize, min_indent: usize) -> Bail<Node> {
        let bytes = self.bytes;
        let (mut node, after) = match bytes[at] {
            b'"' => {
                let close = at + 1 + memchr::memchr2(b'"', b'\\', &bytes[at + 1..end])?;
                if bytes[close] == b'\\' {
                    return None;
                }
                let mut node = self.node(NodeKind::Scalar, at);
                node.set_tag(tag::STR);
                node.style = Style::DOUBLE_QUOTED;
                node.value = self.src[at + 1..close].into();
                (node, close + 1)
            }
            b'\'' => {
                let (value, after) = self.single_quoted(at, end)?;
                let mut node = self.node(NodeKind::Scalar, at);
                node.set_tag(tag::STR);
                node.style = Style::SINGLE_QUOTED;
                node.value = value;
                (node, after)
            }
            b'[' => self.flow_sequence(at, end)?,
            b'{' => {
                if bytes.get(at + 1) != Some(&b'}') {
                    return None;
                }
                let mut node = self.node(NodeKind::Mapping, at);
                node.set_tag(tag::MAP);
                node.style = Style::FLOW;
                (node, at + 2)
            }
            b'|' => return self.literal(at, end, min_indent),
            first => {
                if !plain_start(first, bytes.get(at + 1).copied()) {
                    return None;
                }
                let line = &bytes[at..end];
                let mut value_end = end;
                let mut comment = None;
                let mut from = 0;
                while let Some(i) = memchr::memchr2(b':', b'#', &line[from..]).map(|i| from + i) {
                    if line[i] == b'#' {
                        if line[i - 1] == b' ' {
                            value_end = at + i;
                            comment = Some(at + i);
                            break;
                        }
                    } else if i + 1 == line.len() || line[i + 1] == b' ' {
                        return None;
                    }
                    from = i + 1;
                }
                while bytes[value_end - 1] == b' ' {
                    value_end -= 1;
                }
                let text = &self.src[at..value_end];
                let mut node = self.node(NodeKind::Scalar, at);
                node.set_tag(plain_tag(text));
                node.value = text.into();
                if let Some(comment) = comment {
                    if bytes[end - 1] == b' ' {
                        return None;
                    }
                    node.set_line_comment(&self.src[comment..end]);
                } else {
                    self.plain_last = true;
                }
                return Some(node);
            }
        };
        // After a quoted scalar or a flow collection: blanks, then the end
        // of the line or (after a quoted scalar) a comment.
        let rest = self.skip_blanks(after, end);
        if rest < end {
            let quoted = node.kind == NodeKind::Scalar;
            if !quoted || rest == after || bytes[rest] != b'#' || bytes[end - 1] == b' ' {
                return None;
            }
            node.set_line_comment(&self.src[rest..end]);
        } else if rest > after {
            return None; // trailing blanks
        }
        Some(node)
    }

    fn single_quoted(&self, at: usize, end: usize) -> Bail<(super::node::EcoString, usize)> {
        let bytes = self.bytes;
        let mut value = super::node::EcoString::new();
        let mut from = at + 1;
        loop {
            let quote = from + memchr::memchr(b'\'', &bytes[from..end])?;
            value.push_str(&self.src[from..quote]);
            if bytes.get(quote + 1) == Some(&b'\'') && quote + 1 < end {
                value.push('\'');
                from = quote + 2;
            } else {
                return Some((value, quote + 1));
            }
        }
    }

    /// `[a, "b", c]` on one line, of plain and quoted scalars.
    fn flow_sequence(&self, at: usize, end: usize) -> Bail<(Node, usize)> {
        let bytes = self.bytes;
        let mut node = self.node(NodeKind::Sequence, at);
        node.set_tag(tag::SEQ);
        node.style = Style::FLOW;
        let mut i = at + 1;
        if bytes.get(i) == Some(&b']') {
            return Some((node, i + 1));
        }
        loop {
            while i < end && bytes[i] == b' ' {
                i += 1;
            }
            if i >= end {
                return None;
            }
            let item_end;
            let mut item = self.node(NodeKind::Scalar, i);
            if bytes[i] == b'"' {
                let close = i + 1 + memchr::memchr2(b'"', b'\\', &bytes[i + 1..end])?;
                if bytes[close] == b'\\' {
                    return None;
                }
                item.set_tag(tag::STR);
                item.style = Style::DOUBLE_QUOTED;
                item.value = self.src[i + 1..close].into();
                item_end = close + 1;
            } else {
                let len = bytes[i..end]
                    .iter()
                    .take_while(|&&b| {
                        b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'/' | b'=')
                    })
                    .count();
                if len == 0 || bytes[i] == b'-' && len == 1 {
                    return None;
                }
                let text = &self.src[i..i + len];
                item.set_tag(plain_tag(text));
                item.value = text.into();
                item_end = i + len;
            }
            node.content.push(item);
            match bytes.get(item_end) {
                Some(b',') if item_end < end => i = item_end + 1,
                Some(b']') if item_end < end => return Some((node, item_end + 1)),
                _ => return None,
            }
        }
    }

    /// A `|` or `|-` scalar: its lines are those below indented at least as
    /// much as the first (which must be at `min_indent` or deeper).
    fn literal(&mut self, at: usize, end: usize, min_indent: usize) -> Bail<Node> {
        let strip = match &self.bytes[at + 1..end] {
            b"" => false,
            b"-" => true,
            _ => return None,
        };
        let mut node = self.node(NodeKind::Scalar, at);
        node.set_tag(tag::STR);
        node.style = Style::LITERAL;
        // Read the lines below; the current line becomes the last one taken.
        let bytes = self.bytes;
        let mut value = String::new();
        let mut content_indent = 0;
        let mut has_content = false;
        let mut blanks = 0;
        loop {
            if self.end >= bytes.len() {
                // A last line without a line break: left to the full parser.
                return None;
            }
            let next = self.end + 1;
            if next == bytes.len() {
                break;
            }
            let next_end = memchr::memchr(b'\n', &bytes[next..]).map_or(bytes.len(), |i| next + i);
            let line = &bytes[next..next_end];
            let indent = line.iter().take_while(|&&b| b == b' ').count();
            if line.is_empty() {
                blanks += 1;
            } else if indent == line.len() {
                return None;
            } else {
                if !has_content {
                    if indent < min_indent {
                        return None; // an empty scalar
                    }
                    content_indent = indent;
                } else if indent < content_indent {
                    break;
                }
                if has_content {
                    value.push('\n');
                }
                for _ in 0..blanks {
                    value.push('\n');
                }
                blanks = 0;
                has_content = true;
                value.push_str(&self.src[next + content_indent..next_end]);
            }
            self.pos = next;
            self.end = next_end;
            self.line += 1;
        }
        if !has_content {
            return None;
        }
        if blanks > 0 {
            // Trailing blank lines belong to the scalar (and are chomped);
            // what follows them comes after a blank line.
            self.blank = true;
        }
        if !strip {
            value.push('\n');
        }
        node.value = value.into();
        self.plain_last = true;
        Some(node)
    }
}

/// A plain scalar's tag, as the composer gives it: `<<` is a merge key.
fn plain_tag(text: &str) -> &'static str {
    if text == "<<" {
        tag::MERGE
    } else {
        resolve_plain(text)
    }
}

/// Whether a plain scalar may start with `first` (followed by `next`):
/// not an indicator, except `-` before a non-blank.
fn plain_start(first: u8, next: Option<u8>) -> bool {
    match first {
        b'-' => next.is_some_and(|b| b != b' ' && b != b'\n'),
        b'?' | b':' | b',' | b'[' | b']' | b'{' | b'}' | b'#' | b'&' | b'*' | b'!' | b'|'
        | b'>' | b'\'' | b'"' | b'%' | b'@' | b'`' | b' ' => false,
        _ => true,
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::yaml::composer::parse_piece_full;

    /// Whether the one-pass parser took `src`; when it did, its documents
    /// must be the full parser's.
    fn taken(src: &str) -> bool {
        let full = parse_piece_full(src, Origin::default());
        match parse(src, Origin::default()) {
            Some(fast) => {
                assert_eq!(
                    Ok(&fast),
                    full.as_ref(),
                    "one-pass parse differs on {src:?}"
                );
                true
            }
            None => false,
        }
    }

    #[test]
    fn takes_package_yaml_and_matches_the_full_parser() {
        let cases = [
            "a: 1\n",
            "a: 1",
            "# h1\n# h2\na: 1\n",
            "# head\n\na: 1\n",
            "# head\n\n# h2\na: 1\n",
            "\n\n# h\na: 1\n",
            "a:\n  b: 1\n  # after\nc: 2\n",
            "a:\n  b: 1\n# after\nc: 2\n",
            "a: 1\n# f\n",
            "a:\n  b: 1\n  # x\n",
            "a:\n- x\n# f\n",
            "a:\n  - x\n  # f\n",
            "- a # c\n- b\n# d\n- c\n",
            "a:\n- x\n# f\nb: 2\n",
            "---\n# c\na: 1\n",
            "---\na: 1\n",
            "a:\n  # c\n  b: 1\n",
            "- a: 1\n  # c\n  b: 2\n# d\n- e\n",
            "a: []\nb: {}\nc: [x, \"y\", 1]\n",
            "a:\n  b: 1\n  # x\n---\nc: 1\n",
            "a:\n  b: |\n    x\n  # x\n---\nc: 1\n",
            "a: 1\n\nb: 2\n",
            "a:\nb: 1\n",
            "a: |-\n  x\n\n  y\nb: 1\n",
            "a: |\n\n  x\n\n\n  y\n\n",
            "a: 'it''s'\nb: \"q\" # c\n",
            "k:\n- name: app\n  image: x:1\n  args: [--port, \"8080\"]\n  env:\n  # proxy\n  - name: P\n    value: \"true\"\n- name: s\n  command:\n  - sh\n  - |\n    while true; do\n      echo\n    done\n",
            "a: 1\n---\nb: 2\n---\n- x\n- y\n",
            "<<: x\nt: true\nn: ~\nf: 1.5\ni: -3\n",
            "a: b:c\nd: e#f\n",
            "metadata: # kpt-merge: ns/x\n  name: x\nb: # c\n- x\n",
            "- # c\n  a: 1\n  b: 2\n- # d\n  x: 1\n",
            "k:\n- # c\n  # e\n  a: 1\n",
            "- # c\n  - x\n",
            "é: ü # ç\nb: [x, \"é\"]\nc: |\n  ß\n",
        ];
        for src in cases {
            assert!(taken(src), "the one-pass parser declined {src:?}");
        }
    }

    #[test]
    fn declines_what_it_does_not_cover() {
        let cases = [
            "",
            "# only a comment\n",
            "a: &x 1\nb: *x\n",
            "a: !t 1\n",
            "a:\tb\n",
            "a: \u{2028}\n",
            "\u{feff}a: 1\n",
            "a: \u{85}\n",
            "a: 1\r\n",
            "a: b\n  c\n",
            "a: b: c\n",
            "a: \"x\\ty\"\n",
            "a: >\n  x\n",
            "a: |+\n  x\n",
            "a: |\n  x",
            "a: {b: c}\n",
            "a: [b, [c]]\n",
            "? a\n: b\n",
            "a:  \n",
            "a: 1\n  \n",
            "a: 1\n\n# c\nb: 2\n",
            "a: 1\n# c\n\nb: 2\n",
            "a: 1\n# c\n---\nb: 2\n",
            "a: \"q\"\n# c\n",
            "a: # c\nb: 1\n",
            "- # c\n\n  a: 1\n",
            "-   # c\n  a: 1\n",
            "- # c\n",
            "- [a]\n# c\n",
            "a: x # l\n# c\n",
            "a:\n  b:\n    c: 1\n  # x\nd: 2\n",
            "---\n---\na: 1\n",
            "%YAML 1.1\n---\na: 1\n",
            "a: 1\n...\n",
            "scalar\n",
            "a:\n    b: 1\n  c: 2\n",
            "\"k\": v\n",
        ];
        for src in cases {
            assert!(!taken(src), "the one-pass parser took {src:?}");
        }
    }

    /// A small deterministic generator of package-like YAML, with comments,
    /// blank lines and every value shape the one-pass parser reads (and a
    /// few it declines), so the comparison covers its placement rules.
    struct Gen(u64);

    impl Gen {
        fn next(&mut self, n: u64) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0 % n
        }

        fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
            items[self.next(items.len() as u64) as usize]
        }

        fn extras(&mut self, out: &mut String, indent: usize) {
            match self.next(12) {
                0 => out.push('\n'),
                1 | 2 => {
                    let shift = self.pick(&["", "", "", "", "", "", "  ", "    "]);
                    let back = if self.next(6) == 0 { indent.min(2) } else { 0 };
                    for _ in 0..self.next(2) + 1 {
                        out.push_str(&" ".repeat(indent - back));
                        out.push_str(shift);
                        out.push_str(self.pick(&["# c", "# two words", "#x", "#"]));
                        out.push('\n');
                    }
                    if self.next(10) == 0 {
                        out.push('\n');
                    }
                }
                _ => {}
            }
        }

        fn scalar(&mut self, out: &mut String, indent: usize) {
            let value = self.pick(&[
                "x",
                "1",
                "-2",
                "true",
                "~",
                "null",
                "1.5",
                "web-1",
                "a b",
                "http://h:1/p",
                "\"q\"",
                "\"\"",
                "'s'",
                "ü é",
                "\"ß\"",
                "'it''s'",
                "[]",
                "{}",
                "[a, \"b\", 3]",
                "[--p, -v]",
                "|",
                "# c",
                "|-",
                "e#f",
                "x # c",
                "\"q\" # c",
                "[a,b]",
            ]);
            // Now and then one it declines.
            let value = if self.next(60) == 0 {
                self.pick(&["&a x", "!t x", ">", "x\n  y"])
            } else {
                value
            };
            out.push_str(value);
            if value.starts_with('|') {
                out.push('\n');
                let extra = if self.next(4) == 0 { 1 } else { 2 };
                for _ in 0..self.next(3) + 1 {
                    if self.next(4) == 0 {
                        out.push('\n');
                    }
                    out.push_str(&" ".repeat(indent + extra));
                    out.push_str(self.pick(&["line", "#!/bin/sh", "  deeper", "a: b"]));
                    out.push('\n');
                }
                if self.next(6) == 0 {
                    out.push('\n');
                }
            } else {
                out.push('\n');
            }
        }

        fn mapping(&mut self, out: &mut String, indent: usize, depth: u32, first_inline: bool) {
            for i in 0..self.next(4) + 1 {
                if i > 0 || !first_inline {
                    self.extras(out, indent);
                    out.push_str(&" ".repeat(indent));
                }
                out.push_str(self.pick(&[
                    "a", "name", "b2", "long key", "<<", "on", "k.io/x", "a:b", "-k", "1", "é",
                ]));
                out.push(':');
                self.value(out, indent, depth);
            }
        }

        fn sequence(&mut self, out: &mut String, indent: usize, depth: u32) {
            for _ in 0..self.next(3) + 1 {
                self.extras(out, indent);
                out.push_str(&" ".repeat(indent));
                out.push('-');
                if depth < 4 && self.next(3) == 0 {
                    let gap = if self.next(5) == 0 { 3 } else { 1 };
                    out.push_str(&" ".repeat(gap));
                    self.mapping(out, indent + 1 + gap, depth + 1, true);
                } else if depth < 4 && self.next(8) == 0 {
                    if self.next(2) == 0 {
                        out.push_str(" # item");
                    }
                    out.push('\n');
                    self.mapping(out, indent + 2, depth + 1, false);
                } else {
                    out.push(' ');
                    self.scalar(out, indent);
                }
            }
        }

        fn value(&mut self, out: &mut String, indent: usize, depth: u32) {
            let choice = self.next(if depth < 4 { 6 } else { 2 });
            if choice >= 2 && self.next(4) == 0 {
                out.push_str(" # kpt-merge: ns/x");
            }
            match choice {
                0 | 1 => {
                    out.push(' ');
                    self.scalar(out, indent);
                }
                2 => {
                    out.push('\n');
                    self.mapping(out, indent + 2, depth + 1, false);
                }
                3 => {
                    out.push('\n');
                    let inner = if self.next(2) == 0 {
                        indent
                    } else {
                        indent + 2
                    };
                    self.sequence(out, inner, depth + 1);
                }
                4 => out.push('\n'),
                _ => {
                    out.push('\n');
                    self.mapping(out, indent + 4, depth + 1, false);
                }
            }
        }

        fn stream(&mut self) -> String {
            let mut out = String::new();
            for i in 0..self.next(3) + 1 {
                if i > 0 || self.next(4) == 0 {
                    out.push_str("---\n");
                }
                self.extras(&mut out, 0);
                if self.next(5) == 0 {
                    self.sequence(&mut out, 0, 0);
                } else {
                    self.mapping(&mut out, 0, 0, false);
                }
                let indent = self.next(3) as usize * 2;
                self.extras(&mut out, indent);
            }
            out
        }
    }

    #[test]
    fn generated_documents_match_the_full_parser() {
        let mut took = 0;
        let total: u64 = 5000;
        for seed in 1..=total {
            let src = Gen(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15)).stream();
            if taken(&src) {
                took += 1;
            }
        }
        // Enough generated documents must go through the one-pass parser
        // for the comparison to say something (the generator also writes
        // comment placements and values that it leaves to the full parser).
        assert!(
            took * 12 > total,
            "the one-pass parser took {took} of {total}"
        );
    }

    proptest! {
        #[test]
        fn arbitrary_lines_match_the_full_parser(
            lines in proptest::collection::vec("[ ]{0,4}(- )?[a-c#'\"|\\[\\]{}:, -]{0,8}", 1..12)
        ) {
            let src = lines.join("\n") + "\n";
            taken(&src);
        }
    }
}
