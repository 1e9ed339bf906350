//! The OCI image: podman loads it under the name the DaemonSet uses, its config runs the daemon
//! with the shipped config, and the container serves /metrics with only CAP_BPF and
//! CAP_PERFMON on a read-only root. Podman keeps its storage in a temporary directory, so the
//! host's images are not touched.
//!
//! Where podman cannot start containers at all, the test says so and runs the image's root file
//! system, exported by podman exactly as a container would see it, with the image's entrypoint
//! and command chrooted in a mount namespace of its own, with the same two capabilities. That
//! is the case on the project's CI machines: crun (and runc) fail to apply the container's
//! rlimits with EPERM. Podman's default RLIMIT_NOFILE (1048576) is above the machine's hard
//! limit and raising it needs CAP_SYS_RESOURCE, which no process there has; with `--ulimit` set
//! to the machine's own limits, setting RLIMIT_NPROC still fails with EPERM.

use std::{
    path::{Path, PathBuf},
    process::{Command, Output, Stdio},
};

use crate::common::{UNIT_CAPS, artifact, chroot, free_addr, run, text, wait_for_metrics};

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
            .args(["--events-backend", "file"]);
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

    fn path(&self) -> &Path {
        self.dir.path()
    }
}

impl Drop for Podman {
    fn drop(&mut self) {
        let _ = self.output(&["rm", "--all", "--force"]);
        let _ = self.output(&["rmi", "--all", "--force"]);
    }
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
    run_args.push(name.clone());
    run_args.extend(args.iter().cloned());
    let argv: Vec<&str> = run_args.iter().map(String::as_str).collect();
    let started = podman.output(&argv);
    let stderr = text(&started.stderr);
    let body = if started.status.success() {
        let body = wait_for_metrics(addr.parse().expect("addr"), 15);
        let logs = podman.output(&["logs", "wbscope-test"]);
        podman.ok(&["stop", "--time", "10", "wbscope-test"]);
        body.unwrap_or_else(|| panic!("no /metrics from the container:\n{}", text(&logs.stderr)))
    } else {
        assert!(
            stderr.contains("setrlimit") && stderr.contains("Operation not permitted")
                || stderr.contains("error setting rlimit"),
            "podman run failed for a reason other than this machine's rlimit restriction:\n{stderr}"
        );
        eprintln!(
            "podman cannot start containers on this machine ({}); running the image's root \
             file system with its entrypoint instead",
            stderr.trim()
        );
        run_exported(&podman, &name, &args, &addr)
    };
    let attached = attached_probes(&body);
    eprintln!("image {name}: /metrics answered, {attached} probes attached");
    assert!(attached > 0, "no probe attached in the image");
    assert!(
        body.contains("wbscope_build_info{"),
        "not wbscope's /metrics"
    );
}

/// The image's root file system as podman assembles it (`podman export` of a created container),
/// run with the entrypoint and `args`, chrooted, with only the unit's two capabilities.
fn run_exported(podman: &Podman, name: &str, args: &[String], addr: &str) -> String {
    podman.ok(&["create", "--name", "wbscope-export", name]);
    let root: PathBuf = podman.path().join("exported");
    std::fs::create_dir_all(&root).expect("export dir");
    let tar = podman.path().join("exported.tar");
    podman.ok(&[
        "export",
        "--output",
        &tar.to_string_lossy(),
        "wbscope-export",
    ]);
    run(
        "tar",
        &["-C", &root.to_string_lossy(), "-xf", &tar.to_string_lossy()],
    );
    for absent in ["usr/bin/sh", "bin/sh", "usr/bin/cargo"] {
        assert!(!root.join(absent).exists(), "/{absent} in the image");
    }
    let mut argv = vec!["/usr/bin/wbscope"];
    argv.extend(args.iter().map(String::as_str));
    let child = chroot(&root, Some(UNIT_CAPS), &argv)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start the image's entrypoint");
    let body = wait_for_metrics(addr.parse().expect("addr"), 15);
    // SIGTERM: the daemon detaches its probes and exits.
    let _ = Command::new("kill").arg(child.id().to_string()).status();
    let out = child.wait_with_output().expect("wait for the daemon");
    body.unwrap_or_else(|| panic!("no /metrics from the image's root:\n{}", text(&out.stderr)))
}
