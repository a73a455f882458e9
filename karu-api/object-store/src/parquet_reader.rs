//! `ParquetReader`: parquet's `AsyncFileReader` over a Karu client, for one file.

use std::fmt;
use std::ops::Range;
use std::sync::{Arc, Mutex, OnceLock};

use bytes::{Bytes, BytesMut};
use futures_util::future::BoxFuture;
use futures_util::{FutureExt, StreamExt};
use karu::{Batch, BatchOptions, Client, Completion, Locator, Read, Status};
use parquet::arrow::ProjectionMask;
use parquet::arrow::arrow_reader::ArrowReaderOptions;
use parquet::arrow::async_reader::{AsyncFileReader, MetadataFetch};
use parquet::errors::{ParquetError, Result};
use parquet::file::metadata::{ParquetMetaData, ParquetMetaDataReader};

use crate::prefetch::{DEFAULT_BUDGET, Prefetched};

/// Parquet's [`AsyncFileReader`] for one file at any Karu address, implemented directly (the
/// door parquet 60 keeps: it deprecates `ParquetObjectReader` in favour of readers like this
/// one).
///
/// - [`get_metadata`](AsyncFileReader::get_metadata) reads the footer in **one request**:
///   the last [`footer_hint`](ParquetReader::with_footer_hint) bytes (64 KiB by default) as a
///   suffix read, whose answer also states the file's size and ETag (where a service ignores
///   suffix ranges, as Azure does, Karu's [`read_ends`](karu::Client::read_ends) reads one
///   byte of the head first, for the size). Only metadata longer than that (or a page index
///   before it) takes a second read, of the missing bytes alone.
/// - [`get_bytes`](AsyncFileReader::get_bytes) is one read;
///   [`get_byte_ranges`](AsyncFileReader::get_byte_ranges) (the column chunks of a row group)
///   is one Karu batch, merged where Karu's planner and its guards say it pays.
/// - One version: the first footer answer's strong ETag is sent as `If-Match` with every later
///   read of this reader and of its clones (Karu also checks it on each answer), so a file
///   replaced while it is read fails with [`Status::PreconditionFailed`] instead of mixing
///   row groups of two files. Reads before the footer keep to one version within their batch.
///   Files without a strong ETag (local files, some servers) cannot be pinned: their reads
///   follow the file as it is.
/// - [`prefetch`](ParquetReader::prefetch) hands Karu a query's column chunks ahead of
///   parquet's stream (the projected columns of the selected row groups, as many as a byte
///   budget allows), which asks for them one row group after another: the stream's reads are
///   then served from batches already in flight, so the query costs about one round trip
///   instead of one per row group.
/// - Every read returns exactly the bytes asked for or an error; errors are
///   [`ParquetError::External`] holding Karu's [`karu::Error`] (its status and evidence).
///
/// The futures are Karu's own (woken by Karu's threads): they need no runtime and run under
/// tokio, smol or a plain executor alike.
///
/// ```
/// # use std::sync::Arc;
/// # use arrow_array::{Int64Array, RecordBatch, ArrayRef};
/// use futures::TryStreamExt;
/// use karu_object_store::ParquetReader;
/// use parquet::arrow::{ArrowWriter, ParquetRecordBatchStreamBuilder, ProjectionMask};
///
/// # let dir = tempfile::tempdir()?;
/// # let path = dir.path().join("numbers.parquet");
/// # let column = Arc::new(Int64Array::from_iter_values(0..1000)) as ArrayRef;
/// # let batch = RecordBatch::try_from_iter([("n", column)])?;
/// # let mut writer = ArrowWriter::try_new(std::fs::File::create(&path)?, batch.schema(), None)?;
/// # writer.write(&batch)?;
/// # writer.close()?;
/// let client = karu::Client::builder().user_config_file(None).project_config_file(None).build()?;
/// let reader = ParquetReader::new(&client, path.to_str().unwrap())?;
/// let batches: Vec<_> = futures::executor::block_on(async {
///     let builder = ParquetRecordBatchStreamBuilder::new(reader).await?;
///     assert_eq!(builder.metadata().file_metadata().num_rows(), 1000);
///     builder.build()?.try_collect().await
/// })?;
/// assert_eq!(batches.iter().map(|b| b.num_rows()).sum::<usize>(), 1000);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct ParquetReader {
    client: Client,
    locator: Locator,
    footer_hint: u64,
    /// The version the first footer answer stated, shared with clones.
    version: Arc<OnceLock<Version>>,
    /// The row groups [`ParquetReader::prefetch`] reads ahead of the stream (this reader's
    /// own: a clone starts with none).
    prefetched: Mutex<Prefetched>,
    /// The most bytes `prefetched` holds.
    prefetch_budget: u64,
}

