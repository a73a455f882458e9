//! [`CredentialFakes`]: one loopback server answering IMDSv2, the container credentials
//! endpoint and STS `AssumeRoleWithWebIdentity`, through a [`Route`] on a [`MockServer`].

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime};

use parking_lot::{Mutex, RwLock};
use percent_encoding::percent_decode_str;

use super::MockCredentials;
use crate::awstime::rfc3339;
use crate::http::{GateResponse, MockServer, RequestHead, Route};

/// The path of the container credentials endpoint.
const CONTAINER_PATH: &str = "/ecs/creds";
/// The IMDS token path.
const IMDS_TOKEN_PATH: &str = "/latest/api/token";
/// The IMDS credential paths: the legacy one, and the extended one newer SDKs try first.
const IMDS_CREDENTIAL_PREFIXES: [&str; 2] = [
    "/latest/meta-data/iam/security-credentials",
    "/latest/meta-data/iam/security-credentials-extended",
];
/// The account of the fake roles.
const ACCOUNT_ID: &str = "123456789012";
/// The most seconds an IMDS token may live, as on EC2.
const MAX_IMDS_TTL: u64 = 21_600;

/// How many requests each fake endpoint received, answered or refused (see
/// [`CredentialFakes::calls`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CredentialCalls {
    /// Requests to `/latest/api/token` (IMDSv2 session tokens).
    pub imds_token: u64,
    /// Requests for the IMDS role list (`.../security-credentials/`, legacy or extended).
    pub imds_role_list: u64,
    /// Requests for IMDS role credentials (`.../security-credentials/ROLE`).
    pub imds_credentials: u64,
    /// Requests to the container credentials path.
    pub container: u64,
    /// STS `AssumeRoleWithWebIdentity` requests.
    pub sts_web_identity: u64,
}

/// One `AssumeRoleWithWebIdentity` request as STS received it (form fields, decoded).
///
/// `Debug` redacts the web identity token.
#[derive(Clone, PartialEq, Eq)]
pub struct StsRequest {
    /// `RoleArn`.
    pub role_arn: String,
    /// `RoleSessionName`.
    pub role_session_name: String,
    /// `WebIdentityToken`: the contents of the token file the client read.
    pub web_identity_token: String,
    /// `DurationSeconds`, if sent.
    pub duration_seconds: Option<String>,
    /// `Policy`, if sent.
    pub policy: Option<String>,
}

impl fmt::Debug for StsRequest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StsRequest")
            .field("role_arn", &self.role_arn)
            .field("role_session_name", &self.role_session_name)
            .field("web_identity_token", &"** redacted **")
            .field("duration_seconds", &self.duration_seconds)
            .field("policy", &self.policy)
            .finish_non_exhaustive()
    }
}

/// What every endpoint hands out.
#[derive(Debug, Clone)]
struct Issued {
    creds: MockCredentials,
    expiration: SystemTime,
    /// When they were issued (`LastUpdated` of IMDS).
    at: SystemTime,
}

#[derive(Debug, Default)]
struct Counters {
    imds_token: AtomicU64,
    imds_role_list: AtomicU64,
    imds_credentials: AtomicU64,
    container: AtomicU64,
    sts_web_identity: AtomicU64,
}

/// What the [`CredentialFakes`] handle shares with its route.
#[derive(Debug)]
struct FakesState {
    issued: RwLock<Issued>,
    role: String,
    container_token: String,
    /// Live IMDS session tokens and when each expires.
    imds_tokens: Mutex<HashMap<String, Instant>>,
    next_id: AtomicU64,
    counters: Counters,
    sts: Mutex<Vec<StsRequest>>,
}

impl FakesState {
    fn issued(&self) -> Issued {
        self.issued.read().clone()
    }

    fn next_id(&self) -> u64 {
        self.next_id.fetch_add(1, Ordering::Relaxed) + 1
    }

    fn imds_token_valid(&self, request: &RequestHead) -> bool {
        let Some(token) = request.header("x-aws-ec2-metadata-token") else {
            return false;
        };
        let mut tokens = self.imds_tokens.lock();
        let now = Instant::now();
        tokens.retain(|_, expiry| *expiry > now);
        tokens.contains_key(token)
    }
}

fn text(status: u16, body: impl Into<String>) -> GateResponse {
    GateResponse::new(status, body.into()).header("content-type", "text/plain")
}

fn json(status: u16, doc: &serde_json::Value) -> GateResponse {
    GateResponse::new(status, doc.to_string()).header("content-type", "application/json")
}

