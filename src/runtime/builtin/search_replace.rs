//! `search-replace` (kyaml v0.12 legacy framework, family L): finds scalars
//! by value, regex, field path and file path, and optionally replaces their
//! value or sets a line comment (spec catalog-functions §5).

use globset::GlobBuilder;
use regex::Regex;

use super::sdk::{self, FieldRef, FileRef, FnResult, Outcome, ResourceList, go_quote};
use crate::yaml::node::{Node, NodeKind, Style};
use crate::yaml::{SeqIndent, to_string};

const MATCHERS: [&str; 6] = [
    "by-value",
    "by-file-path",
    "by-value-regex",
    "by-path",
    "put-value",
    "put-comment",
];

/// Runs search-replace on a parsed input.
pub(crate) fn run(input: ResourceList) -> Outcome {
    let config = match Config::from_function_config(input.function_config.as_ref()) {
        Ok(config) => config,
        Err(message) => return legacy_failure(input, &message),
    };
    let mut input = input;
    let mut results = Vec::new();
    for item in &mut input.items {
        let file = sdk::file_path(item).map(str::to_owned);
        if let Some(glob) = &config.by_file_path {
            let path = file.as_deref().unwrap_or_default();
            if !glob.is_match(path) {
                continue;
            }
        }
        if config.is_direct_put() {
            let Some(put) = &config.put_value else {
                continue;
            };
            let segments: Vec<&str> = config.by_path.split('.').collect();
            put_path(item, &segments, put);
            if let Some(path) = file {
                results.push(mutated(put, &config.by_path, path));
            }
            continue;
        }
        let mut matches = Vec::new();
        if let Err(error) = walk(item, &config, &mut String::new(), &mut matches) {
            return legacy_failure(input, &error);
        }
        if let Some(path) = file {
            for (field_path, value) in matches {
                let message = if config.put_value.is_some() || config.put_comment.is_some() {
                    format!("Mutated field value to {}", go_quote(&value))
                } else {
                    format!("Matched field value {}", go_quote(&value))
                };
                results.push(FnResult {
                    message,
                    field: Some(FieldRef {
                        path: field_path,
                        ..FieldRef::default()
                    }),
                    file: Some(FileRef {
                        path: path.clone(),
                        index: 0,
                    }),
                    ..FnResult::default()
                });
            }
        }
    }
    if results.is_empty() {
        results.push(FnResult::plain("no matches"));
    }
    Outcome::kyaml(input, results)
}

fn mutated(value: &str, field_path: &str, file: String) -> FnResult {
    FnResult {
        message: format!("Mutated field value to {}", go_quote(value)),
        field: Some(FieldRef {
            path: field_path.to_owned(),
            ..FieldRef::default()
        }),
        file: Some(FileRef {
            path: file,
            index: 0,
        }),
        ..FnResult::default()
    }
}

/// A family-L failure: one error item; the framework prints the error twice.
fn legacy_failure(input: ResourceList, error: &str) -> Outcome {
    let message = format!(
        "failed to perform search-replace operation: {}",
        go_quote(error)
    );
    let mut outcome = Outcome::kyaml(input, vec![FnResult::error(message)]);
    outcome.stderr = format!("{error}{error}");
    outcome.exit_code = 1;
    outcome
}

struct Config {
    by_value: Option<String>,
    by_value_regex: Option<Regex>,
    by_path: String,
    by_file_path: Option<globset::GlobMatcher>,
    put_value: Option<String>,
    put_comment: Option<String>,
}

impl Config {
    fn from_function_config(config: Option<&Node>) -> Result<Config, String> {
        let data = config.and_then(|config| config.get("data"));
        let mut values = std::collections::BTreeMap::new();
        if let Some(data) = data {
            for (key, value) in data.pairs() {
                if !MATCHERS.contains(&key.value.as_str()) {
                    return Err(format!(
                        "invalid matcher {}, must be one of [\"by-value\" \"by-file-path\" \"by-value-regex\" \"by-path\" \"put-value\" \"put-comment\"]",
                        go_quote(&key.value)
                    ));
                }
                values.insert(
                    key.value.as_str().to_owned(),
                    value.value.as_str().to_owned(),
                );
            }
        }
        let get = |key: &str| values.get(key).cloned();
        if get("by-value").is_some() && get("by-value-regex").is_some() {
            return Err(
                "only one of [\"by-value\", \"by-value-regex\"] can be provided".to_owned(),
            );
        }
        let by_value_regex = match get("by-value-regex") {
            // Unanchored, as Go's `regexp.Match`: a match anywhere counts.
            Some(pattern) => Some(Regex::new(&pattern).map_err(|err| {
                format!(
                    "failed to compile input pattern {}: {err}",
                    go_quote(&pattern)
                )
            })?),
            None => None,
        };
        let by_file_path = match get("by-file-path") {
            Some(pattern) => Some(
                GlobBuilder::new(&pattern)
                    .literal_separator(true)
                    .build()
                    .map_err(|err| err.to_string())?
                    .compile_matcher(),
            ),
            None => None,
        };
        Ok(Config {
            by_value: get("by-value"),
            by_value_regex,
            by_path: get("by-path").unwrap_or_default(),
            by_file_path,
            put_value: get("put-value"),
            put_comment: get("put-comment"),
        })
    }

