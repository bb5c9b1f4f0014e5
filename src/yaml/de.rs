//! A serde `Deserializer` over [`super::Node`], with go-yaml's scalar
//! resolution and its `yaml: unmarshal errors:` messages, so typed config is
//! decoded by the same parser that reads packages.
