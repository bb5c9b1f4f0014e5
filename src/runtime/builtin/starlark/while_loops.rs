//! `while` loops for the `starlark` crate, which has no syntax for them
//! (its `Dialect` has no switch; go.starlark.net allows them under
//! `resolve.AllowRecursion`, which the catalog function sets).
//!
//! Each `while COND:` header becomes `for <var> in <endless range>:` with
//! `if not (COND): break` as the body's first statement, so the condition
//! is evaluated before every iteration, `break` and `continue` keep their
//! meaning, and every iteration counts against the step budget. The
//! rewrite keeps a map back to the original text, so compile-time errors
//! still point where go.starlark.net would.

/// The global holding the endless range the rewritten loops iterate
/// (`range(2147483647)`: the step budget ends a loop long before it does).
pub(super) const FOREVER: &str = "_krender_forever";

/// The loop variable of a rewritten loop (a name no program uses).
const LOOP_VAR: &str = "_krender_while";

/// A program with its `while` loops rewritten.
#[derive(Debug)]
pub(super) struct Rewritten {
    /// The program to parse.
    pub(super) source: String,
    /// The program as written.
    original: String,
    /// At each change of origin: the offset in `source`, the offset in the
    /// original, and whether the text from there on is copied (offsets
    /// advance together) or made up (it all maps to the one offset).
    map: Vec<(usize, usize, bool)>,
}

impl Rewritten {
    /// The program as written.
    pub(super) fn original(&self) -> &str {
        &self.original
    }

    /// The original offset of `offset` in [`Rewritten::source`].
    pub(super) fn original_offset(&self, offset: usize) -> usize {
        let index = self.map.partition_point(|&(start, _, _)| start <= offset);
        match index.checked_sub(1).and_then(|i| self.map.get(i)) {
            Some(&(start, original, true)) => original + (offset - start),
            Some(&(_, original, false)) => original,
            None => offset,
        }
    }

    fn copy(&mut self, original: &str, from: usize, to: usize) {
        if from >= to {
            return;
        }
        self.map.push((self.source.len(), from, true));
        self.source.push_str(&original[from..to]);
    }

    fn make_up(&mut self, text: &str, at: usize) {
        self.map.push((self.source.len(), at, false));
        self.source.push_str(text);
    }
}

/// Rewrites the `while` loops of `source`; a source without any comes back
/// unchanged. A `while` the rewrite cannot place (no `:`, no body) is left
/// as it is, for the parser to report.
pub(super) fn rewrite(source: &str) -> Rewritten {
    let mut out = Rewritten {
        source: String::with_capacity(source.len()),
        original: source.to_owned(),
        map: Vec::new(),
    };
    let tokens = tokenize(source);
    let mut copied = 0;
    let mut at_line_start = true;
    for (index, token) in tokens.iter().enumerate() {
        let starts_line = at_line_start;
        at_line_start = matches!(token.kind, Kind::Newline)
            || (starts_line && matches!(token.kind, Kind::Comment));
        if !starts_line || token.kind != Kind::Word || &source[token.start..token.end] != "while" {
            continue;
        }
        let Some(header) = Header::find(source, &tokens, index) else {
            continue;
        };
        let line_start = source[..token.start].rfind('\n').map_or(0, |i| i + 1);
        let indent = &source[line_start..token.start];
        let block = match header.inline_body {
            Some(_) => None,
            // No body: leave it to the parser.
            None => match block_indent(source, header.line_end, indent) {
                Some(body_indent) => Some(body_indent),
                None => continue,
            },
        };
        out.copy(source, copied, token.start);
        out.make_up(&format!("for {LOOP_VAR} in {FOREVER}"), token.start);
        match header.inline_body {
            None => {
                let body_indent = block.unwrap_or_default();
                // `:`, a trailing comment and the newline.
                let after_newline = (header.line_end + 1).min(source.len());
                out.copy(source, header.colon, after_newline);
                if after_newline == header.line_end {
                    out.make_up("\n", header.line_end);
                }
                out.make_up(&format!("{body_indent}if not ("), token.start);
                out.copy(source, token.end, header.colon);
                out.make_up("): break\n", token.start);
                copied = after_newline;
            }
            Some(body_start) => {
                let body_indent = format!("{indent}    ");
                out.copy(source, header.colon, header.colon + 1);
                out.make_up(&format!("\n{body_indent}if not ("), token.start);
                out.copy(source, token.end, header.colon);
                out.make_up(&format!("): break\n{body_indent}"), token.start);
                out.copy(source, body_start, header.line_end);
                copied = header.line_end;
            }
        }
    }
    out.copy(source, copied, source.len());
    out
}

