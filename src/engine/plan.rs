//! The plan: the package tree read once. Every package (root first, then
//! breadth-first, as kpt's walks find them), its Kptfile decoded once, its
//! own files with their bytes and digests, its subpackages, and what kpt's
//! walk would report on reaching it when any of that cannot be read. The
//! executor runs the plan and the assembly reports from it; neither reads
//! the tree again.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rayon::prelude::*;

use super::levels::levels;
use super::scan::{Read, Scan, join};
use super::stamps::StampedReader;
use crate::hydrate::item::{Digest, RootPath};
use crate::hydrate::{HydrateError, Report};
use crate::pkg::kptfile::{KPTFILE_NAME, Kptfile, KptfileError};
use crate::pkg::krmignore::{KrmIgnore, KrmIgnoreError};
use crate::pkg::reader::{PackageFile, ReadError, is_package_file};
use crate::pkg::tree;

/// The package tree of one render.
#[derive(Debug)]
pub struct Plan {
    /// The root package's absolute path.
    pub root: PathBuf,
    /// The root as package-path annotations spell it.
    pub root_path: RootPath,
    /// The root directory's name, as kpt's lines show it.
    pub root_name: String,
    /// Packages, root first, breadth-first (a package's children follow in
    /// kpt's walk order).
    pub packages: Vec<PlannedPackage>,
    /// Package indexes by height: leaves first (what depth-first runs may
    /// run together).
    pub levels: Vec<Vec<usize>>,
}

/// One package of the plan.
#[derive(Debug)]
pub struct PlannedPackage {
    /// The absolute package path.
    pub path: PathBuf,
    /// Its path relative to the root (`""` for the root).
    pub rel: String,
    /// Its decoded, validated Kptfile.
    pub kptfile: Arc<Kptfile>,
    /// Its own files (subpackages excluded), in kpt's read order, or what
    /// kpt reports when it cannot read them.
    pub files: Result<Vec<PlannedFile>, HydrateError>,
    /// Its subpackages in kpt's walk order, or what kpt reports when it
    /// cannot list or decode them.
    pub children: Result<Vec<Child>, HydrateError>,
    /// Its parent's index (none for the root).
    pub parent: Option<usize>,
    /// Its depth below the root.
    pub depth: usize,
}

/// One file of a package.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PlannedFile {
    /// The file, with its bytes.
    pub file: PackageFile,
    /// The blake3 of its bytes.
    pub digest: Digest,
}

/// A subpackage as the walk meets it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Child {
    /// A package of the plan, by index.
    Package(usize),
    /// A subpackage whose Kptfile decodes but does not validate: the walk
    /// stops there.
    Invalid(InvalidChild),
}

/// A subpackage whose Kptfile does not validate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InvalidChild {
    /// Its directory.
    pub dir: PathBuf,
    /// kpt's text.
    pub text: String,
    /// How it is reported.
    pub report: Report,
}

impl InvalidChild {
    /// The error a walk reports at it, under `outer` (the subpackage itself
    /// depth-first, the root breadth-first).
    pub fn error(&self, outer: &Path) -> HydrateError {
        HydrateError::plain(outer, &self.text, self.report.clone())
    }
}

impl PlannedPackage {
    /// The indexes of its planned subpackages (none when they cannot be
    /// listed; those after an invalid one included).
    pub fn child_indexes(&self) -> impl Iterator<Item = usize> + '_ {
        self.children
            .iter()
            .flatten()
            .filter_map(|child| match child {
                Child::Package(index) => Some(*index),
                Child::Invalid(_) => None,
            })
    }

    /// Whether its files and subpackages all read: its run can start once
    /// its subpackages' have finished.
    pub fn readable(&self) -> bool {
        self.files.is_ok()
            && self.children.as_ref().is_ok_and(|children| {
                children
                    .iter()
                    .all(|child| matches!(child, Child::Package(_)))
            })
    }
}

impl Plan {
    /// Walks and reads the tree at `root` (whose Kptfile the caller has read
    /// and validated), through `reader` when given.
    pub fn read(root: &Path, root_kptfile: Kptfile, reader: Option<&StampedReader<'_>>) -> Plan {
        Plan::from_scan(&Scan::walk(root, reader), root_kptfile)
    }

