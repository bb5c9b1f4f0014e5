//! The evaluator chain for `image:` steps: builtin, then executables
//! configured in `render.toml`, then a container engine. Only
//! [`EvalError::NotFound`] falls through to the next evaluator; any other
//! error (or a function that ran and failed) ends the chain.

use std::path::PathBuf;
use std::sync::Arc;

use super::builtin::BuiltinEvaluator;
use super::cancel::Cancel;
use super::config::{ConfigError, FunctionTable, Route};
use super::container::{ContainerAccess, ContainerEvaluator, EngineChoice};
use super::exec::{ExecEvaluator, run_function};
use super::{EvalError, Evaluator, Executor, FunctionRequest, FunctionResponse, FunctionTarget};

/// The function table's file when none is named: `render.toml` in the
/// working directory, used when present.
pub const DEFAULT_CONFIG: &str = "render.toml";

/// Options the CLI passes to the chain.
#[derive(Clone, Debug)]
pub struct ChainOptions {
    /// `--image-pull-policy` (`Always`, `IfNotPresent`, `Never`), if given.
    pub image_pull_policy: Option<String>,
    /// Trips to kill the running functions (the CLI's Ctrl-C).
    pub cancel: Cancel,
    /// The function table's file (a missing file means the defaults).
    pub config: PathBuf,
    /// What container functions may reach (kpt's `fn eval` flags).
    pub access: ContainerAccess,
    /// The container engine (`KPT_FN_RUNTIME`).
    pub runtime: EngineChoice,
}

impl Default for ChainOptions {
    fn default() -> Self {
        ChainOptions {
            image_pull_policy: None,
            cancel: Cancel::default(),
            config: PathBuf::from(DEFAULT_CONFIG),
            access: ContainerAccess::default(),
            runtime: EngineChoice::default(),
        }
    }
}

/// The evaluator for `image:` steps, configured by the function table
/// (`options.config`; without that file the defaults: builtins for the
/// functions krender implements, a container engine for the rest).
pub fn image_evaluator(options: &ChainOptions) -> Box<dyn Evaluator> {
    Box::new(ImageEvaluator::new(
        FunctionTable::load(&options.config),
        options,
    ))
}

/// The evaluator for `exec:` steps, with the deadlines the function table
/// sets for them (a table that does not load sets none; the image steps
/// report why).
pub fn exec_evaluator(options: &ChainOptions) -> ExecEvaluator {
    ExecEvaluator {
        cancel: options.cancel.clone(),
        table: Arc::new(FunctionTable::load(&options.config).unwrap_or_default()),
    }
}

/// Routes each image through the function table.
pub struct ImageEvaluator {
    table: Result<FunctionTable, ConfigError>,
    pull_policy: Option<String>,
    cancel: Cancel,
    access: ContainerAccess,
    runtime: EngineChoice,
    /// Set once the container engine has answered (asked before the first
    /// container step).
    engine_ready: std::sync::Arc<std::sync::OnceLock<()>>,
}

impl ImageEvaluator {
    /// An evaluator over a loaded (or failed) table.
    pub fn new(
        table: Result<FunctionTable, ConfigError>,
        options: &ChainOptions,
    ) -> ImageEvaluator {
        ImageEvaluator {
            table,
            pull_policy: options.image_pull_policy.clone(),
            cancel: options.cancel.clone(),
            access: options.access.clone(),
            runtime: options.runtime.clone(),
            engine_ready: Default::default(),
        }
    }

    fn container(&self, pull_policy: Option<String>) -> ContainerEvaluator {
        ContainerEvaluator {
            pull_policy: self.pull_policy.clone().or(pull_policy),
            engine: None,
            cancel: self.cancel.clone(),
            access: self.access.clone(),
            runtime: self.runtime.clone(),
            ready: self.engine_ready.clone(),
        }
    }
}

impl Evaluator for ImageEvaluator {
    fn evaluate(&self, request: &FunctionRequest<'_>) -> Result<FunctionResponse, EvalError> {
        let table = self
            .table
            .as_ref()
            .map_err(|err| EvalError::System(err.to_string()))?;
        let FunctionTarget::Image(image) = request.target else {
            return Err(EvalError::NotFound(format!(
                "not an image function: {:?}",
                request.target
            )));
        };
        let request = FunctionRequest {
            timeout: table.timeout_override(image).unwrap_or(request.timeout),
            ..*request
        };
        match table.route(image) {
            Route::Builtin(builtin) => ChainEvaluator::new(vec![
                Box::new(BuiltinEvaluator {
                    enabled: Some(vec![builtin]),
                }),
                Box::new(self.container(None)),
            ])
            .evaluate(&request),
            Route::Executable(path) => run_function(
                &path.to_string_lossy(),
                &[],
                request.input,
                request.timeout,
                &self.cancel,
            ),
            Route::Container { pull_policy } => self.container(pull_policy).evaluate(&request),
        }
    }

    fn native(&self, target: FunctionTarget<'_>) -> Option<super::builtin::Builtin> {
        let FunctionTarget::Image(image) = target else {
            return None;
        };
        match self.table.as_ref().ok()?.route(image) {
            Route::Builtin(builtin) => BuiltinEvaluator {
                enabled: Some(vec![builtin]),
            }
            .native(target),
            _ => None,
        }
    }

    fn executor(&self, target: FunctionTarget<'_>) -> Option<Executor> {
        let FunctionTarget::Image(image) = target else {
            return None;
        };
        match self.table.as_ref().ok()?.route(image) {
            Route::Builtin(builtin) => Some(Executor::Builtin(builtin.name())),
            Route::Executable(path) => Some(Executor::Executable(path.display().to_string())),
            Route::Container { pull_policy } => self.container(pull_policy).executor(target),
        }
    }
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

    /// Only the first evaluator can answer natively: a later one would only
    /// be asked after the first said "not found".
    fn native(&self, target: FunctionTarget<'_>) -> Option<super::builtin::Builtin> {
        self.evaluators.first()?.native(target)
    }

    fn executor(&self, target: FunctionTarget<'_>) -> Option<Executor> {
        self.evaluators
            .iter()
            .find_map(|evaluator| evaluator.executor(target))
    }
}
