//! Sync-family calls: fsync, fdatasync, sync_file_range, syncfs, sync and msync(MS_SYNC) through
//! their `syscalls:sys_{enter,exit}_*` tracepoints; msync's device from the filesystems' fsync
//! events; io_uring FSYNC / SYNC_FILE_RANGE requests through `tp_btf/io_uring_submit_req` →
//! `io_uring_complete`. Exports `wbscope_sync_call_duration_seconds{syscall,device}` and
//! `wbscope_sync_file_range_calls_total{device,flags}`.

use aya::{Ebpf, EbpfLoader};
use probe_common::sync_calls::{
    globals,
    layout::{FieldFormat, IoUringLayout, SfrEnterFormat, SysEnterFdFormat},
};
use prometheus::core::Collector;

use super::{CollectorContext, Family, KernelInfo};
use crate::probes::ProbeSpec;

mod anonymous;
mod collect;
mod layout;

use layout::{Part, gap_of};

const PROBES: &[ProbeSpec] = &[
    ProbeSpec::tracepoint("sys_enter_fsync", "syscalls", "sys_enter_fsync"),
    ProbeSpec::tracepoint("sys_exit_fsync", "syscalls", "sys_exit_fsync"),
    ProbeSpec::tracepoint("sys_enter_fdatasync", "syscalls", "sys_enter_fdatasync"),
    ProbeSpec::tracepoint("sys_exit_fdatasync", "syscalls", "sys_exit_fdatasync"),
    ProbeSpec::tracepoint(
        "sys_enter_sync_file_range",
        "syscalls",
        "sys_enter_sync_file_range",
    ),
    ProbeSpec::tracepoint(
        "sys_exit_sync_file_range",
        "syscalls",
        "sys_exit_sync_file_range",
    ),
    ProbeSpec::tracepoint("sys_enter_syncfs", "syscalls", "sys_enter_syncfs"),
    ProbeSpec::tracepoint("sys_exit_syncfs", "syscalls", "sys_exit_syncfs"),
    ProbeSpec::tracepoint("sys_enter_sync", "syscalls", "sys_enter_sync"),
    ProbeSpec::tracepoint("sys_exit_sync", "syscalls", "sys_exit_sync"),
    ProbeSpec::tracepoint("sys_enter_msync", "syscalls", "sys_enter_msync"),
    ProbeSpec::tracepoint("sys_exit_msync", "syscalls", "sys_exit_msync"),
    ProbeSpec::tracepoint("ext4_sync_file_enter", "ext4", "ext4_sync_file_enter"),
    ProbeSpec::tracepoint("xfs_file_fsync", "xfs", "xfs_file_fsync"),
    // Called io_uring_submit_sqe(req, force_nonblock) before 6.4, at the same place in
    // io_submit_sqe() (after io_init_req() prepared the request), with the same first argument.
    ProbeSpec::btf_tracepoint_or(
        "io_uring_submit_req",
        "io_uring_submit_req",
        "io_uring_submit_sqe",
    ),
    ProbeSpec::btf_tracepoint("io_uring_complete", "io_uring_complete"),
];

/// The sync-call family.
#[derive(Default)]
pub struct SyncCalls {
    fsync_enter: Part<SysEnterFdFormat>,
    fdatasync_enter: Part<SysEnterFdFormat>,
    syncfs_enter: Part<SysEnterFdFormat>,
    sfr_enter: Part<SfrEnterFormat>,
    msync_enter: Part<FieldFormat>,
    ext4_sync_file: Part<FieldFormat>,
    xfs_file_fsync: Part<FieldFormat>,
    io_uring: Part<IoUringLayout>,
}

impl Family for SyncCalls {
    fn name(&self) -> &'static str {
        "sync calls"
    }

    fn probes(&self) -> &'static [ProbeSpec] {
        PROBES
    }

    fn resolve(&mut self, kernel: &KernelInfo) {
        self.fsync_enter = Some(layout::sys_enter_fd(kernel, "sys_enter_fsync"));
        self.fdatasync_enter = Some(layout::sys_enter_fd(kernel, "sys_enter_fdatasync"));
        self.syncfs_enter = Some(layout::sys_enter_fd(kernel, "sys_enter_syncfs"));
        self.sfr_enter = Some(layout::sfr_enter(kernel));
        self.msync_enter = Some(layout::field(
            kernel,
            "syscalls",
            "sys_enter_msync",
            "flags",
            8,
        ));
        self.ext4_sync_file = Some(layout::field(
            kernel,
            "ext4",
            "ext4_sync_file_enter",
            "dev",
            4,
        ));
        self.xfs_file_fsync = Some(layout::field(kernel, "xfs", "xfs_file_fsync", "dev", 4));
        self.io_uring = Some(layout::io_uring(kernel));
    }

    fn gap(&self, probe: &ProbeSpec) -> Option<String> {
        match probe.program {
            "sys_enter_fsync" => gap_of(&self.fsync_enter),
            "sys_enter_fdatasync" => gap_of(&self.fdatasync_enter),
            "sys_enter_syncfs" => gap_of(&self.syncfs_enter),
            "sys_enter_sync_file_range" => gap_of(&self.sfr_enter),
            "sys_enter_msync" => gap_of(&self.msync_enter),
            "ext4_sync_file_enter" => gap_of(&self.ext4_sync_file),
            "xfs_file_fsync" => gap_of(&self.xfs_file_fsync),
            "io_uring_submit_req" | "io_uring_complete" => gap_of(&self.io_uring),
            // Exits and sync(2) read no record fields.
            _ => None,
        }
    }

    fn set_globals<'a>(&'a self, loader: &mut EbpfLoader<'a>) {
        fn set<'a, T: aya::Pod>(loader: &mut EbpfLoader<'a>, name: &'a str, part: &'a Part<T>) {
            if let Some(Ok(value)) = part {
                loader.override_global(name, value, true);
            }
        }
        set(loader, globals::FSYNC_ENTER_FMT, &self.fsync_enter);
        set(loader, globals::FDATASYNC_ENTER_FMT, &self.fdatasync_enter);
        set(loader, globals::SYNCFS_ENTER_FMT, &self.syncfs_enter);
        set(loader, globals::SFR_ENTER_FMT, &self.sfr_enter);
        set(loader, globals::MSYNC_ENTER_FMT, &self.msync_enter);
        set(loader, globals::EXT4_SYNC_FILE_FMT, &self.ext4_sync_file);
        set(loader, globals::XFS_FILE_FSYNC_FMT, &self.xfs_file_fsync);
        set(loader, globals::IO_URING_LAYOUT, &self.io_uring);
    }

    fn describe(&self) -> Vec<String> {
        let msync = match (&self.ext4_sync_file, &self.xfs_file_fsync) {
            (Some(Ok(_)), Some(Ok(_))) => "ext4 and xfs".to_owned(),
            (Some(Ok(_)), _) => "ext4 only".to_owned(),
            (_, Some(Ok(_))) => "xfs only".to_owned(),
            _ => "none (device unknown)".to_owned(),
        };
        vec![
            format!("msync(MS_SYNC) device from filesystem fsync events: {msync}"),
            // Said so that an operator knows what attaching costs the rest of the host.
            "sync calls: syscalls: tracepoints (no fentry/fexit path yet): while any is \
             attached, every system call on the host takes the tracepoint slow path"
                .to_owned(),
        ]
    }

    fn collectors(&self, ebpf: &mut Ebpf, ctx: &CollectorContext) -> Vec<Box<dyn Collector>> {
        collect::collectors(ebpf, ctx)
    }
}
