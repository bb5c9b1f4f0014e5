//! PyYAML's reading of plain scalars (YAML 1.1), which is Deckhand's and
//! Pegleg's: a layered document set means what PyYAML makes of it, not what
//! go-yaml (YAML 1.2) does. `on`, `yes` and `off` are booleans, `0777` and
//! `0x1F` are integers, `1:20` is 80, `0o17` is a string, and `=` is the
//! `value` tag, which PyYAML's safe loader cannot construct.
//!
//! The rules are PyYAML's `Resolver` (`resolver.py`): per first character,
//! the first implicit resolver whose pattern matches decides, in the order
//! bool, float, int, merge, null, timestamp, value. The numbers are built as
//! `SafeConstructor` builds them (`construct_yaml_int`/`_float`).

use std::sync::LazyLock;

use regex::Regex;

use crate::yaml::node::tag;

/// The `value` tag (`=`); no safe loader constructs it.
pub(crate) const VALUE: &str = "tag:yaml.org,2002:value";

static BOOL: LazyLock<Regex> = LazyLock::new(|| {
    regex(r"^(?:yes|Yes|YES|no|No|NO|true|True|TRUE|false|False|FALSE|on|On|ON|off|Off|OFF)$")
});
static FLOAT: LazyLock<Regex> = LazyLock::new(|| {
    regex(concat!(
        r"^(?:[-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+][0-9]+)?",
        r"|\.[0-9][0-9_]*(?:[eE][-+][0-9]+)?",
        r"|[-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+\.[0-9_]*",
        r"|[-+]?\.(?:inf|Inf|INF)",
        r"|\.(?:nan|NaN|NAN))$"
    ))
});
static INT: LazyLock<Regex> = LazyLock::new(|| {
    regex(concat!(
        r"^(?:[-+]?0b[0-1_]+",
        r"|[-+]?0[0-7_]+",
        r"|[-+]?(?:0|[1-9][0-9_]*)",
        r"|[-+]?0x[0-9a-fA-F_]+",
        r"|[-+]?[1-9][0-9_]*(?::[0-5]?[0-9])+)$"
    ))
});
static NULL: LazyLock<Regex> = LazyLock::new(|| regex(r"^(?:~|null|Null|NULL|)$"));
static TIMESTAMP: LazyLock<Regex> = LazyLock::new(|| {
    regex(concat!(
        r"^(?:[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]",
        r"|[0-9][0-9][0-9][0-9]-[0-9][0-9]?-[0-9][0-9]?",
        r"(?:[Tt]|[ \t]+)[0-9][0-9]?",
        r":[0-9][0-9]:[0-9][0-9](?:\.[0-9]*)?",
        r"(?:[ \t]*(?:Z|[-+][0-9][0-9]?(?::[0-9][0-9])?))?)$"
    ))
});

/// The patterns are fixed and known to compile; a failure would be a typo
/// caught by the tests, so it falls back to a pattern matching nothing.
fn regex(pattern: &str) -> Regex {
    Regex::new(pattern).unwrap_or_else(|_| Regex::new(r"[^\s\S]").expect("a valid empty class"))
}

/// The tag PyYAML gives a plain scalar with this text.
pub(crate) fn resolve(text: &str) -> &'static str {
    let first = text.chars().next();
    let candidates: &[(&LazyLock<Regex>, &'static str)] = match first {
        None => return tag::NULL,
        Some('y' | 'Y' | 'n' | 'N' | 't' | 'T' | 'f' | 'F' | 'o' | 'O') => {
            &[(&BOOL, tag::BOOL), (&NULL, tag::NULL)]
        }
        Some('-' | '+') => &[(&FLOAT, tag::FLOAT), (&INT, tag::INT)],
        Some('.') => &[(&FLOAT, tag::FLOAT)],
        Some('0'..='9') => &[
            (&FLOAT, tag::FLOAT),
            (&INT, tag::INT),
            (&TIMESTAMP, tag::TIMESTAMP),
        ],
        Some('~') => &[(&NULL, tag::NULL)],
        Some('<') if text == "<<" => return tag::MERGE,
        Some('=') if text == "=" => return VALUE,
        _ => return tag::STR,
    };
    candidates
        .iter()
        .find(|(pattern, _)| pattern.is_match(text))
        .map_or(tag::STR, |&(_, found)| found)
}

/// True when a string written plain would not read back as that string.
pub(crate) fn needs_quotes(text: &str) -> bool {
    resolve(text) != tag::STR
}

/// `construct_yaml_bool`.
pub(crate) fn parse_bool(text: &str) -> bool {
    matches!(text.to_ascii_lowercase().as_str(), "yes" | "true" | "on")
}

