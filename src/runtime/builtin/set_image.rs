//! `set-image` (old kpt Go SDK, family K): rewrites container images of Pods
//! and pod-template workloads, then, for a `SetImage` config with
//! `additionalImageFields`, runs kustomize's image-tag filter with those
//! field specs over every resource (spec catalog-functions §10; checked
//! against kptdev/krm-functions-catalog functions/go/set-image
//! transformer/images_transformer.go and custom/custom.go, with
//! sigs.k8s.io/kustomize api v0.19.0 filters/imagetag, filters/fieldspec,
//! image, and kyaml v0.19.0 filtersutil).

use super::goyaml::{go_format_float, parse_go_float, parse_go_int, string_node};
use super::sdk::{
    self, FnResult, Outcome, ResourceList, ResourceRef, Severity, is_null, replace_with_string,
    split_path,
};
use crate::yaml::node::{Node, NodeKind, Style, tag};
use crate::yaml::resolve::resolve_plain;

/// Runs set-image on a parsed input.
pub(crate) fn run(input: ResourceList) -> Outcome {
    let Some(config) = input.function_config.as_ref() else {
        return Outcome::sdk(input, vec![FnResult::info("`FunctionConfig` is not given")]);
    };
    let image = match Image::from_function_config(config) {
        Ok(image) => image,
        Err(message) => {
            // The SDK's `ResultErrAndDie`: the error, then the termination
            // as a second result and as the process's error text.
            let terminated = format!("function is terminated: {message}");
            let results = vec![
                FnResult::error(message),
                FnResult::error(terminated.clone()),
            ];
            return Outcome::sdk_error(input, results, &terminated);
        }
    };
    let mut input = input;
    let mut count = 0;
    for item in &mut input.items {
        let kind = item.get_str(&["kind"]).unwrap_or_default().to_owned();
        let path: &[&str] = match kind.as_str() {
            "Pod" => &["spec", "containers"],
            "Deployment" | "StatefulSet" | "ReplicaSet" | "DaemonSet" | "PodTemplate" => {
                &["spec", "template", "spec", "containers"]
            }
            _ => continue,
        };
        let Some(containers) = get_path_mut(item, path).filter(|c| c.is_sequence()) else {
            continue;
        };
        for container in &mut containers.content {
            let Some(slot) = container.get_mut("image").filter(|slot| slot.is_scalar()) else {
                continue;
            };
            if let Some(updated) = image.apply(&slot.value)
                && updated != slot.value
            {
                replace_with_string(slot, &updated);
                count += 1;
            }
        }
    }
    let mut results = Vec::new();
    if let Some(fields) = input
        .function_config
        .as_ref()
        .and_then(AdditionalFields::from_config)
    {
        for item in &mut input.items {
            if let Err(message) = fields.apply(item, &mut count) {
                // The SDK's `ResultErr(message, object)`: the step fails
                // after the summary, the item stays as it was.
                results.push(FnResult {
                    message,
                    severity: Some(Severity::Error),
                    resource_ref: Some(ResourceRef::of(item)),
                    ..FnResult::default()
                });
            }
        }
    }
    let failed = !results.is_empty();
    results.push(FnResult::info(format!(
        "summary: updated a total of {count} image(s)"
    )));
    if failed {
        Outcome::sdk_failure(input, results)
    } else {
        Outcome::sdk(input, results)
    }
}

/// `additionalImageFields` of a `SetImage` config, with the image of its
/// `image` field (a ConfigMap config has none: its `data` is all strings).
struct AdditionalFields {
    image: Image,
    specs: Vec<FieldSpec>,
}

/// One kustomize `FieldSpec`: which resources (an empty group, version or
/// kind matches any) and the slash-separated path to their image fields.
/// `create` is read by kustomize but the image-tag filter never creates.
struct FieldSpec {
    group: String,
    version: String,
    kind: String,
    path: String,
}

impl AdditionalFields {
    fn from_config(config: &Node) -> Option<AdditionalFields> {
        let is_set_image = config.get_str(&["kind"]) == Some("SetImage")
            && config.get_str(&["apiVersion"]) == Some("fn.kpt.dev/v1alpha1");
        // `additionalImageFields: []` still runs the filter (a non-nil Go
        // slice); a null or missing one does not.
        let fields = config
            .get("additionalImageFields")
            .filter(|fields| is_set_image && fields.is_sequence())?;
        let text = |node: &Node, key: &str| node.get_str(&[key]).unwrap_or_default().to_owned();
        let specs = fields
            .content
            .iter()
            .map(|spec| FieldSpec {
                group: text(spec, "group"),
                version: text(spec, "version"),
                kind: text(spec, "kind"),
                path: text(spec, "path"),
            })
            .collect();
        let image = config.get("image");
        let field = |key: &str| image.map(|image| text(image, key)).unwrap_or_default();
        Some(AdditionalFields {
            image: Image {
                name: field("name"),
                new_name: field("newName"),
                new_tag: field("newTag"),
                digest: field("digest"),
            },
            specs,
        })
    }

