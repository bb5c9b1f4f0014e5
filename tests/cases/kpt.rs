//! The shared kpt conformance cases (`../shared/conformance/kpt-fn-render`,
//! each also scored by the shared runner: `kpt::render::<case>`) and kpt's
//! recorded `fn source | fn sink` output, one test per case and check:
//! `kpt::<check>::<case>`.

use std::path::Path;

use libtest_mimic::Trial;

mod incremental;
mod render;
mod session;
mod source_sink;
mod warm_cold;

/// Every trial of the kpt checks.
pub(crate) fn trials() -> Vec<Trial> {
    let mut trials = warm_cold::trials();
    trials.extend(incremental::trials());
    trials.extend(session::trials());
    trials.extend(source_sink::trials());
    trials.extend(render::trials());
    trials
}

/// `kpt::<check>::<case>` for every shared kpt case (a directory with
/// `.expected`), each running `run` on the case's directory.
fn per_case(check: &str, run: fn(&Path) -> crate::Outcome) -> Vec<Trial> {
    let suite = format!("kpt::{check}");
    crate::shared_suite(&suite, "conformance/kpt-fn-render", |dir| {
        crate::case_dirs(dir, ".expected")
            .into_iter()
            .map(|case| {
                let name = format!("{suite}::{}", crate::name_of(&case));
                Trial::test(name, move || run(&case))
            })
            .collect()
    })
}

/// The `fn render` flags a kpt e2e case's `.expected/config.yaml` asks for.
fn case_flags(case: &Path) -> Vec<&'static str> {
    let config = std::fs::read_to_string(case.join(".expected/config.yaml")).unwrap_or_default();
    let mut flags = Vec::new();
    if config.contains("allowExec: true") {
        flags.push("--allow-exec");
    }
    if config.contains("disableOutputTruncate: true") {
        flags.push("--truncate-output=false");
    }
    flags
}
