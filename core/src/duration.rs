//! Durations on every command line: `humantime` spellings (`30s`, `1h30m`, `250ms`, `2min`),
//! and the spellings scripts already use (a plain number of seconds, `1.5`, `2.5s`, `0.5m`).

use std::time::Duration;

/// Parses a duration: humantime, or a (fractional) number with an optional `ms`/`s`/`m`/`h`
/// unit, seconds without one.
pub fn parse(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    if let Ok(d) = humantime::parse_duration(s) {
        return Ok(d);
    }
    let (num, scale) = if let Some(n) = s.strip_suffix("ms") {
        (n, 1e-3)
    } else if let Some(n) = s.strip_suffix('s') {
        (n, 1.0)
    } else if let Some(n) = s.strip_suffix('m') {
        (n, 60.0)
    } else if let Some(n) = s.strip_suffix('h') {
        (n, 3600.0)
    } else {
        (s, 1.0)
    };
    let v: f64 = num.trim().parse().map_err(|_| {
        format!("expected a duration like 30s, 1h30m, 250ms or 1.5 (seconds), found {s:?}")
    })?;
    if !v.is_finite() || v < 0.0 {
        return Err(format!("expected a duration >= 0, found {s:?}"));
    }
    Ok(Duration::from_secs_f64(v * scale))
}

/// [`parse`], refusing zero (a timeout of nothing would fail everything at once).
pub fn parse_positive(s: &str) -> Result<Duration, String> {
    match parse(s)? {
        d if d.is_zero() => Err(format!("expected a duration > 0, found {s:?}")),
        d => Ok(d),
    }
}

/// `#[serde(with = "tokentap_core::duration::secs")]`: a [`Duration`] as a JSON number of
/// seconds (the files' unit: `config.json`, `summary.json`, `sweep.json`).
pub mod secs {
    use serde::{Deserialize, Deserializer, Serializer};
    use std::time::Duration;

    /// Writes seconds.
    pub fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_f64(d.as_secs_f64())
    }

    /// Reads seconds.
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        Duration::try_from_secs_f64(f64::deserialize(d)?).map_err(serde::de::Error::custom)
    }
}

/// [`secs`] for an `Option<Duration>` (`null` when none).
pub mod opt_secs {
    use serde::{Deserialize, Deserializer, Serializer};
    use std::time::Duration;

    /// Writes seconds, or `null`.
    pub fn serialize<S: Serializer>(d: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
        match d {
            Some(d) => s.serialize_some(&d.as_secs_f64()),
            None => s.serialize_none(),
        }
    }

    /// Reads seconds, or `null`.
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Duration>, D::Error> {
        Option::<f64>::deserialize(d)?
            .map(Duration::try_from_secs_f64)
            .transpose()
            .map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spellings() {
        let ms = |v: u64| Duration::from_millis(v);
        for (s, d) in [
            ("30s", ms(30_000)),
            ("1h30m", ms(5_400_000)),
            ("250ms", ms(250)),
            ("2min", ms(120_000)),
            ("1.5", ms(1_500)),
            ("2.5s", ms(2_500)),
            ("0.5m", ms(30_000)),
            ("30", ms(30_000)),
            ("0", ms(0)),
        ] {
            assert_eq!(parse(s).unwrap(), d, "{s}");
        }
        assert!(parse("-1").is_err());
        assert!(parse("soon").unwrap_err().contains("1h30m"));
        assert!(parse_positive("0").is_err());
        assert_eq!(parse_positive("1ms").unwrap(), ms(1));
        #[derive(serde::Serialize, serde::Deserialize, PartialEq, Debug)]
        struct F {
            #[serde(with = "secs")]
            a: Duration,
            #[serde(with = "opt_secs")]
            b: Option<Duration>,
        }
        let f = F {
            a: ms(1500),
            b: None,
        };
        let text = serde_json::to_string(&f).unwrap();
        assert_eq!(text, r#"{"a":1.5,"b":null}"#);
        assert_eq!(serde_json::from_str::<F>(&text).unwrap(), f);
    }
}
