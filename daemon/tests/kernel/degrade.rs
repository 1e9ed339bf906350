//! Degrade, never crash: with a family disabled, its probes report 0 and the rest still works.

use std::time::Duration;

use testkit::{FsKind, LoopFs, workload};
use wbscope::{Config, families};

use crate::harness::{TestDaemon, wbscope_lines};

#[test]
#[ignore = "needs root and BPF: run with cargo xtask test"]
fn each_family_can_be_disabled_without_affecting_the_others() {
    let loopfs = LoopFs::new(FsKind::Ext4, 64).expect("loop filesystem");
    let device = loopfs.loop_name().to_owned();
    // What attaches with nothing disabled: everything on the development kernel (`start`
    // requires it), less the probes another kernel skips when the VM tier allows that.
    let attachable: Vec<&str> = {
        let baseline = TestDaemon::start();
        baseline
            .reports()
            .iter()
            .filter(|r| r.status.is_attached())
            .map(|r| r.spec.program)
            .collect()
    };
    for disabled in families::all() {
        let name = disabled.name();
        let daemon = TestDaemon::start_with_unattached(Config {
            listen: "127.0.0.1:0".parse().expect("loopback address"),
            ignore_own_io: false,
            disabled_probes: vec![name.to_owned()],
            ..Config::default()
        });
        let s = daemon.scrape();
        for probe in disabled.probes() {
            assert_eq!(
                s.sum("wbscope_probe_attached", &[("probe", probe.program)]),
                0.0,
                "{name}: {} should be off",
                probe.program
            );
        }
        // Every other family's probes that attach on this kernel are attached.
        for other in families::all().iter().filter(|f| f.name() != name) {
            for probe in other.probes() {
                let expected = if attachable.contains(&probe.program) {
                    1.0
                } else {
                    0.0
                };
                assert_eq!(
                    s.sum("wbscope_probe_attached", &[("probe", probe.program)]),
                    expected,
                    "{name} disabled: {} should be on",
                    probe.program
                );
            }
        }
        // Signals of the other families still flow, and the disabled family exports nothing.
        workload::write_and_fsync(&loopfs.mountpoint().join("d"), 4096).expect("fsync");
        let fsync = [("syscall", "fsync"), ("device", device.as_str())];
        let fs_info = [("device", device.as_str())];
        let s = daemon.wait_for("the other families' metrics", Duration::from_secs(5), |s| {
            let fsyncs = s.sum("wbscope_sync_call_duration_seconds_count", &fsync);
            let info = s.sum("wbscope_filesystem_info", &fs_info);
            match name {
                "sync calls" => fsyncs == 0.0 && info == 1.0,
                "filesystems" => fsyncs >= 1.0 && s.samples("wbscope_filesystem_info").is_empty(),
                _ => fsyncs >= 1.0 && info == 1.0,
            }
        });
        eprintln!(
            "family '{name}' disabled: {} probes off, the others work ({} wbscope series)",
            disabled.probes().len(),
            wbscope_lines(&s).lines().count()
        );
    }
}
