//! BPF run-time statistics: switching them on for a measurement (`kernel.bpf_stats_enabled`,
//! restored afterwards) and reading each program's run time and run count with bpftool.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::process::Command;

use anyhow::{Context, Result, bail};
use serde::Deserialize;

const SYSCTL: &str = "/proc/sys/kernel/bpf_stats_enabled";

/// Run-time statistics of one program at one moment.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counters {
    /// Total time spent in the program (`run_time_ns`).
    pub run_ns: u64,
    /// How often it ran (`run_cnt`).
    pub runs: u64,
}

impl Counters {
    /// What happened between `earlier` and `self` (counters only grow while a program lives).
    pub fn since(self, earlier: Counters) -> Counters {
        Counters {
            run_ns: self.run_ns.saturating_sub(earlier.run_ns),
            runs: self.runs.saturating_sub(earlier.runs),
        }
    }
}

/// `kernel.bpf_stats_enabled=1` for as long as the guard lives; dropping it (also while
/// unwinding) restores the previous value. The stats cost two clock reads per program run, so
/// they are on only while a measurement runs.
pub struct StatsEnabled {
    previous: String,
}

impl StatsEnabled {
    /// Turns the stats on, remembering the previous setting.
    pub fn on() -> Result<StatsEnabled> {
        let previous = fs::read_to_string(SYSCTL)
            .with_context(|| format!("reading {SYSCTL}"))?
            .trim()
            .to_owned();
        fs::write(SYSCTL, "1").with_context(|| format!("writing 1 to {SYSCTL}"))?;
        Ok(StatsEnabled { previous })
    }
}

impl Drop for StatsEnabled {
    fn drop(&mut self) {
        if let Err(e) = fs::write(SYSCTL, &self.previous) {
            eprintln!(
                "[bench] could not restore kernel.bpf_stats_enabled={}: {e}",
                self.previous
            );
        }
    }
}

/// The fields of `bpftool prog show --json` we read. bpftool leaves `run_time_ns` and
/// `run_cnt` out while they are zero.
#[derive(Deserialize)]
struct ProgJson {
    id: u32,
    #[serde(default)]
    name: String,
    #[serde(default)]
    run_time_ns: u64,
    #[serde(default)]
    run_cnt: u64,
}

/// Name and counters of each program in `ids`, read with one `bpftool prog show --json`.
/// A program that is no longer loaded is left out.
pub fn snapshot(ids: &BTreeSet<u32>) -> Result<BTreeMap<u32, (String, Counters)>> {
    let out = Command::new("bpftool")
        .args(["prog", "show", "--json"])
        .output()
        .context("running bpftool (installed by cargo xtask setup)")?;
    if !out.status.success() {
        bail!(
            "bpftool prog show failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    parse(&out.stdout, ids)
}

fn parse(json: &[u8], ids: &BTreeSet<u32>) -> Result<BTreeMap<u32, (String, Counters)>> {
    let progs: Vec<ProgJson> =
        serde_json::from_slice(json).context("parsing bpftool prog show --json")?;
    Ok(progs
        .into_iter()
        .filter(|p| ids.contains(&p.id))
        .map(|p| {
            let counters = Counters {
                run_ns: p.run_time_ns,
                runs: p.run_cnt,
            };
            (p.id, (p.name, counters))
        })
        .collect())
}

/// One program attached through a perf event or raw tracepoint (`bpftool perf list`).
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
pub struct Attachment {
    pub pid: u32,
    pub prog_id: u32,
    /// `tracepoint`, `raw_tracepoint` (tp_btf), `kprobe`, …
    pub fd_type: String,
    /// The tracepoint's name, e.g. `block_rq_complete`; empty for other kinds.
    #[serde(default)]
    pub tracepoint: String,
}

/// Every attachment `bpftool perf list` reports right now.
pub fn attachments() -> Result<Vec<Attachment>> {
    let out = Command::new("bpftool")
        .args(["perf", "list", "--json"])
        .output()
        .context("running bpftool perf list")?;
    if !out.status.success() {
        bail!(
            "bpftool perf list failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    serde_json::from_slice(&out.stdout).context("parsing bpftool perf list --json")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_bpftool_json_with_absent_counters() {
        let json = br#"[{"id":7,"type":"tracepoint","name":"block_rq_issue","run_time_ns":1295,"run_cnt":1},
                        {"id":8,"type":"tracepoint","name":"sys_exit_fsync"},
                        {"id":9,"type":"kprobe","name":"other","run_time_ns":5,"run_cnt":5}]"#;
        let ids = BTreeSet::from([7, 8]);
        let got = parse(json, &ids).unwrap();
        assert_eq!(got.len(), 2);
        assert_eq!(
            got[&7],
            (
                "block_rq_issue".to_owned(),
                Counters {
                    run_ns: 1295,
                    runs: 1
                }
            )
        );
        assert_eq!(got[&8].1, Counters::default());
    }

    #[test]
    fn parses_perf_list() {
        let json = br#"[{"pid":7907,"fd":8,"prog_id":2464,"fd_type":"tracepoint","tracepoint":"sys_enter_getppid"},
                        {"pid":1,"fd":3,"prog_id":5,"fd_type":"kprobe","func":"x","offset":0}]"#;
        let got: Vec<Attachment> = serde_json::from_slice(json).unwrap();
        assert_eq!(got[0].tracepoint, "sys_enter_getppid");
        assert_eq!(got[1].fd_type, "kprobe");
        assert!(got[1].tracepoint.is_empty());
    }

    #[test]
    fn deltas_never_go_negative() {
        let a = Counters {
            run_ns: 10,
            runs: 2,
        };
        let b = Counters {
            run_ns: 25,
            runs: 5,
        };
        assert_eq!(
            b.since(a),
            Counters {
                run_ns: 15,
                runs: 3
            }
        );
        assert_eq!(a.since(b), Counters::default());
    }
}
