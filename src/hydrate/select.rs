//! Step selection (`selectors` / `exclude`): which resources a step sees,
//! kpt's temporary resource-id annotation, and merging a selective step's
//! output back into the full resource list.

use crate::krm::resource;
use crate::pkg::kptfile::Selector;
use crate::yaml::node::{Node, Style};

/// kpt's temporary id annotation for selective steps.
pub const RESOURCE_ID: &str = "internal.config.k8s.io/kpt-resource-id";

fn map_matches(
    resource_node: &Node,
    field: &str,
    wanted: &std::collections::BTreeMap<String, String>,
) -> bool {
    let actual = resource_node.root().get_path(&["metadata", field]);
    wanted.iter().all(|(key, value)| {
        actual
            .and_then(|map| map.get(key))
            .is_some_and(|found| found.is_scalar() && found.value == *value)
    })
}

fn matches(node: &Node, selector: &Selector) -> bool {
    let field_ok =
        |wanted: &str, actual: Option<&str>| wanted.is_empty() || actual.unwrap_or("") == wanted;
    field_ok(&selector.api_version, resource::api_version(node))
        && field_ok(&selector.kind, resource::kind(node))
        && field_ok(&selector.name, resource::name(node))
        && field_ok(&selector.namespace, resource::namespace(node))
        && map_matches(node, "labels", &selector.labels)
        && map_matches(node, "annotations", &selector.annotations)
}

/// kpt's `Selector.IsEmpty`: only the identity fields count (a selector
/// with nothing but labels or annotations is "empty").
fn is_empty(selector: &Selector) -> bool {
    selector.api_version.is_empty()
        && selector.kind.is_empty()
        && selector.name.is_empty()
        && selector.namespace.is_empty()
}

/// Copies of the resources [`select`] picks, in order.
pub fn pick(input: &[Node], selectors: &[Selector], exclude: &[Selector]) -> Vec<Node> {
    select(input, selectors, exclude)
        .iter()
        .filter_map(|&i| input.get(i).cloned())
        .collect()
}

/// Each resource's temporary id ([`RESOURCE_ID`], empty when unset), to
/// merge a selective step's output back.
pub fn resource_ids(resources: &[Node]) -> Vec<String> {
    resources
        .iter()
        .map(|r| {
            crate::krm::resource::annotation(r, RESOURCE_ID)
                .unwrap_or("")
                .to_owned()
        })
        .collect()
}

/// kpt's `SelectInput`: the positions of the resources a step sees. As in
/// kpt, a resource matching several selectors is listed once per match,
/// and exclusions that are "empty" (see `is_empty`) are ignored.
pub fn select(input: &[Node], selectors: &[Selector], exclude: &[Selector]) -> Vec<usize> {
    let mut selected = Vec::new();
    for (index, node) in input.iter().enumerate() {
        if selectors.is_empty() {
            selected.push(index);
        } else {
            for selector in selectors {
                if matches(node, selector) {
                    selected.push(index);
                }
            }
        }
    }
    selected.retain(|&index| {
        input.get(index).is_some_and(|node| {
            !exclude
                .iter()
                .any(|selector| !is_empty(selector) && matches(node, selector))
        })
    });
    selected
}

/// True when a step with these selectors and exclusions applies to `node`.
pub fn is_selected(node: &Node, selectors: &[Selector], exclude: &[Selector]) -> bool {
    !select(std::slice::from_ref(node), selectors, exclude).is_empty()
}

/// Gives every resource its position as the temporary id.
pub fn set_resource_ids(resources: &mut [Node]) {
    for (index, node) in resources.iter_mut().enumerate() {
        resource::set_annotation(node, RESOURCE_ID, &index.to_string(), Style::SINGLE_QUOTED);
    }
}

/// Removes the temporary id (and an annotations map it leaves empty).
pub fn delete_resource_ids(resources: &mut [Node]) {
    for node in resources.iter_mut() {
        if resource::remove_annotation(node, RESOURCE_ID) {
            remove_empty_annotations(node);
        }
    }
}

fn remove_empty_annotations(node: &mut Node) {
    let Some(metadata) = node.root_mut().get_mut("metadata") else {
        return;
    };
    if metadata
        .get("annotations")
        .is_some_and(|a| a.is_mapping() && a.content.is_empty())
    {
        metadata.remove("annotations");
    }
}

/// Merges a selective step's output into the full list: selected inputs are
/// replaced by the output with the same id (or dropped when the function
/// deleted them), unselected ones stay where they were, and outputs without
/// a known id (new resources) are appended.
pub fn merge_with_input(output: Vec<Node>, input: Vec<Node>, selected_ids: &[String]) -> Vec<Node> {
    let mut output: Vec<Option<Node>> = output.into_iter().map(Some).collect();
    let mut merged = Vec::with_capacity(input.len());
    for node in input {
        let id = resource::annotation(&node, RESOURCE_ID)
            .unwrap_or("")
            .to_owned();
        if !selected_ids.contains(&id) {
            merged.push(node);
            continue;
        }
        let found = output.iter_mut().find(|candidate| {
            candidate
                .as_ref()
                .and_then(|c| resource::annotation(c, RESOURCE_ID))
                == Some(id.as_str())
        });
        if let Some(replacement) = found.and_then(Option::take) {
            merged.push(replacement);
        }
    }
    merged.extend(output.into_iter().flatten());
    merged
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resource(kind: &str, name: &str, labels: &[(&str, &str)]) -> Node {
        let mut metadata = Node::new_mapping();
        metadata.set("name", Node::new_string(name));
        if !labels.is_empty() {
            let mut map = Node::new_mapping();
            for (key, value) in labels {
                map.set(key, Node::new_string(*value));
            }
            metadata.set("labels", map);
        }
        let mut root = Node::new_mapping();
        root.set("apiVersion", Node::new_string("v1"));
        root.set("kind", Node::new_string(kind));
        root.set("metadata", metadata);
        root
    }

    #[test]
    fn selectors_and_exclusions() {
        let deployment = resource("Deployment", "httpbin", &[("app", "web")]);
        let config = resource("ConfigMap", "httpbin", &[]);
        let by_name = Selector {
            name: "httpbin".into(),
            ..Selector::default()
        };
        let by_kind = Selector {
            kind: "ConfigMap".into(),
            ..Selector::default()
        };
        let by_label = Selector {
            labels: [("app".to_owned(), "web".to_owned())].into(),
            ..Selector::default()
        };
        assert!(is_selected(&deployment, &[], &[]));
        assert!(is_selected(
            &deployment,
            std::slice::from_ref(&by_name),
            &[]
        ));
        assert!(!is_selected(
            &config,
            std::slice::from_ref(&by_name),
            std::slice::from_ref(&by_kind)
        ));
        assert!(is_selected(
            &deployment,
            std::slice::from_ref(&by_label),
            &[]
        ));
        assert!(!is_selected(&config, &[by_label], &[]));
    }

    #[test]
    fn merge_keeps_unselected_in_place_and_appends_new() {
        let mut input = vec![
            resource("A", "a", &[]),
            resource("B", "b", &[]),
            resource("C", "c", &[]),
        ];
        set_resource_ids(&mut input);
        let mut changed = input[1].clone();
        changed.set("kind", Node::new_string("B2"));
        let generated = resource("D", "d", &[]);
        let merged = merge_with_input(
            vec![generated, changed],
            input,
            &["1".to_owned(), "2".to_owned()],
        );
        let kinds: Vec<&str> = merged.iter().filter_map(|r| resource::kind(r)).collect();
        assert_eq!(kinds, vec!["A", "B2", "D"]);
    }
}
