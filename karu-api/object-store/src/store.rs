//! `KaruStore`: `object_store::ObjectStore` over a Karu client and a base address.

use std::fmt;
use std::ops::Range;
use std::time::SystemTime;

use bytes::Bytes;
use chrono::{DateTime, Utc};
use futures_util::StreamExt;
use futures_util::stream::{self, BoxStream};
use karu::{BatchOptions, Client, Ends, Locator, Read, Status};

use crate::address::Base;
use crate::error::{StoreError, from_address, from_karu};
use crate::get::{self, ByteRange, CHUNKS_IN_FLIGHT, DEFAULT_CHUNK, First, Layout, Version};

/// An `object_store::ObjectStore` (0.14 and 0.13, see the crate's features) that reads through a Karu [`Client`]: every `object_store` path is joined
/// under one base address, and reads get Karu's planner, checks and recovery.
///
/// - `get_opts` takes every `GetRange`
///   form and none. The first request is the read itself (no HEAD, no size probe before
///   it): the object's size comes from its `Content-Range`, its version from its ETag. A
///   range of up to one part (`http.part_size`, 8 MiB by default) is one request (where a
///   service ignores suffix ranges, as Azure does, a suffix is two: Karu's
///   [`read_ends`](karu::Client::read_ends) reads one byte of the head for the size, then the
///   tail, pinned to the head's ETag). A longer one, or the whole object, is one version or
///   an error, never parts of two:
///   - with a strong ETag, it goes on as a stream of part-sized chunks, eight in flight, each
///     pinned to the first answer's ETag (`If-Match`), so a replaced object fails the stream
///     with `Error::Precondition`;
///   - a local file (no ETag) streams the same way, and its size and modification time, what
///     identifies its version, must be unchanged once the last chunk is read, else the stream
///     ends with `Precondition`;
///   - a remote object without a strong ETag (none, or a weak one) cannot be pinned: the
///     range is read again in one request, up to the eight parts a stream holds at once
///     (64 MiB by default), and is an error beyond.
///
///   `if_match` (a strong ETag, a list of them, or `*`) goes out with the first request and
///   every later one, and Karu compares it with each answer's ETag as RFC 9110 says (strong
///   comparison; a tag may hold a comma), so a mismatch is `Precondition` before any body is
///   read; an answer without a strong ETag (a local file has none) proves only `*`.
///   `head: true` is a stat (a one-byte read carrying `if_match`, when there is one).
///   `if_none_match`, `if_modified_since`, `if_unmodified_since` and `version` are refused
///   with `Error::NotSupported`, never ignored.
/// - `get_ranges` is one Karu batch: Karu's planner and its four
///   guards decide what is merged (not object_store's fixed 1 MiB), every range is in flight
///   at once under the client's concurrency limit, and each range's bytes are the buffer Karu
///   filled (no copy). The batch keeps to one version: the first strong ETag an answer states
///   pins the other requests, and an answer of another version fails the call. As
///   object_store's contract says, a range reaching past the end of the object returns what
///   exists; one starting at or past the end is an error.
/// - `head` is Karu's stat (one ranged GET of byte 0):
///   the size, the strong ETag and `last_modified`: the answer's `Last-Modified` (a local
///   file's modification time), or the Unix epoch when the answer has none, as object_store's
///   own HTTP store reports. A `get` reports the same from the answer that read its first bytes.
/// - Writes, deletes, copies, renames and listings are
///   `Error::NotImplemented`, naming the operation:
///   Karu is read-only by contract.
///
/// Errors map by Karu status: `NotFound` (and a local directory) to `NotFound`,
/// `PreconditionFailed` to `Precondition`, `PermissionDenied` to `PermissionDenied`,
/// `Credentials` to `Unauthenticated`, the rest to `Generic`; the source of each is Karu's
/// [`karu::Error`], with its status, HTTP status and evidence.
///
/// # Paths
///
/// A [`Path`] holds object names in object_store's encoded form; each segment is decoded back
/// to its name, which is spelled as Karu's addresses spell names: as it is after a provider
/// scheme (`s3://bucket/prefix/a b+c%d é`) or a local directory, percent-encoded in an
/// `http(s)://` or `file://` URL. So `Path::from("a b+c%d é")` reaches the same object as
/// `karu read` of that name. (object_store's own S3 store would ask for the key
/// `a b+c%25d %C3%A9`.)
///
/// A path never leaves the base: a segment that decodes to a name made only of dots, or to a
/// name holding `/` (object_store's `%2F`, as in `Path::from_iter(["../secret"])`), `\` or
/// NUL, fails that call with [`karu::Status::InvalidArgument`] naming the segment, before
/// anything is read.
///
/// ```
/// use std::sync::Arc;
/// use object_store::{ObjectStore, ObjectStoreExt, path::Path};
/// use karu_object_store::KaruStore;
/// # let dir = tempfile::tempdir()?;
/// # std::fs::create_dir(dir.path().join("logs"))?;
/// # std::fs::write(dir.path().join("logs").join("day 1.txt"), b"hello, world")?;
/// # let base = dir.path().to_str().unwrap();
/// let client = karu::Client::builder().user_config_file(None).project_config_file(None).build()?;
/// let store: Arc<dyn ObjectStore> = Arc::new(KaruStore::new(base, &client)?);
/// futures::executor::block_on(async {
///     let path = Path::from("logs/day 1.txt");
///     assert_eq!(store.head(&path).await?.size, 12);
///     assert_eq!(store.get_range(&path, 7..12).await?, "world");
///     let parts = store.get_ranges(&path, &[0..5, 7..12]).await?;
///     assert_eq!(parts, ["hello", "world"]);
///     Ok::<_, object_store::Error>(())
/// })?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone)]
pub struct KaruStore {
    client: Client,
    base: Base,
}

