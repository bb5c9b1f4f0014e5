//! `kubeconform` (kpt Go SDK, family K): validates every item against the
//! Kubernetes JSON schemas bundled with krender (v1.37.0, from
//! `assets/kubeconform/`) and reports one `error` result per schema
//! violation (spec catalog-functions §11). Items pass through unchanged.
//! A schema is found as kubeconform finds its yannh schema file (lower-cased
//! kind, first label of the group, version); results follow item order,
//! then the validator's order (`jsonschema`).
//!
//! Configuration is the ConfigMap `data` of the function config:
//! - `strict`: closes every object schema with `properties` (the `-strict`
//!   schema variants, derived here instead of vendored twice);
//! - `ignore_missing_schemas`: accepted; kinds without a schema (custom
//!   resources, Kptfile) never produce a result, as both conformance cases
//!   show even without it;
//! - `skip_kinds`: comma-separated kinds (`Deployment`) or
//!   `apiVersion/kind` (`apps/v1/Deployment`) not to validate;
//! - `kubernetes_version`: `master` (the default) or the bundled version;
//!   anything else is an error result, as is `schema_locations` naming
//!   anything but `default` (a container image could not read host paths
//!   either, and krender downloads nothing).

use std::collections::HashMap;
use std::sync::OnceLock;

use serde_json::{Map, Value};

use super::jsonschema::{Instance, Leaf, Validator};
use super::sdk::{FieldRef, FileRef, FnResult, Outcome, ResourceList, ResourceRef, file_path};
use crate::yaml::node::Node;

/// The Kubernetes version of the bundled schemas.
pub(crate) const BUNDLED_VERSION: &str = "1.37.0";

/// The bundled definitions (`$defs` of the yannh-style `_definitions.json`,
/// descriptions stripped; see `assets/kubeconform/README.md`).
const DEFINITIONS: &str = include_str!("../../../assets/kubeconform/definitions-v1.37.0.json");

/// The parsed definitions and the index from schema file name to the
/// definition name.
struct Schemas {
    defs: Map<String, Value>,
    /// Keyed by the yannh file name without `.json`
    /// (`deployment-apps-v1`, `configmap-v1`), the way kubeconform finds a
    /// schema: lower-cased kind, first label of the group, version. So
    /// `kind: deployment` finds the Deployment schema and then fails its
    /// `kind` enum, as in kubeconform.
    by_file: HashMap<String, String>,
}

/// kubeconform's schema file name (without `.json`) for a resource.
fn schema_file(api_version: &str, kind: &str) -> String {
    let mut parts = api_version.split('/');
    let group = parts.next().unwrap_or_default();
    let group = group.split('.').next().unwrap_or_default();
    let mut name = format!("{}-{}", kind.to_lowercase(), group.to_lowercase());
    if let Some(version) = parts.next() {
        name.push('-');
        name.push_str(&version.to_lowercase());
    }
    name
}

/// Parses the bundled definitions once per process.
fn schemas() -> Result<&'static Schemas, String> {
    static SCHEMAS: OnceLock<Result<Schemas, String>> = OnceLock::new();
    SCHEMAS
        .get_or_init(|| {
            let mut document: Value = serde_json::from_str(DEFINITIONS)
                .map_err(|err| format!("bundled schemas are unreadable: {err}"))?;
            let defs = match document.get_mut("$defs").map(Value::take) {
                Some(Value::Object(defs)) => defs,
                _ => return Err("bundled schemas have no $defs".to_owned()),
            };
            let mut by_file = HashMap::new();
            // Definitions are visited by name, so the first name wins when
            // several claim one kind (meta/v1 DeleteOptions and friends).
            for (name, schema) in &defs {
                let Some(Value::Array(gvks)) = schema.get("x-kubernetes-group-version-kind") else {
                    continue;
                };
                for gvk in gvks {
                    let field = |key: &str| {
                        gvk.get(key)
                            .and_then(Value::as_str)
                            .unwrap_or_default()
                            .to_owned()
                    };
                    let group = field("group");
                    let api_version = if group.is_empty() {
                        field("version")
                    } else {
                        format!("{group}/{}", field("version"))
                    };
                    by_file
                        .entry(schema_file(&api_version, &field("kind")))
                        .or_insert_with(|| name.clone());
                }
            }
            Ok(Schemas { defs, by_file })
        })
        .as_ref()
        .map_err(Clone::clone)
}

