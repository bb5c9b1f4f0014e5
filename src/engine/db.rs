//! The salsa database of a render session: package inputs (a package's
//! Kptfile, its own files' bytes and its subpackages) and the tracked
//! queries over them: a package's parsed resources and its DFS pipeline run.
//!
//! Queries read the world only through inputs; the session
//! ([`super::session`]) reads the disk and sets them. A package's run depends
//! on its own resources and its subpackages' runs, so after an edit salsa
//! re-runs exactly the edited package and its ancestors (DFS semantics).

use std::path::PathBuf;
use std::sync::Arc;

use rayon::prelude::*;

use super::actions::ActionInputs;
use crate::hydrate::{self, PackageRun, RenderOptions, Runtimes};
use crate::pkg::kptfile::Kptfile;
use crate::pkg::reader::{PackageFile, ReadOptions, parse_package_files};
use crate::runtime::Evaluator;
use crate::yaml::node::Node;

/// Runs by key: what the last execution of a render context made, which
/// the next one over the same context finds without reading the store.
pub type Known = std::collections::HashMap<
    crate::hydrate::item::Digest,
    std::sync::Arc<super::record::RunRecord>,
>;

/// What every query of a session shares: the root, the options and the
/// evaluators. Fixed for the life of a session.
pub struct RenderContext {
    /// The absolute root package path.
    pub root: PathBuf,
    /// The render options.
    pub options: RenderOptions,
    /// `kpt.dev/save-on-render-failure` on the root Kptfile.
    pub save_on_failure: bool,
    /// The evaluator for `image:` steps.
    pub image: Arc<dyn Evaluator>,
    /// The evaluator for `exec:` steps.
    pub exec: Arc<dyn Evaluator>,
    /// The persistent action cache one-shot renders consult, if on.
    pub actions: Option<Arc<super::actions::ActionCache>>,
    /// Decides which functions are pure, and so which runs are kept; `None`
    /// when nothing is cached.
    pub policy: Option<super::cache::CachePolicy>,
    /// The krender build, as keys name it.
    pub build: String,
    /// Where resources and runs are kept.
    pub store: Arc<super::store::Store>,
    /// Runs of functions not known to be pure are remembered in `runs` for
    /// this context's life (never stored): a watch session takes them as
    /// deterministic between its rebuilds, as kpt's function spec asks.
    pub remember_impure: bool,
    /// The runs of the last execution over this context (see
    /// [`Known`]).
    pub runs: std::sync::Mutex<Known>,
}

impl RenderContext {
    /// A context for rendering `root` under `options` with the default
    /// evaluators (catalog builtins, then containers; executables), no
    /// action cache and an in-memory store: what an embedded render
    /// (`rpkg`'s, a test's, a bench's) needs.
    pub fn uncached(root: &std::path::Path, options: RenderOptions) -> RenderContext {
        use crate::runtime::chain::{ChainOptions, image_evaluator};
        RenderContext {
            root: root.to_path_buf(),
            options,
            save_on_failure: false,
            image: Arc::from(image_evaluator(&ChainOptions::default())),
            exec: Arc::new(crate::runtime::exec::ExecEvaluator::default()),
            actions: None,
            policy: None,
            build: String::new(),
            store: Arc::new(super::store::Store::in_memory()),
            remember_impure: false,
            runs: Default::default(),
        }
    }
}

/// The database trait the queries take.
#[salsa::db]
pub trait Db: salsa::Database {
    /// The session's fixed context.
    fn context(&self) -> &RenderContext;
}

/// The concrete database. Cloning gives another handle on the same storage
/// (one per rayon job).
#[salsa::db]
#[derive(Clone)]
pub struct RenderDb {
    context: Arc<RenderContext>,
    // Last, so that salsa's storage is dropped after the fields above, as
    // ty's `ProjectDatabase` does: memos may hold data the context owns.
    storage: salsa::Storage<Self>,
}

