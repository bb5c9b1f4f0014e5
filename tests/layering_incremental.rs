//! [`LayeringSession`]: after an edit, only the edited documents, their
//! descendants and their substitution dependants are re-rendered (salsa
//! `WillExecute` events of `rendered_data`, reported as
//! `recomputed_documents`), and the output is always byte-identical to a
//! from-scratch `krender layer render`
//! ([`render_paths`](krender::layering::render_paths)) of the same files,
//! errors included. (Checked on every shared Deckhand case by
//! `deckhand::incremental` of the `cases` binary.)

use std::path::{Path, PathBuf};

use krender::layering::LayeringSession;

const POLICY: &str = "\
schema: deckhand/LayeringPolicy/v1
metadata:
  schema: metadata/Control/v1
  name: policy
data:
  layerOrder: [global, type, site]
";

fn global(app: &str, replicas: u32) -> String {
    format!(
        "\
# The {app} defaults.
schema: armada/Chart/v1
metadata:
  schema: metadata/Document/v1
  name: {app}-global
  labels: {{app: {app}, layer: global}}
  layeringDefinition: {{abstract: true, layer: global}}
data:
  values:
    replicas: {replicas}
    endpoint: http://admin:PASSWORD@{app}:8080
"
    )
}

fn type_doc(app: &str) -> String {
    format!(
        "\
schema: armada/Chart/v1
metadata:
  schema: metadata/Document/v1
  name: {app}-large
  labels: {{app: {app}, layer: type}}
  layeringDefinition:
    abstract: true
    layer: type
    parentSelector: {{app: {app}, layer: global}}
    actions: [{{method: merge, path: .}}]
data:
  values:
    pool: 20
"
    )
}

fn site(app: &str, site: &str, image: &str) -> String {
    format!(
        "\
schema: armada/Chart/v1
metadata:
  schema: metadata/Document/v1
  name: {app}-{site}
  layeringDefinition:
    abstract: false
    layer: site
    parentSelector: {{app: {app}, layer: type}}
    actions: [{{method: merge, path: .}}]
  substitutions:
    - src: {{schema: deckhand/Passphrase/v1, name: {app}-password, path: .}}
      dest: {{path: .values.endpoint, pattern: PASSWORD}}
data:
  values:
    image: {image}
"
    )
}

/// A concrete global-layer secret: a substitution source, not a parent.
fn secret(app: &str, value: &str) -> String {
    format!(
        "\
schema: deckhand/Passphrase/v1
metadata:
  schema: metadata/Document/v1
  name: {app}-password
  layeringDefinition: {{abstract: false, layer: global}}
data: {value}
"
    )
}

struct Tree {
    dir: tempfile::TempDir,
}

impl Tree {
    fn new() -> Tree {
        let tree = Tree {
            dir: tempfile::tempdir().expect("tempdir"),
        };
        tree.write("policy.yaml", POLICY);
        for app in ["a", "b"] {
            tree.write(&format!("global/{app}.yaml"), &global(app, 1));
            tree.write(&format!("global/{app}-secret.yaml"), &secret(app, "pw"));
            tree.write(&format!("type/{app}.yaml"), &type_doc(app));
            for s in ["s1", "s2"] {
                tree.write(
                    &format!("site/{s}/{app}.yaml"),
                    &site(app, s, &format!("{app}:1")),
                );
            }
        }
        tree
    }

    fn root(&self) -> PathBuf {
        self.dir.path().to_owned()
    }

    fn path(&self, relative: &str) -> PathBuf {
        self.dir.path().join(relative)
    }

    fn write(&self, relative: &str, text: &str) {
        let path = self.path(relative);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).expect("mkdir");
        }
        std::fs::write(path, text).expect("write");
    }

    /// Writes the file and reports the change to the session.
    fn edit(&self, session: &mut LayeringSession, relative: &str, text: &str) {
        self.write(relative, text);
        session.apply_change(&self.path(relative), Some(text.as_bytes().to_vec()));
    }
}

/// [`crate::support::session_against_fresh`]: the recomputed documents,
/// or the test fails with what differs from a from-scratch render.
fn render_and_compare(session: &mut LayeringSession, root: &Path) -> Vec<String> {
    crate::support::session_against_fresh(session, root)
        .unwrap_or_else(|problem| panic!("{problem}"))
}

fn names(list: &[&str]) -> Vec<String> {
    let mut names: Vec<String> = list.iter().map(|name| (*name).to_owned()).collect();
    names.sort();
    names
}

#[test]
fn first_render_computes_every_document() {
    let tree = Tree::new();
    let mut session = LayeringSession::new(&[tree.root()]).expect("session");
    let recomputed = render_and_compare(&mut session, &tree.root());
    // 2 × (global, secret, type, 2 sites) + the policy (a control document
    // is "rendered" to nothing, but it is still a query).
    assert_eq!(recomputed.len(), 11, "{recomputed:?}");
    // Nothing changed: nothing re-runs.
    assert_eq!(render_and_compare(&mut session, &tree.root()), names(&[]));
}

