//! `throttled`: 10,000 scattered 4 KiB reads against a mock that serves at most 16 requests at
//! once and answers the others `503 SlowDown` (`Fault::ThrottleAbove`), as S3 does when a
//! prefix is hot. Karu with its defaults (adaptive concurrency) runs beside the same client
//! with adaptation off (blind retries at its full concurrency) and beside a client configured with
//! exactly the server's limit (what a user who knew the limit would set). Throttled answers are
//! counted from the server's log.

use std::time::{Duration, Instant};

use clap::Args;
use karu::{BatchOptions, Read};
use karu_testkit::{Fault, FaultRule, MockServer};

use crate::report::{Align, Table, bytes, count};
use crate::workload::{Shape, Workload};

/// Options of `karu-bench throttled`.
#[derive(Debug, Clone, Args)]
pub(crate) struct ThrottledArgs {
    /// Reads of 4 KiB per batch.
    #[arg(long, default_value_t = 10_000)]
    pub(crate) reads: usize,
    /// Requests the server serves at once; the others are throttled.
    #[arg(long, default_value_t = 16)]
    pub(crate) limit: u64,
    /// The throttled answer's status (503 as S3, 429 as GCS and Hugging Face).
    #[arg(long, default_value_t = 503)]
    pub(crate) code: u16,
    /// Latency the server adds before every response's headers, in milliseconds.
    #[arg(long, default_value_t = 20)]
    pub(crate) latency_ms: u64,
    /// Steady batches per method after the cold one (the median is reported).
    #[arg(long, default_value_t = 3)]
    pub(crate) runs: usize,
    /// Seed of the random offsets.
    #[arg(long, default_value_t = 42)]
    pub(crate) seed: u64,
}

/// The clients compared.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Variant {
    /// Karu's defaults: adaptive concurrency on.
    Defaults,
    /// Adaptation off: the configured concurrency, throttled answers retried blindly.
    Fixed,
    /// Concurrency set to the server's limit by hand.
    AtLimit,
}

impl Variant {
    fn label(self, limit: u64) -> String {
        match self {
            // Starts with "Karu": `all`'s targets judge this row.
            Variant::Defaults => "Karu (defaults)".into(),
            Variant::Fixed => "Karu, adaptive_concurrency off".into(),
            Variant::AtLimit => format!("Karu, concurrency {limit} set by hand"),
        }
    }
}

/// One batch as the server saw it.
struct Batch {
    wall: Duration,
    transfers: usize,
    requests: u64,
    throttled: u64,
    bytes_sent: u64,
    check: crate::run::Check,
}

pub(crate) fn run(args: &ThrottledArgs) -> Result<(), String> {
    let latency = Duration::from_millis(args.latency_ms);
    let workload = Workload::new(Shape::Scattered { reads: args.reads }, args.seed);
    let server = MockServer::builder()
        .latency(latency)
        .start()
        .map_err(|e| format!("cannot start the mock server: {e}"))?;
    crate::transport::set(crate::transport::Transport::for_server(&server, false)?);
    for o in &workload.objects {
        server.insert_virtual(&o.path, o.size);
    }
    server.add_fault(FaultRule::new(Fault::ThrottleAbove {
        limit: args.limit,
        code: args.code,
    }));
    println!(
        "karu-bench throttled: {} × 4 KiB at uniform random offsets of a {} object; the server \
         serves {} requests at once and answers the others {}; {} ms latency; seed {}",
        count(args.reads as u64),
        bytes(workload.objects[0].size),
        args.limit,
        args.code,
        args.latency_ms,
        args.seed
    );
    println!(
        "ideal = latency × ⌈transfers / {}⌉ (the server's limit); throttled = answers {} in the \
         server's log",
        args.limit, args.code
    );
    let mut table = Table::new(&[
        ("method", Align::Left),
        ("phase", Align::Left),
        ("wall ms", Align::Right),
        ("ideal ms", Align::Right),
        ("wall/ideal", Align::Right),
        ("requests", Align::Right),
        ("throttled", Align::Right),
        ("check", Align::Left),
    ]);
    let mut failed = false;
    let mut defaults_share: f64 = 0.0;
    for variant in [Variant::Defaults, Variant::Fixed, Variant::AtLimit] {
        let label = variant.label(args.limit);
        let client = crate::methods::karu_client_with(|b| match variant {
            Variant::Defaults => b,
            Variant::Fixed => b.set("adaptive_concurrency", false),
            Variant::AtLimit => b.set("concurrency", args.limit),
        })?;
        let locator = client
            .locate(&server.url(&workload.objects[0].path))
            .map_err(|e| e.to_string())?;
        let mut runs = Vec::with_capacity(args.runs + 1);
        for _ in 0..=args.runs {
            runs.push(one(&server, &client, &locator, &workload, args.code));
        }
        let cold = runs.remove(0);
        runs.sort_by_key(|b| b.wall);
        let steady = (!runs.is_empty()).then(|| runs.swap_remove(runs.len() / 2));
        for (phase, batch) in [("cold", Some(cold)), ("steady", steady)] {
            let Some(batch) = batch else { continue };
            let rounds = (batch.transfers as u64).div_ceil(args.limit.max(1));
            let ideal = latency * rounds as u32;
            let share = batch.throttled as f64 / batch.requests.max(1) as f64;
            if variant == Variant::Defaults {
                defaults_share = defaults_share.max(share);
            }
            failed |= variant == Variant::Defaults && !batch.check.passed();
            table.row(vec![
                label.clone(),
                phase.into(),
                ms(batch.wall),
                ms(ideal),
                format!("{:.2}", batch.wall.as_secs_f64() / ideal.as_secs_f64()),
                count(batch.requests),
                format!("{} ({:.1} %)", count(batch.throttled), share * 100.0),
                batch.check.text(),
            ]);
            crate::all::record(crate::all::Row {
                workload: "throttled".into(),
                scenario: "loopback".into(),
                phase,
                method: label.clone(),
                wall: batch.wall,
                requests: batch.requests,
                bytes_sent: batch.bytes_sent,
                requested: workload.requested_bytes(),
                client_cpu: None,
                ideal: Some(ideal),
                failed: !batch.check.passed(),
            });
        }
    }
    table.print();
    crate::all::figure("throttled", "throttled_share", defaults_share);
    if failed {
        Err("Karu's defaults failed reads or delivered wrong bytes (see the check column)".into())
    } else {
        Ok(())
    }
}

/// One batch of every read of the workload on `client`.
fn one(
    server: &MockServer,
    client: &karu::Client,
    locator: &karu::Locator,
    workload: &Workload,
    code: u16,
) -> Batch {
    server.take_requests();
    let started = Instant::now();
    let batch = client.submit_with(
        workload
            .pieces
            .iter()
            .map(|p| Read::new(locator, p.offset, p.length)),
        &BatchOptions::new(),
    );
    let completions = batch.wait();
    let wall = started.elapsed();
    let transfers = batch.stats().transfers;
    let log = server.take_requests();
    let pieces = crate::methods::karu_results(completions);
    Batch {
        wall,
        transfers,
        requests: log.len() as u64,
        throttled: log.iter().filter(|r| r.status == code).count() as u64,
        bytes_sent: log.iter().map(|r| r.body_bytes).sum(),
        check: crate::run::verify(workload, &pieces),
    }
}

fn ms(d: Duration) -> String {
    format!("{:.1}", d.as_secs_f64() * 1000.0)
}
