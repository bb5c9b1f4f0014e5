//! Native builtins (run on nodes, no wire round trip) must produce exactly
//! what the wire produces, one test per input:
//! - `native::package::<path>`: every package of the shared conformance
//!   data and of `fixtures/`, run through each native builtin chained with
//!   the next one, natively and on the wire, compared after every step;
//! - `native::fixture::<function>::<case>`: every `fixtures/builtins` input
//!   list through its own builtin;
//! - `native::verify::<package>`: `KRENDER_NATIVE=verify` renders of the
//!   README's example and of shared cases with subpackages and selectors.

use std::path::{Path, PathBuf};
use std::time::Duration;

use krender::krm::resource_list::decode_function_output;
use krender::pkg::reader::{ReadOptions, read_package};
use krender::runtime::builtin::{Builtin, BuiltinEvaluator, DEFAULT_IMAGE_PREFIX};
use krender::runtime::function_filter::{
    EvaluatedStep, FunctionCall, SettledList, native_difference, run_evaluator_owned, run_wire,
    runs_natively,
};
use krender::runtime::{Evaluator, FunctionTarget};
use krender::yaml::node::Node;
use libtest_mimic::Trial;

const TIMEOUT: Duration = Duration::from_secs(60);

/// Function configs exercising each native builtin, including values that
/// need quoting on the wire (`"123"`, `"yes"`).
const CONFIGS: &[(Builtin, &str)] = &[
    (Builtin::SetNamespace, "namespace: prod"),
    (Builtin::SetLabels, "app: web\n  tier: \"123\""),
    (Builtin::SetAnnotations, "note: \"yes\"\n  owner: team-a"),
    (Builtin::SetImage, "name: nginx\n  newTag: \"1.2\""),
    (
        Builtin::SearchReplace,
        "by-value: nginx\n  put-value: httpd",
    ),
    (
        Builtin::ApplySetters,
        "replicas: \"4\"\n  image: web\n  args: \"[--one, --b]\"\n  command: \"[run]\"",
    ),
    (Builtin::NoOp, ""),
    (Builtin::DropComments, ""),
];

