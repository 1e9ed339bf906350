//! deploy/kubernetes and deploy/prometheus: the manifests parse, pass yamllint, and agree with
//! the daemon's real defaults (port, command line, config) and with the systemd unit
//! (capabilities, memory limit). Unprivileged: runs in the unit tier.

use std::{path::PathBuf, process::Command};

use clap::Parser as _;
use serde_json::Value;
use wbscope::{Config, cli::Cli, config::DEFAULT_PORT};

fn deploy() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../deploy")
}

fn manifests() -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(deploy().join("kubernetes"))
        .expect("read deploy/kubernetes")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
        .collect();
    files.sort();
    files
}

/// Every document of `files`, parsed by PyYAML (Debian's python3-yaml, a dependency of yamllint)
/// and handed over as JSON.
fn parse(files: &[PathBuf]) -> Vec<Value> {
    let out = Command::new("/usr/bin/python3")
        .args([
            "-c",
            "import sys, yaml, json; json.dump([d for f in sys.argv[1:] \
             for d in yaml.safe_load_all(open(f)) if d is not None], sys.stdout)",
        ])
        .args(files)
        .output()
        .expect("run python3 (python3-yaml comes with yamllint, installed by cargo xtask setup)");
    assert!(
        out.status.success(),
        "YAML does not parse: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("JSON from python")
}

fn of_kind<'a>(docs: &'a [Value], kind: &str) -> &'a Value {
    docs.iter()
        .find(|d| d["kind"] == kind)
        .unwrap_or_else(|| panic!("no {kind} in deploy/kubernetes"))
}

fn unit_directive(key: &str) -> String {
    let unit = std::fs::read_to_string(deploy().join("wbscope.service")).expect("read the unit");
    unit.lines()
        .find_map(|l| l.strip_prefix(key)?.strip_prefix('='))
        .unwrap_or_else(|| panic!("no {key}= in the unit"))
        .to_owned()
}

#[test]
fn manifests_pass_yamllint() {
    let out = Command::new("yamllint")
        .arg("--strict")
        .arg("-c")
        .arg(deploy().join(".yamllint"))
        .arg(deploy().join("kubernetes"))
        .arg(deploy().join("prometheus"))
        .output()
        .expect("run yamllint (installed by cargo xtask setup)");
    assert!(
        out.status.success(),
        "yamllint:\n{}",
        String::from_utf8_lossy(&out.stdout)
    );
}

#[test]
fn daemonset_uses_the_daemons_real_port_flags_and_config() {
    let docs = parse(&manifests());
    let ds = of_kind(&docs, "DaemonSet");
    let pod = &ds["spec"]["template"]["spec"];
    let container = &pod["containers"][0];

    // The arguments are the daemon's own command line.
    let mut argv = vec!["wbscope".to_owned()];
    for arg in container["args"].as_array().expect("args") {
        argv.push(arg.as_str().expect("string arg").to_owned());
    }
    let cli = Cli::try_parse_from(&argv).unwrap_or_else(|e| panic!("{argv:?}: {e}"));
    // `wbscope run ARGS` or `wbscope ARGS`.
    let run = match cli.command {
        Some(wbscope::cli::Command::Run(run)) => run,
        None => cli.run,
        Some(other) => panic!("{argv:?} does not run the daemon: {other:?}"),
    };
    let config_path = run.config.config.expect("--config");

    // The ConfigMap is mounted where --config points, and is a valid config.
    let mount = container["volumeMounts"]
        .as_array()
        .expect("mounts")
        .iter()
        .find(|m| m["name"] == "config")
        .expect("config mount");
    let dir = mount["mountPath"].as_str().expect("mountPath");
    assert_eq!(config_path.parent(), Some(std::path::Path::new(dir)));
    let file = config_path.file_name().expect("name").to_string_lossy();
    let text = of_kind(&docs, "ConfigMap")["data"][file.as_ref()]
        .as_str()
        .expect("the config file in the ConfigMap")
        .to_owned();
    let config = Config::from_toml(&text).expect("ConfigMap config parses");

    // One port everywhere: the daemon's default, the config, the container, the Service.
    assert_eq!(config.listen.port(), DEFAULT_PORT);
    let port = &container["ports"][0];
    assert_eq!(port["containerPort"], DEFAULT_PORT);
    let service = &of_kind(&docs, "Service")["spec"]["ports"][0];
    assert_eq!(service["port"], DEFAULT_PORT);
    assert_eq!(service["targetPort"], port["name"]);
    let endpoint = &of_kind(&docs, "ServiceMonitor")["spec"]["endpoints"][0];
    assert_eq!(endpoint["port"], service["name"]);
    assert_eq!(endpoint["path"], "/metrics");

    // The same capabilities and memory bound as the systemd unit.
    let caps = &container["securityContext"]["capabilities"];
    let unit_caps: Vec<String> = unit_directive("CapabilityBoundingSet")
        .split_whitespace()
        .map(|c| c.trim_start_matches("CAP_").to_owned())
        .collect();
    assert_eq!(caps["add"], serde_json::json!(unit_caps));
    assert_eq!(caps["drop"], serde_json::json!(["ALL"]));
    assert_eq!(container["securityContext"]["privileged"], false);
    let limit = container["resources"]["limits"]["memory"]
        .as_str()
        .expect("memory limit");
    // systemd's M is MiB, like Kubernetes' Mi.
    assert_eq!(
        limit.trim_end_matches("Mi"),
        unit_directive("MemoryMax").trim_end_matches('M')
    );
    assert!(container["resources"]["limits"]["cpu"].is_string());

    // The host file systems the daemon reads.
    let host_paths: Vec<&str> = pod["volumes"]
        .as_array()
        .expect("volumes")
        .iter()
        .filter_map(|v| v["hostPath"]["path"].as_str())
        .collect();
    for path in [
        "/sys/kernel/tracing",
        "/sys/kernel/debug",
        "/sys/kernel/btf",
    ] {
        assert!(
            host_paths.contains(&path),
            "{path} not mounted: {host_paths:?}"
        );
    }
    assert_eq!(pod["hostPID"], true, "ignore_own_io compares host pids");
}