    /// Runs the filter on `item` as `filtersutil.ApplyToJSON` does: on the
    /// item's JSON form, which then replaces it. The JSON trip changes what
    /// kpt keeps (scalar styles, numbers as Go float64s, flow
    /// collections); the key order and comments it also loses are
    /// restored by kpt after the step, so they are kept here. On an error
    /// the item stays as it was; matches counted before it stay counted.
    fn apply(&self, item: &mut Node, count: &mut usize) -> Result<(), String> {
        let mut json = item.clone();
        to_go_json(&mut json)?;
        // kustomize hardcodes this deny-list entry.
        if json.get_str(&["kind"]) != Some("CustomResourceDefinition") {
            for spec in &self.specs {
                // Matched as each spec comes: an earlier one may have
                // edited the kind.
                if !spec.matches(&json) {
                    continue;
                }
                visit(&mut json, &split_path(&spec.path), &self.image, count).map_err(
                    |message| {
                        format!(
                            "considering field '{}' of object {}: {message}",
                            spec.path,
                            sdk::res_id(&json)
                        )
                    },
                )?;
            }
        }
        *item = json;
        Ok(())
    }
}

impl FieldSpec {
    /// kustomize `isMatchGVK` (the group is what precedes the first `/`).
    fn matches(&self, item: &Node) -> bool {
        let api_version = item.get_str(&["apiVersion"]).unwrap_or_default();
        let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
        let kind = item.get_str(&["kind"]).unwrap_or_default();
        (self.kind.is_empty() || self.kind == kind)
            && (self.group.is_empty() || self.group == group)
            && (self.version.is_empty() || self.version == version)
    }
}

/// kustomize `fieldspec.Filter`: follows `path` from `node` (every element
/// of a sequence on the way, `name[]` marking a field expected to be a
/// list) and sets the image fields at its end.
fn visit(node: &mut Node, path: &[String], image: &Image, count: &mut usize) -> Result<(), String> {
    let Some((first, rest)) = path.split_first() else {
        return set_image_value(node, image, count);
    };
    if is_null(node) {
        return Ok(());
    }
    match node.kind {
        NodeKind::Sequence => {
            for element in &mut node.content {
                visit(element, path, image, count).map_err(|message| {
                    format!("visit traversal on path: [{}]: {message}", path.join(" "))
                })?;
            }
            Ok(())
        }
        NodeKind::Mapping => {
            let (name, is_sequence) = match first.strip_suffix("[]") {
                Some(name) => (name, true),
                None => (first.as_str(), false),
            };
            if name.is_empty() {
                return Err("cannot set or create an empty field name".to_owned());
            }
            let Some(field) = node.get_mut(name) else {
                return Ok(());
            };
            // A null where the path expects a list becomes an empty one.
            if is_sequence && is_null(field) {
                let mut list = Node::new_sequence();
                list.set_head_comment(field.take_head_comment());
                list.set_line_comment(field.take_line_comment());
                list.set_foot_comment(field.take_foot_comment());
                *field = list;
            }
            visit(field, rest, image, count)
        }
        NodeKind::Scalar => Err("expected sequence or mapping node".to_owned()),
        _ => Ok(()),
    }
}

/// kustomize `imageTagUpdater.SetImageValue`: a matching image gets the new
/// name, tag and digest; every match counts, changed or not (the mutation
/// tracker is called before the value is set).
fn set_image_value(node: &mut Node, image: &Image, count: &mut usize) -> Result<(), String> {
    if !is_null(node) && node.kind != NodeKind::Scalar {
        let kind = match node.kind {
            NodeKind::Mapping => "MappingNode",
            NodeKind::Sequence => "SequenceNode",
            NodeKind::Document => "DocumentNode",
            _ => "AliasNode",
        };
        return Err(format!(
            "wrong node kind: expected ScalarNode but got {kind}: node contents:\n{}",
            json_text(node)
        ));
    }
    let Some(updated) = image.kustomize_apply(&node.value) else {
        return Ok(());
    };
    *count += 1;
    replace_with_string(node, &updated);
    let style = string_node(&updated).style;
    node.style = style;
    Ok(())
}

