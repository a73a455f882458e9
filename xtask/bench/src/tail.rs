//! `karu-bench tail`: the `scattered` and `scattered-10k` reads (never merged, and merged)
//! against the mock's 20 ms of latency plus a heavy tail, in the same run: no tail, 2 % of the
//! requests one second slower, and 2 % of them slower by a Pareto draw (median 200 ms, p99
//! 2 s). Karu with its defaults (hedging on) and with hedging off, object_store and OpenDAL
//! (never merging: a `get_range` or read of each piece, as many at once as Karu's
//! concurrency; merged: `get_ranges` and `Reader::fetch`). Each method's batch wall, the p50,
//! p99 and max of its reads' completions (from the batch's start; a call that returns every
//! piece at once completes each at the wall), the requests the server saw and Karu's
//! duplicates.
//!
//! A batch finishes when its slowest read does: without hedging, one slow request in a
//! thousand sets the wall of the whole batch.

use std::time::Duration;

use clap::Args;
use karu::BatchOptions;
use karu_testkit::{Fault, FaultRule};

use crate::methods::{Method, OPENDAL_GAP};
use crate::report::{Align, Table, count};
use crate::run::{Bench, Measured, Phase, Run};
use crate::workload::{Shape, Workload};

/// The share of requests a tail slows down.
pub(crate) const SHARE: f64 = 0.02;
/// The fixed tail's extra wait.
const FIXED: Duration = Duration::from_secs(1);
/// The Pareto tail's median and 99th percentile.
const PARETO: (Duration, Duration) = (Duration::from_millis(200), Duration::from_secs(2));
/// Karu's default hedge budget, the bound of its duplicates.
pub(crate) const BUDGET: f64 = 0.05;

/// Options of `karu-bench tail`.
#[derive(Debug, Clone, Args)]
pub(crate) struct TailArgs {
    /// Steady batches per method of `scattered` after the cold one (the median is reported).
    #[arg(long, default_value_t = 3)]
    pub(crate) runs: usize,
    /// Steady batches per method of `scattered-10k` (each takes seconds).
    #[arg(long, default_value_t = 1)]
    pub(crate) runs_10k: usize,
    /// Latency of the server, in milliseconds (the tail comes on top).
    #[arg(long, default_value_t = 20)]
    pub(crate) latency_ms: u64,
    /// Seed of the random offsets and of the tails' draws.
    #[arg(long, default_value_t = 42)]
    pub(crate) seed: u64,
    /// Only `scattered` (1,000 reads), not `scattered-10k`.
    #[arg(long)]
    pub(crate) no_10k: bool,
}

/// A tail the mock adds to the latency.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Tail {
    None,
    /// [`SHARE`] of the requests wait [`FIXED`] more.
    Fixed,
    /// [`SHARE`] of the requests wait a Pareto draw of [`PARETO`] more.
    Pareto,
}

impl Tail {
    pub(crate) const ALL: [Tail; 3] = [Tail::None, Tail::Fixed, Tail::Pareto];

    /// The tail's name in tables and in `all`'s record.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Tail::None => "no tail",
            Tail::Fixed => "2 % + 1 s",
            Tail::Pareto => "2 % + Pareto (median 200 ms, p99 2 s)",
        }
    }

    /// The mock's fault rule of the tail (seeded), if any.
    fn rule(self, seed: u64) -> Option<FaultRule> {
        let fault = match self {
            Tail::None => return None,
            Tail::Fixed => Fault::Latency(FIXED),
            Tail::Pareto => Fault::ParetoLatency {
                median: PARETO.0,
                p99: PARETO.1,
            },
        };
        Some(FaultRule::new(fault).share(SHARE).seed(seed))
    }
}

/// Whether the reads are merged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Merging {
    Never,
    Merged,
}

impl Merging {
    fn name(self) -> &'static str {
        match self {
            Merging::Never => "never merged",
            Merging::Merged => "merged",
        }
    }

    fn options(self) -> BatchOptions {
        match self {
            Merging::Never => BatchOptions::new().max_gap(0),
            Merging::Merged => BatchOptions::new(),
        }
    }

    /// The peers, used as a caller who merges (or never does) would use them.
    fn peers(self) -> [Method; 2] {
        match self {
            Merging::Never => [Method::ObjectStoreEach, Method::OpenDalEach],
            Merging::Merged => [Method::ObjectStore, Method::OpenDal { gap: OPENDAL_GAP }],
        }
    }
}

