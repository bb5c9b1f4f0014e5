//! Byte-exact builtin outputs: every `fixtures/builtins/<function>/<case>/`
//! holds the ResourceList kpt writes to the function (`input.yaml`) and what
//! the catalog image writes back (`expected.yaml`, plus `expected-stderr.txt`
//! and `expected-exit-code` when they are not empty / 0). Set
//! `KRENDER_BLESS=1` to rewrite the expectations after reviewing a change.

use std::fs;
use std::path::{Path, PathBuf};

use krender::runtime::builtin::Builtin;

fn cases() -> Vec<(Builtin, PathBuf)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/builtins");
    let mut cases = Vec::new();
    let Ok(functions) = fs::read_dir(&root) else {
        return cases;
    };
    for function in functions.flatten() {
        let name = function.file_name().to_string_lossy().into_owned();
        let Some(builtin) = Builtin::from_name(&name) else {
            continue;
        };
        let Ok(dirs) = fs::read_dir(function.path()) else {
            continue;
        };
        for case in dirs.flatten() {
            if case.path().join("input.yaml").is_file() {
                cases.push((builtin, case.path()));
            }
        }
    }
    cases.sort_by(|a, b| a.1.cmp(&b.1));
    cases
}

fn check(path: &Path, actual: &[u8], failures: &mut Vec<String>) {
    let bless = std::env::var_os("KRENDER_BLESS").is_some();
    let expected = fs::read(path).unwrap_or_default();
    if expected == actual {
        return;
    }
    if bless {
        if actual.is_empty() {
            let _ = fs::remove_file(path);
        } else if let Err(err) = fs::write(path, actual) {
            failures.push(format!("{}: {err}", path.display()));
        }
        return;
    }
    let expected = String::from_utf8_lossy(&expected);
    let actual = String::from_utf8_lossy(actual);
    let diff = similar::TextDiff::from_lines(expected.as_ref(), actual.as_ref())
        .unified_diff()
        .header("expected", "actual")
        .to_string();
    failures.push(format!("{}:\n{diff}", path.display()));
}

#[test]
fn builtin_outputs_are_byte_exact() {
    let cases = cases();
    assert!(!cases.is_empty(), "no fixtures found");
    let mut failures = Vec::new();
    for (builtin, dir) in &cases {
        let input = fs::read(dir.join("input.yaml")).unwrap_or_default();
        let response = builtin.evaluate_bytes(&input, None);
        check(&dir.join("expected.yaml"), &response.stdout, &mut failures);
        check(
            &dir.join("expected-stderr.txt"),
            &response.stderr,
            &mut failures,
        );
        let code = if response.exit_code == 0 {
            Vec::new()
        } else {
            format!("{}\n", response.exit_code).into_bytes()
        };
        check(&dir.join("expected-exit-code"), &code, &mut failures);
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
