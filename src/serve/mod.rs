//! `krender serve`: Porch's function runner (`evaluator.FunctionEvaluator`
//! over gRPC, plus `grpc.health.v1.Health`), answering each call through
//! the same evaluator chain and function-result cache as `krender fn eval`
//! and `fn render`.
//!
//! A call's `resource_list` is what kpt writes to a function's stdin; the
//! answer is what the function writes to stdout (its `log`: stderr), byte
//! for byte what the function's image would answer: Porch's own runners
//! return the function's raw stdout (nephio-project/porch,
//! func/internal/executableevaluator.go and func/wrapper-server/main.go)
//! and Porch runs kpt's function filter around it.
//!
//! Which functions exist is set by Porch's `FunctionConfig` resources (a
//! directory, re-read when it changes; see [`function_config`]) on top of
//! `render.toml`; an image neither names nor a builtin implements is
//! `NotFound`, so that a multi-evaluator in front falls through (Porch's
//! func/internal/multievaluator.go).

pub(crate) mod function_config;
mod service;

/// The generated protocol types, client and server
/// (`proto/evaluator.proto`).
#[allow(missing_docs, unreachable_pub, clippy::all)]
pub mod proto {
    tonic::include_proto!("evaluator");
}

pub use function_config::FunctionConfigError;
pub use service::{DEFAULT_MAX_MESSAGE_BYTES, Limits, ServeError, ServeOptions, Server};
