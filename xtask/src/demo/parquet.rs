//! The Rust data stack section: `karu-api/object-store/examples/parquet.rs` writes a small
//! Parquet file, then reads its schema, row count and one column's first values from a mock
//! HTTP server (20 ms per request) through `ParquetReader`; the mock's request log shows what
//! the read cost: the footer in one round trip, the column's chunk in one request, no HEAD.

use std::process::Command;
use std::time::Duration;

use karu_testkit::MockServer;

use crate::{cargo, target_dir, workspace_root};

pub(super) fn section() -> Result<(), String> {
    println!("== Rust data stack: Parquet through karu-object-store ==");
    println!();
    let dir = target_dir().join("karu-demo");
    std::fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let file = dir.join("sample.parquet");
    let file_text = file.to_str().ok_or("the demo path is not UTF-8")?;
    example(&["--write-sample", file_text])?;
    let bytes = std::fs::read(&file).map_err(|e| format!("cannot read {}: {e}", file.display()))?;

    let server = MockServer::builder()
        .latency(Duration::from_millis(20))
        .start()
        .map_err(|e| format!("cannot start the mock server: {e}"))?;
    server.insert("/tables/sample.parquet", bytes.clone());
    let url = server.url("/tables/sample.parquet");
    example(&[&url, "city"])?;

    let log = server.take_requests();
    let heads = log.iter().filter(|r| r.method != "GET").count();
    let ranges: Vec<String> = log
        .iter()
        .map(|r| r.range.clone().unwrap_or_else(|| "(no range)".into()))
        .collect();
    println!(
        "  the mock server saw {} requests ({}): the footer's suffix read (its answer states the \
         size), then the column chunk of row group 0",
        log.len(),
        ranges.join(", ")
    );
    let suffixes = ranges.iter().filter(|r| r.starts_with("bytes=-")).count();
    if heads > 0 || suffixes != 1 || log.len() != 2 {
        return Err(format!(
            "the Parquet example should send one suffix read and one column read, no HEAD; the \
             server saw {ranges:?}"
        ));
    }
    println!();
    Ok(())
}

/// Run the example (built with the crate's `parquet` feature) with `args`. Not `--quiet`: the
/// first run compiles parquet and arrow, and cargo's progress shows it.
fn example(args: &[&str]) -> Result<(), String> {
    let status = Command::new(cargo())
        .args([
            "run",
            "-p",
            "karu-object-store",
            "--features",
            "parquet",
            "--example",
            "parquet",
            "--",
        ])
        .args(args)
        .env("KARU_CONFIG", "")
        .current_dir(workspace_root())
        .status()
        .map_err(|e| format!("cannot run cargo: {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("the Parquet example failed with {args:?}"))
    }
}
