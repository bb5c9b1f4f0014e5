//! Applying a [`RenderOutcome`]: what kpt's `Renderer.Execute` does after
//! hydration — paths made relative to the root, the attribution annotation,
//! files written and pruned (or the list sent to stdout), the summary line,
//! `--results-dir`, and the root Kptfile's `status` rewrite. A failed render
//! writes only the Kptfile status (unless save-on-render-failure is set).

use std::collections::BTreeSet;
use std::io::Write;
use std::path::{Path, PathBuf};

use rayon::prelude::*;

use super::results::{StepRecord, result_list_node};
use super::{HydrateError, RenderOutcome, Report, Resources, bridge};
use crate::krm::resource;
use crate::krm::resource::clean_path;
use crate::krm::resource_list::encode_output_list_remembered;
use crate::pkg::commit;
use crate::pkg::kptfile::{self, Condition, Kptfile};
use crate::yaml::SeqIndent;
use crate::yaml::node::Style;

/// Where rendered resources go.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Output {
    /// Back into the package (no `-o`).
    InPlace,
    /// `-o stdout`: one ResourceList on stdout.
    Stdout,
    /// `-o unwrap`: the resources as a multi-document stream on stdout.
    Unwrap,
    /// `-o DIR`: a new directory.
    Dir(PathBuf),
    /// `--check`: rendered as in place, but nothing is written, not even
    /// the status; what an in-place render would change (apart from the
    /// Kptfile's status) is left in [`Written::planned`].
    Check,
}

/// A failure while writing the outcome.
#[derive(Debug, thiserror::Error)]
pub enum ApplyError {
    /// The render itself failed.
    #[error("{0}")]
    Render(HydrateError),
    /// Writing files failed.
    #[error("{message}")]
    Write {
        /// kpt's text.
        message: String,
    },
}

impl ApplyError {
    /// What the CLI prints for this error.
    pub fn report(&self) -> Report {
        match self {
            ApplyError::Render(error) => error.report.clone(),
            ApplyError::Write { message } => Report::Error(message.clone()),
        }
    }

    /// The place in a file the error points at, if any.
    pub fn location(&self) -> Option<&crate::pkg::reader::SourceLocation> {
        match self {
            ApplyError::Render(error) => error.location.as_deref(),
            ApplyError::Write { .. } => None,
        }
    }
}

const CNRM_ANNOTATION: &str = "cnrm.cloud.google.com/blueprint";

/// Applies `outcome`: writes files (or prints to `stdout`), the status and
/// the results file, and prints kpt's closing lines to `log`.
///
/// In place, everything the render changes in the package — rendered
/// files, pruned files and the root Kptfile's status — is collected first
/// and written as one atomic commit (`crate::pkg::commit`), so a
/// crash leaves the whole old or the whole new package. The caller holds
/// the package lock (`crate::lifecycle::open_package`).
pub fn apply(
    outcome: RenderOutcome,
    output: &Output,
    results_dir: Option<&Path>,
    stdout: &mut dyn Write,
    log: &mut dyn Write,
) -> Result<(), ApplyError> {
    apply_recording(
        outcome,
        output,
        results_dir,
        stdout,
        log,
        &mut Written::default(),
    )
}

/// The files an apply wrote in place, each with the digest of the bytes it
/// was given: a watcher tells its own writes from the user's by them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Written {
    /// Absolute path and blake3 of the bytes written, in commit order.
    pub files: Vec<(PathBuf, blake3::Hash)>,
    /// The bytes written in all.
    pub bytes: u64,
    /// Under [`Output::Check`], what an in-place render would have
    /// committed (only files whose bytes differ).
    pub planned: Option<commit::Changes>,
    /// What a successful in-place render committed (the engine records the
    /// tree it left, so that the next render finds it).
    pub committed: Option<commit::Changes>,
}

impl Written {
    fn record(&mut self, root: &Path, changes: &commit::Changes) {
        self.bytes += changes
            .writes()
            .values()
            .map(|bytes| bytes.len() as u64)
            .sum::<u64>();
        self.files.extend(
            changes
                .writes()
                .iter()
                .map(|(relative, bytes)| (root.join(relative), blake3::hash(bytes))),
        );
    }
}

