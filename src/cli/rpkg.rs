//! The lifecycle commands: `krender rpkg ...` (package revisions in git),
//! and the lock-and-recover step other commands run before they touch a
//! package.

use std::io::Write;
use std::path::Path;

use crate::hydrate::Report;
use crate::lifecycle::{self, LifecycleError, PackageSession, Recovery};

/// Locks the package a render reads (and, in place, writes) and recovers
/// interrupted commits first. A render that only reads (`-o ...`) of a
/// package krender cannot lock (a read-only directory) still runs,
/// unlocked; a package held by a live process is always a conflict.
pub(super) fn open_for_render(
    root: &Path,
    in_place: bool,
    err: &mut dyn Write,
) -> Result<Option<PackageSession>, Report> {
    if !root.is_dir() {
        // kpt's own error for a missing package comes next.
        return Ok(None);
    }
    let command = std::env::args().collect::<Vec<_>>().join(" ");
    match lifecycle::open_package(root, &command) {
        Ok(session) => {
            for (dir, recovery) in &session.recovered {
                let what = match recovery {
                    Recovery::Clean => continue,
                    Recovery::RolledBack { .. } => "removed the staging area of".to_owned(),
                    Recovery::RolledForward(summary) => format!(
                        "completed ({} written, {} deleted)",
                        summary.written, summary.deleted
                    ),
                };
                let _ = writeln!(
                    err,
                    "krender: {what} an interrupted commit in {}",
                    dir.display()
                );
            }
            Ok(Some(session))
        }
        Err(LifecycleError::Io { .. }) if !in_place => Ok(None),
        Err(error) => Err(Report::Error(error.to_string())),
    }
}
