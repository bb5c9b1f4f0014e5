//! Copying comments from a function's input resource onto its output
//! (kyaml `comments.CopyComments`, spec §8.4 step 1).
//!
//! Functions often drop comments (they parse and re-serialise). kyaml walks
//! the input and output trees together and fills every *empty* comment slot
//! of the output from the matching input node:
//! - at the top, the input's raw node (its Document wrapper, when it has
//!   one) gives the output root mapping its head/line/foot comments, which is
//!   how a document head comment becomes a mapping head comment;
//! - mappings are matched field by field (first occurrence of each key),
//!   keys included; fields only in the input are skipped, fields only in the
//!   output are visited only for the folded-scalar rule below;
//! - sequences are matched by position, and only elements with the same
//!   `value` (scalars with unchanged text, or any two collections) get
//!   their comments — recursively, as a fresh copy;
//! - every output scalar the walk reaches that is folded (`>`) becomes
//!   double-quoted (an old kpt workaround);
//! - a node whose kind changed (mapping → scalar, …) fails the walk with
//!   kyaml's `wrong node kind` error.
//!
//! - for known Kubernetes kinds, lists with a merge patch strategy
//!   (containers by `name`, container ports by `containerPort`, env,
//!   volumes, Service ports by `port`, `metadata.finalizers` by value, …)
//!   are then also walked by merge key, which fills slots the positional
//!   pass left empty when a function reordered or inserted elements. The
//!   table of such lists is a subset of kyaml's built-in schema (see
//!   `Schema::list_key`).

use super::resource_list::{WireError, is_null, wrong_node_kind};
use crate::yaml::node::{Node, NodeKind, Style};

/// Copies comments from `from` (the input resource, Document or Mapping)
/// into the empty comment slots of `to` (the output resource).
pub fn copy_comments(from: &Node, to: &mut Node) -> Result<(), WireError> {
    let schema = Schema::for_resource(from);
    copy_with_schema(from, to, schema)
}

/// kyaml's `CopyComments` with the schema its walker finds for the source
/// (none for list elements copied by position, which start a fresh walk).
fn copy_with_schema(from: &Node, to: &mut Node, schema: Option<Schema>) -> Result<(), WireError> {
    // kyaml copies between the raw nodes (Document wrappers included) first;
    // its walk then visits the roots but fills the root mapping's own slots
    // from the raw nodes again, so a root's own comments are only involved
    // when there is no wrapper.
    fill_slots(from, to);
    let raw_roots = from.kind != NodeKind::Document && to.kind != NodeKind::Document;
    let to = to.root_mut();
    let mut walker = Walker {
        schema,
        path: Vec::new(),
    };
    if from.root().is_mapping() && to.is_mapping() {
        return walker.walk_map(Some(from.root()), Some(to), raw_roots);
    }
    walker.walk(Some(from.root()), Some(to))
}

/// kyaml's `copy`: each empty slot of `to` takes `from`'s text.
fn fill_slots(from: &Node, to: &mut Node) {
    to.fill_empty_comments(
        from.head_comment(),
        from.line_comment(),
        from.foot_comment(),
    );
}

/// kyaml `IsMissingOrNull`.
fn missing_or_null(node: Option<&Node>) -> bool {
    node.is_none_or(is_null)
}

/// kyaml's two-source `Walker` state: the resource's schema and the path
/// walked so far (`*` for list elements).
struct Walker {
    schema: Option<Schema>,
    path: Vec<String>,
}