/// [`apply`], adding to `written` every file committed in place (the
/// status of a failed render included).
pub fn apply_recording(
    outcome: RenderOutcome,
    output: &Output,
    results_dir: Option<&Path>,
    stdout: &mut dyn Write,
    log: &mut dyn Write,
    written: &mut Written,
) -> Result<(), ApplyError> {
    let _span = tracing::info_span!("apply").entered();
    let in_place = matches!(output, Output::InPlace | Output::Check);
    let check = *output == Output::Check;
    let root = outcome.root.clone();
    if let Some(error) = &outcome.error
        && !outcome.save_on_failure
    {
        if in_place && !check {
            commit_status_only(&root, &outcome, Some(error), written);
        }
        save_results(results_dir, &outcome, log);
        return Err(ApplyError::Render(error.clone()));
    }
    let mut outcome = outcome;
    let attribute = outcome.attribution;
    let resources = match outcome.resources.take() {
        // A list the engine still holds goes to stdout without a copy: only
        // each item's annotations are copied and adjusted.
        Some(Resources::Shared(shared)) if *output == Output::Stdout && outcome.error.is_none() => {
            let items = shared.run.output.as_deref().unwrap_or_default();
            let adjusted = |item: &crate::yaml::node::Node| {
                let path = adjusted_path(&root, item)?;
                let mut values = vec![
                    (resource::PATH, path.clone()),
                    (resource::LEGACY_PATH, path),
                ];
                if let Some(value) = attribution(item).filter(|_| attribute) {
                    values.push((CNRM_ANNOTATION, value));
                }
                Ok(values)
            };
            let text = encode_output_list_remembered(items, adjusted, &shared.texts)
                .map_err(|message| ApplyError::Write { message })?;
            let _ = stdout.write_all(text.as_bytes());
            let _ = stdout.flush();
            save_results(results_dir, &outcome, log);
            return Ok(());
        }
        Some(resources) => resources,
        None => Resources::Owned(Vec::new()),
    };
    let (mut resources, planned) = match resources {
        Resources::Files(changes) => (Vec::new(), Some(changes)),
        other => (other.into_owned(), None),
    };
    if let Some(planned) = planned.filter(|_| in_place) {
        return commit_planned(outcome, planned, check, results_dir, log, written);
    }
    if let Err(message) = adjust_paths(&root, &mut resources) {
        if in_place && !check {
            let error = HydrateError::plain(&root, &message, Report::Error(message.clone()));
            commit_status_only(&root, &outcome, Some(&error), written);
        }
        return Err(ApplyError::Write { message });
    }
    // The files the render writes (only pruning in place needs them).
    let output_files: BTreeSet<String> = if in_place {
        resources
            .iter()
            .map(|r| {
                resource::annotation(r, resource::PATH)
                    .unwrap_or("")
                    .to_owned()
            })
            .collect()
    } else {
        BTreeSet::new()
    };
    if attribute {
        add_attribution(&mut resources);
    }
    if in_place {
        // Reached only without an error or with save-on-render-failure.
        let mut changes =
            crate::pkg::writer::plan_package(&root, &resources, &[]).map_err(|error| {
                ApplyError::Write {
                    message: format!("failed to save resources: {error}"),
                }
            })?;
        if outcome.error.is_none() {
            for file in outcome.input_files.difference(&output_files) {
                if root.join(file).exists() {
                    changes.delete(file.clone());
                }
            }
        }
        if check {
            // The status says how the last render went, not what it made:
            // a second render rewrites it even on a rendered tree.
            written.planned = Some(changes);
        } else {
            stage_status(&root, &outcome, outcome.error.as_ref(), &mut changes);
            commit::commit(&root, &changes, outcome.durability).map_err(|error| {
                ApplyError::Write {
                    message: format!("failed to save resources: {error}"),
                }
            })?;
            written.record(&root, &changes);
            if outcome.error.is_none() {
                written.committed = Some(changes);
            }
        }
        let summary = if outcome.error.is_none() {
            format!(
                "Successfully executed {} function(s) in {} package(s).\n",
                outcome.executed, outcome.n_packages
            )
        } else if outcome.executed == 0 {
            format!(
                "Failed to execute any functions in {} package(s).\n",
                outcome.n_packages
            )
        } else {
            format!(
                "Partially executed {} function(s) in {} package(s).\n",
                outcome.executed, outcome.n_packages
            )
        };
        let _ = log.write_all(summary.as_bytes());
    } else if outcome.error.is_none() {
        let text = match output {
            Output::Stdout => {
                // Written as encoded: the list is the whole tree.
                let _ = bridge::write_resource_list_owned(resources, stdout);
                String::new()
            }
            Output::Unwrap => bridge::unwrap_text(&resources),
            Output::Dir(dir) => {
                write_out_dir(dir, &resources, outcome.durability)?;
                String::new()
            }
            Output::InPlace | Output::Check => String::new(),
        };
        let _ = stdout.write_all(text.as_bytes());
        let _ = stdout.flush();
    }
    save_results(results_dir, &outcome, log);
    if let Some(error) = &outcome.error {
        return Err(ApplyError::Render(error.clone()));
    }
    Ok(())
}

