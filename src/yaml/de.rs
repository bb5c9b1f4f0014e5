//! A serde `Deserializer` over [`super::Node`], with go-yaml v3's scalar
//! resolution and its `yaml: unmarshal errors:` messages, so typed config
//! (Kptfile, function configs, results) is decoded by the same parser that
//! reads packages.
//!
//! Semantics follow go-yaml v3's `decoder` (decode.go) as kpt uses it:
//! - a scalar decoded into a string field yields its text whatever it
//!   resolves to (`true`, `1.0`, `~`… all stay text), except that a null
//!   (`~`, `null`, empty) yields the empty string, as Go's zero value does;
//! - a mapping or sequence where a scalar is expected, and a scalar or
//!   sequence where a mapping is expected, is a type error naming the node's
//!   tag and the expected type (`cannot unmarshal !!map into string`);
//! - a null into a collection, struct or number gives the empty/zero value;
//! - `yes`/`on`/`y`… decode into a `bool` only (YAML 1.1 compatibility);
//! - integers accept Go's base prefixes and `_`, floats decoded into an
//!   integer are truncated (as go-yaml does), out-of-range numbers are type
//!   errors;
//! - aliases are followed, merge keys (`<<`) are expanded with explicit keys
//!   winning;
//! - duplicate keys are errors: `field x already set in type T` for structs,
//!   `mapping key "x" already defined at line N` for maps;
//! - strict mode is the target type's `#[serde(deny_unknown_fields)]`, which
//!   reports `field x not found in type T` at the key's line.
//!
//! go-yaml collects every type error of a document; this decoder stops at the
//! first one, which is the first go-yaml would list. Struct names in messages
//! are serde's container names: rename a struct (`#[serde(rename =
//! "v1.Function")]`) to get Go's qualified name in the text.

use std::cell::Cell;
use std::collections::HashMap;
use std::fmt;

use serde::de::{
    self, DeserializeSeed, EnumAccess, IntoDeserializer, MapAccess, SeqAccess, VariantAccess,
    Visitor,
};

use super::node::{Node, NodeKind, Style, tag};
use super::resolve::resolve_plain;

/// Decodes a `T` from `node` (a Document node or any node inside one).
pub fn from_node<'de, T: de::Deserialize<'de>>(node: &'de Node) -> Result<T, DecodeError> {
    let anchors = collect_anchors(node);
    let ctx = Context {
        anchors,
        budget: Cell::new(ALIAS_BUDGET),
    };
    let root = node.root();
    T::deserialize(NodeDeserializer {
        node: root,
        ctx: &ctx,
    })
}

/// How many nodes may be reached through aliases before decoding gives up
/// (go-yaml's "excessive aliasing" guard against alias bombs).
const ALIAS_BUDGET: usize = 1_000_000;

/// A decode failure, with the position of the node it concerns (0 when the
/// node was built in code) and the parts kpt's messages are made of.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DecodeError {
    /// What went wrong.
    pub kind: DecodeErrorKind,
    /// 1-based line of the offending node (the key, for field errors).
    pub line: usize,
    /// 1-based column of the offending node.
    pub column: usize,
    /// Byte offset of the offending node in its source piece.
    pub offset: usize,
    /// Whether a node position was attached (errors raised by serde itself
    /// get the position of the innermost node that saw them).
    located: bool,
}

/// The kinds of decode failures.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DecodeErrorKind {
    /// go-yaml ``line N: cannot unmarshal <tag>[ `<value>`] into <type>``.
    TypeMismatch {
        /// Short tag of the node found (`!!map`, `!!seq`, `!!str`, …).
        found_tag: String,
        /// The scalar text, when the node is a scalar (untruncated).
        value: Option<String>,
        /// Go-style name of the expected type (`string`, `int64`, a struct
        /// name, `[]interface {}` for sequences, `map[string]interface {}`
        /// for maps).
        expected: String,
    },
    /// go-yaml strict mode `line N: field <field> not found in type <type>`.
    UnknownField {
        /// The key as written.
        field: String,
        /// The struct's serde name.
        type_name: String,
    },
    /// go-yaml `line N: field <field> already set in type <type>`.
    DuplicateField {
        /// The repeated key.
        field: String,
        /// The struct's serde name.
        type_name: String,
    },
    /// go-yaml `line N: mapping key "<key>" already defined at line M`.
    DuplicateKey {
        /// The repeated key.
        key: String,
        /// Line of the first occurrence.
        first_line: usize,
    },
    /// A required field is absent (serde only: go-yaml leaves zero values).
    MissingField {
        /// The field's serde name.
        field: String,
    },
    /// go-yaml ``cannot decode <found> `<value>` as a <tag>``: an explicit tag
    /// that the text cannot have (`!!int abc`). Fatal in go-yaml, so its
    /// message has no `unmarshal errors` header.
    BadTaggedValue {
        /// The tag the text resolves to.
        found_tag: String,
        /// The scalar text.
        value: String,
        /// The explicit tag.
        tag: String,
    },
    /// An alias names no preceding anchor.
    UnknownAnchor(String),
    /// Aliases expand to too many nodes.
    ExcessiveAliasing,
    /// Any other message (custom `Deserialize` impls, unknown enum variants).
    Custom(String),
}

impl DecodeError {
    fn new(kind: DecodeErrorKind) -> DecodeError {
        DecodeError {
            kind,
            line: 0,
            column: 0,
            offset: 0,
            located: false,
        }
    }

    fn at(kind: DecodeErrorKind, node: &Node) -> DecodeError {
        DecodeError::new(kind).located_at(node)
    }

    /// Attaches `node`'s position unless a position is already set.
    fn located_at(mut self, node: &Node) -> DecodeError {
        if !self.located {
            self.line = node.line as usize;
            self.column = node.column as usize;
            self.offset = node.offset as usize;
            self.located = true;
        }
        self
    }

