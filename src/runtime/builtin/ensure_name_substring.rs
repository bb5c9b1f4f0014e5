//! `ensure-name-substring` (kyaml framework `command.Build`, kustomize
//! resmap): prepends or appends a substring to every resource name that
//! does not contain it yet, then fixes the name references kustomize knows
//! (`namereference` field specs) and the `config.kubernetes.io/depends-on`
//! annotations that point at a renamed resource of the package.
//!
//! As the function's Go source (kptdev/krm-functions-catalog
//! functions/go/ensure-name-substring, with kustomize's prefixsuffix,
//! fieldspec and nameref filters) does:
//! - the config is a `v1` `ConfigMap` whose `data` holds one `prepend` or
//!   `append` entry, or an `EnsureNameSubstring` (`fn.kpt.dev/v1alpha1`)
//!   with `substring`, `editMode` (default `prepend`) and
//!   `additionalNameFields` (or the deprecated `fieldSpecs`), used after the
//!   default `metadata/name`;
//! - CRDs, Namespaces, APIServices and Kptfiles are left alone; a field
//!   that already contains the substring is not changed, and neither is
//!   the resource's depends-on annotation then;
//! - a set value is a new untagged scalar with the old node's style (kyaml
//!   `FieldSetter`): the old value's comments go with it;
//! - kustomize's temporary build annotations are dropped again, which
//!   rewrites the annotations of every resource that has any (kyaml
//!   `SetAnnotations`: sorted keys, `!!str` values, moved to the end of
//!   `metadata`);
//! - empty items are dropped (the resmap skips them);
//! - errors end the run with exit code 1 and the error on stderr, and no
//!   results.
//!
//! Not reproduced: `*List` kinds are not expanded into their items (the
//! resmap would inline them), and the "multiple possible referrals" error
//! lists the candidates' identifiers without kustomize's YAML dump of each.
//! After an error that happens past the renaming (a bad field path, an
//! ambiguous reference), krender writes the items without kustomize's
//! temporary build annotations, which the function would leave in.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::LazyLock;

use super::sdk::{
    self, FieldSpec, Outcome, ResourceList, is_null, json_field, read_string, split_path,
    type_error, yaml11_bool,
};
use super::set_namespace::is_cluster_scoped;
use crate::yaml::node::{Node, NodeKind, tag};

const DEPENDS_ON: &str = "config.kubernetes.io/depends-on";
const FN_CONFIG_API_VERSION: &str = "fn.kpt.dev/v1alpha1";
const FN_CONFIG_KIND: &str = "EnsureNameSubstring";
/// kyaml `resid.TotallyNotANamespace`.
const NOT_A_NAMESPACE: &str = "_non_namespaceable_";
/// The build annotations `removeKustomizeTrackingAnnotations` drops
/// (kustomize `resource.BuildAnnotations` less kpt's path, index and id).
const BUILD_ANNOTATIONS: [&str; 10] = [
    "internal.config.kubernetes.io/previousKinds",
    "internal.config.kubernetes.io/previousNames",
    "internal.config.kubernetes.io/prefixes",
    "internal.config.kubernetes.io/suffixes",
    "internal.config.kubernetes.io/previousNamespaces",
    "internal.config.kubernetes.io/allowNameChange",
    "internal.config.kubernetes.io/allowKindChange",
    "internal.config.kubernetes.io/refBy",
    "internal.config.kubernetes.io/generatorBehavior",
    "internal.config.kubernetes.io/needsHashSuffix",
];

/// Runs ensure-name-substring on a parsed input.
pub(crate) fn run(input: ResourceList) -> Outcome {
    let config = match Config::from_function_config(input.function_config.as_ref()) {
        Ok(config) => config,
        Err(error) => {
            return failure(
                input,
                format!("failed to load the `functionConfig`: {error}"),
            );
        }
    };
    let mut input = input;
    if let Err(error) = validate_items(&input.items) {
        return failure(
            input,
            format!("failed to convert items to resource map: {error}"),
        );
    }
    let mut kept: Vec<Node> = std::mem::take(&mut input.items)
        .into_iter()
        .filter(|item| !item.is_nil_or_empty())
        .collect();
    let mut states: Vec<State> = kept.iter().map(|_| State::default()).collect();
    let result = transform(&config, &mut kept, &mut states)
        .map_err(|error| format!("failed to transform name substring: {error}"))
        .and_then(|()| {
            fix_name_references(&mut kept, &states)
                .map_err(|error| format!("failed to fix name back reference: {error}"))
        });
    remove_build_annotations(&mut kept, &states);
    input.items = kept;
    match result {
        Ok(()) => Outcome::kyaml(input, Vec::new()),
        Err(error) => failure(input, error),
    }
}

/// The framework's failure: the items written back, no results, the error
/// on stderr and exit code 1.
fn failure(input: ResourceList, error: String) -> Outcome {
    let mut outcome = Outcome::kyaml(input, Vec::new());
    outcome.stderr = error;
    outcome.exit_code = 1;
    outcome
}

impl FieldSpec {
    fn name() -> FieldSpec {
        FieldSpec {
            path: "metadata/name".to_owned(),
            ..FieldSpec::default()
        }
    }

    fn is_name_change(&self) -> bool {
        self.path == "metadata/name"
    }
}

/// The function config, defaulted and validated.
#[derive(Debug, PartialEq, Eq)]
struct Config {
    substring: String,
    edit_mode: String,
    /// `metadata/name`, then the additional name fields.
    fields: Vec<FieldSpec>,
}

impl Config {
    fn from_function_config(config: Option<&Node>) -> Result<Config, String> {
        let mut substring = String::new();
        let mut edit_mode = String::new();
        let mut field_specs = None;
        let mut additional = None;
        // No config: nothing is unmarshalled, defaulting and validation
        // still run.
        if let Some(config) = config {
            let (api_version, kind) = validated_meta(config)?;
            if api_version == "v1" && kind == "ConfigMap" {
                let (mode, value) = config_map_entry(config)?;
                edit_mode = mode;
                substring = value;
            } else if api_version == FN_CONFIG_API_VERSION && kind == FN_CONFIG_KIND {
                // encoding/json reports the first type error in the order of
                // the JSON keys, which sigs.k8s.io/yaml sorts.
                let wrap = |error: String| {
                    format!("error unmarshaling JSON: while decoding JSON: {error}")
                };
                additional = field_specs_of(
                    json_field(config, "additionalNameFields"),
                    "additionalNameFields",
                )
                .map_err(wrap)?;
                edit_mode = read_string(json_field(config, "editMode"), FN_CONFIG_KIND, "editMode")
                    .map_err(|error| {
                        wrap(error.replace("of type string", "of type main.EditMode"))
                    })?;
                field_specs =
                    field_specs_of(json_field(config, "fieldSpecs"), "fieldSpecs").map_err(wrap)?;
                substring =
                    read_string(json_field(config, "substring"), FN_CONFIG_KIND, "substring")
                        .map_err(wrap)?;
            } else {
                return Err(format!(
                    "function config must be either /v1, Kind=ConfigMap or {FN_CONFIG_API_VERSION}, Kind={FN_CONFIG_KIND}, but we got: {}",
                    go_gvk_string(&api_version, &kind)
                ));
            }
        }
        // Default()
        if edit_mode.is_empty() {
            edit_mode = "prepend".to_owned();
        }
        if additional.is_none() && field_specs.is_some() {
            additional = field_specs.take();
        }
        // Validate()
        if substring.is_empty() {
            return Err("substring must not be empty".to_owned());
        }
        if additional.is_some() && field_specs.is_some() {
            return Err(
                "`fieldSpecs` has been deprecated, please rename it to `additionalNameFields`"
                    .to_owned(),
            );
        }
        let fields = std::iter::once(FieldSpec::name())
            .chain(additional.unwrap_or_default())
            .collect();
        Ok(Config {
            substring,
            edit_mode,
            fields,
        })
    }

