//! A small model of Go's typed YAML decoding and struct marshalling, enough
//! for the Kptfile: a static schema of Go struct types, a strict decoder with
//! go-yaml v3's `yaml: unmarshal errors:` texts (unknown fields, kind
//! mismatches, duplicate keys), and a marshaller that writes the decoded
//! value back in struct field order with `omitempty` (spec §6, §11).
//!
//! kpt decodes the Kptfile into Go structs with `KnownFields(true)` and,
//! since HEAD, re-marshals the root Kptfile from those structs; both effects
//! are visible in the conformance diffs, so the schema here mirrors kpt's
//! `pkg/api/kptfile/v1` field order and Go type names exactly.

use std::collections::BTreeMap;

#[cfg(test)]
use crate::yaml::node::Style;
use crate::yaml::node::{Node, NodeKind, tag};
use crate::yaml::resolve::resolve_plain;

/// A [`GoField`] entry of a struct table: `field!(key, type)` (omitempty),
/// `field!(key, type, required)`, `field!(key, type, pointer)`.
macro_rules! field {
    ($key:expr, $ty:expr) => {
        GoField {
            key: $key,
            ty: $ty,
            omitempty: true,
            pointer: false,
            inline: false,
        }
    };
    ($key:expr, $ty:expr, required) => {
        GoField {
            key: $key,
            ty: $ty,
            omitempty: false,
            pointer: false,
            inline: false,
        }
    };
    ($key:expr, $ty:expr, pointer) => {
        GoField {
            key: $key,
            ty: $ty,
            omitempty: true,
            pointer: true,
            inline: false,
        }
    };
}
pub(crate) use field;

/// An `,inline` struct field of a struct table: `inline_field!(&STRUCT)`.
macro_rules! inline_field {
    ($ty:expr) => {
        GoField {
            key: "",
            ty: GoType::Struct($ty),
            omitempty: false,
            pointer: false,
            inline: true,
        }
    };
}
pub(crate) use inline_field;

/// A Go type as far as decoding and marshalling care.
#[derive(Debug)]
pub(crate) enum GoType {
    /// `string` or a string alias; the name is used in error messages.
    Str(&'static str),
    /// `int`.
    Int,
    /// `bool` (go-yaml v3 also takes YAML 1.1's `yes`/`no`/`on`/`off`).
    Bool,
    /// `yaml.Node` or `interface{}`: any node is taken as it is (a null
    /// too: go-yaml hands a `yaml.Node` target the node before its null
    /// check).
    Node,
    /// `map[string]string`.
    StrMap,
    /// A slice of the element type; the name is the Go type (`[]v1.Function`).
    List(&'static str, &'static GoType),
    /// A struct type.
    Struct(&'static GoStruct),
}

/// A Go struct type.
#[derive(Debug)]
pub(crate) struct GoStruct {
    /// Qualified Go name used in errors (`v1.Function`).
    pub(crate) name: &'static str,
    /// Fields in declaration order.
    pub(crate) fields: &'static [GoField],
}

/// One struct field.
#[derive(Debug)]
pub(crate) struct GoField {
    /// The YAML key (empty for an inline struct).
    pub(crate) key: &'static str,
    /// The field's type.
    pub(crate) ty: GoType,
    /// `omitempty` in the tag.
    pub(crate) omitempty: bool,
    /// A pointer field (`*T`): present-but-empty is not "empty".
    pub(crate) pointer: bool,
    /// `,inline`: the struct's fields are read from the parent mapping.
    pub(crate) inline: bool,
}

/// A decoded Go value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum GoValue {
    /// A string.
    Str(String),
    /// An int.
    Int(i64),
    /// A bool.
    Bool(bool),
    /// A node kept as decoded ([`GoType::Node`]). Boxed: only the fix
    /// builtin's v1alpha1 types hold one, and inline it would make every
    /// value (every field of every Kptfile and result held for the whole
    /// render) as large as a [`Node`].
    Node(Box<Node>),
    /// A `map[string]string` (`None` = nil).
    Map(Option<BTreeMap<String, String>>),
    /// A slice (`None` = nil).
    List(Option<Vec<GoValue>>),
    /// A struct; `None` is a nil pointer.
    Struct(Option<StructValue>),
}

// Every field of every Kptfile and result held for the whole render is a
// `GoValue`: keep it as small as its largest common variant.
const _: () = assert!(std::mem::size_of::<GoValue>() <= 32);

/// The fields of a decoded struct, by field index; an inline struct is a
/// nested value under its own field index.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct StructValue {
    /// Field values by schema index.
    pub(crate) fields: FieldMap,
}

