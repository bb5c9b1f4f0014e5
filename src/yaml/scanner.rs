//! The YAML scanner (go-yaml v3 `scannerc.go` behaviour): text to tokens,
//! with comments collected in a side queue and byte offsets in every mark.
//!
//! This is a behavioural port of libyaml's scanner as modified by go-yaml v3:
//! a token queue with simple-key bookkeeping, block indentation unrolling,
//! all scalar styles with YAML folding and escapes, and go-yaml's comment
//! state machine, which decides from the block indent, the comment column,
//! the previous token and blank lines whether a comment block is the foot of
//! what came before or the head of what follows. The parser
//! (`yaml::parser`) drains the comment queue as it consumes tokens.
//!
//! Marks keep go-yaml's character `index` (comment placement compares
//! those, sometimes mixed with byte distances exactly as go-yaml does) plus
//! the byte `offset` for diagnostics. The input is a `&str`; scanning never
//! panics: reads past the end see NUL, as libyaml's padded buffer does.

use std::borrow::Cow;

pub(crate) use super::error::Mark;
use super::error::RawError;

/// Token types (libyaml `yaml_token_type_t`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum TokenKind {
    StreamStart,
    StreamEnd,
    VersionDirective,
    TagDirective,
    DocumentStart,
    DocumentEnd,
    BlockSequenceStart,
    BlockMappingStart,
    BlockEnd,
    FlowSequenceStart,
    FlowSequenceEnd,
    FlowMappingStart,
    FlowMappingEnd,
    BlockEntry,
    FlowEntry,
    Key,
    Value,
    Alias,
    Anchor,
    Tag,
    Scalar,
}

/// How a scalar was written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ScalarStyle {
    Plain,
    SingleQuoted,
    DoubleQuoted,
    Literal,
    Folded,
}

/// One token. `value` holds the scalar text, anchor/alias name, tag handle
/// or directive handle; `suffix` the tag suffix or directive prefix. A
/// scalar's text is borrowed from the input where it is a slice of it (a
/// plain scalar on one line), so most scalars cost no allocation here.
#[derive(Clone, Debug)]
pub(crate) struct Token<'a> {
    pub(crate) kind: TokenKind,
    pub(crate) start: Mark,
    pub(crate) end: Mark,
    pub(crate) value: Cow<'a, str>,
    pub(crate) suffix: String,
    pub(crate) style: ScalarStyle,
    pub(crate) major: i8,
    pub(crate) minor: i8,
}

impl<'a> Token<'a> {
    fn new(kind: TokenKind, start: Mark, end: Mark) -> Token<'a> {
        Token {
            kind,
            start,
            end,
            value: Cow::Borrowed(""),
            suffix: String::new(),
            style: ScalarStyle::Plain,
            major: 0,
            minor: 0,
        }
    }
}

/// A comment block found by the scanner, waiting for the parser to attach
/// it to the first token at or after `token_mark`.
#[derive(Clone, Debug, Default)]
pub(crate) struct Comment {
    pub(crate) scan_mark: Mark,
    pub(crate) token_mark: Mark,
    pub(crate) start_mark: Mark,
    pub(crate) end_mark: Mark,
    pub(crate) head: String,
    pub(crate) line: String,
    pub(crate) foot: String,
}

#[derive(Clone, Copy, Debug, Default)]
struct SimpleKey {
    possible: bool,
    required: bool,
    token_number: usize,
    mark: Mark,
}

/// go-yaml's `simple_keys_by_tok` map (token number → simple-key stack
/// index), including its stale entries, which decide how far the scanner
/// looks ahead. Token numbers only grow and the parser only asks for the
/// token it is at, so entries behind it are dropped; the rest is a handful.
#[derive(Default)]
struct KeysByToken {
    entries: std::collections::VecDeque<(usize, usize)>,
}

impl KeysByToken {
    fn get(&mut self, token_number: usize) -> Option<usize> {
        while self
            .entries
            .front()
            .is_some_and(|&(number, _)| number < token_number)
        {
            self.entries.pop_front();
        }
        self.entries
            .iter()
            .find(|&&(number, _)| number == token_number)
            .map(|&(_, index)| index)
    }

    fn insert(&mut self, token_number: usize, index: usize) {
        match self
            .entries
            .iter_mut()
            .find(|(number, _)| *number == token_number)
        {
            Some(entry) => entry.1 = index,
            None => {
                let at = self
                    .entries
                    .iter()
                    .position(|&(number, _)| number > token_number)
                    .unwrap_or(self.entries.len());
                self.entries.insert(at, (token_number, index));
            }
        }
    }

    fn remove(&mut self, token_number: usize) {
        self.entries.retain(|&(number, _)| number != token_number);
    }
}

/// Nesting limits, as in go-yaml (they bound memory on hostile input).
const MAX_FLOW_LEVEL: usize = 10000;
const MAX_INDENTS: usize = 10000;

/// The scanner state. The parser reads `tokens[head..]` and drains
/// `comments[comments_head..]`.
pub(crate) struct Scanner<'a> {
    src: &'a str,
    buf: &'a [u8],
    pos: usize,
    mark: Mark,

    /// The token queue. Consumed tokens before `head` are kept for a while
    /// because go-yaml's comment logic looks at the last two queued tokens
    /// whether or not the parser has consumed them.
    tokens: Vec<Token<'a>>,
    head: usize,
    /// Number of tokens consumed by the parser so far.
    pub(crate) tokens_parsed: usize,
    token_available: bool,
    stream_start_produced: bool,

    indent: i64,
    indents: Vec<i64>,
    simple_key_allowed: bool,
    simple_keys: Vec<SimpleKey>,
    simple_keys_by_tok: KeysByToken,
    flow_level: usize,
    /// Line breaks seen since the last non-blank character.
    newlines: i64,

    pub(crate) comments: Vec<Comment>,
    pub(crate) comments_head: usize,

    error: Option<RawError>,
}

