//! Random cases: random reads over several objects, in one to three batches running at once,
//! planned with random settings (merging, parts, concurrency, loops; in a quarter of them
//! deadlines and timeouts of `u64::MAX` seconds), some through windows of
//! their object, into Karu's buffers, their own or the caller's, against the target's mock
//! server misbehaving on random requests with the faults of its plan, while one of the objects
//! may be replaced by another version (other bytes, another size) part-way through; after
//! them, `stat`, `read_ends` and [`ObjectReader`]s on random objects. Some cases go through
//! the asynchronous API (the batches polled together as `Stream`s, the futures of the probes
//! and readers, some of them started and dropped first), and some drop a batch part-way. A
//! target without a mock (a real server, local files) gets each case without its faults and
//! replacement, its reads that require a version requiring the server's own tag (or one it
//! never had), and stores the objects once. Whatever happens:
//!
//! - nothing hangs: a batch that gives no completion, or a future no answer, for
//!   [`PATIENCE`] fails the case;
//! - each read gets exactly one completion (of a batch dropped part-way, those taken before);
//! - a read of a local file that requires a version fails with `InvalidArgument` and delivers
//!   nothing;
//! - a read that leaves its bounded window fails with `InvalidRange` and delivers nothing;
//! - a read that succeeds holds exactly its bytes, of its own object, all of one version;
//! - a read that reports the end of its object holds exactly the bytes before the real end of
//!   that version, which lies inside the read (never a false end of object), unless a bare 416
//!   told the client so and nothing refuted it;
//! - any other failure delivers nothing;
//! - `stat` and `read_ends` after the batch state a size of one version, and both ends' bytes
//!   of that version;
//! - a reader's size is one version's; opened with a strong ETag that tells the versions
//!   apart, every read through it holds bytes of the version its size describes, or fails;
//!   an end of object it reports is that version's;
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
//!   fetched in parts; not counted on the client cases share).
//!
//! Some cases share one client for the whole run, as a program keeps one: nothing an earlier
//! case left in it may make a later read wrong or hang. Some submit and drain each batch on a
//! thread of its own, all submitting at once, as a program's threads share its client (and
//! read through each reader from two threads at once); some drop the client as soon as their
//! batches are submitted (the batches keep its engine running); some have two threads take
//! each batch's completions at once.
//!
//! Each case comes from a seed ([`Rng`]); a failure names its seed, and
//! [`Options::seeds`](super::Options::seeds) runs it alone.

use std::fmt::Write as _;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Barrier};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use futures::Stream;
use karu::{
    Batch, BatchOptions, Client, Completion, Evidence, Locator, Next, ObjectReader, Read,
    ScopedBatch, Status, Target,
};

use super::{Ctx, MockControl, Seeds};
use crate::http::timer::{Delay, Timer};
use crate::http::{
    Fault, FaultRule, Gate, GateResponse, MockServer, RequestHead, RequestRecord, pattern_byte,
};
use crate::rng::Rng;

const KIB: u64 = 1 << 10;

/// How long a case waits for a completion before it reports a hang.
const PATIENCE: Duration = Duration::from_secs(20);

/// Settings every client of the cases uses: short waits between attempts.
const SETTINGS: [(&str, &str); 2] = [
    ("retry.initial_backoff", "10ms"),
    ("retry.max_backoff", "50ms"),
];

/// The longest limit a setting takes (`u64::MAX` seconds), which Karu counts as 100 years.
const ENDLESS: &str = "18446744073709551615";

/// The settings of the client that cases with [`Case::shared`] use, one for the whole run.
const SHARED: [(&str, &str); 5] = [
    ("planner.max_gap", "64KiB"),
    ("planner.trade", "guards"),
    ("http.part_size", "64KiB"),
    ("concurrency", "3"),
    ("io_threads", "2"),
];

/// The objects every case reads: a name, a size, and the `ETag` it is served with (`None`: no
/// `ETag` at all; a weak one may not be resumed). One name, and [`CHANGING`]'s, hold a space,
/// `+`, `%` and a non-ASCII letter, which every request for them must carry exactly (as
/// `basic/names` checks once, here under faults, retries, resumes and versions).
const OBJECTS: [(&str, u64, Option<&str>); 6] = [
    ("random/empty", 0, Some("\"e0\"")),
    ("random/tiny", 7, Some("\"t1\"")),
    ("random/sm all+ü%", 100_000, Some("\"s1\"")),
    ("random/untagged", 700_001, None),
    ("random/large", 1_300_000, Some("\"l1\"")),
    ("random/weak", 333_333, Some("W/\"w1\"")),
];

/// An object replaced by another version during the batch (after a random number of its
/// requests, or never): two versions of different bytes and sizes, stored under their own names
/// and served under this one by a [`Gate`] wrapped around the target's.
const CHANGING: &str = "random/chang ing+é";

/// The changing object's versions: where each is stored, its size, and its salt (the `k` of
/// [`object_byte`]).
const VERSIONS: [(&str, u64, usize); 2] = [
    ("random/changing-1", 300_000, OBJECTS.len()),
    ("random/changing-2", 250_000, OBJECTS.len() + 1),
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

/// The name of object `object`.
fn name_of(object: usize) -> &'static str {
    OBJECTS.get(object).map_or(CHANGING, |o| o.0)
}

/// Serves [`CHANGING`] from its first version for its first `after` requests, then from the
/// second; answers everything else as the target's own gate (`inner`) does.
#[derive(Debug)]
struct Replace {
    inner: Option<Arc<dyn Gate>>,
    /// Where the server stores [`CHANGING`] and its versions.
    changing: String,
    versions: [String; 2],
    after: u64,
    seen: AtomicU64,
}

impl Gate for Replace {
    fn check(&self, request: &RequestHead) -> Option<GateResponse> {
        self.inner.as_ref()?.check(request)
    }

    fn object_path(&self, request: &RequestHead) -> Option<String> {
        let stored = self.inner.as_ref().and_then(|g| g.object_path(request));
        if stored.as_deref().unwrap_or(&request.path) != self.changing {
            return stored;
        }
        let n = self.seen.fetch_add(1, Ordering::SeqCst);
        Some(self.versions[usize::from(n >= self.after)].clone())
    }

