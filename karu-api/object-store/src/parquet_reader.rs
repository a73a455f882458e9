//! `ParquetReader`: parquet's `AsyncFileReader` over a Karu client, for one file, written once
//! for every parquet major (each major's trait implementation, `parquet_impl.rs`, converts types
//! and parses the footer with that major's metadata reader).

use std::collections::VecDeque;
use std::fmt;
use std::ops::Range;
use std::sync::{Arc, Mutex, OnceLock, Weak};

use bytes::{Bytes, BytesMut};
use futures_util::StreamExt;
use karu::{Batch, BatchOptions, Client, Completion, Locator, Read, Status};

use crate::prefetch::{DEFAULT_BUDGET, Prefetched, PrefetchedBytes, Served};

/// Parquet's `AsyncFileReader` for one file at any Karu address, implemented directly (the
/// interface parquet keeps: parquet 60 deprecates `ParquetObjectReader` in favour of readers like
/// this one), for parquet 60 (feature `parquet-60`, also named `parquet`) and parquet 59
/// (feature `parquet-59`, the major DataFusion 55 uses): the same reader implements each
/// enabled major's trait.
///
/// - `get_metadata` reads the footer in **one request**: the last
///   [`footer_hint`](ParquetReader::with_footer_hint) bytes (64 KiB by default) as a suffix
///   read, whose answer also states the file's size and ETag (where a service ignores suffix
///   ranges, as Azure does, Karu's [`read_ends`](karu::Client::read_ends) reads one byte of
///   the head first, for the size). Only metadata longer than that (or a page index before
///   it) takes a second read, of the missing bytes alone. With
///   [`with_page_index`](ParquetReader::with_page_index) the page index comes with the
///   metadata (from the same suffix when it fits).
/// - `get_bytes` is one read; `get_byte_ranges` (the column chunks of a row group) is one
///   Karu batch, merged where Karu's planner and its guards say it pays.
/// - **Read-ahead** (on by default): when parquet's stream asks for the column chunks of a
///   row group, the same batch also reads the same columns of the row groups the stream will
///   read next (the next ones in the file, or in the
///   [selection](ParquetReader::with_row_groups) when the reader is told it), as many as the
///   [budget](ParquetReader::with_prefetch_budget) allows (64 MiB by default). The stream's
///   next reads are served from what arrived, or wait on it in flight, and each row group
///   taken or passed makes room for the next. Each set of columns the stream asks for in a
///   row group is read ahead (the columns of a row filter, then the rest of the projection
///   for the rows that passed: the first read of a set it had not asked for goes out with
///   that set's chunks of the row groups queued after it, in the same round), all under the
///   one budget. What the stream never asks for is released when
///   it moves past it, or with the reader (a stream dropped). A stream that reads one row
///   group after another so costs about one round trip per budget's worth of row groups
///   instead of one per row group.
/// - [`prefetch`](ParquetReader::prefetch) hands Karu a query's whole plan (its row groups
///   and projection) up front, under the same budget, for callers who know it.
/// - One version: the first footer answer's strong ETag is sent as `If-Match` with every later
///   read of this reader and of its clones (Karu also checks it on each answer), so a file
///   replaced while it is read fails with [`Status::PreconditionFailed`] instead of mixing
///   row groups of two files. Reads before the footer keep to one version within their batch.
///   Files without a strong ETag (local files, some servers) cannot be pinned: their reads
///   follow the file as it is.
/// - Every read returns exactly the bytes asked for or an error; errors are parquet's
///   `ParquetError::External` holding Karu's [`karu::Error`] (its status and evidence).
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
    settings: Settings,
    /// What the footer told of the file (its version, its layout), shared with clones.
    file: Arc<FileState>,
    /// The row groups prefetched or read ahead of the stream (this reader's own: a clone
    /// starts with none).
    prefetched: Mutex<Prefetched>,
}

/// A reader's settings, kept by its clones.
#[derive(Debug, Clone)]
struct Settings {
    footer_hint: u64,
    page_index: bool,
    /// The most bytes prefetched and read-ahead row groups hold.
    budget: u64,
    read_ahead: bool,
    /// The row groups the stream reads, in its order, when the reader was told.
    row_groups: Option<Arc<[usize]>>,
    /// Only row groups whose first column chunk starts in here are read ahead.
    starting_in: Option<Range<u64>>,
}

