//! `enable-gcp-services` (kyaml framework, `Results` list, family F):
//! turns every `ProjectServiceSet` (`blueprints.cloud.google.com/v1alpha1`)
//! into one Config Connector `Service`
//! (`serviceusage.cnrm.cloud.google.com/v1beta1`) per entry of
//! `spec.services`, named `<set name>-<first label of the service>`, and
//! prunes the Services an earlier run generated for the set (those whose
//! `blueprints.cloud.google.com/ownerReference` names it).
//!
//! As the function's Go source does:
//! - each set is marked `config.kubernetes.io/local-config: 'true'` (an
//!   existing value keeps its quoting);
//! - a generated Service copies the set's annotations except the path
//!   annotations and local-config, then gets the owner reference, the
//!   set's namespace (after its annotations), and the path
//!   `<dir of the set>/[<namespace>/]service_<name>.yaml` (internal, then
//!   legacy annotation); every annotation is written single-quoted;
//! - kept items keep their order, generated Services follow, set by set;
//! - results are info `generated service`, `pruned service` or
//!   `recreated service` (a pruned Service generated again), sorted by
//!   file path then by reference and message, as the function sorts them.
//!
//! The function copies the set's annotations by iterating a Go map (random
//! order); krender copies them in key order, the one deterministic choice.
//! Only the relative order of copied annotations (usually the index and id
//! bookkeeping ones, which kpt removes) depends on it.
//!
//! Errors end the run with one error result `failed to add services: <err>`
//! and exit code 1: a set without services, or a service name with fewer
//! than three dot-separated labels (then no items are written back, as
//! the function returns none).

use std::collections::BTreeMap;

use super::sdk::{self, FileRef, FnResult, Outcome, ResourceList, ResourceRef, ensure_mapping};
use crate::krm::resource::{self, clean_path, go_dir};
use crate::yaml::node::{Node, Style};

const SET_API_VERSION: &str = "blueprints.cloud.google.com/v1alpha1";
const SET_GROUP: &str = "blueprints.cloud.google.com";
const SET_KIND: &str = "ProjectServiceSet";
const SERVICE_API_VERSION: &str = "serviceusage.cnrm.cloud.google.com/v1beta1";
const SERVICE_KIND: &str = "Service";
const OWNER_REFERENCE: &str = "blueprints.cloud.google.com/ownerReference";

const GENERATED: &str = "generated service";
const PRUNED: &str = "pruned service";
const RECREATED: &str = "recreated service";

/// What the function reads of a `ProjectServiceSet`.
struct ServiceSet {
    name: String,
    namespace: String,
    annotations: BTreeMap<String, String>,
    services: Vec<String>,
    project_id: String,
}

impl ServiceSet {
    fn of(item: &Node) -> ServiceSet {
        let text = |path: &[&str]| {
            item.get_path(path)
                .filter(|node| node.is_scalar() && !node.is_null())
                .map(|node| node.value.to_string())
                .unwrap_or_default()
        };
        let annotations = item
            .get_path(&["metadata", "annotations"])
            .filter(|node| node.is_mapping())
            .map(|map| {
                map.pairs()
                    .filter(|(_, value)| value.is_scalar())
                    .map(|(key, value)| {
                        let value = if value.is_null() {
                            String::new()
                        } else {
                            value.value.to_string()
                        };
                        (key.value.to_string(), value)
                    })
                    .collect()
            })
            .unwrap_or_default();
        let services = item
            .get_path(&["spec", "services"])
            .filter(|node| node.is_sequence())
            .map(|list| {
                list.content
                    .iter()
                    .filter(|node| node.is_scalar())
                    .map(|node| {
                        if node.is_null() {
                            String::new()
                        } else {
                            node.value.to_string()
                        }
                    })
                    .collect()
            })
            .unwrap_or_default();
        ServiceSet {
            name: text(&["metadata", "name"]),
            namespace: text(&["metadata", "namespace"]),
            annotations,
            services,
            project_id: text(&["spec", "projectID"]),
        }
    }

    /// The owner reference its Services carry (Go `path.Join`).
    fn owner(&self) -> String {
        clean_path(&format!("{SET_GROUP}/{SET_KIND}/{}", self.name))
    }

