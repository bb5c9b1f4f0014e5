//! A small JSON Schema (draft 2020-12 subset) validator for the
//! `kubeconform` builtin, reporting errors as santhosh-tekuri/jsonschema v6
//! (the library kubeconform uses) words and orders them.
//!
//! Only the keywords the Kubernetes schemas use are implemented: `type`,
//! `const`, `enum`, `$ref` (into the `$defs` of one document), `properties`,
//! `additionalProperties`, `required`, `items`, `not`, `allOf`, `anyOf`,
//! `oneOf`. `format` is an annotation in 2020-12 unless format assertion is
//! enabled (kubeconform does not), so it is ignored.
//!
//! v6 builds a tree of errors; kubeconform reports its leaves. The validator
//! here emits those leaves directly, in v6's keyword order: `type` and then
//! `const`/`enum` failures end the validation of a value; then `$ref`, then
//! `required`, then each present property (v6 walks a Go map, whose order is
//! random; krender walks properties by name, byte order, so that results
//! are deterministic), then one `additionalProperties` error naming every
//! unknown property (by name), then `not`, `allOf`, `anyOf`, `oneOf`.
//! Messages follow v6's `kind` package (`LocalizedString`, English).

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use crate::yaml::node::{Node, NodeKind, Style, tag};
use crate::yaml::resolve;
use crate::yaml::resolve::resolve_plain;

/// An instance value: the JSON a YAML node converts to (sigs.k8s.io/yaml).
/// Objects are kept by key so that properties are visited by name.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Instance {
    /// `null`
    Null,
    /// `true` / `false`
    Bool(bool),
    /// Any number (JSON does not tell integers apart).
    Number(f64),
    /// A string.
    String(String),
    /// An array.
    Array(Vec<Instance>),
    /// An object.
    Object(BTreeMap<String, Instance>),
}

/// How deep instances and `$ref` chains may nest before validation gives up
/// on a branch (a reference cycle, or a hostile input).
const MAX_DEPTH: usize = 256;

impl Instance {
    /// Converts a YAML node as kubeconform's YAML-to-JSON step would: plain
    /// scalars resolve by go-yaml's rules (`replicas: invalid` is a string,
    /// `3` a number, and YAML 1.1's `yes`/`no`/`on`/`off` booleans, since
    /// kubeconform reads with go-yaml v2), quoted and `!!str`-tagged
    /// scalars are strings,
    /// timestamps and other tags stay strings, and mapping keys are taken as
    /// text. Aliases resolve to null (the wire format kpt writes has none).
    pub(crate) fn from_node(node: &Node) -> Instance {
        Instance::from_node_at(node, true, 0)
    }

    /// Converts a YAML node as a Go function decoding it with go-yaml v3
    /// and handing JSON to kubeconform would (`kubeval`): as
    /// [`Instance::from_node`], except that plain `yes`/`no`/`on`/`off`
    /// stay strings (YAML 1.2).
    pub(crate) fn from_node_decoded(node: &Node) -> Instance {
        Instance::from_node_at(node, false, 0)
    }

    fn from_node_at(node: &Node, yaml11: bool, depth: usize) -> Instance {
        if depth > MAX_DEPTH {
            return Instance::Null;
        }
        match node.kind {
            NodeKind::Document => node.content.first().map_or(Instance::Null, |root| {
                Instance::from_node_at(root, yaml11, depth)
            }),
            NodeKind::Sequence => Instance::Array(
                node.content
                    .iter()
                    .map(|item| Instance::from_node_at(item, yaml11, depth + 1))
                    .collect(),
            ),
            NodeKind::Mapping => Instance::Object(
                node.pairs()
                    .map(|(key, value)| {
                        (
                            key.value.as_str().to_owned(),
                            Instance::from_node_at(value, yaml11, depth + 1),
                        )
                    })
                    .collect(),
            ),
            NodeKind::Scalar => scalar(node, yaml11),
            NodeKind::Alias => Instance::Null,
        }
    }

