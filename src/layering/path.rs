//! The JSONPath subset Deckhand documents use in action and substitution
//! paths: the root (`$` or `.`), `.key`, quoted keys (`.'a:b'`, `."a.b"`,
//! `['a']`) and list indexes (`key[3]`, `[0][1]`).
//!
//! Reading returns the first match (Deckhand's `jsonpath_parse`); writing
//! creates what is missing the way Deckhand's `jsonpath_replace` expands
//! data: empty mappings for missing keys, lists padded with empty mappings
//! for indexes.

use std::fmt;

use super::value::{Key, Map, Value};

/// The largest list index a write may pad a list up to: Deckhand pads
/// without limit, but a typo like `[99999999999]` must fail, not exhaust memory.
pub const MAX_CREATED_INDEX: usize = 1_000_000;

/// How many list entries the writes of one document may pad in all:
/// without it, fifty substitutions each writing `[999999]` took 4.9 GB.
pub const MAX_PADDING_PER_DOCUMENT: usize = 1_000_000;

/// What is left of a document's padding budget ([`MAX_PADDING_PER_DOCUMENT`]).
#[derive(Debug)]
pub struct Padding(usize);

impl Padding {
    /// A document's whole budget.
    pub fn per_document() -> Padding {
        Padding(MAX_PADDING_PER_DOCUMENT)
    }
}

/// One step of a path.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Segment {
    /// A mapping key.
    Field(String),
    /// A list index.
    Index(usize),
}

/// A parsed path. `segments` is empty for the root.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JsonPath {
    /// The steps from the root.
    pub segments: Vec<Segment>,
}

/// Why a path could not be parsed or written.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PathError {
    /// The text is not in the supported JSONPath subset.
    #[error("invalid path `{path}`: {reason}")]
    Syntax {
        /// The path text.
        path: String,
        /// What is wrong with it.
        reason: String,
    },
    /// Writing would pad a list beyond [`MAX_CREATED_INDEX`].
    #[error("list index {index} is too large to create (limit {MAX_CREATED_INDEX})")]
    IndexTooLarge {
        /// The index.
        index: usize,
    },
    /// The document's writes would pad lists beyond
    /// [`MAX_PADDING_PER_DOCUMENT`] entries in all.
    #[error(
        "list index {index} would pad the document's lists beyond {MAX_PADDING_PER_DOCUMENT} entries in all"
    )]
    PaddingBudget {
        /// The index.
        index: usize,
    },
    /// Writing needs a mapping or list where the data holds something else.
    #[error("cannot create `{segment}` in a {found} value")]
    NotAContainer {
        /// The segment that could not be created, as text.
        segment: String,
        /// The type found instead.
        found: &'static str,
    },
}

impl fmt::Display for Segment {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Segment::Field(name) => write!(f, ".{name}"),
            Segment::Index(index) => write!(f, "[{index}]"),
        }
    }
}

impl JsonPath {
    /// The root path (`$`).
    pub fn root() -> JsonPath {
        JsonPath {
            segments: Vec::new(),
        }
    }

    /// True for `$` / `.`.
    pub fn is_root(&self) -> bool {
        self.segments.is_empty()
    }

