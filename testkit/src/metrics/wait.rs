//! Polling helper for values that appear asynchronously (metrics lag the I/O they count).

use std::thread;
use std::time::{Duration, Instant};

/// Calls `f` every `poll` until it returns `Some`, or until `timeout` has passed; `f` is
/// always called at least once, and once more at the deadline so a slow final poll is not
/// wasted. Returns the first `Some`, or `None` on timeout.
pub fn wait_until<T>(
    timeout: Duration,
    poll: Duration,
    mut f: impl FnMut() -> Option<T>,
) -> Option<T> {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(value) = f() {
            return Some(value);
        }
        let now = Instant::now();
        if now >= deadline {
            return None;
        }
        thread::sleep(poll.min(deadline - now));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn returns_first_some_or_none_on_timeout() {
        let mut calls = 0;
        let got = wait_until(Duration::from_secs(1), Duration::from_millis(1), || {
            calls += 1;
            (calls == 3).then_some(calls)
        });
        assert_eq!(got, Some(3));
        let start = Instant::now();
        let none: Option<()> =
            wait_until(Duration::from_millis(50), Duration::from_millis(10), || {
                None
            });
        assert!(none.is_none());
        assert!(start.elapsed() >= Duration::from_millis(50));
    }
}
