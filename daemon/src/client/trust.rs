//! Which server certificates the client accepts: those in a CA file (a CA, or the daemon's own
//! self-signed certificate, which webpki alone cannot take as a trust anchor), the system's CA
//! bundle by default, or any with `--tls.insecure-skip-verify`.

use std::{path::Path, sync::Arc};

use rustls::{
    DigitallySignedStruct, RootCertStore, SignatureScheme,
    client::{
        WebPkiServerVerifier,
        danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier},
    },
    crypto::CryptoProvider,
    pki_types::{CertificateDer, ServerName, UnixTime},
};

use super::ClientError;

/// Debian's and most distributions' bundle of trusted CAs.
const SYSTEM_BUNDLE: &str = "/etc/ssl/certs/ca-certificates.crt";

fn setup(what: &str, message: impl ToString) -> ClientError {
    ClientError::Setup {
        what: what.to_owned(),
        message: message.to_string(),
    }
}

/// The TLS client configuration for `ca_file` (else the system bundle), or trusting anything.
pub fn client_config(
    ca_file: Option<&Path>,
    insecure: bool,
) -> Result<Arc<rustls::ClientConfig>, ClientError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let verifier: Arc<dyn ServerCertVerifier> = if insecure {
        Arc::new(Verifier {
            pinned: Vec::new(),
            webpki: None,
            insecure: true,
            provider: Arc::clone(&provider),
        })
    } else {
        let (what, path) = match ca_file {
            Some(p) => (format!("--tls.ca-file {}", p.display()), p),
            None => (
                format!("CA bundle {SYSTEM_BUNDLE}"),
                Path::new(SYSTEM_BUNDLE),
            ),
        };
        let certs = crate::web::tls::pem_certificates(path).map_err(|e| setup(&what, e))?;
        let mut roots = RootCertStore::empty();
        // Certificates that are not valid CAs stay usable as pinned leaves.
        let (_added, _ignored) = roots.add_parsable_certificates(certs.iter().cloned());
        let webpki = if roots.is_empty() {
            None
        } else {
            Some(
                WebPkiServerVerifier::builder_with_provider(Arc::new(roots), Arc::clone(&provider))
                    .build()
                    .map_err(|e| setup(&what, e))?,
            )
        };
        Arc::new(Verifier {
            pinned: certs,
            webpki,
            insecure: false,
            provider: Arc::clone(&provider),
        })
    };
    let mut config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| setup("TLS", e))?
        .dangerous()
        .with_custom_certificate_verifier(verifier)
        .with_no_client_auth();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// Accepts a certificate listed in the CA file as is (pinned), else one the CA file's CAs
/// issued for the server's name.
#[derive(Debug)]
struct Verifier {
    pinned: Vec<CertificateDer<'static>>,
    webpki: Option<Arc<WebPkiServerVerifier>>,
    insecure: bool,
    provider: Arc<CryptoProvider>,
}

impl ServerCertVerifier for Verifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        if self.insecure
            || self
                .pinned
                .iter()
                .any(|c| c.as_ref() == end_entity.as_ref())
        {
            return Ok(ServerCertVerified::assertion());
        }
        match &self.webpki {
            Some(webpki) => webpki.verify_server_cert(
                end_entity,
                intermediates,
                server_name,
                ocsp_response,
                now,
            ),
            None => Err(rustls::Error::General(
                "the certificate is not in the CA file".into(),
            )),
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
