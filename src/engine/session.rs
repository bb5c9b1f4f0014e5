//! A render session: the orchestrator around the salsa database. It reads
//! the package tree from disk into inputs (setting only what changed), runs
//! the packages' pipelines level by level (Kahn's algorithm over the package
//! DAG, leaves first) in parallel on rayon, then hands the memoized runs to
//! hydrate's sequential walk, which adopts them in kpt's order. Logs,
//! `renderStatus` and outputs are therefore exactly a sequential render's.
//!
//! One-shot renders (`fn render`) use a fresh session; `watch` keeps one and
//! calls [`RenderSession::refresh`] + [`RenderSession::render`] per change.
//! Anything unusual (a Kptfile that does not decode, an unreadable file, a
//! BFS root) is left to the walk, which reports it exactly as kpt does.

use super::pool::{Progress, in_pool};
use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use rayon::prelude::*;
use salsa::Setter;

use super::db::{Db, PackageSource, RenderContext, RenderDb, rendered_package};
use super::levels::levels;
use super::stamps::{FileStamps, StampedReader};
use crate::hydrate::{
    self, BfsMemo, PackageRun, Precomputed, RenderOutcome, Runtimes, SharedOutput, Written,
};
use crate::krm::resource_list::ItemTexts;
use crate::pkg::kptfile::{self, KPTFILE_NAME, Kptfile, KptfileError};
use crate::pkg::reader::{PackageFile, list_package_files};
use crate::pkg::tree;

/// What a refresh found.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RefreshStats {
    /// Packages in the tree.
    pub packages: usize,
    /// Packages whose inputs were set (new or changed).
    pub changed: usize,
}

/// One package as read from disk, before it becomes an input.
pub(super) struct Scanned {
    pub(super) path: PathBuf,
    pub(super) kptfile: Kptfile,
    pub(super) files: Vec<PackageFile>,
    pub(super) children: Vec<PathBuf>,
}

/// A salsa database plus the inputs of one package tree.
pub struct RenderSession {
    db: RenderDb,
    root: PathBuf,
    /// Inputs by package path.
    packages: BTreeMap<PathBuf, PackageSource>,
    /// Subpackage paths by package path, from the last refresh.
    children: BTreeMap<PathBuf, Vec<PathBuf>>,
    /// False when the last refresh could not read the tree whole.
    complete: bool,
    jobs: Option<usize>,
    /// Pipeline executions counted by [`RenderSession::new`]'s event hook.
    runs: Arc<AtomicUsize>,
    /// Called with (packages done, packages in the tree) as the levels run.
    progress: Option<Progress>,
    /// The last BFS render's pipeline runs (BFS trees render in the walk,
    /// which reuses the runs whose inputs did not change).
    bfs_memo: std::sync::Mutex<BfsMemo>,
    /// The texts of the last `-o stdout` list written from the root's run.
    item_texts: Arc<ItemTexts>,
    /// The last refresh's file stamps: unchanged files are not read again.
    stamps: FileStamps,
}

impl RenderSession {
    /// A session over `context.root`. `jobs` bounds the parallel pipeline
    /// runs (default: one per core).
    pub fn new(context: RenderContext, jobs: Option<usize>) -> RenderSession {
        let runs = Arc::new(AtomicUsize::new(0));
        let counter = runs.clone();
        let events = Box::new(move |event: salsa::Event| {
            if let salsa::EventKind::WillExecute { database_key } = event.kind
                && format!("{database_key:?}").starts_with("rendered_package")
            {
                counter.fetch_add(1, Ordering::Relaxed);
            }
        });
        let mut session = RenderSession::with_db(RenderDb::new(context, Some(events)), jobs);
        session.runs = runs;
        session
    }

    /// How many package pipelines have run in this session so far (memo
    /// hits excluded): what `watch` reports per rebuild.
    pub fn pipelines_run(&self) -> usize {
        let bfs = self.bfs_memo.lock().map_or(0, |memo| memo.pipelines_run());
        self.runs.load(Ordering::Relaxed) + bfs
    }

    /// A session over an existing database (tests pass one that records
    /// salsa events).
    pub fn with_db(db: RenderDb, jobs: Option<usize>) -> RenderSession {
        let root = db.context().root.clone();
        RenderSession {
            db,
            root,
            packages: BTreeMap::new(),
            children: BTreeMap::new(),
            complete: false,
            jobs,
            runs: Arc::default(),
            progress: None,
            bfs_memo: std::sync::Mutex::default(),
            item_texts: Arc::default(),
            stamps: FileStamps::default(),
        }
    }

