//! `set-annotations` (kyaml framework + kustomize annotations filter, family
//! F): sets annotations on every item and on the pod templates of workload
//! kinds, reporting one result per annotated map (spec catalog-functions §3).

use std::collections::BTreeMap;

use super::sdk::{
    self, FieldRef, FieldSpec, FileRef, FnResult, Outcome, ResourceList, is_yaml11_non_string,
    split_api_version,
};
use crate::yaml::node::{Node, Style, tag};

/// Runs set-annotations on a parsed input.
pub(crate) fn run(input: ResourceList) -> Outcome {
    let config = match Config::from_function_config(input.function_config.as_ref()) {
        Ok(config) => config,
        Err(message) => return failure(input, format!("failed to configure function: {message}")),
    };
    let mut input = input;
    let mut recorded: BTreeMap<(String, i64, String), BTreeMap<String, String>> = BTreeMap::new();
    for item in &mut input.items {
        let file = sdk::file_path(item).unwrap_or_default().to_owned();
        let index = sdk::file_index(item).unwrap_or(0);
        let api_version = item.get_str(&["apiVersion"]).unwrap_or_default().to_owned();
        let kind = item.get_str(&["kind"]).unwrap_or_default().to_owned();
        let (group, version) = split_api_version(&api_version);
        let specs: Vec<&FieldSpec> = config
            .field_specs
            .iter()
            .filter(|spec| spec.applies_to(group, version, &kind))
            .collect();
        for (key, value) in &config.annotations {
            for spec in &specs {
                let segments: Vec<&str> = spec.path.split('/').filter(|s| !s.is_empty()).collect();
                let mut touched = Vec::new();
                set_at(
                    item,
                    &segments,
                    spec.create,
                    key,
                    value,
                    &mut Vec::new(),
                    &mut touched,
                );
                for field_path in touched {
                    recorded
                        .entry((file.clone(), index, field_path))
                        .or_default()
                        .insert(key.clone(), value.clone());
                }
            }
        }
    }
    let mut results: Vec<FnResult> = recorded
        .into_iter()
        .map(|((path, index, field_path), pairs)| FnResult {
            message: format!("set annotations: {}", go_json_object(&pairs)),
            field: Some(FieldRef {
                path: field_path,
                ..FieldRef::default()
            }),
            file: Some(FileRef { path, index }),
            ..FnResult::default()
        })
        .collect();
    if results.is_empty() {
        results.push(FnResult::plain("no annotations applied"));
    }
    Outcome::kyaml(input, results)
}

/// A family-F failure: one error result, rendered on stderr as the CLI would.
fn failure(input: ResourceList, message: String) -> Outcome {
    let mut outcome = Outcome::kyaml(input, vec![FnResult::error(message.clone())]);
    outcome.stderr = format!("[error]: {message}");
    outcome.exit_code = 1;
    outcome
}

impl FieldSpec {
    fn new(group: &str, version: &str, kind: &str, path: &str) -> FieldSpec {
        FieldSpec {
            group: group.to_owned(),
            version: version.to_owned(),
            kind: kind.to_owned(),
            path: path.to_owned(),
            create: true,
        }
    }

    /// Only the parts the spec gives must be equal.
    fn applies_to(&self, group: &str, version: &str, kind: &str) -> bool {
        (self.group.is_empty() || self.group == group)
            && (self.version.is_empty() || self.version == version)
            && (self.kind.is_empty() || self.kind == kind)
    }

    fn from_node(node: &Node) -> FieldSpec {
        let text = |key: &str| node.get_str(&[key]).unwrap_or_default().to_owned();
        FieldSpec {
            group: text("group"),
            version: text("version"),
            kind: text("kind"),
            path: text("path"),
            create: node.get_str(&["create"]) == Some("true"),
        }
    }
}

/// kustomize's default annotation field specs.
fn default_field_specs() -> Vec<FieldSpec> {
    let template = "spec/template/metadata/annotations";
    let mut specs = vec![
        FieldSpec::new("", "", "", "metadata/annotations"),
        FieldSpec::new("", "v1", "ReplicationController", template),
    ];
    for kind in ["Deployment", "ReplicaSet", "DaemonSet", "StatefulSet"] {
        specs.push(FieldSpec::new("", "", kind, template));
    }
    specs.push(FieldSpec::new("batch", "", "Job", template));
    specs.push(FieldSpec::new(
        "batch",
        "",
        "CronJob",
        "spec/jobTemplate/metadata/annotations",
    ));
    specs.push(FieldSpec::new(
        "batch",
        "",
        "CronJob",
        "spec/jobTemplate/spec/template/metadata/annotations",
    ));
    specs
}

struct Config {
    annotations: BTreeMap<String, String>,
    field_specs: Vec<FieldSpec>,
}

