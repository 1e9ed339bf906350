//! The sync calls on fentry/fexit of their x86-64 syscall functions (`__x64_sys_fsync`, …, and
//! `__do_sys_sync`, the body `__x64_sys_sync` is an alias of, which BTF names instead), where
//! the kernel accepts fentry. Unlike a `syscalls:` tracepoint, an fentry program costs nothing
//! to the host's other system calls: only the traced function jumps to its trampoline.
//!
//! The wrappers run once per system call, between the `sys_enter` and `sys_exit` tracepoints,
//! and receive the caller's registers (`const struct pt_regs *regs`); the arguments (and sync's
//! system call number) are read from them with plain loads at the BTF offsets the daemon
//! resolves (`SYSCALL_ARG_REGS`). The
//! rest is the tracepoint path's own [`begin_fd`] … [`exit`], so both paths count the same calls.

use aya_ebpf::{
    Global,
    macros::{fentry, fexit},
    programs::{FEntryContext, FExitContext},
};
use probe_common::sync_calls::{
    SyncSyscall,
    layout::{SyscallArgRegs, X86_64_NR_SYNC},
};

use super::{begin_fd, begin_msync, begin_sfr, enter_sync, exit, traced_tid};
use crate::kernel::btf_load::load;

// `#[used]`: never merged with a promoted constant (see `globals`).
#[unsafe(no_mangle)]
#[used]
static SYSCALL_ARG_REGS: Global<SyscallArgRegs> = Global::new(SyscallArgRegs {
    arg: [0; 4],
    resolved: 0,
    nr: 0,
});

/// Argument `N` (0-based, at most 3) of the system call whose wrapper received `ctx`, or `None`
/// when the register offsets are unknown.
#[inline(always)]
fn syscall_arg<const N: usize>(ctx: &FEntryContext) -> Option<u64> {
    register(ctx, SYSCALL_ARG_REGS.load().arg[N])
}

/// The saved register at `offset` of the `struct pt_regs` the wrapper received, or `None` when
/// the register offsets are unknown.
#[inline(always)]
fn register(ctx: &FEntryContext, offset: u32) -> Option<u64> {
    if SYSCALL_ARG_REGS.load().resolved == 0 {
        return None;
    }
    // The wrapper's only argument, a BTF-typed `struct pt_regs *`: its members are plain loads.
    let pt_regs: u64 = ctx.arg(0);
    if pt_regs == 0 {
        return None;
    }
    Some(load(pt_regs, offset))
}

#[inline(always)]
fn enter_fd(ctx: &FEntryContext, syscall: SyncSyscall) {
    let Some(tid) = traced_tid() else {
        return;
    };
    if let Some(fd) = syscall_arg::<0>(ctx) {
        begin_fd(tid, syscall, fd);
    }
}

#[fentry]
pub fn fentry_fsync(ctx: FEntryContext) -> u32 {
    enter_fd(&ctx, SyncSyscall::Fsync);
    0
}

#[fexit]
pub fn fexit_fsync(ctx: FExitContext) -> u32 {
    exit(&ctx, SyncSyscall::Fsync);
    0
}

#[fentry]
pub fn fentry_fdatasync(ctx: FEntryContext) -> u32 {
    enter_fd(&ctx, SyncSyscall::Fdatasync);
    0
}

#[fexit]
pub fn fexit_fdatasync(ctx: FExitContext) -> u32 {
    exit(&ctx, SyncSyscall::Fdatasync);
    0
}

#[fentry]
pub fn fentry_syncfs(ctx: FEntryContext) -> u32 {
    enter_fd(&ctx, SyncSyscall::Syncfs);
    0
}

#[fexit]
pub fn fexit_syncfs(ctx: FExitContext) -> u32 {
    exit(&ctx, SyncSyscall::Syncfs);
    0
}

/// sync_file_range(fd, offset, nbytes, flags): `flags` is the fourth argument.
#[fentry]
pub fn fentry_sync_file_range(ctx: FEntryContext) -> u32 {
    let Some(tid) = traced_tid() else {
        return 0;
    };
    if let (Some(fd), Some(flags)) = (syscall_arg::<0>(&ctx), syscall_arg::<3>(&ctx)) {
        begin_sfr(tid, fd, flags);
    }
    0
}

#[fexit]
pub fn fexit_sync_file_range(ctx: FExitContext) -> u32 {
    exit(&ctx, SyncSyscall::SyncFileRange);
    0
}

/// sync(2): `__x64_sys_sync` where BTF lists it, else `__do_sys_sync`, its body, which the
/// 32-bit entries run too; only the x86-64 system call is timed, as by the tracepoints.
#[fentry]
pub fn fentry_sync(ctx: FEntryContext) -> u32 {
    if register(&ctx, SYSCALL_ARG_REGS.load().nr) == Some(X86_64_NR_SYNC) {
        enter_sync();
    }
    0
}

#[fexit]
pub fn fexit_sync(ctx: FExitContext) -> u32 {
    exit(&ctx, SyncSyscall::Sync);
    0
}

/// msync(start, len, flags): `flags` is the third argument.
#[fentry]
pub fn fentry_msync(ctx: FEntryContext) -> u32 {
    let Some(tid) = traced_tid() else {
        return 0;
    };
    if let Some(flags) = syscall_arg::<2>(&ctx) {
        begin_msync(tid, flags);
    }
    0
}

#[fexit]
pub fn fexit_msync(ctx: FExitContext) -> u32 {
    exit(&ctx, SyncSyscall::Msync);
    0
}
