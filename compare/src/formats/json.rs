//! Reading the formats' JSON without holding a file: JSONL a line at a time
//! ([`tokentap_core::jsonl`]), each line read into a typed struct of just the fields a format
//! needs (unknown fields are skipped unbuilt, so a huge value in one costs nothing), and JSON
//! documents refused by size before they are read.

use crate::error::CompareError;
use serde::de::{self, DeserializeOwned, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::fmt;
use std::path::Path;
use tokentap_core::jsonl::{self, LineError};

/// Calls `f` with every non-blank line of the JSONL file at `path` and its 1-based number. A
/// line longer than [`jsonl::MAX_LINE_BYTES`] or not UTF-8 is an error naming it.
pub(crate) fn each_line(
    path: &Path,
    what: &'static str,
    mut f: impl FnMut(usize, &str) -> Result<(), CompareError>,
) -> Result<(), CompareError> {
    let mut lines = jsonl::open(path).map_err(|source| CompareError::Io {
        what,
        path: path.to_path_buf(),
        source,
    })?;
    loop {
        match lines.next_line() {
            Ok(Some((n, line))) => f(n, line)?,
            Ok(None) => return Ok(()),
            Err(LineError::Io(source)) => {
                return Err(CompareError::Io {
                    what,
                    path: path.to_path_buf(),
                    source,
                })
            }
            Err(e) => return Err(CompareError::parse(path, lines.line(), e.to_string())),
        }
    }
}

/// Where a format's lines come from: a file, read a line at a time, or a text already in memory
/// (tests, the fuzzer).
#[derive(Clone, Copy)]
pub(crate) enum Source<'a> {
    File(&'a Path),
    Text(&'a str),
}

/// [`each_line`] over a [`Source`]; `path` names the file in messages.
pub(crate) fn lines_of(
    path: &Path,
    src: Source<'_>,
    what: &'static str,
    mut f: impl FnMut(usize, &str) -> Result<(), CompareError>,
) -> Result<(), CompareError> {
    match src {
        Source::File(p) => each_line(p, what, f),
        Source::Text(text) => {
            for (i, l) in text.lines().enumerate() {
                if !l.trim().is_empty() {
                    f(i + 1, l)?;
                }
            }
            let _ = path;
            Ok(())
        }
    }
}

/// One JSONL line as `T`, which must be a JSON object: anything else is refused as "not `kind`"
/// before it is parsed (a file of another tool, a JSON document on one line).
pub(crate) fn object_line<'a, T: Deserialize<'a>>(
    path: &Path,
    line: usize,
    text: &'a str,
    kind: &str,
) -> Result<T, CompareError> {
    if !text.trim_start().starts_with('{') {
        return Err(CompareError::parse(
            path,
            line,
            format!("not a JSON object: {kind} has one object per line"),
        ));
    }
    serde_json::from_str(text).map_err(|e| {
        let msg = if e.is_syntax() || e.is_eof() {
            format!("not JSON: {e}")
        } else {
            format!("not {kind}: {e}")
        };
        CompareError::parse(path, line, msg)
    })
}

/// A JSON document of at most [`jsonl::MAX_DOCUMENT_BYTES`], read whole.
pub(crate) fn document(path: &Path, what: &'static str) -> Result<Vec<u8>, CompareError> {
    jsonl::read_document(path).map_err(|e| match e {
        jsonl::DocumentError::Io(source) => CompareError::Io {
            what,
            path: path.to_path_buf(),
            source,
        },
        e => CompareError::File {
            path: path.to_path_buf(),
            msg: e.to_string(),
        },
    })
}

/// A string field that may also be written as a number (ids); numbers are kept as printed.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Text(pub String);

impl<'de> Deserialize<'de> for Text {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = Text;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string or a number")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Text, E> {
                Ok(Text(v.to_string()))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Text, E> {
                Ok(Text(v.to_string()))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Text, E> {
                Ok(Text(v.to_string()))
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<Text, E> {
                Ok(Text(
                    serde_json::Number::from_f64(v)
                        .map_or_else(|| v.to_string(), |n| n.to_string()),
                ))
            }
        }
        d.deserialize_any(V)
    }
}

/// An unsigned integer (ns timestamps, indices) written as an integer or a non-negative float;
/// integers never go through f64 (ns would lose precision above 2^53).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Uint(pub u64);

impl<'de> Deserialize<'de> for Uint {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = Uint;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a non-negative number")
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Uint, E> {
                Ok(Uint(v))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Uint, E> {
                u64::try_from(v)
                    .map(Uint)
                    .map_err(|_| E::custom(format!("{v} is negative")))
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<Uint, E> {
                if v >= 0.0 && v.is_finite() {
                    Ok(Uint(v as u64))
                } else {
                    Err(E::custom(format!("{v} is not a non-negative number")))
                }
            }
        }
        d.deserialize_any(V)
    }
}

/// A list of numbers reduced as it is read: first, last, count and sum (entries that are not
/// numbers are skipped). A list of a million chunk instants costs four numbers.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(crate) struct Span {
    pub first: Option<f64>,
    pub last: Option<f64>,
    pub count: u64,
    pub sum: f64,
}

impl Span {
    pub fn mean(&self) -> Option<f64> {
        (self.count > 0).then(|| self.sum / self.count as f64)
    }
}

impl<'de> Deserialize<'de> for Span {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Span;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a list of numbers")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut a: A) -> Result<Span, A::Error> {
                let mut s = Span::default();
                while let Some(Number(x)) = a.next_element()? {
                    if let Some(x) = x {
                        s.first.get_or_insert(x);
                        s.last = Some(x);
                        s.count += 1;
                        s.sum += x;
                    }
                }
                Ok(s)
            }
        }
        d.deserialize_seq(V)
    }
}

