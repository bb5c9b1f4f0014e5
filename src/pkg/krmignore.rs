//! `.krmignore`: the per-package ignore file kpt honours when reading a
//! package, with gitignore semantics (via the `ignore` crate's
//! `GitignoreBuilder`, as kyaml uses a gitignore matcher).
//!
//! Only the file in the package's own root applies; subpackages are read
//! separately with their own file.

use std::path::{Path, PathBuf};

use ignore::gitignore::{Gitignore, GitignoreBuilder};

/// The ignore file's name.
pub const FILE_NAME: &str = ".krmignore";

/// A compiled `.krmignore` for one package root.
#[derive(Clone, Debug)]
pub struct KrmIgnore {
    matcher: Option<Gitignore>,
}

/// A `.krmignore` that could not be read or compiled.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error, miette::Diagnostic)]
#[error("{}: {message}", path.display())]
#[diagnostic(code(krender::pkg::krmignore_invalid))]
pub struct KrmIgnoreError {
    /// The ignore file.
    pub path: PathBuf,
    /// What went wrong.
    pub message: String,
}

impl KrmIgnore {
    /// Matches nothing.
    pub fn empty() -> KrmIgnore {
        KrmIgnore { matcher: None }
    }

    /// Loads `<package_root>/.krmignore` if it exists.
    pub fn load(package_root: &Path) -> Result<KrmIgnore, KrmIgnoreError> {
        let path = package_root.join(FILE_NAME);
        match std::fs::read_to_string(&path) {
            Ok(text) => {
                KrmIgnore::from_text(package_root, &text).map_err(|message| KrmIgnoreError {
                    path: path.clone(),
                    message,
                })
            }
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(KrmIgnore::empty()),
            Err(error) => Err(KrmIgnoreError {
                path,
                message: error.to_string(),
            }),
        }
    }

    /// Compiles ignore rules given as text, rooted at `package_root`.
    pub fn from_text(package_root: &Path, text: &str) -> Result<KrmIgnore, String> {
        let mut builder = GitignoreBuilder::new(package_root);
        for line in text.lines() {
            builder
                .add_line(None, line)
                .map_err(|error| error.to_string())?;
        }
        let matcher = builder.build().map_err(|error| error.to_string())?;
        Ok(KrmIgnore {
            matcher: Some(matcher),
        })
    }

    /// True when `path` (absolute, under the package root, or relative to
    /// it) or one of its parent directories is ignored.
    pub fn is_ignored(&self, path: &Path, is_dir: bool) -> bool {
        let Some(matcher) = &self.matcher else {
            return false;
        };
        let relative = path.strip_prefix(matcher.path()).unwrap_or(path);
        if relative.as_os_str().is_empty() {
            return false;
        }
        matcher
            .matched_path_or_any_parents(relative, is_dir)
            .is_ignore()
    }
}

#[cfg(test)]
mod tests {
    use super::KrmIgnore;
    use std::path::Path;

    #[test]
    fn gitignore_semantics() {
        let root = Path::new("/pkg");
        let ignore = KrmIgnore::from_text(
            root,
            "# comment\nbuild/\n*.tmp.yaml\n!keep.tmp.yaml\n/top.yaml\n",
        )
        .unwrap();
        assert!(ignore.is_ignored(Path::new("/pkg/build/x.yaml"), false));
        assert!(ignore.is_ignored(Path::new("/pkg/build"), true));
        assert!(ignore.is_ignored(Path::new("/pkg/a/b.tmp.yaml"), false));
        assert!(!ignore.is_ignored(Path::new("/pkg/keep.tmp.yaml"), false));
        assert!(ignore.is_ignored(Path::new("/pkg/top.yaml"), false));
        assert!(!ignore.is_ignored(Path::new("/pkg/sub/top.yaml"), false));
        assert!(!ignore.is_ignored(Path::new("/pkg/ok.yaml"), false));
    }
}
