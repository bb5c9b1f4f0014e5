//! kpt's YAML fidelity, one test per case, byte for byte:
//! - `yaml::golden::<case>` and `yaml::identity::<case>`: the golden cases
//!   from kpt itself (`fixtures/yaml/yaml-fidelity-cases.json`, a copy of
//!   the shared spec's companion data), read with the package reader and
//!   written back with the package writer (`no_function` mode), or sent
//!   through one function round trip whose function echoes stdin
//!   (`identity_function` mode: the wire must also equal what kpt wrote,
//!   `fixtures/wire/stdin/<case>.wire`);
//! - `yaml::recorded::<case>`: inputs recorded from `kpt fn render`
//!   (`fixtures/yaml/kpt/<case>/`): anchors and tags, explicit and long
//!   keys, nested and wide sequences, comments in every position, escapes,
//!   block scalar headers, flow collections.

use std::convert::Infallible;
use std::path::{Path, PathBuf};

use krender::pkg::reader::{ReadOptions, parse_file};
use krender::pkg::writer::render_files;
use krender::runtime::function_filter::{FunctionCall, FunctionExit, run_function};
use krender::yaml::Node;
use libtest_mimic::{Failed, Trial};

#[derive(serde::Deserialize)]
struct Cases {
    cases: Vec<Case>,
}

/// One golden case of `yaml-fidelity-cases.json`, with kpt's result in both
/// modes.
#[derive(Clone, serde::Deserialize)]
struct Case {
    name: String,
    file_name: String,
    input: String,
    no_function: Expected,
    identity_function: Expected,
}

/// kpt's output bytes, or its error text.
#[derive(Clone, serde::Deserialize)]
struct Expected {
    output: Option<String>,
    error: Option<String>,
}

/// The package path written into the package-path annotation; the captured
/// wire files carry the same placeholder.
const PKG: &str = "@PKG@";

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// One trial per golden case and mode, and per recorded case.
pub(crate) fn trials() -> Vec<Trial> {
    let golden = repo().join("fixtures/yaml/yaml-fidelity-cases.json");
    let mut trials = match load_cases(&golden) {
        Ok(cases) => {
            let mut trials = Vec::new();
            for case in cases {
                let identity = case.clone();
                trials.push(Trial::test(
                    format!("yaml::golden::{}", case.name),
                    move || no_function(&case),
                ));
                trials.push(Trial::test(
                    format!("yaml::identity::{}", identity.name),
                    move || identity_function(&identity),
                ));
            }
            crate::non_empty("yaml::golden", &golden, trials)
        }
        // The file is checked in: not reading it is one failure, not none.
        Err(failure) => vec![Trial::test("yaml::golden::unreadable", move || {
            Err(failure)
        })],
    };
    let recorded = repo().join("fixtures/yaml/kpt");
    let cases = crate::case_dirs(&recorded, "input.yaml")
        .into_iter()
        .map(|dir| {
            let name = format!("yaml::recorded::{}", crate::name_of(&dir));
            Trial::test(name, move || recorded_case(&dir))
        })
        .collect();
    trials.extend(crate::non_empty("yaml::recorded", &recorded, cases));
    trials
}

fn load_cases(path: &Path) -> Result<Vec<Case>, Failed> {
    let text = crate::read(path)?;
    // JSON is YAML; serde_yaml (a dev-dependency) reads it without adding a
    // JSON crate.
    let cases: Cases =
        serde_yaml::from_str(&text).map_err(|error| format!("{}: {error}", path.display()))?;
    Ok(cases.cases)
}

