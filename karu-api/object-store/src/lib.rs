//! Karu inside the Rust data stack: the two doors format readers reach storage through.
//!
//! - [`KaruStore`] implements [`object_store::ObjectStore`] (object_store **0.14**, the
//!   major that `parquet` 60 depends on, so one object_store serves Karu, parquet, DataFusion,
//!   Lance and delta-rs alike): anything that takes an `Arc<dyn ObjectStore>` reads through
//!   Karu's planner, response checks and recovery, from any address Karu reads (`s3://`,
//!   `gs://`, `az://`, `hf://`, `source://`, `http(s)://`, local directories).
//! - [`ParquetReader`] (feature `parquet`) implements parquet's
//!   [`AsyncFileReader`](parquet::arrow::async_reader::AsyncFileReader) directly, the door
//!   parquet 60 keeps (it deprecates `ParquetObjectReader`): the footer in one round trip,
//!   the column chunks of a read as one Karu batch, every read pinned to one version.
//!
//! Karu is read-only by contract: writes, deletes, copies and listings answer
//! [`object_store::Error::NotImplemented`].
//!
//! # Reading Parquet
//!
//! ```no_run
//! # #[cfg(feature = "parquet")]
//! # async fn read() -> Result<(), Box<dyn std::error::Error>> {
//! use futures::TryStreamExt;
//! use karu_object_store::ParquetReader;
//! use parquet::arrow::{ParquetRecordBatchStreamBuilder, ProjectionMask};
//!
//! let client = karu::Client::builder().build()?;
//! let reader = ParquetReader::new(&client, "s3://bucket/table/part-0.parquet")?;
//! let builder = ParquetRecordBatchStreamBuilder::new(reader).await?; // the footer: one round trip
//! let columns = ProjectionMask::roots(builder.parquet_schema(), [0, 3]);
//! let batches: Vec<_> = builder
//!     .with_projection(columns)
//!     .with_row_groups(vec![2, 5])
//!     .build()?
//!     .try_collect()
//!     .await?; // the selected column chunks: one Karu batch per row group
//! # Ok(())
//! # }
//! ```
//!
//! # Registering with DataFusion
//!
//! DataFusion finds stores by URL in its `ObjectStoreRegistry`; register a `KaruStore` under
//! the URL of the tables it serves (DataFusion is not a dependency of this crate, so this is
//! text, not a tested example):
//!
//! ```text
//! use std::sync::Arc;
//! use datafusion::prelude::SessionContext;
//! use karu_object_store::KaruStore;
//! use url::Url;
//!
//! let client = karu::Client::builder().build()?;
//! let store = Arc::new(KaruStore::new(client, "s3://my-bucket")?);
//! let ctx = SessionContext::new();
//! ctx.register_object_store(&Url::parse("s3://my-bucket")?, store);
//! // or: ctx.runtime_env().object_store_registry.register_store(&url, store);
//! // A file's URL: DataFusion would list a directory to find its files, and Karu does not list.
//! ctx.register_parquet("trips", "s3://my-bucket/trips/part-0.parquet", Default::default()).await?;
//! ```
//!
//! A table of several files names each of them (a `ListingTable` given its files' URLs), never
//! their directory.
//!
//! # How it reads
//!
//! See [`KaruStore`] for each operation: no HEAD before a read (the size comes from the
//! answer's `Content-Range`), `get_ranges` as one Karu batch whose merging Karu's planner and
//! guards decide, whole objects as a stream of part-sized chunks of one version (pinned by its
//! strong ETag; a local file checked against its size and modification time; a remote object
//! without a strong ETag read in one request). No path leaves the base.

mod address;
mod error;
mod get;
#[cfg(feature = "parquet")]
mod parquet_reader;
#[cfg(feature = "parquet")]
mod prefetch;
mod store;

#[cfg(feature = "parquet")]
pub use parquet_reader::ParquetReader;
pub use store::KaruStore;

/// This crate's README, whose examples are compiled (and the first one run) as documentation
/// tests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct Readme;