    /// The go-yaml text of this problem without the `yaml: unmarshal
    /// errors:` header, e.g. `line 10: cannot unmarshal !!map into string`.
    pub fn problem(&self) -> String {
        let line = self.line;
        match &self.kind {
            DecodeErrorKind::TypeMismatch {
                found_tag,
                value,
                expected,
            } => {
                let shown = value.as_deref().map(go_value_excerpt).unwrap_or_default();
                format!("line {line}: cannot unmarshal {found_tag}{shown} into {expected}")
            }
            DecodeErrorKind::UnknownField { field, type_name } => {
                format!("line {line}: field {field} not found in type {type_name}")
            }
            DecodeErrorKind::DuplicateField { field, type_name } => {
                format!("line {line}: field {field} already set in type {type_name}")
            }
            DecodeErrorKind::DuplicateKey { key, first_line } => {
                format!("line {line}: mapping key {key:?} already defined at line {first_line}")
            }
            DecodeErrorKind::MissingField { field } => {
                format!("line {line}: missing field {field}")
            }
            DecodeErrorKind::BadTaggedValue {
                found_tag,
                value,
                tag,
            } => {
                format!("cannot decode {found_tag} `{value}` as a {tag}")
            }
            DecodeErrorKind::UnknownAnchor(name) => {
                format!("line {line}: unknown anchor '{name}' referenced")
            }
            DecodeErrorKind::ExcessiveAliasing => "document contains excessive aliasing".to_owned(),
            DecodeErrorKind::Custom(message) => format!("line {line}: {message}"),
        }
    }

    /// True for the errors go-yaml collects into a `TypeError` (printed
    /// under `yaml: unmarshal errors:`); the others are fatal `yaml: ...`
    /// errors.
    pub fn is_unmarshal_error(&self) -> bool {
        !matches!(
            self.kind,
            DecodeErrorKind::BadTaggedValue { .. }
                | DecodeErrorKind::UnknownAnchor(_)
                | DecodeErrorKind::ExcessiveAliasing
        )
    }
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_unmarshal_error() {
            write!(f, "yaml: unmarshal errors:\n  {}", self.problem())
        } else {
            write!(f, "yaml: {}", self.problem())
        }
    }
}

impl std::error::Error for DecodeError {}

impl de::Error for DecodeError {
    fn custom<T: fmt::Display>(msg: T) -> Self {
        DecodeError::new(DecodeErrorKind::Custom(msg.to_string()))
    }

    fn unknown_field(field: &str, _expected: &'static [&'static str]) -> Self {
        // The struct name is filled in by the struct's map access, which
        // knows it; serde's field visitor does not.
        DecodeError::new(DecodeErrorKind::UnknownField {
            field: field.to_owned(),
            type_name: String::new(),
        })
    }

    fn duplicate_field(field: &'static str) -> Self {
        DecodeError::new(DecodeErrorKind::DuplicateField {
            field: field.to_owned(),
            type_name: String::new(),
        })
    }

    fn missing_field(field: &'static str) -> Self {
        DecodeError::new(DecodeErrorKind::MissingField {
            field: field.to_owned(),
        })
    }
}

/// go-yaml shows at most 10 bytes of a scalar: longer values become their
/// first 7 bytes and `...`.
fn go_value_excerpt(value: &str) -> String {
    if value.len() > 10 {
        let mut end = 7;
        while !value.is_char_boundary(end) {
            end -= 1;
        }
        format!(" `{}...`", &value[..end])
    } else {
        format!(" `{value}`")
    }
}

/// Shared state of one decode: anchor targets and the alias budget.
struct Context<'de> {
    /// Alias node address → the anchored node it names.
    anchors: HashMap<*const Node, &'de Node>,
    budget: Cell<usize>,
}

/// Maps every alias node to its anchor: the latest anchor of that name whose
/// node is complete before the alias appears. Registering an anchor only
/// after its subtree makes self-containing anchors unresolvable, which rules
/// out cycles.
fn collect_anchors(root: &Node) -> HashMap<*const Node, &Node> {
    fn walk<'a>(
        node: &'a Node,
        defined: &mut HashMap<&'a str, &'a Node>,
        out: &mut HashMap<*const Node, &'a Node>,
    ) {
        if node.kind == NodeKind::Alias {
            if let Some(target) = defined.get(node.value.as_str()) {
                out.insert(node as *const Node, *target);
            }
            return;
        }
        for child in &node.content {
            walk(child, defined, out);
        }
        if !node.anchor().is_empty() {
            defined.insert(node.anchor(), node);
        }
    }
    let mut defined = HashMap::new();
    let mut out = HashMap::new();
    walk(root, &mut defined, &mut out);
    out
}

/// What a scalar means once go-yaml's resolver has looked at it.
enum Resolved<'de> {
    Null,
    Bool(bool),
    Int(i64),
    Uint(u64),
    Float(f64),
    /// Text: strings, timestamps and custom-tagged scalars.
    Str(&'de str),
}

/// go-yaml `Node.indicatedString`: tagged `!!str`, or untagged and quoted
/// or block.
fn indicated_string(node: &Node) -> bool {
    let quoted = Style::DOUBLE_QUOTED | Style::SINGLE_QUOTED | Style::LITERAL | Style::FOLDED;
    node.tag() == tag::STR
        || ((node.tag().is_empty() || node.tag() == "!") && node.style.bits() & quoted.bits() != 0)
}

fn resolve_scalar(node: &Node) -> Result<(String, Resolved<'_>), DecodeError> {
    if indicated_string(node) {
        return Ok((tag::STR.to_owned(), Resolved::Str(&node.value)));
    }
    let explicit = normalize_tag(node.tag());
    let resolvable = matches!(
        explicit.as_str(),
        "" | tag::STR | tag::BOOL | tag::INT | tag::FLOAT | tag::NULL | tag::TIMESTAMP
    );
    if !resolvable || explicit == tag::STR || explicit == tag::BINARY {
        return Ok((explicit, Resolved::Str(&node.value)));
    }
    let text = node.value.as_str();
    let found = resolve_plain(text);
    let value = resolved_value(found, text);
    if explicit.is_empty() || explicit == found {
        return Ok((found.to_owned(), value));
    }
    if explicit == tag::FLOAT {
        match value {
            Resolved::Int(i) => return Ok((explicit, Resolved::Float(i as f64))),
            Resolved::Uint(u) => return Ok((explicit, Resolved::Float(u as f64))),
            _ => {}
        }
    }
    // `!!timestamp` on text that is no timestamp, `!!int abc`, …
    Err(DecodeError::at(
        DecodeErrorKind::BadTaggedValue {
            found_tag: found.to_owned(),
            value: text.to_owned(),
            tag: explicit,
        },
        node,
    ))
}

