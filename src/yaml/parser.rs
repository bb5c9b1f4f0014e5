//! The YAML event parser (go-yaml v3 `parserc.go` behaviour), including the
//! comment queue that attaches head, line, foot and tail comments to events.
//!
//! It is libyaml's LL(1) state machine over the scanner's tokens. Whenever
//! it peeks a token, comments queued by the scanner whose anchor position
//! lies at or before that token are merged into pending head/line/foot
//! buffers, and the next event that takes comments receives them. go-yaml's
//! special cases are kept: the document head comment split at the last
//! blank line, document-end comments turned into foot comments, and the
//! "stem" comment moved onto a collection nested in a sequence entry.

use std::borrow::Cow;

use super::error::RawError;
use super::scanner::{Mark, ScalarStyle, Scanner, TokenKind};

/// Event types (libyaml `yaml_event_type_t` plus go-yaml's tail comment).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum EventKind {
    StreamStart,
    StreamEnd,
    DocumentStart,
    DocumentEnd,
    Alias,
    Scalar,
    SequenceStart,
    SequenceEnd,
    MappingStart,
    MappingEnd,
    TailComment,
}

/// One parser event. `tag` is the resolved full tag (`tag:yaml.org,2002:str`,
/// `!foo`, or `!` for the non-specific tag), empty when none was written.
#[derive(Clone, Debug)]
pub(crate) struct Event<'a> {
    pub(crate) kind: EventKind,
    pub(crate) start: Mark,
    /// Scalar text, borrowed from the input where the token borrowed it.
    pub(crate) value: Cow<'a, str>,
    pub(crate) scalar_style: ScalarStyle,
    /// For collections: written in flow style.
    pub(crate) flow: bool,
    /// Anchor, tag and comments: most events have none, so they sit behind
    /// one pointer (an event is moved several times on its way to a node).
    meta: Option<Box<EventMeta>>,
}

/// The rarely set parts of an [`Event`].
#[derive(Clone, Debug, Default)]
struct EventMeta {
    anchor: String,
    tag: String,
    head_comment: String,
    line_comment: String,
    foot_comment: String,
}

static NO_META: EventMeta = EventMeta {
    anchor: String::new(),
    tag: String::new(),
    head_comment: String::new(),
    line_comment: String::new(),
    foot_comment: String::new(),
};

impl<'a> Event<'a> {
    fn new(kind: EventKind, start: Mark) -> Event<'a> {
        Event {
            kind,
            start,
            value: Cow::Borrowed(""),
            scalar_style: ScalarStyle::Plain,
            flow: false,
            meta: None,
        }
    }

    fn meta(&self) -> &EventMeta {
        self.meta.as_deref().unwrap_or(&NO_META)
    }

    fn meta_mut(&mut self) -> &mut EventMeta {
        self.meta.get_or_insert_with(Box::default)
    }

    /// The anchor name (`&name`, or the name an alias refers to), or empty.
    pub(crate) fn anchor(&self) -> &str {
        &self.meta().anchor
    }

    /// The resolved full tag, or empty when none was written.
    pub(crate) fn tag(&self) -> &str {
        &self.meta().tag
    }

    pub(crate) fn head_comment(&self) -> &str {
        &self.meta().head_comment
    }

    pub(crate) fn line_comment(&self) -> &str {
        &self.meta().line_comment
    }

    pub(crate) fn foot_comment(&self) -> &str {
        &self.meta().foot_comment
    }

    fn set_anchor_and_tag(&mut self, anchor: String, tag: String) {
        if !anchor.is_empty() || !tag.is_empty() {
            let meta = self.meta_mut();
            meta.anchor = anchor;
            meta.tag = tag;
        }
    }

    fn set_head_comment(&mut self, comment: String) {
        if !comment.is_empty() {
            self.meta_mut().head_comment = comment;
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    StreamStart,
    ImplicitDocumentStart,
    DocumentStart,
    DocumentContent,
    DocumentEnd,
    BlockNode,
    BlockSequenceFirstEntry,
    BlockSequenceEntry,
    IndentlessSequenceEntry,
    BlockMappingFirstKey,
    BlockMappingKey,
    BlockMappingValue,
    FlowSequenceFirstEntry,
    FlowSequenceEntry,
    FlowSequenceEntryMappingKey,
    FlowSequenceEntryMappingValue,
    FlowSequenceEntryMappingEnd,
    FlowMappingFirstKey,
    FlowMappingKey,
    FlowMappingValue,
    FlowMappingEmptyValue,
    End,
}

/// A snapshot of the fields of the peeked token that the grammar needs,
/// so the scanner can be borrowed again while deciding.
struct Peeked {
    kind: TokenKind,
    start: Mark,
    end: Mark,
}

/// The event parser.
pub(crate) struct Parser<'a> {
    scanner: Scanner<'a>,
    state: State,
    states: Vec<State>,
    marks: Vec<Mark>,
    /// Handle and prefix per %TAG directive; the two defaults are borrowed
    /// so that the usual directive-less document allocates nothing here.
    tag_directives: Vec<(Cow<'static, str>, Cow<'static, str>)>,
    head_comment: String,
    line_comment: String,
    foot_comment: String,
    tail_comment: String,
    stem_comment: String,
    stream_end_produced: bool,
    error: Option<RawError>,
}