/// The in-place end of a render whose file changes the engine planned:
/// the status, the commit (or, under `--check`, the plan kept), the
/// summary line and the results file.
fn commit_planned(
    outcome: RenderOutcome,
    mut changes: commit::Changes,
    check: bool,
    results_dir: Option<&Path>,
    log: &mut dyn Write,
    written: &mut Written,
) -> Result<(), ApplyError> {
    let root = outcome.root.clone();
    if check {
        written.planned = Some(changes);
    } else {
        stage_status(&root, &outcome, None, &mut changes);
        commit::commit(&root, &changes, outcome.durability).map_err(|error| ApplyError::Write {
            message: format!("failed to save resources: {error}"),
        })?;
        written.record(&root, &changes);
        written.committed = Some(changes);
    }
    let _ = writeln!(
        log,
        "Successfully executed {} function(s) in {} package(s).",
        outcome.executed, outcome.n_packages
    );
    save_results(results_dir, &outcome, log);
    Ok(())
}

/// What the writer does to resources before writing them into files:
/// paths made relative to the root, package paths removed, and kpt's
/// attribution when on.
pub(crate) fn prepare_for_files(
    root: &Path,
    resources: &mut [crate::yaml::Node],
    attribution: bool,
) -> Result<(), String> {
    adjust_paths(root, resources)?;
    if attribution {
        add_attribution(resources);
    }
    Ok(())
}

/// A failed render writes only the root Kptfile's status; kpt ignores a
/// failure to write it, and so do we.
fn commit_status_only(
    root: &Path,
    outcome: &RenderOutcome,
    error: Option<&HydrateError>,
    written: &mut Written,
) {
    let mut changes = commit::Changes::default();
    stage_status(root, outcome, error, &mut changes);
    if commit::commit(root, &changes, outcome.durability).is_ok() {
        written.record(root, &changes);
    }
}

/// kpt's `adjustRelPath`: paths relative to the root, package-path removed.
fn adjust_paths(root: &Path, resources: &mut [crate::yaml::Node]) -> Result<(), String> {
    // A DFS root's output is the whole tree: long lists on rayon.
    if resources.len() >= 256 {
        let results: Vec<Result<(), String>> = resources
            .par_iter_mut()
            .map(|node| adjust_path(root, node))
            .collect();
        return results.into_iter().collect();
    }
    resources
        .iter_mut()
        .try_for_each(|node| adjust_path(root, node))
}

/// [`adjust_paths`] for one resource.
fn adjust_path(root: &Path, node: &mut crate::yaml::Node) -> Result<(), String> {
    let new_path = adjusted_path(root, node)?;
    resource::set_annotation(node, resource::PATH, &new_path, Style::SINGLE_QUOTED);
    resource::set_annotation(node, resource::LEGACY_PATH, &new_path, Style::SINGLE_QUOTED);
    resource::remove_annotation(node, resource::PACKAGE_PATH);
    Ok(())
}

/// A resource's path relative to the root: its package's path joined with
/// its own.
fn adjusted_path(root: &Path, node: &crate::yaml::Node) -> Result<String, String> {
    let pkg_path = resource::annotation(node, resource::PACKAGE_PATH).unwrap_or("");
    let path = resource::annotation(node, resource::PATH).unwrap_or("");
    if pkg_path.is_empty() {
        return Ok(path.to_owned());
    }
    let pkg = Path::new(pkg_path);
    let rel = pkg.strip_prefix(root).map_err(|_| {
        format!(
            "subpackage {:?} is not a descendant of {:?}",
            pkg_path,
            root.display().to_string()
        )
    })?;
    // Go's filepath.Join(rel, Clean(path)) with rel "." for the root:
    // an absolute resource path ends up inside the package.
    let rel = rel.to_string_lossy();
    let rel = if rel.is_empty() { ".".into() } else { rel };
    Ok(clean_path(&format!("{rel}/{}", clean_path(path))))
}