    fn prefix(&self) -> &str {
        if self.edit_mode == "prepend" {
            &self.substring
        } else {
            ""
        }
    }

    fn suffix(&self) -> &str {
        if self.edit_mode == "append" {
            &self.substring
        } else {
            ""
        }
    }
}

/// The one `data` entry of a ConfigMap config: (edit mode, substring).
fn config_map_entry(config: &Node) -> Result<(String, String), String> {
    let wrap = |error: String| format!("error unmarshaling JSON: while decoding JSON: {error}");
    let mut data: BTreeMap<String, String> = BTreeMap::new();
    if let Some(node) = json_field(config, "data")
        && !is_null(node)
    {
        if node.kind != NodeKind::Mapping {
            return Err(wrap(type_error(
                node,
                "ConfigMap",
                "data",
                "map[string]string",
            )));
        }
        for (key, value) in node.pairs() {
            let value = read_string(Some(value), "ConfigMap", "data").map_err(wrap)?;
            data.insert(key.value.to_string(), value);
        }
    }
    if data.len() != 1 {
        return Err(format!(
            "only 1 entry is allowed in the ConfigMap, but got: {}",
            data.len()
        ));
    }
    let Some((key, value)) = data.into_iter().next() else {
        return Err("only 1 entry is allowed in the ConfigMap, but got: 0".to_owned());
    };
    if key != "prepend" && key != "append" {
        return Err(format!(
            "unknown editMode: {key}, only prepend and append are allowed"
        ));
    }
    Ok((key, value))
}

/// A `[]types.FieldSpec` field: `None` when missing or null.
fn field_specs_of(node: Option<&Node>, field: &str) -> Result<Option<Vec<FieldSpec>>, String> {
    let Some(node) = node.filter(|node| !is_null(node)) else {
        return Ok(None);
    };
    if node.kind != NodeKind::Sequence {
        return Err(type_error(node, FN_CONFIG_KIND, field, "[]types.FieldSpec"));
    }
    let mut specs = Vec::with_capacity(node.content.len());
    for element in &node.content {
        if is_null(element) {
            specs.push(FieldSpec::default());
            continue;
        }
        if element.kind != NodeKind::Mapping {
            return Err(type_error(
                element,
                FN_CONFIG_KIND,
                field,
                "types.FieldSpec",
            ));
        }
        let text = |key: &str| {
            read_string(
                json_field(element, key),
                FN_CONFIG_KIND,
                &format!("{field}.{key}"),
            )
        };
        let create = match json_field(element, "create") {
            None => false,
            Some(value) if is_null(value) => false,
            Some(value) => match (value.kind, sdk::effective_tag(value)) {
                (NodeKind::Scalar, tag::BOOL) => {
                    matches!(value.value.as_str(), "true" | "True" | "TRUE")
                }
                (NodeKind::Scalar, _)
                    if value.style.is_empty() && yaml11_bool(&value.value).is_some() =>
                {
                    yaml11_bool(&value.value).unwrap_or_default()
                }
                _ => {
                    return Err(type_error(
                        value,
                        FN_CONFIG_KIND,
                        &format!("{field}.create"),
                        "bool",
                    ));
                }
            },
        };
        let group = text("group")?;
        let kind = text("kind")?;
        let path = text("path")?;
        let version = text("version")?;
        specs.push(FieldSpec {
            group,
            version,
            kind,
            path,
            create,
        });
    }
    Ok(Some(specs))
}

/// apimachinery `schema.FromAPIVersionAndKind(..).String()`.
fn go_gvk_string(api_version: &str, kind: &str) -> String {
    let (group, version) = match api_version.matches('/').count() {
        0 => ("", api_version),
        1 => api_version.split_once('/').unwrap_or(("", api_version)),
        _ => ("", ""),
    };
    format!("{group}/{version}, Kind={kind}")
}

/// kyaml `GetValidatedMetadata`: the apiVersion and kind, or Go's error
/// (which prints the whole `ResourceMeta` with `%v`).
fn validated_meta(node: &Node) -> Result<(String, String), String> {
    let text = |value: Option<&Node>| -> String {
        value
            .filter(|value| !value.is_nil_or_empty())
            .map(get_value)
            .unwrap_or_default()
    };
    let api_version = text(node.get("apiVersion"));
    let kind = text(node.get("kind"));
    let metadata = node
        .get("metadata")
        .filter(|value| !value.is_nil_or_empty());
    let field = |key: &str| metadata.and_then(|metadata| metadata.get(key));
    let name = field("name")
        .filter(|value| !value.is_nil_or_empty())
        .map(|value| value.value.to_string())
        .unwrap_or_default();
    let namespace = text(field("namespace"));
    let map = |key: &str| -> Option<BTreeMap<String, String>> {
        field(key)
            .filter(|value| !value.is_nil_or_empty())
            .map(|value| {
                value
                    .pairs()
                    .map(|(key, value)| (get_value(key), get_value(value)))
                    .collect()
            })
    };
    let (labels, annotations) = (map("labels"), map("annotations"));
    let missing = api_version.is_empty()
        && kind.is_empty()
        && name.is_empty()
        && namespace.is_empty()
        && labels.is_none()
        && annotations.is_none();
    if missing {
        return Err("missing Resource metadata".to_owned());
    }
    let go_map = |map: Option<BTreeMap<String, String>>| {
        let entries: Vec<String> = map
            .unwrap_or_default()
            .into_iter()
            .map(|(key, value)| format!("{key}:{value}"))
            .collect();
        format!("map[{}]", entries.join(" "))
    };
    let debug = || {
        format!(
            "{{{{{api_version} {kind}}} {{{{{name} {namespace}}} {} {}}}}}",
            go_map(labels.clone()),
            go_map(annotations.clone())
        )
    };
    if kind.is_empty() {
        return Err(format!("missing kind in object {}", debug()));
    }
    if !kind.ends_with("List") && name.is_empty() {
        return Err(format!("missing metadata.name in object {}", debug()));
    }
    Ok((api_version, kind))
}

