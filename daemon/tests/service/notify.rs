//! sd_notify: the test plays the service manager. It owns an abstract-namespace NOTIFY_SOCKET,
//! sets WATCHDOG_USEC, and checks that READY=1 comes only once `/metrics` answers, and that
//! WATCHDOG=1 arrives at half the watchdog timeout.

use std::{
    io::{Read as _, Write as _},
    net::{SocketAddr, TcpStream},
    os::{linux::net::SocketAddrExt as _, unix::net},
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use testkit::{Scrape, scrape};

use crate::common::{Wbscope, free_addr};

const WATCHDOG: Duration = Duration::from_secs(1);

/// Until it gets an answer, keeps one request to `addr` in flight: connects in a tight loop
/// (refused until the daemon binds), sends the request and waits for the response. The daemon
/// binds before it loads the probes, so this request is queued before the server runs.
/// Returns (first successful connect, first 200 answer).
fn poll_until_answered(addr: SocketAddr, until: Instant) -> (Option<Instant>, Option<Instant>) {
    let mut connected = None;
    while Instant::now() < until {
        let Ok(mut stream) = TcpStream::connect_timeout(&addr, Duration::from_millis(100)) else {
            std::thread::sleep(Duration::from_millis(1));
            continue;
        };
        connected.get_or_insert_with(Instant::now);
        let _ = stream.set_read_timeout(Some(Duration::from_secs(30)));
        let mut response = Vec::new();
        let sent = stream.write_all(b"GET /metrics HTTP/1.0\r\nHost: test\r\n\r\n");
        if sent.is_ok()
            && stream.read_to_end(&mut response).is_ok()
            && (response.starts_with(b"HTTP/1.1 200") || response.starts_with(b"HTTP/1.0 200"))
        {
            return (connected, Some(Instant::now()));
        }
    }
    (connected, None)
}

/// Receives datagrams until `until`, each with its arrival time.
fn receive(socket: &net::UnixDatagram, until: Instant) -> Vec<(Instant, String)> {
    let mut got = Vec::new();
    let mut buf = vec![0u8; 4096];
    while let Some(left) = until.checked_duration_since(Instant::now()) {
        socket
            .set_read_timeout(Some(left.max(Duration::from_millis(1))))
            .expect("set timeout");
        if let Ok(n) = socket.recv(&mut buf) {
            got.push((
                Instant::now(),
                String::from_utf8_lossy(&buf[..n]).into_owned(),
            ));
        }
    }
    got
}

#[test]
#[ignore = "needs root and the release binary: run with cargo xtask test"]
fn ready_after_metrics_answer_and_watchdog_at_half_the_timeout() {
    let name = format!("wbscope-test-notify-{}", std::process::id());
    let socket = net::UnixDatagram::bind_addr(
        &net::SocketAddr::from_abstract_name(name.as_bytes()).expect("abstract name"),
    )
    .expect("bind the notify socket");
    let addr = free_addr();
    let listen = addr.to_string();
    let notify_socket = format!("@{name}");
    let usec = WATCHDOG.as_micros().to_string();

    let deadline = Instant::now() + Duration::from_secs(30);
    let first = Arc::new(Mutex::new((None, None)));
    let poller = {
        let first = Arc::clone(&first);
        std::thread::spawn(move || *first.lock().unwrap() = poll_until_answered(addr, deadline))
    };
    let spawned = Instant::now();
    let mut daemon = Wbscope::spawn(
        &["run", "--listen", &listen],
        &[
            ("NOTIFY_SOCKET", notify_socket.as_str()),
            ("WATCHDOG_USEC", usec.as_str()),
        ],
    );

    // Wait for READY alone first, then scrape at once: a READY sent before the server runs
    // would make this scrape fail (refused before the bind, or no answer while probes load).
    let mut messages = Vec::new();
    let ready_at = loop {
        let got = receive(&socket, Instant::now() + Duration::from_millis(20));
        let ready = got.iter().find(|(_, m)| m.contains("READY=1")).map(|x| x.0);
        messages.extend(got);
        if let Some(at) = ready {
            break at;
        }
        assert!(
            Instant::now() < deadline,
            "no READY=1 within 30 s; got {messages:?}; log:\n{}",
            daemon.log()
        );
    };
    let text = scrape(addr).expect("/metrics answers as soon as READY=1 arrives");
    let answered_after_ready = ready_at.elapsed();
    // Watch the watchdog for 3.2 timeouts' worth of pings.
    messages.extend(receive(
        &socket,
        Instant::now() + WATCHDOG * 3 + WATCHDOG / 5,
    ));
    poller.join().expect("poller");
    let (connected, answered) = *first.lock().unwrap();

    let ready_msg = &messages
        .iter()
        .find(|(_, m)| m.contains("READY=1"))
        .expect("READY")
        .1;
    let status = ready_msg
        .lines()
        .find_map(|l| l.strip_prefix("STATUS="))
        .expect("READY comes with a STATUS= line");
    eprintln!(
        "READY {:?} after spawn; first /metrics answer {:?} after spawn; scrape right after READY took {:?}",
        ready_at - spawned,
        answered.map(|a| a - spawned),
        answered_after_ready
    );
    eprintln!("STATUS={status}");

    // The STATUS names the address and every attached probe, and the scrape agrees.
    let parsed = Scrape::parse(&text).expect("exposition parses");
    let attached = parsed.sum("wbscope_probe_attached", &[]);
    assert!(attached >= 9.0, "{attached} probes attached");
    // Probes on a module this kernel lacks (no NFS) are skipped by design.
    let skipped = testkit::module_probes::count_skipped_by_absent_module(
        parsed
            .samples("wbscope_probe_attached")
            .iter()
            .filter(|(_, v)| *v == 0.0)
            .filter_map(|(labels, _)| labels.get("probe").map(String::as_str)),
    );
    let expected = format!(
        "{attached} of {} probes attached",
        attached as usize + skipped
    );
    assert!(status.contains(&expected), "{status:?} lacks {expected:?}");
    assert!(
        status.contains(&format!("http://{addr}/metrics")),
        "{status}"
    );

    // Ordering: bound before READY, and the poller's request (queued before the server ran)
    // answered no later than READY. The daemon itself scrapes before it sends READY, so the
    // only slack needed is for this test's two threads waking up (both answers are written
    // within microseconds of each other).
    let connected = connected.expect("the listener was bound");
    let answered = answered.expect("the poller got an answer");
    assert!(connected < ready_at, "READY before the listener was bound");
    let slack = Duration::from_millis(100);
    assert!(
        answered <= ready_at + slack,
        "first answer {:?} after READY",
        answered - ready_at
    );
    assert_eq!(
        messages
            .iter()
            .filter(|(_, m)| m.contains("READY=1"))
            .count(),
        1,
        "{messages:?}"
    );

    // WATCHDOG=1 every WATCHDOG/2 (500 ms), after READY.
    let pings: Vec<Instant> = messages
        .iter()
        .filter(|(_, m)| m.trim() == "WATCHDOG=1")
        .map(|(at, _)| *at)
        .collect();
    assert!(pings.iter().all(|&p| p >= ready_at), "ping before READY");
    let gaps: Vec<Duration> = pings.windows(2).map(|w| w[1] - w[0]).collect();
    eprintln!("{} watchdog pings, gaps {gaps:?}", pings.len());
    assert!(
        pings.len() >= 6,
        "{} pings in 3.2 s: {messages:?}",
        pings.len()
    );
    let half = WATCHDOG / 2;
    for gap in &gaps {
        assert!(
            *gap > half.mul_f64(0.8) && *gap < half.mul_f64(1.2),
            "watchdog gap {gap:?} is not ~{half:?}: {gaps:?}"
        );
    }

    daemon.signal(libc::SIGTERM);
    let (status, took) = daemon.wait_exit(Duration::from_secs(10));
    assert!(status.success(), "{status:?}");
    let stopping = receive(&socket, Instant::now() + Duration::from_millis(50));
    eprintln!("exited after {took:?}; last messages {stopping:?}");
    assert!(
        stopping.iter().any(|(_, m)| m.contains("STOPPING=1")),
        "{stopping:?}"
    );
}