    /// The packages of the walked tree `scan` (rooted at the package whose
    /// Kptfile is `root_kptfile`), as kpt's walks would find them.
    pub fn from_scan(scan: &Scan, root_kptfile: Kptfile) -> Plan {
        let _span = tracing::info_span!("plan").entered();
        let root = scan.root.as_path();
        // The structure first, one depth at a time (each depth's Kptfiles
        // decoded in parallel), then every package's files.
        let mut packages: Vec<PlannedPackage> = Vec::new();
        let mut depth: Vec<(String, Arc<Kptfile>, Option<usize>)> =
            vec![(String::new(), Arc::new(root_kptfile), None)];
        let mut level = 0;
        while !depth.is_empty() {
            let listed: Vec<Result<Vec<Listed>, HydrateError>> = depth
                .par_iter()
                .map(|(rel, _, _)| list_children(scan, rel))
                .collect();
            let mut next = Vec::new();
            for ((rel, kptfile, parent), listed) in depth.into_iter().zip(listed) {
                let index = packages.len();
                let children = listed.map(|found| {
                    let mut children = Vec::new();
                    for (child, decoded) in found {
                        match decoded {
                            Ok(kptfile) => {
                                // Numbered once every package is listed.
                                children.push(Child::Package(usize::MAX));
                                next.push((child, Arc::new(kptfile), Some(index)));
                            }
                            Err(invalid) => {
                                children.push(Child::Invalid(invalid));
                                // The walk stops at it: later siblings are
                                // never reached.
                                break;
                            }
                        }
                    }
                    children
                });
                packages.push(PlannedPackage {
                    path: absolute(root, &rel),
                    rel,
                    kptfile,
                    files: Ok(Vec::new()),
                    children,
                    parent,
                    depth: level,
                });
            }
            depth = next;
            level += 1;
        }
        number_children(&mut packages);
        let files: Vec<Result<Vec<PlannedFile>, HydrateError>> = packages
            .par_iter()
            .map(|pkg| package_files(scan, &pkg.rel, &pkg.path))
            .collect();
        for (pkg, files) in packages.iter_mut().zip(files) {
            pkg.files = files;
        }
        let levels = heights(&packages);
        Plan {
            root: root.to_path_buf(),
            root_path: RootPath::new(root),
            root_name: tree::display_path(root, root),
            packages,
            levels,
        }
    }

    /// The display name of package `index`, as kpt's lines show it.
    pub fn display(&self, index: usize) -> String {
        self.packages
            .get(index)
            .map(|pkg| tree::display_path(&self.root, &pkg.path))
            .unwrap_or_default()
    }

    /// The root package.
    pub fn root_package(&self) -> &PlannedPackage {
        &self.packages[0]
    }
}

/// The absolute path of `rel` below `root`.
fn absolute(root: &Path, rel: &str) -> PathBuf {
    if rel.is_empty() {
        root.to_path_buf()
    } else {
        root.join(rel)
    }
}

/// Gives each `Child::Package` its index: children are appended in walk
/// order, level after level, so the n-th planned child of the whole tree
/// (in package order) is package n + 1.
fn number_children(packages: &mut [PlannedPackage]) {
    let mut next = 1;
    for pkg in packages.iter_mut() {
        if let Ok(children) = &mut pkg.children {
            for child in children.iter_mut() {
                if let Child::Package(index) = child {
                    *index = next;
                    next += 1;
                }
            }
        }
    }
}

/// Whether the directory `dir` holds a Kptfile that reads as a file (what
/// `is_file` answers: a link to one counts).
fn has_kptfile(scan: &Scan, dir: &str) -> bool {
    scan.entry(&join(dir, KPTFILE_NAME))
        .and_then(|entry| entry.file.as_ref())
        .is_some_and(|read| read.bytes.is_ok())
}

/// Whether anything named Kptfile exists in `dir` (what `exists` answers:
/// the package reader does not descend into such a directory).
fn kptfile_exists(scan: &Scan, dir: &str) -> bool {
    scan.entry(&join(dir, KPTFILE_NAME)).is_some_and(|entry| {
        entry.is_dir || entry.file.as_ref().is_some_and(|read| read.bytes.is_ok())
    })
}

/// A subpackage by its path relative to the root, with its Kptfile decoded
/// and validated (or the error the walk reports at it).
type Listed = (String, Result<Kptfile, InvalidChild>);

/// The direct subpackages of the package `rel`, or the error the walk
/// reports on listing them.
fn list_children(scan: &Scan, rel: &str) -> Result<Vec<Listed>, HydrateError> {
    let dir = absolute(&scan.root, rel);
    let mut found = Vec::new();
    subpackages(scan, rel, &mut found)
        .map_err(|text| HydrateError::plain(&dir, &text, Report::Error(text.clone())))?;
    let mut children = Vec::with_capacity(found.len());
    for child in found {
        let child_dir = absolute(&scan.root, &child);
        // A Kptfile that does not decode stops the listing itself (kpt's
        // `Subpackages`); one that decodes but does not validate stops the
        // walk when it reaches that subpackage.
        let kptfile = read_kptfile(scan, &child, &child_dir)
            .map_err(|error| HydrateError::subpackage_kptfile(&dir, &child_dir, &error))?;
        let validated = match kptfile.validate(&child_dir) {
            Ok(()) => Ok(kptfile),
            Err(error) => Err(InvalidChild {
                text: error.to_string(),
                report: Report::kptfile(&error),
                dir: child_dir,
            }),
        };
        children.push((child, validated));
    }
    Ok(children)
}

