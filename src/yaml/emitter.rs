//! The YAML emitter: go-yaml v3's `emitterc.go` state machine as kyaml
//! configures it (indent 2, unlimited width, unicode, LF, optional compact
//! sequences), turning the event stream built by `yaml::encoder` into text.
//!
//! Every formatting decision kpt users see in their files is made here:
//! scalar analysis and style downgrades (plain → single → double quotes,
//! block → double quotes), double-quoted escapes, block scalar headers
//! (including go-yaml's folded-scalar blank-line quirk), comment placement
//! and the foot-comment blank-line rule, empty collections as flow, and
//! explicit `? key` for keys over 128 characters. The structure mirrors the
//! Go code closely on purpose: byte fidelity depends on reproducing its
//! state (column, whitespace/indention flags, the indent stack) exactly.
//! Text is appended straight to the caller's `String`.

/// Requested or chosen style of a scalar event (libyaml `yaml_scalar_style_t`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ScalarStyle {
    Plain,
    SingleQuoted,
    DoubleQuoted,
    Literal,
    Folded,
}

/// The kinds of events the node encoder produces. Stream start/end carry no
/// output with kyaml's settings, so they are handled by [`StreamState`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum EventKind {
    DocumentStart,
    DocumentEnd,
    Alias,
    Scalar,
    SequenceStart,
    SequenceEnd,
    MappingStart,
    MappingEnd,
}

/// One emitter event, borrowing its text from the node tree (so it is
/// `Copy`: the emitter keeps the current one by value).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Event<'a> {
    pub(crate) kind: EventKind,
    /// Anchor name (for aliases: the referenced name).
    pub(crate) anchor: &'a str,
    /// Tag to write (`!!str`, `!foo`, or the long `tag:yaml.org,2002:str`
    /// form, which [`Emitter::analyze_tag`] shortens), empty when implicit.
    pub(crate) tag: &'a str,
    /// Scalar text.
    pub(crate) value: &'a str,
    /// Scalar: requested style. Ignored for other kinds.
    pub(crate) style: ScalarStyle,
    /// Collections: flow style requested.
    pub(crate) flow: bool,
    pub(crate) head_comment: &'a str,
    pub(crate) line_comment: &'a str,
    pub(crate) foot_comment: &'a str,
    pub(crate) tail_comment: &'a str,
}

impl<'a> Event<'a> {
    /// An event of `kind` with no data.
    pub(crate) fn new(kind: EventKind) -> Event<'a> {
        Event {
            kind,
            anchor: "",
            tag: "",
            value: "",
            style: ScalarStyle::Plain,
            flow: false,
            head_comment: "",
            line_comment: "",
            foot_comment: "",
            tail_comment: "",
        }
    }
}

/// Emitter state that survives from one document to the next (one go-yaml
/// `Encoder` writing several documents).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct StreamState {
    /// True once a document has been started: later ones get `---`.
    pub(crate) started: bool,
    column: usize,
    whitespace: bool,
    indention: bool,
    open_ended: bool,
}

impl StreamState {
    /// The state after an earlier document that ended on a fresh line with
    /// nothing left open: what almost every document leaves behind, so a
    /// document encoded from it can be reused after any such document.
    pub(crate) fn after_plain_document() -> StreamState {
        StreamState {
            started: true,
            ..StreamState::default()
        }
    }
}

impl Default for StreamState {
    fn default() -> StreamState {
        StreamState {
            started: false,
            column: 0,
            whitespace: true,
            indention: true,
            open_ended: false,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    DocumentStart,
    DocumentContent,
    DocumentEnd,
    FlowSequenceFirstItem,
    FlowSequenceTrailItem,
    FlowSequenceItem,
    FlowMappingFirstKey,
    FlowMappingTrailKey,
    FlowMappingKey,
    FlowMappingSimpleValue,
    FlowMappingValue,
    BlockSequenceFirstItem,
    BlockSequenceItem,
    BlockMappingFirstKey,
    BlockMappingKey,
    BlockMappingSimpleValue,
    BlockMappingValue,
}

/// Result of analysing a scalar's text (libyaml `scalar_data`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct ScalarAnalysis {
    multiline: bool,
    flow_plain_allowed: bool,
    block_plain_allowed: bool,
    single_quoted_allowed: bool,
    block_allowed: bool,
}

const BEST_INDENT: i64 = 2;
/// go-yaml starts with width -1, which the emitter turns into "infinite".
const BEST_WIDTH: usize = (1 << 31) - 1;

/// Writes one document's events into `out` as they arrive: the emitter
/// looks at most one event ahead (empty-collection and simple-key checks),
/// so it holds two events, never the whole document's list. `compact` is
/// kyaml's compact sequence indent switch.
pub(crate) struct DocumentEmitter<'o, 'e> {
    /// The caller's buffer; the emitter writes into it (moved into
    /// `emitter.out`, so that the emitter's state can be cloned without it)
    /// and it is put back on drop.
    target: &'o mut String,
    /// Where chunks of text go as they are, when the caller takes the
    /// document in pieces (see [`append_piece`]).
    pieces: Option<&'o mut Vec<String>>,
    emitter: Emitter<'e>,
    /// The last event pushed, waiting for its successor.
    pending: Option<Event<'e>>,
}

/// Appends `text` to the text written into `out`: copied into `out`, or,
/// when the caller takes the text in `pieces`, handed over as a piece after
/// `out`'s text so far (a chunk of a long list is not copied again).
pub(crate) fn append_piece(out: &mut String, pieces: Option<&mut Vec<String>>, text: String) {
    match pieces {
        Some(pieces) => {
            if !out.is_empty() {
                pieces.push(std::mem::take(out));
            }
            pieces.push(text);
        }
        None => out.push_str(&text),
    }
}

/// Where an emitter stands between two items of a block sequence: all it
/// needs to write the rest, without the text already written. A long
/// sequence's items are written in chunks on rayon, each chunk from the
/// point after the first item ([`DocumentEmitter::pause`]); a chunk's text
/// is used where the emitter really stands as the chunk assumed
/// ([`DocumentEmitter::stands_at`]), so the bytes are those of writing the
/// items in order.
#[derive(Clone)]
pub(crate) struct Resume<'e>(Emitter<'e>);

/// The emitter's state and indent stacks, empty, kept by an encoder from
/// one document to the next so that a stream does not allocate them anew
/// for every document.
#[derive(Default)]
pub(crate) struct Stacks {
    states: Vec<State>,
    indents: Vec<i64>,
}