impl KaruStore {
    /// A store of the objects under `base`: any Karu address prefix (`s3://bucket/prefix`,
    /// `gs://bucket`, `az://container`, `hf://org/repo`, `https://host/dir`, a local
    /// directory), read with `client` (the store keeps a handle to it, as every face type
    /// does: clones share one client). Nothing is read now; the base is checked to be an
    /// address `client` can resolve ([`karu::Status::InvalidArgument`] or
    /// [`karu::Status::Unsupported`] otherwise). A URL base may not carry a query, a fragment
    /// or a user.
    pub fn new(base: &str, client: &Client) -> Result<KaruStore, karu::Error> {
        let base = Base::parse(base)
            .map_err(|e| karu::Error::new(Status::InvalidArgument, e.to_string()))?;
        let probe = base
            .join("karu-object-store")
            .map_err(|e| karu::Error::new(Status::InvalidArgument, e.to_string()))?;
        client.locate(&probe)?;
        Ok(KaruStore {
            client: client.clone(),
            base,
        })
    }

    /// The client the store reads with.
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// The Karu address of `path` under the base: an object_store `Path` of any major (its
    /// encoded form, `path.as_ref()`), or that form as a string. A path that would leave the
    /// base is [`Status::InvalidArgument`].
    pub fn address(&self, path: impl AsRef<str>) -> Result<String, karu::Error> {
        self.address_of(path.as_ref())
            .map_err(StoreError::into_karu)
    }

    /// The Karu locator of `path` under the base (no network, no credentials).
    pub fn locate(&self, path: impl AsRef<str>) -> Result<Locator, karu::Error> {
        self.locator_of(path.as_ref())
            .map_err(StoreError::into_karu)
    }

    pub(crate) fn address_of(&self, path: &str) -> Result<String, StoreError> {
        self.base.join(path).map_err(|e| from_address(e, path))
    }

    pub(crate) fn locator_of(&self, path: &str) -> Result<Locator, StoreError> {
        let address = self.address_of(path)?;
        self.client.locate(&address).map_err(|e| from_karu(e, path))
    }

    /// The chunk size of long reads: the client's `http.part_size` (Karu's default where it
    /// is 0).
    fn chunk(&self) -> u64 {
        match self.client.snapshot().global().http.part_size.0 {
            0 => DEFAULT_CHUNK,
            size => size,
        }
    }

