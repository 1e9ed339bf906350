//! The web config file: the YAML that Prometheus exporters take with `--web.config.file`
//! (exporter-toolkit's format), read and checked completely before the daemon starts.
//!
//! ```yaml
//! tls_server_config:
//!   cert_file: /etc/wbscope/tls.crt     # relative paths are relative to this file
//!   key_file: /etc/wbscope/tls.key
//!   client_auth_type: RequireAndVerifyClientCert   # optional
//!   client_ca_file: /etc/wbscope/clients.crt
//!   min_version: TLS12                  # optional: TLS12 (default) or TLS13
//! basic_auth_users:
//!   prometheus: $2y$10$…                # bcrypt hash (htpasswd -nBC 10 "" | tr -d ':\n')
//! ```

use std::{
    collections::BTreeMap,
    path::{Path, PathBuf},
};

use serde::Deserialize;
use serde_norway::Value;

/// Why a web config file cannot be used. Every variant names the file; most name the key.
#[derive(Debug, thiserror::Error)]
pub enum WebConfigError {
    #[error("cannot read web config file {path}")]
    Read {
        path: String,
        source: std::io::Error,
    },
    #[error("invalid web config file {path}: {message}")]
    Parse { path: String, message: String },
    #[error("web config file {path}: `{key}`: {message}")]
    Invalid {
        path: String,
        key: String,
        message: String,
    },
}

/// The file as written. Unknown keys are rejected, as exporter-toolkit does.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawWebConfig {
    tls_server_config: Option<RawTls>,
    http_server_config: Option<Value>,
    basic_auth_users: Option<BTreeMap<String, String>>,
}

/// `tls_server_config`. Keys exporter-toolkit knows but wbscope does not implement are read so
/// that they are refused by name rather than as unknown.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTls {
    cert_file: Option<String>,
    key_file: Option<String>,
    client_auth_type: Option<String>,
    client_ca_file: Option<String>,
    min_version: Option<String>,
    cert: Option<Value>,
    key: Option<Value>,
    client_allowed_sans: Option<Value>,
    max_version: Option<Value>,
    cipher_suites: Option<Value>,
    curve_preferences: Option<Value>,
    prefer_server_cipher_suites: Option<Value>,
}

/// Which client certificates the TLS server asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClientAuth {
    /// `NoClientCert` (the default): none.
    None,
    /// `VerifyClientCertIfGiven`: optional, verified against `client_ca_file` when sent.
    VerifyIfGiven,
    /// `RequireAndVerifyClientCert`: required and verified against `client_ca_file`.
    Require,
}

/// Validated TLS settings: file paths resolved, nothing read yet (see [`super::tls`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TlsFiles {
    pub cert_file: PathBuf,
    pub key_file: PathBuf,
    pub client_auth: ClientAuth,
    pub client_ca_file: Option<PathBuf>,
    /// Only TLS 1.3 (`min_version: TLS13`); else TLS 1.2 and 1.3.
    pub tls13_only: bool,
}

/// A validated web config file (before the TLS files are read).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct WebFile {
    pub tls: Option<TlsFiles>,
    /// User name → bcrypt hash. Empty: no authentication.
    pub users: BTreeMap<String, String>,
}

impl WebFile {
    /// Reads and validates `path`.
    pub fn read(path: &Path) -> Result<WebFile, WebConfigError> {
        let text = crate::files::read_text(path, crate::files::WEB_CONFIG_LIMIT).map_err(|e| {
            WebConfigError::Read {
                path: path.display().to_string(),
                source: e.into(),
            }
        })?;
        WebFile::parse(&text, path)
    }

    /// Parses `text`, the contents of `path` (relative file names are resolved against its
    /// directory, as exporter-toolkit does).
    pub fn parse(text: &str, path: &Path) -> Result<WebFile, WebConfigError> {
        let shown = path.display().to_string();
        let invalid = |key: &str, message: String| WebConfigError::Invalid {
            path: shown.clone(),
            key: key.to_owned(),
            message,
        };
        // An empty file (or only comments) is valid and means plain HTTP, no auth.
        let raw: RawWebConfig = match serde_norway::from_str::<Option<RawWebConfig>>(text) {
            Ok(raw) => raw.unwrap_or_default(),
            Err(e) => {
                return Err(WebConfigError::Parse {
                    path: shown,
                    message: e.to_string(),
                });
            }
        };
        if raw.http_server_config.is_some() {
            return Err(invalid(
                "http_server_config",
                "not supported by wbscope (HTTP/1.1 only, no extra headers)".into(),
            ));
        }
        let dir = path.parent().unwrap_or(Path::new("."));
        let tls = raw.tls_server_config.map(|t| tls_files(t, dir)).transpose();
        let tls = tls.map_err(|(key, message)| invalid(&key, message))?;
        let users = raw.basic_auth_users.unwrap_or_default();
        for (user, hash) in &users {
            if user.contains(':') {
                return Err(invalid(
                    "basic_auth_users",
                    format!("user name {user:?} contains ':'"),
                ));
            }
            if let Err(e) = hash.parse::<bcrypt::HashParts>() {
                return Err(invalid(
                    &format!("basic_auth_users.{user}"),
                    format!("not a bcrypt hash ({e})"),
                ));
            }
        }
        Ok(WebFile { tls, users })
    }
}

