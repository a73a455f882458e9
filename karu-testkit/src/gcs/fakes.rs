//! [`GcsAuthFakes`]: the OAuth 2 token endpoint (service-account JWT bearer grants, checked
//! against the account's public key; authorized users' refresh-token grants) and the compute
//! metadata server's token, on one loopback server through a [`Route`]. Every token issued is
//! added to the [`GcsMock`](super::GcsMock) with its identity.

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use aws_lc_rs::encoding::{AsDer, Pkcs8V1Der};
use aws_lc_rs::rsa::{KeyPair, KeySize};
use aws_lc_rs::signature::{KeyPair as _, RSA_PKCS1_2048_8192_SHA256, UnparsedPublicKey};
use base64::Engine as _;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use parking_lot::{Mutex, RwLock};

use super::gate::GcsState;
use crate::http::{GateResponse, MockServer, RequestHead, Route};

/// The token endpoint's path.
const TOKEN_PATH: &str = "/token";
/// The metadata server's token path.
const METADATA_TOKEN_PATH: &str = "/computeMetadata/v1/instance/service-accounts/default/token";

/// How many token requests each fake answered or refused (see [`GcsAuthFakes::calls`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TokenCalls {
    /// Service-account JWT bearer grants that got a token.
    pub service_account: u64,
    /// Authorized-user refresh-token grants that got a token.
    pub authorized_user: u64,
    /// Metadata server token requests that got a token.
    pub metadata: u64,
    /// Requests refused (a bad signature, audience, secret, or no `Metadata-Flavor`).
    pub refused: u64,
}

#[derive(Default)]
struct Accounts {
    /// Service accounts: email → public key (`RSAPublicKey` DER).
    service: HashMap<String, Vec<u8>>,
    /// Authorized users: client id → (client secret, refresh token).
    users: HashMap<String, (String, String)>,
}

struct FakeRoute {
    state: Arc<GcsState>,
    token_uri: String,
    accounts: RwLock<Accounts>,
    metadata_identity: RwLock<String>,
    calls: Mutex<TokenCalls>,
    expires_in: AtomicU64,
    issued: AtomicU64,
}

impl fmt::Debug for FakeRoute {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FakeRoute")
            .field("token_uri", &self.token_uri)
            .finish_non_exhaustive()
    }
}

fn json(status: u16, body: serde_json::Value) -> GateResponse {
    GateResponse::new(status, body.to_string()).header("content-type", "application/json")
}

fn refused(why: &str) -> GateResponse {
    json(
        400,
        serde_json::json!({"error": "invalid_grant", "error_description": why}),
    )
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

impl FakeRoute {
    fn issue(&self, identity: &str) -> GateResponse {
        let n = self.issued.fetch_add(1, Ordering::Relaxed) + 1;
        let token = format!("ya29.karu-fake-{n}");
        self.state.add_token(&token, identity);
        json(
            200,
            serde_json::json!({
                "access_token": token,
                "expires_in": self.expires_in.load(Ordering::Relaxed),
                "token_type": "Bearer",
            }),
        )
    }

    /// Checks a JWT bearer assertion: RS256 by a known account, for this endpoint, the
    /// storage scope, not expired. Returns the account's email.
    fn check_assertion(&self, jwt: &str) -> Result<String, &'static str> {
        let mut parts = jwt.split('.');
        let (Some(head), Some(claims), Some(signature), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err("the assertion is not a JWT");
        };
        let decode = |s: &str| URL_SAFE_NO_PAD.decode(s).map_err(|_| "not base64url");
        let head: serde_json::Value =
            serde_json::from_slice(&decode(head)?).map_err(|_| "the JWT header is not JSON")?;
        if head["alg"] != "RS256" {
            return Err("the JWT is not RS256");
        }
        let claims: serde_json::Value =
            serde_json::from_slice(&decode(claims)?).map_err(|_| "the claims are not JSON")?;
        let email = claims["iss"].as_str().ok_or("no iss")?;
        let Some(key) = self.accounts.read().service.get(email).cloned() else {
            return Err("unknown service account");
        };
        let signed = &jwt[..jwt.rfind('.').unwrap_or(0)];
        UnparsedPublicKey::new(&RSA_PKCS1_2048_8192_SHA256, key)
            .verify(signed.as_bytes(), &decode(signature)?)
            .map_err(|_| "invalid JWT signature")?;
        if claims["aud"] != self.token_uri.as_str() {
            return Err("the audience is not this token endpoint");
        }
        if !claims["scope"]
            .as_str()
            .is_some_and(|s| s.contains("devstorage"))
        {
            return Err("no storage scope");
        }
        let exp = claims["exp"].as_u64().ok_or("no exp")?;
        if exp <= now() {
            return Err("the assertion expired");
        }
        Ok(email.to_owned())
    }

    fn token(&self, req: &RequestHead) -> GateResponse {
        let form: HashMap<String, String> = url::form_urlencoded::parse(&req.body)
            .into_owned()
            .collect();
        let field = |name: &str| form.get(name).map(String::as_str).unwrap_or("");
        let outcome = match field("grant_type") {
            "urn:ietf:params:oauth:grant-type:jwt-bearer" => self
                .check_assertion(field("assertion"))
                .map(|email| (format!("service-account:{email}"), true)),
            "refresh_token" => {
                let users = &self.accounts.read().users;
                match users.get(field("client_id")) {
                    Some((secret, refresh))
                        if secret == field("client_secret")
                            && refresh == field("refresh_token") =>
                    {
                        Ok((format!("user:{}", field("client_id")), false))
                    }
                    _ => Err("unknown client or refresh token"),
                }
            }
            _ => Err("unsupported grant type"),
        };
        match outcome {
            Ok((identity, service)) => {
                let mut calls = self.calls.lock();
                if service {
                    calls.service_account += 1;
                } else {
                    calls.authorized_user += 1;
                }
                drop(calls);
                self.issue(&identity)
            }
            Err(why) => {
                self.calls.lock().refused += 1;
                refused(why)
            }
        }
    }
}