/// The p50, p99 and max of a batch's read completions.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Quantiles {
    pub(crate) p50: Duration,
    pub(crate) p99: Duration,
    pub(crate) max: Duration,
}

impl Quantiles {
    /// Of `done`, or every one of `pieces` at `wall` when `done` is empty.
    pub(crate) fn of(done: &[Duration], pieces: usize, wall: Duration) -> Quantiles {
        let mut sorted: Vec<Duration> = if done.is_empty() {
            vec![wall; pieces.max(1)]
        } else {
            done.to_vec()
        };
        sorted.sort_unstable();
        // The smallest completion at or above the q-th percentile.
        let at = |q: usize| sorted[(sorted.len() * q).div_ceil(100).saturating_sub(1)];
        Quantiles {
            p50: at(50),
            p99: at(99),
            max: sorted[sorted.len() - 1],
        }
    }
}

/// `cargo xtask bench tail`.
pub(crate) fn run(args: &TailArgs) -> Result<(), String> {
    let latency = Duration::from_millis(args.latency_ms);
    let mut shapes = vec![(Shape::Scattered { reads: 1_000 }, args.runs)];
    if !args.no_10k {
        shapes.push((Shape::Scattered { reads: 10_000 }, args.runs_10k));
    }
    println!(
        "karu-bench tail: {} ms of latency plus a tail on {:.0} % of the requests (seeded): \
         none, + {} s, + a Pareto draw (median {} ms, p99 {} s, at most 10 × p99)",
        args.latency_ms,
        SHARE * 100.0,
        FIXED.as_secs(),
        PARETO.0.as_millis(),
        PARETO.1.as_secs()
    );
    println!(
        "Columns: wall and the reads' completions (p50, p99, max) from the batch's start; \
         vs no tail = wall / the same method's wall without the tail; requests from the \
         server's log; duplicates = Karu's hedges (the requests beyond one per transfer)."
    );
    let mut failed = false;
    for (shape, runs) in shapes {
        let workload = Workload::new(shape, args.seed);
        let bench = Bench::start(workload, latency)?;
        for merging in [Merging::Never, Merging::Merged] {
            let mut baseline: Vec<Measured> = Vec::new();
            for (n, tail) in Tail::ALL.into_iter().enumerate() {
                bench.server.clear_faults();
                if let Some(rule) = tail.rule(args.seed + n as u64) {
                    bench.server.add_fault(rule);
                }
                let mut methods = vec![Method::Karu, Method::KaruNoHedge];
                methods.extend(merging.peers());
                let all = bench.measure_all(
                    methods
                        .into_iter()
                        .map(|m| (m, runs, merging.options()))
                        .collect(),
                    1,
                )?;
                failed |= report(&bench, merging, tail, runs, &all, &baseline, latency);
                if tail == Tail::None {
                    baseline = all;
                }
            }
        }
        bench.server.clear_faults();
    }
    if failed {
        Err("some reads failed or delivered wrong bytes (see the check column)".into())
    } else {
        Ok(())
    }
}

/// The workload's name in `all`'s record: `tail scattered never merged`, ...
pub(crate) fn record_name(workload: &str, merging: &str) -> String {
    format!("tail {workload} {merging}")
}

