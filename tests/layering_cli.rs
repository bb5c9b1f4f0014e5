//! `krender layer render` end to end through [`render_command`]: the README's
//! global/type/site example byte for byte, and the error contract (class
//! name on stderr with file and line, nothing on stdout, exit 1).
//! `KRENDER_BLESS=1` rewrites the expected example output.

use std::path::{Path, PathBuf};

use krender::cli::layer::render_command;
use krender::layering::SubstitutionOptions;

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/layering")
}

fn run(paths: &[PathBuf]) -> (i32, String, String) {
    let mut stdout = Vec::new();
    let mut stderr = Vec::new();
    let code = render_command(
        paths,
        SubstitutionOptions::default(),
        &mut stdout,
        &mut stderr,
    );
    (
        code,
        String::from_utf8(stdout).expect("utf-8 stdout"),
        String::from_utf8(stderr).expect("utf-8 stderr"),
    )
}

#[test]
fn example_renders_byte_for_byte() {
    let (code, stdout, stderr) = run(&[fixtures().join("example")]);
    assert_eq!((code, stderr.as_str()), (0, ""));
    let expected_path = fixtures().join("example.expected.yaml");
    if std::env::var_os("KRENDER_BLESS").is_some() {
        std::fs::write(&expected_path, &stdout).expect("bless");
    }
    let expected = std::fs::read_to_string(&expected_path).expect("expected output");
    if stdout != expected {
        let diff = similar::TextDiff::from_lines(&expected, &stdout);
        panic!(
            "output differs:\n{}",
            diff.unified_diff().header("expected", "actual")
        );
    }
}

#[test]
fn missing_policy_fails_with_nothing_on_stdout() {
    let (code, stdout, stderr) = run(&[fixtures().join("example/site")]);
    assert_eq!(code, 1);
    assert_eq!(stdout, "");
    assert!(
        stderr.starts_with("error[LayeringPolicyNotFound]: "),
        "{stderr}"
    );
    assert!(stderr.contains("example/site/keystone.yaml"), "{stderr}");
}

#[test]
fn a_failing_document_is_named_with_file_and_line_and_nothing_is_printed() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("set.yaml");
    std::fs::write(
        &file,
        "schema: deckhand/LayeringPolicy/v1
metadata: {schema: metadata/Control/v1, name: policy}
data: {layerOrder: [global, site]}
---
schema: example/Kind/v1
metadata:
  schema: metadata/Document/v1
  name: fine
  layeringDefinition: {abstract: false, layer: global}
data: {a: 1}
---
schema: example/Kind/v1
metadata:
  schema: metadata/Document/v1
  name: broken
  layeringDefinition: {abstract: false, layer: site}
  substitutions:
    - src: {schema: example/Kind/v1, name: fine, path: .nope}
      dest: {path: .b}
data: {}
",
    )
    .expect("write");
    let (code, stdout, stderr) = run(std::slice::from_ref(&file));
    assert_eq!(code, 1);
    assert_eq!(stdout, "");
    let expected = format!(
        "error[SubstitutionSourceDataNotFound]: Required substitution source secret was not found at path .nope in source document [example/Kind/v1, global] fine ({file}:5), referenced by [example/Kind/v1, site] broken ({file}:12)\n",
        file = file.display()
    );
    assert_eq!(stderr, expected);
}

#[test]
/// Read as PyYAML reads (plain `on: off` is `True: False`), written so
/// that PyYAML reads the same values back.
fn strings_yaml_1_1_reads_as_booleans_are_quoted() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(
        dir.path().join("a.yaml"),
        "schema: deckhand/LayeringPolicy/v1
metadata: {schema: metadata/Control/v1, name: policy}
data: {layerOrder: [site]}
",
    )
    .expect("write");
    std::fs::write(
        dir.path().join("b.yml"),
        "schema: example/Kind/v1
metadata: {schema: metadata/Document/v1, name: doc, layeringDefinition: {layer: site}}
data: {answer: 'YES', time: '1:20', on: off}
",
    )
    .expect("write");
    let (code, stdout, stderr) = run(&[dir.path().to_owned()]);
    assert_eq!((code, stderr.as_str()), (0, ""));
    assert_eq!(
        stdout,
        "schema: example/Kind/v1
metadata: {schema: metadata/Document/v1, name: doc, layeringDefinition: {layer: site}}
data:
  answer: \"YES\"
  time: \"1:20\"
  true: false
"
    );
}

