//! The round trip a TypeScript catalog function (kpt-functions SDK) puts
//! every resource through: js-yaml 3.14 `safeLoad` into JavaScript values,
//! then `safeDump` (`noArrayIndent`, `lineWidth: -1`, `noRefs`) of the
//! output list, which kpt reads back with kyaml. What survives is, per
//! node, the value js-yaml loaded and the style it chose to write it in;
//! [`load`] and [`to_node`] compute exactly that, so the nodes are the ones
//! kyaml reads from the function's output.
//!
//! Loading (`DEFAULT_SAFE_SCHEMA`): plain scalars resolve as js-yaml's
//! null, bool, int (`0x`, `0b`, leading-`0` octal, base 60, `_`
//! separators), float and timestamp types (`yes`/`no` stay strings);
//! quoted and block scalars are strings; `<<` merges mappings; keys are
//! converted with JavaScript's `String()`; a repeated key is an error.
//! Dumping: numbers print as JavaScript's `Number#toString` (floats that
//! print in exponent form without a dot get one, `-0` is `-0.0`), dates as
//! `toISOString()`, strings plain when js-yaml's `chooseScalarStyle` allows
//! and no implicit type would read them back, single-quoted otherwise,
//! literal when multi-line, double-quoted when a character is not
//! printable; empty collections are written in flow style; object keys in
//! JavaScript's order (array-index keys first, ascending).
//!
//! Not covered (an error, as for an input js-yaml rejects): `!!binary`,
//! `!!omap`, `!!pairs`, `!!set` and custom tags, collection or date keys.

use std::collections::HashMap;
use std::sync::OnceLock;

use regex::Regex;

use crate::yaml::node::{Node, NodeKind, Style, tag};
use crate::yaml::resolve::resolve_plain;

/// A JavaScript value as js-yaml loads it.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Js {
    Null,
    Bool(bool),
    Num(f64),
    Str(String),
    /// Milliseconds since the epoch.
    Date(f64),
    Arr(Vec<Js>),
    Obj(JsObject),
}

/// A plain JavaScript object: properties in insertion order; [`JsObject::ordered`]
/// gives JavaScript's enumeration order.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct JsObject {
    entries: Vec<(String, Js)>,
}

impl JsObject {
    /// The value of a property.
    pub(crate) fn get(&self, key: &str) -> Option<&Js> {
        self.entries
            .iter()
            .find(|(name, _)| name == key)
            .map(|(_, value)| value)
    }

    /// Sets a property (an existing one keeps its place).
    pub(crate) fn set(&mut self, key: &str, value: Js) {
        match self.entries.iter_mut().find(|(name, _)| name == key) {
            Some(entry) => entry.1 = value,
            None => self.entries.push((key.to_owned(), value)),
        }
    }

    /// Deletes a property.
    pub(crate) fn remove(&mut self, key: &str) {
        self.entries.retain(|(name, _)| name != key);
    }

    /// True when the object has no properties.
    pub(crate) fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The properties in JavaScript's order: array indices ascending, then
    /// the other keys in insertion order.
    pub(crate) fn ordered(&self) -> Vec<(&str, &Js)> {
        let mut indices: Vec<(u32, &str, &Js)> = Vec::new();
        let mut others = Vec::new();
        for (key, value) in &self.entries {
            match array_index(key) {
                Some(index) => indices.push((index, key, value)),
                None => others.push((key.as_str(), value)),
            }
        }
        indices.sort_by_key(|(index, _, _)| *index);
        indices
            .into_iter()
            .map(|(_, key, value)| (key, value))
            .chain(others)
            .collect()
    }
}

/// The index of an array-index property name (`0`, or digits without a
/// leading zero, below 2^32 - 1).
fn array_index(key: &str) -> Option<u32> {
    if key.is_empty() || (key.len() > 1 && key.starts_with('0')) {
        return None;
    }
    if !key.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    key.parse::<u32>().ok().filter(|index| *index != u32::MAX)
}

