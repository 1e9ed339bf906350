//! The HTTP(S) client `wbscope top` and `wbscope trace` read a daemon with: `http://` or
//! `https://` URLs, basic auth, and the daemon's address, scheme and certificate taken from the
//! same configuration file the daemon runs with (`--config`), so a daemon behind its own web
//! config file (TLS, basic auth) is reachable without repeating it.

mod trust;

use std::{
    net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, TcpStream, ToSocketAddrs as _},
    path::{Path, PathBuf},
    sync::Arc,
    time::Duration,
};

use base64::Engine as _;
use rustls::pki_types::ServerName;

use crate::{Config, web::WebFile};

/// Upper bound of one request (connect, send, read).
const REQUEST_TIMEOUT: Duration = Duration::from_secs(3);

/// The variable holding the basic-auth password (a flag would show it in `ps`).
pub const PASSWORD_ENV: &str = "WBSCOPE_PASSWORD";

/// How to reach a daemon: the flags `top` and `trace` share.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct ClientArgs {
    /// The daemon to read: http://host:port or https://host:port (host:port means http).
    /// Default: the `listen` address and scheme of `--config`'s daemon, else
    /// http://127.0.0.1:19617.
    #[arg(long, value_name = "URL")]
    pub url: Option<String>,
    /// PEM file of the CA (or the daemon's own self-signed certificate) to trust for https.
    /// Default: the daemon's `cert_file` from `--config`'s web config file, else the system's
    /// CA bundle.
    #[arg(long = "tls.ca-file", value_name = "PATH")]
    pub ca_file: Option<PathBuf>,
    /// Accept any certificate (for testing only: anyone on the path can read the answers).
    #[arg(long = "tls.insecure-skip-verify")]
    pub insecure: bool,
    /// Basic-auth user; the password is read from the WBSCOPE_PASSWORD environment variable
    /// or --basic-auth.password-file.
    #[arg(long = "basic-auth.username", value_name = "USER")]
    pub username: Option<String>,
    /// File whose first line is the basic-auth password.
    #[arg(long = "basic-auth.password-file", value_name = "PATH")]
    pub password_file: Option<PathBuf>,
}

/// Why a daemon cannot be reached or read.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("{0}: not a host:port, http://host:port or https://host:port address")]
    Url(String),
    #[error("{what}: {message}")]
    Setup { what: String, message: String },
    #[error("GET {url}{path}")]
    Io {
        url: String,
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("GET {url}{path} answered {status:?}")]
    Status {
        url: String,
        path: String,
        status: String,
    },
}

/// A daemon's HTTP endpoint.
#[derive(Clone)]
pub struct Endpoint {
    /// `http://host:port` as shown in messages.
    pub url: String,
    host: String,
    pub addr: SocketAddr,
    tls: Option<Arc<rustls::ClientConfig>>,
    /// `Basic …` header value.
    authorization: Option<String>,
}

impl std::fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the credentials.
        f.debug_struct("Endpoint").field("url", &self.url).finish()
    }
}

/// A URL split into what the client needs.
#[derive(Debug, PartialEq, Eq)]
struct ParsedUrl {
    https: bool,
    user: Option<(String, String)>,
    host: String,
    port: u16,
}

fn parse_url(url: &str) -> Result<ParsedUrl, ClientError> {
    let bad = || ClientError::Url(url.to_owned());
    let (https, rest) = match url.split_once("://") {
        Some(("http", rest)) => (false, rest),
        Some(("https", rest)) => (true, rest),
        Some(_) => return Err(bad()),
        None => (false, url),
    };
    let authority = rest.split('/').next().unwrap_or_default();
    let (user, hostport) = match authority.rsplit_once('@') {
        Some((info, hostport)) => {
            let (name, password) = info.split_once(':').unwrap_or((info, ""));
            (Some((name.to_owned(), password.to_owned())), hostport)
        }
        None => (None, authority),
    };
    let (host, port) = match hostport.rsplit_once(':') {
        Some((host, port)) if !port.contains(']') => {
            (host, port.parse::<u16>().map_err(|_| bad())?)
        }
        _ => (hostport, if https { 443 } else { 80 }),
    };
    let host = host.trim_start_matches('[').trim_end_matches(']');
    if host.is_empty() {
        return Err(bad());
    }
    Ok(ParsedUrl {
        https,
        user,
        host: host.to_owned(),
        port,
    })
}

