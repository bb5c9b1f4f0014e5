//! `set-namespace` (kpt Go SDK, family K): rewrites namespace slots of
//! namespace-scoped objects, Namespace names, a few cluster-scoped
//! references and `depends-on` annotations (spec catalog-functions §1).

use std::collections::BTreeSet;

use rayon::prelude::*;

use super::sdk::{
    self, FileRef, FnResult, Outcome, ResourceList, ResourceRef, Severity, ensure_mapping,
    go_quote, replace_with_string, split_api_version,
};
use crate::yaml::node::Node;

const UPSTREAM_IDENTIFIER: &str = "internal.kpt.dev/upstream-identifier";
const DEPENDS_ON: &str = "config.kubernetes.io/depends-on";
const CLUSTER_ORIGIN: &str = "~C";

/// Runs set-namespace on a parsed input.
pub(crate) fn run(input: ResourceList) -> Outcome {
    let config = match Config::from_function_config(input.function_config.as_ref()) {
        Ok(config) => config,
        Err(message) => {
            let mut result = FnResult::error(message);
            let Some(config) = &input.function_config else {
                // No function config at all: the function reports it as an
                // error result about the empty config object and succeeds,
                // leaving the items as they are (the catalog's own
                // `no-fnconfig-resource` test renders successfully).
                result.resource_ref = Some(ResourceRef::default());
                result.file = Some(FileRef {
                    path: String::new(),
                    index: -1,
                });
                return Outcome::sdk(input, vec![result]);
            };
            result.resource_ref = Some(ResourceRef::of(config));
            result.file = Some(FileRef {
                path: sdk::file_path(config).unwrap_or_default().to_owned(),
                index: sdk::file_index(config).unwrap_or(-1),
            });
            return Outcome::sdk_failure(input, vec![result]);
        }
    };
    let mut input = input;
    match transform(&mut input.items, &config) {
        Ok(results) => Outcome::sdk(input, results),
        Err(Failure::Results(results)) => Outcome::sdk_failure(input, results),
        Err(Failure::Abort(message)) => Outcome::sdk_error(input, Vec::new(), &message),
    }
}

/// The function config: the new namespace and an optional matcher.
struct Config {
    namespace: String,
    matcher: Option<String>,
}

impl Config {
    fn from_function_config(config: Option<&Node>) -> Result<Config, String> {
        let Some(config) = config else {
            return Err(
                "FunctionConfig is missing. Expect `ConfigMap.v1` or `SetNamespace.v1alpha1.fn.kpt.dev`"
                    .to_owned(),
            );
        };
        let api_version = config.get_str(&["apiVersion"]).unwrap_or_default();
        let kind = config.get_str(&["kind"]).unwrap_or_default();
        let non_empty = |value: Option<&str>| value.filter(|v| !v.is_empty()).map(str::to_owned);
        if kind == "ConfigMap" && split_api_version(api_version).1 == "v1" {
            let mut namespace = non_empty(config.get_str(&["data", "namespace"]));
            if namespace.is_none()
                && config.get_str(&["metadata", "name"]) == Some("kptfile.kpt.dev")
            {
                namespace = non_empty(config.get_str(&["data", "name"]));
            }
            let Some(namespace) = namespace else {
                return Err("`data.namespace` should not be empty".to_owned());
            };
            return Ok(Config {
                namespace,
                matcher: non_empty(config.get_str(&["data", "namespaceMatcher"])),
            });
        }
        if kind == "SetNamespace" && api_version == "fn.kpt.dev/v1alpha1" {
            let Some(namespace) = non_empty(config.get_str(&["namespace"])) else {
                return Err("`namespace` should not be empty".to_owned());
            };
            return Ok(Config {
                namespace,
                matcher: non_empty(config.get_str(&["namespaceMatcher"])),
            });
        }
        Err(format!(
            "unknown functionConfig Kind={kind} ApiVersion={api_version}, expect `ConfigMap.v1` or `SetNamespace.v1alpha1.fn.kpt.dev`"
        ))
    }
}

