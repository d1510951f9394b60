//! JSON text exactly as the reference's Python writes it.
//!
//! Token counts depend on the exact characters a chat template renders, and templates render
//! tool definitions and arguments with `tojson` — which transformers defines as Python's
//! `json.dumps(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False)`. The
//! reference's fallback paths (a template that fails) count `msgspec.json.encode(...)` text
//! instead. Both differ from `serde_json`: Python separates with `", "` / `": "`, writes floats
//! with `repr` (`1e-05`, `1e+16`, `1.0`), and msgspec writes `0.00001` and `1e16`. This module
//! writes both, byte for byte (checked against Python in the tests).
//!
//! Objects keep their insertion order (the workspace's `serde_json` has `preserve_order`), as
//! Python dicts do.

use serde_json::Value;
use std::fmt::Write as _;

/// The options of `json.dumps` that transformers' `tojson` exposes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Dumps {
    /// Escape every non-ASCII character (`\uXXXX`).
    pub ensure_ascii: bool,
    /// `None`: one line. `Some(s)`: newline and `s` per level (`indent=2` is `"  "`).
    pub indent: Option<String>,
    /// `None`: Python's default, `(", ", ": ")` on one line, `(",", ": ")` with an indent.
    pub separators: Option<(String, String)>,
    /// Sort object keys.
    pub sort_keys: bool,
}

impl Default for Dumps {
    /// transformers' `tojson` defaults.
    fn default() -> Self {
        Dumps {
            ensure_ascii: false,
            indent: None,
            separators: None,
            sort_keys: false,
        }
    }
}

/// `json.dumps(v, **opts)`.
pub fn dumps(v: &Value, opts: &Dumps) -> String {
    let (item, key) = match (&opts.separators, &opts.indent) {
        (Some((i, k)), _) => (i.as_str(), k.as_str()),
        (None, None) => (", ", ": "),
        (None, Some(_)) => (",", ": "),
    };
    let mut out = String::new();
    let w = PyWriter {
        opts,
        item,
        key,
        float: py_float_repr,
        nan: FloatSpecials::Python,
        ensure_ascii: opts.ensure_ascii,
    };
    w.value(&mut out, v, 0);
    out
}

/// `msgspec.json.encode(v).decode()`: compact, raw UTF-8, msgspec's float spelling.
pub fn msgspec_encode(v: &Value) -> String {
    let opts = Dumps::default();
    let mut out = String::new();
    let w = PyWriter {
        opts: &opts,
        item: ",",
        key: ":",
        float: msgspec_float,
        nan: FloatSpecials::Null,
        ensure_ascii: false,
    };
    w.value(&mut out, v, 0);
    out
}

/// `msgspec.json.format(msgspec.json.encode(v), indent=2)`: two-space indent, `": "` after
/// keys, msgspec's floats, raw UTF-8.
pub fn msgspec_pretty(v: &Value) -> String {
    let opts = Dumps {
        indent: Some("  ".into()),
        ..Dumps::default()
    };
    let mut out = String::new();
    let w = PyWriter {
        opts: &opts,
        item: ",",
        key: ": ",
        float: msgspec_float,
        nan: FloatSpecials::Null,
        ensure_ascii: false,
    };
    w.value(&mut out, v, 0);
    out
}

#[derive(Clone, Copy)]
enum FloatSpecials {
    /// `NaN`, `Infinity`, `-Infinity` (json.dumps with allow_nan).
    Python,
    /// `null` (msgspec).
    Null,
}

struct PyWriter<'a> {
    opts: &'a Dumps,
    item: &'a str,
    key: &'a str,
    float: fn(f64) -> String,
    nan: FloatSpecials,
    ensure_ascii: bool,
}

