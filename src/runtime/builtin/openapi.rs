//! kyaml's bundled OpenAPI document (`sigs.k8s.io/kustomize/kyaml/openapi`):
//! the Kubernetes 1.21 definitions plus kyaml's Kustomization schema, as the
//! catalog's kyaml-based functions see them (`assets/kyaml-openapi/`).
//!
//! Two readers: the format builtin walks it field by field as kyaml's
//! `ResourceSchema.Field` and `Elements` do, and Starlark's `ctx.open_api`
//! hands the whole `definitions` object to the script.

use std::collections::HashMap;
use std::io::Read;
use std::sync::OnceLock;

use serde_json::{Map, Value};

/// The gzipped `{"definitions": ...}` document (see
/// `assets/kyaml-openapi/extract.py`).
const DOCUMENT: &[u8] = include_bytes!("../../../assets/kyaml-openapi/definitions-v1.21.json.gz");

/// The parsed definitions, indexed by the resource types they declare.
pub(crate) struct OpenApi {
    document: Value,
    /// `(apiVersion, kind)` to definition name, from each definition's
    /// `x-kubernetes-group-version-kind` (kyaml `AddDefinitions`).
    by_type: HashMap<(String, String), String>,
}

/// Parses the bundled document once per process.
pub(crate) fn bundled() -> Result<&'static OpenApi, String> {
    static OPEN_API: OnceLock<Result<OpenApi, String>> = OnceLock::new();
    OPEN_API
        .get_or_init(|| {
            let mut text = String::new();
            flate2::read::GzDecoder::new(DOCUMENT)
                .read_to_string(&mut text)
                .map_err(|err| format!("bundled OpenAPI document is unreadable: {err}"))?;
            let document: Value = serde_json::from_str(&text)
                .map_err(|err| format!("bundled OpenAPI document is unreadable: {err}"))?;
            let mut by_type = HashMap::new();
            let definitions = document
                .get("definitions")
                .and_then(Value::as_object)
                .ok_or("bundled OpenAPI document has no definitions")?;
            for (name, schema) in definitions {
                let Some(Value::Array(types)) = schema.get("x-kubernetes-group-version-kind")
                else {
                    continue;
                };
                for gvk in types {
                    let text = |key: &str| gvk.get(key).and_then(Value::as_str).unwrap_or_default();
                    let api_version = match text("group") {
                        "" => text("version").to_owned(),
                        group => format!("{group}/{}", text("version")),
                    };
                    by_type.insert((api_version, text("kind").to_owned()), name.clone());
                }
            }
            Ok(OpenApi { document, by_type })
        })
        .as_ref()
        .map_err(Clone::clone)
}

impl OpenApi {
    /// The whole document: `{"definitions": {...}}`, what kyaml's
    /// `openapi.Schema()` marshals to.
    pub(crate) fn document(&self) -> &Value {
        &self.document
    }

    fn definitions(&self) -> Option<&Map<String, Value>> {
        self.document.get("definitions").and_then(Value::as_object)
    }

    /// kyaml `SchemaForResourceType`: the definition declaring the type.
    pub(crate) fn for_type(&self, api_version: &str, kind: &str) -> Option<&Value> {
        let name = self
            .by_type
            .get(&(api_version.to_owned(), kind.to_owned()))?;
        self.definitions()?.get(name)
    }

    /// kyaml `ResourceSchema.Field`: the named property's schema, else the
    /// map value schema (`additionalProperties`), with references resolved.
    pub(crate) fn field<'a>(&'a self, schema: &'a Value, name: &str) -> Option<&'a Value> {
        let found = schema
            .get("properties")
            .and_then(|properties| properties.get(name))
            .or_else(|| {
                schema
                    .get("additionalProperties")
                    .filter(|value| value.is_object())
            })?;
        self.resolve(found)
    }

    /// kyaml `ResourceSchema.Elements`: an array's item schema, with
    /// references resolved.
    pub(crate) fn elements<'a>(&'a self, schema: &'a Value) -> Option<&'a Value> {
        if single_type(schema) != Some("array") {
            return None;
        }
        self.resolve(schema.get("items").filter(|items| items.is_object())?)
    }

    /// Follows `$ref`s to a schema without one; `None` for a reference
    /// that is not a local definition (kyaml's `Resolve` fails).
    fn resolve<'a>(&'a self, mut schema: &'a Value) -> Option<&'a Value> {
        // A bound: a reference cycle fails as an unresolvable one.
        for _ in 0..64 {
            let Some(reference) = schema.get("$ref") else {
                return Some(schema);
            };
            let name = reference.as_str()?.strip_prefix("#/definitions/")?;
            schema = self.definitions()?.get(name)?;
        }
        None
    }
}

/// A schema's `type` when it names exactly one (go-openapi reads a string
/// or a list of strings).
pub(crate) fn single_type(schema: &Value) -> Option<&str> {
    match schema.get("type")? {
        Value::String(name) => Some(name),
        Value::Array(names) if names.len() == 1 => names[0].as_str(),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_types_and_walks_fields_through_references() {
        let api = bundled().unwrap();
        let deployment = api.for_type("apps/v1", "Deployment").unwrap();
        let spec = api.field(deployment, "spec").unwrap();
        let replicas = api.field(spec, "replicas").unwrap();
        assert_eq!(single_type(replicas), Some("integer"));
        let containers = api
            .field(
                api.field(api.field(spec, "template").unwrap(), "spec")
                    .unwrap(),
                "containers",
            )
            .unwrap();
        let container = api.elements(containers).unwrap();
        let port = api
            .elements(api.field(container, "ports").unwrap())
            .and_then(|port| api.field(port, "containerPort"))
            .unwrap();
        assert_eq!(single_type(port), Some("integer"));
        // Map values: a ConfigMap's data, a container's resource limits.
        let config_map = api.for_type("v1", "ConfigMap").unwrap();
        assert_eq!(
            single_type(
                api.field(api.field(config_map, "data").unwrap(), "any")
                    .unwrap()
            ),
            Some("string")
        );
        let limits = api
            .field(api.field(container, "resources").unwrap(), "limits")
            .unwrap();
        assert_eq!(
            single_type(api.field(limits, "cpu").unwrap()),
            Some("string")
        );
        // IntOrString keeps its format.
        let strategy = api.field(spec, "strategy").unwrap();
        let rolling = api.field(strategy, "rollingUpdate").unwrap();
        let surge = api.field(rolling, "maxSurge").unwrap();
        assert_eq!(
            surge.get("format").and_then(Value::as_str),
            Some("int-or-string")
        );
        assert!(api.field(spec, "noSuchField").is_none());
        assert!(api.elements(spec).is_none());
        // kyaml's Kustomization schema is loaded beside Kubernetes'.
        assert!(
            api.for_type("kustomize.config.k8s.io/v1beta1", "Kustomization")
                .is_some()
        );
        assert!(api.for_type("example.com/v1", "Deployment").is_none());
    }
}
