//! Every map and load-time global name the eBPF object holds, gathered from the families that
//! declare them. The names are written twice, once as the `#[map]` or `#[no_mangle]` static in
//! `probe-ebpf` (aya names a map after its static) and once as these constants, which the daemon
//! uses; the daemon's unit test `probes::object_names` parses the embedded object and fails when
//! the two disagree, so a rename on one side only fails in the unit tier, not at run time.

use crate::{
    bio_disk, block, device_write, dirty, flusher_work, journal, layout, map_overflow, nfs, stall,
    submission, sync_call, sync_layout, task, top, writeback,
};

/// Every map of the object.
pub const MAPS: &[&str] = &[
    block::maps::BLOCK_RQ_STATS,
    block::maps::BLOCK_BIO_COUNTS,
    block::maps::BLOCK_INFLIGHT,
    device_write::names::DEVICE_WRITES,
    dirty::maps::DIRTY_THROTTLE_PAUSE,
    dirty::maps::WRITEBACK_WAIT,
    dirty::maps::FOLIO_WAITS,
    dirty::maps::FOLIO_WAITS_PENDING,
    dirty::maps::FOLIO_WAIT_BUCKETS,
    flusher_work::names::WORK_RECORDS,
    flusher_work::names::RUNNING_WORK,
    flusher_work::names::QUEUED_WORK,
    flusher_work::names::LAST_SYNC,
    journal::maps::COMMITS_INFLIGHT,
    journal::maps::JOURNAL_COMMIT_LATENCY,
    map_overflow::maps::MAP_OVERFLOWS,
    nfs::globals::NFS_WRITES,
    nfs::globals::NFS_COMMITS,
    nfs::maps::NFS_WRITES_INFLIGHT,
    nfs::maps::NFS_COMMITS_INFLIGHT,
    nfs::maps::NFS_PASS_MODE,
    stall::names::STALL_EVENTS,
    stall::names::STALL_CONFIG,
    stall::names::STALL_DROPS,
    stall::names::DEV_BUSY,
    submission::maps::WB_SUBMISSIONS,
    submission::maps::FLUSHER_INODE,
    submission::maps::PASSES,
    sync_call::maps::SYNC_INFLIGHT,
    sync_call::maps::SYNC_CALL_LATENCY,
    sync_call::maps::SYNC_CALL_LATENCY_ANON,
    sync_call::maps::SFR_CALLS,
    sync_call::maps::URING_INFLIGHT,
    task::task_storage_maps::SYNC_TASK,
    task::task_storage_maps::FOLIO_WAIT_TASK,
    task::task_storage_maps::FLUSHER_TASK,
    task::task_storage_maps::PASS_TASK,
    task::task_storage_maps::FLUSHER_ITEM_TASK,
    top::names::TOP_PROCESSES,
    writeback::maps::WB_WORK_STATS,
    writeback::maps::FLUSHER_ITEMS,
];

/// Every load-time global of the object (set by the daemon before load).
pub const GLOBALS: &[&str] = &[
    bio_disk::BIO_DISK_LAYOUT,
    block::BLOCK_LAYOUT_GLOBAL,
    device_write::names::DEV_WRITE_LAYOUT,
    dirty::globals::DIRTY_THROTTLE_FMT,
    dirty::globals::FOLIO_WAIT_LAYOUT,
    flusher_work::names::WORK_QUEUER_LAYOUT,
    journal::JOURNAL_FMT,
    layout::globals::WB_WORK_FMT,
    layout::globals::FSYNC_ENTER_FMT,
    layout::globals::FDATASYNC_ENTER_FMT,
    layout::globals::FD_DEV_LAYOUT,
    layout::globals::IGNORE_TGID,
    nfs::globals::NFS_FMT,
    stall::names::STALL_LAYOUT,
    submission::globals::EXT4_WP_RESULT_FMT,
    submission::globals::WBC_LAYOUT,
    sync_layout::globals::SFR_ENTER_FMT,
    sync_layout::globals::SYNCFS_ENTER_FMT,
    sync_layout::globals::MSYNC_ENTER_FMT,
    sync_layout::globals::EXT4_SYNC_FILE_FMT,
    sync_layout::globals::XFS_FILE_FSYNC_FMT,
    sync_layout::globals::IO_URING_LAYOUT,
    sync_layout::globals::SYSCALL_ARG_REGS,
    task::globals::CURRENT_TASK,
    task::globals::PREV_STATE_SOURCE,
];
