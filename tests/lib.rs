//! The integration test binary: one module per feature.
mod layering_conformance;
mod layering_engine;
mod pkg_rw;
mod yaml_golden;
mod yaml_parse;
mod layering_cli;
