//! The kpt Go SDK's (`github.com/GoogleContainerTools/kpt-functions-sdk/go/fn`)
//! `KubeObject` accessors and the catalog's `pkg/kpt` package context, as the
//! builtins written with that SDK read and write resources: string getters
//! that read only `!!str` scalars under string keys (anything else reads as
//! empty), setters that replace a value with a new `!!str` scalar keeping its
//! comments, and the SDK's error texts.

use super::sdk;
use crate::yaml::node::{Node, NodeKind, tag};

const PACKAGE_CONTEXT_NAME: &str = "kptfile.kpt.dev";
const PARENT_PATH_ANNOTATION: &str = "config.kubernetes.io/parent-path";

/// The package context object (`pkg/kpt.FindPackageContext`).
pub(crate) struct PackageContext {
    /// `data.name`: the package name (never empty).
    pub(crate) name: String,
    /// The `config.kubernetes.io/parent-path` annotation.
    pub(crate) parent_path: String,
}

/// `kpt.FindPackageContext`: the one local-config object named
/// `kptfile.kpt.dev` and its `data.name`.
pub(crate) fn package_context(items: &[Node]) -> Result<PackageContext, String> {
    let matches: Vec<&Node> = items
        .iter()
        .filter(|item| {
            is_local_config(item)
                && go_string(item.get_path(&["metadata", "name"])) == PACKAGE_CONTEXT_NAME
        })
        .collect();
    let context = match matches[..] {
        [] => return Err("unable to find package context object".to_owned()),
        [context] => context,
        _ => return Err("found multiple matches for package-context object".to_owned()),
    };
    let name = match nested_string(context, &["data", "name"]) {
        Ok(name) => name,
        Err(()) => {
            return Err(format!(
                "error getting data.name from package context object: {}",
                unmatched_field(context, ".data.name", "string")
            ));
        }
    };
    if name.is_empty() {
        return Err("package name (data.name) not set in package context object".to_owned());
    }
    Ok(PackageContext {
        name,
        parent_path: annotation(context, PARENT_PATH_ANNOTATION),
    })
}

/// `kpt.IsResourceGroup`: kpt's inventory object.
pub(crate) fn is_resource_group(item: &Node) -> bool {
    is_gvk(item, ("kpt.dev/v1alpha1", "ResourceGroup"))
}

/// True when apiVersion and kind are exactly these (the SDK's
/// `IsGroupVersionKind` on a parsed group/version).
pub(crate) fn is_gvk(item: &Node, (api_version, kind): (&str, &str)) -> bool {
    go_string(item.get("apiVersion")) == api_version && go_string(item.get("kind")) == kind
}

/// The SDK's `IsLocalConfig`: the annotation is set to anything but `false`.
pub(crate) fn is_local_config(item: &Node) -> bool {
    let value = annotation(item, sdk::LOCAL_CONFIG);
    !value.is_empty() && value != "false"
}

/// The SDK's `GetAnnotation`: the string value, empty on any mismatch.
pub(crate) fn annotation(item: &Node, key: &str) -> String {
    nested_string(item, &["metadata", "annotations", key]).unwrap_or_default()
}

/// A string scalar's text (`!!str`, as the SDK's `GetNestedString`
/// accepts), or empty.
pub(crate) fn go_string(node: Option<&Node>) -> String {
    node.filter(|node| is_string(node))
        .map(|node| node.value.to_string())
        .unwrap_or_default()
}

pub(crate) fn is_string(node: &Node) -> bool {
    node.is_scalar() && (node.tag() == tag::STR || node.tag().is_empty())
}

/// The SDK's `GetNestedString`: `Ok("")` when missing, `Err` when a step is
/// not a mapping or the value not a string.
pub(crate) fn nested_string(item: &Node, path: &[&str]) -> Result<String, ()> {
    let mut node = item;
    for (i, key) in path.iter().enumerate() {
        if !node.is_mapping() {
            return Err(());
        }
        let Some(next) = string_key_value(node, key) else {
            return Ok(String::new());
        };
        node = next;
        if i + 1 < path.len() && !node.is_mapping() {
            return Err(());
        }
    }
    if is_string(node) {
        Ok(node.value.to_string())
    } else {
        Err(())
    }
}