    fn object_headers(&self, request: &RequestHead) -> Vec<(String, String)> {
        self.inner
            .as_ref()
            .map_or_else(Vec::new, |g| g.object_headers(request))
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
    /// The offset in the object (absolute, whatever the window).
    offset: u64,
    length: u64,
    /// The version of [`CHANGING`] the read requires (`If-Match` with the case's tag for it,
    /// [`Case::required`]).
    if_match: Option<usize>,
    /// The read goes through a window of the object: its start (at or before `offset`) and its
    /// length (`None`: to the end), which the read may leave by a byte.
    window: Option<(u64, Option<u64>)>,
    /// Into Karu's buffers, the read brings its own (`Read::with_buffer`), of this many bytes
    /// of [`UNWRITTEN`].
    recycled: Option<usize>,
}

/// The strong tags a read of [`CHANGING`] may require on a mock, by version.
const REQUIRED: [&str; 2] = ["\"c1\"", "\"c2\""];

/// A tag no version of any object has.
const NO_SUCH_VERSION: &str = "\"karu-no-such-version\"";

impl Ask {
    /// The read, into Karu's buffer (or its own) or into `buffer`, through its window if it has
    /// one.
    fn read<'b>(
        &self,
        object: &Locator,
        buffer: Option<&'b mut [u8]>,
        required: &[String; 2],
    ) -> Read<'b> {
        let (locator, offset) = match self.window {
            Some((start, len)) => (
                object
                    .with_window(start, len)
                    .expect("a window inside the object's u64 range"),
                self.offset - start,
            ),
            None => (object.clone(), self.offset),
        };
        let read = match (buffer, self.recycled) {
            (Some(buffer), _) => Read::borrowed(&locator, offset, buffer),
            (None, Some(n)) => {
                Read::new(&locator, offset, self.length).with_buffer(vec![UNWRITTEN; n])
            }
            (None, None) => Read::new(&locator, offset, self.length),
        };
        match self.if_match {
            Some(v) => read.if_match(required[v].clone()),
            None => read,
        }
    }

    /// Whether the read leaves its bounded window (and must fail with `InvalidRange`, delivering
    /// nothing).
    fn leaves_window(&self) -> bool {
        matches!(self.window, Some((start, Some(len))) if self.offset + self.length > start + len)
    }
}

/// A probe of one object after the batch: `stat`, then `read_ends(head, tail)`.
#[derive(Debug, Clone, Copy)]
struct Probe {
    object: usize,
    head: u64,
    tail: u64,
}

/// A reader of one object after the batches ([`ObjectReader::open`]): `read_many` of
/// `ranges`, then `read_at` of `at`.
#[derive(Debug, Clone)]
struct ReaderProbe {
    object: usize,
    ranges: Vec<(u64, u64)>,
    at: (u64, u64),
}

/// A fault planted on the server: for the requests of the object `name` (any request, if
/// `None`), after `skip` of them, `times` times.
#[derive(Debug, Clone)]
struct Planted {
    fault: Fault,
    name: Option<&'static str>,
    skip: u64,
    times: u64,
}

impl Planted {
    fn rule(&self, mock: &dyn MockControl) -> FaultRule {
        let rule = FaultRule::new(self.fault.clone())
            .skip(self.skip)
            .times(self.times);
        match self.name {
            Some(name) => rule.path(mock.path_of(name)),
            None => rule,
        }
    }

    /// Whether it may serve a read of `name` that its `If-Match` does not allow.
    fn ignores_if_match(&self, name: &str) -> bool {
        self.fault == Fault::IgnoreIfMatch && self.name.is_none_or(|n| n == name)
    }

    /// Whether it may answer a read of `name` with a bare 416: no size, no `Content-Range`, a
    /// claim that the object ends before the range that nothing else in the answer can refute.
    fn may_end_early(&self, name: &str) -> bool {
        matches!(self.fault, Fault::Status { code: 416, .. }) && self.name.is_none_or(|n| n == name)
    }
}

/// One case: the client's settings, the batch, and the server's faults.
#[derive(Debug)]
struct Case {
    settings: Vec<(&'static str, &'static str)>,
    reads: Vec<Ask>,
    faults: Vec<Planted>,
    /// Every fault is one a client must ride out: every read ends as without faults.
    ridden_out: bool,
    /// After how many of its requests [`CHANGING`] is replaced (`None`: never).
    change_after: Option<u64>,
    /// The `ETag`s of its two versions.
    changing_etags: [Option<&'static str>; 2],
    /// Each batch keeps to one version of each object (`BatchOptions::one_version`).
    one_version: bool,
    /// The reads land in the caller's buffers (`Read::borrowed`), not in Karu's.
    borrowed: bool,
    /// Probes of objects after the batch.
    probes: Vec<Probe>,
    /// The reads go in this many batches (1 to 3), of consecutive reads, all submitted before
    /// any is drained (or each on its own thread, see `threaded`): they run at once on the
    /// client's connections.
    batches: usize,
    /// Readers of objects after the probes.
    readers: Vec<ReaderProbe>,
    /// On a target without a mock: no faults, [`CHANGING`] never replaced (stored as its
    /// first version), reads that require a version require its own tag or one it never had.
    plain: bool,
    /// The tags reads of [`CHANGING`] require, by version.
    required: [String; 2],
    /// The objects are remote (they have versions; a local file has none, and its reads that
    /// require one fail with `InvalidArgument`).
    remote: bool,
    /// The batches are drained as `Stream`s, polled together on one thread, and the probes and
    /// readers are their futures (`stat_async`, `read_ends_async`, `ObjectReader::open_async`,
    /// `read_many_async`, `read_at_async`), all driven by `futures::executor::block_on`.
    asynchronous: bool,
    /// A batch dropped part-way (cancelling its remaining reads): its index, and how many of
    /// its completions are taken before.
    abandon: Option<(usize, usize)>,
    /// In an asynchronous case, each probe and reader first starts the same work as a future
    /// and drops it (polled once: its requests may be on their way), which must leave nothing
    /// behind that the work after it could trip on.
    dropped_futures: bool,
    /// The case reads through one client that lives for the whole run (with the settings
    /// [`SHARED`]), as a program keeps one: whatever earlier cases left in it (connections cut
    /// by faults, cancelled work, kept locations, objects that have changed since) must not
    /// make a read wrong or hang. Work an earlier case cancelled may still reach the server
    /// during this one, so its requests are not counted.
    shared: bool,
    /// Each batch is submitted and drained on a thread of its own, all submitting at once, as
    /// a program's threads share its client (cases of two or three batches); in a blocking
    /// case, each reader's `read_many` and `read_at` run on two threads at once.
    threaded: bool,
    /// The client is dropped as soon as the batches (of Karu's buffers) are submitted: they
    /// keep its engine running, and must end as if it were not dropped. A new client probes
    /// and reads after them.
    client_dropped: bool,
    /// Two threads take each batch's completions at once (`next_timeout`), as a program's
    /// threads may share a batch: each completion goes to one of them, and both learn when the
    /// batch is drained (not after a wait). Not the batch dropped part-way, nor asynchronously.
    two_takers: bool,
}

impl Case {
    /// The case for a target without a mock (see the field `plain`); `tag`: the strong tag the
    /// target gives [`CHANGING`], if any (without one, no read of a remote object requires a
    /// version); `remote`: whether its objects are remote.
    fn plain(mut self, tag: Option<&str>, remote: bool) -> Case {
        self.faults.clear();
        self.ridden_out = true;
        self.change_after = None;
        self.changing_etags = [None, None];
        match tag {
            Some(tag) => self.required = [tag.to_string(), NO_SUCH_VERSION.to_string()],
            None if remote => self.reads.iter_mut().for_each(|ask| ask.if_match = None),
            None => {}
        }
        self.plain = true;
        self.remote = remote;
        self
    }