/// A clone reads the same file, pinned to the same version, with the same settings; it starts
/// with nothing prefetched (a prefetch serves the one stream its reader is given to).
impl Clone for ParquetReader {
    fn clone(&self) -> ParquetReader {
        ParquetReader {
            client: self.client.clone(),
            locator: self.locator.clone(),
            footer_hint: self.footer_hint,
            version: self.version.clone(),
            prefetched: Mutex::new(Prefetched::default()),
            prefetch_budget: self.prefetch_budget,
        }
    }
}

/// One version of the file: its size and strong ETag.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Version {
    size: u64,
    etag: Option<String>,
}

/// The bytes of a suffix read that sits beside the footer: the default covers the metadata
/// of most files (a few row groups of tens of columns) in one round trip.
const DEFAULT_FOOTER_HINT: u64 = 64 << 10;

/// A Parquet footer is at least this long (metadata length and magic).
const FOOTER: u64 = 8;

impl ParquetReader {
    /// A reader of the Parquet file at `address` (any Karu address). Nothing is read now;
    /// an address no provider of `client` serves is an error here.
    pub fn new(client: &Client, address: &str) -> std::result::Result<ParquetReader, karu::Error> {
        Ok(Self::from_locator(client, &client.locate(address)?))
    }

    /// A reader of the Parquet file `locator` names.
    pub fn from_locator(client: &Client, locator: &Locator) -> ParquetReader {
        ParquetReader {
            client: client.clone(),
            locator: locator.clone(),
            footer_hint: DEFAULT_FOOTER_HINT,
            version: Arc::new(OnceLock::new()),
            prefetched: Mutex::new(Prefetched::default()),
            prefetch_budget: DEFAULT_BUDGET,
        }
    }

    /// Read the last `bytes` of the file with the footer (at least 8; default 64 KiB): larger
    /// for files with long metadata (many row groups or columns, page indexes), so that the
    /// metadata still comes in one round trip.
    pub fn with_footer_hint(mut self, bytes: u64) -> ParquetReader {
        self.footer_hint = bytes.max(FOOTER);
        self
    }

    /// Let [`prefetch`](ParquetReader::prefetch) hold at most `bytes` (default 128 MiB): the
    /// column chunks of the row groups in flight or arrived that the stream has not taken. A
    /// row group that does not fit waits, unread, until the stream has taken or passed enough
    /// of those before it; one larger than the budget is read alone.
    pub fn with_prefetch_budget(mut self, bytes: u64) -> ParquetReader {
        self.prefetch_budget = bytes;
        self
    }

    /// The bytes [`prefetch`](ParquetReader::prefetch) holds now: column chunks in flight or
    /// arrived that the stream has not taken, of row groups it has not passed.
    pub fn prefetched_bytes(&self) -> u64 {
        self.prefetched
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .held()
    }

    /// The file.
    pub fn locator(&self) -> &Locator {
        &self.locator
    }

    /// The file's size, once its footer has been read.
    pub fn size(&self) -> Option<u64> {
        self.version.get().map(|v| v.size)
    }

    /// The strong ETag reads are pinned to, once the footer has been read (none for files
    /// without one).
    pub fn etag(&self) -> Option<&str> {
        self.version.get().and_then(|v| v.etag.as_deref())
    }

