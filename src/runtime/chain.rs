//! The evaluator chain for `image:` steps: builtin, then executables
//! configured in `render.toml`, then a container engine. Only
//! [`EvalError::NotFound`] falls through to the next evaluator.

use super::{EvalError, Evaluator, FunctionRequest, FunctionResponse};

/// Options the CLI passes to the chain.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ChainOptions {
    /// `--image-pull-policy` (`Always`, `IfNotPresent`, `Never`), if given.
    pub image_pull_policy: Option<String>,
}

/// The evaluator for `image:` steps.
pub fn image_evaluator(options: &ChainOptions) -> Box<dyn Evaluator> {
    let _ = options;
    Box::new(NoRuntime)
}

/// Placeholder until the builtin and container evaluators exist.
struct NoRuntime;

impl Evaluator for NoRuntime {
    fn evaluate(&self, request: &FunctionRequest<'_>) -> Result<FunctionResponse, EvalError> {
        Err(EvalError::NotFound(format!(
            "no runtime available for {:?}",
            request.target
        )))
    }
}
