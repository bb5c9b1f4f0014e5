//! `generate-folders` (TypeScript, kpt-functions SDK 0.15, js-yaml 3.14):
//! turns each `ResourceHierarchy` into Config Connector `Folder`
//! resources (`resourcemanager.cnrm.cloud.google.com/v1beta1`), as the
//! function's source (GoogleContainerTools/kpt-functions-catalog,
//! `functions/ts/generate-folders`) does:
//!
//! - `blueprints.cloud.google.com/v1alpha3` (native references:
//!   `organizationRef`/`folderRef` with `external` for top-level folders,
//!   `folderRef.name` plus a `config.kubernetes.io/depends-on` annotation
//!   when the hierarchy has a namespace below them), `cft.dev/v1alpha2`
//!   (the same tree with `cnrm.cloud.google.com/organization-id` /
//!   `folder-ref` annotations, and a `warn` result asking to upgrade) and
//!   `cft.dev/v1alpha1` (`spec.layers` × `spec.config`, annotation
//!   references, a `warn` result);
//! - `spec.config` entries are names or `{name: [children]}` /
//!   `{name: {$subtree: key}}`; Folder names are the dotted path,
//!   normalized (lower case, quotes dropped, `_` and space to `-`, anything
//!   else outside `[a-z0-9.-]` dropped); the hierarchy's annotations are
//!   inherited except local-config, the function annotation and kpt's
//!   path, index and id annotations;
//! - errors are results (`has an undefined parentRef`, `has an unsupported
//!   parentRef kind`, `references non-existent subtree`, the v1 layer
//!   message) and make the function exit 1.
//!
//! Around it, the SDK: items are kept sorted by
//! `apiVersion/kind/namespace/name` (a later duplicate replaces an
//! earlier one; a generated Folder replaces an item with its key), every
//! item takes the js-yaml round trip (`jsyaml`), the output list has no
//! function config, and results have the SDK's shape (`resourceRef` with
//! `namespace` always written, `file.index` only when not 0).
//!
//! A crash of the function (an input js-yaml rejects, an item without
//! metadata, a hierarchy whose `spec.config` is not a list, mismatching
//! legacy and internal annotations) exits 2 with nothing on stdout and
//! the error's first line on stderr (the image prints a Node.js stack
//! trace after it).

use std::collections::HashMap;

use super::jsyaml::{self, Js, JsObject};
use super::sdk::{Outcome, ResourceList};
use crate::yaml::node::Node;

const V3: &str = "blueprints.cloud.google.com/v1alpha3";
const V2: &str = "cft.dev/v1alpha2";
const V1: &str = "cft.dev/v1alpha1";
const HIERARCHY_KIND: &str = "ResourceHierarchy";
const FOLDER_API_VERSION: &str = "resourcemanager.cnrm.cloud.google.com/v1beta1";
const FOLDER_GROUP: &str = "resourcemanager.cnrm.cloud.google.com";
const DEPENDS_ON: &str = "config.kubernetes.io/depends-on";

const PATH: &str = "internal.config.kubernetes.io/path";
const INDEX: &str = "internal.config.kubernetes.io/index";
const ID: &str = "internal.config.kubernetes.io/id";
const LEGACY_PATH: &str = "config.kubernetes.io/path";
const LEGACY_INDEX: &str = "config.kubernetes.io/index";
const LEGACY_ID: &str = "config.k8s.io/id";

/// A thrown JavaScript error: its first stack line.
struct Crash(String);

fn type_error(what: &str) -> Crash {
    Crash(format!("TypeError: {what}"))
}

/// One result as the SDK writes it.
struct JsResult(Node);

/// The SDK's document store: items sorted by key.
struct Configs {
    objects: Vec<(Vec<u16>, Js)>,
    results: Vec<JsResult>,
}

/// `${apiVersion}/${kind}/${namespace || ''}/${name}`, compared as UTF-16.
fn key_of(object: &Js) -> Result<Vec<u16>, Crash> {
    let metadata = object
        .field("metadata")
        .filter(|metadata| !matches!(metadata, Js::Null))
        .ok_or_else(|| type_error("Cannot read property 'namespace' of undefined"))?;
    let text = |value: Option<&Js>| value.map_or_else(|| "undefined".to_owned(), Js::to_js_string);
    let namespace = match metadata.field("namespace") {
        Some(value) if value.truthy() => value.to_js_string(),
        _ => String::new(),
    };
    Ok(format!(
        "{}/{}/{}/{}",
        text(object.field("apiVersion")),
        text(object.field("kind")),
        namespace,
        text(metadata.field("name"))
    )
    .encode_utf16()
    .collect())
}