    /// The most bytes a get holds at once: [`CHUNKS_IN_FLIGHT`] chunks, which is also the most
    /// it reads in one request from an object that cannot be pinned to a version.
    fn held_at_most(&self) -> u64 {
        self.chunk().saturating_mul(CHUNKS_IN_FLIGHT as u64)
    }

    /// The metadata behind `head` and `get_opts` with `head: true`: Karu's stat, or, under an
    /// `if_match` condition, a one-byte read of a remote object carrying it (a local file has
    /// no ETag: only `*` matches it).
    pub(crate) async fn head_meta(
        &self,
        location: &str,
        locator: &Locator,
        if_match: Option<&str>,
    ) -> Result<Meta, StoreError> {
        if let (Some(condition), None) = (if_match, locator.file_path()) {
            let ends = self
                .client
                .read_ends_if_match_async(locator, 0, 0, Some(condition))
                .await
                .map_err(|e| from_karu(e, location))?;
            proven(condition, ends.etag.as_deref(), location)?;
            return Ok(Meta {
                last_modified: last_modified(ends.last_modified),
                size: ends.size,
                e_tag: ends.etag,
            });
        }
        let info = self
            .client
            .stat_async(locator)
            .await
            .map_err(|e| from_karu(e, location))?;
        let Some(size) = info.size else {
            return Err(from_karu(
                karu::Error::new(
                    Status::Unsupported,
                    format!("{locator} states no size (it is not a regular file)"),
                ),
                location,
            ));
        };
        if let Some(condition) = if_match {
            proven(condition, info.etag.as_deref(), location)?;
        }
        Ok(Meta {
            last_modified: last_modified(info.last_modified),
            size,
            e_tag: info.etag,
        })
    }

    /// The first answer of a get: `read_ends` of `window`, carrying the caller's `if_match`
    /// (a local file, which has no ETag, is stat-ed first so that a missing one is not found).
    async fn first_answer(
        &self,
        location: &str,
        window: &Locator,
        first: First,
        if_match: Option<&str>,
    ) -> Result<Ends, StoreError> {
        let local = window.file_path().is_some();
        if let (true, Some(condition)) = (local, if_match) {
            self.client
                .stat_async(window)
                .await
                .map_err(|e| from_karu(e, location))?;
            proven(condition, None, location)?;
        }
        let condition = if local { None } else { if_match };
        let ends = self
            .client
            .read_ends_if_match_async(window, first.head, first.tail, condition)
            .await
            .map_err(|e| from_karu(e, location))?;
        if let Some(condition) = condition {
            proven(condition, ends.etag.as_deref(), location)?;
        }
        Ok(ends)
    }

    /// The range of an object without a strong ETag read again in one request (one answer is
    /// one version), its size checked against the first answer's; the answer's metadata with
    /// the bytes.
    async fn in_one_request(
        &self,
        location: &str,
        locator: &Locator,
        layout: &Layout,
        if_match: Option<&str>,
    ) -> Result<(Meta, Bytes), StoreError> {
        let range = &layout.range;
        let length = range.end - range.start;
        let most = self.held_at_most();
        if length > most {
            return Err(from_karu(
                karu::Error::new(
                    Status::Unsupported,
                    format!(
                        "{locator} has no strong ETag, so the {length} bytes asked for cannot be \
                         read in parts pinned to one version, and a get reads at most {most} \
                         bytes in one request ({CHUNKS_IN_FLIGHT} parts of http.part_size); ask \
                         for ranges of at most {most} bytes (each one version), or serve the \
                         object with strong ETags"
                    ),
                ),
                location,
            ));
        }
        let window = locator
            .with_window(range.start, None)
            .map_err(|e| from_karu(e, location))?;
        let again = self
            .client
            .read_ends_if_match_async(&window, length, 0, if_match)
            .await
            .map_err(|e| from_karu(e, location))?;
        let size = range.start.saturating_add(again.size);
        if size != layout.size || again.head.len() as u64 != length {
            return Err(from_karu(
                karu::Error::new(
                    Status::PreconditionFailed,
                    format!(
                        "{locator} changed between two answers: the first stated {} bytes, the \
                         read of bytes {}..{} in one request {size}",
                        layout.size, range.start, range.end
                    ),
                ),
                location,
            ));
        }
        if let Some(condition) = if_match {
            proven(condition, again.etag.as_deref(), location)?;
        }
        let meta = Meta {
            last_modified: last_modified(again.last_modified),
            size,
            e_tag: again.etag,
        };
        Ok((meta, Bytes::from(again.head)))
    }

