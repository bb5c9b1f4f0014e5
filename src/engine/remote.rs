//! The remote cache: action-cache entries and function results shared
//! between machines through a store OpenDAL reaches by URL (`redis://`,
//! `file://`, `http(s)://` as WebDAV in the bazel-remote layout, `s3://`,
//! `gs://`, `azblob://`).
//!
//! Reads go to the local cache first; a local miss is looked up here, and a
//! hit is written back locally by the caller. Nothing from the remote is
//! trusted: each value is stored behind the blake3 of its bytes and a value
//! whose digest does not match is a miss, counted and never served. A store
//! that is down, slow or full never fails a render: every operation has a
//! deadline, and after [`BREAKER_FAILURES`] failures in a row the remote is
//! left alone for the rest of the process. The first failure is kept for the
//! CLI's one warning.

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::time::Duration;

/// Consecutive failures after which the remote is no longer used.
pub const BREAKER_FAILURES: u32 = 2;
/// The deadline of one remote operation.
const OPERATION_TIMEOUT: Duration = Duration::from_secs(2);
/// Bumped when the value framing changes.
const FRAME_MAGIC: &[u8; 8] = b"KRREM001";

/// Whether this process may write to the remote.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RemoteMode {
    /// Only read (CI on pull requests).
    Read,
    /// Read, and push what ran here.
    #[default]
    ReadWrite,
}

/// Which table of the remote a key belongs to (bazel-remote's layout:
/// `ac/` for action results; function results are content-addressed by
/// their input, so they live under `cas/`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Table {
    /// A package's run (the action cache).
    Actions,
    /// One function call's response.
    Functions,
}

impl Table {
    fn prefix(self) -> &'static str {
        match self {
            Table::Actions => "ac/",
            Table::Functions => "cas/",
        }
    }
}

/// A remote cache URL that cannot be opened.
#[derive(Debug, thiserror::Error, miette::Diagnostic)]
#[error("remote cache {url}: {message}")]
#[diagnostic(code(krender::engine::remote_cache))]
pub struct RemoteError {
    /// The URL, without credentials.
    pub url: String,
    /// Why.
    pub message: String,
}

/// What the remote did in one process.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct RemoteStats {
    /// Values found and verified.
    pub hits: u64,
    /// Keys not there.
    pub misses: u64,
    /// Values pushed.
    pub pushes: u64,
    /// Bytes fetched (verified values only).
    pub bytes_fetched: u64,
    /// Bytes pushed.
    pub bytes_pushed: u64,
    /// Values whose digest did not match (never served).
    pub corrupt: u64,
    /// Operations that failed (connection, timeout, refusal).
    pub errors: u64,
    /// True once the breaker opened: the remote was left alone after.
    pub gave_up: bool,
}

/// An open remote cache.
pub struct RemoteCache {
    url: String,
    mode: RemoteMode,
    operator: opendal::blocking::Operator,
    /// A `file://` remote's directory, read and written directly: a
    /// shared directory answers in microseconds, and the async client's
    /// hand-offs cost more than that for every one of a tree's blobs.
    dir: Option<std::path::PathBuf>,
    /// Names this process's staged writes apart.
    staged: AtomicU64,
    /// Runs the store's async client; kept for the operator's life.
    _runtime: tokio::runtime::Runtime,
    failures_in_a_row: AtomicU32,
    open: AtomicBool,
    first_error: Mutex<Option<String>>,
    hits: AtomicU64,
    misses: AtomicU64,
    pushes: AtomicU64,
    bytes_fetched: AtomicU64,
    bytes_pushed: AtomicU64,
    corrupt: AtomicU64,
    errors: AtomicU64,
}

