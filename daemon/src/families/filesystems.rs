//! `wbscope_filesystem_info{device,mountpoint,fstype}`: the join table from devices to mount
//! points, read from the host's mountinfo (PID 1's, see kernel/mounts.rs) at scrape time. No probes.

use std::collections::BTreeSet;

use aya::{Ebpf, EbpfLoader};
use prometheus::{
    core::{Collector, Desc},
    proto::MetricFamily,
};

use super::{CollectorContext, Family, KernelInfo};
use crate::{
    kernel::{devices, mounts},
    metrics::{describe, proto::MetricBuilder},
    probes::ProbeSpec,
};

/// Filesystems without a block device that still do writeback worth watching.
const DEVICELESS_WRITEBACK_FS: &[&str] = &[
    "btrfs", "nfs", "nfs4", "cifs", "smb3", "ceph", "overlay", "zfs",
];

/// The filesystem-info family.
#[derive(Default)]
pub struct Filesystems;

impl Family for Filesystems {
    fn name(&self) -> &'static str {
        "filesystems"
    }

    fn probes(&self) -> &'static [ProbeSpec] {
        &[]
    }

    fn resolve(&mut self, _kernel: &KernelInfo) {}

    fn gap(&self, _probe: &ProbeSpec) -> Option<String> {
        None
    }

    fn set_globals<'a>(&'a self, _loader: &mut EbpfLoader<'a>) {}

    fn collectors(&self, _ebpf: &mut Ebpf, ctx: &CollectorContext) -> Vec<Box<dyn Collector>> {
        ctx.scrape_errors.register(SCRAPE_FAMILY);
        vec![Box::new(InfoCollector {
            descs: describe(FAMILIES),
            errors: ctx.scrape_errors.clone(),
        })]
    }
}

const FAMILIES: &[(&str, &str)] = &[(
    "wbscope_filesystem_info",
    "Mounted filesystems: which device backs which mount point (value 1). Join on `device`.",
)];

/// The family name in `wbscope_scrape_errors_total`.
const SCRAPE_FAMILY: &str = "filesystems";

struct InfoCollector {
    descs: Vec<Desc>,
    errors: crate::metrics::ScrapeErrors,
}

/// The (device, mountpoint, fstype) label sets worth exporting, without duplicates.
fn label_sets(
    table: &[mounts::Mount],
    is_block: impl Fn(u32, u32) -> bool,
) -> BTreeSet<(String, String, String)> {
    table
        .iter()
        .filter(|m| {
            is_block(m.major, m.minor)
                || DEVICELESS_WRITEBACK_FS.contains(&m.fstype.as_str())
                || m.fstype.starts_with("fuse")
        })
        .map(|m| {
            (
                devices::block_name(m.major, m.minor),
                m.mountpoint.clone(),
                m.fstype.clone(),
            )
        })
        .collect()
}

impl Collector for InfoCollector {
    fn desc(&self) -> Vec<&Desc> {
        self.descs.iter().collect()
    }

    fn collect(&self) -> Vec<MetricFamily> {
        let is_block = |major: u32, minor: u32| devices::is_block_device(major, minor);
        let table = match mounts::read() {
            Ok(table) => table,
            Err(err) => {
                self.errors.count(SCRAPE_FAMILY, mounts::SOURCE, &err);
                return Vec::new();
            }
        };
        let mut family = MetricBuilder::gauge(FAMILIES[0].0, FAMILIES);
        for (device, mountpoint, fstype) in label_sets(&table, is_block) {
            family.add_gauge(
                &[
                    ("device", device.as_str()),
                    ("mountpoint", mountpoint.as_str()),
                    ("fstype", fstype.as_str()),
                ],
                1.0,
            );
        }
        family.finish().into_iter().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_block_and_writeback_filesystems_once() {
        let table = mounts::parse(
            "1 0 254:0 / / rw - ext4 /dev/vda rw\n\
             2 1 0:5 / /proc rw - proc proc rw\n\
             3 1 0:44 / /data rw - btrfs /dev/sdb rw\n\
             4 1 254:0 / / rw - ext4 /dev/vda rw\n",
        );
        let sets = label_sets(&table, |major, _| major == 254);
        assert_eq!(sets.len(), 2);
        assert!(
            sets.iter()
                .any(|(_, mp, fs)| mp == "/data" && fs == "btrfs")
        );
        assert!(!sets.iter().any(|(_, _, fs)| fs == "proc"));
    }
}
