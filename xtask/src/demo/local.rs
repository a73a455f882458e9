//! The local section: scattered, overlapping, windowed and invalid reads of a file written
//! for the demo.

use std::path::Path;
use std::time::Instant;

use karu::{Batch, Client, Locator, Read, UNBOUNDED};

use super::{check_text, length_text, millis};
use crate::table::{Align, Table};
use crate::{bytes, target_dir};

const SAMPLE_SIZE: u64 = 4 << 20;

/// A byte of the sample file, a function of its offset (so any read can be checked).
fn sample_byte(offset: u64) -> u8 {
    let x = offset.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    (x >> 56) as u8 ^ (offset as u8)
}

/// One row of the section: a read and what it is meant to show.
struct Case {
    what: &'static str,
    locator: Locator,
    offset: u64,
    length: u64,
    /// Absolute offset of the read's first byte in the sample, when bytes are expected.
    absolute: Option<u64>,
}

pub(super) fn section(client: &Client) -> Result<(), String> {
    let dir = target_dir().join("karu-demo");
    std::fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let sample = dir.join("sample.bin");
    let content: Vec<u8> = (0..SAMPLE_SIZE).map(sample_byte).collect();
    std::fs::write(&sample, &content)
        .map_err(|e| format!("cannot write {}: {e}", sample.display()))?;
    println!(
        "== Local file: {} ({}) ==",
        sample.display(),
        bytes(SAMPLE_SIZE)
    );
    println!();

    let cases = cases(client, &sample, &dir)?;
    let started = Instant::now();
    let batch = client.submit(
        cases
            .iter()
            .enumerate()
            .map(|(i, c)| Read::new(&c.locator, c.offset, c.length).tag(i as u64 + 1)),
    );
    let completions = batch.wait();
    let elapsed = started.elapsed();

    let mut table = Table::new(&[
        ("tag", Align::Right),
        ("read", Align::Left),
        ("offset:length", Align::Left),
        ("status", Align::Left),
        ("bytes", Align::Right),
        ("check", Align::Left),
    ]);
    for (case, c) in cases.iter().zip(&completions) {
        let expected = |at: u64, n: u64| (at..at + n).map(sample_byte).collect::<Vec<u8>>();
        table.row(vec![
            c.tag().to_string(),
            case.what.to_string(),
            format!("{}:{}", case.offset, length_text(case.length)),
            c.status().name().to_string(),
            c.bytes_received().to_string(),
            check_text(c, case.absolute, expected),
        ]);
    }
    table.print("");
    println!();
    print_batch(&batch, elapsed);
    Ok(())
}

fn cases(client: &Client, sample: &Path, dir: &Path) -> Result<Vec<Case>, String> {
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
    Ok(vec![
        case("first page", &object, 0, 4096, Some(0)),
        case("scattered", &object, 1_000_000, 65_536, Some(1_000_000)),
        case(
            "overlaps the previous read",
            &object,
            1_010_000,
            8_192,
            Some(1_010_000),
        ),
        case("scattered, small", &object, 3_000_000, 100, Some(3_000_000)),
        case(
            "window start (window = [2 MiB, +1 MiB))",
            &window,
            0,
            1024,
            Some(window_start),
        ),
        case(
            "window end",
            &window,
            (1 << 20) - 512,
            512,
            Some(window_start + (1 << 20) - 512),
        ),
        case("leaves the window", &window, (1 << 20) - 100, 200, None),
        case(
            "reaches past the end of the file",
            &object,
            SAMPLE_SIZE - 1000,
            4096,
            Some(SAMPLE_SIZE - 1000),
        ),
        case("zero length", &object, 0, 0, None),
        case("unbounded length", &object, 5, UNBOUNDED, None),
        case(
            "offset + length overflows",
            &object,
            u64::MAX - 10,
            100,
            None,
        ),
        case("missing file", &missing, 0, 10, None),
        case("a directory", &directory, 0, 10, None),
    ])
}

fn print_batch(batch: &Batch, elapsed: std::time::Duration) {
    let s = batch.stats();
    println!(
        "batch: {} reads ({} rejected before any I/O), {} transfers, requested {}, fetched {}, {}",
        s.reads,
        s.rejected,
        s.transfers,
        bytes(s.requested_bytes),
        bytes(s.fetched_bytes),
        millis(elapsed)
    );
    println!();
}
