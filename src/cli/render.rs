//! `krender fn render`: kpt's render command.

use std::io::Write;
use std::path::{Path, PathBuf};

use super::args::RenderArgs;
use crate::hydrate::{self, Output, RenderOptions, Report, Runtimes};
use crate::pkg::kptfile::DEFAULT_IMAGE_PREFIX;
use crate::runtime::chain::{ChainOptions, image_evaluator};
use crate::runtime::exec::ExecEvaluator;

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
    let mut clean = PathBuf::new();
    for component in joined.components() {
        match component {
            std::path::Component::CurDir => {}
            std::path::Component::ParentDir => {
                clean.pop();
            }
            other => clean.push(other),
        }
    }
    clean
}

/// The package path kpt renders: absolute, with a symbolic link to the
/// package resolved (kpt's `ResolveSymlink`).
fn resolve_package_path(path: &Path) -> PathBuf {
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
pub(super) fn run(args: &RenderArgs, out: &mut dyn Write, err: &mut dyn Write) -> i32 {
    let root = resolve_package_path(args.pkg_path.as_deref().unwrap_or(Path::new(".")));
    let output = output_mode(args.output.as_deref());
    if let (Output::Dir(dir), Some(given)) = (&output, args.output.as_deref())
        && dir.exists()
    {
        let message =
            format!("directory {given:?} already exists, please delete the directory and retry");
        print_report(&Report::Error(message), err);
        return 1;
    }
    let results_dir = args.results_dir.as_deref().map(absolute);
    // Lifecycle (issue 8): lock the package and recover interrupted commits
    // before reading it; the lock is released when `_session` drops.
    let _session = match super::rpkg::open_for_render(&root, output == Output::InPlace, err) {
        Ok(session) => session,
        Err(report) => {
            print_report(&report, err);
            return 1;
        }
    };
    let kptfile = match hydrate::load_root(&root) {
        Ok(kptfile) => kptfile,
        Err(error) => {
            print_report(&Report::kptfile(&error), err);
            return 1;
        }
    };
    let options = RenderOptions {
        allow_exec: args.allow_exec,
        allow_wasm: args.allow_wasm,
        truncate_output: args.truncate_output,
        image_prefix: args
            .image_prefix
            .clone()
            .unwrap_or_else(|| DEFAULT_IMAGE_PREFIX.to_owned()),
        in_place: output == Output::InPlace,
        ..RenderOptions::default()
    };
    let image = crate::engine::cache::wrap_image_evaluator(
        image_evaluator(&ChainOptions {
            image_pull_policy: args.image_pull_policy.clone(),
        }),
        &args.cache.options(),
    );
    let exec = ExecEvaluator;
    let runtimes = Runtimes {
        image: image.as_ref(),
        exec: &exec,
    };
    let outcome = hydrate::hydrate(&root, kptfile, &options, runtimes, err);
    match hydrate::apply(outcome, &output, results_dir.as_deref(), out, err) {
        Ok(()) => 0,
        Err(error) => {
            print_report(&error.report(), err);
            1
        }
    }
}
