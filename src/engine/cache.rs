//! The persistent function-result cache: a [`CachingEvaluator`] wraps any
//! [`Evaluator`] and stores the responses of pure functions in a cacache
//! directory, keyed by a blake3 digest of everything the response depends on.
//!
//! What is cached is decided by [`CachePolicy`]: builtins (image steps the
//! function table routes to the in-process builtin that serves them) are pure
//! and cached; `exec:` steps, executables and containers are not, because
//! nothing tells us they are pure. A cache failure never fails a call: the
//! wrapped evaluator runs instead. An entry that fails cacache's integrity
//! check (or our own decoding) is removed and recomputed, never served.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use serde::Serialize;

use super::remote::{RemoteCache, Table};
use crate::runtime::builtin::Builtin;
use crate::runtime::config::{FunctionTable, Route};
use crate::runtime::{EvalError, Evaluator, FunctionRequest, FunctionResponse, FunctionTarget};

/// Bumped whenever the key layout or the value encoding changes, so an old
/// cache directory is never misread.
const FORMAT_VERSION: u32 = 1;

/// Magic prefix of an encoded value.
const VALUE_MAGIC: &[u8; 4] = b"KRC1";

/// Environment variable naming the cache directory.
pub const CACHE_DIR_ENV: &str = "KRENDER_CACHE_DIR";

/// Which calls may be answered from the cache, and under what identity.
#[derive(Clone, Debug, Default)]
pub struct CachePolicy {
    /// The function table the image evaluator routes by; `None` when it
    /// could not be loaded (then images are not cached, since we cannot
    /// tell how they would run).
    pub table: Option<FunctionTable>,
}

impl CachePolicy {
    /// The evaluator identity under which `target`'s results may be cached,
    /// or `None` when the function is not known to be pure.
    pub fn identity(&self, target: FunctionTarget<'_>) -> Option<String> {
        let table = self.table.as_ref()?;
        match target {
            FunctionTarget::Image(image) => {
                // The builtin evaluator serves an image only when the image
                // name itself resolves to the routed builtin; otherwise the
                // chain falls through to a container.
                match table.route(image) {
                    Route::Builtin(builtin) if Builtin::for_image(image) == Some(builtin) => {
                        Some(format!("builtin:{}", builtin.name()))
                    }
                    Route::Executable(path) if table.image_is_pure(image) => {
                        Some(format!("executable:{}", program_digest(&path)?))
                    }
                    Route::Container { .. } if table.image_is_pure(image) => {
                        Some("container".to_owned())
                    }
                    _ => None,
                }
            }
            FunctionTarget::Exec(exec) if table.exec_is_pure(exec) => {
                let program = exec.split_whitespace().next()?;
                Some(format!(
                    "exec:{}",
                    program_digest(&resolve_program(program)?)?
                ))
            }
            FunctionTarget::Exec(_) => None,
        }
    }
}

/// The program's path as the shell would find it: a path with a slash as
/// is, else the first match on `PATH`.
fn resolve_program(program: &str) -> Option<PathBuf> {
    if program.contains('/') {
        return Some(PathBuf::from(program));
    }
    crate::runtime::exec::on_path(program).next()
}

/// `path` and the blake3 of its bytes: a rebuilt executable gets new keys.
/// `None` when it cannot be read (then the call is not cached).
fn program_digest(path: &Path) -> Option<String> {
    let bytes = std::fs::read(path).ok()?;
    Some(format!(
        "{}@{}",
        path.display(),
        blake3::hash(&bytes).to_hex()
    ))
}

/// Counters of what the cache did, for tests and `cache stats`-style output.
#[derive(Debug, Default)]
pub struct CacheStats {
    hits: AtomicU64,
    misses: AtomicU64,
    writes: AtomicU64,
    uncacheable: AtomicU64,
    native: AtomicU64,
    corrupt: AtomicU64,
    errors: AtomicU64,
}

