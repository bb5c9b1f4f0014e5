//! One-shot renders (`fn render`): the session's schedule without its
//! memo. A process that renders once gains nothing from keeping every
//! package's output for later, and keeping them costs a copy of the whole
//! tree per package level (1.4 GB at 1,000 packages); here a package's output
//! moves into its parent's input instead, so memory stays near what the
//! sequential walk holds.
//!
//! The packages of one Kahn level (leaves first) run in parallel on rayon;
//! hydrate's walk then adopts the runs in kpt's order, exactly as it adopts
//! a session's (see [`super::session`]).

use std::collections::{BTreeMap, HashSet};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use rayon::prelude::*;

use super::actions::{ActionCache, ActionInputs, BfsRuns, CachedOutput};
use super::db::RenderContext;
use super::levels::levels;
use super::session::{Progress, Scanned, in_pool, path_key, scan_tree};
use crate::hydrate::{self, PackageRun, Precomputed, RenderOutcome, Runtimes};
use crate::pkg::kptfile::{self, Kptfile};
use crate::pkg::reader::{ReadOptions, parse_package_files};
use crate::yaml::node::Node;

/// What a one-shot render ran, for `--stats`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OnceStats {
    /// Packages in the tree.
    pub packages: usize,
    /// Pipelines that ran (not answered from the action cache).
    pub pipelines_run: usize,
    /// Pipelines answered from the action cache.
    pub action_cache_hits: usize,
}

/// Renders the tree at `context.root` once, printing kpt's progress lines to
/// `log`. The result is what [`hydrate::hydrate_with`] returns, and what ran.
/// `files` are stamps of files read just before (the CLI's manifest
/// snapshot): the unchanged ones are not read again.
pub fn render_once(
    context: &RenderContext,
    jobs: Option<usize>,
    root_kptfile: Kptfile,
    log: &mut dyn Write,
    progress: Option<Progress>,
    scan: Option<&super::scan::Scan>,
    in_place: bool,
) -> (RenderOutcome, OnceStats) {
    let bfs = root_kptfile.annotation_is_true(kptfile::BFS_RENDERING_ANNOTATION);
    if bfs {
        return render_bfs(context, root_kptfile, log);
    }
    let plan = match scan {
        Some(scan) => super::plan::Plan::from_scan(scan, root_kptfile),
        None => super::plan::Plan::read(&context.root, root_kptfile, None),
    };
    let mut lookups = true;
    loop {
        let options = super::executor::ExecOptions {
            jobs,
            progress: progress.as_ref(),
            mode: super::executor::ExecMode {
                lookups,
                pure_only: false,
            },
        };
        let execution = super::executor::execute(context, &context.store, &plan, &options);
        let ran = execution.stats;
        context.store.finish();
        // The log is kept until the walk is whole: a stored output found
        // unreadable on the way means running again without the store.
        let mut buffered = Vec::new();
        match super::assemble::assemble(
            &plan,
            &execution,
            &context.store,
            &context.options,
            context.save_on_failure,
            in_place.then_some(context.build.as_str()),
            &mut buffered,
        ) {
            Ok(outcome) => {
                // A whole tree's resources: freed off the render's path.
                super::executor::free_in_background(execution);
                let _ = log.write_all(&buffered);
                let stats = OnceStats {
                    packages: outcome.n_packages.max(plan.packages.len()),
                    pipelines_run: ran.pipelines_run,
                    action_cache_hits: ran.hits,
                };
                return (outcome, stats);
            }
            Err(super::assemble::Incomplete) if lookups && !context.options.cancel.is_cancelled() => {
                tracing::warn!("a stored run's output is unreadable; rendering without the store");
                lookups = false;
            }
            Err(super::assemble::Incomplete) => {
                // Cancelled (the CLI reports it), or unreadable twice.
                let outcome = RenderOutcome {
                    root: context.root.clone(),
                    resources: None,
                    error: Some(crate::hydrate::HydrateError::plain(
                        &context.root,
                        "render interrupted",
                        crate::hydrate::Report::Error("render interrupted".into()),
                    )),
                    save_on_failure: context.save_on_failure,
                    attribution: context.options.attribution,
                    durability: context.options.durability,
                    input_files: Default::default(),
                    mutation_steps: Vec::new(),
                    validation_steps: Vec::new(),
                    fn_results: Vec::new(),
                    executed: 0,
                    n_packages: 0,
                };
                return (outcome, OnceStats::default());
            }
        }
    }
}

