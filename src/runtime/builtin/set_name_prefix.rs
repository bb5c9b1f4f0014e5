//! `set-name-prefix` (kpt Go SDK `fn.AsMain` with a
//! `ResourceListProcessorFunc`, family K): renames the objects named after
//! the package placeholder to the package's name, and every reference to
//! them.
//!
//! As the catalog's Go source (`functions/go/set-name-prefix/setnameprefix.go`
//! in kptdev/krm-functions-catalog, the same in the older
//! GoogleContainerTools/kpt-functions-catalog since it replaced the
//! kustomize-based `main.go`): the prefix is the package context's
//! `data.name` ([`package_context`]); a ConfigMap config (matched as the
//! SDK's `IsGVK("", "v1", "ConfigMap")`: missing apiVersion or kind match
//! too) may set `data.prefix` and `data.oldPrefix` (default
//! `packagename`), and gets an empty `data` added when it has none, as the
//! SDK's `UpsertMap` does to the config echoed back. Every item that is
//! not local config nor a `ResourceGroup`, in input order, named
//! `<oldPrefix>` becomes `<prefix>` and one named `<oldPrefix>-<rest>`
//! becomes `<prefix>-<rest>`, in its own namespace, through
//! [`rename::rename`](super::rename::rename).
//!
//! Messages: a missing or broken package context and an empty prefix fail
//! the function (stderr `failed to evaluate function: <error>`, exit 1); a
//! config of another kind is the error result `functionConfig error:
//! unknown functionConfig Kind /, Kind=` (Go prints an empty GVK) with the
//! config's reference and file, exit 0; a rename or reference error is one
//! error result, exit 0, edits made before it kept.

use super::kube_object::{
    Gvk, config_object_error, found_string, is_local_config, is_resource_group, name, namespace,
    package_context, string_key_value_mut,
};
use super::rename::rename;
use super::sdk::{FnResult, Outcome, ResourceList};
use crate::yaml::node::Node;

const DEFAULT_OLD_PREFIX: &str = "packagename";

/// Runs set-name-prefix on a parsed input.
pub(crate) fn run(input: ResourceList) -> Outcome {
    let mut prefix = match package_context(&input.items) {
        Ok(context) => context.name,
        Err(message) => return Outcome::sdk_error(input, Vec::new(), &message),
    };
    let mut old_prefix = DEFAULT_OLD_PREFIX.to_owned();
    let mut input = input;
    if let Some(config) = input.function_config.as_mut() {
        if !Gvk::of(config).is_like("", "v1", "ConfigMap") {
            let result = config_object_error(
                "functionConfig error: unknown functionConfig Kind /, Kind=".to_owned(),
                config,
            );
            return Outcome::sdk(input, vec![result]);
        }
        let Some(data) = upsert_map(config, "data") else {
            // Go dereferences a nil map here and panics.
            let mut outcome = Outcome::sdk_failure(input, Vec::new());
            outcome.stderr = "builtin set-name-prefix does not reproduce the function when the \
                              config's `data` is not a mapping (the function panics); map it in \
                              render.toml to an executable or a container image\n"
                .to_owned();
            outcome.silent = true;
            return outcome;
        };
        if let Some(found) = found_string(data, "prefix") {
            prefix = found;
        }
        if let Some(found) = found_string(data, "oldPrefix") {
            old_prefix = found;
        }
    }
    if prefix.is_empty() {
        return Outcome::sdk_error(input, Vec::new(), "`data.prefix` should not be empty");
    }
    let results = match transform(&mut input.items, &prefix, &old_prefix) {
        Ok(()) => Vec::new(),
        Err(message) => vec![FnResult::error(message)],
    };
    Outcome::sdk(input, results)
}

/// The SDK's `UpsertMap(key)`: the mapping under `key`, appended empty when
/// missing; `None` when the value is something else.
fn upsert_map<'a>(config: &'a mut Node, key: &str) -> Option<&'a mut Node> {
    if string_key_value_mut(config, key).is_none() {
        config.push_pair(Node::new_string(key), Node::new_mapping());
    }
    string_key_value_mut(config, key).filter(|value| value.is_mapping())
}