/// The shared kpt cases `native::verify` renders besides the example.
const VERIFY_CASES: [&str; 3] = ["fnconfig", "selectors/generator", "basicpipeline"];

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Every trial of this module (the packages only when the command line
/// can select one: reading 700 packages takes a second).
pub(crate) fn trials(arguments: &libtest_mimic::Arguments) -> Vec<Trial> {
    let one = arguments
        .filter
        .as_deref()
        .filter(|_| arguments.exact)
        .and_then(|name| name.strip_prefix("native::package::"))
        .filter(|rel| *rel != "coverage");
    let mut trials = match one {
        // nextest's `--exact NAME`: that package alone.
        Some(rel) => one_package_trial(rel),
        None if crate::may_select(arguments, "native::package::") => package_trials(),
        None => Vec::new(),
    };
    trials.extend(fixture_trials());
    trials.extend(verify_trials());
    trials
}

/// A package with resources: its directory and what the reader made of it.
type Package = (PathBuf, Vec<Node>);

/// The packages under `root` that read and hold resources; the rest (an
/// invalid Kptfile, local config only) have nothing to compare.
fn packages(root: &Path) -> Vec<Package> {
    let mut dirs = Vec::new();
    package_dirs(root, &mut dirs);
    dirs.sort();
    dirs.into_iter()
        .filter_map(|dir| {
            let options = ReadOptions {
                package_path: Some(dir.display().to_string()),
            };
            let read = read_package(&dir, &options).ok()?;
            (!read.resources.is_empty()).then_some((dir, read.resources))
        })
        .collect()
}

/// `native::package::<path>`, the path relative to the repository
/// (`fixtures/...`) or to the shared data (`conformance/...`). With the
/// shared data there is also `native::package::coverage` (see
/// [`coverage`]).
fn package_trials() -> Vec<Trial> {
    let fixtures = packages(&repo().join("fixtures"));
    let fixture_resources: Vec<Vec<Node>> = fixtures
        .iter()
        .map(|(_, resources)| resources.clone())
        .collect();
    let mut trials = package_trials_under(&repo(), fixtures);
    trials.extend(crate::shared_suite(
        "native::package",
        "conformance",
        |conformance| {
            let shared = packages(conformance);
            let mut all = fixture_resources;
            all.extend(shared.iter().map(|(_, resources)| resources.clone()));
            let base = conformance.parent().unwrap_or(conformance).to_owned();
            let mut trials = package_trials_under(&base, shared);
            trials.push(Trial::test("native::package::coverage", move || {
                coverage(&all)
            }));
            trials
        },
    ));
    trials
}

/// The trial of the package at `rel` (under the repository, or next to
/// the shared `conformance` directory), when it reads and holds resources.
fn one_package_trial(rel: &str) -> Vec<Trial> {
    let base = if rel.starts_with("fixtures/") {
        repo()
    } else {
        crate::support::shared_root()
    };
    let dir = base.join(rel);
    let options = ReadOptions {
        package_path: Some(dir.display().to_string()),
    };
    match read_package(&dir, &options) {
        Ok(read) if !read.resources.is_empty() => {
            package_trials_under(&base, vec![(dir, read.resources)])
        }
        _ => Vec::new(),
    }
}

/// The package comparisons prove little unless most packages take the
/// native path, and a native step's settled list (what the hydrator hands
/// the next native step) is common: over 50 packages, three quarters of
/// them native, and the first table step settles on three quarters.
fn coverage(packages: &[Vec<Node>]) -> crate::Outcome {
    let total = packages.len();
    let native = packages
        .iter()
        .filter(|resources| runs_natively(resources))
        .count();
    let (builtin, data) = CONFIGS[0];
    let config = config_map(data);
    let settled = packages
        .iter()
        .filter(|resources| {
            step(builtin, resources.to_vec(), config.as_ref(), Some(None))
                .is_ok_and(|step| step.settled.is_some())
        })
        .count();
    if total > 50 && native * 4 > total * 3 && settled * 4 > total * 3 {
        Ok(())
    } else {
        Err(format!(
            "of {total} packages, {native} run natively and {settled} settle after {}: \
             want over 50 packages, three quarters native and three quarters settled",
            builtin.name()
        )
        .into())
    }
}

/// One trial per package, named by its path relative to `base`.
fn package_trials_under(base: &Path, packages: Vec<Package>) -> Vec<Trial> {
    packages
        .into_iter()
        .map(|(dir, resources)| {
            let relative = dir.strip_prefix(base).unwrap_or(&dir);
            let name = format!("native::package::{}", relative.display());
            Trial::test(name, move || package(&resources))
        })
        .collect()
}

/// Each builtin chained with the next one in the table, on one package.
fn package(resources: &[Node]) -> crate::Outcome {
    let configs: Vec<(Builtin, Option<Node>)> = CONFIGS
        .iter()
        .map(|(builtin, data)| (*builtin, config_map(data)))
        .collect();
    let failures: Vec<String> = configs
        .iter()
        .enumerate()
        .filter_map(|(i, first)| {
            let second = &configs[(i + 1) % configs.len()];
            compare(resources, &[first.clone(), second.clone()])
        })
        .collect();
    if failures.is_empty() {
        Ok(())
    } else {
        Err(failures.join("\n\n").into())
    }
}

/// `native::fixture::<function>::<case>`: each `fixtures/builtins` input
/// list of a builtin that runs natively, through that builtin.
fn fixture_trials() -> Vec<Trial> {
    let root = repo().join("fixtures/builtins");
    let mut trials = Vec::new();
    for builtin in Builtin::ALL.into_iter().filter(|b| b.runs_native()) {
        for case in crate::case_dirs(&root.join(builtin.name()), "input.yaml") {
            let name = format!(
                "native::fixture::{}::{}",
                builtin.name(),
                crate::name_of(&case)
            );
            trials.push(Trial::test(name, move || fixture(builtin, &case)));
        }
    }
    crate::non_empty("native::fixture", &root, trials)
}

fn fixture(builtin: Builtin, case: &Path) -> crate::Outcome {
    let input = crate::read(&case.join("input.yaml"))?;
    let list = decode_function_output(&input).map_err(|error| format!("input.yaml: {error}"))?;
    match compare(&list.items, &[(builtin, list.function_config.clone())]) {
        Some(failure) => Err(failure.into()),
        None => Ok(()),
    }
}

/// `native::verify::<package>`: the README's example
/// (`fixtures/example/hello`) and [`VERIFY_CASES`] of the shared kpt cases.
fn verify_trials() -> Vec<Trial> {
    let example = repo().join("fixtures/example/hello");
    let mut trials = vec![Trial::test(
        "native::verify::fixtures/example/hello",
        move || verify(&example),
    )];
    trials.extend(crate::shared_suite(
        "native::verify",
        "conformance/kpt-fn-render",
        |dir| {
            VERIFY_CASES
                .into_iter()
                .map(|case| {
                    let path = dir.join(case);
                    Trial::test(format!("native::verify::{case}"), move || verify(&path))
                })
                .collect()
        },
    ));
    trials
}

/// `KRENDER_NATIVE=verify` end to end: every native step is checked against
/// the wire, which fails the render on any difference; the output equals a
/// wire-only render's. (`-o stdout` leaves the package as it is.)
fn verify(package: &Path) -> crate::Outcome {
    // A renamed case must fail, not drop out of the comparison.
    if !package.is_dir() {
        return Err(format!("{} is not a directory", package.display()).into());
    }
    let render = |native: &str| {
        crate::support::krender_command()
            .args(["fn", "render", "-o", "stdout", "--no-cache"])
            .arg(package)
            .env("KRENDER_NATIVE", native)
            .env("KRENDER_CONFIG", repo().join("no-render.toml"))
            .output()
    };
    let (verify, wire) = (render("verify")?, render("off")?);
    if verify.status.code() != Some(0) {
        return Err(format!(
            "verify render exited with {:?}:\n{}",
            verify.status.code(),
            String::from_utf8_lossy(&verify.stderr)
        )
        .into());
    }
    if wire.status.code() != Some(0) {
        return Err(format!(
            "wire render exited with {:?}:\n{}",
            wire.status.code(),
            String::from_utf8_lossy(&wire.stderr)
        )
        .into());
    }
    if verify.stdout.is_empty() {
        return Err("verify render printed nothing".into());
    }
    if verify.stdout != wire.stdout {
        return Err(format!(
            "verify render differs from the wire's:\n{}",
            crate::diff(
                &String::from_utf8_lossy(&wire.stdout),
                &String::from_utf8_lossy(&verify.stdout)
            )
        )
        .into());
    }
    Ok(())
}

fn config_map(data: &str) -> Option<Node> {
    if data.is_empty() {
        return None;
    }
    let text = format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: function-input\ndata:\n  {data}\n"
    );
    krender::yaml::parse_document(&text)
        .ok()
        .flatten()
        .map(|document| document.root().clone())
}

