//! Karu under DataFusion (55, its newest release): DataFusion's Parquet scan reads through
//! Karu's [`ParquetReader`], which reads ahead across row groups, and everything else DataFusion
//! reads (schemas, statistics) goes through Karu's [`KaruStore`].
//!
//! [`register`] registers Karu for a URL prefix in a [`SessionContext`]; the [`Tables`] it
//! returns registers Parquet tables of files named explicitly:
//!
//! ```no_run
//! # async fn query() -> datafusion::error::Result<()> {
//! use datafusion::prelude::SessionContext;
//!
//! let client = karu::Client::builder().build().expect("a Karu client");
//! let ctx = SessionContext::new();
//! let tables = karu_datafusion::register(&ctx, "s3://bucket/trips", &client)?;
//! tables
//!     .register_parquet("trips", &["2026-01.parquet", "2026-02.parquet"])
//!     .await?;
//! let df = ctx
//!     .sql("SELECT vendor, sum(fare) FROM trips WHERE distance > 10 GROUP BY vendor")
//!     .await?;
//! df.show().await?;
//! # Ok(())
//! # }
//! ```
//!
//! How it reads:
//!
//! - [`KaruReaderFactory`] is a `ParquetFileReaderFactory`: DataFusion's scan gets a
//!   [`ParquetReader`] for each file it opens. Its footer, metadata and page index come in one
//!   round trip (a suffix read of DataFusion's `metadata_size_hint`, 512 KiB by default), and
//!   when the scan asks for a row group's column chunks the same Karu batch reads the same
//!   columns of the row groups that follow in the scan's part of the file, under a byte budget
//!   (64 MiB a reader by default): the scan's next row groups are then served from what
//!   arrived instead of one round trip each. The metadata is read once, at registration, into
//!   the session's file metadata cache; later scans of the same version (its strong ETag) take
//!   it from there.
//! - [`KaruParquetFormat`] is DataFusion's Parquet format with that factory in its scans
//!   (DataFusion's own `ParquetFormat` always sets its own factory).
//! - Karu does not list: a table is the files it is given. A directory (a URL ending in `/`),
//!   or a listing DataFusion tries through the store, fails with an error that says so.

use std::collections::HashMap;
use std::fmt;
use std::ops::Range;
use std::sync::{Arc, Mutex, PoisonError, Weak};

use async_trait::async_trait;
use bytes::Bytes;
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::catalog::Session;
use datafusion::common::Statistics;
use datafusion::datasource::file_format::file_compression_type::FileCompressionType;
use datafusion::datasource::file_format::parquet::ParquetFormat;
use datafusion::datasource::file_format::{FileFormat, FileMeta};
use datafusion::datasource::listing::{
    ListingOptions, ListingTable, ListingTableConfig, ListingTableUrl, PartitionedFile,
};
use datafusion::datasource::physical_plan::parquet::ParquetFileReaderFactory;
use futures_util::future::BoxFuture;
use futures_util::{FutureExt, StreamExt};
// The entry type DataFusion's schema, statistics and scan metadata reads look for (the crate
// has another of the same name, which they do not).
use datafusion::datasource::physical_plan::parquet::metadata::CachedParquetMetaData;
use datafusion::datasource::physical_plan::{
    FileScanConfig, FileScanConfigBuilder, FileSinkConfig, FileSource, ParquetSource,
};
use datafusion::datasource::source::DataSourceExec;
use datafusion::datasource::table_schema::TableSchema;
use datafusion::error::{DataFusionError, Result};
use datafusion::execution::cache::cache_manager::{CachedFileMetadataEntry, FileMetadataCache};
use datafusion::parquet::arrow::arrow_reader::ArrowReaderOptions;
use datafusion::parquet::arrow::async_reader::AsyncFileReader;
use datafusion::parquet::file::metadata::ParquetMetaData;
use datafusion::physical_expr::{LexOrdering, LexRequirement};
use datafusion::physical_plan::ExecutionPlan;
use datafusion::physical_plan::metrics::ExecutionPlanMetricsSet;
use datafusion::prelude::SessionContext;
use karu::{Client, Status};
use karu_object_store::{KaruStore, ParquetReader, WeakParquetReader};
use object_store_0_13::{ObjectMeta, ObjectStore};
use url::Url;

