//! The integration test binary: one module per feature.
mod cli_render;
mod pkg_rw;
mod yaml_golden;
mod yaml_parse;
