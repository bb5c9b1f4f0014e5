//! `apply-replacements` (kpt Go SDK around kustomize's replacement filter,
//! family K): copies a field of one selected resource into fields of other
//! selected resources (spec catalog-functions §6).

use super::sdk::{self, FnResult, Outcome, ResourceList, split_api_version};
use crate::yaml::node::Node;

/// Runs apply-replacements on a parsed input.
pub(crate) fn run(input: ResourceList) -> Outcome {
    let replacements = match config(input.function_config.as_ref()) {
        Ok(replacements) => replacements,
        Err(message) => return Outcome::sdk_failure(input, vec![FnResult::error(message)]),
    };
    let mut items = input.items.clone();
    for replacement in &replacements {
        if let Err(message) = apply(&mut items, replacement) {
            return Outcome::sdk_failure(input, vec![FnResult::error(message)]);
        }
    }
    let mut input = input;
    input.items = items;
    Outcome::sdk(input, Vec::new())
}

fn config(config: Option<&Node>) -> Result<Vec<Node>, String> {
    let Some(config) = config else {
        return Err("FunctionConfig is missing. Expect `ApplyReplacements`".to_owned());
    };
    let api_version = config.get_str(&["apiVersion"]).unwrap_or_default();
    let kind = config.get_str(&["kind"]).unwrap_or_default();
    if api_version != "fn.kpt.dev/v1alpha1" || kind != "ApplyReplacements" {
        return Err(format!(
            "received functionConfig of kind {kind} and apiVersion {api_version}, only functionConfig of kind ApplyReplacements and apiVersion fn.kpt.dev/v1alpha1 is supported"
        ));
    }
    Ok(config
        .get("replacements")
        .filter(|list| list.is_sequence())
        .map(|list| list.content.to_vec())
        .unwrap_or_default())
}

/// A kustomize resource selector.
#[derive(Default)]
struct Selector {
    group: String,
    version: String,
    kind: String,
    name: String,
    namespace: String,
    label_selector: String,
    annotation_selector: String,
}

impl Selector {
    fn from_node(node: Option<&Node>) -> Selector {
        let text = |key: &str| {
            node.and_then(|node| node.get_str(&[key]))
                .unwrap_or_default()
                .to_owned()
        };
        Selector {
            group: text("group"),
            version: text("version"),
            kind: text("kind"),
            name: text("name"),
            namespace: text("namespace"),
            label_selector: text("labelSelector"),
            annotation_selector: text("annotationSelector"),
        }
    }

    /// kustomize's `ResId` text: `<kind>.<version>.<group>/<name>.<namespace>`.
    fn id(&self) -> String {
        let or = |value: &str, placeholder: &str| {
            if value.is_empty() {
                placeholder.to_owned()
            } else {
                value.to_owned()
            }
        };
        format!(
            "{}.{}.{}/{}.{}",
            or(&self.kind, "[noKind]"),
            or(&self.version, "[noVer]"),
            or(&self.group, "[noGrp]"),
            or(&self.name, "[noName]"),
            or(&self.namespace, "[noNs]")
        )
    }

    fn matches(&self, item: &Node) -> bool {
        let api_version = item.get_str(&["apiVersion"]).unwrap_or_default();
        let (group, version) = split_api_version(api_version);
        let field = |wanted: &str, actual: &str| wanted.is_empty() || wanted == actual;
        let namespace = item
            .get_str(&["metadata", "namespace"])
            .filter(|ns| !ns.is_empty())
            .unwrap_or("default");
        let wanted_namespace = if self.namespace.is_empty() {
            ""
        } else {
            self.namespace.as_str()
        };
        field(&self.group, group)
            && field(&self.version, version)
            && field(&self.kind, item.get_str(&["kind"]).unwrap_or_default())
            && field(
                &self.name,
                item.get_str(&["metadata", "name"]).unwrap_or_default(),
            )
            && field(wanted_namespace, namespace)
            && label_selector_matches(&self.label_selector, item.get_path(&["metadata", "labels"]))
            && label_selector_matches(
                &self.annotation_selector,
                item.get_path(&["metadata", "annotations"]),
            )
    }
}

/// Equality-based selectors: `a=b,c!=d,e` (key existence).
fn label_selector_matches(selector: &str, labels: Option<&Node>) -> bool {
    selector
        .split(',')
        .map(str::trim)
        .filter(|term| !term.is_empty())
        .all(|term| {
            let get = |key: &str| {
                labels
                    .and_then(|labels| labels.get(key.trim()))
                    .map(|value| value.value.as_str())
            };
            if let Some((key, value)) = term.split_once("!=") {
                get(key) != Some(value.trim())
            } else if let Some((key, value)) =
                term.split_once("==").or_else(|| term.split_once('='))
            {
                get(key) == Some(value.trim())
            } else if let Some(key) = term.strip_prefix('!') {
                get(key).is_none()
            } else {
                get(term).is_some()
            }
        })
}

