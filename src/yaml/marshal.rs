//! Nodes styled as Go's `yaml.Marshal` styles struct fields (spec §6): used
//! for the re-written root Kptfile and for `results.yaml`.