impl PyWriter<'_> {
    fn newline(&self, out: &mut String, level: usize) {
        if let Some(ind) = &self.opts.indent {
            out.push('\n');
            for _ in 0..level {
                out.push_str(ind);
            }
        }
    }

    fn value(&self, out: &mut String, v: &Value, level: usize) {
        match v {
            Value::Null => out.push_str("null"),
            Value::Bool(true) => out.push_str("true"),
            Value::Bool(false) => out.push_str("false"),
            Value::Number(n) => write_number(out, n, |f| self.float_text(f)),
            Value::String(s) => write_str(out, s, self.ensure_ascii),
            Value::Array(a) => {
                if a.is_empty() {
                    out.push_str("[]");
                    return;
                }
                out.push('[');
                for (i, x) in a.iter().enumerate() {
                    if i > 0 {
                        out.push_str(self.item);
                    }
                    self.newline(out, level + 1);
                    self.value(out, x, level + 1);
                }
                self.newline(out, level);
                out.push(']');
            }
            Value::Object(m) => {
                if m.is_empty() {
                    out.push_str("{}");
                    return;
                }
                out.push('{');
                let mut entries: Vec<(&String, &Value)> = m.iter().collect();
                if self.opts.sort_keys {
                    entries.sort_by(|a, b| a.0.cmp(b.0));
                }
                for (i, (k, x)) in entries.into_iter().enumerate() {
                    if i > 0 {
                        out.push_str(self.item);
                    }
                    self.newline(out, level + 1);
                    write_str(out, k, self.ensure_ascii);
                    out.push_str(self.key);
                    self.value(out, x, level + 1);
                }
                self.newline(out, level);
                out.push('}');
            }
        }
    }

    fn float_text(&self, f: f64) -> String {
        if f.is_finite() {
            return (self.float)(f);
        }
        match self.nan {
            FloatSpecials::Null => "null".into(),
            FloatSpecials::Python if f.is_nan() => "NaN".into(),
            FloatSpecials::Python if f > 0.0 => "Infinity".into(),
            FloatSpecials::Python => "-Infinity".into(),
        }
    }
}

/// An integer as Python writes it; a float through `float`.
fn write_number(out: &mut String, n: &serde_json::Number, float: impl Fn(f64) -> String) {
    if let Some(i) = n.as_i64() {
        let _ = write!(out, "{i}");
    } else if let Some(u) = n.as_u64() {
        let _ = write!(out, "{u}");
    } else {
        out.push_str(&float(n.as_f64().unwrap_or(f64::NAN)));
    }
}