    /// `by-path` names one concrete field and no value matcher is given:
    /// the value is put on every item, creating the field.
    fn is_direct_put(&self) -> bool {
        !self.by_path.is_empty()
            && !self.by_path.split('.').any(str::is_empty)
            && !self.by_path.contains('*')
            && !self.by_path.contains('[')
            && self.by_value.is_none()
            && self.by_value_regex.is_none()
            && self.put_value.is_some()
    }

    fn value_matches(&self, value: &str) -> bool {
        if let Some(by_value) = &self.by_value {
            return by_value == value;
        }
        self.by_value_regex
            .as_ref()
            .is_some_and(|regex| regex.is_match(value))
    }

    fn path_matches(&self, path: &str) -> bool {
        if self.by_path.is_empty() {
            return false;
        }
        let pattern: Vec<&str> = self.by_path.split('.').collect();
        let elements: Vec<&str> = path.split('.').collect();
        match_elements(&elements, &pattern)
    }
}

fn match_elements(elements: &[&str], pattern: &[&str]) -> bool {
    match (elements.split_first(), pattern.split_first()) {
        (_, Some((&"**", rest))) => {
            match_elements(elements, rest)
                || (!elements.is_empty() && match_elements(&elements[1..], pattern))
        }
        (None, None) => true,
        (Some((element, elements)), Some((pattern_element, pattern))) => {
            match_element(element, pattern_element) && match_elements(elements, pattern)
        }
        _ => false,
    }
}

fn match_element(element: &str, pattern: &str) -> bool {
    if pattern == "*" || pattern == element {
        return true;
    }
    let (Some((name, index)), Some((pattern_name, pattern_index))) =
        (split_index(element), split_index(pattern))
    else {
        return false;
    };
    (pattern_name == "*" || pattern_name == name)
        && (pattern_index == "*" || pattern_index == index)
}

fn split_index(element: &str) -> Option<(&str, &str)> {
    let (name, rest) = element.split_once('[')?;
    Some((name, rest.strip_suffix(']')?))
}

/// Depth-first walk; matched scalars are mutated and reported as
/// (field path, new rendering). Fails on a `put-value`/`put-comment`
/// pattern whose capture groups the match does not fill.
fn walk(
    node: &mut Node,
    config: &Config,
    path: &mut String,
    matches: &mut Vec<(String, String)>,
) -> Result<(), String> {
    match node.kind {
        NodeKind::Mapping => {
            if let Some(comment) = &config.put_comment {
                comment_sequences(node, config, comment, path, matches);
            }
            for pair in node.content.chunks_exact_mut(2) {
                let [key, value] = pair else { continue };
                let saved = path.len();
                if !path.is_empty() {
                    path.push('.');
                }
                path.push_str(&key.value);
                walk(value, config, path, matches)?;
                path.truncate(saved);
            }
        }
        NodeKind::Sequence => {
            for (i, element) in node.content.iter_mut().enumerate() {
                let saved = path.len();
                path.push_str(&format!("[{i}]"));
                walk(element, config, path, matches)?;
                path.truncate(saved);
            }
        }
        NodeKind::Scalar => {
            let value_matches = config.value_matches(&node.value);
            let path_matches = config.path_matches(path);
            let no_value_matcher = config.by_value.is_none() && config.by_value_regex.is_none();
            let matched = (value_matches && (path_matches || config.by_path.is_empty()))
                || (path_matches && no_value_matcher);
            if !matched {
                return Ok(());
            }
            if let Some(comment) = &config.put_comment {
                let comment =
                    resolve_pattern(config.by_value_regex.as_ref(), &node.value, comment)?;
                node.set_line_comment(comment_text(&comment));
            }
            if let Some(put) = &config.put_value {
                let new_value = resolve_pattern(config.by_value_regex.as_ref(), &node.value, put)?;
                node.value = new_value.into();
                node.set_tag("");
            }
            let rendered = to_string(node, SeqIndent::Compact).trim().to_owned();
            matches.push((path.clone(), rendered));
        }
        NodeKind::Document | NodeKind::Alias => {
            for child in &mut node.content {
                walk(child, config, path, matches)?;
            }
        }
    }
    Ok(())
}

