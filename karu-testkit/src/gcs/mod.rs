//! A Google Cloud Storage mock: the XML API's object `GET` (path style, `/bucket/key`) and the
//! JSON API's media download (`/download/storage/v1/b/bucket/o/key?alt=media`, the name one
//! encoded path segment; also without `/download`) with byte ranges, the same objects behind
//! both, every request's bearer token or HMAC (`GOOG4-HMAC-SHA256`, XML API only) signature checked,
//! objects stored gzip-compressed served both ways, requester-pays buckets, and the whole fault
//! plan of the HTTP mock ([`GcsMock::server`]). [`GcsAuthFakes`] serve the OAuth token endpoint
//! (service-account JWTs, checked against the account's public key, and authorized users'
//! refresh tokens) and the compute metadata server on loopback; the tokens they issue are the
//! ones the mock accepts, each naming its identity.
//!
//! What a request goes through, in order (the first failing step answers, in GCS's XML error
//! format, or on a JSON API path its JSON error object with the reason in place of the code):
//! 0. a JSON API path must name one object (`/b/BUCKET/o/NAME`, no raw `/` in the name) and ask
//!    for its media (`alt=media`): else 400;
//! 1. the bucket must exist: 404 `NoSuchBucket`;
//! 2. `Authorization: Bearer T`: `T` must be a [token](GcsMock::add_token) (401
//!    `AuthenticationRequired`) not [revoked](GcsMock::revoke_token) (401, counted in
//!    [`expired_token_answers`](GcsMock::expired_token_answers));
//!    `Authorization: GOOG4-HMAC-SHA256 …`: the access id must be [known](GcsMock::add_hmac_key)
//!    (403 `InvalidAccessKeyId`), `host` and every `x-goog-*` header signed, and the signature
//!    recomputed from the request as received must match (403 `SignatureDoesNotMatch`); on a
//!    JSON API path, 401 (HMAC keys sign the XML API only);
//!    no `Authorization`: the bucket must be [public](GcsMock::set_public) (else 401);
//! 3. a [requester-pays](GcsMock::set_requester_pays) bucket needs `x-goog-user-project` (or
//!    `userProject`): else 400 `UserProjectMissing`;
//! 4. an object [stored gzip-compressed](GcsMock::insert_gzip) asked for without
//!    `Accept-Encoding: gzip`, or with a [decompression](GcsMock::set_decompression) fault set,
//!    is answered decompressed: `200`, the whole object, no `Content-Range` (GCS ignores the
//!    range when it transcodes), `x-goog-stored-content-encoding: gzip`, and (unless the fault
//!    is [`Decompression::Silent`]) `x-guploader-response-body-transformations: gunzipped` and
//!    `Warning: 214 UploadServer gunzipped`;
//! 5. the object handler serves the stored bytes (ranges, `If-Match`, 404, 416) with
//!    `x-goog-stored-content-encoding` (`gzip` with `Content-Encoding: gzip`, or `identity`),
//!    `x-goog-generation` and `x-goog-metageneration`.
//!
//! Every request that passed step 3 is recorded in [`GcsMock::authenticated`] with the
//! identity that signed it: the evidence of which credential each request used. The request
//! log, and the fault plan's path rules, see each request's path as sent: [`object_path`] for
//! the XML API, [`media_path`] for the JSON API. (The object handler's own answers, 404, 412
//! and 416, keep their XML bodies on both APIs.)
//!
//! ```
//! use karu_testkit::gcs::{GcsMock, object_path};
//!
//! let gcs = GcsMock::start();
//! gcs.insert("bucket", "dir/a b.bin", vec![1u8; 100]);
//! gcs.add_token("t0ken", "user:test");
//! assert_eq!(object_path("bucket", "dir/a b.bin"), "/bucket/dir/a%20b.bin");
//! assert_eq!(
//!     karu_testkit::gcs::media_path("bucket", "dir/a b.bin"),
//!     "/download/storage/v1/b/bucket/o/dir%2Fa%20b.bin"
//! );
//! assert!(gcs.endpoint().starts_with("http://127.0.0.1:"));
//! ```

mod fakes;
mod gate;

