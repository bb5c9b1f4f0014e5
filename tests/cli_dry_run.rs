//! Seeing into a render: `fn render --dry-run` (every key computed and
//! looked up, nothing run or written; what it predicts is what the render
//! then does), why packages ran, and `--timings`.

use crate::support::{krender_command, snapshot};
use std::path::Path;

const ROOT_KPTFILE: &str = "\
apiVersion: kpt.dev/v1
kind: Kptfile
metadata:
  name: app
pipeline:
  mutators:
    - image: ghcr.io/kptdev/krm-functions-catalog/set-namespace:latest
      configMap:
        namespace: shop
";

fn sub_kptfile(name: &str) -> String {
    format!(
        "apiVersion: kpt.dev/v1\nkind: Kptfile\nmetadata:\n  name: {name}\npipeline:\n  mutators:\n    - image: ghcr.io/kptdev/krm-functions-catalog/set-labels:latest\n      configMap:\n        component: {name}\n"
    )
}

fn config_map(name: &str) -> String {
    format!("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\ndata:\n  size: small\n")
}

/// The root, and two subpackages `db` and `web`.
fn write_tree(root: &Path) {
    let files = [
        ("Kptfile", ROOT_KPTFILE.to_owned()),
        ("root.yaml", config_map("root")),
        ("db/Kptfile", sub_kptfile("db")),
        ("db/config.yaml", config_map("db")),
        ("web/Kptfile", sub_kptfile("web")),
        ("web/config.yaml", config_map("web")),
    ];
    for (path, text) in files {
        let path = root.join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
}

/// `fn render PKG --cache-dir CACHE ARGS…`: exit code, stdout, stderr.
fn render(pkg: &Path, cache: &Path, args: &[&str]) -> (Option<i32>, String, String) {
    let output = krender_command()
        .args(["fn", "render"])
        .arg(pkg)
        .arg("--cache-dir")
        .arg(cache)
        .args(args)
        .env("KRENDER_CONFIG", pkg.join("no-render.toml"))
        .output()
        .unwrap();
    (
        output.status.code(),
        String::from_utf8(output.stdout).unwrap(),
        String::from_utf8(output.stderr).unwrap(),
    )
}

/// Pipelines a render ran, from its `--stats`.
fn render_counting(pkg: &Path, cache: &Path) -> u64 {
    let stats = pkg.parent().unwrap().join("stats.json");
    let stats_arg = stats.display().to_string();
    let (code, _, stderr) = render(pkg, cache, &["--stats", &stats_arg]);
    assert_eq!(code, Some(0), "{stderr}");
    let stats: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&stats).unwrap()).unwrap();
    stats["pipelines_run"].as_u64().unwrap()
}

fn dry_json(pkg: &Path, cache: &Path, extra: &[&str]) -> serde_json::Value {
    let mut args = vec!["--dry-run=json"];
    args.extend_from_slice(extra);
    let (code, stdout, stderr) = render(pkg, cache, &args);
    assert_eq!(code, Some(0), "{stderr}");
    serde_json::from_str(&stdout).unwrap()
}

fn action_of<'a>(dry: &'a serde_json::Value, package: &str) -> (&'a str, &'a str) {
    let one = dry["packages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|one| one["package"] == package)
        .unwrap_or_else(|| panic!("{package} missing from {dry}"));
    (
        one["action"].as_str().unwrap(),
        one["why"]
            .as_str()
            .or_else(|| one["from"].as_str())
            .unwrap_or(""),
    )
}

/// Cold, after a render, and after an edit: the dry run names the packages
/// that run and why, changes no file, and the render that follows runs
/// exactly as many pipelines as it said.
#[test]
fn dry_run_predicts_the_render_and_writes_nothing() {
    let temp = tempfile::tempdir().unwrap();
    let pkg = temp.path().join("pkg");
    let cache = temp.path().join("cache");
    write_tree(&pkg);
    let before = snapshot(&pkg);
    let (code, stdout, stderr) = render(&pkg, &cache, &["--dry-run"]);
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(
        stdout.lines().next(),
        Some("would run 3 of 3 packages: 2 not in the cache, 1 with a subpackage that runs")
    );
    assert!(
        stdout.contains("  run  db: never ran with this cache\n")
            && stdout.contains("  run  .: a subpackage runs"),
        "{stdout}"
    );
    assert_eq!(snapshot(&pkg), before, "a dry run wrote into the package");
    assert_eq!(render_counting(&pkg, &cache), 3);
    // The render after it reaches the fixed point.
    render_counting(&pkg, &cache);
    let (_, stdout, _) = render(&pkg, &cache, &["--dry-run"]);
    assert_eq!(
        stdout,
        "would run 0 of 3 packages; 3 from the local cache\n"
    );
    // One subpackage edited: it and the root run, the other is cached.
    let config = pkg.join("db/config.yaml");
    let text = std::fs::read_to_string(&config).unwrap();
    std::fs::write(&config, text.replace("small", "large")).unwrap();
    let before = snapshot(&pkg);
    let dry = dry_json(&pkg, &cache, &[]);
    assert_eq!(snapshot(&pkg), before, "a dry run wrote into the package");
    assert_eq!(action_of(&dry, "db"), ("run", "not-stored"));
    let db = dry["packages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|one| one["package"] == "db")
        .unwrap();
    assert_eq!(
        db["causes"],
        serde_json::json!([{"cause": "files", "modified": ["config.yaml"]}]),
        "{db}"
    );
    let (_, text, _) = render(&pkg, &cache, &["--dry-run"]);
    assert!(text.contains("  run  db: config.yaml modified\n"), "{text}");
    assert_eq!(action_of(&dry, "."), ("run", "subpackage-runs"));
    assert_eq!(action_of(&dry, "web"), ("cached", "local"));
    assert_eq!(dry["summary"]["run"], 2);
    assert_eq!(dry["summary"]["cached_local"], 1);
    // The render says the same in --stats: why each package ran.
    let stats = pkg.parent().unwrap().join("stats.json");
    let stats_arg = stats.display().to_string();
    let (code, _, stderr) = render(&pkg, &cache, &["--stats", &stats_arg]);
    assert_eq!(code, Some(0), "{stderr}");
    let stats: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&stats).unwrap()).unwrap();
    assert_eq!(stats["pipelines_run"], 2);
    assert_eq!(
        stats["reran"],
        serde_json::json!([
            {"package": ".", "causes": [{"cause": "subpackages", "changed": ["db"]}]},
            {"package": "db", "causes": [{"cause": "files", "modified": ["config.yaml"]}]},
        ]),
        "{stats}"
    );
}

