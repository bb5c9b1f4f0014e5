//! The incremental engine: salsa queries over file inputs, blake3 keys, the
//! persistent function-result cache and level-by-level parallel scheduling.
pub mod actions;
pub mod cache;
pub mod db;
pub mod levels;
pub mod manifest;
pub mod oneshot;
pub(crate) mod packs;
pub mod remote;
pub mod session;
pub mod shard;
pub mod stamps;
