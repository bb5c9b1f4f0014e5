//! Layering errors: one variant per Deckhand error class (the class name is
//! the diagnostic code's last segment and is what `krender layer render`
//! prints as `error[Class]`), each naming the document by schema, layer and
//! name, plus its file and line.
//!
//! Errors are plain data (`Clone + PartialEq`) so a per-document render can
//! later be memoized as a query.

use std::fmt;
use std::sync::Arc;

/// Where a document came from and who it is: enough to find it again.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DocumentRef {
    /// `schema`, or empty when missing.
    pub schema: String,
    /// `metadata.name`, or empty when missing.
    pub name: String,
    /// `metadata.layeringDefinition.layer`, if any.
    pub layer: Option<String>,
    /// The file the document was read from.
    pub file: Arc<str>,
    /// 1-based line of the document's first key in `file` (0 when unknown).
    pub line: usize,
}

impl fmt::Display for DocumentRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.layer {
            Some(layer) => write!(f, "[{}, {}] {}", self.schema, layer, self.name)?,
            None => write!(f, "[{}] {}", self.schema, self.name)?,
        }
        if self.line > 0 {
            write!(f, " ({}:{})", self.file, self.line)
        } else {
            write!(f, " ({})", self.file)
        }
    }
}

/// A list of documents, for cycle and ambiguity messages.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DocumentList(pub Vec<Arc<DocumentRef>>);

impl fmt::Display for DocumentList {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, document) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(" -> ")?;
            }
            write!(f, "{document}")?;
        }
        Ok(())
    }
}

/// Everything that can make `krender layer render` fail.
#[derive(Clone, Debug, PartialEq, thiserror::Error, miette::Diagnostic, salsa::SalsaValue)]
pub enum LayeringError {
    /// An input file could not be read.
    #[error("cannot read {path}: {message}")]
    #[diagnostic(code(krender::layering::ReadError))]
    Read {
        /// The file or directory.
        path: String,
        /// The OS error text.
        message: String,
    },

    /// An input file is not valid YAML.
    #[error("{path}: {message}")]
    #[diagnostic(code(krender::layering::YamlError))]
    Yaml {
        /// The file.
        path: String,
        /// The parser's message.
        message: String,
    },

    /// A document does not have the structure rendering needs.
    #[error("The provided documents failed schema validation: {document}: {reason}")]
    #[diagnostic(code(krender::layering::InvalidDocumentFormat))]
    InvalidDocumentFormat {
        /// The document.
        document: Arc<DocumentRef>,
        /// What is wrong, naming the field.
        reason: String,
    },

