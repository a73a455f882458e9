//! The HTTP section: scattered reads of a 1 GiB object on the testkit's mock server with
//! 20 ms of injected latency, counted from the server's own request log.

use std::collections::{BTreeMap, HashSet};
use std::time::{Duration, Instant};

use karu::{Client, Completion, Locator, Read, Status};
use karu_testkit::{MockServer, RequestRecord, pattern};

use super::{check_text, length_text, millis, shorten};
use crate::table::{Align, Table};
use crate::{bytes, count};

const LATENCY: Duration = Duration::from_millis(20);
const OBJECT_PATH: &str = "/demo/big.bin";
const OBJECT_SIZE: u64 = 1 << 30;
const SCATTERED: usize = 200;
const WINDOW_START: u64 = 512 << 20;

/// One read of the batch.
struct Case {
    what: String,
    locator: Locator,
    offset: u64,
    length: u64,
    /// Absolute offset of the read's first byte in the object, when bytes are expected.
    absolute: Option<u64>,
    /// Printed on its own line (the reads that show something besides scattering).
    named: bool,
}

pub(super) fn section(client: &Client) -> Result<(), String> {
    let server = MockServer::builder()
        .latency(LATENCY)
        .start()
        .map_err(|e| format!("cannot start the mock HTTP server: {e}"))?;
    server.insert_virtual(OBJECT_PATH, OBJECT_SIZE);
    let url = server.url(OBJECT_PATH);
    println!(
        "== HTTP: {url} ({}, generated from the offset; the mock server adds {} before every response) ==",
        bytes(OBJECT_SIZE),
        millis(LATENCY)
    );
    println!();
    let object = client.locate(&url).map_err(|e| e.to_string())?;
    let cases = cases(&object)?;
    let concurrency = client.snapshot().global().concurrency;

    let mut known: HashSet<u64> = HashSet::new();
    for (n, title) in [
        (1, "new connections"),
        (
            2,
            "the same reads again, on the connections kept from batch 1",
        ),
    ] {
        server.take_requests();
        let started = Instant::now();
        let batch = client.submit(
            cases
                .iter()
                .enumerate()
                .map(|(i, c)| Read::new(&c.locator, c.offset, c.length).tag(i as u64)),
        );
        let completions = batch.wait();
        let wall = started.elapsed();
        let log = server.take_requests();
        let stats = batch.stats();
        let checks: Vec<String> = cases
            .iter()
            .zip(&completions)
            .map(|(case, c)| check_text(c, case.absolute, |at, len| pattern(at, len as usize)))
            .collect();

        println!("batch {n}: {title}");
        let connections: HashSet<u64> = log.iter().map(|r| r.connection).collect();
        let sent: u64 = log.iter().map(|r| r.body_bytes).sum();
        let rounds = (stats.transfers as u64).div_ceil(concurrency as u64);
        let ideal = LATENCY * rounds as u32;
        let mut summary: Vec<(&str, String)> = Vec::new();
        summary.push((
            "reads",
            format!(
                "{} ({} rejected before any I/O)",
                stats.reads, stats.rejected
            ),
        ));
        summary.push((
            "transfers",
            format!(
                "{} planned; the server saw {} requests on {} connections ({} of them new)",
                stats.transfers,
                log.len(),
                connections.len(),
                connections.difference(&known).count()
            ),
        ));
        summary.push((
            "bytes",
            format!(
                "requested {} B, fetched {} B (planned); the server sent {} B",
                count(stats.requested_bytes),
                count(stats.fetched_bytes),
                count(sent)
            ),
        ));
        summary.push((
            "wall",
            format!(
                "{}; ideal {} × ⌈{} transfers / {} at once⌉ = {} ({:.2} × ideal)",
                millis(wall),
                millis(LATENCY),
                stats.transfers,
                concurrency,
                millis(ideal),
                wall.as_secs_f64() / ideal.as_secs_f64()
            ),
        ));
        summary.push(("statuses", status_counts(&completions)));
        let wrong = checks
            .iter()
            .filter(|c| c.contains("WRONG") || c.contains("UNEXPECTED"))
            .count();
        let delivered = completions
            .iter()
            .filter(|c| c.bytes_received() > 0)
            .count();
        summary.push((
            "bytes check",
            if wrong == 0 {
                format!(
                    "all {delivered} reads that delivered bytes match the object, byte for byte"
                )
            } else {
                format!("{wrong} READS DELIVERED WRONG BYTES OR SUCCEEDED WHEN THEY SHOULD NOT")
            },
        ));
        known.extend(connections.iter().copied());
        for (key, value) in &summary {
            println!("  {key:<12}{value}");
        }
        println!();
        if n == 1 {
            print_reads(&cases, &completions, &checks, &log);
            println!();
        }
    }

    stat_and_ends(client, &server, &object)?;
    println!();
    Ok(())
}

