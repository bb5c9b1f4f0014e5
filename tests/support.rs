//! Helpers shared by the integration tests: copying fixture trees and
//! reading a tree back as bytes.

use std::collections::BTreeMap;
use std::path::Path;

/// Every file under `dir`, keyed by its `/`-separated path relative to
/// `dir`.
pub(crate) fn snapshot(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut files = BTreeMap::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(current) = pending.pop() {
        let Ok(entries) = std::fs::read_dir(&current) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                pending.push(path);
            } else if let Ok(bytes) = std::fs::read(&path) {
                let rel = path
                    .strip_prefix(dir)
                    .expect("inside")
                    .components()
                    .map(|c| c.as_os_str().to_string_lossy().into_owned())
                    .collect::<Vec<_>>()
                    .join("/");
                files.insert(rel, bytes);
            }
        }
    }
    files
}

/// Copies the tree `from` to `to` (created); `fs::copy` keeps the
/// executable bit of exec functions.
pub(crate) fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("mkdir");
    for entry in std::fs::read_dir(from).expect("read fixture") {
        let entry = entry.expect("entry");
        let target = to.join(entry.file_name());
        if entry.path().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).expect("copy");
        }
    }
}

/// Runs the krender binary with `args` in `dir`: its exit code and stderr.
pub(crate) fn krender_in(dir: &Path, args: &[&str]) -> (Option<i32>, String) {
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_krender"))
        .args(args)
        .current_dir(dir)
        .output()
        .expect("run krender");
    (
        output.status.code(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}
