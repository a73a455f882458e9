//! The promise under random faults. Random batches of reads over several objects, planned with
//! random settings (merging, parts, concurrency, loops), go to a mock server that misbehaves on
//! random requests with the faults of its plan, while one of the objects may be replaced by
//! another version (other bytes, another size) part-way through the batch. Whatever happens:
//!
//! - each read gets exactly one completion;
//! - a read that succeeds holds exactly its bytes, of its own object, all of one version;
//! - a read that reports the end of its object holds exactly the bytes before the real end of
//!   that version, which lies inside the read (never a false end of object), unless a bare 416
//!   told the client so and nothing refuted it;
//! - any other failure delivers nothing;
//! - `stat` and `read_ends` after the batch state a size of one version, and both ends' bytes
//!   of that version;
//! - a batch that keeps to one version delivers bytes of one version of the replaced object
//!   (where its versions have strong ETags that differ: nothing tells weak, missing or equal
//!   ones apart across requests);
//! - where every fault of a case is one a client must ride out (a retryable status, a body cut
//!   or reset part-way, a delay, a `200` that proves its range, a body delimited by closing the
//!   connection, a large error body), every read of an object that was not replaced ends as it
//!   does on a well-behaved server;
//! - a read that requires a version (`If-Match`) gets bytes of that version, where Karu can
//!   tell (strong tags) or the server enforces the condition;
//! - on a well-behaved server, no byte of an object is requested twice (unless merging is off,
//!   reads require different versions, or the object has no strong ETag and a read of it is
//!   fetched in parts).
//!
//! Each case comes from a seed (the tests' SplitMix64 [`Rng`]) and is printed when it fails.
//! `CHAOS_SEED` and `CHAOS_CASES` explore further, e.g.
//! `CHAOS_CASES=2000 cargo test -p karu-api --test http_random_faults` (some seven minutes for
//! the two tests on two cores).

#[path = "support/http.rs"]
mod http_support;
mod support;

use std::fmt::Write as _;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use http_support::{KIB, describe, drain, quick};
use karu::{BatchOptions, Client, Completion, Evidence, Locator, Read, Status};
use karu_testkit::{
    Fault, FaultRule, Gate, GateResponse, MockServer, RequestHead, RequestRecord, pattern_byte,
};
use support::Rng;

/// Cases each run of the test tries (more with `CHAOS_CASES`).
const CASES: u64 = 100;

/// The objects every case reads: a path, a size, and the `ETag` it is served with (`None`: no
/// `ETag` at all; a weak one may not be resumed).
const OBJECTS: [(&str, u64, Option<&str>); 6] = [
    ("/empty", 0, Some("\"e0\"")),
    ("/tiny", 7, Some("\"t1\"")),
    ("/small", 100_000, Some("\"s1\"")),
    ("/untagged", 700_001, None),
    ("/large", 1_300_000, Some("\"l1\"")),
    ("/weak", 333_333, Some("W/\"w1\"")),
];

/// An object replaced by another version during the batch (after a random number of its
/// requests, or never): two versions of different bytes and sizes, stored at their own paths
/// and served at this one by a [`Gate`].
const CHANGING: &str = "/changing";

/// The changing object's versions: where each is stored, its size, and its salt (the `k` of
/// [`object_byte`]).
const VERSIONS: [(&str, u64, usize); 2] = [
    ("/changing@1", 300_000, OBJECTS.len()),
    ("/changing@2", 250_000, OBJECTS.len() + 1),
];

/// The index of [`CHANGING`] among the objects a read may ask for (after [`OBJECTS`]).
const CHANGING_INDEX: usize = OBJECTS.len();

/// One version of an object a read may see: its salt and its size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Version {
    salt: usize,
    size: u64,
}

/// The versions a read of object `object` may see.
fn versions(object: usize) -> Vec<Version> {
    match OBJECTS.get(object) {
        Some(&(_, size, _)) => vec![Version { salt: object, size }],
        None => VERSIONS
            .iter()
            .map(|&(_, size, salt)| Version { salt, size })
            .collect(),
    }
}