/// The render's KRM check on read resources (owned by the hydrator;
/// emulated here so the `bare.yaml` case is covered end to end).
fn krm_check(file_name: &str, resources: &[Node]) -> Result<(), String> {
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

/// What differs between kpt's result `expected` and ours, `actual` (output
/// or error text).
fn compare(expected: &Expected, actual: &Result<String, String>) -> Option<String> {
    match (actual, expected) {
        (
            Ok(actual),
            Expected {
                output: Some(expected),
                ..
            },
        ) => (actual != expected).then(|| crate::diff(expected, actual)),
        (
            Err(actual),
            Expected {
                error: Some(expected),
                ..
            },
        ) => (actual != expected)
            .then(|| format!("expected error: {expected}\n  actual error: {actual}")),
        (
            Ok(actual),
            Expected {
                error: Some(expected),
                ..
            },
        ) => Some(format!(
            "expected error: {expected}\nbut got output:\n{actual}"
        )),
        (Err(actual), _) => Some(format!("unexpected error: {actual}")),
        (Ok(_), _) => Some("case has neither output nor error".to_owned()),
    }
}

/// `no_function` mode: the case file read and written back.
fn no_function(case: &Case) -> crate::Outcome {
    match compare(&case.no_function, &read_and_write(case)) {
        Some(problem) => Err(problem.into()),
        None => Ok(()),
    }
}

/// The case file after the reader and the writer, or the error text, in
/// the form of kpt's.
fn read_and_write(case: &Case) -> Result<String, String> {
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

/// `identity_function` mode: a package of `fixtures/wire/Kptfile` plus the
/// case file through one function round trip. Both the function's stdin
/// (when kpt's was captured) and the rewritten case file must be kpt's.
fn identity_function(case: &Case) -> crate::Outcome {
    let kptfile = crate::read(&repo().join("fixtures/wire/Kptfile"))?;
    // Not every case has a captured wire (kpt wrote none for an error).
    let wire =
        std::fs::read_to_string(repo().join(format!("fixtures/wire/stdin/{}.wire", case.name)))
            .unwrap_or_default();
    let (output, stdin) = round_trip(case, &kptfile);
    let mut problems = Vec::new();
    if let (Some(stdin), false) = (&stdin, wire.is_empty())
        && *stdin != wire
    {
        problems.push(format!("wire differs:\n{}", crate::diff(&wire, stdin)));
    }
    if let Some(problem) = compare(&case.identity_function, &output) {
        problems.push(format!("output: {problem}"));
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(problems.join("\n").into())
    }
}

/// The case file after the round trip (or the error text), and what the
/// function received on stdin, if it ran.
fn round_trip(case: &Case, kptfile: &str) -> (Result<String, String>, Option<String>) {
    let options = ReadOptions {
        package_path: Some(PKG.to_owned()),
    };
    let read = |name: &str, text: &str| {
        let abs = format!("<pkg>/{name}");
        parse_file(name, Path::new(&abs), text, &options).map_err(|error| format!("Error: {error}"))
    };
    let resources = read("Kptfile", kptfile).and_then(|mut resources| {
        let own = read(&case.file_name, &case.input)?;
        krm_check(&case.file_name, &own).map_err(|error| format!("Error: {error}"))?;
        let untouched = own.is_empty();
        resources.extend(own);
        Ok((resources, untouched))
    });
    let (resources, untouched) = match resources {
        Ok(read) => read,
        Err(error) => return (Err(error), None),
    };
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
    (output, stdin)
}

/// A recorded case: `input.yaml` as the only resource file of a package
/// without a pipeline, read and written back, must be `expected.yaml`.
fn recorded_case(dir: &Path) -> crate::Outcome {
    let input = crate::read(&dir.join("input.yaml"))?;
    let expected = crate::read(&dir.join("expected.yaml"))?;
    let resources = parse_file(
        "resources.yaml",
        &dir.join("resources.yaml"),
        &input,
        &ReadOptions::default(),
    );
    let actual = match resources.map(|resources| render_files(&resources)) {
        Ok(Ok(files)) => files.get("resources.yaml").cloned().unwrap_or_default(),
        Ok(Err(error)) => format!("write error: {error}"),
        Err(error) => format!("read error: {error}"),
    };
    if actual == expected {
        Ok(())
    } else {
        Err(crate::diff(&expected, &actual).into())
    }
}
