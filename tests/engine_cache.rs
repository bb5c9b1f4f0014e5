//! End-to-end tests of the persistent function-result cache through the
//! `krender` binary: a warm render is byte-identical to a cold one, and it
//! is answered from the cache (no new entries, and a doctored entry shows
//! up in the output).

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
        .output()
        .unwrap()
}

/// Every index file's bytes, to show a warm render wrote nothing.
fn index_snapshot(cache: &Path) -> Vec<(String, Vec<u8>)> {
    let mut files = Vec::new();
    let mut stack = vec![cache.join("index-v5")];
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
    assert_eq!(warm.stderr, cold.stderr);
    // Every cacheable call either hits or writes; nothing was written.
    assert_eq!(index_snapshot(&cache), index_after_cold);

    // Doctor every entry: the next render must show the doctored bytes,
    // which proves the answers come from the cache.
    for entry in cacache::index::ls(&cache) {
        let key = entry.unwrap().key;
        let value = cacache::read_sync(&cache, &key).unwrap();
        let doctored = String::from_utf8(value).unwrap().replace("aaaa", "bbbb");
        cacache::write_sync(&cache, &key, doctored.as_bytes()).unwrap();
    }
    let served = render(&pkg, &cache, &[]);
    assert_eq!(served.status.code(), Some(0));
    let served_stdout = String::from_utf8(served.stdout).unwrap();
    assert_eq!(served_stdout, cold_stdout.replace("aaaa", "bbbb"));

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
    assert!(text.contains("entries: 3\n"), "{text}");
    assert_eq!(cache_cmd("clear").status.code(), Some(0));
    let text = String::from_utf8(cache_cmd("stats").stdout).unwrap();
    assert!(text.contains("entries: 0\n"), "{text}");
}
