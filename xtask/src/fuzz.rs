//! `cargo xtask fuzz`: the fuzz targets (cargo-fuzz and libFuzzer, on the nightly toolchain),
//! and karu-engine's unit tests under AddressSanitizer.
//!
//! ```text
//! cargo xtask fuzz --list                   the targets, one a line
//! cargo xtask fuzz [TARGET] [--seconds N]   fuzz one target, or each in turn, for N s (60)
//! cargo xtask fuzz --asan                   karu-engine's unit tests under AddressSanitizer
//! ```
//!
//! The harness crate lives in `xtask/fuzz` (its own workspace, never a member of the main one,
//! since it builds only on nightly); it builds into `target/fuzz`, so the sanitizer build of
//! the dependencies is made once and reused. Each target starts from the seed corpus committed
//! in `xtask/fuzz/corpus/TARGET` and writes what it finds to `target/fuzz/corpus/TARGET`
//! (the committed seeds stay as they are). A failing input is saved to
//! `target/fuzz/artifacts/TARGET/`; rerun it with
//! `cargo +nightly fuzz run --fuzz-dir xtask/fuzz --target-dir target/fuzz TARGET FILE`, and
//! turn it into a unit test next to the code it broke.
//!
//! cargo-fuzz is installed (`cargo install cargo-fuzz --locked`) when missing. The targets
//! are plain functions in the workspace crate `karu-fuzz-targets` (`xtask/fuzz-targets`); the
//! harness binaries in `xtask/fuzz` are one line each. `cargo xtask test` does not build the
//! harness (a cold nightly build of the instrumented dependencies is long);
//! it runs `karu-fuzz-targets`' tests instead, which replay every target's committed corpus and
//! seeded mutations of it in the shared stable build, so that no target can rot.
//!
//! `--asan` runs `cargo +nightly test -p karu-engine --lib` with `-Zsanitizer=address` for
//! the target only (`--target x86_64-unknown-linux-gnu`, so build scripts and proc-macros are
//! not instrumented) into `target/asan`. The standard library is the prebuilt one (its source,
//! the `rust-src` component, cannot be fetched here, so `-Zbuild-std` is out); ASan still
//! checks every access Karu's code makes and replaces the allocator, which is what the
//! `unsafe` code needs.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use clap::Args;

use crate::{target_dir, workspace_root};

use karu_fuzz_targets::TARGETS;

#[derive(Debug, Args)]
pub(crate) struct Fuzz {
    /// The target to fuzz (all of them, one after another, if omitted).
    target: Option<String>,
    /// How long to fuzz each target.
    #[arg(long, default_value_t = 60, value_name = "N")]
    seconds: u64,
    /// Name the targets and what they check.
    #[arg(long, conflicts_with_all = ["target", "asan"])]
    list: bool,
    /// Run karu-engine's unit tests under AddressSanitizer instead.
    #[arg(long, conflicts_with = "target")]
    asan: bool,
}

pub(crate) fn run(args: Fuzz) -> Result<(), String> {
    if args.list {
        for target in &TARGETS {
            println!("{:<16}{}", target.name, target.checks);
        }
        return Ok(());
    }
    if args.asan {
        return asan();
    }
    let targets: Vec<&str> = match &args.target {
        Some(target) => {
            let known = karu_fuzz_targets::target(target);
            vec![
                known
                    .map(|t| t.name)
                    .ok_or_else(|| format!("no fuzz target {target:?} (`--list` names them)"))?,
            ]
        }
        None => TARGETS.iter().map(|t| t.name).collect(),
    };
    fuzz(&targets, args.seconds.max(1))
}

/// What one run of a target did.
struct Outcome {
    target: String,
    runs: u64,
    per_second: u64,
    coverage: u64,
    corpus: u64,
    failure: Option<String>,
}

fn fuzz(targets: &[&str], seconds: u64) -> Result<(), String> {
    require_nightly()?;
    install_cargo_fuzz()?;
    let root = workspace_root();
    let fuzz_dir = root.join("xtask").join("fuzz");
    let out = target_dir().join("fuzz");

    let started = Instant::now();
    let mut build = nightly(&root);
    build
        .args(["fuzz", "build"])
        .args(common_args(&fuzz_dir, &out));
    status(&mut build, "build the fuzz targets")?;
    println!(
        "xtask fuzz: built the targets in {:.1} s",
        started.elapsed().as_secs_f64()
    );

    let mut outcomes = Vec::new();
    for target in targets {
        outcomes.push(run_target(&root, &fuzz_dir, &out, target, seconds)?);
    }
    println!(
        "\n{:<16}{:>12}{:>10}{:>8}{:>8}  result",
        "target", "runs", "runs/s", "cov", "corpus"
    );
    for o in &outcomes {
        println!(
            "{:<16}{:>12}{:>10}{:>8}{:>8}  {}",
            o.target,
            o.runs,
            o.per_second,
            o.coverage,
            o.corpus,
            o.failure.as_deref().unwrap_or("ok")
        );
    }
    let failed: Vec<&str> = outcomes
        .iter()
        .filter(|o| o.failure.is_some())
        .map(|o| o.target.as_str())
        .collect();
    if failed.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "fuzz targets failed: {} (inputs saved under {})",
            failed.join(", "),
            out.join("artifacts").display()
        ))
    }
}

