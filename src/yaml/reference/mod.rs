//! The reference parser: scanner, parser and composer exactly as they were
//! before the fast parser replaced them (issue 29), kept only to check the
//! live parser against. The differential tests (`yaml::differential`, the
//! `differential` fuzz target) require the same node tree (styles, tags,
//! anchors, comments, positions) and the same error text and position
//! from both, on any input. Built for tests and with the
//! `reference-parser` feature (the fuzz crate); never used by krender
//! itself. Do not edit it except to follow a change of the shared types
//! (`Node`, `Mark`, `RawError`).

// Parts of the copied modules the live code uses elsewhere (the indicator
// set, check_input) are unused here.
#![allow(dead_code, unreachable_pub)]

mod composer;
mod parser;
mod scanner;

pub use composer::parse_document;

use super::error::YamlError;
use super::node::Node;

/// Every document of `src`, parsed sequentially by the reference parser
/// (what [`crate::yaml::parse_documents`] returns).
pub fn parse_documents(src: &str) -> Result<Vec<Node>, YamlError> {
    composer::parse_documents_sequential(src)
}
