//! Parsing a long multi-document stream in parallel: the text is cut at
//! document start lines (`---` at column 0), the pieces are parsed on rayon,
//! and the nodes' positions are moved back to the whole stream's lines and
//! byte offsets. The result is exactly the sequential parse's.
//!
//! Why a cut there is safe: the scanner treats `---` followed by a blank at
//! column 0 as a document start in every context (block scalars never
//! take column-0 lines, plain scalars stop there, quoted scalars and flow
//! collections fail there), and each document starts from the same scanner
//! state as a stream does. What a piece cannot see is kept whole:
//! - a line starting with `%` (directives belong to the next document, and
//!   a `%` line may be scalar text) or a `\r` (line counting): no cuts;
//! - comments and blank lines next to a marker: go-yaml places them by
//!   what is on the marker's other side (a comment right after `---` can
//!   become the previous document's foot), so only a bare `---` line
//!   between two lines of content is cut at;
//! - an alias to an anchor of an earlier document, or any error: a piece
//!   fails, and the whole text is parsed sequentially, which gives the
//!   sequential result or error exactly.

use rayon::prelude::*;

use super::composer::{parse_documents_sequential, parse_piece};
use super::error::YamlError;
use super::node::Node;
use super::node::Origin;

/// Inputs shorter than this parse on one thread: the cut search and the
/// hand-off cost more than they save.
pub(crate) const PARALLEL_MIN_BYTES: usize = 256 * 1024;

/// Pieces per worker thread, so that uneven documents still balance.
const PIECES_PER_THREAD: usize = 4;

/// Parses every document of `src` (Document nodes, in order), as repeated
/// `Decode` calls on one go-yaml decoder return them; null documents are
/// included. A long stream is parsed in pieces on rayon when it has more
/// than one thread, with the same result.
pub fn parse_documents(src: &str) -> Result<Vec<Node>, YamlError> {
    let threads = rayon::current_num_threads();
    if src.len() < PARALLEL_MIN_BYTES || threads < 2 {
        return parse_documents_sequential(src);
    }
    parse_documents_in_pieces(src, threads * PIECES_PER_THREAD)
}

/// Parses `src` cut into at most `pieces` pieces at safe document starts
/// (see the module documentation); the result equals the sequential
/// parse's, nodes, comments and positions included.
pub fn parse_documents_in_pieces(src: &str, pieces: usize) -> Result<Vec<Node>, YamlError> {
    let cuts = cut_points(src, pieces);
    if cuts.is_empty() {
        return parse_documents_sequential(src);
    }
    let mut bounds = Vec::with_capacity(cuts.len() + 2);
    bounds.push(0);
    bounds.extend(&cuts);
    bounds.push(src.len());
    // Each piece's nodes are placed at their stream positions as they are
    // built: the lines before a piece are counted first (a memchr pass).
    let lines: Vec<u32> = bounds
        .par_windows(2)
        .map(|window| line_count(&src[window[0]..window[1]]))
        .collect();
    let origins: Vec<Origin> = bounds
        .iter()
        .zip(lines.iter().scan(0u32, |before, &lines| {
            let origin = *before;
            *before = before.saturating_add(lines);
            Some(origin)
        }))
        .map(|(&start, lines)| Origin {
            lines,
            offset: u32::try_from(start).unwrap_or(u32::MAX),
        })
        .collect();
    let parsed: Vec<Result<Vec<Node>, YamlError>> = bounds
        .par_windows(2)
        .zip(origins)
        .map(|(window, origin)| parse_piece(&src[window[0]..window[1]], origin))
        .collect();
    let mut documents = Vec::with_capacity(parsed.iter().flatten().map(Vec::len).sum());
    for piece in parsed {
        match piece {
            Ok(piece) => documents.extend(piece),
            // A piece may fail only for being cut off (an alias to an
            // earlier document): the sequential parse decides.
            Err(_) => return parse_documents_sequential(src),
        }
    }
    Ok(documents)
}