impl RemoteCache {
    /// Opens the store at `url`. Only a URL that names no store OpenDAL
    /// knows, or that it cannot configure, is an error here: a store that
    /// is down shows on first use, and only as a warning.
    pub fn open(url: &str, mode: RemoteMode) -> Result<RemoteCache, RemoteError> {
        let shown = without_credentials(url);
        let error = |message: String| RemoteError {
            url: shown.clone(),
            message,
        };
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("krender-remote")
            .enable_all()
            .build()
            .map_err(|e| error(format!("cannot start its client: {e}")))?;
        let operator = operator_for(url).map_err(|e| error(e.to_string()))?;
        // The operator's own HTTP client (s3, gs, azblob and http(s)
        // speak HTTP), not a process-wide default.
        let transport = opendal::HttpTransporter::new(
            opendal_http_transport_reqwest::ReqwestTransport::default(),
        );
        let operator =
            operator.with_context(opendal::OperationContext::new().with_http_transport(transport));
        let operator = operator.layer(
            opendal::layers::TimeoutLayer::new()
                .with_timeout(OPERATION_TIMEOUT)
                .with_io_timeout(OPERATION_TIMEOUT),
        );
        let blocking = {
            let _inside = runtime.enter();
            opendal::blocking::Operator::new(operator).map_err(|e| error(e.to_string()))?
        };
        let dir = url.strip_prefix("file://").map(std::path::PathBuf::from);
        Ok(RemoteCache {
            url: shown,
            mode,
            operator: blocking,
            dir,
            staged: AtomicU64::new(0),
            _runtime: runtime,
            failures_in_a_row: AtomicU32::new(0),
            open: AtomicBool::new(true),
            first_error: Mutex::new(None),
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
            pushes: AtomicU64::new(0),
            bytes_fetched: AtomicU64::new(0),
            bytes_pushed: AtomicU64::new(0),
            corrupt: AtomicU64::new(0),
            errors: AtomicU64::new(0),
        })
    }

    /// The URL, without credentials.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The verified value under `key`, if the remote has one.
    pub fn get(&self, table: Table, key: &str) -> Option<Vec<u8>> {
        if !self.open.load(Ordering::Relaxed) || !is_safe_key(key) {
            return None;
        }
        let path = format!("{}{key}", table.prefix());
        match self.read(&path) {
            Ok(Some(buffer)) => {
                self.succeeded();
                match unframe(&buffer) {
                    Some(value) => {
                        self.hits.fetch_add(1, Ordering::Relaxed);
                        self.bytes_fetched
                            .fetch_add(value.len() as u64, Ordering::Relaxed);
                        Some(value)
                    }
                    None => {
                        self.corrupt.fetch_add(1, Ordering::Relaxed);
                        tracing::warn!(target: "krender::remote", key, "ignoring a corrupt remote cache value");
                        None
                    }
                }
            }
            Ok(None) => {
                self.succeeded();
                self.misses.fetch_add(1, Ordering::Relaxed);
                None
            }
            Err(error) => {
                self.failed(&error);
                None
            }
        }
    }

    /// The bytes at `path`; `None` when there are none.
    fn read(&self, path: &str) -> Result<Option<Vec<u8>>, String> {
        if let Some(dir) = &self.dir {
            return match std::fs::read(dir.join(path)) {
                Ok(bytes) => Ok(Some(bytes)),
                Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(None),
                Err(error) => Err(error.to_string()),
            };
        }
        match self.operator.read(path) {
            Ok(buffer) => Ok(Some(buffer.to_vec())),
            Err(error) if error.kind() == opendal::ErrorKind::NotFound => Ok(None),
            Err(error) => Err(error.to_string()),
        }
    }

    /// Writes `bytes` at `path`. In a directory, the file is staged aside
    /// and renamed into place, so concurrent writers of one key (shards, CI
    /// jobs on one host) never interleave and a reader never sees half.
    fn write(&self, path: &str, bytes: Vec<u8>) -> Result<(), String> {
        let Some(dir) = &self.dir else {
            return self
                .operator
                .write(path, bytes)
                .map(|_| ())
                .map_err(|error| error.to_string());
        };
        let target = dir.join(path);
        let staging = dir.join(".tmp");
        let staged = staging.join(format!(
            "{}-{}",
            std::process::id(),
            self.staged.fetch_add(1, Ordering::Relaxed)
        ));
        let write = || -> std::io::Result<()> {
            std::fs::create_dir_all(&staging)?;
            if let Some(parent) = target.parent() {
                std::fs::create_dir_all(parent)?;
            }
            std::fs::write(&staged, &bytes)?;
            std::fs::rename(&staged, &target)
        };
        write().map_err(|error| {
            let _ = std::fs::remove_file(&staged);
            error.to_string()
        })
    }