/// kyaml `GetValue`: a scalar's text, other nodes as YAML.
fn get_value(node: &Node) -> String {
    if node.kind == NodeKind::Scalar {
        node.value.to_string()
    } else {
        crate::yaml::to_string(node, crate::yaml::SeqIndent::Compact)
    }
}

/// The resmap's checks of its input: every non-empty item has kyaml's
/// valid metadata, and no two share an id (kind, group, version, name and
/// effective namespace).
fn validate_items(items: &[Node]) -> Result<(), String> {
    let items: Vec<&Node> = items
        .iter()
        .filter(|item| !item.is_nil_or_empty())
        .collect();
    for item in &items {
        validated_meta(item)?;
    }
    let mut seen = HashSet::new();
    for item in items {
        let id = Id::of(item);
        if !seen.insert((
            id.group.clone(),
            id.version.clone(),
            id.kind.clone(),
            id.name.clone(),
            id.effective_namespace(),
        )) {
            return Err(format!(
                "may not add resource with an already registered id: {}",
                id.to_go_string()
            ));
        }
    }
    Ok(())
}

/// A resource's current id (kustomize `CurId`).
#[derive(Clone, Debug, Default)]
struct Id {
    group: String,
    version: String,
    kind: String,
    name: String,
    namespace: String,
}

impl Id {
    fn of(item: &Node) -> Id {
        let scalar = |path: &[&str]| {
            item.get_path(path)
                .filter(|node| node.kind == NodeKind::Scalar)
                .map(|node| node.value.to_string())
                .unwrap_or_default()
        };
        let api_version = scalar(&["apiVersion"]);
        let (group, version) = parse_group_version(&api_version);
        Id {
            group: group.to_owned(),
            version: version.to_owned(),
            kind: scalar(&["kind"]),
            name: scalar(&["metadata", "name"]),
            namespace: scalar(&["metadata", "namespace"]),
        }
    }

    fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    fn is_cluster_scoped(&self) -> bool {
        is_cluster_scoped(&self.api_version(), &self.kind)
    }

    /// kyaml `ResId.EffectiveNamespace`.
    fn effective_namespace(&self) -> String {
        effective_namespace(self.is_cluster_scoped(), &self.namespace)
    }

    fn to_go_string(&self) -> String {
        sdk::res_id_string(
            &self.group,
            &self.version,
            &self.kind,
            &self.name,
            &self.namespace,
        )
    }
}

fn effective_namespace(cluster_scoped: bool, namespace: &str) -> String {
    if cluster_scoped {
        NOT_A_NAMESPACE.to_owned()
    } else if namespace.is_empty() || namespace == "default" {
        "default".to_owned()
    } else {
        namespace.to_owned()
    }
}

/// kyaml `resid.ParseGroupVersion`: split at the first slash.
fn parse_group_version(api_version: &str) -> (&str, &str) {
    api_version.split_once('/').unwrap_or(("", api_version))
}

/// A `resid.Gvk` used as a selector: empty parts match anything.
#[derive(Clone, Copy, Debug)]
struct Selector {
    group: &'static str,
    version: &'static str,
    kind: &'static str,
}

fn selects(group: &str, version: &str, kind: &str, selector: (&str, &str, &str)) -> bool {
    let (want_group, want_version, want_kind) = selector;
    (want_group.is_empty() || want_group == group)
        && (want_version.is_empty() || want_version == version)
        && (want_kind.is_empty() || want_kind == kind)
}

/// The id a renamed resource had before (kustomize `StorePreviousId`).
#[derive(Clone, Debug)]
struct PreviousId {
    name: String,
    /// The effective namespace.
    namespace: String,
    kind: String,
}

/// What kustomize's build annotations record of a resource.
#[derive(Clone, Debug, Default)]
struct State {
    previous: Option<PreviousId>,
    prefixes: Vec<String>,
    suffixes: Vec<String>,
}

/// `EnsureNameSubstring.Transform`.
fn transform(config: &Config, items: &mut [Node], states: &mut [State]) -> Result<(), String> {
    let lookup: HashSet<(String, String, String)> = items
        .iter()
        .map(|item| {
            let id = Id::of(item);
            (id.group, id.kind, id.name)
        })
        .collect();
    for (item, state) in items.iter_mut().zip(states.iter_mut()) {
        let id = Id::of(item);
        let skip = [
            ("", "", "CustomResourceDefinition"),
            ("apiregistration.k8s.io", "", "APIService"),
            ("", "", "Namespace"),
            ("kpt.dev", "", "Kptfile"),
        ]
        .into_iter()
        .any(|selector| selects(&id.group, &id.version, &id.kind, selector));
        if skip {
            continue;
        }
        for field in &config.fields {
            if !selects(
                &id.group,
                &id.version,
                &id.kind,
                (&field.group, &field.version, &field.kind),
            ) {
                continue;
            }
            let has_substring = if field.is_name_change() {
                Id::of(item).name.contains(&config.substring)
            } else {
                lookup_text(item, &field.path).contains(&config.substring)
            };
            if has_substring {
                continue;
            }
            if field.is_name_change() {
                let current = Id::of(item);
                if state.previous.is_none() {
                    state.previous = Some(PreviousId {
                        namespace: current.effective_namespace(),
                        name: current.name,
                        kind: current.kind,
                    });
                }
                match config.edit_mode.as_str() {
                    "prepend" => state.prefixes.push(config.substring.clone()),
                    "append" => state.suffixes.push(config.substring.clone()),
                    _ => {}
                }
            }
            let (prefix, suffix) = (config.prefix(), config.suffix());
            filter_field(item, field, true, &mut |node, field_path| {
                let value = format!("{prefix}{}{suffix}", node.value);
                set_scalar(node, field_path, &value)
            })?;
            update_depends_on(item, config, &lookup);
        }
    }
    Ok(())
}

/// The text kyaml's `Lookup` finds at a slash-separated path (no sequence
/// traversal), as `RNode.String` writes it; empty when missing.
fn lookup_text(item: &Node, path: &str) -> String {
    let mut node = item;
    for part in path
        .split('/')
        .map(str::trim)
        .filter(|part| !part.is_empty())
    {
        if node.kind != NodeKind::Mapping {
            return String::new();
        }
        match node.get(part) {
            Some(child) => node = child,
            None => return String::new(),
        }
    }
    if node.kind == NodeKind::Scalar {
        format!("{}\n", node.value)
    } else {
        crate::yaml::to_string(node, crate::yaml::SeqIndent::Compact)
    }
}

/// `updateDependsOnAnnotation`: the name part of a depends-on reference to
/// a resource of the input gets the substring.
fn update_depends_on(item: &mut Node, config: &Config, lookup: &HashSet<(String, String, String)>) {
    let mut annotations = sdk::annotations_map(item);
    let Some(depends_on) = annotations.get(DEPENDS_ON) else {
        return;
    };
    let Some(updated) = depends_on_with_substring(depends_on, config, lookup) else {
        return;
    };
    annotations.insert(DEPENDS_ON.to_owned(), updated);
    sdk::set_annotations_map(item, &annotations);
}