/// Long-form core tags (`tag:yaml.org,2002:str`) as their `!!` short form.
fn normalize_tag(tag: &str) -> String {
    match tag.strip_prefix("tag:yaml.org,2002:") {
        Some(rest) => format!("!!{rest}"),
        None => tag.to_owned(),
    }
}

fn resolved_value<'de>(found: &str, text: &'de str) -> Resolved<'de> {
    match found {
        tag::NULL => Resolved::Null,
        tag::BOOL => Resolved::Bool(matches!(text, "true" | "True" | "TRUE")),
        tag::INT => {
            let plain: String = text.chars().filter(|&c| c != '_').collect();
            match parse_go_int(&plain) {
                Some(GoInt::Signed(i)) => Resolved::Int(i),
                Some(GoInt::Unsigned(u)) => Resolved::Uint(u),
                None => Resolved::Str(text),
            }
        }
        tag::FLOAT => parse_go_float(text).map_or(Resolved::Str(text), Resolved::Float),
        _ => Resolved::Str(text),
    }
}

enum GoInt {
    Signed(i64),
    Unsigned(u64),
}

/// Go's `strconv.ParseInt(s, 0, 64)`, falling back to `ParseUint(s, 0, 64)`.
fn parse_go_int(text: &str) -> Option<GoInt> {
    let (negative, unsigned) = match text.as_bytes().first()? {
        b'-' => (true, &text[1..]),
        b'+' => (false, &text[1..]),
        _ => (false, text),
    };
    let lower = unsigned.get(..2).map(str::to_ascii_lowercase);
    let (radix, digits) = match lower.as_deref() {
        Some("0x") => (16, &unsigned[2..]),
        Some("0o") => (8, &unsigned[2..]),
        Some("0b") => (2, &unsigned[2..]),
        _ if unsigned.len() > 1 && unsigned.starts_with('0') => (8, &unsigned[1..]),
        _ => (10, unsigned),
    };
    if digits.is_empty() || !digits.chars().all(|c| c.is_digit(radix)) {
        return None;
    }
    let magnitude = u64::from_str_radix(digits, radix).ok()?;
    if negative {
        if magnitude <= 1u64 << 63 {
            Some(GoInt::Signed((magnitude as i128).wrapping_neg() as i64))
        } else {
            None
        }
    } else if let Ok(signed) = i64::try_from(magnitude) {
        Some(GoInt::Signed(signed))
    } else {
        Some(GoInt::Unsigned(magnitude))
    }
}

fn parse_go_float(text: &str) -> Option<f64> {
    match text {
        ".inf" | ".Inf" | ".INF" | "+.inf" | "+.Inf" | "+.INF" => Some(f64::INFINITY),
        "-.inf" | "-.Inf" | "-.INF" => Some(f64::NEG_INFINITY),
        ".nan" | ".NaN" | ".NAN" => Some(f64::NAN),
        _ => {
            let plain: String = text.chars().filter(|&c| c != '_').collect();
            plain.parse::<f64>().ok().filter(|f| f.is_finite())
        }
    }
}

/// The deserializer for one node.
struct NodeDeserializer<'a, 'de> {
    node: &'de Node,
    ctx: &'a Context<'de>,
}

