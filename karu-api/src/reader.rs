//! `ObjectReader`: one object read by position, for the layers above Karu (chunk caches,
//! format readers) that want a `read_at` / `size` seam rather than batches.

use std::fmt;
use std::future::Future;
use std::sync::Arc;

use karu_engine::{Batch, BatchOptions, Completion, Error, Locator, Read, Status};

use crate::client::{Client, exact, next_completion};

/// One object, read by position: [`size`](ObjectReader::size), blocking
/// [`read_at`](ObjectReader::read_at) and [`read_many`](ObjectReader::read_many), and their
/// async counterparts. Every call returns the exact bytes asked for or an error: a range that
/// reaches past the end of the object fails with [`Status::RangeNotSatisfiable`], whose
/// [`Evidence::EndOfObject`](crate::Evidence::EndOfObject) says how many bytes do exist (and were delivered), never with a
/// silently short buffer.
///
/// `ObjectReader` is cheap to clone, `Send` and `Sync`, and every method takes `&self`: many
/// threads (or tasks) may read through one reader at once, with no cursor and no lock between
/// them. All of them share the client's engine, connections and credentials.
///
/// # One version, one size
///
/// A reader stands for one version of the object, for as long as the caller keeps it:
///
/// - [`open`](ObjectReader::open) asks for the object's size and strong ETag once
///   ([`Client::stat`]), and every later read carries that ETag as `If-Match` (Karu also
///   checks it on each answer). If the object is replaced, reads fail with
///   [`Status::PreconditionFailed`] instead of mixing bytes of two versions or trusting a
///   size that is no longer true. A layer that caches chunks by content or by offset needs
///   exactly this: a reader never returns bytes of another version than the one its size
///   describes. Objects without a strong ETag (local files, some servers) cannot be pinned:
///   their reads follow the object as it is when each one runs.
/// - The size is remembered by the reader, not by Karu: the client caches no sizes, as Karu's
///   contract requires (`karu-engine/README.md`, "Versions"), and a new reader asks again. Opening a reader is the caller's
///   explicit choice to use one answer for the reader's lifetime; when the caller already
///   knows the size (and version) from elsewhere — [`Client::read_ends`], or the dataset's own
///   header — [`with_size`](ObjectReader::with_size) and
///   [`if_match`](ObjectReader::if_match) open it without asking.
///
/// ```
/// # let dir = tempfile::tempdir()?;
/// # let path = dir.path().join("a"); std::fs::write(&path, (0..100u8).collect::<Vec<_>>())?;
/// # let client = karu::Client::builder().user_config_file(None).project_config_file(None).build()?;
/// use karu::{Evidence, ObjectReader, Status};
///
/// let object = client.locate(path.to_str().unwrap())?;
/// let reader = ObjectReader::open(&client, &object)?;
/// assert_eq!(reader.size(), 100);
///
/// let mut header = [0u8; 4];
/// reader.read_at(0, &mut header)?;
/// assert_eq!(header, [0, 1, 2, 3]);
///
/// // Several ranges in one batch (merged into fewer transfers where that pays).
/// let parts = reader.read_many(&[(10, 2), (50, 3)])?;
/// assert_eq!(parts, vec![vec![10, 11], vec![50, 51, 52]]);
///
/// // A range past the end is an error that says how much exists.
/// let mut tail = [0u8; 8];
/// let err = reader.read_at(96, &mut tail).unwrap_err();
/// assert_eq!(err.status(), Status::RangeNotSatisfiable);
/// assert!(matches!(err.evidence(), Some(Evidence::EndOfObject { received: 4, .. })));
/// assert_eq!(&tail[..4], &[96, 97, 98, 99]);
///
/// // The async counterparts run on any executor.
/// let bytes = futures::executor::block_on(reader.read_many_async(&[(98, 2)]))?;
/// assert_eq!(bytes, vec![vec![98, 99]]);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone)]
pub struct ObjectReader(Arc<Inner>);

/// The size a reader needs: an object that states none cannot be opened by stat.
fn sized(locator: &Locator, size: Option<u64>) -> Result<u64, Error> {
    size.ok_or_else(|| {
        Error::new(
            Status::Unsupported,
            format!(
                "{locator} states no size (it is not a regular file); open it with \
                 ObjectReader::with_size"
            ),
        )
    })
}