    /// Parses `$`, `.`, `$.a.b`, `.a[0].b`, `a.b` (a missing leading `.` is
    /// implied) and quoted keys.
    pub fn parse(text: &str) -> Result<JsonPath, PathError> {
        let syntax = |reason: &str| PathError::Syntax {
            path: text.to_owned(),
            reason: reason.to_owned(),
        };
        let rest = text.strip_prefix('$').unwrap_or(text);
        let chars: Vec<char> = rest.chars().collect();
        let mut segments = Vec::new();
        let mut pos = 0;
        // A path without a leading `.` starts with a key.
        let mut expect_key = !chars.is_empty() && chars[0] != '.' && chars[0] != '[';
        while pos < chars.len() || expect_key {
            if expect_key {
                expect_key = false;
                match chars.get(pos) {
                    None => {
                        // A trailing `.`: only the root may end this way.
                        if segments.is_empty() {
                            break;
                        }
                        return Err(syntax("ends with `.`"));
                    }
                    Some('[') => continue,
                    Some(&quote @ ('\'' | '"')) => {
                        let (name, next) = read_quoted(&chars, pos + 1, quote)
                            .ok_or_else(|| syntax("unterminated quote"))?;
                        segments.push(Segment::Field(name));
                        pos = next;
                    }
                    Some(_) => {
                        let start = pos;
                        while pos < chars.len() && chars[pos] != '.' && chars[pos] != '[' {
                            pos += 1;
                        }
                        let name: String = chars[start..pos].iter().collect();
                        if name.is_empty() {
                            return Err(syntax("empty key"));
                        }
                        segments.push(Segment::Field(name));
                    }
                }
                continue;
            }
            match chars[pos] {
                '.' => {
                    pos += 1;
                    expect_key = true;
                }
                '[' => {
                    let close = chars[pos..]
                        .iter()
                        .position(|&c| c == ']')
                        .map(|offset| pos + offset)
                        .ok_or_else(|| syntax("unterminated `[`"))?;
                    let inner: String = chars[pos + 1..close].iter().collect();
                    let inner = inner.trim();
                    if let Some(quoted) = inner
                        .strip_prefix('\'')
                        .and_then(|s| s.strip_suffix('\''))
                        .or_else(|| inner.strip_prefix('"').and_then(|s| s.strip_suffix('"')))
                    {
                        segments.push(Segment::Field(quoted.to_owned()));
                    } else {
                        let index = inner
                            .parse::<usize>()
                            .map_err(|_| syntax("only numeric indexes are supported"))?;
                        segments.push(Segment::Index(index));
                    }
                    pos = close + 1;
                }
                _ => return Err(syntax("expected `.` or `[`")),
            }
        }
        Ok(JsonPath { segments })
    }

    /// The first value at the path, if present. A null value is returned as
    /// such; callers that treat null as missing check for it.
    pub fn get<'a>(&self, data: &'a Value) -> Option<&'a Value> {
        self.segments
            .iter()
            .try_fold(data, |value, segment| match (segment, value) {
                (Segment::Field(name), Value::Map(map)) => map.get(&super::value::StrKey(name)),
                (Segment::Index(index), Value::Seq(items)) => items.get(*index),
                _ => None,
            })
    }

    /// The value at the path, or null when absent: Deckhand's
    /// `jsonpath_parse`, whose `None` means both.
    pub fn get_present<'a>(&self, data: &'a Value) -> Option<&'a Value> {
        self.get(data).filter(|value| !value.is_null())
    }

    /// A mutable slot at the path, creating what is missing on the way as
    /// Deckhand's data expansion does: an absent key becomes `{}`, or `[]`
    /// when an index follows it, and a list too short for an index is padded
    /// with `{}`. Fails where a scalar, null or a value of the wrong kind is
    /// in the way.
    pub fn slot_mut<'a>(
        &self,
        data: &'a mut Value,
        padding: &mut Padding,
    ) -> Result<&'a mut Value, PathError> {
        let mut current = data;
        for (i, segment) in self.segments.iter().enumerate() {
            let next_is_index = matches!(self.segments.get(i + 1), Some(Segment::Index(_)));
            let not_a_container = |found: &Value| PathError::NotAContainer {
                segment: segment.to_string(),
                found: found.type_name(),
            };
            current = match (segment, current) {
                (Segment::Field(name), Value::Map(map)) => {
                    map.entry(Key::str(name.as_str())).or_insert_with(|| {
                        if next_is_index {
                            Value::Seq(Vec::new())
                        } else {
                            Value::empty_map()
                        }
                    })
                }
                (Segment::Index(index), Value::Seq(_)) if *index > MAX_CREATED_INDEX => {
                    return Err(PathError::IndexTooLarge { index: *index });
                }
                (Segment::Index(index), Value::Seq(items)) => {
                    let pad = (*index + 1).saturating_sub(items.len());
                    padding.0 = padding
                        .0
                        .checked_sub(pad)
                        .ok_or(PathError::PaddingBudget { index: *index })?;
                    while items.len() <= *index {
                        items.push(Value::Map(Map::default()));
                    }
                    &mut items[*index]
                }
                (_, other) => return Err(not_a_container(other)),
            };
        }
        Ok(current)
    }

    /// Stores `value` at the path, creating the way to it (see
    /// [`JsonPath::slot_mut`]).
    pub fn write(
        &self,
        data: &mut Value,
        value: Value,
        padding: &mut Padding,
    ) -> Result<(), PathError> {
        *self.slot_mut(data, padding)? = value;
        Ok(())
    }
}

