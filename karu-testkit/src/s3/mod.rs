//! An S3 mock: path-style `GET`/`HEAD` of objects with byte ranges, every request's SigV4
//! signature checked independently, and the error answers real S3 gives (wrong region, expired
//! token, skewed clock, bad signature), on top of the fault-injecting [`MockServer`].
//!
//! [`S3Mock`] installs a [`Gate`](crate::Gate) on a [`MockServer`]: the gate authenticates and
//! routes each request, the server's object handler serves the bytes (ranges, `If-Match`, 404,
//! 416) exactly as for the HTTP mock, and the whole fault matrix of the HTTP mock applies
//! ([`S3Mock::server`] gives the request log and the fault plan).
//!
//! What a request goes through, in order (the first failing step answers):
//! 1. query-string (presigned) authentication: 403 `AccessDenied` (not supported);
//! 2. no `Authorization`: the bucket must exist (404 `NoSuchBucket`), be
//!    [public](S3Mock::set_public) and not [requester pays](S3Mock::set_requester_pays), and the
//!    method be `GET` or `HEAD`; else 403 `AccessDenied`;
//! 3. the header must be `AWS4-HMAC-SHA256 Credential=AKID/DATE/REGION/s3/aws4_request,
//!    SignedHeaders=..., Signature=...` with `host` signed: else 400
//!    `AuthorizationHeaderMalformed` (400 `InvalidRequest` for other algorithms);
//! 4. the access key must be known (403 `InvalidAccessKeyId`) and not
//!    [revoked](S3Mock::revoke_credentials) (400 `ExpiredToken`);
//! 5. `x-amz-date` must be present and well formed (403 `AccessDenied`), within 15 minutes of
//!    the mock's clock, and on the scope's day (403 `RequestTimeTooSkewed` for both);
//! 6. the bucket must exist (404 `NoSuchBucket`) and the scope's region be the bucket's: else
//!    400 `AuthorizationHeaderMalformed` with `<Region>` and an `x-amz-bucket-region` header (or
//!    301 `PermanentRedirect`, see [`S3MockBuilder::wrong_region_status`]);
//!    `GET /bucket?location` is exempt, as on S3;
//! 7. `x-amz-content-sha256` must be present (400 `InvalidRequest`), `UNSIGNED-PAYLOAD` or a
//!    hex SHA-256 (400 `InvalidArgument`) equal to the body's (400 `XAmzContentSHA256Mismatch`);
//! 8. every `x-amz-*` header sent must be signed (403 `AccessDenied` with
//!    `<HeadersNotSigned>`);
//! 9. a key pair with a session token needs `x-amz-security-token` (403 `InvalidAccessKeyId`)
//!    equal to it (400 `InvalidToken`); a pair without one must not send one (400
//!    `InvalidToken`);
//! 10. the signature is recomputed (canonical URI: the path as sent, S3 does not encode it
//!     twice; query decoded, re-encoded and sorted; signed headers lower-cased, trimmed, inner
//!     spaces collapsed; a signed header missing from the request counts as empty, and is a
//!     failure of its own): a mismatch answers 403 `SignatureDoesNotMatch` with
//!     `<StringToSign>`, `<SignatureProvided>`, `<CanonicalRequest>` (and their `...Bytes`
//!     forms), as S3 does;
//! 11. a requester-pays bucket needs `x-amz-request-payer: requester`: else 403
//!     `AccessDenied`;
//! 12. bucket-level requests: `HEAD /bucket` answers 200 with `x-amz-bucket-region`,
//!     `GET /bucket?location` the `LocationConstraint`, anything else 501 `NotImplemented`;
//!     object requests go on to the object handler.
//!
//! Every rejection in steps 1–11 is recorded in [`S3Mock::signature_failures`]. Error bodies
//! are `<?xml ...?><Error><Code>..</Code><Message>..</Message>...<RequestId>..</RequestId>
//! <HostId>..</HostId></Error>` with `Content-Type: application/xml` and the request id also in
//! `x-amz-request-id`.
//!
//! ```
//! use karu_testkit::S3Mock;
//!
//! let s3 = S3Mock::start();
//! s3.insert("bucket", "dir/a b.bin", vec![1u8; 100]);
//! assert_eq!(karu_testkit::s3::object_path("bucket", "dir/a b.bin"), "/bucket/dir/a%20b.bin");
//! assert!(s3.endpoint().starts_with("http://127.0.0.1:"));
//! let creds = s3.default_credentials();
//! assert_eq!(creds.access_key_id, "AKIDEXAMPLE");
//! // ... sign requests with `creds` for region `s3.region()` and send them to `s3.endpoint()`.
//! ```

