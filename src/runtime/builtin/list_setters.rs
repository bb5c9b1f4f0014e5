//! `list-setters` (kyaml framework): reports the setters of a package, one
//! result per setter, `Name: <n>, Value: <v>, Type: <t>, Count: <c>`, sorted
//! by name (array setters first on a tie), or the warning `no setters
//! found`. Items pass through unchanged.
//!
//! As the function's Go source finds them: first the setters the root
//! Kptfile gives `apply-setters` (its `configMap:`, or the `data` of its
//! `configPath:` resource; later declarations win; a value that parses as
//! a YAML sequence is an array setter), counted 0 and typed `str`; then
//! every field of every item whose line comment is `# kpt-set: <pattern>`:
//! a sequence field (the comment on its key, or on a flow sequence itself)
//! is an array setter with its sorted element values, a scalar gives each
//! `${name}` of the pattern the text it matches in the value, typed by the
//! value's tag. Each field counts once per setter.

use std::collections::BTreeMap;

use regex::Regex;

use super::sdk::{self, FnResult, Outcome, ResourceList, Severity};
use crate::krm::resource;
use crate::yaml::node::{Node, NodeKind, Style};
use crate::yaml::{SeqIndent, parse_document, to_string};

const MARKER: &str = "# kpt-set: ";

/// A scalar setter: its value, type and count.
struct Scalar {
    value: String,
    kind: String,
    count: usize,
}

#[derive(Default)]
struct Setters {
    arrays: BTreeMap<String, (Vec<String>, usize)>,
    scalars: BTreeMap<String, Scalar>,
}

/// Runs list-setters on a parsed input.
pub(crate) fn run(input: ResourceList) -> Outcome {
    let mut setters = Setters::default();
    for (name, value) in kptfile_setters(&input.items).unwrap_or_default() {
        match array_values(&value) {
            Some(values) => {
                setters.arrays.insert(name, (values, 0));
            }
            None => {
                let kind = "str".to_owned();
                setters.scalars.insert(
                    name,
                    Scalar {
                        value,
                        kind,
                        count: 0,
                    },
                );
            }
        }
    }
    for item in &input.items {
        setters.visit(item.root());
    }
    let mut found: Vec<(String, String, String, usize)> = setters
        .arrays
        .into_iter()
        .map(|(name, (values, count))| {
            (
                name,
                format!("[{}]", values.join(", ")),
                "array".to_owned(),
                count,
            )
        })
        .chain(
            setters
                .scalars
                .into_iter()
                .map(|(name, scalar)| (name, scalar.value, scalar.kind, scalar.count)),
        )
        .collect();
    found.sort_by(|a, b| a.0.cmp(&b.0));
    let results = if found.is_empty() {
        vec![FnResult::new(Severity::Warning, "no setters found")]
    } else {
        found
            .into_iter()
            .map(|(name, value, kind, count)| {
                FnResult::plain(format!(
                    "Name: {name}, Value: {value}, Type: {kind}, Count: {count}"
                ))
            })
            .collect()
    };
    Outcome::kyaml(input, results)
}

/// The setters the root Kptfile's pipeline gives `apply-setters`; `None`
/// when there is no such Kptfile or function, or a configuration the
/// function cannot find (it then reports only the fields' setters).
fn kptfile_setters(items: &[Node]) -> Option<BTreeMap<String, String>> {
    let kptfile = items
        .iter()
        .find(|item| sdk::annotation(item, resource::PATH) == Some("Kptfile"))?;
    let mutators = kptfile.root().get_path(&["pipeline", "mutators"])?;
    let mut setters = BTreeMap::new();
    for function in &mutators.content {
        let image = function.get_str(&["image"]).unwrap_or_default();
        if !image.contains("apply-setters") {
            continue;
        }
        let data = if let Some(config_map) = function.get("configMap") {
            config_map
        } else if let Some(path) = function
            .get_str(&["configPath"])
            .filter(|path| !path.is_empty())
        {
            items
                .iter()
                .find(|item| sdk::annotation(item, resource::PATH) == Some(path))?
                .root()
                .get("data")?
        } else {
            return None;
        };
        for (key, value) in data.pairs() {
            setters.insert(key.value.to_string(), value.value.to_string());
        }
    }
    (!setters.is_empty()).then_some(setters)
}

/// The values of an array setter's value, when it is a YAML sequence.
fn array_values(value: &str) -> Option<Vec<String>> {
    let node = parse_document(value).ok()??.into_root();
    (node.kind == NodeKind::Sequence).then(|| {
        node.content
            .iter()
            .map(|element| match element.kind {
                NodeKind::Scalar => element.value.to_string(),
                _ => to_string(element, SeqIndent::Compact).replace('\n', ""),
            })
            .collect()
    })
}

impl Setters {
    fn visit(&mut self, node: &Node) {
        match node.kind {
            NodeKind::Document => {
                for child in &node.content {
                    self.visit(child);
                }
            }
            NodeKind::Mapping => {
                for pair in node.content.chunks_exact(2) {
                    self.visit_field(&pair[0], &pair[1]);
                }
                for pair in node.content.chunks_exact(2) {
                    self.visit(&pair[1]);
                }
            }
            NodeKind::Sequence => {
                for element in &node.content {
                    self.visit(element);
                }
            }
            NodeKind::Scalar => self.visit_scalar(node),
            NodeKind::Alias => {}
        }
    }