impl<'a, 'de> NodeDeserializer<'a, 'de> {
    /// Follows aliases to the anchored node, spending alias budget.
    fn target(&self) -> Result<&'de Node, DecodeError> {
        let mut node = self.node;
        let mut hops = 0;
        while node.kind == NodeKind::Alias {
            node = *self
                .ctx
                .anchors
                .get(&(node as *const Node))
                .ok_or_else(|| {
                    DecodeError::at(
                        DecodeErrorKind::UnknownAnchor(node.value.as_str().to_owned()),
                        node,
                    )
                })?;
            let cost = count_nodes(node);
            let left = self.ctx.budget.get();
            if cost > left || hops > 1000 {
                return Err(DecodeError::at(
                    DecodeErrorKind::ExcessiveAliasing,
                    self.node,
                ));
            }
            self.ctx.budget.set(left - cost);
            hops += 1;
        }
        Ok(node)
    }

    fn child(&self, node: &'de Node) -> NodeDeserializer<'a, 'de> {
        NodeDeserializer {
            node,
            ctx: self.ctx,
        }
    }

    fn mismatch(node: &Node, expected: &str) -> DecodeError {
        let found_tag = if node.tag().is_empty() {
            match node.kind {
                NodeKind::Mapping => tag::MAP.to_owned(),
                NodeKind::Sequence => tag::SEQ.to_owned(),
                _ => resolve_plain(&node.value).to_owned(),
            }
        } else {
            normalize_tag(node.tag())
        };
        let value = (node.kind == NodeKind::Scalar).then(|| node.value.as_str().to_owned());
        DecodeError::at(
            DecodeErrorKind::TypeMismatch {
                found_tag,
                value,
                expected: expected.to_owned(),
            },
            node,
        )
    }

    /// A scalar's resolved meaning; a type error naming `expected` for
    /// collections.
    fn scalar(&self, expected: &str) -> Result<(&'de Node, Resolved<'de>), DecodeError> {
        let node = self.target()?;
        match node.kind {
            NodeKind::Scalar => {
                let (_, resolved) = resolve_scalar(node)?;
                Ok((node, resolved))
            }
            _ => Err(Self::mismatch(node, expected)),
        }
    }

    fn signed<V: Visitor<'de>>(
        self,
        visitor: V,
        expected: &str,
        min: i64,
        max: i64,
    ) -> Result<V::Value, DecodeError> {
        let (node, resolved) = self.scalar(expected)?;
        let value = match resolved {
            Resolved::Null => Some(0),
            Resolved::Int(i) => Some(i),
            Resolved::Uint(u) => i64::try_from(u).ok(),
            // go-yaml truncates floats that fit.
            Resolved::Float(f) if f.is_finite() && f <= i64::MAX as f64 && f >= i64::MIN as f64 => {
                Some(f as i64)
            }
            _ => None,
        };
        match value.filter(|v| (min..=max).contains(v)) {
            Some(v) => visitor
                .visit_i64(v)
                .map_err(|e: DecodeError| e.located_at(node)),
            None => Err(Self::mismatch(node, expected)),
        }
    }

    fn unsigned<V: Visitor<'de>>(
        self,
        visitor: V,
        expected: &str,
        max: u64,
    ) -> Result<V::Value, DecodeError> {
        let (node, resolved) = self.scalar(expected)?;
        let value = match resolved {
            Resolved::Null => Some(0),
            Resolved::Int(i) => u64::try_from(i).ok(),
            Resolved::Uint(u) => Some(u),
            Resolved::Float(f) if f.is_finite() && f >= 0.0 && f <= u64::MAX as f64 => {
                Some(f as u64)
            }
            _ => None,
        };
        match value.filter(|v| *v <= max) {
            Some(v) => visitor
                .visit_u64(v)
                .map_err(|e: DecodeError| e.located_at(node)),
            None => Err(Self::mismatch(node, expected)),
        }
    }

    fn float<V: Visitor<'de>>(self, visitor: V, expected: &str) -> Result<V::Value, DecodeError> {
        let (node, resolved) = self.scalar(expected)?;
        let value = match resolved {
            Resolved::Null => Some(0.0),
            Resolved::Int(i) => Some(i as f64),
            Resolved::Uint(u) => Some(u as f64),
            Resolved::Float(f) => Some(f),
            _ => None,
        };
        match value {
            Some(v) => visitor
                .visit_f64(v)
                .map_err(|e: DecodeError| e.located_at(node)),
            None => Err(Self::mismatch(node, expected)),
        }
    }

    /// The (key, value) pairs of a mapping with merge keys expanded:
    /// explicit keys first, then merged keys not already present (the first
    /// merge source wins). Duplicate explicit keys are reported when
    /// `report_duplicates` (plain maps; structs report them per field).
    fn entries(
        &self,
        node: &'de Node,
        report_duplicates: bool,
    ) -> Result<Vec<(&'de Node, &'de Node)>, DecodeError> {
        let mut explicit = Vec::new();
        let mut merges = Vec::new();
        for (key, value) in node.pairs() {
            if is_merge_key(key) {
                merges.push(value);
            } else {
                explicit.push((key, value));
            }
        }
        if report_duplicates {
            for (i, (first, _)) in explicit.iter().enumerate() {
                if let Some((dup, _)) = explicit[i + 1..]
                    .iter()
                    .find(|(other, _)| other.kind == first.kind && other.value == first.value)
                {
                    return Err(DecodeError::at(
                        DecodeErrorKind::DuplicateKey {
                            key: dup.value.as_str().to_owned(),
                            first_line: first.line as usize,
                        },
                        dup,
                    ));
                }
            }
        }
        let mut entries = explicit;
        for merge in merges {
            let source = self.child(merge).target()?;
            let sources: Vec<&'de Node> = match source.kind {
                NodeKind::Mapping => vec![source],
                NodeKind::Sequence => {
                    let mut maps = Vec::new();
                    for item in &source.content {
                        let item = self.child(item).target()?;
                        if item.kind != NodeKind::Mapping {
                            return Err(DecodeError::at(
                                DecodeErrorKind::Custom(
                                    "map merge requires map or sequence of maps as the value"
                                        .to_owned(),
                                ),
                                item,
                            ));
                        }
                        maps.push(item);
                    }
                    maps
                }
                _ => {
                    return Err(DecodeError::at(
                        DecodeErrorKind::Custom(
                            "map merge requires map or sequence of maps as the value".to_owned(),
                        ),
                        source,
                    ));
                }
            };
            for map in sources {
                for (key, value) in self.entries(map, false)? {
                    let present = entries.iter().any(|(existing, _)| {
                        existing.kind == key.kind && existing.value == key.value
                    });
                    if !present {
                        entries.push((key, value));
                    }
                }
            }
        }
        Ok(entries)
    }
}

fn count_nodes(node: &Node) -> usize {
    1 + node.content.iter().map(count_nodes).sum::<usize>()
}

/// go-yaml `isMerge`: a plain `<<` key with no tag other than `!!merge`.
fn is_merge_key(key: &Node) -> bool {
    key.kind == NodeKind::Scalar
        && key.value == "<<"
        && (key.tag().is_empty() || key.tag() == "!" || key.tag() == tag::MERGE)
        && !key.style.contains(Style::DOUBLE_QUOTED)
        && !key.style.contains(Style::SINGLE_QUOTED)
}

impl<'de> de::Deserializer<'de> for NodeDeserializer<'_, 'de> {
    type Error = DecodeError;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DecodeError> {
        let node = self.target()?;
        match node.kind {
            NodeKind::Scalar => {
                let (_, resolved) = resolve_scalar(node)?;
                let result = match resolved {
                    Resolved::Null => visitor.visit_unit(),
                    Resolved::Bool(b) => visitor.visit_bool(b),
                    Resolved::Int(i) => visitor.visit_i64(i),
                    Resolved::Uint(u) => visitor.visit_u64(u),
                    Resolved::Float(f) => visitor.visit_f64(f),
                    Resolved::Str(s) => visitor.visit_borrowed_str(s),
                };
                result.map_err(|e: DecodeError| e.located_at(node))
            }
            NodeKind::Mapping => {
                let entries = self.entries(node, true)?;
                let mut access = Entries::new(self.ctx, entries, None);
                let value = visitor
                    .visit_map(&mut access)
                    .map_err(|e| access.locate(e, node))?;
                Ok(value)
            }
            NodeKind::Sequence => {
                let mut access = Items {
                    ctx: self.ctx,
                    items: node.content.iter(),
                };
                visitor
                    .visit_seq(&mut access)
                    .map_err(|e: DecodeError| e.located_at(node))
            }
            NodeKind::Document => self.child(node.root()).deserialize_any(visitor),
            NodeKind::Alias => Err(DecodeError::at(
                DecodeErrorKind::UnknownAnchor(node.value.as_str().to_owned()),
                node,
            )),
        }
    }

