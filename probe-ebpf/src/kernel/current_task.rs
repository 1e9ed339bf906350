//! Members of the current task, on kernels with and without `bpf_get_current_task_btf()`.
//!
//! Since 5.11 `bpf_get_current_task_btf()` returns a BTF-typed task, read with plain loads
//! (`btf_load`), which cost less than a helper call. Older kernels (Debian 11's 5.10) have only
//! `bpf_get_current_task()`, a plain number whose members `bpf_probe_read_kernel` reads. The
//! daemon says which in [`CURRENT_TASK`], a frozen global: the verifier visits only the branch
//! this kernel supports, so the unknown helper in the other one does not fail the program.

use core::mem::MaybeUninit;

use aya_ebpf::{Global, helpers::generated};
use probe_common::kernel::CurrentTask;

use super::btf_load::{load, read};

// `#[used]`: never merged with a promoted constant (see `kernel::globals`).
#[unsafe(no_mangle)]
#[used]
static CURRENT_TASK: Global<CurrentTask> = Global::new(CurrentTask {
    btf_typed: 0,
    task_storage: 0,
});

/// The current task's member at `offset` (a `T`-sized member from BTF); `None` if it cannot be
/// read.
#[inline(always)]
pub fn member<T>(offset: u32) -> Option<T> {
    if CURRENT_TASK.load().btf_typed != 0 {
        // SAFETY: bpf_get_current_task_btf has no preconditions; it returns the BTF-typed
        // current task, never null in task context (checked anyway).
        let task = unsafe { generated::bpf_get_current_task_btf() } as u64;
        if task == 0 {
            return None;
        }
        Some(load(task, offset))
    } else {
        // SAFETY: bpf_get_current_task has no preconditions; the address is only read through
        // bpf_probe_read_kernel.
        let task = unsafe { generated::bpf_get_current_task() };
        if task == 0 {
            return None;
        }
        read(task + offset as u64)
    }
}

/// The current task, fetched once per program run: members are then loads (typed kernels) or
/// helper reads (5.10) without asking for the task again, one helper call per member saved.
#[derive(Clone, Copy)]
pub struct Current {
    task: u64,
    typed: bool,
}

impl Current {
    /// The current task; `None` if the helper returned no task.
    #[inline(always)]
    pub fn get() -> Option<Current> {
        let typed = typed();
        let task = if typed {
            // SAFETY: as in `member`.
            unsafe { generated::bpf_get_current_task_btf() as u64 }
        } else {
            // SAFETY: as in `member`.
            unsafe { generated::bpf_get_current_task() }
        };
        (task != 0).then_some(Current { task, typed })
    }

    /// The member at `offset`, as [`member`] reads it.
    #[inline(always)]
    pub fn member<T>(&self, offset: u32) -> Option<T> {
        if self.typed {
            Some(load(self.task, offset))
        } else {
            read(self.task + offset as u64)
        }
    }

    /// The BTF-typed task pointer for helpers that take one (task storage), 0 where the kernel
    /// has no typed current task (those helpers then take the current task themselves).
    #[inline(always)]
    pub fn typed_ptr(&self) -> u64 {
        if self.typed { self.task } else { 0 }
    }
}

/// Whether the current task is a kernel thread (it has no `mm`), `task_mm` being the offset of
/// `task_struct.mm` that the daemon resolves once (`KernelInfo::task_mm`) and every family that
/// asks copies into its layout; `None` if the task cannot be read.
#[inline(always)]
pub fn is_kernel_thread(task_mm: u32) -> Option<bool> {
    member::<u64>(task_mm).map(|mm| mm == 0)
}

/// The current thread's name, NUL-padded (`bpf_get_current_comm`). Unlike aya's wrapper it does
/// not zero a buffer first: on BPF a zero-fill of a byte array becomes a call of a byte-loop
/// `memset` (about 80 instructions for 16 bytes), and the helper writes every byte anyway.
#[inline(always)]
pub fn comm() -> [u8; 16] {
    let mut comm = MaybeUninit::<[u8; 16]>::uninit();
    // SAFETY: the helper writes all 16 bytes of the buffer (the name, NUL-padded, or zeroes
    // when it fails), so it is initialised afterwards either way.
    unsafe {
        generated::bpf_get_current_comm(comm.as_mut_ptr().cast(), 16);
        comm.assume_init()
    }
}

/// Whether members of the current task, and the typed pointers loaded from it, may be read
/// with plain loads (`btf_load`); otherwise every read goes through `btf_load::read`.
#[inline(always)]
pub fn typed() -> bool {
    CURRENT_TASK.load().btf_typed != 0
}

/// Whether per-thread state lives in task storage on this kernel (see `task_storage`).
#[inline(always)]
pub fn task_storage() -> bool {
    CURRENT_TASK.load().task_storage != 0
}
