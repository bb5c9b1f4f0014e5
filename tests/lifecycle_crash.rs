//! Crash safety of in-place renders (issue 8): the real `krender` binary is
//! killed with SIGKILL at many points of a render, and after the recovery
//! the next krender command runs, the package must hold exactly the old or
//! exactly the new bytes, with nothing of krender's left behind.
//!
//! Two tests: random kill delays on a large generated package (200 files,
//! every one rewritten by the render), and a deterministic sweep over every
//! step boundary of the commit on a small package whose render also adds
//! and deletes files (the binary's `KRENDER_TEST_CRASH_AFTER` hook raises
//! SIGKILL at the N-th boundary; debug builds only).

// The kill tests report where their kills landed (a measurement, not an
// assertion), on stderr, as `cargo test -- --nocapture` shows.
#![allow(clippy::print_stderr)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

type Tree = BTreeMap<String, Vec<u8>>;

/// Every file below `root` (hidden ones included), by relative path.
fn snapshot(root: &Path) -> Tree {
    let mut files = Tree::new();
    let mut pending = vec![root.to_path_buf()];
    while let Some(dir) = pending.pop() {
        for entry in std::fs::read_dir(&dir).expect("read dir").flatten() {
            let path = entry.path();
            if path.is_dir() {
                pending.push(path);
            } else {
                let relative = path
                    .strip_prefix(root)
                    .expect("inside")
                    .to_string_lossy()
                    .into_owned();
                files.insert(relative, std::fs::read(&path).expect("read file"));
            }
        }
    }
    files
}

/// Makes the tree at `root` hold exactly `tree` again (files only; empty
/// directories do not matter to a package).
fn restore(root: &Path, tree: &Tree) {
    for relative in snapshot(root).keys() {
        if !tree.contains_key(relative) {
            std::fs::remove_file(root.join(relative)).expect("remove");
        }
    }
    for (relative, bytes) in tree {
        let path = root.join(relative);
        if std::fs::read(&path).ok().as_deref() != Some(bytes.as_slice()) {
            std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
            std::fs::write(&path, bytes).expect("write");
        }
    }
}

fn write_tree(root: &Path, tree: &Tree) {
    std::fs::create_dir_all(root).expect("mkdir");
    restore(root, tree);
}

/// A package of 200 ConfigMaps written with 4-space indents and extra
/// spaces, which the render normalises: every file changes, plus the
/// Kptfile's status. No functions, so the test's time goes into the part
/// that matters, the writes.
fn large_package() -> Tree {
    let mut tree = Tree::new();
    tree.insert(
        "Kptfile".to_owned(),
        b"apiVersion: kpt.dev/v1\nkind: Kptfile\nmetadata:\n  name: big\n".to_vec(),
    );
    for i in 0..200 {
        let text = format!(
            "apiVersion:    v1\nkind: ConfigMap\nmetadata:\n    name: settings-{i:03}\n    \
             labels:\n        app: big\ndata:\n    size: small\n    index: \"{i}\"\n"
        );
        tree.insert(
            format!("app/group-{}/cm-{i:03}.yaml", i % 10),
            text.into_bytes(),
        );
    }
    tree
}

/// A small package whose render rewrites, adds (in a new directory) and
/// deletes files.
fn small_package() -> Tree {
    let kptfile = "\
apiVersion: kpt.dev/v1
kind: Kptfile
metadata:
  name: small
pipeline:
  mutators:
    - image: ghcr.io/kptdev/krm-functions-catalog/set-labels:latest
      configMap:
        tier: backend
    - image: ghcr.io/kptdev/krm-functions-catalog/starlark:latest
      configPath: prune.yaml
";
    let prune = r#"apiVersion: fn.kpt.dev/v1alpha1
kind: StarlarkRun
metadata:
  name: prune
  annotations:
    config.kubernetes.io/local-config: "true"
source: |
  items = [r for r in ctx.resource_list["items"] if r["metadata"]["name"] != "doomed"]
  items.append({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "added", "annotations": {"config.kubernetes.io/path": "generated/added.yaml"}}})
  ctx.resource_list["items"] = items
"#;
    let mut tree = Tree::new();
    tree.insert("Kptfile".to_owned(), kptfile.as_bytes().to_vec());
    tree.insert("prune.yaml".to_owned(), prune.as_bytes().to_vec());
    tree.insert(
        "doomed.yaml".to_owned(),
        b"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: doomed\n".to_vec(),
    );
    for name in ["a", "b", "c"] {
        tree.insert(
            format!("{name}.yaml"),
            format!("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n").into_bytes(),
        );
    }
    tree
}