/// `put-comment` on sequences (the function's `visitMapping`): each field
/// of `mapping` holding a non-empty sequence whose path matches `by-path`
/// gets the comment on its key and its sequence written in block style;
/// the match is reported as `<by-path> # <comment>` with the sequence's
/// flow rendering.
fn comment_sequences(
    mapping: &mut Node,
    config: &Config,
    comment: &str,
    path: &str,
    matches: &mut Vec<(String, String)>,
) {
    for pair in mapping.content.chunks_exact_mut(2) {
        let [key, value] = pair else { continue };
        if value.kind != NodeKind::Sequence || value.content.is_empty() {
            continue;
        }
        let to_key = if path.is_empty() {
            key.value.trim().to_owned()
        } else {
            format!("{path}.{}", key.value.trim())
        };
        if !config.path_matches(&to_key) {
            continue;
        }
        key.set_line_comment(comment_text(comment));
        let mut flow = value.clone();
        flow.style.insert(Style::FLOW);
        let rendered = to_string(&flow, SeqIndent::Compact).trim().to_owned();
        value.style.remove(Style::FLOW);
        matches.push((format!("{} # {comment}", config.by_path), rendered));
    }
}

fn comment_text(comment: &str) -> String {
    if comment.starts_with('#') {
        comment.to_owned()
    } else {
        format!("# {comment}")
    }
}

/// The function's `resolvePattern`: with a `by-value-regex`, `${N}` in
/// `pattern` becomes capture group N (N ≥ 1, in order) of the regex's
/// first match in `value`; a `${N}` left over is an error.
fn resolve_pattern(regex: Option<&Regex>, value: &str, pattern: &str) -> Result<String, String> {
    let Some(regex) = regex else {
        return Ok(pattern.to_owned());
    };
    let mut out = pattern.to_owned();
    if let Some(captures) = regex.captures(value) {
        for i in 1..captures.len() {
            let text = captures.get(i).map_or("", |m| m.as_str());
            out = out.replace(&format!("${{{i}}}"), text);
        }
    }
    if unresolved_group(&out) {
        return Err("unable to resolve capture groups".to_owned());
    }
    Ok(out)
}

/// Whether `text` still holds a `${<digits>}`.
fn unresolved_group(text: &str) -> bool {
    text.match_indices("${").any(|(at, _)| {
        let rest = &text[at + 2..];
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        digits > 0 && rest.as_bytes().get(digits) == Some(&b'}')
    })
}

/// Creates the maps along `segments` and sets the last one to an untagged
/// plain scalar.
fn put_path(node: &mut Node, segments: &[&str], value: &str) {
    let Some((last, parents)) = segments.split_last() else {
        return;
    };
    let mut current = node;
    for key in parents {
        match sdk::ensure_mapping(current, key) {
            Some(next) => current = next,
            None => return,
        }
    }
    if !current.is_mapping() {
        return;
    }
    match current.get_mut(last) {
        Some(existing) if existing.is_scalar() => {
            existing.value = value.into();
            existing.set_tag("");
        }
        Some(existing) => *existing = Node::new_untagged_scalar(value),
        None => current.set(last, Node::new_untagged_scalar(value)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn path_patterns() {
        let m = |path: &str, pattern: &str| {
            match_elements(
                &path.split('.').collect::<Vec<_>>(),
                &pattern.split('.').collect::<Vec<_>>(),
            )
        };
        assert!(m("spec.replicas", "spec.replicas"));
        assert!(m("spec.replicas", "*.replicas"));
        assert!(m("spec.template.spec.containers[0].image", "**.image"));
        assert!(m(
            "spec.template.spec.containers[0].image",
            "spec.**.containers[*].image"
        ));
        assert!(!m("spec.template", "spec.replicas"));
        assert!(m("metadata.name", "**.name"));
    }
}
