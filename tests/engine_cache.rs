//! End-to-end tests of the persistent function-result cache through the
//! `krender` binary: a warm render is byte-identical to a cold one, and it
//! is answered from the cache (no new entries, and a doctored entry shows
//! up in the output). The builtins here take the wire
//! (`KRENDER_NATIVE=off`), which is what gets cached; native builtin runs
//! bypass the cache (see `native_builtins_bypass_the_cache`).

use crate::support::normalize_durations;
use std::path::Path;
use std::process::{Command, Output};

const ROOT_KPTFILE: &str = "\
apiVersion: kpt.dev/v1
kind: Kptfile
metadata:
  name: app
pipeline:
  mutators:
    - image: ghcr.io/kptdev/krm-functions-catalog/set-namespace:latest
      configMap:
        namespace: aaaa
    - image: ghcr.io/kptdev/krm-functions-catalog/set-labels:latest
      configMap:
        tier: backend
";

const SUB_KPTFILE: &str = "\
apiVersion: kpt.dev/v1
kind: Kptfile
metadata:
  name: db
pipeline:
  mutators:
    - image: ghcr.io/kptdev/krm-functions-catalog/set-labels:latest
      configMap:
        component: db
";

const DEPLOYMENT: &str = "\
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web # the frontend
spec:
  replicas: 2
";

const CONFIG_MAP: &str = "\
apiVersion: v1
kind: ConfigMap
metadata:
  name: db-settings
data:
  size: small
";

fn write_package(root: &Path) {
    let files = [
        ("Kptfile", ROOT_KPTFILE),
        ("deployment.yaml", DEPLOYMENT),
        ("db/Kptfile", SUB_KPTFILE),
        ("db/config.yaml", CONFIG_MAP),
    ];
    for (path, text) in files {
        let path = root.join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
}

fn render(pkg: &Path, cache: &Path, extra: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_krender"))
        .args(["fn", "render"])
        .arg(pkg)
        .args(["-o", "stdout", "--cache-dir"])
        .arg(cache)
        .args(extra)
        // A render.toml in the test's working directory must not reroute.
        .env("KRENDER_CONFIG", pkg.join("no-render.toml"))
        .env("KRENDER_NATIVE", "off")
        .output()
        .unwrap()
}

#[test]
fn native_builtins_bypass_the_cache() {
    let temp = tempfile::tempdir().unwrap();
    let (wire_pkg, native_pkg) = (temp.path().join("wire"), temp.path().join("native"));
    let cache = temp.path().join("cache");
    write_package(&wire_pkg);
    write_package(&native_pkg);
    let native = Command::new(env!("CARGO_BIN_EXE_krender"))
        .args(["fn", "render"])
        .arg(&native_pkg)
        .args(["-o", "stdout", "--cache-dir"])
        .arg(&cache)
        .env("KRENDER_CONFIG", native_pkg.join("no-render.toml"))
        .output()
        .unwrap();
    assert_eq!(native.status.code(), Some(0));
    assert_eq!(
        krender::engine::cache::summarize(&cache).unwrap().entries,
        0
    );
    let wire = render(&wire_pkg, &temp.path().join("wire-cache"), &[]);
    assert_eq!(
        String::from_utf8_lossy(&native.stdout).replace("native", "wire"),
        String::from_utf8_lossy(&wire.stdout)
    );
    // Step timings differ from run to run on a loaded machine.
    assert_eq!(
        normalize_durations(&String::from_utf8_lossy(&native.stderr)).replace("native", "wire"),
        normalize_durations(&String::from_utf8_lossy(&wire.stderr))
    );
}

/// Every index file's bytes, to show a warm render wrote nothing.
fn index_snapshot(cache: &Path) -> Vec<(String, Vec<u8>)> {
    snapshot(&cache.join("index-v5"))
}

#[test]
fn warm_render_is_byte_identical_and_served_from_the_cache() {
    let temp = tempfile::tempdir().unwrap();
    let pkg = temp.path().join("app");
    let cache = temp.path().join("cache");
    write_package(&pkg);

    let cold = render(&pkg, &cache, &[]);
    assert_eq!(
        cold.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&cold.stderr)
    );
    let cold_stdout = String::from_utf8(cold.stdout.clone()).unwrap();
    assert!(cold_stdout.contains("namespace: aaaa"), "{cold_stdout}");
    assert!(cold_stdout.contains("component: db"), "{cold_stdout}");
    // Three builtin steps (two in the root, one in db) were stored.
    let entries = krender::engine::cache::summarize(&cache).unwrap().entries;
    assert_eq!(entries, 3);
    let index_after_cold = index_snapshot(&cache);

    let warm = render(&pkg, &cache, &[]);
    assert_eq!(warm.status.code(), Some(0));
    assert_eq!(warm.stdout, cold.stdout);
    assert_eq!(
        normalize_durations(&String::from_utf8_lossy(&warm.stderr)),
        normalize_durations(&String::from_utf8_lossy(&cold.stderr))
    );
    // Every cacheable call either hits or writes; nothing was written.
    assert_eq!(index_snapshot(&cache), index_after_cold);

    // Without the unchanged tree's manifest (which would answer first),
    // the render is answered from the store: no pipeline runs.
    std::fs::remove_dir_all(krender::engine::cache::manifest_dir(&cache)).unwrap();
    let stats_file = temp.path().join("stats.json");
    let served = render(&pkg, &cache, &["--stats", stats_file.to_str().unwrap()]);
    assert_eq!(served.status.code(), Some(0));
    assert_eq!(served.stdout, cold.stdout);
    let stats: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&stats_file).unwrap()).unwrap();
    assert_eq!(stats["pipelines_run"], 0, "{stats}");
    assert_eq!(stats["action_cache_hits"], 2, "{stats}");

    // --no-cache runs the functions again.
    let uncached = render(&pkg, &cache, &["--no-cache"]);
    assert_eq!(uncached.stdout, cold.stdout);
}

