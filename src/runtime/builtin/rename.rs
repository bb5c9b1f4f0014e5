//! The catalog's object rename with its reference walker, shared by `bind`
//! and `set-name-prefix` (`functions/go/bind/pkg/rename` and
//! `functions/go/bind/pkg/meta`, kpt Go SDK `KubeObject`s).
//!
//! `rename` renames (and renamespaces) one object, then walks every
//! reference in every object and points those naming the old object at the
//! new one. The walker knows three kinds of reference, visited per object
//! in this order:
//! - `metadata.namespace`, a reference to a `Namespace`;
//! - each `metadata.ownerReferences` entry (its namespace defaults to the
//!   object's), plus its `namespace` field as a `Namespace` reference;
//! - the hard-coded reference fields of `refs.go` for some Config
//!   Connector, RBAC and Porch kinds, resolved against `kinds.go`'s
//!   scope table; a reference with `external` set is skipped.
//!
//! As in Go, a reference the walker cannot make sense of (an owner
//! reference without a name, a kind `kinds.go` does not know, ...) stops
//! the whole walk with an error, and edits made before it stay.

use super::kube_object::{
    Gvk, get_string, go_string, name, namespace, nested_string, parse_group_version,
    set_nested_string, string_key_value, string_key_value_mut,
};
use super::sdk::go_quote;
use crate::yaml::node::Node;

/// `rename.Rename`: renames `items[object]` to `new_name` in
/// `new_namespace` and updates every reference to it in `items`.
pub(crate) fn rename(
    items: &mut [Node],
    object: usize,
    new_name: &str,
    new_namespace: &str,
) -> Result<(), String> {
    let Some(item) = items.get(object) else {
        return Ok(());
    };
    let spec = Spec {
        old_name: name(item),
        name: new_name.to_owned(),
        old_namespace: namespace(item),
        namespace: new_namespace.to_owned(),
        api_version: go_string(item.get("apiVersion")),
        kind: go_string(item.get("kind")),
    };
    spec.validate()?;
    spec.transform(items)
}

/// `rename.RenameSpec`.
struct Spec {
    old_name: String,
    name: String,
    old_namespace: String,
    namespace: String,
    api_version: String,
    kind: String,
}

impl Spec {
    fn validate(&self) -> Result<(), String> {
        for (value, field) in [
            (&self.old_name, "oldName"),
            (&self.name, "name"),
            (&self.api_version, "apiVersion"),
            (&self.kind, "kind"),
        ] {
            if value.is_empty() {
                return Err(format!("`{field}` is required"));
            }
        }
        Ok(())
    }

    fn transform(&self, items: &mut [Node]) -> Result<(), String> {
        let (group, version) = parse_group_version(&self.api_version).map_err(|err| {
            format!(
                "error parsing apiVersion {}: {err}",
                go_quote(&self.api_version)
            )
        })?;
        let target = Gvk::new(group, version, &self.kind);
        let matches: Vec<usize> = items
            .iter()
            .enumerate()
            .filter(|(_, item)| {
                name(item) == self.old_name
                    && namespace(item) == self.old_namespace
                    && Gvk::of(item).is_like(group, version, &self.kind)
            })
            .map(|(index, _)| index)
            .collect();
        let group_version = target.api_version();
        match matches.len() {
            0 => {
                return Err(format!(
                    "no object found matching {group_version}/{}:{}/{}",
                    self.kind, self.old_namespace, self.old_name
                ));
            }
            1 => {}
            // Go names the new namespace and name here.
            _ => {
                return Err(format!(
                    "multiple objects found matching {group_version}/{}:{}/{}",
                    self.kind, self.namespace, self.name
                ));
            }
        }
        for index in matches {
            let item = &mut items[index];
            // `KubeObject.SetName`/`SetNamespace`, their errors ignored; an
            // empty namespace is written too.
            let _ = set_nested_string(item, &["metadata", "name"], &self.name);
            let _ = set_nested_string(item, &["metadata", "namespace"], &self.namespace);
        }
        visit_refs(items, &mut |reference| {
            if reference.gvk.group != target.group || reference.gvk.kind != target.kind {
                return Ok(());
            }
            if reference.namespace != self.old_namespace || reference.name != self.old_name {
                return Ok(());
            }
            reference.set_name(&self.name);
            if self.namespace != self.old_namespace {
                reference.set_namespace(&self.namespace)?;
            }
            Ok(())
        })
    }
}

