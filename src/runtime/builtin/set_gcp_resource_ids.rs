//! `set-gcp-resource-ids` (kpt Go SDK `fn.WithContext` runner, family K):
//! names the Config Connector resources of a package after the package.
//!
//! As the catalog's Go source (`functions/go/set-gcp-resource-ids`:
//! `main.go`, `projectids.go`, `pkg/kpt`): the project id is the config's
//! `projectID` (a `SetGCPProject.fn.kpt.dev` config; a ConfigMap cannot set
//! it: the runner has no `map[string]string` field, so a ConfigMap with
//! `data` fails), or else generated from the package's one `Project` and the
//! package context (`kptfile.kpt.dev`) parent path:
//! `<name>-<reversed parent path tokens>` cut to fit 30 characters, then
//! `-` and the first four `[0-9a-z]` of the lowercased base64 of its
//! SHA-512. Then every resource that is not local config (and not a
//! `ResourceGroup`) gets: a `Folder` its `spec.displayName` (its name); a
//! `Project` its `spec.name` (display name from name and parent path) and
//! `spec.resourceID` (the id); any resource with a non-empty
//! `cnrm.cloud.google.com/project-id` annotation the id; a
//! `ConfigConnectorContext` its `spec.googleServiceAccount` domain. Any
//! error is one error result and fails the function (stderr
//! `failed to evaluate function: error: function failure`); edits made
//! before it stay in the output.

use super::kube_object::{
    annotation, go_string, group_version, is_gvk, is_local_config, is_resource_group,
    package_context, set_nested_string, unmatched_field,
};
use super::sdk::{self, FnResult, Outcome, ResourceList};
use crate::yaml::node::{Node, NodeKind, tag};

const FOLDER: (&str, &str) = ("resourcemanager.cnrm.cloud.google.com/v1beta1", "Folder");
const PROJECT: (&str, &str) = ("resourcemanager.cnrm.cloud.google.com/v1beta1", "Project");
const CONFIG_CONNECTOR_CONTEXT: (&str, &str) = (
    "core.cnrm.cloud.google.com/v1beta1",
    "ConfigConnectorContext",
);
const PROJECT_ID_ANNOTATION: &str = "cnrm.cloud.google.com/project-id";
const SERVICE_ACCOUNT_DOMAIN: &str = ".iam.gserviceaccount.com";
/// The runner's Go type name: the kind of its own config.
const RUNNER: &str = "SetGCPProject";

/// Runs set-gcp-resource-ids on a parsed input.
pub(crate) fn run(input: ResourceList) -> Outcome {
    let mut results = Vec::new();
    let project_id = match configured_project_id(input.function_config.as_ref()) {
        Ok(Some(id)) => id,
        Ok(None) => {
            results.push(FnResult::info("`FunctionConfig` is not given"));
            String::new()
        }
        Err(message) => {
            results.push(FnResult::error(message));
            return Outcome::sdk_failure(input, results);
        }
    };
    let mut input = input;
    match transform(&mut input.items, project_id) {
        Ok(()) => Outcome::sdk(input, results),
        Err(message) => {
            results.push(FnResult::error(message));
            Outcome::sdk_failure(input, results)
        }
    }
}

/// The SDK runner's reading of the function config: `None` when it is not
/// given (absent, empty, or kpt's empty `function-input` ConfigMap), else
/// the project id it sets (empty when it sets none).
fn configured_project_id(config: Option<&Node>) -> Result<Option<String>, String> {
    let Some(config) = config.filter(|config| !config.content.is_empty()) else {
        return Ok(None);
    };
    let kind = go_string(config.get("kind"));
    let (group, _) = group_version(&go_string(config.get("apiVersion")));
    let data = config.get("data");
    let string_map = data.filter(|data| is_string_map(data));
    if kind == "ConfigMap"
        && go_string(config.get_path(&["metadata", "name"])) == "function-input"
        && string_map.is_some_and(|data| data.content.is_empty())
    {
        return Ok(None);
    }
    match (group.as_deref(), kind.as_str()) {
        (Some(""), "ConfigMap") => match data {
            // No `data`: nothing to assign, the runner goes on.
            None => Ok(Some(String::new())),
            Some(data) if !data.is_mapping() => {
                Err(unmatched_field(config, ".data", "map[string]string"))
            }
            Some(data) => match data.pairs().find(|(_, value)| !value.is_scalar()) {
                Some((_, value)) => Err(format!(
                    "yaml: unmarshal errors:\n  line {}: cannot unmarshal {} into string",
                    value.line,
                    if value.is_sequence() {
                        tag::SEQ
                    } else {
                        tag::MAP
                    }
                )),
                None => Err(format!(
                    "unable to assign the given ConfigMap `.data` to FunctionConfig {RUNNER}. \
                     please make sure the {RUNNER} has a field of type map[string]string"
                )),
            },
        },
        (Some("fn.kpt.dev"), RUNNER) => project_id_field(config).map(Some),
        _ => {
            let group_kind = match group.as_deref() {
                Some(group) if !group.is_empty() => format!("{kind}.{group}"),
                // An apiVersion Go cannot parse has no kind either.
                None => String::new(),
                Some(_) => kind,
            };
            Err(format!(
                "unknown FunctionConfig `{group_kind}`, expect `{RUNNER}.fn.kpt.dev` or `ConfigMap.v1`"
            ))
        }
    }
}