enum Failure {
    /// Error results; the function exits 1.
    Results(Vec<FnResult>),
    /// The processor returned an error (stderr carries it).
    Abort(String),
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Scope {
    Cluster,
    Namespaced,
    Unknown,
}

fn scope(item: &Node) -> Scope {
    let api_version = item.get_str(&["apiVersion"]).unwrap_or_default();
    let kind = item.get_str(&["kind"]).unwrap_or_default();
    if let Some(scope) = table_scope(api_version, kind) {
        return scope;
    }
    if item
        .get("metadata")
        .and_then(|metadata| metadata.get("namespace"))
        .is_some()
    {
        Scope::Namespaced
    } else {
        Scope::Unknown
    }
}

/// True for the kinds the built-in scope table (Kubernetes' own schema)
/// knows as cluster-scoped; unknown kinds read as namespaced, as kyaml's
/// `Gvk.IsNamespaceableKind` does.
pub(crate) fn is_cluster_scoped(api_version: &str, kind: &str) -> bool {
    table_scope(api_version, kind) == Some(Scope::Cluster)
}

/// The SDK's built-in scope table (82 entries).
fn table_scope(api_version: &str, kind: &str) -> Option<Scope> {
    let cluster: &[(&[&str], &[&str])] = &[
        (
            &[
                "admissionregistration.k8s.io/v1",
                "admissionregistration.k8s.io/v1beta1",
            ],
            &[
                "MutatingWebhookConfiguration",
                "ValidatingWebhookConfiguration",
            ],
        ),
        (
            &["apiextensions.k8s.io/v1", "apiextensions.k8s.io/v1beta1"],
            &["CustomResourceDefinition"],
        ),
        (
            &[
                "apiregistration.k8s.io/v1",
                "apiregistration.k8s.io/v1beta1",
            ],
            &["APIService"],
        ),
        (
            &["certificates.k8s.io/v1", "certificates.k8s.io/v1beta1"],
            &["CertificateSigningRequest"],
        ),
        (
            &["flowcontrol.apiserver.k8s.io/v1beta1"],
            &["FlowSchema", "PriorityLevelConfiguration"],
        ),
        (
            &["networking.k8s.io/v1", "networking.k8s.io/v1beta1"],
            &["IngressClass"],
        ),
        (
            &["node.k8s.io/v1", "node.k8s.io/v1beta1"],
            &["RuntimeClass"],
        ),
        (&["policy/v1beta1"], &["PodSecurityPolicy"]),
        (
            &[
                "rbac.authorization.k8s.io/v1",
                "rbac.authorization.k8s.io/v1beta1",
            ],
            &["ClusterRole", "ClusterRoleBinding"],
        ),
        (
            &["scheduling.k8s.io/v1", "scheduling.k8s.io/v1beta1"],
            &["PriorityClass"],
        ),
        (
            &["storage.k8s.io/v1", "storage.k8s.io/v1beta1"],
            &["CSIDriver", "CSINode", "StorageClass", "VolumeAttachment"],
        ),
        (
            &["v1"],
            &[
                "ComponentStatus",
                "Namespace",
                "Node",
                "NodeProxyOptions",
                "PersistentVolume",
            ],
        ),
    ];
    let namespaced: &[(&[&str], &[&str])] = &[
        (
            &["apps/v1"],
            &[
                "ControllerRevision",
                "DaemonSet",
                "Deployment",
                "ReplicaSet",
                "StatefulSet",
            ],
        ),
        (&["autoscaling/v1"], &["HorizontalPodAutoscaler", "Scale"]),
        (
            &["autoscaling/v2beta1", "autoscaling/v2beta2"],
            &["HorizontalPodAutoscaler"],
        ),
        (&["batch/v1"], &["CronJob", "Job"]),
        (&["batch/v1beta1"], &["CronJob"]),
        (
            &["coordination.k8s.io/v1", "coordination.k8s.io/v1beta1"],
            &["Lease"],
        ),
        (
            &["discovery.k8s.io/v1", "discovery.k8s.io/v1beta1"],
            &["EndpointSlice"],
        ),
        (&["events.k8s.io/v1", "events.k8s.io/v1beta1"], &["Event"]),
        (&["extensions/v1beta1"], &["Ingress"]),
        (&["networking.k8s.io/v1"], &["Ingress", "NetworkPolicy"]),
        (&["networking.k8s.io/v1beta1"], &["Ingress"]),
        (&["policy/v1", "policy/v1beta1"], &["PodDisruptionBudget"]),
        (
            &[
                "rbac.authorization.k8s.io/v1",
                "rbac.authorization.k8s.io/v1beta1",
            ],
            &["Role", "RoleBinding"],
        ),
        (&["storage.k8s.io/v1beta1"], &["CSIStorageCapacity"]),
        (
            &["v1"],
            &[
                "ConfigMap",
                "Endpoints",
                "Event",
                "LimitRange",
                "PersistentVolumeClaim",
                "Pod",
                "PodAttachOptions",
                "PodExecOptions",
                "PodPortForwardOptions",
                "PodProxyOptions",
                "PodTemplate",
                "ReplicationController",
                "ResourceQuota",
                "Secret",
                "Service",
                "ServiceAccount",
                "ServiceProxyOptions",
            ],
        ),
    ];
    let lookup = |table: &[(&[&str], &[&str])]| {
        table
            .iter()
            .any(|(versions, kinds)| versions.contains(&api_version) && kinds.contains(&kind))
    };
    if lookup(cluster) {
        Some(Scope::Cluster)
    } else if lookup(namespaced) {
        Some(Scope::Namespaced)
    } else {
        None
    }
}

/// The parsed `internal.kpt.dev/upstream-identifier` annotation.
struct Upstream {
    namespace: String,
    name: String,
}

fn upstream(item: &Node) -> Result<Option<Upstream>, String> {
    let Some(value) = sdk::annotation(item, UPSTREAM_IDENTIFIER) else {
        return Ok(None);
    };
    let parts: Vec<&str> = value.split('|').collect();
    match parts.as_slice() {
        [_, _, namespace, name] => Ok(Some(Upstream {
            namespace: (*namespace).to_owned(),
            name: (*name).to_owned(),
        })),
        _ => Err(format!(
            "annotation {UPSTREAM_IDENTIFIER}: {value} is in bad format. expect \"<GROUP>|<KIND>|<NAMESPACE>|<NAME>\""
        )),
    }
}

fn short_string(item: &Node) -> String {
    let reference = ResourceRef::of(item);
    format!(
        "Resource(apiVersion={}, kind={}, namespace={}, name={})",
        reference.api_version, reference.kind, reference.namespace, reference.name
    )
}

/// Counts and old values of the namespace rewrite.
struct Changes<'c> {
    config: &'c Config,
    old_values: BTreeSet<String>,
    count: usize,
    origin_results: Vec<FnResult>,
}

