//! File stamps: how a watch session re-reads only the files that changed.
//!
//! A session's refresh used to read every file of the tree to find the one
//! that was edited. Build tools (make, ninja, git's index) instead trust a
//! file whose metadata did not change: same size, inode, device, mtime and
//! ctime. The one hole is a file written twice within one timestamp tick
//! (the kernel stamps files from a coarse clock, 1–10 ms, and some file
//! systems keep whole seconds): its stamp can match while its bytes differ.
//! As in git's "racy" rule, a stamp is trusted only for a file whose mtime
//! is older than the time it was last looked at by more than the timestamp
//! resolution; a file changed around or after that time is read again.

use std::collections::HashMap;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// What identifies one version of a file without reading it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Stamp {
    len: u64,
    inode: u64,
    device: u64,
    mtime_ns: i128,
    ctime_ns: i128,
}

impl Stamp {
    fn of(meta: &std::fs::Metadata) -> Stamp {
        Stamp {
            len: meta.len(),
            inode: meta.ino(),
            device: meta.dev(),
            mtime_ns: i128::from(meta.mtime()) * 1_000_000_000 + i128::from(meta.mtime_nsec()),
            ctime_ns: i128::from(meta.ctime()) * 1_000_000_000 + i128::from(meta.ctime_nsec()),
        }
    }

    /// How far apart two writes may be and still get the same mtime. A
    /// file system that keeps nanoseconds stamps from the kernel's coarse
    /// clock (one tick, at most 10 ms at HZ=100); one whose mtimes are whole
    /// seconds (or whose file happened to land on one) may be as coarse as
    /// FAT's two seconds.
    fn resolution(&self) -> Duration {
        if self.mtime_ns % 1_000_000_000 != 0 {
            Duration::from_millis(50)
        } else {
            Duration::from_secs(2)
        }
    }
}

/// The files the last scans read, by absolute path: each file's stamp, the
/// time just before it was looked at, and its bytes.
#[derive(Debug, Default)]
pub struct FileStamps {
    files: HashMap<PathBuf, Entry>,
    /// Files krender itself wrote since they were read (see
    /// [`FileStamps::own_write`]).
    own: HashMap<PathBuf, OwnWrite>,
}

/// A file krender wrote: the digest of what it wrote, and what the render
/// that wrote it had read there.
#[derive(Clone, Debug)]
struct OwnWrite {
    written: blake3::Hash,
    read: Arc<[u8]>,
}

/// One file as last read.
#[derive(Clone, Debug)]
struct Entry {
    stamp: Stamp,
    looked_at: SystemTime,
    bytes: Arc<[u8]>,
}

/// One scan's reads: the previous stamps and what this scan saw,
/// collected from parallel readers.
#[derive(Debug)]
pub struct StampedReader<'a> {
    previous: &'a FileStamps,
    seen: Mutex<Vec<(PathBuf, Entry)>>,
}

impl FileStamps {
    /// A reader for a new scan that trusts this scan's stamps.
    pub fn reader(&self) -> StampedReader<'_> {
        StampedReader {
            previous: self,
            seen: Mutex::default(),
        }
    }

    /// Replaces the stamps with what a whole-tree scan saw (files it did
    /// not read are forgotten).
    pub fn replace(&mut self, seen: Seen) {
        self.files = seen.files.into_iter().collect();
    }

    /// Adds what a scan of some files saw, keeping the other stamps.
    pub fn merge(&mut self, seen: Seen) {
        self.files.extend(seen.files);
    }

    /// Records that krender wrote bytes with digest `written` to `path`
    /// (a render's own output). While the file holds exactly those bytes,
    /// reads answer with what the render had read there: its own output is
    /// not a change to its input (kpt's functions are idempotent, so the
    /// render of either is the same). A file not read before is left alone.
    pub fn own_write(&mut self, path: &Path, written: blake3::Hash) {
        // What the render read there (itself an earlier own write's input
        // when the file still held that write).
        let Some(read) = self.files.get(path).map(|entry| entry.bytes.clone()) else {
            tracing::debug!(path = %path.display(), "own write of a file not read");
            return;
        };
        self.own
            .insert(path.to_path_buf(), OwnWrite { written, read });
    }
}

/// What one scan read, detached from the stamps it trusted.
#[derive(Debug)]
pub struct Seen {
    files: Vec<(PathBuf, Entry)>,
}