/// A point-in-time copy of [`CacheStats`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CacheStatsSnapshot {
    /// Calls answered from the cache.
    pub hits: u64,
    /// Cacheable calls that had to run.
    pub misses: u64,
    /// Responses stored.
    pub writes: u64,
    /// Calls the policy does not cache.
    pub uncacheable: u64,
    /// Builtin calls run natively on the nodes, without the cache (pure,
    /// and cheaper to run than to look up).
    pub native: u64,
    /// Entries dropped because they failed the integrity check or decoding.
    pub corrupt: u64,
    /// Cache reads or writes that failed (the call ran anyway).
    pub errors: u64,
}

impl CacheStats {
    /// The current counts.
    pub fn snapshot(&self) -> CacheStatsSnapshot {
        CacheStatsSnapshot {
            hits: self.hits.load(Ordering::Relaxed),
            misses: self.misses.load(Ordering::Relaxed),
            writes: self.writes.load(Ordering::Relaxed),
            uncacheable: self.uncacheable.load(Ordering::Relaxed),
            native: self.native.load(Ordering::Relaxed),
            corrupt: self.corrupt.load(Ordering::Relaxed),
            errors: self.errors.load(Ordering::Relaxed),
        }
    }

    fn bump(counter: &AtomicU64) {
        counter.fetch_add(1, Ordering::Relaxed);
    }
}

/// Everything a cached response depends on. It is serialised into the
/// blake3 hasher, so this struct is the one place defining the key.
#[derive(Serialize)]
struct CacheKey<'a> {
    format: u32,
    /// The krender build, because builtin behaviour changes between builds.
    build: &'a str,
    /// Which implementation runs the function (`builtin:set-namespace`).
    evaluator: &'a str,
    /// The image or exec command as the Kptfile names it.
    target: &'a str,
    /// blake3 of the ResourceList bytes (the function config is inside).
    input: String,
}

impl CacheKey<'_> {
    fn digest(&self) -> String {
        let mut hasher = blake3::Hasher::new();
        // Serialising into a hasher cannot fail except through a serializer
        // bug; an unhashable key just disables caching for this call.
        match serde_json::to_writer(&mut hasher, self) {
            Ok(()) => hasher.finalize().to_hex().to_string(),
            Err(_) => String::new(),
        }
    }
}

/// Identifies the running krender build cheaply: the package version plus
/// the size and modification time of the executable. Hashing the executable
/// itself would cost more than a warm render.
pub(crate) fn build_identity() -> String {
    let exe = std::env::current_exe().ok();
    build_identity_of(exe.as_deref())
}

/// [`build_identity`] of the krender executable at `exe` (a process that
/// shares a cache with the binary, such as a test, keys as it does).
pub fn build_identity_of(exe: Option<&Path>) -> String {
    let meta = exe.and_then(|exe| std::fs::metadata(exe).ok());
    let (len, mtime) = meta.map_or((0, 0), |meta| {
        let mtime = meta
            .modified()
            .ok()
            .and_then(|time| time.duration_since(std::time::UNIX_EPOCH).ok())
            .map_or(0, |since| since.as_nanos());
        (meta.len(), mtime)
    });
    format!("{}+{len}+{mtime}", env!("CARGO_PKG_VERSION"))
}

/// Identifies the running krender build by the bytes of its executable:
/// what keys shared with other machines (a remote cache) use, where a size
/// and a modification time say nothing.
pub fn build_identity_by_content() -> String {
    let digest = std::env::current_exe()
        .and_then(std::fs::read)
        .map(|bytes| blake3::hash(&bytes).to_hex().to_string())
        .unwrap_or_default();
    format!("{}+{digest}", env!("CARGO_PKG_VERSION"))
}

/// Encodes a response: magic, exit code, then stdout and stderr, each
/// length-prefixed (little-endian).
fn encode(response: &FunctionResponse) -> Vec<u8> {
    let mut bytes = Vec::with_capacity(24 + response.stdout.len() + response.stderr.len());
    bytes.extend_from_slice(VALUE_MAGIC);
    bytes.extend_from_slice(&response.exit_code.to_le_bytes());
    for part in [&response.stdout, &response.stderr] {
        bytes.extend_from_slice(&(part.len() as u64).to_le_bytes());
        bytes.extend_from_slice(part);
    }
    bytes
}

