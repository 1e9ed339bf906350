//! `wbscope top` and `wbscope trace` reading a daemon behind its own web config file (TLS and
//! basic auth), found through the same configuration file the daemon runs with: the address,
//! the scheme and the certificate to trust come from `--config`, the user from
//! `--basic-auth.username` and the password from WBSCOPE_PASSWORD. A wrong password is an
//! error naming the 401, not a reason for `top` to load probes of its own.

use std::{
    path::Path,
    process::{Command, Output, Stdio},
    time::{Duration, Instant},
};

use crate::common::{Wbscope, binary, free_addr};

const USER: &str = "prometheus";
const PASSWORD: &str = "correct horse";

/// A self-signed certificate for 127.0.0.1 (`tls.crt`, `tls.key`): the clients trust it
/// because it is the daemon's own `cert_file`.
fn self_signed(dir: &Path) {
    let out = Command::new("openssl")
        .current_dir(dir)
        .args([
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
            "-keyout",
            "tls.key",
            "-out",
            "tls.crt",
            "-days",
            "2",
            "-subj",
            "/CN=wbscope client test",
            "-addext",
            "subjectAltName=IP:127.0.0.1",
        ])
        .output()
        .expect("run openssl (installed by cargo xtask setup)");
    assert!(
        out.status.success(),
        "openssl: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Runs `wbscope ARGS` with the password set, killing it after `timeout`.
fn client(args: &[&str], password: &str, timeout: Duration) -> (Output, Duration) {
    let started = Instant::now();
    let mut child = Command::new(binary())
        .args(args)
        .env(wbscope::client::PASSWORD_ENV, password)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn wbscope client");
    while child.try_wait().expect("try_wait").is_none() {
        if started.elapsed() > timeout {
            let _ = child.kill();
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let output = child.wait_with_output().expect("client output");
    (output, started.elapsed())
}

fn text(output: &Output) -> String {
    format!(
        "stdout:\n{}\nstderr:\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

#[test]
#[ignore = "needs root and the release binary: run with cargo xtask test"]
fn top_and_trace_read_a_daemon_over_https_with_basic_auth_from_its_config() {
    let dir = tempfile::tempdir().expect("temp dir");
    self_signed(dir.path());
    let hash = bcrypt::hash(PASSWORD, 6).expect("bcrypt");
    std::fs::write(
        dir.path().join("web.yml"),
        format!(
            "tls_server_config:\n  cert_file: tls.crt\n  key_file: tls.key\n\
             basic_auth_users:\n  {USER}: '{hash}'\n"
        ),
    )
    .expect("write web.yml");
    let addr = free_addr();
    let config = dir.path().join("config.toml");
    std::fs::write(
        &config,
        format!(
            "listen = \"{addr}\"\nweb_config_file = \"{}\"\n[stalls]\nsocket = \"\"\n",
            dir.path().join("web.yml").display()
        ),
    )
    .expect("write config.toml");
    let config = config.to_string_lossy().into_owned();
    let mut daemon = Wbscope::spawn(&["run", "--config", &config], &[]);
    daemon.wait_log("serving https://", 1, Duration::from_secs(60));

    let top = [
        "top",
        "--config",
        &config,
        "--basic-auth.username",
        USER,
        "--no-local",
        "--iterations",
        "1",
    ];
    let (output, _) = client(&top, PASSWORD, Duration::from_secs(20));
    assert!(output.status.success(), "top failed: {}", text(&output));
    let shown = String::from_utf8_lossy(&output.stdout);
    assert!(
        shown.contains(&format!("https://{addr}")),
        "top does not name the daemon it read: {}",
        text(&output)
    );

    let (output, _) = client(&top, "wrong", Duration::from_secs(20));
    assert!(!output.status.success(), "a wrong password was accepted");
    let err = String::from_utf8_lossy(&output.stderr);
    assert!(err.contains("401"), "{}", text(&output));

    let url = format!("https://{addr}");
    let trace = [
        "trace",
        "--config",
        &config,
        "--url",
        &url,
        "--basic-auth.username",
        USER,
        "--duration",
        "2s",
    ];
    let (output, took) = client(&trace, PASSWORD, Duration::from_secs(20));
    assert!(output.status.success(), "trace failed: {}", text(&output));
    assert!(
        took >= Duration::from_secs(2) && took < Duration::from_secs(15),
        "trace --duration 2s took {took:?}"
    );
    let err = String::from_utf8_lossy(&output.stderr);
    assert!(
        err.contains(&format!("reading {url}/stalls")),
        "{}",
        text(&output)
    );

    daemon.signal(libc::SIGTERM);
    let (status, _) = daemon.wait_exit(Duration::from_secs(30));
    assert!(status.success(), "daemon exit: {status}\n{}", daemon.log());
}
