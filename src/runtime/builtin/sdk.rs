//! The ResourceList wire format as the catalog functions see it: parsing the
//! bytes kpt writes to a function's stdin, the structured results model, and
//! writing the output list back the way the kpt Go SDK does (spec
//! catalog-functions §0, yaml-fidelity §8.3).
//!
//! Builtins work on the parsed [`Node`] tree with the function's own
//! value-setting conventions; this module owns everything around that: item
//! sorting, key order of the output list, exit codes and stderr texts of each
//! implementation family.

use std::collections::{BTreeMap, HashMap};

use super::goyaml::{go_format_float, parse_go_float, parse_go_int};
use crate::runtime::FunctionResponse;
use crate::yaml::node::{Node, NodeKind, tag};
use crate::yaml::{SeqIndent, parse_document, to_string};

/// `config.kubernetes.io/local-config`: resources that are not deployed.
pub(crate) const LOCAL_CONFIG: &str = "config.kubernetes.io/local-config";

/// The family-K failure text (kpt Go SDK `AsMain` when the processor reports
/// "not successful").
pub(crate) const FUNCTION_FAILURE: &str = "failed to evaluate function: error: function failure";

/// A parsed function input.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ResourceList {
    /// The items (mapping nodes), in wire order.
    pub(crate) items: Vec<Node>,
    /// The function config, `None` when absent, null or an empty mapping.
    pub(crate) function_config: Option<Node>,
}

impl ResourceList {
    /// Parses the ResourceList document kpt writes to a function's stdin.
    pub(crate) fn parse(input: &[u8]) -> Result<ResourceList, String> {
        let text =
            std::str::from_utf8(input).map_err(|err| format!("input is not valid UTF-8: {err}"))?;
        let document = parse_document(text).map_err(|err| err.to_string())?;
        let Some(mut document) = document else {
            return Ok(ResourceList {
                items: Vec::new(),
                function_config: None,
            });
        };
        let root = document.root_mut();
        if !root.is_mapping() {
            return Err("input is not a ResourceList".to_owned());
        }
        // Take the subtrees out of the parsed document instead of copying
        // them: the item list can be large.
        let items = match root.get_mut("items") {
            Some(items) if items.is_sequence() => std::mem::take(&mut items.content).into(),
            _ => Vec::new(),
        };
        let function_config = root
            .get_mut("functionConfig")
            .filter(|config| config.is_mapping() && !config.content.is_empty())
            .map(|config| std::mem::replace(config, Node::new_mapping()));
        Ok(ResourceList {
            items,
            function_config,
        })
    }
}

/// The parsed form of small documents a native step writes and reads back
/// on every call (its function config, its results), by their text. The
/// same few texts recur across the packages of a render, and each parse of
/// even a small document costs more than the step's own edits of a small
/// package.
pub(crate) struct RoundTrips<T> {
    parsed: std::sync::Mutex<Option<HashMap<String, T>>>,
}

impl<T: Clone> RoundTrips<T> {
    /// Texts longer than this are parsed every time.
    const MAX_TEXT: usize = 16 * 1024;
    /// The map is emptied when it reaches this many texts.
    const MAX_ENTRIES: usize = 256;

    pub(crate) const fn new() -> RoundTrips<T> {
        RoundTrips {
            parsed: std::sync::Mutex::new(None),
        }
    }

    /// `parse(text)`, or a copy of what it returned for the same text before.
    pub(crate) fn parse(&self, text: &str, parse: impl FnOnce(&str) -> T) -> T {
        if text.len() > Self::MAX_TEXT {
            return parse(text);
        }
        if let Ok(guard) = self.parsed.lock()
            && let Some(found) = guard.as_ref().and_then(|parsed| parsed.get(text))
        {
            return found.clone();
        }
        let value = parse(text);
        if let Ok(mut guard) = self.parsed.lock() {
            let parsed = guard.get_or_insert_with(HashMap::new);
            if parsed.len() >= Self::MAX_ENTRIES {
                parsed.clear();
            }
            parsed.insert(text.to_owned(), value.clone());
        }
        value
    }
}