/// A JSON string as Python's encoder writes it: `"` and `\` escaped, `\n \r \t \b \f`
/// short, other control characters `\u00XX` (lower-case hex); with `ensure_ascii` every
/// character outside ` `..`~` is `\uXXXX` (surrogate pairs above the BMP).
pub fn write_str(out: &mut String, s: &str, ensure_ascii: bool) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c if ensure_ascii && !(' '..='~').contains(&c) => {
                let mut buf = [0u16; 2];
                for unit in c.encode_utf16(&mut buf) {
                    let _ = write!(out, "\\u{unit:04x}");
                }
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

/// Shortest round-trip digits of a finite `f` and its decimal point position: `f` =
/// `0.d1d2… × 10^decpt` (Python's `_Py_dg_dtoa` mode 0 convention). Rust's `{:e}` prints the
/// shortest digits that round-trip, which is what Python's `repr` and msgspec use.
fn digits(f: f64) -> (bool, String, i32) {
    let s = format!("{:e}", f.abs());
    let (mant, exp) = s.split_once('e').unwrap_or((&s, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let d: String = mant.chars().filter(|c| *c != '.').collect();
    (f.is_sign_negative(), d, exp + 1)
}

fn fixed(neg: bool, d: &str, decpt: i32) -> String {
    let mut s = String::new();
    if neg {
        s.push('-');
    }
    let n = d.len() as i32;
    if decpt <= 0 {
        s.push_str("0.");
        for _ in 0..-decpt {
            s.push('0');
        }
        s.push_str(d);
    } else if decpt >= n {
        s.push_str(d);
        for _ in 0..decpt - n {
            s.push('0');
        }
        s.push_str(".0");
    } else {
        s.push_str(&d[..decpt as usize]);
        s.push('.');
        s.push_str(&d[decpt as usize..]);
    }
    s
}

fn scientific(neg: bool, d: &str, exp: i32, python: bool) -> String {
    let mut s = String::new();
    if neg {
        s.push('-');
    }
    s.push_str(&d[..1]);
    if d.len() > 1 {
        s.push('.');
        s.push_str(&d[1..]);
    }
    s.push('e');
    if python {
        let _ = write!(s, "{}{:02}", if exp < 0 { '-' } else { '+' }, exp.abs());
    } else {
        let _ = write!(s, "{exp}");
    }
    s
}

/// Python's `repr(float)`: fixed notation when the decimal exponent is in [-4, 16), else
/// `d.ddde±XX`; integral values keep `.0`.
pub fn py_float_repr(f: f64) -> String {
    if !f.is_finite() {
        return if f.is_nan() {
            "nan".into()
        } else if f > 0.0 {
            "inf".into()
        } else {
            "-inf".into()
        };
    }
    let (neg, d, decpt) = digits(f);
    if decpt <= -4 || decpt > 16 {
        scientific(neg, &d, decpt - 1, true)
    } else {
        fixed(neg, &d, decpt)
    }
}

/// msgspec's float spelling: fixed when the decimal exponent is in [-5, 15], else `d.ddde-7`
/// (no `+`, no zero padding).
pub fn msgspec_float(f: f64) -> String {
    let (neg, d, decpt) = digits(f);
    let exp = decpt - 1;
    if (-5..=15).contains(&exp) {
        fixed(neg, &d, decpt)
    } else {
        scientific(neg, &d, exp, false)
    }
}

/// Python's `str()` of a JSON-like value, as Jinja prints it: `True`, `None`, `1.0`,
/// `{'a': 1}`, `['x']`.
pub fn py_str(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => {
            let mut out = String::new();
            py_repr(&mut out, other);
            out
        }
    }
}

/// Python's `repr()` of a JSON-like value.
pub fn py_repr(out: &mut String, v: &Value) {
    match v {
        Value::Null => out.push_str("None"),
        Value::Bool(true) => out.push_str("True"),
        Value::Bool(false) => out.push_str("False"),
        Value::Number(n) => write_number(out, n, py_float_repr),
        Value::String(s) => py_repr_str(out, s),
        Value::Array(a) => {
            out.push('[');
            for (i, x) in a.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                py_repr(out, x);
            }
            out.push(']');
        }
        Value::Object(m) => {
            out.push('{');
            for (i, (k, x)) in m.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                py_repr_str(out, k);
                out.push_str(": ");
                py_repr(out, x);
            }
            out.push('}');
        }
    }
}

/// Python's `repr(str)`: single quotes unless the text has `'` and no `"`.
pub fn py_repr_str(out: &mut String, s: &str) {
    let q = if s.contains('\'') && !s.contains('"') {
        '"'
    } else {
        '\''
    };
    out.push(q);
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c == q => {
                out.push('\\');
                out.push(c);
            }
            c if (c as u32) < 0x20 || c as u32 == 0x7f => {
                let _ = write!(out, "\\x{:02x}", c as u32);
            }
            c if !is_printable(c) => {
                let u = c as u32;
                if u <= 0xff {
                    let _ = write!(out, "\\x{u:02x}");
                } else if u <= 0xffff {
                    let _ = write!(out, "\\u{u:04x}");
                } else {
                    let _ = write!(out, "\\U{u:08x}");
                }
            }
            c => out.push(c),
        }
    }
    out.push(q);
}