/// The function's settings.
#[derive(Debug, Default, PartialEq, Eq)]
struct Config {
    strict: bool,
    skip_kinds: Vec<String>,
}

impl Config {
    /// Reads the ConfigMap `data`; an unusable setting is an error message.
    fn from_function_config(config: Option<&Node>) -> Result<Config, String> {
        let mut settings = Config::default();
        let Some(data) = config.and_then(|config| config.get("data")) else {
            return Ok(settings);
        };
        for (key, value) in data.pairs() {
            let value = value.value.trim();
            match key.value.as_str() {
                "strict" => settings.strict = parse_bool("strict", value)?,
                "ignore_missing_schemas" => {
                    parse_bool("ignore_missing_schemas", value)?;
                }
                "skip_kinds" => {
                    settings.skip_kinds = value
                        .split(',')
                        .map(str::trim)
                        .filter(|kind| !kind.is_empty())
                        .map(str::to_owned)
                        .collect();
                }
                "kubernetes_version" => {
                    let version = value.strip_prefix('v').unwrap_or(value);
                    if !(value.is_empty() || value == "master" || version == BUNDLED_VERSION) {
                        return Err(format!(
                            "kubernetes_version {value:?} is not available: only the bundled \
                             {BUNDLED_VERSION} schemas (also used for \"master\") can be used"
                        ));
                    }
                }
                "schema_locations" => {
                    let unsupported: Vec<&str> = value
                        .split(',')
                        .map(str::trim)
                        .filter(|location| !location.is_empty() && *location != "default")
                        .collect();
                    if !unsupported.is_empty() {
                        return Err(format!(
                            "schema_locations {:?} are not supported: only the bundled schemas \
                             (\"default\") can be used",
                            unsupported.join(",")
                        ));
                    }
                }
                _ => {}
            }
        }
        Ok(settings)
    }

    fn skips(&self, api_version: &str, kind: &str) -> bool {
        skips(&self.skip_kinds, api_version, kind)
    }
}

/// kubeconform's `-skip`: a listed kind (`Deployment`) or qualified kind
/// (`apps/v1/Deployment`) is not validated.
pub(crate) fn skips(skip_kinds: &[String], api_version: &str, kind: &str) -> bool {
    skip_kinds.iter().any(|skip| {
        skip == kind
            || skip
                .strip_suffix(kind)
                .and_then(|rest| rest.strip_suffix('/'))
                .is_some_and(|rest| rest == api_version)
    })
}

/// kubeconform's errors for one resource of `api_version` and `kind`
/// (converted by `instance` only when a schema covers the kind) against the
/// bundled schema (`-strict` variant when `strict`): `Ok(None)` when no
/// schema covers the kind.
pub(crate) fn validate(
    api_version: &str,
    kind: &str,
    instance: impl FnOnce() -> Instance,
    strict: bool,
) -> Result<Option<Vec<Leaf>>, String> {
    let schemas = schemas()?;
    let Some(schema) = schemas
        .by_file
        .get(&schema_file(api_version, kind))
        .and_then(|name| schemas.defs.get(name))
    else {
        return Ok(None);
    };
    let validator = Validator {
        defs: &schemas.defs,
        strict,
    };
    Ok(Some(validator.validate(schema, &instance())))
}

