//! The plain value model layering works on: null, bool, int, float, string,
//! sequence and insertion-ordered mapping, converted from and back to
//! [`yaml::Node`](crate::yaml::Node).
//!
//! Deckhand manipulates Python objects decoded by PyYAML; this enum is our
//! equivalent. Two Python behaviours leak into rendering and are modelled
//! here: equality where `1 == 1.0 == True` ([`Value::py_eq`], used by label
//! matching and the value-based delete), and `str()` of a value
//! ([`Value::python_str`], used when a non-string is substituted into a string
//! with `dest.pattern`).

use std::collections::HashMap;

use crate::yaml::alias::AliasBudget;
use std::fmt::Write as _;
use std::hash::{BuildHasherDefault, Hash, Hasher};

use indexmap::{Equivalent, IndexMap};

use super::yaml11;
use crate::yaml::node::tag;
use crate::yaml::resolve::resolve_plain;
use crate::yaml::{Node, NodeKind, Style};

/// A mapping: keys in insertion order, as Python dicts keep them. Hashed
/// with [`KeyHasher`]: keys are short and not attacker-chosen in a way that
/// matters for a one-shot render, and SipHash showed up in profiles.
pub type Map = IndexMap<Key, Value, BuildHasherDefault<KeyHasher>>;

/// FNV-1a over the key text: cheap for the short keys documents have.
#[derive(Clone, Copy, Debug)]
pub struct KeyHasher(u64);

impl Default for KeyHasher {
    fn default() -> KeyHasher {
        KeyHasher(0xcbf2_9ce4_8422_2325)
    }
}

impl Hasher for KeyHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &byte in bytes {
            self.0 = (self.0 ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3);
        }
    }
}

/// A borrowed string key for lookups without allocating a [`Key`]; hashes
/// exactly as the equal [`Key::Str`] does.
#[derive(Debug)]
pub(crate) struct StrKey<'a>(pub(crate) &'a str);

impl Hash for StrKey<'_> {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.0.hash(state);
    }
}

impl Equivalent<Key> for StrKey<'_> {
    fn equivalent(&self, key: &Key) -> bool {
        matches!(key, Key::Str(text) if text == self.0)
    }
}

/// A mapping key. Almost every key is a string; other scalar keys keep their
/// tag and text so they are written back as they were read.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Key {
    /// A string key.
    Str(String),
    /// A non-string scalar key (`1:`, `true:`), with its resolved tag.
    Scalar {
        /// The resolved tag, e.g. `!!int`.
        tag: String,
        /// The key's text.
        text: String,
    },
}

/// Hashes the text only (a `Str` and a `Scalar` with the same text collide
/// harmlessly), so that `StrKey` lookups agree with it.
impl Hash for Key {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.text().hash(state);
    }
}

impl Key {
    /// A string key.
    pub fn str(text: impl Into<String>) -> Key {
        Key::Str(text.into())
    }

    /// The key's text, whatever its type.
    pub fn text(&self) -> &str {
        match self {
            Key::Str(text) | Key::Scalar { text, .. } => text,
        }
    }
}

/// A decoded YAML value. Cloning copies the whole tree (the independent-copy
/// semantics of Deckhand's `src.deepcopy: true`).
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    /// `null` / `~` / empty.
    Null,
    /// `true` / `false`.
    Bool(bool),
    /// An integer. `i128` holds every value go-yaml accepts (i64 and u64).
    Int(i128),
    /// A float, including infinities and NaN.
    Float(f64),
    /// A string.
    Str(String),
    /// A scalar of any other tag (`!!timestamp`, `!!binary`, custom tags),
    /// kept as text with its tag.
    Tagged {
        /// The tag, e.g. `!!timestamp`.
        tag: String,
        /// The scalar text.
        text: String,
    },
    /// A sequence.
    Seq(Vec<Value>),
    /// A mapping.
    Map(Map),
}

impl Value {
    /// An empty mapping.
    pub fn empty_map() -> Value {
        Value::Map(Map::default())
    }

