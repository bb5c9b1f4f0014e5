//! Breadth-first renders (the root Kptfile's `kpt.dev/bfs-rendering:
//! "true"`): kpt's `hydrateBfsOrder` over the plan, through the same
//! per-package runs, keys and store as depth-first renders.
//!
//! Every package's own resources are read first (the first failure in
//! breadth-first order is reported, before anything runs). Then the levels
//! run top-down: a package's input is its scope (its own resources and its
//! descendants', as its ancestors left them) and its output goes back to
//! the packages its resources name; a package named by no resource keeps
//! its list. A run is keyed by its package, its functions and its scope's
//! resources, so after an edit the root runs again and below it only the
//! packages whose scope changed. The packages of one level have disjoint
//! scopes: they run in parallel, and are taken in order, a run redone when
//! an earlier output of its level moved resources into its scope. A level
//! with an `exec:` step runs one package at a time (a program may have side
//! effects, and kpt would not run the packages after a failing one).

use std::collections::HashMap;
use std::io::Write;
use std::path::Path;
use std::time::Instant;

use rayon::prelude::*;

use super::assemble::Tally;
use super::db::RenderContext;
use super::executor::{
    ExecMode, ExecStats, Job, NodeCache, Outcome, Source, lookup, own_items, run_input,
};
use super::plan::{Child, Plan};
use super::pool::{free_in_background, in_pool};
use super::record::{KeyHasher, replace_marker};
use crate::hydrate::item::{Digest, Item, ItemFlags};
use crate::hydrate::{Failure, HydrateError, RenderOutcome, Resources};
use crate::krm::resource::clean_path;
use crate::yaml::node::Node;

/// What a breadth-first render made.
struct Walk<'a> {
    context: &'a RenderContext,
    plan: &'a Plan,
    source: &'a Source<'a>,
    log: Vec<u8>,
    tally: Tally,
    stats: ExecStats,
}

/// Renders the tree of `plan` breadth-first, printing kpt's lines to `log`.
pub(crate) fn render_bfs(
    context: &RenderContext,
    plan: &Plan,
    jobs: Option<usize>,
    mode: ExecMode,
    files: Option<&str>,
    log: &mut dyn Write,
) -> (RenderOutcome, ExecStats) {
    let _span = tracing::info_span!("bfs").entered();
    let nodes = NodeCache::default();
    let source = Source::new(
        &context.store,
        &plan.root_path,
        &nodes,
        &context.build,
        mode.lookups,
    );
    let mut walk = Walk {
        context,
        plan,
        source: &source,
        log: Vec::new(),
        tally: Tally::default(),
        stats: ExecStats {
            packages: plan.packages.len(),
            ..ExecStats::default()
        },
    };
    let known = context
        .runs
        .lock()
        .map(|runs| runs.clone())
        .unwrap_or_default();
    let mut made = super::db::Known::new();
    let result = in_pool(jobs, || walk.run(mode, &known, &mut made));
    if let Ok(mut runs) = context.runs.lock() {
        *runs = made;
    }
    let materialize = |items: &[Item]| -> Option<Vec<Node>> {
        items.par_iter().map(|item| source.copy(item)).collect()
    };
    let (resources, error) = match result {
        Ok(output) => {
            // In place, the files to write are found by digest.
            let planned = files.and_then(|build| {
                super::files::planned_changes(
                    plan,
                    &output,
                    &walk.tally.input_files,
                    &materialize,
                    &context.store,
                    build,
                    context.options.attribution,
                )
            });
            match planned {
                Some(changes) => (Some(Resources::Files(changes)), None),
                None => match materialize(&output) {
                    Some(nodes) => (Some(Resources::Owned(nodes)), None),
                    None => (None, Some(unreadable(&plan.root))),
                },
            }
        }
        Err((resources, error)) => (resources.map(Resources::Owned), Some(error)),
    };
    let _ = log.write_all(&walk.log);
    let outcome = walk.tally.outcome(
        plan,
        resources,
        error,
        context.save_on_failure,
        &context.options,
    );
    let stats = walk.stats;
    free_in_background(nodes);
    (outcome, stats)
}

