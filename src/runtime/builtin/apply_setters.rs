//! `apply-setters` (kyaml v0.10 legacy framework, family L): rewrites fields
//! carrying a `# kpt-set: <pattern>` line comment from the setter values in
//! the function config (spec catalog-functions §7).

use std::collections::BTreeMap;

use regex::Regex;

use super::sdk::{self, FieldRef, FileRef, FnResult, Outcome, ResourceList, go_quote};
use crate::yaml::node::{Node, NodeKind, Style, ThinVec};

const MARKER: &str = "# kpt-set: ";

/// Runs apply-setters on a parsed input.
pub(crate) fn run(input: ResourceList) -> Outcome {
    let setters: BTreeMap<String, String> = input
        .function_config
        .as_ref()
        .and_then(|config| config.get("data"))
        .map(|data| {
            data.pairs()
                .filter(|(_, value)| value.is_scalar())
                .map(|(key, value)| {
                    (
                        key.value.as_str().to_owned(),
                        value.value.as_str().to_owned(),
                    )
                })
                .collect()
        })
        .unwrap_or_default();
    let mut input = input;
    let mut results = Vec::new();
    for item in &mut input.items {
        let file = sdk::file_path(item).unwrap_or_default().to_owned();
        let mut changes = Vec::new();
        if let Err(error) = walk(item, &setters, &mut String::new(), &mut changes) {
            let message = format!("failed to apply setters: {error}");
            let mut outcome = Outcome::kyaml(input, vec![FnResult::error(message.clone())]);
            outcome.stderr = format!("{message}{message}");
            outcome.exit_code = 1;
            return outcome;
        }
        for (path, value) in changes {
            results.push(FnResult {
                message: format!("set field value to {}", go_quote(&value)),
                field: Some(FieldRef {
                    path,
                    ..FieldRef::default()
                }),
                file: Some(FileRef {
                    path: file.clone(),
                    index: 0,
                }),
                ..FnResult::default()
            });
        }
    }
    if results.is_empty() {
        results.push(FnResult::plain("no matches for input setter(s)"));
    }
    Outcome::kyaml(input, results)
}

/// The setter pattern of a `# kpt-set: ` comment.
fn pattern_of(comment: &str) -> Option<&str> {
    comment.strip_prefix(MARKER).map(str::trim)
}

/// Setter names mentioned in a pattern, in order.
fn names_in(pattern: &str) -> Vec<&str> {
    let mut names = Vec::new();
    let mut rest = pattern;
    while let Some(start) = rest.find("${") {
        let after = &rest[start + 2..];
        let Some(end) = after.find('}') else { break };
        names.push(&after[..end]);
        rest = &after[end + 1..];
    }
    names
}

fn walk(
    node: &mut Node,
    setters: &BTreeMap<String, String>,
    path: &mut String,
    changes: &mut Vec<(String, String)>,
) -> Result<(), String> {
    match node.kind {
        NodeKind::Mapping => {
            for pair in node.content.chunks_exact_mut(2) {
                let [key, value] = pair else { continue };
                let saved = path.len();
                if !path.is_empty() {
                    path.push('.');
                }
                path.push_str(&key.value);
                if value.is_sequence() {
                    set_array(key, value, setters, path, changes)?;
                }
                walk(value, setters, path, changes)?;
                path.truncate(saved);
            }
        }
        NodeKind::Sequence => {
            for (i, element) in node.content.iter_mut().enumerate() {
                let saved = path.len();
                path.push_str(&format!("[{i}]"));
                walk(element, setters, path, changes)?;
                path.truncate(saved);
            }
        }
        NodeKind::Scalar => set_scalar(node, setters, path, changes)?,
        NodeKind::Document | NodeKind::Alias => {
            for child in &mut node.content {
                walk(child, setters, path, changes)?;
            }
        }
    }
    Ok(())
}

