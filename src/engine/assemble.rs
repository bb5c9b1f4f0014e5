//! The assembly: what kpt's depth-first walk reports, built from the
//! executor's runs without touching the disk again. The walk visits the
//! plan in kpt's order (a package's own files, then each subpackage, then
//! its pipeline) and takes each run's log, step records and results in that
//! order, stopping at the first failure exactly where kpt stops; the
//! outcome holds the root's output for the writer.

use std::collections::BTreeSet;
use std::io::Write;

use super::executor::{Execution, Outcome};
use super::plan::{Child, Plan};
use super::store::Store;
use crate::hydrate::results::{FnResult, StepRecord};
use crate::hydrate::{Failure, HydrateError, RenderOptions, RenderOutcome, Report, Resources};
use crate::krm::resource::clean_path;
use crate::pkg::reader::{ReadOptions, parse_package_files};
use crate::yaml::node::Node;

/// Why the assembly could not report: a run's stored output is gone or
/// damaged (the render runs again without the store).
#[derive(Debug)]
pub struct Incomplete;

/// kpt's depth-first report of `outcomes`, printing the runs' logs to
/// `log` in kpt's order.
pub fn assemble(
    plan: &Plan,
    execution: &Execution,
    store: &Store,
    options: &RenderOptions,
    save_on_failure: bool,
    files: Option<&str>,
    log: &mut dyn Write,
) -> Result<RenderOutcome, Incomplete> {
    let _span = tracing::info_span!("assemble").entered();
    let mut walk = Walk {
        plan,
        outcomes: &execution.outcomes,
        execution,
        store,
        save_on_failure,
        log,
        tally: Tally::default(),
    };
    let visited = walk.visit(0)?;
    let (resources, error) = match visited {
        Ok(()) => {
            // In place, the files to write are found by digest; anything
            // else (and what the digests cannot place) writes the nodes.
            let planned = files.and_then(|build| {
                let record = walk.outcomes.first()?.record()?;
                super::files::planned_changes(
                    plan,
                    &record.output.get()?,
                    &walk.tally.input_files,
                    &|items| execution.materialize(store, &plan.root_path, items),
                    store,
                    build,
                    options.attribution,
                )
            });
            let resources = match planned {
                Some(changes) => Resources::Files(changes),
                None => Resources::Owned(walk.output_of(0).ok_or(Incomplete)?),
            };
            (Some(resources), None)
        }
        Err((partial, error)) => (partial.map(Resources::Owned), Some(error)),
    };
    Ok(walk
        .tally
        .outcome(plan, resources, error, save_on_failure, options))
}

/// What kpt's report gathers from the runs it walks, in its order.
#[derive(Default)]
pub(super) struct Tally {
    pub(super) input_files: BTreeSet<String>,
    pub(super) mutation_steps: Vec<StepRecord>,
    pub(super) validation_steps: Vec<StepRecord>,
    pub(super) fn_results: Vec<FnResult>,
    pub(super) executed: usize,
    pub(super) n_packages: usize,
}

impl Tally {
    /// The render's outcome: its output or failure, and kpt's report.
    pub(super) fn outcome(
        self,
        plan: &Plan,
        resources: Option<Resources>,
        error: Option<HydrateError>,
        save_on_failure: bool,
        options: &RenderOptions,
    ) -> RenderOutcome {
        RenderOutcome {
            root: plan.root.clone(),
            resources,
            error,
            save_on_failure,
            attribution: options.attribution,
            durability: options.durability,
            input_files: self.input_files,
            mutation_steps: self.mutation_steps,
            validation_steps: self.validation_steps,
            fn_results: self.fn_results,
            executed: self.executed,
            n_packages: self.n_packages,
        }
    }

    /// Adds one run's steps and results.
    pub(super) fn steps(
        &mut self,
        mutation: &[StepRecord],
        validation: &[StepRecord],
        fn_results: &[FnResult],
        executed: usize,
    ) {
        self.mutation_steps.extend(mutation.iter().cloned());
        self.validation_steps.extend(validation.iter().cloned());
        self.fn_results.extend(fn_results.iter().cloned());
        self.executed += executed;
    }
}

struct Walk<'a> {
    plan: &'a Plan,
    outcomes: &'a [Outcome],
    execution: &'a Execution,
    store: &'a Store,
    save_on_failure: bool,
    log: &'a mut dyn Write,
    tally: Tally,
}

