//! The cases: a seed makes the objects, their versions, the reads and batches, the settings,
//! the faults planted and the probes of one case.

use super::*;

pub(super) const KIB: u64 = 1 << 10;

/// How long a case waits for a completion before it reports a hang.
pub(super) const PATIENCE: Duration = Duration::from_secs(20);

/// Settings every client of the cases uses: short waits between attempts.
pub(super) const SETTINGS: [(&str, &str); 2] = [
    ("retry.initial_backoff", "10ms"),
    ("retry.max_backoff", "50ms"),
];

/// The longest limit a setting takes (`u64::MAX` seconds), which Karu counts as 100 years.
pub(super) const ENDLESS: &str = "18446744073709551615";

/// The settings of the client that cases with [`Case::shared`] use, one for the whole run.
pub(super) const SHARED: [(&str, &str); 5] = [
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
pub(super) const OBJECTS: [(&str, u64, Option<&str>); 6] = [
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
pub(super) const CHANGING: &str = "random/chang ing+é";

/// The changing object's versions: where each is stored, its size, and its salt (the `k` of
/// [`object_byte`]).
pub(super) const VERSIONS: [(&str, u64, usize); 2] = [
    ("random/changing-1", 300_000, OBJECTS.len()),
    ("random/changing-2", 250_000, OBJECTS.len() + 1),
];

/// The index of [`CHANGING`] among the objects a read may ask for (after [`OBJECTS`]).
pub(super) const CHANGING_INDEX: usize = OBJECTS.len();

/// One version of an object a read may see: its salt and its size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Version {
    pub(super) salt: usize,
    pub(super) size: u64,
}

/// The versions a read of object `object` may see.
pub(super) fn versions(object: usize) -> Vec<Version> {
    match OBJECTS.get(object) {
        Some(&(_, size, _)) => vec![Version { salt: object, size }],
        None => VERSIONS
            .iter()
            .map(|&(_, size, salt)| Version { salt, size })
            .collect(),
    }
}

/// Whether an `ETag` is a strong one (a weak one starts with `W/`).
pub(super) fn strong(etag: Option<&str>) -> bool {
    etag.is_some_and(|t| t.starts_with('"'))
}

/// The name of object `object`.
pub(super) fn name_of(object: usize) -> &'static str {
    OBJECTS.get(object).map_or(CHANGING, |o| o.0)
}

