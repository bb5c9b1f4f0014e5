//! The YAML scanner (go-yaml v3 `scannerc.go` behaviour): bytes to tokens,
//! with comments kept as tokens and byte offsets in every mark.