impl Js {
    /// JavaScript's `String(value)` for the scalar values (collections and
    /// dates are not needed by the callers and print as JavaScript would
    /// for arrays of scalars / `[object Object]`).
    pub(crate) fn to_js_string(&self) -> String {
        match self {
            Js::Null => "null".to_owned(),
            Js::Bool(value) => value.to_string(),
            Js::Num(value) => number_to_string(*value),
            Js::Str(text) => text.clone(),
            Js::Date(ms) => iso_string(*ms),
            Js::Arr(items) => items
                .iter()
                .map(|item| match item {
                    Js::Null => String::new(),
                    other => other.to_js_string(),
                })
                .collect::<Vec<_>>()
                .join(","),
            Js::Obj(_) => "[object Object]".to_owned(),
        }
    }

    /// JavaScript truthiness.
    pub(crate) fn truthy(&self) -> bool {
        match self {
            Js::Null => false,
            Js::Bool(value) => *value,
            Js::Num(value) => *value != 0.0 && !value.is_nan(),
            Js::Str(text) => !text.is_empty(),
            _ => true,
        }
    }

    /// The object, if this is one.
    pub(crate) fn as_object(&self) -> Option<&JsObject> {
        match self {
            Js::Obj(object) => Some(object),
            _ => None,
        }
    }

    /// A property of an object value (`undefined` otherwise).
    pub(crate) fn field(&self, key: &str) -> Option<&Js> {
        self.as_object().and_then(|object| object.get(key))
    }
}

/// Loads a node as js-yaml's `safeLoad` would. `anchors` holds the values
/// of the anchors seen so far in the document.
pub(crate) fn load(node: &Node, anchors: &mut HashMap<String, Js>) -> Result<Js, String> {
    load_at(node, anchors, 0)
}

const MAX_DEPTH: usize = 512;

fn load_at(node: &Node, anchors: &mut HashMap<String, Js>, depth: usize) -> Result<Js, String> {
    if depth > MAX_DEPTH {
        return Err("YAMLException: the document nests too deeply".to_owned());
    }
    let value = match node.kind {
        NodeKind::Document => match node.content.first() {
            Some(root) => load_at(root, anchors, depth)?,
            None => Js::Null,
        },
        NodeKind::Alias => anchors
            .get(node.value.as_str())
            .cloned()
            .ok_or_else(|| format!("YAMLException: unidentified alias \"{}\"", node.value))?,
        NodeKind::Scalar => scalar(node)?,
        NodeKind::Sequence => {
            check_tag(node, tag::SEQ)?;
            let mut items = Vec::with_capacity(node.content.len());
            for item in &node.content {
                items.push(load_at(item, anchors, depth + 1)?);
            }
            Js::Arr(items)
        }
        NodeKind::Mapping => {
            check_tag(node, tag::MAP)?;
            let mut object = JsObject::default();
            let mut overridable: Vec<String> = Vec::new();
            for pair in node.content.chunks_exact(2) {
                let (key, value) = (&pair[0], &pair[1]);
                let is_merge = key.kind == NodeKind::Scalar
                    && (key.tag() == tag::MERGE || (key.value == "<<" && key.style.is_empty()));
                let loaded = load_at(value, anchors, depth + 1)?;
                if is_merge {
                    let sources = match loaded {
                        Js::Obj(source) => vec![source],
                        Js::Arr(items) => {
                            let mut sources = Vec::new();
                            for item in items {
                                match item {
                                    Js::Obj(source) => sources.push(source),
                                    _ => {
                                        return Err("YAMLException: cannot merge mappings; the provided source object is unacceptable".to_owned());
                                    }
                                }
                            }
                            sources
                        }
                        _ => {
                            return Err("YAMLException: cannot merge mappings; the provided source object is unacceptable".to_owned());
                        }
                    };
                    for source in sources {
                        for (name, value) in source.entries {
                            if object.get(&name).is_none() {
                                object.set(&name, value);
                                overridable.push(name);
                            }
                        }
                    }
                    continue;
                }
                let key_text = match load_at(key, anchors, depth + 1)? {
                    scalar @ (Js::Null | Js::Bool(_) | Js::Num(_) | Js::Str(_)) => {
                        scalar.to_js_string()
                    }
                    _ => return Err("YAMLException: unsupported mapping key".to_owned()),
                };
                if object.get(&key_text).is_some() {
                    if let Some(position) = overridable.iter().position(|name| *name == key_text) {
                        overridable.remove(position);
                    } else {
                        return Err("YAMLException: duplicated mapping key".to_owned());
                    }
                }
                object.set(&key_text, loaded);
            }
            Js::Obj(object)
        }
    };
    if !node.anchor().is_empty() {
        anchors.insert(node.anchor().to_owned(), value.clone());
    }
    Ok(value)
}