/// `setDependsOnNameSubstring`: `<group>/namespaces/<namespace>/<kind>/<name>`
/// or `<group>/<kind>/<name>` (each part `[-.\w]*`).
fn depends_on_with_substring(
    depends_on: &str,
    config: &Config,
    lookup: &HashSet<(String, String, String)>,
) -> Option<String> {
    let is_part = |part: &str| {
        part.chars()
            .all(|c| c == '-' || c == '.' || c == '_' || c.is_ascii_alphanumeric())
    };
    let mut segments: Vec<String> = depends_on.split('/').map(str::to_owned).collect();
    let (kind_index, name_index) = match segments.as_slice() {
        [_, namespaces, _, _, _] if namespaces == "namespaces" => (3, 4),
        [_, _, _] => (1, 2),
        _ => return None,
    };
    if !segments.iter().all(|segment| is_part(segment)) {
        return None;
    }
    let key = (
        segments[0].clone(),
        segments[kind_index].clone(),
        segments[name_index].clone(),
    );
    if !lookup.contains(&key) {
        return None;
    }
    let name = &segments[name_index];
    segments[name_index] = match config.edit_mode.as_str() {
        "prepend" => format!("{}{name}", config.substring),
        "append" => format!("{name}{}", config.substring),
        _ => return None,
    };
    Some(segments.join("/"))
}

/// A setter called at the end of a field path, with the field path kyaml
/// tracks for the node (for its error messages).
type SetFn<'a> = dyn FnMut(&mut Node, &[String]) -> Result<(), String> + 'a;

/// kustomize `fieldspec.Filter` on one resource: follows `spec.path`
/// through mappings and every element of sequences and calls `set` on the
/// nodes found; with `spec.create` (and `creates`), missing fields are
/// created (a scalar at the end, mappings on the way).
fn filter_field(
    item: &mut Node,
    spec: &FieldSpec,
    creates: bool,
    set: &mut SetFn<'_>,
) -> Result<(), String> {
    let id = Id::of(item);
    if !selects(
        &id.group,
        &id.version,
        &id.kind,
        (&spec.group, &spec.version, &spec.kind),
    ) {
        return Ok(());
    }
    let path = split_path(&spec.path);
    let create = spec.create && creates;
    walk(item, &path, create, &mut Vec::new(), set).map_err(|error| {
        format!(
            "considering field '{}' of object {}: {error}",
            spec.path,
            id.to_go_string()
        )
    })
}

fn walk(
    node: &mut Node,
    path: &[String],
    create: bool,
    field_path: &mut Vec<String>,
    set: &mut SetFn<'_>,
) -> Result<(), String> {
    let Some((first, rest)) = path.split_first() else {
        return set(node, field_path);
    };
    if is_null(node) {
        return Ok(());
    }
    match node.kind {
        NodeKind::Sequence => {
            for element in &mut node.content {
                // kyaml starts a new field path at each element.
                walk(element, path, create, &mut Vec::new(), set).map_err(|error| {
                    format!("visit traversal on path: [{}]: {error}", path.join(" "))
                })?;
            }
            Ok(())
        }
        NodeKind::Mapping => {
            let (name, is_sequence) = match first.strip_suffix("[]") {
                Some(name) => (name, true),
                None => (first.as_str(), false),
            };
            if name.is_empty() {
                return Err("cannot set or create an empty field name".to_owned());
            }
            let create_kind = match (create && !is_sequence, rest.is_empty()) {
                (false, _) => None,
                (true, true) => Some(NodeKind::Scalar),
                (true, false) => Some(NodeKind::Mapping),
            };
            if node.get(name).is_none() {
                let Some(kind) = create_kind else {
                    return Ok(());
                };
                // kyaml `LookupCreate`: an untagged node of that kind.
                let mut value = Node::new_untagged_scalar("");
                value.kind = kind;
                node.push_pair(Node::new_untagged_scalar(name), value);
            }
            let Some(field) = node.get_mut(name) else {
                return Ok(());
            };
            // A null where a kind is expected becomes that kind.
            let expected = if is_sequence {
                Some((NodeKind::Sequence, ""))
            } else {
                create_kind.map(|kind| match kind {
                    NodeKind::Mapping => (NodeKind::Mapping, tag::MAP),
                    _ => (NodeKind::Scalar, tag::STR),
                })
            };
            if let Some((kind, new_tag)) = expected
                && field.kind == NodeKind::Scalar
                && field.tag() == tag::NULL
            {
                field.kind = kind;
                field.set_tag(new_tag);
                if kind != NodeKind::Scalar {
                    field.value = Default::default();
                }
            }
            field_path.push(name.to_owned());
            walk(field, rest, create, field_path, set)
        }
        NodeKind::Scalar => Err("expected sequence or mapping node".to_owned()),
        _ => Ok(()),
    }
}

/// kyaml `FieldSetter{StringValue: value}` on a scalar: a new untagged
/// scalar with the old node's style (its comments are lost); nothing for an
/// empty value.
fn set_scalar(node: &mut Node, field_path: &[String], value: &str) -> Result<(), String> {
    if value.is_empty() {
        return Ok(());
    }
    if !is_null(node) && node.kind != NodeKind::Scalar {
        let was = match node.kind {
            NodeKind::Mapping => "MappingNode",
            NodeKind::Sequence => "SequenceNode",
            NodeKind::Document => "DocumentNode",
            _ => "AliasNode",
        };
        let text = crate::yaml::to_string(node, crate::yaml::SeqIndent::Compact);
        return Err(format!(
            "wrong Node Kind for {} expected: ScalarNode was {was}: value: {{{}}}",
            field_path.join("."),
            text.trim()
        ));
    }
    let mut replacement = Node::new_untagged_scalar(value);
    replacement.style = node.style;
    *node = replacement;
    Ok(())
}

/// kyaml `FieldSetter{Name: key, StringValue: value}` on a mapping.
fn set_field(map: &mut Node, key: &str, value: &str) {
    let mut replacement = Node::new_untagged_scalar(value);
    if let Some(existing) = map.get_mut(key) {
        replacement.style = existing.style;
        *existing = replacement;
    } else {
        map.push_pair(Node::new_untagged_scalar(key), replacement);
    }
}

/// What the name-reference filters read of each resource once the names
/// are set.
struct Facts {
    id: Id,
    cluster_scoped: bool,
    /// `id.effective_namespace()`, computed once: referrers compare it
    /// with every candidate.
    effective_namespace: String,
    state: State,
}

impl Facts {
    /// kustomize `previousIdSelectedByGvk`.
    fn previous_selected_by(&self, selector: (&str, &str, &str)) -> bool {
        self.state.previous.as_ref().is_some_and(|previous| {
            selects(&self.id.group, &self.id.version, &previous.kind, selector)
        })
    }

