//! The action cache: a new process answers unchanged packages from it and
//! runs only the packages an edit reaches, and every such incremental
//! render is byte-identical to a `--no-cache` render of the same edited
//! tree (files, stdout, stderr, exit code), on generated trees (DFS and
//! BFS, both through the action cache; every shared kpt case is checked
//! by `kpt::incremental` of the `cases` binary). A corrupt entry is never
//! served.

use crate::support::{self, copy_dir, edit_both as edit, render_command};
use std::path::Path;
use std::process::Output;

/// A tree of `1 + fanout + fanout²` packages, two builtins each (a
/// starlark step in every leaf), resources spread over two files.
pub(crate) fn generate(root: &Path, fanout: usize, bfs: bool) {
    let mut queue = vec![(root.to_path_buf(), 0usize, "root".to_owned())];
    while let Some((dir, depth, name)) = queue.pop() {
        std::fs::create_dir_all(&dir).unwrap();
        let annotations = if bfs && depth == 0 {
            "  annotations:\n    kpt.dev/bfs-rendering: \"true\"\n"
        } else {
            ""
        };
        let starlark = if depth == 2 {
            "    - image: ghcr.io/kptdev/krm-functions-catalog/starlark:v0.5.0\n      configPath: fn.star.yaml\n"
        } else {
            ""
        };
        std::fs::write(
            dir.join("Kptfile"),
            format!(
                "apiVersion: kpt.dev/v1\nkind: Kptfile\nmetadata:\n  name: {name}\n{annotations}pipeline:\n  mutators:\n    - image: ghcr.io/kptdev/krm-functions-catalog/set-namespace:v0.4.1\n      configMap:\n        namespace: ns-{depth}\n    - image: ghcr.io/kptdev/krm-functions-catalog/set-labels:v0.2.0\n      configMap:\n        level: l{depth}\n{starlark}"
            ),
        )
        .unwrap();
        if depth == 2 {
            std::fs::write(
                dir.join("fn.star.yaml"),
                "apiVersion: fn.kpt.dev/v1alpha1\nkind: StarlarkRun\nmetadata:\n  name: tag\n  annotations:\n    config.kubernetes.io/local-config: \"true\"\nsource: |\n  for r in ctx.resource_list[\"items\"]:\n    if r[\"kind\"] == \"ConfigMap\":\n      r[\"data\"][\"tagged\"] = \"yes\"\n",
            )
            .unwrap();
        }
        std::fs::write(
            dir.join("app.yaml"),
            format!(
                "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: app-{name} # the workload\nspec:\n  replicas: 1\n---\napiVersion: v1\nkind: Service\nmetadata:\n  name: svc-{name}\nspec:\n  ports:\n    - port: 80\n"
            ),
        )
        .unwrap();
        std::fs::write(
            dir.join("config.yaml"),
            format!(
                "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm-{name}\ndata:\n  k: v\n"
            ),
        )
        .unwrap();
        if depth < 2 {
            for i in 0..fanout {
                queue.push((
                    dir.join(format!("sub-{i}")),
                    depth + 1,
                    format!("{name}-{i}"),
                ));
            }
        }
    }
}

/// Runs [`render_command`] to its end.
fn krender(pkg: &Path, cache: Option<&Path>, extra: &[&str], stats: Option<&Path>) -> Output {
    render_command(pkg, cache, extra, stats).output().unwrap()
}

/// [`support::render_both`]: the cached render's stats, or the test fails
/// with `what` and the difference from `--no-cache`.
fn render_both(
    cached: &Path,
    uncached: &Path,
    cache: &Path,
    extra: &[&str],
    what: &str,
) -> serde_json::Value {
    support::render_both(cached, uncached, cache, extra)
        .unwrap_or_else(|difference| panic!("{what}: {difference}"))
}

#[test]
fn incremental_renders_match_no_cache_renders_and_run_only_what_an_edit_reaches() {
    for bfs in [false, true] {
        let temp = tempfile::tempdir().unwrap();
        let (a, b) = (temp.path().join("a/pkg"), temp.path().join("b/pkg"));
        generate(&a, 3, bfs);
        copy_dir(&a, &b);
        let cache = temp.path().join("cache");
        let packages = 1 + 3 + 9;
        let mode = if bfs { "BFS" } else { "DFS" };

        let cold = render_both(&a, &b, &cache, &[], &format!("{mode} cold"));
        assert_eq!(cold["packages"], packages);
        assert_eq!(cold["pipelines_run"], packages, "{mode} cold");
        // In place the first render rewrites every file: the second runs
        // every pipeline on the new inputs and reaches a fixed point.
        render_both(&a, &b, &cache, &[], &format!("{mode} second"));

        edit([&a, &b], "sub-1/sub-2/config.yaml", "  edited: leaf\n");
        let leaf = render_both(&a, &b, &cache, &[], &format!("{mode} leaf edit"));
        edit([&a, &b], "app.yaml", "# root edit\n");
        let root = render_both(&a, &b, &cache, &[], &format!("{mode} root edit"));
        edit(
            [&a, &b],
            "sub-2/Kptfile",
            "    - image: ghcr.io/kptdev/krm-functions-catalog/set-annotations:v0.1.4\n      configMap:\n        team: t\n",
        );
        let middle = render_both(&a, &b, &cache, &[], &format!("{mode} Kptfile edit"));
        // The new function rewrote the files below sub-2: they are new
        // inputs, rendered once more to the fixed point.
        render_both(
            &a,
            &b,
            &cache,
            &[],
            &format!("{mode} after the Kptfile edit"),
        );
        edit([&a, &b], "sub-0/sub-0/config.yaml", "  edited: again\n");
        let stdout = render_both(
            &a,
            &b,
            &cache,
            &["-o", "stdout"],
            &format!("{mode} -o stdout"),
        );
        // The leaf, its parent and the root (BFS: the root, then each
        // package whose scope the edit reached, down to the leaf).
        assert_eq!(leaf["pipelines_run"], 3, "{mode} {leaf}");
        assert_eq!(leaf["action_cache_hits"], packages - 3, "{mode} {leaf}");
        // The root's own edit leaves every other scope as it was.
        assert_eq!(root["pipelines_run"], 1, "{mode} {root}");
        // DFS: sub-2 and the root. BFS: the root (sub-2's Kptfile is in
        // its scope), sub-2, and sub-2's three subpackages, whose
        // resources sub-2's new function annotates before they run.
        let middle_runs = if bfs { 5 } else { 2 };
        assert_eq!(middle["pipelines_run"], middle_runs, "{mode} {middle}");
        // `-o stdout` shares the in-place renders' entries.
        assert_eq!(stdout["pipelines_run"], 3, "{mode} {stdout}");
    }
}

