//! The evaluator chain: only `NotFound` falls through to the next evaluator.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use krender::runtime::chain::ChainEvaluator;
use krender::runtime::{EvalError, Evaluator, FunctionRequest, FunctionResponse, FunctionTarget};

/// An evaluator answering with a fixed result and counting its calls.
struct Fixed {
    answer: Result<FunctionResponse, EvalError>,
    calls: &'static AtomicUsize,
}

impl Evaluator for Fixed {
    fn evaluate(&self, _: &FunctionRequest<'_>) -> Result<FunctionResponse, EvalError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        self.answer.clone()
    }
}

fn request() -> FunctionRequest<'static> {
    FunctionRequest {
        target: FunctionTarget::Image("example.com/fn:v1"),
        input: b"",
        timeout: Duration::from_secs(5),
    }
}

fn ok(exit_code: i32) -> Result<FunctionResponse, EvalError> {
    Ok(FunctionResponse {
        stdout: b"out".to_vec(),
        stderr: Vec::new(),
        exit_code,
    })
}

#[test]
fn not_found_falls_through() {
    static FIRST: AtomicUsize = AtomicUsize::new(0);
    static SECOND: AtomicUsize = AtomicUsize::new(0);
    let chain = ChainEvaluator::new(vec![
        Box::new(Fixed {
            answer: Err(EvalError::NotFound("not mine".to_owned())),
            calls: &FIRST,
        }),
        Box::new(Fixed {
            answer: ok(0),
            calls: &SECOND,
        }),
    ]);
    assert_eq!(chain.evaluate(&request()), ok(0));
    assert_eq!(FIRST.load(Ordering::SeqCst), 1);
    assert_eq!(SECOND.load(Ordering::SeqCst), 1);
}

#[test]
fn other_errors_and_failed_functions_stop_the_chain() {
    static FAILING: AtomicUsize = AtomicUsize::new(0);
    static NEVER: AtomicUsize = AtomicUsize::new(0);
    for answer in [
        Err(EvalError::ExecutionFailed("boom".to_owned())),
        Err(EvalError::TimedOut(Duration::from_secs(1))),
        Err(EvalError::System("io".to_owned())),
        ok(1),
    ] {
        let chain = ChainEvaluator::new(vec![
            Box::new(Fixed {
                answer: answer.clone(),
                calls: &FAILING,
            }),
            Box::new(Fixed {
                answer: ok(0),
                calls: &NEVER,
            }),
        ]);
        assert_eq!(chain.evaluate(&request()), answer);
    }
    assert_eq!(FAILING.load(Ordering::SeqCst), 4);
    assert_eq!(NEVER.load(Ordering::SeqCst), 0);
}

#[test]
fn all_not_found_reports_every_reason() {
    static CALLS: AtomicUsize = AtomicUsize::new(0);
    let chain = ChainEvaluator::new(vec![
        Box::new(Fixed {
            answer: Err(EvalError::NotFound("no builtin".to_owned())),
            calls: &CALLS,
        }),
        Box::new(Fixed {
            answer: Err(EvalError::NotFound("no container engine".to_owned())),
            calls: &CALLS,
        }),
    ]);
    assert_eq!(
        chain.evaluate(&request()),
        Err(EvalError::NotFound(
            "no builtin; no container engine".to_owned()
        ))
    );
}

#[test]
fn a_runaway_starlark_builtin_times_out() {
    use krender::runtime::builtin::BuiltinEvaluator;
    let input = b"apiVersion: config.kubernetes.io/v1
kind: ResourceList
items: []
functionConfig:
  apiVersion: fn.kpt.dev/v1alpha1
  kind: StarlarkRun
  metadata:
    name: spin
  source: |
    for i in range(1000000000):
      for j in range(1000000000):
        pass
";
    let request = FunctionRequest {
        target: FunctionTarget::Image("ghcr.io/kptdev/krm-functions-catalog/starlark:latest"),
        input,
        timeout: Duration::from_millis(200),
    };
    assert_eq!(
        BuiltinEvaluator::default().evaluate(&request),
        Err(EvalError::TimedOut(Duration::from_millis(200)))
    );
}

#[test]
fn unknown_images_are_not_found_by_the_builtins() {
    use krender::runtime::builtin::BuiltinEvaluator;
    let request = FunctionRequest {
        target: FunctionTarget::Image(
            "ghcr.io/kptdev/krm-functions-catalog/render-helm-chart:latest",
        ),
        input: b"",
        timeout: Duration::from_secs(1),
    };
    assert!(matches!(
        BuiltinEvaluator::default().evaluate(&request),
        Err(EvalError::NotFound(_))
    ));
}

#[test]
fn render_toml_pins_a_tag_to_an_executable() {
    use krender::runtime::chain::{ChainOptions, ImageEvaluator};
    use krender::runtime::config::FunctionTable;
    let table = FunctionTable::parse(
        "[[function]]\nimage = \"set-namespace\"\nbuiltin = [\"*\"]\nexecutable = { \"v9\" = \"/bin/cat\" }\n",
        std::path::Path::new("render.toml"),
    );
    let evaluator = ImageEvaluator::new(table, &ChainOptions::default());
    let input = b"apiVersion: config.kubernetes.io/v1\nkind: ResourceList\nitems: []\n";
    let pinned = FunctionRequest {
        target: FunctionTarget::Image("ghcr.io/kptdev/krm-functions-catalog/set-namespace:v9"),
        input,
        timeout: Duration::from_secs(5),
    };
    let response = evaluator.evaluate(&pinned);
    assert_eq!(response.map(|r| r.stdout), Ok(input.to_vec()));
    // Other tags still run in process: without a config the builtin
    // reports it as an error result, as the catalog image does.
    let builtin = FunctionRequest {
        target: FunctionTarget::Image("ghcr.io/kptdev/krm-functions-catalog/set-namespace:v1"),
        ..pinned
    };
    let response = evaluator.evaluate(&builtin).unwrap();
    assert_eq!(response.exit_code, 0);
    let stdout = String::from_utf8_lossy(&response.stdout);
    assert!(stdout.contains("FunctionConfig is missing"), "{stdout}");
}

