//! Fuzz target: layering any document set (decoded from arbitrary YAML)
//! renders or fails with an error naming the document, never panics, and
//! stays within its budgets (aliases, padding, depth).

#![no_main]

use std::sync::Arc;

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let file: Arc<str> = Arc::from("fuzz.yaml");
    let Ok(loaded) = krender::layering::load_text(text, &file) else {
        return;
    };
    let inputs: Vec<_> = loaded.into_iter().map(|document| document.input).collect();
    let _ = krender::layering::render(&inputs);
});
