//! A Hugging Face Hub mock: the resolve endpoint on one origin, redirecting every file read to
//! a signed, expiring URL on a second origin (the CDN), each a fault-injecting [`MockServer`]
//! with its own request log and fault plan.
//!
//! The Hub ([`HfMock::hub`]) answers `GET /[datasets/|spaces/]org/repo/resolve/REVISION/path`
//! (the revision one percent-encoded segment, as the Hub's clients send it), in this order:
//! 1. a [rate limit](HfMock::rate_limit) in force: 429 with the Hub's `RateLimit` and
//!    `RateLimit-Policy` headers;
//! 2. an `Authorization: Bearer` token the mock does not know: 401;
//! 3. an unknown repository: 404 `X-Error-Code: RepoNotFound`; a private one without a token
//!    the repository accepts: 401 `RepoNotFound` without a token, 404 with another token (the
//!    Hub hides private repositories); a gated one: 401 `GatedRepo` without a token, 403
//!    `GatedRepo` with a token that was not granted access;
//! 4. an unknown revision: 404 `RevisionNotFound`; an unknown file: 404 `EntryNotFound`;
//! 5. a file stored in git ([`HfMock::insert_git`]): its bytes, from the Hub itself;
//! 6. a `302` to `{cdn}/blobs/ID?Expires=…&Signature=…` (valid for
//!    [the URL lifetime](HfMock::set_url_lifetime) from the mock's clock), with `X-Linked-Size`,
//!    `X-Linked-Etag` (a quoted SHA-256: of the file's bytes, as the Hub states an LFS file's,
//!    or of its id for a virtual file; the ETag the CDN answers with; wrong on request:
//!    [`HfMock::set_linked_fault`]) and `X-Repo-Commit`.
//!
//! Error bodies are the Hub's JSON (`{"error": "…"}`) with `X-Error-Code` and
//! `X-Error-Message`. The CDN ([`HfMock::cdn`]) checks every request's signature and expiry
//! (403 `AccessDenied`, "Request has expired" or "Invalid signature", in S3's XML) and
//! refuses, with 400, any request that carries an `Authorization` header, counting them in
//! [`HfMock::authorization_leaks`]; then it serves the bytes like any [`MockServer`] (ranges,
//! `If-Match`, the whole fault plan). [`HfMock::revoke_urls`] makes every URL issued so far
//! fail, as an expired signature does.
//!
//! ```
//! use karu_testkit::hf::{HfMock, RepoAccess};
//!
//! let hf = HfMock::start();
//! hf.create_repo("org/model", RepoAccess::Public);
//! hf.insert("org/model", "main", "config.json", b"{}".to_vec());
//! assert_eq!(hf.resolve_path("org/model", "main", "config.json"), "/org/model/resolve/main/config.json");
//! assert!(hf.cdn_path("org/model", "main", "config.json").starts_with("/blobs/"));
//! ```

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use hmac::{Hmac, KeyInit, Mac};
use parking_lot::Mutex;
use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, percent_decode_str, utf8_percent_encode};
use sha2::{Digest, Sha256};

use crate::http::{Gate, GateResponse, MockServer, RequestHead, Route};

/// Who may read a repository.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum RepoAccess {
    /// Anyone, with or without a token.
    Public,
    /// Only these tokens; others get 403 `GatedRepo`, no token 401 `GatedRepo`.
    Gated(Vec<String>),
    /// Only these tokens; others get 404 `RepoNotFound`, no token 401.
    Private(Vec<String>),
}

/// What a path keeps unencoded (Python's `quote`).
const PATH_ENCODE: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'_')
    .remove(b'.')
    .remove(b'~')
    .remove(b'/');

/// What a revision keeps unencoded (`quote(revision, safe="")`).
const REVISION_ENCODE: &AsciiSet = &PATH_ENCODE.add(b'/');

/// The token the mock knows from the start (see [`HfMock::default_token`]).
const DEFAULT_TOKEN: &str = "hf_mock_token";