/// Two documents with the same schema, layer and name are an error naming
/// both places (Deckhand refuses such a set); a repeated LayeringPolicy is
/// not (Deckhand's engine keeps the first).
#[test]
fn same_layer_duplicates_are_an_error_naming_both() {
    let dir = tempfile::tempdir().expect("tempdir");
    let policy = "---\nschema: deckhand/LayeringPolicy/v1\nmetadata:\n  schema: metadata/Control/v1\n  name: layering-policy\ndata:\n  layerOrder: [global, site]\n";
    let app = |value: u32| {
        format!(
            "---\nschema: example/Kind/v1\nmetadata:\n  schema: metadata/Document/v1\n  name: app\n  layeringDefinition: {{abstract: false, layer: site}}\ndata: {{a: {value}}}\n"
        )
    };
    let (a, b) = (dir.path().join("a.yaml"), dir.path().join("b.yaml"));
    std::fs::write(&a, format!("{policy}{policy}{}", app(1))).expect("write");
    let (code, _, stderr) = run(std::slice::from_ref(&a));
    assert_eq!((code, stderr.as_str()), (0, ""));
    std::fs::write(&b, app(2)).expect("write");
    let (code, stdout, stderr) = run(&[a.clone(), b.clone()]);
    assert_eq!((code, stdout.as_str()), (1, ""));
    assert!(
        stderr.starts_with(&format!(
            "error[DuplicateDocumentExists]: Document [example/Kind/v1, site] app already exists: {}:16 and {}:2",
            a.display(),
            b.display()
        )),
        "{stderr}"
    );
}

/// Collection keys are PyYAML's "found unhashable key" (Deckhand cannot
/// load them); nested ones, turned into text level by level, took minutes
/// (found by the layering fuzz target).
#[test]
fn collection_keys_are_an_error_not_a_blow_up() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("keys.yaml");
    for text in [
        "? - a\n: b\n",
        "?\n?\n\n ? -  ? -  ? - ? - ? - ? ? -   ? ?  -  ? - ? ? ? -   ? ?    ? - ? - ? - ? ? -   ? ?  -  ? - ? ? ? -   ? ?  -  ? - ? ? -   ?-  ? - ? ? -   ? - ? ? - -",
    ] {
        std::fs::write(&file, text).expect("write");
        let started = std::time::Instant::now();
        let (code, stdout, stderr) = run(std::slice::from_ref(&file));
        assert_eq!((code, stdout.as_str()), (1, ""));
        assert!(stderr.contains("found unhashable key"), "{stderr}");
        assert!(started.elapsed() < std::time::Duration::from_secs(10));
    }
}

/// Documents read as PyYAML reads them, and the output reads back through
/// PyYAML (Deckhand's and Pegleg's reader) to the same values: the chart
/// took the common document's three sections by substitution, and both
/// documents' data equal what PyYAML makes of the input. Needs python3
/// with PyYAML (`.ci/run` installs it).
#[test]
fn output_reads_back_through_pyyaml_to_the_values_pyyaml_read() {
    let dir = fixtures().join("yaml11");
    let (code, stdout, stderr) = run(std::slice::from_ref(&dir));
    assert_eq!((code, stderr.as_str()), (0, ""));
    let script = r#"
import sys, yaml
source = list(yaml.safe_load_all(open(sys.argv[1])))
output = list(yaml.safe_load_all(sys.stdin))
common = next(d for d in source if d["metadata"]["name"] == "common")["data"]
chart = next(d for d in output if d["metadata"]["name"] == "chart")["data"]
rendered_common = next(d for d in output if d["metadata"]["name"] == "common")["data"]
assert rendered_common == common, (rendered_common, common)
assert chart == {"values": {"rbac": False, **common}}, chart
assert common["flags"] == {"enabled": True, "debug": False, "legacy": True, "strict": False, "letter": "y"}
assert common["numbers"] == {"mode": 511, "mask": 31, "minutes": 80, "notoctal": "0o17", "exponent": "1e3"}
assert common["strings"]["op"] == "=" and common["strings"]["serial"] == "0x0C0000300000C00003"
print("ok")
"#;
    let mut child = std::process::Command::new("python3")
        .args(["-c", script])
        .arg(dir.join("site.yaml"))
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("python3 runs");
    std::io::Write::write_all(child.stdin.as_mut().expect("stdin"), stdout.as_bytes())
        .expect("write");
    let output = child.wait_with_output().expect("python3 ends");
    assert_eq!(
        String::from_utf8_lossy(&output.stdout),
        "ok\n",
        "{}\n{stdout}",
        String::from_utf8_lossy(&output.stderr)
    );
}

