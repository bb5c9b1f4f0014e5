//! The one walk of a render's tree: every directory listed and every file
//! read and hashed once (the floor any render pays), in parallel, a depth
//! at a time. The manifest check compares the digests, and the plan finds
//! packages, subpackages and package files in the listings, as kpt's
//! walks would on disk; nothing reads the tree again.
//!
//! Version-control metadata (`.git`) and krender's own files
//! (`.krender-*`) are not walked.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rayon::prelude::*;

use super::manifest::TreeSnapshot;
use super::stamps::StampedReader;
use crate::hydrate::item::Digest;

/// Names never walked.
fn skipped(name: &str) -> bool {
    name == ".git" || crate::pkg::commit::is_reserved_name(name)
}

/// What the walk found in one directory.
#[derive(Clone, Debug)]
pub struct Listing {
    /// Its entries, sorted by name (byte-wise, as Go's walk sorts), or
    /// the error listing it gave.
    pub entries: Result<Vec<Entry>, String>,
}

/// One entry of a directory.
#[derive(Clone, Debug)]
pub struct Entry {
    /// Its name.
    pub name: String,
    /// A directory (not a link to one): the walk went in.
    pub is_dir: bool,
    /// For anything else, what reading it gave (a link is followed).
    pub file: Option<Read>,
}

/// A file's bytes and digest, or why it could not be read.
#[derive(Clone, Debug)]
pub struct Read {
    /// The bytes, or the error's kind and text.
    pub bytes: Result<Arc<[u8]>, (std::io::ErrorKind, String)>,
    /// The blake3 of the bytes.
    pub digest: Digest,
}

/// Every directory of a tree, by path relative to the root (`""` for the
/// root).
#[derive(Clone, Debug)]
pub struct Scan {
    /// The absolute root.
    pub root: PathBuf,
    /// The listings.
    pub dirs: BTreeMap<String, Listing>,
    /// A name was not UTF-8: no manifest can describe the tree.
    pub odd_names: bool,
}

impl Scan {
    /// Walks `root`, reading files through `reader` when given.
    pub fn walk(root: &Path, reader: Option<&StampedReader<'_>>) -> Scan {
        let _span = tracing::info_span!("scan").entered();
        let read = |path: &Path| -> std::io::Result<Arc<[u8]>> {
            match reader {
                Some(reader) => reader.read(path),
                None => std::fs::read(path).map(Arc::from),
            }
        };
        let mut dirs = BTreeMap::new();
        let mut odd_names = false;
        let mut depth = vec![String::new()];
        while !depth.is_empty() {
            let listed: Vec<(String, Listing, bool)> = depth
                .into_par_iter()
                .map(|relative| {
                    let (listing, odd) = list(root, &relative, &read);
                    (relative, listing, odd)
                })
                .collect();
            let mut next = Vec::new();
            for (relative, listing, odd) in listed {
                odd_names |= odd;
                if let Ok(entries) = &listing.entries {
                    for entry in entries.iter().filter(|entry| entry.is_dir) {
                        next.push(join(&relative, &entry.name));
                    }
                }
                dirs.insert(relative, listing);
            }
            depth = next;
        }
        Scan {
            root: root.to_path_buf(),
            dirs,
            odd_names,
        }
    }

    /// The tree as a manifest describes it, or `None` when part of it could
    /// not be read.
    pub fn snapshot(&self) -> Option<TreeSnapshot> {
        if self.odd_names {
            return None;
        }
        let mut files = Vec::new();
        for (dir, listing) in &self.dirs {
            for entry in listing.entries.as_ref().ok()? {
                if let Some(read) = &entry.file {
                    read.bytes.as_ref().ok()?;
                    files.push((join(dir, &entry.name), read.digest.to_hex()));
                }
            }
        }
        files.sort();
        Some(TreeSnapshot { files })
    }

    /// The listing of the directory `relative` to the root.
    pub fn dir(&self, relative: &str) -> Option<&Listing> {
        self.dirs.get(relative)
    }

    /// The entry at `relative` to the root.
    pub fn entry(&self, relative: &str) -> Option<&Entry> {
        let (dir, name) = match relative.rsplit_once('/') {
            Some((dir, name)) => (dir, name),
            None => ("", relative),
        };
        let entries = self.dirs.get(dir)?.entries.as_ref().ok()?;
        entries
            .binary_search_by(|entry| entry.name.as_bytes().cmp(name.as_bytes()))
            .ok()
            .and_then(|at| entries.get(at))
    }

