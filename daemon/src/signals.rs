//! Shutdown signals from the first instruction of `main`.
//!
//! Tokio installs a signal handler only when a signal stream is created, which needs a runtime;
//! until then SIGTERM and SIGINT would kill the daemon by their default action, mid-way through
//! loading probes and without a word. So `main` first blocks them ([`hold`]): a signal sent
//! during argument parsing or config loading stays pending. Once the handlers exist
//! ([`Shutdown::install`]) they are unblocked and a pending signal is delivered to them, so the
//! start-up that follows sees it and stops cleanly.

use tokio::signal::unix::{Signal, SignalKind, signal};

/// The signals held until their handlers exist: SIGTERM, SIGINT and SIGHUP (whose default
/// action terminates too).
fn held_set() -> libc::sigset_t {
    // SAFETY: sigemptyset/sigaddset initialise and fill a sigset_t we own; the set is plain data.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        for sig in [libc::SIGTERM, libc::SIGINT, libc::SIGHUP] {
            libc::sigaddset(&mut set, sig);
        }
        set
    }
}

fn mask(how: libc::c_int) {
    let set = held_set();
    // SAFETY: pthread_sigmask with a valid, initialised set and no old-set output. It only
    // changes this thread's mask (threads started later inherit it).
    let rc = unsafe { libc::pthread_sigmask(how, &set, std::ptr::null_mut()) };
    if rc != 0 {
        eprintln!("wbscope: cannot change the signal mask (error {rc})");
    }
}

/// Blocks the shutdown signals in this thread and every thread it starts from now on. Call
/// first thing in `main`, before any thread exists.
pub fn hold() {
    mask(libc::SIG_BLOCK);
}

/// Unblocks them again in this thread: pending ones are delivered now (to tokio's handlers, if
/// installed, else by their default action).
pub fn release() {
    mask(libc::SIG_UNBLOCK);
}

/// SIGTERM and SIGINT, with handlers installed at creation.
pub struct Shutdown {
    term: Signal,
    int: Signal,
    /// A shutdown signal that was already pending when the handlers were installed.
    pending: Option<&'static str>,
}

/// Which held shutdown signal is pending, if any.
fn pending_shutdown() -> Option<&'static str> {
    // SAFETY: sigpending fills a sigset_t we own; sigismember only reads it.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        if libc::sigpending(&mut set) != 0 {
            return None;
        }
        if libc::sigismember(&set, libc::SIGTERM) == 1 {
            Some("SIGTERM")
        } else if libc::sigismember(&set, libc::SIGINT) == 1 {
            Some("SIGINT")
        } else {
            None
        }
    }
}

impl Shutdown {
    /// Installs the handlers (inside a tokio runtime context), including SIGHUP's so that a
    /// reload request during start-up is not fatal, then [`release`]s the held signals.
    pub fn install() -> std::io::Result<Shutdown> {
        let term = signal(SignalKind::terminate())?;
        let int = signal(SignalKind::interrupt())?;
        // Tokio keeps a handler installed for the life of the process once registered; the
        // stream itself is not needed (the service creates its own for reloads).
        drop(signal(SignalKind::hangup())?);
        // Seen now, it stops the start-up before it begins: tokio's streams only report it once
        // the runtime's driver has run, which a blocking start-up step could delay.
        let pending = pending_shutdown();
        release();
        Ok(Shutdown { term, int, pending })
    }

    /// Resolves on the first SIGTERM or SIGINT, also one sent before [`Shutdown::install`].
    pub async fn recv(mut self) {
        if let Some(name) = self.pending {
            tracing::info!("{name} received");
            return;
        }
        tokio::select! {
            _ = self.term.recv() => tracing::info!("SIGTERM received"),
            _ = self.int.recv() => tracing::info!("SIGINT received"),
        }
    }
}
