//! The S3 mock's [`Gate`]: authenticates every request (SigV4, checked independently of any
//! client signer), answers what real S3 answers when it fails, routes bucket-level requests,
//! and lets object reads through to the server's object handler.

use std::collections::{HashMap, HashSet};
use std::fmt::Write as _;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::time::{Duration, SystemTime};

use parking_lot::{Mutex, RwLock};

use super::sigv4::{self, Authorization, CanonicalInput};
use super::{SignatureFailure, SignatureFailureKind};
use crate::aws::MockCredentials;
use crate::awstime;
use crate::http::{Gate, GateResponse, RequestHead};

/// How far `x-amz-date` may be from the mock's clock.
const MAX_SKEW: Duration = Duration::from_secs(15 * 60);

/// The settings of one bucket.
#[derive(Debug, Clone, Default)]
pub(super) struct Bucket {
    /// `None`: the mock's region.
    pub(super) region: Option<String>,
    pub(super) public: bool,
    pub(super) requester_pays: bool,
}

/// What the [`S3Mock`](super::S3Mock) handle shares with its gate.
#[derive(Debug)]
pub(super) struct S3State {
    region: String,
    /// Answer wrong-region requests with 301 `PermanentRedirect` instead of 400.
    redirect_wrong_region: bool,
    credentials: RwLock<HashMap<String, MockCredentials>>,
    revoked: RwLock<HashSet<String>>,
    buckets: RwLock<HashMap<String, Bucket>>,
    failures: Mutex<Vec<SignatureFailure>>,
    wrong_region: AtomicU64,
    expired: AtomicU64,
    clock_offset: AtomicI64,
    request_ids: AtomicU64,
}

impl S3State {
    pub(super) fn new(region: String, redirect_wrong_region: bool) -> Self {
        Self {
            region,
            redirect_wrong_region,
            credentials: RwLock::default(),
            revoked: RwLock::default(),
            buckets: RwLock::default(),
            failures: Mutex::default(),
            wrong_region: AtomicU64::new(0),
            expired: AtomicU64::new(0),
            clock_offset: AtomicI64::new(0),
            request_ids: AtomicU64::new(0),
        }
    }

    pub(super) fn region(&self) -> &str {
        &self.region
    }

    pub(super) fn add_credentials(&self, creds: MockCredentials) {
        self.revoked.write().remove(&creds.access_key_id);
        self.credentials
            .write()
            .insert(creds.access_key_id.clone(), creds);
    }

    pub(super) fn revoke(&self, access_key_id: &str) {
        self.revoked.write().insert(access_key_id.to_owned());
    }

    pub(super) fn update_bucket(&self, name: &str, f: impl FnOnce(&mut Bucket)) {
        f(self.buckets.write().entry(name.to_owned()).or_default());
    }

    fn bucket(&self, name: &str) -> Option<Bucket> {
        self.buckets.read().get(name).cloned()
    }

    fn bucket_region(&self, bucket: &Bucket) -> String {
        bucket.region.clone().unwrap_or_else(|| self.region.clone())
    }

    pub(super) fn set_clock_offset(&self, offset_secs: i64) {
        self.clock_offset.store(offset_secs, Ordering::Relaxed);
    }

    fn now(&self) -> SystemTime {
        awstime::shifted(SystemTime::now(), self.clock_offset.load(Ordering::Relaxed))
    }

    pub(super) fn failures(&self) -> Vec<SignatureFailure> {
        self.failures.lock().clone()
    }

    pub(super) fn take_failures(&self) -> Vec<SignatureFailure> {
        std::mem::take(&mut *self.failures.lock())
    }

    pub(super) fn wrong_region_answers(&self) -> u64 {
        self.wrong_region.load(Ordering::Relaxed)
    }

    pub(super) fn expired_token_answers(&self) -> u64 {
        self.expired.load(Ordering::Relaxed)
    }

    fn request_id(&self) -> String {
        format!(
            "53334D4F{:08X}",
            self.request_ids.fetch_add(1, Ordering::Relaxed) + 1
        )
    }
}

