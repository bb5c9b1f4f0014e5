//! `annotate-apply-time-mutations` (kyaml framework `command.Build`, kyaml
//! results): writes cli-utils' `config.k8s.io/apply-time-mutation`
//! annotation from `ApplyTimeMutation` objects (`fn.kpt.dev/v1alpha1`) and
//! from `# apply-time-mutation: ${group[/version]/namespaces/ns/kind/name:path}`
//! line comments.
//!
//! As the catalog's Go source (`functions/go/annotate-apply-time-mutations`,
//! `pkg/function.go` and its scanners), three passes over the items, each
//! logging to stderr as the function does (`Scanning (Item: …)` lines):
//! 1. `ApplyTimeMutation` objects are read (as `sigs.k8s.io/yaml` reads
//!    them: JSON field names matched without case, scalars as strings) and
//!    remembered by target reference (a later one for the same target
//!    wins); info `Found valid ApplyTimeMutation object (item: <i>)`;
//! 2. items whose reference (with apiVersion, else with group) is a target
//!    get the annotation: the substitutions as `sigs.k8s.io/yaml` marshals
//!    them (keys sorted), the annotations rebuilt at the end of `metadata`
//!    with sorted keys; info `Wrote apply-time-mutation annotation (item: <i>)`;
//! 3. every scalar's line comment is parsed; a reference inside more text
//!    replaces the value by the text with each reference as `${ref<n>}`
//!    (`<n>` counts the object's mutation comments); the object's
//!    substitutions replace its annotation.
//!
//! Per-object problems are error results and the run goes on; an item
//! without a numeric index annotation stops it (the items and the results
//! so far are written, the error printed twice, exit 1).
//!
//! Not modelled: errors from decoding an `ApplyTimeMutation`'s `metadata`
//! (Kubernetes `ObjectMeta` types); line folding of annotation texts longer
//! than 80 columns (go-yaml v2 folds plain text at spaces).

use std::collections::HashMap;
use std::fmt::Write as _;

use regex::Regex;

use super::goyaml::{go_format_float, parse_go_float, parse_go_int, string_node};
use super::sdk::{
    self, FieldRef, FileRef, FnResult, Outcome, ResourceList, ResourceRef, expect_object, go_quote,
    is_null, json_field, read_string, type_error,
};
use crate::krm::resource::{INDEX, LEGACY_INDEX, LEGACY_PATH, PATH};
use crate::yaml::node::{Node, NodeKind, tag};
use crate::yaml::{SeqIndent, to_string};

/// cli-utils' `mutation.Annotation`.
const ANNOTATION: &str = "config.k8s.io/apply-time-mutation";
const COMMENT_PREFIX: &str = "# apply-time-mutation: ";
const SOURCE: &str = r"\$\{(?P<group>[^/]+)/((?P<version>[^/]+)/)?namespaces/(?P<namespace>[^/]+)/(?P<kind>[^/]+)/(?P<name>[^:]+):(?P<path>[^}]+)\}";

/// cli-utils' `mutation.ResourceReference`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
struct Reference {
    kind: String,
    api_version: String,
    group: String,
    name: String,
    namespace: String,
}

/// cli-utils' `mutation.FieldSubstitution`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct Substitution {
    source_ref: Reference,
    source_path: String,
    target_path: String,
    token: String,
}

/// One item's identity as the passes see it.
struct Visit {
    index: usize,
    api_version: String,
    kind: String,
    name: String,
    namespace: String,
    file: FileRef,
}

impl Visit {
    /// `Scanning (Item: …, Object: %+v, File: %+v)` and friends.
    fn describe(&self) -> String {
        format!(
            "(Item: {}, Object: {{TypeMeta:{{APIVersion:{} Kind:{}}} NameMeta:{{Name:{} Namespace:{}}}}}, File: {{Path:{} Index:{}}})",
            self.index,
            self.api_version,
            self.kind,
            self.name,
            self.namespace,
            self.file.path,
            self.file.index
        )
    }

