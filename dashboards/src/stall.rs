//! The "Stall investigation" dashboard: one host and one device, everything that can make a
//! call on it wait, and the daemon's own health.

use crate::model::{Dashboard, Row, Selection};
use crate::panels::{block, flusher, health, memory, nfs, syncs, waits};
use crate::scope::Scope;

/// The dashboard's uid, which the overview's data links name.
pub const UID: &str = "wbscope-stall";

/// Builds the stall investigation dashboard.
pub fn dashboard() -> Dashboard {
    let s = Scope::new(Selection::Single);
    Dashboard {
        uid: UID,
        title: "wbscope / Stall investigation",
        description: "One device of one host: its stalls, the sync calls that waited, and \
                      everything they can wait on (flusher writeback, dirty throttling, pages \
                      under writeback, the journal, the block layer), plus the probes' health.",
        drill_down: None,
        selection: Selection::Single,
        rows: vec![
            Row::new(
                "Is this device stalling?",
                vec![
                    waits::stall_count(s),
                    health::probes_attached(s),
                    waits::stalls(s).wide(12),
                    flusher::device_writes_by_source(s),
                    syncs::quantiles(s),
                    waits::pressure(s),
                ],
            ),
            Row::new(
                "Sync calls",
                vec![
                    syncs::heatmap(s),
                    syncs::rates(s),
                    syncs::sync_file_range_flags(s),
                ],
            ),
            Row::new(
                "Writeback on this device",
                vec![
                    flusher::work_items(s),
                    flusher::written_bytes(s),
                    flusher::queued(s),
                    flusher::duration_p99(s),
                    flusher::submissions(s),
                    flusher::submitted_bytes(s),
                    memory::per_device(s),
                    memory::bandwidth(s),
                ],
            ),
            Row::new(
                "Dirty throttling and writeback waits",
                vec![
                    waits::throttle_share(s),
                    waits::throttle_p99(s),
                    waits::writeback_wait_share(s),
                    waits::writeback_wait_p99(s),
                    memory::dirty_vs_thresholds(s),
                    memory::share_of_ram(s),
                ],
            ),
            block::row(s),
            nfs::row(s),
            Row::new(
                "Journal and filesystems",
                vec![
                    waits::journal_rate(s),
                    waits::journal_quantiles(s),
                    health::filesystems(s).wide(24),
                ],
            ),
            Row::new(
                "Probes and self health",
                vec![
                    health::probe_table(s),
                    health::build(s),
                    health::bpf_cpu(s),
                    health::bpf_per_run(s),
                    health::dropped(s),
                    health::map_errors(s),
                    health::daemon_cpu(s),
                    health::daemon_memory(s),
                ],
            ),
        ],
    }
}