impl Changes<'_> {
    /// Visits one slot: decides the new value of `current` (empty reads as
    /// `default`) given the object's `origin`, records a change, and returns
    /// the value to write back.
    fn visit(&mut self, item_label: &dyn Fn() -> String, current: &str, origin: &str) -> String {
        let current = if current.is_empty() {
            "default"
        } else {
            current
        };
        if let Some(matcher) = &self.config.matcher
            && origin == matcher
        {
            self.origin_results.push(FnResult::info(format!(
                "[{}] has matching origin {origin}",
                item_label()
            )));
        }
        if current == self.config.namespace {
            return current.to_owned();
        }
        let matches = match &self.config.matcher {
            None => true,
            Some(matcher) => matcher == current || matcher == origin,
        };
        if !matches {
            return current.to_owned();
        }
        self.old_values.insert(current.to_owned());
        self.count += 1;
        self.config.namespace.clone()
    }
}

/// Writes `value` at `path` below `node`, creating missing maps at the end
/// of their parents.
fn write_path(node: &mut Node, path: &[&str], value: &str) {
    let Some((last, parents)) = path.split_last() else {
        return;
    };
    let mut current = node;
    for key in parents {
        match ensure_mapping(current, key) {
            Some(next) => current = next,
            None => return,
        }
    }
    if !current.is_mapping() {
        return;
    }
    match current.get_mut(last) {
        Some(slot) => replace_with_string(slot, value),
        None => current.set(last, Node::new_string(value)),
    }
}

