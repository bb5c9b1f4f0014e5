//! Atomic commits of a package's files: its new state appears all at once.
//!
//! (`lifecycle` builds Porch's draft lifecycle on this; the package writer,
//! `fn sink` and `-o DIR` use it directly.)
//!
//! A render (or `fn sink`) first collects its whole outcome as [`Changes`]
//! (files to write, files to delete) and then [`commit`]s them:
//!
//! 1. **Journal.** One file, `<root>/.krender-journal-<pid>-<nonce>`, takes
//!    the list of writes and deletes and the new bytes of every written
//!    file, and is flushed. Nothing the package shows has changed yet; a
//!    crash here leaves only that file, which recovery deletes (roll back).
//! 2. **Commit point.** The journal is renamed (no-replace) to
//!    `<root>/.krender-journal`. That rename is the single atomic step that
//!    decides between old and new.
//! 3. **Roll forward.** Each written file is rewritten in place from the
//!    journal's bytes, deleted files are unlinked, everything is flushed,
//!    and finally the journal is removed.
//!
//! [`recover`] runs before every krender command reads or writes a package
//! (under the package lock): with a journal it redoes step 3, which is
//! idempotent (rewriting a file with the same bytes); without one it
//! deletes leftover journals. So after a `kill -9` at any instant, the next
//! krender command sees exactly the complete old or the complete new
//! package. (A process that is not krender and looks at the directory
//! *during* the few milliseconds of step 3, or after a crash in it and
//! before the next krender command, can see a mix, as it can while kpt
//! writes; the journal says how it ends.)
//!
//! Files are rewritten in place, as kpt writes them: a written file keeps
//! its inode, permissions and hard links, and a commit creates one new
//! file (the journal) however many it writes. Staging a copy of each file
//! and renaming it over the target cost a new inode and a freed one per
//! file, which dominated an in-place render on filesystems slow to
//! allocate inodes. A symbolic link is replaced by a file (never written
//! through), and a file krender may not write (read-only) is replaced by a
//! new one with the same mode, as a rename would.
//!
//! Why not build a whole new package directory and swap it in with
//! `renameat2(RENAME_EXCHANGE)`? That is atomic even for outside readers,
//! but it replaces the package directory's inode: a shell whose working
//! directory is the package (`krender fn render .`, the common case) would
//! be left in a deleted directory and keep listing stale files, editors and
//! watchers holding the directory would lose it, and every unrelated file in
//! the package (a `.git`, binaries) would need copying or hard-linking.
//! kpt edits files in place, and so does the journal: unchanged files are
//! never touched, and only changed files pay for staging.
//!
//! The flushes make the same guarantee hold across a power loss, not only a
//! process crash: the journal is durable before its rename, and the
//! rewritten files are durable before the journal is removed. On Linux the
//! latter is one `syncfs` of the package's filesystem, so a commit costs a
//! constant number of flushes, not one fsync per file and directory;
//! elsewhere every file and directory is fsynced, on several threads.
//!
//! `-o DIR` output uses the simpler form [`commit_new_dir`]: the whole
//! directory is staged beside its destination as `.krender-out-*` and
//! renamed into place (no-replace), so `DIR` either does not exist or is
//! complete.
//!
//! Every name krender creates starts with `.krender-` ([`RESERVED_PREFIX`]);
//! the package reader and tree walk skip such names, and a write whose path
//! starts with one is refused.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Component, Path, PathBuf};

use serde::{Deserialize, Serialize};

/// A commit or recovery failure, naming the path it is about.
#[derive(Debug, thiserror::Error, miette::Diagnostic)]
pub enum CommitError {
    /// A file or directory operation failed.
    #[error("{}: {message}", path.display())]
    #[diagnostic(code(krender::commit::io))]
    Io {
        /// The path operated on.
        path: PathBuf,
        /// The operating system's message.
        message: String,
    },
    /// A write would replace or escape into something the commit cannot
    /// write (a directory, a path through a file, a reserved name).
    #[error("{}: cannot write {relative}: {reason}", root.display())]
    #[diagnostic(code(krender::commit::invalid_write))]
    InvalidWrite {
        /// The package root.
        root: PathBuf,
        /// The package-relative path.
        relative: String,
        /// Why.
        reason: String,
    },
    /// A commit journal exists but cannot be read; recovery refuses to guess.
    #[error("{}: unreadable commit journal: {message}", path.display())]
    #[diagnostic(
        code(krender::commit::journal_corrupt),
        help("the package may be half-updated; inspect it, then delete the journal")
    )]
    JournalCorrupt {
        /// The journal file.
        path: PathBuf,
        /// The parse error.
        message: String,
    },
    /// The output directory of `-o DIR` appeared while the render staged it.
    #[error("directory {} already exists, please delete the directory and retry", path.display())]
    #[diagnostic(code(krender::commit::output_exists))]
    OutputExists {
        /// The output directory.
        path: PathBuf,
    },
}

impl CommitError {
    /// A [`CommitError::Io`] for `path`.
    pub(crate) fn io(path: impl Into<PathBuf>, error: &std::io::Error) -> Self {
        CommitError::Io {
            path: path.into(),
            message: error.to_string(),
        }
    }
}

/// Prefix of every file or directory krender creates inside or beside a
/// package.
pub const RESERVED_PREFIX: &str = ".krender-";
/// Prefix of the staging directory of a commit by an earlier krender,
/// which staged copies of the files: recovery removes such leftovers.
pub const STAGE_PREFIX: &str = ".krender-stage-";
/// Name of the commit journal inside the package root.
pub const JOURNAL_NAME: &str = ".krender-journal";
/// Prefix of a journal being written (before the commit point).
const JOURNAL_TEMP_PREFIX: &str = ".krender-journal-";
/// Prefix of a `-o DIR` staging directory beside `DIR`.
pub const OUT_STAGE_PREFIX: &str = ".krender-out-";

/// True for names krender reserves for its own staging and lock files.
pub fn is_reserved_name(name: &str) -> bool {
    name.starts_with(RESERVED_PREFIX)
}

/// A package's pending new state: files to write (whole contents) and files
/// to delete, by `/`-separated package-relative path.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Changes {
    writes: BTreeMap<String, Vec<u8>>,
    deletes: BTreeSet<String>,
}

impl Changes {
    /// Records that `relative` gets `bytes` (replacing a pending delete).
    pub fn write(&mut self, relative: impl Into<String>, bytes: impl Into<Vec<u8>>) {
        let relative = relative.into();
        self.deletes.remove(&relative);
        self.writes.insert(relative, bytes.into());
    }