/// Decodes [`encode`]'s output; `None` for anything malformed.
fn decode(bytes: &[u8]) -> Option<FunctionResponse> {
    let rest = bytes.strip_prefix(VALUE_MAGIC.as_slice())?;
    let (code, mut rest) = rest.split_first_chunk::<4>()?;
    let mut parts = [Vec::new(), Vec::new()];
    for part in &mut parts {
        let (len, tail) = rest.split_first_chunk::<8>()?;
        let len = usize::try_from(u64::from_le_bytes(*len)).ok()?;
        if tail.len() < len {
            return None;
        }
        let (body, tail) = tail.split_at(len);
        *part = body.to_vec();
        rest = tail;
    }
    if !rest.is_empty() {
        return None;
    }
    let [stdout, stderr] = parts;
    Some(FunctionResponse {
        stdout,
        stderr,
        exit_code: i32::from_le_bytes(*code),
    })
}

/// Wraps an evaluator with the persistent result cache.
pub struct CachingEvaluator<E> {
    inner: E,
    dir: PathBuf,
    policy: CachePolicy,
    build: String,
    stats: CacheStats,
    remote: Option<Arc<RemoteCache>>,
    /// Set by [`CachingEvaluator::with_background_writes`].
    writer: Option<std::sync::mpsc::SyncSender<(String, Vec<u8>)>>,
}

impl<E: Evaluator> CachingEvaluator<E> {
    /// Caches `inner`'s pure calls (per `policy`) in `dir`.
    pub fn new(inner: E, dir: PathBuf, policy: CachePolicy) -> CachingEvaluator<E> {
        CachingEvaluator {
            inner,
            dir,
            policy,
            build: build_identity(),
            stats: CacheStats::default(),
            remote: None,
            writer: None,
        }
    }

    /// Stores entries (local and remote) from a thread of their own, off
    /// the calls' path: a long-running server's calls then do not wait on
    /// the file system. At most `queue` entries wait; past that an entry is
    /// not stored (counted as an error; the call is only recomputed next
    /// time). The thread writes what is queued and ends when the evaluator
    /// is dropped. Call after [`CachingEvaluator::with_remote`].
    pub fn with_background_writes(self, queue: usize) -> CachingEvaluator<E> {
        let (sender, entries) = std::sync::mpsc::sync_channel::<(String, Vec<u8>)>(queue.max(1));
        let (dir, remote) = (self.dir.clone(), self.remote.clone());
        let spawned = std::thread::Builder::new()
            .name("krender-cache-writer".to_owned())
            .spawn(move || {
                for (key, bytes) in entries {
                    if let Some(remote) = &remote {
                        remote.put(Table::Functions, &key, &bytes);
                    }
                    if let Err(error) = write_entry(&dir, &key, &bytes) {
                        tracing::debug!(target: "krender::cache", %error, "cache write failed");
                    }
                }
            });
        match spawned {
            Ok(_) => CachingEvaluator {
                writer: Some(sender),
                ..self
            },
            // No thread: the calls store their entries themselves.
            Err(_) => self,
        }
    }

    /// Also looks results up in, and pushes them to, `remote` (keys then
    /// name the build by its executable's bytes, the same on every machine).
    pub fn with_remote(self, remote: Arc<RemoteCache>) -> CachingEvaluator<E> {
        CachingEvaluator {
            build: build_identity_by_content(),
            remote: Some(remote),
            ..self
        }
    }

    /// What the cache did so far.
    pub fn stats(&self) -> CacheStatsSnapshot {
        self.stats.snapshot()
    }

    /// The cache directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The cache key of `request`, or `None` if it is not cacheable.
    fn key(&self, request: &FunctionRequest<'_>) -> Option<String> {
        let evaluator = self.policy.identity(request.target)?;
        let target = match request.target {
            FunctionTarget::Image(image) | FunctionTarget::Exec(image) => image,
        };
        let key = CacheKey {
            format: FORMAT_VERSION,
            build: &self.build,
            evaluator: &evaluator,
            target,
            input: blake3::hash(request.input).to_hex().to_string(),
        }
        .digest();
        (!key.is_empty()).then_some(key)
    }

    /// Reads an entry; a corrupt one is removed and reported as absent.
    fn lookup(&self, key: &str) -> Option<FunctionResponse> {
        self.lookup_local(key).or_else(|| {
            // A verified remote value is kept locally for next time.
            let bytes = self.remote.as_ref()?.get(Table::Functions, key)?;
            let response = decode(&bytes)?;
            let _ = write_entry(&self.dir, key, &bytes);
            Some(response)
        })
    }