/// The IMDS / container credentials document (`Code`, `LastUpdated`, `Type` only for IMDS).
fn credentials_json(
    issued: &Issued,
    imds: bool,
    extended: bool,
    role_arn: &str,
) -> serde_json::Value {
    let mut doc = serde_json::Map::new();
    if imds {
        doc.insert("Code".into(), "Success".into());
        doc.insert("LastUpdated".into(), rfc3339(issued.at).into());
        doc.insert("Type".into(), "AWS-HMAC".into());
    }
    doc.insert(
        "AccessKeyId".into(),
        issued.creds.access_key_id.clone().into(),
    );
    doc.insert(
        "SecretAccessKey".into(),
        issued.creds.secret_access_key.clone().into(),
    );
    if let Some(token) = &issued.creds.session_token {
        doc.insert("Token".into(), token.clone().into());
    }
    doc.insert("Expiration".into(), rfc3339(issued.expiration).into());
    if !imds {
        doc.insert("RoleArn".into(), role_arn.into());
    }
    if extended || !imds {
        doc.insert("AccountId".into(), ACCOUNT_ID.into());
    }
    serde_json::Value::Object(doc)
}

/// Decodes an `application/x-www-form-urlencoded` body.
fn form(body: &[u8]) -> Vec<(String, String)> {
    let decode = |s: &str| {
        let s = s.replace('+', " ");
        percent_decode_str(&s).decode_utf8_lossy().into_owned()
    };
    String::from_utf8_lossy(body)
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|pair| {
            let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
            (decode(name), decode(value))
        })
        .collect()
}

/// An STS error document (`ErrorResponse`), `text/xml`.
fn sts_error(status: u16, code: &str, message: &str, request_id: &str) -> GateResponse {
    let esc = |s: &str| quick_xml::escape::escape(s).into_owned();
    GateResponse::new(
        status,
        format!(
            "<ErrorResponse xmlns=\"https://sts.amazonaws.com/doc/2011-06-15/\">\n  <Error>\n    <Type>Sender</Type>\n    <Code>{}</Code>\n    <Message>{}</Message>\n  </Error>\n  <RequestId>{request_id}</RequestId>\n</ErrorResponse>\n",
            esc(code),
            esc(message)
        ),
    )
    .header("content-type", "text/xml")
    .header("x-amzn-requestid", request_id)
}

/// `[\w+=,.@-]{2,64}`, the rule STS applies to session names.
fn valid_session_name(name: &str) -> bool {
    (2..=64).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"_+=,.@-".contains(&b))
}

/// The [`Route`] of [`CredentialFakes`].
#[derive(Debug)]
struct FakesRoute {
    state: Arc<FakesState>,
}

impl FakesRoute {
    fn imds_token(&self, request: &RequestHead) -> GateResponse {
        let state = &self.state;
        state.counters.imds_token.fetch_add(1, Ordering::Relaxed);
        if request.method != "PUT" {
            return text(405, "Method Not Allowed").header("allow", "PUT");
        }
        // IMDS refuses token requests that went through a proxy.
        if request.header("x-forwarded-for").is_some() {
            return text(403, "Forbidden");
        }
        let ttl = request
            .header("x-aws-ec2-metadata-token-ttl-seconds")
            .and_then(|v| v.trim().parse::<u64>().ok())
            .filter(|ttl| (1..=MAX_IMDS_TTL).contains(ttl));
        let Some(ttl) = ttl else {
            return text(
                400,
                "Bad Request: x-aws-ec2-metadata-token-ttl-seconds must be 1..=21600",
            );
        };
        let token = format!("karu-imds-token-{}-{}", std::process::id(), state.next_id());
        state
            .imds_tokens
            .lock()
            .insert(token.clone(), Instant::now() + Duration::from_secs(ttl));
        // aws-config reads the TTL back from this header and fails without it.
        text(200, token).header("x-aws-ec2-metadata-token-ttl-seconds", ttl.to_string())
    }

    fn imds(&self, request: &RequestHead, path: &str) -> Option<GateResponse> {
        let state = &self.state;
        let (prefix, rest) = IMDS_CREDENTIAL_PREFIXES.iter().find_map(|prefix| {
            let rest = path.strip_prefix(prefix)?;
            (rest.is_empty() || rest.starts_with('/')).then_some((*prefix, rest))
        })?;
        let extended = prefix.ends_with("-extended");
        let role = rest.trim_start_matches('/').trim_end_matches('/');
        let counter = if role.is_empty() {
            &state.counters.imds_role_list
        } else {
            &state.counters.imds_credentials
        };
        counter.fetch_add(1, Ordering::Relaxed);
        if request.method != "GET" && request.method != "HEAD" {
            return Some(text(405, "Method Not Allowed").header("allow", "GET, HEAD"));
        }
        if !state.imds_token_valid(request) {
            return Some(text(401, "Unauthorized"));
        }
        if role.is_empty() {
            return Some(text(200, state.role.clone()));
        }
        if role != state.role {
            return Some(text(404, "Not Found"));
        }
        let arn = format!("arn:aws:iam::{ACCOUNT_ID}:role/{}", state.role);
        Some(json(
            200,
            &credentials_json(&state.issued(), true, extended, &arn),
        ))
    }