impl Settings {
    /// The row groups the stream reads after `row_group`, in its order: the rest of the
    /// selection the reader was told, else the rest of the file. `None` when `row_group` is
    /// not in the selection.
    fn after(&self, layout: &FileLayout, row_group: usize) -> Option<VecDeque<usize>> {
        let inside = |g: &usize| {
            *g < layout.len()
                && self.starting_in.as_ref().is_none_or(|range| {
                    layout
                        .chunk(*g, 0)
                        .is_some_and(|chunk| range.contains(&chunk.start))
                })
        };
        match &self.row_groups {
            Some(selected) => {
                let at = selected.iter().position(|&g| g == row_group)?;
                Some(selected[at + 1..].iter().copied().filter(inside).collect())
            }
            None => Some((row_group + 1..layout.len()).filter(inside).collect()),
        }
    }

    /// Where `row_group` comes in the stream's order.
    fn rank(&self, row_group: usize) -> Option<usize> {
        match &self.row_groups {
            Some(selected) => selected.iter().position(|&g| g == row_group),
            None => Some(row_group),
        }
    }

    /// Whether row group `g` comes before what the read-ahead queued, in the stream's order
    /// (a row group passed, read again: the read-ahead leaves it alone); `Some(false)` when
    /// reading ahead from it is right (nothing queued, or `g` beyond the queue); `None` when
    /// `g` has no place in the stream's order, or a `prefetch` plan is queued.
    fn behind_the_queue(&self, prefetched: &Prefetched, g: usize) -> Option<bool> {
        let rank = self.rank(g)?;
        match prefetched.front() {
            None => Some(false),
            Some(_) if !prefetched.reading_ahead() => None,
            Some(front) => Some(rank < self.rank(front)?),
        }
    }
}

/// What the footer told of one file: its version, and where its row groups' column chunks
/// lie.
#[derive(Debug, Default)]
struct FileState {
    version: OnceLock<Version>,
    layout: OnceLock<FileLayout>,
}

/// A clone reads the same file, pinned to the same version, with the same settings; it starts
/// with nothing prefetched (a prefetch serves the one stream its reader is given to).
impl Clone for ParquetReader {
    fn clone(&self) -> ParquetReader {
        ParquetReader {
            client: self.client.clone(),
            locator: self.locator.clone(),
            settings: self.settings.clone(),
            file: self.file.clone(),
            prefetched: Mutex::new(Prefetched::default()),
        }
    }
}

/// A reader that does not keep its file's state alive: [`upgrade`](WeakParquetReader::upgrade)
/// gives a clone of the reader while any reader of the file (a clone of it) is alive, so
/// readers made for one scan share the footer's version and layout without holding them
/// after the scan.
#[derive(Debug, Clone)]
pub struct WeakParquetReader {
    client: Client,
    locator: Locator,
    settings: Settings,
    file: Weak<FileState>,
}

impl WeakParquetReader {
    /// A clone of the reader, if a reader of its file is still alive.
    pub fn upgrade(&self) -> Option<ParquetReader> {
        Some(ParquetReader {
            client: self.client.clone(),
            locator: self.locator.clone(),
            settings: self.settings.clone(),
            file: self.file.upgrade()?,
            prefetched: Mutex::new(Prefetched::default()),
        })
    }
}

/// One version of the file: its size and strong ETag.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Version {
    pub(crate) size: u64,
    pub(crate) etag: Option<String>,
}

/// Where a Parquet file's row groups' column chunks lie, from its metadata (what
/// [`ParquetMetadata`] tells [`ParquetReader::prefetch`]).
#[derive(Debug, Clone)]
pub struct FileLayout {
    /// Each row group's column chunks, in column order.
    row_groups: Vec<Vec<Range<u64>>>,
}

impl FileLayout {
    /// The layout of row groups given as their column chunks' `(start, length)`.
    pub(crate) fn new(row_groups: Vec<Vec<Range<u64>>>) -> FileLayout {
        FileLayout { row_groups }
    }

    fn len(&self) -> usize {
        self.row_groups.len()
    }

    /// The bytes of the whole row group (from its first chunk's start to its last's end).
    pub(crate) fn extent(&self, row_group: usize) -> Range<u64> {
        let chunks = self
            .row_groups
            .get(row_group)
            .map_or(&[][..], Vec::as_slice);
        let start = chunks.iter().map(|r| r.start).min().unwrap_or(0);
        let end = chunks.iter().map(|r| r.end).max().unwrap_or(0);
        start..end
    }

