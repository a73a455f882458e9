//! An object whose bytes change from one request to the next: a [`Route`] for tests of reads
//! that must return one version of an object or fail.

use std::sync::atomic::{AtomicU64, Ordering};

use super::range::{self, Resolved};
use super::{GateResponse, RequestHead, Route};
use crate::pattern_byte;

/// The ETags the versions of a [`ChangingObject`] are served with.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ChangingEtag {
    /// No `ETag` header.
    None,
    /// The same weak tag for every version (`W/"x"`, as a server that only promises equivalent
    /// content sends): it proves nothing about the bytes.
    Weak(String),
    /// A strong tag of its own for each version: `"v0"`, `"v1"`, …; `If-Match` is compared
    /// with it (a mismatch gets 412).
    Strong,
}

/// An object at one path whose `GET` request number `n` (counted from 0 over every `GET` of
/// the path) is answered from version `n`: byte `i` of version `v` is
/// [`ChangingObject::byte`]`(v, i)`, different from every other version's byte `i`. Ranges are
/// answered as the object handler does (206 with `Content-Range`, 416 past the end, 200
/// without a `Range`); body faults apply to its answers. Other requests (another path, a
/// `HEAD`) pass on to the server.
///
/// ```
/// use std::sync::Arc;
/// use karu_testkit::{ChangingEtag, ChangingObject, MockServer};
///
/// let server = MockServer::start();
/// server.set_route(Some(Arc::new(ChangingObject::new("/o", 1000, ChangingEtag::None))));
/// // ... read it, then find which version the bytes are of:
/// let bytes = ChangingObject::bytes(3, 100, 10);
/// assert_eq!(ChangingObject::version_of(&bytes, 100), Some(3));
/// let mut mixed = ChangingObject::bytes(0, 0, 8);
/// mixed.extend(ChangingObject::bytes(1, 8, 8));
/// assert_eq!(ChangingObject::version_of(&mixed, 0), None);
/// ```
#[derive(Debug)]
pub struct ChangingObject {
    path: String,
    size: u64,
    etag: ChangingEtag,
    requests: AtomicU64,
}

impl ChangingObject {
    /// An object of `size` bytes at `path`, served with `etag`.
    pub fn new(path: impl Into<String>, size: u64, etag: ChangingEtag) -> Self {
        ChangingObject {
            path: path.into(),
            size,
            etag,
            requests: AtomicU64::new(0),
        }
    }

    /// The requests answered so far (the next one sees this version).
    pub fn requests(&self) -> u64 {
        self.requests.load(Ordering::SeqCst)
    }

    /// Byte `offset` of version `version` (versions below 256 differ at every byte).
    pub fn byte(version: u64, offset: u64) -> u8 {
        pattern_byte(offset).wrapping_add(version as u8)
    }

    /// The `len` bytes of version `version` at `offset`.
    pub fn bytes(version: u64, offset: u64, len: usize) -> Vec<u8> {
        (offset..offset + len as u64)
            .map(|i| Self::byte(version, i))
            .collect()
    }

    /// The one version (below 256) that `bytes`, read at `offset`, are all of; `None` when
    /// they mix versions (or are empty).
    pub fn version_of(bytes: &[u8], offset: u64) -> Option<u64> {
        let first = *bytes.first()?;
        let version = u64::from(first.wrapping_sub(pattern_byte(offset)));
        bytes
            .iter()
            .zip(offset..)
            .all(|(&b, i)| b == Self::byte(version, i))
            .then_some(version)
    }

    fn etag_of(&self, version: u64) -> Option<String> {
        match &self.etag {
            ChangingEtag::None => None,
            ChangingEtag::Weak(tag) => Some(tag.clone()),
            ChangingEtag::Strong => Some(format!("\"v{version}\"")),
        }
    }
}

impl Route for ChangingObject {
    fn respond(&self, request: &RequestHead) -> Option<GateResponse> {
        if request.path != self.path || request.method != "GET" {
            return None;
        }
        let version = self.requests.fetch_add(1, Ordering::SeqCst);
        let etag = self.etag_of(version);
        if let Some(condition) = request.header("if-match") {
            let passes = condition.trim() == "*"
                || etag.as_deref().is_some_and(|tag| {
                    !tag.starts_with("W/") && condition.split(',').any(|c| c.trim() == tag)
                });
            if !passes {
                return Some(GateResponse::new(412, "precondition failed"));
            }
        }
        let (status, start, len) = match request.header("range").and_then(range::parse) {
            None => (200, 0, self.size),
            Some(spec) => match range::resolve(spec, self.size) {
                Resolved::Partial { start, end } => (206, start, end - start + 1),
                Resolved::Unsatisfiable => {
                    return Some(
                        GateResponse::new(416, "")
                            .header("content-range", format!("bytes */{}", self.size)),
                    );
                }
            },
        };
        let body = Self::bytes(version, start, len as usize);
        let mut reply = GateResponse::new(status, body).header("accept-ranges", "bytes");
        if status == 206 {
            reply = reply.header(
                "content-range",
                format!("bytes {start}-{}/{}", start + len - 1, self.size),
            );
        }
        if let Some(tag) = etag {
            reply = reply.header("etag", tag);
        }
        Some(reply)
    }
}