impl Config {
    fn from_function_config(config: Option<&Node>) -> Result<Config, String> {
        let wrong_kind = || "`functionConfig` must be a `ConfigMap` or `SetAnnotations`".to_owned();
        let config = config.ok_or_else(wrong_kind)?;
        let api_version = config.get_str(&["apiVersion"]).unwrap_or_default();
        let kind = config.get_str(&["kind"]).unwrap_or_default();
        let scalars = |node: Option<&Node>| -> BTreeMap<String, String> {
            node.map(|node| {
                node.pairs()
                    .filter(|(_, value)| value.is_scalar())
                    .map(|(key, value)| {
                        (
                            key.value.as_str().to_owned(),
                            value.value.as_str().to_owned(),
                        )
                    })
                    .collect()
            })
            .unwrap_or_default()
        };
        let (annotations, mut field_specs) = if api_version == "v1" && kind == "ConfigMap" {
            (scalars(config.get("data")), Vec::new())
        } else if api_version == "fn.kpt.dev/v1alpha1"
            && (kind == "SetAnnotations" || kind == "SetAnnotationConfig")
        {
            let additional = config.get("additionalAnnotationFields");
            let deprecated = config.get("fieldSpecs");
            if additional.is_some() && deprecated.is_some() {
                return Err(
                    "`fieldSpecs` has been deprecated, please rename it to `additionalAnnotationFields`"
                        .to_owned(),
                );
            }
            let specs = additional
                .or(deprecated)
                .filter(|specs| specs.is_sequence())
                .map(|specs| specs.content.iter().map(FieldSpec::from_node).collect())
                .unwrap_or_default();
            (scalars(config.get("annotations")), specs)
        } else {
            return Err(wrong_kind());
        };
        if annotations.is_empty() {
            return Err("input annotation list cannot be empty".to_owned());
        }
        field_specs.extend(default_field_specs());
        Ok(Config {
            annotations,
            field_specs,
        })
    }
}

/// Walks `segments` from `node` and sets `key` in every map reached; the
/// dotted paths of the maps touched are pushed to `touched`.
fn set_at(
    node: &mut Node,
    segments: &[&str],
    create: bool,
    key: &str,
    value: &str,
    trail: &mut Vec<String>,
    touched: &mut Vec<String>,
) {
    let Some((first, rest)) = segments.split_first() else {
        if node.is_null() && create {
            *node = Node::new_mapping();
        }
        if node.is_mapping() {
            set_entry(node, key, value);
            touched.push(trail.join("."));
        }
        return;
    };
    if !node.is_mapping() {
        return;
    }
    if let Some(list_key) = first.strip_suffix("[]") {
        trail.push(list_key.to_owned());
        if let Some(list) = node.get_mut(list_key).filter(|list| list.is_sequence()) {
            for element in &mut list.content {
                set_at(element, rest, create, key, value, trail, touched);
            }
        }
        trail.pop();
        return;
    }
    let child = if create {
        let child = node.entry_or_insert_with(first, Node::new_mapping);
        match child {
            Some(child) => {
                if child.is_null() {
                    *child = Node::new_mapping();
                }
                Some(child)
            }
            None => None,
        }
    } else {
        node.get_mut(first)
    };
    if let Some(child) = child {
        trail.push((*first).to_owned());
        set_at(child, rest, create, key, value, trail, touched);
        trail.pop();
    }
}

/// kustomize `SetEntry`: an existing scalar keeps its style (only the text
/// and tag change); a new value is double-quoted when YAML 1.1 would read it
/// as a non-string.
fn set_entry(map: &mut Node, key: &str, value: &str) {
    if let Some(existing) = map.get_mut(key)
        && existing.is_scalar()
    {
        existing.value = value.into();
        existing.set_tag(tag::STR);
        return;
    }
    let mut node = Node::new_string(value);
    if is_yaml11_non_string(value) {
        node.style = Style::DOUBLE_QUOTED;
    }
    map.set(key, node);
}

/// Go's `json.Marshal` of a `map[string]string`: keys sorted, no spaces,
/// HTML-safe escaping.
fn go_json_object(pairs: &BTreeMap<String, String>) -> String {
    let mut out = String::from("{");
    for (i, (key, value)) in pairs.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str(&go_json_string(key));
        out.push(':');
        out.push_str(&go_json_string(value));
    }
    out.push('}');
    out
}

fn go_json_string(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '<' | '>' | '&' | '\u{2028}' | '\u{2029}' => {
                out.push_str(&format!("\\u{:04x}", c as u32));
            }
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_escapes_like_go() {
        let mut pairs = BTreeMap::new();
        pairs.insert("b".to_owned(), "x<y>&\"".to_owned());
        pairs.insert("a".to_owned(), "1".to_owned());
        assert_eq!(
            go_json_object(&pairs),
            r#"{"a":"1","b":"x\u003cy\u003e\u0026\""}"#
        );
    }
}