    /// The mapping, if this is one.
    pub fn as_map(&self) -> Option<&Map> {
        match self {
            Value::Map(map) => Some(map),
            _ => None,
        }
    }

    /// The string, if this is one.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::Str(text) => Some(text),
            _ => None,
        }
    }

    /// True for [`Value::Null`].
    pub fn is_null(&self) -> bool {
        matches!(self, Value::Null)
    }

    /// The value under string key `key`, if this is a mapping holding it.
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.as_map()?.get(&StrKey(key))
    }

    /// Follows string keys.
    pub fn get_path(&self, keys: &[&str]) -> Option<&Value> {
        keys.iter().try_fold(self, |value, key| value.get(key))
    }

    /// A short name of the value's type, for messages.
    pub fn type_name(&self) -> &'static str {
        match self {
            Value::Null => "null",
            Value::Bool(_) => "bool",
            Value::Int(_) => "int",
            Value::Float(_) => "float",
            Value::Str(_) => "string",
            Value::Tagged { .. } => "tagged scalar",
            Value::Seq(_) => "list",
            Value::Map(_) => "mapping",
        }
    }

    /// Python's `==` on the values PyYAML would produce: numbers compare by
    /// value across bool/int/float (`True == 1 == 1.0`), mappings ignore key
    /// order, everything else compares by type and content.
    pub fn py_eq(&self, other: &Value) -> bool {
        match (self, other) {
            (Value::Null, Value::Null) => true,
            (Value::Str(a), Value::Str(b)) => a == b,
            (Value::Tagged { tag: ta, text: xa }, Value::Tagged { tag: tb, text: xb }) => {
                ta == tb && xa == xb
            }
            (Value::Seq(a), Value::Seq(b)) => {
                a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.py_eq(y))
            }
            (Value::Map(a), Value::Map(b)) => {
                a.len() == b.len()
                    && a.iter()
                        .all(|(key, x)| b.get(key).is_some_and(|y| x.py_eq(y)))
            }
            (a, b) => match (a.as_number(), b.as_number()) {
                (Some(Number::Int(x)), Some(Number::Int(y))) => x == y,
                (Some(x), Some(y)) => x.as_f64() == y.as_f64(),
                _ => false,
            },
        }
    }

    fn as_number(&self) -> Option<Number> {
        match self {
            Value::Bool(b) => Some(Number::Int(i128::from(*b))),
            Value::Int(i) => Some(Number::Int(*i)),
            Value::Float(f) => Some(Number::Float(*f)),
            _ => None,
        }
    }

    /// A hashable text that is equal for values that are [`Value::py_eq`]
    /// scalars, used to index labels. Collections get a text that never
    /// collides with a scalar's (they are matched by a full comparison).
    pub(crate) fn label_index_text(&self) -> String {
        match self.as_number() {
            Some(Number::Int(i)) => format!("n:{i}"),
            Some(Number::Float(f)) if f.fract() == 0.0 && f.abs() < 1e30 => {
                // Integral floats equal the int of the same value.
                format!("n:{}", f as i128)
            }
            Some(Number::Float(f)) => format!("f:{f:?}"),
            None => match self {
                Value::Str(text) => format!("s:{text}"),
                Value::Null => "z:".to_owned(),
                other => format!("o:{}", other.python_repr()),
            },
        }
    }

    /// Python's `str()` of the value: strings as they are, `True`/`False`,
    /// `None`, floats like `repr`, collections in Python repr.
    pub fn python_str(&self) -> String {
        match self {
            Value::Str(text) => text.clone(),
            Value::Tagged { text, .. } => text.clone(),
            other => other.python_repr(),
        }
    }

    /// Python's `repr()` of the value.
    pub fn python_repr(&self) -> String {
        let mut out = String::new();
        self.write_python_repr(&mut out);
        out
    }

    fn write_python_repr(&self, out: &mut String) {
        match self {
            Value::Null => out.push_str("None"),
            Value::Bool(true) => out.push_str("True"),
            Value::Bool(false) => out.push_str("False"),
            Value::Int(i) => {
                let _ = write!(out, "{i}");
            }
            Value::Float(f) => out.push_str(&python_float_repr(*f)),
            Value::Str(text) => write_python_str_repr(text, out),
            Value::Tagged { text, .. } => write_python_str_repr(text, out),
            Value::Seq(items) => {
                out.push('[');
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        out.push_str(", ");
                    }
                    item.write_python_repr(out);
                }
                out.push(']');
            }
            Value::Map(map) => {
                out.push('{');
                for (i, (key, value)) in map.iter().enumerate() {
                    if i > 0 {
                        out.push_str(", ");
                    }
                    match key {
                        Key::Str(text) => write_python_str_repr(text, out),
                        Key::Scalar { tag, text } => {
                            Value::from_scalar(tag, text).write_python_repr(out)
                        }
                    }
                    out.push_str(": ");
                    value.write_python_repr(out);
                }
                out.push('}');
            }
        }
    }

    /// Decodes a resolved scalar (tag and text) the way PyYAML and go-yaml
    /// agree on: null, bool, int, float and str; any other tag is kept.
    fn from_scalar(scalar_tag: &str, text: &str) -> Value {
        match scalar_tag {
            tag::NULL => Value::Null,
            tag::BOOL => Value::Bool(yaml11::parse_bool(text)),
            tag::INT => {
                yaml11::parse_int(text).map_or_else(|| Value::Str(text.to_owned()), Value::Int)
            }
            tag::FLOAT => {
                yaml11::parse_float(text).map_or_else(|| Value::Str(text.to_owned()), Value::Float)
            }
            // `=` and `<<` as values: PyYAML's safe loader has no
            // constructor for the first and merges only keys; as text they
            // at least keep what was written.
            yaml11::VALUE | tag::MERGE => Value::Str(text.to_owned()),
            tag::STR => Value::Str(text.to_owned()),
            other => Value::Tagged {
                tag: other.to_owned(),
                text: text.to_owned(),
            },
        }
    }

    /// Converts a YAML node (a document node is unwrapped) into a value.
    /// Aliases are expanded to copies of their anchored value, within
    /// go-yaml's aliasing budget (a few bytes of nested aliases must not
    /// expand into gigabytes); an alias to an unknown anchor becomes null.
    pub fn from_node(node: &Node) -> Result<Value, &'static str> {
        let mut anchors = HashMap::new();
        let mut budget = AliasBudget::default();
        Value::from_node_with(node.root(), &mut anchors, &mut budget).map(|(value, _)| value)
    }

    /// The value and how many values it is made of.
    fn from_node_with(
        node: &Node,
        anchors: &mut HashMap<String, (Value, usize)>,
        budget: &mut AliasBudget,
    ) -> Result<(Value, usize), &'static str> {
        let (value, size) = match node.kind {
            NodeKind::Document => match node.content.first() {
                Some(root) => Value::from_node_with(root, anchors, budget)?,
                None => (Value::Null, 1),
            },
            NodeKind::Alias => match anchors.get(node.value.as_str()) {
                Some((value, size)) => {
                    budget.count(*size, true)?;
                    (value.clone(), *size)
                }
                None => (Value::Null, 1),
            },
            NodeKind::Scalar => (Value::from_scalar(scalar_tag(node), &node.value), 1),
            NodeKind::Sequence => {
                let mut items = Vec::with_capacity(node.content.len());
                let mut size = 1;
                for item in &node.content {
                    let (value, item_size) = Value::from_node_with(item, anchors, budget)?;
                    items.push(value);
                    size += item_size;
                }
                (Value::Seq(items), size)
            }
            NodeKind::Mapping => {
                let mut map =
                    Map::with_capacity_and_hasher(node.content.len() / 2, Default::default());
                let mut size = 1;
                for pair in node.content.chunks_exact(2) {
                    let (key_node, value_node) = (&pair[0], &pair[1]);
                    let (value, value_size) = Value::from_node_with(value_node, anchors, budget)?;
                    size += value_size;
                    let key = match key_node.kind {
                        NodeKind::Scalar => {
                            let key_tag = scalar_tag(key_node);
                            if key_tag == tag::STR {
                                Key::Str(key_node.value.as_str().to_owned())
                            } else {
                                Key::Scalar {
                                    tag: key_tag.to_owned(),
                                    text: key_node.value.as_str().to_owned(),
                                }
                            }
                        }
                        // PyYAML (Deckhand's loader) cannot make a list
                        // or a dict a key ("found unhashable key"). Their
                        // text form, nested, grew exponentially with the
                        // escaping at each level.
                        _ => return Err("found unhashable key"),
                    };
                    map.insert(key, value);
                }
                (Value::Map(map), size)
            }
        };
        if node.kind != NodeKind::Alias {
            budget.count(1, false)?;
        }
        if !node.anchor().is_empty() {
            anchors.insert(node.anchor().to_string(), (value.clone(), size));
        }
        Ok((value, size))
    }

    /// Converts the value into a YAML node for the encoder. Strings are
    /// `!!str` nodes without style, so the encoder quotes them when their
    /// text would read back as another type.
    pub fn to_node(&self) -> Node {
        match self {
            Value::Null => Node::new_scalar(tag::NULL, "null"),
            Value::Bool(b) => Node::new_scalar(tag::BOOL, if *b { "true" } else { "false" }),
            Value::Int(i) => Node::new_scalar(tag::INT, i.to_string()),
            Value::Float(f) => Node::new_scalar(tag::FLOAT, yaml_float_text(*f)),
            Value::Str(text) => string_node(text),
            Value::Tagged {
                tag: scalar_tag,
                text,
            } => {
                let mut node = Node::new_scalar(scalar_tag, text.clone());
                // A custom tag must be written out; a standard one resolves
                // from the text when it reads back the same.
                if !scalar_tag.starts_with("!!") || resolve_plain(text) != scalar_tag.as_str() {
                    node.style.insert(Style::TAGGED);
                }
                node
            }
            Value::Seq(items) => {
                let mut node = Node::new_sequence();
                node.content = items.iter().map(Value::to_node).collect();
                node
            }
            Value::Map(map) => {
                let mut node = Node::new_mapping();
                node.content.reserve(map.len() * 2);
                for (key, value) in map {
                    node.content.push(match key {
                        Key::Str(text) => string_node(text),
                        // As PyYAML writes the key it read (`on` was
                        // True, so it is written `true`).
                        Key::Scalar { tag: key_tag, text } => {
                            Value::from_scalar(key_tag, text).to_node()
                        }
                    });
                    node.content.push(value.to_node());
                }
                node
            }
        }
    }
}