impl<'o, 'e> DocumentEmitter<'o, 'e> {
    /// Starts a document in the stream described by `stream`, with the
    /// (empty) stacks `stacks`.
    pub(crate) fn new(
        out: &'o mut String,
        stream: &StreamState,
        compact: bool,
        stacks: Stacks,
    ) -> DocumentEmitter<'o, 'e> {
        DocumentEmitter {
            emitter: Emitter {
                out: std::mem::take(out),
                current: Event::new(EventKind::DocumentStart),
                next: None,
                state: State::DocumentStart,
                first_document: !stream.started,
                states: stacks.states,
                indents: stacks.indents,
                indent: -1,
                flow_level: 0,
                root_context: false,
                sequence_context: false,
                mapping_context: false,
                simple_key_context: false,
                column: stream.column,
                whitespace: stream.whitespace,
                indention: stream.indention,
                open_ended: stream.open_ended,
                foot_indent: -1,
                compact_sequence_indent: compact,
                anchor: None,
                tag_handle: "",
                tag_suffix: "",
                scalar: ScalarAnalysis::default(),
                scalar_style: ScalarStyle::Plain,
                head_comment: "",
                line_comment: "",
                foot_comment: "",
                tail_comment: "",
                key_line_comment: "",
            },
            target: out,
            pieces: None,
            pending: None,
        }
    }

    /// Hands chunks of text over to `pieces` (see [`append_piece`]).
    pub(crate) fn with_pieces(mut self, pieces: Option<&'o mut Vec<String>>) -> Self {
        self.pieces = pieces;
        self
    }

    /// An emitter standing at `at`, writing into `out` (a chunk of a
    /// sequence's items, see [`Resume`]).
    pub(crate) fn resumed(out: &'o mut String, at: &Resume<'e>) -> DocumentEmitter<'o, 'e> {
        let mut emitter = at.0.clone();
        emitter.out = std::mem::take(out);
        DocumentEmitter {
            target: out,
            pieces: None,
            emitter,
            pending: None,
        }
    }

    /// Writes the event held back, when the emitter stands after an item
    /// of a block sequence outside flow style, and returns where it stands;
    /// `None` elsewhere. Called only right after an item's events. Writing
    /// the held event now, without its successor's kind, writes what it
    /// would have: only a collection's start event looks at the next one,
    /// and an item never ends with one (one held means the items so far
    /// wrote no event; it is left held).
    pub(crate) fn pause(&mut self) -> Option<Resume<'e>> {
        if self.pending.is_some_and(|event| {
            matches!(
                event.kind,
                EventKind::SequenceStart | EventKind::MappingStart
            )
        }) {
            return None;
        }
        if let Some(last) = self.pending.take() {
            self.emitter.step(last, None);
        }
        if self.emitter.state != State::BlockSequenceItem || self.emitter.flow_level > 0 {
            return None;
        }
        let out = std::mem::take(&mut self.emitter.out);
        let at = Resume(self.emitter.clone());
        self.emitter.out = out;
        Some(at)
    }

    /// True when the emitter, paused after an item, writes whatever follows
    /// exactly as one standing at `at` does (see [`Emitter::same_future`]).
    /// Writes the event held back first, like [`DocumentEmitter::pause`].
    pub(crate) fn stands_at(&mut self, at: &Resume<'e>) -> bool {
        match self.pause() {
            Some(here) => here.0.same_future(&at.0),
            None => false,
        }
    }

    /// Makes room for `additional` more bytes of text (chunks about to be
    /// appended), unless the text is taken in pieces.
    pub(crate) fn reserve(&mut self, additional: usize) {
        if self.pieces.is_none() {
            self.emitter.out.reserve(additional);
        }
    }

    /// Appends `text`, what an emitter standing where this one stands
    /// wrote up to `end` (a chunk, see [`Resume`]), and stands at `end`.
    pub(crate) fn skip(&mut self, text: String, end: Resume<'e>) {
        let mut out = std::mem::take(&mut self.emitter.out);
        append_piece(&mut out, self.pieces.as_deref_mut(), text);
        self.emitter = end.0;
        self.emitter.out = out;
        self.pending = None;
    }

    /// Takes the next event, writing the one before it.
    pub(crate) fn push(&mut self, event: Event<'e>) {
        if let Some(previous) = self.pending.replace(event) {
            self.emitter.step(previous, Some(event.kind));
        }
    }

    /// Writes the last event and records where the stream stands; returns
    /// the stacks, emptied, for the next document.
    pub(crate) fn finish(mut self, stream: &mut StreamState) -> Stacks {
        if let Some(last) = self.pending.take() {
            self.emitter.step(last, None);
        }
        let emitter = &self.emitter;
        stream.started = true;
        stream.column = emitter.column;
        stream.whitespace = emitter.whitespace;
        stream.indention = emitter.indention;
        stream.open_ended = emitter.open_ended;
        let mut stacks = Stacks {
            states: std::mem::take(&mut self.emitter.states),
            indents: std::mem::take(&mut self.emitter.indents),
        };
        stacks.states.clear();
        stacks.indents.clear();
        stacks
    }
}

impl Drop for DocumentEmitter<'_, '_> {
    fn drop(&mut self) {
        std::mem::swap(self.target, &mut self.emitter.out);
    }
}

#[derive(Clone)]
struct Emitter<'e> {
    /// The text written (the caller's buffer, see [`DocumentEmitter`]).
    out: String,
    /// The event being written.
    current: Event<'e>,
    /// The kind of the event after it, if any.
    next: Option<EventKind>,
    state: State,
    first_document: bool,
    states: Vec<State>,
    indents: Vec<i64>,
    indent: i64,
    flow_level: usize,
    root_context: bool,
    sequence_context: bool,
    mapping_context: bool,
    simple_key_context: bool,
    column: usize,
    whitespace: bool,
    indention: bool,
    open_ended: bool,
    foot_indent: i64,
    compact_sequence_indent: bool,
    /// (name, is_alias) of the current event.
    anchor: Option<(&'e str, bool)>,
    tag_handle: &'e str,
    tag_suffix: &'e str,
    scalar: ScalarAnalysis,
    scalar_style: ScalarStyle,
    head_comment: &'e str,
    line_comment: &'e str,
    foot_comment: &'e str,
    tail_comment: &'e str,
    key_line_comment: &'e str,
}

// Byte classification helpers over UTF-8 text, with libyaml's convention
// that reading past the end yields NUL.
fn byte_at(s: &[u8], i: usize) -> u8 {
    s.get(i).copied().unwrap_or(0)
}

