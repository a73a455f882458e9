//! The documented Entra ID token exchanges for Azure Storage, as plain requests and a parser of
//! their answers; [`identity`](crate::identity) sends them.
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
//! `expires_in` (seconds from now), as numbers or strings.

use std::fmt;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use karu_engine::sdk::system_time_after;
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

/// One token request.
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct TokenRequest {
    pub(crate) method: &'static str,
    pub(crate) url: String,
    pub(crate) headers: Vec<(&'static str, String)>,
    /// A form body (`application/x-www-form-urlencoded`), for `POST`.
    pub(crate) body: Option<String>,
}

fn enc(text: &str) -> String {
    utf8_percent_encode(text, NON_ALPHANUMERIC).to_string()
}

fn form(pairs: &[(&str, &str)]) -> String {
    pairs
        .iter()
        .map(|(k, v)| format!("{k}={}", enc(v)))
        .collect::<Vec<_>>()
        .join("&")
}

impl TokenSource {
    /// The request; `assertion` is the federated token read from the file (workload identity).
    pub(crate) fn request(&self, assertion: Option<&str>) -> TokenRequest {
        match self {
            TokenSource::ClientSecret {
                authority,
                tenant,
                client_id,
                secret,
            } => TokenRequest {
                method: "POST",
                url: format!(
                    "{}/{tenant}/oauth2/v2.0/token",
                    authority.trim_end_matches('/')
                ),
                headers: vec![("content-type", "application/x-www-form-urlencoded".into())],
                body: Some(form(&[
                    ("grant_type", "client_credentials"),
                    ("client_id", client_id),
                    ("client_secret", secret),
                    ("scope", SCOPE),
                ])),
            },
            TokenSource::Workload {
                authority,
                tenant,
                client_id,
                ..
            }
            | TokenSource::Certificate {
                authority,
                tenant,
                client_id,
                ..
            } => TokenRequest {
                method: "POST",
                url: format!(
                    "{}/{tenant}/oauth2/v2.0/token",
                    authority.trim_end_matches('/')
                ),
                headers: vec![("content-type", "application/x-www-form-urlencoded".into())],
                body: Some(form(&[
                    ("grant_type", "client_credentials"),
                    ("client_id", client_id),
                    ("client_assertion_type", ASSERTION_TYPE),
                    ("client_assertion", assertion.unwrap_or_default().trim()),
                    ("scope", SCOPE),
                ])),
            },
            TokenSource::Imds {
                endpoint,
                client_id,
            } => {
                let mut url = format!(
                    "{endpoint}?api-version=2018-02-01&resource={}",
                    enc(RESOURCE)
                );
                if let Some(id) = client_id {
                    url.push_str(&format!("&client_id={}", enc(id)));
                }
                TokenRequest {
                    method: "GET",
                    url,
                    headers: vec![("metadata", "true".into())],
                    body: None,
                }
            }
            TokenSource::AppService {
                endpoint,
                header,
                client_id,
            } => {
                let mut url = format!(
                    "{endpoint}?api-version=2019-08-01&resource={}",
                    enc(RESOURCE)
                );
                if let Some(id) = client_id {
                    url.push_str(&format!("&client_id={}", enc(id)));
                }
                TokenRequest {
                    method: "GET",
                    url,
                    headers: vec![("x-identity-header", header.clone())],
                    body: None,
                }
            }
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

/// A token and when it expires, from a token endpoint's JSON answer at `now`.
pub(crate) fn parse(body: &[u8], now: SystemTime) -> Result<(String, SystemTime), &'static str> {
    let value: serde_json::Value =
        serde_json::from_slice(body).map_err(|_| "the answer is not JSON")?;
    let token = value
        .get("access_token")
        .and_then(|t| t.as_str())
        .filter(|t| !t.is_empty())
        .ok_or("the answer has no access_token")?;
    let number = |name: &str| {
        let v = value.get(name)?;
        v.as_u64().or_else(|| v.as_str()?.trim().parse().ok())
    };
    let expires = match (number("expires_on"), number("expires_in")) {
        (Some(on), _) => system_time_after(UNIX_EPOCH, Duration::from_secs(on)),
        (None, Some(secs)) => system_time_after(now, Duration::from_secs(secs)),
        (None, None) => return Err("the answer has neither expires_on nor expires_in"),
    };
    Ok((token.to_string(), expires))
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
            (r.method, r.url.as_str()),
            (
                "POST",
                "https://login.microsoftonline.com/t1/oauth2/v2.0/token"
            )
        );
        assert_eq!(
            r.body.as_deref(),
            Some(
                "grant_type=client%5Fcredentials&client_id=c1&client_secret=s%20e%2Bcret&scope=https%3A%2F%2Fstorage%2Eazure%2Ecom%2F%2Edefault"
            )
        );
        assert!(!format!("{secret:?}").contains("s e+cret"));
        let workload = TokenSource::Workload {
            authority: AUTHORITY.into(),
            tenant: "t1".into(),
            client_id: "c1".into(),
            token_file: "/var/run/token".into(),
        };
        let body = workload.request(Some("eyJ.a.b\n")).body.unwrap();
        assert!(body.contains("client_assertion=eyJ%2Ea%2Eb&"), "{body}");
        assert!(body.contains(
            "client_assertion_type=urn%3Aietf%3Aparams%3Aoauth%3Aclient%2Dassertion%2Dtype%3Ajwt%2Dbearer"
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
            r.url,
            "http://169.254.169.254/metadata/identity/oauth2/token?api-version=2018-02-01&resource=https%3A%2F%2Fstorage%2Eazure%2Ecom%2F&client_id=uai"
        );
        assert_eq!(r.headers, [("metadata", "true".to_string())]);
        let app = TokenSource::AppService {
            endpoint: "http://127.0.0.1:41741/msi/token".into(),
            header: "h3ader".into(),
            client_id: None,
        };
        let r = app.request(None);
        assert!(
            r.url
                .starts_with("http://127.0.0.1:41741/msi/token?api-version=2019-08-01&")
        );
        assert_eq!(r.headers, [("x-identity-header", "h3ader".to_string())]);
        assert!(!format!("{app:?}").contains("h3ader"));
    }

    #[test]
    fn answers() {
        let now = UNIX_EPOCH + Duration::from_secs(1_000);
        assert_eq!(
            parse(
                br#"{"access_token":"t","expires_in":3599,"token_type":"Bearer"}"#,
                now
            ),
            Ok(("t".into(), now + Duration::from_secs(3599)))
        );
        assert_eq!(
            parse(
                br#"{"access_token":"t","expires_in":"60","expires_on":"5000"}"#,
                now
            ),
            Ok(("t".into(), UNIX_EPOCH + Duration::from_secs(5000)))
        );
        for bad in [
            &br#"{"expires_in":1}"#[..],
            br#"{"access_token":"","expires_in":1}"#,
            br#"{"access_token":"t"}"#,
            br#"{"access_token":"t","expires_in":"NaN"}"#,
            b"<html>",
        ] {
            assert!(parse(bad, now).is_err());
        }
    }

    /// An expiry past what the clock holds is 100 years away, not a panic on the worker.
    #[test]
    fn an_expiry_past_the_clock_is_a_hundred_years_away() {
        let now = SystemTime::now();
        let max = u64::MAX;
        let forever = karu_engine::sdk::FOREVER;
        for (body, expires) in [
            (
                format!(r#"{{"access_token":"t","expires_in":{max}}}"#),
                now + forever,
            ),
            (
                format!(r#"{{"access_token":"t","expires_in":"{max}"}}"#),
                now + forever,
            ),
            (
                format!(r#"{{"access_token":"t","expires_on":{max}}}"#),
                UNIX_EPOCH + forever,
            ),
        ] {
            assert_eq!(
                parse(body.as_bytes(), now),
                Ok(("t".into(), expires)),
                "{body}"
            );
        }
    }
}
