//! `format` (kyaml framework `command.Build`): kyaml's `FormatFilter` with
//! `UseSchema`, as the catalog's function runs it
//! (kptdev/krm-functions-catalog functions/go/format, kyaml
//! `kio/filters/fmtr.go`).
//!
//! For every item with a `kind` and an `apiVersion`:
//! - every mapping is reordered by kyaml's fixed field precedence
//!   (`yaml.FieldOrder`); fields it does not list come after, by name;
//! - the containers of apps/batch/core workloads are sorted by name, and a
//!   v1 ValidatingWebhookConfiguration's rule operations by value;
//! - a scalar whose field has a type in kyaml's bundled OpenAPI document
//!   (`openapi`) and whose text YAML 1.1 does not read as a string is
//!   double-quoted in a string field and unquoted in a boolean, integer or
//!   number field (kyaml `FormatNonStringStyle`), with the type's tag.
//!
//! Go's `sort.Sort` is not stable: for more than 12 containers with equal
//! names the function's order is the sort's; here equal ones keep theirs.

use serde_json::Value;

use super::openapi::{self, OpenApi};
use super::sdk::{self, Outcome, ResourceList};
use crate::yaml::node::{Node, NodeKind, Style, tag};

/// kyaml's `fieldSortOrder`. Two names appear twice; the later place wins,
/// as in kyaml's index.
const FIELD_SORT_ORDER: &[&str] = &[
    // top-level metadata
    "name",
    "generateName",
    "namespace",
    "clusterName",
    "apiVersion",
    "kind",
    "metadata",
    "type",
    "labels",
    "annotations",
    "spec",
    "status",
    // secret and configmap
    "stringData",
    "data",
    "binaryData",
    // workload specs
    "parallelism",
    "completions",
    "activeDeadlineSeconds",
    "backoffLimit",
    "replicas",
    "selector",
    "manualSelector",
    "template",
    "ttlSecondsAfterFinished",
    "volumeClaimTemplates",
    "service",
    "serviceName",
    "podManagementPolicy",
    "updateStrategy",
    "strategy",
    "minReadySeconds",
    "revision",
    "revisionHistoryLimit",
    "paused",
    "progressDeadlineSeconds",
    // pod spec scalars
    "restartPolicy",
    "terminationGracePeriodSeconds",
    "activeDeadlineSeconds",
    "dnsPolicy",
    "serviceAccountName",
    "serviceAccount",
    "automountServiceAccountToken",
    "nodeName",
    "hostNetwork",
    "hostPID",
    "hostIPC",
    "shareProcessNamespace",
    "hostname",
    "subdomain",
    "schedulerName",
    "priorityClassName",
    "priority",
    "runtimeClassName",
    "enableServiceLinks",
    // pod spec lists, maps and objects
    "nodeSelector",
    "hostAliases",
    "initContainers",
    "containers",
    "volumes",
    "securityContext",
    "imagePullSecrets",
    "affinity",
    "tolerations",
    "dnsConfig",
    "readinessGates",
    // containers
    "image",
    "command",
    "args",
    "workingDir",
    "ports",
    "envFrom",
    "env",
    "resources",
    "volumeMounts",
    "volumeDevices",
    "livenessProbe",
    "readinessProbe",
    "lifecycle",
    "terminationMessagePath",
    "terminationMessagePolicy",
    "imagePullPolicy",
    "securityContext",
    "stdin",
    "stdinOnce",
    "tty",
    // service
    "clusterIP",
    "externalIPs",
    "loadBalancerIP",
    "loadBalancerSourceRanges",
    "externalName",
    "externalTrafficPolicy",
    "sessionAffinity",
    // ports
    "protocol",
    "port",
    "targetPort",
    "hostPort",
    "containerPort",
    "hostIP",
    // volume mounts
    "readOnly",
    "mountPath",
    "subPath",
    "subPathExpr",
    "mountPropagation",
    // env vars and their sources
    "value",
    "valueFrom",
    "fieldRef",
    "resourceFieldRef",
    "configMapKeyRef",
    "secretKeyRef",
    "prefix",
    "configMapRef",
    "secretRef",
];

/// kyaml `WhitelistedListSortKinds`.
const LIST_SORT_KINDS: &[&str] = &[
    "CronJob",
    "DaemonSet",
    "Deployment",
    "Job",
    "ReplicaSet",
    "StatefulSet",
    "ValidatingWebhookConfiguration",
];

/// kyaml `WhitelistedListSortApis`.
const LIST_SORT_APIS: &[&str] = &[
    "apps/v1",
    "apps/v1beta1",
    "apps/v1beta2",
    "batch/v1",
    "batch/v1beta1",
    "extensions/v1beta1",
    "v1",
    "admissionregistration.k8s.io/v1",
];

/// kyaml `WhitelistedListSortFields`: a list's path and the field its
/// elements sort by (empty: the elements' own values).
fn list_sort_field(path: &str) -> Option<&'static str> {
    match path {
        ".spec.template.spec.containers" => Some("name"),
        ".webhooks.rules.operations" => Some(""),
        _ => None,
    }
}

