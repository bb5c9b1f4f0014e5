//! Fuzz target: whatever parses, the encoder writes text that parses back,
//! and writing that again gives the same text (a fixed point), without a
//! panic or a stack overflow.

#![no_main]

use krender::yaml::{SeqIndent, parse_documents, to_string};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(documents) = parse_documents(text) else {
        return;
    };
    for document in documents {
        let once = to_string(&document, SeqIndent::Compact);
        let again = parse_documents(&once).expect("emitted text parses");
        if let Some(reparsed) = again.first() {
            assert_eq!(to_string(reparsed, SeqIndent::Compact), once);
        }
    }
});
