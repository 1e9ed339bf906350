//! Kernel layout facts for the sync-call probes, resolved by the daemon at
//! start-up (tracefs formats, BTF) and injected as load-time globals. All-zero means "not
//! resolved": the probe that needs it does nothing.

use crate::user_pod;

/// Offsets in a `syscalls:sys_enter_sync_file_range` record: `int fd`, `unsigned int flags`
/// (stored as 8-byte longs like every syscall argument).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SfrEnterFormat {
    pub fd: u32,
    pub flags: u32,
}
const _: () = assert!(core::mem::size_of::<SfrEnterFormat>() == 8);

/// Offset of one field in a tracepoint record (`flags` of `sys_enter_msync`, `dev` of
/// `ext4:ext4_sync_file_enter` or `xfs:xfs_file_fsync`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FieldFormat {
    pub offset: u32,
    pub _reserved: u32,
}
const _: () = assert!(core::mem::size_of::<FieldFormat>() == 8);

/// What the io_uring probes read from `struct io_kiocb` (BTF offsets) and the opcode values of
/// `enum io_uring_op` (BTF enumerators; UAPI, but read from the kernel all the same).
///
/// `io_kiocb { union { struct file *file; struct io_cmd_data cmd; }; u8 opcode; … }`; for fsync and
/// sync_file_range requests `cmd` holds a `struct io_sync { file; len; off; int flags; int mode; }`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct IoUringLayout {
    pub kiocb_opcode: u32,
    pub kiocb_file: u32,
    pub kiocb_cmd: u32,
    pub io_sync_flags: u32,
    pub op_fsync: u32,
    pub op_sync_file_range: u32,
    /// Non-zero once resolved.
    pub resolved: u32,
    pub _reserved: u32,
}
const _: () = assert!(core::mem::size_of::<IoUringLayout>() == 32);

/// Offset of the `fd` argument in a `syscalls:sys_enter_<call>` record for calls whose first
/// argument is a file descriptor (`fsync`, `fdatasync`, `syncfs`, `sync_file_range`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SysEnterFdFormat {
    pub fd: u32,
    pub _reserved: u32,
}
const _: () = assert!(core::mem::size_of::<SysEnterFdFormat>() == 8);

user_pod!(SysEnterFdFormat, SfrEnterFormat, FieldFormat, IoUringLayout);
