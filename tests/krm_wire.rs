//! The function wire and kyaml's round trip, against outputs recorded from
//! kpt 1.0.0-beta.56 (`fixtures/wire/`): comment copy and order sync with a
//! function that drops comments and sorts keys, annotation reconciliation
//! and default paths, the `configMap` functionConfig, plain-document output,
//! failures, `-o stdout` / `-o unwrap`, and a real process (`cat`).

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

use krender::krm::resource::{self, annotation};
use krender::krm::resource_list::{
    config_map_function_config, decode_function_output, encode_function_input, encode_output_list,
    unwrap_output_list,
};
use krender::pkg::reader::{ReadOptions, parse_file};
use krender::pkg::writer::render_files;
use krender::runtime::function_filter::{FunctionCall, FunctionExit, StepError, run_function};
use krender::yaml::Node;
use krender::yaml::node::tag;

const PKG: &str = "/krender/pkg";

const MUTATOR: FunctionCall<'static> = FunctionCall {
    function_config: None,
    in_pipeline: true,
};

fn fixture(path: &str) -> String {
    let full = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures/wire")
        .join(path);
    std::fs::read_to_string(&full).unwrap_or_else(|error| panic!("{}: {error}", full.display()))
}

/// Reads package files (name, text) in the given order, as kpt's reader.
fn read(files: &[(&str, String)]) -> Vec<Node> {
    let options = ReadOptions {
        package_path: Some(PKG.to_owned()),
    };
    let mut resources = Vec::new();
    for (name, text) in files {
        let abs = format!("{PKG}/{name}");
        resources
            .extend(parse_file(name, Path::new(&abs), text, &options).expect("fixture parses"));
    }
    resources
}

/// A function that answers with fixed stdout.
fn replay(stdout: String) -> impl FnOnce(&[u8]) -> FunctionExit<Infallible> {
    move |_| FunctionExit {
        stdout: stdout.into_bytes(),
        status: Ok(()),
    }
}

fn render(resources: &[Node]) -> BTreeMap<String, String> {
    render_files(resources).expect("resources render")
}

fn assert_text(actual: &str, expected: &str) {
    if actual != expected {
        let diff = similar::TextDiff::from_lines(expected, actual)
            .unified_diff()
            .header("expected (kpt)", "actual (krender)")
            .to_string();
        panic!("text differs:\n{diff}");
    }
}

#[test]
fn sorting_comment_dropping_function() {
    let resources = read(&[
        ("Kptfile", fixture("sortfn/Kptfile")),
        ("sorted.yaml", fixture("sortfn/sorted.yaml")),
    ]);
    let step = run_function(
        &resources,
        MUTATOR,
        replay(fixture("sortfn/fn-stdout.yaml")),
    )
    .unwrap();
    let outputs = step.finish().unwrap();
    let files = render(&outputs);
    assert_text(
        &files["sorted.yaml"],
        &fixture("sortfn/expected-sorted.yaml"),
    );
    assert_text(&files["Kptfile"], &fixture("sortfn/expected-Kptfile"));
}

