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
    /// Set once the engine has answered (kpt asks once per render), shared
    /// by the evaluator's clones. A failure is not kept: a watch session
    /// asks again once the daemon may have started.
    pub ready: std::sync::Arc<std::sync::OnceLock<()>>,
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
                "exec: \"{name}\": executable file not found in $PATH\n{}",
                install_hint(name)
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

/// kpt's advice when the engine `name` does not answer (`fnruntime`'s
/// `dockerCmdAvailable`, `podmanCmdAvailable`, `nerdctlCmdAvailable`).
fn install_hint(name: &str) -> String {
    match name {
        "docker" => "docker must be running to use this command\nTo install docker, follow the \
                     instructions at https://docs.docker.com/get-docker/.\n"
            .to_owned(),
        "podman" => "podman must be installed.\nTo install podman, follow the instructions at \
                     https://podman.io/getting-started/installation.\n"
            .to_owned(),
        _ => format!(
            "{name} must be installed.\nTo install {name}, follow the instructions at \
             https://github.com/containerd/nerdctl#install.\n"
        ),
    }
}

/// kpt's oldest supported docker client.
const MIN_DOCKER: (u64, u64, u64) = (20, 10, 0);

/// Asks the engine at `program` whether it answers, as kpt does before its
/// first container step: `docker version --format {{.Client.Version}}`
/// (which fails when no daemon answers) and a supported client, or
/// `podman version` / `nerdctl version`. The error is kpt's text: Go's
/// error of the command, then the advice.
pub fn check_engine(program: &str) -> Result<(), String> {
    let name = std::path::Path::new(program)
        .file_name()
        .map(|name| name.to_string_lossy().into_owned())
        .unwrap_or_default();
    let docker = name == "docker";
    if !docker && name != "podman" && name != "nerdctl" {
        // An engine of another name: kpt knows no check for it.
        return Ok(());
    }
    let args: Vec<String> = if docker {
        vec![
            "version".into(),
            "--format".into(),
            "{{.Client.Version}}".into(),
        ]
    } else {
        vec!["version".into()]
    };
    let timeout = std::time::Duration::from_secs(5);
    let failed = |error: String| Err(format!("{error}\n{}", install_hint(&name)));
    match run_process(program, &args, b"", timeout, &Cancel::default()) {
        Err(EvalError::TimedOut(_)) => failed("signal: killed".to_owned()),
        Err(error) => failed(error.to_string()),
        Ok(response) if response.exit_code != 0 => {
            failed(format!("exit status {}", response.exit_code))
        }
        Ok(response) if docker => {
            let version = String::from_utf8_lossy(&response.stdout)
                .trim_end_matches('\n')
                .to_owned();
            if version.is_empty() {
                return failed("<nil>".to_owned());
            }
            docker_version_supported(&version)
        }
        Ok(_) => Ok(()),
    }
}

/// kpt's `isSupportedDockerVersion`: a semver client version, at least
/// [`MIN_DOCKER`].
fn docker_version_supported(version: &str) -> Result<(), String> {
    let wanted = format!(
        "docker client version must be v{}.{}.{} or greater",
        MIN_DOCKER.0, MIN_DOCKER.1, MIN_DOCKER.2
    );
    let core = version.split(['-', '+']).next().unwrap_or_default();
    // Semver numbers: digits, without a leading zero.
    let number = |part: &str| {
        (part == "0" || !part.starts_with('0'))
            .then(|| part.parse::<u64>().ok())
            .flatten()
    };
    let parts: Vec<Option<u64>> = core.split('.').map(number).collect();
    let (Some(major), minor, patch) = (
        parts.first().copied().flatten(),
        parts.get(1).copied().flatten(),
        parts.get(2).copied().flatten(),
    ) else {
        return Err(format!("{wanted}: found invalid version v{version}"));
    };
    if parts.len() > 3 || parts.iter().any(Option::is_none) {
        return Err(format!("{wanted}: found invalid version v{version}"));
    }
    if (major, minor.unwrap_or(0), patch.unwrap_or(0)) < MIN_DOCKER {
        return Err(format!("{wanted}: found v{version}"));
    }
    Ok(())
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
        if self.ready.get().is_none() {
            check_engine(&program).map_err(EvalError::ExecutionFailed)?;
            let _ = self.ready.set(());
        }
        let name = container_name();
        let result = super::exec::run_function(
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

    /// A `docker` script in `dir` that appends its arguments to the log it
    /// returns, then runs `body`.
    fn fake_docker(dir: &std::path::Path, body: &str) -> (PathBuf, PathBuf) {
        use std::os::unix::fs::PermissionsExt;
        let log = dir.join("calls");
        let engine = dir.join("docker");
        let script = format!("#!/bin/sh\necho \"$*\" >> {}\n{body}", log.display());
        std::fs::write(&engine, script).unwrap();
        std::fs::set_permissions(&engine, std::fs::Permissions::from_mode(0o755)).unwrap();
        (engine, log)
    }

    /// A fake engine that records its arguments and, for `run`, hangs: at
    /// the deadline the client is killed and the container is stopped by
    /// the name it was given.
    #[test]
    fn a_timed_out_container_is_killed_by_name() {
        let dir = tempfile::tempdir().unwrap();
        let (engine, log) = fake_docker(
            dir.path(),
            "[ \"$1\" = run ] && exec sleep 30\n[ \"$1\" = version ] && echo 24.0.7\nexit 0\n",
        );
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
        assert_eq!(lines.len(), 3, "{calls}");
        // kpt's check that the engine answers, before the first run.
        assert_eq!(lines[0], "version --format {{.Client.Version}}");
        let lines = &lines[1..];
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

    /// A docker client whose daemon does not answer: kpt's text, each time
    /// a step asks (a daemon may start in the meantime).
    #[test]
    fn an_engine_that_does_not_answer_fails_with_kpts_text() {
        let dir = tempfile::tempdir().unwrap();
        let (engine, log) = fake_docker(
            dir.path(),
            "echo 28.2.2\necho 'Cannot connect to the Docker daemon' >&2\nexit 1\n",
        );
        let evaluator = ContainerEvaluator {
            engine: Some(engine),
            ..ContainerEvaluator::default()
        };
        let request = FunctionRequest {
            target: FunctionTarget::Image("img:1"),
            input: b"",
            timeout: std::time::Duration::from_secs(5),
        };
        let expected = EvalError::ExecutionFailed(
            "exit status 1\ndocker must be running to use this command\nTo install docker, follow \
             the instructions at https://docs.docker.com/get-docker/.\n"
                .to_owned(),
        );
        assert_eq!(evaluator.evaluate(&request), Err(expected.clone()));
        assert_eq!(evaluator.clone().evaluate(&request), Err(expected));
        let calls = std::fs::read_to_string(&log).unwrap();
        assert_eq!(calls, "version --format {{.Client.Version}}\n".repeat(2));
    }

    #[test]
    fn docker_versions_are_checked_as_kpt_checks_them() {
        assert_eq!(docker_version_supported("28.2.2"), Ok(()));
        assert_eq!(docker_version_supported("20.10.0"), Ok(()));
        assert_eq!(
            docker_version_supported("19.3.8"),
            Err("docker client version must be v20.10.0 or greater: found v19.3.8".to_owned())
        );
        // Not semver (a leading zero): kpt says so.
        assert_eq!(
            docker_version_supported("19.03.8"),
            Err(
                "docker client version must be v20.10.0 or greater: found invalid version v19.03.8"
                    .to_owned()
            )
        );
        assert!(docker_version_supported("banana").is_err());
    }
}
