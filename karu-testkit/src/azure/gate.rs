//! The Azure mock's [`Gate`]: authenticates every request as the Blob service does (Shared Key
//! recomputed independently, SAS tokens the mock issued, bearer tokens it issued), records which
//! identity each request carried, and answers failures in the service's format.

use std::collections::HashMap;
use std::net::Ipv4Addr;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::time::{Duration, SystemTime};

use parking_lot::{Mutex, RwLock};
use percent_encoding::percent_decode_str;

use super::sas::{self, Access, Refusal};
use super::{AuthFailure, AuthRecord, Identity, blob_path, sharedkey};
use crate::awstime;
use crate::http::{Gate, GateResponse, RequestHead};

/// How far `x-ms-date` may be from the mock's clock.
const MAX_SKEW: Duration = Duration::from_secs(15 * 60);

#[derive(Debug, Clone)]
struct Token {
    identity: String,
    expires: SystemTime,
}

/// What the [`AzureMock`](super::AzureMock) handle shares with its gate.
#[derive(Debug)]
pub(super) struct AzureState {
    pub(super) account: String,
    pub(super) key: Vec<u8>,
    /// Container name to whether it is public.
    containers: RwLock<HashMap<String, bool>>,
    tokens: RwLock<HashMap<String, Token>>,
    log: Mutex<Vec<AuthRecord>>,
    clock_offset: AtomicI64,
    request_ids: AtomicU64,
}

impl AzureState {
    pub(super) fn new(account: String, key: Vec<u8>) -> Self {
        AzureState {
            account,
            key,
            containers: RwLock::default(),
            tokens: RwLock::default(),
            log: Mutex::default(),
            clock_offset: AtomicI64::new(0),
            request_ids: AtomicU64::new(0),
        }
    }

    pub(super) fn now(&self) -> SystemTime {
        awstime::shifted(SystemTime::now(), self.clock_offset.load(Ordering::Relaxed))
    }

    pub(super) fn set_clock_offset(&self, secs: i64) {
        self.clock_offset.store(secs, Ordering::Relaxed);
    }

    pub(super) fn create_container(&self, container: &str) {
        self.containers
            .write()
            .entry(container.to_owned())
            .or_insert(false);
    }

    pub(super) fn set_public(&self, container: &str, public: bool) {
        self.containers.write().insert(container.to_owned(), public);
    }

    pub(super) fn add_token(&self, token: String, identity: String, expires: SystemTime) {
        self.tokens
            .write()
            .insert(token, Token { identity, expires });
    }

    pub(super) fn expire_tokens(&self) {
        let past = self.now() - Duration::from_secs(1);
        for token in self.tokens.write().values_mut() {
            token.expires = past;
        }
    }

    pub(super) fn log(&self) -> Vec<AuthRecord> {
        self.log.lock().clone()
    }

    pub(super) fn take_log(&self) -> Vec<AuthRecord> {
        std::mem::take(&mut *self.log.lock())
    }

    fn error(&self, status: u16, code: &str, message: &str, detail: Option<&str>) -> GateResponse {
        let id = self.request_ids.fetch_add(1, Ordering::Relaxed);
        let request_id = format!("00000000-0000-0000-0000-{id:012x}");
        let detail = detail
            .map(|d| {
                let d = d
                    .replace('&', "&amp;")
                    .replace('<', "&lt;")
                    .replace('>', "&gt;");
                format!("<AuthenticationErrorDetail>{d}</AuthenticationErrorDetail>")
            })
            .unwrap_or_default();
        let body = format!(
            "\u{feff}<?xml version=\"1.0\" encoding=\"utf-8\"?><Error><Code>{code}</Code>\
             <Message>{message}\nRequestId:{request_id}\nTime:{}</Message>{detail}</Error>",
            awstime::rfc3339(self.now())
        );
        GateResponse::new(status, body)
            .header("content-type", "application/xml")
            .header("x-ms-error-code", code)
            .header("x-ms-request-id", request_id)
    }

