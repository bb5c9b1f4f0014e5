//! `krender layer render` and the texts of layering's outcomes: the
//! rendered stream on stdout, Deckhand's warnings and errors on stderr.

use std::io::Write;
use std::path::PathBuf;

use crate::layering::{LayeringError, SubstitutionOptions, render_paths_with};

/// Runs `krender layer render PATH...`: renders the layered document set
/// found in `paths` (files or directories), prints the concrete documents on
/// `stdout` and diagnostics on `stderr`; returns the process exit code.
pub fn render_command(
    paths: &[PathBuf],
    options: SubstitutionOptions,
    stdout: &mut dyn Write,
    stderr: &mut dyn Write,
) -> i32 {
    match render_paths_with(paths, options) {
        Ok((text, warnings)) => {
            for warning in warnings {
                print_warning(stderr, &warning);
            }
            write_output(&text, stdout, stderr)
        }
        Err(error) => {
            let _ = writeln!(stderr, "{}", format_error(&error));
            1
        }
    }
}

/// Prints the rendered stream; the exit code.
fn write_output(text: &str, stdout: &mut dyn Write, stderr: &mut dyn Write) -> i32 {
    match stdout
        .write_all(text.as_bytes())
        .and_then(|()| stdout.flush())
    {
        Ok(()) => 0,
        // A closed pipe (`| head`) is not an error worth reporting.
        Err(error) if error.kind() == std::io::ErrorKind::BrokenPipe => 0,
        Err(error) => {
            let _ = writeln!(stderr, "error: writing output: {error}");
            1
        }
    }
}

/// The text `krender layer render` prints for an error: `error[Class]: ...`
/// (the Deckhand class name first, so scripts can match it), then the help.
pub fn format_error(error: &LayeringError) -> String {
    use miette::Diagnostic;
    let mut text = format!("error[{}]: {error}", error.class());
    if let Some(help) = error.help() {
        text.push_str(&format!("\n  help: {help}"));
    }
    text
}

/// Prints one of Deckhand's warnings (what Pegleg's settings let through).
pub(crate) fn print_warning(stderr: &mut dyn Write, warning: &str) {
    let _ = writeln!(stderr, "krender: warning: {warning}");
}
