//! The package writer: kyaml's `LocalPackageWriter` semantics (spec §9).
//!
//! [`render_files`] is pure: it groups resources by their path annotation,
//! orders each file's resources by a stable sort on the numeric index
//! (index-less first), strips the reader annotations, drops emptied
//! `annotations`/`metadata` maps, and encodes each file as a `---`-joined
//! stream with each resource's own sequence-indent style — or as Go-style
//! JSON for a `.json` file holding exactly one resource (§9.3).
//! [`plan_package`] turns that into the [`Changes`] against what is on disk
//! (changed files, and files whose resources all disappeared), and
//! [`write_package`] commits them atomically as one
//! (`crate::pkg::commit`); [`write_new_dir`] does the same for a
//! directory that does not exist yet (`-o DIR`).

use rayon::prelude::*;
use std::collections::{BTreeMap, HashMap};
use std::path::{Component, Path, PathBuf};

use super::commit::{self, Changes};
use crate::krm::resource;
use crate::pkg::kptfile::KPTFILE_NAME;
use crate::yaml::marshal::format_go_json_float;
use crate::yaml::node::{Node, NodeKind, tag};
use crate::yaml::{Edit, Encoder, SeqIndent};

/// An error writing a package.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error, miette::Diagnostic)]
pub enum WriteError {
    /// A resource's path annotation is absolute or leaves the package.
    #[error("resource path '{path}' must be relative to the package and must not escape it")]
    #[diagnostic(code(krender::pkg::invalid_resource_path))]
    InvalidPath {
        /// The offending annotation value.
        path: String,
    },
    /// Resources other than one Kptfile would be written to a `Kptfile`.
    #[error(
        "a Kptfile must hold exactly one resource of kind Kptfile, but {path} would hold: {kinds}"
    )]
    #[diagnostic(code(krender::pkg::not_a_kptfile))]
    NotAKptfile {
        /// The Kptfile's package-relative path.
        path: String,
        /// The kinds of the resources given that path.
        kinds: String,
    },
    /// A value has no JSON form (NaN or infinity in a `.json` file).
    #[error("{path}: json: unsupported value: {value}")]
    #[diagnostic(code(krender::pkg::json_unsupported))]
    Json {
        /// The file being written.
        path: String,
        /// The value's text.
        value: String,
    },
    /// The atomic commit of the new files failed (nothing was changed when
    /// it failed before its commit point).
    #[error("{message}")]
    #[diagnostic(code(krender::pkg::commit_failed))]
    Commit {
        /// The lifecycle error's text, which names the path.
        message: String,
    },
    /// A file could not be written or removed.
    #[error("{}: {message}", path.display())]
    #[diagnostic(code(krender::pkg::write_failed))]
    Io {
        /// The file.
        path: PathBuf,
        /// The operating system's message.
        message: String,
    },
}

/// Annotations the writer removes before writing.
const READER_ANNOTATIONS: [&str; 6] = [
    resource::INDEX,
    resource::LEGACY_INDEX,
    resource::SEQ_INDENT,
    resource::PATH,
    resource::LEGACY_PATH,
    resource::PACKAGE_PATH,
];

/// A resource with its index annotation (`None` when absent).
type IndexedNode<'a> = (Option<i64>, &'a Node);