/// A second machine (empty local cache) sharing a remote: the dry run says
/// which runs come from the remote; without a cache, every run is said to
/// be uncached; a breadth-first tree is refused with the reason.
#[test]
fn dry_run_names_the_cache_each_run_comes_from() {
    let temp = tempfile::tempdir().unwrap();
    let pkg = temp.path().join("pkg");
    write_tree(&pkg);
    let remote = format!("file://{}", temp.path().join("remote").display());
    let (code, _, stderr) = render(&pkg, &temp.path().join("a"), &["--remote-cache", &remote]);
    assert_eq!(code, Some(0), "{stderr}");
    let dry = dry_json(&pkg, &temp.path().join("b"), &["--remote-cache", &remote]);
    // The render wrote its output: the root's run over the written tree was
    // recorded too, so every package is found.
    assert_eq!(dry["summary"]["cached_remote"], 3, "{dry}");
    assert_eq!(action_of(&dry, "web"), ("cached", "remote"));
    let (code, stdout, _) = render(&pkg, &temp.path().join("c"), &["--dry-run", "--no-cache"]);
    assert_eq!(code, Some(0));
    assert_eq!(
        stdout.lines().next(),
        Some("would run 3 of 3 packages: 2 cache off, 1 with a subpackage that runs")
    );
    let kptfile = pkg.join("Kptfile");
    let text = std::fs::read_to_string(&kptfile).unwrap();
    std::fs::write(
        &kptfile,
        text.replace(
            "  name: app\n",
            "  name: app\n  annotations:\n    kpt.dev/bfs-rendering: \"true\"\n",
        ),
    )
    .unwrap();
    let (code, stdout, stderr) = render(&pkg, &temp.path().join("c"), &["--dry-run"]);
    assert_eq!(code, Some(1));
    assert!(stdout.is_empty());
    assert!(
        stderr.contains("--dry-run answers only depth-first renders"),
        "{stderr}"
    );
}

/// `--timings FILE`: Chrome trace events, the render's phases on track 0
/// and one complete event per package on a worker's track, `run` cold and
/// `cached` when the action cache answers.
#[test]
fn timings_trace_every_package_on_a_worker_track() {
    let temp = tempfile::tempdir().unwrap();
    let pkg = temp.path().join("pkg");
    let cache = temp.path().join("cache");
    write_tree(&pkg);
    let trace = temp.path().join("trace.json");
    let trace_arg = trace.display().to_string();
    let events = |args: &[&str]| {
        let (code, _, stderr) = render(&pkg, &cache, args);
        assert_eq!(code, Some(0), "{stderr}");
        let trace: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&trace).unwrap()).unwrap();
        trace["traceEvents"].as_array().unwrap().clone()
    };
    let cold = events(&["--timings", &trace_arg]);
    let complete: Vec<&serde_json::Value> = cold.iter().filter(|e| e["ph"] == "X").collect();
    let phases: Vec<&str> = complete
        .iter()
        .filter(|e| e["tid"] == 0)
        .map(|e| e["name"].as_str().unwrap())
        .collect();
    assert!(
        phases.contains(&"render") && phases.contains(&"write"),
        "{phases:?}"
    );
    let mut packages: Vec<(&str, &str)> = complete
        .iter()
        .filter(|e| e["tid"] != 0)
        .map(|e| (e["name"].as_str().unwrap(), e["cat"].as_str().unwrap()))
        .collect();
    packages.sort();
    assert_eq!(packages, [(".", "run"), ("db", "run"), ("web", "run")]);
    for event in complete {
        assert!(
            event["ts"].as_u64().is_some() && event["dur"].as_u64().is_some(),
            "{event}"
        );
    }
    // The render after it is answered from the action cache.
    let next = events(&["--timings", &trace_arg, "-o", "stdout"]);
    let cached = next
        .iter()
        .filter(|e| e["ph"] == "X" && e["tid"] != 0 && e["cat"] == "cached")
        .count();
    assert_eq!(cached, 3, "{next:?}");
}
