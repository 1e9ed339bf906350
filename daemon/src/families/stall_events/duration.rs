//! Durations as operators type them: `100ms`, `3s`, `10m`, `250us`, `1h`, or `0`.

/// Why a duration was refused; each message quotes what was typed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DurationError {
    #[error("'{0}' has no unit (use e.g. 100ms, 3s, 10m)")]
    NoUnit(String),
    #[error("'{0}' does not start with a number")]
    NotANumber(String),
    #[error("unknown unit '{unit}' in '{text}' (ns, us, ms, s, m, h)")]
    UnknownUnit { unit: String, text: String },
    #[error("'{0}' is out of range")]
    OutOfRange(String),
    #[error("'{0}' is not a finite number of milliseconds")]
    NotFinite(String),
    #[error("'{0}' is negative")]
    Negative(String),
}

/// Parses a duration with a unit (`ns`, `us`, `ms`, `s`, `m`, `h`) into nanoseconds. A bare `0`
/// is accepted; other bare numbers are rejected, so that `100` is never silently seconds.
pub fn parse_duration_ns(text: &str) -> Result<u64, DurationError> {
    let s = text.trim();
    if s == "0" {
        return Ok(0);
    }
    let split = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .ok_or_else(|| DurationError::NoUnit(text.to_owned()))?;
    let (number, unit) = s.split_at(split);
    let value: f64 = number
        .parse()
        .map_err(|_| DurationError::NotANumber(text.to_owned()))?;
    let scale = match unit {
        "ns" => 1.0,
        "us" | "µs" => 1e3,
        "ms" => 1e6,
        "s" => 1e9,
        "m" | "min" => 60e9,
        "h" => 3600e9,
        other => {
            return Err(DurationError::UnknownUnit {
                unit: other.to_owned(),
                text: text.to_owned(),
            });
        }
    };
    let ns = value * scale;
    if !ns.is_finite() || ns < 0.0 || ns > u64::MAX as f64 {
        return Err(DurationError::OutOfRange(text.to_owned()));
    }
    Ok(ns.round() as u64)
}

/// A minimum duration as bcc's tools and `/stalls?min=` take it: a bare number is milliseconds
/// (`5`, `2.5`), anything else needs a unit (`250us`, `1s`).
pub fn parse_min_ns(text: &str) -> Result<u64, DurationError> {
    match text.trim().parse::<f64>() {
        Ok(ms) if !ms.is_finite() => Err(DurationError::NotFinite(text.to_owned())),
        Ok(ms) if ms >= 0.0 => Ok((ms * 1e6).round() as u64),
        Ok(_) => Err(DurationError::Negative(text.to_owned())),
        Err(_) => parse_duration_ns(text),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn minimums_take_bare_milliseconds() {
        assert_eq!(parse_min_ns("5"), Ok(5_000_000));
        assert_eq!(parse_min_ns("2.5"), Ok(2_500_000));
        assert_eq!(parse_min_ns("0"), Ok(0));
        assert_eq!(parse_min_ns("1s"), Ok(1_000_000_000));
        let message = |r: Result<u64, DurationError>| r.map_err(|e| e.to_string());
        assert_eq!(
            message(parse_min_ns("-1")),
            Err("'-1' is negative".to_string())
        );
        assert_eq!(
            message(parse_min_ns("NaN")),
            Err("'NaN' is not a finite number of milliseconds".to_string())
        );
        assert!(parse_min_ns("5 parsecs").is_err());
    }

    #[test]
    fn units() {
        assert_eq!(parse_duration_ns("100ms"), Ok(100_000_000));
        assert_eq!(parse_duration_ns("3s"), Ok(3_000_000_000));
        assert_eq!(parse_duration_ns("1.5s"), Ok(1_500_000_000));
        assert_eq!(parse_duration_ns("10m"), Ok(600_000_000_000));
        assert_eq!(parse_duration_ns("250us"), Ok(250_000));
        assert_eq!(parse_duration_ns("0"), Ok(0));
        assert_eq!(parse_duration_ns(" 7ns "), Ok(7));
    }

    #[test]
    fn rejects_missing_or_unknown_units() {
        assert!(parse_duration_ns("100").is_err());
        assert!(parse_duration_ns("5 parsecs").is_err());
        assert!(parse_duration_ns("ms").is_err());
        assert!(parse_duration_ns("").is_err());
    }
}
