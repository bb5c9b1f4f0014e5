//! Commands krender does not implement are handed to the real kpt, with
//! the same arguments, standard streams and exit code; `version` names the
//! kpt krender follows.

use crate::support::krender_command;
use std::io::Write;
use std::process::Stdio;

/// A `bin/` holding a fake kpt that prints its arguments and stdin, and
/// exits 3.
fn fake_kpt() -> tempfile::TempDir {
    use std::os::unix::fs::PermissionsExt;
    let temp = tempfile::tempdir().unwrap();
    let kpt = temp.path().join("kpt");
    std::fs::write(
        &kpt,
        "#!/bin/sh\necho \"kpt got: $*\"\ncat\necho \"to stderr\" >&2\nexit 3\n",
    )
    .unwrap();
    std::fs::set_permissions(&kpt, std::fs::Permissions::from_mode(0o755)).unwrap();
    temp
}

#[test]
fn other_commands_go_to_kpt_unchanged() {
    let bin = fake_kpt();
    for args in [
        &["pkg", "get", "https://example.com/repo.git/pkg@v1", "dst"][..],
        &[
            "--truncate-output=false",
            "live",
            "apply",
            "--reconcile-timeout=2m",
        ][..],
        &["fn", "doc", "--image", "set-namespace:v0.4"][..],
        &["alpha", "rpkg", "get"][..],
    ] {
        let mut child = krender_command()
            .args(args)
            .env("PATH", format!("{}:/usr/bin:/bin", bin.path().display()))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        child
            .stdin
            .take()
            .unwrap()
            .write_all(b"piped input\n")
            .unwrap();
        let output = child.wait_with_output().unwrap();
        assert_eq!(output.status.code(), Some(3), "{args:?}");
        assert_eq!(
            String::from_utf8_lossy(&output.stdout),
            format!("kpt got: {}\npiped input\n", args.join(" "))
        );
        assert_eq!(String::from_utf8_lossy(&output.stderr), "to stderr\n");
    }
}

#[test]
fn without_kpt_the_message_names_the_command() {
    let empty = tempfile::tempdir().unwrap();
    let output = krender_command()
        .args(["pkg", "init", "x"])
        .env("PATH", empty.path())
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("`kpt pkg init` is not implemented by krender")
            && stderr.contains("no kpt was found on PATH"),
        "{stderr}"
    );
    // A `kpt` that is krender itself (`ln -s krender kpt`) is not taken
    // for kpt: no loop.
    let link = empty.path().join("kpt");
    std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_krender"), &link).unwrap();
    let output = krender_command()
        .args(["pkg", "init", "x"])
        .env("PATH", empty.path())
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&output.stderr).contains("no kpt was found on PATH"));
    let output = krender_command()
        .args(["pkg", "init", "x"])
        .env("KRENDER_KPT", &link)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&output.stderr).contains("is krender again"),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
}

#[test]
fn version_names_the_kpt_followed() {
    let output = krender_command().arg("version").output().unwrap();
    assert_eq!(output.status.code(), Some(0));
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        stdout.starts_with(&format!("krender {}\n", env!("CARGO_PKG_VERSION")))
            && stdout.contains("output: kpt's main branch at 23c57d7f")
            && stdout.contains("flags and help texts: kpt 1.0.0-beta.56"),
        "{stdout}"
    );
}

/// `completions SHELL` prints a script the shell loads; `man` a roff page.
#[test]
fn completions_and_man_page() {
    let output = krender_command()
        .args(["completions", "bash"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0));
    let script = temp_file(&output.stdout);
    let loaded = std::process::Command::new("bash")
        .arg("-c")
        .arg(format!(
            "source {} && complete -p krender",
            script.path().display()
        ))
        .output()
        .unwrap();
    let registered = String::from_utf8_lossy(&loaded.stdout);
    assert!(
        registered.starts_with("complete ") && registered.ends_with(" -F _krender krender\n"),
        "{registered}{}",
        String::from_utf8_lossy(&loaded.stderr)
    );
    for shell in ["zsh", "fish", "powershell", "elvish"] {
        let output = krender_command()
            .args(["completions", shell])
            .output()
            .unwrap();
        assert_eq!(output.status.code(), Some(0), "{shell}");
        assert!(
            String::from_utf8_lossy(&output.stdout).contains("render"),
            "{shell}"
        );
    }
    let output = krender_command().arg("man").output().unwrap();
    assert_eq!(output.status.code(), Some(0));
    let page = String::from_utf8_lossy(&output.stdout);
    assert!(
        page.contains(".TH krender 1") && page.contains(".SH SUBCOMMANDS"),
        "{page}"
    );
    // `man DIR`: a page for every command the top page names, with its flags.
    let dir = tempfile::tempdir().unwrap();
    let pages = dir.path().join("man1");
    let output = krender_command().arg("man").arg(&pages).output().unwrap();
    assert_eq!(output.status.code(), Some(0));
    let read = |name: &str| std::fs::read_to_string(pages.join(name)).unwrap_or_default();
    let render = read("krender-fn-render.1");
    assert!(
        render.contains(".TH krender-fn-render 1")
            && render.contains("dry\\-run")
            && render.contains("timings"),
        "{render}"
    );
    for page in [
        "krender.1",
        "krender-fn.1",
        "krender-watch.1",
        "krender-cache-prune.1",
    ] {
        assert!(read(page).contains(".SH NAME"), "{page} missing");
    }
    // Every page the top page refers to (`krender\-fn(1)`) exists.
    let named: Vec<String> = read("krender.1")
        .lines()
        .filter(|line| line.starts_with("krender\\-"))
        .filter_map(|line| line.split("(1)").next())
        .map(|name| format!("{}.1", name.replace("\\-", "-")))
        .collect();
    assert!(named.len() > 5, "{named:?}");
    for file in named {
        assert!(pages.join(&file).is_file(), "{file} named but not written");
    }
}

