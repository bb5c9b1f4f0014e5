//! `gatekeeper` (kyaml legacy framework, family L): validates the items
//! against the OPA Gatekeeper ConstraintTemplates and constraints found
//! among them, as the catalog function does with gator's test library
//! (spec catalog-functions §11). Items pass through unchanged.
//!
//! The pipeline follows gator: every `templates.gatekeeper.sh`
//! ConstraintTemplate is checked and its Rego compiled (one `regorus`
//! engine per template, so templates sharing a package name do not clash),
//! then every `constraints.gatekeeper.sh` object is bound to the template of
//! its kind, then every item (templates and constraints included) is
//! reviewed against every constraint whose `spec.match` selects it. The
//! template's `violation` rule sees `input.review` (an AdmissionRequest
//! built from the item, as gator builds it) and `input.parameters` (the
//! constraint's `spec.parameters`, `{}` when absent); `data.inventory`
//! holds every item, as with gator's referential data.
//!
//! Each violation becomes one result: `<msg>\nviolatedConstraint: <name>`,
//! severity from the constraint's `enforcementAction` (`dryrun` → info,
//! `warn` → warning, anything else → error), the item's reference and file.
//! Results are sorted as the function sorts them (file path, index,
//! severity, then text). Any error-severity result fails the function
//! (exit 1); so does an invalid template or constraint, reported as a
//! single error result. On failure the framework prints every result as a
//! kyaml CLI line on stderr (`cli_line`).
//!
//! Not covered: CEL (`K8sNativeValidation`) templates, validation of
//! `spec.parameters` against the template's schema, gator's expansion
//! templates and mutators.

use std::collections::{BTreeMap, BTreeSet};

use regorus::{Engine, Value as RegoValue};
use serde_json::{Map, Value};

use super::jsonschema::Instance;
use super::sdk::{self, FileRef, FnResult, Outcome, ResourceList, ResourceRef, Severity};

/// API group of ConstraintTemplates.
const TEMPLATES_GROUP: &str = "templates.gatekeeper.sh";

/// API group of constraints.
const CONSTRAINTS_GROUP: &str = "constraints.gatekeeper.sh";

/// The only target gator registers.
const TARGET: &str = "admission.k8s.gatekeeper.sh";

/// Template versions gator's scheme knows.
const TEMPLATE_VERSIONS: [&str; 3] = ["v1", "v1beta1", "v1alpha1"];

/// Runs gatekeeper on a parsed input.
pub(crate) fn run(input: ResourceList) -> Outcome {
    let results = match validate(&input) {
        Ok(results) => results,
        Err(message) => vec![FnResult::error(message)],
    };
    let failed = results
        .iter()
        .any(|result| result.severity == Some(Severity::Error));
    let mut outcome = Outcome::kyaml(input, Vec::new());
    if failed {
        // The function returns its Result as the error, which main prints
        // with a line break (the host drops it again).
        let lines: Vec<String> = results.iter().map(cli_line).collect();
        outcome.stderr = format!("{}\n", lines.join("\n\n"));
        outcome.exit_code = 1;
    }
    outcome.results = results;
    outcome
}

/// kyaml v0.10's `ResultItem.String()` (the catalog's gatekeeper builds on
/// it): the identifier's non-empty parts joined by `/` (left out when all
/// are empty: an invalid template's result has no reference), then the
/// field path, which gatekeeper never sets, and the message: hence the
/// catalog's `apps/v1/Deployment/nginx-deploy : Containers must not run
/// as root`, a space before the colon.
fn cli_line(result: &FnResult) -> String {
    let severity = match result.severity {
        Some(Severity::Error) => "error",
        Some(Severity::Warning) => "warning",
        Some(Severity::Info) | None => "info",
    };
    let reference = result.resource_ref.clone().unwrap_or_default();
    let parts: Vec<&str> = [
        &reference.api_version,
        &reference.kind,
        &reference.namespace,
        &reference.name,
    ]
    .into_iter()
    .map(String::as_str)
    .filter(|part| !part.is_empty())
    .collect();
    if parts.is_empty() {
        format!("[{severity}]: {}", result.message)
    } else {
        format!("[{severity}] {} : {}", parts.join("/"), result.message)
    }
}

/// One item as gator sees it (its JSON form and the parts matching uses).
struct Object {
    json: Value,
    api_version: String,
    group: String,
    version: String,
    kind: String,
    name: String,
    namespace: String,
    reference: ResourceRef,
    file: Option<FileRef>,
}

impl Object {
    fn new(item: &crate::yaml::node::Node) -> Object {
        let json = to_json(&Instance::from_node(item));
        let text = |path: &[&str]| {
            path.iter()
                .try_fold(&json, |value, key| value.get(key))
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned()
        };
        let api_version = text(&["apiVersion"]);
        let (group, version) = sdk::split_api_version(&api_version);
        let (group, version) = (group.to_owned(), version.to_owned());
        let file = sdk::file_path(item).map(|path| FileRef {
            path: path.to_owned(),
            index: sdk::file_index(item).unwrap_or(0),
        });
        Object {
            kind: text(&["kind"]),
            name: text(&["metadata", "name"]),
            namespace: text(&["metadata", "namespace"]),
            reference: ResourceRef::of(item),
            api_version,
            group,
            version,
            file,
            json,
        }
    }

