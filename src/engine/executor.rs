//! The executor: runs a [`Plan`] depth-first, one Kahn level at a time
//! (leaves first), the packages of a level in parallel on rayon. A
//! package's run is answered from the store when its key is there; else
//! its pipeline runs (`hydrate::run_package`) over its own resources and
//! its subpackages' outputs, and its record (its output by item, its log
//! and results) is stored under the key.
//!
//! A key covers what a run's output depends on and nothing that names the
//! checkout: the krender build, the options that change a run, the
//! package's path relative to the root, its Kptfile, its files' digests,
//! each function's identity and its subpackages' output digests. A
//! subpackage that runs again to the same output keeps its digest, so its
//! parent is a hit. Runs with a function that is not known to be pure are
//! not stored (they run every time), and runs of functions that see the
//! checkout path (anything but a path-blind builtin) are keyed with it.

use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use rayon::prelude::*;

use super::db::{Known, RenderContext};
use super::keys::package_key;
use super::plan::{Plan, PlannedPackage};
use super::pool::{Progress, in_pool};
use super::record::{KeyHasher, ROOT_MARKER, Reader, RunRecord, Writer, read_items, write_items};
use super::store::Store;
use crate::hydrate::item::{Digest, Item, RootPath, decode_item, item_of};
use crate::hydrate::items::{Chained, ItemJob, ItemSource, run_items};
use crate::hydrate::{self, HydrateError, PackageJob, PackageRun, Report, Runtimes};
use crate::pkg::reader::ReadOptions;
use crate::runtime::builtin::per_item::{ItemStep, Partial};
use crate::runtime::function_filter::NativeMode;
use crate::yaml::node::Node;

/// Where one package's run stands after the executor.
pub enum Outcome {
    /// Not run: a subpackage failed or did not run, the package's files or
    /// subpackages do not read, or the render was cancelled. The assembly
    /// reports what kpt's walk would.
    Skipped,
    /// Its own files did not parse: what kpt reports on reading them.
    ReadFailed(HydrateError),
    /// Its pipeline failed: the run as kpt would report it.
    Failed(Box<PackageRun>),
    /// It succeeded, here or in an earlier render.
    Done(Done),
    /// A dry run: it would run, for this reason (and, when its key is not
    /// stored, what changed since its last run).
    WouldRun(WhyRun, Vec<super::explain::Cause>),
}

/// Why a dry run finds that a package would run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum WhyRun {
    /// Its key is not in the store: its files, Kptfile, functions or
    /// options differ from every run kept (or it never ran).
    NotStored,
    /// A function of its pipeline is not known to be pure (an executable
    /// or a container image): such runs are never kept.
    NotCacheable,
    /// The cache is off (`--no-cache`).
    CacheOff,
    /// A subpackage would run: its output, this package's input, is not
    /// known before it does.
    SubpackageRuns,
}

/// A successful run.
pub struct Done {
    /// What the store keeps of it.
    pub record: std::sync::Arc<RunRecord>,
    /// Answered from the store (or an earlier execution of this process).
    pub hit: bool,
    /// Where a hit was found (an earlier execution's: local).
    pub origin: Option<super::store::Origin>,
    /// Why it ran (empty for a hit, or a run that is never stored).
    pub causes: Vec<super::explain::Cause>,
    /// The key it was looked up and stored under, when it has one.
    pub key: Option<Digest>,
}

impl Outcome {
    /// The record, when the run succeeded.
    pub fn record(&self) -> Option<&std::sync::Arc<RunRecord>> {
        match self {
            Outcome::Done(done) => Some(&done.record),
            _ => None,
        }
    }
}

/// What the executor did, for `--stats`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ExecStats {
    /// Packages in the plan.
    pub packages: usize,
    /// Pipelines that ran.
    pub pipelines_run: usize,
    /// Runs answered from the store.
    pub hits: usize,
}

