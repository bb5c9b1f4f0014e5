//! The integration test binary: one module per feature.
mod layering_conformance;
mod layering_engine;