/// Serves [`CHANGING`] from its first version for its first `after` requests, then from the
/// second; answers everything else as the target's own gate (`inner`) does.
#[derive(Debug)]
pub(super) struct Replace {
    pub(super) inner: Option<Arc<dyn Gate>>,
    /// Where the server stores [`CHANGING`] and its versions.
    pub(super) changing: String,
    pub(super) versions: [String; 2],
    pub(super) after: u64,
    pub(super) seen: AtomicU64,
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
pub(super) const UNWRITTEN: u8 = 0xA5;

/// Object `k`'s byte at `offset`: the mock's pattern, moved by a distance no read reaches, so
/// a byte of another object (or of another offset) never passes for the one asked.
pub(super) fn object_byte(k: usize, offset: u64) -> u8 {
    pattern_byte(offset + ((k as u64 + 1) << 36))
}

pub(super) fn object_body(k: usize, size: u64) -> Vec<u8> {
    (0..size).map(|i| object_byte(k, i)).collect()
}

/// One read of a case: the object's index, the offset and the length.
#[derive(Debug, Clone, Copy)]
pub(super) struct Ask {
    pub(super) object: usize,
    /// The offset in the object (absolute, whatever the window).
    pub(super) offset: u64,
    pub(super) length: u64,
    /// The version of [`CHANGING`] the read requires (`If-Match` with the case's tag for it,
    /// [`Case::required`]).
    pub(super) if_match: Option<usize>,
    /// The read goes through a window of the object: its start (at or before `offset`) and its
    /// length (`None`: to the end), which the read may leave by a byte.
    pub(super) window: Option<(u64, Option<u64>)>,
    /// Into Karu's buffers, the read brings its own (`Read::with_buffer`), of this many bytes
    /// of [`UNWRITTEN`].
    pub(super) recycled: Option<usize>,
}

/// The strong tags a read of [`CHANGING`] may require on a mock, by version.
pub(super) const REQUIRED: [&str; 2] = ["\"c1\"", "\"c2\""];

/// A tag no version of any object has.
pub(super) const NO_SUCH_VERSION: &str = "\"karu-no-such-version\"";

impl Ask {
    /// The read, into Karu's buffer (or its own) or into `buffer`, through its window if it has
    /// one.
    pub(super) fn read<'b>(
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
    pub(super) fn leaves_window(&self) -> bool {
        matches!(self.window, Some((start, Some(len))) if self.offset + self.length > start + len)
    }
}

/// A probe of one object after the batch: `stat`, then `read_ends(head, tail)`.
#[derive(Debug, Clone, Copy)]
pub(super) struct Probe {
    pub(super) object: usize,
    pub(super) head: u64,
    pub(super) tail: u64,
}

/// A reader of one object after the batches ([`ObjectReader::open`]): `read_many` of
/// `ranges`, then `read_at` of `at`.
#[derive(Debug, Clone)]
pub(super) struct ReaderProbe {
    pub(super) object: usize,
    pub(super) ranges: Vec<(u64, u64)>,
    pub(super) at: (u64, u64),
}

/// A fault planted on the server: for the requests of the object `name` (any request, if
/// `None`), after `skip` of them, `times` times.
#[derive(Debug, Clone)]
pub(super) struct Planted {
    pub(super) fault: Fault,
    pub(super) name: Option<&'static str>,
    pub(super) skip: u64,
    pub(super) times: u64,
}

impl Planted {
    pub(super) fn rule(&self, mock: &dyn MockControl) -> FaultRule {
        let rule = FaultRule::new(self.fault.clone())
            .skip(self.skip)
            .times(self.times);
        match self.name {
            Some(name) => rule.path(mock.path_of(name)),
            None => rule,
        }
    }

    /// Whether it may serve a read of `name` that its `If-Match` does not allow.
    pub(super) fn ignores_if_match(&self, name: &str) -> bool {
        self.fault == Fault::IgnoreIfMatch && self.name.is_none_or(|n| n == name)
    }

