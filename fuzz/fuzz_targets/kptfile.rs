//! Fuzz target: the Kptfile decoder and validator return an error for any
//! input they cannot take, never panic.

#![no_main]

use krender::pkg::kptfile::Kptfile;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let dir = std::path::Path::new("/fuzz/pkg");
    if let Ok(kptfile) = Kptfile::parse_bytes(data, dir) {
        let _ = kptfile.validate(dir);
        let _ = kptfile.pipeline.config_paths().count();
    }
});