    /// Records that `relative` is deleted (replacing a pending write).
    pub fn delete(&mut self, relative: impl Into<String>) {
        let relative = relative.into();
        self.writes.remove(&relative);
        self.deletes.insert(relative);
    }

    /// True when committing would change nothing.
    pub fn is_empty(&self) -> bool {
        self.writes.is_empty() && self.deletes.is_empty()
    }

    /// The pending writes.
    pub fn writes(&self) -> &BTreeMap<String, Vec<u8>> {
        &self.writes
    }

    /// The pending deletes.
    pub fn deletes(&self) -> &BTreeSet<String> {
        &self.deletes
    }

    /// The bytes `relative` will hold after the commit: the pending write,
    /// nothing for a pending delete, else what is on disk now.
    pub fn read(&self, root: &Path, relative: &str) -> Option<Vec<u8>> {
        if let Some(bytes) = self.writes.get(relative) {
            return Some(bytes.clone());
        }
        if self.deletes.contains(relative) {
            return None;
        }
        std::fs::read(root.join(relative)).ok()
    }
}

/// The journal's header: what the roll-forward must do. Serialized as
/// JSON because paths may hold any character but a NUL. On disk:
/// [`JOURNAL_MAGIC`], the header's length (u64, little-endian), the header,
/// then the bytes of every write in order.
#[derive(Debug, Serialize, Deserialize)]
struct Journal {
    version: u32,
    /// Package-relative path and length of each write.
    writes: Vec<(String, u64)>,
    deletes: Vec<String>,
}

/// The first bytes of a journal.
const JOURNAL_MAGIC: &[u8; 4] = b"KRJ2";

/// What a commit (or a recovery's roll-forward) changed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CommitSummary {
    /// Files written.
    pub written: usize,
    /// Files deleted.
    pub deleted: usize,
}

/// What [`recover`] found and did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Recovery {
    /// Nothing was left over.
    Clean,
    /// Stages of commits that never reached their commit point were removed;
    /// the package is in its old state.
    RolledBack {
        /// How many leftovers were removed.
        removed: usize,
    },
    /// An interrupted commit was completed; the package is in its new state.
    RolledForward(CommitSummary),
}

/// Commits `changes` to the package at `root` as described in the module
/// doc: on success the whole new state is in place; on an error before the
/// commit point nothing changed and nothing is left behind. The caller
/// should hold the package lock (see [`super::lock`]); without it, a commit
/// still refuses to overwrite another commit's journal.
pub fn commit(
    root: &Path,
    changes: &Changes,
    durability: Durability,
) -> Result<CommitSummary, CommitError> {
    if changes.is_empty() {
        return Ok(CommitSummary::default());
    }
    let _span = tracing::info_span!("commit", writes = changes.writes.len()).entered();
    let mut checked_parents = BTreeSet::new();
    for relative in changes.writes.keys() {
        check_write_target(root, relative, &mut checked_parents)?;
    }
    for relative in &changes.deletes {
        check_relative(root, relative)?;
    }
    std::fs::create_dir_all(root).map_err(|error| CommitError::io(root, &error))?;
    let journal = journal_of(changes);
    let temp_journal = root.join(format!("{JOURNAL_TEMP_PREFIX}{}", transaction_id()));
    if let Err(error) = publish(root, &temp_journal, &journal, changes, durability) {
        let _ = std::fs::remove_file(&temp_journal);
        return Err(error);
    }
    let writes: Vec<(&str, &[u8])> = changes
        .writes
        .iter()
        .map(|(relative, bytes)| (relative.as_str(), bytes.as_slice()))
        .collect();
    roll_forward(root, &writes, &journal.deletes, durability)
}

/// Steps 1 and 2: write the journal, then publish it (the commit point).
fn publish(
    root: &Path,
    temp_journal: &Path,
    journal: &Journal,
    changes: &Changes,
    durability: Durability,
) -> Result<(), CommitError> {
    let io = |error: std::io::Error| CommitError::io(temp_journal, &error);
    fault(temp_journal).map_err(io)?;
    let file = std::fs::File::create(temp_journal).map_err(io)?;
    let mut out = std::io::BufWriter::with_capacity(1 << 20, file);
    fault(temp_journal).map_err(io)?;
    write_journal(&mut out, journal, changes).map_err(io)?;
    let file = out.into_inner().map_err(|error| io(error.into_error()))?;
    fault(temp_journal).map_err(io)?;
    if durability.flushes() {
        file.sync_all().map_err(io)?;
    }
    crash_point();
    let journal_path = root.join(JOURNAL_NAME);
    fault(&journal_path)
        .and_then(|()| rename_no_replace(temp_journal, &journal_path))
        .map_err(|error| {
            if error.kind() == std::io::ErrorKind::AlreadyExists {
                CommitError::Io {
                    path: journal_path.clone(),
                    message: "another commit is in progress or was interrupted; \
                          the next `krender fn render` of this package recovers it"
                        .to_owned(),
                }
            } else {
                CommitError::io(&journal_path, &error)
            }
        })?;
    // Past the commit point: whatever fails from here on leaves the journal
    // for recovery to finish, so nothing below belongs to `publish`.
    Ok(())
}

/// Writes the journal of `changes` (its header `journal`) to `out`.
fn write_journal(
    out: &mut impl std::io::Write,
    journal: &Journal,
    changes: &Changes,
) -> std::io::Result<()> {
    let header = serde_json::to_vec(journal).map_err(std::io::Error::other)?;
    out.write_all(JOURNAL_MAGIC)?;
    out.write_all(&(header.len() as u64).to_le_bytes())?;
    out.write_all(&header)?;
    for bytes in changes.writes.values() {
        out.write_all(bytes)?;
    }
    Ok(())
}

/// The journal header of `changes`.
fn journal_of(changes: &Changes) -> Journal {
    Journal {
        version: 2,
        writes: changes
            .writes
            .iter()
            .map(|(relative, bytes)| (relative.clone(), bytes.len() as u64))
            .collect(),
        deletes: changes.deletes.iter().cloned().collect(),
    }
}

/// The bytes of the journal that commits `changes`: what a commit writes
/// before its commit point. Placed at `<root>/.krender-journal` it is an
/// interrupted commit that [`recover`] completes (tests build them so).
pub fn journal_bytes(changes: &Changes) -> Vec<u8> {
    let mut bytes = Vec::new();
    // Writing to a Vec cannot fail.
    let _ = write_journal(&mut bytes, &journal_of(changes), changes);
    bytes
}

