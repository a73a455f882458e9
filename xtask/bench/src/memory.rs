//! `karu-bench memory`: Karu's peak resident memory for a batch of 1,000,000 small reads and
//! for the `tensors` workload, against the documented bounds (README, "Memory"):
//!
//! - per queued read: at most [`BOUND_PER_READ`] bytes of Karu's own (the plan, the read's
//!   part of its transfer, its completion and the queue), besides the bytes it delivers;
//! - for large reads: the bytes delivered plus at most concurrency × 8 MiB in flight (the
//!   part size) of Karu's own.
//!
//! Peak RSS is the kernel's high-water mark (`VmHWM`), reset before each batch
//! (`/proc/self/clear_refs`); the mock server runs in the same process, so its buffers count
//! too (they only make the figures larger).

use std::time::{Duration, Instant};

use clap::Args;
use karu::Read;
use karu_testkit::MockServer;

use crate::report::{bytes, count};
use crate::workload::{Shape, Workload};

/// The documented bound of Karu's own memory per queued read, in bytes.
pub(crate) const BOUND_PER_READ: u64 = 1536;
/// The part size the bound for large reads assumes.
const PART: u64 = 8 << 20;

/// Options of `karu-bench memory`.
#[derive(Debug, Clone, Args)]
pub(crate) struct MemoryArgs {
    /// Reads in the small-read batch.
    #[arg(long, default_value_t = 1_000_000)]
    pub(crate) reads: usize,
    /// Bytes per small read.
    #[arg(long, default_value_t = 16)]
    pub(crate) length: u64,
    /// Seed of the random offsets.
    #[arg(long, default_value_t = 42)]
    pub(crate) seed: u64,
    /// Skip the `tensors` batch.
    #[arg(long)]
    pub(crate) no_tensors: bool,
}

/// (VmRSS, VmHWM) of this process, in bytes.
fn rss() -> Result<(u64, u64), String> {
    let status = std::fs::read_to_string("/proc/self/status")
        .map_err(|e| format!("cannot read /proc/self/status: {e}"))?;
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
            .map(|kb| kb * 1024)
            .ok_or(format!("no {name} in /proc/self/status"))
    };
    Ok((field("VmRSS:")?, field("VmHWM:")?))
}

/// Resets the peak (VmHWM) to the current RSS.
fn reset_peak() -> Result<(), String> {
    std::fs::write("/proc/self/clear_refs", "5")
        .map_err(|e| format!("cannot reset the peak RSS (/proc/self/clear_refs): {e}"))
}

pub(crate) fn run(args: &MemoryArgs) -> Result<(), String> {
    let server = MockServer::builder()
        .start()
        .map_err(|e| format!("cannot start the mock server: {e}"))?;
    let client = crate::methods::karu_client()?;
    let concurrency = client.snapshot().global().concurrency as u64;

    // 1. Many small reads, queued at once.
    let size = 1u64 << 30;
    server.insert_virtual("/small.bin", size);
    let object = client
        .locate(&server.url("/small.bin"))
        .map_err(|e| e.to_string())?;
    let mut rng = fastrand::Rng::with_seed(args.seed);
    let reads: Vec<Read<'static>> = (0..args.reads)
        .map(|_| Read::new(&object, rng.u64(0..=size - args.length), args.length))
        .collect();
    let requested = args.reads as u64 * args.length;
    std::thread::sleep(Duration::from_millis(100));
    let (before, _) = rss()?;
    reset_peak()?;
    let started = Instant::now();
    let batch = client.submit(reads);
    let done = batch.wait();
    let wall = started.elapsed();
    let (_, peak) = rss()?;
    let failed = done.iter().filter(|c| !c.is_ok()).count();
    let stats = batch.stats();
    drop(done);
    drop(batch);
    let own = peak.saturating_sub(before).saturating_sub(requested);
    let per_read = own as f64 / args.reads as f64;
    println!(
        "memory: {} reads of {} B over one 1 GiB object: {} transfers, {:.0} ms; RSS before {} (the read list built), peak {}",
        count(args.reads as u64),
        args.length,
        count(stats.transfers as u64),
        wall.as_secs_f64() * 1000.0,
        bytes(before),
        bytes(peak),
    );
    println!(
        "  Karu's own: {} above the read list and the {} delivered = {:.0} B per queued read (bound {} B: {})",
        bytes(own),
        bytes(requested),
        per_read,
        BOUND_PER_READ,
        if per_read <= BOUND_PER_READ as f64 {
            "met"
        } else {
            "MISSED"
        }
    );
    crate::all::figure("memory", "rss_per_queued_read", per_read);
    crate::all::figure("memory", "bound_per_queued_read", BOUND_PER_READ as f64);
    if failed > 0 {
        return Err(format!("{failed} small reads failed"));
    }

    // 2. tensors: large adjacent reads into Karu-allocated buffers.
    if !args.no_tensors {
        let workload = Workload::new(Shape::Tensors, args.seed);
        for o in &workload.objects {
            server.insert_virtual(&o.path, o.size);
        }
        let locator = client
            .locate(&server.url(&workload.objects[0].path))
            .map_err(|e| e.to_string())?;
        let requested = workload.requested_bytes();
        std::thread::sleep(Duration::from_millis(100));
        let (before, _) = rss()?;
        reset_peak()?;
        let started = Instant::now();
        let batch = client.submit(
            workload
                .pieces
                .iter()
                .map(|p| Read::new(&locator, p.offset, p.length)),
        );
        let done = batch.wait();
        let wall = started.elapsed();
        let (_, peak) = rss()?;
        let failed = done.iter().filter(|c| !c.is_ok()).count();
        drop(done);
        let grown = peak.saturating_sub(before);
        let bound = requested + concurrency * PART;
        println!(
            "memory: tensors ({} reads, {} requested): {:.0} ms; peak RSS {} above before = the reads' {} + {} of Karu's own (bound: the bytes + concurrency {} × {} = {}: {})",
            count(workload.pieces.len() as u64),
            bytes(requested),
            wall.as_secs_f64() * 1000.0,
            bytes(grown),
            bytes(requested),
            bytes(grown.saturating_sub(requested)),
            concurrency,
            bytes(PART),
            bytes(bound),
            if grown <= bound { "met" } else { "MISSED" }
        );
        crate::all::figure("memory", "tensors_peak_rss", grown as f64);
        crate::all::figure("memory", "tensors_bound", bound as f64);
        if failed > 0 {
            return Err(format!("{failed} tensor reads failed"));
        }
    }
    Ok(())
}