#[derive(Debug)]
struct Repo {
    access: RepoAccess,
    /// Revision → file path → the CDN id of its bytes, their size and their ETag.
    revisions: HashMap<String, HashMap<String, (String, u64, String)>>,
}

#[derive(Debug)]
struct HubState {
    repos: Mutex<HashMap<String, Repo>>,
    tokens: Mutex<HashSet<String>>,
    /// The mock's clock is the system clock plus this many seconds (may be negative).
    clock_offset: Mutex<i64>,
    url_lifetime: Mutex<Duration>,
    /// Signatures made before the latest revocation fail.
    generation: AtomicU64,
    rate_limited: AtomicU64,
    authorization_leaks: AtomicU64,
    /// What the redirects' `X-Linked-*` headers get wrong from now on.
    linked_fault: Mutex<Option<LinkedFault>>,
    /// Resolve paths of files stored in git ([`HfMock::insert_git`]): the Hub serves them.
    git_files: Mutex<HashSet<String>>,
    secret: [u8; 16],
    cdn_base: String,
}

impl HubState {
    fn now(&self) -> u64 {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        now.saturating_add_signed(*self.clock_offset.lock())
    }

    fn signature(&self, path: &str, expires: u64, generation: u64) -> String {
        let mut mac = <Hmac<Sha256> as KeyInit>::new_from_slice(&self.secret)
            .expect("HMAC takes any key length");
        mac.update(format!("{path}\n{expires}\n{generation}").as_bytes());
        hex::encode(mac.finalize().into_bytes())
    }
}

fn hub_error(status: u16, code: &str, message: &str) -> GateResponse {
    let body = serde_json::json!({ "error": message }).to_string();
    GateResponse::new(status, body)
        .header("content-type", "application/json")
        .header("x-error-code", code)
        .header("x-error-message", message)
}

fn cdn_error(status: u16, code: &str, message: &str) -> GateResponse {
    GateResponse::new(
        status,
        format!("<?xml version=\"1.0\" encoding=\"UTF-8\"?><Error><Code>{code}</Code><Message>{message}</Message></Error>"),
    )
    .header("content-type", "application/xml")
}

/// The resolve endpoint.
#[derive(Debug)]
struct HubRoute(Arc<HubState>);