impl StampedReader<'_> {
    /// What this scan read, for [`FileStamps::replace`] or [`FileStamps::merge`].
    pub fn into_seen(self) -> Seen {
        Seen {
            files: self.seen.into_inner().unwrap_or_default(),
        }
    }

    /// The bytes of `path`: the previous scan's when its stamp is unchanged
    /// and old enough to trust, otherwise read from disk.
    pub fn read(&self, path: &Path) -> std::io::Result<Arc<[u8]>> {
        let looked_at = SystemTime::now();
        let meta = std::fs::metadata(path)?;
        let stamp = Stamp::of(&meta);
        // A file that changes between the stat and the read keeps the
        // stamp taken before: the next scan sees a newer one and reads it.
        let bytes = match self.trusted(path, &stamp) {
            Some(bytes) => bytes,
            None => {
                let bytes: Arc<[u8]> = std::fs::read(path)?.into();
                match self.previous.own.get(path) {
                    Some(own) if blake3::hash(&bytes) == own.written => own.read.clone(),
                    _ => bytes,
                }
            }
        };
        if let Ok(mut seen) = self.seen.lock() {
            let entry = Entry {
                stamp,
                looked_at,
                bytes: bytes.clone(),
            };
            seen.push((path.to_path_buf(), entry));
        }
        Ok(bytes)
    }

    fn trusted(&self, path: &Path, stamp: &Stamp) -> Option<Arc<[u8]>> {
        let old = self.previous.files.get(path)?;
        if old.stamp != *stamp {
            return None;
        }
        let since_epoch = old.looked_at.duration_since(UNIX_EPOCH).ok()?;
        let trusted_before = since_epoch.checked_sub(stamp.resolution())?;
        let mtime = u128::try_from(stamp.mtime_ns).ok()?;
        (mtime < trusted_before.as_nanos()).then(|| old.bytes.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set_mtime(path: &Path, time: SystemTime) {
        let file = std::fs::File::options().write(true).open(path).unwrap();
        file.set_modified(time).unwrap();
    }

    /// One scan of `path` through `stamps`: its bytes, stamps replaced.
    fn scan(stamps: &mut FileStamps, path: &Path) -> Arc<[u8]> {
        let reader = stamps.reader();
        let bytes = reader.read(path).unwrap();
        stamps.replace(reader.into_seen());
        bytes
    }

    /// A render's own write reads as the input it was rendered from, as
    /// long as the file holds exactly what was written; any other content
    /// is read as it is.
    #[test]
    fn own_writes_read_as_their_input_until_the_file_changes() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("cm.yaml");
        std::fs::write(&path, "value: PLACEHOLDER\n").unwrap();
        let mut stamps = FileStamps::default();
        assert_eq!(&*scan(&mut stamps, &path), b"value: PLACEHOLDER\n");
        let rendered = b"value: rendered\n";
        std::fs::write(&path, rendered).unwrap();
        stamps.own_write(&path, blake3::hash(rendered));
        assert_eq!(&*scan(&mut stamps, &path), b"value: PLACEHOLDER\n");
        std::fs::write(&path, "value: edited\n").unwrap();
        assert_eq!(&*scan(&mut stamps, &path), b"value: edited\n");
    }

    #[test]
    fn an_old_unchanged_file_is_not_read_again_and_a_changed_one_is() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.yaml");
        std::fs::write(&path, "a: 1\n").unwrap();
        let an_hour_ago = SystemTime::now() - Duration::from_secs(3600);
        set_mtime(&path, an_hour_ago);
        let mut stamps = FileStamps::default();
        let first = scan(&mut stamps, &path);

        // Unchanged and old: the very same bytes come back, unread.
        let again = scan(&mut stamps, &path);
        assert!(Arc::ptr_eq(&first, &again));

        // Same length, same mtime, new bytes: the ctime (and for a
        // rewrite, usually the mtime) tells.
        std::fs::write(&path, "a: 2\n").unwrap();
        set_mtime(&path, an_hour_ago);
        assert_eq!(&*scan(&mut stamps, &path), b"a: 2\n");
    }

    #[test]
    fn a_file_changed_near_the_last_scan_is_always_read() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.yaml");
        std::fs::write(&path, "a: 1\n").unwrap();
        let mut stamps = FileStamps::default();
        let first = scan(&mut stamps, &path);
        // Written just now: its stamp could hide a second write in the
        // same tick, so the next scan reads it even though nothing changed.
        let again = scan(&mut stamps, &path);
        assert!(!Arc::ptr_eq(&first, &again));
        assert_eq!(first, again);
    }

    #[test]
    fn a_missing_file_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let stamps = FileStamps::default();
        assert!(stamps.reader().read(&dir.path().join("missing")).is_err());
    }
}