#[test]
fn reconciled_annotations_and_default_paths() {
    let resources = read(&[
        ("Kptfile", fixture("reconcile/Kptfile")),
        ("res.yaml", fixture("reconcile/res.yaml")),
    ]);
    let step = run_function(
        &resources,
        MUTATOR,
        replay(fixture("reconcile/fn-stdout.yaml")),
    )
    .unwrap();
    let outputs = step.finish().unwrap();
    let r1 = outputs
        .iter()
        .find(|node| resource::name(node) == Some("r1"))
        .unwrap();
    assert_eq!(annotation(r1, resource::PATH), Some("moved.yaml"));
    assert_eq!(annotation(r1, resource::LEGACY_PATH), Some("moved.yaml"));
    let r2 = outputs
        .iter()
        .find(|node| resource::name(node) == Some("r2"))
        .unwrap();
    assert_eq!(annotation(r2, resource::LEGACY_INDEX), Some("7"));
    assert_eq!(annotation(r2, resource::INDEX), Some("7"));
    assert!(
        outputs
            .iter()
            .all(|node| annotation(node, resource::MIGRATION_ID).is_none())
    );
    assert!(
        outputs
            .iter()
            .all(|node| annotation(node, resource::ID).is_none())
    );
    let generated = outputs
        .iter()
        .find(|node| resource::name(node) == Some("Gen-One"))
        .unwrap();
    assert_eq!(
        annotation(generated, resource::PATH),
        Some("prod/deployment_Gen-One.yaml")
    );
    assert_eq!(
        annotation(generated, resource::LEGACY_PATH),
        Some("prod/deployment_Gen-One.yaml")
    );
    let files = render(&outputs);
    for name in [
        "configmap_gen2.yaml",
        "moved.yaml",
        "prod/deployment_Gen-One.yaml",
        "res.yaml",
    ] {
        assert_text(
            &files[name],
            &fixture(&format!("reconcile/expected/{name}")),
        );
    }
}

/// A function written in Rust: decodes its stdin, edits the items, encodes
/// the list again.
fn edit_items(edit: impl FnOnce(&mut Vec<Node>)) -> impl FnOnce(&[u8]) -> FunctionExit<Infallible> {
    move |stdin| {
        let mut list = decode_function_output(&String::from_utf8_lossy(stdin)).unwrap();
        edit(&mut list.items);
        let stdout = encode_function_input(&list.items, list.function_config.as_ref());
        FunctionExit {
            stdout: stdout.into_bytes(),
            status: Ok(()),
        }
    }
}

#[test]
fn conflicting_path_change_is_an_error() {
    let resources = read(&[("res.yaml", fixture("reconcile/res.yaml"))]);
    let function = edit_items(|items| {
        let r1 = &mut items[0];
        resource::set_annotation(r1, resource::PATH, "a.yaml", Default::default());
        resource::set_annotation(r1, resource::LEGACY_PATH, "b.yaml", Default::default());
    });
    let step = run_function(&resources, MUTATOR, function).unwrap();
    assert_eq!(
        step.finish().unwrap_err().to_string(),
        "resource input to function has mismatched legacy and internal path annotations"
    );
}

