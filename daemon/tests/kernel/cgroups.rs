//! Per-cgroup metrics on a pure cgroup v2 host: two cgroups fsync on one device, and each one's
//! count is exactly what its own process did; with a cap of one named cgroup the second is
//! counted as `other`. Skipped (with the reason) where `/sys/fs/cgroup` is not cgroup2 with
//! the memory and io controllers, such as a v1 or hybrid host; the vm tier boots such guests.

use std::{
    collections::BTreeSet,
    io::Write as _,
    process::{Command, Stdio},
    time::Duration,
};

use serde_json::Value;
use testkit::{
    FsKind, LoopFs, Scrape,
    cgroup2::{self, Cgroup},
    metrics::http_get,
    wait_until,
};
use wbscope::{Config, families::cgroups::CgroupsConfig};

use crate::harness::{TestDaemon, wbscope_lines};

const CALLS: &str = "wbscope_cgroup_sync_calls_total";
const SECONDS: &str = "wbscope_cgroup_sync_call_seconds_total";
const PAUSES: &str = "wbscope_cgroup_dirty_throttle_pauses_total";
const PAUSE_SECONDS: &str = "wbscope_cgroup_dirty_throttle_pause_seconds_total";

/// Why per-cgroup metrics cannot be tested here, if they cannot.
fn unsupported() -> Option<String> {
    if !cgroup2::is_cgroup2_root() {
        return Some(format!("{} is not a cgroup2 mount", cgroup2::ROOT));
    }
    let offered = match cgroup2::root_subtree_control() {
        Ok(c) => c,
        Err(e) => return Some(e.to_string()),
    };
    let missing: Vec<&str> = ["memory", "io"]
        .into_iter()
        .filter(|c| !offered.iter().any(|o| o == c))
        .collect();
    (!missing.is_empty()).then(|| {
        format!(
            "the root cgroup's subtree_control lacks {}",
            missing.join(", ")
        )
    })
}

/// A test parent with the memory and io controllers for its children `a` and `b`.
struct Cgroups {
    // Declared children first: they are dropped (removed) before the parent.
    a: Cgroup,
    b: Cgroup,
    parent: Cgroup,
}

fn cgroups(name: &str) -> Cgroups {
    let parent =
        Cgroup::create(&format!("wbscope-test-{name}-{}", std::process::id())).expect("parent");
    parent
        .enable_for_children(&["memory", "io"])
        .expect("enable memory and io for the children");
    Cgroups {
        a: parent.child("a").expect("cgroup a"),
        b: parent.child("b").expect("cgroup b"),
        parent,
    }
}

fn daemon(allow: &Cgroup, max_named: usize) -> TestDaemon {
    TestDaemon::start_with(Config {
        listen: "127.0.0.1:0".parse().expect("loopback address"),
        cgroups: CgroupsConfig {
            enabled: true,
            allow: vec![allow.cgroup_path()],
            max_named,
        },
        // Every operation is a stall event, so each fsync's event can be found by its cgroup.
        stalls: wbscope::families::stall_events::StallsConfig {
            threshold_ns: 0,
            socket: None,
            ..Default::default()
        },
        ..Config::default()
    })
}

/// Runs a shell in `cgroup` that makes `calls` × (write 64 KiB + fsync) with `dd conv=fsync`
/// (one fsync each) on `fs`.
fn fsyncs_in(cgroup: &Cgroup, fs: &LoopFs, tag: &str, calls: u32) {
    in_cgroup_run(
        cgroup,
        &format!(
            "i=0; while [ $i -lt {calls} ]; do \
             dd if=/dev/zero of={}/{tag}$i bs=64k count=1 conv=fsync status=none || exit 1; \
             i=$((i+1)); done",
            fs.mountpoint().display()
        ),
    );
}

/// Runs `script` in a shell in `cgroup` and waits for it. The shell waits on its stdin until it
/// has been moved into the cgroup, so none of its work is charged elsewhere.
fn in_cgroup_run(cgroup: &Cgroup, script: &str) {
    let mut child = Command::new("sh")
        .args(["-c", &format!("read go || exit 1; {script}")])
        .stdin(Stdio::piped())
        .spawn()
        .expect("start the shell");
    cgroup
        .add_process(child.id())
        .expect("move the shell into its cgroup");
    child
        .stdin
        .take()
        .expect("piped stdin")
        .write_all(b"go\n")
        .expect("start the shell's work");
    let status = child.wait().expect("wait for the shell");
    assert!(status.success(), "{script}: {status}");
}

