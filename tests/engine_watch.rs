//! `krender watch` end to end: the first build, a rebuild after an edit
//! that re-runs only the edited package and its ancestors, results.yaml
//! rewritten by each rebuild (`--results-dir`), no rebuild for its own
//! writes, and exit code 130 on Ctrl-C (SIGINT).

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::Stdio;
use std::sync::mpsc;
use std::time::Duration;

const KPTFILE: &str = "\
apiVersion: kpt.dev/v1
kind: Kptfile
metadata:
  name: NAME
pipeline:
  mutators:
    - image: ghcr.io/kptdev/krm-functions-catalog/set-labels:latest
      configMap:
        owner: NAME
";

const CONFIG_MAP: &str = "\
apiVersion: v1
kind: ConfigMap
metadata:
  name: NAME
data:
  value: one
";

fn write(root: &Path) {
    for (dir, name) in [("", "root"), ("a", "a"), ("b", "b")] {
        let pkg = root.join(dir);
        std::fs::create_dir_all(&pkg).unwrap();
        std::fs::write(pkg.join("Kptfile"), KPTFILE.replace("NAME", name)).unwrap();
        std::fs::write(pkg.join("cm.yaml"), CONFIG_MAP.replace("NAME", name)).unwrap();
    }
}

/// Waits (generously: this is a deadline, not a timing assertion) for the
/// next `[watch]` line on the channel.
fn next_watch_line(lines: &mpsc::Receiver<String>) -> String {
    loop {
        let line = lines
            .recv_timeout(Duration::from_secs(60))
            .expect("watch printed nothing for 60 s");
        if line.starts_with("[watch]") {
            return line;
        }
    }
}

/// `krender watch ROOT EXTRA` (debounced 100 ms), with its stderr lines
/// on a channel.
fn watch(root: &Path, extra: &[&str]) -> (std::process::Child, mpsc::Receiver<String>) {
    let mut child = crate::support::krender_command()
        .arg("watch")
        .arg(root)
        .args(["--debounce-ms", "100"])
        .args(extra)
        .env("KRENDER_CONFIG", root.join("no-render.toml"))
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let (sender, lines) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            let _ = sender.send(line);
        }
    });
    (child, lines)
}

#[test]
fn watch_rebuilds_what_changed_and_stops_on_sigint() {
    let temp = tempfile::tempdir().unwrap();
    let root = temp.path().join("root");
    let results = temp.path().join("results");
    write(&root);
    let (mut child, lines) = watch(
        &root,
        &["--no-cache", "--results-dir", results.to_str().unwrap()],
    );

    let first = next_watch_line(&lines);
    assert!(first.contains("3 of 3 package(s) re-run"), "{first}");
    // Each rebuild writes the results file, as a render does.
    let results_file = results.join("results.yaml");
    let written = std::fs::read_to_string(&results_file).unwrap();
    assert!(written.contains("kind: FunctionResultList"), "{written}");
    assert_eq!(written.matches("set-labels:latest").count(), 3, "{written}");
    // Our own writes (the rendered files, the Kptfile's status) are not
    // changes: no rebuild follows.
    while let Ok(line) = lines.recv_timeout(Duration::from_secs(2)) {
        assert!(
            !line.starts_with("[watch]"),
            "a rebuild for our own writes: {line}"
        );
    }
    std::fs::remove_file(&results_file).unwrap();

    std::fs::write(
        root.join("b/cm.yaml"),
        CONFIG_MAP.replace("NAME", "b").replace("one", "two"),
    )
    .unwrap();
    let rebuilt = next_watch_line(&lines);
    // b and the root re-run; a does not.
    assert!(rebuilt.contains("2 of 3 package(s) re-run"), "{rebuilt}");
    assert!(
        results_file.exists(),
        "results.yaml rewritten by the rebuild"
    );
    let text = std::fs::read_to_string(root.join("b/cm.yaml")).unwrap();
    assert!(
        text.contains("value: two") && text.contains("owner: root"),
        "{text}"
    );

    // SIGINT: the loop stops, with the shell's code for it.
    // SAFETY: kill(2) on our own child's pid.
    let pid = libc::pid_t::try_from(child.id()).unwrap();
    unsafe { libc::kill(pid, libc::SIGINT) };
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(130));
    let mut rest = Vec::new();
    while let Ok(line) = lines.recv_timeout(Duration::from_secs(5)) {
        rest.push(line);
    }
    assert!(
        rest.iter().any(|line| line == "[watch] stopped"),
        "{rest:?}"
    );
}