/// A `!!str` node, double-quoted when PyYAML (Deckhand's and Pegleg's
/// reader) would read the plain text as something else: go-yaml v3 writes
/// `YES`, `on`, `1:20`, `=` or a hex string beyond 64 bits plain because
/// they are strings to it, which would make them booleans, integers or an
/// unloadable `value` downstream.
fn string_node(text: &str) -> Node {
    let mut node = Node::new_string(text.to_owned());
    if yaml11::needs_quotes(text) {
        node.style.insert(Style::DOUBLE_QUOTED);
    }
    node
}

#[derive(Clone, Copy)]
enum Number {
    Int(i128),
    Float(f64),
}

impl Number {
    fn as_f64(self) -> f64 {
        match self {
            // Precision loss only for integers beyond 2^53, where Python
            // compares exactly; such labels do not occur in practice.
            Number::Int(i) => i as f64,
            Number::Float(f) => f,
        }
    }
}

/// The effective tag of a scalar node as PyYAML reads it: an explicit tag,
/// `!!str` for a quoted or block scalar, else YAML 1.1's implicit tag for
/// the plain text (the parser's go-yaml tag is not used: `on` and `0777`
/// mean something else there).
fn scalar_tag(node: &Node) -> &str {
    if node.style.contains(Style::TAGGED) && !node.tag().is_empty() {
        return node.tag();
    }
    let quoted = node.style.contains(Style::DOUBLE_QUOTED)
        || node.style.contains(Style::SINGLE_QUOTED)
        || node.style.contains(Style::LITERAL)
        || node.style.contains(Style::FOLDED);
    if quoted {
        tag::STR
    } else {
        yaml11::resolve(&node.value)
    }
}

