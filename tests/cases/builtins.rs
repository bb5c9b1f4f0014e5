//! Byte-exact builtin outputs, one test per case: every
//! `fixtures/builtins/<function>/<case>/` holds the ResourceList kpt writes
//! to the function (`input.yaml`) and what the catalog image writes back
//! (`expected.yaml`, plus `expected-stderr.txt` and `expected-exit-code`
//! when they are not empty / 0). Set `KRENDER_BLESS=1` to rewrite the
//! expectations after reviewing a change.

use std::fs;
use std::path::{Path, PathBuf};

use krender::runtime::builtin::Builtin;
use libtest_mimic::Trial;

/// Every fixture case, with the builtin its directory names.
fn cases() -> Vec<(Builtin, PathBuf)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/builtins");
    let mut cases = Vec::new();
    for function in fs::read_dir(&root).into_iter().flatten().flatten() {
        let name = function.file_name().to_string_lossy().into_owned();
        let Some(builtin) = Builtin::from_name(&name) else {
            continue;
        };
        for case in crate::case_dirs(&function.path(), "input.yaml") {
            cases.push((builtin, case));
        }
    }
    cases.sort_by(|a, b| a.1.cmp(&b.1));
    cases
}

/// One trial per fixture case, named `builtins::<function>::<case>`.
pub(crate) fn trials() -> Vec<Trial> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/builtins");
    let trials = cases()
        .into_iter()
        .map(|(builtin, dir)| {
            let name = format!("builtins::{}::{}", builtin.name(), crate::name_of(&dir));
            Trial::test(name, move || run(builtin, &dir))
        })
        .collect();
    crate::non_empty("builtins", &root, trials)
}

/// Runs the builtin on the case's input and compares all three outputs.
fn run(builtin: Builtin, dir: &Path) -> crate::Outcome {
    let input = fs::read(dir.join("input.yaml"))?;
    let response = builtin.evaluate_bytes(&input, None);
    let code = if response.exit_code == 0 {
        Vec::new()
    } else {
        format!("{}\n", response.exit_code).into_bytes()
    };
    let problems: Vec<String> = [
        ("expected.yaml", &response.stdout),
        ("expected-stderr.txt", &response.stderr),
        ("expected-exit-code", &code),
    ]
    .into_iter()
    .filter_map(|(file, actual)| check(&dir.join(file), actual))
    .collect();
    if problems.is_empty() {
        Ok(())
    } else {
        Err(problems.join("\n").into())
    }
}

/// What differs between the file at `path` (absent: empty) and `actual`;
/// with `KRENDER_BLESS` set, `actual` is written there instead.
fn check(path: &Path, actual: &[u8]) -> Option<String> {
    let expected = fs::read(path).unwrap_or_default();
    if expected == actual {
        return None;
    }
    if std::env::var_os("KRENDER_BLESS").is_some() {
        let written = if actual.is_empty() {
            fs::remove_file(path)
        } else {
            fs::write(path, actual)
        };
        return written
            .err()
            .map(|error| format!("{}: {error}", path.display()));
    }
    let expected = String::from_utf8_lossy(&expected);
    let actual = String::from_utf8_lossy(actual);
    Some(format!(
        "{}:\n{}",
        path.display(),
        crate::diff(&expected, &actual)
    ))
}
