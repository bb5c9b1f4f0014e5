//! The `exec:` runtime: runs a local command with the ResourceList on stdin
//! and collects stdout, stderr and the exit code.
//!
//! stdin is written on its own thread and stderr is drained on another, so
//! a function that writes a lot before reading everything (or a chatty
//! stderr) cannot deadlock against us. Each child leads its own process
//! group, killed whole when the child exits, at the deadline, or when the
//! render is cancelled: no function outlives its step.

use std::io::{Read, Write};
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::sync::{Arc, mpsc};
use std::thread;
use std::time::Duration;

use super::cancel::Cancel;
use super::config::FunctionTable;
use super::{EvalError, Evaluator, Executor, FunctionRequest, FunctionResponse, FunctionTarget};

/// Runs `exec:` functions as child processes.
#[derive(Clone, Debug, Default)]
pub struct ExecEvaluator {
    /// Trips to kill the running functions (the CLI's Ctrl-C).
    pub cancel: Cancel,
    /// `render.toml`, for the deadlines it sets (`[[exec]]` and
    /// `[defaults]` `timeout_seconds`); the request's deadline otherwise.
    pub table: Arc<FunctionTable>,
}

/// Every executable file named `name` in the `PATH` directories, in order
/// (what the shell would run first comes first).
pub fn on_path(name: &str) -> impl Iterator<Item = std::path::PathBuf> + '_ {
    use std::os::unix::fs::PermissionsExt;
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .collect::<Vec<_>>()
        .into_iter()
        .map(move |dir| dir.join(name))
        .filter(|candidate| {
            candidate
                .metadata()
                .is_ok_and(|meta| meta.is_file() && meta.permissions().mode() & 0o111 != 0)
        })
}

/// Splits an `exec:` string like a POSIX shell would (quotes and escapes,
/// no expansion), as kpt's shlex split does.
pub fn split_command(command: &str) -> Result<Vec<String>, EvalError> {
    split_exec(command).map_err(EvalError::ExecutionFailed)
}

/// [`split_command`] with kpt's error text: `exec command "…" must be
/// valid: ` and the reason as Go's shlex words it.
pub fn split_exec(command: &str) -> Result<Vec<String>, String> {
    // A command ending in an unpaired backslash (shell_words keeps it) is
    // shlex's escape at the end of input; any other failure (shell_words
    // has one error for both) is an unclosed quote.
    let trailing = command.len() - command.trim_end_matches('\\').len();
    let reason = match shell_words::split(command) {
        _ if trailing % 2 == 1 => "EOF found after escape character",
        Ok(words) => return Ok(words),
        Err(_) => "EOF found when expecting closing quote",
    };
    Err(format!("exec command {command:?} must be valid: {reason}"))
}

impl Evaluator for ExecEvaluator {
    fn evaluate(&self, request: &FunctionRequest<'_>) -> Result<FunctionResponse, EvalError> {
        let FunctionTarget::Exec(command) = request.target else {
            return Err(EvalError::NotFound(format!(
                "not an exec function: {:?}",
                request.target
            )));
        };
        let words = split_command(command)?;
        let (program, args) = match words.split_first() {
            Some((program, args)) => (program.clone(), args.to_vec()),
            None => (command.to_owned(), Vec::new()),
        };
        let timeout = self
            .table
            .exec_timeout_override(command)
            .unwrap_or(request.timeout);
        run_function(&program, &args, request.input, timeout, &self.cancel)
    }

    fn executor(&self, target: FunctionTarget<'_>) -> Option<Executor> {
        let FunctionTarget::Exec(command) = target else {
            return None;
        };
        let words = split_command(command).ok()?;
        Some(Executor::Executable(words.first()?.clone()))
    }
}

/// [`run_process`] for a function's process: what cannot start fails as
/// kpt's function runners say (`unexpected function error:` and Go's error).
pub fn run_function(
    program: &str,
    args: &[String],
    input: &[u8],
    timeout: Duration,
    cancel: &Cancel,
) -> Result<FunctionResponse, EvalError> {
    run_process(program, args, input, timeout, cancel).map_err(|error| match error {
        EvalError::ExecutionFailed(text) => {
            EvalError::ExecutionFailed(format!("unexpected function error: {text}"))
        }
        other => other,
    })
}

/// Go's `exec.Cmd` error for a program that does not start: a bare name not
/// on `PATH` fails its look-up, a path fails in fork/exec.
fn go_start_error(program: &str, error: &std::io::Error) -> String {
    if !program.contains('/') && error.kind() == std::io::ErrorKind::NotFound {
        return format!(
            "exec: {}: executable file not found in $PATH",
            super::builtin::sdk::go_quote(program)
        );
    }
    format!("fork/exec {program}: {}", go_io_text(error))
}