fn width(b: u8) -> usize {
    if b & 0x80 == 0x00 {
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

fn is_alpha_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_' || b == b'-'
}

fn hex_value(b: u8) -> i64 {
    match b {
        b'0'..=b'9' => i64::from(b - b'0'),
        b'A'..=b'F' => i64::from(b - b'A' + 10),
        b'a'..=b'f' => i64::from(b - b'a' + 10),
        _ => 0,
    }
}

/// The index of the first byte that is not printable ASCII, TAB, LF or CR
/// (those are always allowed). Blocks of 32 bytes are tested without
/// branching per byte, which the compiler turns into vector compares.
fn first_non_plain(bytes: &[u8]) -> Option<usize> {
    let plain = |b: u8| (b.wrapping_sub(b' ') < 0x5F) | (b == b'\t') | (b == b'\n') | (b == b'\r');
    const BLOCK: usize = 32;
    let mut blocks = bytes.chunks_exact(BLOCK);
    for (i, block) in (&mut blocks).enumerate() {
        if !block.iter().fold(true, |all, &b| all & plain(b)) {
            return block
                .iter()
                .position(|&b| !plain(b))
                .map(|at| i * BLOCK + at);
        }
    }
    let tail = blocks.remainder();
    tail.iter()
        .position(|&b| !plain(b))
        .map(|at| bytes.len() - tail.len() + at)
}

/// True if `c` may appear in the input (go-yaml's reader check): TAB, LF,
/// CR, printable ASCII, NEL, and the BMP/astral ranges minus surrogates,
/// U+FFFE and U+FFFF.
pub(crate) fn is_allowed_char(c: char) -> bool {
    matches!(c,
        '\t' | '\n' | '\r' | '\u{20}'..='\u{7E}' | '\u{85}' | '\u{A0}'..='\u{D7FF}'
        | '\u{E000}'..='\u{FFFD}' | '\u{10000}'..='\u{10FFFF}')
}

impl<'a> Scanner<'a> {
    /// A scanner over `src`. A leading UTF-8 byte-order mark is skipped as
    /// go-yaml's reader does (it does not count in character indices).
    pub(crate) fn new(src: &'a str) -> Scanner<'a> {
        let start = if src.starts_with('\u{FEFF}') { 3 } else { 0 };
        Scanner {
            src,
            buf: src.as_bytes(),
            pos: start,
            mark: Mark {
                offset: start,
                ..Mark::default()
            },
            tokens: Vec::with_capacity(16),
            head: 0,
            tokens_parsed: 0,
            token_available: false,
            stream_start_produced: false,
            indent: -1,
            indents: Vec::new(),
            simple_key_allowed: false,
            simple_keys: Vec::new(),
            simple_keys_by_tok: KeysByToken::default(),
            flow_level: 0,
            newlines: 0,
            comments: Vec::new(),
            comments_head: 0,
            error: None,
        }
    }

    /// Checks the whole input for characters go-yaml's reader rejects.
    pub(crate) fn check_input(src: &str) -> Result<(), RawError> {
        let Some(start) = first_non_plain(src.as_bytes()) else {
            return Ok(());
        };
        for (offset, c) in src[start..].char_indices().map(|(i, c)| (i + start, c)) {
            if !is_allowed_char(c) {
                let line = src[..offset].bytes().filter(|&b| b == b'\n').count();
                let line_start = src[..offset].rfind('\n').map_or(0, |i| i + 1);
                let column = src[line_start..offset].chars().count();
                let mark = Mark {
                    index: 0,
                    line: i64::try_from(line).unwrap_or(0),
                    column: i64::try_from(column).unwrap_or(0),
                    offset,
                };
                return Err(RawError::reader("control characters are not allowed", mark));
            }
        }
        Ok(())
    }

    // ----- buffer access -------------------------------------------------

    #[inline]
    fn at(&self, k: usize) -> u8 {
        self.buf.get(self.pos + k).copied().unwrap_or(0)
    }

    #[inline]
    fn is_blank_at(&self, k: usize) -> bool {
        matches!(self.at(k), b' ' | b'\t')
    }

    #[inline]
    fn is_break_at(&self, k: usize) -> bool {
        match self.at(k) {
            b'\r' | b'\n' => true,
            0xC2 => self.at(k + 1) == 0x85,
            0xE2 => self.at(k + 1) == 0x80 && matches!(self.at(k + 2), 0xA8 | 0xA9),
            _ => false,
        }
    }

    #[inline]
    fn is_breakz_at(&self, k: usize) -> bool {
        self.at(k) == 0 || self.is_break_at(k)
    }

    #[inline]
    fn is_blankz_at(&self, k: usize) -> bool {
        self.is_blank_at(k) || self.is_breakz_at(k)
    }

    #[inline]
    fn is_z(&self) -> bool {
        self.at(0) == 0
    }

    fn is_bom(&self) -> bool {
        self.at(0) == 0xEF && self.at(1) == 0xBB && self.at(2) == 0xBF
    }

    #[inline]
    fn skip(&mut self) {
        if !self.is_blank_at(0) {
            self.newlines = 0;
        }
        self.mark.index += 1;
        self.mark.column += 1;
        self.pos += width(self.at(0));
        self.mark.offset = self.pos.min(self.buf.len());
    }

    /// Skips `n` spaces or tabs at once (what `n` calls of `skip` do on
    /// them: blanks leave `newlines` alone).
    fn skip_blanks(&mut self, n: usize) {
        self.mark.index += n as i64;
        self.mark.column += n as i64;
        self.pos += n;
        self.mark.offset = self.pos.min(self.buf.len());
    }

    fn skip_line(&mut self) {
        if self.at(0) == b'\r' && self.at(1) == b'\n' {
            self.mark.index += 2;
            self.mark.column = 0;
            self.mark.line += 1;
            self.pos += 2;
            self.newlines += 1;
        } else if self.is_break_at(0) {
            self.mark.index += 1;
            self.mark.column = 0;
            self.mark.line += 1;
            self.pos += width(self.at(0));
            self.newlines += 1;
        }
        self.mark.offset = self.pos.min(self.buf.len());
    }

    /// Moves over the bytes `pos..end` (whole characters, no line breaks),
    /// counting characters as go-yaml's marks do.
    #[inline]
    fn advance_to(&mut self, end: usize) {
        let run = self.buf.get(self.pos..end).unwrap_or(&[]);
        let chars = run.iter().filter(|&&b| b & 0xC0 != 0x80).count() as i64;
        if run.iter().any(|&b| b != b' ' && b != b'\t') {
            self.newlines = 0;
        }
        self.mark.index += chars;
        self.mark.column += chars;
        self.pos = end;
        self.mark.offset = end.min(self.buf.len());
    }

    /// Appends the current character to `s` and advances.
    #[inline]
    fn read(&mut self, s: &mut String) {
        if !self.is_blank_at(0) {
            self.newlines = 0;
        }
        let w = width(self.at(0));
        if let Some(text) = self.src.get(self.pos..self.pos + w) {
            s.push_str(text);
        }
        self.pos += w;
        self.mark.offset = self.pos.min(self.buf.len());
        self.mark.index += 1;
        self.mark.column += 1;
    }

    /// Appends a line break to `s` (normalised to LF, except LS/PS which are
    /// kept) and advances.
    fn read_line(&mut self, s: &mut String) {
        s.push_str(self.read_break());
    }

    /// Moves over a line break and returns it as a scalar reads it: LF for
    /// CR LF, CR, LF and NEL, LS and PS kept; empty (and no move) if there
    /// is no break here.
    fn read_break(&mut self) -> &'static str {
        let text = match self.at(0) {
            b'\r' if self.at(1) == b'\n' => {
                self.pos += 2;
                self.mark.index += 1;
                "\n"
            }
            b'\r' | b'\n' => {
                self.pos += 1;
                "\n"
            }
            0xC2 if self.at(1) == 0x85 => {
                self.pos += 2;
                "\n"
            }
            0xE2 if self.at(1) == 0x80 && self.at(2) == 0xA8 => {
                self.pos += 3;
                "\u{2028}"
            }
            0xE2 if self.at(1) == 0x80 && self.at(2) == 0xA9 => {
                self.pos += 3;
                "\u{2029}"
            }
            _ => return "",
        };
        self.mark.offset = self.pos.min(self.buf.len());
        self.mark.index += 1;
        self.mark.column = 0;
        self.mark.line += 1;
        self.newlines += 1;
        text
    }

    fn set_error(&mut self, context_mark: Mark, problem: &str) -> RawError {
        let error = RawError::scanner(context_mark, problem, self.mark);
        self.error = Some(error.clone());
        error
    }

    // ----- token queue (shared with the parser) --------------------------

    /// The next unconsumed token, scanning more input as needed.
    // Inlined: the parser peeks four times a token, and all but the first
    // find the token there; only scanning goes through the big function.
    #[inline]
    pub(crate) fn peek(&mut self) -> Result<&mut Token<'a>, RawError> {
        if !self.token_available {
            self.fetch_more_tokens()?;
        }
        match self.tokens.get_mut(self.head) {
            Some(token) => Ok(token),
            None => Err(RawError::parser(
                "did not find expected <stream-end>",
                self.mark,
            )),
        }
    }

    /// Consumes the token returned by the last [`Scanner::peek`].
    pub(crate) fn skip_token(&mut self) {
        self.token_available = false;
        self.tokens_parsed += 1;
        self.head += 1;
        // Keep two consumed tokens: the comment logic may look at them.
        if self.head > 64 && self.head + 2 >= self.tokens.len() {
            let drop = self.head - 2;
            self.tokens.drain(..drop);
            self.head -= drop;
        }
    }

    /// Drops consumed comments from the queue once many have piled up.
    pub(crate) fn compact_comments(&mut self) {
        if self.comments_head > 64 && self.comments_head * 2 > self.comments.len() {
            self.comments.drain(..self.comments_head);
            self.comments_head = 0;
        }
    }

    fn insert_token(&mut self, pos: Option<usize>, token: Token<'a>) {
        match pos {
            None => self.tokens.push(token),
            Some(pos) => {
                let at = (self.head + pos).min(self.tokens.len());
                self.tokens.insert(at, token);
            }
        }
    }

    fn queued(&self) -> usize {
        self.tokens_parsed + (self.tokens.len() - self.head)
    }

    #[inline(never)]
    fn fetch_more_tokens(&mut self) -> Result<(), RawError> {
        if let Some(error) = &self.error {
            return Err(error.clone());
        }
        loop {
            // go-yaml keeps two tokens of lookahead so that foot comments can
            // still be attached to the tokens before them.
            if self.head + 2 < self.tokens.len() {
                match self.simple_keys_by_tok.get(self.tokens_parsed) {
                    None => break,
                    Some(index) => {
                        if !self.simple_key_is_valid(index)? {
                            break;
                        }
                    }
                }
            }
            self.fetch_next_token()?;
        }
        self.token_available = true;
        Ok(())
    }

    fn fetch_next_token(&mut self) -> Result<(), RawError> {
        if !self.stream_start_produced {
            self.fetch_stream_start();
            return Ok(());
        }
        let scan_mark = self.mark;
        self.scan_to_next_token()?;
        self.unroll_indent(self.mark.column, scan_mark);

        if self.is_z() {
            return self.fetch_stream_end();
        }
        if self.mark.column == 0 && self.at(0) == b'%' {
            return self.fetch_directive();
        }
        let c = self.at(0);
        if self.mark.column == 0
            && ((c == b'-' && self.at(1) == b'-' && self.at(2) == b'-')
                || (c == b'.' && self.at(1) == b'.' && self.at(2) == b'.'))
            && self.is_blankz_at(3)
        {
            let kind = if c == b'-' {
                TokenKind::DocumentStart
            } else {
                TokenKind::DocumentEnd
            };
            return self.fetch_document_indicator(kind);
        }

        let mut comment_mark = self.mark;
        if let Some(last) = self.tokens.last()
            && ((self.flow_level == 0 && c == b':') || (self.flow_level > 0 && c == b','))
        {
            // Comments after ':' or ',' belong with the token before.
            comment_mark = last.start;
        }

        self.fetch_token_at(c)?;

        if self
            .tokens
            .last()
            .is_some_and(|last| last.kind == TokenKind::BlockEntry)
        {
            // A lone '-' has no line comment; it becomes a head comment of
            // whatever follows.
            return Ok(());
        }
        self.scan_line_comment(comment_mark)
    }

    fn fetch_token_at(&mut self, c: u8) -> Result<(), RawError> {
        match c {
            b'[' => return self.fetch_flow_collection_start(TokenKind::FlowSequenceStart),
            b'{' => return self.fetch_flow_collection_start(TokenKind::FlowMappingStart),
            b']' => return self.fetch_flow_collection_end(TokenKind::FlowSequenceEnd),
            b'}' => return self.fetch_flow_collection_end(TokenKind::FlowMappingEnd),
            b',' => return self.fetch_flow_entry(),
            _ => {}
        }
        if c == b'-' && self.is_blankz_at(1) {
            return self.fetch_block_entry();
        }
        if c == b'?' && (self.flow_level > 0 || self.is_blankz_at(1)) {
            return self.fetch_key();
        }
        if c == b':' && (self.flow_level > 0 || self.is_blankz_at(1)) {
            return self.fetch_value();
        }
        match c {
            b'*' => return self.fetch_anchor(TokenKind::Alias),
            b'&' => return self.fetch_anchor(TokenKind::Anchor),
            b'!' => return self.fetch_tag(),
            b'|' if self.flow_level == 0 => return self.fetch_block_scalar(true),
            b'>' if self.flow_level == 0 => return self.fetch_block_scalar(false),
            b'\'' => return self.fetch_flow_scalar(true),
            b'"' => return self.fetch_flow_scalar(false),
            _ => {}
        }
        let indicator = is_indicator(c);
        if !(self.is_blankz_at(0) || indicator)
            || (c == b'-' && !self.is_blank_at(1))
            || (self.flow_level == 0 && (c == b'?' || c == b':') && !self.is_blankz_at(1))
        {
            return self.fetch_plain_scalar();
        }
        Err(self.set_error(self.mark, "found character that cannot start any token"))
    }

    // ----- simple keys and indentation ------------------------------------

    fn simple_key_is_valid(&mut self, index: usize) -> Result<bool, RawError> {
        let mark = self.mark;
        let Some(key) = self.simple_keys.get_mut(index) else {
            return Ok(false);
        };
        if !key.possible {
            return Ok(false);
        }
        if key.mark.line < mark.line || key.mark.index + 1024 < mark.index {
            if key.required {
                let key_mark = key.mark;
                return Err(self.set_error(key_mark, "could not find expected ':'"));
            }
            key.possible = false;
            return Ok(false);
        }
        Ok(true)
    }

    fn save_simple_key(&mut self) -> Result<(), RawError> {
        let required = self.flow_level == 0 && self.indent == self.mark.column;
        if self.simple_key_allowed {
            let key = SimpleKey {
                possible: true,
                required,
                token_number: self.queued(),
                mark: self.mark,
            };
            self.remove_simple_key()?;
            let last = self.simple_keys.len() - 1;
            self.simple_keys[last] = key;
            self.simple_keys_by_tok.insert(key.token_number, last);
        }
        Ok(())
    }

    fn remove_simple_key(&mut self) -> Result<(), RawError> {
        let Some(&key) = self.simple_keys.last() else {
            return Ok(());
        };
        if key.possible {
            if key.required {
                return Err(self.set_error(key.mark, "could not find expected ':'"));
            }
            let last = self.simple_keys.len() - 1;
            self.simple_keys[last].possible = false;
            self.simple_keys_by_tok.remove(key.token_number);
        }
        Ok(())
    }

    fn increase_flow_level(&mut self) -> Result<(), RawError> {
        self.simple_keys.push(SimpleKey {
            possible: false,
            required: false,
            token_number: self.queued(),
            mark: self.mark,
        });
        self.flow_level += 1;
        if self.flow_level > MAX_FLOW_LEVEL {
            let mark = self.mark;
            return Err(self.set_error(mark, "exceeded max depth of 10000"));
        }
        Ok(())
    }

    fn decrease_flow_level(&mut self) {
        if self.flow_level > 0 {
            self.flow_level -= 1;
            if let Some(key) = self.simple_keys.pop() {
                self.simple_keys_by_tok.remove(key.token_number);
            }
        }
    }

    fn roll_indent(
        &mut self,
        column: i64,
        number: Option<usize>,
        kind: TokenKind,
        mark: Mark,
    ) -> Result<(), RawError> {
        if self.flow_level > 0 {
            return Ok(());
        }
        if self.indent < column {
            self.indents.push(self.indent);
            self.indent = column;
            if self.indents.len() > MAX_INDENTS {
                let key_mark = self.simple_keys.last().map_or(self.mark, |k| k.mark);
                return Err(self.set_error(key_mark, "exceeded max depth of 10000"));
            }
            let token = Token::new(kind, mark, mark);
            let pos = number.map(|n| n.saturating_sub(self.tokens_parsed));
            self.insert_token(pos, token);
        }
        Ok(())
    }

    fn unroll_indent(&mut self, column: i64, scan_mark: Mark) {
        if self.flow_level > 0 {
            return;
        }
        let mut block_mark = scan_mark;
        block_mark.index -= 1;
        while self.indent > column {
            // Reposition the end token before any following foot comments
            // of parent blocks: search back for comments at the indent of
            // the block that ends now.
            let mut stop_index = block_mark.index;
            for comment in self.comments[self.comments_head..].iter().rev() {
                if comment.end_mark.index < stop_index {
                    break;
                }
                if comment.start_mark.column == self.indent + 1 {
                    block_mark = comment.start_mark;
                }
                stop_index = comment.scan_mark.index;
            }
            self.tokens
                .push(Token::new(TokenKind::BlockEnd, block_mark, block_mark));
            self.indent = self.indents.pop().unwrap_or(-1);
        }
    }

    // ----- fetchers ---------------------------------------------------------

    fn fetch_stream_start(&mut self) {
        self.indent = -1;
        self.simple_keys.push(SimpleKey::default());
        self.simple_key_allowed = true;
        self.stream_start_produced = true;
        let mark = self.mark;
        self.tokens
            .push(Token::new(TokenKind::StreamStart, mark, mark));
    }

    fn fetch_stream_end(&mut self) -> Result<(), RawError> {
        if self.mark.column != 0 {
            self.mark.column = 0;
            self.mark.line += 1;
        }
        let mark = self.mark;
        self.unroll_indent(-1, mark);
        self.remove_simple_key()?;
        self.simple_key_allowed = false;
        self.tokens
            .push(Token::new(TokenKind::StreamEnd, mark, mark));
        Ok(())
    }

    fn fetch_directive(&mut self) -> Result<(), RawError> {
        let mark = self.mark;
        self.unroll_indent(-1, mark);
        self.remove_simple_key()?;
        self.simple_key_allowed = false;
        let token = self.scan_directive()?;
        self.tokens.push(token);
        Ok(())
    }

    fn fetch_document_indicator(&mut self, kind: TokenKind) -> Result<(), RawError> {
        let mark = self.mark;
        self.unroll_indent(-1, mark);
        self.remove_simple_key()?;
        self.simple_key_allowed = false;
        let start = self.mark;
        self.skip();
        self.skip();
        self.skip();
        let end = self.mark;
        self.tokens.push(Token::new(kind, start, end));
        Ok(())
    }

    fn fetch_flow_collection_start(&mut self, kind: TokenKind) -> Result<(), RawError> {
        self.save_simple_key()?;
        self.increase_flow_level()?;
        self.simple_key_allowed = true;
        let start = self.mark;
        self.skip();
        let end = self.mark;
        self.tokens.push(Token::new(kind, start, end));
        Ok(())
    }

    fn fetch_flow_collection_end(&mut self, kind: TokenKind) -> Result<(), RawError> {
        self.remove_simple_key()?;
        self.decrease_flow_level();
        self.simple_key_allowed = false;
        let start = self.mark;
        self.skip();
        let end = self.mark;
        self.tokens.push(Token::new(kind, start, end));
        Ok(())
    }

    fn fetch_flow_entry(&mut self) -> Result<(), RawError> {
        self.remove_simple_key()?;
        self.simple_key_allowed = true;
        let start = self.mark;
        self.skip();
        let end = self.mark;
        self.tokens
            .push(Token::new(TokenKind::FlowEntry, start, end));
        Ok(())
    }

    fn fetch_block_entry(&mut self) -> Result<(), RawError> {
        if self.flow_level == 0 {
            if !self.simple_key_allowed {
                let mark = self.mark;
                return Err(self.set_error(
                    mark,
                    "block sequence entries are not allowed in this context",
                ));
            }
            let mark = self.mark;
            self.roll_indent(mark.column, None, TokenKind::BlockSequenceStart, mark)?;
        }
        self.remove_simple_key()?;
        self.simple_key_allowed = true;
        let start = self.mark;
        self.skip();
        let end = self.mark;
        self.tokens
            .push(Token::new(TokenKind::BlockEntry, start, end));
        Ok(())
    }

    fn fetch_key(&mut self) -> Result<(), RawError> {
        if self.flow_level == 0 {
            if !self.simple_key_allowed {
                let mark = self.mark;
                return Err(self.set_error(mark, "mapping keys are not allowed in this context"));
            }
            let mark = self.mark;
            self.roll_indent(mark.column, None, TokenKind::BlockMappingStart, mark)?;
        }
        self.remove_simple_key()?;
        self.simple_key_allowed = self.flow_level == 0;
        let start = self.mark;
        self.skip();
        let end = self.mark;
        self.tokens.push(Token::new(TokenKind::Key, start, end));
        Ok(())
    }

    fn fetch_value(&mut self) -> Result<(), RawError> {
        let last = self.simple_keys.len() - 1;
        if self.simple_key_is_valid(last)? {
            let key = self.simple_keys[last];
            let pos = key.token_number.saturating_sub(self.tokens_parsed);
            self.insert_token(Some(pos), Token::new(TokenKind::Key, key.mark, key.mark));
            self.roll_indent(
                key.mark.column,
                Some(key.token_number),
                TokenKind::BlockMappingStart,
                key.mark,
            )?;
            self.simple_keys[last].possible = false;
            self.simple_keys_by_tok.remove(key.token_number);
            self.simple_key_allowed = false;
        } else {
            if self.flow_level == 0 {
                if !self.simple_key_allowed {
                    let mark = self.mark;
                    return Err(
                        self.set_error(mark, "mapping values are not allowed in this context")
                    );
                }
                let mark = self.mark;
                self.roll_indent(mark.column, None, TokenKind::BlockMappingStart, mark)?;
            }
            self.simple_key_allowed = self.flow_level == 0;
        }
        let start = self.mark;
        self.skip();
        let end = self.mark;
        self.tokens.push(Token::new(TokenKind::Value, start, end));
        Ok(())
    }

    fn fetch_anchor(&mut self, kind: TokenKind) -> Result<(), RawError> {
        self.save_simple_key()?;
        self.simple_key_allowed = false;
        let token = self.scan_anchor(kind)?;
        self.tokens.push(token);
        Ok(())
    }

    fn fetch_tag(&mut self) -> Result<(), RawError> {
        self.save_simple_key()?;
        self.simple_key_allowed = false;
        let token = self.scan_tag()?;
        self.tokens.push(token);
        Ok(())
    }

    fn fetch_block_scalar(&mut self, literal: bool) -> Result<(), RawError> {
        self.remove_simple_key()?;
        self.simple_key_allowed = true;
        let token = self.scan_block_scalar(literal)?;
        self.tokens.push(token);
        Ok(())
    }

    fn fetch_flow_scalar(&mut self, single: bool) -> Result<(), RawError> {
        self.save_simple_key()?;
        self.simple_key_allowed = false;
        let token = self.scan_flow_scalar(single)?;
        self.tokens.push(token);
        Ok(())
    }

    fn fetch_plain_scalar(&mut self) -> Result<(), RawError> {
        self.save_simple_key()?;
        self.simple_key_allowed = false;
        let token = self.scan_plain_scalar()?;
        self.tokens.push(token);
        Ok(())
    }

    // ----- whitespace and comments -----------------------------------------

    fn scan_to_next_token(&mut self) -> Result<(), RawError> {
        let scan_mark = self.mark;
        loop {
            if self.mark.column == 0 && self.is_bom() {
                self.skip();
            }
            // Tabs are allowed in flow context and after the start of a line
            // where no simple key may start.
            let tabs = self.flow_level > 0 || !self.simple_key_allowed;
            let blanks = self
                .buf
                .get(self.pos..)
                .unwrap_or_default()
                .iter()
                .take_while(|&&b| b == b' ' || (tabs && b == b'\t'))
                .count();
            self.skip_blanks(blanks);

            // A line comment right after a lone '-' that starts a sequence
            // is really the head of the entry's content:
            //   - # The comment
            //     - Some data
            if self.comments.len() > self.comments_head && self.tokens.len() > 1 {
                let n = self.tokens.len();
                let kind_a = self.tokens[n - 2].kind;
                let kind_b = self.tokens[n - 1].kind;
                let at_break = self.is_break_at(0);
                let mark = self.mark;
                if let Some(comment) = self.comments.last_mut()
                    && kind_a == TokenKind::BlockSequenceStart
                    && kind_b == TokenKind::BlockEntry
                    && !comment.line.is_empty()
                    && !at_break
                {
                    // If it was on the line before, it heads what follows;
                    // otherwise it stays in place, heading the entry.
                    comment.head = std::mem::take(&mut comment.line);
                    if comment.start_mark.line == mark.line - 1 {
                        comment.token_mark = mark;
                    }
                }
            }

            if self.at(0) == b'#' {
                self.scan_comments(scan_mark)?;
            }

            if self.is_break_at(0) {
                self.skip_line();
                if self.flow_level == 0 {
                    self.simple_key_allowed = true;
                }
            } else {
                break;
            }
        }
        Ok(())
    }

    fn scan_line_comment(&mut self, token_mark: Mark) -> Result<(), RawError> {
        if self.newlines > 0 {
            return Ok(());
        }
        let mut start_mark = Mark::default();
        let mut text = String::new();
        let mut peek = 0;
        while peek < 512 {
            if self.is_blank_at(peek) {
                peek += 1;
                continue;
            }
            if self.at(peek) == b'#' {
                let seen = self.mark.index + peek as i64;
                loop {
                    if self.is_breakz_at(0) {
                        if self.mark.index >= seen || self.is_z() {
                            break;
                        }
                        self.skip_line();
                    } else if self.mark.index >= seen {
                        if text.is_empty() {
                            start_mark = self.mark;
                        }
                        self.read(&mut text);
                    } else {
                        self.skip();
                    }
                }
            }
            break;
        }
        if !text.is_empty() {
            self.comments.push(Comment {
                token_mark,
                start_mark,
                line: text,
                ..Comment::default()
            });
        }
        Ok(())
    }

    fn scan_comments(&mut self, mut scan_mark: Mark) -> Result<(), RawError> {
        let n = self.tokens.len();
        let Some(mut token) = self.tokens.last() else {
            return Ok(());
        };
        if token.kind == TokenKind::FlowEntry && n > 1 {
            token = &self.tokens[n - 2];
        }
        let token_kind = token.kind;
        let mut token_mark = token.start;
        let mut start_mark = Mark::default();
        let mut next_indent = self.indent.max(0);

        let mut recent_empty = false;
        let mut first_empty = self.newlines <= 1;

        let mut line = self.mark.line;
        let mut column = self.mark.column;

        let mut text = String::new();

        // The line where a comment must start to still be a foot of the
        // prior content: the line below it.
        let mut foot_line = -1;
        if scan_mark.line > 0 {
            foot_line = self.mark.line - self.newlines + 1;
            if self.newlines == 0 && self.mark.column > 1 {
                foot_line += 1;
            }
        }

        let mut peek: usize = 0;
        while peek < 512 {
            column += 1;
            if self.is_blank_at(peek) {
                peek += 1;
                continue;
            }
            let c = self.at(peek);
            let close_flow = self.flow_level > 0 && (c == b']' || c == b'}');
            if close_flow || self.is_breakz_at(peek) {
                // A line break or terminator.
                if close_flow || !recent_empty {
                    if close_flow
                        || first_empty
                            && (start_mark.line == foot_line && token_kind != TokenKind::Value
                                || start_mark.column - 1 < next_indent)
                    {
                        // The first empty line after a comment block that
                        // directly follows content: that block is a foot of
                        // the prior token, not a head of the next one. The
                        // last comment inside a flow scope is a foot too.
                        if !text.is_empty() {
                            if start_mark.column - 1 < next_indent {
                                // Dedented: unrelated to the prior token.
                                token_mark = start_mark;
                            }
                            let end_mark = self.peek_mark(peek, line, column);
                            self.comments.push(Comment {
                                scan_mark,
                                token_mark,
                                start_mark,
                                end_mark,
                                foot: std::mem::take(&mut text),
                                ..Comment::default()
                            });
                            scan_mark = end_mark;
                            token_mark = scan_mark;
                        }
                    } else if !text.is_empty() && self.at(peek) != 0 {
                        text.push('\n');
                    }
                }
                if !self.is_break_at(peek) {
                    break;
                }
                first_empty = false;
                recent_empty = true;
                column = 0;
                line += 1;
                peek += 1;
                continue;
            }

            if !text.is_empty()
                && (close_flow || column - 1 < next_indent && column != start_mark.column)
            {
                // A comment at another indentation is a foot of the
                // preceding data rather than a head of the upcoming one.
                let end_mark = self.peek_mark(peek, line, column);
                self.comments.push(Comment {
                    scan_mark,
                    token_mark,
                    start_mark,
                    end_mark,
                    foot: std::mem::take(&mut text),
                    ..Comment::default()
                });
                scan_mark = end_mark;
                token_mark = scan_mark;
            }

            if self.at(peek) != b'#' {
                break;
            }

            if text.is_empty() {
                start_mark = self.peek_mark(peek, line, column);
            } else {
                text.push('\n');
            }

            recent_empty = false;

            // Consume up to the end of this comment line.
            let seen = self.mark.index + peek as i64;
            loop {
                if self.is_breakz_at(0) {
                    if self.mark.index >= seen || self.is_z() {
                        break;
                    }
                    self.skip_line();
                } else if self.mark.index >= seen {
                    self.read(&mut text);
                } else {
                    self.skip();
                }
            }

            // go-yaml resets peek to 0 and then its loop increments it, so
            // the line break after the comment is stepped over.
            column = 0;
            line = self.mark.line;
            next_indent = self.indent.max(0);
            peek = 1;
        }

        if !text.is_empty() {
            let end_mark = self.peek_mark(peek, line, column);
            let end_mark = Mark {
                index: end_mark.index - 1,
                ..end_mark
            };
            self.comments.push(Comment {
                scan_mark,
                token_mark: start_mark,
                start_mark,
                end_mark,
                head: text,
                ..Comment::default()
            });
        }
        Ok(())
    }

    /// go-yaml's ad hoc mark `{mark.index + peek, line, column}`: the index
    /// mixes characters and bytes exactly as go-yaml does.
    fn peek_mark(&self, peek: usize, line: i64, column: i64) -> Mark {
        Mark {
            index: self.mark.index + peek as i64,
            line,
            column,
            offset: (self.pos + peek).min(self.buf.len()),
        }
    }

    // ----- directives ---------------------------------------------------------

    fn scan_directive(&mut self) -> Result<Token<'a>, RawError> {
        let start = self.mark;
        self.skip();
        let name = self.scan_directive_name(start)?;
        let mut token;
        if name == "YAML" {
            let (major, minor) = self.scan_version_directive_value(start)?;
            token = Token::new(TokenKind::VersionDirective, start, self.mark);
            token.major = major;
            token.minor = minor;
        } else if name == "TAG" {
            let (handle, prefix) = self.scan_tag_directive_value(start)?;
            token = Token::new(TokenKind::TagDirective, start, self.mark);
            token.value = Cow::Owned(handle);
            token.suffix = prefix;
        } else {
            return Err(self.set_error(start, "found unknown directive name"));
        }
        while self.is_blank_at(0) {
            self.skip();
        }
        if self.at(0) == b'#' {
            // go-yaml drops comments on directive lines.
            while !self.is_breakz_at(0) {
                self.skip();
            }
        }
        if !self.is_breakz_at(0) {
            return Err(self.set_error(start, "did not find expected comment or line break"));
        }
        if self.is_break_at(0) {
            self.skip_line();
        }
        Ok(token)
    }

    fn scan_directive_name(&mut self, start: Mark) -> Result<String, RawError> {
        let mut name = String::new();
        while is_alpha_byte(self.at(0)) {
            self.read(&mut name);
        }
        if name.is_empty() {
            return Err(self.set_error(start, "could not find expected directive name"));
        }
        if !self.is_blankz_at(0) {
            return Err(self.set_error(start, "found unexpected non-alphabetical character"));
        }
        Ok(name)
    }

    fn scan_version_directive_value(&mut self, start: Mark) -> Result<(i8, i8), RawError> {
        while self.is_blank_at(0) {
            self.skip();
        }
        let major = self.scan_version_directive_number(start)?;
        if self.at(0) != b'.' {
            return Err(self.set_error(start, "did not find expected digit or '.' character"));
        }
        self.skip();
        let minor = self.scan_version_directive_number(start)?;
        Ok((major, minor))
    }

    fn scan_version_directive_number(&mut self, start: Mark) -> Result<i8, RawError> {
        let mut value: i8 = 0;
        let mut length = 0;
        while self.at(0).is_ascii_digit() {
            length += 1;
            if length > 2 {
                return Err(self.set_error(start, "found extremely long version number"));
            }
            value = value * 10 + (self.at(0) - b'0') as i8;
            self.skip();
        }
        if length == 0 {
            return Err(self.set_error(start, "did not find expected version number"));
        }
        Ok(value)
    }

    fn scan_tag_directive_value(&mut self, start: Mark) -> Result<(String, String), RawError> {
        while self.is_blank_at(0) {
            self.skip();
        }
        let handle = self.scan_tag_handle(true, start)?;
        if !self.is_blank_at(0) {
            return Err(self.set_error(start, "did not find expected whitespace"));
        }
        while self.is_blank_at(0) {
            self.skip();
        }
        let prefix = self.scan_tag_uri(true, "", start)?;
        if !self.is_blankz_at(0) {
            return Err(self.set_error(start, "did not find expected whitespace or line break"));
        }
        Ok((handle, prefix))
    }

    // ----- anchors and tags -------------------------------------------------

    fn scan_anchor(&mut self, kind: TokenKind) -> Result<Token<'a>, RawError> {
        let start = self.mark;
        self.skip();
        let name_start = self.pos;
        while is_alpha_byte(self.at(0)) {
            self.skip();
        }
        let name = self.src.get(name_start..self.pos).unwrap_or("").to_owned();
        let end = self.mark;
        let c = self.at(0);
        if name.is_empty()
            || !(self.is_blankz_at(0)
                || matches!(c, b'?' | b':' | b',' | b']' | b'}' | b'%' | b'@' | b'`'))
        {
            let problem = "did not find expected alphabetic or numeric character";
            return Err(self.set_error(start, problem));
        }
        let mut token = Token::new(kind, start, end);
        token.value = Cow::Owned(name);
        Ok(token)
    }

    fn scan_tag(&mut self) -> Result<Token<'a>, RawError> {
        let start = self.mark;
        let handle;
        let suffix;
        if self.at(1) == b'<' {
            self.skip();
            self.skip();
            suffix = self.scan_tag_uri(false, "", start)?;
            if self.at(0) != b'>' {
                return Err(self.set_error(start, "did not find the expected '>'"));
            }
            self.skip();
            handle = String::new();
        } else {
            let first = self.scan_tag_handle(false, start)?;
            if first.len() > 1 && first.starts_with('!') && first.ends_with('!') {
                handle = first;
                suffix = self.scan_tag_uri(false, "", start)?;
            } else {
                let rest = self.scan_tag_uri(false, &first, start)?;
                if rest.is_empty() {
                    // The bare '!' tag.
                    handle = String::new();
                    suffix = first;
                } else {
                    handle = "!".to_owned();
                    suffix = rest;
                }
            }
        }
        if !self.is_blankz_at(0) {
            return Err(self.set_error(start, "did not find expected whitespace or line break"));
        }
        let mut token = Token::new(TokenKind::Tag, start, self.mark);
        token.value = Cow::Owned(handle);
        token.suffix = suffix;
        Ok(token)
    }

    fn scan_tag_handle(&mut self, directive: bool, start: Mark) -> Result<String, RawError> {
        if self.at(0) != b'!' {
            return Err(self.set_error(start, "did not find expected '!'"));
        }
        let mut s = String::new();
        self.read(&mut s);
        while is_alpha_byte(self.at(0)) {
            self.read(&mut s);
        }
        if self.at(0) == b'!' {
            self.read(&mut s);
        } else if directive && s != "!" {
            return Err(self.set_error(start, "did not find expected '!'"));
        }
        Ok(s)
    }

    fn scan_tag_uri(
        &mut self,
        directive: bool,
        head: &str,
        start: Mark,
    ) -> Result<String, RawError> {
        let mut bytes: Vec<u8> = Vec::new();
        let mut has_tag = !head.is_empty();
        if head.len() > 1 {
            bytes.extend_from_slice(&head.as_bytes()[1..]);
        }
        loop {
            let c = self.at(0);
            let uri_char = is_alpha_byte(c)
                || matches!(
                    c,
                    b';' | b'/'
                        | b'?'
                        | b':'
                        | b'@'
                        | b'&'
                        | b'='
                        | b'+'
                        | b'$'
                        | b','
                        | b'.'
                        | b'!'
                        | b'~'
                        | b'*'
                        | b'\''
                        | b'('
                        | b')'
                        | b'['
                        | b']'
                        | b'%'
                );
            if !uri_char {
                break;
            }
            if c == b'%' {
                self.scan_uri_escapes(directive, start, &mut bytes)?;
            } else {
                let w = width(c);
                if let Some(slice) = self.buf.get(self.pos..self.pos + w) {
                    bytes.extend_from_slice(slice);
                }
                self.skip();
            }
            has_tag = true;
        }
        if !has_tag {
            return Err(self.set_error(start, "did not find expected tag URI"));
        }
        Ok(String::from_utf8_lossy(&bytes).into_owned())
    }

    fn scan_uri_escapes(
        &mut self,
        _directive: bool,
        start: Mark,
        bytes: &mut Vec<u8>,
    ) -> Result<(), RawError> {
        let mut w: usize = 1024;
        while w > 0 {
            if !(self.at(0) == b'%'
                && self.at(1).is_ascii_hexdigit()
                && self.at(2).is_ascii_hexdigit())
            {
                return Err(self.set_error(start, "did not find URI escaped octet"));
            }
            let octet = ((hex_value(self.at(1)) << 4) + hex_value(self.at(2))) as u8;
            if w == 1024 {
                w = match octet {
                    o if o & 0x80 == 0 => 1,
                    o if o & 0xE0 == 0xC0 => 2,
                    o if o & 0xF0 == 0xE0 => 3,
                    o if o & 0xF8 == 0xF0 => 4,
                    _ => {
                        return Err(self.set_error(start, "found an incorrect leading UTF-8 octet"));
                    }
                };
            } else if octet & 0xC0 != 0x80 {
                return Err(self.set_error(start, "found an incorrect trailing UTF-8 octet"));
            }
            bytes.push(octet);
            self.skip();
            self.skip();
            self.skip();
            w -= 1;
        }
        Ok(())
    }

    // ----- scalars -----------------------------------------------------------

    fn scan_block_scalar(&mut self, literal: bool) -> Result<Token<'a>, RawError> {
        let start = self.mark;
        self.skip();

        let mut chomping = 0i32;
        let mut increment = 0i64;
        if self.at(0) == b'+' || self.at(0) == b'-' {
            chomping = if self.at(0) == b'+' { 1 } else { -1 };
            self.skip();
            if self.at(0).is_ascii_digit() {
                if self.at(0) == b'0' {
                    return Err(self.set_error(start, "found an indentation indicator equal to 0"));
                }
                increment = i64::from(self.at(0) - b'0');
                self.skip();
            }
        } else if self.at(0).is_ascii_digit() {
            if self.at(0) == b'0' {
                return Err(self.set_error(start, "found an indentation indicator equal to 0"));
            }
            increment = i64::from(self.at(0) - b'0');
            self.skip();
            if self.at(0) == b'+' || self.at(0) == b'-' {
                chomping = if self.at(0) == b'+' { 1 } else { -1 };
                self.skip();
            }
        }

        while self.is_blank_at(0) {
            self.skip();
        }
        if self.at(0) == b'#' {
            self.scan_line_comment(start)?;
            while !self.is_breakz_at(0) {
                self.skip();
            }
        }
        if !self.is_breakz_at(0) {
            return Err(self.set_error(start, "did not find expected comment or line break"));
        }
        if self.is_break_at(0) {
            self.skip_line();
        }

        let mut end = self.mark;
        let mut indent = 0i64;
        if increment > 0 {
            indent = if self.indent >= 0 {
                self.indent + increment
            } else {
                increment
            };
        }

        let mut s = String::new();
        let mut leading_break = String::new();
        let mut trailing_breaks = String::new();
        self.scan_block_scalar_breaks(&mut indent, &mut trailing_breaks, start, &mut end)?;

        let mut leading_blank = false;
        while self.mark.column == indent && !self.is_z() {
            let trailing_blank = self.is_blank_at(0);
            if !literal && !leading_blank && !trailing_blank && leading_break.starts_with('\n') {
                if trailing_breaks.is_empty() {
                    s.push(' ');
                }
            } else {
                s.push_str(&leading_break);
            }
            leading_break.clear();
            s.push_str(&trailing_breaks);
            trailing_breaks.clear();

            leading_blank = self.is_blank_at(0);

            let line_start = self.pos;
            let rest = self.buf.get(line_start..).unwrap_or(&[]);
            let mut line_end = line_start;
            for (i, &b) in rest.iter().enumerate() {
                let at_break = match b {
                    0 | b'\r' | b'\n' => true,
                    0xC2 => rest.get(i + 1) == Some(&0x85),
                    0xE2 => {
                        rest.get(i + 1) == Some(&0x80)
                            && matches!(rest.get(i + 2), Some(0xA8 | 0xA9))
                    }
                    _ => false,
                };
                if at_break {
                    break;
                }
                line_end = line_start + i + 1;
            }
            self.advance_to(line_end);
            if let Some(text) = self.src.get(line_start..self.pos) {
                s.push_str(text);
            }

            self.read_line(&mut leading_break);
            self.scan_block_scalar_breaks(&mut indent, &mut trailing_breaks, start, &mut end)?;
        }

        if chomping != -1 {
            s.push_str(&leading_break);
        }
        if chomping == 1 {
            s.push_str(&trailing_breaks);
        }

        let mut token = Token::new(TokenKind::Scalar, start, end);
        token.value = Cow::Owned(s);
        token.style = if literal {
            ScalarStyle::Literal
        } else {
            ScalarStyle::Folded
        };
        Ok(token)
    }

    fn scan_block_scalar_breaks(
        &mut self,
        indent: &mut i64,
        breaks: &mut String,
        start: Mark,
        end: &mut Mark,
    ) -> Result<(), RawError> {
        *end = self.mark;
        let mut max_indent = 0i64;
        loop {
            while (*indent == 0 || self.mark.column < *indent) && self.at(0) == b' ' {
                self.skip();
            }
            if self.mark.column > max_indent {
                max_indent = self.mark.column;
            }
            if (*indent == 0 || self.mark.column < *indent) && self.at(0) == b'\t' {
                let problem = "found a tab character where an indentation space is expected";
                return Err(self.set_error(start, problem));
            }
            if !self.is_break_at(0) {
                break;
            }
            self.read_line(breaks);
            *end = self.mark;
        }
        if *indent == 0 {
            *indent = max_indent;
            if *indent < self.indent + 1 {
                *indent = self.indent + 1;
            }
            if *indent < 1 {
                *indent = 1;
            }
        }
        Ok(())
    }

    fn scan_flow_scalar(&mut self, single: bool) -> Result<Token<'a>, RawError> {
        let start = self.mark;
        self.skip();

        let mut s = SourceText::new(self.src);
        let mut leading_break = String::new();
        let mut trailing_breaks = String::new();
        let mut whitespaces = String::new();
        // Where `whitespaces` starts in the input.
        let mut whitespaces_at = 0;
        loop {
            if self.mark.column == 0
                && ((self.at(0) == b'-' && self.at(1) == b'-' && self.at(2) == b'-')
                    || (self.at(0) == b'.' && self.at(1) == b'.' && self.at(2) == b'.'))
                && self.is_blankz_at(3)
            {
                return Err(self.set_error(start, "found unexpected document indicator"));
            }
            if self.is_z() {
                return Err(self.set_error(start, "found unexpected end of stream"));
            }

            let mut leading_blanks = false;
            while !self.is_blankz_at(0) {
                let c = self.at(0);
                if single && c == b'\'' && self.at(1) == b'\'' {
                    s.push_str("'");
                    self.skip();
                    self.skip();
                } else if (single && c == b'\'') || (!single && c == b'"') {
                    // The closing quote.
                    break;
                } else if !single && c == b'\\' && self.is_break_at(1) {
                    self.skip();
                    self.skip_line();
                    leading_blanks = true;
                    break;
                } else if !single && c == b'\\' {
                    let mut code_length = 0usize;
                    match self.at(1) {
                        b'0' => s.push_char('\0'),
                        b'a' => s.push_char('\x07'),
                        b'b' => s.push_char('\x08'),
                        b't' | b'\t' => s.push_char('\t'),
                        b'n' => s.push_char('\n'),
                        b'v' => s.push_char('\x0B'),
                        b'f' => s.push_char('\x0C'),
                        b'r' => s.push_char('\r'),
                        b'e' => s.push_char('\x1B'),
                        b' ' => s.push_char(' '),
                        b'"' => s.push_char('"'),
                        b'\'' => s.push_char('\''),
                        b'\\' => s.push_char('\\'),
                        b'N' => s.push_char('\u{85}'),
                        b'_' => s.push_char('\u{A0}'),
                        b'L' => s.push_char('\u{2028}'),
                        b'P' => s.push_char('\u{2029}'),
                        b'x' => code_length = 2,
                        b'u' => code_length = 4,
                        b'U' => code_length = 8,
                        _ => {
                            return Err(self.set_error(start, "found unknown escape character"));
                        }
                    }
                    self.skip();
                    self.skip();
                    if code_length > 0 {
                        let mut value: i64 = 0;
                        for k in 0..code_length {
                            if !self.at(k).is_ascii_hexdigit() {
                                let problem = "did not find expected hexadecimal number";
                                return Err(self.set_error(start, problem));
                            }
                            value = (value << 4) + hex_value(self.at(k));
                        }
                        let ch = u32::try_from(value).ok().and_then(char::from_u32);
                        match ch {
                            Some(ch) => s.push_char(ch),
                            None => {
                                let problem = "found invalid Unicode character escape code";
                                return Err(self.set_error(start, problem));
                            }
                        }
                        for _ in 0..code_length {
                            self.skip();
                        }
                    }
                } else {
                    let from = self.pos;
                    self.skip();
                    s.push_source(from, self.pos);
                }
            }

            if single {
                if self.at(0) == b'\'' {
                    break;
                }
            } else if self.at(0) == b'"' {
                break;
            }

            while self.is_blank_at(0) || self.is_break_at(0) {
                if self.is_blank_at(0) {
                    if leading_blanks {
                        self.skip();
                    } else {
                        if whitespaces.is_empty() {
                            whitespaces_at = self.pos;
                        }
                        self.read(&mut whitespaces);
                    }
                } else if !leading_blanks {
                    whitespaces.clear();
                    self.read_line(&mut leading_break);
                    leading_blanks = true;
                } else {
                    self.read_line(&mut trailing_breaks);
                }
            }

            if leading_blanks {
                if leading_break.starts_with('\n') {
                    if trailing_breaks.is_empty() {
                        s.push_str(" ");
                    } else {
                        s.push_str(&trailing_breaks);
                    }
                } else {
                    s.push_str(&leading_break);
                    s.push_str(&trailing_breaks);
                }
                trailing_breaks.clear();
                leading_break.clear();
            } else {
                // The blanks were read from the input just before here.
                s.push_source(whitespaces_at, whitespaces_at + whitespaces.len());
                whitespaces.clear();
            }
        }

        self.skip();
        let end = self.mark;
        let mut token = Token::new(TokenKind::Scalar, start, end);
        token.value = s.into_cow();
        token.style = if single {
            ScalarStyle::SingleQuoted
        } else {
            ScalarStyle::DoubleQuoted
        };
        Ok(token)
    }

    fn scan_plain_scalar(&mut self) -> Result<Token<'a>, RawError> {
        let mut s = SourceText::new(self.src);
        // The first line break after the text (a static: most scalars end
        // at one, and a `String` cost an allocation each).
        let mut leading_break: &'static str = "";
        let mut trailing_breaks = String::new();
        // The blanks after the text on its line: where they start in the
        // input, and their length (blanks are one byte each).
        let mut whitespaces = 0;
        let mut whitespaces_at = 0;
        let mut leading_blanks = false;
        let indent = self.indent + 1;

        let start = self.mark;
        let mut end = self.mark;

        loop {
            if self.mark.column == 0
                && ((self.at(0) == b'-' && self.at(1) == b'-' && self.at(2) == b'-')
                    || (self.at(0) == b'.' && self.at(1) == b'.' && self.at(2) == b'.'))
                && self.is_blankz_at(3)
            {
                break;
            }
            if self.at(0) == b'#' {
                break;
            }

            while !self.is_blankz_at(0) {
                let c = self.at(0);
                if (c == b':' && self.is_blankz_at(1))
                    || (self.flow_level > 0 && matches!(c, b',' | b'?' | b'[' | b']' | b'{' | b'}'))
                {
                    break;
                }
                if leading_blanks || whitespaces > 0 {
                    if leading_blanks {
                        if leading_break.starts_with('\n') {
                            if trailing_breaks.is_empty() {
                                s.push_str(" ");
                            } else {
                                s.push_str(&trailing_breaks);
                            }
                        } else {
                            s.push_str(leading_break);
                            s.push_str(&trailing_breaks);
                        }
                        trailing_breaks.clear();
                        leading_break = "";
                        leading_blanks = false;
                    } else {
                        // The blanks were read from the input just before here.
                        s.push_source(whitespaces_at, whitespaces_at + whitespaces);
                        whitespaces = 0;
                    }
                }
                // Copy a run of ordinary ASCII characters at once; anything
                // else (':', flow indicators, non-ASCII) goes one by one.
                let rest = self.buf.get(self.pos..).unwrap_or(&[]);
                let run = rest
                    .iter()
                    .skip(1)
                    .take_while(|&&b| {
                        b > b' '
                            && b < 0x7F
                            && b != b':'
                            && !(self.flow_level > 0
                                && matches!(b, b',' | b'?' | b'[' | b']' | b'{' | b'}'))
                    })
                    .count();
                let from = self.pos;
                if c < 0x80 && run > 0 {
                    self.advance_to(from + 1 + run);
                } else {
                    self.skip();
                }
                s.push_source(from, self.pos);
                end = self.mark;
            }

            if !(self.is_blank_at(0) || self.is_break_at(0)) {
                break;
            }

            while self.is_blank_at(0) || self.is_break_at(0) {
                if self.is_blank_at(0) {
                    if leading_blanks && self.mark.column < indent && self.at(0) == b'\t' {
                        let problem = "found a tab character that violates indentation";
                        return Err(self.set_error(start, problem));
                    }
                    // Spaces a run at a time (indentation); a tab alone, for
                    // the check above.
                    let run = if self.at(0) == b' ' {
                        let rest = self.buf.get(self.pos..).unwrap_or_default();
                        rest.iter().take_while(|&&b| b == b' ').count()
                    } else {
                        1
                    };
                    if !leading_blanks {
                        if whitespaces == 0 {
                            whitespaces_at = self.pos;
                        }
                        whitespaces += run;
                    }
                    self.skip_blanks(run);
                } else if !leading_blanks {
                    whitespaces = 0;
                    leading_break = self.read_break();
                    leading_blanks = true;
                } else {
                    self.read_line(&mut trailing_breaks);
                }
            }

            if self.flow_level == 0 && self.mark.column < indent {
                break;
            }
        }

        let mut token = Token::new(TokenKind::Scalar, start, end);
        token.value = s.into_cow();
        token.style = ScalarStyle::Plain;
        if leading_blanks {
            self.simple_key_allowed = true;
        }
        Ok(token)
    }
}