mod gate;
pub(crate) mod sigv4;

use std::fmt;
use std::io;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;

use crate::aws::MockCredentials;
use crate::http::MockServer;

use gate::{S3Gate, S3State};

/// Why the S3 mock rejected a request (see [`SignatureFailure`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum SignatureFailureKind {
    /// No `Authorization` header on a request that needs one (403 `AccessDenied`).
    MissingAuthentication,
    /// Query-string (presigned URL) authentication, which the mock does not support (403
    /// `AccessDenied`).
    PresignedUnsupported,
    /// An `Authorization` header that is not well-formed SigV4, signs for another service, or
    /// does not sign `host` (400 `AuthorizationHeaderMalformed` or `InvalidRequest`).
    MalformedAuthorization,
    /// No valid `x-amz-date` header (403 `AccessDenied`).
    MissingDate,
    /// An access key id the mock does not know (403 `InvalidAccessKeyId`).
    UnknownAccessKey,
    /// A [revoked](S3Mock::revoke_credentials) access key (400 `ExpiredToken`).
    ExpiredToken,
    /// A key pair with a session token used without `x-amz-security-token` (403
    /// `InvalidAccessKeyId`).
    MissingSecurityToken,
    /// An `x-amz-security-token` that is not the key pair's (400 `InvalidToken`).
    InvalidSecurityToken,
    /// `x-amz-date` more than 15 minutes from the mock's clock (403 `RequestTimeTooSkewed`).
    RequestTimeTooSkewed,
    /// The credential scope's date is not `x-amz-date`'s day (403 `RequestTimeTooSkewed`).
    ScopeDateMismatch,
    /// Signed for a region that is not the bucket's (400 `AuthorizationHeaderMalformed` or 301
    /// `PermanentRedirect`, with `x-amz-bucket-region`).
    WrongRegion,
    /// `x-amz-content-sha256` missing, malformed, or not the body's hash (400).
    PayloadHash,
    /// An `x-amz-*` header sent but not signed (403 `AccessDenied`).
    UnsignedHeader,
    /// A header named in `SignedHeaders` that the request does not carry (403
    /// `SignatureDoesNotMatch`).
    SignedHeaderMissing,
    /// The recomputed signature differs: wrong secret, or a signed part changed (403
    /// `SignatureDoesNotMatch`).
    SignatureMismatch,
    /// A requester-pays bucket read without `x-amz-request-payer: requester` (403
    /// `AccessDenied`).
    RequesterPaysMissing,
}

/// One request the S3 mock rejected, and why. It never holds a secret: no secret key, session
/// token or signature.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SignatureFailure {
    /// Why.
    pub kind: SignatureFailureKind,
    /// The access key id the request was signed with, if it named one.
    pub access_key_id: Option<String>,
    /// The request method.
    pub method: String,
    /// The request path, as sent.
    pub path: String,
    /// The status answered.
    pub status: u16,
    /// The S3 error code answered (`SignatureDoesNotMatch`, ...).
    pub code: String,
    /// A human-readable detail (which header, which regions, ...).
    pub detail: String,
}

/// The request path of an object in path-style addressing, `/bucket/key`, with the key
/// encoded the way SigV4 clients send it (every byte but `A-Z a-z 0-9 - . _ ~ /` as `%XY`).
///
/// This is the path to use in [`FaultRule::path`](crate::FaultRule::path) and to look for in
/// the [request log](MockServer::requests).
pub fn object_path(bucket: &str, key: &str) -> String {
    format!("/{bucket}/{}", sigv4::uri_encode(key.as_bytes(), true))
}

