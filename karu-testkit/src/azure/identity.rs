//! Fakes of the token endpoints Azure credentials come from, on loopback, issuing tokens the
//! [`AzureMock`](super::AzureMock) accepts, each for a named identity.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use parking_lot::Mutex;
use percent_encoding::percent_decode_str;

use super::gate::AzureState;
use crate::http::{GateResponse, MockServer, RequestHead, Route};

/// How long the fakes' tokens live.
const LIFETIME: Duration = Duration::from_secs(3600);

/// The storage scope and resource the fakes insist on.
const SCOPE: &str = "https://storage.azure.com/.default";
const RESOURCE: &str = "https://storage.azure.com/";

/// Which endpoint was called, for [`IdentityFakes::calls`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum TokenCall {
    /// `POST /{tenant}/oauth2/v2.0/token` with a client secret.
    ClientSecret {
        /// The client id.
        client_id: String,
    },
    /// `POST /{tenant}/oauth2/v2.0/token` with a client assertion signed by a registered
    /// certificate's key.
    ClientCertificate {
        /// The client id.
        client_id: String,
    },
    /// `POST /{tenant}/oauth2/v2.0/token` with a client assertion (workload identity).
    ClientAssertion {
        /// The client id.
        client_id: String,
    },
    /// IMDS, `GET /metadata/identity/oauth2/token`.
    Imds,
    /// App Service, `GET /msi/token`.
    AppService,
    /// A request the fakes refused.
    Refused(u16),
}

#[derive(Debug, Default)]
struct Registry {
    /// (tenant, client id) to secret.
    secrets: HashMap<(String, String), String>,
    /// (tenant, client id) to the federated token.
    assertions: HashMap<(String, String), String>,
    /// (tenant, client id) to the certificate (DER) whose key signs its client assertions.
    certificates: HashMap<(String, String), Vec<u8>>,
    /// The App Service header value.
    app_service_header: Option<String>,
    calls: Vec<TokenCall>,
}

#[derive(Debug)]
struct Endpoints {
    state: Arc<AzureState>,
    registry: Mutex<Registry>,
    /// The server's base URL (the audience of client assertions is the token URL on it).
    base: Mutex<String>,
}

/// Checks a client assertion as Entra ID does: RS256 over `header.claims` with the
/// certificate's key, `x5t#S256` its thumbprint, `aud` the token URL, `iss` and `sub` the
/// client, not expired.
fn verify_assertion(
    jwt: &str,
    der: &[u8],
    audience: &str,
    client_id: &str,
) -> Result<(), &'static str> {
    use base64::Engine;
    use base64::engine::general_purpose::URL_SAFE_NO_PAD;
    use sha2::{Digest, Sha256};
    let parts: Vec<&str> = jwt.split('.').collect();
    let [header, claims, signature] = parts[..] else {
        return Err("not a JWT");
    };
    let json = |p: &str| -> Result<serde_json::Value, &'static str> {
        let bytes = URL_SAFE_NO_PAD.decode(p).map_err(|_| "not base64url")?;
        serde_json::from_slice(&bytes).map_err(|_| "not JSON")
    };
    let (h, c) = (json(header)?, json(claims)?);
    if h["alg"] != "RS256" {
        return Err("alg is not RS256");
    }
    if h["x5t#S256"] != URL_SAFE_NO_PAD.encode(Sha256::digest(der)) {
        return Err("x5t#S256 is not the certificate's thumbprint");
    }
    if c["aud"] != audience || c["iss"] != client_id || c["sub"] != client_id {
        return Err("aud, iss or sub is wrong");
    }
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs();
    if c["exp"].as_u64().is_none_or(|exp| exp <= now) {
        return Err("the assertion expired");
    }
    let signature = URL_SAFE_NO_PAD
        .decode(signature)
        .map_err(|_| "not base64url")?;
    let cert = rustls::pki_types::CertificateDer::from(der);
    let ee = webpki::EndEntityCert::try_from(&cert).map_err(|_| "bad certificate")?;
    ee.verify_signature(
        webpki::aws_lc_rs::RSA_PKCS1_2048_8192_SHA256,
        format!("{header}.{claims}").as_bytes(),
        &signature,
    )
    .map_err(|_| "the signature does not verify with the certificate")
}

fn form(body: &[u8]) -> HashMap<String, String> {
    String::from_utf8_lossy(body)
        .split('&')
        .filter_map(|pair| {
            let (k, v) = pair.split_once('=')?;
            let decode = |s: &str| {
                percent_decode_str(&s.replace('+', " "))
                    .decode_utf8_lossy()
                    .into_owned()
            };
            Some((decode(k), decode(v)))
        })
        .collect()
}

