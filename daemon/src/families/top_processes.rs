//! `GET /top/processes`: the kernel's per-process totals (time in sync calls, throttling
//! pauses) as JSON, for `wbscope top`.
//!
//! Served on the daemon's existing listener next to `/stalls`, which already carries pids and
//! command names: a second, loopback-only listener would add a port and a setting without
//! protecting anything `/stalls` does not already show. It is kept out of `/metrics` on purpose:
//! a pid label would give Prometheus one series per process.

use std::{collections::BTreeMap, sync::Arc};

use axum::{Json, Router, extract::State, http::StatusCode, response::IntoResponse, routing::get};
use aya::{
    Ebpf,
    maps::{MapData, PerCpuArray, PerCpuHashMap},
};
use probe_common::top_processes::{ProcStats, RecentProcess, maps};
use serde::{Deserialize, Serialize};

use crate::{families::dirty_throttle::bdi_name, metrics::MapErrors};

/// The route's path.
pub const PATH: &str = "/top/processes";

/// One process's totals since the probes first saw it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProcRow {
    pub tgid: u32,
    pub comm: String,
    pub sync_call_ns: u64,
    pub throttle_ns: u64,
    pub sync_calls: u64,
    /// The process's cgroup v2 path (`/proc/PID/cgroup`'s `0::` line) when the table was read;
    /// empty once the process has exited, or where it has none.
    #[serde(default)]
    pub cgroup: String,
}

impl ProcRow {
    /// The process's row from its per-CPU values: totals added up, the name from the CPU whose
    /// value saw the most sync calls and pauses (any CPU's name is one of its threads').
    fn from_cpus(tgid: u32, cpus: &[ProcStats]) -> ProcRow {
        let mut total = ProcStats {
            sync_call_ns: 0,
            throttle_ns: 0,
            sync_calls: 0,
            comm: [0; 16],
        };
        let mut busiest = 0;
        for s in cpus.iter() {
            total.sync_call_ns += s.sync_call_ns;
            total.throttle_ns += s.throttle_ns;
            total.sync_calls += s.sync_calls;
            let work = s.sync_call_ns + s.throttle_ns;
            if s.comm[0] != 0 && (total.comm[0] == 0 || work > busiest) {
                total.comm = s.comm;
                busiest = work;
            }
        }
        ProcRow::from_stats(tgid, &total)
    }

    fn from_stats(tgid: u32, s: &ProcStats) -> ProcRow {
        ProcRow {
            tgid,
            comm: bdi_name(&s.comm),
            sync_call_ns: s.sync_call_ns,
            throttle_ns: s.throttle_ns,
            sync_calls: s.sync_calls,
            cgroup: String::new(),
        }
    }
}

/// The cgroup v2 path in a `/proc/PID/cgroup` text: the `0::` line's (a hybrid host has it
/// too, for the unified hierarchy).
fn unified_cgroup(text: &str) -> Option<&str> {
    text.lines().find_map(|l| l.strip_prefix("0::"))
}

/// Process `tgid`'s cgroup v2 path now, or empty.
fn cgroup_of(tgid: u32) -> String {
    std::fs::read_to_string(format!("/proc/{tgid}/cgroup"))
        .ok()
        .and_then(|t| unified_cgroup(&t).map(str::to_owned))
        .unwrap_or_default()
}

/// The body of `GET /top/processes`.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct ProcessesBody {
    pub processes: Vec<ProcRow>,
}

/// The kernel table, taken out of the loaded object.
pub struct ProcessTable {
    map: Option<PerCpuHashMap<MapData, u32, ProcStats>>,
    /// Each CPU's most recent process, whose totals there are not in `map` yet.
    recent: Option<PerCpuArray<MapData, RecentProcess>>,
    errors: MapErrors,
}

impl ProcessTable {
    /// Takes the map out of `ebpf` (absent from an object built without it: an empty table).
    pub fn take(ebpf: &mut Ebpf, errors: MapErrors) -> ProcessTable {
        let map = take_map(ebpf, maps::TOP_PROCESSES, "wbscope top shows no processes");
        let recent = take_map(
            ebpf,
            maps::TOP_PROCESS_RECENT,
            "wbscope top misses each CPU's latest process",
        );
        errors.register(maps::TOP_PROCESSES);
        errors.register(maps::TOP_PROCESS_RECENT);
        ProcessTable {
            map,
            recent,
            errors,
        }
    }

    /// Every process in the table: its per-CPU values in the table plus the CPUs' recent
    /// elements that name it. An entry that fails to read (e.g. evicted while iterating) is
    /// counted in `wbscope_map_read_errors_total` and skipped.
    pub fn read(&self) -> Vec<ProcRow> {
        let mut by_tgid: BTreeMap<u32, Vec<ProcStats>> = BTreeMap::new();
        if let Some(map) = &self.map {
            for item in map.iter() {
                match item {
                    Ok((tgid, cpus)) => by_tgid.entry(tgid).or_default().extend(cpus.iter()),
                    Err(_) => self.errors.count(maps::TOP_PROCESSES),
                }
            }
        }
        if let Some(recent) = &self.recent {
            match recent.get(&0, 0) {
                Ok(cpus) => merge_recent(&mut by_tgid, cpus.iter()),
                Err(_) => self.errors.count(maps::TOP_PROCESS_RECENT),
            }
        }
        by_tgid
            .into_iter()
            .map(|(tgid, cpus)| {
                let mut row = ProcRow::from_cpus(tgid, &cpus);
                // Read when the table is: the kernel table keeps no cgroup, and a process
                // still in it usually still runs (the least recent go first).
                row.cgroup = cgroup_of(tgid);
                row
            })
            .collect()
    }