    /// The strong tag version `v` of object `object` is served with on a mock (`None` where it
    /// has none, or a weak one; unknown on a real server).
    fn strong_tag(&self, object: usize, v: usize) -> Option<&'static str> {
        let tag = match OBJECTS.get(object) {
            Some(&(_, _, tag)) => tag,
            None => self.changing_etags[v],
        };
        tag.filter(|t| strong(Some(t)))
    }

    /// The versions a read of object `object` may see in this case.
    fn versions(&self, object: usize) -> Vec<Version> {
        let mut all = versions(object);
        if self.plain {
            all.truncate(1);
        }
        all
    }

    /// The reads of each batch: `start..end` of [`Case::reads`].
    fn batch_ranges(&self) -> Vec<std::ops::Range<usize>> {
        let n = self.reads.len();
        (0..self.batches)
            .map(|b| b * n / self.batches..(b + 1) * n / self.batches)
            .collect()
    }
}

impl Case {
    fn new(seed: u64) -> Case {
        let mut rng = Rng::new(seed);
        let mut settings = vec![
            (
                "planner.max_gap",
                *rng.pick(&["0", "1KiB", "64KiB", "1MiB"]),
            ),
            ("planner.trade", *rng.pick(&["guards", "priced"])),
            ("http.part_size", *rng.pick(&["0", "64KiB", "8MiB"])),
            ("concurrency", *rng.pick(&["1", "3", "16"])),
            ("io_threads", *rng.pick(&["1", "2"])),
        ];
        if rng.chance(25) {
            // Limits as long as a u64 holds, which Karu counts as 100 years: no deadline,
            // timeout or low-speed window may overflow the clock.
            let limits = [
                "retry.deadline",
                "http.connect_timeout",
                "http.low_speed_time",
            ];
            settings.extend(limits.map(|key| (key, ENDLESS)));
        }
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
                window: None,
                recycled: None,
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
            let name = rng
                .chance(70)
                .then(|| name_of(rng.range(0, OBJECTS.len() as u64 + 1) as usize));
            faults.push(Planted {
                fault,
                name,
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
        // Windows and the reads' own buffers, drawn last so that the rest of a seed's case
        // stays what it was before they were.
        for ask in &mut reads {
            if rng.chance(20) {
                let start = rng.range(0, ask.offset + 1);
                // To the end, or ending a byte before the read does, where it does, or after.
                let len = rng
                    .chance(50)
                    .then(|| ask.offset + ask.length - start + rng.range(0, 3) - 1);
                ask.window = Some((start, len));
            }
            if rng.chance(20) {
                ask.recycled = Some(*rng.pick(&[0, 10, ask.length as usize + 100]));
            }
        }
        let batches = *rng.pick(&[1, 1, 1, 2, 3]);
        let readers = (0..*rng.pick(&[0, 0, 1, 2]))
            .map(|_| {
                let object = rng.range(0, OBJECTS.len() as u64 + 1) as usize;
                let size = versions(object)[0].size;
                let range = |rng: &mut Rng| {
                    let length = *rng.pick(&[1, 100, 5000, 70_000]);
                    let offset = if rng.chance(80) {
                        rng.range(0, size.saturating_sub(length) + 1)
                    } else {
                        // Across or past the end (of this version or the other).
                        (size + rng.range(0, 3)).saturating_sub(rng.range(0, length + 1))
                    };
                    (offset, length)
                };
                let ranges = (0..rng.range(1, 5)).map(|_| range(&mut rng)).collect();
                let at = range(&mut rng);
                ReaderProbe { object, ranges, at }
            })
            .collect();
        let mut case = Case {
            settings,
            reads,
            faults,
            ridden_out,
            change_after,
            changing_etags,
            one_version,
            borrowed,
            probes,
            batches,
            readers,
            plain: false,
            required: REQUIRED.map(String::from),
            remote: true,
            asynchronous: false,
            abandon: None,
            dropped_futures: false,
            shared: false,
            threaded: false,
            client_dropped: false,
            two_takers: false,
        };
        // Drawn last, as the windows are.
        case.asynchronous = rng.chance(40);
        if rng.chance(15) {
            let ranges = case.batch_ranges();
            let b = rng.range(0, ranges.len() as u64) as usize;
            let taken = rng.range(0, ranges[b].len().max(1) as u64) as usize;
            case.abandon = Some((b, taken));
        }
        // Under `auto` a TLS host's requests wait for its first connection to learn its protocol;
        // under `http1` an HTTP/2 server is read over HTTP/1.1, a connection per request in
        // flight (on a target without TLS both are its own HTTP/1.1).
        if rng.chance(30) {
            case.settings
                .push(("http.version", *rng.pick(&["auto", "auto", "http1"])));
        }
        case.dropped_futures = case.asynchronous && rng.chance(50);
        if rng.chance(30) {
            case.shared = true;
            case.settings = SHARED.to_vec();
        }
        case.threaded = case.batches > 1 && rng.chance(50);
        case.client_dropped = !case.shared && !case.borrowed && !case.threaded && rng.chance(25);
        case.two_takers = !case.asynchronous && rng.chance(25);
        case
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

/// The target's mock and its own gate, if it has one.
type Mock<'a> = Option<(&'a dyn MockControl, Option<&'a Arc<dyn Gate>>)>;

/// Store object `name`: `size` bytes of the object of salt `salt`.
fn put(ctx: &Ctx<'_>, name: &str, salt: usize, size: u64) -> Result<(), String> {
    ctx.target
        .put(name, &object_body(salt, size))
        .map_err(|e| format!("cannot store {name}: {e}"))
}

/// On a target without a mock: store [`OBJECTS`] and [`CHANGING`] (its first version) once,
/// before the cases; `Ok` with the strong tag the target gives [`CHANGING`], if any, and
/// whether the objects are remote.
fn store_once(ctx: &Ctx<'_>) -> Result<(Option<String>, bool), String> {
    for (k, &(name, size, _)) in OBJECTS.iter().enumerate() {
        put(ctx, name, k, size)?;
    }
    let (_, size, salt) = VERSIONS[0];
    put(ctx, CHANGING, salt, size)?;
    let client = ctx.client(&SETTINGS)?;
    let changing = client
        .locate(&ctx.target.address(CHANGING))
        .map_err(|e| format!("cannot locate {CHANGING}: {e}"))?;
    let info = client
        .stat(&changing)
        .map_err(|e| format!("cannot stat {CHANGING}: {e}"))?;
    Ok((info.etag, matches!(changing.target(), Target::Remote)))
}

/// On a mock: store every object afresh (the `ETag`s of [`OBJECTS`] and the case's for
/// [`CHANGING`]'s versions), serve [`CHANGING`] through a [`Replace`] around the target's gate,
/// clear the faults and the log. Without one, nothing: the objects are stored once.
fn reset(ctx: &Ctx<'_>, mock: Mock<'_>, case: &Case) -> Result<(), String> {
    let Some((mock, inner)) = mock else {
        return Ok(());
    };
    let server = mock.server();
    server.clear_faults();
    let objects = OBJECTS
        .iter()
        .enumerate()
        .map(|(k, &(name, size, etag))| (name, size, k, etag));
    let versions = VERSIONS
        .iter()
        .zip(case.changing_etags)
        .map(|(&(name, size, salt), etag)| (name, size, salt, etag));
    // [`CHANGING`] itself is stored too (as its first version), for a store that resolves a
    // name before it serves the bytes (the Hugging Face Hub): its bytes are never served.
    let (_, size, salt) = VERSIONS[0];
    let changing = (CHANGING, size, salt, case.changing_etags[0]);
    for (name, size, salt, etag) in objects.chain(versions).chain([changing]) {
        put(ctx, name, salt, size)?;
        mock.set_etag(name, etag);
    }
    server.set_gate(Some(Arc::new(Replace {
        inner: inner.cloned(),
        changing: mock.path_of(CHANGING),
        versions: VERSIONS.map(|(name, ..)| mock.path_of(name)),
        after: case.change_after.unwrap_or(u64::MAX),
        seen: AtomicU64::new(0),
    })));
    server.take_requests();
    Ok(())
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

/// Run `case` on the target; `Ok` with the requests the batches made (0 without a mock), or
/// `Err` with everything wrong. The phases: the target reset and the faults planted, the
/// batches run ([`run_batches`]), each read judged ([`judge_reads`]), the requests counted
/// ([`judge_requests`]), then the probes ([`judge_probes`]) and readers, after the batches.
fn run_case(
    ctx: &Ctx<'_>,
    mock: Mock<'_>,
    case: &Case,
    shared: &mut Option<Client>,
    timer: &Timer,
) -> Result<usize, String> {
    reset(ctx, mock, case)?;
    let take_log = || mock.map_or_else(Vec::new, |(m, _)| m.server().take_requests());
    // A hang ends the case at once, with the requests so far (`earlier`: those already taken).
    let hung = |mut why: String, earlier: &[RequestRecord]| {
        why.push_str("\nrequests so far:\n");
        for r in earlier.iter().chain(&take_log()) {
            let _ = writeln!(why, "{r}");
        }
        why
    };
    if let Some((m, _)) = mock {
        for planted in &case.faults {
            m.server().add_fault(planted.rule(m));
        }
    }
    let mut settings = SETTINGS.to_vec();
    settings.extend_from_slice(&case.settings);
    let client = match shared {
        Some(client) if case.shared => client.clone(),
        _ if case.shared => shared.insert(ctx.client(&settings)?).clone(),
        _ => ctx.client(&settings)?,
    };
    let objects = locate_all(ctx, &client)?;
    let mut wrong = String::new();
    let (delivered, client, objects) =
        run_batches(ctx, case, (client, objects, &settings), timer, &mut wrong)
            .map_err(|e| hung(e, &[]))?;
    let log = take_log();
    judge_reads(case, &delivered, &mut wrong);
    if let Some((mock, _)) = mock {
        judge_requests(case, mock, &log, &mut wrong);
    }
    judge_probes(case, &client, &objects, timer, &mut wrong).map_err(|e| hung(e, &log))?;
    for probe in &case.readers {
        read_through_a_reader(
            &client,
            &objects[probe.object],
            probe,
            case,
            &mut wrong,
            timer,
        )
        .map_err(|e| hung(e, &log))?;
    }
    let probes = take_log();
    ctx.took_requests(log.len() + probes.len());
    if wrong.is_empty() {
        return Ok(log.len());
    }
    let _ = writeln!(wrong, "requests:");
    for r in &log {
        let _ = writeln!(wrong, "{r}");
    }
    let _ = writeln!(wrong, "probes' requests:");
    for r in &probes {
        let _ = writeln!(wrong, "{r}");
    }
    Err(wrong)
}

/// A locator for each object of a case (the changing one last), through `client`.
fn locate_all(ctx: &Ctx<'_>, client: &Client) -> Result<Vec<Locator>, String> {
    (0..=CHANGING_INDEX)
        .map(|k| {
            let address = ctx.target.address(name_of(k));
            client
                .locate(&address)
                .map_err(|e| format!("cannot locate {address}: {e}"))
        })
        .collect()
}

/// What a case's batches delivered: each completion with its batch and its index in the case,
/// and the caller's buffers (of a case that lends them).
struct Delivered {
    done: Vec<(usize, usize, Completion)>,
    buffers: Vec<Vec<u8>>,
}

/// Submit every batch of `case` before the first is drained, and drain them as the case says
/// (scoped, on threads of their own, or after dropping the client), with the client and the
/// locators the probes use next (a new client's, when the case dropped its own). A batch's
/// completions that are not exactly its reads' are noted in `wrong`; `Err` is a hang.
fn run_batches(
    ctx: &Ctx<'_>,
    case: &Case,
    (client, objects, settings): (Client, Vec<Locator>, &[(&str, &str)]),
    timer: &Timer,
    wrong: &mut String,
) -> Result<(Delivered, Client, Vec<Locator>), String> {
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
    // Every batch is submitted before the first is drained; each completion's index is its
    // batch's, so the case's is `start + index`.
    let ranges = case.batch_ranges();
    let mut done: Vec<(usize, usize, Completion)> = Vec::new();
    let mut collect = |b: usize, completions: Vec<Completion>| {
        let start = ranges[b].start;
        let indices: Vec<usize> = completions.iter().map(Completion::index).collect();
        // Every read's, in order; of a batch dropped part-way, as many as were taken.
        let right = match case.abandon {
            Some((a, taken)) if a == b => {
                indices.len() == taken
                    && indices.windows(2).all(|w| w[0] < w[1])
                    && indices.iter().all(|&i| i < ranges[b].len())
            }
            _ => indices == (0..ranges[b].len()).collect::<Vec<_>>(),
        };
        if !right {
            let _ = writeln!(wrong, "batch {b}: completions for the reads {indices:?}");
        }
        done.extend(completions.into_iter().map(|c| (b, start + c.index(), c)));
    };
    let (drained, client, objects) = if case.borrowed {
        let drained = client.scope(|scope| {
            // Each batch's own buffers.
            let mut rest = buffers.as_mut_slice();
            let mut theirs = Vec::new();
            for range in &ranges {
                let (mine, others) = rest.split_at_mut(range.len());
                rest = others;
                theirs.push(mine);
            }
            // (The closure's type comes from `theirs`: its buffers are borrowed for the
            // scope's whole life.)
            submit_and_drain(
                theirs,
                |b, mine| {
                    let reads = case.reads[ranges[b].clone()].iter().zip(mine);
                    scope.submit(
                        reads.map(|(a, buffer)| {
                            a.read(&objects[a.object], Some(buffer), &case.required)
                        }),
                        &options,
                    )
                },
                case,
                timer,
            )
        })?;
        (drained, client, objects)
    } else {
        let submit = |b: usize, ()| {
            client.submit_with(
                case.reads[ranges[b].clone()]
                    .iter()
                    .map(|a| a.read(&objects[a.object], None, &case.required)),
                &options,
            )
        };
        if case.client_dropped {
            let batches = (0..ranges.len()).map(|b| submit(b, ())).collect();
            // The batches keep the engine running; the probes and readers use a new client.
            drop(client);
            let drained = drain(batches, 0, case, timer);
            let client = ctx.client(settings)?;
            let objects = locate_all(ctx, &client)?;
            (drained?, client, objects)
        } else {
            let inputs = vec![(); ranges.len()];
            let drained = submit_and_drain(inputs, submit, case, timer)?;
            (drained, client, objects)
        }
    };
    for (b, completions) in drained.into_iter().enumerate() {
        collect(b, completions);
    }
    Ok((Delivered { done, buffers }, client, objects))
}

/// Judge every read a case's batches delivered (see the module's rules), noting what is wrong
/// in `wrong`.
fn judge_reads(case: &Case, delivered: &Delivered, wrong: &mut String) {
    let Delivered { done, buffers } = delivered;
    // The versions of the changing object each read of it can be of (all, for a read that
    // delivered nothing), with the read's batch and index.
    let mut seen_versions: Vec<(usize, usize, Vec<Version>)> = Vec::new();
    for (batch, index, c) in done {
        let (batch, index) = (*batch, *index);
        let Some(ask) = case.reads.get(index) else {
            continue;
        };
        // A local file has no versions: a read requiring one is rejected on its own (if it also
        // leaves its window, for either reason).
        if !case.remote && ask.if_match.is_some() {
            let refused = c.status() == Status::InvalidArgument
                || ask.leaves_window() && c.status() == Status::InvalidRange;
            if !refused || c.bytes_received() != 0 {
                let _ = writeln!(
                    wrong,
                    "read {index} {ask:?} of a file requires a version: {c:?}"
                );
            }
            continue;
        }
        if ask.leaves_window() {
            if c.status() != Status::InvalidRange || c.bytes_received() != 0 {
                let _ = writeln!(wrong, "read {index} {ask:?} leaves its window: {c:?}");
            }
            continue;
        }
        // On a real server, a read requiring a version the object never had fails.
        if case.plain && ask.if_match == Some(1) {
            if c.status() != Status::PreconditionFailed || c.bytes_received() != 0 {
                let _ = writeln!(
                    wrong,
                    "read {index} {ask:?} requires {NO_SUCH_VERSION}: {c:?}"
                );
            }
            continue;
        }
        let name = name_of(ask.object);
        let told_end = case.faults.iter().any(|f| f.may_end_early(name));
        // A replaced object may fail reads (its parts, or its version, changed under them), and
        // a read that requires a version fails where another is served (or no strong tag); on
        // a real server, one that requires the object's own tag reads as any other.
        let exact = case.ridden_out
            && !(name == CHANGING && case.change_after.is_some())
            && (ask.if_match.is_none() || case.plain);
        // A read that requires a version gets that one, where Karu can tell (strong tags) or
        // the server enforces the condition (no fault makes it ignore `If-Match`).
        let enforced =
            strong(case.changing_etags[0]) || !case.faults.iter().any(|f| f.ignores_if_match(name));
        let candidates: Vec<Version> = case
            .versions(ask.object)
            .into_iter()
            .enumerate()
            .filter(|&(i, _)| !enforced || ask.if_match.is_none_or(|v| v == i))
            .map(|(_, v)| v)
            .collect();
        let bytes = if case.borrowed {
            let received = (c.bytes_received() as usize).min(ask.length as usize);
            &buffers[index][..received]
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
                let _ = writeln!(wrong, "read {index} {ask:?} of {v:?}: {why}; {c:?}");
            }
        } else if name == CHANGING && c.bytes_received() > 0 {
            seen_versions.push((batch, index, fits));
        }
    }
    // Keeping to one version, the reads of a batch that delivered bytes of the changing object
    // did so from one version (which only strong ETags that differ can tell).
    let [a, b] = case.changing_etags;
    if case.one_version && strong(a) && a != b {
        for batch in 0..case.batches {
            let seen: Vec<_> = seen_versions.iter().filter(|s| s.0 == batch).collect();
            let common = VERSIONS.iter().any(|&(_, size, salt)| {
                let v = Version { salt, size };
                seen.iter().all(|(_, _, fits)| fits.contains(&v))
            });
            if !common {
                let _ = writeln!(
                    wrong,
                    "batch {batch}, keeping to one version, read two of {CHANGING}: {seen:?}"
                );
            }
        }
    }
}

/// On a well-behaved server, whether a case asked for any byte of an object more often than
/// it may (noted in `wrong`).
fn judge_requests(case: &Case, mock: &dyn MockControl, log: &[RequestRecord], wrong: &mut String) {
    // On a well-behaved server no byte is asked for twice, except where merging is off (a
    // gap of zero disables it, overlaps included) and, for an object without a strong ETag,
    // the first part of a read in parts (then fetched in one request: parts could not be
    // proven to be one version). Parts of 64 KiB split these reads; of 8 MiB, none. Batches
    // do not share transfers: each may ask for a byte once.
    let setting = |key: &str| {
        case.settings
            .iter()
            .find(|&&(k, _)| k == key)
            .map(|&(_, v)| v)
    };
    let merging = setting("planner.max_gap") != Some("0");
    let split = setting("http.part_size") == Some("64KiB");
    let counted = case.faults.is_empty() && merging && !case.shared;
    if counted {
        // The changing object, unless it was replaced (then requests may repeat) or a read
        // requires a version (reads of different conditions never merge).
        let conditions = case.reads.iter().any(|a| a.if_match.is_some());
        let changing = (case.change_after.is_none() && !conditions).then_some((
            CHANGING,
            0,
            case.changing_etags[0],
        ));
        for (name, _, etag) in OBJECTS.into_iter().chain(changing) {
            let most = case.batches * if split && !strong(etag) { 2 } else { 1 };
            if let Some(why) = requested_too_often(log, &mock.path_of(name), most) {
                let _ = writeln!(wrong, "{name}: {why}");
            }
        }
    }
}

/// The probes of a case, after its batches: `stat` and `read_ends` of random objects, each of
/// one version (noted in `wrong`); `Err` is a hang.
fn judge_probes(
    case: &Case,
    client: &Client,
    objects: &[Locator],
    timer: &Timer,
    wrong: &mut String,
) -> Result<(), String> {
    // The probes, after the batches (their requests are not the batches').
    for probe in &case.probes {
        let object = &objects[probe.object];
        let name = name_of(probe.object);
        let told_end = case.faults.iter().any(|f| f.may_end_early(name));
        let exact = case.ridden_out && !(name == CHANGING && case.change_after.is_some());
        let candidates = case.versions(probe.object);
        if case.dropped_futures {
            start_and_drop(client.read_ends_async(object, probe.head, probe.tail));
        }
        let stat = match case.asynchronous {
            true => within(timer, "stat_async", client.stat_async(object))?,
            false => client.stat(object),
        };
        match stat {
            Ok(info) => {
                // A version's size, and on a truthful mock its strong tag.
                let size_fits = |(i, v): (usize, &Version)| {
                    let size = match info.size {
                        Some(size) => size == v.size || (told_end && size < v.size),
                        None => !exact,
                    };
                    let tag = case.plain
                        || !exact
                        || info.etag.as_deref() == case.strong_tag(probe.object, i);
                    size && tag
                };
                if !candidates.iter().enumerate().any(size_fits) {
                    let _ = writeln!(wrong, "stat of {name}: {info:?}, of none of {candidates:?}");
                }
            }
            Err(e) if exact => {
                let _ = writeln!(
                    wrong,
                    "stat of {name} failed although every fault is ridden out: {e}"
                );
            }
            Err(_) => {}
        }
        let ends = match case.asynchronous {
            true => within(
                timer,
                "read_ends_async",
                client.read_ends_async(object, probe.head, probe.tail),
            )?,
            false => client.read_ends(object, probe.head, probe.tail),
        };
        match ends {
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
                        "read_ends({}, {}) of {name}: size {}, {} head and {} tail bytes, of none of {candidates:?}",
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
                    "read_ends of {name} failed although every fault is ridden out: {e}"
                );
            }
            Err(_) => {}
        }
    }
    Ok(())
}

/// A batch a case drains: an owned one or a scoped one.
trait Drainable: Stream<Item = Completion> + Unpin {
    fn batch(&self) -> &Batch;
}

impl Drainable for Batch {
    fn batch(&self) -> &Batch {
        self
    }
}

impl Drainable for ScopedBatch<'_> {
    fn batch(&self) -> &Batch {
        self
    }
}

/// Submit a batch per input (`submit` of its index and input) and drain them: every batch
/// from this thread, submitted before any is drained ([`drain`]), or in a threaded case each
/// on a thread of its own, all submitting at once. The completions of every batch, or the first
/// hang (by batch).
fn submit_and_drain<I: Send, B: Drainable + Send>(
    inputs: Vec<I>,
    submit: impl Fn(usize, I) -> B + Sync,
    case: &Case,
    timer: &Timer,
) -> Result<Vec<Vec<Completion>>, String> {
    if !case.threaded {
        let batches = inputs
            .into_iter()
            .enumerate()
            .map(|(b, input)| submit(b, input));
        return drain(batches.collect(), 0, case, timer);
    }
    let start = Barrier::new(inputs.len());
    let (start, submit) = (&start, &submit);
    let ended: Vec<_> = std::thread::scope(|s| {
        let threads: Vec<_> = inputs
            .into_iter()
            .enumerate()
            .map(|(b, input)| {
                s.spawn(move || {
                    start.wait();
                    drain(vec![submit(b, input)], b, case, timer)
                })
            })
            .collect();
        threads.into_iter().map(|t| t.join()).collect()
    });
    let mut all = Vec::new();
    for (b, one) in ended.into_iter().enumerate() {
        match one {
            Ok(Ok(mut completions)) => all.append(&mut completions),
            Ok(Err(hang)) => return Err(format!("batch {b}: {hang}")),
            Err(_) => return Err(format!("batch {b}: its thread panicked")),
        }
    }
    Ok(all)
}

/// The completions of every batch, each batch's in submission order (`first`: the index of
/// the first among the case's batches); the batch [`Case::abandon`] names is dropped once that
/// many of its completions are taken. In an asynchronous case the batches are polled together
/// as `Stream`s on this thread (which never blocks in them), else drained one after another.
/// `Err` if no completion comes within [`PATIENCE`].
fn drain<B: Drainable>(
    batches: Vec<B>,
    first: usize,
    case: &Case,
    timer: &Timer,
) -> Result<Vec<Vec<Completion>>, String> {
    let mut all: Vec<Vec<Completion>> = batches.iter().map(|_| Vec::new()).collect();
    let mut batches: Vec<Option<B>> = batches.into_iter().map(Some).collect();
    let hang = |batches: &[Option<B>]| {
        let left: Vec<&Batch> = batches.iter().flatten().map(Drainable::batch).collect();
        format!("no completion within {PATIENCE:?}: {left:?}")
    };
    if case.asynchronous {
        let mut deadline = patience(timer);
        let ended = futures::executor::block_on(futures::future::poll_fn(|cx| {
            loop {
                let mut progressed = false;
                for (b, slot) in batches.iter_mut().enumerate() {
                    if case.abandon == Some((first + b, all[b].len())) {
                        *slot = None;
                    }
                    let Some(batch) = slot else { continue };
                    match Pin::new(batch).poll_next(cx) {
                        Poll::Ready(Some(c)) => {
                            all[b].push(c);
                            progressed = true;
                        }
                        Poll::Ready(None) => *slot = None,
                        Poll::Pending => {}
                    }
                }
                if batches.iter().all(Option::is_none) {
                    return Poll::Ready(true);
                }
                if !progressed {
                    return Pin::new(&mut deadline).poll(cx).map(|()| false);
                }
            }
        }));
        if !ended {
            return Err(hang(&batches));
        }
    } else {
        for (b, slot) in batches.iter_mut().enumerate() {
            let keep = match case.abandon {
                Some((a, taken)) if a == first + b => taken,
                _ => usize::MAX,
            };
            let Some(batch) = slot.as_ref().map(Drainable::batch) else {
                continue;
            };
            let two = case.two_takers && keep == usize::MAX;
            let taken = if two {
                // Two threads take from the batch at once: each completion goes to one.
                std::thread::scope(|s| {
                    let other = s.spawn(|| take(batch, usize::MAX));
                    match (take(batch, usize::MAX), other.join()) {
                        (Some(mine), Ok(Some(theirs))) => {
                            Some(mine.into_iter().chain(theirs).collect())
                        }
                        _ => None,
                    }
                })
            } else {
                take(batch, keep)
            };
            match taken {
                Some(taken) => all[b] = taken,
                None if two => {
                    return Err(format!("two takers: {}", hang(std::slice::from_ref(slot))));
                }
                None => return Err(hang(std::slice::from_ref(slot))),
            }
            *slot = None;
        }
    }
    for completions in &mut all {
        completions.sort_by_key(Completion::index);
    }
    Ok(all)
}

/// Take `batch`'s completions (`next_timeout`) until `most` are taken or it is drained (other
/// threads may take some too); `None` if a wait for the next one, or to learn that there is
/// none, lasts [`PATIENCE`].
fn take(batch: &Batch, most: usize) -> Option<Vec<Completion>> {
    let mut taken = Vec::new();
    while taken.len() < most {
        let asked = Instant::now();
        match batch.next_timeout(PATIENCE) {
            Next::Completion(c) => taken.push(c),
            Next::Drained if asked.elapsed() < PATIENCE => break,
            Next::Drained | Next::TimedOut => return None,
        }
    }
    Some(taken)
}

/// A wait of [`PATIENCE`] from now, on the run's timer.
fn patience(timer: &Timer) -> Delay {
    timer.sleep_until(Instant::now() + PATIENCE)
}

/// Poll `future` once (starting its work) and drop it, cancelling the work.
fn start_and_drop<F: Future>(future: F) {
    let mut future = std::pin::pin!(future);
    let _ = future
        .as_mut()
        .poll(&mut Context::from_waker(futures::task::noop_waker_ref()));
}

/// `future`'s output, driven by `futures::executor::block_on`; `Err` naming `what` if it takes
/// longer than [`PATIENCE`].
fn within<F: Future>(timer: &Timer, what: &str, future: F) -> Result<F::Output, String> {
    let future = std::pin::pin!(future);
    match futures::executor::block_on(futures::future::select(future, patience(timer))) {
        futures::future::Either::Left((output, _)) => Ok(output),
        futures::future::Either::Right(_) => Err(format!("{what}: no answer within {PATIENCE:?}")),
    }
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

/// Run the cases of `seeds` against the target (a target without a mock gets each case
/// without faults, replacement or required versions); `Ok` with a summary, or `Err` with the
/// first case that failed: its seed, the case, everything wrong, and the requests.
pub(crate) fn run(ctx: &Ctx<'_>, seeds: Seeds) -> Result<String, String> {
    let target_mock = ctx.target.mock();
    // The target's own gate again when the cases end, however they end.
    let restore = target_mock.map(|m| RestoreGate {
        server: m.server(),
        gate: m.server().gate(),
    });
    let mock: Mock<'_> = target_mock.map(|m| (m, restore.as_ref().and_then(|r| r.gate.as_ref())));
    let mut kinds = [0u64; 2];
    let mut ways = Ways::default();
    // The client of the cases that share one (see `Case::shared`).
    let mut shared = None;
    // What the asynchronous cases' waits for a hang end on (stopped when the run ends).
    let (timer, _timer_thread) = Timer::start("karu-random-patience".into())
        .map_err(|e| format!("cannot start a timer thread: {e}"))?;
    let mut reads = 0;
    let mut requests = 0;
    let (tag, remote) = match mock {
        Some(_) => (None, true),
        None => store_once(ctx)?,
    };
    for seed in seeds.first..seeds.first.saturating_add(seeds.count) {
        let case = match mock {
            Some(_) => Case::new(seed),
            None => Case::new(seed).plain(tag.as_deref(), remote),
        };
        kinds[usize::from(case.ridden_out)] += 1;
        ways.count(&case);
        reads += case.reads.len();
        requests += run_case(ctx, mock, &case, &mut shared, &timer).map_err(|wrong| {
            format!(
                "case {seed} failed (Options::seeds({seed}, 1) runs it alone):\n{case:#?}\n{wrong}"
            )
        })?;
    }
    // The generator makes both kinds of case (a range of seeds that did not would test less).
    if mock.is_some() && seeds.count >= 10 && kinds.contains(&0) {
        return Err(format!(
            "the seeds made cases with faults a client may refuse, and with faults it rides out: {kinds:?}"
        ));
    }
    if mock.is_none() {
        return Ok(format!(
            "{} cases from seed {} without faults ({ways}), {reads} reads",
            seeds.count, seeds.first
        ));
    }
    Ok(format!(
        "{} cases from seed {} ({} with faults a client rides out; {ways}), {reads} reads, {requests} requests",
        seeds.count, seeds.first, kinds[1]
    ))
}

/// How many cases of a run went each of the ways a case may go, beside its reads and faults.
#[derive(Default)]
struct Ways {
    asynchronous: u64,
    dropped_futures: u64,
    abandoned: u64,
    shared: u64,
    threaded: u64,
    client_dropped: u64,
    two_takers: u64,
    endless: u64,
}

impl Ways {
    fn count(&mut self, case: &Case) {
        self.asynchronous += u64::from(case.asynchronous);
        self.dropped_futures += u64::from(case.dropped_futures);
        self.abandoned += u64::from(case.abandon.is_some());
        self.shared += u64::from(case.shared);
        self.threaded += u64::from(case.threaded);
        self.client_dropped += u64::from(case.client_dropped);
        self.two_takers += u64::from(case.two_takers);
        self.endless += u64::from(case.settings.contains(&("retry.deadline", ENDLESS)));
    }
}

impl std::fmt::Display for Ways {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} asynchronous ({} dropping futures), {} dropping a batch part-way, {} on one \
             client, {} with a thread per batch, {} dropping the client, {} with two takers per \
             batch, {} with limits of u64::MAX seconds",
            self.asynchronous,
            self.dropped_futures,
            self.abandoned,
            self.shared,
            self.threaded,
            self.client_dropped,
            self.two_takers,
            self.endless
        )
    }
}

