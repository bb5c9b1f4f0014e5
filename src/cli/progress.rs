//! The progress bar of long renders on a terminal, and the stderr writer
//! that prints kpt's lines above it.
//!
//! Nothing here holds the process's stderr lock for longer than one write:
//! the bar's tick thread, the render's workers (which move the bar) and the
//! main thread (which prints kpt's lines) all take it briefly, so none can
//! wait on another for good. Whole lines are printed with the bar suspended,
//! so they never interleave with its drawing. Off a terminal, or with
//! `--quiet`, there is no bar and lines go straight through.

use std::io::{IsTerminal, Write};
use std::sync::Arc;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressStyle};

use crate::engine::pool::Progress;

/// A bar on stderr for a render of several packages, when stderr is a
/// terminal and the command is not quiet.
pub(super) fn bar(quiet: bool) -> Option<ProgressBar> {
    if quiet || !std::io::stderr().is_terminal() {
        return None;
    }
    let bar = ProgressBar::new(0);
    bar.set_style(
        ProgressStyle::with_template("{spinner} rendering {pos}/{len} packages {elapsed}")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    // The tick keeps the spinner and the time moving while a long function
    // runs.
    bar.enable_steady_tick(Duration::from_millis(200));
    Some(bar)
}

/// The engine's progress callback for `bar`: called from the workers as
/// packages finish.
pub(super) fn callback(bar: &ProgressBar) -> Progress {
    let bar = bar.clone();
    Arc::new(move |done: usize, total: usize| {
        bar.set_length(total as u64);
        bar.set_position(done as u64);
    })
}

/// A stderr writer that prints whole lines above the bar (suspending it for
/// each), and writes straight through when there is no bar or it is done.
pub(super) struct AboveBar<'a> {
    inner: &'a mut dyn Write,
    bar: Option<ProgressBar>,
    /// The start of a line not yet ended.
    pending: Vec<u8>,
}

impl<'a> AboveBar<'a> {
    /// Lines to `inner`, above `bar` if there is one.
    pub(super) fn new(inner: &'a mut dyn Write, bar: Option<ProgressBar>) -> AboveBar<'a> {
        AboveBar {
            inner,
            bar,
            pending: Vec::new(),
        }
    }

    fn live_bar(&self) -> Option<&ProgressBar> {
        self.bar.as_ref().filter(|bar| !bar.is_finished())
    }

    fn write_suspended(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        let inner = &mut *self.inner;
        match self.bar.as_ref().filter(|bar| !bar.is_finished()) {
            Some(bar) => bar.suspend(|| inner.write_all(bytes)),
            None => inner.write_all(bytes),
        }
    }
}

impl Write for AboveBar<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if self.live_bar().is_none() && self.pending.is_empty() {
            return self.inner.write(buf);
        }
        self.pending.extend_from_slice(buf);
        if let Some(end) = self.pending.iter().rposition(|&byte| byte == b'\n') {
            let lines: Vec<u8> = self.pending.drain(..=end).collect();
            self.write_suspended(&lines)?;
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        if !self.pending.is_empty() {
            let rest = std::mem::take(&mut self.pending);
            self.write_suspended(&rest)?;
        }
        self.inner.flush()
    }
}

impl Drop for AboveBar<'_> {
    fn drop(&mut self) {
        let _ = self.flush();
    }
}

#[cfg(test)]
mod tests {
    use super::AboveBar;
    use indicatif::{ProgressBar, ProgressDrawTarget};
    use std::io::Write;

    #[test]
    fn lines_go_through_whole_and_in_order() {
        let mut sink = Vec::new();
        let bar = ProgressBar::with_draw_target(Some(3), ProgressDrawTarget::hidden());
        {
            let mut writer = AboveBar::new(&mut sink, Some(bar.clone()));
            write!(writer, "[RUNNING] ").expect("write");
            writeln!(writer, "\"a\"").expect("write");
            write!(writer, "[PASS] \"a\"").expect("write");
            bar.finish_and_clear();
            writeln!(writer, " in 0s").expect("write");
            write!(writer, "tail").expect("write");
        }
        assert_eq!(
            String::from_utf8(sink).expect("utf-8"),
            "[RUNNING] \"a\"\n[PASS] \"a\" in 0s\ntail"
        );
    }
}