/// Whether an `ETag` is a strong one (a weak one starts with `W/`).
fn strong(etag: Option<&str>) -> bool {
    etag.is_some_and(|t| t.starts_with('"'))
}

fn path_of(object: usize) -> &'static str {
    OBJECTS.get(object).map_or(CHANGING, |o| o.0)
}

/// Serves [`CHANGING`] from its first version for its first `after` requests, then from the
/// second.
#[derive(Debug)]
struct Replace {
    after: u64,
    seen: AtomicU64,
}

impl Gate for Replace {
    fn check(&self, _: &RequestHead) -> Option<GateResponse> {
        None
    }

    fn object_path(&self, request: &RequestHead) -> Option<String> {
        (request.path == CHANGING).then(|| {
            let n = self.seen.fetch_add(1, Ordering::SeqCst);
            VERSIONS[usize::from(n >= self.after)].0.to_string()
        })
    }
}

/// What the caller's buffers hold before a read (any byte value is some object's somewhere,
/// so a byte left unwritten is caught only where the object's byte differs: 255 of 256).
const UNWRITTEN: u8 = 0xA5;

/// Object `k`'s byte at `offset`: the mock's pattern, moved by a distance no read reaches, so
/// a byte of another object (or of another offset) never passes for the one asked.
fn object_byte(k: usize, offset: u64) -> u8 {
    pattern_byte(offset + ((k as u64 + 1) << 36))
}

fn object_body(k: usize, size: u64) -> Vec<u8> {
    (0..size).map(|i| object_byte(k, i)).collect()
}

/// One read of a case: the object's index, the offset and the length.
#[derive(Debug, Clone, Copy)]
struct Ask {
    object: usize,
    offset: u64,
    length: u64,
    /// The version of [`CHANGING`] the read requires (`If-Match` with its strong tag).
    if_match: Option<usize>,
}

/// The strong tags a read of [`CHANGING`] may require, by version.
const REQUIRED: [&str; 2] = ["\"c1\"", "\"c2\""];

impl Ask {
    /// The read, into Karu's buffer or into `buffer`.
    fn read<'b>(&self, object: &Locator, buffer: Option<&'b mut [u8]>) -> Read<'b> {
        let read = match buffer {
            Some(buffer) => Read::borrowed(object, self.offset, buffer),
            None => Read::new(object, self.offset, self.length),
        };
        match self.if_match {
            Some(v) => read.if_match(REQUIRED[v]),
            None => read,
        }
    }
}

/// A probe of one object after the batch: `stat`, then `read_ends(head, tail)`.
#[derive(Debug, Clone, Copy)]
struct Probe {
    object: usize,
    head: u64,
    tail: u64,
}

/// A fault planted on the server: for the requests of `path` (any, if `None`), after `skip`
/// of them, `times` times.
#[derive(Debug, Clone)]
struct Planted {
    fault: Fault,
    path: Option<&'static str>,
    skip: u64,
    times: u64,
}

impl Planted {
    fn rule(&self) -> FaultRule {
        let rule = FaultRule::new(self.fault.clone())
            .skip(self.skip)
            .times(self.times);
        match self.path {
            Some(path) => rule.path(path),
            None => rule,
        }
    }

    /// Whether it may serve a read of `path` that its `If-Match` does not allow.
    fn ignores_if_match(&self, path: &str) -> bool {
        self.fault == Fault::IgnoreIfMatch && self.path.is_none_or(|p| p == path)
    }

    /// Whether it may answer a read of `path` with a bare 416: no size, no `Content-Range`, a
    /// claim that the object ends before the range that nothing else in the answer can refute.
    fn may_end_early(&self, path: &str) -> bool {
        matches!(self.fault, Fault::Status { code: 416, .. }) && self.path.is_none_or(|p| p == path)
    }
}

