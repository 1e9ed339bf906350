//! Whether every metric name a query or rule reads exists: registered by the daemon, recorded
//! by one of our rules, or listed in `pending-metrics.txt` with the reason it does not exist
//! yet. The pending list may not go stale: a listed name the daemon registers, or one nothing
//! uses, is an error too.

use std::collections::{BTreeMap, BTreeSet};

use crate::promql::{metric_names, strip_histogram_suffix};

/// A metric name used before the daemon registers it, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pending {
    pub name: String,
    pub reason: String,
}

/// A malformed line of the pending list.
#[derive(Debug, thiserror::Error)]
#[error("pending-metrics.txt line {line}: {why}")]
pub struct PendingError {
    pub line: usize,
    pub why: String,
}

/// Parses `name reason...` lines; `#` starts a comment line.
pub fn parse_pending(text: &str) -> Result<Vec<Pending>, PendingError> {
    let mut out: Vec<Pending> = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let err = |why: String| PendingError { line: n + 1, why };
        let (name, reason) = line
            .split_once(char::is_whitespace)
            .ok_or_else(|| err(format!("{line:?} has no reason")))?;
        if out.iter().any(|p| p.name == name) {
            return Err(err(format!("{name} listed twice")));
        }
        out.push(Pending {
            name: name.to_owned(),
            reason: reason.trim().to_owned(),
        });
    }
    Ok(out)
}

/// Where a name comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Origin<'a> {
    /// A metric family the daemon registers.
    Registered,
    /// A series one of our recording rules writes.
    Recorded,
    /// Not registered yet, for this reason.
    Pending(&'a Pending),
    /// Nobody provides it.
    Unknown,
}

/// The names that exist, and those allowed to be missing.
pub struct Catalog<'a> {
    pub registered: &'a BTreeSet<String>,
    pub recorded: &'a [&'a str],
    pub pending: &'a [Pending],
}

impl Catalog<'_> {
    /// Where `name` (as written in a query, histogram suffix included) comes from; a pending
    /// name that is also registered counts as registered.
    pub fn origin(&self, name: &str) -> Origin<'_> {
        let candidates = [Some(name), strip_histogram_suffix(name)];
        let candidates = candidates.iter().flatten();
        if candidates.clone().any(|n| self.registered.contains(*n)) {
            return Origin::Registered;
        }
        if self.recorded.contains(&name) {
            return Origin::Recorded;
        }
        candidates
            .filter_map(|n| self.pending.iter().find(|p| p.name == *n))
            .map(Origin::Pending)
            .next()
            .unwrap_or(Origin::Unknown)
    }

    /// The pending entries an expression depends on.
    pub fn pending_in(&self, expr: &str) -> Vec<&Pending> {
        metric_names(expr)
            .iter()
            .filter_map(|n| match self.origin(n) {
                Origin::Pending(p) => Some(p),
                _ => None,
            })
            .collect()
    }

    /// Checks every `(place, expression)`: each name must come from somewhere, and each pending
    /// entry must be unregistered and used.
    pub fn check(&self, uses: &[(String, String)]) -> Vec<String> {
        let mut problems = Vec::new();
        let mut used_pending = BTreeSet::new();
        for (place, expr) in uses {
            for name in metric_names(expr) {
                match self.origin(&name) {
                    Origin::Unknown => problems.push(format!(
                        "{place}: {name} is not registered by the daemon, not recorded by a \
                         rule, and not in pending-metrics.txt"
                    )),
                    Origin::Pending(p) => {
                        used_pending.insert(p.name.as_str());
                    }
                    Origin::Registered | Origin::Recorded => {}
                }
            }
        }
        for p in self.pending {
            if self.registered.contains(&p.name) {
                problems.push(format!(
                    "{} is registered by the daemon now: delete its line from \
                     pending-metrics.txt",
                    p.name
                ));
            } else if !used_pending.contains(p.name.as_str()) {
                problems.push(format!(
                    "{} is in pending-metrics.txt but no query or rule uses it",
                    p.name
                ));
            }
        }
        problems
    }
}

/// How many queries use each name, for the check's summary.
pub fn usage_counts(uses: &[(String, String)]) -> BTreeMap<String, usize> {
    let mut counts = BTreeMap::new();
    for (_, expr) in uses {
        for name in metric_names(expr) {
            *counts.entry(name).or_insert(0) += 1;
        }
    }
    counts
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pending() -> Vec<Pending> {
        parse_pending("# c\nnew_seconds  lands later\n\nold_total lands too\n").unwrap()
    }

    #[test]
    fn parses_pending_and_rejects_bad_lines() {
        let p = pending();
        assert_eq!(p[0].name, "new_seconds");
        assert_eq!(p[0].reason, "lands later");
        assert!(parse_pending("lonely\n").is_err());
        assert!(parse_pending("a x\na y\n").is_err());
    }

    #[test]
    fn classifies_and_reports() {
        let registered: BTreeSet<String> = ["reg_seconds", "old_total"].map(String::from).into();
        let pending = pending();
        let recorded = ["a:reg_seconds:p99"];
        let catalog = Catalog {
            registered: &registered,
            recorded: &recorded,
            pending: &pending,
        };
        assert_eq!(catalog.origin("reg_seconds_bucket"), Origin::Registered);
        assert_eq!(catalog.origin("a:reg_seconds:p99"), Origin::Recorded);
        assert_eq!(
            catalog.origin("new_seconds_sum"),
            Origin::Pending(&pending[0])
        );
        assert_eq!(catalog.origin("nope"), Origin::Unknown);
        let uses = vec![
            (
                "p1".to_owned(),
                "rate(new_seconds_sum[5m]) / reg_seconds_count".to_owned(),
            ),
            ("p2".to_owned(), "nope + a:reg_seconds:p99".to_owned()),
        ];
        assert_eq!(catalog.pending_in(&uses[0].1).len(), 1);
        let problems = catalog.check(&uses).join("\n");
        assert!(
            problems.contains("p2: nope is not registered"),
            "{problems}"
        );
        assert!(
            problems.contains("old_total is registered by the daemon now"),
            "{problems}"
        );
        assert!(!problems.contains("new_seconds"), "{problems}");
    }

    #[test]
    fn unused_pending_is_reported() {
        let registered = BTreeSet::new();
        let pending = pending();
        let catalog = Catalog {
            registered: &registered,
            recorded: &[],
            pending: &pending,
        };
        let problems = catalog.check(&[("p".into(), "new_seconds_count".into())]);
        assert_eq!(problems.len(), 1);
        assert!(problems[0].contains("old_total is in pending-metrics.txt but no query"));
    }
}
