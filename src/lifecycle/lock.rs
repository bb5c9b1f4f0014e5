//! Package locks: one writer per package, try-lock semantics (a second
//! render fails at once, naming the holder), and automatic take-over of a
//! lock left by a dead process.
//!
//! Design: the lock is `flock(LOCK_EX | LOCK_NB)` on `<pkg>/.krender-lock`
//! for writers and `flock(LOCK_SH | LOCK_NB)` for readers (renders to
//! stdout and `fn source` run side by side; a writer excludes them), and
//! the file's content (JSON lines: pid, host, command, start time) only
//! says who holds it. The kernel drops an flock when its holder dies, `kill -9`
//! included, so "is the holder alive?" needs no pid probing (which pid
//! reuse and pid namespaces would make unreliable): if the flock is free,
//! any holder named in the file is dead and is taken over. The holder
//! unlinks the file before it closes it, so a clean run leaves nothing; an
//! acquirer that opened the file just before that unlink would lock an
//! orphaned inode, so it re-checks after locking that the path still names
//! the inode it locked and retries otherwise. The descriptor is
//! close-on-exec, so functions run by the render never inherit the lock.

use std::fs::File;
use std::io::{Read, Seek, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use super::error::LifecycleError;

/// Name of the lock file inside a package directory.
pub const LOCK_FILE_NAME: &str = ".krender-lock";

pub use super::error::LockHolder;

impl LockHolder {
    /// This process, running `command`.
    pub fn current(command: &str) -> Self {
        LockHolder {
            pid: std::process::id(),
            host: host_name(),
            command: command.to_owned(),
            since: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |elapsed| elapsed.as_secs()),
        }
    }
}

/// How a command holds a package.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LockMode {
    /// A writer (in-place render, sink, watch in place): no one else.
    Exclusive,
    /// A reader (`-o stdout`, `fn source`): other readers are welcome,
    /// writers are not.
    Shared,
}

/// A held package lock; dropping it releases the lock and, when no one
/// else holds it, removes the file.
#[derive(Debug)]
pub struct PackageLock {
    path: PathBuf,
    file: File,
    mode: LockMode,
    /// The dead holder whose stale lock was taken over, if any.
    pub took_over: Option<LockHolder>,
}

impl PackageLock {
    /// Takes the exclusive lock of the package at `pkg` for `command`, or
    /// fails at once with [`LifecycleError::Locked`] naming the holder.
    pub fn try_acquire(pkg: &Path, command: &str) -> Result<PackageLock, LifecycleError> {
        PackageLock::try_acquire_mode(pkg, command, LockMode::Exclusive)
    }

    /// Takes the package lock in `mode`, without waiting.
    ///
    /// The file holds one JSON line per holder: a writer replaces the
    /// content with its line, readers append theirs (`O_APPEND`, so
    /// concurrent readers do not overwrite each other). A conflict names
    /// the last holder recorded.
    pub fn try_acquire_mode(
        pkg: &Path,
        command: &str,
        mode: LockMode,
    ) -> Result<PackageLock, LifecycleError> {
        let path = pkg.join(LOCK_FILE_NAME);
        let operation = match mode {
            LockMode::Exclusive => libc::LOCK_EX,
            LockMode::Shared => libc::LOCK_SH,
        };
        // A few rounds cover the unlink race described in the module doc;
        // each round only repeats when the holder released meanwhile.
        for _ in 0..16 {
            let mut file = std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(false)
                .open(&path)
                .map_err(|error| LifecycleError::io(&path, &error))?;
            // SAFETY: flock on a descriptor we own; no memory is involved.
            let locked = unsafe { libc::flock(file.as_raw_fd(), operation | libc::LOCK_NB) };
            if locked != 0 {
                let error = std::io::Error::last_os_error();
                if error.raw_os_error() == Some(libc::EWOULDBLOCK) {
                    let holder = read_holder(&mut file).unwrap_or(LockHolder {
                        pid: 0,
                        host: String::new(),
                        command: String::new(),
                        since: 0,
                    });
                    return Err(LifecycleError::Locked {
                        path: pkg.to_path_buf(),
                        holder,
                    });
                }
                return Err(LifecycleError::io(&path, &error));
            }
            if !same_inode(&file, &path) {
                continue;
            }
            let holder = LockHolder::current(command);
            let line = serde_json::to_string(&holder).unwrap_or_default() + "\n";
            let took_over = match mode {
                LockMode::Exclusive => {
                    // Holding it exclusively, any recorded holder is dead.
                    let took_over = read_holder(&mut file);
                    file.set_len(0)
                        .and_then(|()| file.rewind())
                        .and_then(|()| file.write_all(line.as_bytes()))
                        .map_err(|error| LifecycleError::io(&path, &error))?;
                    took_over
                }
                LockMode::Shared => {
                    std::fs::OpenOptions::new()
                        .append(true)
                        .open(&path)
                        .and_then(|mut appender| appender.write_all(line.as_bytes()))
                        .map_err(|error| LifecycleError::io(&path, &error))?;
                    None
                }
            };
            return Ok(PackageLock {
                path,
                file,
                mode,
                took_over,
            });
        }
        Err(LifecycleError::Io {
            path,
            message: "lock file keeps being replaced; giving up".to_owned(),
        })
    }

