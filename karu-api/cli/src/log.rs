//! `-v`, `-vv` and `KARU_LOG`: what Karu logs, on stderr.
//!
//! `-v` shows each HTTP exchange (the `karu::http` target: the object and range of a read,
//! each request's method, URL without its query, range, status, attempt and time); `-vv` adds
//! everything Karu's crates log at debug level, `-vvv` at trace level. `KARU_LOG` (else
//! `RUST_LOG`) takes a `tracing` filter instead (`KARU_LOG=karu::http=debug,karu_engine=trace`).
//! Nothing Karu logs holds a secret: no header value, no query string, no credential.

use tracing_subscriber::EnvFilter;

use crate::outcome::Stop;

/// The filter of `-v` repeated `verbose` times; `None` without one.
fn filter_for(verbose: u8) -> Option<&'static str> {
    match verbose {
        0 => None,
        1 => Some("warn,karu::http=debug"),
        2 => Some("warn,karu=debug"),
        _ => Some("warn,karu=trace"),
    }
}

/// Installs the log on stderr, if `-v` or a filter variable asks for one.
pub(crate) fn init(verbose: u8) -> Result<(), Stop> {
    let from_env = ["KARU_LOG", "RUST_LOG"].into_iter().find_map(|name| {
        std::env::var(name)
            .ok()
            .filter(|v| !v.trim().is_empty())
            .map(|v| (name, v))
    });
    let filter = match (from_env, filter_for(verbose)) {
        (Some((name, text)), _) => EnvFilter::try_new(&text)
            .map_err(|e| Stop::Usage(format!("{name}={text:?} is not a tracing filter: {e}")))?,
        (None, Some(text)) => EnvFilter::new(text),
        (None, None) => return Ok(()),
    };
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .with_target(true)
        .try_init()
        .map_err(|e| Stop::Usage(format!("cannot start the log: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_v_shows_more() {
        assert_eq!(filter_for(0), None);
        for verbose in 1..=4 {
            let text = filter_for(verbose).unwrap();
            assert!(EnvFilter::try_new(text).is_ok(), "{text}");
        }
        assert!(filter_for(1).unwrap().contains("karu::http=debug"));
    }
}
