//! A package's pipeline run over [items](super::item), for pipelines whose
//! every step is a builtin that decomposes
//! ([`crate::runtime::builtin::per_item`]): each resource goes through the
//! whole chain of steps on its own, the steps' results are reduced from
//! the resources' parts, and the output's order is the one the SDK's sorts
//! give. Resources are taken a package's group at a time (the resources of
//! one package in the input, in order), and each group's pass through the
//! chain is memoised by the caller ([`ItemSource`]): an ancestor that runs
//! again over a whole tree passes again only the groups that changed, and
//! a group that a descendant's identical chain left as it found it (its
//! output is a fixed point) is found under the same key at every level.
//!
//! The run is exactly the whole-list run's, which a verification mode
//! checks: anything that would take another path there (a resource the
//! settled native path cannot take, a part that asks for the whole list,
//! validators, selectors, `configPath`, tracing, a cancelled render) makes
//! [`run_items`] decline, and the caller runs the pipeline over nodes.

use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use rayon::prelude::*;

use super::item::{Digest, Item, ItemFlags, RootPath, item_of, list_digest};
use super::printer::Printer;
use super::results::{FnResult, ResultItems, StepRecord};
use super::{RenderOptions, Runtimes, bridge};
use crate::krm::resource::clean_path;
use crate::pkg::kptfile::{self, Kptfile};
use crate::runtime::FunctionTarget;
use crate::runtime::builtin::per_item::{ItemStep, Partial};
use crate::runtime::function_filter::{NativeMode, settle_output};
use crate::yaml::node::Node;

/// One resource's pass through a package's chain of steps.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Chained {
    /// The resource before the first step.
    pub(crate) input: Digest,
    /// The resource after the last step.
    pub(crate) output: Item,
    /// Its part of each step's results.
    pub(crate) partials: Vec<Partial>,
    /// Its sort key after each step, when the step changed it.
    pub(crate) keys: Vec<Option<String>>,
}

/// What a run over items takes from the engine: resources it holds only by
/// digest, and the memo of groups passed through a chain.
pub(crate) trait ItemSource: Sync {
    /// The resource of `item`, to edit: the run puts back what it makes
    /// ([`ItemSource::keep`]).
    fn node(&self, item: &Item) -> Option<Node>;
    /// The decomposed form of `builtin` under a `configMap:` config (the
    /// source may keep them: the same few recur in every package).
    fn item_step(
        &self,
        builtin: crate::runtime::builtin::Builtin,
        config: &std::collections::BTreeMap<String, String>,
    ) -> Option<Arc<ItemStep>> {
        let node = (!config.is_empty()).then(|| bridge::config_map_node(config));
        ItemStep::new(builtin, node.as_ref())
            .ok()
            .flatten()
            .map(Arc::new)
    }
    /// The pass of a group through a chain, by [`chain_key`].
    fn chained(&self, key: &Digest) -> Option<Vec<Chained>>;
    /// Keeps a group's pass through a chain.
    fn put_chained(&self, key: &Digest, chained: &[Chained]);
    /// Keeps a resource the run made (its relocatable form, and the node).
    fn keep(&self, item: &Item, blob: Vec<u8>, node: Node);
    /// The key of a group's pass through the chain described by `chain`.
    fn chain_key(&self, chain: &str, group: &Digest) -> Digest;
}

/// One package's run over items.
pub(crate) struct ItemJob<'a> {
    /// The root as package paths spell it.
    pub(crate) root_path: &'a RootPath,
    /// The package.
    pub(crate) pkg: &'a Path,
    /// Its Kptfile.
    pub(crate) kptfile: &'a Kptfile,
    /// Its own resources, then its subpackages' outputs.
    pub(crate) input: &'a [Item],
    /// The package's name as the log prints it.
    pub(crate) display: &'a str,
}

