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

use super::sdk::{self, FnResult, Outcome, ResourceList};
use crate::yaml::node::{Node, NodeKind, tag};

const FOLDER: (&str, &str) = ("resourcemanager.cnrm.cloud.google.com/v1beta1", "Folder");
const PROJECT: (&str, &str) = ("resourcemanager.cnrm.cloud.google.com/v1beta1", "Project");
const CONFIG_CONNECTOR_CONTEXT: (&str, &str) = (
    "core.cnrm.cloud.google.com/v1beta1",
    "ConfigConnectorContext",
);
const RESOURCE_GROUP: (&str, &str) = ("kpt.dev/v1alpha1", "ResourceGroup");
const PROJECT_ID_ANNOTATION: &str = "cnrm.cloud.google.com/project-id";
const PACKAGE_CONTEXT_NAME: &str = "kptfile.kpt.dev";
const PARENT_PATH_ANNOTATION: &str = "config.kubernetes.io/parent-path";
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
            NodeKind::Scalar => match value.tag.as_ref() {
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
        if is_local_config(item) || is_gvk(item, RESOURCE_GROUP) {
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

/// The package context object (`pkg/kpt.FindPackageContext`).
struct PackageContext {
    parent_path: String,
}

fn package_context(items: &[Node]) -> Result<PackageContext, String> {
    let matches: Vec<&Node> = items
        .iter()
        .filter(|item| {
            is_local_config(item)
                && go_string(item.get_path(&["metadata", "name"])) == PACKAGE_CONTEXT_NAME
        })
        .collect();
    let context = match matches[..] {
        [] => return Err("unable to find package context object".to_owned()),
        [context] => context,
        _ => return Err("found multiple matches for package-context object".to_owned()),
    };
    let name = match nested_string(context, &["data", "name"]) {
        Ok(name) => name,
        Err(()) => {
            return Err(format!(
                "error getting data.name from package context object: {}",
                unmatched_field(context, ".data.name", "string")
            ));
        }
    };
    if name.is_empty() {
        return Err("package name (data.name) not set in package context object".to_owned());
    }
    Ok(PackageContext {
        parent_path: annotation(context, PARENT_PATH_ANNOTATION),
    })
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

/// True when apiVersion and kind are exactly these (the SDK's
/// `IsGroupVersionKind` on a parsed group/version).
fn is_gvk(item: &Node, (api_version, kind): (&str, &str)) -> bool {
    go_string(item.get("apiVersion")) == api_version && go_string(item.get("kind")) == kind
}

/// The SDK's `IsLocalConfig`: the annotation is set to anything but `false`.
fn is_local_config(item: &Node) -> bool {
    let value = annotation(item, sdk::LOCAL_CONFIG);
    !value.is_empty() && value != "false"
}

/// The SDK's `GetAnnotation`: the string value, empty on any mismatch.
fn annotation(item: &Node, key: &str) -> String {
    nested_string(item, &["metadata", "annotations", key]).unwrap_or_default()
}

/// A string scalar's text (`!!str`, as the SDK's `GetNestedString`
/// accepts), or empty.
fn go_string(node: Option<&Node>) -> String {
    node.filter(|node| is_string(node))
        .map(|node| node.value.to_string())
        .unwrap_or_default()
}

fn is_string(node: &Node) -> bool {
    node.is_scalar() && (node.tag == tag::STR || node.tag.is_empty())
}

/// The SDK's `GetNestedString`: `Ok("")` when missing, `Err` when a step is
/// not a mapping or the value not a string.
fn nested_string(item: &Node, path: &[&str]) -> Result<String, ()> {
    let mut node = item;
    for (i, key) in path.iter().enumerate() {
        if !node.is_mapping() {
            return Err(());
        }
        let Some(next) = string_key_value(node, key) else {
            return Ok(String::new());
        };
        node = next;
        if i + 1 < path.len() && !node.is_mapping() {
            return Err(());
        }
    }
    if is_string(node) {
        Ok(node.value.to_string())
    } else {
        Err(())
    }
}

/// A mapping's value for `key`, matching string keys only (as the SDK).
fn string_key_value<'a>(mapping: &'a Node, key: &str) -> Option<&'a Node> {
    mapping
        .pairs()
        .find(|(k, _)| is_string(k) && k.value == key)
        .map(|(_, value)| value)
}

/// The SDK's `ErrUnmatchedField` text. Its object GVK is read from fields
/// named `group`, `version` and `kind` of the object itself (as the SDK's
/// `asKubeObject` does), so the apiVersion part is nearly always empty.
fn unmatched_field(object: &Node, field_path: &str, data_type: &str) -> String {
    let group = go_string(object.get("group"));
    let version = go_string(object.get("version"));
    let kind = go_string(object.get("kind"));
    let group_version = if group.is_empty() {
        version
    } else {
        format!("{group}/{version}")
    };
    format!(
        "Resource(apiVersion={group_version}, kind={kind}) has unmatched field type {} in fieldpath {field_path}",
        sdk::go_quote(data_type)
    )
}

/// The SDK's `SetNestedString`: creates missing mappings on the way
/// (appended), replaces the value with a new `!!str` scalar keeping its
/// comments, and fails when a step on the way is not a mapping.
fn set_nested_string(item: &mut Node, path: &[&str], value: &str) -> Result<(), String> {
    let fail = |found: &Node| {
        let variant = match found.kind {
            NodeKind::Sequence => "*internal.sliceVariant",
            _ => "*internal.scalarVariant",
        };
        format!(
            "unable to set {value} at fields [{}] with error: incorrect type, was {variant}",
            path.join(" ")
        )
    };
    let Some((last, steps)) = path.split_last() else {
        return Ok(());
    };
    let mut node = item;
    for key in steps {
        let index = node
            .pairs()
            .position(|(k, _)| is_string(k) && k.value == *key);
        node = match index {
            Some(i) => {
                let child = &mut node.content[2 * i + 1];
                if !child.is_mapping() {
                    return Err(fail(child));
                }
                child
            }
            None => {
                node.push_pair(Node::new_string(*key), Node::new_mapping());
                let len = node.content.len();
                &mut node.content[len - 1]
            }
        };
    }
    let index = node
        .pairs()
        .position(|(k, _)| is_string(k) && k.value == *last);
    match index {
        Some(i) => sdk::replace_with_string(&mut node.content[2 * i + 1], value),
        None => node.push_pair(Node::new_string(*last), Node::new_string(value)),
    }
    Ok(())
}

/// The group of a Go-parsed apiVersion (`schema.ParseGroupVersion`), or
/// `None` when Go cannot parse it (more than one `/`).
fn group_version(api_version: &str) -> (Option<String>, String) {
    if api_version.is_empty() || api_version == "/" {
        return (Some(String::new()), String::new());
    }
    match api_version.split_once('/') {
        None => (Some(String::new()), api_version.to_owned()),
        Some((group, version)) if !version.contains('/') => {
            (Some(group.to_owned()), version.to_owned())
        }
        Some(_) => (None, String::new()),
    }
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