/// When one package was run or looked up, and on which worker.
#[derive(Clone, Debug)]
pub struct PackageTiming {
    /// The package's plan index.
    pub index: usize,
    /// The rayon worker (0 off the pool).
    pub thread: usize,
    /// When its turn started and ended.
    pub start: Instant,
    /// When it ended.
    pub end: Instant,
}

/// What the executor did: each package's run, by plan index, and the
/// resources it holds.
pub struct Execution {
    /// Each package's outcome.
    pub outcomes: Vec<Outcome>,
    /// When each package that was reached ran or was looked up.
    pub timings: Vec<PackageTiming>,
    /// What ran.
    pub stats: ExecStats,
    /// The resources parsed or made in this render.
    pub(crate) nodes: NodeCache,
}

impl Execution {
    /// The resources of `items`: this render's, else read from the store;
    /// `None` when one is missing or damaged.
    pub(crate) fn materialize(
        &self,
        store: &Store,
        root: &RootPath,
        items: &[Item],
    ) -> Option<Vec<Node>> {
        items
            .par_iter()
            .map(|item| {
                self.nodes
                    .get(&item.digest)
                    .or_else(|| decode_item(&store.blob(&item.digest)?, root))
            })
            .collect()
    }
}

/// How the executor treats the store.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ExecMode {
    /// Runs are answered from the store when their key is there (off after
    /// a stored output turned out unreadable).
    pub lookups: bool,
    /// Only runs that can be stored happen: a package with a function not
    /// known to be pure is skipped (recording the tree a render left must
    /// not run anything twice).
    pub pure_only: bool,
    /// Nothing runs: a package not answered by the store is
    /// [`Outcome::WouldRun`] (`fn render --dry-run`).
    pub dry: bool,
}

impl ExecMode {
    /// A render's mode.
    pub const RENDER: ExecMode = ExecMode {
        lookups: true,
        pure_only: false,
        dry: false,
    };
}

/// How one execution runs.
#[derive(Clone, Copy)]
pub struct ExecOptions<'a> {
    /// Threads (default: one per core).
    pub jobs: Option<usize>,
    /// Called as packages finish.
    pub progress: Option<&'a Progress>,
    /// How the store is used.
    pub mode: ExecMode,
    /// Only these packages run (a shard's subtrees); all when `None`.
    pub only: Option<&'a std::collections::HashSet<usize>>,
}

impl Execution {
    /// The successful runs of this execution, by key.
    pub fn known(&self) -> Known {
        self.outcomes
            .iter()
            .filter_map(|outcome| match outcome {
                Outcome::Done(done) => Some((done.key?, done.record.clone())),
                _ => None,
            })
            .collect()
    }
}

/// Runs every package of `plan` that can run, leaves first.
pub fn execute(
    context: &RenderContext,
    store: &Store,
    plan: &Plan,
    options: &ExecOptions<'_>,
) -> Execution {
    let ExecOptions {
        jobs,
        progress,
        mode,
        only,
    } = *options;
    let known = context
        .runs
        .lock()
        .map(|runs| runs.clone())
        .unwrap_or_default();
    let known = Some(&known);
    let _span = tracing::info_span!("execute").entered();
    let slots: Vec<Mutex<Outcome>> = plan
        .packages
        .iter()
        .map(|_| Mutex::new(Outcome::Skipped))
        .collect();
    let done = AtomicUsize::new(0);
    let total = plan.packages.len();
    let nodes = NodeCache::default();
    let timings = Mutex::new(Vec::with_capacity(plan.packages.len()));
    let source = Source::new(store, &plan.root_path, &nodes, &context.build, mode.lookups);
    in_pool(jobs, || {
        for level in &plan.levels {
            level.par_iter().for_each(|&index| {
                if only.is_some_and(|only| !only.contains(&index)) {
                    return;
                }
                let start = Instant::now();
                let outcome = run_one(context, &source, plan, index, &slots, mode, known);
                if let Ok(mut timings) = timings.lock() {
                    timings.push(PackageTiming {
                        index,
                        thread: rayon::current_thread_index().map_or(0, |thread| thread + 1),
                        start,
                        end: Instant::now(),
                    });
                }
                if let Some(slot) = slots.get(index)
                    && let Ok(mut slot) = slot.lock()
                {
                    *slot = outcome;
                }
                let finished = done.fetch_add(1, Ordering::Relaxed) + 1;
                if let Some(progress) = progress {
                    progress(finished, total);
                }
            });
        }
    });
    let outcomes: Vec<Outcome> = slots
        .into_iter()
        .map(|slot| slot.into_inner().unwrap_or(Outcome::Skipped))
        .collect();
    let mut stats = ExecStats {
        packages: plan.packages.len(),
        ..ExecStats::default()
    };
    for outcome in &outcomes {
        match outcome {
            Outcome::Done(done) if done.hit => stats.hits += 1,
            Outcome::Done(_) | Outcome::Failed(_) => stats.pipelines_run += 1,
            Outcome::Skipped | Outcome::ReadFailed(_) | Outcome::WouldRun(..) => {}
        }
    }
    let execution = Execution {
        outcomes,
        timings: timings.into_inner().unwrap_or_default(),
        stats,
        nodes,
    };
    if let Ok(mut runs) = context.runs.lock() {
        if mode.pure_only {
            // Recording the tree a render left: both are current.
            runs.extend(execution.known());
        } else {
            *runs = execution.known();
        }
    }
    execution
}

