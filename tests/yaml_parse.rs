//! Parser tests: node structure, comments, styles, tags and error messages
//! of `krender::yaml::parse_document`, checked against go-yaml v3 behaviour.

use krender::yaml::{Node, NodeKind, parse_document, parse_documents};

/// A compact, stable rendering of a node tree for assertions.
fn dump(node: &Node) -> String {
    let mut out = String::new();
    dump_into(node, 0, &mut out);
    out
}

fn dump_into(node: &Node, depth: usize, out: &mut String) {
    use std::fmt::Write;
    let kind = match node.kind {
        NodeKind::Document => "Doc",
        NodeKind::Sequence => "Seq",
        NodeKind::Mapping => "Map",
        NodeKind::Scalar => "Scalar",
        NodeKind::Alias => "Alias",
    };
    let _ = write!(out, "{}{kind}", "  ".repeat(depth));
    if !node.tag.is_empty() {
        let _ = write!(out, " {}", node.tag);
    }
    if !node.style.is_empty() {
        let _ = write!(out, " {:?}", node.style);
    }
    if node.kind == NodeKind::Scalar || node.kind == NodeKind::Alias {
        let _ = write!(out, " {:?}", node.value);
    }
    if !node.anchor.is_empty() {
        let _ = write!(out, " &{}", node.anchor);
    }
    let _ = write!(out, " @{}:{}", node.line, node.column);
    if !node.head_comment.is_empty() {
        let _ = write!(out, " head={:?}", node.head_comment);
    }
    if !node.line_comment.is_empty() {
        let _ = write!(out, " line={:?}", node.line_comment);
    }
    if !node.foot_comment.is_empty() {
        let _ = write!(out, " foot={:?}", node.foot_comment);
    }
    out.push('\n');
    for child in &node.content {
        dump_into(child, depth + 1, out);
    }
}

fn parse(src: &str) -> String {
    match parse_document(src) {
        Ok(Some(doc)) => dump(&doc),
        Ok(None) => "None\n".to_owned(),
        Err(e) => format!("Error: {}\n", e.message),
    }
}

#[test]
fn scratch_dump() {
    if let Ok(path) = std::env::var("YAML_DUMP") {
        let src = std::fs::read_to_string(path).unwrap();
        for doc in parse_documents(&src).unwrap_or_default() {
            eprintln!("{}", dump(&doc));
        }
        eprintln!("{}", parse(&src));
    }
}

#[test]
fn block_mapping_with_scalar_styles_and_tags() {
    let src = "a: plain\nb: 'single'\nc: \"double\"\nd: 12\ne: true\nf: ~\ng:\nh: !!str 123\ni: !custom x\n'<<': q\n<<: {}\n";
    assert_eq!(
        parse(src),
        r#"Doc @1:1
  Map !!map @1:1
    Scalar !!str "a" @1:1
    Scalar !!str "plain" @1:4
    Scalar !!str "b" @2:1
    Scalar !!str SINGLE_QUOTED "single" @2:4
    Scalar !!str "c" @3:1
    Scalar !!str DOUBLE_QUOTED "double" @3:4
    Scalar !!str "d" @4:1
    Scalar !!int "12" @4:4
    Scalar !!str "e" @5:1
    Scalar !!bool "true" @5:4
    Scalar !!str "f" @6:1
    Scalar !!null "~" @6:4
    Scalar !!str "g" @7:1
    Scalar !!null "" @7:3
    Scalar !!str "h" @8:1
    Scalar !!str TAGGED "123" @8:4
    Scalar !!str "i" @9:1
    Scalar !custom TAGGED "x" @9:4
    Scalar !!str SINGLE_QUOTED "<<" @10:1
    Scalar !!str "q" @10:7
    Scalar !!merge "<<" @11:1
    Map !!map FLOW @11:5
"#
    );
}

#[test]
fn comments_head_line_foot_and_document() {
    let src = "# doc head\n\n# key head\na: 1 # line\n# foot of a\n\nb:\n  - x\n";
    assert_eq!(
        parse(src),
        r##"Doc @4:1 head="# doc head"
  Map !!map @4:1
    Scalar !!str "a" @4:1 head="# key head" foot="# foot of a"
    Scalar !!int "1" @4:4 line="# line"
    Scalar !!str "b" @7:1
    Seq !!seq @8:3
      Scalar !!str "x" @8:5
"##
    );
}

#[test]
fn error_messages_match_go_yaml() {
    assert_eq!(
        parse("metadata:\n  name: x\n  bad\n  other: y\n"),
        "Error: yaml: line 3: could not find expected ':'\n"
    );
    assert_eq!(
        parse("a: b\nc:\n\tname: x\n"),
        "Error: yaml: line 3: found character that cannot start any token\n"
    );
    assert_eq!(
        parse("a: b\ny: key: value\n"),
        "Error: yaml: line 2: mapping values are not allowed in this context\n"
    );
    assert_eq!(parse("a: \u{1}\n"), "Error: yaml: control characters are not allowed\n");
    assert_eq!(parse("a: *nope\n"), "Error: yaml: unknown anchor 'nope' referenced\n");
}

#[test]
fn empty_and_comment_only_documents_are_none() {
    assert_eq!(parse(""), "None\n");
    assert_eq!(parse("# only a comment\n"), "None\n");
    assert_eq!(parse("---\n"), "None\n");
    assert_eq!(parse("--- null\n"), "None\n");
    assert_eq!(parse_documents("a: 1\n---\nb: 2\n").map(|d| d.len()), Ok(2));
}
