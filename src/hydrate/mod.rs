//! Hydration: running Kptfile pipelines over a package tree in depth-first
//! post-order (kpt's default) or breadth-first order (root annotation
//! `kpt.dev/bfs-rendering: "true"`), producing a [`RenderOutcome`] without
//! touching disk. [`apply()`] then writes what kpt would write.
//!
//! Behaviour follows kpt's `render_executor.go` (`hydrate`,
//! `hydrateBfsOrder`, `runPipeline`, `runMutators`, `runValidators`) and its
//! function runner (`[RUNNING]`/`[PASS]`/`[FAIL]` lines, path invariants,
//! KRM checks, result capture).

pub mod apply;
pub(crate) mod bridge;
pub mod error;
pub mod item;
pub(crate) mod items;
pub mod printer;
pub mod results;
pub mod select;

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rayon::prelude::*;

use crate::krm::resource::{self, clean_path};
use crate::krm::resource_list::ItemTexts;
use crate::pkg::kptfile::{self, Function, Kptfile, KptfileError};
use crate::pkg::tree;
use crate::runtime::cancel::Cancel;
use crate::runtime::function_filter::SettledList;
use crate::runtime::trace::{TracingEvaluator, write_trace_file};
use crate::runtime::{EvalError, Evaluator, FunctionTarget};
use crate::yaml::node::{Node, Style};

pub use apply::{ApplyError, Output, Written, apply, apply_recording};
pub use error::{HydrateError, Report};
use printer::Printer;
use results::{FnResult, ResultItems, StepRecord};

/// `--allow-exec` is needed for `exec:` steps; kpt's message.
pub const ALLOW_EXEC_MESSAGE: &str =
    "must run with `--allow-exec` option to allow running function binaries";

/// Stack of every thread that renders: walks over resources recurse as
/// deep as YAML nests (go-yaml accepts 10,000 levels), and a default 2 MiB
/// worker stack overflowed at a few thousand. Only touched pages are
/// committed.
pub const WORKER_STACK_BYTES: usize = 256 << 20;

/// A pool of `jobs` render workers with [`WORKER_STACK_BYTES`] of stack;
/// `None` (no `--jobs`, or a pool that cannot start) means rayon's global
/// pool, which the CLI builds with the same stack.
pub(crate) fn worker_pool(jobs: Option<usize>) -> Option<rayon::ThreadPool> {
    rayon::ThreadPoolBuilder::new()
        .num_threads(jobs?)
        .stack_size(WORKER_STACK_BYTES)
        .build()
        .ok()
}

/// Options of one render.
#[derive(Clone, Debug)]
pub struct RenderOptions {
    /// `--allow-exec`.
    pub allow_exec: bool,
    /// `--allow-alpha-wasm`.
    pub allow_wasm: bool,
    /// Cut failing functions' output to 4 lines (`--truncate-output`).
    pub truncate_output: bool,
    /// Prefix for short image names (`--image-prefix`, `KPT_IMAGE_PREFIX`).
    pub image_prefix: String,
    /// Deadline for one function call.
    pub timeout: Duration,
    /// `--jobs`: threads for the packages of one BFS level (default: one
    /// per core).
    pub jobs: Option<usize>,
    /// Stops the render between steps when tripped (and kills running
    /// functions, through the evaluators holding the same token).
    pub cancel: Cancel,
    /// Annotate written resources with `cnrm.cloud.google.com/blueprint`
    /// (kpt's attribution; off with `KRM_DISABLE_ATTRIBUTION`).
    pub attribution: bool,
    /// Whether builtins run on the nodes or through the wire.
    pub native: crate::runtime::function_filter::NativeMode,
    /// Whether writing the output flushes it to the disk.
    pub durability: crate::pkg::commit::Durability,
    /// `--trace DIR`: every step's wire input, output, stderr and results
    /// are kept under `DIR/<package>/<NN>-<kind>-<function>/`.
    pub trace: Option<PathBuf>,
}

impl Default for RenderOptions {
    fn default() -> Self {
        RenderOptions {
            allow_exec: false,
            allow_wasm: false,
            truncate_output: true,
            image_prefix: kptfile::DEFAULT_IMAGE_PREFIX.to_owned(),
            timeout: crate::runtime::config::DEFAULT_TIMEOUT,
            jobs: None,
            cancel: Cancel::new(),
            attribution: true,
            native: Default::default(),
            durability: Default::default(),
            trace: None,
        }
    }
}

/// Where breadth-first package runs are kept across renders (the engine's
/// action cache). Under BFS a package's run is a function of its Kptfile
/// and the resources of its scope as its ancestors left them, so it is
/// looked up by those; a store that cannot key a run (a function that is
/// not known to be pure) answers `None`.
pub trait RunStore: Sync {
    /// The key of `pkg`'s run over `input`, if its run may be kept.
    fn key(&self, pkg: &Path, kptfile: &Kptfile, input: &[Node]) -> Option<String>;
    /// The run kept under `key`.
    fn lookup(&self, key: &str) -> Option<PackageRun>;
    /// Keeps a successful run under `key`.
    fn store(&self, key: &str, run: &PackageRun);
    /// Whether `pkg`'s pipeline runs in this render at all. A package the
    /// store declines keeps its input as its output, silently: a sharded
    /// render runs only its own part of the tree, and packages outside it
    /// never touch that part's scopes.
    fn runs(&self, _pkg: &Path) -> bool {
        true
    }
}

/// The evaluators for the two kinds of steps, and where BFS runs are kept.
#[derive(Clone, Copy)]
pub struct Runtimes<'a> {
    /// For `image:` steps.
    pub image: &'a dyn Evaluator,
    /// For `exec:` steps.
    pub exec: &'a dyn Evaluator,
    /// BFS runs kept across renders, when the render has a cache.
    pub runs: Option<&'a dyn RunStore>,
}

/// Everything a render decided, before anything is written.
#[derive(Debug)]
pub struct RenderOutcome {
    /// Absolute root package path.
    pub root: PathBuf,
    /// The root package's resources after hydration (all packages), with
    /// package-relative paths and package-path annotations; `None` when kpt
    /// would have nothing to write.
    pub resources: Option<Resources>,
    /// Why the render failed, if it did.
    pub error: Option<HydrateError>,
    /// `kpt.dev/save-on-render-failure` on the root Kptfile.
    pub save_on_failure: bool,
    /// [`RenderOptions::attribution`], for the writer.
    pub attribution: bool,
    /// [`RenderOptions::durability`], for the writer.
    pub durability: crate::pkg::commit::Durability,
    /// Files read as inputs (relative to the root), for pruning.
    pub input_files: BTreeSet<String>,
    /// Mutation steps for `status.renderStatus`, in execution order.
    pub mutation_steps: Vec<StepRecord>,
    /// Validation steps for `status.renderStatus`.
    pub validation_steps: Vec<StepRecord>,
    /// Every function call, for `--results-dir`.
    pub fn_results: Vec<FnResult>,
    /// Functions that ran successfully.
    pub executed: usize,
    /// Packages visited.
    pub n_packages: usize,
}

/// A render's resources: its own, or the root's run as the engine still
/// holds it (a watch session keeps its runs for the next render), which
/// [`apply`] writes without copying where it can.
#[derive(Debug)]
pub enum Resources {
    /// Resources the outcome owns.
    Owned(Vec<Node>),
    /// The output of a successful run held elsewhere too.
    Shared(SharedOutput),
    /// The file changes an in-place render makes (planned by the engine
    /// from the output's digests), without the Kptfile's status.
    Files(crate::pkg::commit::Changes),
}

