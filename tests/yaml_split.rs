//! Parsing a stream in pieces (`yaml::split`) gives exactly the sequential
//! parse: the same nodes, comments and positions, or the same error, on
//! every fixture and shared YAML file (alone, and a package's files joined
//! into one stream), the golden cases, adversarial separators and random
//! streams. `parse_documents_in_pieces(src, 1)` is the sequential parse.

use krender::yaml::{Node, YamlError, parse_documents_in_pieces};
use proptest::prelude::*;

use crate::support::check_yaml_inputs;

/// The piece counts tried: a few cuts, and a cut at every safe place.
const PIECES: [usize; 3] = [2, 5, 1000];

fn same_as_sequential(src: &str) -> Result<(), String> {
    let sequential = parse_documents_in_pieces(src, 1);
    for pieces in PIECES {
        let split = parse_documents_in_pieces(src, pieces);
        if !same(&sequential, &split) {
            return Err(format!(
                "{pieces} pieces differ from the sequential parse\n{src}\n{sequential:?}\n{split:?}"
            ));
        }
    }
    Ok(())
}

fn same(a: &Result<Vec<Node>, YamlError>, b: &Result<Vec<Node>, YamlError>) -> bool {
    match (a, b) {
        (Ok(a), Ok(b)) => a == b,
        (Err(a), Err(b)) => a == b,
        _ => false,
    }
}

#[test]
fn pieces_parse_as_the_sequential_parse_on_every_fixture_and_shared_file() {
    check_yaml_inputs("yaml_split", same_as_sequential);
}

#[test]
fn pieces_parse_as_the_sequential_parse_around_adversarial_separators() {
    let cases = [
        // Markers inside block scalars: indented (content), at column 0 (ends it).
        "a: |\n  ---\n  x\n---\nb: 1\n",
        "a: |\n  x\n---\nb: |\n  ---\n---\nc: >\n  y\n",
        "--- |\n  root\n---\n--- >-\n  folded\n...\n---\nz: 1\n",
        // Quoted scalars crossing a marker: an error either way.
        "a: 'x\n---\ny'\n---\nb: 1\n",
        "a: \"x\n---\ny\"\n---\nb: 1\n",
        "a: x\n---\nb: \"quoted --- not a marker\"\n---\nc: '---'\n",
        // Plain multi-line scalars and flow collections around markers.
        "a: one\n  two\n---\nb: [1,\n  2]\n---\nc: {x: 1}\n",
        "a: [1,\n---\n2]\n---\nb: 1\n",
        // Comments and blank lines around separators.
        "a: 1 # line\n---\n# head\nb: 2\n# foot\n---\nc: 3\n\n---\n\n# lone\n---\nd: 4\n",
        "# first\n---\na: 1\n---\n# only a comment\n---\nb: 2\n#end\n",
        "a:\n  b: 1\n  # inner foot\n---\nc: 1\n",
        // Aliases to anchors of earlier documents (go-yaml keeps them).
        "a: &x 1\n---\nb: *x\n---\nc: *x\n",
        "a: &x {k: v}\n---\nb: &x 2\n---\nc: *x\n",
        // Directives, document ends, empty documents, markers with content.
        "%YAML 1.1\n---\na: 1\n...\n%TAG ! tag:x,2000:\n---\n!y b\n",
        "a: 1\n...\n---\nb: 2\n---\n---\n--- x\n---\t# c\n---\n",
        "---\n---\n---\n",
        "a: 1\n---x\n---\nb: 2\n",
        // Errors in one piece and in another.
        "a: 1\n---\nb: [\n---\nc: 2\n---\nd: }\n",
        "a:\tb\n---\nc: 1\n",
        // Deep documents and long ones.
        "a:\n  b:\n    c:\n      - d\n      - e: f\n---\n- 1\n- - 2\n  - 3\n---\nk: v\n",
    ];
    let failures: Vec<String> = cases
        .iter()
        .filter_map(|case| same_as_sequential(case).err())
        .collect();
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

/// Documents built from fragments that steer the scanner into its corners,
/// joined by separators with and without comments and blank lines.
fn stream() -> impl Strategy<Value = String> {
    const FRAGMENTS: &[&str] = &[
        "a: 1\n",
        "b:\n  - x\n  - y\n",
        "c: |\n  text\n  ---\n",
        "d: >\n  folded\n",
        "# comment\n",
        "\n",
        "e: 'q'\n",
        "f: \"dq\"\n",
        "g: &a {k: v}\n",
        "h: *a\n",
        "- item\n",
        "i: [1, 2]\n",
        "j: x # trailing\n",
        "k:\n  l: m\n  # foot\n",
        "n: 'multi\n  line'\n",
        "o: ---\n",
        "  p: bad\n",
        "q: {\n",
        "...\n",
    ];
    const SEPARATORS: &[&str] = &[
        "---\n",
        "--- \n",
        "---\n# head\n",
        "---\t# c\n",
        "--- |\n  s\n",
    ];
    let document = proptest::collection::vec(proptest::sample::select(FRAGMENTS), 0..6)
        .prop_map(|fragments| fragments.concat());
    proptest::collection::vec((proptest::sample::select(SEPARATORS), document), 1..12).prop_map(
        |documents| {
            documents
                .into_iter()
                .map(|(separator, document)| format!("{separator}{document}"))
                .collect()
        },
    )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1500, ..ProptestConfig::default() })]

    #[test]
    fn pieces_parse_as_the_sequential_parse_on_random_streams(src in stream()) {
        if let Err(failure) = same_as_sequential(&src) {
            prop_assert!(false, "{}", failure);
        }
    }
}
