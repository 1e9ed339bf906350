//! Resolving a file descriptor of the current task (or a `struct file` / `struct inode`) to its
//! filesystem's `dev_t`, in the kernel.
//!
//! Path (offsets from BTF, see `probe_common::kernel::FdDevLayout`):
//! `current->files->fdt->fd[fd]->f_inode->i_sb->s_dev`, with `fd < fdt->max_fds` checked first.
//! Block device nodes live on the bdev pseudo-filesystem, so for them `i_rdev` names the device.
//! The steps up to the fd array are plain loads through the BTF-typed current task where the
//! kernel has one (`current_task`); the rest are `bpf_probe_read_kernel`, so a racing close()
//! yields 0 ("unknown"), never a fault.
//!
//! This is the one implementation of inode → device in the probes: the sync calls, the writeback
//! submissions and the writeback waits all call it, with the one layout the daemon resolves
//! (`KernelInfo::inode_dev`); BTF-typed inode pointers take [`dev_of_typed_inode`] (plain
//! loads), addresses [`dev_of_inode`] (helper reads).

use core::mem::MaybeUninit;

use aya_ebpf::{cty::c_void, helpers::generated};
use probe_common::kernel::FdDevLayout;

use super::{
    btf_load::{load, read},
    current_task,
    globals::FD_DEV_LAYOUT,
};

/// How many of an inode's first bytes one helper read copies: `i_mode`, `i_sb`, `i_ino` and
/// `i_rdev` all lie there (offsets 0, 40, 64 and 76 from 5.10 to 6.18), so the device and the
/// inode number take one `bpf_probe_read_kernel` of the inode (and one of its superblock)
/// instead of four. A kernel whose members lie further in takes one read per member.
const INODE_HEAD_BYTES: usize = 96;

/// An inode's first [`INODE_HEAD_BYTES`] bytes, aligned for the members read from them.
#[repr(C, align(8))]
struct InodeHead([u8; INODE_HEAD_BYTES]);

impl InodeHead {
    /// The `T` at `offset`; the daemon's offsets are known to the verifier (a frozen global),
    /// and [`fits`] was checked for every member read.
    #[inline(always)]
    fn member<T: Copy>(&self, offset: u32) -> T {
        // SAFETY: `fits(offset, size_of::<T>())` was checked by the caller, so the read stays
        // inside the buffer; read_unaligned has no alignment need.
        unsafe { core::ptr::read_unaligned(self.0.as_ptr().add(offset as usize).cast::<T>()) }
    }
}

/// Whether a member of `size` bytes at `offset` lies inside [`InodeHead`].
#[inline(always)]
fn fits(offset: u32, size: usize) -> bool {
    offset as usize + size <= INODE_HEAD_BYTES
}

/// `S_IFMT` and `S_IFBLK` from include/uapi/linux/stat.h (UAPI, stable).
const S_IFMT: u16 = 0o170000;
const S_IFBLK: u16 = 0o060000;

/// The address of the inode behind `fd` of the current task, if it can be read. The task's
/// file table is reached by plain loads through the BTF-typed current task where the kernel
/// types it (`current_task`), by helper reads otherwise; the fd array slot (a variable offset,
/// which the verifier allows only for helper reads) and what follows it are helper reads, so a
/// racing close() yields 0 ("unknown"), never a fault.
#[inline(always)]
pub fn inode_of_fd(task: Option<current_task::Current>, fd: u64) -> Option<u64> {
    let l = FD_DEV_LAYOUT.load();
    if l.resolved == 0 {
        return None;
    }
    let task = task?;
    let (max_fds, fd_array) = if current_task::typed() {
        fd_table_typed(task, &l)?
    } else {
        fd_table_read(task, &l)?
    };
    if fd >= max_fds as u64 {
        return None;
    }
    let file: u64 = read(fd_array + fd * 8)?;
    read(file + l.file_f_inode as u64)
}

/// `(fdt->max_fds, fdt->fd)` of the current task through plain loads of typed pointers.
#[inline(always)]
fn fd_table_typed(task: current_task::Current, l: &FdDevLayout) -> Option<(u32, u64)> {
    let files: u64 = task.member(l.task_files)?;
    if files == 0 {
        return None;
    }
    let fdt: u64 = load(files, l.files_fdt);
    if fdt == 0 {
        return None;
    }
    Some((load(fdt, l.fdt_max_fds), load(fdt, l.fdt_fd)))
}

/// The same through `bpf_probe_read_kernel`, for kernels without a typed current task.
#[inline(always)]
fn fd_table_read(task: current_task::Current, l: &FdDevLayout) -> Option<(u32, u64)> {
    let files: u64 = task.member(l.task_files)?;
    let fdt: u64 = read(files + l.files_fdt as u64)?;
    if fdt == 0 {
        return None;
    }
    Some((
        read(fdt + l.fdt_max_fds as u64)?,
        read(fdt + l.fdt_fd as u64)?,
    ))
}