/// Runs the pure packages of the tree a render left (`scan` with the
/// render's `committed` changes), so that their runs are stored under the
/// keys the next render computes: a render right after one that wrote
/// files finds every such run instead of running it again. Nothing is
/// printed or written; a tree that cannot be described is left alone.
pub fn record_left_tree(
    context: &RenderContext,
    jobs: Option<usize>,
    scan: &super::scan::Scan,
    committed: &crate::pkg::commit::Changes,
) {
    let _span = tracing::info_span!("record_left_tree").entered();
    let Some(after) = scan.with_changes(committed) else {
        return;
    };
    let Some(bytes) = after.bytes(kptfile::KPTFILE_NAME).cloned() else {
        return;
    };
    let Ok(root_kptfile) = hydrate::load_root_with(&context.root, |_| Ok(bytes)) else {
        return;
    };
    if root_kptfile.annotation_is_true(kptfile::BFS_RENDERING_ANNOTATION) {
        return;
    }
    let plan = super::plan::Plan::from_scan(&after, root_kptfile);
    let options = super::executor::ExecOptions {
        jobs,
        progress: None,
        mode: super::executor::ExecMode {
            lookups: true,
            pure_only: true,
        },
    };
    let execution = super::executor::execute(context, &context.store, &plan, &options);
    tracing::debug!(
        ran = execution.stats.pipelines_run,
        hits = execution.stats.hits,
        "recorded the tree the render left"
    );
    // The files that tree's render would plan: remembered, so that the
    // next render finds them unchanged without writing them out again.
    if let Some(output) = execution
        .outcomes
        .first()
        .and_then(|root| root.record())
        .and_then(|record| record.output.get())
    {
        let _ = super::files::planned_changes(
            &plan,
            &output,
            &Default::default(),
            &execution,
            &context.store,
            &context.build,
            context.options.attribution,
        );
    }
    super::executor::free_in_background(execution);
    context.store.finish();
}

/// A breadth-first render, in hydrate's walk (through the action cache).
fn render_bfs(
    context: &RenderContext,
    root_kptfile: Kptfile,
    log: &mut dyn Write,
) -> (RenderOutcome, OnceStats) {
    let mut stats = OnceStats::default();
    // A BFS walk runs its packages itself, through the action cache.
    let bfs_runs = context.actions.as_deref().map(|actions| BfsRuns {
        actions,
        options: &context.options,
        save_on_failure: context.save_on_failure,
        only: None,
    });
    let hits_before = bfs_runs
        .as_ref()
        .map_or(0, |runs| runs.actions.stats().hits);
    let runtimes = Runtimes {
        image: context.image.as_ref(),
        exec: context.exec.as_ref(),
        runs: bfs_runs.as_ref().map(|runs| runs as &dyn hydrate::RunStore),
    };
    let outcome = hydrate::hydrate_with(
        &context.root,
        root_kptfile,
        &context.options,
        runtimes,
        log,
        Precomputed::default(),
    );
    stats.packages = outcome.n_packages;
    if let Some(runs) = &bfs_runs {
        let hits = runs.actions.stats().hits.saturating_sub(hits_before);
        stats.action_cache_hits += usize::try_from(hits).unwrap_or(usize::MAX);
        runs.actions.finish();
    }
    stats.pipelines_run += outcome
        .n_packages
        .saturating_sub(stats.action_cache_hits);
    (outcome, stats)
}

/// A package's finished run. A run answered from the action cache keeps
/// its output encoded until a parent that runs (or the caller, for the
/// root) needs it.
struct Done {
    run: PackageRun,
    /// Answered from the action cache.
    hit: bool,
    /// A hit's output, until taken.
    cached: Option<CachedOutput>,
    /// The action cache key it was looked up (and stored) under.
    key: Option<String>,
    /// The digest of its output (when the action cache is on and it
    /// succeeded): its parent's key covers it.
    digest: Option<blake3::Hash>,
}

