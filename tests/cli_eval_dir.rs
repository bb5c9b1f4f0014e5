//! End-to-end tests of `krender fn eval DIR` on `fixtures/eval/pkg` (a
//! package with comments, a nested directory, a subpackage and a
//! `.krmignore`d malformed file). Each test copies the package and the
//! exec functions of `fixtures/eval/fns` into a temporary directory, runs
//! the binary there, and compares exit code, stdout, stderr and every file
//! byte for byte. The expected trees and streams in `fixtures/eval/expected`
//! were recorded with kpt 1.0.0-beta.56 (`fixtures/eval/record-with-kpt.sh`);
//! stderr follows the newer kpt style `fn render` uses for function output
//! (unquoted `Stderr:` lines); eval's own errors are plain Go errors in
//! kpt, printed by kubectl's handler as `error: ...` (as kpt 1.0.0-beta.56
//! prints them).

use crate::support::{copy_dir, krender_command, krender_in, normalize_durations, snapshot};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/eval")
}

struct Run {
    code: i32,
    stdout: String,
    stderr: String,
    temp: tempfile::TempDir,
}

impl Run {
    fn pkg(&self) -> BTreeMap<String, Vec<u8>> {
        snapshot(&self.temp.path().join("pkg"))
    }

    fn read(&self, rel: &str) -> String {
        std::fs::read_to_string(self.temp.path().join(rel)).unwrap_or_default()
    }
}

/// Runs `krender fn eval pkg <args>` in a scratch directory holding the
/// package as `pkg/`, the functions and `fncfg.yaml`.
fn eval(args: &[&str]) -> Run {
    eval_target("pkg", args)
}

/// Like [`eval`] on another target below the scratch directory.
fn eval_target(target: &str, args: &[&str]) -> Run {
    let temp = tempfile::tempdir().expect("tempdir");
    copy_dir(&fixtures().join("pkg"), &temp.path().join("pkg"));
    copy_dir(&fixtures().join("fns"), temp.path());
    std::fs::copy(
        fixtures().join("fncfg.yaml"),
        temp.path().join("fncfg.yaml"),
    )
    .expect("copy");
    let output = Command::new(env!("CARGO_BIN_EXE_krender"))
        .args(["fn", "eval", target])
        .args(args)
        .current_dir(temp.path())
        .env_remove("KPT_IMAGE_PREFIX")
        .env("KRENDER_CACHE_DIR", temp.path().join(".cache"))
        .output()
        .expect("run krender");
    Run {
        code: output.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: normalize_durations(&String::from_utf8_lossy(&output.stderr)),
        temp,
    }
}

fn expected(rel: &str) -> String {
    std::fs::read_to_string(fixtures().join("expected").join(rel)).expect("expected file")
}

fn assert_tree(actual: &BTreeMap<String, Vec<u8>>, expected: &BTreeMap<String, Vec<u8>>) {
    assert_eq!(
        actual.keys().collect::<Vec<_>>(),
        expected.keys().collect::<Vec<_>>(),
        "set of files"
    );
    for (rel, bytes) in expected {
        assert_eq!(
            String::from_utf8_lossy(&actual[rel]),
            String::from_utf8_lossy(bytes),
            "{rel}"
        );
    }
}

fn original() -> BTreeMap<String, Vec<u8>> {
    snapshot(&fixtures().join("pkg"))
}

fn pass_lines(name: &str) -> String {
    format!("[RUNNING] \"{name}\"\n[PASS] \"{name}\" in 0s\n")
}

