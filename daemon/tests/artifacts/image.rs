//! The OCI image: podman loads it under the name the DaemonSet uses, its config runs the daemon
//! with the shipped config, and the container serves /metrics with only CAP_BPF and
//! CAP_PERFMON on a read-only root. Podman keeps its storage in a temporary directory, so the
//! host's images are not touched.
//!
//! Three settings beyond the documented ones, each for a limit of the test machines rather
//! than of the image:
//! - `--runtime runc`: crun refuses cgroup v1/v2 hybrid hierarchies ("cgroups in hybrid mode not
//!   supported"), which these machines have.
//! - explicit `--ulimit`s: podman's defaults for root (nofile 1048576) are above these machines'
//!   hard limits, and raising a limit needs CAP_SYS_RESOURCE, which no process here has.
//! - a seccomp profile: Debian 12's podman 4.3 (containers-common 0.50) allows bpf(2) and
//!   perf_event_open(2) only to CAP_SYS_ADMIN in its default profile (newer profiles, and
//!   containerd >= 1.7, CRI-O >= 1.26, allow them to CAP_BPF / CAP_PERFMON). The test derives
//!   the profile from that default, with only those two calls allowed, and checks that the
//!   container runs under a seccomp filter.

use std::process::{Command, Output};

use crate::common::{artifact, free_addr, text, wait_for_metrics};

/// podman with private storage; removes every container and image of it on drop.
struct Podman {
    dir: tempfile::TempDir,
}

impl Podman {
    fn new() -> Podman {
        // In the system temp dir: podman refuses a runroot path longer than 50 characters.
        let dir = tempfile::Builder::new()
            .prefix("wbscope-podman-")
            .tempdir()
            .expect("temp dir for podman's storage");
        Podman { dir }
    }

    fn cmd(&self) -> Command {
        let mut cmd = Command::new("podman");
        cmd.arg("--root")
            .arg(self.dir.path().join("storage"))
            .arg("--runroot")
            .arg(self.dir.path().join("run"))
            // vfs: no overlay mounts to leave behind; cgroupfs and a file event log: nothing
            // asks a host systemd.
            .args(["--storage-driver", "vfs", "--cgroup-manager", "cgroupfs"])
            .args(["--events-backend", "file"])
            // See the module comment.
            .args(["--runtime", "runc"]);
        cmd
    }

    fn output(&self, args: &[&str]) -> Output {
        self.cmd()
            .args(args)
            .output()
            .expect("run podman (Debian package podman)")
    }

    fn ok(&self, args: &[&str]) -> String {
        let out = self.output(args);
        assert!(
            out.status.success(),
            "podman {args:?} failed:\n{}{}",
            text(&out.stdout),
            text(&out.stderr)
        );
        text(&out.stdout)
    }
}

impl Drop for Podman {
    fn drop(&mut self) {
        let _ = self.output(&["rm", "--all", "--force"]);
        let _ = self.output(&["rmi", "--all", "--force"]);
    }
}

/// `--ulimit`s within this process's own limits (podman's defaults may be above them).
fn ulimits() -> Vec<String> {
    let mut nofile = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes one rlimit into the struct we pass.
    let ok = unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut nofile) } == 0;
    assert!(ok, "getrlimit: {}", std::io::Error::last_os_error());
    vec![
        "--ulimit".into(),
        format!("nofile={}:{}", nofile.rlim_cur, nofile.rlim_max),
        // The daemon runs a handful of threads.
        "--ulimit".into(),
        "nproc=4096:4096".into(),
    ]
}

/// The calls the daemon needs beyond the default profile of Debian 12's podman.
const BPF_CALLS: [&str; 2] = ["bpf", "perf_event_open"];

/// containers-common's default seccomp profile with `BPF_CALLS` allowed: removed from every
/// rule that denies them, and allowed by one rule of their own.
fn write_seccomp_profile(to: &std::path::Path) {
    let default = "/usr/share/containers/seccomp.json";
    let text = std::fs::read_to_string(default).unwrap_or_else(|e| {
        panic!("read {default} (Debian package golang-github-containers-common): {e}")
    });
    let mut profile: serde_json::Value = serde_json::from_str(&text).expect("seccomp JSON");
    let rules = profile["syscalls"].as_array_mut().expect("syscalls");
    for rule in rules.iter_mut() {
        if rule["action"] != "SCMP_ACT_ALLOW"
            && let Some(names) = rule["names"].as_array_mut()
        {
            names.retain(|n| !BPF_CALLS.iter().any(|c| n == c));
        }
    }
    rules.retain(|r| r["names"].as_array().is_some_and(|n| !n.is_empty()));
    rules.push(serde_json::json!({
        "names": BPF_CALLS,
        "action": "SCMP_ACT_ALLOW",
        "args": [],
        "comment": "wbscope: maps, programs and tracepoint perf events (CAP_BPF, CAP_PERFMON)",
        "includes": {},
        "excludes": {}
    }));
    std::fs::write(to, serde_json::to_vec(&profile).expect("JSON")).expect("write the profile");
}