    /// The chunk of column `column` in `row_group`.
    pub(crate) fn chunk(&self, row_group: usize, column: usize) -> Option<Range<u64>> {
        self.row_groups.get(row_group)?.get(column).cloned()
    }

    /// The row group all of `ranges` lie in, if one does.
    fn row_group_of(&self, ranges: &[Range<u64>]) -> Option<usize> {
        let first = ranges.first()?;
        let g = (0..self.len()).find(|&g| {
            let extent = self.extent(g);
            extent.start <= first.start && first.end <= extent.end
        })?;
        let extent = self.extent(g);
        ranges
            .iter()
            .all(|r| extent.start <= r.start && r.end <= extent.end)
            .then_some(g)
    }

    /// The columns of `row_group` whose chunks hold bytes of `ranges`.
    fn columns_of(&self, row_group: usize, ranges: &[Range<u64>]) -> Vec<usize> {
        self.row_groups[row_group]
            .iter()
            .enumerate()
            .filter(|(_, chunk)| {
                ranges
                    .iter()
                    .any(|r| r.start < chunk.end && chunk.start < r.end)
            })
            .map(|(c, _)| c)
            .collect()
    }
}

/// A parquet major's file metadata, which [`ParquetReader::prefetch`] takes: parquet 60's and
/// parquet 59's `ParquetMetaData` (and an `Arc` of either), with that major's
/// `ProjectionMask` as the projection (each implemented by the enabled majors' implementations).
pub trait ParquetMetadata {
    /// The major's projection (`ProjectionMask`).
    type Projection;
    /// Where the row groups' column chunks lie.
    #[doc(hidden)]
    fn layout(&self) -> FileLayout;
    /// Whether the projection includes leaf column `column`.
    #[doc(hidden)]
    fn includes(projection: &Self::Projection, column: usize) -> bool;
}

/// The bytes of a suffix read that sits beside the footer: the default covers the metadata
/// of most files (a few row groups of tens of columns) in one round trip.
const DEFAULT_FOOTER_HINT: u64 = 64 << 10;

/// A Parquet footer is at least this long (metadata length and magic).
const FOOTER: u64 = 8;

impl ParquetReader {
    /// A reader of the Parquet file at `address` (any Karu address). Nothing is read now;
    /// an address no provider of `client` serves is an error here.
    pub fn new(client: &Client, address: &str) -> Result<ParquetReader, karu::Error> {
        Ok(Self::from_locator(client, &client.locate(address)?))
    }

    /// A reader of the Parquet file `locator` names.
    pub fn from_locator(client: &Client, locator: &Locator) -> ParquetReader {
        ParquetReader {
            client: client.clone(),
            locator: locator.clone(),
            settings: Settings {
                footer_hint: DEFAULT_FOOTER_HINT,
                page_index: false,
                budget: DEFAULT_BUDGET,
                read_ahead: true,
                row_groups: None,
                starting_in: None,
            },
            file: Arc::new(FileState::default()),
            prefetched: Mutex::new(Prefetched::default()),
        }
    }

    /// Read the last `bytes` of the file with the footer (at least 8; default 64 KiB): larger
    /// for files with long metadata (many row groups or columns, page indexes), so that the
    /// metadata still comes in one round trip.
    pub fn with_footer_hint(mut self, bytes: u64) -> ParquetReader {
        self.settings.footer_hint = bytes.max(FOOTER);
        self
    }

    /// Load the page index (column and offset indexes) with the metadata, whatever the
    /// caller's options ask (off by default: then as the options say). It sits just before
    /// the footer, so a [footer hint](ParquetReader::with_footer_hint) that covers it brings it
    /// in the same round trip; engines that prune pages by it (DataFusion) then read nothing
    /// more for it.
    pub fn with_page_index(mut self, load: bool) -> ParquetReader {
        self.settings.page_index = load;
        self
    }

    /// Let prefetched and read-ahead row groups hold at most `bytes` (default 64 MiB): the
    /// column chunks in flight or arrived that the stream has not taken. A row group that
    /// does not fit waits, unread, until the stream has taken or passed enough of those
    /// before it; one larger than the budget is read alone.
    pub fn with_prefetch_budget(mut self, bytes: u64) -> ParquetReader {
        self.settings.budget = bytes;
        self
    }