    /// No document has a `deckhand/LayeringPolicy` schema.
    #[error("Required LayeringPolicy was not found for layering (read {files})")]
    #[diagnostic(
        code(krender::layering::LayeringPolicyNotFound),
        help("add a document with `schema: deckhand/LayeringPolicy/v1` and `data.layerOrder`")
    )]
    LayeringPolicyNotFound {
        /// The files read, comma-separated.
        files: String,
    },

    /// A document's layer is not in the policy's `layerOrder`.
    #[error(
        "Document layer '{layer}' for document {document} was not found in layerOrder: {layer_order:?} for provided LayeringPolicy: {policy}"
    )]
    #[diagnostic(code(krender::layering::InvalidDocumentLayer))]
    InvalidDocumentLayer {
        /// The document.
        document: Arc<DocumentRef>,
        /// Its layer.
        layer: String,
        /// The policy's layers.
        layer_order: Vec<String>,
        /// The policy document's name.
        policy: String,
    },

    /// Two documents share schema, layer and name (Deckhand refuses such a
    /// set when it is uploaded).
    #[error(
        "Document [{schema}, {layer}] {name} already exists: {}:{} and {}:{}",
        .first.file, .first.line, .second.file, .second.line,
        schema = .second.schema,
        layer = .second.layer.as_deref().unwrap_or(""),
        name = .second.name
    )]
    #[diagnostic(
        code(krender::layering::DuplicateDocumentExists),
        help("remove one of them, or give the second another name or layer")
    )]
    DuplicateDocumentExists {
        /// The first document.
        first: Arc<DocumentRef>,
        /// The duplicate.
        second: Arc<DocumentRef>,
    },

    /// A document matching a parentSelector cannot be the parent.
    #[error("The document parent {parent} is invalid for document {document}. Reason: {reason}")]
    #[diagnostic(code(krender::layering::InvalidDocumentParent))]
    InvalidDocumentParent {
        /// The child.
        document: Arc<DocumentRef>,
        /// The matching document.
        parent: Arc<DocumentRef>,
        /// Why it cannot be the parent.
        reason: String,
    },

    /// More than one parent matches.
    #[error(
        "Too many parent documents found for document {document}. Found: {found}. Expected: 1. Candidates: {candidates}"
    )]
    #[diagnostic(code(krender::layering::IndeterminateDocumentParent))]
    IndeterminateDocumentParent {
        /// The child.
        document: Arc<DocumentRef>,
        /// Deckhand's parent count.
        found: usize,
        /// Every document the selector matched.
        candidates: DocumentList,
    },

    /// A replacement rule is broken.
    #[error("Replacement document {document} is invalid. Reason: {reason}")]
    #[diagnostic(code(krender::layering::InvalidDocumentReplacement))]
    InvalidDocumentReplacement {
        /// The document.
        document: Arc<DocumentRef>,
        /// The broken rule.
        reason: String,
    },

    /// An action path is missing (or null) where the action needs a value.
    #[error(
        "Missing action path in {action} needed for layering from either the data section of the parent {parent} or child {document}: path {path}"
    )]
    #[diagnostic(code(krender::layering::MissingDocumentKey))]
    MissingDocumentKey {
        /// The child being layered.
        document: Arc<DocumentRef>,
        /// Its parent.
        parent: Arc<DocumentRef>,
        /// The action method.
        action: String,
        /// The action path.
        path: String,
    },

    /// An action method other than merge, replace and delete.
    #[error(
        "Method in {action} is invalid for document {document}; supported: merge, replace, delete"
    )]
    #[diagnostic(code(krender::layering::UnsupportedActionMethod))]
    UnsupportedActionMethod {
        /// The document.
        document: Arc<DocumentRef>,
        /// The action as text.
        action: String,
    },

    /// An action path cannot be parsed or written.
    #[error("Invalid action path {path} in document {document}: {reason}")]
    #[diagnostic(code(krender::layering::InvalidActionPath))]
    InvalidActionPath {
        /// The document.
        document: Arc<DocumentRef>,
        /// The action path.
        path: String,
        /// Why.
        reason: String,
    },

    /// Documents depend on each other in a cycle.
    #[error(
        "Cannot determine substitution order as a dependency cycle exists for the following documents: {cycle}"
    )]
    #[diagnostic(
        code(krender::layering::SubstitutionDependencyCycle),
        help("each document depends on the next through its parent or a substitution source")
    )]
    SubstitutionDependencyCycle {
        /// The documents of the cycle, the first repeated at the end.
        cycle: DocumentList,
    },

    /// A substitution names a document that is not a concrete document.
    #[error(
        "Required substitution source document [{src_schema}] {src_name} was not found, yet is referenced by {document}"
    )]
    #[diagnostic(
        code(krender::layering::SubstitutionSourceNotFound),
        help("substitution sources must be concrete (abstract documents are not sources)")
    )]
    SubstitutionSourceNotFound {
        /// The destination document.
        document: Arc<DocumentRef>,
        /// `src.schema`.
        src_schema: String,
        /// `src.name`.
        src_name: String,
    },

    /// The source document has nothing (or null) at `src.path`.
    #[error(
        "Required substitution source secret was not found at path {path} in source document {source_document}, referenced by {document}"
    )]
    #[diagnostic(code(krender::layering::SubstitutionSourceDataNotFound))]
    SubstitutionSourceDataNotFound {
        /// The destination document.
        document: Arc<DocumentRef>,
        /// The source document.
        source_document: Arc<DocumentRef>,
        /// `src.path`.
        path: String,
    },

    /// Any other substitution failure (bad destination path, pattern on a
    /// non-string, ...).
    #[error(
        "An unknown exception occurred while substituting into {document} at {dest_path}: {details}"
    )]
    #[diagnostic(code(krender::layering::UnknownSubstitutionError))]
    UnknownSubstitutionError {
        /// The destination document.
        document: Arc<DocumentRef>,
        /// `dest.path`.
        dest_path: String,
        /// What went wrong.
        details: String,
    },
}

impl LayeringError {
    /// The Deckhand error class name (`MissingDocumentKey`, ...), or our own
    /// for input problems Deckhand has no class for.
    pub fn class(&self) -> &'static str {
        match self {
            LayeringError::Read { .. } => "ReadError",
            LayeringError::Yaml { .. } => "YamlError",
            LayeringError::InvalidDocumentFormat { .. } => "InvalidDocumentFormat",
            LayeringError::LayeringPolicyNotFound { .. } => "LayeringPolicyNotFound",
            LayeringError::InvalidDocumentLayer { .. } => "InvalidDocumentLayer",
            LayeringError::DuplicateDocumentExists { .. } => "DuplicateDocumentExists",
            LayeringError::InvalidDocumentParent { .. } => "InvalidDocumentParent",
            LayeringError::IndeterminateDocumentParent { .. } => "IndeterminateDocumentParent",
            LayeringError::InvalidDocumentReplacement { .. } => "InvalidDocumentReplacement",
            LayeringError::MissingDocumentKey { .. } => "MissingDocumentKey",
            LayeringError::UnsupportedActionMethod { .. } => "UnsupportedActionMethod",
            LayeringError::InvalidActionPath { .. } => "InvalidActionPath",
            LayeringError::SubstitutionDependencyCycle { .. } => "SubstitutionDependencyCycle",
            LayeringError::SubstitutionSourceNotFound { .. } => "SubstitutionSourceNotFound",
            LayeringError::SubstitutionSourceDataNotFound { .. } => {
                "SubstitutionSourceDataNotFound"
            }
            LayeringError::UnknownSubstitutionError { .. } => "UnknownSubstitutionError",
        }
    }
}
