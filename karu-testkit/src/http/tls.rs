//! The test PKI of an HTTPS mock server: a generated CA and a server certificate it signed.

use std::io;
use std::sync::Arc;

use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair, KeyUsagePurpose,
};
use rustls::pki_types::{PrivateKeyDer, PrivatePkcs8KeyDer};
use tokio_rustls::TlsAcceptor;

/// What an HTTPS server needs: the acceptor, and the CA for clients.
pub(crate) struct Tls {
    pub(crate) acceptor: TlsAcceptor,
    pub(crate) ca_pem: String,
}

fn other(e: impl std::error::Error + Send + Sync + 'static) -> io::Error {
    io::Error::other(e)
}

/// A generated CA and a server certificate for `127.0.0.1` and `localhost` it signed.
pub(crate) struct Pki {
    pub(crate) ca_pem: String,
    pub(crate) cert: rcgen::Certificate,
    pub(crate) key: KeyPair,
}

/// Generates a CA and a server certificate it signed, for `127.0.0.1` and `localhost`.
pub(crate) fn pki() -> io::Result<Pki> {
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).map_err(other)?;
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(DnType::CommonName, "karu-testkit mock CA");
    ca_params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    let ca = CertifiedIssuer::self_signed(ca_params, KeyPair::generate().map_err(other)?)
        .map_err(other)?;

    let mut leaf = CertificateParams::new(vec!["127.0.0.1".to_owned(), "localhost".to_owned()])
        .map_err(other)?;
    leaf.distinguished_name
        .push(DnType::CommonName, "karu-testkit mock server");
    leaf.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    leaf.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    leaf.use_authority_key_identifier_extension = true;
    let key = KeyPair::generate().map_err(other)?;
    let cert = leaf.signed_by(&key, &ca).map_err(other)?;
    Ok(Pki {
        ca_pem: ca.pem(),
        cert,
        key,
    })
}

/// Generates a [`Pki`] and the rustls server config for it (aws-lc-rs provider; ALPN `h2`
/// too when `http2`).
pub(crate) fn generate(http2: bool) -> io::Result<Tls> {
    let Pki { ca_pem, cert, key } = pki()?;
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der()));
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(other)?
        .with_no_client_auth()
        .with_single_cert(vec![cert.der().clone()], key)
        .map_err(other)?;
    config.alpn_protocols = if http2 {
        vec![b"h2".to_vec(), b"http/1.1".to_vec()]
    } else {
        vec![b"http/1.1".to_vec()]
    };
    Ok(Tls {
        acceptor: TlsAcceptor::from(Arc::new(config)),
        ca_pem,
    })
}
