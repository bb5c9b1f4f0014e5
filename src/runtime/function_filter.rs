//! One function call as kpt makes it: kyaml's `kio.Pipeline` around kyaml's
//! `FunctionFilter` (spec §8.4).
//!
//! [`run_function`] does, in kpt's order:
//! 1. (mutators only) the pipeline's migration step: each resource gets
//!    `internal.config.kubernetes.io/annotations-migration-resource-id`
//!    (its position), a snapshot of its internal annotations is kept, and
//!    legacy/internal path, index and id are completed from each other;
//! 2. the filter's ids: `internal.config.kubernetes.io/id` and
//!    `config.k8s.io/id` (`1`, `2`, … by position);
//! 3. the wire: the `ResourceList` text (see [`crate::krm::resource_list`]) is
//!    handed to the caller's runner, whose stdout is read back;
//! 4. for each output resource carrying an id of an input: comments copied
//!    ([`crate::krm::comments`]), key order synced ([`crate::krm::order`]), ids removed;
//! 5. on function failure: stop, keeping the parsed `results`;
//! 6. new resources get a default path (`[<namespace>/]<kind>_<name>.yaml`).
//!
//! A native builtin ([`run_native`]) replaces step 3: it runs on the nodes
//! the wire would carry, and step 4 is shortened where it provably does
//! nothing (see `Restore`).
//!
//! The caller then runs kpt's own checks on [`StepOutput::resources`]
//! (package-path defaults, path invariants, the KRM check — kpt's
//! `FunctionRunner` does them here) and calls [`StepOutput::finish`], the
//! pipeline's annotation reconciliation, which also removes the migration id.
//!
//! Nothing here touches the caller's input nodes: on failure kpt hands the
//! step's input on unchanged (minus the ids it added), so the caller simply
//! keeps its own copy.
//!
//! Use from the hydrator, per pipeline step:
//! - mutators: `FunctionCall { function_config, in_pipeline: true }`; the
//!   step's resources become `StepOutput::finish()`'s result;
//! - validators: `in_pipeline: false` on a copy of the resources; only the
//!   results and errors matter;
//! - [`run_evaluator`] wraps both halves around a `runtime::Evaluator` and
//!   returns output, `results`, stderr and exit code in one value;
//! - the `results` node decodes with `crate::yaml::de::from_node`.

use std::collections::BTreeMap;
use std::time::Duration;

use rayon::prelude::*;

use crate::krm::comments::copy_comments;
use crate::krm::order::{rearrange_head_comments, rearrange_sequence_items, sync_order};
use crate::krm::resource::{self, annotation, clean_path, remove_annotation};
use crate::krm::resource_list::{
    WireError, clear_empty_annotations_only, copy_legacy_annotations, decode_function_output,
    encode_function_input, encode_output_list, kyaml_set_annotation, wire_item,
};
use crate::runtime::builtin::Builtin;
use crate::runtime::{EvalError, Evaluator, FunctionRequest, FunctionResponse, FunctionTarget};
use crate::yaml::node::{Node, NodeKind};

/// The prefix of kyaml's internal annotations.
const INTERNAL_PREFIX: &str = "internal.config.kubernetes.io/";

/// How a step's function is called.
#[derive(Clone, Copy, Debug)]
pub struct FunctionCall<'a> {
    /// The step's `functionConfig` (a `configMap:` ConfigMap, see
    /// [`super::resource_list::config_map_function_config`], or the
    /// `configPath:` resource), if any. A config equal to one of the
    /// resources is sent as that item is, with the ids and migration id the
    /// call adds (kpt shares the node between `items` and `functionConfig`).
    pub function_config: Option<&'a Node>,
    /// Mutators run inside kyaml's `kio.Pipeline` (migration id on the wire,
    /// reconciliation afterwards); kpt calls validators without it.
    pub in_pipeline: bool,
}

/// What the caller's runner reports: the function's stdout, and whether it
/// failed. A failed function's stdout is still read (for its `results`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FunctionExit<E> {
    /// Everything the function wrote to stdout.
    pub stdout: Vec<u8>,
    /// `Err` when the function failed (non-zero exit, could not start, …).
    pub status: Result<(), E>,
}

/// Why a step failed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum StepError<E: std::fmt::Display> {
    /// The function failed; kpt reports it with the structured results the
    /// function still printed.
    #[error("{error}")]
    Function {
        /// The runner's error.
        error: E,
        /// The `results` of the function's output list, if any.
        results: Option<Node>,
    },
    /// The output could not be read or the bookkeeping failed. kpt reports
    /// this error even when the function also failed.
    #[error("{error}")]
    Wire {
        /// What went wrong.
        error: WireError,
        /// The function's own failure, if it also failed.
        function_error: Option<E>,
    },
}

/// A successful call, before the pipeline's reconciliation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StepOutput {
    /// The output resources, in the function's order: bare root nodes
    /// (mappings), with comments and key order restored and default paths
    /// set.
    pub resources: Vec<Node>,
    /// The `results` of the function's output list, if any.
    pub results: Option<Node>,
    /// Migration id → the input's internal annotations before the call
    /// (empty for calls outside the pipeline).
    snapshots: Snapshots,
    in_pipeline: bool,
}

/// One input's internal annotations before a call, in the order first
/// seen (a handful per resource: a list beats a map's nodes, and a DFS
/// root's step takes one per resource of the tree).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct Snapshot(Vec<(String, String)>);

impl Snapshot {
    fn get(&self, key: &str) -> Option<&String> {
        self.0.iter().find(|(k, _)| k == key).map(|(_, v)| v)
    }

    fn contains_key(&self, key: &str) -> bool {
        self.get(key).is_some()
    }
}

/// The inputs' snapshots by position: the migration id a resource carries
/// through the call is its position's decimal text.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct Snapshots(Vec<Option<Snapshot>>);

impl Snapshots {
    fn is_empty(&self) -> bool {
        self.0.iter().all(Option::is_none)
    }

