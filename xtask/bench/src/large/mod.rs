//! The `large` workload: one object read whole, at several sizes up to 2 GiB, by each face of
//! Karu and by curl and a plain hyper client, each in a process of its own, so that its wall,
//! CPU time and peak RSS are its own.
//!
//! The mock server (virtual objects, no latency by default) runs in this process; every client
//! runs as a child: `karu-bench large-client` for the methods in Rust (Karu's
//! `Client::read_into` into a caller buffer, `Client::read` into Karu's own, plain hyper
//! copying one response into a caller buffer; see [`child`]), Python's `read_into` and the C
//! ABI into a caller buffer (see [`faces`]), the release `karu` command writing to `/dev/null`
//! where it is built, and curl. Caller buffers are measured twice: fresh (never written: the
//! read faults their pages in) and touched (written before the read). A child that reads
//! into a buffer times its read itself and reports the CPU time and peak RSS of its process
//! at the end of the read ([`process::REPORT`]), once it has checked every byte against the
//! pattern; curl and the `karu` command are timed by their own exit (their process is the
//! read) and their CPU and peak RSS come from `wait4`. A face whose program cannot be built
//! or run here has rows saying why.

mod child;
mod faces;
mod process;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use clap::Args;
use karu_testkit::MockServer;

pub(crate) use child::{LargeClientArgs, client};
pub(crate) use process::wait_with_usage;

use self::child::Buffer;
use self::process::{Sample, parse_report};
use crate::report::{Align, Table, bytes, count};

/// Options of `karu-bench large`.
#[derive(Debug, Clone, Args)]
pub(crate) struct LargeArgs {
    /// Object sizes in MiB.
    #[arg(long, value_delimiter = ',', default_values_t = [64u64, 512, 2048])]
    sizes_mib: Vec<u64>,
    /// Runs per method and size, in rounds (the order of the methods reversed every other
    /// round); the best and the median are reported.
    #[arg(long, default_value_t = 3)]
    runs: usize,
    /// Latency the server adds before every response's headers, in milliseconds.
    #[arg(long, default_value_t = 0)]
    latency_ms: u64,
    /// Skip curl.
    #[arg(long)]
    no_curl: bool,
    /// The Python interpreter of the Python face: one whose environment holds the release
    /// `karu` wheel and NumPy (`cargo xtask bench large` builds them into target/python/venv
    /// and passes it).
    #[arg(long)]
    python: Option<PathBuf>,
    /// Why there is no interpreter for the Python face (passed by `cargo xtask bench large`
    /// when the wheel cannot be built: no CPython, ...); its rows say so.
    #[arg(long, conflicts_with = "python")]
    python_unavailable: Option<String>,
}

/// A way to read the object, each in a process of its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Way {
    KaruInto(Buffer),
    KaruRead,
    Cli,
    Plain(Buffer),
    Python(Buffer),
    C(Buffer),
    Curl,
}

impl Way {
    fn label(self) -> String {
        match self {
            Way::KaruInto(b) => format!("Karu Client::read_into, {} buffer", b.name()),
            Way::KaruRead => "Karu Client::read, Karu's buffer".into(),
            Way::Cli => "karu read (CLI) > /dev/null".into(),
            Way::Plain(b) => format!("plain hyper, one request, {} buffer", b.name()),
            Way::Python(Buffer::Fresh) => "Python read_into, fresh numpy.empty".into(),
            Way::Python(Buffer::Touched) => "Python read_into, touched bytearray".into(),
            Way::C(b) => format!("C ABI karu_client_submit, {} buffer", b.name()),
            Way::Curl => "curl -o /dev/null".into(),
        }
    }

    /// Whether the read lands in a buffer of the object's size (its RSS holds the object).
    fn holds_the_object(self) -> bool {
        !matches!(self, Way::Cli | Way::Curl)
    }

    /// Whether the child reports its own read ([`process::REPORT`]) rather than being timed
    /// by its process.
    fn reports(self) -> bool {
        self.holds_the_object()
    }
}

/// The programs the ways run.
struct Programs {
    /// karu-bench itself (`large-client`).
    bench: PathBuf,
    /// The release `karu` command.
    cli: PathBuf,
    /// The Python interpreter with the release wheel.
    python: Option<PathBuf>,
    /// The C program.
    c: Option<PathBuf>,
}

