//! `cargo xtask bench python`: fsspec's `cat_ranges` of the `scattered` workload (1,000 reads
//! of 4 KiB at uniform random offsets of a 1 GiB object, the same ranges as `karu-bench
//! scattered` for the same seed) through `karu.fsspec.KaruFileSystem`, fsspec's own
//! `HTTPFileSystem` (aiohttp) and obstore's `get_ranges`, against one mock server process
//! (`karu-testkit serve`, 20 ms of latency before every response, as the Rust benchmark's
//! default), in the same run (`karu-api/python/bench/scattered.py`); then the data stack's
//! workloads (`karu-api/python/bench/stack.py`): zarr arrays (chunked, sharded) through
//! `karu.zarr.ZarrStore`, zarr's `FsspecStore` over fsspec's HTTP and obstore's zarr store, and
//! a Parquet column through pyarrow with `KaruFileSystem`, fsspec's HTTP and obstore's fsspec,
//! against a mock of the same latency. `cargo xtask bench all` runs it after `karu-bench all`.
//!
//! Builds the wheel in release mode and the mock server in release mode (numbers from a debug
//! build mean nothing), and installs the peers (pinned) into the environment of `cargo xtask
//! python` only here: the test run never installs them.

use std::process::Command;

use crate::python::{self, Profile};
use crate::{cargo, target_dir, workspace_root};

/// The peers, pinned (PyPI): aiohttp for fsspec's HTTP filesystem, obstore.
const BENCH_TOOLS: [&str; 2] = ["aiohttp==3.14.5", "obstore==0.12.1"];
// zarr, pyarrow and the rest of the data stack come with the test tools (`python::TOOLS`).

/// The `scattered` workload's shape (`xtask/bench/src/workload.rs`): reads, read length,
/// object size.
const READS: usize = 1_000;
const LENGTH: u64 = 4 << 10;
const SIZE: u64 = 1 << 30;

const USAGE: &str = "usage: cargo xtask bench python [--runs N] [--seed S] [--latency-ms MS]";

pub(crate) fn run(args: &[String]) -> Result<(), String> {
    let mut runs = 5usize;
    let mut seed = 42u64;
    let mut latency_ms = 20u64;
    let mut args = args.iter();
    while let Some(flag) = args.next() {
        let value = args.next().ok_or(USAGE)?;
        match flag.as_str() {
            "--runs" => runs = value.parse().map_err(|_| USAGE)?,
            "--seed" => seed = value.parse().map_err(|_| USAGE)?,
            "--latency-ms" => latency_ms = value.parse().map_err(|_| USAGE)?,
            _ => return Err(USAGE.into()),
        }
    }
    if runs < 2 {
        return Err("--runs must be at least 2 (each figure is measured at least twice)".into());
    }
    let venv = python::build(Profile::Release)?;
    python::install(&venv, "karu-bench-tools.txt", &BENCH_TOOLS)?;
    let root = workspace_root();
    python::run(
        Command::new(cargo())
            .args([
                "build",
                "--quiet",
                "--release",
                "-p",
                "karu-testkit",
                "--bin",
                "karu-testkit",
            ])
            .current_dir(&root),
    )?;
    let offsets = offsets(seed);
    let dir = python::python_dir().join("bench");
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let workload = dir.join("scattered.txt");
    let text: String = offsets.iter().map(|o| format!("{o}\n")).collect();
    std::fs::write(&workload, text).map_err(|e| format!("{}: {e}", workload.display()))?;
    python::run(
        Command::new(python::python(&venv))
            .arg(root.join("karu-api/python/bench/scattered.py"))
            .arg("--testkit")
            .arg(target_dir().join("release").join("karu-testkit"))
            .arg("--offsets")
            .arg(&workload)
            .args(["--length", &LENGTH.to_string()])
            .args(["--size", &SIZE.to_string()])
            .args(["--runs", &runs.to_string()])
            .args(["--latency-ms", &latency_ms.to_string()])
            .args(["--seed", &seed.to_string()])
            .current_dir(&root),
    )?;
    python::run(
        Command::new(python::python(&venv))
            .arg(root.join("karu-api/python/bench/stack.py"))
            .arg("--testkit")
            .arg(target_dir().join("release").join("karu-testkit"))
            .args(["--runs", &runs.to_string()])
            .args(["--latency-ms", &latency_ms.to_string()])
            .current_dir(&root),
    )
}

/// The offsets of `karu-bench scattered` for `seed`: the same generator, called the same way
/// (`xtask/bench/src/workload.rs`, `scattered`).
fn offsets(seed: u64) -> Vec<u64> {
    let mut rng = fastrand::Rng::with_seed(seed);
    (0..READS).map(|_| rng.u64(0..=SIZE - LENGTH)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offsets_are_in_bounds_and_follow_the_seed() {
        let a = offsets(42);
        assert_eq!(a.len(), READS);
        assert!(a.iter().all(|&o| o + LENGTH <= SIZE));
        assert_eq!(a, offsets(42));
        assert_ne!(a, offsets(43));
    }
}