impl Walk<'_> {
    fn run(
        &mut self,
        mode: ExecMode,
        known: &super::db::Known,
        made: &mut super::db::Known,
    ) -> Result<Vec<Item>, Failure> {
        let plan = self.plan;
        let root = plan.root.as_path();
        // Phase 1: every package's own resources, in parallel; failures
        // reported in breadth-first order, as kpt's discovery meets them.
        let read: Vec<Result<super::executor::OwnItems, HydrateError>> = plan
            .packages
            .par_iter()
            .map(|pkg| {
                let files: Vec<_> = match &pkg.files {
                    Ok(files) => files.iter().map(|planned| planned.file.clone()).collect(),
                    Err(error) => return Err(error.clone()),
                };
                own_items(self.source, plan, pkg, &files)
            })
            .collect();
        let mut lists: Vec<Vec<Item>> = Vec::with_capacity(plan.packages.len());
        for (pkg, read) in plan.packages.iter().zip(read) {
            self.tally.n_packages += 1;
            let (own, files) = read.map_err(|error| (None, error))?;
            let rel = &pkg.rel;
            self.tally.input_files.extend(files.iter().map(|file| {
                if rel.is_empty() {
                    clean_path(file)
                } else {
                    clean_path(&format!("{rel}/{file}"))
                }
            }));
            lists.push(own);
            let children = pkg
                .children
                .as_ref()
                .map_err(|error| (None, error.clone()))?;
            for child in children {
                if let Child::Invalid(invalid) = child {
                    return Err((None, invalid.error(root)));
                }
            }
        }
        let by_rel: HashMap<&str, usize> = plan
            .packages
            .iter()
            .enumerate()
            .map(|(index, pkg)| (pkg.rel.as_str(), index))
            .collect();
        let children: Vec<Vec<usize>> = plan
            .packages
            .iter()
            .map(|pkg| pkg.child_indexes().collect())
            .collect();
        // Phase 2: the levels, top-down.
        let mut start = 0;
        while start < plan.packages.len() {
            let depth = plan.packages[start].depth;
            let end = (start..plan.packages.len())
                .find(|&i| plan.packages[i].depth != depth)
                .unwrap_or(plan.packages.len());
            let level: Vec<usize> = (start..end).collect();
            let sequential = level.len() < 2
                || level.iter().any(|&index| {
                    let pipeline = &plan.packages[index].kptfile.pipeline;
                    pipeline
                        .mutators
                        .iter()
                        .chain(&pipeline.validators)
                        .any(|function| !function.exec.is_empty())
                });
            // Ahead of the level, each package over its scope as it stands.
            let mut ahead: Vec<Option<Outcome>> = if sequential {
                level.iter().map(|_| None).collect()
            } else {
                level
                    .par_iter()
                    .map(|&index| {
                        Some(self.run_one(index, scope(&lists, &children, index), mode, known))
                    })
                    .collect()
            };
            let mut replaced = vec![false; plan.packages.len()];
            for (position, &index) in level.iter().enumerate() {
                let stale = subtree(&children, index).any(|i| replaced[i]);
                let outcome = match ahead.get_mut(position).and_then(Option::take) {
                    Some(outcome) if !stale => outcome,
                    _ => self.run_one(index, scope(&lists, &children, index), mode, known),
                };
                if let Outcome::Done(done) = &outcome
                    && let Some(key) = done.key
                {
                    made.insert(key, done.record.clone());
                }
                let (output, failure) = self.adopt(outcome)?;
                // The output goes back to the packages it names.
                let mut own = Vec::new();
                let mut routed: std::collections::BTreeMap<usize, Vec<Item>> =
                    std::collections::BTreeMap::new();
                for item in output {
                    let target = item
                        .meta
                        .has(ItemFlags::RELOCATED)
                        .then(|| by_rel.get(item.meta.package.as_str()).copied())
                        .flatten()
                        .filter(|&target| target != index);
                    match target {
                        Some(target) => routed.entry(target).or_default().push(item),
                        None => own.push(item),
                    }
                }
                for (target, list) in routed {
                    lists[target] = list;
                    replaced[target] = true;
                }
                lists[index] = own;
                if let Some(error) = failure {
                    let all: Vec<Item> = lists.into_iter().flatten().collect();
                    return Err((self.materialize(&all), error));
                }
            }
            start = end;
        }
        Ok(lists.into_iter().flatten().collect())
    }

    /// Runs (or finds) package `index`'s run over `input`.
    fn run_one(
        &self,
        index: usize,
        input: Vec<Item>,
        mode: ExecMode,
        known: &super::db::Known,
    ) -> Outcome {
        let plan = self.plan;
        let pkg = &plan.packages[index];
        if self.context.options.cancel.is_cancelled() {
            return Outcome::Skipped;
        }
        let key = bfs_key(self.context, plan, index, &input);
        if let Some(found) = lookup(self.source, key, true, mode, Some(known)) {
            return found;
        }
        run_input(
            self.context,
            self.source,
            plan,
            pkg,
            Job {
                input,
                local_files: Vec::new(),
                key,
                stored: true,
                outer: &plan.root,
                started: Instant::now(),
            },
        )
    }

    /// Takes a run's log and records as kpt's walk would: its output, and
    /// the failure with the partial output kept for save-on-failure.
    fn adopt(&mut self, outcome: Outcome) -> Result<(Vec<Item>, Option<HydrateError>), Failure> {
        let root_name = &self.plan.root_name;
        match outcome {
            Outcome::Done(done) => {
                if done.hit {
                    self.stats.hits += 1;
                } else {
                    self.stats.pipelines_run += 1;
                }
                let record = &done.record;
                self.log.extend(record.log_for(root_name));
                self.tally.steps(
                    &record.mutation_steps,
                    &record.validation_steps,
                    &record.fn_results,
                    record.executed,
                );
                let output = record
                    .output
                    .get()
                    .ok_or_else(|| (None, unreadable(&self.plan.root)))?;
                Ok((output.to_vec(), None))
            }
            Outcome::Failed(run) => {
                self.stats.pipelines_run += 1;
                self.log.extend(replace_marker(&run.log, root_name));
                self.tally.steps(
                    &run.mutation_steps,
                    &run.validation_steps,
                    &run.fn_results,
                    run.executed,
                );
                match run.output {
                    Ok(_) => Ok((Vec::new(), None)),
                    Err((Some(partial), error)) if self.context.save_on_failure => {
                        let items = super::executor::store_items(
                            &self.context.store,
                            &self.plan.root_path,
                            &partial,
                        );
                        for (item, node) in items.iter().zip(partial) {
                            self.source.keep_node(item.digest, node);
                        }
                        Ok((items, Some(error)))
                    }
                    Err((_, error)) => Err((None, error)),
                }
            }
            Outcome::ReadFailed(error) => Err((None, error)),
            Outcome::Skipped | Outcome::WouldRun(..) => Err((None, unreadable(&self.plan.root))),
        }
    }

    fn materialize(&self, items: &[Item]) -> Option<Vec<Node>> {
        items
            .par_iter()
            .map(|item| self.source.copy(item))
            .collect()
    }
}