/// The explicit tag of a node, in short form (`!!str`), if it has one.
fn explicit_tag(node: &Node) -> Option<String> {
    if !node.style.contains(Style::TAGGED) {
        return None;
    }
    let text = node.tag();
    Some(
        text.strip_prefix("tag:yaml.org,2002:")
            .map_or_else(|| text.to_owned(), |rest| format!("!!{rest}")),
    )
}

fn check_tag(node: &Node, expected: &str) -> Result<(), String> {
    match explicit_tag(node) {
        Some(found) if found != expected && found != "!" => {
            Err(format!("YAMLException: unknown tag !<{found}>"))
        }
        _ => Ok(()),
    }
}

fn scalar(node: &Node) -> Result<Js, String> {
    let text = node.value.as_str();
    let quoted = node.style.bits()
        & (Style::DOUBLE_QUOTED.bits()
            | Style::SINGLE_QUOTED.bits()
            | Style::LITERAL.bits()
            | Style::FOLDED.bits())
        != 0;
    match explicit_tag(node).as_deref() {
        None if quoted => Ok(Js::Str(text.to_owned())),
        None => Ok(resolve(text).unwrap_or_else(|| Js::Str(text.to_owned()))),
        Some("!") | Some("!!str") => Ok(Js::Str(text.to_owned())),
        Some(explicit @ ("!!null" | "!!bool" | "!!int" | "!!float" | "!!timestamp")) => {
            let resolved = match explicit {
                "!!null" => resolve_null(text).then_some(Js::Null),
                "!!bool" => resolve_bool(text).map(Js::Bool),
                "!!int" => resolve_int(text).map(Js::Num),
                "!!float" => resolve_float(text).map(Js::Num),
                _ => resolve_timestamp(text).map(Js::Date),
            };
            resolved.ok_or_else(|| {
                format!("YAMLException: cannot resolve a node with !<tag:yaml.org,2002:{}> explicit tag", &explicit[2..])
            })
        }
        Some(other) => Err(format!("YAMLException: unknown tag !<{other}>")),
    }
}

/// The value an implicit type of js-yaml's safe schema reads `text` as,
/// `None` for a string.
fn resolve(text: &str) -> Option<Js> {
    if resolve_null(text) {
        return Some(Js::Null);
    }
    if let Some(value) = resolve_bool(text) {
        return Some(Js::Bool(value));
    }
    if let Some(value) = resolve_int(text) {
        return Some(Js::Num(value));
    }
    if let Some(value) = resolve_float(text) {
        return Some(Js::Num(value));
    }
    resolve_timestamp(text).map(Js::Date)
}

/// True when a string would load as something else (js-yaml's
/// `testImplicitResolving`, the merge key included).
fn ambiguous(text: &str) -> bool {
    text == "<<" || resolve(text).is_some()
}

fn resolve_null(text: &str) -> bool {
    matches!(text, "" | "~" | "null" | "Null" | "NULL")
}