    /// Reports progress to `progress` while pipelines run (the CLI draws a
    /// bar on a terminal; the library never prints).
    pub fn set_progress(&mut self, progress: Progress) {
        self.progress = Some(progress);
    }

    /// Takes note of the files a render of this session wrote in place, so
    /// that the next refresh does not take them for edits: a file that
    /// still holds exactly what was written reads as the input that
    /// produced it (see [`FileStamps::own_write`]).
    pub fn own_writes(&mut self, written: &Written) {
        tracing::debug!(files = written.files.len(), "own writes");
        for (path, digest) in &written.files {
            self.stamps.own_write(path, *digest);
        }
    }

    /// Reads and validates the root Kptfile as [`hydrate::load_root`] does,
    /// through the session's file stamps: a status this session wrote
    /// reads as the Kptfile it rendered.
    pub fn load_root(&mut self) -> Result<Kptfile, KptfileError> {
        let reader = self.stamps.reader();
        let kptfile = hydrate::load_root_with(&self.root, |path| reader.read(path));
        self.stamps.merge(reader.into_seen());
        kptfile
    }

    /// The input of the package at `path`, as of the last refresh.
    pub fn package(&self, path: &Path) -> Option<PackageSource> {
        self.packages.get(path).copied()
    }

    /// The database (for tests that inspect it).
    pub fn db(&self) -> &RenderDb {
        &self.db
    }

    /// Reads the tree below the root and updates the inputs whose Kptfile,
    /// files or subpackages changed. A tree that cannot be read whole (bad
    /// Kptfile, unreadable file) leaves the session incomplete: the next
    /// render then runs everything in the walk, which reports the problem.
    pub fn refresh(&mut self, root_kptfile: &Kptfile) -> RefreshStats {
        let _span = tracing::info_span!("refresh").entered();
        let reader = self.stamps.reader();
        let scanned = scan_tree(&self.root, root_kptfile, Some(&reader));
        let seen = reader.into_seen();
        let Some(scanned) = scanned else {
            self.complete = false;
            return RefreshStats::default();
        };
        self.stamps.replace(seen);
        let mut stats = RefreshStats {
            packages: scanned.len(),
            changed: 0,
        };
        let mut packages = BTreeMap::new();
        let mut children_of = BTreeMap::new();
        // Deepest first, so children exist before their parents name them.
        for scanned in scanned.into_iter().rev() {
            let children: Vec<PackageSource> = scanned
                .children
                .iter()
                .filter_map(|child| packages.get(child).copied())
                .collect();
            let existing = self.packages.get(&scanned.path).copied();
            let source = match existing {
                Some(source) => {
                    let mut changed = false;
                    if source.kptfile(&self.db) != &scanned.kptfile {
                        source.set_kptfile(&mut self.db).to(scanned.kptfile);
                        changed = true;
                    }
                    if source.files(&self.db) != &scanned.files {
                        source.set_files(&mut self.db).to(scanned.files);
                        changed = true;
                    }
                    if source.children(&self.db) != &children {
                        source.set_children(&mut self.db).to(children);
                        changed = true;
                    }
                    if changed {
                        tracing::debug!(package = %scanned.path.display(), "changed");
                    }
                    stats.changed += usize::from(changed);
                    source
                }
                None => {
                    stats.changed += 1;
                    PackageSource::new(
                        &self.db,
                        scanned.path.clone(),
                        scanned.kptfile,
                        scanned.files,
                        children,
                    )
                }
            };
            packages.insert(scanned.path.clone(), source);
            children_of.insert(scanned.path, scanned.children);
        }
        self.packages = packages;
        self.children = children_of;
        self.complete = true;
        stats
    }

    /// [`RenderSession::refresh`] after a watcher reported `changed`: only
    /// the packages that own a changed file are listed and read again. Any
    /// change that may alter the tree's shape takes the whole refresh: a
    /// Kptfile or `.krmignore`, a directory or link, a path gone that was
    /// not one of a package's files, a path outside every known package, or
    /// no path at all (a watcher that lost events says nothing precise).
    pub fn refresh_changed(
        &mut self,
        root_kptfile: &Kptfile,
        changed: &BTreeSet<PathBuf>,
    ) -> RefreshStats {
        let Some(owners) = self.owners_of(changed) else {
            return self.refresh(root_kptfile);
        };
        let _span = tracing::info_span!("refresh", packages = owners.len()).entered();
        let mut stats = RefreshStats {
            packages: self.packages.len(),
            changed: 0,
        };
        let reader = self.stamps.reader();
        let mut updates = Vec::new();
        for (pkg, source) in owners {
            let listed = list_package_files(&pkg).ok();
            let files: Option<Vec<PackageFile>> = listed.and_then(|listed| {
                listed
                    .into_iter()
                    .map(|(relative, absolute)| {
                        let bytes = reader.read(&absolute).ok()?;
                        Some(PackageFile {
                            relative,
                            absolute,
                            bytes,
                        })
                    })
                    .collect()
            });
            match files {
                Some(files) => updates.push((source, files)),
                // Unreadable now: the whole refresh finds out what is wrong.
                None => return self.refresh(root_kptfile),
            }
        }
        self.stamps.merge(reader.into_seen());
        for (source, files) in updates {
            if source.files(&self.db) != &files {
                source.set_files(&mut self.db).to(files);
                stats.changed += 1;
            }
        }
        stats
    }