/// Step 3, idempotent: also what recovery runs for a found journal.
fn roll_forward(
    root: &Path,
    writes: &[(&str, &[u8])],
    deletes: &[String],
    durability: Durability,
) -> Result<CommitSummary, CommitError> {
    // The journal's directory entry is durable before anything it names
    // changes.
    fault(root).map_err(|error| CommitError::io(root, &error))?;
    sync_dir(root, durability)?;
    crash_point();
    let mut parents = BTreeSet::new();
    for (relative, _) in writes {
        let parent = root.join(relative).parent().unwrap_or(root).to_path_buf();
        if parents.insert(parent.clone()) {
            fault(&parent)
                .and_then(|()| std::fs::create_dir_all(&parent))
                .map_err(|error| CommitError::io(&parent, &error))?;
        }
    }
    write_files(
        root,
        writes,
        !WHOLE_FILESYSTEM_FLUSH && durability.flushes(),
    )?;
    let mut summary = CommitSummary {
        written: writes.len(),
        deleted: 0,
    };
    let mut touched = parents;
    for relative in deletes {
        let target = root.join(relative);
        match fault(&target).and_then(|()| std::fs::remove_file(&target)) {
            Ok(()) => summary.deleted += 1,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {}
            Err(error) => return Err(CommitError::io(&target, &error)),
        }
        if let Some(parent) = target.parent() {
            touched.insert(parent.to_path_buf());
        }
        crash_point();
    }
    fault(root).map_err(|error| CommitError::io(root, &error))?;
    if WHOLE_FILESYSTEM_FLUSH {
        flush_filesystem(root, durability)?;
    } else {
        for dir in with_ancestors(&touched, root) {
            if dir.exists() {
                sync_dir(&dir, durability)?;
            }
        }
    }
    let journal_path = root.join(JOURNAL_NAME);
    fault(&journal_path)
        .and_then(|()| std::fs::remove_file(&journal_path))
        .map_err(|error| CommitError::io(&journal_path, &error))?;
    sync_dir(root, durability)?;
    crash_point();
    Ok(summary)
}

/// Rewrites the files in place on several threads: the writes are I/O,
/// not computation, so they do not compete for the cores the way rayon
/// workers would, and concurrent fsyncs (where each file is fsynced) share
/// the filesystem's journal commits.
fn write_files(root: &Path, writes: &[(&str, &[u8])], fsync_each: bool) -> Result<(), CommitError> {
    const WRITING_THREADS: usize = 8;
    let chunk = writes.len().div_ceil(WRITING_THREADS).max(1);
    std::thread::scope(|scope| {
        let workers: Vec<_> = writes
            .chunks(chunk)
            .map(|part| {
                scope.spawn(move || -> Result<(), CommitError> {
                    for (relative, bytes) in part {
                        write_in_place(&root.join(relative), bytes, fsync_each)?;
                        crash_point();
                    }
                    Ok(())
                })
            })
            .collect();
        let mut result = Ok(());
        for worker in workers {
            let outcome = worker.join().unwrap_or_else(|_| {
                Err(CommitError::Io {
                    path: root.to_path_buf(),
                    message: "a writing thread panicked".to_owned(),
                })
            });
            if result.is_ok() {
                result = outcome;
            }
        }
        result
    })
}

/// Gives `path` the contents `bytes`, keeping its inode when it is a file
/// krender may write; a symbolic link, or a file it may not write, is
/// replaced by a new file (with the old file's mode).
fn write_in_place(path: &Path, bytes: &[u8], fsync: bool) -> Result<(), CommitError> {
    use std::io::Write;
    let io = |error: std::io::Error| CommitError::io(path, &error);
    fault(path).map_err(io)?;
    let mut mode = None;
    // A symbolic link is replaced, never written through; so is anything
    // but a regular file (opening a FIFO for writing would wait for a
    // reader).
    if std::fs::symlink_metadata(path).is_ok_and(|meta| !meta.file_type().is_file()) {
        std::fs::remove_file(path).map_err(io)?;
    }
    // Not truncated on open: the new bytes overwrite the old blocks and
    // only a shorter file's tail is cut (`set_len` below). Truncating first
    // frees every block and allocates them again, which made rewriting
    // thousands of small files several times slower on ext4.
    let open = |path: &Path| {
        std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)
    };
    let mut file = match open(path) {
        Ok(file) => file,
        Err(error) if error.kind() == std::io::ErrorKind::PermissionDenied => {
            mode = Some(std::fs::metadata(path).map_err(io)?.permissions());
            std::fs::remove_file(path).map_err(io)?;
            open(path).map_err(io)?
        }
        Err(error) => return Err(io(error)),
    };
    fault(path).map_err(io)?;
    file.write_all(bytes).map_err(io)?;
    file.set_len(bytes.len() as u64).map_err(io)?;
    if let Some(mode) = mode {
        file.set_permissions(mode).map_err(io)?;
    }
    if fsync {
        file.sync_all().map_err(io)?;
    }
    Ok(())
}

/// Brings the package at `root` to a consistent state after an interrupted
/// commit (see the module doc). Call it with the package lock held, before
/// reading the package.
pub fn recover(root: &Path, durability: Durability) -> Result<Recovery, CommitError> {
    let journal_path = root.join(JOURNAL_NAME);
    match std::fs::read(&journal_path) {
        Ok(bytes) => {
            let (journal, contents) = parse_journal(root, &journal_path, &bytes)?;
            let mut writes = Vec::with_capacity(journal.writes.len());
            let mut rest = contents;
            for (relative, len) in &journal.writes {
                // Lengths were checked against the file's in `parse_journal`.
                let (bytes, tail) =
                    rest.split_at(usize::try_from(*len).unwrap_or(usize::MAX).min(rest.len()));
                writes.push((relative.as_str(), bytes));
                rest = tail;
            }
            let summary = roll_forward(root, &writes, &journal.deletes, durability)?;
            remove_leftovers(root)?;
            Ok(Recovery::RolledForward(summary))
        }
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
            let removed = remove_leftovers(root)?;
            Ok(if removed == 0 {
                Recovery::Clean
            } else {
                Recovery::RolledBack { removed }
            })
        }
        Err(error) if error.kind() == std::io::ErrorKind::NotADirectory => Ok(Recovery::Clean),
        Err(error) => Err(CommitError::io(&journal_path, &error)),
    }
}

/// True when `root` holds a journal or stage a commit left behind (cheap:
/// one directory listing).
pub fn needs_recovery(root: &Path) -> bool {
    let Ok(entries) = std::fs::read_dir(root) else {
        return false;
    };
    entries.flatten().any(|entry| {
        let name = entry.file_name();
        let name = name.to_string_lossy();
        name == JOURNAL_NAME
            || name.starts_with(STAGE_PREFIX)
            || name.starts_with(JOURNAL_TEMP_PREFIX)
    })
}

