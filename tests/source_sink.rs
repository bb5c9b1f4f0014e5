//! `krender fn source PKG | krender fn sink OUT` against kpt's recorded
//! output (`fixtures/source-sink/cases/`, written by
//! `tests/record-source-sink.sh`): every file of OUT byte for byte, the set of
//! files, and the ResourceList that `fn source` prints. Inputs are the shared
//! conformance packages (see [`shared_dir`]) and the repo's own fixture
//! packages.

use crate::support::{krender_command, shared_cases, shared_dir};
use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Stdio;

/// Cases whose sink output is known to differ from kpt's; see
/// `fixtures/source-sink/README.md`.
// FIXME: krender strips a pre-existing package-path annotation, kpt keeps it.
const KNOWN_SINK_DIFFERENCES: &[&str] = &["fixtures~wire"];

/// Cases whose `fn source` stdout is known to differ from kpt's.
// FIXME: same cause as the sink difference.
const KNOWN_SOURCE_DIFFERENCES: &[&str] = &["fixtures~wire"];

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Every file under `dir`, keyed by its `/`-separated relative path.
fn files(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    fn walk(root: &Path, dir: &Path, out: &mut BTreeMap<String, Vec<u8>>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                walk(root, &path, out);
            } else if let Ok(bytes) = std::fs::read(&path) {
                let rel = path.strip_prefix(root).unwrap_or(&path);
                out.insert(rel.to_string_lossy().replace('\\', "/"), bytes);
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(dir, dir, &mut out);
    out
}

fn diff(expected: &[u8], actual: &[u8]) -> String {
    let expected = String::from_utf8_lossy(expected);
    let actual = String::from_utf8_lossy(actual);
    similar::TextDiff::from_lines(expected.as_ref(), actual.as_ref())
        .unified_diff()
        .header("kpt", "krender")
        .to_string()
}

/// Runs `krender fn source` on `pkg` from its parent directory, as the
/// recorder ran kpt. Returns stdout, or None when the command failed.
fn source(pkg: &Path) -> Option<Vec<u8>> {
    let parent = pkg.parent()?;
    let base = pkg.file_name()?;
    let output = krender_command()
        .args(["fn", "source"])
        .arg(base)
        .current_dir(parent)
        .output()
        .ok()?;
    output.status.success().then_some(output.stdout)
}

/// Runs `krender fn sink out` with `list` on stdin.
fn sink(list: &[u8], out: &Path) -> Result<(), String> {
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

/// Compares one case; returns (sink problems, source problems).
fn compare(case: &Path, pkg: &Path) -> (Vec<String>, Vec<String>) {
    let name = case
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let mut sink_problems = Vec::new();
    let mut source_problems = Vec::new();
    let kpt_failed = case.join("source.failed").exists();
    let Some(list) = source(pkg) else {
        if !kpt_failed {
            sink_problems.push(format!("{name}: krender fn source failed, kpt's succeeded"));
        }
        return (sink_problems, source_problems);
    };
    if kpt_failed {
        sink_problems.push(format!("{name}: kpt fn source failed, krender's succeeded"));
        return (sink_problems, source_problems);
    }
    let expected_list = std::fs::read(case.join("source.yaml")).unwrap_or_default();
    if list != expected_list {
        source_problems.push(format!(
            "{name}: fn source stdout differs\n{}",
            diff(&expected_list, &list)
        ));
    }
    let tmp = tempfile::tempdir().expect("tempdir");
    let out = tmp.path().join("out");
    if let Err(err) = sink(&expected_list, &out) {
        sink_problems.push(format!("{name}: krender fn sink failed: {err}"));
        return (sink_problems, source_problems);
    }
    let expected = files(&case.join("out"));
    let actual = files(&out);
    for (path, want) in &expected {
        match actual.get(path) {
            None => sink_problems.push(format!("{name}: {path} missing")),
            Some(got) if got != want => {
                sink_problems.push(format!("{name}: {path} differs\n{}", diff(want, got)));
            }
            Some(_) => {}
        }
    }
    for path in actual.keys().filter(|p| !expected.contains_key(*p)) {
        sink_problems.push(format!(
            "{name}: {path} written but kpt writes no such file"
        ));
    }
    (sink_problems, source_problems)
}

/// Every recorded case: kpt's ResourceList fed to `krender fn sink` writes
/// kpt's files, and `krender fn source` prints kpt's ResourceList.
#[test]
fn source_sink_matches_kpt() {
    let cases_dir = repo().join("fixtures/source-sink/cases");
    let mut cases: Vec<PathBuf> = std::fs::read_dir(&cases_dir)
        .expect("fixtures/source-sink/cases")
        .flatten()
        .map(|e| e.path())
        .collect();
    cases.sort();
    let conf = shared_dir("conformance");
    let (mut compared, mut shared, mut skipped, mut identical) = (0, 0, 0, 0);
    let mut failures = Vec::new();
    let mut known = Vec::new();
    for case in &cases {
        let name = case
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let rel = std::fs::read_to_string(case.join("input")).unwrap_or_default();
        let rel = rel.trim();
        let pkg = if rel.starts_with("fixtures/") {
            repo().join(rel)
        } else if let Some(conf) = &conf {
            shared += 1;
            conf.join(rel)
        } else {
            skipped += 1;
            continue;
        };
        compared += 1;
        let (sink_problems, source_problems) = compare(case, &pkg);
        if sink_problems.is_empty() && source_problems.is_empty() {
            identical += 1;
        }
        // FIXME: known differences are asserted as they are today; see
        // fixtures/source-sink/README.md.
        let sink_known = KNOWN_SINK_DIFFERENCES.contains(&name.as_str());
        let source_known = KNOWN_SOURCE_DIFFERENCES.contains(&name.as_str());
        match (sink_problems.is_empty(), sink_known) {
            (true, true) => failures.push(format!(
                "{name}: listed as a known sink difference but now matches kpt"
            )),
            (false, true) => known.push(name.clone()),
            (false, false) => failures.extend(sink_problems),
            (true, false) => {}
        }
        match (source_problems.is_empty(), source_known) {
            (true, true) => failures.push(format!(
                "{name}: listed as a known source difference but now matches kpt"
            )),
            (false, true) => known.push(format!("{name} (source)")),
            (false, false) => failures.extend(source_problems),
            (true, false) => {}
        }
    }
    eprintln!(
        "source|sink: {compared} compared, {identical} identical, {} known differences {known:?}, {skipped} skipped (no shared conformance)",
        known.len()
    );
    if conf.is_some() {
        shared_cases("source_sink", shared);
    }
    assert!(compared > 0, "no cases compared");
    assert!(
        failures.is_empty(),
        "{} differences from kpt:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// kpt's `fn sink DIR` creates DIR even when the stream holds no resources
/// (checked against kpt 1.0.0-beta.56: an empty list and an empty stdin).
#[test]
fn sink_of_an_empty_stream_creates_the_empty_directory() {
    let temp = tempfile::tempdir().unwrap();
    for (name, stream) in [
        (
            "list",
            &b"apiVersion: config.kubernetes.io/v1\nkind: ResourceList\nitems: []\n"[..],
        ),
        ("nothing", &b""[..]),
    ] {
        let out = temp.path().join(name);
        sink(stream, &out).unwrap();
        assert!(out.is_dir(), "{name}: no directory");
        assert_eq!(std::fs::read_dir(&out).unwrap().count(), 0, "{name}");
    }
}

/// `fn source -o unwrap` prints the resources alone and `--fn-config FILE`
/// adds the file's resource as the list's `functionConfig`, annotated with
/// its file name; a bad `-o` is kpt's error (all checked against kpt
/// 1.0.0-beta.56).
#[test]
fn source_unwraps_and_takes_a_function_config() {
    let temp = tempfile::tempdir().unwrap();
    let pkg = temp.path().join("pkg");
    std::fs::create_dir(&pkg).unwrap();
    std::fs::write(
        pkg.join("a.yaml"),
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\ndata:\n  k: v\n",
    )
    .unwrap();
    std::fs::create_dir(temp.path().join("cfg")).unwrap();
    std::fs::write(
        temp.path().join("cfg/fnc.yaml"),
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: fnc\ndata:\n  x: y\n",
    )
    .unwrap();
    let run = |args: &[&str]| {
        let output = krender_command()
            .args(["fn", "source", "pkg"])
            .args(args)
            .current_dir(temp.path())
            .output()
            .unwrap();
        (
            output.status.code(),
            String::from_utf8_lossy(&output.stdout).into_owned(),
            String::from_utf8_lossy(&output.stderr).into_owned(),
        )
    };
    assert_eq!(
        run(&["-o", "unwrap"]),
        (
            Some(0),
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\ndata:\n  k: v\n".to_owned(),
            String::new()
        )
    );
    let (code, stdout, _) = run(&["--fn-config", "cfg/fnc.yaml"]);
    assert_eq!(code, Some(0));
    assert!(
        stdout.ends_with("functionConfig:\n  apiVersion: v1\n  kind: ConfigMap\n  metadata:\n    name: fnc\n    annotations:\n      config.kubernetes.io/index: '0'\n      config.kubernetes.io/path: 'fnc.yaml'\n      internal.config.kubernetes.io/index: '0'\n      internal.config.kubernetes.io/path: 'fnc.yaml'\n      internal.config.kubernetes.io/seqindent: 'compact'\n  data:\n    x: y\n"),
        "{stdout}"
    );
    assert_eq!(
        run(&["-o", "bogus"]),
        (
            Some(1),
            String::new(),
            "error: invalid input for --output flag \"bogus\", must be \"stdout\" or \"unwrap\"\n"
                .to_owned()
        )
    );
}
