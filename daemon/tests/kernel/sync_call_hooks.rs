//! The sync calls count the same events on fentry/fexit as on their `syscalls:` tracepoints:
//! one workload of every sync call, once with the daemon on its default hooks (fentry where the
//! kernel accepts it) and once with `probes.sync_call_hook = "tracepoint"`, must give exactly
//! the same counts, and exactly what the workload did.

use std::{os::fd::AsFd, time::Duration};

use testkit::{FsKind, LoopFs, Scrape, workload};
use wbscope::{
    Config,
    probes::{HookChoice, ProbeReport},
};

use crate::{
    harness::{TestDaemon, wbscope_lines},
    sync_all_calls::mmap_write_msync,
};

const MIB: u64 = 1 << 20;
const COUNT: &str = "wbscope_sync_call_duration_seconds_count";
const SFR_CALLS: &str = "wbscope_sync_file_range_calls_total";

/// The workload's calls on its device, by `syscall` label, and its sync_file_range calls by
/// `flags` label.
const CALLS: [(&str, f64); 6] = [
    ("fsync", 2.0),
    ("fdatasync", 1.0),
    ("sync_file_range", 2.0),
    ("syncfs", 1.0),
    ("msync", 1.0),
    ("sync", 0.0),
];
const SFR_FLAGS: [(&str, f64); 2] = [("write", 1.0), ("wait_before+write+wait_after", 1.0)];