/// A mapping's value for `key`, matching string keys only (as the SDK).
pub(crate) fn string_key_value<'a>(mapping: &'a Node, key: &str) -> Option<&'a Node> {
    mapping
        .pairs()
        .find(|(k, _)| is_string(k) && k.value == key)
        .map(|(_, value)| value)
}

/// The SDK's `ErrUnmatchedField` text. Its object GVK is read from fields
/// named `group`, `version` and `kind` of the object itself (as the SDK's
/// `asKubeObject` does), so the apiVersion part is nearly always empty.
pub(crate) fn unmatched_field(object: &Node, field_path: &str, data_type: &str) -> String {
    let group = go_string(object.get("group"));
    let version = go_string(object.get("version"));
    let kind = go_string(object.get("kind"));
    let group_version = if group.is_empty() {
        version
    } else {
        format!("{group}/{version}")
    };
    format!(
        "Resource(apiVersion={group_version}, kind={kind}) has unmatched field type {} in fieldpath {field_path}",
        sdk::go_quote(data_type)
    )
}

/// The SDK's `SetNestedString`: creates missing mappings on the way
/// (appended), replaces the value with a new `!!str` scalar keeping its
/// comments, and fails when a step on the way is not a mapping.
pub(crate) fn set_nested_string(item: &mut Node, path: &[&str], value: &str) -> Result<(), String> {
    let fail = |found: &Node| {
        let variant = match found.kind {
            NodeKind::Sequence => "*internal.sliceVariant",
            _ => "*internal.scalarVariant",
        };
        format!(
            "unable to set {value} at fields [{}] with error: incorrect type, was {variant}",
            path.join(" ")
        )
    };
    let Some((last, steps)) = path.split_last() else {
        return Ok(());
    };
    let mut node = item;
    for key in steps {
        let index = node
            .pairs()
            .position(|(k, _)| is_string(k) && k.value == *key);
        node = match index {
            Some(i) => {
                let child = &mut node.content[2 * i + 1];
                if !child.is_mapping() {
                    return Err(fail(child));
                }
                child
            }
            None => {
                node.push_pair(Node::new_string(*key), Node::new_mapping());
                let len = node.content.len();
                &mut node.content[len - 1]
            }
        };
    }
    let index = node
        .pairs()
        .position(|(k, _)| is_string(k) && k.value == *last);
    match index {
        Some(i) => sdk::replace_with_string(&mut node.content[2 * i + 1], value),
        None => node.push_pair(Node::new_string(*last), Node::new_string(value)),
    }
    Ok(())
}

/// The group of a Go-parsed apiVersion (`schema.ParseGroupVersion`), or
/// `None` when Go cannot parse it (more than one `/`).
pub(crate) fn group_version(api_version: &str) -> (Option<String>, String) {
    match parse_group_version(api_version) {
        Ok((group, version)) => (Some(group.to_owned()), version.to_owned()),
        Err(_) => (None, String::new()),
    }
}

/// `schema.ParseGroupVersion`: `(group, version)`, or Go's error text when
/// the text has more than one `/`.
pub(crate) fn parse_group_version(api_version: &str) -> Result<(&str, &str), String> {
    if api_version.is_empty() || api_version == "/" {
        return Ok(("", ""));
    }
    match api_version.split_once('/') {
        None => Ok(("", api_version)),
        Some((group, version)) if !version.contains('/') => Ok((group, version)),
        Some(_) => Err(format!("unexpected GroupVersion string: {api_version}")),
    }
}

/// A `schema.GroupVersionKind`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Gvk {
    pub(crate) group: String,
    pub(crate) version: String,
    pub(crate) kind: String,
}

impl Gvk {
    /// A GVK from its parts.
    pub(crate) fn new(group: &str, version: &str, kind: &str) -> Gvk {
        Gvk {
            group: group.to_owned(),
            version: version.to_owned(),
            kind: kind.to_owned(),
        }
    }

