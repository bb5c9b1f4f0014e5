//! Nodes styled as Go's `yaml.Marshal` styles struct fields (spec §6): used
//! for the re-written root Kptfile (§11) and for `results.yaml`.
//!
//! go-yaml's struct marshaller decides scalar styles differently from its
//! node encoder: a string is plain only if it resolves to `!!str` *and* is
//! not a YAML 1.1 boolean or base-60 number; multi-line strings are literal;
//! map keys are sorted with go-yaml's natural key order. The helpers here
//! build [`Node`]s whose explicit style bits make `yaml::encoder` produce
//! exactly those bytes (the emitter's own downgrades still apply, as in Go).

use super::node::{Node, Style, tag};
use super::resolve::resolve_plain;

/// A string field: plain when go-yaml's marshaller would write it plain,
/// double-quoted otherwise, literal when it contains a line break.
pub fn string(value: &str) -> Node {
    let mut node = Node::new_scalar(tag::STR, value);
    node.style = if value.contains('\n') {
        Style::LITERAL
    } else if can_use_plain(value) {
        Style::PLAIN
    } else {
        Style::DOUBLE_QUOTED
    };
    node
}

/// True when `yaml.Marshal` writes this string without quotes (before the
/// emitter's own analysis, which may still single-quote it).
pub fn can_use_plain(value: &str) -> bool {
    resolve_plain(value) == tag::STR && !is_base60_float(value) && !is_old_bool(value)
}

/// An integer field, written in base 10.
pub fn int(value: i64) -> Node {
    Node::new_scalar(tag::INT, value.to_string())
}

/// An unsigned integer field, written in base 10.
pub fn uint(value: u64) -> Node {
    Node::new_scalar(tag::INT, value.to_string())
}

/// A boolean field: `true` / `false`.
pub fn bool(value: bool) -> Node {
    Node::new_scalar(tag::BOOL, if value { "true" } else { "false" })
}

/// A float field in Go's shortest `g` format, with `.inf`/`-.inf`/`.nan`.
pub fn float(value: f64) -> Node {
    Node::new_scalar(tag::FLOAT, format_go_float_g(value))
}

/// A nil pointer / interface: `null`.
pub fn null() -> Node {
    Node::new_scalar(tag::NULL, "null")
}

/// A struct: fields in declaration order (block style).
pub fn mapping(fields: Vec<(&str, Node)>) -> Node {
    let mut node = Node::new_mapping();
    for (key, value) in fields {
        node.content.push(string(key));
        node.content.push(value);
    }
    node
}

/// A Go map with string keys: entries sorted with go-yaml's key order.
pub fn sorted_mapping(entries: Vec<(String, Node)>) -> Node {
    let mut entries = entries;
    entries.sort_by(|a, b| go_key_order(&a.0, &b.0));
    let mut node = Node::new_mapping();
    for (key, value) in entries {
        node.content.push(string(&key));
        node.content.push(value);
    }
    node
}

/// A Go `map[string]string`: sorted, values marshalled as strings.
pub fn string_map<'a>(entries: impl IntoIterator<Item = (&'a str, &'a str)>) -> Node {
    sorted_mapping(
        entries
            .into_iter()
            .map(|(key, value)| (key.to_owned(), string(value)))
            .collect(),
    )
}

/// A slice (block style).
pub fn sequence(items: Vec<Node>) -> Node {
    let mut node = Node::new_sequence();
    node.content = items.into();
    node
}

/// Appends `key: string(value)` unless `value` is empty (`omitempty`).
pub fn push_string_omit_empty<'k>(fields: &mut Vec<(&'k str, Node)>, key: &'k str, value: &str) {
    if !value.is_empty() {
        fields.push((key, string(value)));
    }
}

/// Appends `key: value` when present (`omitempty` on a pointer or struct).
pub fn push_omit_none<'k>(fields: &mut Vec<(&'k str, Node)>, key: &'k str, value: Option<Node>) {
    if let Some(value) = value {
        fields.push((key, value));
    }
}

/// Appends `key: sequence(items)` unless `items` is empty (`omitempty`).
pub fn push_seq_omit_empty<'k>(fields: &mut Vec<(&'k str, Node)>, key: &'k str, items: Vec<Node>) {
    if !items.is_empty() {
        fields.push((key, sequence(items)));
    }
}