/// A field's precedence: its last place in [`FIELD_SORT_ORDER`].
fn field_order(name: &str) -> Option<usize> {
    FIELD_SORT_ORDER.iter().rposition(|field| *field == name)
}

/// Runs format on a parsed input.
pub(crate) fn run(mut input: ResourceList) -> Outcome {
    let api = match openapi::bundled() {
        Ok(api) => api,
        Err(message) => {
            let mut outcome = Outcome::kyaml(input, Vec::new());
            outcome.stderr = format!("failed to format resources: {message}\n");
            outcome.exit_code = 1;
            return outcome;
        }
    };
    for item in &mut input.items {
        format_with(api, item);
    }
    Outcome::kyaml(input, Vec::new())
}

/// kyaml `FormatFilter{UseSchema: true}` on one item (other functions
/// format the resources they create with it). Fails only when the bundled
/// OpenAPI document cannot be read.
pub(crate) fn format_item(item: &mut Node) -> Result<(), String> {
    format_with(openapi::bundled()?, item);
    Ok(())
}

/// Formats one item; items without a kind or an apiVersion stay as they are.
fn format_with(api: &OpenApi, item: &mut Node) {
    let kind = item.get_str(&["kind"]).map(str::to_owned);
    let api_version = item.get_str(&["apiVersion"]).map(str::to_owned);
    let (Some(kind), Some(api_version)) = (kind, api_version) else {
        return;
    };
    let formatter = Formatter { api };
    let schema = api.for_type(&api_version, &kind);
    // Paths only matter where lists may be sorted.
    let path = (LIST_SORT_KINDS.contains(&kind.as_str())
        && LIST_SORT_APIS.contains(&api_version.as_str()))
    .then_some("");
    formatter.format(item, path, schema);
}

/// kyaml's `formatter`, over the schema document.
struct Formatter<'a> {
    api: &'a OpenApi,
}

impl Formatter<'_> {
    /// kyaml `fmtNode`: `path` is the dotted field path (list elements keep
    /// their list's path), `None` for a resource whose lists are not sorted.
    fn format(&self, node: &mut Node, path: Option<&str>, schema: Option<&Value>) {
        if node.kind == NodeKind::Scalar
            && let Some(schema) = schema
        {
            format_non_string_style(node, schema);
        }
        match node.kind {
            NodeKind::Mapping => sort_mapping(node),
            NodeKind::Sequence => {
                if let Some(field) = path.and_then(list_sort_field) {
                    node.content.sort_by(|left, right| {
                        sort_value(left, field).cmp(sort_value(right, field))
                    });
                }
            }
            _ => {}
        }
        if node.kind == NodeKind::Mapping {
            for pair in node.content.chunks_exact_mut(2) {
                let [key, value] = pair else { continue };
                self.format(key, path, None);
                let field_path = path.map(|path| format!("{path}.{}", key.value));
                let field_schema = schema.and_then(|schema| self.api.field(schema, &key.value));
                self.format(value, field_path.as_deref(), field_schema);
            }
        } else {
            let element_schema = match node.kind {
                NodeKind::Sequence => schema.and_then(|schema| self.api.elements(schema)),
                _ => None,
            };
            for child in &mut node.content {
                self.format(child, path, element_schema);
            }
        }
    }
}

/// kyaml `sortedMapContents`: known fields by precedence, then the rest by
/// name (byte order).
fn sort_mapping(node: &mut Node) {
    let content = std::mem::take(&mut node.content);
    let mut pairs: Vec<(Node, Node)> = Vec::with_capacity(content.len() / 2);
    let mut nodes = content.into_iter();
    while let (Some(key), Some(value)) = (nodes.next(), nodes.next()) {
        pairs.push((key, value));
    }
    pairs.sort_by(|(left, _), (right, _)| {
        match (field_order(&left.value), field_order(&right.value)) {
            (Some(left), Some(right)) => left.cmp(&right),
            (Some(_), None) => std::cmp::Ordering::Less,
            (None, Some(_)) => std::cmp::Ordering::Greater,
            (None, None) => left.value.as_str().cmp(right.value.as_str()),
        }
    });
    node.content = pairs
        .into_iter()
        .flat_map(|(key, value)| [key, value])
        .collect();
}

/// kyaml `sortedSeqContents`: an element's own value, or the value of its
/// (last) `field` key.
fn sort_value<'a>(element: &'a Node, field: &str) -> &'a str {
    if field.is_empty() {
        return element.value.as_str();
    }
    element
        .content
        .chunks_exact(2)
        .rfind(|pair| pair[0].value == field)
        .map_or("", |pair| pair[1].value.as_str())
}