/// Runs `program args...` with `input` on stdin, reading stdout and stderr
/// concurrently. The child leads a process group of its own: the terminal's
/// Ctrl-C does not reach it (the caller decides), and the whole group is
/// killed when the child exits (nothing it started outlives it), at the
/// `timeout`, and when `cancel` trips.
pub fn run_process(
    program: &str,
    args: &[String],
    input: &[u8],
    timeout: Duration,
    cancel: &Cancel,
) -> Result<FunctionResponse, EvalError> {
    if cancel.is_cancelled() {
        return Err(EvalError::Interrupted);
    }
    let mut child = Command::new(program)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn()
        .map_err(|error| EvalError::ExecutionFailed(go_start_error(program, &error)))?;
    let group = cancel.register(i32::try_from(child.id()).unwrap_or(0));
    tracing::debug!(target: "krender::step", program, pid = child.id(), "started");

    // Scoped threads borrow the input instead of copying it (a DFS root's
    // input is the whole tree).
    let collected = thread::scope(|scope| {
        let stdin = child.stdin.take();
        let writer = scope.spawn(move || {
            if let Some(mut stdin) = stdin {
                // A function may exit without reading its input; a broken
                // pipe here is not our error, the exit code tells the story.
                let _ = stdin.write_all(input);
            }
        });
        let stderr_pipe = child.stderr.take();
        let stderr_reader = scope.spawn(move || read_all(stderr_pipe, 0));
        // Sized for an output about as long as the input (a mutator's usual
        // answer), instead of doubling up to it.
        let stdout_pipe = child.stdout.take();
        let stdout_reader = scope.spawn(move || read_all(stdout_pipe, input.len() + 4096));
        // The child is reaped on its own thread, so the wait for it needs no
        // polling (a render runs hundreds of short functions).
        let (exited, reaped) = mpsc::channel();
        let waiter = scope.spawn(move || {
            let status = child.wait();
            let _ = exited.send(());
            status
        });
        let timed_out = matches!(
            reaped.recv_timeout(timeout),
            Err(mpsc::RecvTimeoutError::Timeout)
        );
        // Whatever the group still holds (a background child keeping the
        // pipes open, or the overdue leader) goes now, so the readers end.
        group.kill();
        let status = waiter.join();
        let _ = writer.join();
        let stdout = stdout_reader.join().unwrap_or_default();
        let stderr = stderr_reader.join().unwrap_or_default();
        match status {
            _ if cancel.is_cancelled() => Err(EvalError::Interrupted),
            _ if timed_out => Err(EvalError::TimedOut(timeout)),
            Ok(Ok(status)) => Ok((status, stdout, stderr)),
            Ok(Err(error)) => Err(EvalError::System(error.to_string())),
            Err(_) => Err(EvalError::System(format!("waiting for {program} failed"))),
        }
    });
    let (status, stdout, stderr) = collected?;
    // Killed by a signal: Go reports -1 as the exit code.
    let exit_code = status.code().unwrap_or(-1);
    Ok(FunctionResponse {
        stdout,
        stderr,
        exit_code,
    })
}

/// Everything `pipe` yields until it closes.
fn read_all(pipe: Option<impl Read>, capacity: usize) -> Vec<u8> {
    let mut buffer = Vec::with_capacity(capacity);
    if let Some(mut pipe) = pipe {
        let _ = pipe.read_to_end(&mut buffer);
    }
    buffer
}

