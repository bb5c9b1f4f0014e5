//! Function runtimes: one evaluator interface, with builtin, executable and
//! container evaluators chained by `render.toml`.
//!
//! Every evaluator speaks the KRM function protocol at the byte level: it
//! receives the ResourceList text kpt would write to a function's stdin and
//! returns what the function wrote to stdout and stderr, plus its exit code.
//!
//! The simple catalog builtins can also run on the nodes themselves
//! ([`Evaluator::native`]): the hydrator then skips the encode → parse →
//! encode → parse round trip, which is most of a render's cost. Their
//! output equals the wire's (spec §8.7); `NativeMode` (the cli's
//! `KRENDER_NATIVE=off|verify`) forces the wire or checks every native step
//! against it.

use std::time::Duration;

/// What to run and on what.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FunctionRequest<'a> {
    /// What the Kptfile step names.
    pub target: FunctionTarget<'a>,
    /// The ResourceList document written to the function's stdin.
    pub input: &'a [u8],
    /// Deadline for the whole call.
    pub timeout: Duration,
}

/// The function a step names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FunctionTarget<'a> {
    /// A container image, already expanded with the default catalog prefix.
    Image(&'a str),
    /// A local command line (`exec:`), split like a shell would.
    Exec(&'a str),
}

/// What a function produced. A non-zero exit code is a value, not an error:
/// kpt still reads the function's stdout for structured results.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FunctionResponse {
    /// The function's stdout (a ResourceList on success).
    pub stdout: Vec<u8>,
    /// The function's stderr, printed by the renderer.
    pub stderr: Vec<u8>,
    /// The process exit code (0 on success).
    pub exit_code: i32,
}

/// Why an evaluator could not produce a [`FunctionResponse`].
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error, miette::Diagnostic)]
pub enum EvalError {
    /// This evaluator does not know the function; the chain tries the next one.
    #[error("{0}")]
    #[diagnostic(code(krender::runtime::not_found))]
    NotFound(String),
    /// The function could not be started or crashed without an exit code.
    #[error("{0}")]
    #[diagnostic(code(krender::runtime::execution_failed))]
    ExecutionFailed(String),
    /// The function ran past its deadline and was killed.
    #[error("function timed out after {0:?}")]
    #[diagnostic(code(krender::runtime::timed_out))]
    TimedOut(Duration),
    /// The render was cancelled (Ctrl-C) while the function ran; it was
    /// killed and its output is not a result.
    #[error("interrupted")]
    #[diagnostic(code(krender::runtime::interrupted))]
    Interrupted,
    /// Anything else (I/O on our side, a broken configuration).
    #[error("{0}")]
    #[diagnostic(code(krender::runtime::system))]
    System(String),
}

/// A way to run functions.
pub trait Evaluator: Send + Sync {
    /// Runs one function call.
    fn evaluate(&self, request: &FunctionRequest<'_>) -> Result<FunctionResponse, EvalError>;

    /// The builtin this evaluator would answer `target` with, when that
    /// builtin can run directly on nodes (see
    /// [`builtin::Builtin::runs_native`]); `None` means "use the wire".
    fn native(&self, _target: FunctionTarget<'_>) -> Option<builtin::Builtin> {
        None
    }

    /// What would run `target` (for logs and hints); `None` when this
    /// evaluator does not know the function.
    fn executor(&self, _target: FunctionTarget<'_>) -> Option<Executor> {
        None
    }
}

/// What runs a function: krender's own code, a local program or a
/// container. Displayed in logs (`RUST_LOG=krender=info`) and hints.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Executor {
    /// krender's in-process implementation of a catalog function.
    Builtin(&'static str),
    /// A local program: an `exec:` step, or a binary `render.toml` pins.
    Executable(String),
    /// A container engine running the image.
    Container {
        /// The engine binary.
        engine: String,
        /// The image.
        image: String,
    },
}

impl std::fmt::Display for Executor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Executor::Builtin(name) => write!(f, "krender builtin {name}"),
            Executor::Executable(path) => write!(f, "executable {path}"),
            Executor::Container { engine, image } => write!(f, "container {image} via {engine}"),
        }
    }
}

pub mod builtin;
pub mod cancel;
pub mod chain;
pub mod config;
pub mod container;
pub mod exec;
pub mod function_filter;
pub mod trace;
