//! Helpers shared by the integration tests and the `cases` binary: copying
//! fixture trees and reading a tree back as bytes, running the binary with
//! a cache of its own, finding the shared conformance data, comparing kpt's
//! log text, and the render and session comparisons both binaries make.

use std::collections::BTreeMap;
use std::io::Write;
use std::ops::{Deref, DerefMut};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::LazyLock;

use krender::engine::db::RenderContext;
use krender::hydrate::RenderOptions;
use krender::layering::value::{Key, Map};
use krender::layering::{LayeringSession, Value, render_paths};

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

/// The shared conformance data: `$KRENDER_SHARED` when it is set (as
/// `.ci/run` honours it; relative to the repository), else `../shared` next
/// to the repository.
pub(crate) fn shared_root() -> PathBuf {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    std::env::var_os("KRENDER_SHARED")
        .filter(|dir| !dir.is_empty())
        .map_or_else(|| repo.join("../shared"), |dir| repo.join(dir))
}

/// `KRENDER_SKIP_SHARED=1`: the tests that need missing shared data skip.
pub(crate) fn skipping_shared() -> bool {
    std::env::var_os("KRENDER_SKIP_SHARED").is_some_and(|skip| skip == "1")
}

/// `<sub>` of the shared data, when it is a directory.
pub(crate) fn shared_data(sub: &str) -> Option<PathBuf> {
    Some(shared_root().join(sub)).filter(|dir| dir.is_dir())
}

