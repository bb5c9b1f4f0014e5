//! Incrementality of the render engine (`engine::session`): after an edit,
//! salsa re-runs the pipelines of the edited package and its ancestors only,
//! and the result is byte-identical to a fresh session's. (A session equals
//! a one-shot render on every shared kpt case: `kpt::session` of the
//! `cases` binary.)

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use krender::engine::db::RenderDb;
use krender::engine::session::RenderSession;
use krender::hydrate;
use salsa::plumbing::AsId;

use crate::support::render_context;

fn kptfile(name: &str, label: &str) -> String {
    format!(
        "apiVersion: kpt.dev/v1
kind: Kptfile
metadata:
  name: {name}
pipeline:
  mutators:
    - image: ghcr.io/kptdev/krm-functions-catalog/set-labels:latest
      configMap:
        {label}: \"true\"
"
    )
}

fn config_map(name: &str, value: &str) -> String {
    format!(
        "apiVersion: v1
kind: ConfigMap
metadata:
  name: {name} # keep this comment
data:
  value: {value}
"
    )
}

/// root -> {a -> {a1}, b}: every package has a Kptfile and one resource.
fn write_tree(root: &Path) {
    for (dir, name) in [("", "root"), ("a", "a"), ("a/a1", "a1"), ("b", "b")] {
        let pkg = root.join(dir);
        std::fs::create_dir_all(&pkg).unwrap();
        std::fs::write(pkg.join("Kptfile"), kptfile(name, &format!("in-{name}"))).unwrap();
        std::fs::write(
            pkg.join("cm.yaml"),
            config_map(&format!("cm-{name}"), "one"),
        )
        .unwrap();
    }
}

/// [`write_tree`] with a root that renders breadth-first.
fn write_bfs_tree(root: &Path) {
    write_tree(root);
    let bfs_kptfile = kptfile("root", "in-root").replace(
        "  name: root\n",
        "  name: root\n  annotations:\n    kpt.dev/bfs-rendering: \"true\"\n",
    );
    std::fs::write(root.join("Kptfile"), bfs_kptfile).unwrap();
}

type Events = Arc<Mutex<Vec<salsa::Id>>>;

/// A session on `root` whose database records which packages'
/// `rendered_package` query executed.
fn session(root: &Path, events: Option<Events>) -> RenderSession {
    let callback = events.map(|events| {
        Box::new(move |event: salsa::Event| {
            if let salsa::EventKind::WillExecute { database_key } = event.kind
                && format!("{database_key:?}").starts_with("rendered_package")
            {
                events.lock().unwrap().push(database_key.key_index());
            }
        }) as Box<dyn Fn(salsa::Event) + Send + Sync>
    });
    RenderSession::with_db(RenderDb::new(render_context(root), callback), Some(2))
}

/// [`render`] through `engine::oneshot` (what `fn render` runs).
fn render_once(root: &Path) -> (String, String) {
    let kptfile = hydrate::load_root(root).unwrap();
    let mut log = Vec::new();
    let (outcome, _) = krender::engine::oneshot::render_once(
        &render_context(root),
        Some(2),
        kptfile,
        &mut log,
        None,
        None,
        false,
    );
    finish(outcome, log)
}

/// Renders with `session` and returns the `-o stdout` bytes and the log
/// (durations normalised).
fn render(session: &mut RenderSession, root: &Path) -> (String, String) {
    let kptfile = hydrate::load_root(root).unwrap();
    session.refresh(&kptfile);
    let mut log = Vec::new();
    let outcome = session.render(kptfile, &mut log);
    finish(outcome, log)
}

/// The `-o stdout` bytes and the log with durations normalised.
fn finish(outcome: hydrate::RenderOutcome, log: Vec<u8>) -> (String, String) {
    assert!(outcome.error.is_none(), "{:?}", outcome.error);
    let mut out = Vec::new();
    let mut closing = Vec::new();
    hydrate::apply(
        outcome,
        &hydrate::Output::Stdout,
        None,
        &mut out,
        &mut closing,
    )
    .unwrap();
    let log = crate::support::normalize_durations(&String::from_utf8(log).unwrap());
    (String::from_utf8(out).unwrap(), log)
}

fn ids(session: &RenderSession, root: &Path, dirs: &[&str]) -> Vec<salsa::Id> {
    let mut ids: Vec<salsa::Id> = dirs
        .iter()
        .map(|dir| {
            let path: PathBuf = if dir.is_empty() {
                root.to_path_buf()
            } else {
                root.join(dir)
            };
            session.package(&path).unwrap().as_id()
        })
        .collect();
    ids.sort();
    ids
}

fn take(events: &Events) -> Vec<salsa::Id> {
    let mut ran = std::mem::take(&mut *events.lock().unwrap());
    ran.sort();
    ran
}

