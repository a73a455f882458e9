//! The GCS mock's [`Gate`]: authenticates every request (bearer tokens, GOOG4 HMAC signatures
//! checked independently of any client signer), bills requester-pays buckets, decompresses
//! stored-gzip objects when GCS would, and adds GCS's object headers.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};

use bytes::Bytes;
use parking_lot::{Mutex, RwLock};

use super::{Authenticated, Decompression, GcsRejection};
use crate::http::{Gate, GateResponse, RequestHead};
use crate::s3::sigv4;

/// The HMAC algorithm GCS's XML API names.
const GOOG4: &str = "GOOG4-HMAC-SHA256";

/// The settings of one bucket.
#[derive(Debug, Clone, Default)]
pub(super) struct Bucket {
    pub(super) public: bool,
    pub(super) requester_pays: bool,
}

/// What the [`GcsMock`](super::GcsMock) handle shares with its gate and fakes.
#[derive(Debug, Default)]
pub(crate) struct GcsState {
    buckets: RwLock<HashMap<String, Bucket>>,
    tokens: RwLock<HashMap<String, String>>,
    revoked: RwLock<HashSet<String>>,
    hmac: RwLock<HashMap<String, String>>,
    /// Objects stored gzip-compressed: their identity bytes, by object path.
    gzip: RwLock<HashMap<String, Bytes>>,
    generations: RwLock<HashMap<String, u64>>,
    decompression: Mutex<Option<Decompression>>,
    authenticated: Mutex<Vec<Authenticated>>,
    rejections: Mutex<Vec<GcsRejection>>,
    expired: AtomicU64,
    decompressed: AtomicU64,
    next_generation: AtomicU64,
}

impl GcsState {
    pub(super) fn update_bucket(&self, name: &str, f: impl FnOnce(&mut Bucket)) {
        f(self.buckets.write().entry(name.to_owned()).or_default());
    }

    pub(crate) fn add_token(&self, token: &str, identity: &str) {
        self.revoked.write().remove(token);
        self.tokens
            .write()
            .insert(token.to_owned(), identity.to_owned());
    }

    pub(super) fn revoke_token(&self, token: &str) {
        self.revoked.write().insert(token.to_owned());
    }

    pub(super) fn add_hmac(&self, access_id: &str, secret: &str) {
        self.hmac
            .write()
            .insert(access_id.to_owned(), secret.to_owned());
    }

    pub(super) fn set_stored_gzip(&self, path: &str, identity: Option<Bytes>) {
        match identity {
            Some(bytes) => self.gzip.write().insert(path.to_owned(), bytes),
            None => self.gzip.write().remove(path),
        };
    }

    pub(super) fn new_generation(&self, path: &str) {
        // Microsecond-like generations, distinct for every write.
        let g = 1_700_000_000_000_000 + self.next_generation.fetch_add(1, Ordering::Relaxed);
        self.generations.write().insert(path.to_owned(), g);
    }

    pub(super) fn set_decompression(&self, fault: Option<Decompression>) {
        *self.decompression.lock() = fault;
    }

    pub(super) fn authenticated(&self) -> Vec<Authenticated> {
        self.authenticated.lock().clone()
    }

    pub(super) fn rejections(&self) -> Vec<GcsRejection> {
        self.rejections.lock().clone()
    }

    pub(super) fn expired_token_answers(&self) -> u64 {
        self.expired.load(Ordering::Relaxed)
    }

    pub(super) fn decompressed_answers(&self) -> u64 {
        self.decompressed.load(Ordering::Relaxed)
    }
}

/// A GCS XML error answer.
fn error(status: u16, code: &str, message: &str) -> GateResponse {
    let body = format!(
        "<?xml version='1.0' encoding='UTF-8'?><Error><Code>{code}</Code><Message>{}</Message></Error>",
        quick_xml::escape::escape(message)
    );
    GateResponse::new(status, body).header("content-type", "application/xml; charset=UTF-8")
}

/// The object path a request names, re-encoded the mock's one way (so another encoding of the
/// same name finds the object), and the bucket.
fn target(path: &str) -> Option<(String, String)> {
    let rest = path.strip_prefix('/')?;
    let (bucket, key) = rest.split_once('/')?;
    let key = String::from_utf8(sigv4::decode(key)).ok()?;
    let bucket = String::from_utf8(sigv4::decode(bucket)).ok()?;
    Some((bucket.clone(), super::object_path(&bucket, &key)))
}

/// The [`Gate`] of a [`GcsMock`](super::GcsMock).
#[derive(Debug)]
pub(super) struct GcsGate {
    state: std::sync::Arc<GcsState>,
}

impl GcsGate {
    pub(super) fn new(state: std::sync::Arc<GcsState>) -> Self {
        Self { state }
    }

