//! `KaruStore`: `object_store::ObjectStore` over a Karu client and a base address.

use std::fmt;
use std::ops::Range;
use std::time::SystemTime;

use async_trait::async_trait;
use bytes::Bytes;
use chrono::{DateTime, Utc};
use futures_util::StreamExt;
use futures_util::stream::{self, BoxStream};
use karu::{BatchOptions, Client, Ends, Locator, Read, Status};
use object_store::path::Path;
use object_store::{
    CopyOptions, GetOptions, GetResult, GetResultPayload, ListResult, MultipartUpload, ObjectMeta,
    ObjectStore, PutMultipartOptions, PutOptions, PutPayload, PutResult, RenameOptions,
};

use crate::address::Base;
use crate::error::{STORE, from_address, from_karu, not_supported, read_only};
use crate::get::{self, CHUNKS_IN_FLIGHT, DEFAULT_CHUNK, First, Layout, Version};

/// An [`ObjectStore`] that reads through a Karu [`Client`]: every `object_store` path is joined
/// under one base address, and reads get Karu's planner, checks and recovery.
///
/// - [`get_opts`](ObjectStore::get_opts) takes every [`GetRange`](object_store::GetRange)
///   form and none. The first request is the read itself (no HEAD, no size probe before
///   it): the object's size comes from its `Content-Range`, its version from its ETag. A
///   range of up to one part (`http.part_size`, 8 MiB by default) is one request (where a
///   service ignores suffix ranges, as Azure does, a suffix is two: Karu's
///   [`read_ends`](karu::Client::read_ends) reads one byte of the head for the size, then the
///   tail, pinned to the head's ETag). A longer one, or the whole object, is one version or
///   an error, never parts of two:
///   - with a strong ETag, it goes on as a stream of part-sized chunks, eight in flight, each
///     pinned to the first answer's ETag (`If-Match`), so a replaced object fails the stream
///     with [`Error::Precondition`](object_store::Error::Precondition);
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
///   with [`Error::NotSupported`](object_store::Error::NotSupported), never ignored.
/// - [`get_ranges`](ObjectStore::get_ranges) is one Karu batch: Karu's planner and its four
///   guards decide what is merged (not object_store's fixed 1 MiB), every range is in flight
///   at once under the client's concurrency limit, and each range's bytes are the buffer Karu
///   filled (no copy). The batch keeps to one version: the first strong ETag an answer states
///   pins the other requests, and an answer of another version fails the call. As
///   object_store's contract says, a range reaching past the end of the object returns what
///   exists; one starting at or past the end is an error.
/// - [`head`](object_store::ObjectStoreExt::head) is Karu's stat (one ranged GET of byte 0):
///   the size, the strong ETag and `last_modified`: the answer's `Last-Modified` (a local
///   file's modification time), or the Unix epoch when the answer has none, as object_store's
///   own HTTP store reports. A `get` reports the same from the answer that read its first bytes.
/// - Writes, deletes, copies, renames and listings are
///   [`Error::NotImplemented`](object_store::Error::NotImplemented), naming the operation:
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
/// let store: Arc<dyn ObjectStore> = Arc::new(KaruStore::new(client, base)?);
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
    /// directory). Nothing is read now; the base is checked to be an address `client` can
    /// resolve ([`karu::Status::InvalidArgument`] or [`karu::Status::Unsupported`] otherwise).
    /// A URL base may not carry a query, a fragment or a user.
    pub fn new(client: Client, base: &str) -> Result<KaruStore, karu::Error> {
        let base = Base::parse(base)
            .map_err(|e| karu::Error::new(Status::InvalidArgument, e.to_string()))?;
        let probe = base
            .join(&Path::from("karu-object-store"))
            .map_err(|e| karu::Error::new(Status::InvalidArgument, e.to_string()))?;
        client.locate(&probe)?;
        Ok(KaruStore { client, base })
    }

    /// The client the store reads with.
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// The Karu address of `path` under the base.
    pub fn address(&self, path: &Path) -> object_store::Result<String> {
        self.base.join(path).map_err(|e| from_address(e, path))
    }

    /// The Karu locator of `path` under the base (no network, no credentials).
    pub fn locate(&self, path: &Path) -> object_store::Result<Locator> {
        let address = self.address(path)?;
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
    async fn head_meta(
        &self,
        location: &Path,
        locator: &Locator,
        if_match: Option<&str>,
    ) -> object_store::Result<ObjectMeta> {
        if let (Some(condition), None) = (if_match, locator.file_path()) {
            let ends = self
                .client
                .read_ends_if_match_async(locator, 0, 0, Some(condition))
                .await
                .map_err(|e| from_karu(e, location))?;
            proven(condition, ends.etag.as_deref(), location)?;
            return Ok(ObjectMeta {
                location: location.clone(),
                last_modified: last_modified(ends.last_modified),
                size: ends.size,
                e_tag: ends.etag,
                version: None,
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
        Ok(ObjectMeta {
            location: location.clone(),
            last_modified: last_modified(info.last_modified),
            size,
            e_tag: info.etag,
            version: None,
        })
    }

    /// The first answer of a get: `read_ends` of `window`, carrying the caller's `if_match`
    /// (a local file, which has no ETag, is stat-ed first so that a missing one is not found).
    async fn first_answer(
        &self,
        location: &Path,
        window: &Locator,
        first: First,
        if_match: Option<&str>,
    ) -> object_store::Result<Ends> {
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
        location: &Path,
        locator: &Locator,
        layout: &Layout,
        if_match: Option<&str>,
    ) -> object_store::Result<(ObjectMeta, Bytes)> {
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
        let meta = ObjectMeta {
            location: location.clone(),
            last_modified: last_modified(again.last_modified),
            size,
            e_tag: again.etag,
            version: None,
        };
        Ok((meta, Bytes::from(again.head)))
    }

    async fn get(&self, location: &Path, options: GetOptions) -> object_store::Result<GetResult> {
        refuse_unsupported(&options)?;
        let locator = self.locate(location)?;
        let if_match = options.if_match.as_deref();
        if options.head {
            let meta = self.head_meta(location, &locator, if_match).await?;
            return Ok(GetResult {
                payload: GetResultPayload::Stream(stream::empty().boxed()),
                range: 0..meta.size,
                meta,
                attributes: Default::default(),
                extensions: Default::default(),
            });
        }
        if let Some(range) = &options.range {
            range.is_valid().map_err(|e| generic(Box::new(e)))?;
        }
        let chunk = self.chunk();
        let first = First::of(options.range.as_ref(), chunk);
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
            options.range.as_ref(),
            first,
            ends.size,
            ends.head.len() as u64,
            ends.tail.len() as u64,
        )
        .map_err(generic)?;
        let meta = ObjectMeta {
            location: location.clone(),
            last_modified: last_modified(ends.last_modified),
            size: layout.size,
            e_tag: ends.etag.clone(),
            version: None,
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
            location.clone(),
            version,
            pieces,
        );
        Ok(result(meta, layout.range, payload))
    }

    async fn ranges(
        &self,
        location: &Path,
        ranges: &[Range<u64>],
    ) -> object_store::Result<Vec<Bytes>> {
        if let Some(r) = ranges.iter().find(|r| r.end < r.start) {
            return Err(from_karu(
                karu::Error::new(
                    Status::InvalidRange,
                    format!("the range {}..{} ends before it starts", r.start, r.end),
                ),
                location,
            ));
        }
        let locator = self.locate(location)?;
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

/// When Karu's answer says the object was last modified; the Unix epoch where it says nothing
/// (an answer without a valid `Last-Modified`), as object_store's own HTTP store reports.
fn last_modified(stated: Option<SystemTime>) -> DateTime<Utc> {
    stated.map_or(DateTime::UNIX_EPOCH, DateTime::<Utc>::from)
}

fn generic(source: Box<dyn std::error::Error + Send + Sync>) -> object_store::Error {
    object_store::Error::Generic {
        store: STORE,
        source,
    }
}

/// Refuse what Karu cannot honour, instead of ignoring it.
fn refuse_unsupported(options: &GetOptions) -> object_store::Result<()> {
    if options.if_none_match.is_some() {
        return Err(not_supported(
            "if_none_match",
            "Karu reads answer with the object's bytes or an error, never \"not modified\"",
        ));
    }
    if options.if_modified_since.is_some() || options.if_unmodified_since.is_some() {
        return Err(not_supported(
            "if_modified_since / if_unmodified_since",
            "Karu conditions reads on strong ETags (if_match), not on dates",
        ));
    }
    if options.version.is_some() {
        return Err(not_supported(
            "version",
            "Karu reads the current version of an object (pin it with if_match)",
        ));
    }
    Ok(())
}

/// A get's result: its metadata, the range it returns and the stream of those bytes.
fn result(
    meta: ObjectMeta,
    range: Range<u64>,
    payload: BoxStream<'static, object_store::Result<Bytes>>,
) -> GetResult {
    GetResult {
        payload: GetResultPayload::Stream(payload),
        meta,
        range,
        attributes: Default::default(),
        extensions: Default::default(),
    }
}

/// Whether an answer that stated `etag` (its strong ETag, if any) proves the caller's
/// `if_match` condition. The condition went out with the request, and Karu compared it with
/// the ETag the answer stated (RFC 9110's strong comparison of a list of entity tags), so an
/// answer with a strong ETag has matched; an answer without one proves only `*` (the server
/// did not refuse, but nothing shows that a tag matched).
fn proven(condition: &str, etag: Option<&str>, location: &Path) -> object_store::Result<()> {
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

#[async_trait]
impl ObjectStore for KaruStore {
    async fn put_opts(
        &self,
        _location: &Path,
        _payload: PutPayload,
        _opts: PutOptions,
    ) -> object_store::Result<PutResult> {
        Err(read_only("put_opts"))
    }

    async fn put_multipart_opts(
        &self,
        _location: &Path,
        _opts: PutMultipartOptions,
    ) -> object_store::Result<Box<dyn MultipartUpload>> {
        Err(read_only("put_multipart_opts"))
    }

    async fn get_opts(
        &self,
        location: &Path,
        options: GetOptions,
    ) -> object_store::Result<GetResult> {
        self.get(location, options).await
    }

    async fn get_ranges(
        &self,
        location: &Path,
        ranges: &[Range<u64>],
    ) -> object_store::Result<Vec<Bytes>> {
        self.ranges(location, ranges).await
    }

    fn delete_stream(
        &self,
        locations: BoxStream<'static, object_store::Result<Path>>,
    ) -> BoxStream<'static, object_store::Result<Path>> {
        locations.map(|_| Err(read_only("delete_stream"))).boxed()
    }

    fn list(&self, _prefix: Option<&Path>) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
        stream::once(async { Err(read_only("list")) }).boxed()
    }

    fn list_with_offset(
        &self,
        _prefix: Option<&Path>,
        _offset: &Path,
    ) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
        stream::once(async { Err(read_only("list_with_offset")) }).boxed()
    }

    async fn list_with_delimiter(
        &self,
        _prefix: Option<&Path>,
    ) -> object_store::Result<ListResult> {
        Err(read_only("list_with_delimiter"))
    }

    async fn copy_opts(
        &self,
        _from: &Path,
        _to: &Path,
        _options: CopyOptions,
    ) -> object_store::Result<()> {
        Err(read_only("copy_opts"))
    }

    async fn rename_opts(
        &self,
        _from: &Path,
        _to: &Path,
        _options: RenameOptions,
    ) -> object_store::Result<()> {
        Err(read_only("rename_opts"))
    }
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
        let path = Path::from("a");
        assert!(proven("\"v\"", Some("\"v\""), &path).is_ok());
        assert!(proven("*", None, &path).is_ok());
        assert!(proven(" * ", None, &path).is_ok());
        for condition in ["\"v\"", "\"v\", \"w\"", "W/\"v\""] {
            assert!(
                matches!(
                    proven(condition, None, &path),
                    Err(object_store::Error::Precondition { .. })
                ),
                "{condition}"
            );
        }
    }

    #[test]
    fn options_karu_cannot_honour_are_refused() {
        let date = DateTime::UNIX_EPOCH;
        for options in [
            GetOptions::new().with_if_none_match(Some("\"v\"")),
            GetOptions::new().with_if_modified_since(Some(date)),
            GetOptions::new().with_if_unmodified_since(Some(date)),
            GetOptions::new().with_version(Some("3")),
        ] {
            assert!(
                matches!(
                    refuse_unsupported(&options),
                    Err(object_store::Error::NotSupported { .. })
                ),
                "{options:?}"
            );
        }
        assert!(refuse_unsupported(&GetOptions::new().with_if_match(Some("\"v\""))).is_ok());
    }
}