/// What a reference is, for its setters (`meta.Ref`'s implementations).
#[derive(Clone, Copy)]
enum RefKind {
    /// `namespaceRef`: a namespace name at this path.
    Namespace(&'static [&'static str]),
    /// `ownerRef`.
    Owner,
    /// `fullyQualifiedRef`, with the path of its namespace field if it can
    /// change namespace.
    Qualified(Option<&'static [&'static str]>),
}

/// A reference found by the walker (`meta.Ref`): what it points at, and
/// the mapping that holds it.
pub(crate) struct Ref<'a> {
    kind: RefKind,
    /// The target's kind (`GroupVersionKind()`).
    pub(crate) gvk: Gvk,
    /// `GetName()`.
    pub(crate) name: String,
    /// `GetNamespace()`.
    pub(crate) namespace: String,
    node: &'a mut Node,
}

const NAME: &[&str] = &["name"];
const NAMESPACE: &[&str] = &["namespace"];
const METADATA_NAMESPACE: &[&str] = &["metadata", "namespace"];

impl Ref<'_> {
    /// `SetName`: the name field (the namespace field of a `Namespace`
    /// reference) becomes `name`; the SDK's setter error is ignored.
    pub(crate) fn set_name(&mut self, name: &str) {
        let path = match self.kind {
            RefKind::Namespace(path) => path,
            RefKind::Owner | RefKind::Qualified(_) => NAME,
        };
        let _ = set_nested_string(self.node, path, name);
        self.name = name.to_owned();
    }

    /// `SetNamespace`, with each reference kind's refusal.
    pub(crate) fn set_namespace(&mut self, namespace: &str) -> Result<(), String> {
        match self.kind {
            RefKind::Namespace(_) => Err("cannot set namespace on Namespace ref".to_owned()),
            RefKind::Owner if namespace == self.namespace => Ok(()),
            RefKind::Owner => Err("cannot change namespace on ownerReference".to_owned()),
            RefKind::Qualified(None) => Err(format!(
                "ref does not support changing namespace: {}",
                self.gvk
            )),
            RefKind::Qualified(Some(path)) => {
                set_nested_string(self.node, path, namespace)?;
                self.namespace = namespace.to_owned();
                Ok(())
            }
        }
    }
}

/// A `Namespace` reference held at `path` of `node`.
fn namespace_ref<'a>(node: &'a mut Node, path: &'static [&'static str], name: String) -> Ref<'a> {
    Ref {
        kind: RefKind::Namespace(path),
        gvk: Gvk::new("", "v1", "Namespace"),
        name,
        namespace: String::new(),
        node,
    }
}

type Visitor<'v> = dyn FnMut(&mut Ref<'_>) -> Result<(), String> + 'v;

/// `meta.VisitRefs`: calls `visitor` on every reference in `items`, in
/// order; the first error (building a reference or from the visitor) ends
/// the walk.
pub(crate) fn visit_refs(items: &mut [Node], visitor: &mut Visitor<'_>) -> Result<(), String> {
    for object in items.iter_mut() {
        let gvk = Gvk::of(object);
        let object_namespace = namespace(object);
        if !object_namespace.is_empty() {
            visitor(&mut namespace_ref(
                object,
                METADATA_NAMESPACE,
                object_namespace,
            ))?;
        }
        visit_owner_references(object, visitor)?;
        // The fields below never hold the object's own namespace, so the
        // walk cannot change it: read it once.
        let parent_namespace = namespace(object);
        for info in REF_INFOS.iter().filter(|info| info.gvk_is(&gvk)) {
            visit_fields(object, info.path, info, &parent_namespace, visitor)?;
        }
    }
    Ok(())
}

/// One owner reference as `buildOwnerReferences` reads it.
struct OwnerRef {
    element: usize,
    gvk: Gvk,
    name: String,
    namespace: String,
    /// The `namespace` field, when the reference has a namespace.
    namespace_field: Option<String>,
}