impl<'a> Parser<'a> {
    /// A parser over `src` (which the caller has checked with
    /// [`Scanner::check_input`]).
    pub(crate) fn new(src: &'a str) -> Parser<'a> {
        Parser {
            scanner: Scanner::new(src),
            state: State::StreamStart,
            states: Vec::new(),
            marks: Vec::new(),
            tag_directives: Vec::new(),
            head_comment: String::new(),
            line_comment: String::new(),
            foot_comment: String::new(),
            tail_comment: String::new(),
            stem_comment: String::new(),
            stream_end_produced: false,
            error: None,
        }
    }

    /// The next event, or `None` after the end of the stream.
    pub(crate) fn next_event(&mut self) -> Result<Option<Event<'a>>, RawError> {
        if let Some(error) = &self.error {
            return Err(error.clone());
        }
        if self.stream_end_produced || self.state == State::End {
            return Ok(None);
        }
        match self.state_machine() {
            Ok(event) => Ok(Some(event)),
            Err(error) => {
                self.error = Some(error.clone());
                Err(error)
            }
        }
    }

    // ----- token access with comment unfolding ----------------------------

    fn peek(&mut self) -> Result<Peeked, RawError> {
        let token = self.scanner.peek()?;
        let peeked = Peeked {
            kind: token.kind,
            start: token.start,
            end: token.end,
        };
        self.unfold_comments(&peeked);
        Ok(peeked)
    }

    /// Merges the queued comments anchored at or before `token` into the
    /// pending comment buffers.
    fn unfold_comments(&mut self, token: &Peeked) {
        let scanner = &mut self.scanner;
        if scanner.comments_head == scanner.comments.len() {
            // Nothing queued (most peeks).
            return;
        }
        while scanner.comments_head < scanner.comments.len()
            && token.start.index >= scanner.comments[scanner.comments_head].token_mark.index
        {
            let comment = &mut scanner.comments[scanner.comments_head];
            if !comment.head.is_empty() {
                if token.kind == TokenKind::BlockEnd {
                    // No heads on ends: keep it for a following token.
                    break;
                }
                if !self.head_comment.is_empty() {
                    self.head_comment.push('\n');
                }
                self.head_comment.push_str(&comment.head);
            }
            if !comment.foot.is_empty() {
                if !self.foot_comment.is_empty() {
                    self.foot_comment.push('\n');
                }
                self.foot_comment.push_str(&comment.foot);
            }
            if !comment.line.is_empty() {
                if !self.line_comment.is_empty() {
                    self.line_comment.push('\n');
                }
                self.line_comment.push_str(&comment.line);
            }
            *comment = Default::default();
            scanner.comments_head += 1;
        }
        scanner.compact_comments();
    }