/// kpt's subpackage search below `dir`: every directory holding a Kptfile
/// and not inside another such directory, in walk order.
fn subpackages(scan: &Scan, dir: &str, found: &mut Vec<String>) -> Result<(), String> {
    let listing = scan.dir(dir).ok_or_else(|| format!("{dir}: not walked"))?;
    let entries = listing.entries.as_ref().map_err(Clone::clone)?;
    for entry in entries.iter().filter(|entry| entry.is_dir) {
        let path = join(dir, &entry.name);
        if has_kptfile(scan, &path) {
            found.push(path);
        } else {
            subpackages(scan, &path, found)?;
        }
    }
    Ok(())
}

/// Decodes the Kptfile of the package at `rel` (`dir` on disk).
fn read_kptfile(scan: &Scan, rel: &str, dir: &Path) -> Result<Kptfile, KptfileError> {
    let read = scan
        .entry(&join(rel, KPTFILE_NAME))
        .and_then(|entry| entry.file.as_ref());
    let bytes = match read.map(|read| &read.bytes) {
        Some(Ok(bytes)) => bytes,
        Some(Err((kind, _))) if *kind == std::io::ErrorKind::NotFound => {
            return Err(KptfileError::Missing {
                dir: dir.to_path_buf(),
            });
        }
        Some(Err((_, text))) => {
            return Err(KptfileError::Unreadable {
                dir: dir.to_path_buf(),
                details: text.clone(),
                location: None,
            });
        }
        None => {
            return Err(KptfileError::Missing {
                dir: dir.to_path_buf(),
            });
        }
    };
    Kptfile::parse_bytes(bytes, dir)
}

/// The own files of the package `rel` (`dir` on disk) as kpt's reader
/// lists and reads them, or the error it reports.
fn package_files(scan: &Scan, rel: &str, dir: &Path) -> Result<Vec<PlannedFile>, HydrateError> {
    let failed = |error: ReadError| {
        let text = error.to_string();
        HydrateError::plain(dir, &text, Report::Error(text.clone()))
    };
    let ignore = match scan
        .entry(&join(rel, ".krmignore"))
        .and_then(|entry| entry.file.as_ref())
        .map(|read| &read.bytes)
    {
        None => KrmIgnore::empty(),
        Some(Err((kind, _))) if *kind == std::io::ErrorKind::NotFound => KrmIgnore::empty(),
        Some(Err((_, message))) => {
            return Err(failed(ReadError::Ignore(KrmIgnoreError {
                path: dir.join(".krmignore"),
                message: message.clone(),
            })));
        }
        Some(Ok(bytes)) => {
            KrmIgnore::from_text(dir, &String::from_utf8_lossy(bytes)).map_err(|message| {
                failed(ReadError::Ignore(KrmIgnoreError {
                    path: dir.join(".krmignore"),
                    message,
                }))
            })?
        }
    };
    let mut listed = Vec::new();
    list_files(scan, rel, rel, &ignore, &mut listed).map_err(failed)?;
    let mut files = Vec::with_capacity(listed.len());
    for (relative, at) in listed {
        let absolute = dir.join(&relative);
        let read = scan.entry(&at).and_then(|entry| entry.file.as_ref());
        let (bytes, digest) = match read {
            Some(Read {
                bytes: Ok(bytes),
                digest,
            }) => (bytes.clone(), *digest),
            Some(Read {
                bytes: Err((_, message)),
                ..
            }) => {
                return Err(failed(ReadError::Io {
                    path: absolute,
                    message: message.clone(),
                }));
            }
            None => {
                return Err(failed(ReadError::Io {
                    path: absolute,
                    message: "not walked".into(),
                }));
            }
        };
        files.push(PlannedFile {
            digest,
            file: PackageFile {
                relative,
                absolute,
                bytes,
            },
        });
    }
    Ok(files)
}