/// `projectID` as Go's encoding/json reads it into the runner: keys match
/// case-insensitively and the last one wins; null leaves it empty; any
/// other non-string fails the conversion.
fn project_id_field(config: &Node) -> Result<String, String> {
    let mut project_id = String::new();
    for (key, value) in config.pairs() {
        if !key.value.eq_ignore_ascii_case("projectID") {
            continue;
        }
        let json_kind = match value.kind {
            NodeKind::Sequence => Some("array"),
            NodeKind::Mapping => Some("object"),
            NodeKind::Scalar => match value.tag() {
                tag::NULL => None,
                tag::BOOL => Some("bool"),
                tag::INT | tag::FLOAT => Some("number"),
                _ => {
                    project_id = value.value.to_string();
                    None
                }
            },
            _ => None,
        };
        if let Some(found) = json_kind {
            return Err(format!(
                "unable to convert object to *main.{RUNNER} with error: json: cannot unmarshal \
                 {found} into Go struct field {RUNNER}.projectID of type string"
            ));
        }
    }
    Ok(project_id)
}

/// The function's `Run` over the items.
fn transform(items: &mut [Node], project_id: String) -> Result<(), String> {
    let project_id = if project_id.is_empty() {
        generate_project_id(items)?
    } else {
        project_id
    };
    let parent_path = package_context(items)?.parent_path;
    for item in items.iter_mut() {
        if is_local_config(item) || is_resource_group(item) {
            continue;
        }
        let name = go_string(item.get_path(&["metadata", "name"]));
        if is_gvk(item, FOLDER) {
            set_nested_string(item, &["spec", "displayName"], &name)?;
        }
        if is_gvk(item, PROJECT) {
            let mut display_name = name.clone();
            if !parent_path.is_empty() {
                display_name.push('-');
                display_name.push_str(&reversed_tokens(&parent_path).join("-"));
            }
            let display_name = truncate_bytes(&display_name.replace('.', "-"), 30);
            set_nested_string(item, &["spec", "name"], &display_name)?;
            set_nested_string(item, &["spec", "resourceID"], &project_id)?;
        }
        if !annotation(item, PROJECT_ID_ANNOTATION).is_empty() {
            set_nested_string(
                item,
                &["metadata", "annotations", PROJECT_ID_ANNOTATION],
                &project_id,
            )?;
        }
        if is_gvk(item, CONFIG_CONNECTOR_CONTEXT) {
            let account = go_string(item.get_path(&["spec", "googleServiceAccount"]));
            if !account.is_empty() {
                let tokens: Vec<&str> = account.split('@').collect();
                let [user, domain] = tokens[..] else {
                    return Err(format!(
                        "error parsing spec.googleServiceAccount={}",
                        sdk::go_quote(&account)
                    ));
                };
                if !domain.ends_with(SERVICE_ACCOUNT_DOMAIN) {
                    return Err(format!(
                        "unexpected value for spec.googleServiceAccount={} (expected {SERVICE_ACCOUNT_DOMAIN} suffix)",
                        sdk::go_quote(&account)
                    ));
                }
                let account = format!("{user}@{project_id}{SERVICE_ACCOUNT_DOMAIN}");
                set_nested_string(item, &["spec", "googleServiceAccount"], &account)?;
            }
        }
    }
    Ok(())
}

/// `SetGCPProject.GenerateProjectID`: the id from the package's one Project.
fn generate_project_id(items: &[Node]) -> Result<String, String> {
    let parent_path = package_context(items)?.parent_path;
    let projects: Vec<&Node> = items.iter().filter(|item| is_gvk(item, PROJECT)).collect();
    let project = match projects[..] {
        [] => {
            return Err(
                "did not find any Project objects in package, cannot generate project id"
                    .to_owned(),
            );
        }
        [project] => project,
        _ => {
            return Err(
                "found multiple Project objects in package, cannot generate project id".to_owned(),
            );
        }
    };
    let name = go_string(project.get_path(&["metadata", "name"]));
    Ok(project_id_for(&name, &parent_path))
}

