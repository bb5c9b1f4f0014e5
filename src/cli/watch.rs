//! `krender watch [PATH]`: render, then re-render whenever files under the
//! path change, through the same engine as `fn render`, keeping its store
//! and runs so that only what the change affects is recomputed. A package (a directory with a Kptfile) is rendered
//! in place (or to stdout with `-o`), with only the changed packages and
//! their ancestors re-run; anything else is a layered document set, whose
//! rendered documents are printed to stdout after each rebuild. One line
//! per rebuild on stderr: what re-ran, cache hits, time.
//!
//! Events are debounced. What changed is decided by content: a rebuild
//! reads the tree once (the floor of any render) and stops when every file
//! is as the last rebuild left it, so our own writes come back as an event
//! that finds nothing to do.
//! Ctrl-C (or SIGTERM) stops the watch at once: a rebuild in flight is cut
//! short (its functions are killed) and writes nothing, and the command
//! exits 130 (143).

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use notify::{EventKind, RecursiveMode, Watcher};

use super::args::WatchArgs;
use super::render::{absolute, output_mode, print_report, render_context, resolve_package_path};
use super::signals::Interrupts;
use crate::engine::cache::CachePolicy;
use crate::engine::db::RenderContext;
use crate::engine::oneshot::{record_left_tree, render_once};
use crate::engine::scan::Scan;
use crate::hydrate::item::Digest;
use crate::hydrate::{self, Output, Report};
use crate::layering::incremental::LayeringSession;
use crate::pkg::kptfile::KPTFILE_NAME;
use crate::runtime::cancel::Cancel;