    /// The snapshot of the resource whose migration id is `id`: only the
    /// exact text written (`"7"`, not `"07"` or `"+7"`) finds it, as in
    /// kyaml's map keyed by that text.
    fn get(&self, id: &str) -> Option<&Snapshot> {
        let canonical = !id.is_empty()
            && id.bytes().all(|b| b.is_ascii_digit())
            && (id == "0" || !id.starts_with('0'));
        if !canonical {
            return None;
        }
        let position: usize = id.parse().ok()?;
        self.0.get(position)?.as_ref()
    }

    fn values(&self) -> impl Iterator<Item = &Snapshot> {
        self.0.iter().flatten()
    }
}

/// Runs one function over `resources` (Document or Mapping nodes carrying
/// the reader annotations). `run` receives the stdin bytes.
// The error carries kpt's message parts by value; it is built at most once
// per step, so its size does not matter.
pub fn run_function<E: std::fmt::Display>(
    resources: &[Node],
    call: FunctionCall<'_>,
    run: impl FnOnce(&[u8]) -> FunctionExit<E>,
) -> Result<StepOutput, StepError<E>> {
    run_function_owned(resources.to_vec(), call, run)
}

/// [`run_function`] on resources the caller gives up (no copy is made:
/// renders hand each step's whole resource list through here).
pub fn run_function_owned<E: std::fmt::Display>(
    resources: Vec<Node>,
    call: FunctionCall<'_>,
    run: impl FnOnce(&[u8]) -> FunctionExit<E>,
) -> Result<StepOutput, StepError<E>> {
    let prepared = Prepared::new(resources, &call).map_err(|error| StepError::Wire {
        error,
        function_error: None,
    })?;
    let stdin = encode_function_input(&prepared.inputs, prepared.function_config(&call));
    let exit = run(stdin.as_bytes());
    let stdout = String::from_utf8_lossy(&exit.stdout);
    let output = match decode_function_output(&stdout) {
        Ok(output) => output,
        Err(error) => {
            return Err(StepError::Wire {
                error,
                function_error: exit.status.err(),
            });
        }
    };
    prepared.complete(output.items, output.results, exit.status, Restore::Wire)
}

/// Steps 1 and 2 done: the inputs as the function sees them.
struct Prepared {
    inputs: Vec<Node>,
    snapshots: Snapshots,
    /// The input that is the step's `configPath:` config, if any.
    config_item: Option<usize>,
    in_pipeline: bool,
}

impl Prepared {
    fn new(resources: Vec<Node>, call: &FunctionCall<'_>) -> Result<Prepared, WireError> {
        // A `configPath:` config is one of the resources; kpt passes the very
        // same node, so it carries the annotations added to the item below.
        let config_item = call.function_config.and_then(|config| {
            resources
                .iter()
                .position(|resource| resource.root() == config.root())
        });
        let mut inputs: Vec<Node> = resources;
        let in_pipeline = call.in_pipeline;
        let prepared = per_resource(&mut inputs, |position, input| {
            let snapshot = if in_pipeline {
                Some(prepare_migration(position, input)?)
            } else {
                None
            };
            let id = (position + 1).to_string();
            kyaml_set_annotation(input, resource::ID, &id);
            kyaml_set_annotation(input, resource::LEGACY_ID, &id);
            Ok(snapshot)
        });
        let snapshots = Snapshots(prepared.into_iter().collect::<Result<_, _>>()?);
        Ok(Prepared {
            inputs,
            snapshots,
            config_item,
            in_pipeline: call.in_pipeline,
        })
    }

    fn function_config<'a>(&'a self, call: &FunctionCall<'a>) -> Option<&'a Node> {
        match self.config_item {
            Some(i) => self.inputs.get(i),
            None => call.function_config,
        }
    }

    /// Steps 4–6 on the items and results read back from the function, or
    /// handed back by a native builtin ([`run_native`]); `restore` says how
    /// comments and key order come back from the inputs.
    fn complete<E: std::fmt::Display>(
        self,
        mut resources: Vec<Node>,
        results: Option<Node>,
        status: Result<(), E>,
        restore: Restore,
    ) -> Result<StepOutput, StepError<E>> {
        let restored = match &restore {
            Restore::Wire => restore_from_inputs(&self.inputs, &mut resources, false),
            Restore::Native => restore_from_inputs(&self.inputs, &mut resources, true),
            Restore::InPlace(documents) => {
                per_resource(&mut resources, |_, output| {
                    restore_in_place(output, documents)
                });
                Ok(())
            }
        };
        drop_resources(self.inputs);
        if let Err(error) = restored {
            return Err(StepError::Wire {
                error,
                function_error: status.err(),
            });
        }
        // kpt keeps only the root of each output document: document-level
        // comments of plain-document output (copied from the input or written
        // by the function) never reach the files, as recorded with kpt.
        for node in &mut resources {
            if node.kind == NodeKind::Document && !node.content.is_empty() {
                let root = node.content.swap_remove(0);
                *node = root;
            }
        }
        if let Err(error) = status {
            return Err(StepError::Function { error, results });
        }
        set_default_paths(&mut resources).map_err(|error| StepError::Wire {
            error,
            function_error: None,
        })?;
        Ok(StepOutput {
            resources,
            results,
            snapshots: self.snapshots,
            in_pipeline: self.in_pipeline,
        })
    }
}

impl StepOutput {
    /// kyaml's `ReconcileInternalAnnotations` (mutators): a path or index
    /// changed on only the legacy or only the internal annotation is copied
    /// to the other, a conflicting change is an error, and the migration id
    /// is removed. Returns the resources; for calls outside the pipeline it
    /// returns them untouched.
    pub fn finish(self) -> Result<Vec<Node>, WireError> {
        let mut resources = self.resources;
        if !self.in_pipeline {
            return Ok(resources);
        }
        let (use_internal, use_legacy) = annotation_format(&self.snapshots)?;
        let snapshots = &self.snapshots;
        first_error(per_resource(&mut resources, |_, node| {
            fill_missing_counterparts(node);
            reconcile_changed(node, snapshots)?;
            if !use_internal {
                for key in [resource::ID, resource::PATH, resource::INDEX] {
                    remove_annotation(node, key);
                }
            }
            if !use_legacy {
                for key in [
                    resource::LEGACY_ID,
                    resource::LEGACY_PATH,
                    resource::LEGACY_INDEX,
                ] {
                    remove_annotation(node, key);
                }
            }
            check_mismatched(node)?;
            remove_annotation(node, resource::MIGRATION_ID);
            Ok(())
        }))?;
        Ok(resources)
    }
}