impl Route for FakeRoute {
    fn respond(&self, req: &RequestHead) -> Option<GateResponse> {
        match (req.method.as_str(), req.path.as_str()) {
            ("POST", TOKEN_PATH) => Some(self.token(req)),
            ("GET", METADATA_TOKEN_PATH) => {
                if req.header("metadata-flavor") != Some("Google") {
                    self.calls.lock().refused += 1;
                    return Some(GateResponse::new(
                        403,
                        "Missing Metadata-Flavor:Google header.",
                    ));
                }
                self.calls.lock().metadata += 1;
                let identity = format!("metadata:{}", self.metadata_identity.read());
                Some(self.issue(&identity).header("metadata-flavor", "Google"))
            }
            _ => Some(GateResponse::new(404, "not found")),
        }
    }
}

/// The token endpoint and metadata server of a [`GcsMock`](super::GcsMock), on loopback,
/// running until dropped. Tokens live [`set_expires_in`](GcsAuthFakes::set_expires_in)
/// seconds (3,600 by default) as far as clients are told.
pub struct GcsAuthFakes {
    server: MockServer,
    route: Arc<FakeRoute>,
}

impl fmt::Debug for GcsAuthFakes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GcsAuthFakes")
            .field("token_uri", &self.route.token_uri)
            .finish_non_exhaustive()
    }
}

impl GcsAuthFakes {
    pub(super) fn start(state: Arc<GcsState>, tls: bool) -> GcsAuthFakes {
        let server = MockServer::builder()
            .tls(tls)
            .start()
            .unwrap_or_else(|e| panic!("karu-testkit: cannot start the GCS auth fakes: {e}"));
        let route = Arc::new(FakeRoute {
            state,
            token_uri: server.url(TOKEN_PATH),
            accounts: RwLock::default(),
            metadata_identity: RwLock::new("default".to_owned()),
            calls: Mutex::default(),
            expires_in: AtomicU64::new(3600),
            issued: AtomicU64::new(0),
        });
        server.set_route(Some(route.clone()));
        GcsAuthFakes { server, route }
    }

    /// The CA file that signed the fakes' certificate (fakes over TLS only), for
    /// `http.ca_file`.
    pub fn ca_file(&self) -> Option<std::path::PathBuf> {
        self.server.ca_file()
    }

    /// The token endpoint, `http://127.0.0.1:PORT/token` (`https://` over TLS; the
    /// `token_uri` of the files).
    pub fn token_uri(&self) -> String {
        self.route.token_uri.clone()
    }

    /// The metadata server, `127.0.0.1:PORT`, for `GCE_METADATA_HOST`.
    pub fn metadata_host(&self) -> String {
        self.server.addr().to_string()
    }

    /// The server (its request log).
    pub fn server(&self) -> &MockServer {
        &self.server
    }

    /// How many requests each fake answered or refused.
    pub fn calls(&self) -> TokenCalls {
        *self.route.calls.lock()
    }

    /// The `expires_in` of tokens issued from now on.
    pub fn set_expires_in(&self, secs: u64) {
        self.route.expires_in.store(secs, Ordering::Relaxed);
    }

    /// The identity of the metadata server's tokens: `metadata:NAME` (default `default`).
    pub fn set_metadata_identity(&self, name: &str) {
        *self.route.metadata_identity.write() = name.to_owned();
    }

    /// A new service account `email` with a fresh RSA key: the JSON key file a client reads
    /// (`token_uri` is this fake). Its tokens name `service-account:EMAIL`.
    ///
    /// # Panics
    /// If no RSA key can be generated (this is a test helper).
    pub fn add_service_account(&self, email: &str) -> String {
        let key = KeyPair::generate(KeySize::Rsa2048)
            .unwrap_or_else(|_| panic!("karu-testkit: cannot generate an RSA key"));
        let pkcs8: Pkcs8V1Der<'_> = key
            .as_der()
            .unwrap_or_else(|_| panic!("karu-testkit: cannot encode an RSA key"));
        let b64 = STANDARD.encode(pkcs8.as_ref());
        let mut pem = String::from("-----BEGIN PRIVATE KEY-----\n");
        for line in b64.as_bytes().chunks(64) {
            pem.push_str(&String::from_utf8_lossy(line));
            pem.push('\n');
        }
        pem.push_str("-----END PRIVATE KEY-----\n");
        self.route
            .accounts
            .write()
            .service
            .insert(email.to_owned(), key.public_key().as_ref().to_vec());
        serde_json::json!({
            "type": "service_account",
            "project_id": "karu-test",
            "private_key_id": "0123456789abcdef",
            "private_key": pem,
            "client_email": email,
            "client_id": "100000000000000000000",
            "token_uri": self.token_uri(),
        })
        .to_string()
    }

    /// A new authorized user: the JSON file `gcloud auth application-default login` writes
    /// (with `token_uri` naming this fake). Its tokens name `user:CLIENT_ID`.
    pub fn add_authorized_user(
        &self,
        client_id: &str,
        client_secret: &str,
        refresh_token: &str,
    ) -> String {
        self.route.accounts.write().users.insert(
            client_id.to_owned(),
            (client_secret.to_owned(), refresh_token.to_owned()),
        );
        serde_json::json!({
            "type": "authorized_user",
            "client_id": client_id,
            "client_secret": client_secret,
            "refresh_token": refresh_token,
            "token_uri": self.token_uri(),
        })
        .to_string()
    }
}