impl RenderDb {
    /// A database for `context`, calling `events` (if any) on each salsa
    /// event; tests use it to see which queries ran.
    pub fn new(
        context: RenderContext,
        events: Option<Box<dyn Fn(salsa::Event) + Send + Sync + 'static>>,
    ) -> RenderDb {
        RenderDb {
            context: Arc::new(context),
            storage: salsa::Storage::new(events),
        }
    }
}

#[salsa::db]
impl salsa::Database for RenderDb {}

#[salsa::db]
impl Db for RenderDb {
    fn context(&self) -> &RenderContext {
        &self.context
    }
}

/// One package as read from disk.
#[salsa::input]
pub struct PackageSource {
    /// The absolute package directory.
    #[returns(ref)]
    pub path: PathBuf,
    /// The decoded, validated Kptfile.
    #[returns(ref)]
    pub kptfile: Kptfile,
    /// The package's own resource files (subpackages excluded), in read
    /// order.
    #[returns(ref)]
    pub files: Vec<PackageFile>,
    /// The direct subpackages, in kpt's walk order.
    #[returns(ref)]
    pub children: Vec<PackageSource>,
}

/// The package's own resources, annotated as kpt's reader annotates them;
/// the error is kpt's text. Not compared (`no_eq`): a resource tree is big
/// and its equality costly, and a re-parse happens only when the bytes
/// changed. Only the package's own pipeline reads them, and only when it
/// re-runs, so few values are kept (`lru`): a watch session on a big tree
/// would otherwise hold every package's parsed files for nothing; an
/// evicted value is verified from its inputs and re-parsed on demand.
#[salsa::tracked(returns(ref), no_eq, lru = 64)]
pub fn local_resources(db: &dyn Db, pkg: PackageSource) -> Result<Vec<Node>, String> {
    let options = ReadOptions {
        package_path: Some(pkg.path(db).display().to_string()),
    };
    parse_package_files(pkg.files(db), &options)
        .map(|read| read.resources)
        .map_err(|error| error.to_string())
}