/// YAML 1.1 booleans, which go-yaml still quotes when marshalling strings.
fn is_old_bool(value: &str) -> bool {
    matches!(
        value,
        "y" | "Y"
            | "yes"
            | "Yes"
            | "YES"
            | "on"
            | "On"
            | "ON"
            | "n"
            | "N"
            | "no"
            | "No"
            | "NO"
            | "off"
            | "Off"
            | "OFF"
    )
}

/// `^[-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+(?:\.[0-9_]*)?$` (YAML 1.1 base 60).
fn is_base60_float(value: &str) -> bool {
    let bytes = value.as_bytes();
    let mut i = 0;
    if matches!(bytes.first(), Some(b'+' | b'-')) {
        i += 1;
    }
    if !bytes.get(i).is_some_and(u8::is_ascii_digit) {
        return false;
    }
    i += 1;
    while bytes
        .get(i)
        .is_some_and(|b| b.is_ascii_digit() || *b == b'_')
    {
        i += 1;
    }
    let mut groups = 0;
    while bytes.get(i) == Some(&b':') {
        i += 1;
        let start = i;
        while bytes.get(i).is_some_and(u8::is_ascii_digit) && i - start < 2 {
            i += 1;
        }
        let group = &bytes[start..i];
        let valid = match group {
            [d] => d.is_ascii_digit(),
            [first, _] => (b'0'..=b'5').contains(first),
            _ => false,
        };
        if !valid {
            return false;
        }
        groups += 1;
    }
    if groups == 0 {
        return false;
    }
    if bytes.get(i) == Some(&b'.') {
        i += 1;
        while bytes
            .get(i)
            .is_some_and(|b| b.is_ascii_digit() || *b == b'_')
        {
            i += 1;
        }
    }
    i == bytes.len()
}

/// go-yaml's `keyList.Less` for string keys: letters before digits after a
/// digit run, digit runs compared numerically.
pub fn go_key_order(a: &str, b: &str) -> std::cmp::Ordering {
    use std::cmp::Ordering;
    let less = |a: &[char], b: &[char]| -> bool {
        let mut digits = false;
        let n = a.len().min(b.len());
        for i in 0..n {
            if a[i] == b[i] {
                digits = a[i].is_numeric();
                continue;
            }
            let al = a[i].is_alphabetic();
            let bl = b[i].is_alphabetic();
            if al && bl {
                return a[i] < b[i];
            }
            if al || bl {
                return if digits { al } else { bl };
            }
            let (mut an, mut bn): (i64, i64) = (0, 0);
            if a[i] == '0' || b[i] == '0' {
                let mut j = i;
                while j > 0 && a[j - 1].is_numeric() {
                    j -= 1;
                    if a[j] != '0' {
                        an = 1;
                        bn = 1;
                        break;
                    }
                }
            }
            let mut ai = i;
            while ai < a.len() && a[ai].is_numeric() {
                an = an
                    .wrapping_mul(10)
                    .wrapping_add(i64::from(a[ai].to_digit(10).unwrap_or(0)));
                ai += 1;
            }
            let mut bi = i;
            while bi < b.len() && b[bi].is_numeric() {
                bn = bn
                    .wrapping_mul(10)
                    .wrapping_add(i64::from(b[bi].to_digit(10).unwrap_or(0)));
                bi += 1;
            }
            if an != bn {
                return an < bn;
            }
            if ai != bi {
                return ai < bi;
            }
            return a[i] < b[i];
        }
        a.len() < b.len()
    };
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    if less(&a, &b) {
        Ordering::Less
    } else if less(&b, &a) {
        Ordering::Greater
    } else {
        Ordering::Equal
    }
}

/// Go's `strconv.FormatFloat(f, 'g', -1, 64)` with go-yaml's spellings of
/// the special values: `%e` form when the exponent is below -4 or at least 6
/// (Go uses precision 6 for that decision in shortest mode).
pub fn format_go_float_g(value: f64) -> String {
    if value.is_nan() {
        return ".nan".into();
    }
    if value.is_infinite() {
        return if value > 0.0 {
            ".inf".into()
        } else {
            "-.inf".into()
        };
    }
    let (sign, digits, exponent) = shortest_digits(value);
    if !(-4..6).contains(&exponent) {
        format_exponent(sign, &digits, exponent, true)
    } else {
        format_fixed(sign, &digits, exponent)
    }
}

