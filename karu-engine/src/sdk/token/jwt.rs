//! RS256 JSON Web Tokens: what a service account (GCS) or a service principal's certificate
//! (Azure) signs to prove who it is. The key is an RSA private key in PEM (PKCS #8, or
//! PKCS #1); the signature is RSASSA-PKCS1-v1_5 with SHA-256 on the cryptography rustls uses
//! (aws-lc-rs).

use std::fmt;
use std::sync::Arc;

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use rustls::SignatureScheme;
use rustls::pki_types::PrivateKeyDer;
use rustls::pki_types::pem::PemObject;
use rustls::sign::Signer;

/// Why a JWT cannot be signed. Messages never hold key material.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum JwtError {
    /// The PEM holds no private key.
    #[error("the PEM holds no private key")]
    NoKey,
    /// The key is not an RSA key (RS256 needs one), or not one the cryptography supports.
    #[error("the private key is not an RSA key (RS256 needs one)")]
    NotRsa,
    /// The signature failed.
    #[error("signing the token failed")]
    Sign,
}

/// An RSA private key that signs RS256 JWTs. Its `Debug` shows nothing of the key.
///
/// ```no_run
/// use karu_engine::sdk::token::Rs256Key;
///
/// let pem = std::fs::read("service-account-key.pem")?;
/// let key = Rs256Key::from_pem(&pem)?;
/// let jwt = key.sign(
///     serde_json::json!({"kid": "k1"}),
///     &serde_json::json!({"iss": "me", "exp": 1}),
/// )?;
/// assert_eq!(jwt.split('.').count(), 3);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct Rs256Key {
    signer: Box<dyn Signer>,
}

impl Rs256Key {
    /// The first private key in `pem`.
    pub fn from_pem(pem: &[u8]) -> Result<Self, JwtError> {
        let key = PrivateKeyDer::from_pem_slice(pem).map_err(|_| JwtError::NoKey)?;
        let signing: Arc<dyn rustls::sign::SigningKey> =
            rustls::crypto::aws_lc_rs::sign::any_supported_type(&key)
                .map_err(|_| JwtError::NotRsa)?;
        let signer = signing
            .choose_scheme(&[SignatureScheme::RSA_PKCS1_SHA256])
            .ok_or(JwtError::NotRsa)?;
        Ok(Rs256Key { signer })
    }

    /// The JWT of `claims` with a header of `{"alg":"RS256","typ":"JWT"}` plus `header`'s
    /// fields (a key id, a certificate thumbprint): `base64url(header).base64url(claims).
    /// base64url(signature)`.
    pub fn sign(
        &self,
        header: serde_json::Value,
        claims: &serde_json::Value,
    ) -> Result<String, JwtError> {
        let mut head = serde_json::Map::new();
        head.insert("alg".into(), "RS256".into());
        head.insert("typ".into(), "JWT".into());
        if let serde_json::Value::Object(extra) = header {
            head.extend(extra);
        }
        let signing_input = format!(
            "{}.{}",
            URL_SAFE_NO_PAD.encode(serde_json::Value::Object(head).to_string()),
            URL_SAFE_NO_PAD.encode(claims.to_string())
        );
        let signature = self
            .signer
            .sign(signing_input.as_bytes())
            .map_err(|_| JwtError::Sign)?;
        Ok(format!(
            "{signing_input}.{}",
            URL_SAFE_NO_PAD.encode(signature)
        ))
    }
}

impl fmt::Debug for Rs256Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Rs256Key").finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fresh RSA 2048 key, PKCS #8 in PEM.
    pub(crate) fn rsa_key_pem() -> String {
        use aws_lc_rs::encoding::AsDer;
        let key = aws_lc_rs::rsa::KeyPair::generate(aws_lc_rs::rsa::KeySize::Rsa2048).unwrap();
        let der: aws_lc_rs::encoding::Pkcs8V1Der<'_> = key.as_der().unwrap();
        let b64 = base64::engine::general_purpose::STANDARD.encode(der.as_ref());
        let mut pem = String::from("-----BEGIN PRIVATE KEY-----\n");
        for line in b64.as_bytes().chunks(64) {
            pem.push_str(std::str::from_utf8(line).unwrap());
            pem.push('\n');
        }
        pem + "-----END PRIVATE KEY-----\n"
    }

    #[test]
    fn a_signed_token_has_the_header_and_claims() {
        let key = Rs256Key::from_pem(rsa_key_pem().as_bytes()).unwrap();
        let jwt = key
            .sign(
                serde_json::json!({"kid": "k1"}),
                &serde_json::json!({"iss": "a@b", "exp": 3600}),
            )
            .unwrap();
        let parts: Vec<&str> = jwt.split('.').collect();
        assert_eq!(parts.len(), 3);
        let decode = |p: &str| -> serde_json::Value {
            serde_json::from_slice(&URL_SAFE_NO_PAD.decode(p).unwrap()).unwrap()
        };
        assert_eq!(
            decode(parts[0]),
            serde_json::json!({"alg": "RS256", "typ": "JWT", "kid": "k1"})
        );
        assert_eq!(
            decode(parts[1]),
            serde_json::json!({"iss": "a@b", "exp": 3600})
        );
        // RSA 2048: a 256-byte signature.
        assert_eq!(URL_SAFE_NO_PAD.decode(parts[2]).unwrap().len(), 256);
        assert!(!format!("{key:?}").contains("PRIVATE"));
    }

    #[test]
    fn keys_that_cannot_sign_rs256_are_refused() {
        assert_eq!(
            Rs256Key::from_pem(b"not a key").unwrap_err(),
            JwtError::NoKey
        );
        // An EC key (P-256) signs, but not RS256.
        let ec = aws_lc_rs::signature::EcdsaKeyPair::generate_pkcs8(
            &aws_lc_rs::signature::ECDSA_P256_SHA256_ASN1_SIGNING,
            &aws_lc_rs::rand::SystemRandom::new(),
        )
        .unwrap();
        let b64 = base64::engine::general_purpose::STANDARD.encode(ec.as_ref());
        let pem = format!("-----BEGIN PRIVATE KEY-----\n{b64}\n-----END PRIVATE KEY-----\n");
        assert_eq!(
            Rs256Key::from_pem(pem.as_bytes()).unwrap_err(),
            JwtError::NotRsa
        );
    }
}
