//! Diagnostics that point: after kpt's one-line text (which conformance
//! depends on), the file, line and column and a labelled snippet of the
//! source, drawn by miette, when stderr is a terminal or the user asks.

use std::io::Write;

use crate::pkg::reader::SourceLocation;

/// `--diagnostics`: when errors show their source.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Diagnostics {
    /// Snippets when stderr is a terminal.
    #[default]
    Auto,
    /// Always snippets (colour only on a terminal).
    Rich,
    /// kpt's text alone.
    Plain,
}

impl Diagnostics {
    /// Whether snippets are drawn, and in colour: `(rich, colour)`.
    pub(super) fn resolve(self) -> Style {
        let terminal = std::io::IsTerminal::is_terminal(&std::io::stderr());
        match self {
            Diagnostics::Auto if terminal => Style::Colour,
            Diagnostics::Auto | Diagnostics::Plain => Style::Plain,
            Diagnostics::Rich if terminal => Style::Colour,
            Diagnostics::Rich => Style::Snippet,
        }
    }
}

/// How errors are drawn.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Style {
    /// kpt's text alone.
    #[default]
    Plain,
    /// With a snippet, no colour.
    Snippet,
    /// With a snippet, in colour.
    Colour,
}

#[derive(Debug, thiserror::Error, miette::Diagnostic)]
#[error("{place}")]
struct Pointed {
    place: String,
    #[source_code]
    code: miette::NamedSource<String>,
    #[label("{problem}")]
    span: miette::SourceSpan,
    problem: String,
}

/// Draws `location` under the error already printed; nothing when the
/// style is plain or the file can no longer be read.
pub(super) fn point_at(location: &SourceLocation, style: Style, err: &mut dyn Write) {
    if style == Style::Plain {
        return;
    }
    let Ok(text) = std::fs::read_to_string(&location.path) else {
        return;
    };
    let offset = offset_of(&text, location.line, location.column);
    // Named by the place drawn (a place past the end is drawn at the end).
    let drawn_at = SourceLocation::at(&location.path, &text, offset, String::new());
    let name = location.path.display().to_string();
    let diagnostic = Pointed {
        place: format!("{name}:{}:{}", drawn_at.line, drawn_at.column),
        code: miette::NamedSource::new(name, text),
        span: (offset, 0).into(),
        problem: location.problem.clone(),
    };
    let theme = if style == Style::Colour {
        miette::GraphicalTheme::unicode()
    } else {
        miette::GraphicalTheme::unicode_nocolor()
    };
    let mut drawn = String::new();
    if miette::GraphicalReportHandler::new_themed(theme)
        .render_report(&mut drawn, &diagnostic)
        .is_ok()
    {
        let _ = write!(err, "{drawn}");
    }
}

/// The byte offset of 1-based `line` and `column` (in characters) of
/// `text`, clamped to the line and the text.
fn offset_of(text: &str, line: usize, column: usize) -> usize {
    let start: usize = text
        .split_inclusive('\n')
        .take(line.saturating_sub(1))
        .map(str::len)
        .sum();
    let rest = text.get(start..).unwrap_or_default();
    let this_line = rest.split('\n').next().unwrap_or_default();
    let within: usize = this_line
        .chars()
        .take(column.saturating_sub(1))
        .map(char::len_utf8)
        .sum();
    // The end of the text is drawn as its last character.
    (start + within).min(text.len().saturating_sub(1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offsets_clamp_to_the_line_and_the_text() {
        let text = "a: 1\nbé: [1, 2\nc: 3\n";
        assert_eq!(offset_of(text, 1, 1), 0);
        assert_eq!(offset_of(text, 2, 3), 5 + "bé".len());
        assert_eq!(offset_of(text, 2, 99), 5 + "bé: [1, 2".len());
        assert_eq!(offset_of(text, 9, 1), text.len() - 1);
    }
}
