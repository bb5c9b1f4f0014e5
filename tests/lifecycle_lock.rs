//! Package locks through the `krender` binary (issue 8): a second render of
//! a package being rendered fails at once naming the holder, different
//! packages render at the same time, a lock left by a killed render is
//! taken over, and an enclosing package's render conflicts with a
//! subpackage's.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

/// A package whose render holds its lock for a while: one exec step that
/// sleeps, then passes the resources through.
fn slow_package(root: &Path, name: &str, seconds: &str) -> PathBuf {
    let pkg = root.join(name);
    std::fs::create_dir_all(&pkg).unwrap();
    std::fs::write(
        pkg.join("Kptfile"),
        format!(
            "apiVersion: kpt.dev/v1\nkind: Kptfile\nmetadata:\n  name: {name}\npipeline:\n  \
             mutators:\n    - exec: \"sh -c 'sleep {seconds}; cat'\"\n"
        ),
    )
    .unwrap();
    std::fs::write(
        pkg.join("cm.yaml"),
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm\n",
    )
    .unwrap();
    pkg
}

fn command(pkg: &Path) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_krender"));
    let temp = pkg.parent().unwrap();
    command
        .args(["fn", "render", "--allow-exec", "--no-cache"])
        .arg(pkg)
        .env("KRENDER_CONFIG", temp.join("no-render.toml"))
        // Never the developer's cache, should `--no-cache` go.
        .env("KRENDER_CACHE_DIR", temp.join("cache"))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    command
}

fn spawn(pkg: &Path) -> Child {
    command(pkg).spawn().unwrap()
}

fn run(pkg: &Path) -> Output {
    command(pkg).output().unwrap()
}