/// The journal's header and the bytes of its writes.
fn parse_journal<'a>(
    root: &Path,
    path: &Path,
    bytes: &'a [u8],
) -> Result<(Journal, &'a [u8]), CommitError> {
    let corrupt = |message: String| CommitError::JournalCorrupt {
        path: path.to_path_buf(),
        message,
    };
    let rest = bytes
        .strip_prefix(JOURNAL_MAGIC.as_slice())
        .ok_or_else(|| corrupt("not a krender journal (or one of another version)".to_owned()))?;
    let (len, rest) = rest
        .split_first_chunk::<8>()
        .ok_or_else(|| corrupt("truncated header".to_owned()))?;
    let len = usize::try_from(u64::from_le_bytes(*len)).unwrap_or(usize::MAX);
    if rest.len() < len {
        return Err(corrupt("truncated header".to_owned()));
    }
    let (header, contents) = rest.split_at(len);
    let journal: Journal =
        serde_json::from_slice(header).map_err(|error| corrupt(error.to_string()))?;
    if journal.version != 2 {
        return Err(corrupt(format!("unknown version {}", journal.version)));
    }
    let expected = journal
        .writes
        .iter()
        .try_fold(0u64, |sum, (_, len)| sum.checked_add(*len));
    if expected != Some(contents.len() as u64) {
        return Err(corrupt(format!(
            "holds {} bytes of file contents, its header names {expected:?}",
            contents.len()
        )));
    }
    for relative in journal
        .writes
        .iter()
        .map(|(relative, _)| relative)
        .chain(&journal.deletes)
    {
        check_relative(root, relative).map_err(|error| corrupt(error.to_string()))?;
    }
    Ok((journal, contents))
}

/// Removes stages and temporary journals of commits that never reached
/// their commit point; returns how many it removed.
fn remove_leftovers(root: &Path) -> Result<usize, CommitError> {
    let entries = match std::fs::read_dir(root) {
        Ok(entries) => entries,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(0),
        Err(error) => return Err(CommitError::io(root, &error)),
    };
    let mut removed = 0;
    for entry in entries.flatten() {
        let name = entry.file_name();
        let name = name.to_string_lossy();
        let path = entry.path();
        let result = if name.starts_with(STAGE_PREFIX) {
            std::fs::remove_dir_all(&path)
        } else if name.starts_with(JOURNAL_TEMP_PREFIX) {
            std::fs::remove_file(&path)
        } else {
            continue;
        };
        match result {
            Ok(()) => removed += 1,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {}
            Err(error) => return Err(CommitError::io(&path, &error)),
        }
    }
    Ok(removed)
}

/// Writes `files` as the new directory `dir`, which must not exist: staged
/// beside it, then renamed into place without replacing anything. An empty
/// `files` creates nothing (as a direct write would not).
pub fn commit_new_dir(
    dir: &Path,
    files: &BTreeMap<String, Vec<u8>>,
    durability: Durability,
) -> Result<(), CommitError> {
    if files.is_empty() {
        return Ok(());
    }
    let parent = match dir.parent() {
        // A bare relative name (`out`) has the empty path as its parent.
        Some(parent) if parent.as_os_str().is_empty() => PathBuf::from("."),
        Some(parent) => parent.to_path_buf(),
        None => PathBuf::from("/"),
    };
    for relative in files.keys() {
        check_relative(dir, relative)?;
    }
    std::fs::create_dir_all(&parent).map_err(|error| CommitError::io(&parent, &error))?;
    remove_dead_out_stages(&parent);
    let stage = parent.join(format!("{OUT_STAGE_PREFIX}{}", transaction_id()));
    let result = stage_new_dir(&stage, dir, files, durability);
    if result.is_err() {
        let _ = std::fs::remove_dir_all(&stage);
    }
    result
}

fn stage_new_dir(
    stage: &Path,
    dir: &Path,
    files: &BTreeMap<String, Vec<u8>>,
    durability: Durability,
) -> Result<(), CommitError> {
    std::fs::create_dir(stage).map_err(|error| CommitError::io(stage, &error))?;
    let mut dirs = BTreeSet::new();
    dirs.insert(stage.to_path_buf());
    for relative in files.keys() {
        if let Some(parent) = stage.join(relative).parent()
            && dirs.insert(parent.to_path_buf())
        {
            std::fs::create_dir_all(parent).map_err(|error| CommitError::io(parent, &error))?;
        }
    }
    let writes: Vec<(&str, &[u8])> = files
        .iter()
        .map(|(relative, bytes)| (relative.as_str(), bytes.as_slice()))
        .collect();
    write_files(
        stage,
        &writes,
        !WHOLE_FILESYSTEM_FLUSH && durability.flushes(),
    )?;
    if WHOLE_FILESYSTEM_FLUSH {
        flush_filesystem(stage, durability)?;
    } else {
        for staged_dir in with_ancestors(&dirs, stage) {
            sync_dir(&staged_dir, durability)?;
        }
    }
    rename_no_replace(stage, dir).map_err(|error| match error.kind() {
        std::io::ErrorKind::AlreadyExists | std::io::ErrorKind::DirectoryNotEmpty => {
            CommitError::OutputExists {
                path: dir.to_path_buf(),
            }
        }
        _ => CommitError::io(dir, &error),
    })?;
    match dir.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => sync_dir(parent, durability)?,
        _ => sync_dir(Path::new("."), durability)?,
    }
    Ok(())
}

/// Removes `.krender-out-<pid>-*` stages in `parent` whose process is gone
/// (a killed `-o DIR` render); stages of live processes are left alone.
fn remove_dead_out_stages(parent: &Path) {
    let Ok(entries) = std::fs::read_dir(parent) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(rest) = name.to_str().and_then(|n| n.strip_prefix(OUT_STAGE_PREFIX)) else {
            continue;
        };
        let pid = rest
            .split('-')
            .next()
            .and_then(|pid| pid.parse::<i32>().ok());
        if let Some(pid) = pid
            && !process_alive(pid)
        {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

/// True when a process with this pid exists (possibly another user's).
pub(crate) fn process_alive(pid: i32) -> bool {
    if pid <= 0 {
        return false;
    }
    // SAFETY: signal 0 only checks for existence and permission.
    let result = unsafe { libc::kill(pid, 0) };
    result == 0 || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}

/// A name unique to this process and moment.
fn transaction_id() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |elapsed| elapsed.as_nanos());
    format!("{}-{nanos:x}", std::process::id())
}

