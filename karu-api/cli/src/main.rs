//! `karu`: read exact byte ranges, the size, or both ends of any object Karu can address, and
//! show the configuration that applies to it.
//!
//! ```text
//! karu read ADDRESS RANGE...           one batch, streamed as it completes (RANGE is
//!                                      OFFSET:LENGTH, OFFSET:end or -SUFFIX)
//! karu read --ranges-from FILE|-       ranges (and addresses) one per line
//! karu stat ADDRESS                    size (`unknown` for a device or FIFO) and ETag
//! karu ends ADDRESS HEAD TAIL          both ends in one round trip
//! karu config [ADDRESS]                the effective configuration, value by value
//! karu config --keys                   every key Karu and its providers read
//! karu completions SHELL               shell completions (bash, zsh, fish, …)
//! ```
//!
//! Exit status: 0 when every read (or the operation) succeeded, 1 when one failed, 2 for a
//! usage or configuration error, 3 when the output could not be written; a broken pipe ends
//! quietly (status 0, or 1 if a read had failed). `karu --help` says it all.

mod cli;
mod ends;
mod files;
mod interrupt;
mod log;
mod numbers;
mod out_template;
mod outcome;
mod output;
mod place;
mod plan;
mod read;
mod report;
mod requests;
mod show_config;
mod wait;

use std::process::ExitCode;
use std::time::Duration;

use karu::config::Wording;
use karu::{Client, Error, Locator};
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
    let mut out = Stdout::new();
    if let Command::Completions { shell } = cli.command {
        // Written to a buffer first: stdout's errors are reported as every output's are.
        let mut script = Vec::new();
        clap_complete::generate(shell, &mut cli::command(), "karu", &mut script);
        out.write(&script)?;
        out.flush()?;
        return Ok(OK);
    }
    log::init(cli.global.verbose)?;
    let client = build_client(&cli.global)?;
    let window = cli.global.window.as_deref();
    let json = cli.global.json;
    match cli.command {
        Command::Read(args) => read::run(&client, &args, window, json, &mut out, failed),
        Command::Stat { address } => {
            let locator = locate(&client, &address, window)?;
            let info = match client.stat(&locator) {
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
        Command::Ends(args) => ends::run(&client, &args, window, json, &mut out),
        Command::Config { keys: true, .. } => show_config::keys(&client, json, &mut out),
        Command::Config { address, .. } => {
            show_config::run(&client, address.as_deref(), window, json, &mut out)
        }
        Command::Completions { .. } => Ok(OK),
    }
}

/// An operation that ran but failed (exit 1).
pub(crate) fn operation_failed(error: &Error) -> u8 {
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

/// Resolves an address with the `--window` of the command line. A malformed window, or an
/// address (or window) the client refuses, is a usage error: resolving never touches the
/// network, so what it refuses is what was written. An unknown scheme gets a did-you-mean.
pub(crate) fn locate(
    client: &Client,
    address: &str,
    window: Option<&str>,
) -> Result<Locator, Stop> {
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
                "end" | "" => None,
                len => Some(
                    numbers::bytes(len)
                        .map_err(|e| Stop::Usage(format!("--window {text:?}: {e}")))?,
                ),
            };
            Some((start, len))
        }
    };
    let locator = client
        .locate(address)
        .map_err(|e| Stop::Usage(bad_address(client, address, &e)))?;
    match window {
        Some((start, len)) => locator
            .with_window(start, len)
            .map_err(|e| Stop::Usage(format!("--window: {}: {}", e.status(), e.message()))),
        None => Ok(locator),
    }
}

/// Why `address` is not one Karu can read, with a did-you-mean for a misspelt scheme.
fn bad_address(client: &Client, address: &str, error: &Error) -> String {
    let shown = karu::redact::address(address);
    let schemes: Vec<String> = client
        .registry()
        .patterns()
        .into_iter()
        .filter(|p| !p.contains("://"))
        .collect();
    let scheme = address
        .split_once("://")
        .map(|(scheme, _)| scheme)
        .filter(|s| {
            s.chars().next().is_some_and(|c| c.is_ascii_alphabetic())
                && s.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c))
        });
    match scheme {
        Some(scheme) if !schemes.contains(&scheme.to_ascii_lowercase()) => {
            let lower = scheme.to_ascii_lowercase();
            let mut message = format!(
                "{shown}: unknown scheme \"{lower}\" (karu reads {}, and paths)",
                schemes.join(", ")
            );
            if let Some(known) = karu::config::closest(&lower, &schemes) {
                let corrected = format!("{known}{}", &address[scheme.len()..]);
                message.push_str(&format!(
                    "; did you mean \"{}\"?",
                    karu::redact::address(&corrected)
                ));
            }
            message
        }
        _ => format!("{shown}: {}: {}", error.status(), error.message()),
    }
}

/// A duration in milliseconds, to the microsecond: `1.886`, never `1.8856439999999999`.
pub(crate) fn milliseconds(duration: Duration) -> f64 {
    duration.as_micros() as f64 / 1000.0
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