fn fsync_count(s: &Scrape, cgroup: &str) -> f64 {
    s.sum(CALLS, &[("cgroup", cgroup), ("syscall", "fsync")])
}

/// Every `cgroup` label value of the per-cgroup families.
fn cgroup_labels(s: &Scrape) -> BTreeSet<String> {
    s.all_samples()
        .iter()
        .filter(|x| x.name.starts_with("wbscope_cgroup_"))
        .filter_map(|x| x.labels.get("cgroup").cloned())
        .collect()
}

#[test]
#[ignore = "needs root and BPF: run with cargo xtask test"]
fn each_cgroup_counts_exactly_its_own_fsyncs() {
    if let Some(why) = unsupported() {
        eprintln!("skipped: per-cgroup metrics need cgroup v2 with memory and io: {why}");
        return;
    }
    let fs = LoopFs::new(FsKind::Ext4, 256).expect("loop filesystem");
    let groups = cgroups("exact");
    let daemon = daemon(&groups.parent, 2);
    let (a, b) = (groups.a.cgroup_path(), groups.b.cgroup_path());
    fsyncs_in(&groups.a, &fs, "a", 7);
    fsyncs_in(&groups.b, &fs, "b", 3);
    let s = daemon.wait_for("both cgroups' fsyncs", Duration::from_secs(10), |s| {
        fsync_count(s, &a) >= 7.0 && fsync_count(s, &b) >= 3.0
    });
    eprintln!(
        "{a}: {} fsyncs, {b}: {} fsyncs",
        fsync_count(&s, &a),
        fsync_count(&s, &b)
    );
    assert_eq!(fsync_count(&s, &a), 7.0, "{}", wbscope_lines(&s));
    assert_eq!(fsync_count(&s, &b), 3.0, "{}", wbscope_lines(&s));
    // dd conv=fsync makes no other sync call: nothing else is charged to either cgroup.
    for cgroup in [&a, &b] {
        assert_eq!(
            s.sum(CALLS, &[("cgroup", cgroup)]),
            fsync_count(&s, cgroup),
            "{}",
            wbscope_lines(&s)
        );
        let seconds = s.sum(SECONDS, &[("cgroup", cgroup), ("syscall", "fsync")]);
        assert!(seconds > 0.0, "{cgroup}: no time: {}", wbscope_lines(&s));
    }
    // The stall events name the same cgroups by path: 7 fsyncs of dd in a, 3 in b.
    let path = format!("/stalls?device={}&min=0&since=600", fs.loop_name());
    let in_cgroup = |events: &[Value], cgroup: &str| {
        events
            .iter()
            .filter(|e| e["kind"] == "fsync" && e["comm"] == "dd" && e["cgroup"] == cgroup)
            .count()
    };
    let events = wait_until(Duration::from_secs(5), Duration::from_millis(200), || {
        let body = http_get(daemon.addr(), &path).ok()?;
        let served: Value = serde_json::from_str(&body).ok()?;
        let events = served["events"].as_array()?.clone();
        (in_cgroup(&events, &a) >= 7 && in_cgroup(&events, &b) >= 3).then_some(events)
    })
    .unwrap_or_else(|| panic!("the fsync stall events of {a} and {b} are not in /stalls"));
    eprintln!(
        "fsync stall events: {} in {a}, {} in {b}",
        in_cgroup(&events, &a),
        in_cgroup(&events, &b)
    );
    assert_eq!(in_cgroup(&events, &a), 7);
    assert_eq!(in_cgroup(&events, &b), 3);
}