fn apply(items: &mut [Node], replacement: &Node) -> Result<(), String> {
    let source = replacement.get("source");
    let targets = replacement
        .get("targets")
        .filter(|targets| targets.is_sequence() && !targets.content.is_empty());
    let (Some(source), Some(targets)) = (source, targets) else {
        return Err("replacements must specify a source and at least one target".to_owned());
    };
    let selector = Selector::from_node(Some(source));
    let selected: Vec<usize> = (0..items.len())
        .filter(|&i| selector.matches(&items[i]))
        .collect();
    let source_index = match selected.as_slice() {
        [one] => *one,
        [] => return Err(format!("nothing selected by {}", selector.id())),
        _ => return Err(format!("multiple matches for selector {}", selector.id())),
    };
    let field_path = source
        .get_str(&["fieldPath"])
        .filter(|path| !path.is_empty())
        .unwrap_or("metadata.name");
    let mut found = Vec::new();
    lookup(&items[source_index], &parse_path(field_path), &mut found);
    let value = found
        .into_iter()
        .next()
        .filter(|node| !(node.is_scalar() && node.value.is_empty()))
        .cloned()
        .ok_or_else(|| {
            format!(
                "fieldPath `{field_path}` is missing for replacement source {}",
                selector.id()
            )
        })?;
    let value = match source.get("options") {
        Some(options) if value.is_scalar() => {
            let mut value = value;
            if let Some(delimiter) = options.get_str(&["delimiter"]).filter(|d| !d.is_empty()) {
                let index: i64 = options
                    .get_str(&["index"])
                    .and_then(|i| i.parse().ok())
                    .unwrap_or(0);
                let parts: Vec<&str> = value.value.split(delimiter).collect();
                let piece = usize::try_from(index)
                    .ok()
                    .and_then(|i| parts.get(i))
                    .ok_or_else(|| {
                        format!(
                            "options.index {index} is out of bounds for value {}",
                            value.value
                        )
                    })?;
                value.value = (*piece).into();
            }
            value
        }
        _ => value,
    };
    for target in &targets.content {
        let Some(select) = target.get("select") else {
            return Err("target must specify resources to select".to_owned());
        };
        let select = Selector::from_node(Some(select));
        let rejects: Vec<Selector> = target
            .get("reject")
            .filter(|list| list.is_sequence())
            .map(|list| {
                list.content
                    .iter()
                    .map(|node| Selector::from_node(Some(node)))
                    .collect()
            })
            .unwrap_or_default();
        let field_paths: Vec<String> = match target.get("fieldPaths") {
            Some(paths) if paths.is_sequence() => paths
                .content
                .iter()
                .map(|path| path.value.as_str().to_owned())
                .collect(),
            _ => vec!["metadata.name".to_owned()],
        };
        let options = target.get("options");
        let create = options.and_then(|o| o.get_str(&["create"])) == Some("true");
        let delimiter = options
            .and_then(|o| o.get_str(&["delimiter"]))
            .filter(|d| !d.is_empty())
            .map(str::to_owned);
        let index: i64 = options
            .and_then(|o| o.get_str(&["index"]))
            .and_then(|i| i.parse().ok())
            .unwrap_or(0);
        for item in items.iter_mut() {
            if !select.matches(item) || rejects.iter().any(|reject| reject.matches(item)) {
                continue;
            }
            for field_path in &field_paths {
                let segments = parse_path(field_path);
                let mut count = 0;
                set_all(
                    item,
                    &segments,
                    &value,
                    delimiter.as_deref(),
                    index,
                    &mut count,
                );
                if count == 0 {
                    if create && create_path(item, &segments, &value) {
                        continue;
                    }
                    return Err(if create {
                        format!(
                            "unable to find or create field \"{field_path}\" in replacement target"
                        )
                    } else {
                        format!("unable to find field \"{field_path}\" in replacement target")
                    });
                }
            }
        }
    }
    Ok(())
}

/// Splits a kyaml field path: `.` separates, `[...]` groups (a bracket may
/// follow a name directly, `containers[name=x]`).
fn parse_path(path: &str) -> Vec<String> {
    let mut segments = Vec::new();
    let mut current = String::new();
    let mut depth = 0;
    for c in path.chars() {
        match c {
            '[' => {
                if depth == 0 && !current.is_empty() {
                    segments.push(std::mem::take(&mut current));
                }
                depth += 1;
                current.push(c);
            }
            ']' => {
                depth -= 1;
                current.push(c);
                if depth == 0 {
                    segments.push(std::mem::take(&mut current));
                }
            }
            '.' if depth == 0 => {
                if !current.is_empty() {
                    segments.push(std::mem::take(&mut current));
                }
            }
            c => current.push(c),
        }
    }
    if !current.is_empty() {
        segments.push(current);
    }
    segments
}

/// What one path segment selects.
enum Step<'a> {
    Key(&'a str),
    Index(usize),
    Match(&'a str, &'a str),
    All,
}

