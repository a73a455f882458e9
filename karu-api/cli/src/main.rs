//! `karu`: read exact byte ranges, the size, or both ends of any object Karu can address.
//!
//! ```text
//! karu read ADDRESS OFFSET:LENGTH...   one batch; one range without --json writes raw bytes
//! karu stat ADDRESS                    size and ETag
//! karu ends ADDRESS HEAD TAIL          both ends in one round trip
//! ```
//!
//! Exit status 0 only when every read succeeded, 1 when a read or operation failed, 2 for a
//! usage error; each error is one line on stderr.

use std::io::{self, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use clap::{Args, Parser, Subcommand};
use karu::{BatchOptions, Client, Completion, Locator, Read, Status};
use serde_json::json;
use sha2::{Digest, Sha256};

#[derive(Debug, Parser)]
#[command(
    name = "karu",
    version,
    about = "Exact byte-range reads from files, HTTP and cloud stores"
)]
struct Cli {
    #[command(flatten)]
    global: Global,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Args)]
struct Global {
    /// Layer this config file above the user and project files.
    #[arg(long, global = true, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Set an option, e.g. `--set planner.max_gap=0` or `--set http.ca_file=ca.pem`
    /// (repeatable; above files and environment).
    #[arg(long = "set", global = true, value_name = "KEY=VALUE")]
    options: Vec<String>,
    /// Expose only [START, START+LEN) of the object (LEN may be `end`); offsets are relative to it.
    #[arg(long, global = true, value_name = "START:LEN")]
    window: Option<String>,
    /// Print JSON lines instead of raw bytes or text.
    #[arg(long, global = true)]
    json: bool,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Read ranges in one batch.
    Read {
        /// A path, file:// URI or provider URL.
        address: String,
        /// Ranges as OFFSET:LENGTH (decimal or 0x hex).
        #[arg(required = true, value_name = "OFFSET:LENGTH")]
        ranges: Vec<String>,
        /// Require this ETag on every read (sent as If-Match, checked on the response).
        #[arg(long, value_name = "ETAG")]
        if_match: Option<String>,
        /// Largest gap between merged neighbours (0 disables merging).
        #[arg(long, value_name = "BYTES")]
        max_gap: Option<u64>,
        /// Largest span of a merged transfer.
        #[arg(long, value_name = "BYTES")]
        max_span: Option<u64>,
        /// Most reads in one transfer.
        #[arg(long, value_name = "N")]
        max_parts: Option<u32>,
        /// Most fetched bytes per useful byte.
        #[arg(long, value_name = "RATIO")]
        max_amplification: Option<u32>,
    },
    /// Print the size and ETag.
    Stat {
        /// A path, file:// URI or provider URL.
        address: String,
    },
    /// Read the first HEAD and last TAIL bytes.
    Ends {
        /// A path, file:// URI or provider URL.
        address: String,
        /// Bytes from the start.
        head: u64,
        /// Bytes from the end.
        tail: u64,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli) {
        Ok(code) => code,
        Err(message) => {
            eprintln!("karu: {message}");
            ExitCode::from(2)
        }
    }
}