    /// v6's type name of the value; all numbers are `number`.
    fn type_name(&self) -> &'static str {
        match self {
            Instance::Null => "null",
            Instance::Bool(_) => "boolean",
            Instance::Number(_) => "number",
            Instance::String(_) => "string",
            Instance::Array(_) => "array",
            Instance::Object(_) => "object",
        }
    }

    /// JSON equality, numbers by value (v6 `equals`).
    fn equals(&self, value: &Value) -> bool {
        match (self, value) {
            (Instance::Null, Value::Null) => true,
            (Instance::Bool(a), Value::Bool(b)) => a == b,
            (Instance::Number(a), Value::Number(b)) => b.as_f64() == Some(*a),
            (Instance::String(a), Value::String(b)) => a == b,
            (Instance::Array(a), Value::Array(b)) => {
                a.len() == b.len() && a.iter().zip(b).all(|(a, b)| a.equals(b))
            }
            (Instance::Object(a), Value::Object(b)) => {
                a.len() == b.len()
                    && a.iter()
                        .all(|(key, a)| b.get(key).is_some_and(|b| a.equals(b)))
            }
            _ => false,
        }
    }
}

fn scalar(node: &Node, yaml11: bool) -> Instance {
    let quoted = Style::DOUBLE_QUOTED.bits()
        | Style::SINGLE_QUOTED.bits()
        | Style::LITERAL.bits()
        | Style::FOLDED.bits();
    let explicit = node
        .tag()
        .strip_prefix("tag:yaml.org,2002:")
        .map_or_else(|| node.tag().to_string(), |rest| format!("!!{rest}"));
    let text = node.value.as_str();
    let resolved = if node.style.bits() & quoted != 0 && !node.style.contains(Style::TAGGED) {
        tag::STR
    } else if !node.style.contains(Style::TAGGED) || explicit.is_empty() || explicit == "!" {
        // A plain scalar reaches kubeconform as plain text, which its YAML
        // reader (go-yaml v2, YAML 1.1) resolves: `yes`/`no`/`on`/`off`
        // are booleans there even though kpt (YAML 1.2) keeps them strings.
        match text {
            "y" | "Y" | "yes" | "Yes" | "YES" | "on" | "On" | "ON" if yaml11 => tag::BOOL,
            "n" | "N" | "no" | "No" | "NO" | "off" | "Off" | "OFF" if yaml11 => tag::BOOL,
            _ => resolve_plain(text),
        }
    } else {
        match explicit.as_str() {
            tag::NULL => tag::NULL,
            tag::BOOL => tag::BOOL,
            tag::INT => tag::INT,
            tag::FLOAT => tag::FLOAT,
            _ => tag::STR,
        }
    };
    let string = || Instance::String(text.to_owned());
    match resolved {
        tag::NULL => Instance::Null,
        tag::BOOL => match text {
            "true" | "True" | "TRUE" | "y" | "Y" | "yes" | "Yes" | "YES" | "on" | "On" | "ON" => {
                Instance::Bool(true)
            }
            "false" | "False" | "FALSE" | "n" | "N" | "no" | "No" | "NO" | "off" | "Off"
            | "OFF" => Instance::Bool(false),
            _ => string(),
        },
        tag::INT => resolve::parse_int(text)
            .map(|int| int as f64)
            .map_or_else(string, Instance::Number),
        tag::FLOAT => resolve::parse_float(text).map_or_else(string, Instance::Number),
        _ => string(),
    }
}

/// One reported error: where in the instance, and v6's message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Leaf {
    /// The instance location, one token per object key or array index.
    pub(crate) location: Vec<String>,
    /// The message, as v6's `kind` types print it.
    pub(crate) message: String,
}

/// Validates instances against schemas of one definitions document.
pub(crate) struct Validator<'a> {
    /// The `$defs` that `#/$defs/<name>` references resolve in.
    pub(crate) defs: &'a Map<String, Value>,
    /// Closes every object schema that declares `properties` and says
    /// nothing about `additionalProperties` (what the `-strict` schema
    /// variants add).
    pub(crate) strict: bool,
}

/// v6's fixed order of type names in `want` lists.
const TYPE_ORDER: [&str; 7] = [
    "null", "boolean", "number", "integer", "string", "array", "object",
];