    /// The effective namespace of kustomize's `OrgId`.
    fn original_namespace(&self) -> String {
        match &self.state.previous {
            Some(previous) => {
                let previous_scoped = is_cluster_scoped(&self.id.api_version(), &previous.kind);
                effective_namespace(previous_scoped, &previous.namespace)
            }
            None => self.id.effective_namespace(),
        }
    }
}

/// kustomize's default `nameReference` configuration: each target kind with
/// the referrer kinds and the paths of their fields naming it.
static NAME_REFERENCES: LazyLock<Vec<(Selector, Referrers)>> = LazyLock::new(name_references);

/// The referrers of one target: their selector and name field path.
type Referrers = Vec<(Selector, String)>;

fn name_references() -> Vec<(Selector, Referrers)> {
    const fn sel(group: &'static str, version: &'static str, kind: &'static str) -> Selector {
        Selector {
            group,
            version,
            kind,
        }
    }
    const POD_SPECS: [(&str, &str, &str); 8] = [
        ("v1", "Pod", "spec/"),
        ("", "PodTemplate", "template/spec/"),
        ("", "Deployment", "spec/template/spec/"),
        ("", "ReplicaSet", "spec/template/spec/"),
        ("", "DaemonSet", "spec/template/spec/"),
        ("", "StatefulSet", "spec/template/spec/"),
        ("", "Job", "spec/template/spec/"),
        ("", "CronJob", "spec/jobTemplate/spec/template/spec/"),
    ];
    let in_pod_specs = |fields: &[&str]| -> Vec<(Selector, String)> {
        POD_SPECS
            .iter()
            .flat_map(|(version, kind, prefix)| {
                fields
                    .iter()
                    .map(move |field| (sel("", version, kind), format!("{prefix}{field}")))
            })
            .collect()
    };
    // Referrers whose pod template is at `spec/template/spec` (and the
    // CronJob's), for service accounts, claims and priority classes.
    let in_workloads = |field: &str, kinds: &[&'static str]| -> Vec<(Selector, String)> {
        kinds
            .iter()
            .map(|kind| {
                let path = match *kind {
                    "Pod" => format!("spec/{field}"),
                    "CronJob" => format!("spec/jobTemplate/spec/template/spec/{field}"),
                    _ => format!("spec/template/spec/{field}"),
                };
                (sel("", "", kind), path)
            })
            .collect()
    };
    let workload_kinds = [
        "Pod",
        "StatefulSet",
        "Deployment",
        "ReplicationController",
        "CronJob",
        "Job",
        "DaemonSet",
    ];
    let plain = |entries: &[(&'static str, &'static str, &str)]| -> Vec<(Selector, String)> {
        entries
            .iter()
            .map(|(group, kind, path)| (sel(group, "", kind), (*path).to_owned()))
            .collect()
    };
    let hpa = || plain(&[("", "HorizontalPodAutoscaler", "spec/scaleTargetRef/name")]);
    let mut config_map = in_pod_specs(&[
        "volumes/configMap/name",
        "containers/env/valueFrom/configMapKeyRef/name",
        "initContainers/env/valueFrom/configMapKeyRef/name",
        "containers/envFrom/configMapRef/name",
        "initContainers/envFrom/configMapRef/name",
        "volumes/projected/sources/configMap/name",
    ]);
    config_map.extend(plain(&[
        ("", "Node", "spec/configSource/configMap"),
        ("", "Role", "rules/resourceNames"),
        ("", "ClusterRole", "rules/resourceNames"),
        (
            "",
            "Ingress",
            "metadata/annotations/nginx.ingress.kubernetes.io\\/fastcgi-params-configmap",
        ),
    ]));
    let mut secret = in_pod_specs(&[
        "volumes/secret/secretName",
        "containers/env/valueFrom/secretKeyRef/name",
        "initContainers/env/valueFrom/secretKeyRef/name",
        "containers/envFrom/secretRef/name",
        "initContainers/envFrom/secretRef/name",
        "imagePullSecrets/name",
        "volumes/projected/sources/secret/name",
    ]);
    secret.extend(plain(&[
        ("", "Ingress", "spec/tls/secretName"),
        (
            "",
            "Ingress",
            "metadata/annotations/ingress.kubernetes.io\\/auth-secret",
        ),
        (
            "",
            "Ingress",
            "metadata/annotations/nginx.ingress.kubernetes.io\\/auth-secret",
        ),
        (
            "",
            "Ingress",
            "metadata/annotations/nginx.ingress.kubernetes.io\\/auth-tls-secret",
        ),
        ("", "Ingress", "spec/tls/secretName"),
        ("", "ServiceAccount", "imagePullSecrets/name"),
        ("", "StorageClass", "parameters/secretName"),
        ("", "StorageClass", "parameters/adminSecretName"),
        ("", "StorageClass", "parameters/userSecretName"),
        ("", "StorageClass", "parameters/secretRef"),
        ("", "Role", "rules/resourceNames"),
        ("", "ClusterRole", "rules/resourceNames"),
    ]));
    secret.push((
        sel("serving.knative.dev", "v1", "Service"),
        "spec/template/spec/containers/env/valueFrom/secretKeyRef/name".to_owned(),
    ));
    secret.extend(plain(&[(
        "",
        "PersistentVolume",
        "spec/azureFile/secretName",
    )]));
    const RBAC: &str = "rbac.authorization.k8s.io";
    const ADMISSION: &str = "admissionregistration.k8s.io";
    let mut service_account = plain(&[
        (RBAC, "RoleBinding", "subjects"),
        (RBAC, "ClusterRoleBinding", "subjects"),
    ]);
    service_account.extend(in_workloads("serviceAccountName", &workload_kinds));
    let mut storage_class = plain(&[
        ("", "PersistentVolume", "spec/storageClassName"),
        ("", "PersistentVolumeClaim", "spec/storageClassName"),
    ]);
    storage_class.push((
        sel("", "", "StatefulSet"),
        "spec/volumeClaimTemplates/spec/storageClassName".to_owned(),
    ));
    vec![
        (sel("", "", "Deployment"), hpa()),
        (sel("", "", "ReplicationController"), hpa()),
        (sel("", "", "ReplicaSet"), hpa()),
        (sel("", "", "StatefulSet"), hpa()),
        (sel("", "v1", "ConfigMap"), config_map),
        (sel("", "v1", "Secret"), secret),
        (
            sel("", "v1", "Service"),
            plain(&[
                ("apps", "StatefulSet", "spec/serviceName"),
                ("", "Ingress", "spec/rules/http/paths/backend/serviceName"),
                ("", "Ingress", "spec/backend/serviceName"),
                ("", "Ingress", "spec/rules/http/paths/backend/service/name"),
                ("", "Ingress", "spec/defaultBackend/service/name"),
                ("apiregistration.k8s.io", "APIService", "spec/service/name"),
                (
                    ADMISSION,
                    "ValidatingWebhookConfiguration",
                    "webhooks/clientConfig/service",
                ),
                (
                    ADMISSION,
                    "MutatingWebhookConfiguration",
                    "webhooks/clientConfig/service",
                ),
            ]),
        ),
        (
            sel(RBAC, "", "Role"),
            plain(&[(RBAC, "RoleBinding", "roleRef/name")]),
        ),
        (
            sel(RBAC, "", "ClusterRole"),
            plain(&[
                (RBAC, "RoleBinding", "roleRef/name"),
                (RBAC, "ClusterRoleBinding", "roleRef/name"),
            ]),
        ),
        (sel("", "v1", "ServiceAccount"), service_account),
        (
            sel("", "v1", "PersistentVolumeClaim"),
            in_workloads("volumes/persistentVolumeClaim/claimName", &workload_kinds),
        ),
        (
            sel("", "v1", "PersistentVolume"),
            plain(&[
                ("", "PersistentVolumeClaim", "spec/volumeName"),
                ("", "ClusterRole", "rules/resourceNames"),
            ]),
        ),
        (sel("storage.k8s.io", "v1", "StorageClass"), storage_class),
        (
            sel("scheduling.k8s.io", "v1", "PriorityClass"),
            in_workloads("priorityClassName", &workload_kinds),
        ),
        // The catalog's copy spells the group with its version: it never
        // selects anything.
        (
            sel("networking.k8s.io/v1", "v1", "IngressClass"),
            plain(&[("", "Ingress", "spec/ingressClassName")]),
        ),
        (
            sel(ADMISSION, "", "ValidatingAdmissionPolicy"),
            plain(&[(
                ADMISSION,
                "ValidatingAdmissionPolicyBinding",
                "spec/policyName",
            )]),
        ),
    ]
}

