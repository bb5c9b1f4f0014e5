//! The integration test binary: one module per feature.
mod builtins_chain;
mod builtins_fixtures;
mod builtins_porch;
mod cli_render;
mod engine_cache;
mod krm_wire;
mod layering_cli;
mod layering_conformance;
mod layering_engine;
mod lifecycle_crash;
mod pkg_rw;
mod render_kptfile;
mod source_sink;
mod yaml_golden;
mod yaml_golden_identity;
mod yaml_parse;
