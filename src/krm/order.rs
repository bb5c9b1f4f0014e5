//! Restoring the input's key order on a function's output (kyaml
//! `order.SyncOrder`, spec §8.4 step 2).
//!
//! In every mapping of the output, keys that also exist in the input at the
//! same path are put back in the input's order; keys only in the output
//! follow in output order. Recursion follows mapping keys and sequence
//! positions. kyaml looks fields up by name, so a duplicated key collapses
//! to copies of its first occurrence.
//!
//! Afterwards comes kyaml's head-comment rearrangement for sequence items
//! (a workaround for go-yaml issue 587), walking documents and mappings
//! only: an item of a first-level sequence whose first child is a scalar
//! with a head comment gets that comment copied (when the item has none) or
//! moved and appended (when it has one).

use super::resource_list::{WireError, kind_name};
use crate::yaml::SeqIndent;
use crate::yaml::node::{Node, NodeKind};

/// Puts the keys of `to` (the output resource) back in the order of `from`
/// (the input resource), then rearranges sequence-item head comments.
pub fn sync_order(from: &Node, to: &mut Node) -> Result<(), WireError> {
    sync(from.root(), to.root_mut()).map_err(|message| WireError::SyncOrder(go_quote(&message)))?;
    rearrange_head_comments(to.root_mut());
    Ok(())
}

fn sync(from: &Node, to: &mut Node) -> Result<(), String> {
    if from.is_nil_or_empty() || to.is_nil_or_empty() {
        return Ok(());
    }
    match from.kind {
        NodeKind::Mapping => {
            if to.is_mapping() {
                reorder_mapping(from, to);
            }
            let names: Vec<&str> = from.pairs().map(|(key, _)| key.value.as_str()).collect();
            for name in names {
                let (Some(from_value), Some(to_value)) = (from.get(name), to.get_mut(name)) else {
                    continue;
                };
                sync(from_value, to_value)?;
            }
            Ok(())
        }
        NodeKind::Sequence => {
            if to.kind != NodeKind::Sequence {
                // kyaml's `Elements()` on a non-sequence.
                return Err(format!(
                    "wrong node kind: expected SequenceNode but got {}: node contents:\n{}",
                    kind_name(to.kind),
                    crate::yaml::to_string(to, SeqIndent::Compact)
                ));
            }
            for (from_item, to_item) in from.content.iter().zip(to.content.iter_mut()) {
                sync(from_item, to_item)?;
            }
            Ok(())
        }
        _ => Ok(()),
    }
}

/// kyaml `SyncMapNodesOrder`: common keys in `from`'s order (each looked up
/// by name, so the first occurrence), then the remaining keys of `to`.
fn reorder_mapping(from: &Node, to: &mut Node) {
    let keys: Vec<&str> = to.pairs().map(|(key, _)| key.value.as_str()).collect();
    let mut remaining: Vec<&str> = keys.clone();
    let mut order: Vec<&str> = Vec::with_capacity(remaining.len());
    for (key, _) in from.pairs() {
        if let Some(position) = remaining.iter().position(|name| *name == key.value) {
            remaining.remove(position);
            order.push(key.value.as_str());
        }
    }
    order.extend(remaining);
    // Each name places the pair of its *first* occurrence, so a duplicated
    // key repeats that pair; only without duplicates is an unchanged order
    // a no-op.
    let unique = {
        let mut sorted = keys.clone();
        sorted.sort_unstable();
        sorted.windows(2).all(|pair| pair[0] != pair[1])
    };
    if unique && order == keys {
        return;
    }
    let first_index: Vec<Option<usize>> = order.iter().map(|name| to.key_index(name)).collect();
    // Move pairs out instead of cloning them (a clone per level made deep
    // resources quadratic); a pair wanted twice is cloned from its copy.
    let mut slots: Vec<Option<Node>> = std::mem::take(&mut to.content)
        .into_iter()
        .map(Some)
        .collect();
    let mut content: Vec<Node> = Vec::with_capacity(slots.len());
    let mut placed: Vec<Option<usize>> = vec![None; slots.len()];
    for i in first_index.into_iter().flatten() {
        let key = slots.get_mut(i).and_then(Option::take);
        let value = slots.get_mut(i + 1).and_then(Option::take);
        match (key, placed.get(i).copied().flatten()) {
            (Some(key), _) => {
                if let Some(slot) = placed.get_mut(i) {
                    *slot = Some(content.len());
                }
                content.push(key);
                content.push(value.unwrap_or_else(Node::new_mapping));
            }
            (None, Some(at)) => {
                let key = content[at].clone();
                let value = content
                    .get(at + 1)
                    .cloned()
                    .unwrap_or_else(Node::new_mapping);
                content.push(key);
                content.push(value);
            }
            (None, None) => {}
        }
    }
    to.content = content.into();
}

