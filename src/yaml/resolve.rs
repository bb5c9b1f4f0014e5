//! go-yaml v3's implicit tag resolution for plain scalars.
//!
//! The parser uses it to tag plain scalars, the encoder to decide whether a
//! `!!str` value must be quoted to read back as a string, and the typed
//! decoder to decide what a plain scalar means. Only go-yaml v3's YAML 1.2-ish
//! rules apply here: `yes`/`no`/`on`/`off` are strings, `0777` is an int, and
//! `<<` resolves to `!!str` (the source of the `!!merge <<` quirk).

use super::node::tag;

/// The tag go-yaml v3 gives a plain scalar with this text.
pub fn resolve_plain(value: &str) -> &'static str {
    let Some(&first) = value.as_bytes().first() else {
        return tag::NULL;
    };
    match first {
        b'y' | b'Y' | b'n' | b'N' | b't' | b'T' | b'f' | b'F' | b'o' | b'O' | b'~' => {
            lookup_table(value).unwrap_or(tag::STR)
        }
        b'.' => {
            if let Some(found) = lookup_table(value) {
                found
            } else if is_dot_float(value) {
                tag::FLOAT
            } else {
                tag::STR
            }
        }
        b'0'..=b'9' | b'+' | b'-' => {
            if let Some(found) = lookup_table(value) {
                return found;
            }
            if is_timestamp(value) {
                return tag::TIMESTAMP;
            }
            // Go's number syntax skips `_`; only such text needs a copy (the
            // encoder resolves every tagged scalar it writes).
            let plain: std::borrow::Cow<'_, str> = if value.contains('_') {
                std::borrow::Cow::Owned(value.replace('_', ""))
            } else {
                std::borrow::Cow::Borrowed(value)
            };
            if is_go_int(&plain) {
                return tag::INT;
            }
            if is_yaml_style_float(&plain) && plain.parse::<f64>().is_ok_and(f64::is_finite) {
                return tag::FLOAT;
            }
            tag::STR
        }
        _ => tag::STR,
    }
}

/// True if a plain scalar with this text would be read as something other
/// than a string.
pub fn is_non_string(value: &str) -> bool {
    resolve_plain(value) != tag::STR
}

fn lookup_table(value: &str) -> Option<&'static str> {
    Some(match value {
        "true" | "True" | "TRUE" | "false" | "False" | "FALSE" => tag::BOOL,
        "~" | "null" | "Null" | "NULL" => tag::NULL,
        ".nan" | ".NaN" | ".NAN" | ".inf" | ".Inf" | ".INF" | "+.inf" | "+.Inf" | "+.INF"
        | "-.inf" | "-.Inf" | "-.INF" => tag::FLOAT,
        _ => return None,
    })
}

/// Go's `strconv.ParseFloat` on text starting with `.`: digits, optional exponent.
fn is_dot_float(value: &str) -> bool {
    let rest = &value[1..];
    let (mantissa, exponent) = split_exponent(rest);
    !mantissa.is_empty()
        && mantissa.bytes().all(|b| b.is_ascii_digit())
        && exponent.is_none_or(is_signed_digits)
}

/// `^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$`
fn is_yaml_style_float(value: &str) -> bool {
    let unsigned = value.strip_prefix(['-', '+']).unwrap_or(value);
    let (mantissa, exponent) = split_exponent(unsigned);
    let mantissa_ok = if let Some(fraction) = mantissa.strip_prefix('.') {
        !fraction.is_empty() && fraction.bytes().all(|b| b.is_ascii_digit())
    } else {
        let (int_part, fraction) = mantissa.split_once('.').unwrap_or((mantissa, ""));
        !int_part.is_empty()
            && int_part.bytes().all(|b| b.is_ascii_digit())
            && fraction.bytes().all(|b| b.is_ascii_digit())
    };
    mantissa_ok && exponent.is_none_or(is_signed_digits)
}

fn split_exponent(text: &str) -> (&str, Option<&str>) {
    match text.find(['e', 'E']) {
        Some(i) => (&text[..i], Some(&text[i + 1..])),
        None => (text, None),
    }
}