    fn lookup_local(&self, key: &str) -> Option<FunctionResponse> {
        match cacache::read_sync(&self.dir, key) {
            Ok(bytes) => match decode(&bytes) {
                Some(response) => Some(response),
                None => {
                    self.drop_corrupt(key);
                    None
                }
            },
            Err(cacache::Error::EntryNotFound(..)) => None,
            Err(cacache::Error::IntegrityError(_) | cacache::Error::SizeMismatch(..)) => {
                self.drop_corrupt(key);
                None
            }
            Err(error) => {
                CacheStats::bump(&self.stats.errors);
                tracing::debug!(target: "krender::cache", %error, "cache read failed");
                None
            }
        }
    }

    /// Removes the index entry and its content, so the content file is
    /// rewritten on the next store (cacache skips writing content whose
    /// file already exists).
    fn drop_corrupt(&self, key: &str) {
        CacheStats::bump(&self.stats.corrupt);
        tracing::warn!(target: "krender::cache", key, "dropping corrupt cache entry");
        if let Ok(Some(meta)) = cacache::metadata_sync(&self.dir, key) {
            let _ = cacache::remove_hash_sync(&self.dir, &meta.integrity);
        }
        let _ = cacache::remove_sync(&self.dir, key);
    }

    fn store(&self, key: &str, response: &FunctionResponse) {
        let bytes = encode(response);
        if let Some(writer) = &self.writer {
            let counter = match writer.try_send((key.to_owned(), bytes)) {
                Ok(()) => &self.stats.writes,
                Err(_) => &self.stats.errors,
            };
            CacheStats::bump(counter);
            return;
        }
        if let Some(remote) = &self.remote {
            remote.put(Table::Functions, key, &bytes);
        }
        match write_entry(&self.dir, key, &bytes) {
            Ok(_) => CacheStats::bump(&self.stats.writes),
            Err(error) => {
                CacheStats::bump(&self.stats.errors);
                tracing::debug!(target: "krender::cache", %error, "cache write failed");
            }
        }
    }
}

impl<E: Evaluator> Evaluator for CachingEvaluator<E> {
    fn evaluate(&self, request: &FunctionRequest<'_>) -> Result<FunctionResponse, EvalError> {
        let Some(key) = self.key(request) else {
            CacheStats::bump(&self.stats.uncacheable);
            return self.inner.evaluate(request);
        };
        if let Some(response) = self.lookup(&key) {
            CacheStats::bump(&self.stats.hits);
            tracing::info!(
                target: "krender::step",
                function = ?request.target,
                key,
                "answered from the function cache; nothing ran",
            );
            return Ok(response);
        }
        CacheStats::bump(&self.stats.misses);
        let response = self.inner.evaluate(request)?;
        // Only successes are stored: a failing builtin may have failed
        // because of its deadline (starlark), which is not a function of
        // the key. Failures are rare and cheap to recompute.
        if response.exit_code == 0 {
            self.store(&key, &response);
        }
        Ok(response)
    }

    /// Native builtin steps bypass the cache: running them on the nodes
    /// costs less than encoding the input to compute a key.
    fn native(&self, target: FunctionTarget<'_>) -> Option<crate::runtime::builtin::Builtin> {
        let builtin = self.inner.native(target)?;
        CacheStats::bump(&self.stats.native);
        Some(builtin)
    }

    fn executor(&self, target: FunctionTarget<'_>) -> Option<crate::runtime::Executor> {
        self.inner.executor(target)
    }
}

/// Boxed evaluators (what the CLI builds) can be wrapped too.
impl<E: Evaluator + ?Sized> Evaluator for Box<E> {
    fn evaluate(&self, request: &FunctionRequest<'_>) -> Result<FunctionResponse, EvalError> {
        (**self).evaluate(request)
    }

    fn native(&self, target: FunctionTarget<'_>) -> Option<crate::runtime::builtin::Builtin> {
        (**self).native(target)
    }

