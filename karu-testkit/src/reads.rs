//! The helpers a provider's integration tests read with: clients that see no configuration
//! of the machine, batches drained without hanging, and checks of each completion against the
//! byte pattern of the mock servers' virtual objects ([`pattern_byte`]) and of
//! [`pattern_file`]s.
//!
//! A provider crate's tests (`karu-providers/<name>/tests/`) and `karu`'s own use them alike:
//!
//! ```no_run
//! use karu_testkit::MockServer;
//! use karu_testkit::reads::{assert_ok, client, read_all};
//!
//! let server = MockServer::start();
//! server.insert_virtual("/object.bin", 1 << 20);
//! let client = client();
//! let object = client.locate(&server.url("/object.bin")).unwrap();
//! let reads = [(0, 100), (5_000, 20)];
//! for (c, &(offset, length)) in read_all(&client, &object, &reads).iter().zip(&reads) {
//!     assert_ok(c, offset, length);
//! }
//! ```

use std::path::{Path, PathBuf};
use std::time::Duration;

use karu::{Batch, Client, ClientBuilder, Completion, Locator, Next, Read, Status};

use crate::http::{RequestRecord, pattern, pattern_byte};

/// One kibibyte.
pub const KIB: u64 = 1 << 10;
/// One mebibyte.
pub const MIB: u64 = 1 << 20;

/// How long a test waits for something that must happen; only reached when the code is broken.
pub const PATIENCE: Duration = Duration::from_secs(30);

/// A builder that reads no config file and no process environment, with hedging off.
///
/// Tests count the requests a server saw exactly ([`assert_requests`]); a hedged request is
/// sent twice, and whether it is depends on how long the server took, so on a loaded machine
/// a count would change from run to run. Tests of hedging turn it on
/// (`.set("hedge.enabled", true)`).
pub fn isolated() -> ClientBuilder {
    without_hedging(
        Client::builder()
            .user_config_file(None)
            .project_config_file(None)
            .environment(Vec::<(String, String)>::new()),
    )
}

/// [`isolated`] with short waits between attempts (10 ms, at most 50 ms), so that tests of
/// retries stay fast.
pub fn quick() -> ClientBuilder {
    isolated()
        .set("retry.initial_backoff", "10ms")
        .set("retry.max_backoff", "50ms")
}

/// A client with Karu's defaults, hedging off ([`isolated`]).
///
/// # Panics
/// If the client does not build.
pub fn client() -> Client {
    isolated().build().expect("an isolated client builds")
}

/// Take every completion of `batch`, failing the test if one takes longer than [`PATIENCE`]
/// (instead of hanging), sorted by submission index.
///
/// # Panics
/// If no completion arrives within [`PATIENCE`].
pub fn drain(batch: &Batch) -> Vec<Completion> {
    let mut all = Vec::new();
    loop {
        match batch.next_timeout(PATIENCE) {
            Next::Completion(c) => all.push(c),
            Next::Drained => break,
            Next::TimedOut => panic!("no completion within {PATIENCE:?}; {batch:?}"),
        }
    }
    all.sort_by_key(Completion::index);
    all
}

/// Submit `reads` of `(offset, length)` on `object` as one batch and take their completions,
/// in submission order.
pub fn read_all(client: &Client, object: &Locator, reads: &[(u64, u64)]) -> Vec<Completion> {
    let batch = client.submit(reads.iter().map(|&(o, l)| Read::new(object, o, l)));
    drain(&batch)
}

/// Submit `reads` as one batch and assert every one delivered its exact pattern bytes.
#[track_caller]
pub fn read_all_ok(client: &Client, object: &Locator, reads: &[(u64, u64)]) {
    for (c, &(offset, length)) in read_all(client, object, reads).iter().zip(reads) {
        assert_ok(c, offset, length);
    }
}

/// One read as a one-read batch, its completion.
pub fn read_one(client: &Client, object: &Locator, offset: u64, length: u64) -> Completion {
    drain(&client.submit([Read::new(object, offset, length)]))
        .pop()
        .expect("one completion")
}

/// Assert that `bytes` are the pattern bytes from absolute offset `start`, naming the first
/// difference instead of printing two long vectors.
#[track_caller]
pub fn assert_pattern(bytes: &[u8], start: u64, len: u64) {
    assert_eq!(
        bytes.len() as u64,
        len,
        "length of the bytes read at {start}"
    );
    if let Some(i) = (0..bytes.len()).find(|&i| bytes[i] != pattern_byte(start + i as u64)) {
        panic!(
            "byte {i} of the read at {start} (object offset {}) is {:#04x}, expected {:#04x}",
            start + i as u64,
            bytes[i],
            pattern_byte(start + i as u64)
        );
    }
}

