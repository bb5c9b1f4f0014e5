//! `set-labels` (kpt Go SDK, family K): writes labels into `metadata.labels`
//! and the selector and template label maps of the workload kinds (spec
//! catalog-functions §2).

use std::collections::BTreeMap;

use super::sdk::{
    self, FnResult, Outcome, ResourceList, ensure_mapping, replace_with_string, split_api_version,
};
use crate::yaml::node::Node;

/// Runs set-labels on a parsed input.
pub(crate) fn run(input: ResourceList) -> Outcome {
    let mut results = Vec::new();
    let labels = match labels_of(input.function_config.as_ref(), &mut results) {
        Ok(labels) => labels,
        Err(()) => return Outcome::sdk_failure(input, results),
    };
    let work: Vec<usize> = (0..input.items.len())
        .filter(|&i| !sdk::is_local_config(&input.items[i]))
        .collect();
    if work.is_empty() {
        results.push(FnResult::info("no input resources"));
        return Outcome::sdk(input, results);
    }
    let Some(labels) = labels else {
        return Outcome::sdk_failure(input, results);
    };
    if labels.is_empty() {
        results.push(FnResult::new(
            sdk::Severity::Warning,
            "no `labels` arguments are given in FunctionConfig",
        ));
        return Outcome::sdk(input, results);
    }
    let mut input = input;
    let mut count = 0;
    for i in work {
        if let Some(item) = input.items.get_mut(i) {
            count += apply(item, &labels);
        }
    }
    results.push(FnResult::info(format!("set {count} labels in total")));
    Outcome::sdk(input, results)
}

/// The labels a config sets (`None` when it sets none), adding the
/// function's results about the config to `results`; `Err` when the
/// function fails on the config.
fn labels_of(
    config: Option<&Node>,
    results: &mut Vec<FnResult>,
) -> Result<Option<BTreeMap<String, String>>, ()> {
    let labels = match config {
        None => {
            results.push(FnResult::info("`FunctionConfig` is not given"));
            None
        }
        Some(config) => {
            let api_version = config.get_str(&["apiVersion"]).unwrap_or_default();
            let kind = config.get_str(&["kind"]).unwrap_or_default();
            let (group, _) = split_api_version(api_version);
            if group.is_empty() && kind == "ConfigMap" {
                let data = config.get("data");
                let is_function_input =
                    config.get_str(&["metadata", "name"]) == Some("function-input");
                let empty = data.is_none_or(|data| data.content.is_empty());
                if is_function_input && empty {
                    if data.is_some() {
                        results.push(FnResult::info("`FunctionConfig` is not given"));
                    }
                    None
                } else {
                    Some(string_map(data))
                }
            } else if group == "fn.kpt.dev" && kind == "SetLabels" {
                // The SDK decodes the config with Go's encoding/json: a
                // `labels` that is not a map fails the function.
                if let Some(found) = config.get("labels").and_then(json_kind_other_than_map) {
                    results.push(FnResult::error(format!(
                        "unable to convert object to *setlabels.SetLabels with error: json: \
                         cannot unmarshal {found} into Go struct field SetLabels.labels of type \
                         map[string]string"
                    )));
                    return Err(());
                }
                Some(string_map(config.get("labels")))
            } else {
                let suffix = if group.is_empty() {
                    String::new()
                } else {
                    format!(".{group}")
                };
                results.push(FnResult::error(format!(
                    "unknown FunctionConfig `{kind}{suffix}`, expect `SetLabels.fn.kpt.dev` or `ConfigMap.v1`"
                )));
                return Err(());
            }
        }
    };
    Ok(labels)
}

/// set-labels one resource at a time (see `super::per_item`): each
/// resource's labels are its own, and the results are one count.
pub(crate) struct PerItem(BTreeMap<String, String>);

impl PerItem {
    /// The per-resource form of a run under `config`: a config that sets
    /// labels without any result of its own.
    pub(crate) fn new(config: Option<&Node>) -> Option<PerItem> {
        let mut results = Vec::new();
        let labels = labels_of(config, &mut results).ok()??;
        (results.is_empty() && !labels.is_empty()).then_some(PerItem(labels))
    }

    /// The run's work on one resource.
    pub(crate) fn map(&self, item: &mut Node) -> super::partial::Partial {
        use super::partial::Partial;
        if sdk::is_local_config(item) {
            return Partial::default();
        }
        Partial {
            count: apply(item, &self.0) as u64,
            worked: true,
            ..Partial::default()
        }
    }

    /// The run's results over resources whose parts are `partials`.
    pub(crate) fn reduce<'p>(
        &self,
        partials: impl Iterator<Item = &'p super::partial::Partial>,
    ) -> Vec<FnResult> {
        let mut count = 0;
        let mut worked = false;
        for partial in partials {
            count += partial.count;
            worked |= partial.worked;
        }
        if !worked {
            return vec![FnResult::info("no input resources")];
        }
        vec![FnResult::info(format!("set {count} labels in total"))]
    }
}

/// The scalar entries of a map node, keys sorted.
/// What Go's encoding/json calls `node`'s value when it is neither a map
/// nor null (`array`, `string`, `number`, `bool`): what it fails to
/// unmarshal into a map.
fn json_kind_other_than_map(node: &Node) -> Option<&'static str> {
    use crate::yaml::node::{NodeKind, tag};
    match node.kind {
        NodeKind::Sequence => Some("array"),
        NodeKind::Scalar => match node.tag() {
            tag::NULL => None,
            tag::BOOL => Some("bool"),
            tag::INT | tag::FLOAT => Some("number"),
            _ => Some("string"),
        },
        _ => None,
    }
}

