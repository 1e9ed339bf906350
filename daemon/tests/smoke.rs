//! Smoke tests of the release binary (`WBSCOPE_BIN`, set by `cargo xtask test`): `check`, start,
//! scrape, SIGTERM, exit 0; and the errors an operator sees for bad input. They need root and
//! are `#[ignore]`d so that nothing privileged runs by accident.

use std::{
    net::{SocketAddr, TcpListener},
    path::PathBuf,
    process::{Child, Command, Output, Stdio},
    time::{Duration, Instant},
};

use testkit::{
    Scrape,
    bpf_programs::{program_ids, still_loaded},
    module_probes::{count_skipped_by_absent_module, skipped_by_absent_module},
    scrape, wait_until,
};

#[path = "smoke/interfaces.rs"]
mod interfaces;
#[path = "smoke/stall_log.rs"]
mod stall_log;
#[path = "smoke/top.rs"]
mod top;

fn binary() -> PathBuf {
    let path = std::env::var_os("WBSCOPE_BIN")
        .map(PathBuf::from)
        .expect("WBSCOPE_BIN must name the release binary (cargo xtask test sets it)");
    assert!(path.is_file(), "{} does not exist", path.display());
    path
}

/// A loopback address nobody listens on right now.
fn free_addr() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind an ephemeral port");
    listener.local_addr().expect("local address")
}