/// A successful run the engine keeps, and the texts of the last list
/// written from the engine's root output (see
/// [`crate::krm::resource_list::encode_output_list_remembered`]).
#[derive(Clone, Debug)]
pub struct SharedOutput {
    /// The run.
    pub run: Arc<PackageRun>,
    /// The texts, kept by the engine from one render to the next.
    pub texts: Arc<ItemTexts>,
}

impl Resources {
    /// The resources as a list of their own: a shared run's are taken when
    /// nothing else holds the run (a one-shot render), else copied, in
    /// parallel: it is the whole tree (a watch session keeps its runs).
    pub fn into_owned(self) -> Vec<Node> {
        match self {
            Resources::Owned(resources) => resources,
            Resources::Files(_) => Vec::new(),
            Resources::Shared(shared) => match Arc::try_unwrap(shared.run) {
                Ok(run) => run.output.unwrap_or_default(),
                Err(run) => run
                    .output
                    .as_deref()
                    .unwrap_or_default()
                    .par_iter()
                    .cloned()
                    .collect(),
            },
        }
    }
}

/// A package taking part in the render.
struct PkgNode {
    path: PathBuf,
    kptfile: Kptfile,
}

/// Reads and validates the root package's Kptfile (kpt does this before any
/// hydration; failures here leave the package untouched).
pub fn load_root(root: &Path) -> Result<Kptfile, KptfileError> {
    load_root_with(root, |file| std::fs::read(file).map(Arc::from))
}

/// [`load_root`], reading the file with `read` (a watch session reads
/// through its file stamps).
pub fn load_root_with(
    root: &Path,
    read: impl FnOnce(&Path) -> std::io::Result<Arc<[u8]>>,
) -> Result<Kptfile, KptfileError> {
    let kptfile = read_kptfile_with(root, read)?;
    kptfile.validate(root)?;
    Ok(kptfile)
}

fn read_kptfile(dir: &Path) -> Result<Kptfile, KptfileError> {
    read_kptfile_with(dir, |file| std::fs::read(file).map(Arc::from))
}

fn read_kptfile_with(
    dir: &Path,
    read: impl FnOnce(&Path) -> std::io::Result<Arc<[u8]>>,
) -> Result<Kptfile, KptfileError> {
    let file = dir.join(kptfile::KPTFILE_NAME);
    let bytes = match read(&file) {
        Ok(bytes) => bytes,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
            return Err(KptfileError::Missing {
                dir: dir.to_path_buf(),
            });
        }
        Err(error) => {
            return Err(KptfileError::Unreadable {
                dir: dir.to_path_buf(),
                details: error.to_string(),
                location: None,
            });
        }
    };
    Kptfile::parse_bytes(&bytes, dir)
}

struct Hydrator<'a, 'w> {
    root: PathBuf,
    options: &'a RenderOptions,
    runtimes: Runtimes<'a>,
    printer: Printer<'w>,
    save_on_failure: bool,
    input_files: BTreeSet<String>,
    mutation_steps: Vec<StepRecord>,
    validation_steps: Vec<StepRecord>,
    fn_results: Vec<FnResult>,
    executed: usize,
    n_packages: usize,
    /// DFS pipeline runs computed ahead of the walk (by the engine), keyed by
    /// package path; the walk adopts them instead of running the pipeline.
    precomputed: BTreeMap<PathBuf, PackageRun>,
    /// The subpackages the engine found, for packages it ran (see
    /// [`Precomputed::subpackages`]).
    known_subpackages: BTreeMap<PathBuf, Vec<(PathBuf, Kptfile)>>,
    /// A watch session's BFS runs from its last render, if any.
    bfs_memo: Option<BfsMemo>,
    /// True once the whole resource list of the current pipeline passed
    /// kpt's KRM check (as the output of a step without selectors): a later
    /// step's input is then made of checked, unchanged resources, so
    /// checking it again cannot fail.
    input_checked: bool,
    /// What the last step that ran knew of its output, if it was a settled
    /// native step (see [`SettledList`]).
    settled_output: Option<SettledList>,
    /// Steps run so far in the current package (names `--trace` dirs).
    steps_in_package: usize,
    /// The name the log prints for the package run, when not its display
    /// path (the engine stores logs with the root's name left open).
    printed_display: Option<String>,
}

/// What the engine computed ahead of the walk.
#[derive(Debug, Default)]
pub struct Precomputed {
    /// DFS pipeline runs by package path; the walk adopts them instead of
    /// running the pipelines.
    pub runs: BTreeMap<PathBuf, PackageRun>,
    /// Direct subpackages (path and validated Kptfile, in walk order) of
    /// packages whose run is in `runs`, as the engine read them: the walk
    /// takes them instead of listing and decoding the tree again, so it
    /// adopts exactly the tree the runs were computed on.
    pub subpackages: BTreeMap<PathBuf, Vec<(PathBuf, Kptfile)>>,
    /// The root's successful run, when the engine keeps it: its entry in
    /// `runs` then carries an empty output, and a walk that adopts it hands
    /// on this run's output as [`Resources::Shared`] instead of a copy.
    pub root_output: Option<SharedOutput>,
}

/// A BFS render's pipeline runs, kept for the next render of the same tree
/// (a watch session): a package whose Kptfile and input resources are
/// unchanged adopts its last run instead of running again. Under BFS every
/// package's input comes from its ancestors' outputs, so after an edit the
/// root re-runs (it sees every resource), and below it only the packages
/// whose share of the resources changed.
#[derive(Default)]
pub struct BfsMemo {
    /// By package path: the Kptfile and input of the last run, and the run.
    runs: BTreeMap<PathBuf, (Kptfile, Vec<Node>, PackageRun)>,
    /// Pipelines run (not adopted) through this memo.
    ran: usize,
}

impl BfsMemo {
    /// Pipelines run (not adopted) through this memo so far.
    pub fn pipelines_run(&self) -> usize {
        self.ran
    }
}

/// One package's DFS pipeline run as plain data: what the sequential walk
/// would have produced at that package, given the same input. The engine
/// computes these in parallel and memoizes them; [`hydrate_with`] adopts
/// them in kpt's order, so logs and status read as a sequential render.
#[derive(Clone, Debug)]
pub struct PackageRun {
    /// The pipeline's output, or the failure with the partial resources kpt
    /// keeps (already `None` unless save-on-render-failure is set).
    pub output: Result<Vec<Node>, Failure>,
    /// Everything the run printed.
    pub log: Vec<u8>,
    /// Mutation steps, in execution order.
    pub mutation_steps: Vec<StepRecord>,
    /// Validation steps.
    pub validation_steps: Vec<StepRecord>,
    /// Every function call.
    pub fn_results: Vec<FnResult>,
    /// Functions that ran successfully.
    pub executed: usize,
    /// The package's own input files, relative to the root (for pruning).
    pub input_files: Vec<String>,
}

/// One package's pipeline run, as the engine asks for it.
pub struct PackageJob<'a> {
    /// The render root.
    pub root: &'a Path,
    /// The package.
    pub pkg: &'a Path,
    /// Its Kptfile.
    pub kptfile: &'a Kptfile,
    /// Its own resources followed by its subpackages' rendered resources.
    pub input: Vec<Node>,
    /// The package's own input files (see [`PackageRun`]).
    pub local_files: Vec<String>,
    /// The package's name as the log prints it.
    pub display: &'a str,
    /// The package failures are reported under (the package itself
    /// depth-first, the root breadth-first).
    pub outer: &'a Path,
}