    fn labels(&self) -> BTreeMap<String, String> {
        string_map(self.json.pointer("/metadata/labels"))
    }

    fn is_namespace(&self) -> bool {
        self.kind == "Namespace" && self.group.is_empty()
    }

    /// Go's `GroupVersionKind.String()`.
    fn gvk(&self) -> String {
        format!("{}/{}, Kind={}", self.group, self.version, self.kind)
    }
}

/// Unstructured `NestedStringMap`: all values must be strings, or there
/// are no labels at all.
fn string_map(value: Option<&Value>) -> BTreeMap<String, String> {
    let Some(Value::Object(map)) = value else {
        return BTreeMap::new();
    };
    map.iter()
        .map(|(key, value)| value.as_str().map(|text| (key.clone(), text.to_owned())))
        .collect::<Option<BTreeMap<_, _>>>()
        .unwrap_or_default()
}

/// The JSON value of an instance; integral numbers become integers, as Go
/// decodes them into unstructured objects.
fn to_json(instance: &Instance) -> Value {
    match instance {
        Instance::Null => Value::Null,
        Instance::Bool(value) => Value::Bool(*value),
        Instance::Number(number) => {
            // 2^53: beyond it an f64 no longer holds every integer.
            if number.fract() == 0.0 && number.abs() < 9_007_199_254_740_992.0 {
                Value::from(*number as i64)
            } else {
                serde_json::Number::from_f64(*number)
                    .map_or_else(|| Value::String(number.to_string()), Value::Number)
            }
        }
        Instance::String(text) => Value::String(text.clone()),
        Instance::Array(items) => Value::Array(items.iter().map(to_json).collect()),
        Instance::Object(fields) => Value::Object(
            fields
                .iter()
                .map(|(key, value)| (key.clone(), to_json(value)))
                .collect(),
        ),
    }
}

/// A compiled ConstraintTemplate.
struct Template {
    engine: Engine,
    /// `data.<package>.violation`.
    rule: String,
}

/// A constraint bound to its template.
struct Constraint {
    name: String,
    /// Lower-cased kind: the key of its template.
    template: String,
    action: String,
    parameters: RegoValue,
    matcher: Option<Matcher>,
}

/// The whole validation: results, or the error that stops gator.
fn validate(input: &ResourceList) -> Result<Vec<FnResult>, String> {
    let objects: Vec<Object> = input.items.iter().map(Object::new).collect();
    let inventory = RegoValue::from(inventory(&objects));
    let mut templates: BTreeMap<String, Template> = BTreeMap::new();
    for object in &objects {
        if object.group == TEMPLATES_GROUP && object.kind == "ConstraintTemplate" {
            let (key, template) = compile_template(object, &inventory)?;
            templates.insert(key, template);
        }
    }
    let mut constraints = Vec::new();
    for object in &objects {
        if object.group == CONSTRAINTS_GROUP {
            constraints.push(bind_constraint(object, &templates)?);
        }
    }
    let namespaces: BTreeMap<&str, &Object> = objects
        .iter()
        .filter(|object| object.is_namespace())
        .map(|object| (object.name.as_str(), object))
        .collect();
    let mut violations = Vec::new();
    for (index, object) in objects.iter().enumerate() {
        let namespace = namespace_for(object, &namespaces);
        let review = review(object);
        for constraint in &constraints {
            let selected = match &constraint.matcher {
                Some(matcher) => matcher.matches(object, namespace.as_ref()),
                None => Ok(true),
            };
            let selected = selected.map_err(|err| {
                format!(
                    "reviewing {} {}/{}: failed to run Match criteria: {err}",
                    object.gvk(),
                    object.namespace,
                    object.name
                )
            })?;
            if !selected {
                continue;
            }
            let Some(template) = templates.get_mut(&constraint.template) else {
                continue;
            };
            let messages = evaluate(template, &review, &constraint.parameters).map_err(|err| {
                format!(
                    "reviewing {} {}/{}: {err}",
                    object.gvk(),
                    object.namespace,
                    object.name
                )
            })?;
            for message in messages {
                violations.push((constraint.action.clone(), message, constraint, index));
            }
        }
    }
    // gator orders its results by enforcement action, then message.
    violations.sort_by(|a, b| (&a.0, &a.1).cmp(&(&b.0, &b.1)));
    let mut results: Vec<FnResult> = violations
        .into_iter()
        .filter_map(|(action, message, constraint, index)| {
            let object = objects.get(index)?;
            let severity = match action.as_str() {
                "dryrun" => Severity::Info,
                "warn" => Severity::Warning,
                _ => Severity::Error,
            };
            Some(FnResult {
                message: format!("{message}\nviolatedConstraint: {}", constraint.name),
                severity: Some(severity),
                resource_ref: Some(object.reference.clone()),
                field: None,
                file: object.file.clone(),
            })
        })
        .collect();
    results.sort_by_cached_key(sort_key);
    Ok(results)
}

