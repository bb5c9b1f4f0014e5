//! Package lifecycle: the guarantees Porch gives packages (one writer at a
//! time, atomic changes, immutable published revisions), on the command
//! line and in a plain git repository.
//!
//! - every in-place render (and `fn sink`, and `-o DIR`) writes its outcome
//!   as one atomic commit (`crate::pkg::commit`); [`open_package`] runs its
//!   crash recovery.
//! - [`lock`]: a try-lock per package, naming the holder on conflict and
//!   taking over locks of dead processes.
//! - [`rpkg`]: package revisions in git with Porch's lifecycle state
//!   machine (`krender rpkg ...`).
//! - [`open_package`] ties them together for a command that is about to
//!   read and write a package: lock, then recover.
//!
//! Everything krender creates in or beside a package is named `.krender-*`;
//! `pkg::reader` and `pkg::tree` skip those names.

pub mod error;
pub mod lock;
pub mod rpkg;

use std::path::{Path, PathBuf};

use crate::pkg::commit;
pub use crate::pkg::commit::{Changes, CommitSummary, Durability, Recovery};
pub use error::LifecycleError;
pub use lock::{LockHolder, LockMode, PackageLock};

/// A package opened by a command that reads and writes it: the held lock
/// and what recovery found. Dropping it releases the lock.
#[derive(Debug)]
pub struct PackageSession {
    /// The package lock (released on drop).
    pub lock: PackageLock,
    /// Each package directory that recovery changed, with what it did
    /// (empty in the normal case).
    pub recovered: Vec<(PathBuf, Recovery)>,
}

/// Opens the package tree at `root` for `command` as a writer: see
/// [`open_package_mode`].
pub fn open_package(root: &Path, command: &str) -> Result<PackageSession, LifecycleError> {
    open_package_mode(root, command, LockMode::Exclusive, Durability::Flushed)
}

/// Opens the package tree at `root` for `command`: takes its lock in `mode`
/// (failing at once if a live process holds it in a conflicting mode),
/// checks the same for the locks of enclosing packages and subpackages
/// (whose renders write the same files), and recovers interrupted commits
/// of the package, of its subpackages and of enclosing packages (whose
/// journals may name files in this tree). Recovery writes, so it runs
/// under an exclusive lock even for a reader.
///
/// Conflicts between nested packages are found without a race: each
/// command takes its own lock *before* probing the others', so of two
/// overlapping commands at least one sees the other.
pub fn open_package_mode(
    root: &Path,
    command: &str,
    mode: LockMode,
    durability: Durability,
) -> Result<PackageSession, LifecycleError> {
    let mut recovered = Vec::new();
    if mode == LockMode::Shared && commit::needs_recovery(root) {
        let writer = PackageLock::try_acquire(root, command)?;
        match commit::recover(root, durability)? {
            Recovery::Clean => {}
            recovery => recovered.push((root.to_path_buf(), recovery)),
        }
        drop(writer);
    }
    let lock = PackageLock::try_acquire_mode(root, command, mode)?;
    for ancestor in root.ancestors().skip(1) {
        // Only a stat per level: enclosing directories can be big (`/tmp`),
        // and only a journal or a lock there can concern this tree.
        let journal = ancestor.join(commit::JOURNAL_NAME).exists();
        if journal || ancestor.join(lock::LOCK_FILE_NAME).exists() {
            probe_foreign(ancestor, &mut recovered, command, mode, durability)?;
        }
    }
    for pkg in subpackages_with_leftovers(root) {
        probe_foreign(&pkg, &mut recovered, command, mode, durability)?;
    }
    if mode == LockMode::Exclusive {
        match commit::recover(root, durability)? {
            Recovery::Clean => {}
            recovery => recovered.push((root.to_path_buf(), recovery)),
        }
    }
    Ok(PackageSession { lock, recovered })
}

/// The subpackages (directories with a Kptfile) below `root` that hold a
/// `.krender-*` entry: a lock, a journal or a stage. One `read_dir` per
/// directory and no `stat` calls (the entry types come with the listing),
/// because this runs before every render, including the warm ones that
/// are answered in milliseconds. Symbolic links are not followed, as
/// kpt's walk does not follow them; `.git` is skipped.
fn subpackages_with_leftovers(root: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut pending = vec![root.to_path_buf()];
    while let Some(dir) = pending.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        let (mut is_package, mut has_leftovers) = (false, false);
        for entry in entries.flatten() {
            let name = entry.file_name();
            let name = name.to_string_lossy();
            if commit::is_reserved_name(&name) {
                has_leftovers = true;
                continue;
            }
            if name == crate::pkg::kptfile::KPTFILE_NAME {
                is_package = true;
            } else if name != ".git" && entry.file_type().is_ok_and(|kind| kind.is_dir()) {
                pending.push(entry.path());
            }
        }
        if is_package && has_leftovers && dir != root {
            found.push(dir);
        }
    }
    found.sort();
    found
}

/// Checks another package directory: its live lock in a conflicting mode
/// is a conflict, and an interrupted commit there is recovered under its
/// exclusive lock.
fn probe_foreign(
    dir: &Path,
    recovered: &mut Vec<(PathBuf, Recovery)>,
    command: &str,
    mode: LockMode,
    durability: Durability,
) -> Result<(), LifecycleError> {
    if commit::needs_recovery(dir) {
        let writer = PackageLock::try_acquire(dir, command)?;
        match commit::recover(dir, durability)? {
            Recovery::Clean => {}
            recovery => recovered.push((dir.to_path_buf(), recovery)),
        }
        drop(writer);
    }
    if dir.join(lock::LOCK_FILE_NAME).exists() {
        drop(PackageLock::try_acquire_mode(dir, command, mode)?);
    }
    Ok(())
}