/// Result severity as the SDKs write it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Severity {
    /// `error`
    Error,
    /// `warning`
    Warning,
    /// `info`
    Info,
}

impl Severity {
    fn as_str(self) -> &'static str {
        match self {
            Severity::Error => "error",
            Severity::Warning => "warning",
            Severity::Info => "info",
        }
    }
}

/// `resourceRef` of a result.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct ResourceRef {
    pub(crate) api_version: String,
    pub(crate) kind: String,
    pub(crate) name: String,
    pub(crate) namespace: String,
}

impl ResourceRef {
    /// The reference of an item.
    pub(crate) fn of(item: &Node) -> ResourceRef {
        let (api_version, kind, namespace, name) = identity(item);
        ResourceRef {
            api_version: api_version.to_owned(),
            kind: kind.to_owned(),
            name: name.to_owned(),
            namespace: namespace.to_owned(),
        }
    }
}

/// `field` of a result.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct FieldRef {
    pub(crate) path: String,
    /// The value node as the function's marshaller writes it (a Go
    /// `interface{}`: a string, number or boolean).
    pub(crate) current_value: Option<Node>,
    /// Likewise.
    pub(crate) proposed_value: Option<Node>,
}

/// `file` of a result. Index 0 is not written (Go `omitempty`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct FileRef {
    pub(crate) path: String,
    pub(crate) index: i64,
}

/// One structured result.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct FnResult {
    pub(crate) message: String,
    pub(crate) severity: Option<Severity>,
    pub(crate) resource_ref: Option<ResourceRef>,
    pub(crate) field: Option<FieldRef>,
    pub(crate) file: Option<FileRef>,
}

impl FnResult {
    /// A result with a message and a severity only.
    pub(crate) fn new(severity: Severity, message: impl Into<String>) -> FnResult {
        FnResult {
            message: message.into(),
            severity: Some(severity),
            ..FnResult::default()
        }
    }

    /// An `info` result.
    pub(crate) fn info(message: impl Into<String>) -> FnResult {
        FnResult::new(Severity::Info, message)
    }

    /// An `error` result.
    pub(crate) fn error(message: impl Into<String>) -> FnResult {
        FnResult::new(Severity::Error, message)
    }

    /// A result without severity (kyaml legacy items, set-annotations).
    pub(crate) fn plain(message: impl Into<String>) -> FnResult {
        FnResult {
            message: message.into(),
            ..FnResult::default()
        }
    }

    fn to_node(&self) -> Node {
        let mut node = Node::new_mapping();
        node.set("message", Node::new_string(self.message.as_str()));
        if let Some(severity) = self.severity {
            node.set("severity", Node::new_string(severity.as_str()));
        }
        if let Some(reference) = &self.resource_ref {
            let mut map = Node::new_mapping();
            for (key, value) in [
                ("apiVersion", &reference.api_version),
                ("kind", &reference.kind),
                ("name", &reference.name),
                ("namespace", &reference.namespace),
            ] {
                if !value.is_empty() {
                    map.set(key, Node::new_string(value.as_str()));
                }
            }
            node.set("resourceRef", map);
        }
        if let Some(field) = &self.field {
            let mut map = Node::new_mapping();
            if !field.path.is_empty() {
                map.set("path", Node::new_string(field.path.as_str()));
            }
            if let Some(current) = &field.current_value {
                map.set("currentValue", current.clone());
            }
            if let Some(proposed) = &field.proposed_value {
                map.set("proposedValue", proposed.clone());
            }
            node.set("field", map);
        }
        if let Some(file) = &self.file {
            let mut map = Node::new_mapping();
            if !file.path.is_empty() {
                map.set("path", Node::new_string(file.path.as_str()));
            }
            if file.index != 0 {
                map.set("index", Node::new_scalar(tag::INT, file.index.to_string()));
            }
            node.set("file", map);
        }
        node
    }
}

