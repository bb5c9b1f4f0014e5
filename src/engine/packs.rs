//! The action cache's store: entries appended to one pack file per
//! process, found through index files, in the manner of git's packs.
//!
//! A render stores hundreds or thousands of package runs. One file (and,
//! in cacache's layout, up to four directories) per entry made a cold
//! render spend most of its time allocating inodes: measured on ext4, a
//! cold 1,000-package render took 2.9× as long with per-entry files. Here
//! a process appends every entry it stores to `packs/<id>.pack` and, when
//! it is done ([`PackStore::finish`]), writes `index/<id>.idx`: one line
//! per entry, `<key> <pack> <offset> <length> <blake3>`. An index is
//! written whole and renamed into place after its pack, so a reader never
//! finds a line whose bytes are not there; a process killed before that
//! leaves only an unreferenced pack, which `cache prune` removes.
//!
//! Readers load every index (later ones win) and check each entry's
//! blake3 when they read it: a damaged entry is reported as corrupt and
//! never served, and the next store of its key supersedes it. When more
//! than [`MERGE_AT`] index files accumulate, a reader merges them into one.
//!
//! Packs are read through memory maps: a warm render reads every entry of
//! its tree (megabytes), and copying each into a fresh zeroed buffer cost
//! more than decoding it. Packs are only ever appended to, and removed
//! whole, never rewritten or truncated, so a mapped range stays valid.

use std::collections::{BTreeSet, HashMap};
use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// Index files a reader merges into one.
const MERGE_AT: usize = 32;

/// Where an entry's bytes are.
#[derive(Clone, Debug)]
struct Location {
    pack: String,
    offset: u64,
    len: u64,
    hash: blake3::Hash,
}

/// An entry whose bytes do not match its index line.
#[derive(Debug)]
pub(crate) struct Corrupt;

/// An entry's bytes: in its mapped pack, or (built in code) owned.
pub(crate) enum EntryBytes {
    /// A range of a mapped pack.
    Mapped {
        map: Arc<memmap2::Mmap>,
        start: usize,
        end: usize,
    },
    /// Bytes of its own.
    Owned(Vec<u8>),
}

impl From<Vec<u8>> for EntryBytes {
    fn from(bytes: Vec<u8>) -> EntryBytes {
        EntryBytes::Owned(bytes)
    }
}

impl std::ops::Deref for EntryBytes {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        match self {
            // In range: checked when the entry was read.
            EntryBytes::Mapped { map, start, end } => &map[*start..*end],
            EntryBytes::Owned(bytes) => bytes,
        }
    }
}

/// The pack a process is appending to.
struct Writer {
    id: String,
    file: File,
    offset: u64,
    lines: String,
}

/// A pack store in a directory.
pub(crate) struct PackStore {
    dir: PathBuf,
    /// Every published entry (loaded on the first read) and this process's
    /// own.
    index: Mutex<Option<HashMap<String, Location>>>,
    packs: Mutex<HashMap<String, Arc<memmap2::Mmap>>>,
    writer: Mutex<Option<Writer>>,
}

impl PackStore {
    /// The store in `dir` (created on the first store).
    pub(crate) fn open(dir: PathBuf) -> PackStore {
        PackStore {
            dir,
            index: Mutex::new(None),
            packs: Mutex::default(),
            writer: Mutex::default(),
        }
    }

    /// The bytes stored under `key`: `Ok(None)` when there are none (or
    /// their pack is gone), `Err` when they do not match their digest.
    pub(crate) fn get(&self, key: &str) -> Result<Option<EntryBytes>, Corrupt> {
        let location = {
            let Ok(mut index) = self.index.lock() else {
                return Ok(None);
            };
            let index = index.get_or_insert_with(|| load_index(&self.dir));
            match index.get(key) {
                Some(location) => location.clone(),
                None => return Ok(None),
            }
        };
        let start = usize::try_from(location.offset).map_err(|_| Corrupt)?;
        let end = usize::try_from(location.len)
            .ok()
            .and_then(|len| start.checked_add(len))
            .ok_or(Corrupt)?;
        let Some(map) = self.pack(&location.pack, end) else {
            return Ok(None);
        };
        // A pack shorter than its index says (damaged) is corrupt, not a panic.
        let bytes = map.get(start..end).ok_or(Corrupt)?;
        if blake3::hash(bytes) != location.hash {
            return Err(Corrupt);
        }
        Ok(Some(EntryBytes::Mapped { map, start, end }))
    }