/// Approximates Python's `str.isprintable` for the characters a repr escapes: C0/C1 controls,
/// the line and paragraph separators and the Unicode "other" categories that show up in text.
fn is_printable(c: char) -> bool {
    let u = c as u32;
    !(u < 0x20
        || (0x7f..=0xa0).contains(&u)
        || u == 0xad
        || (0x2028..=0x202f).contains(&u) && u != 0x202f
        || (0x200b..=0x200f).contains(&u)
        || (0x2060..=0x206f).contains(&u)
        || u == 0xfeff
        || (0xd800..=0xdfff).contains(&u)
        || (0xe000..=0xf8ff).contains(&u)
        || c == '\u{2000}'
        || (0x2001..=0x200a).contains(&u)
        || u == 0x3000
        || u == 0x1680
        || u == 0x205f
        || u == 0x85)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn python_float_repr() {
        for (f, s) in [
            (1e-5, "1e-05"),
            (1e16, "1e+16"),
            (1e15, "1000000000000000.0"),
            (0.1, "0.1"),
            (1.0, "1.0"),
            (123456789012345678.0, "1.2345678901234568e+17"),
            (-0.0, "-0.0"),
            (2.5e-7, "2.5e-07"),
            (1e22, "1e+22"),
            (0.0001, "0.0001"),
            (0.0, "0.0"),
            (1.5e300, "1.5e+300"),
            (5e-324, "5e-324"),
            (12345678.9, "12345678.9"),
        ] {
            assert_eq!(py_float_repr(f), s, "{f}");
        }
    }

    #[test]
    fn msgspec_floats() {
        // Checked against msgspec 0.20.0.
        for (f, s) in [
            (1e-4, "0.0001"),
            (1e-5, "0.00001"),
            (1.5e-5, "0.000015"),
            (1e-6, "1e-6"),
            (2.5e-6, "2.5e-6"),
            (1e15, "1000000000000000.0"),
            (1e16, "1e16"),
            (1.5e16, "1.5e16"),
            (9999e12, "9999000000000000.0"),
            (123.456, "123.456"),
            (1.7976931348623157e308, "1.7976931348623157e308"),
            (5e-324, "5e-324"),
            (-0.0, "-0.0"),
        ] {
            assert_eq!(msgspec_float(f), s, "{f}");
        }
    }

    #[test]
    fn dumps_like_python() {
        let v = json!({"b": [1, 2.5, true, null], "a": "é\"\\\n\u{1}\u{7f}😀", "e": {}, "f": []});
        assert_eq!(
            dumps(&v, &Dumps::default()),
            "{\"b\": [1, 2.5, true, null], \"a\": \"é\\\"\\\\\\n\\u0001\u{7f}😀\", \"e\": {}, \"f\": []}"
        );
        let ascii = Dumps {
            ensure_ascii: true,
            ..Dumps::default()
        };
        assert_eq!(
            dumps(&json!(["é\u{7f}😀"]), &ascii),
            "[\"\\u00e9\\u007f\\ud83d\\ude00\"]"
        );
        let pretty = Dumps {
            indent: Some("  ".into()),
            sort_keys: true,
            ..Dumps::default()
        };
        assert_eq!(
            dumps(&json!({"b": [1], "a": {}}), &pretty),
            "{\n  \"a\": {},\n  \"b\": [\n    1\n  ]\n}"
        );
        assert_eq!(
            msgspec_encode(&json!({"k": [1, 1e-5, "\n"]})),
            "{\"k\":[1,0.00001,\"\\n\"]}"
        );
    }

    #[test]
    fn python_str_and_repr() {
        assert_eq!(py_str(&json!(true)), "True");
        assert_eq!(py_str(&json!(null)), "None");
        assert_eq!(py_str(&json!(1.0)), "1.0");
        assert_eq!(py_str(&json!("x")), "x");
        assert_eq!(
            py_str(&json!({"a": [1, "it's", "q\"'"]})),
            "{'a': [1, \"it's\", 'q\"\\'']}"
        );
    }
}