    fn skip_token(&mut self) {
        if let Ok(token) = self.scanner.peek()
            && token.kind == TokenKind::StreamEnd
        {
            self.stream_end_produced = true;
        }
        self.scanner.skip_token();
    }

    /// Scalar value/anchor/tag text of the peeked token (taken, not copied).
    fn take_token_text(&mut self) -> Result<(Cow<'a, str>, String, ScalarStyle), RawError> {
        let token = self.scanner.peek()?;
        Ok((
            std::mem::take(&mut token.value),
            std::mem::take(&mut token.suffix),
            token.style,
        ))
    }

    fn set_event_comments(&mut self, event: &mut Event<'a>) {
        if event.meta.is_some()
            || !(self.head_comment.is_empty()
                && self.line_comment.is_empty()
                && self.foot_comment.is_empty())
        {
            let meta = event.meta_mut();
            meta.head_comment = std::mem::take(&mut self.head_comment);
            meta.line_comment = std::mem::take(&mut self.line_comment);
            meta.foot_comment = std::mem::take(&mut self.foot_comment);
        }
        self.tail_comment.clear();
        self.stem_comment.clear();
    }

    fn pop_state(&mut self) -> State {
        self.states.pop().unwrap_or(State::End)
    }

    fn pop_mark(&mut self) -> Mark {
        self.marks.pop().unwrap_or_default()
    }

    // ----- the grammar ------------------------------------------------------