fn is_signed_digits(text: &str) -> bool {
    let digits = text.strip_prefix(['-', '+']).unwrap_or(text);
    !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit())
}

/// Go's `strconv.ParseInt(s, 0, 64)` or `ParseUint(s, 0, 64)` succeeding, or
/// go-yaml's extra `0b`/`0o` handling (which `ParseInt` with base 0 already covers).
fn is_go_int(text: &str) -> bool {
    let (negative, unsigned) = match text.as_bytes().first() {
        Some(b'-') => (true, &text[1..]),
        Some(b'+') => (false, &text[1..]),
        _ => (false, text),
    };
    let (radix, digits) = if let Some(d) = unsigned
        .strip_prefix("0x")
        .or_else(|| unsigned.strip_prefix("0X"))
    {
        (16, d)
    } else if let Some(d) = unsigned
        .strip_prefix("0o")
        .or_else(|| unsigned.strip_prefix("0O"))
    {
        (8, d)
    } else if let Some(d) = unsigned
        .strip_prefix("0b")
        .or_else(|| unsigned.strip_prefix("0B"))
    {
        (2, d)
    } else if unsigned.len() > 1 && unsigned.starts_with('0') {
        (8, &unsigned[1..])
    } else {
        (10, unsigned)
    };
    if digits.is_empty() || !digits.chars().all(|c| c.is_digit(radix)) {
        return false;
    }
    match u64::from_str_radix(digits, radix) {
        // ParseInt allows magnitudes up to 2^63 for negatives; ParseUint
        // allows the whole u64 range for non-negatives.
        Ok(magnitude) => !negative || magnitude <= 1u64 << 63,
        Err(_) => false,
    }
}

/// go-yaml's timestamp check: `YYYY-` prefix, then one of its four layouts.
fn is_timestamp(value: &str) -> bool {
    let bytes = value.as_bytes();
    let year_digits = bytes.iter().take_while(|b| b.is_ascii_digit()).count();
    if year_digits != 4 || bytes.get(4) != Some(&b'-') {
        return false;
    }
    let mut cursor = Cursor {
        text: value,
        pos: 5,
    };
    let Some(month) = cursor.number(1, 2) else {
        return false;
    };
    if !cursor.eat('-') {
        return false;
    }
    let Some(day) = cursor.number(1, 2) else {
        return false;
    };
    let year: u32 = value[..4].parse().unwrap_or(0);
    if !(1..=12).contains(&month) || day < 1 || day > days_in_month(year, month) {
        return false;
    }
    if cursor.done() {
        return true;
    }
    let with_zone = if cursor.eat('T') || cursor.eat('t') {
        true
    } else if cursor.eat(' ') {
        false
    } else {
        return false;
    };
    if !cursor.clock() {
        return false;
    }
    if with_zone {
        if cursor.eat('Z') {
            return cursor.done();
        }
        if !(cursor.eat('+') || cursor.eat('-')) {
            return false;
        }
        let hours = cursor.number(2, 2);
        let colon = cursor.eat(':');
        let minutes = cursor.number(2, 2);
        matches!((hours, colon, minutes), (Some(h), true, Some(m)) if h < 24 && m < 60)
            && cursor.done()
    } else {
        cursor.done()
    }
}

fn days_in_month(year: u32, month: u32) -> u32 {
    match month {
        2 if year.is_multiple_of(4) && (!year.is_multiple_of(100) || year.is_multiple_of(400)) => {
            29
        }
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

struct Cursor<'a> {
    text: &'a str,
    pos: usize,
}

impl Cursor<'_> {
    fn done(&self) -> bool {
        self.pos == self.text.len()
    }

    fn eat(&mut self, c: char) -> bool {
        if self.text[self.pos..].starts_with(c) {
            self.pos += c.len_utf8();
            true
        } else {
            false
        }
    }

    fn number(&mut self, min: usize, max: usize) -> Option<u32> {
        let digits = self.text.as_bytes()[self.pos..]
            .iter()
            .take(max)
            .take_while(|b| b.is_ascii_digit())
            .count();
        if digits < min {
            return None;
        }
        let n = self.text[self.pos..self.pos + digits].parse().ok()?;
        self.pos += digits;
        Some(n)
    }

    /// `15:4:5` with an optional `.fraction`, as Go's layout parses it.
    fn clock(&mut self) -> bool {
        let Some(hour) = self.number(1, 2) else {
            return false;
        };
        if !self.eat(':') {
            return false;
        }
        let Some(minute) = self.number(1, 2) else {
            return false;
        };
        if !self.eat(':') {
            return false;
        }
        let Some(second) = self.number(1, 2) else {
            return false;
        };
        if self.eat('.') && self.number(1, 9).is_none() {
            return false;
        }
        hour < 24 && minute < 60 && second < 60
    }
}

