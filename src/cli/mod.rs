//! The command line: argument parsing and the commands, printing exactly what
//! kpt prints where kpt fixes the text.

use std::process::ExitCode;

/// Runs krender with the given command-line arguments and returns the exit code.
pub fn run(args: Vec<std::ffi::OsString>) -> ExitCode {
    let _ = args;
    ExitCode::from(1)
}