#[test]
fn no_cache_writes_nothing() {
    let temp = tempfile::tempdir().unwrap();
    let pkg = temp.path().join("app");
    let cache = temp.path().join("cache");
    write_package(&pkg);
    let output = render(&pkg, &cache, &["--no-cache"]);
    assert_eq!(output.status.code(), Some(0));
    assert!(!cache.exists());
}

#[test]
fn cache_stats_and_clear() {
    let temp = tempfile::tempdir().unwrap();
    let pkg = temp.path().join("app");
    let cache = temp.path().join("cache");
    write_package(&pkg);
    assert_eq!(render(&pkg, &cache, &[]).status.code(), Some(0));
    let cache_cmd = |sub: &str| {
        Command::new(env!("CARGO_BIN_EXE_krender"))
            .args(["cache", sub, "--cache-dir"])
            .arg(&cache)
            .output()
            .unwrap()
    };
    let stats = cache_cmd("stats");
    assert_eq!(stats.status.code(), Some(0));
    let text = String::from_utf8(stats.stdout).unwrap();
    assert!(text.contains("function results: 3 entries, "), "{text}");
    // The size is the stored values' (cacache's own `write_sync` indexes 0).
    let stored: usize = cacache::index::ls(&cache)
        .map(|entry| {
            cacache::read_sync(&cache, entry.unwrap().key)
                .unwrap()
                .len()
        })
        .sum();
    assert!(stored > 0);
    assert!(text.contains(&format!("B ({stored} bytes)\n")), "{text}");
    // The engine's store: resources, logs and runs, counted by entry.
    let store_entries: u64 = text
        .lines()
        .find_map(|line| line.strip_prefix("store: "))
        .and_then(|rest| rest.split(' ').next())
        .and_then(|count| count.parse().ok())
        .unwrap_or_else(|| panic!("no store line: {text}"));
    assert!(store_entries > 0, "{text}");
    // Nothing is 30 days old; everything is older than 0 days: the three
    // function results, the stdout render's manifest and the store.
    let prune = |days: &str| {
        let output = Command::new(env!("CARGO_BIN_EXE_krender"))
            .args(["cache", "prune", "--max-age-days", days, "--cache-dir"])
            .arg(&cache)
            .output()
            .unwrap();
        assert_eq!(output.status.code(), Some(0));
        String::from_utf8(output.stdout).unwrap()
    };
    let all = store_entries + 4;
    assert_eq!(prune("30"), format!("removed 0 entries, kept {all}\n"));
    std::thread::sleep(std::time::Duration::from_millis(5));
    assert_eq!(prune("0"), format!("removed {all} entries, kept 0\n"));
    let text = String::from_utf8(cache_cmd("stats").stdout).unwrap();
    assert!(
        text.contains("function results: 0 entries, 0 B (0 bytes)\n"),
        "{text}"
    );
    assert_eq!(render(&pkg, &cache, &[]).status.code(), Some(0));
    assert_eq!(cache_cmd("clear").status.code(), Some(0));
    let text = String::from_utf8(cache_cmd("stats").stdout).unwrap();
    assert!(
        text.contains("function results: 0 entries, 0 B (0 bytes)\n"),
        "{text}"
    );
}

