//! The "Writeback overview" dashboard: every host and device at once.

use crate::model::{Dashboard, Row, Selection};
use crate::panels::{block, flusher, memory, nfs, syncs, waits};
use crate::scope::Scope;

/// Builds the overview dashboard.
pub fn dashboard() -> Dashboard {
    let s = Scope::new(Selection::Multi);
    Dashboard {
        uid: "wbscope-overview",
        title: "wbscope / Writeback overview",
        description: "Writeback, sync-call and block-layer behaviour of every selected host and \
                      device, from wbscope's eBPF probes.",
        drill_down: Some(crate::model::DrillDown {
            uid: crate::stall::UID,
            title: "Stall investigation",
        }),
        selection: Selection::Multi,
        rows: vec![
            Row::new(
                "Dirty memory",
                vec![
                    memory::dirty_vs_thresholds(s),
                    memory::share_of_ram(s),
                    memory::dirtied_vs_written(s),
                    memory::per_device(s),
                    memory::bandwidth(s),
                ],
            ),
            Row::new(
                "Flusher writeback",
                vec![
                    flusher::work_items(s),
                    flusher::written_bytes(s),
                    flusher::queued(s),
                    flusher::duration_p99(s),
                    flusher::submissions(s),
                    flusher::submitted_bytes(s),
                    flusher::device_writes_by_source(s),
                ],
            ),
            Row::new(
                "Sync calls",
                vec![
                    syncs::heatmap(s),
                    syncs::quantiles(s),
                    syncs::rates(s),
                    syncs::sync_file_range_flags(s),
                ],
            ),
            block::row(s),
            nfs::row(s),
            Row::new(
                "Throttling and writeback waits",
                vec![
                    waits::throttle_share(s),
                    waits::throttle_p99(s),
                    waits::writeback_wait_share(s),
                    waits::writeback_wait_p99(s),
                ],
            ),
            Row::new(
                "Journal, pressure and stalls",
                vec![
                    waits::journal_rate(s),
                    waits::journal_quantiles(s),
                    waits::pressure(s),
                    waits::stalls(s),
                ],
            ),
        ],
    }
}