/// What the rewrite reads of one item before changing any.
struct Facts {
    local_config: bool,
    scope: Scope,
    upstream: Result<Option<Upstream>, String>,
    depends_on: bool,
}

impl Facts {
    fn of(item: &Node) -> Facts {
        Facts {
            local_config: sdk::is_local_config(item),
            scope: scope(item),
            upstream: upstream(item),
            depends_on: sdk::annotation(item, DEPENDS_ON).is_some(),
        }
    }
}

/// Lists at least this long are read on rayon (a DFS root's step sees the
/// whole tree's resources).
const PARALLEL_FROM: usize = 64;

fn transform(items: &mut [Node], config: &Config) -> Result<Vec<FnResult>, Failure> {
    // One read of each item, in parallel for long lists.
    let facts: Vec<Facts> = if items.len() >= PARALLEL_FROM {
        items.par_iter().map(Facts::of).collect()
    } else {
        items.iter().map(Facts::of).collect()
    };
    let mut work = Vec::with_capacity(items.len());
    let mut scopes = Vec::with_capacity(items.len());
    let mut upstreams = Vec::with_capacity(items.len());
    let mut any_depends_on = false;
    for (i, facts) in facts.into_iter().enumerate() {
        if !facts.local_config {
            work.push(i);
            any_depends_on |= facts.depends_on;
        }
        scopes.push(facts.scope);
        // The first bad identifier in item order stops the function.
        upstreams.push(facts.upstream.map_err(Failure::Abort)?);
    }

    // Step 1: identities before any change, for depends-on (only read when
    // some item has a depends-on annotation).
    let mut identities = BTreeSet::new();
    let identified: &[usize] = if any_depends_on { &work } else { &[] };
    for &i in identified {
        let item = &items[i];
        if scopes[i] == Scope::Unknown {
            continue;
        }
        let (group, _) = split_api_version(item.get_str(&["apiVersion"]).unwrap_or_default());
        let namespace = item.get_str(&["metadata", "namespace"]).unwrap_or_default();
        let namespace = if namespace.is_empty() && scopes[i] == Scope::Namespaced {
            "default"
        } else {
            namespace
        };
        identities.insert(format!(
            "{group}/namespaces/{namespace}/{}/{}",
            item.get_str(&["kind"]).unwrap_or_default(),
            item.get_str(&["metadata", "name"]).unwrap_or_default()
        ));
    }

    // Step 2: origin checks.
    let mut origin_namespaces = BTreeSet::new();
    let mut errors = Vec::new();
    for &i in &work {
        if scopes[i] != Scope::Namespaced {
            continue;
        }
        if let Some(upstream) = &upstreams[i] {
            if upstream.namespace == CLUSTER_ORIGIN {
                let value = sdk::annotation(&items[i], UPSTREAM_IDENTIFIER).unwrap_or_default();
                errors.push(FnResult::error(format!(
                    "{} is namespace-scoped, but has cluster-scoped or unknown scoepd origin {value}",
                    short_string(&items[i])
                )));
            }
            origin_namespaces.insert(upstream.namespace.clone());
        }
    }
    if config.matcher.is_none() && origin_namespaces.len() > 1 {
        let found: Vec<&str> = origin_namespaces.iter().map(String::as_str).collect();
        return Err(Failure::Results(vec![FnResult::error(format!(
            "unable to use origin `namespace` to match. expect a single upstream namespace, found [{}]. please switch to use `namespaceMatcher`to specify the namespace value you want to change",
            found.join(" ")
        ))]));
    }
    if !errors.is_empty() {
        return Err(Failure::Results(errors));
    }

    // Step 3: namespace slots, cluster-scoped specials first.
    let mut changes = Changes {
        config,
        old_values: BTreeSet::new(),
        count: 0,
        origin_results: Vec::new(),
    };
    for &i in &work {
        if scopes[i] == Scope::Cluster {
            rewrite_cluster_scoped(&mut items[i], upstreams[i].as_ref(), &mut changes);
        }
    }
    for &i in &work {
        if scopes[i] == Scope::Namespaced {
            rewrite_namespaced(&mut items[i], upstreams[i].as_ref(), &mut changes);
        }
    }

    // Step 4: depends-on annotations.
    let mut depends_old = BTreeSet::new();
    let mut depends_count = 0;
    // Step 3 writes no depends-on annotation: without one before, none now.
    for &i in identified {
        let Some(value) = sdk::annotation(&items[i], DEPENDS_ON) else {
            continue;
        };
        let Some(parsed) = parse_depends_on(value) else {
            continue;
        };
        if !identities.contains(value) || parsed.namespace == config.namespace {
            continue;
        }
        if config
            .matcher
            .as_ref()
            .is_some_and(|matcher| *matcher != parsed.namespace)
        {
            continue;
        }
        let rewritten = format!(
            "{}/namespaces/{}/{}/{}",
            parsed.group, config.namespace, parsed.kind, parsed.name
        );
        depends_old.insert(parsed.namespace.to_owned());
        depends_count += 1;
        write_path(
            &mut items[i],
            &["metadata", "annotations", DEPENDS_ON],
            &rewritten,
        );
    }

    let mut results = changes.origin_results;
    results.extend(summary(
        config,
        changes.count,
        &changes.old_values,
        depends_count,
        &depends_old,
    ));
    Ok(results)
}

