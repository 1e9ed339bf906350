//! HTTP basic authentication against bcrypt hashes, on every route.

use std::{
    collections::{BTreeMap, HashSet},
    net::SocketAddr,
    sync::{Arc, Mutex},
};

use axum::{
    extract::{ConnectInfo, Request, State},
    http::{HeaderMap, HeaderValue, StatusCode, header},
    middleware::Next,
    response::{IntoResponse, Response},
};
use base64::Engine as _;

use super::http_metrics::HttpMetrics;

/// How many accepted `Authorization` values are remembered (one per scraper in practice).
const CACHE: usize = 64;

/// The users of the web config file and the credentials already verified.
pub struct Users {
    hashes: BTreeMap<String, String>,
    /// `Authorization` header values that verified: bcrypt is slow on purpose (tens of ms),
    /// and a scraper sends the same header every time. Only successes are kept, so failed
    /// guesses cannot fill it.
    accepted: Mutex<HashSet<HeaderValue>>,
}

impl Users {
    /// `hashes`: user name → bcrypt hash, already validated.
    pub fn new(hashes: BTreeMap<String, String>) -> Users {
        Users {
            hashes,
            accepted: Mutex::new(HashSet::new()),
        }
    }

    /// Whether `value` (an `Authorization` header) names a user with the right password.
    fn verify(&self, value: &HeaderValue) -> bool {
        if self.accepted.lock().is_ok_and(|seen| seen.contains(value)) {
            return true;
        }
        let Some((user, password)) = basic_credentials(value) else {
            return false;
        };
        // An unknown user still costs one bcrypt verification (against any configured hash),
        // so response times do not tell which user names exist.
        let (known, hash) = match self.hashes.get(&user) {
            Some(hash) => (true, hash),
            None => match self.hashes.values().next() {
                Some(hash) => (false, hash),
                None => return false,
            },
        };
        let ok = known && bcrypt::verify(password.as_bytes(), hash).unwrap_or(false);
        if ok && let Ok(mut seen) = self.accepted.lock() {
            if seen.len() >= CACHE {
                seen.clear();
            }
            seen.insert(value.clone());
        }
        ok
    }
}

/// `Basic base64(user:password)` → (user, password).
fn basic_credentials(value: &HeaderValue) -> Option<(String, String)> {
    let value = value.to_str().ok()?.trim();
    let (scheme, encoded) = value.split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("basic") {
        return None;
    }
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(encoded.trim())
        .ok()?;
    let text = String::from_utf8(decoded).ok()?;
    let (user, password) = text.split_once(':')?;
    Some((user.to_owned(), password.to_owned()))
}

/// Middleware: the request goes on only with valid credentials; else `401` with
/// `WWW-Authenticate: Basic`, counted and logged (rate-limited), and the connection is closed
/// after the answer so that a client without credentials holds no connection.
pub async fn require(
    State((users, metrics)): State<(Arc<Users>, HttpMetrics)>,
    request: Request,
    next: Next,
) -> Response {
    if authorized(&users, request.headers()).await {
        return next.run(request).await;
    }
    let peer = request
        .extensions()
        .get::<ConnectInfo<SocketAddr>>()
        .map(|c| c.0);
    let why = if request.headers().contains_key(header::AUTHORIZATION) {
        "wrong credentials"
    } else {
        "no credentials"
    };
    metrics.auth_failed("basic_auth", peer, why);
    (
        StatusCode::UNAUTHORIZED,
        [
            (header::WWW_AUTHENTICATE, "Basic"),
            (header::CONNECTION, "close"),
        ],
        "Unauthorized\n",
    )
        .into_response()
}

async fn authorized(users: &Arc<Users>, headers: &HeaderMap) -> bool {
    let Some(value) = headers.get(header::AUTHORIZATION).cloned() else {
        return false;
    };
    let users = Arc::clone(users);
    // bcrypt is CPU-bound: keep it off the async workers.
    tokio::task::spawn_blocking(move || users.verify(&value))
        .await
        .unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(user: &str, password: &str) -> HeaderValue {
        let encoded =
            base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
        HeaderValue::from_str(&format!("Basic {encoded}")).unwrap()
    }

    #[test]
    fn verifies_user_and_password() {
        let hash = bcrypt::hash("s3cret:x", 4).unwrap();
        let users = Users::new(BTreeMap::from([("prom".to_owned(), hash)]));
        assert!(users.verify(&header("prom", "s3cret:x")));
        // Cached now; still right, and a wrong password is still wrong.
        assert!(users.verify(&header("prom", "s3cret:x")));
        assert!(!users.verify(&header("prom", "s3cret")));
        assert!(!users.verify(&header("other", "s3cret:x")));
        assert!(!users.verify(&HeaderValue::from_static("Bearer abc")));
        assert!(!users.verify(&HeaderValue::from_static("Basic !!!")));
    }

    #[test]
    fn parses_basic_credentials() {
        assert_eq!(
            basic_credentials(&HeaderValue::from_static("basic YTpiOmM=")),
            Some(("a".into(), "b:c".into()))
        );
        assert_eq!(
            basic_credentials(&HeaderValue::from_static("Basic YWJj")),
            None
        );
    }
}
