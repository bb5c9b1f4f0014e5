//! Warm renders are byte-identical to cold ones on every shared kpt case
//! (`kpt::warm_cold::<case>`): the same exit code, output and files when
//! each step is answered from the function cache, and the same stdout and
//! stderr when an unchanged tree is answered from its manifest. Cold and
//! warm run with builtins on the wire (`KRENDER_NATIVE=off`, so their
//! results are cached); a third render with native builtins must match
//! them too.

use std::path::Path;
use std::process::{Command, Output};

use libtest_mimic::Trial;

use crate::support::{copy_dir, shown, shown_difference, snapshot, tree_difference};

pub(super) fn trials() -> Vec<Trial> {
    super::per_case("warm_cold", run)
}

/// `krender fn render PKG FLAGS EXTRA` with the function cache in `cache`
/// and native builtins `native` (`on`/`off`).
fn render(pkg: &Path, cache: &Path, flags: &[&str], extra: &[&str], native: &str) -> Output {
    Command::new(env!("CARGO_BIN_EXE_krender"))
        .args(["fn", "render"])
        .arg(pkg)
        .arg("--cache-dir")
        .arg(cache)
        .args(flags)
        .args(extra)
        .env("KRENDER_CONFIG", cache.join("no-render.toml"))
        .env("KRENDER_NATIVE", native)
        .output()
        .expect("run krender")
}

/// Cold, warm and native renders of fresh copies of `case`, then two
/// `-o stdout` renders of one copy, all with one cache of their own.
fn run(case: &Path) -> crate::Outcome {
    let temp = tempfile::tempdir()?;
    let name = crate::name_of(case);
    let flags = super::case_flags(case);
    let cache = temp.path().join("cache");
    let mut runs = Vec::new();
    for (which, native) in [("cold", "off"), ("warm", "off"), ("native", "on")] {
        let root = temp.path().join(which);
        let pkg = root.join(&name);
        copy_dir(case, &pkg);
        let output = render(&pkg, &cache, &flags, &[], native);
        runs.push((shown(&output, &root), snapshot(&pkg)));
    }
    let mut problems = Vec::new();
    for (run, what) in [(1, "warm render"), (2, "native builtins' render")] {
        let ((cold_shown, cold_files), (shown, files)) = (&runs[0], &runs[run]);
        if let Some(difference) = shown_difference(cold_shown, shown) {
            problems.push(format!(
                "{what}: output differs from the cold one:\n{difference}"
            ));
        }
        if let Some(difference) = tree_difference(cold_files, files) {
            problems.push(format!(
                "{what}: files differ from the cold one:\n{difference}"
            ));
        }
    }

    // -o stdout twice on one copy: the second is a manifest replay when
    // every function was pure; either way the bytes must not change.
    let root = temp.path().join("stdout");
    let pkg = root.join(&name);
    copy_dir(case, &pkg);
    let first = render(&pkg, &cache, &flags, &["-o", "stdout"], "off");
    let second = render(&pkg, &cache, &flags, &["-o", "stdout"], "off");
    if let Some(difference) = shown_difference(&shown(&first, &root), &shown(&second, &root)) {
        problems.push(format!(
            "the replayed -o stdout render differs from the first:\n{difference}"
        ));
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(problems.join("\n").into())
    }
}