#[test]
fn leaf_edit_reruns_the_leaf_and_its_ancestors_only() {
    let temp = tempfile::tempdir().unwrap();
    let root = temp.path().join("root");
    write_tree(&root);
    let events: Events = Arc::default();
    let mut warm = session(&root, Some(events.clone()));

    let (first, _) = render(&mut warm, &root);
    assert!(first.contains("in-a1: \"true\""), "{first}");
    assert_eq!(take(&events), ids(&warm, &root, &["", "a", "a/a1", "b"]));

    // Nothing changed: nothing runs, the output is the same.
    let (again, _) = render(&mut warm, &root);
    assert_eq!(again, first);
    assert_eq!(take(&events), Vec::<salsa::Id>::new());

    // Edit the leaf a1: a1, a and the root re-run; b does not.
    std::fs::write(root.join("a/a1/cm.yaml"), config_map("cm-a1", "two")).unwrap();
    let (edited, edited_log) = render(&mut warm, &root);
    assert_eq!(take(&events), ids(&warm, &root, &["", "a", "a/a1"]));
    assert!(edited.contains("value: two"), "{edited}");
    assert_ne!(edited, first);

    // The same bytes and log as a fresh session on the edited tree, and as
    // the one-shot render `fn render` uses.
    let (fresh, fresh_log) = render(&mut session(&root, None), &root);
    assert_eq!(edited, fresh);
    assert_eq!(edited_log, fresh_log);
    let (once, once_log) = render_once(&root);
    assert_eq!(edited, once);
    assert_eq!(edited_log, once_log);

    // Editing b re-runs b and the root only.
    std::fs::write(root.join("b/cm.yaml"), config_map("cm-b", "three")).unwrap();
    render(&mut warm, &root);
    assert_eq!(take(&events), ids(&warm, &root, &["", "b"]));
}

#[test]
fn new_subpackage_is_picked_up() {
    let temp = tempfile::tempdir().unwrap();
    let root = temp.path().join("root");
    write_tree(&root);
    let events: Events = Arc::default();
    let mut warm = session(&root, Some(events.clone()));
    render(&mut warm, &root);
    take(&events);

    let added = root.join("b/b1");
    std::fs::create_dir_all(&added).unwrap();
    std::fs::write(added.join("Kptfile"), kptfile("b1", "in-b1")).unwrap();
    std::fs::write(added.join("cm.yaml"), config_map("cm-b1", "new")).unwrap();
    let (output, _) = render(&mut warm, &root);
    assert!(output.contains("cm-b1"), "{output}");
    assert_eq!(take(&events), ids(&warm, &root, &["", "b", "b/b1"]));
    let (fresh, _) = render(&mut session(&root, None), &root);
    assert_eq!(output, fresh);
}

/// Under BFS every package's input comes from its ancestors' outputs: after
/// an edit the root re-runs, and below it only the packages whose share of
/// the resources changed; output and log equal a fresh render's.
#[test]
fn bfs_edit_reruns_only_packages_whose_input_changed() {
    let temp = tempfile::tempdir().unwrap();
    let root = temp.path().join("root");
    write_bfs_tree(&root);
    let mut warm = session(&root, None);

    let (first, first_log) = render(&mut warm, &root);
    assert!(first.contains("in-root: \"true\""), "{first}");
    assert_eq!(warm.pipelines_run(), 4, "every package runs once");

    // Nothing changed: every run is reused.
    let (again, again_log) = render(&mut warm, &root);
    assert_eq!((again, again_log), (first.clone(), first_log));
    assert_eq!(warm.pipelines_run(), 4);

    // Edit a1: the root, a and a1 see a changed input; b does not.
    std::fs::write(root.join("a/a1/cm.yaml"), config_map("cm-a1", "two")).unwrap();
    let (edited, edited_log) = render(&mut warm, &root);
    assert_eq!(warm.pipelines_run(), 4 + 3);
    assert!(edited.contains("value: two"), "{edited}");
    let (fresh, fresh_log) = render(&mut session(&root, None), &root);
    assert_eq!(edited, fresh);
    assert_eq!(edited_log, fresh_log);
    let (once, once_log) = render_once(&root);
    assert_eq!((edited, edited_log), (once, once_log));

    // A subpackage's Kptfile is also one of the root's resources: editing
    // b's re-runs the root and b; a and a1 still see the same input.
    std::fs::write(root.join("b/Kptfile"), kptfile("b", "in-b-renamed")).unwrap();
    let (renamed, _) = render(&mut warm, &root);
    assert_eq!(warm.pipelines_run(), 4 + 3 + 2);
    assert!(renamed.contains("in-b-renamed"), "{renamed}");
}

/// [`render`] after a watcher's report of `changed` (relative paths).
fn render_changed(session: &mut RenderSession, root: &Path, changed: &[&str]) -> (String, String) {
    let kptfile = hydrate::load_root(root).unwrap();
    let changed = changed.iter().map(|path| root.join(path)).collect();
    session.refresh_changed(&kptfile, &changed);
    let mut log = Vec::new();
    let outcome = session.render(kptfile, &mut log);
    finish(outcome, log)
}