/// `buildOwnerReferences` then a visit of each: all of an object's owner
/// references are read (and fail) before any is visited.
fn visit_owner_references(object: &mut Node, visitor: &mut Visitor<'_>) -> Result<(), String> {
    let parent_namespace = namespace(object);
    let mut owners = Vec::new();
    let elements = string_key_value(object, "metadata")
        .map_or(&[][..], |metadata| slice(metadata, "ownerReferences"));
    for (element, reference) in elements.iter().enumerate() {
        let mut owner_namespace = get_string(reference, "namespace");
        if owner_namespace.is_empty() {
            owner_namespace.clone_from(&parent_namespace);
        }
        let owner_name = get_string(reference, "name");
        if owner_name.is_empty() {
            return Err("expected name to be set".to_owned());
        }
        let api_version = get_string(reference, "apiVersion");
        if api_version.is_empty() {
            return Err("expected apiVersion to be set".to_owned());
        }
        let kind = get_string(reference, "kind");
        if kind.is_empty() {
            return Err("expected kind to be set".to_owned());
        }
        let (group, version) = parse_group_version(&api_version)
            .map_err(|err| format!("error parsing apiVersion {}: {err}", go_quote(&api_version)))?;
        // Go then reads the reference's own `namespace` field as a
        // Namespace reference, which fails when the namespace came from
        // the object instead.
        let namespace_field = if owner_namespace.is_empty() {
            None
        } else {
            let field = get_string(reference, "namespace");
            if field.is_empty() {
                return Err("expected namespace to be set".to_owned());
            }
            Some(field)
        };
        owners.push(OwnerRef {
            element,
            gvk: Gvk::new(group, version, &kind),
            name: owner_name,
            namespace: owner_namespace,
            namespace_field,
        });
    }
    for owner in owners {
        let Some(node) = string_key_value_mut(object, "metadata")
            .and_then(|metadata| slice_mut(metadata, "ownerReferences"))
            .and_then(|elements| elements.get_mut(owner.element))
        else {
            continue;
        };
        visitor(&mut Ref {
            kind: RefKind::Owner,
            gvk: owner.gvk,
            name: owner.name,
            namespace: owner.namespace,
            node: &mut *node,
        })?;
        if let Some(field) = owner.namespace_field {
            visitor(&mut namespace_ref(node, NAMESPACE, field))?;
        }
    }
    Ok(())
}

/// `visitFields`: follows `fields` (`name[]` walks each element of a
/// list) down to the reference mappings of `info`.
fn visit_fields(
    node: &mut Node,
    fields: &[&str],
    info: &RefInfo,
    parent_namespace: &str,
    visitor: &mut Visitor<'_>,
) -> Result<(), String> {
    let Some((field, rest)) = fields.split_first() else {
        if !get_string(node, "external").is_empty() {
            return Ok(());
        }
        let (gvk, name, namespace) = info.qualified_ref(node, parent_namespace)?;
        visitor(&mut Ref {
            kind: RefKind::Qualified(info.namespace_path),
            gvk,
            name,
            namespace,
            node: &mut *node,
        })?;
        if let Some(path) = info.namespace_path {
            // Read again: the visit may have changed it.
            let referenced = if node.is_mapping() {
                nested_string(node, path).unwrap_or_default()
            } else {
                String::new()
            };
            if !referenced.is_empty() {
                visitor(&mut namespace_ref(node, path, referenced))?;
            }
        }
        return Ok(());
    };
    if let Some(list) = field.strip_suffix("[]") {
        for element in slice_mut(node, list).unwrap_or_default() {
            visit_fields(element, rest, info, parent_namespace, visitor)?;
        }
        return Ok(());
    }
    match string_key_value_mut(node, field) {
        Some(child) => visit_fields(child, rest, info, parent_namespace, visitor),
        None => Ok(()),
    }
}