#[test]
fn editing_a_global_parent_recomputes_only_its_descendants() {
    let tree = Tree::new();
    let mut session = LayeringSession::new(&[tree.root()]).expect("session");
    render_and_compare(&mut session, &tree.root());
    tree.edit(&mut session, "global/a.yaml", &global("a", 5));
    assert_eq!(
        render_and_compare(&mut session, &tree.root()),
        names(&[
            "armada/Chart/v1/a-global",
            "armada/Chart/v1/a-large",
            "armada/Chart/v1/a-s1",
            "armada/Chart/v1/a-s2",
        ])
    );
}

#[test]
fn editing_a_global_source_recomputes_only_its_dependants() {
    let tree = Tree::new();
    let mut session = LayeringSession::new(&[tree.root()]).expect("session");
    render_and_compare(&mut session, &tree.root());
    tree.edit(
        &mut session,
        "global/b-secret.yaml",
        &secret("b", "rotated"),
    );
    assert_eq!(
        render_and_compare(&mut session, &tree.root()),
        names(&[
            "armada/Chart/v1/b-s1",
            "armada/Chart/v1/b-s2",
            "deckhand/Passphrase/v1/b-password",
        ])
    );
}

#[test]
fn editing_a_site_document_recomputes_only_it() {
    let tree = Tree::new();
    let mut session = LayeringSession::new(&[tree.root()]).expect("session");
    render_and_compare(&mut session, &tree.root());
    tree.edit(&mut session, "site/s2/a.yaml", &site("a", "s2", "a:2"));
    assert_eq!(
        render_and_compare(&mut session, &tree.root()),
        names(&["armada/Chart/v1/a-s2"])
    );
    // A comment-only edit (that moves no line) re-renders nothing; the
    // output still follows it.
    let commented = format!("{}# note\n", site("a", "s2", "a:2"));
    tree.edit(&mut session, "site/s2/a.yaml", &commented);
    assert_eq!(render_and_compare(&mut session, &tree.root()), names(&[]));
}

#[test]
fn added_deleted_and_broken_files_match_a_fresh_render() {
    let tree = Tree::new();
    let mut session = LayeringSession::new(&[tree.root()]).expect("session");
    render_and_compare(&mut session, &tree.root());

    // A new site file joins the set.
    tree.edit(&mut session, "site/s3/a.yaml", &site("a", "s3", "a:3"));
    assert_eq!(
        render_and_compare(&mut session, &tree.root()),
        names(&["armada/Chart/v1/a-s3"])
    );

    // Deleting a type document breaks its children's parent selection:
    // the same error as a fresh render.
    std::fs::remove_file(tree.path("type/b.yaml")).expect("rm");
    session.apply_change(&tree.path("type/b.yaml"), None);
    assert!(session.render().is_err());
    render_and_compare(&mut session, &tree.root());

    // Restoring it renders again; a YAML error is reported like the CLI's.
    tree.edit(&mut session, "type/b.yaml", &type_doc("b"));
    render_and_compare(&mut session, &tree.root());
    tree.edit(&mut session, "global/a.yaml", "data: [unclosed\n");
    assert!(session.render().is_err());
    render_and_compare(&mut session, &tree.root());
    tree.edit(&mut session, "global/a.yaml", &global("a", 2));
    render_and_compare(&mut session, &tree.root());
}

#[test]
fn absolute_change_paths_match_relative_roots() {
    // Watchers report absolute paths; the session was given a relative root
    // (tests run in the package directory).
    let target = Path::new(env!("CARGO_MANIFEST_DIR")).join("target");
    let dir = tempfile::tempdir_in(&target).expect("tempdir");
    let relative = Path::new("target").join(dir.path().file_name().expect("name"));
    let tree = Tree { dir };
    for (file, text) in [
        ("policy.yaml", POLICY.to_owned()),
        ("global/a.yaml", global("a", 1)),
        ("global/a-secret.yaml", secret("a", "pw")),
        ("type/a.yaml", type_doc("a")),
        ("site/s1/a.yaml", site("a", "s1", "a:1")),
    ] {
        tree.write(file, &text);
    }
    let mut session = LayeringSession::new(std::slice::from_ref(&relative)).expect("session");
    render_and_compare(&mut session, &relative);
    tree.edit(&mut session, "global/a.yaml", &global("a", 7));
    assert_eq!(
        render_and_compare(&mut session, &relative),
        names(&[
            "armada/Chart/v1/a-global",
            "armada/Chart/v1/a-large",
            "armada/Chart/v1/a-s1",
        ])
    );
    // A new, broken file: the error names it as the batch command does
    // (relative to the root it was given).
    tree.edit(&mut session, "site/s2/a.yaml", "data: [unclosed\n");
    assert!(session.render().is_err());
    render_and_compare(&mut session, &relative);
}
