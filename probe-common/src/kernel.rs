//! What the probes' shared bottom (`probe-ebpf/src/kernel/`) reads from the running kernel: how
//! the current task is reached, and the offsets that take an fd, file or inode to its device.
//! Both are decided by the daemon from kernel BTF and passed as load-time globals; the probes
//! branch on them, and since the globals are frozen the verifier visits only the branch the
//! kernel supports (a helper or argument the kernel lacks in the other branch would otherwise
//! fail the whole program).

use crate::user_pod;

/// How the current task is reached.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CurrentTask {
    /// 1: `bpf_get_current_task_btf()` (5.11+) returns a BTF-typed task whose members are read
    /// with plain loads. 0: `bpf_get_current_task()`, whose members are read with
    /// `bpf_probe_read_kernel`.
    pub btf_typed: u32,
    /// 1: per-thread state lives in BPF task storage (`BPF_MAP_TYPE_TASK_STORAGE`, usable from
    /// tracing programs since 5.13). 0: in hashes keyed by thread id, and the task storage maps
    /// are created as unused one-entry hashes (see the daemon's `probes::task_storage`).
    pub task_storage: u32,
}
const _: () = assert!(core::mem::size_of::<CurrentTask>() == 8);

/// Struct member offsets (bytes, from BTF) that take an inode to the kernel `dev_t` of its
/// filesystem: `inode.i_sb → super_block.s_dev`; for block device inodes (a `/dev` node, or the
/// bdev inode whose page cache is the device's) the superblock is the bdev pseudo-filesystem's,
/// so `inode.i_rdev` names the device when `i_mode` says S_IFBLK. The one resolution of these
/// offsets (the daemon's `KernelInfo::inode_dev`), used by every family that needs a device from
/// an inode, through `probe-ebpf/src/kernel/fd_dev.rs`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct InodeDevLayout {
    pub inode_i_mode: u32,
    pub inode_i_rdev: u32,
    pub inode_i_sb: u32,
    pub sb_s_dev: u32,
    /// Non-zero once the daemon has filled in the offsets above.
    pub resolved: u32,
    /// `inode.i_ino`: the sync calls read the inode number with the device, from the same copy
    /// of the inode's first bytes (`INODE_HEAD_BYTES` in the probes).
    pub inode_i_ino: u32,
}
const _: () = assert!(core::mem::size_of::<InodeDevLayout>() == 24);

/// Struct member offsets (bytes, from BTF) for resolving a file descriptor of the current task
/// to its filesystem's `dev_t` in the kernel: `task_struct.files → files_struct.fdt →
/// fdtable.fd[fd] → file.f_inode`, bounds-checked against `fdtable.max_fds`, then [`inode`]
/// (`InodeDevLayout`). The inode part is filled in even when the fd table part is not, so that
/// an inode's device never depends on the fd table's members.
///
/// [`inode`]: FdDevLayout::inode
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FdDevLayout {
    pub task_files: u32,
    pub files_fdt: u32,
    pub fdt_max_fds: u32,
    pub fdt_fd: u32,
    pub file_f_inode: u32,
    /// Non-zero once the daemon has filled in the fd table offsets above.
    pub resolved: u32,
    pub inode: InodeDevLayout,
}
const _: () = assert!(core::mem::size_of::<FdDevLayout>() == 48);

user_pod!(CurrentTask, InodeDevLayout, FdDevLayout);

/// Names of the bottom's load-time globals in the eBPF object (`probe-ebpf/src/kernel/`).
pub mod globals {
    pub const CURRENT_TASK: &str = "CURRENT_TASK";
    pub const FD_DEV_LAYOUT: &str = "FD_DEV_LAYOUT";
    /// tgid whose events the probes ignore (the daemon's own I/O); 0 ignores nothing.
    pub const IGNORE_TGID: &str = "IGNORE_TGID";
}

/// Names of the bottom's maps in the eBPF object: the sync call each thread has in flight
/// (`probe-ebpf/src/kernel/inflight.rs`), in task storage or in a hash by thread id.
pub mod maps {
    pub const SYNC_INFLIGHT: &str = "SYNC_INFLIGHT";
    /// Task storage: a BTF-defined map of `BPF_MAP_TYPE_TASK_STORAGE`, rewritten into an unused
    /// one-entry hash where the kernel refuses that type for tracing programs (the daemon's
    /// `probes::task_storage`; every such map is in `object_names::TASK_STORAGE_MAPS`).
    pub const SYNC_TASK: &str = "SYNC_TASK";
}