    /// The map of pack `id`, covering at least `len` bytes when the file
    /// has them (this process's own pack grows: it is mapped again).
    fn pack(&self, id: &str, len: usize) -> Option<Arc<memmap2::Mmap>> {
        let mut packs = self.packs.lock().ok()?;
        if let Some(map) = packs.get(id)
            && map.len() >= len
        {
            return Some(map.clone());
        }
        let file = File::open(self.dir.join("packs").join(format!("{id}.pack"))).ok()?;
        // SAFETY: packs are append-only and removed whole (see the module
        // doc): the mapped bytes never change while mapped.
        let map = Arc::new(unsafe { memmap2::Mmap::map(&file) }.ok()?);
        packs.insert(id.to_owned(), map.clone());
        Some(map)
    }

    /// Appends an entry (the concatenation of `parts`) under `key`; it is
    /// found by other processes once [`PackStore::finish`] has run.
    pub(crate) fn put(&self, key: &str, parts: &[&[u8]]) -> std::io::Result<()> {
        let mut guard = self
            .writer
            .lock()
            .map_err(|_| std::io::Error::other("pack writer poisoned"))?;
        if guard.is_none() {
            *guard = Some(self.new_writer()?);
        }
        let Some(writer) = guard.as_mut() else {
            return Err(std::io::Error::other("no pack writer"));
        };
        let mut hasher = blake3::Hasher::new();
        let mut len = 0u64;
        for part in parts {
            writer.file.write_all(part)?;
            hasher.update(part);
            len += part.len() as u64;
        }
        let line = format!(
            "{key} {} {} {len} {}\n",
            writer.id,
            writer.offset,
            hasher.finalize().to_hex()
        );
        let location = Location {
            pack: writer.id.clone(),
            offset: writer.offset,
            len,
            hash: hasher.finalize(),
        };
        writer.lines.push_str(&line);
        writer.offset += len;
        // This process finds its own entries before they are published (a
        // watch session whose edit is undone).
        if let Ok(mut index) = self.index.lock()
            && let Some(index) = index.as_mut()
        {
            index.insert(key.to_owned(), location);
        }
        Ok(())
    }

    fn new_writer(&self) -> std::io::Result<Writer> {
        let packs = self.dir.join("packs");
        std::fs::create_dir_all(&packs)?;
        std::fs::create_dir_all(self.dir.join("index"))?;
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |since| since.as_nanos());
        let id = format!("{nanos:020}-{}", std::process::id());
        let file = File::create_new(packs.join(format!("{id}.pack")))?;
        Ok(Writer {
            id,
            file,
            offset: 0,
            lines: String::new(),
        })
    }

    /// Publishes what this process stored: its index is written whole and
    /// renamed into place. Later stores start a new pack.
    pub(crate) fn finish(&self) -> std::io::Result<()> {
        let Some(writer) = self.writer.lock().ok().and_then(|mut guard| guard.take()) else {
            return Ok(());
        };
        writer.file.sync_data().ok();
        write_index(&self.dir, &writer.id, &writer.lines)
    }
}

impl Drop for PackStore {
    fn drop(&mut self) {
        if let Err(error) = self.finish() {
            tracing::debug!(target: "krender::actions", %error, "writing the pack index failed");
        }
    }
}

/// Writes `index/<id>.idx` through a temporary file.
fn write_index(dir: &Path, id: &str, lines: &str) -> std::io::Result<()> {
    let index = dir.join("index");
    let temp = index.join(format!(".{id}.idx.tmp"));
    std::fs::write(&temp, lines)?;
    std::fs::rename(&temp, index.join(format!("{id}.idx")))
}

/// The index files, oldest first (their names start with the time).
fn index_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir.join("index"))
        .map(|entries| {
            entries
                .flatten()
                .map(|entry| entry.path())
                .filter(|path| path.extension().is_some_and(|ext| ext == "idx"))
                .collect()
        })
        .unwrap_or_default();
    files.sort();
    files
}