/// What a render reports when a stored output cannot be read back (or the
/// render was cancelled, which the CLI reports instead).
fn unreadable(root: &Path) -> HydrateError {
    let text = "a stored run's output cannot be read back; render again with --no-cache";
    HydrateError::plain(root, text, crate::hydrate::Report::Error(text.into()))
}

/// `index` and its descendants, depth-first in child order (the order of a
/// breadth-first package's scope).
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

/// A package's input: its own list and its descendants' lists.
fn scope(lists: &[Vec<Item>], children: &[Vec<usize>], index: usize) -> Vec<Item> {
    subtree(children, index)
        .filter_map(|i| lists.get(i))
        .flatten()
        .cloned()
        .collect()
}

/// The key of a breadth-first run of package `index` over `input`, or
/// `None` when one of its functions is not known to be pure.
fn bfs_key(context: &RenderContext, plan: &Plan, index: usize, input: &[Item]) -> Option<Digest> {
    let pkg = &plan.packages[index];
    let mut key = KeyHasher::of(&context.build, "bfs");
    // Breadth-first runs are remembered only when they can be stored.
    if !super::keys::key_pipeline(&mut key, context, plan, pkg)? {
        return None;
    }
    key.number(input.len() as u64);
    for item in input {
        key.digest(&item.digest);
    }
    Some(key.finish())
}
