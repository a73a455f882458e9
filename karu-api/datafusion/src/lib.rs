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
//!   arrived instead of one round trip each.
//! - [`KaruParquetFormat`] is DataFusion's Parquet format with that factory in its scans
//!   (DataFusion's own `ParquetFormat` always sets its own factory).
//! - Karu does not list: a table is the files it is given. A directory (a URL ending in `/`),
//!   or a listing DataFusion tries through the store, fails with an error that says so.

use std::collections::HashMap;
use std::fmt;
use std::ops::Range;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
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
use datafusion::datasource::physical_plan::{
    FileScanConfig, FileScanConfigBuilder, FileSinkConfig, FileSource, ParquetSource,
};
use datafusion::datasource::source::DataSourceExec;
use datafusion::datasource::table_schema::TableSchema;
use datafusion::error::{DataFusionError, Result};
use datafusion::parquet::arrow::async_reader::AsyncFileReader;
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
    /// (`part-0.parquet`, `2026/01.parquet`) or a URL inside it. Their schemas are read (the
    /// footer of each, through Karu) and merged, as DataFusion's `register_parquet` does. A
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
pub struct KaruReaderFactory {
    store: KaruStore,
    budget: Option<u64>,
    /// Readers alive, by the file they read.
    alive: Mutex<HashMap<String, WeakParquetReader>>,
}

impl KaruReaderFactory {
    /// A factory of readers of the files under `store`'s base.
    pub fn new(store: KaruStore) -> KaruReaderFactory {
        KaruReaderFactory {
            store,
            budget: None,
            alive: Mutex::new(HashMap::new()),
        }
    }

    /// Let each reader's read-ahead hold at most `bytes` (the reader's default otherwise).
    pub fn with_read_ahead_budget(mut self, bytes: u64) -> KaruReaderFactory {
        self.budget = Some(bytes);
        self
    }

    /// A reader of `file`, sharing its file's state with a reader of it still alive.
    fn reader(&self, file: &ObjectMeta, hint: Option<usize>) -> Result<ParquetReader> {
        let key = file.location.to_string();
        let mut alive = self
            .alive
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
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
}

impl ParquetFileReaderFactory for KaruReaderFactory {
    fn create_reader(
        &self,
        _partition_index: usize,
        partitioned_file: PartitionedFile,
        metadata_size_hint: Option<usize>,
        _metrics: &ExecutionPlanMetricsSet,
    ) -> Result<Box<dyn AsyncFileReader + Send>> {
        let mut reader = self.reader(&partitioned_file.object_meta, metadata_size_hint)?;
        if let Some(range) = &partitioned_file.range {
            reader = reader.with_row_groups_starting_in(byte_range(range.start, range.end));
        }
        Ok(Box::new(reader))
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
            .finish_non_exhaustive()
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

    async fn infer_schema(
        &self,
        state: &dyn Session,
        store: &Arc<dyn ObjectStore>,
        objects: &[ObjectMeta],
    ) -> Result<SchemaRef> {
        self.parquet.infer_schema(state, store, objects).await
    }

    async fn infer_stats(
        &self,
        state: &dyn Session,
        store: &Arc<dyn ObjectStore>,
        table_schema: SchemaRef,
        object: &ObjectMeta,
    ) -> Result<Statistics> {
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
        self.parquet
            .infer_stats_and_ordering(state, store, table_schema, object)
            .await
    }

    async fn create_physical_plan(
        &self,
        _state: &dyn Session,
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
            .with_parquet_file_reader_factory(self.factory.clone());
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