fn run_target(
    root: &Path,
    fuzz_dir: &Path,
    out: &Path,
    target: &str,
    seconds: u64,
) -> Result<Outcome, String> {
    let work = out.join("corpus").join(target);
    let seeds = fuzz_dir.join("corpus").join(target);
    let artifacts = out.join("artifacts").join(target);
    for dir in [&work, &artifacts] {
        std::fs::create_dir_all(dir)
            .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    }
    println!("xtask fuzz: {target} for {seconds} s");
    let mut run = nightly(root);
    run.args(["fuzz", "run"])
        .args(common_args(fuzz_dir, out))
        .arg(target)
        .arg(&work)
        .arg(&seeds)
        .arg("--")
        .arg(format!("-max_total_time={seconds}"))
        .arg(format!("-artifact_prefix={}/", artifacts.display()))
        .arg("-print_final_stats=1")
        .arg("-max_len=4096")
        .stdout(Stdio::inherit())
        .stderr(Stdio::piped());
    let output = run
        .output()
        .map_err(|e| format!("cannot run cargo fuzz: {e}"))?;
    let log = String::from_utf8_lossy(&output.stderr);
    let stat = |name: &str| -> u64 {
        log.lines()
            .rev()
            .find_map(|l| {
                l.strip_prefix(name)?
                    .trim()
                    .strip_prefix(':')?
                    .trim()
                    .parse()
                    .ok()
            })
            .unwrap_or(0)
    };
    // The last status line, `#N DONE cov: C ft: F corp: K/...`, has the coverage and corpus.
    let last_status = log
        .lines()
        .rev()
        .find(|l| l.contains(" cov: "))
        .unwrap_or("");
    let field = |name: &str| -> u64 {
        last_status
            .split_whitespace()
            .skip_while(|w| *w != name)
            .nth(1)
            .and_then(|v| v.split('/').next()?.parse().ok())
            .unwrap_or(0)
    };
    let failure = (!output.status.success()).then(|| {
        // Keep what libFuzzer and the panic said, for the report and the log.
        let tail: Vec<&str> = log
            .lines()
            .filter(|l| {
                l.contains("panicked at")
                    || l.contains("ERROR:")
                    || l.contains("Test unit written to")
                    || l.starts_with("SUMMARY")
            })
            .collect();
        eprintln!("{log}");
        format!("FAILED: {}", tail.join(" | "))
    });
    Ok(Outcome {
        target: target.to_string(),
        runs: stat("stat::number_of_executed_units"),
        per_second: stat("stat::average_exec_per_sec"),
        coverage: field("cov:"),
        corpus: field("corp:"),
        failure,
    })
}

/// The options every `cargo fuzz` call shares, so that one build serves them all: sixteen
/// codegen units (a faster build of the large dependency tree for a slightly slower run).
fn common_args(fuzz_dir: &Path, out: &Path) -> Vec<String> {
    vec![
        "--fuzz-dir".into(),
        fuzz_dir.display().to_string(),
        "--target-dir".into(),
        out.display().to_string(),
        "--codegen-units".into(),
        "16".into(),
    ]
}

/// `cargo +nightly` in `dir`, without what the stable cargo running xtask put into the
/// environment (its toolchain, its cargo, flags meant for the main build).
fn nightly(dir: &Path) -> Command {
    let mut command = Command::new("cargo");
    command.arg("+nightly").current_dir(dir);
    for var in [
        "RUSTUP_TOOLCHAIN",
        "CARGO",
        "RUSTC",
        "RUSTDOC",
        "RUSTFLAGS",
        "CARGO_ENCODED_RUSTFLAGS",
        "CARGO_TARGET_DIR",
        "CARGO_BUILD_TARGET",
    ] {
        command.env_remove(var);
    }
    command
}

fn require_nightly() -> Result<(), String> {
    let ok = nightly(&workspace_root())
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if ok {
        Ok(())
    } else {
        Err("the nightly toolchain is needed (`rustup toolchain install nightly`)".into())
    }
}

/// Install cargo-fuzz from crates.io if `cargo +nightly fuzz` does not run. Idempotent.
fn install_cargo_fuzz() -> Result<(), String> {
    let installed = nightly(&workspace_root())
        .args(["fuzz", "--version"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if installed {
        return Ok(());
    }
    println!("xtask fuzz: installing cargo-fuzz (cargo install cargo-fuzz --locked)");
    let mut install = Command::new("cargo");
    install.args(["install", "cargo-fuzz", "--locked"]);
    status(&mut install, "install cargo-fuzz")
}

/// karu-engine's unit tests under AddressSanitizer (see the module documentation).
fn asan() -> Result<(), String> {
    require_nightly()?;
    let root = workspace_root();
    let out: PathBuf = target_dir().join("asan");
    let host = "x86_64-unknown-linux-gnu";
    let mut test = nightly(&root);
    test.args(["test", "-p", "karu-engine", "--lib", "--target", host])
        .arg("--target-dir")
        .arg(&out)
        // The prebuilt standard library is not instrumented: allow linking it.
        .env(
            "RUSTFLAGS",
            "-Zsanitizer=address -Cunsafe-allow-abi-mismatch=sanitizer",
        )
        .env("ASAN_OPTIONS", "detect_leaks=1:abort_on_error=1");
    let started = Instant::now();
    status(
        &mut test,
        "run karu-engine's unit tests under AddressSanitizer",
    )?;
    println!(
        "xtask fuzz --asan: clean, in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

fn status(command: &mut Command, what: &str) -> Result<(), String> {
    let status = command
        .status()
        .map_err(|e| format!("cannot {what}: {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("cannot {what}: {status}"))
    }
}
