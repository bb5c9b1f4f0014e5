//! The package reader: kyaml's `LocalPackageReader` semantics (spec §7).
//!
//! [`read_package`] walks one package directory (lexical order, skipping
//! subpackages and `.krmignore` matches), and [`parse_file`] turns one
//! file's text into resources: CRLF → LF, the `\n---.*\n` document split
//! with its `invalid document separator` errors, a fresh go-yaml decode per
//! piece (`crate::yaml::parse_document`), empty documents dropped, bare
//! sequences wrapped, and the reader annotations (index, path, seqindent,
//! optional package-path) added in sorted order as single-quoted strings.
//! Resources are Document nodes, so document comments survive to the writer.

use std::path::{Path, PathBuf};
use std::sync::LazyLock;

use regex::Regex;

use super::krmignore::{KrmIgnore, KrmIgnoreError};
use crate::krm::resource::{self, set_annotation};
use crate::yaml::node::{Node, NodeKind, Style};
use crate::yaml::{SeqIndent, YamlError, parse_document};

/// Name of the key kyaml wraps a bare-sequence document under.
pub const BARE_SEQ_WRAPPING_KEY: &str = "bareSeqNodeWrappingKey";

/// Options for reading a package.
#[derive(Clone, Debug, Default)]
pub struct ReadOptions {
    /// Value of `internal.config.kubernetes.io/package-path` (kpt sets the
    /// absolute package path); `None` leaves the annotation out.
    pub package_path: Option<String>,
}

/// The result of reading one package directory.
#[derive(Clone, Debug, Default)]
pub struct PackageRead {
    /// Resources as Document nodes, in read order (files lexically, then
    /// document order within a file).
    pub resources: Vec<Node>,
    /// Package-relative paths (`/`-separated) of the files that yielded at
    /// least one resource: the files the writer may delete when all their
    /// resources disappear.
    pub files: Vec<String>,
}

/// An error reading a package; `Display` is kpt's text.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error, miette::Diagnostic)]
pub enum ReadError {
    /// go-yaml rejected a document piece. Line numbers count from the start
    /// of the piece, as in kpt.
    #[error("{}: MalformedYAMLError: {source}", path.display())]
    #[diagnostic(code(krender::pkg::malformed_yaml))]
    Malformed {
        /// Absolute path of the file.
        path: PathBuf,
        /// The parser error.
        source: YamlError,
        /// Where in the file (not the piece) the parser stopped (boxed: the
        /// error travels on every read's Result).
        location: Box<SourceLocation>,
    },
    /// A line starting with `---` that is not a document separator.
    #[error("{}: invalid document separator: {separator}", path.display())]
    #[diagnostic(code(krender::pkg::invalid_separator))]
    InvalidSeparator {
        /// Absolute path of the file.
        path: PathBuf,
        /// The separator line, trimmed.
        separator: String,
    },
    /// The file is not valid UTF-8 (or UTF-16 with a byte-order mark).
    #[error("{}: MalformedYAMLError: yaml: {reason}", path.display())]
    #[diagnostic(code(krender::pkg::invalid_utf8))]
    InvalidUtf8 {
        /// Absolute path of the file.
        path: PathBuf,
        /// go-yaml's reader error (`invalid trailing UTF-8 octet`, ...).
        reason: &'static str,
    },
    /// A file or directory could not be read.
    #[error("{}: {message}", path.display())]
    #[diagnostic(code(krender::pkg::read_failed))]
    Io {
        /// The path being read.
        path: PathBuf,
        /// The operating system's message.
        message: String,
    },
    /// A document's root is not a mapping, so the reader annotations cannot
    /// be set (kyaml's message, with the node's YAML text).
    #[error(
        "{}: wrong node kind: expected MappingNode but got {kind}: node contents:\n{contents}",
        path.display()
    )]
    #[diagnostic(code(krender::pkg::not_a_mapping))]
    WrongNodeKind {
        /// Absolute path of the file.
        path: PathBuf,
        /// go-yaml's kind name (`ScalarNode`, ...).
        kind: &'static str,
        /// The node encoded as YAML.
        contents: String,
    },
    /// The package's `.krmignore` is invalid.
    #[error(transparent)]
    #[diagnostic(transparent)]
    Ignore(#[from] KrmIgnoreError),
}