/// Shortest round-trip digits and decimal exponent of a finite, non-zero
/// float: `(digits, exp)` means `0.d1d2... × 10^(exp+1)`, i.e. the first digit
/// is at position `exp`.
fn float_digits(f: f64) -> (String, i32) {
    // `{:e}` gives the shortest representation that round-trips, like
    // Python's repr.
    let sci = format!("{:e}", f.abs());
    let (mantissa, exponent) = sci.split_once('e').unwrap_or((&sci, "0"));
    let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    (digits, exponent.parse().unwrap_or(0))
}

/// Python's `repr(float)`: `3.2`, `1.0`, `1e+20`, `1.5e-07`, `inf`, `nan`.
pub(crate) fn python_float_repr(f: f64) -> String {
    if f.is_nan() {
        return "nan".to_owned();
    }
    if f.is_infinite() {
        return if f > 0.0 { "inf" } else { "-inf" }.to_owned();
    }
    let sign = if f.is_sign_negative() { "-" } else { "" };
    if f == 0.0 {
        return format!("{sign}0.0");
    }
    let (digits, exp) = float_digits(f);
    if !(-4..16).contains(&exp) {
        let (first, rest) = digits.split_at(1);
        let mantissa = if rest.is_empty() {
            first.to_owned()
        } else {
            format!("{first}.{rest}")
        };
        let exp_sign = if exp < 0 { '-' } else { '+' };
        return format!("{sign}{mantissa}e{exp_sign}{:02}", exp.unsigned_abs());
    }
    let mut out = sign.to_owned();
    if exp < 0 {
        out.push_str("0.");
        out.extend(std::iter::repeat_n('0', (-exp - 1) as usize));
        out.push_str(&digits);
    } else {
        let int_len = exp as usize + 1;
        if digits.len() <= int_len {
            out.push_str(&digits);
            out.extend(std::iter::repeat_n('0', int_len - digits.len()));
            out.push_str(".0");
        } else {
            out.push_str(&digits[..int_len]);
            out.push('.');
            out.push_str(&digits[int_len..]);
        }
    }
    out
}

