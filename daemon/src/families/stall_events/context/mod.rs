//! Context of a stall event, filled when the event reaches the daemon: what the device wrote
//! meanwhile by source, the bdi's dirty and writeback bytes at the start and the end, the
//! flusher work items that ran on it, and a one-line verdict naming the dominant cause.
//!
//! Everything comes from data the daemon keeps anyway (`history`): user-space samples of the
//! per-source device-write counters (`wbscope_device_write_bytes_total`) every
//! [`SAMPLE_INTERVAL`], and of the writing devices' debugfs `bdi/*/stats` with them when the
//! counters moved (once a second when they did not), plus one more sample when an event of at
//! least [`FRESH_MIN_NS`] arrives, and the flusher's work records. Only changes are kept, so an
//! idle host's history does not grow. Accuracy: the window starts at the last time the counters
//! were seen at or before the stall's start (up to one interval early: [`SAMPLE_INTERVAL`] while
//! the devices write, [`IDLE_SAMPLE_INTERVAL`] right after a second without writes,
//! [`LONG_IDLE_SAMPLE_INTERVAL`] after half a minute without; a second for
//! a stall that began more than [`history::FINE_NS`] before its event arrived, since older
//! samples are thinned to a second apart) and ends at the event's
//! arrival (milliseconds after its end); bios count when queued, not when completed; bdi dirty
//! bytes at the start may be up to a second old when the devices wrote nothing before it.

pub mod history;
pub mod record;
pub mod verdict;

pub use record::{SourceShare, StallContext, WorkItem};

/// How often the history samples the counters while the devices write.
pub const SAMPLE_INTERVAL: std::time::Duration = std::time::Duration::from_millis(100);

/// How often it samples them after a second in which no device wrote: ten wake-ups a second
/// were most of an idle daemon's CPU time. The cost is accuracy at the start of a burst only: a
/// stall that begins right after an idle spell gets a window that starts up to this much early
/// (nothing was written before the burst, so only the burst's first writes can fall in early).
pub const IDLE_SAMPLE_INTERVAL: std::time::Duration = std::time::Duration::from_millis(500);

/// How often it samples them once no device has written for half a minute: an idle host (most
/// of a fleet, most of the time) then pays one wake-up a second for a read of the bio counters
/// (their used slots only, `crate::metrics::Slotted`). Same cost as above, at the start of a
/// burst after a long idle spell only.
pub const LONG_IDLE_SAMPLE_INTERVAL: std::time::Duration = std::time::Duration::from_secs(1);

/// Events at least this long get a context, with a fresh sample for their end; shorter ones get
/// none (a storm of tiny events must not read the maps once each), except throttling pauses,
/// which get the bdi's state from the latest sample.
pub const FRESH_MIN_NS: u64 = 50_000_000;

/// Fills `stall`'s cause, context and verdict. Events shorter than [`FRESH_MIN_NS`] get the
/// cause and verdict only: a storm of tiny events must not scan the history once each.
pub fn fill(stall: &mut crate::families::stall_events::event::Stall, history: &history::History) {
    if stall.duration_ns >= FRESH_MIN_NS {
        let start = crate::families::stall_events::event::unix_to_monotonic(stall.start_unix_ns);
        stall.context = history.context(&stall.device, start, start + stall.duration_ns, true);
    } else if stall.kind == "dirty_throttle" {
        // Pauses are short and many: the bdi's state from the latest sample only.
        stall.context = history.bdi_context(&stall.device);
    }
    stall.cause = verdict::cause(stall).0.label().to_owned();
    stall.verdict = verdict::verdict(stall, stall.context.as_ref());
}
