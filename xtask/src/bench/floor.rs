//! wbscope above the floor: for each program, its cost per event beside an empty program's on
//! the same hook in the same run (`wbscope bench-floor`), and the same per operation. The floor is
//! what the host charges for running any program on that hook (dispatch, the run-time statistics,
//! the trace record of a classic tracepoint); only the part above it is wbscope's own work.

use super::cost::Cost;
use super::daemon::Probe;
use super::report::Section;
use super::stats::fmt_ns;
use super::workloads::Workload;

/// The floor tool's name for a hook as `wbscope check` prints it: bpftool names a tp_btf
/// program's attachment by its event (`alternatives.rs` adds ` (tp_btf)`), a classic
/// tracepoint's by its event alone.
pub fn floor_key(hook: &str) -> Option<String> {
    let (kind, rest) = hook.split_once(' ')?;
    // `tp_btf a (or b)`: the first name.
    let target = rest.split_whitespace().next()?;
    match kind {
        "tp_btf" => Some(format!("{target} (tp_btf)")),
        "tracepoint" => Some(target.rsplit('/').next()?.to_owned()),
        _ => None,
    }
}

fn cost<'a>(costs: &'a [Cost], tool: &str, workload: Workload) -> Option<&'a Cost> {
    costs
        .iter()
        .find(|c| c.tool == tool && c.workload == workload)
}

/// Mean ns per event of `program` in `cost`, if it ran.
fn ns_per_event(cost: &Cost, program: &str) -> Option<f64> {
    let p = cost.programs.iter().find(|p| p.program == program)?;
    (p.delta.runs > 0).then(|| p.delta.run_ns as f64 / p.delta.runs as f64)
}

/// The floor's mean ns per event on the hook of wbscope's `program` (fio workload).
pub fn floor_ns_for(costs: &[Cost], probes: &[Probe], program: &str) -> Option<f64> {
    let probe = probes.iter().find(|p| p.name == program)?;
    ns_per_event(
        cost(costs, "floor", Workload::Fio)?,
        &floor_key(&probe.hook)?,
    )
}

/// The floor's BPF time per operation of `workload`.
pub fn floor_per_op(costs: &[Cost], workload: Workload) -> Option<f64> {
    cost(costs, "floor", workload).map(Cost::per_op_ns)
}

/// The event a tool's program key names: `block_rq_issue (tp_btf)` → `block_rq_issue`.
fn event_of(key: &str) -> &str {
    key.split([' ', '#']).next().unwrap_or(key)
}

/// wbscope's BPF time per operation of `workload` counting only its programs on the events `tool`'s
/// programs also hook (classic or BTF flavour alike): the like-for-like comparison, since
/// wbscope hooks many events the alternatives do not.
pub fn same_hooks_per_op(
    costs: &[Cost],
    probes: &[Probe],
    tool: &str,
    workload: Workload,
) -> Option<f64> {
    let theirs = cost(costs, tool, workload)?;
    let ours = cost(costs, "wbscope", workload)?;
    let events: Vec<&str> = theirs
        .programs
        .iter()
        .map(|p| event_of(&p.program))
        .collect();
    let ns: u64 = ours
        .programs
        .iter()
        .filter(|p| {
            probes
                .iter()
                .find(|probe| probe.name == p.program)
                .and_then(|probe| floor_key(&probe.hook))
                .is_some_and(|key| events.contains(&event_of(&key)))
        })
        .map(|p| p.delta.run_ns)
        .sum();
    Some(ns as f64 / ours.ops.max(1.0))
}

fn cell(v: Option<f64>) -> String {
    v.map_or_else(|| "-".to_owned(), |ns| format!("{ns:.0}"))
}

/// Per workload: wbscope's and the floor's BPF time per operation; then per program (fio).
pub fn section(costs: &[Cost], probes: &[Probe]) -> Section {
    let mut s = Section::new(
        "floor",
        "wbscope above the floor (empty programs on the same hooks)",
        &[
            "program / workload",
            "hook",
            "wbscope",
            "floor",
            "wbscope − floor",
        ],
    );
    for w in Workload::ALL {
        let ours = cost(costs, "wbscope", w).map(Cost::per_op_ns);
        let floor = floor_per_op(costs, w);
        s.row(
            format!("per-op/{}", w.key()),
            vec![
                format!("BPF time per op, {} ({})", w.key(), w.op_unit()),
                "every hook".into(),
                ours.map_or_else(|| "-".into(), fmt_ns),
                floor.map_or_else(|| "-".into(), fmt_ns),
                match (ours, floor) {
                    (Some(o), Some(f)) => fmt_ns(o - f),
                    _ => "-".into(),
                },
            ],
        );
    }
    let fio = cost(costs, "wbscope", Workload::Fio);
    for p in probes.iter().filter(|p| p.attached) {
        let ours = fio.and_then(|c| ns_per_event(c, &p.name));
        let floor = floor_ns_for(costs, probes, &p.name);
        s.row(
            p.name.clone(),
            vec![
                p.name.clone(),
                p.hook.clone(),
                cell(ours),
                cell(floor),
                match (ours, floor) {
                    (Some(o), Some(f)) => format!("{:.0}", o - f),
                    _ => "-".into(),
                },
            ],
        );
    }
    s.note(
        "Per-program figures are mean ns per event during the fio run; `-`: no event in that \
         run. The floor program on a hook runs as often as wbscope's, so per-event figures \
         compare like for like; per-operation figures also depend on what else ran on the host \
         in each window.",
    );
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn floor_keys_follow_bpftool_names() {
        assert_eq!(
            floor_key("tp_btf block_rq_issue").as_deref(),
            Some("block_rq_issue (tp_btf)")
        );
        assert_eq!(
            floor_key("tracepoint syscalls/sys_enter_fsync").as_deref(),
            Some("sys_enter_fsync")
        );
        assert_eq!(floor_key("kprobe x"), None);
        assert_eq!(event_of("block_rq_issue (tp_btf)"), "block_rq_issue");
        assert_eq!(event_of("floor_tracepoint#12"), "floor_tracepoint");
        assert_eq!(event_of("sys_exit_fsync"), "sys_exit_fsync");
    }
}