fn width(b: u8) -> usize {
    if b & 0x80 == 0 {
        1
    } else if b & 0xE0 == 0xC0 {
        2
    } else if b & 0xF0 == 0xE0 {
        3
    } else if b & 0xF8 == 0xF0 {
        4
    } else {
        1
    }
}

fn is_space(s: &[u8], i: usize) -> bool {
    byte_at(s, i) == b' '
}

fn is_blank(s: &[u8], i: usize) -> bool {
    matches!(byte_at(s, i), b' ' | b'\t')
}

fn is_break(s: &[u8], i: usize) -> bool {
    let b = byte_at(s, i);
    b == b'\r'
        || b == b'\n'
        || (b == 0xC2 && byte_at(s, i + 1) == 0x85)
        || (b == 0xE2 && byte_at(s, i + 1) == 0x80 && matches!(byte_at(s, i + 2), 0xA8 | 0xA9))
}

fn is_z(s: &[u8], i: usize) -> bool {
    byte_at(s, i) == 0
}

fn is_blankz(s: &[u8], i: usize) -> bool {
    is_blank(s, i) || is_break(s, i) || is_z(s, i)
}

fn is_alpha(s: &[u8], i: usize) -> bool {
    let b = byte_at(s, i);
    b.is_ascii_alphanumeric() || b == b'_' || b == b'-'
}

fn is_bom(s: &[u8], i: usize) -> bool {
    byte_at(s, i) == 0xEF && byte_at(s, i + 1) == 0xBB && byte_at(s, i + 2) == 0xBF
}

/// go-yaml's `is_printable`: note that every 4-byte character (outside the
/// BMP) is *not* printable, so emoji end up escaped in double quotes.
fn is_printable(s: &[u8], i: usize) -> bool {
    let b = byte_at(s, i);
    let b1 = byte_at(s, i + 1);
    let b2 = byte_at(s, i + 2);
    b == 0x0A
        || (0x20..=0x7E).contains(&b)
        || (b == 0xC2 && b1 >= 0xA0)
        || (b > 0xC2 && b < 0xED)
        || (b == 0xED && b1 < 0xA0)
        || b == 0xEE
        || (b == 0xEF && !(b1 == 0xBB && b2 == 0xBF) && !(b1 == 0xBF && (b2 == 0xBE || b2 == 0xBF)))
}

