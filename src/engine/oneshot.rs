//! One-shot renders (`fn render`, `watch`'s rebuilds, `--shard`): the tree
//! read once into a plan, the plan executed over the store (see
//! [`super::executor`]; breadth-first, [`super::bfs`]), kpt's report and the
//! files to write assembled from the runs.

use std::collections::HashSet;
use std::io::Write;
use std::path::PathBuf;

use super::db::RenderContext;
use super::pool::Progress;
use crate::hydrate::{self, RenderOutcome};
use crate::pkg::kptfile::{self, Kptfile};

/// What a one-shot render ran, for `--stats`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct OnceStats {
    /// Packages in the tree.
    pub packages: usize,
    /// Pipelines that ran (not answered from the action cache).
    pub pipelines_run: usize,
    /// Pipelines answered from the action cache.
    pub action_cache_hits: usize,
    /// The packages that ran though their runs are kept (root-relative,
    /// `.` for the root), with why (depth-first renders).
    pub reran: Vec<(String, Vec<super::explain::Cause>)>,
    /// When each package ran or was looked up (depth-first renders).
    pub timings: Vec<PackageSpan>,
}

/// One package's turn on the executor, for `--timings`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PackageSpan {
    /// The package, relative to the root (`.` for the root).
    pub package: String,
    /// The rayon worker it ran on (0 off the pool).
    pub thread: usize,
    /// When it started and ended.
    pub start: std::time::Instant,
    /// When it ended.
    pub end: std::time::Instant,
    /// Answered from a cache.
    pub hit: bool,
}

/// The executor's timings, by package name.
fn spans(plan: &super::plan::Plan, execution: &super::executor::Execution) -> Vec<PackageSpan> {
    execution
        .timings
        .iter()
        .filter_map(|timing| {
            let pkg = plan.packages.get(timing.index)?;
            let hit = matches!(
                execution.outcomes.get(timing.index),
                Some(super::executor::Outcome::Done(done)) if done.hit
            );
            Some(PackageSpan {
                package: if pkg.rel.is_empty() {
                    ".".to_owned()
                } else {
                    pkg.rel.clone()
                },
                thread: timing.thread,
                start: timing.start,
                end: timing.end,
                hit,
            })
        })
        .collect()
}

