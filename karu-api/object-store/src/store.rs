//! `KaruStore`: `object_store::ObjectStore` over a Karu client and a base address.

use std::fmt;
use std::ops::Range;
use std::time::SystemTime;

use async_trait::async_trait;
use bytes::Bytes;
use chrono::{DateTime, Utc};
use futures_util::StreamExt;
use futures_util::stream::{self, BoxStream};
use karu::{Client, Locator, Read, Status};
use object_store::path::Path;
use object_store::{
    CopyOptions, GetOptions, GetResult, GetResultPayload, ListResult, MultipartUpload, ObjectMeta,
    ObjectStore, PutMultipartOptions, PutOptions, PutPayload, PutResult, RenameOptions,
};

use crate::address::Base;
use crate::error::{STORE, from_address, from_karu, not_supported, read_only};
use crate::get::{self, DEFAULT_CHUNK, First, Layout};

/// An [`ObjectStore`] that reads through a Karu [`Client`]: every `object_store` path is joined
/// under one base address, and reads get Karu's planner, checks and recovery.
///
/// - [`get_opts`](ObjectStore::get_opts) takes every [`GetRange`](object_store::GetRange)
///   form and none. The first request is the read itself (no HEAD, no size probe before
///   it): the object's size comes from its `Content-Range`, its version from its ETag. A
///   range of up to one part (`http.part_size`, 8 MiB by default) is one request (where a
///   service ignores suffix ranges, as Azure does, a suffix is two: Karu's
///   [`read_ends`](karu::Client::read_ends) reads one byte of the head for the size, then the
///   tail, pinned to the head's ETag); a longer
///   one, or the whole object, goes on as a stream of part-sized chunks, eight in flight,
///   each pinned to the first answer's strong ETag (`If-Match`), so a replaced object fails
///   the stream instead of mixing versions. `if_match` is compared with that answer's strong
///   ETag (a mismatch, or an answer without one, is [`Error::Precondition`](object_store::Error::Precondition);
///   `*` matches any). `head: true` is a stat. `if_none_match`, `if_modified_since`,
///   `if_unmodified_since` and `version` are refused with
///   [`Error::NotSupported`](object_store::Error::NotSupported), never ignored.
/// - [`get_ranges`](ObjectStore::get_ranges) is one Karu batch: Karu's planner and its four
///   guards decide what is merged (not object_store's fixed 1 MiB), every range is in flight
///   at once under the client's concurrency limit, and each range's bytes are the buffer Karu
///   filled (no copy). As object_store's contract says, a range reaching past the end of the
///   object returns what exists; one starting at or past the end is an error.
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
/// `a b+c%25d %C3%A9`.) A segment standing for `.` or `..` is refused.
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

    /// The stat behind `head` and `get_opts` with `head: true`.
    async fn stat(&self, location: &Path, locator: &Locator) -> object_store::Result<ObjectMeta> {
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
        Ok(ObjectMeta {
            location: location.clone(),
            last_modified: last_modified(info.last_modified),
            size,
            e_tag: info.etag,
            version: None,
        })
    }

    async fn get(&self, location: &Path, options: GetOptions) -> object_store::Result<GetResult> {
        refuse_unsupported(&options)?;
        let locator = self.locate(location)?;
        if options.head {
            let meta = self.stat(location, &locator).await?;
            check_if_match(&options, &meta)?;
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
            .client
            .read_ends_async(&window, first.head, first.tail)
            .await
            .map_err(|e| from_karu(e, location))?;
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
        check_if_match(&options, &meta)?;
        let held = if first.tail > 0 { ends.tail } else { ends.head };
        let pieces = get::pieces(&layout, first, held, chunk);
        let payload = get::stream(
            self.client.clone(),
            locator,
            location.clone(),
            ends.etag,
            pieces,
        );
        Ok(GetResult {
            payload: GetResultPayload::Stream(payload),
            meta,
            range: layout.range,
            attributes: Default::default(),
            extensions: Default::default(),
        })
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
        let mut batch = self.client.submit(
            ranges
                .iter()
                .enumerate()
                .filter(|(_, r)| r.end > r.start)
                .map(|(i, r)| Read::new(&locator, r.start, r.end - r.start).tag(i as u64)),
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

/// `if_match` against the ETag the answer stated (RFC 9110: a list of tags, or `*`; an answer
/// without a strong ETag matches no tag).
fn check_if_match(options: &GetOptions, meta: &ObjectMeta) -> object_store::Result<()> {
    let Some(wanted) = &options.if_match else {
        return Ok(());
    };
    if wanted.trim() == "*" {
        return Ok(());
    }
    let matches = meta
        .e_tag
        .as_deref()
        .is_some_and(|etag| wanted.split(',').map(str::trim).any(|w| w == etag));
    if matches {
        return Ok(());
    }
    let stated = meta.e_tag.as_deref().unwrap_or("no strong ETag");
    Err(from_karu(
        karu::Error::new(
            Status::PreconditionFailed,
            format!("if_match {wanted} does not match the object's {stated}"),
        ),
        &meta.location,
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

    fn meta(etag: Option<&str>) -> ObjectMeta {
        ObjectMeta {
            location: Path::from("a"),
            last_modified: DateTime::UNIX_EPOCH,
            size: 1,
            e_tag: etag.map(str::to_string),
            version: None,
        }
    }

    fn if_match(tag: &str) -> GetOptions {
        GetOptions::new().with_if_match(Some(tag))
    }

    #[test]
    fn if_match_takes_a_tag_a_list_or_a_star() {
        let m = meta(Some("\"v2\""));
        assert!(check_if_match(&GetOptions::new(), &m).is_ok());
        assert!(check_if_match(&if_match("\"v2\""), &m).is_ok());
        assert!(check_if_match(&if_match("\"v1\", \"v2\""), &m).is_ok());
        assert!(check_if_match(&if_match("*"), &m).is_ok());
        assert!(matches!(
            check_if_match(&if_match("\"v1\""), &m),
            Err(object_store::Error::Precondition { .. })
        ));
        // Without a strong ETag in the answer, no tag can be proven to match.
        assert!(matches!(
            check_if_match(&if_match("\"v2\""), &meta(None)),
            Err(object_store::Error::Precondition { .. })
        ));
        assert!(check_if_match(&if_match("*"), &meta(None)).is_ok());
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
