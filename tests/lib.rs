//! The integration test binary: one module per feature.
mod builtins_chain;
mod builtins_fixtures;
mod builtins_porch;
mod cli_render;
mod engine_cache;
mod pkg_rw;
mod yaml_golden;
mod yaml_parse;
mod yaml_golden_identity;
mod krm_wire;
mod layering_cli;
mod layering_conformance;
mod layering_engine;
mod render_kptfile;
mod source_sink;
