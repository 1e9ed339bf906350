//! The tables of a frame as rows of text, shared by the terminal view and the plain summary.

use super::{
    fmt::{bytes, num, opt, rate, secs},
    model::{SortKey, View},
};
use crate::families::stall_events::format::clock;

/// One titled table.
#[derive(Clone, Debug, PartialEq)]
pub struct Section {
    pub title: String,
    pub header: &'static [&'static str],
    /// Column widths in characters (the last column may be cut).
    pub widths: &'static [u16],
    pub rows: Vec<Vec<String>>,
}

/// Per device: writeback state, write bandwidth, sync-call latency.
pub fn devices(v: &View) -> Section {
    let rows = v
        .devices
        .iter()
        .map(|d| {
            vec![
                d.device.clone(),
                opt(d.dirty_bytes, bytes),
                opt(d.writeback_bytes, bytes),
                opt(d.write_bps, rate),
                opt(d.bdi_bps, rate),
                opt(d.sync_calls_per_s, num),
                opt(d.sync_p50, secs),
                opt(d.sync_p99, secs),
            ]
        })
        .collect();
    let idle = match v.idle_devices {
        0 => String::new(),
        n => format!(" ({n} idle not shown)"),
    };
    Section {
        title: format!("Devices{idle}"),
        header: &[
            "DEVICE",
            "DIRTY",
            "WRITEBACK",
            "WRITE",
            "BDI EST",
            "SYNC/s",
            "SYNC p50",
            "SYNC p99",
        ],
        widths: &[12, 11, 11, 13, 13, 8, 9, 9],
        rows,
    }
}

/// Flusher work by device, sync mode and reason.
pub fn flusher(v: &View) -> Section {
    let rows = v
        .flusher
        .iter()
        .map(|f| {
            vec![
                f.device.clone(),
                f.sync_mode.clone(),
                f.reason.clone(),
                num(f.works_per_s),
                rate(f.bytes_per_s),
            ]
        })
        .collect();
    Section {
        title: "Flusher work".into(),
        header: &["DEVICE", "SYNC MODE", "REASON", "WORK/s", "WRITTEN"],
        widths: &[12, 10, 18, 7, 13],
        rows,
    }
}

/// Block request latency by device, op and sync flag (a device's histogram without them, at
/// the default detail, is the row with op `all`).
pub fn latency(v: &View) -> Section {
    let rows = v
        .latency
        .iter()
        .map(|l| {
            let op = if l.op.is_empty() { "all" } else { &l.op };
            vec![
                l.device.clone(),
                op.to_owned(),
                l.sync.clone(),
                num(l.requests_per_s),
                opt(l.p50, secs),
                opt(l.p99, secs),
                opt(l.mean, secs),
            ]
        })
        .collect();
    Section {
        title: "Block latency".into(),
        header: &["DEVICE", "OP", "SYNC", "REQ/s", "p50", "p99", "MEAN"],
        widths: &[12, 14, 5, 8, 9, 9, 9],
        rows,
    }
}

/// Processes by time in sync calls or throttling (all devices).
pub fn processes(v: &View, sort: SortKey) -> Section {
    let rows = v
        .processes
        .iter()
        .map(|p| {
            vec![
                p.tgid.to_string(),
                p.comm.clone(),
                num(p.sync_ms_per_s),
                num(p.throttle_ms_per_s),
                num(p.sync_calls_per_s),
                secs(p.sync_total_s),
                secs(p.throttle_total_s),
                p.cgroup.clone(),
            ]
        })
        .collect();
    Section {
        title: format!("Processes by {} (all devices)", sort.label()),
        header: &[
            "PID",
            "COMM",
            "SYNC ms/s",
            "THROT ms/s",
            "SYNC/s",
            "SYNC TOT",
            "THROT TOT",
            "CGROUP",
        ],
        widths: &[7, 15, 9, 10, 6, 8, 9, 16],
        rows,
    }
}

fn ns(v: u64) -> String {
    secs(v as f64 / 1e9)
}

/// The latest stall events, newest first, with the breakdown of their time (parts may
/// overlap, see `wbscope trace`).
pub fn stalls(v: &View) -> Section {
    let rows = v
        .stalls
        .iter()
        .map(|s| {
            vec![
                clock(&s.time).chars().take(12).collect(),
                s.kind.clone(),
                s.device.clone(),
                s.tgid.to_string(),
                s.comm.clone(),
                ns(s.duration_ns),
                ns(s.writeback_wait_ns),
                ns(s.throttle_ns),
                ns(s.journal_ns),
                ns(s.flush_ns),
            ]
        })
        .collect();
    Section {
        title: "Latest stalls".into(),
        header: &[
            "TIME (UTC)",
            "KIND",
            "DEVICE",
            "PID",
            "COMM",
            "DURATION",
            "WB WAIT",
            "THROTTLE",
            "JOURNAL",
            "FLUSH",
        ],
        widths: &[12, 14, 8, 7, 15, 8, 8, 8, 8, 8],
        rows,
    }
}

/// Every section of a frame, in screen order.
pub fn all(v: &View, sort: SortKey) -> Vec<Section> {
    vec![
        devices(v),
        flusher(v),
        latency(v),
        processes(v, sort),
        stalls(v),
    ]
}