/// Runs one package's pipeline, as kpt's walks would at `job.pkg`.
pub fn run_package(
    job: PackageJob<'_>,
    save_on_failure: bool,
    options: &RenderOptions,
    runtimes: Runtimes<'_>,
) -> PackageRun {
    let context = RunContext {
        root: job.root,
        save_on_failure,
        options,
        runtimes,
    };
    run_package_as(
        &context,
        job.pkg,
        job.kptfile,
        job.input,
        job.local_files,
        job.outer,
        Some(job.display),
    )
}

/// What every pipeline run of one render shares.
struct RunContext<'a> {
    root: &'a Path,
    save_on_failure: bool,
    options: &'a RenderOptions,
    runtimes: Runtimes<'a>,
}

/// `node`'s run over `input` from `store` when it keeps one, else run (and
/// kept when it may be).
fn stored_run(
    context: &RunContext<'_>,
    store: &dyn RunStore,
    node: &PkgNode,
    input: Vec<Node>,
    outer: &Path,
) -> PackageRun {
    if !store.runs(&node.path) {
        return PackageRun {
            output: Ok(input),
            log: Vec::new(),
            mutation_steps: Vec::new(),
            validation_steps: Vec::new(),
            fn_results: Vec::new(),
            executed: 0,
            input_files: Vec::new(),
        };
    }
    let key = store.key(&node.path, &node.kptfile, &input);
    if let Some(run) = key.as_deref().and_then(|key| store.lookup(key)) {
        return run;
    }
    let run = run_package_under(context, &node.path, &node.kptfile, input, Vec::new(), outer);
    if let Some(key) = &key {
        store.store(key, &run);
    }
    run
}

/// [`run_package`], reporting errors under `outer` (BFS reports every
/// package's failure under the root).
fn run_package_under(
    context: &RunContext<'_>,
    pkg: &Path,
    kptfile: &Kptfile,
    input: Vec<Node>,
    local_files: Vec<String>,
    outer: &Path,
) -> PackageRun {
    run_package_as(context, pkg, kptfile, input, local_files, outer, None)
}

/// [`run_package_under`], printing the package as `display` when given.
fn run_package_as(
    context: &RunContext<'_>,
    pkg: &Path,
    kptfile: &Kptfile,
    input: Vec<Node>,
    local_files: Vec<String>,
    outer: &Path,
    display: Option<&str>,
) -> PackageRun {
    let RunContext {
        root,
        save_on_failure,
        options,
        runtimes,
    } = *context;
    let mut log = Vec::new();
    let mut hydrator = Hydrator::new(
        root,
        options,
        runtimes,
        &mut log,
        save_on_failure,
        Precomputed::default(),
    );
    hydrator.printed_display = display.map(str::to_owned);
    let node = PkgNode {
        path: pkg.to_path_buf(),
        kptfile: kptfile.clone(),
    };
    let output = hydrator
        .run_pipeline(&node, input, outer)
        .map_err(|(output, error)| (output.filter(|_| save_on_failure), error));
    let Hydrator {
        mutation_steps,
        validation_steps,
        fn_results,
        executed,
        ..
    } = hydrator;
    PackageRun {
        output,
        log,
        mutation_steps,
        validation_steps,
        fn_results,
        executed,
        input_files: local_files,
    }
}

/// The root-relative input file names of a package's own resources (what
/// the walk records for pruning).
pub fn input_file_names(root: &Path, pkg: &Path, resources: &[Node]) -> Vec<String> {
    let rel = tree::relative_to_root(root, pkg);
    resources
        .iter()
        .map(|node| {
            let path = resource::annotation(node, resource::PATH).unwrap_or("");
            if rel.is_empty() {
                clean_path(path)
            } else {
                clean_path(&format!("{rel}/{path}"))
            }
        })
        .collect()
}

/// Renders the tree at `root` in kpt's order (DFS, or BFS when the root
/// Kptfile asks), adopting `precomputed` DFS pipeline runs where the walk
/// reaches them; packages without one run in the walk. BFS renders ignore
/// them. Commands do not call this directly: the engine's one-shot entry
/// point computes the runs and then calls it.
pub fn hydrate_with(
    root: &Path,
    root_kptfile: Kptfile,
    options: &RenderOptions,
    runtimes: Runtimes<'_>,
    log: &mut dyn Write,
    precomputed: Precomputed,
) -> RenderOutcome {
    hydrate_with_memo(
        root,
        root_kptfile,
        options,
        runtimes,
        log,
        precomputed,
        None,
    )
}

/// [`hydrate_with`], reusing and updating `bfs_memo`'s pipeline runs when
/// the root renders breadth-first (see [`BfsMemo`]).
pub fn hydrate_with_memo(
    root: &Path,
    root_kptfile: Kptfile,
    options: &RenderOptions,
    runtimes: Runtimes<'_>,
    log: &mut dyn Write,
    precomputed: Precomputed,
    mut bfs_memo: Option<&mut BfsMemo>,
) -> RenderOutcome {
    let _span = tracing::info_span!("walk", adopted = precomputed.runs.len()).entered();
    let save_on_failure =
        root_kptfile.annotation_is_true(kptfile::SAVE_ON_RENDER_FAILURE_ANNOTATION);
    let bfs = root_kptfile.annotation_is_true(kptfile::BFS_RENDERING_ANNOTATION);
    let precomputed = if bfs {
        Precomputed::default()
    } else {
        precomputed
    };
    let root_output = precomputed.root_output.clone();
    let mut hydrator = Hydrator::new(root, options, runtimes, log, save_on_failure, precomputed);
    let node = PkgNode {
        path: root.to_path_buf(),
        kptfile: root_kptfile,
    };
    let (resources, error) = if bfs {
        hydrator.bfs_memo = bfs_memo.as_deref_mut().map(std::mem::take);
        let result = hydrator.hydrate_bfs(node);
        if let (Some(slot), Some(memo)) = (bfs_memo, hydrator.bfs_memo.take()) {
            *slot = memo;
        }
        match result {
            Ok(resources) => (Some(Resources::Owned(resources)), None),
            Err((resources, error)) => (resources.map(Resources::Owned), Some(error)),
        }
    } else {
        match hydrator.hydrate_dfs(&node) {
            // The walk adopted the root's run: its output is the shared one.
            Ok(_) if !hydrator.precomputed.contains_key(root) && root_output.is_some() => {
                (root_output.map(Resources::Shared), None)
            }
            Ok(resources) => (Some(Resources::Owned(resources)), None),
            Err((resources, error)) => (resources.map(Resources::Owned), Some(error)),
        }
    };
    RenderOutcome {
        root: root.to_path_buf(),
        resources,
        error,
        save_on_failure,
        attribution: options.attribution,
        durability: options.durability,
        input_files: hydrator.input_files,
        mutation_steps: hydrator.mutation_steps,
        validation_steps: hydrator.validation_steps,
        fn_results: hydrator.fn_results,
        executed: hydrator.executed,
        n_packages: hydrator.n_packages,
    }
}

/// A failure with the partial resources kpt keeps for save-on-failure.
pub type Failure = (Option<Vec<Node>>, HydrateError);

/// Why a step failed, as the runner sees it.
struct StepFailure {
    /// The error text (`already handled error` for reported exec errors).
    message: String,
    report: Report,
}