/// How kyaml prints a node parsed from JSON (flow collections, quoted
/// strings), for the wrong-kind error.
fn json_text(node: &Node) -> String {
    fn jsonish(node: &mut Node) {
        match node.kind {
            NodeKind::Mapping | NodeKind::Sequence => {
                node.style = Style::FLOW;
                node.content.iter_mut().for_each(jsonish);
            }
            NodeKind::Scalar if node.tag() == tag::STR => node.style = Style::DOUBLE_QUOTED,
            _ => {}
        }
    }
    let mut copy = node.clone();
    jsonish(&mut copy);
    crate::yaml::to_string(&copy, crate::yaml::SeqIndent::Compact)
}

/// Rewrites `node` as the Go value its JSON form decodes to would be
/// marshalled back (`RNode.MarshalJSON`, `json.Unmarshal` into
/// `map[string]interface{}`, `yaml.FromMap`): strings styled as go-yaml
/// `Marshal` does, every number a float64, nulls `null`, collections in
/// block style. Infinities and NaN have no JSON form: Go's error.
fn to_go_json(node: &mut Node) -> Result<(), String> {
    match node.kind {
        NodeKind::Mapping => {
            node.style = Style::PLAIN;
            for pair in node.content.chunks_exact_mut(2) {
                if let [key, value] = pair {
                    let text = key.value.to_string();
                    replace_with_string(key, &text);
                    key.style = string_node(&text).style;
                    to_go_json(value)?;
                }
            }
        }
        NodeKind::Sequence => {
            node.style = Style::PLAIN;
            for element in &mut node.content {
                to_go_json(element)?;
            }
        }
        NodeKind::Scalar => {
            let text = node.value.to_string();
            let number = match sdk::effective_tag(node) {
                tag::NULL => Some(Node::new_scalar(tag::NULL, "null")),
                tag::BOOL => Some(Node::new_scalar(
                    tag::BOOL,
                    if matches!(text.as_str(), "true" | "True" | "TRUE") {
                        "true"
                    } else {
                        "false"
                    },
                )),
                tag::INT => parse_go_int(&text)
                    .map(|int| int as f64)
                    .or_else(|| text.replace('_', "").parse().ok())
                    .map(go_number)
                    .transpose()?,
                tag::FLOAT => parse_go_float(&text).map(go_number).transpose()?,
                _ => None,
            };
            let mut replacement = number.unwrap_or_else(|| string_node(&text));
            replacement.set_head_comment(node.take_head_comment());
            replacement.set_line_comment(node.take_line_comment());
            replacement.set_foot_comment(node.take_foot_comment());
            *node = replacement;
        }
        _ => {}
    }
    Ok(())
}

/// A float64 as go-yaml writes it, or `encoding/json`'s refusal.
fn go_number(value: f64) -> Result<Node, String> {
    if value.is_nan() {
        return Err("json: unsupported value: NaN".to_owned());
    }
    if value.is_infinite() {
        let sign = if value > 0.0 { '+' } else { '-' };
        return Err(format!("json: unsupported value: {sign}Inf"));
    }
    let text = go_format_float(value);
    Ok(Node::new_scalar(resolve_plain(&text), text))
}

fn get_path_mut<'a>(node: &'a mut Node, path: &[&str]) -> Option<&'a mut Node> {
    path.iter()
        .try_fold(node, |current, key| current.get_mut(key))
}

/// The image rewrite: which image, and its new name, tag or digest.
struct Image {
    name: String,
    new_name: String,
    new_tag: String,
    digest: String,
}

impl Image {
    fn from_function_config(config: &Node) -> Result<Image, String> {
        let api_version = config.get_str(&["apiVersion"]).unwrap_or_default();
        let kind = config.get_str(&["kind"]).unwrap_or_default();
        let mut image = Image {
            name: String::new(),
            new_name: String::new(),
            new_tag: String::new(),
            digest: String::new(),
        };
        let source = if kind == "SetImage" && api_version == "fn.kpt.dev/v1alpha1" {
            config.get("image")
        } else {
            config.get("data")
        };
        let is_config_map = kind == "ConfigMap";
        if let Some(source) = source {
            for (key, value) in source.pairs() {
                let text = value.value.as_str().to_owned();
                match key.value.as_str() {
                    "name" => image.name = text,
                    "newName" => image.new_name = text,
                    "newTag" => image.new_tag = text,
                    "digest" => image.digest = text,
                    other if is_config_map => {
                        return Err(format!("ConfigMap has wrong field name {other}"));
                    }
                    _ => {}
                }
            }
        }
        if image.name.is_empty() {
            return Err("must specify `name`".to_owned());
        }
        if image.new_name.is_empty() && image.new_tag.is_empty() && image.digest.is_empty() {
            return Err("must specify one of `newName`, `newTag`, or `digest`".to_owned());
        }
        Ok(image)
    }

