//! The evaluator chain for `image:` steps: builtin, then executables
//! configured in `render.toml`, then a container engine. Only
//! [`EvalError::NotFound`] falls through to the next evaluator; any other
//! error (or a function that ran and failed) ends the chain.

use super::builtin::BuiltinEvaluator;
use super::{EvalError, Evaluator, FunctionRequest, FunctionResponse};

/// Options the CLI passes to the chain.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ChainOptions {
    /// `--image-pull-policy` (`Always`, `IfNotPresent`, `Never`), if given.
    pub image_pull_policy: Option<String>,
}

/// The evaluator for `image:` steps: builtins first, then a container
/// engine for everything else.
pub fn image_evaluator(options: &ChainOptions) -> Box<dyn Evaluator> {
    let _ = options;
    Box::new(ChainEvaluator::new(vec![
        Box::new(BuiltinEvaluator::default()),
        Box::new(NoContainerEngine),
    ]))
}

/// Tries evaluators in order; the first answer that is not
/// [`EvalError::NotFound`] wins.
pub struct ChainEvaluator {
    evaluators: Vec<Box<dyn Evaluator>>,
}

impl ChainEvaluator {
    /// A chain over `evaluators`, tried in order.
    pub fn new(evaluators: Vec<Box<dyn Evaluator>>) -> ChainEvaluator {
        ChainEvaluator { evaluators }
    }
}

impl Evaluator for ChainEvaluator {
    fn evaluate(&self, request: &FunctionRequest<'_>) -> Result<FunctionResponse, EvalError> {
        let mut not_found = Vec::new();
        for evaluator in &self.evaluators {
            match evaluator.evaluate(request) {
                Err(EvalError::NotFound(reason)) => not_found.push(reason),
                other => return other,
            }
        }
        Err(EvalError::NotFound(if not_found.is_empty() {
            format!("no evaluator configured for {:?}", request.target)
        } else {
            not_found.join("; ")
        }))
    }
}

/// Stand-in for the container evaluator until one is configured.
struct NoContainerEngine;

impl Evaluator for NoContainerEngine {
    fn evaluate(&self, request: &FunctionRequest<'_>) -> Result<FunctionResponse, EvalError> {
        Err(EvalError::NotFound(format!(
            "no container runtime available for {:?}",
            request.target
        )))
    }
}