    fn result(&self, result: FnResult) -> FnResult {
        FnResult {
            resource_ref: Some(ResourceRef {
                api_version: self.api_version.clone(),
                kind: self.kind.clone(),
                name: self.name.clone(),
                namespace: self.namespace.clone(),
            }),
            file: Some(self.file.clone()),
            ..result
        }
    }
}

/// Runs annotate-apply-time-mutations on a parsed input.
pub(crate) fn run(input: ResourceList) -> Outcome {
    let mut input = input;
    let mut log = String::new();
    let mut results = Vec::new();
    let done = process(&mut input.items, &mut log, &mut results);
    let mut outcome = Outcome::kyaml(input, results);
    if let Err(error) = done {
        // `command.Build` prints the error, then `main` with `Fprintln`.
        let _ = writeln!(log, "{error}{error}");
        outcome.exit_code = 1;
    }
    outcome.stderr = log;
    outcome
}

fn process(
    items: &mut [Node],
    log: &mut String,
    results: &mut Vec<FnResult>,
) -> Result<(), String> {
    let Ok(source) = Regex::new(SOURCE) else {
        return Err("invalid reference pattern".to_owned());
    };
    let Ok(only_source) = Regex::new(&format!("^{SOURCE}$")) else {
        return Err("invalid reference pattern".to_owned());
    };
    let mut targets: HashMap<Reference, Vec<Substitution>> = HashMap::new();

    log.push_str("Scanning items for ApplyTimeMutation objects\n");
    for (index, item) in items.iter_mut().enumerate() {
        let visit = visit(index, item)?;
        let _ = writeln!(log, "Scanning {}", visit.describe());
        if item.get_str(&["kind"]) != Some("ApplyTimeMutation")
            || item.get_str(&["apiVersion"]) != Some("fn.kpt.dev/v1alpha1")
        {
            continue;
        }
        match read_object(item) {
            Ok((target, substitutions)) => {
                let _ = writeln!(log, "Found valid ApplyTimeMutation object (item: {index})");
                results.push(visit.result(FnResult::info(format!(
                    "Found valid ApplyTimeMutation object (item: {index})"
                ))));
                targets.insert(target, substitutions);
            }
            Err(error) => results.push(visit.result(FnResult::error(format!(
                "Error scanning object (item: {index}): failed to parse ApplyTimeMutation object: {error}"
            )))),
        }
    }

    log.push_str("Scanning items for mutation targets\n");
    for (index, item) in items.iter_mut().enumerate() {
        let visit = visit(index, item)?;
        let _ = writeln!(log, "Scanning {}", visit.describe());
        let with_version = Reference {
            api_version: visit.api_version.clone(),
            kind: visit.kind.clone(),
            name: visit.name.clone(),
            namespace: visit.namespace.clone(),
            ..Reference::default()
        };
        let without_version = Reference {
            group: group_of(&visit.api_version).to_owned(),
            kind: visit.kind.clone(),
            name: visit.name.clone(),
            namespace: visit.namespace.clone(),
            ..Reference::default()
        };
        let Some(substitutions) = targets
            .get(&with_version)
            .or_else(|| targets.get(&without_version))
        else {
            continue;
        };
        let _ = writeln!(log, "Writing annotation {}", visit.describe());
        results.push(visit.result(write_annotation(item, substitutions, index)));
    }

    log.push_str("Scanning items for apply-time-mutation comments\n");
    for (index, item) in items.iter_mut().enumerate() {
        let visit = visit(index, item)?;
        let _ = writeln!(log, "Scanning {}", visit.describe());
        let mut scanner = CommentScanner {
            source: &source,
            only_source: &only_source,
            log,
            path: Vec::new(),
            next_token: 0,
            found: Vec::new(),
        };
        if let Err(error) = scanner.scan(item) {
            results.push(visit.result(FnResult::error(format!(
                "Error scanning object (item: {index}): {error}"
            ))));
            continue;
        }
        let found = std::mem::take(&mut scanner.found);
        if found.is_empty() {
            continue;
        }
        let mut substitutions = Vec::with_capacity(found.len());
        for scanned in found {
            let _ = writeln!(
                log,
                "Found valid apply-time-mutation comment (item: {index}, field: {}): {}",
                go_quote(&scanned.substitution.target_path),
                scanned.comment
            );
            results.push(visit.result(FnResult {
                field: Some(FieldRef {
                    path: scanned.substitution.target_path.clone(),
                    current_value: scanned.value,
                    proposed_value: None,
                }),
                ..FnResult::info(format!(
                    "Found valid apply-time-mutation comment (item: {index}): {}",
                    scanned.comment
                ))
            }));
            substitutions.push(scanned.substitution);
        }
        let _ = writeln!(log, "Writing annotation {}", visit.describe());
        results.push(visit.result(write_annotation(item, &substitutions, index)));
    }
    Ok(())
}