/// Waits for `child` to exit, killing it after `timeout`.
fn wait_with_timeout(mut child: Child, timeout: Duration) -> Output {
    let deadline = Instant::now() + timeout;
    while Instant::now() < deadline {
        if child.try_wait().expect("try_wait").is_some() {
            return child.wait_with_output().expect("collect output");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = child.kill();
    let output = child.wait_with_output().expect("collect output");
    panic!(
        "wbscope did not exit within {timeout:?}; stderr:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
}

fn run_to_exit(args: &[&str]) -> Output {
    let child = Command::new(binary())
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn wbscope");
    wait_with_timeout(child, Duration::from_secs(20))
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

#[test]
#[ignore = "needs root and the release binary: run with cargo xtask test"]
fn check_reports_every_probe_attached() {
    let output = run_to_exit(&["check"]);
    let stdout = String::from_utf8_lossy(&output.stdout);
    print!("{stdout}");
    assert!(output.status.success(), "check failed: {}", stderr(&output));
    let probes = testkit::check_table::probe_names(&stdout);
    assert!(probes.len() >= 9, "too few probes listed: {probes:?}");
    for probe in &probes {
        let line = stdout
            .lines()
            .find(|l| l.split_whitespace().next() == Some(probe.as_str()))
            .unwrap_or_else(|| panic!("probe {probe} missing from check output"));
        if skipped_by_absent_module(probe) && line.contains("skipped: ") {
            continue;
        }
        assert!(line.ends_with("attached"), "{line}");
    }
    let summary = format!(
        "{} of {} probes attach on this kernel",
        probes.len() - count_skipped_by_absent_module(probes.iter().map(String::as_str)),
        probes.len()
    );
    assert!(stdout.contains(&summary), "missing '{summary}'");
}

#[test]
#[ignore = "needs root and the release binary: run with cargo xtask test"]
fn serves_valid_metrics_and_detaches_everything_on_sigterm() {
    let probes = testkit::check_table::probe_names(&String::from_utf8_lossy(
        &run_to_exit(&["check"]).stdout,
    ));
    let addr = free_addr();
    let listen = addr.to_string();
    let child = Command::new(binary())
        .args(["run", "--listen", &listen])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn wbscope");
    let pid = child.id();
    let text = wait_until(Duration::from_secs(20), Duration::from_millis(100), || {
        scrape(addr).ok()
    })
    .expect("/metrics answers");
    let parsed = Scrape::parse(&text).expect("exposition parses");
    for family in [
        "wbscope_build_info",
        "wbscope_probe_attached",
        "process_cpu_seconds_total",
    ] {
        assert!(parsed.family(family).is_some(), "{family} missing");
    }
    assert_eq!(
        parsed.sum("wbscope_probe_attached", &[]),
        (probes.len() - count_skipped_by_absent_module(probes.iter().map(String::as_str))) as f64,
        "every probe reports attached"
    );
    let ids = program_ids(pid);
    assert!(
        ids.len()
            >= probes.len() - count_skipped_by_absent_module(probes.iter().map(String::as_str)),
        "programs loaded while running: {ids:?}"
    );

    // promtool (Debian's prometheus package) validates the exposition.
    let mut promtool = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run promtool (installed by cargo xtask setup)");
    {
        use std::io::Write as _;
        let mut stdin = promtool.stdin.take().expect("promtool stdin");
        stdin.write_all(text.as_bytes()).expect("feed promtool");
    }
    let checked = promtool.wait_with_output().expect("promtool output");
    assert!(
        checked.status.success(),
        "promtool check metrics failed:\n{}{}",
        String::from_utf8_lossy(&checked.stdout),
        String::from_utf8_lossy(&checked.stderr)
    );

    // SAFETY: kill(2) with a pid we spawned and still own (not yet reaped).
    let rc = unsafe { libc::kill(pid as libc::pid_t, libc::SIGTERM) };
    assert_eq!(rc, 0, "send SIGTERM");
    let started = Instant::now();
    let output = wait_with_timeout(child, Duration::from_secs(5));
    eprintln!("exited {:?} after SIGTERM", started.elapsed());
    assert!(
        output.status.success(),
        "exit status {:?}: {}",
        output.status,
        stderr(&output)
    );
    let left = still_loaded(&ids).expect("bpftool");
    assert!(left.is_empty(), "programs {left:?} left loaded after exit");
}

#[test]
#[ignore = "needs root and the release binary: run with cargo xtask test"]
fn unknown_config_key_is_named() {
    let dir = tempfile::tempdir().expect("temp dir");
    let config = dir.path().join("wbscope.toml");
    std::fs::write(&config, "listen = \"127.0.0.1:0\"\nlisten_adress = \"x\"\n").expect("write");
    let output = run_to_exit(&["run", "--config", &config.to_string_lossy()]);
    assert!(!output.status.success());
    let err = stderr(&output);
    assert!(err.contains("listen_adress"), "{err}");
}

#[test]
#[ignore = "needs root and the release binary: run with cargo xtask test"]
fn malformed_listen_address_is_named() {
    let dir = tempfile::tempdir().expect("temp dir");
    let config = dir.path().join("wbscope.toml");
    std::fs::write(&config, "listen = \"localhost-9\"\n").expect("write");
    let output = run_to_exit(&["run", "--config", &config.to_string_lossy()]);
    assert!(!output.status.success());
    let err = stderr(&output);
    assert!(
        err.contains("`listen`") && err.contains("localhost-9"),
        "{err}"
    );

    let output = run_to_exit(&["run", "--listen", "300.1.2.3:80"]);
    assert!(!output.status.success());
    assert!(stderr(&output).contains("--listen"), "{}", stderr(&output));
}

#[test]
#[ignore = "needs root and the release binary: run with cargo xtask test"]
fn port_in_use_is_named() {
    let taken = TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = taken.local_addr().expect("address").to_string();
    let output = run_to_exit(&["run", "--listen", &addr]);
    assert!(!output.status.success());
    let err = stderr(&output);
    assert!(err.contains(&addr) && err.contains("in use"), "{err}");
}

#[test]
#[ignore = "needs root and the release binary: run with cargo xtask test"]
fn unprivileged_run_names_the_missing_privilege() {
    // A copy anyone can execute: the build tree may sit under a directory nobody cannot enter.
    let dir = tempfile::tempdir().expect("temp dir");
    let copy = dir.path().join("wbscope");
    std::fs::copy(binary(), &copy).expect("copy binary");
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).expect("chmod");
    for args in [&["run", "--listen", "127.0.0.1:0"][..], &["check"][..]] {
        let output = Command::new("setpriv")
            .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
            .arg(&copy)
            .args(args)
            .output()
            .expect("run setpriv");
        assert!(
            !output.status.success(),
            "{args:?} succeeded without privileges"
        );
        let err = stderr(&output);
        assert!(
            err.contains("CAP_BPF") && err.contains("CAP_PERFMON"),
            "{args:?}: {err}"
        );
    }
}

/// Mount points of every tracefs mount (mountinfo field 5, for lines whose type is tracefs).
fn tracefs_mounts() -> Vec<String> {
    std::fs::read_to_string("/proc/self/mountinfo")
        .unwrap_or_default()
        .lines()
        .filter(|l| l.contains(" - tracefs "))
        .filter_map(|l| l.split(' ').nth(4).map(str::to_owned))
        .collect()
}

fn tracefs_mounted() -> bool {
    !tracefs_mounts().is_empty()
}

/// On a fresh host tracefs is often not mounted: wbscope mounts it rather than failing.
#[test]
#[ignore = "needs root and the release binary: run with cargo xtask test"]
fn tracefs_is_mounted_when_missing() {
    // Unmount every tracefs mount; a busy one makes this test inconclusive, and it says so.
    for mountpoint in tracefs_mounts() {
        let status = Command::new("umount")
            .arg(&mountpoint)
            .status()
            .expect("run umount");
        if !status.success() {
            eprintln!("tracefs at {mountpoint} is busy; the mount path is not exercised");
            return;
        }
    }
    let output = run_to_exit(&["check"]);
    let mounted_again = tracefs_mounted();
    if !mounted_again {
        // Leave the host as we found it even when wbscope failed.
        let _ = Command::new("mount")
            .args(["-t", "tracefs", "nodev", "/sys/kernel/tracing"])
            .status();
    }
    assert!(output.status.success(), "check failed: {}", stderr(&output));
    assert!(mounted_again, "wbscope did not mount tracefs");
}
