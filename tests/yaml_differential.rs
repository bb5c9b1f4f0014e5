//! The live YAML parser against the frozen reference parser
//! (`yaml::reference`, the parser as it was before issue 29's rewrite):
//! the same documents (kinds, styles, tags, values, anchors, comments,
//! lines, columns, offsets) or the same error text and position, on every
//! fixture and shared file, the golden cases, arbitrary text and generated
//! YAML. The `differential` fuzz target runs the same comparison on
//! arbitrary bytes.

use krender::yaml::{Node, YamlError, parse_document, parse_documents, reference};
use proptest::prelude::*;

use crate::support::check_yaml_inputs;

/// `Ok` when both parsers agree on `src`, whole-stream and first-document.
fn same_as_reference(src: &str) -> Result<(), String> {
    let live = parse_documents(src);
    let frozen = reference::parse_documents(src);
    if !same(&live, &frozen) {
        return Err(format!(
            "parse_documents differs from the reference\n{src:?}\nlive:      {live:?}\nreference: {frozen:?}"
        ));
    }
    let live = parse_document(src);
    let frozen = reference::parse_document(src);
    let agree = match (&live, &frozen) {
        (Ok(a), Ok(b)) => a == b,
        (Err(a), Err(b)) => same_error(a, b),
        _ => false,
    };
    if !agree {
        return Err(format!(
            "parse_document differs from the reference\n{src:?}\nlive:      {live:?}\nreference: {frozen:?}"
        ));
    }
    Ok(())
}

fn same(a: &Result<Vec<Node>, YamlError>, b: &Result<Vec<Node>, YamlError>) -> bool {
    match (a, b) {
        (Ok(a), Ok(b)) => a == b,
        (Err(a), Err(b)) => same_error(a, b),
        _ => false,
    }
}

/// The same text, line and column (the whole error: its display and its
/// fields).
fn same_error(a: &YamlError, b: &YamlError) -> bool {
    a == b && a.to_string() == b.to_string()
}

#[test]
fn live_parser_matches_the_reference_on_every_fixture_and_shared_file() {
    check_yaml_inputs("yaml_differential", same_as_reference);
}