/// kpt's package reader listing below `current` (relative to the root) of
/// the package at `package`: (path relative to the package, path relative
/// to the root) in walk order, ignored paths and subpackages skipped.
fn list_files(
    scan: &Scan,
    package: &str,
    current: &str,
    ignore: &KrmIgnore,
    out: &mut Vec<(String, String)>,
) -> Result<(), ReadError> {
    let at = absolute(&scan.root, current);
    let listing = scan.dir(current).ok_or_else(|| ReadError::Io {
        path: at.clone(),
        message: "not walked".into(),
    })?;
    let entries = listing.entries.as_ref().map_err(|message| ReadError::Io {
        path: at.clone(),
        message: message.clone(),
    })?;
    for entry in entries {
        let path = join(current, &entry.name);
        if ignore.is_ignored(&at.join(&entry.name), entry.is_dir) {
            continue;
        }
        if entry.is_dir {
            if kptfile_exists(scan, &path) {
                continue;
            }
            list_files(scan, package, &path, ignore, out)?;
        } else if is_package_file(&entry.name) {
            let relative = match path.strip_prefix(package) {
                Some(rest) if !package.is_empty() => rest.trim_start_matches('/').to_owned(),
                _ => path.clone(),
            };
            out.push((relative, path));
        }
    }
    Ok(())
}

/// Package indexes by height (leaves first), by Kahn's algorithm over the
/// tree's edges.
fn heights(packages: &[PlannedPackage]) -> Vec<Vec<usize>> {
    let graph: std::collections::BTreeMap<usize, Vec<usize>> = packages
        .iter()
        .enumerate()
        .map(|(index, pkg)| (index, pkg.child_indexes().collect()))
        .collect();
    // A tree has no cycle; the listing does not follow links.
    levels(&graph).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(root: &Path, files: &[(&str, &str)]) {
        for (path, text) in files {
            let path = root.join(path);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        }
    }

    fn kptfile(name: &str) -> String {
        format!("apiVersion: kpt.dev/v1\nkind: Kptfile\nmetadata:\n  name: {name}\n")
    }

    #[test]
    fn a_tree_is_planned_root_first_with_levels_leaves_first() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("root");
        write(
            &root,
            &[
                ("Kptfile", &kptfile("root")),
                (
                    "cm.yaml",
                    "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n",
                ),
                ("b/Kptfile", &kptfile("b")),
                ("a/Kptfile", &kptfile("a")),
                ("a/x/Kptfile", &kptfile("x")),
                ("a/x/r.yaml", "kind: A\n"),
            ],
        );
        let root_kptfile = Kptfile::parse(&kptfile("root"), &root).unwrap();
        let plan = Plan::read(&root, root_kptfile, None);
        let rels: Vec<&str> = plan.packages.iter().map(|pkg| pkg.rel.as_str()).collect();
        assert_eq!(rels, ["", "a", "b", "a/x"]);
        let children: Vec<Vec<usize>> = plan
            .packages
            .iter()
            .map(|pkg| pkg.child_indexes().collect())
            .collect();
        assert_eq!(children, [vec![1, 2], vec![3], vec![], vec![]]);
        assert_eq!(plan.packages[3].parent, Some(1));
        assert_eq!(plan.levels.first().map(Vec::len), Some(2));
        assert_eq!(plan.levels.last(), Some(&vec![0]));
        let files = plan.packages[0].files.as_ref().unwrap();
        let names: Vec<&str> = files.iter().map(|f| f.file.relative.as_str()).collect();
        assert_eq!(names, ["Kptfile", "cm.yaml"]);
        assert_eq!(files[1].digest, Digest::of(&files[1].file.bytes));
        assert_eq!(plan.display(3), "root/a/x");
    }

    #[test]
    fn an_invalid_subpackage_stops_its_parents_listing_there() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("root");
        write(
            &root,
            &[
                ("Kptfile", &kptfile("root")),
                // Decodes, but a function with neither image nor exec does
                // not validate.
                (
                    "a/Kptfile",
                    "apiVersion: kpt.dev/v1\nkind: Kptfile\nmetadata:\n  name: a\npipeline:\n  mutators:\n    - configPath: x.yaml\n",
                ),
                ("b/Kptfile", &kptfile("b")),
                ("c/Kptfile", "not: [valid\n"),
            ],
        );
        let root_kptfile = Kptfile::parse(&kptfile("root"), &root).unwrap();
        let plan = Plan::read(&root, root_kptfile, None);
        // `c` does not decode: the listing itself fails.
        assert!(plan.packages[0].children.is_err());
        assert_eq!(plan.packages.len(), 1);
        std::fs::write(root.join("c/Kptfile"), kptfile("c")).unwrap();
        let root_kptfile = Kptfile::parse(&kptfile("root"), &root).unwrap();
        let plan = Plan::read(&root, root_kptfile, None);
        let children = plan.packages[0].children.as_ref().unwrap();
        assert!(matches!(children.as_slice(), [Child::Invalid(_)]));
        assert!(!plan.packages[0].readable());
    }
}
