//! A stall event as the daemon serves and prints it: decoded from the ring-buffer record, with
//! labels and wall-clock times.

use std::collections::HashMap;

use probe_common::{
    stall_events::{StallEvent, StallKind},
    sync_calls::SyncSyscall,
    writeback::BDI_NAME_LEN,
};
use serde::{Deserialize, Serialize};

use crate::{
    families::{cgroups::paths::CgroupPaths, dirty_throttle::bdi_name},
    kernel::devices,
};

/// One stall. Durations are nanoseconds; `time` is the start, RFC 3339 in UTC.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Stall {
    pub time: String,
    /// Start, nanoseconds since the Unix epoch (for filtering and sorting).
    pub start_unix_ns: u64,
    /// A `syscall` label value, or `dirty_throttle`, `writeback_wait`, `block_request`,
    /// `journal_commit` (the `kind` label of `wbscope_stalls_total`).
    pub kind: String,
    /// The `device` label; `all` for sync(2), `unknown` when the probe could not resolve it.
    pub device: String,
    /// Thread id and process id; 0 for block requests (completed outside the submitter).
    pub pid: u32,
    pub tgid: u32,
    pub comm: String,
    /// Cgroup v2 id of the task (0 where the event has no task, or for writeback waits while
    /// `[cgroups]` is off).
    pub cgroup_id: u64,
    /// Its cgroup v2 path (`/system.slice/x.service`), where the daemon sees the cgroup2
    /// hierarchy and the cgroup still exists; empty otherwise.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub cgroup: String,
    /// Inode number of the file where the call names one, else 0.
    pub inode: u64,
    pub duration_ns: u64,
    /// Parts of `duration_ns` (each ≤ it; they may overlap): asleep on pages under writeback,
    /// throttled in balance_dirty_pages, a journal commit of the device running, a flush of the
    /// device in flight.
    pub writeback_wait_ns: u64,
    pub throttle_ns: u64,
    pub journal_ns: u64,
    pub flush_ns: u64,
    /// Kind-specific raw value: sync_file_range/msync flags, the block request's op.
    pub detail: u32,
    /// The dominant part of the breakdown (`writeback_wait`, `throttling`, `journal_commit`,
    /// `device_flush`, `own_work`; `families::stall_events::context::verdict::Cause`).
    #[serde(default)]
    pub cause: String,
    /// One line naming the dominant cause and, with the context, behind whose writes.
    #[serde(default)]
    pub verdict: String,
    /// What the device did meanwhile; absent where the daemon keeps no history (standalone
    /// `wbscope trace`, a device that wrote nothing since the daemon started).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<super::context::record::StallContext>,
}

/// The `kind` label for a raw kind.
pub fn kind_label(raw: u32) -> &'static str {
    if let Some(call) = SyncSyscall::from_raw(raw) {
        return call.label();
    }
    StallKind::from_raw(raw).map_or("unknown", StallKind::label)
}

/// Converts ring-buffer records, caching device names (a storm must not readlink per event)
/// and cgroup paths (a miss walks the cgroup tree at most twice a second).
pub struct Decoder {
    names: HashMap<u32, String>,
    bdis: HashMap<[u8; BDI_NAME_LEN], String>,
    cgroups: CgroupPaths,
}

impl Default for Decoder {
    fn default() -> Decoder {
        Decoder {
            names: HashMap::new(),
            bdis: HashMap::new(),
            cgroups: CgroupPaths::discover(),
        }
    }
}

impl Decoder {
    /// Decodes one record; `None` if it is too short (never for records of this build).
    pub fn decode(&mut self, bytes: &[u8]) -> Option<Stall> {
        if bytes.len() < std::mem::size_of::<StallEvent>() {
            return None;
        }
        // SAFETY: the length is checked above; StallEvent is plain integers (any bit pattern is
        // valid) and read_unaligned has no alignment requirement.
        let ev: StallEvent = unsafe { std::ptr::read_unaligned(bytes.as_ptr().cast()) };
        let kind = kind_label(ev.kind);
        let device = if ev.kind == StallKind::DirtyThrottle as u32 {
            self.bdis
                .entry(ev.bdi)
                .or_insert_with(|| devices::label_for_bdi(&bdi_name(&ev.bdi)))
                .clone()
        } else if ev.kind == SyncSyscall::Sync as u32 && ev.dev == 0 {
            "all".to_owned()
        } else {
            self.names
                .entry(ev.dev)
                .or_insert_with(|| devices::label_for_kernel_dev(ev.dev))
                .clone()
        };
        let start_unix_ns = monotonic_to_unix(ev.start_ns);
        Some(Stall {
            time: rfc3339(start_unix_ns),
            start_unix_ns,
            kind: kind.to_owned(),
            device,
            pid: ev.pid,
            tgid: ev.tgid,
            comm: bdi_name(&ev.comm),
            cgroup_id: ev.cgroup_id,
            cgroup: match ev.cgroup_id {
                0 => String::new(),
                id => self.cgroups.path(id).unwrap_or_default(),
            },
            inode: ev.ino,
            duration_ns: ev.duration_ns,
            writeback_wait_ns: ev.wb_wait_ns,
            throttle_ns: ev.throttle_ns,
            journal_ns: ev.journal_ns,
            flush_ns: ev.flush_ns,
            detail: ev.detail,
            cause: String::new(),
            verdict: String::new(),
            context: None,
        })
    }
}