/// `FixNameBackReference`: every referrer's name fields that name a
/// renamed resource it may refer to get the new name.
fn fix_name_references(items: &mut [Node], states: &[State]) -> Result<(), String> {
    let facts: Vec<Facts> = items
        .iter()
        .zip(states)
        .map(|(item, state)| {
            let id = Id::of(item);
            let cluster_scoped = id.is_cluster_scoped();
            Facts {
                cluster_scoped,
                effective_namespace: effective_namespace(cluster_scoped, &id.namespace),
                id,
                state: state.clone(),
            }
        })
        .collect();
    // Per referrer, its filters (field path, target) in configuration order.
    let mut filters: Vec<Vec<(&str, Selector)>> = items.iter().map(|_| Vec::new()).collect();
    for (target, referrers) in NAME_REFERENCES.iter() {
        for (selector, path) in referrers {
            for (index, fact) in facts.iter().enumerate() {
                if selects(
                    &fact.id.group,
                    &fact.id.version,
                    &fact.id.kind,
                    (selector.group, selector.version, selector.kind),
                ) {
                    filters[index].push((path.as_str(), *target));
                }
            }
        }
    }
    let mut split_paths: HashMap<&str, Vec<String>> = HashMap::new();
    for (index, item) in items.iter_mut().enumerate() {
        if filters[index].is_empty() {
            continue;
        }
        let candidates = Candidates::new(item, &facts[index], &facts);
        let role_ref = role_ref_selector(item);
        for &(path, target) in &filters[index] {
            let filter = NameRefFilter {
                referrer: &facts[index],
                path,
                target,
                candidates: &candidates,
                facts: &facts,
                role_ref: role_ref.clone(),
            };
            // `filter_field` with the referrer's own type, which always
            // selects it: the walk alone, on the path split once.
            let segments = split_paths.entry(path).or_insert_with(|| split_path(path));
            walk(item, segments, false, &mut Vec::new(), &mut |node, _| filter.set(node)).map_err(
                |error| {
                    let id = facts[index].id.to_go_string();
                    format!(
                        "updating name reference in '{path}' field of '{id}': considering field '{path}' of object {id}: {error}"
                    )
                },
            )?;
        }
    }
    Ok(())
}

/// kustomize `SubsetThatCouldBeReferencedByResource`: the resources a
/// referrer may name, found on first use (most referrers name nothing, and
/// finding them costs a pass over every resource).
struct Candidates<'a> {
    referrer: &'a Facts,
    facts: &'a [Facts],
    /// The namespaces of a RoleBinding's service-account subjects.
    role_binding_namespaces: HashSet<String>,
    found: std::cell::OnceCell<Vec<usize>>,
}

impl<'a> Candidates<'a> {
    fn new(item: &Node, referrer: &'a Facts, facts: &'a [Facts]) -> Candidates<'a> {
        Candidates {
            referrer,
            facts,
            role_binding_namespaces: role_binding_namespaces(item, referrer),
            found: std::cell::OnceCell::new(),
        }
    }

    /// The indices of the resources the referrer may name.
    fn get(&self) -> &[usize] {
        self.found.get_or_init(|| {
            if self.referrer.cluster_scoped {
                return (0..self.facts.len()).collect();
            }
            let referrer_namespace = &self.referrer.effective_namespace;
            self.facts
                .iter()
                .enumerate()
                .filter(|(_, fact)| {
                    fact.cluster_scoped
                        || fact.effective_namespace == *referrer_namespace
                        || self.role_binding_namespaces.contains(&fact.id.namespace)
                })
                .map(|(index, _)| index)
                .collect()
        })
    }
}

/// A RoleBinding may name service accounts in its subjects' namespaces.
fn role_binding_namespaces(item: &Node, referrer: &Facts) -> HashSet<String> {
    let mut role_binding_namespaces = HashSet::new();
    if referrer.id.kind == "RoleBinding"
        && let Some(subjects) = item.get("subjects").filter(|node| node.is_sequence())
    {
        for subject in &subjects.content {
            let text = |key: &str| {
                subject
                    .get(key)
                    .filter(|node| {
                        node.kind == NodeKind::Scalar && sdk::effective_tag(node) == tag::STR
                    })
                    .map(|node| node.value.to_string())
            };
            if text("kind").as_deref() == Some("ServiceAccount")
                && let Some(namespace) = text("namespace")
            {
                role_binding_namespaces.insert(namespace);
            }
        }
    }
    role_binding_namespaces
}

/// kustomize `getRoleRefGvk` as a selector, when the referrer's `roleRef`
/// has an `apiGroup` and a `kind`.
fn role_ref_selector(item: &Node) -> Option<(String, String)> {
    let role_ref = item.get("roleRef").filter(|node| node.is_mapping())?;
    let api_group = role_ref.get("apiGroup")?;
    let kind = role_ref.get("kind")?;
    Some((api_group.value.to_string(), kind.value.to_string()))
}

/// kustomize's `nameref.Filter` for one referrer field.
struct NameRefFilter<'a> {
    referrer: &'a Facts,
    path: &'a str,
    target: Selector,
    candidates: &'a Candidates<'a>,
    facts: &'a [Facts],
    role_ref: Option<(String, String)>,
}