/// One step run through a function [`Evaluator`], reduced to what the
/// hydrator records (see [`run_evaluator`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EvaluatedStep {
    /// On success, the output resources after [`StepOutput::finish`]; an
    /// `Err` when the output could not be used (kpt reports that error, even
    /// when the function also failed). Empty when the function failed.
    pub output: Result<Vec<Node>, WireError>,
    /// The `results` of the function's output list, if any (also for
    /// failing functions).
    pub results: Option<Node>,
    /// The function's stderr.
    pub stderr: Vec<u8>,
    /// The function's exit code.
    pub exit_code: i32,
    /// Set by a settled native step: what it knows of its output (see
    /// [`SettledList`]).
    pub settled: Option<SettledList>,
}

/// Runs one step through `evaluator`: [`run_function`] with the evaluator
/// as the runner, then (on success) [`StepOutput::finish`]. kpt checks path
/// invariants and the KRM rule on the output *before* reconciling; doing
/// both in one call only differs when a function changes just the legacy
/// path annotation. An evaluator error (the function could not run at all)
/// is returned as `Err`.
pub fn run_evaluator(
    evaluator: &dyn Evaluator,
    target: FunctionTarget<'_>,
    resources: &[Node],
    call: FunctionCall<'_>,
    timeout: Duration,
) -> Result<EvaluatedStep, EvalError> {
    run_evaluator_owned(
        evaluator,
        target,
        resources.to_vec(),
        call,
        timeout,
        None,
        NativeMode::On,
    )
}

/// [`run_evaluator`] on resources the caller gives up (see
/// [`run_function_owned`]). A builtin that can run on nodes
/// ([`Evaluator::native`]) skips the wire unless `mode` says otherwise.
/// `known` is what the previous step knew of `resources` when they are its
/// whole, unchanged output (see [`SettledList`]).
pub fn run_evaluator_owned(
    evaluator: &dyn Evaluator,
    target: FunctionTarget<'_>,
    resources: Vec<Node>,
    call: FunctionCall<'_>,
    timeout: Duration,
    known: Option<SettledList>,
    mode: NativeMode,
) -> Result<EvaluatedStep, EvalError> {
    let builtin = match mode {
        NativeMode::Off => None,
        NativeMode::On | NativeMode::Verify => evaluator.native(target),
    };
    // One walk over the resources decides both whether the step may run
    // natively and whether the builtin may edit them in place.
    let shape = match (builtin, known) {
        (None, _) => Shape::NONE,
        (Some(_), Some(known)) => known.shape,
        (Some(_), None) => Shape::of_list(&resources),
    };
    let Some(builtin) = builtin.filter(|_| shape.survives_wire) else {
        return run_wire(evaluator, target, resources, call, timeout);
    };
    let known_settled = known.is_some();
    if mode != NativeMode::Verify {
        return run_native_shaped(builtin, resources, call, timeout, shape, known_settled);
    }
    let wire = run_wire(evaluator, target, resources.clone(), call, timeout);
    let native = run_native_shaped(builtin, resources, call, timeout, shape, known_settled);
    // A difference fails the step, loudly: verify mode exists to find one.
    match native_difference(&wire, &native) {
        Some(difference) => Err(EvalError::System(format!(
            "KRENDER_NATIVE=verify: builtin {} differs from its wire round trip: {difference}",
            builtin.name()
        ))),
        None => native,
    }
}

/// True when a native builtin may run over `resources` (no foot comment
/// and no folded scalar, see [`Shape`]); otherwise the step takes the wire.
pub fn runs_natively(resources: &[Node]) -> bool {
    Shape::of_list(resources).survives_wire
}

/// What a native step may do with resources, found in one walk.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Shape {
    /// Writing the nodes to the wire and parsing them back gives the same
    /// bytes again, so a native step sees what the function would have
    /// seen. Two things are known not to survive go-yaml's round trip: foot
    /// comments (re-read as the next node's head comment, or duplicated)
    /// and folded scalars (each trip adds blank lines). A step over any
    /// such resource takes the wire; `tests/cases/native.rs` checks the
    /// rest.
    survives_wire: bool,
    /// Every mapping has distinct, non-empty scalar keys (no merge keys).
    /// kyaml syncs key order by key text, so duplicate, empty or
    /// non-scalar keys are rearranged by the restore even between equal
    /// trees; such resources always get the full restore.
    plain_keys: bool,
}

impl Shape {
    const ALL: Shape = Shape {
        survives_wire: true,
        plain_keys: true,
    };
    const NONE: Shape = Shape {
        survives_wire: false,
        plain_keys: false,
    };

    fn and(self, other: Shape) -> Shape {
        Shape {
            survives_wire: self.survives_wire && other.survives_wire,
            plain_keys: self.plain_keys && other.plain_keys,
        }
    }

    /// The shape of every resource's root, together (in parallel for long
    /// lists).
    fn of_list(resources: &[Node]) -> Shape {
        let of_item = |item: &Node| Shape::of(item.root());
        if resources.len() >= PARALLEL_FROM {
            resources
                .par_iter()
                .map(of_item)
                .reduce(|| Shape::ALL, Shape::and)
        } else {
            resources.iter().map(of_item).fold(Shape::ALL, Shape::and)
        }
    }

    /// The shape of `node`'s tree; the walk stops once both flags are off.
    fn of(node: &Node) -> Shape {
        let mut shape = Shape::ALL;
        shape.visit(node);
        shape
    }