/// A scalar's text as it is scanned: a slice of the input while every
/// piece appended is the input right after the previous one (a plain
/// scalar on one line), an owned copy from the first piece that is not
/// (folded line breaks).
struct SourceText<'a> {
    src: &'a str,
    start: usize,
    end: usize,
    owned: Option<String>,
}

impl<'a> SourceText<'a> {
    fn new(src: &'a str) -> SourceText<'a> {
        SourceText {
            src,
            start: 0,
            end: 0,
            owned: None,
        }
    }

    /// Appends the input's bytes `from..to` (nothing if that is not a
    /// slice of it).
    fn push_source(&mut self, from: usize, to: usize) {
        let Some(text) = self.src.get(from..to) else {
            return;
        };
        if self.owned.is_none() {
            if self.start == self.end {
                (self.start, self.end) = (from, to);
                return;
            }
            if from == self.end {
                self.end = to;
                return;
            }
        }
        self.owned().push_str(text);
    }

    /// Appends text that is not the input's next bytes.
    fn push_str(&mut self, text: &str) {
        self.owned().push_str(text);
    }

    /// Appends a character that is not the input's next bytes (an escape).
    fn push_char(&mut self, c: char) {
        self.owned().push(c);
    }

    fn owned(&mut self) -> &mut String {
        let (src, start, end) = (self.src, self.start, self.end);
        self.owned
            .get_or_insert_with(|| src.get(start..end).unwrap_or_default().to_owned())
    }

    fn into_cow(self) -> Cow<'a, str> {
        match self.owned {
            Some(owned) => Cow::Owned(owned),
            None => Cow::Borrowed(self.src.get(self.start..self.end).unwrap_or_default()),
        }
    }
}