#[test]
fn a_corrupt_package_run_is_dropped_and_recomputed() {
    let temp = tempfile::tempdir().unwrap();
    let (a, b) = (temp.path().join("a/pkg"), temp.path().join("b/pkg"));
    generate(&a, 2, false);
    copy_dir(&a, &b);
    let cache = temp.path().join("cache");
    render_both(&a, &b, &cache, &[], "cold");
    render_both(&a, &b, &cache, &[], "second");
    // Damage every stored run.
    let packs = krender::engine::store::store_dir(&cache).join("packs");
    let mut doctored = 0;
    for pack in std::fs::read_dir(&packs).unwrap() {
        let path = pack.unwrap().path();
        let mut bytes = std::fs::read(&path).unwrap();
        for byte in bytes.iter_mut().step_by(97) {
            *byte ^= 0x55;
        }
        std::fs::write(&path, bytes).unwrap();
        doctored += 1;
    }
    assert!(doctored > 0);
    edit([&a, &b], "app.yaml", "# root edit\n");
    let stats = render_both(&a, &b, &cache, &[], "after doctoring");
    assert_eq!(stats["pipelines_run"], stats["packages"], "{stats}");
    // The damaged entries are gone or replaced: the next edit hits again.
    edit([&a, &b], "app.yaml", "# root edit again\n");
    let stats = render_both(&a, &b, &cache, &[], "after recomputing");
    assert_eq!(stats["pipelines_run"], 1, "{stats}");
}

/// A render whose reader went away (`| head`) is never replayed: the next
/// render with the same tree prints the whole list, as `--no-cache` does.
#[test]
fn output_cut_short_is_not_recorded_for_replay() {
    use std::process::Stdio;
    let temp = tempfile::tempdir().unwrap();
    let root = temp.path().join("a/pkg");
    generate(&root, 3, false);
    let cache = temp.path().join("cache");
    // Reach the fixed point first: -o stdout leaves the tree alone anyway.
    let mut child = render_command(&root, Some(&cache), &["-o", "stdout"], None)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // The reader is gone before anything is written.
    drop(child.stdout.take());
    child.wait().unwrap();
    let replayed = krender(&root, Some(&cache), &["-o", "stdout"], None);
    let fresh = krender(&root, None, &["-o", "stdout"], None);
    assert_eq!(replayed.status.code(), Some(0));
    assert!(!fresh.stdout.is_empty());
    assert_eq!(
        String::from_utf8_lossy(&replayed.stdout),
        String::from_utf8_lossy(&fresh.stdout)
    );
}

/// `KRM_DISABLE_ATTRIBUTION` changes what is printed, so a manifest
/// recorded without it is not replayed with it (nor the other way round).
#[test]
fn the_manifest_key_covers_krm_disable_attribution() {
    let temp = tempfile::tempdir().unwrap();
    let root = temp.path().join("pkg");
    std::fs::create_dir_all(&root).unwrap();
    std::fs::write(
        root.join("Kptfile"),
        "apiVersion: kpt.dev/v1\nkind: Kptfile\nmetadata:\n  name: pkg\n",
    )
    .unwrap();
    std::fs::write(
        root.join("sql.yaml"),
        "apiVersion: sql.cnrm.cloud.google.com/v1beta1\nkind: SQLInstance\nmetadata:\n  name: db\n",
    )
    .unwrap();
    let cache = temp.path().join("cache");
    let render = |disable: bool, cache: Option<&Path>| {
        let mut command = render_command(&root, cache, &["-o", "stdout"], None);
        if disable {
            command.env("KRM_DISABLE_ATTRIBUTION", "true");
        } else {
            command.env_remove("KRM_DISABLE_ATTRIBUTION");
        }
        String::from_utf8(command.output().unwrap().stdout).unwrap()
    };
    for _ in 0..2 {
        let with = render(false, Some(&cache));
        assert!(
            with.contains("cnrm.cloud.google.com/blueprint: 'krm-fn'"),
            "{with}"
        );
        assert_eq!(with, render(false, None));
        let without = render(true, Some(&cache));
        assert!(!without.contains("blueprint"), "{without}");
        assert_eq!(without, render(true, None));
    }
}