/// The function table is found by walking up from the package (here from
/// another working directory), and one that does not load is a command
/// error before anything runs, naming the file, line and column.
#[test]
fn render_toml_is_found_above_the_package_and_checked_first() {
    use std::os::unix::fs::PermissionsExt;
    let temp = tempfile::tempdir().unwrap();
    let pkg = temp.path().join("team/app");
    std::fs::create_dir_all(&pkg).unwrap();
    std::fs::write(
        pkg.join("Kptfile"),
        "apiVersion: kpt.dev/v1\nkind: Kptfile\nmetadata:\n  name: app\npipeline:\n  mutators:\n    - image: gcr.io/kpt-fn/set-namespace:v0.4\n      configMap:\n        namespace: x\n",
    )
    .unwrap();
    std::fs::write(
        pkg.join("cm.yaml"),
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm\n",
    )
    .unwrap();
    // A function that fails, saying who it is.
    let program = temp.path().join("fake-set-namespace");
    std::fs::write(&program, "#!/bin/sh\necho 'fake ran' >&2\nexit 7\n").unwrap();
    std::fs::set_permissions(&program, std::fs::Permissions::from_mode(0o755)).unwrap();
    // Written with the other catalog prefix and a tag.
    std::fs::write(
        temp.path().join("render.toml"),
        format!(
            "[[function]]\nimage = \"ghcr.io/kptdev/krm-functions-catalog/set-namespace:v0.4\"\nexecutable = {{ \"*\" = \"{}\" }}\n",
            program.display()
        ),
    )
    .unwrap();
    let elsewhere = tempfile::tempdir().unwrap();
    let render = || {
        crate::support::krender_command()
            .current_dir(elsewhere.path())
            .args(["fn", "render"])
            .arg(&pkg)
            .output()
            .unwrap()
    };
    let output = render();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("fake ran"), "{stderr}");

    std::fs::write(
        temp.path().join("render.toml"),
        "[[function]]\nimage = \"set-namespace\"\nbuiltins = [\"*\"]\n",
    )
    .unwrap();
    let before = crate::support::snapshot(&pkg);
    let output = render();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.starts_with(&format!(
            "error: invalid function table {}: TOML parse error at line 3, column 1",
            temp.path().join("render.toml").display()
        )) && stderr.contains("unknown field `builtins`"),
        "{stderr}"
    );
    assert!(!stderr.contains("[RUNNING]"), "{stderr}");
    assert_eq!(crate::support::snapshot(&pkg), before);
}

/// `fn ls` prints how each function of each pipeline runs, per package in
/// walk order, with the table it read; a near-miss of a builtin's name
/// gets a "did you mean".
#[test]
fn fn_ls_shows_how_each_function_runs() {
    let temp = tempfile::tempdir().unwrap();
    let pkg = temp.path().join("p");
    std::fs::create_dir_all(pkg.join("sub")).unwrap();
    std::fs::write(
        pkg.join("Kptfile"),
        "apiVersion: kpt.dev/v1\nkind: Kptfile\nmetadata:\n  name: p\npipeline:\n  mutators:\n    - image: set-namespace:v0.4\n    - exec: sed -e s/a/b/\n  validators:\n    - image: gcr.io/kpt-fn/set-namepsace:v0.1\n",
    )
    .unwrap();
    std::fs::write(
        pkg.join("sub/Kptfile"),
        "apiVersion: kpt.dev/v1\nkind: Kptfile\nmetadata:\n  name: sub\npipeline:\n  mutators:\n    - image: example.com/team/fn:v1\n",
    )
    .unwrap();
    std::fs::write(
        temp.path().join("render.toml"),
        "[[function]]\nimage = \"example.com/team/fn\"\nexecutable = { \"*\" = \"/opt/fn\" }\ncache = true\n\n[[exec]]\nprogram = \"sed\"\ncache = true\n",
    )
    .unwrap();
    let output = crate::support::krender_command()
        .args(["fn", "ls"])
        .arg(&pkg)
        .env("PATH", "/nonexistent")
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0));
    let stdout = String::from_utf8_lossy(&output.stdout);
    let rows: Vec<Vec<&str>> = stdout
        .lines()
        .take_while(|line| !line.is_empty())
        .map(|line| {
            line.split("  ")
                .map(str::trim)
                .filter(|f| !f.is_empty())
                .collect()
        })
        .collect();
    assert_eq!(
        rows,
        [
            vec!["PACKAGE", "KIND", "FUNCTION", "RUNS AS", "CACHED"],
            vec![
                "p",
                "mutator",
                "ghcr.io/kptdev/krm-functions-catalog/set-namespace:v0.4",
                "builtin set-namespace",
                "yes"
            ],
            vec![
                "p",
                "mutator",
                "exec: sed -e s/a/b/",
                "executable (needs --allow-exec)",
                "yes"
            ],
            vec![
                "p",
                "validator",
                "gcr.io/kpt-fn/set-namepsace:v0.1",
                "container (no engine on PATH) (did you mean set-namespace?)",
                "no"
            ],
            vec![
                "p/sub",
                "mutator",
                "example.com/team/fn:v1",
                "executable /opt/fn",
                "yes"
            ],
        ],
        "{stdout}"
    );
    assert!(
        stdout.ends_with(&format!(
            "\nfunction table: {}\n",
            temp.path().join("render.toml").display()
        )),
        "{stdout}"
    );
}
