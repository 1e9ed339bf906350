//! The .deb under a real systemd: the clean Debian 12 root file system booted with systemd as
//! PID 1 (`systemd-nspawn --boot`, sharing the host's network and kernel), the package
//! installed there with dpkg, and the shipped unit driven with systemctl: start reaches READY,
//! /metrics answers, `wbscope trace` reads the daemon's socket, reload applies a config change,
//! the watchdog is fed, the hardening is in force, and stop unloads every BPF program.
//!
//! The container gets CAP_BPF and CAP_PERFMON on top of nspawn's default set (the unit's
//! CapabilityBoundingSet can only keep what the container has), bpf(2) and perf_event_open(2)
//! through nspawn's system-call filter, and the host's tracefs and debugfs, which nspawn's own
//! /sys lacks. The only change to the unit is a drop-in that
//! shortens WatchdogSec to 4 s, so that several pings fit in a short test.

use std::{
    net::SocketAddr,
    path::{Path, PathBuf},
    process::{Child, Command, Output, Stdio},
    time::{Duration, Instant},
};

use crate::common::{Rootfs, artifact, free_addr, text, wait_for_metrics};

/// A booted container; powered off (and waited for) on drop.
struct Booted {
    nspawn: Child,
    /// The container's PID 1 (systemd), as the host sees it.
    leader: u32,
    name: String,
}

impl Booted {
    fn boot(root: &Path) -> Booted {
        let name = format!("wbscope-test-{}", std::process::id());
        let nspawn = Command::new("systemd-nspawn")
            .arg("--boot")
            .arg("--directory")
            .arg(root)
            .args(["--machine", &name])
            // No systemd-machined on the host to register with, nor a unit to make a scope in.
            .args(["--register=no", "--keep-unit"])
            .args(["--capability=CAP_BPF,CAP_PERFMON", "--console=passive"])
            // nspawn's own seccomp filter denies bpf(2) (map creation fails with EPERM even
            // with CAP_BPF) and perf_event_open(2); a host's systemd has no such filter.
            .arg("--system-call-filter=bpf perf_event_open")
            .args([
                "--bind-ro=/sys/kernel/tracing",
                "--bind-ro=/sys/kernel/debug",
            ])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("run systemd-nspawn (Debian package systemd-container)");
        let mut booted = Booted {
            leader: 0,
            nspawn,
            name,
        };
        let deadline = Instant::now() + Duration::from_secs(60);
        while booted.leader == 0 {
            assert!(Instant::now() < deadline, "no container PID 1 within 60 s");
            booted.leader = child_of(booted.nspawn.id()).unwrap_or(0);
            std::thread::sleep(Duration::from_millis(100));
        }
        loop {
            let state = text(&booted.exec(&["systemctl", "is-system-running"]).stdout);
            let state = state.trim();
            if state == "running" || state == "degraded" {
                eprintln!("systemd in the container: {state}");
                break;
            }
            assert!(
                Instant::now() < deadline,
                "the container's systemd did not finish booting within 60 s: {state}"
            );
            std::thread::sleep(Duration::from_millis(250));
        }
        booted
    }

    /// Runs `argv` inside the container (all of its namespaces, its root).
    fn exec(&self, argv: &[&str]) -> Output {
        Command::new("nsenter")
            .args(["--target", &self.leader.to_string(), "--all", "--"])
            .args(argv)
            .output()
            .expect("run nsenter")
    }

    /// `exec` that must succeed; its stdout.
    fn ok(&self, argv: &[&str]) -> String {
        let out = self.exec(argv);
        assert!(
            out.status.success(),
            "{argv:?} in the container failed ({}):\n{}{}",
            out.status,
            text(&out.stdout),
            text(&out.stderr)
        );
        text(&out.stdout)
    }

    /// `systemctl show -p KEY --value wbscope`.
    fn show(&self, key: &str) -> String {
        self.ok(&["systemctl", "show", "-p", key, "--value", "wbscope"])
            .trim()
            .to_owned()
    }

    /// The daemon's pid in the host's pid namespace (for its BPF program ids).
    fn host_pid(&self, container_pid: u32) -> u32 {
        let ns = std::fs::read_link(format!("/proc/{}/ns/pid", self.leader)).expect("pid ns");
        for entry in std::fs::read_dir("/proc").expect("read /proc").flatten() {
            let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
                continue;
            };
            if std::fs::read_link(format!("/proc/{pid}/ns/pid"))
                .ok()
                .as_ref()
                != Some(&ns)
            {
                continue;
            }
            let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
            let inner = status
                .lines()
                .find_map(|l| l.strip_prefix("NSpid:"))
                .and_then(|ids| ids.split_whitespace().last()?.parse::<u32>().ok());
            if inner == Some(container_pid) {
                return pid;
            }
        }
        panic!("no host pid for the container's pid {container_pid}");
    }
}

