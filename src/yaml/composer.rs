//! Builds [`Node`] trees from parser events (go-yaml v3 `parser` in decode.go),
//! including the foot-comment moves onto mapping keys.
//!
//! Tags follow go-yaml's node rules: an explicit tag (other than the bare
//! `!`) is kept in short form with [`Style::TAGGED`]; otherwise quoted and
//! block scalars are `!!str`, a plain `<<` is `!!merge`, other plain scalars
//! get [`resolve_plain`], and collections `!!seq` / `!!map`.

use std::collections::HashSet;

use super::error::{RawError, YamlError};
use super::node::{Node, NodeKind, Origin, Style, tag};
use super::parser::{Event, EventKind, Parser};
use super::resolve::resolve_plain;
use super::scanner::{Mark, ScalarStyle, Scanner};

/// Parses the first document of `src` as a fresh go-yaml decoder would
/// (`yaml.NewDecoder(r).Decode(&node)`): returns the Document node, or
/// `None` at end of stream or for an empty/null document (kyaml's
/// `IsYNodeEmptyDoc`: the root is a `!!null` scalar, e.g. `---` alone).
pub fn parse_document(src: &str) -> Result<Option<Node>, YamlError> {
    // A text the one-pass parser takes whole has no error anywhere, so its
    // first document is the decoder's first.
    if let Some(documents) = super::fast::parse(src, Origin::default()) {
        return Ok(documents
            .into_iter()
            .next()
            .filter(|doc| !is_null_document(doc)));
    }
    let mut composer = Composer::new(src).map_err(RawError::into_yaml_error)?;
    let document = composer
        .next_document()
        .map_err(RawError::into_yaml_error)?;
    Ok(document.filter(|doc| !is_null_document(doc)))
}

/// Parses every document of `src` on this thread (Document nodes, in
/// order), as repeated `Decode` calls on one go-yaml decoder return them;
/// null documents are included. [`super::parse_documents`] cuts long
/// streams and calls this on the pieces.
pub(crate) fn parse_documents_sequential(src: &str) -> Result<Vec<Node>, YamlError> {
    parse_piece(src, Origin::default())
}

/// [`parse_documents_sequential`] for a piece that starts at `origin` of
/// its stream (a piece starts a line, so columns need no move).
pub(crate) fn parse_piece(src: &str, origin: Origin) -> Result<Vec<Node>, YamlError> {
    match super::fast::parse(src, origin) {
        Some(documents) => Ok(documents),
        None => parse_piece_full(src, origin),
    }
}

/// [`parse_piece`] with the full scanner, parser and composer, for what
/// the one-pass parser (`yaml::fast`) does not take.
pub(crate) fn parse_piece_full(src: &str, origin: Origin) -> Result<Vec<Node>, YamlError> {
    let mut composer = Composer::new(src).map_err(RawError::into_yaml_error)?;
    composer.origin = origin;
    let mut documents = Vec::new();
    while let Some(document) = composer
        .next_document()
        .map_err(RawError::into_yaml_error)?
    {
        documents.push(document);
    }
    Ok(documents)
}

fn is_null_document(doc: &Node) -> bool {
    doc.kind == NodeKind::Document
        && doc
            .content
            .first()
            .is_some_and(|root| root.tag() == tag::NULL)
}

/// A collection under construction, with its pending mapping key. Its
/// children so far are `Composer::children[start..]`: one shared stack
/// instead of a growing `Vec` per collection, so that each collection's
/// content is allocated once at its exact size when it ends (growing
/// vectors of large nodes by reallocation dominated parse time).
struct Frame {
    node: Node,
    start: usize,
    key: Option<Node>,
}

/// go-yaml's `parser` struct: an event source with one event of lookahead
/// and the set of anchors seen so far (aliases must refer back to one).
struct Composer<'a> {
    parser: Parser<'a>,
    event: Option<Event<'a>>,
    anchors: HashSet<String>,
    started: bool,
    /// Finished children of the open collections (see [`Frame`]).
    children: Vec<Node>,
    origin: Origin,
}

impl<'a> Composer<'a> {
    fn new(src: &'a str) -> Result<Composer<'a>, RawError> {
        Scanner::check_input(src)?;
        Ok(Composer {
            parser: Parser::new(src),
            event: None,
            anchors: HashSet::new(),
            started: false,
            children: Vec::new(),
            origin: Origin::default(),
        })
    }

    fn peek(&mut self) -> Result<Option<&Event<'a>>, RawError> {
        if self.event.is_none() {
            self.event = self.parser.next_event()?;
        }
        Ok(self.event.as_ref())
    }