/// One package: from the store when its key is there, else run with its
/// subpackages' outputs as input.
fn run_one(
    context: &RenderContext,
    source: &Source<'_>,
    plan: &Plan,
    index: usize,
    slots: &[Mutex<Outcome>],
    mode: ExecMode,
    known: Option<&Known>,
) -> Outcome {
    let Some(pkg) = plan.packages.get(index) else {
        return Outcome::Skipped;
    };
    let _span = tracing::debug_span!("pipeline", package = %pkg.path.display()).entered();
    if context.options.cancel.is_cancelled() || !pkg.readable() {
        return Outcome::Skipped;
    }
    let children: Vec<usize> = pkg.child_indexes().collect();
    let mut digests = Vec::with_capacity(children.len());
    for &child in &children {
        match slots.get(child).map(Mutex::lock) {
            Some(Ok(slot)) => match (slot.record(), &*slot) {
                (Some(record), _) => digests.push(record.output_digest),
                (None, Outcome::WouldRun(..)) => {
                    return Outcome::WouldRun(WhyRun::SubpackageRuns, Vec::new());
                }
                (None, _) => return Outcome::Skipped,
            },
            _ => return Outcome::Skipped,
        }
    }
    let (key, stored) = match package_key(context, plan, pkg, &digests) {
        Some((key, stored)) => (Some(key), stored),
        None => (None, false),
    };
    // What its key covers, to say why it runs when the store misses.
    let parts = || super::explain::KeyParts::of(context, plan, pkg, &digests).filter(|_| stored);
    if mode.dry {
        return match key {
            None if context.policy.is_none() => Outcome::WouldRun(WhyRun::CacheOff, Vec::new()),
            None => Outcome::WouldRun(WhyRun::NotCacheable, Vec::new()),
            Some(_) => lookup(source, key, stored, mode, known).unwrap_or_else(|| {
                let causes = parts()
                    .map(|parts| super::explain::causes(context, source.store, &pkg.rel, &parts))
                    .unwrap_or_default();
                Outcome::WouldRun(WhyRun::NotStored, causes)
            }),
        };
    }
    // Recording a tree runs nothing that is not remembered, and nothing
    // impure except in a session that takes such runs as deterministic.
    if mode.pure_only && (key.is_none() || (!stored && !context.remember_impure)) {
        return Outcome::Skipped;
    }
    if let Some(found) = lookup(source, key, stored, mode, known) {
        return found;
    }
    let parts = parts();
    let causes = parts
        .as_ref()
        .map(|parts| super::explain::causes(context, source.store, &pkg.rel, parts))
        .unwrap_or_default();
    if !causes.is_empty() {
        let text: Vec<String> = causes.iter().map(super::explain::Cause::describe).collect();
        tracing::info!(
            target: "krender::explain",
            package = %if pkg.rel.is_empty() { "." } else { pkg.rel.as_str() },
            "runs: {}",
            text.join("; ")
        );
    }
    let started = Instant::now();
    let files: Vec<crate::pkg::reader::PackageFile> = pkg
        .files
        .iter()
        .flatten()
        .map(|planned| planned.file.clone())
        .collect();
    let own = match own_items(source, plan, pkg, &files) {
        Ok(own) => own,
        Err(error) => return Outcome::ReadFailed(error),
    };
    let local_files = own.1;
    let mut input: Vec<Item> = own.0;
    for &child in &children {
        let Some(Ok(slot)) = slots.get(child).map(Mutex::lock) else {
            return Outcome::Skipped;
        };
        let Some(output) = slot.record().and_then(|record| record.output.get()) else {
            // A stored output that does not read: the render runs again
            // without the store (see `render_once`).
            return Outcome::Skipped;
        };
        input.extend(output.iter().cloned());
    }
    let outcome = run_input(
        context,
        source,
        plan,
        pkg,
        Job {
            input,
            local_files,
            key,
            stored,
            outer: &pkg.path,
            started,
        },
    );
    match (outcome, parts) {
        (Outcome::Done(done), Some(parts)) => {
            super::explain::remember(context, source.store, &pkg.rel, &parts);
            Outcome::Done(Done { causes, ..done })
        }
        (outcome, _) => outcome,
    }
}

