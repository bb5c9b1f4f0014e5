//! Helpers shared by the integration tests: copying fixture trees and
//! reading a tree back as bytes, running the binary with a cache of its
//! own, finding the shared conformance data and comparing kpt's log text.

use std::collections::BTreeMap;
use std::ops::{Deref, DerefMut};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::LazyLock;

/// Every file under `dir`, keyed by its `/`-separated path relative to
/// `dir`.
pub(crate) fn snapshot(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut files = BTreeMap::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(current) = pending.pop() {
        let Ok(entries) = std::fs::read_dir(&current) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                pending.push(path);
            } else if let Ok(bytes) = std::fs::read(&path) {
                let rel = path
                    .strip_prefix(dir)
                    .expect("inside")
                    .components()
                    .map(|c| c.as_os_str().to_string_lossy().into_owned())
                    .collect::<Vec<_>>()
                    .join("/");
                files.insert(rel, bytes);
            }
        }
    }
    files
}

/// Copies the tree `from` to `to` (created); `fs::copy` keeps the
/// executable bit of exec functions.
pub(crate) fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("mkdir");
    for entry in std::fs::read_dir(from).expect("read fixture") {
        let entry = entry.expect("entry");
        let target = to.join(entry.file_name());
        if entry.path().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).expect("copy");
        }
    }
}