    /// The identity of an authenticated request, or the answer refusing it.
    fn identity(&self, req: &RequestHead, bucket: &Bucket) -> Result<String, GateResponse> {
        let state = &self.state;
        let Some(header) = req.header("authorization") else {
            return if bucket.public {
                Ok("anonymous".to_owned())
            } else {
                Err(error(
                    401,
                    "AuthenticationRequired",
                    "Anonymous caller does not have storage.objects.get access.",
                ))
            };
        };
        if let Some(token) = header.strip_prefix("Bearer ") {
            let token = token.trim();
            if state.revoked.read().contains(token) {
                state.expired.fetch_add(1, Ordering::Relaxed);
                return Err(error(401, "AuthenticationRequired", "Invalid Credentials"));
            }
            return state
                .tokens
                .read()
                .get(token)
                .cloned()
                .ok_or_else(|| error(401, "AuthenticationRequired", "Invalid Credentials"));
        }
        let malformed = |why: &str| error(400, "MalformedSecurityHeader", why);
        let auth = sigv4::parse_authorization_for(GOOG4, header)
            .map_err(|why| malformed(&format!("Authorization: {why}")))?;
        if auth.service != "storage" || auth.terminal != "goog4_request" {
            return Err(malformed(
                "the credential scope must end /storage/goog4_request",
            ));
        }
        let Some(secret) = state.hmac.read().get(&auth.access_key_id).cloned() else {
            return Err(error(
                403,
                "InvalidAccessKeyId",
                "The Access Key Id you provided does not exist in our records.",
            ));
        };
        let signs = |name: &str| auth.signed_headers.iter().any(|h| h == name);
        let unsigned_goog = req
            .headers
            .iter()
            .any(|(name, _)| name.starts_with("x-goog-") && !signs(name));
        if !signs("host") || unsigned_goog {
            return Err(malformed("host and every x-goog-* header must be signed"));
        }
        let date = req.header("x-goog-date").unwrap_or("");
        if !date.starts_with(&auth.date) {
            return Err(malformed("x-goog-date is not the credential scope's day"));
        }
        let payload = req
            .header("x-goog-content-sha256")
            .unwrap_or("UNSIGNED-PAYLOAD");
        let (canonical, missing) = sigv4::canonical_request(&sigv4::CanonicalInput {
            method: &req.method,
            path: &req.path,
            query: req.query.as_deref(),
            headers: &req.headers,
            signed_headers: &auth.signed_headers,
            payload_hash: payload,
        });
        let to_sign = sigv4::string_to_sign_for(GOOG4, date, &auth.scope(), &canonical);
        let key = sigv4::signing_key_for(
            "GOOG4",
            "goog4_request",
            &secret,
            &auth.date,
            &auth.region,
            "storage",
        );
        let expected = sigv4::signature(&key, &to_sign);
        if !missing.is_empty() || !sigv4::constant_time_eq(&expected, &auth.signature) {
            return Err(error(
                403,
                "SignatureDoesNotMatch",
                "The request signature we calculated does not match the signature you provided.",
            ));
        }
        Ok(format!("hmac:{}", auth.access_key_id))
    }

    fn decide(&self, req: &RequestHead) -> Option<GateResponse> {
        let state = &self.state;
        let Some((bucket_name, path)) = target(&req.path) else {
            return Some(error(400, "InvalidURI", "Not a /bucket/object path."));
        };
        let Some(bucket) = state.buckets.read().get(&bucket_name).cloned() else {
            return Some(error(
                404,
                "NoSuchBucket",
                "The specified bucket does not exist.",
            ));
        };
        let identity = match self.identity(req, &bucket) {
            Ok(identity) => identity,
            Err(answer) => return Some(answer),
        };
        let user_project = req
            .header("x-goog-user-project")
            .map(str::to_owned)
            .or_else(|| {
                req.query.as_deref().and_then(|q| {
                    q.split('&')
                        .find_map(|p| p.strip_prefix("userProject="))
                        .map(str::to_owned)
                })
            });
        if bucket.requester_pays && user_project.is_none() {
            return Some(error(
                400,
                "UserProjectMissing",
                "Bucket is a requester pays bucket but no user project provided.",
            ));
        }
        state.authenticated.lock().push(Authenticated {
            path: req.path.clone(),
            identity,
            user_project,
        });
        let identity_bytes = state.gzip.read().get(&path).cloned()?;
        let accepts_gzip = req
            .header("accept-encoding")
            .is_some_and(|v| v.split(',').any(|e| e.trim().starts_with("gzip")));
        let fault = *state.decompression.lock();
        if accepts_gzip && fault.is_none() {
            return None;
        }
        // GCS's decompressive transcoding: the whole object, decompressed, range ignored.
        state.decompressed.fetch_add(1, Ordering::Relaxed);
        let mut answer = GateResponse::new(200, identity_bytes)
            .header("content-type", "application/octet-stream")
            .header("x-goog-stored-content-encoding", "gzip");
        if fault != Some(Decompression::Silent) {
            answer = answer
                .header("x-guploader-response-body-transformations", "gunzipped")
                .header("warning", "214 UploadServer gunzipped");
        }
        Some(answer)
    }
}

impl Gate for GcsGate {
    fn check(&self, request: &RequestHead) -> Option<GateResponse> {
        let answer = self.decide(request)?;
        if answer.status >= 400 {
            let text = String::from_utf8_lossy(&answer.body);
            let code = text
                .split_once("<Code>")
                .and_then(|(_, rest)| rest.split_once("</Code>"))
                .map(|(code, _)| code.to_owned())
                .unwrap_or_default();
            self.state.rejections.lock().push(GcsRejection {
                path: request.path.clone(),
                status: answer.status,
                code,
            });
        }
        Some(answer)
    }

    fn object_path(&self, request: &RequestHead) -> Option<String> {
        target(&request.path).map(|(_, path)| path)
    }

    fn object_headers(&self, request: &RequestHead) -> Vec<(String, String)> {
        let Some((_, path)) = target(&request.path) else {
            return Vec::new();
        };
        let mut headers = Vec::new();
        if self.state.gzip.read().contains_key(&path) {
            headers.push(("content-encoding".to_owned(), "gzip".to_owned()));
            headers.push((
                "x-goog-stored-content-encoding".to_owned(),
                "gzip".to_owned(),
            ));
        } else {
            headers.push((
                "x-goog-stored-content-encoding".to_owned(),
                "identity".to_owned(),
            ));
        }
        if let Some(g) = self.state.generations.read().get(&path) {
            headers.push(("x-goog-generation".to_owned(), g.to_string()));
            headers.push(("x-goog-metageneration".to_owned(), "1".to_owned()));
        }
        headers
    }
}