/// What a builtin produced, before it is written out.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Outcome {
    /// Output items.
    pub(crate) items: Vec<Node>,
    /// The function config, echoed back.
    pub(crate) function_config: Option<Node>,
    /// Structured results.
    pub(crate) results: Vec<FnResult>,
    /// Text for stderr (no trailing newline is added).
    pub(crate) stderr: String,
    /// Process exit code.
    pub(crate) exit_code: i32,
    /// Whether to sort items as the kpt Go SDK does before writing them.
    pub(crate) sort_items: bool,
    /// Results written as given, after `results` (functions whose results
    /// do not have the Go SDK's shape: the TypeScript SDK's key order,
    /// empty namespaces, `warn`).
    pub(crate) raw_results: Vec<Node>,
    /// Nothing is written to stdout (a function that crashed before
    /// writing its output).
    pub(crate) silent: bool,
}

impl Outcome {
    /// A successful family-K (Go SDK) outcome.
    pub(crate) fn sdk(input: ResourceList, results: Vec<FnResult>) -> Outcome {
        Outcome {
            items: input.items,
            function_config: input.function_config,
            results,
            stderr: String::new(),
            exit_code: 0,
            sort_items: true,
            raw_results: Vec::new(),
            silent: false,
        }
    }

    /// A family-K failure: the results are kept, stderr says the processor
    /// failed and the exit code is 1.
    pub(crate) fn sdk_failure(input: ResourceList, results: Vec<FnResult>) -> Outcome {
        Outcome {
            stderr: FUNCTION_FAILURE.to_owned(),
            exit_code: 1,
            ..Outcome::sdk(input, results)
        }
    }

    /// A family-K processor error (`Process` returned an error): the
    /// output is still written, stderr is `failed to evaluate function:
    /// <message>` and the exit code is 1.
    pub(crate) fn sdk_error(input: ResourceList, results: Vec<FnResult>, message: &str) -> Outcome {
        Outcome {
            stderr: format!("failed to evaluate function: {message}"),
            ..Outcome::sdk_failure(input, results)
        }
    }

    /// A kyaml-framework outcome: items keep their order.
    pub(crate) fn kyaml(input: ResourceList, results: Vec<FnResult>) -> Outcome {
        Outcome {
            sort_items: false,
            ..Outcome::sdk(input, results)
        }
    }

    /// Writes the output list as the function's response.
    pub(crate) fn into_response(mut self) -> FunctionResponse {
        if self.sort_items {
            sort_items(&mut self.items);
        }
        let mut list = Node::new_mapping();
        list.set("apiVersion", Node::new_string("config.kubernetes.io/v1"));
        list.set("kind", Node::new_string("ResourceList"));
        if !self.items.is_empty() || !self.sort_items {
            let mut items = Node::new_sequence();
            items.content = self.items.into();
            list.set("items", items);
        }
        if let Some(config) = self.function_config {
            list.set("functionConfig", config);
        }
        if !self.results.is_empty() || !self.raw_results.is_empty() {
            let mut results = Node::new_sequence();
            results.content = self.results.iter().map(FnResult::to_node).collect();
            results.content.extend(self.raw_results.drain(..));
            list.set("results", results);
        }
        FunctionResponse {
            stdout: if self.silent {
                Vec::new()
            } else {
                to_string(&list, SeqIndent::Compact).into_bytes()
            },
            stderr: self.stderr.into_bytes(),
            exit_code: self.exit_code,
        }
    }
}

/// What a builtin run on nodes produced, in the shapes the host would read
/// back from its stdout.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NativeOutcome {
    /// Output items (root mappings), sorted as the SDK writes them.
    pub items: Vec<Node>,
    /// The `results` node the function writes.
    pub results: Option<Node>,
    /// What the function writes to stderr.
    pub stderr: Vec<u8>,
    /// Its exit code.
    pub exit_code: i32,
}

