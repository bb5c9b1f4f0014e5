//! Package tree discovery: which directories below a package are its direct
//! subpackages (the nearest directories holding a Kptfile), in the order
//! kpt's walk finds them (lexical by name, depth-first).

use std::path::{Path, PathBuf};

use super::kptfile::KPTFILE_NAME;

/// `path` with `.` and `..` components resolved lexically, without the
/// file system (kpt does not resolve symbolic links in package paths).
pub(crate) fn lexical(path: &Path) -> PathBuf {
    let mut clean = PathBuf::new();
    for component in path.components() {
        match component {
            std::path::Component::CurDir => {}
            std::path::Component::ParentDir => {
                clean.pop();
            }
            other => clean.push(other),
        }
    }
    clean
}

/// The direct subpackages of the package at `dir`: every directory below it
/// that contains a Kptfile and is not inside another such directory.
/// Symbolic links are not followed, as kpt's walk does not follow them.
pub fn direct_subpackages(dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    let mut found = Vec::new();
    walk(dir, &mut found)?;
    Ok(found)
}

fn walk(dir: &Path, found: &mut Vec<PathBuf>) -> std::io::Result<()> {
    let mut entries: Vec<(Vec<u8>, PathBuf)> = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let file_type = entry.file_type()?;
        if !file_type.is_dir() {
            continue;
        }
        let name = entry.file_name();
        // krender's own staging directories (`.krender-*`) are no packages.
        if name
            .to_str()
            .is_some_and(crate::pkg::commit::is_reserved_name)
        {
            continue;
        }
        entries.push((name.as_encoded_bytes().to_vec(), entry.path()));
    }
    // Go's walk sorts names byte-wise.
    entries.sort();
    for (_, path) in entries {
        if path.join(KPTFILE_NAME).is_file() {
            found.push(path);
        } else {
            walk(&path, found)?;
        }
    }
    Ok(())
}

/// The name kpt shows for a package in `Package "..."` lines: the root's
/// directory name, then the path below it.
pub fn display_path(root: &Path, pkg: &Path) -> String {
    let root_name = root
        .file_name()
        .map(|name| name.to_string_lossy().into_owned())
        .unwrap_or_else(|| root.display().to_string());
    match pkg.strip_prefix(root) {
        Ok(rel) if rel.as_os_str().is_empty() => root_name,
        Ok(rel) => format!("{root_name}/{}", rel.to_string_lossy()),
        Err(_) => pkg.display().to_string(),
    }
}

/// The package path relative to the root with a `./` prefix, as kpt's error
/// chains show it once the root path is replaced by `.`.
pub fn relative_to_root(root: &Path, pkg: &Path) -> String {
    match pkg.strip_prefix(root) {
        Ok(rel) if rel.as_os_str().is_empty() => String::new(),
        Ok(rel) => rel.to_string_lossy().into_owned(),
        Err(_) => pkg.display().to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_nearest_kptfiles_in_order() {
        let temp = tempfile::tempdir().expect("tempdir");
        let root = temp.path();
        for dir in ["b", "a/inner", "c/x", "c/x/deeper", "plain/sub"] {
            std::fs::create_dir_all(root.join(dir)).expect("mkdir");
        }
        for kptfile in [
            "b/Kptfile",
            "a/inner/Kptfile",
            "c/x/Kptfile",
            "c/x/deeper/Kptfile",
        ] {
            std::fs::write(root.join(kptfile), "").expect("write");
        }
        let found: Vec<String> = direct_subpackages(root)
            .expect("walk")
            .iter()
            .map(|p| relative_to_root(root, p))
            .collect();
        assert_eq!(found, vec!["a/inner", "b", "c/x"]);
    }

    #[test]
    fn display_paths() {
        let root = Path::new("/tmp/x/app");
        assert_eq!(display_path(root, root), "app");
        assert_eq!(display_path(root, &root.join("db")), "app/db");
    }
}