/// `SubObject.GetSlice(key)`: the elements of a list of mappings; empty
/// when the key is missing, is not a list, or holds something other than
/// mappings.
fn slice<'a>(node: &'a Node, key: &str) -> &'a [Node] {
    match string_key_value(node, key) {
        Some(list) if list.is_sequence() && list.content.iter().all(Node::is_mapping) => {
            &list.content
        }
        _ => &[],
    }
}

/// [`slice`], for editing.
fn slice_mut<'a>(node: &'a mut Node, key: &str) -> Option<&'a mut [Node]> {
    let list = string_key_value_mut(node, key)?;
    (list.is_sequence() && list.content.iter().all(Node::is_mapping))
        .then_some(&mut list.content[..])
}

/// One entry of `refs.go`: a reference field of a kind.
struct RefInfo {
    /// The referring kind: group, version, kind.
    gvk: (&'static str, &'static str, &'static str),
    /// `FieldPath` as written (for messages).
    field_path: &'static str,
    /// `FieldPath` split at `.`.
    path: &'static [&'static str],
    /// The kinds it may point at (none: any, named by the reference).
    targets: &'static [(&'static str, &'static str, &'static str)],
    /// `NamespaceFieldPath` split at `.`.
    namespace_path: Option<&'static [&'static str]>,
}

impl RefInfo {
    fn gvk_is(&self, gvk: &Gvk) -> bool {
        let (group, version, kind) = self.gvk;
        gvk.group == group && gvk.version == version && gvk.kind == kind
    }

    fn own_gvk(&self) -> Gvk {
        Gvk::new(self.gvk.0, self.gvk.1, self.gvk.2)
    }

    /// `buildFullyQualifiedRef`: the target kind, name and namespace of
    /// the reference mapping `node`.
    fn qualified_ref(
        &self,
        node: &Node,
        parent_namespace: &str,
    ) -> Result<(Gvk, String, String), String> {
        let name = get_string(node, "name");
        let mut namespace = get_string(node, "namespace");
        let mut api_version = get_string(node, "apiVersion");
        let api_group = get_string(node, "apiGroup");
        let mut kind = get_string(node, "kind");
        let as_gvk = |(group, version, kind): (&str, &str, &str)| Gvk::new(group, version, kind);
        if kind.is_empty() || api_version.is_empty() {
            if self.targets.is_empty() {
                let missing = if kind.is_empty() {
                    "kind"
                } else {
                    "apiVersion"
                };
                return Err(format!(
                    "expected {missing} to be specified in ref {}:{}",
                    self.own_gvk(),
                    self.field_path
                ));
            }
            let mut targets: Vec<Gvk> = self.targets.iter().copied().map(as_gvk).collect();
            if !kind.is_empty() {
                targets.retain(|target| {
                    target.kind == kind && (api_group.is_empty() || target.group == api_group)
                });
                if targets.is_empty() {
                    return Err(format!(
                        "unexpected target kind={}, group={}",
                        go_quote(&kind),
                        go_quote(&api_group)
                    ));
                }
            }
            let [target] = &targets[..] else {
                return Err("found multiple target kinds".to_owned());
            };
            if kind.is_empty() {
                kind.clone_from(&target.kind);
            }
            if api_version.is_empty() {
                api_version = target.api_version();
            }
        }
        let (group, version) = parse_group_version(&api_version)
            .map_err(|err| format!("error parsing apiVersion {}: {err}", go_quote(&api_version)))?;
        let target = Gvk::new(group, version, &kind);
        if let [only] = self.targets {
            let want = as_gvk(*only);
            if want != target {
                return Err(format!(
                    "unexpected GVK for path {}: got {target} want {want}",
                    go_quote(self.field_path)
                ));
            }
        }
        let cluster_scoped = is_cluster_scoped(&target)?;
        if namespace.is_empty() && !cluster_scoped {
            namespace = parent_namespace.to_owned();
        }
        if cluster_scoped && !namespace.is_empty() {
            return Err(format!(
                "namespace not expected on cluster-scoped kind {target}"
            ));
        }
        if name.is_empty() {
            return Err("name not set on reference".to_owned());
        }
        Ok((target, name, namespace))
    }
}