/// Parses a YAML int the way go-yaml resolves it (`strconv.ParseInt` with
/// base 0 after removing `_`): decimal, `0x`, `0o`, `0b`, and a leading `0`
/// for octal.
pub(crate) fn parse_int(text: &str) -> Option<i128> {
    let plain: String = text.chars().filter(|&c| c != '_').collect();
    let (negative, unsigned) = match plain.as_bytes().first() {
        Some(b'-') => (true, &plain[1..]),
        Some(b'+') => (false, &plain[1..]),
        _ => (false, plain.as_str()),
    };
    let lower = unsigned.to_ascii_lowercase();
    let (radix, digits) = if let Some(rest) = lower.strip_prefix("0x") {
        (16, rest)
    } else if let Some(rest) = lower.strip_prefix("0o") {
        (8, rest)
    } else if let Some(rest) = lower.strip_prefix("0b") {
        (2, rest)
    } else if lower.len() > 1 && lower.starts_with('0') {
        (8, &lower[1..])
    } else {
        (10, lower.as_str())
    };
    let magnitude = i128::from_str_radix(digits, radix).ok()?;
    Some(if negative { -magnitude } else { magnitude })
}

/// A YAML float (`_` separators removed), including the `.inf` and `.nan`
/// spellings.
pub(crate) fn parse_float(text: &str) -> Option<f64> {
    let plain: String = text.chars().filter(|&c| c != '_').collect();
    match plain.to_ascii_lowercase().as_str() {
        ".inf" | "+.inf" => Some(f64::INFINITY),
        "-.inf" => Some(f64::NEG_INFINITY),
        ".nan" => Some(f64::NAN),
        other => other.parse().ok(),
    }
}

#[cfg(test)]
mod tests {
    use super::resolve_plain;
    use crate::yaml::node::tag;

    #[test]
    fn resolves_like_go_yaml_v3() {
        let cases = [
            ("", tag::NULL),
            ("~", tag::NULL),
            ("null", tag::NULL),
            ("true", tag::BOOL),
            ("False", tag::BOOL),
            ("yes", tag::STR),
            ("on", tag::STR),
            ("y", tag::STR),
            ("0777", tag::INT),
            ("012", tag::INT),
            ("08", tag::FLOAT),
            ("1e3", tag::FLOAT),
            ("1.0", tag::FLOAT),
            (".5", tag::FLOAT),
            (".inf", tag::FLOAT),
            ("-.Inf", tag::FLOAT),
            (".nan", tag::FLOAT),
            ("0x1F", tag::INT),
            ("0o17", tag::INT),
            ("0b101", tag::INT),
            ("1_000", tag::INT),
            ("-12", tag::INT),
            ("+12", tag::INT),
            ("1:20", tag::STR),
            ("2001-12-14", tag::TIMESTAMP),
            ("2001-12-14t21:59:43.10-05:00", tag::TIMESTAMP),
            ("2001-12-14 21:59:43.10", tag::TIMESTAMP),
            ("2001-13-14", tag::STR),
            ("<<", tag::STR),
            ("-", tag::STR),
            ("0.4.1", tag::STR),
            ("nginx:1.2.3", tag::STR),
            ("1e400", tag::STR),
            ("99999999999999999999", tag::FLOAT),
            ("18446744073709551615", tag::INT),
        ];
        for (text, expected) in cases {
            assert_eq!(resolve_plain(text), expected, "resolving {text:?}");
        }
    }
}
