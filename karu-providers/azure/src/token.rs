//! The documented Entra ID token exchanges for Azure Storage, as requests of the SDK's
//! credential-exchange kit ([`token`](karu_engine::sdk::token)); [`identity`](crate::identity)
//! sends them, and the kit reads their answers.
//!
//! - service principal with a client secret, and workload identity (a federated token read
//!   from a file, sent as a client assertion): `POST {authority}/{tenant}/oauth2/v2.0/token`
//!   with `grant_type=client_credentials` and `scope=https://storage.azure.com/.default`;
//! - managed identity on a virtual machine (IMDS): `GET
//!   http://169.254.169.254/metadata/identity/oauth2/token?api-version=2018-02-01&resource=…`
//!   with `Metadata: true`;
//! - managed identity on App Service and Functions: `GET
//!   {IDENTITY_ENDPOINT}?api-version=2019-08-01&resource=…` with `X-IDENTITY-HEADER`.
//!
//! Answers are JSON with `access_token` and `expires_on` (seconds since the epoch) or
//! `expires_in` (seconds from now), as numbers or strings
//! ([`parse_answer`](karu_engine::sdk::token::parse_answer)).

use std::fmt;

use karu_engine::sdk::token::TokenRequest;
use percent_encoding::{NON_ALPHANUMERIC, utf8_percent_encode};

/// The public cloud's Entra ID authority.
pub(crate) const AUTHORITY: &str = "https://login.microsoftonline.com";
/// The IMDS token endpoint.
pub(crate) const IMDS: &str = "http://169.254.169.254/metadata/identity/oauth2/token";
/// The OAuth scope of Azure Storage.
const SCOPE: &str = "https://storage.azure.com/.default";
/// The resource of Azure Storage (managed identity endpoints).
const RESOURCE: &str = "https://storage.azure.com/";
const ASSERTION_TYPE: &str = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer";

/// Where a token comes from.
#[derive(Clone, PartialEq, Eq)]
pub(crate) enum TokenSource {
    ClientSecret {
        authority: String,
        tenant: String,
        client_id: String,
        secret: String,
    },
    Workload {
        authority: String,
        tenant: String,
        client_id: String,
        token_file: String,
    },
    /// A PEM file with the certificate and its RSA key; the assertion is signed per request.
    Certificate {
        authority: String,
        tenant: String,
        client_id: String,
        cert_path: String,
    },
    Imds {
        endpoint: String,
        client_id: Option<String>,
    },
    AppService {
        endpoint: String,
        header: String,
        client_id: Option<String>,
    },
}

impl fmt::Debug for TokenSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TokenSource::ClientSecret {
                tenant, client_id, ..
            } => write!(f, "ClientSecret({tenant}, {client_id})"),
            TokenSource::Workload {
                tenant,
                client_id,
                token_file,
                ..
            } => write!(f, "Workload({tenant}, {client_id}, {token_file})"),
            TokenSource::Certificate {
                tenant,
                client_id,
                cert_path,
                ..
            } => write!(f, "Certificate({tenant}, {client_id}, {cert_path})"),
            TokenSource::Imds {
                endpoint,
                client_id,
            } => write!(f, "Imds({endpoint}, {client_id:?})"),
            TokenSource::AppService {
                endpoint,
                client_id,
                ..
            } => write!(f, "AppService({endpoint}, {client_id:?})"),
        }
    }
}

fn enc(text: &str) -> String {
    utf8_percent_encode(text, NON_ALPHANUMERIC).to_string()
}

impl TokenSource {
    /// The request; `assertion` is the client assertion (workload identity: the federated
    /// token read from the file; a certificate: the JWT it signs).
    pub(crate) fn request(&self, assertion: Option<&str>) -> TokenRequest {
        match self {
            TokenSource::ClientSecret {
                client_id, secret, ..
            } => TokenRequest::post_form(
                self.token_url().unwrap_or_default(),
                &[
                    ("grant_type", "client_credentials"),
                    ("client_id", client_id),
                    ("client_secret", secret),
                    ("scope", SCOPE),
                ],
            ),
            TokenSource::Workload { client_id, .. }
            | TokenSource::Certificate { client_id, .. } => TokenRequest::post_form(
                self.token_url().unwrap_or_default(),
                &[
                    ("grant_type", "client_credentials"),
                    ("client_id", client_id),
                    ("client_assertion_type", ASSERTION_TYPE),
                    ("client_assertion", assertion.unwrap_or_default().trim()),
                    ("scope", SCOPE),
                ],
            ),
            TokenSource::Imds {
                endpoint,
                client_id,
            } => TokenRequest::get(managed_identity_url(endpoint, "2018-02-01", client_id))
                .header("metadata", "true"),
            TokenSource::AppService {
                endpoint,
                header,
                client_id,
            } => TokenRequest::get(managed_identity_url(endpoint, "2019-08-01", client_id))
                .header("x-identity-header", header),
        }
    }