/// `visitItems`' reading of an item: identity and file annotations (the
/// internal ones, else the legacy ones); the index must parse as an int.
fn visit(index: usize, item: &Node) -> Result<Visit, String> {
    let annotations = sdk::annotations_map(item);
    let path = annotations
        .get(PATH)
        .or_else(|| annotations.get(LEGACY_PATH))
        .cloned()
        .unwrap_or_default();
    let file_index = annotations
        .get(INDEX)
        .or_else(|| annotations.get(LEGACY_INDEX))
        .cloned()
        .unwrap_or_default();
    let Ok(file_index) = file_index.parse::<i64>() else {
        return Err(format!(
            "item {index} has invalid file index: {}",
            go_quote(&file_index)
        ));
    };
    let text = |path: &[&str]| item.get_str(path).unwrap_or_default().to_owned();
    Ok(Visit {
        index,
        api_version: text(&["apiVersion"]),
        kind: text(&["kind"]),
        name: text(&["metadata", "name"]),
        namespace: text(&["metadata", "namespace"]),
        file: FileRef {
            path,
            index: file_index,
        },
    })
}

/// The group of an apiVersion (`schema.FromAPIVersionAndKind`): empty for
/// `v1` and for texts with more than one `/`.
fn group_of(api_version: &str) -> &str {
    match api_version.split('/').collect::<Vec<_>>()[..] {
        [group, _] => group,
        _ => "",
    }
}

/// `WriteAnnotation`: the result to report for it.
fn write_annotation(item: &mut Node, substitutions: &[Substitution], index: usize) -> FnResult {
    if substitutions.is_empty() {
        return FnResult::error(format!(
            "Error writing annotation (item: {index}): mutation is empty"
        ));
    }
    let mut annotations = sdk::annotations_map(item);
    annotations.insert(ANNOTATION.to_owned(), marshal(substitutions));
    sdk::set_annotations_map(item, &annotations);
    FnResult::info(format!(
        "Wrote apply-time-mutation annotation (item: {index})"
    ))
}

/// `sigs.k8s.io/yaml.Marshal` of the substitutions: the JSON fields as a
/// go-yaml v2 map (keys sorted), block style.
fn marshal(substitutions: &[Substitution]) -> String {
    let list = crate::yaml::marshal::sequence(
        substitutions
            .iter()
            .map(|substitution| {
                let reference = &substitution.source_ref;
                let mut source_ref = vec![("kind", string_node(&reference.kind))];
                for (key, value) in [
                    ("apiVersion", &reference.api_version),
                    ("group", &reference.group),
                    ("name", &reference.name),
                    ("namespace", &reference.namespace),
                ] {
                    if !value.is_empty() {
                        source_ref.push((key, string_node(value)));
                    }
                }
                let mut fields = vec![
                    ("sourcePath", string_node(&substitution.source_path)),
                    ("sourceRef", sorted(source_ref)),
                    ("targetPath", string_node(&substitution.target_path)),
                ];
                if !substitution.token.is_empty() {
                    fields.push(("token", string_node(&substitution.token)));
                }
                sorted(fields)
            })
            .collect(),
    );
    to_string(&list, SeqIndent::Compact)
}