/// kyaml `FormatNonStringStyle`.
fn format_non_string_style(node: &mut Node, schema: &Value) {
    let Some(kind) = openapi::single_type(schema) else {
        return;
    };
    if !sdk::is_value_non_string(&node.value) {
        return;
    }
    let quoted =
        node.style.contains(Style::DOUBLE_QUOTED) || node.style.contains(Style::SINGLE_QUOTED);
    let tag = match kind {
        "string" if schema.get("format").and_then(Value::as_str) != Some("int-or-string") => {
            if !quoted {
                node.style = Style::DOUBLE_QUOTED;
            }
            tag::STR
        }
        "boolean" | "integer" | "number" => {
            if quoted {
                node.style = Style::PLAIN;
            }
            match kind {
                "boolean" => tag::BOOL,
                "integer" => tag::INT,
                _ => tag::FLOAT,
            }
        }
        _ => return,
    };
    // A null stays a null (kpt issue 2321).
    if sdk::effective_tag(node) == tag::NULL {
        node.style = Style::PLAIN;
        return;
    }
    node.set_tag(tag);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::yaml::{SeqIndent, parse_document, to_string};

    fn format_text(text: &str) -> String {
        let root = parse_document(text).unwrap().unwrap().into_root();
        let outcome = run(ResourceList {
            items: vec![root],
            function_config: None,
        });
        assert_eq!(outcome.exit_code, 0);
        to_string(&outcome.items[0], SeqIndent::Compact)
    }

    /// The catalog's example: a Deployment's fields in kyaml's order, its
    /// labels by name, its containers by name.
    #[test]
    fn orders_fields_and_sorts_containers() {
        let formatted = format_text(
            "spec:\n  template:\n    spec:\n      containers:\n      - name: b\n        image: b\n      - image: a\n        name: a\n  replicas: 3\nmetadata:\n  labels:\n    z: \"1\"\n    a: \"2\"\n  name: web\nkind: Deployment\napiVersion: apps/v1\n",
        );
        assert_eq!(
            formatted,
            "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\n  labels:\n    a: \"2\"\n    z: \"1\"\nspec:\n  replicas: 3\n  template:\n    spec:\n      containers:\n      - name: a\n        image: a\n      - name: b\n        image: b\n"
        );
    }

    /// Quoting by the field's type: YAML 1.1 non-strings are quoted in
    /// string fields and unquoted in numeric and boolean ones; other
    /// scalars, unknown kinds and int-or-string fields are left alone.
    #[test]
    fn quotes_by_field_type() {
        let formatted = format_text(
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\ndata:\n  enabled: on\n  count: 3\n  when: 2021-01-01\n  empty: ~\n  plain: text\n",
        );
        assert_eq!(
            formatted,
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\ndata:\n  count: \"3\"\n  empty: ~\n  enabled: \"on\"\n  plain: text\n  when: 2021-01-01\n"
        );
        let formatted = format_text(
            "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: d\nspec:\n  replicas: \"3\"\n  paused: 'true'\n  strategy:\n    rollingUpdate:\n      maxSurge: \"1\"\n  template:\n    spec:\n      containers:\n      - name: a\n        resources:\n          limits:\n            cpu: 1\n",
        );
        assert_eq!(
            formatted,
            "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: d\nspec:\n  replicas: 3\n  template:\n    spec:\n      containers:\n      - name: a\n        resources:\n          limits:\n            cpu: \"1\"\n  strategy:\n    rollingUpdate:\n      maxSurge: \"1\"\n  paused: true\n"
        );
        let formatted = format_text(
            "apiVersion: example.com/v1\nkind: Thing\nspec:\n  count: \"3\"\n  b: yes\n  a: 1\n",
        );
        assert_eq!(
            formatted,
            "apiVersion: example.com/v1\nkind: Thing\nspec:\n  a: 1\n  b: yes\n  count: \"3\"\n"
        );
    }

    /// Items without a kind or an apiVersion are left as they are.
    #[test]
    fn skips_items_without_a_type() {
        assert_eq!(
            format_text("kind: Thing\nb: 1\na: 2\n"),
            "kind: Thing\nb: 1\na: 2\n"
        );
    }

    /// A v1 ValidatingWebhookConfiguration's rule operations are sorted by
    /// value (its webhooks and rules are lists: elements keep their list's
    /// path); v1beta1's are not on kyaml's list.
    #[test]
    fn sorts_webhook_operations_for_v1_only() {
        let text = |api: &str| {
            format!(
                "apiVersion: {api}\nkind: ValidatingWebhookConfiguration\nmetadata:\n  name: w\nwebhooks:\n- name: a\n  rules:\n  - operations:\n    - UPDATE\n    - CREATE\n"
            )
        };
        assert!(
            format_text(&text("admissionregistration.k8s.io/v1"))
                .ends_with("operations:\n    - CREATE\n    - UPDATE\n")
        );
        assert!(
            format_text(&text("admissionregistration.k8s.io/v1beta1"))
                .ends_with("operations:\n    - UPDATE\n    - CREATE\n")
        );
    }

    /// kyaml's Kustomization schema types generator fields.
    #[test]
    fn kustomization_generators_are_typed() {
        let formatted = format_text(
            "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nconfigMapGenerator:\n- name: true\n  literals:\n  - 'on'\n",
        );
        assert_eq!(
            formatted,
            "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nconfigMapGenerator:\n- name: true\n  literals:\n  - 'on'\n"
        );
    }

    #[test]
    fn later_duplicate_places_win() {
        assert!(field_order("securityContext") > field_order("image"));
        assert!(field_order("activeDeadlineSeconds") > field_order("restartPolicy"));
    }
}
