//! Metrics whose probes hook a kernel module's tracepoints: on a test kernel without that module
//! they cannot have series, so their queries are skipped like pending ones, with the reason.
//! Where the module is there, they are evaluated like every other query.

use std::path::Path;

use wbscope_dashboards::{grafana::DashboardInfo, names::Pending, promql::metric_names, uses};

/// (metric name prefix, tracefs event directory that must exist, reason when it does not).
const MODULE_METRICS: &[(&str, &str, &str)] = &[(
    "wbscope_nfs_",
    "/sys/kernel/tracing/events/nfs",
    "the nfs module is not loaded on this kernel (no NFS mount); the vm tier's NFS tests \
     check these metrics against the kernel's own NFS counters",
)];

/// Pending entries for every used metric of a module this kernel lacks.
pub fn missing(dashboards: &[(String, DashboardInfo)]) -> Vec<Pending> {
    let mut out: Vec<Pending> = Vec::new();
    for (prefix, events, reason) in MODULE_METRICS {
        if Path::new(events).exists() {
            continue;
        }
        for (_, expr) in uses(dashboards) {
            for name in metric_names(&expr) {
                if name.starts_with(prefix) && !out.iter().any(|p| p.name == name) {
                    out.push(Pending {
                        name,
                        reason: (*reason).to_owned(),
                    });
                }
            }
        }
    }
    out
}