use std::fmt;
use std::io::Write as _;
use std::sync::Arc;

use bytes::Bytes;
use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};

use crate::http::MockServer;

pub use fakes::{GcsAuthFakes, TokenCalls};
use gate::{GcsGate, GcsState};

/// Bytes of an object name kept unencoded in a request path: unreserved characters and `/`.
const KEY: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~')
    .remove(b'/');

/// The request path of an object, `/bucket/key`, with the name percent-encoded once the way
/// Karu's GCS provider sends it (every byte but `A-Z a-z 0-9 - . _ ~ /` as `%XY`): the path
/// to use in [`FaultRule::path`](crate::FaultRule::path) and to look for in the request log.
pub fn object_path(bucket: &str, key: &str) -> String {
    format!("/{bucket}/{}", utf8_percent_encode(key, KEY))
}

/// The request path of an object's JSON API media download,
/// `/download/storage/v1/b/bucket/encoded-name` (the query, `alt=media`, is not part of the
/// path), with the name percent-encoded once as one segment the way Karu's GCS provider sends
/// it (every byte but `A-Z a-z 0-9 - . _ ~` as `%XY`, `/` too).
pub fn media_path(bucket: &str, key: &str) -> String {
    format!(
        "/download/storage/v1/b/{bucket}/o/{}",
        utf8_percent_encode(key, SEGMENT)
    )
}

/// Bytes of an object name kept unencoded in one path segment: unreserved characters.
const SEGMENT: &AsciiSet = &KEY.add(b'/');

/// How a [decompression fault](GcsMock::set_decompression) answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Decompression {
    /// As GCS does: `x-guploader-response-body-transformations: gunzipped` and
    /// `Warning: 214`.
    Announced,
    /// Only `x-goog-stored-content-encoding: gzip`, no `Content-Encoding`, no
    /// `Content-Range`: the decompressed whole object with nothing else saying so.
    Silent,
}

/// One request the mock let through, and who made it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Authenticated {
    /// The request path, as sent.
    pub path: String,
    /// The identity: the name given to [`add_token`](GcsMock::add_token) (or issued by the
    /// [fakes](GcsAuthFakes): `service-account:EMAIL`, `user:CLIENT_ID`,
    /// `metadata:default`), `hmac:ACCESS_ID`, or `anonymous`.
    pub identity: String,
    /// The `x-goog-user-project` sent, if any.
    pub user_project: Option<String>,
}

/// One request the mock refused, and why. Holds no token, secret or signature.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GcsRejection {
    /// The request path, as sent.
    pub path: String,
    /// The status answered.
    pub status: u16,
    /// The error code answered (`AuthenticationRequired`, `SignatureDoesNotMatch`, ...).
    pub code: String,
}

/// A mock GCS endpoint on `127.0.0.1` (XML API, path style, and JSON API media downloads),
/// running until dropped.
pub struct GcsMock {
    server: MockServer,
    state: Arc<GcsState>,
}

impl fmt::Debug for GcsMock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GcsMock")
            .field("endpoint", &self.endpoint())
            .finish_non_exhaustive()
    }
}

impl GcsMock {
    /// Starts a plain-HTTP mock with no bucket, token or key.
    ///
    /// # Panics
    /// If no port can be bound on `127.0.0.1` (this is a test helper).
    pub fn start() -> GcsMock {
        let server = MockServer::start();
        let state = Arc::new(GcsState::default());
        server.set_gate(Some(Arc::new(GcsGate::new(state.clone()))));
        GcsMock { server, state }
    }

    /// `http://127.0.0.1:PORT`: the endpoint for `gcs.endpoint`.
    pub fn endpoint(&self) -> String {
        self.server.base_url()
    }

    /// The underlying server: request log, fault plan, latency, connections.
    pub fn server(&self) -> &MockServer {
        &self.server
    }

    /// Creates a bucket (no effect if it exists).
    pub fn create_bucket(&self, bucket: &str) {
        self.state.update_bucket(bucket, |_| {});
    }

    /// Allows (or forbids again) requests without `Authorization` to a bucket.
    pub fn set_public(&self, bucket: &str, public: bool) {
        self.state.update_bucket(bucket, |b| b.public = public);
    }