    fn deserialize_bool<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DecodeError> {
        let (node, resolved) = self.scalar("bool")?;
        let value = match resolved {
            Resolved::Null => Some(false),
            Resolved::Bool(b) => Some(b),
            // YAML 1.1 booleans are accepted only when decoding into a bool.
            Resolved::Str(s) => match s {
                "y" | "Y" | "yes" | "Yes" | "YES" | "on" | "On" | "ON" => Some(true),
                "n" | "N" | "no" | "No" | "NO" | "off" | "Off" | "OFF" => Some(false),
                _ => None,
            },
            _ => None,
        };
        match value {
            Some(b) => visitor
                .visit_bool(b)
                .map_err(|e: DecodeError| e.located_at(node)),
            None => Err(Self::mismatch(node, "bool")),
        }
    }

    fn deserialize_i8<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DecodeError> {
        self.signed(visitor, "int8", i64::from(i8::MIN), i64::from(i8::MAX))
    }

    fn deserialize_i16<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DecodeError> {
        self.signed(visitor, "int16", i64::from(i16::MIN), i64::from(i16::MAX))
    }

    fn deserialize_i32<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DecodeError> {
        self.signed(visitor, "int32", i64::from(i32::MIN), i64::from(i32::MAX))
    }

    fn deserialize_i64<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DecodeError> {
        self.signed(visitor, "int64", i64::MIN, i64::MAX)
    }

    fn deserialize_u8<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DecodeError> {
        self.unsigned(visitor, "uint8", u64::from(u8::MAX))
    }

    fn deserialize_u16<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DecodeError> {
        self.unsigned(visitor, "uint16", u64::from(u16::MAX))
    }

    fn deserialize_u32<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DecodeError> {
        self.unsigned(visitor, "uint32", u64::from(u32::MAX))
    }

    fn deserialize_u64<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DecodeError> {
        self.unsigned(visitor, "uint64", u64::MAX)
    }

    fn deserialize_f32<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DecodeError> {
        self.float(visitor, "float32")
    }

    fn deserialize_f64<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DecodeError> {
        self.float(visitor, "float64")
    }

    fn deserialize_char<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DecodeError> {
        let (node, _) = self.scalar("int32")?;
        let mut chars = node.value.chars();
        match (chars.next(), chars.next()) {
            (Some(c), None) => visitor
                .visit_char(c)
                .map_err(|e: DecodeError| e.located_at(node)),
            _ => Err(Self::mismatch(node, "int32")),
        }
    }

    fn deserialize_str<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DecodeError> {
        let (node, resolved) = self.scalar("string")?;
        // Any scalar decodes into a string as its text; null as "".
        let text = match resolved {
            Resolved::Null => "",
            _ => node.value.as_str(),
        };
        visitor
            .visit_borrowed_str(text)
            .map_err(|e: DecodeError| e.located_at(node))
    }

    fn deserialize_string<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DecodeError> {
        self.deserialize_str(visitor)
    }

    fn deserialize_bytes<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DecodeError> {
        let (node, resolved) = self.scalar("[]uint8")?;
        let text = match resolved {
            Resolved::Null => "",
            _ => node.value.as_str(),
        };
        visitor
            .visit_borrowed_bytes(text.as_bytes())
            .map_err(|e: DecodeError| e.located_at(node))
    }

    fn deserialize_byte_buf<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DecodeError> {
        self.deserialize_bytes(visitor)
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DecodeError> {
        let node = self.target()?;
        if node.kind == NodeKind::Scalar
            && let (_, Resolved::Null) = resolve_scalar(node)?
        {
            return visitor
                .visit_none()
                .map_err(|e: DecodeError| e.located_at(node));
        }
        visitor.visit_some(self.child(node))
    }

    fn deserialize_unit<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DecodeError> {
        let (node, resolved) = self.scalar("struct {}")?;
        match resolved {
            Resolved::Null => visitor
                .visit_unit()
                .map_err(|e: DecodeError| e.located_at(node)),
            _ => Err(Self::mismatch(node, "struct {}")),
        }
    }

    fn deserialize_unit_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value, DecodeError> {
        self.deserialize_unit(visitor)
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value, DecodeError> {
        visitor.visit_newtype_struct(self)
    }

    fn deserialize_seq<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DecodeError> {
        let node = self.target()?;
        match node.kind {
            NodeKind::Sequence => {
                let mut access = Items {
                    ctx: self.ctx,
                    items: node.content.iter(),
                };
                visitor
                    .visit_seq(&mut access)
                    .map_err(|e: DecodeError| e.located_at(node))
            }
            NodeKind::Scalar if matches!(resolve_scalar(node)?, (_, Resolved::Null)) => {
                let mut access = Items {
                    ctx: self.ctx,
                    items: [].iter(),
                };
                visitor
                    .visit_seq(&mut access)
                    .map_err(|e: DecodeError| e.located_at(node))
            }
            _ => Err(Self::mismatch(node, "[]interface {}")),
        }
    }

    fn deserialize_tuple<V: Visitor<'de>>(
        self,
        _len: usize,
        visitor: V,
    ) -> Result<V::Value, DecodeError> {
        self.deserialize_seq(visitor)
    }

    fn deserialize_tuple_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _len: usize,
        visitor: V,
    ) -> Result<V::Value, DecodeError> {
        self.deserialize_seq(visitor)
    }

