//! Ctrl-C and SIGTERM during a benchmark: the handler only records the signal; the phases check
//! for it between steps and return an error, so every fixture is dropped on the way out (loop
//! device unmounted and detached, throttles and sysctls restored, children stopped).

use std::sync::atomic::{AtomicBool, Ordering};

use anyhow::{Result, bail};

static INTERRUPTED: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_signal: libc::c_int) {
    // Only an atomic store: anything else is not async-signal-safe.
    INTERRUPTED.store(true, Ordering::SeqCst);
}

/// Installs the handler for SIGINT and SIGTERM.
pub fn install() -> Result<()> {
    for signal in [libc::SIGINT, libc::SIGTERM] {
        let handler: extern "C" fn(libc::c_int) = on_signal;
        // SAFETY: `handler` is an `extern "C"` function that only performs an atomic store,
        // which is async-signal-safe; `signal` is a valid catchable signal number.
        let previous = unsafe { libc::signal(signal, handler as libc::sighandler_t) };
        if previous == libc::SIG_ERR {
            bail!("installing the handler for signal {signal} failed");
        }
    }
    Ok(())
}

/// Fails once a signal has arrived.
pub fn check() -> Result<()> {
    if INTERRUPTED.load(Ordering::SeqCst) {
        bail!("interrupted");
    }
    Ok(())
}
