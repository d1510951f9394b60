//! TLS client settings shared by the replay client and the proxy's upstream side: one crypto
//! provider (ring: builds without cmake), root certificates from the system plus an optional
//! PEM file, and an explicit opt-out of certificate verification for test rigs.

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, SignatureScheme};
use std::path::Path;
use std::sync::Arc;

/// The crypto provider every TLS config of tokentap uses.
pub fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// Reads every certificate of a PEM file.
pub fn read_certs(p: &Path) -> Result<Vec<CertificateDer<'static>>, String> {
    use rustls::pki_types::pem::PemObject;
    let certs: Vec<_> = CertificateDer::pem_file_iter(p)
        .map_err(|e| e.to_string())?
        .collect::<Result<_, _>>()
        .map_err(|e| e.to_string())?;
    if certs.is_empty() {
        return Err("no certificate in the file".into());
    }
    Ok(certs)
}

/// What to do about a failed TLS handshake, from its error's text ("" when there is nothing
/// to add): the server's certificate not trusted, or a CA certificate presented as the
/// server's own (what `openssl req -x509` makes by default), which is refused even when it is
/// the very file given as `--ca`.
pub fn handshake_hint(error: &str) -> &'static str {
    if error.contains("CaUsedAsEndEntity") {
        " (the server presents a CA certificate — basicConstraints CA:TRUE, the default of \
         `openssl req -x509` — as its own: rustls refuses that even when it is the --ca file. \
         Give the server a leaf certificate: add `-addext basicConstraints=critical,CA:FALSE \
         -addext subjectAltName=DNS:<host>` to that openssl command, or sign a leaf with your CA \
         and pass the CA as --ca; --insecure skips the check and is reported)"
    } else if error.contains("certificate") {
        " (pass --ca FILE with the CA that signed the server's certificate; --insecure skips the \
         check and is reported)"
    } else {
        ""
    }
}

/// How a client checks the servers it talks to.
#[derive(Debug, Clone, Default)]
pub struct Trust {
    /// Load the system's root certificates.
    pub native_roots: bool,
    /// More trusted roots (PEM), e.g. a private CA.
    pub extra_ca: Option<std::path::PathBuf>,
    /// Accept any certificate (handshake signatures are still checked). For test rigs only:
    /// whoever reports the run must say so.
    pub insecure: bool,
}

/// Why a client TLS config could not be built.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// The CA file could not be read as PEM certificates.
    #[error("{path}: {why} (expected PEM certificates)")]
    Ca {
        /// The file.
        path: String,
        /// Why.
        why: String,
    },
    /// rustls refused the setup.
    #[error("TLS setup: {0}")]
    Setup(String),
}

/// A rustls client config for `trust`, offering `alpn` (e.g. `[b"h2", b"http/1.1"]`).
pub fn client_config(trust: &Trust, alpn: &[&[u8]]) -> Result<rustls::ClientConfig, TlsError> {
    let builder = rustls::ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| TlsError::Setup(e.to_string()))?;
    let mut c = if trust.insecure {
        builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(AnyCertificate(provider())))
            .with_no_client_auth()
    } else {
        let mut roots = rustls::RootCertStore::empty();
        if trust.native_roots {
            let loaded = rustls_native_certs::load_native_certs();
            for c in loaded.certs {
                let _ = roots.add(c);
            }
        }
        if let Some(p) = &trust.extra_ca {
            let ca = |why: String| TlsError::Ca {
                path: p.display().to_string(),
                why,
            };
            for c in read_certs(p).map_err(ca)? {
                roots.add(c).map_err(|e| ca(e.to_string()))?;
            }
        }
        builder.with_root_certificates(roots).with_no_client_auth()
    };
    c.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    Ok(c)
}

/// `--insecure`: any certificate chain is accepted; the handshake's signatures are still
/// verified with the provider's algorithms (so the peer holds the key of the certificate it
/// showed, whatever that certificate is).
#[derive(Debug)]
struct AnyCertificate(Arc<rustls::crypto::CryptoProvider>);

impl ServerCertVerifier for AnyCertificate {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
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
            &self.0.signature_verification_algorithms,
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
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}
