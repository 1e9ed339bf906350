//! The per-cgroup collector: reads `CGROUP_TOTALS`, names at most `max_named` cgroups (the
//! rest are `cgroup="other"`) and removes the keys of cgroups that no longer exist.

use std::{
    collections::{BTreeMap, HashSet},
    sync::Mutex,
};

use aya::maps::{MapData, PerCpuHashMap};
use probe_common::{
    cgroups::{CgroupKey, CgroupOp, CgroupTotals, names::CGROUP_TOTALS},
    sync_calls::SyncSyscall,
};
use prometheus::{
    core::{Collector, Desc},
    proto::MetricFamily,
};

use super::{
    config::CgroupsConfig,
    naming::{Class, Fresh, Naming, OTHER},
    paths::CgroupPaths,
};
use crate::metrics::{MapErrors, describe, proto::MetricBuilder, read_per_cpu_hash};

pub type TotalsMap = PerCpuHashMap<MapData, CgroupKey, CgroupTotals>;

pub const FAMILIES: &[(&str, &str); 6] = &[
    (
        "wbscope_cgroup_sync_calls_total",
        "Sync calls (and io_uring sync requests) completed, by the caller's cgroup v2 path and \
         call. Only with [cgroups] enabled; at most [cgroups] max_named cgroups by name, the \
         rest as cgroup=\"other\".",
    ),
    (
        "wbscope_cgroup_sync_call_seconds_total",
        "Time spent in sync calls (and io_uring sync requests), by the caller's cgroup v2 path \
         and call.",
    ),
    (
        "wbscope_cgroup_dirty_throttle_pauses_total",
        "Pauses of writers throttled in balance_dirty_pages, by the writer's cgroup v2 path.",
    ),
    (
        "wbscope_cgroup_dirty_throttle_pause_seconds_total",
        "Time writers were paused in balance_dirty_pages, by the writer's cgroup v2 path.",
    ),
    (
        "wbscope_cgroup_writeback_waits_total",
        "Sleeps on pages under writeback, by the waiter's cgroup v2 path.",
    ),
    (
        "wbscope_cgroup_writeback_wait_seconds_total",
        "Time tasks slept on pages under writeback, by the waiter's cgroup v2 path.",
    ),
];

/// What one series is about: (kind, call) of [`CgroupKey`].
type Op = (u32, u32);

/// The collector.
pub struct CgroupCollector {
    /// `None` while the family is off (or the host cannot attribute): nothing is exported.
    state: Option<Mutex<State>>,
    descs: Vec<Desc>,
}

struct State {
    map: Option<TotalsMap>,
    config: CgroupsConfig,
    paths: CgroupPaths,
    naming: Naming,
    /// Totals of removed cgroups that were in `other`, which keep counting there.
    retired: BTreeMap<Op, CgroupTotals>,
    /// Ids not found in the last walk: removed at their second miss (a cgroup created just
    /// after a walk is found by the next one).
    missing: HashSet<u64>,
    errors: MapErrors,
}

impl CgroupCollector {
    /// A collector over `map` (`None` when the family is off: it only describes its metrics).
    pub fn new(
        map: Option<Option<TotalsMap>>,
        config: CgroupsConfig,
        paths: CgroupPaths,
        errors: MapErrors,
    ) -> CgroupCollector {
        CgroupCollector {
            state: map.map(|map| {
                errors.register(CGROUP_TOTALS);
                Mutex::new(State {
                    map,
                    config,
                    paths,
                    naming: Naming::default(),
                    retired: BTreeMap::new(),
                    missing: HashSet::new(),
                    errors,
                })
            }),
            descs: describe(FAMILIES),
        }
    }
}

fn add(acc: &mut CgroupTotals, v: &CgroupTotals) {
    acc.count = acc.count.wrapping_add(v.count);
    acc.total_ns = acc.total_ns.wrapping_add(v.total_ns);
}

impl State {
    /// The series: (cgroup label, op) → totals.
    fn series(&mut self) -> Option<BTreeMap<(String, Op), CgroupTotals>> {
        let entries = read_per_cpu_hash(
            CGROUP_TOTALS,
            self.map.as_ref(),
            &self.errors,
            add,
            CgroupTotals::ZERO,
        )?;
        // One walk per scrape: finds new cgroups and notices removed ones.
        self.paths.refresh();
        let mut activity: BTreeMap<u64, u64> = BTreeMap::new();
        for (key, totals) in &entries {
            *activity.entry(key.cgroup_id).or_default() += totals.count;
        }
        let mut fresh = Vec::new();
        let mut gone = Vec::new();
        for (&id, &count) in &activity {
            match self.paths.path(id) {
                Some(path) => {
                    self.missing.remove(&id);
                    if self.naming.class(id).is_none() {
                        fresh.push(Fresh {
                            id,
                            path,
                            activity: count,
                        });
                    }
                }
                None if self.missing.insert(id) => {}
                None => gone.push(id),
            }
        }
        self.naming.admit(&self.config, fresh);
        let mut out: BTreeMap<(String, Op), CgroupTotals> = self
            .retired
            .iter()
            .map(|(op, t)| ((OTHER.to_owned(), *op), *t))
            .collect();
        for (key, totals) in entries {
            let op = (key.kind, key.call);
            if gone.contains(&key.cgroup_id) {
                // A named cgroup's series end with it; `other` must keep what it counted.
                if !matches!(self.naming.class(key.cgroup_id), Some(Class::Named(_))) {
                    add(self.retired.entry(op).or_default(), &totals);
                    add(out.entry((OTHER.to_owned(), op)).or_default(), &totals);
                }
                if let Some(map) = self.map.as_mut() {
                    let _ = map.remove(&key);
                }
                continue;
            }
            let label = match self.naming.class(key.cgroup_id) {
                Some(Class::Named(path)) => path.clone(),
                Some(Class::Other) => OTHER.to_owned(),
                // Missed by the last walk: counted from the next scrape on.
                None => continue,
            };
            add(out.entry((label, op)).or_default(), &totals);
        }
        for id in gone {
            self.naming.forget(id);
            self.missing.remove(&id);
        }
        Some(out)
    }
}

impl Collector for CgroupCollector {
    fn desc(&self) -> Vec<&Desc> {
        self.descs.iter().collect()
    }

    fn collect(&self) -> Vec<MetricFamily> {
        let Some(state) = &self.state else {
            return Vec::new();
        };
        let Some(series) = state.lock().ok().and_then(|mut s| s.series()) else {
            return Vec::new();
        };
        let mut families: Vec<MetricBuilder> = FAMILIES
            .iter()
            .map(|(name, _)| MetricBuilder::counter(name, FAMILIES))
            .collect();
        for ((cgroup, (kind, call)), totals) in &series {
            let seconds = totals.total_ns as f64 / 1e9;
            let count = totals.count as f64;
            let (first, labels): (usize, Vec<(&str, &str)>) = match CgroupOp::from_raw(*kind) {
                Some(CgroupOp::SyncCall) => match SyncSyscall::from_raw(*call) {
                    Some(s) => (0, vec![("cgroup", cgroup), ("syscall", s.label())]),
                    None => continue,
                },
                Some(CgroupOp::DirtyThrottle) => (2, vec![("cgroup", cgroup)]),
                Some(CgroupOp::WritebackWait) => (4, vec![("cgroup", cgroup)]),
                None => continue,
            };
            families[first].add_counter(&labels, count);
            families[first + 1].add_counter(&labels, seconds);
        }
        families
            .into_iter()
            .filter_map(MetricBuilder::finish)
            .collect()
    }
}
