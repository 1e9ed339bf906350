//! Time tasks sleep waiting on pages under writeback, by device.

use std::{
    fs::File,
    io::{Seek as _, SeekFrom, Write as _},
    os::fd::AsFd,
    time::{Duration, Instant},
};

use testkit::{FsKind, LoopFs, workload};
use wbscope::probes::{AttachStatus, HookChoice};

use crate::{
    bpftrace::Bpftrace,
    harness::{TestDaemon, wbscope_lines},
};

const MIB: u64 = 1 << 20;
const FILE_SIZE: u64 = 8 * MIB;
const ATTEMPTS: usize = 3;

/// The wait tracepoint this kernel has: `folio_wait_writeback`, called `wait_on_page_writeback`
/// before 5.16 (same `name` field).
fn wait_event() -> &'static str {
    let tracefs = wbscope::kernel::tracefs::Tracefs::locate_or_mount().expect("tracefs");
    if tracefs.event_exists("writeback", "folio_wait_writeback") {
        "folio_wait_writeback"
    } else {
        "wait_on_page_writeback"
    }
}

/// Where tracing programs have task storage, the waits end in `folio_wait_end`: on fexit where
/// the kernel accepts fentry (the sync calls got it), and no program runs on wake-ups or context
/// switches; else on sched_wakeup, with the reason reported, and no sched_switch program is
/// attached. Without task storage (5.10) they end in `folio_wait_sched_switch`, and
/// `folio_wait_end` is reported as not needed, saying why. Returns whether the end is on fexit.
fn assert_wait_end_hook(daemon: &TestDaemon) -> bool {
    let reports = daemon.reports();
    let report = |program: &str| {
        reports
            .iter()
            .find(|r| r.spec.program == program)
            .unwrap_or_else(|| panic!("no report of {program}"))
    };
    let (end, switch) = (report("folio_wait_end"), report("folio_wait_sched_switch"));
    let fentry_accepted = reports
        .iter()
        .any(|r| r.family == "sync calls" && r.on_fentry());
    let why = end.fentry_not_used.as_deref();
    eprintln!(
        "wait end: {} {:?} (fentry/fexit not used: {why:?}); sched_switch end: {:?}",
        end.hook, end.status, switch.status
    );
    if !end.status.is_attached() {
        assert!(
            matches!(&end.status, AttachStatus::Replaced(why) if why.contains("task storage")),
            "folio_wait_end: {:?}",
            end.status
        );
        assert!(
            switch.status.is_attached(),
            "sched_switch end: {:?}",
            switch.status
        );
        return false;
    }
    assert!(
        matches!(&switch.status, AttachStatus::Replaced(why) if why.contains("folio_wait_end")),
        "the sched_switch end beside {}: {:?}",
        end.hook,
        switch.status
    );
    if fentry_accepted {
        assert!(
            end.on_fentry() && end.hook.starts_with("fexit folio_wait_bit"),
            "this kernel accepts fentry, but the waits end on {} ({why:?})",
            end.hook
        );
    } else {
        assert!(
            end.hook == "tp_btf sched_wakeup" && why.is_some(),
            "the waits end on {} ({why:?})",
            end.hook
        );
    }
    end.on_fentry()
}

/// One fdatasync behind started writeback, as wbscope and a bpftrace observer saw it.
struct Observed {
    waits: f64,
    waited: f64,
    fdatasync: f64,
    /// Waits by other threads on the same device during the attempt.
    foreign_waits: u64,
    scrape: testkit::Scrape,
}

/// Overwrites the file in place, starts writeback of it with sync_file_range(WRITE), and times
/// the fdatasync that then waits for that writeback.
fn attempt(daemon: &TestDaemon, file: &mut File, bdi: &str, device: &str) -> Observed {
    let labels = [("device", device)];
    let count = "wbscope_writeback_wait_duration_seconds_count";
    let sum = "wbscope_writeback_wait_duration_seconds_sum";
    // SAFETY: gettid has no preconditions.
    let tid = unsafe { libc::gettid() };
    let tracer = Bpftrace::start(&format!(
        "tracepoint:writeback:{} /args->name == \"{bdi}\" && tid != {tid}/ \
         {{ @foreign = count(); }}",
        wait_event()
    ));
    let before = daemon.scrape();

    file.seek(SeekFrom::Start(0)).expect("seek");
    let chunk = vec![0x5a_u8; MIB as usize];
    for _ in 0..FILE_SIZE / MIB {
        file.write_all(&chunk).expect("overwrite");
    }
    workload::sync_file_range(file.as_fd(), 0, 0, workload::SFR_WRITE).expect("sync_file_range");
    let started = Instant::now();
    file.sync_data().expect("fdatasync");
    let fdatasync = started.elapsed().as_secs_f64();
    eprintln!("fdatasync behind started writeback took {fdatasync:.3} s");

    let after = daemon.wait_for("the waits to be counted", Duration::from_secs(5), |s| {
        s.sum(count, &labels) > before.sum(count, &labels)
    });
    let foreign_waits = tracer.finish().get("foreign").copied().unwrap_or(0);
    Observed {
        waits: after.sum(count, &labels) - before.sum(count, &labels),
        waited: after.sum(sum, &labels) - before.sum(sum, &labels),
        fdatasync,
        foreign_waits,
        scrape: after,
    }
}