fn step(segment: &str) -> Step<'_> {
    if segment == "*" || segment == "[*]" {
        return Step::All;
    }
    if let Some(inner) = segment.strip_prefix('[').and_then(|s| s.strip_suffix(']')) {
        return match inner.split_once('=') {
            Some((key, value)) => Step::Match(key, value),
            None => Step::Key(inner),
        };
    }
    match segment.parse() {
        Ok(index) => Step::Index(index),
        Err(_) => Step::Key(segment),
    }
}

fn children<'n>(node: &'n Node, segment: &str) -> Vec<&'n Node> {
    match step(segment) {
        Step::Key(key) => node.get(key).into_iter().collect(),
        Step::Index(i) if node.is_sequence() => node.content.get(i).into_iter().collect(),
        Step::Index(_) => node.get(segment).into_iter().collect(),
        Step::Match(key, value) if node.is_sequence() => node
            .content
            .iter()
            .filter(|element| element_matches(element, key, value))
            .collect(),
        Step::Match(..) => Vec::new(),
        Step::All if node.is_sequence() => node.content.iter().collect(),
        Step::All => node.pairs().map(|(_, value)| value).collect(),
    }
}

fn element_matches(element: &Node, key: &str, value: &str) -> bool {
    if key.is_empty() {
        element.is_scalar() && element.value == value
    } else {
        element.get_str(&[key]) == Some(value)
    }
}

fn lookup<'n>(node: &'n Node, segments: &[String], found: &mut Vec<&'n Node>) {
    let Some((first, rest)) = segments.split_first() else {
        found.push(node);
        return;
    };
    for child in children(node, first) {
        lookup(child, rest, found);
    }
}

fn set_all(
    node: &mut Node,
    segments: &[String],
    value: &Node,
    delimiter: Option<&str>,
    index: i64,
    count: &mut usize,
) {
    let Some((first, rest)) = segments.split_first() else {
        set_value(node, value, delimiter, index);
        *count += 1;
        return;
    };
    let positions: Vec<usize> = match step(first) {
        Step::Key(key) => node.key_index(key).map(|i| i + 1).into_iter().collect(),
        Step::Index(i) if node.is_sequence() && i < node.content.len() => vec![i],
        Step::Index(_) => node.key_index(first).map(|i| i + 1).into_iter().collect(),
        Step::Match(key, wanted) if node.is_sequence() => (0..node.content.len())
            .filter(|&i| element_matches(&node.content[i], key, wanted))
            .collect(),
        Step::Match(..) => Vec::new(),
        Step::All if node.is_sequence() => (0..node.content.len()).collect(),
        Step::All if node.is_mapping() => (0..node.content.len() / 2).map(|i| i * 2 + 1).collect(),
        Step::All => Vec::new(),
    };
    for position in positions {
        if let Some(child) = node.content.get_mut(position) {
            set_all(child, rest, value, delimiter, index, count);
        }
    }
}

/// Scalar targets keep their tag and style, only the text changes;
/// other targets are replaced by a copy of the source.
fn set_value(target: &mut Node, value: &Node, delimiter: Option<&str>, index: i64) {
    if !target.is_scalar() || !value.is_scalar() {
        let mut copy = value.clone();
        copy.set_head_comment(target.take_head_comment());
        copy.set_line_comment(target.take_line_comment());
        copy.set_foot_comment(target.take_foot_comment());
        *target = copy;
        return;
    }
    match delimiter {
        None => target.value = value.value.clone(),
        Some(delimiter) => {
            let mut parts: Vec<String> = target.value.split(delimiter).map(str::to_owned).collect();
            if index < 0 {
                parts.insert(0, value.value.as_str().to_owned());
            } else if let Some(part) = usize::try_from(index).ok().and_then(|i| parts.get_mut(i)) {
                *part = value.value.as_str().to_owned();
            } else {
                parts.push(value.value.as_str().to_owned());
            }
            target.value = parts.join(delimiter).into();
        }
    }
}

/// Creates the plain-key path and sets its end to a copy of the source.
fn create_path(node: &mut Node, segments: &[String], value: &Node) -> bool {
    let Some((last, parents)) = segments.split_last() else {
        return false;
    };
    let mut current = node;
    for segment in parents {
        let Step::Key(key) = step(segment) else {
            return false;
        };
        match sdk::ensure_mapping(current, key) {
            Some(next) => current = next,
            None => return false,
        }
    }
    let Step::Key(key) = step(last) else {
        return false;
    };
    if !current.is_mapping() {
        return false;
    }
    current.set(key, value.clone());
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_split_on_dots_outside_brackets() {
        assert_eq!(
            parse_path("data.[app.kubernetes.io/app]"),
            ["data", "[app.kubernetes.io/app]"]
        );
        assert_eq!(
            parse_path("spec.containers[name=nginx].image"),
            ["spec", "containers", "[name=nginx]", "image"]
        );
    }
}