fn json_error(status: u16, error: &str, description: &str) -> GateResponse {
    let body = serde_json::json!({"error": error, "error_description": description}).to_string();
    GateResponse::new(status, body).header("content-type", "application/json")
}

impl Endpoints {
    fn issue(&self, identity: &str, expires_as_string: bool) -> GateResponse {
        let token = format!(
            "fake-entra-{}-{}",
            identity.replace(|c: char| !c.is_ascii_alphanumeric(), "-"),
            SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .unwrap_or_default()
                .as_nanos()
        );
        let expires = self.state.now() + LIFETIME;
        self.state
            .add_token(token.clone(), identity.to_owned(), expires);
        let on = expires
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default()
            .as_secs();
        let body = if expires_as_string {
            serde_json::json!({"access_token": token, "expires_on": on.to_string(),
                "expires_in": LIFETIME.as_secs().to_string(), "resource": RESOURCE,
                "token_type": "Bearer"})
        } else {
            serde_json::json!({"access_token": token, "expires_in": LIFETIME.as_secs(),
                "ext_expires_in": LIFETIME.as_secs(), "token_type": "Bearer"})
        };
        GateResponse::new(200, body.to_string()).header("content-type", "application/json")
    }

    fn query(request: &RequestHead) -> HashMap<String, String> {
        form(request.query.as_deref().unwrap_or("").as_bytes())
    }

    fn answer(&self, request: &RequestHead) -> (TokenCall, GateResponse) {
        let path = request.path.as_str();
        if request.method == "POST" && path.ends_with("/oauth2/v2.0/token") {
            let tenant = path
                .trim_start_matches('/')
                .split('/')
                .next()
                .unwrap_or_default()
                .to_owned();
            let form = form(&request.body);
            let get = |k: &str| form.get(k).cloned().unwrap_or_default();
            if get("grant_type") != "client_credentials" || get("scope") != SCOPE {
                return (
                    TokenCall::Refused(400),
                    json_error(400, "invalid_request", "AADSTS900144: bad grant or scope"),
                );
            }
            let client_id = get("client_id");
            let key = (tenant, client_id.clone());
            let registry = self.registry.lock();
            if form.contains_key("client_assertion")
                && let Some(der) = registry.certificates.get(&key).cloned()
            {
                drop(registry);
                let audience = format!("{}{}", self.base.lock().clone(), request.path);
                let verdict = if get("client_assertion_type")
                    == "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"
                {
                    verify_assertion(&get("client_assertion"), &der, &audience, &client_id)
                } else {
                    Err("not a JWT bearer assertion")
                };
                return match verdict {
                    Ok(()) => (
                        TokenCall::ClientCertificate {
                            client_id: client_id.clone(),
                        },
                        self.issue(&format!("cert:{client_id}"), false),
                    ),
                    Err(why) => (
                        TokenCall::Refused(401),
                        json_error(401, "invalid_client", &format!("AADSTS700027: {why}")),
                    ),
                };
            }
            if form.contains_key("client_assertion") {
                let ok = get("client_assertion_type")
                    == "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"
                    && registry.assertions.get(&key) == Some(&get("client_assertion"));
                drop(registry);
                return if ok {
                    (
                        TokenCall::ClientAssertion {
                            client_id: client_id.clone(),
                        },
                        self.issue(&format!("workload:{client_id}"), false),
                    )
                } else {
                    (
                        TokenCall::Refused(401),
                        json_error(401, "invalid_client", "AADSTS700211: invalid assertion"),
                    )
                };
            }
            let ok = registry.secrets.get(&key) == Some(&get("client_secret"));
            drop(registry);
            return if ok {
                (
                    TokenCall::ClientSecret {
                        client_id: client_id.clone(),
                    },
                    self.issue(&format!("sp:{client_id}"), false),
                )
            } else {
                (
                    TokenCall::Refused(401),
                    json_error(
                        401,
                        "invalid_client",
                        "AADSTS7000215: Invalid client secret provided.",
                    ),
                )
            };
        }
        if request.method == "GET" && path == "/metadata/identity/oauth2/token" {
            let q = Self::query(request);
            if request.header("metadata") != Some("true")
                || q.get("resource").map(String::as_str) != Some(RESOURCE)
                || !q.contains_key("api-version")
            {
                return (
                    TokenCall::Refused(400),
                    json_error(
                        400,
                        "invalid_request",
                        "Required metadata header not specified",
                    ),
                );
            }
            let who = q
                .get("client_id")
                .cloned()
                .unwrap_or_else(|| "system".into());
            return (TokenCall::Imds, self.issue(&format!("imds:{who}"), true));
        }
        if request.method == "GET" && path == "/msi/token" {
            let q = Self::query(request);
            let expected = self.registry.lock().app_service_header.clone();
            let ok = expected.is_some()
                && request.header("x-identity-header") == expected.as_deref()
                && q.get("resource").map(String::as_str) == Some(RESOURCE);
            if !ok {
                return (
                    TokenCall::Refused(401),
                    json_error(401, "unauthorized", "Invalid identity header"),
                );
            }
            let who = q
                .get("client_id")
                .cloned()
                .unwrap_or_else(|| "system".into());
            return (
                TokenCall::AppService,
                self.issue(&format!("appservice:{who}"), true),
            );
        }
        (
            TokenCall::Refused(404),
            json_error(404, "not_found", "no such endpoint"),
        )
    }
}

