//! SIGTERM under load: exit 0 within 2 s with every program detached, also while fio hammers a
//! filesystem with write+fsync (every probe firing) and a client holds an HTTP request open.

use std::{
    io::Write as _,
    net::TcpStream,
    process::{Command, Stdio},
    time::Duration,
};

use testkit::{FsKind, LoopFs, Scrape, scrape, wait_until};

use testkit::bpf_programs::{program_ids, still_loaded};

use crate::common::{Wbscope, free_addr, probe_names};

/// fio, killed on drop.
struct Fio(std::process::Child);

impl Drop for Fio {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
#[ignore = "needs root and the release binary: run with cargo xtask test"]
fn sigterm_under_fio_exits_0_within_2s_and_detaches_everything() {
    let probes = probe_names();
    let fs = LoopFs::new(FsKind::Ext4, 512).expect("loop filesystem");
    let addr = free_addr();
    let listen = addr.to_string();
    let mut daemon = Wbscope::spawn(&["run", "--listen", &listen], &[]);
    wait_until(Duration::from_secs(30), Duration::from_millis(50), || {
        scrape(addr).ok()
    })
    .expect("/metrics answers");
    let ids = program_ids(daemon.pid());
    // Probes on a module this kernel lacks (no NFS) are skipped by design, and load nothing.
    let attachable = probes.len()
        - testkit::module_probes::count_skipped_by_absent_module(probes.iter().map(String::as_str));
    assert!(ids.len() >= attachable, "{ids:?} loaded for {probes:?}");

    let file = fs.mountpoint().join("fio.dat");
    let fio = Fio(Command::new("fio")
        .args([
            "--name=load",
            "--rw=randwrite",
            "--bs=4k",
            "--size=64m",
            "--fsync=4",
            "--numjobs=2",
            "--time_based",
            "--runtime=120",
            "--ioengine=psync",
            // Threads, not forked jobs, so that killing fio stops every writer at once.
            "--thread",
        ])
        .arg(format!("--filename={}", file.display()))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("run fio (installed by cargo xtask setup)"));
    // Wait until the probes see fio's fsyncs on our device, so the load is really on.
    let device = fs.loop_name().to_owned();
    let fsyncs = wait_until(Duration::from_secs(30), Duration::from_millis(200), || {
        let s = Scrape::parse(&scrape(addr).ok()?).ok()?;
        let n = s.sum(
            "wbscope_sync_call_duration_seconds_count",
            &[("device", device.as_str()), ("syscall", "fsync")],
        );
        (n >= 100.0).then_some(n)
    })
    .expect("fio's fsyncs are counted");
    eprintln!("{fsyncs} fsyncs counted on {device} before SIGTERM");

    // A client that sent half a request keeps its connection open: shutdown must not wait on it.
    let mut stalled = TcpStream::connect(addr).expect("connect");
    stalled
        .write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n")
        .expect("half a request");

    daemon.signal(libc::SIGTERM);
    let (status, took) = daemon.wait_exit(Duration::from_secs(10));
    let left = still_loaded(&ids).expect("bpftool");
    drop(fio);
    eprintln!(
        "exit {status:?} {took:?} after SIGTERM; {} of {} programs left",
        left.len(),
        ids.len()
    );
    assert!(status.success(), "{status:?}; log:\n{}", daemon.log());
    assert!(
        took < Duration::from_secs(2),
        "exit took {took:?}; log:\n{}",
        daemon.log()
    );
    assert!(left.is_empty(), "programs {left:?} left loaded after exit");
}