    /// Read the column chunks of `projection` in each of `row_groups` ahead of parquet's
    /// stream: one Karu batch per row group (merged where Karu's planner says it pays, pinned
    /// to the version the footer stated), started in the order given, as many at once as the
    /// [prefetch budget](ParquetReader::with_prefetch_budget) allows (all of them, for most
    /// queries), under the client's concurrency limit. When parquet's stream asks for chunks a
    /// prefetched row group holds ([`get_byte_ranges`](AsyncFileReader::get_byte_ranges)), it
    /// takes them instead of reading again.
    ///
    /// Call it with the metadata, row groups (in the stream's order) and projection the
    /// stream is built with; reads it does not match are read as usual. What is prefetched
    /// is held until the stream takes it, and no longer: a row group is released once the
    /// stream has taken all its chunks (a row filter's two reads of a row group are both
    /// served) or reads in a later row group (another projection, a row group skipped), and
    /// everything with the reader (a limit reached, a stream dropped). Row groups the budget
    /// keeps waiting are not read until the stream gets near them, so a stream that stops
    /// early leaves them unread.
    ///
    /// ```no_run
    /// # async fn query(client: &karu::Client) -> Result<(), Box<dyn std::error::Error>> {
    /// use futures::TryStreamExt;
    /// use karu_object_store::ParquetReader;
    /// use parquet::arrow::arrow_reader::ArrowReaderMetadata;
    /// use parquet::arrow::{ParquetRecordBatchStreamBuilder, ProjectionMask};
    ///
    /// let mut reader = ParquetReader::new(client, "s3://bucket/trips.parquet")?;
    /// let metadata = ArrowReaderMetadata::load_async(&mut reader, Default::default()).await?;
    /// let columns = ProjectionMask::roots(metadata.parquet_schema(), [0, 5, 9]);
    /// let row_groups = vec![0, 2, 4, 6];
    /// reader.prefetch(metadata.metadata(), &row_groups, &columns)?; // one round trip for all
    /// let batches: Vec<_> = ParquetRecordBatchStreamBuilder::new_with_metadata(reader, metadata)
    ///     .with_projection(columns)
    ///     .with_row_groups(row_groups)
    ///     .build()?
    ///     .try_collect()
    ///     .await?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn prefetch(
        &self,
        metadata: &ParquetMetaData,
        row_groups: &[usize],
        projection: &ProjectionMask,
    ) -> Result<()> {
        if let Some(g) = row_groups.iter().find(|&&g| g >= metadata.num_row_groups()) {
            return Err(ParquetError::General(format!(
                "row group {g} of {} row groups",
                metadata.num_row_groups()
            )));
        }
        let mut prefetched = self
            .prefetched
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        for &g in row_groups {
            let group = metadata.row_group(g);
            let chunk = |c: usize| {
                let (start, length) = group.column(c).byte_range();
                start..start.saturating_add(length)
            };
            let all: Vec<Range<u64>> = (0..group.num_columns()).map(chunk).collect();
            let extent = all.iter().map(|r| r.start).min().unwrap_or(0)
                ..all.iter().map(|r| r.end).max().unwrap_or(0);
            let ranges: Vec<Range<u64>> = (0..group.num_columns())
                .filter(|&c| projection.leaf_included(c))
                .map(chunk)
                .filter(|r| !r.is_empty())
                .collect();
            if !ranges.is_empty() {
                prefetched.push(extent, ranges);
            }
        }
        let etag = self.etag().map(str::to_owned);
        prefetched.start_within(self.prefetch_budget, |ranges| {
            start_group(&self.client, &self.locator, etag.as_deref(), ranges)
        });
        Ok(())
    }

    /// The read, pinned to the file's version once it is known.
    fn pin(&self, read: Read<'static>) -> Read<'static> {
        match self.etag() {
            Some(etag) => read.if_match(etag),
            None => read,
        }
    }

    /// Exactly the bytes of `range`, in one read.
    async fn read(&self, range: Range<u64>) -> Result<Bytes> {
        let length = checked_length(&range)?;
        if length == 0 {
            return Ok(Bytes::new());
        }
        let mut batch =
            self.client
                .submit([self.pin(Read::new(&self.locator, range.start, length))]);
        exact(batch.next().await, length)
    }

    /// Exactly the bytes of every range: from a prefetched row group that holds them all,
    /// else in one batch.
    async fn read_many(&mut self, ranges: Vec<Range<u64>>) -> Result<Vec<Bytes>> {
        for range in &ranges {
            checked_length(range)?;
        }
        if ranges.iter().all(|r| r.is_empty()) {
            // Nothing to read, and nothing of a prefetch to take.
            return Ok(vec![Bytes::new(); ranges.len()]);
        }
        let wanted: Vec<Range<u64>> = ranges.iter().filter(|r| !r.is_empty()).cloned().collect();
        let etag = self.etag().map(str::to_owned);
        let ParquetReader {
            client,
            locator,
            prefetched,
            prefetch_budget,
            ..
        } = self;
        let prefetched = prefetched
            .get_mut()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let served = prefetched
            .serve(&wanted, *prefetch_budget, |ranges| {
                start_group(client, locator, etag.as_deref(), ranges)
            })
            .await;
        if let Some(served) = served {
            let mut served = served?.into_iter();
            return Ok(ranges
                .iter()
                .map(|r| {
                    if r.is_empty() {
                        Bytes::new()
                    } else {
                        served.next().unwrap_or_default()
                    }
                })
                .collect());
        }
        let mut reads = Vec::with_capacity(ranges.len());
        for (i, range) in ranges.iter().enumerate() {
            let length = checked_length(range)?;
            if length > 0 {
                reads.push(self.pin(Read::new(&self.locator, range.start, length).tag(i as u64)));
            }
        }
        // Before the footer pins a version, the batch keeps to one version on its own.
        let mut batch = self
            .client
            .submit_with(reads, &BatchOptions::new().one_version());
        tagged(&mut batch, &ranges).await
    }

    /// The footer: one suffix read (which states the size and version), parsed with parquet's
    /// metadata reader, whose reads beyond that suffix (longer metadata, page indexes) are
    /// pinned reads of the missing bytes.
    async fn metadata(&self, options: Option<&ArrowReaderOptions>) -> Result<ParquetMetaData> {
        let ends = self
            .client
            .read_ends_async(&self.locator, 0, self.footer_hint)
            .await
            .map_err(external)?;
        let version = Version {
            size: ends.size,
            etag: ends.etag,
        };
        let pinned = self.version.get_or_init(|| version.clone());
        if *pinned != version {
            return Err(external(karu::Error::new(
                Status::PreconditionFailed,
                format!(
                    "{} changed since this reader first read its footer ({} bytes, {}; now {} \
                     bytes, {})",
                    self.locator,
                    pinned.size,
                    pinned.etag.as_deref().unwrap_or("no ETag"),
                    version.size,
                    version.etag.as_deref().unwrap_or("no ETag"),
                ),
            )));
        }
        let tail = Bytes::from(ends.tail);
        let footer = Footer {
            reader: self.clone(),
            tail_start: version.size - tail.len() as u64,
            tail: tail.clone(),
        };
        ParquetMetaDataReader::new()
            .with_arrow_reader_options(options)
            .with_prefetch_hint(Some(tail.len()))
            .load_and_finish(footer, version.size)
            .await
    }
}