/// A run's record from this context's last execution or the store, when
/// lookups are on and its key is there.
pub(crate) fn lookup(
    source: &Source<'_>,
    key: Option<Digest>,
    stored: bool,
    mode: ExecMode,
    known: Option<&Known>,
) -> Option<Outcome> {
    let found = key.filter(|_| mode.lookups)?;
    if let Some(record) = known.and_then(|known| known.get(&found)) {
        return Some(Outcome::Done(Done {
            record: record.clone(),
            hit: true,
            origin: Some(super::store::Origin::Local),
            causes: Vec::new(),
            key,
        }));
    }
    if !stored {
        return None;
    }
    let (bytes, origin) = source.store.action_from(&found)?;
    let record = RunRecord::decode(&bytes)?;
    Some(Outcome::Done(Done {
        record: std::sync::Arc::new(record),
        hit: true,
        origin: Some(origin),
        causes: Vec::new(),
        key,
    }))
}

/// The items of `pkg`'s own resources (parsed from `files`; their nodes
/// kept in this render's cache), with the package-relative names of the
/// files they came from; the error is kpt's for files that do not parse.
pub(crate) fn own_items(
    source: &Source<'_>,
    plan: &Plan,
    pkg: &PlannedPackage,
    files: &[crate::pkg::reader::PackageFile],
) -> Result<OwnItems, HydrateError> {
    let options = ReadOptions {
        package_path: Some(pkg.path.display().to_string()),
    };
    // File by file: a file read before (by its bytes) is known by its
    // items, without parsing it again.
    let read: Vec<Result<Vec<Item>, crate::pkg::reader::ReadError>> = files
        .par_iter()
        .map(|file| {
            let key = parse_key(source, &pkg.rel, &file.relative, &Digest::of(&file.bytes));
            if let Some(items) = source
                .memos
                .then(|| source.store.action(&key))
                .flatten()
                .and_then(|bytes| {
                    let mut input = Reader(&bytes);
                    let items = read_items(&mut input)?;
                    input.0.is_empty().then_some(items)
                })
                && items.iter().all(|item| source.store.has_blob(&item.digest))
            {
                // (After damage was found, `has_blob` reads each back: a
                // damaged one is parsed and written again.)
                return Ok(items.to_vec());
            }
            let nodes = crate::pkg::reader::parse_package_file(file, &options)?;
            let items: Vec<Item> = nodes
                .into_iter()
                .map(|node| {
                    let (item, blob) = item_of(&node, &plan.root_path);
                    source.store.put_blob(&item.digest, &blob);
                    source.nodes.insert(item.digest, node);
                    item
                })
                .collect();
            let mut out = Writer(Vec::new());
            write_items(&mut out, &items);
            source.store.put_action(&key, &out.0);
            Ok(items)
        })
        .collect();
    let mut own = Vec::new();
    for items in read {
        own.extend(items.map_err(|error| {
            let text = error.to_string();
            HydrateError::plain(&pkg.path, &text, Report::Error(text.clone()))
                .at(error.location().cloned())
        })?);
    }
    let local_files = own
        .iter()
        .map(|item| crate::krm::resource::clean_path(&item.meta.path))
        .collect();
    Ok((own, local_files))
}

