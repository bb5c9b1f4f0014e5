//! The container runtime: runs an image with the docker or podman CLI the
//! way kpt does (`run --rm -i --network none`, pull policy, an unprivileged
//! user). When neither engine is on `PATH` it reports
//! [`EvalError::NotFound`] saying so, so the chain can end with a clear
//! message. The child process itself is run by `runtime::exec`.

use std::path::PathBuf;

use super::cancel::Cancel;
use super::exec::run_process;
use super::{EvalError, Evaluator, Executor, FunctionRequest, FunctionResponse, FunctionTarget};

/// [`Executor::Container`]'s engine when none is on `PATH`.
pub const NO_ENGINE: &str = "no engine";

/// Runs `image:` functions in containers.
#[derive(Clone, Debug, Default)]
pub struct ContainerEvaluator {
    /// `Always`, `IfNotPresent` or `Never`; `None` = `IfNotPresent`.
    pub pull_policy: Option<String>,
    /// The engine binary; `None` = the first of docker, podman on `PATH`.
    pub engine: Option<PathBuf>,
    /// Trips to kill the running engine client (the CLI's Ctrl-C).
    pub cancel: Cancel,
    /// How the container may reach its host (kpt's `fn eval` flags).
    pub access: ContainerAccess,
    /// Which engine `KPT_FN_RUNTIME` asks for (used when `engine` is unset).
    pub runtime: EngineChoice,
}

/// The container engine to run, as kpt's `KPT_FN_RUNTIME` names it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum EngineChoice {
    /// Unset: the first of docker, podman on `PATH`.
    #[default]
    FirstOnPath,
    /// `docker`, `podman` or `nerdctl` (any letter case).
    Named(String),
    /// Any other value: each container step fails with kpt's message.
    Unsupported(String),
}

impl EngineChoice {
    /// Reads a `KPT_FN_RUNTIME` value as kpt does (empty means unset).
    pub fn parse(value: &str) -> EngineChoice {
        let lower = value.to_ascii_lowercase();
        match lower.as_str() {
            "" => EngineChoice::FirstOnPath,
            "docker" | "podman" | "nerdctl" => EngineChoice::Named(lower),
            _ => EngineChoice::Unsupported(value.to_owned()),
        }
    }
}

/// What a container function may reach beyond its input: kpt's `fn eval`
/// flags `--network`, `--as-current-user`, `--mount` and `-e`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ContainerAccess {
    /// The host network instead of none.
    pub network: bool,
    /// `uid:gid` to run as instead of `nobody`.
    pub user: Option<String>,
    /// `--mount` options, passed to the engine as given.
    pub mounts: Vec<String>,
    /// `KEY=VALUE`, or `KEY` to export the host's value.
    pub env: Vec<String>,
}

impl ContainerEvaluator {
    fn engine(&self) -> Option<PathBuf> {
        if let Some(engine) = &self.engine {
            return Some(engine.clone());
        }
        let candidates: Vec<&str> = match &self.runtime {
            EngineChoice::FirstOnPath => vec!["docker", "podman"],
            EngineChoice::Named(name) => vec![name.as_str()],
            EngineChoice::Unsupported(_) => Vec::new(),
        };
        candidates
            .iter()
            .find_map(|name| super::exec::on_path(name).next())
    }

    /// Why no engine can run `image`, in kpt's words where kpt has them.
    fn no_engine(&self, image: &str) -> EvalError {
        match &self.runtime {
            EngineChoice::FirstOnPath => EvalError::NotFound(format!(
                "no container engine (docker or podman) found on PATH to run {image}"
            )),
            EngineChoice::Named(name) => EvalError::NotFound(format!(
                "exec: \"{name}\": executable file not found in $PATH\n{name} must be installed."
            )),
            EngineChoice::Unsupported(value) => EvalError::ExecutionFailed(format!(
                "unsupported runtime: {} the runtime must be either docker or podman",
                super::builtin::sdk::go_quote(value)
            )),
        }
    }

    /// The engine arguments for `image`, as kpt builds them, with the
    /// container named `name` (so it can be killed by name).
    pub fn arguments(&self, image: &str, name: &str) -> Vec<String> {
        let pull = match self.pull_policy.as_deref() {
            Some(policy) if policy.eq_ignore_ascii_case("always") => "always",
            Some(policy) if policy.eq_ignore_ascii_case("never") => "never",
            _ => "missing",
        };
        [
            "run",
            "--rm",
            "-i",
            "--pull",
            pull,
            "-a",
            "STDIN",
            "-a",
            "STDOUT",
            "-a",
            "STDERR",
            "--network",
            if self.access.network { "host" } else { "none" },
            "--user",
            self.access.user.as_deref().unwrap_or("nobody"),
            "--security-opt=no-new-privileges",
            "--name",
            name,
        ]
        .iter()
        .map(|arg| (*arg).to_owned())
        .chain(
            self.access
                .mounts
                .iter()
                .flat_map(|mount| ["--mount".to_owned(), mount.clone()]),
        )
        .chain(
            self.access
                .env
                .iter()
                .flat_map(|env| ["-e".to_owned(), env.clone()]),
        )
        .chain(std::iter::once(image.to_owned()))
        .collect()
    }
}