/// The batch reading a prefetched row group's `ranges` (tagged by index), pinned to `etag`
/// when the footer stated one, keeping to one version on its own otherwise.
fn start_group(
    client: &Client,
    locator: &Locator,
    etag: Option<&str>,
    ranges: &[Range<u64>],
) -> Batch {
    let reads: Vec<Read<'static>> = ranges
        .iter()
        .enumerate()
        .map(|(i, r)| {
            let read = Read::new(locator, r.start, r.end - r.start).tag(i as u64);
            match etag {
                Some(etag) => read.if_match(etag),
                None => read,
            }
        })
        .collect();
    client.submit_with(reads, &BatchOptions::new().one_version())
}

/// The length of a range, or an error for one that ends before it starts.
fn checked_length(range: &Range<u64>) -> Result<u64> {
    range.end.checked_sub(range.start).ok_or_else(|| {
        external(karu::Error::new(
            Status::InvalidRange,
            format!(
                "the range {}..{} ends before it starts",
                range.start, range.end
            ),
        ))
    })
}

pub(crate) fn external(error: karu::Error) -> ParquetError {
    ParquetError::External(Box::new(error))
}

/// The bytes of each of `ranges` from the batch that reads them, tagged by index (an empty
/// range, not read, is empty): exactly, or the first error.
pub(crate) async fn tagged(batch: &mut Batch, ranges: &[Range<u64>]) -> Result<Vec<Bytes>> {
    let mut bytes = vec![Bytes::new(); ranges.len()];
    while let Some(completion) = batch.next().await {
        let i = usize::try_from(completion.tag()).unwrap_or(usize::MAX);
        let Some(range) = ranges.get(i) else {
            return Err(external(karu::Error::new(
                Status::Internal,
                "a completion has a tag it was not given",
            )));
        };
        bytes[i] = exact(Some(completion), range.end - range.start)?;
    }
    Ok(bytes)
}

