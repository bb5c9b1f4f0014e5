//! `create-setters` (kyaml legacy framework, family L): adds
//! `# kpt-set: <pattern>` line comments to the fields whose values hold the
//! setter values of the function config, the inverse of apply-setters.
//!
//! As the function's Go source: each `data` entry whose value parses as a
//! YAML sequence is an array setter (its values sorted), a scalar one a
//! scalar setter. A scalar field (not multi-line, not one of kpt's own
//! annotations) whose value contains setter values gets the value with each
//! of them replaced by `${name}` (longest values first, left to right, as
//! Go's `strings.Replacer`); a sequence field whose sorted values equal an
//! array setter's gets `${name}` on its key (a flow sequence holding values
//! becomes a block one). One result per comment: `Added line comment
//! "kpt-set: ..." for field with value "..."` with the field and file. No
//! match at all fails the function (`no matches for the input list of
//! setters`), as does an empty or unparsable config.

use super::sdk::{self, FieldRef, FileRef, FnResult, Outcome, ResourceList, go_quote};
use crate::yaml::node::{Node, NodeKind, Style};
use crate::yaml::parse_document;

/// The setters of the function config.
struct Setters {
    /// (name, value), longest value first.
    scalars: Vec<(String, String)>,
    /// (name, sorted values), by name.
    arrays: Vec<(String, Vec<String>)>,
}

/// A comment added: field path, the value as reported, the comment.
struct Added {
    path: String,
    value: String,
    comment: String,
}

/// Runs create-setters on a parsed input.
pub(crate) fn run(input: ResourceList) -> Outcome {
    let setters = match Setters::from_function_config(input.function_config.as_ref()) {
        Ok(setters) => setters,
        Err(error) => return failure(input, &error),
    };
    let mut input = input;
    let mut results = Vec::new();
    for item in &mut input.items {
        let file = sdk::file_path(item).unwrap_or_default().to_owned();
        let mut added = Vec::new();
        setters.visit(item.root_mut(), "", &mut added);
        results.extend(added.into_iter().map(|added| FnResult {
            field: Some(FieldRef {
                path: added.path,
                ..FieldRef::default()
            }),
            file: (!file.is_empty()).then(|| FileRef {
                path: file.clone(),
                index: 0,
            }),
            ..FnResult::plain(format!(
                "Added line comment {} for field with value {}",
                go_quote(&added.comment),
                go_quote(&added.value)
            ))
        }));
    }
    if results.is_empty() {
        return failure(input, "no matches for the input list of setters");
    }
    Outcome::kyaml(input, results)
}

/// The function's error: a result, and the error on stderr twice (the
/// framework prints it, then `main`).
fn failure(input: ResourceList, error: &str) -> Outcome {
    let message = format!("failed to create setters: {error}");
    let mut outcome = Outcome::kyaml(input, vec![FnResult::error(message)]);
    outcome.stderr = format!("{error}{error}");
    outcome.exit_code = 1;
    outcome
}

impl Setters {
    fn from_function_config(config: Option<&Node>) -> Result<Setters, String> {
        let data: Vec<(&Node, &Node)> = config
            .and_then(|config| config.get("data"))
            .map(|data| {
                data.pairs()
                    .filter(|(_, value)| value.is_scalar())
                    .collect()
            })
            .unwrap_or_default();
        if data.is_empty() {
            return Err("config map cannot be empty".to_owned());
        }
        let mut scalars = Vec::new();
        let mut arrays = Vec::new();
        for (key, value) in data {
            let name = key.value.to_string();
            let text = value.value.as_str();
            let parsed = parse_document(text)
                .ok()
                .flatten()
                .ok_or_else(|| "parsing error".to_owned())?
                .into_root();
            match parsed.kind {
                NodeKind::Sequence => arrays.push((name, sdk::sorted_values(&parsed))),
                NodeKind::Scalar => scalars.push((name, text.to_owned())),
                _ => {}
            }
        }
        // Longest values first (so `nginx-abc` wins over `nginx`); names
        // break ties, where the function's order is its map's.
        scalars.sort_by(|a, b| b.1.len().cmp(&a.1.len()).then_with(|| a.0.cmp(&b.0)));
        arrays.sort();
        Ok(Setters { scalars, arrays })
    }

    fn visit(&self, node: &mut Node, path: &str, added: &mut Vec<Added>) {
        match node.kind {
            NodeKind::Document => {
                for child in &mut node.content {
                    self.visit(child, path, added);
                }
            }
            NodeKind::Mapping => {
                for pair in node.content.chunks_exact_mut(2) {
                    let [key, value] = pair else { continue };
                    self.visit_field(key, value, path, added);
                }
                for pair in node.content.chunks_exact_mut(2) {
                    let [key, value] = pair else { continue };
                    let field = format!("{path}.{}", key.value);
                    self.visit(value, &field, added);
                }
            }
            NodeKind::Sequence => {
                for (i, element) in node.content.iter_mut().enumerate() {
                    self.visit(element, &format!("{path}[{i}]"), added);
                }
            }
            NodeKind::Scalar => self.visit_scalar(node, path, added),
            NodeKind::Alias => {}
        }
    }

