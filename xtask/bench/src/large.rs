//! The `large` workload: one object read whole, at several sizes up to 2 GiB, by each face of
//! Karu and by curl and a plain hyper client, each in a process of its own, so that its wall,
//! CPU time and peak RSS are its own.
//!
//! The mock server (virtual objects, no latency by default) runs in this process; every client
//! runs as a child: `karu-bench large-client` for the methods in Rust (Karu's
//! `Client::read_into` into a caller buffer, `Client::read` into Karu's own, plain hyper
//! copying one response into a caller buffer), the release `karu` command writing to
//! `/dev/null` where it is built, and curl. A child in Rust times its read itself and reports
//! the CPU time and peak RSS of its process at the end of the read, then checks every byte
//! against the pattern; curl and the `karu` command are timed by their own exit (their process
//! is the read) and their CPU and peak RSS come from `wait4`.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use clap::Args;
use karu_testkit::{MockServer, fill_pattern};

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
}

/// Options of `karu-bench large-client` (run by `large`, one read per process).
#[derive(Debug, Clone, Args)]
pub(crate) struct LargeClientArgs {
    /// The object's URL (`http://127.0.0.1:PORT/large-…`).
    #[arg(long)]
    url: String,
    /// Its size in bytes.
    #[arg(long)]
    size: u64,
    /// `karu-into` (`Client::read_into` a caller buffer), `karu-read` (`Client::read`) or
    /// `plain` (one hyper request, its body copied into a caller buffer).
    #[arg(long)]
    method: String,
}

/// How a child reports its read on stdout: `large-client: WALL_NS CPU_NS MAXRSS_KIB`.
const REPORT: &str = "large-client:";

/// One read, as measured.
#[derive(Debug, Clone, Copy)]
struct Sample {
    wall: Duration,
    cpu: Duration,
    /// Peak resident set of the process, in bytes.
    peak_rss: u64,
}

/// A way to read the object, each in a process of its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Way {
    KaruInto,
    KaruRead,
    Cli,
    Plain,
    Curl,
}

impl Way {
    fn label(self) -> &'static str {
        match self {
            Way::KaruInto => "Karu Client::read_into, caller buffer",
            Way::KaruRead => "Karu Client::read, Karu's buffer",
            Way::Cli => "karu read (CLI) > /dev/null",
            Way::Plain => "plain hyper, one request, caller buffer",
            Way::Curl => "curl -o /dev/null",
        }
    }

    /// Whether the read lands in a buffer of the object's size (its RSS holds the object).
    fn holds_the_object(self) -> bool {
        matches!(self, Way::KaruInto | Way::KaruRead | Way::Plain)
    }
}