    fn authenticate(
        &self,
        request: &RequestHead,
        container: &str,
        blob: Option<&str>,
    ) -> (Identity, Result<(), (AuthFailure, GateResponse)>) {
        let query = request.query.as_deref().unwrap_or("");
        let param = |name: &str| {
            query.split('&').find_map(|pair| {
                let (n, v) = pair.split_once('=')?;
                (n == name).then(|| percent_decode_str(v).decode_utf8_lossy().into_owned())
            })
        };
        let authorization = request.header("authorization");
        let version = request.header("x-ms-version");
        if param("sig").is_some() {
            return (Identity::Sas, self.check_sas(query, container, blob));
        }
        let Some(authorization) = authorization else {
            let public = self.containers.read().get(container).copied() == Some(true);
            let result = if public {
                Ok(())
            } else {
                Err((
                    AuthFailure::MissingAuthentication,
                    self.error(
                        401,
                        "NoAuthenticationInformation",
                        "Server failed to authenticate the request. Please refer to the information in the www-authenticate header.",
                        None,
                    ),
                ))
            };
            return (Identity::Anonymous, result);
        };
        if version.is_none() {
            let identity = Identity::Unknown;
            return (
                identity,
                Err((
                    AuthFailure::MissingVersion,
                    self.error(
                        400,
                        "MissingRequiredHeader",
                        "An HTTP header that's mandatory for this request is not specified.",
                        None,
                    ),
                )),
            );
        }
        if let Some(rest) = authorization.strip_prefix("SharedKey ") {
            let (account, signature) = rest.split_once(':').unwrap_or((rest, ""));
            let identity = Identity::SharedKey {
                account: account.to_owned(),
            };
            return (identity, self.check_shared_key(request, account, signature));
        }
        if let Some(token) = authorization.strip_prefix("Bearer ") {
            let known = self.tokens.read().get(token).cloned();
            return match known {
                None => (
                    Identity::Unknown,
                    Err((
                        AuthFailure::UnknownToken,
                        self.error(
                            401,
                            "InvalidAuthenticationInfo",
                            "Server failed to authenticate the request.",
                            Some("Signature validation failed."),
                        )
                        .header("www-authenticate", "Bearer error=\"invalid_token\""),
                    )),
                ),
                Some(t) if t.expires <= self.now() => (
                    Identity::Bearer {
                        identity: t.identity,
                    },
                    Err((
                        AuthFailure::ExpiredToken,
                        self.error(
                            401,
                            "InvalidAuthenticationInfo",
                            "Server failed to authenticate the request.",
                            Some("Lifetime validation failed. The token is expired."),
                        )
                        .header(
                            "www-authenticate",
                            "Bearer error=\"invalid_token\", error_description=\"The access token is expired\"",
                        ),
                    )),
                ),
                Some(t) => (
                    Identity::Bearer {
                        identity: t.identity,
                    },
                    Ok(()),
                ),
            };
        }
        (
            Identity::Unknown,
            Err((
                AuthFailure::MalformedAuthorization,
                self.error(
                    400,
                    "InvalidAuthenticationInfo",
                    "Authentication information is not given in the correct format.",
                    None,
                ),
            )),
        )
    }

    fn check_shared_key(
        &self,
        request: &RequestHead,
        account: &str,
        signature: &str,
    ) -> Result<(), (AuthFailure, GateResponse)> {
        let fail = |kind, detail: &str| {
            Err((
                kind,
                self.error(
                    403,
                    "AuthenticationFailed",
                    "Server failed to authenticate the request. Make sure the value of Authorization header is formed correctly including the signature.",
                    Some(detail),
                ),
            ))
        };
        if account != self.account {
            return fail(
                AuthFailure::UnknownAccount,
                "The account is not this service's.",
            );
        }
        let date = request
            .header("x-ms-date")
            .or_else(|| request.header("date"))
            .and_then(|d| httpdate::parse_http_date(d).ok());
        let Some(date) = date else {
            return fail(
                AuthFailure::MissingDate,
                "The request has no valid x-ms-date or Date header.",
            );
        };
        if awstime::distance(date, self.now()) > MAX_SKEW {
            return fail(
                AuthFailure::RequestTimeTooSkewed,
                "Request date header too old or too far in the future.",
            );
        }
        let text = sharedkey::string_to_sign(request, &self.account);
        if sharedkey::sign(&self.key, &text) != signature {
            let shown = text.replace('\n', "\\n");
            return fail(
                AuthFailure::SignatureMismatch,
                &format!(
                    "The MAC signature found in the HTTP request is not the same as any computed signature. Server used following string to sign: '{shown}'."
                ),
            );
        }
        Ok(())
    }