/// True for the file names the render reader selects: `Kptfile`, `*.yaml`,
/// `*.yml`, `*.json` (base name only).
pub fn is_package_file(name: &str) -> bool {
    name == "Kptfile"
        || name.ends_with(".yaml")
        || name.ends_with(".yml")
        || name.ends_with(".json")
}

/// Reads every resource of the package rooted at `dir`. Subdirectories that
/// contain a `Kptfile` are subpackages and are skipped.
pub fn read_package(dir: &Path, options: &ReadOptions) -> Result<PackageRead, ReadError> {
    let mut files = Vec::new();
    for (relative, absolute) in list_package_files(dir)? {
        let bytes = std::fs::read(&absolute).map_err(|error| ReadError::Io {
            path: absolute.clone(),
            message: error.to_string(),
        })?;
        files.push(PackageFile {
            relative,
            absolute,
            bytes: bytes.into(),
        });
    }
    parse_package_files(&files, options)
}

/// One file of a package, read into memory (the engine's input unit).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PackageFile {
    /// The `/`-separated path relative to the package.
    pub relative: String,
    /// The absolute path (named in errors).
    pub absolute: PathBuf,
    /// The file's bytes.
    pub bytes: std::sync::Arc<[u8]>,
}

/// The files [`read_package`] reads for the package at `dir`, as (relative
/// `/` path, absolute path), in kyaml's walk order: `.krmignore` applied,
/// subpackages skipped.
pub fn list_package_files(dir: &Path) -> Result<Vec<(String, PathBuf)>, ReadError> {
    // kyaml names files by their cleaned absolute path in errors (without
    // resolving symlinks), whatever form the caller gave.
    let absolute = std::path::absolute(dir).map_err(|error| ReadError::Io {
        path: dir.to_path_buf(),
        message: error.to_string(),
    })?;
    let dir = absolute.as_path();
    let ignore = KrmIgnore::load(dir)?;
    let mut files = Vec::new();
    list_files(dir, dir, &ignore, &mut files)?;
    Ok(files)
}

/// Parses the files listed by [`list_package_files`], in order.
pub fn parse_package_files(
    files: &[PackageFile],
    options: &ReadOptions,
) -> Result<PackageRead, ReadError> {
    let mut read = PackageRead::default();
    for file in files {
        let resources = parse_package_file(file, options)?;
        if !resources.is_empty() {
            read.files.push(file.relative.clone());
            read.resources.extend(resources);
        }
    }
    Ok(read)
}

/// The resources of one package file, annotated as the reader annotates
/// them.
pub fn parse_package_file(
    file: &PackageFile,
    options: &ReadOptions,
) -> Result<Vec<Node>, ReadError> {
    let text = decode_text(&file.bytes).map_err(|reason| ReadError::InvalidUtf8 {
        path: file.absolute.clone(),
        reason,
    })?;
    parse_file(&file.relative, &file.absolute, &text, options)
}

/// Lists package files under `current` as (relative `/` path, absolute path),
/// in the order Go's `filepath.Walk` visits them (names sorted per directory).
fn list_files(
    root: &Path,
    current: &Path,
    ignore: &KrmIgnore,
    out: &mut Vec<(String, PathBuf)>,
) -> Result<(), ReadError> {
    let io_error = |error: std::io::Error| ReadError::Io {
        path: current.to_path_buf(),
        message: error.to_string(),
    };
    let mut entries: Vec<(String, PathBuf, bool)> = Vec::new();
    for entry in std::fs::read_dir(current).map_err(io_error)? {
        let entry = entry.map_err(io_error)?;
        let path = entry.path();
        // Follow symlinks as Walk's Lstat would not: kpt ignores symlinked
        // directories, so only real directories are descended into.
        let file_type = entry.file_type().map_err(io_error)?;
        let name = entry.file_name().to_string_lossy().into_owned();
        entries.push((name, path, file_type.is_dir()));
    }
    entries.sort_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
    for (name, path, is_dir) in entries {
        // krender's staging and lock files (`.krender-*`) are no content.
        if crate::pkg::commit::is_reserved_name(&name) || ignore.is_ignored(&path, is_dir) {
            continue;
        }
        if is_dir {
            if path.join("Kptfile").exists() {
                continue;
            }
            list_files(root, &path, ignore, out)?;
        } else if is_package_file(&name) {
            let relative = path
                .strip_prefix(root)
                .unwrap_or(&path)
                .components()
                .map(|component| component.as_os_str().to_string_lossy())
                .collect::<Vec<_>>()
                .join("/");
            out.push((relative, path));
        }
    }
    Ok(())
}