impl Outcome {
    /// The outcome as the host would read it back, without writing the
    /// list: the items and the results nodes the function would write
    /// (what the host reads back from them encodes to the same bytes;
    /// `tests/cases/native.rs` holds the two paths to that).
    pub(crate) fn into_native(mut self) -> NativeOutcome {
        if self.sort_items {
            sort_items(&mut self.items);
        }
        let items = std::mem::take(&mut self.items);
        let results = results_node(&self.results, std::mem::take(&mut self.raw_results));
        NativeOutcome {
            items,
            results,
            stderr: self.stderr.into_bytes(),
            exit_code: self.exit_code,
        }
    }
}

/// The `results` node a function writes for `results` (then `raw`), none
/// when both are empty.
pub(crate) fn results_node(results: &[FnResult], raw: Vec<Node>) -> Option<Node> {
    if results.is_empty() && raw.is_empty() {
        return None;
    }
    let mut node = Node::new_sequence();
    node.content = results.iter().map(FnResult::to_node).collect();
    node.content.extend(raw);
    Some(node)
}

/// Sorts items by `"<apiVersion> <kind> <namespace> <name>"`, as the kpt Go
/// SDK does before writing its output. Go's sort is not stable; ties are
/// rare (identical identities) and keep their input order here.
pub(crate) fn sort_items(items: &mut [Node]) {
    // The joined keys live in one buffer and compare as byte slices: the
    // Go SDK's string order, without an allocation per item, and a
    // memcmp per comparison (a DFS root sorts the whole tree's resources).
    let order = {
        let mut buffer = String::new();
        let mut ends = Vec::with_capacity(items.len());
        for item in items.iter() {
            let (api_version, kind, namespace, name) = identity(item);
            for (i, part) in [api_version, kind, namespace, name].into_iter().enumerate() {
                if i > 0 {
                    buffer.push(' ');
                }
                buffer.push_str(part);
            }
            ends.push(buffer.len());
        }
        let key = |i: usize| {
            let start = if i == 0 { 0 } else { ends[i - 1] };
            &buffer.as_bytes()[start..ends[i]]
        };
        let mut order: Vec<usize> = (0..items.len()).collect();
        // Stable, as the cached-key sort it replaces (and linear on sorted input).
        order.sort_by(|&a, &b| key(a).cmp(key(b)));
        order
    };
    permute(items, order);
}

/// An item's apiVersion, kind, namespace and name, as the SDK sorts them.
fn identity(item: &Node) -> (&str, &str, &str, &str) {
    crate::krm::resource::sdk_identity(item)
}

/// Rearranges `items` so that position `i` holds what was at `order[i]`
/// (`order` is a permutation), by swapping along its cycles.
fn permute(items: &mut [Node], mut order: Vec<usize>) {
    for start in 0..order.len() {
        let mut current = start;
        while order[current] != start {
            let next = order[current];
            items.swap(current, next);
            order[current] = current;
            current = next;
        }
        order[current] = current;
    }
}

/// The value of annotation `key` of an item, if it is a scalar.
pub(crate) fn annotation<'a>(item: &'a Node, key: &str) -> Option<&'a str> {
    item.get_path(&["metadata", "annotations"])
        .and_then(|annotations| annotations.get(key))
        .filter(|value| value.is_scalar())
        .map(|value| value.value.as_str())
}

/// True for resources marked `config.kubernetes.io/local-config` with any
/// value other than empty or `false`.
pub(crate) fn is_local_config(item: &Node) -> bool {
    annotation(item, LOCAL_CONFIG).is_some_and(|value| !value.is_empty() && value != "false")
}

/// The item's file path annotation (internal first, then legacy when the
/// internal one is missing or empty, as kyaml's `GetFileAnnotations`).
pub(crate) fn file_path(item: &Node) -> Option<&str> {
    annotation(item, crate::krm::resource::PATH)
        .filter(|path| !path.is_empty())
        .or_else(|| annotation(item, crate::krm::resource::LEGACY_PATH))
}

/// The scalar values of a sequence's elements, sorted (the setter
/// functions compare sequences so); other elements count as empty.
pub(crate) fn sorted_values(sequence: &Node) -> Vec<String> {
    let mut values: Vec<String> = sequence
        .content
        .iter()
        .map(|element| element.value.to_string())
        .collect();
    values.sort();
    values
}