    /// The packages owning `changed`, or `None` when a change needs the
    /// whole refresh (see [`RenderSession::refresh_changed`]).
    fn owners_of(&self, changed: &BTreeSet<PathBuf>) -> Option<BTreeMap<PathBuf, PackageSource>> {
        if !self.complete || changed.is_empty() {
            return None;
        }
        let mut owners = BTreeMap::new();
        for path in changed {
            let name = path.file_name()?.to_str()?;
            if name == KPTFILE_NAME || name == ".krmignore" {
                return None;
            }
            let (pkg, source) = path
                .ancestors()
                .skip(1)
                .find_map(|dir| self.packages.get_key_value(dir))?;
            match std::fs::symlink_metadata(path) {
                Ok(meta) if meta.is_file() => {}
                Ok(_) => return None,
                Err(_) => {
                    let known = source
                        .files(&self.db)
                        .iter()
                        .any(|file| file.absolute == *path);
                    if !known {
                        return None;
                    }
                }
            }
            owners.insert(pkg.clone(), *source);
        }
        Some(owners)
    }

    /// Renders the tree as of the last refresh, printing kpt's progress
    /// lines to `log`. The result is what [`hydrate::hydrate_with`] returns.
    pub fn render(&self, root_kptfile: Kptfile, log: &mut dyn Write) -> RenderOutcome {
        let bfs = root_kptfile.annotation_is_true(kptfile::BFS_RENDERING_ANNOTATION);
        let context = self.db.context();
        let precomputed = if self.complete && !bfs {
            self.warm_up();
            // What this rebuild stored, published for other processes now
            // (a session usually ends with a signal, not a drop).
            if let Some(actions) = &context.actions {
                actions.finish();
            }
            self.precomputed()
        } else {
            Precomputed::default()
        };
        let runtimes = Runtimes {
            image: context.image.as_ref(),
            exec: context.exec.as_ref(),
            runs: None,
        };
        let mut bfs_memo = self.bfs_memo.lock().ok();
        hydrate::hydrate_with_memo(
            &self.root,
            root_kptfile,
            &context.options,
            runtimes,
            log,
            precomputed,
            bfs_memo.as_deref_mut(),
        )
    }

    /// Runs every package's pipeline, one Kahn level at a time (leaves
    /// first), the packages of a level in parallel, each job on its own
    /// database handle.
    fn warm_up(&self) {
        let _span = tracing::info_span!("levels").entered();
        let graph: BTreeMap<String, Vec<String>> = self
            .children
            .iter()
            .map(|(pkg, children)| {
                (
                    path_key(pkg),
                    children.iter().map(|c| path_key(c)).collect(),
                )
            })
            .collect();
        // A tree cannot have a cycle; if it somehow did, the walk still
        // renders (sequentially).
        let Ok(levels) = levels(&graph) else {
            return;
        };
        let source_levels: Vec<Vec<PackageSource>> = levels
            .iter()
            .map(|level| {
                level
                    .iter()
                    .filter_map(|key| self.packages.get(Path::new(key)).copied())
                    .collect()
            })
            .collect();
        // The handle moves into the closure: a session is not `Sync`, and
        // the clone is dropped before any setter runs again.
        let db = self.db.clone();
        let progress = self.progress.clone();
        let total = self.packages.len();
        let done = AtomicUsize::new(0);
        let run_levels = move || {
            for level in &source_levels {
                level.par_iter().for_each_with(db.clone(), |db, source| {
                    salsa::attach_allow_change(db, || {
                        rendered_package(db, *source);
                    });
                    let finished = done.fetch_add(1, Ordering::Relaxed) + 1;
                    if let Some(progress) = &progress {
                        progress(finished, total);
                    }
                });
            }
        };
        in_pool(self.jobs, run_levels);
    }