/// `<sub>` of the shared conformance data (see [`shared_root`]). The data
/// lives outside the repository, and a test that found nothing to compare
/// used to pass silently; so a missing directory panics, unless
/// `KRENDER_SKIP_SHARED=1` asks to skip: then this prints a line saying so
/// and returns `None`, and the caller skips what needs the data (usually by
/// returning early).
#[allow(clippy::print_stdout)] // The skip line is the test's report.
pub(crate) fn shared_dir(sub: &str) -> Option<PathBuf> {
    if let Some(dir) = shared_data(sub) {
        return Some(dir);
    }
    let dir = shared_root().join(sub);
    if skipping_shared() {
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

/// Prints how many shared cases `test` ran (`builtins_porch: 3 shared
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

/// Converts a serde_yaml value into the engine's value model.
pub(crate) fn from_serde(value: &serde_yaml::Value) -> Value {
    match value {
        serde_yaml::Value::Null => Value::Null,
        serde_yaml::Value::Bool(b) => Value::Bool(*b),
        serde_yaml::Value::Number(n) => {
            if let Some(i) = n.as_i64() {
                Value::Int(i128::from(i))
            } else if let Some(u) = n.as_u64() {
                Value::Int(i128::from(u))
            } else {
                Value::Float(n.as_f64().unwrap_or(f64::NAN))
            }
        }
        serde_yaml::Value::String(s) => Value::Str(s.clone()),
        serde_yaml::Value::Sequence(items) => Value::Seq(items.iter().map(from_serde).collect()),
        serde_yaml::Value::Mapping(map) => {
            let mut out = Map::default();
            for (key, value) in map {
                let key = match key {
                    serde_yaml::Value::String(s) => Key::Str(s.clone()),
                    other => Key::Str(
                        serde_yaml::to_string(other)
                            .unwrap_or_default()
                            .trim()
                            .to_owned(),
                    ),
                };
                out.insert(key, from_serde(value));
            }
            Value::Map(out)
        }
        serde_yaml::Value::Tagged(tagged) => from_serde(&tagged.value),
    }
}

/// Every non-null document of the YAML stream `text`, read with serde_yaml
/// (independent of krender's YAML layer) into the layering engine's values.
pub(crate) fn parse_all(text: &str) -> Vec<Value> {
    serde_yaml::Deserializer::from_str(text)
        .map(|document| {
            let value: serde_yaml::Value =
                serde::Deserialize::deserialize(document).expect("case YAML parses");
            from_serde(&value)
        })
        .filter(|value| !value.is_null())
        .collect()
}

/// A unified diff of `expected` against `actual`, for the helpers here that
/// report what differs.
pub(crate) fn text_diff(expected: &str, actual: &str) -> String {
    similar::TextDiff::from_lines(expected, actual)
        .unified_diff()
        .context_radius(3)
        .header("expected", "actual")
        .to_string()
}

/// What differs between two trees read by [`snapshot`] (files missing,
/// extra, or with other bytes, diffed), or `None`: a readable failure
/// instead of two whole trees.
pub(crate) fn tree_difference(
    expected: &BTreeMap<String, Vec<u8>>,
    actual: &BTreeMap<String, Vec<u8>>,
) -> Option<String> {
    let mut problems = Vec::new();
    for (path, want) in expected {
        match actual.get(path) {
            None => problems.push(format!("{path}: missing")),
            Some(got) if got != want => problems.push(format!(
                "{path} differs:\n{}",
                text_diff(
                    &String::from_utf8_lossy(want),
                    &String::from_utf8_lossy(got)
                )
            )),
            Some(_) => {}
        }
    }
    for path in actual.keys().filter(|path| !expected.contains_key(*path)) {
        problems.push(format!("{path}: not expected, but written"));
    }
    (!problems.is_empty()).then(|| problems.join("\n"))
}

/// What a render shows: exit code, stdout and stderr (durations and the
/// temporary root `root` normalised, so renders in other directories and on
/// a loaded machine compare equal).
pub(crate) type Shown = (Option<i32>, String, String);

/// [`Shown`] of `output`.
pub(crate) fn shown(output: &Output, root: &Path) -> Shown {
    let normalize = |bytes: &[u8]| {
        normalize_durations(&String::from_utf8_lossy(bytes))
            .replace(&root.display().to_string(), "<root>")
    };
    (
        output.status.code(),
        normalize(&output.stdout),
        normalize(&output.stderr),
    )
}

/// What differs between two renders' [`Shown`]: the exit codes, and the
/// texts as diffs.
pub(crate) fn shown_difference(expected: &Shown, actual: &Shown) -> Option<String> {
    let mut problems = Vec::new();
    if expected.0 != actual.0 {
        problems.push(format!(
            "exit code {:?}, expected {:?}",
            actual.0, expected.0
        ));
    }
    for (stream, want, got) in [
        ("stdout", &expected.1, &actual.1),
        ("stderr", &expected.2, &actual.2),
    ] {
        if want != got {
            problems.push(format!("{stream} differs:\n{}", text_diff(want, got)));
        }
    }
    (!problems.is_empty()).then(|| problems.join("\n"))
}

/// `krender fn render PKG EXTRA` with the action cache in `cache`
/// (`--no-cache` without one) and its stats written to `stats`.
pub(crate) fn render_command(
    pkg: &Path,
    cache: Option<&Path>,
    extra: &[&str],
    stats: Option<&Path>,
) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_krender"));
    command.args(["fn", "render"]).arg(pkg).args(extra);
    match cache {
        Some(cache) => command.arg("--cache-dir").arg(cache),
        None => command.arg("--no-cache"),
    };
    if let Some(stats) = stats {
        command.arg("--stats").arg(stats);
    }
    // A render.toml in the test's working directory must not reroute.
    command.env("KRENDER_CONFIG", pkg.join("no-render.toml"));
    command
}

/// Appends `text` to the file `relative` in both trees, the same edit to
/// the tree rendered with the cache and to the one rendered without.
pub(crate) fn edit_both(trees: [&Path; 2], relative: &str, text: &str) {
    for tree in trees {
        let path = tree.join(relative);
        let mut bytes = std::fs::read(&path).expect("read the file to edit");
        bytes.extend_from_slice(text.as_bytes());
        std::fs::write(&path, bytes).expect("write the edited file");
    }
}

/// Renders `cached` with the action cache in `cache` and `uncached` (a copy
/// with the same edits) with `--no-cache`: the cached render's stats when
/// both show the same (exit code, stdout, stderr) and leave the same files,
/// else what differs.
pub(crate) fn render_both(
    cached: &Path,
    uncached: &Path,
    cache: &Path,
    extra: &[&str],
) -> Result<serde_json::Value, String> {
    let stats_file = cache.with_extension("stats.json");
    let run = |pkg: &Path, cache: Option<&Path>, stats: Option<&Path>| {
        render_command(pkg, cache, extra, stats)
            .output()
            .map_err(|error| format!("running krender: {error}"))
    };
    let a = run(cached, Some(cache), Some(&stats_file))?;
    let b = run(uncached, None, None)?;
    let parent = |path: &Path| path.parent().unwrap_or(path).to_owned();
    let (a_shown, b_shown) = (shown(&a, &parent(cached)), shown(&b, &parent(uncached)));
    if let Some(difference) = shown_difference(&b_shown, &a_shown) {
        return Err(format!("output differs from --no-cache:\n{difference}"));
    }
    if let Some(difference) = tree_difference(&snapshot(uncached), &snapshot(cached)) {
        return Err(format!("files differ from --no-cache:\n{difference}"));
    }
    let stats =
        std::fs::read(&stats_file).map_err(|error| format!("{}: {error}", stats_file.display()))?;
    serde_json::from_slice(&stats).map_err(|error| format!("{}: {error}", stats_file.display()))
}

/// Runs `krender fn sink out` with `list` on stdin: its stderr when it
/// fails.
pub(crate) fn krender_sink(list: &[u8], out: &Path) -> Result<(), String> {
    let mut command = krender_command();
    let mut child = command
        .args(["fn", "sink"])
        .arg(out)
        .stdin(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| e.to_string())?;
    if let Some(mut stdin) = child.stdin.take() {
        stdin.write_all(list).map_err(|e| e.to_string())?;
    }
    let output = child.wait_with_output().map_err(|e| e.to_string())?;
    if output.status.success() {
        Ok(())
    } else {
        Err(String::from_utf8_lossy(&output.stderr).into_owned())
    }
}

/// The render engine's context for an in-process render of `root`: builtin
/// and exec evaluators, no action cache, an in-memory store.
pub(crate) fn render_context(root: &Path) -> RenderContext {
    RenderContext::uncached(root, RenderOptions::default())
}

/// Renders through `session` and compares the bytes (or the error) with a
/// from-scratch render of `root` ([`render_paths`]): the recomputed
/// documents, or what differs.
pub(crate) fn session_against_fresh(
    session: &mut LayeringSession,
    root: &Path,
) -> Result<Vec<String>, String> {
    let scratch = render_paths(&[root.to_owned()]);
    match (session.render(), scratch) {
        (Ok(render), Ok(expected)) => {
            let output = String::from_utf8(render.output_bytes)
                .map_err(|error| format!("the session's output is not UTF-8: {error}"))?;
            if output != expected {
                return Err(format!(
                    "the session's output differs from a fresh render's:\n{}",
                    text_diff(&expected, &output)
                ));
            }
            if render.recomputed != render.recomputed_documents.len() {
                return Err(format!(
                    "{} documents recomputed, but {} named: {:?}",
                    render.recomputed,
                    render.recomputed_documents.len(),
                    render.recomputed_documents
                ));
            }
            Ok(render.recomputed_documents)
        }
        (Err(error), Err(expected)) if error == expected => Ok(Vec::new()),
        (got, expected) => Err(format!(
            "session gave {got:?}, fresh render gave {expected:?}"
        )),
    }
}