impl Route for HubRoute {
    fn respond(&self, request: &RequestHead) -> Option<GateResponse> {
        let state = &self.0;
        if request.method != "GET" && request.method != "HEAD" {
            return None;
        }
        if state
            .rate_limited
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .is_ok()
        {
            return Some(
                hub_error(
                    429,
                    "RateLimited",
                    "You have been rate-limited; try again later.",
                )
                .header("ratelimit", "\"resolvers\";r=0;t=1")
                .header(
                    "ratelimit-policy",
                    "\"fixed window\";\"resolvers\";q=3000;w=300",
                ),
            );
        }
        let token = match request.header("authorization") {
            Some(value) => match value.strip_prefix("Bearer ") {
                Some(t) if state.tokens.lock().contains(t) => Some(t.to_string()),
                _ => {
                    return Some(hub_error(
                        401,
                        "InvalidCredentials",
                        "Invalid credentials in Authorization header",
                    ));
                }
            },
            None => None,
        };
        let Some((repo_id, revision, file)) = parse_resolve(&request.path) else {
            return Some(hub_error(404, "EntryNotFound", "Not a resolve path"));
        };
        let repos = state.repos.lock();
        let Some(repo) = repos.get(&repo_id) else {
            return Some(hub_error(404, "RepoNotFound", "Repository not found"));
        };
        let allowed = |tokens: &[String]| token.as_ref().is_some_and(|t| tokens.contains(t));
        match &repo.access {
            RepoAccess::Public => {}
            RepoAccess::Gated(tokens) if !allowed(tokens) => {
                let (status, message) = match token {
                    None => (
                        401,
                        format!(
                            "Access to model {repo_id} is restricted. You must have access to \
                             it and be authenticated to access it. Please log in."
                        ),
                    ),
                    Some(_) => (
                        403,
                        format!(
                            "Access to model {repo_id} is restricted and you are not in the \
                             authorized list."
                        ),
                    ),
                };
                return Some(hub_error(status, "GatedRepo", &message));
            }
            RepoAccess::Private(tokens) if !allowed(tokens) => {
                let status = if token.is_none() { 401 } else { 404 };
                return Some(hub_error(status, "RepoNotFound", "Repository not found"));
            }
            RepoAccess::Gated(_) | RepoAccess::Private(_) => {}
        }
        let Some(files) = repo.revisions.get(&revision) else {
            return Some(hub_error(404, "RevisionNotFound", "Invalid rev id"));
        };
        let Some((id, size, etag)) = files.get(&file) else {
            return Some(hub_error(404, "EntryNotFound", "Entry not found"));
        };
        if state.git_files.lock().contains(&request.path) {
            // A file stored in git: the Hub answers with its bytes (the server's own answer).
            return None;
        }
        let path = format!("/blobs/{id}");
        let expires = state
            .now()
            .saturating_add(state.url_lifetime.lock().as_secs());
        let generation = state.generation.load(Ordering::SeqCst);
        let signature = state.signature(&path, expires, generation);
        let location = format!(
            "{}{path}?Expires={expires}&Signature={signature}&Key-Pair-Id=K{generation}",
            state.cdn_base
        );
        let (mut size_claim, mut etag_claim) = (size.to_string(), etag.clone());
        match *state.linked_fault.lock() {
            Some(LinkedFault::Size) => size_claim = (size + 1).to_string(),
            Some(LinkedFault::Etag) => etag_claim = quoted_sha256(format!("{id}-other").as_bytes()),
            Some(LinkedFault::NotANumber) => size_claim = "NaN".to_string(),
            None => {}
        }
        Some(
            GateResponse::new(302, format!("Found. Redirecting to {location}"))
                .header("location", location)
                .header("x-linked-etag", etag_claim)
                .header("x-linked-size", size_claim)
                .header(
                    "x-repo-commit",
                    hex::encode(Sha256::digest(revision.as_bytes())),
                )
                .header("content-type", "text/plain; charset=utf-8"),
        )
    }
}

/// What a redirect's `X-Linked-*` headers get wrong (see [`HfMock::set_linked_fault`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum LinkedFault {
    /// `X-Linked-Size` one byte more than the file.
    Size,
    /// `X-Linked-Etag` another file's SHA-256.
    Etag,
    /// `X-Linked-Size: NaN`.
    NotANumber,
}

/// A SHA-256 in quotes, as the Hub states an LFS file's ETag (`X-Linked-Etag`): of a file's
/// bytes for [`HfMock::insert`], of its CDN id for a virtual file (whose bytes are never
/// held). The CDN answers with the same ETag (until a fault changes it).
fn quoted_sha256(bytes: &[u8]) -> String {
    format!("\"{}\"", hex::encode(Sha256::digest(bytes)))
}

/// `[datasets/|spaces/]org/repo`, the decoded revision and the decoded file path of a resolve
/// request path.
fn parse_resolve(path: &str) -> Option<(String, String, String)> {
    let rest = path.strip_prefix('/')?;
    let (prefix, rest) = match rest.split_once('/') {
        Some((kind @ ("datasets" | "spaces"), rest)) => (format!("{kind}/"), rest),
        _ => (String::new(), rest),
    };
    let mut parts = rest.splitn(5, '/');
    let (org, repo, verb, revision, file) = (
        parts.next()?,
        parts.next()?,
        parts.next()?,
        parts.next()?,
        parts.next()?,
    );
    if verb != "resolve" || file.is_empty() {
        return None;
    }
    let decode = |s: &str| {
        percent_decode_str(s)
            .decode_utf8()
            .ok()
            .map(|s| s.into_owned())
    };
    Some((
        format!("{prefix}{org}/{repo}"),
        decode(revision)?,
        decode(file)?,
    ))
}