/// The per-root manifest: a render that leaves the tree as it found it is
/// replayed on the next run with the same tree, and any edit turns it off.
#[test]
fn unchanged_tree_is_answered_from_its_manifest() {
    let temp = tempfile::tempdir().unwrap();
    let pkg = temp.path().join("app");
    let cache = temp.path().join("cache");
    write_package(&pkg);
    let in_place = |pkg: &Path| {
        Command::new(env!("CARGO_BIN_EXE_krender"))
            .args(["fn", "render"])
            .arg(pkg)
            .arg("--cache-dir")
            .arg(&cache)
            .env("KRENDER_CONFIG", pkg.join("no-render.toml"))
            .output()
            .unwrap()
    };
    let manifests = krender::engine::cache::manifest_dir(&cache);
    // The first render changes the resources (namespaces, labels), the
    // second only the step messages in the Kptfile status ("already
    // ..."); the third finds a fixed point and records it.
    assert_eq!(in_place(&pkg).status.code(), Some(0));
    let after_first = snapshot(&pkg);
    assert_eq!(in_place(&pkg).status.code(), Some(0));
    assert!(!manifests.exists());
    let after_second = snapshot(&pkg);
    assert_eq!(in_place(&pkg).status.code(), Some(0));
    assert!(manifests.exists());
    assert_eq!(snapshot(&pkg), after_second);

    // Doctor the recorded stderr: a replay shows it, which proves the third
    // render ran nothing; the tree stays byte-identical.
    for entry in cacache::index::ls(&manifests) {
        let key = entry.unwrap().key;
        let value = String::from_utf8(cacache::read_sync(&manifests, &key).unwrap()).unwrap();
        // Same length, so the manifest's length prefixes stay right.
        let doctored = value.replace("Successfully executed", "Replayed!!!!!!!!!!!!!");
        assert_ne!(doctored, value);
        cacache::write_sync(&manifests, &key, doctored.as_bytes()).unwrap();
    }
    let third = in_place(&pkg);
    assert_eq!(third.status.code(), Some(0));
    let stderr = String::from_utf8(third.stderr).unwrap();
    assert!(stderr.contains("Replayed!!!!!!!!!!!!!"), "{stderr}");
    assert_eq!(snapshot(&pkg), after_second);

    // An edit is noticed: the render runs for real and sees the new bytes.
    std::fs::write(
        pkg.join("db/config.yaml"),
        CONFIG_MAP.replace("small", "large"),
    )
    .unwrap();
    let fourth = in_place(&pkg);
    assert_eq!(fourth.status.code(), Some(0));
    let stderr = String::from_utf8(fourth.stderr).unwrap();
    assert!(stderr.contains("Successfully executed"), "{stderr}");
    let config = std::fs::read_to_string(pkg.join("db/config.yaml")).unwrap();
    assert!(
        config.contains("size: large") && config.contains("namespace: aaaa"),
        "{config}"
    );
    assert_ne!(after_first, after_second);
}

/// Every file under `root` with its bytes.
fn snapshot(root: &Path) -> Vec<(String, Vec<u8>)> {
    let mut files = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else {
                files.push((path.display().to_string(), std::fs::read(&path).unwrap()));
            }
        }
    }
    files.sort();
    files
}

/// An `exec:` program render.toml declares pure is run once for the same
/// input; undeclared, it runs every time.
#[test]
fn exec_functions_declared_pure_are_cached() {
    let temp = tempfile::tempdir().unwrap();
    let calls = temp.path().join("calls.log");
    let script = temp.path().join("upper.sh");
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\necho call >> {}\nsed -e s/small/SMALL/\n",
            calls.display()
        ),
    )
    .unwrap();
    let mut permissions = std::fs::metadata(&script).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut permissions, 0o755);
    std::fs::set_permissions(&script, permissions).unwrap();
    let kptfile = format!(
        "apiVersion: kpt.dev/v1\nkind: Kptfile\nmetadata:\n  name: app\npipeline:\n  mutators:\n    - exec: {}\n",
        script.display()
    );
    let table = temp.path().join("render.toml");
    let cache = temp.path().join("cache");
    let run = |pure: bool| {
        // The manifest of the unchanged tree would answer first: drop it,
        // so only the function cache can.
        let _ = std::fs::remove_dir_all(krender::engine::cache::manifest_dir(&cache));
        let pkg = temp.path().join("app");
        std::fs::create_dir_all(&pkg).unwrap();
        std::fs::write(pkg.join("Kptfile"), &kptfile).unwrap();
        std::fs::write(pkg.join("config.yaml"), CONFIG_MAP).unwrap();
        let entry = format!(
            "[[exec]]\nprogram = \"{}\"\ncache = {pure}\n",
            script.display()
        );
        std::fs::write(&table, entry).unwrap();
        let output = Command::new(env!("CARGO_BIN_EXE_krender"))
            .args([
                "fn",
                "render",
                "--allow-exec",
                "-o",
                "stdout",
                "--cache-dir",
            ])
            .arg(&cache)
            .arg(&pkg)
            .env("KRENDER_CONFIG", &table)
            .output()
            .unwrap();
        assert_eq!(
            output.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
        let stdout = String::from_utf8(output.stdout).unwrap();
        assert!(stdout.contains("size: SMALL"), "{stdout}");
        std::fs::read_to_string(&calls).unwrap().lines().count()
    };
    assert_eq!(run(true), 1);
    assert_eq!(run(true), 1);
    assert_eq!(run(false), 2);
    assert_eq!(run(false), 3);
}
