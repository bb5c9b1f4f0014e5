//! `kubeval` (kpt Go SDK, family K): the catalog's current kubeval runs the
//! kubeconform binary on each item (`-output json`, baked-in schemas), so
//! the validation is the `kubeconform` builtin's (bundled Kubernetes
//! 1.37.0 schemas); what differs is the function around it:
//!
//! - the config: `schema_location`, `additional_schema_locations`,
//!   `ignore_missing_schemas`, `skip_kinds`, `strict`, read from the
//!   config's top level first, then from its ConfigMap `data`; booleans are
//!   `true` in any case or `1`, anything else is false (never an error);
//!   `skip_kinds` is split at commas without trimming;
//! - the item: decoded with go-yaml v3 and handed over as JSON, so plain
//!   `yes`/`no` are strings (kubeconform reading YAML takes them as
//!   booleans);
//! - the results: one `error` per violation with the resource's reference,
//!   `field.path` the JSON pointer with `/` turned into `.` (always
//!   written, `{}` for the object itself), `file` its path and index
//!   (always written);
//! - an item kubeconform reports as an error rather than invalid (no
//!   schema for its kind without `ignore_missing_schemas`, no `kind` or
//!   `apiVersion`) fails the function without a result of its own.
//!
//! Schema locations other than the baked-in one are an error result here:
//! krender downloads nothing and a container could not read host paths.

use super::jsonschema::{Instance, Leaf};
use super::kubeconform;
use super::sdk::{
    FieldRef, FileRef, FnResult, Outcome, ResourceList, ResourceRef, file_index, file_path,
};
use crate::yaml::node::{Node, tag};

/// Where the image keeps its schemas (`file://` + the function's default).
const BAKED_IN_LOCATION: &str = "file:///jsonschema";

/// The function's settings.
#[derive(Debug, Default, PartialEq, Eq)]
struct Config {
    schema_locations: Vec<String>,
    ignore_missing_schemas: bool,
    skip_kinds: Vec<String>,
    strict: bool,
}

impl Config {
    /// Reads the settings as the function's `extractConfig` does.
    fn from_function_config(config: Option<&Node>) -> Config {
        let Some(config) = config else {
            return Config::default();
        };
        let string = |key: &str| -> String {
            let top = config
                .get(key)
                .filter(|value| value.is_scalar() && value.tag() == tag::STR)
                .map(|value| value.value.to_string())
                .unwrap_or_default();
            if !top.is_empty() {
                return top;
            }
            config
                .get("data")
                .and_then(|data| data.get(key))
                .filter(|value| value.is_scalar() && !value.is_null())
                .map(|value| value.value.to_string())
                .unwrap_or_default()
        };
        let list = |key: &str| -> Vec<String> {
            let value = string(key);
            if value.is_empty() {
                return Vec::new();
            }
            value.split(',').map(str::to_owned).collect()
        };
        let boolean = |key: &str| -> bool {
            if let Some(value) = config
                .get(key)
                .filter(|value| value.is_scalar() && value.tag() == tag::BOOL)
            {
                return value.value.eq_ignore_ascii_case("true");
            }
            let value = string(key);
            value.eq_ignore_ascii_case("true") || value == "1"
        };
        let mut schema_locations = Vec::new();
        let primary = string("schema_location");
        if !primary.is_empty() {
            schema_locations.push(primary);
        }
        schema_locations.extend(list("additional_schema_locations"));
        Config {
            schema_locations,
            ignore_missing_schemas: boolean("ignore_missing_schemas"),
            skip_kinds: list("skip_kinds"),
            strict: boolean("strict"),
        }
    }
}

/// What kubeconform said about one item.
enum Verdict {
    /// Valid, skipped, or no schema with `ignore_missing_schemas`.
    Passed,
    /// Schema violations.
    Invalid(Vec<Leaf>),
    /// An error status without validation errors.
    Failed,
}