    fn peek_kind(&mut self) -> Result<Option<EventKind>, RawError> {
        Ok(self.peek()?.map(|event| event.kind))
    }

    /// Takes the peeked event.
    fn take(&mut self) -> Result<Event<'a>, RawError> {
        self.peek()?;
        self.event.take().ok_or_else(|| {
            RawError::composer(
                "attempted to go past the end of stream; corrupted value?".to_owned(),
                Mark::default(),
            )
        })
    }

    fn next_document(&mut self) -> Result<Option<Node>, RawError> {
        if !self.started {
            // The stream start event.
            self.take()?;
            self.started = true;
        }
        match self.peek_kind()? {
            None | Some(EventKind::StreamEnd) => Ok(None),
            Some(_) => self.parse().map(Some),
        }
    }

    /// Parses one node (a document or a node inside one). Collections are
    /// built with an explicit stack rather than recursion, so that nesting
    /// up to go-yaml's limit of 10000 levels cannot overflow the stack.
    fn parse(&mut self) -> Result<Node, RawError> {
        if self.peek_kind()? == Some(EventKind::DocumentStart) {
            return self.document();
        }
        let mut stack: Vec<Frame> = Vec::new();
        loop {
            let mut finished = None;
            if let Some(top) = stack.last() {
                let end_kind = if top.node.kind == NodeKind::Mapping {
                    EventKind::MappingEnd
                } else {
                    EventKind::SequenceEnd
                };
                match self.peek_kind()? {
                    None => return Err(unexpected_end()),
                    Some(kind) if kind == end_kind => {
                        if let Some(frame) = stack.pop() {
                            let mut node = frame.node;
                            node.content = self.children.drain(frame.start..).collect();
                            finished = Some(self.finish_collection(node)?);
                        }
                    }
                    Some(_) => {}
                }
            }
            let node = match finished {
                Some(node) => node,
                None => match self.peek_kind()? {
                    Some(EventKind::Scalar) => self.scalar()?,
                    Some(EventKind::Alias) => self.alias()?,
                    Some(EventKind::MappingStart) | Some(EventKind::SequenceStart) => {
                        let node = self.start_collection()?;
                        let start = self.children.len();
                        stack.push(Frame {
                            node,
                            start,
                            key: None,
                        });
                        continue;
                    }
                    _ => {
                        let event = self.take()?;
                        return Err(RawError::composer(
                            format!("unexpected event {:?}", event.kind),
                            event.start,
                        ));
                    }
                },
            };
            match stack.last_mut() {
                None => return Ok(node),
                Some(frame) => self.attach(frame, node)?,
            }
        }
    }

    fn document(&mut self) -> Result<Node, RawError> {
        let event = self.take()?;
        let mut node = new_node(NodeKind::Document, "", &event, self.origin);
        let root = self.parse()?;
        node.content.push(root);
        let end = self.take()?;
        if end.kind == EventKind::DocumentEnd {
            node.set_foot_comment(end.foot_comment());
        }
        Ok(node)
    }

    fn alias(&mut self) -> Result<Node, RawError> {
        let event = self.take()?;
        if !self.anchors.contains(event.anchor()) {
            return Err(RawError::composer(
                format!("unknown anchor '{}' referenced", event.anchor()),
                event.start,
            ));
        }
        let mut node = new_node(NodeKind::Alias, "", &event, self.origin);
        node.value = event.anchor().into();
        Ok(node)
    }

    fn scalar(&mut self) -> Result<Node, RawError> {
        let mut event = self.take()?;
        let style = match event.scalar_style {
            ScalarStyle::Plain => Style::PLAIN,
            ScalarStyle::SingleQuoted => Style::SINGLE_QUOTED,
            ScalarStyle::DoubleQuoted => Style::DOUBLE_QUOTED,
            ScalarStyle::Literal => Style::LITERAL,
            ScalarStyle::Folded => Style::FOLDED,
        };
        let default_tag = if !style.is_empty() {
            tag::STR
        } else if event.value == "<<" {
            tag::MERGE
        } else {
            resolve_plain(&event.value)
        };
        let mut node = new_node(NodeKind::Scalar, default_tag, &event, self.origin);
        node.style.insert(style);
        node.value = std::mem::take(&mut event.value).into();
        self.anchor(&mut node, event.anchor());
        Ok(node)
    }

    fn start_collection(&mut self) -> Result<Node, RawError> {
        let event = self.take()?;
        let mut node = if event.kind == EventKind::MappingStart {
            new_node(NodeKind::Mapping, tag::MAP, &event, self.origin)
        } else {
            new_node(NodeKind::Sequence, tag::SEQ, &event, self.origin)
        };
        if event.flow {
            node.style.insert(Style::FLOW);
        }
        self.anchor(&mut node, event.anchor());
        Ok(node)
    }

    /// Adds a finished child to the collection being built, applying
    /// go-yaml's foot-comment moves for block mappings.
    fn attach(&mut self, frame: &mut Frame, mut child: Node) -> Result<(), RawError> {
        if frame.node.kind == NodeKind::Sequence {
            self.children.push(child);
            return Ok(());
        }
        let block = !frame.node.style.contains(Style::FLOW);
        match frame.key.take() {
            None => {
                if block && !child.foot_comment().is_empty() {
                    // A foot comment arriving with a key belongs to the
                    // prior value's key (it was dedented below it).
                    let n = self.children.len();
                    if n >= frame.start + 2 {
                        let foot = child.take_foot_comment();
                        self.children[n - 2].set_foot_comment(foot);
                    }
                }
                frame.key = Some(child);
            }
            Some(mut key) => {
                if key.foot_comment().is_empty() && !child.foot_comment().is_empty() {
                    key.set_foot_comment(child.take_foot_comment());
                }
                if self.peek_kind()? == Some(EventKind::TailComment) {
                    let tail = self.take()?;
                    if key.foot_comment().is_empty() {
                        key.set_foot_comment(tail.foot_comment());
                    }
                }
                self.children.push(key);
                self.children.push(child);
            }
        }
        Ok(())
    }

    fn finish_collection(&mut self, mut node: Node) -> Result<Node, RawError> {
        let end = self.take()?;
        node.set_line_comment(end.line_comment());
        node.set_foot_comment(end.foot_comment());
        if node.kind == NodeKind::Mapping
            && !node.style.contains(Style::FLOW)
            && !node.foot_comment().is_empty()
            && node.content.len() > 1
        {
            // A block mapping's own foot comment goes to its last key.
            let n = node.content.len();
            let foot = node.take_foot_comment();
            node.content[n - 2].set_foot_comment(foot);
        }
        Ok(node)
    }

    fn anchor(&mut self, node: &mut Node, anchor: &str) {
        if !anchor.is_empty() {
            self.anchors.insert(anchor.to_owned());
            node.set_anchor(anchor);
        }
    }
}

