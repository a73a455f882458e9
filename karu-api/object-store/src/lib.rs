//! Karu inside the Rust data stack: the two interfaces format readers reach storage through, for
//! each major of them the engines' newest releases use.
//!
//! - [`KaruStore`] implements `object_store::ObjectStore`: anything that takes an
//!   `Arc<dyn ObjectStore>` reads through Karu's planner, response checks and recovery, from any
//!   address Karu reads (`s3://`, `gs://`, `az://`, `hf://`, `source://`, `http(s)://`, local
//!   directories).
//! - [`ParquetReader`] implements parquet's `AsyncFileReader` directly, the interface parquet
//!   keeps (parquet 60 deprecates `ParquetObjectReader`): the footer in one round trip, the column
//!   chunks of a read as one Karu batch with the next row groups' read ahead, every read pinned
//!   to one version.
//!
//! The same two types implement the trait of each major enabled by a feature (one
//! implementation of the behaviour; each major's trait implementation only converts types):
//!
//! | feature | trait | serves (newest releases) |
//! | --- | --- | --- |
//! | `object-store-0-14` (default) | `object_store` 0.14 `ObjectStore` | parquet 60's `ParquetObjectReader`, Lance 14 (`lance` 14.0) |
//! | `object-store-0-13` | `object_store` 0.13 `ObjectStore` | DataFusion 55 (`register_object_store`), delta-rs 1.1 (`deltalake` 1.1) |
//! | `parquet-60` (alias `parquet`) | parquet 60 `AsyncFileReader` | parquet 60's `ParquetRecordBatchStreamBuilder` |
//! | `parquet-59` | parquet 59 `AsyncFileReader` | DataFusion 55's Parquet scan (see the `karu-datafusion` crate), delta-rs 1.1 |
//!
//! When DataFusion releases on object_store 0.14 and parquet 60 (its main branch has moved),
//! the trait implementations follow its newest release and keep the previous major while users
//! are on it.
//!
//! Karu is read-only by contract: writes, deletes, copies and listings answer
//! object_store's `Error::NotImplemented`.
//!
//! # Reading Parquet
//!
//! ```no_run
//! # #[cfg(feature = "parquet-60")]
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
//! DataFusion 55 finds stores by URL in its `ObjectStoreRegistry`; with `object-store-0-13`,
//! register a `KaruStore` under the URL of the tables it serves (DataFusion is not a dependency
//! of this crate, so this is text, not a tested example; the `karu-datafusion` crate does this
//! and also gives DataFusion's scan Karu's `ParquetReader`, which reads ahead):
//!
//! ```text
//! use std::sync::Arc;
//! use datafusion::prelude::SessionContext;
//! use karu_object_store::KaruStore;
//! use url::Url;
//!
//! let client = karu::Client::builder().build()?;
//! let store = Arc::new(KaruStore::new("s3://my-bucket", &client)?);
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
#[cfg(feature = "object-store-0-13")]
mod object_store_0_13;
#[cfg(feature = "object-store-0-14")]
mod object_store_0_14;
#[cfg(feature = "parquet-59")]
mod parquet_59;
#[cfg(feature = "parquet-60")]
mod parquet_60;
#[cfg(any(feature = "parquet-59", feature = "parquet-60"))]
mod parquet_reader;
#[cfg(any(feature = "parquet-59", feature = "parquet-60"))]
mod prefetch;
mod store;

#[cfg(any(feature = "parquet-59", feature = "parquet-60"))]
pub use parquet_reader::{FileLayout, ParquetMetadata, ParquetReader, WeakParquetReader};
#[cfg(any(feature = "parquet-59", feature = "parquet-60"))]
pub use prefetch::PrefetchedBytes;
pub use store::KaruStore;

/// This crate's README, whose examples are compiled (and the first one run) as documentation
/// tests.
#[cfg(all(doctest, feature = "parquet-60", feature = "object-store-0-14"))]
#[doc = include_str!("../README.md")]
pub struct Readme;
