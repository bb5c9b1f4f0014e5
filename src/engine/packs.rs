//! The local store's files: entries appended to one pack file per process,
//! found through sorted binary index files, in the manner of git's packs.
//!
//! A render stores thousands of small entries (resources, run records).
//! One file per entry made a cold render spend most of its time allocating
//! inodes; here a process appends every entry it stores to
//! `packs/<id>.pack` and, when it is done ([`PackStore::finish`]), writes
//! `index/<id>.idx`: its entries sorted by key, each a fixed-size record
//! (key, pack, offset, length, blake3 of the bytes). An index is written
//! whole and renamed into place after its pack, so a reader never finds an
//! entry whose bytes are not there; a process killed before that leaves
//! only an unreferenced pack, which `cache prune` removes.
//!
//! Readers map the index files and binary-search them, newest first: a
//! render that looks up a few thousand keys reads a few pages of each, not
//! the whole index. Every entry's blake3 is checked when it is read: a
//! damaged entry is reported as corrupt and never served, and the next
//! store of its key supersedes it. When more than [`MERGE_AT`] index files
//! accumulate, a reader merges them into one.
//!
//! Packs are read through memory maps (a warm render reads megabytes of
//! entries). They are only ever appended to and removed whole, never
//! rewritten or truncated, so a mapped range stays valid. A pack's
//! modification time is refreshed when a process first reads from it, so
//! pruning by age removes what no render used lately.

use std::collections::HashMap;
use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// Index files a reader merges into one.
const MERGE_AT: usize = 16;

/// The first bytes of an index file.
// KRX3: entries start with a byte saying how they are stored (packs of
// KRX2 indexes held entries as they were).
const INDEX_MAGIC: &[u8; 4] = b"KRX3";

/// An entry stored as given.
const RAW: u8 = 0;
/// An entry stored LZ4-compressed (its length first): resources and
/// records are YAML's words over and over, and a compressed store stays
/// near the size of the tree it holds.
const LZ4: u8 = 1;
/// Entries shorter than this are stored raw: compressing them gains less
/// than the length it adds.
const COMPRESS_FROM: usize = 128;

/// Bytes of one index record: key, pack number, offset, length, blake3.
const RECORD: usize = 32 + 4 + 8 + 8 + 32;

/// An entry's key (a blake3 digest).
pub(crate) type Key = [u8; 32];

/// Where an entry's bytes are.
#[derive(Clone, Debug)]
struct Location {
    pack: Arc<str>,
    offset: u64,
    len: u64,
    hash: [u8; 32],
}

/// An entry whose bytes do not match their index record.
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

/// One mapped index file.
struct IndexFile {
    map: memmap2::Mmap,
    /// Pack ids, by the number the records use.
    packs: Vec<Arc<str>>,
    /// Where the records start.
    records: usize,
    /// How many.
    count: usize,
}

impl IndexFile {
    fn open(path: &Path) -> Option<IndexFile> {
        let file = File::open(path).ok()?;
        // SAFETY: index files are written whole and renamed into place,
        // never changed after: the mapped bytes do not change while mapped.
        let map = unsafe { memmap2::Mmap::map(&file) }.ok()?;
        let mut at = INDEX_MAGIC.len();
        if map.get(..at)? != INDEX_MAGIC {
            return None;
        }
        let read_u32 = |at: &mut usize| -> Option<u32> {
            let bytes = map.get(*at..*at + 4)?;
            *at += 4;
            Some(u32::from_le_bytes(bytes.try_into().ok()?))
        };
        let pack_count = read_u32(&mut at)?;
        let mut packs = Vec::new();
        for _ in 0..pack_count {
            let len = usize::try_from(read_u32(&mut at)?).ok()?;
            let id = std::str::from_utf8(map.get(at..at + len)?).ok()?;
            if !valid_pack_id(id) {
                return None;
            }
            packs.push(Arc::from(id));
            at += len;
        }
        let count = u64::from_le_bytes(map.get(at..at + 8)?.try_into().ok()?);
        let count = usize::try_from(count).ok()?;
        at += 8;
        if map.len() != at.checked_add(count.checked_mul(RECORD)?)? {
            return None;
        }
        Some(IndexFile {
            map,
            packs,
            records: at,
            count,
        })
    }

