//! `cargo xtask miri`: the unit tests of the modules whose unsafe code runs without sockets,
//! under Miri (`cargo +nightly miri test`), which checks every access they make against
//! Rust's aliasing and validity rules: batch destinations and their lending to transfers
//! (`karu-engine`'s `batch::`) and to a split transfer's pieces on other loops
//! (`http::shared_landing::`), the room made present in buffers (`pages::`, whose system
//! calls are ignored under Miri), and the C ABI's argument checks and buffers handed to C
//! (`karu-ffi`'s `batch::`, `boundary::`, `completion::`). A stage of `cargo xtask test`.
//!
//! The nightly toolchain's `miri` and `rust-src` components are installed when missing
//! (`rustup component add`); the stage fails, saying why, when they cannot be. The
//! interpreted build lives in `target/miri`, apart from the main build.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Instant;

use crate::{target_dir, workspace_root};

/// Miri's flags for every run: parking_lot's word lock turns integers into pointers, which
/// Miri would warn about at every lock (its provenance is then tracked permissively).
const FLAGS: &str = "-Zmiri-permissive-provenance";

/// One interpreted test run: a package's library tests matching `filters`, less `skip`.
struct Run {
    package: &'static str,
    filters: &'static [&'static str],
    skip: &'static [&'static str],
    /// Flags beyond [`FLAGS`].
    flags: &'static str,
}

const RUNS: [Run; 3] = [
    Run {
        package: "karu-engine",
        filters: &["batch::", "pages::", "http::shared_landing::"],
        skip: &["inherited"],
        flags: "",
    },
    // The batches "inherited" through a fork leak on purpose, so Miri's leak check is off
    // for these alone: a batch submitted by another process (before a fork) is never freed
    // in this one. Its drop forgets its shared state and its engine (`Batch::drop`: a thread
    // that does not exist here may hold the state's lock, and the engine's threads are not
    // here to join), and the tests build one with its lock held forever
    // (`std::mem::forget` of the guard, as a child inherits it) and drop it.
    Run {
        package: "karu-engine",
        filters: &["inherited"],
        skip: &[],
        flags: "-Zmiri-ignore-leaks",
    },
    Run {
        package: "karu-ffi",
        filters: &["batch::", "boundary::", "completion::"],
        skip: &[],
        flags: "",
    },
];

pub(crate) fn run() -> Result<(), String> {
    install()?;
    let root = workspace_root();
    for run in &RUNS {
        interpret(&root, run)?;
    }
    Ok(())
}

fn interpret(root: &Path, run: &Run) -> Result<(), String> {
    let mut command = nightly(root);
    command
        .args(["miri", "test", "--lib", "-p", run.package, "--target-dir"])
        .arg(target_dir())
        .arg("--")
        .args(run.filters);
    for skip in run.skip {
        command.args(["--skip", skip]);
    }
    let flags = format!("{FLAGS} {}", run.flags);
    command.env("MIRIFLAGS", flags.trim());
    let shown = format!(
        "MIRIFLAGS=\"{}\" cargo +nightly miri test --lib -p {} -- {}{}",
        flags.trim(),
        run.package,
        run.filters.join(" "),
        run.skip
            .iter()
            .map(|s| format!(" --skip {s}"))
            .collect::<String>()
    );
    println!("xtask miri: {shown}");
    let started = Instant::now();
    let status = command
        .status()
        .map_err(|e| format!("cannot run cargo +nightly miri: {e}"))?;
    println!(
        "xtask miri: {} in {:.0} s",
        run.package,
        started.elapsed().as_secs_f64()
    );
    if status.success() {
        Ok(())
    } else {
        Err(format!("`{shown}` failed ({status})"))
    }
}

/// Install the nightly toolchain's `miri` and `rust-src` (which Miri builds its standard
/// library from) if `cargo +nightly miri` does not run, with the toolchain itself if it is
/// missing (an installed nightly is kept as it is, not updated); an error quoting rustup
/// when they cannot be installed. Idempotent.
fn install() -> Result<(), String> {
    let runs = |args: &[&str]| {
        nightly(&workspace_root())
            .args(args)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    };
    if runs(&["miri", "--version"]) {
        return Ok(());
    }
    let args: &[&str] = if runs(&["--version"]) {
        &[
            "component",
            "add",
            "--toolchain",
            "nightly",
            "miri",
            "rust-src",
        ]
    } else {
        &[
            "toolchain",
            "install",
            "nightly",
            "--profile",
            "minimal",
            "--component",
            "miri,rust-src",
        ]
    };
    let shown = format!("rustup {}", args.join(" "));
    println!("xtask miri: installing Miri ({shown})");
    let output = Command::new("rustup")
        .args(args)
        .output()
        .map_err(|e| format!("cannot run rustup to install Miri: {e}"))?;
    if output.status.success() && runs(&["miri", "--version"]) {
        Ok(())
    } else {
        Err(format!(
            "Miri is not installed and `{shown}` could not install it ({}): {}",
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        ))
    }
}

/// `cargo +nightly` in `dir`, without what the stable cargo running xtask put into the
/// environment (its toolchain, its cargo, flags meant for the main build).
pub(crate) fn nightly(dir: &Path) -> Command {
    let mut command = Command::new("cargo");
    command.arg("+nightly").current_dir(dir);
    for var in [
        "RUSTUP_TOOLCHAIN",
        "CARGO",
        "RUSTC",
        "RUSTDOC",
        "RUSTFLAGS",
        "CARGO_ENCODED_RUSTFLAGS",
        "CARGO_BUILD_TARGET",
    ] {
        command.env_remove(var);
    }
    command
}