const CONTAINER_CLUSTER: (&str, &str, &str) = (
    "container.cnrm.cloud.google.com",
    "v1beta1",
    "ContainerCluster",
);
const CONTAINER_NODE_POOL: (&str, &str, &str) = (
    "container.cnrm.cloud.google.com",
    "v1beta1",
    "ContainerNodePool",
);
const IAM_POLICY_MEMBER: (&str, &str, &str) =
    ("iam.cnrm.cloud.google.com", "v1beta1", "IAMPolicyMember");
const IAM_PARTIAL_POLICY: (&str, &str, &str) =
    ("iam.cnrm.cloud.google.com", "v1beta1", "IAMPartialPolicy");
const IAM_SERVICE_ACCOUNT: (&str, &str, &str) =
    ("iam.cnrm.cloud.google.com", "v1beta1", "IAMServiceAccount");
const FOLDER: (&str, &str, &str) = ("resourcemanager.cnrm.cloud.google.com", "v1beta1", "Folder");
const PROJECT: (&str, &str, &str) = (
    "resourcemanager.cnrm.cloud.google.com",
    "v1beta1",
    "Project",
);
const SERVICE: (&str, &str, &str) = ("serviceusage.cnrm.cloud.google.com", "v1beta1", "Service");
const RBAC: &str = "rbac.authorization.k8s.io";
const ROLE_BINDING: (&str, &str, &str) = (RBAC, "v1", "RoleBinding");
const ROLE: (&str, &str, &str) = (RBAC, "v1", "Role");
const CLUSTER_ROLE: (&str, &str, &str) = (RBAC, "v1", "ClusterRole");
const SERVICE_ACCOUNT: (&str, &str, &str) = ("", "v1", "ServiceAccount");
const WORKLOAD_IDENTITY_BINDING: (&str, &str, &str) = (
    "config.porch.kpt.dev",
    "v1alpha1",
    "WorkloadIdentityBinding",
);

/// `refs.go`'s `refInfos`, in its order.
const REF_INFOS: &[RefInfo] = &[
    RefInfo {
        gvk: CONTAINER_NODE_POOL,
        field_path: "spec.clusterRef",
        path: &["spec", "clusterRef"],
        targets: &[CONTAINER_CLUSTER],
        namespace_path: None,
    },
    RefInfo {
        gvk: CONTAINER_NODE_POOL,
        field_path: "spec.nodeConfig.serviceAccountRef",
        path: &["spec", "nodeConfig", "serviceAccountRef"],
        targets: &[IAM_SERVICE_ACCOUNT],
        namespace_path: None,
    },
    RefInfo {
        gvk: IAM_POLICY_MEMBER,
        field_path: "spec.memberFrom.serviceAccountRef",
        path: &["spec", "memberFrom", "serviceAccountRef"],
        targets: &[IAM_SERVICE_ACCOUNT],
        namespace_path: None,
    },
    RefInfo {
        gvk: FOLDER,
        field_path: "spec.folderRef",
        path: &["spec", "folderRef"],
        targets: &[FOLDER],
        namespace_path: Some(NAMESPACE),
    },
    RefInfo {
        gvk: PROJECT,
        field_path: "spec.folderRef",
        path: &["spec", "folderRef"],
        targets: &[FOLDER],
        namespace_path: Some(NAMESPACE),
    },
    RefInfo {
        gvk: IAM_POLICY_MEMBER,
        field_path: "spec.resourceRef",
        path: &["spec", "resourceRef"],
        targets: &[],
        namespace_path: Some(NAMESPACE),
    },
    RefInfo {
        gvk: IAM_PARTIAL_POLICY,
        field_path: "spec.resourceRef",
        path: &["spec", "resourceRef"],
        targets: &[],
        namespace_path: None,
    },
    RefInfo {
        gvk: IAM_PARTIAL_POLICY,
        field_path: "spec.bindings[].members[].memberFrom.serviceAccountRef",
        path: &[
            "spec",
            "bindings[]",
            "members[]",
            "memberFrom",
            "serviceAccountRef",
        ],
        targets: &[IAM_SERVICE_ACCOUNT],
        namespace_path: None,
    },
    RefInfo {
        gvk: SERVICE,
        field_path: "spec.projectRef",
        path: &["spec", "projectRef"],
        targets: &[PROJECT],
        namespace_path: Some(NAMESPACE),
    },
    RefInfo {
        gvk: ROLE_BINDING,
        field_path: "roleRef",
        path: &["roleRef"],
        targets: &[ROLE, CLUSTER_ROLE],
        namespace_path: None,
    },
    RefInfo {
        gvk: ROLE_BINDING,
        field_path: "subjects[]",
        path: &["subjects[]"],
        targets: &[(RBAC, "v1", "User"), (RBAC, "v1", "Group"), SERVICE_ACCOUNT],
        namespace_path: None,
    },
    RefInfo {
        gvk: WORKLOAD_IDENTITY_BINDING,
        field_path: "spec.resourceRef",
        path: &["spec", "resourceRef"],
        targets: &[IAM_SERVICE_ACCOUNT],
        namespace_path: None,
    },
    RefInfo {
        gvk: WORKLOAD_IDENTITY_BINDING,
        field_path: "spec.serviceAccountRef",
        path: &["spec", "serviceAccountRef"],
        targets: &[SERVICE_ACCOUNT],
        namespace_path: Some(NAMESPACE),
    },
];