fn parse_line(line: &str) -> Option<(String, Location)> {
    let mut fields = line.split(' ');
    let key = fields.next()?.to_owned();
    let pack = fields.next()?.to_owned();
    let offset = fields.next()?.parse().ok()?;
    let len = fields.next()?.parse().ok()?;
    let hash = blake3::Hash::from_hex(fields.next()?).ok()?;
    let valid_pack = !pack.is_empty() && pack.bytes().all(|b| b.is_ascii_digit() || b == b'-');
    (fields.next().is_none() && valid_pack).then_some((
        key,
        Location {
            pack,
            offset,
            len,
            hash,
        },
    ))
}

/// Every index line (later files win), merging the files when there are
/// many.
fn load_index(dir: &Path) -> HashMap<String, Location> {
    let files = index_files(dir);
    let mut index = HashMap::new();
    for file in &files {
        let Ok(text) = std::fs::read_to_string(file) else {
            continue;
        };
        index.extend(text.lines().filter_map(parse_line));
    }
    if files.len() > MERGE_AT {
        merge(dir, &files, &index);
    }
    index
}

/// Replaces `files` by one index holding `index` (best effort: a failure
/// leaves them as they are).
fn merge(dir: &Path, files: &[PathBuf], index: &HashMap<String, Location>) {
    let mut lines = String::new();
    // Sorted, so that the merged file does not depend on hash order.
    let mut entries: Vec<(&String, &Location)> = index.iter().collect();
    entries.sort_by(|a, b| a.0.cmp(b.0));
    for (key, at) in entries {
        lines.push_str(&format!(
            "{key} {} {} {} {}\n",
            at.pack,
            at.offset,
            at.len,
            at.hash.to_hex()
        ));
    }
    // Named after the newest file it replaces, so it sorts before any
    // index written since.
    let Some(newest) = files.last().and_then(|file| file.file_stem()) else {
        return;
    };
    let id = format!("{}-merged", newest.to_string_lossy());
    if write_index(dir, &id, &lines).is_ok() {
        for file in files {
            let _ = std::fs::remove_file(file);
        }
    }
}

/// Entries (index lines whose pack exists) and the bytes of the packs.
pub(crate) fn summarize(dir: &Path) -> std::io::Result<(u64, u64)> {
    let packs = existing_packs(dir);
    let entries = load_index(dir)
        .values()
        .filter(|at| packs.contains_key(&at.pack))
        .count() as u64;
    Ok((entries, packs.values().sum()))
}

/// Pack ids and sizes.
fn existing_packs(dir: &Path) -> HashMap<String, u64> {
    std::fs::read_dir(dir.join("packs"))
        .map(|entries| {
            entries
                .flatten()
                .filter_map(|entry| {
                    let name = entry.file_name().to_string_lossy().into_owned();
                    let id = name.strip_suffix(".pack")?.to_owned();
                    Some((id, entry.metadata().ok()?.len()))
                })
                .collect()
        })
        .unwrap_or_default()
}

/// Removes the packs (with their entries) and index files last written
/// before `cutoff`, and packs no index names; returns (entries removed,
/// entries kept).
pub(crate) fn prune(dir: &Path, cutoff: std::time::SystemTime) -> std::io::Result<(u64, u64)> {
    let index = load_index(dir);
    let old = |path: &Path| {
        std::fs::metadata(path)
            .and_then(|meta| meta.modified())
            .is_ok_and(|modified| modified < cutoff)
    };
    let named: BTreeSet<&str> = index.values().map(|at| at.pack.as_str()).collect();
    let mut removed_packs = BTreeSet::new();
    for id in existing_packs(dir).into_keys() {
        let path = dir.join("packs").join(format!("{id}.pack"));
        if old(&path) || (!named.contains(id.as_str()) && old_enough_to_be_orphaned(&path)) {
            std::fs::remove_file(&path)?;
            removed_packs.insert(id);
        }
    }
    for file in index_files(dir) {
        if old(&file) {
            std::fs::remove_file(&file)?;
        }
    }
    let removed = index
        .values()
        .filter(|at| removed_packs.contains(&at.pack))
        .count() as u64;
    Ok((removed, index.len() as u64 - removed))
}

