//! `GET /stalls?since=&device=&min=&pid=&comm=`: the flight recorder as JSON.

use std::sync::{
    Arc, Mutex,
    atomic::{AtomicU64, Ordering},
};

use axum::{
    Json, Router,
    extract::{Query, State},
    http::StatusCode,
    response::{IntoResponse, Response},
    routing::get,
};
use serde::{Deserialize, Serialize};

use super::{
    duration::{DurationError, parse_min_ns},
    event::{Stall, parse_rfc3339, unix_now_ns},
    recorder::{Filter, Recorder},
};

/// What the handler reads.
pub struct StallState {
    pub recorder: Mutex<Recorder>,
    pub threshold_ns: AtomicU64,
}

/// Query parameters, all optional.
#[derive(Debug, Default, Deserialize)]
pub struct StallQuery {
    /// RFC 3339 time, or a number of seconds back from now.
    since: Option<String>,
    device: Option<String>,
    /// Minimum duration: `250ms`, `2s`, … (a bare number is milliseconds).
    min: Option<String>,
    pid: Option<u32>,
    comm: Option<String>,
}

#[derive(Serialize)]
struct StallsBody {
    /// The daemon's threshold: nothing shorter was recorded.
    threshold_ns: u64,
    events: Vec<Arc<Stall>>,
}

/// The `/stalls` route.
pub fn router(state: Arc<StallState>) -> Router {
    Router::new()
        .route("/stalls", get(stalls))
        .with_state(state)
}

/// Which query parameter is wrong, and why (the 400 answer's body).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum QueryError {
    #[error("since: '{0}' is not a finite number of seconds")]
    SinceNotFinite(String),
    #[error("since: '{0}' is negative")]
    SinceNegative(String),
    #[error("since: '{0}' is neither seconds nor RFC 3339")]
    SinceUnreadable(String),
    #[error("min: {0}")]
    Min(#[from] DurationError),
}

/// Turns the query into a filter, or says which parameter is wrong.
pub fn filter(q: StallQuery, now_unix_ns: u64) -> Result<Filter, QueryError> {
    let since_unix_ns = match q.since {
        None => None,
        Some(s) => match s.parse::<f64>() {
            Ok(secs) if !secs.is_finite() => return Err(QueryError::SinceNotFinite(s)),
            Ok(secs) if secs >= 0.0 => Some(now_unix_ns.saturating_sub((secs * 1e9) as u64)),
            Ok(_) => return Err(QueryError::SinceNegative(s)),
            Err(_) => Some(parse_rfc3339(&s).ok_or(QueryError::SinceUnreadable(s))?),
        },
    };
    let min_ns = match q.min {
        None => None,
        Some(m) => Some(parse_min_ns(&m)?),
    };
    Ok(Filter {
        since_unix_ns,
        device: q.device,
        pid: q.pid,
        comm: q.comm,
        min_ns,
    })
}

async fn stalls(State(state): State<Arc<StallState>>, query: Query<StallQuery>) -> Response {
    let now = unix_now_ns();
    let filter = match filter(query.0, now) {
        Ok(f) => f,
        Err(why) => return (StatusCode::BAD_REQUEST, why.to_string()).into_response(),
    };
    let events = match state.recorder.lock() {
        Ok(mut r) => {
            r.expire(now);
            r.query(&filter)
        }
        Err(_) => return StatusCode::INTERNAL_SERVER_ERROR.into_response(),
    };
    Json(StallsBody {
        threshold_ns: state.threshold_ns.load(Ordering::Relaxed),
        events,
    })
    .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn since_takes_seconds_back_or_rfc3339() {
        let q = StallQuery {
            since: Some("60".into()),
            ..StallQuery::default()
        };
        assert_eq!(
            filter(q, 100_000_000_000).unwrap().since_unix_ns,
            Some(40_000_000_000)
        );
        let q = StallQuery {
            since: Some("1970-01-01T00:00:10Z".into()),
            min: Some("250ms".into()),
            ..StallQuery::default()
        };
        let f = filter(q, 0).unwrap();
        assert_eq!(f.since_unix_ns, Some(10_000_000_000));
        assert_eq!(f.min_ns, Some(250_000_000));
        let q = StallQuery {
            min: Some("5".into()),
            ..StallQuery::default()
        };
        assert_eq!(filter(q, 0).unwrap().min_ns, Some(5_000_000));
        let q = StallQuery {
            since: Some("soon".into()),
            ..StallQuery::default()
        };
        assert!(filter(q, 0).is_err());
    }

    #[test]
    fn since_messages_say_what_is_wrong() {
        let since = |s: &str| {
            filter(
                StallQuery {
                    since: Some(s.into()),
                    ..StallQuery::default()
                },
                0,
            )
        };
        let nan = since("NaN").unwrap_err().to_string();
        assert_eq!(nan, "since: 'NaN' is not a finite number of seconds");
        assert!(since("-5").unwrap_err().to_string().contains("negative"));
        // Valid far-future RFC 3339: accepted, and selects nothing.
        assert_eq!(
            since("9999-01-01T00:00:00Z").unwrap().since_unix_ns,
            Some(u64::MAX)
        );
    }
}