/// What one daemon counted for the workload: per-device call counts, sync_file_range counts by
/// flags, and sync(2) calls (device `all`, which any process of the machine may add to).
#[derive(Debug, PartialEq)]
struct Counted {
    calls: Vec<(&'static str, f64)>,
    sfr_flags: Vec<(&'static str, f64)>,
    syncs: f64,
}

fn delta(after: &Scrape, before: &Scrape, name: &str, labels: &[(&str, &str)]) -> f64 {
    after.sum(name, labels) - before.sum(name, labels)
}

/// Every sync call on `fs`: fsync twice, fdatasync, sync_file_range with two sets of flags,
/// syncfs, sync, msync(MS_SYNC), and an msync(MS_ASYNC) that must not count.
fn workload(fs: &LoopFs, run: &str) {
    let data = fs.mountpoint().join(format!("data-{run}"));
    workload::write_and_fsync(&data, 2 * MIB).expect("write and fsync");
    workload::write_and_fsync(&data, MIB).expect("write and fsync again");
    workload::write_and_fdatasync(&data, MIB).expect("write and fdatasync");
    workload::write_file(&data, 2 * MIB, 1 << 20).expect("rewrite");
    let file = workload::open_for_write(&data).expect("open");
    workload::sync_file_range(file.as_fd(), 0, 0, workload::SFR_WRITE).expect("sfr write");
    let all = workload::SFR_WAIT_BEFORE | workload::SFR_WRITE | workload::SFR_WAIT_AFTER;
    workload::sync_file_range(file.as_fd(), 0, 0, all).expect("sfr all");
    workload::syncfs(fs.mountpoint()).expect("syncfs");
    workload::sync_all();
    let mapped = fs.mountpoint().join(format!("mapped-{run}"));
    mmap_write_msync(&mapped, MIB as usize, libc::MS_SYNC);
    mmap_write_msync(&mapped, MIB as usize, libc::MS_ASYNC);
}

/// Runs the workload under `daemon` and returns what it counted on `fs`'s device.
fn count(daemon: &TestDaemon, fs: &LoopFs, run: &str) -> Counted {
    let dev = fs.loop_name();
    let before = daemon.scrape();
    workload(fs, run);
    let after = daemon.wait_for("every call counted", Duration::from_secs(5), |s| {
        CALLS.iter().all(|(syscall, n)| {
            delta(s, &before, COUNT, &[("syscall", syscall), ("device", dev)]) >= *n
        }) && delta(s, &before, COUNT, &[("syscall", "sync"), ("device", "all")]) >= 1.0
    });
    let counted = Counted {
        calls: CALLS
            .iter()
            .map(|(syscall, _)| {
                let labels = [("syscall", *syscall), ("device", dev)];
                (*syscall, delta(&after, &before, COUNT, &labels))
            })
            .collect(),
        sfr_flags: SFR_FLAGS
            .iter()
            .map(|(flags, _)| {
                let labels = [("device", dev), ("flags", *flags)];
                (*flags, delta(&after, &before, SFR_CALLS, &labels))
            })
            .collect(),
        syncs: delta(
            &after,
            &before,
            COUNT,
            &[("syscall", "sync"), ("device", "all")],
        ),
    };
    eprintln!("{run}: {counted:?}");
    assert_eq!(
        counted.calls,
        CALLS.to_vec(),
        "{run}: the calls on {dev}:\n{}",
        wbscope_lines(&after)
    );
    assert_eq!(
        counted.sfr_flags,
        SFR_FLAGS.to_vec(),
        "{run}: sync_file_range by flags on {dev}:\n{}",
        wbscope_lines(&after)
    );
    assert!(counted.syncs >= 1.0, "{run}: sync(2) not counted");
    counted
}

fn start(hook: HookChoice) -> TestDaemon {
    let mut config = Config {
        listen: "127.0.0.1:0".parse().expect("loopback address"),
        ignore_own_io: false,
        ..Config::default()
    };
    config.sync_call_hook = hook;
    TestDaemon::start_with(config)
}

/// The reports of the probes that have an fentry alternative: the twelve sync-call probes.
fn sync_call_reports(daemon: &TestDaemon) -> Vec<ProbeReport> {
    let reports: Vec<ProbeReport> = daemon
        .reports()
        .iter()
        .filter(|r| r.spec.fentry.is_some() && r.family == "sync calls")
        .cloned()
        .collect();
    assert_eq!(reports.len(), 12, "sync-call probes with an fentry program");
    reports
}

/// The kernel's refusal of fentry at load: EPERM where it is locked down against it, ENOTSUPP
/// (524) without BPF trampolines, and on 5.10 the verifier's refusal of a wrapper whose BTF
/// prototype has only a forward declaration of `struct pt_regs` (`__x64_sys_msync` there). Only
/// these may keep a probe on its tracepoint in the default run; any other verifier rejection or a
/// missing function is a bug and fails the test.
fn kernel_refuses_fentry(why: &str) -> bool {
    why.contains("(os error 1)")
        || why.contains("(os error 524)")
        || why.contains("type FWD is not a struct")
}

#[test]
#[ignore = "needs root and BPF: run with cargo xtask test"]
fn fentry_and_tracepoint_hooks_count_the_same_sync_calls() {
    let fs = LoopFs::new(FsKind::Ext4, 256).expect("loop filesystem");

    let auto = start(HookChoice::Auto);
    let reports = sync_call_reports(&auto);
    let mut fallbacks = Vec::new();
    for r in &reports {
        assert!(r.status.is_attached(), "{}: {:?}", r.spec.program, r.status);
        if r.on_fentry() {
            assert!(
                r.hook.starts_with("fentry ") || r.hook.starts_with("fexit "),
                "{}",
                r.hook
            );
            continue;
        }
        // On its tracepoint: only where the kernel refused fentry, with the refusal reported.
        let why = r.fentry_not_used.as_deref().unwrap_or_default();
        assert!(
            kernel_refuses_fentry(why),
            "{} is on {}, fentry not used: {why:?}",
            r.spec.program,
            r.hook
        );
        fallbacks.push(format!("{}: {why}", r.spec.program));
    }
    let taxing: Vec<&str> = auto
        .reports()
        .iter()
        .filter(|r| r.taxes_syscalls())
        .map(|r| r.spec.program)
        .collect();
    if fallbacks.is_empty() {
        eprintln!("default run: all 12 sync-call probes on fentry/fexit");
        assert!(
            taxing.is_empty(),
            "syscalls: tracepoints attached: {taxing:?}"
        );
    } else {
        assert_eq!(
            taxing.len(),
            fallbacks.len(),
            "{taxing:?} vs {fallbacks:#?}"
        );
        eprintln!(
            "default run: this kernel refuses fentry for {} of the 12 sync-call probes; the \
             fallback to their syscalls: tracepoints is reported:\n  {}",
            fallbacks.len(),
            fallbacks.join("\n  ")
        );
    }
    let on_default = count(&auto, &fs, "default hooks");
    drop(auto);

    let tracepoints = start(HookChoice::Tracepoint);
    for r in sync_call_reports(&tracepoints) {
        assert!(
            r.taxes_syscalls() && r.hook.starts_with("tracepoint syscalls/"),
            "{} on {} with sync_call_hook = \"tracepoint\"",
            r.spec.program,
            r.hook
        );
    }
    let on_tracepoints = count(&tracepoints, &fs, "tracepoints");
    drop(tracepoints);

    assert_eq!(on_default.calls, on_tracepoints.calls);
    assert_eq!(on_default.sfr_flags, on_tracepoints.sfr_flags);
}