/// Field values ordered by schema index. A struct sets a handful of fields,
/// so a sorted vector: a B-tree node is ~450 bytes however few it holds, and
/// every package's Kptfile is held (and copied) for the whole render.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct FieldMap(Vec<(usize, GoValue)>);

impl FieldMap {
    fn position(&self, index: usize) -> Result<usize, usize> {
        self.0.binary_search_by_key(&index, |(at, _)| *at)
    }

    /// The value of field `index`.
    pub(crate) fn get(&self, index: &usize) -> Option<&GoValue> {
        let at = self.position(*index).ok()?;
        self.0.get(at).map(|(_, value)| value)
    }

    /// Sets field `index`, replacing its value.
    pub(crate) fn insert(&mut self, index: usize, value: GoValue) {
        match self.position(index) {
            Ok(at) => self.0[at].1 = value,
            Err(at) => self.0.insert(at, (index, value)),
        }
    }

    /// The value of field `index`, set by `make` first when absent.
    pub(crate) fn get_or_insert_with(
        &mut self,
        index: usize,
        make: impl FnOnce() -> GoValue,
    ) -> &mut GoValue {
        let at = match self.position(index) {
            Ok(at) => at,
            Err(at) => {
                self.0.insert(at, (index, make()));
                at
            }
        };
        &mut self.0[at].1
    }

    /// The set fields in index order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (&usize, &GoValue)> {
        self.0.iter().map(|(index, value)| (index, value))
    }
}

/// go-yaml's `yaml: unmarshal errors:` list.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct UnmarshalErrors {
    /// `line N: ...` entries in the order found.
    pub(crate) errors: Vec<String>,
    /// The 1-based column of the node the first entry is about (0 when
    /// unknown): go-yaml's text names only the line.
    first_column: u32,
    /// `KnownFields(true)`: unknown fields are errors.
    strict: bool,
}

impl UnmarshalErrors {
    /// The line of the first error (each reads `line N: ...`) and what it
    /// says.
    pub(crate) fn first_line(&self) -> Option<(usize, String)> {
        let first = self.errors.first()?.strip_prefix("line ")?;
        let (line, problem) = first.split_once(": ")?;
        Some((line.parse().ok()?, problem.to_owned()))
    }

    /// The column of the node the first entry is about (1 when unknown).
    pub(crate) fn first_column(&self) -> usize {
        self.first_column.max(1) as usize
    }

    /// Records `text` about the node at `column`.
    fn push(&mut self, column: u32, text: String) {
        if self.errors.is_empty() {
            self.first_column = column;
        }
        self.errors.push(text);
    }
}

impl std::fmt::Display for UnmarshalErrors {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("yaml: unmarshal errors:")?;
        for error in &self.errors {
            write!(f, "\n  {error}")?;
        }
        Ok(())
    }
}

/// Decodes `node` (a document or its root) into `ty` strictly.
pub(crate) fn decode(node: &Node, ty: &'static GoStruct) -> Result<StructValue, UnmarshalErrors> {
    decode_with(node, ty, true)
}

/// Decodes like `yaml.Unmarshal` without `KnownFields`: unknown fields are skipped.
pub(crate) fn decode_lenient(
    node: &Node,
    ty: &'static GoStruct,
) -> Result<StructValue, UnmarshalErrors> {
    decode_with(node, ty, false)
}

fn decode_with(
    node: &Node,
    ty: &'static GoStruct,
    strict: bool,
) -> Result<StructValue, UnmarshalErrors> {
    let mut errors = UnmarshalErrors {
        errors: Vec::new(),
        first_column: 0,
        strict,
    };
    let value = decode_struct(node.root(), ty, &mut errors);
    if errors.errors.is_empty() {
        Ok(value.unwrap_or_default())
    } else {
        Err(errors)
    }
}

fn short_tag(node: &Node) -> String {
    if node.tag().is_empty() {
        match node.kind {
            NodeKind::Mapping => tag::MAP.to_owned(),
            NodeKind::Sequence => tag::SEQ.to_owned(),
            _ => resolve_plain(&node.value).to_owned(),
        }
    } else {
        node.tag().to_string()
    }
}

