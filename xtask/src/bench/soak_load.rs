//! The soak's hostile load beside the usual one: a slowloris client that keeps more connections
//! than the daemon's cap half-open, trickling header bytes, and map pressure from short-lived
//! tmpfs mounts, each synced once (a container host's churn). Both count what they did so the
//! soak can check that the daemon accounted for it.

use std::ffi::CString;
use std::io::Write as _;
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread;
use std::time::{Duration, Instant};

/// Half-open connections the slowloris keeps (the daemon's default cap is 128).
pub const SLOWLORIS_CONNECTIONS: usize = 200;
/// One header byte per connection this often: slower than any server should wait for.
const TRICKLE_EVERY: Duration = Duration::from_secs(2);
/// tmpfs mounts per round of map pressure, and the pause between rounds.
pub const TMPFS_PER_ROUND: usize = 300;
const ROUND_PAUSE: Duration = Duration::from_secs(5);

/// What the slowloris saw.
#[derive(Default)]
pub struct SlowlorisCounts {
    /// Connections opened (reopened after the server closed one).
    pub opened: AtomicU64,
    /// Connections the server closed (timeout or eviction).
    pub closed_by_server: AtomicU64,
}

/// Keeps [`SLOWLORIS_CONNECTIONS`] connections sending a partial request one byte at a time,
/// reopening each one the server closes, until `stop`.
pub fn slowloris(addr: SocketAddr, stop: &AtomicBool, counts: &SlowlorisCounts) {
    let open = || {
        let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(2)).ok()?;
        s.set_write_timeout(Some(Duration::from_secs(1))).ok()?;
        s.write_all(b"GET /metrics HTTP/1.1\r\nHost: soak\r\n")
            .ok()?;
        counts.opened.fetch_add(1, Ordering::Relaxed);
        Some(s)
    };
    let mut conns: Vec<Option<TcpStream>> = (0..SLOWLORIS_CONNECTIONS).map(|_| open()).collect();
    while !stop.load(Ordering::Relaxed) {
        let round = Instant::now();
        for slot in &mut conns {
            let alive = match slot {
                Some(s) => s.write_all(b"X").is_ok(),
                None => false,
            };
            if !alive {
                if slot.is_some() {
                    counts.closed_by_server.fetch_add(1, Ordering::Relaxed);
                }
                *slot = open();
            }
        }
        while round.elapsed() < TRICKLE_EVERY && !stop.load(Ordering::Relaxed) {
            thread::sleep(Duration::from_millis(100));
        }
    }
}

/// What the map pressure did.
#[derive(Default)]
pub struct PressureCounts {
    pub rounds: AtomicU64,
    /// fsyncs on tmpfs files that returned success.
    pub fsyncs: AtomicU64,
}

fn c_path(p: &Path) -> Option<CString> {
    CString::new(p.as_os_str().as_encoded_bytes()).ok()
}

fn mount_tmpfs(target: &Path) -> bool {
    let (Some(path), Ok(src), Ok(fstype), Ok(opts)) = (
        c_path(target),
        CString::new("wbscope-soak"),
        CString::new("tmpfs"),
        CString::new("size=64k"),
    ) else {
        return false;
    };
    // SAFETY: mount(2) with NUL-terminated strings that outlive the call.
    unsafe {
        libc::mount(
            src.as_ptr(),
            path.as_ptr(),
            fstype.as_ptr(),
            0,
            opts.as_ptr().cast(),
        ) == 0
    }
}

fn unmount(target: &Path) {
    if let Some(path) = c_path(target) {
        // SAFETY: umount2(2) with a NUL-terminated path; MNT_DETACH never blocks.
        unsafe { libc::umount2(path.as_ptr(), libc::MNT_DETACH) };
    }
}

/// Rounds of: mount [`TMPFS_PER_ROUND`] tmpfs under `dir`, fsync a file on each, unmount them
/// all; until `stop`. Every mount is undone before returning.
pub fn tmpfs_pressure(dir: &Path, stop: &AtomicBool, counts: &PressureCounts) {
    let targets: Vec<PathBuf> = (0..TMPFS_PER_ROUND)
        .map(|i| dir.join(format!("t{i}")))
        .filter(|t| std::fs::create_dir_all(t).is_ok())
        .collect();
    while !stop.load(Ordering::Relaxed) {
        let mut mounted = Vec::new();
        for target in &targets {
            if !mount_tmpfs(target) {
                continue;
            }
            mounted.push(target);
            let synced = std::fs::File::create(target.join("f"))
                .and_then(|mut f| f.write_all(b"x").and_then(|()| f.sync_all()));
            if synced.is_ok() {
                counts.fsyncs.fetch_add(1, Ordering::Relaxed);
            }
        }
        for target in mounted {
            unmount(target);
        }
        counts.rounds.fetch_add(1, Ordering::Relaxed);
        let pause = Instant::now();
        while pause.elapsed() < ROUND_PAUSE && !stop.load(Ordering::Relaxed) {
            thread::sleep(Duration::from_millis(100));
        }
    }
}
