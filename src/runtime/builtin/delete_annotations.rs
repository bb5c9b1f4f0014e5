//! `delete-annotations` (kpt Go SDK `fn.AsMain`, family K): removes the
//! annotations named in the config's `data.annotationKeys` (a comma
//! separated list) from every resource.
//!
//! As the catalog's Go source (`functions/go/delete-annotations/main.go`,
//! the SDK version): the list is split on `,` after trimming the whole
//! text (each key is used as written, spaces included); resources without
//! apiVersion, kind or name are skipped. Results: info `The provided
//! annotations were deleted from <n> resource(s)` then one info
//! `Annonation: [<key>] removed from resource: [<name>]` (the function's
//! spelling) per removal with the internal path annotation as file, or
//! info `None of the resources had the provided annotations to delete`.
//! `<n>` counts changes of name between successive removals, as the
//! function does, so two resources of the same name in a row count once.
//! A missing or empty `annotationKeys` is an error result, stderr
//! `failed to evaluate function: <error>` and exit 1.

use super::sdk::{self, FileRef, FnResult, Outcome, ResourceList};
use crate::krm::resource::PATH;

const KEYS: &str = "annotationKeys";

/// Runs delete-annotations on a parsed input.
pub(crate) fn run(input: ResourceList) -> Outcome {
    let keys = input
        .function_config
        .as_ref()
        .and_then(|config| config.get_str(&["data", KEYS]))
        .unwrap_or_default()
        .to_owned();
    if keys.is_empty() {
        let message =
            format!("{KEYS} was not provided as part of the config or paramters to the function");
        return Outcome::sdk_error(input, vec![FnResult::error(message.clone())], &message);
    }
    let keys: Vec<&str> = keys.trim().split(',').collect();
    let mut input = input;
    let mut removals = Vec::new();
    let mut current_name = String::new();
    let mut pruned = 0;
    for item in &mut input.items {
        let name = item
            .get_str(&["metadata", "name"])
            .unwrap_or_default()
            .to_owned();
        let kind = item.get_str(&["kind"]).unwrap_or_default();
        let api_version = item.get_str(&["apiVersion"]).unwrap_or_default();
        if kind.is_empty() || name.is_empty() || api_version.is_empty() {
            continue;
        }
        for key in &keys {
            let removed = item
                .get_mut("metadata")
                .and_then(|metadata| metadata.get_mut("annotations"))
                .and_then(|annotations| annotations.remove(key))
                .is_some();
            if !removed {
                continue;
            }
            if name != current_name {
                pruned += 1;
                current_name.clone_from(&name);
            }
            removals.push(FnResult {
                file: Some(FileRef {
                    path: sdk::annotation(item, PATH).unwrap_or_default().to_owned(),
                    index: 0,
                }),
                ..FnResult::info(format!(
                    "Annonation: [{key}] removed from resource: [{name}]"
                ))
            });
        }
    }
    let results = if removals.is_empty() {
        vec![FnResult::info(
            "None of the resources had the provided annotations to delete",
        )]
    } else {
        std::iter::once(FnResult::info(format!(
            "The provided annotations were deleted from {pruned} resource(s)"
        )))
        .chain(removals)
        .collect()
    };
    Outcome::sdk(input, results)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::yaml::node::Node;
    use crate::yaml::parse_document;

    fn node(text: &str) -> Node {
        parse_document(text).unwrap().unwrap().into_root()
    }

    fn messages(config: &str, items: Vec<Node>) -> Vec<String> {
        run(ResourceList {
            items,
            function_config: Some(node(config)),
        })
        .results
        .into_iter()
        .map(|result| result.message)
        .collect()
    }

    /// The function's own test cases.
    #[test]
    fn removes_listed_annotations_and_reports_each() {
        let constraint = |extra: &str| {
            node(&format!(
                "apiVersion: constraints.gatekeeper.sh/v1beta1\nkind: K8sNoEnvVarSecrets\n\
                 metadata:\n  name: no-secrets-as-env-vars\n  annotations:\n    \
                 description: d\n    policy.library/doc-gen: \"do_not_document\"\n{extra}"
            ))
        };
        assert_eq!(
            messages(
                "data:\n  annotationKeys: policy.library/doc-gen\n",
                vec![constraint("")]
            ),
            [
                "The provided annotations were deleted from 1 resource(s)",
                "Annonation: [policy.library/doc-gen] removed from resource: [no-secrets-as-env-vars]",
            ]
        );
        assert_eq!(
            messages(
                "data:\n  annotationKeys: policy.library/doc-gen,another-annotation-to-delete\n",
                vec![constraint(
                    "    another-annotation-to-delete: \"some_value\"\n"
                )]
            ),
            [
                "The provided annotations were deleted from 1 resource(s)",
                "Annonation: [policy.library/doc-gen] removed from resource: [no-secrets-as-env-vars]",
                "Annonation: [another-annotation-to-delete] removed from resource: [no-secrets-as-env-vars]",
            ]
        );
        assert_eq!(
            messages("data:\n  annotationKeys: x,y\n", vec![constraint("")]),
            ["None of the resources had the provided annotations to delete"]
        );
    }

    #[test]
    fn a_missing_key_list_fails_with_the_functions_message() {
        let outcome = run(ResourceList {
            items: Vec::new(),
            function_config: Some(node("data:\n  other: x\n")),
        });
        assert_eq!(outcome.exit_code, 1);
        assert_eq!(
            outcome.stderr,
            "failed to evaluate function: annotationKeys was not provided as part of the \
             config or paramters to the function"
        );
    }
}
