//! Items: a resource as a render tracks it between runs without its tree —
//! the blake3 of its relocatable form and the few facts kpt's bookkeeping
//! reads (its identity for the SDK's sort, its package, path and index,
//! whether it is KRM, whether a native builtin may take it) — so that a run
//! can combine, order, check and route resources it never decodes, and a
//! store can keep each distinct resource once.
//!
//! The relocatable form is the node's canonical binary form
//! ([`crate::yaml::binary::encode_canonical`]: source positions left out)
//! with the `package-path` annotation written relative to the render root:
//! the same tree checked out at another path has the same digests. Reading
//! a form back ([`decode_item`]) puts the root in front again.

use std::path::Path;
use std::sync::Arc;

use crate::krm::resource;
use crate::pkg::kptfile;
use crate::runtime::function_filter::native_facts;
use crate::yaml::binary::{decode_canonical, encode_canonical};
use crate::yaml::node::Node;

/// The blake3 of some bytes: a resource's relocatable form, a list of
/// digests, a stored value.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct Digest(pub [u8; 32]);

impl Digest {
    /// The digest of `bytes`.
    pub fn of(bytes: &[u8]) -> Digest {
        Digest(*blake3::hash(bytes).as_bytes())
    }

    /// Lowercase hex.
    pub fn to_hex(&self) -> String {
        blake3::Hash::from_bytes(self.0).to_hex().to_string()
    }

    /// Parses [`Digest::to_hex`]'s form.
    pub fn from_hex(text: &str) -> Option<Digest> {
        blake3::Hash::from_hex(text)
            .ok()
            .map(|hash| Digest(*hash.as_bytes()))
    }
}

impl std::fmt::Debug for Digest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Twelve hex digits tell digests apart in logs and test failures.
        let hex = self.to_hex();
        f.write_str(hex.get(..12).unwrap_or(&hex))
    }
}

impl std::fmt::Display for Digest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.to_hex())
    }
}

/// Digests of a list of digests, in order: what a package's output, or a
/// file's resources, are known by.
pub fn list_digest<'a>(digests: impl IntoIterator<Item = &'a Digest>) -> Digest {
    let mut hasher = blake3::Hasher::new();
    for digest in digests {
        hasher.update(&digest.0);
    }
    Digest(*hasher.finalize().as_bytes())
}

/// One resource of a run, by digest, with what the host reads of it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Item {
    /// The digest of its relocatable form.
    pub digest: Digest,
    /// What the host's bookkeeping reads.
    pub meta: Arc<ItemMeta>,
}

/// What kpt's bookkeeping reads of a resource: the parts of it that decide
/// an output's order, its file, the path checks and whether a native
/// builtin may take it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ItemMeta {
    /// `"<apiVersion> <kind> <namespace> <name>"`: the kpt Go SDK's sort key.
    pub sort_key: String,
    /// Its package, relative to the render root (`""` for the root), or
    /// the annotation as written when it is not below the root.
    pub package: String,
    /// `internal.config.kubernetes.io/path` as written (empty when absent).
    pub path: String,
    /// `internal.config.kubernetes.io/index` as written.
    pub index: String,
    /// [`ItemFlags`] bits.
    pub flags: u8,
}

/// Bits of [`ItemMeta::flags`].
pub struct ItemFlags;

impl ItemFlags {
    /// kpt's KRM check passes (or the resource is a Kustomization file).
    pub const KRM: u8 = 1;
    /// The package-path annotation was below the root, and is stored
    /// relative to it.
    pub const RELOCATED: u8 = 2;
    /// It survives go-yaml's round trip (no foot comment, no folded
    /// scalar): a native builtin may run on it.
    pub const SURVIVES_WIRE: u8 = 4;
    /// Every mapping has distinct plain keys.
    pub const PLAIN_KEYS: u8 = 8;
    /// Its path and index bookkeeping is what a call would leave it as.
    pub const SETTLED: u8 = 16;
    /// It has a package-path annotation.
    pub const HAS_PACKAGE: u8 = 32;
}

impl ItemMeta {
    /// Whether all of `bits` are set.
    pub fn has(&self, bits: u8) -> bool {
        self.flags & bits == bits
    }
}

/// The render root as package-path annotations spell it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RootPath(String);

impl RootPath {
    /// The root at `root` (an absolute, lexically clean path).
    pub fn new(root: &Path) -> RootPath {
        RootPath(root.display().to_string())
    }

    /// `annotation` relative to the root, when it is the root or below it.
    fn relative<'a>(&self, annotation: &'a str) -> Option<&'a str> {
        let rest = annotation.strip_prefix(self.0.as_str())?;
        if rest.is_empty() {
            return Some("");
        }
        rest.strip_prefix('/').filter(|rest| !rest.is_empty())
    }

    /// The annotation for a package `relative` to the root.
    pub fn join(&self, relative: &str) -> String {
        if relative.is_empty() {
            self.0.clone()
        } else {
            format!("{}/{relative}", self.0)
        }
    }
}

