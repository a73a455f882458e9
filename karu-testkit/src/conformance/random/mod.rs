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
//!   fetched in parts; not counted on the client cases share), beyond the duplicates hedging
//!   sent of requests still waiting (counted by the batches' stats).
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
//!
//! The files: this file runs a case ([`run_case`], phase by phase) and the seeds; `case.rs`
//! makes a case from its seed; `drive.rs` submits and drains its batches; `judge.rs` judges
//! what they delivered, the requests they made, and the probes and readers.

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

mod case;
mod drive;
mod judge;

use case::*;
use drive::*;
use judge::*;

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
        judge_requests(case, mock, &log, delivered.hedges, &mut wrong);
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