/// Byte offsets where a piece may start, spread evenly over `src`; empty
/// when the text must not be cut.
fn cut_points(src: &str, pieces: usize) -> Vec<usize> {
    if pieces < 2 || src.contains('\r') || src.starts_with('%') || src.contains("\n%") {
        return Vec::new();
    }
    let bytes = src.as_bytes();
    let mut cuts = Vec::with_capacity(pieces);
    let mut from = 0;
    for piece in 1..pieces {
        let target = (src.len() / pieces * piece).max(from);
        let Some(cut) = next_cut(bytes, target) else {
            break;
        };
        if cuts.last() != Some(&cut) {
            cuts.push(cut);
        }
        from = cut + 1;
    }
    cuts
}

/// The first safe cut at or after `from`: the start of a line that is
/// exactly `---` between two lines of content (comments and blank lines
/// next to a marker are placed by what is on its other side).
fn next_cut(bytes: &[u8], from: usize) -> Option<usize> {
    let finder = memchr::memmem::Finder::new(b"\n---\n");
    let mut at = from.max(1) - 1;
    while let Some(found) = finder.find(bytes.get(at..)?) {
        // `newline` ends the line before the marker; the marker line ends
        // at `newline + 4`.
        let newline = at + found;
        if is_content(line_ending_at(bytes, newline)) && is_content(line_after(bytes, newline + 4))
        {
            return Some(newline + 1);
        }
        at = newline + 1;
    }
    None
}

/// The line that the line break at `newline` ends.
fn line_ending_at(bytes: &[u8], newline: usize) -> &[u8] {
    let start = bytes[..newline]
        .iter()
        .rposition(|&b| b == b'\n')
        .map_or(0, |i| i + 1);
    &bytes[start..newline]
}

/// The line that starts after the line break at `newline`.
fn line_after(bytes: &[u8], newline: usize) -> &[u8] {
    let start = (newline + 1).min(bytes.len());
    let end = bytes[start..]
        .iter()
        .position(|&b| b == b'\n')
        .map_or(bytes.len(), |i| start + i);
    &bytes[start..end]
}

/// A line of content: neither blank, nor a comment, nor a marker.
fn is_content(line: &[u8]) -> bool {
    match line.iter().find(|&&b| b != b' ' && b != b'\t') {
        None | Some(b'#') => false,
        Some(_) => !line.starts_with(b"---") && !line.starts_with(b"..."),
    }
}

/// Line breaks in `text` (no `\r` reaches here).
fn line_count(text: &str) -> u32 {
    u32::try_from(memchr::memchr_iter(b'\n', text.as_bytes()).count()).unwrap_or(u32::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cuts_are_bare_markers_between_lines_of_content() {
        let src = "a: 1\n---\nb: 2\n# c\n---\nd: 3\n\n---\ne: 4\n--- |\n  x\n---\n# h\nf\n---x\ny: 1\n---\nz: 2\n";
        let cuts = cut_points(src, 64);
        let starts: Vec<&str> = cuts.iter().map(|&c| &src[c..c + 5]).collect();
        assert_eq!(starts, ["---\nb", "---\nz"]);
    }

    #[test]
    fn pieces_are_moved_to_the_stream_positions() {
        let src = "a: 1\n---\nb: 2\n---\nc:\n  - 3\n";
        assert_eq!(cut_points(src, 1000), [5, 14]);
        let sequential = parse_documents_in_pieces(src, 1).expect("parses");
        let split = parse_documents_in_pieces(src, 1000).expect("parses");
        assert_eq!(split, sequential);
        let item = &split[2].content[0].content[1].content[0];
        assert_eq!(
            (item.value.as_str(), item.line, item.column, item.offset),
            ("3", 6, 5, 25)
        );
    }

    #[test]
    fn directives_and_carriage_returns_are_never_cut() {
        assert!(cut_points("a: 1\n---\nb: 2\n%YAML 1.1\n---\nc\n", 8).is_empty());
        assert!(cut_points("a: 1\r\n---\r\nb: 2\r\n", 8).is_empty());
    }
}