/// The footer read when DataFusion gives no `metadata_size_hint`: DataFusion's own default.
const DEFAULT_METADATA_HINT: u64 = 512 << 10;

/// Register Karu in `ctx` for the URL prefix `base` (any Karu address prefix: `s3://bucket/a`,
/// `gs://bucket`, `https://host/dir`, a local directory): a [`KaruStore`] serves DataFusion's
/// reads of that URL's scheme and host (DataFusion keys its stores by them), and the returned
/// [`Tables`] registers Parquet tables under `base` that scan through Karu's reader.
///
/// A base Karu cannot resolve with `client` is an error here; nothing is read.
pub fn register(ctx: &SessionContext, base: &str, client: &Client) -> Result<Tables> {
    let base_url = base_url(base)?;
    let store_url = store_url(&base_url)?;
    let root = match base_url.scheme() {
        "file" => "/".to_string(),
        _ => store_url.as_str().trim_end_matches('/').to_string(),
    };
    let store = KaruStore::new(&root, client).map_err(external)?;
    ctx.register_object_store(&store_url, Arc::new(store.clone()));
    let factory = Arc::new(KaruReaderFactory::new(store));
    Ok(Tables {
        ctx: ctx.clone(),
        base: base_url,
        format: Arc::new(KaruParquetFormat::new(factory)),
    })
}

/// A Karu error as DataFusion's (`External`, holding it).
fn external(error: karu::Error) -> DataFusionError {
    DataFusionError::External(Box::new(error))
}

/// The base as a URL: a local directory as a `file://` URL, ending in `/`.
fn base_url(base: &str) -> Result<Url> {
    let base = base.trim();
    let mut url = if base.contains("://") {
        Url::parse(base).map_err(|e| {
            external(karu::Error::new(
                Status::InvalidArgument,
                format!("{base} is not a URL: {e}"),
            ))
        })?
    } else {
        let path = std::path::absolute(base).map_err(|e| {
            external(karu::Error::new(
                Status::InvalidArgument,
                format!("{base} is not a local path: {e}"),
            ))
        })?;
        Url::from_directory_path(&path).map_err(|()| {
            external(karu::Error::new(
                Status::InvalidArgument,
                format!("{} is not an absolute local path", path.display()),
            ))
        })?
    };
    if !url.path().ends_with('/') {
        let path = format!("{}/", url.path());
        url.set_path(&path);
    }
    Ok(url)
}

/// The URL DataFusion keys the store of `url` by: its scheme and host.
fn store_url(url: &Url) -> Result<Url> {
    let text = &url[..url::Position::BeforePath];
    Url::parse(text).map_err(|e| DataFusionError::External(Box::new(e)))
}

/// The error of a table given a directory, or no file: Karu does not list.
fn not_listed(what: &str) -> DataFusionError {
    DataFusionError::Plan(format!(
        "Karu does not list objects, so a table is the files it is named with: {what}; name \
         each Parquet file of the table instead"
    ))
}

/// Parquet tables under one base, scanned through Karu (see [`register`]).
#[derive(Clone)]
pub struct Tables {
    ctx: SessionContext,
    base: Url,
    format: Arc<KaruParquetFormat>,
}

impl Tables {
    /// Register the table `name` of the Parquet files `files`: each a name under the base
    /// (`part-0.parquet`, `2026/01.parquet`) or a URL inside it. The table's schema is the
    /// first file's, as DataFusion's own `register_parquet` infers it: its footer is read now,
    /// through Karu, into the session's metadata cache (the other files' by the first scan). A
    /// directory (a name ending in `/`) is refused: Karu does not list.
    pub async fn register_parquet(&self, name: &str, files: &[&str]) -> Result<()> {
        if files.is_empty() {
            return Err(not_listed(&format!("table {name} was given no file")));
        }
        let mut urls = Vec::with_capacity(files.len());
        for file in files {
            let url = self.file_url(file)?;
            if url.path().ends_with('/') {
                return Err(not_listed(&format!("{url} names a directory")));
            }
            urls.push(ListingTableUrl::parse(url.as_str())?);
        }
        let options = ListingOptions::new(self.format.clone()).with_file_extension("");
        let config = ListingTableConfig::new_with_multi_paths(urls)
            .with_listing_options(options)
            .infer_schema(&self.ctx.state())
            .await?;
        let table = ListingTable::try_new(config)?;
        self.ctx.register_table(name, Arc::new(table))?;
        Ok(())
    }

