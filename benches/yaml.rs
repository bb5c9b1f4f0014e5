//! YAML parse+emit throughput against serde_yaml (filled in with the YAML layer).

fn main() {}