/// An S3 error answer.
#[derive(Debug)]
struct S3Error {
    status: u16,
    code: &'static str,
    message: String,
    /// Extra elements after `<Message>`, in order.
    fields: Vec<(&'static str, String)>,
    /// Extra response headers.
    headers: Vec<(&'static str, String)>,
}

impl S3Error {
    fn new(status: u16, code: &'static str, message: impl Into<String>) -> Self {
        Self {
            status,
            code,
            message: message.into(),
            fields: Vec::new(),
            headers: Vec::new(),
        }
    }

    fn field(mut self, name: &'static str, value: impl Into<String>) -> Self {
        self.fields.push((name, value.into()));
        self
    }

    fn header(mut self, name: &'static str, value: impl Into<String>) -> Self {
        self.headers.push((name, value.into()));
        self
    }

    fn into_response(self, request_id: &str) -> GateResponse {
        let esc = |s: &str| quick_xml::escape::escape(s).into_owned();
        let host_id = format!("karu-testkit/{request_id}");
        let mut body = format!(
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>{}</Code><Message>{}</Message>",
            self.code,
            esc(&self.message)
        );
        for (name, value) in &self.fields {
            let _ = write!(body, "<{name}>{}</{name}>", esc(value));
        }
        let _ = write!(
            body,
            "<RequestId>{request_id}</RequestId><HostId>{}</HostId></Error>",
            esc(&host_id)
        );
        let mut response = GateResponse::new(self.status, body)
            .header("content-type", "application/xml")
            .header("x-amz-request-id", request_id)
            .header("x-amz-id-2", host_id);
        for (name, value) in self.headers {
            response = response.header(name, value);
        }
        response
    }
}

/// A rejected request: what to answer and what to record.
#[derive(Debug)]
struct Rejection {
    kind: SignatureFailureKind,
    error: S3Error,
    access_key_id: Option<String>,
    detail: String,
}

fn reject(kind: SignatureFailureKind, error: S3Error, detail: impl Into<String>) -> Box<Rejection> {
    Box::new(Rejection {
        kind,
        error,
        access_key_id: None,
        detail: detail.into(),
    })
}

impl Rejection {
    fn key(mut self: Box<Self>, access_key_id: &str) -> Box<Self> {
        self.access_key_id = Some(access_key_id.to_owned());
        self
    }
}

/// The bytes of `s` as S3 lists them in `...Bytes` elements: `47 45 54 ...`.
fn spaced_hex(s: &str) -> String {
    let mut out = String::with_capacity(s.len() * 3);
    for (i, b) in s.bytes().enumerate() {
        if i > 0 {
            out.push(' ');
        }
        let _ = write!(out, "{b:02x}");
    }
    out
}

/// Where a path-style request points.
#[derive(Debug)]
struct Target<'a> {
    /// The decoded bucket name, if the path names one.
    bucket: Option<String>,
    /// The raw (still encoded) key, empty for bucket-level requests.
    key: &'a str,
    /// The query names query-string authentication.
    presigned: bool,
    /// `?location` (GetBucketLocation).
    location: bool,
}

impl<'a> Target<'a> {
    fn parse(path: &'a str, query: Option<&str>) -> Self {
        let rest = path.strip_prefix('/').unwrap_or(path);
        let (bucket, key) = rest.split_once('/').unwrap_or((rest, ""));
        let names: Vec<String> = query
            .unwrap_or("")
            .split('&')
            .filter(|p| !p.is_empty())
            .map(|p| {
                let name = p.split_once('=').map_or(p, |(n, _)| n);
                String::from_utf8_lossy(&sigv4::decode(name)).into_owned()
            })
            .collect();
        let presigned = names.iter().any(|n| {
            ["x-amz-signature", "x-amz-credential", "x-amz-algorithm"]
                .iter()
                .any(|p| n.eq_ignore_ascii_case(p))
        });
        Self {
            bucket: (!bucket.is_empty())
                .then(|| String::from_utf8_lossy(&sigv4::decode(bucket)).into_owned()),
            key,
            presigned,
            location: names.iter().any(|n| n == "location"),
        }
    }
}

/// The [`Gate`] of an [`S3Mock`](super::S3Mock).
#[derive(Debug)]
pub(super) struct S3Gate {
    state: std::sync::Arc<S3State>,
}

impl S3Gate {
    pub(super) fn new(state: std::sync::Arc<S3State>) -> Self {
        Self { state }
    }