/// Prints one scenario's table and records it; returns whether a piece failed its check.
fn report(
    bench: &Bench,
    merging: Merging,
    tail: Tail,
    runs: usize,
    all: &[Measured],
    baseline: &[Measured],
    latency: Duration,
) -> bool {
    let workload = &bench.workload;
    println!();
    println!(
        "== tail · {} · {} · {} ==",
        workload.name,
        merging.name(),
        tail.name()
    );
    let mut table = Table::new(&[
        ("method", Align::Left),
        ("wall ms", Align::Right),
        ("vs no tail", Align::Right),
        ("p50 ms", Align::Right),
        ("p99 ms", Align::Right),
        ("max ms", Align::Right),
        ("p99/p50", Align::Right),
        ("requests", Align::Right),
        ("duplicates", Align::Right),
        ("check", Align::Left),
    ]);
    let mut failed = false;
    let name = record_name(workload.name, merging.name());
    for phase in [Phase::Cold, Phase::Steady] {
        table.heading(match phase {
            Phase::Cold => "cold: the first batch on a new client".to_string(),
            Phase::Steady => format!("steady: later batches, median of {runs}"),
        });
        // The latency bound of the phase: latency × ⌈Karu's transfers / concurrency⌉, as
        // the read workloads' ideal (the tail comes on top).
        let ideal = all
            .iter()
            .find(|m| m.method == Method::Karu)
            .and_then(|m| m.pick(phase))
            .and_then(|run| run.karu)
            .and_then(|k| k.transfers)
            .map(|t| latency * t.div_ceil(bench.concurrency.max(1)) as u32);
        for m in all {
            let Some(run) = m.pick(phase) else { continue };
            failed |= !run.check.passed();
            let q = Quantiles::of(&run.done, workload.pieces.len(), run.wall);
            let base = baseline
                .iter()
                .find(|b| b.method == m.method)
                .and_then(|b| b.pick(phase));
            let hedges = run.karu.map(|k| k.hedges);
            table.row(vec![
                format!("  {}", m.method.label()),
                millis(run.wall),
                base.map_or("-".into(), |b| {
                    format!("{:.2}×", run.wall.as_secs_f64() / b.wall.as_secs_f64())
                }),
                millis(q.p50),
                millis(q.p99),
                millis(q.max),
                format!("{:.2}", q.p99.as_secs_f64() / q.p50.as_secs_f64()),
                count(run.requests),
                hedges.map_or("-".into(), count),
                run.check.text(),
            ]);
            crate::all::record_tail(crate::all::TailRow {
                workload: name.clone(),
                tail: tail.name(),
                phase: phase.name(),
                method: m.method.label(),
                wall: run.wall,
                quantiles: q,
                requests: run.requests,
                hedges,
                amplification: run.bytes_sent as f64 / workload.requested_bytes().max(1) as f64,
                failed: !run.check.passed(),
            });
            if m.method != Method::KaruNoHedge {
                record(&name, tail, phase, m.method, run, workload, ideal);
            }
        }
    }
    table.print();
    failed
}

/// The batch row of the summary of `all` (Karu's defaults and the peers).
fn record(
    name: &str,
    tail: Tail,
    phase: Phase,
    method: Method,
    run: &Run,
    workload: &Workload,
    ideal: Option<Duration>,
) {
    crate::all::record(crate::all::Row {
        workload: name.to_string(),
        scenario: tail.name().to_string(),
        phase: phase.name(),
        method: method.label(),
        wall: run.wall,
        requests: run.requests,
        bytes_sent: run.bytes_sent,
        requested: workload.requested_bytes(),
        client_cpu: None,
        ideal,
        failed: !run.check.passed(),
    });
}

fn millis(d: Duration) -> String {
    format!("{:.1}", d.as_secs_f64() * 1000.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn quantiles_of_completions_and_of_one_call() {
        let done: Vec<Duration> = (1..=100).map(|n| n * MS).collect();
        let q = Quantiles::of(&done, 100, 500 * MS);
        assert_eq!((q.p50, q.p99, q.max), (50 * MS, 99 * MS, 100 * MS));
        // A call that returns every piece at once: each completes at the wall.
        let q = Quantiles::of(&[], 1000, 300 * MS);
        assert_eq!((q.p50, q.p99, q.max), (300 * MS, 300 * MS, 300 * MS));
    }

    #[test]
    fn the_tails_are_two_percent_of_the_requests() {
        assert!(Tail::None.rule(1).is_none());
        for tail in [Tail::Fixed, Tail::Pareto] {
            assert!(tail.rule(1).is_some(), "{tail:?}");
        }
        const {
            assert!(
                SHARE < BUDGET,
                "the budget covers a duplicate of every slowed request"
            )
        };
    }
}