/// The item of `node` and its relocatable form (whose blake3 is the
/// digest).
pub fn item_of(node: &Node, root: &RootPath) -> (Item, Vec<u8>) {
    let annotations = resource::annotations(node);
    let package_node = annotations
        .and_then(|annotations| annotations.get(resource::PACKAGE_PATH))
        .filter(|value| value.is_scalar());
    let relative = package_node.and_then(|value| root.relative(&value.value));
    let mut flags = 0;
    let package = match (package_node, relative) {
        (Some(_), Some(relative)) => {
            flags |= ItemFlags::RELOCATED | ItemFlags::HAS_PACKAGE;
            relative.to_owned()
        }
        (Some(value), None) => {
            flags |= ItemFlags::HAS_PACKAGE;
            value.value.to_string()
        }
        (None, _) => String::new(),
    };
    let mut blob = Vec::with_capacity(1024);
    blob.push(flags & ItemFlags::RELOCATED);
    let replace = package_node.zip(relative);
    encode_canonical(node, replace, &mut blob);
    let facts = native_facts(node);
    for (set, bit) in [
        (is_krm(node), ItemFlags::KRM),
        (facts.survives_wire, ItemFlags::SURVIVES_WIRE),
        (facts.plain_keys, ItemFlags::PLAIN_KEYS),
        (facts.settled, ItemFlags::SETTLED),
    ] {
        if set {
            flags |= bit;
        }
    }
    let (api_version, kind, namespace, name) = resource::sdk_identity(node.root());
    let meta = ItemMeta {
        sort_key: format!("{api_version} {kind} {namespace} {name}"),
        package,
        path: resource::annotation_in(annotations, resource::PATH).to_owned(),
        index: resource::annotation_in(annotations, resource::INDEX).to_owned(),
        flags,
    };
    let item = Item {
        digest: Digest::of(&blob),
        meta: Arc::new(meta),
    };
    (item, blob)
}

/// The node a relocatable form was made from, with the package path under
/// `root`; `None` when the bytes are not such a form.
pub fn decode_item(blob: &[u8], root: &RootPath) -> Option<Node> {
    let (&flags, rest) = blob.split_first()?;
    let mut node = decode_canonical(rest)?;
    if flags & ItemFlags::RELOCATED != 0 {
        // The value node itself is rewritten: its style and tag stay.
        let value = node
            .root_mut()
            .get_mut("metadata")?
            .get_mut("annotations")?
            .get_mut(resource::PACKAGE_PATH)?;
        value.value = root.join(&value.value).into();
    }
    Some(node)
}

/// kpt's KRM check on one resource, Kustomization files exempt.
pub(crate) fn is_krm(node: &Node) -> bool {
    is_kustomization(node) || kptfile::check_krm(node).is_ok()
}

/// Whether `node` was read from a Kustomization file.
pub(crate) fn is_kustomization(node: &Node) -> bool {
    let path = resource::annotation(node, resource::PATH).unwrap_or("");
    let base = path.rsplit('/').next().unwrap_or(path);
    matches!(
        base,
        "kustomization.yaml" | "kustomization.yml" | "Kustomization"
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::yaml::parse_documents;

    fn resource(package: &str) -> Node {
        let text = format!(
            "# head\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm # line\n  annotations:\n    internal.config.kubernetes.io/path: 'cm.yaml'\n    internal.config.kubernetes.io/index: '0'\n    config.kubernetes.io/path: 'cm.yaml'\n    config.kubernetes.io/index: '0'\n    internal.config.kubernetes.io/package-path: '{package}'\ndata:\n  a: b\n"
        );
        parse_documents(&text).unwrap().remove(0)
    }

    #[test]
    fn a_resource_has_the_same_digest_at_any_checkout_path() {
        let here = RootPath::new(Path::new("/work/a/repo"));
        let there = RootPath::new(Path::new("/home/b/checkout"));
        let (item_here, blob) = item_of(&resource("/work/a/repo/team/app"), &here);
        let (item_there, _) = item_of(&resource("/home/b/checkout/team/app"), &there);
        assert_eq!(item_here, item_there);
        assert_eq!(item_here.meta.package, "team/app");
        assert_eq!(item_here.meta.sort_key, "v1 ConfigMap  cm");
        assert_eq!(item_here.meta.path, "cm.yaml");
        assert!(
            item_here
                .meta
                .has(ItemFlags::KRM | ItemFlags::SETTLED | ItemFlags::RELOCATED)
        );
        // Read back under the other root, it is the other checkout's node.
        let decoded = decode_item(&blob, &there).unwrap();
        assert!(decoded.same_content(&resource("/home/b/checkout/team/app")));
        // The root package itself.
        let (root_item, blob) = item_of(&resource("/work/a/repo"), &here);
        assert_eq!(root_item.meta.package, "");
        let decoded = decode_item(&blob, &there).unwrap();
        assert_eq!(
            resource::annotation(&decoded, resource::PACKAGE_PATH),
            Some("/home/b/checkout")
        );
    }

    #[test]
    fn a_package_outside_the_root_is_kept_as_written() {
        let root = RootPath::new(Path::new("/work/a/repo"));
        for outside in ["/work/a/repository", "/elsewhere", ""] {
            let (item, blob) = item_of(&resource(outside), &root);
            assert_eq!(item.meta.package, outside);
            assert!(!item.meta.has(ItemFlags::RELOCATED));
            let other = RootPath::new(Path::new("/x"));
            let decoded = decode_item(&blob, &other).unwrap();
            assert_eq!(
                resource::annotation(&decoded, resource::PACKAGE_PATH),
                Some(outside)
            );
        }
    }

    #[test]
    fn content_changes_the_digest_and_positions_do_not() {
        let root = RootPath::new(Path::new("/r"));
        let (base, _) = item_of(&resource("/r"), &root);
        let mut edited = resource("/r");
        edited.root_mut().content[1].value = "Secret".into();
        assert_ne!(item_of(&edited, &root).0.digest, base.digest);
        let mut moved = resource("/r");
        moved.root_mut().line += 40;
        assert_eq!(item_of(&moved, &root).0.digest, base.digest);
        let mut not_krm = resource("/r");
        not_krm.root_mut().content.drain(0..2);
        assert!(!item_of(&not_krm, &root).0.meta.has(ItemFlags::KRM));
    }
}
