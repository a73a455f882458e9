//! The client assertion of a service principal's certificate: a JWT signed with RS256 by the
//! certificate's private key, as the Microsoft identity platform documents it ("certificate
//! credentials"): header `{"alg":"RS256","typ":"JWT","x5t#S256":…}` (the base64url SHA-256
//! thumbprint of the certificate), claims `aud` (the token endpoint), `iss` and `sub` (the
//! client id), `jti`, `nbf`, `iat` and `exp` (ten minutes later). Pure: the time and the
//! `jti` are parameters.

use std::time::{SystemTime, UNIX_EPOCH};

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use karu_engine::sdk::token::{JwtError, Rs256Key};
use rustls_pki_types::CertificateDer;
use rustls_pki_types::pem::PemObject;
use sha2::{Digest, Sha256};

/// How long an assertion is valid.
const LIFETIME_SECS: u64 = 600;

/// Build the assertion from a PEM holding the certificate and its RSA private key.
pub(crate) fn build(
    pem: &[u8],
    audience: &str,
    client_id: &str,
    now: SystemTime,
    jti: &str,
) -> Result<String, &'static str> {
    let cert = CertificateDer::pem_slice_iter(pem)
        .next()
        .ok_or("the PEM file holds no certificate")?
        .map_err(|_| "the PEM file's certificate does not parse")?;
    let key = Rs256Key::from_pem(pem).map_err(|e| match e {
        JwtError::NoKey => "the PEM file holds no private key",
        _ => "the private key is not an RSA key (RS256 needs one)",
    })?;
    let thumbprint = URL_SAFE_NO_PAD.encode(Sha256::digest(cert.as_ref()));
    let at = now.duration_since(UNIX_EPOCH).unwrap_or_default().as_secs();
    let claims = serde_json::json!({
        "aud": audience,
        "iss": client_id,
        "sub": client_id,
        "jti": jti,
        "nbf": at,
        "iat": at,
        "exp": at + LIFETIME_SECS,
    });
    key.sign(serde_json::json!({ "x5t#S256": thumbprint }), &claims)
        .map_err(|_| "signing the assertion failed")
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn pem() -> (String, Vec<u8>) {
        let key = rcgen::KeyPair::generate_for(&rcgen::PKCS_RSA_SHA256).unwrap();
        let cert = rcgen::CertificateParams::new(vec!["client".into()])
            .unwrap()
            .self_signed(&key)
            .unwrap();
        (
            format!("{}{}", cert.pem(), key.serialize_pem()),
            cert.der().to_vec(),
        )
    }

    #[test]
    fn a_signed_assertion_with_the_documented_header_and_claims() {
        let (pem, der) = pem();
        let now = UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        let jwt = build(
            pem.as_bytes(),
            "https://a/t/oauth2/v2.0/token",
            "c1",
            now,
            "j1",
        )
        .unwrap();
        let parts: Vec<&str> = jwt.split('.').collect();
        assert_eq!(parts.len(), 3);
        let decode = |p: &str| -> serde_json::Value {
            serde_json::from_slice(&URL_SAFE_NO_PAD.decode(p).unwrap()).unwrap()
        };
        let header = decode(parts[0]);
        assert_eq!(header["alg"], "RS256");
        assert_eq!(
            header["x5t#S256"],
            URL_SAFE_NO_PAD.encode(Sha256::digest(&der))
        );
        let claims = decode(parts[1]);
        assert_eq!(claims["aud"], "https://a/t/oauth2/v2.0/token");
        assert_eq!(
            (&claims["iss"], &claims["sub"]),
            (&"c1".into(), &"c1".into())
        );
        assert_eq!(claims["exp"], 1_700_000_600u64);
        // The signature verifies with the certificate's public key.
        let cert = CertificateDer::from(der);
        let ee = webpki::EndEntityCert::try_from(&cert).unwrap();
        let signature = URL_SAFE_NO_PAD.decode(parts[2]).unwrap();
        ee.verify_signature(
            webpki::aws_lc_rs::RSA_PKCS1_2048_8192_SHA256,
            format!("{}.{}", parts[0], parts[1]).as_bytes(),
            &signature,
        )
        .unwrap();
    }

    #[test]
    fn pem_files_without_a_usable_key_are_refused() {
        let (pem, _) = pem();
        let cert_only: String = pem
            .split("-----BEGIN PRIVATE KEY-----")
            .next()
            .unwrap()
            .into();
        assert!(build(cert_only.as_bytes(), "a", "c", UNIX_EPOCH, "j").is_err());
        assert!(build(b"nothing", "a", "c", UNIX_EPOCH, "j").is_err());
        let ec = rcgen::generate_simple_self_signed(vec!["x".into()]).unwrap();
        let ec_pem = format!("{}{}", ec.cert.pem(), ec.signing_key.serialize_pem());
        assert_eq!(
            build(ec_pem.as_bytes(), "a", "c", UNIX_EPOCH, "j"),
            Err("the private key is not an RSA key (RS256 needs one)")
        );
    }
}