impl Configs {
    fn insert(&mut self, object: Js) -> Result<(), Crash> {
        let key = key_of(&object)?;
        match self
            .objects
            .binary_search_by(|(existing, _)| existing.cmp(&key))
        {
            Ok(found) => self.objects[found] = (key, object),
            Err(position) => self.objects.insert(position, (key, object)),
        }
        Ok(())
    }

    fn of_kind(&self, api_version: &str) -> Vec<Js> {
        self.objects
            .iter()
            .map(|(_, object)| object)
            .filter(|object| {
                matches!(object.field("apiVersion"), Some(Js::Str(v)) if v == api_version)
                    && matches!(object.field("kind"), Some(Js::Str(k)) if k == HIERARCHY_KIND)
            })
            .cloned()
            .collect()
    }
}

/// The value of an annotation (`undefined` when missing).
fn annotation<'a>(object: &'a Js, key: &str) -> Option<&'a Js> {
    object
        .field("metadata")
        .and_then(|metadata| metadata.field("annotations"))
        .and_then(|annotations| annotations.field(key))
}

/// JavaScript's `Number(value)` for an annotation value.
fn js_number(value: &Js) -> f64 {
    match value {
        Js::Num(number) => *number,
        Js::Bool(b) => f64::from(u8::from(*b)),
        Js::Null => 0.0,
        Js::Str(text) => {
            let trimmed = text.trim();
            if trimmed.is_empty() {
                return 0.0;
            }
            for (prefix, radix) in [
                ("0x", 16),
                ("0X", 16),
                ("0o", 8),
                ("0O", 8),
                ("0b", 2),
                ("0B", 2),
            ] {
                if let Some(rest) = trimmed.strip_prefix(prefix) {
                    return u128::from_str_radix(rest, radix).map_or(f64::NAN, |n| n as f64);
                }
            }
            let unsigned = trimmed.trim_start_matches(['+', '-']);
            if unsigned == "Infinity" {
                return if trimmed.starts_with('-') {
                    f64::NEG_INFINITY
                } else {
                    f64::INFINITY
                };
            }
            let decimal = unsigned
                .bytes()
                .all(|b| b.is_ascii_digit() || matches!(b, b'.' | b'e' | b'E' | b'+' | b'-'))
                && unsigned
                    .bytes()
                    .next()
                    .is_some_and(|b| b.is_ascii_digit() || b == b'.');
            if decimal {
                trimmed.parse::<f64>().unwrap_or(f64::NAN)
            } else {
                f64::NAN
            }
        }
        _ => f64::NAN,
    }
}

/// The SDK's `kubernetesObjectResult(message, object, undefined, severity)`.
fn object_result(message: String, object: &Js, severity: &str) -> JsResult {
    let mut result = JsObject::default();
    result.set("message", Js::Str(message));
    result.set("severity", Js::Str(severity.to_owned()));
    let metadata = object.field("metadata");
    let mut reference = JsObject::default();
    reference.set(
        "apiVersion",
        object.field("apiVersion").cloned().unwrap_or(Js::Null),
    );
    reference.set("kind", object.field("kind").cloned().unwrap_or(Js::Null));
    let namespace = metadata
        .and_then(|metadata| metadata.field("namespace"))
        .filter(|value| value.truthy())
        .cloned()
        .unwrap_or_else(|| Js::Str(String::new()));
    reference.set("namespace", namespace);
    let name = metadata
        .and_then(|metadata| metadata.field("name"))
        .cloned();
    let mut node_reference = reference;
    let mut file = JsObject::default();
    let path = annotation(object, PATH)
        .filter(|value| value.truthy())
        .or_else(|| annotation(object, LEGACY_PATH));
    if let Some(path) = path {
        file.set("path", path.clone());
    }
    let index = [INDEX, LEGACY_INDEX].into_iter().find_map(|key| {
        let number = annotation(object, key).map_or(f64::NAN, js_number);
        (number != 0.0 && !number.is_nan()).then_some(number)
    });
    if let Some(index) = index {
        file.set("index", Js::Num(index));
    }
    // `name: undefined` is skipped by the dump (`skipInvalid`).
    if let Some(name) = name {
        node_reference.set("name", name);
    }
    result.set("resourceRef", Js::Obj(node_reference));
    result.set("file", Js::Obj(file));
    JsResult(jsyaml::to_node(&Js::Obj(result)))
}

