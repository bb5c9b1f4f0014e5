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
    shell_words::split(command).map_err(|error| {
        EvalError::ExecutionFailed(format!("exec command {command:?} must be valid: {error}"))
    })
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

    let stdin = child.stdin.take();
    let input = input.to_vec();
    let writer = thread::spawn(move || {
        if let Some(mut stdin) = stdin {
            // A function may exit without reading its input; a broken pipe
            // here is not our error, the exit code tells the story.
            let _ = stdin.write_all(&input);
        }
    });
    let stderr_pipe = child.stderr.take();
    let stderr_reader = thread::spawn(move || {
        let mut buffer = Vec::new();
        if let Some(mut pipe) = stderr_pipe {
            let _ = pipe.read_to_end(&mut buffer);
        }
        buffer
    });
    let stdout_pipe = child.stdout.take();
    let stdout_reader = thread::spawn(move || {
        let mut buffer = Vec::new();
        if let Some(mut pipe) = stdout_pipe {
            let _ = pipe.read_to_end(&mut buffer);
        }
        buffer
    });

    let deadline = Instant::now() + timeout;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) => {
                if Instant::now() >= deadline {
                    let _ = child.kill();
                    let _ = child.wait();
                    let _ = writer.join();
                    let _ = stdout_reader.join();
                    let _ = stderr_reader.join();
                    return Err(EvalError::TimedOut(timeout));
                }
                thread::sleep(Duration::from_millis(2));
            }
            Err(error) => return Err(EvalError::System(error.to_string())),
        }
    };
    let _ = writer.join();
    let stdout = stdout_reader.join().unwrap_or_default();
    let stderr = stderr_reader.join().unwrap_or_default();
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
}