    fn visit(&mut self, node: &Node) {
        if *self == Shape::NONE {
            return;
        }
        self.visit_one(node);
        for child in &node.content {
            self.visit(child);
        }
    }

    /// The checks of [`Shape::visit`] on `node` itself.
    fn visit_one(&mut self, node: &Node) {
        if !node.foot_comment().is_empty() || node.style.contains(crate::yaml::node::Style::FOLDED)
        {
            self.survives_wire = false;
        }
        if self.plain_keys && node.is_mapping() {
            for (i, key) in node.content.iter().enumerate().step_by(2) {
                if !key.is_scalar()
                    || key.value.is_empty()
                    || key.value == "<<"
                    || node.content[..i]
                        .iter()
                        .step_by(2)
                        .any(|earlier| earlier.value == key.value)
                {
                    self.plain_keys = false;
                    break;
                }
            }
        }
    }

    /// [`rearrange_head_comments`] on `node` and [`Shape::visit`] in one
    /// walk. The rearrangement only moves head comments, which the shape
    /// does not read.
    fn visit_rearranging(&mut self, node: &mut Node) {
        match node.kind {
            NodeKind::Document | NodeKind::Mapping => {
                self.visit_one(node);
                for child in &mut node.content {
                    self.visit_rearranging(child);
                }
            }
            NodeKind::Sequence => {
                rearrange_sequence_items(node);
                self.visit(node);
            }
            NodeKind::Scalar | NodeKind::Alias => self.visit(node),
        }
    }
}

/// Whether builtins run on nodes (the cli's `KRENDER_NATIVE`: `off` forces
/// the wire, `verify` runs both and fails the step on any difference).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum NativeMode {
    /// Builtins run on the nodes when the resources survive the wire.
    #[default]
    On,
    /// Every step goes through the wire.
    Off,
    /// Both, failing the step on any difference.
    Verify,
}

impl NativeMode {
    /// `KRENDER_NATIVE`'s value: `off`/`0`/`false`, `verify`, else on.
    pub fn parse(value: &str) -> NativeMode {
        match value {
            "off" | "0" | "false" => NativeMode::Off,
            "verify" => NativeMode::Verify,
            _ => NativeMode::On,
        }
    }
}

/// One step through the evaluator's wire protocol (what
/// [`run_evaluator_owned`] does for every function that is not a native
/// builtin).
pub fn run_wire(
    evaluator: &dyn Evaluator,
    target: FunctionTarget<'_>,
    resources: Vec<Node>,
    call: FunctionCall<'_>,
    timeout: Duration,
) -> Result<EvaluatedStep, EvalError> {
    let mut response: Option<Result<FunctionResponse, EvalError>> = None;
    let step = run_function_owned(resources, call, |input| {
        let request = FunctionRequest {
            target,
            input,
            timeout,
        };
        let outcome = evaluator.evaluate(&request);
        let exit = match &outcome {
            Ok(done) if done.exit_code == 0 => FunctionExit {
                stdout: done.stdout.clone(),
                status: Ok(()),
            },
            Ok(done) => FunctionExit {
                stdout: done.stdout.clone(),
                status: Err(ExitFailure),
            },
            Err(_) => FunctionExit {
                stdout: Vec::new(),
                status: Err(ExitFailure),
            },
        };
        response = Some(outcome);
        exit
    });
    let (stderr, exit_code) = match response {
        Some(Ok(done)) => (done.stderr, done.exit_code),
        Some(Err(error)) => return Err(error),
        None => (Vec::new(), 0),
    };
    Ok(evaluated(step, stderr, exit_code))
}

/// One step with `builtin` run on the nodes the wire would carry: the same
/// host-side steps as [`run_function_owned`], minus encoding and parsing
/// the items twice.
pub fn run_native(
    builtin: Builtin,
    resources: Vec<Node>,
    call: FunctionCall<'_>,
    timeout: Duration,
) -> Result<EvaluatedStep, EvalError> {
    let shape = Shape::of_list(&resources);
    run_native_shaped(builtin, resources, call, timeout, shape, false)
}

/// [`run_native`] with the resources' [`Shape`] already known, and their
/// bookkeeping known to be settled when `known_settled` (see [`settled`]).
fn run_native_shaped(
    builtin: Builtin,
    resources: Vec<Node>,
    call: FunctionCall<'_>,
    timeout: Duration,
    shape: Shape,
    known_settled: bool,
) -> Result<EvaluatedStep, EvalError> {
    if builtin.edits_in_place()
        && builtin.ignores_bookkeeping()
        && call.in_pipeline
        && shape.plain_keys
        && if known_settled {
            !config_is_a_resource(&resources, &call)
        } else {
            settled(&resources, &call)
        }
    {
        return run_native_settled(builtin, resources, call, timeout);
    }
    let prepared = match Prepared::new(resources, &call) {
        Ok(prepared) => prepared,
        Err(error) => {
            let step: Result<StepOutput, _> = Err(StepError::<ExitFailure>::Wire {
                error,
                function_error: None,
            });
            return Ok(evaluated(step, Vec::new(), 0));
        }
    };
    let mut prepared = prepared;
    if builtin.edits_in_place() && shape.plain_keys {
        // No copy of the input: the builtin edits the resources themselves,
        // and the walks that would restore comments and key order from the
        // input are no-ops for its edits (see Builtin::edits_in_place).
        let config = prepared.function_config(&call).cloned();
        let (items, documents) = unwrap_documents(std::mem::take(&mut prepared.inputs));
        let outcome = builtin.run_native(items, config.as_ref(), timeout)?;
        let status = exit_status(outcome.exit_code);
        let step = prepared.complete(
            outcome.items,
            outcome.results,
            status,
            Restore::InPlace(documents),
        );
        return Ok(evaluated(step, outcome.stderr, outcome.exit_code));
    }
    let items = if prepared.inputs.len() >= PARALLEL_FROM {
        prepared.inputs.par_iter().map(wire_item).collect()
    } else {
        prepared.inputs.iter().map(wire_item).collect()
    };
    let outcome = builtin.run_native(items, prepared.function_config(&call), timeout)?;
    let status = exit_status(outcome.exit_code);
    let step = prepared.complete(outcome.items, outcome.results, status, Restore::Native);
    Ok(evaluated(step, outcome.stderr, outcome.exit_code))
}