    /// The tree as it is after `changes` (a render's commit): `None` when
    /// a write lands in a directory the walk did not list.
    pub fn with_changes(&self, changes: &crate::pkg::commit::Changes) -> Option<Scan> {
        let mut scan = self.clone();
        let split = |relative: &str| -> (String, String) {
            match relative.rsplit_once('/') {
                Some((dir, name)) => (dir.to_owned(), name.to_owned()),
                None => (String::new(), relative.to_owned()),
            }
        };
        for (relative, bytes) in changes.writes() {
            let (dir, name) = split(relative);
            let entries = scan.dirs.get_mut(&dir)?.entries.as_mut().ok()?;
            let read = Read {
                digest: Digest::of(bytes),
                bytes: Ok(Arc::from(bytes.as_slice())),
            };
            match entries.binary_search_by(|entry| entry.name.as_bytes().cmp(name.as_bytes())) {
                Ok(at) if !entries[at].is_dir => entries[at].file = Some(read),
                Ok(_) => return None,
                Err(at) => entries.insert(
                    at,
                    Entry {
                        name,
                        is_dir: false,
                        file: Some(read),
                    },
                ),
            }
        }
        for relative in changes.deletes() {
            let (dir, name) = split(relative);
            if let Some(Ok(entries)) = scan
                .dirs
                .get_mut(&dir)
                .map(|listing| listing.entries.as_mut())
            {
                entries.retain(|entry| entry.name != name);
            }
        }
        Some(scan)
    }

    /// The bytes of the file at `relative` to the root, as read by the
    /// walk.
    pub fn bytes(&self, relative: &str) -> Option<&Arc<[u8]>> {
        self.entry(relative)?.file.as_ref()?.bytes.as_ref().ok()
    }

    /// The root package's Kptfile, decoded and validated, from the bytes
    /// the walk read (from the disk when it kept none): the render, its
    /// dry run and `watch` read the tree once.
    pub fn root_kptfile(
        &self,
        root: &Path,
    ) -> Result<crate::pkg::kptfile::Kptfile, crate::pkg::kptfile::KptfileError> {
        crate::hydrate::load_root_with(root, |path| {
            match path
                .strip_prefix(root)
                .ok()
                .and_then(|relative| self.bytes(&relative.to_string_lossy()))
            {
                Some(bytes) => Ok(bytes.clone()),
                None => std::fs::read(path).map(Arc::from),
            }
        })
    }
}

/// `dir/name`, or `name` at the root.
pub fn join(dir: &str, name: &str) -> String {
    if dir.is_empty() {
        name.to_owned()
    } else {
        format!("{dir}/{name}")
    }
}

/// Lists and reads one directory; the flag says a name was not UTF-8.
fn list(
    root: &Path,
    relative: &str,
    read: &(impl Fn(&Path) -> std::io::Result<Arc<[u8]>> + Sync),
) -> (Listing, bool) {
    let dir = if relative.is_empty() {
        root.to_path_buf()
    } else {
        root.join(relative)
    };
    let mut odd = false;
    let listed = std::fs::read_dir(&dir).and_then(|entries| {
        let mut found = Vec::new();
        for entry in entries {
            let entry = entry?;
            let name = entry.file_name();
            let Some(text) = name.to_str() else {
                odd = true;
                continue;
            };
            if skipped(text) {
                continue;
            }
            found.push((text.to_owned(), entry.file_type()?.is_dir()));
        }
        Ok(found)
    });
    let mut names = match listed {
        Ok(names) => names,
        Err(error) => {
            return (
                Listing {
                    entries: Err(error.to_string()),
                },
                odd,
            );
        }
    };
    names.sort_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
    let entries = names
        .into_par_iter()
        .map(|(name, is_dir)| {
            let file = (!is_dir).then(|| {
                let bytes =
                    read(&dir.join(&name)).map_err(|error| (error.kind(), error.to_string()));
                let digest = match &bytes {
                    Ok(bytes) => Digest::of(bytes),
                    Err(_) => Digest::default(),
                };
                Read { bytes, digest }
            });
            Entry { name, is_dir, file }
        })
        .collect();
    (
        Listing {
            entries: Ok(entries),
        },
        odd,
    )
}
