//! Writing long lists in chunks on rayon (`Chunking`) gives exactly the
//! bytes of writing them in order: every fixture and shared YAML file as a
//! stream, each document alone, and all of a directory's documents as the
//! items of one ResourceList; the golden cases; adversarial lists (comments
//! between items, anchors and aliases across items, kept block scalars,
//! open-ended documents); and random trees. `Chunking::Items(n)` cuts every
//! list of two or more, nested ones included.

use krender::yaml::{Chunking, Encoder, Node, SeqIndent, SplicedItem, parse_documents};
use proptest::prelude::*;

use crate::support::check_yaml_inputs;

/// The chunk lengths tried: a cut after every item, and a few.
const CHUNKS: [usize; 3] = [1, 2, 5];

/// A ResourceList whose `items:` is a block sequence (its placeholder is
/// replaced): a flow `[]` slot writes the items in flow style, which is
/// never chunked, so the list form would test nothing.
const LIST: &str =
    "apiVersion: config.kubernetes.io/v1\nkind: ResourceList\nitems:\n- placeholder\n";

/// `documents` as a stream, each document alone, and their roots as a
/// ResourceList's items, written with `chunking` (in both sequence styles).
fn writes(documents: &[Node], chunking: Chunking) -> Vec<String> {
    let list = parse_documents(LIST).expect("the list parses");
    let slot = list[0].root().get("items").expect("items");
    let items: Vec<SplicedItem<'_>> = documents
        .iter()
        .map(|document| SplicedItem {
            node: document.root(),
            edits: &[],
        })
        .collect();
    let mut texts = Vec::new();
    for seq_indent in [SeqIndent::Compact, SeqIndent::Wide] {
        let mut stream = String::new();
        let mut encoder = Encoder::new(&mut stream);
        encoder.set_seq_indent(seq_indent);
        encoder.set_chunking(chunking);
        encoder.encode_all(documents);
        texts.push(stream);
        for document in documents {
            let mut alone = String::new();
            let mut encoder = Encoder::new(&mut alone);
            encoder.set_seq_indent(seq_indent);
            encoder.set_chunking(chunking);
            encoder.encode(document);
            texts.push(alone);
        }
        let mut wrapped = String::new();
        let mut encoder = Encoder::new(&mut wrapped);
        encoder.set_seq_indent(seq_indent);
        encoder.set_chunking(chunking);
        encoder.encode_with_items(&list[0], slot, &items);
        texts.push(wrapped);
    }
    texts
}

fn same_as_sequential(src: &str) -> Result<(), String> {
    let Ok(documents) = parse_documents(src) else {
        return Ok(());
    };
    let sequential = writes(&documents, Chunking::Sequential);
    for chunk in CHUNKS {
        let chunked = writes(&documents, Chunking::Items(chunk));
        for (a, b) in sequential.iter().zip(&chunked) {
            if a != b {
                return Err(format!(
                    "chunks of {chunk} differ from the sequential write\n{src}\n--- sequential\n{a}\n--- chunked\n{b}"
                ));
            }
        }
    }
    Ok(())
}

#[test]
fn chunked_writes_equal_sequential_ones_on_every_fixture_and_shared_file() {
    check_yaml_inputs("yaml_emit_parallel", same_as_sequential);
}

#[test]
fn chunked_writes_equal_sequential_ones_on_adversarial_lists() {
    let cases = [
        // Comments between items: head, line, foot, on keys and items.
        "- a: 1\n  # foot of a\n- b: 2\n# head of c\n- c: 3 # line\n- d\n# foot of list\n",
        "items:\n- a: 1\n  b:\n  - x\n  # foot of x\n- # dash comment\n  c: 2\n- d: 3\n\n  # after blank\n- e: 4\nnext: 1\n",
        "- - a\n  - b\n  # inner foot\n- - c\n# outer head\n- - d\n",
        "k:\n  # head\n  - 1\n  - 2 # two\n  # foot two\n  - 3\n\n  - 4\n",
        // Anchors in early items, aliases in later ones (and the reverse).
        "- &a {k: v}\n- *a\n- &b x\n- [*a, *b]\n- c: *b\n- *a\n",
        "- x: *later\n- &later y\n- *later\n- z: &m {q: 1}\n- <<: *m\n",
        // Block scalars ending items: clipped, stripped, kept, with blank lines.
        "- |\n  one\n- |-\n  two\n- |+\n  keep\n\n- >\n  folded\n  text\n\n- |2\n   lead\n- last\n",
        "- k: |+\n    keep\n\n- k: |\n    clip\n- k: v\n",
        // Items of every kind: scalars, empty and flow collections, nulls.
        "- 1\n- ''\n- []\n- {}\n- [a, b]\n- {a: 1}\n- ~\n- null\n-\n- \"q\"\n- 'single'\n- !!str 3\n- !custom x\n",
        // Nested long sequences.
        "- - - 1\n    - 2\n  - - 3\n    - 4\n- - - 5\n    - 6\n- 7\n",
        // Long keys and multi-line scalars in items.
        "- ? [a, b]\n  : v\n- \"multi\\nline\"\n- 'a\n\n  b'\n- plain\n  folded\n",
        // Documents: open-ended roots, foot comments, markers, directives.
        "a\n---\nb\n---\n- c\n...\n---\n|+\n  keep\n\n---\nd: 1\n# foot\n---\ne: 2\n",
        "# head\n---\n- 1\n- 2\n---\n- 3\n# foot\n\n---\n--- x\n---\n",
        "%YAML 1.1\n---\na: &x 1\n---\nb: *x\n---\nc: *x\n",
    ];
    let failures: Vec<String> = cases
        .iter()
        .filter_map(|case| same_as_sequential(case).err())
        .collect();
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

/// Lists of items built from fragments with comments, anchors, aliases and
/// block scalars, as one document and as a stream of documents.
fn list() -> impl Strategy<Value = String> {
    const ITEMS: &[&str] = &[
        "- a\n",
        "- k: v\n  l: w\n",
        "- k: v # line\n",
        "# head\n- h\n",
        "- f: 1\n  # foot\n",
        "- &x {k: v}\n",
        "- *x\n",
        "- |\n  text\n",
        "- |+\n  keep\n\n",
        "- >-\n  folded\n",
        "- - inner\n  - inner2\n",
        "- []\n",
        "- {}\n",
        "-\n",
        "- 'q'\n",
        "\n",
        "# between\n",
        "- x: [1, 2]\n",
        "- y:\n  - z\n  # inner foot\n",
    ];
    let document = proptest::collection::vec(proptest::sample::select(ITEMS), 1..14)
        .prop_map(|items| items.concat());
    proptest::collection::vec(document, 1..5).prop_map(|documents| documents.join("---\n"))
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 400, ..ProptestConfig::default() })]

    #[test]
    fn chunked_writes_equal_sequential_ones_on_random_lists(src in list()) {
        if let Err(failure) = same_as_sequential(&src) {
            prop_assert!(false, "{}", failure);
        }
    }
}
