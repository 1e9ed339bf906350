//! The flight recorder: the last N minutes of stall events, bounded in count, oldest first out.

use std::{collections::VecDeque, sync::Arc};

use super::event::Stall;

/// Which events a reader wants.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Filter {
    /// Events that started at or after this Unix time (ns).
    pub since_unix_ns: Option<u64>,
    pub device: Option<String>,
    /// Thread id or process id.
    pub pid: Option<u32>,
    pub comm: Option<String>,
    /// Minimum duration (ns).
    pub min_ns: Option<u64>,
}

impl Filter {
    /// True when `stall` passes every set condition.
    pub fn accepts(&self, stall: &Stall) -> bool {
        self.since_unix_ns.is_none_or(|t| stall.start_unix_ns >= t)
            && self.device.as_ref().is_none_or(|d| *d == stall.device)
            && self.pid.is_none_or(|p| p == stall.pid || p == stall.tgid)
            && self.comm.as_ref().is_none_or(|c| *c == stall.comm)
            && self.min_ns.is_none_or(|m| stall.duration_ns >= m)
    }
}

/// Bounded store of recent events.
pub struct Recorder {
    events: VecDeque<Arc<Stall>>,
    window_ns: u64,
    max_events: usize,
    /// Events pushed out by the count bound before they aged out of the window.
    evicted: u64,
}

impl Recorder {
    /// Keeps events for `window_ns` (by start time), at most `max_events` of them.
    pub fn new(window_ns: u64, max_events: usize) -> Recorder {
        Recorder {
            events: VecDeque::with_capacity(max_events.min(4096)),
            window_ns,
            max_events,
            evicted: 0,
        }
    }

    /// Adds an event at time `now_unix_ns`, dropping what is too old or over the bound.
    pub fn push(&mut self, stall: Arc<Stall>, now_unix_ns: u64) {
        self.expire(now_unix_ns);
        if self.max_events == 0 {
            self.evicted += 1;
            return;
        }
        while self.events.len() >= self.max_events {
            self.events.pop_front();
            self.evicted += 1;
        }
        self.events.push_back(stall);
    }

    /// Drops events older than the window.
    pub fn expire(&mut self, now_unix_ns: u64) {
        let oldest = now_unix_ns.saturating_sub(self.window_ns);
        while self
            .events
            .front()
            .is_some_and(|e| e.start_unix_ns < oldest)
        {
            self.events.pop_front();
        }
    }

    /// Events passing `filter`, oldest first.
    pub fn query(&self, filter: &Filter) -> Vec<Arc<Stall>> {
        self.events
            .iter()
            .filter(|e| filter.accepts(e))
            .cloned()
            .collect()
    }

    /// Events dropped by the count bound so far.
    pub fn evicted(&self) -> u64 {
        self.evicted
    }

    /// Events held.
    pub fn len(&self) -> usize {
        self.events.len()
    }

    /// True when no event is held.
    pub fn is_empty(&self) -> bool {
        self.events.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stall(start: u64, device: &str, pid: u32, ms: u64) -> Arc<Stall> {
        Arc::new(Stall {
            start_unix_ns: start,
            kind: "fsync".into(),
            device: device.into(),
            pid,
            tgid: pid,
            comm: "dd".into(),
            duration_ns: ms * 1_000_000,
            ..Stall::default()
        })
    }

    #[test]
    fn count_bound_drops_oldest_first_and_counts() {
        let mut r = Recorder::new(1_000, 2);
        for t in 1..=3 {
            r.push(stall(100 + t, "loop0", 1, 200), 104);
        }
        assert_eq!(r.len(), 2);
        assert_eq!(r.evicted(), 1);
        let starts: Vec<u64> = r
            .query(&Filter::default())
            .iter()
            .map(|s| s.start_unix_ns)
            .collect();
        assert_eq!(starts, vec![102, 103]);
    }

    #[test]
    fn window_ages_out_without_counting() {
        let mut r = Recorder::new(100, 10);
        r.push(stall(10, "loop0", 1, 200), 10);
        r.push(stall(150, "loop0", 1, 200), 150);
        assert_eq!(r.len(), 1);
        r.expire(1_000);
        assert!(r.is_empty());
        assert_eq!(r.evicted(), 0);
    }

    #[test]
    fn filters() {
        let mut r = Recorder::new(u64::MAX, 10);
        r.push(stall(10, "loop0", 7, 200), 10);
        r.push(stall(20, "loop1", 8, 50), 20);
        let f = |f: Filter| r.query(&f).len();
        assert_eq!(f(Filter::default()), 2);
        assert_eq!(
            f(Filter {
                device: Some("loop1".into()),
                ..Filter::default()
            }),
            1
        );
        assert_eq!(
            f(Filter {
                pid: Some(7),
                ..Filter::default()
            }),
            1
        );
        assert_eq!(
            f(Filter {
                min_ns: Some(100_000_000),
                ..Filter::default()
            }),
            1
        );
        assert_eq!(
            f(Filter {
                since_unix_ns: Some(15),
                ..Filter::default()
            }),
            1
        );
        assert_eq!(
            f(Filter {
                comm: Some("cp".into()),
                ..Filter::default()
            }),
            0
        );
    }
}