/// The packages of `execution` that ran with causes, in plan order.
fn reran(
    plan: &super::plan::Plan,
    execution: &super::executor::Execution,
) -> Vec<(String, Vec<super::explain::Cause>)> {
    plan.packages
        .iter()
        .zip(&execution.outcomes)
        .filter_map(|(pkg, outcome)| match outcome {
            super::executor::Outcome::Done(done) if !done.hit && !done.causes.is_empty() => {
                let name = if pkg.rel.is_empty() {
                    "."
                } else {
                    pkg.rel.as_str()
                };
                Some((name.to_owned(), done.causes.clone()))
            }
            _ => None,
        })
        .collect()
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
    let plan = match scan {
        Some(scan) => super::plan::Plan::from_scan(scan, root_kptfile),
        None => super::plan::Plan::read(&context.root, root_kptfile, None),
    };
    if bfs {
        let (outcome, ran) = super::bfs::render_bfs(
            context,
            &plan,
            jobs,
            super::executor::ExecMode::RENDER,
            in_place.then_some(context.build.as_str()),
            log,
        );
        context.store.finish();
        let stats = OnceStats {
            packages: outcome.n_packages.max(plan.packages.len()),
            pipelines_run: ran.pipelines_run,
            action_cache_hits: ran.hits,
            reran: Vec::new(),
            timings: Vec::new(),
        };
        return (outcome, stats);
    }
    let mut lookups = true;
    loop {
        let options = super::executor::ExecOptions {
            jobs,
            progress: progress.as_ref(),
            mode: super::executor::ExecMode {
                lookups,
                pure_only: false,
                dry: false,
            },
            only: None,
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
                let reran = reran(&plan, &execution);
                let timings = spans(&plan, &execution);
                // A whole tree's resources: freed off the render's path.
                super::pool::free_in_background(execution);
                let _ = log.write_all(&buffered);
                let stats = OnceStats {
                    packages: outcome.n_packages.max(plan.packages.len()),
                    pipelines_run: ran.pipelines_run,
                    action_cache_hits: ran.hits,
                    reran,
                    timings,
                };
                return (outcome, stats);
            }
            Err(super::assemble::Incomplete)
                if lookups && !context.options.cancel.is_cancelled() =>
            {
                tracing::warn!("a stored run's output is unreadable; rendering without the store");
                lookups = false;
                context.store.distrust();
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
    // A render that left every file as it found it was the render of this
    // tree: its runs are stored already.
    let changed = !committed.deletes().is_empty()
        || committed
            .writes()
            .iter()
            .any(|(path, bytes)| scan.bytes(path).is_none_or(|old| **old != **bytes));
    if !changed {
        return;
    }
    let Some(after) = scan.with_changes(committed) else {
        return;
    };
    let Some(bytes) = after.bytes(kptfile::KPTFILE_NAME).cloned() else {
        return;
    };
    let Ok(root_kptfile) = hydrate::load_root_with(&context.root, |_| Ok(bytes)) else {
        return;
    };
    let bfs = root_kptfile.annotation_is_true(kptfile::BFS_RENDERING_ANNOTATION);
    let plan = super::plan::Plan::from_scan(&after, root_kptfile);
    if bfs {
        let mode = super::executor::ExecMode {
            lookups: true,
            pure_only: true,
            dry: false,
        };
        // The files that render would plan are remembered in it.
        let _ = super::bfs::render_bfs(
            context,
            &plan,
            jobs,
            mode,
            Some(&context.build),
            &mut std::io::sink(),
        );
        context.store.finish();
        return;
    }
    let options = super::executor::ExecOptions {
        jobs,
        progress: None,
        mode: super::executor::ExecMode {
            lookups: true,
            pure_only: true,
            dry: false,
        },
        only: None,
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
            &|items| execution.materialize(&context.store, &plan.root_path, items),
            &context.store,
            &context.build,
            context.options.attribution,
        );
    }
    super::pool::free_in_background(execution);
    context.store.finish();
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

/// Renders part `spec` of the tree at `context.root` into the store (and
/// its remote): whole subtrees below the cut, nothing written in place.
/// Depth-first, only this shard's subtrees run; breadth-first, a subtree's
/// input is what the packages above the cut left of it, so the shard runs
/// the whole walk (from the store where another shard got there first).
pub fn render_shard(
    context: &RenderContext,
    jobs: Option<usize>,
    root_kptfile: &Kptfile,
    spec: super::shard::ShardSpec,
) -> Result<ShardReport, ShardError> {
    if context.policy.is_none() || !context.store.remembers() {
        return Err(ShardError::NoCache);
    }
    let bfs = root_kptfile.annotation_is_true(kptfile::BFS_RENDERING_ANNOTATION);
    let scan = super::scan::Scan::walk(&context.root, None);
    let plan = super::plan::Plan::from_scan(&scan, root_kptfile.clone());
    if plan.packages.iter().any(|pkg| !pkg.readable()) {
        return Err(ShardError::Unreadable(context.root.clone()));
    }
    let children: Vec<Vec<usize>> = plan
        .packages
        .iter()
        .map(|pkg| pkg.child_indexes().collect())
        .collect();
    let names: Vec<String> = plan.packages.iter().map(|pkg| pkg.rel.clone()).collect();
    let cut = super::shard::plan(&children, &names, spec.count);
    let mine = cut
        .subtrees
        .get(spec.index.saturating_sub(1))
        .cloned()
        .unwrap_or_default();
    // Every package of this shard's subtrees.
    let mut members = HashSet::new();
    let mut stack = mine.clone();
    while let Some(package) = stack.pop() {
        members.insert(package);
        stack.extend(children.get(package).into_iter().flatten());
    }
    let mut report = ShardReport {
        total: plan.packages.len(),
        packages: members.len(),
        subtrees: mine.len(),
        above_cut: cut.above.len(),
        ..ShardReport::default()
    };
    let mode = super::executor::ExecMode {
        lookups: true,
        pure_only: false,
        dry: false,
    };
    if bfs {
        let (outcome, ran) =
            super::bfs::render_bfs(context, &plan, jobs, mode, None, &mut std::io::sink());
        context.store.finish();
        report.pipelines_run = ran.pipelines_run;
        report.action_cache_hits = ran.hits;
        report.failed = usize::from(outcome.error.is_some());
        report.ran_above_cut = true;
        return Ok(report);
    }
    let options = super::executor::ExecOptions {
        jobs,
        progress: None,
        mode,
        only: Some(&members),
    };
    let execution = super::executor::execute(context, &context.store, &plan, &options);
    context.store.finish();
    let outcomes = (execution.outcomes.iter().enumerate())
        .filter_map(|(index, outcome)| members.contains(&index).then_some(outcome));
    for outcome in outcomes {
        match outcome {
            super::executor::Outcome::Done(done) if done.hit => report.action_cache_hits += 1,
            super::executor::Outcome::Done(_) => report.pipelines_run += 1,
            _ => report.failed += 1,
        }
    }
    super::pool::free_in_background(execution);
    Ok(report)
}

/// What `fn render --dry-run` finds for one package.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(tag = "action", rename_all = "kebab-case")]
pub enum Prediction {
    /// Its run is in a cache.
    Cached {
        /// Which one.
        from: super::store::Origin,
    },
    /// It would run.
    Run {
        /// Why.
        why: super::executor::WhyRun,
        /// What changed since its last run, when its key is not stored.
        #[serde(skip_serializing_if = "Vec::is_empty")]
        causes: Vec<super::explain::Cause>,
    },
    /// A render would not reach it: its files or subpackages do not read
    /// (the render reports why).
    Unreadable,
}

/// One package's [`Prediction`].
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct PackagePrediction {
    /// Its path relative to the root (`.` for the root).
    pub package: String,
    /// What a render would do with it.
    #[serde(flatten)]
    pub prediction: Prediction,
}

/// Why a dry run cannot answer.
#[derive(Debug, thiserror::Error, miette::Diagnostic)]
#[diagnostic(code(krender::engine::dry_run))]
pub enum DryRunError {
    /// A breadth-first package's input is its parent's output: without
    /// running the parent, nothing below it has a key.
    #[error("--dry-run answers only depth-first renders: {0} renders breadth-first")]
    BreadthFirst(PathBuf),
}

/// Computes every package's key of a depth-first render of the tree in
/// `scan` and looks each up (local store, then the remote), bottom-up: a
/// package whose subpackage would run would run too. Nothing runs and no
/// package file is written (a run found on the remote is kept locally, as
/// a render would keep it).
pub fn dry_run(
    context: &RenderContext,
    jobs: Option<usize>,
    root_kptfile: Kptfile,
    scan: &super::scan::Scan,
) -> Result<Vec<PackagePrediction>, DryRunError> {
    if root_kptfile.annotation_is_true(kptfile::BFS_RENDERING_ANNOTATION) {
        return Err(DryRunError::BreadthFirst(context.root.clone()));
    }
    let plan = super::plan::Plan::from_scan(scan, root_kptfile);
    let options = super::executor::ExecOptions {
        jobs,
        progress: None,
        mode: super::executor::ExecMode {
            lookups: true,
            pure_only: false,
            dry: true,
        },
        only: None,
    };
    let execution = super::executor::execute(context, &context.store, &plan, &options);
    let mut predictions: Vec<PackagePrediction> = plan
        .packages
        .iter()
        .zip(&execution.outcomes)
        .map(|(pkg, outcome)| PackagePrediction {
            package: if pkg.rel.is_empty() {
                ".".to_owned()
            } else {
                pkg.rel.clone()
            },
            prediction: match outcome {
                super::executor::Outcome::Done(done) => Prediction::Cached {
                    from: done.origin.unwrap_or(super::store::Origin::Local),
                },
                super::executor::Outcome::WouldRun(why, causes) => Prediction::Run {
                    why: *why,
                    causes: causes.clone(),
                },
                _ => Prediction::Unreadable,
            },
        })
        .collect();
    predictions.sort_by(|a, b| a.package.cmp(&b.package));
    super::pool::free_in_background(execution);
    Ok(predictions)
}
