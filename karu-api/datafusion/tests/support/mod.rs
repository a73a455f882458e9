//! Helpers of karu-datafusion's tests: a table of two Parquet files written with DataFusion's
//! parquet, the query, DataFusion's answer over the local files, isolated clients.
#![allow(dead_code)]

use std::path::Path;
use std::sync::Arc;

use bytes::Bytes;
use datafusion::arrow::array::{ArrayRef, Float64Array, Int32Array, Int64Array, StringArray};
use datafusion::arrow::record_batch::RecordBatch;
use datafusion::arrow::util::pretty::pretty_format_batches;
use datafusion::parquet::arrow::ArrowWriter;
use datafusion::parquet::file::properties::WriterProperties;
use datafusion::prelude::{ParquetReadOptions, SessionContext};
use karu::Client;

/// The table's files.
pub(crate) const FILES: [&str; 2] = ["part-0.parquet", "part-1.parquet"];
/// Row groups of each file.
pub(crate) const ROW_GROUPS: usize = 8;
/// Rows of each row group.
pub(crate) const ROW_GROUP: usize = 4_000;

/// A filter on one column, aggregates of two others, in a stable order.
pub(crate) const QUERY: &str = "SELECT flag, count(*) AS n, sum(score) AS total, \
     max(name) AS last FROM trips WHERE id % 3 = 0 GROUP BY flag ORDER BY flag";

/// A client that reads no config file and no process environment, without hedging.
pub(crate) fn client() -> Client {
    karu_testkit::reads::client()
}

/// The bytes of file `part` of the table: `id` (i64), `score` (f64), `name` (a string),
/// `flag` (i32), `extra` (i64, not queried), in [`ROW_GROUPS`] row groups.
pub(crate) fn file(part: usize) -> Bytes {
    file_version(part, 0)
}

/// Version `version` of file `part`: the same size and layout as every other version, its
/// scores `1000 × version` higher.
pub(crate) fn file_version(part: usize, version: u32) -> Bytes {
    let rows = ROW_GROUPS * ROW_GROUP;
    let first = (part * rows) as i64;
    let ids: Vec<i64> = (first..first + rows as i64).collect();
    let shift = f64::from(version) * 1000.0;
    let scores = Float64Array::from_iter_values(ids.iter().map(|&i| i as f64 * 0.25 - 3.0 + shift));
    let names = StringArray::from_iter_values(
        ids.iter()
            .map(|&i| format!("n-{i}-{}", "x".repeat((i % 11) as usize))),
    );
    let flags = Int32Array::from_iter_values(ids.iter().map(|&i| (i % 5) as i32));
    let extra = Int64Array::from_iter_values(ids.iter().map(|&i| i * 7));
    let batch = RecordBatch::try_from_iter([
        ("id", Arc::new(Int64Array::from(ids)) as ArrayRef),
        ("score", Arc::new(scores) as ArrayRef),
        ("name", Arc::new(names) as ArrayRef),
        ("flag", Arc::new(flags) as ArrayRef),
        ("extra", Arc::new(extra) as ArrayRef),
    ])
    .unwrap();
    let properties = WriterProperties::builder()
        .set_max_row_group_row_count(Some(ROW_GROUP))
        .build();
    let mut out = Vec::new();
    let mut writer = ArrowWriter::try_new(&mut out, batch.schema(), Some(properties)).unwrap();
    writer.write(&batch).unwrap();
    writer.close().unwrap();
    Bytes::from(out)
}

/// Write the table's files into `dir`; their names and bytes.
pub(crate) fn write_files(dir: &Path) -> Vec<(&'static str, Bytes)> {
    FILES
        .iter()
        .enumerate()
        .map(|(part, name)| {
            let bytes = file(part);
            std::fs::write(dir.join(name), &bytes).unwrap();
            (*name, bytes)
        })
        .collect()
}

/// The query's answer from DataFusion alone over the files in `dir`.
pub(crate) async fn local_answer(dir: &Path) -> String {
    let ctx = SessionContext::new();
    let paths: Vec<String> = FILES
        .iter()
        .map(|name| dir.join(name).to_str().unwrap().to_string())
        .collect();
    let table = ctx
        .read_parquet(paths, ParquetReadOptions::default())
        .await
        .unwrap();
    ctx.register_table("trips", table.into_view()).unwrap();
    pretty(ctx.sql(QUERY).await.unwrap().collect().await.unwrap())
}

/// Record batches as a table of text (every value shown).
pub(crate) fn pretty(batches: Vec<RecordBatch>) -> String {
    let rows: usize = batches.iter().map(RecordBatch::num_rows).sum();
    assert!(rows > 0, "the query answered no row");
    pretty_format_batches(&batches).unwrap().to_string()
}