/// Renders resources into file contents keyed by package-relative path.
/// A resource without a path gets kyaml's default
/// (`[<namespace>/]<kind>_<name>.yaml`).
pub fn render_files(resources: &[Node]) -> Result<BTreeMap<String, String>, WriteError> {
    let mut groups: BTreeMap<String, Vec<IndexedNode<'_>>> = BTreeMap::new();
    for node in resources {
        let path = resource::annotation(node, resource::PATH)
            .or_else(|| resource::annotation(node, resource::LEGACY_PATH))
            .map_or_else(|| default_path(node), str::to_owned);
        let path = clean_relative_path(&path)?;
        let index = resource::annotation(node, resource::INDEX)
            .or_else(|| resource::annotation(node, resource::LEGACY_INDEX))
            .and_then(|index| index.trim().parse::<i64>().ok());
        groups.entry(path).or_default().push((index, node));
    }
    // A function that gives another resource the path of a Kptfile would
    // make the package unreadable (kpt writes it and its next render
    // fails): refused before anything is written.
    for (path, nodes) in &groups {
        let is_kptfile = Path::new(path)
            .file_name()
            .is_some_and(|name| name == KPTFILE_NAME);
        let kinds: Vec<&str> = nodes
            .iter()
            .map(|(_, node)| node.root().get_str(&["kind"]).unwrap_or_default())
            .collect();
        if is_kptfile && kinds != [KPTFILE_NAME] {
            return Err(WriteError::NotAKptfile {
                path: path.clone(),
                kinds: kinds.join(", "),
            });
        }
    }
    // Files are encoded independently: in parallel, collected in path order
    // so the first error reported does not depend on scheduling.
    let groups: Vec<(String, Vec<IndexedNode<'_>>)> = groups.into_iter().collect();
    let encoded: Vec<Result<(String, String), WriteError>> = groups
        .into_par_iter()
        .map(|(path, mut nodes)| {
            // Stable: equal indexes keep their incoming order; index-less first.
            nodes.sort_by_key(|(index, _)| index.map_or((0, 0), |index| (1, index)));
            let content = if path.ends_with(".json") && nodes.len() == 1 {
                let mut node = nodes[0].1.clone();
                for key in READER_ANNOTATIONS {
                    resource::remove_annotation(&mut node, key);
                }
                resource::clear_empty_annotations(&mut node);
                let mut out = String::new();
                let mut anchors = HashMap::new();
                collect_anchors(&node, &mut anchors);
                write_json(node.root(), &anchors, 0, &mut out, &path)?;
                out.push('\n');
                out
            } else {
                let mut out = String::new();
                let mut encoder = Encoder::new(&mut out);
                for (_, node) in nodes {
                    encoder.set_seq_indent(SeqIndent::from_annotation(resource::annotation(
                        node,
                        resource::SEQ_INDENT,
                    )));
                    encoder.encode_edited(node, &cleaning_edits(node));
                }
                out
            };
            Ok((path, content))
        })
        .collect();
    encoded.into_iter().collect()
}

/// The edits that write `node` as it is after removing the reader
/// annotations and then `resource::clear_empty_annotations` (an emptied or
/// null `annotations`, then an emptied `metadata`), without copying it.
fn cleaning_edits(node: &Node) -> Vec<Edit<'_>> {
    let mut edits = Vec::new();
    let root = node.root();
    let Some(metadata_at) = root.key_index("metadata") else {
        return edits;
    };
    let metadata = &root.content[metadata_at + 1];
    let mut annotations_gone = false;
    if let Some(at) = metadata.key_index("annotations") {
        let annotations = &metadata.content[at + 1];
        if annotations.is_null() {
            annotations_gone = true;
        } else if annotations.is_mapping() {
            let mut omitted = 0;
            for key in READER_ANNOTATIONS {
                if let Some(key_at) = annotations.key_index(key) {
                    edits.push(Edit::Omit {
                        key: &annotations.content[key_at],
                    });
                    omitted += 1;
                }
            }
            annotations_gone = omitted == annotations.content.len() / 2;
        }
        if annotations_gone {
            edits.push(Edit::Omit {
                key: &metadata.content[at],
            });
        }
    }
    let left = metadata.content.len() / 2 - usize::from(annotations_gone);
    if metadata.is_mapping() && left == 0 {
        edits.push(Edit::Omit {
            key: &root.content[metadata_at],
        });
    }
    edits
}

/// What writing `resources` into the package at `dir` would change: every
/// rendered file whose bytes differ from disk, and each file of
/// `files_read` that no resource maps to any more (deleted). Files that
/// held no resources are never in `files_read`, so they stay untouched.
/// Reads the current files but writes nothing.
pub fn plan_package(
    dir: &Path,
    resources: &[Node],
    files_read: &[String],
) -> Result<Changes, WriteError> {
    let _span = tracing::info_span!("plan").entered();
    let files = render_files(resources)?;
    let mut changes = Changes::default();
    for relative in files_read {
        if !files.contains_key(relative) && dir.join(relative).exists() {
            changes.delete(relative.clone());
        }
    }
    // Reading each current file to compare is I/O on many small files:
    // done in parallel, then recorded in path order.
    let changed: Vec<(String, String)> = files
        .into_par_iter()
        .filter(|(relative, content)| {
            !std::fs::read(dir.join(relative)).is_ok_and(|existing| existing == content.as_bytes())
        })
        .collect();
    for (relative, content) in changed {
        changes.write(relative, content);
    }
    Ok(changes)
}

