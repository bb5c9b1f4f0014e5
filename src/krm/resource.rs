//! Accessors for KRM resources held as YAML nodes: identity fields and the
//! reader/orchestrator annotations kpt and kyaml keep on every resource.
//!
//! A resource is a [`Node`]: a Document node as read from a file (it keeps
//! document head/foot comments) or a bare Mapping node (after a function
//! round trip). Every accessor here looks through the document wrapper.

use crate::yaml::node::{Node, Style};

/// `config.kubernetes.io/index` (legacy reader annotation).
pub const LEGACY_INDEX: &str = "config.kubernetes.io/index";
/// `config.kubernetes.io/path` (legacy reader annotation).
pub const LEGACY_PATH: &str = "config.kubernetes.io/path";
/// `internal.config.kubernetes.io/index`: position of the resource in its file.
pub const INDEX: &str = "internal.config.kubernetes.io/index";
/// `internal.config.kubernetes.io/path`: file of the resource, relative to the package.
pub const PATH: &str = "internal.config.kubernetes.io/path";
/// `internal.config.kubernetes.io/seqindent`: `compact` or `wide`.
pub const SEQ_INDENT: &str = "internal.config.kubernetes.io/seqindent";
/// `internal.config.kubernetes.io/package-path`: absolute path of the owning package.
pub const PACKAGE_PATH: &str = "internal.config.kubernetes.io/package-path";
/// `internal.config.kubernetes.io/id`: position id set around a function call.
pub const ID: &str = "internal.config.kubernetes.io/id";
/// `config.k8s.io/id`: legacy position id set around a function call.
pub const LEGACY_ID: &str = "config.k8s.io/id";
/// `internal.config.kubernetes.io/annotations-migration-resource-id`.
pub const MIGRATION_ID: &str = "internal.config.kubernetes.io/annotations-migration-resource-id";

/// The resource's `apiVersion`, if it is a scalar.
pub fn api_version(resource: &Node) -> Option<&str> {
    resource.root().get_str(&["apiVersion"])
}

/// The resource's `kind`, if it is a scalar.
pub fn kind(resource: &Node) -> Option<&str> {
    resource.root().get_str(&["kind"])
}

/// The resource's `metadata.name`, if it is a scalar.
pub fn name(resource: &Node) -> Option<&str> {
    resource.root().get_str(&["metadata", "name"])
}

/// The resource's `metadata.namespace`, if it is a scalar.
pub fn namespace(resource: &Node) -> Option<&str> {
    resource.root().get_str(&["metadata", "namespace"])
}

/// A root mapping's apiVersion, kind, namespace and name (empty when
/// missing or not a string; the first of repeated keys counts, as
/// `Node::get`), read in one pass over its keys: what the kpt Go SDK sorts
/// its output by.
pub(crate) fn sdk_identity(item: &Node) -> (&str, &str, &str, &str) {
    fn text(node: Option<&Node>) -> &str {
        match node {
            Some(node) if node.is_scalar() => node.value.as_str(),
            _ => "",
        }
    }
    if !item.is_mapping() {
        return ("", "", "", "");
    }
    let (mut api_version, mut kind, mut metadata) = (None, None, None);
    for pair in item.content.chunks_exact(2) {
        match pair[0].value.as_str() {
            "apiVersion" if api_version.is_none() => api_version = Some(&pair[1]),
            "kind" if kind.is_none() => kind = Some(&pair[1]),
            "metadata" if metadata.is_none() => metadata = Some(&pair[1]),
            _ => {}
        }
    }
    let (mut namespace, mut name) = (None, None);
    if let Some(metadata) = metadata.filter(|node| node.is_mapping()) {
        for pair in metadata.content.chunks_exact(2) {
            match pair[0].value.as_str() {
                "namespace" if namespace.is_none() => namespace = Some(&pair[1]),
                "name" if name.is_none() => name = Some(&pair[1]),
                _ => {}
            }
        }
    }
    (text(api_version), text(kind), text(namespace), text(name))
}

/// The resource's `metadata.annotations` node, if any.
pub fn annotations(resource: &Node) -> Option<&Node> {
    resource.root().get_path(&["metadata", "annotations"])
}

/// The text of annotation `key` in an `annotations` mapping found by
/// [`annotations`], empty when absent or not a scalar: for callers reading
/// several annotations of one resource.
pub fn annotation_in<'a>(annotations: Option<&'a Node>, key: &str) -> &'a str {
    annotations
        .and_then(|annotations| annotations.get(key))
        .filter(|value| value.is_scalar())
        .map_or("", |value| value.value.as_str())
}

/// The value of annotation `key`, if present as a scalar.
pub fn annotation<'a>(resource: &'a Node, key: &str) -> Option<&'a str> {
    resource
        .root()
        .get_path(&["metadata", "annotations"])
        .and_then(|annotations| annotations.get(key))
        .filter(|value| value.is_scalar())
        .map(|value| value.value.as_str())
}

/// Sets annotation `key` to `value` as kyaml's `SetAnnotation` does: an
/// empty or null `annotations` is removed first; `metadata` and
/// `metadata.annotations` are created at the end of their parent when
/// missing (replacing a null `metadata` in place); an existing key
/// keeps its position and its value node's style, only the text changes; a
/// new key is appended with a value of style `new_style` (kyaml's reader uses
/// single quotes). Does nothing when the resource root is not a mapping.
pub fn set_annotation(resource: &mut Node, key: &str, value: &str, new_style: Style) {
    set_annotations(resource, &[(key, value)], new_style);
}