    /// The lock file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The mode it is held in.
    pub fn mode(&self) -> LockMode {
        self.mode
    }
}

impl Drop for PackageLock {
    fn drop(&mut self) {
        // Unlink only while holding the lock exclusively, so nobody can
        // lock the inode in between; a reader tries to become the exclusive
        // holder first and leaves the file to the other readers if it
        // cannot (the last one out removes it).
        let exclusive = self.mode == LockMode::Exclusive
            // SAFETY: as in `try_acquire_mode`.
            || unsafe { libc::flock(self.file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } == 0;
        if exclusive && same_inode(&self.file, &self.path) {
            let _ = std::fs::remove_file(&self.path);
        }
        // Closing the descriptor (when `file` drops) releases the flock.
    }
}

/// True when `path` names the same inode as the open `file`.
fn same_inode(file: &File, path: &Path) -> bool {
    match (file.metadata(), std::fs::symlink_metadata(path)) {
        (Ok(open), Ok(named)) => open.ino() == named.ino() && open.dev() == named.dev(),
        _ => false,
    }
}

/// The last holder recorded in the lock file.
fn read_holder(file: &mut File) -> Option<LockHolder> {
    let mut text = String::new();
    file.rewind().ok()?;
    file.read_to_string(&mut text).ok()?;
    text.lines()
        .rev()
        .find_map(|line| serde_json::from_str(line).ok())
}

/// The lock holder recorded at `pkg`, if a lock file exists and is held by a
/// live process (for status displays; not a lock).
pub fn current_holder(pkg: &Path) -> Option<LockHolder> {
    let path = pkg.join(LOCK_FILE_NAME);
    let mut file = File::open(&path).ok()?;
    // SAFETY: as above.
    let free = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_SH | libc::LOCK_NB) } == 0;
    if free {
        return None;
    }
    read_holder(&mut file)
}

fn host_name() -> String {
    let mut buffer = [0u8; 256];
    // SAFETY: the buffer is valid for its length; gethostname writes at
    // most that many bytes.
    let result = unsafe { libc::gethostname(buffer.as_mut_ptr().cast(), buffer.len()) };
    if result != 0 {
        return "unknown-host".to_owned();
    }
    let end = buffer.iter().position(|&b| b == 0).unwrap_or(buffer.len());
    String::from_utf8_lossy(buffer.get(..end).unwrap_or_default()).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn second_lock_fails_and_names_the_holder() {
        let temp = tempfile::tempdir().unwrap();
        let first = PackageLock::try_acquire(temp.path(), "krender fn render a").unwrap();
        let error = PackageLock::try_acquire(temp.path(), "krender fn render b").unwrap_err();
        let text = error.to_string();
        assert!(
            text.contains(&format!("pid {}", std::process::id())),
            "{text}"
        );
        assert!(text.contains("(krender fn render a)"), "{text}");
        drop(first);
        assert!(!temp.path().join(LOCK_FILE_NAME).exists());
        let again = PackageLock::try_acquire(temp.path(), "x").unwrap();
        assert_eq!(again.took_over, None);
    }

    #[test]
    fn readers_share_and_the_last_one_out_removes_the_file() {
        let temp = tempfile::tempdir().unwrap();
        let first = PackageLock::try_acquire_mode(temp.path(), "r1", LockMode::Shared).unwrap();
        let second = PackageLock::try_acquire_mode(temp.path(), "r2", LockMode::Shared).unwrap();
        let error = PackageLock::try_acquire(temp.path(), "w").unwrap_err();
        assert!(error.to_string().contains("(r2)"), "{error}");
        drop(first);
        assert!(temp.path().join(LOCK_FILE_NAME).exists());
        assert!(PackageLock::try_acquire(temp.path(), "w").is_err());
        drop(second);
        assert!(!temp.path().join(LOCK_FILE_NAME).exists());
        let writer = PackageLock::try_acquire(temp.path(), "w").unwrap();
        assert!(PackageLock::try_acquire_mode(temp.path(), "r3", LockMode::Shared).is_err());
        drop(writer);
    }

    #[test]
    fn stale_lock_file_is_taken_over() {
        let temp = tempfile::tempdir().unwrap();
        let dead = LockHolder {
            pid: 999_999,
            host: "h".into(),
            command: "krender fn render".into(),
            since: 1,
        };
        std::fs::write(
            temp.path().join(LOCK_FILE_NAME),
            serde_json::to_string(&dead).unwrap(),
        )
        .unwrap();
        let lock = PackageLock::try_acquire(temp.path(), "me").unwrap();
        assert_eq!(lock.took_over, Some(dead));
        assert_eq!(
            current_holder(temp.path()).map(|h| h.command),
            Some("me".to_owned())
        );
    }
}