/// The batch: scattered reads, neighbours that merge, an overlapping pair, a windowed read,
/// one past the end and one invalid.
fn cases(object: &Locator) -> Result<Vec<Case>, String> {
    let mut rng = fastrand::Rng::with_seed(2024);
    let mut cases = Vec::new();
    let mut add = |what: String, locator: &Locator, offset, length, absolute, named| {
        cases.push(Case {
            what,
            locator: locator.clone(),
            offset,
            length,
            absolute,
            named,
        })
    };
    for _ in 0..SCATTERED {
        let offset = rng.u64(0..=OBJECT_SIZE - 4096);
        add(
            "scattered".into(),
            object,
            offset,
            4096,
            Some(offset),
            false,
        );
    }
    let cluster = 300 << 20;
    for i in 0..4 {
        let offset = cluster + i * (24 << 10);
        add(
            format!("neighbour {} of 4 (16 KiB, 8 KiB apart)", i + 1),
            object,
            offset,
            16 << 10,
            Some(offset),
            true,
        );
    }
    let pair = 700 << 20;
    add(
        "overlapping pair, first".into(),
        object,
        pair,
        64 << 10,
        Some(pair),
        true,
    );
    add(
        "overlapping pair, second (shares 32 KiB)".into(),
        object,
        pair + (32 << 10),
        64 << 10,
        Some(pair + (32 << 10)),
        true,
    );
    let window = object
        .with_window(WINDOW_START, Some(1 << 20))
        .map_err(|e| e.to_string())?;
    add(
        "in a window [512 MiB, +1 MiB)".into(),
        &window,
        4096,
        8192,
        Some(WINDOW_START + 4096),
        true,
    );
    add(
        "reaches past the end of the object".into(),
        object,
        OBJECT_SIZE - 1000,
        4096,
        Some(OBJECT_SIZE - 1000),
        true,
    );
    add("zero length".into(), object, 4096, 0, None, true);
    Ok(cases)
}

fn status_counts(completions: &[Completion]) -> String {
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    for c in completions {
        *counts.entry(c.status().name()).or_default() += 1;
    }
    let mut counts: Vec<(&str, usize)> = counts.into_iter().collect();
    counts.sort_by_key(|&(_, n)| std::cmp::Reverse(n));
    counts
        .iter()
        .map(|(name, n)| format!("{n} {name}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The named reads and any other read that did not succeed, with the request that carried
/// each (from the server's log).
fn print_reads(
    cases: &[Case],
    completions: &[Completion],
    checks: &[String],
    log: &[RequestRecord],
) {
    let mut table = Table::new(&[
        ("tag", Align::Right),
        ("read", Align::Left),
        ("offset:length", Align::Left),
        ("status", Align::Left),
        ("bytes", Align::Right),
        ("check", Align::Left),
        ("carried by", Align::Left),
    ]);
    let scattered_ok = cases
        .iter()
        .zip(completions)
        .filter(|(case, c)| !case.named && c.status() == Status::Ok)
        .count();
    for ((case, c), check) in cases.iter().zip(completions).zip(checks) {
        if !case.named && c.status() == Status::Ok {
            continue;
        }
        table.row(vec![
            c.tag().to_string(),
            case.what.clone(),
            format!("{}:{}", case.offset, length_text(case.length)),
            c.status().name().to_string(),
            c.bytes_received().to_string(),
            shorten(check, 60),
            carrier(case, cases, log),
        ]);
    }
    println!(
        "  reads 0-{}: {SCATTERED} scattered 4 KiB reads, {scattered_ok} ok with exact bytes; the others:",
        SCATTERED - 1
    );
    table.print("  ");
}

/// The request of the log whose range holds the read, and how many reads of the batch it
/// carried.
fn carrier(case: &Case, cases: &[Case], log: &[RequestRecord]) -> String {
    let Some(at) = case.absolute else {
        return "no request".into();
    };
    let end = at + case.length;
    let Some((first, last)) = log
        .iter()
        .filter_map(|r| r.byte_range)
        .find(|&(first, last)| first <= at && at <= last)
    else {
        return "no request".into();
    };
    let reads = cases
        .iter()
        .filter_map(|c| c.absolute)
        .filter(|&a| first <= a && a <= last)
        .count();
    let what = if reads > 1 {
        format!("{reads} reads")
    } else {
        "this read only".to_string()
    };
    let beyond = if end > last + 1 {
        ", asked past the end"
    } else {
        ""
    };
    format!("bytes={first}-{last} ({what}{beyond})")
}

fn stat_and_ends(client: &Client, server: &MockServer, object: &Locator) -> Result<(), String> {
    server.take_requests();
    let started = Instant::now();
    let info = client.stat(object).map_err(|e| e.to_string())?;
    let size = info.size.ok_or("a remote object states its size")?;
    let wall = started.elapsed();
    let log = server.take_requests();
    println!(
        "stat: size {} ({}), ETag {}; {} request(s) seen by the server ({}), {}",
        size,
        bytes(size),
        info.etag.as_deref().unwrap_or("none"),
        log.len(),
        ranges(&log),
        millis(wall)
    );

    let (head, tail) = (64 << 10, 64 << 10);
    let started = Instant::now();
    let ends = client
        .read_ends(object, head, tail)
        .map_err(|e| e.to_string())?;
    let wall = started.elapsed();
    let log = server.take_requests();
    let head_ok = ends.head == pattern(0, ends.head.len());
    let tail_ok = ends.tail == pattern(ends.size - ends.tail.len() as u64, ends.tail.len());
    println!(
        "read_ends(64 KiB, 64 KiB): head {} and tail {} ({}), size {}, ETag {}; {} request(s) seen by the server ({}), {}",
        bytes(ends.head.len() as u64),
        bytes(ends.tail.len() as u64),
        if head_ok && tail_ok {
            "exact bytes"
        } else {
            "WRONG BYTES"
        },
        ends.size,
        ends.etag.as_deref().unwrap_or("none"),
        log.len(),
        ranges(&log),
        millis(wall)
    );
    Ok(())
}

/// The `Range` headers of a log, comma-separated.
fn ranges(log: &[RequestRecord]) -> String {
    log.iter()
        .map(|r| r.range.clone().unwrap_or_else(|| "no Range".into()))
        .collect::<Vec<_>>()
        .join(", ")
}