/// The directories under `root` holding a `.yaml`/`.yml` file, except
/// kpt's `.expected*` directories.
fn package_dirs(root: &Path, found: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(root) else {
        return;
    };
    let mut has_yaml = false;
    for entry in entries.flatten() {
        let path = entry.path();
        let name = entry.file_name().to_string_lossy().into_owned();
        if path.is_dir() {
            if !name.starts_with(".expected") {
                package_dirs(&path, found);
            }
        } else if name.ends_with(".yaml") || name.ends_with(".yml") {
            has_yaml = true;
        }
    }
    if has_yaml {
        found.push(root.to_path_buf());
    }
}

/// One step, natively (`Some`, with what the previous native step knew of
/// its output, as the hydrator passes it on) or on the wire (`None`).
fn step(
    builtin: Builtin,
    resources: Vec<Node>,
    config: Option<&Node>,
    native: Option<Option<SettledList>>,
) -> Result<EvaluatedStep, krender::runtime::EvalError> {
    let image = format!("{DEFAULT_IMAGE_PREFIX}{}:latest", builtin.name());
    let evaluator = BuiltinEvaluator::default();
    let target = FunctionTarget::Image(&image);
    assert_eq!(evaluator.native(target), Some(builtin));
    let call = FunctionCall {
        function_config: config,
        in_pipeline: true,
    };
    match native {
        // What the hydrator does by default, which takes the wire for
        // resources known not to survive it.
        Some(known) => run_evaluator_owned(
            &evaluator,
            target,
            resources,
            call,
            TIMEOUT,
            known,
            Default::default(),
        ),
        None => run_wire(&evaluator, target, resources, call, TIMEOUT),
    }
}

/// Runs `resources` through `steps`, natively (each native step on what the
/// previous one settled, as the hydrator runs them) and on the wire, and
/// reports the first difference, after any step.
fn compare(resources: &[Node], steps: &[(Builtin, Option<Node>)]) -> Option<String> {
    let (mut wire_items, mut native_items) = (resources.to_vec(), resources.to_vec());
    let mut known = None;
    let names: Vec<&str> = steps.iter().map(|(builtin, _)| builtin.name()).collect();
    for (builtin, config) in steps {
        let wire = step(*builtin, wire_items, config.as_ref(), None);
        let native = step(*builtin, native_items, config.as_ref(), Some(known.take()));
        if let Some(difference) = native_difference(&wire, &native) {
            let failure = format!(
                "{} (of {}): {difference}",
                builtin.name(),
                names.join(" | ")
            );
            return Some(failure);
        }
        match (wire, native) {
            (Ok(wire), Ok(native)) => match (wire.output, native.output, native.settled) {
                (Ok(wire), Ok(native), settled) if !wire.is_empty() => {
                    known = settled;
                    wire_items = wire;
                    native_items = native;
                }
                _ => break,
            },
            _ => break,
        }
    }
    None
}