/// A package's own resources, and the package-relative names of the files
/// they came from.
pub(crate) type OwnItems = (Vec<Item>, Vec<String>);

/// The key of a package file's items: the file, by its path and bytes.
fn parse_key(source: &Source<'_>, package: &str, file: &str, digest: &Digest) -> Digest {
    let mut key = KeyHasher::of(source.build, "parse");
    key.text(package);
    key.text(file);
    key.digest(digest);
    key.finish()
}

/// One package run's input and where it stands.
pub(crate) struct Job<'a> {
    /// The resources, in order.
    pub(crate) input: Vec<Item>,
    /// The package's own input files (for pruning).
    pub(crate) local_files: Vec<String>,
    /// Its key, when the run may be remembered.
    pub(crate) key: Option<Digest>,
    /// The run may be kept in the store (not only in this context's
    /// memory).
    pub(crate) stored: bool,
    /// The package failures are reported under.
    pub(crate) outer: &'a std::path::Path,
    /// When the run started.
    pub(crate) started: Instant,
}

/// Runs `pkg`'s pipeline over `job`'s input: over items when the pipeline
/// decomposes, else over nodes; the record is stored under the key.
pub(crate) fn run_input(
    context: &RenderContext,
    source: &Source<'_>,
    plan: &Plan,
    pkg: &PlannedPackage,
    job: Job<'_>,
) -> Outcome {
    let Job {
        input,
        local_files,
        key,
        stored,
        outer,
        started,
    } = job;
    let store = source.store;
    let runtimes = Runtimes {
        image: context.image.as_ref(),
        exec: context.exec.as_ref(),
        runs: None,
    };
    let display = log_display(&pkg.rel);
    let items_job = ItemJob {
        root_path: &plan.root_path,
        pkg: &pkg.path,
        kptfile: &pkg.kptfile,
        input: &input,
        display: &display,
    };
    if let Some(run) = run_items(&items_job, &context.options, runtimes, source) {
        tracing::debug!(groups_run = run.groups_run, "ran over resources");
        if context.options.native == NativeMode::Verify
            && let Err(difference) =
                verify_items(context, plan, pkg, &display, &input, &run, source)
        {
            let message = format!(
                "KRENDER_NATIVE=verify: the per-resource run of {} differs from the whole-list run: {difference}",
                pkg.path.display()
            );
            return Outcome::ReadFailed(HydrateError::plain(
                &pkg.path,
                &message,
                Report::Error(message.clone()),
            ));
        }
        let record = RunRecord::new(
            run.output.into(),
            run.log,
            run.mutation_steps,
            Vec::new(),
            run.fn_results,
            run.executed,
            local_files,
            u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
        );
        if let Some(key) = key.as_ref().filter(|_| stored) {
            store.put_action(key, &record.encode());
        }
        return Outcome::Done(Done {
            record: std::sync::Arc::new(record),
            hit: false,
            origin: None,
            causes: Vec::new(),
            key,
        });
    }
    // Over nodes: from this render or the store.
    let nodes_in: Option<Vec<Node>> = input.par_iter().map(|item| source.node(item)).collect();
    let Some(nodes_in) = nodes_in else {
        // A stored output whose resources are gone or damaged: the render
        // runs again without the store (see `render_once`).
        return Outcome::Skipped;
    };
    let run = hydrate::run_package(
        PackageJob {
            root: &plan.root,
            pkg: &pkg.path,
            kptfile: &pkg.kptfile,
            input: nodes_in,
            local_files,
            display: &display,
            outer,
        },
        context.save_on_failure,
        &context.options,
        runtimes,
    );
    let output = match run.output {
        Ok(output) => output,
        Err(failure) => {
            return Outcome::Failed(Box::new(PackageRun {
                output: Err(failure),
                ..run
            }));
        }
    };
    let items = store_items(store, &plan.root_path, &output);
    for (item, node) in items.iter().zip(output) {
        source.nodes.insert(item.digest, node);
    }
    let record = RunRecord::new(
        items.into(),
        run.log,
        run.mutation_steps,
        run.validation_steps,
        run.fn_results,
        run.executed,
        run.input_files,
        u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
    );
    if let Some(key) = key.as_ref().filter(|_| stored) {
        store.put_action(key, &record.encode());
    }
    Outcome::Done(Done {
        record: std::sync::Arc::new(record),
        hit: false,
        origin: None,
        causes: Vec::new(),
        key,
    })
}

