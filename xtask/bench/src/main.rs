//! `karu-bench`: Karu's benchmarks, run by `cargo xtask bench <workload>` in release mode.
//!
//! Every method of a workload is measured in the same run against the same mock server
//! (`karu_testkit::MockServer`, virtual objects, 20 ms latency by default), following
//! `xtask/bench/README.md`: Karu with its defaults, object_store's `get_ranges` over its HTTP store, a
//! plain hyper client with as many requests in flight as Karu's concurrency limit (no
//! merging), and one request per read in sequence. Requests and bytes are counted from the
//! server's request log; Karu's own counters are printed beside them as a cross-check. Every
//! byte every method returns is checked against the pattern of the virtual objects.

mod all;
mod bill;
mod callgrind;
mod large;
mod local;
mod memory;
mod methods;
mod parquet_query;
mod planner;
mod report;
mod run;
mod tail;
mod throttled;
mod transport;
mod workload;

use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};

use crate::workload::Shape;

#[derive(Debug, Parser)]
#[command(
    name = "karu-bench",
    about = "Karu's benchmarks (see xtask/bench/README.md); build in release mode"
)]
struct Cli {
    #[command(subcommand)]
    workload: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Plan 1,000,000 random reads over 1,000 objects and print transfers, requested and
    /// fetched bytes, and planning time.
    Planner(planner::PlannerArgs),
    /// 1,000 × 4 KiB at uniform random offsets of a 1 GiB object (loopback).
    Scattered(Options),
    /// 10,000 × 4 KiB at uniform random offsets of a 1 GiB object (loopback and link).
    #[command(name = "scattered-10k")]
    Scattered10k(Options),
    /// 200 runs of 8 × 64 KiB reads, 4–64 KiB apart, in a 1 GiB object (loopback).
    Clustered(Options),
    /// 300 reads of 1–32 MiB (log-uniform) in 30 groups of 10 adjacent reads, in a 4 GiB
    /// object (loopback); CPU per GiB of every method, and of curl on the same ranges.
    Tensors(Options),
    /// 500 objects of 64 MiB, 5 × 64 KiB random reads in each (loopback).
    ManyObjects(Options),
    /// `read_ends(64 KiB, 64 KiB)` on 1,000 objects of 64 MiB (loopback).
    Ends(Options),
    /// The issue-3 default: `scattered`, on loopback and on the link model.
    Http(Options),
    /// Requests per second with no latency on loopback: 10,000 × 4 KiB, never merging; and
    /// instructions per request of Karu and plain hyper under callgrind (where installed).
    Cpu(CpuOptions),
    /// A local file in the page cache: scattered, adjacent and large reads, Karu against
    /// `pread` loops and object_store's LocalFileSystem.
    Local(local::LocalArgs),
    /// 10,000 × 4 KiB scattered reads against a server that throttles above 16 requests in
    /// flight: Karu's adaptive concurrency beside adaptation off and the limit set by hand.
    Throttled(throttled::ThrottledArgs),
    /// Peak RSS of a 1,000,000-read batch and of `tensors`, against the documented bounds.
    Memory(memory::MemoryArgs),
    /// A selective Parquet query (3 of 16 columns of 5 of 10 row groups of a 320 MiB file) on
    /// the mock (loopback and link): Karu's ParquetReader (with and without prefetch),
    /// ParquetObjectReader over KaruStore, over object_store's HTTP store and over OpenDAL's.
    Parquet(parquet_query::ParquetArgs),
    /// `scattered` and `scattered-10k` (never merged, and merged) against 20 ms of latency
    /// plus a heavy tail (2 % of requests + 1 s; a Pareto tail): Karu with hedging on and off,
    /// object_store and OpenDAL; p50/p99/max read completion, batch wall, requests, hedges.
    Tail(tail::TailArgs),
    /// One object read whole (64 MiB, 512 MiB, 2 GiB by default), each read in a process of
    /// its own: Karu's `Client::read_into` a caller buffer and `Client::read`, the `karu`
    /// command, Python's `read_into` and the C ABI into a caller buffer, a plain hyper client
    /// and curl; wall, CPU per GiB and peak RSS.
    Large(large::LargeArgs),
    /// One read of the `large` workload, run by `large` in a process of its own.
    #[command(name = "large-client", hide = true)]
    LargeClient(large::LargeClientArgs),
    /// The `cpu` workload's client alone, run by `cpu` under callgrind.
    #[command(name = "cpu-client", hide = true)]
    CpuClient(callgrind::ClientArgs),
    /// Every workload in one run, a summary of Karu against each peer, and a line per target.
    All(all::AllArgs),
}