#[test]
fn config_map_function_config_on_the_wire() {
    let mut data = BTreeMap::new();
    for (key, value) in [
        ("num", "1"),
        ("namespace", "staging"),
        ("flag", "true"),
        ("multi", "a\nb"),
        ("yes", "yes"),
        ("empty", ""),
    ] {
        data.insert(key.to_owned(), value.to_owned());
    }
    let config = config_map_function_config(&data);
    let text = encode_function_input(&[], Some(&config));
    assert_text(
        &text,
        "apiVersion: config.kubernetes.io/v1
kind: ResourceList
items: []
functionConfig:
  apiVersion: v1
  kind: ConfigMap
  metadata:
    name: function-input
  data: {empty: \"\", flag: \"true\", multi: \"a\\nb\", namespace: staging, num: \"1\", yes: yes}
",
    );
}

#[test]
fn validators_get_no_migration_id() {
    let resources = read(&[("res.yaml", fixture("reconcile/res.yaml"))]);
    let mut stdin = String::new();
    let call = FunctionCall {
        function_config: None,
        in_pipeline: false,
    };
    let step = run_function::<Infallible>(&resources, call, |input| {
        stdin = String::from_utf8_lossy(input).into_owned();
        FunctionExit {
            stdout: input.to_vec(),
            status: Ok(()),
        }
    })
    .unwrap();
    assert!(!stdin.contains("annotations-migration-resource-id"));
    assert!(
        stdin
            .contains("      internal.config.kubernetes.io/id: '1'\n      config.k8s.io/id: '1'\n")
    );
    assert_eq!(step.finish().unwrap().len(), 2);
}

#[test]
fn plain_documents_get_fresh_index_annotations() {
    let output = decode_function_output(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n  annotations: {}\n---\napiVersion: v1\nkind: Secret\nmetadata:\n  name: y\n",
    )
    .unwrap();
    assert_eq!(output.items.len(), 2);
    assert_eq!(annotation(&output.items[1], resource::INDEX), Some("1"));
    assert_eq!(
        annotation(&output.items[1], resource::LEGACY_INDEX),
        Some("1")
    );
    assert_eq!(
        krender::yaml::to_string(&output.items[0], Default::default()),
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n  annotations:\n    config.kubernetes.io/index: '0'\n    internal.config.kubernetes.io/index: '0'\n"
    );
}

#[test]
fn output_errors() {
    let error = decode_function_output("a: 1\n---foo\nb: 2\n").unwrap_err();
    assert_eq!(error.to_string(), "invalid document separator: ---foo");
    let error = decode_function_output("kind: ResourceList\nitems: []\n---\na: 1\n").unwrap_err();
    assert_eq!(error.to_string(), "a single document is expected");
    let error = decode_function_output("a: [\n").unwrap_err();
    assert!(
        error.to_string().starts_with("MalformedYAMLError: yaml: "),
        "{error}"
    );
}

#[test]
fn kind_change_fails_the_step() {
    let resources = read(&[("res.yaml", fixture("reconcile/res.yaml"))]);
    let function = edit_items(|items| {
        items[0]
            .root_mut()
            .set("data", Node::new_scalar(tag::STR, "gone"));
    });
    let error = run_function(&resources, MUTATOR, function).unwrap_err();
    assert_eq!(
        error.to_string(),
        "wrong node kind: expected MappingNode but got ScalarNode: node contents:\ngone\n"
    );
    assert!(matches!(
        error,
        StepError::Wire {
            function_error: None,
            ..
        }
    ));
}

#[test]
fn failing_function_still_reports_results() {
    let resources = read(&[("res.yaml", fixture("reconcile/res.yaml"))]);
    let stdout = "apiVersion: config.kubernetes.io/v1\nkind: ResourceList\nitems: []\nresults:\n- message: bad replicas\n  severity: error\n";
    let step = run_function(&resources, MUTATOR, |_| FunctionExit {
        stdout: stdout.as_bytes().to_vec(),
        status: Err("exit status 1".to_owned()),
    });
    let Err(StepError::Function {
        error,
        results: Some(results),
    }) = step
    else {
        panic!("expected a function failure with results");
    };
    assert_eq!(error, "exit status 1");
    assert_eq!(
        results.content[0].get_str(&["message"]),
        Some("bad replicas")
    );
}

#[test]
fn output_stdout_and_unwrap() {
    let resources = read(&[
        ("Kptfile", fixture("output/Kptfile")),
        ("a.yaml", fixture("output/a.yaml")),
    ]);
    let listed = encode_output_list(&resources);
    assert_text(&listed, &fixture("output/stdout.yaml"));
    assert_text(
        &unwrap_output_list(&listed).unwrap(),
        &fixture("output/unwrap.yaml"),
    );
}

#[test]
fn cat_as_a_real_function() {
    let Ok(_) = Command::new("cat").arg("--version").output() else {
        // No `cat` on this machine: nothing to run.
        return;
    };
    let case = "# header\n\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\ndata:\n  folded: >\n    some\n    text\n";
    let resources = read(&[
        ("Kptfile", fixture("Kptfile")),
        ("cm.yaml", case.to_owned()),
    ]);
    let step = run_function(&resources, MUTATOR, |stdin| {
        let mut child = match Command::new("cat")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
        {
            Ok(child) => child,
            Err(error) => {
                return FunctionExit {
                    stdout: Vec::new(),
                    status: Err(error.to_string()),
                };
            }
        };
        if let Some(mut pipe) = child.stdin.take() {
            pipe.write_all(stdin).expect("cat reads its stdin");
        }
        match child.wait_with_output() {
            Ok(output) => FunctionExit {
                stdout: output.stdout,
                status: Ok(()),
            },
            Err(error) => FunctionExit {
                stdout: Vec::new(),
                status: Err(error.to_string()),
            },
        }
    })
    .unwrap();
    let files = render(&step.finish().unwrap());
    assert_text(
        &files["cm.yaml"],
        "# header\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\ndata:\n  folded: \"some text\\n\"\n",
    );
}

/// An evaluator that echoes its input, or fails with results.
struct FakeEvaluator {
    fail: bool,
}

impl krender::runtime::Evaluator for FakeEvaluator {
    fn evaluate(
        &self,
        request: &krender::runtime::FunctionRequest<'_>,
    ) -> Result<krender::runtime::FunctionResponse, krender::runtime::EvalError> {
        let stdout = if self.fail {
            b"apiVersion: config.kubernetes.io/v1\nkind: ResourceList\nitems: []\nresults:\n- message: nope\n  severity: error\n".to_vec()
        } else {
            request.input.to_vec()
        };
        Ok(krender::runtime::FunctionResponse {
            stdout,
            stderr: b"said something".to_vec(),
            exit_code: i32::from(self.fail),
        })
    }
}

#[test]
fn evaluator_adapter() {
    use krender::runtime::FunctionTarget;
    use krender::runtime::function_filter::run_evaluator;
    let resources = read(&[("res.yaml", fixture("reconcile/res.yaml"))]);
    let timeout = std::time::Duration::from_secs(5);
    let target = FunctionTarget::Exec("identity");
    let step = run_evaluator(
        &FakeEvaluator { fail: false },
        target,
        &resources,
        MUTATOR,
        timeout,
    )
    .unwrap();
    assert_eq!(step.exit_code, 0);
    assert_eq!(step.stderr, b"said something");
    let outputs = step.output.unwrap();
    assert_text(
        &render(&outputs)["res.yaml"],
        &fixture("reconcile/res.yaml"),
    );
    let step = run_evaluator(
        &FakeEvaluator { fail: true },
        target,
        &resources,
        MUTATOR,
        timeout,
    )
    .unwrap();
    assert_eq!(step.exit_code, 1);
    assert_eq!(step.output, Ok(Vec::new()));
    assert_eq!(
        step.results.unwrap().content[0].get_str(&["message"]),
        Some("nope")
    );
}

/// Round trips recorded with kpt and PyYAML functions (drop comments, sort
/// keys, insert list items and folded scalars, print plain documents):
/// `fixtures/wire/recorded/<case>/` holds the package (`in/`), what kpt sent
/// (`stdin.yaml`), what the function answered (`stdout.yaml`) and the files
/// kpt wrote (`expected/`). The package path is `/krender/pkg`.
#[test]
fn recorded_round_trips() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/wire/recorded");
    let mut cases: Vec<_> = std::fs::read_dir(&root)
        .unwrap()
        .flatten()
        .map(|entry| entry.path())
        .collect();
    cases.sort();
    assert!(!cases.is_empty());
    let mut report = String::new();
    for case in &cases {
        let mut names: Vec<String> = std::fs::read_dir(case.join("in"))
            .unwrap()
            .flatten()
            .map(|entry| entry.file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        let files: Vec<(&str, String)> = names
            .iter()
            .map(|name| {
                (
                    name.as_str(),
                    std::fs::read_to_string(case.join("in").join(name)).unwrap(),
                )
            })
            .collect();
        let resources = read(&files);
        let stdout = std::fs::read_to_string(case.join("stdout.yaml")).unwrap();
        let expected_stdin = std::fs::read_to_string(case.join("stdin.yaml")).unwrap();
        let mut stdin = String::new();
        let step = run_function::<Infallible>(&resources, MUTATOR, |input| {
            stdin = String::from_utf8_lossy(input).into_owned();
            FunctionExit {
                stdout: stdout.into_bytes(),
                status: Ok(()),
            }
        });
        if stdin != expected_stdin {
            let diff = similar::TextDiff::from_lines(&expected_stdin, &stdin)
                .unified_diff()
                .to_string();
            report.push_str(&format!("=== {} stdin\n{diff}", case.display()));
        }
        let outputs = match step
            .map_err(|e| e.to_string())
            .and_then(|s| s.finish().map_err(|e| e.to_string()))
        {
            Ok(outputs) => outputs,
            Err(error) => {
                report.push_str(&format!("=== {} error: {error}\n", case.display()));
                continue;
            }
        };
        for (name, content) in render(&outputs) {
            let expected =
                std::fs::read_to_string(case.join("expected").join(&name)).unwrap_or_default();
            if content != expected {
                let diff = similar::TextDiff::from_lines(&expected, &content)
                    .unified_diff()
                    .to_string();
                report.push_str(&format!("=== {} {name}\n{diff}", case.display()));
            }
        }
    }
    assert!(report.is_empty(), "{report}");
}

/// A `configPath:` functionConfig is sent exactly as its item is, ids and
/// migration id included (recorded with kpt).
#[test]
fn config_path_function_config_on_the_wire() {
    let resources = read(&[
        ("Kptfile", fixture("config-path/Kptfile")),
        ("cm.yaml", fixture("config-path/cm.yaml")),
        ("fc.yaml", fixture("config-path/fc.yaml")),
    ]);
    let config = resources[2].clone();
    let call = FunctionCall {
        function_config: Some(&config),
        in_pipeline: true,
    };
    let mut stdin = String::new();
    run_function::<Infallible>(&resources, call, |input| {
        stdin = String::from_utf8_lossy(input).into_owned();
        FunctionExit {
            stdout: input.to_vec(),
            status: Ok(()),
        }
    })
    .unwrap();
    assert_text(&stdin, &fixture("config-path/stdin.yaml"));
}

mod never_panics {
    use std::convert::Infallible;

    use proptest::prelude::*;

    use krender::krm::comments::copy_comments;
    use krender::krm::order::sync_order;
    use krender::krm::resource_list::decode_function_output;
    use krender::runtime::function_filter::{FunctionCall, FunctionExit, run_function};

    /// YAML-ish text from a small alphabet: keys, indentation, list dashes,
    /// comments, separators, flow brackets and quotes.
    fn yamlish() -> impl Strategy<Value = String> {
        let pieces = prop::sample::select(vec![
            "a: ",
            "b: ",
            "kind: ResourceList\n",
            "items:\n",
            "- ",
            "  ",
            "\n",
            "# c\n",
            "---\n",
            "x",
            "1",
            "[",
            "]",
            "{",
            "}",
            "'q'",
            "\"d\"",
            "> \n  f\n",
            "|\n  l\n",
            "~",
            ": ",
            "apiVersion: v1\n",
            "metadata:\n  name: n\n",
        ]);
        prop::collection::vec(pieces, 0..40).prop_map(|parts| parts.concat())
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        #[test]
        fn decoding_and_round_trips_never_panic(input in yamlish(), answer in yamlish()) {
            let Ok(read) = decode_function_output(&input) else {
                return Ok(());
            };
            if let Ok(other) = decode_function_output(&answer) {
                for (from, to) in read.items.iter().zip(other.items.iter()) {
                    let mut to = to.clone();
                    let _ = copy_comments(from, &mut to);
                    let _ = sync_order(from, &mut to);
                }
            }
            let call = FunctionCall { function_config: None, in_pipeline: true };
            let step = run_function::<Infallible>(&read.items, call, |_| FunctionExit {
                stdout: answer.clone().into_bytes(),
                status: Ok(()),
            });
            if let Ok(step) = step {
                let _ = step.finish();
            }
        }
    }
}