    /// A sequence field whose values are an array setter's.
    fn visit_field(&self, key: &mut Node, value: &mut Node, path: &str, added: &mut Vec<Added>) {
        if value.kind != NodeKind::Sequence {
            return;
        }
        let field = format!("{path}.{}", key.value);
        let field = field.strip_prefix('.').unwrap_or(&field).to_owned();
        let values = sdk::sorted_values(value);
        let flow = value.style.contains(Style::FLOW);
        let scalar_inside = values.iter().any(|value| {
            self.scalars
                .iter()
                .any(|(_, setter)| value.contains(setter.as_str()))
        });
        if flow && scalar_inside {
            value.style.remove(Style::FLOW);
        }
        let Some((name, _)) = self.arrays.iter().find(|(_, setter)| *setter == values) else {
            return;
        };
        let comment = format!("kpt-set: ${{{name}}}");
        // A flow sequence keeps the comment only while it is empty.
        if value.style.contains(Style::FLOW) && values.is_empty() {
            value.set_line_comment(format!("# {comment}"));
        } else {
            value.style.remove(Style::FLOW);
            key.set_line_comment(format!("# {comment}"));
        }
        added.push(Added {
            path: field,
            value: format!("[{}]", values.join(" ")),
            comment,
        });
    }

    fn visit_scalar(&self, node: &mut Node, path: &str, added: &mut Vec<Added>) {
        if path.contains(".annotations.internal.config.kubernetes.io")
            || path.contains(".annotations.config.kubernetes.io")
            || node.value.contains('\n')
        {
            return;
        }
        let replaced = self.replace(&node.value);
        if replaced == node.value.as_str() {
            return;
        }
        let comment = format!("kpt-set: {replaced}");
        node.set_line_comment(format!("# {comment}"));
        added.push(Added {
            path: path.strip_prefix('.').unwrap_or(path).to_owned(),
            value: node.value.to_string(),
            comment,
        });
    }

    /// Go's `strings.Replacer` over the scalar setters: left to right, at
    /// each position the first (longest) value that matches, no overlaps.
    fn replace(&self, value: &str) -> String {
        let mut out = String::with_capacity(value.len());
        let mut rest = value;
        while !rest.is_empty() {
            if let Some((name, setter)) = self
                .scalars
                .iter()
                .find(|(_, setter)| rest.starts_with(setter.as_str()))
            {
                out.push_str(&format!("${{{name}}}"));
                rest = &rest[setter.len()..];
                continue;
            }
            let mut chars = rest.chars();
            if let Some(c) = chars.next() {
                out.push(c);
            }
            rest = chars.as_str();
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::yaml::{SeqIndent, to_string};

    fn run_on(config: &str, item: &str) -> (String, Vec<String>, i32) {
        let node = |text: &str| parse_document(text).unwrap().unwrap().into_root();
        let outcome = run(ResourceList {
            items: vec![node(item)],
            function_config: Some(node(config)),
        });
        let text = outcome
            .items
            .first()
            .map(|item| to_string(item, SeqIndent::Compact))
            .unwrap_or_default();
        let messages = outcome.results.iter().map(|r| r.message.clone()).collect();
        (text, messages, outcome.exit_code)
    }

    /// The function's own examples: scalar patterns (longest value first),
    /// array setters on a block and a flow sequence.
    #[test]
    fn comments_the_fields_holding_setter_values() {
        let config =
            "data:\n  image: nginx\n  tag: 1.7.1\n  env: '[dev, stage]'\n  app: nginx-abc\n";
        let item = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: nginx-abc-development\nspec:\n  image: nginx:1.7.1\n  environments:\n  - stage\n  - dev\n  flow: [stage, dev]\n  other: [x]\n";
        let (text, messages, code) = run_on(config, item);
        assert_eq!(code, 0);
        assert_eq!(
            text,
            "apiVersion: v1\nkind: Pod\nmetadata:\n  name: nginx-abc-development # kpt-set: ${app}-development\nspec:\n  image: nginx:1.7.1 # kpt-set: ${image}:${tag}\n  environments: # kpt-set: ${env}\n  - stage\n  - dev\n  flow: # kpt-set: ${env}\n  - stage\n  - dev\n  other: [x]\n"
        );
        assert_eq!(
            messages,
            [
                "Added line comment \"kpt-set: ${app}-development\" for field with value \"nginx-abc-development\"",
                "Added line comment \"kpt-set: ${env}\" for field with value \"[dev stage]\"",
                "Added line comment \"kpt-set: ${env}\" for field with value \"[dev stage]\"",
                "Added line comment \"kpt-set: ${image}:${tag}\" for field with value \"nginx:1.7.1\"",
            ]
        );
        let (_, messages, code) = run_on("data:\n  image: ubuntu\n", item);
        assert_eq!(code, 1);
        assert_eq!(
            messages,
            ["failed to create setters: no matches for the input list of setters"]
        );
    }
}