/// Options of an [`S3Mock`], from [`S3Mock::builder`].
#[derive(Debug, Clone)]
pub struct S3MockBuilder {
    region: String,
    tls: bool,
    latency: Duration,
    wrong_region_status: u16,
}

impl Default for S3MockBuilder {
    fn default() -> Self {
        Self {
            region: "us-east-1".to_owned(),
            tls: false,
            latency: Duration::ZERO,
            wrong_region_status: 400,
        }
    }
}

impl S3MockBuilder {
    /// The mock's region, the default region of new buckets; default `us-east-1`.
    pub fn region(mut self, region: impl Into<String>) -> Self {
        self.region = region.into();
        self
    }

    /// Serve HTTPS with a generated CA (see [`MockServer::ca_pem`]); default off.
    pub fn tls(mut self, on: bool) -> Self {
        self.tls = on;
        self
    }

    /// Delay before the response headers of every request; default none.
    pub fn latency(mut self, latency: Duration) -> Self {
        self.latency = latency;
        self
    }

    /// How a request signed for the wrong region is answered: 400 (the default)
    /// `AuthorizationHeaderMalformed` with `<Region>`, or 301 `PermanentRedirect` (as some S3
    /// endpoints answer); both carry `x-amz-bucket-region`. Any other value means 400.
    pub fn wrong_region_status(mut self, status: u16) -> Self {
        self.wrong_region_status = status;
        self
    }

    /// Binds `127.0.0.1` on a free port and starts serving.
    pub fn start(self) -> io::Result<S3Mock> {
        let server = MockServer::builder()
            .tls(self.tls)
            .latency(self.latency)
            .start()?;
        let state = Arc::new(S3State::new(self.region, self.wrong_region_status == 301));
        let default =
            MockCredentials::new("AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY");
        state.add_credentials(default.clone());
        server.set_gate(Some(Arc::new(S3Gate::new(state.clone()))));
        Ok(S3Mock {
            server,
            state,
            default,
        })
    }
}

/// A mock S3 endpoint on `127.0.0.1` (path-style addressing), running until dropped.
///
/// A test starts one, creates buckets and objects, points the client at
/// [`endpoint`](S3Mock::endpoint) with [`default_credentials`](S3Mock::default_credentials)
/// (or [added](S3Mock::add_credentials) ones) and [`region`](S3Mock::region), then asserts on
/// the [request log](MockServer::requests) of [`server`](S3Mock::server) and on
/// [`signature_failures`](S3Mock::signature_failures). See the [module](self) documentation for
/// the checks and the exact answers.
pub struct S3Mock {
    server: MockServer,
    state: Arc<S3State>,
    default: MockCredentials,
}

impl fmt::Debug for S3Mock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("S3Mock")
            .field("endpoint", &self.endpoint())
            .field("region", &self.state.region())
            .finish_non_exhaustive()
    }
}

impl S3Mock {
    /// Starts a plain-HTTP mock in `us-east-1` accepting one key pair,
    /// [`default_credentials`](S3Mock::default_credentials).
    ///
    /// # Panics
    /// If no port can be bound on `127.0.0.1` (this is a test helper).
    pub fn start() -> S3Mock {
        Self::builder()
            .start()
            .unwrap_or_else(|e| panic!("karu-testkit: cannot start the S3 mock on 127.0.0.1: {e}"))
    }

    /// Options: region, TLS, latency, how wrong-region requests are answered.
    pub fn builder() -> S3MockBuilder {
        S3MockBuilder::default()
    }

    /// `http://127.0.0.1:PORT` (`https://` with TLS): the endpoint URL for path-style requests
    /// `/bucket/key`.
    pub fn endpoint(&self) -> String {
        self.server.base_url()
    }

    /// The URL of an object: [`endpoint`](S3Mock::endpoint) + [`object_path`].
    pub fn url(&self, bucket: &str, key: &str) -> String {
        format!("{}{}", self.endpoint(), object_path(bucket, key))
    }