    /// Pushes `value` under `key` (in read-write mode; a failure only costs
    /// the next machine a run).
    pub fn put(&self, table: Table, key: &str, value: &[u8]) {
        if self.mode == RemoteMode::Read || !self.open.load(Ordering::Relaxed) || !is_safe_key(key)
        {
            return;
        }
        let path = format!("{}{key}", table.prefix());
        let framed = frame(value);
        let len = framed.len() as u64;
        match self.write(&path, framed) {
            Ok(()) => {
                self.succeeded();
                self.pushes.fetch_add(1, Ordering::Relaxed);
                self.bytes_pushed.fetch_add(len, Ordering::Relaxed);
            }
            Err(error) => self.failed(&error),
        }
    }

    /// What the remote did so far.
    pub fn stats(&self) -> RemoteStats {
        RemoteStats {
            hits: self.hits.load(Ordering::Relaxed),
            misses: self.misses.load(Ordering::Relaxed),
            pushes: self.pushes.load(Ordering::Relaxed),
            bytes_fetched: self.bytes_fetched.load(Ordering::Relaxed),
            bytes_pushed: self.bytes_pushed.load(Ordering::Relaxed),
            corrupt: self.corrupt.load(Ordering::Relaxed),
            errors: self.errors.load(Ordering::Relaxed),
            gave_up: !self.open.load(Ordering::Relaxed),
        }
    }

    /// The first failure, for the one warning the CLI prints.
    pub fn first_error(&self) -> Option<String> {
        self.first_error.lock().ok().and_then(|first| first.clone())
    }

    fn succeeded(&self) {
        self.failures_in_a_row.store(0, Ordering::Relaxed);
    }

    fn failed(&self, message: &str) {
        self.errors.fetch_add(1, Ordering::Relaxed);
        if let Ok(mut first) = self.first_error.lock()
            && first.is_none()
        {
            *first = Some(message.to_owned());
        }
        tracing::debug!(target: "krender::remote", message, "remote cache operation failed");
        if self.failures_in_a_row.fetch_add(1, Ordering::Relaxed) + 1 >= BREAKER_FAILURES {
            self.open.store(false, Ordering::Relaxed);
        }
    }
}

/// The operator for `url`: `http(s)://` is bazel-remote's HTTP cache
/// layout (GET and PUT of `ac/<hex>` and `cas/<hex>`, through OpenDAL's
/// WebDAV client), anything else goes by its scheme
/// through OpenDAL's registry (`file://` included).
fn operator_for(url: &str) -> opendal::Result<opendal::Operator> {
    opendal::init_default_registry();
    if url.starts_with("http://") || url.starts_with("https://") {
        // Plain GET and PUT: bazel-remote and most CI caches answer no
        // MKCOL, and nginx's WebDAV makes the folders itself
        // (`create_full_put_path`).
        return opendal::Operator::via_iter(
            "webdav",
            [
                ("endpoint".to_owned(), url.trim_end_matches('/').to_owned()),
                ("disable_create_dir".to_owned(), "true".to_owned()),
            ],
        );
    }
    // gsutil's spelling of a bucket; OpenDAL's scheme is `gcs`.
    match url.strip_prefix("gs://") {
        Some(rest) => opendal::Operator::from_uri(format!("gcs://{rest}").as_str()),
        None => opendal::Operator::from_uri(url),
    }
}

/// Keys are hex digests; anything else never reaches the store (a key is
/// never a path).
fn is_safe_key(key: &str) -> bool {
    !key.is_empty() && key.len() <= 128 && key.bytes().all(|b| b.is_ascii_hexdigit())
}

/// `magic | blake3(value) | value`.
fn frame(value: &[u8]) -> Vec<u8> {
    let mut framed = Vec::with_capacity(FRAME_MAGIC.len() + 32 + value.len());
    framed.extend_from_slice(FRAME_MAGIC);
    framed.extend_from_slice(blake3::hash(value).as_bytes());
    framed.extend_from_slice(value);
    framed
}

/// The value of a frame whose digest matches; `None` otherwise.
fn unframe(framed: &[u8]) -> Option<Vec<u8>> {
    let rest = framed.strip_prefix(FRAME_MAGIC.as_slice())?;
    let (digest, value) = rest.split_first_chunk::<32>()?;
    (blake3::hash(value).as_bytes() == digest).then(|| value.to_vec())
}