/// Rejects absolute paths, `..`, and paths through reserved names.
fn check_relative(root: &Path, relative: &str) -> Result<(), CommitError> {
    let invalid = |reason: &str| CommitError::InvalidWrite {
        root: root.to_path_buf(),
        relative: relative.to_owned(),
        reason: reason.to_owned(),
    };
    if relative.is_empty() {
        return Err(invalid("empty path"));
    }
    for component in Path::new(relative).components() {
        match component {
            Component::Normal(name) => {
                if name.to_str().is_some_and(is_reserved_name) {
                    return Err(invalid("names starting with .krender- are reserved"));
                }
            }
            _ => {
                return Err(invalid(
                    "the path must be relative and stay inside the package",
                ));
            }
        }
    }
    Ok(())
}

/// Checks before the commit point what would make the roll forward fail
/// after it, which would leave a package half written: a directory where
/// the file goes, a file where a directory must be, a parent directory that
/// is a dangling symbolic link or one leading out of the package, on
/// another file system than the package (a rename cannot cross it), or not
/// writable.
/// A parent directory is checked once per commit (`checked_parents`).
fn check_write_target(
    root: &Path,
    relative: &str,
    checked_parents: &mut BTreeSet<PathBuf>,
) -> Result<(), CommitError> {
    use std::os::unix::fs::MetadataExt;
    check_relative(root, relative)?;
    let invalid = |reason: &str| CommitError::InvalidWrite {
        root: root.to_path_buf(),
        relative: relative.to_owned(),
        reason: reason.to_owned(),
    };
    let target = root.join(relative);
    if std::fs::symlink_metadata(&target).is_ok_and(|metadata| metadata.is_dir()) {
        return Err(invalid("a directory is in the way"));
    }
    let parents = Path::new(relative).parent().unwrap_or(Path::new(""));
    if !checked_parents.insert(parents.to_path_buf()) {
        return Ok(());
    }
    // A root that does not exist yet (`fn sink DIR`) is created inside its
    // nearest existing ancestor, which then stands for it.
    let Some((root_existing, root_meta)) = root
        .ancestors()
        .find_map(|dir| Some((dir.to_path_buf(), std::fs::metadata(dir).ok()?)))
    else {
        return Err(invalid("no parent directory of the package exists"));
    };
    // The parents, from the root down: the deepest one that exists is where
    // the roll forward creates or renames.
    let mut existing = root_existing;
    let mut dir = root.to_path_buf();
    for name in parents.components() {
        dir.push(name);
        match std::fs::symlink_metadata(&dir) {
            Ok(meta) if meta.file_type().is_symlink() => match std::fs::canonicalize(&dir) {
                Err(_) => return Err(invalid("a parent directory is a dangling symbolic link")),
                Ok(resolved) => {
                    let inside = std::fs::canonicalize(root)
                        .is_ok_and(|canonical_root| resolved.starts_with(canonical_root));
                    if !inside {
                        return Err(invalid(
                            "a parent directory is a symbolic link leading out of the package",
                        ));
                    }
                    if !resolved.is_dir() {
                        return Err(invalid("a parent path is not a directory"));
                    }
                    existing = dir.clone();
                }
            },
            Ok(meta) if meta.is_dir() => existing = dir.clone(),
            Ok(_) => return Err(invalid("a parent path is not a directory")),
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => break,
            Err(error) => return Err(CommitError::io(&dir, &error)),
        }
    }
    let existing_meta =
        std::fs::metadata(&existing).map_err(|error| CommitError::io(&existing, &error))?;
    if existing_meta.dev() != root_meta.dev() {
        return Err(invalid(
            "a parent directory is on another file system than the package",
        ));
    }
    if !writable(&existing) {
        return Err(invalid("a parent directory is not writable"));
    }
    Ok(())
}

/// Whether this process may create and rename entries in `dir` (access(2):
/// permissions, read-only mounts).
fn writable(dir: &Path) -> bool {
    use std::os::unix::ffi::OsStrExt;
    let Ok(path) = std::ffi::CString::new(dir.as_os_str().as_bytes()) else {
        return false;
    };
    // SAFETY: a valid NUL-terminated path; access(2) reads it only.
    unsafe { libc::access(path.as_ptr(), libc::W_OK | libc::X_OK) == 0 }
}

/// `dirs` plus every directory between each of them and `top` (inclusive):
/// a directory created by `create_dir_all` is only durable once the entry
/// naming it, in its parent, is fsynced too.
fn with_ancestors(dirs: &BTreeSet<PathBuf>, top: &Path) -> BTreeSet<PathBuf> {
    let mut all = BTreeSet::new();
    for dir in dirs {
        for ancestor in dir.ancestors() {
            if !ancestor.starts_with(top) || !all.insert(ancestor.to_path_buf()) {
                break;
            }
        }
    }
    all
}

pub(crate) fn write_durably(
    path: &Path,
    bytes: &[u8],
    permissions: Option<std::fs::Permissions>,
    durability: Durability,
) -> Result<(), CommitError> {
    write_file(path, bytes, permissions, durability.flushes())
}

fn write_file(
    path: &Path,
    bytes: &[u8],
    permissions: Option<std::fs::Permissions>,
    fsync: bool,
) -> Result<(), CommitError> {
    use std::io::Write;
    let io = |error: std::io::Error| CommitError::io(path, &error);
    let mut file = std::fs::File::create(path).map_err(io)?;
    file.write_all(bytes).map_err(io)?;
    if let Some(permissions) = permissions {
        file.set_permissions(permissions).map_err(io)?;
    }
    if fsync {
        file.sync_all().map_err(io)?;
    }
    Ok(())
}

/// True where [`flush_filesystem`] flushes a whole filesystem at once.
const WHOLE_FILESYSTEM_FLUSH: bool = cfg!(target_os = "linux");

