//! How the probes read `task_struct` on the running kernel: whether the current task can be
//! BTF-typed, and where `sched_switch` finds the previous task's state. Both are decided by the
//! daemon from kernel BTF and passed as load-time globals; the probes branch on them, and since
//! the globals are frozen the verifier visits only the branch the kernel supports (a helper or
//! argument the kernel lacks in the other branch would otherwise fail the whole program).

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

/// Where `tp_btf/sched_switch` finds the state the previous task was switched out in.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PrevStateSource {
    /// 1: the `prev_state` argument (#3, since 5.18). 0: the task's own state member, read from
    /// `prev` (`preempt`, argument #0, stands for state 0: the task stays runnable).
    pub from_arg: u32,
    /// Offset of `task_struct.__state` (5.14+) or `task_struct.state` (before).
    pub task_state: u32,
    /// Its size: 4 (`unsigned int __state`) or 8 (`long state`).
    pub task_state_size: u32,
    /// Non-zero once the daemon has filled in the fields above.
    pub resolved: u32,
}
const _: () = assert!(core::mem::size_of::<PrevStateSource>() == 16);

user_pod!(CurrentTask, PrevStateSource);

/// Names of this module's load-time globals in the eBPF object.
pub mod globals {
    pub const CURRENT_TASK: &str = "CURRENT_TASK";
    pub const PREV_STATE_SOURCE: &str = "PREV_STATE_SOURCE";
}

/// The per-thread task storage maps (`probe-ebpf/src/task_storage.rs`): BTF-defined maps of
/// `BPF_MAP_TYPE_TASK_STORAGE`, rewritten into unused one-entry hashes where the kernel refuses
/// that type for tracing programs (`daemon/src/probes/task_storage.rs`).
pub mod task_storage_maps {
    pub const SYNC_TASK: &str = "SYNC_TASK";
    pub const FOLIO_WAIT_TASK: &str = "FOLIO_WAIT_TASK";
    pub const FLUSHER_TASK: &str = "FLUSHER_TASK";
    pub const PASS_TASK: &str = "PASS_TASK";
    pub const FLUSHER_ITEM_TASK: &str = "FLUSHER_ITEM_TASK";
    /// All of them.
    pub const ALL: [&str; 5] = [
        SYNC_TASK,
        FOLIO_WAIT_TASK,
        FLUSHER_TASK,
        PASS_TASK,
        FLUSHER_ITEM_TASK,
    ];
}