    /// `Ok(None)`: let the request through to the object handler; `Ok(Some)`: a non-auth
    /// answer; `Err`: a rejection to record.
    fn decide(&self, req: &RequestHead) -> Result<Option<S3Answer>, Box<Rejection>> {
        use SignatureFailureKind as K;
        let state = &self.state;
        let target = Target::parse(&req.path, req.query.as_deref());
        if target.presigned {
            return Err(reject(
                K::PresignedUnsupported,
                S3Error::new(
                    403,
                    "AccessDenied",
                    "Query-string authentication (presigned URLs) is not supported by the karu-testkit S3 mock; sign the Authorization header.",
                ),
                "presigned URL",
            ));
        }
        let bucket = target.bucket.as_deref().and_then(|b| state.bucket(b));

        let Some(header) = req.header("authorization") else {
            let anonymous_read = matches!(req.method.as_str(), "GET" | "HEAD");
            return match (&target.bucket, &bucket) {
                (Some(name), None) => Ok(Some(S3Answer::NoSuchBucket(name.clone()))),
                (Some(_), Some(b)) if b.public && !b.requester_pays && anonymous_read => {
                    Ok(self.route(&target, bucket.as_ref(), req))
                }
                _ => Err(reject(
                    K::MissingAuthentication,
                    S3Error::new(403, "AccessDenied", "Access Denied"),
                    "no Authorization header",
                )),
            };
        };

        let auth = sigv4::parse_authorization(header).map_err(|why| {
            let error = if header.trim_start().starts_with(sigv4::ALGORITHM) {
                S3Error::new(
                    400,
                    "AuthorizationHeaderMalformed",
                    format!("The authorization header is malformed; {why}."),
                )
            } else {
                S3Error::new(
                    400,
                    "InvalidRequest",
                    "The authorization mechanism you have provided is not supported. Please use AWS4-HMAC-SHA256.",
                )
            };
            reject(K::MalformedAuthorization, error, why)
        })?;
        let akid = auth.access_key_id.as_str();
        let malformed = |why: String| {
            reject(
                K::MalformedAuthorization,
                S3Error::new(
                    400,
                    "AuthorizationHeaderMalformed",
                    format!("The authorization header is malformed; {why}."),
                ),
                why,
            )
            .key(akid)
        };
        if auth.service != "s3" {
            return Err(malformed(format!(
                "incorrect service \"{}\". This endpoint belongs to \"s3\"",
                auth.service
            )));
        }
        if auth.terminal != "aws4_request" {
            return Err(malformed(format!(
                "incorrect terminal \"{}\". This endpoint uses \"aws4_request\"",
                auth.terminal
            )));
        }
        if !auth.signed_headers.iter().any(|h| h == "host") {
            return Err(malformed("the host header must be signed".to_owned()));
        }

        let Some(creds) = state.credentials.read().get(akid).cloned() else {
            return Err(reject(
                K::UnknownAccessKey,
                S3Error::new(
                    403,
                    "InvalidAccessKeyId",
                    "The AWS Access Key Id you provided does not exist in our records.",
                )
                .field("AWSAccessKeyId", akid),
                "unknown access key id",
            )
            .key(akid));
        };
        if state.revoked.read().contains(akid) {
            state.expired.fetch_add(1, Ordering::Relaxed);
            let mut error = S3Error::new(400, "ExpiredToken", "The provided token has expired.");
            if let Some(token) = req.header("x-amz-security-token") {
                error = error.field("Token-0", token);
            }
            return Err(reject(K::ExpiredToken, error, "revoked access key").key(akid));
        }

        let now = state.now();
        let amz_date = req.header("x-amz-date").unwrap_or("");
        let Some(request_time) = awstime::parse_amz_date(amz_date) else {
            return Err(reject(
                K::MissingDate,
                S3Error::new(
                    403,
                    "AccessDenied",
                    "AWS authentication requires a valid Date or x-amz-date header",
                ),
                "no valid x-amz-date header",
            )
            .key(akid));
        };
        let skewed = |kind, detail: String| {
            reject(
                kind,
                S3Error::new(
                    403,
                    "RequestTimeTooSkewed",
                    "The difference between the request time and the current time is too large.",
                )
                .field("RequestTime", amz_date)
                .field("ServerTime", awstime::rfc3339(now))
                .field("MaxAllowedSkewMilliseconds", "900000"),
                detail,
            )
            .key(akid)
        };
        if awstime::distance(now, request_time) > MAX_SKEW {
            return Err(skewed(
                K::RequestTimeTooSkewed,
                format!(
                    "x-amz-date {amz_date} is more than 15 minutes from the server's {}",
                    awstime::amz_date(now)
                ),
            ));
        }
        if !amz_date.starts_with(&auth.date) || auth.date.len() != 8 {
            return Err(skewed(
                K::ScopeDateMismatch,
                format!(
                    "credential scope date {} is not the day of x-amz-date {amz_date}",
                    auth.date
                ),
            ));
        }

        if let (Some(name), None) = (&target.bucket, &bucket) {
            return Ok(Some(S3Answer::NoSuchBucket(name.clone())));
        }
        if let (Some(name), Some(b)) = (&target.bucket, &bucket) {
            let region = state.bucket_region(b);
            if auth.region != region && !(target.location && target.key.is_empty()) {
                state.wrong_region.fetch_add(1, Ordering::Relaxed);
                let error = if state.redirect_wrong_region {
                    S3Error::new(
                        301,
                        "PermanentRedirect",
                        "The bucket you are attempting to access must be addressed using the specified endpoint. Please send all future requests to this endpoint.",
                    )
                    .field("Endpoint", req.header("host").unwrap_or("127.0.0.1"))
                    .field("Bucket", name.as_str())
                } else {
                    S3Error::new(
                        400,
                        "AuthorizationHeaderMalformed",
                        format!(
                            "The authorization header is malformed; the region '{}' is wrong; expecting '{region}'",
                            auth.region
                        ),
                    )
                    .field("Region", region.as_str())
                };
                return Err(reject(
                    K::WrongRegion,
                    error.header("x-amz-bucket-region", region.as_str()),
                    format!(
                        "signed for region {}, bucket {name} is in {region}",
                        auth.region
                    ),
                )
                .key(akid));
            }
        }

        let payload_hash = check_payload_hash(req).map_err(|r| r.key(akid))?;

        let unsigned: Vec<&str> = req
            .headers
            .iter()
            .map(|(n, _)| n.as_str())
            .filter(|n| n.starts_with("x-amz-") && !auth.signed_headers.iter().any(|s| s == n))
            .collect();
        if !unsigned.is_empty() {
            let list = unsigned.join(",");
            return Err(reject(
                K::UnsignedHeader,
                S3Error::new(
                    403,
                    "AccessDenied",
                    "There were headers present in the request which were not signed",
                )
                .field("HeadersNotSigned", list.as_str()),
                format!("headers sent but not signed: {list}"),
            )
            .key(akid));
        }

        let sent_token = req.header("x-amz-security-token");
        let invalid_token = || {
            reject(
                K::InvalidSecurityToken,
                S3Error::new(
                    400,
                    "InvalidToken",
                    "The provided token is malformed or otherwise invalid.",
                ),
                "x-amz-security-token is not the session token of this access key",
            )
            .key(akid)
        };
        match (&creds.session_token, sent_token) {
            (Some(_), None) => {
                return Err(reject(
                    K::MissingSecurityToken,
                    S3Error::new(
                        403,
                        "InvalidAccessKeyId",
                        "The AWS Access Key Id you provided does not exist in our records.",
                    )
                    .field("AWSAccessKeyId", akid),
                    "temporary access key used without x-amz-security-token",
                )
                .key(akid));
            }
            (Some(token), Some(sent)) if !sigv4::constant_time_eq(token, sent) => {
                return Err(invalid_token());
            }
            (None, Some(_)) => return Err(invalid_token()),
            _ => {}
        }

        verify_signature(req, &auth, &creds, amz_date, payload_hash)?;

        if let Some(b) = &bucket
            && b.requester_pays
            && req.header("x-amz-request-payer") != Some("requester")
        {
            return Err(reject(
                K::RequesterPaysMissing,
                S3Error::new(403, "AccessDenied", "Access Denied"),
                "requester-pays bucket read without x-amz-request-payer: requester",
            )
            .key(akid));
        }

        Ok(self.route(&target, bucket.as_ref(), req))
    }