/// The legacy framework functions' report of what they did to some items:
/// an info `<count line>` then one result per item, or the warning `none`
/// when there was nothing to do.
pub(crate) fn counted_results(
    count_line: impl FnOnce(usize) -> String,
    items: Vec<FnResult>,
    none: String,
) -> Vec<FnResult> {
    if items.is_empty() {
        return vec![FnResult::new(Severity::Warning, none)];
    }
    std::iter::once(FnResult::info(count_line(items.len())))
        .chain(items)
        .collect()
}

/// The item's file index annotation (internal first, then legacy).
pub(crate) fn file_index(item: &Node) -> Option<i64> {
    annotation(item, crate::krm::resource::INDEX)
        .or_else(|| annotation(item, crate::krm::resource::LEGACY_INDEX))
        .and_then(|index| index.trim().parse().ok())
}

/// Splits an apiVersion into (group, version); `v1` has an empty group.
pub(crate) fn split_api_version(api_version: &str) -> (&str, &str) {
    match api_version.rsplit_once('/') {
        Some((group, version)) => (group, version),
        None => ("", api_version),
    }
}

/// Replaces `slot` with a new `!!str` scalar holding `value`, as the Go SDK's
/// field setters do: the old node's style is lost, its comments are kept.
pub(crate) fn replace_with_string(slot: &mut Node, value: &str) {
    let mut node = Node::new_string(value);
    node.set_head_comment(slot.take_head_comment());
    node.set_line_comment(slot.take_line_comment());
    node.set_foot_comment(slot.take_foot_comment());
    *slot = node;
}

/// Returns the mapping under `key`, creating an empty one (appended at the
/// end of `parent`, or in place of a null value) when missing. `None` when
/// `parent` is not a mapping or the value is some other kind.
pub(crate) fn ensure_mapping<'a>(parent: &'a mut Node, key: &str) -> Option<&'a mut Node> {
    let child = parent.entry_or_insert_with(key, Node::new_mapping)?;
    if child.is_null() {
        *child = Node::new_mapping();
    }
    (child.kind == NodeKind::Mapping).then_some(child)
}

/// kyaml `GetAnnotations`: each annotation's text by key (the last of
/// repeated keys; non-scalar values read as empty).
pub(crate) fn annotations_map(item: &Node) -> BTreeMap<String, String> {
    item.get_path(&["metadata", "annotations"])
        .map(|annotations| {
            annotations
                .pairs()
                .map(|(key, value)| (key.value.to_string(), value.value.to_string()))
                .collect()
        })
        .unwrap_or_default()
}

/// kyaml `SetAnnotations` (`setMapInMetadata`): `metadata.annotations` is
/// removed, then rebuilt at the end of `metadata` (itself created at the
/// end of the item when missing) with sorted keys and `!!str` values; an
/// empty map leaves no `annotations` key.
pub(crate) fn set_annotations_map(item: &mut Node, annotations: &BTreeMap<String, String>) {
    let Some(metadata) = ensure_mapping(item, "metadata") else {
        return;
    };
    metadata.remove("annotations");
    if annotations.is_empty() {
        return;
    }
    let Some(mapping) = ensure_mapping(metadata, "annotations") else {
        return;
    };
    for (key, value) in annotations {
        mapping.push_pair(
            Node::new_string(key.as_str()),
            Node::new_string(value.as_str()),
        );
    }
}

/// The tag a scalar reads as: its own, else resolved from a plain text.
pub(crate) fn effective_tag(node: &Node) -> &str {
    if !node.tag().is_empty() {
        node.tag()
    } else if node.style.is_empty() {
        crate::yaml::resolve::resolve_plain(&node.value)
    } else {
        tag::STR
    }
}

/// Go's `%q` for a string (one copy, with the krm layer's sorting).
pub(crate) use crate::krm::order::go_quote;

/// Text that go-yaml v3's marshaller would not write plain: v3
/// non-strings plus the YAML 1.1 booleans and base-60 numbers it quotes
/// for old readers (the rule the kpt SDKs' string setters follow).
pub(crate) fn is_yaml11_non_string(text: &str) -> bool {
    !crate::yaml::marshal::can_use_plain(text)
}

