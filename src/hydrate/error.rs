//! Render failures in the two shapes kpt shows them: the error chain kpt
//! records in the root Kptfile's `Rendered` condition (`pkg.render: pkg
//! ./db:\n\tpipeline.run: ...`, root path replaced by `.` when written), and
//! the line the CLI prints (`Error: ...`, a bare `Kptfile is invalid:`
//! block, or nothing when the failure was already reported).

use std::path::Path;

use crate::pkg::kptfile::KptfileError;
use crate::pkg::reader::SourceLocation;

/// How the CLI reports a failure at the end of the run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Report {
    /// The function's output was already printed (`[FAIL]`, `Exit code:`).
    Handled,
    /// `Error: <text>`.
    Error(String),
    /// The text alone (kpt prints Kptfile validation errors this way).
    Plain(String),
    /// `error: <text>`: an error kpt's command returns as a plain Go error
    /// (its flag and argument checks, and everything `fn eval`, `fn source`
    /// and `fn sink` fail with), which kpt's `main` leaves to kubectl's
    /// handler.
    Command(String),
}

impl Report {
    /// The report for a Kptfile error.
    pub fn kptfile(error: &KptfileError) -> Report {
        match error {
            KptfileError::Invalid { .. } => Report::Plain(error.to_string()),
            _ => Report::Error(error.to_string()),
        }
    }

    /// The text written to stderr (with kpt's trailing space before the newline).
    pub fn stderr_text(&self) -> Option<String> {
        match self {
            Report::Handled => None,
            Report::Error(text) => Some(format!("Error: {text} \n")),
            Report::Plain(text) => Some(format!("{text} \n")),
            Report::Command(text) if text.starts_with("error: ") => Some(format!("{text}\n")),
            Report::Command(text) => Some(format!("error: {text}\n")),
        }
    }
}

/// A failed render.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{chain}")]
pub struct HydrateError {
    /// kpt's error chain text with absolute package paths.
    pub chain: String,
    /// What the CLI prints.
    pub report: Report,
    /// The place in a file the error points at, if it is one (a YAML or
    /// Kptfile error), for diagnostics that show the line.
    pub location: Option<Box<SourceLocation>>,
}

impl HydrateError {
    /// The chain as written into the root Kptfile: the root path becomes `.`.
    pub fn status_message(&self, root: &Path) -> String {
        self.chain.replace(&root.display().to_string(), ".")
    }

    /// `pkg.render: pkg <pkg>:\n\tpipeline.run: <message>` — a pipeline
    /// failure inside `pkg`, reported under `outer` (the same package in
    /// depth-first order, the root in breadth-first order).
    pub fn pipeline(outer: &Path, pkg: &Path, message: &str, report: Report) -> HydrateError {
        let inner = if outer == pkg {
            format!("pipeline.run: {message}")
        } else {
            format!("pipeline.run: pkg {}: {message}", pkg.display())
        };
        HydrateError {
            chain: format!("pkg.render: pkg {}:\n\t{inner}", outer.display()),
            report,
            location: None,
        }
    }

    /// `pkg.render: pkg <pkg>: <message>` — a failure that is not a kpt error.
    pub fn plain(pkg: &Path, message: &str, report: Report) -> HydrateError {
        HydrateError {
            chain: format!("pkg.render: pkg {}: {message}", pkg.display()),
            report,
            location: None,
        }
    }

    /// The error, pointing at `location`.
    pub fn at(self, location: Option<SourceLocation>) -> HydrateError {
        HydrateError {
            location: location.map(Box::new),
            ..self
        }
    }

    /// A subpackage Kptfile that cannot be read, found while listing the
    /// subpackages of `parent`.
    pub fn subpackage_kptfile(parent: &Path, sub: &Path, error: &KptfileError) -> HydrateError {
        let details = match error {
            KptfileError::Unreadable { details, .. } => details.clone(),
            other => other.to_string(),
        };
        HydrateError {
            chain: format!(
                "pkg.render: pkg {}:\n\tpkg.Subpackages: pkg {}: error reading Kptfile at {:?}: {details}",
                parent.display(),
                sub.display(),
                sub.display().to_string()
            ),
            report: Report::kptfile(error),
            location: error.location().map(Box::new),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chains_match_kpt() {
        let root = Path::new("/tmp/p/app");
        let same = HydrateError::pipeline(root, root, "already handled error", Report::Handled);
        assert_eq!(
            same.status_message(root),
            "pkg.render: pkg .:\n\tpipeline.run: already handled error"
        );
        let bfs = HydrateError::pipeline(
            root,
            &root.join("level1"),
            "already handled error",
            Report::Handled,
        );
        assert_eq!(
            bfs.status_message(root),
            "pkg.render: pkg .:\n\tpipeline.run: pkg ./level1: already handled error"
        );
        let sub = HydrateError::subpackage_kptfile(
            root,
            &root.join("db"),
            &KptfileError::Unreadable {
                dir: root.join("db"),
                details: "yaml: line 10: bad".into(),
                location: None,
            },
        );
        assert_eq!(
            sub.status_message(root),
            "pkg.render: pkg .:\n\tpkg.Subpackages: pkg ./db: error reading Kptfile at \"./db\": yaml: line 10: bad"
        );
        assert_eq!(
            Report::Error("x".into()).stderr_text().as_deref(),
            Some("Error: x \n")
        );
    }
}
