//! `upsert-resource` (kyaml legacy framework, family L): the function
//! config is a resource, or a `List` of them, to put into the package.
//!
//! As the function's Go source: each one replaces every item with the same
//! group, kind, name and namespace (and, when it names one with
//! `config.kubernetes.io/target-path`, the same file), keeping that item's
//! path and index annotations; with no such item it is added, without
//! path and index (or at its target path), for kpt to file it. The
//! annotations of a replaced or added resource are written again, sorted,
//! at the end of its `metadata` (kyaml's `SetAnnotations`). Items carrying
//! a function annotation (kpt v0.x function configs) are never replaced.

use std::collections::BTreeMap;

use super::sdk::{Outcome, ResourceList};
use crate::krm::resource;
use crate::yaml::node::{Node, NodeKind};

/// Names a file to add the resource to, or the file of the items it may
/// replace.
const TARGET_PATH: &str = "config.kubernetes.io/target-path";
/// Function annotations of kpt v0.x.
const FUNCTION_ANNOTATIONS: [&str; 2] = ["config.kubernetes.io/function", "config.k8s.io/function"];

/// Runs upsert-resource on a parsed input.
pub(crate) fn run(input: ResourceList) -> Outcome {
    let upserts: Vec<Node> = match &input.function_config {
        Some(config) if config.get_str(&["kind"]) == Some("List") => config
            .get("items")
            .map(|items| items.content.to_vec())
            .unwrap_or_default(),
        Some(config) => vec![config.clone()],
        None => Vec::new(),
    };
    let mut input = input;
    for upsert in upserts {
        upsert_one(&mut input.items, upsert);
    }
    Outcome::kyaml(input, Vec::new())
}

/// What the function compares and keeps of a resource.
struct Meta {
    group: String,
    kind: String,
    name: String,
    namespace: String,
    annotations: BTreeMap<String, String>,
}

impl Meta {
    fn of(node: &Node) -> Meta {
        let root = node.root();
        let text = |path: &[&str]| root.get_str(path).unwrap_or_default().to_owned();
        let api_version = text(&["apiVersion"]);
        let group = match api_version.split_once('/') {
            Some((group, _)) => group.to_owned(),
            None => String::new(),
        };
        let annotations = root
            .get_path(&["metadata", "annotations"])
            .map(|annotations| {
                annotations
                    .pairs()
                    .filter(|(_, value)| value.is_scalar())
                    .map(|(key, value)| (key.value.to_string(), value.value.to_string()))
                    .collect()
            })
            .unwrap_or_default();
        Meta {
            group,
            kind: text(&["kind"]),
            name: text(&["metadata", "name"]),
            namespace: text(&["metadata", "namespace"]),
            annotations,
        }
    }

    fn annotation(&self, key: &str) -> &str {
        self.annotations.get(key).map_or("", String::as_str)
    }

    fn is_function_config(&self) -> bool {
        FUNCTION_ANNOTATIONS
            .iter()
            .any(|key| !self.annotation(key).is_empty())
    }

    /// The same group, kind, name and namespace, and the target path (if
    /// `self` names one) is `other`'s file.
    fn same_resource(&self, other: &Meta) -> bool {
        let target = self.annotation(TARGET_PATH);
        self.group == other.group
            && self.kind == other.kind
            && self.name == other.name
            && self.namespace == other.namespace
            && (target.is_empty() || target == other.annotation(resource::PATH))
    }
}