fn type_error(node: &Node, go_type: &str, errors: &mut UnmarshalErrors) {
    let node_tag = short_tag(node);
    let value = if node_tag == tag::SEQ || node_tag == tag::MAP {
        String::new()
    } else if node.value.chars().count() > 10 {
        let head: String = node.value.chars().take(7).collect();
        format!(" `{head}...`")
    } else {
        format!(" `{}`", node.value)
    };
    errors.push(
        node.column,
        format!(
            "line {}: cannot unmarshal {node_tag}{value} into {go_type}",
            node.line
        ),
    );
}

fn is_null(node: &Node) -> bool {
    node.kind == NodeKind::Scalar && short_tag(node) == tag::NULL
}

fn decode_value(node: &Node, ty: &'static GoType, errors: &mut UnmarshalErrors) -> Option<GoValue> {
    if let GoType::Node = ty {
        return Some(GoValue::Node(Box::new(node.clone())));
    }
    if node.kind == NodeKind::Alias {
        // Kptfiles with aliases are not something kpt's cases exercise; treat
        // them as absent rather than guessing go-yaml's resolution.
        return None;
    }
    if is_null(node) {
        return None;
    }
    match ty {
        GoType::Str(name) => {
            if node.kind == NodeKind::Scalar {
                Some(GoValue::Str(node.value.as_str().to_owned()))
            } else {
                type_error(node, name, errors);
                None
            }
        }
        GoType::Int => {
            if node.kind == NodeKind::Scalar {
                let plain: String = node.value.chars().filter(|&c| c != '_').collect();
                match plain.parse::<i64>() {
                    Ok(n) if short_tag(node) == tag::INT => Some(GoValue::Int(n)),
                    _ => {
                        type_error(node, "int", errors);
                        None
                    }
                }
            } else {
                type_error(node, "int", errors);
                None
            }
        }
        GoType::Bool => {
            let value = match (node.kind, short_tag(node).as_str(), node.value.as_str()) {
                (NodeKind::Scalar, tag::BOOL, text) => {
                    Some(matches!(text, "true" | "True" | "TRUE"))
                }
                (NodeKind::Scalar, _, "y" | "Y" | "yes" | "Yes" | "YES" | "on" | "On" | "ON") => {
                    Some(true)
                }
                (NodeKind::Scalar, _, "n" | "N" | "no" | "No" | "NO" | "off" | "Off" | "OFF") => {
                    Some(false)
                }
                _ => None,
            };
            if value.is_none() {
                type_error(node, "bool", errors);
            }
            value.map(GoValue::Bool)
        }
        GoType::Node => Some(GoValue::Node(Box::new(node.clone()))),
        GoType::StrMap => {
            if node.kind != NodeKind::Mapping {
                type_error(node, "map[string]string", errors);
                return None;
            }
            let mut map = BTreeMap::new();
            let mut seen: BTreeMap<String, usize> = BTreeMap::new();
            for (key, value) in node.pairs() {
                if let Some(first_line) = seen.get(key.value.as_str()) {
                    errors.push(
                        key.column,
                        format!(
                            "line {}: mapping key {:?} already defined at line {first_line}",
                            key.line, key.value
                        ),
                    );
                    continue;
                }
                seen.insert(key.value.as_str().to_owned(), key.line as usize);
                let text = if is_null(value) {
                    String::new()
                } else if value.kind == NodeKind::Scalar {
                    value.value.as_str().to_owned()
                } else {
                    type_error(value, "string", errors);
                    continue;
                };
                map.insert(key.value.as_str().to_owned(), text);
            }
            Some(GoValue::Map(Some(map)))
        }
        GoType::List(name, element) => {
            if node.kind != NodeKind::Sequence {
                type_error(node, name, errors);
                return None;
            }
            let items = node
                .content
                .iter()
                .map(|item| decode_value(item, element, errors).unwrap_or_else(|| zero(element)))
                .collect();
            Some(GoValue::List(Some(items)))
        }
        GoType::Struct(s) => decode_struct(node, s, errors).map(|v| GoValue::Struct(Some(v))),
    }
}

/// The zero value of a type (what a null list element decodes to).
fn zero(ty: &GoType) -> GoValue {
    match ty {
        GoType::Str(_) => GoValue::Str(String::new()),
        GoType::Int => GoValue::Int(0),
        GoType::Bool => GoValue::Bool(false),
        GoType::Node => GoValue::Node(Box::new(Node::new_untagged_scalar(""))),
        GoType::StrMap => GoValue::Map(None),
        GoType::List(..) => GoValue::List(None),
        GoType::Struct(_) => GoValue::Struct(Some(StructValue::default())),
    }
}