    fn record(&self, i: usize) -> &[u8] {
        let start = self.records + i * RECORD;
        &self.map[start..start + RECORD]
    }

    fn key(&self, i: usize) -> &[u8] {
        &self.record(i)[..32]
    }

    fn location(&self, i: usize) -> Option<Location> {
        let record = self.record(i);
        let pack = u32::from_le_bytes(record[32..36].try_into().ok()?);
        Some(Location {
            pack: self.packs.get(usize::try_from(pack).ok()?)?.clone(),
            offset: u64::from_le_bytes(record[36..44].try_into().ok()?),
            len: u64::from_le_bytes(record[44..52].try_into().ok()?),
            hash: record[52..84].try_into().ok()?,
        })
    }

    fn find(&self, key: &Key) -> Option<Location> {
        let (mut low, mut high) = (0, self.count);
        while low < high {
            let middle = low + (high - low) / 2;
            match self.key(middle).cmp(key.as_slice()) {
                std::cmp::Ordering::Less => low = middle + 1,
                std::cmp::Ordering::Greater => high = middle,
                std::cmp::Ordering::Equal => return self.location(middle),
            }
        }
        None
    }

    fn entries(&self) -> impl Iterator<Item = (Key, Location)> + '_ {
        (0..self.count).filter_map(|i| Some((self.key(i).try_into().ok()?, self.location(i)?)))
    }
}

/// The pack a process is appending to, through a buffer (a render
/// appends thousands of small entries).
struct Writer {
    id: Arc<str>,
    file: std::io::BufWriter<File>,
    offset: u64,
    /// Bytes of the pack on disk (the rest are in the buffer).
    flushed: u64,
}

/// A pack store in a directory.
pub(crate) struct PackStore {
    dir: PathBuf,
    /// The published index files, newest first (mapped on the first read).
    indexes: Mutex<Option<Arc<Vec<IndexFile>>>>,
    /// This process's own entries, not yet published.
    own: Mutex<HashMap<Key, Location>>,
    packs: Mutex<HashMap<Arc<str>, Arc<memmap2::Mmap>>>,
    writer: Mutex<Option<Writer>>,
}

impl PackStore {
    /// The store in `dir` (created on the first store).
    pub(crate) fn open(dir: PathBuf) -> PackStore {
        PackStore {
            dir,
            indexes: Mutex::new(None),
            own: Mutex::default(),
            packs: Mutex::default(),
            writer: Mutex::default(),
        }
    }

    fn indexes(&self) -> Arc<Vec<IndexFile>> {
        let Ok(mut indexes) = self.indexes.lock() else {
            return Arc::default();
        };
        indexes
            .get_or_insert_with(|| Arc::new(load_indexes(&self.dir)))
            .clone()
    }

    fn locate(&self, key: &Key) -> Option<Location> {
        if let Some(location) = self.own.lock().ok()?.get(key) {
            return Some(location.clone());
        }
        self.indexes().iter().find_map(|index| index.find(key))
    }

    /// Whether an entry is stored under `key` (its bytes are not checked).
    pub(crate) fn contains(&self, key: &Key) -> bool {
        self.locate(key).is_some()
    }

    /// The bytes stored under `key`: `Ok(None)` when there are none (or
    /// their pack is gone), `Err` when they do not match their digest.
    pub(crate) fn get(&self, key: &Key) -> Result<Option<EntryBytes>, Corrupt> {
        let Some(location) = self.locate(key) else {
            return Ok(None);
        };
        let start = usize::try_from(location.offset).map_err(|_| Corrupt)?;
        let end = usize::try_from(location.len)
            .ok()
            .and_then(|len| start.checked_add(len))
            .ok_or(Corrupt)?;
        self.flush_own(&location.pack, end as u64);
        let Some(map) = self.pack(&location.pack, end) else {
            return Ok(None);
        };
        // A pack shorter than its index says (damaged) is corrupt, not a panic.
        let bytes = map.get(start..end).ok_or(Corrupt)?;
        if blake3::hash(bytes).as_bytes() != &location.hash {
            return Err(Corrupt);
        }
        match bytes.first() {
            Some(&RAW) => Ok(Some(EntryBytes::Mapped {
                map,
                start: start + 1,
                end,
            })),
            Some(&LZ4) => lz4_flex::block::decompress_size_prepended(&bytes[1..])
                .map(|bytes| Some(EntryBytes::Owned(bytes)))
                .map_err(|_| Corrupt),
            _ => Err(Corrupt),
        }
    }