/// The container's arguments: the image's command with the listener moved to `addr`.
fn daemon_args(cmd: &[String], addr: &str) -> Vec<String> {
    let mut args = cmd.to_vec();
    args.extend(["--listen".to_owned(), addr.to_owned()]);
    args
}

fn attached_probes(body: &str) -> usize {
    body.lines()
        .filter(|l| l.starts_with("wbscope_probe_attached{") && l.ends_with(" 1"))
        .count()
}

#[test]
#[ignore = "needs root, podman and the image: run with cargo xtask test"]
fn image_loads_and_serves_metrics() {
    let image = artifact("WBSCOPE_IMAGE");
    let name = std::env::var("WBSCOPE_IMAGE_NAME").expect("WBSCOPE_IMAGE_NAME");
    let podman = Podman::new();
    let loaded = podman.ok(&["load", "--input", &image.to_string_lossy()]);
    assert!(
        loaded.contains(&format!("Loaded image: {name}")),
        "{loaded}"
    );

    let config: serde_json::Value = serde_json::from_str(&podman.ok(&[
        "image",
        "inspect",
        "--format",
        "{{json .Config}}",
        &name,
    ]))
    .expect("image config is JSON");
    assert_eq!(
        config["Entrypoint"],
        serde_json::json!(["/usr/bin/wbscope"])
    );
    let cmd: Vec<String> = serde_json::from_value(config["Cmd"].clone()).expect("Cmd");
    assert_eq!(cmd, ["run", "--config", "/etc/wbscope/config.toml"]);
    assert!(config["ExposedPorts"]["19617/tcp"].is_object(), "{config}");

    let addr = free_addr().to_string();
    let args = daemon_args(&cmd, &addr);
    let mut run_args: Vec<String> = [
        "run",
        "--detach",
        "--name",
        "wbscope-test",
        "--read-only",
        "--network",
        "host",
        "--pid",
        "host",
        "--cap-drop",
        "all",
        "--cap-add",
        "BPF,PERFMON",
        "--volume",
        "/sys/kernel/tracing:/sys/kernel/tracing:ro",
        "--volume",
        "/sys/kernel/debug:/sys/kernel/debug:ro",
        "--volume",
        "/sys/kernel/btf:/sys/kernel/btf:ro",
        "--tmpfs",
        "/run/wbscope",
    ]
    .map(str::to_owned)
    .to_vec();
    run_args.extend(ulimits());
    let profile = podman.dir.path().join("seccomp.json");
    write_seccomp_profile(&profile);
    run_args.extend([
        "--security-opt".into(),
        format!("seccomp={}", profile.display()),
    ]);
    run_args.push(name.clone());
    run_args.extend(args.iter().cloned());
    let argv: Vec<&str> = run_args.iter().map(String::as_str).collect();
    let started = podman.output(&argv);
    assert!(
        started.status.success(),
        "podman run failed:\n{}",
        text(&started.stderr)
    );
    let body = wait_for_metrics(addr.parse().expect("addr"), 15);
    // With --pid host, the container's pid is the host's: its filter mode 2 is a seccomp filter.
    let pid = podman.ok(&["inspect", "--format", "{{.State.Pid}}", "wbscope-test"]);
    let status = std::fs::read_to_string(format!("/proc/{}/status", pid.trim()));
    let seccomp = status
        .iter()
        .flat_map(|s| s.lines())
        .find_map(|l| l.strip_prefix("Seccomp:"))
        .map(|v| v.trim().to_owned());
    let logs = podman.output(&["logs", "wbscope-test"]);
    podman.ok(&["stop", "--time", "10", "wbscope-test"]);
    let body =
        body.unwrap_or_else(|| panic!("no /metrics from the container:\n{}", text(&logs.stderr)));
    assert_eq!(
        seccomp.as_deref(),
        Some("2"),
        "the container runs without a seccomp filter"
    );
    let stopped = text(&logs.stderr);
    eprintln!(
        "container log: {}",
        stopped
            .lines()
            .find(|l| l.contains("serving"))
            .unwrap_or("")
    );
    let attached = attached_probes(&body);
    eprintln!("image {name}: /metrics answered, {attached} probes attached");
    assert!(attached > 0, "no probe attached in the image");
    assert!(
        body.contains("wbscope_build_info{"),
        "not wbscope's /metrics"
    );
}