    /// Routes an authenticated request: bucket-level answers, or `None` for the object handler.
    fn route(
        &self,
        target: &Target<'_>,
        bucket: Option<&Bucket>,
        req: &RequestHead,
    ) -> Option<S3Answer> {
        let (Some(_), Some(bucket)) = (&target.bucket, bucket) else {
            return Some(S3Answer::NotImplemented("ListBuckets"));
        };
        if !target.key.is_empty() {
            return None;
        }
        let region = self.state.bucket_region(bucket);
        match req.method.as_str() {
            "HEAD" => Some(S3Answer::HeadBucket(region)),
            "GET" if target.location => Some(S3Answer::Location(region)),
            _ => Some(S3Answer::NotImplemented("this bucket operation")),
        }
    }
}

/// Checks `x-amz-content-sha256` and returns it.
fn check_payload_hash(req: &RequestHead) -> Result<&str, Box<Rejection>> {
    use SignatureFailureKind as K;
    let Some(value) = req.header("x-amz-content-sha256") else {
        return Err(reject(
            K::PayloadHash,
            S3Error::new(
                400,
                "InvalidRequest",
                "Missing required header for this request: x-amz-content-sha256",
            ),
            "no x-amz-content-sha256 header",
        ));
    };
    if value == "UNSIGNED-PAYLOAD" {
        return Ok(value);
    }
    if value.len() != 64 || !value.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(reject(
            K::PayloadHash,
            S3Error::new(
                400,
                "InvalidArgument",
                "x-amz-content-sha256 must be UNSIGNED-PAYLOAD, or a valid sha256 value.",
            )
            .field("ArgumentName", "x-amz-content-sha256")
            .field("ArgumentValue", value),
            format!("x-amz-content-sha256 {value:?} is neither UNSIGNED-PAYLOAD nor a SHA-256"),
        ));
    }
    let actual = sigv4::sha256_hex(&req.body);
    if !value.eq_ignore_ascii_case(&actual) {
        return Err(reject(
            K::PayloadHash,
            S3Error::new(
                400,
                "XAmzContentSHA256Mismatch",
                "The provided 'x-amz-content-sha256' header does not match what was computed.",
            )
            .field("ClientComputedContentSHA256", value)
            .field("S3ComputedContentSHA256", actual.as_str()),
            "x-amz-content-sha256 is not the SHA-256 of the body",
        ));
    }
    Ok(value)
}