/// Decodes file bytes: UTF-8 with an optional BOM (which is dropped), or
/// UTF-16 with a BOM, as go-yaml's reader accepts. Invalid text gives
/// go-yaml's reader error for its first bad sequence.
pub fn decode_text(bytes: &[u8]) -> Result<String, &'static str> {
    let utf16 = |bytes: &[u8], little: bool| -> Result<String, &'static str> {
        let units = bytes.chunks(2).map(|pair| match (pair, little) {
            ([lo, hi], true) | ([hi, lo], false) => Ok(u16::from_le_bytes([*lo, *hi])),
            _ => Err("incomplete UTF-16 character"),
        });
        let units: Vec<u16> = units.collect::<Result<_, _>>()?;
        char::decode_utf16(units)
            .collect::<Result<String, _>>()
            .map_err(|_| "incomplete UTF-16 surrogate pair")
    };
    if let Some(rest) = bytes.strip_prefix(&[0xFF, 0xFE]) {
        return utf16(rest, true);
    }
    if let Some(rest) = bytes.strip_prefix(&[0xFE, 0xFF]) {
        return utf16(rest, false);
    }
    let bytes = bytes.strip_prefix(&[0xEF, 0xBB, 0xBF]).unwrap_or(bytes);
    match std::str::from_utf8(bytes) {
        Ok(text) => Ok(text.to_owned()),
        Err(error) => Err(utf8_reason(&bytes[error.valid_up_to()..])),
    }
}

/// go-yaml's reader error for the invalid UTF-8 sequence at the start of
/// `bytes` (`yaml_parser_update_buffer`).
fn utf8_reason(bytes: &[u8]) -> &'static str {
    let Some(&lead) = bytes.first() else {
        return "incomplete UTF-8 octet sequence";
    };
    // Rust reports a surrogate's encoding at its lead byte, as invalid;
    // go-yaml decodes it and rejects the character.
    let width = match lead {
        _ if lead & 0x80 == 0 => 1,
        _ if lead & 0xE0 == 0xC0 => 2,
        _ if lead & 0xF0 == 0xE0 => 3,
        _ if lead & 0xF8 == 0xF0 => 4,
        _ => return "invalid leading UTF-8 octet",
    };
    if bytes.len() < width {
        return "incomplete UTF-8 octet sequence";
    }
    let mut value = u32::from(match width {
        1 => lead & 0x7F,
        2 => lead & 0x1F,
        3 => lead & 0x0F,
        _ => lead & 0x07,
    });
    for &octet in &bytes[1..width] {
        if octet & 0xC0 != 0x80 {
            return "invalid trailing UTF-8 octet";
        }
        value = (value << 6) + u32::from(octet & 0x3F);
    }
    if (0xD800..=0xDFFF).contains(&value) || value > 0x10_FFFF {
        return "invalid Unicode character";
    }
    let shortest = match width {
        1 => true,
        2 => value >= 0x80,
        3 => value >= 0x800,
        _ => value >= 0x10000,
    };
    if !shortest {
        return "invalid length of a UTF-8 sequence";
    }
    // Valid on its own: the sequence was cut short by the end of input.
    "incomplete UTF-8 octet sequence"
}

