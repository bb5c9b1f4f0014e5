//! Package reader/writer tests on real directories: edits through the node
//! API come back with exact bytes, `.krmignore` and subpackages are skipped,
//! reader annotations look as kpt writes them, and the writer deletes files
//! whose resources disappeared while leaving resource-less files alone.

use std::path::Path;

use krender::krm::resource;
use krender::pkg::reader::{ReadOptions, read_package};
use krender::pkg::writer::{render_files, write_package};
use krender::yaml::node::Node;
use krender::yaml::{SeqIndent, to_string};

fn write(dir: &Path, rel: &str, text: &str) {
    let path = dir.join(rel);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

fn read(dir: &Path, rel: &str) -> String {
    std::fs::read_to_string(dir.join(rel)).unwrap()
}

const DEPLOYMENT: &str = "\
# license header

apiVersion: apps/v1
kind: Deployment
metadata:
  name: web # the name
spec:
  replicas: 3
  template:
    spec:
      containers:
        - name: app
          image: nginx:1.2.3
";

#[test]
fn edit_set_add_delete_round_trip_exact_bytes() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "deploy.yaml", DEPLOYMENT);
    let mut read_result = read_package(dir.path(), &ReadOptions::default()).unwrap();
    assert_eq!(read_result.files, vec!["deploy.yaml"]);
    let deployment = read_result.resources[0].root_mut();
    // Set a field (keeps the key's comment), add a key, delete a key.
    let spec = deployment.get_mut("spec").unwrap();
    spec.set("replicas", Node::new_scalar("!!int", "5"));
    spec.set("paused", Node::new_string("true"));
    deployment
        .get_mut("metadata")
        .unwrap()
        .set("namespace", Node::new_string("prod"));
    deployment.get_mut("spec").unwrap().remove("template");
    write_package(
        dir.path(),
        &read_result.resources,
        &read_result.files,
        Default::default(),
    )
    .unwrap();
    assert_eq!(
        read(dir.path(), "deploy.yaml"),
        "\
# license header

apiVersion: apps/v1
kind: Deployment
metadata:
  name: web # the name
  namespace: prod
spec:
  replicas: 5
  paused: \"true\"
"
    );
}

#[test]
fn unedited_package_keeps_wide_sequences_and_comments() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "deploy.yaml", DEPLOYMENT);
    let read_result = read_package(dir.path(), &ReadOptions::default()).unwrap();
    let files = render_files(&read_result.resources).unwrap();
    assert_eq!(files["deploy.yaml"], DEPLOYMENT);
}

#[test]
fn reader_annotations_sorted_and_single_quoted() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "sub/cm.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n  annotations:\n    user: x\n",
    );
    let options = ReadOptions {
        package_path: Some("/abs/pkg".into()),
    };
    let read_result = read_package(dir.path(), &options).unwrap();
    assert_eq!(
        to_string(&read_result.resources[0], SeqIndent::Compact),
        "\
apiVersion: v1
kind: ConfigMap
metadata:
  name: a
  annotations:
    user: x
    config.kubernetes.io/index: '0'
    config.kubernetes.io/path: 'sub/cm.yaml'
    internal.config.kubernetes.io/index: '0'
    internal.config.kubernetes.io/package-path: '/abs/pkg'
    internal.config.kubernetes.io/path: 'sub/cm.yaml'
    internal.config.kubernetes.io/seqindent: 'compact'
"
    );
}

#[test]
fn krmignore_and_subpackages_are_skipped() {
    let dir = tempfile::tempdir().unwrap();
    let cm = |name: &str| format!("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n");
    write(
        dir.path(),
        "Kptfile",
        "apiVersion: kpt.dev/v1\nkind: Kptfile\nmetadata:\n  name: root\n",
    );
    write(dir.path(), "b.yaml", &cm("b"));
    write(dir.path(), "a/x.yml", &cm("ax"));
    write(dir.path(), "ignored/y.yaml", &cm("ignored"));
    write(dir.path(), "skip.yaml", &cm("skip"));
    write(dir.path(), "notes.txt", "not yaml");
    write(
        dir.path(),
        "subpkg/Kptfile",
        "apiVersion: kpt.dev/v1\nkind: Kptfile\nmetadata:\n  name: sub\n",
    );
    write(dir.path(), "subpkg/z.yaml", &cm("z"));
    write(dir.path(), ".krmignore", "ignored/\nskip.yaml\n");
    let read_result = read_package(dir.path(), &ReadOptions::default()).unwrap();
    assert_eq!(read_result.files, vec!["Kptfile", "a/x.yml", "b.yaml"]);
    let names: Vec<&str> = read_result
        .resources
        .iter()
        .filter_map(resource::name)
        .collect();
    assert_eq!(names, vec!["root", "ax", "b"]);
}