/// `--allow-missing-substitution-sources` (Pegleg's rendering): the
/// missing document's substitution is skipped, the missing value lands as
/// null, and each gets Deckhand's warning; without it the first is
/// Deckhand's error.
#[test]
fn missing_substitution_sources_are_skipped_with_warnings_when_allowed() {
    let dir = fixtures().join("missing-sources");
    let (code, stdout, stderr) = run(std::slice::from_ref(&dir));
    assert_eq!((code, stdout.as_str()), (1, ""));
    assert!(
        stderr.starts_with("error[SubstitutionSourceNotFound]"),
        "{stderr}"
    );
    let mut stdout = Vec::new();
    let mut stderr = Vec::new();
    let code = render_command(
        &[dir],
        SubstitutionOptions {
            allow_missing_sources: true,
            ..SubstitutionOptions::default()
        },
        &mut stdout,
        &mut stderr,
    );
    let (stdout, stderr) = (
        String::from_utf8(stdout).expect("utf-8"),
        String::from_utf8(stderr).expect("utf-8"),
    );
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(
        stderr,
        "krender: warning: Could not find substitution source document [deckhand/Passphrase/v1] not-collected among the provided substitution sources.\n\
         krender: warning: Could not find source path .keystone.host in source document or the secret extracted is None. Source document: [pegleg/EndpointCatalogue/v1, global] endpoints. Destination document: [armada/Chart/v1, site] chart.\n"
    );
    assert!(
        stdout.ends_with("data:\n  values:\n    replicas: 1\n    host: null\n    port: 5000\n"),
        "{stdout}"
    );
    // A session (watch) under the same options: the same bytes and warnings.
    let mut session = krender::layering::LayeringSession::with_options(
        &[fixtures().join("missing-sources")],
        SubstitutionOptions {
            allow_missing_sources: true,
            ..SubstitutionOptions::default()
        },
    )
    .expect("reads");
    let rendered = session.render().expect("renders");
    assert_eq!(String::from_utf8_lossy(&rendered.output_bytes), stdout);
    let said: String = rendered
        .warnings
        .iter()
        .map(|warning| format!("krender: warning: {warning}\n"))
        .collect();
    assert_eq!(said, stderr);
}

/// Deckhand's shared substitution values (fixtures/layering/shared-values,
/// whose expected output matches a Python model of Deckhand's
/// substitution: `copy.copy` of the source value, networkx's order): a
/// write inside a substituted mapping reaches the source and every document
/// that took the same mapping; a `deepcopy: true` copy keeps what it took.
/// A session renders the same bytes, before and after an edit.
#[test]
fn substituted_values_are_shared_as_deckhand_shares_them() {
    let dir = fixtures().join("shared-values");
    let (code, stdout, stderr) = run(std::slice::from_ref(&dir));
    assert_eq!((code, stderr.as_str()), (0, ""));
    let expected = std::fs::read_to_string(fixtures().join("shared-values.expected.yaml"))
        .expect("expected output");
    assert_eq!(stdout, expected);
    let data_of = |name: &str| {
        let start = stdout
            .find(&format!("  name: {name}\n"))
            .unwrap_or_else(|| panic!("{name} in output"));
        let rest = &stdout[start..];
        rest[..rest.find("\n---").unwrap_or(rest.len())].to_owned()
    };
    assert!(data_of("ucp_service_accounts").contains("password: s3cr3t"));
    assert!(data_of("chart-b").contains("password: s3cr3t"));
    assert!(data_of("ucp_endpoints").contains("nodeport: 30000"));
    assert!(data_of("maas-b").contains("nodeport: 30000"));
    assert!(data_of("maas-copy").contains("nodeport: 31900"));

    let scratch = tempfile::tempdir().expect("tempdir");
    let file = scratch.path().join("site.yaml");
    std::fs::copy(dir.join("site.yaml"), &file).expect("copy");
    let mut session =
        krender::layering::LayeringSession::new(&[scratch.path().to_owned()]).expect("reads");
    let first = session.render().expect("renders");
    assert_eq!(String::from_utf8_lossy(&first.output_bytes), expected);
    let edited = std::fs::read_to_string(&file)
        .expect("read")
        .replace("data: s3cr3t", "data: changed");
    std::fs::write(&file, &edited).expect("write");
    session.apply_change(&file, Some(edited.clone().into_bytes()));
    let second = session.render().expect("renders");
    let (_, fresh, _) = run(&[scratch.path().to_owned()]);
    assert_eq!(String::from_utf8_lossy(&second.output_bytes), fresh);
    assert_eq!(fresh.matches("password: changed").count(), 3, "{fresh}");
}