static SEPARATOR: LazyLock<Regex> = LazyLock::new(|| {
    // The pattern is a literal; failing to compile it is a programming error
    // caught by every test run.
    Regex::new(r"\n---.*\n").unwrap_or_else(|_| unreachable!("valid separator regex"))
});

/// A place in a file an error points at, for diagnostics that show the
/// line (the messages kpt prints carry no column).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SourceLocation {
    /// The file.
    pub path: PathBuf,
    /// 1-based line.
    pub line: usize,
    /// 1-based column, in characters.
    pub column: usize,
    /// What is wrong there, in a few words (the parser's problem).
    pub problem: String,
}

impl SourceLocation {
    /// The place of byte `offset` of `text`, the contents of `path` (an
    /// offset past the end is the end).
    pub fn at(path: &Path, text: &str, offset: usize, problem: String) -> SourceLocation {
        let mut offset = offset.min(text.len());
        while !text.is_char_boundary(offset) {
            offset -= 1;
        }
        let before = &text[..offset];
        let line_start = before.rfind('\n').map_or(0, |i| i + 1);
        SourceLocation {
            path: path.to_path_buf(),
            line: before.matches('\n').count() + 1,
            column: before[line_start..].chars().count() + 1,
            problem,
        }
    }
}

impl ReadError {
    /// Where in which file the error is, when it points into one.
    pub fn location(&self) -> Option<&SourceLocation> {
        match self {
            ReadError::Malformed { location, .. } => Some(location),
            _ => None,
        }
    }
}

/// Splits file text into document pieces as kyaml does (spec §7.2).
/// `text` must already have CRLF normalised.
pub fn split_documents<'t>(text: &'t str, abs_path: &Path) -> Result<Vec<&'t str>, ReadError> {
    let mut pieces = Vec::new();
    let mut previous = 0;
    for found in SEPARATOR.find_iter(text) {
        let line = found.as_str().trim();
        let rest = line.get(3..).unwrap_or("").trim();
        if !rest.is_empty() && !rest.starts_with('#') {
            return Err(ReadError::InvalidSeparator {
                path: abs_path.to_path_buf(),
                separator: line.to_owned(),
            });
        }
        // The piece keeps its final "\n" (the match's first byte).
        pieces.push(&text[previous..found.start() + 1]);
        previous = found.end();
    }
    pieces.push(&text[previous..]);
    Ok(pieces)
}

/// Parses one file's text into annotated resources. `rel_path` is the
/// package-relative `/` path written into the path annotations;
/// `abs_path` names the file in errors. Invalid separators and parser
/// errors fail the whole file.
pub fn parse_file(
    rel_path: &str,
    abs_path: &Path,
    text: &str,
    options: &ReadOptions,
) -> Result<Vec<Node>, ReadError> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let normalized;
    let text = if text.contains("\r\n") {
        normalized = text.replace("\r\n", "\n");
        normalized.as_str()
    } else {
        text
    };
    let mut resources = Vec::new();
    for piece in split_documents(text, abs_path)? {
        let parsed = parse_document(piece).map_err(|source| {
            // The piece is a slice of `text`: its start plus the parser's
            // offset is the place in the (normalised) file.
            let start = piece.as_ptr() as usize - text.as_ptr() as usize;
            let location =
                SourceLocation::at(abs_path, text, start + source.offset, source.problem());
            ReadError::Malformed {
                path: abs_path.to_path_buf(),
                source,
                location: Box::new(location),
            }
        })?;
        let Some(mut document) = parsed else {
            continue;
        };
        // kyaml's `IsMissingOrNull`: a null root is no resource.
        if document.root().is_null() {
            continue;
        }
        wrap_bare_sequence(&mut document);
        // kyaml sets the annotations through `metadata.annotations`: the
        // root, and each of those present and not null, must be mappings.
        let root = document.root();
        let metadata = root.get("metadata").filter(|node| !node.is_null());
        let annotations = metadata
            .and_then(|metadata| metadata.get("annotations"))
            .filter(|node| !node.is_null());
        let not_a_mapping = std::iter::once(root)
            .chain(metadata)
            .chain(annotations)
            .find(|node| !node.is_mapping());
        if let Some(node) = not_a_mapping {
            return Err(ReadError::WrongNodeKind {
                path: abs_path.to_path_buf(),
                kind: match node.kind {
                    NodeKind::Scalar => "ScalarNode",
                    NodeKind::Alias => "AliasNode",
                    NodeKind::Sequence => "SequenceNode",
                    NodeKind::Document => "DocumentNode",
                    NodeKind::Mapping => "MappingNode",
                },
                contents: crate::yaml::to_string(node, SeqIndent::Compact),
            });
        }
        let index = resources.len().to_string();
        let seq_indent = derive_seq_indent(piece);
        add_reader_annotations(&mut document, rel_path, &index, seq_indent, options);
        resources.push(document);
    }
    Ok(resources)
}