#[test]
fn eval_dir_rewrites_only_the_changed_file() {
    let run = eval(&["--allow-exec", "--exec", "./rename.sh", "--", "a=b"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(run.stderr, pass_lines("./rename.sh"));
    assert_eq!(run.stdout, "");
    assert_tree(&run.pkg(), &snapshot(&fixtures().join("expected/rename")));
}

#[test]
fn eval_dir_input_is_the_whole_tree_with_kpt_annotations() {
    // Kptfiles and the subpackage are read, `.krmignore` and non-resource
    // files are not; the ConfigMap's kind comes from the leading bare word.
    let run = eval(&[
        "--allow-exec",
        "--exec",
        "./record.sh",
        "--",
        "Foo",
        "a=1",
        "b=true",
        "c=x y",
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(run.read("input.yaml"), expected("record-input.yaml"));
    assert_tree(&run.pkg(), &original());
}

#[test]
fn eval_dir_fn_config_file_is_the_function_config() {
    let run = eval(&[
        "--allow-exec",
        "--exec",
        "./record.sh",
        "--fn-config",
        "fncfg.yaml",
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(run.read("input.yaml"), expected("fn-config-input.yaml"));
}

#[test]
fn eval_dir_deletes_emptied_files_and_writes_new_resources_at_default_paths() {
    let run = eval(&["--allow-exec", "--exec", "./drop.sh"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(run.stderr, pass_lines("./drop.sh"));
    assert_tree(&run.pkg(), &snapshot(&fixtures().join("expected/drop")));
}

#[test]
fn eval_dir_failing_function_changes_nothing() {
    let run = eval(&["--allow-exec", "--exec", "./fail.sh", "--", "a=b"]);
    assert_eq!(run.code, 1);
    assert_eq!(
        run.stderr,
        "[RUNNING] \"./fail.sh\"\n[FAIL] \"./fail.sh\" in 0s\n  Stderr:\n    something bad\n    \n  Exit code: 3\n\n"
    );
    assert_eq!(run.stdout, "");
    assert_tree(&run.pkg(), &original());
}

#[test]
fn eval_dir_unparsable_output_changes_nothing() {
    let run = eval(&["--allow-exec", "--exec", "echo 'a: ['"]);
    assert_eq!(run.code, 1);
    assert_eq!(
        run.stderr,
        "[RUNNING] \"echo 'a: ['\"\n[FAIL] \"echo 'a: ['\" in 0s\nerror: MalformedYAMLError: yaml: line 1: did not find expected node content\n"
    );
    assert_tree(&run.pkg(), &original());
}

#[test]
fn eval_dir_stdout_prints_the_list_and_changes_nothing() {
    let run = eval(&["--allow-exec", "--exec", "./rename.sh", "-o", "stdout"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(run.stdout, expected("rename-stdout.yaml"));
    assert_eq!(run.stderr, pass_lines("./rename.sh"));
    assert_tree(&run.pkg(), &original());
}

#[test]
fn eval_dir_unwrap_prints_the_resources() {
    let run = eval(&["--allow-exec", "--exec", "./rename.sh", "-o", "unwrap"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(run.stdout, expected("rename-unwrap.yaml"));
    assert_tree(&run.pkg(), &original());
}

#[test]
fn eval_dir_output_dir_is_written_and_must_not_exist() {
    let run = eval(&["--allow-exec", "--exec", "./rename.sh", "-o", "out"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_tree(
        &snapshot(&run.temp.path().join("out")),
        &snapshot(&fixtures().join("expected/rename-out")),
    );
    assert_tree(&run.pkg(), &original());

    // kpt checks the directory after running the function.
    let output = krender_command()
        .args(["fn", "eval", "pkg", "--allow-exec", "--exec", "./rename.sh"])
        .args(["-o", "out"])
        .current_dir(run.temp.path())
        .output()
        .expect("run");
    assert_eq!(output.status.code(), Some(1));
    assert_eq!(
        normalize_durations(&String::from_utf8_lossy(&output.stderr)),
        format!(
            "{}error: directory \"out\" already exists, please delete the directory and retry\n",
            pass_lines("./rename.sh")
        )
    );
}

#[test]
fn eval_dir_results_dir() {
    let run = eval(&[
        "--allow-exec",
        "--exec",
        "./rename.sh",
        "--results-dir",
        "results",
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(
        run.stderr,
        format!(
            "{}\nFor complete results, see results/results.yaml\n",
            pass_lines("./rename.sh")
        )
    );
    assert_eq!(
        run.read("results/results.yaml"),
        "apiVersion: kpt.dev/v1\nkind: FunctionResultList\nmetadata:\n  name: fnresults\nexitCode: 0\nitems:\n  - exec: ./rename.sh\n    exitCode: 0\n"
    );
}

#[test]
fn eval_dir_builtin_image_sets_the_namespace_in_subpackages_too() {
    let run = eval(&["--image", "set-namespace:v0.4.1", "--", "namespace=prod"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let image = "ghcr.io/kptdev/krm-functions-catalog/set-namespace:v0.4.1";
    assert_eq!(
        run.stderr,
        format!(
            "[RUNNING] \"{image}\"\n[PASS] \"{image}\" in 0s\n  [Results]:\n    [info]: namespace [default] updated to \"prod\", 4 value(s) changed\n    [info]: all `depends-on` annotations are up-to-date. no `namespace` changed\n"
        )
    );
    let mut want = original();
    let with_namespace = |text: &[u8], name: &str| {
        String::from_utf8_lossy(text)
            .replace(
                &format!("  name: {name}\n"),
                &format!("  name: {name}\n  namespace: prod\n"),
            )
            .replace(
                &format!("  name: {name} # name comment\n"),
                &format!("  name: {name} # name comment\n  namespace: prod\n"),
            )
            .into_bytes()
    };
    let cm = with_namespace(&with_namespace(&want["cm.yaml"], "cm1"), "cm2");
    want.insert("cm.yaml".into(), cm);
    let svc = with_namespace(&want["dir/svc.yaml"], "s");
    want.insert("dir/svc.yaml".into(), svc);
    let deploy = with_namespace(&want["sub/deploy.yaml"], "d");
    want.insert("sub/deploy.yaml".into(), deploy);
    assert_tree(&run.pkg(), &want);
}

#[test]
fn eval_dir_argument_errors() {
    let run = eval(&["--allow-exec", "--exec", "./rename.sh", "--", "a=b", "c"]);
    assert_eq!(run.code, 1);
    assert_eq!(
        run.stderr,
        "error: args must have keys and values separated by =\n"
    );
    let run = eval(&[
        "--allow-exec",
        "--exec",
        "./rename.sh",
        "--fn-config",
        "fncfg.yaml",
        "--",
        "a=b",
    ]);
    assert_eq!(run.code, 1);
    assert_eq!(
        run.stderr,
        "error: function arguments can only be specified without function config file\n"
    );
    let run = eval(&[
        "--allow-exec",
        "--exec",
        "./rename.sh",
        "--fn-config",
        "missing.yaml",
    ]);
    assert_eq!(run.code, 1);
    assert_eq!(
        run.stderr,
        "error: missing function config file: missing.yaml\n"
    );
    assert_tree(&run.pkg(), &original());
}

#[test]
fn eval_dir_runs_an_exec_function_without_allow_exec() {
    // kpt's `fn eval` has no `--allow-exec`: the command line names the
    // executable. The flag is still accepted, with the same result.
    for flags in [&[][..], &["--allow-exec"][..]] {
        let mut argv = flags.to_vec();
        argv.extend(["--exec", "./rename.sh", "--", "a=b"]);
        let run = eval(&argv);
        assert_eq!(run.code, 0, "{flags:?}: {}", run.stderr);
        assert_eq!(run.stderr, pass_lines("./rename.sh"));
        assert_tree(&run.pkg(), &snapshot(&fixtures().join("expected/rename")));
    }
}

#[test]
fn eval_dir_missing_directory() {
    let temp = tempfile::tempdir().expect("tempdir");
    let (code, stderr) = krender_in(temp.path(), &["fn", "eval", "nope", "--exec", "cat"]);
    assert_eq!(code, Some(1));
    assert_eq!(stderr, "error: lstat nope: no such file or directory\n");
}

#[test]
fn eval_dir_selectors_pick_the_function_input() {
    // Selected resources carry kpt's temporary resource id; data values a
    // YAML 1.1 reader would not take as strings are quoted as kyaml does.
    let run = eval(&[
        "--allow-exec",
        "--exec",
        "./record.sh",
        "--match-kind",
        "ConfigMap",
        "--exclude-name",
        "cm1",
        "--",
        "x=y",
        "a=1:20",
        "b=on",
        "c=010",
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(
        run.stderr,
        "[RUNNING] \"./record.sh\" on 1 resource(s)\n[PASS] \"./record.sh\" in 0s\n"
    );
    assert_eq!(run.read("input.yaml"), expected("select-input.yaml"));
    assert_tree(&run.pkg(), &original());
}

#[test]
fn eval_dir_excluded_resources_survive_a_function_that_drops_everything_else() {
    // drop.sh removes the Service and the Deployment it sees; the excluded
    // Service is merged back untouched.
    let run = eval(&[
        "--allow-exec",
        "--exec",
        "./drop.sh",
        "--exclude-kind",
        "Service",
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(
        run.stderr,
        "[RUNNING] \"./drop.sh\" on 5 resource(s)\n[PASS] \"./drop.sh\" in 0s\n"
    );
    assert_tree(
        &run.pkg(),
        &snapshot(&fixtures().join("expected/select-drop")),
    );
}

#[test]
fn eval_single_file_is_read_and_written_back_alone() {
    let run = eval_target(
        "pkg/cm.yaml",
        &["--allow-exec", "--exec", "./rename.sh", "--", "a=b"],
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(run.stderr, pass_lines("./rename.sh"));
    assert_tree(&run.pkg(), &snapshot(&fixtures().join("expected/rename")));
}

#[test]
fn eval_stdin_stream_gets_kpt_reader_annotations() {
    // `fn eval -` on a plain multi-document stream (not a ResourceList):
    // each document is indexed and keeps its own sequence indentation.
    let temp = tempfile::tempdir().expect("tempdir");
    copy_dir(&fixtures().join("fns"), temp.path());
    let input = std::fs::File::open(fixtures().join("stream.yaml")).expect("stream");
    let output = krender_command()
        .args(["fn", "eval", "-", "--allow-exec", "--exec", "./record.sh"])
        .stdin(input)
        .current_dir(temp.path())
        .output()
        .expect("run krender");
    assert_eq!(output.status.code(), Some(0));
    assert_eq!(
        std::fs::read_to_string(temp.path().join("input.yaml")).expect("input"),
        expected("stream-input.yaml")
    );
    assert_eq!(
        String::from_utf8_lossy(&output.stdout),
        expected("stream-stdout.yaml")
    );
}

#[test]
fn eval_dir_unusable_output_is_recorded_as_exit_code_one() {
    let run = eval(&[
        "--allow-exec",
        "--exec",
        "echo 'a: ['",
        "--results-dir",
        "results",
    ]);
    assert_eq!(run.code, 1);
    assert_eq!(
        run.stderr,
        "[RUNNING] \"echo 'a: ['\"\n[FAIL] \"echo 'a: ['\" in 0s\n\nFor complete results, see results/results.yaml\nerror: MalformedYAMLError: yaml: line 1: did not find expected node content\n"
    );
    assert_eq!(
        run.read("results/results.yaml"),
        "apiVersion: kpt.dev/v1\nkind: FunctionResultList\nmetadata:\n  name: fnresults\nexitCode: 1\nitems:\n  - exec: 'echo ''a: ['''\n    exitCode: 1\n"
    );
    assert_tree(&run.pkg(), &original());
}

#[test]
fn eval_dir_image_wins_over_exec_as_in_kpt() {
    let run = eval(&[
        "--exec",
        "./fail.sh",
        "--image",
        "set-namespace:v0.4.1",
        "--",
        "namespace=prod",
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        run.read("pkg/dir/svc.yaml")
            .ends_with("  name: s\n  namespace: prod\n"),
        "{}",
        run.read("pkg/dir/svc.yaml")
    );
}

/// `--save` adds the function to the Kptfile, then updates it in place
/// (same exec), keeping comments and field order, with the config path
/// relative to the package: the bytes kpt beta.56 wrote for the same
/// commands (`fixtures/eval/save/README.md`).
#[test]
fn eval_save_writes_the_function_into_the_kptfile_as_kpt_does() {
    let temp = tempfile::tempdir().expect("tempdir");
    let pkg = temp.path().join("pkg");
    copy_dir(&fixtures().join("save/pkg"), &pkg);
    let run = |args: &[&str]| {
        let output = Command::new(env!("CARGO_BIN_EXE_krender"))
            .args(["fn", "eval", ".", "--exec", "cat", "--allow-exec"])
            .args(args)
            .current_dir(&pkg)
            .env("KRENDER_CACHE_DIR", temp.path().join(".cache"))
            .output()
            .expect("run krender");
        let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
        (output.status.code(), stderr)
    };
    let steps: [(&[&str], &str); 3] = [
        (
            &["--save", "-t", "mutator", "--", "a=b", "y=on"],
            "Added \"cat\" as mutator in the Kptfile.\n",
        ),
        (
            &[
                "--save",
                "-t",
                "validator",
                "--fn-config",
                "sub/fc.yaml",
                "--match-kind",
                "ConfigMap",
            ],
            "Added \"cat\" as validator in the Kptfile.\n",
        ),
        (
            &["-s", "--type", "mutator", "--exclude-name", "c"],
            "Updated \"cat\" as mutator in the Kptfile.\n",
        ),
    ];
    for (args, message) in steps {
        let (code, stderr) = run(args);
        assert_eq!(code, Some(0), "{stderr}");
        assert!(stderr.ends_with(message), "{stderr}");
    }
    let expected =
        std::fs::read_to_string(fixtures().join("save/expected-Kptfile")).expect("expected");
    assert_eq!(
        std::fs::read_to_string(pkg.join("Kptfile")).expect("Kptfile"),
        expected
    );

    // kpt's flag checks come first and change nothing.
    for (args, message) in [
        (
            &["--save"][..],
            "--type must be specified if saving functions to Kptfile (--save=true)",
        ),
        (
            &["--save", "-t", "generator"][..],
            "--type must be either `mutator` or `validator`",
        ),
        (
            &["-m"][..],
            "--include-meta-resources is no longer necessary because meta resources are now included by default",
        ),
    ] {
        let (code, stderr) = run(args);
        assert_eq!(code, Some(1), "{stderr}");
        assert_eq!(stderr, format!("error: {message}\n"));
    }
    assert_eq!(
        std::fs::read_to_string(pkg.join("Kptfile")).expect("Kptfile"),
        expected
    );
}

#[test]
fn eval_dir_checks_the_function_input_and_output_are_krm() {
    // kpt's function runner refuses a function's output with a resource
    // that is not KRM (here every name is blanked), and its input likewise;
    // either way nothing is written. Texts as kpt 1.0.0-beta.56 prints them.
    let run = eval(&["--exec", "sed -e s/name:.*/name:/"]);
    assert_eq!(run.code, 1);
    assert_eq!(
        run.stderr,
        "[RUNNING] \"sed -e s/name:.*/name:/\"\n[FAIL] \"sed -e s/name:.*/name:/\" in 0s\nerror: output resource list must contain only KRM resources: Kptfile: resource must have `metadata.name`\n"
    );
    assert_tree(&run.pkg(), &original());

    let temp = tempfile::tempdir().expect("tempdir");
    copy_dir(&fixtures().join("pkg"), &temp.path().join("pkg"));
    std::fs::write(
        temp.path().join("pkg/nokrm.yaml"),
        "kind: Foo\nmetadata:\n  name: nokrm\n",
    )
    .expect("write");
    let before = snapshot(&temp.path().join("pkg"));
    let (code, stderr) = krender_in(temp.path(), &["fn", "eval", "pkg", "--exec", "cat"]);
    assert_eq!(code, Some(1));
    assert_eq!(
        normalize_durations(&stderr),
        "[RUNNING] \"cat\"\n[FAIL] \"cat\" in 0s\nerror: input resource list must contain only KRM resources: nokrm.yaml: resource must have `apiVersion`\n"
    );
    assert_tree(&snapshot(&temp.path().join("pkg")), &before);
}

/// A scratch package with one ConfigMap, and a `bin/` holding a fake
/// container engine `name` that logs its arguments and echoes its input
/// (a function that changes nothing).
fn container_scratch(engine: &str) -> (tempfile::TempDir, PathBuf) {
    // kpt's check that the engine answers is not logged: `calls` holds the
    // runs.
    container_scratch_with(engine, "[ \"$1\" = version ] && echo 24.0.7 && exit 0\n")
}

/// [`container_scratch`] with `prelude` at the top of the fake engine.
fn container_scratch_with(engine: &str, prelude: &str) -> (tempfile::TempDir, PathBuf) {
    use std::os::unix::fs::PermissionsExt;
    let temp = tempfile::tempdir().unwrap();
    let pkg = temp.path().join("pkg");
    std::fs::create_dir(&pkg).unwrap();
    std::fs::write(
        pkg.join("cm.yaml"),
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm\n",
    )
    .unwrap();
    let bin = temp.path().join("bin");
    std::fs::create_dir(&bin).unwrap();
    let fake = bin.join(engine);
    std::fs::write(
        &fake,
        format!(
            "#!/bin/sh\n{prelude}echo \"$*\" >> {}\nexec cat\n",
            temp.path().join("calls").display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
    (temp, bin)
}

/// kpt's `--network`, `--mount`, `-e/--env` and `--as-current-user` reach
/// the container engine as kpt passes them.
#[test]
fn container_flags_reach_the_engine() {
    let (temp, bin) = container_scratch("docker");
    let output = krender_command()
        .current_dir(temp.path())
        .args([
            "fn",
            "eval",
            "pkg",
            "--image",
            "example.com/fn:v1",
            "--network",
        ])
        .args(["--mount", "type=bind,src=/tmp,dst=/data", "-e", "FOO=bar"])
        .args(["--env", "HOME", "--as-current-user"])
        .env("PATH", format!("{}:/usr/bin:/bin", bin.display()))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    let calls = std::fs::read_to_string(temp.path().join("calls")).unwrap();
    let uid = String::from_utf8(Command::new("id").arg("-u").output().unwrap().stdout).unwrap();
    let gid = String::from_utf8(Command::new("id").arg("-g").output().unwrap().stdout).unwrap();
    for wanted in [
        "--network host ".to_owned(),
        format!("--user {}:{} ", uid.trim(), gid.trim()),
        "--mount type=bind,src=/tmp,dst=/data -e FOO=bar -e HOME example.com/fn:v1\n".to_owned(),
    ] {
        assert!(calls.contains(&wanted), "{wanted:?} not in {calls}");
    }
    // Without the flags: no network, the unprivileged user.
    let output = krender_command()
        .current_dir(temp.path())
        .args(["fn", "eval", "pkg", "--image", "example.com/fn:v1"])
        .env("PATH", format!("{}:/usr/bin:/bin", bin.display()))
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0));
    let calls = std::fs::read_to_string(temp.path().join("calls")).unwrap();
    let last = calls.lines().last().unwrap();
    assert!(
        last.contains("--network none --user nobody ") && last.ends_with(" example.com/fn:v1"),
        "{last}"
    );
}

/// The container-only flags are refused for `--exec` with kpt's text;
/// nothing runs.
#[test]
fn container_flags_are_refused_for_exec() {
    let (temp, _bin) = container_scratch("docker");
    let kpt_text = "error: --mount, --as-current-user, --network and --env can only be used with container functions\n";
    for flags in [
        &["--network"][..],
        &["--mount", "type=bind,src=/a,dst=/b"][..],
        &["-e", "A=1"][..],
        &["--env", "A"][..],
        &["--as-current-user"][..],
    ] {
        let output = krender_command()
            .current_dir(temp.path())
            .args(["fn", "eval", "pkg", "--exec", "./missing.sh"])
            .args(flags)
            .output()
            .unwrap();
        assert_eq!(output.status.code(), Some(1), "{flags:?}");
        assert_eq!(
            String::from_utf8_lossy(&output.stderr),
            kpt_text,
            "{flags:?}"
        );
        assert!(output.stdout.is_empty());
    }
}

/// kpt accepts its container flags for every image, and so does krender
/// for a function it runs in process: each flag, alone, renders exactly
/// what the same command without it renders, and says at info level that
/// it had no effect.
#[test]
fn container_flags_are_accepted_for_builtins() {
    let (temp, _bin) = container_scratch("docker");
    let eval = |dir: &str, flags: &[&str]| {
        krender_command()
            .current_dir(temp.path())
            .env("RUST_LOG", "krender=info")
            .args(["fn", "eval", dir, "-i", "set-namespace:v0.4"])
            .args(flags)
            .args(["--", "namespace=x"])
            .output()
            .unwrap()
    };
    let copy = |name: &str| {
        let to = temp.path().join(name);
        copy_dir(&temp.path().join("pkg"), &to);
        to
    };
    let reference_dir = copy("reference");
    let reference = eval("reference", &[]);
    assert_eq!(reference.status.code(), Some(0));
    let expected = snapshot(&reference_dir);
    assert_ne!(
        expected,
        snapshot(&temp.path().join("pkg")),
        "set-namespace changed nothing"
    );
    for (n, (flags, named)) in [
        (&["--network"][..], "--network"),
        (&["--mount", "type=bind,src=/a,dst=/b"][..], "--mount"),
        (&["-e", "A=1"][..], "--env"),
        (&["--env", "A"][..], "--env"),
        (&["--as-current-user"][..], "--as-current-user"),
    ]
    .into_iter()
    .enumerate()
    {
        let name = format!("flag{n}");
        let dir = copy(&name);
        let output = eval(&name, flags);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(0), "{flags:?}: {stderr}");
        assert_eq!(snapshot(&dir), expected, "{flags:?}");
        assert_eq!(output.stdout, reference.stdout, "{flags:?}");
        assert!(
            stderr.contains(
                "set-namespace runs in process: the container flags have no effect on it"
            ) && stderr.contains(&format!("flags={named}")),
            "{flags:?}: {stderr}"
        );
    }
    // `--allow-alpha-wasm` is accepted, as kpt accepts it.
    let output = krender_command()
        .current_dir(temp.path())
        .args([
            "fn",
            "eval",
            "pkg",
            "-i",
            "set-namespace:v0.4",
            "--allow-alpha-wasm",
        ])
        .args(["--", "namespace=x"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0));
}

/// `KPT_FN_RUNTIME` picks the engine (docker, podman, nerdctl); another
/// value fails the container step with kpt's message.
#[test]
fn kpt_fn_runtime_picks_the_engine() {
    let (temp, bin) = container_scratch("podman");
    let eval = |runtime: &str| {
        krender_command()
            .current_dir(temp.path())
            .args(["fn", "eval", "pkg", "--image", "example.com/fn:v1"])
            .env("PATH", format!("{}:/usr/bin:/bin", bin.display()))
            .env("KPT_FN_RUNTIME", runtime)
            .output()
            .unwrap()
    };
    let output = eval("Podman");
    assert_eq!(
        output.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        std::fs::read_to_string(temp.path().join("calls"))
            .unwrap()
            .starts_with("run ")
    );
    let output = eval("nerdctl");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1));
    assert!(
        stderr.contains("exec: \"nerdctl\": executable file not found in $PATH"),
        "{stderr}"
    );
    let output = eval("bogus");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1));
    assert!(
        stderr
            .contains("unsupported runtime: \"bogus\" the runtime must be either docker or podman"),
        "{stderr}"
    );
}

/// A docker client whose daemon does not answer: the step fails with
/// kpt's text (`Error: exit status 1`, then kpt's advice), exit 1, and the
/// engine is never asked to run anything.
#[test]
fn a_docker_without_a_daemon_fails_as_kpt_says() {
    let (temp, bin) = container_scratch_with(
        "docker",
        "[ \"$1\" = version ] && echo 28.2.2 && echo 'Cannot connect to the Docker daemon' >&2 && exit 1\n",
    );
    std::fs::write(
        temp.path().join("pkg/Kptfile"),
        "apiVersion: kpt.dev/v1\nkind: Kptfile\nmetadata:\n  name: pkg\npipeline:\n  mutators:\n    - image: example.com/fn:v1\n",
    )
    .unwrap();
    let output = krender_command()
        .current_dir(temp.path())
        .args(["fn", "render", "pkg", "--no-cache"])
        .env("PATH", format!("{}:/usr/bin:/bin", bin.display()))
        .output()
        .unwrap();
    let stderr = crate::support::normalize_durations(&String::from_utf8_lossy(&output.stderr));
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.ends_with(
            "[FAIL] \"example.com/fn:v1\" in 0s\nError: exit status 1\n\
             docker must be running to use this command\n\
             To install docker, follow the instructions at https://docs.docker.com/get-docker/.\n \n"
        ),
        "{stderr}"
    );
    assert!(
        !temp.path().join("calls").exists(),
        "the engine was asked to run"
    );
    // `fn ls` says so too.
    let output = krender_command()
        .current_dir(temp.path())
        .args(["fn", "ls", "pkg"])
        .env("PATH", format!("{}:/usr/bin:/bin", bin.display()))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        stdout.contains("which does not answer (docker must be running to use this command)"),
        "{stdout}"
    );
}

/// `fn render --allow-network` gives container functions the host network,
/// as kpt does; without it they get none.
#[test]
fn render_allow_network_reaches_the_engine() {
    let (temp, bin) = container_scratch("docker");
    std::fs::write(
        temp.path().join("pkg/Kptfile"),
        "apiVersion: kpt.dev/v1\nkind: Kptfile\nmetadata:\n  name: pkg\npipeline:\n  mutators:\n    - image: example.com/fn:v1\n",
    )
    .unwrap();
    for (flags, network) in [(&["--allow-network"][..], "host"), (&[][..], "none")] {
        let output = krender_command()
            .current_dir(temp.path())
            .args(["fn", "render", "pkg", "--no-cache"])
            .args(flags)
            .env("PATH", format!("{}:/usr/bin:/bin", bin.display()))
            .output()
            .unwrap();
        assert_eq!(
            output.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
        let calls = std::fs::read_to_string(temp.path().join("calls")).unwrap();
        let last = calls.lines().last().unwrap();
        assert!(last.contains(&format!("--network {network} ")), "{last}");
    }
}

/// An exec function whose program does not start fails as kpt's runner
/// says: `unexpected function error:` and Go's error (a bare name is looked
/// up on PATH, a path is started as it is).
#[test]
fn a_missing_exec_program_is_kpts_unexpected_function_error() {
    for (exec, error) in [
        (
            "./no-such-fn",
            "fork/exec ./no-such-fn: no such file or directory",
        ),
        (
            "no-such-fn-anywhere",
            "exec: \"no-such-fn-anywhere\": executable file not found in $PATH",
        ),
    ] {
        let temp = tempfile::tempdir().unwrap();
        let pkg = temp.path().join("pkg");
        std::fs::create_dir(&pkg).unwrap();
        std::fs::write(
            pkg.join("Kptfile"),
            format!(
                "apiVersion: kpt.dev/v1\nkind: Kptfile\nmetadata:\n  name: pkg\npipeline:\n  mutators:\n    - exec: {exec}\n"
            ),
        )
        .unwrap();
        let output = krender_command()
            .current_dir(temp.path())
            .args(["fn", "render", "pkg", "--allow-exec"])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(1), "{stderr}");
        assert!(
            stderr.ends_with(&format!("Error: unexpected function error: {error} \n")),
            "{stderr}"
        );
    }
}
