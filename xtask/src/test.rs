//! `cargo xtask test`: prerequisites, every test, then format and lint checks.

use std::process::Command;
use std::time::Instant;

use crate::{cargo, workspace_root};

pub(crate) fn run(lint: bool, extra: &[String]) -> Result<(), String> {
    let started = Instant::now();
    let root = workspace_root();
    let nextest = Command::new(cargo())
        .args(["nextest", "--version"])
        .output()
        .is_ok_and(|o| o.status.success());

    if nextest {
        let mut args = vec!["nextest", "run", "--workspace", "--no-fail-fast"];
        args.extend(extra.iter().map(String::as_str));
        step(&root, &args)?;
        if extra.is_empty() {
            // nextest does not run documentation tests.
            step(&root, &["test", "--workspace", "--doc"])?;
        }
    } else {
        let mut args = vec!["test", "--workspace", "--no-fail-fast"];
        args.extend(extra.iter().map(String::as_str));
        step(&root, &args)?;
    }
    if lint && extra.is_empty() {
        step(&root, &["fmt", "--all", "--", "--check"])?;
        step(
            &root,
            &[
                "clippy",
                "--workspace",
                "--all-targets",
                "--",
                "-D",
                "warnings",
            ],
        )?;
    }
    println!(
        "xtask test: all passed in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

fn step(root: &std::path::Path, args: &[&str]) -> Result<(), String> {
    println!("xtask test: cargo {}", args.join(" "));
    let status = Command::new(cargo())
        .args(args)
        .current_dir(root)
        .status()
        .map_err(|e| format!("cannot run cargo: {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("`cargo {}` failed ({status})", args.join(" ")))
    }
}