impl NameRefFilter<'_> {
    fn set(&self, node: &mut Node) -> Result<(), String> {
        if is_null(node) {
            return Ok(());
        }
        match node.kind {
            NodeKind::Scalar => self.set_scalar(node),
            NodeKind::Mapping => self.set_mapping(node),
            NodeKind::Sequence => {
                for element in &mut node.content {
                    if is_null(element) {
                        continue;
                    }
                    match element.kind {
                        NodeKind::Scalar => self.set_scalar(element)?,
                        NodeKind::Mapping => self.set_mapping(element)?,
                        // kustomize logs and skips other elements.
                        _ => {}
                    }
                }
                Ok(())
            }
            _ => Err("node must be a scalar, sequence or map".to_owned()),
        }
    }

    fn set_scalar(&self, node: &mut Node) -> Result<(), String> {
        let old = node.value.to_string();
        let Some(referral) = self.select(&old, self.candidates.get().to_vec(), false)? else {
            return Ok(());
        };
        let name = &self.facts[referral].id.name;
        if *name == old {
            return Ok(());
        }
        set_scalar(node, &[], name)
    }

    fn set_mapping(&self, node: &mut Node) -> Result<(), String> {
        let Some(name_node) = node.get("name") else {
            return Err("path config error; no 'name' field in node".to_owned());
        };
        let old = name_node.value.to_string();
        let candidates = match node.get("namespace") {
            None => self.candidates.get().to_vec(),
            Some(namespace) => {
                let namespace = namespace.value.as_str();
                let by = |original: bool| -> Vec<usize> {
                    self.candidates
                        .get()
                        .iter()
                        .copied()
                        .filter(|&index| {
                            let fact = &self.facts[index];
                            let effective = if original {
                                fact.original_namespace()
                            } else {
                                fact.id.effective_namespace()
                            };
                            effective != NOT_A_NAMESPACE && effective == namespace
                        })
                        .collect()
                };
                let original = by(true);
                if original.is_empty() {
                    by(false)
                } else {
                    original
                }
            }
        };
        let Some(referral) = self.select(&old, candidates, true)? else {
            return Ok(());
        };
        let id = &self.facts[referral].id;
        if id.name == old && id.namespace.is_empty() {
            return Ok(());
        }
        set_field(node, "name", &id.name);
        if !id.namespace.is_empty() {
            set_field(node, "namespace", &id.namespace);
        }
        Ok(())
    }

    /// kustomize `selectReferral`.
    fn select(
        &self,
        old_name: &str,
        candidates: Vec<usize>,
        with_namespaces: bool,
    ) -> Result<Option<usize>, String> {
        let target = (self.target.group, self.target.version, self.target.kind);
        let referrer = self.referrer;
        let referrer_namespace = &referrer.effective_namespace;
        let candidates: Vec<usize> = candidates
            .into_iter()
            .filter(|&index| {
                let fact = &self.facts[index];
                fact.state
                    .previous
                    .as_ref()
                    .is_some_and(|previous| previous.name == old_name)
                    && fact.previous_selected_by(target)
                    && match (&self.role_ref, self.path.ends_with("roleRef/name")) {
                        (Some((group, kind)), true) => fact.previous_selected_by((group, "", kind)),
                        _ => true,
                    }
                    && (referrer.cluster_scoped
                        || fact.cluster_scoped
                        || fact.id.kind == "ServiceAccount"
                        || fact.effective_namespace == *referrer_namespace)
            })
            .collect();
        if candidates.len() == 1 {
            return Ok(candidates.first().copied());
        }
        let candidates: Vec<usize> = candidates
            .into_iter()
            .filter(|&index| {
                let state = &self.facts[index].state;
                same_ending(&state.prefixes, &referrer.state.prefixes)
                    && same_ending(&state.suffixes, &referrer.state.suffixes)
            })
            .collect();
        let Some(&first) = candidates.first() else {
            return Ok(None);
        };
        if candidates.len() == 1 {
            return Ok(Some(first));
        }
        let first_id = &self.facts[first].id;
        let identical = candidates.iter().all(|&index| {
            let id = &self.facts[index].id;
            id.name == first_id.name && (!with_namespaces || id.namespace == first_id.namespace)
        });
        if identical {
            return Ok(Some(first));
        }
        let ids: Vec<String> = candidates
            .iter()
            .map(|&index| self.facts[index].id.to_go_string())
            .collect();
        Err(format!(
            " found multiple possible referrals: {}",
            ids.join(", ")
        ))
    }
}

/// kustomize `utils.SameEndingSubSlice`.
fn same_ending(a: &[String], b: &[String]) -> bool {
    let (shortest, longest) = if a.len() > b.len() { (b, a) } else { (a, b) };
    let diff = longest.len() - shortest.len();
    if shortest.is_empty() {
        return diff == 0;
    }
    shortest
        .iter()
        .enumerate()
        .all(|(i, value)| longest[i + diff] == *value)
}