impl Done {
    /// Takes the output out of the run, decoding a cached one; `None` when
    /// the cached entry is corrupt.
    fn take_output(&mut self) -> Option<Vec<Node>> {
        if let Some(cached) = self.cached.take() {
            return cached.decode();
        }
        match &mut self.run.output {
            Ok(output) => Some(std::mem::take(output)),
            Err(_) => Some(Vec::new()),
        }
    }
}

/// Runs the pipelines level by level and returns the runs by package path,
/// with the tree they ran on. A corrupt action cache entry found on the
/// way is dropped, and the levels run again without the cache.
fn run_levels(
    context: &RenderContext,
    scanned: Vec<Scanned>,
    jobs: Option<usize>,
    progress: Option<Progress>,
    stats: &mut OnceStats,
) -> Precomputed {
    let _span = tracing::info_span!("levels").entered();
    let index = package_index(&scanned);
    let children = child_indexes(&scanned, &index);
    let graph: BTreeMap<String, Vec<String>> = scanned
        .iter()
        .map(|pkg| {
            let children = pkg.children.iter().map(|c| path_key(c)).collect();
            (path_key(&pkg.path), children)
        })
        .collect();
    let Ok(levels) = levels(&graph) else {
        return Precomputed::default();
    };
    let levels: Vec<Vec<usize>> = levels
        .iter()
        .map(|level| {
            level
                .iter()
                .filter_map(|key| index.get(Path::new(key)).copied())
                .collect()
        })
        .collect();
    let tree = Tree {
        scanned: &scanned,
        children: &children,
        levels: &levels,
    };
    let actions = context.actions.as_deref();
    let mut lookups = true;
    let runs = loop {
        let slots = run_tree(context, &tree, actions, lookups, jobs, progress.as_ref());
        match adoptable_runs(slots, &children, stats) {
            Ok(runs) => break runs,
            Err(corrupt) => {
                // Dropped, and every level runs again without looking the
                // cache up (a run that took a corrupt output as input is
                // wrong too), storing fresh entries.
                for key in corrupt {
                    if let Some(actions) = actions {
                        actions.drop_corrupt(&key);
                    }
                }
                *stats = OnceStats::default();
                lookups = false;
            }
        }
    };
    // Every package is the child of one parent at most, so each Kptfile
    // moves into its parent's list instead of being copied.
    let (paths, mut kptfiles): (Vec<PathBuf>, Vec<Option<Kptfile>>) = scanned
        .into_iter()
        .map(|pkg| (pkg.path, Some(pkg.kptfile)))
        .unzip();
    let subpackages = paths
        .iter()
        .zip(&children)
        .map(|(path, children)| {
            let known = children
                .iter()
                .filter_map(|&child| {
                    Some((paths.get(child)?.clone(), kptfiles.get_mut(child)?.take()?))
                })
                .collect();
            (path.clone(), known)
        })
        .collect();
    let runs = paths
        .into_iter()
        .zip(runs)
        .filter_map(|(path, run)| Some((path, run?)))
        .collect();
    Precomputed {
        runs,
        subpackages,
        root_output: None,
    }
}

/// The runs the walk adopts, by package index, counting hits and runs in
/// `stats`; `Err` with the keys of corrupt cache entries found on the way.
/// A package whose parent has a run is adopted with it, and its output is
/// already in the parent's: only the other hits' outputs are decoded.
fn adoptable_runs(
    slots: Vec<Slot>,
    children: &[Vec<usize>],
    stats: &mut OnceStats,
) -> Result<Vec<Option<PackageRun>>, Vec<String>> {
    let mut has_parent_run = vec![false; slots.len()];
    for (parent, children) in children.iter().enumerate() {
        let parent_ran = matches!(slots.get(parent), Some(Slot::Done(_)));
        for &child in children {
            if let Some(flag) = has_parent_run.get_mut(child) {
                *flag = parent_ran;
            }
        }
    }
    let mut corrupt = Vec::new();
    let mut runs = Vec::with_capacity(slots.len());
    for (slot, parent_ran) in slots.into_iter().zip(has_parent_run) {
        match slot {
            Slot::Skipped => runs.push(None),
            Slot::Corrupt(key) => corrupt.push(key),
            Slot::Done(mut done) => {
                if done.hit {
                    stats.action_cache_hits += 1;
                } else {
                    stats.pipelines_run += 1;
                }
                if done.cached.is_some() && !parent_ran {
                    match done.take_output() {
                        Some(output) => done.run.output = Ok(output),
                        None => corrupt.extend(done.key),
                    }
                }
                runs.push(Some(done.run));
            }
        }
    }
    if corrupt.is_empty() {
        Ok(runs)
    } else {
        Err(corrupt)
    }
}

