//! How the probes read `task_struct` on this kernel (`probe_common::kernel`), decided from BTF
//! rather than the kernel version, so that backports are followed.

use probe_common::{kernel::CurrentTask, writeback_wait::PrevStateSource};

use super::{LayoutError, btf::Btf, layout::member_offset};

/// The `enum bpf_func_id` entry of the helper that types the current task (5.11+). A kernel
/// knows a helper exactly when its BTF has the enumerator.
const TASK_BTF_HELPER: &str = "BPF_FUNC_get_current_task_btf";

/// The task storage helper (5.11, for BPF LSM programs only).
const TASK_STORAGE_HELPER: &str = "BPF_FUNC_task_storage_get";
/// A helper of the release (5.13) in which tracing programs may use task storage too: the
/// kernel has no BTF mark of that permission itself.
const TRACING_TASK_STORAGE_MARK: &str = "BPF_FUNC_for_each_map_elem";

/// Whether the current task can be BTF-typed (`bpf_get_current_task_btf`), else it is read
/// with `bpf_probe_read_kernel`; and whether per-thread state can live in task storage.
pub fn current_task(btf: &Btf) -> CurrentTask {
    let has = |helper| btf.enum_value("bpf_func_id", helper).is_ok();
    let btf_typed = has(TASK_BTF_HELPER);
    CurrentTask {
        btf_typed: u32::from(btf_typed),
        task_storage: u32::from(
            btf_typed && has(TASK_STORAGE_HELPER) && has(TRACING_TASK_STORAGE_MARK),
        ),
    }
}

/// The offset of `task_struct.mm`: kernel threads (the flusher's kworkers) have none. Resolved
/// once, by [`super::KernelInfo::discover`]; families get it from `KernelInfo::task_mm`.
pub fn task_mm(btf: &Btf) -> Result<u32, LayoutError> {
    member_offset(btf, "task_struct", "mm", 8)
}

/// Lines for `wbscope check`.
pub fn describe_current_task(task: CurrentTask) -> String {
    let current = if task.btf_typed != 0 {
        "current task: bpf_get_current_task_btf (typed loads)"
    } else {
        "current task: bpf_get_current_task + bpf_probe_read_kernel (this kernel has no \
         bpf_get_current_task_btf, 5.11+)"
    };
    let state = if task.task_storage != 0 {
        "per-thread state (sync calls in flight, writeback waits): BPF task storage"
    } else {
        "per-thread state (sync calls in flight, writeback waits): hashes by thread id (no task \
         storage for tracing programs before 5.13)"
    };
    format!("{current}\n{state}")
}

/// Where `tp_btf/sched_switch` finds the previous task's state: its `prev_state` argument
/// (5.18+), else `task_struct.__state` (5.14+) or `task_struct.state`. The prototype must be
/// `(preempt, prev, next[, prev_state])` with the tasks at #1 and #2.
pub fn prev_state_source(btf: &Btf) -> Result<PrevStateSource, LayoutError> {
    const EVENT: &str = "sched_switch";
    let count = btf.tp_btf_arg_count(EVENT)?;
    let prev = btf.tp_btf_arg_index(EVENT, "task_struct")?;
    if prev != 1 || !(3..=4).contains(&count) {
        return Err(LayoutError::prototype(
            EVENT,
            format!(
                " has {count} arguments with the first task at #{prev}; expected \
                 (preempt, prev, next[, prev_state])"
            ),
        ));
    }
    if count == 4 {
        return Ok(PrevStateSource {
            from_arg: 1,
            task_state: 0,
            task_state_size: 0,
            resolved: 1,
        });
    }
    let (task_state, task_state_size) = member_offset(btf, "task_struct", "__state", 4)
        .map(|off| (off, 4))
        .or_else(|_| member_offset(btf, "task_struct", "state", 8).map(|off| (off, 8)))
        .map_err(|e| {
            LayoutError::Unhandled(format!("sched_switch has no prev_state argument and {e}"))
        })?;
    Ok(PrevStateSource {
        from_arg: 0,
        task_state,
        task_state_size,
        resolved: 1,
    })
}

/// One line for `wbscope check`.
pub fn describe_prev_state(source: &PrevStateSource) -> String {
    match (source.from_arg, source.task_state_size) {
        (1, _) => "sched_switch: previous task's state from its prev_state argument".to_owned(),
        (_, 4) => "sched_switch: previous task's state from task_struct.__state (no prev_state \
                   argument before 5.18)"
            .to_owned(),
        _ => "sched_switch: previous task's state from task_struct.state (no prev_state \
              argument before 5.18)"
            .to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// On a machine with BTF both decisions resolve; a 5.11+ kernel types the current task.
    #[test]
    fn resolves_on_the_running_kernel() {
        let Ok(btf) = Btf::from_file(std::path::Path::new(super::super::VMLINUX_BTF)) else {
            eprintln!("skipped: no kernel BTF");
            return;
        };
        let source = prev_state_source(&btf).expect("prev state source");
        assert_eq!(source.resolved, 1);
        // The kernels this is developed on are 5.18+: the argument is there.
        let release = super::super::release();
        let major_minor: Vec<u32> = release
            .split(|c: char| !c.is_ascii_digit())
            .take(2)
            .filter_map(|n| n.parse().ok())
            .collect();
        if major_minor >= vec![5, 18] {
            assert_eq!(source.from_arg, 1, "{release}");
        }
        if major_minor >= vec![5, 11] {
            assert_eq!(current_task(&btf).btf_typed, 1, "{release}");
        }
        assert_eq!(
            current_task(&btf).task_storage,
            u32::from(major_minor >= vec![5, 13]),
            "{release}"
        );
    }
}