/// kyaml `IsValueNonString`: a one-line text that go-yaml v2 (YAML 1.1)
/// does not read as a string: null, a boolean (`yes`, `on`, ...), a
/// number, a collection, or nothing at all (a comment). Timestamps and
/// base-60 numbers are strings to it; text it cannot parse counts as a
/// string.
pub(crate) fn is_value_non_string(text: &str) -> bool {
    if text.is_empty() || text.contains('\n') {
        return false;
    }
    let bytes = text.as_bytes();
    // Most texts are one plain scalar to YAML 1.1; only those that could be
    // something else (an indicator first, surrounding blanks, `: ` or ` #`
    // inside) take a parse.
    let simple = !crate::yaml::scanner::is_indicator(bytes[0])
        && !matches!(bytes[0], b' ' | b'\t')
        && !matches!(bytes[bytes.len() - 1], b' ' | b'\t' | b':')
        && !text.contains(": ")
        && !text.contains(":\t")
        && !text.contains(" #")
        && !text.contains("\t#");
    if simple {
        return plain_non_string(text);
    }
    let root = match parse_document(text) {
        Err(_) => return false,
        Ok(None) => return true,
        Ok(Some(document)) => match document.content.into_iter().next() {
            Some(root) => root,
            None => return true,
        },
    };
    if root.kind != NodeKind::Scalar {
        return true;
    }
    if root.style.contains(crate::yaml::Style::TAGGED) {
        return root.tag() != tag::STR;
    }
    if !root.style.is_empty() {
        return false;
    }
    plain_non_string(&root.value)
}

/// go-yaml v2's reading of a plain scalar: null, a (YAML 1.1) boolean or a
/// number; timestamps stay strings.
fn plain_non_string(text: &str) -> bool {
    let resolved = crate::yaml::resolve::resolve_plain(text);
    matches!(resolved, tag::NULL | tag::BOOL | tag::INT | tag::FLOAT) || yaml11_bool(text).is_some()
}

/// A string field: scalars become their text as `sigs.k8s.io/yaml` turns
/// them into JSON strings for a string target (go-yaml v2 reads YAML 1.1
/// booleans); null leaves it empty. (Floats are formatted with 64-bit
/// precision here, 32-bit in Go: only digits past float32's differ.)
pub(crate) fn read_string(node: Option<&Node>, parent: &str, path: &str) -> Result<String, String> {
    let Some(node) = node else {
        return Ok(String::new());
    };
    if node.kind != NodeKind::Scalar {
        return Err(type_error(node, parent, path, "string"));
    }
    let text = node.value.as_str();
    Ok(match effective_tag(node) {
        tag::NULL => String::new(),
        tag::BOOL => (matches!(text, "true" | "True" | "TRUE")).to_string(),
        tag::INT => parse_go_int(text).map_or_else(|| text.to_owned(), |int| int.to_string()),
        tag::FLOAT => parse_go_float(text).map_or_else(|| text.to_owned(), go_format_float),
        _ if node.style.is_empty() && yaml11_bool(text).is_some() => {
            yaml11_bool(text).unwrap_or_default().to_string()
        }
        _ => text.to_owned(),
    })
}

/// go-yaml v2's YAML 1.1 booleans beyond `true`/`false`.
pub(crate) fn yaml11_bool(text: &str) -> Option<bool> {
    match text {
        "y" | "Y" | "yes" | "Yes" | "YES" | "on" | "On" | "ON" => Some(true),
        "n" | "N" | "no" | "No" | "NO" | "off" | "Off" | "OFF" => Some(false),
        _ => None,
    }
}

pub(crate) fn expect_object(
    node: &Node,
    parent: &str,
    path: &str,
    go_type: &str,
) -> Result<(), String> {
    if node.kind == NodeKind::Mapping || is_null(node) {
        return Ok(());
    }
    Err(type_error(node, parent, path, go_type))
}

