//! The YAML event parser (go-yaml v3 `parserc.go` behaviour), including the
//! comment queue that attaches head, line, foot and tail comments to events.