/// Writes `resources` into the package at `dir` ([`plan_package`]) as one
/// atomic commit (`crate::pkg::commit`): after a crash the
/// package holds either all of the old or all of the new files. The caller
/// of an in-place render holds the package lock; without it, concurrent
/// writers still cannot interleave their commits.
pub fn write_package(
    dir: &Path,
    resources: &[Node],
    files_read: &[String],
    durability: commit::Durability,
) -> Result<(), WriteError> {
    let changes = plan_package(dir, resources, files_read)?;
    commit::commit(dir, &changes, durability).map_err(|error| WriteError::Commit {
        message: error.to_string(),
    })?;
    Ok(())
}

/// Writes `resources` as the new directory `dir`, which must not exist yet:
/// staged beside it and renamed into place, so `dir` is never partial.
pub fn write_new_dir(
    dir: &Path,
    resources: &[Node],
    durability: commit::Durability,
) -> Result<(), WriteError> {
    let files = render_files(resources)?;
    let files = files
        .into_iter()
        .map(|(relative, content)| (relative, content.into_bytes()))
        .collect();
    commit::commit_new_dir(dir, &files, durability).map_err(|error| WriteError::Commit {
        message: error.to_string(),
    })
}

/// kyaml's default path for a resource that has none.
fn default_path(node: &Node) -> String {
    let kind = resource::kind(node).unwrap_or_default().to_lowercase();
    let name = resource::name(node).unwrap_or_default();
    let file = format!("{kind}_{name}.yaml");
    match resource::namespace(node) {
        Some(namespace) if !namespace.is_empty() => format!("{namespace}/{file}"),
        _ => file,
    }
}

/// Normalises a relative path (`a/./b` → `a/b`) and rejects absolute paths
/// and paths that leave the package.
fn clean_relative_path(path: &str) -> Result<String, WriteError> {
    let invalid = || WriteError::InvalidPath {
        path: path.to_owned(),
    };
    let mut parts: Vec<String> = Vec::new();
    for component in Path::new(path).components() {
        match component {
            Component::Normal(part) => parts.push(part.to_string_lossy().into_owned()),
            Component::CurDir => {}
            Component::ParentDir => {
                parts.pop().ok_or_else(invalid)?;
            }
            Component::RootDir | Component::Prefix(_) => return Err(invalid()),
        }
    }
    if parts.is_empty() {
        return Err(invalid());
    }
    Ok(parts.join("/"))
}

fn collect_anchors<'n>(node: &'n Node, anchors: &mut HashMap<&'n str, &'n Node>) {
    if !node.anchor().is_empty() {
        anchors.insert(node.anchor(), node);
    }
    for child in &node.content {
        collect_anchors(child, anchors);
    }
}