    /// The URL of `file` under the base, refusing one outside it.
    fn file_url(&self, file: &str) -> Result<Url> {
        let url = if file.contains("://") {
            Url::parse(file).map_err(|e| DataFusionError::External(Box::new(e)))?
        } else {
            self.base
                .join(file.trim_start_matches('/'))
                .map_err(|e| DataFusionError::External(Box::new(e)))?
        };
        if !url.as_str().starts_with(self.base.as_str()) {
            return Err(external(karu::Error::new(
                Status::InvalidArgument,
                format!("{url} is not under the registered base {}", self.base),
            )));
        }
        Ok(url)
    }

    /// The Parquet format whose scans read through Karu, for building `ListingOptions` of one's
    /// own.
    pub fn format(&self) -> Arc<KaruParquetFormat> {
        self.format.clone()
    }
}

impl fmt::Debug for Tables {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Tables")
            .field("base", &self.base.as_str())
            .finish_non_exhaustive()
    }
}

/// DataFusion's `ParquetFileReaderFactory` over Karu: each file DataFusion's scan opens is read
/// by a [`ParquetReader`] that loads the footer, the metadata and the page index in one round
/// trip (a suffix read of DataFusion's `metadata_size_hint`) and reads ahead across the row
/// groups of the scan's part of the file (those whose first column chunk starts in the
/// partition's byte range), under its byte budget.
///
/// The readers the factory makes for one file while one of them is alive share what its footer
/// told (its version, pinned by its strong ETag, and its layout): DataFusion replaces a reader
/// after reading bloom filters, and the replacement reads ahead as the first did.
///
/// With DataFusion's file metadata cache ([`with_metadata_cache`]; [`KaruParquetFormat`] gives
/// its scans the session's), the metadata its readers read goes into the cache, where
/// DataFusion's schema and statistics inference find it, and a later scan of the same version
/// takes it from there instead of reading the footer again. A scan takes only what the
/// factory's own readers put there, read from the very version it opens: the file's strong
/// ETag and size as the scan's listing states them, every read of the scan then pinned to that
/// ETag. Files without a strong ETag have their footer read by every scan.
///
/// [`with_metadata_cache`]: KaruReaderFactory::with_metadata_cache
#[derive(Clone)]
pub struct KaruReaderFactory {
    store: KaruStore,
    budget: Option<u64>,
    /// Readers alive, by the file they read (shared by the factory's clones).
    alive: Arc<Mutex<HashMap<String, WeakParquetReader>>>,
    /// DataFusion's file metadata cache, where the readers keep the metadata they read.
    metadata: Option<Arc<FileMetadataCache>>,
    /// What this factory's readers put in a metadata cache (shared by the factory's clones,
    /// whichever cache each holds).
    put: Arc<Mutex<HashMap<String, Put>>>,
}

/// Metadata a reader of the factory put in a metadata cache: the version it was read from,
/// and the metadata itself, weakly (the cache holds it, or nothing does), to know it again.
struct Put {
    size: u64,
    etag: String,
    metadata: Weak<ParquetMetaData>,
}

impl KaruReaderFactory {
    /// A factory of readers of the files under `store`'s base.
    pub fn new(store: KaruStore) -> KaruReaderFactory {
        KaruReaderFactory {
            store,
            budget: None,
            alive: Arc::default(),
            metadata: None,
            put: Arc::default(),
        }
    }

    /// Let each reader's read-ahead hold at most `bytes` (the reader's default otherwise).
    pub fn with_read_ahead_budget(mut self, bytes: u64) -> KaruReaderFactory {
        self.budget = Some(bytes);
        self
    }

    /// Keep the metadata the readers read in `cache` (a session's is
    /// `state.runtime_env().cache_manager.get_file_metadata_cache()`), and take a file's from
    /// there when this factory's readers put it there from the version a scan opens.
    pub fn with_metadata_cache(mut self, cache: Arc<FileMetadataCache>) -> KaruReaderFactory {
        self.metadata = Some(cache);
        self
    }