fn krender(temp: &Path) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_krender"));
    command
        // A render.toml in the working directory must not reroute steps.
        .env("KRENDER_CONFIG", temp.join("no-render.toml"))
        // Never the developer's cache, should a run drop `--no-cache`.
        .env("KRENDER_CACHE_DIR", temp.join("cache"))
        .env_remove("KRENDER_TEST_CRASH_AFTER")
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    command
}

/// Renders `pkg` in place without interruption; returns the new tree.
fn reference_render(temp: &Path, pkg: &Path) -> Tree {
    let output = krender(temp)
        .args(["fn", "render", "--no-cache"])
        .arg(pkg)
        .output()
        .expect("run krender");
    assert_eq!(
        output.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    snapshot(pkg)
}

/// What the next krender command does first: lock and recover (then the
/// lock is released, removing the lock file).
fn recover_like_the_next_command(pkg: &Path) {
    let session = krender::lifecycle::open_package(pkg, "lifecycle_crash test").expect("recover");
    drop(session);
}

/// Checks the tree is exactly `old` or `new`; returns true for `new`.
fn old_or_new(pkg: &Path, old: &Tree, new: &Tree, context: &str) -> bool {
    let now = snapshot(pkg);
    if &now == new {
        return true;
    }
    if &now == old {
        return false;
    }
    let differing: Vec<&String> = now
        .keys()
        .chain(old.keys())
        .filter(|key| now.get(*key) != old.get(*key) && now.get(*key) != new.get(*key))
        .collect();
    panic!(
        "{context}: the package is neither the old nor the new state; files matching neither: {differing:?}"
    );
}

/// Polls until a commit's journal (being written, or published) exists in
/// `pkg` or `child` ends.
fn wait_for_stage(pkg: &Path, child: &mut std::process::Child) {
    loop {
        let staging = std::fs::read_dir(pkg).is_ok_and(|entries| {
            entries.flatten().any(|entry| {
                entry
                    .file_name()
                    .to_string_lossy()
                    .starts_with(".krender-journal")
            })
        });
        if staging || !matches!(child.try_wait(), Ok(None)) {
            return;
        }
        std::thread::sleep(Duration::from_micros(200));
    }
}

/// Fixed-seed xorshift, so a failure can be replayed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, bound: u64) -> u64 {
        self.next() % bound.max(1)
    }
}

/// A temporary directory in memory when the machine has one: the kills
/// test what a crash leaves for the next command, which the kernel's
/// rename semantics decide on any filesystem, and tmpfs keeps hundreds of
/// renders within seconds even when other builds load the disk.
fn memory_tempdir() -> tempfile::TempDir {
    let shm = Path::new("/dev/shm");
    if shm.is_dir()
        && let Ok(dir) = tempfile::Builder::new()
            .prefix("krender-kill-")
            .tempdir_in(shm)
    {
        return dir;
    }
    tempfile::tempdir().expect("tempdir")
}

#[test]
fn kill_at_random_points_leaves_old_or_new_package() {
    let temp = memory_tempdir();
    let old = large_package();
    let reference = temp.path().join("reference");
    write_tree(&reference, &old);
    let started = Instant::now();
    let new = reference_render(temp.path(), &reference);
    let full_run = started.elapsed();
    assert_ne!(old, new);
    assert_eq!(old.len(), new.len());

    let pkg = temp.path().join("big");
    write_tree(&pkg, &old);
    let mut rng = Rng(0x5eed_1234_abcd_0001);
    let iterations = 160;
    // Kill anywhere up to 20% past a whole run.
    let span = (full_run.as_micros() as u64 * 12 / 10).max(1_000);
    let (mut saw_old, mut saw_new) = (0, 0);
    let (mut mid_staging, mut mid_roll_forward) = (0, 0);
    let test_started = Instant::now();
    for iteration in 0..iterations {
        // Even iterations: a delay anywhere in the run. Odd ones: a short
        // delay after the commit's stage directory appears, because the
        // commit takes only milliseconds of a run and is what matters.
        let aim_at_commit = iteration % 2 == 1;
        let delay = if aim_at_commit {
            rng.below(20_000)
        } else {
            rng.below(span)
        };
        let mut command = krender(temp.path());
        command.args(["fn", "render", "--no-cache"]).arg(&pkg);
        if iteration % 10 != 5 {
            // fsync only matters for power loss, not for a killed process
            // (see `pkg::commit::Durability`); skipping it on
            // most runs keeps the test fast on a loaded disk.
            command.env("KRENDER_FSYNC", "0");
        }
        let mut child = command.spawn().expect("spawn krender");
        if aim_at_commit {
            wait_for_stage(&pkg, &mut child);
        }
        std::thread::sleep(Duration::from_micros(delay));
        let _ = child.kill();
        let _ = child.wait();
        // Where the kill landed, for the report below.
        if pkg.join(".krender-journal").exists() {
            mid_roll_forward += 1;
        } else if !krender::pkg::commit::leftovers(&pkg).is_empty()
            && std::fs::read_dir(&pkg)
                .expect("read pkg")
                .flatten()
                .any(|entry| {
                    entry
                        .file_name()
                        .to_string_lossy()
                        .starts_with(".krender-journal-")
                })
        {
            mid_staging += 1;
        }
        if iteration % 10 == 0 {
            // Every tenth time the real binary does the recovery: a
            // read-only render locks and recovers before it reads.
            let output = krender(temp.path())
                .args(["fn", "render", "--no-cache", "-o", "stdout"])
                .arg(&pkg)
                .output()
                .expect("run krender");
            assert_eq!(
                output.status.code(),
                Some(0),
                "iteration {iteration}: {}",
                String::from_utf8_lossy(&output.stderr)
            );
        } else {
            recover_like_the_next_command(&pkg);
        }
        let context = format!("iteration {iteration}, killed after {delay} µs");
        if old_or_new(&pkg, &old, &new, &context) {
            saw_new += 1;
        } else {
            saw_old += 1;
        }
        restore(&pkg, &old);
    }
    // Not timed asserts: the counts only say the kills spanned the run.
    eprintln!(
        "kill test: {iterations} kills in {:.1?} (one render {full_run:.1?}): \
         {saw_old} old, {saw_new} new; {mid_staging} landed while staging, \
         {mid_roll_forward} after the commit point and before its end",
        test_started.elapsed()
    );
}