/// Every resource of the package tree at `root` with root-relative paths
/// (`fn source`).
pub(crate) fn source_resources(root: &Path) -> Result<Vec<crate::yaml::Node>, String> {
    let mut resources = Vec::new();
    let mut pending = vec![root.to_path_buf()];
    while let Some(pkg) = pending.pop() {
        resources.extend(bridge::read_local_resources(&pkg).map_err(|failure| failure.0)?);
        let mut subs =
            crate::pkg::tree::direct_subpackages(&pkg).map_err(|error| error.to_string())?;
        subs.reverse();
        pending.extend(subs);
    }
    adjust_paths(root, &mut resources)?;
    // kpt's `fn source` reads the whole tree in one filepath.Walk, i.e. in
    // lexical order of path components (a subpackage's files sit between
    // its parent's files by name), not package by package. Stable, so a
    // file's resources keep their index order.
    resources.sort_by_cached_key(|node| {
        resource::annotation(node, resource::PATH)
            .unwrap_or("")
            .split('/')
            .map(str::to_owned)
            .collect::<Vec<_>>()
    });
    Ok(resources)
}

/// kpt's attribution: Config Connector resources get the `fn` group recorded in
/// `cnrm.cloud.google.com/blueprint`, single-quoted as kyaml's
/// `SetAnnotation` writes every value (Porch's `simple-render` case).
fn add_attribution(resources: &mut [crate::yaml::Node]) {
    for node in resources.iter_mut() {
        if let Some(value) = attribution(node) {
            resource::replace_annotation(node, CNRM_ANNOTATION, &value, Style::SINGLE_QUOTED);
        }
    }
}

/// The attribution annotation's value for `node`, when it is a Config
/// Connector resource with metadata (kpt sets it, single-quoted, even
/// when the value stays as it was).
fn attribution(node: &crate::yaml::Node) -> Option<String> {
    if !resource::api_version(node).is_some_and(|v| v.contains(".cnrm.")) {
        return None;
    }
    let metadata = node.root().get("metadata")?;
    if metadata.content.is_empty() {
        return None;
    }
    let current = resource::annotation(node, CNRM_ANNOTATION).unwrap_or("");
    Some(record_action(current, "fn"))
}

/// kpt's `recordAction` (`internal/util/attribution`): the command group
/// joins the annotation's `krm-...` part (`krm-pkg` with `fn` is
/// `krm-pkg-fn`), or a `krm-<group>` part is added. The groups are kept in
/// kpt's order, and kpt's quirk is kept too: the parts it rebuilds share
/// one list, so a second `krm` part repeats the first one's groups.
fn record_action(current: &str, group: &str) -> String {
    if current.is_empty() {
        return format!("krm-{group}");
    }
    if !current.contains("krm-") {
        return format!("{current},krm-{group}");
    }
    let mut parts: Vec<String> = current.split(',').map(str::to_owned).collect();
    let mut krm = vec!["krm"];
    for part in &mut parts {
        if part.contains("krm") {
            for known in ["pkg", "fn", "live"] {
                if part.contains(known) || group == known {
                    krm.push(known);
                }
            }
            *part = krm.join("-");
        }
    }
    parts.join(",")
}

/// `-o DIR`: the directory appears complete or not at all.
fn write_out_dir(
    dir: &Path,
    resources: &[crate::yaml::Node],
    durability: commit::Durability,
) -> Result<(), ApplyError> {
    let mut stripped = resources.to_vec();
    for node in &mut stripped {
        // -o DIR re-reads the stdout list, which drops package-path but
        // keeps path and index; the writer strips the rest.
        resource::remove_annotation(node, resource::PACKAGE_PATH);
    }
    crate::pkg::writer::write_new_dir(dir, &stripped, durability).map_err(|error| {
        ApplyError::Write {
            message: error.to_string(),
        }
    })
}

fn save_results(results_dir: Option<&Path>, outcome: &RenderOutcome, log: &mut dyn Write) {
    let Some(dir) = results_dir else {
        return;
    };
    let exit_code = i32::from(outcome.fn_results.iter().any(|r| r.exit_code != 0));
    let node = result_list_node(exit_code, &outcome.fn_results);
    let text = crate::yaml::to_string(&node, SeqIndent::Wide);
    if std::fs::create_dir_all(dir).is_err() {
        return;
    }
    let file = dir.join("results.yaml");
    if std::fs::write(&file, text).is_ok() {
        let _ = writeln!(log, "For complete results, see {}", file.display());
    }
}