    /// Whether it may answer a read of `name` with a bare 416: no size, no `Content-Range`, a
    /// claim that the object ends before the range that nothing else in the answer can refute.
    pub(super) fn may_end_early(&self, name: &str) -> bool {
        matches!(self.fault, Fault::Status { code: 416, .. }) && self.name.is_none_or(|n| n == name)
    }
}

/// One case: the client's settings, the batch, and the server's faults.
#[derive(Debug)]
pub(super) struct Case {
    pub(super) settings: Vec<(&'static str, &'static str)>,
    pub(super) reads: Vec<Ask>,
    pub(super) faults: Vec<Planted>,
    /// Every fault is one a client must ride out: every read ends as without faults.
    pub(super) ridden_out: bool,
    /// After how many of its requests [`CHANGING`] is replaced (`None`: never).
    pub(super) change_after: Option<u64>,
    /// The `ETag`s of its two versions.
    pub(super) changing_etags: [Option<&'static str>; 2],
    /// Each batch keeps to one version of each object (`BatchOptions::one_version`).
    pub(super) one_version: bool,
    /// The reads land in the caller's buffers (`Read::borrowed`), not in Karu's.
    pub(super) borrowed: bool,
    /// Probes of objects after the batch.
    pub(super) probes: Vec<Probe>,
    /// The reads go in this many batches (1 to 3), of consecutive reads, all submitted before
    /// any is drained (or each on its own thread, see `threaded`): they run at once on the
    /// client's connections.
    pub(super) batches: usize,
    /// Readers of objects after the probes.
    pub(super) readers: Vec<ReaderProbe>,
    /// On a target without a mock: no faults, [`CHANGING`] never replaced (stored as its
    /// first version), reads that require a version require its own tag or one it never had.
    pub(super) plain: bool,
    /// The tags reads of [`CHANGING`] require, by version.
    pub(super) required: [String; 2],
    /// The objects are remote (they have versions; a local file has none, and its reads that
    /// require one fail with `InvalidArgument`).
    pub(super) remote: bool,
    /// The batches are drained as `Stream`s, polled together on one thread, and the probes and
    /// readers are their futures (`stat_async`, `read_ends_async`, `ObjectReader::open_async`,
    /// `read_many_async`, `read_at_async`), all driven by `futures::executor::block_on`.
    pub(super) asynchronous: bool,
    /// A batch dropped part-way (cancelling its remaining reads): its index, and how many of
    /// its completions are taken before.
    pub(super) abandon: Option<(usize, usize)>,
    /// In an asynchronous case, each probe and reader first starts the same work as a future
    /// and drops it (polled once: its requests may be on their way), which must leave nothing
    /// behind that the work after it could trip on.
    pub(super) dropped_futures: bool,
    /// The case reads through one client that lives for the whole run (with the settings
    /// [`SHARED`]), as a program keeps one: whatever earlier cases left in it (connections cut
    /// by faults, cancelled work, kept locations, objects that have changed since) must not
    /// make a read wrong or hang. Work an earlier case cancelled may still reach the server
    /// during this one, so its requests are not counted.
    pub(super) shared: bool,
    /// Each batch is submitted and drained on a thread of its own, all submitting at once, as
    /// a program's threads share its client (cases of two or three batches); in a blocking
    /// case, each reader's `read_many` and `read_at` run on two threads at once.
    pub(super) threaded: bool,
    /// The client is dropped as soon as the batches (of Karu's buffers) are submitted: they
    /// keep its engine running, and must end as if it were not dropped. A new client probes
    /// and reads after them.
    pub(super) client_dropped: bool,
    /// Two threads take each batch's completions at once (`next_timeout`), as a program's
    /// threads may share a batch: each completion goes to one of them, and both learn when the
    /// batch is drained (not after a wait). Not the batch dropped part-way, nor asynchronously.
    pub(super) two_takers: bool,
}

impl Case {
    /// The case for a target without a mock (see the field `plain`); `tag`: the strong tag the
    /// target gives [`CHANGING`], if any (without one, no read of a remote object requires a
    /// version); `remote`: whether its objects are remote.
    pub(super) fn plain(mut self, tag: Option<&str>, remote: bool) -> Case {
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
    pub(super) fn strong_tag(&self, object: usize, v: usize) -> Option<&'static str> {
        let tag = match OBJECTS.get(object) {
            Some(&(_, _, tag)) => tag,
            None => self.changing_etags[v],
        };
        tag.filter(|t| strong(Some(t)))
    }

    /// The versions a read of object `object` may see in this case.
    pub(super) fn versions(&self, object: usize) -> Vec<Version> {
        let mut all = versions(object);
        if self.plain {
            all.truncate(1);
        }
        all
    }

    /// The reads of each batch: `start..end` of [`Case::reads`].
    pub(super) fn batch_ranges(&self) -> Vec<std::ops::Range<usize>> {
        let n = self.reads.len();
        (0..self.batches)
            .map(|b| b * n / self.batches..(b + 1) * n / self.batches)
            .collect()
    }
}

impl Case {
    pub(super) fn new(seed: u64) -> Case {
        let mut rng = Rng::new(seed);
        let mut settings = vec![
            (
                "planner.max_gap",
                *rng.pick(&["0", "1KiB", "64KiB", "1MiB"]),
            ),
            ("planner.trade", *rng.pick(&["guards", "priced", "frugal"])),
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
pub(super) fn random_fault(rng: &mut Rng) -> (Fault, bool) {
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