    fn deserialize_map<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DecodeError> {
        let node = self.target()?;
        match node.kind {
            NodeKind::Mapping => {
                let entries = self.entries(node, true)?;
                let mut access = Entries::new(self.ctx, entries, None);
                visitor
                    .visit_map(&mut access)
                    .map_err(|e| access.locate(e, node))
            }
            NodeKind::Scalar if matches!(resolve_scalar(node)?, (_, Resolved::Null)) => {
                let mut access = Entries::new(self.ctx, Vec::new(), None);
                visitor
                    .visit_map(&mut access)
                    .map_err(|e: DecodeError| e.located_at(node))
            }
            _ => Err(Self::mismatch(node, "map[string]interface {}")),
        }
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        _fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, DecodeError> {
        let node = self.target()?;
        match node.kind {
            NodeKind::Mapping => {
                let entries = self.entries(node, false)?;
                let mut access = Entries::new(self.ctx, entries, Some(name));
                visitor
                    .visit_map(&mut access)
                    .map_err(|e| access.locate(e, node))
            }
            // A null struct is Go's zero value: decode it from no fields.
            NodeKind::Scalar if matches!(resolve_scalar(node)?, (_, Resolved::Null)) => {
                let mut access = Entries::new(self.ctx, Vec::new(), Some(name));
                visitor
                    .visit_map(&mut access)
                    .map_err(|e| access.locate(e, node))
            }
            _ => Err(Self::mismatch(node, name)),
        }
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        name: &'static str,
        _variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, DecodeError> {
        let node = self.target()?;
        match node.kind {
            NodeKind::Scalar => visitor
                .visit_enum(node.value.as_str().into_deserializer())
                .map_err(|e: DecodeError| e.located_at(node)),
            NodeKind::Mapping if node.content.len() == 2 => {
                let access = Variant {
                    ctx: self.ctx,
                    key: &node.content[0],
                    value: &node.content[1],
                };
                visitor
                    .visit_enum(access)
                    .map_err(|e: DecodeError| e.located_at(node))
            }
            _ => Err(Self::mismatch(node, name)),
        }
    }

    fn deserialize_identifier<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DecodeError> {
        self.deserialize_str(visitor)
    }

    fn deserialize_ignored_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DecodeError> {
        visitor.visit_unit()
    }
}

/// Sequence items.
struct Items<'a, 'de> {
    ctx: &'a Context<'de>,
    items: std::slice::Iter<'de, Node>,
}

impl<'de> SeqAccess<'de> for Items<'_, 'de> {
    type Error = DecodeError;

    fn next_element_seed<T: DeserializeSeed<'de>>(
        &mut self,
        seed: T,
    ) -> Result<Option<T::Value>, DecodeError> {
        match self.items.next() {
            Some(item) => seed
                .deserialize(NodeDeserializer {
                    node: item,
                    ctx: self.ctx,
                })
                .map(Some)
                .map_err(|e| e.located_at(item)),
            None => Ok(None),
        }
    }

    fn size_hint(&self) -> Option<usize> {
        Some(self.items.len())
    }
}

/// Mapping entries; `struct_name` is set when decoding a struct, so field
/// errors can name it.
struct Entries<'a, 'de> {
    ctx: &'a Context<'de>,
    entries: std::vec::IntoIter<(&'de Node, &'de Node)>,
    struct_name: Option<&'static str>,
    /// The key returned by the last `next_key_seed` call.
    last_key: Option<&'de Node>,
    /// The value that goes with `last_key`.
    pending_value: Option<&'de Node>,
}

impl<'a, 'de> Entries<'a, 'de> {
    fn new(
        ctx: &'a Context<'de>,
        entries: Vec<(&'de Node, &'de Node)>,
        struct_name: Option<&'static str>,
    ) -> Entries<'a, 'de> {
        Entries {
            ctx,
            entries: entries.into_iter(),
            struct_name,
            last_key: None,
            pending_value: None,
        }
    }

    /// Completes an error that left the struct's visitor: field errors get
    /// the struct name and the key's line, the rest the mapping's position.
    fn locate(&self, mut error: DecodeError, mapping: &Node) -> DecodeError {
        if let Some(name) = self.struct_name {
            match &mut error.kind {
                DecodeErrorKind::UnknownField { type_name, .. }
                | DecodeErrorKind::DuplicateField { type_name, .. }
                    if type_name.is_empty() =>
                {
                    *type_name = name.to_owned();
                }
                _ => {}
            }
        }
        let at_key = matches!(error.kind, DecodeErrorKind::DuplicateField { .. });
        match self.last_key {
            Some(key) if at_key => error.located_at(key),
            _ => error.located_at(mapping),
        }
    }
}

impl<'de> MapAccess<'de> for Entries<'_, 'de> {
    type Error = DecodeError;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, DecodeError> {
        let Some((key, value)) = self.entries.next() else {
            return Ok(None);
        };
        self.last_key = Some(key);
        self.pending_value = Some(value);
        let decoded = seed.deserialize(NodeDeserializer {
            node: key,
            ctx: self.ctx,
        });
        match decoded {
            Ok(k) => Ok(Some(k)),
            Err(mut error) => {
                if let (Some(name), DecodeErrorKind::UnknownField { type_name, .. }) =
                    (self.struct_name, &mut error.kind)
                    && type_name.is_empty()
                {
                    *type_name = name.to_owned();
                }
                Err(error.located_at(key))
            }
        }
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(
        &mut self,
        seed: V,
    ) -> Result<V::Value, DecodeError> {
        let Some(value) = self.pending_value.take() else {
            return Err(DecodeError::new(DecodeErrorKind::Custom(
                "value requested before key".to_owned(),
            )));
        };
        seed.deserialize(NodeDeserializer {
            node: value,
            ctx: self.ctx,
        })
        .map_err(|e| e.located_at(value))
    }

    fn size_hint(&self) -> Option<usize> {
        Some(self.entries.len())
    }
}

/// An externally tagged enum written as a one-entry mapping.
struct Variant<'a, 'de> {
    ctx: &'a Context<'de>,
    key: &'de Node,
    value: &'de Node,
}

impl<'a, 'de> EnumAccess<'de> for Variant<'a, 'de> {
    type Error = DecodeError;
    type Variant = NodeDeserializer<'a, 'de>;

    fn variant_seed<S: DeserializeSeed<'de>>(
        self,
        seed: S,
    ) -> Result<(S::Value, Self::Variant), DecodeError> {
        let tag = seed
            .deserialize(NodeDeserializer {
                node: self.key,
                ctx: self.ctx,
            })
            .map_err(|e| e.located_at(self.key))?;
        Ok((
            tag,
            NodeDeserializer {
                node: self.value,
                ctx: self.ctx,
            },
        ))
    }
}

impl<'de> VariantAccess<'de> for NodeDeserializer<'_, 'de> {
    type Error = DecodeError;

    fn unit_variant(self) -> Result<(), DecodeError> {
        de::Deserialize::deserialize(self)
    }