    /// The underlying server: request log, fault plan, latency, bandwidth, connections, CA.
    pub fn server(&self) -> &MockServer {
        &self.server
    }

    /// The mock's region (the default region of buckets).
    pub fn region(&self) -> String {
        self.state.region().to_owned()
    }

    /// The key pair accepted from the start: `AKIDEXAMPLE` with the secret of the AWS
    /// documentation's examples, no session token.
    pub fn default_credentials(&self) -> MockCredentials {
        self.default.clone()
    }

    /// Accepts another key pair (replacing one with the same access key id, and lifting a
    /// revocation of it). With a session token, requests must carry it, signed.
    pub fn add_credentials(&self, creds: MockCredentials) {
        self.state.add_credentials(creds);
    }

    /// From now on requests signed with this access key get 400 `ExpiredToken`, as S3 answers
    /// for an expired session.
    pub fn revoke_credentials(&self, access_key_id: &str) {
        self.state.revoke(access_key_id);
    }

    /// Creates a bucket in the mock's region (no effect if it exists).
    pub fn create_bucket(&self, bucket: &str) {
        self.state.update_bucket(bucket, |_| {});
    }

    /// Puts a bucket (created if missing) in `region`: requests signed for another region get
    /// the wrong-region answer.
    pub fn set_bucket_region(&self, bucket: &str, region: &str) {
        self.state
            .update_bucket(bucket, |b| b.region = Some(region.to_owned()));
    }

    /// Allows (or forbids again) unsigned `GET` and `HEAD` requests to a bucket (created if
    /// missing). Signed requests are still checked.
    pub fn set_public(&self, bucket: &str, public: bool) {
        self.state.update_bucket(bucket, |b| b.public = public);
    }

    /// Makes a bucket (created if missing) requester-pays: requests must carry a signed
    /// `x-amz-request-payer: requester`, else 403 `AccessDenied`.
    pub fn set_requester_pays(&self, bucket: &str, on: bool) {
        self.state.update_bucket(bucket, |b| b.requester_pays = on);
    }

    /// Stores an object (creating the bucket if missing), replacing any with that key. It is
    /// served at [`object_path`]`(bucket, key)` and at any other encoding of the same key.
    pub fn insert(&self, bucket: &str, key: &str, body: impl Into<Bytes>) {
        self.create_bucket(bucket);
        self.server.insert(&object_path(bucket, key), body);
    }

    /// Stores a `size`-byte [virtual](MockServer::insert_virtual) object (creating the bucket
    /// if missing).
    pub fn insert_virtual(&self, bucket: &str, key: &str, size: u64) {
        self.create_bucket(bucket);
        self.server.insert_virtual(&object_path(bucket, key), size);
    }

    /// Removes an object (requests then get 404 `NoSuchKey`).
    pub fn remove(&self, bucket: &str, key: &str) {
        self.server.remove(&object_path(bucket, key));
    }

    /// Sets the exact `ETag` header value of an object, or `None` for no `ETag` (see
    /// [`MockServer::set_etag`]).
    pub fn set_etag(&self, bucket: &str, key: &str, etag: Option<&str>) {
        self.server.set_etag(&object_path(bucket, key), etag);
    }

    /// Moves the mock's clock (used for the 15-minute skew check) `offset_secs` ahead of the
    /// system clock (behind if negative); default 0.
    pub fn set_clock_offset(&self, offset_secs: i64) {
        self.state.set_clock_offset(offset_secs);
    }

    /// Every rejected request so far, in order.
    pub fn signature_failures(&self) -> Vec<SignatureFailure> {
        self.state.failures()
    }

    /// Every rejected request so far, in order, clearing the list.
    pub fn take_signature_failures(&self) -> Vec<SignatureFailure> {
        self.state.take_failures()
    }

    /// How many wrong-region answers (400 or 301) were sent.
    pub fn wrong_region_answers(&self) -> u64 {
        self.state.wrong_region_answers()
    }

    /// How many `ExpiredToken` answers were sent.
    pub fn expired_token_answers(&self) -> u64 {
        self.state.expired_token_answers()
    }
}
