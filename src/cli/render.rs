//! `krender fn render`: kpt's render command.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::args::{FnRenderArgs, RenderArgs};
use super::progress::{self, AboveBar};
use super::signals::Interrupts;
use crate::engine::actions::ActionCache;
use crate::engine::cache::{CachePolicy, CachingEvaluator};
use crate::engine::db::RenderContext;
use crate::engine::manifest::{self, Manifest, RenderKey, TreeSnapshot};
use crate::engine::oneshot::render_once;
use crate::engine::remote::RemoteCache;
use crate::engine::scan::Scan;
use crate::engine::stamps::FileStamps;
use crate::engine::store::Store;
use crate::hydrate::{self, Output, RenderOptions, RenderOutcome, Report, Written};
use crate::pkg::kptfile::{DEFAULT_IMAGE_PREFIX, Kptfile, SAVE_ON_RENDER_FAILURE_ANNOTATION};
use crate::runtime::builtin::split_image;
use crate::runtime::cancel::Cancel;
use crate::runtime::chain::{ChainOptions, exec_evaluator, image_evaluator};
use crate::runtime::exec::ExecEvaluator;
use crate::runtime::{Evaluator, Executor, FunctionTarget};

/// Makes `path` absolute against the current directory, lexically (kpt does
/// not resolve symlinks in the package path).
pub(super) fn absolute(path: &Path) -> PathBuf {
    let joined = if path.is_absolute() {
        path.to_path_buf()
    } else {
        std::env::current_dir()
            .map(|cwd| cwd.join(path))
            .unwrap_or_else(|_| path.to_path_buf())
    };
    crate::pkg::tree::lexical(&joined)
}

/// The package path kpt renders: absolute, with a symbolic link to the
/// package resolved (kpt's `ResolveSymlink`).
pub(super) fn resolve_package_path(path: &Path) -> PathBuf {
    let is_link = std::fs::symlink_metadata(path).is_ok_and(|meta| meta.file_type().is_symlink());
    if is_link && let Ok(resolved) = std::fs::canonicalize(path) {
        return resolved;
    }
    absolute(path)
}

pub(super) fn print_report(report: &Report, err: &mut dyn Write) {
    if let Some(text) = report.stderr_text() {
        let _ = err.write_all(text.as_bytes());
    }
}

/// kpt resolves the package path's symbolic links before anything else
/// (Go's `filepath.EvalSymlinks`): for a path that does not exist, the error
/// names its first missing component, as given.
pub(super) fn missing_path_error(path: &Path) -> Option<String> {
    use std::path::Component;
    if std::fs::symlink_metadata(path).is_ok() {
        return None;
    }
    let mut prefix = PathBuf::new();
    for component in path.components() {
        if component == Component::CurDir {
            continue;
        }
        prefix.push(component);
        match std::fs::symlink_metadata(&prefix) {
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
                return Some(format!(
                    "lstat {}: no such file or directory",
                    prefix.display()
                ));
            }
            _ => {}
        }
    }
    None
}

/// Parses `-o`.
pub(super) fn output_mode(output: Option<&str>) -> Output {
    match output {
        None | Some("") => Output::InPlace,
        Some("stdout") => Output::Stdout,
        Some("unwrap") => Output::Unwrap,
        Some(dir) => Output::Dir(absolute(Path::new(dir))),
    }
}