/// A run over items, as the engine records it.
#[derive(Debug)]
pub(crate) struct ItemRun {
    /// The output.
    pub(crate) output: Vec<Item>,
    /// What the run printed.
    pub(crate) log: Vec<u8>,
    /// Mutation steps.
    pub(crate) mutation_steps: Vec<StepRecord>,
    /// Every function call.
    pub(crate) fn_results: Vec<FnResult>,
    /// Functions that ran.
    pub(crate) executed: usize,
    /// Resource groups passed through the chain here (the rest were
    /// found in the memo).
    pub(crate) groups_run: usize,
}

/// A step ready to run over items.
struct Step<'a> {
    function: &'a kptfile::Function,
    image: String,
    step: Arc<ItemStep>,
}

/// What every input resource must be for the settled native path.
const SETTLED: u8 = ItemFlags::KRM
    | ItemFlags::SURVIVES_WIRE
    | ItemFlags::PLAIN_KEYS
    | ItemFlags::SETTLED
    | ItemFlags::HAS_PACKAGE;

/// Runs `job`'s pipeline over items, or `None` when it must run over nodes
/// (see the module doc).
pub(crate) fn run_items(
    job: &ItemJob<'_>,
    options: &RenderOptions,
    runtimes: Runtimes<'_>,
    source: &dyn ItemSource,
) -> Option<ItemRun> {
    if options.native == NativeMode::Off || options.trace.is_some() || options.cancel.is_cancelled()
    {
        return None;
    }
    let pipeline = &job.kptfile.pipeline;
    if !pipeline.validators.is_empty() {
        return None;
    }
    if pipeline.mutators.is_empty() {
        // kpt's KRM check, then the input is the output.
        if !job.input.iter().all(|item| item.meta.has(ItemFlags::KRM)) {
            return None;
        }
        let mut log = Vec::new();
        Printer::new(&mut log, options.truncate_output).package(job.display);
        return Some(ItemRun {
            output: job.input.to_vec(),
            log,
            mutation_steps: Vec::new(),
            fn_results: Vec::new(),
            executed: 0,
            groups_run: 0,
        });
    }
    if !job.input.iter().all(|item| item.meta.has(SETTLED)) || !paths_hold(job.input) {
        tracing::debug!(package = %job.pkg.display(), "over nodes: an input resource is not settled");
        return None;
    }
    let Some(steps) = prepare(pipeline, options, runtimes, source) else {
        tracing::debug!(package = %job.pkg.display(), "over nodes: a step does not decompose");
        return None;
    };
    let chain = describe(&steps);
    let started = Instant::now();
    // Each package's resources in the input, in order.
    let mut groups: Vec<(&str, Vec<usize>)> = Vec::new();
    let mut by_package: std::collections::HashMap<&str, usize> = std::collections::HashMap::new();
    for (index, item) in job.input.iter().enumerate() {
        let package = item.meta.package.as_str();
        let group = *by_package.entry(package).or_insert_with(|| {
            groups.push((package, Vec::new()));
            groups.len() - 1
        });
        groups[group].1.push(index);
    }
    // A group is keyed by the set of its resources, not their order: a
    // package's own resources read back from the files a render wrote come
    // in file order, its output in the SDK's.
    let passes: Vec<Option<(Vec<Chained>, bool)>> = groups
        .par_iter()
        .map(|(_, members)| {
            let mut distinct: Vec<&Item> = members.iter().map(|&i| &job.input[i]).collect();
            distinct.sort_by_key(|item| item.digest);
            distinct.dedup_by(|a, b| a.digest == b.digest);
            let digest = list_digest(distinct.iter().map(|item| &item.digest));
            let key = source.chain_key(&chain, &digest);
            let found = source.chained(&key).filter(|chained| {
                chained.len() == distinct.len()
                    && chained
                        .iter()
                        .zip(&distinct)
                        .all(|(one, item)| one.input == item.digest)
            });
            if let Some(chained) = found {
                return Some((chained, false));
            }
            let chained = distinct
                .iter()
                .map(|item| pass(item, &steps, job.root_path, source))
                .collect::<Option<Vec<_>>>()?;
            source.put_chained(&key, &chained);
            // The chain run again over its own output leaves it as it is:
            // an ancestor with the same chain finds the output group here.
            if let Some(again) = fixed_points(&steps, &chained) {
                let digest = list_digest(again.iter().map(|one| &one.input));
                source.put_chained(&source.chain_key(&chain, &digest), &again);
            }
            Some((chained, true))
        })
        .collect();
    let mut chained: Vec<Option<Chained>> = vec![None; job.input.len()];
    let mut groups_run = 0;
    for ((_, members), pass) in groups.iter().zip(passes) {
        let (pass, ran) = pass?;
        groups_run += usize::from(ran);
        for &i in members {
            let digest = job.input[i].digest;
            let at = pass.binary_search_by(|one| one.input.cmp(&digest)).ok()?;
            chained[i] = Some(pass[at].clone());
        }
    }
    let chained: Vec<Chained> = chained.into_iter().collect::<Option<_>>()?;
    if chained
        .iter()
        .any(|one| one.partials.iter().any(|p| p.whole_list) || !one.output.meta.has(SETTLED))
    {
        return None;
    }
    let output_ok: Vec<&Item> = chained.iter().map(|one| &one.output).collect();
    if !paths_hold_refs(&output_ok) {
        return None;
    }
    // Each step's input order, and its results reduced in that order.
    let mut order: Vec<usize> = (0..job.input.len()).collect();
    let mut results = Vec::with_capacity(steps.len());
    for (k, step) in steps.iter().enumerate() {
        let reduced = step
            .step
            .reduce(order.iter().map(|&i| &chained[i].partials[k]));
        results.push(reduced);
        if step.step.sorts() {
            let key = |i: usize| -> &str {
                chained[i].keys[..=k]
                    .iter()
                    .rev()
                    .find_map(|key| key.as_deref())
                    .unwrap_or(&job.input[i].meta.sort_key)
            };
            order.sort_by(|&a, &b| key(a).cmp(key(b)));
        }
    }
    let elapsed = started.elapsed() / u32::try_from(steps.len().max(1)).unwrap_or(1);
    let mut log = Vec::new();
    let mut printer = Printer::new(&mut log, options.truncate_output);
    printer.package(job.display);
    let mut mutation_steps = Vec::with_capacity(steps.len());
    let mut fn_results = Vec::with_capacity(steps.len());
    for (step, results) in steps.iter().zip(results) {
        let items = ResultItems::from_node(results.as_ref()).ok()?;
        printer.running(&step.image, None, Some(job.display));
        printer.pass(&step.image, elapsed, &items.lines(), "");
        mutation_steps.push(StepRecord {
            name: step.function.name.clone(),
            image: step.image.clone(),
            results: items.clone(),
            ..StepRecord::default()
        });
        fn_results.push(FnResult {
            image: step.image.clone(),
            results: items,
            ..FnResult::default()
        });
    }
    printer.text("\n");
    let output = order.iter().map(|&i| chained[i].output.clone()).collect();
    Some(ItemRun {
        output,
        log,
        mutation_steps,
        fn_results,
        executed: steps.len(),
        groups_run,
    })
}