    /// Read ahead of parquet's stream (on by default), or not: without it, each
    /// `get_byte_ranges` reads what it asks for and no more (a [`prefetch`] still works).
    ///
    /// [`prefetch`]: ParquetReader::prefetch
    pub fn with_read_ahead(mut self, on: bool) -> ParquetReader {
        self.settings.read_ahead = on;
        self
    }

    /// Tell the reader the row groups the stream reads, in its order (what parquet's builder
    /// is given with `with_row_groups`): the read-ahead then reads only those, and never
    /// past the last. Without it, it reads the row groups that follow in the file.
    pub fn with_row_groups(mut self, row_groups: impl Into<Vec<usize>>) -> ParquetReader {
        self.settings.row_groups = Some(row_groups.into().into());
        self
    }

    /// Read ahead only row groups whose first column chunk starts in `range` (how DataFusion
    /// and Spark split a file between partitions: each reads the row groups that start in its
    /// byte range), so that two readers of one file never read ahead each other's row groups.
    pub fn with_row_groups_starting_in(mut self, range: Range<u64>) -> ParquetReader {
        self.settings.starting_in = Some(range);
        self
    }

    /// The bytes prefetched or read ahead now: column chunks in flight or arrived that the
    /// stream has not taken, of row groups it has not passed.
    pub fn prefetched_bytes(&self) -> u64 {
        self.lock_prefetched().held()
    }

    /// A gauge of [`prefetched_bytes`](ParquetReader::prefetched_bytes) that outlives the
    /// reader (it reads 0 once the reader and what it held are dropped).
    pub fn prefetched_bytes_gauge(&self) -> PrefetchedBytes {
        self.lock_prefetched().gauge()
    }

    /// A handle that gives clones of this reader while one is alive, without keeping its
    /// file's state alive.
    pub fn downgrade(&self) -> WeakParquetReader {
        WeakParquetReader {
            client: self.client.clone(),
            locator: self.locator.clone(),
            settings: self.settings.clone(),
            file: Arc::downgrade(&self.file),
        }
    }

    /// The file.
    pub fn locator(&self) -> &Locator {
        &self.locator
    }

    /// The file's size, once its footer has been read.
    pub fn size(&self) -> Option<u64> {
        self.file.version.get().map(|v| v.size)
    }

    /// The strong ETag reads are pinned to, once the footer has been read (none for files
    /// without one).
    pub fn etag(&self) -> Option<&str> {
        self.file.version.get().and_then(|v| v.etag.as_deref())
    }

    /// Give the reader the file's `metadata` (of parquet 60 or 59) as read earlier from the
    /// version of `size` bytes with the strong ETag `etag`: for engines that keep a file's
    /// metadata between queries (DataFusion's metadata cache) and build each stream with it.
    /// Every read of the reader then carries `If-Match: etag`, so a file replaced since fails
    /// its reads with `PreconditionFailed` instead of being read with another version's
    /// metadata, and the read-ahead follows the metadata's layout from the first read, with
    /// no footer read. (`get_metadata` still reads the footer: the caller hands its stream
    /// the metadata it has.) Fails with `PreconditionFailed` when the reader, or a reader
    /// sharing its file, already learned another version.
    pub fn with_version<M: ParquetMetadata + ?Sized>(
        self,
        size: u64,
        etag: &str,
        metadata: &M,
    ) -> Result<ParquetReader, karu::Error> {
        self.pin_version(&Version {
            size,
            etag: Some(etag.to_owned()),
        })?;
        self.file.layout.get_or_init(|| metadata.layout());
        Ok(self)
    }

