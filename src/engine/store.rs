//! The content-addressed store every render reads and writes: blobs
//! (resources in their relocatable form, logs, run records) under the
//! blake3 of their bytes, and small action entries (what a package run or a
//! step over some resources produced) under the blake3 of their inputs, as
//! Bazel keeps its CAS and action cache. Nothing in a key or a value names
//! an absolute path, so two checkouts share everything.
//!
//! Three layers, each optional: memory (a render without a cache
//! directory), the cache directory's packs ([`super::packs`]), and a
//! remote ([`super::remote`]). A local miss is looked up remotely and a
//! remote hit is kept locally; a blob is written once wherever it already
//! is. Every read is verified: a blob against its digest, an entry against
//! the blake3 its pack recorded (and, from a remote, the frame's digest).
//! A damaged value is a miss, counted, never served.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use super::packs::{self, EntryBytes, PackStore};
use super::remote::{RemoteCache, Table};
use crate::hydrate::item::Digest;

/// The store's directory inside a cache directory.
pub fn store_dir(cache_dir: &Path) -> PathBuf {
    cache_dir.join("store")
}

/// Bytes read from the store.
pub(crate) type Bytes = EntryBytes;

/// What one process did with the store.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct StoreStats {
    /// Action entries found.
    pub action_hits: u64,
    /// Action entries looked up and not found.
    pub action_misses: u64,
    /// Blobs written (not already there).
    pub blobs_written: u64,
    /// Bytes of those.
    pub blob_bytes_written: u64,
    /// Values that failed their check (not served).
    pub corrupt: u64,
}

/// Where a stored value was found.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Origin {
    /// This process's memory or the cache directory.
    Local,
    /// The remote cache.
    Remote,
}

/// Blobs and entries by key, of a store without a cache directory.
type MemoryStore = HashMap<[u8; 32], Arc<[u8]>>;

/// The store of one render or session.
pub struct Store {
    /// Blobs and entries of a store without a cache directory.
    memory: Option<Mutex<MemoryStore>>,
    local: Option<PackStore>,
    remote: Option<Arc<RemoteCache>>,
    action_hits: AtomicU64,
    action_misses: AtomicU64,
    blobs_written: AtomicU64,
    blob_bytes_written: AtomicU64,
    corrupt: AtomicU64,
    /// A value read back was damaged: what is already here is checked
    /// before a write is skipped for it.
    distrust: std::sync::atomic::AtomicBool,
}

impl Store {
    fn with_layers(memory: bool, local: Option<PackStore>) -> Store {
        Store {
            memory: memory.then(Mutex::default),
            local,
            remote: None,
            action_hits: AtomicU64::new(0),
            action_misses: AtomicU64::new(0),
            blobs_written: AtomicU64::new(0),
            blob_bytes_written: AtomicU64::new(0),
            corrupt: AtomicU64::new(0),
            distrust: std::sync::atomic::AtomicBool::new(false),
        }
    }

    /// From now on, a blob already here counts only if it reads back
    /// whole: a render that found damage runs again and writes over it.
    pub(crate) fn distrust(&self) {
        self.distrust.store(true, Ordering::Relaxed);
    }

    /// A store in memory only: what a render without a cache keeps while it
    /// runs; nothing outlives the process.
    pub fn in_memory() -> Store {
        Store::with_layers(true, None)
    }

    /// The store in the cache directory `cache_dir`.
    pub fn on_disk(cache_dir: &Path) -> Store {
        Store::with_layers(false, Some(PackStore::open(store_dir(cache_dir))))
    }

    /// Also reads from, and (in read-write mode) pushes to, `remote`.
    pub fn with_remote(mut self, remote: Arc<RemoteCache>) -> Store {
        self.remote = Some(remote);
        self
    }

    /// Whether action entries outlive the process (a cache directory or a
    /// remote): a render without either looks nothing up.
    pub fn remembers(&self) -> bool {
        self.local.is_some() || self.remote.is_some()
    }

    /// The remote, if any.
    pub fn remote(&self) -> Option<&Arc<RemoteCache>> {
        self.remote.as_ref()
    }

    /// What the store did so far.
    pub fn stats(&self) -> StoreStats {
        StoreStats {
            action_hits: self.action_hits.load(Ordering::Relaxed),
            action_misses: self.action_misses.load(Ordering::Relaxed),
            blobs_written: self.blobs_written.load(Ordering::Relaxed),
            blob_bytes_written: self.blob_bytes_written.load(Ordering::Relaxed),
            corrupt: self.corrupt.load(Ordering::Relaxed),
        }
    }

