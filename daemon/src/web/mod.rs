//! Optional TLS and basic authentication for every route, configured with a web config file in
//! the format of Prometheus exporters (`--web.config.file`, config key `web_config_file`).
//!
//! The file is read once at start, before anything touches the kernel; changing it (or the
//! certificates it names) needs a restart.

pub mod auth;
pub mod config;
pub mod connections;
pub mod http_metrics;
pub mod limits;
pub mod listener;
pub mod rate_log;
pub mod tls;

use std::{path::Path, sync::Arc};

use axum::Router;

pub use config::{ClientAuth, WebConfigError, WebFile};
pub use tls::Tls;

/// What the HTTP server does beyond plain HTTP: TLS, basic auth, both or neither.
#[derive(Clone, Default)]
pub struct Web {
    pub tls: Option<Tls>,
    users: Option<Arc<auth::Users>>,
}

impl Web {
    /// Reads the web config file at `path` and everything it names.
    pub fn load(path: &Path) -> Result<Web, WebConfigError> {
        let file = WebFile::read(path)?;
        let tls = match &file.tls {
            None => None,
            Some(files) => {
                Some(
                    Tls::load(files).map_err(|(key, message)| WebConfigError::Invalid {
                        path: path.display().to_string(),
                        key: key.to_owned(),
                        message,
                    })?,
                )
            }
        };
        if tls.is_none() && !file.users.is_empty() {
            tracing::warn!(
                "web config {}: basic auth without TLS sends passwords in clear text",
                path.display()
            );
        }
        let users = (!file.users.is_empty()).then(|| Arc::new(auth::Users::new(file.users)));
        Ok(Web { tls, users })
    }

    /// `https` or `http`.
    pub fn scheme(&self) -> &'static str {
        if self.tls.is_some() { "https" } else { "http" }
    }

    /// Whether requests need credentials the daemon itself does not have (a password or a
    /// client certificate).
    pub fn requires_credentials(&self) -> bool {
        self.users.is_some()
            || self
                .tls
                .as_ref()
                .is_some_and(|t| t.client_auth == ClientAuth::Require)
    }

    /// `app` behind basic auth when users are configured; failures are counted in `metrics`.
    pub fn protect(&self, app: Router, metrics: &http_metrics::HttpMetrics) -> Router {
        match &self.users {
            Some(users) => app.layer(axum::middleware::from_fn_with_state(
                (Arc::clone(users), metrics.clone()),
                auth::require,
            )),
            None => app,
        }
    }
}