impl<'a, 'w> Hydrator<'a, 'w> {
    fn new(
        root: &Path,
        options: &'a RenderOptions,
        runtimes: Runtimes<'a>,
        log: &'w mut dyn Write,
        save_on_failure: bool,
        precomputed: Precomputed,
    ) -> Hydrator<'a, 'w> {
        Hydrator {
            root: root.to_path_buf(),
            options,
            runtimes,
            printer: Printer::new(log, options.truncate_output),
            save_on_failure,
            input_files: BTreeSet::new(),
            mutation_steps: Vec::new(),
            validation_steps: Vec::new(),
            fn_results: Vec::new(),
            executed: 0,
            n_packages: 0,
            precomputed: precomputed.runs,
            known_subpackages: precomputed.subpackages,
            bfs_memo: None,
            input_checked: false,
            settled_output: None,
            steps_in_package: 0,
            printed_display: None,
        }
    }

    fn display(&self, pkg: &Path) -> String {
        tree::display_path(&self.root, pkg)
    }

    fn load_local(&mut self, pkg: &Path) -> Result<Vec<Node>, HydrateError> {
        // A precomputed package's resources are already in its run's output.
        if let Some(run) = self.precomputed.get(pkg) {
            self.input_files.extend(run.input_files.iter().cloned());
            return Ok(Vec::new());
        }
        let resources = bridge::read_local_resources(pkg).map_err(|failure| {
            HydrateError::plain(pkg, &failure.0, Report::Error(failure.0.clone())).at(failure.1)
        })?;
        self.input_files
            .extend(input_file_names(&self.root, pkg, &resources));
        Ok(resources)
    }

    /// Lists and decodes the direct subpackages of `pkg`.
    fn subpackages(&mut self, pkg: &Path) -> Result<Vec<(PathBuf, Kptfile)>, HydrateError> {
        if self.precomputed.contains_key(pkg)
            && let Some(known) = self.known_subpackages.remove(pkg)
        {
            return Ok(known);
        }
        let dirs = tree::direct_subpackages(pkg).map_err(|error| {
            let text = error.to_string();
            HydrateError::plain(pkg, &text, Report::Error(text.clone()))
        })?;
        let mut found = Vec::new();
        for dir in dirs {
            let kptfile = read_kptfile(&dir)
                .map_err(|error| HydrateError::subpackage_kptfile(pkg, &dir, &error))?;
            found.push((dir, kptfile));
        }
        Ok(found)
    }

    fn hydrate_dfs(&mut self, node: &PkgNode) -> Result<Vec<Node>, Failure> {
        self.n_packages += 1;
        let pkg = node.path.as_path();
        let mut input = self.load_local(pkg).map_err(|error| (None, error))?;
        let subpackages = self.subpackages(pkg).map_err(|error| (None, error))?;
        for (dir, kptfile) in subpackages {
            if let Err(error) = kptfile.validate(&dir) {
                let text = error.to_string();
                return Err((
                    None,
                    HydrateError::plain(&dir, &text, Report::kptfile(&error)),
                ));
            }
            let sub = PkgNode { path: dir, kptfile };
            match self.hydrate_dfs(&sub) {
                Ok(transitive) => input.extend(transitive),
                Err((partial, error)) => {
                    // kpt keeps the parent's partial list one level up only.
                    if let (Some(partial), true) = (partial, self.save_on_failure) {
                        input.extend(partial);
                        return Err((Some(input), error));
                    }
                    return Err((None, error));
                }
            }
        }
        if let Some(run) = self.precomputed.remove(pkg) {
            return self.adopt(run);
        }
        match self.run_pipeline(node, input, pkg) {
            Ok(output) => Ok(output),
            Err((output, error)) => Err((output.filter(|_| self.save_on_failure), error)),
        }
    }

    /// Takes a precomputed run's log and records as if it ran here.
    fn adopt(&mut self, run: PackageRun) -> Result<Vec<Node>, Failure> {
        self.printer.raw(&run.log);
        self.mutation_steps.extend(run.mutation_steps);
        self.validation_steps.extend(run.validation_steps);
        self.fn_results.extend(run.fn_results);
        self.executed += run.executed;
        run.output
    }

    fn hydrate_bfs(&mut self, root: PkgNode) -> Result<Vec<Node>, Failure> {
        // Phase 1: discover every package and load its local resources.
        let mut nodes: Vec<PkgNode> = Vec::new();
        let mut resources: Vec<Vec<Node>> = Vec::new();
        let mut children: Vec<Vec<usize>> = Vec::new();
        let mut depths: Vec<usize> = Vec::new();
        let mut queue = std::collections::VecDeque::from([(root, 0)]);
        let root_path = self.root.clone();
        while let Some((node, depth)) = queue.pop_front() {
            let index = nodes.len();
            self.n_packages += 1;
            let local = self.load_local(&node.path).map_err(|error| (None, error))?;
            let subs = self
                .subpackages(&node.path)
                .map_err(|error| (None, error))?;
            let mut child_indexes = Vec::new();
            for (dir, kptfile) in subs {
                if let Err(error) = kptfile.validate(&dir) {
                    let text = error.to_string();
                    return Err((
                        None,
                        HydrateError::plain(&root_path, &text, Report::kptfile(&error)),
                    ));
                }
                // Its index once dequeued: everything queued before it
                // (earlier siblings included) comes first.
                child_indexes.push(index + 1 + queue.len());
                queue.push_back((PkgNode { path: dir, kptfile }, depth + 1));
            }
            nodes.push(node);
            resources.push(local);
            children.push(child_indexes);
            depths.push(depth);
        }
        // Phase 2: run pipelines top-down; each sees itself and its
        // descendants. Descendants keep their lists unless an output names
        // them (kpt's propagateResourcesAcrossNodes). The packages of one
        // level (BFS order lists them together) have disjoint scopes, so
        // they may run in parallel first (see `run_bfs_level`); their runs
        // are then adopted in order, exactly as if they ran here.
        let mut level_start = 0;
        while level_start < nodes.len() {
            let level_end = (level_start..nodes.len())
                .find(|&i| depths.get(i) != depths.get(level_start))
                .unwrap_or(nodes.len());
            let mut ahead =
                self.run_bfs_level(&nodes, &resources, &children, level_start..level_end);
            // Packages whose list an earlier output of this level replaced:
            // a run computed ahead for them or an ancestor saw the old list.
            let mut replaced = vec![false; nodes.len()];
            for index in level_start..level_end {
                let run = ahead
                    .get_mut(index - level_start)
                    .and_then(Option::take)
                    .filter(|_| !subtree(&children, index).any(|i| replaced.get(i) == Some(&true)));
                let result = match run {
                    Some(run) => {
                        // The list this run saw now belongs to it.
                        resources[index] = Vec::new();
                        self.adopt(run)
                    }
                    None => {
                        let input = scoped_input(&mut resources, &children, index);
                        self.run_bfs_pipeline(&nodes[index], input, &root_path)
                    }
                };
                let (output, failure) = match result {
                    Ok(output) => (output, None),
                    Err((output, error)) => match output {
                        Some(output) if self.save_on_failure => (output, Some(error)),
                        _ => return Err((None, error)),
                    },
                };
                let mut own = Vec::new();
                let mut by_package: Vec<Option<Vec<Node>>> = vec![None; nodes.len()];
                for resource_node in output {
                    let target = resource::annotation(&resource_node, resource::PACKAGE_PATH)
                        .map(PathBuf::from);
                    let target_index = target
                        .as_ref()
                        .and_then(|target| nodes.iter().position(|n| &n.path == target))
                        .filter(|&i| i != index);
                    match target_index {
                        Some(i) => by_package[i]
                            .get_or_insert_with(Vec::new)
                            .push(resource_node),
                        None => own.push(resource_node),
                    }
                }
                for (i, list) in by_package.into_iter().enumerate() {
                    if let Some(list) = list {
                        resources[i] = list;
                        replaced[i] = true;
                    }
                }
                resources[index] = own;
                if let Some(error) = failure {
                    return Err((Some(resources.into_iter().flatten().collect()), error));
                }
            }
            level_start = level_end;
        }
        Ok(resources.into_iter().flatten().collect())
    }

