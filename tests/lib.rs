//! The integration test binary: one module per feature.
mod builtins_chain;