fn clock_ns(clock: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; the clocks used here always exist on Linux.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    (ts.tv_sec as u64) * 1_000_000_000 + ts.tv_nsec as u64
}

/// Nanoseconds since the Unix epoch, now.
pub fn unix_now_ns() -> u64 {
    clock_ns(libc::CLOCK_REALTIME)
}

/// CLOCK_MONOTONIC now, the clock of `bpf_ktime_get_ns()`.
pub fn monotonic_now_ns() -> u64 {
    clock_ns(libc::CLOCK_MONOTONIC)
}

/// The inverse of [`monotonic_to_unix`].
pub fn unix_to_monotonic(unix_ns: u64) -> u64 {
    let offset = unix_now_ns().saturating_sub(clock_ns(libc::CLOCK_MONOTONIC));
    unix_ns.saturating_sub(offset)
}

/// Converts a `bpf_ktime_get_ns()` (CLOCK_MONOTONIC) time to Unix time, using the clocks' offset
/// now (a wall-clock step between the event and now shifts it; events are read within ms).
pub fn monotonic_to_unix(mono_ns: u64) -> u64 {
    let offset = unix_now_ns().saturating_sub(clock_ns(libc::CLOCK_MONOTONIC));
    mono_ns.saturating_add(offset)
}

/// RFC 3339 in UTC with microseconds, e.g. `2026-07-01T12:00:03.123456Z`.
pub fn rfc3339(unix_ns: u64) -> String {
    let micros = (unix_ns / 1000) as i128 * 1000;
    time::OffsetDateTime::from_unix_timestamp_nanos(micros)
        .ok()
        .and_then(|t| {
            t.format(&time::format_description::well_known::Rfc3339)
                .ok()
        })
        .unwrap_or_default()
}

/// Parses RFC 3339 into nanoseconds since the Unix epoch.
pub fn parse_rfc3339(text: &str) -> Option<u64> {
    let t =
        time::OffsetDateTime::parse(text, &time::format_description::well_known::Rfc3339).ok()?;
    // Valid times outside u64 nanoseconds since the epoch (before 1970, after 2554) clamp: a
    // `since` in the far future selects nothing, one before 1970 selects everything.
    Some(u64::try_from(t.unix_timestamp_nanos().max(0)).unwrap_or(u64::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_have_metric_labels() {
        assert_eq!(kind_label(1), "fsync");
        assert_eq!(kind_label(9), "io_uring_sync_file_range");
        assert_eq!(kind_label(32), "dirty_throttle");
        assert_eq!(kind_label(35), "journal_commit");
        assert_eq!(kind_label(0), "unknown");
    }

    #[test]
    fn rfc3339_round_trips() {
        let ns = 1_750_000_000_123_456_000;
        let text = rfc3339(ns);
        assert!(text.ends_with('Z'), "{text}");
        assert_eq!(parse_rfc3339(&text), Some(ns));
        assert_eq!(parse_rfc3339("yesterday"), None);
        assert_eq!(parse_rfc3339("9999-12-31T23:59:59Z"), Some(u64::MAX));
        assert_eq!(parse_rfc3339("1969-12-31T23:59:59Z"), Some(0));
    }

    #[test]
    fn decodes_a_record() {
        let mut ev = StallEvent {
            start_ns: 5,
            duration_ns: 3_000_000_000,
            wb_wait_ns: 1,
            throttle_ns: 2,
            journal_ns: 3,
            flush_ns: 4,
            cgroup_id: 7,
            ino: 12,
            pid: 100,
            tgid: 99,
            kind: SyncSyscall::Sync as u32,
            dev: 0,
            comm: [0; 16],
            bdi: [0; BDI_NAME_LEN],
            detail: 0,
            _reserved: 0,
        };
        ev.comm[..2].copy_from_slice(b"dd");
        // SAFETY: StallEvent is plain integers without padding (size asserted in probe-common).
        let bytes: [u8; 120] = unsafe { std::mem::transmute(ev) };
        let stall = Decoder::default().decode(&bytes).expect("decodes");
        assert_eq!(stall.kind, "sync");
        assert_eq!(stall.device, "all");
        assert_eq!(stall.comm, "dd");
        assert_eq!((stall.pid, stall.tgid, stall.inode), (100, 99, 12));
        assert_eq!(stall.flush_ns, 4);
        assert!(Decoder::default().decode(&bytes[..100]).is_none());
    }
}