/// A float's YAML text that both go-yaml and PyYAML (YAML 1.1, which needs a
/// `.` and a signed exponent) read back as the same float.
fn yaml_float_text(f: f64) -> String {
    if f.is_nan() {
        return ".nan".to_owned();
    }
    if f.is_infinite() {
        return if f > 0.0 { ".inf" } else { "-.inf" }.to_owned();
    }
    let repr = python_float_repr(f);
    match repr.split_once('e') {
        Some((mantissa, exponent)) if !mantissa.contains('.') => format!("{mantissa}.0e{exponent}"),
        _ => repr,
    }
}

/// Python's `repr(str)`: single quotes unless the text holds `'` and no `"`.
fn write_python_str_repr(text: &str, out: &mut String) {
    let quote = if text.contains('\'') && !text.contains('"') {
        '"'
    } else {
        '\''
    };
    out.push(quote);
    for c in text.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c == quote => {
                out.push('\\');
                out.push(c);
            }
            c if (c as u32) < 0x20 || c as u32 == 0x7f => {
                let _ = write!(out, "\\x{:02x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push(quote);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Aliases expand within go-yaml's budget: a 760-byte bomb (10^9 nodes
    /// once expanded) is an error, not gigabytes.
    #[test]
    fn alias_bombs_are_refused() {
        let mut text = String::from("l0: &l0 [x, x, x, x, x, x, x, x, x, x]\n");
        for level in 1..10 {
            let previous = format!("*l{}", level - 1);
            let items = [previous.as_str(); 10].join(", ");
            text.push_str(&format!("l{level}: &l{level} [{items}]\n"));
        }
        let node = crate::yaml::parse_document(&text).unwrap().unwrap();
        assert_eq!(
            Value::from_node(&node),
            Err(crate::yaml::alias::EXCESSIVE_ALIASING)
        );
        let modest = crate::yaml::parse_document("a: &a {b: 1}\nc: *a\n")
            .unwrap()
            .unwrap();
        assert!(Value::from_node(&modest).is_ok());
    }

    #[test]
    fn python_float_repr_matches_python() {
        assert_eq!(python_float_repr(3.2), "3.2");
        assert_eq!(python_float_repr(1.0), "1.0");
        assert_eq!(python_float_repr(-2.5), "-2.5");
        assert_eq!(python_float_repr(1e20), "1e+20");
        assert_eq!(python_float_repr(1.5e-7), "1.5e-07");
        assert_eq!(python_float_repr(0.0001), "0.0001");
        assert_eq!(python_float_repr(123456.0), "123456.0");
        assert_eq!(python_float_repr(1e16), "1e+16");
        assert_eq!(python_float_repr(1e15), "1000000000000000.0");
    }

    #[test]
    fn yaml_float_text_reads_back_in_yaml_1_1() {
        assert_eq!(yaml_float_text(1e20), "1.0e+20");
        assert_eq!(yaml_float_text(3.2), "3.2");
        assert_eq!(yaml_float_text(f64::NEG_INFINITY), "-.inf");
    }

    #[test]
    fn python_str_of_values() {
        let mut map = Map::default();
        map.insert(Key::str("z"), Value::Bool(true));
        map.insert(
            Key::str("it's"),
            Value::Seq(vec![Value::Int(1), Value::Null]),
        );
        assert_eq!(
            Value::Map(map).python_str(),
            "{'z': True, \"it's\": [1, None]}"
        );
        assert_eq!(Value::Bool(false).python_str(), "False");
        assert_eq!(Value::Str("a'b".into()).python_str(), "a'b");
    }

    #[test]
    fn py_eq_crosses_numeric_types_only() {
        assert!(Value::Bool(true).py_eq(&Value::Int(1)));
        assert!(Value::Int(2).py_eq(&Value::Float(2.0)));
        assert!(!Value::Int(1).py_eq(&Value::Str("1".into())));
        assert_eq!(
            Value::Bool(true).label_index_text(),
            Value::Float(1.0).label_index_text()
        );
    }

    #[test]
    fn yaml_1_1_lookalikes_are_quoted() {
        for text in [
            "YES",
            "off",
            "1:20",
            "-1:20:30.5",
            "=",
            "0x0C0000300000C00003",
        ] {
            assert!(
                Value::Str(text.into())
                    .to_node()
                    .style
                    .contains(Style::DOUBLE_QUOTED),
                "{text}"
            );
        }
        for text in ["1:60", "a:1", "yesterday"] {
            assert!(Value::Str(text.into()).to_node().style.is_empty(), "{text}");
        }
    }

    /// Documents mean what PyYAML reads: `on` is true, `0777` is 511,
    /// `0o17` and `y` are strings, `1:20` is 80; quoted text stays text.
    #[test]
    fn documents_read_as_pyyaml_reads_them() {
        let node = crate::yaml::parse_document(
            "a: on\nb: 0777\nc: 0o17\nd: y\ne: 1:20\nf: 'on'\ng: !!str 0777\nh: 0x0C0000300000C00003\n",
        )
        .unwrap()
        .unwrap();
        let value = Value::from_node(&node).unwrap();
        assert_eq!(value.get("a"), Some(&Value::Bool(true)));
        assert_eq!(value.get("b"), Some(&Value::Int(511)));
        assert_eq!(value.get("c"), Some(&Value::Str("0o17".into())));
        assert_eq!(value.get("d"), Some(&Value::Str("y".into())));
        assert_eq!(value.get("e"), Some(&Value::Int(80)));
        assert_eq!(value.get("f"), Some(&Value::Str("on".into())));
        assert_eq!(value.get("g"), Some(&Value::Str("0777".into())));
        assert_eq!(
            value.get("h"),
            Some(&Value::Int(0x000C_0000_3000_00C0_0003))
        );
    }
}
