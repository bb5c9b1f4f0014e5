//! The integration test binary: one module per feature.
mod yaml_parse;
