//! Porch's two render cases (`../shared/conformance/porch-render`), run
//! through the `krender` binary with the builtin apply-setters and starlark.

use crate::support::{krender_command, shared_cases, shared_dir};
use std::fs;
use std::path::Path;

/// Copies `from` into a fresh temporary directory and returns it.
fn copy_tree(from: &Path, to: &Path) {
    let Ok(entries) = fs::read_dir(from) else {
        return;
    };
    let _ = fs::create_dir_all(to);
    for entry in entries.flatten() {
        let target = to.join(entry.file_name());
        if entry.path().is_dir() {
            copy_tree(&entry.path(), &target);
        } else {
            let _ = fs::copy(entry.path(), &target);
        }
    }
}

/// The shared case `name`; `None` when the shared data is skipped.
fn porch_case(name: &str) -> Option<std::path::PathBuf> {
    let dir = shared_dir("conformance/porch-render")?.join(name);
    // A renamed case must fail, not pass with nothing compared.
    shared_cases(
        &format!("builtins_porch ({name})"),
        usize::from(dir.is_dir()),
    );
    Some(dir)
}

fn render(pkg: &Path) -> std::process::Output {
    let output = krender_command().args(["fn", "render"]).arg(pkg).output();
    match output {
        Ok(output) => output,
        Err(err) => panic!("failed to run krender: {err}"),
    }
}

#[test]
fn simple_render_applies_setters_byte_exact() {
    let Some(case) = porch_case("simple-render") else {
        return;
    };
    let temp = tempfile::tempdir().ok();
    let Some(temp) = temp else { return };
    let pkg = temp.path().join("simple-bucket");
    copy_tree(&case.join("simple-bucket"), &pkg);
    let output = render(&pkg);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let actual = fs::read_to_string(pkg.join("bucket.yaml")).unwrap_or_default();
    let expected = fs::read_to_string(case.join("expected.txt")).unwrap_or_default();
    assert_eq!(actual, expected);
}

#[test]
fn nested_packages_bfs_parent_runs_before_child() {
    let Some(case) = porch_case("nested-packages-bfs") else {
        return;
    };
    let temp = tempfile::tempdir().ok();
    let Some(temp) = temp else { return };
    let pkg = temp.path().join("nested");
    copy_tree(&case, &pkg);
    let output = render(&pkg);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let config = fs::read_to_string(pkg.join("s/configmap.yaml")).unwrap_or_default();
    assert!(config.contains("parent: parent-value"), "{config}");
    let stderr = String::from_utf8_lossy(&output.stderr);
    let running = stderr
        .lines()
        .filter(|line| line.contains("[RUNNING]") && line.contains("starlark:v0.5"))
        .count();
    assert_eq!(running, 2, "{stderr}");
}