    /// The blob whose digest is `digest`, verified.
    pub(crate) fn blob(&self, digest: &Digest) -> Option<Bytes> {
        if let Some(memory) = &self.memory {
            let bytes = memory.lock().ok()?.get(&digest.0).cloned()?;
            return Some(EntryBytes::Owned(bytes.to_vec()));
        }
        let local = self.local_get(&digest.0);
        let bytes = match local {
            Some(bytes) => bytes,
            None => self.fetch(Table::Functions, &digest.0)?,
        };
        if Digest::of(&bytes) != *digest {
            self.damaged(digest, "blob");
            return None;
        }
        Some(bytes)
    }

    /// Brings the blobs of `digests` that are only on the remote here, many
    /// at a time: a remote answers each request after a round trip, so a
    /// second machine writing a whole tree waits on them together rather
    /// than one after another.
    pub(crate) fn prefetch(&self, digests: &[Digest]) {
        const IN_FLIGHT: usize = 16;
        if self.remote.is_none() || self.local.is_none() {
            return;
        }
        let missing: Vec<&Digest> = digests
            .iter()
            .filter(|digest| !self.has_blob(digest))
            .collect();
        if missing.is_empty() {
            return;
        }
        let _span = tracing::info_span!("prefetch", blobs = missing.len()).entered();
        let chunk = missing.len().div_ceil(IN_FLIGHT);
        std::thread::scope(|scope| {
            for part in missing.chunks(chunk) {
                scope.spawn(move || {
                    for digest in part {
                        let _ = self.blob(digest);
                    }
                });
            }
        });
    }

    /// Whether the blob `digest` is here (locally), unchecked.
    pub(crate) fn has_blob(&self, digest: &Digest) -> bool {
        match (&self.memory, &self.local) {
            (Some(memory), _) => memory
                .lock()
                .is_ok_and(|memory| memory.contains_key(&digest.0)),
            (None, Some(local)) if self.distrust.load(Ordering::Relaxed) => {
                matches!(local.get(&digest.0), Ok(Some(_)))
            }
            (None, Some(local)) => local.contains(&digest.0),
            (None, None) => false,
        }
    }

    /// Keeps `bytes` under their digest `digest` (the caller computed it),
    /// unless they are already here; pushes them to the remote too.
    pub(crate) fn put_blob(&self, digest: &Digest, bytes: &[u8]) {
        if self.has_blob(digest) {
            return;
        }
        self.blobs_written.fetch_add(1, Ordering::Relaxed);
        self.blob_bytes_written
            .fetch_add(bytes.len() as u64, Ordering::Relaxed);
        self.put(Table::Functions, &digest.0, bytes);
    }

    /// The action entry under `key`.
    pub(crate) fn action(&self, key: &Digest) -> Option<Bytes> {
        self.action_from(key).map(|(bytes, _)| bytes)
    }

    /// The action entry under `key`, with where it was found (a remote
    /// value is kept locally too).
    pub(crate) fn action_from(&self, key: &Digest) -> Option<(Bytes, Origin)> {
        let key = action_key(key);
        let found = match self.local_get(&key) {
            Some(bytes) => Some((bytes, Origin::Local)),
            None => self
                .fetch(Table::Actions, &key)
                .map(|bytes| (bytes, Origin::Remote)),
        };
        let counter = if found.is_some() {
            &self.action_hits
        } else {
            &self.action_misses
        };
        counter.fetch_add(1, Ordering::Relaxed);
        found
    }

    /// A note kept under `key` in this machine's store only (never asked
    /// of the remote).
    pub(crate) fn note(&self, key: &Digest) -> Option<Bytes> {
        self.local_get(&action_key(key))
    }

    /// Keeps `bytes` as a note under `key`, in this machine's store only:
    /// what is worth nothing elsewhere (see [`super::explain`]).
    pub(crate) fn put_note(&self, key: &Digest, bytes: &[u8]) {
        let key = action_key(key);
        if let Some(memory) = &self.memory
            && let Ok(mut memory) = memory.lock()
        {
            memory.insert(key, Arc::from(bytes));
        }
        if let Some(local) = &self.local
            && let Err(error) = local.put(&key, &[bytes])
        {
            tracing::debug!(target: "krender::store", %error, "store write failed");
        }
    }

    /// Keeps `bytes` as the action entry under `key`.
    pub(crate) fn put_action(&self, key: &Digest, bytes: &[u8]) {
        self.put(Table::Actions, &action_key(key), bytes);
    }