/// Installs `gate` on `server` when dropped.
struct RestoreGate<'a> {
    server: &'a MockServer,
    gate: Option<Arc<dyn Gate>>,
}

impl Drop for RestoreGate<'_> {
    fn drop(&mut self) {
        self.server.set_gate(self.gate.take());
    }
}

/// Open an [`ObjectReader`] on `object` and read `probe`'s ranges through it (through its
/// futures in an asynchronous case); anything wrong goes to `wrong`, and `Err` is a hang. A
/// reader stands for one version: opened with a strong ETag, every read through it holds bytes
/// of the version its size describes, or fails.
fn read_through_a_reader(
    client: &Client,
    object: &Locator,
    probe: &ReaderProbe,
    case: &Case,
    wrong: &mut String,
    timer: &Timer,
) -> Result<(), String> {
    let name = name_of(probe.object);
    let told_end = case.faults.iter().any(|f| f.may_end_early(name));
    let exact = case.ridden_out && !(name == CHANGING && case.change_after.is_some());
    let candidates = case.versions(probe.object);
    let opened = match case.asynchronous {
        true => within(
            timer,
            "open_async",
            ObjectReader::open_async(client, object),
        )?,
        false => ObjectReader::open(client, object),
    };
    let reader = match opened {
        Ok(reader) => reader,
        Err(e) => {
            if exact {
                let _ = writeln!(
                    wrong,
                    "a reader of {name} failed to open although every fault is ridden out: {e}"
                );
            }
            return Ok(());
        }
    };
    if case.dropped_futures {
        start_and_drop(reader.read_many_async(&probe.ranges));
    }
    let size = reader.size();
    if !candidates
        .iter()
        .any(|v| v.size == size || (told_end && size < v.size))
    {
        let _ = writeln!(
            wrong,
            "a reader of {name} has size {size}, of none of {candidates:?}"
        );
        return Ok(());
    }
    // Pinned to a tag that tells the versions apart, the reader reads the version of its size;
    // else each read follows the object as it is when it runs.
    let [a, b] = case.changing_etags;
    let distinct = name != CHANGING || (strong(a) && a != b);
    let eligible: Vec<Version> = candidates
        .iter()
        .copied()
        .filter(|v| told_end || reader.etag().is_none() || !distinct || v.size == size)
        .collect();
    let holds = |v: &Version, offset: u64, bytes: &[u8]| {
        bytes.is_empty()
            || offset + bytes.len() as u64 <= v.size
                && bytes
                    .iter()
                    .enumerate()
                    .all(|(i, &x)| x == object_byte(v.salt, offset + i as u64))
    };
    let past_end =
        |offset: u64, length: u64| told_end || eligible.iter().any(|v| offset + length > v.size);
    let (offset, length) = probe.at;
    let mut buffer = vec![UNWRITTEN; length as usize];
    let (many, read) = match (case.asynchronous, case.threaded) {
        (true, _) => (
            within(
                timer,
                "read_many_async",
                reader.read_many_async(&probe.ranges),
            )?,
            within(
                timer,
                "read_at_async",
                reader.read_at_async(offset, &mut buffer),
            )?,
        ),
        // Two threads read through the reader at once.
        (false, true) => std::thread::scope(|s| {
            let at = s.spawn(|| reader.read_at(offset, &mut buffer));
            let many = reader.read_many(&probe.ranges);
            let read = at.join().unwrap_or_else(|p| std::panic::resume_unwind(p));
            (many, read)
        }),
        (false, false) => (
            reader.read_many(&probe.ranges),
            reader.read_at(offset, &mut buffer),
        ),
    };
    match many {
        Ok(all) => {
            let fits = eligible.iter().any(|v| {
                all.len() == probe.ranges.len()
                    && all
                        .iter()
                        .zip(&probe.ranges)
                        .all(|(bytes, &(offset, length))| {
                            bytes.len() as u64 == length && holds(v, offset, bytes)
                        })
            }) || (!distinct || reader.etag().is_none())
                && all
                    .iter()
                    .zip(&probe.ranges)
                    .all(|(bytes, &(offset, length))| {
                        bytes.len() as u64 == length
                            && eligible.iter().any(|v| holds(v, offset, bytes))
                    });
            if !fits {
                let _ = writeln!(
                    wrong,
                    "a reader of {name} (size {size}) read_many {:?}: bytes of none of {eligible:?}",
                    probe.ranges
                );
            }
        }
        Err(e) if e.status() == Status::RangeNotSatisfiable => {
            // The error is a range's own: one that reaches past the end.
            let ended = match e.evidence() {
                Some(&Evidence::EndOfObject {
                    offset, requested, ..
                }) => probe.ranges.contains(&(offset, requested)) && past_end(offset, requested),
                _ => false,
            };
            if !ended {
                let _ = writeln!(
                    wrong,
                    "a reader of {name} (size {size}) read_many {:?}: a false end: {e}",
                    probe.ranges
                );
            }
        }
        Err(e) if exact => {
            let _ = writeln!(
                wrong,
                "a reader of {name} read_many {:?} failed although every fault is ridden out: {e}",
                probe.ranges
            );
        }
        Err(_) => {}
    }
    match read {
        Ok(()) => {
            if !eligible.iter().any(|v| holds(v, offset, &buffer)) {
                let _ = writeln!(
                    wrong,
                    "a reader of {name} (size {size}) read_at({offset}, {length}): bytes of none of {eligible:?}"
                );
            }
        }
        Err(e) if e.status() == Status::RangeNotSatisfiable => {
            let Some(&Evidence::EndOfObject {
                offset: at,
                requested,
                received,
                size: stated,
            }) = e.evidence()
            else {
                let _ = writeln!(
                    wrong,
                    "a reader of {name} read_at({offset}, {length}): an end without its evidence: {e}"
                );
                return Ok(());
            };
            let prefix = &buffer[..(received as usize).min(buffer.len())];
            // The prefix of one version, which ends inside the read (unless a bare 416 told an
            // earlier end); a size stated that agrees with it, and is that version's where the
            // server tells the truth (a fault may state another a client cannot refute).
            let agrees = stated.is_none_or(|s| match received {
                0 => s <= offset,
                _ => s == offset + received,
            });
            let fits = eligible.iter().any(|v| {
                holds(v, offset, prefix)
                    && (told_end
                        || offset + received == v.size.max(offset)
                            && offset + length > v.size
                            && agrees
                            && (!exact || stated.is_none_or(|s| s == v.size)))
            });
            if (at, requested) != (offset, length) || !fits {
                let _ = writeln!(
                    wrong,
                    "a reader of {name} (size {size}) read_at({offset}, {length}): an end after {received} bytes fits none of {eligible:?}: {e}"
                );
            }
        }
        Err(e) if exact => {
            let _ = writeln!(
                wrong,
                "a reader of {name} read_at({offset}, {length}) failed although every fault is ridden out: {e}"
            );
        }
        Err(_) => {}
    }
    Ok(())
}