/// `construct_yaml_int`: `_` removed; `0b`, `0x`, a leading `0` (octal) and
/// base 60 (`1:20`).
pub(crate) fn parse_int(text: &str) -> Option<i128> {
    let plain: String = text.chars().filter(|&c| c != '_').collect();
    let (sign, digits) = match plain.as_bytes().first() {
        Some(b'-') => (-1, &plain[1..]),
        Some(b'+') => (1, &plain[1..]),
        _ => (1, plain.as_str()),
    };
    let magnitude = if digits == "0" {
        0
    } else if let Some(binary) = digits.strip_prefix("0b") {
        i128::from_str_radix(binary, 2).ok()?
    } else if let Some(hex) = digits.strip_prefix("0x") {
        i128::from_str_radix(hex, 16).ok()?
    } else if let Some(octal) = digits.strip_prefix('0') {
        i128::from_str_radix(octal, 8).ok()?
    } else if digits.contains(':') {
        digits.split(':').try_fold(0i128, |total, part| {
            total
                .checked_mul(60)?
                .checked_add(part.parse::<i128>().ok()?)
        })?
    } else {
        digits.parse().ok()?
    };
    Some(sign * magnitude)
}

/// `construct_yaml_float`: `_` removed, `.inf`/`.nan` in any case, base 60.
pub(crate) fn parse_float(text: &str) -> Option<f64> {
    let plain: String = text
        .chars()
        .filter(|&c| c != '_')
        .collect::<String>()
        .to_ascii_lowercase();
    let (sign, digits) = match plain.as_bytes().first() {
        Some(b'-') => (-1.0, &plain[1..]),
        Some(b'+') => (1.0, &plain[1..]),
        _ => (1.0, plain.as_str()),
    };
    let magnitude = match digits {
        ".inf" => f64::INFINITY,
        ".nan" => return Some(f64::NAN),
        _ if digits.contains(':') => {
            let mut total = 0.0;
            for part in digits.split(':') {
                total = total * 60.0 + part.parse::<f64>().ok()?;
            }
            total
        }
        // Python's float() takes `1.`, `.5` and `1.5e+3`; Rust's too.
        _ => digits.parse().ok()?,
    };
    Some(sign * magnitude)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// PyYAML's answers (`yaml.safe_load`), including where go-yaml differs.
    #[test]
    fn plain_scalars_resolve_as_pyyaml_reads_them() {
        for (text, expected) in [
            ("on", tag::BOOL),
            ("Off", tag::BOOL),
            ("yes", tag::BOOL),
            ("NO", tag::BOOL),
            ("y", tag::STR),
            ("n", tag::STR),
            ("oN", tag::STR),
            ("0777", tag::INT),
            ("0x0C0000300000C00003", tag::INT),
            ("0b101", tag::INT),
            ("0o17", tag::STR),
            ("1:20", tag::INT),
            ("1_000", tag::INT),
            ("09", tag::STR),
            ("1e3", tag::STR),
            ("1.0e+3", tag::FLOAT),
            ("1.5", tag::FLOAT),
            ("1.", tag::FLOAT),
            (".5", tag::FLOAT),
            ("1:20.5", tag::FLOAT),
            ("-.inf", tag::FLOAT),
            (".NaN", tag::FLOAT),
            ("~", tag::NULL),
            ("", tag::NULL),
            ("Null", tag::NULL),
            ("2001-12-14", tag::TIMESTAMP),
            ("2001-12-14t21:59:43.10-05:00", tag::TIMESTAMP),
            ("=", VALUE),
            ("<<", tag::MERGE),
            ("==", tag::STR),
            ("10.0.0.1", tag::STR),
            ("v1", tag::STR),
        ] {
            assert_eq!(resolve(text), expected, "{text:?}");
        }
    }

    #[test]
    fn numbers_are_built_as_pyyaml_builds_them() {
        assert_eq!(parse_int("0777"), Some(511));
        assert_eq!(parse_int("-0x1F"), Some(-31));
        assert_eq!(parse_int("0b1_01"), Some(5));
        assert_eq!(parse_int("1:20"), Some(80));
        assert_eq!(parse_int("190:20:30"), Some(685_230));
        assert_eq!(parse_int("+1_000"), Some(1000));
        assert_eq!(parse_int("0"), Some(0));
        assert_eq!(parse_float("1:20.5"), Some(80.5));
        assert_eq!(parse_float("-.INF"), Some(f64::NEG_INFINITY));
        assert_eq!(parse_float("6.8523015e+5"), Some(685_230.15));
        assert!(parse_float(".nan").is_some_and(f64::is_nan));
        assert!(parse_bool("On") && parse_bool("YES") && !parse_bool("off"));
    }

    #[test]
    fn strings_that_would_read_back_as_something_else_need_quotes() {
        for text in [
            "=",
            "0x0C0000300000C00003",
            "on",
            "0777",
            "1:20",
            "~",
            "",
            "<<",
        ] {
            assert!(needs_quotes(text), "{text:?}");
        }
        for text in ["y", "0o17", "1e3", "a=b", "v1.2"] {
            assert!(!needs_quotes(text), "{text:?}");
        }
    }
}