impl<'e> Emitter<'e> {
    fn event(&self) -> Event<'e> {
        self.current
    }

    /// True when this emitter, standing between two items of a block
    /// sequence, writes whatever events follow exactly as `other` does.
    /// Left out are the fields every event sets before they are read (the
    /// current event, its anchor, tag and scalar analysis, the node
    /// contexts) and, when the last line is not an indentation, the column
    /// and whitespace flag: the next item starts with `write_indent`, which
    /// then writes a line break, after which they no longer matter.
    fn same_future(&self, other: &Emitter<'e>) -> bool {
        let position = |e: &Emitter<'e>| {
            if e.indention {
                Some((e.column, e.whitespace))
            } else {
                None
            }
        };
        position(self) == position(other)
            && self.indention == other.indention
            && self.state == other.state
            && self.states == other.states
            && self.indents == other.indents
            && self.indent == other.indent
            && self.flow_level == other.flow_level
            && self.first_document == other.first_document
            && self.open_ended == other.open_ended
            && self.foot_indent == other.foot_indent
            && self.compact_sequence_indent == other.compact_sequence_indent
            && self.head_comment == other.head_comment
            && self.line_comment == other.line_comment
            && self.foot_comment == other.foot_comment
            && self.tail_comment == other.tail_comment
            && self.key_line_comment == other.key_line_comment
    }

    /// Writes `event`, followed by an event of kind `next`.
    fn step(&mut self, event: Event<'e>, next: Option<EventKind>) {
        self.current = event;
        self.next = next;
        self.analyze_event();
        self.state_machine();
    }

    // ---- output primitives -------------------------------------------

    fn put(&mut self, c: char) {
        self.out.push(c);
        self.column += 1;
    }

    fn put_break(&mut self) {
        self.out.push('\n');
        self.column = 0;
        self.indention = true;
    }

    /// Copies the character at `*i` and advances.
    fn write(&mut self, s: &str, i: &mut usize) {
        let bytes = s.as_bytes();
        let w = width(bytes[*i]).min(bytes.len() - *i);
        self.out.push_str(s.get(*i..*i + w).unwrap_or(""));
        self.column += 1;
        *i += w;
    }

    fn write_all(&mut self, s: &str) {
        self.out.push_str(s);
        self.column += s.chars().count();
    }

    fn write_break(&mut self, s: &str, i: &mut usize) {
        if s.as_bytes()[*i] == b'\n' {
            self.put_break();
            *i += 1;
        } else {
            self.write(s, i);
            self.column = 0;
            self.indention = true;
        }
    }

    // ---- state machine -----------------------------------------------

    fn pop_state(&mut self) {
        self.state = self.states.pop().unwrap_or(State::DocumentEnd);
    }

    fn pop_indent(&mut self) {
        self.indent = self.indents.pop().unwrap_or(-1);
    }

    fn state_machine(&mut self) {
        match self.state {
            State::DocumentStart => self.emit_document_start(),
            State::DocumentContent => self.emit_document_content(),
            State::DocumentEnd => self.emit_document_end(),
            State::FlowSequenceFirstItem => self.emit_flow_sequence_item(true, false),
            State::FlowSequenceTrailItem => self.emit_flow_sequence_item(false, true),
            State::FlowSequenceItem => self.emit_flow_sequence_item(false, false),
            State::FlowMappingFirstKey => self.emit_flow_mapping_key(true, false),
            State::FlowMappingTrailKey => self.emit_flow_mapping_key(false, true),
            State::FlowMappingKey => self.emit_flow_mapping_key(false, false),
            State::FlowMappingSimpleValue => self.emit_flow_mapping_value(true),
            State::FlowMappingValue => self.emit_flow_mapping_value(false),
            State::BlockSequenceFirstItem => self.emit_block_sequence_item(true),
            State::BlockSequenceItem => self.emit_block_sequence_item(false),
            State::BlockMappingFirstKey => self.emit_block_mapping_key(true),
            State::BlockMappingKey => self.emit_block_mapping_key(false),
            State::BlockMappingSimpleValue => self.emit_block_mapping_value(true),
            State::BlockMappingValue => self.emit_block_mapping_value(false),
        }
    }

    fn increase_indent(&mut self, flow: bool, indentless: bool, compact_seq: bool) {
        self.indents.push(self.indent);
        if self.indent < 0 {
            self.indent = if flow { BEST_INDENT } else { 0 };
        } else if !indentless {
            // go-yaml: the first indent inside a sequence skips the "- ";
            // everything else aligns to the chosen indentation.
            if self.states.last() == Some(&State::BlockSequenceItem) {
                self.indent += 2;
            } else {
                self.indent = BEST_INDENT * ((self.indent + BEST_INDENT) / BEST_INDENT);
            }
            if compact_seq {
                self.indent -= 2;
            }
        }
    }

    fn emit_document_start(&mut self) {
        if self.event().kind != EventKind::DocumentStart {
            return;
        }
        let implicit = self.first_document;
        if !implicit {
            self.write_indent();
            self.write_indicator("---", true, false, false);
            self.write_indent();
        }
        if !self.head_comment.is_empty() {
            self.process_head_comment();
            self.put_break();
        }
        self.state = State::DocumentContent;
    }

    fn emit_document_content(&mut self) {
        self.states.push(State::DocumentEnd);
        self.process_head_comment();
        self.emit_node(true, false, false, false);
        self.process_line_comment(false);
        self.process_foot_comment();
    }

    fn emit_document_end(&mut self) {
        if self.event().kind != EventKind::DocumentEnd {
            return;
        }
        // go-yaml forces a blank line before a document foot comment.
        self.foot_indent = 0;
        self.process_foot_comment();
        self.foot_indent = -1;
        self.write_indent();
        self.state = State::DocumentStart;
    }

    fn emit_flow_sequence_item(&mut self, first: bool, trail: bool) {
        if first {
            self.write_indicator("[", true, true, false);
            self.increase_indent(true, false, false);
            self.flow_level += 1;
        }
        if self.event().kind == EventKind::SequenceEnd {
            self.flow_level = self.flow_level.saturating_sub(1);
            self.pop_indent();
            if self.column == 0 {
                self.write_indent();
            }
            self.write_indicator("]", false, false, false);
            self.process_line_comment(false);
            self.process_foot_comment();
            self.pop_state();
            return;
        }
        if !first && !trail {
            self.write_indicator(",", false, false, false);
        }
        self.process_head_comment();
        if self.column == 0 {
            self.write_indent();
        }
        if self.column > BEST_WIDTH {
            self.write_indent();
        }
        let has_trailing = self.has_trailing_comments();
        self.states.push(if has_trailing {
            State::FlowSequenceTrailItem
        } else {
            State::FlowSequenceItem
        });
        self.emit_node(false, true, false, false);
        if self.has_trailing_comments() {
            self.write_indicator(",", false, false, false);
        }
        self.process_line_comment(false);
        self.process_foot_comment();
    }

    fn has_trailing_comments(&self) -> bool {
        !(self.line_comment.is_empty()
            && self.foot_comment.is_empty()
            && self.tail_comment.is_empty())
    }

    fn emit_flow_mapping_key(&mut self, first: bool, trail: bool) {
        if first {
            self.write_indicator("{", true, true, false);
            self.increase_indent(true, false, false);
            self.flow_level += 1;
        }
        if self.event().kind == EventKind::MappingEnd {
            let pending = !(self.head_comment.is_empty()
                && self.foot_comment.is_empty()
                && self.tail_comment.is_empty());
            if pending && !first && !trail {
                self.write_indicator(",", false, false, false);
            }
            self.process_head_comment();
            self.flow_level = self.flow_level.saturating_sub(1);
            self.pop_indent();
            self.write_indicator("}", false, false, false);
            self.process_line_comment(false);
            self.process_foot_comment();
            self.pop_state();
            return;
        }
        if !first && !trail {
            self.write_indicator(",", false, false, false);
        }
        self.process_head_comment();
        if self.column == 0 {
            self.write_indent();
        }
        if self.column > BEST_WIDTH {
            self.write_indent();
        }
        if self.check_simple_key() {
            self.states.push(State::FlowMappingSimpleValue);
            self.emit_node(false, false, true, true);
            return;
        }
        self.write_indicator("?", true, false, false);
        self.states.push(State::FlowMappingValue);
        self.emit_node(false, false, true, false);
    }

    fn emit_flow_mapping_value(&mut self, simple: bool) {
        if simple {
            self.write_indicator(":", false, false, false);
        } else {
            if self.column > BEST_WIDTH {
                self.write_indent();
            }
            self.write_indicator(":", true, false, false);
        }
        let has_trailing = self.has_trailing_comments();
        self.states.push(if has_trailing {
            State::FlowMappingTrailKey
        } else {
            State::FlowMappingKey
        });
        self.emit_node(false, false, true, false);
        if self.has_trailing_comments() {
            self.write_indicator(",", false, false, false);
        }
        self.process_line_comment(false);
        self.process_foot_comment();
    }

    fn emit_block_sequence_item(&mut self, first: bool) {
        if first {
            // kyaml's compact patch: a sequence that is a mapping value puts
            // its "- " in the key's column.
            let compact = self.mapping_context
                && (self.column == 0 || !self.indention)
                && self.compact_sequence_indent;
            self.increase_indent(false, false, compact);
        }
        if self.event().kind == EventKind::SequenceEnd {
            self.pop_indent();
            self.pop_state();
            return;
        }
        self.process_head_comment();
        self.write_indent();
        self.write_indicator("-", true, false, true);
        self.states.push(State::BlockSequenceItem);
        self.emit_node(false, true, false, false);
        self.process_line_comment(false);
        self.process_foot_comment();
    }

    fn emit_block_mapping_key(&mut self, first: bool) {
        if first {
            self.increase_indent(false, false, false);
        }
        self.process_head_comment();
        if self.event().kind == EventKind::MappingEnd {
            self.pop_indent();
            self.pop_state();
            return;
        }
        self.write_indent();
        if !self.line_comment.is_empty() {
            // A line comment on a key is kept for the value (go-yaml).
            self.key_line_comment = self.line_comment;
            self.line_comment = "";
        }
        if self.check_simple_key() {
            self.states.push(State::BlockMappingSimpleValue);
            self.emit_node(false, false, true, true);
            return;
        }
        self.write_indicator("?", true, false, true);
        self.states.push(State::BlockMappingValue);
        self.emit_node(false, false, true, false);
    }

    fn emit_block_mapping_value(&mut self, simple: bool) {
        if simple {
            self.write_indicator(":", false, false, false);
        } else {
            self.write_indent();
            self.write_indicator(":", true, false, true);
        }
        if !self.key_line_comment.is_empty() {
            let event = self.event();
            match event.kind {
                EventKind::Scalar if self.line_comment.is_empty() => {
                    // The scalar takes the key's comment; if it has its own,
                    // the key's is kept (and lost), as in go-yaml.
                    self.line_comment = self.key_line_comment;
                    self.key_line_comment = "";
                }
                EventKind::MappingStart | EventKind::SequenceStart if !event.flow => {
                    // A block collection follows: the key's comment goes
                    // right after "key:".
                    std::mem::swap(&mut self.line_comment, &mut self.key_line_comment);
                    self.process_line_comment(false);
                    std::mem::swap(&mut self.line_comment, &mut self.key_line_comment);
                }
                _ => {}
            }
        }
        self.states.push(State::BlockMappingKey);
        self.emit_node(false, false, true, false);
        self.process_line_comment(false);
        self.process_foot_comment();
    }

    fn emit_node(&mut self, root: bool, sequence: bool, mapping: bool, simple_key: bool) {
        self.root_context = root;
        self.sequence_context = sequence;
        self.mapping_context = mapping;
        self.simple_key_context = simple_key;
        match self.event().kind {
            EventKind::Alias => {
                self.process_anchor();
                self.pop_state();
            }
            EventKind::Scalar => self.emit_scalar(),
            EventKind::SequenceStart => {
                self.process_anchor();
                self.process_tag();
                if self.flow_level > 0 || self.event().flow || self.check_empty_sequence() {
                    self.state = State::FlowSequenceFirstItem;
                } else {
                    self.state = State::BlockSequenceFirstItem;
                }
            }
            EventKind::MappingStart => {
                self.process_anchor();
                self.process_tag();
                if self.flow_level > 0 || self.event().flow || self.check_empty_mapping() {
                    self.state = State::FlowMappingFirstKey;
                } else {
                    self.state = State::BlockMappingFirstKey;
                }
            }
            // go-yaml reports an emitter error here; the encoder never
            // produces such a stream, so the event is skipped.
            EventKind::DocumentStart
            | EventKind::DocumentEnd
            | EventKind::SequenceEnd
            | EventKind::MappingEnd => self.pop_state(),
        }
    }

    fn emit_scalar(&mut self) {
        self.select_scalar_style();
        self.process_anchor();
        self.process_tag();
        self.increase_indent(true, false, false);
        self.process_scalar();
        self.pop_indent();
        self.pop_state();
    }

    /// The kind of the current event (`offset` 0) or the next one (1).
    fn next_kind(&self, offset: usize) -> Option<EventKind> {
        match offset {
            0 => Some(self.current.kind),
            1 => self.next,
            _ => None,
        }
    }

    fn check_empty_sequence(&self) -> bool {
        self.next_kind(0) == Some(EventKind::SequenceStart)
            && self.next_kind(1) == Some(EventKind::SequenceEnd)
    }

    fn check_empty_mapping(&self) -> bool {
        self.next_kind(0) == Some(EventKind::MappingStart)
            && self.next_kind(1) == Some(EventKind::MappingEnd)
    }

    fn check_simple_key(&self) -> bool {
        let event = self.event();
        let anchor_len = self.anchor.map_or(0, |(name, _)| name.len());
        let tag_len = self.tag_handle.len() + self.tag_suffix.len();
        let length = match event.kind {
            EventKind::Alias => anchor_len,
            EventKind::Scalar => {
                if self.scalar.multiline {
                    return false;
                }
                anchor_len + tag_len + event.value.len()
            }
            EventKind::SequenceStart => {
                if !self.check_empty_sequence() {
                    return false;
                }
                anchor_len + tag_len
            }
            EventKind::MappingStart => {
                if !self.check_empty_mapping() {
                    return false;
                }
                anchor_len + tag_len
            }
            _ => return false,
        };
        length <= 128
    }

    fn select_scalar_style(&mut self) {
        let event = self.event();
        let mut style = event.style;
        if self.simple_key_context && self.scalar.multiline {
            style = ScalarStyle::DoubleQuoted;
        }
        if style == ScalarStyle::Plain {
            if (self.flow_level > 0 && !self.scalar.flow_plain_allowed)
                || (self.flow_level == 0 && !self.scalar.block_plain_allowed)
            {
                style = ScalarStyle::SingleQuoted;
            }
            if event.value.is_empty() && (self.flow_level > 0 || self.simple_key_context) {
                style = ScalarStyle::SingleQuoted;
            }
        }
        if style == ScalarStyle::SingleQuoted && !self.scalar.single_quoted_allowed {
            style = ScalarStyle::DoubleQuoted;
        }
        if matches!(style, ScalarStyle::Literal | ScalarStyle::Folded)
            && (!self.scalar.block_allowed || self.flow_level > 0 || self.simple_key_context)
        {
            style = ScalarStyle::DoubleQuoted;
        }
        self.scalar_style = style;
    }

    fn process_anchor(&mut self) {
        let Some((name, alias)) = self.anchor else {
            return;
        };
        self.write_indicator(if alias { "*" } else { "&" }, true, false, false);
        self.write_all(name);
        self.whitespace = false;
        self.indention = false;
    }

    fn process_tag(&mut self) {
        if self.tag_handle.is_empty() && self.tag_suffix.is_empty() {
            return;
        }
        if !self.tag_handle.is_empty() {
            self.write_tag_handle(self.tag_handle);
            if !self.tag_suffix.is_empty() {
                self.write_tag_content(self.tag_suffix, false);
            }
        } else {
            self.write_indicator("!<", true, false, false);
            self.write_tag_content(self.tag_suffix, false);
            self.write_indicator(">", false, false, false);
        }
    }

    fn process_scalar(&mut self) {
        let value: &'e str = self.event().value;
        let allow_breaks = !self.simple_key_context;
        match self.scalar_style {
            ScalarStyle::Plain => self.write_plain_scalar(value, allow_breaks),
            ScalarStyle::SingleQuoted => self.write_single_quoted_scalar(value, allow_breaks),
            ScalarStyle::DoubleQuoted => self.write_double_quoted_scalar(value, allow_breaks),
            ScalarStyle::Literal => self.write_literal_scalar(value),
            ScalarStyle::Folded => self.write_folded_scalar(value),
        }
    }

    fn process_head_comment(&mut self) {
        if !self.tail_comment.is_empty() {
            self.write_indent();
            let tail = self.tail_comment;
            self.write_comment(tail);
            self.tail_comment = "";
            self.foot_indent = self.indent.max(0);
        }
        if self.head_comment.is_empty() {
            return;
        }
        self.write_indent();
        let head = self.head_comment;
        self.write_comment(head);
        self.head_comment = "";
    }

    fn process_line_comment(&mut self, linebreak: bool) {
        if self.line_comment.is_empty() {
            if linebreak {
                self.put_break();
            }
            return;
        }
        if !self.whitespace {
            self.put(' ');
        }
        let line = self.line_comment;
        self.write_comment(line);
        self.line_comment = "";
    }

    fn process_foot_comment(&mut self) {
        if self.foot_comment.is_empty() {
            return;
        }
        self.write_indent();
        let foot = self.foot_comment;
        self.write_comment(foot);
        self.foot_comment = "";
        self.foot_indent = self.indent.max(0);
    }

    // ---- analysis ----------------------------------------------------

    fn analyze_event(&mut self) {
        let event = self.event();
        self.anchor = None;
        self.tag_handle = "";
        self.tag_suffix = "";
        if !event.head_comment.is_empty() {
            self.head_comment = event.head_comment;
        }
        if !event.line_comment.is_empty() {
            self.line_comment = event.line_comment;
        }
        if !event.foot_comment.is_empty() {
            self.foot_comment = event.foot_comment;
        }
        if !event.tail_comment.is_empty() {
            self.tail_comment = event.tail_comment;
        }
        match event.kind {
            EventKind::Alias => self.anchor = Some((event.anchor, true)),
            EventKind::Scalar | EventKind::SequenceStart | EventKind::MappingStart => {
                if !event.anchor.is_empty() {
                    self.anchor = Some((event.anchor, false));
                }
                if !event.tag.is_empty() {
                    self.analyze_tag(event.tag);
                }
                if event.kind == EventKind::Scalar {
                    self.scalar = analyze_scalar(event.value);
                }
            }
            _ => {}
        }
    }

    /// Splits a short tag into handle and suffix the way go-yaml's long-tag
    /// round trip through the default `!` and `!!` directives does.
    fn analyze_tag(&mut self, tag: &'e str) {
        if let Some(suffix) = tag.strip_prefix("!!") {
            self.tag_handle = "!!";
            self.tag_suffix = suffix;
        } else if let Some(suffix) = tag.strip_prefix('!') {
            self.tag_handle = "!";
            self.tag_suffix = suffix;
        } else if let Some(suffix) = tag.strip_prefix("tag:yaml.org,2002:") {
            self.tag_handle = "!!";
            self.tag_suffix = suffix;
        } else {
            self.tag_suffix = tag;
        }
    }

    // ---- writers -----------------------------------------------------

    fn write_indent(&mut self) {
        let indent = self.indent.max(0) as usize;
        if !self.indention || self.column > indent || (self.column == indent && !self.whitespace) {
            self.put_break();
        }
        if self.foot_indent == indent as i64 {
            self.put_break();
        }
        while self.column < indent {
            self.put(' ');
        }
        self.whitespace = true;
        self.foot_indent = -1;
    }

    fn write_indicator(
        &mut self,
        indicator: &str,
        need_whitespace: bool,
        is_whitespace: bool,
        is_indention: bool,
    ) {
        if need_whitespace && !self.whitespace {
            self.put(' ');
        }
        self.write_all(indicator);
        self.whitespace = is_whitespace;
        self.indention = self.indention && is_indention;
        self.open_ended = false;
    }

    fn write_tag_handle(&mut self, handle: &str) {
        if !self.whitespace {
            self.put(' ');
        }
        self.write_all(handle);
        self.whitespace = false;
        self.indention = false;
    }

    fn write_tag_content(&mut self, value: &str, need_whitespace: bool) {
        if need_whitespace && !self.whitespace {
            self.put(' ');
        }
        let bytes = value.as_bytes();
        let mut i = 0;
        while i < bytes.len() {
            let b = bytes[i];
            let must_write = matches!(
                b,
                b';' | b'/'
                    | b'?'
                    | b':'
                    | b'@'
                    | b'&'
                    | b'='
                    | b'+'
                    | b'$'
                    | b','
                    | b'_'
                    | b'.'
                    | b'~'
                    | b'*'
                    | b'\''
                    | b'('
                    | b')'
                    | b'['
                    | b']'
            ) || is_alpha(bytes, i);
            if must_write {
                self.write(value, &mut i);
            } else {
                let w = width(b).min(bytes.len() - i);
                for k in 0..w {
                    let octet = bytes[i + k];
                    self.put('%');
                    self.put(hex_digit(octet >> 4));
                    self.put(hex_digit(octet & 0x0F));
                }
                i += w;
            }
        }
        self.whitespace = false;
        self.indention = false;
    }

    fn write_plain_scalar(&mut self, value: &str, allow_breaks: bool) {
        let bytes = value.as_bytes();
        if !bytes.is_empty() && !self.whitespace {
            self.put(' ');
        }
        if !bytes.iter().any(|&b| b == b'\n' || b == b'\r' || b >= 0x80) {
            // Fast path: with unlimited width and no line breaks, go-yaml's
            // loop copies the text unchanged.
            self.out.push_str(value);
            self.column += bytes.len();
            if !bytes.is_empty() {
                self.whitespace = false;
            }
            self.indention = false;
            if self.root_context {
                self.open_ended = true;
            }
            return;
        }
        let mut spaces = false;
        let mut breaks = false;
        let mut i = 0;
        while i < bytes.len() {
            if is_space(bytes, i) {
                if allow_breaks && !spaces && self.column > BEST_WIDTH && !is_space(bytes, i + 1) {
                    self.write_indent();
                    i += 1;
                } else {
                    self.write(value, &mut i);
                }
                spaces = true;
            } else if is_break(bytes, i) {
                if !breaks && bytes[i] == b'\n' {
                    self.put_break();
                }
                self.write_break(value, &mut i);
                breaks = true;
            } else {
                if breaks {
                    self.write_indent();
                }
                self.write(value, &mut i);
                self.indention = false;
                spaces = false;
                breaks = false;
            }
        }
        if !bytes.is_empty() {
            self.whitespace = false;
        }
        self.indention = false;
        if self.root_context {
            self.open_ended = true;
        }
    }

    fn write_single_quoted_scalar(&mut self, value: &str, allow_breaks: bool) {
        self.write_indicator("'", true, false, false);
        let bytes = value.as_bytes();
        let mut spaces = false;
        let mut breaks = false;
        let mut i = 0;
        while i < bytes.len() {
            if is_space(bytes, i) {
                if allow_breaks
                    && !spaces
                    && self.column > BEST_WIDTH
                    && i > 0
                    && i < bytes.len() - 1
                    && !is_space(bytes, i + 1)
                {
                    self.write_indent();
                    i += 1;
                } else {
                    self.write(value, &mut i);
                }
                spaces = true;
            } else if is_break(bytes, i) {
                // A line break is written as an empty line plus the break
                // (YAML folding), as kpt's emitter does.
                if !breaks && bytes[i] == b'\n' {
                    self.put_break();
                }
                self.write_break(value, &mut i);
                breaks = true;
            } else {
                if breaks {
                    self.write_indent();
                }
                if bytes[i] == b'\'' {
                    self.put('\'');
                }
                self.write(value, &mut i);
                self.indention = false;
                spaces = false;
                breaks = false;
            }
        }
        self.write_indicator("'", false, false, false);
        self.whitespace = false;
        self.indention = false;
    }

    fn write_double_quoted_scalar(&mut self, value: &str, allow_breaks: bool) {
        let mut spaces = false;
        self.write_indicator("\"", true, false, false);
        let bytes = value.as_bytes();
        let mut i = 0;
        while i < bytes.len() {
            if !is_printable(bytes, i)
                || is_bom(bytes, i)
                || is_break(bytes, i)
                || bytes[i] == b'"'
                || bytes[i] == b'\\'
            {
                let w = width(bytes[i]).min(bytes.len() - i);
                let c = value[i..].chars().next().unwrap_or('\0');
                i += w;
                self.put('\\');
                match c {
                    '\0' => self.put('0'),
                    '\x07' => self.put('a'),
                    '\x08' => self.put('b'),
                    '\t' => self.put('t'),
                    '\n' => self.put('n'),
                    '\x0B' => self.put('v'),
                    '\x0C' => self.put('f'),
                    '\r' => self.put('r'),
                    '\x1B' => self.put('e'),
                    '"' => self.put('"'),
                    '\\' => self.put('\\'),
                    '\u{85}' => self.put('N'),
                    '\u{A0}' => self.put('_'),
                    '\u{2028}' => self.put('L'),
                    '\u{2029}' => self.put('P'),
                    _ => {
                        let v = c as u32;
                        let (letter, digits) = if v <= 0xFF {
                            ('x', 2)
                        } else if v <= 0xFFFF {
                            ('u', 4)
                        } else {
                            ('U', 8)
                        };
                        self.put(letter);
                        for k in (0..digits).rev() {
                            self.put(hex_digit(((v >> (k * 4)) & 0x0F) as u8));
                        }
                    }
                }
                spaces = false;
            } else if is_space(bytes, i) {
                if allow_breaks
                    && !spaces
                    && self.column > BEST_WIDTH
                    && i > 0
                    && i < bytes.len() - 1
                {
                    self.write_indent();
                    if is_space(bytes, i + 1) {
                        self.put('\\');
                    }
                    i += 1;
                } else {
                    self.write(value, &mut i);
                }
                spaces = true;
            } else {
                // Copy the run of plain printable ASCII in one go.
                let start = i;
                while i < bytes.len()
                    && (0x21..=0x7E).contains(&bytes[i])
                    && bytes[i] != b'"'
                    && bytes[i] != b'\\'
                {
                    i += 1;
                }
                if i == start {
                    self.write(value, &mut i);
                } else {
                    self.out.push_str(&value[start..i]);
                    self.column += i - start;
                }
                spaces = false;
            }
        }
        self.write_indicator("\"", false, false, false);
        self.whitespace = false;
        self.indention = false;
    }

    fn write_block_scalar_hints(&mut self, value: &str) {
        let bytes = value.as_bytes();
        if is_space(bytes, 0) || is_break(bytes, 0) {
            // go-yaml always writes the best indent, whatever the input had.
            self.write_indicator("2", false, false, false);
        }
        self.open_ended = false;
        let mut chomp = None;
        if bytes.is_empty() {
            chomp = Some("-");
        } else {
            let mut i = bytes.len() - 1;
            while i > 0 && bytes[i] & 0xC0 == 0x80 {
                i -= 1;
            }
            if !is_break(bytes, i) {
                chomp = Some("-");
            } else if i == 0 {
                chomp = Some("+");
                self.open_ended = true;
            } else {
                i -= 1;
                while i > 0 && bytes[i] & 0xC0 == 0x80 {
                    i -= 1;
                }
                if is_break(bytes, i) {
                    chomp = Some("+");
                    self.open_ended = true;
                }
            }
        }
        if let Some(chomp) = chomp {
            self.write_indicator(chomp, false, false, false);
        }
    }

    fn write_literal_scalar(&mut self, value: &str) {
        self.write_indicator("|", true, false, false);
        self.write_block_scalar_hints(value);
        // kyaml's patch: the header line always ends here.
        self.process_line_comment(true);
        self.whitespace = true;
        let bytes = value.as_bytes();
        let mut breaks = true;
        let mut i = 0;
        while i < bytes.len() {
            if is_break(bytes, i) {
                self.write_break(value, &mut i);
                breaks = true;
            } else {
                if breaks {
                    self.write_indent();
                }
                self.write(value, &mut i);
                self.indention = false;
                breaks = false;
            }
        }
    }

    fn write_folded_scalar(&mut self, value: &str) {
        self.write_indicator(">", true, false, false);
        self.write_block_scalar_hints(value);
        self.process_line_comment(true);
        self.whitespace = true;
        let bytes = value.as_bytes();
        let mut breaks = true;
        let mut leading_spaces = true;
        let mut i = 0;
        while i < bytes.len() {
            if is_break(bytes, i) {
                if !breaks && !leading_spaces && bytes[i] == b'\n' {
                    // go-yaml's quirk: it inspects the start of the whole
                    // value, not the text after this break.
                    let mut k = 0;
                    while is_break(bytes, k) {
                        k += width(bytes[k]);
                    }
                    if !is_blankz(bytes, k) {
                        self.put_break();
                    }
                }
                self.write_break(value, &mut i);
                breaks = true;
            } else {
                if breaks {
                    self.write_indent();
                    leading_spaces = is_blank(bytes, i);
                }
                if !breaks
                    && is_space(bytes, i)
                    && !is_space(bytes, i + 1)
                    && self.column > BEST_WIDTH
                {
                    self.write_indent();
                    i += 1;
                } else {
                    self.write(value, &mut i);
                }
                self.indention = false;
                breaks = false;
            }
        }
    }

    fn write_comment(&mut self, comment: &str) {
        let bytes = comment.as_bytes();
        let mut breaks = false;
        let mut pound = false;
        let mut i = 0;
        while i < bytes.len() {
            if is_break(bytes, i) {
                self.write_break(comment, &mut i);
                breaks = true;
                pound = false;
            } else {
                if breaks {
                    self.write_indent();
                }
                if !pound {
                    if bytes[i] != b'#' {
                        self.put('#');
                        self.put(' ');
                    }
                    pound = true;
                }
                self.write(comment, &mut i);
                self.indention = false;
                breaks = false;
            }
        }
        if !breaks {
            self.put_break();
        }
        self.whitespace = true;
    }
}

