//! The incremental engine: salsa queries over file inputs, blake3 keys, the
//! persistent function-result cache and level-by-level parallel scheduling.
pub mod actions;
pub mod assemble;
pub(crate) mod bfs;
pub mod cache;
pub mod db;
pub mod executor;
pub mod explain;
pub(crate) mod files;
pub(crate) mod keys;
pub mod levels;
pub mod manifest;
pub mod oneshot;
pub(crate) mod packs;
pub mod plan;
pub mod pool;
pub mod record;
pub mod remote;
pub mod scan;
pub mod session;
pub mod shard;
pub mod stamps;
pub mod store;