    /// The `/top/processes` route.
    pub fn router(self) -> Router {
        Router::new()
            .route(PATH, get(processes))
            .with_state(Arc::new(self))
    }
}

/// Map `name` of `ebpf` as a `T`, or `None` with a warning that says what is lost (`without`).
fn take_map<T: TryFrom<aya::maps::Map>>(ebpf: &mut Ebpf, name: &str, without: &str) -> Option<T> {
    let map = ebpf.take_map(name).and_then(|m| T::try_from(m).ok());
    if map.is_none() {
        tracing::warn!("map {name} missing: {without}");
    }
    map
}

/// Adds each CPU's recent process (`tgid` 0: none) to its values.
fn merge_recent<'a>(
    by_tgid: &mut BTreeMap<u32, Vec<ProcStats>>,
    cpus: impl Iterator<Item = &'a RecentProcess>,
) {
    for r in cpus.filter(|r| r.tgid != 0) {
        by_tgid.entry(r.tgid).or_default().push(r.stats);
    }
}

async fn processes(State(table): State<Arc<ProcessTable>>) -> impl IntoResponse {
    // Map iteration is a syscall per entry: off the async workers.
    match tokio::task::spawn_blocking(move || table.read()).await {
        Ok(processes) => Json(ProcessesBody { processes }).into_response(),
        Err(_) => StatusCode::INTERNAL_SERVER_ERROR.into_response(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn row_from_stats_cuts_comm_at_nul() {
        let mut stats = ProcStats {
            sync_call_ns: 7,
            throttle_ns: 3,
            sync_calls: 2,
            comm: [0; 16],
        };
        stats.comm[..5].copy_from_slice(b"fsync");
        let row = ProcRow::from_stats(42, &stats);
        assert_eq!(row.comm, "fsync");
        assert_eq!(
            (row.tgid, row.sync_call_ns, row.throttle_ns, row.sync_calls),
            (42, 7, 3, 2)
        );
        let json = serde_json::to_string(&ProcessesBody {
            processes: vec![row.clone()],
        })
        .unwrap();
        let back: ProcessesBody = serde_json::from_str(&json).unwrap();
        assert_eq!(back.processes, vec![row]);
    }

    #[test]
    fn recent_elements_add_to_their_process_and_empty_ones_are_skipped() {
        let stats = |ns: u64, calls: u64| ProcStats {
            sync_call_ns: ns,
            throttle_ns: 0,
            sync_calls: calls,
            comm: *b"db\0\0\0\0\0\0\0\0\0\0\0\0\0\0",
        };
        let mut by_tgid = BTreeMap::new();
        by_tgid.insert(7, vec![stats(100, 1), stats(0, 0)]);
        let recent = [
            RecentProcess {
                tgid: 7,
                _reserved: 0,
                stats: stats(50, 2),
            },
            RecentProcess {
                tgid: 9,
                _reserved: 0,
                stats: stats(5, 1),
            },
            RecentProcess::default(),
        ];
        merge_recent(&mut by_tgid, recent.iter());
        let rows: Vec<ProcRow> = by_tgid
            .iter()
            .map(|(tgid, cpus)| ProcRow::from_cpus(*tgid, cpus))
            .collect();
        assert_eq!(rows.len(), 2, "{rows:?}");
        assert_eq!(
            (rows[0].tgid, rows[0].sync_call_ns, rows[0].sync_calls),
            (7, 150, 3)
        );
        assert_eq!(
            (rows[1].tgid, rows[1].sync_call_ns, rows[1].comm.as_str()),
            (9, 5, "db")
        );
    }

    #[test]
    fn the_cgroup_is_the_unified_hierarchys() {
        let hybrid =
            "12:memory:/user.slice\n1:name=systemd:/user.slice/x.scope\n0::/user.slice/x.scope\n";
        assert_eq!(unified_cgroup(hybrid), Some("/user.slice/x.scope"));
        assert_eq!(unified_cgroup("0::/\n"), Some("/"));
        assert_eq!(unified_cgroup("3:cpu:/a\n"), None);
        // This test's own process has an entry on any cgroup v2 or hybrid host.
        let own = cgroup_of(std::process::id());
        if std::path::Path::new("/sys/fs/cgroup/cgroup.controllers").exists()
            || std::path::Path::new("/sys/fs/cgroup/unified").exists()
        {
            assert!(own.starts_with('/'), "{own:?}");
        }
    }

    #[test]
    fn cpus_are_added_up_and_named_by_the_busiest() {
        let cpu = |ns: u64, calls: u64, name: &[u8]| {
            let mut comm = [0u8; 16];
            comm[..name.len()].copy_from_slice(name);
            ProcStats {
                sync_call_ns: ns,
                throttle_ns: 1,
                sync_calls: calls,
                comm,
            }
        };
        let cpus = [cpu(5, 1, b"worker"), cpu(0, 0, b""), cpu(90, 3, b"main")];
        let row = ProcRow::from_cpus(7, &cpus);
        assert_eq!(
            (row.sync_call_ns, row.throttle_ns, row.sync_calls),
            (95, 3, 4)
        );
        assert_eq!(row.comm, "main");
    }
}