/// Writes `node` as Go's `json.Encoder` with a 2-space indent would write
/// the value go-yaml decodes into `interface{}` (map keys sorted).
fn write_json(
    node: &Node,
    anchors: &HashMap<&str, &Node>,
    depth: usize,
    out: &mut String,
    path: &str,
) -> Result<(), WriteError> {
    let newline = |out: &mut String, depth: usize| {
        out.push('\n');
        out.extend(std::iter::repeat_n(' ', depth * 2));
    };
    match node.kind {
        NodeKind::Document => match node.content.first() {
            Some(root) => write_json(root, anchors, depth, out, path)?,
            None => out.push_str("null"),
        },
        NodeKind::Alias => match anchors.get(node.value.as_str()) {
            // An alias to an ancestor would recurse forever; go-yaml rejects
            // such documents, so write null rather than loop.
            Some(target) if !std::ptr::eq(*target, node) && depth < 256 => {
                write_json(target, anchors, depth, out, path)?;
            }
            _ => out.push_str("null"),
        },
        NodeKind::Mapping => {
            let mut entries: BTreeMap<&str, &Node> = BTreeMap::new();
            for pair in node.content.chunks_exact(2) {
                entries.insert(&pair[0].value, &pair[1]);
            }
            if entries.is_empty() {
                out.push_str("{}");
                return Ok(());
            }
            out.push('{');
            for (i, (key, value)) in entries.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                newline(out, depth + 1);
                write_json_string(key, out);
                out.push_str(": ");
                write_json(value, anchors, depth + 1, out, path)?;
            }
            newline(out, depth);
            out.push('}');
        }
        NodeKind::Sequence => {
            if node.content.is_empty() {
                out.push_str("[]");
                return Ok(());
            }
            out.push('[');
            for (i, item) in node.content.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                newline(out, depth + 1);
                write_json(item, anchors, depth + 1, out, path)?;
            }
            newline(out, depth);
            out.push(']');
        }
        NodeKind::Scalar => write_json_scalar(node, out, path)?,
    }
    Ok(())
}

fn write_json_scalar(node: &Node, out: &mut String, path: &str) -> Result<(), WriteError> {
    let value = node.value.as_str();
    match node.tag() {
        tag::NULL => out.push_str("null"),
        tag::BOOL => out.push_str(if value.eq_ignore_ascii_case("true") {
            "true"
        } else {
            "false"
        }),
        tag::INT => match parse_go_int(value) {
            Some(text) => out.push_str(&text),
            None => write_json_string(value, out),
        },
        tag::FLOAT => {
            let cleaned: String = value.chars().filter(|&c| c != '_').collect();
            let parsed = match cleaned.to_ascii_lowercase().trim_start_matches('+') {
                ".inf" => Some(f64::INFINITY),
                "-.inf" => Some(f64::NEG_INFINITY),
                ".nan" => Some(f64::NAN),
                other => other.parse::<f64>().ok(),
            };
            match parsed.map(format_go_json_float) {
                Some(Some(text)) => out.push_str(&text),
                Some(None) => {
                    return Err(WriteError::Json {
                        path: path.to_owned(),
                        value: value.to_owned(),
                    });
                }
                None => write_json_string(value, out),
            }
        }
        _ => write_json_string(value, out),
    }
    Ok(())
}

/// Decimal text of a go-yaml `!!int` (int64, else uint64), or `None`.
fn parse_go_int(value: &str) -> Option<String> {
    let cleaned: String = value.chars().filter(|&c| c != '_').collect();
    let (negative, unsigned) = match cleaned.as_bytes().first() {
        Some(b'-') => (true, &cleaned[1..]),
        Some(b'+') => (false, &cleaned[1..]),
        _ => (false, cleaned.as_str()),
    };
    let lower = unsigned.to_ascii_lowercase();
    let (radix, digits) = if let Some(d) = lower.strip_prefix("0x") {
        (16, d.to_owned())
    } else if let Some(d) = lower.strip_prefix("0o") {
        (8, d.to_owned())
    } else if let Some(d) = lower.strip_prefix("0b") {
        (2, d.to_owned())
    } else if lower.len() > 1 && lower.starts_with('0') {
        (8, lower[1..].to_owned())
    } else {
        (10, lower.clone())
    };
    let magnitude = u64::from_str_radix(&digits, radix).ok()?;
    if negative {
        if magnitude > 1u64 << 63 {
            return None;
        }
        Some(format!("-{magnitude}"))
    } else {
        Some(magnitude.to_string())
    }
}

