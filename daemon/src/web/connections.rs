//! The open HTTP connections: each one's phase and deadline, and the cap on their number.
//!
//! A connection is always bounded by one deadline: waiting for its first request's headers
//! (TLS handshake included) by `header_timeout`, waiting for a later request by
//! `idle_timeout`, serving a request (until the response body is written) by
//! `request_timeout`. At `max_connections` the connection idle the longest is closed to make
//! room; when none is idle, the new one is refused.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex, MutexGuard},
    time::Instant,
};

use tokio::sync::Notify;

use super::{http_metrics::CloseReason, limits::HttpLimits};

#[derive(Debug)]
struct Phase {
    /// Requests being served (HTTP/1: zero or one).
    in_flight: usize,
    /// Requests completed.
    served: u64,
    /// When the current phase began: accept, request start, or end of the last response.
    since: Instant,
    /// Set when the connection must go (evicted, shutdown).
    closing: Option<CloseReason>,
    /// Set when its task has ended: the socket is closed, its descriptor back.
    gone: bool,
}

/// One open connection.
#[derive(Debug)]
pub struct Conn {
    phase: Mutex<Phase>,
    changed: Notify,
}

impl Conn {
    fn lock(&self) -> MutexGuard<'_, Phase> {
        // A panic while holding this lock cannot leave the phase inconsistent (plain fields).
        self.phase
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Marks a request as started; the returned guard ends it (drop it with the response body).
    pub fn begin_request(self: &Arc<Self>) -> RequestGuard {
        {
            let mut p = self.lock();
            if p.in_flight == 0 {
                p.since = Instant::now();
            }
            p.in_flight += 1;
        }
        self.changed.notify_waiters();
        RequestGuard(Arc::clone(self))
    }

    /// Resolves once the connection's task has ended and its socket is closed.
    pub async fn gone(&self) {
        loop {
            let changed = self.changed.notified();
            tokio::pin!(changed);
            // Registered before the flag is read, so the end cannot slip in between.
            changed.as_mut().enable();
            if self.lock().gone {
                return;
            }
            changed.await;
        }
    }

    fn close(&self, reason: CloseReason) {
        self.lock().closing.get_or_insert(reason);
        self.changed.notify_waiters();
    }

    /// The current deadline and what passing it means.
    fn deadline(&self, limits: &HttpLimits) -> (Instant, CloseReason) {
        let p = self.lock();
        if let Some(reason) = p.closing {
            return (p.since.min(Instant::now()), reason);
        }
        if p.in_flight > 0 {
            (
                p.since + limits.request_timeout,
                CloseReason::RequestTimeout,
            )
        } else if p.served == 0 {
            (p.since + limits.header_timeout, CloseReason::HeaderTimeout)
        } else {
            (p.since + limits.idle_timeout, CloseReason::IdleTimeout)
        }
    }

    /// Resolves once the connection must be closed, with the reason.
    pub async fn expired(&self, limits: &HttpLimits) -> CloseReason {
        loop {
            let changed = self.changed.notified();
            tokio::pin!(changed);
            // Registered before the deadline is read, so no change between the two is missed.
            changed.as_mut().enable();
            let (deadline, reason) = self.deadline(limits);
            if Instant::now() >= deadline {
                return reason;
            }
            tokio::select! {
                () = tokio::time::sleep_until(deadline.into()) => {}
                () = changed => {}
            }
        }
    }

    /// Since when the connection has been idle, if it is (and not already closing).
    fn idle_since(&self) -> Option<Instant> {
        let p = self.lock();
        (p.in_flight == 0 && p.closing.is_none()).then_some(p.since)
    }
}

/// Ends a request on drop.
pub struct RequestGuard(Arc<Conn>);

impl Drop for RequestGuard {
    fn drop(&mut self) {
        {
            let mut p = self.0.lock();
            p.in_flight = p.in_flight.saturating_sub(1);
            p.served += 1;
            if p.in_flight == 0 {
                p.since = Instant::now();
            }
        }
        self.0.changed.notify_waiters();
    }
}

#[derive(Default)]
struct Table {
    next_id: u64,
    open: HashMap<u64, Arc<Conn>>,
}

/// Every open connection, shared by the accept loop and the connection tasks.
#[derive(Clone)]
pub struct Connections {
    table: Arc<Mutex<Table>>,
    limits: HttpLimits,
    emptied: Arc<Notify>,
}

/// Whether a new connection was admitted.
pub enum Admission {
    Admitted(Registered),
    /// At the cap with no idle connection to close.
    Refused,
}

/// A connection's place in the table; dropping it frees the place.
pub struct Registered {
    id: u64,
    pub conn: Arc<Conn>,
    connections: Connections,
}

impl Drop for Registered {
    fn drop(&mut self) {
        self.conn.lock().gone = true;
        self.conn.changed.notify_waiters();
        let mut table = self.connections.lock();
        table.open.remove(&self.id);
        let empty = table.open.is_empty();
        drop(table);
        if empty {
            self.connections.emptied.notify_waiters();
        }
    }
}

impl Connections {
    pub fn new(limits: HttpLimits) -> Connections {
        Connections {
            table: Arc::default(),
            limits,
            emptied: Arc::new(Notify::new()),
        }
    }

    pub fn limits(&self) -> &HttpLimits {
        &self.limits
    }