/// The resources this render parsed or made, by digest: a run that needs
/// one its subpackage made takes a copy from here rather than decoding it.
/// Sharded by digest, so that the threads of a level rarely wait on one
/// another.
pub(crate) struct NodeCache(Vec<Mutex<std::collections::HashMap<Digest, std::sync::Arc<Node>>>>);

/// Shards of a [`NodeCache`].
const NODE_SHARDS: usize = 64;

impl Default for NodeCache {
    fn default() -> NodeCache {
        NodeCache((0..NODE_SHARDS).map(|_| Mutex::default()).collect())
    }
}

impl NodeCache {
    fn shard(
        &self,
        digest: &Digest,
    ) -> &Mutex<std::collections::HashMap<Digest, std::sync::Arc<Node>>> {
        &self.0[usize::from(digest.0[0]) % NODE_SHARDS]
    }

    fn insert(&self, digest: Digest, node: Node) {
        if let Ok(mut nodes) = self.shard(&digest).lock() {
            nodes
                .entry(digest)
                .or_insert_with(|| std::sync::Arc::new(node));
        }
    }

    /// A copy of the node (copied outside the lock).
    fn get(&self, digest: &Digest) -> Option<Node> {
        let shared = self.shard(digest).lock().ok()?.get(digest).cloned()?;
        Some(std::sync::Arc::unwrap_or_clone(shared))
    }

    /// The node itself, taken out (a run that edits it puts back what it
    /// makes): no copy unless another holder shares it.
    fn take(&self, digest: &Digest) -> Option<Node> {
        let shared = self.shard(digest).lock().ok()?.remove(digest)?;
        Some(std::sync::Arc::unwrap_or_clone(shared))
    }
}

/// The executor's [`ItemSource`]: the store and this render's nodes.
pub(crate) struct Source<'a> {
    store: &'a Store,
    root: &'a RootPath,
    nodes: &'a NodeCache,
    build: &'a str,
    /// The store's memos (parsed files, resource chains) answer: off when a
    /// render runs again after finding damage, so that what it makes is
    /// written over the damaged values.
    memos: bool,
    /// Decomposed steps by builtin and config: the same few recur in every
    /// package.
    steps: Mutex<StepCache>,
}

/// [`Source::steps`].
type StepCache = std::collections::HashMap<
    (
        crate::runtime::builtin::Builtin,
        std::collections::BTreeMap<String, String>,
    ),
    Option<std::sync::Arc<ItemStep>>,
>;

