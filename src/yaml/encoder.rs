//! Node to emitter events (go-yaml v3 `encode.go` node rules): implicit tags,
//! forced quoting, key foot comments, compact or wide sequences per document.

use super::node::Node;

/// Sequence indentation of one document (kyaml's `seqindent` annotation).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum SeqIndent {
    /// `- ` in the column of the parent key (kyaml's default).
    #[default]
    Compact,
    /// `- ` two columns right of the parent key (go-yaml's default).
    Wide,
}

/// A multi-document encoder: every document after the first is preceded by
/// a `---` line, like one go-yaml `Encoder` used for several `Encode` calls.
pub struct Encoder<'a> {
    out: &'a mut String,
    seq_indent: SeqIndent,
    documents: usize,
}

impl<'a> Encoder<'a> {
    /// An encoder appending to `out`.
    pub fn new(out: &'a mut String) -> Encoder<'a> {
        Encoder { out, seq_indent: SeqIndent::Compact, documents: 0 }
    }

    /// Sets the sequence style for the following documents.
    pub fn set_seq_indent(&mut self, seq_indent: SeqIndent) {
        self.seq_indent = seq_indent;
    }

    /// Writes one document. A non-document node is wrapped in an implicit
    /// document without comments.
    pub fn encode(&mut self, node: &Node) {
        let _ = (node, &mut self.out, self.seq_indent, self.documents);
        unimplemented!("emitter in progress")
    }
}

/// Encodes one node as a single document.
pub fn to_string(node: &Node, seq_indent: SeqIndent) -> String {
    let mut out = String::new();
    let mut encoder = Encoder::new(&mut out);
    encoder.set_seq_indent(seq_indent);
    encoder.encode(node);
    out
}