/// Go `strconv.ParseBool`.
fn parse_bool(key: &str, value: &str) -> Result<bool, String> {
    match value {
        "1" | "t" | "T" | "true" | "TRUE" | "True" => Ok(true),
        "0" | "f" | "F" | "false" | "FALSE" | "False" => Ok(false),
        _ => Err(format!(
            "failed to parse {key}: strconv.ParseBool: parsing {value:?}: invalid syntax"
        )),
    }
}

/// Runs kubeconform on a parsed input.
pub(crate) fn run(input: ResourceList) -> Outcome {
    let config = match Config::from_function_config(input.function_config.as_ref()) {
        Ok(config) => config,
        Err(message) => return Outcome::sdk_failure(input, vec![FnResult::error(message)]),
    };
    let mut results = Vec::new();
    for item in &input.items {
        let api_version = item.get_str(&["apiVersion"]).unwrap_or_default();
        let kind = item.get_str(&["kind"]).unwrap_or_default();
        if config.skips(api_version, kind) {
            continue;
        }
        let leaves = match validate(
            api_version,
            kind,
            || Instance::from_node(item),
            config.strict,
        ) {
            Ok(Some(leaves)) => leaves,
            Ok(None) => continue,
            Err(message) => return Outcome::sdk_failure(input, vec![FnResult::error(message)]),
        };
        let reference = ResourceRef::of(item);
        let file = file_path(item).map(|path| FileRef {
            path: path.to_owned(),
            index: 0,
        });
        for leaf in leaves {
            results.push(FnResult {
                resource_ref: Some(reference.clone()),
                // The function turns the JSON pointer into a dotted path;
                // an error on the object itself has no field.
                field: (!leaf.location.is_empty()).then(|| FieldRef {
                    path: leaf.location.join("."),
                    ..FieldRef::default()
                }),
                file: file.clone(),
                ..FnResult::error(leaf.message)
            });
        }
    }
    if results.is_empty() {
        Outcome::sdk(input, results)
    } else {
        Outcome::sdk_failure(input, results)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bundled_schemas_index_core_kinds() {
        let schemas = schemas();
        assert!(schemas.is_ok(), "{:?}", schemas.err());
        let Ok(schemas) = schemas else { return };
        for (file, definition) in [
            ("deployment-apps-v1", "io.k8s.api.apps.v1.Deployment"),
            ("configmap-v1", "io.k8s.api.core.v1.ConfigMap"),
            ("service-v1", "io.k8s.api.core.v1.Service"),
            ("ingress-networking-v1", "io.k8s.api.networking.v1.Ingress"),
        ] {
            assert_eq!(
                schemas.by_file.get(file).map(String::as_str),
                Some(definition),
                "{file}"
            );
        }
    }

    #[test]
    fn schema_files_are_named_like_yannh() {
        assert_eq!(schema_file("apps/v1", "Deployment"), "deployment-apps-v1");
        assert_eq!(schema_file("v1", "ConfigMap"), "configmap-v1");
        assert_eq!(
            schema_file("networking.k8s.io/v1", "Ingress"),
            "ingress-networking-v1"
        );
    }

    #[test]
    fn skip_kinds_match_kind_or_qualified_kind() {
        let config = Config {
            skip_kinds: vec!["ConfigMap".to_owned(), "apps/v1/Deployment".to_owned()],
            ..Config::default()
        };
        assert!(config.skips("v1", "ConfigMap"));
        assert!(config.skips("apps/v1", "Deployment"));
        assert!(!config.skips("apps/v1beta1", "Deployment"));
        assert!(!config.skips("v1", "Service"));
    }

    #[test]
    fn bools_parse_like_go() {
        assert_eq!(parse_bool("strict", "True"), Ok(true));
        assert_eq!(parse_bool("strict", "0"), Ok(false));
        assert_eq!(
            parse_bool("strict", "yes"),
            Err(
                "failed to parse strict: strconv.ParseBool: parsing \"yes\": invalid syntax"
                    .to_owned()
            )
        );
    }
}
