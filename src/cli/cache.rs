//! `krender cache stats|clear|prune`: inspect, empty or trim the
//! function-result cache, its render manifests and package runs.

use std::io::Write;

use super::args::{CacheCommand, CacheDirArgs};
use std::time::Duration;

use crate::engine::cache::manifest_dir;
use crate::engine::cache::{clear, prune, summarize};
use crate::engine::remote::{RemoteCache, RemoteMode};

/// Runs a cache command and returns the exit code.
pub(super) fn run(command: &CacheCommand, out: &mut dyn Write, err: &mut dyn Write) -> i32 {
    let args: &CacheDirArgs = match command {
        CacheCommand::Stats(args) | CacheCommand::Clear(args) => args,
        CacheCommand::Prune(prune) => &prune.dir,
    };
    let Some(dir) = args
        .cache_dir
        .clone()
        .or_else(super::args::default_cache_dir)
    else {
        let _ = writeln!(
            err,
            "Error: no cache directory: set --cache-dir or KRENDER_CACHE_DIR"
        );
        return 1;
    };
    let result = match command {
        CacheCommand::Stats(_) => summarize(&dir).and_then(|summary| {
            let manifests = summarize(&manifest_dir(&dir))?;
            let (runs, run_bytes) = crate::engine::store::summarize(&dir).map_err(|error| {
                crate::engine::cache::CacheError::Cacache {
                    dir: crate::engine::store::store_dir(&dir),
                    source: cacache::Error::IoError(error, "reading the store".to_owned()),
                }
            })?;
            let size = |bytes: u64| format!("{} ({bytes} bytes)", indicatif::HumanBytes(bytes));
            let _ = writeln!(out, "cache: {}", dir.display());
            let _ = writeln!(
                out,
                "function results: {} entries, {}",
                summary.entries,
                size(summary.bytes)
            );
            let _ = writeln!(out, "render manifests: {}", manifests.entries);
            // Resources, logs and runs, each once by content.
            let _ = writeln!(out, "store: {runs} entries, {}", size(run_bytes));
            Ok(())
        }),
        CacheCommand::Prune(prune_args) => {
            let max_age = Duration::from_secs(prune_args.max_age_days.saturating_mul(86_400));
            prune(&dir, max_age).map(|summary| {
                let _ = writeln!(
                    out,
                    "removed {} entries, kept {}",
                    summary.removed, summary.kept
                );
            })
        }
        CacheCommand::Clear(_) => clear(&dir).map(|()| {
            let _ = writeln!(out, "cleared {}", dir.display());
        }),
    };
    match result {
        Ok(()) => 0,
        Err(error) => {
            let _ = writeln!(err, "Error: {error}");
            1
        }
    }
}

/// The remote cache the flags (or else render.toml's `[cache]` table at
/// `config`) name, opened; `None` without one. A URL no store answers to
/// is a command error; a store that is down is not (it is only warned of).
pub(super) fn open_remote(
    args: &super::args::CacheArgs,
    config: &std::path::Path,
) -> Result<Option<std::sync::Arc<RemoteCache>>, crate::hydrate::Report> {
    use super::args::RemoteCacheMode;
    let table = crate::runtime::config::FunctionTable::load(config)
        .map(|table| table.cache)
        .unwrap_or_default();
    let Some(url) = args.remote_cache.clone().or(table.remote) else {
        return Ok(None);
    };
    let mode = match (args.remote_cache_mode, table.mode.as_deref()) {
        (Some(RemoteCacheMode::Read), _) | (None, Some("read")) => RemoteMode::Read,
        (Some(RemoteCacheMode::ReadWrite), _) | (None, Some("read-write") | None) => {
            RemoteMode::ReadWrite
        }
        (None, Some(other)) => {
            return Err(crate::hydrate::Report::Command(format!(
                "invalid function table {}: [cache] mode = {other:?}: must be \"read\" or \"read-write\"",
                config.display()
            )));
        }
    };
    RemoteCache::open(&url, mode)
        .map(|remote| Some(std::sync::Arc::new(remote)))
        .map_err(|error| crate::hydrate::Report::Command(error.to_string()))
}

/// The one warning a render prints about its remote cache: that it was
/// unreachable (and the render went on without it), or served values that
/// failed their digest (ignored).
pub(super) fn remote_warning(remote: &RemoteCache) -> Option<String> {
    let stats = remote.stats();
    if let Some(error) = remote.first_error() {
        return Some(format!(
            "krender: warning: remote cache {} unavailable ({error}); rendered without it{}",
            remote.url(),
            if stats.gave_up {
                " after the first failures"
            } else {
                ""
            }
        ));
    }
    (stats.corrupt > 0).then(|| {
        format!(
            "krender: warning: remote cache {}: {} value(s) failed their digest and were ignored",
            remote.url(),
            stats.corrupt
        )
    })
}
