//! TLS with rustls (ring provider): the server config from the web config file's PEM files
//! (the handshake runs in each connection's task, see [`super::listener`]), and the client the
//! pre-READY self-check uses.

use std::{net::SocketAddr, path::Path, sync::Arc};

use rustls::{
    DigitallySignedStruct, RootCertStore, ServerConfig, SignatureScheme,
    client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier},
    crypto::CryptoProvider,
    pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime, pem::PemObject as _},
    server::WebPkiClientVerifier,
};
use tokio::net::TcpStream;
use tokio_rustls::{TlsAcceptor, TlsConnector};

use super::config::{ClientAuth, TlsFiles};

/// The TLS side of the server, built once at start.
#[derive(Clone)]
pub struct Tls {
    pub acceptor: TlsAcceptor,
    /// Our certificate, which the self-check pins.
    leaf: CertificateDer<'static>,
    pub client_auth: ClientAuth,
    provider: Arc<CryptoProvider>,
}

/// Reading or using a TLS file failed: (key, message) for [`super::WebConfigError::Invalid`].
pub type TlsError = (&'static str, String);

fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

fn certs(key: &'static str, path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    pem_certificates(path).map_err(|message| (key, message))
}

/// The certificates of a PEM file (read with [`crate::files::PEM_LIMIT`]), at least one; the
/// error names the file. Shared by the server's files and the client's CA file.
pub fn pem_certificates(path: &Path) -> Result<Vec<CertificateDer<'static>>, String> {
    let pem =
        crate::files::read_bounded(path, crate::files::PEM_LIMIT).map_err(|e| e.to_string())?;
    let certs = CertificateDer::pem_slice_iter(&pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("{}: {e}", path.display()))?;
    if certs.is_empty() {
        return Err(format!(
            "{}: no PEM certificate in the file",
            path.display()
        ));
    }
    Ok(certs)
}

/// The bytes of a PEM file, read with [`crate::files::PEM_LIMIT`].
fn read_pem(key: &'static str, path: &Path) -> Result<Vec<u8>, TlsError> {
    crate::files::read_bounded(path, crate::files::PEM_LIMIT).map_err(|e| (key, e.to_string()))
}

impl Tls {
    /// Reads the PEM files and builds the server config (HTTP/1.1 over TLS 1.2 and 1.3, or
    /// 1.3 only).
    pub fn load(files: &TlsFiles) -> Result<Tls, TlsError> {
        let chain = certs("tls_server_config.cert_file", &files.cert_file)?;
        let key_pem = read_pem("tls_server_config.key_file", &files.key_file)?;
        let key = PrivateKeyDer::from_pem_slice(&key_pem).map_err(|e| {
            (
                "tls_server_config.key_file",
                format!("{}: {e}", files.key_file.display()),
            )
        })?;
        let provider = provider();
        let versions: &[&rustls::SupportedProtocolVersion] = if files.tls13_only {
            &[&rustls::version::TLS13]
        } else {
            rustls::DEFAULT_VERSIONS
        };
        let builder = ServerConfig::builder_with_provider(Arc::clone(&provider))
            .with_protocol_versions(versions)
            .map_err(|e| ("tls_server_config.min_version", e.to_string()))?;
        let builder = match (&files.client_auth, &files.client_ca_file) {
            (ClientAuth::None, _) | (_, None) => builder.with_no_client_auth(),
            (auth, Some(ca)) => {
                let key = "tls_server_config.client_ca_file";
                let mut roots = RootCertStore::empty();
                for cert in certs(key, ca)? {
                    roots
                        .add(cert)
                        .map_err(|e| (key, format!("{}: {e}", ca.display())))?;
                }
                let verifier = WebPkiClientVerifier::builder_with_provider(
                    Arc::new(roots),
                    Arc::clone(&provider),
                );
                let verifier = if *auth == ClientAuth::VerifyIfGiven {
                    verifier.allow_unauthenticated()
                } else {
                    verifier
                };
                let verifier = verifier
                    .build()
                    .map_err(|e| (key, format!("{}: {e}", ca.display())))?;
                builder.with_client_cert_verifier(verifier)
            }
        };
        let leaf = chain[0].clone();
        let mut config = builder.with_single_cert(chain, key).map_err(|e| {
            (
                "tls_server_config.key_file",
                format!(
                    "{} with {}: {e}",
                    files.key_file.display(),
                    files.cert_file.display()
                ),
            )
        })?;
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(Tls {
            acceptor: TlsAcceptor::from(Arc::new(config)),
            leaf,
            client_auth: files.client_auth,
            provider,
        })
    }

    /// A client for our own listener: it trusts exactly our certificate (whatever names it
    /// carries, since it connects by address) and sends no client certificate.
    pub fn self_check_connector(&self) -> Result<TlsConnector, rustls::Error> {
        let verifier = Pinned {
            leaf: self.leaf.clone(),
            provider: Arc::clone(&self.provider),
        };
        let config = rustls::ClientConfig::builder_with_provider(Arc::clone(&self.provider))
            .with_safe_default_protocol_versions()?
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(verifier))
            .with_no_client_auth();
        Ok(TlsConnector::from(Arc::new(config)))
    }
}

/// Connects to `addr` with `connector`.
pub async fn connect(
    connector: &TlsConnector,
    addr: SocketAddr,
) -> std::io::Result<tokio_rustls::client::TlsStream<TcpStream>> {
    let tcp = TcpStream::connect(addr).await?;
    connector.connect(ServerName::from(addr.ip()), tcp).await
}

/// Accepts exactly one certificate: the server's own.
#[derive(Debug)]
struct Pinned {
    leaf: CertificateDer<'static>,
    provider: Arc<CryptoProvider>,
}

impl ServerCertVerifier for Pinned {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        if end_entity.as_ref() == self.leaf.as_ref() {
            Ok(ServerCertVerified::assertion())
        } else {
            Err(rustls::Error::General(
                "not the certificate of this wbscope".into(),
            ))
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}