    fn executor(&self, target: FunctionTarget<'_>) -> Option<crate::runtime::Executor> {
        (**self).executor(target)
    }
}

/// The CLI's cache settings.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CacheOptions {
    /// `--cache-dir` / `KRENDER_CACHE_DIR`, else the cli's default
    /// (`$XDG_CACHE_HOME/krender`); `None` when there is none.
    pub dir: Option<PathBuf>,
    /// `--no-cache`.
    pub disabled: bool,
}

impl CacheOptions {
    /// The directory the cache lives in, if caching is on and one is known.
    pub fn resolved_dir(&self) -> Option<PathBuf> {
        if self.disabled {
            return None;
        }
        self.dir.clone()
    }
}

impl CachePolicy {
    /// The policy for the function table the image evaluator loads from
    /// `config` (the defaults when the file is missing).
    pub fn for_config(config: &Path) -> CachePolicy {
        CachePolicy {
            table: FunctionTable::load(config).ok(),
        }
    }
}

/// Wraps the CLI's image evaluator in the cache when `options` enable it.
pub fn wrap_image_evaluator(
    inner: Box<dyn Evaluator>,
    options: &CacheOptions,
    config: &Path,
    remote: Option<Arc<RemoteCache>>,
) -> Box<dyn Evaluator> {
    let Some(dir) = options.resolved_dir() else {
        return inner;
    };
    let cache = CachingEvaluator::new(inner, dir, CachePolicy::for_config(config));
    match remote {
        Some(remote) => Box::new(cache.with_remote(remote)),
        None => Box::new(cache),
    }
}

/// A summary of a cache directory, for `krender cache stats`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CacheDirSummary {
    /// Live index entries.
    pub entries: u64,
    /// Total size of their values in bytes.
    pub bytes: u64,
}

/// Why a cache directory could not be inspected or cleared.
#[derive(Debug, thiserror::Error, miette::Diagnostic)]
pub enum CacheError {
    /// cacache failed (its error is miette 5, so it is a source, not
    /// transparent).
    #[error("cache directory {dir}: {source}")]
    #[diagnostic(code(krender::engine::cache))]
    Cacache {
        /// The cache directory.
        dir: PathBuf,
        /// The underlying error.
        #[source]
        source: cacache::Error,
    },
}

/// Writes `bytes` under `key` in the cacache store `dir`, recording their
/// size in the index (`cacache::write_sync` records 0, so `cache stats`
/// reported 0 bytes); the write also fails if fewer bytes land.
pub(crate) fn write_entry(dir: &Path, key: &str, bytes: &[u8]) -> cacache::Result<()> {
    write_entry_parts(dir, key, &[bytes])
}

/// [`write_entry`] of the concatenation of `parts`, written one after the
/// other (a manifest holds a whole tree's output: joining its parts first
/// put another copy of it on the render's peak memory).
pub(crate) fn write_entry_parts(dir: &Path, key: &str, parts: &[&[u8]]) -> cacache::Result<()> {
    use std::io::Write as _;
    let size: usize = parts.iter().map(|part| part.len()).sum();
    // cacache maps an entry of a known size up to 1 MiB and then takes
    // exactly one write (it copies each write to the map's start): such an
    // entry is joined first.
    let joined;
    let parts = if parts.len() > 1 && size <= 1024 * 1024 {
        joined = parts.concat();
        &[joined.as_slice()][..]
    } else {
        parts
    };
    let mut writer = cacache::WriteOpts::new().size(size).open_sync(dir, key)?;
    for part in parts {
        writer.write_all(part).map_err(|source| {
            cacache::Error::IoError(source, format!("writing cache entry {key}"))
        })?;
    }
    writer.commit().map(drop)
}

/// Counts the entries in `dir` (an absent directory is empty).
pub fn summarize(dir: &Path) -> Result<CacheDirSummary, CacheError> {
    let mut summary = CacheDirSummary::default();
    // cacache creates its index directory on the first write.
    if !dir.join("index-v5").exists() {
        return Ok(summary);
    }
    for entry in cacache::index::ls(dir) {
        let entry = entry.map_err(|source| CacheError::Cacache {
            dir: dir.to_owned(),
            source,
        })?;
        summary.entries += 1;
        summary.bytes += entry.size as u64;
    }
    Ok(summary)
}