/// Step 3 on a cluster-scoped item: the namespace slots of the kinds that
/// name one (a Namespace's own name, a CRD's conversion webhook, an
/// APIService, (Cluster)RoleBinding subjects).
fn rewrite_cluster_scoped(item: &mut Node, upstream: Option<&Upstream>, changes: &mut Changes<'_>) {
    // The label is only written into a result when an origin matches.
    let label = || short_string(item);
    let api_version = item.get_str(&["apiVersion"]).unwrap_or_default().to_owned();
    let kind = item.get_str(&["kind"]).unwrap_or_default().to_owned();
    let path: &[&str] = match (api_version.as_str(), kind.as_str()) {
        ("v1", "Namespace") => &["metadata", "name"],
        ("apiextensions.k8s.io/v1", "CustomResourceDefinition") => &[
            "spec",
            "conversion",
            "webhook",
            "clientConfig",
            "service",
            "namespace",
        ],
        ("apiregistration.k8s.io/v1", "APIService") => &["spec", "service", "namespace"],
        (_, "ClusterRoleBinding" | "RoleBinding") => {
            let text = label();
            visit_subjects(item, changes, &|| text.clone());
            return;
        }
        _ => return,
    };
    let current = item.get_str(path).unwrap_or_default().to_owned();
    let origin = if kind == "Namespace" {
        match upstream {
            Some(upstream) => upstream.name.clone(),
            None => current.clone(),
        }
    } else {
        current.clone()
    };
    if origin == CLUSTER_ORIGIN {
        return;
    }
    let value = changes.visit(&label, &current, &origin);
    write_path(item, path, &value);
}

/// Step 3 on a namespace-scoped item: its `metadata.namespace`.
fn rewrite_namespaced(item: &mut Node, upstream: Option<&Upstream>, changes: &mut Changes<'_>) {
    let label = || short_string(item);
    let current = item
        .get_str(&["metadata", "namespace"])
        .unwrap_or_default()
        .to_owned();
    let origin = match upstream {
        Some(upstream) => upstream.namespace.clone(),
        None if current.is_empty() => "default".to_owned(),
        None => current.clone(),
    };
    if origin == CLUSTER_ORIGIN {
        return;
    }
    let value = changes.visit(&label, &current, &origin);
    write_path(item, &["metadata", "namespace"], &value);
}