fn unexpected_end() -> RawError {
    RawError::composer(
        "attempted to go past the end of stream; corrupted value?".to_owned(),
        Mark::default(),
    )
}

/// go-yaml's `parser.node`: an explicit tag (other than `!`) is shortened and
/// marks the node as tagged; otherwise `default_tag` applies.
/// A 0-based line or column as a node stores it (1-based), saturating.
fn position(value: i64) -> u32 {
    u32::try_from(value.max(0))
        .unwrap_or(u32::MAX)
        .saturating_add(1)
}

fn new_node(kind: NodeKind, default_tag: &'static str, event: &Event<'_>, origin: Origin) -> Node {
    let mut node = Node::at(
        kind,
        position(event.start.line).saturating_add(origin.lines),
        position(event.start.column),
        u32::try_from(event.start.offset)
            .unwrap_or(u32::MAX)
            .saturating_add(origin.offset),
    );
    let event_tag = event.tag();
    if !event_tag.is_empty() && event_tag != "!" {
        node.set_tag(&short_tag(event_tag));
        node.style = Style::TAGGED;
    } else {
        node.set_tag(default_tag);
    }
    node.set_head_comment(event.head_comment());
    node.set_line_comment(event.line_comment());
    node.set_foot_comment(event.foot_comment());
    node
}

/// `tag:yaml.org,2002:x` → `!!x`; other tags unchanged.
fn short_tag(full: &str) -> String {
    match full.strip_prefix("tag:yaml.org,2002:") {
        Some(rest) => format!("!!{rest}"),
        None => full.to_owned(),
    }
}