#[test]
fn live_parser_matches_the_reference_on_hand_picked_corners() {
    let cases = [
        "",
        "\u{feff}a: 1\n",
        "a: 1\r\nb: 2\r\n",
        "a: \"esc \\t \\u00e9 \\x41 \\\n  folded\"\n",
        "a: 'it''s'\n",
        "a: |+\n  keep\n\n\nb: >-\n  fold\n  ed\n\n  para\n",
        "a: |2\n    indented\n",
        "? complex\n: value\n",
        "- - - deep\n",
        "{a: [1, {b: c}], ? d : e}\n",
        "a: &x !custom\n  k: v\nb: *x\n<<: *x\n",
        "%YAML 1.1\n%TAG !e! tag:example.com,2000:\n---\n!e!foo bar\n...\n",
        "# head\n\na: 1 # line\n# foot\n\n# tail\n",
        "a:\n  # inner\n  b: 1\n  # after\nc: 2\n",
        "plain: multi\n  line\n  text\n",
        "a: 1\n b: 2\n",
        "a: [1, 2\n",
        "a: \"\\q\"\n",
        "\t- tab\n",
        "key: value: other\n",
        "*unknown\n",
        "a: \u{1}\n",
        "a: 'unterminated\n",
        "---\n---\n...\n",
    ];
    let failures: Vec<String> = cases
        .iter()
        .filter_map(|case| same_as_reference(case).err())
        .collect();
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

/// A scalar in one of YAML's spellings.
fn scalar() -> impl Strategy<Value = String> {
    prop_oneof![
        "[a-z][a-z0-9-]{0,8}",
        "[0-9]{1,4}",
        Just("true".to_owned()),
        Just("~".to_owned()),
        Just("null".to_owned()),
        Just("0x1F".to_owned()),
        Just("1.5e3".to_owned()),
        "[a-z :#'\"]{0,6}".prop_map(|s| format!("'{}'", s.replace('\'', "''"))),
        "\"([a-z :#]|\\\\n|\\\\t){0,6}\"",
        Just("\"a\\\"b\\u00e9\"".to_owned()),
        Just("http://x:80/#a".to_owned()),
    ]
}

/// Generated YAML: nested block and flow collections with comments,
/// anchors, aliases, tags, block scalars and the occasional odd indent.
fn value(depth: u32) -> BoxedStrategy<String> {
    let leaf = prop_oneof![
        4 => scalar(),
        1 => Just("|\n  literal\n  text\n".to_owned()),
        1 => Just(">-\n  folded\n  text\n".to_owned()),
        1 => Just("[a, 'b', {c: d}]".to_owned()),
        1 => Just("{}".to_owned()),
        1 => Just("*anchor".to_owned()),
        1 => Just("!!str 12".to_owned()),
        1 => Just("&anchor v".to_owned()),
    ];
    if depth == 0 {
        return leaf.boxed();
    }
    let entry = (scalar(), value(depth - 1), 0..4u8);
    let mapping = proptest::collection::vec(entry, 1..4).prop_map(|entries| {
        entries
            .into_iter()
            .map(|(key, value, extra)| {
                let comment = match extra {
                    0 => "# head\n",
                    1 => "\n",
                    _ => "",
                };
                let line = if extra == 2 { " # line" } else { "" };
                let value = indent(&value);
                if value.starts_with('\n') {
                    format!("{comment}{key}:{line}{value}\n")
                } else {
                    format!("{comment}{key}: {value}{line}\n")
                }
            })
            .collect::<String>()
    });
    let sequence =
        proptest::collection::vec((value(depth - 1), any::<bool>()), 1..4).prop_map(|items| {
            items
                .into_iter()
                .map(|(item, comment)| {
                    let comment = if comment { "# item\n" } else { "" };
                    format!("{comment}- {}\n", indent(&item).trim_start())
                })
                .collect::<String>()
        });
    prop_oneof![2 => leaf, 2 => mapping, 1 => sequence].boxed()
}

/// `text` as the value of a key or item: multi-line texts go on their own
/// lines, two spaces in.
fn indent(text: &str) -> String {
    let text = text.trim_end_matches('\n');
    if !text.contains('\n') || text.starts_with('|') || text.starts_with('>') {
        return text.replace('\n', "\n  ");
    }
    text.lines().fold(String::new(), |mut out, line| {
        out.push_str("\n  ");
        out.push_str(line);
        out
    })
}

/// A stream of generated documents, a third of them damaged by one edit (a byte
/// dropped, or an indicator put in), so both parsers' errors are compared
/// too.
fn stream() -> impl Strategy<Value = String> {
    let documents = proptest::collection::vec(value(3), 1..4).prop_map(|documents| {
        documents
            .iter()
            .map(|document| format!("{}\n", document.trim_end_matches('\n')))
            .collect::<Vec<_>>()
            .join("---\n")
    });
    (documents, any::<u16>(), 0..12usize).prop_map(|(text, at, edit)| {
        let at = usize::from(at) % (text.len() + 1);
        let at = (0..=at)
            .rev()
            .find(|i| text.is_char_boundary(*i))
            .unwrap_or(0);
        let mut text = text;
        match edit {
            0 if at < text.len() => {
                text.remove(at);
            }
            1 => text.insert(at, ':'),
            2 => text.insert(at, '\t'),
            3 => text.insert_str(at, "\n  "),
            _ => {}
        }
        text
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn live_parser_matches_the_reference_on_generated_yaml(src in stream()) {
        if let Err(failure) = same_as_reference(&src) {
            prop_assert!(false, "{}", failure);
        }
    }

    #[test]
    fn live_parser_matches_the_reference_on_arbitrary_text(
        src in "[ -~\t\n\r\u{85}\u{a0}\u{feff}é]{0,120}"
    ) {
        if let Err(failure) = same_as_reference(&src) {
            prop_assert!(false, "{}", failure);
        }
    }
}