/// The scanned tree and its schedule.
struct Tree<'a> {
    scanned: &'a [Scanned],
    children: &'a [Vec<usize>],
    levels: &'a [Vec<usize>],
}

/// Where one package's run stands.
enum Slot {
    /// Not run: the walk runs (or reports) it.
    Skipped,
    /// Run, or answered from the cache.
    Done(Box<Done>),
    /// A subpackage's cached output did not decode (its key): the levels
    /// run again without the cache.
    Corrupt(String),
}

/// Runs every level, leaves first, the packages of a level in parallel,
/// answering from `actions` (when `lookups`) and storing in it.
fn run_tree(
    context: &RenderContext,
    tree: &Tree<'_>,
    actions: Option<&ActionCache>,
    lookups: bool,
    jobs: Option<usize>,
    progress: Option<&Progress>,
) -> Vec<Slot> {
    let slots: Vec<Mutex<Slot>> = tree
        .scanned
        .iter()
        .map(|_| Mutex::new(Slot::Skipped))
        .collect();
    let done = AtomicUsize::new(0);
    let total = tree.scanned.len();
    in_pool(jobs, || {
        for level in tree.levels {
            level.par_iter().for_each(|&i| {
                let (Some(pkg), Some(children), Some(slot)) =
                    (tree.scanned.get(i), tree.children.get(i), slots.get(i))
                else {
                    return;
                };
                let run = run_one(context, actions, lookups, pkg, children, &slots);
                if let Ok(mut slot) = slot.lock() {
                    *slot = run;
                }
                let finished = done.fetch_add(1, Ordering::Relaxed) + 1;
                if let Some(progress) = progress {
                    progress(finished, total);
                }
            });
        }
    });
    slots
        .into_iter()
        .map(|slot| slot.into_inner().unwrap_or(Slot::Skipped))
        .collect()
}

