//! `remove-local-config-resources` (kyaml legacy framework, family L):
//! drops every item whose `config.kubernetes.io/local-config` annotation is
//! `true` in any letter case, the resources `kpt live apply` would skip.
//!
//! Results, as the function's Go source builds them: with something
//! pruned, `Number of resources pruned: <n>` then one
//! `Resource name: [<name>]` per pruned item with its file path (internal
//! annotation first); with nothing pruned, one warning. Empty items are
//! dropped too (the function skips nil-or-empty nodes).

use super::sdk::{self, FileRef, FnResult, Outcome, ResourceList};

/// Runs remove-local-config-resources on a parsed input.
pub(crate) fn run(input: ResourceList) -> Outcome {
    let ResourceList {
        items,
        function_config,
    } = input;
    let mut kept = Vec::with_capacity(items.len());
    let mut pruned = Vec::new();
    for item in items {
        let root = item.root();
        if root.is_null() || (root.content.is_empty() && !root.is_scalar()) {
            continue;
        }
        let local = sdk::annotation(&item, sdk::LOCAL_CONFIG)
            .is_some_and(|value| value.to_lowercase() == "true");
        if !local {
            kept.push(item);
            continue;
        }
        let path = sdk::file_path(&item).unwrap_or_default();
        let name = root.get_str(&["metadata", "name"]).unwrap_or_default();
        pruned.push(FnResult {
            file: (!path.is_empty()).then(|| FileRef {
                path: path.to_owned(),
                index: 0,
            }),
            ..FnResult::info(format!("Resource name: [{name}]"))
        });
    }
    let results = sdk::counted_results(
        |count| format!("Number of resources pruned: {count}"),
        pruned,
        "Found no resources to prune with the local config annotation".to_owned(),
    );
    Outcome::kyaml(
        ResourceList {
            items: kept,
            function_config,
        },
        results,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::yaml::parse_document;

    fn item(text: &str) -> crate::yaml::node::Node {
        parse_document(text).unwrap().unwrap().into_root()
    }

    /// The function's own test cases: two, one and no pruned resources.
    #[test]
    fn prunes_local_config_resources_and_reports_each() {
        let applied = item("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: applied\n");
        let local = |name: &str, value: &str| {
            item(&format!(
                "apiVersion: blueprints.cloud.google.com/v1alpha3\nkind: ResourceHierarchy\nmetadata:\n  name: {name}\n  annotations:\n    config.kubernetes.io/local-config: \"{value}\"\n    config.kubernetes.io/path: h.yaml\n"
            ))
        };
        let messages = |items: Vec<crate::yaml::node::Node>| {
            let outcome = run(ResourceList {
                items,
                function_config: None,
            });
            (
                outcome.items.len(),
                outcome
                    .results
                    .iter()
                    .map(|result| result.message.clone())
                    .collect::<Vec<_>>(),
            )
        };
        assert_eq!(
            messages(vec![
                applied.clone(),
                local("h-01", "true"),
                local("h-02", "TRUE")
            ]),
            (
                1,
                vec![
                    "Number of resources pruned: 2".to_owned(),
                    "Resource name: [h-01]".to_owned(),
                    "Resource name: [h-02]".to_owned(),
                ]
            )
        );
        assert_eq!(
            messages(vec![applied.clone(), local("h-01", "false")]),
            (
                2,
                vec!["Found no resources to prune with the local config annotation".to_owned()]
            )
        );
    }
}