/// A name no other container has: krender's, this process's, and a
/// counter.
fn container_name() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    format!(
        "krender-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

impl Evaluator for ContainerEvaluator {
    fn evaluate(&self, request: &FunctionRequest<'_>) -> Result<FunctionResponse, EvalError> {
        let FunctionTarget::Image(image) = request.target else {
            return Err(EvalError::NotFound("containers only run images".to_owned()));
        };
        let Some(engine) = self.engine() else {
            return Err(self.no_engine(image));
        };
        let program = engine.to_string_lossy().into_owned();
        let name = container_name();
        let result = run_process(
            &program,
            &self.arguments(image, &name),
            request.input,
            request.timeout,
            &self.cancel,
        );
        if matches!(result, Err(EvalError::TimedOut(_) | EvalError::Interrupted)) {
            // Killing the client leaves the container running in the
            // engine's daemon: stop it by name (best effort; it may be gone).
            let kill = ["kill".to_owned(), name];
            let _ = run_process(
                &program,
                &kill,
                b"",
                std::time::Duration::from_secs(10),
                &Cancel::default(),
            );
        }
        result
    }

    fn executor(&self, target: FunctionTarget<'_>) -> Option<Executor> {
        let FunctionTarget::Image(image) = target else {
            return None;
        };
        Some(Executor::Container {
            engine: self.engine().map_or_else(
                || NO_ENGINE.to_owned(),
                |engine| engine.display().to_string(),
            ),
            image: image.to_owned(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments_follow_kpt() {
        let evaluator = ContainerEvaluator {
            pull_policy: Some("Never".to_owned()),
            engine: None,
            cancel: Cancel::new(),
            ..ContainerEvaluator::default()
        };
        let args = evaluator.arguments("img:1", "krender-1-0");
        assert_eq!(args[..5], ["run", "--rm", "-i", "--pull", "never"]);
        assert_eq!(args.last().map(String::as_str), Some("img:1"));
    }

    /// A fake engine that records its arguments and, for `run`, hangs: at
    /// the deadline the client is killed and the container is stopped by
    /// the name it was given.
    #[test]
    fn a_timed_out_container_is_killed_by_name() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("calls");
        let engine = dir.path().join("docker");
        std::fs::write(
            &engine,
            format!(
                "#!/bin/sh\necho \"$*\" >> {}\n[ \"$1\" = run ] && exec sleep 30\nexit 0\n",
                log.display()
            ),
        )
        .unwrap();
        std::fs::set_permissions(&engine, std::fs::Permissions::from_mode(0o755)).unwrap();
        let evaluator = ContainerEvaluator {
            pull_policy: None,
            engine: Some(engine),
            cancel: Cancel::new(),
            ..ContainerEvaluator::default()
        };
        let request = FunctionRequest {
            target: FunctionTarget::Image("img:1"),
            input: b"",
            timeout: std::time::Duration::from_millis(300),
        };
        assert!(matches!(
            evaluator.evaluate(&request),
            Err(EvalError::TimedOut(_))
        ));
        let calls = std::fs::read_to_string(&log).unwrap();
        let lines: Vec<&str> = calls.lines().collect();
        assert_eq!(lines.len(), 2, "{calls}");
        let name = lines[0]
            .split(' ')
            .skip_while(|arg| *arg != "--name")
            .nth(1)
            .unwrap();
        assert!(name.starts_with("krender-"), "{calls}");
        assert_eq!(lines[1], format!("kill {name}"));
    }

    #[test]
    fn missing_engine_binary_fails_to_start() {
        let missing = ContainerEvaluator {
            pull_policy: None,
            engine: Some(PathBuf::from("/nonexistent/docker")),
            cancel: Cancel::new(),
            ..ContainerEvaluator::default()
        };
        let request = FunctionRequest {
            target: FunctionTarget::Image("img:1"),
            input: b"",
            timeout: std::time::Duration::from_secs(1),
        };
        assert!(matches!(
            missing.evaluate(&request),
            Err(EvalError::ExecutionFailed(_))
        ));
    }
}
