//! `kpt::render::<case>`: each shared kpt case scored by the shared runner
//! (`../shared/tools/kpt-conformance --only <case>`), which renders it as
//! kpt's own e2e harness does and compares files, stderr and exit code with
//! `.expected`. Cases that need the network are ignored, as CI's
//! `--skip-net` run skips them (nothing outside the package registries is
//! reachable here).

use std::path::{Path, PathBuf};
use std::process::Command;

use libtest_mimic::Trial;

/// One trial per case the runner lists.
pub(crate) fn trials() -> Vec<Trial> {
    crate::shared_suite("kpt::render", "tools", |tools| {
        let runner = &tools.join("kpt-conformance");
        let listed = Command::new("python3")
            .arg(runner)
            .args([
                "--bin",
                env!("CARGO_BIN_EXE_krender"),
                "--skip-net",
                "--list",
            ])
            .output();
        let listed = match listed {
            Ok(output) if output.status.success() => output.stdout,
            Ok(output) => return failing(&String::from_utf8_lossy(&output.stderr)),
            Err(error) => return failing(&format!("python3 {}: {error}", runner.display())),
        };
        String::from_utf8_lossy(&listed)
            .lines()
            .filter_map(|line| {
                let mut words = line.split_whitespace();
                let case = words.next()?.to_owned();
                // `case  (note; note)`: a `net` note means CI skips it.
                let net = line.split_once('(').is_some_and(|(_, notes)| {
                    notes
                        .trim_end_matches(')')
                        .split("; ")
                        .any(|note| note == "net")
                });
                let runner = runner.to_path_buf();
                let name = format!("kpt::render::{case}");
                Some(Trial::test(name, move || run(&runner, &case)).with_ignored_flag(net))
            })
            .collect()
    })
}

/// One trial that fails with `why` (the runner could not list its cases).
fn failing(why: &str) -> Vec<Trial> {
    let why = why.to_owned();
    vec![Trial::test("kpt::render::listing", move || Err(why.into()))]
}

/// Scores `case` alone; the runner's report is the failure's text.
fn run(runner: &Path, case: &str) -> crate::Outcome {
    let tmp = tempfile::tempdir()?;
    let output = Command::new("python3")
        .arg(runner)
        .args(["--bin", env!("CARGO_BIN_EXE_krender"), "--skip-net", "-v"])
        .args(["--jobs", "1", "--only", case])
        .arg("--tmp-dir")
        .arg(PathBuf::from(tmp.path()))
        .output()?;
    let report = String::from_utf8_lossy(&output.stdout).into_owned()
        + &String::from_utf8_lossy(&output.stderr);
    if report
        .lines()
        .any(|line| line.trim().starts_with("1 passed, 0 failed"))
    {
        Ok(())
    } else {
        Err(report.into())
    }
}