/// A 32 MiB buffered write by a shell in cgroup `a` against an 8 MiB strict bdi dirty limit,
/// with the test parent's writes to the device limited to 4 MiB/s: the writer is throttled, and
/// every pause the dirty-throttle family counts for the device (only this writer dirties it) is
/// charged to `a`, with the same total time; `b`, idle, has no throttling series.
#[test]
#[ignore = "needs root and BPF: run with cargo xtask test"]
fn a_throttled_writers_pauses_are_charged_to_its_cgroup() {
    if let Some(why) = unsupported() {
        eprintln!("skipped: per-cgroup metrics need cgroup v2 with memory and io: {why}");
        return;
    }
    const MIB: u64 = 1 << 20;
    let fs = LoopFs::new(FsKind::Ext4, 256).expect("loop filesystem");
    fs.limit_bdi_dirty(8 * MIB).expect("bdi dirty limit");
    let groups = cgroups("throttle");
    groups
        .parent
        .limit_write_bps(&fs.dev_string(), 4 * MIB)
        .expect("io.max on the test parent");
    let daemon = daemon(&groups.parent, 2);
    let device = fs.loop_name().to_owned();
    let (a, b) = (groups.a.cgroup_path(), groups.b.cgroup_path());
    let count = "wbscope_dirty_throttle_pause_seconds_count";
    let sum = "wbscope_dirty_throttle_pause_seconds_sum";
    let before = daemon.scrape();
    in_cgroup_run(
        &groups.a,
        &format!(
            "dd if=/dev/zero of={}/bdp bs=1M count=32 status=none",
            fs.mountpoint().display()
        ),
    );
    let device_labels = [("device", device.as_str())];
    let s = daemon.wait_for("a's pauses", Duration::from_secs(10), |s| {
        let by_device = s.sum(count, &device_labels) - before.sum(count, &device_labels);
        by_device > 0.0 && s.sum(PAUSES, &[("cgroup", &a)]) >= by_device
    });
    let by_device = s.sum(count, &device_labels) - before.sum(count, &device_labels);
    let device_seconds = s.sum(sum, &device_labels) - before.sum(sum, &device_labels);
    let by_cgroup = s.sum(PAUSES, &[("cgroup", &a)]);
    let cgroup_seconds = s.sum(PAUSE_SECONDS, &[("cgroup", &a)]);
    eprintln!(
        "{device}: {by_device} pauses, {device_seconds:.3} s; {a}: {by_cgroup} pauses, \
         {cgroup_seconds:.3} s"
    );
    assert_eq!(by_cgroup, by_device, "{}", wbscope_lines(&s));
    assert!(
        (cgroup_seconds - device_seconds).abs() < 1e-6,
        "{cgroup_seconds} s charged to {a}, {device_seconds} s on {device}"
    );
    assert_eq!(
        s.sum(PAUSES, &[("cgroup", &b)]),
        0.0,
        "{}",
        wbscope_lines(&s)
    );
}

#[test]
#[ignore = "needs root and BPF: run with cargo xtask test"]
fn the_cap_on_named_cgroups_holds() {
    if let Some(why) = unsupported() {
        eprintln!("skipped: per-cgroup metrics need cgroup v2 with memory and io: {why}");
        return;
    }
    let fs = LoopFs::new(FsKind::Ext4, 256).expect("loop filesystem");
    let groups = cgroups("cap");
    let daemon = daemon(&groups.parent, 1);
    let (a, b) = (groups.a.cgroup_path(), groups.b.cgroup_path());
    // `a` is seen first and takes the one slot.
    fsyncs_in(&groups.a, &fs, "a", 5);
    let s = daemon.wait_for("a's fsyncs", Duration::from_secs(10), |s| {
        fsync_count(s, &a) >= 5.0
    });
    assert_eq!(fsync_count(&s, &a), 5.0, "{}", wbscope_lines(&s));
    let other_before = fsync_count(&s, "other");
    fsyncs_in(&groups.b, &fs, "b", 4);
    let s = daemon.wait_for("b's fsyncs under other", Duration::from_secs(10), |s| {
        fsync_count(s, "other") - other_before >= 4.0
    });
    let labels = cgroup_labels(&s);
    eprintln!("cgroup label values with max_named = 1: {labels:?}");
    assert!(
        !labels.contains(&b),
        "{b} has series: {}",
        wbscope_lines(&s)
    );
    assert!(labels.len() <= 2, "more than 1 + other: {labels:?}");
    assert_eq!(fsync_count(&s, &a), 5.0, "{}", wbscope_lines(&s));
    // Only other cgroups' calls could add to `other` beyond b's 4 (none in a test guest).
    assert!(fsync_count(&s, "other") - other_before >= 4.0);
}