/// The passes of a chain's outputs through the chain again, known without
/// running it: when every step is declared idempotent and no two steps
/// write the same things (one could undo the other), each output is a
/// fixed point. Sorted by digest, duplicates dropped, as a group's passes.
fn fixed_points(steps: &[Step<'_>], chained: &[Chained]) -> Option<Vec<Chained>> {
    let mut writes: Vec<&str> = steps.iter().map(|step| step.step.writes()).collect();
    writes.sort_unstable();
    if writes.windows(2).any(|pair| pair[0] == pair[1]) {
        return None;
    }
    let mut again = chained
        .iter()
        .map(|one| {
            let partials = steps
                .iter()
                .zip(&one.partials)
                .map(|(step, first)| step.step.again(first))
                .collect::<Option<Vec<_>>>()?;
            Some(Chained {
                input: one.output.digest,
                output: one.output.clone(),
                partials,
                keys: vec![None; steps.len()],
            })
        })
        .collect::<Option<Vec<_>>>()?;
    again.sort_by_key(|entry| entry.input);
    again.dedup_by(|a, b| a.input == b.input);
    Some(again)
}

/// The pipeline's steps, when each decomposes.
fn prepare<'a>(
    pipeline: &'a kptfile::Pipeline,
    options: &RenderOptions,
    runtimes: Runtimes<'_>,
    source: &dyn ItemSource,
) -> Option<Vec<Step<'a>>> {
    pipeline
        .mutators
        .iter()
        .map(|function| {
            if function.image.is_empty()
                || !function.tag.is_empty()
                || !function.config_path.is_empty()
                || function.has_selection()
            {
                return None;
            }
            let image = kptfile::with_default_tag(&kptfile::resolve_image(
                &function.image,
                &options.image_prefix,
            ));
            let builtin = runtimes.image.native(FunctionTarget::Image(&image))?;
            if !(builtin.edits_in_place() && builtin.ignores_bookkeeping()) {
                return None;
            }
            let step = source.item_step(builtin, &function.config_map)?;
            Some(Step {
                function,
                image,
                step,
            })
        })
        .collect()
}

