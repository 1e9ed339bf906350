//! Counting lost map inserts: every aggregation map whose insert can fail (a full hash map) has
//! a slot in the per-CPU `MAP_OVERFLOWS` array, incremented each time an event could not be
//! recorded because its new key found no room. The daemon exports them as
//! `wbscope_map_overflows_total{map}`. Slots are part of the map ABI: never reuse one.

/// Slot of each map in `MAP_OVERFLOWS`, with the map's name in the object.
pub const MAPS: [(u32, &str); 14] = [
    (SYNC_CALL_LATENCY, "SYNC_CALL_LATENCY"),
    (SYNC_CALL_LATENCY_ANON, "SYNC_CALL_LATENCY_ANON"),
    (SFR_CALLS, "SFR_CALLS"),
    (BLOCK_RQ_STATS, "BLOCK_RQ_STATS"),
    (BLOCK_BIO_COUNTS, "BLOCK_BIO_COUNTS"),
    (WRITEBACK_WAIT, "WRITEBACK_WAIT"),
    (WB_SUBMISSIONS, "WB_SUBMISSIONS"),
    (JOURNAL_COMMIT_LATENCY, "JOURNAL_COMMIT_LATENCY"),
    (DIRTY_THROTTLE_PAUSE, "DIRTY_THROTTLE_PAUSE"),
    (WB_WORK_STATS, "WB_WORK_STATS"),
    (FOLIO_WAITS, "FOLIO_WAITS"),
    (NFS_WRITES, "NFS_WRITES"),
    (NFS_COMMITS, "NFS_COMMITS"),
    (CGROUP_TOTALS, "CGROUP_TOTALS"),
];

pub const SYNC_CALL_LATENCY: u32 = 0;
pub const SYNC_CALL_LATENCY_ANON: u32 = 1;
pub const SFR_CALLS: u32 = 2;
pub const BLOCK_RQ_STATS: u32 = 3;
pub const BLOCK_BIO_COUNTS: u32 = 4;
pub const WRITEBACK_WAIT: u32 = 5;
pub const WB_SUBMISSIONS: u32 = 6;
pub const JOURNAL_COMMIT_LATENCY: u32 = 7;
pub const DIRTY_THROTTLE_PAUSE: u32 = 8;
pub const WB_WORK_STATS: u32 = 9;
pub const FOLIO_WAITS: u32 = 10;
pub const NFS_WRITES: u32 = 11;
pub const NFS_COMMITS: u32 = 12;
// 13: retired (the device-writes map, whose counters are now in BLOCK_BIO_COUNTS).
pub const CGROUP_TOTALS: u32 = 14;

/// Entries of `MAP_OVERFLOWS` (room for slots added later without resizing).
pub const SLOTS: u32 = 16;

/// Whether a kernel `dev_t` (`MAJOR << 20 | MINOR`) is an anonymous superblock device (major 0:
/// tmpfs, overlay, proc, but also btrfs, nfs, fuse). Their sync-call latency goes to a map of its
/// own, so that thousands of container mounts can never crowd out the real disks.
pub const fn is_anonymous_dev(dev: u32) -> bool {
    dev != 0 && dev >> 20 == 0
}

/// Name of the map of lost-key counters in the eBPF object; `object_names` lists it for the test
/// that checks it against the object.
pub mod maps {
    pub const MAP_OVERFLOWS: &str = "MAP_OVERFLOWS";
}
