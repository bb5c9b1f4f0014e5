//! `fn render --trace DIR`: an evaluator that keeps what one step saw and
//! gave back, byte for byte, in a directory of its own.

use std::path::{Path, PathBuf};

use super::{EvalError, Evaluator, Executor, FunctionRequest, FunctionResponse, FunctionTarget};

/// Runs a step through `inner`, writing its wire input (`input.yaml`), its
/// output (`output.yaml`), its stderr (`stderr.txt`) and a non-zero exit
/// code (`exit-code.txt`) into `dir`; an evaluator error goes to
/// `error.txt`. Builtins go through the wire too, so the files are the
/// ResourceLists the real function would have read and written.
pub struct TracingEvaluator<'a> {
    /// The evaluator that runs the step.
    pub inner: &'a dyn Evaluator,
    /// The step's directory (created on the first call).
    pub dir: PathBuf,
}

impl TracingEvaluator<'_> {
    fn write(&self, name: &str, bytes: &[u8]) -> Result<(), EvalError> {
        write_trace_file(&self.dir.join(name), bytes)
    }
}

/// Writes one trace file, creating its directory; the error names the file.
pub fn write_trace_file(path: &Path, bytes: &[u8]) -> Result<(), EvalError> {
    let written = match path.parent() {
        Some(dir) => std::fs::create_dir_all(dir).and_then(|()| std::fs::write(path, bytes)),
        None => std::fs::write(path, bytes),
    };
    written.map_err(|error| {
        EvalError::System(format!(
            "cannot write trace file {}: {error}",
            path.display()
        ))
    })
}

impl Evaluator for TracingEvaluator<'_> {
    fn evaluate(&self, request: &FunctionRequest<'_>) -> Result<FunctionResponse, EvalError> {
        self.write("input.yaml", request.input)?;
        let response = self.inner.evaluate(request);
        match &response {
            Ok(response) => {
                self.write("output.yaml", &response.stdout)?;
                if !response.stderr.is_empty() {
                    self.write("stderr.txt", &response.stderr)?;
                }
                if response.exit_code != 0 {
                    self.write(
                        "exit-code.txt",
                        format!("{}\n", response.exit_code).as_bytes(),
                    )?;
                }
            }
            Err(error) => self.write("error.txt", format!("{error}\n").as_bytes())?,
        }
        response
    }

    // No `native`: a traced builtin runs on the wire, so its input and
    // output exist as bytes.

    fn executor(&self, target: FunctionTarget<'_>) -> Option<Executor> {
        self.inner.executor(target)
    }
}
