//! `cargo xtask`: the project's tasks. `demo` runs the main job, `test` every test, `bench`
//! the benchmarks, `conformance` the provider suite, `fuzz` the fuzz targets, `header` the C
//! ABI's header, `install` the C ABI's libraries, headers and package files.

mod abi;
mod align;
mod bench;
mod conformance;
mod demo;
mod features;
mod fuzz;
mod header;
mod install;
mod install_check;
mod layers;
mod miri;
mod package;
mod public_api;
mod python;
mod python_bench;
mod sdk;
mod table;
mod test;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[derive(Debug, Parser)]
#[command(name = "cargo xtask", about = "Karu's project tasks")]
struct Cli {
    #[command(subcommand)]
    task: Task,
}

#[derive(Debug, Subcommand)]
enum Task {
    /// Read scattered ranges (windowed, overlapping and invalid ones included) from a local
    /// file and from a mock HTTP server with 20 ms of latency, check every byte, and print
    /// what happened to the reads and to each batch.
    Demo,
    /// Check the C header is current, install what the tests need, then build and run every
    /// test of the workspace (nextest if present, else cargo test; the C and C++ programs of
    /// the C ABI under AddressSanitizer among them), then the C ABI installed into a temporary
    /// prefix and built against with pkg-config and CMake (its symbols and header checked
    /// against the C ABI's baseline), the Python wheel and its tests, `cargo publish
    /// --workspace --dry-run`, the provider-feature builds, format and lint checks. Every fuzz target replays its corpus
    /// in the test run (`karu-fuzz-targets`).
    Test {
        /// Skip the provider-feature builds, `cargo fmt --check` and `cargo clippy`.
        #[arg(long)]
        no_lint: bool,
        /// Extra arguments for the test runner (e.g. `-p karu-engine plan`).
        #[arg(last = true)]
        args: Vec<String>,
    },
    /// Print karu-engine's module graph and check its layers (no import cycle; `sdk` at the
    /// bottom, the pure cores above it, the runtime on top), that provider crates use only
    /// the SDK (`karu_engine::sdk`), that the faces of `karu-api/` reach the engine only
    /// through `karu`, and that nothing outside the engine names a hidden item of it.
    Layers {
        /// Print and check the graph of this `karu-engine/src` instead (another checkout's,
        /// e.g. `git archive main karu-engine/src | tar -x -C /tmp/main`), alone.
        #[arg(long, value_name = "DIR")]
        engine_src: Option<PathBuf>,
    },
    /// Run the unit tests of the modules whose unsafe code runs without sockets (batch
    /// destinations, pages, the C ABI's argument checks) under Miri, installing the nightly
    /// toolchain's `miri` component if missing.
    Miri,
    /// Check that every type of Karu's crates that `karu` hands out (in a signature of an item
    /// it exports) is named by `karu`: re-exported, or hidden. Reads rustdoc's JSON, so it
    /// needs the nightly toolchain (`rustup toolchain install nightly`).
    PublicApi,
    /// Build the Python wheel (karu-api/python) with maturin (from PyPI, in a virtual
    /// environment of the newest CPython >= 3.12 under target/python/venv) and install it
    /// there; `--test` also runs the pytest suite against the testkit's mock server (on the
    /// newest stack, then on the oldest versions Karu declares), `--ray` the Ray Data module
    /// on a local Ray cluster.
    Python {
        /// Run the pytest suite after installing.
        #[arg(long)]
        test: bool,
        /// Run the Ray Data module (tests/test_ray.py) after installing.
        #[arg(long)]
        ray: bool,
        /// Extra arguments for pytest (with `--test`).
        #[arg(last = true)]
        args: Vec<String>,
    },
    /// Build the C ABI in release mode and install it for C and C++ projects: LIBDIR/libkaru.so
    /// (SONAME libkaru.so.0, with its links), LIBDIR/libkaru.a, include/karu.h and karu.hpp,
    /// LIBDIR/pkgconfig/karu.pc and a CMake package (`find_package(karu)`: karu::karu,
    /// karu::karu_static), both finding the prefix relative to themselves; the libraries
    /// stripped of debug information. LIBDIR is `lib` unless `--libdir` says otherwise;
    /// `DESTDIR` is honoured.
    Install(install::Args),
    /// Compare the C ABI (the declarations of karu.h and the symbols libkaru.so exports) with
    /// its committed baseline, karu-api/ffi/abi/ (`cargo xtask test` does too); `--bless`
    /// rewrites the baseline, for a change of the C ABI that is meant (say it in CHANGELOG.md).
    Abi {
        /// Rewrite the baseline from the header and a build of the library.
        #[arg(long)]
        bless: bool,
    },
    /// Generate the C ABI's header, karu-api/ffi/include/karu.h, from the FFI crate with the
    /// pinned cbindgen (`test` fails when the committed one is stale).
    Header,
    /// Check that every build of `cargo xtask test` (xtask itself, the documentation tests, the
    /// C library, the mock server, the DataFusion example, the wheel) compiles nothing the test
    /// build did not: cargo's unit graphs (nightly) compared unit by unit.
    Align,
    /// Check that `karu` builds with no provider feature and with each one alone, and that
    /// only the `s3` and `source` features bring AWS SDK crates.
    Features,
    /// Run the provider-agnostic conformance suite: against each provider's mock server (the
    /// fault matrix included), real servers started here (`--real`), or a real endpoint.
    Conformance(Box<conformance::Conformance>),
    /// Fuzz the parsers, the response check, address resolution, the config loader and the
    /// planner (cargo-fuzz on the nightly toolchain), or run karu-engine's unit tests under
    /// AddressSanitizer (`--asan`); `--list` names the targets.
    Fuzz(fuzz::Fuzz),
    /// Build `karu-bench` in release mode and run a benchmark: `planner`, `scattered`,
    /// `scattered-10k`, `clustered`, `tensors`, `many-objects`, `ends`, `http`, `cpu`
    /// (`cargo xtask bench --help` lists them and their options).
    #[command(disable_help_flag = true)]
    Bench {
        /// The workload and its options, passed to `karu-bench`.
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.task {
        Task::Demo => demo::run(),
        Task::Test { no_lint, args } => test::run(!no_lint, &args),
        Task::Features => features::check(&workspace_root()),
        Task::Align => align::run(),
        Task::Layers { engine_src } => layers::run(&workspace_root(), engine_src.as_deref()),
        Task::Python { test, ray, args } => {
            if test {
                python::test(&args)
                    .and_then(|()| if ray { python::test_ray(false) } else { Ok(()) })
            } else if ray {
                python::test_ray(true)
            } else {
                python::build(python::Profile::Debug).map(drop)
            }
        }
        Task::Header => header::write(&workspace_root()),
        Task::Abi { bless } => abi::run(&workspace_root(), bless),
        Task::PublicApi => public_api::run(),
        Task::Miri => miri::run(),
        Task::Install(args) => install::run(args),
        Task::Bench { args } => bench::run(&args),
        Task::Conformance(args) => conformance::run(*args),
        Task::Fuzz(args) => fuzz::run(args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("xtask: {message}");
            ExitCode::FAILURE
        }
    }
}

/// The workspace root (the parent of this crate's directory).
fn workspace_root() -> PathBuf {
    let manifest = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    manifest.parent().map(PathBuf::from).unwrap_or(manifest)
}

/// The cargo target directory the build uses.
fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace_root().join("target"))
}

/// The cargo binary running us.
fn cargo() -> String {
    std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_string())
}

/// FNV-1a, as `karu-api/ffi/examples/read_ranges.c` computes it.
fn fnv1a(data: &[u8]) -> u64 {
    data.iter().fold(0xcbf2_9ce4_8422_2325, |hash, &byte| {
        (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// Human-readable bytes.
fn bytes(n: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut value = n as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit < UNITS.len() - 1 {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{n} B")
    } else {
        format!("{value:.1} {}", UNITS[unit])
    }
}

/// An integer with thousands separators: `1,000`.
fn count(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}
