//! Short human forms of sizes, rates and durations for the `top` columns.

/// `-` for a value not known yet (first frame, no observations).
pub const NONE: &str = "-";

/// Binary-prefixed bytes: `512 B`, `4.0 KiB`, `1.5 MiB`.
pub fn bytes(v: f64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = v.max(0.0);
    let mut unit = 0;
    while v >= 1024.0 && unit < UNITS.len() - 1 {
        v /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{v:.0} B")
    } else {
        format!("{v:.1} {}", UNITS[unit])
    }
}

/// Seconds as `850µs`, `12.3ms`, `3.04s`.
pub fn secs(v: f64) -> String {
    if v < 1e-3 {
        format!("{:.0}µs", v * 1e6)
    } else if v < 1.0 {
        format!("{:.1}ms", v * 1e3)
    } else {
        format!("{v:.2}s")
    }
}

/// A plain number with one decimal below 100.
pub fn num(v: f64) -> String {
    if v < 100.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.0}")
    }
}

/// `f` of the value, or [`NONE`].
pub fn opt(v: Option<f64>, f: fn(f64) -> String) -> String {
    v.map_or_else(|| NONE.to_owned(), f)
}

/// Bytes per second.
pub fn rate(v: f64) -> String {
    format!("{}/s", bytes(v))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn human_forms() {
        assert_eq!(bytes(512.0), "512 B");
        assert_eq!(bytes(4096.0), "4.0 KiB");
        assert_eq!(bytes(1.5 * 1024.0 * 1024.0), "1.5 MiB");
        assert_eq!(secs(0.00085), "850µs");
        assert_eq!(secs(0.0123), "12.3ms");
        assert_eq!(secs(3.04), "3.04s");
        assert_eq!(num(2.25), "2.2");
        assert_eq!(num(250.4), "250");
        assert_eq!(opt(None, bytes), "-");
        assert_eq!(rate(2048.0), "2.0 KiB/s");
    }
}