/// YAML's indicator characters: a plain scalar may not start with one
/// (except `-`, `?` and `:` before a non-blank).
pub(crate) fn is_indicator(c: u8) -> bool {
    matches!(
        c,
        b'-' | b'?'
            | b':'
            | b','
            | b'['
            | b']'
            | b'{'
            | b'}'
            | b'#'
            | b'&'
            | b'*'
            | b'!'
            | b'|'
            | b'>'
            | b'\''
            | b'"'
            | b'%'
            | b'@'
            | b'`'
    )
}

#[cfg(test)]
mod tests {
    use super::{Scanner, TokenKind};

    fn kinds(src: &str) -> Vec<TokenKind> {
        let mut scanner = Scanner::new(src);
        let mut out = Vec::new();
        while let Ok(token) = scanner.peek() {
            let kind = token.kind;
            out.push(kind);
            scanner.skip_token();
            if kind == TokenKind::StreamEnd {
                break;
            }
        }
        out
    }

    #[test]
    fn simple_keys_become_key_tokens_with_mapping_start() {
        use TokenKind::*;
        assert_eq!(
            kinds("a: 1\nb:\n- x\n"),
            vec![
                StreamStart,
                BlockMappingStart,
                Key,
                Scalar,
                Value,
                Scalar,
                Key,
                Scalar,
                Value,
                BlockEntry,
                Scalar,
                BlockEnd,
                StreamEnd
            ]
        );
    }