    /// Runs the pipelines of one BFS level in parallel, each over its scope
    /// as it stands before the level, or nothing (all `None`) when the level
    /// must run one package at a time: a single package, a watch session's
    /// memo (which reuses runs itself), or an `exec:` step anywhere in the
    /// level (a local program may have side effects, and kpt would not run
    /// the packages after a failing one).
    fn run_bfs_level(
        &self,
        nodes: &[PkgNode],
        resources: &[Vec<Node>],
        children: &[Vec<usize>],
        level: std::ops::Range<usize>,
    ) -> Vec<Option<PackageRun>> {
        let sequential = level.len() < 2
            || self.bfs_memo.is_some()
            || nodes.get(level.clone()).is_none_or(|level| {
                level.iter().any(|node| {
                    let pipeline = &node.kptfile.pipeline;
                    pipeline
                        .mutators
                        .iter()
                        .chain(&pipeline.validators)
                        .any(|function| !function.exec.is_empty())
                })
            });
        if sequential {
            return level.map(|_| None).collect();
        }
        let context = self.run_context();
        let jobs: Vec<(&PkgNode, Vec<Node>)> = level
            .filter_map(|index| {
                let input = subtree(children, index)
                    .filter_map(|i| resources.get(i))
                    .flatten()
                    .cloned()
                    .collect();
                Some((nodes.get(index)?, input))
            })
            .collect();
        let run = |(node, input): (&PkgNode, Vec<Node>)| {
            Some(match context.runtimes.runs {
                Some(store) => stored_run(&context, store, node, input, context.root),
                None => run_package_under(
                    &context,
                    &node.path,
                    &node.kptfile,
                    input,
                    Vec::new(),
                    context.root,
                ),
            })
        };
        match worker_pool(self.options.jobs) {
            Some(pool) => pool.install(|| jobs.into_par_iter().map(run).collect()),
            None => jobs.into_par_iter().map(run).collect(),
        }
    }

    /// [`Hydrator::run_pipeline`] for a BFS package, through the session's
    /// memo when there is one. Pipelines with `configPath:` steps read a
    /// file outside their input, so they always run; a run is otherwise a
    /// function of its Kptfile and input (`exec:` functions included: kpt
    /// asks functions to be deterministic).
    fn run_bfs_pipeline(
        &mut self,
        node: &PkgNode,
        input: Vec<Node>,
        outer: &Path,
    ) -> Result<Vec<Node>, Failure> {
        let Some(mut memo) = self.bfs_memo.take() else {
            return self.run_bfs_stored(node, input, outer);
        };
        let impure = node.kptfile.pipeline.config_paths().next().is_some();
        let reused = match memo.runs.get(&node.path) {
            Some((kptfile, previous, run))
                if !impure
                    && kptfile == &node.kptfile
                    && previous.len() == input.len()
                    && previous.iter().zip(&input).all(|(a, b)| a.same_content(b)) =>
            {
                Some(run.clone())
            }
            _ => None,
        };
        let run = match reused {
            Some(run) => run,
            None => {
                memo.ran += 1;
                let context = self.run_context();
                let run = run_package_under(
                    &context,
                    &node.path,
                    &node.kptfile,
                    input.clone(),
                    Vec::new(),
                    outer,
                );
                memo.runs.insert(
                    node.path.clone(),
                    (node.kptfile.clone(), input, run.clone()),
                );
                run
            }
        };
        self.bfs_memo = Some(memo);
        self.adopt(run)
    }

    /// A BFS package's run from the render's [`RunStore`] when it has it,
    /// else run (and kept when it may be).
    fn run_bfs_stored(
        &mut self,
        node: &PkgNode,
        input: Vec<Node>,
        outer: &Path,
    ) -> Result<Vec<Node>, Failure> {
        let Some(store) = self.runtimes.runs else {
            return self.run_pipeline(node, input, outer);
        };
        let run = stored_run(&self.run_context(), store, node, input, outer);
        self.adopt(run)
    }

