//! Warnings that an attacker can trigger (failed logins, refused connections) are logged at
//! most once per interval, with a count of the ones held back, so a flood is visible without
//! flooding the journal.

use std::{
    sync::Mutex,
    time::{Duration, Instant},
};

/// How often each kind of rate-limited warning may appear.
pub const INTERVAL: Duration = Duration::from_secs(10);

/// One kind of rate-limited warning.
#[derive(Default)]
pub struct RateLog {
    /// When the last line was logged and how many were held back since.
    state: Mutex<Option<(Instant, u64)>>,
}

impl RateLog {
    /// Logs `line()` as a warning unless one was logged within [`INTERVAL`].
    pub fn warn(&self, line: impl FnOnce() -> String) {
        let Ok(mut state) = self.state.lock() else {
            return;
        };
        let now = Instant::now();
        match &mut *state {
            Some((last, held)) if now.duration_since(*last) < INTERVAL => *held += 1,
            _ => {
                let held = state.map_or(0, |(_, held)| held);
                let text = line();
                if held > 0 {
                    tracing::warn!("{text} ({held} more like it not logged)");
                } else {
                    tracing::warn!("{text}");
                }
                *state = Some((now, 0));
            }
        }
    }
}
