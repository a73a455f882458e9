//! Print a Parquet file's schema, row count and the first values of one column, from any
//! address Karu reads (a local path, `https://`, `s3://`, `gs://`, `az://`, `hf://`, ...).
//!
//! ```sh
//! cargo run -p karu-object-store --features parquet --example parquet -- ADDRESS [COLUMN] [N]
//! cargo run -p karu-object-store --features parquet --example parquet -- --write-sample FILE
//! ```
//!
//! The footer is read in one round trip and the column's first row group in one request, through
//! `ParquetReader` (parquet's `AsyncFileReader` over Karu). `--write-sample` writes a small file
//! to try it on. `cargo xtask demo` runs both against a mock server.

use std::process::ExitCode;
use std::sync::Arc;

use arrow_array::{
    Array, ArrayRef, Float64Array, Int32Array, Int64Array, RecordBatch, StringArray,
};
use futures::StreamExt;
use karu_object_store::ParquetReader;
use parquet::arrow::{ArrowWriter, ParquetRecordBatchStreamBuilder, ProjectionMask};
use parquet::file::properties::WriterProperties;

type Failure = Box<dyn std::error::Error>;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.as_slice() {
        [flag, file] if flag == "--write-sample" => write_sample(file),
        [address] => show(address, None, 5),
        [address, column] => show(address, Some(column), 5),
        [address, column, n] => match n.parse() {
            Ok(n) => show(address, Some(column), n),
            Err(_) => Err(format!("N must be a number, not {n:?}").into()),
        },
        _ => Err("usage: parquet ADDRESS [COLUMN] [N] | parquet --write-sample FILE".into()),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("parquet: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Print the file's schema and row count, and the first `n` values of `column` (the first
/// column when none is named).
fn show(address: &str, column: Option<&str>, n: usize) -> Result<(), Failure> {
    let client = karu::Client::builder().build()?;
    // The example reads the first row group only: told so, the reader's read-ahead (which
    // otherwise fetches the row groups that follow) reads nothing more.
    let reader = ParquetReader::new(&client, address)?.with_row_groups([0]);
    futures::executor::block_on(async {
        let builder = ParquetRecordBatchStreamBuilder::new(reader).await?;
        let metadata = builder.metadata().clone();
        println!("{address}");
        println!(
            "  {} rows in {} row groups, {} bytes",
            metadata.file_metadata().num_rows(),
            metadata.num_row_groups(),
            metadata
                .row_groups()
                .iter()
                .map(|g| g.compressed_size())
                .sum::<i64>()
        );
        println!("  schema:");
        for field in builder.schema().fields() {
            println!(
                "    {}: {}{}",
                field.name(),
                field.data_type(),
                if field.is_nullable() {
                    " (nullable)"
                } else {
                    ""
                }
            );
        }
        let fields = builder.schema().fields();
        let index = match column {
            None => 0,
            Some(name) => fields
                .iter()
                .position(|f| f.name() == name)
                .ok_or_else(|| format!("no column {name:?}"))?,
        };
        let Some(field) = fields.get(index) else {
            return Err::<(), Failure>("the file has no columns".into());
        };
        let name = field.name().clone();
        if metadata.num_row_groups() == 0 {
            println!("  {name}: no rows");
            return Ok(());
        }
        let mask = ProjectionMask::roots(builder.parquet_schema(), [index]);
        let mut stream = builder
            .with_projection(mask)
            .with_row_groups(vec![0])
            .with_batch_size(n.max(1))
            .build()?;
        let values = match stream.next().await {
            Some(batch) => describe(batch?.column(0), n),
            None => Vec::new(),
        };
        println!(
            "  {name}, first {} values: {}",
            values.len(),
            values.join(", ")
        );
        Ok(())
    })
}

/// The first `n` values of a column as text.
fn describe(column: &ArrayRef, n: usize) -> Vec<String> {
    let n = n.min(column.len());
    let any = column.as_any();
    let text = |i: usize, value: String| {
        if column.is_null(i) {
            "null".to_string()
        } else {
            value
        }
    };
    if let Some(a) = any.downcast_ref::<Int64Array>() {
        (0..n).map(|i| text(i, a.value(i).to_string())).collect()
    } else if let Some(a) = any.downcast_ref::<Int32Array>() {
        (0..n).map(|i| text(i, a.value(i).to_string())).collect()
    } else if let Some(a) = any.downcast_ref::<Float64Array>() {
        (0..n).map(|i| text(i, a.value(i).to_string())).collect()
    } else if let Some(a) = any.downcast_ref::<StringArray>() {
        (0..n)
            .map(|i| text(i, format!("{:?}", a.value(i))))
            .collect()
    } else {
        vec![format!(
            "({} values of {})",
            column.len(),
            column.data_type()
        )]
    }
}

/// A small file to try the example on: 10,000 rows in four row groups, four columns.
fn write_sample(path: &str) -> Result<(), Failure> {
    let ids: Vec<i64> = (0..10_000).collect();
    let batch = RecordBatch::try_from_iter([
        ("id", Arc::new(Int64Array::from(ids.clone())) as ArrayRef),
        (
            "city",
            Arc::new(StringArray::from_iter_values(ids.iter().map(|i| {
                ["Tallinn", "Tartu", "Pärnu", "Narva", "Viljandi"][*i as usize % 5]
            }))) as ArrayRef,
        ),
        (
            "fare",
            Arc::new(Float64Array::from_iter_values(
                ids.iter().map(|&i| 2.5 + (i % 40) as f64 * 0.75),
            )) as ArrayRef,
        ),
        (
            "passengers",
            Arc::new(Int32Array::from_iter_values(
                ids.iter().map(|&i| 1 + (i % 4) as i32),
            )) as ArrayRef,
        ),
    ])?;
    let properties = WriterProperties::builder()
        .set_max_row_group_row_count(Some(2_500))
        .build();
    let mut writer = ArrowWriter::try_new(
        std::fs::File::create(path)?,
        batch.schema(),
        Some(properties),
    )?;
    writer.write(&batch)?;
    writer.close()?;
    println!("wrote {path}");
    Ok(())
}
