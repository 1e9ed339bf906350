//! TLS and basic auth from a web config file (`--web.config.file`): https with the right
//! password answers, a wrong or missing one gets 401 with `WWW-Authenticate: Basic` on every
//! route, plain HTTP to the TLS port gets nothing, READY=1 still comes after the self-check, and
//! client certificates are required when configured. A broken web config file stops the daemon
//! before it loads anything, naming the problem. Certificates come from `openssl`, requests
//! from `curl` (both installed by cargo xtask setup).

use std::{
    net::SocketAddr,
    os::{linux::net::SocketAddrExt as _, unix::net},
    path::Path,
    process::Command,
    time::{Duration, Instant},
};

use crate::common::{Wbscope, binary, free_addr};

const USER: &str = "prometheus";
const PASSWORD: &str = "correct horse";

fn openssl(dir: &Path, args: &[&str]) {
    let out = Command::new("openssl")
        .current_dir(dir)
        .args(args)
        .output()
        .expect("run openssl (installed by cargo xtask setup)");
    assert!(
        out.status.success(),
        "openssl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A CA (ca.crt) and, signed by it, server.crt for 127.0.0.1 and client.crt, with their keys.
fn certificates(dir: &Path) {
    openssl(
        dir,
        &[
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
            "-keyout",
            "ca.key",
            "-out",
            "ca.crt",
            "-days",
            "2",
            "-subj",
            "/CN=wbscope test CA",
        ],
    );
    std::fs::write(dir.join("server.ext"), "subjectAltName=IP:127.0.0.1\n").expect("ext");
    std::fs::write(dir.join("client.ext"), "extendedKeyUsage=clientAuth\n").expect("ext");
    for name in ["server", "client"] {
        openssl(
            dir,
            &[
                "req",
                "-newkey",
                "ec",
                "-pkeyopt",
                "ec_paramgen_curve:prime256v1",
                "-nodes",
                "-keyout",
                &format!("{name}.key"),
                "-out",
                &format!("{name}.csr"),
                "-subj",
                &format!("/CN=wbscope test {name}"),
            ],
        );
        openssl(
            dir,
            &[
                "x509",
                "-req",
                "-in",
                &format!("{name}.csr"),
                "-CA",
                "ca.crt",
                "-CAkey",
                "ca.key",
                "-CAcreateserial",
                "-days",
                "2",
                "-out",
                &format!("{name}.crt"),
                "-extfile",
                &format!("{name}.ext"),
            ],
        );
    }
}

/// `curl ARGS URL`: (HTTP status, headers and body). Status 0: no HTTP answer at all.
fn curl(args: &[&str], url: &str) -> (u32, String) {
    let out = Command::new("curl")
        .args(["-sS", "--max-time", "10", "-i", "-w", "\n%{http_code}"])
        .args(args)
        .arg(url)
        .output()
        .expect("run curl (installed by cargo xtask setup)");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let (response, code) = text.rsplit_once('\n').unwrap_or(("", "0"));
    (code.trim().parse().unwrap_or(0), response.to_owned())
}

/// Waits for READY=1 on `socket`; returns its STATUS= line.
fn wait_ready(socket: &net::UnixDatagram, daemon: &Wbscope) -> String {
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut buf = vec![0u8; 4096];
    socket
        .set_read_timeout(Some(Duration::from_millis(100)))
        .expect("timeout");
    while Instant::now() < deadline {
        if let Ok(n) = socket.recv(&mut buf) {
            let message = String::from_utf8_lossy(&buf[..n]).into_owned();
            if message.contains("READY=1") {
                return message
                    .lines()
                    .find_map(|l| l.strip_prefix("STATUS="))
                    .unwrap_or_default()
                    .to_owned();
            }
        }
    }
    panic!("no READY=1 within 30 s; log:\n{}", daemon.log());
}

/// Starts wbscope on a free port with `web.yml` and a notify socket; waits for READY=1.
fn start(dir: &Path, web: &str) -> (Wbscope, SocketAddr, String) {
    start_with_config(dir, web, "")
}

/// [`start`] with `config` as the TOML config file.
fn start_with_config(dir: &Path, web: &str, config: &str) -> (Wbscope, SocketAddr, String) {
    std::fs::write(dir.join("web.yml"), web).expect("write web.yml");
    std::fs::write(dir.join("wbscope.toml"), config).expect("write wbscope.toml");
    // The temp dir's name makes the socket name unique per test.
    let unique = dir.file_name().unwrap_or_default().to_string_lossy();
    let name = format!("wbscope-test-tls-{}-{unique}", std::process::id());
    let socket = net::UnixDatagram::bind_addr(
        &net::SocketAddr::from_abstract_name(name.as_bytes()).expect("abstract name"),
    )
    .expect("bind the notify socket");
    let addr = free_addr();
    let listen = addr.to_string();
    let web_file = dir.join("web.yml").to_string_lossy().into_owned();
    let config_file = dir.join("wbscope.toml").to_string_lossy().into_owned();
    let notify = format!("@{name}");
    let daemon = Wbscope::spawn(
        &[
            "run",
            "--config",
            &config_file,
            "--listen",
            &listen,
            "--web.config.file",
            &web_file,
        ],
        &[
            ("NOTIFY_SOCKET", notify.as_str()),
            ("WATCHDOG_USEC", "10000000"),
        ],
    );
    let status = wait_ready(&socket, &daemon);
    // Logged right after READY: once the log has it, it has everything the self-check logged.
    daemon.wait_log("sending watchdog pings", 1, Duration::from_secs(5));
    (daemon, addr, status)
}

fn stop(mut daemon: Wbscope) {
    daemon.signal(libc::SIGTERM);
    let (status, _) = daemon.wait_exit(Duration::from_secs(10));
    assert!(status.success(), "{status:?}; log:\n{}", daemon.log());
}

fn has_header(response: &str, name: &str, value: &str) -> bool {
    response.lines().any(|l| {
        l.split_once(':')
            .is_some_and(|(n, v)| n.trim().eq_ignore_ascii_case(name) && v.trim() == value)
    })
}

#[test]
#[ignore = "needs root and the release binary: run with cargo xtask test"]
fn https_with_basic_auth_serves_only_the_right_password() {
    let dir = tempfile::tempdir().expect("temp dir");
    certificates(dir.path());
    let hash = bcrypt::hash(PASSWORD, 6).expect("bcrypt");
    // Relative file names: resolved against the web config file's directory.
    let web = format!(
        "tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n\
         basic_auth_users:\n  {USER}: '{hash}'\n"
    );
    let (daemon, addr, status) = start(dir.path(), &web);
    eprintln!("STATUS={status}");
    // READY came after the self-check over TLS (a 401 without credentials is its answer).
    assert!(
        status.contains(&format!("https://{addr}/metrics")),
        "{status}"
    );
    assert!(
        !daemon.log().contains("own /metrics check failed"),
        "self-check failed; log:\n{}",
        daemon.log()
    );

    let ca = dir.path().join("ca.crt").to_string_lossy().into_owned();
    let url = |path: &str| format!("https://{addr}{path}");
    let right = format!("{USER}:{PASSWORD}");
    let (code, response) = curl(&["--cacert", &ca, "-u", &right], &url("/metrics"));
    assert_eq!(code, 200, "{response}");
    assert!(response.contains("wbscope_probe_attached"), "{response}");
    // Again: the accepted credentials are cached, the answer is the same.
    let started = Instant::now();
    let (code, _) = curl(&["--cacert", &ca, "-u", &right], &url("/metrics"));
    eprintln!("second authenticated scrape took {:?}", started.elapsed());
    assert_eq!(code, 200);

    let wrong = format!("{USER}:wrong");
    let stranger = format!("nobody:{PASSWORD}");
    for (what, args) in [
        ("wrong password", vec!["-u", wrong.as_str()]),
        ("unknown user", vec!["-u", stranger.as_str()]),
        ("no password", vec![]),
    ] {
        for path in ["/metrics", "/", "/stalls"] {
            let mut all = vec!["--cacert", ca.as_str()];
            all.extend(&args);
            let (code, response) = curl(&all, &url(path));
            assert_eq!(code, 401, "{what} on {path}: {response}");
            assert!(
                has_header(&response, "www-authenticate", "Basic"),
                "{what} on {path}: {response}"
            );
            assert!(!response.contains("wbscope_"), "{response}");
        }
    }

    // Plain HTTP to the TLS port: no HTTP answer.
    let (code, response) = curl(&["-u", &right], &format!("http://{addr}/metrics"));
    assert_eq!(code, 0, "plain http answered: {response}");
    assert!(testkit::scrape(addr).is_err());
    // A client that does not trust the certificate refuses it.
    let (code, _) = curl(&["-u", &right], &url("/metrics"));
    assert_eq!(code, 0);
    stop(daemon);
}

#[test]
#[ignore = "needs root and the release binary: run with cargo xtask test"]
fn client_certificates_are_required_when_configured() {
    let dir = tempfile::tempdir().expect("temp dir");
    certificates(dir.path());
    let web = "tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n  \
               client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: ca.crt\n";
    let (daemon, addr, status) = start(dir.path(), web);
    eprintln!("STATUS={status}");
    assert!(
        !daemon.log().contains("own /metrics check failed"),
        "{}",
        daemon.log()
    );
    let ca = dir.path().join("ca.crt").to_string_lossy().into_owned();
    let url = format!("https://{addr}/metrics");
    let cert = dir.path().join("client.crt").to_string_lossy().into_owned();
    let key = dir.path().join("client.key").to_string_lossy().into_owned();
    let (code, response) = curl(&["--cacert", &ca, "--cert", &cert, "--key", &key], &url);
    assert_eq!(code, 200, "{response}");
    assert!(response.contains("wbscope_probe_attached"));
    let (code, response) = curl(&["--cacert", &ca], &url);
    assert_eq!(code, 0, "answered without a client certificate: {response}");
    // A certificate that the configured CA did not sign is refused.
    openssl(
        dir.path(),
        &[
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
            "-keyout",
            "other.key",
            "-out",
            "other.crt",
            "-days",
            "2",
            "-subj",
            "/CN=someone else",
        ],
    );
    let other = dir.path().join("other.crt").to_string_lossy().into_owned();
    let other_key = dir.path().join("other.key").to_string_lossy().into_owned();
    let (code, _) = curl(
        &["--cacert", &ca, "--cert", &other, "--key", &other_key],
        &url,
    );
    assert_eq!(code, 0, "a certificate of another CA was accepted");
    stop(daemon);
}

#[test]
#[ignore = "needs root and the release binary: run with cargo xtask test"]
fn silent_and_failed_tls_clients_are_closed_and_counted() {
    use std::io::{Read as _, Write as _};
    let dir = tempfile::tempdir().expect("temp dir");
    certificates(dir.path());
    let web = "tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n  \
               client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: ca.crt\n";
    let (daemon, addr, _) = start_with_config(dir.path(), web, "[http]\nheader_timeout = \"1s\"\n");
    let opened = Instant::now();
    // Silent clients: no ClientHello at all.
    let mut silent: Vec<std::net::TcpStream> = (0..20)
        .map(|_| std::net::TcpStream::connect(addr).expect("connect"))
        .collect();
    // Plain HTTP to the TLS port: the handshake fails.
    for _ in 0..5 {
        let mut s = std::net::TcpStream::connect(addr).expect("connect");
        let _ = s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
        s.set_read_timeout(Some(Duration::from_secs(3)))
            .expect("timeout");
        let mut buf = [0u8; 512];
        while matches!(s.read(&mut buf), Ok(n) if n > 0) {}
    }
    for s in &mut silent {
        s.set_read_timeout(Some(Duration::from_secs(3)))
            .expect("timeout");
        let mut buf = [0u8; 64];
        let closed =
            matches!(s.read(&mut buf), Ok(0) | Err(_)) && opened.elapsed() < Duration::from_secs(4);
        assert!(
            closed,
            "a silent TLS client still open after {:?}",
            opened.elapsed()
        );
    }
    let ca = dir.path().join("ca.crt").to_string_lossy().into_owned();
    let cert = dir.path().join("client.crt").to_string_lossy().into_owned();
    let key = dir.path().join("client.key").to_string_lossy().into_owned();
    let url = format!("https://{addr}/metrics");
    let (code, response) = curl(&["--cacert", &ca, "--cert", &cert, "--key", &key], &url);
    assert_eq!(code, 200, "{response}");
    let sample = |line_start: &str| {
        response
            .lines()
            .find_map(|l| l.strip_prefix(line_start))
            .and_then(|v| v.trim().parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    let timeouts = sample("wbscope_http_connections_closed_total{reason=\"header_timeout\"}");
    let failures = sample("wbscope_http_auth_failures_total{method=\"tls\"}");
    assert!(timeouts >= 20.0, "header_timeout {timeouts}");
    assert!(failures >= 5.0, "tls failures {failures}");
    stop(daemon);
}

#[test]
#[ignore = "needs root and the release binary: run with cargo xtask test"]
fn broken_web_config_stops_the_daemon_before_it_starts() {
    let dir = tempfile::tempdir().expect("temp dir");
    certificates(dir.path());
    std::fs::write(dir.path().join("garbage.key"), "not a key\n").expect("write");
    let cases = [
        (None, "cannot read web config file"),
        (
            Some("basic_auth_users:\n  prometheus: hunter2\n"),
            "`basic_auth_users.prometheus`: not a bcrypt hash",
        ),
        (
            Some("tls_server_config:\n  cert_file: server.crt\n  key_file: garbage.key\n"),
            "`tls_server_config.key_file`",
        ),
        (
            Some("tls_server_config:\n  cert_file: missing.crt\n  key_file: server.key\n"),
            "`tls_server_config.cert_file`",
        ),
        (
            Some("tls_server_config:\n  cert_file: server.crt\n  key_file: client.key\n"),
            "`tls_server_config.key_file`",
        ),
        (
            Some(
                "tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n  \
                  client_auth_type: RequireAnyClientCert\n",
            ),
            "`tls_server_config.client_auth_type`",
        ),
    ];
    let web = dir.path().join("web.yml");
    for (text, needle) in cases {
        match text {
            Some(text) => std::fs::write(&web, text).expect("write web.yml"),
            None => {
                let _ = std::fs::remove_file(&web);
            }
        }
        let listen = free_addr().to_string();
        let started = Instant::now();
        let out = Command::new(binary())
            .args(["run", "--listen", &listen, "--web.config.file"])
            .arg(&web)
            .env_remove("RUST_LOG")
            .output()
            .expect("run wbscope");
        let stderr = String::from_utf8_lossy(&out.stderr);
        eprintln!(
            "{needle}: exit {:?} after {:?}: {}",
            out.status.code(),
            started.elapsed(),
            stderr.trim()
        );
        assert!(!out.status.success(), "{needle}: started anyway");
        assert!(stderr.contains(needle), "{needle} not in: {stderr}");
        assert!(stderr.contains(&web.display().to_string()), "{stderr}");
        // Nothing was loaded or served: the file is checked first.
        assert!(!stderr.contains("serving"), "{stderr}");
        assert!(!stderr.contains("probe"), "{stderr}");
    }
}
