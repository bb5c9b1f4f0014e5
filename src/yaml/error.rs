//! Errors of the YAML parser, with go-yaml's exact message text.

/// A scanner or parser error. `Display` is go-yaml's text, e.g.
/// `yaml: line 3: could not find expected ':'`, which kpt prints verbatim.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
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
