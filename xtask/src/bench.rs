//! `cargo xtask bench`: builds and runs `karu-bench` (`xtask/bench`) in release mode, passing
//! the arguments through; numbers from a debug build mean nothing. `bench all` then runs the
//! Python benchmark (`bench python`), whose target lines close the report.

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
    let mut command = Command::new(cargo());
    command
        .args(["run", "--release", "--package", "karu-bench", "--"])
        .args(args)
        .current_dir(workspace_root());
    let status = command
        .status()
        .map_err(|e| format!("cannot run cargo: {e}"))?;
    if !status.success() {
        return Err(format!("karu-bench failed ({status})"));
    }
    if args.first().is_some_and(|a| a == "all") {
        crate::python_bench::run(&[])?;
    }
    Ok(())
}