#[test]
fn writer_prunes_emptied_files_and_leaves_resourceless_files() {
    let dir = tempfile::tempdir().unwrap();
    let two = "apiVersion: v1\nkind: A\nmetadata:\n  name: one\n---\napiVersion: v1\nkind: A\nmetadata:\n  name: two\n";
    write(dir.path(), "two.yaml", two);
    write(
        dir.path(),
        "gone.yaml",
        "apiVersion: v1\nkind: B\nmetadata:\n  name: gone\n",
    );
    write(dir.path(), "comments.yaml", "# only a comment\n");
    let read_result = read_package(dir.path(), &ReadOptions::default()).unwrap();
    assert_eq!(read_result.files, vec!["gone.yaml", "two.yaml"]);
    // Drop "gone" and the first document of two.yaml.
    let kept: Vec<Node> = read_result
        .resources
        .into_iter()
        .filter(|node| !matches!(resource::name(node), Some("gone" | "one")))
        .collect();
    write_package(dir.path(), &kept, &read_result.files, Default::default()).unwrap();
    assert!(!dir.path().join("gone.yaml").exists());
    assert_eq!(
        read(dir.path(), "two.yaml"),
        "apiVersion: v1\nkind: A\nmetadata:\n  name: two\n"
    );
    assert_eq!(read(dir.path(), "comments.yaml"), "# only a comment\n");
}

#[test]
fn writer_orders_by_numeric_index_and_rejects_escaping_paths() {
    let make = |name: &str, index: Option<&str>, path: &str| {
        let mut node = Node::new_mapping();
        node.set("apiVersion", Node::new_string("v1"));
        node.set("kind", Node::new_string("A"));
        let mut metadata = Node::new_mapping();
        metadata.set("name", Node::new_string(name));
        node.set("metadata", metadata);
        resource::set_annotation(&mut node, resource::PATH, path, Default::default());
        if let Some(index) = index {
            resource::set_annotation(&mut node, resource::INDEX, index, Default::default());
        }
        node
    };
    let nodes = vec![
        make("ten", Some("10"), "f.yaml"),
        make("two", Some("2"), "f.yaml"),
        make("none", None, "f.yaml"),
    ];
    let files = render_files(&nodes).unwrap();
    assert_eq!(
        files["f.yaml"],
        "apiVersion: v1\nkind: A\nmetadata:\n  name: none\n---\napiVersion: v1\nkind: A\nmetadata:\n  name: two\n---\napiVersion: v1\nkind: A\nmetadata:\n  name: ten\n"
    );
    let error = render_files(&[make("x", None, "../out.yaml")]).unwrap_err();
    assert!(error.to_string().contains("../out.yaml"), "{error}");
}

#[test]
fn read_errors_name_the_absolute_file_and_count_lines_per_piece() {
    let dir = tempfile::tempdir().unwrap();
    let abs = std::path::absolute(dir.path()).unwrap();
    write(
        dir.path(),
        "bad.yaml",
        "apiVersion: v1\nkind: A\nmetadata:\n  name: ok\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n\tname: x\n",
    );
    let error = read_package(dir.path(), &ReadOptions::default()).unwrap_err();
    assert_eq!(
        error.to_string(),
        format!(
            "{}: MalformedYAMLError: yaml: line 4: found character that cannot start any token",
            abs.join("bad.yaml").display()
        )
    );
    write(dir.path(), "bad.yaml", "a: 1\n----\nb: 2\n");
    let error = read_package(dir.path(), &ReadOptions::default()).unwrap_err();
    assert_eq!(
        error.to_string(),
        format!(
            "{}: invalid document separator: ----",
            abs.join("bad.yaml").display()
        )
    );
}