fn name_of(hierarchy: &Js) -> String {
    hierarchy
        .field("metadata")
        .and_then(|metadata| metadata.field("name"))
        .map_or_else(|| "undefined".to_owned(), Js::to_js_string)
}

fn old_hierarchy_warning(hierarchy: &Js) -> JsResult {
    object_result(
        format!(
            "ResourceHierarchy {} references an older Resource Hierarchy GroupVersion. Latest GroupVersion is blueprints.cloud.google.com/v1alpha3.",
            name_of(hierarchy)
        ),
        hierarchy,
        "warn",
    )
}

/// A node of the folder tree.
#[derive(Clone, Debug)]
struct TreeNode {
    /// `None`: `undefined` (the first key of an object without keys).
    name: Option<Js>,
    kind: Option<String>,
    children: Vec<TreeNode>,
}

impl TreeNode {
    fn named(name: Option<Js>) -> TreeNode {
        TreeNode {
            name,
            kind: None,
            children: Vec::new(),
        }
    }
}

/// The function's `normalize`.
fn normalize(name: &str) -> String {
    name.to_lowercase()
        .chars()
        .filter(|c| *c != '\'' && *c != '"')
        .map(|c| if c == '_' || c == ' ' { '-' } else { c })
        .filter(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '.' | '-' | ' '))
        .collect()
}

/// JavaScript's `Array#join('.')` (null and undefined join as empty).
fn join(path: &[Option<Js>]) -> String {
    path.iter()
        .map(|part| match part {
            None | Some(Js::Null) => String::new(),
            Some(other) => other.to_js_string(),
        })
        .collect::<Vec<_>>()
        .join(".")
}

/// The function's `generateManifest`.
fn manifest(
    name: &Option<Js>,
    path: &[Option<Js>],
    parent: &TreeNode,
    annotations: &JsObject,
    namespace: Option<&Js>,
    native: bool,
) -> Js {
    let joined = join(path);
    let parent_name = if joined.is_empty() {
        parent
            .name
            .as_ref()
            .map_or_else(|| "undefined".to_owned(), Js::to_js_string)
    } else {
        joined
    };
    let mut combined = annotations.clone();
    let mut reference = JsObject::default();
    if native {
        if path.is_empty() {
            let mut external = JsObject::default();
            external.set("external", Js::Str(parent_name.clone()));
            let field = if parent.kind.as_deref() == Some("Organization") {
                "organizationRef"
            } else {
                "folderRef"
            };
            reference.set(field, Js::Obj(external));
        } else {
            let mut named = JsObject::default();
            named.set("name", Js::Str(normalize(&parent_name)));
            reference.set("folderRef", Js::Obj(named));
            if let Some(namespace) = namespace {
                combined.set(
                    DEPENDS_ON,
                    Js::Str(format!(
                        "{FOLDER_GROUP}/namespaces/{}/Folder/{}",
                        namespace.to_js_string(),
                        normalize(&parent_name)
                    )),
                );
            }
        }
    } else {
        let key = if parent.kind.as_deref() == Some("Organization") {
            "cnrm.cloud.google.com/organization-id"
        } else {
            "cnrm.cloud.google.com/folder-ref"
        };
        combined.set(key, Js::Str(normalize(&parent_name)));
    }
    let mut full_path = path.to_vec();
    full_path.push(name.clone());
    let mut metadata = JsObject::default();
    metadata.set("name", Js::Str(normalize(&join(&full_path))));
    if !combined.is_empty() {
        metadata.set("annotations", Js::Obj(combined));
    }
    let mut spec = JsObject::default();
    // `displayName: undefined` is skipped by the dump.
    if let Some(name) = name {
        spec.set("displayName", name.clone());
    }
    for (key, value) in reference.ordered() {
        spec.set(key, value.clone());
    }
    if let Some(namespace) = namespace {
        metadata.set("namespace", namespace.clone());
    }
    let mut folder = JsObject::default();
    folder.set("apiVersion", Js::Str(FOLDER_API_VERSION.to_owned()));
    folder.set("kind", Js::Str("Folder".to_owned()));
    folder.set("metadata", Js::Obj(metadata));
    folder.set("spec", Js::Obj(spec));
    Js::Obj(folder)
}