/// The two summary results: the namespaces changed, and the depends-on
/// annotations changed.
fn summary(
    config: &Config,
    count: usize,
    old_values: &BTreeSet<String>,
    depends_count: usize,
    depends_old: &BTreeSet<String>,
) -> Vec<FnResult> {
    let mut results = Vec::new();
    let new = go_quote(&config.namespace);
    if count > 0 {
        let olds: Vec<&str> = old_values.iter().map(String::as_str).collect();
        results.push(FnResult::info(format!(
            "namespace [{}] updated to {new}, {count} value(s) changed",
            olds.join(" "),
        )));
    } else {
        results.push(FnResult::info(format!(
            "all matching namespaces are already {new}. no value changed"
        )));
    }
    if depends_count > 0 {
        let olds: Vec<&str> = depends_old.iter().map(String::as_str).collect();
        results.push(FnResult::info(format!(
            "`depends-on` annotation namespace [{}] updated to {new}, {depends_count} value(s) changed",
            olds.join(" ")
        )));
    } else {
        results.push(FnResult::new(
            Severity::Info,
            "all `depends-on` annotations are up-to-date. no `namespace` changed",
        ));
    }
    results
}

/// set-namespace one resource at a time (see `super::per_item`): without a
/// namespace matcher, on resources carrying neither a depends-on nor an
/// upstream-identifier annotation, the function's work on each resource is
/// independent of the others, and its results are a count and a set of old
/// namespaces.
pub(crate) struct PerItem(Config);

impl PerItem {
    /// The per-resource form of a run under `config`, when it has one.
    pub(crate) fn new(config: Option<&Node>) -> Option<PerItem> {
        let config = Config::from_function_config(config).ok()?;
        config.matcher.is_none().then_some(PerItem(config))
    }

    /// The run's work on one resource.
    pub(crate) fn map(&self, item: &mut Node) -> super::partial::Partial {
        use super::partial::Partial;
        if sdk::is_local_config(item) {
            return Partial::default();
        }
        if sdk::annotation(item, DEPENDS_ON).is_some()
            || sdk::annotation(item, UPSTREAM_IDENTIFIER).is_some()
        {
            return Partial::whole_list();
        }
        let mut changes = Changes {
            config: &self.0,
            old_values: BTreeSet::new(),
            count: 0,
            origin_results: Vec::new(),
        };
        match scope(item) {
            Scope::Cluster => rewrite_cluster_scoped(item, None, &mut changes),
            Scope::Namespaced => rewrite_namespaced(item, None, &mut changes),
            Scope::Unknown => {}
        }
        Partial {
            count: changes.count as u64,
            values: changes.old_values.into_iter().collect(),
            ..Partial::default()
        }
    }

    /// The run's results over resources whose parts are `partials`.
    pub(crate) fn reduce<'p>(
        &self,
        partials: impl Iterator<Item = &'p super::partial::Partial>,
    ) -> Vec<FnResult> {
        let mut count = 0;
        let mut old_values = BTreeSet::new();
        for partial in partials {
            count += partial.count;
            old_values.extend(partial.values.iter().cloned());
        }
        summary(
            &self.0,
            usize::try_from(count).unwrap_or(usize::MAX),
            &old_values,
            0,
            &BTreeSet::new(),
        )
    }
}

/// `subjects[*].namespace` of a (Cluster)RoleBinding, for entries that have it.
fn visit_subjects(item: &mut Node, changes: &mut Changes<'_>, label: &dyn Fn() -> String) {
    let Some(subjects) = item.get_mut("subjects") else {
        return;
    };
    if !subjects.is_sequence() {
        return;
    }
    for subject in &mut subjects.content {
        let Some(slot) = subject.get_mut("namespace") else {
            continue;
        };
        let current = if slot.is_scalar() {
            slot.value.as_str().to_owned()
        } else {
            String::new()
        };
        let value = changes.visit(label, &current, &current.clone());
        replace_with_string(slot, &value);
    }
}