/// Whether every resource's bookkeeping is already what a mutator's call
/// would leave it as: path and index each on both the internal and the
/// legacy annotation with one value, no ids and no migration id, and no
/// Document wrapper carrying comments; and the function config is not one
/// of the resources. For such a list the host's work around the call is a
/// no-op on every resource: the migration id and the ids are added and
/// removed again (new keys go at the end of the annotations, so removing
/// them restores the order), the legacy/internal copies and the
/// reconciliation find the pairs equal and unchanged, the annotation format
/// keeps both forms, and the default path is never needed.
fn settled(resources: &[Node], call: &FunctionCall<'_>) -> bool {
    !config_is_a_resource(resources, call) && bookkeeping_settled(resources)
}

/// Whether the call's function config is one of `resources` (by value).
fn config_is_a_resource(resources: &[Node], call: &FunctionCall<'_>) -> bool {
    call.function_config.is_some_and(|config| {
        resources
            .iter()
            .any(|resource| resource.root() == config.root())
    })
}

/// The per-resource half of [`settled`].
fn bookkeeping_settled(resources: &[Node]) -> bool {
    if resources.len() >= PARALLEL_FROM {
        resources.par_iter().all(settled_resource)
    } else {
        resources.iter().all(settled_resource)
    }
}

/// [`bookkeeping_settled`] for one resource.
fn settled_resource(node: &Node) -> bool {
    if node.kind == NodeKind::Document
        && !(node.head_comment().is_empty()
            && node.line_comment().is_empty()
            && node.foot_comment().is_empty())
    {
        return false;
    }
    let Some(annotations) = resource::annotations(node).filter(|a| a.is_mapping()) else {
        return false;
    };
    // One pass over the entries (a DFS root checks the whole tree): the
    // first entry of each key counts, as a lookup finds it.
    let mut found: [Option<&Node>; 4] = [None; 4];
    for (key, value) in annotations.pairs() {
        let slot = match key.value.as_str() {
            resource::PATH => 0,
            resource::LEGACY_PATH => 1,
            resource::INDEX => 2,
            resource::LEGACY_INDEX => 3,
            resource::ID | resource::LEGACY_ID | resource::MIGRATION_ID => return false,
            _ => continue,
        };
        found[slot].get_or_insert(value);
    }
    let read = |slot: usize| {
        found[slot]
            .filter(|value| value.is_scalar())
            .map_or("", |value| value.value.as_str())
    };
    let (path, index) = (read(0), read(2));
    !path.is_empty() && path == read(1) && !index.is_empty() && index == read(3)
}

/// What decides, for one resource, whether a native builtin may run over
/// it without the wire and without the host's bookkeeping: the engine
/// keeps these beside a resource's digest, so that a step over resources
/// it does not decode knows whether they would take the settled path.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct NativeFacts {
    /// The resource survives go-yaml's round trip (see `Shape`).
    pub(crate) survives_wire: bool,
    /// Its mappings have plain keys (see `Shape`).
    pub(crate) plain_keys: bool,
    /// Its bookkeeping is settled (see [`settled`]).
    pub(crate) settled: bool,
}

/// What a settled native step does to one of its output resources after
/// the builtin ran (kyaml's head-comment rearrangement), and the shape the
/// resource then has: whether it still survives the wire and has plain
/// keys (the next step's [`NativeFacts`] but for the bookkeeping).
pub(crate) fn settle_output(node: &mut Node) -> (bool, bool) {
    let mut shape = Shape::ALL;
    shape.visit_rearranging(node.root_mut());
    (shape.survives_wire, shape.plain_keys)
}

/// [`NativeFacts`] of one resource.
pub(crate) fn native_facts(node: &Node) -> NativeFacts {
    let shape = Shape::of(node.root());
    NativeFacts {
        survives_wire: shape.survives_wire,
        plain_keys: shape.plain_keys,
        settled: settled_resource(node),
    }
}

/// [`run_native_shaped`] for a builtin that ignores the host's bookkeeping
/// ([`Builtin::ignores_bookkeeping`]) over a [`settled`] list: the builtin
/// edits the resources themselves and only what is not a no-op around the
/// call remains, the head-comment rearrangement of kyaml's order sync
/// (which the restore applies to every output).
fn run_native_settled(
    builtin: Builtin,
    resources: Vec<Node>,
    call: FunctionCall<'_>,
    timeout: Duration,
) -> Result<EvaluatedStep, EvalError> {
    let items: Vec<Node> = resources.into_iter().map(Node::into_root).collect();
    let outcome = builtin.run_native(items, call.function_config, timeout)?;
    let (output, settled) = if outcome.exit_code == 0 {
        let mut resources = outcome.items;
        // The rearrangement's walk also finds the output's shape, for the
        // next step (see SettledList).
        let shapes = per_resource(&mut resources, |_, output| {
            let mut shape = Shape::ALL;
            shape.visit_rearranging(output.root_mut());
            shape
        });
        let shape = shapes.into_iter().fold(Shape::ALL, Shape::and);
        (resources, Some(SettledList { shape }))
    } else {
        // A failing function's items are not used (see `evaluated`).
        drop_resources(outcome.items);
        (Vec::new(), None)
    };
    Ok(EvaluatedStep {
        output: Ok(output),
        results: outcome.results,
        stderr: outcome.stderr,
        exit_code: outcome.exit_code,
        settled,
    })
}

