//! `cargo xtask bench`: builds and runs `karu-bench` (`xtask/bench`) in release mode, passing
//! the arguments through; numbers from a debug build mean nothing. `bench parquet` and `bench
//! all` then run the DataFusion workload (`karu-bench-datafusion`, `xtask/bench-datafusion`: a
//! binary of its own, so that no other workload builds DataFusion), and `bench all` the Python
//! benchmark (`bench python`), whose target lines close the report.

use std::process::Command;

use crate::{cargo, workspace_root};

pub(crate) fn run(args: &[String]) -> Result<(), String> {
    if args.first().is_some_and(|a| a == "python") {
        return crate::python_bench::run(&args[1..]);
    }
    if args.first().is_some_and(|a| a == "large") {
        // `large` reads through the release `karu` command too, found beside karu-bench.
        let status = Command::new(cargo())
            .args(["build", "--release", "--package", "karu-cli"])
            .current_dir(workspace_root())
            .status()
            .map_err(|e| format!("cannot run cargo: {e}"))?;
        if !status.success() {
            return Err(format!("building the karu command failed ({status})"));
        }
    }
    let workload = args.first().map(String::as_str);
    // `--pushdown-filters` is the DataFusion workload's own option.
    let own: Vec<&String> = args.iter().filter(|a| *a != PUSHDOWN).collect();
    let mut command = Command::new(cargo());
    command
        .args(["run", "--release", "--package", "karu-bench", "--"])
        .args(own)
        .current_dir(workspace_root());
    let status = command
        .status()
        .map_err(|e| format!("cannot run cargo: {e}"))?;
    if !status.success() {
        return Err(format!("karu-bench failed ({status})"));
    }
    let help = args.iter().any(|a| a == "--help" || a == "-h");
    // `all --only LIST` runs the DataFusion workload when LIST names `parquet`.
    let only = args.iter().any(|a| a.starts_with("--only"));
    let parquet_chosen = !only || args.iter().any(|a| a.contains("parquet"));
    match workload {
        Some("parquet") if !help => datafusion(&args[1..])?,
        Some("all") if !help => {
            if parquet_chosen {
                datafusion(&[])?;
            }
            crate::python_bench::run(&[])?;
        }
        _ => {}
    }
    Ok(())
}

/// The DataFusion workload's option that `karu-bench parquet` does not take.
const PUSHDOWN: &str = "--pushdown-filters";

/// The DataFusion workload (`karu-bench-datafusion`, release build),
/// with `parquet`'s options.
fn datafusion(args: &[String]) -> Result<(), String> {
    let status = Command::new(cargo())
        .args([
            "run",
            "--release",
            "--package",
            "karu-bench-datafusion",
            "--",
        ])
        .args(args)
        .current_dir(workspace_root())
        .status()
        .map_err(|e| format!("cannot run cargo: {e}"))?;
    if !status.success() {
        return Err(format!("karu-bench-datafusion failed ({status})"));
    }
    Ok(())
}