fn run(cli: Cli) -> Result<ExitCode, String> {
    let client = build_client(&cli.global)?;
    match cli.command {
        Command::Read {
            address,
            ranges,
            if_match,
            max_gap,
            max_span,
            max_parts,
            max_amplification,
        } => {
            let locator = locate(&client, &address, cli.global.window.as_deref())?;
            let ranges = ranges
                .iter()
                .map(|r| parse_range(r))
                .collect::<Result<Vec<_>, _>>()?;
            let mut options = BatchOptions::new();
            if let Some(v) = max_gap {
                options = options.max_gap(v);
            }
            if let Some(v) = max_span {
                options = options.max_span(v);
            }
            if let Some(v) = max_parts {
                options = options.max_parts(v);
            }
            if let Some(v) = max_amplification {
                options = options.max_amplification(v);
            }
            read(
                &client,
                &locator,
                &ranges,
                if_match,
                &options,
                cli.global.json,
            )
        }
        Command::Stat { address } => {
            let locator = locate(&client, &address, cli.global.window.as_deref())?;
            let info = match client.stat(&locator) {
                Ok(info) => info,
                Err(e) => return Ok(operation_failed(&e)),
            };
            if cli.global.json {
                println!("{}", json!({"size": info.size, "etag": info.etag}));
            } else {
                println!("size\t{}", info.size);
                println!("etag\t{}", info.etag.as_deref().unwrap_or("-"));
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Ends {
            address,
            head,
            tail,
        } => {
            let locator = locate(&client, &address, cli.global.window.as_deref())?;
            let ends = match client.read_ends(&locator, head, tail) {
                Ok(ends) => ends,
                Err(e) => return Ok(operation_failed(&e)),
            };
            if cli.global.json {
                println!(
                    "{}",
                    json!({
                        "size": ends.size,
                        "etag": ends.etag,
                        "head_bytes": ends.head.len(),
                        "head_sha256": sha256(&ends.head),
                        "tail_bytes": ends.tail.len(),
                        "tail_sha256": sha256(&ends.tail),
                    })
                );
            } else {
                println!("size\t{}", ends.size);
                println!("etag\t{}", ends.etag.as_deref().unwrap_or("-"));
                println!(
                    "head\t{} bytes\tsha256 {}",
                    ends.head.len(),
                    sha256(&ends.head)
                );
                println!(
                    "tail\t{} bytes\tsha256 {}",
                    ends.tail.len(),
                    sha256(&ends.tail)
                );
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// An operation that ran but failed (exit 1); usage errors exit 2.
fn operation_failed(error: &karu::Error) -> ExitCode {
    eprintln!("karu: {}: {}", error.status(), error.message());
    ExitCode::FAILURE
}

fn build_client(global: &Global) -> Result<Client, String> {
    let mut builder = Client::builder();
    if let Some(path) = &global.config {
        builder = builder.config_file(path.clone());
    }
    for option in &global.options {
        let (key, value) = option
            .split_once('=')
            .ok_or_else(|| format!("--set {option:?}: expected KEY=VALUE"))?;
        builder = match value.parse::<i64>() {
            Ok(n) => builder.set(key, n),
            Err(_) => match value {
                "true" | "false" => builder.set(key, value == "true"),
                _ => builder.set(key, value),
            },
        };
    }
    builder.build().map_err(|e| e.to_string())
}

fn locate(client: &Client, address: &str, window: Option<&str>) -> Result<Locator, String> {
    let locator = client.locate(address).map_err(|e| e.to_string())?;
    let Some(window) = window else {
        return Ok(locator);
    };
    let (start, len) = window
        .split_once(':')
        .ok_or_else(|| format!("--window {window:?}: expected START:LEN or START:end"))?;
    let start = parse_u64(start).map_err(|e| format!("--window {window:?}: {e}"))?;
    let len = match len {
        "end" => None,
        len => Some(parse_u64(len).map_err(|e| format!("--window {window:?}: {e}"))?),
    };
    locator.with_window(start, len).map_err(|e| e.to_string())
}

fn parse_u64(s: &str) -> Result<u64, String> {
    let parsed = match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(hex) => u64::from_str_radix(hex, 16),
        None => s.parse::<u64>(),
    };
    parsed.map_err(|_| format!("{s:?} is not an unsigned 64-bit number"))
}

fn parse_range(range: &str) -> Result<(u64, u64), String> {
    let (offset, length) = range
        .split_once(':')
        .ok_or_else(|| format!("range {range:?}: expected OFFSET:LENGTH"))?;
    Ok((
        parse_u64(offset).map_err(|e| format!("range {range:?}: {e}"))?,
        parse_u64(length).map_err(|e| format!("range {range:?}: {e}"))?,
    ))
}

fn read(
    client: &Client,
    locator: &Locator,
    ranges: &[(u64, u64)],
    if_match: Option<String>,
    options: &BatchOptions,
    json: bool,
) -> Result<ExitCode, String> {
    let started = Instant::now();
    let reads = ranges.iter().enumerate().map(|(i, &(offset, length))| {
        let read = Read::new(locator, offset, length).tag(i as u64);
        match &if_match {
            Some(etag) => read.if_match(etag.clone()),
            None => read,
        }
    });
    let batch = client.submit_with(reads, options);
    let completions = batch.wait();
    let wall = started.elapsed();
    let stats = batch.stats();

    let mut all_ok = true;
    let mut out = io::stdout().lock();
    for c in &completions {
        if !c.is_ok() {
            all_ok = false;
            report_error(c, ranges);
        }
        if json {
            let line = json!({
                "tag": c.tag(),
                "status": c.status().name(),
                "bytes_received": c.bytes_received(),
                "sha256": sha256(c.bytes()),
            });
            writeln!(out, "{line}").map_err(|e| e.to_string())?;
        } else {
            out.write_all(c.bytes()).map_err(|e| e.to_string())?;
        }
    }
    if json {
        let line = json!({
            "batch": {
                "reads": stats.reads,
                "rejected": stats.rejected,
                "transfers": stats.transfers,
                "requested_bytes": stats.requested_bytes,
                "fetched_bytes": stats.fetched_bytes,
                "wall_ms": wall.as_secs_f64() * 1000.0,
            }
        });
        writeln!(out, "{line}").map_err(|e| e.to_string())?;
    }
    out.flush().map_err(|e| e.to_string())?;
    Ok(if all_ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

fn report_error(c: &Completion, ranges: &[(u64, u64)]) {
    let (offset, length) = ranges.get(c.index()).copied().unwrap_or_default();
    let message = c
        .error()
        .map(|e| e.message().to_string())
        .unwrap_or_default();
    let received = if c.status() == Status::RangeNotSatisfiable {
        format!(" ({} bytes delivered)", c.bytes_received())
    } else {
        String::new()
    };
    eprintln!(
        "karu: read {} ({offset}:{length}): {}: {message}{received}",
        c.tag(),
        c.status()
    );
}

fn sha256(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}
