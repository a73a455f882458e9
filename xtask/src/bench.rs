//! `cargo xtask bench`: builds and runs `karu-bench` (`xtask/bench`) in release mode, passing
//! the arguments through; numbers from a debug build mean nothing. `bench parquet` and `bench
//! all` then run the DataFusion workload (`karu-bench-datafusion`, `xtask/bench-datafusion`: a
//! binary of its own, so that no other workload builds DataFusion), and `bench all` the Python
//! benchmark (`bench python`), whose target lines close the report.

use std::process::Command;

use crate::python::Profile;
use crate::{cargo, target_dir, workspace_root};

pub(crate) fn run(args: &[String]) -> Result<(), String> {
    if args.first().is_some_and(|a| a == "python") {
        return crate::python_bench::run(&args[1..]);
    }
    let workload = args.first().map(String::as_str);
    // `--pushdown-filters` is the DataFusion workload's own option.
    let own: Vec<&String> = args.iter().filter(|a| *a != PUSHDOWN).collect();
    let help = args.iter().any(|a| a == "--help" || a == "-h");
    let mut command = if workload == Some("large") && !help {
        let mut command = Command::new(target_dir().join("release").join("karu-bench"));
        command.args(own).args(large_faces(args)?);
        command
    } else {
        let mut command = Command::new(cargo());
        command
            .args(["run", "--release", "--package", "karu-bench", "--"])
            .args(own);
        command
    };
    command.current_dir(workspace_root());
    let status = command
        .status()
        .map_err(|e| format!("cannot run cargo: {e}"))?;
    if !status.success() {
        return Err(format!("karu-bench failed ({status})"));
    }
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

/// What `large` reads through, built in release mode: karu-bench with the `karu` command and
/// the C library beside it (one build of the three, so their dependencies are built once;
/// karu-bench builds its C program against the library), and the wheel in the Python
/// environment, whose interpreter is passed as `--python` (or, when it cannot be built,
/// `--python-unavailable` with the reason, which the Python rows then show). Returns the
/// options to add to `large`'s.
fn large_faces(args: &[String]) -> Result<Vec<String>, String> {
    let status = Command::new(cargo())
        .args([
            "build",
            "--release",
            "--package",
            "karu-bench",
            "--package",
            "karu-cli",
            "--package",
            "karu-ffi",
        ])
        .current_dir(workspace_root())
        .status()
        .map_err(|e| format!("cannot run cargo: {e}"))?;
    if !status.success() {
        return Err(format!(
            "building karu-bench, the karu command and the C library failed ({status})"
        ));
    }
    if args.iter().any(|a| a.starts_with("--python")) {
        return Ok(Vec::new());
    }
    Ok(match crate::python::build(Profile::Release) {
        Ok(venv) => vec![
            "--python".into(),
            crate::python::python(&venv).display().to_string(),
        ],
        Err(why) => {
            println!("xtask bench large: the Python face is not measured: {why}");
            vec!["--python-unavailable".into(), why]
        }
    })
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