fn string_map(node: Option<&Node>) -> BTreeMap<String, String> {
    node.map(|node| {
        node.pairs()
            .filter(|(_, value)| value.is_scalar())
            .map(|(key, value)| {
                (
                    key.value.as_str().to_owned(),
                    value.value.as_str().to_owned(),
                )
            })
            .collect()
    })
    .unwrap_or_default()
}

/// The SDK's loose kind test: empty parts on either side match.
struct Gvk<'a> {
    group: &'a str,
    version: &'a str,
    kind: &'a str,
}

impl Gvk<'_> {
    fn is(&self, group: &str, version: &str, kind: &str) -> bool {
        let part = |mine: &str, test: &str| mine.is_empty() || test.is_empty() || mine == test;
        part(self.group, group) && part(self.version, version) && part(self.kind, kind)
    }
}

/// Applies the labels to one object; returns how many it counts.
fn apply(item: &mut Node, labels: &BTreeMap<String, String>) -> usize {
    let n = labels.len();
    let api_version = item.get_str(&["apiVersion"]).unwrap_or_default().to_owned();
    let kind = item.get_str(&["kind"]).unwrap_or_default().to_owned();
    let (group, version) = split_api_version(&api_version);
    let gvk = Gvk {
        group,
        version,
        kind: &kind,
    };
    let mut count = 0;
    set_at(item, &["metadata", "labels"], labels, true);
    count += n;

    let rc = gvk.is("", "v1", "ReplicationController");
    let workload = gvk.is("", "", "Deployment")
        || gvk.is("", "", "ReplicaSet")
        || gvk.is("", "", "DaemonSet")
        || gvk.is("apps", "", "StatefulSet");
    if gvk.is("", "v1", "Service") || rc {
        set_at(item, &["spec", "selector"], labels, true);
        count += n;
    }
    if workload {
        set_at(item, &["spec", "selector", "matchLabels"], labels, true);
        count += n;
    }
    let job = gvk.is("batch", "", "Job");
    if job || gvk.is("policy", "", "PodDisruptionBudget") {
        set_at(item, &["spec", "selector", "matchLabels"], labels, false);
        count += n;
    }
    let network_policy = gvk.is("networking.k8s.io", "", "NetworkPolicy");
    if network_policy {
        set_at(item, &["spec", "podSelector", "matchLabels"], labels, false);
        count += n;
    }
    let Some(spec) = item.get_mut("spec").filter(|spec| spec.is_mapping()) else {
        return count;
    };
    if (rc || workload || job)
        && let Some(template) = spec.get_mut("template").filter(|t| t.is_mapping())
    {
        count += template_labels(template, labels);
    }
    if gvk.is("batch", "", "CronJob")
        && let Some(job_template) = spec.get_mut("jobTemplate").filter(|t| t.is_mapping())
    {
        set_at(job_template, &["metadata", "labels"], labels, true);
        count += n;
        if let Some(job_spec) = job_template.get_mut("spec").filter(|s| s.is_mapping()) {
            set_at(job_spec, &["selector", "matchLabels"], labels, false);
            count += n;
            if let Some(template) = job_spec.get_mut("template").filter(|t| t.is_mapping()) {
                count += template_labels(template, labels);
            }
        }
    }
    if gvk.is("apps", "", "StatefulSet") {
        for claim in sequence_items(spec.get_mut("volumeClaimTemplates")) {
            set_at(claim, &["metadata", "labels"], labels, true);
            set_at(claim, &["selector", "matchLabels"], labels, false);
            count += 2 * n;
        }
    }
    if network_policy {
        for (rules, peers) in [("ingress", "from"), ("egress", "to")] {
            for rule in sequence_items(spec.get_mut(rules)) {
                for peer in sequence_items(rule.get_mut(peers)) {
                    set_at(peer, &["podSelector", "matchLabels"], labels, false);
                    count += n;
                }
            }
        }
    }
    count
}

/// Labels of a pod template: `metadata.labels`, and the topology spread
/// constraint selectors when the template has a `spec`.
fn template_labels(template: &mut Node, labels: &BTreeMap<String, String>) -> usize {
    let n = labels.len();
    set_at(template, &["metadata", "labels"], labels, true);
    let mut count = n;
    if let Some(pod_spec) = template.get_mut("spec").filter(|s| s.is_mapping()) {
        for constraint in sequence_items(pod_spec.get_mut("topologySpreadConstraints")) {
            set_at(constraint, &["labelSelector", "matchLabels"], labels, false);
            count += n;
        }
    }
    count
}

/// The mapping elements of an optional sequence node.
fn sequence_items(node: Option<&mut Node>) -> impl Iterator<Item = &mut Node> {
    node.filter(|node| node.is_sequence())
        .into_iter()
        .flat_map(|node| node.content.iter_mut())
        .filter(|element| element.is_mapping())
}

/// Writes the labels into the map at `path` below `node`. With `create`,
/// missing maps and keys are created (appended at the end of their parent);
/// without it, only existing keys of an existing map are updated.
fn set_at(node: &mut Node, path: &[&str], labels: &BTreeMap<String, String>, create: bool) {
    let mut current = node;
    for key in path {
        let next = if create {
            ensure_mapping(current, key)
        } else {
            current.get_mut(key).filter(|next| next.is_mapping())
        };
        match next {
            Some(next) => current = next,
            None => return,
        }
    }
    for (key, value) in labels {
        match current.get_mut(key) {
            Some(existing) if !(existing.is_scalar() && existing.value == *value) => {
                replace_with_string(existing, value);
            }
            Some(_) => {}
            None if create => current.set(key, Node::new_string(value.as_str())),
            None => {}
        }
    }
}