/// The function's result order: file path, index, severity, then the Go
/// rendering of reference and message (`resource-ref:%s,field:%s,…`).
fn sort_key(result: &FnResult) -> (String, i64, u8, String) {
    let file = result.file.clone().unwrap_or_default();
    let rank = match result.severity {
        Some(Severity::Error) => 0,
        Some(Severity::Warning) => 1,
        Some(Severity::Info) => 2,
        None => 3,
    };
    let reference = result.resource_ref.clone().unwrap_or_default();
    let text = format!(
        "resource-ref:{{{{{} {}}} {{{} {}}}}},field:{{  }},message:{}",
        reference.api_version, reference.kind, reference.name, reference.namespace, result.message
    );
    (file.path, file.index, rank, text)
}

/// `data.inventory` as gator fills it: cluster-scoped objects under
/// `cluster/<apiVersion>/<kind>/<name>`, namespaced ones under
/// `namespace/<namespace>/<apiVersion>/<kind>/<name>`.
fn inventory(objects: &[Object]) -> Value {
    type ByName = BTreeMap<String, Value>;
    type ByKind = BTreeMap<String, ByName>;
    type ByVersion = BTreeMap<String, ByKind>;
    let mut cluster: ByVersion = BTreeMap::new();
    let mut namespaced: BTreeMap<String, ByVersion> = BTreeMap::new();
    for object in objects {
        let root = if object.namespace.is_empty() {
            &mut cluster
        } else {
            namespaced.entry(object.namespace.clone()).or_default()
        };
        root.entry(object.api_version.clone())
            .or_default()
            .entry(object.kind.clone())
            .or_default()
            .insert(object.name.clone(), object.json.clone());
    }
    serde_json::json!({"inventory": {"cluster": cluster, "namespace": namespaced}})
}

/// Checks a ConstraintTemplate and compiles its Rego; returns the key
/// constraints find it by (the lower-cased CRD kind).
fn compile_template(object: &Object, inventory: &RegoValue) -> Result<(String, Template), String> {
    let name = &object.name;
    if !TEMPLATE_VERSIONS.contains(&object.version.as_str()) {
        return Err(format!(
            "converting unstructured {name:?} to template: no kind \"ConstraintTemplate\" is \
             registered for version {:?}",
            object.api_version
        ));
    }
    let invalid =
        |detail: String| format!("adding template {name:?}: invalid ConstraintTemplate: {detail}");
    let spec = object.json.get("spec");
    let kind = spec
        .and_then(|spec| spec.pointer("/crd/spec/names/kind"))
        .and_then(Value::as_str)
        .unwrap_or_default();
    if kind.is_empty() {
        return Err(invalid(format!(
            "ConstraintTemplate {name:?} does not specify CRD Kind"
        )));
    }
    if !name.eq_ignore_ascii_case(kind) {
        return Err(invalid(format!(
            "the ConstraintTemplate's name {name:?} is not equal to the lowercase of CRD's Kind: {:?}",
            kind.to_lowercase()
        )));
    }
    let targets = spec
        .and_then(|spec| spec.get("targets"))
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    let target = match targets {
        [target] => target,
        [] => {
            return Err(format!(
                "adding template {name:?}: failed to validate targets for template {name}: \
                 invalid ConstraintTemplate: no targets specified: ConstraintTemplate must \
                 specify one target"
            ));
        }
        _ => {
            return Err(format!(
                "adding template {name:?}: failed to validate targets for template {name}: \
                 invalid ConstraintTemplate: multi-target templates are not currently supported"
            ));
        }
    };
    let target_name = target
        .get("target")
        .and_then(Value::as_str)
        .unwrap_or_default();
    if target_name != TARGET {
        return Err(format!(
            "adding template {name:?}: failed to validate targets for template {name}: invalid \
             ConstraintTemplate: target {target_name:?} not recognized, known targets [{TARGET}]"
        ));
    }
    let (rego, libs, v1) = rego_source(target).ok_or_else(|| {
        format!("adding template {name:?}: no Rego source: only Rego templates are supported")
    })?;
    let mut engine = Engine::new();
    engine.set_rego_v0(!v1);
    // OPA turns a failing builtin into an undefined expression.
    engine.set_strict_builtin_errors(false);
    let module = |err: String| format!("adding template {name:?}: invalid module: {err}");
    let source_path = format!("{name}.rego");
    let package = engine
        .add_policy(source_path.clone(), rego)
        .map_err(|err| module(err.to_string()))?;
    for (index, lib) in libs.into_iter().enumerate() {
        engine
            .add_policy(format!("{name}.lib{index}.rego"), lib)
            .map_err(|err| module(err.to_string()))?;
    }
    let declared = engine
        .has_declared_rule_rooted_at(&source_path, "violation")
        .unwrap_or(false);
    if !declared {
        return Err(invalid(
            "the template's Rego must define a rule named \"violation\"".to_owned(),
        ));
    }
    engine
        .add_data(inventory.clone())
        .map_err(|err| format!("adding template {name:?}: {err}"))?;
    Ok((
        kind.to_lowercase(),
        Template {
            engine,
            rule: format!("{package}.violation"),
        },
    ))
}

