//! Value parsers the command lines share (plain `fn(&str) -> Result<_, String>`, as clap's
//! `value_parser` takes them), so a bad flag is refused at parse time with one wording.
//! Durations are in [`crate::duration`].

/// A finite number >= 0.
pub fn non_negative(s: &str) -> Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(v) if v.is_finite() && v >= 0.0 => Ok(v),
        _ => Err(format!("expected a finite number >= 0, found {s:?}")),
    }
}

/// A share: a number from 0 to 1.
pub fn share(s: &str) -> Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(v) if (0.0..=1.0).contains(&v) => Ok(v),
        _ => Err(format!("expected a number from 0 to 1, found {s:?}")),
    }
}

/// A whole number of at least 1 (a count, a size, a limit where 0 would stop everything).
pub fn positive<T>(s: &str) -> Result<T, String>
where
    T: std::str::FromStr + PartialOrd + From<u8>,
{
    match s.trim().parse::<T>() {
        Ok(v) if v >= T::from(1) => Ok(v),
        _ => Err(format!("expected a whole number >= 1, found {s:?}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounds() {
        assert_eq!(non_negative(" 2.5 ").unwrap(), 2.5);
        assert!(non_negative("-1").is_err());
        assert!(non_negative("NaN").is_err());
        assert!(non_negative("inf").is_err());
        assert_eq!(share("1").unwrap(), 1.0);
        assert!(share("1.01").unwrap_err().contains("from 0 to 1"));
        assert_eq!(positive::<usize>("3").unwrap(), 3);
        assert!(positive::<u32>("0").unwrap_err().contains(">= 1"));
        assert!(positive::<u64>("-1").is_err());
    }
}
