//! End-to-end tests of `krender fn render` on the packages in
//! `fixtures/render/`: each test copies a fixture into a temporary
//! directory, runs the binary, and compares exit code, stderr and every
//! file byte for byte (a failed render must leave files untouched except
//! the root Kptfile's status, as kpt does).

use crate::support::{copy_dir, krender_command, krender_in, normalize_durations, snapshot};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

struct Run {
    code: i32,
    stdout: String,
    stderr: String,
    before: BTreeMap<String, Vec<u8>>,
    after: BTreeMap<String, Vec<u8>>,
    pkg: PathBuf,
    _temp: tempfile::TempDir,
}

/// Copies `fixtures/render/<case>` to a temp dir named after the case and
/// runs `krender fn render <pkg> <args>`.
fn render(case: &str, args: &[&str]) -> Run {
    let temp = tempfile::tempdir().expect("tempdir");
    let pkg = temp.path().join(case);
    copy_dir(
        &Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("fixtures/render")
            .join(case),
        &pkg,
    );
    let before = snapshot(&pkg);
    let output = krender_command()
        .args(["fn", "render"])
        .arg(&pkg)
        .args(args)
        .current_dir(temp.path())
        .output()
        .expect("run krender");
    let after = snapshot(&pkg);
    Run {
        code: output.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: normalize_durations(&String::from_utf8_lossy(&output.stderr)),
        before,
        after,
        pkg,
        _temp: temp,
    }
}

impl Run {
    fn file(&self, rel: &str) -> String {
        String::from_utf8_lossy(self.after.get(rel).map(Vec::as_slice).unwrap_or_default())
            .into_owned()
    }

    /// Every file except `except` is byte-identical to before.
    fn unchanged_except(&self, except: &[&str]) {
        let keys: Vec<&String> = self.before.keys().collect();
        assert_eq!(
            keys,
            self.after.keys().collect::<Vec<_>>(),
            "set of files changed in {}",
            self.pkg.display()
        );
        for (rel, bytes) in &self.before {
            if except.contains(&rel.as_str()) {
                continue;
            }
            assert_eq!(
                String::from_utf8_lossy(bytes),
                String::from_utf8_lossy(&self.after[rel]),
                "{rel} changed"
            );
        }
    }
}

#[test]
fn missing_kptfile_is_reported() {
    let temp = tempfile::tempdir().expect("tempdir");
    let output = krender_command()
        .args(["fn", "render"])
        .arg(temp.path())
        .output()
        .expect("run");
    assert_eq!(output.status.code(), Some(1));
    assert_eq!(
        String::from_utf8_lossy(&output.stderr),
        format!(
            "Error: No Kptfile found at {:?}. \n",
            temp.path().display().to_string()
        )
    );
}

#[test]
fn missing_package_path_is_reported_as_kpt_resolves_it() {
    // kpt resolves the path's symbolic links first: Go's error names the
    // first missing component, as given, in kubectl's `error:` style.
    let temp = tempfile::tempdir().expect("tempdir");
    for (given, missing) in [("nope", "nope"), ("./nope/deeper", "nope")] {
        let (code, stderr) = krender_in(temp.path(), &["fn", "render", given]);
        assert_eq!(code, Some(1));
        assert_eq!(
            stderr,
            format!("error: lstat {missing}: no such file or directory\n")
        );
    }
}

#[test]
fn invalid_exec_command_fails_before_any_function_runs() {
    // kpt splits every exec command while building the package's function
    // chain, so the first function does not run either.
    let temp = tempfile::tempdir().expect("tempdir");
    let pkg = temp.path().join("app");
    std::fs::create_dir(&pkg).expect("mkdir");
    std::fs::write(
        pkg.join("Kptfile"),
        "apiVersion: kpt.dev/v1\nkind: Kptfile\nmetadata:\n  name: app\npipeline:\n  mutators:\n    - exec: \"sed -e s/a/b/\"\n    - exec: \"sed \\\"x\"\n",
    )
    .expect("Kptfile");
    let (code, stderr) = krender_in(
        temp.path(),
        &["fn", "render", "app", "--allow-exec", "-o", "stdout"],
    );
    assert_eq!(code, Some(1));
    assert_eq!(
        stderr,
        "Package \"app\":\nError: exec command \"sed \\\"x\" must be valid: EOF found when expecting closing quote \n"
    );
}

#[test]
fn legacy_kptfile_is_rejected_untouched() {
    let run = render("legacy-kptfile", &[]);
    assert_eq!(run.code, 1);
    assert!(
        run.stderr
            .contains("has an old version (\"v1alpha1\") of the Kptfile schema"),
        "{}",
        run.stderr
    );
    run.unchanged_except(&[]);
}

#[test]
fn unknown_kptfile_field_is_a_strict_decode_error() {
    let run = render("unknown-field", &[]);
    assert_eq!(run.code, 1);
    assert!(
        run.stderr.contains("can't be read.\n\nDetails:\nyaml: unmarshal errors:\n  line 8: field targetResources not found in type v1.Function"),
        "{}",
        run.stderr
    );
    run.unchanged_except(&[]);
}