/// A watch started on a tree a cached render left runs nothing at start;
/// a package that runs again to the output it had leaves its ancestors
/// alone.
#[test]
fn watch_starts_warm_and_stops_at_an_unchanged_output() {
    let temp = tempfile::tempdir().unwrap();
    let root = temp.path().join("root");
    let cache = temp.path().join("cache");
    write(&root);
    for _ in 0..2 {
        let output = crate::support::krender_command()
            .args(["fn", "render"])
            .arg(&root)
            .arg("--cache-dir")
            .arg(&cache)
            .env("KRENDER_CONFIG", root.join("no-render.toml"))
            .output()
            .unwrap();
        assert_eq!(output.status.code(), Some(0));
    }
    let (mut child, lines) = watch(&root, &["--cache-dir", cache.to_str().unwrap()]);
    let first = next_watch_line(&lines);
    assert!(first.contains("0 of 3 package(s) re-run"), "{first}");

    // b's set-labels overwrites the label edited: b runs again, to the
    // output it had, and the root is not run.
    let cm = root.join("b/cm.yaml");
    let text = std::fs::read_to_string(&cm).unwrap();
    assert!(text.contains("owner: root"), "{text}");
    std::fs::write(&cm, text.replace("owner: root", "owner: zzz")).unwrap();
    let rebuilt = next_watch_line(&lines);
    assert!(rebuilt.contains("1 of 3 package(s) re-run"), "{rebuilt}");
    assert_eq!(std::fs::read_to_string(&cm).unwrap(), text);

    // SAFETY: kill(2) on our own child's pid.
    let pid = libc::pid_t::try_from(child.id()).unwrap();
    unsafe { libc::kill(pid, libc::SIGINT) };
    assert_eq!(child.wait().unwrap().code(), Some(130));
}

/// Watch agrees with `fn render`: after an edit, the files a rebuild
/// leaves (the Kptfiles' `status` included) are what a one-shot render of
/// the same edited tree writes; a rebuild does not take its own earlier
/// writes for the original input.
#[test]
fn a_rebuild_leaves_what_a_render_leaves() {
    let temp = tempfile::tempdir().unwrap();
    let watched = temp.path().join("watched/root");
    let rendered = temp.path().join("rendered/root");
    write(&watched);
    write(&rendered);
    let (mut child, lines) = watch(&watched, &["--no-cache"]);
    let first = next_watch_line(&lines);
    assert!(first.contains("3 of 3 package(s) re-run"), "{first}");
    let render = |root: &Path| {
        let output = crate::support::krender_command()
            .args(["fn", "render", "--no-cache"])
            .arg(root)
            .env("KRENDER_CONFIG", root.join("no-render.toml"))
            .output()
            .unwrap();
        assert_eq!(output.status.code(), Some(0));
    };
    render(&rendered);
    assert_eq!(
        crate::support::snapshot(&watched),
        crate::support::snapshot(&rendered)
    );
    for root in [&watched, &rendered] {
        let cm = root.join("b/cm.yaml");
        let text = std::fs::read_to_string(&cm).unwrap();
        std::fs::write(&cm, text.replace("value: one", "value: two")).unwrap();
    }
    let rebuilt = next_watch_line(&lines);
    assert!(rebuilt.contains("2 of 3 package(s) re-run"), "{rebuilt}");
    render(&rendered);
    // SAFETY: kill(2) on our own child's pid.
    let pid = libc::pid_t::try_from(child.id()).unwrap();
    unsafe { libc::kill(pid, libc::SIGINT) };
    assert_eq!(child.wait().unwrap().code(), Some(130));
    assert_eq!(
        crate::support::snapshot(&watched),
        crate::support::snapshot(&rendered)
    );
}

/// A layered document set (no Kptfile): the documents are printed after
/// each rebuild, and an edit recomputes only what depends on it.
#[test]
fn watch_renders_layered_sets_incrementally() {
    let temp = tempfile::tempdir().unwrap();
    let root = temp.path().join("layers");
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/layering/example");
    for dir in ["", "global", "type", "site"] {
        std::fs::create_dir_all(root.join(dir)).unwrap();
    }
    for file in [
        "policy.yaml",
        "global/keystone.yaml",
        "type/keystone.yaml",
        "site/keystone.yaml",
    ] {
        std::fs::copy(fixture.join(file), root.join(file)).unwrap();
    }
    let mut command = crate::support::krender_command();
    let mut child = command
        .arg("watch")
        .arg(&root)
        .args(["--debounce-ms", "100"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let stdout = child.stdout.take().unwrap();
    let (sender, lines) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            let _ = sender.send(line);
        }
    });
    let (out_sender, out_lines) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = out_sender.send(line);
        }
    });

    let first = next_watch_line(&lines);
    assert!(first.contains("document(s) recomputed"), "{first}");
    // The site password reaches the rendered chart.
    let printed: Vec<String> =
        std::iter::from_fn(|| out_lines.recv_timeout(Duration::from_secs(2)).ok()).collect();
    assert!(
        printed.iter().any(|line| line.contains("s3cret")),
        "{printed:?}"
    );

    let site = root.join("site/keystone.yaml");
    let text = std::fs::read_to_string(&site).unwrap();
    std::fs::write(&site, text.replace("data: s3cret", "data: n3w-secret")).unwrap();
    let rebuilt = next_watch_line(&lines);
    // The passphrase and the chart substituting it; not the whole set.
    assert!(rebuilt.contains("2 of "), "{rebuilt}");
    let printed: Vec<String> =
        std::iter::from_fn(|| out_lines.recv_timeout(Duration::from_secs(2)).ok()).collect();
    assert!(
        printed.iter().any(|line| line.contains("n3w-secret")),
        "{printed:?}"
    );

    let pid = libc::pid_t::try_from(child.id()).unwrap();
    // SAFETY: kill(2) on our own child's pid.
    unsafe { libc::kill(pid, libc::SIGINT) };
    assert_eq!(child.wait().unwrap().code(), Some(130));
}