    /// The generated Services, or the function's error.
    fn services(&self) -> Result<Vec<Node>, String> {
        let mut nodes = Vec::with_capacity(self.services.len());
        for service in &self.services {
            if service.split('.').count() < 3 {
                return Err(format!("invalid service specified: {service}"));
            }
            let short = service.split('.').next().unwrap_or_default();
            let name = format!("{}-{short}", self.name);
            let mut node = marshalled_service(&name, service, &self.project_id);
            for (key, value) in &self.annotations {
                if key == resource::PATH || key == resource::LEGACY_PATH || key == sdk::LOCAL_CONFIG
                {
                    continue;
                }
                set_annotation(&mut node, key, value);
            }
            set_annotation(&mut node, OWNER_REFERENCE, &self.owner());
            if !self.namespace.is_empty()
                && let Some(metadata) = ensure_mapping(&mut node, "metadata")
            {
                set_field(
                    metadata,
                    "namespace",
                    Node::new_string(self.namespace.as_str()),
                );
            }
            let dir = go_dir(
                self.annotations
                    .get(resource::PATH)
                    .map_or("", String::as_str),
            );
            let path = clean_path(&format!("{dir}/{}/service_{name}.yaml", self.namespace));
            set_annotation(&mut node, resource::PATH, &path);
            set_annotation(&mut node, resource::LEGACY_PATH, &path);
            nodes.push(node);
        }
        Ok(nodes)
    }
}

/// A string scalar as go-yaml v3 marshals it and kyaml parses it back:
/// double-quoted when plain text would read as something else.
fn marshalled_string(value: &str) -> Node {
    let mut node = Node::new_string(value);
    if sdk::is_yaml11_non_string(value) {
        node.style = Style::DOUBLE_QUOTED;
    }
    node
}

/// The Service as the function marshals its struct (empty `projectRef`
/// omitted).
fn marshalled_service(name: &str, service: &str, project_id: &str) -> Node {
    let mut node = Node::new_mapping();
    node.set("apiVersion", marshalled_string(SERVICE_API_VERSION));
    node.set("kind", marshalled_string(SERVICE_KIND));
    let mut metadata = Node::new_mapping();
    metadata.set("name", marshalled_string(name));
    node.set("metadata", metadata);
    let mut spec = Node::new_mapping();
    spec.set("resourceID", marshalled_string(service));
    if !project_id.is_empty() {
        let mut reference = Node::new_mapping();
        reference.set("external", marshalled_string(project_id));
        spec.set("projectRef", reference);
    }
    node.set("spec", spec);
    node
}

/// kyaml `FieldSetter` (no style override): an existing field's value is
/// replaced by `value` with the old node's style (its comments go with the
/// old node); a missing field is appended.
fn set_field(map: &mut Node, key: &str, mut value: Node) {
    if let Some(existing) = map.get_mut(key) {
        value.style = existing.style;
        *existing = value;
    } else {
        map.set(key, value);
    }
}

/// kyaml `SetAnnotation`: a single-quoted string under
/// `metadata.annotations` (created at the end when missing, or when empty).
fn set_annotation(item: &mut Node, key: &str, value: &str) {
    let Some(metadata) = ensure_mapping(item, "metadata") else {
        return;
    };
    if metadata
        .get("annotations")
        .is_some_and(|annotations| annotations.is_mapping() && annotations.content.is_empty())
    {
        metadata.remove("annotations");
    }
    let Some(annotations) = ensure_mapping(metadata, "annotations") else {
        return;
    };
    let mut node = Node::new_string(value);
    node.style = Style::SINGLE_QUOTED;
    set_field(annotations, key, node);
}

/// One result with what the function sorts it by.
struct Reported {
    result: FnResult,
    /// Go `fmt.Sprintf("resource-ref:%s,field:%s,message:%s", ...)` of the
    /// result: a `*ResourceIdentifier` prints as `&{{apiVersion kind} {name
    /// namespace}}`, the nil field as `%!s(*framework.Field=<nil>)`.
    key: String,
}

fn reported(item: &Node, message: &str, path: String) -> Reported {
    let reference = ResourceRef::of(item);
    let key = format!(
        "resource-ref:&{{{{{} {}}} {{{} {}}}}},field:%!s(*framework.Field=<nil>),message:{message}",
        reference.api_version, reference.kind, reference.name, reference.namespace
    );
    Reported {
        result: FnResult {
            resource_ref: Some(reference),
            file: Some(FileRef { path, index: 0 }),
            ..FnResult::info(message)
        },
        key,
    }
}

