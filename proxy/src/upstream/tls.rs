//! The TLS client config of the upstream side: the system roots (loaded only when a replica is
//! `https://`) plus `--upstream-ca`, on the crypto provider every TLS config here uses.

use super::error::UpstreamError;
use std::sync::Arc;

/// The crypto provider every TLS config here uses ([`tokentap_core::tls::provider`]).
pub fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    tokentap_core::tls::provider()
}

/// The rustls client config for the replicas (ALPN is left to the connector).
pub fn client_config(
    extra_ca: Option<std::path::PathBuf>,
    native_roots: bool,
) -> Result<rustls::ClientConfig, UpstreamError> {
    use tokentap_core::tls::{client_config, TlsError, Trust};
    let trust = Trust {
        native_roots,
        extra_ca,
        insecure: false,
    };
    // ALPN is set by the connector builder (`enable_all_versions`).
    client_config(&trust, &[]).map_err(|e| match e {
        TlsError::Ca { path, why } => UpstreamError::Ca { path, why },
        TlsError::Setup(why) => UpstreamError::Tls(why),
    })
}

/// Reads every certificate of a PEM file ([`tokentap_core::tls::read_certs`]).
pub use tokentap_core::tls::read_certs;