    fn lock(&self) -> MutexGuard<'_, Table> {
        self.table
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Registers a new connection, closing the longest idle one at the cap; `evicted` is
    /// called if one was.
    pub fn admit(&self, evicted: impl FnOnce()) -> Admission {
        let mut table = self.lock();
        // Connections already told to close are on their way out (within milliseconds).
        let live = table
            .open
            .values()
            .filter(|c| c.lock().closing.is_none())
            .count();
        if live >= self.limits.max_connections {
            if Self::evict_longest_idle(&table).is_none() {
                return Admission::Refused;
            }
            evicted();
        }
        table.next_id += 1;
        let id = table.next_id;
        let conn = Arc::new(Conn {
            phase: Mutex::new(Phase {
                in_flight: 0,
                served: 0,
                since: Instant::now(),
                closing: None,
                gone: false,
            }),
            changed: Notify::new(),
        });
        table.open.insert(id, Arc::clone(&conn));
        Admission::Admitted(Registered {
            id,
            conn,
            connections: self.clone(),
        })
    }

    /// Closes the connection idle the longest, if any is idle (also to free a descriptor when
    /// accept fails with EMFILE), and returns it.
    pub fn close_longest_idle(&self) -> Option<Arc<Conn>> {
        Self::evict_longest_idle(&self.lock())
    }

    fn evict_longest_idle(table: &Table) -> Option<Arc<Conn>> {
        let oldest = table
            .open
            .values()
            .filter_map(|c| c.idle_since().map(|since| (since, c)))
            .min_by_key(|(since, _)| *since)
            .map(|(_, c)| Arc::clone(c));
        if let Some(conn) = &oldest {
            conn.close(CloseReason::Evicted);
        }
        oldest
    }

    /// Asks every connection to close (graceful for the HTTP layer: idle ones at once, busy
    /// ones after their response).
    pub fn close_all(&self) {
        for conn in self.lock().open.values() {
            conn.close(CloseReason::Shutdown);
        }
    }

    /// Resolves once no connection is open.
    pub async fn all_closed(&self) {
        loop {
            let emptied = self.emptied.notified();
            tokio::pin!(emptied);
            emptied.as_mut().enable();
            if self.lock().open.is_empty() {
                return;
            }
            emptied.await;
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn limits(max: usize) -> HttpLimits {
        HttpLimits {
            header_timeout: Duration::from_millis(50),
            idle_timeout: Duration::from_millis(80),
            request_timeout: Duration::from_millis(120),
            max_connections: max,
        }
    }

    fn admitted(c: &Connections) -> Registered {
        match c.admit(|| {}) {
            Admission::Admitted(r) => r,
            Admission::Refused => panic!("refused"),
        }
    }

    /// Waits for the deadline; returns the reason and how long it took.
    async fn expiry(r: &Registered, c: &Connections) -> (CloseReason, Duration) {
        let started = Instant::now();
        let reason = r.conn.expired(c.limits()).await;
        (reason, started.elapsed())
    }

    fn about(took: Duration, ms: u64) -> bool {
        took >= Duration::from_millis(ms - 5) && took < Duration::from_millis(ms + 200)
    }

    #[tokio::test]
    async fn a_closed_idle_connection_is_gone_once_its_task_lets_go() {
        let c = Connections::new(limits(4));
        let busy = admitted(&c);
        let _request = busy.conn.begin_request();
        let idle = admitted(&c);
        let closed = c.close_longest_idle().expect("an idle connection");
        assert!(
            Arc::ptr_eq(&closed, &idle.conn),
            "the idle one, not the busy one"
        );
        assert!(c.close_longest_idle().is_none(), "none idle is left");
        let waiting = tokio::spawn(async move { closed.gone().await });
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(!waiting.is_finished(), "gone before its task ended");
        drop(idle);
        tokio::time::timeout(Duration::from_secs(1), waiting)
            .await
            .expect("gone once its task ended")
            .expect("join");
    }

    #[tokio::test]
    async fn each_phase_has_its_deadline() {
        let c = Connections::new(limits(4));
        let r = admitted(&c);
        let (reason, took) = expiry(&r, &c).await;
        assert_eq!(reason, CloseReason::HeaderTimeout);
        assert!(about(took, 50), "{took:?}");
        let guard = r.conn.begin_request();
        let (reason, took) = expiry(&r, &c).await;
        assert_eq!(reason, CloseReason::RequestTimeout);
        assert!(about(took, 120), "{took:?}");
        drop(guard);
        let (reason, took) = expiry(&r, &c).await;
        assert_eq!(reason, CloseReason::IdleTimeout);
        assert!(about(took, 80), "{took:?}");
    }

    #[tokio::test]
    async fn at_the_cap_the_longest_idle_goes_then_new_ones_are_refused() {
        let c = Connections::new(limits(2));
        let first = admitted(&c);
        tokio::time::sleep(Duration::from_millis(2)).await;
        let second = admitted(&c);
        let busy = second.conn.begin_request();
        let mut evicted = false;
        let third = match c.admit(|| evicted = true) {
            Admission::Admitted(r) => r,
            Admission::Refused => panic!("refused with an idle connection open"),
        };
        assert!(evicted);
        assert_eq!(first.conn.expired(c.limits()).await, CloseReason::Evicted);
        let _busy3 = third.conn.begin_request();
        assert!(matches!(c.admit(|| {}), Admission::Refused));
        drop(first);
        assert!(matches!(c.admit(|| {}), Admission::Refused));
        drop(busy);
        drop(second);
        assert!(matches!(c.admit(|| {}), Admission::Admitted(_)));
    }
}