#[test]
fn crash_at_every_commit_step_leaves_old_or_new_package() {
    let temp = tempfile::tempdir().expect("tempdir");
    let old = small_package();
    let reference = temp.path().join("reference");
    write_tree(&reference, &old);
    let new = reference_render(temp.path(), &reference);
    // The render adds a file in a new directory and deletes one.
    assert!(new.contains_key("generated/added.yaml"), "{:?}", new.keys());
    assert!(!new.contains_key("doomed.yaml"));

    let pkg: PathBuf = temp.path().join("small");
    write_tree(&pkg, &old);
    let mut crashed_at = Vec::new();
    for step in 0.. {
        let output = krender(temp.path())
            .args(["fn", "render", "--no-cache"])
            .arg(&pkg)
            .env("KRENDER_TEST_CRASH_AFTER", step.to_string())
            .output()
            .expect("run krender");
        recover_like_the_next_command(&pkg);
        let is_new = old_or_new(&pkg, &old, &new, &format!("crash at step {step}"));
        if output.status.code() == Some(0) {
            // The commit has fewer steps than `step`: the sweep is done.
            assert!(is_new);
            break;
        }
        assert_eq!(
            output.status.code(),
            None,
            "step {step}: killed by a signal"
        );
        crashed_at.push((step, is_new));
        restore(&pkg, &old);
        assert!(step < 100, "the commit never completed");
    }
    // Staging the files happens before the commit point (old state), the
    // journal rename is the commit point, and everything after it rolls
    // forward: so the outcomes are some olds followed only by news.
    eprintln!(
        "commit-step sweep: {} crash points, {} before the commit point",
        crashed_at.len(),
        crashed_at.iter().filter(|(_, is_new)| !is_new).count()
    );
    let first_new = crashed_at.iter().position(|(_, is_new)| *is_new);
    let first_new = first_new.expect("some crash lands after the commit point");
    assert!(first_new > 0, "{crashed_at:?}");
    assert!(
        crashed_at[first_new..].iter().all(|(_, is_new)| *is_new),
        "{crashed_at:?}"
    );
}