/// What identifies a chain of steps for the memo: each step's image and
/// config.
fn describe(steps: &[Step<'_>]) -> String {
    let mut description = String::new();
    for step in steps {
        description.push_str(&step.image);
        description.push('\0');
        for (key, value) in &step.function.config_map {
            description.push_str(&format!("{}:{key}={}:{value}\0", key.len(), value.len()));
        }
        description.push('\n');
    }
    description
}

/// One resource through the chain; `None` when its node cannot be had.
fn pass(
    item: &Item,
    steps: &[Step<'_>],
    root: &RootPath,
    source: &dyn ItemSource,
) -> Option<Chained> {
    let mut node = source.node(item)?.into_root();
    let mut partials = Vec::with_capacity(steps.len());
    let mut keys = Vec::with_capacity(steps.len());
    let mut key = item.meta.sort_key.clone();
    let mut shape_holds = true;
    for step in steps {
        let partial = step.step.map(&mut node);
        let (survives_wire, plain_keys) = settle_output(&mut node);
        shape_holds &= survives_wire && plain_keys;
        partials.push(partial);
        let (api_version, kind, namespace, name) = crate::krm::resource::sdk_identity(&node);
        let now = format!("{api_version} {kind} {namespace} {name}");
        keys.push((now != key).then(|| now.clone()));
        key = now;
    }
    let (mut output, blob) = item_of(&node, root);
    if !shape_holds {
        // The next step would not have taken the settled path: the whole
        // list runs over nodes.
        let mut meta = (*output.meta).clone();
        meta.flags &= !ItemFlags::SURVIVES_WIRE;
        output.meta = Arc::new(meta);
    }
    // Put back (the input's node was taken), or kept as the new resource.
    source.keep(&output, blob, node);
    Some(Chained {
        input: item.digest,
        output,
        partials,
        keys,
    })
}

/// kpt's path invariants over items: no path leaves its package, and no
/// two resources share package, path and index.
fn paths_hold(items: &[Item]) -> bool {
    paths_hold_refs(&items.iter().collect::<Vec<_>>())
}

fn paths_hold_refs(items: &[&Item]) -> bool {
    let mut seen = std::collections::HashSet::with_capacity(items.len());
    items.iter().all(|item| {
        let cleaned = clean_path(&item.meta.path);
        !(cleaned == ".." || cleaned.starts_with("../"))
            && seen.insert((
                item.meta.package.as_str(),
                cleaned,
                item.meta.index.as_str(),
            ))
    })
}
