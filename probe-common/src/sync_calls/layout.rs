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

/// Where a syscall's arguments are in the `struct pt_regs` its x86-64 wrapper
/// (`__x64_sys_<call>(const struct pt_regs *regs)`) receives, for the fentry sync-call programs:
/// the BTF offsets of `di`, `si`, `dx` and `r10`, the registers of arguments 1 to 4 in the
/// syscall ABI, and of `orig_ax`, the system call's number. `resolved == 0`: unknown (another
/// architecture, or no BTF), and the fentry path is not used.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SyscallArgRegs {
    pub arg: [u32; 4],
    pub resolved: u32,
    pub nr: u32,
}

/// `__NR_sync` in the x86-64 system call table (arch/x86/entry/syscalls/syscall_64.tbl, UAPI).
/// `__do_sys_sync`, which the sync(2) fentry program attaches to, also runs for the 32-bit
/// entries (ia32 number 36, x32 with `__X32_SYSCALL_BIT` set), which the `syscalls:` tracepoints
/// leave out; comparing `orig_ax` with this number leaves them out too.
pub const X86_64_NR_SYNC: u64 = 162;
const _: () = assert!(core::mem::size_of::<SyscallArgRegs>() == 24);

user_pod!(
    SysEnterFdFormat,
    SfrEnterFormat,
    FieldFormat,
    IoUringLayout,
    SyscallArgRegs
);
