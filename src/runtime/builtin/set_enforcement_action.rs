//! `set-enforcement-action` (kyaml legacy framework, family L): sets
//! `spec.enforcementAction` of every Gatekeeper constraint
//! (`constraints.gatekeeper.sh/v1beta1`) to the function config's
//! `data.enforcementAction` (`deny`, `warn` or `dryrun`).
//!
//! As the function's Go source: the config's `data` must hold exactly that
//! one key; results are `Number of policies set to [<action>]: <n>` then
//! `Policy name: [<name>]` per constraint with its file, or one warning
//! when there is none. A bad config fails the function with the error
//! result `failed to process policies: <why>`; the framework prints the
//! bare error on stderr.

use super::sdk::{self, FileRef, FnResult, Outcome, ResourceList};
use crate::yaml::node::Node;

const POLICY_API_VERSION: &str = "constraints.gatekeeper.sh/v1beta1";
const ACTIONS: [&str; 3] = ["deny", "warn", "dryrun"];

/// Runs set-enforcement-action on a parsed input.
pub(crate) fn run(input: ResourceList) -> Outcome {
    let action = match action_of(input.function_config.as_ref()) {
        Ok(action) => action,
        Err(error) => return failure(input, &error),
    };
    let mut input = input;
    let mut policies = Vec::new();
    for item in &mut input.items {
        let root = item.root();
        if root.is_null() || (root.content.is_empty() && !root.is_scalar()) {
            continue;
        }
        let name = root
            .get_str(&["metadata", "name"])
            .unwrap_or_default()
            .to_owned();
        let kind = root.get_str(&["kind"]).unwrap_or_default();
        let api_version = root.get_str(&["apiVersion"]).unwrap_or_default();
        if name.is_empty() || kind.is_empty() || api_version != POLICY_API_VERSION {
            continue;
        }
        let path = sdk::file_path(item).unwrap_or_default().to_owned();
        let Some(spec) = item
            .root_mut()
            .get_mut("spec")
            .filter(|spec| spec.is_mapping())
        else {
            // kyaml's LookupCreate makes a missing `spec` a scalar, on which
            // setting a field fails.
            return failure(
                input,
                "wrong Node Kind for spec expected: MappingNode was ScalarNode: value: {}",
            );
        };
        // A new node, as kyaml's SetField puts one: the host copies the
        // old value's comments back.
        spec.set(
            "enforcementAction",
            Node::new_untagged_scalar(action.as_str()),
        );
        policies.push(FnResult {
            file: (!path.is_empty()).then_some(FileRef { path, index: 0 }),
            ..FnResult::info(format!("Policy name: [{name}]"))
        });
    }
    let results = sdk::counted_results(
        |count| format!("Number of policies set to [{action}]: {count}"),
        policies,
        format!("Found no policy to set to [{action}]"),
    );
    Outcome::kyaml(input, results)
}

/// The action the config asks for.
fn action_of(config: Option<&Node>) -> Result<String, String> {
    let data = config.and_then(|config| config.get("data"));
    let entries: Vec<(&Node, &Node)> = data.map(|data| data.pairs().collect()).unwrap_or_default();
    if entries.len() != 1 {
        return Err("expecting exactly 1 enforcementAction as part of the ConfigMap".to_owned());
    }
    let action = entries
        .iter()
        .find(|(key, _)| key.value == "enforcementAction")
        .map(|(_, value)| value.value.as_str())
        .unwrap_or_default();
    if !ACTIONS.contains(&action) {
        return Err(
            "expected values for enforcementAction are [deny] or [warn] or [dryrun]".to_owned(),
        );
    }
    Ok(action.to_owned())
}

fn failure(input: ResourceList, error: &str) -> Outcome {
    let message = format!("failed to process policies: {error}");
    let mut outcome = Outcome::kyaml(input, vec![FnResult::error(message)]);
    outcome.stderr = error.to_owned();
    outcome.exit_code = 1;
    outcome
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::yaml::parse_document;

    fn node(text: &str) -> Node {
        parse_document(text).unwrap().unwrap().into_root()
    }

    fn messages(config: &str, items: &[&str]) -> Vec<String> {
        let outcome = run(ResourceList {
            items: items.iter().map(|text| node(text)).collect(),
            function_config: Some(node(config)),
        });
        outcome
            .results
            .iter()
            .map(|result| result.message.clone())
            .collect()
    }

    /// The function's own test cases.
    #[test]
    fn sets_the_action_of_constraints_and_checks_the_config() {
        let policy = "apiVersion: constraints.gatekeeper.sh/v1beta1\nkind: K8sRestrictRoleBindings\nmetadata:\n  name: restrict\nspec:\n  enforcementAction: deny # kpt-set: ${enforcementAction}\n";
        let config_map =
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: fc-config\ndata:\n  foo: bar\n";
        assert_eq!(
            messages("data:\n  enforcementAction: dryrun\n", &[policy]),
            [
                "Number of policies set to [dryrun]: 1",
                "Policy name: [restrict]"
            ]
        );
        assert_eq!(
            messages("data:\n  enforcementAction: deny\n", &[config_map]),
            ["Found no policy to set to [deny]"]
        );
        assert_eq!(
            messages("data:\n  enforcementAction: dry-run\n", &[config_map]),
            [
                "failed to process policies: expected values for enforcementAction are [deny] or [warn] or [dryrun]"
            ]
        );
        assert_eq!(
            messages(
                "data:\n  enforcementAction: dryrun\n  foo: bar\n",
                &[config_map]
            ),
            [
                "failed to process policies: expecting exactly 1 enforcementAction as part of the ConfigMap"
            ]
        );
    }
}
