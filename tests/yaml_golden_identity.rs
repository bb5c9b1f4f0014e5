//! Golden cases from kpt itself (`fixtures/yaml/yaml-fidelity-cases.json`),
//! `identity_function` mode: a package of `fixtures/wire/Kptfile` plus the
//! case file is read with the package reader, sent through one function
//! round trip whose function echoes stdin, and written with the package
//! writer. Two byte-exact checks per case:
//! - the wire (the function's stdin) equals what kpt wrote
//!   (`fixtures/wire/stdin/<case>.wire`);
//! - the rewritten case file equals kpt's `identity_function` output.

use std::convert::Infallible;
use std::path::Path;

use krender::pkg::reader::{ReadOptions, parse_file};
use krender::pkg::writer::render_files;
use krender::runtime::function_filter::{FunctionCall, FunctionExit, run_function};

use super::yaml_golden::{Case, Expected, assert_known_failures, diff, krm_check, load_cases};

/// Cases that do not pass yet. The test fails when a case outside this list
/// fails, and also when a listed case starts passing, so the list only
/// shrinks.
const KNOWN_FAILING: &[&str] = &[];

/// The package path written into the package-path annotation; the captured
/// wire files carry the same placeholder.
const PKG: &str = "@PKG@";

fn fixture(path: &str) -> String {
    let full = Path::new(env!("CARGO_MANIFEST_DIR")).join(path);
    std::fs::read_to_string(&full).unwrap_or_default()
}

struct Run {
    /// The case file's content after the render (or the error text).
    output: Result<String, String>,
    /// What the function received on stdin.
    stdin: Option<String>,
}

fn run_identity(case: &Case) -> Run {
    let options = ReadOptions {
        package_path: Some(PKG.to_owned()),
    };
    let kptfile_text = fixture("fixtures/wire/Kptfile");
    let read = |name: &str, text: &str| {
        let abs = format!("<pkg>/{name}");
        parse_file(name, Path::new(&abs), text, &options).map_err(|error| format!("Error: {error}"))
    };
    let mut resources = match read("Kptfile", &kptfile_text) {
        Ok(resources) => resources,
        Err(error) => {
            return Run {
                output: Err(error),
                stdin: None,
            };
        }
    };
    let own = match read(&case.file_name, &case.input) {
        Ok(own) => own,
        Err(error) => {
            return Run {
                output: Err(error),
                stdin: None,
            };
        }
    };
    if let Err(error) = krm_check(&case.file_name, &own) {
        return Run {
            output: Err(format!("Error: {error}")),
            stdin: None,
        };
    }
    let untouched = own.is_empty();
    resources.extend(own);
    let mut stdin = None;
    let call = FunctionCall {
        function_config: None,
        in_pipeline: true,
    };
    let step = run_function::<Infallible>(&resources, call, |input| {
        stdin = Some(String::from_utf8_lossy(input).into_owned());
        FunctionExit {
            stdout: input.to_vec(),
            status: Ok(()),
        }
    });
    let output = step
        .map_err(|error| format!("Error: {error}"))
        .and_then(|step| step.finish().map_err(|error| format!("Error: {error}")))
        .and_then(|outputs| render_files(&outputs).map_err(|error| format!("Error: {error}")))
        .map(|files| {
            if untouched {
                // A file that held no resources is left alone.
                case.input.clone()
            } else {
                files.get(&case.file_name).cloned().unwrap_or_default()
            }
        });
    Run { output, stdin }
}

fn check(case: &Case) -> Option<String> {
    let run = run_identity(case);
    let mut problems = Vec::new();
    let wire = fixture(&format!("fixtures/wire/stdin/{}.wire", case.name));
    if let (Some(stdin), false) = (&run.stdin, wire.is_empty())
        && *stdin != wire
    {
        problems.push(format!("wire differs:\n{}", diff(&wire, stdin)));
    }
    match (&run.output, &case.identity_function) {
        (
            Ok(actual),
            Expected {
                output: Some(expected),
                ..
            },
        ) => {
            if actual != expected {
                problems.push(format!("output differs:\n{}", diff(expected, actual)));
            }
        }
        (
            Err(actual),
            Expected {
                error: Some(expected),
                ..
            },
        ) => {
            if actual != expected {
                problems.push(format!(
                    "expected error: {expected}\n  actual error: {actual}"
                ));
            }
        }
        (
            Ok(actual),
            Expected {
                error: Some(expected),
                ..
            },
        ) => {
            problems.push(format!(
                "expected error: {expected}\nbut got output:\n{actual}"
            ));
        }
        (Err(actual), _) => problems.push(format!("unexpected error: {actual}")),
        (Ok(_), _) => problems.push("case has neither output nor error".to_owned()),
    }
    (!problems.is_empty()).then(|| problems.join("\n"))
}

#[test]
fn golden_identity_function() {
    let cases = load_cases();
    let mut failures = Vec::new();
    let mut passed = 0;
    for case in &cases {
        let problem = match std::panic::catch_unwind(|| check(case)) {
            Err(_) => Some("panicked".to_owned()),
            Ok(problem) => problem,
        };
        match problem {
            None => passed += 1,
            Some(problem) => failures.push((case.name.clone(), problem)),
        }
    }
    assert_known_failures("identity_function", passed, &failures, KNOWN_FAILING);
}
