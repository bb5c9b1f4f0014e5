//! Fuzz target: the YAML parser must never panic, whatever the input.
//! Any crash found here becomes a named regression test in
//! `tests/yaml_parse.rs` with the raw input.

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = krender::yaml::parse_documents(text);
        let _ = krender::yaml::parse_document(text);
    }
});