/// kubeconform's verdict on one item.
fn verdict(item: &Node, config: &Config) -> Result<Verdict, String> {
    let instance = Instance::from_node_decoded(item);
    let field = |key: &str| match &instance {
        Instance::Object(map) => match map.get(key) {
            Some(Instance::String(text)) if !text.is_empty() => Some(text.clone()),
            _ => None,
        },
        _ => None,
    };
    let (Some(api_version), Some(kind)) = (field("apiVersion"), field("kind")) else {
        return Ok(Verdict::Failed);
    };
    if kubeconform::skips(&config.skip_kinds, &api_version, &kind) {
        return Ok(Verdict::Passed);
    }
    match kubeconform::validate(&api_version, &kind, || instance, config.strict)? {
        None if config.ignore_missing_schemas => Ok(Verdict::Passed),
        None => Ok(Verdict::Failed),
        Some(leaves) if leaves.is_empty() => Ok(Verdict::Passed),
        Some(leaves) => Ok(Verdict::Invalid(leaves)),
    }
}

/// The function's field path for kubeconform's instance location: the
/// JSON pointer (tokens unescaped) with `/` replaced by `.`, one leading
/// `.` trimmed.
fn field_path(location: &[String]) -> String {
    let pointer: String = location.iter().map(|token| format!("/{token}")).collect();
    let dotted = pointer.replace('/', ".");
    dotted.strip_prefix('.').unwrap_or(&dotted).to_owned()
}

/// Runs kubeval on a parsed input.
pub(crate) fn run(input: ResourceList) -> Outcome {
    let config = Config::from_function_config(input.function_config.as_ref());
    let unsupported: Vec<&str> = config
        .schema_locations
        .iter()
        .map(String::as_str)
        .filter(|location| *location != BAKED_IN_LOCATION)
        .collect();
    if !unsupported.is_empty() {
        let message = format!(
            "schema locations {:?} are not supported: only the bundled Kubernetes {} schemas \
             can be used",
            unsupported.join(","),
            kubeconform::BUNDLED_VERSION
        );
        return Outcome::sdk_failure(input, vec![FnResult::error(message)]);
    }
    let mut results = Vec::new();
    let mut failed = false;
    for item in &input.items {
        let leaves = match verdict(item, &config) {
            Ok(Verdict::Passed) => continue,
            Ok(Verdict::Failed) => {
                failed = true;
                continue;
            }
            Ok(Verdict::Invalid(leaves)) => leaves,
            Err(message) => return Outcome::sdk_failure(input, vec![FnResult::error(message)]),
        };
        failed = true;
        let reference = ResourceRef::of(item);
        let file = FileRef {
            path: file_path(item).unwrap_or_default().to_owned(),
            index: file_index(item).unwrap_or_default(),
        };
        for leaf in leaves {
            results.push(FnResult {
                resource_ref: Some(reference.clone()),
                field: Some(FieldRef {
                    path: field_path(&leaf.location),
                    ..FieldRef::default()
                }),
                file: Some(file.clone()),
                ..FnResult::error(leaf.message)
            });
        }
    }
    if failed {
        Outcome::sdk_failure(input, results)
    } else {
        Outcome::sdk(input, results)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::yaml::parse_document;

    fn config(text: &str) -> Config {
        let document = parse_document(text).ok().flatten();
        Config::from_function_config(document.as_ref().map(|document| document.root()))
    }

    #[test]
    fn config_reads_data_and_top_level_like_the_function() {
        let parsed = config(
            "apiVersion: v1\nkind: ConfigMap\ndata:\n  strict: 'TRUE'\n  \
             ignore_missing_schemas: 'yes'\n  skip_kinds: 'A, B'\n",
        );
        assert!(parsed.strict);
        assert!(!parsed.ignore_missing_schemas, "only true or 1 is true");
        assert_eq!(parsed.skip_kinds, vec!["A".to_owned(), " B".to_owned()]);
        let top = config("apiVersion: fn/v1\nkind: Kubeval\nstrict: true\nskip_kinds: X\n");
        assert!(top.strict);
        assert_eq!(top.skip_kinds, vec!["X".to_owned()]);
    }

    #[test]
    fn field_paths_are_dotted_pointers() {
        let location = |tokens: &[&str]| tokens.iter().map(|t| (*t).to_owned()).collect::<Vec<_>>();
        assert_eq!(field_path(&location(&[])), "");
        assert_eq!(
            field_path(&location(&["spec", "replicas"])),
            "spec.replicas"
        );
        assert_eq!(
            field_path(&location(&["metadata", "annotations", "a.io/b"])),
            "metadata.annotations.a.io.b"
        );
    }
}