/// The package's DFS pipeline run over its own resources and its
/// subpackages' outputs; `None` when the sequential walk would never get to
/// run it (its resources do not read, or a subpackage failed), in which case
/// the walk reports the failure itself.
///
/// With the action cache on, a run is answered from it when its key is
/// there (a session's first render on a warm cache), and stored when it ran.
/// Runs compare by their output's digest: a subpackage that runs again to
/// the same output leaves its parent's run as it was (salsa backdates it).
///
/// The run is shared (`Arc`): a render hands the root's output to
/// [`hydrate::apply`] as it stands here, without copying the whole tree.
#[salsa::tracked(returns(ref))]
pub fn rendered_package(db: &dyn Db, pkg: PackageSource) -> Option<SharedRun> {
    let _span = tracing::debug_span!("pipeline", package = %pkg.path(db).display()).entered();
    let context = db.context();
    let kptfile = pkg.kptfile(db);
    let files = pkg.files(db);
    // A run is a function of the package's inputs, `exec:` functions
    // included (kpt asks functions to be deterministic): after an edit only
    // the packages it reaches run again. A `configPath` the step reads from
    // disk is among the package's files, and so an input, unless it is
    // outside the package's listing: then the run is redone every revision.
    let config_outside = kptfile.pipeline.config_paths().any(|config| {
        let config = crate::pkg::tree::lexical(&pkg.path(db).join(config));
        !files.iter().any(|file| file.absolute == config)
    });
    if config_outside {
        db.report_untracked_read();
    }
    let mut children = Vec::with_capacity(pkg.children(db).len());
    for child in pkg.children(db) {
        match rendered_package(db, *child) {
            Some(run) if run.output.is_ok() => children.push(run),
            _ => return None,
        }
    }
    // The root's output has no parent to key it: not looked up nor stored
    // (as in one-shot renders).
    let actions = context
        .actions
        .as_deref()
        .filter(|_| pkg.path(db) != &context.root);
    let digests: Option<Vec<blake3::Hash>> = children.iter().map(|run| run.digest).collect();
    let key = actions.zip(digests).and_then(|(actions, digests)| {
        let inputs = ActionInputs {
            path: pkg.path(db),
            kptfile,
            files,
            children: &digests,
            bfs: false,
        };
        actions.key(&inputs, &context.options, context.save_on_failure)
    });
    if let (Some(actions), Some(key)) = (actions, &key)
        && let Some(cached) = actions.lookup(key)
    {
        match cached.output.decode() {
            Some(output) => {
                let run = PackageRun {
                    output: Ok(output),
                    ..cached.run
                };
                return Some(SharedRun::new(run, Some(cached.output.digest)));
            }
            None => actions.drop_corrupt(key),
        }
    }
    let local = local_resources(db, pkg).as_ref().ok()?;
    let input_files = hydrate::input_file_names(&context.root, pkg.path(db), local);
    let mut input = local.clone();
    for run in &children {
        if let Ok(output) = &run.output {
            // A DFS root copies the whole tree here: in parallel.
            input.par_extend(output.par_iter().cloned());
        }
    }
    let runtimes = Runtimes {
        image: context.image.as_ref(),
        exec: context.exec.as_ref(),
        runs: None,
    };
    let display = crate::pkg::tree::display_path(&context.root, pkg.path(db));
    let run = hydrate::run_package(
        hydrate::PackageJob {
            root: &context.root,
            pkg: pkg.path(db),
            kptfile,
            input,
            local_files: input_files,
            display: &display,
            outer: pkg.path(db),
        },
        context.save_on_failure,
        &context.options,
        runtimes,
    );
    let digest = actions.and_then(|actions| actions.record(key.as_deref(), &run));
    Some(SharedRun::new(run, digest))
}

/// A memoized [`PackageRun`], shared. When salsa drops the last handle on a
/// big one (a revision replaced it), the tree is freed on a background
/// thread: an ancestor's run holds its whole subtree's resources, and
/// freeing them inside the next input change would sit on a watch edit's
/// path (~15 ms at the root of 1,000 packages).
#[derive(Clone, Debug)]
pub struct SharedRun {
    /// The run.
    pub run: Arc<PackageRun>,
    /// The digest of its output, when the action cache is on and it
    /// succeeded.
    pub digest: Option<blake3::Hash>,
}

impl SharedRun {
    fn new(run: PackageRun, digest: Option<blake3::Hash>) -> SharedRun {
        SharedRun {
            run: Arc::new(run),
            digest,
        }
    }
}

/// Equal outputs (by digest) are equal runs for the packages that read
/// them; without digests a run equals only itself, so every new run counts
/// as a change.
impl PartialEq for SharedRun {
    fn eq(&self, other: &SharedRun) -> bool {
        match (self.digest, other.digest) {
            (Some(mine), Some(theirs)) => mine == theirs,
            _ => Arc::ptr_eq(&self.run, &other.run),
        }
    }
}

impl Eq for SharedRun {}

impl std::ops::Deref for SharedRun {
    type Target = PackageRun;

    fn deref(&self) -> &PackageRun {
        &self.run
    }
}

/// Runs with at least this many resources are freed in the background.
const FREE_IN_BACKGROUND_FROM: usize = 1024;

impl Drop for SharedRun {
    fn drop(&mut self) {
        let big = self
            .run
            .output
            .as_ref()
            .is_ok_and(|output| output.len() >= FREE_IN_BACKGROUND_FROM);
        if big && Arc::strong_count(&self.run) == 1 {
            // The background thread's handle outlives this one (should it
            // drop first, the tree is freed here: slower, never wrong).
            super::pool::free_in_background(Arc::clone(&self.run));
        }
    }
}
