//! Warm renders are byte-identical to cold ones on every shared kpt
//! conformance case: the same exit code, stderr and files when each step is
//! answered from the function cache, and the same stdout and stderr when an
//! unchanged tree is answered from its manifest. Cold and warm run with
//! builtins on the wire (`KRENDER_NATIVE=off`, so their results are
//! cached); a third render with native builtins must match them too.
//! Needs the shared data (see [`shared_dir`]).

use crate::support::{
    copy_dir, kpt_case_flags, kpt_cases, normalize_durations, shared_cases, shared_dir,
};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn tree(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut files = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(current) = stack.pop() {
        for entry in std::fs::read_dir(&current).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else {
                let bytes = std::fs::read(&path).unwrap();
                files.insert(path.strip_prefix(dir).unwrap().to_path_buf(), bytes);
            }
        }
    }
    files
}

/// stderr with durations normalised (`in 12ms` as `in 0s`) and the temp root
/// replaced.
fn normalize(stderr: &[u8], root: &Path) -> String {
    normalize_durations(&String::from_utf8_lossy(stderr))
        .replace(&root.display().to_string(), "<root>")
}

fn render(pkg: &Path, cache: &Path, flags: &[&str], extra: &[&str]) -> Output {
    render_with(pkg, cache, flags, extra, "off")
}

fn render_with(pkg: &Path, cache: &Path, flags: &[&str], extra: &[&str], native: &str) -> Output {
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
        .unwrap()
}

#[test]
fn warm_renders_match_cold_ones_on_every_shared_case() {
    let Some(dir) = shared_dir("conformance/kpt-fn-render") else {
        return;
    };
    let temp = tempfile::tempdir().unwrap();
    let mut compared = 0;
    for case in kpt_cases(&dir) {
        let name = case.file_name().unwrap().to_owned();
        let flags = kpt_case_flags(&case);
        let cache = temp.path().join("cache").join(&name);
        let mut runs = Vec::new();
        for (which, native) in [("cold", "off"), ("warm", "off"), ("native", "on")] {
            let root = temp.path().join(which);
            let pkg = root.join(&name);
            copy_dir(&case, &pkg);
            let output = render_with(&pkg, &cache, &flags, &[], native);
            runs.push((
                output.status.code(),
                normalize(&output.stderr, &root),
                tree(&pkg),
            ));
        }
        assert_eq!(
            runs[0],
            runs[1],
            "{}: warm render differs from cold",
            case.display()
        );
        assert_eq!(
            runs[0],
            runs[2],
            "{}: native builtins differ from the wire",
            case.display()
        );

        // -o stdout twice on one copy: the second is a manifest replay when
        // every function was pure; either way the bytes must not change.
        let root = temp.path().join("stdout");
        let pkg = root.join(&name);
        copy_dir(&case, &pkg);
        let first = render(&pkg, &cache, &flags, &["-o", "stdout"]);
        let second = render(&pkg, &cache, &flags, &["-o", "stdout"]);
        assert_eq!(
            first.status.code(),
            second.status.code(),
            "{}",
            case.display()
        );
        assert_eq!(
            first.stdout,
            second.stdout,
            "{}: replayed stdout differs",
            case.display()
        );
        assert_eq!(
            normalize(&first.stderr, &root),
            normalize(&second.stderr, &root),
            "{}: replayed stderr differs",
            case.display()
        );
        compared += 1;
    }
    shared_cases("engine_warm_cold", compared);
    assert!(compared >= 60, "only {compared} cases found");
}
