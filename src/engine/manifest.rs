//! The per-root render manifest: how a warm, unchanged re-render is answered
//! across processes without running anything.
//!
//! A successful render whose every function call was pure (answered by the
//! function cache's policy) and which left the tree as it found it is a fixed
//! point: rendering the same bytes again, with the same options, prints the
//! same stdout and stderr and writes the same bytes. Such a render stores a
//! manifest in the cache directory, keyed by the root path and the options:
//! the blake3 hash of every file under the root, plus the captured stdout and
//! stderr. The next render with the same key walks and hashes the tree (the
//! floor cost) and, when every hash matches, replays the captured output.
//!
//! The manifest is only an accelerator: any doubt (a missing, corrupt or
//! stale entry, a changed file, an added or removed file) means a normal
//! render, which then records a fresh manifest.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rayon::prelude::*;
use serde::{Deserialize, Serialize};

/// Bumped whenever the manifest's meaning or layout changes.
const FORMAT: u32 = 1;

/// Directories never hashed: version-control metadata, and krender's own
/// staging and lock files (`.krender-*`), which come and go during renders.
fn skipped(name: &str) -> bool {
    name == ".git" || name.starts_with(".krender-")
}

/// Every file under a root, with its content hash, sorted by path.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TreeSnapshot {
    /// `(path relative to the root, blake3 hex)`, sorted by path.
    pub files: Vec<(String, String)>,
}

impl TreeSnapshot {
    /// Walks `root` and hashes every file (in parallel). Symbolic links are
    /// hashed by their target's bytes; unreadable entries make the snapshot
    /// fail, so that no manifest is trusted for a tree we cannot see whole.
    pub fn scan(root: &Path) -> std::io::Result<TreeSnapshot> {
        TreeSnapshot::scan_with(root, |path| std::fs::read(path).map(Arc::from))
    }

    /// [`TreeSnapshot::scan`] reading each file through `read`: a render
    /// reads through [`StampedReader`]s, so that the render itself and the
    /// snapshot after it reuse the bytes of the files that did not change.
    ///
    /// [`StampedReader`]: super::stamps::StampedReader
    pub fn scan_with(
        root: &Path,
        read: impl Fn(&Path) -> std::io::Result<Arc<[u8]>> + Sync,
    ) -> std::io::Result<TreeSnapshot> {
        let _span = tracing::info_span!("snapshot").entered();
        let mut paths = Vec::new();
        let mut stack = vec![PathBuf::new()];
        while let Some(relative) = stack.pop() {
            for entry in std::fs::read_dir(root.join(&relative))? {
                let entry = entry?;
                let name = entry.file_name();
                let Some(name) = name.to_str() else {
                    return Err(std::io::Error::other("non-UTF-8 file name"));
                };
                if skipped(name) {
                    continue;
                }
                let child = relative.join(name);
                if entry.file_type()?.is_dir() {
                    stack.push(child);
                } else {
                    paths.push(child);
                }
            }
        }
        let mut files = paths
            .par_iter()
            .map(|relative| {
                let bytes = read(&root.join(relative))?;
                let text = relative.to_string_lossy().replace('\\', "/");
                Ok((text, blake3::hash(&bytes).to_hex().to_string()))
            })
            .collect::<std::io::Result<Vec<_>>>()?;
        files.sort();
        Ok(TreeSnapshot { files })
    }

    /// The packages in the tree: its Kptfiles.
    pub fn packages(&self) -> usize {
        self.files
            .iter()
            .filter(|(path, _)| path == "Kptfile" || path.ends_with("/Kptfile"))
            .count()
    }
}

/// What a render's output depends on besides the tree's bytes.
#[derive(Clone, Debug, Serialize)]
pub struct RenderKey<'a> {
    /// The absolute root package path.
    pub root: &'a Path,
    /// The output mode (`-o`), as given.
    pub output: &'a str,
    /// Every flag that changes what a render does or prints.
    pub flags: Vec<(&'a str, String)>,
    /// The function table's source text (`render.toml`), if any.
    pub config: Option<String>,
}

impl RenderKey<'_> {
    /// The cache key of this root's manifest.
    pub fn digest(&self) -> String {
        let mut hasher = blake3::Hasher::new();
        hasher.update(&FORMAT.to_le_bytes());
        hasher.update(super::cache::build_identity().as_bytes());
        // serde_json of a derived struct of strings cannot fail.
        hasher.update(&serde_json::to_vec(self).unwrap_or_default());
        format!("manifest:{}", hasher.finalize().to_hex())
    }
}

/// A recorded fixed-point render.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Manifest {
    /// The tree before (and after) the render.
    pub tree: TreeSnapshot,
    /// What the render printed on stdout.
    pub stdout: Vec<u8>,
    /// What the render printed on stderr.
    pub stderr: Vec<u8>,
}

