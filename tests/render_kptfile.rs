//! The Kptfile model through its public API: strict decoding with go-yaml's
//! texts, kpt's validation messages, image name expansion.

use std::path::Path;

use krender::pkg::kptfile::{Kptfile, KptfileError, resolve_image, with_default_tag};

fn parse(text: &str) -> Result<Kptfile, KptfileError> {
    Kptfile::parse(text, Path::new("/pkgs/app"))
}

#[test]
fn pipeline_is_decoded_in_order() {
    let kptfile = parse(
        "apiVersion: kpt.dev/v1
kind: Kptfile
metadata:
  name: app
  annotations:
    kpt.dev/bfs-rendering: \"True\"
pipeline:
  mutators:
    - image: set-namespace:v0.4
      configMap:
        namespace: staging
    - exec: ./fn.sh
      selectors:
        - kind: Deployment
      exclude:
        - name: skip
  validators:
    - image: ghcr.io/x/kubeconform
      configPath: conf.yaml
",
    )
    .expect("valid Kptfile");
    assert_eq!(kptfile.name, "app");
    assert!(kptfile.annotation_is_true("kpt.dev/bfs-rendering"));
    let mutators = &kptfile.pipeline.mutators;
    assert_eq!(mutators.len(), 2);
    assert_eq!(
        mutators[0].config_map.get("namespace").map(String::as_str),
        Some("staging")
    );
    assert_eq!(mutators[1].exec, "./fn.sh");
    assert_eq!(mutators[1].selectors[0].kind, "Deployment");
    assert_eq!(mutators[1].exclude[0].name, "skip");
    assert_eq!(kptfile.pipeline.validators[0].config_path, "conf.yaml");
}

#[test]
fn kind_mismatch_reports_go_yaml_text() {
    let error = parse(
        "apiVersion: kpt.dev/v1
kind: Kptfile
metadata:
  name: app
pipeline:
  mutators:
    - image: set-namespace
      configMap:
        namespace:
          - a
",
    )
    .expect_err("a list is not a string");
    assert_eq!(
        error.to_string(),
        "Kptfile at \"/pkgs/app\" can't be read.\n\nDetails:\nyaml: unmarshal errors:\n  line 10: cannot unmarshal !!seq into string"
    );
}

#[test]
fn every_unmarshal_error_is_listed() {
    let error = parse(
        "apiVersion: kpt.dev/v1\nkind: Kptfile\nmetadata:\n  name: [a]\nfoo: 1\npipeline: x\n",
    )
    .expect_err("three problems");
    assert_eq!(
        error.to_string(),
        "Kptfile at \"/pkgs/app\" can't be read.\n\nDetails:\nyaml: unmarshal errors:\n  line 4: cannot unmarshal !!seq into string\n  line 5: field foo not found in type v1.KptFile\n  line 6: cannot unmarshal !!str `x` into v1.Pipeline"
    );
}

#[test]
fn malformed_yaml_keeps_the_parser_message() {
    let error = parse("apiVersion: kpt.dev/v1\nkind: Kptfile\nmetadata\n  name: app\n")
        .expect_err("not YAML");
    let text = error.to_string();
    assert!(
        text.starts_with("Kptfile at \"/pkgs/app\" can't be read.\n\nDetails:\nyaml: line "),
        "{text}"
    );
}

#[test]
fn legacy_versions_are_rejected() {
    for version in ["v1alpha1", "v1alpha2"] {
        let error = parse(&format!(
            "apiVersion: kpt.dev/{version}\nkind: Kptfile\nmetadata:\n  name: app\n"
        ))
        .expect_err("legacy");
        assert_eq!(
            error.to_string(),
            format!(
                "Kptfile at \"/pkgs/app\" has an old version (\"{version}\") of the Kptfile schema.\nPlease update the package to the latest format by following https://kpt.dev/installation/migration."
            )
        );
    }
}

#[test]
fn both_config_kinds_are_invalid() {
    let kptfile = parse(
        "apiVersion: kpt.dev/v1
kind: Kptfile
metadata:
  name: app
pipeline:
  mutators:
    - image: set-labels
      configPath: x.yaml
      configMap:
        a: b
",
    )
    .expect("decodes");
    let error = kptfile
        .validate(Path::new("/nonexistent"))
        .expect_err("invalid");
    assert_eq!(
        error.to_string(),
        "Kptfile is invalid:\nField: `pipeline.mutators[0]`\nReason: functionConfig must not specify both `configMap` and `configPath` at the same time\n"
    );
}

#[test]
fn config_path_checks() {
    let temp = tempfile::tempdir().expect("tempdir");
    let dir = temp.path();
    std::fs::write(
        dir.join("two.yaml"),
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: b\n",
    )
    .expect("write");
    std::fs::write(dir.join("noname.yaml"), "apiVersion: v1\nkind: ConfigMap\n").expect("write");
    let check = |path: &str| {
        let text = format!(
            "apiVersion: kpt.dev/v1\nkind: Kptfile\nmetadata:\n  name: app\npipeline:\n  mutators:\n    - image: set-labels\n      configPath: {path}\n"
        );
        Kptfile::parse(&text, dir)
            .expect("decodes")
            .validate(dir)
            .map_err(|e| e.to_string())
    };
    assert_eq!(
        check("two.yaml").expect_err("two documents"),
        "Kptfile is invalid:\nField: `pipeline.mutators[0].configPath`\nValue: \"two.yaml\"\nReason: functionConfig \"two.yaml\" must not contain more than one config, got 2\n"
    );
    assert!(
        check("noname.yaml")
            .expect_err("no name")
            .contains("resource must have `metadata.name`")
    );
    assert!(
        check("../x.yaml")
            .expect_err("outside")
            .contains("Reason: path must not be outside the package\n")
    );
    let missing = check("missing.yaml").expect_err("missing");
    assert_eq!(
        missing,
        format!(
            "Kptfile is invalid:\nField: `pipeline.mutators[0].configPath`\nValue: \"missing.yaml\"\nReason: failed to open functionConfig from path \"missing.yaml\": open {}: no such file or directory\n",
            dir.join("missing.yaml").display()
        )
    );
}

#[test]
fn short_image_names_get_the_catalog_prefix() {
    let prefix = krender::pkg::kptfile::DEFAULT_IMAGE_PREFIX;
    assert_eq!(
        with_default_tag(&resolve_image("set-labels", prefix)),
        "ghcr.io/kptdev/krm-functions-catalog/set-labels:latest"
    );
    assert_eq!(
        resolve_image("set-labels:v1", "example.com/fns"),
        "example.com/fns/set-labels:v1"
    );
    assert_eq!(
        resolve_image("docker.io/x/y:v1", prefix),
        "docker.io/x/y:v1"
    );
}
