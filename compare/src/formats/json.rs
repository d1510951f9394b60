//! Reading the formats' JSON: JSONL lines with their numbers, and typed fields.

use crate::error::CompareError;
use serde_json::Value;
use std::path::Path;

/// Iterates over the non-empty lines of a JSONL text as parsed values, with 1-based line numbers.
pub(crate) fn jsonl<'a>(
    path: &'a Path,
    text: &'a str,
) -> impl Iterator<Item = Result<(usize, Value), CompareError>> + 'a {
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(move |(i, l)| {
            serde_json::from_str(l)
                .map(|v| (i + 1, v))
                .map_err(|e| CompareError::parse(path, i + 1, format!("not JSON: {e}")))
        })
}

/// A number at `v[key]`, accepting integers and floats.
pub(crate) fn num(v: &Value, key: &str) -> Option<f64> {
    v.get(key).and_then(Value::as_f64).filter(|x| x.is_finite())
}

/// An unsigned integer at `v[key]` (ns timestamps: f64 would lose precision above 2^53).
pub(crate) fn uint(v: &Value, key: &str) -> Option<u64> {
    v.get(key).and_then(|x| {
        x.as_u64()
            .or_else(|| x.as_f64().filter(|f| *f >= 0.0).map(|f| f as u64))
    })
}

/// A string at `v[key]` (numbers are accepted and printed).
pub(crate) fn string(v: &Value, key: &str) -> Option<String> {
    match v.get(key)? {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
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
