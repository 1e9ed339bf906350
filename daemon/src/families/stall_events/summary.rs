//! `wbscope trace --summary`: the causes of the stalls the flight recorder kept over a window,
//! aggregated by kind, cause and the device's dominant source.

use std::collections::BTreeMap;

use serde::Serialize;

use super::{
    context::verdict::{cause, dominant},
    event::Stall,
};

/// One group of stalls with the same kind, cause and dominant source.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Group {
    pub kind: String,
    pub cause: String,
    /// `flusher work none:sync queued by sync[4243]`, `fsync`, … or `-` without context.
    pub dominant_source: String,
    pub count: u64,
    pub total_ns: u64,
    pub max_ns: u64,
    /// The longest stall's verdict.
    pub worst: String,
}

/// Groups `stalls`, most total time first.
pub fn summarize<'a>(stalls: impl IntoIterator<Item = &'a Stall>) -> Vec<Group> {
    let mut groups: BTreeMap<(String, String, String), Group> = BTreeMap::new();
    for s in stalls {
        let c = if s.cause.is_empty() {
            cause(s).0.label().to_owned()
        } else {
            s.cause.clone()
        };
        let source = s
            .context
            .as_ref()
            .and_then(dominant)
            .map_or_else(|| "-".to_owned(), |(text, _)| text);
        let g = groups
            .entry((s.kind.clone(), c.clone(), source.clone()))
            .or_insert_with(|| Group {
                kind: s.kind.clone(),
                cause: c,
                dominant_source: source,
                ..Group::default()
            });
        g.count += 1;
        g.total_ns += s.duration_ns;
        if s.duration_ns >= g.max_ns {
            g.max_ns = s.duration_ns;
            g.worst = if s.verdict.is_empty() {
                super::context::verdict::verdict(s, s.context.as_ref())
            } else {
                s.verdict.clone()
            };
        }
    }
    let mut out: Vec<Group> = groups.into_values().collect();
    out.sort_by_key(|g| std::cmp::Reverse(g.total_ns));
    out
}

/// The column header matching [`line`].
pub const HEADER: &str =
    "COUNT      TOTAL        MAX  KIND                  CAUSE            DOMINANT SOURCE";

/// One aligned line per group.
pub fn line(g: &Group) -> String {
    format!(
        "{:>5} {:>9.1}s {:>9.1}s  {:<21} {:<16} {}",
        g.count,
        g.total_ns as f64 / 1e9,
        g.max_ns as f64 / 1e9,
        g.kind,
        g.cause,
        g.dominant_source
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stall(kind: &str, ns: u64, wb: u64) -> Stall {
        Stall {
            kind: kind.into(),
            device: "loop1".into(),
            pid: 1,
            tgid: 1,
            comm: "dd".into(),
            duration_ns: ns,
            writeback_wait_ns: wb,
            ..Stall::default()
        }
    }

    #[test]
    fn groups_by_kind_and_cause_most_time_first() {
        let events = [
            stall("fsync", 2_000_000_000, 1_900_000_000),
            stall("fsync", 3_000_000_000, 2_900_000_000),
            stall("fsync", 9_000_000_000, 0),
            stall("dirty_throttle", 100_000_000, 0),
        ];
        let g = summarize(&events);
        assert_eq!(g.len(), 3);
        assert_eq!((g[0].cause.as_str(), g[0].count), ("own_work", 1));
        assert_eq!(
            (g[1].cause.as_str(), g[1].count, g[1].total_ns, g[1].max_ns),
            ("writeback_wait", 2, 5_000_000_000, 3_000_000_000)
        );
        assert!(
            g[1].worst
                .starts_with("fsync 3.0s loop1 dd[1]: 2.9s waiting"),
            "{}",
            g[1].worst
        );
        assert_eq!(g[2].cause, "throttling");
        assert!(line(&g[1]).contains("writeback_wait"));
    }
}