/// `karu-bench large`.
pub(crate) fn run(args: &LargeArgs) -> Result<(), String> {
    let server = MockServer::builder()
        .latency(Duration::from_millis(args.latency_ms))
        .start()
        .map_err(|e| format!("cannot start the mock server: {e}"))?;
    let exe = std::env::current_exe().map_err(|e| format!("cannot find karu-bench: {e}"))?;
    let dir = exe
        .parent()
        .ok_or("karu-bench has no directory")?
        .to_path_buf();
    let both = [Buffer::Fresh, Buffer::Touched];
    let mut ways: Vec<Way> = both.iter().map(|&b| Way::KaruInto(b)).collect();
    ways.push(Way::KaruRead);
    // Faces that cannot run here: their label and why.
    let mut missing: Vec<(String, String)> = Vec::new();
    let cli = dir.join("karu");
    if cli.is_file() {
        ways.push(Way::Cli);
    } else {
        missing.push((
            Way::Cli.label(),
            format!(
                "the karu command is not built beside karu-bench ({}): `cargo build --release \
                 -p karu-cli` (`cargo xtask bench large` does)",
                cli.display()
            ),
        ));
    }
    let python = faces::python(args.python.as_deref(), args.python_unavailable.as_deref());
    match &python {
        Ok(_) => ways.extend(both.iter().map(|&b| Way::Python(b))),
        Err(why) => missing.push(("Python read_into".into(), why.clone())),
    }
    let c = faces::c_program(&dir);
    match &c {
        Ok(_) => ways.extend(both.iter().map(|&b| Way::C(b))),
        Err(why) => missing.push(("C ABI karu_client_submit".into(), why.clone())),
    }
    ways.extend(both.iter().map(|&b| Way::Plain(b)));
    if !args.no_curl {
        if find("curl").is_some() {
            ways.push(Way::Curl);
        } else {
            missing.push((Way::Curl.label(), "curl is not installed".into()));
        }
    }
    let programs = Programs {
        bench: exe,
        cli,
        python: python.ok(),
        c: c.ok(),
    };
    println!(
        "karu-bench large: one object read whole, {} MiB; latency {} ms; {} runs each, in \
         rounds; each read in a process of its own",
        args.sizes_mib
            .iter()
            .map(u64::to_string)
            .collect::<Vec<_>>()
            .join(", "),
        args.latency_ms,
        args.runs
    );
    for (label, why) in &missing {
        println!("  {label}: not measured: {why}");
    }
    println!(
        "Columns: wall (best and median of the runs: the read alone for the clients that read \
         into a buffer, the process for curl and the karu command), client CPU (user + system, \
         the median run), CPU per GiB, peak RSS of the process, and above the object for the \
         clients that hold it in one buffer. A fresh buffer is allocated and never written \
         before the read (its pages fault in as the bytes land); a touched one has had every \
         page written."
    );
    let mut table = Table::new(&[
        ("size · method", Align::Left),
        ("best ms", Align::Right),
        ("median ms", Align::Right),
        ("vs curl", Align::Right),
        ("CPU ms", Align::Right),
        ("CPU s/GiB", Align::Right),
        ("peak RSS", Align::Right),
        ("above object", Align::Right),
    ]);
    let mut failures = Vec::new();
    for &mib in &args.sizes_mib {
        let size = mib << 20;
        let path = format!("/large-{mib}MiB.bin");
        server.insert_virtual(&path, size);
        let url = format!("{}{path}", server.base_url());
        let mut samples: Vec<Vec<Sample>> = vec![Vec::new(); ways.len()];
        for round in 0..args.runs.max(1) {
            let mut order: Vec<usize> = (0..ways.len()).collect();
            if round % 2 == 1 {
                order.reverse();
            }
            for i in order {
                match read_once(ways[i], &programs, &url, size) {
                    Ok(sample) => samples[i].push(sample),
                    Err(message) => {
                        failures.push(format!("{mib} MiB, {}: {message}", ways[i].label()))
                    }
                }
            }
        }
        let median = |s: &[Sample]| -> Option<Sample> {
            let mut sorted = s.to_vec();
            sorted.sort_by_key(|x| x.wall);
            sorted.get(sorted.len() / 2).copied()
        };
        let curl = ways
            .iter()
            .position(|w| *w == Way::Curl)
            .and_then(|i| median(&samples[i]));
        table.heading(format!("{} ({})", bytes(size), count(size)));
        for (way, runs) in ways.iter().zip(&samples) {
            let Some(m) = median(runs) else {
                table.row(vec![format!("  {}", way.label()), "FAILED".into()]);
                continue;
            };
            let best = runs.iter().map(|s| s.wall).min().unwrap_or(m.wall);
            let gib = size as f64 / f64::from(1u32 << 30);
            let above = if way.holds_the_object() {
                bytes(m.peak_rss.saturating_sub(size))
            } else {
                "—".into()
            };
            table.row(vec![
                format!("  {}", way.label()),
                format!("{:.1}", best.as_secs_f64() * 1000.0),
                format!("{:.1}", m.wall.as_secs_f64() * 1000.0),
                curl.map_or_else(String::new, |c| {
                    format!("{:.2}", m.wall.as_secs_f64() / c.wall.as_secs_f64())
                }),
                format!("{:.0}", m.cpu.as_secs_f64() * 1000.0),
                format!("{:.3}", m.cpu.as_secs_f64() / gib),
                bytes(m.peak_rss),
                above,
            ]);
        }
        for (label, _) in &missing {
            table.row(vec![format!("  {label}"), "not measured".into()]);
        }
    }
    table.print();
    println!(
        "  vs curl = median wall / curl's median wall (< 1: faster than curl). Targets (issue \
         61): a 2 GiB read at curl's wall or better in every face, peak RSS at most 256 MiB \
         above what the caller's buffer holds."
    );
    for (label, why) in &missing {
        println!("  {label}: not measured: {why}");
    }
    if failures.is_empty() {
        Ok(())
    } else {
        for f in &failures {
            println!("  FAILED: {f}");
        }
        Err(format!("{} reads failed", failures.len()))
    }
}