    /// The token endpoint of the Entra ID sources (the audience of a client assertion).
    pub(crate) fn token_url(&self) -> Option<String> {
        match self {
            TokenSource::ClientSecret {
                authority, tenant, ..
            }
            | TokenSource::Workload {
                authority, tenant, ..
            }
            | TokenSource::Certificate {
                authority, tenant, ..
            } => Some(format!(
                "{}/{tenant}/oauth2/v2.0/token",
                authority.trim_end_matches('/')
            )),
            TokenSource::Imds { .. } | TokenSource::AppService { .. } => None,
        }
    }

    /// What errors call this source.
    pub(crate) fn name(&self) -> &'static str {
        match self {
            TokenSource::ClientSecret { .. } => "the Entra ID client-secret token request",
            TokenSource::Workload { .. } => "the Entra ID workload-identity token request",
            TokenSource::Certificate { .. } => "the Entra ID client-certificate token request",
            TokenSource::Imds { .. } => "the managed-identity (IMDS) token request",
            TokenSource::AppService { .. } => "the managed-identity (App Service) token request",
        }
    }
}

/// A managed identity's token address: `endpoint` with the API version, Azure Storage's
/// resource and the identity's client id.
fn managed_identity_url(endpoint: &str, version: &str, client_id: &Option<String>) -> String {
    let mut url = format!(
        "{endpoint}?api-version={version}&resource={}",
        enc(RESOURCE)
    );
    if let Some(id) = client_id {
        url.push_str(&format!("&client_id={}", enc(id)));
    }
    url
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn client_secret_and_workload_requests() {
        let secret = TokenSource::ClientSecret {
            authority: "https://login.microsoftonline.com/".into(),
            tenant: "t1".into(),
            client_id: "c1".into(),
            secret: "s e+cret".into(),
        };
        let r = secret.request(None);
        assert_eq!(
            (r.method().as_str(), r.url()),
            (
                "POST",
                "https://login.microsoftonline.com/t1/oauth2/v2.0/token"
            )
        );
        assert_eq!(
            r.body(),
            Some(
                "grant_type=client_credentials&client_id=c1&client_secret=s+e%2Bcret&scope=https%3A%2F%2Fstorage.azure.com%2F.default"
            )
        );
        assert!(!format!("{secret:?}").contains("s e+cret"));
        let workload = TokenSource::Workload {
            authority: AUTHORITY.into(),
            tenant: "t1".into(),
            client_id: "c1".into(),
            token_file: "/var/run/token".into(),
        };
        let request = workload.request(Some("eyJ.a.b\n"));
        let body = request.body().unwrap();
        assert!(body.contains("client_assertion=eyJ.a.b&"), "{body}");
        assert!(body.contains(
            "client_assertion_type=urn%3Aietf%3Aparams%3Aoauth%3Aclient-assertion-type%3Ajwt-bearer"
        ));
    }

    #[test]
    fn managed_identity_requests() {
        let imds = TokenSource::Imds {
            endpoint: IMDS.into(),
            client_id: Some("uai".into()),
        };
        let r = imds.request(None);
        assert_eq!(
            r.url(),
            "http://169.254.169.254/metadata/identity/oauth2/token?api-version=2018-02-01&resource=https%3A%2F%2Fstorage%2Eazure%2Ecom%2F&client_id=uai"
        );
        assert_eq!(r.headers()["metadata"], "true");
        let app = TokenSource::AppService {
            endpoint: "http://127.0.0.1:41741/msi/token".into(),
            header: "h3ader".into(),
            client_id: None,
        };
        let r = app.request(None);
        assert!(
            r.url()
                .starts_with("http://127.0.0.1:41741/msi/token?api-version=2019-08-01&")
        );
        assert_eq!(r.headers()["x-identity-header"], "h3ader");
        assert!(!format!("{app:?}").contains("h3ader"));
    }
}
