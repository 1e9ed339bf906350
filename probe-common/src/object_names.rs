//! Every map and load-time global name the eBPF object holds, gathered from the families that
//! declare them. The names are written twice, once as the `#[map]` or `#[no_mangle]` static in
//! `probe-ebpf` (aya names a map after its static) and once as these constants, which the daemon
//! uses; the daemon's unit test `probes::object_names` parses the embedded object and fails when
//! the two disagree, so a rename on one side only fails in the unit tier, not at run time.

use crate::{
    block, cgroups, device_writes, dirty_throttle, flusher_work, journal, kernel, map_overflow,
    nfs, stall_events, submissions, sync_calls, top_processes, writeback, writeback_wait,
};

/// Every map of the object.
pub const MAPS: &[&str] = &[
    block::maps::BLOCK_RQ_STATS,
    block::maps::BLOCK_BIO_COUNTS,
    block::maps::BLOCK_BIO_SLOTS,
    block::maps::BLOCK_RQ_SLOTS,
    block::maps::BLOCK_INFLIGHT,
    cgroups::names::CGROUP_TOTALS,
    dirty_throttle::maps::DIRTY_THROTTLE_PAUSE,
    flusher_work::maps::WORK_RECORDS,
    flusher_work::maps::RUNNING_WORK,
    flusher_work::maps::QUEUED_WORK,
    flusher_work::maps::LAST_SYNC,
    journal::maps::COMMITS_INFLIGHT,
    journal::maps::JOURNAL_COMMIT_LATENCY,
    kernel::maps::SYNC_INFLIGHT,
    kernel::maps::SYNC_TASK,
    map_overflow::maps::MAP_OVERFLOWS,
    nfs::maps::NFS_WRITES,
    nfs::maps::NFS_COMMITS,
    nfs::maps::NFS_WRITES_INFLIGHT,
    nfs::maps::NFS_COMMITS_INFLIGHT,
    nfs::maps::NFS_PASS_MODE,
    stall_events::maps::STALL_EVENTS,
    stall_events::maps::STALL_CONFIG,
    stall_events::maps::STALL_DROPS,
    stall_events::maps::DEV_BUSY,
    stall_events::maps::DEV_BUSY_SLOTS,
    submissions::maps::WB_SUBMISSION_SLOTS,
    submissions::maps::WB_SUBMISSIONS,
    submissions::maps::FLUSHER_INODE,
    submissions::maps::PASSES,
    submissions::maps::FLUSHER_TASK,
    submissions::maps::PASS_TASK,
    sync_calls::maps::SYNC_CALL_LATENCY,
    sync_calls::maps::SYNC_CALL_LATENCY_ANON,
    sync_calls::maps::SYNC_CALL_LATENCY_SLOTS,
    sync_calls::maps::SFR_CALLS,
    sync_calls::maps::URING_INFLIGHT,
    sync_calls::maps::MSYNC_SEEN,
    top_processes::maps::TOP_PROCESSES,
    top_processes::maps::TOP_PROCESS_RECENT,
    writeback::maps::WB_WORK_STATS,
    writeback::maps::FLUSHER_ITEMS,
    writeback::maps::FLUSHER_ITEM_TASK,
    writeback::maps::FLUSHER_REGISTER,
    writeback::maps::FLUSHER_CLAIMS,
    writeback_wait::maps::WRITEBACK_WAIT,
    writeback_wait::maps::FOLIO_WAITS,
    writeback_wait::maps::FOLIO_WAITS_PENDING,
    writeback_wait::maps::FOLIO_WAIT_BUCKETS,
    writeback_wait::maps::FOLIO_WAIT_TASK,
];

/// The maps above that are BPF task storage (declared with `probe-ebpf`'s `kernel::task_storage`
/// macro), which the daemon rewrites into unused one-entry hashes where the kernel refuses that
/// type for tracing programs (`probes::task_storage`).
pub const TASK_STORAGE_MAPS: [&str; 5] = [
    kernel::maps::SYNC_TASK,
    writeback_wait::maps::FOLIO_WAIT_TASK,
    submissions::maps::FLUSHER_TASK,
    submissions::maps::PASS_TASK,
    writeback::maps::FLUSHER_ITEM_TASK,
];

/// Every load-time global of the object (set by the daemon before load).
pub const GLOBALS: &[&str] = &[
    block::globals::BLOCK_LAYOUT,
    block::globals::BIO_DISK_LAYOUT,
    cgroups::names::CGROUPS_ENABLED,
    device_writes::globals::DEV_WRITE_LAYOUT,
    dirty_throttle::globals::DIRTY_THROTTLE_FMT,
    flusher_work::globals::WORK_QUEUER_LAYOUT,
    journal::globals::JOURNAL_FMT,
    kernel::globals::CURRENT_TASK,
    kernel::globals::FD_DEV_LAYOUT,
    kernel::globals::IGNORE_TGID,
    nfs::globals::NFS_FMT,
    stall_events::globals::STALL_LAYOUT,
    submissions::globals::EXT4_WP_RESULT_FMT,
    submissions::globals::WBC_LAYOUT,
    sync_calls::globals::FSYNC_ENTER_FMT,
    sync_calls::globals::FDATASYNC_ENTER_FMT,
    sync_calls::globals::SFR_ENTER_FMT,
    sync_calls::globals::SYNCFS_ENTER_FMT,
    sync_calls::globals::MSYNC_ENTER_FMT,
    sync_calls::globals::EXT4_SYNC_FILE_FMT,
    sync_calls::globals::XFS_FILE_FSYNC_FMT,
    sync_calls::globals::IO_URING_LAYOUT,
    sync_calls::globals::SYSCALL_ARG_REGS,
    writeback::globals::WB_WORK_FMT,
    writeback_wait::globals::FOLIO_WAIT_LAYOUT,
    writeback_wait::globals::PREV_STATE_SOURCE,
];