/// Runs `fn render` and returns the exit code.
pub(super) fn run(
    command: &FnRenderArgs,
    interrupts: &Interrupts,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> i32 {
    let args = &command.render;
    if let Some(report) = super::image_pull_policy_error(args.image_pull_policy.as_deref()) {
        print_report(&report, err);
        return 1;
    }
    if let Some(message) = args.pkg_path.as_deref().and_then(missing_path_error) {
        print_report(&Report::Command(message), err);
        return 1;
    }
    let root = resolve_package_path(args.pkg_path.as_deref().unwrap_or(Path::new(".")));
    if let Some(report) = super::config_error(&super::config_path(Some(&root))) {
        print_report(&report, err);
        return 1;
    }
    let output = if command.check {
        Output::Check
    } else {
        output_mode(args.output.as_deref())
    };
    if let (Output::Dir(dir), Some(given)) = (&output, args.output.as_deref())
        && dir.exists()
    {
        let message =
            format!("directory {given:?} already exists, please delete the directory and retry");
        print_report(&Report::Command(message), err);
        return 1;
    }
    if let Some(trace) = &command.trace
        && std::fs::read_dir(trace).is_ok_and(|mut entries| entries.next().is_some())
    {
        // Steps of an earlier render left beside this one's would mislead.
        let message = format!(
            "--trace directory {:?} is not empty, please delete it or name another",
            trace.display().to_string()
        );
        print_report(&Report::Command(message), err);
        return 1;
    }
    if let Some(spec) = command.shard {
        return render_shard(args, &root, spec, interrupts, err);
    }
    if let Some(format) = command.dry_run {
        return render_dry_run(args, &root, format, interrupts, out, err);
    }
    let results_dir = args.results_dir.as_ref().map(|dir| absolute(dir));
    // Lifecycle (issue 8): lock the package and recover interrupted commits
    // before reading it; the lock is released when `_session` drops.
    let _session = match super::rpkg::open_for_render(&root, output == Output::InPlace, err) {
        Ok(session) => session,
        Err(report) => {
            print_report(&report, err);
            return 1;
        }
    };
    let started = std::time::Instant::now();
    let mut stats = RenderStats::default();
    let trace = command.trace.as_deref().map(absolute);
    let code = render_and_apply(
        args,
        trace,
        &root,
        &output,
        results_dir.as_deref(),
        interrupts,
        &mut stats,
        out,
        err,
    );
    stats.phases.total_ms = started.elapsed().as_millis();
    if let Some(path) = &command.timings
        && let Err(error) = write_timings(path, started, &stats)
    {
        let _ = writeln!(
            err,
            "krender: cannot write --timings file {}: {error}",
            path.display()
        );
    }
    if let Some(path) = &args.stats {
        stats.exit_code = code;
        if let Err(error) = stats.write(path) {
            let _ = writeln!(
                err,
                "krender: cannot write --stats file {}: {error}",
                path.display()
            );
        }
    }
    code
}

/// The cache directory (none with `--no-cache`, or when `use_cache` is
/// false) and the remote opened beside it.
fn caches(
    args: &RenderArgs,
    root: &Path,
    use_cache: bool,
) -> Result<
    (
        Option<PathBuf>,
        Option<std::sync::Arc<crate::engine::remote::RemoteCache>>,
    ),
    Report,
> {
    let cache_dir = args.cache.options().resolved_dir().filter(|_| use_cache);
    let remote = match &cache_dir {
        Some(_) => super::cache::open_remote(&args.cache, &super::config_path(Some(root)))?,
        None => None,
    };
    Ok((cache_dir, remote))
}

/// `fn render --dry-run`: what a render would run and why, what would come
/// from which cache; nothing runs, nothing in the package is written.
fn render_dry_run(
    args: &RenderArgs,
    root: &Path,
    format: super::args::DryRunFormat,
    interrupts: &Interrupts,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> i32 {
    let (cache_dir, remote) = match caches(args, root, true) {
        Ok(caches) => caches,
        Err(report) => {
            print_report(&report, err);
            return 1;
        }
    };
    // Read-only: nothing is written in place.
    let _session = match super::rpkg::open_for_render(root, false, err) {
        Ok(session) => session,
        Err(report) => {
            print_report(&report, err);
            return 1;
        }
    };
    let scan = Scan::walk(root, None);
    let kptfile = match scan.root_kptfile(root) {
        Ok(kptfile) => kptfile,
        Err(error) => {
            print_report(&Report::kptfile(&error), err);
            return 1;
        }
    };
    let (context, _) = render_context(args, root, &kptfile, cache_dir, remote, interrupts.cancel());
    let predictions = match crate::engine::oneshot::dry_run(&context, args.jobs, kptfile, &scan) {
        Ok(predictions) => predictions,
        Err(error) => {
            print_report(&Report::Command(error.to_string()), err);
            return 1;
        }
    };
    if let Some(code) = interrupts.exit_code() {
        let _ = writeln!(err, "{}", interrupts.message("render"));
        return code;
    }
    let text = match format {
        super::args::DryRunFormat::Json => {
            let summary = DryRunSummary::of(&predictions);
            serde_json::to_string_pretty(&serde_json::json!({
                "root": root.display().to_string(),
                "summary": summary,
                "packages": predictions,
            }))
            .map(|json| json + "\n")
            .unwrap_or_default()
        }
        super::args::DryRunFormat::Text => dry_run_text(&predictions),
    };
    let _ = out.write_all(text.as_bytes());
    let _ = out.flush();
    0
}

/// The counts of a dry run.
#[derive(Debug, Default, serde::Serialize)]
struct DryRunSummary {
    packages: usize,
    run: usize,
    cached_local: usize,
    cached_remote: usize,
    unreadable: usize,
}

impl DryRunSummary {
    fn of(predictions: &[crate::engine::oneshot::PackagePrediction]) -> DryRunSummary {
        use crate::engine::oneshot::Prediction;
        use crate::engine::store::Origin;
        let mut summary = DryRunSummary {
            packages: predictions.len(),
            ..DryRunSummary::default()
        };
        for one in predictions {
            match one.prediction {
                Prediction::Run { .. } => summary.run += 1,
                Prediction::Cached {
                    from: Origin::Local,
                } => summary.cached_local += 1,
                Prediction::Cached {
                    from: Origin::Remote,
                } => summary.cached_remote += 1,
                Prediction::Unreadable => summary.unreadable += 1,
            }
        }
        summary
    }
}

/// A dry run for a terminal: one summary line (`would run 4 of 1,000
/// packages: 1 not in the cache, 3 with a subpackage that runs; 996 from
/// the local cache`), then each package that would run, with why.
fn dry_run_text(predictions: &[crate::engine::oneshot::PackagePrediction]) -> String {
    use crate::engine::executor::WhyRun;
    use crate::engine::oneshot::Prediction;
    let summary = DryRunSummary::of(predictions);
    let why_text = |why: WhyRun| match why {
        WhyRun::NotStored => {
            "not in the cache (its files, Kptfile, functions or options changed, or it never ran)"
        }
        WhyRun::SubpackageRuns => "a subpackage runs (its output is this package's input)",
        WhyRun::NotCacheable => "a function is not cacheable (an executable or a container image)",
        WhyRun::CacheOff => "the cache is off",
    };
    let short = |why: WhyRun| match why {
        WhyRun::NotStored => "not in the cache",
        WhyRun::SubpackageRuns => "with a subpackage that runs",
        WhyRun::NotCacheable => "not cacheable",
        WhyRun::CacheOff => "cache off",
    };
    let mut causes: Vec<(WhyRun, usize)> = Vec::new();
    for one in predictions {
        if let Prediction::Run { why, .. } = one.prediction {
            match causes.iter_mut().find(|(seen, _)| *seen == why) {
                Some((_, count)) => *count += 1,
                None => causes.push((why, 1)),
            }
        }
    }
    causes.sort_by_key(|(why, _)| *why as u8);
    let mut line = format!(
        "would run {} of {} packages",
        group_digits(summary.run),
        group_digits(summary.packages)
    );
    if !causes.is_empty() {
        let parts: Vec<String> = causes
            .iter()
            .map(|(why, count)| format!("{} {}", group_digits(*count), short(*why)))
            .collect();
        line.push_str(": ");
        line.push_str(&parts.join(", "));
    }
    let mut from = Vec::new();
    if summary.cached_local > 0 {
        from.push(format!(
            "{} from the local cache",
            group_digits(summary.cached_local)
        ));
    }
    if summary.cached_remote > 0 {
        from.push(format!(
            "{} from the remote cache",
            group_digits(summary.cached_remote)
        ));
    }
    if summary.unreadable > 0 {
        from.push(format!("{} unreadable", group_digits(summary.unreadable)));
    }
    if !from.is_empty() {
        line.push_str("; ");
        line.push_str(&from.join(", "));
    }
    let mut text = line + "\n";
    for one in predictions {
        match &one.prediction {
            Prediction::Run { why, causes } if causes.is_empty() => {
                text.push_str(&format!("  run  {}: {}\n", one.package, why_text(*why)));
            }
            Prediction::Run { causes, .. } => {
                let described: Vec<String> = causes.iter().map(|cause| cause.describe()).collect();
                text.push_str(&format!(
                    "  run  {}: {}\n",
                    one.package,
                    described.join("; ")
                ));
            }
            Prediction::Unreadable => {
                text.push_str(&format!(
                    "  skip {}: does not read (a render reports why)\n",
                    one.package
                ));
            }
            Prediction::Cached { .. } => {}
        }
    }
    text
}

/// `1234567` as `1,234,567`.
fn group_digits(number: usize) -> String {
    let digits = number.to_string();
    let mut out = String::new();
    for (i, digit) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(digit);
    }
    out
}

/// `fn render --shard K/N`: part K of the tree into the remote cache,
/// nothing written in place; a line saying what ran.
fn render_shard(
    args: &RenderArgs,
    root: &Path,
    spec: crate::engine::shard::ShardSpec,
    interrupts: &Interrupts,
    err: &mut dyn Write,
) -> i32 {
    let Some(cache_dir) = args.cache.options().resolved_dir() else {
        print_report(
            &Report::Command("--shard needs the action cache (it is off with --no-cache)".into()),
            err,
        );
        return 1;
    };
    let remote = match super::cache::open_remote(&args.cache, &super::config_path(Some(root))) {
        Ok(Some(remote)) => remote,
        Ok(None) => {
            let message = "--shard needs a remote cache (--remote-cache URL): the final render takes the shards' runs from it";
            print_report(&Report::Command(message.into()), err);
            return 1;
        }
        Err(report) => {
            print_report(&report, err);
            return 1;
        }
    };
    // Read-only: nothing is written in place.
    let _session = match super::rpkg::open_for_render(root, false, err) {
        Ok(session) => session,
        Err(report) => {
            print_report(&report, err);
            return 1;
        }
    };
    let kptfile = match hydrate::load_root(root) {
        Ok(kptfile) => kptfile,
        Err(error) => {
            print_report(&Report::kptfile(&error), err);
            return 1;
        }
    };
    let (context, _) = render_context(
        args,
        root,
        &kptfile,
        Some(cache_dir),
        Some(remote.clone()),
        interrupts.cancel(),
    );
    let report = crate::engine::oneshot::render_shard(&context, args.jobs, &kptfile, spec);
    if let Some(code) = interrupts.exit_code() {
        let _ = writeln!(err, "{}", interrupts.message("render"));
        return code;
    }
    let report = match report {
        Ok(report) => report,
        Err(error) => {
            print_report(&Report::Command(error.to_string()), err);
            return 1;
        }
    };
    let above = if report.ran_above_cut {
        format!(
            "the {} above the cut ran here too (breadth-first: they feed the subtrees)",
            report.above_cut
        )
    } else {
        format!(
            "the final render runs the {} above the cut",
            report.above_cut
        )
    };
    let _ = writeln!(
        err,
        "shard {spec}: {} of {} packages in {} subtree(s): {} ran, {} from the cache, pushed to {}; {above}",
        report.packages,
        report.total,
        report.subtrees,
        report.pipelines_run,
        report.action_cache_hits,
        remote.url(),
    );
    if let Some(warning) = super::cache::remote_warning(&remote) {
        let _ = writeln!(err, "{warning}");
    }
    if report.failed > 0 {
        let _ = writeln!(
            err,
            "shard {spec}: {} package(s) failed or did not run; the final render reports why",
            report.failed
        );
        return 1;
    }
    0
}

/// What `--stats FILE` writes: a JSON summary of one render.
#[derive(Debug, Default, serde::Serialize)]
struct RenderStats {
    /// Packages in the tree.
    packages: usize,
    /// Pipelines that ran.
    pipelines_run: usize,
    /// Pipelines answered from the action cache.
    action_cache_hits: usize,
    /// True when the whole render was replayed from its manifest.
    manifest_hit: bool,
    /// Files written in place (rendered files and the Kptfile status).
    files_written: usize,
    /// Their bytes.
    bytes_written: u64,
    /// The exit code.
    exit_code: i32,
    /// Phase times.
    phases: Phases,
    /// What the remote cache did, when there is one.
    #[serde(skip_serializing_if = "Option::is_none")]
    remote: Option<crate::engine::remote::RemoteStats>,
    /// Each package that ran though its runs are kept, with why.
    reran: Vec<Reran>,
    /// Each package's turn on the executor (for `--timings`).
    #[serde(skip)]
    spans: Vec<crate::engine::oneshot::PackageSpan>,
}

/// Writes `--timings`: Chrome trace events (complete events, µs since the
/// command started) for the render's phases on track 0, and each package
/// on the track of the worker that ran or looked it up.
fn write_timings(
    path: &Path,
    epoch: std::time::Instant,
    stats: &RenderStats,
) -> std::io::Result<()> {
    let micros = |at: std::time::Instant| at.saturating_duration_since(epoch).as_micros() as u64;
    let mut events = vec![
        serde_json::json!({"name": "process_name", "ph": "M", "pid": 1, "args": {"name": "krender fn render"}}),
        serde_json::json!({"name": "thread_name", "ph": "M", "pid": 1, "tid": 0, "args": {"name": "phases"}}),
    ];
    let phases = &stats.phases;
    let mut at: u128 = 0;
    for (name, ms) in [
        ("read and manifest", phases.manifest_ms),
        ("render", phases.render_ms),
        ("write", phases.write_ms),
        ("record", phases.record_ms),
    ] {
        if ms > 0 {
            events.push(serde_json::json!({
                "name": name, "cat": "phase", "ph": "X", "pid": 1, "tid": 0,
                "ts": at * 1000, "dur": ms * 1000,
            }));
        }
        at += ms;
    }
    let mut threads = std::collections::BTreeSet::new();
    for span in &stats.spans {
        let tid = span.thread + 1;
        threads.insert(tid);
        events.push(serde_json::json!({
            "name": span.package,
            "cat": if span.hit { "cached" } else { "run" },
            "ph": "X", "pid": 1, "tid": tid,
            "ts": micros(span.start),
            "dur": span.end.saturating_duration_since(span.start).as_micros() as u64,
            "args": {"package": span.package, "cached": span.hit},
        }));
    }
    for tid in threads {
        events.push(serde_json::json!({
            "name": "thread_name", "ph": "M", "pid": 1, "tid": tid,
            "args": {"name": format!("worker {tid}")},
        }));
    }
    let trace = serde_json::json!({"traceEvents": events, "displayTimeUnit": "ms"});
    let text = serde_json::to_string(&trace).map_err(std::io::Error::other)?;
    std::fs::write(path, text + "\n")
}

/// A package that ran, with why (`--stats`).
#[derive(Debug, serde::Serialize)]
struct Reran {
    /// Its path relative to the root (`.` for the root).
    package: String,
    /// What changed since its last run.
    causes: Vec<crate::engine::explain::Cause>,
}

/// `ran 4 of 1,000 packages (files changed: 1, subpackage output
/// changed: 3)`, each package counted under its first cause; `None` when
/// nothing that is kept ran.
fn reran_line(ran: &crate::engine::oneshot::OnceStats) -> Option<String> {
    // (rank, kind, packages): a package's own changes before those it
    // inherits.
    let mut kinds: Vec<(u8, &str, usize)> = Vec::new();
    for (_, causes) in &ran.reran {
        let Some(cause) = causes.first() else {
            continue;
        };
        match kinds.iter_mut().find(|(_, seen, _)| *seen == cause.kind()) {
            Some((_, _, count)) => *count += 1,
            None => kinds.push((cause.rank(), cause.kind(), 1)),
        }
    }
    if kinds.is_empty() {
        return None;
    }
    kinds.sort_by_key(|(rank, _, _)| *rank);
    let parts: Vec<String> = kinds
        .iter()
        .map(|(_, kind, count)| format!("{kind}: {}", group_digits(*count)))
        .collect();
    Some(format!(
        "ran {} of {} packages ({})",
        group_digits(ran.reran.len()),
        group_digits(ran.packages),
        parts.join(", ")
    ))
}

/// Phase times of a render, in milliseconds.
#[derive(Debug, Default, serde::Serialize)]
struct Phases {
    /// Hashing the tree and looking up its manifest.
    manifest_ms: u128,
    /// Reading the tree and running (or looking up) the pipelines.
    render_ms: u128,
    /// Writing the output (in place: encoding, staging, the commit).
    write_ms: u128,
    /// Recording the tree the render left for the next render.
    record_ms: u128,
    /// The whole command.
    total_ms: u128,
}

impl RenderStats {
    fn write(&self, path: &Path) -> std::io::Result<()> {
        let text = serde_json::to_string_pretty(self).map_err(std::io::Error::other)?;
        std::fs::write(path, text + "\n")
    }
}

/// The render itself, between the lock and the summary.
fn render_and_apply(
    args: &RenderArgs,
    trace: Option<PathBuf>,
    root: &Path,
    output: &Output,
    results_dir: Option<&Path>,
    interrupts: &Interrupts,
    stats: &mut RenderStats,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> i32 {
    // A trace shows steps running: nothing is answered from a cache.
    let (cache_dir, remote) = match caches(args, root, trace.is_none()) {
        Ok(caches) => caches,
        Err(report) => {
            print_report(&report, err);
            return 1;
        }
    };
    let phase = std::time::Instant::now();
    // The one walk of the tree: every file read and hashed once.
    let mut stamps = FileStamps::default();
    let reader = stamps.reader();
    let scan = Scan::walk(root, Some(&reader));
    stamps.replace(reader.into_seen());
    // A warm, unchanged tree is answered from its manifest (engine::manifest).
    let manifest = match (&cache_dir, output, results_dir) {
        (Some(dir), Output::InPlace | Output::Check | Output::Stdout | Output::Unwrap, None) => {
            ManifestCheck::new(dir, root, args, *output == Output::Check, &scan)
        }
        _ => None,
    };
    if let Some(check) = &manifest
        && let Some(hit) = std::iter::once(&check.key)
            .chain(&check.also_answers)
            .find_map(|key| manifest::lookup(&check.dir, key, &check.tree))
    {
        tracing::debug!(target: "krender::manifest", root = %root.display(), "manifest hit");
        stats.manifest_hit = true;
        stats.packages = check.tree.packages();
        stats.phases.manifest_ms = phase.elapsed().as_millis();
        let _ = out.write_all(&hit.stdout);
        let _ = err.write_all(&hit.stderr);
        return 0;
    }
    stats.phases.manifest_ms = phase.elapsed().as_millis();
    let kptfile = match scan.root_kptfile(root) {
        Ok(kptfile) => kptfile,
        Err(error) => {
            print_report(&Report::kptfile(&error), err);
            if let Some(location) = error.location() {
                super::diagnostics::point_at(&location, args.diagnostics, err);
            }
            return 1;
        }
    };
    let (mut context, cached) = render_context(
        args,
        root,
        &kptfile,
        cache_dir,
        remote.clone(),
        interrupts.cancel(),
    );
    context.options.trace = trace;
    let bar = progress::bar(args.quiet);
    let progress = bar.as_ref().map(progress::callback);
    let mut err = AboveBar::new(err, bar.clone());
    let mut out = Tee::new(out, manifest.is_some());
    let mut err = Tee::new(&mut err, manifest.is_some());
    let phase = std::time::Instant::now();
    let in_place = matches!(output, Output::InPlace | Output::Check);
    let (outcome, ran) = render_once(
        &context,
        args.jobs,
        kptfile,
        &mut err,
        progress,
        Some(&scan),
        in_place,
    );
    stats.phases.render_ms = phase.elapsed().as_millis();
    stats.packages = ran.packages;
    stats.pipelines_run = ran.pipelines_run;
    stats.action_cache_hits = ran.action_cache_hits;
    stats.spans = ran.timings.clone();
    stats.reran = ran
        .reran
        .iter()
        .map(|(package, causes)| Reran {
            package: package.clone(),
            causes: causes.clone(),
        })
        .collect();
    // One line on a terminal says why packages ran (kpt's output is left
    // as kpt's where it is read by a program).
    let terminal = bar.is_some();
    if let Some(bar) = bar {
        bar.finish_and_clear();
    }
    if let Some(code) = interrupts.exit_code() {
        // Whatever ran was cut short: nothing is written, not even status.
        let _ = writeln!(err, "{}", interrupts.message("render"));
        return code;
    }
    let hint = builtin_hint(&outcome, context.image.as_ref());
    let phase = std::time::Instant::now();
    let mut written = Written::default();
    let applied = hydrate::apply_recording(
        outcome,
        output,
        results_dir,
        &mut out,
        &mut err,
        &mut written,
    );
    stats.phases.write_ms = phase.elapsed().as_millis();
    if let Some(remote) = &remote {
        stats.remote = Some(remote.stats());
        if let Some(warning) = super::cache::remote_warning(remote) {
            let _ = writeln!(err, "{warning}");
        }
    }
    stats.files_written = written.files.len();
    stats.bytes_written = written.bytes;
    // The tree this render left, recorded for the next render (only a
    // cache that outlives the process can answer it).
    if let (Ok(()), Some(committed), true) = (
        &applied,
        written.committed.take(),
        context.store.remembers() && context.policy.is_some(),
    ) {
        let phase = std::time::Instant::now();
        crate::engine::oneshot::record_left_tree(&context, args.jobs, &scan, &committed);
        stats.phases.record_ms = phase.elapsed().as_millis();
    }
    if let (Ok(()), Some(planned)) = (&applied, written.planned.take())
        && !planned.is_empty()
    {
        // `--check` found work: the diff, and no manifest (the tree is not
        // rendered).
        let files = print_diff(root, &planned, &mut out);
        let _ = writeln!(
            err,
            "{files} file(s) would change: the package is not rendered (run `krender fn render` without --check)"
        );
        return 1;
    }
    match applied {
        Ok(()) => {
            let pure = cached.as_ref().is_some_and(Caches::all_pure);
            // Output that did not reach its reader whole (`| head`) is
            // never recorded for replay.
            // A render that wrote files did not leave the tree as it found
            // it: there is nothing to record (and no tree to hash again).
            if let Some(check) = manifest
                && pure
                && written.files.is_empty()
                && !out.failed
                && !err.failed
            {
                check.record(out.copy, std::mem::take(&mut err.copy));
            }
            if terminal && let Some(line) = reran_line(&ran) {
                let _ = writeln!(err, "{line}");
            }
            0
        }
        Err(error) => {
            print_report(&error.report(), &mut err);
            if let Some(location) = error.location() {
                super::diagnostics::point_at(location, args.diagnostics, &mut err);
            }
            if let Some(hint) = hint {
                let _ = writeln!(err, "{hint}");
            }
            1
        }
    }
}

/// Prints `changes` against the files on disk as a unified diff (`a/` and
/// `b/` paths relative to the working directory, as `git diff` prints
/// them, so `git apply` takes it); returns how many files differ.
fn print_diff(root: &Path, changes: &crate::pkg::commit::Changes, out: &mut dyn Write) -> usize {
    let cwd = std::env::current_dir().unwrap_or_default();
    let shown = |relative: &str| {
        let path = root.join(relative);
        path.strip_prefix(&cwd)
            .map(Path::to_path_buf)
            .unwrap_or(path)
            .display()
            .to_string()
    };
    let read = |relative: &str| std::fs::read(root.join(relative)).ok();
    let writes = changes
        .writes()
        .iter()
        .map(|(relative, new)| (relative, read(relative), Some(new.clone())));
    let deletes = changes
        .deletes()
        .iter()
        .map(|relative| (relative, read(relative), None));
    let mut count = 0;
    for (relative, old, new) in writes.chain(deletes) {
        let name = shown(relative);
        let old_name = if old.is_some() {
            format!("a/{name}")
        } else {
            "/dev/null".to_owned()
        };
        let new_name = if new.is_some() {
            format!("b/{name}")
        } else {
            "/dev/null".to_owned()
        };
        let old = String::from_utf8_lossy(old.as_deref().unwrap_or_default()).into_owned();
        let new = String::from_utf8_lossy(new.as_deref().unwrap_or_default()).into_owned();
        let diff = similar::TextDiff::from_lines(&old, &new);
        let _ = writeln!(out, "diff --git a/{name} b/{name}");
        let _ = write!(
            out,
            "{}",
            diff.unified_diff()
                .context_radius(3)
                .missing_newline_hint(true)
                .header(&old_name, &new_name)
        );
        count += 1;
    }
    let _ = out.flush();
    count
}

/// After a render whose failing step ran as one of krender's builtins: a
/// line saying so, and the `render.toml` entry that runs the real function
/// instead; after one whose catalog function krender has no builtin for
/// and ran in a container: a line saying that, and how to run it without
/// one (kpt's own lines all come before it).
fn builtin_hint(outcome: &RenderOutcome, image: &dyn Evaluator) -> Option<String> {
    let failed = outcome
        .mutation_steps
        .iter()
        .chain(&outcome.validation_steps)
        .rev()
        .find(|step| step.exit_code != 0)?;
    if failed.image.is_empty() {
        return None;
    }
    let (bare, tag) = split_image(&failed.image);
    if let Some(refused) = crate::runtime::builtin::refused_tag(&failed.image) {
        return Some(format!("krender: {refused}"));
    }
    if let Some(meant) = crate::runtime::builtin::suggestion(&failed.image) {
        return Some(format!(
            "krender: {:?} is no catalog function krender knows; did you mean {:?}?",
            failed.image,
            meant.name()
        ));
    }
    let name = match image.executor(FunctionTarget::Image(&failed.image)) {
        Some(Executor::Builtin(name)) => name,
        Some(Executor::Container { engine, .. }) if is_catalog_image(bare) => {
            return Some(format!(
                "krender: {:?} is not one of krender's builtins (see the README's catalog \
                 table), so it ran in a container ({engine}); to run it without one, map it to \
                 an executable in render.toml:\n  [[function]]\n  image = {bare:?}\n  \
                 executable = {{ \"*\" = \"/path/to/function\" }}",
                failed.image
            ));
        }
        _ => return None,
    };
    let tag = tag.trim_start_matches([':', '@']);
    Some(format!(
        "krender: {:?} failed in krender's builtin {name}, not in the function's image; \
         to run the real function instead, add to render.toml:\n  \
         [[function]]\n  image = {bare:?}\n  container = [{tag:?}]",
        failed.image
    ))
}

/// Whether `name` (an image without its tag) is a catalog function's.
fn is_catalog_image(name: &str) -> bool {
    ["ghcr.io/kptdev/krm-functions-catalog/", "gcr.io/kpt-fn/"]
        .iter()
        .any(|prefix| name.starts_with(prefix))
}

/// The evaluators with the function cache in front (when it is on), kept
/// so callers can read their counters.
pub(super) struct Caches {
    image: Arc<CachingEvaluator<Box<dyn Evaluator>>>,
    exec: Arc<CachingEvaluator<ExecEvaluator>>,
}

impl Caches {
    pub(super) fn all_pure(&self) -> bool {
        self.image.stats().uncacheable == 0 && self.exec.stats().uncacheable == 0
    }
}

/// The session context for rendering `root` with `args`, and the caches (if
/// on) so callers can read their counters.
pub(super) fn render_context(
    args: &RenderArgs,
    root: &Path,
    kptfile: &Kptfile,
    cache_dir: Option<PathBuf>,
    remote: Option<Arc<RemoteCache>>,
    cancel: &Cancel,
) -> (RenderContext, Option<Caches>) {
    let options = RenderOptions {
        allow_exec: args.allow_exec,
        allow_wasm: args.allow_wasm,
        truncate_output: args.truncate_output,
        image_prefix: args
            .image_prefix
            .clone()
            .unwrap_or_else(|| DEFAULT_IMAGE_PREFIX.to_owned()),
        jobs: args.jobs,
        cancel: cancel.clone(),
        attribution: super::attribution_enabled(),
        native: super::native_mode(),
        durability: super::durability(),
        ..RenderOptions::default()
    };
    let chain_options = ChainOptions {
        image_pull_policy: args.image_pull_policy.clone(),
        cancel: cancel.clone(),
        config: super::config_path(Some(root)),
        runtime: super::container_runtime(),
        // kpt gives every container function the host network with it.
        access: crate::runtime::container::ContainerAccess {
            network: args.allow_network,
            ..Default::default()
        },
    };
    let exec = exec_evaluator(&chain_options);
    let policy = cache_dir
        .as_ref()
        .map(|_| CachePolicy::for_config(&chain_options.config));
    let store = match (&cache_dir, &remote) {
        (Some(dir), Some(remote)) => Store::on_disk(dir).with_remote(remote.clone()),
        (Some(dir), None) => Store::on_disk(dir),
        (None, _) => Store::in_memory(),
    };
    // Keys shared with other machines name the build by its bytes.
    let build = if remote.is_some() {
        crate::engine::cache::build_identity_by_content()
    } else {
        crate::engine::cache::build_identity()
    };
    let actions = cache_dir.as_deref().map(|dir| {
        let actions = ActionCache::new(dir, CachePolicy::for_config(&chain_options.config));
        Arc::new(match &remote {
            Some(remote) => actions.with_remote(remote.clone()),
            None => actions,
        })
    });
    let caches = cache_dir.map(|dir| {
        let policy = CachePolicy::for_config(&chain_options.config);
        let image =
            CachingEvaluator::new(image_evaluator(&chain_options), dir.clone(), policy.clone());
        let exec = CachingEvaluator::new(exec.clone(), dir, policy);
        match &remote {
            Some(remote) => Caches {
                image: Arc::new(image.with_remote(remote.clone())),
                exec: Arc::new(exec.with_remote(remote.clone())),
            },
            None => Caches {
                image: Arc::new(image),
                exec: Arc::new(exec),
            },
        }
    });
    let (image, exec): (Arc<dyn Evaluator>, Arc<dyn Evaluator>) = match &caches {
        Some(caches) => (caches.image.clone(), caches.exec.clone()),
        None => (Arc::from(image_evaluator(&chain_options)), Arc::new(exec)),
    };
    let context = RenderContext {
        root: root.to_path_buf(),
        options,
        save_on_failure: kptfile.annotation_is_true(SAVE_ON_RENDER_FAILURE_ANNOTATION),
        image,
        exec,
        actions,
        policy,
        build,
        store: Arc::new(store),
        remember_impure: false,
        runs: Default::default(),
    };
    (context, caches)
}

/// A stream that also keeps a copy of what went through it.
struct Tee<'a> {
    inner: &'a mut dyn Write,
    copy: Vec<u8>,
    keep: bool,
    /// A write failed: the copy is not what the reader got.
    failed: bool,
}

impl<'a> Tee<'a> {
    fn new(inner: &'a mut dyn Write, keep: bool) -> Tee<'a> {
        Tee {
            inner,
            copy: Vec::new(),
            keep,
            failed: false,
        }
    }
}

impl Write for Tee<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let written = self.inner.write(buf).inspect_err(|_| self.failed = true)?;
        if self.keep {
            self.copy.extend_from_slice(&buf[..written]);
        }
        Ok(written)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush().inspect_err(|_| self.failed = true)
    }
}