    fn newtype_variant_seed<T: DeserializeSeed<'de>>(
        self,
        seed: T,
    ) -> Result<T::Value, DecodeError> {
        seed.deserialize(self)
    }

    fn tuple_variant<V: Visitor<'de>>(
        self,
        _len: usize,
        visitor: V,
    ) -> Result<V::Value, DecodeError> {
        de::Deserializer::deserialize_seq(self, visitor)
    }

    fn struct_variant<V: Visitor<'de>>(
        self,
        fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, DecodeError> {
        de::Deserializer::deserialize_struct(self, "", fields, visitor)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use serde::Deserialize;

    use super::{DecodeErrorKind, from_node};
    use crate::yaml::node::{Node, Style, tag};
    use crate::yaml::resolve::resolve_plain;

    /// A plain scalar tagged as the parser tags it, on `line`.
    fn plain(value: &str, line: u32) -> Node {
        let mut node = Node::new_scalar(resolve_plain(value), value);
        node.line = line;
        node.column = 1;
        node
    }

    fn quoted(value: &str, line: u32) -> Node {
        let mut node = Node::new_scalar(tag::STR, value);
        node.style = Style::DOUBLE_QUOTED;
        node.line = line;
        node
    }

    fn mapping(line: u32, pairs: Vec<(Node, Node)>) -> Node {
        let mut node = Node::new_mapping();
        node.line = line;
        for (key, value) in pairs {
            node.content.push(key);
            node.content.push(value);
        }
        node
    }

    fn sequence(line: u32, items: Vec<Node>) -> Node {
        let mut node = Node::new_sequence();
        node.line = line;
        node.content = items.into();
        node
    }

    fn key(name: &str, line: u32) -> Node {
        plain(name, line)
    }

    #[derive(Debug, Deserialize, PartialEq)]
    #[serde(deny_unknown_fields)]
    #[serde(rename = "v1.Function")]
    struct Function {
        #[serde(default)]
        image: String,
        #[serde(default, rename = "configMap")]
        config_map: BTreeMap<String, String>,
    }

    #[derive(Debug, Deserialize, PartialEq)]
    struct Loose {
        #[serde(default)]
        name: String,
        #[serde(default)]
        count: i32,
        #[serde(default)]
        enabled: bool,
        #[serde(default)]
        tags: Vec<String>,
        #[serde(default)]
        note: Option<String>,
    }

    #[test]
    fn scalars_decode_into_strings_as_text() {
        let doc = mapping(
            1,
            vec![
                (key("name", 1), plain("true", 1)),
                (key("note", 2), plain("1.0", 2)),
                (
                    key("tags", 3),
                    sequence(3, vec![plain("0777", 3), plain("~", 4), quoted("x", 5)]),
                ),
            ],
        );
        let loose: Loose = from_node(&Node::new_document(doc)).unwrap();
        assert_eq!(loose.name, "true");
        assert_eq!(loose.note.as_deref(), Some("1.0"));
        assert_eq!(
            loose.tags,
            vec!["0777".to_owned(), String::new(), "x".to_owned()]
        );
    }

    #[test]
    fn nulls_are_zero_values() {
        let doc = mapping(
            1,
            vec![
                (key("name", 1), plain("", 1)),
                (key("count", 2), plain("null", 2)),
                (key("enabled", 3), plain("~", 3)),
                (key("tags", 4), plain("", 4)),
                (key("note", 5), plain("", 5)),
            ],
        );
        let loose: Loose = from_node(&doc).unwrap();
        assert_eq!(
            loose,
            Loose {
                name: String::new(),
                count: 0,
                enabled: false,
                tags: vec![],
                note: None
            }
        );
    }

    #[test]
    fn map_into_string_is_a_type_error() {
        let doc = mapping(
            9,
            vec![(
                key("image", 9),
                mapping(10, vec![(key("a", 10), plain("b", 10))]),
            )],
        );
        let error = from_node::<Function>(&doc).unwrap_err();
        assert_eq!(error.line, 10);
        assert_eq!(
            error.to_string(),
            "yaml: unmarshal errors:\n  line 10: cannot unmarshal !!map into string"
        );
        assert!(matches!(
            &error.kind,
            DecodeErrorKind::TypeMismatch { found_tag, value: None, expected }
                if found_tag == "!!map" && expected == "string"
        ));
    }

    #[test]
    fn seq_in_string_map_is_a_type_error() {
        let config = mapping(13, vec![(key("k", 13), sequence(14, vec![plain("a", 14)]))]);
        let doc = mapping(12, vec![(key("configMap", 12), config)]);
        let error = from_node::<Function>(&doc).unwrap_err();
        assert_eq!(
            error.problem(),
            "line 14: cannot unmarshal !!seq into string"
        );
    }

    #[test]
    fn strict_mode_reports_unknown_fields_at_the_key() {
        let doc = mapping(
            12,
            vec![
                (key("image", 12), plain("x", 12)),
                (key("targetResources", 13), plain("y", 13)),
            ],
        );
        let error = from_node::<Function>(&doc).unwrap_err();
        assert_eq!(
            error.to_string(),
            "yaml: unmarshal errors:\n  line 13: field targetResources not found in type v1.Function"
        );
        assert!(matches!(
            &error.kind,
            DecodeErrorKind::UnknownField { field, type_name }
                if field == "targetResources" && type_name == "v1.Function"
        ));
    }

    #[test]
    fn non_strict_types_ignore_unknown_fields() {
        let doc = mapping(
            1,
            vec![
                (key("other", 1), mapping(2, vec![])),
                (key("name", 3), plain("n", 3)),
            ],
        );
        let loose: Loose = from_node(&doc).unwrap();
        assert_eq!(loose.name, "n");
    }

    #[test]
    fn duplicate_struct_field() {
        let doc = mapping(
            1,
            vec![
                (key("image", 1), plain("a", 1)),
                (key("image", 2), plain("b", 2)),
            ],
        );
        let error = from_node::<Function>(&doc).unwrap_err();
        assert_eq!(
            error.problem(),
            "line 2: field image already set in type v1.Function"
        );
    }

    #[test]
    fn duplicate_map_key() {
        let doc = mapping(
            1,
            vec![(key("a", 1), plain("1", 1)), (key("a", 3), plain("2", 3))],
        );
        let error = from_node::<BTreeMap<String, String>>(&doc).unwrap_err();
        assert_eq!(
            error.problem(),
            "line 3: mapping key \"a\" already defined at line 1"
        );
    }

    #[test]
    fn integers_follow_go_rules() {
        let cases = [
            ("0x10", 16),
            ("0777", 511),
            ("0o17", 15),
            ("0b101", 5),
            ("1_000", 1000),
            ("-12", -12),
            ("1.9", 1),
            ("", 0),
        ];
        for (text, expected) in cases {
            let value: i64 = from_node(&plain(text, 1)).unwrap();
            assert_eq!(value, expected, "decoding {text:?}");
        }
        let error = from_node::<i32>(&plain("abc", 4)).unwrap_err();
        assert_eq!(
            error.problem(),
            "line 4: cannot unmarshal !!str `abc` into int32"
        );
        let error = from_node::<i8>(&plain("300", 4)).unwrap_err();
        assert_eq!(
            error.problem(),
            "line 4: cannot unmarshal !!int `300` into int8"
        );
        let error = from_node::<u32>(&plain("-1", 4)).unwrap_err();
        assert_eq!(
            error.problem(),
            "line 4: cannot unmarshal !!int `-1` into uint32"
        );
        let error = from_node::<i64>(&quoted("a long string value", 2)).unwrap_err();
        assert_eq!(
            error.problem(),
            "line 2: cannot unmarshal !!str `a long ...` into int64"
        );
    }

    #[test]
    fn floats() {
        let value: f64 = from_node(&plain("1e3", 1)).unwrap();
        assert_eq!(value, 1000.0);
        let value: f64 = from_node(&plain("7", 1)).unwrap();
        assert_eq!(value, 7.0);
        let value: f64 = from_node(&plain("-.inf", 1)).unwrap();
        assert_eq!(value, f64::NEG_INFINITY);
    }

    #[test]
    fn booleans_accept_yaml_1_1_words() {
        for (text, expected) in [
            ("true", true),
            ("False", false),
            ("yes", true),
            ("off", false),
        ] {
            let value: bool = from_node(&plain(text, 1)).unwrap();
            assert_eq!(value, expected, "decoding {text:?}");
        }
        let value: bool = from_node(&quoted("yes", 1)).unwrap();
        assert!(value);
        let error = from_node::<bool>(&plain("maybe", 5)).unwrap_err();
        assert_eq!(
            error.problem(),
            "line 5: cannot unmarshal !!str `maybe` into bool"
        );
    }

    #[test]
    fn scalar_into_struct_and_sequence() {
        let error = from_node::<Function>(&plain("abc", 3)).unwrap_err();
        assert_eq!(
            error.problem(),
            "line 3: cannot unmarshal !!str `abc` into v1.Function"
        );
        let error = from_node::<Vec<String>>(&mapping(2, vec![])).unwrap_err();
        assert_eq!(
            error.problem(),
            "line 2: cannot unmarshal !!map into []interface {}"
        );
    }

    #[test]
    fn aliases_and_merge_keys() {
        let mut base = mapping(
            2,
            vec![
                (key("name", 2), plain("base", 2)),
                (key("count", 3), plain("3", 3)),
            ],
        );
        base.set_anchor("b");
        let mut alias = Node::new_scalar("", "b");
        alias.kind = crate::yaml::node::NodeKind::Alias;
        let mut merge_key = key("<<", 5);
        merge_key.set_tag(tag::MERGE);
        let merged = mapping(
            5,
            vec![
                (merge_key, alias.clone()),
                (key("name", 6), plain("own", 6)),
            ],
        );
        let doc = mapping(
            1,
            vec![
                (key("base", 1), base),
                (key("copy", 4), alias),
                (key("merged", 5), merged),
            ],
        );
        let all: BTreeMap<String, Loose> = from_node(&doc).unwrap();
        assert_eq!(all["copy"].name, "base");
        assert_eq!(all["merged"].name, "own");
        assert_eq!(all["merged"].count, 3);
    }

    #[test]
    fn unknown_anchor() {
        let mut alias = Node::new_scalar("", "nope");
        alias.kind = crate::yaml::node::NodeKind::Alias;
        alias.line = 7;
        let error = from_node::<String>(&alias).unwrap_err();
        assert_eq!(
            error.to_string(),
            "yaml: line 7: unknown anchor 'nope' referenced"
        );
    }

    #[test]
    fn explicit_tags_must_fit_the_text() {
        let mut node = Node::new_scalar(tag::INT, "abc");
        node.style = Style::TAGGED;
        let error = from_node::<String>(&node).unwrap_err();
        assert_eq!(
            error.to_string(),
            "yaml: cannot decode !!str `abc` as a !!int"
        );
        let mut node = Node::new_scalar(tag::STR, "123");
        node.style = Style::TAGGED;
        assert_eq!(from_node::<String>(&node).unwrap(), "123");
        let mut node = Node::new_scalar(tag::FLOAT, "3");
        node.style = Style::TAGGED;
        assert_eq!(from_node::<f64>(&node).unwrap(), 3.0);
    }

    #[test]
    fn enums() {
        #[derive(Debug, Deserialize, PartialEq)]
        enum Mode {
            Fast,
            Slow(u32),
        }
        assert_eq!(from_node::<Mode>(&plain("Fast", 1)).unwrap(), Mode::Fast);
        let doc = mapping(1, vec![(key("Slow", 1), plain("3", 1))]);
        assert_eq!(from_node::<Mode>(&doc).unwrap(), Mode::Slow(3));
        let error = from_node::<Mode>(&plain("Medium", 4)).unwrap_err();
        assert_eq!(error.line, 4);
    }

    #[test]
    fn missing_required_field() {
        #[derive(Debug, Deserialize)]
        struct Needs {
            #[allow(dead_code)]
            name: String,
        }
        let error = from_node::<Needs>(&mapping(6, vec![])).unwrap_err();
        assert_eq!(error.problem(), "line 6: missing field name");
    }
}