/// The function's key of a resource (its resid: group, version, kind,
/// name, namespace).
fn resid(item: &Node) -> (String, String, String, String) {
    let reference = ResourceRef::of(item);
    (
        reference.api_version,
        reference.kind,
        reference.name,
        reference.namespace,
    )
}

/// Runs enable-gcp-services on a parsed input.
pub(crate) fn run(input: ResourceList) -> Outcome {
    let ResourceList {
        mut items,
        function_config,
    } = input;
    let mut sets = Vec::new();
    for item in &mut items {
        if item.get_str(&["apiVersion"]) == Some(SET_API_VERSION)
            && item.get_str(&["kind"]) == Some(SET_KIND)
        {
            set_annotation(item, sdk::LOCAL_CONFIG, "true");
            sets.push(ServiceSet::of(item));
        }
    }
    let mut generated_items = Vec::new();
    let mut reports = Vec::new();
    for set in &sets {
        if set.services.is_empty() {
            return failure(
                items,
                function_config,
                "at least one service must be specified under `spec.services[]`",
            );
        }
        let owner = set.owner();
        let mut pruned = BTreeMap::new();
        items.retain(|item| {
            let managed = sdk::annotation(item, OWNER_REFERENCE) == Some(owner.as_str());
            if managed {
                let path = sdk::file_path(item).unwrap_or_default().to_owned();
                pruned.insert(resid(item), reported(item, PRUNED, path));
            }
            !managed
        });
        let services = match set.services() {
            Ok(services) => services,
            Err(message) => return failure(Vec::new(), function_config, &message),
        };
        let mut generated = BTreeMap::new();
        for service in &services {
            let path = sdk::file_path(service).unwrap_or_default().to_owned();
            generated.insert(resid(service), reported(service, GENERATED, path));
        }
        for (id, mut report) in pruned {
            if let Some(again) = generated.remove(&id) {
                report.result.message = RECREATED.to_owned();
                report.result.file = again.result.file;
                report.key = report.key.replace(PRUNED, RECREATED);
            }
            reports.push(report);
        }
        reports.extend(generated.into_values());
        generated_items.extend(services);
    }
    items.extend(generated_items);
    reports.sort_by(|a, b| {
        let file = |report: &Reported| {
            report
                .result
                .file
                .as_ref()
                .map(|file| file.path.clone())
                .unwrap_or_default()
        };
        file(a).cmp(&file(b)).then_with(|| a.key.cmp(&b.key))
    });
    Outcome::kyaml(
        ResourceList {
            items,
            function_config,
        },
        reports.into_iter().map(|report| report.result).collect(),
    )
}

/// The function's failure: its error as the one result, the raw error on
/// stderr, exit code 1.
fn failure(items: Vec<Node>, function_config: Option<Node>, error: &str) -> Outcome {
    let mut outcome = Outcome::kyaml(
        ResourceList {
            items,
            function_config,
        },
        vec![FnResult::error(format!("failed to add services: {error}"))],
    );
    outcome.stderr = error.to_owned();
    outcome.exit_code = 1;
    outcome
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dirs_are_go_path_dirs() {
        assert_eq!(go_dir(""), ".");
        assert_eq!(go_dir("ps.yaml"), ".");
        assert_eq!(go_dir("sub/ps.yaml"), "sub");
        assert_eq!(go_dir("a/b/ps.yaml"), "a/b");
    }

    #[test]
    fn short_service_names_are_rejected() {
        let set = ServiceSet {
            name: "ps".to_owned(),
            namespace: String::new(),
            annotations: BTreeMap::new(),
            services: vec!["compute.googleapis".to_owned()],
            project_id: String::new(),
        };
        assert_eq!(
            set.services().err().as_deref(),
            Some("invalid service specified: compute.googleapis")
        );
    }

    #[test]
    fn owner_reference_is_a_joined_path() {
        let set = ServiceSet {
            name: "project-services".to_owned(),
            namespace: String::new(),
            annotations: BTreeMap::new(),
            services: Vec::new(),
            project_id: String::new(),
        };
        assert_eq!(
            set.owner(),
            "blueprints.cloud.google.com/ProjectServiceSet/project-services"
        );
    }
}
