//! Helpers shared by the remote-read tests (HTTP and S3): draining batches without hanging,
//! and checking completions against the mock servers' byte pattern.
//!
//! Declared from `support/http.rs` and `support/s3.rs` with `#[path = "remote.rs"] mod remote;`.
#![allow(dead_code)]

use std::time::Duration;

use karu::{Batch, Client, Completion, Locator, Next, Read, Status};
use karu_testkit::pattern_byte;

/// How long a test waits for something that must happen; only reached when the code is broken.
pub(crate) const PATIENCE: Duration = Duration::from_secs(30);

/// Take every completion of `batch`, failing the test if one takes longer than [`PATIENCE`]
/// (instead of hanging), sorted by submission index.
pub(crate) fn drain(batch: &Batch) -> Vec<Completion> {
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

/// Submit `reads` of `(offset, length)` on `object` and take their completions.
pub(crate) fn read_all(client: &Client, object: &Locator, reads: &[(u64, u64)]) -> Vec<Completion> {
    let batch = client.submit(reads.iter().map(|&(o, l)| Read::new(object, o, l)));
    drain(&batch)
}

/// Submit `reads` as one batch and assert every one delivered its exact pattern bytes.
#[track_caller]
pub(crate) fn read_all_ok(client: &Client, object: &Locator, reads: &[(u64, u64)]) {
    for (c, &(offset, length)) in read_all(client, object, reads).iter().zip(reads) {
        assert_ok(c, offset, length);
    }
}

/// One read as a one-read batch, its completion.
pub(crate) fn read_one(client: &Client, object: &Locator, offset: u64, length: u64) -> Completion {
    drain(&client.submit([Read::new(object, offset, length)]))
        .pop()
        .expect("one completion")
}

/// Assert that `bytes` are the mock's pattern bytes from absolute offset `start`, naming the
/// first difference instead of printing two long vectors.
#[track_caller]
pub(crate) fn assert_pattern(bytes: &[u8], start: u64, len: u64) {
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
pub(crate) fn assert_ok(c: &Completion, start: u64, len: u64) {
    assert_eq!(c.status(), Status::Ok, "{c:?}");
    assert_eq!(c.bytes_received(), len, "{c:?}");
    assert_pattern(c.bytes(), start, len);
}

/// Assert a read that reached the end of the object after `prefix` bytes.
#[track_caller]
pub(crate) fn assert_prefix(c: &Completion, start: u64, prefix: u64) {
    assert_eq!(c.status(), Status::RangeNotSatisfiable, "{c:?}");
    assert_eq!(c.bytes_received(), prefix, "{c:?}");
    assert_pattern(&c.bytes()[..prefix as usize], start, prefix);
}

/// Assert a read that failed on its own with `status`, delivering nothing.
#[track_caller]
pub(crate) fn assert_failed(c: &Completion, status: Status) {
    assert_eq!(c.status(), status, "{c:?}");
    assert_eq!(c.bytes_received(), 0, "{c:?}");
    assert_eq!(c.error().map(karu::Error::status), Some(status), "{c:?}");
}