    fn container(&self, request: &RequestHead) -> GateResponse {
        let state = &self.state;
        state.counters.container.fetch_add(1, Ordering::Relaxed);
        if request.method != "GET" {
            return text(405, "Method Not Allowed").header("allow", "GET");
        }
        match request.header("authorization") {
            Some(token) if token == state.container_token => {
                let arn = format!("arn:aws:iam::{ACCOUNT_ID}:role/{}", state.role);
                json(200, &credentials_json(&state.issued(), false, false, &arn))
            }
            sent => {
                let message = if sent.is_some() {
                    "The authorization token is not valid."
                } else {
                    "An Authorization header is required."
                };
                json(
                    401,
                    &serde_json::json!({ "Code": "AccessDenied", "Message": message }),
                )
            }
        }
    }

    fn sts(&self, request: &RequestHead) -> Option<GateResponse> {
        let state = &self.state;
        let fields = form(&request.body);
        let get = |name: &str| {
            fields
                .iter()
                .find(|(n, _)| n == name)
                .map(|(_, v)| v.clone())
        };
        let request_id = format!("4b415255-0000-4000-8000-{:012x}", state.next_id());
        let action = get("Action")?;
        if action != "AssumeRoleWithWebIdentity" {
            return Some(sts_error(
                400,
                "InvalidAction",
                &format!("Could not find operation {action} for version 2011-06-15"),
                &request_id,
            ));
        }
        state
            .counters
            .sts_web_identity
            .fetch_add(1, Ordering::Relaxed);
        if get("Version").as_deref() != Some("2011-06-15") {
            return Some(sts_error(
                400,
                "InvalidParameterValue",
                "Version must be 2011-06-15",
                &request_id,
            ));
        }
        let (Some(role_arn), Some(session), Some(token)) = (
            get("RoleArn"),
            get("RoleSessionName"),
            get("WebIdentityToken"),
        ) else {
            return Some(sts_error(
                400,
                "MissingParameter",
                "RoleArn, RoleSessionName and WebIdentityToken are required",
                &request_id,
            ));
        };
        state.sts.lock().push(StsRequest {
            role_arn: role_arn.clone(),
            role_session_name: session.clone(),
            web_identity_token: token,
            duration_seconds: get("DurationSeconds"),
            policy: get("Policy"),
        });
        if !valid_session_name(&session) {
            return Some(sts_error(
                400,
                "ValidationError",
                "1 validation error detected: Value at 'roleSessionName' failed to satisfy constraint: Member must satisfy regular expression pattern: [\\w+=,.@-]*",
                &request_id,
            ));
        }
        let issued = state.issued();
        let esc = |s: &str| quick_xml::escape::escape(s).into_owned();
        let role_name = role_arn.rsplit('/').next().unwrap_or("role");
        let token_xml = issued
            .creds
            .session_token
            .as_deref()
            .map(|t| format!("      <SessionToken>{}</SessionToken>\n", esc(t)))
            .unwrap_or_default();
        let body = format!(
            "<AssumeRoleWithWebIdentityResponse xmlns=\"https://sts.amazonaws.com/doc/2011-06-15/\">\n  <AssumeRoleWithWebIdentityResult>\n    <SubjectFromWebIdentityToken>karu-test-subject</SubjectFromWebIdentityToken>\n    <Audience>sts.amazonaws.com</Audience>\n    <AssumedRoleUser>\n      <Arn>arn:aws:sts::{ACCOUNT_ID}:assumed-role/{}/{}</Arn>\n      <AssumedRoleId>AROAKARUTESTROLE:{}</AssumedRoleId>\n    </AssumedRoleUser>\n    <Credentials>\n{token_xml}      <SecretAccessKey>{}</SecretAccessKey>\n      <Expiration>{}</Expiration>\n      <AccessKeyId>{}</AccessKeyId>\n    </Credentials>\n    <Provider>karu-testkit</Provider>\n  </AssumeRoleWithWebIdentityResult>\n  <ResponseMetadata>\n    <RequestId>{request_id}</RequestId>\n  </ResponseMetadata>\n</AssumeRoleWithWebIdentityResponse>\n",
            esc(role_name),
            esc(&session),
            esc(&session),
            esc(&issued.creds.secret_access_key),
            rfc3339(issued.expiration),
            esc(&issued.creds.access_key_id),
        );
        Some(
            GateResponse::new(200, body)
                .header("content-type", "text/xml")
                .header("x-amzn-requestid", request_id),
        )
    }
}

