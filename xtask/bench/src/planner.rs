//! The planner benchmark: plan many random reads over many objects, no input or output.

use std::time::Instant;

use clap::Args;
use karu_engine::plan::{Limits, PlanRead, plan};

use crate::report::bytes;

/// Options of `karu-bench planner`.
#[derive(Debug, Clone, Args)]
pub(crate) struct PlannerArgs {
    /// Reads to plan.
    #[arg(long, default_value_t = 1_000_000)]
    pub(crate) reads: usize,
    /// Objects they spread over.
    #[arg(long, default_value_t = 1_000)]
    pub(crate) objects: u32,
    /// Size of each object.
    #[arg(long, default_value_t = 1 << 30)]
    pub(crate) object_size: u64,
    /// Seed of the random offsets.
    #[arg(long, default_value_t = 42)]
    pub(crate) seed: u64,
}

pub(crate) fn run(args: &PlannerArgs) -> Result<(), String> {
    let PlannerArgs {
        reads,
        objects,
        object_size,
        seed,
    } = *args;
    let mut rng = fastrand::Rng::with_seed(seed);
    let input: Vec<PlanRead> = (0..reads)
        .map(|_| {
            let length = rng.u64(1..=64 << 10);
            PlanRead {
                group: rng.u32(0..objects),
                mergeable: true,
                offset: rng.u64(0..object_size - length),
                length,
                window: None,
            }
        })
        .collect();
    let limits = Limits::default();
    println!(
        "planner: {reads} reads of 1 B..64 KiB, uniform over {objects} objects of {}; limits {limits:?}",
        bytes(object_size)
    );
    let mut best = f64::MAX;
    let mut last = None;
    for _ in 0..5 {
        let started = Instant::now();
        let p = plan(&input, &limits);
        best = best.min(started.elapsed().as_secs_f64());
        last = Some(p);
    }
    let p = last.ok_or("no plan")?;
    let requested = p.requested_bytes();
    let fetched = p.fetched_bytes();
    println!(
        "transfers {}  requested {}  fetched {}  fetched/requested {:.3}  planning {:.1} ms (best of 5, {:.0} ns/read)",
        p.transfers.len(),
        bytes(requested as u64),
        bytes(fetched as u64),
        fetched as f64 / requested as f64,
        best * 1000.0,
        best * 1e9 / reads as f64
    );
    crate::all::figure("planner", "plan_seconds", best * 1_000_000.0 / reads as f64);
    Ok(())
}
