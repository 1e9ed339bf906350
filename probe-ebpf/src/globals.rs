//! Load-time globals: kernel layout facts resolved by the daemon (see `probe_common::layout`).
//! All-zero values mean "not resolved", and the probes that need them do nothing.
//!
//! Every global is `#[used]`: `Global<T>` is an immutable constant to LLVM, so without it the
//! constant-merge pass may fold a promoted constant of the same bytes (e.g. the `&0` a map
//! update inserts as its first value) into the global, and the value the daemon writes into the
//! global at load time then leaks into the program's "constant" (seen: a counter starting at 16,
//! the fd offset). `#[used]` globals are never merged (and get their own `.rodata.<name>` section,
//! which aya handles like `.rodata`).

use aya_ebpf::Global;
use probe_common::layout::{FdDevLayout, SysEnterFdFormat, WbWorkFormat};

#[unsafe(no_mangle)]
#[used]
pub static WB_WORK_FMT: Global<WbWorkFormat> = Global::new(WbWorkFormat {
    name: 0,
    nr_pages: 0,
    sb_dev: 0,
    sync_mode: 0,
    for_kupdate: 0,
    range_cyclic: 0,
    for_background: 0,
    reason: 0,
});

#[unsafe(no_mangle)]
#[used]
pub static FSYNC_ENTER_FMT: Global<SysEnterFdFormat> = Global::new(SysEnterFdFormat {
    fd: 0,
    _reserved: 0,
});

#[unsafe(no_mangle)]
#[used]
pub static FDATASYNC_ENTER_FMT: Global<SysEnterFdFormat> = Global::new(SysEnterFdFormat {
    fd: 0,
    _reserved: 0,
});

#[unsafe(no_mangle)]
#[used]
pub static FD_DEV_LAYOUT: Global<FdDevLayout> = Global::new(FdDevLayout {
    task_files: 0,
    files_fdt: 0,
    fdt_max_fds: 0,
    fdt_fd: 0,
    file_f_inode: 0,
    inode_i_mode: 0,
    inode_i_rdev: 0,
    inode_i_sb: 0,
    sb_s_dev: 0,
    resolved: 0,
});

/// The daemon's own tgid: its I/O is not what the operator is looking at.
#[unsafe(no_mangle)]
#[used]
pub static IGNORE_TGID: Global<u32> = Global::new(0);

/// True when the current task belongs to the process whose events are ignored.
#[inline(always)]
pub fn is_ignored_tgid(pid_tgid: u64) -> bool {
    let ignore = IGNORE_TGID.load();
    ignore != 0 && (pid_tgid >> 32) as u32 == ignore
}
