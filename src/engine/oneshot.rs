//! One-shot renders (`fn render`): the session's schedule without its
//! memo. A process that renders once gains nothing from keeping every
//! package's output for later, and keeping them costs a copy of the whole
//! tree per package level (1.4 GB at 1,000 packages); here a package's output
//! moves into its parent's input instead, so memory stays near what the
//! sequential walk holds.
//!
//! The packages of one Kahn level (leaves first) run in parallel on rayon;
//! hydrate's walk then adopts the runs in kpt's order, exactly as it adopts
//! a session's (see [`super::session`]).

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use rayon::prelude::*;

use super::db::RenderContext;
use super::levels::levels;
use super::session::{Progress, Scanned, in_pool, path_key, scan_tree};
use super::stamps::FileStamps;
use crate::hydrate::{self, PackageRun, Precomputed, RenderOutcome, Runtimes};
use crate::pkg::kptfile::{self, Kptfile};
use crate::pkg::reader::{ReadOptions, parse_package_files};

/// Renders the tree at `context.root` once, printing kpt's progress lines to
/// `log`. The result is what [`hydrate::hydrate`] returns. `files` are
/// stamps of files read just before (the CLI's manifest snapshot): the
/// unchanged ones are not read again.
pub fn render_once(
    context: &RenderContext,
    jobs: Option<usize>,
    root_kptfile: Kptfile,
    log: &mut dyn Write,
    progress: Option<Progress>,
    files: Option<&FileStamps>,
) -> RenderOutcome {
    let bfs = root_kptfile.annotation_is_true(kptfile::BFS_RENDERING_ANNOTATION);
    let precomputed = if bfs {
        Precomputed::default()
    } else {
        let reader = files.map(FileStamps::reader);
        match scan_tree(&context.root, &root_kptfile, reader.as_ref()) {
            Some(scanned) => run_levels(context, scanned, jobs, progress),
            // The walk reads the tree itself and reports what is wrong.
            None => Precomputed::default(),
        }
    };
    let runtimes = Runtimes {
        image: context.image.as_ref(),
        exec: context.exec.as_ref(),
    };
    hydrate::hydrate_with(
        &context.root,
        root_kptfile,
        &context.options,
        runtimes,
        log,
        precomputed,
    )
}

/// Runs the pipelines level by level and returns the runs by package path,
/// with the tree they ran on.
fn run_levels(
    context: &RenderContext,
    scanned: Vec<Scanned>,
    jobs: Option<usize>,
    progress: Option<Progress>,
) -> Precomputed {
    let _span = tracing::info_span!("levels").entered();
    let index: BTreeMap<&Path, usize> = scanned
        .iter()
        .enumerate()
        .map(|(i, pkg)| (pkg.path.as_path(), i))
        .collect();
    let children: Vec<Vec<usize>> = scanned
        .iter()
        .map(|pkg| {
            pkg.children
                .iter()
                .filter_map(|child| index.get(child.as_path()).copied())
                .collect()
        })
        .collect();
    let graph: BTreeMap<String, Vec<String>> = scanned
        .iter()
        .map(|pkg| {
            let children = pkg.children.iter().map(|c| path_key(c)).collect();
            (path_key(&pkg.path), children)
        })
        .collect();
    let Ok(levels) = levels(&graph) else {
        return Precomputed::default();
    };
    let levels: Vec<Vec<usize>> = levels
        .iter()
        .map(|level| {
            level
                .iter()
                .filter_map(|key| index.get(Path::new(key)).copied())
                .collect()
        })
        .collect();
    let slots: Vec<Mutex<Option<PackageRun>>> = scanned.iter().map(|_| Mutex::new(None)).collect();
    let done = AtomicUsize::new(0);
    let total = scanned.len();
    in_pool(jobs, || {
        for level in &levels {
            level.par_iter().for_each(|&i| {
                let run = run_one(context, &scanned[i], &children[i], &slots);
                if let Some(slot) = slots.get(i)
                    && let Ok(mut slot) = slot.lock()
                {
                    *slot = run;
                }
                let finished = done.fetch_add(1, Ordering::Relaxed) + 1;
                if let Some(progress) = &progress {
                    progress(finished, total);
                }
            });
        }
    });
    // Every package is the child of one parent at most, so each Kptfile
    // moves into its parent's list instead of being copied.
    let (paths, mut kptfiles): (Vec<PathBuf>, Vec<Option<Kptfile>>) = scanned
        .into_iter()
        .map(|pkg| (pkg.path, Some(pkg.kptfile)))
        .unzip();
    let subpackages = paths
        .iter()
        .zip(&children)
        .map(|(path, children)| {
            let known = children
                .iter()
                .filter_map(|&child| {
                    Some((paths.get(child)?.clone(), kptfiles.get_mut(child)?.take()?))
                })
                .collect();
            (path.clone(), known)
        })
        .collect();
    let runs = paths
        .into_iter()
        .zip(slots)
        .filter_map(|(path, slot)| Some((path, slot.into_inner().ok()??)))
        .collect();
    Precomputed {
        runs,
        subpackages,
        root_output: None,
    }
}

/// One package's run, or `None` when the walk would not get to run it (its
/// files do not parse, or a subpackage failed). Subpackage outputs move into
/// the input; their runs keep an empty output (the walk discards it).
fn run_one(
    context: &RenderContext,
    pkg: &Scanned,
    children: &[usize],
    slots: &[Mutex<Option<PackageRun>>],
) -> Option<PackageRun> {
    let _span = tracing::debug_span!("pipeline", package = %pkg.path.display()).entered();
    if context.options.cancel.is_cancelled() {
        return None;
    }
    let options = ReadOptions {
        package_path: Some(pkg.path.display().to_string()),
    };
    let local = parse_package_files(&pkg.files, &options).ok()?.resources;
    let input_files = hydrate::input_file_names(&context.root, &pkg.path, &local);
    // Check every subpackage before taking any output: when one failed,
    // the walk needs the others' outputs intact for save-on-failure.
    let all_ok = children.iter().all(|&child| {
        slots
            .get(child)
            .and_then(|slot| slot.lock().ok())
            .is_some_and(|slot| matches!(&*slot, Some(run) if run.output.is_ok()))
    });
    if !all_ok {
        return None;
    }
    let mut input = local;
    for &child in children {
        let mut slot = slots.get(child)?.lock().ok()?;
        if let Some(PackageRun {
            output: Ok(output), ..
        }) = slot.as_mut()
        {
            input.append(output);
        }
    }
    let runtimes = Runtimes {
        image: context.image.as_ref(),
        exec: context.exec.as_ref(),
    };
    Some(hydrate::run_package(
        &context.root,
        &pkg.path,
        &pkg.kptfile,
        context.save_on_failure,
        input,
        input_files,
        &context.options,
        runtimes,
    ))
}