/// Wraps a bare-sequence document's root in a mapping under
/// [`BARE_SEQ_WRAPPING_KEY`], as kyaml's reader does.
fn wrap_bare_sequence(document: &mut Node) {
    let root = document.root_mut();
    if root.kind != NodeKind::Sequence {
        return;
    }
    let sequence = std::mem::replace(root, Node::new_mapping());
    root.content.push(Node::new_string(BARE_SEQ_WRAPPING_KEY));
    root.content.push(sequence);
}

/// Sets the reader annotations on one resource (spec §7.3): legacy and
/// internal path/index are first copied to each other when only one exists,
/// then all are set in sorted key order, single-quoted.
fn add_reader_annotations(
    document: &mut Node,
    rel_path: &str,
    index: &str,
    seq_indent: SeqIndent,
    options: &ReadOptions,
) {
    copy_legacy_annotations(document);
    let mut entries = vec![
        (resource::LEGACY_INDEX, index),
        (resource::LEGACY_PATH, rel_path),
        (resource::INDEX, index),
    ];
    if let Some(package_path) = &options.package_path {
        entries.push((resource::PACKAGE_PATH, package_path));
    }
    entries.push((resource::PATH, rel_path));
    entries.push((resource::SEQ_INDENT, seq_indent.as_str()));
    resource::set_annotations(document, &entries, Style::SINGLE_QUOTED);
}

/// kyaml's `CopyLegacyAnnotations`: for path, index and id, fill whichever
/// of the legacy/internal pair is missing from the other.
fn copy_legacy_annotations(document: &mut Node) {
    let pairs = [
        (resource::LEGACY_PATH, resource::PATH),
        (resource::LEGACY_INDEX, resource::INDEX),
        (resource::LEGACY_ID, resource::ID),
    ];
    for (legacy, internal) in pairs {
        let legacy_value = resource::annotation(document, legacy).map(str::to_owned);
        let internal_value = resource::annotation(document, internal).map(str::to_owned);
        match (legacy_value, internal_value) {
            (Some(value), None) => set_annotation(document, internal, &value, Style::SINGLE_QUOTED),
            (None, Some(value)) => set_annotation(document, legacy, &value, Style::SINGLE_QUOTED),
            _ => {}
        }
    }
}

/// kyaml's sequence-indent heuristic on a document's raw text (spec §7.4).
pub fn derive_seq_indent(text: &str) -> SeqIndent {
    let lines: Vec<&str> = text.split('\n').collect();
    for (i, line) in lines.iter().enumerate() {
        let Some(dash) = line.find("- ") else {
            continue;
        };
        let prefix = &line[..dash];
        if !prefix.bytes().all(|b| b == b' ') {
            continue;
        }
        let Some(key_line) = lines[..i]
            .iter()
            .rev()
            .find(|candidate| !candidate.trim_matches(' ').starts_with('#'))
        else {
            continue;
        };
        let key_line = key_line.split('#').next().unwrap_or("");
        let key_indent = key_line.len() - key_line.trim_start_matches(' ').len();
        let trimmed = key_line.trim_matches(' ');
        if trimmed.matches(':').count() != 1 || !trimmed.ends_with(':') {
            continue;
        }
        if dash == key_indent {
            return SeqIndent::Compact;
        }
        if dash == key_indent + 2 {
            return SeqIndent::Wide;
        }
    }
    SeqIndent::Compact
}