/// One package's run: from the action cache when its key is there, else
/// run with its subpackages' outputs moved into its input. Skipped when
/// the walk would not get to run it (its files do not parse, or a
/// subpackage failed).
fn run_one(
    context: &RenderContext,
    actions: Option<&ActionCache>,
    lookups: bool,
    pkg: &Scanned,
    children: &[usize],
    slots: &[Mutex<Slot>],
) -> Slot {
    let _span = tracing::debug_span!("pipeline", package = %pkg.path.display()).entered();
    if context.options.cancel.is_cancelled() {
        return Slot::Skipped;
    }
    // Check every subpackage before taking any output: when one failed,
    // the walk needs the others' outputs intact for save-on-failure.
    let mut digests = Vec::with_capacity(children.len());
    for &child in children {
        let Some(Ok(slot)) = slots.get(child).map(Mutex::lock) else {
            return Slot::Skipped;
        };
        match &*slot {
            Slot::Done(done) if done.run.output.is_ok() => digests.extend(done.digest),
            Slot::Corrupt(key) => return Slot::Corrupt(key.clone()),
            _ => return Slot::Skipped,
        }
    }
    // The root's output has no parent to key, and its entry (the whole
    // tree) would serve only a render in which nothing changed, which the
    // local manifest answers: it is neither looked up, encoded nor stored,
    // unless a remote cache shares it with machines that have no manifest.
    let is_root = pkg.path == context.root;
    let actions = actions.filter(|actions| !is_root || actions.has_remote());
    let key = actions
        .filter(|_| digests.len() == children.len())
        .and_then(|actions| {
            let inputs = ActionInputs {
                path: &pkg.path,
                kptfile: &pkg.kptfile,
                files: &pkg.files,
                children: &digests,
                bfs: false,
            };
            actions.key(&inputs, &context.options, context.save_on_failure)
        });
    if let (Some(actions), Some(key), true) = (actions, &key, lookups)
        && let Some(cached) = actions.lookup(key)
    {
        return Slot::Done(Box::new(Done {
            run: cached.run,
            digest: Some(cached.output.digest),
            hit: true,
            cached: Some(cached.output),
            key: Some(key.clone()),
        }));
    }
    if let (Some(key), true) = (&key, lookups) {
        tracing::debug!(target: "krender::actions", package = %pkg.path.display(), key, "not in the action cache");
    }
    let options = ReadOptions {
        package_path: Some(pkg.path.display().to_string()),
    };
    let Ok(local) = parse_package_files(&pkg.files, &options) else {
        return Slot::Skipped;
    };
    let local = local.resources;
    let input_files = hydrate::input_file_names(&context.root, &pkg.path, &local);
    // The subpackages' outputs, decoded in parallel: a parent whose
    // subpackages were answered from the cache decodes their whole trees,
    // and at the root that is the critical path of an incremental render.
    let outputs: Vec<Result<Vec<Node>, Slot>> = children
        .par_iter()
        .map(|&child| {
            let Some(Ok(mut slot)) = slots.get(child).map(Mutex::lock) else {
                return Err(Slot::Skipped);
            };
            let Slot::Done(done) = &mut *slot else {
                return Err(Slot::Skipped);
            };
            done.take_output()
                .ok_or_else(|| Slot::Corrupt(done.key.clone().unwrap_or_default()))
        })
        .collect();
    let mut input = local;
    for output in outputs {
        match output {
            Ok(mut output) => input.append(&mut output),
            Err(slot) => return slot,
        }
    }
    let runtimes = Runtimes {
        image: context.image.as_ref(),
        exec: context.exec.as_ref(),
        runs: None,
    };
    let display = crate::pkg::tree::display_path(&context.root, &pkg.path);
    let run = hydrate::run_package(
        hydrate::PackageJob {
            root: &context.root,
            pkg: &pkg.path,
            kptfile: &pkg.kptfile,
            input,
            local_files: input_files,
            display: &display,
        },
        context.save_on_failure,
        &context.options,
        runtimes,
    );
    let digest = actions.and_then(|actions| actions.record(key.as_deref(), &run));
    Slot::Done(Box::new(Done {
        run,
        hit: false,
        cached: None,
        key,
        digest,
    }))
}

/// Each scanned package's position in `scanned`, by path.
fn package_index(scanned: &[Scanned]) -> BTreeMap<&Path, usize> {
    scanned
        .iter()
        .enumerate()
        .map(|(i, pkg)| (pkg.path.as_path(), i))
        .collect()
}

/// Each scanned package's subpackages, as indexes into `scanned`.
fn child_indexes(scanned: &[Scanned], index: &BTreeMap<&Path, usize>) -> Vec<Vec<usize>> {
    scanned
        .iter()
        .map(|pkg| {
            pkg.children
                .iter()
                .filter_map(|child| index.get(child.as_path()).copied())
                .collect()
        })
        .collect()
}

/// What a shard rendered (see [`super::shard`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ShardReport {
    /// Packages in the tree.
    pub total: usize,
    /// Packages in this shard's subtrees.
    pub packages: usize,
    /// Its subtrees.
    pub subtrees: usize,
    /// Packages above the cut (the final render runs them).
    pub above_cut: usize,
    /// Pipelines this shard ran.
    pub pipelines_run: usize,
    /// Pipelines answered from the action cache.
    pub action_cache_hits: usize,
    /// Pipelines that failed (not stored: the final render reports them).
    pub failed: usize,
    /// A breadth-first shard also ran the packages above the cut (its
    /// subtrees' inputs come from them), so the final render finds them
    /// cached too.
    pub ran_above_cut: bool,
}

/// Why a shard cannot be rendered.
#[derive(Debug, thiserror::Error, miette::Diagnostic)]
#[diagnostic(code(krender::engine::shard))]
pub enum ShardError {
    /// The runs reach the final render only through the action cache.
    #[error("--shard needs the action cache (it is off with --no-cache)")]
    NoCache,
    /// The tree does not read whole.
    #[error("the package tree at {0} does not read whole; render it without --shard to see why")]
    Unreadable(PathBuf),
}