/// The annotations generated Folders inherit.
fn inheritable(hierarchy: &Js) -> JsObject {
    let mut copy = hierarchy
        .field("metadata")
        .and_then(|metadata| metadata.field("annotations"))
        .and_then(Js::as_object)
        .cloned()
        .unwrap_or_default();
    for key in [
        "config.kubernetes.io/local-config",
        "config.k8s.io/function",
        ID,
        LEGACY_ID,
        PATH,
        LEGACY_PATH,
        INDEX,
        LEGACY_INDEX,
    ] {
        copy.remove(key);
    }
    copy
}

enum TreeError {
    MissingSubtree(String),
    Crash(Crash),
}

/// JavaScript's `for (const x of value)` over a value.
fn iterate(value: Option<&Js>) -> Result<Vec<Js>, Crash> {
    match value {
        Some(Js::Arr(items)) => Ok(items.clone()),
        Some(Js::Str(text)) => Ok(text.chars().map(|c| Js::Str(c.to_string())).collect()),
        None => Err(type_error(
            "undefined is not iterable (cannot read property Symbol(Symbol.iterator))",
        )),
        Some(Js::Null) => Err(type_error(
            "null is not iterable (cannot read property Symbol(Symbol.iterator))",
        )),
        Some(_) => Err(type_error("value is not iterable")),
    }
}

fn add_child(
    parent: &mut TreeNode,
    child: &Js,
    subtrees: &HashMap<String, Vec<TreeNode>>,
) -> Result<(), TreeError> {
    match child {
        Js::Null => Ok(()),
        Js::Str(_) => {
            parent.children.push(TreeNode::named(Some(child.clone())));
            Ok(())
        }
        Js::Obj(_) | Js::Arr(_) | Js::Date(_) => {
            let keys: Vec<String> = match child {
                Js::Obj(object) => object
                    .ordered()
                    .into_iter()
                    .map(|(k, _)| k.to_owned())
                    .collect(),
                Js::Arr(items) => (0..items.len()).map(|i| i.to_string()).collect(),
                _ => Vec::new(),
            };
            let name = keys.first().cloned();
            let mut node = TreeNode::named(name.clone().map(Js::Str));
            let children = match (child, &name) {
                (Js::Obj(object), Some(name)) => object.get(name).cloned(),
                (Js::Arr(items), Some(_)) => items.first().cloned(),
                _ => None,
            };
            match &children {
                Some(Js::Arr(items)) => {
                    for item in items {
                        add_child(&mut node, item, subtrees)?;
                    }
                }
                Some(Js::Null) => {
                    return Err(TreeError::Crash(type_error(
                        "Cannot read property '$subtree' of null",
                    )));
                }
                Some(value @ (Js::Obj(_) | Js::Date(_))) => {
                    let subtree = value.field("$subtree");
                    let found = subtree.and_then(|key| subtrees.get(&key.to_js_string()));
                    match found {
                        Some(children) => node.children = children.clone(),
                        None => {
                            return Err(TreeError::MissingSubtree(
                                subtree.map_or_else(|| "undefined".to_owned(), Js::to_js_string),
                            ));
                        }
                    }
                }
                _ => {}
            }
            parent.children.push(node);
            Ok(())
        }
        // Numbers and booleans are neither strings nor objects: skipped.
        _ => Ok(()),
    }
}