fn set_scalar(
    node: &mut Node,
    setters: &BTreeMap<String, String>,
    path: &str,
    changes: &mut Vec<(String, String)>,
) -> Result<(), String> {
    let Some(pattern) = pattern_of(node.line_comment()).map(str::to_owned) else {
        return Ok(());
    };
    let names = names_in(&pattern);
    if !names.iter().any(|name| setters.contains_key(*name)) {
        return Ok(());
    }
    let mut value = pattern.clone();
    for (name, setter_value) in setters {
        value = value.replace(&format!("${{{name}}}"), setter_value);
    }
    let unresolved: Vec<&str> = names
        .iter()
        .copied()
        .filter(|name| !setters.contains_key(*name))
        .collect();
    if !unresolved.is_empty() {
        let derived = derive_from_current(&pattern, &node.value);
        let mut missing = Vec::new();
        for name in &unresolved {
            match derived.get(*name) {
                Some(current) => value = value.replace(&format!("${{{name}}}"), current),
                None => missing.push(format!("${{{name}}}")),
            }
        }
        if !missing.is_empty() {
            missing.dedup();
            return Err(format!(
                "values for setters [{}] must be provided",
                missing.join(" ")
            ));
        }
    }
    node.value = value.as_str().into();
    node.set_tag("");
    if value.is_empty() {
        node.style = Style::DOUBLE_QUOTED;
    }
    changes.push((path.to_owned(), value));
    Ok(())
}

/// Reads setter values out of the current field value by matching the
/// pattern with every `${x}` as `(.*)`.
fn derive_from_current(pattern: &str, current: &str) -> BTreeMap<String, String> {
    let mut regex = String::from("^");
    let mut names = Vec::new();
    let mut rest = pattern;
    while let Some(start) = rest.find("${") {
        let after = &rest[start + 2..];
        let Some(end) = after.find('}') else { break };
        regex.push_str(&regex::escape(&rest[..start]));
        regex.push_str("(.*)");
        names.push(after[..end].to_owned());
        rest = &after[end + 1..];
    }
    regex.push_str(&regex::escape(rest));
    regex.push('$');
    let mut found = BTreeMap::new();
    let Ok(regex) = Regex::new(&regex) else {
        return found;
    };
    if let Some(captures) = regex.captures(current) {
        for (i, name) in names.into_iter().enumerate() {
            if let Some(capture) = captures.get(i + 1) {
                found
                    .entry(name)
                    .or_insert_with(|| capture.as_str().to_owned());
            }
        }
    }
    found
}

/// Array setters: the comment sits on the key (block sequence) or on the
/// value (flow sequence) and names a single setter whose value is a YAML
/// sequence.
fn set_array(
    key: &mut Node,
    value: &mut Node,
    setters: &BTreeMap<String, String>,
    path: &str,
    changes: &mut Vec<(String, String)>,
) -> Result<(), String> {
    let on_key = pattern_of(key.line_comment()).map(str::to_owned);
    let on_value = pattern_of(value.line_comment()).map(str::to_owned);
    let Some(pattern) = on_key.or(on_value) else {
        return Ok(());
    };
    let names = names_in(&pattern);
    let Some(setter_value) = names.first().and_then(|name| setters.get(*name)) else {
        return Ok(());
    };
    if names.len() != 1 || pattern != format!("${{{}}}", names[0]) {
        return Err(format!(
            "invalid setter pattern for array node: {}",
            go_quote(&pattern)
        ));
    }
    let comment = format!("{MARKER}{pattern}");
    let parsed = crate::yaml::parse_document(setter_value)
        .ok()
        .flatten()
        .map(|document| document.root().clone());
    let elements = match parsed {
        Some(node) if node.is_sequence() => node.content,
        None if setter_value.trim().is_empty() => ThinVec::new(),
        _ => {
            return Err(format!(
                "input to array setter must be an array of values, but found {}",
                go_quote(setter_value)
            ));
        }
    };
    let mut sequence = Node::new_sequence();
    sequence.content = elements;
    if sequence.content.is_empty() {
        sequence.style = Style::FLOW;
        sequence.set_line_comment(comment);
        key.set_line_comment("");
    } else {
        key.set_line_comment(comment);
    }
    *value = sequence;
    changes.push((path.to_owned(), setter_value.clone()));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn derives_unresolved_setters_from_the_current_value() {
        let derived = derive_from_current("${project-id}-${name}", "proj-bucket");
        assert_eq!(derived.get("name").map(String::as_str), Some("bucket"));
        assert_eq!(names_in("${a}-x-${b}"), ["a", "b"]);
    }
}
