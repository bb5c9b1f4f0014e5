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

use crate::hydrate::{self, PackageRun, RenderOptions, Runtimes};
use crate::pkg::kptfile::Kptfile;
use crate::pkg::reader::{PackageFile, ReadOptions, parse_package_files};
use crate::runtime::Evaluator;
use crate::yaml::node::Node;

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
/// The run is shared (`Arc`): a render hands the root's output to
/// [`hydrate::apply`] as it stands here, without copying the whole tree.
#[salsa::tracked(returns(ref), no_eq)]
pub fn rendered_package(db: &dyn Db, pkg: PackageSource) -> Option<SharedRun> {
    let _span = tracing::debug_span!("pipeline", package = %pkg.path(db).display()).entered();
    let context = db.context();
    let local = local_resources(db, pkg).as_ref().ok()?;
    let input_files = hydrate::input_file_names(&context.root, pkg.path(db), local);
    let mut input = local.clone();
    for child in pkg.children(db) {
        match rendered_package(db, *child).as_deref() {
            Some(PackageRun {
                output: Ok(output), ..
            }) => {
                // A DFS root copies the whole tree here: in parallel.
                input.par_extend(output.par_iter().cloned());
            }
            _ => return None,
        }
    }
    let kptfile = pkg.kptfile(db);
    // A run is a function of the package's inputs, `exec:` functions
    // included (kpt asks functions to be deterministic): after an edit only
    // the packages it reaches run again. A `configPath` the step reads from
    // disk is among the package's files, and so an input, unless it is
    // outside the package's listing: then the run is redone every revision.
    let files = pkg.files(db);
    let config_outside = kptfile.pipeline.config_paths().any(|config| {
        let config = crate::pkg::tree::lexical(&pkg.path(db).join(config));
        !files.iter().any(|file| file.absolute == config)
    });
    if config_outside {
        db.report_untracked_read();
    }
    let runtimes = Runtimes {
        image: context.image.as_ref(),
        exec: context.exec.as_ref(),
    };
    Some(SharedRun(Arc::new(hydrate::run_package(
        &context.root,
        pkg.path(db),
        kptfile,
        context.save_on_failure,
        input,
        input_files,
        &context.options,
        runtimes,
    ))))
}

/// A memoized [`PackageRun`], shared. When salsa drops the last handle on a
/// big one (a revision replaced it), the tree is freed on a background
/// thread: an ancestor's run holds its whole subtree's resources, and
/// freeing them inside the next input change would sit on a watch edit's
/// path (~15 ms at the root of 1,000 packages).
#[derive(Clone, Debug)]
pub struct SharedRun(pub Arc<PackageRun>);

impl std::ops::Deref for SharedRun {
    type Target = PackageRun;

    fn deref(&self) -> &PackageRun {
        &self.0
    }
}

/// Runs with at least this many resources are freed in the background.
const FREE_IN_BACKGROUND_FROM: usize = 1024;

impl Drop for SharedRun {
    fn drop(&mut self) {
        let big = self
            .0
            .output
            .as_ref()
            .is_ok_and(|output| output.len() >= FREE_IN_BACKGROUND_FROM);
        if big && Arc::strong_count(&self.0) == 1 {
            // The background thread's handle outlives this one (should it
            // drop first, the tree is freed here: slower, never wrong).
            free_in_background(Arc::clone(&self.0));
        }
    }
}

/// Hands `value` to one long-lived thread that drops it. Where that thread
/// cannot be started, `value` is dropped here.
fn free_in_background<T: Send + 'static>(value: T) {
    use std::sync::mpsc::{Sender, channel};
    type Garbage = Box<dyn Send>;
    static FREER: std::sync::OnceLock<Option<Sender<Garbage>>> = std::sync::OnceLock::new();
    let freer = FREER.get_or_init(|| {
        let (sender, receiver) = channel::<Garbage>();
        std::thread::Builder::new()
            .name("krender-free".into())
            .spawn(move || receiver.into_iter().for_each(drop))
            .ok()
            .map(|_| sender)
    });
    // Without the thread, or should its channel close, `value` drops here.
    if let Some(sender) = freer {
        let _ = sender.send(Box::new(value));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Reports the thread it is dropped on.
    struct Witness(std::sync::mpsc::Sender<Option<String>>);

    impl Drop for Witness {
        fn drop(&mut self) {
            let thread = std::thread::current().name().map(str::to_owned);
            let _ = self.0.send(thread);
        }
    }

    #[test]
    fn a_value_handed_to_the_freer_is_dropped_on_its_thread() {
        let (sender, receiver) = std::sync::mpsc::channel();
        free_in_background(Witness(sender.clone()));
        free_in_background(Witness(sender));
        for _ in 0..2 {
            let thread = receiver
                .recv_timeout(std::time::Duration::from_secs(10))
                .expect("the value was dropped");
            assert_eq!(thread.as_deref(), Some("krender-free"));
        }
    }
}
