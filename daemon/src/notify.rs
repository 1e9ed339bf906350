//! The systemd notification protocol (sd_notify(3)) without libsystemd: one datagram per message
//! to the `AF_UNIX` socket named by `$NOTIFY_SOCKET` (a path, or `@name` for the abstract
//! namespace), and the watchdog interval from `$WATCHDOG_USEC` / `$WATCHDOG_PID`.
//!
//! Outside systemd (no `$NOTIFY_SOCKET`) every call is a no-op, so the daemon runs the same way by
//! hand, in tests and under a unit with `Type=notify`.

use std::{
    ffi::OsStr,
    os::unix::{
        ffi::OsStrExt as _,
        net::{SocketAddr, UnixDatagram},
    },
    time::Duration,
};

/// Where notifications go, if anywhere.
pub struct Notifier {
    target: Option<(UnixDatagram, SocketAddr)>,
    watchdog: Option<Duration>,
}

impl Notifier {
    /// Reads `$NOTIFY_SOCKET`, `$WATCHDOG_USEC` and `$WATCHDOG_PID`. A socket that cannot be
    /// used is logged and ignored: readiness reporting must never stop the daemon itself.
    pub fn from_env() -> Notifier {
        let target = std::env::var_os("NOTIFY_SOCKET").and_then(|path| match connect(&path) {
            Ok(target) => Some(target),
            Err(err) => {
                tracing::warn!(
                    "NOTIFY_SOCKET={} is unusable ({err}); not reporting readiness",
                    path.to_string_lossy()
                );
                None
            }
        });
        let watchdog = watchdog_timeout(
            std::env::var("WATCHDOG_USEC").ok().as_deref(),
            std::env::var("WATCHDOG_PID").ok().as_deref(),
            std::process::id(),
        );
        Notifier { target, watchdog }
    }

    /// A notifier that sends nothing (for tests and non-service use).
    pub fn disabled() -> Notifier {
        Notifier {
            target: None,
            watchdog: None,
        }
    }

    /// Whether a service manager listens.
    pub fn is_enabled(&self) -> bool {
        self.target.is_some()
    }

    /// How often to send `WATCHDOG=1`: half the manager's timeout, as sd_watchdog_enabled(3)
    /// recommends, so one late tick never trips it. `None` when no watchdog is configured.
    pub fn watchdog_interval(&self) -> Option<Duration> {
        self.watchdog.map(|timeout| timeout / 2)
    }

    /// Sends one message (newline-separated `KEY=value` lines). Failures are logged at debug
    /// level only: the manager may be restarting, and the next message is another chance.
    pub fn notify(&self, message: &str) {
        if let Some((socket, addr)) = &self.target
            && let Err(err) = socket.send_to_addr(message.as_bytes(), addr)
        {
            tracing::debug!("sd_notify {message:?} failed: {err}");
        }
    }
}

/// An unbound datagram socket and the manager's address (`@` = abstract namespace).
fn connect(path: &OsStr) -> std::io::Result<(UnixDatagram, SocketAddr)> {
    let bytes = path.as_bytes();
    let addr = match bytes.split_first() {
        Some((b'@', name)) => {
            use std::os::linux::net::SocketAddrExt as _;
            SocketAddr::from_abstract_name(name)?
        }
        Some((b'/', _)) => SocketAddr::from_pathname(path)?,
        _ => {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                "neither an absolute path nor an @abstract name",
            ));
        }
    };
    Ok((UnixDatagram::unbound()?, addr))
}

/// The watchdog timeout from `$WATCHDOG_USEC`, if it is meant for process `pid` (systemd sets
/// `$WATCHDOG_PID` so that children that inherit the environment do not ping on our behalf).
fn watchdog_timeout(usec: Option<&str>, for_pid: Option<&str>, pid: u32) -> Option<Duration> {
    if let Some(for_pid) = for_pid
        && for_pid.trim().parse::<u32>().ok() != Some(pid)
    {
        return None;
    }
    let usec: u64 = usec?.trim().parse().ok()?;
    (usec > 0).then(|| Duration::from_micros(usec))
}

/// `MONOTONIC_USEC=` for `RELOADING=1`: `Type=notify-reload` (systemd 253+) requires it to tell
/// this reload from an earlier one.
pub fn monotonic_usec() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec into the valid, exclusively borrowed `ts`.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    if rc != 0 {
        return 0;
    }
    (ts.tv_sec as u64) * 1_000_000 + (ts.tv_nsec as u64) / 1_000
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn watchdog_is_for_our_pid_only() {
        let d = Some(Duration::from_secs(10));
        assert_eq!(watchdog_timeout(Some("10000000"), None, 7), d);
        assert_eq!(watchdog_timeout(Some("10000000"), Some("7"), 7), d);
        assert_eq!(watchdog_timeout(Some("10000000"), Some("8"), 7), None);
        assert_eq!(watchdog_timeout(Some("0"), None, 7), None);
        assert_eq!(watchdog_timeout(Some("x"), None, 7), None);
        assert_eq!(watchdog_timeout(None, Some("7"), 7), None);
    }

    #[test]
    fn sends_to_a_path_socket() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("notify");
        let manager = UnixDatagram::bind(&path).unwrap();
        let (socket, addr) = connect(path.as_os_str()).unwrap();
        let notifier = Notifier {
            target: Some((socket, addr)),
            watchdog: Some(Duration::from_secs(4)),
        };
        notifier.notify("READY=1\nSTATUS=ok");
        let mut buf = [0u8; 64];
        let n = manager.recv(&mut buf).unwrap();
        assert_eq!(&buf[..n], b"READY=1\nSTATUS=ok");
        assert_eq!(notifier.watchdog_interval(), Some(Duration::from_secs(2)));
    }

    #[test]
    fn sends_to_an_abstract_socket() {
        use std::os::linux::net::SocketAddrExt as _;
        let name = format!("wbscope-notify-test-{}", std::process::id());
        let manager =
            UnixDatagram::bind_addr(&SocketAddr::from_abstract_name(name.as_bytes()).unwrap())
                .unwrap();
        let (socket, addr) = connect(OsStr::new(&format!("@{name}"))).unwrap();
        let notifier = Notifier {
            target: Some((socket, addr)),
            watchdog: None,
        };
        notifier.notify("WATCHDOG=1");
        let mut buf = [0u8; 16];
        let n = manager.recv(&mut buf).unwrap();
        assert_eq!(&buf[..n], b"WATCHDOG=1");
    }

    #[test]
    fn rejects_relative_paths() {
        assert!(connect(OsStr::new("relative/socket")).is_err());
        assert!(connect(OsStr::new("")).is_err());
    }
}