/// Sets annotation `key` to `value` written in `style`, whatever the style
/// of the value it replaces: kyaml's `SetAnnotation` puts a new
/// single-quoted node in place of the old one.
pub fn replace_annotation(resource: &mut Node, key: &str, value: &str, style: Style) {
    set_annotation(resource, key, value, style);
    if let Some(node) = annotations_mut(resource).and_then(|annotations| annotations.get_mut(key)) {
        node.style = style;
    }
}

/// [`set_annotation`] for each `(key, value)` in turn, finding (or
/// creating) the annotations mapping once: a reader sets five or six
/// annotations on every resource it parses.
pub fn set_annotations(resource: &mut Node, entries: &[(&str, &str)], new_style: Style) {
    // kyaml's SetAnnotation first clears an empty (`{}` or null) annotations
    // map, so it is re-created as a block mapping at the end of `metadata`.
    if let Some(metadata) = resource.root_mut().get_mut("metadata")
        && metadata
            .get("annotations")
            .is_some_and(|annotations| annotations.content.is_empty())
    {
        metadata.remove("annotations");
    }
    let Some(annotations) = annotations_mut(resource) else {
        return;
    };
    if entries.len() > 1 {
        // Exact: a vector's amortised `reserve` would double every mapping
        // a later single annotation grows (16 MB more at 1,000 packages);
        // `push_pair` grows the single case by a little.
        annotations.content.reserve_exact(2 * entries.len());
    }
    for &(key, value) in entries {
        if let Some(existing) = annotations.get_mut(key)
            && existing.is_scalar()
        {
            existing.value = value.into();
            existing.set_tag(crate::yaml::node::tag::STR);
            continue;
        }
        let mut node = Node::new_string(value);
        node.style = new_style;
        annotations.set(key, node);
    }
}

/// Removes annotation `key`; returns whether it was present.
pub fn remove_annotation(resource: &mut Node, key: &str) -> bool {
    resource
        .root_mut()
        .get_mut("metadata")
        .and_then(|metadata| metadata.get_mut("annotations"))
        .and_then(|annotations| annotations.remove(key))
        .is_some()
}

/// Removes `metadata.annotations` when it is empty or null, then `metadata`
/// when it is empty (kyaml's `ClearEmptyAnnotations` + writer clean-up).
pub fn clear_empty_annotations(resource: &mut Node) {
    let root = resource.root_mut();
    let Some(metadata) = root.get_mut("metadata") else {
        return;
    };
    let empty_annotations = metadata.get("annotations").is_some_and(|annotations| {
        annotations.is_null() || (annotations.is_mapping() && annotations.content.is_empty())
    });
    if empty_annotations {
        metadata.remove("annotations");
    }
    if metadata.is_mapping() && metadata.content.is_empty() {
        root.remove("metadata");
    }
}

/// The `metadata.annotations` mapping, created (at the end of its parent,
/// or in place of a null value) when missing.
fn annotations_mut(resource: &mut Node) -> Option<&mut Node> {
    let root = resource.root_mut();
    let metadata = root.entry_or_insert_with("metadata", Node::new_mapping)?;
    if metadata.is_null() {
        *metadata = Node::new_mapping();
    }
    let annotations = metadata.entry_or_insert_with("annotations", Node::new_mapping)?;
    if annotations.is_null() {
        *annotations = Node::new_mapping();
    }
    annotations.is_mapping().then_some(annotations)
}

/// Go's `path.Dir` (and `filepath.Dir` on Unix): everything before the
/// last slash, cleaned; `.` when there is no slash.
pub fn go_dir(path: &str) -> String {
    match path.rfind('/') {
        Some(slash) => clean_path(&path[..=slash]),
        None => ".".to_owned(),
    }
}

/// Go's `path.Clean` for slash-separated paths: the form kpt compares and
/// stores path annotations in.
pub fn clean_path(path: &str) -> String {
    if path.is_empty() {
        return ".".to_owned();
    }
    let rooted = path.starts_with('/');
    let mut parts: Vec<&str> = Vec::new();
    for part in path.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                if parts.last().is_some_and(|last| *last != "..") {
                    parts.pop();
                } else if !rooted {
                    parts.push("..");
                }
            }
            other => parts.push(other),
        }
    }
    let joined = parts.join("/");
    match (rooted, joined.is_empty()) {
        (true, _) => format!("/{joined}"),
        (false, true) => ".".to_owned(),
        (false, false) => joined,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::yaml::{SeqIndent, parse_document, to_string};

    #[test]
    fn set_annotations_matches_one_call_per_key() {
        let entries = [("b", "2"), ("a", "1"), ("b", "3"), ("c", "")];
        for source in [
            "kind: A\nmetadata:\n  annotations: {}\n  name: x\n",
            "kind: A\nmetadata:\n  annotations:\n    a: \"old\" # kept\n    z: q\n",
            "kind: A\nmetadata:\n",
            "kind: A\n",
        ] {
            let parsed = parse_document(source).unwrap().unwrap();
            let mut batch = parsed.clone();
            set_annotations(&mut batch, &entries, Style::SINGLE_QUOTED);
            let mut single = parsed;
            for (key, value) in entries {
                set_annotation(&mut single, key, value, Style::SINGLE_QUOTED);
            }
            assert_eq!(batch, single, "{source}");
            assert_eq!(annotation(&batch, "b"), Some("3"));
        }
        let mut resource = parse_document("kind: A\nmetadata:\n  annotations: {}\n  name: x\n")
            .unwrap()
            .unwrap();
        set_annotations(&mut resource, &[("a", "1")], Style::SINGLE_QUOTED);
        assert_eq!(
            to_string(resource.root(), SeqIndent::Compact),
            "kind: A\nmetadata:\n  name: x\n  annotations:\n    a: '1'\n"
        );
    }
}
