//! Deckhand-style document layering and substitution (`krender layer render`).

use std::io::Write;
use std::path::PathBuf;

/// Runs `krender layer render PATH...`: renders the layered document set
/// found in `paths` (files or directories), prints the concrete documents on
/// `stdout` and diagnostics on `stderr`; returns the process exit code.
pub fn render_command(paths: &[PathBuf], stdout: &mut dyn Write, stderr: &mut dyn Write) -> i32 {
    let _ = (paths, stdout);
    let _ = writeln!(stderr, "layering is not implemented yet");
    1
}