/// The bytes of a completion of a read of `length` bytes: all of them, or its error.
fn exact(completion: Option<Completion>, length: u64) -> Result<Bytes> {
    let completion = completion.ok_or_else(|| {
        external(karu::Error::new(
            Status::Internal,
            "a read produced no completion",
        ))
    })?;
    let bytes = completion.into_result().map_err(external)?;
    if bytes.len() as u64 != length {
        return Err(external(karu::Error::new(
            Status::Internal,
            format!("a read of {length} bytes delivered {}", bytes.len()),
        )));
    }
    Ok(Bytes::from(bytes))
}

/// What parquet's metadata reader fetches while it parses the footer: from the suffix already
/// read where it holds the range, else a pinned read of what it lacks.
struct Footer {
    reader: ParquetReader,
    /// Where the suffix starts in the file.
    tail_start: u64,
    tail: Bytes,
}

impl MetadataFetch for Footer {
    fn fetch(&mut self, range: Range<u64>) -> BoxFuture<'_, Result<Bytes>> {
        async move {
            let tail_end = self.tail_start + self.tail.len() as u64;
            if range.start >= self.tail_start && range.end <= tail_end {
                let from = (range.start - self.tail_start) as usize;
                let to = (range.end - self.tail_start) as usize;
                return Ok(self.tail.slice(from..to));
            }
            if range.end <= self.tail_start || range.end > tail_end || range.start > range.end {
                return self.reader.read(range).await;
            }
            // The start is missing: read only that, and join it to the suffix.
            let missing = self.reader.read(range.start..self.tail_start).await?;
            let held = (range.end - self.tail_start) as usize;
            let mut joined = BytesMut::with_capacity(missing.len() + held);
            joined.extend_from_slice(&missing);
            joined.extend_from_slice(&self.tail[..held]);
            Ok(joined.freeze())
        }
        .boxed()
    }
}

impl AsyncFileReader for ParquetReader {
    fn get_bytes(&mut self, range: Range<u64>) -> BoxFuture<'_, Result<Bytes>> {
        async move { self.read(range).await }.boxed()
    }

    fn get_byte_ranges(&mut self, ranges: Vec<Range<u64>>) -> BoxFuture<'_, Result<Vec<Bytes>>> {
        async move { self.read_many(ranges).await }.boxed()
    }

    fn get_metadata<'a>(
        &'a mut self,
        options: Option<&'a ArrowReaderOptions>,
    ) -> BoxFuture<'a, Result<Arc<ParquetMetaData>>> {
        async move { self.metadata(options).await.map(Arc::new) }.boxed()
    }
}

impl fmt::Debug for ParquetReader {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ParquetReader")
            .field("locator", &self.locator)
            .field("footer_hint", &self.footer_hint)
            .field("size", &self.size())
            .field("pinned", &self.etag().is_some())
            .field("prefetch_budget", &self.prefetch_budget)
            .finish_non_exhaustive()
    }
}