fn upsert_one(items: &mut Vec<Node>, upsert: Node) {
    let meta = Meta::of(&upsert);
    let mut replaced = false;
    for item in items.iter_mut() {
        let matched = Meta::of(item);
        if matched.is_function_config() || !meta.same_resource(&matched) {
            continue;
        }
        // The input's own annotations, with the matched item's path and
        // index, without function or target-path annotations.
        let mut annotations = meta.annotations.clone();
        annotations.insert(
            resource::PATH.to_owned(),
            matched.annotation(resource::PATH).to_owned(),
        );
        annotations.insert(
            resource::INDEX.to_owned(),
            matched.annotation(resource::INDEX).to_owned(),
        );
        remove_function_annotations(&mut annotations);
        annotations.remove(TARGET_PATH);
        let mut node = upsert.clone();
        set_annotations(&mut node, &annotations);
        *item = node;
        replaced = true;
    }
    if replaced {
        return;
    }
    let mut annotations = meta.annotations.clone();
    remove_function_annotations(&mut annotations);
    annotations.remove(resource::PATH);
    annotations.remove(resource::INDEX);
    let target = meta.annotation(TARGET_PATH);
    if !target.is_empty() {
        annotations.insert(resource::PATH.to_owned(), target.to_owned());
    }
    annotations.remove(TARGET_PATH);
    let mut node = upsert;
    set_annotations(&mut node, &annotations);
    items.push(node);
}

fn remove_function_annotations(annotations: &mut BTreeMap<String, String>) {
    for key in FUNCTION_ANNOTATIONS {
        annotations.remove(key);
    }
}

/// kyaml's `SetAnnotations`: the `annotations` field is removed, then,
/// unless `annotations` is empty, added again at the end of `metadata`
/// with its keys sorted.
fn set_annotations(node: &mut Node, annotations: &BTreeMap<String, String>) {
    let root = node.root_mut();
    if root.kind != NodeKind::Mapping {
        return;
    }
    let Some(metadata) = root.entry_or_insert_with("metadata", Node::new_mapping) else {
        return;
    };
    if metadata.kind != NodeKind::Mapping {
        return;
    }
    metadata.remove("annotations");
    if annotations.is_empty() {
        return;
    }
    let mut map = Node::new_mapping();
    for (key, value) in annotations {
        map.push_pair(
            Node::new_string(key.as_str()),
            Node::new_string(value.as_str()),
        );
    }
    metadata.push_pair(Node::new_string("annotations"), map);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::yaml::{SeqIndent, parse_document, to_string};

    fn render(items: &[&str], config: &str) -> String {
        let node = |text: &str| parse_document(text).unwrap().unwrap().into_root();
        let outcome = run(ResourceList {
            items: items.iter().map(|text| node(text)).collect(),
            function_config: Some(node(config)),
        });
        outcome
            .items
            .iter()
            .map(|item| to_string(item, SeqIndent::Compact))
            .collect::<Vec<_>>()
            .join("---\n")
    }

    /// The function's own test cases, in short: replace keeps the matched
    /// item's path, add leaves the path to kpt or the target path.
    #[test]
    fn replaces_matching_resources_and_adds_the_others() {
        let service = "apiVersion: v1\nkind: Service\nmetadata:\n  name: my\n  annotations:\n    foo: bar\n    internal.config.kubernetes.io/path: f1.yaml\n    internal.config.kubernetes.io/index: '0'\nspec:\n  port: 80\n";
        let replaced = render(
            &[service],
            "apiVersion: v1\nkind: Service\nmetadata:\n  name: my\n  annotations:\n    abc: def\nspec:\n  port: 8080\n",
        );
        assert_eq!(
            replaced,
            "apiVersion: v1\nkind: Service\nmetadata:\n  name: my\n  annotations:\n    abc: def\n    internal.config.kubernetes.io/index: \"0\"\n    internal.config.kubernetes.io/path: f1.yaml\nspec:\n  port: 8080\n"
        );
        let added = render(
            &[service],
            "apiVersion: v1\nkind: List\nitems:\n- apiVersion: apps/v1\n  kind: Deployment\n  metadata:\n    name: d\n    annotations:\n      config.kubernetes.io/target-path: f2.yaml\n      internal.config.kubernetes.io/path: foo.yaml\n",
        );
        assert!(
            added.ends_with("kind: Deployment\nmetadata:\n  name: d\n  annotations:\n    internal.config.kubernetes.io/path: f2.yaml\n"),
            "{added}"
        );
    }
}