#[test]
fn exec_function_rewrites_resources_and_records_status() {
    let run = render("exec-sed", &["--allow-exec"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(
        run.stderr,
        "Package \"exec-sed\":\n[RUNNING] \"sed -e 's/foo/bar/'\" on package \"exec-sed\"\n[PASS] \"sed -e 's/foo/bar/'\" in 0s\n\nSuccessfully executed 1 function(s) in 1 package(s).\n"
    );
    assert_eq!(
        run.file("cm.yaml"),
        "# a comment\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm\ndata:\n  value: bar\n"
    );
    assert_eq!(
        run.file("Kptfile"),
        "apiVersion: kpt.dev/v1\nkind: Kptfile\nmetadata:\n  name: app\npipeline:\n  mutators:\n    - exec: sed -e 's/bar/bar/'\nstatus:\n  conditions:\n    - type: Rendered\n      status: \"True\"\n      reason: RenderSuccess\n  renderStatus:\n    mutationSteps:\n      - exec: sed -e 's/foo/bar/'\n        exitCode: 0\n"
    );
}

#[test]
fn exec_without_allow_exec_is_refused_and_only_status_is_written() {
    let run = render("exec-no-allow", &[]);
    assert_eq!(run.code, 1);
    assert!(
        run.stderr.ends_with(
            "Error: must run with `--allow-exec` option to allow running function binaries \n"
        ),
        "{}",
        run.stderr
    );
    run.unchanged_except(&["Kptfile"]);
    assert_eq!(
        run.file("Kptfile"),
        "apiVersion: kpt.dev/v1\nkind: Kptfile\nmetadata:\n  name: app\npipeline:\n  mutators:\n    - exec: sed -e 's/foo/bar/'\nstatus:\n  conditions:\n    - type: Rendered\n      status: \"False\"\n      reason: RenderFailed\n      message: |-\n        pkg.render: pkg .:\n        \tpipeline.run: must run with `--allow-exec` option to allow running function binaries\n  renderStatus:\n    mutationSteps:\n      - exec: sed -e 's/foo/bar/'\n        executionError: must run with `--allow-exec` option to allow running function binaries\n        exitCode: 1\n    errorSummary: 'sed -e ''s/foo/bar/'': must run with `--allow-exec` option to allow running function binaries'\n"
    );
}

#[test]
fn failing_exec_output_is_truncated_and_files_untouched() {
    let run = render("exec-fail", &["--allow-exec"]);
    assert_eq!(run.code, 1);
    let name = "\"sh -c 'for i in 1 2 3 4 5 6; do echo line$i >&2; done; exit 3'\"";
    assert_eq!(
        run.stderr,
        format!(
            "Package \"exec-fail\":\n[RUNNING] {name} on package \"exec-fail\"\n[FAIL] {name} in 0s\n  Stderr:\n    line1\n    line2\n    line3\n    line4\n    ...(3 line(s) truncated, use '--truncate-output=false' to disable)\n  Exit code: 3\n\n"
        )
    );
    run.unchanged_except(&["Kptfile"]);
}

#[test]
fn failing_exec_output_is_whole_without_truncation() {
    let run = render("exec-fail", &["--allow-exec", "--truncate-output=false"]);
    assert_eq!(run.code, 1);
    assert!(
        run.stderr.contains("    line6\n    \n  Exit code: 3\n\n"),
        "{}",
        run.stderr
    );
}

#[test]
fn save_on_render_failure_keeps_earlier_mutations() {
    let run = render("save-on-failure", &["--allow-exec"]);
    assert_eq!(run.code, 1);
    assert_eq!(
        run.file("cm.yaml"),
        "# a comment\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm\ndata:\n  value: bar\n"
    );
    assert!(
        run.stderr
            .contains("Partially executed 1 function(s) in 1 package(s).\n"),
        "{}",
        run.stderr
    );
}

#[test]
fn bfs_renders_parents_first() {
    let run = render("bfs-order", &["--allow-exec"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    // The root's pipeline ran first and saw the subpackage; the subpackage's
    // pipeline then saw the root's edit.
    assert!(
        run.file("sub/cm.yaml").contains("stage: sub"),
        "{}",
        run.file("sub/cm.yaml")
    );
    assert!(
        run.file("cm.yaml").contains("stage: root"),
        "{}",
        run.file("cm.yaml")
    );
    assert!(
        run.stderr.starts_with("Package \"bfs-order\":\n"),
        "{}",
        run.stderr
    );
}

/// BFS with sibling subpackages: each package's pipeline sees itself and
/// its own descendants once (a wrong child index used to hand `a`'s subtree
/// to the root twice, failing with a duplicate path), parents first, in
/// breadth-first order.
#[test]
fn bfs_with_sibling_subpackages_renders_each_subtree_once() {
    let run = render("bfs-siblings", &[]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let counts: Vec<&str> = run
        .stderr
        .lines()
        .filter(|line| line.starts_with("Package ") || line.contains("labels in total"))
        .collect();
    assert_eq!(
        counts,
        [
            "Package \"bfs-siblings\":",
            "    [info]: set 8 labels in total",
            "Package \"bfs-siblings/a\":",
            "    [info]: set 4 labels in total",
            "Package \"bfs-siblings/b\":",
            "    [info]: set 2 labels in total",
            "Package \"bfs-siblings/a/a1\":",
            "    [info]: set 2 labels in total",
        ]
    );
    let cm = |name: &str, labels: &[&str]| {
        let labels: String = labels
            .iter()
            .map(|label| format!("    in-{label}: \"true\"\n"))
            .collect();
        format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm-{name}\n  labels:\n{labels}data:\n  value: one\n"
        )
    };
    assert_eq!(run.file("cm.yaml"), cm("root", &["root"]));
    assert_eq!(run.file("a/cm.yaml"), cm("a", &["root", "a"]));
    assert_eq!(run.file("b/cm.yaml"), cm("b", &["root", "b"]));
    assert_eq!(run.file("a/a1/cm.yaml"), cm("a1", &["root", "a", "a1"]));
}

#[test]
fn results_dir_gets_a_function_result_list() {
    let temp = tempfile::tempdir().expect("tempdir");
    let results = temp.path().join("results");
    let run = render(
        "exec-sed",
        &[
            "--allow-exec",
            "--results-dir",
            results.to_str().expect("utf-8"),
        ],
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(
        std::fs::read_to_string(results.join("results.yaml")).expect("results file"),
        "apiVersion: kpt.dev/v1\nkind: FunctionResultList\nmetadata:\n  name: fnresults\nexitCode: 0\nitems:\n  - exec: sed -e 's/foo/bar/'\n    exitCode: 0\n"
    );
    assert!(run.stderr.ends_with(&format!(
        "For complete results, see {}\n",
        results.join("results.yaml").display()
    )));
    let _ = run.stdout;
}

#[test]
fn non_krm_input_fails_before_the_function_changes_anything() {
    let run = render("non-krm", &["--allow-exec"]);
    assert_eq!(run.code, 1);
    assert!(
        run.stderr.ends_with("Error: input resource list must contain only KRM resources: non-krm.yaml: resource must have `apiVersion` \n"),
        "{}",
        run.stderr
    );
    run.unchanged_except(&["Kptfile"]);
    assert!(run.file("Kptfile").contains(
        "      message: |-\n        pkg.render: pkg .:\n        \tpipeline.run: input resource list must contain only KRM resources: non-krm.yaml: resource must have `apiVersion`\n"
    ));
    assert!(run.file("Kptfile").contains("        executionError: 'input resource list must contain only KRM resources: non-krm.yaml: resource must have `apiVersion`'\n"));
}

#[test]
fn unreadable_subpackage_kptfile_fails_the_render() {
    let run = render("sub-invalid-kptfile", &["--allow-exec"]);
    assert_eq!(run.code, 1);
    let db = run.pkg.join("db");
    assert_eq!(
        run.stderr,
        format!(
            "Error: Kptfile at {:?} can't be read.\n\nDetails:\nyaml: line 5: mapping values are not allowed in this context \n",
            db.display().to_string()
        )
    );
    run.unchanged_except(&["Kptfile"]);
    assert!(run.file("Kptfile").contains(
        "      message: |-\n        pkg.render: pkg .:\n        \tpkg.Subpackages: pkg ./db: error reading Kptfile at \"./db\": yaml: line 5: mapping values are not allowed in this context\n"
    ), "{}", run.file("Kptfile"));
}

#[test]
fn selectors_limit_what_the_function_sees() {
    let run = render("selectors", &["--allow-exec"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        run.stderr.contains(
            "[RUNNING] \"sed -e 's/foo/bar/'\" on 1 resource(s) on package \"selectors\"\n"
        ),
        "{}",
        run.stderr
    );
    assert_eq!(
        run.file("cms.yaml"),
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: picked\ndata:\n  value: bar\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: other\ndata:\n  value: foo\n"
    );
    assert!(run.file("Kptfile").starts_with(
        "apiVersion: kpt.dev/v1\nkind: Kptfile\nmetadata:\n  name: app\npipeline:\n  mutators:\n    - exec: sed -e 's/foo/bar/'\n      selectors:\n        - kind: ConfigMap\n          name: picked\nstatus:\n"
    ));
}

#[test]
fn absolute_config_path_is_invalid_and_nothing_is_written() {
    let run = render("config-path-absolute", &["--allow-exec"]);
    assert_eq!(run.code, 1);
    assert_eq!(
        run.stderr,
        "Kptfile is invalid:\nField: `pipeline.mutators[0].configPath`\nValue: \"/etc/config.yaml\"\nReason: path must be relative\n \n"
    );
    run.unchanged_except(&[]);
}

#[test]
fn stdout_output_leaves_the_package_alone() {
    let run = render("exec-sed", &["--allow-exec", "-o", "stdout"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    run.unchanged_except(&[]);
    assert!(
        run.stdout
            .starts_with("apiVersion: config.kubernetes.io/v1\nkind: ResourceList\nitems:\n"),
        "{}",
        run.stdout
    );
    assert!(
        run.stdout.contains("  data:\n    value: bar\n"),
        "{}",
        run.stdout
    );
    assert!(
        !run.stderr.contains("Successfully executed"),
        "{}",
        run.stderr
    );
}

#[test]
fn existing_output_directory_is_refused() {
    let temp = tempfile::tempdir().expect("tempdir");
    let pkg = temp.path().join("exec-sed");
    copy_dir(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/render/exec-sed"),
        &pkg,
    );
    std::fs::create_dir(temp.path().join("out")).expect("mkdir");
    let (code, stderr) = krender_in(
        temp.path(),
        &["fn", "render", "exec-sed", "--allow-exec", "-o", "out"],
    );
    assert_eq!(code, Some(1));
    assert_eq!(
        stderr,
        "error: directory \"out\" already exists, please delete the directory and retry\n"
    );
}

#[test]
fn eval_runs_one_function_on_stdin() {
    use std::io::Write as _;
    let input = "apiVersion: config.kubernetes.io/v1\nkind: ResourceList\nitems:\n- apiVersion: v1\n  kind: ConfigMap\n  metadata:\n    name: a\n  data:\n    value: foo\n";
    let mut command = krender_command();
    let mut child = command
        .args([
            "fn",
            "eval",
            "-",
            "--allow-exec",
            "--exec",
            "sed -e s/foo/bar/",
            "--",
            "k=v",
        ])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(input.as_bytes())
        .expect("write");
    let output = child.wait_with_output().expect("wait");
    assert_eq!(output.status.code(), Some(0));
    assert_eq!(
        normalize_durations(&String::from_utf8_lossy(&output.stderr)),
        "[RUNNING] \"sed -e s/foo/bar/\"\n[PASS] \"sed -e s/foo/bar/\" in 0s\n"
    );
    assert!(String::from_utf8_lossy(&output.stdout).contains("    value: bar\n"));
}

#[test]
fn validators_see_copies_and_change_nothing() {
    let run = render("validator-copies", &["--allow-exec"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    run.unchanged_except(&["Kptfile"]);
    assert!(
        run.file("Kptfile").ends_with("  renderStatus:\n    validationSteps:\n      - exec: sed -e 's/foo/bar/'\n        exitCode: 0\n"),
        "{}",
        run.file("Kptfile")
    );
}

#[test]
fn dfs_renders_subpackages_first() {
    let run = render("dfs-order", &["--allow-exec"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    // The subpackage's pipeline ran first (dry -> sub); the root's pipeline
    // then saw the subpackage's output (sub -> root).
    assert!(
        run.file("sub/cm.yaml").contains("stage: root"),
        "{}",
        run.file("sub/cm.yaml")
    );
    assert!(
        run.file("cm.yaml").contains("stage: dry"),
        "{}",
        run.file("cm.yaml")
    );
    assert!(
        run.stderr.starts_with("Package \"dfs-order/sub\":\n"),
        "{}",
        run.stderr
    );
    assert!(
        run.stderr
            .ends_with("Successfully executed 2 function(s) in 2 package(s).\n"),
        "{}",
        run.stderr
    );
    assert!(
        run.file("Kptfile").ends_with(
            "    mutationSteps:\n      - exec: 'sed -e ''s/stage: dry/stage: sub/'''\n        exitCode: 0\n      - exec: 'sed -e ''s/stage: sub/stage: root/'''\n        exitCode: 0\n"
        ),
        "{}",
        run.file("Kptfile")
    );
}

/// `RUST_LOG` output from the worker threads that run pipelines reaches
/// stderr while the command holds stderr's lock for kpt's own lines (it
/// used to wait for that lock forever), and logging changes no output.
#[test]
fn debug_logging_from_parallel_pipelines_does_not_hang() {
    let temp = tempfile::tempdir().expect("tempdir");
    let root = temp.path().join("root");
    let kptfile = |name: &str| {
        format!(
            "apiVersion: kpt.dev/v1\nkind: Kptfile\nmetadata:\n  name: {name}\npipeline:\n  mutators:\n    - image: ghcr.io/kptdev/krm-functions-catalog/set-labels:latest\n      configMap:\n        owner: {name}\n"
        )
    };
    for pkg in ["", "a", "b", "c", "d", "e", "f"] {
        let dir = root.join(pkg);
        std::fs::create_dir_all(&dir).expect("mkdir");
        let name = if pkg.is_empty() { "root" } else { pkg };
        std::fs::write(dir.join("Kptfile"), kptfile(name)).expect("write");
        std::fs::write(
            dir.join("cm.yaml"),
            format!("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm-{name}\n"),
        )
        .expect("write");
    }
    let run = |log: Option<&str>| {
        let mut command = krender_command();
        command
            .args(["fn", "render"])
            .arg(&root)
            .args(["-o", "stdout", "--no-cache"])
            .env_remove("RUST_LOG")
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped());
        if let Some(log) = log {
            command.env("RUST_LOG", log);
        }
        let mut child = command.spawn().expect("run krender");
        let mut stdout = child.stdout.take().expect("stdout");
        let mut stderr = child.stderr.take().expect("stderr");
        let out = std::thread::spawn(move || {
            let mut text = String::new();
            std::io::Read::read_to_string(&mut stdout, &mut text).expect("read");
            text
        });
        let err = std::thread::spawn(move || {
            let mut text = String::new();
            std::io::Read::read_to_string(&mut stderr, &mut text).expect("read");
            text
        });
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        let status = loop {
            if let Some(status) = child.try_wait().expect("wait") {
                break status;
            }
            if std::time::Instant::now() > deadline {
                let _ = child.kill();
                panic!("krender with RUST_LOG={log:?} hung");
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        };
        assert!(status.success(), "{log:?}: {status}");
        (out.join().expect("stdout"), err.join().expect("stderr"))
    };
    let (plain, plain_log) = run(None);
    let (logged, log) = run(Some("krender=debug"));
    assert_eq!(logged, plain);
    assert!(plain.contains("owner: root"), "{plain}");
    assert!(log.contains("pipeline{package="), "{log}");
    assert!(!plain_log.contains("pipeline{package="), "{plain_log}");
}

/// BFS with three sibling subpackages (the wrong child index used to point
/// past the package list here: a panic, not an error).
#[test]
fn bfs_with_three_siblings_renders_every_package_once() {
    let temp = tempfile::tempdir().expect("tempdir");
    let root = temp.path().join("root");
    let kptfile = |name: &str, pipeline: &str| {
        format!("apiVersion: kpt.dev/v1\nkind: Kptfile\nmetadata:\n  name: {name}\n{pipeline}")
    };
    std::fs::create_dir_all(&root).expect("mkdir");
    std::fs::write(
        root.join("Kptfile"),
        kptfile(
            "root",
            "  annotations:\n    kpt.dev/bfs-rendering: \"true\"\npipeline:\n  mutators:\n    - image: ghcr.io/kptdev/krm-functions-catalog/set-labels:latest\n      configMap:\n        tier: root\n",
        ),
    )
    .expect("write");
    for sub in ["s1", "s2", "s3"] {
        let dir = root.join(sub);
        std::fs::create_dir_all(&dir).expect("mkdir");
        std::fs::write(dir.join("Kptfile"), kptfile(sub, "")).expect("write");
        std::fs::write(
            dir.join("cm.yaml"),
            format!("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {sub}\n"),
        )
        .expect("write");
    }
    let output = krender_command()
        .args(["fn", "render"])
        .arg(&root)
        .output()
        .expect("run krender");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    // The root sees all seven resources: four Kptfiles and three ConfigMaps.
    assert!(stderr.contains("set 7 labels in total"), "{stderr}");
    for sub in ["s1", "s2", "s3"] {
        assert_eq!(
            std::fs::read_to_string(root.join(sub).join("cm.yaml")).expect("read"),
            format!(
                "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {sub}\n  labels:\n    tier: root\n"
            )
        );
    }
}

#[test]
fn a_resource_left_out_by_a_selector_is_still_checked_as_the_next_steps_input() {
    // The first step selects only the Deployment, so it never sees the
    // non-KRM document; the second step gets the whole list and, as in
    // kpt, refuses it. (A step without selectors lets the steps after it
    // skip the check: its output was the whole list, checked.)
    let run = render("non-krm-after-selector", &[]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(
        run.stderr.contains(
            "[RUNNING] \"ghcr.io/kptdev/krm-functions-catalog/set-labels:latest\" on 1 resource(s)"
        ),
        "{}",
        run.stderr
    );
    assert!(
        run.stderr.contains(
            "Error: input resource list must contain only KRM resources: non-krm.yaml: resource must have `apiVersion`"
        ),
        "{}",
        run.stderr
    );
    // Only the Kptfile's renderStatus is written on failure.
    let resources = |files: &BTreeMap<String, Vec<u8>>| {
        let mut files = files.clone();
        files.remove("Kptfile");
        files
    };
    assert_eq!(resources(&run.before), resources(&run.after));
}

/// A package holding a `depth`-deep flow sequence, with set-labels run on it.
fn deep_package(dir: &Path, depth: usize) {
    std::fs::create_dir_all(dir).expect("package dir");
    std::fs::write(
        dir.join("Kptfile"),
        "apiVersion: kpt.dev/v1\nkind: Kptfile\nmetadata:\n  name: deep\npipeline:\n  mutators:\n    - image: set-labels\n      configMap:\n        a: b\n",
    )
    .expect("Kptfile");
    let nested = format!("{}{}", "[".repeat(depth), "]".repeat(depth));
    std::fs::write(
        dir.join("cm.yaml"),
        format!("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: deep\ndata:\n  x: {nested}\n"),
    )
    .expect("resource");
}

/// Input the parser accepts (go-yaml allows 10,000 levels) renders in place
/// without overflowing a stack; deeper input is go-yaml's error, and
/// nothing is written.
#[test]
fn deeply_nested_input_renders_or_fails_cleanly() {
    let temp = tempfile::tempdir().expect("tempdir");
    let pkg = temp.path().join("deep");
    deep_package(&pkg, 9_000);
    let (code, stderr) = krender_in(temp.path(), &["fn", "render", "--no-cache", "deep"]);
    assert_eq!(code, Some(0), "{stderr}");
    let rendered = std::fs::read_to_string(pkg.join("cm.yaml")).expect("read");
    assert!(rendered.contains("a: b"), "labels set");
    assert!(
        rendered.contains(&"[".repeat(9_000)),
        "the sequence is kept"
    );

    let pkg = temp.path().join("deeper");
    deep_package(&pkg, 10_001);
    let before = snapshot(&pkg);
    let (code, stderr) = krender_in(temp.path(), &["fn", "render", "--no-cache", "deeper"]);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stderr.contains("exceeded max depth of 10000"), "{stderr}");
    // Only the Kptfile's status is written, as kpt writes it.
    let after = snapshot(&pkg);
    assert!(
        after.get("cm.yaml") == before.get("cm.yaml"),
        "cm.yaml changed"
    );
    assert_eq!(after.len(), before.len());
}

/// A failing step ends with krender's own line after kpt's: for a builtin,
/// how to run the real image instead; for a catalog function krender has
/// no builtin for (it ran in a container), how to run it without one.
#[test]
fn a_failing_catalog_step_ends_with_how_to_run_it_otherwise() {
    let temp = tempfile::tempdir().unwrap();
    let bin = temp.path().join("bin");
    std::fs::create_dir(&bin).unwrap();
    // A container engine whose daemon is down, as on a laptop.
    let docker = bin.join("docker");
    std::fs::write(
        &docker,
        "#!/bin/sh\necho 'Cannot connect to the Docker daemon' >&2\nexit 125\n",
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&docker, std::fs::Permissions::from_mode(0o755)).unwrap();
    let render = |image: &str, config: &str| {
        let pkg = temp.path().join(image.replace(['/', ':'], "_"));
        std::fs::create_dir_all(&pkg).unwrap();
        std::fs::write(
            pkg.join("Kptfile"),
            format!(
                "apiVersion: kpt.dev/v1\nkind: Kptfile\nmetadata:\n  name: app\npipeline:\n  mutators:\n    - image: {image}\n      configMap:\n{config}"
            ),
        )
        .unwrap();
        std::fs::write(
            pkg.join("cm.yaml"),
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm\n",
        )
        .unwrap();
        let output = crate::support::krender_command()
            .args(["fn", "render"])
            .arg(&pkg)
            .env("PATH", format!("{}:/usr/bin:/bin", bin.display()))
            .output()
            .unwrap();
        assert_eq!(output.status.code(), Some(1));
        String::from_utf8_lossy(&output.stderr).into_owned()
    };
    let stderr = render(
        "ghcr.io/kptdev/krm-functions-catalog/render-helm-chart:latest",
        "        prepend: dev-\n",
    );
    // kpt's check that docker answers, before the step runs anything.
    assert!(
        stderr.contains("Error: exit status 125\ndocker must be running to use this command\n"),
        "{stderr}"
    );
    assert!(
        stderr.contains("is not one of krender's builtins")
            && stderr
                .contains("image = \"ghcr.io/kptdev/krm-functions-catalog/render-helm-chart\""),
        "{stderr}"
    );
    let stderr = render("gcr.io/kpt-fn/set-image:v0.1", "        newName: x\n");
    assert!(
        stderr.contains("failed in krender's builtin set-image")
            && stderr.contains("container = [\"v0.1\"]"),
        "{stderr}"
    );
}

/// `--image-pull-policy` takes kpt's three values in any letter case; any
/// other value is kpt's flag error, before anything runs.
#[test]
fn a_bad_image_pull_policy_is_kpts_flag_error() {
    let temp = tempfile::tempdir().unwrap();
    let pkg = temp.path().join("pkg");
    std::fs::create_dir(&pkg).unwrap();
    std::fs::write(
        pkg.join("Kptfile"),
        "apiVersion: kpt.dev/v1\nkind: Kptfile\nmetadata:\n  name: app\n",
    )
    .unwrap();
    for command in [
        &["fn", "render"][..],
        &["fn", "eval", "--image", "set-namespace"][..],
    ] {
        let output = crate::support::krender_command()
            .args(command)
            .arg(&pkg)
            .args(["--image-pull-policy", "bogus"])
            .output()
            .unwrap();
        assert_eq!(output.status.code(), Some(1), "{command:?}");
        assert_eq!(
            String::from_utf8_lossy(&output.stderr),
            "error: invalid argument \"bogus\" for \"--image-pull-policy\" flag: must be one of: Always, IfNotPresent, Never\n"
        );
    }
    let output = crate::support::krender_command()
        .args(["fn", "render"])
        .arg(&pkg)
        .args(["--image-pull-policy", "always"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0));
}

/// `--truncate-output` is a flag of the whole command, as in kpt: it may
/// come before the subcommand too.
#[test]
fn truncate_output_may_come_before_the_subcommand() {
    let temp = tempfile::tempdir().unwrap();
    let pkg = temp.path().join("exec-fail");
    copy_dir(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/render/exec-fail"),
        &pkg,
    );
    let output = krender_command()
        .arg("--truncate-output=false")
        .args(["fn", "render", "--allow-exec"])
        .arg(&pkg)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("    line6\n"), "{stderr}");
    assert!(!stderr.contains("truncated"), "{stderr}");
}

/// `fn render --check`: nothing is written; a unified diff of every file an
/// in-place render would change, exit 1; exit 0 and no diff on a rendered
/// tree (the Kptfile's status, which a second render rewrites, aside).
#[test]
fn check_prints_the_diff_and_writes_nothing() {
    let temp = tempfile::tempdir().unwrap();
    let cache = temp.path().join("cache");
    let pkg = temp.path().join("hello");
    copy_dir(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/example/hello"),
        &pkg,
    );
    let run = |args: &[&str]| {
        let output = krender_command()
            .current_dir(temp.path())
            .env("KRENDER_CACHE_DIR", &cache)
            .args(["fn", "render", "hello"])
            .args(args)
            .output()
            .unwrap();
        (
            output.status.code(),
            String::from_utf8_lossy(&output.stdout).into_owned(),
            String::from_utf8_lossy(&output.stderr).into_owned(),
        )
    };
    let before = snapshot(&pkg);
    let (code, diff, stderr) = run(&["--check"]);
    assert_eq!(code, Some(1), "{stderr}");
    assert_eq!(snapshot(&pkg), before, "--check wrote");
    for file in ["deployment.yaml", "service.yaml"] {
        assert!(
            diff.contains(&format!("--- a/hello/{file}\n+++ b/hello/{file}\n")),
            "{file} not in {diff}"
        );
    }
    // Only its status would change: not compared.
    assert!(!diff.contains("Kptfile"), "{diff}");
    assert!(diff.contains("+  namespace: staging\n"), "{diff}");
    assert!(stderr.ends_with("2 file(s) would change: the package is not rendered (run `krender fn render` without --check)\n"), "{stderr}");
    // The diff is the render: applied with git, the tree checks clean,
    // and equals the rendered tree apart from the status.
    let status = std::process::Command::new("git")
        .args(["apply", "-"])
        .current_dir(temp.path())
        .stdin(std::process::Stdio::piped())
        .spawn()
        .and_then(|mut child| {
            use std::io::Write;
            child.stdin.take().unwrap().write_all(diff.as_bytes())?;
            child.wait()
        })
        .unwrap();
    assert!(status.success());
    let (code, diff, _) = run(&["--check"]);
    assert_eq!((code, diff.as_str()), (Some(0), ""));
    // A one-line edit shows as that one hunk.
    let service = pkg.join("service.yaml");
    let text = std::fs::read_to_string(&service).unwrap();
    std::fs::write(
        &service,
        text.replace("namespace: staging", "namespace: prod"),
    )
    .unwrap();
    let (code, diff, _) = run(&["--check"]);
    assert_eq!(code, Some(1));
    assert!(
        diff.contains("-  namespace: prod\n+  namespace: staging\n")
            && !diff.contains("deployment.yaml"),
        "{diff}"
    );
    let (code, _, stderr) = run(&["--check", "-o", "stdout"]);
    assert_eq!(code, Some(1));
    assert!(
        stderr.contains("'--check' cannot be used with '--output"),
        "{stderr}"
    );
}

/// A clean `--check` is recorded for the next check, never for an in-place
/// render: that one still rewrites the status as kpt does.
#[test]
fn a_clean_check_does_not_answer_an_in_place_render() {
    let temp = tempfile::tempdir().unwrap();
    let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/example/hello");
    let render = |pkg: &Path, cache: &Path, args: &[&str]| {
        let output = krender_command()
            .env("KRENDER_CACHE_DIR", cache)
            .args(["fn", "render"])
            .arg(pkg)
            .args(args)
            .output()
            .unwrap();
        output.status.code()
    };
    let (a, b) = (temp.path().join("a/hello"), temp.path().join("b/hello"));
    copy_dir(&example, &a);
    copy_dir(&example, &b);
    let (cache_a, cache_b) = (temp.path().join("cache-a"), temp.path().join("cache-b"));
    assert_eq!(render(&a, &cache_a, &[]), Some(0));
    assert_eq!(render(&b, &cache_b, &[]), Some(0));
    assert_eq!(render(&a, &cache_a, &["--check"]), Some(0));
    assert_eq!(render(&a, &cache_a, &["--check"]), Some(0));
    assert_eq!(render(&a, &cache_a, &[]), Some(0));
    assert_eq!(render(&b, &cache_b, &[]), Some(0));
    assert_eq!(snapshot(&a), snapshot(&b));
}

/// `fn render --trace DIR` keeps each step's wire input, output, stderr,
/// exit code and results, per package; a builtin's are the ResourceLists
/// the real function would have read and written.
#[test]
fn trace_keeps_every_step() {
    let temp = tempfile::tempdir().unwrap();
    let pkg = temp.path().join("hello");
    copy_dir(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/example/hello"),
        &pkg,
    );
    let trace = temp.path().join("trace");
    let (code, stderr) = krender_in(temp.path(), &["fn", "render", "hello", "--trace", "trace"]);
    assert_eq!(code, Some(0), "{stderr}");
    let files: Vec<String> = snapshot(&trace).into_keys().collect();
    assert_eq!(
        files,
        [
            "hello/01-mutator-set-namespace/input.yaml",
            "hello/01-mutator-set-namespace/output.yaml",
            "hello/01-mutator-set-namespace/results.yaml",
            "hello/02-mutator-set-labels/input.yaml",
            "hello/02-mutator-set-labels/output.yaml",
            "hello/02-mutator-set-labels/results.yaml",
        ]
    );
    let read = |file: &str| std::fs::read_to_string(trace.join("hello").join(file)).unwrap();
    let input = read("01-mutator-set-namespace/input.yaml");
    assert!(input.starts_with("apiVersion: config.kubernetes.io/v1\nkind: ResourceList\n"));
    assert!(input.contains("functionConfig:"), "{input}");
    // The two resources got their namespace in this step.
    let staged = |text: &str| text.matches("namespace: staging\n").count();
    assert_eq!(
        staged(&read("01-mutator-set-namespace/output.yaml")),
        staged(&input) + 2
    );
    assert!(
        read("01-mutator-set-namespace/results.yaml")
            .contains("namespace [default] updated to \"staging\"")
    );
    // The directory must be new or empty.
    let (code, stderr) = krender_in(temp.path(), &["fn", "render", "hello", "--trace", "trace"]);
    assert_eq!(code, Some(1));
    assert!(
        stderr.contains("--trace directory \"trace\" is not empty"),
        "{stderr}"
    );

    // A failing step: its stderr and exit code.
    let failing = temp.path().join("exec-fail");
    copy_dir(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/render/exec-fail"),
        &failing,
    );
    let (code, _) = krender_in(
        temp.path(),
        &[
            "fn",
            "render",
            "exec-fail",
            "--allow-exec",
            "--trace",
            "trace2",
        ],
    );
    assert_eq!(code, Some(1));
    let step = temp.path().join("trace2/exec-fail/01-mutator-sh");
    assert_eq!(
        std::fs::read_to_string(step.join("stderr.txt")).unwrap(),
        "line1\nline2\nline3\nline4\nline5\nline6\n"
    );
    assert_eq!(
        std::fs::read_to_string(step.join("exit-code.txt")).unwrap(),
        "3\n"
    );
    assert!(step.join("input.yaml").exists());
}

/// Off a terminal, errors are kpt's text alone; `--diagnostics rich` adds
/// the place and a snippet after it (here a Kptfile that does not decode).
#[test]
fn diagnostics_rich_points_at_the_kptfile_line() {
    let temp = tempfile::tempdir().unwrap();
    let pkg = temp.path().join("app");
    std::fs::create_dir(&pkg).unwrap();
    std::fs::write(
        pkg.join("Kptfile"),
        "apiVersion: kpt.dev/v1\nkind: Kptfile\nmetadata:\n  name: app\npipeline:\n  mutators: \"x\"\n",
    )
    .unwrap();
    let kpt_text = "Error: Kptfile at \"APP\" can't be read.\n\nDetails:\nyaml: unmarshal errors:\n  line 6: cannot unmarshal !!str `x` into []v1.Function \n"
        .replace("APP", &pkg.display().to_string());
    let (code, plain) = krender_in(temp.path(), &["fn", "render", "app"]);
    assert_eq!((code, plain.as_str()), (Some(1), kpt_text.as_str()));
    let (code, rich) = krender_in(
        temp.path(),
        &["--diagnostics", "rich", "fn", "render", "app"],
    );
    assert_eq!(code, Some(1));
    let snippet = rich
        .strip_prefix(kpt_text.as_str())
        .unwrap_or_else(|| panic!("{rich}"));
    assert!(
        snippet.contains(&format!("{}:6:13", pkg.join("Kptfile").display()))
            && snippet.contains("6 │   mutators: \"x\"")
            && snippet.contains("cannot unmarshal !!str `x` into []v1.Function"),
        "{snippet}"
    );
    assert!(
        !snippet.contains('\u{1b}'),
        "no colour off a terminal: {snippet:?}"
    );
}

/// `--diagnostics rich` points at the key of an unknown field (kpt's text
/// names only the line) and at an apiVersion that is not a Kptfile's.
#[test]
fn diagnostics_rich_points_at_the_field_and_the_api_version() {
    let temp = tempfile::tempdir().unwrap();
    let pkg = temp.path().join("app");
    std::fs::create_dir(&pkg).unwrap();
    let kptfile = pkg.join("Kptfile");
    for (text, place, marked) in [
        (
            "apiVersion: kpt.dev/v1\nkind: Kptfile\nmetadata:\n  name: app\npipeline:\n  mutators:\n    - image: set-namespace:v0.4\n      configPth: x.yaml\n",
            ":8:7",
            "field configPth not found in type v1.Function",
        ),
        (
            "apiVersion: kpt.dev/v2\nkind: Kptfile\nmetadata:\n  name: app\n",
            ":1:13",
            "not kpt.dev/v1",
        ),
    ] {
        std::fs::write(&kptfile, text).unwrap();
        let (code, rich) = krender_in(
            temp.path(),
            &["--diagnostics", "rich", "fn", "render", "app"],
        );
        assert_eq!(code, Some(1), "{rich}");
        assert!(
            rich.contains(&format!("{}{place}", kptfile.display())) && rich.contains(marked),
            "{rich}"
        );
    }
}

/// A tag whose behaviour the builtin does not follow (set-namespace v0.3
/// only replaced existing namespaces) is not rendered the new way: it goes
/// to the container runtime, and when that fails the last line says why
/// and what to do. Nothing is written but the status.
#[test]
fn a_tag_the_builtin_does_not_follow_is_refused_with_the_reason() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(
        dir.path().join("Kptfile"),
        "apiVersion: kpt.dev/v1\nkind: Kptfile\nmetadata:\n  name: pkg\npipeline:\n  mutators:\n  - image: gcr.io/kpt-fn/set-namespace:v0.3.4\n    configMap:\n      namespace: prod\n",
    )
    .expect("write");
    let config = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm\n";
    std::fs::write(dir.path().join("cm.yaml"), config).expect("write");
    let (code, stderr) = krender_in(
        dir.path(),
        &["fn", "render", ".", "--image-pull-policy", "Never"],
    );
    assert_eq!(code, Some(1), "{stderr}");
    let last = stderr.lines().last().unwrap_or_default();
    assert!(
        last.starts_with("krender: builtin set-namespace does not implement tag v0.3.4 (v0.3 only replaces existing namespaces"),
        "{stderr}"
    );
    assert!(
        last.ends_with("map it in render.toml to an executable or a container image"),
        "{last}"
    );
    assert_eq!(
        std::fs::read_to_string(dir.path().join("cm.yaml")).expect("read"),
        config
    );
}

/// The format builtin under `fn render`: its key order is undone by kpt's
/// order restore, so what stays is what kyaml's formatter changes besides
/// order: containers sorted by name (their keys then follow the input's
/// container at the same place), and scalars quoted or unquoted by their
/// field's OpenAPI type. The expectation is what kpt itself wrote with the
/// builtin run as an exec function.
#[test]
fn format_builtin_sorts_containers_and_quotes_by_schema() {
    let run = render("format-example", &[]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let expected = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/render/format-example.expected.yaml"),
    )
    .expect("expectation");
    assert_eq!(run.file("resources.yaml"), expected);
    run.unchanged_except(&["resources.yaml", "Kptfile"]);
}

/// kpt's attribution on a render: a Config Connector resource's
/// `cnrm.cloud.google.com/blueprint` gets the `fn` group joined to its
/// `krm-` part (`krm-pkg` becomes `krm-pkg-fn`), or a `krm-fn` part.
#[test]
fn attribution_joins_the_fn_group_as_kpt_does() {
    let temp = tempfile::tempdir().unwrap();
    let pkg = temp.path().join("pkg");
    std::fs::create_dir(&pkg).unwrap();
    std::fs::write(
        pkg.join("Kptfile"),
        "apiVersion: kpt.dev/v1\nkind: Kptfile\nmetadata:\n  name: pkg\n",
    )
    .unwrap();
    let resource = |name: &str, value: &str| {
        format!(
            "apiVersion: compute.cnrm.cloud.google.com/v1beta1\nkind: ComputeNetwork\nmetadata:\n  name: {name}\n  annotations:\n    cnrm.cloud.google.com/blueprint: {value}\n"
        )
    };
    std::fs::write(pkg.join("a.yaml"), resource("a", "'krm-pkg'")).unwrap();
    std::fs::write(pkg.join("b.yaml"), resource("b", "cnrm/landing-zone:v1")).unwrap();
    // Unchanged, but written single-quoted as kyaml's SetAnnotation writes it.
    std::fs::write(pkg.join("c.yaml"), resource("c", "krm-fn")).unwrap();
    let output = crate::support::krender_command()
        .args(["fn", "render"])
        .arg(&pkg)
        .env_remove("KRM_DISABLE_ATTRIBUTION")
        .output()
        .unwrap();
    assert_eq!(
        output.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let read = |file: &str| std::fs::read_to_string(pkg.join(file)).unwrap();
    assert!(
        read("a.yaml").contains("cnrm.cloud.google.com/blueprint: 'krm-pkg-fn'"),
        "{}",
        read("a.yaml")
    );
    assert!(
        read("b.yaml").contains("cnrm.cloud.google.com/blueprint: 'cnrm/landing-zone:v1,krm-fn'"),
        "{}",
        read("b.yaml")
    );
    assert!(
        read("c.yaml").contains("cnrm.cloud.google.com/blueprint: 'krm-fn'"),
        "{}",
        read("c.yaml")
    );
}
