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

/// The API a request speaks: the XML API's `/bucket/object`, or the JSON API's media download
/// (`/download/storage/v1/b/bucket/o/object?alt=media`, or the same without `/download`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Api {
    Xml,
    Json,
}

/// A refusal: its status, the XML API's error code, the JSON API's reason, and a message.
#[derive(Debug)]
struct Refusal {
    status: u16,
    code: &'static str,
    reason: &'static str,
    message: String,
}

impl Refusal {
    fn new(status: u16, code: &'static str, reason: &'static str, message: &str) -> Self {
        Refusal {
            status,
            code,
            reason,
            message: message.to_owned(),
        }
    }

    /// The answer in the request's API's error format: XML, or the JSON API's error object.
    fn answer(&self, api: Api) -> GateResponse {
        match api {
            Api::Xml => {
                let body = format!(
                    "<?xml version='1.0' encoding='UTF-8'?><Error><Code>{}</Code><Message>{}</Message></Error>",
                    self.code,
                    quick_xml::escape::escape(self.message.as_str())
                );
                GateResponse::new(self.status, body)
                    .header("content-type", "application/xml; charset=UTF-8")
            }
            Api::Json => {
                let error = serde_json::json!({ "error": {
                    "code": self.status,
                    "message": self.message,
                    "errors": [{ "message": self.message, "domain": "global", "reason": self.reason }],
                }});
                GateResponse::new(self.status, error.to_string())
                    .header("content-type", "application/json; charset=UTF-8")
            }
        }
    }
}

/// What a request names: its API, its bucket, and the stored object's path (`/bucket/key`,
/// re-encoded the mock's one way, so another encoding of the same name finds the object).
#[derive(Debug)]
struct Target {
    api: Api,
    bucket: String,
    path: String,
}

/// The JSON API's media path prefixes.
const MEDIA_PREFIXES: [&str; 2] = ["/download/storage/v1/b/", "/storage/v1/b/"];