impl Walk<'_> {
    /// kpt's `hydrate` at package `index`: `Ok(Err(..))` is a failure kpt
    /// reports (with the partial resources it keeps), `Err` a run whose
    /// output cannot be read back.
    fn visit(&mut self, index: usize) -> Result<Result<(), Failure>, Incomplete> {
        self.tally.n_packages += 1;
        let plan = self.plan;
        let pkg = &plan.packages[index];
        let outcome = &self.outcomes[index];
        // The package's own files first, as kpt reads them before its
        // subpackages.
        if let Err(error) = &pkg.files {
            return Ok(Err((None, error.clone())));
        }
        match outcome {
            Outcome::ReadFailed(error) => return Ok(Err((None, error.clone()))),
            Outcome::Done(_) => {}
            Outcome::Skipped | Outcome::Failed(_) | Outcome::WouldRun(..) => {
                if let Err(error) = self.parse_own(index) {
                    return Ok(Err((None, error)));
                }
            }
        }
        let children = match &pkg.children {
            Ok(children) => children,
            Err(error) => return Ok(Err((None, error.clone()))),
        };
        for (position, child) in children.iter().enumerate() {
            let child = match child {
                Child::Invalid(invalid) => return Ok(Err((None, invalid.error(&invalid.dir)))),
                Child::Package(child) => *child,
            };
            if let Err((partial, error)) = self.visit(child)? {
                // kpt keeps the parent's partial list one level up only.
                return Ok(match (partial, self.save_on_failure) {
                    (Some(partial), true) => {
                        let mut input = self.input_before(index, position)?;
                        input.extend(partial);
                        Err((Some(input), error))
                    }
                    _ => Err((None, error)),
                });
            }
        }
        let rel = &pkg.rel;
        let root_relative = |file: &str| {
            if rel.is_empty() {
                clean_path(file)
            } else {
                clean_path(&format!("{rel}/{file}"))
            }
        };
        match outcome {
            Outcome::Done(done) => {
                let record = &done.record;
                let _ = self.log.write_all(&record.log_for(&plan.root_name));
                let _ = self.log.flush();
                self.tally
                    .input_files
                    .extend(record.input_files.iter().map(|file| root_relative(file)));
                self.tally.steps(
                    &record.mutation_steps,
                    &record.validation_steps,
                    &record.fn_results,
                    record.executed,
                );
                Ok(Ok(()))
            }
            Outcome::Failed(run) => {
                let log = super::record::replace_marker(&run.log, &plan.root_name);
                let _ = self.log.write_all(&log);
                let _ = self.log.flush();
                self.tally
                    .input_files
                    .extend(run.input_files.iter().map(|file| root_relative(file)));
                self.tally.steps(
                    &run.mutation_steps,
                    &run.validation_steps,
                    &run.fn_results,
                    run.executed,
                );
                match &run.output {
                    Err((partial, error)) => Ok(Err((partial.clone(), error.clone()))),
                    Ok(_) => Ok(Ok(())),
                }
            }
            // Every subpackage succeeded and the files read: only a
            // cancelled render or an unreadable stored output skips it.
            // (A dry run is never assembled.)
            Outcome::Skipped | Outcome::ReadFailed(_) | Outcome::WouldRun(..) => Err(Incomplete),
        }
    }

    /// Parses package `index`'s own files, for the error kpt reports.
    fn parse_own(&self, index: usize) -> Result<Vec<Node>, HydrateError> {
        let pkg = &self.plan.packages[index];
        let files: Vec<_> = pkg
            .files
            .iter()
            .flatten()
            .map(|planned| planned.file.clone())
            .collect();
        let options = ReadOptions {
            package_path: Some(pkg.path.display().to_string()),
        };
        parse_package_files(&files, &options)
            .map(|read| read.resources)
            .map_err(|error| {
                let text = error.to_string();
                HydrateError::plain(&pkg.path, &text, Report::Error(text.clone()))
                    .at(error.location().cloned())
            })
    }

    /// Package `index`'s input as it stood when its subpackage at
    /// `position` failed: its own resources and its earlier subpackages'
    /// outputs.
    fn input_before(&self, index: usize, position: usize) -> Result<Vec<Node>, Incomplete> {
        let mut input = self.parse_own(index).map_err(|_| Incomplete)?;
        let pkg = &self.plan.packages[index];
        for child in pkg.child_indexes().take(position) {
            input.extend(self.output_of(child).ok_or(Incomplete)?);
        }
        Ok(input)
    }

    /// The output resources of a successful run.
    fn output_of(&self, index: usize) -> Option<Vec<Node>> {
        match self.outcomes.get(index)? {
            Outcome::Done(done) => self.execution.materialize(
                self.store,
                &self.plan.root_path,
                &done.record.output.get()?,
            ),
            _ => None,
        }
    }
}
