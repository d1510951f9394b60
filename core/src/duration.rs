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

/// A duration as milliseconds, for options that were `_ms` numbers: a bare number is
/// milliseconds (the old spelling, `8`, `0.05`), anything with a unit is [`parse`]d (`8ms`,
/// `50us`, `1.5s`).
pub fn parse_ms(s: &str) -> Result<f64, String> {
    let t = s.trim();
    if let Ok(v) = t.parse::<f64>() {
        if !v.is_finite() || v < 0.0 {
            return Err(format!("expected a duration >= 0, found {s:?}"));
        }
        return Ok(v);
    }
    parse(t).map(|d| d.as_nanos() as f64 / 1e6)
}

/// [`parse`], as seconds (for options kept as `f64` seconds).
pub fn parse_secs(s: &str) -> Result<f64, String> {
    parse(s).map(|d| d.as_secs_f64())
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
        assert_eq!(parse_secs("1m").unwrap(), 60.0);
        assert_eq!(parse_ms("8").unwrap(), 8.0);
        assert_eq!(parse_ms("0.05").unwrap(), 0.05);
        assert_eq!(parse_ms("8ms").unwrap(), 8.0);
        assert_eq!(parse_ms("50us").unwrap(), 0.05);
        assert_eq!(parse_ms("0.05ms").unwrap(), 0.05);
        assert_eq!(parse_ms("1.5s").unwrap(), 1500.0);
        assert!(parse_ms("-3").is_err());
        assert!(parse_ms("fast").is_err());
    }
}