#[test]
fn prometheus_example_scrapes_the_default_port() {
    let docs = parse(&[deploy().join("prometheus/scrape-config.yml")]);
    let job = &docs[0]["scrape_configs"][0];
    assert_eq!(job["metrics_path"], "/metrics");
    let targets = job["static_configs"][0]["targets"]
        .as_array()
        .expect("targets");
    assert!(!targets.is_empty());
    for target in targets {
        let target = target.as_str().expect("target");
        assert!(target.ends_with(&format!(":{DEFAULT_PORT}")), "{target}");
    }
}

/// The root Cargo.toml's `[workspace.metadata.wbscope]` value `key`.
fn workspace_pin(key: &str) -> String {
    let text = std::fs::read_to_string(deploy().join("../Cargo.toml")).expect("read Cargo.toml");
    let manifest: toml::Value = toml::from_str(&text).expect("Cargo.toml parses");
    manifest["workspace"]["metadata"]["wbscope"][key]
        .as_str()
        .unwrap_or_else(|| panic!("no [workspace.metadata.wbscope] {key}"))
        .to_owned()
}

#[test]
fn daemonset_runs_the_image_xtask_builds_with_a_writable_socket_dir() {
    let docs = parse(&manifests());
    let pod = &of_kind(&docs, "DaemonSet")["spec"]["template"]["spec"];
    let container = &pod["containers"][0];
    let image = format!("{}:{}", workspace_pin("image"), env!("CARGO_PKG_VERSION"));
    assert_eq!(container["image"], image.as_str());

    // Under a read-only root file system the stall socket's directory is a volume of its own.
    assert_eq!(container["securityContext"]["readOnlyRootFilesystem"], true);
    let socket_dir = std::path::Path::new(wbscope::families::stall_events::config::DEFAULT_SOCKET)
        .parent()
        .expect("socket dir")
        .to_string_lossy()
        .into_owned();
    let mount = container["volumeMounts"]
        .as_array()
        .expect("mounts")
        .iter()
        .find(|m| m["mountPath"] == socket_dir.as_str())
        .unwrap_or_else(|| panic!("nothing mounted at {socket_dir}"));
    assert_ne!(mount["readOnly"], true, "{socket_dir} must be writable");
    let volume = pod["volumes"]
        .as_array()
        .expect("volumes")
        .iter()
        .find(|v| v["name"] == mount["name"])
        .expect("the socket dir's volume");
    assert!(volume["emptyDir"].is_object(), "{volume}");
}

#[test]
fn prometheus_rule_ships_the_rules() {
    let docs = parse(&manifests());
    let rule = of_kind(&docs, "PrometheusRule");
    let root = deploy().join("../dashboards/rules");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&root)
        .expect("read dashboards/rules")
        .map(|e| e.expect("entry").path())
        .collect();
    files.sort();
    let shipped: Vec<Value> = parse(&files)
        .iter()
        .flat_map(|d| d["groups"].as_array().cloned().unwrap_or_default())
        .collect();
    assert!(!shipped.is_empty());
    assert_eq!(
        rule["spec"]["groups"],
        Value::Array(shipped),
        "deploy/kubernetes/prometheusrule.yaml differs from dashboards/rules/ (see its header)"
    );
}

/// kubernetes-validate, installed by `cargo xtask setup` into a venv under target/tools.
fn kubernetes_validate() -> PathBuf {
    deploy().join("../target/tools/venv/bin/kubernetes-validate")
}

/// Every manifest of a kind that Kubernetes itself defines validates strictly against its
/// schema (offline: the package carries the schemas). The two Prometheus Operator kinds have
/// no schema there; their content is checked above and by promtool in the e2e tier.
#[test]
fn manifests_validate_against_the_kubernetes_schemas() {
    let validator = kubernetes_validate();
    assert!(
        validator.is_file(),
        "{} is missing: run `cargo xtask setup`",
        validator.display()
    );
    let out = Command::new(&validator)
        .arg("--strict")
        .args(manifests())
        .output()
        .expect("run kubernetes-validate");
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "kubernetes-validate:\n{said}");
    for kind in ["configmap", "daemonset", "namespace", "service"] {
        assert!(
            said.lines()
                .any(|l| l.contains("passed for resource") && l.contains(&format!("{kind}/"))),
            "no {kind} validated:\n{said}"
        );
    }
    let unvalidated: Vec<&str> = said
        .lines()
        .filter(|l| l.contains("Couldn't find schema"))
        .collect();
    assert!(
        unvalidated
            .iter()
            .all(|l| l.contains("monitoring.coreos.com")),
        "a core manifest went unvalidated: {unvalidated:?}"
    );
}