/// One case: the client's settings, the batch, and the server's faults.
#[derive(Debug)]
struct Case {
    seed: u64,
    settings: Vec<(&'static str, &'static str)>,
    reads: Vec<Ask>,
    faults: Vec<Planted>,
    /// Every fault is one a client must ride out: every read ends as without faults.
    ridden_out: bool,
    /// After how many of its requests [`CHANGING`] is replaced (`None`: never).
    change_after: Option<u64>,
    /// The `ETag`s of its two versions.
    changing_etags: [Option<&'static str>; 2],
    /// The batch keeps to one version of each object (`BatchOptions::one_version`).
    one_version: bool,
    /// The reads land in the caller's buffers (`Read::borrowed`), not in Karu's.
    borrowed: bool,
    /// Probes of objects after the batch.
    probes: Vec<Probe>,
}

impl Case {
    fn new(seed: u64) -> Case {
        let mut rng = Rng::new(seed);
        let settings = vec![
            (
                "planner.max_gap",
                *rng.pick(&["0", "1KiB", "64KiB", "1MiB"]),
            ),
            ("planner.trade", *rng.pick(&["guards", "priced"])),
            ("http.part_size", *rng.pick(&["0", "64KiB", "8MiB"])),
            ("concurrency", *rng.pick(&["1", "3", "16"])),
            ("io_threads", *rng.pick(&["1", "2"])),
        ];
        let count = rng.range(1, 25);
        let mut reads: Vec<Ask> = Vec::new();
        for _ in 0..count {
            if !reads.is_empty() && rng.chance(10) {
                // The same read twice in one batch.
                let again = *rng.pick(&reads);
                reads.push(again);
                continue;
            }
            let object = rng.range(0, OBJECTS.len() as u64 + 1) as usize;
            let size = versions(object)[0].size;
            let length = match rng.range(0, 4) {
                0 => rng.range(1, 17),
                1 => rng.range(1, 8 * KIB),
                2 => rng.range(60 * KIB, 300 * KIB),
                _ => rng.range(1, 2 * KIB),
            };
            let offset = match rng.range(0, 5) {
                // Anywhere, or a little past the end.
                0 | 1 => rng.range(0, size + 64),
                // Ending at, just before or just after the end.
                2 => (size + rng.range(0, 3)).saturating_sub(length + 1),
                // Across a part boundary.
                3 => {
                    let boundary = 64 * KIB * rng.range(1, 8);
                    boundary.saturating_sub(rng.range(0, length + 1))
                }
                // Right after the previous read: adjacent reads to merge.
                _ => reads
                    .last()
                    .filter(|r| r.object == object)
                    .map_or(0, |r| r.offset + r.length + rng.range(0, 3)),
            };
            let if_match =
                (object == CHANGING_INDEX && rng.chance(25)).then(|| rng.range(0, 2) as usize);
            reads.push(Ask {
                object,
                offset,
                length,
                if_match,
            });
        }
        let mut faults = Vec::new();
        let mut ridden_out = true;
        let fault_count = if rng.chance(25) { 0 } else { rng.range(1, 4) };
        for _ in 0..fault_count {
            let (fault, survivable) = random_fault(&mut rng);
            ridden_out &= survivable;
            let skip = rng.range(0, 5);
            let times = rng.range(1, 4);
            let path = rng
                .chance(70)
                .then(|| path_of(rng.range(0, OBJECTS.len() as u64 + 1) as usize));
            faults.push(Planted {
                fault,
                path,
                skip,
                times,
            });
        }
        let change_after = rng.chance(60).then(|| rng.range(0, 6));
        let changing_etags = *rng.pick(&[
            [Some("\"c1\""), Some("\"c2\"")],
            [None, None],
            [Some("W/\"c1\""), Some("W/\"c2\"")],
            // A server whose tag does not change with the content.
            [Some("\"c0\""), Some("\"c0\"")],
        ]);
        let one_version = rng.chance(50);
        let borrowed = rng.chance(30);
        let lengths = [0, 1, 7, 64 * KIB, 100_000, 400_000];
        let probes = (0..rng.range(0, 3))
            .map(|_| Probe {
                object: rng.range(0, OBJECTS.len() as u64 + 1) as usize,
                head: *rng.pick(&lengths),
                tail: *rng.pick(&lengths),
            })
            .collect();
        Case {
            seed,
            settings,
            reads,
            faults,
            ridden_out,
            change_after,
            changing_etags,
            one_version,
            borrowed,
            probes,
        }
    }
}

/// A fault of the mock's plan, and whether a client must ride it out (the reads end as they
/// would without it). Faults that only delay (a trickle, a request never answered) are left
/// to the tests of timeouts: here they would only make the run slow.
fn random_fault(rng: &mut Rng) -> (Fault, bool) {
    match rng.range(0, 15) {
        0 => (Fault::Latency(Duration::from_millis(rng.range(1, 6))), true),
        1 => (
            Fault::Status {
                code: *rng.pick(&[500, 502, 503, 504, 429]),
                retry_after: rng.chance(30).then(|| "0".to_string()),
            },
            true,
        ),
        2 => (Fault::CutBodyAfter(rng.range(0, 70_000)), true),
        3 => (Fault::ResetAfter(rng.range(0, 70_000)), true),
        4 => (Fault::OkWithContentRange, true),
        5 => (Fault::CloseDelimited, true),
        6 => (
            Fault::OversizedErrorBody {
                code: 503,
                size: rng.range(1, 300_000) as usize,
            },
            true,
        ),
        7 => (Fault::IgnoreRange, false),
        8 => (
            Fault::WrongContentRange {
                shift: *rng.pick(&[-4096, -1, 1, 7, 100_000]),
            },
            false,
        ),
        9 => (Fault::MissingContentRange, false),
        10 => (Fault::Gzip, false),
        11 => (Fault::ChangeEtag, false),
        12 => (Fault::IgnoreIfMatch, false),
        13 => (
            Fault::Status {
                code: *rng.pick(&[403, 404, 410, 412]),
                retry_after: None,
            },
            false,
        ),
        _ => (
            Fault::Status {
                code: 416,
                retry_after: None,
            },
            false,
        ),
    }
}

/// Serve every object afresh (a new version; the `ETag`s of [`OBJECTS`] and the case's for
/// [`CHANGING`]), no faults, an empty log.
fn reset(server: &MockServer, case: &Case) {
    server.clear_faults();
    for (k, &(path, size, etag)) in OBJECTS.iter().enumerate() {
        server.insert(path, object_body(k, size));
        server.set_etag(path, etag);
    }
    for (&(path, size, salt), etag) in VERSIONS.iter().zip(case.changing_etags) {
        server.insert(path, object_body(salt, size));
        server.set_etag(path, etag);
    }
    server.set_gate(Some(Arc::new(Replace {
        after: case.change_after.unwrap_or(u64::MAX),
        seen: AtomicU64::new(0),
    })));
    server.take_requests();
}

fn client(case: &Case, transport: &[(&str, String)]) -> Client {
    let mut builder = quick();
    for (key, value) in transport {
        builder = builder.set(key, value.as_str());
    }
    for &(key, value) in &case.settings {
        builder = builder.set(key, value);
    }
    builder.build().expect("the case's client builds")
}

/// What is wrong with `c`, the completion of `ask` that delivered `bytes`, if it is of version
/// `v`. `exact`: the case's faults are all ridden out, so the read must end as on a
/// well-behaved server. `told_end`: a bare 416 may have told the client that the object ends
/// before the read, and nothing refuted it (the bytes delivered must still be right).
fn judge(
    ask: &Ask,
    v: Version,
    c: &Completion,
    bytes: &[u8],
    exact: bool,
    told_end: bool,
) -> Option<String> {
    let size = v.size;
    let end = ask.offset + ask.length;
    let exists = size.saturating_sub(ask.offset).min(ask.length);
    let wrong_byte = |n: u64| {
        if bytes.len() as u64 != n {
            return Some(format!("{} bytes delivered, not {n}", bytes.len()));
        }
        (0..bytes.len())
            .find(|&i| bytes[i] != object_byte(v.salt, ask.offset + i as u64))
            .map(|i| format!("byte {i} of the read is wrong"))
    };
    match c.status() {
        Status::Ok => {
            if end > size {
                return Some(format!(
                    "OK for a read past the end of a {size}-byte object"
                ));
            }
            if c.bytes_received() != ask.length {
                return Some(format!("OK with {} bytes received", c.bytes_received()));
            }
            wrong_byte(ask.length)
        }
        Status::RangeNotSatisfiable if told_end && c.bytes_received() < exists => {
            wrong_byte(c.bytes_received())
        }
        Status::RangeNotSatisfiable => {
            if end <= size {
                return Some(format!(
                    "a false end of object: the object has {size} bytes"
                ));
            }
            if c.bytes_received() != exists {
                return Some(format!(
                    "{} bytes received before the end, not {exists}",
                    c.bytes_received()
                ));
            }
            // The size the end was proven with: the object's own on a server that tells the
            // truth about it; at least one that agrees with the bytes delivered on any other.
            if let Some(Evidence::EndOfObject {
                size: Some(stated), ..
            }) = c.error().and_then(karu::Error::evidence)
            {
                let agrees = if exists > 0 {
                    *stated == ask.offset + exists
                } else {
                    *stated <= ask.offset
                };
                if (exact && *stated != size) || !agrees {
                    return Some(format!("an end of object stating size {stated}"));
                }
            }
            (0..exists as usize)
                .find(|&i| bytes.get(i) != Some(&object_byte(v.salt, ask.offset + i as u64)))
                .map(|i| format!("byte {i} of the prefix is wrong"))
        }
        status => {
            if exact {
                return Some(format!("{status:?} although every fault is ridden out"));
            }
            (c.bytes_received() != 0)
                .then(|| format!("{status:?} with {} bytes received", c.bytes_received()))
        }
    }
}

/// Run `case` on `server`; a description of everything wrong, if anything is.
fn run(server: &MockServer, transport: &[(&str, String)], case: &Case) -> Option<String> {
    reset(server, case);
    for planted in &case.faults {
        server.add_fault(planted.rule());
    }
    let client = client(case, transport);
    let objects: Vec<Locator> = (0..=CHANGING_INDEX)
        .map(|k| {
            client
                .locate(&server.url(path_of(k)))
                .expect("a mock server URL resolves")
        })
        .collect();
    let options = if case.one_version {
        BatchOptions::new().one_version()
    } else {
        BatchOptions::new()
    };
    // The caller's buffers start as one byte value: a read that left a byte unwritten is
    // caught wherever the object's byte differs from it (see `UNWRITTEN`).
    let mut buffers: Vec<Vec<u8>> = case
        .reads
        .iter()
        .map(|a| vec![UNWRITTEN; if case.borrowed { a.length as usize } else { 0 }])
        .collect();
    let done = if case.borrowed {
        client.scope(|scope| {
            let batch = scope.submit(
                case.reads
                    .iter()
                    .zip(buffers.iter_mut())
                    .map(|(a, buffer)| a.read(&objects[a.object], Some(buffer))),
                &options,
            );
            drain(&batch)
        })
    } else {
        drain(&client.submit_with(
            case.reads.iter().map(|a| a.read(&objects[a.object], None)),
            &options,
        ))
    };
    let log = server.take_requests();
    let mut wrong = String::new();
    let indices: Vec<usize> = done.iter().map(Completion::index).collect();
    if indices != (0..case.reads.len()).collect::<Vec<_>>() {
        let _ = writeln!(wrong, "completions for the reads {indices:?}");
    }
    // The versions of the changing object each read of it can be of (all, for a read that
    // delivered nothing).
    let mut seen_versions: Vec<(usize, Vec<Version>)> = Vec::new();
    for c in &done {
        let Some(ask) = case.reads.get(c.index()) else {
            continue;
        };
        let path = path_of(ask.object);
        let told_end = case.faults.iter().any(|f| f.may_end_early(path));
        // A replaced object may fail reads (its parts, or its version, changed under them), and
        // a read that requires a version fails where another is served (or no strong tag).
        let exact = case.ridden_out
            && !(path == CHANGING && case.change_after.is_some())
            && ask.if_match.is_none();
        // A read that requires a version gets that one, where Karu can tell (strong tags) or
        // the server enforces the condition (no fault makes it ignore `If-Match`).
        let enforced =
            strong(case.changing_etags[0]) || !case.faults.iter().any(|f| f.ignores_if_match(path));
        let candidates: Vec<Version> = versions(ask.object)
            .into_iter()
            .enumerate()
            .filter(|&(i, _)| !enforced || ask.if_match.is_none_or(|v| v == i))
            .map(|(_, v)| v)
            .collect();
        let bytes = if case.borrowed {
            let received = (c.bytes_received() as usize).min(ask.length as usize);
            &buffers[c.index()][..received]
        } else {
            c.bytes()
        };
        let fits: Vec<Version> = candidates
            .iter()
            .copied()
            .filter(|&v| judge(ask, v, c, bytes, exact, told_end).is_none())
            .collect();
        if fits.is_empty() {
            for &v in &candidates {
                let why = judge(ask, v, c, bytes, exact, told_end).unwrap_or_default();
                let _ = writeln!(wrong, "read {} {ask:?} of {v:?}: {why}; {c:?}", c.index());
            }
        } else if path == CHANGING && c.bytes_received() > 0 {
            seen_versions.push((c.index(), fits));
        }
    }
    // Keeping to one version, the reads that delivered bytes of the changing object did so
    // from one version (which only strong ETags that differ can tell).
    let [a, b] = case.changing_etags;
    if case.one_version && strong(a) && a != b {
        let common = VERSIONS.iter().any(|&(_, size, salt)| {
            let v = Version { salt, size };
            seen_versions.iter().all(|(_, fits)| fits.contains(&v))
        });
        if !common {
            let _ = writeln!(
                wrong,
                "a batch that keeps to one version read two of {CHANGING}: {seen_versions:?}"
            );
        }
    }
    // On a well-behaved server no byte is asked for twice, except where merging is off (a
    // gap of zero disables it, overlaps included) and, for an object without a strong ETag,
    // the first part of a read in parts (then fetched in one request: parts could not be
    // proven to be one version). Parts of 64 KiB split these reads; of 8 MiB, none.
    let setting = |key: &str| {
        case.settings
            .iter()
            .find(|&&(k, _)| k == key)
            .map(|&(_, v)| v)
    };
    let merging = setting("planner.max_gap") != Some("0");
    let split = setting("http.part_size") == Some("64KiB");
    if case.faults.is_empty() && merging {
        // The changing object, unless it was replaced (then requests may repeat) or a read
        // requires a version (reads of different conditions never merge).
        let conditions = case.reads.iter().any(|a| a.if_match.is_some());
        let changing = (case.change_after.is_none() && !conditions).then_some((
            CHANGING,
            0,
            case.changing_etags[0],
        ));
        for (path, _, etag) in OBJECTS.into_iter().chain(changing) {
            let most = if split && !strong(etag) { 2 } else { 1 };
            if let Some(why) = requested_too_often(&log, path, most) {
                let _ = writeln!(wrong, "{path}: {why}");
            }
        }
    }
    // The probes, after the batch (their requests are not the batch's).
    for probe in &case.probes {
        let object = &objects[probe.object];
        let path = path_of(probe.object);
        let told_end = case.faults.iter().any(|f| f.may_end_early(path));
        let exact = case.ridden_out && !(path == CHANGING && case.change_after.is_some());
        let candidates = versions(probe.object);
        match client.stat(object) {
            Ok(info) => {
                let size_fits = |v: &Version| match info.size {
                    Some(size) => size == v.size || (told_end && size < v.size),
                    None => !exact,
                };
                if !candidates.iter().any(size_fits) {
                    let _ = writeln!(wrong, "stat of {path}: {info:?}, of none of {candidates:?}");
                }
            }
            Err(e) if exact => {
                let _ = writeln!(
                    wrong,
                    "stat of {path} failed although every fault is ridden out: {e}"
                );
            }
            Err(_) => {}
        }
        match client.read_ends(object, probe.head, probe.tail) {
            Ok(ends) => {
                // The size, the head and the tail of one version (or, where a bare 416 may have
                // told of an earlier end, of that version as if it ended there).
                let fits = |v: &Version| {
                    let size = ends.size;
                    let bytes = |from: u64, n: u64| -> Vec<u8> {
                        (from..from + n).map(|i| object_byte(v.salt, i)).collect()
                    };
                    (size == v.size || (told_end && size < v.size))
                        && ends.head == bytes(0, probe.head.min(size))
                        && ends.tail == bytes(size - probe.tail.min(size), probe.tail.min(size))
                };
                if !candidates.iter().any(fits) {
                    let _ = writeln!(
                        wrong,
                        "read_ends({}, {}) of {path}: size {}, {} head and {} tail bytes, of none of {candidates:?}",
                        probe.head,
                        probe.tail,
                        ends.size,
                        ends.head.len(),
                        ends.tail.len()
                    );
                }
            }
            Err(e) if exact => {
                let _ = writeln!(
                    wrong,
                    "read_ends of {path} failed although every fault is ridden out: {e}"
                );
            }
            Err(_) => {}
        }
    }
    let probes = server.take_requests();
    (!wrong.is_empty()).then(|| {
        format!(
            "{wrong}requests:\n{}probes' requests:\n{}",
            describe(&log),
            describe(&probes)
        )
    })
}

/// Bytes of `path` that more than `most` requests of `log` asked for, if any (or a request
/// without one closed range).
fn requested_too_often(log: &[RequestRecord], path: &str, most: usize) -> Option<String> {
    // +1 where a range starts, -1 after it ends; sorted, a start after an end at one byte.
    let mut edges = Vec::new();
    for r in log.iter().filter(|r| r.path == path) {
        match r.byte_range {
            Some((a, b)) => edges.extend([(a, 1i64), (b + 1, -1)]),
            None => return Some(format!("a request without one closed range: {:?}", r.range)),
        }
    }
    edges.sort_unstable_by_key(|&(at, step)| (at, step));
    let mut depth = 0;
    for (at, step) in edges {
        depth += step;
        if depth > most as i64 {
            return Some(format!("byte {at} was requested {depth} times"));
        }
    }
    None
}

fn env_u64(name: &str) -> Option<u64> {
    std::env::var(name).ok().map(|v| {
        v.parse()
            .unwrap_or_else(|_| panic!("{name} must be a number, found {v:?}"))
    })
}

/// Run `cases` cases (from `CHAOS_SEED`, and as many as `CHAOS_CASES` if set) against
/// `server`, with the client `transport` settings the server needs.
fn explore(server: &MockServer, transport: &[(&str, String)], cases: u64) {
    let first = env_u64("CHAOS_SEED").unwrap_or(1);
    let cases = env_u64("CHAOS_CASES").unwrap_or(cases);
    let mut kinds = [0u64; 2];
    for seed in first..first + cases {
        let case = Case::new(seed);
        kinds[usize::from(case.ridden_out)] += 1;
        if let Some(wrong) = run(server, transport, &case) {
            let seed = case.seed;
            panic!(
                "case {seed} failed (CHAOS_SEED={seed} CHAOS_CASES=1 runs it alone):\n{case:#?}\n{wrong}"
            );
        }
    }
    // The generator makes both kinds of case (a seed range that did not would test less).
    assert!(
        kinds.iter().all(|&n| n > 0) || cases < 10,
        "cases with faults a client may refuse, and with faults it rides out: {kinds:?}"
    );
}

#[test]
fn no_fault_makes_a_read_deliver_a_wrong_byte_or_a_false_end() {
    explore(&MockServer::start(), &[], CASES);
}

#[test]
fn no_fault_makes_a_read_deliver_a_wrong_byte_or_a_false_end_over_https_and_http2() {
    // Many streams on few connections: a fault that cuts or resets a connection ends every
    // stream on it.
    let server = MockServer::builder()
        .tls(true)
        .http2(true)
        .start()
        .expect("the HTTPS mock server starts");
    let ca = server
        .ca_file()
        .expect("an HTTPS mock server has a CA file");
    let transport = [
        ("http.ca_file", ca.to_string_lossy().into_owned()),
        ("http.version", "http2".to_string()),
    ];
    explore(&server, &transport, CASES / 2);
}
