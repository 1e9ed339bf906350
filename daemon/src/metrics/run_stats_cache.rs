//! The programs' run-time stats without a system call per program at every scrape.
//!
//! The kernel advances a program's run time and run count only while BPF run-time stats are on
//! (`kernel.bpf_stats_enabled`, or a `BPF_ENABLE_STATS` descriptor that some tool holds, which
//! the sysctl does not show). Off, which is the default, the 36 values never move, yet reading
//! them took one `BPF_OBJ_GET_INFO_BY_FD` call each, about a tenth of a scrape. So a scrape reads
//! one program first, the one that ran most at the last full read (a scheduler or block hook
//! runs thousands of times a second whenever stats are on), and reads them all only when its
//! count moved, a read failed last time, or [`FULL_READ_EVERY`] passed. A change the canary does
//! not show is therefore delayed, never lost: the counters are cumulative in the kernel.

use std::{
    sync::Mutex,
    time::{Duration, Instant},
};

/// The longest a moved value can wait to be read.
pub const FULL_READ_EVERY: Duration = Duration::from_secs(30);

/// Run time (ns) and run count of one program.
pub type RunStats = (u64, u64);

/// The last full read.
#[derive(Default)]
pub struct RunStatsCache(Mutex<Option<FullRead>>);

struct FullRead {
    at: Instant,
    /// Each program's stats, `None` where the read failed (read again next time).
    stats: Vec<Option<RunStats>>,
    /// The program with the highest run count, and that count.
    canary: usize,
    canary_runs: u64,
}

impl RunStatsCache {
    /// The stats of programs `0..count`, read with `read_one`, at `now`: from the last full read
    /// while the canary's count has not moved, else all read anew.
    pub fn read(
        &self,
        count: usize,
        now: Instant,
        read_one: impl Fn(usize) -> std::io::Result<RunStats>,
    ) -> Vec<std::io::Result<RunStats>> {
        let Ok(mut last) = self.0.lock() else {
            return (0..count).map(&read_one).collect();
        };
        if let Some(full) = last.as_ref()
            && full.stats.len() == count
            && full.stats.iter().all(Option::is_some)
            && now.saturating_duration_since(full.at) < FULL_READ_EVERY
            && matches!(read_one(full.canary), Ok((_, runs)) if runs == full.canary_runs)
        {
            return full.stats.iter().flatten().map(|s| Ok(*s)).collect();
        }
        let fresh: Vec<std::io::Result<RunStats>> = (0..count).map(&read_one).collect();
        let stats: Vec<Option<RunStats>> = fresh.iter().map(|r| r.as_ref().ok().copied()).collect();
        let (canary, canary_runs) = stats
            .iter()
            .enumerate()
            .filter_map(|(i, s)| s.map(|(_, runs)| (i, runs)))
            .max_by_key(|(_, runs)| *runs)
            .unwrap_or((0, 0));
        *last = Some(FullRead {
            at: now,
            stats,
            canary,
            canary_runs,
        });
        fresh
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::{Cell, RefCell};

    #[test]
    fn all_are_read_again_only_when_the_canary_moves_or_the_time_is_up() {
        let cache = RunStatsCache::default();
        let values = RefCell::new(vec![(10, 1), (500, 40), (7, 2)]);
        let calls = Cell::new(0);
        let read = |i: usize| {
            calls.set(calls.get() + 1);
            Ok(values.borrow()[i])
        };
        let ok = |v: Vec<std::io::Result<RunStats>>| -> Vec<RunStats> {
            v.into_iter().map(Result::unwrap).collect()
        };
        let t0 = Instant::now();
        assert_eq!(
            ok(cache.read(3, t0, read)),
            vec![(10, 1), (500, 40), (7, 2)]
        );
        assert_eq!(calls.replace(0), 3, "the first read reads all");
        // Nothing moved: one call, for the busiest program.
        let t1 = t0 + Duration::from_secs(1);
        assert_eq!(
            ok(cache.read(3, t1, read)),
            vec![(10, 1), (500, 40), (7, 2)]
        );
        assert_eq!(calls.replace(0), 1);
        // The canary moved: all are read, and the others' new values come out.
        values.borrow_mut()[1] = (600, 50);
        values.borrow_mut()[2] = (9, 3);
        assert_eq!(
            ok(cache.read(3, t1, read)),
            vec![(10, 1), (600, 50), (9, 3)]
        );
        assert_eq!(calls.replace(0), 4);
        // Only a quiet program moved: delayed until the full read is due, then read.
        values.borrow_mut()[0] = (20, 2);
        assert_eq!(ok(cache.read(3, t1, read))[0], (10, 1));
        let due = t1 + FULL_READ_EVERY;
        assert_eq!(ok(cache.read(3, due, read))[0], (20, 2));
    }

    #[test]
    fn a_failed_read_is_tried_again_at_the_next_scrape() {
        let cache = RunStatsCache::default();
        let fail = Cell::new(true);
        let calls = Cell::new(0);
        let read = |i: usize| {
            calls.set(calls.get() + 1);
            if i == 1 && fail.get() {
                Err(std::io::Error::from_raw_os_error(libc::EBADF))
            } else {
                Ok((1, 1))
            }
        };
        let now = Instant::now();
        let first = cache.read(2, now, read);
        assert!(first[0].is_ok() && first[1].is_err());
        fail.set(false);
        calls.set(0);
        let second = cache.read(2, now, read);
        assert!(second.iter().all(Result::is_ok));
        assert_eq!(calls.get(), 2, "all read again after a failure");
    }
}
