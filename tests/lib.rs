//! The integration test binary: one module per feature.