#[test]
fn watch_refresh_reads_only_the_packages_owning_the_changed_paths() {
    let temp = tempfile::tempdir().unwrap();
    let root = temp.path().join("root");
    write_tree(&root);
    let events: Events = Arc::default();
    let mut warm = session(&root, Some(events.clone()));
    render(&mut warm, &root);
    take(&events);

    // a1 and b both edited, only a1 reported: only a1's path re-runs, and
    // b's edit is not seen (the report is what says where to look).
    std::fs::write(root.join("a/a1/cm.yaml"), config_map("cm-a1", "two")).unwrap();
    std::fs::write(root.join("b/cm.yaml"), config_map("cm-b", "two")).unwrap();
    let (edited, _) = render_changed(&mut warm, &root, &["a/a1/cm.yaml"]);
    assert_eq!(take(&events), ids(&warm, &root, &["", "a", "a/a1"]));
    assert!(
        edited.contains("name: cm-a1 # keep this comment\n"),
        "{edited}"
    );
    assert_eq!(edited.matches("value: two").count(), 1, "{edited}");

    // No paths (a watcher that lost events): the whole tree is read.
    let (whole, whole_log) = render_changed(&mut warm, &root, &[]);
    assert_eq!(take(&events), ids(&warm, &root, &["", "b"]));
    assert_eq!(whole.matches("value: two").count(), 2, "{whole}");
    assert_eq!((whole, whole_log), render_once(&root));

    // A new file, then the same file removed: its package is listed again.
    std::fs::write(root.join("b/extra.yaml"), config_map("cm-extra", "x")).unwrap();
    let (added, _) = render_changed(&mut warm, &root, &["b/extra.yaml"]);
    assert!(added.contains("name: cm-extra"), "{added}");
    assert_eq!(take(&events), ids(&warm, &root, &["", "b"]));
    std::fs::remove_file(root.join("b/extra.yaml")).unwrap();
    let (removed, removed_log) = render_changed(&mut warm, &root, &["b/extra.yaml"]);
    assert!(!removed.contains("cm-extra"), "{removed}");
    assert_eq!((removed, removed_log), render_once(&root));

    // A Kptfile may change the tree's shape: the whole refresh runs, and
    // also finds the unreported edit beside it.
    std::fs::write(root.join("a/Kptfile"), kptfile("a", "relabelled")).unwrap();
    std::fs::write(root.join("b/cm.yaml"), config_map("cm-b", "three")).unwrap();
    let (relabelled, relabelled_log) = render_changed(&mut warm, &root, &["a/Kptfile"]);
    assert!(relabelled.contains("relabelled: \"true\""), "{relabelled}");
    assert!(relabelled.contains("value: three"), "{relabelled}");
    assert_eq!((relabelled, relabelled_log), render_once(&root));
    // So does a new subpackage directory.
    let added = root.join("b/b1");
    std::fs::create_dir_all(&added).unwrap();
    std::fs::write(added.join("Kptfile"), kptfile("b1", "in-b1")).unwrap();
    std::fs::write(added.join("cm.yaml"), config_map("cm-b1", "one")).unwrap();
    let (grown, grown_log) = render_changed(&mut warm, &root, &["b/b1"]);
    assert!(grown.contains("name: cm-b1"), "{grown}");
    assert_eq!((grown, grown_log), render_once(&root));
}

#[test]
fn bfs_level_run_in_parallel_matches_the_sequential_walk_when_an_output_moves_to_a_sibling() {
    // BFS root -> {a -> {a1}, b}. a's starlark moves a1's ConfigMap into b
    // (by its package-path). The one-shot render runs a and b in parallel,
    // so b's early run saw b's old list: it must be thrown away and b run
    // again on the moved resource, as the sequential walk (a watch
    // session's) does.
    let temp = tempfile::tempdir().unwrap();
    let root = temp.path().join("root");
    write_bfs_tree(&root);
    std::fs::write(
        root.join("a/Kptfile"),
        "apiVersion: kpt.dev/v1
kind: Kptfile
metadata:
  name: a
pipeline:
  mutators:
    - image: ghcr.io/kptdev/krm-functions-catalog/starlark:latest
      configPath: mover.yaml
",
    )
    .unwrap();
    std::fs::write(
        root.join("a/mover.yaml"),
        "apiVersion: fn.kpt.dev/v1alpha1
kind: StarlarkRun
metadata:
  name: mover
  annotations:
    config.kubernetes.io/local-config: \"true\"
source: |
  key = \"internal.config.kubernetes.io/package-path\"
  for r in ctx.resource_list[\"items\"]:
    if r[\"metadata\"][\"name\"] == \"cm-a1\":
      path = r[\"metadata\"][\"annotations\"][key]
      r[\"metadata\"][\"annotations\"][key] = path.replace(\"/a/a1\", \"/b\")
",
    )
    .unwrap();

    let (once, once_log) = render_once(&root);
    let (walked, walked_log) = render(&mut session(&root, None), &root);
    assert_eq!(once, walked);
    assert_eq!(once_log, walked_log);
    // b ran on the moved ConfigMap (its own list was replaced).
    let moved = once
        .split("\n- ")
        .find(|item| {
            item.contains("name: cm-a1") && item.contains("config.kubernetes.io/path: b/cm.yaml")
        })
        .unwrap_or_else(|| panic!("cm-a1 was not moved into b:\n{once}"));
    assert!(moved.contains("in-b: \"true\""), "{moved}");
}