/// What a settled native step (`run_native_settled`) knows of its output
/// without another walk: its shape, found in the walk that rearranged
/// its head comments, and that its bookkeeping is still settled (the
/// builtin ignores it). A caller that hands the whole output on to the next
/// step, having at most claimed resources without a package path for its
/// package (a new or filled-in annotation, which neither fact depends on),
/// passes it to [`run_evaluator_owned`]: at a DFS root both are walks over
/// the whole tree.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SettledList {
    shape: Shape,
}

fn exit_status(exit_code: i32) -> Result<(), ExitFailure> {
    if exit_code == 0 {
        Ok(())
    } else {
        Err(ExitFailure)
    }
}

/// How a step's output gets its input's comments and key order back.
enum Restore {
    /// Parsed from the function's stdout: the full kyaml walks.
    Wire,
    /// A native builtin's output, edited on copies of the inputs: the walks,
    /// skipped for resources left unchanged.
    Native,
    /// A native builtin that edited the inputs themselves: only what does
    /// not depend on the input copy (document comments, keyed by resource
    /// id, go into the root's empty slots, as the walk's first copy does).
    InPlace(BTreeMap<String, [String; 3]>),
}

/// The wire items for `inputs`, by value ([`wire_item`] without the copy),
/// and the comments of each Document wrapper by the resource's id.
fn unwrap_documents(inputs: Vec<Node>) -> (Vec<Node>, BTreeMap<String, [String; 3]>) {
    let mut documents = BTreeMap::new();
    let items = inputs
        .into_iter()
        .map(|mut item| {
            if item.kind == NodeKind::Document && !item.content.is_empty() {
                let mut root = item.content.swap_remove(0);
                if let Some(id) = annotation(&root, resource::ID) {
                    documents.insert(
                        id.to_owned(),
                        [
                            item.take_head_comment(),
                            item.take_line_comment(),
                            item.take_foot_comment(),
                        ],
                    );
                }
                clear_empty_annotations_only(&mut root);
                root
            } else {
                clear_empty_annotations_only(&mut item);
                item
            }
        })
        .collect();
    (items, documents)
}

/// [`Restore::InPlace`] for one output resource.
fn restore_in_place(output: &mut Node, documents: &BTreeMap<String, [String; 3]>) {
    let Some(id) = annotation(output, resource::ID)
        .or_else(|| annotation(output, resource::LEGACY_ID))
        .map(str::to_owned)
    else {
        return;
    };
    if let Some([head, line, foot]) = documents.get(&id) {
        output.fill_empty_comments(head, line, foot);
    }
    rearrange_head_comments(output.root_mut());
    remove_annotation(output, resource::ID);
    remove_annotation(output, resource::LEGACY_ID);
}

/// The hydrator's view of a finished step.
fn evaluated(
    step: Result<StepOutput, StepError<ExitFailure>>,
    stderr: Vec<u8>,
    exit_code: i32,
) -> EvaluatedStep {
    let (output, results) = match step {
        Ok(step) => {
            let results = step.results.clone();
            (step.finish(), results)
        }
        Err(StepError::Function { results, .. }) => (Ok(Vec::new()), results),
        Err(StepError::Wire { error, .. }) => (Err(error), None),
    };
    EvaluatedStep {
        output,
        results,
        stderr,
        exit_code,
        settled: None,
    }
}

/// What differs between a wire step and its native run, as written bytes
/// (node positions and invisible style bits may differ), or `None`.
pub fn native_difference(
    wire: &Result<EvaluatedStep, EvalError>,
    native: &Result<EvaluatedStep, EvalError>,
) -> Option<String> {
    let (wire, native) = match (wire, native) {
        (Ok(wire), Ok(native)) => (wire, native),
        (wire, native) if wire == native => return None,
        (wire, native) => return Some(format!("wire {wire:?}, native {native:?}")),
    };
    let written = |step: &EvaluatedStep| {
        let output = match &step.output {
            Ok(items) => encode_output_list(items),
            Err(error) => format!("error: {error}"),
        };
        let results = step
            .results
            .as_ref()
            .map(|results| crate::yaml::to_string(results, crate::yaml::SeqIndent::Compact))
            .unwrap_or_default();
        (output, results, step.stderr.clone(), step.exit_code)
    };
    let (wire, native) = (written(wire), written(native));
    (wire != native).then(|| format!("wire {wire:?}\nnative {native:?}"))
}

/// The runner-side failure marker used by [`run_evaluator`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct ExitFailure;

impl std::fmt::Display for ExitFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("function failed")
    }
}

/// kyaml `PreprocessResourcesForInternalAnnotationMigration`, for the
/// resource at `position`: returns its snapshot.
fn prepare_migration(position: usize, input: &mut Node) -> Result<Snapshot, WireError> {
    kyaml_set_annotation(input, resource::MIGRATION_ID, &position.to_string());
    let snapshot = internal_annotations(input);
    copy_legacy_annotations(input);
    check_mismatched(input)?;
    Ok(snapshot)
}

/// Resource lists at least this long do their per-resource work on rayon:
/// a DFS root's steps see the whole tree, and its level has no other
/// package to run beside it.
const PARALLEL_FROM: usize = 64;

/// `f` on each resource with its position, in parallel for long lists;
/// the answers come back in order.
fn per_resource<T: Send>(
    resources: &mut [Node],
    f: impl Fn(usize, &mut Node) -> T + Sync + Send,
) -> Vec<T> {
    if resources.len() >= PARALLEL_FROM {
        resources
            .par_iter_mut()
            .enumerate()
            .map(|(position, node)| f(position, node))
            .collect()
    } else {
        resources
            .iter_mut()
            .enumerate()
            .map(|(position, node)| f(position, node))
            .collect()
    }
}

/// Drops a step's input copy, in parallel when it is long (freeing a whole
/// tree is a walk like any other).
fn drop_resources(resources: Vec<Node>) {
    if resources.len() >= PARALLEL_FROM {
        resources.into_par_iter().for_each(drop);
    }
}

/// The first error of per-resource results, in resource order.
fn first_error(results: Vec<Result<(), WireError>>) -> Result<(), WireError> {
    results.into_iter().collect()
}