    /// Writes this process's buffered entries of pack `id` out, when an
    /// entry ending at `end` is still in the buffer.
    fn flush_own(&self, id: &Arc<str>, end: u64) {
        let Ok(mut guard) = self.writer.lock() else {
            return;
        };
        if let Some(writer) = guard.as_mut()
            && writer.id == *id
            && writer.flushed < end
            && writer.file.flush().is_ok()
        {
            writer.flushed = writer.offset;
        }
    }

    /// The map of pack `id`, covering at least `len` bytes when the file
    /// has them (this process's own pack grows: it is mapped again).
    fn pack(&self, id: &Arc<str>, len: usize) -> Option<Arc<memmap2::Mmap>> {
        let mut packs = self.packs.lock().ok()?;
        if let Some(map) = packs.get(id)
            && map.len() >= len
        {
            return Some(map.clone());
        }
        let path = self.dir.join("packs").join(format!("{id}.pack"));
        let file = File::open(&path).ok()?;
        if !packs.contains_key(id) {
            // Used now: pruning by age keeps it (best effort).
            let _ = file.set_modified(std::time::SystemTime::now());
        }
        // SAFETY: packs are append-only and removed whole (see the module
        // doc): the mapped bytes never change while mapped.
        let map = Arc::new(unsafe { memmap2::Mmap::map(&file) }.ok()?);
        packs.insert(id.clone(), map.clone());
        Some(map)
    }