/// `GenerateProjectID(name, parentPath)` of `projectids.go`.
fn project_id_for(name: &str, parent_path: &str) -> String {
    const MAX_LENGTH: usize = 30;
    const SUFFIX_LENGTH: usize = 4;
    let mut full = name.to_owned();
    // Go's strings.Split of "" is [""]: an empty parent path still adds "-".
    for token in reversed_tokens(parent_path) {
        full.push('-');
        full.push_str(&token.replace('.', "-"));
    }
    let digest = sha512(full.as_bytes());
    let suffix: String = base64_std(&digest)
        .to_lowercase()
        .chars()
        .filter(|c| c.is_ascii_digit() || c.is_ascii_lowercase())
        .take(SUFFIX_LENGTH)
        .collect();
    // 88 base64 characters of a 64-byte digest always hold four of them;
    // the Go source's "unable to generate suffix" cannot happen.
    if full.len() + 1 + SUFFIX_LENGTH > MAX_LENGTH {
        format!(
            "{}-{suffix}",
            truncate_bytes(&full, MAX_LENGTH - 1 - SUFFIX_LENGTH)
        )
    } else {
        format!("{full}-{suffix}")
    }
}

fn reversed_tokens(path: &str) -> Vec<&str> {
    path.split('/').rev().collect()
}

/// The first `max` bytes of `text`, as Go's `s[:max]`. A cut inside a
/// character (Go would keep the partial bytes) keeps the whole character
/// boundary before it instead: the output must stay valid UTF-8.
fn truncate_bytes(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text[..end].to_owned()
}

/// SHA-512 of `message` (Go's `sha512.Sum512`).
fn sha512(message: &[u8]) -> [u8; 64] {
    use sha2::Digest;
    sha2::Sha512::digest(message).into()
}

/// Standard base64 with padding (Go's `base64.StdEncoding`).
fn base64_std(bytes: &[u8]) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// A mapping whose values are all scalars, as yaml.v3 decodes into a Go
/// `map[string]string`.
fn is_string_map(node: &Node) -> bool {
    node.is_mapping() && node.pairs().all(|(_, value)| value.is_scalar())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::yaml::parse_document;

    fn node(text: &str) -> Node {
        parse_document(text).unwrap().unwrap().into_root()
    }

    #[test]
    fn project_ids_follow_the_go_source() {
        // Expected values from `printf %s <full id> | openssl dgst -sha512
        // -binary | base64`, lowercased, first four of [0-9a-z].
        assert_eq!(project_id_for("proj", ""), "proj--zy5v");
        assert_eq!(
            project_id_for("a-very-long-project-name", "folder.one/folder-two"),
            "a-very-long-project-name--3sit"
        );
    }

    #[test]
    fn config_kinds_as_the_sdk_runner_reads_them() {
        let read = |text: &str| configured_project_id(Some(&node(text)));
        assert_eq!(
            read("apiVersion: fn.kpt.dev/v1alpha1\nkind: SetGCPProject\nprojectID: p-1\n"),
            Ok(Some("p-1".to_owned()))
        );
        assert_eq!(
            read("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: function-input\ndata: {}\n"),
            Ok(None)
        );
        assert_eq!(
            read("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n"),
            Ok(Some(String::new()))
        );
        assert!(
            read("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\ndata:\n  projectID: p\n")
                .unwrap_err()
                .starts_with(
                    "unable to assign the given ConfigMap `.data` to FunctionConfig SetGCPProject."
                )
        );
        assert_eq!(
            read("apiVersion: example.com/v1\nkind: Other\n"),
            Err("unknown FunctionConfig `Other.example.com`, expect `SetGCPProject.fn.kpt.dev` or `ConfigMap.v1`".to_owned())
        );
        assert_eq!(
            read("apiVersion: fn.kpt.dev/v1alpha1\nkind: SetGCPProject\nprojectID: 12\n"),
            Err("unable to convert object to *main.SetGCPProject with error: json: cannot unmarshal number into Go struct field SetGCPProject.projectID of type string".to_owned())
        );
    }

    #[test]
    fn fails_without_package_context_or_project() {
        let outcome = run(ResourceList {
            items: vec![node(
                "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n",
            )],
            function_config: None,
        });
        assert_eq!(outcome.exit_code, 1);
        let messages: Vec<&str> = outcome.results.iter().map(|r| r.message.as_str()).collect();
        assert_eq!(
            messages,
            [
                "`FunctionConfig` is not given",
                "unable to find package context object"
            ]
        );
    }
}
