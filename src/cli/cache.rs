//! `krender cache stats|clear`: inspect or empty the function-result cache.

use std::io::Write;

use super::args::{CacheCommand, CacheDirArgs};
use crate::engine::cache::{clear, default_cache_dir, summarize};

/// Runs a cache command and returns the exit code.
pub(super) fn run(command: &CacheCommand, out: &mut dyn Write, err: &mut dyn Write) -> i32 {
    let args: &CacheDirArgs = match command {
        CacheCommand::Stats(args) | CacheCommand::Clear(args) => args,
    };
    let Some(dir) = args.cache_dir.clone().or_else(default_cache_dir) else {
        let _ = writeln!(
            err,
            "Error: no cache directory: set --cache-dir or KRENDER_CACHE_DIR"
        );
        return 1;
    };
    let result = match command {
        CacheCommand::Stats(_) => summarize(&dir).map(|summary| {
            let _ = writeln!(out, "cache: {}", dir.display());
            let _ = writeln!(out, "entries: {}", summary.entries);
            let _ = writeln!(out, "bytes: {}", summary.bytes);
        }),
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
