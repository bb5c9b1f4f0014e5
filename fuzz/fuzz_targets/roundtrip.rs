//! Fuzz target: whatever parses is written, and what is written is parsed
//! and written again, without a panic or a stack overflow. Neither a fixed
//! point nor re-parsing is asserted: krender writes go-yaml's bytes, and
//! go-yaml's emitter is not a fixed point for folded scalars with
//! more-indented lines, and writes text it cannot read back for an anchored
//! block sequence after a commented duplicate key (both found here, both
//! byte-identical to kpt's output).

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
        if let Some(reparsed) = parse_documents(&once).ok().and_then(|again| again.into_iter().next()) {
            let _ = to_string(&reparsed, SeqIndent::Compact);
        }
    }
});