    /// A SAS in the query, verified as the service does ([`sas::verify`]) on the mock's
    /// clock; refusals answer 403 with the service's codes.
    fn check_sas(
        &self,
        query: &str,
        container: &str,
        blob: Option<&str>,
    ) -> Result<(), (AuthFailure, GateResponse)> {
        let access = Access {
            account: &self.account,
            key: &self.key,
            container,
            blob,
            now: self.now(),
            tls: false,
            client: Ipv4Addr::LOCALHOST,
        };
        let Err(refusal) = sas::verify(query, &access) else {
            return Ok(());
        };
        const FAILED: &str = "Server failed to authenticate the request. Make sure the value of Authorization header is formed correctly including the signature.";
        let date = |t: SystemTime| httpdate::fmt_http_date(t);
        let (kind, code, message, detail) = match refusal {
            Refusal::Malformed(why) => (
                AuthFailure::SasMalformed,
                "AuthenticationFailed",
                FAILED,
                Some(why),
            ),
            Refusal::Unsupported(why) => (
                AuthFailure::SasUnsupported,
                "AuthenticationFailed",
                FAILED,
                Some(format!("Not verified by the mock: {why}.")),
            ),
            Refusal::Signature { string_to_sign } => (
                AuthFailure::SasMismatch,
                "AuthenticationFailed",
                FAILED,
                Some(format!(
                    "Signature did not match. String to sign used was {string_to_sign}"
                )),
            ),
            Refusal::Expired { expiry, now } => (
                AuthFailure::SasExpired,
                "AuthenticationFailed",
                FAILED,
                Some(format!(
                    "Signed expiry time [{}] must be after signed start time [{}]",
                    date(expiry),
                    date(now)
                )),
            ),
            Refusal::NotYetValid { start, now } => (
                AuthFailure::SasNotYetValid,
                "AuthenticationFailed",
                FAILED,
                Some(format!(
                    "Signed start time [{}] must be before the current time [{}]",
                    date(start),
                    date(now)
                )),
            ),
            Refusal::Protocol => (
                AuthFailure::SasProtocol,
                "AuthorizationProtocolMismatch",
                "This request is not authorized to perform this operation using this protocol.",
                None,
            ),
            Refusal::SourceIp => (
                AuthFailure::SasSourceIp,
                "AuthorizationSourceIPMismatch",
                "This request is not authorized to perform this operation using this source IP 127.0.0.1.",
                None,
            ),
            Refusal::Service => (
                AuthFailure::SasService,
                "AuthorizationServiceMismatch",
                "This request is not authorized to perform this operation using this service.",
                None,
            ),
            Refusal::ResourceType => (
                AuthFailure::SasResourceType,
                "AuthorizationResourceTypeMismatch",
                "This request is not authorized to perform this operation using this resource type.",
                None,
            ),
            Refusal::Permission => (
                AuthFailure::SasPermission,
                "AuthorizationPermissionMismatch",
                "This request is not authorized to perform this operation using this permission.",
                None,
            ),
        };
        Err((kind, self.error(403, code, message, detail.as_deref())))
    }
}

/// The gate of one [`AzureMock`](super::AzureMock).
#[derive(Debug)]
pub(super) struct AzureGate {
    state: std::sync::Arc<AzureState>,
}

impl AzureGate {
    pub(super) fn new(state: std::sync::Arc<AzureState>) -> Self {
        AzureGate { state }
    }
}

impl Gate for AzureGate {
    fn check(&self, request: &RequestHead) -> Option<GateResponse> {
        let state = &self.state;
        let prefix = format!("/{}/", state.account);
        let Some(rest) = request.path.strip_prefix(&prefix) else {
            return Some(state.error(
                400,
                "InvalidUri",
                "The requested URI does not represent any resource on the server.",
                None,
            ));
        };
        let (container, blob) = rest.split_once('/').unwrap_or((rest, ""));
        let blob = percent_decode_str(blob).decode_utf8_lossy();
        let blob = (!blob.is_empty()).then_some(blob.as_ref());
        let (identity, result) = state.authenticate(request, container, blob);
        let failure = result.as_ref().err().map(|(kind, _)| *kind);
        state.log.lock().push(AuthRecord {
            method: request.method.clone(),
            path: request.path.clone(),
            identity,
            failure,
        });
        if let Err((_, response)) = result {
            return Some(response);
        }
        if !state.containers.read().contains_key(container) {
            return Some(state.error(
                404,
                "ContainerNotFound",
                "The specified container does not exist.",
                None,
            ));
        }
        if !matches!(request.method.as_str(), "GET" | "HEAD") {
            return Some(state.error(
                405,
                "UnsupportedHttpVerb",
                "The resource doesn't support the specified HTTP verb.",
                None,
            ));
        }
        None
    }

    /// Any encoding of a blob name finds the blob stored under the canonical one.
    fn object_path(&self, request: &RequestHead) -> Option<String> {
        let decoded = percent_decode_str(&request.path).decode_utf8().ok()?;
        let rest = decoded.strip_prefix(&format!("/{}/", self.state.account))?;
        let (container, blob) = rest.split_once('/')?;
        Some(blob_path(&self.state.account, container, blob))
    }
}