/// The command that reads `url` (`size` bytes) by `way`, in a process of its own.
fn command(way: Way, programs: &Programs, url: &str, size: u64) -> Command {
    let size_arg = size.to_string();
    match way {
        Way::KaruInto(_) | Way::KaruRead | Way::Plain(_) => {
            let (method, buffer) = match way {
                Way::KaruInto(b) => ("karu-into", b),
                Way::Plain(b) => ("plain", b),
                _ => ("karu-read", Buffer::Fresh),
            };
            let mut c = Command::new(&programs.bench);
            c.args(["large-client", "--url", url, "--size", &size_arg])
                .args(["--method", method, "--buffer", buffer.name()]);
            c
        }
        Way::Python(buffer) => {
            // `Way::Python` is only chosen with an interpreter.
            let python = programs.python.as_deref().unwrap_or(Path::new("python3"));
            let mut c = Command::new(python);
            c.arg(faces::python_script())
                .args(["--url", url, "--size", &size_arg])
                .args(["--buffer", buffer.name()]);
            c
        }
        Way::C(buffer) => {
            let program = programs.c.as_deref().unwrap_or(Path::new("large_read"));
            let mut c = Command::new(program);
            c.args([url, &size_arg, buffer.name()]);
            c
        }
        Way::Cli => {
            let mut c = Command::new(&programs.cli);
            c.args(["read", url, "0:"]);
            c
        }
        Way::Curl => {
            let mut c = Command::new("curl");
            c.args([
                "-s",
                "-S",
                "-f",
                "-o",
                "/dev/null",
                "-w",
                "%{size_download}",
                url,
            ]);
            c
        }
    }
}

/// One read of `url` by `way` in a child process.
fn read_once(way: Way, programs: &Programs, url: &str, size: u64) -> Result<Sample, String> {
    let mut command = command(way, programs, url, size);
    command.stdin(Stdio::null()).stderr(Stdio::piped());
    if way == Way::Cli {
        command.stdout(Stdio::null());
    } else {
        command.stdout(Stdio::piped());
    }
    let started = Instant::now();
    let child = command
        .spawn()
        .map_err(|e| format!("cannot start {:?}: {e}", command.get_program()))?;
    let ended = wait_with_usage(child)?;
    let process_wall = started.elapsed();
    if !ended.success {
        return Err(format!("exited with failure: {}", ended.stderr.trim()));
    }
    if way.reports() {
        return parse_report(&ended.stdout);
    }
    if way == Way::Curl {
        let got: u64 = ended.stdout.trim().parse().unwrap_or(0);
        if got != size {
            return Err(format!("curl received {got} bytes of {size}"));
        }
    }
    Ok(Sample {
        wall: process_wall,
        cpu: ended.cpu,
        peak_rss: ended.peak_rss,
    })
}

/// `name` on the `PATH`.
pub(crate) fn find(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|candidate| candidate.is_file())
}
