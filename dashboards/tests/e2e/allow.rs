//! The one allow-list of the end-to-end test: expressions whose condition the test cannot
//! create on purpose. Each is evaluated without its final comparison instead (`X == 0` becomes
//! `X`), so the series it watches must still exist. Queries on metrics the daemon does not
//! register yet are not listed here: they are skipped through `pending-metrics.txt`, with the
//! reason given there.

/// An alert evaluated without its threshold, and why.
pub struct Allowed {
    pub rule: &'static str,
    pub reason: &'static str,
}

/// Alerts meant to stay silent on a healthy host.
pub const WITHOUT_THRESHOLD: &[Allowed] = &[
    Allowed {
        rule: "WbscopeProbeNotAttached",
        reason: "no probe fails on the test kernel (a failing probe cannot be made without \
                 breaking the panels it feeds); kernel-skipped and disabled ones do not count",
    },
    Allowed {
        rule: "WbscopeEventsDropped",
        reason: "overflowing the stall ring buffer on purpose would need a stall storm \
                 faster than the daemon reads (recorder eviction does not count)",
    },
    Allowed {
        rule: "WbscopeMapReadErrors",
        reason: "BPF map reads do not fail on demand",
    },
    Allowed {
        rule: "WbscopeBlockRequestErrors",
        reason: "the loop device completes every request without error",
    },
];

/// The reason `rule` is allow-listed, if it is.
pub fn reason(rule: &str) -> Option<&'static str> {
    WITHOUT_THRESHOLD
        .iter()
        .find(|a| a.rule == rule)
        .map(|a| a.reason)
}

/// `expr` without a final `<op> <number>` comparison, or `None` if it has none.
pub fn strip_threshold(expr: &str) -> Option<&str> {
    let expr = expr.trim_end();
    let number_start = expr
        .rfind(|c: char| !(c.is_ascii_digit() || c == '.' || c == 'e' || c == '-'))
        .map(|i| i + 1)?;
    expr[number_start..].parse::<f64>().ok()?;
    let head = expr[..number_start].trim_end();
    let head = head.strip_suffix("bool").unwrap_or(head).trim_end();
    ["==", "!=", ">=", "<=", ">", "<"]
        .iter()
        .find_map(|op| head.strip_suffix(op))
        .map(str::trim_end)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strips_final_comparisons_only() {
        assert_eq!(strip_threshold("x == 0"), Some("x"));
        assert_eq!(
            strip_threshold("sum by (a) (\n rate(x[5m])\n) > 0"),
            Some("sum by (a) (\n rate(x[5m])\n)")
        );
        assert_eq!(strip_threshold("a / b > 0.001"), Some("a / b"));
        assert_eq!(strip_threshold("rate(x[5m])"), None);
    }
}