/// `kinds.go`'s `kindInfos`: the kinds whose scope the walker knows, and
/// whether each is cluster-scoped.
const KIND_INFOS: &[((&str, &str, &str), bool)] = &[
    (CONTAINER_CLUSTER, false),
    (CONTAINER_NODE_POOL, false),
    (IAM_POLICY_MEMBER, false),
    (IAM_SERVICE_ACCOUNT, false),
    (PROJECT, false),
    (FOLDER, false),
    (CLUSTER_ROLE, true),
    (ROLE, false),
    (SERVICE_ACCOUNT, false),
    (WORKLOAD_IDENTITY_BINDING, false),
];

/// `meta.IsClusterScoped`.
fn is_cluster_scoped(gvk: &Gvk) -> Result<bool, String> {
    KIND_INFOS
        .iter()
        .find(|((group, version, kind), _)| {
            gvk.group == *group && gvk.version == *version && gvk.kind == *kind
        })
        .map(|(_, cluster_scoped)| *cluster_scoped)
        .ok_or_else(|| format!("kind {gvk} not known"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::yaml::parse_document;
    use crate::yaml::{SeqIndent, to_string};

    fn items(text: &str) -> Vec<Node> {
        text.split("\n---\n")
            .map(|doc| parse_document(doc).unwrap().unwrap().into_root())
            .collect()
    }

    /// Renames `items[0]` and returns the error, or the items as YAML.
    fn renamed(text: &str, name: &str, namespace: &str) -> Result<String, String> {
        let mut items = items(text);
        rename(&mut items, 0, name, namespace)?;
        Ok(items
            .iter()
            .map(|item| to_string(item, SeqIndent::Compact))
            .collect::<Vec<_>>()
            .join("---\n"))
    }

    fn error(text: &str, name: &str, namespace: &str) -> String {
        renamed(text, name, namespace).unwrap_err()
    }

    const SA: &str =
        "apiVersion: v1\nkind: ServiceAccount\nmetadata:\n  name: sa\n  namespace: ns\n";

    #[test]
    fn spec_errors_are_the_functions() {
        assert_eq!(
            error(
                "apiVersion: v1\nkind: ServiceAccount\nmetadata: {}\n",
                "x",
                ""
            ),
            "`oldName` is required"
        );
        assert_eq!(error(SA, "", "ns"), "`name` is required");
        assert_eq!(
            error("kind: ServiceAccount\nmetadata:\n  name: sa\n", "x", ""),
            "`apiVersion` is required"
        );
        assert_eq!(
            error("apiVersion: v1\nmetadata:\n  name: sa\n", "x", ""),
            "`kind` is required"
        );
        assert_eq!(
            error(
                "apiVersion: a/b/c\nkind: K\nmetadata:\n  name: sa\n",
                "x",
                ""
            ),
            "error parsing apiVersion \"a/b/c\": unexpected GroupVersion string: a/b/c"
        );
        // IsGVK matches an object without apiVersion too; Go then names
        // the new name and namespace.
        assert_eq!(
            error(
                &format!("{SA}---\nkind: ServiceAccount\nmetadata:\n  name: sa\n  namespace: ns\n"),
                "new",
                "other"
            ),
            "multiple objects found matching v1/ServiceAccount:other/new"
        );
        let spec = Spec {
            old_name: "gone".to_owned(),
            name: "x".to_owned(),
            old_namespace: "ns".to_owned(),
            namespace: "ns".to_owned(),
            api_version: "apps/v1".to_owned(),
            kind: "Deployment".to_owned(),
        };
        assert_eq!(
            spec.transform(&mut items(SA)).unwrap_err(),
            "no object found matching apps/v1/Deployment:ns/gone"
        );
    }

    #[test]
    fn an_empty_namespace_is_written_and_core_kinds_match_any_group() {
        let out = renamed(
            "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata:\n  name: reader # keep\n",
            "viewer",
            "",
        )
        .unwrap();
        assert_eq!(
            out,
            "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata:\n  name: viewer # keep\n  namespace: \"\"\n"
        );
    }

    #[test]
    fn namespace_references_follow_a_renamed_namespace() {
        let out = renamed(
            "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: old\n---\n\
             apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\n  namespace: old\n",
            "new",
            "",
        )
        .unwrap();
        assert!(
            out.ends_with("kind: ConfigMap\nmetadata:\n  name: c\n  namespace: new\n"),
            "{out}"
        );
        // A Namespace reference cannot change namespace.
        assert_eq!(
            error(
                "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: old\n---\n\
                   apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\n  namespace: old\n",
                "new",
                "x"
            ),
            "cannot set namespace on Namespace ref"
        );
    }

    const OWNED: &str = "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\n---\n\
                         apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\n  ownerReferences:\n";

    #[test]
    fn owner_references_are_renamed_and_checked() {
        let out = renamed(
            &format!("{OWNED}  - apiVersion: apps/v1\n    kind: Deployment\n    name: web\n"),
            "api",
            "",
        )
        .unwrap();
        assert!(
            out.contains("  - apiVersion: apps/v1\n    kind: Deployment\n    name: api\n"),
            "{out}"
        );
        for (reference, message) in [
            (
                "  - apiVersion: apps/v1\n    kind: Deployment\n",
                "expected name to be set",
            ),
            (
                "  - kind: Deployment\n    name: web\n",
                "expected apiVersion to be set",
            ),
            (
                "  - apiVersion: apps/v1\n    name: web\n",
                "expected kind to be set",
            ),
            (
                "  - apiVersion: a/b/c\n    kind: Deployment\n    name: web\n",
                "error parsing apiVersion \"a/b/c\": unexpected GroupVersion string: a/b/c",
            ),
            (
                "  - apiVersion: apps/v1\n    kind: Deployment\n    name: web\n    namespace: ns\n",
                "",
            ),
        ] {
            let got = renamed(&format!("{OWNED}{reference}"), "api", "");
            assert_eq!(got.err().unwrap_or_default(), message, "{reference}");
        }
        // Moving the owner to another namespace is refused.
        assert_eq!(
            error(
                &format!("{OWNED}  - apiVersion: apps/v1\n    kind: Deployment\n    name: web\n"),
                "web",
                "prod"
            ),
            "cannot change namespace on ownerReference"
        );
    }

    fn binding(role_ref: &str) -> String {
        format!(
            "apiVersion: rbac.authorization.k8s.io/v1\nkind: Role\nmetadata:\n  name: r\n  namespace: ns\n---\n\
             apiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\nmetadata:\n  name: b\n  namespace: ns\n\
             roleRef:\n{role_ref}"
        )
    }

    #[test]
    fn qualified_reference_errors_are_the_functions() {
        for (role_ref, message) in [
            ("  name: r\n", "found multiple target kinds"),
            (
                "  kind: Other\n  name: r\n",
                "unexpected target kind=\"Other\", group=\"\"",
            ),
            (
                "  kind: ClusterRole\n  name: r\n  namespace: ns\n",
                "namespace not expected on cluster-scoped kind rbac.authorization.k8s.io/v1, Kind=ClusterRole",
            ),
            ("  kind: Role\n", "name not set on reference"),
            (
                "  kind: Role\n  apiVersion: a/b/c\n  name: r\n",
                "error parsing apiVersion \"a/b/c\": unexpected GroupVersion string: a/b/c",
            ),
            (
                "  apiVersion: example.com/v1\n  kind: Role\n  name: r\n",
                "kind example.com/v1, Kind=Role not known",
            ),
            // A null reference reads as an empty mapping.
            ("  null\n", "found multiple target kinds"),
        ] {
            let text = binding(role_ref).replace("roleRef:\n  null\n", "roleRef: null\n");
            assert_eq!(error(&text, "r2", "ns"), message, "{role_ref}");
        }
        let out = renamed(
            &binding("  apiGroup: rbac.authorization.k8s.io\n  kind: Role\n  name: r\n"),
            "r2",
            "ns",
        )
        .unwrap();
        assert!(
            out.ends_with(
                "roleRef:\n  apiGroup: rbac.authorization.k8s.io\n  kind: Role\n  name: r2\n"
            ),
            "{out}"
        );
        let policy = |reference: &str| {
            format!(
                "{SA}---\napiVersion: iam.cnrm.cloud.google.com/v1beta1\nkind: IAMPartialPolicy\n\
                 metadata:\n  name: p\n  namespace: ns\nspec:\n  resourceRef:\n{reference}"
            )
        };
        assert_eq!(
            error(&policy("    name: sa\n"), "sa2", "ns"),
            "expected kind to be specified in ref iam.cnrm.cloud.google.com/v1beta1, Kind=IAMPartialPolicy:spec.resourceRef"
        );
        assert_eq!(
            error(
                &policy("    kind: ServiceAccount\n    name: sa\n"),
                "sa2",
                "ns"
            ),
            "expected apiVersion to be specified in ref iam.cnrm.cloud.google.com/v1beta1, Kind=IAMPartialPolicy:spec.resourceRef"
        );
        // `external` references are left alone.
        assert!(renamed(&policy("    external: projects/p\n"), "sa2", "ns").is_ok());
        let pool = |reference: &str| {
            format!(
                "{SA}---\napiVersion: container.cnrm.cloud.google.com/v1beta1\nkind: ContainerNodePool\n\
                 metadata:\n  name: p\n  namespace: ns\nspec:\n  clusterRef:\n{reference}"
            )
        };
        assert_eq!(
            error(
                &pool(
                    "    apiVersion: container.cnrm.cloud.google.com/v1\n    kind: ContainerCluster\n    name: c\n"
                ),
                "sa2",
                "ns"
            ),
            "unexpected GVK for path \"spec.clusterRef\": got container.cnrm.cloud.google.com/v1, Kind=ContainerCluster want container.cnrm.cloud.google.com/v1beta1, Kind=ContainerCluster"
        );
    }

    #[test]
    fn list_fields_walk_mapping_elements_only() {
        let policy = |members: &str| {
            format!(
                "apiVersion: iam.cnrm.cloud.google.com/v1beta1\nkind: IAMServiceAccount\nmetadata:\n  name: sa\n  namespace: ns\n---\n\
                 apiVersion: iam.cnrm.cloud.google.com/v1beta1\nkind: IAMPartialPolicy\n\
                 metadata:\n  name: p\n  namespace: ns\nspec:\n  resourceRef:\n    external: x\n  bindings:\n  - members:\n{members}"
            )
        };
        let out = renamed(&policy("    - memberFrom:\n        serviceAccountRef:\n          name: sa\n    - member: user:a\n"), "sa2", "ns").unwrap();
        assert!(
            out.contains("serviceAccountRef:\n          name: sa2\n"),
            "{out}"
        );
        // A list holding a non-mapping is not walked at all.
        let out = renamed(
            &policy(
                "    - memberFrom:\n        serviceAccountRef:\n          name: sa\n    - plain\n",
            ),
            "sa2",
            "ns",
        )
        .unwrap();
        assert!(
            out.contains("serviceAccountRef:\n          name: sa\n"),
            "{out}"
        );
    }
}