/// The manifest lookup of one render: where, under which key, and the tree
/// as it was before the render, with the stamps and bytes of its files (the
/// render and the snapshot after it read only the files that changed).
struct ManifestCheck {
    dir: PathBuf,
    key: String,
    /// Another key whose record answers this render too: a no-change
    /// in-place render's answers `--check` (not the other way round: a
    /// check ignores the status an in-place render would rewrite).
    also_answers: Option<String>,
    tree: TreeSnapshot,
}

impl ManifestCheck {
    fn new(
        dir: &Path,
        root: &Path,
        args: &RenderArgs,
        check: bool,
        scan: &Scan,
    ) -> Option<ManifestCheck> {
        let tree = scan.snapshot()?;
        let config_path = super::config_path(Some(root));
        let key = |check: bool| {
            RenderKey {
                root,
                output: if check {
                    "--check"
                } else {
                    args.output.as_deref().unwrap_or("")
                },
                flags: vec![
                    ("allow-exec", args.allow_exec.to_string()),
                    ("allow-alpha-wasm", args.allow_wasm.to_string()),
                    ("allow-network", args.allow_network.to_string()),
                    ("truncate-output", args.truncate_output.to_string()),
                    (
                        "image-prefix",
                        args.image_prefix.clone().unwrap_or_default(),
                    ),
                    (
                        "image-pull-policy",
                        args.image_pull_policy.clone().unwrap_or_default(),
                    ),
                    // The attribution annotation is added to what is written.
                    (
                        "KRM_DISABLE_ATTRIBUTION",
                        (!super::attribution_enabled()).to_string(),
                    ),
                ],
                config: std::fs::read_to_string(&config_path).ok(),
            }
            .digest()
        };
        Some(ManifestCheck {
            dir: crate::engine::cache::manifest_dir(dir),
            key: key(check),
            also_answers: check.then(|| key(false)),
            tree,
        })
    }

    /// Records the render of a tree it left as it found it (the caller
    /// knows it wrote nothing): the tree as read maps to the output it
    /// printed, whatever happens to the files since.
    fn record(self, stdout: Vec<u8>, stderr: Vec<u8>) {
        let _span = tracing::info_span!("record").entered();
        manifest::store(
            &self.dir,
            &self.key,
            &Manifest {
                tree: self.tree,
                stdout,
                stderr,
            },
        );
    }
}