/// Recomputes the signature; a mismatch (or a signed header the request lacks) answers
/// `SignatureDoesNotMatch` with the server's string to sign and canonical request, as S3 does.
fn verify_signature(
    req: &RequestHead,
    auth: &Authorization,
    creds: &MockCredentials,
    amz_date: &str,
    payload_hash: &str,
) -> Result<(), Box<Rejection>> {
    // S3 signs the key it decodes from the path, encoded again in SigV4's one form: a path a
    // client encoded another way (a raw `+`, which S3 may even take for a space; lower-case
    // hex; an unreserved byte encoded) does not match what the client signed.
    let path = sigv4::uri_encode(&sigv4::decode(&req.path), true);
    let (canonical, missing) = sigv4::canonical_request(&CanonicalInput {
        method: &req.method,
        path: &path,
        query: req.query.as_deref(),
        headers: &req.headers,
        signed_headers: &auth.signed_headers,
        payload_hash,
    });
    let string_to_sign = sigv4::string_to_sign(amz_date, &auth.scope(), &canonical);
    let key = sigv4::signing_key(
        &creds.secret_access_key,
        &auth.date,
        &auth.region,
        &auth.service,
    );
    let expected = sigv4::signature(&key, &string_to_sign);
    let matches = sigv4::constant_time_eq(&expected, &auth.signature);
    if missing.is_empty() && matches {
        return Ok(());
    }
    let (kind, detail) = if missing.is_empty() {
        (
            SignatureFailureKind::SignatureMismatch,
            "the signature does not match the request (wrong secret, or a signed part changed)"
                .to_owned(),
        )
    } else {
        (
            SignatureFailureKind::SignedHeaderMissing,
            format!(
                "signed headers missing from the request: {}",
                missing.join(",")
            ),
        )
    };
    let error = S3Error::new(
        403,
        "SignatureDoesNotMatch",
        "The request signature we calculated does not match the signature you provided. Check your key and signing method.",
    )
    .field("AWSAccessKeyId", auth.access_key_id.as_str())
    .field("StringToSign", string_to_sign.as_str())
    .field("SignatureProvided", auth.signature.as_str())
    .field("StringToSignBytes", spaced_hex(&string_to_sign))
    .field("CanonicalRequest", canonical.as_str())
    .field("CanonicalRequestBytes", spaced_hex(&canonical));
    Err(reject(kind, error, detail).key(&auth.access_key_id))
}

