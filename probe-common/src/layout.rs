//! Kernel layout facts the daemon resolves at start-up and injects as load-time globals.
//!
//! Rust eBPF has no CO-RE relocations, so nothing here is a compile-time constant: classic
//! tracepoint field offsets come from `/sys/kernel/tracing/events/*/*/format`, struct member
//! offsets from `/sys/kernel/btf/vmlinux`. The probes treat an all-zero layout as "not resolved"
//! and do nothing.

use crate::user_pod;

/// Field offsets in the records of the `writeback:writeback_work_class` tracepoints
/// (`writeback_queue`, `writeback_exec`, `writeback_start`, `writeback_written`).
///
/// `include/trace/events/writeback.h`, `DECLARE_EVENT_CLASS(writeback_work_class, …)`:
/// `char name[32]; long nr_pages; dev_t sb_dev; int sync_mode; int for_kupdate;
/// int range_cyclic; int for_background; int reason; ino_t cgroup_ino;`
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WbWorkFormat {
    pub name: u32,
    pub nr_pages: u32,
    pub sb_dev: u32,
    pub sync_mode: u32,
    pub for_kupdate: u32,
    pub range_cyclic: u32,
    pub for_background: u32,
    pub reason: u32,
}
const _: () = assert!(core::mem::size_of::<WbWorkFormat>() == 32);

/// Offset of the `fd` argument in a `syscalls:sys_enter_<call>` record for calls whose first
/// argument is a file descriptor (`fsync`, `fdatasync`, `syncfs`, `sync_file_range`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SysEnterFdFormat {
    pub fd: u32,
    pub _reserved: u32,
}
const _: () = assert!(core::mem::size_of::<SysEnterFdFormat>() == 8);

/// Struct member offsets (bytes) for resolving a file descriptor to its filesystem's `dev_t` in the
/// kernel: `task_struct.files → files_struct.fdt → fdtable.fd[fd] → file.f_inode → inode.i_sb →
/// super_block.s_dev`, bounds-checked against `fdtable.max_fds`. For block device nodes the
/// superblock is the bdev pseudo-filesystem, so `inode.i_rdev` is used when `i_mode` says S_IFBLK.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FdDevLayout {
    pub task_files: u32,
    pub files_fdt: u32,
    pub fdt_max_fds: u32,
    pub fdt_fd: u32,
    pub file_f_inode: u32,
    pub inode_i_mode: u32,
    pub inode_i_rdev: u32,
    pub inode_i_sb: u32,
    pub sb_s_dev: u32,
    /// Non-zero once the daemon has filled in the offsets above.
    pub resolved: u32,
}
const _: () = assert!(core::mem::size_of::<FdDevLayout>() == 40);

user_pod!(WbWorkFormat, SysEnterFdFormat, FdDevLayout);

/// Names of the load-time globals in the eBPF object, shared so both sides agree.
pub mod globals {
    pub const WB_WORK_FMT: &str = "WB_WORK_FMT";
    pub const FSYNC_ENTER_FMT: &str = "FSYNC_ENTER_FMT";
    pub const FDATASYNC_ENTER_FMT: &str = "FDATASYNC_ENTER_FMT";
    pub const FD_DEV_LAYOUT: &str = "FD_DEV_LAYOUT";
    /// tgid whose events the probes ignore (the daemon's own I/O); 0 ignores nothing.
    pub const IGNORE_TGID: &str = "IGNORE_TGID";
}