    /// The new value for `current`, or `None` when it is another image.
    /// `current` matches when it is the name, optionally followed by
    /// `:tag` and/or `@digest`.
    fn apply(&self, current: &str) -> Option<String> {
        let rest = current.strip_prefix(self.name.as_str())?;
        if !(rest.is_empty() || rest.starts_with(':') || rest.starts_with('@')) {
            return None;
        }
        let name = if self.new_name.is_empty() {
            self.name.as_str()
        } else {
            self.new_name.as_str()
        };
        // The source drops the separator when it keeps the old tag or
        // digest; krender keeps it (spec §10 asks to verify before copying).
        let suffix = if !self.new_tag.is_empty() {
            format!(":{}", self.new_tag)
        } else if !self.digest.is_empty() {
            format!("@{}", self.digest)
        } else {
            rest.to_owned()
        };
        Some(format!("{name}{suffix}"))
    }
}

impl Image {
    /// kustomize's image-tag update (api v0.19.0 `image.IsImageMatched`,
    /// `image.Split`, `imageTagUpdater`): `None` when `current` is another
    /// image. The name is a regular expression there, as here.
    fn kustomize_apply(&self, current: &str) -> Option<String> {
        let pattern = format!(
            "^{}(:[a-zA-Z0-9_.{{}}-]*)?(@sha256:[a-zA-Z0-9_.{{}}-]*)?$",
            self.name
        );
        // Go ignores the compile error and then dereferences a nil
        // pattern; an invalid name matches nothing here.
        if !regex::Regex::new(&pattern).is_ok_and(|pattern| pattern.is_match(current)) {
            return None;
        }
        let (mut name, mut tag, mut digest) = split_image(current);
        if !self.new_name.is_empty() {
            name = &self.new_name;
        }
        // A new tag or digest replaces both the old tag and digest.
        match (self.new_tag.is_empty(), self.digest.is_empty()) {
            (false, false) => (tag, digest) = (&self.new_tag, &self.digest),
            (false, true) => (tag, digest) = (&self.new_tag, ""),
            (true, false) => (tag, digest) = ("", &self.digest),
            (true, true) => {}
        }
        let mut updated = name.to_owned();
        if !tag.is_empty() {
            updated.push(':');
            updated.push_str(tag);
        }
        if !digest.is_empty() {
            updated.push('@');
            updated.push_str(digest);
        }
        Some(updated)
    }
}