    fn run_context(&self) -> RunContext<'_> {
        RunContext {
            root: &self.root,
            save_on_failure: self.save_on_failure,
            options: self.options,
            runtimes: self.runtimes,
        }
    }

    /// kpt's `runPipeline` for one package. `outer` is the package the error
    /// chain is reported under.
    fn run_pipeline(
        &mut self,
        node: &PkgNode,
        input: Vec<Node>,
        outer: &Path,
    ) -> Result<Vec<Node>, (Option<Vec<Node>>, HydrateError)> {
        let pkg = node.path.as_path();
        let display = self
            .printed_display
            .clone()
            .unwrap_or_else(|| self.display(pkg));
        self.printer.package(&display);
        self.input_checked = false;
        self.steps_in_package = 0;
        let pipeline = &node.kptfile.pipeline;
        if pipeline.is_empty() {
            if let Err(message) = check_all_krm(&input) {
                let message =
                    format!("input resource list must contain only KRM resources: {message}");
                let error = if outer == pkg {
                    HydrateError::plain(pkg, &message, Report::Error(message.clone()))
                } else {
                    HydrateError::pipeline(outer, pkg, &message, Report::Error(message.clone()))
                };
                return Err((Some(input), error));
            }
            return Ok(input);
        }
        if let Err(error) = validate_pipeline(pkg, pipeline, &input) {
            let text = error.to_string();
            return Err((
                Some(input),
                HydrateError::plain(outer, &text, Report::kptfile(&error)),
            ));
        }
        let mutated = match self.run_mutators(node, input, &display) {
            Ok(mutated) => mutated,
            Err((resources, failure)) => {
                return Err((
                    resources,
                    HydrateError::pipeline(outer, pkg, &failure.message, failure.report),
                ));
            }
        };
        if let Err(failure) = self.run_validators(node, &mutated, &display) {
            return Err((
                Some(mutated),
                HydrateError::pipeline(outer, pkg, &failure.message, failure.report),
            ));
        }
        self.printer.text("\n");
        Ok(mutated)
    }

    fn run_mutators(
        &mut self,
        node: &PkgNode,
        mut input: Vec<Node>,
        display: &str,
    ) -> Result<Vec<Node>, (Option<Vec<Node>>, StepFailure)> {
        let pkg = node.path.as_path();
        let mutators = &node.kptfile.pipeline.mutators;
        // kpt builds every runner before running any (fnChain).
        let mut prepared = Vec::new();
        // What the previous step knew of its output, while the whole output
        // is this step's input.
        let mut known: Option<SettledList> = None;
        for function in mutators {
            match self.prepare(function, pkg) {
                Ok(step) => prepared.push(step),
                Err(message) => {
                    self.mutation_steps.push(pre_exec_failure(
                        function,
                        &self.options.image_prefix,
                        &message,
                    ));
                    return Err((
                        None,
                        StepFailure {
                            report: Report::Error(message.clone()),
                            message,
                        },
                    ));
                }
            }
        }
        for (function, mut step) in mutators.iter().zip(prepared) {
            if !function.config_path.is_empty() {
                let pkg_text = pkg.display().to_string();
                if let Some(config) = input.iter().find(|r| {
                    resource::annotation(r, resource::PACKAGE_PATH) == Some(pkg_text.as_str())
                        && resource::annotation(r, resource::PATH)
                            == Some(function.config_path.as_str())
                }) {
                    step.config = Some(config.root().clone());
                }
            }
            let selective = function.has_selection();
            if selective {
                select::set_resource_ids(&mut input);
            }
            // Without selectors every resource goes to the step; the list is
            // handed over rather than copied unless save-on-failure may need
            // it back.
            let handed_over = !selective && !self.save_on_failure;
            let selected: Vec<Node> = if handed_over {
                std::mem::take(&mut input)
            } else {
                select::pick(&input, &function.selectors, &function.exclude)
            };
            let known_input = if handed_over { known.take() } else { None };
            // Only a selective step's output is merged back by these ids.
            let selected_ids = if selective {
                select::resource_ids(&selected)
            } else {
                Vec::new()
            };
            let before = self.fn_results.len();
            let count = selective.then_some(selected.len());
            match self.run_step(&step, selected, pkg, count, display, known_input) {
                Ok(output) => {
                    self.executed += 1;
                    self.mutation_steps.push(self.capture(&step, before, None));
                    // Valid while the whole output goes on to the next step.
                    known = self.settled_output.take().filter(|_| !selective);
                    if selective {
                        // Checked: the step's output, and the unselected
                        // resources only if the whole list was before.
                        input = select::merge_with_input(output, input, &selected_ids);
                        select::delete_resource_ids(&mut input);
                    } else {
                        // The whole list passed the output check.
                        input = output;
                        self.input_checked = true;
                    }
                }
                Err(failure) => {
                    if selective {
                        select::delete_resource_ids(&mut input);
                    }
                    self.mutation_steps
                        .push(self.capture(&step, before, Some(&failure.message)));
                    return Err((Some(input), failure));
                }
            }
        }
        Ok(input)
    }

    fn run_validators(
        &mut self,
        node: &PkgNode,
        input: &[Node],
        display: &str,
    ) -> Result<(), StepFailure> {
        let pkg = node.path.as_path();
        for function in &node.kptfile.pipeline.validators {
            let positions = select::select(input, &function.selectors, &function.exclude);
            let selected: Vec<Node> = positions
                .iter()
                .filter_map(|&i| input.get(i).cloned())
                .collect();
            let step = match self.prepare(function, pkg) {
                Ok(step) => PreparedStep {
                    mutator: false,
                    ..step
                },
                Err(message) => {
                    self.validation_steps.push(pre_exec_failure(
                        function,
                        &self.options.image_prefix,
                        &message,
                    ));
                    return Err(StepFailure {
                        report: Report::Error(message.clone()),
                        message,
                    });
                }
            };
            let before = self.fn_results.len();
            let count = function.has_selection().then_some(selected.len());
            match self.run_step(&step, selected, pkg, count, display, None) {
                Ok(_) => {
                    self.executed += 1;
                    self.validation_steps
                        .push(self.capture(&step, before, None));
                }
                Err(failure) => {
                    self.validation_steps
                        .push(self.capture(&step, before, Some(&failure.message)));
                    return Err(failure);
                }
            }
        }
        Ok(())
    }

    /// kpt's `NewRunner`: the exec permission check, the function config and
    /// the image name.
    fn prepare(&self, function: &Function, pkg: &Path) -> Result<PreparedStep, String> {
        if !function.exec.is_empty() && !self.options.allow_exec {
            return Err(ALLOW_EXEC_MESSAGE.to_owned());
        }
        if !function.exec.is_empty() {
            crate::runtime::exec::split_exec(&function.exec)?;
        }
        let config = if !function.config_path.is_empty() {
            let file = pkg.join(&function.config_path);
            let text = std::fs::read(&file)
                .map_err(|_| format!("missing function config {:?}", function.config_path))?;
            let document =
                crate::yaml::parse_document(&String::from_utf8_lossy(&text)).map_err(|error| {
                    format!("invalid function config {:?} {error}", function.config_path)
                })?;
            document.map(|d| d.root().clone())
        } else if !function.config_map.is_empty() {
            Some(bridge::config_map_node(&function.config_map))
        } else {
            None
        };
        let image = if function.image.is_empty() {
            String::new()
        } else {
            let resolved = kptfile::resolve_image(&function.image, &self.options.image_prefix);
            if !function.tag.is_empty() {
                return Err(format!(
                    "failed to resolve tag {:?} for image {resolved:?}: tag resolution needs a registry",
                    function.tag
                ));
            }
            kptfile::with_default_tag(&resolved)
        };
        if image.is_empty() && function.exec.is_empty() {
            return Err("must specify `exec` or `image` to execute a function".to_owned());
        }
        Ok(PreparedStep {
            function: function.clone(),
            image,
            config,
            mutator: true,
        })
    }

    /// kpt's `FunctionRunner.Filter` + `do`: prints progress, runs the
    /// function, checks its output and records its result.
    fn run_step(
        &mut self,
        step: &PreparedStep,
        input: Vec<Node>,
        pkg: &Path,
        selected_count: Option<usize>,
        display: &str,
        known: Option<SettledList>,
    ) -> Result<Vec<Node>, StepFailure> {
        if self.options.cancel.is_cancelled() {
            // Stopped before the step started: no line, no result.
            let message = EvalError::Interrupted.to_string();
            return Err(StepFailure {
                report: Report::Error(message.clone()),
                message,
            });
        }
        let name = step.display_name().to_owned();
        self.printer.running(&name, selected_count, Some(display));
        let started = Instant::now();
        let mut fn_result = FnResult {
            image: step.image.clone(),
            exec: step.function.exec.clone(),
            ..FnResult::default()
        };
        let outcome = self.call(step, input, pkg, &mut fn_result, known);
        let elapsed = started.elapsed();
        match outcome {
            Ok(output) => {
                let lines = fn_result.results.lines();
                let stderr = fn_result.stderr.clone();
                self.fn_results.push(fn_result);
                self.printer.pass(&name, elapsed, &lines, &stderr);
                Ok(output)
            }
            Err(CallError::NotRecorded(message)) => {
                self.printer
                    .fail(&name, elapsed, &fn_result.results.lines());
                Err(StepFailure {
                    report: Report::Error(message.clone()),
                    message,
                })
            }
            Err(CallError::Recorded(message)) => {
                let lines = fn_result.results.lines();
                self.fn_results.push(fn_result);
                self.printer.fail(&name, elapsed, &lines);
                Err(StepFailure {
                    report: Report::Error(message.clone()),
                    message,
                })
            }
            Err(CallError::Exit { stderr, exit_code }) => {
                let lines = fn_result.results.lines();
                self.fn_results.push(fn_result);
                self.printer.fail(&name, elapsed, &lines);
                self.printer.exec_error(&stderr, exit_code);
                Err(StepFailure {
                    report: Report::Handled,
                    message: "already handled error".to_owned(),
                })
            }
        }
    }

    fn call(
        &mut self,
        step: &PreparedStep,
        input: Vec<Node>,
        pkg: &Path,
        fn_result: &mut FnResult,
        known: Option<SettledList>,
    ) -> Result<Vec<Node>, CallError> {
        self.settled_output = None;
        if !self.input_checked
            && let Err(message) = check_all_krm(&input)
        {
            return Err(CallError::NotRecorded(format!(
                "input resource list must contain only KRM resources: {message}"
            )));
        }
        let (evaluator, target) = if step.image.is_empty() {
            (
                self.runtimes.exec,
                FunctionTarget::Exec(&step.function.exec),
            )
        } else {
            (self.runtimes.image, FunctionTarget::Image(&step.image))
        };
        // Which executor runs the step: builtin, program or container.
        tracing::info!(
            target: "krender::step",
            package = %pkg.display(),
            function = step.display_name(),
            executor = %evaluator
                .executor(target)
                .map_or_else(|| "unknown".to_owned(), |executor| executor.to_string()),
            "step",
        );
        let call = crate::runtime::function_filter::FunctionCall {
            function_config: step.config.as_ref(),
            in_pipeline: step.mutator,
        };
        self.steps_in_package += 1;
        let trace_dir = self.options.trace.as_ref().map(|dir| {
            dir.join(self.display(pkg))
                .join(trace_step_name(self.steps_in_package, step))
        });
        let traced = trace_dir.as_ref().map(|dir| TracingEvaluator {
            inner: evaluator,
            dir: dir.clone(),
        });
        let evaluator: &dyn Evaluator = match &traced {
            Some(traced) => traced,
            None => evaluator,
        };
        let run = match bridge::run_filter(
            evaluator,
            target,
            input,
            call,
            self.options.timeout,
            known,
            self.options.native,
        ) {
            Ok(run) => run,
            Err(error) => {
                fn_result.exit_code = 1;
                return Err(CallError::Recorded(eval_error_text(&error)));
            }
        };
        // kpt's container runtime hands on stderr without its final line
        // break; an exec function's stderr is kept as written.
        let stderr = if step.image.is_empty() {
            run.stderr.clone()
        } else {
            trim_container_stderr(&run.stderr)
        };
        fn_result.stderr = stderr.clone();
        let mut output = match run.output {
            Ok(output) => output,
            Err(message) if run.exit_code == 0 => {
                fn_result.exit_code = 1;
                return Err(CallError::Recorded(message));
            }
            Err(_) => Vec::new(),
        };
        check_output(&mut output, &pkg.display().to_string()).map_err(CallError::NotRecorded)?;
        if let (Some(dir), Some(results)) = (&trace_dir, &run.results)
            && let Err(error) = write_trace_file(
                &dir.join("results.yaml"),
                crate::yaml::to_string(results, crate::yaml::SeqIndent::Wide).as_bytes(),
            )
        {
            return Err(CallError::NotRecorded(error.to_string()));
        }
        match ResultItems::from_node(run.results.as_ref()) {
            Ok(items) => fn_result.results = items,
            Err(message) => return Err(CallError::NotRecorded(message)),
        }
        if run.exit_code != 0 {
            fn_result.exit_code = run.exit_code;
            return Err(CallError::Exit {
                stderr,
                exit_code: run.exit_code,
            });
        }
        fn_result.exit_code = 0;
        // The output check only claimed resources for `pkg` (see SettledList).
        self.settled_output = run.settled;
        Ok(output)
    }

    /// kpt's `captureStepResult`.
    fn capture(
        &self,
        step: &PreparedStep,
        results_before: usize,
        error: Option<&str>,
    ) -> StepRecord {
        let mut record = StepRecord {
            name: step.function.name.clone(),
            image: step.image.clone(),
            exec: step.function.exec.clone(),
            ..StepRecord::default()
        };
        if results_before < self.fn_results.len() {
            if let Some(last) = self.fn_results.last() {
                record.stderr = last.stderr.clone();
                record.exit_code = last.exit_code;
                record.results = last.results.clone();
            }
        } else if let Some(message) = error {
            record.exit_code = 1;
            record.execution_error = message.to_owned();
        }
        record
    }
}