/// Renders part `spec` of the tree at `context.root` into the action cache
/// (and its remote): whole subtrees below the cut, nothing written in
/// place. Depth-first, leaves first and no walk; breadth-first, the walk
/// over the packages above the cut and this shard's subtrees only.
pub fn render_shard(
    context: &RenderContext,
    jobs: Option<usize>,
    root_kptfile: &Kptfile,
    spec: super::shard::ShardSpec,
) -> Result<ShardReport, ShardError> {
    let bfs = root_kptfile.annotation_is_true(kptfile::BFS_RENDERING_ANNOTATION);
    let actions = context.actions.as_deref().ok_or(ShardError::NoCache)?;
    let scanned = scan_tree(&context.root, root_kptfile, None)
        .ok_or_else(|| ShardError::Unreadable(context.root.clone()))?;
    let children = child_indexes(&scanned, &package_index(&scanned));
    let names: Vec<String> = scanned.iter().map(|pkg| path_key(&pkg.path)).collect();
    let plan = super::shard::plan(&children, &names, spec.count);
    let mine = plan
        .subtrees
        .get(spec.index.saturating_sub(1))
        .cloned()
        .unwrap_or_default();
    // Every package of this shard's subtrees, and their schedule.
    let mut members = Vec::new();
    let mut stack = mine.clone();
    while let Some(package) = stack.pop() {
        members.push(package);
        stack.extend(children.get(package).into_iter().flatten());
    }
    let mut report = ShardReport {
        total: scanned.len(),
        packages: members.len(),
        subtrees: mine.len(),
        above_cut: plan.above.len(),
        ..ShardReport::default()
    };
    if bfs {
        // Breadth-first, a subtree's input is what the packages above the
        // cut left of it: the shard runs those too (from the cache when
        // another shard got there first), then only its own subtrees.
        let only: HashSet<PathBuf> = members
            .iter()
            .chain(&plan.above)
            .filter_map(|&i| scanned.get(i).map(|pkg| pkg.path.clone()))
            .collect();
        let runs = BfsRuns {
            actions,
            options: &context.options,
            save_on_failure: context.save_on_failure,
            only: Some(&only),
        };
        let before = actions.stats();
        let runtimes = Runtimes {
            image: context.image.as_ref(),
            exec: context.exec.as_ref(),
            runs: Some(&runs),
        };
        let outcome = hydrate::hydrate_with(
            &context.root,
            root_kptfile.clone(),
            &context.options,
            runtimes,
            &mut std::io::sink(),
            Precomputed::default(),
        );
        actions.finish();
        let after = actions.stats();
        report.action_cache_hits = usize::try_from(after.hits - before.hits).unwrap_or(usize::MAX);
        report.pipelines_run = usize::try_from(after.misses - before.misses).unwrap_or(usize::MAX);
        report.failed = usize::from(outcome.error.is_some());
        report.ran_above_cut = true;
        return Ok(report);
    }
    let graph: BTreeMap<String, Vec<String>> = members
        .iter()
        .map(|&i| {
            let below = children[i].iter().map(|&c| names[c].clone()).collect();
            (names[i].clone(), below)
        })
        .collect();
    let by_name: BTreeMap<&str, usize> = names
        .iter()
        .enumerate()
        .map(|(i, name)| (name.as_str(), i))
        .collect();
    let schedule: Vec<Vec<usize>> = levels(&graph)
        .unwrap_or_default()
        .iter()
        .map(|level| {
            level
                .iter()
                .filter_map(|name| by_name.get(name.as_str()).copied())
                .collect()
        })
        .collect();
    let tree = Tree {
        scanned: &scanned,
        children: &children,
        levels: &schedule,
    };
    let slots = run_tree(context, &tree, Some(actions), true, jobs, None);
    actions.finish();
    for &member in &members {
        match slots.get(member) {
            Some(Slot::Done(done)) if done.hit => report.action_cache_hits += 1,
            Some(Slot::Done(done)) if done.run.output.is_ok() => report.pipelines_run += 1,
            _ => report.failed += 1,
        }
    }
    Ok(report)
}