/// kustomize `image.Split`: name, tag and digest (without separators) of
/// `[[host[:port]/]component/]component[:tag][@digest]`.
fn split_image(image: &str) -> (&str, &str, &str) {
    let offset = match image.find('/') {
        Some(slash) if slash > 0 => slash,
        _ => 0,
    };
    let search = &image[offset..];
    let at = search.find('@').map(|i| i + offset);
    let colon = search.find(':').map(|i| i + offset);
    match (at, colon) {
        (None, None) => (image, "", ""),
        // A digest only (a `:` after the `@` is the digest's).
        (Some(at), None) => (&image[..at], "", &image[at + 1..]),
        (Some(at), Some(colon)) if at < colon => (&image[..at], "", &image[at + 1..]),
        (Some(at), Some(colon)) => (&image[..colon], &image[colon + 1..at], &image[at + 1..]),
        (None, Some(colon)) => (&image[..colon], &image[colon + 1..], ""),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn image(name: &str, new_name: &str, new_tag: &str, digest: &str) -> Image {
        Image {
            name: name.to_owned(),
            new_name: new_name.to_owned(),
            new_tag: new_tag.to_owned(),
            digest: digest.to_owned(),
        }
    }

    /// The cases of kptdev/krm-functions-catalog functions/go/set-image
    /// transformer/images_transformer_test.go, on kustomize's update.
    #[test]
    fn kustomize_updates_as_the_catalog_tests_expect() {
        let apply = |image: &Image, current: &str| image.kustomize_apply(current);
        let nginx = image("nginx", "", "1.29.0", "");
        assert_eq!(
            apply(&nginx, "nginx:1.28.1").as_deref(),
            Some("nginx:1.29.0")
        );
        assert_eq!(apply(&nginx, "nginx-exporter:1"), None);
        let mirror = image("alpine", "my.docker.mirror.com/alpine", "", "");
        assert_eq!(
            apply(&mirror, "alpine:3.21").as_deref(),
            Some("my.docker.mirror.com/alpine:3.21")
        );
        let debian = image("alpine", "debian", "bookworm", "");
        assert_eq!(
            apply(&debian, "alpine:3.22").as_deref(),
            Some("debian:bookworm")
        );
        // A name with a tag selects that tag only.
        let pinned = image("alpine:3.22", "debian", "bookworm", "");
        assert_eq!(apply(&pinned, "alpine:3.21"), None);
        assert_eq!(
            apply(&pinned, "alpine:3.22").as_deref(),
            Some("debian:bookworm")
        );
        // A no-op update is still a match (it is counted).
        let same = image("alpine", "", "3.22", "");
        assert_eq!(apply(&same, "alpine:3.22").as_deref(), Some("alpine:3.22"));
        // A new tag or digest replaces both old parts; neither keeps both.
        let digest = image("nginx", "", "", "sha256:new");
        assert_eq!(
            apply(&digest, "nginx:1.2@sha256:old").as_deref(),
            Some("nginx@sha256:new")
        );
        let both = image("nginx", "", "1.3", "sha256:new");
        assert_eq!(
            apply(&both, "nginx@sha256:old").as_deref(),
            Some("nginx:1.3@sha256:new")
        );
        let renamed = image("nginx", "mirror/nginx", "", "");
        assert_eq!(
            apply(&renamed, "nginx:1.2@sha256:old").as_deref(),
            Some("mirror/nginx:1.2@sha256:old")
        );
        // The name is a regular expression, as in Go; an invalid one
        // matches nothing.
        assert_eq!(
            apply(&image("a.c", "", "1", ""), "abc:0").as_deref(),
            Some("abc:1")
        );
        assert_eq!(apply(&image("a(", "", "1", ""), "a("), None);
    }

    #[test]
    fn images_split_as_kustomize_splits_them() {
        assert_eq!(split_image("nginx"), ("nginx", "", ""));
        assert_eq!(split_image("nginx:1.2"), ("nginx", "1.2", ""));
        assert_eq!(split_image("nginx@sha256:ab"), ("nginx", "", "sha256:ab"));
        assert_eq!(
            split_image("nginx:1.2@sha256:ab"),
            ("nginx", "1.2", "sha256:ab")
        );
        assert_eq!(
            split_image("host:5000/team/nginx:1.2"),
            ("host:5000/team/nginx", "1.2", "")
        );
        assert_eq!(split_image("host:5000/nginx"), ("host:5000/nginx", "", ""));
    }

    #[test]
    fn field_paths_split_on_unescaped_slashes() {
        assert_eq!(
            split_path("spec/manifest/images[]/image"),
            ["spec", "manifest", "images[]", "image"]
        );
        assert_eq!(
            split_path("metadata/annotations/example.com\\/image"),
            ["metadata", "annotations", "example.com/image"]
        );
        assert_eq!(split_path(""), [""]);
    }

    #[test]
    fn resource_ids_print_as_kyaml_prints_them() {
        let mut item = Node::new_mapping();
        item.set("apiVersion", Node::new_string("v1"));
        item.set("kind", Node::new_string("Pod"));
        assert_eq!(sdk::res_id(&item), "Pod.v1.[noGrp]/[noName].[noNs]");
        let mut metadata = Node::new_mapping();
        metadata.set("name", Node::new_string("web"));
        metadata.set("namespace", Node::new_string("prod"));
        item.set("metadata", metadata);
        item.set("apiVersion", Node::new_string("apps/v1"));
        assert_eq!(sdk::res_id(&item), "Pod.v1.apps/web.prod");
    }

    #[test]
    fn images_match_with_optional_tag_or_digest() {
        let image = Image {
            name: "nginx".to_owned(),
            new_name: String::new(),
            new_tag: "1.27".to_owned(),
            digest: String::new(),
        };
        assert_eq!(image.apply("nginx:1.2"), Some("nginx:1.27".to_owned()));
        assert_eq!(image.apply("nginx"), Some("nginx:1.27".to_owned()));
        assert_eq!(image.apply("nginx-exporter:1"), None);
        let renamed = Image {
            name: "nginx".to_owned(),
            new_name: "mirror/nginx".to_owned(),
            new_tag: String::new(),
            digest: String::new(),
        };
        assert_eq!(
            renamed.apply("nginx@sha256:ab"),
            Some("mirror/nginx@sha256:ab".to_owned())
        );
    }
}
