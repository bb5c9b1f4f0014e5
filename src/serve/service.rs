//! The gRPC service: admission (deadline, concurrency bound, queue bound),
//! routing through the function table, the evaluator chain, and Porch's
//! status codes.

use std::future::Future;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tonic::{Request, Response, Status};

use super::function_config::{self, FunctionConfigError};
use super::proto::function_evaluator_server::{FunctionEvaluator, FunctionEvaluatorServer};
use super::proto::{EvaluateFunctionRequest, EvaluateFunctionResponse};
use crate::engine::cache::{CacheOptions, CachePolicy, CachingEvaluator};
use crate::engine::remote::RemoteCache;
use crate::runtime::builtin::{Builtin, DEFAULT_IMAGE_PREFIX, split_image};
use crate::runtime::cancel::Cancel;
use crate::runtime::chain::{ChainOptions, ImageEvaluator};
use crate::runtime::config::{ConfigError, DEFAULT_TIMEOUT, FunctionTable, Route};
use crate::runtime::container::{ContainerAccess, EngineChoice};
use crate::runtime::{EvalError, Evaluator, FunctionRequest, FunctionResponse, FunctionTarget};

/// Porch's default bound on a gRPC message, both ways (its
/// `--max-request-body-size`, func/server/server.go).
pub const DEFAULT_MAX_MESSAGE_BYTES: usize = 6 * 1024 * 1024;

/// Taken off the client's deadline, so that a call running out of time is
/// answered DEADLINE_EXCEEDED by the service (as Porch's Go runner's
/// clients see it) before tonic's own timeout answers CANCELLED.
const MARGIN: Duration = Duration::from_millis(20);

/// How long a call killed at its deadline may take to report that.
const GRACE: Duration = Duration::from_millis(10);

/// Cache entries waiting for the background writer; past that, results
/// are not stored (the server stays fast when the disk is not).
const WRITE_QUEUE: usize = 1024;

/// Room in a gRPC message for what is not `resource_list`.
const ENVELOPE_BYTES: usize = 64 * 1024;

/// What a shared service bounds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// The longest a call may take; a shorter gRPC deadline wins.
    pub timeout: Duration,
    /// Functions running at once; further calls wait (backpressure).
    pub max_concurrent: usize,
    /// Calls waiting for a slot; beyond that a call is refused at once with
    /// RESOURCE_EXHAUSTED.
    pub max_queued: usize,
    /// The largest request (and response) message, in bytes.
    pub max_message_bytes: usize,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            timeout: DEFAULT_TIMEOUT,
            max_concurrent: std::thread::available_parallelism().map_or(2, |cores| cores.get() * 2),
            max_queued: 1024,
            max_message_bytes: DEFAULT_MAX_MESSAGE_BYTES,
        }
    }
}

/// How `krender serve` is configured.
#[derive(Clone, Default)]
pub struct ServeOptions {
    /// The directory of Porch `FunctionConfig` files, re-read on change.
    pub function_configs: Option<PathBuf>,
    /// The function table (`render.toml`; a missing file is the defaults).
    pub render_toml: PathBuf,
    /// The function-result cache.
    pub cache: CacheOptions,
    /// The remote cache, when one is configured.
    pub remote: Option<Arc<RemoteCache>>,
    /// The container engine for `podExecutor` tags and `render.toml`
    /// container entries.
    pub runtime: EngineChoice,
    /// The service's bounds.
    pub limits: Limits,
}