/// kpt's `updateRenderStatus`: re-reads the root Kptfile (as the pending
/// `changes` will leave it), sets the `Rendered` condition and
/// `renderStatus`, and re-marshals it into `changes` (§11).
fn stage_status(
    root: &Path,
    outcome: &RenderOutcome,
    error: Option<&HydrateError>,
    changes: &mut commit::Changes,
) {
    let Some(bytes) = changes.read(root, kptfile::KPTFILE_NAME) else {
        return;
    };
    let Ok(kptfile) = Kptfile::parse(&String::from_utf8_lossy(&bytes), root) else {
        return;
    };
    let condition = match error {
        None => Condition {
            status: "True",
            reason: "RenderSuccess",
            message: String::new(),
        },
        Some(error) => Condition {
            status: "False",
            reason: "RenderFailed",
            message: error.status_message(root),
        },
    };
    let render_status = if outcome.mutation_steps.is_empty() && outcome.validation_steps.is_empty()
    {
        None
    } else {
        let summary = if error.is_some() {
            error_summary(&outcome.mutation_steps, &outcome.validation_steps)
        } else {
            String::new()
        };
        Some(kptfile::render_status_value(
            outcome
                .mutation_steps
                .iter()
                .map(StepRecord::to_value)
                .collect(),
            outcome
                .validation_steps
                .iter()
                .map(StepRecord::to_value)
                .collect(),
            &summary,
        ))
    };
    let node = kptfile.with_render_status(&condition, render_status);
    let text = crate::yaml::to_string(&node, SeqIndent::Wide);
    if text.as_bytes() != bytes.as_slice() {
        changes.write(kptfile::KPTFILE_NAME, text);
    }
}

fn error_summary(mutation_steps: &[StepRecord], validation_steps: &[StepRecord]) -> String {
    let mut lines = Vec::new();
    for step in mutation_steps.iter().chain(validation_steps) {
        if !step.execution_error.is_empty() {
            lines.push(format!("{}: {}", step.display_name(), step.execution_error));
        } else if step.exit_code != 0 {
            lines.push(format!(
                "{}: exit code {}",
                step.display_name(),
                step.exit_code
            ));
        }
    }
    lines.join("\n")
}

/// Writes the files of `resources` under `root` as one atomic commit,
/// skipping files whose bytes are unchanged (`fn sink`).
pub(crate) fn write_package(
    root: &Path,
    resources: &[crate::yaml::Node],
    durability: commit::Durability,
) -> Result<(), String> {
    crate::pkg::writer::write_package(root, resources, &[], durability)
        .map_err(|error| error.to_string())
}

#[cfg(test)]
mod attribution_tests {
    use super::record_action;

    /// kpt's attribution test cases, with its `krm` prefix.
    #[test]
    fn groups_are_recorded_as_kpt_records_them() {
        for (current, group, expected) in [
            ("", "fn", "krm-fn"),
            ("krm-pkg", "fn", "krm-pkg-fn"),
            ("krm-pkg-fn", "live", "krm-pkg-fn-live"),
            ("krm-pkg-fn-live", "fn", "krm-pkg-fn-live"),
            ("krm-fn", "fn", "krm-fn"),
            (
                "cnrm/landing-zone:networking/v0.4.0",
                "fn",
                "cnrm/landing-zone:networking/v0.4.0,krm-fn",
            ),
            (
                "cnrm/landing-zone:networking/v0.4.0,krm-fn",
                "pkg",
                "cnrm/landing-zone:networking/v0.4.0,krm-pkg-fn",
            ),
            (
                "cnrm/landing-zone:networking/v0.4.0,krm-fn,blueprints_controller",
                "pkg",
                "cnrm/landing-zone:networking/v0.4.0,krm-pkg-fn,blueprints_controller",
            ),
            // The older `kpt-` prefix is not kpt's part any more.
            ("kpt-pkg", "fn", "kpt-pkg,krm-fn"),
        ] {
            assert_eq!(
                record_action(current, group),
                expected,
                "{current} + {group}"
            );
        }
    }
}
