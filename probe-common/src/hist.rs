//! In-kernel log2 latency histograms and their bucket maths.
//!
//! Bucket `i` counts values `v` (nanoseconds) with `2^(i-1) < v <= 2^i`, i.e. `i = ceil(log2(v))`,
//! which is exactly Prometheus' `le` semantics for an upper bound of `2^i` ns. Values at or below
//! `2^MIN_SLOT` ns fall into bucket `MIN_SLOT`; values above `2^MAX_SLOT` ns go to the overflow
//! bucket `OVERFLOW_SLOT`, which is only visible through `+Inf`. The exact sum is kept beside.

/// Smallest exported upper bound: 2^10 ns ≈ 1 µs.
pub const MIN_SLOT: usize = 10;
/// Largest exported upper bound: 2^36 ns ≈ 68.7 s.
pub const MAX_SLOT: usize = 36;
/// Index of the bucket for values above 2^MAX_SLOT ns.
pub const OVERFLOW_SLOT: usize = MAX_SLOT + 1;
/// Number of bucket slots in [`Log2Hist::buckets`].
pub const SLOTS: usize = OVERFLOW_SLOT + 1;

/// A log2 histogram of nanosecond durations with an exact sum.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Log2Hist {
    /// Per-slot counts (not cumulative); slots below [`MIN_SLOT`] stay zero.
    pub buckets: [u64; SLOTS],
    /// Exact sum of all recorded values, in nanoseconds.
    pub sum_ns: u64,
}
const _: () = assert!(core::mem::size_of::<Log2Hist>() == (SLOTS + 1) * 8);
crate::user_pod!(Log2Hist);

impl Log2Hist {
    /// An empty histogram.
    pub const ZERO: Log2Hist = Log2Hist {
        buckets: [0; SLOTS],
        sum_ns: 0,
    };

    /// Records one value. Used on the host; the eBPF side updates the map value in place with
    /// [`slot_for`].
    pub fn record(&mut self, ns: u64) {
        self.buckets[slot_for(ns)] += 1;
        self.sum_ns = self.sum_ns.wrapping_add(ns);
    }

    /// Adds another histogram (e.g. another CPU's copy) into this one.
    pub fn merge(&mut self, other: &Log2Hist) {
        for (mine, theirs) in self.buckets.iter_mut().zip(other.buckets.iter()) {
            *mine = mine.wrapping_add(*theirs);
        }
        self.sum_ns = self.sum_ns.wrapping_add(other.sum_ns);
    }

    /// Total number of recorded values.
    pub fn count(&self) -> u64 {
        self.buckets
            .iter()
            .fold(0u64, |acc, b| acc.wrapping_add(*b))
    }
}

/// `floor(log2(v))` for `v > 0`, written as a branchy binary search without loops so the eBPF
/// verifier sees a fixed number of instructions.
#[inline(always)]
pub const fn floor_log2(mut v: u64) -> u32 {
    let mut r = 0u32;
    if v >= 1 << 32 {
        v >>= 32;
        r += 32;
    }
    if v >= 1 << 16 {
        v >>= 16;
        r += 16;
    }
    if v >= 1 << 8 {
        v >>= 8;
        r += 8;
    }
    if v >= 1 << 4 {
        v >>= 4;
        r += 4;
    }
    if v >= 1 << 2 {
        v >>= 2;
        r += 2;
    }
    if v >= 1 << 1 {
        r += 1;
    }
    r
}

/// The bucket slot for a duration of `ns` nanoseconds, always `< SLOTS`.
#[inline(always)]
pub const fn slot_for(ns: u64) -> usize {
    if ns <= (1 << MIN_SLOT) {
        return MIN_SLOT;
    }
    // ceil(log2(ns)) for ns >= 2.
    let slot = floor_log2(ns - 1) as usize + 1;
    if slot > MAX_SLOT { OVERFLOW_SLOT } else { slot }
}

/// Upper bound of slot `i` in seconds, as exported in the `le` label.
pub fn upper_bound_seconds(slot: usize) -> f64 {
    (1u64 << slot) as f64 / 1e9
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn floor_log2_matches_leading_zeros() {
        for v in [
            1u64,
            2,
            3,
            4,
            5,
            1023,
            1024,
            1025,
            u32::MAX as u64,
            1 << 40,
            u64::MAX,
        ] {
            assert_eq!(floor_log2(v), 63 - v.leading_zeros(), "v={v}");
        }
    }

    #[test]
    fn slots_follow_le_semantics() {
        assert_eq!(slot_for(0), MIN_SLOT);
        assert_eq!(slot_for(1024), MIN_SLOT);
        assert_eq!(slot_for(1025), 11);
        assert_eq!(slot_for(2048), 11);
        assert_eq!(slot_for(2049), 12);
        assert_eq!(slot_for(1 << 36), MAX_SLOT);
        assert_eq!(slot_for((1 << 36) + 1), OVERFLOW_SLOT);
        assert_eq!(slot_for(u64::MAX), OVERFLOW_SLOT);
        // Every value is at most its bucket's upper bound and above the previous one.
        for v in (1..5_000_000u64).step_by(997) {
            let s = slot_for(v);
            assert!(v <= 1 << s);
            if s > MIN_SLOT {
                assert!(v > 1 << (s - 1));
            }
        }
    }

    #[test]
    fn record_and_merge_keep_exact_sum_and_count() {
        let mut a = Log2Hist::ZERO;
        a.record(5);
        a.record(3_000);
        let mut b = Log2Hist::ZERO;
        b.record(1 << 40);
        a.merge(&b);
        assert_eq!(a.count(), 3);
        assert_eq!(a.sum_ns, 5 + 3_000 + (1 << 40));
        assert_eq!(a.buckets[OVERFLOW_SLOT], 1);
        assert_eq!(a.buckets[12], 1);
    }

    #[test]
    fn upper_bounds_in_seconds() {
        assert_eq!(upper_bound_seconds(10), 1.024e-6);
        assert!((upper_bound_seconds(36) - 68.719476736).abs() < 1e-9);
    }
}