/// Generated sets whose charts write inside values they took, rendered by
/// krender and by a Python model of Deckhand's substitution
/// (tests/deckhand-model.py: real `copy.copy` sharing, networkx's order):
/// the same data, or both fail. Needs python3 with PyYAML, networkx and
/// jsonpath-ng (`.ci/run` installs them).
#[test]
fn shared_values_match_a_python_model_of_deckhand() {
    let output = std::process::Command::new("python3")
        .arg(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/deckhand-model.py"
        ))
        .arg(env!("CARGO_BIN_EXE_krender"))
        .args(["0", "40"])
        .output()
        .expect("python3 runs tests/deckhand-model.py");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    // Most sets render: the comparison is not vacuous.
    let compared: usize = stdout
        .split_whitespace()
        .skip_while(|word| *word != "compared")
        .nth(1)
        .and_then(|n| n.trim_end_matches(',').parse().ok())
        .unwrap_or(0);
    assert!(compared >= 25, "{stdout}");
}

/// `--redact-encrypted` (Pegleg's default, Deckhand without cleartext
/// secrets): the chart that reads an encrypted passphrase is output with
/// `storagePolicy: encrypted` and that substitution's source and
/// destination paths replaced by `sha256(json.dumps(path))`, checked here
/// with Python's own hashlib and json; its data and the documents reading
/// only cleartext sources are as without the switch.
#[test]
fn destinations_of_encrypted_sources_are_redacted_as_deckhand_redacts_them() {
    let dir = fixtures().join("redact-encrypted");
    let (code, cleartext, stderr) = run(std::slice::from_ref(&dir));
    assert_eq!((code, stderr.as_str()), (0, ""));
    let mut stdout = Vec::new();
    let mut stderr = Vec::new();
    let code = render_command(
        &[dir],
        SubstitutionOptions {
            redact_encrypted: true,
            ..SubstitutionOptions::default()
        },
        &mut stdout,
        &mut stderr,
    );
    let redacted = String::from_utf8(stdout).expect("utf-8");
    assert_eq!(code, 0, "{}", String::from_utf8_lossy(&stderr));
    let expected = std::fs::read_to_string(fixtures().join("redact-encrypted.expected.yaml"))
        .expect("expected output");
    assert_eq!(redacted, expected);
    let options = SubstitutionOptions {
        redact_encrypted: true,
        ..SubstitutionOptions::default()
    };
    let mut session = krender::layering::LayeringSession::with_options(
        &[fixtures().join("redact-encrypted")],
        options,
    )
    .expect("reads");
    assert_eq!(
        String::from_utf8_lossy(&session.render().expect("renders").output_bytes),
        expected
    );

    let script = r#"
import hashlib, json, sys, yaml
clear, redacted = (list(yaml.safe_load_all(open(f))) for f in sys.argv[1:3])
digest = lambda p: hashlib.sha256(json.dumps(p).encode("utf-8")).hexdigest()
by_name = lambda docs: {d["metadata"]["name"]: d for d in docs}
clear, redacted = by_name(clear), by_name(redacted)
for name in clear:
    assert clear[name]["data"] == redacted[name]["data"], name
chart_c, chart_r = clear["keystone"]["metadata"], redacted["keystone"]["metadata"]
assert chart_c["storagePolicy"] == "cleartext" and chart_r["storagePolicy"] == "encrypted"
assert chart_r["substitutions"][0] == chart_c["substitutions"][0]
src_c, src_r = chart_c["substitutions"][1], chart_r["substitutions"][1]
assert src_r["src"]["path"] == digest(src_c["src"]["path"])
assert [d["path"] for d in src_r["dest"]] == [digest(d["path"]) for d in src_c["dest"]]
assert src_r["dest"][1]["pattern"] == "PASSWORD"
assert redacted["endpoints"] == clear["endpoints"]
print("ok")
"#;
    let scratch = tempfile::tempdir().expect("tempdir");
    let (clear_file, redacted_file) =
        (scratch.path().join("c.yaml"), scratch.path().join("r.yaml"));
    std::fs::write(&clear_file, &cleartext).expect("write");
    std::fs::write(&redacted_file, &redacted).expect("write");
    let output = std::process::Command::new("python3")
        .args(["-c", script])
        .arg(&clear_file)
        .arg(&redacted_file)
        .output()
        .expect("python3 runs");
    assert_eq!(
        String::from_utf8_lossy(&output.stdout),
        "ok\n",
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
}