/// Where a `while` header's parts are.
struct Header {
    /// Offset of the `:` ending the condition.
    colon: usize,
    /// Offset of the statement after the `:` on the same line, if any.
    inline_body: Option<usize>,
    /// Offset of the newline ending the header's logical line (or the end
    /// of the source).
    line_end: usize,
}

impl Header {
    fn find(source: &str, tokens: &[Token], while_index: usize) -> Option<Header> {
        let mut lambdas = 0usize;
        let mut colon = None;
        let mut inline_body = None;
        for token in &tokens[while_index + 1..] {
            match token.kind {
                Kind::Newline => {
                    return colon.map(|colon| Header {
                        colon,
                        inline_body,
                        line_end: token.start,
                    });
                }
                Kind::Comment if colon.is_some() => {}
                _ if colon.is_some() => {
                    inline_body.get_or_insert(token.start);
                }
                Kind::Word if token.depth == 0 && &source[token.start..token.end] == "lambda" => {
                    lambdas += 1;
                }
                Kind::Punct if token.depth == 0 && &source[token.start..token.end] == ":" => {
                    if lambdas == 0 {
                        colon = Some(token.start);
                    } else {
                        lambdas -= 1;
                    }
                }
                _ => {}
            }
        }
        colon.map(|colon| Header {
            colon,
            inline_body,
            line_end: source.len(),
        })
    }
}

/// The indentation of the first statement after `line_end` (blank and
/// comment-only lines skipped), when it is deeper than `indent`.
fn block_indent<'a>(source: &'a str, line_end: usize, indent: &str) -> Option<&'a str> {
    let rest = source.get(line_end + 1..)?;
    for line in rest.split('\n') {
        let content = line.trim_start_matches([' ', '\t']);
        if content.is_empty() || content.starts_with('#') || content == "\r" {
            continue;
        }
        let body_indent = &line[..line.len() - content.len()];
        return (body_indent.len() > indent.len() && body_indent.starts_with(indent))
            .then_some(body_indent);
    }
    None
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Word,
    Str,
    Comment,
    Punct,
    /// A newline outside brackets (the end of a logical line).
    Newline,
}

#[derive(Clone, Copy, Debug)]
struct Token {
    kind: Kind,
    start: usize,
    end: usize,
    /// Bracket nesting before the token.
    depth: usize,
}

