//! `cargo xtask demo`: the main job, one section per kind of storage. Each section reads
//! scattered ranges (windowed, overlapping and invalid ones included), checks every delivered
//! byte, and prints what happened to the reads and to each batch.
//!
//! Sections: [`local`] (a file written for the demo), [`http`] (a mock HTTP server with
//! injected latency), [`s3`] (signed reads through the S3 mock, credentials discovered on
//! loopback, one lookup per scope), [`gcs`] (a service-account key exchanged at a token-endpoint
//! fake, a gzip-stored object read exactly, a decompressed answer refused), [`azure`] (Shared
//! Key reads through the Azure mock, and read_ends without suffix ranges shown on the wire),
//! [`hf`] (a gated Hugging Face dataset through the Hub mock: the second batch of one file skips
//! the resolve hop), [`parquet`] (the Rust data stack: karu-object-store's Parquet example
//! against a mock server), [`c_abi`] (the C example `read_ranges.c` over a file and a mock
//! server). A
//! new section is a module with a `section(&Client)` function, called from [`run`].

mod azure;
mod c_abi;
mod gcs;
mod hf;
mod http;
mod local;
mod parquet;
mod s3;

use std::time::Duration;

use karu::{Client, Completion, Status, UNBOUNDED};

pub(crate) fn run() -> Result<(), String> {
    let client = Client::builder()
        .user_config_file(None)
        .project_config_file(None)
        .build()
        .map_err(|e| e.to_string())?;
    println!("Karu demo");
    if cfg!(debug_assertions) {
        println!(
            "(a debug build: wall times include unoptimised client code; \
             `cargo xtask bench http` measures properly)"
        );
    }
    println!();
    local::section(&client)?;
    http::section(&client)?;
    // The S3 section builds its own client: its configuration (endpoint, path rules,
    // captured environment) is part of what it shows.
    s3::section()?;
    azure::section()?;
    hf::section()?;
    gcs::section()?;
    // The Parquet section builds and runs karu-object-store's example.
    parquet::section()?;
    // The C ABI section builds the C library and the example program, and runs it.
    c_abi::section()?;
    Ok(())
}

/// How a completion's delivered bytes compare with what the object holds at `absolute`
/// (`None`: nothing was expected, e.g. a read rejected before any I/O).
fn check_text(
    c: &Completion,
    absolute: Option<u64>,
    expected: impl Fn(u64, u64) -> Vec<u8>,
) -> String {
    match (c.status(), absolute) {
        (Status::Ok | Status::RangeNotSatisfiable, Some(at)) => {
            let n = c.bytes_received();
            let delivered = c.bytes().get(..n as usize);
            match (delivered, c.status()) {
                (Some(d), Status::Ok) if d == expected(at, n) => "exact bytes".to_string(),
                (Some(d), _) if d == expected(at, n) => {
                    "exact bytes (the valid prefix)".to_string()
                }
                _ => "WRONG BYTES".to_string(),
            }
        }
        (Status::Ok, None) => "UNEXPECTED SUCCESS".to_string(),
        _ => c
            .error()
            .map(|e| shorten(e.message(), 70))
            .unwrap_or_default(),
    }
}

fn length_text(length: u64) -> String {
    if length == UNBOUNDED {
        "unbounded".to_string()
    } else {
        length.to_string()
    }
}

fn shorten(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        s.to_string()
    } else {
        let cut: String = s.chars().take(max - 1).collect();
        format!("{cut}…")
    }
}

fn millis(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1000.0)
}