fn sorted(fields: Vec<(&str, Node)>) -> Node {
    crate::yaml::marshal::sorted_mapping(
        fields
            .into_iter()
            .map(|(key, value)| (key.to_owned(), value))
            .collect(),
    )
}

/// Reads an `ApplyTimeMutation` as `sigs.k8s.io/yaml.Unmarshal` does into
/// the function's types: its target and substitutions, or the JSON error.
fn read_object(item: &Node) -> Result<(Reference, Vec<Substitution>), String> {
    let wrap = |error: String| format!("error unmarshaling JSON: {error}");
    let Some(spec) = json_field(item, "spec") else {
        return Ok((Reference::default(), Vec::new()));
    };
    expect_object(
        spec,
        "ApplyTimeMutation",
        "spec",
        "pkg.ApplyTimeMutationSpec",
    )
    .map_err(wrap)?;
    let target = match json_field(spec, "targetRef") {
        Some(node) => {
            read_reference(node, "ApplyTimeMutationSpec", "spec.targetRef").map_err(wrap)?
        }
        None => Reference::default(),
    };
    let mut substitutions = Vec::new();
    if let Some(list) = json_field(spec, "substitutions") {
        if list.kind != NodeKind::Sequence {
            if !is_null(list) {
                return Err(wrap(type_error(
                    list,
                    "ApplyTimeMutationSpec",
                    "spec.substitutions",
                    "mutation.ApplyTimeMutation",
                )));
            }
        } else {
            for element in &list.content {
                substitutions.push(read_substitution(element).map_err(wrap)?);
            }
        }
    }
    Ok((target, substitutions))
}

fn read_substitution(node: &Node) -> Result<Substitution, String> {
    const PATH: &str = "spec.substitutions";
    if is_null(node) {
        return Ok(Substitution::default());
    }
    expect_object(
        node,
        "ApplyTimeMutationSpec",
        PATH,
        "mutation.FieldSubstitution",
    )?;
    let text = |key: &str| {
        read_string(
            json_field(node, key),
            "FieldSubstitution",
            &format!("{PATH}.{key}"),
        )
    };
    Ok(Substitution {
        source_ref: match json_field(node, "sourceRef") {
            Some(reference) => {
                read_reference(reference, "FieldSubstitution", &format!("{PATH}.sourceRef"))?
            }
            None => Reference::default(),
        },
        source_path: text("sourcePath")?,
        target_path: text("targetPath")?,
        token: text("token")?,
    })
}

fn read_reference(node: &Node, parent: &str, path: &str) -> Result<Reference, String> {
    if is_null(node) {
        return Ok(Reference::default());
    }
    expect_object(node, parent, path, "mutation.ResourceReference")?;
    let text = |key: &str| {
        read_string(
            json_field(node, key),
            "ResourceReference",
            &format!("{path}.{key}"),
        )
    };
    Ok(Reference {
        kind: text("kind")?,
        api_version: text("apiVersion")?,
        group: text("group")?,
        name: text("name")?,
        namespace: text("namespace")?,
    })
}

/// One mutation comment found by the scanner.
struct Scanned {
    comment: String,
    value: Option<Node>,
    substitution: Substitution,
}

/// One key of a field path: a map key as go-yaml decodes it, or an index.
enum PathKey {
    Text(String),
    Int(i64),
    Other(String),
}

struct CommentScanner<'a> {
    source: &'a Regex,
    only_source: &'a Regex,
    log: &'a mut String,
    path: Vec<PathKey>,
    next_token: usize,
    found: Vec<Scanned>,
}