/// The resolve path of a file, encoded as the Hub's clients encode it (the revision one
/// segment).
pub(crate) fn resolve_path(repo: &str, revision: &str, file: &str) -> String {
    let revision = utf8_percent_encode(revision, REVISION_ENCODE).to_string();
    format!(
        "/{repo}/resolve/{revision}/{}",
        utf8_percent_encode(file, PATH_ENCODE)
    )
}

/// The CDN's signature check.
#[derive(Debug)]
struct CdnGate(Arc<HubState>);

impl Gate for CdnGate {
    fn check(&self, request: &RequestHead) -> Option<GateResponse> {
        let state = &self.0;
        if request.header("authorization").is_some() {
            state.authorization_leaks.fetch_add(1, Ordering::SeqCst);
            return Some(cdn_error(
                400,
                "InvalidArgument",
                "Only one auth mechanism allowed; an Authorization header was sent",
            ));
        }
        let query = request.query.as_deref().unwrap_or("");
        let param = |name: &str| {
            query
                .split('&')
                .filter_map(|p| p.split_once('='))
                .find(|(k, _)| *k == name)
                .map(|(_, v)| v)
        };
        let (Some(expires), Some(signature), Some(pair)) = (
            param("Expires").and_then(|e| e.parse::<u64>().ok()),
            param("Signature"),
            param("Key-Pair-Id"),
        ) else {
            return Some(cdn_error(403, "AccessDenied", "Missing signature"));
        };
        let generation = pair
            .strip_prefix('K')
            .and_then(|g| g.parse::<u64>().ok())
            .unwrap_or(u64::MAX);
        let valid = state.signature(&request.path, expires, generation) == signature
            && generation == state.generation.load(Ordering::SeqCst);
        if !valid {
            return Some(cdn_error(403, "AccessDenied", "Invalid signature"));
        }
        // Valid through its `Expires` second, as CloudFront's check (expired once the time is
        // after it): the mock's clock counts whole seconds, so a URL signed for one second in
        // the last millisecond of one would otherwise expire a millisecond later.
        if state.now() > expires {
            return Some(cdn_error(403, "AccessDenied", "Request has expired"));
        }
        None
    }
}

/// The Hub and its CDN on 127.0.0.1, running until dropped (see the [module](self)
/// documentation).
pub struct HfMock {
    state: Arc<HubState>,
    hub: MockServer,
    cdn: MockServer,
}

impl fmt::Debug for HfMock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HfMock")
            .field("hub", &self.hub.base_url())
            .field("cdn", &self.cdn.base_url())
            .finish_non_exhaustive()
    }
}

impl HfMock {
    /// Start the Hub and the CDN (plain HTTP/1.1, two ports of 127.0.0.1), knowing one token
    /// ([`default_token`](HfMock::default_token)), with URLs valid for an hour.
    pub fn start() -> HfMock {
        let hub = MockServer::start();
        let cdn = MockServer::start();
        let secret: [u8; 16] = Sha256::digest(format!("{:?}", SystemTime::now()).as_bytes())[..16]
            .try_into()
            .unwrap_or([7; 16]);
        let state = Arc::new(HubState {
            repos: Mutex::new(HashMap::new()),
            tokens: Mutex::new([DEFAULT_TOKEN.to_string()].into()),
            clock_offset: Mutex::new(0),
            url_lifetime: Mutex::new(Duration::from_secs(3600)),
            generation: AtomicU64::new(0),
            rate_limited: AtomicU64::new(0),
            authorization_leaks: AtomicU64::new(0),
            linked_fault: Mutex::new(None),
            git_files: Mutex::new(HashSet::new()),
            secret,
            cdn_base: cdn.base_url(),
        });
        hub.set_route(Some(Arc::new(HubRoute(Arc::clone(&state)))));
        cdn.set_gate(Some(Arc::new(CdnGate(Arc::clone(&state)))));
        HfMock { state, hub, cdn }
    }