/// Just enough of Starlark's lexer to see words, strings, comments,
/// brackets and logical line ends.
fn tokenize(source: &str) -> Vec<Token> {
    let bytes = source.as_bytes();
    let mut tokens = Vec::new();
    let mut depth = 0usize;
    let mut i = 0;
    while i < bytes.len() {
        let start = i;
        let c = bytes[i];
        let kind = match c {
            b' ' | b'\t' | b'\r' | b'\x0c' => {
                i += 1;
                continue;
            }
            b'\\' if bytes.get(i + 1) == Some(&b'\n') => {
                i += 2;
                continue;
            }
            b'\n' => {
                i += 1;
                if depth > 0 {
                    continue;
                }
                Kind::Newline
            }
            b'#' => {
                i = source[i..].find('\n').map_or(bytes.len(), |n| i + n);
                Kind::Comment
            }
            b'"' | b'\'' => {
                i = string_end(bytes, i);
                Kind::Str
            }
            c if c.is_ascii_alphanumeric() || c == b'_' || c >= 0x80 => {
                while i < bytes.len()
                    && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'_' || bytes[i] >= 0x80)
                {
                    i += 1;
                }
                let word = &source[start..i];
                let prefix = matches!(word.to_ascii_lowercase().as_str(), "r" | "b" | "rb" | "br");
                if prefix && matches!(bytes.get(i), Some(b'"' | b'\'')) {
                    i = string_end(bytes, i);
                    Kind::Str
                } else {
                    Kind::Word
                }
            }
            _ => {
                i += 1;
                Kind::Punct
            }
        };
        tokens.push(Token {
            kind,
            start,
            end: i,
            depth,
        });
        if kind == Kind::Punct {
            match c {
                b'(' | b'[' | b'{' => depth += 1,
                b')' | b']' | b'}' => depth = depth.saturating_sub(1),
                _ => {}
            }
        }
    }
    tokens
}

/// The offset after the string literal whose opening quote is at `start`
/// (an unterminated one ends at its line's end, or the source's).
fn string_end(bytes: &[u8], start: usize) -> usize {
    let quote = bytes[start];
    let triple = bytes.get(start + 1) == Some(&quote) && bytes.get(start + 2) == Some(&quote);
    let mut i = start + if triple { 3 } else { 1 };
    while i < bytes.len() {
        match bytes[i] {
            b'\\' => i += 2,
            b'\n' if !triple => return i,
            c if c == quote => {
                if !triple {
                    return i + 1;
                }
                if bytes.get(i + 1) == Some(&quote) && bytes.get(i + 2) == Some(&quote) {
                    return i + 3;
                }
                i += 1;
            }
            _ => i += 1,
        }
    }
    bytes.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn block_and_inline_loops_become_for_loops() {
        let source = "i = 0\nwhile i < 3:  # count\n    i += 1\nwhile i > 0: i -= 1\n";
        let rewritten = rewrite(source);
        assert_eq!(
            rewritten.source,
            "i = 0\nfor _krender_while in _krender_forever:  # count\n    if not ( i < 3): break\n    i += 1\n\
             for _krender_while in _krender_forever:\n    if not ( i > 0): break\n    i -= 1\n"
        );
        // `i += 1` maps back to its own place, the condition too.
        let body = rewritten.source.find("i += 1").unwrap_or_default();
        assert_eq!(
            rewritten.original_offset(body),
            source.find("i += 1").unwrap_or_default()
        );
        let condition = rewritten.source.find("i < 3").unwrap_or_default();
        assert_eq!(
            rewritten.original_offset(condition),
            source.find("i < 3").unwrap_or_default()
        );
    }

    #[test]
    fn strings_comments_and_names_are_not_loops() {
        for source in [
            "x = 'while x:'\n",
            "# while x:\n",
            "while_x = 1\n",
            "s = \"\"\"\nwhile x:\n  pass\n\"\"\"\n",
            "f(a,\n  while_)\n",
        ] {
            assert_eq!(rewrite(source).source, source);
        }
    }

    #[test]
    fn conditions_with_colons_and_brackets_end_at_the_header_colon() {
        let rewritten = rewrite("while d[1:2] != {'a': 1} and (lambda: 1)():\n  pass\n");
        assert!(
            rewritten
                .source
                .contains("if not ( d[1:2] != {'a': 1} and (lambda: 1)()): break"),
            "{}",
            rewritten.source
        );
    }

    #[test]
    fn loops_without_a_colon_or_body_are_left_alone() {
        for source in ["while x\n", "while x:\n", "while"] {
            let rewritten = rewrite(source);
            assert!(rewritten.source.starts_with("while"), "{source:?}");
        }
    }
}