#[test]
fn kill_during_output_dir_render_leaves_no_partial_dir() {
    let temp = memory_tempdir();
    let pkg = temp.path().join("big");
    write_tree(&pkg, &large_package());
    let render_to = |out: &Path| {
        let mut command = krender(temp.path());
        command
            .args(["fn", "render", "--no-cache", "-o"])
            .arg(out)
            .arg(&pkg)
            .env("KRENDER_FSYNC", "0");
        command
    };
    let reference = temp.path().join("reference-out");
    let output = render_to(&reference).output().expect("run krender");
    assert_eq!(output.status.code(), Some(0));
    let expected = snapshot(&reference);
    assert_eq!(expected.len(), 201, "the Kptfile and 200 ConfigMaps");

    let out = temp.path().join("out");
    let mut rng = Rng(0x5eed_0000_0000_00d1);
    let (mut absent, mut complete) = (0, 0);
    for iteration in 0..40 {
        let out_stages = || -> Vec<String> {
            std::fs::read_dir(temp.path())
                .expect("read temp")
                .flatten()
                .map(|entry| entry.file_name().to_string_lossy().into_owned())
                .filter(|name| name.starts_with(".krender-out-"))
                .collect()
        };
        // Stages of earlier killed runs stay until a render cleans them.
        let before = out_stages();
        let mut child = render_to(&out).spawn().expect("spawn krender");
        // Aim at the staging: wait for this run's `.krender-out-*` directory.
        loop {
            let staging = out_stages().iter().any(|name| !before.contains(name));
            if staging || !matches!(child.try_wait(), Ok(None)) {
                break;
            }
            std::thread::sleep(Duration::from_micros(200));
        }
        std::thread::sleep(Duration::from_micros(rng.below(3_000)));
        let _ = child.kill();
        let _ = child.wait();
        if out.exists() {
            assert_eq!(
                snapshot(&out),
                expected,
                "iteration {iteration}: partial output"
            );
            complete += 1;
            std::fs::remove_dir_all(&out).expect("remove out");
        } else {
            absent += 1;
        }
    }
    // The next -o render into the same parent removes dead stages.
    let output = render_to(&out).output().expect("run krender");
    assert_eq!(output.status.code(), Some(0));
    let leftovers: Vec<String> = std::fs::read_dir(temp.path())
        .expect("read temp")
        .flatten()
        .map(|entry| entry.file_name().to_string_lossy().into_owned())
        .filter(|name| name.starts_with(".krender-"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
    eprintln!("-o DIR kill test: 40 kills: {absent} left no directory, {complete} a complete one");
}

const CM_OLD: &str = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: old\n";
const CM_NEW: &str = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: new\n";

#[test]
fn interrupted_commits_of_nested_packages_are_recovered_first() {
    let temp = tempfile::tempdir().expect("tempdir");
    let root = temp.path().join("root");
    let sub = root.join("sub");
    std::fs::create_dir_all(&sub).expect("mkdir");
    let kptfile =
        |name: &str| format!("apiVersion: kpt.dev/v1\nkind: Kptfile\nmetadata:\n  name: {name}\n");
    std::fs::write(root.join("Kptfile"), kptfile("root")).expect("write");
    std::fs::write(sub.join("Kptfile"), kptfile("sub")).expect("write");
    std::fs::write(sub.join("cm.yaml"), CM_OLD).expect("write");
    // A render of `sub` killed after its commit point: the journal holds a
    // file not yet rewritten.
    let mut changes = krender::pkg::commit::Changes::default();
    changes.write("cm.yaml", CM_NEW);
    std::fs::write(
        sub.join(".krender-journal"),
        krender::pkg::commit::journal_bytes(&changes),
    )
    .expect("write");
    // Rendering the enclosing package finishes that commit before reading.
    let output = krender(temp.path())
        .args(["fn", "render", "--no-cache", "-o", "stdout"])
        .arg(&root)
        .output()
        .expect("run krender");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.starts_with(&format!(
            "krender: completed (1 written, 0 deleted) an interrupted commit in {}\n",
            sub.display()
        )),
        "{stderr}"
    );
    assert_eq!(
        std::fs::read_to_string(sub.join("cm.yaml")).expect("read"),
        CM_NEW
    );
    assert!(krender::pkg::commit::leftovers(&sub).is_empty());
}

/// A commit that cannot be finished (its journal names a write under a
/// dangling symbolic link) stops readers too: `fn source` and `-o stdout`
/// fail naming the package instead of reading a half-written tree.
#[test]
fn readers_never_read_over_an_unfinished_commit() {
    let temp = tempfile::tempdir().expect("tempdir");
    let pkg = temp.path().join("pkg");
    std::fs::create_dir_all(&pkg).expect("pkg");
    std::fs::write(
        pkg.join("Kptfile"),
        "apiVersion: kpt.dev/v1\nkind: Kptfile\nmetadata:\n  name: pkg\n",
    )
    .expect("Kptfile");
    std::fs::write(
        pkg.join("cm.yaml"),
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n",
    )
    .expect("resource");
    let mut changes = krender::pkg::commit::Changes::default();
    changes.write("link/x.yaml", "x: 1\n");
    std::fs::write(
        pkg.join(".krender-journal"),
        krender::pkg::commit::journal_bytes(&changes),
    )
    .expect("journal");
    std::os::unix::fs::symlink("/nonexistent/dir", pkg.join("link")).expect("symlink");
    for args in [
        vec!["fn", "source", "pkg"],
        vec!["fn", "render", "pkg", "-o", "stdout"],
    ] {
        let output = krender(temp.path())
            .args(&args)
            .current_dir(temp.path())
            .stdout(Stdio::piped())
            .output()
            .expect("krender runs");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(1), "{args:?}: {stderr}");
        assert!(
            stderr.contains("has an unfinished commit that cannot be completed now"),
            "{args:?}: {stderr}"
        );
        assert!(
            output.stdout.is_empty(),
            "{args:?} printed a half-written package"
        );
    }
}