/// kyaml `GetInternalAnnotations`: internal-prefixed annotations plus the
/// legacy path, index and id.
fn internal_annotations(node: &Node) -> Snapshot {
    let mut found = Snapshot::default();
    let Some(annotations) = node.root().get_path(&["metadata", "annotations"]) else {
        return found;
    };
    for (key, value) in annotations.pairs() {
        let name = key.value.as_str();
        let wanted = name.starts_with(INTERNAL_PREFIX)
            || name == resource::LEGACY_PATH
            || name == resource::LEGACY_INDEX
            || name == resource::LEGACY_ID;
        if wanted && value.is_scalar() && !found.contains_key(name) {
            found
                .0
                .push((name.to_owned(), value.value.as_str().to_owned()));
        }
    }
    found
}

/// An annotation's text, empty when absent (kyaml reads them into a map).
fn text<'a>(node: &'a Node, key: &str) -> &'a str {
    annotation(node, key).unwrap_or("")
}

/// kyaml `checkMismatchedAnnos`.
fn check_mismatched(node: &Node) -> Result<(), WireError> {
    let pairs = [
        (resource::PATH, resource::LEGACY_PATH, "path"),
        (resource::INDEX, resource::LEGACY_INDEX, "index"),
        (resource::ID, resource::LEGACY_ID, "id"),
    ];
    let annotations = resource::annotations(node);
    for (internal, legacy, what) in pairs {
        let internal = resource::annotation_in(annotations, internal);
        let legacy = resource::annotation_in(annotations, legacy);
        if !internal.is_empty() && !legacy.is_empty() && internal != legacy {
            return Err(WireError::MismatchedAnnotations(what));
        }
    }
    Ok(())
}

/// Step 4 of the filter: comments and order from the matching input, then
/// the ids removed.
///
/// `unchanged` is set for native runs, whose outputs are the inputs' own
/// clones: an output equal to its (unwrapped) input skips the walks.
fn restore_from_inputs(
    inputs: &[Node],
    outputs: &mut [Node],
    native: bool,
) -> Result<(), WireError> {
    first_error(per_resource(outputs, |_, output| {
        restore_one(inputs, output, native)
    }))
}

/// [`restore_from_inputs`] for one output resource.
fn restore_one(inputs: &[Node], output: &mut Node, native: bool) -> Result<(), WireError> {
    let id = annotation(output, resource::ID)
        .or_else(|| annotation(output, resource::LEGACY_ID))
        .map(str::to_owned);
    let Some(id) = id else {
        return Ok(());
    };
    let Some(input) = id
        .parse::<usize>()
        .ok()
        .and_then(|n| n.checked_sub(1))
        .and_then(|i| inputs.get(i))
        .filter(|input| text(input, resource::ID) == id)
    else {
        return Ok(());
    };
    let unchanged = native && input.kind != NodeKind::Document && Shape::of(input).plain_keys;
    if unchanged && input.same_content(output) {
        // Copying comments into empty slots and syncing key order are
        // no-ops between equal trees (folded scalars, which the copy
        // would restyle, never run natively); only the head-comment
        // rearrangement of sync_order acts on its own.
        rearrange_head_comments(output.root_mut());
    } else {
        copy_comments(input, output)?;
        sync_order(input, output)?;
    }
    remove_annotation(output, resource::ID);
    remove_annotation(output, resource::LEGACY_ID);
    Ok(())
}

/// kyaml `DefaultPathAnnotation` with an empty directory: every resource
/// without an internal path gets `[<namespace>/]<kind>_<name>.yaml` on both
/// path annotations.
fn set_default_paths(resources: &mut [Node]) -> Result<(), WireError> {
    first_error(per_resource(resources, |_, node| {
        copy_legacy_annotations(node);
        let root = node.root();
        if root.get("apiVersion").is_none()
            && root.get("kind").is_none()
            && root.get("metadata").is_none()
        {
            return Err(WireError::MissingMetadata);
        }
        if annotation(node, resource::PATH).is_some() {
            return Ok(());
        }
        let path = default_path(node);
        kyaml_set_annotation(node, resource::PATH, &path);
        kyaml_set_annotation(node, resource::LEGACY_PATH, &path);
        Ok(())
    }))
}

/// kyaml `CreatePathAnnotationValue("", meta)`.
pub fn default_path(node: &Node) -> String {
    let kind = resource::kind(node).unwrap_or("").to_lowercase();
    let name = resource::name(node).unwrap_or("");
    let namespace = resource::namespace(node).unwrap_or("");
    let file = format!("{kind}_{name}.yaml");
    if namespace.is_empty() {
        clean_path(&file)
    } else {
        clean_path(&format!("{namespace}/{file}"))
    }
}

/// kyaml `determineAnnotationsFormat`.
fn annotation_format(snapshots: &Snapshots) -> Result<(bool, bool), WireError> {
    if snapshots.is_empty() {
        return Ok((true, true));
    }
    let mut internal: Option<bool> = None;
    let mut legacy: Option<bool> = None;
    for annotations in snapshots.values() {
        let has = |key: &str| annotations.contains_key(key);
        let found_internal = has(resource::PATH) || has(resource::INDEX) || has(resource::ID);
        let found_legacy =
            has(resource::LEGACY_PATH) || has(resource::LEGACY_INDEX) || has(resource::LEGACY_ID);
        if !found_internal && !found_legacy {
            continue;
        }
        if *internal.get_or_insert(found_internal) != found_internal {
            return Err(WireError::InconsistentAnnotations);
        }
        if *legacy.get_or_insert(found_legacy) != found_legacy {
            return Err(WireError::InconsistentAnnotations);
        }
    }
    Ok((internal.unwrap_or(false), legacy.unwrap_or(false)))
}