/// Finds the field for `key`, looking through inline structs. Returns the
/// chain of field indexes.
fn find_field(s: &'static GoStruct, key: &str) -> Option<Vec<usize>> {
    for (index, field) in s.fields.iter().enumerate() {
        if field.inline {
            if let GoType::Struct(inner) = &field.ty
                && let Some(mut rest) = find_field(inner, key)
            {
                rest.insert(0, index);
                return Some(rest);
            }
        } else if field.key == key {
            return Some(vec![index]);
        }
    }
    None
}

fn decode_struct(
    node: &Node,
    s: &'static GoStruct,
    errors: &mut UnmarshalErrors,
) -> Option<StructValue> {
    if is_null(node) {
        return None;
    }
    if node.kind != NodeKind::Mapping {
        type_error(node, s.name, errors);
        return None;
    }
    let mut value = StructValue::default();
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    for (key, field_node) in node.pairs() {
        if let Some(first_line) = seen.get(key.value.as_str()) {
            errors.push(
                key.column,
                format!(
                    "line {}: mapping key {:?} already defined at line {first_line}",
                    key.line, key.value
                ),
            );
            continue;
        }
        seen.insert(key.value.as_str().to_owned(), key.line as usize);
        let Some(chain) = find_field(s, &key.value) else {
            if !errors.strict {
                continue;
            }
            errors.push(
                key.column,
                format!(
                    "line {}: field {} not found in type {}",
                    key.line, key.value, s.name
                ),
            );
            continue;
        };
        let Some(decoded) = field_decode(s, &chain, field_node, errors) else {
            continue;
        };
        insert_chain(&mut value, s, &chain, decoded);
    }
    Some(value)
}