/// kyaml `rearrangeHeadCommentOfSeqNode`.
pub(crate) fn rearrange_head_comments(node: &mut Node) {
    match node.kind {
        NodeKind::Document | NodeKind::Mapping => {
            for child in &mut node.content {
                rearrange_head_comments(child);
            }
        }
        NodeKind::Sequence => rearrange_sequence_items(node),
        _ => {}
    }
}

/// The sequence step of [`rearrange_head_comments`]: each item whose first
/// child is a scalar gets that child's head comment (kyaml does not descend
/// further into a sequence).
pub(crate) fn rearrange_sequence_items(sequence: &mut Node) {
    for item in &mut sequence.content {
        let Some(first) = item.content.first() else {
            continue;
        };
        if first.kind != NodeKind::Scalar {
            continue;
        }
        if item.head_comment().is_empty() {
            let head = first.head_comment().to_owned();
            item.set_head_comment(head);
            continue;
        }
        if !first.head_comment().is_empty() {
            let moved = item.content[0].take_head_comment();
            let head = format!("{}\n{moved}", item.head_comment());
            item.set_head_comment(head);
        }
    }
}

/// Go's `%q` of a string (`strconv.Quote`): double quotes, `\n`, `\t`,
/// `\"`, `\\` and `\x`/`\u` escapes for non-printable characters.
pub(crate) fn go_quote(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            '\u{7}' => out.push_str("\\a"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\u{b}' => out.push_str("\\v"),
            c if (c as u32) < 0x20 || c as u32 == 0x7f => {
                out.push_str(&format!("\\x{:02x}", c as u32));
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::sync_order;
    use crate::yaml::node::{Node, tag};

    fn scalar(value: &str) -> Node {
        Node::new_scalar(tag::STR, value)
    }

    fn map(pairs: Vec<(&str, Node)>) -> Node {
        let mut node = Node::new_mapping();
        for (key, value) in pairs {
            node.content.push(scalar(key));
            node.content.push(value);
        }
        node
    }

    fn keys(node: &Node) -> Vec<&str> {
        node.pairs().map(|(key, _)| key.value.as_str()).collect()
    }

    #[test]
    fn restores_input_order_and_appends_new_keys() {
        let input = map(vec![
            (
                "metadata",
                map(vec![("name", scalar("a")), ("namespace", scalar("ns"))]),
            ),
            (
                "spec",
                map(vec![
                    ("zeta", scalar("1")),
                    ("alpha", scalar("2")),
                    ("mid", scalar("3")),
                ]),
            ),
        ]);
        let mut output = map(vec![
            (
                "spec",
                map(vec![
                    ("alpha", scalar("2")),
                    ("mid", scalar("3")),
                    ("zeta", scalar("1")),
                ]),
            ),
            (
                "metadata",
                map(vec![
                    ("labels", map(vec![])),
                    ("name", scalar("a")),
                    ("namespace", scalar("ns")),
                ]),
            ),
        ]);
        sync_order(&input, &mut output).unwrap();
        assert_eq!(keys(&output), ["metadata", "spec"]);
        assert_eq!(
            keys(output.get("metadata").unwrap()),
            ["name", "namespace", "labels"]
        );
        assert_eq!(keys(output.get("spec").unwrap()), ["zeta", "alpha", "mid"]);
    }

    #[test]
    fn duplicate_keys_collapse_to_the_first() {
        let input = map(vec![("a", scalar("1")), ("a", scalar("2"))]);
        let mut output = input.clone();
        sync_order(&input, &mut output).unwrap();
        let values: Vec<&str> = output.pairs().map(|(_, v)| v.value.as_str()).collect();
        assert_eq!(values, ["1", "1"]);
    }

    #[test]
    fn sequence_item_head_comment_is_copied_or_appended() {
        let mut first = map(vec![("name", scalar("x"))]);
        first.content[0].set_head_comment("# dash");
        let mut second = map(vec![("name", scalar("y"))]);
        second.set_head_comment("# item");
        second.content[0].set_head_comment("# key");
        let mut items = Node::new_sequence();
        items.content = crate::yaml::node::thin_vec![first, second];
        let mut output = map(vec![("items", items)]);
        let input = output.clone();
        sync_order(&input, &mut output).unwrap();
        let items = output.get("items").unwrap();
        assert_eq!(items.content[0].head_comment(), "# dash");
        assert_eq!(items.content[0].content[0].head_comment(), "# dash");
        assert_eq!(items.content[1].head_comment(), "# item\n# key");
        assert_eq!(items.content[1].content[0].head_comment(), "");
    }
}
