//! Golden cases from kpt itself (`fixtures/yaml/yaml-fidelity-cases.json`,
//! a copy of the shared spec's companion data): each input file is read with
//! the package reader and written back with the package writer, and the
//! bytes must equal kpt's `no_function` output exactly.
//!
//! The `identity_function` mode needs the function wire round trip and is
//! tested by the wire code's owner.

use std::path::Path;

use krender::pkg::reader::{ReadOptions, parse_file};
use krender::pkg::writer::render_files;
use krender::yaml::Node;

#[derive(serde::Deserialize)]
struct Cases {
    cases: Vec<Case>,
}

/// One golden case of `yaml-fidelity-cases.json`, with kpt's result in both
/// modes (this module checks `no_function`, `yaml_golden_identity` the other).
#[derive(serde::Deserialize)]
pub(crate) struct Case {
    pub(crate) name: String,
    pub(crate) file_name: String,
    pub(crate) input: String,
    pub(crate) no_function: Expected,
    pub(crate) identity_function: Expected,
}

/// kpt's output bytes, or its error text.
#[derive(serde::Deserialize)]
pub(crate) struct Expected {
    pub(crate) output: Option<String>,
    pub(crate) error: Option<String>,
}

/// Cases that do not pass yet, each with the reason (see
/// `fixtures/yaml/KNOWN_PARSER_ISSUES.md`). The test fails when a case
/// outside this list fails, and also when a listed case starts passing, so
/// the list only shrinks.
const KNOWN_FAILING: &[&str] = &[];

pub(crate) fn load_cases() -> Vec<Case> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/yaml/yaml-fidelity-cases.json");
    let text = std::fs::read_to_string(&path).expect("golden case file is checked in");
    // JSON is YAML; serde_yaml (a dev-dependency) reads it without adding a
    // JSON crate.
    let cases: Cases = serde_yaml::from_str(&text).expect("golden case file parses");
    cases.cases
}

/// The render's KRM check on read resources (owned by the hydrator;
/// emulated here so the `bare.yaml` case is covered end to end).
pub(crate) fn krm_check(file_name: &str, resources: &[Node]) -> Result<(), String> {
    use krender::krm::resource::{api_version, kind};
    for resource in resources {
        let missing = if api_version(resource).is_none() {
            "apiVersion"
        } else if kind(resource).is_none() {
            "kind"
        } else {
            continue;
        };
        return Err(format!(
            "input resource list must contain only KRM resources: {file_name}: resource must have `{missing}`"
        ));
    }
    Ok(())
}

/// Runs one case in `no_function` mode; returns the actual output or error
/// text in the same form as the expectation.
fn run_no_function(case: &Case) -> Result<String, String> {
    let abs = format!("<pkg>/{}", case.file_name);
    let resources = parse_file(
        &case.file_name,
        Path::new(&abs),
        &case.input,
        &ReadOptions::default(),
    )
    .map_err(|error| format!("Error: {error}"))?;
    if resources.is_empty() {
        // A file without resources is left untouched.
        return Ok(case.input.clone());
    }
    krm_check(&case.file_name, &resources).map_err(|error| format!("Error: {error}"))?;
    let files = render_files(&resources).map_err(|error| format!("Error: {error}"))?;
    Ok(files.get(&case.file_name).cloned().unwrap_or_default())
}

pub(crate) fn diff(expected: &str, actual: &str) -> String {
    similar::TextDiff::from_lines(expected, actual)
        .unified_diff()
        .context_radius(3)
        .header("expected (kpt)", "actual (krender)")
        .to_string()
}

#[test]
fn golden_no_function() {
    let cases = load_cases();
    let mut failures = Vec::new();
    let mut passed = 0;
    for case in &cases {
        let outcome = std::panic::catch_unwind(|| run_no_function(case));
        let problem = match (outcome, &case.no_function) {
            (Err(_), _) => Some("panicked".to_owned()),
            (
                Ok(Ok(actual)),
                Expected {
                    output: Some(expected),
                    ..
                },
            ) => (actual != *expected).then(|| diff(expected, &actual)),
            (
                Ok(Err(actual)),
                Expected {
                    error: Some(expected),
                    ..
                },
            ) => (actual != *expected)
                .then(|| format!("expected error: {expected}\n  actual error: {actual}")),
            (
                Ok(Ok(actual)),
                Expected {
                    error: Some(expected),
                    ..
                },
            ) => Some(format!(
                "expected error: {expected}\nbut got output:\n{actual}"
            )),
            (Ok(Err(actual)), _) => Some(format!("unexpected error: {actual}")),
            (Ok(Ok(_)), _) => Some("case has neither output nor error".to_owned()),
        };
        match problem {
            None => passed += 1,
            Some(problem) => failures.push((case.name.clone(), problem)),
        }
    }
    assert_known_failures("no_function", passed, &failures, KNOWN_FAILING);
}

/// Prints the pass count and fails unless exactly the `known_failing` cases
/// failed, so a known-failure list can only shrink.
pub(crate) fn assert_known_failures(
    mode: &str,
    passed: usize,
    failures: &[(String, String)],
    known_failing: &[&str],
) {
    let total = passed + failures.len();
    eprintln!("golden {mode}: {passed}/{total} passed");
    let mut report = String::new();
    for (name, problem) in failures {
        report.push_str(&format!("\n=== {name} ===\n{problem}\n"));
    }
    let unexpected: Vec<&str> = failures
        .iter()
        .map(|(name, _)| name.as_str())
        .filter(|name| !known_failing.contains(name))
        .collect();
    let fixed: Vec<&str> = known_failing
        .iter()
        .copied()
        .filter(|name| !failures.iter().any(|(failed, _)| failed == name))
        .collect();
    assert!(
        unexpected.is_empty() && fixed.is_empty(),
        "golden {mode}: {passed}/{total} passed; unexpected failures: {unexpected:?}; \
         now passing (remove from KNOWN_FAILING): {fixed:?}\n{report}"
    );
}

/// Extra cases recorded from kpt (`fixtures/yaml/kpt/<case>/`): anchors and
/// tags, explicit and long keys, nested and wide sequences, comments in
/// every position, escapes, block scalar headers, flow collections.
#[test]
fn recorded_kpt_fixtures() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/yaml/kpt");
    let mut cases: Vec<_> = std::fs::read_dir(&root)
        .expect("fixtures/yaml/kpt exists")
        .filter_map(Result::ok)
        .map(|entry| entry.path())
        .filter(|path| path.is_dir())
        .collect();
    cases.sort();
    assert!(!cases.is_empty());
    let mut report = String::new();
    for case in &cases {
        let input = std::fs::read_to_string(case.join("input.yaml")).expect("input.yaml");
        let expected = std::fs::read_to_string(case.join("expected.yaml")).expect("expected.yaml");
        let resources = parse_file(
            "resources.yaml",
            &case.join("resources.yaml"),
            &input,
            &ReadOptions::default(),
        );
        let actual = match resources.map(|resources| render_files(&resources)) {
            Ok(Ok(files)) => files.get("resources.yaml").cloned().unwrap_or_default(),
            Ok(Err(error)) => format!("write error: {error}"),
            Err(error) => format!("read error: {error}"),
        };
        if actual != expected {
            report.push_str(&format!(
                "\n=== {} ===\n{}",
                case.display(),
                diff(&expected, &actual)
            ));
        }
    }
    assert!(report.is_empty(), "recorded kpt fixtures differ:{report}");
}