/// The template's Rego: `rego` and `libs` of the target (Rego v0), or the
/// `Rego` engine entry of `code` (v1 when its `version` says so).
fn rego_source(target: &Value) -> Option<(String, Vec<String>, bool)> {
    let strings = |value: Option<&Value>| -> Vec<String> {
        value
            .and_then(Value::as_array)
            .map(|items| {
                items
                    .iter()
                    .filter_map(Value::as_str)
                    .map(str::to_owned)
                    .collect()
            })
            .unwrap_or_default()
    };
    let code = target
        .get("code")
        .and_then(Value::as_array)
        .and_then(|code| {
            code.iter()
                .find(|entry| entry.get("engine").and_then(Value::as_str) == Some("Rego"))
        })
        .and_then(|entry| entry.get("source"));
    if let Some(source) = code
        && let Some(rego) = source.get("rego").and_then(Value::as_str)
    {
        let v1 = source.get("version").and_then(Value::as_str) == Some("v1");
        return Some((rego.to_owned(), strings(source.get("libs")), v1));
    }
    let rego = target.get("rego").and_then(Value::as_str)?;
    Some((rego.to_owned(), strings(target.get("libs")), false))
}

/// Binds a constraint to its template and reads its settings.
fn bind_constraint(
    object: &Object,
    templates: &BTreeMap<String, Template>,
) -> Result<Constraint, String> {
    let name = &object.name;
    let key = object.kind.to_lowercase();
    if !templates.contains_key(&key) {
        let known: Vec<&str> = templates.keys().map(String::as_str).collect();
        return Err(format!(
            "adding constraint {name:?}: missing ConstraintTemplate: Constraint kind {:?} is not \
             recognized, known kinds [{}]",
            object.kind,
            known.join(" ")
        ));
    }
    let spec = object.json.get("spec");
    let matcher = match spec.and_then(|spec| spec.get("match")) {
        Some(Value::Object(fields)) => Some(
            Matcher::from_json(fields)
                .map_err(|err| format!("adding constraint {name:?}: {err}"))?,
        ),
        _ => None,
    };
    let action = spec
        .and_then(|spec| spec.get("enforcementAction"))
        .and_then(Value::as_str)
        .filter(|action| !action.is_empty())
        .unwrap_or("deny")
        .to_owned();
    let parameters = match spec.and_then(|spec| spec.get("parameters")) {
        Some(Value::Null) | None => Value::Object(Map::new()),
        Some(parameters) => parameters.clone(),
    };
    Ok(Constraint {
        name: name.clone(),
        template: key,
        action,
        parameters: RegoValue::from(parameters),
        matcher,
    })
}

/// The AdmissionRequest gator builds from an item (Go field names; empty
/// fields as `encoding/json` writes them).
fn review(object: &Object) -> RegoValue {
    let mut kind = Map::new();
    kind.insert("group".to_owned(), Value::from(object.group.as_str()));
    kind.insert("version".to_owned(), Value::from(object.version.as_str()));
    kind.insert("kind".to_owned(), Value::from(object.kind.as_str()));
    let mut resource = Map::new();
    for key in ["group", "version", "resource"] {
        resource.insert(key.to_owned(), Value::from(""));
    }
    let mut review = Map::new();
    review.insert("uid".to_owned(), Value::from(""));
    review.insert("kind".to_owned(), Value::Object(kind));
    review.insert("resource".to_owned(), Value::Object(resource));
    if !object.name.is_empty() {
        review.insert("name".to_owned(), Value::from(object.name.as_str()));
    }
    if !object.namespace.is_empty() {
        review.insert(
            "namespace".to_owned(),
            Value::from(object.namespace.as_str()),
        );
    }
    review.insert("operation".to_owned(), Value::from(""));
    review.insert("userInfo".to_owned(), Value::Object(Map::new()));
    review.insert("object".to_owned(), object.json.clone());
    review.insert("oldObject".to_owned(), Value::Null);
    review.insert("options".to_owned(), Value::Null);
    RegoValue::from(Value::Object(review))
}

/// Evaluates a template's `violation` rule for one review and constraint;
/// returns the messages of the violations.
fn evaluate(
    template: &mut Template,
    review: &RegoValue,
    parameters: &RegoValue,
) -> Result<Vec<String>, String> {
    let mut input = BTreeMap::new();
    input.insert(RegoValue::from("review"), review.clone());
    input.insert(RegoValue::from("parameters"), parameters.clone());
    template.engine.set_input(RegoValue::from(input));
    let value = template
        .engine
        .eval_rule(template.rule.clone())
        .map_err(|err| err.to_string())?;
    let mut messages = Vec::new();
    let violations: Vec<RegoValue> = match &value {
        RegoValue::Undefined => Vec::new(),
        RegoValue::Set(set) => set.iter().cloned().collect(),
        RegoValue::Array(items) => items.iter().cloned().collect(),
        other => vec![other.clone()],
    };
    for violation in violations {
        match &violation["msg"] {
            RegoValue::Undefined => {}
            RegoValue::String(message) => messages.push(message.to_string()),
            other => {
                return Err(format!(
                    "violation msg must be a string, got {}",
                    other.to_json_str().unwrap_or_default()
                ));
            }
        }
    }
    Ok(messages)
}

/// The namespace gator attaches to an item: an empty one for
/// cluster-scoped items, the item's Namespace if the input has it, a bare
/// `default`, or none.
fn namespace_for(object: &Object, namespaces: &BTreeMap<&str, &Object>) -> Option<Namespace> {
    if object.namespace.is_empty() {
        return Some(Namespace::default());
    }
    if let Some(namespace) = namespaces.get(object.namespace.as_str()) {
        return Some(Namespace {
            name: namespace.name.clone(),
            labels: namespace.labels(),
        });
    }
    (object.namespace == "default").then(|| Namespace {
        name: "default".to_owned(),
        labels: BTreeMap::new(),
    })
}