    /// A reader of `file`, sharing its file's state with a reader of it still alive.
    fn reader(&self, file: &ObjectMeta, hint: Option<usize>) -> Result<ParquetReader> {
        let key = file.location.to_string();
        let mut alive = self.alive.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(reader) = alive.get(&key).and_then(WeakParquetReader::upgrade) {
            return Ok(reader);
        }
        let locator = self.store.locate(&file.location).map_err(external)?;
        let hint = hint.map_or(DEFAULT_METADATA_HINT, |h| h as u64);
        let mut reader = ParquetReader::from_locator(self.store.client(), &locator)
            .with_footer_hint(hint)
            .with_page_index(true);
        if let Some(budget) = self.budget {
            reader = reader.with_prefetch_budget(budget);
        }
        alive.retain(|_, weak| weak.upgrade().is_some());
        alive.insert(key, reader.downgrade());
        Ok(reader)
    }

    /// A scan's reader of `file`: given the metadata this factory's readers put in the cache
    /// from the version the scan opens, when there is one.
    fn scan_reader(&self, file: &ObjectMeta, hint: Option<usize>) -> Result<ScanReader> {
        let reader = self.reader(file, hint)?;
        if let Some((etag, metadata)) = self.cached(file) {
            let reader = reader
                .with_version(file.size, &etag, &metadata)
                .map_err(external)?;
            return Ok(ScanReader {
                reader,
                metadata: Some(metadata),
                keep: None,
            });
        }
        let keep = self.metadata.clone().map(|cache| Keep {
            cache,
            file: file.clone(),
            put: self.put.clone(),
        });
        Ok(ScanReader {
            reader,
            metadata: None,
            keep,
        })
    }

    /// The metadata of `file` in the cache, with the strong ETag of its version, when this
    /// factory's readers put it there from that very version (size and ETag as `file` states
    /// them).
    fn cached(&self, file: &ObjectMeta) -> Option<(String, Arc<ParquetMetaData>)> {
        let etag = file.e_tag.as_ref()?;
        let entry = self.metadata.as_ref()?.get(&file.location)?;
        let metadata = entry
            .file_metadata
            .as_any()
            .downcast_ref::<CachedParquetMetaData>()?
            .parquet_metadata()
            .clone();
        let put = self.put.lock().unwrap_or_else(PoisonError::into_inner);
        let ours = put.get(file.location.as_ref())?;
        let same = ours.size == file.size
            && ours.etag == *etag
            && entry.meta.size == file.size
            && entry.meta.e_tag.as_ref() == Some(etag)
            && std::ptr::eq(ours.metadata.as_ptr(), Arc::as_ptr(&metadata));
        same.then(|| (etag.clone(), metadata))
    }

    /// Read the metadata of each of `files` into the cache, as many at once as `concurrency`
    /// (for DataFusion's schema and statistics inference, which then read none), but for files
    /// whose metadata the factory's readers put there from the version `files` states. A file
    /// whose footer cannot be read is left to DataFusion, whose own read reports why.
    async fn load_metadata(&self, files: &[ObjectMeta], hint: Option<usize>, concurrency: usize) {
        if self.metadata.is_none() {
            return;
        }
        // Boxed, so that the stream's futures are `Send` for any lifetime of their file
        // (rust-lang/rust#64552).
        let loads: Vec<BoxFuture<'_, ()>> = files
            .iter()
            .map(|file| self.load_one(file, hint).boxed())
            .collect();
        futures_util::stream::iter(loads)
            .buffer_unordered(concurrency.max(1))
            .collect::<Vec<()>>()
            .await;
    }

    /// Read the metadata of `file` into the cache (see [`load_metadata`]).
    ///
    /// [`load_metadata`]: KaruReaderFactory::load_metadata
    async fn load_one(&self, file: &ObjectMeta, hint: Option<usize>) {
        if let Ok(mut reader) = self.scan_reader(file, hint) {
            // An error here is DataFusion's own read's to report.
            let _ = reader.get_metadata(None).await;
        }
    }
}

impl ParquetFileReaderFactory for KaruReaderFactory {
    fn create_reader(
        &self,
        _partition_index: usize,
        partitioned_file: PartitionedFile,
        metadata_size_hint: Option<usize>,
        _metrics: &ExecutionPlanMetricsSet,
    ) -> Result<Box<dyn AsyncFileReader + Send>> {
        let mut scan = self.scan_reader(&partitioned_file.object_meta, metadata_size_hint)?;
        if let Some(range) = &partitioned_file.range {
            scan.reader = scan
                .reader
                .with_row_groups_starting_in(byte_range(range.start, range.end));
        }
        Ok(Box::new(scan))
    }
}