    /// The Hub: the resolve endpoint's request log and fault plan.
    pub fn hub(&self) -> &MockServer {
        &self.hub
    }

    /// The CDN: the file bytes' request log and fault plan.
    pub fn cdn(&self) -> &MockServer {
        &self.cdn
    }

    /// The endpoint to configure (`hf.endpoint`, `HF_ENDPOINT`): `http://127.0.0.1:PORT`.
    pub fn endpoint(&self) -> String {
        self.hub.base_url()
    }

    /// A token the Hub accepts from the start.
    pub fn default_token(&self) -> &'static str {
        DEFAULT_TOKEN
    }

    /// Make the Hub accept `token` too.
    pub fn add_token(&self, token: &str) {
        self.state.tokens.lock().insert(token.to_string());
    }

    /// Create (or replace the access of) a repository: `org/repo`, `datasets/org/repo` or
    /// `spaces/org/repo`.
    pub fn create_repo(&self, repo: &str, access: RepoAccess) {
        let mut repos = self.state.repos.lock();
        match repos.get_mut(repo) {
            Some(existing) => existing.access = access,
            None => {
                repos.insert(
                    repo.to_string(),
                    Repo {
                        access,
                        revisions: HashMap::new(),
                    },
                );
            }
        }
    }

    /// The id of a file's bytes on the CDN.
    fn blob_id(repo: &str, revision: &str, file: &str) -> String {
        hex::encode(&Sha256::digest(format!("{repo}\n{revision}\n{file}").as_bytes())[..12])
    }

    /// The CDN request path of a file (for fault rules and the CDN's log).
    pub fn cdn_path(&self, repo: &str, revision: &str, file: &str) -> String {
        format!("/blobs/{}", Self::blob_id(repo, revision, file))
    }

    /// The Hub request path of a file's resolve URL, encoded as the Hub's clients encode it.
    pub fn resolve_path(&self, repo: &str, revision: &str, file: &str) -> String {
        resolve_path(repo, revision, file)
    }

    /// Register a file of `size` bytes whose ETag is `etag` (`None`: a digest of its id).
    fn register(
        &self,
        repo: &str,
        revision: &str,
        file: &str,
        size: u64,
        etag: Option<String>,
    ) -> (String, String) {
        let id = Self::blob_id(repo, revision, file);
        let etag = etag.unwrap_or_else(|| quoted_sha256(id.as_bytes()));
        let mut repos = self.state.repos.lock();
        let entry = repos.entry(repo.to_string()).or_insert_with(|| Repo {
            access: RepoAccess::Public,
            revisions: HashMap::new(),
        });
        entry
            .revisions
            .entry(revision.to_string())
            .or_default()
            .insert(file.to_string(), (id.clone(), size, etag.clone()));
        (format!("/blobs/{id}"), etag)
    }

    /// Put a file in a revision of a repository (created public if it does not exist), stored
    /// as an LFS file: the Hub states its size and its SHA-256 (`X-Linked-Size`,
    /// `X-Linked-Etag`), which is also the CDN's ETag.
    pub fn insert(&self, repo: &str, revision: &str, file: &str, bytes: impl Into<Bytes>) {
        let bytes = bytes.into();
        let digest = quoted_sha256(&bytes);
        let (path, etag) = self.register(repo, revision, file, bytes.len() as u64, Some(digest));
        self.cdn.insert(&path, bytes);
        self.cdn.set_etag(&path, Some(&etag));
    }

    /// Put a small file stored in git (not LFS) in a revision: the Hub answers its resolve
    /// URL itself, with the bytes (ranges honoured, an ETag that is no SHA-256, no
    /// `X-Linked-*` headers), as the Hub does for such files; the CDN never sees it.
    pub fn insert_git(&self, repo: &str, revision: &str, file: &str, bytes: impl Into<Bytes>) {
        let bytes = bytes.into();
        let etag = format!("\"{}\"", &hex::encode(Sha256::digest(&bytes))[..40]);
        self.register(repo, revision, file, bytes.len() as u64, Some(etag.clone()));
        let path = resolve_path(repo, revision, file);
        self.state.git_files.lock().insert(path.clone());
        self.hub.insert(&path, bytes);
        self.hub.set_etag(&path, Some(&etag));
    }

    /// Put a virtual file of `size` bytes ([`pattern`](crate::pattern) bytes, never held).
    pub fn insert_virtual(&self, repo: &str, revision: &str, file: &str, size: u64) {
        let (path, etag) = self.register(repo, revision, file, size, None);
        self.cdn.insert_virtual(&path, size);
        self.cdn.set_etag(&path, Some(&etag));
    }

    /// Make the CDN serve `bytes` for a file from now on, with its ETag unchanged, while the
    /// Hub goes on stating the size and SHA-256 of what was inserted: a store whose bytes are
    /// corrupt, which only a check of the bytes against the stated SHA-256 notices.
    ///
    /// # Panics
    /// If the file was never inserted.
    pub fn corrupt(&self, repo: &str, revision: &str, file: &str, bytes: impl Into<Bytes>) {
        let etag = self
            .state
            .repos
            .lock()
            .get(repo)
            .and_then(|r| r.revisions.get(revision))
            .and_then(|files| files.get(file))
            .map(|(_, _, etag)| etag.clone())
            .expect("corrupt: the file was never inserted");
        let path = self.cdn_path(repo, revision, file);
        self.cdn.insert(&path, bytes);
        self.cdn.set_etag(&path, Some(&etag));
    }

    /// How long the signed URLs issued from now on stay valid, in the mock's whole seconds: a
    /// URL's `Expires` is the current second plus the lifetime, and it is refused after that
    /// second ends.
    pub fn set_url_lifetime(&self, lifetime: Duration) {
        *self.state.url_lifetime.lock() = lifetime;
    }

    /// Move the mock's clock (both origins) by `seconds` from the system clock: ahead, URLs
    /// already issued expire sooner than their holder thinks.
    pub fn set_clock_offset(&self, seconds: i64) {
        *self.state.clock_offset.lock() = seconds;
    }

    /// Make every URL issued so far fail its signature check (403), as if expired.
    pub fn revoke_urls(&self) {
        self.state.generation.fetch_add(1, Ordering::SeqCst);
    }

    /// Make every redirect from now on state a wrong `X-Linked-Size` or `X-Linked-Etag`
    /// (`None`: right again).
    pub fn set_linked_fault(&self, fault: Option<LinkedFault>) {
        *self.state.linked_fault.lock() = fault;
    }

    /// Answer the next `n` resolve requests with 429 and the Hub's rate-limit headers.
    pub fn rate_limit(&self, n: u64) {
        self.state.rate_limited.store(n, Ordering::SeqCst);
    }

    /// Requests that reached the CDN with an `Authorization` header (each refused with 400).
    pub fn authorization_leaks(&self) -> u64 {
        self.state.authorization_leaks.load(Ordering::SeqCst)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resolve_paths_parse_back() {
        assert_eq!(
            parse_resolve("/datasets/o/d/resolve/refs%2Fpr%2F1/a/b%20c.csv"),
            Some((
                "datasets/o/d".into(),
                "refs/pr/1".into(),
                "a/b c.csv".into()
            ))
        );
        assert_eq!(
            parse_resolve("/o/m/resolve/main/x"),
            Some(("o/m".into(), "main".into(), "x".into()))
        );
        assert_eq!(parse_resolve("/o/m/blob/main/x"), None);
        assert_eq!(parse_resolve("/o/m/resolve/main/"), None);
        let hf = HfMock::start();
        assert_eq!(
            hf.resolve_path("spaces/o/s", "refs/pr/2", "a b.py"),
            "/spaces/o/s/resolve/refs%2Fpr%2F2/a%20b.py"
        );
    }
}