/// The kernel `dev_t` of the filesystem holding the open file at address `file` (a
/// `struct file *` as a number), or 0 if unknown.
#[inline(always)]
pub fn dev_of_file(file: u64) -> u32 {
    file_dev(file).unwrap_or(0)
}

/// The kernel `dev_t` of the filesystem holding the inode at address `inode` (a number, read
/// with `bpf_probe_read_kernel`), or 0 if unknown. For a block device inode (its page cache is
/// the device's) that is the device itself.
#[inline(always)]
pub fn dev_of_inode(inode: u64) -> u32 {
    inode_dev(inode).unwrap_or(0)
}

/// The same for a BTF-typed inode pointer (a tp_btf argument, or a pointer member loaded from
/// one), read with plain loads: the verifier checks them against the struct's BTF and makes them
/// fault-safe, with no helper call. `None` for a null inode or an unresolved layout.
#[inline(always)]
pub fn dev_of_typed_inode(inode: u64) -> Option<u32> {
    let l = FD_DEV_LAYOUT.load().inode;
    // The verifier allows the offset loads below only after the null check.
    if l.resolved == 0 || inode == 0 {
        return None;
    }
    let mode: u16 = load(inode, l.inode_i_mode);
    if is_block_device(mode) {
        return Some(load(inode, l.inode_i_rdev));
    }
    let sb: u64 = load(inode, l.inode_i_sb);
    if sb == 0 {
        return None;
    }
    Some(load(sb, l.sb_s_dev))
}

#[inline(always)]
fn file_dev(file: u64) -> Option<u32> {
    let l = FD_DEV_LAYOUT.load();
    if l.resolved == 0 {
        return None;
    }
    let inode: u64 = read(file + l.file_f_inode as u64)?;
    inode_dev(inode)
}

#[inline(always)]
fn inode_dev(inode: u64) -> Option<u32> {
    inode_dev_and_ino(inode).map(|(dev, _)| dev)
}

/// The kernel `dev_t` (as [`dev_of_inode`]) and the inode number of the inode at address
/// `inode`, `(0, 0)` if unknown; one helper read of the inode's head where its members lie
/// there (see [`INODE_HEAD_BYTES`]).
#[inline(always)]
pub fn dev_and_ino_of_inode(inode: u64) -> (u32, u64) {
    inode_dev_and_ino(inode).unwrap_or((0, 0))
}

#[inline(always)]
fn inode_dev_and_ino(inode: u64) -> Option<(u32, u64)> {
    let l = FD_DEV_LAYOUT.load().inode;
    if l.resolved == 0 || inode == 0 {
        return None;
    }
    let in_head = fits(l.inode_i_mode, 2)
        && fits(l.inode_i_rdev, 4)
        && fits(l.inode_i_sb, 8)
        && fits(l.inode_i_ino, 8);
    let (mode, rdev, sb, ino) = if in_head {
        // Not zeroed first: a zero-fill becomes a byte-loop `memset` call on BPF (about 480
        // instructions for these 96 bytes), and the helper writes every byte.
        let mut head = MaybeUninit::<InodeHead>::uninit();
        // SAFETY: bpf_probe_read_kernel copies `INODE_HEAD_BYTES` from a kernel address into
        // the stack buffer, or zeroes the buffer and fails instead of faulting on a bad address:
        // either way every byte is written.
        let failed = unsafe {
            generated::bpf_probe_read_kernel(
                head.as_mut_ptr().cast(),
                INODE_HEAD_BYTES as u32,
                inode as *const c_void,
            )
        } != 0;
        // SAFETY: initialised by the helper, as above.
        let head = unsafe { head.assume_init() };
        if failed {
            return None;
        }
        (
            head.member::<u16>(l.inode_i_mode),
            head.member::<u32>(l.inode_i_rdev),
            head.member::<u64>(l.inode_i_sb),
            head.member::<u64>(l.inode_i_ino),
        )
    } else {
        (
            read::<u16>(inode + l.inode_i_mode as u64)?,
            read::<u32>(inode + l.inode_i_rdev as u64)?,
            read::<u64>(inode + l.inode_i_sb as u64)?,
            read::<u64>(inode + l.inode_i_ino as u64).unwrap_or(0),
        )
    };
    if is_block_device(mode) {
        return Some((rdev, ino));
    }
    Some((read(sb + l.sb_s_dev as u64)?, ino))
}

/// Whether `i_mode` is a block device's: its `i_rdev` names the device.
#[inline(always)]
fn is_block_device(mode: u16) -> bool {
    mode & S_IFMT == S_IFBLK
}
