//! A SQL query by DataFusion over Parquet files that Karu reads from a mock HTTP server.
//!
//! ```sh
//! cargo run -p karu-datafusion --example sql
//! ```
//!
//! It writes a table of two Parquet files (8 row groups each), serves them from Karu's mock
//! server on 127.0.0.1, registers Karu for the server's `/tables` prefix, runs a query with a
//! filter and two aggregates, prints the answer, and prints the requests the server saw: each
//! file's footer (with its metadata and page index) in one request, its row groups' column
//! chunks read ahead in a few requests instead of one each.

use std::sync::Arc;

use datafusion::arrow::array::{ArrayRef, Float64Array, Int32Array, Int64Array};
use datafusion::arrow::record_batch::RecordBatch;
use datafusion::parquet::arrow::ArrowWriter;
use datafusion::parquet::file::properties::WriterProperties;
use datafusion::prelude::SessionContext;
use karu_testkit::MockServer;

type Failure = Box<dyn std::error::Error>;

/// One Parquet file of `rows` rows starting at id `first`, in row groups of 10,000 rows.
fn parquet_file(first: i64, rows: i64) -> Result<Vec<u8>, Failure> {
    let ids: Vec<i64> = (first..first + rows).collect();
    let fares = Float64Array::from_iter_values(ids.iter().map(|&i| (i % 97) as f64 * 1.5));
    let distances = Float64Array::from_iter_values(ids.iter().map(|&i| (i % 31) as f64));
    let vendors = Int32Array::from_iter_values(ids.iter().map(|&i| (i % 4) as i32));
    let batch = RecordBatch::try_from_iter([
        ("id", Arc::new(Int64Array::from(ids)) as ArrayRef),
        ("vendor", Arc::new(vendors) as ArrayRef),
        ("fare", Arc::new(fares) as ArrayRef),
        ("distance", Arc::new(distances) as ArrayRef),
    ])?;
    let properties = WriterProperties::builder()
        .set_max_row_group_row_count(Some(10_000))
        .build();
    let mut out = Vec::new();
    let mut writer = ArrowWriter::try_new(&mut out, batch.schema(), Some(properties))?;
    writer.write(&batch)?;
    writer.close()?;
    Ok(out)
}

#[tokio::main]
async fn main() -> Result<(), Failure> {
    let server = MockServer::start();
    server.insert(
        "/tables/trips-0.parquet",
        bytes::Bytes::from(parquet_file(0, 80_000)?),
    );
    server.insert(
        "/tables/trips-1.parquet",
        bytes::Bytes::from(parquet_file(80_000, 80_000)?),
    );

    let client = karu::Client::builder()
        .user_config_file(None)
        .project_config_file(None)
        .build()?;
    let ctx = SessionContext::new();
    let tables = karu_datafusion::register(&ctx, &server.url("/tables"), &client)?;
    tables
        .register_parquet("trips", &["trips-0.parquet", "trips-1.parquet"])
        .await?;
    let query = "SELECT vendor, count(*) AS trips, sum(fare) AS fares, avg(distance) AS distance \
                 FROM trips WHERE distance > 10 GROUP BY vendor ORDER BY vendor";
    println!("{query}");
    ctx.sql(query).await?.show().await?;

    println!("requests the server saw:");
    for request in server.requests() {
        println!("  {request}");
    }
    Ok(())
}
