//! `cargo xtask demo`: the main job. Reads scattered ranges of a sample object and prints what
//! happened to every read and to the batch.

use std::time::Instant;

use karu::{Batch, Client, Completion, Locator, Read, Status, UNBOUNDED};

use crate::{bytes, target_dir};

const SAMPLE_SIZE: u64 = 4 << 20;

/// A byte of the sample object, a function of its offset (so any read can be checked).
fn sample_byte(offset: u64) -> u8 {
    let x = offset.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    (x >> 56) as u8 ^ (offset as u8)
}

/// One row of the demo: a read and what it is meant to show.
struct Case {
    what: &'static str,
    locator: Locator,
    offset: u64,
    length: u64,
    /// Absolute offset of the read's first byte in the sample, for checking.
    absolute: u64,
}

pub(crate) fn run() -> Result<(), String> {
    let dir = target_dir().join("karu-demo");
    std::fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let sample = dir.join("sample.bin");
    let content: Vec<u8> = (0..SAMPLE_SIZE).map(sample_byte).collect();
    std::fs::write(&sample, &content)
        .map_err(|e| format!("cannot write {}: {e}", sample.display()))?;

    let client = Client::builder()
        .user_config_file(None)
        .project_config_file(None)
        .build()
        .map_err(|e| e.to_string())?;
    println!(
        "Karu demo: local reads of {} ({})",
        sample.display(),
        bytes(SAMPLE_SIZE)
    );
    println!();
    local(&client, &sample, &dir)?;
    Ok(())
}

fn local(client: &Client, sample: &std::path::Path, dir: &std::path::Path) -> Result<(), String> {
    let object = client
        .locate(&format!("file://{}", sample.display()))
        .map_err(|e| e.to_string())?;
    let window_start = 2 << 20;
    let window = object
        .with_window(window_start, Some(1 << 20))
        .map_err(|e| e.to_string())?;
    let missing = client
        .locate(&dir.join("missing.bin").to_string_lossy())
        .map_err(|e| e.to_string())?;
    let directory = client
        .locate(&dir.to_string_lossy())
        .map_err(|e| e.to_string())?;
    let case = |what, locator: &Locator, offset, length, absolute| Case {
        what,
        locator: locator.clone(),
        offset,
        length,
        absolute,
    };
    let cases = vec![
        case("first page", &object, 0, 4096, 0),
        case("scattered", &object, 1_000_000, 65_536, 1_000_000),
        case(
            "overlaps the previous read",
            &object,
            1_010_000,
            8_192,
            1_010_000,
        ),
        case("scattered, small", &object, 3_000_000, 100, 3_000_000),
        case(
            "window start (window = [2 MiB, +1 MiB))",
            &window,
            0,
            1024,
            window_start,
        ),
        case(
            "window end",
            &window,
            (1 << 20) - 512,
            512,
            window_start + (1 << 20) - 512,
        ),
        case("leaves the window", &window, (1 << 20) - 100, 200, 0),
        case(
            "reaches past the end of the file",
            &object,
            SAMPLE_SIZE - 1000,
            4096,
            SAMPLE_SIZE - 1000,
        ),
        case("zero length", &object, 0, 0, 0),
        case("unbounded length", &object, 5, UNBOUNDED, 0),
        case("offset + length overflows", &object, u64::MAX - 10, 100, 0),
        case("missing file", &missing, 0, 10, 0),
        case("a directory", &directory, 0, 10, 0),
    ];
    let started = Instant::now();
    let batch = client.submit(
        cases
            .iter()
            .enumerate()
            .map(|(i, c)| Read::new(&c.locator, c.offset, c.length).tag(i as u64 + 1)),
    );
    let completions = batch.wait();
    let elapsed = started.elapsed();
    print_reads(&cases, &completions);
    print_batch(&batch, elapsed);
    Ok(())
}

fn print_reads(cases: &[Case], completions: &[Completion]) {
    println!(
        "{:>3}  {:<42} {:<22} {:>9}  {}",
        "tag", "read", "status", "bytes", "check"
    );
    for (case, c) in cases.iter().zip(completions) {
        let check = match c.status() {
            Status::Ok | Status::RangeNotSatisfiable => {
                let expected = (case.absolute..case.absolute + c.bytes_received()).map(sample_byte);
                if c.bytes().iter().copied().eq(expected) {
                    "exact bytes".to_string()
                } else {
                    "WRONG BYTES".to_string()
                }
            }
            _ => c
                .error()
                .map(|e| shorten(e.message(), 60))
                .unwrap_or_default(),
        };
        println!(
            "{:>3}  {:<42} {:<22} {:>9}  {}",
            c.tag(),
            format!(
                "{} ({}:{})",
                case.what,
                case.offset,
                length_text(case.length)
            ),
            c.status().name(),
            c.bytes_received(),
            check
        );
    }
    println!();
}

fn print_batch(batch: &Batch, elapsed: std::time::Duration) {
    let s = batch.stats();
    println!(
        "batch: {} reads ({} rejected before any I/O), {} transfers, requested {}, fetched {}, {:.2} ms",
        s.reads,
        s.rejected,
        s.transfers,
        bytes(s.requested_bytes),
        bytes(s.fetched_bytes),
        elapsed.as_secs_f64() * 1000.0
    );
    println!();
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