    fn lock_prefetched(&self) -> std::sync::MutexGuard<'_, Prefetched> {
        self.prefetched
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Read the column chunks of `projection` in each of `row_groups` ahead of parquet's
    /// stream: started in the order given, as many at once as the
    /// [budget](ParquetReader::with_prefetch_budget) allows (all of them, for most queries),
    /// those started together in one Karu batch (merged where Karu's planner says it pays,
    /// pinned to the version the footer stated), under the client's concurrency limit. When
    /// parquet's stream asks for chunks a prefetched row group holds (`get_byte_ranges`), it
    /// takes them instead of reading again. `metadata` is the file's `ParquetMetaData` (of
    /// parquet 60 or 59), `projection` that major's `ProjectionMask`.
    ///
    /// Call it with the metadata, row groups (in the stream's order) and projection the
    /// stream is built with; reads it does not match are read as usual. It replaces what the
    /// read-ahead would choose. What is prefetched is held until the stream takes it, and no
    /// longer: a row group is released once the stream has taken all its chunks (a row
    /// filter's two reads of a row group are both served) or reads in a later row group
    /// (another projection, a row group skipped), and everything with the reader (a limit
    /// reached, a stream dropped). Row groups the budget keeps waiting are not read until the
    /// stream gets near them, so a stream that stops early leaves them unread.
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
    pub fn prefetch<M: ParquetMetadata + ?Sized>(
        &self,
        metadata: &M,
        row_groups: &[usize],
        projection: &M::Projection,
    ) -> Result<(), karu::Error> {
        let layout = metadata.layout();
        if let Some(g) = row_groups.iter().find(|&&g| g >= layout.len()) {
            return Err(karu::Error::new(
                Status::InvalidArgument,
                format!("row group {g} of {} row groups", layout.len()),
            ));
        }
        let layout = self.file.layout.get_or_init(|| layout);
        let mut prefetched = self.lock_prefetched();
        prefetched.clear();
        for &g in row_groups {
            let ranges: Vec<Range<u64>> = (0..layout.row_groups[g].len())
                .filter(|&c| M::includes(projection, c))
                .filter_map(|c| layout.chunk(g, c))
                .filter(|r| !r.is_empty())
                .collect();
            if !ranges.is_empty() {
                prefetched.push(g, layout.extent(g), ranges);
            }
        }
        let etag = self.etag().map(str::to_owned);
        prefetched.start_within(self.settings.budget, |ranges| {
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
    pub(crate) async fn read(&self, range: Range<u64>) -> Result<Bytes, karu::Error> {
        let length = checked_length(&range)?;
        if length == 0 {
            return Ok(Bytes::new());
        }
        let mut batch =
            self.client
                .submit([self.pin(Read::new(&self.locator, range.start, length))]);
        exact(batch.next().await, length)
    }

    /// Exactly the bytes of every range: from a prefetched or read-ahead row group that holds
    /// them all; else, reading ahead from the row group they are in; else in one batch.
    pub(crate) async fn read_many(
        &mut self,
        ranges: Vec<Range<u64>>,
    ) -> Result<Vec<Bytes>, karu::Error> {
        for range in &ranges {
            checked_length(range)?;
        }
        if ranges.iter().all(|r| r.is_empty()) {
            // Nothing to read, and nothing of a prefetch to take.
            return Ok(vec![Bytes::new(); ranges.len()]);
        }
        let wanted: Vec<Range<u64>> = ranges.iter().filter(|r| !r.is_empty()).cloned().collect();
        let ParquetReader {
            client,
            locator,
            settings,
            file,
            prefetched,
        } = self;
        let etag = file.version.get().and_then(|v| v.etag.clone());
        let layout = file.layout.get();
        let budget = settings.budget;
        let start = |ranges: &[Range<u64>]| start_group(client, locator, etag.as_deref(), ranges);
        let prefetched = prefetched
            .get_mut()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let mut served = prefetched.serve(&wanted, layout, budget, start).await;
        if let (Served::NotQueued, true, Some(layout)) = (&served, settings.read_ahead, layout)
            && let Some(g) = layout.row_group_of(&wanted)
            && let Some(next) = settings.after(layout, g)
            && settings.behind_the_queue(prefetched, g) == Some(false)
        {
            let columns = layout.columns_of(g, &wanted);
            prefetched.read_ahead_from(layout, g, wanted.clone(), columns, next, budget, start);
            served = prefetched.serve(&wanted, Some(layout), budget, start).await;
        }
        // A read the read-ahead did not cover, in a row group the stream has reached (the
        // projection after a row filter's columns, say): the read-ahead learns its columns
        // and reads them ahead too, in the same round as this read.
        if settings.read_ahead
            && prefetched.reading_ahead()
            && let Some(layout) = layout
            && let Some(g) = layout.row_group_of(&wanted)
        {
            let reached = match &served {
                Served::NotHeld => true,
                Served::NotQueued => settings.behind_the_queue(prefetched, g) == Some(true),
                Served::Bytes(_) => false,
            };
            if reached {
                prefetched.learn(layout, g, &layout.columns_of(g, &wanted), budget, start);
            }
        }
        if let Served::Bytes(served) = served {
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

    /// The footer's suffix read: pins the file's version (or fails when the file changed since
    /// a reader of it first read its footer); the suffix and where it starts.
    pub(crate) async fn footer(&self) -> Result<Footer, karu::Error> {
        let ends = self
            .client
            .read_ends_async(&self.locator, 0, self.settings.footer_hint)
            .await?;
        let version = Version {
            size: ends.size,
            etag: ends.etag,
        };
        self.pin_version(&version)?;
        let tail = Bytes::from(ends.tail);
        Ok(Footer {
            reader: self.clone(),
            size: version.size,
            tail_start: version.size - tail.len() as u64,
            tail,
        })
    }

    /// Pin the reader (and the readers sharing its file) to `version`, or fail when they are
    /// pinned to another: the file changed since a reader of it first learned its version.
    fn pin_version(&self, version: &Version) -> Result<(), karu::Error> {
        let pinned = self.file.version.get_or_init(|| version.clone());
        if pinned == version {
            return Ok(());
        }
        Err(karu::Error::new(
            Status::PreconditionFailed,
            format!(
                "{} changed since this reader first learned its version ({} bytes, {}; now {} \
                 bytes, {})",
                self.locator,
                pinned.size,
                pinned.etag.as_deref().unwrap_or("no ETag"),
                version.size,
                version.etag.as_deref().unwrap_or("no ETag"),
            ),
        ))
    }

    /// Whether the metadata is to be read with its page index.
    pub(crate) fn page_index(&self) -> bool {
        self.settings.page_index
    }

    /// Keep the file's layout (the first metadata read tells it; later ones agree, the file
    /// being pinned).
    pub(crate) fn learn_layout(&self, layout: impl FnOnce() -> FileLayout) {
        self.file.layout.get_or_init(layout);
    }
}

/// The batch reading prefetched row groups' `ranges` (tagged by index), pinned to `etag`
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
fn checked_length(range: &Range<u64>) -> Result<u64, karu::Error> {
    range.end.checked_sub(range.start).ok_or_else(|| {
        karu::Error::new(
            Status::InvalidRange,
            format!(
                "the range {}..{} ends before it starts",
                range.start, range.end
            ),
        )
    })
}

/// The bytes of each of `ranges` from the batch that reads them, tagged by index (an empty
/// range, not read, is empty): exactly, or the first error.
pub(crate) async fn tagged(
    batch: &mut Batch,
    ranges: &[Range<u64>],
) -> Result<Vec<Bytes>, karu::Error> {
    let mut bytes = vec![Bytes::new(); ranges.len()];
    while let Some(completion) = batch.next().await {
        let i = usize::try_from(completion.tag()).unwrap_or(usize::MAX);
        let Some(range) = ranges.get(i) else {
            return Err(karu::Error::new(
                Status::Internal,
                "a completion has a tag it was not given",
            ));
        };
        bytes[i] = exact(Some(completion), range.end - range.start)?;
    }
    Ok(bytes)
}

/// The bytes of a completion of a read of `length` bytes: all of them, or its error.
pub(crate) fn exact(completion: Option<Completion>, length: u64) -> Result<Bytes, karu::Error> {
    let completion = completion
        .ok_or_else(|| karu::Error::new(Status::Internal, "a read produced no completion"))?;
    let bytes = completion.into_result()?;
    if bytes.len() as u64 != length {
        return Err(karu::Error::new(
            Status::Internal,
            format!("a read of {length} bytes delivered {}", bytes.len()),
        ));
    }
    Ok(Bytes::from(bytes))
}

/// What parquet's metadata reader fetches while it parses the footer: from the suffix already
/// read where it holds the range, else a pinned read of what it lacks.
pub(crate) struct Footer {
    reader: ParquetReader,
    /// The file's size.
    pub(crate) size: u64,
    /// Where the suffix starts in the file.
    tail_start: u64,
    tail: Bytes,
}

impl Footer {
    /// The bytes of the suffix read.
    pub(crate) fn tail_len(&self) -> usize {
        self.tail.len()
    }

    /// Exactly the bytes of `range`: from the suffix, else read (only what the suffix lacks).
    pub(crate) async fn fetch_range(&self, range: Range<u64>) -> Result<Bytes, karu::Error> {
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
}

impl fmt::Debug for ParquetReader {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ParquetReader")
            .field("locator", &self.locator)
            .field("settings", &self.settings)
            .field("size", &self.size())
            .field("pinned", &self.etag().is_some())
            .finish_non_exhaustive()
    }
}