impl Validator<'_> {
    /// All leaf errors of `instance` against `schema`, in v6's order.
    pub(crate) fn validate(&self, schema: &Value, instance: &Instance) -> Vec<Leaf> {
        let mut leaves = Vec::new();
        let mut location = Vec::new();
        self.check(schema, instance, &mut location, 0, &mut leaves);
        leaves
    }

    fn check(
        &self,
        schema: &Value,
        instance: &Instance,
        location: &mut Vec<String>,
        depth: usize,
        out: &mut Vec<Leaf>,
    ) {
        let leaf = |location: &[String], message: String| Leaf {
            location: location.to_vec(),
            message,
        };
        let schema = match schema {
            Value::Bool(true) => return,
            Value::Bool(false) => {
                out.push(leaf(location, "false schema".to_owned()));
                return;
            }
            Value::Object(schema) => schema,
            // Not a schema; the vendored definitions have none of these.
            _ => return,
        };
        if depth > MAX_DEPTH {
            return;
        }

        // type --
        if let Some(types) = schema.get("type") {
            let wanted: Vec<&str> = match types {
                Value::String(name) => vec![name.as_str()],
                Value::Array(names) => names.iter().filter_map(Value::as_str).collect(),
                _ => Vec::new(),
            };
            let got = instance.type_name();
            let is_integer = matches!(instance, Instance::Number(n) if n.fract() == 0.0);
            let matched = wanted.is_empty()
                || wanted.contains(&got)
                || (wanted.contains(&"integer") && is_integer);
            if !matched {
                let want: Vec<&str> = TYPE_ORDER
                    .into_iter()
                    .filter(|name| wanted.contains(name))
                    .collect();
                out.push(leaf(
                    location,
                    format!("got {got}, want {}", want.join(" or ")),
                ));
                return;
            }
        }

        // const --
        if let Some(want) = schema.get("const")
            && !instance.equals(want)
        {
            let message = match want {
                Value::Array(_) | Value::Object(_) => "'const' failed".to_owned(),
                want => format!("value must be {}", display(want)),
            };
            out.push(leaf(location, message));
            return;
        }

        // enum --
        if let Some(Value::Array(values)) = schema.get("enum")
            && !values.iter().any(|value| instance.equals(value))
        {
            out.push(leaf(location, enum_message(values)));
            return;
        }

        // $ref --
        if let Some(Value::String(reference)) = schema.get("$ref") {
            match reference
                .strip_prefix("#/$defs/")
                .and_then(|name| self.defs.get(name))
            {
                Some(target) => self.check(target, instance, location, depth + 1, out),
                None => out.push(leaf(
                    location,
                    format!("validation failed with {}", quote(reference)),
                )),
            }
        }

        // type specific --
        match instance {
            Instance::Object(object) => self.check_object(schema, object, location, depth, out),
            Instance::Array(items) => {
                if let Some(item_schema) = schema.get("items") {
                    for (index, item) in items.iter().enumerate() {
                        location.push(index.to_string());
                        self.check(item_schema, item, location, depth + 1, out);
                        location.pop();
                    }
                }
            }
            _ => {}
        }

        // not, allOf, anyOf, oneOf --
        if let Some(not) = schema.get("not")
            && self.passes(not, instance, location, depth)
        {
            out.push(leaf(location, "'not' failed".to_owned()));
        }
        if let Some(Value::Array(all)) = schema.get("allOf") {
            for sub in all {
                self.check(sub, instance, location, depth + 1, out);
            }
        }
        if let Some(Value::Array(any)) = schema.get("anyOf") {
            let mut failures = Vec::new();
            let mut matched = false;
            for sub in any {
                let mut leaves = Vec::new();
                self.check(sub, instance, location, depth + 1, &mut leaves);
                if leaves.is_empty() {
                    matched = true;
                    break;
                }
                failures.extend(leaves);
            }
            if !matched {
                out.extend(failures);
            }
        }
        if let Some(Value::Array(one)) = schema.get("oneOf") {
            let mut failures = Vec::new();
            let mut matched: Option<usize> = None;
            for (index, sub) in one.iter().enumerate() {
                let mut leaves = Vec::new();
                self.check(sub, instance, location, depth + 1, &mut leaves);
                if !leaves.is_empty() {
                    if matched.is_none() {
                        failures.extend(leaves);
                    }
                    continue;
                }
                match matched {
                    None => matched = Some(index),
                    Some(first) => {
                        out.push(leaf(
                            location,
                            format!("'oneOf' failed, subschemas {first}, {index} matched"),
                        ));
                        break;
                    }
                }
            }
            if matched.is_none() {
                out.extend(failures);
            }
        }
    }

    fn passes(
        &self,
        schema: &Value,
        instance: &Instance,
        location: &[String],
        depth: usize,
    ) -> bool {
        let mut leaves = Vec::new();
        let mut location = location.to_vec();
        self.check(schema, instance, &mut location, depth + 1, &mut leaves);
        leaves.is_empty()
    }

    fn check_object(
        &self,
        schema: &Map<String, Value>,
        object: &BTreeMap<String, Instance>,
        location: &mut Vec<String>,
        depth: usize,
        out: &mut Vec<Leaf>,
    ) {
        // required --
        if let Some(Value::Array(required)) = schema.get("required") {
            let missing: Vec<&str> = required
                .iter()
                .filter_map(Value::as_str)
                .filter(|name| !object.contains_key(*name))
                .collect();
            match missing.as_slice() {
                [] => {}
                [one] => out.push(Leaf {
                    location: location.clone(),
                    message: format!("missing property {}", quote(one)),
                }),
                many => out.push(Leaf {
                    location: location.clone(),
                    message: format!("missing properties {}", join_quoted(many)),
                }),
            }
        }

        // properties, additionalProperties --
        let properties = schema.get("properties").and_then(Value::as_object);
        let additional = match schema.get("additionalProperties") {
            Some(additional) => Some(additional),
            None if self.strict && properties.is_some() => Some(&Value::Bool(false)),
            None => None,
        };
        let mut unknown = Vec::new();
        for (name, value) in object {
            let property = properties.and_then(|properties| properties.get(name));
            let sub = match (property, additional) {
                (Some(sub), _) => sub,
                (None, Some(Value::Bool(false))) => {
                    unknown.push(name.as_str());
                    continue;
                }
                (None, Some(sub)) => sub,
                (None, None) => continue,
            };
            location.push(name.clone());
            self.check(sub, value, location, depth + 1, out);
            location.pop();
        }
        if !unknown.is_empty() {
            out.push(Leaf {
                location: location.clone(),
                message: format!(
                    "additional properties {} not allowed",
                    join_quoted(&unknown)
                ),
            });
        }
    }
}