    /// A get (`get_opts`) in no major's types; the major's trait implementation has refused
    /// what Karu cannot honour.
    pub(crate) async fn get(
        &self,
        location: &str,
        request: GetRequest<'_>,
    ) -> Result<Got, StoreError> {
        let locator = self.locator_of(location)?;
        let if_match = request.if_match;
        if request.head {
            let meta = self.head_meta(location, &locator, if_match).await?;
            return Ok(Got {
                payload: stream::empty().boxed(),
                range: 0..meta.size,
                meta,
            });
        }
        if let Some(range) = &request.range {
            range
                .is_valid()
                .map_err(|e| StoreError::Range(e.to_string()))?;
        }
        let chunk = self.chunk();
        let first = First::of(request.range.as_ref(), chunk);
        let window = if first.start > 0 {
            locator
                .with_window(first.start, None)
                .map_err(|e| from_karu(e, location))?
        } else {
            locator.clone()
        };
        let ends = self
            .first_answer(location, &window, first, if_match)
            .await?;
        let layout = Layout::of(
            request.range.as_ref(),
            first,
            ends.size,
            ends.head.len() as u64,
            ends.tail.len() as u64,
        )
        .map_err(|e| StoreError::Range(e.to_string()))?;
        let meta = Meta {
            last_modified: last_modified(ends.last_modified),
            size: layout.size,
            e_tag: ends.etag.clone(),
        };
        let held = if first.tail > 0 { ends.tail } else { ends.head };
        let pieces = match get::all_known(get::pieces(&layout, first, held, chunk)) {
            Ok(bytes) => return Ok(result(meta, layout.range, get::in_hand(bytes))),
            Err(pieces) => pieces,
        };
        // The rest of the range is read in parts kept to the first answer's version: pinned
        // to its strong ETag, or, for a local file, checked against its size and
        // modification time once read. A remote object without a strong ETag is read again
        // in one request instead.
        let version = match (ends.etag, locator.file_path()) {
            (Some(etag), _) => Version::Etag(etag),
            (None, Some(_)) => Version::File {
                size: layout.size,
                modified: ends.last_modified,
            },
            (None, None) => {
                drop(pieces);
                let (meta, bytes) = self
                    .in_one_request(location, &locator, &layout, if_match)
                    .await?;
                return Ok(result(meta, layout.range, get::in_hand(bytes)));
            }
        };
        let payload = get::stream(
            self.client.clone(),
            locator,
            location.to_string(),
            version,
            pieces,
        );
        Ok(result(meta, layout.range, payload))
    }

    /// `get_ranges` in no major's types.
    pub(crate) async fn ranges(
        &self,
        location: &str,
        ranges: &[Range<u64>],
    ) -> Result<Vec<Bytes>, StoreError> {
        if let Some(r) = ranges.iter().find(|r| r.end < r.start) {
            return Err(from_karu(
                karu::Error::new(
                    Status::InvalidRange,
                    format!("the range {}..{} ends before it starts", r.start, r.end),
                ),
                location,
            ));
        }
        let locator = self.locator_of(location)?;
        // One version of the object for every range: the first strong ETag an answer states
        // pins the others.
        let mut batch = self.client.submit_with(
            ranges
                .iter()
                .enumerate()
                .filter(|(_, r)| r.end > r.start)
                .map(|(i, r)| Read::new(&locator, r.start, r.end - r.start).tag(i as u64)),
            &BatchOptions::new().one_version(),
        );
        let mut bytes = vec![Bytes::new(); ranges.len()];
        let mut first_error: Option<(usize, karu::Error)> = None;
        while let Some(completion) = batch.next().await {
            let i = usize::try_from(completion.tag()).unwrap_or(usize::MAX);
            if i >= ranges.len() {
                return Err(from_karu(
                    karu::Error::new(Status::Internal, "a completion has a tag it was not given"),
                    location,
                ));
            }
            let received = completion.bytes_received();
            match completion.status() {
                // object_store's contract: a range reaching past the end returns what exists.
                Status::Ok | Status::RangeNotSatisfiable if received > 0 => {
                    let mut buffer = completion.into_buffer().unwrap_or_default();
                    buffer.truncate(received as usize);
                    bytes[i] = Bytes::from(buffer);
                }
                _ => {
                    let error = completion.into_result().err().unwrap_or_else(|| {
                        karu::Error::new(Status::Internal, "a failed read carries no error")
                    });
                    if first_error.as_ref().is_none_or(|(j, _)| i < *j) {
                        first_error = Some((i, error));
                    }
                }
            }
        }
        match first_error {
            Some((_, error)) => Err(from_karu(error, location)),
            None => Ok(bytes),
        }
    }
}