impl fmt::Display for JsonPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("$")?;
        for segment in &self.segments {
            write!(f, "{segment}")?;
        }
        Ok(())
    }
}

fn read_quoted(chars: &[char], start: usize, quote: char) -> Option<(String, usize)> {
    let end = chars[start..].iter().position(|&c| c == quote)? + start;
    Some((chars[start..end].iter().collect(), end + 1))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One document's writes share one padding budget: many writes each
    /// just under the per-write limit cannot add up to gigabytes.
    #[test]
    fn padding_is_bounded_per_document() {
        let mut data = Value::empty_map();
        let mut padding = Padding::per_document();
        JsonPath::parse(".a[999999]")
            .unwrap()
            .write(&mut data, Value::Int(1), &mut padding)
            .unwrap();
        let error = JsonPath::parse(".b[5]")
            .unwrap()
            .write(&mut data, Value::Int(1), &mut padding)
            .unwrap_err();
        assert_eq!(error, PathError::PaddingBudget { index: 5 });
        // Writing inside what exists pads nothing.
        JsonPath::parse(".a[10]")
            .unwrap()
            .write(&mut data, Value::Int(2), &mut padding)
            .unwrap();
    }

    fn fields(names: &[&str]) -> Vec<Segment> {
        names
            .iter()
            .map(|n| Segment::Field((*n).to_owned()))
            .collect()
    }

    #[test]
    fn parses_the_subset() {
        assert!(JsonPath::parse(".").unwrap().is_root());
        assert!(JsonPath::parse("$").unwrap().is_root());
        assert_eq!(
            JsonPath::parse(".a.b").unwrap().segments,
            fields(&["a", "b"])
        );
        assert_eq!(
            JsonPath::parse("$.a.b").unwrap().segments,
            fields(&["a", "b"])
        );
        assert_eq!(
            JsonPath::parse("a.b").unwrap().segments,
            fields(&["a", "b"])
        );
        assert_eq!(
            JsonPath::parse(".a[10].b").unwrap().segments,
            vec![
                Segment::Field("a".into()),
                Segment::Index(10),
                Segment::Field("b".into())
            ]
        );
        assert_eq!(
            JsonPath::parse(".'filter:authtoken'.x").unwrap().segments,
            fields(&["filter:authtoken", "x"])
        );
        assert_eq!(
            JsonPath::parse("$['a.b']").unwrap().segments,
            fields(&["a.b"])
        );
        assert!(JsonPath::parse(".a[x]").is_err());
        assert!(JsonPath::parse(".a.").is_err());
    }

    #[test]
    fn write_creates_maps_and_padded_lists() {
        let mut data = Value::empty_map();
        JsonPath::parse(".a[2].b")
            .unwrap()
            .write(&mut data, Value::Int(1), &mut Padding::per_document())
            .unwrap();
        let a = data.get("a").unwrap();
        let Value::Seq(items) = a else {
            panic!("not a list: {a:?}")
        };
        assert_eq!(items.len(), 3);
        assert_eq!(items[0], Value::empty_map());
        assert_eq!(items[2].get("b"), Some(&Value::Int(1)));
    }

    #[test]
    fn write_refuses_huge_indexes() {
        let mut data = Value::empty_map();
        let path = JsonPath::parse(".a[99999999999]").unwrap();
        assert_eq!(
            path.write(&mut data, Value::Int(1), &mut Padding::per_document()),
            Err(PathError::IndexTooLarge {
                index: 99_999_999_999
            })
        );
    }

    #[test]
    fn write_through_a_scalar_fails() {
        let mut data = Value::empty_map();
        JsonPath::parse(".a")
            .unwrap()
            .write(&mut data, Value::Int(1), &mut Padding::per_document())
            .unwrap();
        assert!(
            JsonPath::parse(".a.b")
                .unwrap()
                .write(&mut data, Value::Int(2), &mut Padding::per_document())
                .is_err()
        );
    }
}
