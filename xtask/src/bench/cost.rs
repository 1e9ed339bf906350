//! BPF time per operation: each program's run-time delta over one workload run, divided by the
//! workload's operations; measured for wbscope here and for the alternatives in
//! `alternatives.rs`, and tabulated side by side.

use std::collections::BTreeMap;
use std::time::Instant;

use anyhow::Result;

use super::bpfstats::{Counters, StatsEnabled};
use super::daemon::Daemon;
use super::report::Section;
use super::stats::{fmt_ns, fmt_ratio, ratio, sig3};
use super::workloads::{self, Workload};
use super::{Ctx, interrupt};

/// One program's share of a measurement.
#[derive(Debug, Clone)]
pub struct ProgramCost {
    pub program: String,
    pub delta: Counters,
}

/// What one tool's programs cost over one workload run.
#[derive(Debug, Clone)]
pub struct Cost {
    /// `wbscope`, `bpftrace`, `biolatency`.
    pub tool: &'static str,
    pub workload: Workload,
    /// The workload's operations (see `Workload::op_unit`).
    pub ops: f64,
    /// Length of the window between the two snapshots.
    pub window_secs: f64,
    pub programs: Vec<ProgramCost>,
}

impl Cost {
    /// BPF time of all the tool's programs in the window.
    pub fn total_ns(&self) -> u64 {
        self.programs.iter().map(|p| p.delta.run_ns).sum()
    }

    /// BPF time per operation.
    pub fn per_op_ns(&self) -> f64 {
        self.total_ns() as f64 / self.ops.max(1.0)
    }

    /// Program runs per operation.
    pub fn events_per_op(&self) -> f64 {
        let runs: u64 = self.programs.iter().map(|p| p.delta.runs).sum();
        runs as f64 / self.ops.max(1.0)
    }
}

/// Runs `workload` between two snapshots of a tool's program counters and returns the deltas.
/// The snapshots are keyed by program name; programs that appear only later count from zero.
pub fn measure(
    ctx: &Ctx,
    tool: &'static str,
    workload: Workload,
    mut snapshot: impl FnMut() -> Result<BTreeMap<String, Counters>>,
) -> Result<Cost> {
    interrupt::check()?;
    workloads::prepare(workload, &ctx.work_dir, ctx.plan.sizes)?;
    let log = ctx.log_path(&format!("cost-{tool}-{}.json", workload.key()));
    let before = snapshot()?;
    let start = Instant::now();
    let outcome = workloads::run(workload, &ctx.work_dir, ctx.plan.sizes, &log)?;
    let after = snapshot()?;
    let window_secs = start.elapsed().as_secs_f64();
    let programs = after
        .into_iter()
        .map(|(program, now)| {
            let then = before.get(&program).copied().unwrap_or_default();
            ProgramCost {
                program,
                delta: now.since(then),
            }
        })
        .collect();
    let cost = Cost {
        tool,
        workload,
        ops: outcome.ops,
        window_secs,
        programs,
    };
    println!(
        "[bench] {tool} on {}: {} ops, {} BPF time per {}",
        workload.key(),
        outcome.ops,
        fmt_ns(cost.per_op_ns()),
        workload.op_unit()
    );
    Ok(cost)
}

/// wbscope's cost with every probe attached, from the daemon's `wbscope_bpf_program_*` metrics.
pub fn measure_wbscope(ctx: &Ctx) -> Result<Vec<Cost>> {
    interrupt::check()?;
    let daemon = Daemon::start(&ctx.binary, &ctx.log_path("daemon-cost.log"))?;
    let costs = Workload::ALL
        .into_iter()
        .map(|w| {
            // The daemon leaves the stats off by default: on only while a workload runs.
            let _stats = StatsEnabled::on()?;
            measure(ctx, "wbscope", w, || daemon.program_stats())
        })
        .collect::<Result<Vec<_>>>()?;
    daemon.stop()?;
    Ok(costs)
}

/// The per-operation table: one row per tool and workload, with the ratio to wbscope's figure.
pub fn per_op_section(costs: &[Cost]) -> Section {
    let mut s = Section::new(
        "per-op",
        "BPF time per operation",
        &[
            "tool",
            "workload",
            "operations",
            "BPF time / op",
            "program runs / op",
            "BPF time total",
            "tool / wbscope",
        ],
    );
    for cost in costs {
        let wbscope = costs
            .iter()
            .find(|c| c.tool == "wbscope" && c.workload == cost.workload);
        let vs = wbscope.and_then(|w| ratio(cost.per_op_ns(), w.per_op_ns()));
        s.row(
            format!("{}/{}", cost.tool, cost.workload.key()),
            vec![
                cost.tool.to_owned(),
                format!("{} ({})", cost.workload.key(), cost.workload.op_unit()),
                format!("{:.0}", cost.ops),
                fmt_ns(cost.per_op_ns()),
                sig3(cost.events_per_op()),
                fmt_ns(cost.total_ns() as f64),
                fmt_ratio(vs),
            ],
        );
    }
    s.note(
        "BPF time is the kernel's run-time statistics (`run_time_ns`) of the tool's programs \
         over the workload run, divided by the workload's operations. It includes events from \
         anything else running on the host in that window (the probes are system-wide).",
    );
    s.note(
        "fio: 4 KiB random writes with fsync after each (psync, 1 job) on an ext4 loop device; \
         buffered: one file written in 1 MiB writes, then sync(2).",
    );
    s
}

/// The per-program table: events/s and mean ns per event for each workload.
pub fn programs_section(costs: &[Cost]) -> Section {
    let mut columns = vec!["tool".to_owned(), "program".to_owned()];
    for w in Workload::ALL {
        columns.push(format!("{}: events/s", w.key()));
        columns.push(format!("{}: ns/event", w.key()));
    }
    let mut s = Section::new("programs", "Cost per program", &[]);
    s.columns = columns;
    let mut seen: Vec<(&str, &str)> = Vec::new();
    for cost in costs {
        for p in &cost.programs {
            if !seen.contains(&(cost.tool, p.program.as_str())) {
                seen.push((cost.tool, p.program.as_str()));
            }
        }
    }
    for (tool, program) in seen {
        let mut cells = vec![tool.to_owned(), program.to_owned()];
        for w in Workload::ALL {
            let found = costs
                .iter()
                .filter(|c| c.tool == tool && c.workload == w)
                .find_map(|c| Some((c, c.programs.iter().find(|p| p.program == program)?)));
            match found {
                Some((c, p)) => {
                    cells.push(sig3(p.delta.runs as f64 / c.window_secs.max(1e-9)));
                    cells.push(match p.delta.runs {
                        0 => "-".to_owned(),
                        n => format!("{:.0}", p.delta.run_ns as f64 / n as f64),
                    });
                }
                None => cells.extend(["n/a".to_owned(), "n/a".to_owned()]),
            }
        }
        s.row(format!("{tool}/{program}"), cells);
    }
    s.note("`-`: the program did not run during that workload.");
    s
}