impl<'a> Source<'a> {
    /// The source over `store` and this render's `nodes`.
    pub(crate) fn new(
        store: &'a Store,
        root: &'a RootPath,
        nodes: &'a NodeCache,
        build: &'a str,
        memos: bool,
    ) -> Source<'a> {
        Source {
            store,
            root,
            nodes,
            build,
            memos,
            steps: Mutex::default(),
        }
    }

    /// Keeps a resource this render made.
    pub(crate) fn keep_node(&self, digest: Digest, node: Node) {
        self.nodes.insert(digest, node);
    }

    /// A copy of the resource of `item`, leaving this render's node where it
    /// is.
    pub(crate) fn copy(&self, item: &Item) -> Option<Node> {
        self.nodes
            .get(&item.digest)
            .or_else(|| decode_item(&self.store.blob(&item.digest)?, self.root))
    }
}

impl ItemSource for Source<'_> {
    fn node(&self, item: &Item) -> Option<Node> {
        self.nodes
            .take(&item.digest)
            .or_else(|| decode_item(&self.store.blob(&item.digest)?, self.root))
    }

    fn item_step(
        &self,
        builtin: crate::runtime::builtin::Builtin,
        config: &std::collections::BTreeMap<String, String>,
    ) -> Option<std::sync::Arc<ItemStep>> {
        let key = (builtin, config.clone());
        if let Some(step) = self.steps.lock().ok()?.get(&key) {
            return step.clone();
        }
        let node = (!config.is_empty()).then(|| crate::hydrate::bridge::config_map_node(config));
        let step = ItemStep::new(builtin, node.as_ref())
            .ok()
            .flatten()
            .map(std::sync::Arc::new);
        if let Ok(mut steps) = self.steps.lock() {
            steps.insert(key, step.clone());
        }
        step
    }

    fn chained(&self, key: &Digest) -> Option<Vec<Chained>> {
        if !self.memos {
            return None;
        }
        decode_chained(&self.store.action(key)?)
    }

    fn put_chained(&self, key: &Digest, chained: &[Chained]) {
        self.store.put_action(key, &encode_chained(chained));
    }

    fn keep(&self, item: &Item, blob: Vec<u8>, node: Node) {
        self.store.put_blob(&item.digest, &blob);
        self.nodes.insert(item.digest, node);
    }

    fn chain_key(&self, chain: &str, group: &Digest) -> Digest {
        let mut key = KeyHasher::of(self.build, "chain");
        key.text(chain);
        key.digest(group);
        key.finish()
    }
}

/// A group's pass through a chain, stored.
fn encode_chained(chained: &[Chained]) -> Vec<u8> {
    let mut out = Writer(Vec::with_capacity(64 + chained.len() * 128));
    let outputs: Vec<Item> = chained.iter().map(|one| one.output.clone()).collect();
    write_items(&mut out, &outputs);
    for one in chained {
        out.0.extend_from_slice(&one.input.0);
        out.number(one.partials.len() as u64);
        for partial in &one.partials {
            out.0
                .push(u8::from(partial.whole_list) | (u8::from(partial.worked) << 1));
            out.number(partial.count);
            out.number(partial.values.len() as u64);
            for value in &partial.values {
                out.text(value);
            }
        }
        out.number(one.keys.len() as u64);
        for key in &one.keys {
            match key {
                Some(key) => {
                    out.0.push(1);
                    out.text(key);
                }
                None => out.0.push(0),
            }
        }
    }
    out.0
}

/// Reads [`encode_chained`]'s form; `None` for anything malformed.
fn decode_chained(bytes: &[u8]) -> Option<Vec<Chained>> {
    let mut input = Reader(bytes);
    let outputs = read_items(&mut input)?;
    let mut chained = Vec::with_capacity(outputs.len());
    for output in outputs.iter() {
        let before = Digest(input.take(32)?.try_into().ok()?);
        let steps = input.count()?;
        let mut partials = Vec::with_capacity(steps);
        for _ in 0..steps {
            let flags = *input.take(1)?.first()?;
            let count = input.number()?;
            let values = input.count()?;
            let values = (0..values)
                .map(|_| input.text().map(str::to_owned))
                .collect::<Option<Vec<_>>>()?;
            partials.push(Partial {
                whole_list: flags & 1 != 0,
                worked: flags & 2 != 0,
                count,
                values,
            });
        }
        let keys = input.count()?;
        let keys = (0..keys)
            .map(|_| match input.take(1)?.first()? {
                0 => Some(None),
                1 => Some(Some(input.text()?.to_owned())),
                _ => None,
            })
            .collect::<Option<Vec<_>>>()?;
        chained.push(Chained {
            input: before,
            output: output.clone(),
            partials,
            keys,
        });
    }
    input.0.is_empty().then_some(chained)
}