/// Go's `encoding/json` float format: `%f`-style unless the magnitude is
/// below 1e-6 or at least 1e21, then `%e` with a short exponent (`1e+21`,
/// `1e-7`). `None` for NaN and infinities, which JSON cannot hold.
pub fn format_go_json_float(value: f64) -> Option<String> {
    if !value.is_finite() {
        return None;
    }
    let abs = value.abs();
    let (sign, digits, exponent) = shortest_digits(value);
    Some(if abs != 0.0 && !(1e-6..1e21).contains(&abs) {
        format_exponent(sign, &digits, exponent, false)
    } else {
        format_fixed(sign, &digits, exponent)
    })
}

/// Sign, shortest round-trip decimal digits and decimal exponent of `value`
/// (Rust's `{:e}` gives the same digits as Go's precision -1).
fn shortest_digits(value: f64) -> (&'static str, String, i32) {
    let sci = format!("{value:e}");
    let (mantissa, exponent) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exponent: i32 = exponent.parse().unwrap_or(0);
    let sign = if mantissa.starts_with('-') { "-" } else { "" };
    let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    (sign, digits, exponent)
}

fn format_fixed(sign: &str, digits: &str, exponent: i32) -> String {
    let dp = exponent + 1;
    let mut out = String::from(sign);
    if digits == "0" {
        out.push('0');
    } else if dp <= 0 {
        out.push_str("0.");
        out.extend(std::iter::repeat_n('0', dp.unsigned_abs() as usize));
        out.push_str(digits);
    } else if dp as usize >= digits.len() {
        out.push_str(digits);
        out.extend(std::iter::repeat_n('0', dp as usize - digits.len()));
    } else {
        out.push_str(&digits[..dp as usize]);
        out.push('.');
        out.push_str(&digits[dp as usize..]);
    }
    out
}

fn format_exponent(sign: &str, digits: &str, exponent: i32, two_digit_exponent: bool) -> String {
    let mut out = String::from(sign);
    out.push_str(&digits[..1]);
    if digits.len() > 1 {
        out.push('.');
        out.push_str(&digits[1..]);
    }
    out.push('e');
    out.push(if exponent < 0 { '-' } else { '+' });
    if two_digit_exponent {
        out.push_str(&format!("{:02}", exponent.unsigned_abs()));
    } else {
        out.push_str(&exponent.unsigned_abs().to_string());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::yaml::encoder::{SeqIndent, to_string};

    #[test]
    fn strings_are_quoted_like_go_marshal() {
        let node = mapping(vec![
            ("status", string("True")),
            ("one", string("1")),
            ("yes", string("yes")),
            ("empty", string("")),
            ("b60", string("1:20")),
            ("tilde", string("~0.2")),
            ("range", string("0.4.1 - 0.4.3")),
            ("path", string("./testdata/fn.sh")),
            ("stderr", string("failed: error")),
            ("msg", string("line1\n\tline2")),
            ("count", int(0)),
            ("ok", bool(true)),
        ]);
        assert_eq!(
            to_string(&node, SeqIndent::Wide),
            "status: \"True\"\none: \"1\"\n\"yes\": \"yes\"\nempty: \"\"\nb60: \"1:20\"\n\
             tilde: ~0.2\nrange: 0.4.1 - 0.4.3\npath: ./testdata/fn.sh\nstderr: 'failed: error'\n\
             msg: |-\n  line1\n  \tline2\ncount: 0\nok: true\n"
        );
    }

    #[test]
    fn map_keys_sort_naturally() {
        let mut keys = vec!["b", "a10", "a2", "A", "a"];
        keys.sort_by(|a, b| go_key_order(a, b));
        assert_eq!(keys, vec!["A", "a", "a2", "a10", "b"]);
    }

    #[test]
    fn floats_format_like_go() {
        assert_eq!(format_go_float_g(1.5), "1.5");
        assert_eq!(format_go_float_g(1e21), "1e+21");
        assert_eq!(format_go_float_g(0.0001), "0.0001");
        assert_eq!(format_go_float_g(0.00001), "1e-05");
        assert_eq!(format_go_float_g(f64::INFINITY), ".inf");
        assert_eq!(format_go_float_g(1e6), "1e+06");
        assert_eq!(format_go_float_g(123456.0), "123456");
        assert_eq!(format_go_json_float(1e21).as_deref(), Some("1e+21"));
        assert_eq!(format_go_json_float(1.50).as_deref(), Some("1.5"));
        assert_eq!(format_go_json_float(1e-7).as_deref(), Some("1e-7"));
        assert_eq!(format_go_json_float(100.0).as_deref(), Some("100"));
    }
}