#[derive(Clone)]
struct Inner {
    client: Client,
    locator: Locator,
    size: u64,
    etag: Option<String>,
}

impl ObjectReader {
    /// Open `locator`: one [`Client::stat`] for its size and strong ETag, which later reads
    /// are pinned to. An object without a size (a local device or FIFO) is
    /// [`Status::Unsupported`]; a caller who knows how much to read uses
    /// [`ObjectReader::with_size`].
    pub fn open(client: &Client, locator: &Locator) -> Result<Self, Error> {
        let info = client.stat(locator)?;
        let size = sized(locator, info.size)?;
        Ok(Self::with_size(client, locator, size).pinned_to(info.etag))
    }

    /// [`ObjectReader::open`] as an executor-neutral future (see [`Client::stat_async`]).
    pub fn open_async(
        client: &Client,
        locator: &Locator,
    ) -> impl Future<Output = Result<Self, Error>> + Send + 'static + use<> {
        let client = client.clone();
        let locator = locator.clone();
        async move {
            let info = client.stat_async(&locator).await?;
            let size = sized(&locator, info.size)?;
            Ok(Self::with_size(&client, &locator, size).pinned_to(info.etag))
        }
    }

    /// A reader of an object whose size the caller already knows; nothing is asked of the
    /// object now, and reads are not pinned to a version unless
    /// [`if_match`](ObjectReader::if_match) says which.
    pub fn with_size(client: &Client, locator: &Locator, size: u64) -> Self {
        ObjectReader(Arc::new(Inner {
            client: client.clone(),
            locator: locator.clone(),
            size,
            etag: None,
        }))
    }

    /// Pin every read to this version of the object (a strong ETag, as from
    /// [`Client::stat`] or [`Client::read_ends`]): reads send it as `If-Match` and fail with
    /// [`Status::PreconditionFailed`] once the object is another version. Remote objects only:
    /// a local file has no versions, and its reads then fail with
    /// [`Status::InvalidArgument`].
    pub fn if_match(self, etag: impl Into<String>) -> Self {
        self.pinned_to(Some(etag.into()))
    }

    fn pinned_to(self, etag: Option<String>) -> Self {
        let inner = Arc::unwrap_or_clone(self.0);
        ObjectReader(Arc::new(Inner { etag, ..inner }))
    }

    /// The object's visible size, as known when the reader was opened.
    pub fn size(&self) -> u64 {
        self.0.size
    }

    /// The version reads are pinned to, if any.
    pub fn etag(&self) -> Option<&str> {
        self.0.etag.as_deref()
    }

    /// The object.
    pub fn locator(&self) -> &Locator {
        &self.0.locator
    }

    /// Fill `destination` with the bytes at `offset`, in place, blocking the calling thread.
    /// Positional: nothing is shared between calls, so any number of threads may call it at
    /// once. An empty destination reads nothing.
    ///
    /// On [`Status::RangeNotSatisfiable`] the first
    /// [`received`](crate::Evidence::EndOfObject::received) bytes of `destination` hold the bytes
    /// that exist; on any other error its contents are unspecified.
    pub fn read_at(&self, offset: u64, destination: &mut [u8]) -> Result<(), Error> {
        if destination.is_empty() {
            return Ok(());
        }
        let length = destination.len() as u64;
        let completion = self.0.client.scope(|scope| {
            let read = self.pin(Read::borrowed(&self.0.locator, offset, destination));
            scope.submit([read], &BatchOptions::new()).wait().pop()
        });
        self.exact(completion, offset, length).map(drop)
    }

    /// [`read_at`](ObjectReader::read_at) as an executor-neutral future that never blocks the
    /// thread polling it. The bytes land in a buffer the read owns and are copied into
    /// `destination` once they are complete (on [`Status::RangeNotSatisfiable`], the prefix
    /// that exists): Karu's threads never write to a borrowed slice from a future, which could
    /// be forgotten while they do. Dropping the future cancels the read.
    pub fn read_at_async<'d>(
        &self,
        offset: u64,
        destination: &'d mut [u8],
    ) -> impl Future<Output = Result<(), Error>> + Send + use<'d> {
        let reader = self.clone();
        async move {
            if destination.is_empty() {
                return Ok(());
            }
            let length = destination.len() as u64;
            let mut batch = reader.submit(&[(offset, length)]);
            let completion = next_completion(&mut batch).await;
            let delivered = completion.as_ref().map_or(&[][..], Completion::bytes);
            let n = delivered.len().min(destination.len());
            destination[..n].copy_from_slice(&delivered[..n]);
            reader.exact(completion, offset, length).map(drop)
        }
    }

    /// The bytes of every `(offset, length)` range, read as one batch (neighbouring ranges
    /// merged where that pays, all of them in flight together), blocking the calling thread.
    /// Exact bytes for every range, or the error of the first failing range (by position in
    /// `ranges`). Empty ranges read nothing.
    pub fn read_many(&self, ranges: &[(u64, u64)]) -> Result<Vec<Vec<u8>>, Error> {
        let batch = self.submit(ranges);
        self.collect(batch.wait(), ranges)
    }

    /// [`read_many`](ObjectReader::read_many) as an executor-neutral future that never blocks
    /// the thread polling it. It starts when first polled; dropping it cancels the batch.
    pub fn read_many_async(
        &self,
        ranges: &[(u64, u64)],
    ) -> impl Future<Output = Result<Vec<Vec<u8>>, Error>> + Send + 'static + use<> {
        let reader = self.clone();
        let ranges = ranges.to_vec();
        async move {
            let mut batch = reader.submit(&ranges);
            let mut completions = Vec::with_capacity(ranges.len());
            while let Some(completion) = next_completion(&mut batch).await {
                completions.push(completion);
            }
            reader.collect(completions, &ranges)
        }
    }

    /// Submit the non-empty `ranges`, each tagged with its position.
    fn submit(&self, ranges: &[(u64, u64)]) -> Batch {
        let reads = ranges
            .iter()
            .enumerate()
            .filter(|(_, (_, length))| *length > 0)
            .map(|(i, &(offset, length))| {
                self.pin(Read::new(&self.0.locator, offset, length).tag(i as u64))
            });
        self.0.client.submit(reads)
    }

    /// One result per range, in order, from the completions of [`ObjectReader::submit`].
    fn collect(
        &self,
        completions: Vec<Completion>,
        ranges: &[(u64, u64)],
    ) -> Result<Vec<Vec<u8>>, Error> {
        let mut bytes = vec![Vec::new(); ranges.len()];
        let mut first_error: Option<(usize, Error)> = None;
        for completion in completions {
            let i = usize::try_from(completion.tag()).unwrap_or(usize::MAX);
            let Some(&(offset, length)) = ranges.get(i) else {
                return Err(Error::new(
                    Status::Internal,
                    "a completion of an ObjectReader batch has a tag it was not given",
                ));
            };
            match self.exact(Some(completion), offset, length) {
                Ok(b) => bytes[i] = b,
                Err(e) if first_error.as_ref().is_none_or(|(j, _)| i < *j) => {
                    first_error = Some((i, e));
                }
                Err(_) => {}
            }
        }
        match first_error {
            Some((_, error)) => Err(error),
            None => Ok(bytes),
        }
    }

    /// The read, pinned to the reader's version if it has one.
    fn pin<'d>(&self, read: Read<'d>) -> Read<'d> {
        match &self.0.etag {
            Some(etag) => read.if_match(etag.clone()),
            None => read,
        }
    }

    /// The bytes of a completion of `length` bytes at `offset`, or its error.
    fn exact(
        &self,
        completion: Option<Completion>,
        offset: u64,
        length: u64,
    ) -> Result<Vec<u8>, Error> {
        exact(completion, &self.0.locator, offset, length)
    }
}

impl fmt::Debug for ObjectReader {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ObjectReader")
            .field("locator", &self.0.locator)
            .field("size", &self.0.size)
            .field("pinned", &self.0.etag.is_some())
            .finish_non_exhaustive()
    }
}