impl Route for FakesRoute {
    fn respond(&self, request: &RequestHead) -> Option<GateResponse> {
        // An endpoint given with a trailing slash may be joined into `//latest/...`.
        let path = format!("/{}", request.path.trim_start_matches('/'));
        if path == IMDS_TOKEN_PATH {
            return Some(self.imds_token(request));
        }
        if let Some(answer) = self.imds(request, &path) {
            return Some(answer);
        }
        if path == CONTAINER_PATH {
            return Some(self.container(request));
        }
        if request.method == "POST" {
            return self.sts(request);
        }
        None
    }
}

/// Fake AWS credential endpoints on one loopback server, running until dropped: IMDSv2, the
/// container credentials endpoint, and STS `AssumeRoleWithWebIdentity`, all handing out what
/// was last [`issue`](CredentialFakes::issue)d.
///
/// What each endpoint answers (formats as `aws-config` 1.x parses them):
/// - IMDSv2 ([`imds_endpoint`](CredentialFakes::imds_endpoint)):
///   - `PUT /latest/api/token` with `x-aws-ec2-metadata-token-ttl-seconds: 1..=21600`: 200, a
///     new token as text, the TTL echoed in the same header (aws-config requires it); a missing
///     or bad TTL gets 400, a request with `X-Forwarded-For` 403, other methods 405;
///   - `GET /latest/meta-data/iam/security-credentials/` (also `-extended/`, which newer SDKs
///     try first): the role name ([`imds_role`](CredentialFakes::imds_role)) as text;
///   - `GET .../security-credentials/ROLE`: `{"Code":"Success","LastUpdated":..,
///     "Type":"AWS-HMAC","AccessKeyId":..,"SecretAccessKey":..,"Token":..,"Expiration":..}`
///     (times RFC 3339 UTC; the extended path adds `"AccountId"`); another role gets 404;
///   - both need a live token in `x-aws-ec2-metadata-token`, else 401.
/// - Container ([`container_full_uri`](CredentialFakes::container_full_uri)): `GET /ecs/creds`
///   with `Authorization: TOKEN` ([`container_token`](CredentialFakes::container_token)):
///   `{"AccessKeyId":..,"SecretAccessKey":..,"Token":..,"Expiration":..,"RoleArn":..,
///   "AccountId":..}`; a missing or wrong token gets 401 with `{"Code":"AccessDenied",
///   "Message":..}` (aws-config treats a non-2xx answer as a provider error, not retried).
/// - STS ([`sts_endpoint`](CredentialFakes::sts_endpoint)): `POST` of the form
///   `Action=AssumeRoleWithWebIdentity&Version=2011-06-15&RoleArn=..&RoleSessionName=..&WebIdentityToken=..`
///   (unsigned): 200 `text/xml` `<AssumeRoleWithWebIdentityResponse>` with
///   `<Credentials><SessionToken/><SecretAccessKey/><Expiration/><AccessKeyId/></Credentials>`
///   and `<AssumedRoleUser>`; errors are STS `<ErrorResponse>` documents (400
///   `MissingParameter`, `ValidationError` for a bad session name, `InvalidAction`).
///
/// `aws-config` requires a session token in IMDS, container and STS answers: issue
/// credentials [with one](MockCredentials::with_session_token) for those paths. The fault plan
/// of [`server`](CredentialFakes::server) applies to every endpoint (status faults answer
/// before the endpoints, body faults cut their answers).
pub struct CredentialFakes {
    server: MockServer,
    state: Arc<FakesState>,
}

impl fmt::Debug for CredentialFakes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CredentialFakes")
            .field("base_url", &self.server.base_url())
            .field("calls", &self.calls())
            .finish_non_exhaustive()
    }
}