/// encoding/json's `UnmarshalTypeError` text.
pub(crate) fn type_error(node: &Node, parent: &str, path: &str, go_type: &str) -> String {
    let found = match node.kind {
        NodeKind::Mapping => "object",
        NodeKind::Sequence => "array",
        _ => match effective_tag(node) {
            tag::BOOL => "bool",
            tag::INT | tag::FLOAT => "number",
            _ => "string",
        },
    };
    format!("json: cannot unmarshal {found} into Go struct field {parent}.{path} of type {go_type}")
}

/// True for a null scalar, tagged or plain.
pub(crate) fn is_null(node: &Node) -> bool {
    node.kind == NodeKind::Scalar && effective_tag(node) == tag::NULL
}

/// The value encoding/json gives a field after `sigs.k8s.io/yaml`'s JSON
/// trip: of the keys equal to `name` ignoring case, the last in the JSON
/// text, whose keys `json.Marshal` sorts (of repeated keys, the last one).
pub(crate) fn json_field<'a>(node: &'a Node, name: &str) -> Option<&'a Node> {
    let mut found: Option<(&Node, &Node)> = None;
    for (key, value) in node.pairs() {
        if key.value.eq_ignore_ascii_case(name)
            && found.is_none_or(|(best, _)| key.value.as_str() >= best.value.as_str())
        {
            found = Some((key, value));
        }
    }
    found.map(|(_, value)| value)
}

/// kyaml `resid.FromRNode(obj).String()`: `Kind.version.group/name.namespace`.
pub(crate) fn res_id(item: &Node) -> String {
    let api_version = item.get_str(&["apiVersion"]).unwrap_or_default();
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    res_id_string(
        group,
        version,
        item.get_str(&["kind"]).unwrap_or_default(),
        item.get_str(&["metadata", "name"]).unwrap_or_default(),
        item.get_str(&["metadata", "namespace"]).unwrap_or_default(),
    )
}