fn field_at(s: &'static GoStruct, chain: &[usize]) -> Option<&'static GoField> {
    let (&first, rest) = chain.split_first()?;
    let field = s.fields.get(first)?;
    if rest.is_empty() {
        return Some(field);
    }
    match &field.ty {
        GoType::Struct(inner) => field_at(inner, rest),
        _ => None,
    }
}

fn field_decode(
    s: &'static GoStruct,
    chain: &[usize],
    node: &Node,
    errors: &mut UnmarshalErrors,
) -> Option<GoValue> {
    let field = field_at(s, chain)?;
    decode_value(node, &field.ty, errors)
}

fn insert_chain(value: &mut StructValue, s: &'static GoStruct, chain: &[usize], decoded: GoValue) {
    let Some((&first, rest)) = chain.split_first() else {
        return;
    };
    if rest.is_empty() {
        value.fields.insert(first, decoded);
        return;
    }
    let Some(field) = s.fields.get(first) else {
        return;
    };
    let GoType::Struct(inner) = &field.ty else {
        return;
    };
    let entry = value
        .fields
        .get_or_insert_with(first, || GoValue::Struct(Some(StructValue::default())));
    if let GoValue::Struct(Some(inner_value)) = entry {
        insert_chain(inner_value, inner, rest, decoded);
    }
}

impl StructValue {
    /// The value of the field with YAML key `key` (looking through inline fields).
    pub(crate) fn get(&self, s: &'static GoStruct, key: &str) -> Option<&GoValue> {
        let chain = find_field(s, key)?;
        let mut current = self;
        let mut current_struct = s;
        for (position, index) in chain.iter().enumerate() {
            let value = current.fields.get(index)?;
            if position + 1 == chain.len() {
                return Some(value);
            }
            let field = current_struct.fields.get(*index)?;
            let GoType::Struct(inner) = &field.ty else {
                return None;
            };
            let GoValue::Struct(Some(inner_value)) = value else {
                return None;
            };
            current = inner_value;
            current_struct = inner;
        }
        None
    }

    /// Sets the field with YAML key `key`.
    pub(crate) fn set(&mut self, s: &'static GoStruct, key: &str, value: GoValue) {
        if let Some(chain) = find_field(s, key) {
            insert_chain(self, s, &chain, value);
        }
    }

    /// The string field `key`, or "".
    pub(crate) fn str(&self, s: &'static GoStruct, key: &str) -> &str {
        match self.get(s, key) {
            Some(GoValue::Str(text)) => text,
            _ => "",
        }
    }
}

fn is_zero(value: &GoValue, field: &GoField) -> bool {
    match value {
        GoValue::Str(text) => text.is_empty(),
        GoValue::Int(n) => *n == 0,
        GoValue::Bool(b) => !*b,
        // go-yaml's `Node.IsZero`: nothing set at all.
        GoValue::Node(node) => {
            node.kind == NodeKind::Scalar
                && node.value.is_empty()
                && node.tag().is_empty()
                && node.style.is_empty()
                && node.content.is_empty()
                && node.head_comment().is_empty()
                && node.line_comment().is_empty()
                && node.foot_comment().is_empty()
        }
        GoValue::Map(map) => map.as_ref().is_none_or(BTreeMap::is_empty),
        GoValue::List(list) => list.as_ref().is_none_or(Vec::is_empty),
        GoValue::Struct(None) => true,
        GoValue::Struct(Some(inner)) => {
            if field.pointer {
                return false;
            }
            let GoType::Struct(s) = &field.ty else {
                return false;
            };
            struct_is_zero(inner, s)
        }
    }
}

fn struct_is_zero(value: &StructValue, s: &'static GoStruct) -> bool {
    value
        .fields
        .iter()
        .all(|(index, v)| match s.fields.get(*index) {
            Some(field) => is_zero(v, field),
            None => true,
        })
}

/// Marshals a decoded struct the way Go's `yaml.Marshal` would, producing
/// a mapping node (block style; sequences are written with the encoder's
/// per-document indent setting).
pub(crate) fn marshal(value: &StructValue, s: &'static GoStruct) -> Node {
    let mut mapping = Node::new_mapping();
    marshal_into(&mut mapping, value, s);
    mapping
}

fn marshal_into(mapping: &mut Node, value: &StructValue, s: &'static GoStruct) {
    for (index, field) in s.fields.iter().enumerate() {
        let field_value = value.fields.get(&index);
        if field.inline {
            if let (GoType::Struct(inner), Some(GoValue::Struct(Some(inner_value)))) =
                (&field.ty, field_value)
            {
                marshal_into(mapping, inner_value, inner);
            }
            continue;
        }
        let field_value = match field_value {
            Some(v) => v.clone(),
            None => zero_for_marshal(&field.ty, field.pointer),
        };
        if field.omitempty && is_zero(&field_value, field) {
            continue;
        }
        if let GoValue::Struct(None) = field_value {
            // A nil pointer without omitempty is written as null.
            mapping.content.push(key_node(field.key));
            mapping.content.push(Node::new_scalar(tag::NULL, "null"));
            continue;
        }
        mapping.content.push(key_node(field.key));
        mapping.content.push(marshal_value(&field_value, &field.ty));
    }
}

fn zero_for_marshal(ty: &GoType, pointer: bool) -> GoValue {
    match ty {
        GoType::Struct(_) if pointer => GoValue::Struct(None),
        other => zero(other),
    }
}

fn key_node(key: &str) -> Node {
    string_node(key)
}

fn marshal_value(value: &GoValue, ty: &GoType) -> Node {
    match (value, ty) {
        (GoValue::Str(text), _) => string_node(text),
        (GoValue::Int(n), _) => Node::new_scalar(tag::INT, n.to_string()),
        (GoValue::Bool(b), _) => Node::new_scalar(tag::BOOL, b.to_string()),
        (GoValue::Node(node), _) => node.root().clone(),
        (GoValue::Map(map), _) => {
            let mut node = Node::new_mapping();
            // go-yaml sorts map keys in its "natural" order (digit runs by value).
            let mut entries: Vec<(&String, &String)> = map.iter().flatten().collect();
            entries.sort_by(|a, b| crate::yaml::marshal::go_key_order(a.0, b.0));
            for (key, text) in entries {
                node.content.push(string_node(key));
                node.content.push(string_node(text));
            }
            node
        }
        (GoValue::List(list), GoType::List(_, element)) => {
            let mut node = Node::new_sequence();
            for item in list.iter().flatten() {
                node.content.push(marshal_value(item, element));
            }
            node
        }
        (GoValue::Struct(Some(inner)), GoType::Struct(s)) => marshal(inner, s),
        _ => Node::new_scalar(tag::NULL, "null"),
    }
}

/// A string node styled as Go's struct marshaller styles a `string` (§6).
pub(crate) fn string_node(text: &str) -> Node {
    crate::yaml::marshal::string(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn string_styles() {
        assert_eq!(string_node("True").style, Style::DOUBLE_QUOTED);
        assert_eq!(string_node("yes").style, Style::DOUBLE_QUOTED);
        assert_eq!(string_node("").style, Style::DOUBLE_QUOTED);
        assert_eq!(string_node("./x").style, Style::PLAIN);
        assert_eq!(string_node("a\nb").style, Style::LITERAL);
    }
}