/// The URL of the daemon `config` describes, and the certificate file its web config serves.
fn from_config(config: &Config) -> Result<(String, Option<PathBuf>), ClientError> {
    let web = match &config.web_config_file {
        Some(path) => Some(WebFile::read(path).map_err(|e| ClientError::Setup {
            what: "web config file".into(),
            message: format!("{e:#}"),
        })?),
        None => None,
    };
    let cert = web
        .as_ref()
        .and_then(|w| w.tls.as_ref())
        .map(|t| t.cert_file.clone());
    let mut addr = config.listen;
    // A daemon listening on every address is reached through loopback.
    if addr.ip().is_unspecified() {
        addr.set_ip(match addr.ip() {
            IpAddr::V4(_) => Ipv4Addr::LOCALHOST.into(),
            IpAddr::V6(_) => Ipv6Addr::LOCALHOST.into(),
        });
    }
    let scheme = if cert.is_some() { "https" } else { "http" };
    Ok((format!("{scheme}://{addr}"), cert))
}

fn password_from(args: &ClientArgs) -> Result<Option<String>, ClientError> {
    if let Some(path) = &args.password_file {
        let text = std::fs::read_to_string(path).map_err(|e| ClientError::Setup {
            what: format!("--basic-auth.password-file {}", path.display()),
            message: e.to_string(),
        })?;
        return Ok(Some(text.lines().next().unwrap_or_default().to_owned()));
    }
    Ok(std::env::var(PASSWORD_ENV).ok())
}

impl Endpoint {
    /// The endpoint the flags (and `config`, when `--config` was given) name.
    pub fn new(args: &ClientArgs, config: Option<&Config>) -> Result<Endpoint, ClientError> {
        // The daemon's own certificate is trusted whenever its config is given, also for an
        // explicit --url (the same daemon under another name).
        let (config_url, config_cert) = match config {
            Some(config) => {
                let (url, cert) = from_config(config)?;
                (Some(url), cert)
            }
            None => (None, None),
        };
        let url = args
            .url
            .clone()
            .or(config_url)
            .unwrap_or_else(|| format!("http://127.0.0.1:{}", crate::config::DEFAULT_PORT));
        let parsed = parse_url(&url)?;
        let addr = (parsed.host.as_str(), parsed.port)
            .to_socket_addrs()
            .map_err(|_| ClientError::Url(url.clone()))?
            .next()
            .ok_or_else(|| ClientError::Url(url.clone()))?;
        let credentials = match (&args.username, parsed.user) {
            (Some(user), _) => Some((user.clone(), password_from(args)?.unwrap_or_default())),
            (None, Some(pair)) => Some(pair),
            (None, None) => None,
        };
        if credentials.is_some() && !parsed.https {
            eprintln!("wbscope: warning: sending a basic-auth password over plain http");
        }
        let tls = if parsed.https {
            let ca = args.ca_file.clone().or(config_cert);
            Some(trust::client_config(
                ca.as_deref().map(Path::new),
                args.insecure,
            )?)
        } else {
            None
        };
        let scheme = if parsed.https { "https" } else { "http" };
        Ok(Endpoint {
            url: format!("{scheme}://{}:{}", bracket(&parsed.host), parsed.port),
            host: parsed.host,
            addr,
            tls,
            authorization: credentials.map(|(user, password)| {
                let token =
                    base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
                format!("Basic {token}")
            }),
        })
    }

    /// A plain-http endpoint at `addr` (a daemon started in this process).
    pub fn plain(addr: SocketAddr) -> Endpoint {
        Endpoint {
            url: format!("http://{addr}"),
            host: addr.ip().to_string(),
            addr,
            tls: None,
            authorization: None,
        }
    }