impl Walker {
    /// One step of kyaml's two-source `Walker`: the kind comes from the first
    /// source that is present and not null; the other must match unless null.
    fn walk(&mut self, from: Option<&Node>, to: Option<&mut Node>) -> Result<(), WireError> {
        let kind = if !missing_or_null(from) {
            from.map(|node| node.kind)
        } else if !missing_or_null(to.as_deref()) {
            to.as_deref().map(|node| node.kind)
        } else {
            None
        };
        match kind {
            Some(NodeKind::Mapping) | None => {
                Self::check_kind(NodeKind::Mapping, from, to.as_deref())?;
                self.walk_map(from, to, true)
            }
            Some(NodeKind::Sequence) => {
                Self::check_kind(NodeKind::Sequence, from, to.as_deref())?;
                self.walk_list(from, to)
            }
            Some(NodeKind::Scalar) => {
                Self::check_kind(NodeKind::Scalar, from, to.as_deref())?;
                Self::visit_scalar(from, to);
                Ok(())
            }
            // Documents and aliases are not walked.
            Some(_) => Ok(()),
        }
    }

    /// kyaml `ErrorIfAnyInvalidAndNonNull` (the "empty nodes as maps" case
    /// checks nothing: both sources are null or missing there).
    fn check_kind(
        expected: NodeKind,
        from: Option<&Node>,
        to: Option<&Node>,
    ) -> Result<(), WireError> {
        for node in [from, to].into_iter().flatten() {
            if !is_null(node) && node.kind != expected {
                return Err(wrong_node_kind(expected, node));
            }
        }
        Ok(())
    }

    fn walk_map(
        &mut self,
        from: Option<&Node>,
        to: Option<&mut Node>,
        fill: bool,
    ) -> Result<(), WireError> {
        // kyaml's VisitMap copies the slots and returns the input node; with no
        // input node the walk stops here.
        let Some(from) = from else {
            return Ok(());
        };
        let Some(to) = to else {
            // Nothing to fill, but the input side would still be walked in
            // kyaml; that has no effect on the output.
            return Ok(());
        };
        if fill {
            fill_slots(from, to);
        }
        // Field names of both sides, sorted, each once.
        let mut names: Vec<String> = Vec::new();
        for node in [from, &*to] {
            if node.is_mapping() {
                names.extend(node.pairs().map(|(key, _)| key.value.as_str().to_owned()));
            }
        }
        names.sort();
        names.dedup();
        for name in names {
            let from_index = from.key_index(&name);
            let to_index = to.key_index(&name);
            // Keys are visited as scalars (null keys count as missing).
            let from_key = from_index
                .map(|i| &from.content[i])
                .filter(|key| !is_null(key));
            if let Some(i) = to_index {
                let (key, _) = Self::split_pair(&mut to.content, i);
                if !is_null(key) {
                    Self::visit_scalar(from_key, Some(key));
                }
            }
            let from_value = from_index.and_then(|i| from.content.get(i + 1));
            let to_value = to_index.and_then(|i| to.content.get_mut(i + 1));
            self.path.push(name);
            let walked = self.walk(from_value, to_value);
            self.path.pop();
            walked?;
        }
        Ok(())
    }

    fn split_pair(content: &mut [Node], i: usize) -> (&mut Node, Option<&mut Node>) {
        let (head, tail) = content.split_at_mut(i + 1);
        (&mut head[i], tail.first_mut())
    }

    /// kyaml `copier.VisitScalar`: a folded output scalar becomes double-quoted,
    /// then the slots are filled.
    fn visit_scalar(from: Option<&Node>, to: Option<&mut Node>) {
        let Some(to) = to else {
            return;
        };
        if to.style == Style::FOLDED {
            to.style = Style::DOUBLE_QUOTED;
        }
        if let Some(from) = from {
            fill_slots(from, to);
        }
    }

    /// kyaml `copier.VisitList`: the list's own slots, then a fresh recursive
    /// copy (without schema) for each same-position element whose `value` is
    /// unchanged. Lists the resource's schema marks as merge lists are then
    /// also walked element by element, matched by merge key (or by value for
    /// lists of scalars).
    fn walk_list(&mut self, from: Option<&Node>, to: Option<&mut Node>) -> Result<(), WireError> {
        let (Some(from), Some(to)) = (from, to) else {
            return Ok(());
        };
        fill_slots(from, to);
        for (from_item, to_item) in from.content.iter().zip(to.content.iter_mut()) {
            if from_item.value == to_item.value {
                copy_with_schema(from_item, to_item, None)?;
            }
        }
        let Some(key) = self.schema.and_then(|schema| schema.list_key(&self.path)) else {
            return Ok(());
        };
        self.path.push("*".to_owned());
        let walked = self.walk_keyed(from, to, key);
        self.path.pop();
        walked
    }