/// `url` with any `user:password@` removed, for messages.
fn without_credentials(url: &str) -> String {
    match url.split_once("://") {
        Some((scheme, rest)) => {
            let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
            let host = authority.rsplit('@').next().unwrap_or(authority);
            format!("{scheme}://{host}{path}")
        }
        None => url.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_verify_and_damage_is_a_miss() {
        let framed = frame(b"value");
        assert_eq!(unframe(&framed).as_deref(), Some(&b"value"[..]));
        let mut damaged = framed.clone();
        let last = damaged.len() - 1;
        damaged[last] ^= 1;
        assert_eq!(unframe(&damaged), None);
        assert_eq!(unframe(&framed[..framed.len() - 1]), None);
        assert_eq!(unframe(b"KRREM001"), None);
    }

    /// Every scheme the README names opens (a store that is not there
    /// shows only on first use); an unknown one is an error naming it.
    #[test]
    fn every_documented_scheme_opens() {
        for url in [
            "redis://127.0.0.1:1",
            "file:///tmp/krender-remote-open-test",
            "http://127.0.0.1:1/cache",
            "s3://bucket/prefix?region=us-east-1&endpoint=http://127.0.0.1:1",
            "gs://bucket/prefix",
            "gcs://bucket/prefix",
            "azblob://container/prefix?endpoint=http://127.0.0.1:1&account_name=a&account_key=a2V5",
        ] {
            let opened = RemoteCache::open(url, RemoteMode::Read);
            assert!(opened.is_ok(), "{url}: {:?}", opened.err());
        }
        let unknown = RemoteCache::open("nosuchstore://x", RemoteMode::Read);
        assert!(unknown.is_err());
    }

    #[test]
    fn credentials_never_show() {
        assert_eq!(
            without_credentials("redis://user:secret@cache:6379/0"),
            "redis://cache:6379/0"
        );
        assert_eq!(
            without_credentials("file:///mnt/cache"),
            "file:///mnt/cache"
        );
    }

    #[test]
    fn only_hex_keys_reach_the_store() {
        assert!(is_safe_key("0123abcdef"));
        assert!(!is_safe_key("../etc/passwd"));
        assert!(!is_safe_key(""));
    }

    #[test]
    fn a_file_store_round_trips_and_serves_no_damaged_value() {
        let dir = tempfile::tempdir().unwrap();
        let url = format!("file://{}", dir.path().display());
        let remote = RemoteCache::open(&url, RemoteMode::ReadWrite).unwrap();
        assert_eq!(remote.get(Table::Actions, "ab"), None);
        remote.put(Table::Actions, "ab", b"run");
        assert_eq!(
            remote.get(Table::Actions, "ab").as_deref(),
            Some(&b"run"[..])
        );
        // Another table, another value.
        assert_eq!(remote.get(Table::Functions, "ab"), None);
        let stored = dir.path().join("ac/ab");
        let mut bytes = std::fs::read(&stored).unwrap();
        let last = bytes.len() - 1;
        bytes[last] ^= 1;
        std::fs::write(&stored, bytes).unwrap();
        assert_eq!(remote.get(Table::Actions, "ab"), None);
        let stats = remote.stats();
        assert_eq!((stats.hits, stats.misses, stats.corrupt), (1, 2, 1));
        // Read-only: nothing is pushed.
        let reader = RemoteCache::open(&url, RemoteMode::Read).unwrap();
        reader.put(Table::Actions, "cd", b"x");
        assert!(!dir.path().join("ac/cd").exists());
    }

    #[test]
    fn a_dead_store_trips_the_breaker() {
        // Nothing listens on port 1.
        let remote = RemoteCache::open("redis://127.0.0.1:1", RemoteMode::ReadWrite).unwrap();
        for _ in 0..10 {
            assert_eq!(remote.get(Table::Actions, "ab"), None);
        }
        let stats = remote.stats();
        assert!(stats.gave_up);
        assert_eq!(stats.errors, u64::from(BREAKER_FAILURES));
        assert!(remote.first_error().is_some());
    }
}
