//! The YAML emitter (go-yaml v3 `emitterc.go` behaviour with kyaml's
//! settings): events to text, scalar analysis and style downgrades.