fn resolve_bool(text: &str) -> Option<bool> {
    match text {
        "true" | "True" | "TRUE" => Some(true),
        "false" | "False" | "FALSE" => Some(false),
        _ => None,
    }
}

/// js-yaml's `resolveYamlInteger` + `constructYamlInteger`.
fn resolve_int(text: &str) -> Option<f64> {
    let bytes = text.as_bytes();
    if bytes.is_empty() {
        return None;
    }
    let mut index = 0;
    if bytes[0] == b'-' || bytes[0] == b'+' {
        index = 1;
    }
    let body = &text[index..];
    let digits_ok = |digits: &str, valid: fn(u8) -> bool| {
        let mut has_digits = false;
        for b in digits.bytes() {
            if b == b'_' {
                continue;
            }
            if !valid(b) {
                return false;
            }
            has_digits = true;
        }
        has_digits && !digits.ends_with('_')
    };
    let valid = if body == "0" {
        true
    } else if let Some(rest) = body.strip_prefix("0b") {
        digits_ok(rest, |b| b == b'0' || b == b'1')
    } else if let Some(rest) = body.strip_prefix("0x") {
        digits_ok(rest, |b| b.is_ascii_hexdigit())
    } else if let Some(rest) = body.strip_prefix('0') {
        digits_ok(rest, |b| (b'0'..=b'7').contains(&b))
    } else {
        if body.starts_with('_') || body.is_empty() {
            return None;
        }
        let (decimal, sexagesimal) = match body.find(':') {
            Some(colon) => (&body[..colon], Some(&body[colon..])),
            None => (body, None),
        };
        let mut has_digits = false;
        for b in decimal.bytes() {
            if b == b'_' {
                continue;
            }
            if !b.is_ascii_digit() {
                return None;
            }
            has_digits = true;
        }
        if !has_digits || (decimal.ends_with('_') && sexagesimal.is_none()) {
            return None;
        }
        if decimal.ends_with('_') {
            return None;
        }
        match sexagesimal {
            None => true,
            Some(rest) => base60_tail().is_match(rest),
        }
    };
    if !valid {
        return None;
    }
    // constructYamlInteger
    let mut value: String = text.chars().filter(|c| *c != '_').collect();
    let mut sign = 1.0;
    if value.starts_with('-') || value.starts_with('+') {
        if value.starts_with('-') {
            sign = -1.0;
        }
        value.remove(0);
    }
    if value == "0" {
        return Some(0.0);
    }
    let parsed = if let Some(rest) = value.strip_prefix("0b") {
        u128::from_str_radix(rest, 2).ok()? as f64
    } else if let Some(rest) = value.strip_prefix("0x") {
        u128::from_str_radix(rest, 16).ok()? as f64
    } else if value.starts_with('0') {
        u128::from_str_radix(&value, 8).ok()? as f64
    } else if value.contains(':') {
        let mut total = 0.0;
        let mut base = 1.0;
        for part in value.split(':').rev() {
            total += part.parse::<f64>().ok()? * base;
            base *= 60.0;
        }
        total
    } else {
        value.parse::<f64>().ok()?
    };
    Some(sign * parsed)
}

fn base60_tail() -> &'static Regex {
    static RE: OnceLock<Regex> = OnceLock::new();
    RE.get_or_init(|| Regex::new(r"^(:[0-5]?[0-9])+$").unwrap_or_else(|_| unreachable!()))
}

fn float_pattern() -> &'static Regex {
    static RE: OnceLock<Regex> = OnceLock::new();
    RE.get_or_init(|| {
        Regex::new(concat!(
            r"^(?:[-+]?(?:0|[1-9][0-9_]*)(?:\.[0-9_]*)?(?:[eE][-+]?[0-9]+)?",
            r"|\.[0-9_]+(?:[eE][-+]?[0-9]+)?",
            r"|[-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+\.[0-9_]*",
            r"|[-+]?\.(?:inf|Inf|INF)",
            r"|\.(?:nan|NaN|NAN))$"
        ))
        .unwrap_or_else(|_| unreachable!())
    })
}