/// Why the service could not start or stopped with an error.
#[derive(Debug, thiserror::Error, miette::Diagnostic)]
pub enum ServeError {
    /// `render.toml` does not load.
    #[error(transparent)]
    #[diagnostic(transparent)]
    Config(#[from] ConfigError),
    /// The FunctionConfig directory does not load.
    #[error(transparent)]
    #[diagnostic(transparent)]
    FunctionConfig(#[from] FunctionConfigError),
    /// The FunctionConfig directory cannot be watched.
    #[error("cannot watch {path} for changes: {message}")]
    #[diagnostic(code(krender::serve::watch))]
    Watch {
        /// The directory.
        path: PathBuf,
        /// The watcher's error.
        message: String,
    },
    /// The listening socket or the gRPC transport failed.
    #[error("gRPC server: {0}")]
    #[diagnostic(code(krender::serve::transport))]
    Transport(String),
}

/// One loaded configuration: the table and the evaluator over it.
struct Functions {
    table: FunctionTable,
    evaluator: Box<dyn Evaluator>,
}

impl Functions {
    fn load(options: &ServeOptions) -> Result<Functions, ServeError> {
        let mut table = FunctionTable::load(&options.render_toml)?;
        if let Some(dir) = &options.function_configs {
            // render.toml's entries come first and so win.
            table.functions.extend(function_config::load_dir(dir)?);
        }
        let chain = ChainOptions {
            image_pull_policy: None,
            // Not the process's signal token: a SIGTERM lets running
            // functions finish.
            cancel: Cancel::default(),
            config: options.render_toml.clone(),
            access: ContainerAccess::default(),
            runtime: options.runtime.clone(),
        };
        let inner: Box<dyn Evaluator> = Box::new(ImageEvaluator::new(Ok(table.clone()), &chain));
        let evaluator: Box<dyn Evaluator> = match options.cache.resolved_dir() {
            Some(dir) => {
                let policy = CachePolicy {
                    table: Some(table.clone()),
                };
                let cache = CachingEvaluator::new(inner, dir, policy);
                let cache = match &options.remote {
                    Some(remote) => cache.with_remote(remote.clone()),
                    None => cache,
                };
                // A call does not wait for its entry to reach the disk.
                Box::new(cache.with_background_writes(WRITE_QUEUE))
            }
            None => inner,
        };
        Ok(Functions { table, evaluator })
    }
}

/// What every call shares.
struct Shared {
    options: ServeOptions,
    functions: RwLock<Arc<Functions>>,
    slots: Arc<Semaphore>,
    queued: AtomicUsize,
}

impl Shared {
    fn functions(&self) -> Arc<Functions> {
        match self.functions.read() {
            Ok(functions) => functions.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }

    /// Re-reads the configuration; a broken one keeps the last good one.
    fn reload(&self) {
        match Functions::load(&self.options) {
            Ok(functions) => {
                tracing::info!(target: "krender::serve", entries = functions.table.functions.len(), "configuration reloaded");
                let functions = Arc::new(functions);
                match self.functions.write() {
                    Ok(mut slot) => *slot = functions,
                    Err(poisoned) => *poisoned.into_inner() = functions,
                }
            }
            Err(error) => {
                tracing::warn!(target: "krender::serve", %error, "configuration not reloaded; the previous one stays");
            }
        }
    }

    /// Waits for a slot to run a function until `deadline`; refuses at
    /// once when too many calls already wait.
    async fn admit(&self, deadline: Instant) -> Result<OwnedSemaphorePermit, Status> {
        if let Ok(permit) = self.slots.clone().try_acquire_owned() {
            return Ok(permit);
        }
        if self.queued.fetch_add(1, Ordering::SeqCst) >= self.options.limits.max_queued {
            self.queued.fetch_sub(1, Ordering::SeqCst);
            return Err(Status::resource_exhausted(format!(
                "krender serve: {} functions running and {} calls waiting; try again later",
                self.options.limits.max_concurrent, self.options.limits.max_queued
            )));
        }
        let wait = deadline.saturating_duration_since(Instant::now());
        let acquired = tokio::time::timeout(wait, self.slots.clone().acquire_owned()).await;
        self.queued.fetch_sub(1, Ordering::SeqCst);
        match acquired {
            Ok(Ok(permit)) => Ok(permit),
            Ok(Err(_)) => Err(Status::unavailable("krender serve is shutting down")),
            Err(_) => Err(Status::deadline_exceeded(
                "deadline exceeded while waiting for a free function slot",
            )),
        }
    }
}

/// The `FunctionEvaluator` service.
#[derive(Clone)]
struct Service {
    shared: Arc<Shared>,
}

/// The gRPC `grpc-timeout` header (`<digits><unit>`, units H M S m u n).
fn grpc_timeout(metadata: &tonic::metadata::MetadataMap) -> Option<Duration> {
    let value = metadata.get("grpc-timeout")?.to_str().ok()?;
    let (digits, unit) = value.split_at(value.len().checked_sub(1)?);
    let amount: u64 = digits.parse().ok()?;
    Some(match unit {
        "H" => Duration::from_secs(amount.saturating_mul(3600)),
        "M" => Duration::from_secs(amount.saturating_mul(60)),
        "S" => Duration::from_secs(amount),
        "m" => Duration::from_millis(amount),
        "u" => Duration::from_micros(amount),
        "n" => Duration::from_nanos(amount),
        _ => return None,
    })
}

/// The catalog name of `image` when a FunctionConfig's prefix routes it to
/// `builtin` under another registry (the builtin evaluator answers catalog
/// names only); `image` itself otherwise.
fn builtin_image(image: &str, builtin: Builtin) -> String {
    if Builtin::for_image(image) == Some(builtin) {
        return image.to_owned();
    }
    let (_, tag) = split_image(image);
    format!("{DEFAULT_IMAGE_PREFIX}{}{tag}", builtin.name())
}

/// Why `input` is not a ResourceList, if it is not one.
fn malformed(input: &[u8]) -> Option<String> {
    let text = match std::str::from_utf8(input) {
        Ok(text) => text,
        Err(error) => return Some(format!("not UTF-8: {error}")),
    };
    let documents = match crate::yaml::parse_documents(text) {
        Ok(documents) => documents,
        Err(error) => return Some(error.to_string()),
    };
    let roots: Vec<_> = documents
        .iter()
        .filter(|document| !document.root().is_null())
        .collect();
    match roots.as_slice() {
        [document] if crate::krm::resource::kind(document) == Some("ResourceList") => {
            crate::krm::resource_list::decode_function_output(text)
                .err()
                .map(|error| error.to_string())
        }
        [_] => Some("the document is not a ResourceList".to_owned()),
        [] => Some("empty input".to_owned()),
        _ => Some(format!(
            "{} documents where one ResourceList was expected",
            roots.len()
        )),
    }
}

/// A failed function's results, one `[severity] message` line each.
fn results_text(stdout: &[u8]) -> Option<String> {
    let text = std::str::from_utf8(stdout).ok()?;
    let output = crate::krm::resource_list::decode_function_output(text).ok()?;
    let results = output.results?;
    let lines: Vec<String> = results
        .content
        .iter()
        .map(|result| {
            let severity = result.get_str(&["severity"]).unwrap_or("error");
            let message = result.get_str(&["message"]).unwrap_or("");
            format!("[{severity}] {message}")
        })
        .collect();
    Some(lines.join("\n"))
}

/// Porch's answer to an evaluation: the function's stdout and stderr when
/// it succeeded; otherwise INTERNAL in the words of Porch's wrapper server
/// (func/wrapper-server/main.go), NOT_FOUND for a function no evaluator
/// knows, DEADLINE_EXCEEDED for one killed at its deadline, and
/// INVALID_ARGUMENT when the input was not a ResourceList at all.
fn answer(
    image: &str,
    input: &[u8],
    outcome: Result<FunctionResponse, EvalError>,
) -> Result<Response<EvaluateFunctionResponse>, Status> {
    let failure = match outcome {
        Ok(response) if response.exit_code == 0 => {
            return Ok(Response::new(EvaluateFunctionResponse {
                resource_list: response.stdout,
                log: response.stderr,
            }));
        }
        Ok(response) => {
            let stderr = String::from_utf8_lossy(&response.stderr);
            match results_text(&response.stdout) {
                Some(results) => format!(
                    "failed to evaluate function {image:?} with structured results: {results} and stderr: {stderr}"
                ),
                None => format!("failed to evaluate function {image:?} with stderr {stderr}"),
            }
        }
        Err(EvalError::NotFound(message)) => return Err(Status::not_found(message)),
        Err(EvalError::TimedOut(after)) => {
            return Err(Status::deadline_exceeded(format!(
                "function {image:?} timed out after {after:?}"
            )));
        }
        Err(EvalError::Interrupted) => {
            return Err(Status::cancelled(format!("function {image:?} was stopped")));
        }
        Err(EvalError::ExecutionFailed(message) | EvalError::System(message)) => {
            format!("Failed to execute function {image:?}: {message}")
        }
    };
    if let Some(problem) = malformed(input) {
        return Err(Status::invalid_argument(format!(
            "resource_list is not a valid ResourceList: {problem}"
        )));
    }
    Err(Status::internal(failure))
}

#[tonic::async_trait]
impl FunctionEvaluator for Service {
    async fn evaluate_function(
        &self,
        request: Request<EvaluateFunctionRequest>,
    ) -> Result<Response<EvaluateFunctionResponse>, Status> {
        let started = Instant::now();
        let limit = self.shared.options.limits.timeout;
        let budget = grpc_timeout(request.metadata()).map_or(limit, |asked| {
            asked
                .saturating_sub(MARGIN)
                .max(Duration::from_millis(1))
                .min(limit)
        });
        let deadline = started + budget;
        let EvaluateFunctionRequest {
            resource_list,
            image,
        } = request.into_inner();
        let max = self.shared.options.limits.max_message_bytes;
        if resource_list.len() > max {
            // grpc-go's code and words for an oversized message (what
            // Porch's runner answers, func/server/server.go sets the bound).
            return Err(Status::resource_exhausted(format!(
                "grpc: received message larger than max ({} vs. {max})",
                resource_list.len()
            )));
        }
        if image.is_empty() {
            return Err(Status::invalid_argument("image is empty"));
        }
        let functions = self.shared.functions();
        let image = match functions.table.known_route(&image) {
            None => {
                return Err(Status::not_found(format!(
                    "function {image:?} not found: no FunctionConfig or render.toml entry names it, and krender has no builtin for it"
                )));
            }
            Some(Route::Builtin(builtin)) => builtin_image(&image, builtin),
            Some(_) => image,
        };
        let permit = self.shared.admit(deadline).await?;
        let remaining = deadline.saturating_duration_since(Instant::now());
        if remaining.is_zero() {
            return Err(Status::deadline_exceeded(
                "deadline exceeded before the function ran",
            ));
        }
        let name = image.clone();
        let task = tokio::task::spawn_blocking(move || {
            let _permit = permit;
            let outcome = functions.evaluator.evaluate(&FunctionRequest {
                target: FunctionTarget::Image(&image),
                input: &resource_list,
                timeout: remaining,
            });
            answer(&image, &resource_list, outcome)
        });
        match tokio::time::timeout(remaining + GRACE, task).await {
            Ok(Ok(answer)) => answer,
            Ok(Err(_)) => Err(Status::internal(format!(
                "function {name:?} stopped without an answer"
            ))),
            Err(_) => Err(Status::deadline_exceeded(format!(
                "function {name:?} did not finish within {budget:?}"
            ))),
        }
    }
}

/// A configured service, ready to serve on a listener.
pub struct Server {
    shared: Arc<Shared>,
    _watcher: Option<notify::RecommendedWatcher>,
}

impl Server {
    /// Loads the configuration (failing on a broken one) and starts
    /// watching the FunctionConfig directory.
    pub fn new(options: ServeOptions) -> Result<Server, ServeError> {
        let functions = Functions::load(&options)?;
        let shared = Arc::new(Shared {
            slots: Arc::new(Semaphore::new(options.limits.max_concurrent.max(1))),
            functions: RwLock::new(Arc::new(functions)),
            queued: AtomicUsize::new(0),
            options,
        });
        let watcher = match shared.options.function_configs.clone() {
            Some(dir) => Some(watch(&dir, shared.clone())?),
            None => None,
        };
        Ok(Server {
            shared,
            _watcher: watcher,
        })
    }

    /// Serves on `listener` until `shutdown` resolves, then stops accepting
    /// calls (health turns NOT_SERVING) and returns once the calls in
    /// flight have been answered.
    pub async fn run(
        self,
        listener: std::net::TcpListener,
        shutdown: impl Future<Output = ()>,
    ) -> Result<(), ServeError> {
        use tokio_stream::StreamExt;
        let transport = |error: &dyn std::fmt::Display| ServeError::Transport(error.to_string());
        listener
            .set_nonblocking(true)
            .map_err(|error| transport(&error))?;
        let listener =
            tokio::net::TcpListener::from_std(listener).map_err(|error| transport(&error))?;
        // Small calls: Nagle's delay would dominate their latency.
        let incoming = tokio_stream::wrappers::TcpListenerStream::new(listener).map(|stream| {
            stream.inspect(|stream| {
                let _ = stream.set_nodelay(true);
            })
        });
        let (reporter, health) = tonic_health::server::health_reporter();
        reporter
            .set_serving::<FunctionEvaluatorServer<Service>>()
            .await;
        let limit = self.shared.options.limits.max_message_bytes;
        let service = FunctionEvaluatorServer::new(Service {
            shared: self.shared.clone(),
        })
        // The handler refuses a resource_list over the limit with grpc-go's
        // code; tonic refuses bigger messages before reading them.
        .max_decoding_message_size(limit.saturating_add(ENVELOPE_BYTES))
        .max_encoding_message_size(limit.saturating_add(ENVELOPE_BYTES));
        let shutdown = async move {
            shutdown.await;
            reporter
                .set_not_serving::<FunctionEvaluatorServer<Service>>()
                .await;
            reporter
                .set_service_status("", tonic_health::ServingStatus::NotServing)
                .await;
        };
        tonic::transport::Server::builder()
            .add_service(health)
            .add_service(service)
            .serve_with_incoming_shutdown(incoming, shutdown)
            .await
            .map_err(|error| transport(&error))
    }
}

/// Re-reads the configuration whenever the directory changes (debounced:
/// an editor's save is several events).
fn watch(
    dir: &std::path::Path,
    shared: Arc<Shared>,
) -> Result<notify::RecommendedWatcher, ServeError> {
    use notify::Watcher;
    let (changes, changed) = mpsc::channel::<()>();
    let mut watcher = notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
        if event.is_ok_and(|event| !event.kind.is_access()) {
            let _ = changes.send(());
        }
    })
    .map_err(|error| ServeError::Watch {
        path: dir.to_owned(),
        message: error.to_string(),
    })?;
    watcher
        .watch(dir, notify::RecursiveMode::NonRecursive)
        .map_err(|error| ServeError::Watch {
            path: dir.to_owned(),
            message: error.to_string(),
        })?;
    // Ends when the watcher (and with it the sender) is dropped.
    let spawned = std::thread::Builder::new()
        .name("krender-serve-config".to_owned())
        .spawn(move || {
            while changed.recv().is_ok() {
                while changed.recv_timeout(Duration::from_millis(100)).is_ok() {}
                shared.reload();
            }
        });
    spawned.map_err(|error| ServeError::Watch {
        path: dir.to_owned(),
        message: error.to_string(),
    })?;
    Ok(watcher)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serve_reads_grpc_timeouts() {
        let mut metadata = tonic::metadata::MetadataMap::new();
        assert_eq!(grpc_timeout(&metadata), None);
        for (value, expected) in [
            ("250m", Duration::from_millis(250)),
            ("3S", Duration::from_secs(3)),
            ("2M", Duration::from_secs(120)),
            ("1H", Duration::from_secs(3600)),
            ("7u", Duration::from_micros(7)),
            ("9n", Duration::from_nanos(9)),
        ] {
            metadata.insert(
                "grpc-timeout",
                value.parse().unwrap_or_else(|_| unreachable!()),
            );
            assert_eq!(grpc_timeout(&metadata), Some(expected), "{value}");
        }
        metadata.insert(
            "grpc-timeout",
            "x".parse().unwrap_or_else(|_| unreachable!()),
        );
        assert_eq!(grpc_timeout(&metadata), None);
    }

    #[test]
    fn serve_tells_malformed_input() {
        assert!(
            malformed(b"apiVersion: config.kubernetes.io/v1\nkind: ResourceList\nitems: []\n")
                .is_none()
        );
        for bad in [
            &b""[..],
            b"\xff\xfe",
            b"items: [",
            b"apiVersion: v1\nkind: ConfigMap\n",
            b"kind: ResourceList\n---\nkind: ResourceList\n",
        ] {
            assert!(malformed(bad).is_some(), "{bad:?}");
        }
    }
}
