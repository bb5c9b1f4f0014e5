//! The `exec:` runtime: runs a local command with the ResourceList on stdin
//! and collects stdout, stderr and the exit code.
//!
//! stdin is written on its own thread and stderr is drained on another, so
//! a function that writes a lot before reading everything (or a chatty
//! stderr) cannot deadlock against us. A deadline kills the child.

use std::io::{Read, Write};
use std::process::{Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use super::{EvalError, Evaluator, FunctionRequest, FunctionResponse, FunctionTarget};

/// Runs `exec:` functions as child processes.
#[derive(Clone, Debug, Default)]
pub struct ExecEvaluator;

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
        run_process(&program, &args, request.input, request.timeout)
    }
}

/// Runs `program args...` with `input` on stdin, reading stdout and stderr
/// concurrently; kills the child after `timeout`.
pub fn run_process(
    program: &str,
    args: &[String],
    input: &[u8],
    timeout: Duration,
) -> Result<FunctionResponse, EvalError> {
    let mut child = Command::new(program)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|error| {
            EvalError::ExecutionFailed(format!("fork/exec {program}: {}", go_io_text(&error)))
        })?;

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
        let stderr_reader = scope.spawn(move || {
            let mut buffer = Vec::new();
            if let Some(mut pipe) = stderr_pipe {
                let _ = pipe.read_to_end(&mut buffer);
            }
            buffer
        });
        let stdout_pipe = child.stdout.take();
        let (stdout_closed, closed) = std::sync::mpsc::channel();
        let stdout_reader = scope.spawn(move || {
            // Sized for an output about as long as the input (a mutator's
            // usual answer), instead of doubling up to it.
            let mut buffer = Vec::with_capacity(input.len() + 4096);
            if let Some(mut pipe) = stdout_pipe {
                let _ = pipe.read_to_end(&mut buffer);
            }
            let _ = stdout_closed.send(());
            buffer
        });

        let deadline = Instant::now() + timeout;
        // A function closes its stdout when it exits: wait for that without
        // polling (a render runs hundreds of short functions, and a fixed
        // poll interval added its latency to each), then reap it, polling
        // with a growing interval only for a child that closed stdout and
        // lives on.
        let _ = closed.recv_timeout(timeout);
        let mut pause = Duration::from_micros(20);
        let status = loop {
            match child.try_wait() {
                Ok(Some(status)) => break Ok(status),
                Ok(None) => {
                    if Instant::now() >= deadline {
                        // Killing closes the pipes, so the threads finish.
                        let _ = child.kill();
                        let _ = child.wait();
                        break Err(EvalError::TimedOut(timeout));
                    }
                    thread::sleep(pause.min(deadline.saturating_duration_since(Instant::now())));
                    pause = (pause * 2).min(Duration::from_millis(5));
                }
                Err(error) => {
                    let _ = child.kill();
                    let _ = child.wait();
                    break Err(EvalError::System(error.to_string()));
                }
            }
        };
        let _ = writer.join();
        let stdout = stdout_reader.join().unwrap_or_default();
        let stderr = stderr_reader.join().unwrap_or_default();
        status.map(|status| (status, stdout, stderr))
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

    fn run(command: &str, input: &[u8]) -> FunctionResponse {
        let request = FunctionRequest {
            target: FunctionTarget::Exec(command),
            input,
            timeout: Duration::from_secs(20),
        };
        ExecEvaluator.evaluate(&request).expect("runs")
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
        let request = FunctionRequest {
            target: FunctionTarget::Exec("/nonexistent/fn"),
            input: b"",
            timeout: Duration::from_secs(5),
        };
        assert!(matches!(
            ExecEvaluator.evaluate(&request),
            Err(EvalError::ExecutionFailed(_))
        ));
    }

    #[test]
    fn deadline_kills_the_child() {
        let request = FunctionRequest {
            target: FunctionTarget::Exec("sleep 5"),
            input: b"",
            timeout: Duration::from_millis(100),
        };
        assert!(matches!(
            ExecEvaluator.evaluate(&request),
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
        let request = FunctionRequest {
            target: FunctionTarget::Exec("sh -c 'exec >&- 2>&-; exec sleep 5'"),
            input: b"",
            timeout: Duration::from_millis(150),
        };
        assert!(matches!(
            ExecEvaluator.evaluate(&request),
            Err(EvalError::TimedOut(_))
        ));
    }
}