struct DependsOn<'a> {
    group: &'a str,
    namespace: &'a str,
    kind: &'a str,
    name: &'a str,
}

/// Parses a single namespaced `depends-on` reference
/// (`<group>/namespaces/<ns>/<kind>/<name>`, characters `[-.\w]`).
fn parse_depends_on(value: &str) -> Option<DependsOn<'_>> {
    let parts: Vec<&str> = value.split('/').collect();
    let [group, "namespaces", namespace, kind, name] = parts.as_slice() else {
        return None;
    };
    let valid = |part: &str, allow_empty: bool| {
        (allow_empty || !part.is_empty())
            && part
                .chars()
                .all(|c| c == '-' || c == '.' || c == '_' || c.is_alphanumeric())
    };
    (valid(group, true) && valid(namespace, false) && valid(kind, false) && valid(name, false))
        .then_some(DependsOn {
            group,
            namespace,
            kind,
            name,
        })
}

#[cfg(test)]
mod tests {
    use super::super::Builtin;

    /// A list of `count` ConfigMaps (long enough to be read in parallel),
    /// with `extra` annotations on some of them by index.
    fn list(count: usize, extra: &[(usize, &str, &str)]) -> String {
        let mut text = String::from(
            "apiVersion: config.kubernetes.io/v1\nkind: ResourceList\nfunctionConfig:\n  apiVersion: v1\n  kind: ConfigMap\n  metadata:\n    name: fn\n  data:\n    namespace: target\nitems:\n",
        );
        for i in 0..count {
            text.push_str(&format!(
                "- apiVersion: v1\n  kind: ConfigMap\n  metadata:\n    name: cm{i}\n    namespace: old\n"
            ));
            let annotations: Vec<_> = extra.iter().filter(|(at, _, _)| *at == i).collect();
            if !annotations.is_empty() {
                text.push_str("    annotations:\n");
                for (_, key, value) in annotations {
                    text.push_str(&format!("      {key}: '{value}'\n"));
                }
            }
        }
        text
    }

    fn run(input: &str) -> (String, String, i32) {
        let response = Builtin::SetNamespace.evaluate_bytes(input.as_bytes(), None);
        (
            String::from_utf8_lossy(&response.stdout).into_owned(),
            String::from_utf8_lossy(&response.stderr).into_owned(),
            response.exit_code,
        )
    }

    #[test]
    fn a_long_list_is_rewritten_with_its_depends_on_annotations() {
        let (stdout, _, exit_code) = run(&list(
            100,
            &[(90, super::DEPENDS_ON, "/namespaces/old/ConfigMap/cm5")],
        ));
        assert_eq!(exit_code, 0);
        for i in 0..100 {
            assert!(
                stdout.contains(&format!("name: cm{i}\n    namespace: target\n")),
                "cm{i}: {stdout}"
            );
        }
        assert!(stdout.contains("depends-on: /namespaces/target/ConfigMap/cm5\n"));
        assert!(stdout.contains("namespace [old] updated to \"target\", 100 value(s) changed"));
        assert!(stdout.contains(
            "`depends-on` annotation namespace [old] updated to \"target\", 1 value(s) changed"
        ));
    }

    #[test]
    fn the_first_bad_upstream_identifier_in_item_order_stops_the_function() {
        let (_, stderr, exit_code) = run(&list(
            100,
            &[
                (70, super::UPSTREAM_IDENTIFIER, "first|bad"),
                (80, super::UPSTREAM_IDENTIFIER, "second|bad"),
            ],
        ));
        assert_eq!(exit_code, 1);
        assert!(stderr.contains("first|bad"), "{stderr}");
        assert!(!stderr.contains("second|bad"), "{stderr}");
    }
}