    /// `KubeObject.GroupVersionKind()`: the parsed apiVersion and the kind
    /// (all empty when the apiVersion does not parse).
    pub(crate) fn of(item: &Node) -> Gvk {
        match parse_group_version(&go_string(item.get("apiVersion"))) {
            Ok((group, version)) => Gvk::new(group, version, &go_string(item.get("kind"))),
            Err(_) => Gvk::default(),
        }
    }

    /// `GroupVersion.String()`: the version alone for the core group.
    pub(crate) fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// `KubeObject.IsGVK`: each part matches when equal, or when either
    /// side is empty.
    pub(crate) fn is_like(&self, group: &str, version: &str, kind: &str) -> bool {
        let matches =
            |mine: &str, asked: &str| mine.is_empty() || asked.is_empty() || mine == asked;
        matches(&self.kind, kind) && matches(&self.group, group) && matches(&self.version, version)
    }
}

/// Go's `%v` of a `schema.GroupVersionKind`.
impl std::fmt::Display for Gvk {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}, Kind={}", self.group, self.version, self.kind)
    }
}

/// `KubeObject.GetName()`.
pub(crate) fn name(item: &Node) -> String {
    nested_string(item, &["metadata", "name"]).unwrap_or_default()
}

/// `KubeObject.GetNamespace()`.
pub(crate) fn namespace(item: &Node) -> String {
    nested_string(item, &["metadata", "namespace"]).unwrap_or_default()
}

/// `SubObject.GetString(key)` on a mapping: the string value, else empty
/// (a value of another type, or a node that is not a mapping, reads as
/// empty).
pub(crate) fn get_string(node: &Node, key: &str) -> String {
    if !node.is_mapping() {
        return String::new();
    }
    go_string(string_key_value(node, key))
}

/// `SubObject.NestedString(key)`'s found flag and value: `None` when the
/// key is missing, `Some("")` when its value is not a string.
pub(crate) fn found_string(node: &Node, key: &str) -> Option<String> {
    if !node.is_mapping() {
        return None;
    }
    string_key_value(node, key).map(|value| go_string(Some(value)))
}

/// The value node under a string key of a mapping, for editing.
pub(crate) fn string_key_value_mut<'a>(mapping: &'a mut Node, key: &str) -> Option<&'a mut Node> {
    if !mapping.is_mapping() {
        return None;
    }
    let index = mapping
        .pairs()
        .position(|(k, _)| is_string(k) && k.value == key)?;
    mapping.content.get_mut(2 * index + 1)
}

/// The SDK's `GetNestedStringMap(metadata, annotations)` lookup of one
/// key: each entry's key and value text, the last of repeated keys
/// winning; `metadata` must be a mapping.
pub(crate) fn annotation_text(item: &Node, key: &str) -> Option<String> {
    let metadata = string_key_value(item, "metadata").filter(|node| node.is_mapping())?;
    let annotations = string_key_value(metadata, "annotations")?;
    annotations
        .content
        .chunks_exact(2)
        .rev()
        .find(|pair| pair[0].value == key)
        .map(|pair| pair[1].value.to_string())
}

/// The SDK's `ConfigObjectResult` for an error about the function config:
/// its reference and file (index -1 when it has no index annotation).
pub(crate) fn config_object_error(message: String, config: &Node) -> sdk::FnResult {
    let index = annotation(config, crate::krm::resource::INDEX);
    sdk::FnResult {
        resource_ref: Some(sdk::ResourceRef {
            api_version: go_string(config.get("apiVersion")),
            kind: go_string(config.get("kind")),
            name: name(config),
            namespace: namespace(config),
        }),
        file: Some(sdk::FileRef {
            path: annotation(config, crate::krm::resource::PATH),
            // Go's `strconv.Atoi`, its error ignored.
            index: if index.is_empty() {
                -1
            } else {
                index.parse().unwrap_or(0)
            },
        }),
        ..sdk::FnResult::error(message)
    }
}
