//! `karu`: read exact byte ranges, the size, or both ends of any object Karu can address, and
//! show the configuration that applies to it.
//!
//! ```text
//! karu read ADDRESS OFFSET:LENGTH...   one batch, streamed as it completes
//! karu read --ranges-from FILE|-       ranges (and addresses) one per line
//! karu stat ADDRESS                    size (`unknown` for a device or FIFO) and ETag
//! karu ends ADDRESS HEAD TAIL          both ends in one round trip
//! karu config [ADDRESS]                the effective configuration, value by value
//! ```
//!
//! Exit status: 0 when every read (or the operation) succeeded, 1 when one failed, 2 for a
//! usage or configuration error, 3 when the output could not be written; a broken pipe ends
//! quietly (status 0, or 1 if a read had failed). `karu --help` says it all.

mod cli;
mod numbers;
mod outcome;
mod output;
mod read;
mod report;
mod requests;
mod show_config;

use std::process::ExitCode;

use karu::{Client, Error, Locator};
use karu_config::Wording;
use serde_json::json;
use sha2::{Digest, Sha256};

use crate::cli::{Cli, Command, Global};
use crate::outcome::{FAILED, OK, Stop, say};
use crate::output::Stdout;

fn main() -> ExitCode {
    let cli = cli::parse();
    let mut failed = false;
    let result = run(cli, &mut failed);
    outcome::finish(result, if failed { FAILED } else { OK })
}

fn run(cli: Cli, failed: &mut bool) -> Result<u8, Stop> {
    let client = build_client(&cli.global)?;
    let mut out = Stdout::new();
    let window = cli.global.window.as_deref();
    let json = cli.global.json;
    match cli.command {
        Command::Read(args) => read::run(&client, &args, window, json, &mut out, failed),
        Command::Stat { address } => {
            let info = match locate(&client, &address, window)?.and_then(|l| client.stat(&l)) {
                Ok(info) => info,
                Err(e) => return Ok(operation_failed(&e)),
            };
            if json {
                out.line(&json!({"size": info.size, "etag": info.etag}).to_string())?;
            } else {
                match info.size {
                    Some(size) => out.line(&format!("size\t{size}"))?,
                    None => out.line("size\tunknown")?,
                }
                out.line(&format!("etag\t{}", info.etag.as_deref().unwrap_or("-")))?;
            }
            out.flush()?;
            Ok(OK)
        }
        Command::Ends {
            address,
            head,
            tail,
        } => {
            let ends = match locate(&client, &address, window)?
                .and_then(|l| client.read_ends(&l, head, tail))
            {
                Ok(ends) => ends,
                Err(e) => return Ok(operation_failed(&e)),
            };
            if json {
                let line = json!({
                    "size": ends.size,
                    "etag": ends.etag,
                    "head_bytes": ends.head.len(),
                    "head_sha256": sha256(&ends.head),
                    "tail_bytes": ends.tail.len(),
                    "tail_sha256": sha256(&ends.tail),
                });
                out.line(&line.to_string())?;
            } else {
                out.line(&format!("size\t{}", ends.size))?;
                out.line(&format!("etag\t{}", ends.etag.as_deref().unwrap_or("-")))?;
                out.line(&format!(
                    "head\t{} bytes\tsha256 {}",
                    ends.head.len(),
                    sha256(&ends.head)
                ))?;
                out.line(&format!(
                    "tail\t{} bytes\tsha256 {}",
                    ends.tail.len(),
                    sha256(&ends.tail)
                ))?;
            }
            out.flush()?;
            Ok(OK)
        }
        Command::Config { address } => {
            show_config::run(&client, address.as_deref(), json, &mut out)
        }
    }
}

/// An operation that ran but failed (exit 1).
fn operation_failed(error: &Error) -> u8 {
    say(&format!("karu: {}: {}", error.status(), error.message()));
    FAILED
}

/// The client, configured by files, environment and `--config` / `--set`.
fn build_client(global: &Global) -> Result<Client, Stop> {
    let mut builder = Client::builder().wording(Wording::new(
        "given with --config",
        "--set",
        "path rules cannot be set with --set: write a [paths.\"PREFIX\"] table in a config file \
         (--config FILE)",
    ));
    if let Some(path) = &global.config {
        builder = builder.config_file(path.clone());
    }
    for option in &global.options {
        let (key, value) = option
            .split_once('=')
            .ok_or_else(|| Stop::Usage(format!("--set {option:?}: expected KEY=VALUE")))?;
        let key = key.trim();
        builder = match quoted_value(value) {
            Some(parsed) => builder.set(
                key,
                parsed.map_err(|e| Stop::Usage(format!("--set {option:?}: {e}")))?,
            ),
            // Anything else is text, read as the type of its key by the configuration.
            None => builder.set(key, value),
        };
    }
    builder
        .build()
        .map_err(|e| Stop::Usage(e.message().to_owned()))
}

/// A `--set` value written in TOML: a quoted string (`'"123"'`), an inline table or an array.
/// `None` for a bare value, which is passed on as text.
fn quoted_value(value: &str) -> Option<Result<toml::Value, String>> {
    let trimmed = value.trim();
    let quoted = trimmed.len() >= 2
        && ((trimmed.starts_with('"') && trimmed.ends_with('"'))
            || (trimmed.starts_with('\'') && trimmed.ends_with('\''))
            || (trimmed.starts_with('{') && trimmed.ends_with('}'))
            || (trimmed.starts_with('[') && trimmed.ends_with(']')));
    if !quoted {
        return None;
    }
    Some(
        toml::from_str::<toml::Table>(&format!("value = {trimmed}"))
            .map_err(|e| format!("not a TOML value: {}", e.message().trim()))
            .and_then(|mut table| table.remove("value").ok_or_else(|| "no value".to_owned())),
    )
}

/// Resolves an address with the `--window` of the command line. A malformed window is a usage
/// error; an address (or window) the client refuses is the error of the operation or reads.
pub(crate) fn locate(
    client: &Client,
    address: &str,
    window: Option<&str>,
) -> Result<Result<Locator, Error>, Stop> {
    let window = match window {
        None => None,
        Some(text) => {
            let (start, len) = text.split_once(':').ok_or_else(|| {
                Stop::Usage(format!(
                    "--window {text:?}: expected START:LEN or START:end"
                ))
            })?;
            let start = numbers::bytes(start)
                .map_err(|e| Stop::Usage(format!("--window {text:?}: {e}")))?;
            let len = match len {
                "end" => None,
                len => Some(
                    numbers::bytes(len)
                        .map_err(|e| Stop::Usage(format!("--window {text:?}: {e}")))?,
                ),
            };
            Some((start, len))
        }
    };
    Ok(client.locate(address).and_then(|locator| match window {
        Some((start, len)) => locator.with_window(start, len),
        None => Ok(locator),
    }))
}

/// Lower-case hex SHA-256.
pub(crate) fn sha256(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn set_values_in_toml_are_parsed_and_bare_ones_are_text() {
        assert!(quoted_value("123").is_none());
        assert!(quoted_value("eu-west-1").is_none());
        assert_eq!(
            quoted_value("\"123\"").unwrap(),
            Ok(toml::Value::String("123".into()))
        );
        assert_eq!(
            quoted_value("'x'").unwrap(),
            Ok(toml::Value::String("x".into()))
        );
        let table = quoted_value("{ X-Key = \"v\" }").unwrap().unwrap();
        assert_eq!(table["X-Key"].as_str(), Some("v"));
        assert!(quoted_value("\"unterminated\\\"").unwrap().is_err());
    }
}
