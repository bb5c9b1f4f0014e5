//! Native builtins (run on nodes, no wire round trip) must produce exactly
//! what the wire produces. Every package of the shared conformance cases
//! and of `fixtures/` is run through each native builtin, one step and two
//! chained steps, both ways; every `fixtures/builtins` input list too.

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

/// Native steps that ran on a list described by the previous step's
/// [`SettledList`] (see [`compare`]).
static KNOWN_STEPS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// Runs `resources` through `first` then `second`, both ways, and reports
/// any difference after each step.
fn compare(label: &str, resources: &[Node], steps: &[(Builtin, Option<Node>)]) -> Vec<String> {
    let mut failures = Vec::new();
    let (mut wire_items, mut native_items) = (resources.to_vec(), resources.to_vec());
    let mut known = None;
    for (builtin, config) in steps {
        if known.is_some() {
            KNOWN_STEPS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
        let wire = step(*builtin, wire_items, config.as_ref(), None);
        let native = step(*builtin, native_items, config.as_ref(), Some(known.take()));
        if let Some(difference) = native_difference(&wire, &native) {
            failures.push(format!("{label} / {}: {difference}", builtin.name()));
            break;
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
    failures
}

#[test]
fn native_builtins_match_the_wire_on_every_package() {
    let Some(shared) = crate::support::shared_dir("conformance") else {
        return;
    };
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut dirs = Vec::new();
    package_dirs(&shared, &mut dirs);
    package_dirs(&manifest.join("fixtures"), &mut dirs);
    let packages: Vec<(PathBuf, Vec<Node>)> = dirs
        .into_iter()
        .filter_map(|dir| {
            let options = ReadOptions {
                package_path: Some(dir.display().to_string()),
            };
            let read = read_package(&dir, &options).ok()?;
            (!read.resources.is_empty()).then_some((dir, read.resources))
        })
        .collect();
    crate::support::shared_cases(
        "builtins_native (every package)",
        packages
            .iter()
            .filter(|(dir, _)| dir.starts_with(&shared))
            .count(),
    );
    assert!(
        packages.len() > 50,
        "only {} packages found",
        packages.len()
    );
    let configs: Vec<(Builtin, Option<Node>)> = CONFIGS
        .iter()
        .map(|(builtin, data)| (*builtin, config_map(data)))
        .collect();
    // Most packages must really take the native path, or this proves little.
    let native = packages
        .iter()
        .filter(|(_, resources)| runs_natively(resources))
        .count();
    assert!(
        native * 4 > packages.len() * 3,
        "only {native} of {} packages run natively",
        packages.len()
    );
    let mut failures = Vec::new();
    for (dir, resources) in &packages {
        let label = dir.display().to_string();
        // Each builtin, chained with the next one in the table (compare
        // checks after every step).
        for (i, first) in configs.iter().enumerate() {
            let second = &configs[(i + 1) % configs.len()];
            failures.extend(compare(&label, resources, &[first.clone(), second.clone()]));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
    // Second steps after a settled native step took the hydrator's path.
    let known = KNOWN_STEPS.load(std::sync::atomic::Ordering::Relaxed);
    assert!(
        known > packages.len(),
        "only {known} steps ran on a known list"
    );
}

#[test]
fn native_builtins_match_the_wire_on_the_builtin_fixtures() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/builtins");
    let mut failures = Vec::new();
    let mut ran = 0;
    for builtin in Builtin::ALL.into_iter().filter(|b| b.runs_native()) {
        let Ok(cases) = std::fs::read_dir(root.join(builtin.name())) else {
            continue;
        };
        for case in cases.flatten() {
            let Ok(input) = std::fs::read_to_string(case.path().join("input.yaml")) else {
                continue;
            };
            let Ok(list) = decode_function_output(&input) else {
                failures.push(format!("{}: input does not parse", case.path().display()));
                continue;
            };
            ran += 1;
            failures.extend(compare(
                &case.path().display().to_string(),
                &list.items,
                &[(builtin, list.function_config.clone())],
            ));
        }
    }
    assert!(ran >= 10, "only {ran} fixture cases ran");
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

/// `KRENDER_NATIVE=verify` end to end: every native step of the README's
/// example and of shared cases with subpackages and selectors is checked
/// against the wire, which fails the render on any difference; the output
/// equals a wire-only render's. (`-o stdout` leaves the packages as they
/// are.)
#[test]
fn verify_mode_renders_like_the_wire() {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut fixtures = vec![manifest.join("fixtures/example/hello")];
    if let Some(shared) = crate::support::shared_dir("conformance/kpt-fn-render") {
        let cases =
            ["fnconfig", "selectors/generator", "basicpipeline"].map(|case| shared.join(case));
        // A renamed case must fail, not drop out of the comparison.
        crate::support::shared_cases(
            "builtins_native (verify mode)",
            cases.iter().filter(|case| case.is_dir()).count(),
        );
        fixtures.extend(cases);
    }
    for fixture in &fixtures {
        let fixture = fixture.display().to_string();
        let render = |native: &str| {
            crate::support::krender_command()
                .args(["fn", "render", "-o", "stdout", "--no-cache"])
                .arg(&fixture)
                .env("KRENDER_NATIVE", native)
                .env("KRENDER_CONFIG", manifest.join("no-render.toml"))
                .output()
                .expect("run krender")
        };
        let (verify, wire) = (render("verify"), render("off"));
        assert_eq!(
            verify.status.code(),
            Some(0),
            "{fixture}: {}",
            String::from_utf8_lossy(&verify.stderr)
        );
        assert_eq!(verify.status.code(), wire.status.code(), "{fixture}");
        assert!(!verify.stdout.is_empty(), "{fixture}");
        assert_eq!(verify.stdout, wire.stdout, "{fixture}");
    }
}
