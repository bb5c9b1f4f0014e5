//! Function runtimes: one evaluator interface, with builtin, executable and
//! container evaluators chained by `render.toml`.