/// What matching needs of a Namespace.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct Namespace {
    name: String,
    labels: BTreeMap<String, String>,
}

/// A constraint's `spec.match` (Gatekeeper's match criteria).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct Matcher {
    /// `kinds`: (apiGroups, kinds) pairs.
    kinds: Vec<(Vec<String>, Vec<String>)>,
    scope: String,
    namespaces: Vec<String>,
    excluded_namespaces: Vec<String>,
    label_selector: Option<Selector>,
    namespace_selector: Option<Selector>,
    name: String,
    source: String,
}

impl Matcher {
    /// Reads `spec.match`; an invalid label selector is an error, as in the
    /// target's constraint validation.
    fn from_json(fields: &Map<String, Value>) -> Result<Matcher, String> {
        let strings = |value: Option<&Value>| -> Vec<String> {
            value
                .and_then(Value::as_array)
                .map(|items| {
                    items
                        .iter()
                        .filter_map(Value::as_str)
                        .map(str::to_owned)
                        .collect()
                })
                .unwrap_or_default()
        };
        let text = |key: &str| {
            fields
                .get(key)
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned()
        };
        let kinds = fields
            .get("kinds")
            .and_then(Value::as_array)
            .map(|kinds| {
                kinds
                    .iter()
                    .map(|entry| (strings(entry.get("apiGroups")), strings(entry.get("kinds"))))
                    .collect()
            })
            .unwrap_or_default();
        let selector = |key: &str| match fields.get(key) {
            Some(Value::Object(selector)) => Selector::from_json(selector).map(Some),
            _ => Ok(None),
        };
        Ok(Matcher {
            kinds,
            scope: text("scope"),
            namespaces: strings(fields.get("namespaces")),
            excluded_namespaces: strings(fields.get("excludedNamespaces")),
            label_selector: selector("labelSelector")?,
            namespace_selector: selector("namespaceSelector")?,
            name: text("name"),
            source: text("source"),
        })
    }

    /// Gatekeeper's `Matches`: every criterion must hold.
    fn matches(&self, object: &Object, namespace: Option<&Namespace>) -> Result<bool, String> {
        Ok(self.kinds_match(object)
            && self.scope_match(object, namespace)
            && self.namespaces_match(object, namespace)
            && self.excluded_namespaces_match(object, namespace)
            && self
                .label_selector
                .as_ref()
                .is_none_or(|selector| selector.matches(&object.labels()))
            && self.namespace_selector_match(object, namespace)?
            && (self.name.is_empty() || wildcard_matches(&self.name, &object.name))
            && self.source_match()?)
    }

    fn kinds_match(&self, object: &Object) -> bool {
        let contains = |set: &[String], element: &str| {
            set.is_empty() || set.iter().any(|entry| entry == "*" || entry == element)
        };
        self.kinds.is_empty()
            || self.kinds.iter().any(|(groups, kinds)| {
                contains(kinds, &object.kind) && contains(groups, &object.group)
            })
    }

    fn scope_match(&self, object: &Object, namespace: Option<&Namespace>) -> bool {
        let has_namespace = !object.namespace.is_empty() || namespace.is_some();
        match self.scope.as_str() {
            "Cluster" => object.is_namespace() || !has_namespace,
            "Namespaced" => !object.is_namespace() && has_namespace,
            // Anything else, typos included, matches every scope.
            _ => true,
        }
    }

    /// The namespace the (excluded) namespaces lists are checked against;
    /// `None` when a cluster-scoped object cannot be disqualified.
    fn namespace_name<'a>(object: &'a Object, namespace: Option<&'a Namespace>) -> Option<&'a str> {
        if object.is_namespace() {
            Some(&object.name)
        } else if let Some(namespace) = namespace {
            Some(&namespace.name)
        } else if !object.namespace.is_empty() {
            Some(&object.namespace)
        } else {
            None
        }
    }

    fn namespaces_match(&self, object: &Object, namespace: Option<&Namespace>) -> bool {
        if self.namespaces.is_empty() {
            return true;
        }
        Matcher::namespace_name(object, namespace).is_none_or(|name| {
            self.namespaces
                .iter()
                .any(|pattern| wildcard_matches(pattern, name))
        })
    }

    fn excluded_namespaces_match(&self, object: &Object, namespace: Option<&Namespace>) -> bool {
        if self.excluded_namespaces.is_empty() {
            return true;
        }
        Matcher::namespace_name(object, namespace).is_none_or(|name| {
            !self
                .excluded_namespaces
                .iter()
                .any(|pattern| wildcard_matches(pattern, name))
        })
    }

    fn namespace_selector_match(
        &self,
        object: &Object,
        namespace: Option<&Namespace>,
    ) -> Result<bool, String> {
        let Some(selector) = &self.namespace_selector else {
            return Ok(true);
        };
        if object.is_namespace() {
            return Ok(selector.matches(&object.labels()));
        }
        if namespace.is_none() && object.namespace.is_empty() {
            return Ok(true);
        }
        match namespace {
            Some(namespace) => Ok(selector.matches(&namespace.labels)),
            None => Err(
                "namespace selector for namespace-scoped object but missing Namespace".to_owned(),
            ),
        }
    }