enum CallError {
    /// Failed before kpt appends the function's result (KRM checks, path
    /// invariants): the step records an execution error.
    NotRecorded(String),
    /// Failed after the result was recorded (could not run, bad output).
    Recorded(String),
    /// The function exited non-zero.
    Exit { stderr: String, exit_code: i32 },
}

fn eval_error_text(error: &EvalError) -> String {
    error.to_string()
}

/// A step ready to run.
struct PreparedStep {
    function: Function,
    /// The expanded image (empty for exec steps).
    image: String,
    /// The functionConfig, if any.
    config: Option<Node>,
    /// Mutators run inside kyaml's pipeline; validators do not.
    mutator: bool,
}

impl PreparedStep {
    fn display_name(&self) -> &str {
        if self.image.is_empty() {
            &self.function.exec
        } else {
            &self.image
        }
    }
}

/// A step's `--trace` directory name: its place in the package's
/// pipeline, mutator or validator, and the function's short name.
fn trace_step_name(number: usize, step: &PreparedStep) -> String {
    let kind = if step.mutator { "mutator" } else { "validator" };
    let name = if step.image.is_empty() {
        let program = step
            .function
            .exec
            .split_whitespace()
            .next()
            .unwrap_or("exec");
        program.rsplit('/').next().unwrap_or(program)
    } else {
        let (name, _) = crate::runtime::builtin::split_image(&step.image);
        name.rsplit('/').next().unwrap_or(name)
    };
    let name: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.' {
                c
            } else {
                '_'
            }
        })
        .collect();
    format!("{number:02}-{kind}-{name}")
}

fn pre_exec_failure(function: &Function, prefix: &str, message: &str) -> StepRecord {
    let image = if function.image.is_empty() {
        String::new()
    } else {
        kptfile::with_default_tag(&kptfile::resolve_image(&function.image, prefix))
    };
    StepRecord {
        name: function.name.clone(),
        image,
        exec: function.exec.clone(),
        exit_code: 1,
        execution_error: message.to_owned(),
        ..StepRecord::default()
    }
}

/// The stderr of a container function as kpt records it: without trailing
/// line breaks.
pub(crate) fn trim_container_stderr(stderr: &str) -> String {
    stderr.trim_end_matches('\n').to_owned()
}

/// kpt's `AreKRM`: the first resource that is not KRM, with its path.
/// `index` and its descendants, depth-first in child order (the order of
/// a BFS package's scope).
fn subtree(children: &[Vec<usize>], index: usize) -> impl Iterator<Item = usize> + '_ {
    let mut stack = vec![index];
    std::iter::from_fn(move || {
        let next = stack.pop()?;
        if let Some(below) = children.get(next) {
            stack.extend(below.iter().rev());
        }
        Some(next)
    })
}

/// A BFS package's input: its own list (taken) and copies of its
/// descendants' lists.
fn scoped_input(resources: &mut [Vec<Node>], children: &[Vec<usize>], index: usize) -> Vec<Node> {
    let mut input = resources
        .get_mut(index)
        .map(std::mem::take)
        .unwrap_or_default();
    for i in subtree(children, index).skip(1) {
        if let Some(list) = resources.get(i) {
            input.extend(list.iter().cloned());
        }
    }
    input
}

/// The first resource kpt's KRM check rejects, as `<path>: <reason>`.
pub(crate) fn check_all_krm(resources: &[Node]) -> Result<(), String> {
    // A DFS root checks the whole tree before its first step.
    let first = if resources.len() >= PARALLEL_FROM {
        resources.par_iter().position_first(not_krm)
    } else {
        resources.iter().position(not_krm)
    };
    match first.and_then(|i| resources.get(i)) {
        Some(node) => Err(not_krm_message(node)),
        None => Ok(()),
    }
}

/// True for a resource kpt's KRM check rejects (Kustomization files pass).
fn not_krm(node: &Node) -> bool {
    !is_kustomization(node) && kptfile::check_krm(node).is_err()
}

/// Why [`not_krm`] rejects `node`, as kpt words it.
fn not_krm_message(node: &Node) -> String {
    let reason = kptfile::check_krm(node).err().unwrap_or_default();
    let path = resource::annotation(node, resource::PATH).unwrap_or("");
    format!("{path}: {reason}")
}