/// Removes every entry in `dir`.
pub fn clear(dir: &Path) -> Result<(), CacheError> {
    if !dir.exists() {
        return Ok(());
    }
    cacache::clear_sync(dir).map_err(|source| CacheError::Cacache {
        dir: dir.to_owned(),
        source,
    })
}

/// What `prune` removed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PruneSummary {
    /// Entries removed.
    pub removed: u64,
    /// Entries kept.
    pub kept: u64,
}

/// The store of manifests inside a cache directory: apart from the function
/// results, so that `cache stats` counts those alone and a manifest never
/// shadows a function entry.
pub fn manifest_dir(cache_dir: &Path) -> PathBuf {
    cache_dir.join("manifests")
}

/// Removes the entries of `dir` (and of its manifest and package-run
/// stores) written more than `max_age` ago, with their content. Content shared with a kept entry
/// may go too; such an entry then fails its integrity check on the next
/// read and is recomputed, never served wrong.
pub fn prune(dir: &Path, max_age: std::time::Duration) -> Result<PruneSummary, CacheError> {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |since| since.as_millis());
    let cutoff = now.saturating_sub(max_age.as_millis());
    let mut summary = PruneSummary::default();
    let cutoff_time = std::time::SystemTime::now()
        .checked_sub(max_age)
        .unwrap_or(std::time::UNIX_EPOCH);
    let (removed, kept) =
        super::store::prune(dir, cutoff_time).map_err(|error| CacheError::Cacache {
            dir: super::store::store_dir(dir),
            source: cacache::Error::IoError(error, "pruning the store".to_owned()),
        })?;
    summary.removed += removed;
    summary.kept += kept;
    for store in [dir.to_path_buf(), manifest_dir(dir)] {
        if !store.join("index-v5").exists() {
            continue;
        }
        let wrap = |source| CacheError::Cacache {
            dir: store.clone(),
            source,
        };
        for entry in cacache::index::ls(&store) {
            let entry = entry.map_err(wrap)?;
            if entry.time < cutoff {
                let _ = cacache::remove_hash_sync(&store, &entry.integrity);
                cacache::remove_sync(&store, &entry.key).map_err(wrap)?;
                summary.removed += 1;
            } else {
                summary.kept += 1;
            }
        }
    }
    Ok(summary)
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicUsize;
    use std::time::Duration;

    use super::*;

    #[test]
    fn entries_written_in_parts_read_back_whole() {
        let dir = tempfile::tempdir().unwrap();
        // Below and above the size up to which cacache maps the entry.
        for size in [10, 700 * 1024, 3 * 1024 * 1024] {
            let bytes: Vec<u8> = (0..size).map(|i| (i % 251) as u8).collect();
            let (head, rest) = bytes.split_at(3);
            let (middle, tail) = rest.split_at(rest.len() / 2);
            let key = format!("parts-{size}");
            write_entry_parts(dir.path(), &key, &[head, middle, &[], tail]).unwrap();
            assert_eq!(
                cacache::read_sync(dir.path(), &key).unwrap(),
                bytes,
                "{size}"
            );
            let entry = cacache::index::find(dir.path(), &key).unwrap().unwrap();
            assert_eq!(entry.size, size, "recorded size");
        }
    }

    /// Counts calls and echoes the input with a marker.
    #[derive(Default)]
    struct CountingEvaluator {
        calls: AtomicUsize,
    }

    impl Evaluator for CountingEvaluator {
        fn evaluate(&self, request: &FunctionRequest<'_>) -> Result<FunctionResponse, EvalError> {
            self.calls.fetch_add(1, Ordering::Relaxed);
            let mut stdout = b"out:".to_vec();
            stdout.extend_from_slice(request.input);
            Ok(FunctionResponse {
                stdout,
                stderr: b"note\n".to_vec(),
                exit_code: 0,
            })
        }
    }

    const SET_NAMESPACE: &str = "ghcr.io/kptdev/krm-functions-catalog/set-namespace:latest";

    fn request<'a>(target: FunctionTarget<'a>, input: &'a [u8]) -> FunctionRequest<'a> {
        FunctionRequest {
            target,
            input,
            timeout: Duration::from_secs(5),
        }
    }

    fn evaluator(dir: &Path) -> CachingEvaluator<CountingEvaluator> {
        CachingEvaluator::new(
            CountingEvaluator::default(),
            dir.to_owned(),
            CachePolicy {
                table: Some(FunctionTable::default()),
            },
        )
    }

    fn calls(evaluator: &CachingEvaluator<CountingEvaluator>) -> usize {
        evaluator.inner.calls.load(Ordering::Relaxed)
    }

    #[test]
    fn second_call_is_a_hit_and_returns_the_same_response() {
        let dir = tempfile::tempdir().unwrap();
        let cached = evaluator(dir.path());
        let req = request(FunctionTarget::Image(SET_NAMESPACE), b"items: []\n");
        let first = cached.evaluate(&req).unwrap();
        let second = cached.evaluate(&req).unwrap();
        assert_eq!(first, second);
        assert_eq!(second.stdout, b"out:items: []\n");
        assert_eq!(calls(&cached), 1);
        let stats = cached.stats();
        assert_eq!((stats.hits, stats.misses, stats.writes), (1, 1, 1));
    }

    /// Entries written off the call's path land all the same, also those
    /// still queued when the evaluator is dropped.
    #[test]
    fn background_writes_land() {
        let dir = tempfile::tempdir().unwrap();
        let cached = evaluator(dir.path()).with_background_writes(16);
        for input in [&b"a"[..], b"b", b"c"] {
            cached
                .evaluate(&request(FunctionTarget::Image(SET_NAMESPACE), input))
                .unwrap();
        }
        assert_eq!(cached.stats().writes, 3);
        drop(cached);
        let started = std::time::Instant::now();
        while summarize(dir.path()).unwrap().entries < 3 {
            assert!(
                started.elapsed() < Duration::from_secs(10),
                "entries not written"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
        let again = evaluator(dir.path());
        let hit = again
            .evaluate(&request(FunctionTarget::Image(SET_NAMESPACE), b"b"))
            .unwrap();
        assert_eq!((hit.stdout.as_slice(), calls(&again)), (&b"out:b"[..], 0));
    }

    #[test]
    fn hits_survive_a_new_process_handle() {
        let dir = tempfile::tempdir().unwrap();
        let req = request(FunctionTarget::Image(SET_NAMESPACE), b"a");
        evaluator(dir.path()).evaluate(&req).unwrap();
        let again = evaluator(dir.path());
        assert_eq!(again.evaluate(&req).unwrap().stdout, b"out:a");
        assert_eq!(calls(&again), 0);
        assert_eq!(summarize(dir.path()).unwrap().entries, 1);
    }

    #[test]
    fn different_input_or_image_misses() {
        let dir = tempfile::tempdir().unwrap();
        let cached = evaluator(dir.path());
        cached
            .evaluate(&request(FunctionTarget::Image(SET_NAMESPACE), b"a"))
            .unwrap();
        cached
            .evaluate(&request(FunctionTarget::Image(SET_NAMESPACE), b"b"))
            .unwrap();
        let labels = "ghcr.io/kptdev/krm-functions-catalog/set-labels:latest";
        cached
            .evaluate(&request(FunctionTarget::Image(labels), b"a"))
            .unwrap();
        assert_eq!(calls(&cached), 3);
        assert_eq!(cached.stats().hits, 0);
    }

    #[test]
    fn corrupt_entry_is_dropped_and_recomputed() {
        let dir = tempfile::tempdir().unwrap();
        let cached = evaluator(dir.path());
        let req = request(FunctionTarget::Image(SET_NAMESPACE), b"items: []\n");
        cached.evaluate(&req).unwrap();
        // Flip the content file's bytes behind cacache's back.
        let key = cached.key(&req).unwrap();
        let meta = cacache::metadata_sync(dir.path(), &key).unwrap().unwrap();
        let content = content_files(&dir.path().join("content-v2"));
        assert_eq!(content.len(), 1, "one content file: {content:?}");
        std::fs::write(&content[0], b"garbage that is not the value").unwrap();
        assert!(cacache::read_hash_sync(dir.path(), &meta.integrity).is_err());

        let response = cached.evaluate(&req).unwrap();
        assert_eq!(response.stdout, b"out:items: []\n");
        assert_eq!(calls(&cached), 2);
        assert_eq!(cached.stats().corrupt, 1);
        // The recomputed value was stored again and is served intact.
        let third = cached.evaluate(&req).unwrap();
        assert_eq!(third.stdout, b"out:items: []\n");
        assert_eq!(calls(&cached), 2);
    }

    fn content_files(dir: &Path) -> Vec<PathBuf> {
        let mut files = Vec::new();
        let mut stack = vec![dir.to_owned()];
        while let Some(dir) = stack.pop() {
            for entry in std::fs::read_dir(&dir).unwrap() {
                let path = entry.unwrap().path();
                if path.is_dir() {
                    stack.push(path);
                } else {
                    files.push(path);
                }
            }
        }
        files
    }

    #[test]
    fn exec_and_container_images_are_not_cached() {
        let dir = tempfile::tempdir().unwrap();
        let cached = evaluator(dir.path());
        let exec = request(FunctionTarget::Exec("sed -e s/a/b/"), b"a");
        cached.evaluate(&exec).unwrap();
        cached.evaluate(&exec).unwrap();
        let container = request(FunctionTarget::Image("example.com/my-fn:v1"), b"a");
        cached.evaluate(&container).unwrap();
        cached.evaluate(&container).unwrap();
        assert_eq!(calls(&cached), 4);
        assert_eq!(cached.stats().uncacheable, 4);
        assert_eq!(summarize(dir.path()).unwrap().entries, 0);
    }

    #[test]
    fn images_routed_elsewhere_by_the_table_are_not_cached() {
        let table = FunctionTable::parse(
            "[[function]]\nimage = \"set-namespace\"\nexecutable = { \"*\" = \"/bin/true\" }\n",
            Path::new("render.toml"),
        )
        .unwrap();
        let policy = CachePolicy { table: Some(table) };
        assert_eq!(policy.identity(FunctionTarget::Image(SET_NAMESPACE)), None);
        let default = CachePolicy {
            table: Some(FunctionTable::default()),
        };
        assert_eq!(
            default
                .identity(FunctionTarget::Image(SET_NAMESPACE))
                .as_deref(),
            Some("builtin:set-namespace")
        );
    }

    #[test]
    fn failures_are_not_stored() {
        struct Failing;
        impl Evaluator for Failing {
            fn evaluate(&self, _: &FunctionRequest<'_>) -> Result<FunctionResponse, EvalError> {
                Ok(FunctionResponse {
                    exit_code: 1,
                    ..FunctionResponse::default()
                })
            }
        }
        let dir = tempfile::tempdir().unwrap();
        let cached = CachingEvaluator::new(
            Failing,
            dir.path().to_owned(),
            CachePolicy {
                table: Some(FunctionTable::default()),
            },
        );
        let req = request(FunctionTarget::Image(SET_NAMESPACE), b"a");
        assert_eq!(cached.evaluate(&req).unwrap().exit_code, 1);
        assert_eq!(cached.evaluate(&req).unwrap().exit_code, 1);
        assert_eq!(cached.stats().misses, 2);
        assert_eq!(cached.stats().writes, 0);
    }

    #[test]
    fn an_unwritable_cache_dir_still_runs_the_function() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("not-a-dir");
        std::fs::write(&file, b"x").unwrap();
        let cached = evaluator(&file);
        let req = request(FunctionTarget::Image(SET_NAMESPACE), b"a");
        assert_eq!(cached.evaluate(&req).unwrap().stdout, b"out:a");
        assert_eq!(cached.evaluate(&req).unwrap().stdout, b"out:a");
        assert_eq!(calls(&cached), 2);
        assert!(cached.stats().errors >= 1);
    }

    #[test]
    fn value_encoding_round_trips_and_rejects_truncation() {
        let response = FunctionResponse {
            stdout: b"abc".to_vec(),
            stderr: b"".to_vec(),
            exit_code: -3,
        };
        let bytes = encode(&response);
        assert_eq!(decode(&bytes), Some(response));
        for cut in 0..bytes.len() {
            assert_eq!(decode(&bytes[..cut]), None, "cut at {cut}");
        }
    }
}
