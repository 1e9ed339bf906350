//! Plain loads through BTF-typed kernel pointers.
//!
//! A tp_btf argument, the task from `bpf_get_current_task_btf()`, and any struct pointer member
//! loaded from one of them are typed by the verifier from the kernel's BTF. Loading a member of
//! such a pointer at a load-time constant offset (the daemon's layout globals live in a frozen
//! read-only map, so the verifier knows their values) is checked against the struct's BTF and
//! made fault-safe by the kernel: no `bpf_probe_read_kernel` call, which on hot hooks is most
//! of what a field read costs. Variable offsets (array indexing) and untyped addresses still
//! need the helper: [`read`].

use aya_ebpf::helpers::bpf_probe_read_kernel;

/// `*(T *)(base + offset)`, where `base` is a BTF-typed pointer as above and `offset` the offset
/// of a member of `T`'s size.
#[inline(always)]
pub fn load<T>(base: u64, offset: u32) -> T {
    // SAFETY: the verifier refuses the program at load time unless `base` is a BTF-typed
    // pointer and `offset` a member of `T`'s size in the pointed-to struct; at run time a
    // faulting load reads 0 instead of crashing.
    unsafe { core::ptr::read_volatile((base + offset as u64) as *const T) }
}

/// Reads a `T` at a kernel address (a number: pointer arithmetic on typed tp_btf pointers is
/// rejected by the verifier); `None` for a null or unreadable address.
#[inline(always)]
pub fn read<T>(addr: u64) -> Option<T> {
    if addr == 0 {
        return None;
    }
    // SAFETY: bpf_probe_read_kernel copies from an arbitrary kernel address into a stack value
    // and returns an error instead of faulting on a bad address.
    unsafe { bpf_probe_read_kernel(addr as *const T) }.ok()
}
