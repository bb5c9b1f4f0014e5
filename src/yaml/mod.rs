//! The YAML layer: a go-yaml v3 compatible parser and emitter over one node
//! model, so that krender reads and writes package files byte-for-byte as kpt
//! does (see `../shared/spec/yaml-fidelity.md`).
//!
//! Pipeline: `scanner` (bytes → tokens, comments included) → `parser`
//! (tokens → events with comments attached) → `composer` (events → [`Node`]
//! trees, with go-yaml's comment moves). `fast` goes straight from bytes to
//! nodes for the block YAML packages are made of, and hands everything else
//! (and every error) to that pipeline. Back: `encoder` ([`Node`] →
//! events, tag and quoting decisions) → `emitter` (events → text).
//! `split` parses long multi-document streams in pieces on rayon; the encoder
//! writes long lists (block sequences, streams) in chunks on rayon.
//! `resolve` holds the implicit-tag rules both directions share; `marshal`
//! builds nodes the way Go's struct marshaller styles them; `de` decodes typed
//! config (Kptfile, function configs) from nodes with serde.

pub mod alias;
pub(crate) mod binary;
pub mod composer;
pub mod de;
pub mod emitter;
pub mod encoder;
pub mod error;
mod fast;
pub mod marshal;
pub mod node;
pub mod parser;
#[cfg(any(test, feature = "reference-parser"))]
pub mod reference;
pub mod resolve;
pub mod scanner;
pub mod split;

pub use composer::parse_document;
pub use encoder::{Chunking, Edit, Encoder, SeqIndent, SplicedItem, to_string, to_string_spliced};
pub use error::YamlError;
pub use node::{Node, NodeKind, Style};
pub use split::{parse_documents, parse_documents_in_pieces};