/// Go's `encoding/json` string escaping (HTML-safe).
fn write_json_string(value: &str, out: &mut String) {
    out.push('"');
    for c in value.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '<' | '>' | '&' | '\u{2028}' | '\u{2029}' => {
                out.push_str(&format!("\\u{:04x}", u32::from(c)));
            }
            c if u32::from(c) < 0x20 => out.push_str(&format!("\\u{:04x}", u32::from(c))),
            c => out.push(c),
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::{
        READER_ANNOTATIONS, clean_relative_path, cleaning_edits, parse_go_int, write_json_string,
    };
    use crate::krm::resource;
    use crate::yaml::{Encoder, parse_document};

    /// Writing a resource with [`cleaning_edits`] gives the bytes of
    /// writing a copy with the reader annotations removed and emptied maps
    /// cleared, for every shape the metadata can take.
    #[test]
    fn cleaning_edits_write_what_removing_the_annotations_would() {
        let cases = [
            "kind: A\nmetadata:\n  name: a\n  annotations:\n    config.kubernetes.io/path: a.yaml\n    config.kubernetes.io/index: '0'\n",
            "kind: A\nmetadata:\n  annotations:\n    config.kubernetes.io/path: a.yaml # why\n# foot\nspec: {}\n",
            "kind: A\nmetadata:\n  name: a\n  annotations:\n    keep: x\n    internal.config.kubernetes.io/path: a.yaml\n",
            "kind: A\nmetadata:\n  name: a\n  annotations:\n",
            "kind: A\nmetadata:\n  name: a\n  annotations: {}\n",
            "kind: A\nmetadata: {}\nspec: 1\n",
            "kind: A\nmetadata:\nspec: 1\n",
            "kind: A\nmetadata:\n  annotations: {config.kubernetes.io/path: a.yaml, config.kubernetes.io/index: '1'}\n",
            "kind: A\nmetadata:\n  annotations:\n    config.kubernetes.io/path: a.yaml\n    config.kubernetes.io/path: b.yaml\n",
            "kind: A\nspec: 1\n",
            "- not a mapping\n",
        ];
        for case in cases {
            let node = parse_document(case).unwrap().unwrap();
            let mut copy = node.clone();
            for key in READER_ANNOTATIONS {
                resource::remove_annotation(&mut copy, key);
            }
            resource::clear_empty_annotations(&mut copy);
            let (mut expected, mut actual) = (String::new(), String::new());
            Encoder::new(&mut expected).encode(&copy);
            Encoder::new(&mut actual).encode_edited(&node, &cleaning_edits(&node));
            assert_eq!(actual, expected, "for {case:?}");
        }
    }

    /// A resource given a Kptfile's path (a function's output) would make
    /// the package unreadable: refused before anything is written.
    #[test]
    fn only_a_kptfile_goes_into_a_kptfile() {
        let resource = |kind: &str, path: &str, index: &str| {
            crate::yaml::parse_document(&format!(
                "apiVersion: v1\nkind: {kind}\nmetadata:\n  name: x\n  annotations:\n    config.kubernetes.io/path: '{path}'\n    config.kubernetes.io/index: '{index}'\n"
            ))
            .unwrap()
            .unwrap()
        };
        let kptfile = resource("Kptfile", "Kptfile", "0");
        assert!(super::render_files(std::slice::from_ref(&kptfile)).is_ok());
        let error = super::render_files(&[kptfile, resource("ConfigMap", "Kptfile", "1")])
            .unwrap_err()
            .to_string();
        assert_eq!(
            error,
            "a Kptfile must hold exactly one resource of kind Kptfile, but Kptfile would hold: Kptfile, ConfigMap"
        );
        assert!(super::render_files(&[resource("Secret", "sub/Kptfile", "0")]).is_err());
    }

    #[test]
    fn paths_must_stay_inside() {
        assert_eq!(clean_relative_path("a/./b.yaml").unwrap(), "a/b.yaml");
        assert_eq!(clean_relative_path("a/../b.yaml").unwrap(), "b.yaml");
        assert!(clean_relative_path("../b.yaml").is_err());
        assert!(clean_relative_path("/etc/b.yaml").is_err());
    }

    #[test]
    fn json_scalars() {
        assert_eq!(
            parse_go_int("12345678901234567890").as_deref(),
            Some("12345678901234567890")
        );
        assert_eq!(parse_go_int("0x1F").as_deref(), Some("31"));
        assert_eq!(parse_go_int("-12").as_deref(), Some("-12"));
        let mut out = String::new();
        write_json_string("j<&>\u{e9}", &mut out);
        assert_eq!(out, "\"j\\u003c\\u0026\\u003e\u{e9}\"");
    }
}
