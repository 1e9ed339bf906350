//! The daemon's own health: which probes attached, what the probes cost, lost events, map read
//! errors, the daemon's CPU and memory, and the filesystems it maps devices to.

use crate::model::{Panel, Query, Viz};
use crate::scope::{RATE, Scope};

/// Probes attached out of probes known.
pub fn probes_attached(s: Scope) -> Panel {
    let h = s.host();
    Panel::series(
        "Probes attached",
        "none",
        "How many of the probes this build knows are attached on this host's kernel. Fewer \
         than known means a hook is missing on this kernel or was refused: the panels fed by \
         it are empty, not zero. 'wbscope check' prints the reason for each.",
        vec![
            Query::new(format!("sum(wbscope_probe_attached{{{h}}})"), "attached"),
            Query::new(format!("count(wbscope_probe_attached{{{h}}})"), "known"),
        ],
    )
    .as_viz(Viz::Stat)
    .wide(6)
}

/// Every probe and whether it is attached.
pub fn probe_table(s: Scope) -> Panel {
    Panel::series(
        "Probe status",
        "none",
        "Every probe the build knows with 1 (attached) or 0 (skipped on this kernel, disabled \
         in the configuration, or refused by the kernel). Sorted with the missing ones first.",
        vec![Query::new(
            format!("sort(wbscope_probe_attached{{{}}})", s.host()),
            "",
        )],
    )
    .as_viz(Viz::StatusTable {
        zero: "not attached",
        one: "attached",
    })
}

/// BPF CPU time per program.
pub fn bpf_cpu(s: Scope) -> Panel {
    Panel::series(
        "BPF CPU time by program",
        "percentunit",
        "Share of one CPU spent running each BPF program, from the kernel's BPF run-time \
         statistics. This is what observing costs; block and writeback submission programs \
         scale with the I/O rate. Over a few percent of a CPU, consider disabling a probe \
         family in the configuration. Empty unless `[metrics] bpf_stats = true` (off by \
         default: the kernel's switch is host-wide and costs every BPF program).",
        vec![Query::new(
            format!(
                "sum by ({}) (rate(wbscope_bpf_program_run_seconds_total{{{}}}[{RATE}]))",
                s.keep("program"),
                s.host()
            ),
            s.legend("{{program}}"),
        )],
    )
}

/// Mean run time per program invocation.
pub fn bpf_per_run(s: Scope) -> Panel {
    let h = s.host();
    Panel::series(
        "BPF time per run by program",
        "s",
        "Mean time of one run of each BPF program (programs that did not run are left out). A \
         hot-path program (block requests, writepages) that grows beyond a few microseconds \
         adds that much to every I/O. Empty unless `[metrics] bpf_stats = true`.",
        vec![Query::new(
            format!(
                "rate(wbscope_bpf_program_run_seconds_total{{{h}}}[{RATE}]) \
                 / (rate(wbscope_bpf_program_runs_total{{{h}}}[{RATE}]) > 0)"
            ),
            s.legend("{{program}}"),
        )],
    )
}

/// Ring-buffer records lost.
pub fn dropped(s: Scope) -> Panel {
    let h = s.host();
    Panel::series(
        "Dropped events",
        "ops",
        "Stall event records lost per second because the ring buffer was full, by stream. The \
         metrics stay exact (they are aggregated in the kernel); only the per-event detail of \
         'wbscope trace' is incomplete. Persistent drops mean the stall threshold is too low \
         for this host.",
        vec![Query::new(
            format!(
                "sum by ({}) (rate(wbscope_events_dropped_total{{{h}}}[{RATE}]))",
                s.keep("stream")
            ),
            s.legend("{{stream}}"),
        )],
    )
}

/// Failed map reads at scrape time.
pub fn map_errors(s: Scope) -> Panel {
    let h = s.host();
    Panel::series(
        "Map read errors",
        "ops",
        "Failed reads of a probe map while serving a scrape, per map. The series of that map \
         are missing or stale in those scrapes. Should stay at zero.",
        vec![Query::new(
            format!(
                "sum by ({}) (rate(wbscope_map_read_errors_total{{{h}}}[{RATE}]))",
                s.keep("map")
            ),
            s.legend("{{map}}"),
        )],
    )
}

/// The daemon's own CPU use.
pub fn daemon_cpu(s: Scope) -> Panel {
    Panel::series(
        "wbscope CPU",
        "percentunit",
        "CPU used by the wbscope process itself in user space (scrapes, map reads), as a share \
         of one CPU. The BPF programs' time is in 'BPF CPU time by program'.",
        vec![Query::new(
            format!("rate(process_cpu_seconds_total{{{}}}[{RATE}])", s.host()),
            s.legend("cpu"),
        )],
    )
}

/// The daemon's resident memory.
pub fn daemon_memory(s: Scope) -> Panel {
    Panel::series(
        "wbscope resident memory",
        "bytes",
        "Resident memory of the wbscope process. It should stay flat: maps are read at scrape \
         time and nothing accumulates per event.",
        vec![Query::new(
            format!("process_resident_memory_bytes{{{}}}", s.host()),
            s.legend("rss"),
        )],
    )
}

/// Build and kernel of each daemon.
pub fn build(s: Scope) -> Panel {
    Panel::series(
        "wbscope build and kernel",
        "none",
        "The wbscope version and the kernel release of each host, to tell apart hosts where a \
         probe behaves differently.",
        vec![Query::new(
            format!("wbscope_build_info{{{}}}", s.host()),
            "",
        )],
    )
    .as_viz(Viz::Table)
}

/// Filesystems on the selected devices.
pub fn filesystems(s: Scope) -> Panel {
    Panel::series(
        "Filesystems on the device",
        "none",
        "Mount points and filesystem types of the selected devices, to connect a device name \
         in the other panels to the files an application uses.",
        vec![Query::new(
            format!("wbscope_filesystem_info{{{}}}", s.device()),
            "",
        )],
    )
    .as_viz(Viz::Table)
}
