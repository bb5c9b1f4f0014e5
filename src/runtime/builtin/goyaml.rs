//! What go-yaml v3 does with Go values, as the catalog's Go functions see
//! it: the integer and float forms it reads, how `strconv` formats a float,
//! and how `Marshal` styles a string. Shared by the builtins that decode a
//! scalar to a Go number or build nodes from Go values.

use crate::yaml::node::{Node, Style};

/// go-yaml v3's integer forms: decimal, `0b`, `0o`, `0x`, underscores.
pub(crate) fn parse_go_int(text: &str) -> Option<i64> {
    let cleaned: String = text.chars().filter(|&c| c != '_').collect();
    let (negative, digits) = match cleaned.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, cleaned.strip_prefix('+').unwrap_or(&cleaned)),
    };
    let (radix, digits) = if let Some(rest) = digits.strip_prefix("0x") {
        (16, rest)
    } else if let Some(rest) = digits.strip_prefix("0o") {
        (8, rest)
    } else if let Some(rest) = digits.strip_prefix("0b") {
        (2, rest)
    } else if digits.len() > 1 && digits.starts_with('0') {
        (8, &digits[1..])
    } else {
        (10, digits)
    };
    let magnitude = i128::from_str_radix(digits, radix).ok()?;
    let value = if negative { -magnitude } else { magnitude };
    i64::try_from(value).ok()
}

/// go-yaml v3's float forms, `.inf` and `.nan` spellings included.
pub(crate) fn parse_go_float(text: &str) -> Option<f64> {
    match text {
        ".inf" | ".Inf" | ".INF" | "+.inf" | "+.Inf" | "+.INF" => Some(f64::INFINITY),
        "-.inf" | "-.Inf" | "-.INF" => Some(f64::NEG_INFINITY),
        ".nan" | ".NaN" | ".NAN" => Some(f64::NAN),
        _ => text.replace('_', "").parse().ok(),
    }
}

/// A string scalar as go-yaml v3 `Marshal` styles it.
pub(crate) fn string_node(text: &str) -> Node {
    let mut node = Node::new_string(text);
    if text.contains('\n') {
        node.style = Style::LITERAL;
    } else if !crate::yaml::marshal::can_use_plain(text) {
        node.style = Style::DOUBLE_QUOTED;
    }
    node
}

/// Go's `strconv.FormatFloat(f, 'g', -1, 64)` with go-yaml's spellings of
/// the special values.
pub(crate) fn go_format_float(value: f64) -> String {
    if value.is_nan() {
        return ".nan".to_owned();
    }
    if value.is_infinite() {
        return if value > 0.0 { ".inf" } else { "-.inf" }.to_owned();
    }
    if value == 0.0 {
        return if value.is_sign_negative() { "-0" } else { "0" }.to_owned();
    }
    // Rust's `{:e}` gives the shortest round-tripping digits, as Go's -1
    // precision does; only the layout differs.
    let scientific = format!("{value:e}");
    let (mantissa, exponent) = scientific
        .split_once('e')
        .unwrap_or((scientific.as_str(), "0"));
    let exponent: i32 = exponent.parse().unwrap_or(0);
    let negative = mantissa.starts_with('-');
    let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    let sign = if negative { "-" } else { "" };
    if !(-4..6).contains(&exponent) {
        let (first, rest) = digits.split_at(1);
        let fraction = if rest.is_empty() {
            String::new()
        } else {
            format!(".{rest}")
        };
        let exp_sign = if exponent < 0 { '-' } else { '+' };
        return format!("{sign}{first}{fraction}e{exp_sign}{:02}", exponent.abs());
    }
    let point = exponent + 1;
    if point <= 0 {
        let zeros = "0".repeat(point.unsigned_abs() as usize);
        return format!("{sign}0.{zeros}{digits}");
    }
    let point = point as usize;
    if digits.len() <= point {
        let zeros = "0".repeat(point - digits.len());
        format!("{sign}{digits}{zeros}")
    } else {
        let (whole, fraction) = digits.split_at(point);
        format!("{sign}{whole}.{fraction}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn floats_format_like_go() {
        let cases = [
            (2.0, "2"),
            (0.5, "0.5"),
            (1e6, "1e+06"),
            (123456.0, "123456"),
            (1234567.0, "1.234567e+06"),
            (1e-5, "1e-05"),
            (0.0001, "0.0001"),
            (-2.5, "-2.5"),
        ];
        for (value, expected) in cases {
            assert_eq!(go_format_float(value), expected, "{value}");
        }
    }

    #[test]
    fn base60_and_old_bools_are_quoted() {
        assert!(!crate::yaml::marshal::can_use_plain("1:20"));
        assert!(crate::yaml::marshal::can_use_plain("1:2a"));
        assert_eq!(string_node("yes").style, Style::DOUBLE_QUOTED);
        assert_eq!(string_node("plain").style, Style::PLAIN);
        assert_eq!(string_node("a\nb").style, Style::LITERAL);
    }
}
