//! krender: a kpt-compatible renderer for declarative configuration packages
//! that works like a build system — incremental, parallel and cached.
//!
//! The crate is library-first: the `krender` binary is a thin wrapper around
//! [`cli::run`], and tests and benches drive the same modules.

pub mod cli;
pub mod engine;
pub mod hydrate;
pub mod krm;
pub mod layering;
pub mod lifecycle;
pub mod pkg;
pub mod runtime;
pub mod serve;
pub mod yaml;