/// `karu-bench large`.
pub(crate) fn run(args: &LargeArgs) -> Result<(), String> {
    let server = MockServer::builder()
        .latency(Duration::from_millis(args.latency_ms))
        .start()
        .map_err(|e| format!("cannot start the mock server: {e}"))?;
    let exe = std::env::current_exe().map_err(|e| format!("cannot find karu-bench: {e}"))?;
    let cli = exe.with_file_name("karu");
    let mut ways = vec![Way::KaruInto, Way::KaruRead, Way::Plain];
    if cli.is_file() {
        ways.push(Way::Cli);
    } else {
        println!(
            "  the karu command is not built beside karu-bench ({}): `cargo build --release -p \
             karu-cli` (`cargo xtask bench large` does)",
            cli.display()
        );
    }
    if !args.no_curl {
        if find("curl").is_some() {
            ways.push(Way::Curl);
        } else {
            println!("  curl is not installed: left out");
        }
    }
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
    println!(
        "Columns: wall (best and median of the runs: the read alone for the Rust clients, the \
         process for curl and the karu command), client CPU (user + system, the median run), \
         CPU per GiB, peak RSS of the process, and above the object for the clients that hold \
         it in one buffer."
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
                match read_once(ways[i], &exe, &cli, &url, size) {
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
    }
    table.print();
    println!(
        "  vs curl = median wall / curl's median wall (< 1: faster than curl). Targets (issue \
         61): a 2 GiB read at curl's wall or better in every face, peak RSS at most 256 MiB \
         above what the caller's buffer holds."
    );
    if failures.is_empty() {
        Ok(())
    } else {
        for f in &failures {
            println!("  FAILED: {f}");
        }
        Err(format!("{} reads failed", failures.len()))
    }
}

/// One read of `url` by `way` in a child process.
fn read_once(way: Way, exe: &Path, cli: &Path, url: &str, size: u64) -> Result<Sample, String> {
    let mut command = match way {
        Way::KaruInto | Way::KaruRead | Way::Plain => {
            let mut c = Command::new(exe);
            c.args(["large-client", "--url", url, "--size", &size.to_string()])
                .args([
                    "--method",
                    match way {
                        Way::KaruInto => "karu-into",
                        Way::KaruRead => "karu-read",
                        _ => "plain",
                    },
                ]);
            c
        }
        Way::Cli => {
            let mut c = Command::new(cli);
            c.args(["read", url, "0:"]);
            c.stdout(Stdio::null());
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
    };
    command.stdin(Stdio::null()).stderr(Stdio::piped());
    if way != Way::Cli {
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
    match way {
        Way::KaruInto | Way::KaruRead | Way::Plain => parse_report(&ended.stdout),
        Way::Curl => {
            let got: u64 = ended.stdout.trim().parse().unwrap_or(0);
            if got != size {
                return Err(format!("curl received {got} bytes of {size}"));
            }
            Ok(Sample {
                wall: process_wall,
                cpu: ended.cpu,
                peak_rss: ended.peak_rss,
            })
        }
        Way::Cli => Ok(Sample {
            wall: process_wall,
            cpu: ended.cpu,
            peak_rss: ended.peak_rss,
        }),
    }
}

/// A child process that ended: whether it succeeded, what it wrote, and its CPU time (user +
/// system) and peak RSS (bytes) from `wait4`.
struct Ended {
    success: bool,
    stdout: String,
    stderr: String,
    cpu: Duration,
    peak_rss: u64,
}

/// Waits for `child`, collecting its stdout and stderr.
fn wait_with_usage(mut child: std::process::Child) -> Result<Ended, String> {
    use std::io::Read;
    let mut stdout = child.stdout.take();
    let mut stderr = child.stderr.take();
    let reader = std::thread::spawn(move || {
        let mut text = String::new();
        if let Some(out) = stdout.as_mut() {
            let _ = out.read_to_string(&mut text);
        }
        text
    });
    let mut err_text = String::new();
    if let Some(err) = stderr.as_mut() {
        let _ = err.read_to_string(&mut err_text);
    }
    let out_text = reader.join().unwrap_or_default();
    let pid = child.id() as libc::pid_t;
    let mut status: libc::c_int = 0;
    // SAFETY: an all-zero rusage is a valid value of the plain C struct.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `pid` is our own child, not yet reaped (`Child::wait` is never called on it);
    // `status` and `usage` are valid for writes.
    let reaped = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    if reaped != pid {
        return Err(format!("wait4: {}", std::io::Error::last_os_error()));
    }
    let success = libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0;
    Ok(Ended {
        success,
        stdout: out_text,
        stderr: err_text,
        cpu: cpu_of(&usage),
        peak_rss: rss_of(&usage),
    })
}

fn cpu_of(usage: &libc::rusage) -> Duration {
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, (t.tv_usec as u32) * 1000);
    tv(usage.ru_utime) + tv(usage.ru_stime)
}

/// `ru_maxrss` is in KiB on Linux.
fn rss_of(usage: &libc::rusage) -> u64 {
    (usage.ru_maxrss as u64) * 1024
}

/// A child's report line.
fn parse_report(stdout: &str) -> Result<Sample, String> {
    let line = stdout
        .lines()
        .find_map(|l| l.strip_prefix(REPORT))
        .ok_or_else(|| format!("no report in {stdout:?}"))?;
    let numbers: Vec<u64> = line
        .split_whitespace()
        .map(|n| n.parse().map_err(|_| format!("bad report {line:?}")))
        .collect::<Result<_, _>>()?;
    let [wall, cpu, rss] = numbers[..] else {
        return Err(format!("bad report {line:?}"));
    };
    Ok(Sample {
        wall: Duration::from_nanos(wall),
        cpu: Duration::from_nanos(cpu),
        peak_rss: rss * 1024,
    })
}

/// The CPU time and peak RSS (KiB) of this process so far.
fn own_usage() -> (Duration, u64) {
    // SAFETY: an all-zero rusage is a valid value of the plain C struct.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `usage` is valid for writes.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) };
    (cpu_of(&usage), usage.ru_maxrss as u64)
}

/// `karu-bench large-client`: one read of the whole object, timed, then every byte checked.
pub(crate) fn client(args: &LargeClientArgs) -> Result<(), String> {
    let size = usize::try_from(args.size).map_err(|_| "the object does not fit in memory")?;
    let (held, wall, cpu, rss) = match args.method.as_str() {
        "karu-into" | "karu-read" => {
            let client = crate::methods::karu_client()?;
            let locator = client.locate(&args.url).map_err(|e| e.to_string())?;
            let cpu_before = own_usage().0;
            let started = Instant::now();
            let held = if args.method == "karu-into" {
                let mut buffer = vec![0u8; size];
                client
                    .read_into(&locator, 0, &mut buffer)
                    .map_err(|e| e.to_string())?;
                buffer
            } else {
                client
                    .read(&locator, 0, args.size)
                    .map_err(|e| e.to_string())?
            };
            let wall = started.elapsed();
            let (cpu_after, rss) = own_usage();
            (held, wall, cpu_after - cpu_before, rss)
        }
        "plain" => {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .map_err(|e| format!("cannot start a tokio runtime: {e}"))?;
            let cpu_before = own_usage().0;
            let started = Instant::now();
            let mut buffer = vec![0u8; size];
            runtime.block_on(plain_read_into(&args.url, &mut buffer))?;
            let wall = started.elapsed();
            let (cpu_after, rss) = own_usage();
            (buffer, wall, cpu_after - cpu_before, rss)
        }
        other => {
            return Err(format!(
                "unknown method {other:?} (karu-into, karu-read or plain)"
            ));
        }
    };
    check(&held, size)?;
    println!("{REPORT} {} {} {rss}", wall.as_nanos(), cpu.as_nanos());
    Ok(())
}

/// Every byte of `held` against the pattern of a virtual object of `size` bytes.
fn check(held: &[u8], size: usize) -> Result<(), String> {
    if held.len() != size {
        return Err(format!("{} bytes read of {size}", held.len()));
    }
    let mut expected = vec![0u8; 1 << 20];
    let mut offset = 0u64;
    for chunk in held.chunks(expected.len()) {
        let expected = &mut expected[..chunk.len()];
        fill_pattern(offset, expected);
        if expected != chunk {
            return Err(format!("wrong bytes in the MiB at {offset}"));
        }
        offset += chunk.len() as u64;
    }
    Ok(())
}

/// One GET of the whole object over a new HTTP/1.1 connection, its body copied into
/// `buffer` frame by frame (hyper's `Bytes` into the caller's memory: the one copy a plain
/// client makes).
async fn plain_read_into(url: &str, buffer: &mut [u8]) -> Result<(), String> {
    use bytes::Bytes;
    use http_body_util::{BodyExt, Empty};
    let rest = url
        .strip_prefix("http://")
        .ok_or_else(|| format!("not an http URL: {url}"))?;
    let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    let stream = tokio::net::TcpStream::connect(authority)
        .await
        .map_err(|e| format!("connect {authority}: {e}"))?;
    stream
        .set_nodelay(true)
        .map_err(|e| format!("TCP_NODELAY: {e}"))?;
    let (mut sender, connection) =
        hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream))
            .await
            .map_err(|e| format!("handshake: {e}"))?;
    tokio::spawn(async move {
        let _ = connection.await;
    });
    let request = http::Request::get(path)
        .header(http::header::HOST, authority)
        .body(Empty::<Bytes>::new())
        .map_err(|e| e.to_string())?;
    let response = sender
        .send_request(request)
        .await
        .map_err(|e| format!("request: {e}"))?;
    if response.status() != http::StatusCode::OK {
        return Err(format!("status {}", response.status()));
    }
    let mut body = response.into_body();
    let mut filled = 0usize;
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|e| format!("body: {e}"))?;
        if let Ok(data) = frame.into_data() {
            let end = filled + data.len();
            let Some(into) = buffer.get_mut(filled..end) else {
                return Err("more bytes than the object".into());
            };
            into.copy_from_slice(&data);
            filled = end;
        }
    }
    if filled != buffer.len() {
        return Err(format!("{filled} bytes of {}", buffer.len()));
    }
    Ok(())
}

/// `name` on the `PATH`.
fn find(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|candidate| candidate.is_file())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_childs_report_reads_back() {
        let sample = parse_report("noise\nlarge-client: 1500000000 250000000 131072\n").unwrap();
        assert_eq!(sample.wall, Duration::from_millis(1500));
        assert_eq!(sample.cpu, Duration::from_millis(250));
        assert_eq!(sample.peak_rss, 128 << 20);
        assert!(parse_report("large-client: 1 2\n").is_err());
        assert!(parse_report("nothing\n").is_err());
    }

    #[test]
    fn the_check_finds_a_wrong_byte() {
        let mut held = vec![0u8; 3 << 20];
        fill_pattern(0, &mut held);
        assert_eq!(check(&held, 3 << 20), Ok(()));
        held[(2 << 20) + 5] ^= 1;
        assert_eq!(
            check(&held, 3 << 20),
            Err(format!("wrong bytes in the MiB at {}", 2 << 20))
        );
        assert!(check(&held[..10], 3 << 20).is_err());
    }
}