/// `removeKustomizeTrackingAnnotations`: every resource with annotations
/// (a renamed one always has kustomize's) gets them rewritten without the
/// build annotations.
fn remove_build_annotations(items: &mut [Node], states: &[State]) {
    for (item, state) in items.iter_mut().zip(states) {
        let mut annotations = sdk::annotations_map(item);
        if annotations.is_empty() && state.previous.is_none() {
            continue;
        }
        for key in BUILD_ANNOTATIONS {
            annotations.remove(key);
        }
        sdk::set_annotations_map(item, &annotations);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::yaml::parse_document;

    fn node(text: &str) -> Node {
        parse_document(text).unwrap().unwrap().into_root()
    }

    fn run_on(config: Option<&str>, items: &[&str]) -> Outcome {
        run(ResourceList {
            items: items.iter().map(|text| node(text)).collect(),
            function_config: config.map(node),
        })
    }

    fn error(config: Option<&str>, items: &[&str]) -> String {
        let outcome = run_on(config, items);
        assert_eq!(outcome.exit_code, 1, "{}", outcome.stderr);
        assert!(outcome.results.is_empty());
        outcome.stderr
    }

    const CM: &str = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm\n";

    #[test]
    fn config_errors_are_the_functions() {
        let prefix = "failed to load the `functionConfig`: ";
        for (config, message) in [
            (None, "substring must not be empty"),
            (
                Some(
                    "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\ndata:\n  prepend: a\n  append: b\n",
                ),
                "only 1 entry is allowed in the ConfigMap, but got: 2",
            ),
            (
                Some("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\n"),
                "only 1 entry is allowed in the ConfigMap, but got: 0",
            ),
            (
                Some("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\ndata:\n  insert: a\n"),
                "unknown editMode: insert, only prepend and append are allowed",
            ),
            (
                Some(
                    "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\ndata:\n  prepend: {a: b}\n",
                ),
                "error unmarshaling JSON: while decoding JSON: json: cannot unmarshal object into Go struct field ConfigMap.data of type string",
            ),
            (
                Some(
                    "apiVersion: v1\nkind: EnsureNameSubstring\nmetadata:\n  name: c\nsubstring: dev-\n",
                ),
                "function config must be either /v1, Kind=ConfigMap or fn.kpt.dev/v1alpha1, Kind=EnsureNameSubstring, but we got: /v1, Kind=EnsureNameSubstring",
            ),
            (
                Some(
                    "apiVersion: fn.kpt.dev/v1alpha1\nkind: EnsureNameSubstring\nmetadata:\n  name: c\n",
                ),
                "substring must not be empty",
            ),
            (
                Some(
                    "apiVersion: fn.kpt.dev/v1alpha1\nkind: EnsureNameSubstring\nmetadata:\n  name: c\nsubstring: [a]\n",
                ),
                "error unmarshaling JSON: while decoding JSON: json: cannot unmarshal array into Go struct field EnsureNameSubstring.substring of type string",
            ),
            (
                Some(
                    "apiVersion: fn.kpt.dev/v1alpha1\nkind: EnsureNameSubstring\nmetadata:\n  name: c\nsubstring: a\nadditionalNameFields: x\n",
                ),
                "error unmarshaling JSON: while decoding JSON: json: cannot unmarshal string into Go struct field EnsureNameSubstring.additionalNameFields of type []types.FieldSpec",
            ),
            (
                Some(
                    "apiVersion: fn.kpt.dev/v1alpha1\nkind: EnsureNameSubstring\nmetadata:\n  name: c\nsubstring: a\nfieldSpecs: []\nadditionalNameFields: []\n",
                ),
                "`fieldSpecs` has been deprecated, please rename it to `additionalNameFields`",
            ),
            (
                Some("apiVersion: v1\nkind: ConfigMap\n"),
                "missing metadata.name in object {{v1 ConfigMap} {{ } map[] map[]}}",
            ),
            (
                Some("metadata:\n  name: c\n  labels:\n    b: '2'\n    a: '1'\n"),
                "missing kind in object {{ } {{c } map[a:1 b:2] map[]}}",
            ),
        ] {
            assert_eq!(
                error(config, &[CM]),
                format!("{prefix}{message}"),
                "{config:?}"
            );
        }
    }

    #[test]
    fn item_errors_are_the_resmaps() {
        let config =
            Some("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\ndata:\n  prepend: dev-\n");
        assert_eq!(
            error(
                config,
                &[
                    CM,
                    "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm\n  namespace: default\n"
                ]
            ),
            "failed to convert items to resource map: may not add resource with an already registered id: ConfigMap.v1.[noGrp]/cm.default"
        );
        assert_eq!(
            error(
                config,
                &["apiVersion: v1\nkind: ConfigMap\nmetadata:\n  namespace: x\n"]
            ),
            "failed to convert items to resource map: missing metadata.name in object {{v1 ConfigMap} {{ x} map[] map[]}}"
        );
        assert_eq!(
            error(
                config,
                &["apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\nspec: 3\n"]
            ),
            "failed to fix name back reference: updating name reference in 'spec/volumes/configMap/name' field of 'Pod.v1.[noGrp]/dev-p.[noNs]': considering field 'spec/volumes/configMap/name' of object Pod.v1.[noGrp]/dev-p.[noNs]: expected sequence or mapping node"
        );
    }

    #[test]
    fn depends_on_names_get_the_substring_when_declared() {
        let config = |mode: &str| Config {
            substring: "substr".to_owned(),
            edit_mode: mode.to_owned(),
            fields: vec![FieldSpec::name()],
        };
        let lookup: HashSet<(String, String, String)> =
            [("group", "kind", "name"), ("", "kind", "name")]
                .into_iter()
                .map(|(g, k, n)| (g.to_owned(), k.to_owned(), n.to_owned()))
                .collect();
        for (mode, input, expected) in [
            (
                "prepend",
                "group/namespaces/ns/kind/name",
                Some("group/namespaces/ns/kind/substrname"),
            ),
            (
                "append",
                "group/namespaces/ns/kind/name",
                Some("group/namespaces/ns/kind/namesubstr"),
            ),
            (
                "append",
                "/namespaces/ns/kind/name",
                Some("/namespaces/ns/kind/namesubstr"),
            ),
            ("prepend", "group/kind/name", Some("group/kind/substrname")),
            ("append", "/kind/name", Some("/kind/namesubstr")),
            ("append", "some-prefix/group/namespaces/ns/kind/name", None),
            ("append", "group/namespaces/ns/kind/name/some-suffix", None),
            ("append", "group/oops/ns/kind/name/some-suffix", None),
            ("append", "some-prefix/group/kind/name", None),
            ("append", "group/kind/name/some-suffix", None),
            ("", "group/kind/name", None),
            ("append", "group/kind/other", None),
        ] {
            assert_eq!(
                depends_on_with_substring(input, &config(mode), &lookup).as_deref(),
                expected,
                "{mode} {input}"
            );
        }
    }

    /// Odd shapes end in the function's errors or pass through; none panics.
    #[test]
    fn odd_inputs_do_not_panic() {
        let config = "apiVersion: fn.kpt.dev/v1alpha1\nkind: EnsureNameSubstring\nmetadata:\n  name: c\nsubstring: x-\nadditionalNameFields:\n- path: spec\n- path: ''\n  create: true\n- path: a/b[]/c\n  create: yes\n- ~\n";
        for item in [
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: [a]\n",
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\nspec: {name: b}\n",
            "apiVersion: v1\nkind: RoleBinding\nmetadata:\n  name: a\nsubjects: [1, [2], {kind: ServiceAccount, namespace: [x]}]\nroleRef: 3\n",
            "apiVersion: v1\nkind: Pod\nmetadata:\n  name: a\n  annotations:\n    config.kubernetes.io/depends-on: /x/y/z/w/v/u\nspec:\n  volumes: [~, {configMap: [1]}, {configMap: {}}]\n",
            "kind: List\nmetadata: {}\n",
            "a\n",
            "[]\n",
        ] {
            let outcome = run_on(Some(config), &[item, CM]);
            assert!(
                outcome.exit_code == 0 || !outcome.stderr.is_empty(),
                "{item}"
            );
        }
    }

    #[test]
    fn paths_split_on_unescaped_slashes() {
        assert_eq!(
            split_path("metadata/annotations/a.io\\/b"),
            vec!["metadata", "annotations", "a.io/b"]
        );
        assert_eq!(split_path(""), vec![""]);
    }

    #[test]
    fn endings_compare_as_kustomize() {
        let v = |items: &[&str]| items.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert!(same_ending(&v(&["a", "b", "c"]), &v(&["b", "c"])));
        assert!(!same_ending(&v(&["a", "b", "c"]), &v(&["a", "b"])));
        assert!(!same_ending(&v(&[]), &v(&["a"])));
        assert!(same_ending(&v(&[]), &v(&[])));
    }
}