/// `generateHierarchyTree` for v2/v3.
fn hierarchy_folders(hierarchy: &Js, native: bool) -> Result<Vec<Js>, TreeError> {
    let spec = hierarchy.field("spec");
    let parent_ref = spec.and_then(|spec| spec.field("parentRef"));
    let root_kind = match parent_ref.and_then(|r| r.field("kind")) {
        Some(Js::Null) | None => "Organization".to_owned(),
        Some(kind) => kind.to_js_string(),
    };
    let root_name = parent_ref
        .and_then(|r| r.field("external"))
        .map_or_else(|| "undefined".to_owned(), Js::to_js_string);
    let mut root = TreeNode {
        name: Some(Js::Str(root_name)),
        kind: Some(root_kind),
        children: Vec::new(),
    };
    let namespace = hierarchy
        .field("metadata")
        .and_then(|metadata| metadata.field("namespace"));
    let annotations = inheritable(hierarchy);
    let mut subtrees: HashMap<String, Vec<TreeNode>> = HashMap::new();
    if let Some(object) = spec
        .and_then(|spec| spec.field("subtrees"))
        .and_then(Js::as_object)
    {
        for (name, children) in object.ordered() {
            let mut node = TreeNode::named(Some(Js::Str(name.to_owned())));
            for child in iterate(Some(children)).map_err(TreeError::Crash)? {
                add_child(&mut node, &child, &subtrees)?;
            }
            subtrees.insert(name.to_owned(), node.children);
        }
    }
    for child in iterate(spec.and_then(|spec| spec.field("config"))).map_err(TreeError::Crash)? {
        add_child(&mut root, &child, &subtrees)?;
    }
    let mut folders = Vec::new();
    fn walk(
        node: &TreeNode,
        path: &mut Vec<Option<Js>>,
        annotations: &JsObject,
        namespace: Option<&Js>,
        native: bool,
        out: &mut Vec<Js>,
    ) {
        for child in &node.children {
            out.push(manifest(
                &child.name,
                path,
                node,
                annotations,
                namespace,
                native,
            ));
            path.push(child.name.clone());
            walk(child, path, annotations, namespace, native, out);
            path.pop();
        }
    }
    walk(
        &root,
        &mut Vec::new(),
        &annotations,
        namespace,
        native,
        &mut folders,
    );
    Ok(folders)
}

/// `generateV1HierarchyTree`: the folders in insertion order, or the
/// layer error.
fn v1_folders(
    parent: &TreeNode,
    layers: &[Js],
    layer_index: usize,
    hierarchy: &Js,
    path: &[Option<Js>],
    out: &mut Vec<Js>,
) -> Result<Result<(), String>, Crash> {
    let Some(layer) = layers.get(layer_index) else {
        return Ok(Ok(()));
    };
    let layer_name = layer.to_js_string();
    let config = hierarchy
        .field("spec")
        .and_then(|spec| spec.field("config"));
    let Some(config) = config.filter(|config| !matches!(config, Js::Null)) else {
        return Err(type_error("Cannot read property of undefined"));
    };
    let Some(folders) = config.field(&layer_name) else {
        return Ok(Err(format!(
            "Layer \"{layer_name}\" has no corresponding entry config entry. Either\n      add to spec.config.{layer_name} or remove it from spec.layers\n      "
        )));
    };
    let namespace = hierarchy
        .field("metadata")
        .and_then(|metadata| metadata.field("namespace"));
    for folder in iterate(Some(folders))? {
        let folder = Some(folder);
        let config = manifest(
            &folder,
            path,
            parent,
            &JsObject::default(),
            namespace,
            false,
        );
        let child = TreeNode::named(folder.clone());
        let mut below = Vec::new();
        let mut child_path = path.to_vec();
        child_path.push(folder);
        if let Err(message) = v1_folders(
            &child,
            layers,
            layer_index + 1,
            hierarchy,
            &child_path,
            &mut below,
        )? {
            return Ok(Err(message));
        }
        out.push(config);
        out.extend(below);
    }
    Ok(Ok(()))
}

