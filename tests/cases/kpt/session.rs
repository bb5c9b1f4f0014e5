//! A render session (`engine::session`, what `krender watch` keeps) renders
//! every shared kpt case as a one-shot render (`engine::oneshot`, what
//! `fn render` runs) does (`kpt::session::<case>`): the same `-o stdout`
//! result, bytes or error, and the same log. A session hands the root's
//! output to `apply` as the engine holds it (written without a copy); a
//! one-shot render hands over its own list. A case whose root Kptfile does
//! not load renders neither way: kpt must fail there with the same error.

use std::path::Path;

use krender::engine::db::RenderDb;
use krender::engine::session::RenderSession;
use krender::hydrate;
use libtest_mimic::Trial;

use crate::support::{copy_dir, normalize_durations, render_context};

pub(super) fn trials() -> Vec<Trial> {
    super::per_case("session", run)
}

fn run(case: &Path) -> crate::Outcome {
    let temp = tempfile::tempdir()?;
    let root = temp.path().join(crate::name_of(case));
    copy_dir(case, &root);
    let kptfile = match hydrate::load_root(&root) {
        Ok(kptfile) => kptfile,
        // Nothing renders: kpt must fail there too, with the same error
        // (kpt was given the case relative to its working directory).
        Err(error) => {
            let error = error
                .to_string()
                .replace(&format!("{}/", temp.path().display()), "");
            return load_failure(case, &error);
        }
    };
    let mut log = Vec::new();
    let (outcome, _) = krender::engine::oneshot::render_once(
        &render_context(&root),
        Some(2),
        kptfile.clone(),
        &mut log,
        None,
        None,
        false,
    );
    let once = stdout_of(outcome, log);
    let mut session = RenderSession::with_db(RenderDb::new(render_context(&root), None), Some(2));
    session.refresh(&kptfile);
    let mut log = Vec::new();
    let outcome = session.render(kptfile, &mut log);
    let incremental = stdout_of(outcome, log);
    let mut problems = Vec::new();
    for (what, expected, actual) in [
        ("result", &once.0, &incremental.0),
        ("stdout", &once.1, &incremental.1),
        ("log", &once.2, &incremental.2),
    ] {
        if expected != actual {
            problems.push(format!(
                "the session's {what} differs from the one-shot render's:\n{}",
                crate::diff(expected, actual)
            ));
        }
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(problems.join("\n").into())
    }
}

/// What kpt's run of a case ends with (`.expected/config.yaml`).
#[derive(Default, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct Expected {
    #[serde(default)]
    exit_code: i32,
    std_err: Option<String>,
}

/// A case whose root Kptfile does not load (`error`): kpt's run must fail
/// with the expected stderr in `error`.
fn load_failure(case: &Path, error: &str) -> crate::Outcome {
    let config = case.join(".expected/config.yaml");
    let text = std::fs::read_to_string(&config).unwrap_or_default();
    let expected: Expected = serde_yaml::from_str::<Option<Expected>>(&text)
        .map_err(|problem| format!("{}: {problem}", config.display()))?
        .unwrap_or_default();
    if expected.exit_code == 0 {
        return Err(
            format!("the root Kptfile does not load, but kpt renders the case: {error}").into(),
        );
    }
    match expected.std_err {
        Some(std_err) if !error.contains(std_err.trim()) => Err(format!(
            "the root Kptfile does not load, but not with kpt's error:\nkpt:     {std_err}\nkrender: {error}"
        )
        .into()),
        _ => Ok(()),
    }
}

/// The `-o stdout` result (`None` or the error), the bytes written and the
/// log (durations normalised) of `outcome`.
fn stdout_of(outcome: hydrate::RenderOutcome, log: Vec<u8>) -> (String, String, String) {
    let mut out = Vec::new();
    let result = hydrate::apply(
        outcome,
        &hydrate::Output::Stdout,
        None,
        &mut out,
        &mut Vec::new(),
    );
    let log = normalize_durations(&String::from_utf8_lossy(&log));
    (
        format!("{:?}\n", result.err()),
        String::from_utf8_lossy(&out).into_owned(),
        log,
    )
}