/// js-yaml's `resolveYamlFloat` + `constructYamlFloat`.
fn resolve_float(text: &str) -> Option<f64> {
    if !float_pattern().is_match(text) || text.ends_with('_') {
        return None;
    }
    let mut value: String = text
        .chars()
        .filter(|c| *c != '_')
        .collect::<String>()
        .to_lowercase();
    let mut sign = 1.0;
    if value.starts_with('-') || value.starts_with('+') {
        if value.starts_with('-') {
            sign = -1.0;
        }
        value.remove(0);
    }
    if value == ".inf" {
        return Some(sign * f64::INFINITY);
    }
    if value == ".nan" {
        return Some(f64::NAN);
    }
    if value.contains(':') {
        let mut total = 0.0;
        let mut base = 1.0;
        for part in value.split(':').rev() {
            total += js_parse_float(part) * base;
            base *= 60.0;
        }
        return Some(sign * total);
    }
    Some(sign * js_parse_float(&value))
}

/// JavaScript's `parseFloat` on the texts the float pattern admits.
fn js_parse_float(text: &str) -> f64 {
    let trimmed = text.strip_suffix('.').unwrap_or(text);
    let fixed = if let Some((mantissa, exponent)) = trimmed.split_once('e') {
        format!(
            "{}e{exponent}",
            mantissa.strip_suffix('.').unwrap_or(mantissa)
        )
    } else {
        trimmed.to_owned()
    };
    fixed.parse::<f64>().unwrap_or(f64::NAN)
}

fn date_pattern() -> &'static Regex {
    static RE: OnceLock<Regex> = OnceLock::new();
    RE.get_or_init(|| {
        Regex::new(r"^([0-9][0-9][0-9][0-9])-([0-9][0-9])-([0-9][0-9])$")
            .unwrap_or_else(|_| unreachable!())
    })
}

fn timestamp_pattern() -> &'static Regex {
    static RE: OnceLock<Regex> = OnceLock::new();
    RE.get_or_init(|| {
        Regex::new(concat!(
            r"^([0-9][0-9][0-9][0-9])-([0-9][0-9]?)-([0-9][0-9]?)",
            r"(?:[Tt]|[ \t]+)([0-9][0-9]?):([0-9][0-9]):([0-9][0-9])(?:\.([0-9]*))?",
            r"(?:[ \t]*(Z|([-+])([0-9][0-9]?)(?::([0-9][0-9]))?))?$"
        ))
        .unwrap_or_else(|_| unreachable!())
    })
}