/// The [`Target`] of a request, or why it names none (in the format of the API it spoke).
fn target(req: &RequestHead) -> Result<Target, (Api, Refusal)> {
    let decode = |s: &str| String::from_utf8(sigv4::decode(s)).ok();
    let media = MEDIA_PREFIXES
        .iter()
        .find_map(|prefix| req.path.strip_prefix(prefix));
    let Some(rest) = media else {
        let invalid = || {
            let refusal = Refusal::new(400, "InvalidURI", "invalid", "Not a /bucket/object path.");
            (Api::Xml, refusal)
        };
        let (bucket, key) = req
            .path
            .strip_prefix('/')
            .and_then(|rest| rest.split_once('/'))
            .ok_or_else(invalid)?;
        let (bucket, key) = decode(bucket).zip(decode(key)).ok_or_else(invalid)?;
        let path = super::object_path(&bucket, &key);
        return Ok(Target {
            api: Api::Xml,
            bucket,
            path,
        });
    };
    let invalid = |message: &str| {
        (
            Api::Json,
            Refusal::new(400, "InvalidURI", "invalid", message),
        )
    };
    let (bucket, object) = rest
        .split_once("/o/")
        .ok_or_else(|| invalid("Not a /b/BUCKET/o/OBJECT path."))?;
    // The name is one path segment: a `/` in it must come encoded (`%2F`).
    if object.is_empty() || object.contains('/') || bucket.contains('/') {
        return Err(invalid(
            "The object name is one path segment: encode / as %2F.",
        ));
    }
    let media = req
        .query
        .as_deref()
        .is_some_and(|q| q.split('&').any(|pair| pair == "alt=media"));
    if !media {
        return Err(invalid(
            "Only media downloads (alt=media) are served by this mock.",
        ));
    }
    let (bucket, key) = decode(bucket)
        .zip(decode(object))
        .ok_or_else(|| invalid("The path is not UTF-8 once decoded."))?;
    let path = super::object_path(&bucket, &key);
    Ok(Target {
        api: Api::Json,
        bucket,
        path,
    })
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
    fn identity(&self, req: &RequestHead, api: Api, bucket: &Bucket) -> Result<String, Refusal> {
        let state = &self.state;
        let Some(header) = req.header("authorization") else {
            return if bucket.public {
                Ok("anonymous".to_owned())
            } else {
                Err(Refusal::new(
                    401,
                    "AuthenticationRequired",
                    "required",
                    "Anonymous caller does not have storage.objects.get access.",
                ))
            };
        };
        if let Some(token) = header.strip_prefix("Bearer ") {
            let token = token.trim();
            let invalid = || {
                Refusal::new(
                    401,
                    "AuthenticationRequired",
                    "authError",
                    "Invalid Credentials",
                )
            };
            if state.revoked.read().contains(token) {
                state.expired.fetch_add(1, Ordering::Relaxed);
                return Err(invalid());
            }
            return state.tokens.read().get(token).cloned().ok_or_else(invalid);
        }
        if api == Api::Json {
            // HMAC signatures are the XML API's.
            return Err(Refusal::new(
                401,
                "AuthenticationRequired",
                "authError",
                "Invalid Credentials: the JSON API takes OAuth 2 tokens, not HMAC signatures.",
            ));
        }
        let malformed = |why: &str| Refusal::new(400, "MalformedSecurityHeader", "invalid", why);
        let auth = sigv4::parse_authorization_for(GOOG4, header)
            .map_err(|why| malformed(&format!("Authorization: {why}")))?;
        if auth.service != "storage" || auth.terminal != "goog4_request" {
            return Err(malformed(
                "the credential scope must end /storage/goog4_request",
            ));
        }
        let Some(secret) = state.hmac.read().get(&auth.access_key_id).cloned() else {
            return Err(Refusal::new(
                403,
                "InvalidAccessKeyId",
                "forbidden",
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
            return Err(Refusal::new(
                403,
                "SignatureDoesNotMatch",
                "forbidden",
                "The request signature we calculated does not match the signature you provided.",
            ));
        }
        Ok(format!("hmac:{}", auth.access_key_id))
    }

    /// The answer to a request, if the gate answers it: `Err` refuses it (in its API's format).
    fn decide(&self, req: &RequestHead) -> Result<Option<GateResponse>, (Api, Refusal)> {
        let state = &self.state;
        let Target { api, bucket, path } = target(req)?;
        let refuse = |refusal| (api, refusal);
        let Some(bucket) = state.buckets.read().get(&bucket).cloned() else {
            return Err(refuse(Refusal::new(
                404,
                "NoSuchBucket",
                "notFound",
                "The specified bucket does not exist.",
            )));
        };
        let identity = self.identity(req, api, &bucket).map_err(refuse)?;
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
            return Err(refuse(Refusal::new(
                400,
                "UserProjectMissing",
                "required",
                "Bucket is a requester pays bucket but no user project provided.",
            )));
        }
        state.authenticated.lock().push(Authenticated {
            path: req.path.clone(),
            identity,
            user_project,
        });
        Ok(self.transcoded(req, &path))
    }

    /// GCS's decompressive transcoding of an object stored gzip-compressed, when it applies.
    fn transcoded(&self, req: &RequestHead, path: &str) -> Option<GateResponse> {
        let state = &self.state;
        let identity_bytes = state.gzip.read().get(path).cloned()?;
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
        match self.decide(request) {
            Ok(answer) => answer,
            Err((api, refusal)) => {
                self.state.rejections.lock().push(GcsRejection {
                    path: request.path.clone(),
                    status: refusal.status,
                    code: match api {
                        Api::Xml => refusal.code,
                        Api::Json => refusal.reason,
                    }
                    .to_owned(),
                });
                Some(refusal.answer(api))
            }
        }
    }

    fn object_path(&self, request: &RequestHead) -> Option<String> {
        target(request).ok().map(|target| target.path)
    }

    fn object_headers(&self, request: &RequestHead) -> Vec<(String, String)> {
        let Ok(Target { path, .. }) = target(request) else {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn head(path: &str, query: Option<&str>) -> RequestHead {
        RequestHead {
            method: "GET".into(),
            path: path.into(),
            query: query.map(str::to_owned),
            headers: Vec::new(),
            body: Bytes::new(),
        }
    }

    #[test]
    fn both_apis_name_the_same_stored_object() {
        let name = "dir/a b+c%d/ü//x.bin";
        let stored = super::super::object_path("bkt", name);
        let xml = target(&head(&stored, None)).unwrap();
        assert_eq!((xml.api, xml.bucket.as_str()), (Api::Xml, "bkt"));
        assert_eq!(xml.path, stored);
        let media = super::super::media_path("bkt", name);
        for path in [
            media.clone(),
            media.replace("/download/storage/", "/storage/"),
        ] {
            let json = target(&head(&path, Some("alt=media"))).unwrap();
            assert_eq!((json.api, json.bucket.as_str()), (Api::Json, "bkt"));
            assert_eq!(json.path, stored, "{path}");
        }
        // Another encoding of the same name finds the same object.
        let other = "/download/storage/v1/b/bkt/o/dir%2Fa%20b%2bc%25d%2F%c3%bc%2F%2Fx.bin";
        assert_eq!(
            target(&head(other, Some("alt=media"))).unwrap().path,
            stored
        );
    }

    #[test]
    fn a_json_path_is_one_media_download_of_one_segment() {
        let refused = |path: &str, query: Option<&str>| {
            let (api, refusal) = target(&head(path, query)).unwrap_err();
            assert_eq!((api, refusal.status), (Api::Json, 400), "{path}");
            let body = refusal.answer(api).body;
            let error: serde_json::Value = serde_json::from_slice(&body).unwrap();
            assert_eq!(error["error"]["code"], 400);
            assert_eq!(error["error"]["errors"][0]["reason"], "invalid");
        };
        // A raw `/` in the name, no `alt=media`, no object.
        refused("/download/storage/v1/b/bkt/o/dir/x.bin", Some("alt=media"));
        refused("/download/storage/v1/b/bkt/o/x.bin", None);
        refused("/download/storage/v1/b/bkt/o/x.bin", Some("alt=json"));
        refused("/download/storage/v1/b/bkt/o/", Some("alt=media"));
        refused("/storage/v1/b/bkt", Some("alt=media"));
    }
}