/// A pack without an index is one being written, or one a killed process
/// left: after a day it is the latter.
fn old_enough_to_be_orphaned(path: &Path) -> bool {
    std::fs::metadata(path)
        .and_then(|meta| meta.modified())
        .ok()
        .and_then(|modified| modified.elapsed().ok())
        .is_some_and(|age| age > std::time::Duration::from_secs(86_400))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_are_found_after_finish_and_damage_is_caught() {
        let dir = tempfile::tempdir().unwrap();
        let store = PackStore::open(dir.path().to_path_buf());
        store.put("a", &[b"hello ", b"world"]).unwrap();
        store.put("b", &[b"second"]).unwrap();
        // Not published yet: another process does not see it.
        assert!(
            PackStore::open(dir.path().to_path_buf())
                .get("a")
                .unwrap()
                .is_none()
        );
        store.finish().unwrap();
        let reader = PackStore::open(dir.path().to_path_buf());
        assert_eq!(&*reader.get("a").unwrap().unwrap(), b"hello world");
        assert_eq!(&*reader.get("b").unwrap().unwrap(), b"second");
        assert!(reader.get("c").unwrap().is_none());
        assert_eq!(summarize(dir.path()).unwrap(), (2, 17));
        // Flip a byte of the pack: the entry is corrupt, the other fine.
        let pack = std::fs::read_dir(dir.path().join("packs"))
            .unwrap()
            .next()
            .unwrap()
            .unwrap()
            .path();
        let mut bytes = std::fs::read(&pack).unwrap();
        bytes[0] ^= 1;
        std::fs::write(&pack, bytes).unwrap();
        let reader = PackStore::open(dir.path().to_path_buf());
        assert!(reader.get("a").is_err());
        assert_eq!(&*reader.get("b").unwrap().unwrap(), b"second");
        // A later store of the key supersedes it.
        reader.put("a", &[b"fresh"]).unwrap();
        reader.finish().unwrap();
        let again = PackStore::open(dir.path().to_path_buf());
        assert_eq!(&*again.get("a").unwrap().unwrap(), b"fresh");
    }

    /// A process finds what it stored before publishing it (a watch
    /// session whose edit is undone); others do not.
    #[test]
    fn a_process_reads_its_own_entries_before_finishing() {
        let dir = tempfile::tempdir().unwrap();
        let store = PackStore::open(dir.path().to_path_buf());
        assert!(store.get("a").unwrap().is_none());
        store.put("a", &[b"own"]).unwrap();
        assert_eq!(&*store.get("a").unwrap().unwrap(), b"own");
        let other = PackStore::open(dir.path().to_path_buf());
        assert!(other.get("a").unwrap().is_none());
    }

    #[test]
    fn many_index_files_are_merged_and_prune_removes_old_packs() {
        let dir = tempfile::tempdir().unwrap();
        for i in 0..(MERGE_AT + 3) {
            let store = PackStore::open(dir.path().to_path_buf());
            store
                .put(&format!("k{i}"), &[format!("v{i}").as_bytes()])
                .unwrap();
        }
        let reader = PackStore::open(dir.path().to_path_buf());
        assert_eq!(&*reader.get("k0").unwrap().unwrap(), b"v0");
        assert_eq!(index_files(dir.path()).len(), 1);
        assert_eq!(
            &*PackStore::open(dir.path().to_path_buf())
                .get("k34")
                .unwrap()
                .unwrap(),
            b"v34"
        );
        let future = std::time::SystemTime::now() + std::time::Duration::from_secs(60);
        assert_eq!(prune(dir.path(), std::time::UNIX_EPOCH).unwrap(), (0, 35));
        assert_eq!(prune(dir.path(), future).unwrap(), (35, 0));
        assert!(
            PackStore::open(dir.path().to_path_buf())
                .get("k1")
                .unwrap()
                .is_none()
        );
    }

    #[test]
    fn malformed_index_lines_are_ignored() {
        for line in [
            "",
            "k",
            "k p 0 1",
            "k ../x 0 1 00",
            "k 1 0 x 00",
            "k 1 0 1 zz extra",
        ] {
            assert!(parse_line(line).is_none(), "{line:?}");
        }
    }
}