fn go_io_text(error: &std::io::Error) -> String {
    match error.kind() {
        std::io::ErrorKind::NotFound => "no such file or directory".to_owned(),
        std::io::ErrorKind::PermissionDenied => "permission denied".to_owned(),
        _ => error.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A request to run `command` on empty input within `timeout`.
    fn exec_request(command: &str, timeout: Duration) -> FunctionRequest<'_> {
        FunctionRequest {
            target: FunctionTarget::Exec(command),
            input: b"",
            timeout,
        }
    }

    fn run(command: &str, input: &[u8]) -> FunctionResponse {
        let request = FunctionRequest {
            target: FunctionTarget::Exec(command),
            input,
            timeout: Duration::from_secs(20),
        };
        ExecEvaluator::default().evaluate(&request).expect("runs")
    }

    #[test]
    fn splits_quoted_arguments() {
        assert_eq!(
            split_command("sed -e 's/foo/bar/'").expect("valid"),
            vec!["sed", "-e", "s/foo/bar/"]
        );
    }

    #[test]
    fn invalid_commands_fail_with_shlex_texts() {
        // Go's shlex: an unclosed quote, and an escape at the end of input.
        for (command, reason) in [
            ("sed \"x", "EOF found when expecting closing quote"),
            ("sed 'x", "EOF found when expecting closing quote"),
            ("sed \\", "EOF found after escape character"),
            ("sed x\\\\\\", "EOF found after escape character"),
        ] {
            assert_eq!(
                split_exec(command),
                Err(format!("exec command {command:?} must be valid: {reason}"))
            );
        }
        // Paired backslashes are one escaped backslash.
        assert_eq!(split_exec("echo a\\\\").expect("valid"), ["echo", "a\\"]);
    }

    #[test]
    fn pipes_stdin_to_stdout() {
        let response = run("sed -e 's/foo/bar/'", b"foo\n");
        assert_eq!(response.stdout, b"bar\n");
        assert_eq!(response.exit_code, 0);
    }

    #[test]
    fn large_stderr_does_not_deadlock() {
        let response = run(
            "sh -c 'head -c 200000 /dev/zero >&2; cat'",
            &vec![b'x'; 300_000],
        );
        assert_eq!(response.stderr.len(), 200_000);
        assert_eq!(response.stdout.len(), 300_000);
    }

    #[test]
    fn exit_code_is_a_value() {
        let response = run("sh -c 'echo oops >&2; exit 3'", b"");
        assert_eq!(response.exit_code, 3);
        assert_eq!(response.stderr, b"oops\n");
    }

    #[test]
    fn missing_program_is_an_error() {
        let request = exec_request("/nonexistent/fn", Duration::from_secs(5));
        assert!(matches!(
            ExecEvaluator::default().evaluate(&request),
            Err(EvalError::ExecutionFailed(_))
        ));
    }

    #[test]
    fn deadline_kills_the_child() {
        let request = exec_request("sleep 5", Duration::from_millis(100));
        assert!(matches!(
            ExecEvaluator::default().evaluate(&request),
            Err(EvalError::TimedOut(_))
        ));
    }

    /// The wait watches stdout closing; a child that closes it early and
    /// works on is still waited for, with its exit code and late stderr.
    #[test]
    fn child_closing_stdout_early_is_still_waited_for() {
        let response = run(
            "sh -c 'cat; exec >&-; sleep 0.2; echo late >&2; exit 4'",
            b"in",
        );
        assert_eq!(response.stdout, b"in");
        assert_eq!(response.stderr, b"late\n");
        assert_eq!(response.exit_code, 4);
    }

    /// Same, past the deadline: the child is killed.
    #[test]
    fn deadline_kills_a_child_that_closed_stdout() {
        let request = exec_request(
            "sh -c 'exec >&- 2>&-; exec sleep 5'",
            Duration::from_millis(150),
        );
        assert!(matches!(
            ExecEvaluator::default().evaluate(&request),
            Err(EvalError::TimedOut(_))
        ));
    }

    /// A function whose background child keeps stdout open does not hold
    /// the step past its deadline, and leaves no process behind.
    #[test]
    fn deadline_kills_the_whole_process_group() {
        let started = std::time::Instant::now();
        let request = exec_request(
            "sh -c 'sleep 1000 & sleep 1001'",
            Duration::from_millis(200),
        );
        assert!(matches!(
            ExecEvaluator::default().evaluate(&request),
            Err(EvalError::TimedOut(_))
        ));
        assert!(started.elapsed() < Duration::from_secs(5));
    }

    /// A background child left holding stdout after the function exits is
    /// killed, so the step ends with the function.
    #[test]
    fn leftover_children_end_with_the_function() {
        let started = std::time::Instant::now();
        let response = run("sh -c 'cat; sleep 1000 &'", b"in");
        assert_eq!(response.stdout, b"in");
        assert_eq!(response.exit_code, 0);
        assert!(started.elapsed() < Duration::from_secs(5));
    }

    /// Cancelling kills a running function at once and reports the
    /// interruption, not the function's death.
    #[test]
    fn cancel_interrupts_a_running_function() {
        let evaluator = ExecEvaluator::default();
        let cancel = evaluator.cancel.clone();
        let tripper = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(200));
            cancel.cancel();
        });
        let started = std::time::Instant::now();
        let request = exec_request("sh -c 'sleep 1000 & sleep 1001'", Duration::from_secs(60));
        assert_eq!(evaluator.evaluate(&request), Err(EvalError::Interrupted));
        assert!(started.elapsed() < Duration::from_secs(5));
        tripper.join().expect("tripper");
        // Nothing starts once cancelled.
        assert_eq!(evaluator.evaluate(&request), Err(EvalError::Interrupted));
    }

    /// `render.toml` sets exec deadlines too: an `[[exec]]` entry's, else
    /// `[defaults]`'s, over the render's own.
    #[test]
    fn render_toml_deadlines_apply_to_exec_steps() {
        let table = FunctionTable::parse(
            "[defaults]\ntimeout_seconds = 1\n\n[[exec]]\nprogram = \"sh\"\ntimeout_seconds = 2\n",
            std::path::Path::new("render.toml"),
        )
        .expect("valid table");
        let evaluator = ExecEvaluator {
            table: Arc::new(table),
            ..ExecEvaluator::default()
        };
        for (command, seconds) in [("sleep 30", 1), ("sh -c 'sleep 30'", 2)] {
            let request = FunctionRequest {
                target: FunctionTarget::Exec(command),
                input: b"",
                timeout: Duration::from_secs(600),
            };
            assert_eq!(
                evaluator.evaluate(&request),
                Err(EvalError::TimedOut(Duration::from_secs(seconds))),
                "{command}"
            );
        }
    }
}