/// `SetNamePrefix.Transform`.
fn transform(items: &mut [Node], prefix: &str, old_prefix: &str) -> Result<(), String> {
    let dashed = format!("{old_prefix}-");
    for index in 0..items.len() {
        let item = &items[index];
        if is_local_config(item) || is_resource_group(item) {
            continue;
        }
        let old_name = name(item);
        let new_name = if old_name.is_empty() {
            continue;
        } else if old_name == old_prefix {
            prefix.to_owned()
        } else if let Some(rest) = old_name.strip_prefix(&dashed) {
            format!("{prefix}-{rest}")
        } else {
            continue;
        };
        // The namespace stays.
        let own_namespace = namespace(item);
        rename(items, index, &new_name, &own_namespace)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::yaml::parse_document;

    fn node(text: &str) -> Node {
        parse_document(text).unwrap().unwrap().into_root()
    }

    fn context(data: &str) -> Node {
        node(&format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: kptfile.kpt.dev\n  annotations:\n    \
             config.kubernetes.io/local-config: \"true\"\n{data}"
        ))
    }

    fn stderr_of(items: Vec<Node>, config: Option<&str>) -> String {
        let outcome = run(ResourceList {
            items,
            function_config: config.map(node),
        });
        assert_eq!(outcome.exit_code, 1);
        outcome.stderr
    }

    #[test]
    fn package_context_and_prefix_errors_fail_the_function() {
        let failed = |message: &str| format!("failed to evaluate function: {message}");
        assert_eq!(
            stderr_of(Vec::new(), None),
            failed("unable to find package context object")
        );
        assert_eq!(
            stderr_of(
                vec![context("data:\n  name: a\n"), context("data:\n  name: b\n")],
                None
            ),
            failed("found multiple matches for package-context object")
        );
        assert_eq!(
            stderr_of(vec![context("data: {}\n")], None),
            failed("package name (data.name) not set in package context object")
        );
        assert_eq!(
            stderr_of(vec![context("data:\n  name: [a]\n")], None),
            failed(
                "error getting data.name from package context object: Resource(apiVersion=, kind=ConfigMap) \
                 has unmatched field type \"string\" in fieldpath .data.name"
            )
        );
        // A prefix that is not a string counts as set, and empty.
        assert_eq!(
            stderr_of(
                vec![context("data:\n  name: a\n")],
                Some("apiVersion: v1\nkind: ConfigMap\ndata:\n  prefix: 3\n")
            ),
            failed("`data.prefix` should not be empty")
        );
    }

    #[test]
    fn names_get_the_prefix_once() {
        let outcome = run(ResourceList {
            items: vec![
                context("data:\n  name: shop\n"),
                node("apiVersion: v1\nkind: ServiceAccount\nmetadata:\n  name: packagename\n"),
                node("apiVersion: v1\nkind: Secret\nmetadata:\n  name: packagename-token\n"),
                node("apiVersion: v1\nkind: Secret\nmetadata:\n  name: packagenameless\n"),
            ],
            function_config: None,
        });
        assert_eq!(outcome.exit_code, 0);
        let names: Vec<String> = outcome.items.iter().map(super::name).collect();
        assert_eq!(
            names,
            ["kptfile.kpt.dev", "shop", "shop-token", "packagenameless"]
        );
    }

    #[test]
    fn a_renamed_namespace_moves_the_objects_in_it() {
        let outcome = run(ResourceList {
            items: vec![
                context("data:\n  name: shop\n"),
                node("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: packagename\n"),
                node(
                    "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: packagename-config\n  \
                     namespace: packagename\n",
                ),
            ],
            function_config: None,
        });
        assert_eq!(outcome.exit_code, 0);
        assert!(outcome.results.is_empty());
        let ids: Vec<(String, String)> = outcome
            .items
            .iter()
            .map(|item| (super::name(item), super::namespace(item)))
            .collect();
        assert_eq!(
            ids,
            [
                ("kptfile.kpt.dev".to_owned(), String::new()),
                ("shop".to_owned(), String::new()),
                ("shop-config".to_owned(), "shop".to_owned()),
            ]
        );
    }
}
