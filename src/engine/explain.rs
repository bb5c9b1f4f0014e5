//! Why a package ran: the parts of its key (the krender build, the options,
//! its functions, its files and its subpackages' outputs, each by digest)
//! are kept per package after each run it makes, and a run that misses the
//! store is explained by comparing its parts with the last ones kept, as
//! Bazel's `--explain` and Gradle's cache-miss reasons do. The parts are
//! kept in the local store only (they name the checkout and are worth
//! nothing on another machine).

use serde::{Deserialize, Serialize};

use super::db::RenderContext;
use super::plan::{Plan, PlannedPackage};
use super::store::Store;
use crate::hydrate::item::Digest;

/// What a package's key covers, part by part.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct KeyParts {
    /// The krender build.
    build: String,
    /// The options that change a run.
    options: String,
    /// Each function's identity, in pipeline order.
    functions: Vec<String>,
    /// Each own file (package-relative) and the blake3 of its bytes.
    files: Vec<(String, String)>,
    /// Each subpackage (root-relative) and the digest of its output.
    subpackages: Vec<(String, String)>,
}

impl KeyParts {
    /// The parts of `pkg`'s key, given its subpackages' output digests (in
    /// its children's order); `None` when it has no key (see
    /// [`super::keys::key_pipeline`]).
    pub(crate) fn of(
        context: &RenderContext,
        plan: &Plan,
        pkg: &PlannedPackage,
        children: &[Digest],
    ) -> Option<KeyParts> {
        let options = &context.options;
        let functions = super::keys::function_identities(context, pkg)?;
        let files = pkg
            .files
            .as_ref()
            .ok()?
            .iter()
            .map(|file| (file.file.relative.clone(), file.digest.to_string()))
            .collect();
        let subpackages = pkg
            .child_indexes()
            .zip(children)
            .map(|(child, digest)| (plan.packages[child].rel.clone(), digest.to_string()))
            .collect();
        Some(KeyParts {
            build: context.build.clone(),
            options: format!(
                "allow-exec={} allow-wasm={} truncate-output={} save-on-failure={} image-prefix={}",
                options.allow_exec,
                options.allow_wasm,
                options.truncate_output,
                context.save_on_failure,
                options.image_prefix
            ),
            functions,
            files,
            subpackages,
        })
    }
}

/// One reason a package ran.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "cause", rename_all = "kebab-case")]
pub enum Cause {
    /// No run of it was kept before.
    FirstRun,
    /// Another krender build made the last run.
    Build,
    /// An option that is part of the key changed.
    Options,
    /// Its pipeline's functions changed (a function, its version or its
    /// identity).
    Functions,
    /// Its own files changed (paths relative to the package).
    Files {
        /// Files whose bytes changed.
        #[serde(skip_serializing_if = "Vec::is_empty")]
        modified: Vec<String>,
        /// Files that are new.
        #[serde(skip_serializing_if = "Vec::is_empty")]
        added: Vec<String>,
        /// Files that are gone.
        #[serde(skip_serializing_if = "Vec::is_empty")]
        removed: Vec<String>,
    },
    /// Subpackages whose output changed (or that came or went).
    Subpackages {
        /// Their paths relative to the root.
        changed: Vec<String>,
    },
    /// Nothing the key covers changed: the stored run is gone (pruned,
    /// damaged, or never kept because the render failed or was cut short).
    Gone,
}

impl Cause {
    /// The cause for a person: `deployment.yaml modified`.
    pub fn describe(&self) -> String {
        match self {
            Cause::FirstRun => "never ran with this cache".to_owned(),
            Cause::Build => "another krender build ran it last".to_owned(),
            Cause::Options => "an option that changes runs changed".to_owned(),
            Cause::Functions => "its pipeline's functions changed".to_owned(),
            Cause::Files {
                modified,
                added,
                removed,
            } => {
                let mut parts = Vec::new();
                for (files, what) in [
                    (modified, "modified"),
                    (added, "added"),
                    (removed, "removed"),
                ] {
                    if !files.is_empty() {
                        parts.push(format!("{} {what}", files.join(", ")));
                    }
                }
                parts.join("; ")
            }
            Cause::Subpackages { changed } => {
                format!("subpackage output changed: {}", changed.join(", "))
            }
            Cause::Gone => "its stored run is gone (pruned or damaged)".to_owned(),
        }
    }

    /// Where the cause's kind goes in a summary: a package's own changes
    /// before those it inherits.
    pub fn rank(&self) -> u8 {
        match self {
            Cause::FirstRun => 0,
            Cause::Build => 1,
            Cause::Options => 2,
            Cause::Functions => 3,
            Cause::Files { .. } => 4,
            Cause::Subpackages { .. } => 5,
            Cause::Gone => 6,
        }
    }