    /// Appends an entry (the concatenation of `parts`) under `key`; it is
    /// found by other processes once [`PackStore::finish`] has run.
    pub(crate) fn put(&self, key: &Key, parts: &[&[u8]]) -> std::io::Result<()> {
        // Compressed and hashed before the writer is taken: the render's
        // threads store resources all the time, and only the append is
        // shared.
        let whole: usize = parts.iter().map(|part| part.len()).sum();
        let compressed = (whole >= COMPRESS_FROM)
            .then(|| lz4_flex::block::compress_prepend_size(&parts.concat()))
            .filter(|compressed| compressed.len() < whole);
        let stored: Vec<&[u8]> = match &compressed {
            Some(compressed) => vec![&[LZ4], compressed],
            None => std::iter::once(&[RAW][..])
                .chain(parts.iter().copied())
                .collect(),
        };
        let mut hasher = blake3::Hasher::new();
        for part in &stored {
            hasher.update(part);
        }
        let hash = *hasher.finalize().as_bytes();
        let len: u64 = stored.iter().map(|part| part.len() as u64).sum();
        let location = {
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
            for part in stored {
                writer.file.write_all(part)?;
            }
            let location = Location {
                pack: writer.id.clone(),
                offset: writer.offset,
                len,
                hash,
            };
            writer.offset += len;
            location
        };
        if let Ok(mut own) = self.own.lock() {
            own.insert(*key, location);
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
        let id: Arc<str> = Arc::from(format!("{nanos:020}-{}", std::process::id()));
        let file = File::create_new(packs.join(format!("{id}.pack")))?;
        Ok(Writer {
            id,
            file: std::io::BufWriter::with_capacity(1 << 20, file),
            offset: 0,
            flushed: 0,
        })
    }

    /// Publishes what this process stored: its index is written whole and
    /// renamed into place. Later stores start a new pack.
    pub(crate) fn finish(&self) -> std::io::Result<()> {
        let Some(writer) = self.writer.lock().ok().and_then(|mut guard| guard.take()) else {
            return Ok(());
        };
        let file = writer
            .file
            .into_inner()
            .map_err(|error| error.into_error())?;
        file.sync_data().ok();
        let entries: Vec<(Key, Location)> = match self.own.lock() {
            Ok(own) => own
                .iter()
                .filter(|(_, at)| at.pack == writer.id)
                .map(|(key, at)| (*key, at.clone()))
                .collect(),
            Err(_) => Vec::new(),
        };
        write_index(&self.dir, &writer.id, entries)?;
        // The published entries are read through the new index from now on.
        if let Ok(mut indexes) = self.indexes.lock() {
            *indexes = None;
        }
        if let Ok(mut own) = self.own.lock() {
            own.retain(|_, at| at.pack != writer.id);
        }
        Ok(())
    }
}

impl Drop for PackStore {
    fn drop(&mut self) {
        if let Err(error) = self.finish() {
            tracing::debug!(target: "krender::store", %error, "writing the pack index failed");
        }
    }
}

/// A pack id as this module names them (time and process id).
fn valid_pack_id(id: &str) -> bool {
    !id.is_empty() && id.bytes().all(|b| b.is_ascii_digit() || b == b'-')
}

/// Writes `index/<id>.idx` (entries sorted by key, later ones of a key
/// winning) through a temporary file.
fn write_index(dir: &Path, id: &str, mut entries: Vec<(Key, Location)>) -> std::io::Result<()> {
    entries.sort_by_key(|entry| entry.0);
    entries.dedup_by(|later, earlier| {
        // `dedup_by` keeps the first of a run; the later one wins here.
        if later.0 == earlier.0 {
            std::mem::swap(later, earlier);
            true
        } else {
            false
        }
    });
    let mut packs: Vec<Arc<str>> = Vec::new();
    let mut numbers: HashMap<Arc<str>, u32> = HashMap::new();
    for (_, at) in &entries {
        if !numbers.contains_key(&at.pack) {
            numbers.insert(at.pack.clone(), packs.len() as u32);
            packs.push(at.pack.clone());
        }
    }
    let mut bytes = Vec::with_capacity(64 + entries.len() * RECORD);
    bytes.extend_from_slice(INDEX_MAGIC);
    bytes.extend_from_slice(&(packs.len() as u32).to_le_bytes());
    for pack in &packs {
        bytes.extend_from_slice(&(pack.len() as u32).to_le_bytes());
        bytes.extend_from_slice(pack.as_bytes());
    }
    bytes.extend_from_slice(&(entries.len() as u64).to_le_bytes());
    for (key, at) in &entries {
        bytes.extend_from_slice(key);
        bytes.extend_from_slice(&numbers.get(&at.pack).copied().unwrap_or(0).to_le_bytes());
        bytes.extend_from_slice(&at.offset.to_le_bytes());
        bytes.extend_from_slice(&at.len.to_le_bytes());
        bytes.extend_from_slice(&at.hash);
    }
    let index = dir.join("index");
    std::fs::create_dir_all(&index)?;
    let temp = index.join(format!(".{id}.idx.tmp"));
    std::fs::write(&temp, bytes)?;
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

/// The index files, mapped, newest first; merged into one first when
/// there are many. A file that does not read as an index is skipped.
fn load_indexes(dir: &Path) -> Vec<IndexFile> {
    let files = index_files(dir);
    if files.len() > MERGE_AT {
        merge(dir, &files);
        return load_indexes_from(&index_files(dir));
    }
    load_indexes_from(&files)
}

fn load_indexes_from(files: &[PathBuf]) -> Vec<IndexFile> {
    files
        .iter()
        .rev()
        .filter_map(|file| IndexFile::open(file))
        .collect()
}

/// Every entry of the index files, newest winning.
fn all_entries(indexes: &[IndexFile]) -> HashMap<Key, Location> {
    let mut entries = HashMap::new();
    // Oldest first, so that newer entries replace older ones.
    for index in indexes.iter().rev() {
        entries.extend(index.entries());
    }
    entries
}

/// Replaces `files` by one index holding all their entries (best effort: a
/// failure leaves them as they are).
fn merge(dir: &Path, files: &[PathBuf]) {
    let entries = all_entries(&load_indexes_from(files));
    // Named after the newest file it replaces, so it sorts before any
    // index written since.
    let Some(newest) = files.last().and_then(|file| file.file_stem()) else {
        return;
    };
    let id = format!("{}-merged", newest.to_string_lossy());
    if write_index(dir, &id, entries.into_iter().collect()).is_ok() {
        for file in files {
            let _ = std::fs::remove_file(file);
        }
    }
}

/// Entries (whose pack exists) and the bytes of the packs.
pub(crate) fn summarize(dir: &Path) -> std::io::Result<(u64, u64)> {
    let packs = existing_packs(dir);
    let entries = all_entries(&load_indexes(dir))
        .values()
        .filter(|at| packs.contains_key(&*at.pack))
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

/// Removes the packs last used before `cutoff` (with their entries), index
/// files older than that which name no remaining pack, and packs no index
/// names; returns (entries removed, entries kept).
pub(crate) fn prune(dir: &Path, cutoff: std::time::SystemTime) -> std::io::Result<(u64, u64)> {
    let entries = all_entries(&load_indexes(dir));
    let old = |path: &Path| {
        std::fs::metadata(path)
            .and_then(|meta| meta.modified())
            .is_ok_and(|modified| modified < cutoff)
    };
    let named: std::collections::BTreeSet<&str> = entries.values().map(|at| &*at.pack).collect();
    let mut removed_packs = std::collections::BTreeSet::new();
    for id in existing_packs(dir).into_keys() {
        let path = dir.join("packs").join(format!("{id}.pack"));
        if old(&path) || (!named.contains(id.as_str()) && old_enough_to_be_orphaned(&path)) {
            std::fs::remove_file(&path)?;
            removed_packs.insert(id);
        }
    }
    let remaining = existing_packs(dir);
    for file in index_files(dir) {
        let Some(index) = IndexFile::open(&file) else {
            continue;
        };
        let names_remaining = index
            .packs
            .iter()
            .any(|pack| remaining.contains_key(&**pack));
        drop(index);
        if old(&file) && !names_remaining {
            std::fs::remove_file(&file)?;
        }
    }
    let removed = entries
        .values()
        .filter(|at| removed_packs.contains(&*at.pack))
        .count() as u64;
    Ok((removed, entries.len() as u64 - removed))
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

    fn key(name: &str) -> Key {
        *blake3::hash(name.as_bytes()).as_bytes()
    }

    #[test]
    fn entries_are_found_after_finish_and_damage_is_caught() {
        let dir = tempfile::tempdir().unwrap();
        let store = PackStore::open(dir.path().to_path_buf());
        store.put(&key("a"), &[b"hello ", b"world"]).unwrap();
        store.put(&key("b"), &[b"second"]).unwrap();
        // Not published yet: another process does not see it.
        assert!(
            PackStore::open(dir.path().to_path_buf())
                .get(&key("a"))
                .unwrap()
                .is_none()
        );
        store.finish().unwrap();
        // This process still finds them, now through the index.
        assert_eq!(&*store.get(&key("a")).unwrap().unwrap(), b"hello world");
        let reader = PackStore::open(dir.path().to_path_buf());
        assert_eq!(&*reader.get(&key("a")).unwrap().unwrap(), b"hello world");
        assert_eq!(&*reader.get(&key("b")).unwrap().unwrap(), b"second");
        assert!(reader.get(&key("c")).unwrap().is_none());
        assert!(reader.contains(&key("b")) && !reader.contains(&key("c")));
        // Each entry's bytes and the byte saying how it is stored.
        assert_eq!(summarize(dir.path()).unwrap(), (2, 17 + 2));
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
        assert!(reader.get(&key("a")).is_err());
        assert_eq!(&*reader.get(&key("b")).unwrap().unwrap(), b"second");
        // A later store of the key supersedes it.
        reader.put(&key("a"), &[b"fresh"]).unwrap();
        reader.finish().unwrap();
        let again = PackStore::open(dir.path().to_path_buf());
        assert_eq!(&*again.get(&key("a")).unwrap().unwrap(), b"fresh");
    }

    /// A long entry that compresses is stored compressed and reads back
    /// whole; one that does not is stored as it is.
    #[test]
    fn long_entries_are_stored_compressed() {
        let dir = tempfile::tempdir().unwrap();
        let store = PackStore::open(dir.path().to_path_buf());
        let resource = "metadata:\n  namespace: bench\n  labels:\n    owner: bench\n".repeat(50);
        let noise: Vec<u8> = (0..200u32)
            .flat_map(|i| blake3::hash(&i.to_le_bytes()).as_bytes().to_vec())
            .collect();
        store.put(&key("text"), &[resource.as_bytes()]).unwrap();
        store
            .put(&key("noise"), &[&noise[..100], &noise[100..]])
            .unwrap();
        store.finish().unwrap();
        let reader = PackStore::open(dir.path().to_path_buf());
        assert_eq!(
            &*reader.get(&key("text")).unwrap().unwrap(),
            resource.as_bytes()
        );
        assert_eq!(&*reader.get(&key("noise")).unwrap().unwrap(), &noise[..]);
        let (entries, bytes) = summarize(dir.path()).unwrap();
        assert_eq!(entries, 2);
        assert!(
            bytes < (resource.len() / 4 + noise.len() + 1) as u64,
            "{bytes}"
        );
        assert!(bytes > noise.len() as u64);
    }

    /// A process finds what it stored before publishing it (a watch
    /// session whose edit is undone); others do not.
    #[test]
    fn a_process_reads_its_own_entries_before_finishing() {
        let dir = tempfile::tempdir().unwrap();
        let store = PackStore::open(dir.path().to_path_buf());
        assert!(store.get(&key("a")).unwrap().is_none());
        store.put(&key("a"), &[b"own"]).unwrap();
        assert_eq!(&*store.get(&key("a")).unwrap().unwrap(), b"own");
        let other = PackStore::open(dir.path().to_path_buf());
        assert!(other.get(&key("a")).unwrap().is_none());
    }

    #[test]
    fn many_index_files_are_merged_and_prune_removes_old_packs() {
        let dir = tempfile::tempdir().unwrap();
        for i in 0..(MERGE_AT + 3) {
            let store = PackStore::open(dir.path().to_path_buf());
            store
                .put(&key(&format!("k{i}")), &[format!("v{i}").as_bytes()])
                .unwrap();
        }
        // The last one wins over an older entry of the same key.
        let store = PackStore::open(dir.path().to_path_buf());
        store.put(&key("k0"), &[b"newer"]).unwrap();
        drop(store);
        let reader = PackStore::open(dir.path().to_path_buf());
        assert_eq!(&*reader.get(&key("k0")).unwrap().unwrap(), b"newer");
        assert_eq!(&*reader.get(&key("k3")).unwrap().unwrap(), b"v3");
        assert_eq!(index_files(dir.path()).len(), 1);
        let count = MERGE_AT as u64 + 3;
        let future = std::time::SystemTime::now() + std::time::Duration::from_secs(60);
        assert_eq!(
            prune(dir.path(), std::time::UNIX_EPOCH).unwrap(),
            (0, count)
        );
        assert_eq!(prune(dir.path(), future).unwrap(), (count, 0));
        assert!(
            PackStore::open(dir.path().to_path_buf())
                .get(&key("k1"))
                .unwrap()
                .is_none()
        );
    }

    #[test]
    fn a_damaged_index_file_is_skipped() {
        let dir = tempfile::tempdir().unwrap();
        let store = PackStore::open(dir.path().to_path_buf());
        store.put(&key("a"), &[b"x"]).unwrap();
        store.finish().unwrap();
        let index = index_files(dir.path()).remove(0);
        let bytes = std::fs::read(&index).unwrap();
        for len in [0, 3, 8, bytes.len() - 1] {
            std::fs::write(&index, &bytes[..len]).unwrap();
            let reader = PackStore::open(dir.path().to_path_buf());
            assert!(reader.get(&key("a")).unwrap().is_none(), "{len}");
        }
    }
}
