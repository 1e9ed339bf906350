//! Sync-family calls: fsync, fdatasync, sync_file_range, syncfs, sync and msync(MS_SYNC) through
//! fentry/fexit of their syscall functions where the kernel accepts them, through their
//! `syscalls:sys_{enter,exit}_*` tracepoints otherwise (`[probes] sync_call_hook`); msync's device from the filesystems' fsync
//! events; io_uring FSYNC / SYNC_FILE_RANGE requests through `tp_btf/io_uring_submit_req` →
//! `io_uring_complete`. Exports `wbscope_sync_call_duration_seconds{syscall,device}` and
//! `wbscope_sync_file_range_calls_total{device,flags}`.

use aya::{Ebpf, EbpfLoader};
use probe_common::sync_calls::{
    globals,
    layout::{FieldFormat, IoUringLayout, SfrEnterFormat, SysEnterFdFormat, SyscallArgRegs},
};
use prometheus::core::Collector;

use super::{CollectorContext, Family, KernelInfo};
use crate::probes::ProbeSpec;

mod anonymous;
mod collect;
mod layout;

use layout::{Part, gap_of};

/// A sync call's `syscalls:sys_{enter,exit}_<call>` tracepoints, or fentry/fexit of its x86-64
/// syscall function (`syscalls` names it: the wrapper first, then the body it may be an alias
/// of, which is what BTF lists for the argument-less sync(2)).
macro_rules! sync_call {
    ($enter:literal, $exit:literal, $fentry:literal, $fexit:literal, $functions:expr) => {
        [
            ProbeSpec::tracepoint($enter, "syscalls", $enter)
                .with_fentry($fentry, false, $functions),
            ProbeSpec::tracepoint($exit, "syscalls", $exit).with_fentry($fexit, true, $functions),
        ]
    };
}

const FSYNC: [ProbeSpec; 2] = sync_call!(
    "sys_enter_fsync",
    "sys_exit_fsync",
    "fentry_fsync",
    "fexit_fsync",
    &["__x64_sys_fsync"]
);
const FDATASYNC: [ProbeSpec; 2] = sync_call!(
    "sys_enter_fdatasync",
    "sys_exit_fdatasync",
    "fentry_fdatasync",
    "fexit_fdatasync",
    &["__x64_sys_fdatasync"]
);
const SYNC_FILE_RANGE: [ProbeSpec; 2] = sync_call!(
    "sys_enter_sync_file_range",
    "sys_exit_sync_file_range",
    "fentry_sync_file_range",
    "fexit_sync_file_range",
    &["__x64_sys_sync_file_range"]
);
const SYNCFS: [ProbeSpec; 2] = sync_call!(
    "sys_enter_syncfs",
    "sys_exit_syncfs",
    "fentry_syncfs",
    "fexit_syncfs",
    &["__x64_sys_syncfs"]
);
const SYNC: [ProbeSpec; 2] = sync_call!(
    "sys_enter_sync",
    "sys_exit_sync",
    "fentry_sync",
    "fexit_sync",
    &["__x64_sys_sync", "__do_sys_sync"]
);
const MSYNC: [ProbeSpec; 2] = sync_call!(
    "sys_enter_msync",
    "sys_exit_msync",
    "fentry_msync",
    "fexit_msync",
    &["__x64_sys_msync"]
);

const PROBES: &[ProbeSpec] = &[
    FSYNC[0],
    FSYNC[1],
    FDATASYNC[0],
    FDATASYNC[1],
    SYNC_FILE_RANGE[0],
    SYNC_FILE_RANGE[1],
    SYNCFS[0],
    SYNCFS[1],
    SYNC[0],
    SYNC[1],
    MSYNC[0],
    MSYNC[1],
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
    syscall_arg_regs: Part<SyscallArgRegs>,
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
        self.syscall_arg_regs = Some(layout::syscall_arg_regs(kernel));
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

    fn fentry_gap(&self, probe: &ProbeSpec) -> Option<String> {
        match probe.fentry.map(|f| f.program) {
            // These read syscall arguments (or, for sync(2), the number) from the registers.
            Some(
                "fentry_fsync"
                | "fentry_fdatasync"
                | "fentry_syncfs"
                | "fentry_sync_file_range"
                | "fentry_msync"
                | "fentry_sync",
            ) => gap_of(&self.syscall_arg_regs),
            // fexit programs read nothing.
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
        set(loader, globals::SYSCALL_ARG_REGS, &self.syscall_arg_regs);
    }

    fn describe(&self) -> Vec<String> {
        let msync = match (&self.ext4_sync_file, &self.xfs_file_fsync) {
            (Some(Ok(_)), Some(Ok(_))) => "ext4 and xfs".to_owned(),
            (Some(Ok(_)), _) => "ext4 only".to_owned(),
            (_, Some(Ok(_))) => "xfs only".to_owned(),
            _ => "none (device unknown)".to_owned(),
        };
        // Which hook each sync call got, and what it costs the host, is said by `check` from
        // the attach reports (`check::hooks`).
        vec![format!(
            "msync(MS_SYNC) device from filesystem fsync events: {msync}"
        )]
    }

    fn collectors(&self, ebpf: &mut Ebpf, ctx: &CollectorContext) -> Vec<Box<dyn Collector>> {
        collect::collectors(ebpf, ctx)
    }
}