#[cfg(test)]
mod tests {
    use super::{SeqIndent, derive_seq_indent, split_documents};
    use std::path::Path;

    #[test]
    fn invalid_text_gives_go_yamls_reason() {
        use super::decode_text;
        assert_eq!(
            decode_text(b"# caf\xe9\na: b\n"),
            Err("invalid trailing UTF-8 octet")
        );
        assert_eq!(
            decode_text(b"# caf\xe9\n"),
            Err("incomplete UTF-8 octet sequence")
        );
        assert_eq!(
            decode_text(b"a: \xff\n"),
            Err("invalid leading UTF-8 octet")
        );
        assert_eq!(
            decode_text(b"a: \xc3"),
            Err("incomplete UTF-8 octet sequence")
        );
        assert_eq!(
            decode_text(b"a: \xc0\x80"),
            Err("invalid length of a UTF-8 sequence")
        );
        assert_eq!(
            decode_text(b"a: \xed\xa0\x80"),
            Err("invalid Unicode character")
        );
        assert_eq!(
            decode_text("a: café\n".as_bytes()).as_deref(),
            Ok("a: café\n")
        );
    }

    /// kyaml sets the reader annotations through `metadata.annotations`;
    /// kpt's texts for what is not a mapping there, checked against kpt.
    #[test]
    fn metadata_and_annotations_must_be_mappings() {
        let read = |text: &str| {
            super::parse_file(
                "cm.yaml",
                Path::new("/pkg/cm.yaml"),
                text,
                &super::ReadOptions::default(),
            )
            .map(|_| ())
            .map_err(|error| error.to_string())
        };
        assert_eq!(
            read("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n  annotations: [x, y]\n"),
            Err("/pkg/cm.yaml: wrong node kind: expected MappingNode but got SequenceNode: node contents:\n[x, y]\n".to_owned())
        );
        assert_eq!(
            read("apiVersion: v1\nkind: ConfigMap\nmetadata: 5\n"),
            Err("/pkg/cm.yaml: wrong node kind: expected MappingNode but got ScalarNode: node contents:\n5\n".to_owned())
        );
        assert!(
            read("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n  annotations:\n").is_ok()
        );
    }

    #[test]
    fn seq_indent_heuristic() {
        assert_eq!(derive_seq_indent("a:\n- x\n"), SeqIndent::Compact);
        assert_eq!(derive_seq_indent("a:\n  - x\n"), SeqIndent::Wide);
        assert_eq!(
            derive_seq_indent("a:\n      - x\nb:\n  - y\n"),
            SeqIndent::Wide
        );
        assert_eq!(derive_seq_indent("a:\n      - x\n"), SeqIndent::Compact);
        assert_eq!(
            derive_seq_indent("s:\n  # c\n  list: # t\n    # in between\n    - x\n"),
            SeqIndent::Wide
        );
        assert_eq!(derive_seq_indent("kind: X\n"), SeqIndent::Compact);
    }

    #[test]
    fn split_keeps_piece_newlines_and_rejects_bad_separators() {
        let path = Path::new("/p/f.yaml");
        let pieces = split_documents("a: 1\n---\nb: 2\n--- # c\nc: 3\n", path).unwrap();
        assert_eq!(pieces, vec!["a: 1\n", "b: 2\n", "c: 3\n"]);
        let pieces = split_documents("---\na: 1\n---\n---\nb\n", path).unwrap();
        assert_eq!(pieces, vec!["---\na: 1\n", "---\nb\n"]);
        let error = split_documents("a: 1\n---foo\nb: 2\n", path).unwrap_err();
        assert_eq!(
            error.to_string(),
            "/p/f.yaml: invalid document separator: ---foo"
        );
        let error = split_documents("a: 1\n----\nb: 2\n", path).unwrap_err();
        assert_eq!(
            error.to_string(),
            "/p/f.yaml: invalid document separator: ----"
        );
    }
}