/// Waits (polling) until the package's lock file names a holder.
fn wait_for_lock(pkg: &Path) -> String {
    let lock = pkg.join(".krender-lock");
    for _ in 0..2_000 {
        if let Ok(text) = std::fs::read_to_string(&lock)
            && text.contains("\"pid\"")
        {
            return text;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    panic!("{} never appeared", lock.display());
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

#[test]
fn second_render_of_a_locked_package_fails_naming_the_holder() {
    let temp = tempfile::tempdir().unwrap();
    let pkg = slow_package(temp.path(), "app", "1");
    let first = spawn(&pkg);
    wait_for_lock(&pkg);
    let second = run(&pkg);
    assert_eq!(second.status.code(), Some(1));
    let text = stderr(&second);
    let expected = format!(
        "Error: package {} is locked by pid {} on ",
        pkg.display(),
        first.id()
    );
    assert!(text.starts_with(&expected), "{text}");
    assert!(text.contains("fn render --allow-exec --no-cache"), "{text}");
    let first = first.wait_with_output().unwrap();
    assert_eq!(first.status.code(), Some(0), "{}", stderr(&first));
    // The holder removed its lock file; a third render succeeds.
    assert!(!pkg.join(".krender-lock").exists());
    let third = run(&pkg);
    assert_eq!(third.status.code(), Some(0), "{}", stderr(&third));
}

#[test]
fn different_packages_render_at_the_same_time() {
    let temp = tempfile::tempdir().unwrap();
    let a = slow_package(temp.path(), "a", "1");
    let b = slow_package(temp.path(), "b", "1");
    let first = spawn(&a);
    wait_for_lock(&a);
    let second = spawn(&b);
    wait_for_lock(&b);
    // Both locks are held at once: a's render is still sleeping.
    assert!(a.join(".krender-lock").exists());
    for child in [first, second] {
        let output = child.wait_with_output().unwrap();
        assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    }
}

#[test]
fn lock_of_a_killed_render_is_taken_over() {
    let temp = tempfile::tempdir().unwrap();
    let pkg = slow_package(temp.path(), "app", "5");
    let mut first = spawn(&pkg);
    let holder = wait_for_lock(&pkg);
    assert!(
        holder.contains(&format!("\"pid\":{}", first.id())),
        "{holder}"
    );
    first.kill().unwrap();
    first.wait().unwrap();
    // The dead render's lock file is still there, naming it.
    assert_eq!(
        std::fs::read_to_string(pkg.join(".krender-lock")).unwrap(),
        holder
    );
    // Its sleeping function may outlive it; a quick pipeline renders now.
    std::fs::write(
        pkg.join("Kptfile"),
        "apiVersion: kpt.dev/v1\nkind: Kptfile\nmetadata:\n  name: app\n",
    )
    .unwrap();
    let second = run(&pkg);
    assert_eq!(second.status.code(), Some(0), "{}", stderr(&second));
    assert!(
        stderr(&second).starts_with(&format!(
            "krender: took over the lock of {} from pid {} (",
            pkg.display(),
            first.id()
        )),
        "{}",
        stderr(&second)
    );
    assert!(!pkg.join(".krender-lock").exists());
}

#[test]
fn enclosing_package_conflicts_with_a_subpackage_render() {
    let temp = tempfile::tempdir().unwrap();
    let root = temp.path().join("root");
    std::fs::create_dir_all(&root).unwrap();
    std::fs::write(
        root.join("Kptfile"),
        "apiVersion: kpt.dev/v1\nkind: Kptfile\nmetadata:\n  name: root\n",
    )
    .unwrap();
    let sub = slow_package(&root, "sub", "1");
    let first = spawn(&sub);
    wait_for_lock(&sub);
    let second = run(&root);
    assert_eq!(second.status.code(), Some(1));
    let text = stderr(&second);
    assert!(
        text.starts_with(&format!(
            "Error: package {} is locked by pid {}",
            sub.display(),
            first.id()
        )),
        "{text}"
    );
    // The root's own lock was released again.
    assert!(!root.join(".krender-lock").exists());
    let first = first.wait_with_output().unwrap();
    assert_eq!(first.status.code(), Some(0), "{}", stderr(&first));
}

#[test]
fn of_many_simultaneous_renders_exactly_one_runs() {
    let temp = tempfile::tempdir().unwrap();
    let pkg = slow_package(temp.path(), "app", "3");
    let children: Vec<Child> = (0..6).map(|_| spawn(&pkg)).collect();
    let outputs: Vec<Output> = children
        .into_iter()
        .map(|child| child.wait_with_output().unwrap())
        .collect();
    let winners = outputs
        .iter()
        .filter(|output| output.status.code() == Some(0))
        .count();
    assert_eq!(
        winners,
        1,
        "{:?}",
        outputs.iter().map(stderr).collect::<Vec<_>>()
    );
    for output in outputs
        .iter()
        .filter(|output| output.status.code() != Some(0))
    {
        assert_eq!(output.status.code(), Some(1));
        assert!(
            stderr(output).contains(" is locked by "),
            "{}",
            stderr(output)
        );
    }
    assert!(!pkg.join(".krender-lock").exists());
}

/// Like [`command`], rendering to stdout (a reader).
fn spawn_reader(pkg: &Path) -> Child {
    command(pkg).args(["-o", "stdout"]).spawn().unwrap()
}

#[test]
fn readers_share_the_package_and_exclude_a_writer() {
    let temp = tempfile::tempdir().unwrap();
    let pkg = slow_package(temp.path(), "app", "2");
    let first = spawn_reader(&pkg);
    wait_for_lock(&pkg);
    let second = spawn_reader(&pkg);
    // An in-place render must wait for the readers: it fails at once.
    let writer = run(&pkg);
    assert_eq!(writer.status.code(), Some(1));
    assert!(
        stderr(&writer).contains(" is locked by pid "),
        "{}",
        stderr(&writer)
    );
    for child in [first, second] {
        let output = child.wait_with_output().unwrap();
        assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
        assert!(String::from_utf8_lossy(&output.stdout).contains("kind: ConfigMap"));
    }
    assert!(!pkg.join(".krender-lock").exists());
}