impl CommentScanner<'_> {
    fn scan(&mut self, node: &mut Node) -> Result<(), String> {
        match node.kind {
            NodeKind::Mapping => {
                for pair in node.content.chunks_exact_mut(2) {
                    let [key, value] = pair else {
                        continue;
                    };
                    self.path.push(path_key(key));
                    self.scan(value)?;
                    self.path.pop();
                }
                Ok(())
            }
            NodeKind::Sequence => {
                for (index, element) in node.content.iter_mut().enumerate() {
                    self.path.push(PathKey::Int(index as i64));
                    self.scan(element)?;
                    self.path.pop();
                }
                Ok(())
            }
            NodeKind::Scalar => self.scan_scalar(node),
            _ => Ok(()),
        }
    }

    fn scan_scalar(&mut self, node: &mut Node) -> Result<(), String> {
        let comment = node.line_comment().to_string();
        if comment.is_empty() {
            return Ok(());
        }
        let path = self.field_path();
        let _ = writeln!(
            self.log,
            "Parsing comment (path: {}): {comment}",
            go_quote(&path)
        );
        let Some(pattern) = comment
            .strip_prefix(COMMENT_PREFIX)
            .map(|pattern| pattern.trim().to_owned())
        else {
            return Ok(());
        };
        let pattern = pattern.as_str();
        let Some(captures) = self.source.captures(pattern) else {
            return Err(
                "apply mutation comment found with no valid reference to source path".to_owned(),
            );
        };
        let group = |name: &str| {
            captures
                .name(name)
                .map_or_else(String::new, |found| found.as_str().to_owned())
        };
        let version = group("version");
        let mut source_ref = Reference {
            namespace: group("namespace"),
            kind: group("kind"),
            name: group("name"),
            ..Reference::default()
        };
        if version.is_empty() {
            source_ref.group = group("group");
        } else {
            source_ref.api_version = format!("{}/{version}", group("group"));
        }
        let value = current_value(node);
        let token_index = self.next_token;
        self.next_token += 1;
        let mut token = String::new();
        if !self.only_source.is_match(pattern) {
            token = format!("${{ref{token_index}}}");
            let replaced = self.source.replace_all(pattern, regex::NoExpand(&token));
            if !replaced.is_empty() {
                node.value = replaced.as_ref().into();
            }
        }
        self.found.push(Scanned {
            comment,
            value,
            substitution: Substitution {
                source_ref,
                source_path: group("path"),
                target_path: path,
                token,
            },
        });
        Ok(())
    }

    /// cli-utils' `object.FieldPath` behind `$`.
    fn field_path(&self) -> String {
        static SIMPLE: std::sync::LazyLock<Option<Regex>> =
            std::sync::LazyLock::new(|| Regex::new(r"^[a-zA-Z]([a-zA-Z0-9_-]*[a-zA-Z0-9])?$").ok());
        let mut out = String::from("$");
        for key in &self.path {
            match key {
                PathKey::Text(text) => {
                    if SIMPLE.as_ref().is_some_and(|simple| simple.is_match(text)) {
                        out.push('.');
                        out.push_str(text);
                    } else {
                        let _ = write!(out, "[{}]", go_quote(text));
                    }
                }
                PathKey::Int(index) => {
                    let _ = write!(out, "[{index}]");
                }
                PathKey::Other(text) => {
                    let _ = write!(out, "[{text}]");
                }
            }
        }
        out
    }
}

/// A map key as go-yaml decodes it into `any`: strings, ints, and other
/// values as `%#v` prints them.
fn path_key(key: &Node) -> PathKey {
    let text = key.value.as_str();
    match sdk::effective_tag(key) {
        tag::INT => parse_go_int(text).map_or_else(|| PathKey::Text(text.to_owned()), PathKey::Int),
        tag::BOOL => PathKey::Other(matches!(text, "true" | "True" | "TRUE").to_string()),
        tag::FLOAT => {
            PathKey::Other(parse_go_float(text).map_or_else(|| text.to_owned(), go_format_float))
        }
        tag::NULL => PathKey::Other("<nil>".to_owned()),
        _ => PathKey::Text(text.to_owned()),
    }
}