/// A partition's byte range of a file (DataFusion states it in `i64`).
fn byte_range(start: i64, end: i64) -> Range<u64> {
    u64::try_from(start).unwrap_or(0)..u64::try_from(end).unwrap_or(0)
}

impl fmt::Debug for KaruReaderFactory {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KaruReaderFactory")
            .field("store", &self.store)
            .field("budget", &self.budget)
            .field("metadata_cache", &self.metadata.is_some())
            .finish_non_exhaustive()
    }
}

/// The reader a scan gets: Karu's, with the file's metadata from the cache when the factory
/// found it there, or told where to keep the metadata it reads.
struct ScanReader {
    reader: ParquetReader,
    /// The metadata of the version `reader` is pinned to.
    metadata: Option<Arc<ParquetMetaData>>,
    keep: Option<Keep>,
}

/// Where a reader keeps the metadata it reads of `file`.
struct Keep {
    cache: Arc<FileMetadataCache>,
    file: ObjectMeta,
    put: Arc<Mutex<HashMap<String, Put>>>,
}

impl Keep {
    /// Put `metadata`, read by `reader`, in the cache when it was read from the version the
    /// scan's listing states (the same size and strong ETag): the entry DataFusion validates
    /// then describes exactly the bytes it was read from.
    fn put(&self, reader: &ParquetReader, metadata: &Arc<ParquetMetaData>) {
        let (Some(etag), Some(stated)) = (reader.etag(), self.file.e_tag.as_deref()) else {
            return;
        };
        if etag != stated || reader.size() != Some(self.file.size) {
            return;
        }
        let key = self.file.location.to_string();
        let mut put = self.put.lock().unwrap_or_else(PoisonError::into_inner);
        put.retain(|_, p| p.metadata.strong_count() > 0);
        put.insert(
            key,
            Put {
                size: self.file.size,
                etag: etag.to_owned(),
                metadata: Arc::downgrade(metadata),
            },
        );
        self.cache.put(
            &self.file.location,
            CachedFileMetadataEntry::new(
                self.file.clone(),
                Arc::new(CachedParquetMetaData::new(metadata.clone())),
            ),
        );
    }
}

impl AsyncFileReader for ScanReader {
    fn get_bytes(
        &mut self,
        range: Range<u64>,
    ) -> BoxFuture<'_, datafusion::parquet::errors::Result<Bytes>> {
        self.reader.get_bytes(range)
    }

    fn get_byte_ranges(
        &mut self,
        ranges: Vec<Range<u64>>,
    ) -> BoxFuture<'_, datafusion::parquet::errors::Result<Vec<Bytes>>> {
        self.reader.get_byte_ranges(ranges)
    }

    fn get_metadata<'a>(
        &'a mut self,
        options: Option<&'a ArrowReaderOptions>,
    ) -> BoxFuture<'a, datafusion::parquet::errors::Result<Arc<ParquetMetaData>>> {
        async move {
            if let Some(metadata) = &self.metadata {
                return Ok(metadata.clone());
            }
            let metadata = self.reader.get_metadata(options).await?;
            if let Some(keep) = &self.keep {
                keep.put(&self.reader, &metadata);
            }
            Ok(metadata)
        }
        .boxed()
    }
}

/// DataFusion's Parquet format, whose scans read through a [`KaruReaderFactory`]: everything
/// else (schemas, statistics, options) is DataFusion's `ParquetFormat`.
#[derive(Debug)]
pub struct KaruParquetFormat {
    parquet: ParquetFormat,
    factory: Arc<KaruReaderFactory>,
}

impl KaruParquetFormat {
    /// DataFusion's default Parquet format, scanned through `factory`.
    pub fn new(factory: Arc<KaruReaderFactory>) -> KaruParquetFormat {
        KaruParquetFormat {
            parquet: ParquetFormat::default(),
            factory,
        }
    }

    /// The factory for a scan in `state`: this format's, keeping metadata in the session's
    /// metadata cache unless it was given a cache of its own.
    fn for_session(&self, state: &dyn Session) -> KaruReaderFactory {
        let factory = (*self.factory).clone();
        if factory.metadata.is_some() {
            return factory;
        }
        factory.with_metadata_cache(state.runtime_env().cache_manager.get_file_metadata_cache())
    }