    /// Makes a bucket requester-pays: requests must name a project to bill.
    pub fn set_requester_pays(&self, bucket: &str, on: bool) {
        self.state.update_bucket(bucket, |b| b.requester_pays = on);
    }

    /// Stores an object (creating the bucket), replacing any with that name.
    pub fn insert(&self, bucket: &str, key: &str, body: impl Into<Bytes>) {
        self.create_bucket(bucket);
        let path = object_path(bucket, key);
        self.state.set_stored_gzip(&path, None);
        self.state.new_generation(&path);
        self.server.insert(&path, body);
    }

    /// Stores a `size`-byte virtual object (creating the bucket).
    pub fn insert_virtual(&self, bucket: &str, key: &str, size: u64) {
        self.create_bucket(bucket);
        let path = object_path(bucket, key);
        self.state.set_stored_gzip(&path, None);
        self.state.new_generation(&path);
        self.server.insert_virtual(&path, size);
    }

    /// Stores `identity` gzip-compressed, with `Content-Encoding: gzip` metadata, as
    /// `gsutil cp -Z` does; returns the stored (compressed) bytes, which ranges count.
    pub fn insert_gzip(&self, bucket: &str, key: &str, identity: &[u8]) -> Bytes {
        let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        // Writing into a Vec cannot fail.
        let _ = encoder.write_all(identity);
        let stored = Bytes::from(encoder.finish().unwrap_or_default());
        self.create_bucket(bucket);
        let path = object_path(bucket, key);
        self.state
            .set_stored_gzip(&path, Some(Bytes::copy_from_slice(identity)));
        self.state.new_generation(&path);
        self.server.insert(&path, stored.clone());
        stored
    }

    /// Removes an object (requests then get 404).
    pub fn remove(&self, bucket: &str, key: &str) {
        self.server.remove(&object_path(bucket, key));
    }

    /// Sets the exact `ETag` of an object (`None`: no `ETag` header).
    pub fn set_etag(&self, bucket: &str, key: &str, etag: Option<&str>) {
        self.server.set_etag(&object_path(bucket, key), etag);
    }

    /// Accepts `Authorization: Bearer token` as `identity`.
    pub fn add_token(&self, token: &str, identity: &str) {
        self.state.add_token(token, identity);
    }

    /// From now on `token` gets 401, as an expired access token does.
    pub fn revoke_token(&self, token: &str) {
        self.state.revoke_token(token);
    }

    /// Accepts HMAC signatures with this key as `hmac:ACCESS_ID`.
    pub fn add_hmac_key(&self, access_id: &str, secret: &str) {
        self.state.add_hmac(access_id, secret);
    }

    /// Decompress objects stored gzip-compressed even when the request accepts gzip (`None`
    /// stops it): the transformation Karu must refuse.
    pub fn set_decompression(&self, fault: Option<Decompression>) {
        self.state.set_decompression(fault);
    }

    /// Every request let through so far, with its identity, in order.
    pub fn authenticated(&self) -> Vec<Authenticated> {
        self.state.authenticated()
    }

    /// Every request refused so far, in order.
    pub fn rejections(&self) -> Vec<GcsRejection> {
        self.state.rejections()
    }

    /// How many requests with a revoked token got 401.
    pub fn expired_token_answers(&self) -> u64 {
        self.state.expired_token_answers()
    }

    /// How many answers were decompressed (step 4 of the [module](self) documentation).
    pub fn decompressed_answers(&self) -> u64 {
        self.state.decompressed_answers()
    }

    /// Starts the token endpoint and metadata server fakes, whose tokens this mock accepts.
    pub fn start_auth_fakes(&self) -> GcsAuthFakes {
        GcsAuthFakes::start(self.state.clone(), false)
    }

    /// [`start_auth_fakes`](GcsMock::start_auth_fakes) over HTTPS, with a certificate of a
    /// generated CA ([`GcsAuthFakes::ca_file`]): a token endpoint behind a private CA.
    pub fn start_auth_fakes_over_tls(&self) -> GcsAuthFakes {
        GcsAuthFakes::start(self.state.clone(), true)
    }
}