/// v6 `kind.Enum` text.
fn enum_message(values: &[Value]) -> String {
    if values
        .iter()
        .any(|value| matches!(value, Value::Array(_) | Value::Object(_)))
    {
        return "'enum' failed".to_owned();
    }
    match values {
        [one] => format!("value must be {}", display(one)),
        many => {
            let shown: Vec<String> = many.iter().map(display).collect();
            format!("value must be one of {}", shown.join(", "))
        }
    }
}

/// v6 `display` (primitives only): strings quoted, others as Go `%v`.
fn display(value: &Value) -> String {
    match value {
        Value::String(text) => quote(text),
        Value::Null => "<nil>".to_owned(),
        Value::Bool(flag) => flag.to_string(),
        Value::Number(number) => number.to_string(),
        Value::Array(_) | Value::Object(_) => "value".to_owned(),
    }
}

/// v6 `quote`: Go `%q`, then double quotes unescaped, single quotes
/// escaped, and the whole wrapped in single quotes.
fn quote(text: &str) -> String {
    let go = super::sdk::go_quote(text);
    let inner = go
        .get(1..go.len().saturating_sub(1))
        .unwrap_or_default()
        .replace("\\\"", "\"")
        .replace('\'', "\\'");
    format!("'{inner}'")
}

fn join_quoted(names: &[&str]) -> String {
    names
        .iter()
        .map(|name| quote(name))
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::yaml::parse_document;

    fn instance(yaml: &str) -> Instance {
        let document = parse_document(yaml).ok().flatten();
        document.map_or(Instance::Null, |document| Instance::from_node(&document))
    }

    fn messages(schema: Value, defs: Value, strict: bool, yaml: &str) -> Vec<(String, String)> {
        let defs = defs.as_object().cloned().unwrap_or_default();
        let validator = Validator {
            defs: &defs,
            strict,
        };
        validator
            .validate(&schema, &instance(yaml))
            .into_iter()
            .map(|leaf| (leaf.location.join("/"), leaf.message))
            .collect()
    }

    fn pairs(expected: &[(&str, &str)]) -> Vec<(String, String)> {
        expected
            .iter()
            .map(|(a, b)| ((*a).to_owned(), (*b).to_owned()))
            .collect()
    }

    #[test]
    fn yaml_scalars_convert_by_tag() {
        assert_eq!(
            instance(
                "a: invalid\nb: 3\nc: 1.5\nd: true\ne: null\nf: '3'\ng: ~\nh: yes\ni: !!str no\nj: 'off'\n"
            ),
            Instance::Object(BTreeMap::from([
                ("a".to_owned(), Instance::String("invalid".to_owned())),
                ("b".to_owned(), Instance::Number(3.0)),
                ("c".to_owned(), Instance::Number(1.5)),
                ("d".to_owned(), Instance::Bool(true)),
                ("e".to_owned(), Instance::Null),
                ("f".to_owned(), Instance::String("3".to_owned())),
                ("g".to_owned(), Instance::Null),
                ("h".to_owned(), Instance::Bool(true)),
                ("i".to_owned(), Instance::String("no".to_owned())),
                ("j".to_owned(), Instance::String("off".to_owned())),
            ]))
        );
    }

    #[test]
    fn type_errors_list_wanted_types_in_v6_order() {
        let schema = serde_json::json!({"type": ["integer", "null"]});
        assert_eq!(
            messages(schema, Value::Null, false, "invalid"),
            pairs(&[("", "got string, want null or integer")])
        );
        let schema = serde_json::json!({"type": ["object", "string", "boolean"]});
        assert_eq!(
            messages(schema, Value::Null, false, "[1]"),
            pairs(&[("", "got array, want boolean or string or object")])
        );
        let schema = serde_json::json!({"type": "integer"});
        assert!(messages(schema.clone(), Value::Null, false, "4").is_empty());
        assert_eq!(
            messages(schema, Value::Null, false, "4.5"),
            pairs(&[("", "got number, want integer")])
        );
    }

    #[test]
    fn required_comes_before_property_errors() {
        let defs = serde_json::json!({
            "Spec": {
                "type": ["object", "null"],
                "required": ["selector", "template"],
                "properties": {"replicas": {"type": ["integer", "null"]}},
            }
        });
        let schema = serde_json::json!({"properties": {"spec": {"$ref": "#/$defs/Spec"}}});
        assert_eq!(
            messages(schema, defs, false, "spec:\n  replicas: invalid\n"),
            pairs(&[
                ("spec", "missing properties 'selector', 'template'"),
                ("spec/replicas", "got string, want null or integer"),
            ])
        );
        let schema = serde_json::json!({"required": ["a"]});
        assert_eq!(
            messages(schema, Value::Null, false, "{}"),
            pairs(&[("", "missing property 'a'")])
        );
    }

    #[test]
    fn strict_closes_objects_with_properties() {
        let schema = serde_json::json!({
            "properties": {"a": {"type": "string"}, "m": {"additionalProperties": {"type": "string"}}},
        });
        let yaml = "a: x\nzz: 1\nb: 2\nm: {k: 1, j: v}\n";
        assert_eq!(
            messages(schema.clone(), Value::Null, true, yaml),
            pairs(&[
                ("m/k", "got number, want string"),
                ("", "additional properties 'b', 'zz' not allowed"),
            ])
        );
        assert_eq!(
            messages(schema, Value::Null, false, yaml),
            pairs(&[("m/k", "got number, want string")])
        );
    }

    #[test]
    fn enum_and_const_messages() {
        let schema = serde_json::json!({"enum": ["Always", "Never", "OnFailure"]});
        assert_eq!(
            messages(schema, Value::Null, false, "Sometimes"),
            pairs(&[("", "value must be one of 'Always', 'Never', 'OnFailure'")])
        );
        let schema = serde_json::json!({"enum": ["apps/v1"]});
        assert_eq!(
            messages(schema, Value::Null, false, "v1"),
            pairs(&[("", "value must be 'apps/v1'")])
        );
        let schema = serde_json::json!({"const": 3});
        assert_eq!(
            messages(schema, Value::Null, false, "4"),
            pairs(&[("", "value must be 3")])
        );
    }

    #[test]
    fn one_of_reports_branch_errors_or_ambiguity() {
        let schema = serde_json::json!({
            "oneOf": [{"type": ["string", "null"]}, {"type": ["integer", "null"]}]
        });
        assert!(messages(schema.clone(), Value::Null, false, "80").is_empty());
        assert!(messages(schema.clone(), Value::Null, false, "http").is_empty());
        assert_eq!(
            messages(schema.clone(), Value::Null, false, "{a: 1}"),
            pairs(&[
                ("", "got object, want null or string"),
                ("", "got object, want null or integer"),
            ])
        );
        assert_eq!(
            messages(schema, Value::Null, false, "~"),
            pairs(&[("", "'oneOf' failed, subschemas 0, 1 matched")])
        );
    }

    #[test]
    fn quoting_follows_v6() {
        assert_eq!(quote("it's"), "'it\\'s'");
        assert_eq!(quote("a\"b"), "'a\"b'");
        assert_eq!(quote("tab\t"), "'tab\\t'");
    }

    #[test]
    fn items_and_unknown_references() {
        let schema = serde_json::json!({"items": {"type": "string"}});
        assert_eq!(
            messages(schema, Value::Null, false, "[a, 1]"),
            pairs(&[("1", "got number, want string")])
        );
        let schema = serde_json::json!({"$ref": "#/$defs/Nope"});
        assert_eq!(
            messages(schema, Value::Null, false, "a"),
            pairs(&[("", "validation failed with '#/$defs/Nope'")])
        );
    }
}