    fn state_machine(&mut self) -> Result<Event<'a>, RawError> {
        match self.state {
            State::StreamStart => self.parse_stream_start(),
            State::ImplicitDocumentStart => self.parse_document_start(true),
            State::DocumentStart => self.parse_document_start(false),
            State::DocumentContent => self.parse_document_content(),
            State::DocumentEnd => self.parse_document_end(),
            State::BlockNode => self.parse_node(true, false),
            State::BlockSequenceFirstEntry => self.parse_block_sequence_entry(true),
            State::BlockSequenceEntry => self.parse_block_sequence_entry(false),
            State::IndentlessSequenceEntry => self.parse_indentless_sequence_entry(),
            State::BlockMappingFirstKey => self.parse_block_mapping_key(true),
            State::BlockMappingKey => self.parse_block_mapping_key(false),
            State::BlockMappingValue => self.parse_block_mapping_value(),
            State::FlowSequenceFirstEntry => self.parse_flow_sequence_entry(true),
            State::FlowSequenceEntry => self.parse_flow_sequence_entry(false),
            State::FlowSequenceEntryMappingKey => self.parse_flow_sequence_entry_mapping_key(),
            State::FlowSequenceEntryMappingValue => self.parse_flow_sequence_entry_mapping_value(),
            State::FlowSequenceEntryMappingEnd => self.parse_flow_sequence_entry_mapping_end(),
            State::FlowMappingFirstKey => self.parse_flow_mapping_key(true),
            State::FlowMappingKey => self.parse_flow_mapping_key(false),
            State::FlowMappingValue => self.parse_flow_mapping_value(false),
            State::FlowMappingEmptyValue => self.parse_flow_mapping_value(true),
            State::End => Err(RawError::parser(
                "unexpected end of parser",
                self.scanner_mark(),
            )),
        }
    }

    fn scanner_mark(&mut self) -> Mark {
        self.scanner.peek().map(|t| t.start).unwrap_or_default()
    }

    fn parse_stream_start(&mut self) -> Result<Event<'a>, RawError> {
        let token = self.peek()?;
        if token.kind != TokenKind::StreamStart {
            return Err(RawError::parser(
                "did not find expected <stream-start>",
                token.start,
            ));
        }
        self.state = State::ImplicitDocumentStart;
        let event = Event::new(EventKind::StreamStart, token.start);
        self.skip_token();
        Ok(event)
    }

    fn parse_document_start(&mut self, implicit: bool) -> Result<Event<'a>, RawError> {
        let mut token = self.peek()?;
        if !implicit {
            while token.kind == TokenKind::DocumentEnd {
                self.skip_token();
                token = self.peek()?;
            }
        }

        if implicit
            && !matches!(
                token.kind,
                TokenKind::VersionDirective
                    | TokenKind::TagDirective
                    | TokenKind::DocumentStart
                    | TokenKind::StreamEnd
            )
        {
            self.process_directives()?;
            self.states.push(State::DocumentEnd);
            self.state = State::BlockNode;

            // Split the pending head comment at its last blank line: the part
            // above belongs to the document, the rest to the first node.
            let mut head_comment = String::new();
            let bytes = self.head_comment.as_bytes();
            let mut i = bytes.len().saturating_sub(1);
            while i > 0 {
                if bytes[i] == b'\n' {
                    if i == bytes.len() - 1 {
                        head_comment = self.head_comment[..i].to_owned();
                        self.head_comment = self.head_comment[i + 1..].to_owned();
                        break;
                    } else if bytes[i - 1] == b'\n' {
                        head_comment = self.head_comment[..i - 1].to_owned();
                        self.head_comment = self.head_comment[i + 1..].to_owned();
                        break;
                    }
                }
                i -= 1;
            }

            let mut event = Event::new(EventKind::DocumentStart, token.start);
            event.set_head_comment(head_comment);
            return Ok(event);
        }

        if token.kind != TokenKind::StreamEnd {
            let start = token.start;
            self.process_directives()?;
            let token = self.peek()?;
            if token.kind != TokenKind::DocumentStart {
                return Err(RawError::parser(
                    "did not find expected <document start>",
                    token.start,
                ));
            }
            self.states.push(State::DocumentEnd);
            self.state = State::DocumentContent;
            let event = Event::new(EventKind::DocumentStart, start);
            self.skip_token();
            return Ok(event);
        }

        self.state = State::End;
        let event = Event::new(EventKind::StreamEnd, token.start);
        self.skip_token();
        Ok(event)
    }

    fn parse_document_content(&mut self) -> Result<Event<'a>, RawError> {
        let token = self.peek()?;
        if matches!(
            token.kind,
            TokenKind::VersionDirective
                | TokenKind::TagDirective
                | TokenKind::DocumentStart
                | TokenKind::DocumentEnd
                | TokenKind::StreamEnd
        ) {
            self.state = self.pop_state();
            return Ok(empty_scalar(token.start));
        }
        self.parse_node(true, false)
    }

    fn parse_document_end(&mut self) -> Result<Event<'a>, RawError> {
        let token = self.peek()?;
        let start = token.start;
        if token.kind == TokenKind::DocumentEnd {
            self.skip_token();
        }
        self.tag_directives.clear();
        self.state = State::DocumentStart;
        let mut event = Event::new(EventKind::DocumentEnd, start);
        self.set_event_comments(&mut event);
        if let Some(meta) = event.meta.as_deref_mut()
            && !meta.head_comment.is_empty()
            && meta.foot_comment.is_empty()
        {
            meta.foot_comment = std::mem::take(&mut meta.head_comment);
        }
        Ok(event)
    }

    fn parse_node(
        &mut self,
        block: bool,
        indentless_sequence: bool,
    ) -> Result<Event<'a>, RawError> {
        let mut token = self.peek()?;

        if token.kind == TokenKind::Alias {
            self.state = self.pop_state();
            let (name, _, _) = self.take_token_text()?;
            let mut event = Event::new(EventKind::Alias, token.start);
            event.set_anchor_and_tag(name.into_owned(), String::new());
            self.set_event_comments(&mut event);
            self.skip_token();
            return Ok(event);
        }

        let mut start = token.start;
        let mut anchor = String::new();
        let mut tag_handle = String::new();
        let mut tag_suffix = String::new();
        let mut has_tag = false;
        let mut tag_mark = Mark::default();

        if token.kind == TokenKind::Anchor {
            let (name, _, _) = self.take_token_text()?;
            anchor = name.into_owned();
            start = token.start;
            self.skip_token();
            token = self.peek()?;
            if token.kind == TokenKind::Tag {
                let (handle, suffix, _) = self.take_token_text()?;
                has_tag = true;
                tag_handle = handle.into_owned();
                tag_suffix = suffix;
                tag_mark = token.start;
                self.skip_token();
                token = self.peek()?;
            }
        } else if token.kind == TokenKind::Tag {
            let (handle, suffix, _) = self.take_token_text()?;
            has_tag = true;
            tag_handle = handle.into_owned();
            tag_suffix = suffix;
            start = token.start;
            tag_mark = token.start;
            self.skip_token();
            token = self.peek()?;
            if token.kind == TokenKind::Anchor {
                let (name, _, _) = self.take_token_text()?;
                anchor = name.into_owned();
                self.skip_token();
                token = self.peek()?;
            }
        }

        let mut tag = String::new();
        if has_tag {
            if tag_handle.is_empty() {
                tag = tag_suffix;
            } else {
                if let Some((_, prefix)) =
                    self.tag_directives.iter().find(|(h, _)| *h == tag_handle)
                {
                    tag = format!("{prefix}{tag_suffix}");
                }
                if tag.is_empty() {
                    return Err(RawError::parser_context(
                        start,
                        "found undefined tag handle",
                        tag_mark,
                    ));
                }
            }
        }

        if indentless_sequence && token.kind == TokenKind::BlockEntry {
            self.state = State::IndentlessSequenceEntry;
            let mut event = Event::new(EventKind::SequenceStart, start);
            event.set_anchor_and_tag(anchor, tag);
            return Ok(event);
        }
        if token.kind == TokenKind::Scalar {
            self.state = self.pop_state();
            let (value, _, style) = self.take_token_text()?;
            let mut event = Event::new(EventKind::Scalar, start);
            event.set_anchor_and_tag(anchor, tag);
            event.value = value;
            event.scalar_style = style;
            self.set_event_comments(&mut event);
            self.skip_token();
            return Ok(event);
        }
        if token.kind == TokenKind::FlowSequenceStart {
            self.state = State::FlowSequenceFirstEntry;
            let mut event = Event::new(EventKind::SequenceStart, start);
            event.set_anchor_and_tag(anchor, tag);
            event.flow = true;
            self.set_event_comments(&mut event);
            return Ok(event);
        }
        if token.kind == TokenKind::FlowMappingStart {
            self.state = State::FlowMappingFirstKey;
            let mut event = Event::new(EventKind::MappingStart, start);
            event.set_anchor_and_tag(anchor, tag);
            event.flow = true;
            self.set_event_comments(&mut event);
            return Ok(event);
        }
        if block && token.kind == TokenKind::BlockSequenceStart {
            self.state = State::BlockSequenceFirstEntry;
            let mut event = Event::new(EventKind::SequenceStart, start);
            event.set_anchor_and_tag(anchor, tag);
            if !self.stem_comment.is_empty() {
                event.set_head_comment(std::mem::take(&mut self.stem_comment));
            }
            return Ok(event);
        }
        if block && token.kind == TokenKind::BlockMappingStart {
            self.state = State::BlockMappingFirstKey;
            let mut event = Event::new(EventKind::MappingStart, start);
            event.set_anchor_and_tag(anchor, tag);
            if !self.stem_comment.is_empty() {
                event.set_head_comment(std::mem::take(&mut self.stem_comment));
            }
            return Ok(event);
        }
        if !anchor.is_empty() || !tag.is_empty() {
            self.state = self.pop_state();
            let mut event = Event::new(EventKind::Scalar, start);
            event.set_anchor_and_tag(anchor, tag);
            return Ok(event);
        }

        // go-yaml's context text ("while parsing a block node") is not
        // part of its message; only the marks matter.
        let _ = block;
        Err(RawError::parser_context(
            start,
            "did not find expected node content",
            token.start,
        ))
    }

    fn parse_block_sequence_entry(&mut self, first: bool) -> Result<Event<'a>, RawError> {
        if first {
            let token = self.peek()?;
            self.marks.push(token.start);
            self.skip_token();
        }
        let mut token = self.peek()?;
        if token.kind == TokenKind::BlockEntry {
            let mark = token.end;
            let prior_head_len = self.head_comment.len();
            self.skip_token();
            self.split_stem_comment(prior_head_len)?;
            token = self.peek()?;
            if token.kind != TokenKind::BlockEntry && token.kind != TokenKind::BlockEnd {
                self.states.push(State::BlockSequenceEntry);
                return self.parse_node(true, false);
            }
            self.state = State::BlockSequenceEntry;
            return Ok(empty_scalar(mark));
        }
        if token.kind == TokenKind::BlockEnd {
            self.state = self.pop_state();
            self.pop_mark();
            let event = Event::new(EventKind::SequenceEnd, token.start);
            self.skip_token();
            return Ok(event);
        }
        let context_mark = self.pop_mark();
        Err(RawError::parser_context(
            context_mark,
            "did not find expected '-' indicator",
            token.start,
        ))
    }

    fn parse_indentless_sequence_entry(&mut self) -> Result<Event<'a>, RawError> {
        let mut token = self.peek()?;
        if token.kind == TokenKind::BlockEntry {
            let mark = token.end;
            let prior_head_len = self.head_comment.len();
            self.skip_token();
            self.split_stem_comment(prior_head_len)?;
            token = self.peek()?;
            if !matches!(
                token.kind,
                TokenKind::BlockEntry | TokenKind::Key | TokenKind::Value | TokenKind::BlockEnd
            ) {
                self.states.push(State::IndentlessSequenceEntry);
                return self.parse_node(true, false);
            }
            self.state = State::IndentlessSequenceEntry;
            return Ok(empty_scalar(mark));
        }
        self.state = self.pop_state();
        Ok(Event::new(EventKind::SequenceEnd, token.start))
    }

    /// When a collection starts right under a sequence entry, the head
    /// comment gathered before the entry belongs to that collection as a
    /// whole: move it aside as the stem comment.
    fn split_stem_comment(&mut self, stem_len: usize) -> Result<(), RawError> {
        if stem_len == 0 {
            return Ok(());
        }
        let token = self.peek()?;
        if token.kind != TokenKind::BlockSequenceStart && token.kind != TokenKind::BlockMappingStart
        {
            return Ok(());
        }
        let stem_len = stem_len.min(self.head_comment.len());
        self.stem_comment = self.head_comment[..stem_len].to_owned();
        if self.head_comment.len() == stem_len {
            self.head_comment.clear();
        } else {
            self.head_comment = self
                .head_comment
                .get(stem_len + 1..)
                .unwrap_or("")
                .to_owned();
        }
        Ok(())
    }

    fn parse_block_mapping_key(&mut self, first: bool) -> Result<Event<'a>, RawError> {
        if first {
            let token = self.peek()?;
            self.marks.push(token.start);
            self.skip_token();
        }
        let mut token = self.peek()?;

        // A tail comment left from the prior mapping value goes with that
        // value, not with the following key.
        if !self.tail_comment.is_empty() {
            let mut event = Event::new(EventKind::TailComment, token.start);
            event.meta_mut().foot_comment = std::mem::take(&mut self.tail_comment);
            return Ok(event);
        }

        if token.kind == TokenKind::Key {
            let mark = token.end;
            self.skip_token();
            token = self.peek()?;
            if !matches!(
                token.kind,
                TokenKind::Key | TokenKind::Value | TokenKind::BlockEnd
            ) {
                self.states.push(State::BlockMappingValue);
                return self.parse_node(true, true);
            }
            self.state = State::BlockMappingValue;
            return Ok(empty_scalar(mark));
        }
        if token.kind == TokenKind::BlockEnd {
            self.state = self.pop_state();
            self.pop_mark();
            let mut event = Event::new(EventKind::MappingEnd, token.start);
            self.set_event_comments(&mut event);
            self.skip_token();
            return Ok(event);
        }
        let context_mark = self.pop_mark();
        Err(RawError::parser_context(
            context_mark,
            "did not find expected key",
            token.start,
        ))
    }

    fn parse_block_mapping_value(&mut self) -> Result<Event<'a>, RawError> {
        let mut token = self.peek()?;
        if token.kind == TokenKind::Value {
            let mark = token.end;
            self.skip_token();
            token = self.peek()?;
            if !matches!(
                token.kind,
                TokenKind::Key | TokenKind::Value | TokenKind::BlockEnd
            ) {
                self.states.push(State::BlockMappingKey);
                return self.parse_node(true, true);
            }
            self.state = State::BlockMappingKey;
            return Ok(empty_scalar(mark));
        }
        self.state = State::BlockMappingKey;
        Ok(empty_scalar(token.start))
    }

    fn parse_flow_sequence_entry(&mut self, first: bool) -> Result<Event<'a>, RawError> {
        if first {
            let token = self.peek()?;
            self.marks.push(token.start);
            self.skip_token();
        }
        let mut token = self.peek()?;
        if token.kind != TokenKind::FlowSequenceEnd {
            if !first {
                if token.kind == TokenKind::FlowEntry {
                    self.skip_token();
                    token = self.peek()?;
                } else {
                    let context_mark = self.pop_mark();
                    return Err(RawError::parser_context(
                        context_mark,
                        "did not find expected ',' or ']'",
                        token.start,
                    ));
                }
            }
            if token.kind == TokenKind::Key {
                self.state = State::FlowSequenceEntryMappingKey;
                let mut event = Event::new(EventKind::MappingStart, token.start);
                event.flow = true;
                self.skip_token();
                return Ok(event);
            } else if token.kind != TokenKind::FlowSequenceEnd {
                self.states.push(State::FlowSequenceEntry);
                return self.parse_node(false, false);
            }
        }
        self.state = self.pop_state();
        self.pop_mark();
        let mut event = Event::new(EventKind::SequenceEnd, token.start);
        self.set_event_comments(&mut event);
        self.skip_token();
        Ok(event)
    }

    fn parse_flow_sequence_entry_mapping_key(&mut self) -> Result<Event<'a>, RawError> {
        let token = self.peek()?;
        if !matches!(
            token.kind,
            TokenKind::Value | TokenKind::FlowEntry | TokenKind::FlowSequenceEnd
        ) {
            self.states.push(State::FlowSequenceEntryMappingValue);
            return self.parse_node(false, false);
        }
        let mark = token.end;
        self.skip_token();
        self.state = State::FlowSequenceEntryMappingValue;
        Ok(empty_scalar(mark))
    }

    fn parse_flow_sequence_entry_mapping_value(&mut self) -> Result<Event<'a>, RawError> {
        let mut token = self.peek()?;
        if token.kind == TokenKind::Value {
            self.skip_token();
            token = self.peek()?;
            if token.kind != TokenKind::FlowEntry && token.kind != TokenKind::FlowSequenceEnd {
                self.states.push(State::FlowSequenceEntryMappingEnd);
                return self.parse_node(false, false);
            }
        }
        self.state = State::FlowSequenceEntryMappingEnd;
        Ok(empty_scalar(token.start))
    }

    fn parse_flow_sequence_entry_mapping_end(&mut self) -> Result<Event<'a>, RawError> {
        let token = self.peek()?;
        self.state = State::FlowSequenceEntry;
        Ok(Event::new(EventKind::MappingEnd, token.start))
    }

    fn parse_flow_mapping_key(&mut self, first: bool) -> Result<Event<'a>, RawError> {
        if first {
            let token = self.peek()?;
            self.marks.push(token.start);
            self.skip_token();
        }
        let mut token = self.peek()?;
        if token.kind != TokenKind::FlowMappingEnd {
            if !first {
                if token.kind == TokenKind::FlowEntry {
                    self.skip_token();
                    token = self.peek()?;
                } else {
                    let context_mark = self.pop_mark();
                    return Err(RawError::parser_context(
                        context_mark,
                        "did not find expected ',' or '}'",
                        token.start,
                    ));
                }
            }
            if token.kind == TokenKind::Key {
                self.skip_token();
                token = self.peek()?;
                if !matches!(
                    token.kind,
                    TokenKind::Value | TokenKind::FlowEntry | TokenKind::FlowMappingEnd
                ) {
                    self.states.push(State::FlowMappingValue);
                    return self.parse_node(false, false);
                }
                self.state = State::FlowMappingValue;
                return Ok(empty_scalar(token.start));
            } else if token.kind != TokenKind::FlowMappingEnd {
                self.states.push(State::FlowMappingEmptyValue);
                return self.parse_node(false, false);
            }
        }
        self.state = self.pop_state();
        self.pop_mark();
        let mut event = Event::new(EventKind::MappingEnd, token.start);
        self.set_event_comments(&mut event);
        self.skip_token();
        Ok(event)
    }

    fn parse_flow_mapping_value(&mut self, empty: bool) -> Result<Event<'a>, RawError> {
        let mut token = self.peek()?;
        if empty {
            self.state = State::FlowMappingKey;
            return Ok(empty_scalar(token.start));
        }
        if token.kind == TokenKind::Value {
            self.skip_token();
            token = self.peek()?;
            if token.kind != TokenKind::FlowEntry && token.kind != TokenKind::FlowMappingEnd {
                self.states.push(State::FlowMappingKey);
                return self.parse_node(false, false);
            }
        }
        self.state = State::FlowMappingKey;
        Ok(empty_scalar(token.start))
    }

    fn process_directives(&mut self) -> Result<(), RawError> {
        let mut seen_version = false;
        let mut token = self.peek()?;
        while matches!(
            token.kind,
            TokenKind::VersionDirective | TokenKind::TagDirective
        ) {
            if token.kind == TokenKind::VersionDirective {
                if seen_version {
                    return Err(RawError::parser(
                        "found duplicate %YAML directive",
                        token.start,
                    ));
                }
                let version = self.scanner.peek().map(|t| (t.major, t.minor))?;
                if version != (1, 1) {
                    return Err(RawError::parser(
                        "found incompatible YAML document",
                        token.start,
                    ));
                }
                seen_version = true;
            } else {
                let (handle, prefix, _) = self.take_token_text()?;
                if self.tag_directives.iter().any(|(h, _)| *h == handle) {
                    return Err(RawError::parser(
                        "found duplicate %TAG directive",
                        token.start,
                    ));
                }
                self.tag_directives
                    .push((Cow::Owned(handle.into_owned()), Cow::Owned(prefix)));
            }
            self.skip_token();
            token = self.peek()?;
        }
        for (handle, prefix) in [("!", "!"), ("!!", "tag:yaml.org,2002:")] {
            if !self.tag_directives.iter().any(|(h, _)| h == handle) {
                self.tag_directives
                    .push((Cow::Borrowed(handle), Cow::Borrowed(prefix)));
            }
        }
        Ok(())
    }
}

/// An empty plain scalar (a missing node), without comments.
fn empty_scalar<'a>(mark: Mark) -> Event<'a> {
    Event::new(EventKind::Scalar, mark)
}
