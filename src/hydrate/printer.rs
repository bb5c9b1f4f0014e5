//! The progress lines kpt prints on stderr while rendering: `Package "x":`,
//! `[RUNNING]`, `[PASS]`/`[FAIL]`, `[Results]:`, `Stderr:`, `Exit code:`,
//! with kpt's 4-line truncation for failing functions.

use std::io::Write;
use std::time::Duration;

/// How many lines of a failing function's output kpt shows by default.
const TRUNCATE_LINES: usize = 4;

/// Writes kpt's progress lines to a caller-supplied stream. Write errors are
/// ignored: losing progress output must not fail a render.
pub struct Printer<'a> {
    out: &'a mut dyn Write,
    /// Cut failing functions' output to 4 lines.
    pub truncate: bool,
}

impl<'a> Printer<'a> {
    /// A printer writing to `out`.
    pub fn new(out: &'a mut dyn Write, truncate: bool) -> Printer<'a> {
        Printer { out, truncate }
    }

    /// Writes raw text.
    pub fn text(&mut self, text: &str) {
        let _ = self.out.write_all(text.as_bytes());
        let _ = self.out.flush();
    }

    /// Writes bytes captured from another printer.
    pub fn raw(&mut self, bytes: &[u8]) {
        let _ = self.out.write_all(bytes);
        let _ = self.out.flush();
    }

    /// `Package "x":`
    pub fn package(&mut self, display: &str) {
        self.text(&format!("Package {display:?}:\n"));
    }

    /// `[RUNNING] "fn"`, with the resource count when the step selects and
    /// the package when rendering.
    pub fn running(&mut self, name: &str, selected: Option<usize>, package: Option<&str>) {
        let mut line = format!("[RUNNING] {}", go_quote(name));
        if let Some(count) = selected {
            line.push_str(&format!(" on {count} resource(s)"));
        }
        if let Some(package) = package {
            line.push_str(&format!(" on package {}", go_quote(package)));
        }
        line.push('\n');
        self.text(&line);
    }

    /// `[PASS] "fn" in 0s`, then results and stderr printed whole.
    pub fn pass(&mut self, name: &str, elapsed: Duration, results: &[String], stderr: &str) {
        self.text(&format!(
            "[PASS] {} in {}\n",
            go_quote(name),
            go_duration(elapsed)
        ));
        self.block("  [Results]:", results, false);
        if !stderr.is_empty() {
            let lines: Vec<String> = stderr.split('\n').map(str::to_owned).collect();
            self.block("  Stderr:", &lines, false);
        }
    }

    /// `[FAIL] "fn" in 0s` and the results.
    pub fn fail(&mut self, name: &str, elapsed: Duration, results: &[String]) {
        self.text(&format!(
            "[FAIL] {} in {}\n",
            go_quote(name),
            go_duration(elapsed)
        ));
        let truncate = self.truncate;
        self.block("  [Results]:", results, truncate);
    }

    /// The stderr and exit code of a function that exited non-zero.
    pub fn exec_error(&mut self, stderr: &str, exit_code: i32) {
        if !stderr.is_empty() {
            let lines: Vec<String> = stderr.split('\n').map(str::to_owned).collect();
            let truncate = self.truncate;
            self.block("  Stderr:", &lines, truncate);
        }
        self.text(&format!("  Exit code: {exit_code}\n\n"));
    }

    fn block(&mut self, title: &str, lines: &[String], truncate: bool) {
        if lines.is_empty() {
            return;
        }
        let mut text = format!("{title}\n");
        let shown = if truncate && lines.len() > TRUNCATE_LINES {
            TRUNCATE_LINES
        } else {
            lines.len()
        };
        for line in lines.iter().take(shown) {
            text.push_str("    ");
            text.push_str(line.replace('\n', " ").trim());
            text.push('\n');
        }
        if shown < lines.len() {
            text.push_str(&format!(
                "    ...({} line(s) truncated, use '--truncate-output=false' to disable)\n",
                lines.len() - shown
            ));
        }
        self.text(&text);
    }
}

/// Go's `%q` for the strings kpt quotes (function names, package paths).
pub fn go_quote(text: &str) -> String {
    let mut out = String::from("\"");
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if (c as u32) < 0x20 || c as u32 == 0x7f => {
                out.push_str(&format!("\\x{:02x}", c as u32))
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// Go's `time.Duration` text after truncation to 100ms (`0s`, `1.2s`, `300ms`).
pub fn go_duration(elapsed: Duration) -> String {
    let tenths = elapsed.as_millis() / 100;
    if tenths == 0 {
        return "0s".to_owned();
    }
    if tenths < 10 {
        return format!("{}ms", tenths * 100);
    }
    let seconds = tenths / 10;
    let fraction = tenths % 10;
    let (minutes, seconds) = (seconds / 60, seconds % 60);
    let mut text = String::new();
    if minutes > 0 {
        let (hours, minutes) = (minutes / 60, minutes % 60);
        if hours > 0 {
            text.push_str(&format!("{hours}h"));
        }
        text.push_str(&format!("{minutes}m"));
    }
    if fraction == 0 {
        text.push_str(&format!("{seconds}s"));
    } else {
        text.push_str(&format!("{seconds}.{fraction}s"));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_match_go() {
        assert_eq!(go_duration(Duration::from_millis(40)), "0s");
        assert_eq!(go_duration(Duration::from_millis(340)), "300ms");
        assert_eq!(go_duration(Duration::from_millis(1250)), "1.2s");
        assert_eq!(go_duration(Duration::from_secs(61)), "1m1s");
    }

    #[test]
    fn failing_output_is_truncated() {
        let mut out = Vec::new();
        let mut printer = Printer::new(&mut out, true);
        printer.exec_error("a\nb\nc\nd\ne\n", 3);
        assert_eq!(
            String::from_utf8_lossy(&out),
            "  Stderr:\n    a\n    b\n    c\n    d\n    ...(2 line(s) truncated, use '--truncate-output=false' to disable)\n  Exit code: 3\n\n"
        );
    }

    #[test]
    fn passing_stderr_is_whole() {
        let mut out = Vec::new();
        let mut printer = Printer::new(&mut out, true);
        printer.pass("f", Duration::ZERO, &[], "1\n2\n3\n4\n5\n");
        assert_eq!(
            String::from_utf8_lossy(&out),
            "[PASS] \"f\" in 0s\n  Stderr:\n    1\n    2\n    3\n    4\n    5\n    \n"
        );
    }
}
