//! Fuzz target: the live YAML parser and the frozen reference parser
//! (`krender::yaml::reference`) agree on every input: the same documents,
//! node for node (styles, tags, anchors, comments, positions), or the same
//! error text and position. A difference found here becomes a case in
//! `tests/yaml_differential.rs`.

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let live = krender::yaml::parse_documents(text);
    let frozen = krender::yaml::reference::parse_documents(text);
    match (&live, &frozen) {
        (Ok(a), Ok(b)) => assert!(a == b, "documents differ on {text:?}\n{a:?}\n{b:?}"),
        (Err(a), Err(b)) => assert!(
            a == b && a.to_string() == b.to_string(),
            "errors differ on {text:?}\n{a}\n{b}"
        ),
        _ => panic!("one parser failed on {text:?}\nlive: {live:?}\nreference: {frozen:?}"),
    }
    let live = krender::yaml::parse_document(text);
    let frozen = krender::yaml::reference::parse_document(text);
    match (&live, &frozen) {
        (Ok(a), Ok(b)) => assert!(a == b, "first documents differ on {text:?}"),
        (Err(a), Err(b)) => assert!(a == b, "first-document errors differ on {text:?}"),
        _ => panic!("one parser failed on the first document of {text:?}"),
    }
});