    /// A sequence field tagged with a setter is an array setter.
    fn visit_field(&mut self, key: &Node, value: &Node) {
        if value.kind != NodeKind::Sequence {
            return;
        }
        let comment = if value.style.contains(Style::FLOW) {
            value.line_comment()
        } else {
            key.line_comment()
        };
        let Some(pattern) = setter_pattern(comment) else {
            return;
        };
        let values = sdk::sorted_values(value);
        self.arrays
            .entry(clean(pattern))
            .and_modify(|(_, count)| *count += 1)
            .or_insert((values, 1));
    }

    fn visit_scalar(&mut self, node: &Node) {
        let Some(pattern) = setter_pattern(node.line_comment()) else {
            return;
        };
        let kind = node.tag().trim_start_matches("!!").to_owned();
        for (name, value) in current_values(pattern, &node.value) {
            match self.scalars.get_mut(&name) {
                Some(scalar) => {
                    if scalar.kind == "str" && kind != "str" {
                        scalar.kind = kind.clone();
                    }
                    scalar.count += 1;
                }
                None => {
                    let kind = kind.clone();
                    self.scalars.insert(
                        name,
                        Scalar {
                            value,
                            kind,
                            count: 1,
                        },
                    );
                }
            }
        }
    }
}

/// The pattern of a `# kpt-set: ` comment.
fn setter_pattern(comment: &str) -> Option<&str> {
    let pattern = comment.strip_prefix(MARKER)?.trim();
    (!pattern.is_empty()).then_some(pattern)
}

/// `${name}` without its braces.
fn clean(text: &str) -> String {
    let text = text.trim();
    let text = text.strip_prefix("${").unwrap_or(text);
    text.strip_suffix('}').unwrap_or(text).to_owned()
}

/// Each setter of `pattern` with the text it stands for in `value`; empty
/// when the value does not match or leaves a setter empty.
fn current_values(pattern: &str, value: &str) -> BTreeMap<String, String> {
    let mut values = BTreeMap::new();
    let Ok(setter) = Regex::new(r"\$\{[^}]*\}") else {
        return values;
    };
    let names: Vec<&str> = setter
        .find_iter(pattern)
        .map(|found| found.as_str())
        .collect();
    let mut expression = regex::escape(pattern);
    for name in &names {
        expression = expression.replace(&regex::escape(name), "(.*)");
    }
    let Ok(expression) = Regex::new(&expression) else {
        return values;
    };
    let Some(captures) = expression.captures(value) else {
        return values;
    };
    let found: Vec<&str> = captures
        .iter()
        .skip(1)
        .map(|group| group.map_or("", |group| group.as_str()))
        .collect();
    if found.len() != names.len() || found.iter().any(|text| text.is_empty()) {
        return BTreeMap::new();
    }
    for (name, text) in names.iter().zip(found) {
        values.insert(clean(name), text.to_owned());
    }
    values
}

#[cfg(test)]
mod tests {
    use super::*;

    fn messages(items: &[&str]) -> Vec<String> {
        let items = items
            .iter()
            .map(|text| parse_document(text).unwrap().unwrap().into_root())
            .collect();
        run(ResourceList {
            items,
            function_config: None,
        })
        .results
        .into_iter()
        .map(|result| result.message)
        .collect()
    }

    /// Patterned scalars, array setters, Kptfile values and their counts.
    #[test]
    fn lists_the_setters_of_fields_and_of_the_kptfile() {
        let kptfile = "apiVersion: kpt.dev/v1\nkind: Kptfile\nmetadata:\n  name: app\n  annotations:\n    internal.config.kubernetes.io/path: Kptfile\npipeline:\n  mutators:\n    - image: gcr.io/kpt-fn/apply-setters:v0.2\n      configMap:\n        app: my-app\n        tiers: '[web, db]'\n        unused: x\n";
        let deployment = "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: my-app-layer.dev.example.com # kpt-set: my-app-layer.${stage}.${domain}.${tld}\nspec:\n  replicas: 4 # kpt-set: ${replicas}\n  tiers: # kpt-set: ${tiers}\n    - web\n    - db\n  app: my-app # kpt-set: ${app}\n";
        assert_eq!(
            messages(&[kptfile, deployment]),
            [
                "Name: app, Value: my-app, Type: str, Count: 1",
                "Name: domain, Value: example, Type: str, Count: 1",
                "Name: replicas, Value: 4, Type: int, Count: 1",
                "Name: stage, Value: dev, Type: str, Count: 1",
                "Name: tiers, Value: [web, db], Type: array, Count: 1",
                "Name: tld, Value: com, Type: str, Count: 1",
                "Name: unused, Value: x, Type: str, Count: 0",
            ]
        );
        assert_eq!(
            messages(&["apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm\n"]),
            ["no setters found"]
        );
    }
}