/// The function body on the store.
fn generate(configs: &mut Configs) -> Result<(), Crash> {
    for hierarchy in configs.of_kind(V1) {
        configs.results.push(old_hierarchy_warning(&hierarchy));
        let spec = hierarchy
            .field("spec")
            .filter(|spec| !matches!(spec, Js::Null))
            .ok_or_else(|| type_error("Cannot read property 'organization' of undefined"))?;
        let organization = spec
            .field("organization")
            .map_or_else(|| "undefined".to_owned(), Js::to_js_string);
        let root = TreeNode {
            name: Some(Js::Str(organization)),
            kind: Some("Organization".to_owned()),
            children: Vec::new(),
        };
        let layers = match hierarchy
            .field("spec")
            .and_then(|spec| spec.field("layers"))
        {
            Some(Js::Arr(layers)) => layers.clone(),
            Some(Js::Str(text)) => text.chars().map(|c| Js::Str(c.to_string())).collect(),
            _ => return Err(type_error("Cannot read property 'length' of undefined")),
        };
        let mut folders = Vec::new();
        match v1_folders(&root, &layers, 0, &hierarchy, &[], &mut folders)? {
            Ok(()) => {
                for folder in folders {
                    configs.insert(folder)?;
                }
            }
            Err(message) => {
                let mut result = JsObject::default();
                result.set("severity", Js::Str("error".to_owned()));
                result.set("message", Js::Str(message));
                configs
                    .results
                    .push(JsResult(jsyaml::to_node(&Js::Obj(result))));
            }
        }
    }
    let hierarchies: Vec<(Js, bool)> = configs
        .of_kind(V3)
        .into_iter()
        .map(|h| (h, true))
        .chain(configs.of_kind(V2).into_iter().map(|h| (h, false)))
        .collect();
    for (hierarchy, native) in hierarchies {
        if !native {
            configs.results.push(old_hierarchy_warning(&hierarchy));
        }
        let parent_ref = hierarchy
            .field("spec")
            .filter(|spec| !matches!(spec, Js::Null))
            .ok_or_else(|| type_error("Cannot read property 'parentRef' of undefined"))?
            .field("parentRef");
        if matches!(parent_ref, Some(Js::Null)) {
            return Err(type_error("Cannot read property 'external' of null"));
        }
        if parent_ref.is_none() || parent_ref.and_then(|r| r.field("external")).is_none() {
            configs.results.push(object_result(
                format!(
                    "ResourceHierarchy {} has an undefined parentRef",
                    name_of(&hierarchy)
                ),
                &hierarchy,
                "error",
            ));
            continue;
        }
        if let Some(kind) = parent_ref.and_then(|r| r.field("kind"))
            && !matches!(kind, Js::Str(k) if k == "Organization" || k == "Folder")
        {
            configs.results.push(object_result(
                format!(
                    "ResourceHierarchy {} has an unsupported parentRef kind",
                    name_of(&hierarchy)
                ),
                &hierarchy,
                "error",
            ));
            continue;
        }
        // Folders are inserted as they are generated; a missing subtree
        // stops the generation before any is inserted (the tree is built
        // first).
        match hierarchy_folders(&hierarchy, native) {
            Ok(folders) => {
                for folder in folders {
                    configs.insert(folder)?;
                }
            }
            Err(TreeError::MissingSubtree(subtree)) => {
                configs.results.push(object_result(
                    format!(
                        "ResourceHierarchy {} references non-existent subtree \"{subtree}\"",
                        name_of(&hierarchy)
                    ),
                    &hierarchy,
                    "error",
                ));
            }
            Err(TreeError::Crash(crash)) => return Err(crash),
        }
    }
    Ok(())
}

/// The SDK's check that an object's legacy and internal annotations agree.
fn check_mismatch(object: &Js) -> Result<(), Crash> {
    for (internal, legacy) in [(PATH, LEGACY_PATH), (INDEX, LEGACY_INDEX), (ID, LEGACY_ID)] {
        if let (Some(a), Some(b)) = (annotation(object, internal), annotation(object, legacy))
            && a.truthy()
            && b.truthy()
            && a != b
        {
            return Err(Crash(
                "Error: the legacy and internal annotation values mismatch".to_owned(),
            ));
        }
    }
    Ok(())
}

/// The SDK's `reconcileAnnotations` for the objects the function did not
/// read its annotations from (the input's annotations are unchanged).
fn reconcile(configs: &mut Configs, originals: &[JsObject]) -> Result<(), Crash> {
    let (use_internal, use_legacy) = annotation_format(originals)?;
    for (_, object) in &mut configs.objects {
        let Js::Obj(root) = object else { continue };
        let Some(Js::Obj(metadata)) = root.get("metadata").cloned() else {
            continue;
        };
        let mut metadata = metadata;
        if matches!(metadata.get("annotations"), Some(Js::Null)) {
            // The SDK's bookkeeping annotation replaced the null, and
            // removing it removed the then empty map.
            metadata.remove("annotations");
            root.set("metadata", Js::Obj(metadata.clone()));
        }
        if let Some(Js::Obj(mut annotations)) = metadata.get("annotations").cloned() {
            for (internal, legacy) in [(PATH, LEGACY_PATH), (INDEX, LEGACY_INDEX), (ID, LEGACY_ID)]
            {
                let a = annotations.get(internal).filter(|v| v.truthy()).cloned();
                let b = annotations.get(legacy).filter(|v| v.truthy()).cloned();
                match (a, b) {
                    (None, Some(b)) => annotations.set(internal, b),
                    (Some(a), None) => annotations.set(legacy, a),
                    _ => {}
                }
            }
            let mut remove = |key: &str| {
                if annotations.get(key).is_some_and(Js::truthy) {
                    annotations.remove(key);
                }
            };
            if !use_internal {
                remove(PATH);
                remove(INDEX);
                remove(ID);
            }
            if !use_legacy {
                remove(LEGACY_PATH);
                remove(LEGACY_INDEX);
                remove(LEGACY_ID);
            }
            if annotations.is_empty() {
                metadata.remove("annotations");
            } else {
                metadata.set("annotations", Js::Obj(annotations));
            }
            root.set("metadata", Js::Obj(metadata));
        }
        check_mismatch(object)?;
    }
    Ok(())
}