/// Flushes everything written to the filesystem holding `dir` (Linux
/// `syncfs`): data, inodes and directory entries at once. Elsewhere it is
/// never called ([`WHOLE_FILESYSTEM_FLUSH`]): the caller fsyncs file by
/// file.
fn flush_filesystem(dir: &Path, durability: Durability) -> Result<(), CommitError> {
    if !durability.flushes() {
        return Ok(());
    }
    #[cfg(target_os = "linux")]
    {
        use std::os::fd::AsRawFd;
        let file = std::fs::File::open(dir).map_err(|error| CommitError::io(dir, &error))?;
        // SAFETY: `syncfs` takes an open descriptor, which `file` owns
        // until after the call.
        if unsafe { libc::syncfs(file.as_raw_fd()) } != 0 {
            return Err(CommitError::io(dir, &std::io::Error::last_os_error()));
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = dir;
    Ok(())
}

pub(crate) fn sync_dir(dir: &Path, durability: Durability) -> Result<(), CommitError> {
    if !durability.flushes() {
        return Ok(());
    }
    std::fs::File::open(dir)
        .and_then(|file| file.sync_all())
        .map_err(|error| CommitError::io(dir, &error))
}

/// Whether a commit flushes what it writes to the disk.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Durability {
    /// The journal is durable before its rename and the rewritten files
    /// before the journal is removed: the guarantee holds across a power
    /// loss.
    #[default]
    Flushed,
    /// No flushes (the cli's `KRENDER_FSYNC=0`). The commit stays atomic
    /// against a crash of the process (`kill -9`, a panic, an OOM kill):
    /// what the next krender command sees is the kernel's page cache,
    /// whether or not it reached the disk. Only a power loss or kernel
    /// crash could then leave a journal whose bytes never reached the
    /// disk. For CI, tmpfs and throwaway checkouts, where the flushes are
    /// pure cost.
    Unflushed,
}

impl Durability {
    fn flushes(self) -> bool {
        self == Durability::Flushed
    }
}

/// `rename` that fails with `AlreadyExists` instead of replacing `to`
/// (Linux `renameat2(RENAME_NOREPLACE)`; elsewhere a check, then rename).
fn rename_no_replace(from: &Path, to: &Path) -> std::io::Result<()> {
    #[cfg(target_os = "linux")]
    {
        use std::os::unix::ffi::OsStrExt;
        let from_c = std::ffi::CString::new(from.as_os_str().as_bytes())
            .map_err(|_| std::io::Error::from(std::io::ErrorKind::InvalidInput))?;
        let to_c = std::ffi::CString::new(to.as_os_str().as_bytes())
            .map_err(|_| std::io::Error::from(std::io::ErrorKind::InvalidInput))?;
        // SAFETY: both strings are valid NUL-terminated paths for the call.
        let result = unsafe {
            libc::renameat2(
                libc::AT_FDCWD,
                from_c.as_ptr(),
                libc::AT_FDCWD,
                to_c.as_ptr(),
                libc::RENAME_NOREPLACE,
            )
        };
        if result == 0 {
            return Ok(());
        }
        let error = std::io::Error::last_os_error();
        // Filesystems without RENAME_NOREPLACE support fall back below.
        if error.raw_os_error() != Some(libc::EINVAL) {
            return Err(error);
        }
    }
    if std::fs::symlink_metadata(to).is_ok() {
        return Err(std::io::Error::from(std::io::ErrorKind::AlreadyExists));
    }
    std::fs::rename(from, to)
}

/// Unit-test hook: an I/O failure injected at the N-th file operation of a
/// commit under the armed root ([`tests`]); nothing in other builds.
fn fault(path: &Path) -> std::io::Result<()> {
    #[cfg(test)]
    {
        if let Ok(mut armed) = tests::FAULT.lock()
            && let Some((root, left)) = armed.as_mut()
            && path.starts_with(&*root)
        {
            if *left == 0 {
                *armed = None;
                return Err(std::io::Error::other("injected I/O failure"));
            }
            *left -= 1;
        }
    }
    let _ = path;
    Ok(())
}

/// Test hook for the crash-safety tests: with `KRENDER_TEST_CRASH_AFTER=N`
/// in a debug build, the process kills itself with SIGKILL at the N-th
/// (0-based) step boundary of a commit, exactly as an outside `kill -9`
/// landing there would. Release builds compile it to nothing.
fn crash_point() {
    #[cfg(debug_assertions)]
    {
        use std::sync::OnceLock;
        use std::sync::atomic::{AtomicUsize, Ordering};
        static LIMIT: OnceLock<Option<usize>> = OnceLock::new();
        static COUNT: AtomicUsize = AtomicUsize::new(0);
        let limit = LIMIT.get_or_init(|| {
            std::env::var("KRENDER_TEST_CRASH_AFTER")
                .ok()
                .and_then(|value| value.parse().ok())
        });
        if let Some(limit) = limit
            && COUNT.fetch_add(1, Ordering::SeqCst) == *limit
        {
            // SAFETY: raising a signal in our own process.
            unsafe {
                libc::raise(libc::SIGKILL);
            }
        }
    }
}

/// Every `.krender-*` entry directly in `root`, sorted: what a killed run
/// left (or a live run's lock and stage), for tools and tests.
pub fn leftovers(root: &Path) -> Vec<PathBuf> {
    let mut found: Vec<PathBuf> = std::fs::read_dir(root)
        .map(|entries| {
            entries
                .flatten()
                .filter(|entry| {
                    entry
                        .file_name()
                        .to_string_lossy()
                        .starts_with(RESERVED_PREFIX)
                })
                .map(|entry| entry.path())
                .collect()
        })
        .unwrap_or_default();
    found.sort();
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tree(root: &Path) -> BTreeMap<String, Vec<u8>> {
        let mut files = BTreeMap::new();
        let mut pending = vec![root.to_path_buf()];
        while let Some(dir) = pending.pop() {
            for entry in std::fs::read_dir(&dir).unwrap().flatten() {
                let path = entry.path();
                if path.is_dir() {
                    pending.push(path);
                } else {
                    let rel = path
                        .strip_prefix(root)
                        .unwrap()
                        .to_string_lossy()
                        .into_owned();
                    files.insert(rel, std::fs::read(&path).unwrap());
                }
            }
        }
        files
    }

    /// Files are overwritten in place, not truncated first: a shorter new
    /// content must still end where it ends, and a longer one grow.
    #[test]
    fn a_rewritten_file_holds_exactly_its_new_bytes() {
        let temp = tempfile::tempdir().unwrap();
        let root = temp.path();
        std::fs::write(root.join("short.yaml"), "a long old content\nline two\n").unwrap();
        std::fs::write(root.join("long.yaml"), "old\n").unwrap();
        let mut changes = Changes::default();
        changes.write("short.yaml", "new\n");
        changes.write("long.yaml", "a longer new content\n");
        commit(root, &changes, Durability::Flushed).unwrap();
        assert_eq!(std::fs::read(root.join("short.yaml")).unwrap(), b"new\n");
        assert_eq!(
            std::fs::read(root.join("long.yaml")).unwrap(),
            b"a longer new content\n"
        );
    }

    #[test]
    fn commit_writes_deletes_and_leaves_nothing_behind() {
        let temp = tempfile::tempdir().unwrap();
        let root = temp.path();
        std::fs::write(root.join("a.yaml"), "old a\n").unwrap();
        std::fs::write(root.join("gone.yaml"), "old\n").unwrap();
        let mut changes = Changes::default();
        changes.write("a.yaml", "new a\n");
        changes.write("sub/dir/b.yaml", "new b\n");
        changes.delete("gone.yaml");
        assert_eq!(changes.read(root, "a.yaml").unwrap(), b"new a\n");
        assert_eq!(changes.read(root, "gone.yaml"), None);
        let summary = commit(root, &changes, Durability::Flushed).unwrap();
        assert_eq!(
            summary,
            CommitSummary {
                written: 2,
                deleted: 1
            }
        );
        let expected: BTreeMap<String, Vec<u8>> = [
            ("a.yaml".to_owned(), b"new a\n".to_vec()),
            ("sub/dir/b.yaml".to_owned(), b"new b\n".to_vec()),
        ]
        .into();
        assert_eq!(tree(root), expected);
        assert!(leftovers(root).is_empty());
        assert_eq!(recover(root, Durability::Flushed).unwrap(), Recovery::Clean);
    }

    /// Targets a rename could not reach after the commit point are refused
    /// before it: a dangling symlinked directory, one leading out of the
    /// package. A symlinked directory inside the package is written through.
    #[test]
    fn unreachable_targets_are_refused_before_the_commit_point() {
        let temp = tempfile::tempdir().unwrap();
        let root = temp.path().join("pkg");
        let outside = temp.path().join("outside");
        std::fs::create_dir_all(root.join("real")).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        std::fs::write(root.join("a.yaml"), "old\n").unwrap();
        std::os::unix::fs::symlink("/nonexistent/dir", root.join("dangling")).unwrap();
        std::os::unix::fs::symlink(&outside, root.join("out")).unwrap();
        std::os::unix::fs::symlink(root.join("real"), root.join("inside")).unwrap();
        for (bad, reason) in [
            ("dangling/x.yaml", "a dangling symbolic link"),
            ("out/x.yaml", "leading out of the package"),
            ("a.yaml/x.yaml", "not a directory"),
        ] {
            let mut changes = Changes::default();
            changes.write("a.yaml", "new\n");
            changes.write(bad, "x");
            let error = commit(&root, &changes, Durability::Flushed)
                .unwrap_err()
                .to_string();
            assert!(error.contains(reason), "{bad}: {error}");
            assert_eq!(std::fs::read(root.join("a.yaml")).unwrap(), b"old\n");
            assert!(leftovers(&root).is_empty(), "{bad}");
        }
        assert!(std::fs::read_dir(&outside).unwrap().next().is_none());
        let mut changes = Changes::default();
        changes.write("inside/x.yaml", "x\n");
        commit(&root, &changes, Durability::Flushed).unwrap();
        assert_eq!(std::fs::read(root.join("real/x.yaml")).unwrap(), b"x\n");
    }

    /// A symbolic link to a file is replaced by the new file (the commit
    /// renames over the link), and what it pointed at is left alone: a
    /// render never writes through a link to a file elsewhere.
    #[test]
    fn a_symlinked_file_is_replaced_not_written_through() {
        let temp = tempfile::tempdir().unwrap();
        let root = temp.path().join("pkg");
        std::fs::create_dir_all(&root).unwrap();
        let elsewhere = temp.path().join("elsewhere.yaml");
        std::fs::write(&elsewhere, "kept\n").unwrap();
        std::os::unix::fs::symlink(&elsewhere, root.join("cm.yaml")).unwrap();
        let mut changes = Changes::default();
        changes.write("cm.yaml", "new\n");
        commit(&root, &changes, Durability::Flushed).unwrap();
        let meta = std::fs::symlink_metadata(root.join("cm.yaml")).unwrap();
        assert!(meta.file_type().is_file());
        assert_eq!(std::fs::read(root.join("cm.yaml")).unwrap(), b"new\n");
        assert_eq!(std::fs::read(&elsewhere).unwrap(), b"kept\n");
    }

    #[test]
    fn reserved_and_escaping_paths_are_refused_before_anything_changes() {
        let temp = tempfile::tempdir().unwrap();
        let root = temp.path();
        std::fs::write(root.join("a.yaml"), "old\n").unwrap();
        for bad in [
            ".krender-journal",
            "../x.yaml",
            "/abs.yaml",
            "a.yaml/b.yaml",
        ] {
            let mut changes = Changes::default();
            changes.write("ok.yaml", "new\n");
            changes.write(bad, "x");
            let error = commit(root, &changes, Durability::Flushed).unwrap_err();
            assert!(
                matches!(error, CommitError::InvalidWrite { .. }),
                "{bad}: {error}"
            );
        }
        assert_eq!(tree(root).len(), 1);
    }

    #[test]
    fn recovery_rolls_forward_a_journal_and_back_a_bare_stage() {
        let temp = tempfile::tempdir().unwrap();
        let root = temp.path();
        std::fs::write(root.join("a.yaml"), "old a\n").unwrap();
        std::fs::write(root.join("b.yaml"), "old b\n").unwrap();
        std::fs::write(root.join("c.yaml"), "old c\n").unwrap();
        // A commit interrupted after its commit point, with a.yaml already
        // rewritten and b.yaml cut short.
        let mut changes = Changes::default();
        changes.write("a.yaml", "new a\n");
        changes.write("b.yaml", "new b\n");
        changes.write("sub/d.yaml", "new d\n");
        changes.delete("c.yaml");
        std::fs::write(root.join(JOURNAL_NAME), journal_bytes(&changes)).unwrap();
        std::fs::write(root.join("a.yaml"), "new a\n").unwrap();
        std::fs::write(root.join("b.yaml"), "ne").unwrap();
        let recovery = recover(root, Durability::Flushed).unwrap();
        assert_eq!(
            recovery,
            Recovery::RolledForward(CommitSummary {
                written: 3,
                deleted: 1
            })
        );
        assert_eq!(std::fs::read(root.join("b.yaml")).unwrap(), b"new b\n");
        assert_eq!(std::fs::read(root.join("sub/d.yaml")).unwrap(), b"new d\n");
        assert!(!root.join("c.yaml").exists());
        assert!(leftovers(root).is_empty());
        // A journal never published, and an earlier krender's stage, never
        // reached their commit point.
        let stage = root.join(".krender-stage-2-2");
        std::fs::create_dir(&stage).unwrap();
        std::fs::write(stage.join("a.yaml"), "newer\n").unwrap();
        std::fs::write(root.join(".krender-journal-2-2"), "KRJ2").unwrap();
        assert_eq!(
            recover(root, Durability::Flushed).unwrap(),
            Recovery::RolledBack { removed: 2 }
        );
        assert_eq!(std::fs::read(root.join("a.yaml")).unwrap(), b"new a\n");
        assert!(leftovers(root).is_empty());
    }

    /// Where [`super::fault`] fails: commits under the root, after this
    /// many operations.
    pub(super) static FAULT: std::sync::Mutex<Option<(PathBuf, usize)>> =
        std::sync::Mutex::new(None);

    /// An I/O failure at every file operation of a commit in turn: the
    /// commit fails or succeeds, and after the next command's recovery (the
    /// fault gone) the package is exactly the old or the new one, with
    /// nothing left behind; a successful commit always leaves the new one.
    #[test]
    fn an_io_failure_at_any_step_leaves_old_or_new_after_recovery() {
        let old: BTreeMap<String, Vec<u8>> = [
            ("a.yaml", "old a\n"),
            ("gone.yaml", "to delete\n"),
            ("keep.yaml", "kept\n"),
        ]
        .into_iter()
        .map(|(path, text)| (path.to_owned(), text.as_bytes().to_vec()))
        .collect();
        let mut changes = Changes::default();
        changes.write("a.yaml", "new a\n");
        changes.write("sub/deep/b.yaml", "new b\n");
        changes.write("c.yaml", "new c\n");
        changes.delete("gone.yaml");
        let mut new = old.clone();
        new.remove("gone.yaml");
        for (path, bytes) in changes.writes() {
            new.insert(path.clone(), bytes.clone());
        }
        let mut outcomes = (0, 0);
        for step in 0.. {
            let temp = tempfile::tempdir().unwrap();
            let root = temp.path().join("pkg");
            for (path, bytes) in &old {
                std::fs::create_dir_all(root.join(path).parent().unwrap()).unwrap();
                std::fs::write(root.join(path), bytes).unwrap();
            }
            *FAULT.lock().unwrap() = Some((root.clone(), step));
            let result = commit(&root, &changes, Durability::Flushed);
            let fired = FAULT.lock().unwrap().take().is_none();
            recover(&root, Durability::Flushed).unwrap();
            let now = tree(&root);
            assert!(now == old || now == new, "step {step}: {now:?}");
            assert!(leftovers(&root).is_empty(), "step {step}");
            match result {
                Ok(_) => assert_eq!(now, new, "step {step}"),
                Err(_) => assert!(fired, "step {step}: failed without the fault"),
            }
            if now == new {
                outcomes.1 += 1
            } else {
                outcomes.0 += 1
            }
            if !fired {
                // The commit ran out of operations before the fault.
                assert!(step > 5, "only {step} fault points");
                break;
            }
        }
        assert!(outcomes.0 > 0 && outcomes.1 > 0, "{outcomes:?}");
    }

    #[test]
    fn a_journal_whose_contents_do_not_match_its_header_is_corrupt() {
        let temp = tempfile::tempdir().unwrap();
        let mut changes = Changes::default();
        changes.write("a.yaml", "new a\n");
        let mut bytes = journal_bytes(&changes);
        bytes.pop();
        std::fs::write(temp.path().join(JOURNAL_NAME), bytes).unwrap();
        let error = recover(temp.path(), Durability::Flushed).unwrap_err();
        assert!(
            matches!(error, CommitError::JournalCorrupt { .. }),
            "{error}"
        );
        assert!(!temp.path().join("a.yaml").exists());
    }

    #[test]
    fn a_fifo_in_the_way_is_replaced_not_opened() {
        let temp = tempfile::tempdir().unwrap();
        let fifo = temp.path().join("a.yaml");
        let path = std::ffi::CString::new(fifo.to_string_lossy().as_bytes()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(path.as_ptr(), 0o644) }, 0);
        let mut changes = Changes::default();
        changes.write("a.yaml", "new\n");
        commit(temp.path(), &changes, Durability::Flushed).unwrap();
        assert_eq!(std::fs::read(&fifo).unwrap(), b"new\n");
    }

    #[test]
    fn a_commit_keeps_inodes_modes_and_replaces_symlinks_and_read_only_files() {
        use std::os::unix::fs::{MetadataExt, PermissionsExt};
        let temp = tempfile::tempdir().unwrap();
        let root = temp.path();
        std::fs::write(root.join("a.yaml"), "old\n").unwrap();
        std::fs::set_permissions(root.join("a.yaml"), std::fs::Permissions::from_mode(0o640))
            .unwrap();
        std::fs::write(root.join("ro.yaml"), "old\n").unwrap();
        std::fs::set_permissions(root.join("ro.yaml"), std::fs::Permissions::from_mode(0o444))
            .unwrap();
        let inode = std::fs::metadata(root.join("a.yaml")).unwrap().ino();
        let mut changes = Changes::default();
        changes.write("a.yaml", "new\n");
        changes.write("ro.yaml", "new\n");
        commit(root, &changes, Durability::Flushed).unwrap();
        let meta = std::fs::metadata(root.join("a.yaml")).unwrap();
        assert_eq!((meta.ino(), meta.mode() & 0o777), (inode, 0o640));
        assert_eq!(std::fs::read(root.join("ro.yaml")).unwrap(), b"new\n");
        let mode = std::fs::metadata(root.join("ro.yaml")).unwrap().mode();
        assert_eq!(mode & 0o777, 0o444);
    }

    #[test]
    fn corrupt_journal_is_an_error_naming_it() {
        let temp = tempfile::tempdir().unwrap();
        std::fs::write(temp.path().join(JOURNAL_NAME), "KRJ2{\"version\":2").unwrap();
        let error = recover(temp.path(), Durability::Flushed).unwrap_err();
        assert!(error.to_string().contains(".krender-journal"), "{error}");
    }

    #[test]
    fn new_dir_is_all_or_nothing() {
        let temp = tempfile::tempdir().unwrap();
        let out = temp.path().join("out");
        let files: BTreeMap<String, Vec<u8>> = [("x/a.yaml".to_owned(), b"a\n".to_vec())].into();
        commit_new_dir(&out, &files, Durability::Flushed).unwrap();
        assert_eq!(std::fs::read(out.join("x/a.yaml")).unwrap(), b"a\n");
        let error = commit_new_dir(&out, &files, Durability::Flushed).unwrap_err();
        assert!(matches!(error, CommitError::OutputExists { .. }), "{error}");
        assert_eq!(leftovers(temp.path()), Vec::<PathBuf>::new());
    }
}