/// An answer that is not a rejection.
#[derive(Debug)]
enum S3Answer {
    NoSuchBucket(String),
    /// `HEAD /bucket`: 200 with the bucket's region.
    HeadBucket(String),
    /// `GET /bucket?location`.
    Location(String),
    NotImplemented(&'static str),
}

impl Gate for S3Gate {
    fn check(&self, request: &RequestHead) -> Option<GateResponse> {
        let id = self.state.request_id();
        match self.decide(request) {
            Ok(None) => None,
            Ok(Some(answer)) => Some(match answer {
                S3Answer::NoSuchBucket(name) => {
                    S3Error::new(404, "NoSuchBucket", "The specified bucket does not exist")
                        .field("BucketName", name)
                        .into_response(&id)
                }
                S3Answer::HeadBucket(region) => GateResponse::new(200, "")
                    .header("x-amz-bucket-region", region)
                    .header("x-amz-request-id", id),
                S3Answer::Location(region) => {
                    // S3 answers an empty constraint for us-east-1.
                    let constraint = if region == "us-east-1" { "" } else { &region };
                    GateResponse::new(
                        200,
                        format!(
                            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<LocationConstraint xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">{}</LocationConstraint>",
                            quick_xml::escape::escape(constraint)
                        ),
                    )
                    .header("content-type", "application/xml")
                    .header("x-amz-request-id", id)
                }
                S3Answer::NotImplemented(what) => S3Error::new(
                    501,
                    "NotImplemented",
                    format!("The karu-testkit S3 mock does not implement {what}."),
                )
                .into_response(&id),
            }),
            Err(rejection) => {
                let rejection = *rejection;
                self.state.failures.lock().push(SignatureFailure {
                    kind: rejection.kind,
                    access_key_id: rejection.access_key_id,
                    method: request.method.clone(),
                    path: request.path.clone(),
                    status: rejection.error.status,
                    code: rejection.error.code.to_owned(),
                    detail: rejection.detail,
                });
                Some(rejection.error.into_response(&id))
            }
        }
    }

    fn object_path(&self, request: &RequestHead) -> Option<String> {
        let target = Target::parse(&request.path, None);
        let bucket = target.bucket?;
        (!target.key.is_empty()).then(|| {
            format!(
                "/{bucket}/{}",
                sigv4::uri_encode(&sigv4::decode(target.key), true)
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_of_path_style_requests() {
        let t = Target::parse("/b/dir/a%20b", Some("x-id=GetObject"));
        assert_eq!(
            (t.bucket.as_deref(), t.key, t.presigned),
            (Some("b"), "dir/a%20b", false)
        );
        let t = Target::parse("/b", Some("location"));
        assert_eq!(
            (t.bucket.as_deref(), t.key, t.location),
            (Some("b"), "", true)
        );
        let t = Target::parse("/b/", None);
        assert_eq!((t.bucket.as_deref(), t.key), (Some("b"), ""));
        assert_eq!(Target::parse("/", None).bucket, None);
        assert!(Target::parse("/b/k", Some("X-Amz-Signature=00&a=b")).presigned);
    }

    #[test]
    fn bytes_are_listed_like_s3() {
        assert_eq!(spaced_hex("GET\n"), "47 45 54 0a");
    }
}