/// Validates `tls_server_config`; an error is (key, message).
fn tls_files(t: RawTls, dir: &Path) -> Result<TlsFiles, (String, String)> {
    let key = |k: &str| format!("tls_server_config.{k}");
    let unsupported = [
        ("cert", t.cert.is_some()),
        ("key", t.key.is_some()),
        ("client_allowed_sans", t.client_allowed_sans.is_some()),
        ("max_version", t.max_version.is_some()),
        ("cipher_suites", t.cipher_suites.is_some()),
        ("curve_preferences", t.curve_preferences.is_some()),
        (
            "prefer_server_cipher_suites",
            t.prefer_server_cipher_suites.is_some(),
        ),
    ];
    if let Some((k, _)) = unsupported.iter().find(|(_, set)| *set) {
        return Err((key(k), "not supported by wbscope".into()));
    }
    let path = |k: &str, v: Option<String>, when: &str| match v {
        Some(p) if !p.is_empty() => Ok(dir.join(p)),
        _ => Err((key(k), format!("required when {when}"))),
    };
    let cert_file = path("cert_file", t.cert_file, "tls_server_config is set")?;
    let key_file = path("key_file", t.key_file, "tls_server_config is set")?;
    let client_auth = match t.client_auth_type.as_deref().unwrap_or("NoClientCert") {
        "" | "NoClientCert" => ClientAuth::None,
        "VerifyClientCertIfGiven" => ClientAuth::VerifyIfGiven,
        "RequireAndVerifyClientCert" => ClientAuth::Require,
        other @ ("RequestClientCert" | "RequireAnyClientCert") => {
            return Err((
                key("client_auth_type"),
                format!(
                    "{other} (client certificates not verified) is not supported by wbscope; \
                     use RequireAndVerifyClientCert or VerifyClientCertIfGiven"
                ),
            ));
        }
        other => {
            return Err((
                key("client_auth_type"),
                format!(
                    "unknown value {other:?} (NoClientCert, VerifyClientCertIfGiven or \
                     RequireAndVerifyClientCert)"
                ),
            ));
        }
    };
    let client_ca_file = match (client_auth, t.client_ca_file) {
        (ClientAuth::None, Some(p)) if !p.is_empty() => {
            return Err((
                key("client_ca_file"),
                "set, but client_auth_type is NoClientCert (client certificates are only \
                 verified with VerifyClientCertIfGiven or RequireAndVerifyClientCert)"
                    .into(),
            ));
        }
        (ClientAuth::None, _) => None,
        (auth, ca) => Some(path(
            "client_ca_file",
            ca,
            match auth {
                ClientAuth::Require => "client_auth_type is RequireAndVerifyClientCert",
                _ => "client_auth_type is VerifyClientCertIfGiven",
            },
        )?),
    };
    let tls13_only = match t.min_version.as_deref().unwrap_or("TLS12") {
        "" | "TLS12" => false,
        "TLS13" => true,
        other => {
            return Err((
                key("min_version"),
                format!("{other:?} is not supported (TLS12 or TLS13)"),
            ));
        }
    };
    Ok(TlsFiles {
        cert_file,
        key_file,
        client_auth,
        client_ca_file,
        tls13_only,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A bcrypt hash at the lowest cost (fast enough for a unit test).
    fn hash() -> String {
        bcrypt::hash("secret", 4).unwrap()
    }

    fn parse(text: &str) -> Result<WebFile, WebConfigError> {
        WebFile::parse(text, Path::new("/etc/wbscope/web.yml"))
    }

    #[test]
    fn empty_file_is_plain_http_without_auth() {
        assert_eq!(parse("").unwrap(), WebFile::default());
        assert_eq!(parse("# nothing\n").unwrap(), WebFile::default());
    }

    #[test]
    fn tls_paths_are_relative_to_the_file_and_users_are_read() {
        let hash = hash();
        let text = format!(
            "tls_server_config:\n  cert_file: tls.crt\n  key_file: /k/tls.key\n  \
             client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: ca.crt\n  \
             min_version: TLS13\nbasic_auth_users:\n  prometheus: '{hash}'\n"
        );
        let w = parse(&text).unwrap();
        let tls = w.tls.unwrap();
        assert_eq!(tls.cert_file, Path::new("/etc/wbscope/tls.crt"));
        assert_eq!(tls.key_file, Path::new("/k/tls.key"));
        assert_eq!(tls.client_auth, ClientAuth::Require);
        assert_eq!(
            tls.client_ca_file.as_deref(),
            Some(Path::new("/etc/wbscope/ca.crt"))
        );
        assert!(tls.tls13_only);
        assert_eq!(w.users["prometheus"], hash);
    }

    #[test]
    fn errors_name_the_key() {
        let cases = [
            (
                "tls_server_config:\n  cert_file: a\n",
                "tls_server_config.key_file",
            ),
            ("tls_server_config:\n  certfile: a\n", "certfile"),
            (
                "tls_server_config:\n  cert_file: a\n  key_file: b\n  cipher_suites: [x]\n",
                "tls_server_config.cipher_suites",
            ),
            (
                "tls_server_config:\n  cert_file: a\n  key_file: b\n  client_auth_type: RequireAnyClientCert\n",
                "tls_server_config.client_auth_type",
            ),
            (
                "tls_server_config:\n  cert_file: a\n  key_file: b\n  client_auth_type: RequireAndVerifyClientCert\n",
                "tls_server_config.client_ca_file`: required when client_auth_type is \
                 RequireAndVerifyClientCert",
            ),
            (
                "tls_server_config:\n  cert_file: a\n  key_file: b\n  client_ca_file: ca.crt\n",
                "set, but client_auth_type is NoClientCert",
            ),
            (
                "basic_auth_users:\n  alice: plaintext\n",
                "basic_auth_users.alice",
            ),
            (
                "http_server_config:\n  http2: false\n",
                "http_server_config",
            ),
            ("basic_auth_users: [\n", "web.yml"),
        ];
        for (text, needle) in cases {
            let err = parse(text).unwrap_err().to_string();
            assert!(err.contains(needle), "{text:?}: {err}");
            assert!(err.contains("/etc/wbscope/web.yml"), "{err}");
        }
    }
}