    /// kyaml `walkAssociativeSequence` for two sources: every key value seen
    /// in the input, then in the output, walks the first element with that
    /// value on each side.
    fn walk_keyed(&mut self, from: &Node, to: &mut Node, key: ListKey) -> Result<(), WireError> {
        let value_of = |item: &Node| -> Option<String> {
            match key {
                ListKey::Field(field) => item
                    .get(field)
                    .filter(|v| v.is_scalar())
                    .map(|v| v.value.as_str().to_owned()),
                ListKey::Scalar => item.is_scalar().then(|| item.value.as_str().to_owned()),
            }
        };
        let mut values: Vec<String> = Vec::new();
        for item in from.content.iter().chain(to.content.iter()) {
            if let Some(value) = value_of(item)
                && !values.contains(&value)
            {
                values.push(value);
            }
        }
        for value in values {
            let from_item = from
                .content
                .iter()
                .find(|item| value_of(item).as_deref() == Some(&value));
            let to_item = to
                .content
                .iter_mut()
                .find(|item| value_of(item).as_deref() == Some(&value));
            self.walk(from_item, to_item)?;
        }
        Ok(())
    }
}

/// How the elements of a merge list are matched.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ListKey {
    /// Mappings matched by this field's value.
    Field(&'static str),
    /// Scalars matched by value.
    Scalar,
}

/// The part of kyaml's built-in Kubernetes OpenAPI schema the comment walk
/// uses: which lists have a merge patch strategy, for the workload kinds
/// and Services (pod templates, containers, ports, env, volumes, …) and
/// object metadata. Custom resources and kpt's own kinds have no schema.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Schema {
    /// Path of the PodSpec inside the resource, if it has one.
    pod_spec: &'static [&'static str],
    service: bool,
}