/// The scalar as go-yaml decodes it into `any` and marshals it back in
/// the results (`field.currentValue`); `None` for null (omitted).
fn current_value(node: &Node) -> Option<Node> {
    let text = node.value.as_str();
    Some(match sdk::effective_tag(node) {
        tag::NULL => return None,
        tag::BOOL => crate::yaml::marshal::bool(matches!(text, "true" | "True" | "TRUE")),
        tag::INT => match parse_go_int(text) {
            Some(int) => crate::yaml::marshal::int(int),
            None => string_node(text),
        },
        tag::FLOAT => match parse_go_float(text) {
            Some(float) => Node::new_scalar(tag::FLOAT, go_format_float(float)),
            None => string_node(text),
        },
        _ => string_node(text),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::yaml::parse_document;

    fn item(text: &str) -> Node {
        parse_document(text).unwrap().unwrap().into_root()
    }

    const ANNOTATIONS: &str = "  annotations:\n    internal.config.kubernetes.io/index: '0'\n    internal.config.kubernetes.io/path: a.yaml\n";

    #[test]
    fn a_comment_becomes_a_token_and_a_substitution() {
        let mut target = item(&format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: t\n{ANNOTATIONS}data:\n  url: x # apply-time-mutation: http://${{v1/namespaces/ns/Service/s:$.spec.clusterIP}}:80\n"
        ));
        let mut log = String::new();
        let mut results = Vec::new();
        process(std::slice::from_mut(&mut target), &mut log, &mut results).unwrap();
        assert_eq!(target.get_str(&["data", "url"]), Some("http://${ref0}:80"));
        assert_eq!(
            sdk::annotation(&target, ANNOTATION),
            Some(
                "- sourcePath: $.spec.clusterIP\n  sourceRef:\n    group: v1\n    kind: Service\n    \
                 name: s\n    namespace: ns\n  targetPath: $.data.url\n  token: ${ref0}\n"
            )
        );
        assert!(results.iter().any(|result| result.message
            == "Found valid apply-time-mutation comment (item: 0): # apply-time-mutation: http://${v1/namespaces/ns/Service/s:$.spec.clusterIP}:80"));
    }

    #[test]
    fn each_error_reads_as_the_function_prints_it() {
        let mut items = vec![item(&format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: t\n{ANNOTATIONS}data:\n  a: x # apply-time-mutation: nothing\n"
        ))];
        let mut log = String::new();
        let mut results = Vec::new();
        process(&mut items, &mut log, &mut results).unwrap();
        assert_eq!(
            results.last().map(|result| result.message.as_str()),
            Some(
                "Error scanning object (item: 0): apply mutation comment found with no valid reference to source path"
            )
        );
        let mut items = vec![item(
            "apiVersion: fn.kpt.dev/v1alpha1\nkind: ApplyTimeMutation\nmetadata:\n  name: m\n  annotations:\n    internal.config.kubernetes.io/index: '0'\nspec:\n  targetRef: foo\n",
        )];
        let mut results = Vec::new();
        process(&mut items, &mut String::new(), &mut results).unwrap();
        assert_eq!(
            results[0].message,
            "Error scanning object (item: 0): failed to parse ApplyTimeMutation object: error \
             unmarshaling JSON: json: cannot unmarshal string into Go struct \
             field ApplyTimeMutationSpec.spec.targetRef of type mutation.ResourceReference"
        );
        let mut items = vec![item(
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: t\n",
        )];
        assert_eq!(
            process(&mut items, &mut String::new(), &mut Vec::new()),
            Err("item 0 has invalid file index: \"\"".to_owned())
        );
    }
}