/// Options shared by the workloads.
#[derive(Debug, Clone, Args)]
struct Options {
    /// Latency the server adds before every response's headers, in milliseconds.
    #[arg(long, default_value_t = 20)]
    latency_ms: u64,
    /// Bandwidth cap shared by all connections, in bytes per second, or `none`; replaces the
    /// workload's default scenarios (loopback and/or link at 125,000,000 B/s = 1 Gbit/s).
    #[arg(long, value_parser = parse_bandwidth)]
    bandwidth: Option<Bandwidth>,
    /// Steady batches per method after the cold one (the median is reported).
    #[arg(long, default_value_t = 3)]
    runs: usize,
    /// Seed of the random offsets (every method reads the same ranges).
    #[arg(long, default_value_t = 42)]
    seed: u64,
    /// Print every steady batch, not only the median.
    #[arg(long)]
    all_runs: bool,
    /// Skip object_store.
    #[arg(long)]
    no_object_store: bool,
    /// Skip OpenDAL.
    #[arg(long)]
    no_opendal: bool,
    /// Skip the plain client with Karu's concurrency in flight.
    #[arg(long)]
    no_plain: bool,
    /// Skip curl (measured on `tensors` only).
    #[arg(long)]
    no_curl: bool,
    /// Skip the one-request-per-read sequential client.
    #[arg(long, conflicts_with = "sequential")]
    no_sequential: bool,
    /// Run the sequential client even where it is estimated to take over 30 s.
    #[arg(long)]
    sequential: bool,
    /// Serve HTTPS (the mock's generated CA, trusted by every client); the plain hyper
    /// clients, cleartext HTTP/1.1 only, are left out.
    #[arg(long)]
    tls: bool,
    /// With `--tls`: offer HTTP/2 by ALPN (every client that can takes it).
    #[arg(long, requires = "tls")]
    http2: bool,
    /// Measure the peers first and Karu last (by default Karu goes first). The first method
    /// of a run is the first in the process to ask the kernel for memory and the first the
    /// mock server answers; its cold batch pays for both (most where fresh memory is slow to
    /// come by, as in a VM whose freed pages go back to the host), and this shows how much of
    /// a cold figure is the order.
    #[arg(long)]
    peers_first: bool,
}

/// Options of the `cpu` workload.
#[derive(Debug, Clone, Args)]
struct CpuOptions {
    /// Reads of 4 KiB per batch.
    #[arg(long, default_value_t = 10_000)]
    reads: usize,
    /// Steady batches per method after the cold one (the median is reported).
    #[arg(long, default_value_t = 5)]
    runs: usize,
    /// Seed of the random offsets.
    #[arg(long, default_value_t = 42)]
    seed: u64,
    /// Skip OpenDAL.
    #[arg(long)]
    no_opendal: bool,
    /// Skip the plain client with Karu's concurrency in flight.
    #[arg(long)]
    no_plain: bool,
    /// Measure the peers first and Karu last (see the read workloads' `--peers-first`).
    #[arg(long)]
    peers_first: bool,
    /// Skip counting instructions per request under callgrind.
    #[arg(long)]
    no_callgrind: bool,
}

/// A `--bandwidth` value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Bandwidth {
    /// No cap (loopback).
    None,
    /// Bytes per second.
    Capped(u64),
}

fn parse_bandwidth(s: &str) -> Result<Bandwidth, String> {
    if s.eq_ignore_ascii_case("none") {
        return Ok(Bandwidth::None);
    }
    match s.replace('_', "").parse::<u64>() {
        Ok(0) | Err(_) => Err(format!(
            "expected bytes per second (e.g. 125000000) or `none`, found {s:?}"
        )),
        Ok(n) => Ok(Bandwidth::Capped(n)),
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    if cfg!(debug_assertions) {
        eprintln!(
            "karu-bench: this is a debug build; its numbers mean nothing (use `cargo xtask bench`)"
        );
    }
    let result = match cli.workload {
        Command::Planner(args) => planner::run(&args),
        Command::Scattered(o) => run::reads(Shape::Scattered { reads: 1_000 }, &o, false),
        Command::Scattered10k(o) => run::reads(Shape::Scattered { reads: 10_000 }, &o, true),
        Command::Clustered(o) => run::reads(Shape::Clustered, &o, false),
        Command::Tensors(o) => run::reads(Shape::Tensors, &o, false),
        Command::ManyObjects(o) => run::reads(Shape::ManyObjects, &o, false),
        Command::Ends(o) => run::reads(Shape::Ends, &o, false),
        Command::Http(o) => run::reads(Shape::Scattered { reads: 1_000 }, &o, true),
        Command::Cpu(o) => run::cpu(&o),
        Command::Local(args) => local::run(&args),
        Command::Throttled(args) => throttled::run(&args),
        Command::Memory(args) => memory::run(&args),
        Command::Parquet(args) => parquet_query::run(&args),
        Command::Tail(args) => tail::run(&args),
        Command::CpuClient(args) => callgrind::client(&args),
        Command::Large(args) => large::run(&args),
        Command::LargeClient(args) => large::client(&args),
        Command::All(args) => all::run(&args, all::steps()),
    };
    transport::remove_ca_file();
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("karu-bench: {message}");
            ExitCode::FAILURE
        }
    }
}