impl Schema {
    fn for_resource(resource: &Node) -> Option<Schema> {
        let api_version = super::resource::api_version(resource)?;
        let kind = super::resource::kind(resource)?;
        const CORE_GROUPS: &[&str] = &[
            "v1",
            "apps/v1",
            "apps/v1beta1",
            "apps/v1beta2",
            "batch/v1",
            "batch/v1beta1",
            "extensions/v1beta1",
        ];
        if !CORE_GROUPS.contains(&api_version) {
            return None;
        }
        let pod_spec: &'static [&'static str] = match kind {
            "Pod" => &["spec"],
            "Deployment"
            | "StatefulSet"
            | "DaemonSet"
            | "ReplicaSet"
            | "ReplicationController"
            | "Job" => &["spec", "template", "spec"],
            "CronJob" => &["spec", "jobTemplate", "spec", "template", "spec"],
            "PodTemplate" => &["template", "spec"],
            "Service"
            | "ConfigMap"
            | "Secret"
            | "Namespace"
            | "ServiceAccount"
            | "PersistentVolumeClaim"
            | "Endpoints" => &[],
            _ => return None,
        };
        Some(Schema {
            pod_spec,
            service: kind == "Service",
        })
    }

    fn list_key(&self, path: &[String]) -> Option<ListKey> {
        let path: Vec<&str> = path.iter().map(String::as_str).collect();
        match path.as_slice() {
            ["metadata", "ownerReferences"] => return Some(ListKey::Field("uid")),
            ["metadata", "finalizers"] => return Some(ListKey::Scalar),
            ["spec", "ports"] if self.service => return Some(ListKey::Field("port")),
            _ => {}
        }
        if self.pod_spec.is_empty() {
            return None;
        }
        let rest = path.strip_prefix(self.pod_spec)?;
        const CONTAINERS: &[&str] = &["containers", "initContainers", "ephemeralContainers"];
        match rest {
            [list] if CONTAINERS.contains(list) => Some(ListKey::Field("name")),
            ["volumes" | "imagePullSecrets"] => Some(ListKey::Field("name")),
            ["hostAliases"] => Some(ListKey::Field("ip")),
            ["topologySpreadConstraints"] => Some(ListKey::Field("topologyKey")),
            [list, "*", field] if CONTAINERS.contains(list) => match *field {
                "ports" => Some(ListKey::Field("containerPort")),
                "env" => Some(ListKey::Field("name")),
                "volumeMounts" => Some(ListKey::Field("mountPath")),
                "volumeDevices" => Some(ListKey::Field("devicePath")),
                _ => None,
            },
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::copy_comments;
    use crate::yaml::node::{Node, Style, tag};

    fn scalar(value: &str) -> Node {
        Node::new_scalar(tag::STR, value)
    }

    fn map(pairs: Vec<(&str, Node)>) -> Node {
        let mut node = Node::new_mapping();
        for (key, value) in pairs {
            node.content.push(scalar(key));
            node.content.push(value);
        }
        node
    }

    #[test]
    fn fills_only_empty_slots_and_moves_document_comments_to_the_mapping() {
        let mut input_root = map(vec![("a", scalar("1")), ("b", scalar("2"))]);
        input_root.content[0].set_head_comment("# head a");
        input_root.content[1].set_line_comment("# line 1");
        input_root.content[3].set_line_comment("# old");
        let mut input = Node::new_document(input_root);
        input.set_head_comment("# file header");
        input.set_foot_comment("# file foot");

        let mut output = map(vec![
            ("b", scalar("2")),
            ("a", scalar("changed")),
            ("c", scalar("3")),
        ]);
        output.content[1].set_line_comment("# new");
        copy_comments(&input, &mut output).unwrap();

        assert_eq!(output.head_comment(), "# file header");
        assert_eq!(output.foot_comment(), "# file foot");
        assert_eq!(output.content[2].head_comment(), "# head a");
        assert_eq!(output.content[3].line_comment(), "# line 1");
        assert_eq!(output.content[1].line_comment(), "# new");
    }

    #[test]
    fn sequences_match_by_position_and_value() {
        let mut items = Node::new_sequence();
        for (value, comment) in [("first", "# c1"), ("second", "# c2"), ("third", "# c3")] {
            let mut item = scalar(value);
            item.set_line_comment(comment);
            items.content.push(item);
        }
        let input = map(vec![("list", items)]);
        let mut out_items = Node::new_sequence();
        out_items.content = crate::yaml::node::thin_vec![scalar("first"), scalar("third")];
        let mut output = map(vec![("list", out_items)]);
        copy_comments(&input, &mut output).unwrap();
        let list = output.get("list").unwrap();
        assert_eq!(list.content[0].line_comment(), "# c1");
        assert_eq!(list.content[1].line_comment(), "");
    }

    #[test]
    fn folded_becomes_double_quoted_even_in_new_fields() {
        let input = map(vec![("a", scalar("x"))]);
        let mut folded = scalar("text\n");
        folded.style = Style::FOLDED;
        let mut output = map(vec![("a", folded.clone()), ("new", folded)]);
        copy_comments(&input, &mut output).unwrap();
        assert_eq!(output.get("a").unwrap().style, Style::DOUBLE_QUOTED);
        assert_eq!(output.get("new").unwrap().style, Style::DOUBLE_QUOTED);
    }

    #[test]
    fn kind_change_is_an_error() {
        let input = map(vec![("spec", map(vec![("a", scalar("1"))]))]);
        let mut output = map(vec![("spec", scalar("oops"))]);
        let error = copy_comments(&input, &mut output).unwrap_err();
        assert_eq!(
            error.to_string(),
            "wrong node kind: expected MappingNode but got ScalarNode: node contents:\noops\n"
        );
    }
}
