//! Package lifecycle: the guarantees Porch gives packages (one writer at a
//! time, atomic changes, immutable published revisions), on the command
//! line and in a plain git repository.
//!
//! - [`draft`]: every in-place render (and `fn sink`, and `-o DIR`) writes
//!   its outcome as one atomic draft commit, with crash recovery.
//! - [`lock`]: a try-lock per package, naming the holder on conflict and
//!   taking over locks of dead processes.
//! - [`rpkg`]: package revisions in git with Porch's lifecycle state
//!   machine (`krender rpkg ...`).
//! - [`open_package`] ties them together for a command that is about to
//!   read and write a package: lock, then recover.
//!
//! Everything krender creates in or beside a package is named `.krender-*`;
//! `pkg::reader` and `pkg::tree` skip those names.

pub mod draft;
pub mod error;
pub mod lock;
pub mod rpkg;

use std::path::{Path, PathBuf};

pub use draft::{Changes, CommitSummary, Recovery};
pub use error::LifecycleError;
pub use lock::{LockHolder, PackageLock};

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

/// Opens the package tree at `root` for `command`: takes its lock (failing
/// at once if a live process holds it), checks that no live process holds
/// the lock of an enclosing package or of a subpackage (whose renders
/// write the same files), and recovers interrupted commits of the package,
/// of its subpackages and of enclosing packages (whose journals may name
/// files in this tree).
///
/// Conflicts between nested packages are found without a race: each
/// command takes its own lock *before* probing the others', so of two
/// overlapping commands at least one sees the other.
pub fn open_package(root: &Path, command: &str) -> Result<PackageSession, LifecycleError> {
    let lock = PackageLock::try_acquire(root, command)?;
    let mut recovered = Vec::new();
    for ancestor in root.ancestors().skip(1) {
        // Only a stat per level: enclosing directories can be big (`/tmp`),
        // and only a journal or a lock there can concern this tree.
        let journal = ancestor.join(draft::JOURNAL_NAME).exists();
        if journal || ancestor.join(lock::LOCK_FILE_NAME).exists() {
            probe_foreign(ancestor, &mut recovered, command)?;
        }
    }
    let mut pending = crate::pkg::tree::direct_subpackages(root).unwrap_or_default();
    while let Some(pkg) = pending.pop() {
        probe_foreign(&pkg, &mut recovered, command)?;
        pending.extend(crate::pkg::tree::direct_subpackages(&pkg).unwrap_or_default());
    }
    match draft::recover(root)? {
        Recovery::Clean => {}
        recovery => recovered.push((root.to_path_buf(), recovery)),
    }
    Ok(PackageSession { lock, recovered })
}

/// Checks another package directory: its live lock is a conflict, and an
/// interrupted commit there is recovered under its lock.
fn probe_foreign(
    dir: &Path,
    recovered: &mut Vec<(PathBuf, Recovery)>,
    command: &str,
) -> Result<(), LifecycleError> {
    let has_lock = dir.join(lock::LOCK_FILE_NAME).exists();
    if !has_lock && !draft::needs_recovery(dir) {
        return Ok(());
    }
    let foreign = PackageLock::try_acquire(dir, command)?;
    match draft::recover(dir)? {
        Recovery::Clean => {}
        recovery => recovered.push((dir.to_path_buf(), recovery)),
    }
    drop(foreign);
    Ok(())
}