/// fdatasync right after sync_file_range(WRITE) started writeback of 8 MiB on a 4 MiB/s ext4
/// device: fdatasync spends its time waiting for those pages, so the device's wait histogram
/// rises, and its `_sum` is at most the fdatasync's duration and more than half of it. On the
/// default hooks (the end on fexit where the kernel allows it), and where that was fexit, once
/// more with the end on sched_wakeup (`probes.sync_call_hook = "tracepoint"`): both ends measure
/// the same waits.
///
/// The sum is per device, so a wait by any other thread on the same pages would add to it. Two
/// such waiters are designed out or detected:
/// - jbd2: the file is written and fsynced first, then overwritten in place. Its
///   blocks are already allocated, so the overwrite adds no ordered data to the journal;
///   otherwise a periodic commit (every 5 s) could wait on the same pages during the fdatasync.
/// - other processes: sync(2) anywhere on the machine waits on every filesystem's writeback,
///   this one's included. A bpftrace observer counts waits on the device by other threads; an
///   attempt that had any is repeated (up to three times).
#[test]
#[ignore = "needs root and BPF: run with cargo xtask test"]
fn fdatasync_behind_started_writeback_waits_on_the_device() {
    let fs = LoopFs::new(FsKind::Ext4, 256).expect("loop filesystem");
    let path = fs.mountpoint().join("fw");
    // Throttled first: under cgroup v2 the rule is in the cgroup this process moves to, and a
    // file's writeback is throttled only if its pages were first dirtied in that cgroup (the
    // inode's writeback follows the cgroup its pages are charged to).
    fs.throttle_write_bps(4 * MIB).expect("throttle");
    workload::write_and_fsync(&path, FILE_SIZE).expect("allocate the file");
    let on_fexit = measure(&fs, &path, HookChoice::Auto);
    if on_fexit {
        measure(&fs, &path, HookChoice::Tracepoint);
    }
}

/// Starts a daemon with the wait end on `hook`, measures one clean attempt and checks it;
/// returns whether the end was on fexit.
fn measure(fs: &LoopFs, path: &std::path::Path, hook: HookChoice) -> bool {
    let device = fs.loop_name().to_owned();
    let daemon = start(hook);
    let on_fexit = assert_wait_end_hook(&daemon);
    let mut file = workload::open_for_write(path).expect("open");
    let end = if on_fexit {
        "fexit"
    } else {
        "wake-up or sched_switch"
    };

    let mut clean = None;
    for n in 1..=ATTEMPTS {
        let o = attempt(&daemon, &mut file, &fs.dev_string(), &device);
        eprintln!(
            "{device} ({end}) attempt {n}: {} waits, sum {:.3} s; fdatasync took {:.3} s; \
             ratio {:.4}; {} waits by other threads",
            o.waits,
            o.waited,
            o.fdatasync,
            o.waited / o.fdatasync,
            o.foreign_waits
        );
        if o.foreign_waits == 0 {
            clean = Some(o);
            break;
        }
    }
    let o = clean.expect("an attempt without other threads waiting on the device");
    assert!(
        o.waited <= o.fdatasync,
        "{end}: waits {} s exceed the fdatasync's {} s:\n{}",
        o.waited,
        o.fdatasync,
        wbscope_lines(&o.scrape)
    );
    assert!(
        o.waited > 0.5 * o.fdatasync,
        "{end}: waits {} s are not most of the fdatasync's {} s:\n{}",
        o.waited,
        o.fdatasync,
        wbscope_lines(&o.scrape)
    );
    on_fexit
}

fn start(hook: HookChoice) -> TestDaemon {
    let mut config = crate::harness::test_config();
    config.sync_call_hook = hook;
    TestDaemon::start_with(config)
}