/// Runs `watch` until Ctrl-C; returns the exit code.
pub(super) fn run(
    args: &WatchArgs,
    interrupts: &Interrupts,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> i32 {
    let render_args = &args.render;
    if let Some(report) = super::image_pull_policy_error(render_args.image_pull_policy.as_deref()) {
        print_report(&report, err);
        return 1;
    }
    let root = resolve_package_path(render_args.pkg_path.as_deref().unwrap_or(Path::new(".")));
    let output = output_mode(render_args.output.as_deref());
    if let Output::Dir(_) = output {
        print_report(
            &Report::Error("watch writes in place or to stdout; -o DIR is not supported".into()),
            err,
        );
        return 1;
    }
    if !root.join(KPTFILE_NAME).exists() {
        let debounce = Duration::from_millis(args.debounce_ms);
        return watch_layered(
            &root,
            args.layer.substitution(),
            debounce,
            interrupts,
            out,
            err,
        );
    }
    let kptfile = match hydrate::load_root(&root) {
        Ok(kptfile) => kptfile,
        Err(error) => {
            print_report(&Report::kptfile(&error), err);
            return 1;
        }
    };
    if let Some(report) = super::config_error(&super::config_path(Some(&root))) {
        print_report(&report, err);
        return 1;
    }
    let cache_dir = render_args.cache.options().resolved_dir();
    let (mut context, _) = render_context(
        render_args,
        &root,
        &kptfile,
        cache_dir,
        None,
        interrupts.cancel(),
    );
    // A watch remembers its runs for the next rebuild even without a cache
    // directory (then in memory).
    if context.policy.is_none() {
        context.policy = Some(CachePolicy::for_config(&super::config_path(Some(&root))));
    }
    context.remember_impure = true;
    // Each rebuild rewrites results.yaml, as a render would.
    let results_dir = render_args.results_dir.as_deref().map(absolute);
    let mut rebuild = Rebuild {
        context,
        jobs: render_args.jobs,
        root: &root,
        output: &output,
        results_dir: results_dir.as_deref(),
        interrupts,
        last: None,
    };
    // Lifecycle (issue 8): a watch of a package being rendered fails at once.
    if let Err(report) = super::rpkg::open_for_render(&root, output == Output::InPlace, err) {
        print_report(&report, err);
        return 1;
    }
    let watch = match Watch::start(&root, interrupts.cancel()) {
        Ok(watch) => watch,
        Err(message) => {
            print_report(&Report::Error(message), err);
            return 1;
        }
    };
    rebuild.run(out, err);
    let debounce = Duration::from_millis(args.debounce_ms);
    watch.run(debounce, err, |_, err| rebuild.run(out, err));
    interrupts.exit_code().unwrap_or(0)
}

/// A running file watcher on a root, started before the first build so that
/// no change made during it is missed.
struct Watch {
    // Kept alive for the events; dropping it stops the watch.
    _watcher: notify::RecommendedWatcher,
    events: mpsc::Receiver<notify::Result<notify::Event>>,
    stop: Cancel,
}

impl Watch {
    /// Watches `root` recursively until `stop` trips (Ctrl-C).
    fn start(root: &Path, stop: &Cancel) -> Result<Watch, String> {
        let stop = stop.clone();
        let (sender, events) = mpsc::channel();
        let mut watcher = notify::recommended_watcher(move |event| {
            let _ = sender.send(event);
        })
        .map_err(|error| format!("cannot watch: {error}"))?;
        watcher
            .watch(root, RecursiveMode::Recursive)
            .map_err(|error| format!("cannot watch {}: {error}", root.display()))?;
        Ok(Watch {
            _watcher: watcher,
            events,
            stop,
        })
    }

    /// Calls `rebuild` with the changed paths once they have been quiet for
    /// `debounce`, until Ctrl-C; with no paths after the watcher lost
    /// events or failed.
    fn run(
        &self,
        debounce: Duration,
        err: &mut dyn Write,
        mut rebuild: impl FnMut(BTreeSet<PathBuf>, &mut dyn Write),
    ) {
        let mut pending: Option<Instant> = None;
        let mut changed = BTreeSet::new();
        // The watcher lost events (or failed): the paths say too little.
        let mut rescan = false;
        while !self.stop.is_cancelled() {
            match self.events.recv_timeout(Duration::from_millis(50)) {
                Ok(Ok(event)) if event.need_rescan() => {
                    rescan = true;
                    pending = Some(Instant::now());
                }
                Ok(Ok(event)) if relevant(&event) => {
                    changed.extend(event.paths.into_iter().filter(|path| watched(path)));
                    pending = Some(Instant::now());
                }
                Ok(Err(_)) => {
                    rescan = true;
                    pending = Some(Instant::now());
                }
                Ok(_) | Err(mpsc::RecvTimeoutError::Timeout) => {}
                Err(mpsc::RecvTimeoutError::Disconnected) => break,
            }
            if let Some(since) = pending
                && since.elapsed() >= debounce
            {
                pending = None;
                let mut report = std::mem::take(&mut changed);
                if std::mem::take(&mut rescan) {
                    // No paths: the package session refreshes everything.
                    report.clear();
                }
                rebuild(report, err);
            }
        }
        let _ = writeln!(err, "[watch] stopped");
    }
}

/// `watch` on a layered document set (a directory or file without a
/// Kptfile): the rendered documents go to stdout after every rebuild.
fn watch_layered(
    root: &Path,
    options: crate::layering::SubstitutionOptions,
    debounce: Duration,
    interrupts: &Interrupts,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> i32 {
    let mut session = match LayeringSession::with_options(&[root.to_path_buf()], options) {
        Ok(session) => session,
        Err(error) => {
            let _ = writeln!(err, "{}", super::layer::format_error(&error));
            return 1;
        }
    };
    let render = |session: &mut LayeringSession, out: &mut dyn Write, err: &mut dyn Write| {
        let started = Instant::now();
        match session.render() {
            Ok(rendered) => {
                for warning in &rendered.warnings {
                    super::layer::print_warning(err, warning);
                }
                let _ = out.write_all(&rendered.output_bytes);
                let _ = out.flush();
                let _ = writeln!(
                    err,
                    "[watch] rebuilt in {} ms: {} of {} document(s) recomputed",
                    started.elapsed().as_millis(),
                    rendered.recomputed,
                    rendered.documents,
                );
            }
            Err(error) => {
                let _ = writeln!(err, "{}", super::layer::format_error(&error));
                let _ = writeln!(err, "[watch] rebuild failed");
            }
        }
    };
    let watch = match Watch::start(root, interrupts.cancel()) {
        Ok(watch) => watch,
        Err(message) => {
            print_report(&Report::Error(message), err);
            return 1;
        }
    };
    render(&mut session, out, err);
    watch.run(debounce, err, |changed, err| {
        let mut any = false;
        for path in changed {
            let bytes = std::fs::read(&path).ok();
            any |= session.apply_change(&path, bytes);
        }
        if any {
            render(&mut session, out, err);
        }
    });
    interrupts.exit_code().unwrap_or(0)
}

/// Whether an event may change what a render reads: content changes, not
/// reads, and not krender's own staging files or version control.
fn relevant(event: &notify::Event) -> bool {
    if matches!(event.kind, EventKind::Access(_)) {
        return false;
    }
    event.paths.iter().any(|path| watched(path))
}

/// Whether a changed path can matter: not version control, not krender's
/// own staging, journal and lock files.
fn watched(path: &Path) -> bool {
    !path.components().any(|component| {
        let name = component.as_os_str().to_string_lossy();
        name == ".git" || name.starts_with(".krender-")
    })
}

/// One rebuild's inputs, and what the watch remembers between rebuilds:
/// the render context (whose store and runs are the memo, in memory when
/// there is no cache directory) and the tree as the last rebuild left it.
struct Rebuild<'a> {
    context: RenderContext,
    jobs: Option<usize>,
    root: &'a Path,
    output: &'a Output,
    results_dir: Option<&'a Path>,
    interrupts: &'a Interrupts,
    /// The digests of every file of the tree the last rebuild left (its
    /// own writes included): a rebuild that finds them again has nothing
    /// to do.
    last: Option<BTreeMap<String, Digest>>,
}

impl Rebuild<'_> {
    /// Reads the tree once and, when its files differ from what the last
    /// rebuild left (or on the first run), renders it through the one
    /// engine, applies, and prints the summary line. The paths of the
    /// events say only that something may have changed: what changed is
    /// decided by content.
    fn run(&mut self, out: &mut dyn Write, err: &mut dyn Write) {
        let started = Instant::now();
        // Each rebuild holds the package lock (issue 8); while another
        // command holds it, this rebuild is skipped.
        let in_place = *self.output == Output::InPlace;
        let _lock = match super::rpkg::open_for_render(self.root, in_place, err) {
            Ok(lock) => lock,
            Err(report) => {
                print_report(&report, err);
                let _ = writeln!(err, "[watch] rebuild skipped");
                return;
            }
        };
        let scan = Scan::walk(self.root, None);
        let digests = file_digests(&scan);
        if self.last.as_ref() == Some(&digests) {
            return;
        }
        let kptfile = match scan.root_kptfile(self.root) {
            Ok(kptfile) => kptfile,
            Err(error) => {
                print_report(&Report::kptfile(&error), err);
                let _ = writeln!(err, "[watch] waiting for a valid Kptfile");
                self.last = Some(digests);
                return;
            }
        };
        let (outcome, ran) = render_once(
            &self.context,
            self.jobs,
            kptfile,
            err,
            None,
            Some(&scan),
            in_place,
        );
        if self.interrupts.exit_code().is_some() {
            // Cut short: nothing is written, not even status.
            let _ = writeln!(err, "{}", self.interrupts.message("rebuild"));
            return;
        }
        let mut written = hydrate::Written::default();
        let result = hydrate::apply_recording(
            outcome,
            self.output,
            self.results_dir,
            out,
            err,
            &mut written,
        );
        // The tree this rebuild left: recorded, so that the events of its
        // own writes find nothing to run.
        self.last = Some(digests);
        if let (Ok(()), Some(committed)) = (&result, written.committed.take()) {
            if let Some(after) = scan.with_changes(&committed) {
                self.last = Some(file_digests(&after));
            }
            record_left_tree(&self.context, self.jobs, &scan, &committed);
        }
        let status = match &result {
            Ok(()) => "",
            Err(error) => {
                print_report(&error.report(), err);
                ", failed"
            }
        };
        let _ = out.flush();
        let _ = writeln!(
            err,
            "[watch] rebuilt in {} ms: {} of {} package(s) re-run, {} cache hit(s){status}",
            started.elapsed().as_millis(),
            ran.pipelines_run,
            ran.packages,
            ran.action_cache_hits,
        );
    }
}

/// Every readable file of `scan` by its path relative to the root, with
/// its digest.
fn file_digests(scan: &Scan) -> BTreeMap<String, Digest> {
    let mut files = BTreeMap::new();
    for (dir, listing) in &scan.dirs {
        for entry in listing.entries.iter().flatten() {
            if let Some(file) = &entry.file {
                files.insert(crate::engine::scan::join(dir, &entry.name), file.digest);
            }
        }
    }
    files
}

#[cfg(test)]
mod tests {
    use super::watched;
    use std::path::Path;

    #[test]
    fn own_staging_files_and_version_control_are_not_reported() {
        // A commit writes its journal and then the targets; `-o DIR` and
        // earlier krenders stage under `.krender-*`: only targets are
        // changes.
        assert!(watched(Path::new("/work/pkg/deployment.yaml")));
        assert!(watched(Path::new("/work/pkg/sub/.krmignore")));
        assert!(!watched(Path::new(
            "/work/pkg/.krender-stage-42/deployment.yaml"
        )));
        assert!(!watched(Path::new("/work/pkg/.krender-journal")));
        assert!(!watched(Path::new("/work/pkg/.git/index")));
    }
}