/// kyaml `missingInternalOrLegacyAnnotations`.
fn fill_missing_counterparts(node: &mut Node) {
    let pairs = [
        (resource::PATH, resource::LEGACY_PATH),
        (resource::INDEX, resource::LEGACY_INDEX),
        (resource::ID, resource::LEGACY_ID),
    ];
    for (internal, legacy) in pairs {
        // One lookup of the mapping for both; allocate only to copy.
        let (internal_value, legacy_value) = {
            let annotations = resource::annotations(node);
            (
                resource::annotation_in(annotations, internal),
                resource::annotation_in(annotations, legacy),
            )
        };
        if internal_value.is_empty() && !legacy_value.is_empty() {
            let value = legacy_value.to_owned();
            kyaml_set_annotation(node, internal, &value);
        } else if legacy_value.is_empty() && !internal_value.is_empty() {
            let value = internal_value.to_owned();
            kyaml_set_annotation(node, legacy, &value);
        }
    }
}

/// kyaml `checkAnnotationsAltered`: compares path and index with the
/// snapshot taken before the call and propagates a one-sided change.
fn reconcile_changed(node: &mut Node, snapshots: &Snapshots) -> Result<(), WireError> {
    let Some(original) = snapshots.get(text(node, resource::MIGRATION_ID)) else {
        return Ok(());
    };
    let pairs = [
        (resource::PATH, resource::LEGACY_PATH, "path"),
        (resource::INDEX, resource::LEGACY_INDEX, "index"),
    ];
    for (internal_key, legacy_key, what) in pairs {
        let internal = text(node, internal_key).to_owned();
        let legacy = text(node, legacy_key).to_owned();
        let original = original
            .get(internal_key)
            .or_else(|| original.get(legacy_key))
            .cloned()
            .unwrap_or_default();
        if original.is_empty() {
            continue;
        }
        if original != internal && original != legacy && internal != legacy {
            return Err(WireError::MismatchedAnnotations(what));
        } else if original != internal {
            kyaml_set_annotation(node, legacy_key, &internal);
        } else if original != legacy {
            kyaml_set_annotation(node, internal_key, &legacy);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::{FunctionCall, Snapshot, Snapshots, default_path, settled};

    /// A list is settled when every resource carries path and index on both
    /// annotations with one value and no id; the first entry of a repeated
    /// key is the one read.
    #[test]
    fn settled_lists_have_matching_bookkeeping_and_no_ids() {
        let resource = |annotations: &str| {
            let text = format!("kind: A\nmetadata:\n  annotations:\n{annotations}");
            crate::yaml::parse_document(&text).unwrap().unwrap()
        };
        let both = "    internal.config.kubernetes.io/path: a.yaml\n    config.kubernetes.io/path: a.yaml\n    internal.config.kubernetes.io/index: '0'\n    config.kubernetes.io/index: '0'\n";
        let call = FunctionCall {
            function_config: None,
            in_pipeline: true,
        };
        assert!(settled(&[resource(both)], &call));
        for (extra, why) in [
            ("    internal.config.kubernetes.io/id: '1'\n", "an id"),
            ("    config.k8s.io/id: '1'\n", "a legacy id"),
            (
                "    internal.config.kubernetes.io/annotations-migration-resource-id: '1'\n",
                "a migration id",
            ),
        ] {
            assert!(
                !settled(&[resource(&format!("{both}{extra}"))], &call),
                "{why}"
            );
        }
        let changed = both.replace(
            "config.kubernetes.io/path: a.yaml\n    internal",
            "config.kubernetes.io/path: b.yaml\n    internal",
        );
        assert!(!settled(&[resource(&changed)], &call), "paths differ");
        let no_index = both.replace("    config.kubernetes.io/index: '0'\n", "");
        assert!(
            !settled(&[resource(&no_index)], &call),
            "legacy index missing"
        );
        // A repeated key: its first value is read.
        let repeated = format!("{both}    config.kubernetes.io/path: other.yaml\n");
        assert!(
            settled(&[resource(&repeated)], &call),
            "later value ignored"
        );
        let first_differs = format!("    config.kubernetes.io/path: other.yaml\n{both}");
        assert!(
            !settled(&[resource(&first_differs)], &call),
            "first value read"
        );
    }

    /// A migration id finds its snapshot only in the exact text kpt wrote
    /// (kyaml keys a map by it), and the first value of a key wins.
    #[test]
    fn snapshots_are_found_by_the_exact_migration_id() {
        let first = Snapshot(vec![("a".to_owned(), "1".to_owned())]);
        let snapshots = Snapshots(vec![None, Some(first.clone()), None]);
        assert_eq!(snapshots.get("1"), Some(&first));
        for id in [
            "0",
            "2",
            "3",
            "01",
            "+1",
            " 1",
            "",
            "1a",
            "18446744073709551616",
        ] {
            assert_eq!(snapshots.get(id), None, "{id:?}");
        }
        assert!(!snapshots.is_empty());
        assert!(Snapshots(vec![None, None]).is_empty());
        assert_eq!(first.get("a").map(String::as_str), Some("1"));
        assert!(!first.contains_key("b"));
    }
    use crate::krm::resource::clean_path;
    use crate::yaml::node::{Node, tag};

    fn resource(kind: &str, name: &str, namespace: Option<&str>) -> Node {
        let mut metadata = Node::new_mapping();
        metadata.set("name", Node::new_scalar(tag::STR, name));
        if let Some(namespace) = namespace {
            metadata.set("namespace", Node::new_scalar(tag::STR, namespace));
        }
        let mut root = Node::new_mapping();
        root.set("apiVersion", Node::new_scalar(tag::STR, "v1"));
        root.set("kind", Node::new_scalar(tag::STR, kind));
        root.set("metadata", metadata);
        root
    }

    #[test]
    fn default_paths() {
        assert_eq!(
            default_path(&resource("Deployment", "Gen-One", Some("prod"))),
            "prod/deployment_Gen-One.yaml"
        );
        assert_eq!(
            default_path(&resource("ConfigMap", "gen2", None)),
            "configmap_gen2.yaml"
        );
        assert_eq!(clean_path("a/../../b"), "../b");
        assert_eq!(clean_path("./x//y"), "x/y");
    }
}