    fn source_match(&self) -> Result<bool, String> {
        // gator reviews original objects only.
        match self.source.as_str() {
            "" | "All" | "Original" => Ok(true),
            "Generated" => Ok(false),
            other => Err(format!("invalid source field {other:?}")),
        }
    }
}

/// Gatekeeper's wildcard: `*` at the start, the end or both; otherwise an
/// exact match.
fn wildcard_matches(pattern: &str, candidate: &str) -> bool {
    match (pattern.strip_prefix('*'), pattern.strip_suffix('*')) {
        (Some(rest), Some(_)) => {
            let middle = rest.strip_suffix('*').unwrap_or(rest);
            candidate.contains(middle)
        }
        (Some(suffix), None) => candidate.ends_with(suffix),
        (None, Some(prefix)) => candidate.starts_with(prefix),
        (None, None) => pattern == candidate,
    }
}

/// A Kubernetes label selector (`matchLabels` and `matchExpressions`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct Selector {
    requirements: Vec<Requirement>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Requirement {
    In(String, BTreeSet<String>),
    NotIn(String, BTreeSet<String>),
    Exists(String),
    DoesNotExist(String),
}

impl Selector {
    /// Reads a selector; operator and value errors are reported as the
    /// Kubernetes selector validation words them (with the field path the
    /// target uses for both selectors).
    fn from_json(fields: &Map<String, Value>) -> Result<Selector, String> {
        let mut requirements = Vec::new();
        if let Some(Value::Object(labels)) = fields.get("matchLabels") {
            for (key, value) in labels {
                let value = value.as_str().unwrap_or_default().to_owned();
                requirements.push(Requirement::In(key.clone(), BTreeSet::from([value])));
            }
        }
        let mut errors = Vec::new();
        let expressions = fields
            .get("matchExpressions")
            .and_then(Value::as_array)
            .map(Vec::as_slice)
            .unwrap_or_default();
        for (index, expression) in expressions.iter().enumerate() {
            let path = format!("spec.labelSelector.matchExpressions[{index}]");
            let key = expression
                .get("key")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned();
            let operator = expression
                .get("operator")
                .and_then(Value::as_str)
                .unwrap_or_default();
            let values: BTreeSet<String> = expression
                .get("values")
                .and_then(Value::as_array)
                .map(|values| {
                    values
                        .iter()
                        .filter_map(Value::as_str)
                        .map(str::to_owned)
                        .collect()
                })
                .unwrap_or_default();
            match operator {
                "In" | "NotIn" if values.is_empty() => errors.push(format!(
                    "{path}.values: Required value: must be specified when `operator` is 'In' or 'NotIn'"
                )),
                "Exists" | "DoesNotExist" if !values.is_empty() => errors.push(format!(
                    "{path}.values: Forbidden: may not be specified when `operator` is 'Exists' or 'DoesNotExist'"
                )),
                "In" => requirements.push(Requirement::In(key, values)),
                "NotIn" => requirements.push(Requirement::NotIn(key, values)),
                "Exists" => requirements.push(Requirement::Exists(key)),
                "DoesNotExist" => requirements.push(Requirement::DoesNotExist(key)),
                other => errors.push(format!(
                    "{path}.operator: Invalid value: {other:?}: not a valid selector operator"
                )),
            }
        }
        match errors.as_slice() {
            [] => Ok(Selector { requirements }),
            [one] => Err(one.clone()),
            many => Err(format!("[{}]", many.join(", "))),
        }
    }

    fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.requirements
            .iter()
            .all(|requirement| match requirement {
                Requirement::In(key, values) => {
                    labels.get(key).is_some_and(|value| values.contains(value))
                }
                Requirement::NotIn(key, values) => {
                    labels.get(key).is_none_or(|value| !values.contains(value))
                }
                Requirement::Exists(key) => labels.contains_key(key),
                Requirement::DoesNotExist(key) => !labels.contains_key(key),
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn engine(rego: &str) -> Engine {
        let mut engine = Engine::new();
        engine.set_rego_v0(true);
        engine.set_strict_builtin_errors(false);
        let added = engine.add_policy("t.rego".to_owned(), rego.to_owned());
        assert!(added.is_ok(), "{added:?}");
        engine
    }

    #[test]
    fn sprintf_prints_sets_as_opa_does() {
        let mut engine = engine(
            "package t\n\
             one = sprintf(\"%v\", [{\"private_key\"}])\n\
             two = sprintf(\"%v\", [{\"b\", \"a\"}])\n\
             arr = sprintf(\"%v\", [[\"x\", 1]])\n\
             obj = sprintf(\"%v\", [{\"k\": \"v\"}])\n",
        );
        let mut value = |rule: &str| {
            engine
                .eval_rule(format!("data.t.{rule}"))
                .map(|value| value.as_string().map(|s| s.to_string()).unwrap_or_default())
                .unwrap_or_default()
        };
        assert_eq!(value("one"), r#"{"private_key"}"#);
        assert_eq!(value("two"), r#"{"a", "b"}"#);
        assert_eq!(value("arr"), r#"["x", 1]"#);
        assert_eq!(value("obj"), r#"{"k": "v"}"#);
    }

    #[test]
    fn violation_rule_is_detected() {
        let engine = engine("package t\nviolation[{\"msg\": \"m\"}] { true }\n");
        assert_eq!(
            engine
                .has_declared_rule_rooted_at("t.rego", "violation")
                .ok(),
            Some(true)
        );
        let engine = engine_without_violation();
        assert_eq!(
            engine
                .has_declared_rule_rooted_at("t.rego", "violation")
                .ok(),
            Some(false)
        );
    }

    fn engine_without_violation() -> Engine {
        engine("package t\ndeny[\"m\"] { true }\n")
    }

    #[test]
    fn wildcards_match_prefix_suffix_and_infix() {
        assert!(wildcard_matches("kube-*", "kube-system"));
        assert!(wildcard_matches("*-system", "kube-system"));
        assert!(wildcard_matches("*be-sys*", "kube-system"));
        assert!(wildcard_matches("*", ""));
        assert!(!wildcard_matches("kube", "kube-system"));
        assert!(wildcard_matches("prod", "prod"));
    }

    #[test]
    fn selectors_follow_kubernetes_semantics() {
        let json = serde_json::json!({
            "matchLabels": {"app": "web"},
            "matchExpressions": [
                {"key": "tier", "operator": "NotIn", "values": ["db"]},
                {"key": "owner", "operator": "Exists"}
            ]
        });
        let Some(fields) = json.as_object() else {
            panic!("object");
        };
        let selector = Selector::from_json(fields);
        assert!(selector.is_ok(), "{selector:?}");
        let Ok(selector) = selector else { return };
        let labels = |pairs: &[(&str, &str)]| {
            pairs
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect::<BTreeMap<_, _>>()
        };
        assert!(selector.matches(&labels(&[("app", "web"), ("owner", "me")])));
        assert!(!selector.matches(&labels(&[("app", "web"), ("owner", "me"), ("tier", "db")])));
        assert!(!selector.matches(&labels(&[("app", "web")])));
    }

    #[test]
    fn selector_errors_use_validation_wording() {
        let json = serde_json::json!({
            "matchExpressions": [{"key": "a", "operator": "In"}, {"key": "b", "operator": "Has"}]
        });
        let Some(fields) = json.as_object() else {
            panic!("object");
        };
        assert_eq!(
            Selector::from_json(fields),
            Err(
                "[spec.labelSelector.matchExpressions[0].values: Required value: must be \
                 specified when `operator` is 'In' or 'NotIn', \
                 spec.labelSelector.matchExpressions[1].operator: Invalid value: \"Has\": not a \
                 valid selector operator]"
                    .to_owned()
            )
        );
    }

    /// The catalog's own tests (`tests/gatekeeper/v1beta1-template`,
    /// `examples/gatekeeper-disallow-root-user`) expect the function's
    /// stderr `[error] apps/v1/Deployment/nginx-deploy : ...`: empty parts
    /// are left out, the empty field path leaves its space, and a result
    /// without a reference has no identifier at all. (kpt's own `Results:`
    /// lines print the same result without the space: that is kpt's
    /// printer, not the function.)
    #[test]
    fn cli_lines_follow_kyaml_v0_10() {
        let result = FnResult {
            resource_ref: Some(ResourceRef {
                api_version: "apps/v1".to_owned(),
                kind: "Deployment".to_owned(),
                name: "nginx-deploy".to_owned(),
                namespace: String::new(),
            }),
            ..FnResult::error("bad\nviolatedConstraint: c")
        };
        assert_eq!(
            cli_line(&result),
            "[error] apps/v1/Deployment/nginx-deploy : bad\nviolatedConstraint: c"
        );
        assert_eq!(cli_line(&FnResult::error("oops")), "[error]: oops");
    }
}

#[cfg(test)]
mod pipeline_tests {
    use super::*;

    /// Runs the function on a ResourceList and returns the result messages
    /// (first line) with their severities, and the exit code.
    fn outcome(items_yaml: &str) -> (Vec<(String, String)>, i32) {
        let mut wire =
            String::from("apiVersion: config.kubernetes.io/v1\nkind: ResourceList\nitems:\n");
        for line in items_yaml.lines() {
            wire.push_str("  ");
            wire.push_str(line);
            wire.push('\n');
        }
        let input = ResourceList::parse(wire.as_bytes());
        assert!(input.is_ok(), "{input:?}");
        let Ok(input) = input else {
            return (Vec::new(), -1);
        };
        let outcome = run(input);
        let results = outcome
            .results
            .iter()
            .map(|result| {
                let severity = match result.severity {
                    Some(Severity::Error) => "error",
                    Some(Severity::Warning) => "warning",
                    Some(Severity::Info) => "info",
                    None => "",
                };
                (severity.to_owned(), result.message.clone())
            })
            .collect();
        (results, outcome.exit_code)
    }

    const UNIQUE_TEMPLATE: &str = r#"- apiVersion: templates.gatekeeper.sh/v1beta1
  kind: ConstraintTemplate
  metadata:
    name: uniquelabel
  spec:
    crd:
      spec:
        names:
          kind: UniqueLabel
    targets:
    - target: admission.k8s.gatekeeper.sh
      libs:
      - |
        package lib.helpers
        label(obj, key) = value { value := obj.metadata.labels[key] }
      rego: |
        package uniquelabel
        import data.lib.helpers

        make_apiversion(kind) = apiVersion {
          g := kind.group
          v := kind.version
          g != ""
          apiVersion = sprintf("%v/%v", [g, v])
        }
        make_apiversion(kind) = apiVersion {
          kind.group == ""
          apiVersion = kind.version
        }

        violation[{"msg": msg}] {
          key := input.parameters.key
          value := helpers.label(input.review.object, key)
          ns := input.review.object.metadata.namespace
          other := data.inventory.namespace[ns][make_apiversion(input.review.kind)][input.review.kind.kind][name]
          name != input.review.object.metadata.name
          helpers.label(other, key) == value
          msg := sprintf("%v %q shares label %v=%v with %v", [input.review.kind.kind, input.review.object.metadata.name, key, value, name])
        }
"#;

    #[test]
    fn inventory_and_libs_are_visible_to_templates() {
        let items = format!(
            "{UNIQUE_TEMPLATE}{}",
            r#"- apiVersion: constraints.gatekeeper.sh/v1beta1
  kind: UniqueLabel
  metadata:
    name: unique-app
  spec:
    match:
      kinds:
      - apiGroups: [""]
        kinds: [ConfigMap]
    parameters:
      key: app
- apiVersion: v1
  kind: ConfigMap
  metadata: {name: a, namespace: shop, labels: {app: web}}
- apiVersion: v1
  kind: ConfigMap
  metadata: {name: b, namespace: shop, labels: {app: web}}
- apiVersion: v1
  kind: ConfigMap
  metadata: {name: c, namespace: other, labels: {app: web}}
"#
        );
        let (results, code) = outcome(&items);
        assert_eq!(
            results,
            vec![
                (
                    "error".to_owned(),
                    "ConfigMap \"a\" shares label app=web with b\nviolatedConstraint: unique-app"
                        .to_owned()
                ),
                (
                    "error".to_owned(),
                    "ConfigMap \"b\" shares label app=web with a\nviolatedConstraint: unique-app"
                        .to_owned()
                ),
            ]
        );
        assert_eq!(code, 1);
    }

    #[test]
    fn namespace_selectors_use_the_namespace_objects() {
        let items = r#"- apiVersion: templates.gatekeeper.sh/v1
  kind: ConstraintTemplate
  metadata:
    name: denyall
  spec:
    crd:
      spec:
        names:
          kind: DenyAll
    targets:
    - target: admission.k8s.gatekeeper.sh
      code:
      - engine: Rego
        source:
          version: v1
          rego: |
            package denyall
            violation contains {"msg": msg} if {
              msg := concat(" ", ["denied", input.review.object.metadata.name])
            }
- apiVersion: constraints.gatekeeper.sh/v1beta1
  kind: DenyAll
  metadata:
    name: deny-prod
  spec:
    enforcementAction: warn
    match:
      scope: Namespaced
      namespaceSelector:
        matchLabels: {env: prod}
- apiVersion: v1
  kind: Namespace
  metadata: {name: shop, labels: {env: prod}}
- apiVersion: v1
  kind: Namespace
  metadata: {name: lab, labels: {env: dev}}
- apiVersion: v1
  kind: ConfigMap
  metadata: {name: in-shop, namespace: shop}
- apiVersion: v1
  kind: ConfigMap
  metadata: {name: in-lab, namespace: lab}
"#;
        let (results, code) = outcome(items);
        assert_eq!(
            results,
            vec![(
                "warning".to_owned(),
                "denied in-shop\nviolatedConstraint: deny-prod".to_owned()
            )]
        );
        assert_eq!(code, 0);
    }

    #[test]
    fn a_missing_namespace_for_a_namespace_selector_is_an_error() {
        let items = format!(
            "{UNIQUE_TEMPLATE}{}",
            r#"- apiVersion: constraints.gatekeeper.sh/v1beta1
  kind: UniqueLabel
  metadata:
    name: unique-app
  spec:
    match:
      namespaceSelector:
        matchLabels: {env: prod}
    parameters:
      key: app
- apiVersion: v1
  kind: ConfigMap
  metadata: {name: a, namespace: nowhere}
"#
        );
        let (results, code) = outcome(&items);
        assert_eq!(
            results,
            vec![(
                "error".to_owned(),
                "reviewing /v1, Kind=ConfigMap nowhere/a: failed to run Match criteria: \
                 namespace selector for namespace-scoped object but missing Namespace"
                    .to_owned()
            )]
        );
        assert_eq!(code, 1);
    }

    #[test]
    fn rego_syntax_errors_reject_the_template() {
        let items = r#"- apiVersion: templates.gatekeeper.sh/v1
  kind: ConstraintTemplate
  metadata:
    name: broken
  spec:
    crd:
      spec:
        names:
          kind: Broken
    targets:
    - target: admission.k8s.gatekeeper.sh
      rego: |
        package broken
        violation[{"msg": msg}] {
"#;
        let (results, code) = outcome(items);
        assert_eq!(code, 1);
        assert_eq!(results.len(), 1);
        assert!(
            results
                .first()
                .is_some_and(|(_, message)| message
                    .starts_with("adding template \"broken\": invalid module: ")),
            "{results:?}"
        );
    }
}
