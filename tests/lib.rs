//! The integration test binary: one module per feature.
mod cli_render;