/// Runs `pkg`'s pipeline over nodes as well and says how it differs from
/// `run`, its run over items (`KRENDER_NATIVE=verify`).
fn verify_items(
    context: &RenderContext,
    plan: &Plan,
    pkg: &PlannedPackage,
    display: &str,
    input: &[Item],
    run: &crate::hydrate::items::ItemRun,
    source: &Source<'_>,
) -> Result<(), String> {
    let nodes = input
        .iter()
        .map(|item| source.copy(item))
        .collect::<Option<Vec<Node>>>()
        .ok_or("an input resource does not read")?;
    let options = crate::hydrate::RenderOptions {
        native: NativeMode::On,
        ..context.options.clone()
    };
    let runtimes = Runtimes {
        image: context.image.as_ref(),
        exec: context.exec.as_ref(),
        runs: None,
    };
    let whole = hydrate::run_package(
        PackageJob {
            root: &plan.root,
            pkg: &pkg.path,
            kptfile: &pkg.kptfile,
            input: nodes,
            local_files: Vec::new(),
            display,
            outer: &pkg.path,
        },
        context.save_on_failure,
        &options,
        runtimes,
    );
    let output = whole
        .output
        .map_err(|(_, error)| format!("the whole-list run failed: {error}"))?;
    let digests: Vec<Digest> = output
        .iter()
        .map(|node| item_of(node, &plan.root_path).0.digest)
        .collect();
    let mine: Vec<Digest> = run.output.iter().map(|item| item.digest).collect();
    if digests != mine {
        let at = digests.iter().zip(&mine).position(|(a, b)| a != b);
        return Err(format!(
            "outputs differ ({} against {} resources, first difference at {at:?})",
            mine.len(),
            digests.len()
        ));
    }
    if without_durations(&whole.log) != without_durations(&run.log) {
        return Err(format!(
            "logs differ:\n{}\n---\n{}",
            String::from_utf8_lossy(&whole.log),
            String::from_utf8_lossy(&run.log)
        ));
    }
    if whole.mutation_steps != run.mutation_steps || whole.fn_results != run.fn_results {
        return Err("step records or results differ".into());
    }
    if whole.executed != run.executed || !whole.validation_steps.is_empty() {
        return Err("the functions run differ".into());
    }
    Ok(())
}

/// A log with each step's time left out (`[PASS] "x" in 0s`).
fn without_durations(log: &[u8]) -> String {
    String::from_utf8_lossy(log)
        .lines()
        .map(|line| match line.rfind(" in ") {
            Some(at) if line.starts_with("[PASS]") || line.starts_with("[FAIL]") => &line[..at],
            _ => line,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The display name a run prints for the package `rel`: the root's name is
/// filled in when the log is replayed.
fn log_display(rel: &str) -> String {
    if rel.is_empty() {
        ROOT_MARKER.to_owned()
    } else {
        format!("{ROOT_MARKER}/{rel}")
    }
}

/// The items of `output`, each resource's relocatable form kept in the
/// store (in parallel: a root's output is the whole tree).
pub(crate) fn store_items(store: &Store, root: &RootPath, output: &[Node]) -> Vec<Item> {
    output
        .par_iter()
        .map(|node| {
            let (item, blob) = item_of(node, root);
            store.put_blob(&item.digest, &blob);
            item
        })
        .collect()
}
