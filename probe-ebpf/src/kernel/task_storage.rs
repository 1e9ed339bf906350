//! Per-thread state in BPF task storage (`BPF_MAP_TYPE_TASK_STORAGE`): one value per thread,
//! hung off its `task_struct`, so that a lookup is a few loads and there is no insert or delete
//! per event (a hash update costs 100–150 ns; a task storage get a few ns).
//!
//! aya-ebpf has no task storage map, so [`task_storage!`] declares one the way libbpf does: a
//! BTF-described definition in the `.maps` section, whose `type` and `map_flags` members are
//! pointers to arrays of the wanted size. Tracing programs may use task storage since 5.13; where
//! the daemon finds it unavailable ([`available`] is 0) it rewrites these definitions into unused
//! one-entry hashes before loading, and the programs take their thread-id-keyed hash paths
//! instead (the branch not taken is never verified: the switch is a frozen global).

use aya_ebpf::{cty::c_void, helpers::generated};

/// `BPF_MAP_TYPE_TASK_STORAGE` (include/uapi/linux/bpf.h).
pub const MAP_TYPE_TASK_STORAGE: usize = 29;
/// `BPF_F_NO_PREALLOC`: required for local storage maps.
pub const NO_PREALLOC: usize = 1;
/// `BPF_LOCAL_STORAGE_GET_F_CREATE`.
const GET_F_CREATE: u64 = 1;

/// Declares a task storage map `$name` of `$value`s, with a definition struct `$def` of its own
/// (a concrete, non-generic name in BTF).
macro_rules! task_storage {
    ($(#[$meta:meta])* $vis:vis static $name:ident: $def:ident<$value:ty>;) => {
        /// The BTF map definition libbpf and aya read: only the members' types carry meaning.
        #[repr(C)]
        $vis struct $def {
            r#type: *const [i32; $crate::kernel::task_storage::MAP_TYPE_TASK_STORAGE],
            map_flags: *const [i32; $crate::kernel::task_storage::NO_PREALLOC],
            key: *const i32,
            value: *const $value,
        }

        // SAFETY: the definition is never read or written at run time; the loader replaces
        // every reference to it with the map.
        unsafe impl Sync for $def {}

        $(#[$meta])*
        #[unsafe(link_section = ".maps")]
        #[unsafe(export_name = stringify!($name))]
        $vis static $name: $def = $def {
            r#type: core::ptr::null(),
            map_flags: core::ptr::null(),
            key: core::ptr::null(),
            value: core::ptr::null(),
        };
    };
}
pub(crate) use task_storage;

/// Whether this kernel's programs use task storage (a frozen global the daemon sets).
#[inline(always)]
pub fn available() -> bool {
    super::current_task::task_storage()
}

/// The current thread id where per-thread state is keyed by it (the hashes of 5.10), else 0:
/// task storage needs none, and the helper call is saved.
#[inline(always)]
pub fn hash_tid() -> u32 {
    if available() {
        0
    } else {
        aya_ebpf::helpers::bpf_get_current_pid_tgid() as u32
    }
}

/// True when the BTF-typed `task` has no BPF storage at all: its `task_struct.bpf_storage`
/// (at `bpf_storage_offset`; 0: unknown, never true) is null. One load instead of a get that
/// would find nothing.
#[inline(always)]
pub fn none_on(task: u64, bpf_storage_offset: u32) -> bool {
    bpf_storage_offset != 0 && super::btf_load::load::<u64>(task, bpf_storage_offset) == 0
}

/// The value of `map` for the BTF-typed task `task` (the current task if 0), created zeroed with
/// `create`; `None` when the task has none (or it could not be created). Only call this where
/// [`available`] is true.
#[inline(always)]
pub fn get<D, V>(map: &'static D, task: u64, create: bool) -> Option<*mut V> {
    let task = if task == 0 {
        // SAFETY: bpf_get_current_task_btf has no preconditions (5.11+, implied by task
        // storage being available).
        unsafe { generated::bpf_get_current_task_btf() }
    } else {
        task as *mut _
    };
    // SAFETY: `map` is a task storage map definition (the loader turns the reference into the
    // map), `task` a BTF-typed task pointer as the helper requires; a null value pointer asks
    // for a zeroed value on create.
    let v = unsafe {
        generated::bpf_task_storage_get(
            map as *const D as *mut c_void,
            task,
            core::ptr::null_mut(),
            if create { GET_F_CREATE } else { 0 },
        )
    };
    (!v.is_null()).then_some(v.cast())
}