    /// The cause's kind, for a summary line (`subpackage output changed:
    /// 3`).
    pub fn kind(&self) -> &'static str {
        match self {
            Cause::FirstRun => "first run",
            Cause::Build => "krender changed",
            Cause::Options => "options changed",
            Cause::Functions => "functions changed",
            Cause::Files { .. } => "files changed",
            Cause::Subpackages { .. } => "subpackage output changed",
            Cause::Gone => "stored run gone",
        }
    }
}

/// The store key of the parts kept for the package `rel` of the tree at
/// the render's root.
fn parts_key(context: &RenderContext, rel: &str) -> Digest {
    let mut hasher = blake3::Hasher::new();
    hasher.update(b"krender key parts\0");
    hasher.update(context.root.to_string_lossy().as_bytes());
    hasher.update(b"\0");
    hasher.update(rel.as_bytes());
    Digest(*hasher.finalize().as_bytes())
}

/// Why a package whose key missed the store runs: `parts` against the
/// parts kept after its last run.
pub(crate) fn causes(
    context: &RenderContext,
    store: &Store,
    rel: &str,
    parts: &KeyParts,
) -> Vec<Cause> {
    let Some(previous) = store
        .note(&parts_key(context, rel))
        .and_then(|bytes| serde_json::from_slice::<KeyParts>(&bytes).ok())
    else {
        return vec![Cause::FirstRun];
    };
    let mut causes = Vec::new();
    if previous.build != parts.build {
        causes.push(Cause::Build);
    }
    if previous.options != parts.options {
        causes.push(Cause::Options);
    }
    if previous.functions != parts.functions {
        causes.push(Cause::Functions);
    }
    let (modified, added, removed) = compare(&previous.files, &parts.files);
    if !(modified.is_empty() && added.is_empty() && removed.is_empty()) {
        causes.push(Cause::Files {
            modified,
            added,
            removed,
        });
    }
    let (modified, added, removed) = compare(&previous.subpackages, &parts.subpackages);
    let mut changed: Vec<String> = modified.into_iter().chain(added).chain(removed).collect();
    if !changed.is_empty() {
        changed.sort();
        causes.push(Cause::Subpackages { changed });
    }
    if causes.is_empty() {
        causes.push(Cause::Gone);
    }
    causes
}

/// Keeps `parts` as the package's last run's.
pub(crate) fn remember(context: &RenderContext, store: &Store, rel: &str, parts: &KeyParts) {
    if let Ok(bytes) = serde_json::to_vec(parts) {
        store.put_note(&parts_key(context, rel), &bytes);
    }
}

/// Names whose digest changed, names new in `now`, names gone from it.
fn compare(
    before: &[(String, String)],
    now: &[(String, String)],
) -> (Vec<String>, Vec<String>, Vec<String>) {
    let before: std::collections::BTreeMap<&str, &str> = before
        .iter()
        .map(|(a, b)| (a.as_str(), b.as_str()))
        .collect();
    let now_map: std::collections::BTreeMap<&str, &str> =
        now.iter().map(|(a, b)| (a.as_str(), b.as_str())).collect();
    let mut modified = Vec::new();
    let mut added = Vec::new();
    for (name, digest) in &now_map {
        match before.get(name) {
            Some(old) if old != digest => modified.push((*name).to_owned()),
            Some(_) => {}
            None => added.push((*name).to_owned()),
        }
    }
    let removed = before
        .keys()
        .filter(|name| !now_map.contains_key(*name))
        .map(|name| (*name).to_owned())
        .collect();
    (modified, added, removed)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn named(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(a, b)| ((*a).to_owned(), (*b).to_owned()))
            .collect()
    }

    #[test]
    fn compare_names_modified_added_and_removed() {
        let before = named(&[("a.yaml", "1"), ("b.yaml", "2"), ("c.yaml", "3")]);
        let now = named(&[("a.yaml", "1"), ("b.yaml", "9"), ("d.yaml", "4")]);
        assert_eq!(
            compare(&before, &now),
            (
                vec!["b.yaml".to_owned()],
                vec!["d.yaml".to_owned()],
                vec!["c.yaml".to_owned()]
            )
        );
    }

    #[test]
    fn causes_describe_what_changed() {
        let files = Cause::Files {
            modified: vec!["deployment.yaml".to_owned()],
            added: Vec::new(),
            removed: vec!["old.yaml".to_owned()],
        };
        assert_eq!(
            files.describe(),
            "deployment.yaml modified; old.yaml removed"
        );
        assert_eq!(files.kind(), "files changed");
        let json = serde_json::to_string(&files).unwrap();
        assert_eq!(
            json,
            r#"{"cause":"files","modified":["deployment.yaml"],"removed":["old.yaml"]}"#
        );
    }
}