impl Drop for Booted {
    fn drop(&mut self) {
        // SIGTERM makes nspawn power the container off cleanly; SIGKILL if it hangs.
        let _ = Command::new("kill")
            .arg(self.nspawn.id().to_string())
            .status();
        let deadline = Instant::now() + Duration::from_secs(30);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.nspawn.try_wait() {
                break;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let _ = self.nspawn.kill();
        let _ = self.nspawn.wait();
        // nspawn leaves its (empty) mount-propagation directory behind.
        let _ =
            std::fs::remove_dir(PathBuf::from("/run/systemd/nspawn/propagate").join(&self.name));
    }
}

/// The first child of `pid` (nspawn's only child is the container's init).
fn child_of(pid: u32) -> Option<u32> {
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).ok()?;
    tasks
        .flatten()
        .filter_map(|t| std::fs::read_to_string(t.path().join("children")).ok())
        .find_map(|c| c.split_whitespace().next()?.parse().ok())
}

fn attached_probes(body: &str) -> usize {
    body.lines()
        .filter(|l| l.starts_with("wbscope_probe_attached{") && l.ends_with(" 1"))
        .count()
}

#[test]
#[ignore = "needs root, systemd-nspawn and the .deb: run with cargo xtask test"]
fn deb_under_a_booted_systemd() {
    let started = Instant::now();
    let deb = artifact("WBSCOPE_DEB");
    let rootfs = Rootfs::fresh();
    std::fs::copy(&deb, rootfs.path().join("root/wbscope.deb")).expect("copy the .deb in");
    let addr: SocketAddr = free_addr();

    let c = Booted::boot(rootfs.path());
    c.ok(&["dpkg", "-i", "/root/wbscope.deb"]);
    assert_eq!(
        c.show("UnitFileState"),
        "disabled",
        "the package enabled the unit"
    );

    // Listen where nothing else on this host does (the container shares its network), and a
    // shorter watchdog period (the shipped 30 s would need a 30 s test to see two pings).
    let config = "/etc/wbscope/config.toml";
    let shipped = c.ok(&["cat", config]);
    let ours = format!("listen = \"{addr}\"\n{shipped}");
    std::fs::write(rootfs.path().join("etc/wbscope/config.toml"), &ours).expect("edit config");
    let dropin = rootfs.path().join("etc/systemd/system/wbscope.service.d");
    std::fs::create_dir_all(&dropin).expect("drop-in dir");
    std::fs::write(dropin.join("watchdog.conf"), "[Service]\nWatchdogSec=4s\n").expect("drop-in");
    c.ok(&["systemctl", "daemon-reload"]);

    // Type=notify: `systemctl start` returns once the daemon sent READY=1.
    let t = Instant::now();
    let start = c.exec(&["systemctl", "start", "wbscope"]);
    if !start.status.success() {
        let journal = c.exec(&["journalctl", "-u", "wbscope", "--no-pager", "-o", "cat"]);
        panic!(
            "systemctl start wbscope failed; journal:\n{}",
            text(&journal.stdout)
        );
    }
    eprintln!(
        "systemctl start returned after {:.1} s",
        t.elapsed().as_secs_f64()
    );
    assert_eq!(c.show("ActiveState"), "active");
    assert_eq!(c.show("SubState"), "running");
    let status = c.show("StatusText");
    eprintln!("StatusText: {status}");
    assert!(!status.is_empty(), "no STATUS= from the daemon");

    let body = wait_for_metrics(addr, 10).expect("/metrics does not answer");
    let attached = attached_probes(&body);
    eprintln!(
        "/metrics at {addr}: {} bytes, {attached} probes attached",
        body.len()
    );
    assert!(attached > 0, "no probe attached under the unit");

    // The hardening: capabilities, and a file system it cannot write outside /run/wbscope.
    let main_pid = c.show("MainPID");
    let proc_status = c.ok(&["cat", &format!("/proc/{main_pid}/status")]);
    let cap = |key: &str| {
        proc_status
            .lines()
            .find_map(|l| l.strip_prefix(key))
            .map(|v| v.trim().to_owned())
            .unwrap_or_default()
    };
    // CAP_PERFMON is bit 38, CAP_BPF bit 39.
    assert_eq!(
        cap("CapBnd:"),
        "000000c000000000",
        "bounding set is not {{BPF, PERFMON}}"
    );
    assert_eq!(cap("CapEff:"), "000000c000000000");
    assert_eq!(cap("NoNewPrivs:"), "1");
    let in_daemon_ns = |path: &str| {
        c.exec(&[
            "nsenter", "--target", &main_pid, "--mount", "--", "touch", path,
        ])
    };
    for path in [
        "/etc/wbscope/written",
        "/usr/written",
        "/var/written",
        "/root/written",
    ] {
        let out = in_daemon_ns(path);
        assert!(
            !out.status.success(),
            "the daemon's view lets {path} be written"
        );
        eprintln!("hardening: touch {path}: {}", text(&out.stderr).trim());
    }
    let out = in_daemon_ns("/run/wbscope/written");
    assert!(
        out.status.success(),
        "/run/wbscope is not writable: {}",
        text(&out.stderr)
    );
    c.ok(&["rm", "/run/wbscope/written"]);
    let socket = c.ok(&["stat", "-c", "%F %a", "/run/wbscope/stalls.sock"]);
    assert_eq!(socket.trim(), "socket 600", "the stall socket");

    // `wbscope trace` without a single capability: it can only read the daemon's socket.
    let out = c.exec(&[
        "setpriv",
        "--inh-caps=-all",
        "--bounding-set=-all",
        "--",
        "timeout",
        "2",
        "/usr/bin/wbscope",
        "trace",
    ]);
    let said = text(&out.stderr);
    eprintln!("wbscope trace: {}", said.lines().next().unwrap_or(""));
    assert!(
        said.contains("reading the daemon's stall stream at /run/wbscope/stalls.sock"),
        "wbscope trace did not use the daemon's socket:\n{said}"
    );
    assert!(
        !said.contains("probes attached"),
        "trace loaded its own probes:\n{said}"
    );

    // Reload: a new stall threshold applies to the running daemon, same pid.
    let reloaded = ours.replace("[stalls]\n", "[stalls]\nthreshold = \"250ms\"\n");
    assert_ne!(reloaded, ours, "the shipped config has no [stalls] table");
    std::fs::write(rootfs.path().join("etc/wbscope/config.toml"), &reloaded).expect("edit config");
    c.ok(&["systemctl", "reload", "wbscope"]);
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let journal = c.ok(&["journalctl", "-u", "wbscope", "--no-pager", "-o", "cat"]);
        if journal.contains("reload: stall threshold now 250000000 ns") {
            eprintln!("reload: the journal says \"reload: stall threshold now 250000000 ns\"");
            break;
        }
        assert!(
            Instant::now() < deadline,
            "reload not applied; journal:\n{journal}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    assert_eq!(c.show("MainPID"), main_pid, "reload restarted the daemon");

    // The watchdog: pings keep arriving, and 10 s (2.5 periods) pass without a restart.
    let first = c.show("WatchdogTimestampMonotonic");
    std::thread::sleep(Duration::from_secs(10));
    let later = c.show("WatchdogTimestampMonotonic");
    let (first, later): (u64, u64) = (
        first.parse().expect("watchdog timestamp"),
        later.parse().expect("watchdog timestamp"),
    );
    eprintln!(
        "watchdog: last ping moved on by {:.1} s in 10 s (WatchdogSec=4s)",
        (later - first) as f64 / 1e6
    );
    assert!(later > first, "no watchdog ping in 10 s");
    assert_eq!(c.show("NRestarts"), "0");
    assert_eq!(c.show("MainPID"), main_pid);

    // Stop: every BPF program the daemon held is unloaded, and systemd removes /run/wbscope.
    let host_pid = c.host_pid(main_pid.parse().expect("MainPID"));
    let programs = testkit::bpf_programs::program_ids(host_pid);
    assert!(!programs.is_empty(), "the daemon holds no BPF program");
    c.ok(&["systemctl", "stop", "wbscope"]);
    assert_eq!(c.show("ActiveState"), "inactive");
    let left = testkit::bpf_programs::still_loaded(&programs).expect("bpftool");
    eprintln!(
        "stop: {} BPF programs were loaded, {} left",
        programs.len(),
        left.len()
    );
    assert!(
        left.is_empty(),
        "programs still loaded after stop: {left:?}"
    );
    assert!(
        !c.exec(&["test", "-e", "/run/wbscope"]).status.success(),
        "/run/wbscope left after stop"
    );
    let journal = c.ok(&["journalctl", "-u", "wbscope", "--no-pager", "-o", "cat"]);
    assert!(
        journal.contains("stopped; all probes detached"),
        "{journal}"
    );
    eprintln!("systemd test took {:.1} s", started.elapsed().as_secs_f64());
}