/// kyaml `ResId.String()` of its parts, `[noKind]`-style for missing ones.
pub(crate) fn res_id_string(
    group: &str,
    version: &str,
    kind: &str,
    name: &str,
    namespace: &str,
) -> String {
    let or = |text: &str, missing: &'static str| {
        if text.is_empty() {
            missing.to_owned()
        } else {
            text.to_owned()
        }
    };
    format!(
        "{}.{}.{}/{}.{}",
        or(kind, "[noKind]"),
        or(version, "[noVer]"),
        or(group, "[noGrp]"),
        or(name, "[noName]"),
        or(namespace, "[noNs]"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// kyaml `IsValueNonString`: what go-yaml v2 reads as a non-string.
    #[test]
    fn value_non_string_follows_yaml_1_1() {
        for (text, expected) in [
            ("3", true),
            ("yes", true),
            ("Off", true),
            ("~", true),
            (".inf", true),
            ("0x1F", true),
            ("-1.5e3", true),
            ("a: b", true),
            ("[a]", true),
            ("- a", true),
            ("#x", true),
            (" 3", true),
            ("&a 3", true),
            ("2021-01-01", false),
            ("1:20", false),
            ("'3'", false),
            ("text", false),
            ("a #b", false),
            ("{", false),
            ("*a", false),
            ("", false),
            ("3\n", false),
        ] {
            assert_eq!(is_value_non_string(text), expected, "{text:?}");
        }
    }

    #[test]
    fn round_trips_parse_each_short_text_once() {
        let memo: RoundTrips<usize> = RoundTrips::new();
        let calls = std::cell::Cell::new(0);
        let parse = |text: &str| {
            calls.set(calls.get() + 1);
            text.len()
        };
        assert_eq!(memo.parse("abc", parse), 3);
        assert_eq!(memo.parse("abc", parse), 3);
        assert_eq!(calls.get(), 1, "a repeated text is answered from the memo");
        assert_eq!(memo.parse("abcd", parse), 4);
        assert_eq!(calls.get(), 2, "another text is parsed");
        let long = "x".repeat(RoundTrips::<usize>::MAX_TEXT + 1);
        memo.parse(&long, parse);
        memo.parse(&long, parse);
        assert_eq!(calls.get(), 4, "long texts are parsed every time");
        for i in 0..2 * RoundTrips::<usize>::MAX_ENTRIES {
            memo.parse(&i.to_string(), parse);
        }
        let held = memo.parsed.lock().unwrap().as_ref().map_or(0, HashMap::len);
        assert!(
            held <= RoundTrips::<usize>::MAX_ENTRIES,
            "{held} texts held"
        );
    }

    #[test]
    fn go_quote_escapes_like_go() {
        assert_eq!(go_quote("staging"), "\"staging\"");
        assert_eq!(go_quote("a\"b\\c\nd\u{1}"), "\"a\\\"b\\\\c\\nd\\x01\"");
    }

    #[test]
    fn items_sort_as_the_joined_string_keys_do() {
        // Fields with spaces, control bytes, prefixes, ties, repeated keys
        // and non-string values: the order must
        // be that of the Go SDK's "<apiVersion> <kind> <namespace> <name>"
        // strings, stable among equal keys.
        let fields = ["", "a", "a b", "a\tb", "ab", "b", "v1", "v1beta1"];
        let mut items = Vec::new();
        let mut seed = 7u32;
        for serial in 0..300 {
            let mut pick = || {
                seed = seed.wrapping_mul(1_103_515_245).wrapping_add(12_345);
                fields[(seed >> 16) as usize % fields.len()]
            };
            let mut item = Node::new_mapping();
            item.set("apiVersion", Node::new_string(pick()));
            item.set("kind", Node::new_string(pick()));
            let mut metadata = Node::new_mapping();
            metadata.set("namespace", Node::new_string(pick()));
            metadata.set("name", Node::new_string(pick()));
            metadata.set("serial", Node::new_string(serial.to_string()));
            if serial % 11 == 0 {
                // Not a string: sorts as empty.
                metadata.set("name", Node::new_mapping());
            }
            item.set("metadata", metadata);
            if serial % 7 == 0 {
                // A repeated key: the first one counts.
                item.push_pair(Node::new_string("kind"), Node::new_string(pick()));
            }
            items.push(item);
        }
        let mut expected = items.clone();
        expected.sort_by_cached_key(|item| {
            let field = |path: &[&str]| item.get_str(path).unwrap_or_default().to_owned();
            format!(
                "{} {} {} {}",
                field(&["apiVersion"]),
                field(&["kind"]),
                field(&["metadata", "namespace"]),
                field(&["metadata", "name"]),
            )
        });
        sort_items(&mut items);
        let serials = |items: &[Node]| -> Vec<String> {
            items
                .iter()
                .map(|item| {
                    item.get_str(&["metadata", "serial"])
                        .unwrap_or_default()
                        .to_owned()
                })
                .collect()
        };
        assert_eq!(serials(&items), serials(&expected));
        // Sorted input stays as it is.
        sort_items(&mut items);
        assert_eq!(serials(&items), serials(&expected));
    }

    #[test]
    fn api_version_splits_group() {
        assert_eq!(split_api_version("apps/v1"), ("apps", "v1"));
        assert_eq!(split_api_version("v1"), ("", "v1"));
    }
}

/// A kustomize field spec (`types.FieldSpec`): where a field lives, for
/// which kinds. The builtins that take them add their own constructors.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct FieldSpec {
    pub(crate) group: String,
    pub(crate) version: String,
    pub(crate) kind: String,
    /// `/`-separated; see [`split_path`].
    pub(crate) path: String,
    pub(crate) create: bool,
}

/// kustomize's `PathSplitter(path, "/")`: `/`-separated, `\/` escapes a
/// slash.
pub(crate) fn split_path(path: &str) -> Vec<String> {
    let mut parts: Vec<String> = Vec::new();
    for piece in path.split('/') {
        match parts.last_mut() {
            Some(last) if last.ends_with('\\') => {
                last.pop();
                last.push('/');
                last.push_str(piece);
            }
            _ => parts.push(piece.to_owned()),
        }
    }
    parts
}