impl CredentialFakes {
    /// Starts the fakes on a free port of `127.0.0.1`, handing out temporary credentials
    /// (`ASIAKARUFAKES...`, with a session token) valid for six hours until
    /// [`issue`](CredentialFakes::issue) says otherwise.
    ///
    /// # Panics
    /// If no port can be bound on `127.0.0.1` (this is a test helper).
    pub fn start() -> CredentialFakes {
        let server = MockServer::builder().start().unwrap_or_else(|e| {
            panic!("karu-testkit: cannot start the credential fakes on 127.0.0.1: {e}")
        });
        let now = SystemTime::now();
        let port = server.addr().port();
        let state = Arc::new(FakesState {
            issued: RwLock::new(Issued {
                creds: MockCredentials::new(
                    format!("ASIAKARUFAKES{port:05}"),
                    "karu/fake/secret/key/for/tests/only/00000",
                )
                .with_session_token(format!("karu-fake-session-token-{port}")),
                expiration: now + Duration::from_secs(6 * 3600),
                at: now,
            }),
            role: "karu-test-role".to_owned(),
            container_token: format!("karu-container-token-{port}"),
            imds_tokens: Mutex::default(),
            next_id: AtomicU64::new(0),
            counters: Counters::default(),
            sts: Mutex::default(),
        });
        server.set_route(Some(Arc::new(FakesRoute {
            state: state.clone(),
        })));
        CredentialFakes { server, state }
    }

    /// What every endpoint hands out from now on.
    pub fn issue(&self, creds: MockCredentials, expiration: SystemTime) {
        *self.state.issued.write() = Issued {
            creds,
            expiration,
            at: SystemTime::now(),
        };
    }

    /// What the endpoints hand out now, and when it expires.
    pub fn issued(&self) -> (MockCredentials, SystemTime) {
        let issued = self.state.issued();
        (issued.creds, issued.expiration)
    }

    /// The base URL for `AWS_EC2_METADATA_SERVICE_ENDPOINT`: `http://127.0.0.1:PORT/`.
    pub fn imds_endpoint(&self) -> String {
        format!("{}/", self.server.base_url())
    }

    /// The instance profile role IMDS lists.
    pub fn imds_role(&self) -> String {
        self.state.role.clone()
    }

    /// The URL for `AWS_CONTAINER_CREDENTIALS_FULL_URI`: `http://127.0.0.1:PORT/ecs/creds`.
    pub fn container_full_uri(&self) -> String {
        self.server.url(CONTAINER_PATH)
    }

    /// The exact `Authorization` value the container endpoint requires (the value of
    /// `AWS_CONTAINER_AUTHORIZATION_TOKEN`, or the contents of the file named by
    /// `AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE`).
    pub fn container_token(&self) -> String {
        self.state.container_token.clone()
    }

    /// The endpoint URL for `AWS_ENDPOINT_URL_STS` (or an STS endpoint override):
    /// `http://127.0.0.1:PORT`.
    pub fn sts_endpoint(&self) -> String {
        self.server.base_url()
    }

    /// Requests received per endpoint so far.
    pub fn calls(&self) -> CredentialCalls {
        let c = &self.state.counters;
        CredentialCalls {
            imds_token: c.imds_token.load(Ordering::Relaxed),
            imds_role_list: c.imds_role_list.load(Ordering::Relaxed),
            imds_credentials: c.imds_credentials.load(Ordering::Relaxed),
            container: c.container.load(Ordering::Relaxed),
            sts_web_identity: c.sts_web_identity.load(Ordering::Relaxed),
        }
    }

    /// The `AssumeRoleWithWebIdentity` requests that named a role, a session and a token, in
    /// order.
    pub fn sts_requests(&self) -> Vec<StsRequest> {
        self.state.sts.lock().clone()
    }

    /// The underlying server: request log and fault plan.
    pub fn server(&self) -> &MockServer {
        &self.server
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forms_decode_plus_and_percent() {
        assert_eq!(
            form(b"Action=AssumeRoleWithWebIdentity&RoleArn=arn%3Aaws%3Aiam%3A%3A1%3Arole%2Fr&T=a+b%2B&E="),
            vec![
                ("Action".to_owned(), "AssumeRoleWithWebIdentity".to_owned()),
                ("RoleArn".to_owned(), "arn:aws:iam::1:role/r".to_owned()),
                ("T".to_owned(), "a b+".to_owned()),
                ("E".to_owned(), String::new()),
            ]
        );
    }

    #[test]
    fn session_names_follow_the_sts_pattern() {
        assert!(valid_session_name("web-identity-token-1700000000000"));
        assert!(valid_session_name("a.b@c=d,e+f_g"));
        assert!(!valid_session_name("a"));
        assert!(!valid_session_name("has space"));
        assert!(!valid_session_name(&"x".repeat(65)));
    }

    #[test]
    fn sts_request_debug_redacts_the_token() {
        let r = StsRequest {
            role_arn: "arn".into(),
            role_session_name: "s".into(),
            web_identity_token: "jwt-secret".into(),
            duration_seconds: None,
            policy: None,
        };
        assert!(!format!("{r:?}").contains("jwt-secret"));
    }
}