    /// The memoized runs, read back in a fixed order. A package whose parent
    /// also ran successfully hands over an empty output: the parent's run
    /// already contains it, and the walk discards it anyway.
    fn precomputed(&self) -> Precomputed {
        let _span = tracing::info_span!("adopt").entered();
        let mut parent_ok: BTreeMap<&Path, bool> = BTreeMap::new();
        for (pkg, children) in &self.children {
            let ok = self
                .packages
                .get(pkg)
                .and_then(|source| rendered_package(&self.db, *source).as_ref())
                .is_some_and(|run| run.output.is_ok());
            for child in children {
                parent_ok.insert(child.as_path(), ok);
            }
        }
        let mut runs = BTreeMap::new();
        let mut root_output = None;
        for (pkg, source) in &self.packages {
            let Some(run) = rendered_package(&self.db, *source) else {
                continue;
            };
            let consumed = parent_ok.get(pkg.as_path()).copied().unwrap_or(false);
            let output = match (&run.output, consumed) {
                (Ok(_), true) => Ok(Vec::new()),
                // The root's output is the whole tree: handed on shared.
                (Ok(_), false) if *pkg == self.root => {
                    root_output = Some(SharedOutput {
                        run: Arc::clone(&run.run),
                        texts: Arc::clone(&self.item_texts),
                    });
                    Ok(Vec::new())
                }
                (Ok(output), false) => Ok(output.clone()),
                (Err(failure), _) => Err(failure.clone()),
            };
            let run = PackageRun {
                output,
                log: run.log.clone(),
                mutation_steps: run.mutation_steps.clone(),
                validation_steps: run.validation_steps.clone(),
                fn_results: run.fn_results.clone(),
                executed: run.executed,
                input_files: run.input_files.clone(),
            };
            runs.insert(pkg.clone(), run);
        }
        let subpackages = self
            .children
            .iter()
            .map(|(pkg, children)| {
                let known = children
                    .iter()
                    .filter_map(|child| {
                        let source = self.packages.get(child)?;
                        Some((child.clone(), source.kptfile(&self.db).clone()))
                    })
                    .collect();
                (pkg.clone(), known)
            })
            .collect();
        Precomputed {
            runs,
            subpackages,
            root_output,
        }
    }
}

pub(super) fn path_key(path: &Path) -> String {
    path.display().to_string()
}

/// Reads every package below `root` (BFS order: the root first); `None`
/// when any Kptfile, listing or file cannot be read or decoded.
pub(super) fn scan_tree(
    root: &Path,
    root_kptfile: &Kptfile,
    stamps: Option<&StampedReader<'_>>,
) -> Option<Vec<Scanned>> {
    let read = |path: &Path| -> Option<Arc<[u8]>> {
        match stamps {
            Some(stamps) => stamps.read(path).ok(),
            None => std::fs::read(path).ok().map(Arc::from),
        }
    };
    let _span = tracing::info_span!("scan").entered();
    // The structure first (directories and Kptfiles, one depth at a time,
    // each depth's listings and Kptfiles in parallel), then the files of all
    // packages in parallel. Collecting in order keeps the BFS order.
    let mut structure: Vec<(PathBuf, Kptfile, Vec<PathBuf>)> = Vec::new();
    let mut depth = vec![(root.to_path_buf(), root_kptfile.clone())];
    while !depth.is_empty() {
        let listings: Vec<Vec<PathBuf>> = depth
            .par_iter()
            .map(|(path, _)| tree::direct_subpackages(path).ok())
            .collect::<Option<_>>()?;
        let next: Vec<(PathBuf, Kptfile)> = listings
            .iter()
            .flatten()
            .collect::<Vec<_>>()
            .into_par_iter()
            .map(|child| {
                let bytes = read(&child.join(KPTFILE_NAME))?;
                let decoded = Kptfile::parse_bytes(&bytes, child).ok()?;
                decoded.validate(child).ok()?;
                Some((child.clone(), decoded))
            })
            .collect::<Option<_>>()?;
        for ((path, kptfile), children) in depth.into_iter().zip(listings) {
            structure.push((path, kptfile, children));
        }
        depth = next;
    }
    structure
        .into_par_iter()
        .map(|(path, kptfile, children)| {
            let mut files = Vec::new();
            for (relative, absolute) in list_package_files(&path).ok()? {
                let bytes = read(&absolute)?;
                files.push(PackageFile {
                    relative,
                    absolute,
                    bytes,
                });
            }
            Some(Scanned {
                path,
                kptfile,
                files,
                children,
            })
        })
        .collect()
}