impl Route for Endpoints {
    fn respond(&self, request: &RequestHead) -> Option<GateResponse> {
        let (call, response) = self.answer(request);
        self.registry.lock().calls.push(call);
        Some(response)
    }
}

/// The Entra ID token endpoint and the managed-identity endpoints (IMDS, App Service), on one
/// loopback server, issuing tokens the [`AzureMock`](super::AzureMock) accepts; from
/// [`AzureMock::identity_fakes`](super::AzureMock::identity_fakes). Tokens name their
/// identity: `sp:{client_id}`, `workload:{client_id}`, `imds:{client_id or system}`,
/// `appservice:{client_id or system}`.
#[derive(Debug)]
pub struct IdentityFakes {
    server: MockServer,
    endpoints: Arc<Endpoints>,
}

impl IdentityFakes {
    pub(super) fn start(state: Arc<AzureState>, tls: bool) -> std::io::Result<IdentityFakes> {
        let server = MockServer::builder().tls(tls).start()?;
        let endpoints = Arc::new(Endpoints {
            state,
            registry: Mutex::default(),
            base: Mutex::new(server.base_url()),
        });
        server.set_route(Some(endpoints.clone()));
        Ok(IdentityFakes { server, endpoints })
    }

    /// The CA file that signed the fakes' certificate (fakes over TLS only), for
    /// `http.ca_file`.
    pub fn ca_file(&self) -> Option<std::path::PathBuf> {
        self.server.ca_file()
    }

    /// The authority host (for `azure.authority_host` / `AZURE_AUTHORITY_HOST`).
    pub fn authority_host(&self) -> String {
        self.server.base_url()
    }

    /// The IMDS token endpoint (for `azure.msi_endpoint`).
    pub fn imds_endpoint(&self) -> String {
        self.server.url("/metadata/identity/oauth2/token")
    }

    /// The App Service endpoint (for `IDENTITY_ENDPOINT`).
    pub fn app_service_endpoint(&self) -> String {
        self.server.url("/msi/token")
    }

    /// Accepts a client secret for a client of a tenant.
    pub fn add_client_secret(&self, tenant: &str, client_id: &str, secret: &str) {
        self.endpoints
            .registry
            .lock()
            .secrets
            .insert((tenant.into(), client_id.into()), secret.into());
    }

    /// Accepts client assertions signed by the key of this certificate (DER) for a client of a
    /// tenant.
    pub fn add_client_certificate(&self, tenant: &str, client_id: &str, certificate_der: &[u8]) {
        self.endpoints
            .registry
            .lock()
            .certificates
            .insert((tenant.into(), client_id.into()), certificate_der.to_vec());
    }

    /// Accepts a federated token as the client assertion of a client of a tenant.
    pub fn add_federated_token(&self, tenant: &str, client_id: &str, token: &str) {
        self.endpoints
            .registry
            .lock()
            .assertions
            .insert((tenant.into(), client_id.into()), token.into());
    }

    /// The `X-IDENTITY-HEADER` value App Service requests must carry (`IDENTITY_HEADER`).
    pub fn set_app_service_header(&self, header: &str) {
        self.endpoints.registry.lock().app_service_header = Some(header.into());
    }

    /// Every call so far, in order (the requests the endpoints answered; one answered by a
    /// fault of [`server`](IdentityFakes::server) instead is only in the server's log).
    pub fn calls(&self) -> Vec<TokenCall> {
        self.endpoints.registry.lock().calls.clone()
    }

    /// The server the endpoints run on: its request log, and its fault plan (a token endpoint
    /// that answers `503`, or resets the connection).
    pub fn server(&self) -> &MockServer {
        &self.server
    }
}