    #[test]
    fn comments_are_queued_not_tokens() {
        let mut scanner = Scanner::new("# head\na: 1 # line\n# foot\n");
        while scanner
            .peek()
            .map(|t| t.kind != TokenKind::StreamEnd)
            .unwrap_or(false)
        {
            scanner.skip_token();
        }
        let texts: Vec<(&str, &str, &str)> = scanner
            .comments
            .iter()
            .map(|c| (c.head.as_str(), c.line.as_str(), c.foot.as_str()))
            .collect();
        assert_eq!(
            texts,
            vec![("# head", "", ""), ("", "# line", ""), ("", "", "# foot")]
        );
    }

    #[test]
    fn plain_scalars_fold_and_quoted_scalars_unescape() {
        let mut scanner =
            Scanner::new("a: one\n  two\n\n  three\nb: \"x\\ty\\u00e9\"\nc: 'it''s'\n");
        let mut values = Vec::new();
        while let Ok(token) = scanner.peek() {
            if token.kind == TokenKind::StreamEnd {
                break;
            }
            if token.kind == TokenKind::Scalar {
                values.push(token.value.clone());
            }
            scanner.skip_token();
        }
        assert_eq!(
            values,
            vec!["a", "one two\nthree", "b", "x\ty\u{e9}", "c", "it's"]
        );
    }

    #[test]
    fn the_first_byte_outside_plain_ascii_is_found_in_and_after_blocks() {
        for len in [0, 1, 31, 32, 33, 64, 70] {
            let text = vec![b'a'; len];
            assert_eq!(super::first_non_plain(&text), None);
            for at in 0..len {
                for odd in [0x00, 0x1F, 0x7F, 0x80, 0xC2, 0xFF] {
                    let mut text = text.clone();
                    text[at] = odd;
                    if at + 1 < len {
                        text[at + 1] = 0x01;
                    }
                    assert_eq!(super::first_non_plain(&text), Some(at), "{len} {at} {odd}");
                }
            }
        }
        assert_eq!(super::first_non_plain(b" ~\t\r\n"), None);
    }

    #[test]
    fn control_characters_are_rejected_with_a_position() {
        let error = Scanner::check_input("a: b\nc: \u{7}\n").unwrap_err();
        assert_eq!(error.problem, "control characters are not allowed");
        assert_eq!((error.problem_mark.line, error.problem_mark.column), (1, 3));
        assert!(Scanner::check_input("tab\tNEL\u{85}\u{FEFF}é😀\r\n").is_ok());
    }
}