/// What a get or a head states about the object (object_store's `ObjectMeta` without the path,
/// which the major's implementation adds).
#[derive(Debug, Clone)]
pub(crate) struct Meta {
    pub(crate) last_modified: DateTime<Utc>,
    pub(crate) size: u64,
    pub(crate) e_tag: Option<String>,
}

/// A get's options that Karu honours (object_store's `GetOptions`, the others refused by the
/// major's implementation).
#[derive(Debug, Default)]
pub(crate) struct GetRequest<'a> {
    pub(crate) range: Option<ByteRange>,
    pub(crate) if_match: Option<&'a str>,
    pub(crate) head: bool,
}

/// A get's answer: what it states about the object, the range it returns and the stream of
/// those bytes (object_store's `GetResult`).
pub(crate) struct Got {
    pub(crate) meta: Meta,
    pub(crate) range: Range<u64>,
    pub(crate) payload: BoxStream<'static, Result<Bytes, StoreError>>,
}

/// When Karu's answer says the object was last modified; the Unix epoch where it says nothing
/// (an answer without a valid `Last-Modified`), as object_store's own HTTP store reports.
fn last_modified(stated: Option<SystemTime>) -> DateTime<Utc> {
    stated.map_or(DateTime::UNIX_EPOCH, DateTime::<Utc>::from)
}

/// A get's answer: its metadata, the range it returns and the stream of those bytes.
fn result(
    meta: Meta,
    range: Range<u64>,
    payload: BoxStream<'static, Result<Bytes, StoreError>>,
) -> Got {
    Got {
        meta,
        range,
        payload,
    }
}

/// Whether an answer that stated `etag` (its strong ETag, if any) proves the caller's
/// `if_match` condition. The condition went out with the request, and Karu compared it with
/// the ETag the answer stated (RFC 9110's strong comparison of a list of entity tags), so an
/// answer with a strong ETag has matched; an answer without one proves only `*` (the server
/// did not refuse, but nothing shows that a tag matched).
fn proven(condition: &str, etag: Option<&str>, location: &str) -> Result<(), StoreError> {
    if etag.is_some() || condition.trim() == "*" {
        return Ok(());
    }
    Err(from_karu(
        karu::Error::new(
            Status::PreconditionFailed,
            format!(
                "if_match {condition} cannot be proven: the object states no strong ETag (a \
                 local file has none)"
            ),
        ),
        location,
    ))
}

impl fmt::Display for KaruStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "KaruStore({})", self.base)
    }
}

impl fmt::Debug for KaruStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KaruStore")
            .field("base", &self.base)
            .field("client", &self.client)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_star_is_proven_by_an_answer_without_a_strong_etag() {
        let path = "a";
        assert!(proven("\"v\"", Some("\"v\""), path).is_ok());
        assert!(proven("*", None, path).is_ok());
        assert!(proven(" * ", None, path).is_ok());
        for condition in ["\"v\"", "\"v\", \"w\"", "W/\"v\""] {
            assert!(
                matches!(
                    proven(condition, None, path),
                    Err(StoreError::Karu { ref error, .. })
                        if error.status() == Status::PreconditionFailed
                ),
                "{condition}"
            );
        }
    }
}