fn temp_file(bytes: &[u8]) -> tempfile::NamedTempFile {
    let mut file = tempfile::NamedTempFile::new().unwrap();
    file.write_all(bytes).unwrap();
    file
}

/// kpt's klog flags (`--kubeconfig`, `--log-flush-frequency`, `-v`) are
/// accepted anywhere and ignored; `fn eval -k` likewise; `fn source
/// --include-meta-resources` is kpt's error.
#[test]
fn kpts_other_flags_are_accepted_or_refused_as_kpt_does() {
    let temp = tempfile::tempdir().unwrap();
    std::fs::write(
        temp.path().join("cm.yaml"),
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm\n",
    )
    .unwrap();
    let run = |args: &[&str]| {
        krender_command()
            .current_dir(temp.path())
            .args(args)
            .output()
            .unwrap()
    };
    let plain = run(&["fn", "source", "."]);
    assert_eq!(plain.status.code(), Some(0));
    for args in [
        &["--kubeconfig", "/nonexistent", "fn", "source", "."][..],
        &[
            "fn",
            "source",
            ".",
            "-v",
            "3",
            "--log-flush-frequency",
            "2s",
        ][..],
        &["fn", "source", ".", "--v=9"][..],
    ] {
        let output = run(args);
        assert_eq!(output.status.code(), Some(0), "{args:?}");
        assert_eq!(output.stdout, plain.stdout, "{args:?}");
    }
    let output = run(&[
        "fn",
        "eval",
        ".",
        "-i",
        "set-namespace:v0.4",
        "-k",
        "x",
        "-o",
        "stdout",
        "--",
        "namespace=y",
    ]);
    assert_eq!(output.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&output.stdout).contains("namespace: y\n"));
    let output = run(&["fn", "source", ".", "--include-meta-resources"]);
    assert_eq!(output.status.code(), Some(1));
    assert_eq!(
        String::from_utf8_lossy(&output.stderr),
        "error: --include-meta-resources is no longer necessary because meta resources are now included by default\n"
    );
}

/// A typo of one of krender's own commands gets krender's "did you mean"
/// (exit 2) instead of going to kpt; a typo nearer to a kpt command still
/// goes to kpt, which has its own suggestions.
#[test]
fn a_typo_of_a_krender_command_is_not_handed_to_kpt() {
    let bin = fake_kpt();
    let run = |args: &[&str]| {
        krender_command()
            .args(args)
            .env("PATH", format!("{}:/usr/bin:/bin", bin.path().display()))
            .stdin(Stdio::null())
            .output()
            .unwrap()
    };
    for (args, meant) in [
        (&["wacth", "pkg"][..], "'watch'"),
        (&["fn", "rendr", "pkg"][..], "'fn render'"),
    ] {
        let output = run(args);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(output.stdout.is_empty(), "{args:?} reached kpt");
        assert!(
            stderr.contains(&format!("tip: a similar subcommand exists: {meant}")),
            "{stderr}"
        );
    }
    let output = run(&["lve", "apply"]);
    assert_eq!(output.status.code(), Some(3));
    assert_eq!(
        String::from_utf8_lossy(&output.stdout),
        "kpt got: lve apply\n"
    );
}

/// `krender --help` says where the commands it does not list go.
#[test]
fn help_says_other_commands_go_to_kpt() {
    let output = krender_command().arg("--help").output().unwrap();
    assert_eq!(output.status.code(), Some(0));
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(stdout.contains("is handed to kpt"), "{stdout}");
}