/// Any JSON value, of which only a finite number is kept: arrays and objects are skipped
/// unbuilt.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Number(pub Option<f64>);

impl<'de> Deserialize<'de> for Number {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Number;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("any value")
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<Number, E> {
                Ok(Number(Some(v).filter(|x| x.is_finite())))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Number, E> {
                Ok(Number(Some(v as f64)))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Number, E> {
                Ok(Number(Some(v as f64)))
            }
            fn visit_bool<E: de::Error>(self, _: bool) -> Result<Number, E> {
                Ok(Number(None))
            }
            fn visit_str<E: de::Error>(self, _: &str) -> Result<Number, E> {
                Ok(Number(None))
            }
            fn visit_unit<E: de::Error>(self) -> Result<Number, E> {
                Ok(Number(None))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut a: A) -> Result<Number, A::Error> {
                while a.next_element::<IgnoredAny>()?.is_some() {}
                Ok(Number(None))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut a: A) -> Result<Number, A::Error> {
                while a.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
                Ok(Number(None))
            }
        }
        d.deserialize_any(V)
    }
}

/// Reads a JSON object a key at a time: `field` reads the values of the keys it knows (and
/// says so); every other value is skipped unbuilt, but for its numbers (published percentiles,
/// settings), which are returned by key. A result file's big arrays cost only what `field`
/// keeps of them.
pub(crate) fn read_map<'de, A: MapAccess<'de>>(
    mut map: A,
    mut field: impl FnMut(&str, &mut A) -> Result<bool, A::Error>,
) -> Result<BTreeMap<String, f64>, A::Error> {
    let mut numbers = BTreeMap::new();
    while let Some(k) = map.next_key::<String>()? {
        if !field(&k, &mut map)? {
            if let Number(Some(x)) = map.next_value()? {
                numbers.insert(k, x);
            }
        }
    }
    Ok(numbers)
}

/// A JSON document of any size read as `T` from the file as it streams: memory is what `T`
/// keeps (the per-request values), not the file. `kind` names the format in errors, which give
/// the line and column.
pub(crate) fn streamed<T: DeserializeOwned>(path: &Path, kind: &str) -> Result<T, CompareError> {
    let f = std::fs::File::open(path).map_err(|source| CompareError::Io {
        what: "cannot read the client file",
        path: path.to_path_buf(),
        source,
    })?;
    let r = std::io::BufReader::with_capacity(256 << 10, f);
    serde_json::from_reader(r).map_err(|e| CompareError::File {
        path: path.to_path_buf(),
        msg: if e.is_io() {
            format!("cannot read: {e}")
        } else {
            format!("not {kind}: {e}")
        },
    })
}

/// Milliseconds from a value in `unit` (`ns`, `us`, `ms`, `s`/`sec`); `None` for other units.
pub(crate) fn to_ms(value: f64, unit: &str) -> Option<f64> {
    let f = match unit {
        "ns" => 1e-6,
        "us" | "µs" => 1e-3,
        "ms" => 1.0,
        "s" | "sec" | "seconds" => 1e3,
        _ => return None,
    };
    Some(value * f)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Deserialize)]
    struct T {
        id: Option<Text>,
        ns: Option<Uint>,
        times: Option<Span>,
    }

    #[test]
    fn typed_fields_accept_what_the_formats_write() {
        let t: T = serde_json::from_str(
            r#"{"id":7,"ns":1795954478047383011,"times":[1.5,null,"x",2.5,[1],{"a":1},4],"big":"skipped"}"#,
        )
        .unwrap();
        assert_eq!(t.id, Some(Text("7".into())));
        assert_eq!(t.ns, Some(Uint(1_795_954_478_047_383_011)));
        let s = t.times.unwrap();
        assert_eq!(
            (s.first, s.last, s.count, s.sum),
            (Some(1.5), Some(4.0), 3, 8.0)
        );
        let e = serde_json::from_str::<T>(r#"{"ns":-1}"#)
            .unwrap_err()
            .to_string();
        assert!(e.contains("negative"), "{e}");
    }

    #[test]
    fn a_line_that_is_not_an_object_is_refused_unparsed() {
        let e = object_line::<T>(Path::new("f.jsonl"), 3, "[1,2,3]", "an AIPerf record")
            .err()
            .unwrap()
            .to_string();
        assert!(e.starts_with("f.jsonl:3: not a JSON object"), "{e}");
    }
}
