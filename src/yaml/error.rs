//! Errors of the YAML parser, with go-yaml's exact message text.
//!
//! The scanner and parser record errors the way libyaml does (a problem, a
//! problem mark, and optionally a context with its own mark); `RawError`
//! keeps that shape and `RawError::into_yaml_error` applies go-yaml's
//! `parser.fail` rules to produce the text kpt prints.

/// A position in the input: go-yaml's 0-based character index, line and
/// column, plus the byte offset.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Mark {
    /// Character index (go-yaml counts a CR LF pair as two).
    pub(crate) index: i64,
    /// 0-based line.
    pub(crate) line: i64,
    /// 0-based column in characters.
    pub(crate) column: i64,
    /// Byte offset in the input.
    pub(crate) offset: usize,
}

/// A scanner or parser error. `Display` is go-yaml's text, e.g.
/// `yaml: line 3: could not find expected ':'`, which kpt prints verbatim.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error, miette::Diagnostic)]
#[error("{message}")]
#[diagnostic(code(krender::yaml::malformed))]
pub struct YamlError {
    /// The full go-yaml message, `yaml: line N: <problem>`.
    pub message: String,
    /// Byte offset of the problem in the parsed text.
    pub offset: usize,
    /// 1-based line of the problem.
    pub line: usize,
    /// 1-based column of the problem.
    pub column: usize,
}

impl YamlError {
    /// The problem without go-yaml's `yaml: line N: ` prefix.
    pub fn problem(&self) -> String {
        let text = self.message.strip_prefix("yaml: ").unwrap_or(&self.message);
        let text = match text
            .strip_prefix("line ")
            .and_then(|rest| rest.split_once(": "))
        {
            Some((line, rest)) if line.bytes().all(|b| b.is_ascii_digit()) => rest,
            _ => text,
        };
        text.to_owned()
    }
}

/// Which stage of libyaml raised the error; go-yaml's line numbering depends
/// on it (scanner errors report the line + 1, parser errors do not).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ErrorStage {
    /// Input decoding (control characters, bad encodings).
    Reader,
    /// Tokenisation.
    Scanner,
    /// Event grammar.
    Parser,
    /// Node building (unknown anchors); the message has no line.
    Composer,
}

/// A libyaml-shaped error before formatting.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct RawError {
    pub(crate) stage: ErrorStage,
    pub(crate) context_mark: Mark,
    pub(crate) problem: String,
    pub(crate) problem_mark: Mark,
}

impl RawError {
    /// A scanner error: go-yaml sets the problem mark to the current position.
    pub(crate) fn scanner(context_mark: Mark, problem: &str, problem_mark: Mark) -> RawError {
        RawError {
            stage: ErrorStage::Scanner,
            context_mark,
            problem: problem.to_owned(),
            problem_mark,
        }
    }

    /// A parser error without context (the context mark stays at the origin).
    pub(crate) fn parser(problem: &str, problem_mark: Mark) -> RawError {
        RawError {
            stage: ErrorStage::Parser,
            context_mark: Mark::default(),
            problem: problem.to_owned(),
            problem_mark,
        }
    }

    /// A parser error with a context mark.
    pub(crate) fn parser_context(
        context_mark: Mark,
        problem: &str,
        problem_mark: Mark,
    ) -> RawError {
        RawError {
            stage: ErrorStage::Parser,
            context_mark,
            problem: problem.to_owned(),
            problem_mark,
        }
    }

    /// A reader error: go-yaml leaves both marks at the origin, so the
    /// message has no line number; we still keep the position for diagnostics.
    pub(crate) fn reader(problem: &str, at: Mark) -> RawError {
        RawError {
            stage: ErrorStage::Reader,
            context_mark: Mark::default(),
            problem: problem.to_owned(),
            problem_mark: at,
        }
    }

    /// A composer error (`unknown anchor 'x' referenced`), printed without a line.
    pub(crate) fn composer(problem: String, at: Mark) -> RawError {
        RawError {
            stage: ErrorStage::Composer,
            context_mark: Mark::default(),
            problem,
            problem_mark: at,
        }
    }

    /// go-yaml's `parser.fail`: the line comes from the context mark when it
    /// is past the first line, else from the problem mark; scanner errors add
    /// one because their marks are 0-based; line 0 is left out entirely.
    pub(crate) fn into_yaml_error(self) -> YamlError {
        let mut line = 0i64;
        let numbered = matches!(self.stage, ErrorStage::Scanner | ErrorStage::Parser);
        if numbered {
            if self.context_mark.line != 0 {
                line = self.context_mark.line;
            } else if self.problem_mark.line != 0 {
                line = self.problem_mark.line;
            }
            if line != 0 && self.stage == ErrorStage::Scanner {
                line += 1;
            }
        }
        let message = if line != 0 {
            format!("yaml: line {line}: {}", self.problem)
        } else if self.problem.is_empty() {
            "yaml: unknown problem parsing YAML content".to_owned()
        } else {
            format!("yaml: {}", self.problem)
        };
        let at = self.problem_mark;
        YamlError {
            message,
            offset: at.offset,
            line: usize::try_from(at.line).unwrap_or(0) + 1,
            column: usize::try_from(at.column).unwrap_or(0) + 1,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Mark;
    use super::RawError;

    fn mark(line: i64) -> Mark {
        Mark {
            line,
            ..Mark::default()
        }
    }

    #[test]
    fn go_yaml_line_rules() {
        // Scanner errors count from the context mark, plus one.
        let scanner = RawError::scanner(mark(2), "could not find expected ':'", mark(3));
        assert_eq!(
            scanner.into_yaml_error().message,
            "yaml: line 3: could not find expected ':'"
        );
        // Parser errors report the 0-based line of the context mark as is.
        let parser = RawError::parser_context(mark(4), "did not find expected key", mark(5));
        assert_eq!(
            parser.into_yaml_error().message,
            "yaml: line 4: did not find expected key"
        );
        // Context on the first line: the problem mark decides.
        let parser = RawError::parser_context(mark(0), "did not find expected key", mark(5));
        assert_eq!(
            parser.into_yaml_error().message,
            "yaml: line 5: did not find expected key"
        );
        // Both on the first line: no line at all.
        let parser = RawError::parser("found incompatible YAML document", mark(0));
        assert_eq!(
            parser.into_yaml_error().message,
            "yaml: found incompatible YAML document"
        );
    }
}