    fn local_get(&self, key: &[u8; 32]) -> Option<Bytes> {
        if let Some(memory) = &self.memory {
            let bytes = memory.lock().ok()?.get(key).cloned()?;
            return Some(EntryBytes::Owned(bytes.to_vec()));
        }
        match self.local.as_ref()?.get(key) {
            Ok(found) => found,
            Err(packs::Corrupt) => {
                self.corrupt.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(target: "krender::store", key = %Digest(*key), "ignoring a damaged store entry");
                None
            }
        }
    }

    /// A remote value under `key`, kept locally too.
    fn fetch(&self, table: Table, key: &[u8; 32]) -> Option<Bytes> {
        let bytes = self.remote.as_ref()?.get(table, &Digest(*key).to_hex())?;
        if let Some(local) = &self.local
            && let Err(error) = local.put(key, &[&bytes])
        {
            tracing::debug!(target: "krender::store", %error, "keeping a remote value failed");
        }
        Some(EntryBytes::Owned(bytes))
    }

    fn put(&self, table: Table, key: &[u8; 32], bytes: &[u8]) {
        if let Some(memory) = &self.memory
            && let Ok(mut memory) = memory.lock()
        {
            memory.insert(*key, Arc::from(bytes));
        }
        if let Some(local) = &self.local
            && let Err(error) = local.put(key, &[bytes])
        {
            tracing::debug!(target: "krender::store", %error, "store write failed");
        }
        if let Some(remote) = &self.remote {
            remote.put(table, &Digest(*key).to_hex(), bytes);
        }
    }

    fn damaged(&self, digest: &Digest, what: &str) {
        self.corrupt.fetch_add(1, Ordering::Relaxed);
        tracing::warn!(target: "krender::store", %digest, what, "ignoring a damaged value");
    }

    /// Publishes what this process stored to other processes.
    pub fn finish(&self) {
        if let Some(local) = &self.local
            && let Err(error) = local.finish()
        {
            tracing::debug!(target: "krender::store", %error, "writing the store index failed");
        }
    }
}

/// Where the action entry of `key` is kept: a digest no blob's content can
/// have, so that the two kinds share one key space.
fn action_key(key: &Digest) -> [u8; 32] {
    blake3::keyed_hash(b"krender action entry, not a blob", &key.0).into()
}

/// The entries in the store of `cache_dir` and their bytes.
pub fn summarize(cache_dir: &Path) -> std::io::Result<(u64, u64)> {
    packs::summarize(&store_dir(cache_dir))
}

/// Removes what no render used since `cutoff`; returns (entries removed,
/// entries kept).
pub fn prune(cache_dir: &Path, cutoff: std::time::SystemTime) -> std::io::Result<(u64, u64)> {
    packs::prune(&store_dir(cache_dir), cutoff)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blobs_and_entries_round_trip_in_every_layer() {
        let dir = tempfile::tempdir().unwrap();
        for store in [Store::in_memory(), Store::on_disk(dir.path())] {
            let blob = b"resource bytes";
            let digest = Digest::of(blob);
            assert!(store.blob(&digest).is_none());
            store.put_blob(&digest, blob);
            store.put_blob(&digest, blob);
            assert_eq!(&*store.blob(&digest).unwrap(), blob);
            assert_eq!(store.stats().blobs_written, 1);
            // An action entry under the same digest is another thing.
            assert!(store.action(&digest).is_none());
            store.put_action(&digest, b"record");
            assert_eq!(&*store.action(&digest).unwrap(), b"record");
            assert_eq!(&*store.blob(&digest).unwrap(), blob);
            store.finish();
        }
        let reader = Store::on_disk(dir.path());
        let digest = Digest::of(b"resource bytes");
        assert_eq!(&*reader.blob(&digest).unwrap(), b"resource bytes");
        assert_eq!(&*reader.action(&digest).unwrap(), b"record");
    }

    #[test]
    fn a_blob_under_the_wrong_digest_is_not_served() {
        let store = Store::in_memory();
        let wrong = Digest::of(b"something else");
        store.put_blob(&wrong, b"bytes");
        // Memory is trusted (this process wrote it); the disk is not.
        let dir = tempfile::tempdir().unwrap();
        let disk = Store::on_disk(dir.path());
        disk.put_blob(&wrong, b"bytes");
        assert!(disk.blob(&wrong).is_none());
        assert_eq!(disk.stats().corrupt, 1);
    }
}