fn hex_digit(nibble: u8) -> char {
    char::from_digit(u32::from(nibble), 16)
        .map(|c| c.to_ascii_uppercase())
        .unwrap_or('0')
}

/// go-yaml's `yaml_emitter_analyze_scalar`: which styles can represent `value`.
fn analyze_scalar(value: &str) -> ScalarAnalysis {
    let bytes = value.as_bytes();
    if bytes.is_empty() {
        return ScalarAnalysis {
            multiline: false,
            flow_plain_allowed: false,
            block_plain_allowed: true,
            single_quoted_allowed: true,
            block_allowed: false,
        };
    }
    // Fast path for the common word-like scalar (names, versions, paths):
    // an alphanumeric first byte and then only alphanumerics and `-_./`
    // cannot set any of the flags below, so every style is allowed.
    if bytes[0].is_ascii_alphanumeric()
        && bytes
            .iter()
            .all(|&b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'/'))
    {
        return ScalarAnalysis {
            multiline: false,
            flow_plain_allowed: true,
            block_plain_allowed: true,
            single_quoted_allowed: true,
            block_allowed: true,
        };
    }
    analyze_scalar_fully(value)
}

/// [`analyze_scalar`] without its fast path: go-yaml's byte-by-byte scan.
fn analyze_scalar_fully(value: &str) -> ScalarAnalysis {
    let bytes = value.as_bytes();
    if bytes.is_empty() {
        return analyze_scalar(value);
    }
    let mut block_indicators = false;
    let mut flow_indicators = false;
    let mut line_breaks = false;
    let mut special_characters = false;
    let mut tab_characters = false;
    let mut leading_space = false;
    let mut leading_break = false;
    let mut trailing_space = false;
    let mut trailing_break = false;
    let mut break_space = false;
    let mut space_break = false;
    let mut previous_space = false;
    let mut previous_break = false;

    if bytes.starts_with(b"---") || bytes.starts_with(b"...") {
        block_indicators = true;
        flow_indicators = true;
    }
    let mut preceded_by_whitespace = true;
    let mut i = 0;
    while i < bytes.len() {
        let w = width(bytes[i]);
        let followed_by_whitespace = i + w >= bytes.len() || is_blank(bytes, i + w);
        let b = bytes[i];
        if i == 0 {
            match b {
                b'#' | b',' | b'[' | b']' | b'{' | b'}' | b'&' | b'*' | b'!' | b'|' | b'>'
                | b'\'' | b'"' | b'%' | b'@' | b'`' => {
                    flow_indicators = true;
                    block_indicators = true;
                }
                b'?' | b':' => {
                    flow_indicators = true;
                    if followed_by_whitespace {
                        block_indicators = true;
                    }
                }
                b'-' if followed_by_whitespace => {
                    flow_indicators = true;
                    block_indicators = true;
                }
                _ => {}
            }
        } else {
            match b {
                b',' | b'?' | b'[' | b']' | b'{' | b'}' => flow_indicators = true,
                b':' => {
                    flow_indicators = true;
                    if followed_by_whitespace {
                        block_indicators = true;
                    }
                }
                b'#' if preceded_by_whitespace => {
                    flow_indicators = true;
                    block_indicators = true;
                }
                _ => {}
            }
        }
        if b == b'\t' {
            tab_characters = true;
        } else if !is_printable(bytes, i) {
            special_characters = true;
        }
        if is_space(bytes, i) {
            if i == 0 {
                leading_space = true;
            }
            if i + w == bytes.len() {
                trailing_space = true;
            }
            if previous_break {
                break_space = true;
            }
            previous_space = true;
            previous_break = false;
        } else if is_break(bytes, i) {
            line_breaks = true;
            if i == 0 {
                leading_break = true;
            }
            if i + w == bytes.len() {
                trailing_break = true;
            }
            if previous_space {
                space_break = true;
            }
            previous_space = false;
            previous_break = true;
        } else {
            previous_space = false;
            previous_break = false;
        }
        preceded_by_whitespace = is_blankz(bytes, i);
        i += w;
    }

    let mut analysis = ScalarAnalysis {
        multiline: line_breaks,
        flow_plain_allowed: true,
        block_plain_allowed: true,
        single_quoted_allowed: true,
        block_allowed: true,
    };
    if leading_space || leading_break || trailing_space || trailing_break {
        analysis.flow_plain_allowed = false;
        analysis.block_plain_allowed = false;
    }
    if trailing_space {
        analysis.block_allowed = false;
    }
    if break_space {
        analysis.flow_plain_allowed = false;
        analysis.block_plain_allowed = false;
        analysis.single_quoted_allowed = false;
    }
    if space_break || tab_characters || special_characters {
        analysis.flow_plain_allowed = false;
        analysis.block_plain_allowed = false;
        analysis.single_quoted_allowed = false;
    }
    if space_break || special_characters {
        analysis.block_allowed = false;
    }
    if line_breaks {
        analysis.flow_plain_allowed = false;
        analysis.block_plain_allowed = false;
    }
    if flow_indicators {
        analysis.flow_plain_allowed = false;
    }
    if block_indicators {
        analysis.block_plain_allowed = false;
    }
    analysis
}

#[cfg(test)]
mod tests {
    use super::{analyze_scalar, analyze_scalar_fully};

    /// The fast path agrees with the full scan on word-like scalars and on
    /// near misses (indicators, blanks, document markers, non-ASCII).
    #[test]
    fn scalar_analysis_fast_path_agrees() {
        let samples = [
            "a",
            "web-1",
            "registry.example.com/web:1.2.0",
            "x.y",
            "a_b",
            "A9",
            "0",
            "1.0",
            "true",
            "-a",
            "- a",
            "a-",
            "a.",
            "a/",
            "a b",
            "a\tb",
            "a#b",
            "a #b",
            "a:b",
            "a: b",
            "...",
            "---",
            "a...",
            "a---",
            "é",
            "aé",
            "a,b",
            "a?",
            "a\nb",
            "a ",
            " a",
            "~",
            "null",
            "a/b/c-d_e.f",
            "9lives",
            "x--y",
            "a..b",
        ];
        for sample in samples {
            assert_eq!(
                analyze_scalar(sample),
                analyze_scalar_fully(sample),
                "{sample:?}"
            );
        }
    }
}