    /// Read the metadata of `objects` through Karu into the session's metadata cache, unless
    /// the factory's readers put it there already (DataFusion's schema, statistics and
    /// ordering inference then find it there instead of reading the footer again through the
    /// store). Encrypted footers are DataFusion's to read.
    async fn load_metadata(&self, state: &dyn Session, objects: &[ObjectMeta]) {
        let crypto = &self.parquet.options().crypto;
        if crypto.file_decryption.is_some() || crypto.factory_id.is_some() {
            return;
        }
        let concurrency = state
            .config_options()
            .execution
            .meta_fetch_concurrency
            .get();
        self.for_session(state)
            .load_metadata(objects, self.parquet.metadata_size_hint(), concurrency)
            .await;
    }

    /// The format `parquet` (its options), scanned through this format's factory.
    pub fn with_parquet_format(mut self, parquet: ParquetFormat) -> KaruParquetFormat {
        self.parquet = parquet;
        self
    }
}

#[async_trait]
impl FileFormat for KaruParquetFormat {
    fn get_ext(&self) -> String {
        self.parquet.get_ext()
    }

    fn get_ext_with_compression(
        &self,
        file_compression_type: &FileCompressionType,
    ) -> Result<String> {
        self.parquet.get_ext_with_compression(file_compression_type)
    }

    fn compression_type(&self) -> Option<FileCompressionType> {
        self.parquet.compression_type()
    }

    /// DataFusion's schema inference, after the files' metadata is read through Karu into the
    /// session's metadata cache (where the inference, then the statistics' and the first
    /// scan, find it).
    async fn infer_schema(
        &self,
        state: &dyn Session,
        store: &Arc<dyn ObjectStore>,
        objects: &[ObjectMeta],
    ) -> Result<SchemaRef> {
        self.load_metadata(state, objects).await;
        self.parquet.infer_schema(state, store, objects).await
    }

    async fn infer_stats(
        &self,
        state: &dyn Session,
        store: &Arc<dyn ObjectStore>,
        table_schema: SchemaRef,
        object: &ObjectMeta,
    ) -> Result<Statistics> {
        self.load_metadata(state, std::slice::from_ref(object))
            .await;
        self.parquet
            .infer_stats(state, store, table_schema, object)
            .await
    }

    async fn infer_ordering(
        &self,
        state: &dyn Session,
        store: &Arc<dyn ObjectStore>,
        table_schema: SchemaRef,
        object: &ObjectMeta,
    ) -> Result<Option<LexOrdering>> {
        self.load_metadata(state, std::slice::from_ref(object))
            .await;
        self.parquet
            .infer_ordering(state, store, table_schema, object)
            .await
    }

    async fn infer_stats_and_ordering(
        &self,
        state: &dyn Session,
        store: &Arc<dyn ObjectStore>,
        table_schema: SchemaRef,
        object: &ObjectMeta,
    ) -> Result<FileMeta> {
        self.load_metadata(state, std::slice::from_ref(object))
            .await;
        self.parquet
            .infer_stats_and_ordering(state, store, table_schema, object)
            .await
    }

    async fn create_physical_plan(
        &self,
        state: &dyn Session,
        conf: FileScanConfig,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        let mut source = conf
            .file_source()
            .downcast_ref::<ParquetSource>()
            .cloned()
            .ok_or_else(|| {
                DataFusionError::Internal("a Parquet scan without a ParquetSource".to_string())
            })?
            .with_table_parquet_options(self.parquet.options().clone())
            .with_parquet_file_reader_factory(Arc::new(self.for_session(state)));
        if let Some(hint) = self.parquet.metadata_size_hint() {
            source = source.with_metadata_size_hint(hint);
        }
        let conf = FileScanConfigBuilder::from(conf)
            .with_source(Arc::new(source))
            .build();
        Ok(DataSourceExec::from_data_source(conf))
    }

    async fn create_writer_physical_plan(
        &self,
        _input: Arc<dyn ExecutionPlan>,
        _state: &dyn Session,
        _conf: FileSinkConfig,
        _order_requirements: Option<LexRequirement>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        Err(DataFusionError::NotImplemented(
            "Karu is read-only by contract: it never writes a table".to_string(),
        ))
    }

    fn file_source(&self, table_schema: TableSchema) -> Arc<dyn FileSource> {
        self.parquet.file_source(table_schema)
    }
}
