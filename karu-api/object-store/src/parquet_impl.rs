// The parquet `AsyncFileReader` implementation of `ParquetReader`, written once for every
// parquet major: a module per major names that major `parquet` and includes this file.
// Everything here converts between that major's types and the reader's own (and parses the
// footer with that major's metadata reader); the behaviour is `ParquetReader`'s.

use std::ops::Range;
use std::sync::Arc;

use bytes::Bytes;
use futures_util::FutureExt;
use futures_util::future::BoxFuture;
use parquet::arrow::ProjectionMask;
use parquet::arrow::arrow_reader::ArrowReaderOptions;
use parquet::arrow::async_reader::{AsyncFileReader, MetadataFetch};
use parquet::errors::{ParquetError, Result};
use parquet::file::metadata::{PageIndexPolicy, ParquetMetaData, ParquetMetaDataReader};

use crate::ParquetReader;
use crate::parquet_reader::{FileLayout, Footer, ParquetMetadata};

/// Karu's error as parquet's: `External`, holding it.
fn external(error: karu::Error) -> ParquetError {
    ParquetError::External(Box::new(error))
}

/// Where the row groups' column chunks of `metadata` lie.
fn layout_of(metadata: &ParquetMetaData) -> FileLayout {
    FileLayout::new(
        metadata
            .row_groups()
            .iter()
            .map(|group| {
                group
                    .columns()
                    .iter()
                    .map(|column| {
                        let (start, length) = column.byte_range();
                        start..start.saturating_add(length)
                    })
                    .collect()
            })
            .collect(),
    )
}

impl ParquetMetadata for ParquetMetaData {
    type Projection = ProjectionMask;

    fn layout(&self) -> FileLayout {
        layout_of(self)
    }

    fn includes(projection: &ProjectionMask, column: usize) -> bool {
        projection.leaf_included(column)
    }
}

impl ParquetMetadata for Arc<ParquetMetaData> {
    type Projection = ProjectionMask;

    fn layout(&self) -> FileLayout {
        layout_of(self)
    }

    fn includes(projection: &ProjectionMask, column: usize) -> bool {
        projection.leaf_included(column)
    }
}

/// The footer: one suffix read (which states the size and version), parsed with this major's
/// metadata reader, whose reads beyond that suffix (longer metadata, page indexes) are pinned
/// reads of the missing bytes.
async fn metadata(
    reader: &ParquetReader,
    options: Option<&ArrowReaderOptions>,
) -> Result<ParquetMetaData> {
    let footer = reader.footer().await.map_err(external)?;
    let size = footer.size;
    let hint = footer.tail_len();
    let mut parser = ParquetMetaDataReader::new();
    if reader.page_index() {
        // Kept when the options ask for no page index (they override it when they ask).
        parser = parser.with_page_index_policy(PageIndexPolicy::Optional);
    }
    let metadata = parser
        .with_arrow_reader_options(options)
        .with_prefetch_hint(Some(hint))
        .load_and_finish(footer, size)
        .await?;
    reader.learn_layout(|| layout_of(&metadata));
    Ok(metadata)
}

impl MetadataFetch for Footer {
    fn fetch(&mut self, range: Range<u64>) -> BoxFuture<'_, Result<Bytes>> {
        async move { self.fetch_range(range).await.map_err(external) }.boxed()
    }
}

impl AsyncFileReader for ParquetReader {
    fn get_bytes(&mut self, range: Range<u64>) -> BoxFuture<'_, Result<Bytes>> {
        async move { self.read(range).await.map_err(external) }.boxed()
    }

    fn get_byte_ranges(&mut self, ranges: Vec<Range<u64>>) -> BoxFuture<'_, Result<Vec<Bytes>>> {
        async move { self.read_many(ranges).await.map_err(external) }.boxed()
    }

    fn get_metadata<'a>(
        &'a mut self,
        options: Option<&'a ArrowReaderOptions>,
    ) -> BoxFuture<'a, Result<Arc<ParquetMetaData>>> {
        async move { metadata(self, options).await.map(Arc::new) }.boxed()
    }
}
