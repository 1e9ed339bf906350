//! The load-time globals of the bottom that every family reads: the inode → device layout and
//! the daemon's own tgid (see `probe_common::kernel`). All-zero values mean "not resolved", and
//! the probes that need them do nothing.
//!
//! Families declare their own globals next to their probes, each with the same `#[used]`:
//!
//! Every global is `#[used]`: `Global<T>` is an immutable constant to LLVM, so without it the
//! constant-merge pass may fold a promoted constant of the same bytes (e.g. the `&0` a map
//! update inserts as its first value) into the global, and the value the daemon writes into the
//! global at load time then leaks into the program's "constant" (seen: a counter starting at 16,
//! the fd offset). `#[used]` globals are never merged (and get their own `.rodata.<name>` section,
//! which aya handles like `.rodata`).

use aya_ebpf::Global;

/// One member of a layout global, `load_time!(STATIC.member)`, for the layouts the hot probes
/// keep as plain statics: `Global::load()` copies the whole struct (a load per member and stack
/// spills) where a probe needs a few members. The verifier knows the value (the global lives in
/// a frozen read-only map) and drops the branches it rules out.
macro_rules! load_time {
    ($global:ident . $member:ident) => {
        // SAFETY: a read of a member of an initialised static. Volatile, so that LLVM does not
        // fold in the compile-time value the daemon replaces at load time.
        unsafe { core::ptr::read_volatile(&raw const $global.$member) }
    };
}
pub(crate) use load_time;
use probe_common::kernel::{FdDevLayout, InodeDevLayout};

#[unsafe(no_mangle)]
#[used]
pub static FD_DEV_LAYOUT: Global<FdDevLayout> = Global::new(FdDevLayout {
    task_files: 0,
    files_fdt: 0,
    fdt_max_fds: 0,
    fdt_fd: 0,
    file_f_inode: 0,
    resolved: 0,
    inode: InodeDevLayout {
        inode_i_mode: 0,
        inode_i_rdev: 0,
        inode_i_sb: 0,
        sb_s_dev: 0,
        resolved: 0,
        inode_i_ino: 0,
    },
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