    /// `GET path` with HTTP/1.0 (the server closes after the response); returns the body of a
    /// `200` answer.
    pub fn get(&self, path: &str) -> Result<String, ClientError> {
        let io = |source| ClientError::Io {
            url: self.url.clone(),
            path: path.to_owned(),
            source,
        };
        let mut request = format!("GET {path} HTTP/1.0\r\nHost: {}\r\n", bracket(&self.host));
        if let Some(auth) = &self.authorization {
            request.push_str(&format!("Authorization: {auth}\r\n"));
        }
        request.push_str("\r\n");
        let tcp = TcpStream::connect_timeout(&self.addr, REQUEST_TIMEOUT).map_err(io)?;
        tcp.set_read_timeout(Some(REQUEST_TIMEOUT)).map_err(io)?;
        tcp.set_write_timeout(Some(REQUEST_TIMEOUT)).map_err(io)?;
        let raw = match &self.tls {
            None => exchange(tcp, &request).map_err(io)?,
            Some(config) => {
                let name = server_name(&self.host).map_err(io)?;
                let conn = rustls::ClientConnection::new(Arc::clone(config), name)
                    .map_err(|e| io(std::io::Error::other(e)))?;
                exchange(rustls::StreamOwned::new(conn, tcp), &request).map_err(io)?
            }
        };
        let text = String::from_utf8_lossy(&raw);
        let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
        let status = head.lines().next().unwrap_or_default();
        if status.split_whitespace().nth(1) != Some("200") {
            return Err(ClientError::Status {
                url: self.url.clone(),
                path: path.to_owned(),
                status: status.to_owned(),
            });
        }
        Ok(body.to_owned())
    }
}

fn bracket(host: &str) -> String {
    if host.contains(':') {
        format!("[{host}]")
    } else {
        host.to_owned()
    }
}

fn server_name(host: &str) -> std::io::Result<ServerName<'static>> {
    ServerName::try_from(host.to_owned())
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))
}

/// Sends `request` and reads the whole answer.
fn exchange(
    mut stream: impl std::io::Read + std::io::Write,
    request: &str,
) -> std::io::Result<Vec<u8>> {
    stream.write_all(request.as_bytes())?;
    stream.flush()?;
    let mut raw = Vec::new();
    match stream.read_to_end(&mut raw) {
        Ok(_) => Ok(raw),
        // A TLS peer that closes without close_notify: the answer is complete all the same.
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof && !raw.is_empty() => Ok(raw),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_with_schemes_users_and_ports() {
        assert_eq!(
            parse_url("https://prom:s3cret@host.example:9443/").unwrap(),
            ParsedUrl {
                https: true,
                user: Some(("prom".into(), "s3cret".into())),
                host: "host.example".into(),
                port: 9443,
            }
        );
        let plain = parse_url("127.0.0.1:19617").unwrap();
        assert!(!plain.https);
        assert_eq!((plain.host.as_str(), plain.port), ("127.0.0.1", 19617));
        assert_eq!(parse_url("http://[::1]:5").unwrap().host, "::1");
        assert_eq!(parse_url("https://h").unwrap().port, 443);
        assert!(parse_url("ftp://h:1").is_err());
        assert!(parse_url("http://").is_err());
        assert!(parse_url("http://h:port").is_err());
    }

    #[test]
    fn the_config_names_the_daemon_and_its_scheme() {
        let config = Config {
            listen: "0.0.0.0:19700".parse().unwrap(),
            ..Config::default()
        };
        let endpoint = Endpoint::new(&ClientArgs::default(), Some(&config)).unwrap();
        assert_eq!(endpoint.url, "http://127.0.0.1:19700");
        let endpoint = Endpoint::new(&ClientArgs::default(), None).unwrap();
        assert_eq!(endpoint.url, "http://127.0.0.1:19617");
    }

    #[test]
    fn credentials_never_show_in_debug_output() {
        let args = ClientArgs {
            url: Some("http://u:pw@127.0.0.1:1".into()),
            ..ClientArgs::default()
        };
        let endpoint = Endpoint::new(&args, None).unwrap();
        assert_eq!(endpoint.authorization.as_deref(), Some("Basic dTpwdw=="));
        assert!(!format!("{endpoint:?}").contains("dTpwdw"));
    }
}