/// What kpt does to a function's output before using it: each resource
/// without a package path is claimed for `pkg`, then the path invariants
/// ([`check_path_keys`]) and the KRM check apply, in that order. One pass
/// over the resources gathers all three: at a DFS root the output is the
/// whole tree, and each separate walk chased every resource's pointers
/// again.
fn check_output(output: &mut [Node], pkg: &str) -> Result<(), String> {
    fn visit<'a>(node: &'a mut Node, pkg: &str) -> (PathKey<'a>, bool) {
        if resource::annotation(node, resource::PACKAGE_PATH).is_none_or(str::is_empty) {
            resource::set_annotation(node, resource::PACKAGE_PATH, pkg, Style::PLAIN);
        }
        let node: &'a Node = node;
        (path_key(node), not_krm(node))
    }
    let facts: Vec<(PathKey<'_>, bool)> = if output.len() >= PARALLEL_FROM {
        output.par_iter_mut().map(|node| visit(node, pkg)).collect()
    } else {
        output.iter_mut().map(|node| visit(node, pkg)).collect()
    };
    check_path_keys(facts.iter().map(|(key, _)| key))?;
    match facts.iter().position(|(_, fails)| *fails) {
        Some(i) => Err(format!(
            "output resource list must contain only KRM resources: {}",
            not_krm_message(&output[i])
        )),
        None => Ok(()),
    }
}

/// Resource lists at least this long are checked on rayon (a DFS root's
/// steps see the whole tree, and its level has no other package to run).
const PARALLEL_FROM: usize = 64;

fn is_kustomization(node: &Node) -> bool {
    let path = resource::annotation(node, resource::PATH).unwrap_or("");
    let base = path.rsplit('/').next().unwrap_or(path);
    matches!(
        base,
        "kustomization.yaml" | "kustomization.yml" | "Kustomization"
    )
}

/// kpt's runtime pipeline check: a `configPath` must name a resource of this
/// package (not of a subpackage).
fn validate_pipeline(
    pkg: &Path,
    pipeline: &kptfile::Pipeline,
    input: &[Node],
) -> Result<(), KptfileError> {
    let pkg_text = pkg.display().to_string();
    for (kind, functions) in [
        ("mutator", &pipeline.mutators),
        ("validator", &pipeline.validators),
    ] {
        for (index, function) in functions.iter().enumerate() {
            if function.config_path.is_empty() {
                continue;
            }
            let wanted = clean_path(&function.config_path);
            let found = input.iter().any(|r| {
                resource::annotation(r, resource::PACKAGE_PATH) == Some(pkg_text.as_str())
                    && resource::annotation(r, resource::PATH)
                        .map(clean_path)
                        .as_deref()
                        == Some(wanted.as_str())
            });
            if !found {
                let path = &function.config_path;
                return Err(KptfileError::Invalid {
                    field: format!("pipeline.{kind}s[{index}].configPath"),
                    value: Some(path.clone()),
                    reason: format!(
                        "functionConfig resource for {kind} {:?} is missing from path {path:?}, this also occurs if {path:?} is part of a subpackage",
                        function.short_name()
                    ),
                });
            }
        }
    }
    Ok(())
}

/// A resource's (package, clean path, index, path as written).
type PathKey<'a> = (&'a str, String, &'a str, &'a str);

/// [`PathKey`] of one resource.
fn path_key(node: &Node) -> PathKey<'_> {
    let annotations = resource::annotations(node);
    let path = resource::annotation_in(annotations, resource::PATH);
    (
        resource::annotation_in(annotations, resource::PACKAGE_PATH),
        clean_path(path),
        resource::annotation_in(annotations, resource::INDEX),
        path,
    )
}

/// kpt's `enforcePathInvariants` over a function's output, in resource
/// order: no path leaves its package, and no two resources share package,
/// path and index. A hash set of borrowed keys finds a repeat (an ordered
/// set of owned strings spent most of its time comparing the long shared
/// package prefixes).
fn check_path_keys<'k, 'a: 'k>(
    keys: impl ExactSizeIterator<Item = &'k PathKey<'a>>,
) -> Result<(), String> {
    // Fx, not SipHash: the keys are the user's own paths, and a DFS root
    // hashes every resource of the tree in each step.
    let mut seen: rustc_hash::FxHashSet<(&str, &str, &str)> =
        rustc_hash::FxHashSet::with_capacity_and_hasher(keys.len(), Default::default());
    for (pkg, cleaned, index, path) in keys {
        if cleaned.starts_with("../") || cleaned == ".." {
            return Err(format!(
                "function must not modify resources outside of package: resource has path {path}"
            ));
        }
        if !seen.insert((pkg, cleaned.as_str(), index)) {
            return Err(format!(
                "resource at path {cleaned:?} and index {index:?} already exists"
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clean_paths_like_go() {
        assert_eq!(clean_path("a/./b/../c"), "a/c");
        assert_eq!(clean_path("../x"), "../x");
        assert_eq!(clean_path("db/../../x"), "../x");
        assert_eq!(
            clean_path("/another/file/out.yaml"),
            "/another/file/out.yaml"
        );
        assert_eq!(clean_path(""), ".");
    }

    fn resource(text: &str) -> Node {
        crate::yaml::parse_document(text)
            .ok()
            .flatten()
            .map(|document| document.root().clone())
            .unwrap_or_else(Node::new_mapping)
    }

    fn annotated(name: &str, path: &str, index: &str) -> Node {
        resource(&format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n  annotations:\n    internal.config.kubernetes.io/path: '{path}'\n    internal.config.kubernetes.io/index: '{index}'\n"
        ))
    }

    #[test]
    fn function_output_is_claimed_then_checked_in_kpts_order() {
        // Resources without a package path are claimed for the package.
        let mut output = vec![annotated("a", "a.yaml", "0"), annotated("b", "a.yaml", "1")];
        assert_eq!(check_output(&mut output, "/pkg"), Ok(()));
        for node in &output {
            assert_eq!(
                resource::annotation(node, resource::PACKAGE_PATH),
                Some("/pkg")
            );
        }
        // A repeated path and index fails even when a later resource is not
        // KRM: the path invariants come first.
        let not_krm = resource("kind: ConfigMap\nmetadata:\n  name: c\n");
        let mut output = vec![
            annotated("a", "a.yaml", "0"),
            not_krm.clone(),
            annotated("b", "./a.yaml", "0"),
        ];
        assert_eq!(
            check_output(&mut output, "/pkg"),
            Err("resource at path \"a.yaml\" and index \"0\" already exists".to_owned())
        );
        let mut output = vec![annotated("a", "../a.yaml", "0")];
        assert_eq!(
            check_output(&mut output, "/pkg"),
            Err("function must not modify resources outside of package: resource has path ../a.yaml".to_owned())
        );
        // The same (path, index) in two packages is no repeat.
        let mut output = vec![annotated("a", "a.yaml", "0"), annotated("b", "a.yaml", "0")];
        resource::set_annotation(
            &mut output[1],
            resource::PACKAGE_PATH,
            "/pkg/sub",
            Style::PLAIN,
        );
        assert_eq!(check_output(&mut output, "/pkg"), Ok(()));
        // Then the KRM check, naming the first offender.
        let mut output = vec![annotated("a", "a.yaml", "0"), not_krm];
        let error = check_output(&mut output, "/pkg").unwrap_err();
        assert!(
            error.starts_with("output resource list must contain only KRM resources: : resource must have `apiVersion`"),
            "{error}"
        );
    }
}