/// Assert a successful read of `len` pattern bytes at absolute offset `start`.
#[track_caller]
pub fn assert_ok(c: &Completion, start: u64, len: u64) {
    assert_eq!(c.status(), Status::Ok, "{c:?}");
    assert_eq!(c.bytes_received(), len, "{c:?}");
    assert_pattern(c.bytes(), start, len);
}

/// Assert a read that reached the end of the object after `prefix` pattern bytes.
#[track_caller]
pub fn assert_prefix(c: &Completion, start: u64, prefix: u64) {
    assert_eq!(c.status(), Status::RangeNotSatisfiable, "{c:?}");
    assert_eq!(c.bytes_received(), prefix, "{c:?}");
    assert_pattern(c.bytes(), start, prefix);
}

/// Assert a read that failed on its own with `status`, delivering nothing.
#[track_caller]
pub fn assert_failed(c: &Completion, status: Status) {
    assert_eq!(c.status(), status, "{c:?}");
    assert_eq!(c.bytes_received(), 0, "{c:?}");
    assert!(c.bytes().is_empty(), "{c:?}");
    assert_eq!(c.error().map(karu::Error::status), Some(status), "{c:?}");
}

/// `builder` with hedging off (`hedge.enabled = false`): a client whose requests a test
/// counts ([`assert_requests`]) must send no duplicates of requests kept waiting, which a
/// loaded machine would otherwise make it send.
pub fn without_hedging(builder: ClientBuilder) -> ClientBuilder {
    builder.set("hedge.enabled", false)
}

/// Assert that a server's request `log` holds exactly `expected` requests: none lost, none
/// repeated. The count is the server's, never the client's own counters (a bound taken from
/// the client's count of its duplicates would pass any request it repeated and counted);
/// the client must run [`without_hedging`].
///
/// # Panics
/// If the log holds another number of requests (the message lists the first of them).
#[track_caller]
pub fn assert_requests(log: &[RequestRecord], expected: usize) {
    if log.len() != expected {
        let shown: Vec<String> = log.iter().take(20).map(ToString::to_string).collect();
        panic!(
            "the server saw {} requests; expected {expected}:\n{}{}",
            log.len(),
            shown.join("\n"),
            if log.len() > shown.len() { "\n..." } else { "" }
        );
    }
}

/// Write a file of `len` pattern bytes, `dir/name`, and return its path.
///
/// # Panics
/// If the file cannot be written.
pub fn pattern_file(dir: &Path, name: &str, len: u64) -> PathBuf {
    let path = dir.join(name);
    let len = usize::try_from(len).expect("a pattern file fits in memory");
    std::fs::write(&path, pattern(0, len)).expect("write a pattern file");
    path
}

/// Resolve a local path.
///
/// # Panics
/// If the path is not UTF-8 or does not resolve.
pub fn locate_file(client: &Client, path: &Path) -> Locator {
    client
        .locate(path.to_str().expect("temporary paths are UTF-8"))
        .expect("a local path resolves")
}

/// The rustls error in `error`'s source chain, following `io::Error` payloads: what a test of
/// a TLS endpoint (a private CA given or not with `http.ca_file`) asserts the cause of a
/// failed read or token exchange to be.
pub fn rustls_cause(error: &(dyn std::error::Error + 'static)) -> Option<rustls::Error> {
    let mut next = Some(error);
    while let Some(e) = next {
        if let Some(tls) = e.downcast_ref::<rustls::Error>() {
            return Some(tls.clone());
        }
        next = match e
            .downcast_ref::<std::io::Error>()
            .and_then(|io| io.get_ref())
        {
            Some(inner) => Some(inner as &(dyn std::error::Error + 'static)),
            None => e.source(),
        };
    }
    None
}

#[cfg(test)]
mod tests {
    use super::assert_requests;
    use crate::RequestRecord;

    /// A log of requests for these ranges.
    fn log(ranges: &[(u64, u64)]) -> Vec<RequestRecord> {
        ranges
            .iter()
            .enumerate()
            .map(|(i, &range)| RequestRecord {
                method: "GET".into(),
                path: "/o".into(),
                query: None,
                headers: Vec::new(),
                range: Some(format!("bytes={}-{}", range.0, range.1)),
                byte_range: Some(range),
                status: 206,
                body_bytes: range.1 - range.0 + 1,
                connection: i as u64 + 1,
                fault: None,
                latency: std::time::Duration::ZERO,
                paced_bytes: 0,
            })
            .collect()
    }

    #[test]
    fn the_requests_seen_are_exactly_those_due() {
        assert_requests(&log(&[(0, 9), (10, 19), (20, 29)]), 3);
        // A request repeated, or lost: whatever the client says it sent.
        for (seen, expected) in [
            (log(&[(0, 9), (10, 19), (10, 19), (20, 29)]), 3),
            (log(&[(0, 9), (20, 29)]), 3),
        ] {
            let held = std::panic::catch_unwind(|| assert_requests(&seen, expected));
            assert!(held.is_err(), "{} requests for {expected}", seen.len());
        }
    }
}