/// Looks up `key` in `dir` and returns the manifest when it matches `tree`.
/// Unreadable or undecodable entries are removed and treated as absent.
pub fn lookup(dir: &Path, key: &str, tree: &TreeSnapshot) -> Option<Manifest> {
    let bytes = match cacache::read_sync(dir, key) {
        Ok(bytes) => bytes,
        Err(cacache::Error::EntryNotFound(..)) => return None,
        Err(error) => {
            tracing::warn!(target: "krender::manifest", %error, "dropping unreadable manifest");
            let _ = cacache::remove_sync(dir, key);
            return None;
        }
    };
    match Manifest::decode(&bytes) {
        Some(manifest) if manifest.tree == *tree => Some(manifest),
        Some(_) => None,
        None => {
            tracing::warn!(target: "krender::manifest", "dropping undecodable manifest");
            let _ = cacache::remove_sync(dir, key);
            None
        }
    }
}

/// Magic prefix of an encoded manifest.
const MAGIC: &[u8; 4] = b"KRM1";

impl Manifest {
    /// Hands the encoded manifest to `write`, as the pieces whose
    /// concatenation it is (the output is not copied into one buffer):
    /// `MAGIC`, then three length-prefixed parts: the tree as JSON, stdout
    /// and stderr raw (a rendered tree's stdout is megabytes; JSON arrays of
    /// numbers would cost more to read than the render they replace).
    fn encode<T>(&self, write: impl FnOnce(&[&[u8]]) -> T) -> Option<T> {
        let tree = serde_json::to_vec(&self.tree).ok()?;
        let lengths =
            [&tree, &self.stdout, &self.stderr].map(|part| (part.len() as u64).to_le_bytes());
        Some(write(&[
            MAGIC,
            &lengths[0],
            &tree,
            &lengths[1],
            &self.stdout,
            &lengths[2],
            &self.stderr,
        ]))
    }

    fn decode(bytes: &[u8]) -> Option<Manifest> {
        let mut rest = bytes.strip_prefix(MAGIC)?;
        let mut parts = Vec::with_capacity(3);
        for _ in 0..3 {
            let (len, tail) = rest.split_first_chunk::<8>()?;
            let len = usize::try_from(u64::from_le_bytes(*len)).ok()?;
            if tail.len() < len {
                return None;
            }
            let (part, tail) = tail.split_at(len);
            parts.push(part);
            rest = tail;
        }
        if !rest.is_empty() {
            return None;
        }
        Some(Manifest {
            tree: serde_json::from_slice(parts[0]).ok()?,
            stdout: parts[1].to_vec(),
            stderr: parts[2].to_vec(),
        })
    }
}

/// Stores `manifest` under `key` (replacing the root's previous one).
/// Failures are logged and ignored: the manifest is only an accelerator.
pub fn store(dir: &Path, key: &str, manifest: &Manifest) {
    let Some(written) = manifest.encode(|parts| super::cache::write_entry_parts(dir, key, parts))
    else {
        return;
    };
    if let Err(error) = written {
        tracing::debug!(target: "krender::manifest", %error, "manifest write failed");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn snapshot_lists_files_sorted_and_skips_krender_and_git() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::create_dir_all(root.join("sub/.git")).unwrap();
        std::fs::create_dir_all(root.join(".krender-draft-1")).unwrap();
        std::fs::write(root.join("b.yaml"), "b").unwrap();
        std::fs::write(root.join("sub/a.yaml"), "a").unwrap();
        std::fs::write(root.join("sub/.git/HEAD"), "x").unwrap();
        std::fs::write(root.join(".krender-draft-1/b.yaml"), "x").unwrap();
        let snapshot = TreeSnapshot::scan(root).unwrap();
        let names: Vec<&str> = snapshot.files.iter().map(|f| f.0.as_str()).collect();
        assert_eq!(names, ["b.yaml", "sub/a.yaml"]);
        assert_eq!(snapshot.files[0].1, blake3::hash(b"b").to_hex().to_string());
    }

    #[test]
    fn lookup_requires_the_same_tree() {
        let cache = tempfile::tempdir().unwrap();
        let tree = TreeSnapshot {
            files: vec![("a".into(), "1".into())],
        };
        let manifest = Manifest {
            tree: tree.clone(),
            stdout: b"out".to_vec(),
            stderr: b"err".to_vec(),
        };
        let key = RenderKey {
            root: Path::new("/pkg"),
            output: "",
            flags: Vec::new(),
            config: None,
        }
        .digest();
        store(cache.path(), &key, &manifest);
        assert_eq!(lookup(cache.path(), &key, &tree), Some(manifest));
        let changed = TreeSnapshot {
            files: vec![("a".into(), "2".into())],
        };
        assert_eq!(lookup(cache.path(), &key, &changed), None);
        let other = RenderKey {
            root: Path::new("/other"),
            output: "",
            flags: Vec::new(),
            config: None,
        }
        .digest();
        assert_eq!(lookup(cache.path(), &other, &tree), None);
    }

    #[test]
    fn corrupt_manifest_is_dropped() {
        let cache = tempfile::tempdir().unwrap();
        let key = "manifest:x";
        cacache::write_sync(cache.path(), key, b"not json").unwrap();
        assert_eq!(lookup(cache.path(), key, &TreeSnapshot::default()), None);
        assert!(matches!(
            cacache::read_sync(cache.path(), key),
            Err(cacache::Error::EntryNotFound(..))
        ));
    }
}