/// The SDK's `determineAnnotationFormat` over the input's annotations.
fn annotation_format(originals: &[JsObject]) -> Result<(bool, bool), Crash> {
    if originals.is_empty() {
        return Ok((true, true));
    }
    let mismatch =
        || Crash("Error: the legacy and internal annotation formats mismatch".to_owned());
    let (mut internal, mut legacy): (Option<bool>, Option<bool>) = (None, None);
    for annotations in originals {
        let found = [PATH, INDEX, ID]
            .iter()
            .any(|k| annotations.get(k).is_some());
        if internal != Some(true) {
            internal = Some(found);
        }
        if (found && internal != Some(true)) || (!found && internal == Some(true)) {
            return Err(mismatch());
        }
        let found_legacy = [LEGACY_PATH, LEGACY_INDEX, LEGACY_ID]
            .iter()
            .any(|k| annotations.get(k).is_some());
        if legacy != Some(true) {
            legacy = Some(found_legacy);
        }
        if (found_legacy && legacy != Some(true)) || (!found_legacy && legacy == Some(true)) {
            return Err(mismatch());
        }
    }
    Ok((internal.unwrap_or(true), legacy.unwrap_or(true)))
}

/// Runs generate-folders on a parsed input.
pub(crate) fn run(input: ResourceList) -> Outcome {
    match run_sdk(&input.items) {
        Ok((items, results)) => {
            let failed = !results.is_empty()
                && results
                    .iter()
                    .any(|JsResult(node)| node.get_str(&["severity"]) == Some("error"));
            let mut outcome = Outcome::kyaml(
                ResourceList {
                    items,
                    function_config: None,
                },
                Vec::new(),
            );
            outcome.raw_results = results.into_iter().map(|JsResult(node)| node).collect();
            if failed {
                outcome.exit_code = 1;
            }
            outcome
        }
        Err(Crash(message)) => {
            let mut outcome = Outcome::kyaml(input, Vec::new());
            outcome.silent = true;
            outcome.stderr = message;
            outcome.exit_code = 2;
            outcome
        }
    }
}

fn run_sdk(items: &[Node]) -> Result<(Vec<Node>, Vec<JsResult>), Crash> {
    let mut anchors = HashMap::new();
    let mut configs = Configs {
        objects: Vec::new(),
        results: Vec::new(),
    };
    for item in items {
        let value = jsyaml::load(item, &mut anchors).map_err(Crash)?;
        configs.insert(value)?;
    }
    let mut originals = Vec::with_capacity(configs.objects.len());
    for (_, object) in &configs.objects {
        check_mismatch(object)?;
        let annotations = object
            .field("metadata")
            .and_then(|metadata| metadata.field("annotations"))
            .and_then(Js::as_object)
            .cloned()
            .unwrap_or_default();
        originals.push(annotations);
    }
    generate(&mut configs)?;
    reconcile(&mut configs, &originals)?;
    let nodes = configs
        .objects
        .iter()
        .map(|(_, object)| jsyaml::to_node(object))
        .collect();
    Ok((nodes, configs.results))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_normalize_like_the_function() {
        assert_eq!(normalize("Dev_Team 'A'"), "dev-team-a");
        assert_eq!(normalize("prod.Retail&Co"), "prod.retailco");
    }

    #[test]
    fn numbers_convert_like_javascript() {
        assert_eq!(js_number(&Js::Str(" 3 ".to_owned())), 3.0);
        assert_eq!(js_number(&Js::Str(String::new())), 0.0);
        assert!(js_number(&Js::Str("x".to_owned())).is_nan());
        assert_eq!(js_number(&Js::Str("0x10".to_owned())), 16.0);
    }
}