/// js-yaml's `constructYamlTimestamp`, in milliseconds since the epoch.
fn resolve_timestamp(text: &str) -> Option<f64> {
    let number = |s: Option<regex::Match<'_>>| -> f64 {
        s.and_then(|m| m.as_str().parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    if let Some(found) = date_pattern().captures(text) {
        return Some(date_utc(
            number(found.get(1)),
            number(found.get(2)) - 1.0,
            number(found.get(3)),
            0.0,
            0.0,
            0.0,
            0.0,
        ));
    }
    let found = timestamp_pattern().captures(text)?;
    let mut fraction = 0.0;
    if let Some(digits) = found.get(7) {
        let mut digits: String = digits.as_str().chars().take(3).collect();
        while digits.len() < 3 {
            digits.push('0');
        }
        fraction = digits.parse::<f64>().unwrap_or(0.0);
    }
    let mut ms = date_utc(
        number(found.get(1)),
        number(found.get(2)) - 1.0,
        number(found.get(3)),
        number(found.get(4)),
        number(found.get(5)),
        number(found.get(6)),
        fraction,
    );
    if found.get(9).is_some() {
        let delta = (number(found.get(10)) * 60.0 + number(found.get(11))) * 60_000.0;
        if found.get(9).map(|m| m.as_str()) == Some("-") {
            ms += delta;
        } else {
            ms -= delta;
        }
    }
    Some(ms)
}

/// JavaScript's `Date.UTC` (years 0–99 mean 1900–1999).
fn date_utc(year: f64, month: f64, day: f64, hour: f64, minute: f64, second: f64, ms: f64) -> f64 {
    let year = if (0.0..=99.0).contains(&year) {
        1900.0 + year
    } else {
        year
    };
    let year = year + (month / 12.0).floor();
    let month = month.rem_euclid(12.0);
    let days = days_from_civil(year as i64, month as i64 + 1, 1) as f64 + day - 1.0;
    days * 86_400_000.0 + hour * 3_600_000.0 + minute * 60_000.0 + second * 1000.0 + ms
}

/// Days since 1970-01-01 of a proleptic Gregorian date.
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let year = if month <= 2 { year - 1 } else { year };
    let era = year.div_euclid(400);
    let yoe = year - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The date of a day count since 1970-01-01.
fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

/// JavaScript's `Date#toISOString`.
fn iso_string(ms: f64) -> String {
    let ms = ms as i64;
    let days = ms.div_euclid(86_400_000);
    let rest = ms.rem_euclid(86_400_000);
    let (year, month, day) = civil_from_days(days);
    let year_text = if (0..=9999).contains(&year) {
        format!("{year:04}")
    } else if year < 0 {
        format!("-{:06}", -year)
    } else {
        format!("+{year:06}")
    };
    format!(
        "{year_text}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        rest / 3_600_000,
        rest / 60_000 % 60,
        rest / 1000 % 60,
        rest % 1000
    )
}

/// JavaScript's `Number#toString()`.
pub(crate) fn number_to_string(value: f64) -> String {
    if value.is_nan() {
        return "NaN".to_owned();
    }
    if value == 0.0 {
        return "0".to_owned();
    }
    if value.is_infinite() {
        return if value > 0.0 { "Infinity" } else { "-Infinity" }.to_owned();
    }
    let sign = if value < 0.0 { "-" } else { "" };
    // Shortest round-trip digits and exponent, as `{:e}` gives them.
    let formatted = format!("{:e}", value.abs());
    let (mantissa, exponent) = formatted.split_once('e').unwrap_or((&formatted, "0"));
    let digits: String = mantissa.chars().filter(|c| *c != '.').collect();
    let exponent: i64 = exponent.parse().unwrap_or(0);
    let k = digits.len() as i64;
    let n = exponent + 1;
    let body = if k <= n && n <= 21 {
        format!("{digits}{}", "0".repeat((n - k) as usize))
    } else if 0 < n && n <= 21 {
        format!("{}.{}", &digits[..n as usize], &digits[n as usize..])
    } else if -6 < n && n <= 0 {
        format!("0.{}{digits}", "0".repeat((-n) as usize))
    } else {
        let exp = n - 1;
        let exp_text = if exp >= 0 {
            format!("+{exp}")
        } else {
            exp.to_string()
        };
        if k == 1 {
            format!("{digits}e{exp_text}")
        } else {
            format!("{}.{}e{exp_text}", &digits[..1], &digits[1..])
        }
    };
    format!("{sign}{body}")
}

/// js-yaml's text for a number: integers as `toString`, other numbers as
/// `representYamlFloat`.
fn number_text(value: f64) -> String {
    if value.is_nan() {
        return ".nan".to_owned();
    }
    if value.is_infinite() {
        return if value > 0.0 { ".inf" } else { "-.inf" }.to_owned();
    }
    if value == 0.0 && value.is_sign_negative() {
        return "-0.0".to_owned();
    }
    let text = number_to_string(value);
    if value.fract() == 0.0 {
        return text;
    }
    let digits_then_e = text
        .trim_start_matches(['-', '+'])
        .split_once('e')
        .is_some_and(|(mantissa, _)| {
            !mantissa.is_empty() && mantissa.bytes().all(|b| b.is_ascii_digit())
        });
    if digits_then_e {
        text.replacen('e', ".e", 1)
    } else {
        text
    }
}

/// js-yaml's `isPrintable` on a UTF-16 code unit.
fn printable(c: u32) -> bool {
    (0x20..=0x7E).contains(&c)
        || ((0xA1..=0xD7FF).contains(&c) && c != 0x2028 && c != 0x2029)
        || ((0xE000..=0xFFFD).contains(&c) && c != 0xFEFF)
        || (0x10000..=0x10FFFF).contains(&c)
}

fn is_whitespace(c: u32) -> bool {
    c == 0x20 || c == 0x09
}

/// js-yaml's `isPlainSafeFirst`.
fn plain_safe_first(c: u32) -> bool {
    printable(c)
        && c != 0xFEFF
        && !is_whitespace(c)
        && !matches!(
            char::from_u32(c),
            Some(
                '-' | '?'
                    | ':'
                    | ','
                    | '['
                    | ']'
                    | '{'
                    | '}'
                    | '#'
                    | '&'
                    | '*'
                    | '!'
                    | '|'
                    | '='
                    | '>'
                    | '\''
                    | '"'
                    | '%'
                    | '@'
                    | '`'
            )
        )
}

/// js-yaml's `isNsChar`.
fn ns_char(c: u32) -> bool {
    printable(c) && !is_whitespace(c) && c != 0xFEFF && c != 0x0A && c != 0x0D
}

/// js-yaml's `isPlainSafe`.
fn plain_safe(c: u32, previous: Option<u32>) -> bool {
    printable(c)
        && c != 0xFEFF
        && !matches!(char::from_u32(c), Some(',' | '[' | ']' | '{' | '}' | ':'))
        && (c != u32::from('#') || previous.is_some_and(ns_char))
}

/// The style js-yaml writes a string in (`chooseScalarStyle` with
/// `lineWidth: -1`, after the empty and YAML 1.1 boolean special cases).
pub(crate) fn string_style(text: &str, is_key: bool) -> Style {
    if text.is_empty() {
        return Style::SINGLE_QUOTED;
    }
    const OLD_BOOLEANS: [&str; 16] = [
        "y", "Y", "yes", "Yes", "YES", "on", "On", "ON", "n", "N", "no", "No", "NO", "off", "Off",
        "OFF",
    ];
    if OLD_BOOLEANS.contains(&text) {
        return Style::SINGLE_QUOTED;
    }
    let units: Vec<u32> = text.encode_utf16().map(u32::from).collect();
    let first = units.first().copied().unwrap_or(0);
    let last = units.last().copied().unwrap_or(0);
    let mut plain = plain_safe_first(first) && !is_whitespace(last);
    let mut line_break = false;
    for (i, &c) in units.iter().enumerate() {
        if c == 0x0A && !is_key {
            line_break = true;
        } else if !printable(c) {
            return Style::DOUBLE_QUOTED;
        }
        let previous = i.checked_sub(1).map(|p| units[p]);
        plain = plain && plain_safe(c, previous);
    }
    if !line_break {
        return if plain && !ambiguous(text) {
            Style::PLAIN
        } else {
            Style::SINGLE_QUOTED
        };
    }
    Style::LITERAL
}

/// A string scalar as kyaml reads js-yaml's output of it.
pub(crate) fn string_node(text: &str, is_key: bool) -> Node {
    let mut node = Node::new_string(text);
    node.style = string_style(text, is_key);
    if node.style == Style::PLAIN {
        // Plain text kyaml reads with its own (YAML 1.2) rules.
        node.set_tag(resolve_plain(text));
    }
    node
}

fn plain_node(text: String) -> Node {
    let resolved = resolve_plain(&text);
    Node::new_scalar(resolved, text)
}

/// The node kyaml reads from js-yaml's dump of a value.
pub(crate) fn to_node(value: &Js) -> Node {
    match value {
        Js::Null => plain_node("null".to_owned()),
        Js::Bool(value) => plain_node(value.to_string()),
        Js::Num(value) => plain_node(number_text(*value)),
        Js::Date(ms) => plain_node(iso_string(*ms)),
        Js::Str(text) => string_node(text, false),
        Js::Arr(items) => {
            let mut node = Node::new_sequence();
            if items.is_empty() {
                node.style = Style::FLOW;
            }
            node.content = items.iter().map(to_node).collect();
            node
        }
        Js::Obj(object) => {
            let mut node = Node::new_mapping();
            if object.is_empty() {
                node.style = Style::FLOW;
            }
            for (key, value) in object.ordered() {
                node.push_pair(string_node(key, true), to_node(value));
            }
            node
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_print_as_javascript_does() {
        for (value, text) in [
            (1.0, "1"),
            (1.5, "1.5"),
            (-0.25, "-0.25"),
            (1e21, "1e+21"),
            (123456789012.0, "123456789012"),
            (1e-7, "1e-7"),
            (0.000001, "0.000001"),
            (1.25e-8, "1.25e-8"),
            (12345678901234567890.0, "12345678901234567000"),
        ] {
            assert_eq!(number_to_string(value), text, "{value}");
        }
        assert_eq!(number_text(1e-7), "1.e-7");
        assert_eq!(number_text(-0.0), "-0.0");
        assert_eq!(number_text(f64::NEG_INFINITY), "-.inf");
    }

    #[test]
    fn plain_scalars_resolve_as_js_yaml() {
        assert_eq!(resolve("010"), Some(Js::Num(8.0)));
        assert_eq!(resolve("0x1F"), Some(Js::Num(31.0)));
        assert_eq!(resolve("1_000"), Some(Js::Num(1000.0)));
        assert_eq!(resolve("1:30"), Some(Js::Num(90.0)));
        assert_eq!(resolve("1e3"), Some(Js::Num(1000.0)));
        assert_eq!(resolve("yes"), None);
        assert_eq!(resolve("0o17"), None);
        assert_eq!(resolve("~"), Some(Js::Null));
        assert_eq!(
            resolve("2001-12-14").map(|value| value.to_js_string()),
            Some("2001-12-14T00:00:00.000Z".to_owned())
        );
        assert_eq!(
            resolve("2001-12-14t21:59:43.10-05:00").map(|value| value.to_js_string()),
            Some("2001-12-15T02:59:43.100Z".to_owned())
        );
    }

    #[test]
    fn strings_take_js_yaml_styles() {
        for (text, style) in [
            ("plain", Style::PLAIN),
            ("", Style::SINGLE_QUOTED),
            ("yes", Style::SINGLE_QUOTED),
            ("123", Style::SINGLE_QUOTED),
            ("nginx:1.0", Style::SINGLE_QUOTED),
            ("a #b", Style::SINGLE_QUOTED),
            ("a#b", Style::PLAIN),
            ("-x", Style::SINGLE_QUOTED),
            ("trailing ", Style::SINGLE_QUOTED),
            ("tab\there", Style::DOUBLE_QUOTED),
            ("two\nlines", Style::LITERAL),
            ("0o17", Style::PLAIN),
        ] {
            assert_eq!(string_style(text, false), style, "{text:?}");
        }
        assert_eq!(string_style("two\nlines", true), Style::DOUBLE_QUOTED);
    }

    #[test]
    fn object_keys_enumerate_in_javascript_order() {
        let mut object = JsObject::default();
        object.set("b", Js::Null);
        object.set("10", Js::Null);
        object.set("a", Js::Null);
        object.set("2", Js::Null);
        object.set("01", Js::Null);
        let keys: Vec<&str> = object.ordered().into_iter().map(|(key, _)| key).collect();
        assert_eq!(keys, ["2", "10", "b", "a", "01"]);
    }
}