/// Runs the krender binary with `args` in `dir`: its exit code and stderr.
pub(crate) fn krender_in(dir: &Path, args: &[&str]) -> (Option<i32>, String) {
    let output = krender_command()
        .args(args)
        .current_dir(dir)
        .output()
        .expect("run krender");
    (
        output.status.code(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

/// A krender `Command` (it derefs to one) and the temporary cache directory
/// it points at, which goes when this is dropped: keep it alive until the
/// child has exited.
pub(crate) struct KrenderCommand {
    command: Command,
    _cache: tempfile::TempDir,
}

/// A `Command` for the krender binary whose function cache
/// (`KRENDER_CACHE_DIR`) is a fresh temporary directory, so tests never
/// write to the developer's `~/.cache/krender` nor see each other's
/// entries. A test that sets `KRENDER_CACHE_DIR` or passes `--cache-dir`
/// itself wins.
pub(crate) fn krender_command() -> KrenderCommand {
    let cache = tempfile::tempdir().expect("cache tempdir");
    let mut command = Command::new(env!("CARGO_BIN_EXE_krender"));
    command.env("KRENDER_CACHE_DIR", cache.path());
    KrenderCommand {
        command,
        _cache: cache,
    }
}

impl Deref for KrenderCommand {
    type Target = Command;

    fn deref(&self) -> &Command {
        &self.command
    }
}

impl DerefMut for KrenderCommand {
    fn deref_mut(&mut self) -> &mut Command {
        &mut self.command
    }
}

/// `<sub>` of the shared conformance data: under `$KRENDER_SHARED` when it
/// is set (as `.ci/run` honours it; relative to the repository), else
/// `../shared` next to the repository. The data lives outside the
/// repository, and a test that found nothing to compare used to pass
/// silently; so a missing directory panics, unless `KRENDER_SKIP_SHARED=1`
/// asks to skip: then this prints a line saying so and returns `None`, and
/// the caller skips what needs the data (usually by returning early).
#[allow(clippy::print_stdout)] // The skip line is the test's report.
pub(crate) fn shared_dir(sub: &str) -> Option<PathBuf> {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    let root = std::env::var_os("KRENDER_SHARED")
        .filter(|dir| !dir.is_empty())
        .map_or_else(|| repo.join("../shared"), |dir| repo.join(dir));
    let dir = root.join(sub);
    if dir.is_dir() {
        return Some(dir);
    }
    if std::env::var_os("KRENDER_SKIP_SHARED").is_some_and(|skip| skip == "1") {
        println!(
            "skipping what needs {}: it is missing (KRENDER_SKIP_SHARED=1)",
            dir.display()
        );
        return None;
    }
    panic!(
        "shared conformance data missing: {} is not a directory; point KRENDER_SHARED \
         at the shared directory, or set KRENDER_SKIP_SHARED=1 to skip the tests that need it",
        dir.display()
    );
}

/// The kpt e2e cases under `dir` (directories with `.expected`), sorted.
pub(crate) fn kpt_cases(dir: &Path) -> Vec<PathBuf> {
    let mut cases: Vec<PathBuf> = std::fs::read_dir(dir)
        .expect("read the shared cases")
        .filter_map(Result::ok)
        .map(|entry| entry.path())
        .filter(|path| path.join(".expected").is_dir())
        .collect();
    cases.sort();
    cases
}

/// The `fn render` flags a kpt e2e case's `.expected/config.yaml` asks for.
pub(crate) fn kpt_case_flags(case: &Path) -> Vec<&'static str> {
    let config = std::fs::read_to_string(case.join(".expected/config.yaml")).unwrap_or_default();
    let mut flags = Vec::new();
    if config.contains("allowExec: true") {
        flags.push("--allow-exec");
    }
    if config.contains("disableOutputTruncate: true") {
        flags.push("--truncate-output=false");
    }
    flags
}

/// Prints how many shared cases `test` ran (`engine_warm_cold: 42 shared
/// cases`; `.ci/run` shows it) and fails when it ran none: an emptied or
/// renamed case directory must not pass vacuously either.
#[allow(clippy::print_stdout)] // The count is the test's report.
pub(crate) fn shared_cases(test: &str, ran: usize) {
    println!("{test}: {ran} shared cases");
    assert!(ran > 0, "{test}: no shared cases ran");
}

/// kpt's step timings (`[PASS] "f" in 1.3s`, `[FAIL] "f" in 250ms`, any Go
/// duration ending a line) as `in 0s`, what kpt's recorded output and a
/// quick run show: a loaded machine takes longer, and log text must still
/// compare equal.
pub(crate) fn normalize_durations(text: &str) -> String {
    static DURATION: LazyLock<regex::Regex> = LazyLock::new(|| {
        regex::Regex::new(r"(?m) in (?:[0-9]+(?:\.[0-9]+)?(?:ms|us|µs|ns|h|m|s))+$")
            .expect("duration pattern")
    });
    DURATION.replace_all(text, " in 0s").into_owned()
}

#[test]
fn only_durations_are_normalized() {
    assert_eq!(
        normalize_durations(
            "[PASS] \"a\" in 1.3s\n[FAIL] \"b\" in 250ms\n[PASS] \"c\" in 1m2.5s\n[PASS] \"d\" in 40µs\nSuccessfully executed 4 function(s) in 1 package(s).\n"
        ),
        "[PASS] \"a\" in 0s\n[FAIL] \"b\" in 0s\n[PASS] \"c\" in 0s\n[PASS] \"d\" in 0s\nSuccessfully executed 4 function(s) in 1 package(s).\n"
    );
}

/// Runs `check` on every YAML input the differential tests share: each
/// fixture and shared conformance file alone, each directory's files joined
/// into one stream (as `fn source` output and site bundles are), and the
/// golden cases' inputs; fails with every failure `check` reports. `test`
/// names the test in the shared-case count.
pub(crate) fn check_yaml_inputs(test: &str, check: impl Fn(&str) -> Result<(), String>) {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    let (fixtures, mut failures) = check_yaml_tree(&repo.join("fixtures"), &check);
    assert!(fixtures > 100, "only {fixtures} fixture files");
    let golden: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(repo.join("fixtures/yaml/yaml-fidelity-cases.json"))
            .expect("golden cases"),
    )
    .expect("json");
    for case in golden["cases"].as_array().expect("cases") {
        if let Some(input) = case["input"].as_str()
            && let Err(failure) = check(input)
        {
            failures.push(format!("golden {}: {failure}", case["name"]));
        }
    }
    if let Some(shared) = shared_dir("conformance") {
        let (count, mut more) = check_yaml_tree(&shared, &check);
        failures.append(&mut more);
        shared_cases(test, count);
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

/// [`check_yaml_inputs`] on the files under `root`: how many there are,
/// and the failures.
fn check_yaml_tree(
    root: &Path,
    check: &impl Fn(&str) -> Result<(), String>,
) -> (usize, Vec<String>) {
    let mut files = Vec::new();
    yaml_files(root, &mut files);
    let mut failures = Vec::new();
    let mut by_dir: BTreeMap<PathBuf, String> = BTreeMap::new();
    for file in &files {
        let Ok(text) = std::fs::read_to_string(file) else {
            continue;
        };
        if let Err(failure) = check(&text) {
            failures.push(format!("{}: {failure}", file.display()));
        }
        let joined = by_dir
            .entry(file.parent().map(Path::to_owned).unwrap_or_default())
            .or_default();
        if !joined.is_empty() {
            joined.push_str("---\n");
        }
        joined.push_str(&text);
        if !text.ends_with('\n') {
            joined.push('\n');
        }
    }
    for (dir, joined) in &by_dir {
        if let Err(failure) = check(joined) {
            failures.push(format!("{} joined: {failure}", dir.display()));
        }
    }
    (files.len(), failures)
}

/// Every `.yaml`/`.yml` file under `dir`, in sorted order.
fn yaml_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut entries: Vec<PathBuf> = entries.filter_map(Result::ok).map(|e| e.path()).collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            yaml_files(&path, out);
        } else if path
            .extension()
            .is_some_and(|ext| ext == "yaml" || ext == "yml")
        {
            out.push(path);
        }
    }
}
