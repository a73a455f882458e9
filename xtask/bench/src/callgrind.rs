//! Instructions per request of the `cpu` workload, counted by valgrind's callgrind: an exact
//! figure later changes can be compared with, where requests per second drift with the load
//! of a shared machine by tens of percent.
//!
//! The client runs in a process of its own (`karu-bench cpu-client`, hidden) under callgrind,
//! against the `cpu` workload's mock server in this process, so the count is the client's
//! alone. Each method runs twice, with one batch and with two on the same client: the
//! difference is one steady batch, without the process's start, the client's set-up and the
//! first batch's connections. Divided by the requests the server saw for that batch.

use std::path::{Path, PathBuf};
use std::process::Command;

use clap::Args;
use karu::BatchOptions;

use crate::methods::{self, Context, Method, Server};
use crate::report::count;
use crate::run::{Bench, verify};
use crate::workload::{Shape, Workload};

/// Reads of the batches measured under callgrind (about 50 times slower than natively).
const READS: usize = 5_000;

/// Options of `karu-bench cpu-client` (run by `cpu` under callgrind).
#[derive(Debug, Clone, Args)]
pub(crate) struct ClientArgs {
    /// The mock server serving the `cpu` workload's object (`http://127.0.0.1:PORT`).
    #[arg(long)]
    server: String,
    /// `karu` or `plain`.
    #[arg(long)]
    method: String,
    /// Reads of 4 KiB per batch.
    #[arg(long)]
    reads: usize,
    /// Batches on the same client.
    #[arg(long)]
    batches: usize,
    /// Seed of the random offsets (the server's object is the same whatever the seed).
    #[arg(long)]
    seed: u64,
}

/// `karu-bench cpu-client`: `batches` batches of the `cpu` workload on one client of
/// `method`, every byte checked.
pub(crate) fn client(args: &ClientArgs) -> Result<(), String> {
    let mut workload = Workload::new(Shape::Scattered { reads: args.reads }, args.seed);
    workload.name = "cpu";
    let server = Server::at(&args.server)?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start a tokio runtime: {e}"))?;
    let concurrency = methods::karu_client()?.snapshot().global().concurrency;
    let method = match args.method.as_str() {
        "karu" => Method::Karu,
        "plain" => Method::Plain {
            in_flight: concurrency,
        },
        other => return Err(format!("unknown method {other:?} (karu or plain)")),
    };
    let ctx = Context {
        server: &server,
        workload: &workload,
        runtime: &runtime,
        concurrency,
        batch_options: BatchOptions::new().max_gap(0),
    };
    let mut session = methods::open(method, ctx)?;
    for _ in 0..args.batches {
        session.prepare();
        let outcome = session.run()?;
        let check = verify(&workload, &outcome.pieces);
        if !check.passed() {
            return Err(format!("{}: {}", method.label(), check.text()));
        }
    }
    Ok(())
}

/// Counts the instructions per request of Karu and plain hyper against `bench`'s server,
/// prints them and records them for `all`; says so and returns where valgrind is missing.
pub(crate) fn measure(bench: &Bench, seed: u64) -> Result<(), String> {
    let Some(valgrind) = find_valgrind() else {
        println!(
            "  callgrind: valgrind is not installed; instructions per request not measured \
             (`apt-get install valgrind`)"
        );
        return Ok(());
    };
    let exe = std::env::current_exe().map_err(|e| format!("cannot find karu-bench: {e}"))?;
    let base = bench.server.base_url();
    let mut figures = Vec::new();
    for (name, label) in [("karu", "Karu"), ("plain", "plain hyper")] {
        let mut counted = Vec::new();
        for batches in [1, 2] {
            bench.server.take_requests();
            let instructions = under_callgrind(&valgrind, &exe, &base, name, batches, seed)?;
            let requests = bench.server.take_requests().len() as u64;
            counted.push((instructions, requests));
        }
        let (one, two) = (counted[0], counted[1]);
        let requests = two.1.saturating_sub(one.1);
        if requests == 0 {
            return Err(format!(
                "callgrind: {label}'s second batch made no requests"
            ));
        }
        let per_request = two.0.saturating_sub(one.0) as f64 / requests as f64;
        crate::all::figure(
            "cpu",
            match name {
                "karu" => "karu_instructions_per_request",
                _ => "plain_instructions_per_request",
            },
            per_request,
        );
        figures.push((label, per_request, requests));
    }
    let plain = figures.last().map_or(1.0, |f| f.1);
    for (label, per_request, requests) in figures {
        println!(
            "  callgrind: {label} {} instructions per request (one steady batch of {} \
             requests; {:.2} × plain hyper)",
            count(per_request as u64),
            count(requests),
            per_request / plain.max(1.0)
        );
    }
    Ok(())
}

/// The total instructions (`Ir`) of `karu-bench cpu-client` under callgrind.
fn under_callgrind(
    valgrind: &Path,
    exe: &Path,
    server: &str,
    method: &str,
    batches: usize,
    seed: u64,
) -> Result<u64, String> {
    let out = std::env::temp_dir().join(format!(
        "karu-bench-callgrind-{}-{method}-{batches}.out",
        std::process::id()
    ));
    let output = Command::new(valgrind)
        .arg("--tool=callgrind")
        .arg(format!("--callgrind-out-file={}", out.display()))
        .arg(exe)
        .args(["cpu-client", "--server", server, "--method", method])
        .args(["--reads", &READS.to_string()])
        .args(["--batches", &batches.to_string()])
        .args(["--seed", &seed.to_string()])
        .output()
        .map_err(|e| format!("cannot run valgrind: {e}"))?;
    let text = std::fs::read_to_string(&out);
    let _ = std::fs::remove_file(&out);
    if !output.status.success() {
        return Err(format!(
            "callgrind run of {method} failed ({}): {}",
            output.status,
            String::from_utf8_lossy(&output.stderr)
                .lines()
                .rev()
                .take(5)
                .collect::<Vec<_>>()
                .join(" | ")
        ));
    }
    let text = text.map_err(|e| format!("callgrind wrote no profile: {e}"))?;
    totals(&text).ok_or_else(|| "callgrind's profile has no totals line".to_string())
}

/// The first event's total of a callgrind profile (`totals: N` or `summary: N`).
fn totals(profile: &str) -> Option<u64> {
    profile.lines().find_map(|line| {
        let rest = line
            .strip_prefix("totals:")
            .or_else(|| line.strip_prefix("summary:"))?;
        rest.split_whitespace().next()?.parse().ok()
    })
}

/// `valgrind` on the `PATH`.
fn find_valgrind() -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join("valgrind"))
        .find(|candidate| candidate.is_file())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_totals_of_a_profile() {
        let profile = "version: 1\ncreator: callgrind-3.19.0\nevents: Ir\nfl=(1) x\n1 5\n\
                       totals: 123456789\n";
        assert_eq!(totals(profile), Some(123_456_789));
        assert_eq!(totals("summary: 42\n"), Some(42));
        assert_eq!(totals("events: Ir\n"), None);
    }
}
