//! Remote reads: event loops, the shared concurrency limit, and the life of one transfer
//! (prepare late, send, check, resume or retry under one deadline, scatter to parts).
//!
//! `KARU_IO_THREADS` loops each run a current-thread tokio runtime with its own hyper
//! connection pool and its own queue of pending transfers. A client-wide semaphore bounds the
//! active transfers of all loops together; a transfer waits in its loop's queue (as a plain
//! description: no task, no buffer) until a permit frees up, so a batch of any size holds at
//! most the limit in flight.

pub mod check;
pub(crate) mod exchange;
pub(crate) mod failure;
pub mod request;
pub(crate) mod transport;

use std::collections::HashMap;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use karu_config::{Settings, Snapshot};
use parking_lot::Mutex;
use tokio::sync::{Semaphore, mpsc};
use tokio::task::JoinSet;

use crate::batch::BatchShared;
use crate::http::check::{Expectation, RangeSpec, is_single_strong};
use crate::http::exchange::{Exchange, Failure, Limits};
use crate::http::request::PrepareContext;
use crate::http::transport::{DnsCache, HttpClient, Resolver};
use crate::locator::Locator;
use crate::read::Completion;
use crate::retry::{Decision, FailReason, RetryPolicy, RetryState};
use crate::status::{Error, Status};
use crate::transfer::Transfer;

/// Counters of the remote path, for benchmarks and demos.
#[derive(Debug, Default)]
pub(crate) struct RemoteStats {
    pub(crate) requests: AtomicU64,
    pub(crate) body_bytes: AtomicU64,
    pub(crate) retries: AtomicU64,
}

/// A snapshot of the remote path's counters since the client started.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct TransportStats {
    /// HTTP requests sent (every attempt and redirect hop).
    pub requests: u64,
    /// Response body bytes received.
    pub body_bytes: u64,
    /// Attempts made after a failed one.
    pub retries: u64,
}

type BoxFuture = Pin<Box<dyn Future<Output = ()> + Send>>;

enum Job {
    Transfer(Transfer),
    Task(Box<dyn FnOnce(Arc<LoopCtx>) -> BoxFuture + Send>),
}

/// State every loop shares.
struct Shared {
    snapshot: Snapshot,
    limit: Arc<Semaphore>,
    stats: RemoteStats,
    tls: Arc<rustls::ClientConfig>,
    dns: Arc<DnsCache>,
}

/// One loop's own state, shared by the tasks it runs.
pub(crate) struct LoopCtx {
    shared: Arc<Shared>,
    /// One client (connection pool) per connect timeout in use; usually one.
    clients: Mutex<HashMap<Duration, HttpClient>>,
}

impl LoopCtx {
    fn client(&self, settings: &Settings) -> HttpClient {
        let timeout = settings.http.connect_timeout.0;
        let mut clients = self.clients.lock();
        clients
            .entry(timeout)
            .or_insert_with(|| {
                transport::client(
                    Arc::clone(&self.shared.tls),
                    Resolver::new(Arc::clone(&self.shared.dns)),
                    timeout,
                    self.shared.snapshot.global().http.version,
                )
            })
            .clone()
    }

    fn settings_for(&self, locator: &Locator) -> Arc<Settings> {
        self.shared
            .snapshot
            .for_path(locator.canonical().as_str())
            .unwrap_or_else(|_| Arc::new(self.shared.snapshot.global().clone()))
    }
}

struct LoopHandle {
    sender: Option<mpsc::UnboundedSender<Job>>,
    thread: Option<JoinHandle<()>>,
}

/// The HTTP engine: event loops and their shared limit.
pub(crate) struct Remote {
    loops: Vec<LoopHandle>,
    next: AtomicUsize,
    shared: Arc<Shared>,
}

impl Remote {
    pub(crate) fn start(snapshot: &Snapshot) -> Result<Remote, Error> {
        let global = snapshot.global();
        let shared = Arc::new(Shared {
            snapshot: snapshot.clone(),
            limit: Arc::new(Semaphore::new(global.concurrency.max(1))),
            stats: RemoteStats::default(),
            tls: transport::tls_config(&global.http)?,
            dns: Arc::new(DnsCache::new(global.http.dns_ttl.0)),
        });
        let mut loops = Vec::new();
        for i in 0..global.io_threads.max(1) {
            let (sender, receiver) = mpsc::unbounded_channel();
            let ctx = Arc::new(LoopCtx {
                shared: Arc::clone(&shared),
                clients: Mutex::new(HashMap::new()),
            });
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .map_err(|e| Error::new(Status::Io, format!("cannot start an event loop: {e}")))?;
            let thread = std::thread::Builder::new()
                .name(format!("karu-io-{i}"))
                .spawn(move || runtime.block_on(run_loop(receiver, ctx)))
                .map_err(|e| Error::new(Status::Io, format!("cannot start an event loop: {e}")))?;
            loops.push(LoopHandle {
                sender: Some(sender),
                thread: Some(thread),
            });
        }
        Ok(Remote {
            loops,
            next: AtomicUsize::new(0),
            shared,
        })
    }

    fn pick(&self) -> &LoopHandle {
        let i = self.next.fetch_add(1, Ordering::Relaxed) % self.loops.len();
        &self.loops[i]
    }

    /// Queue a transfer on the next loop.
    pub(crate) fn submit(&self, transfer: Transfer) {
        let sender = self.pick().sender.as_ref();
        match sender.map(|s| s.send(Job::Transfer(transfer))) {
            Some(Ok(())) => {}
            Some(Err(mpsc::error::SendError(Job::Transfer(t)))) => {
                t.fail(&Error::internal("the event loops have stopped"));
            }
            _ => {}
        }
    }

    /// Run `f` on a loop (under the concurrency limit) and wait for its result. Used for size
    /// probes and `read_ends`, which are not batch reads.
    fn run<T, F, Fut>(&self, f: F) -> Result<T, Error>
    where
        T: Send + 'static,
        F: FnOnce(Arc<LoopCtx>) -> Fut + Send + 'static,
        Fut: Future<Output = Result<T, Error>> + Send + 'static,
    {
        let (tx, rx) = std::sync::mpsc::sync_channel(1);
        let job = Job::Task(Box::new(move |ctx| {
            Box::pin(async move {
                let _ = tx.send(f(ctx).await);
            })
        }));
        let sent = self
            .pick()
            .sender
            .as_ref()
            .is_some_and(|s| s.send(job).is_ok());
        if !sent {
            return Err(Error::internal("the event loops have stopped"));
        }
        rx.recv()
            .unwrap_or_else(|_| Err(Error::internal("an event loop dropped a request")))
    }

    pub(crate) fn stats(&self) -> TransportStats {
        let s = &self.shared.stats;
        TransportStats {
            requests: s.requests.load(Ordering::Relaxed),
            body_bytes: s.body_bytes.load(Ordering::Relaxed),
            retries: s.retries.load(Ordering::Relaxed),
        }
    }

    /// Size and strong ETag from a one-byte read of byte 0 (same authorisation and range path
    /// as a real read). The empty-object answer (416 `bytes */0`) means size 0.
    pub(crate) fn stat(&self, locator: &Locator) -> Result<(u64, Option<String>), Error> {
        let locator = locator.whole();
        self.run(move |ctx| async move {
            let settings = ctx.settings_for(&locator);
            let mut byte = [0u8; 1];
            let range = RangeSpec::Closed { first: 0, last: 0 };
            let fetched = fetch(&ctx, &locator, range, None, &settings, &mut byte, None).await?;
            let size = fetched.total.ok_or_else(|| {
                Error::new(
                    Status::Protocol,
                    format!(
                        "the server did not state the size of {}",
                        locator.canonical()
                    ),
                )
            })?;
            Ok((size, fetched.etag))
        })
    }

    /// The absolute ranges `head` and `tail` of an object together: both requests in flight at
    /// once when the backend honours suffix ranges, else the tail after the head with
    /// `If-Match` on its ETag. Both answers must agree on size and ETag.
    pub(crate) fn read_ends(
        &self,
        locator: &Locator,
        head_len: u64,
        tail_len: u64,
    ) -> Result<RemoteEnds, Error> {
        let locator = locator.clone();
        self.run(move |ctx| async move { read_ends(&ctx, &locator, head_len, tail_len).await })
    }
}

impl Drop for Remote {
    fn drop(&mut self) {
        for l in &mut self.loops {
            l.sender = None; // the loop finishes its queue and running tasks, then exits
        }
        let me = std::thread::current().id();
        for l in &mut self.loops {
            if let Some(t) = l.thread.take()
                && t.thread().id() != me
            {
                let _ = t.join();
            }
        }
    }
}

impl fmt::Debug for Remote {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Remote")
            .field("loops", &self.loops.len())
            .field("stats", &self.stats())
            .finish_non_exhaustive()
    }
}

async fn run_loop(mut receiver: mpsc::UnboundedReceiver<Job>, ctx: Arc<LoopCtx>) {
    let mut tasks = JoinSet::new();
    while let Some(job) = receiver.recv().await {
        if let Job::Transfer(t) = &job
            && t.batch.is_cancelled()
        {
            if let Job::Transfer(t) = job {
                t.cancel();
            }
            continue;
        }
        let permit = match Arc::clone(&ctx.shared.limit).acquire_owned().await {
            Ok(permit) => permit,
            Err(_) => {
                if let Job::Transfer(t) = job {
                    t.fail(&Error::internal("the concurrency limit was closed"));
                }
                continue;
            }
        };
        let ctx = Arc::clone(&ctx);
        tasks.spawn(async move {
            let _permit = permit;
            match job {
                Job::Transfer(t) => run_transfer(t, ctx).await,
                Job::Task(f) => f(ctx).await,
            }
        });
        while tasks.try_join_next().is_some() {}
    }
    while tasks.join_next().await.is_some() {}
}

/// Run one remote transfer and complete each of its parts.
async fn run_transfer(mut transfer: Transfer, ctx: Arc<LoopCtx>) {
    let batch = Arc::clone(&transfer.batch);
    if !batch.begin() {
        transfer.cancel();
        return;
    }
    let settings = ctx.settings_for(&transfer.locator);
    let range = RangeSpec::Closed {
        first: transfer.start,
        last: transfer.start + (transfer.length - 1),
    };
    let completions = if transfer.parts.len() == 1 {
        // One part: receive straight into its destination.
        let locator = transfer.locator.clone();
        let if_match = transfer.if_match.clone();
        let part = &mut transfer.parts[0];
        let result = match part.sink.slice(part.length) {
            Ok(dst) => {
                fetch(
                    &ctx,
                    &locator,
                    range,
                    if_match.as_deref(),
                    &settings,
                    dst,
                    Some(&batch),
                )
                .await
            }
            Err(e) => Err(e),
        };
        scatter(&mut transfer, result, None)
    } else {
        // Merged: receive the span once into temporary storage, then copy each segment.
        let mut span = Vec::new();
        let result = match usize::try_from(transfer.length)
            .ok()
            .filter(|&n| span.try_reserve_exact(n).is_ok())
        {
            Some(n) => {
                span.resize(n, 0);
                let locator = transfer.locator.clone();
                fetch(
                    &ctx,
                    &locator,
                    range,
                    transfer.if_match.as_deref(),
                    &settings,
                    &mut span,
                    Some(&batch),
                )
                .await
            }
            None => Err(Error::new(
                Status::InvalidArgument,
                format!(
                    "cannot allocate {} bytes for a merged transfer",
                    transfer.length
                ),
            )),
        };
        scatter(&mut transfer, result, Some(&span))
    };
    batch.complete(completions);
    batch.end();
}

/// Turn a fetch result into one completion per part. `span` holds the merged bytes (None when
/// the single part was received in place).
fn scatter(
    transfer: &mut Transfer,
    result: Result<Fetched, Error>,
    span: Option<&[u8]>,
) -> Vec<Completion> {
    let parts = std::mem::take(&mut transfer.parts);
    let object_end = transfer.start;
    match result {
        Err(error) => parts
            .into_iter()
            .map(|p| p.into_completion(Err(error.clone()), 0))
            .collect(),
        Ok(fetched) => parts
            .into_iter()
            .map(|mut part| {
                let start = part.offset_in_span;
                let end = start + part.length;
                let available = fetched.available;
                let have = available.saturating_sub(start).min(part.length);
                if let Some(span) = span
                    && have > 0
                {
                    match part.sink.slice(part.length) {
                        Ok(dst) => dst[..have as usize]
                            .copy_from_slice(&span[start as usize..(start + have) as usize]),
                        Err(e) => return part.into_completion(Err(e), 0),
                    }
                }
                if end <= available {
                    let length = part.length;
                    part.into_completion(Ok(()), length)
                } else if fetched.ends_early {
                    let at = object_end + available;
                    let error = Error::new(
                        Status::RangeNotSatisfiable,
                        format!(
                            "the object ends at byte {at}: {have} of the {} bytes requested exist",
                            part.length
                        ),
                    );
                    part.into_completion(Err(error), have)
                } else {
                    let error = Error::internal("a response delivered fewer bytes than proven");
                    part.into_completion(Err(error), 0)
                }
            })
            .collect(),
    }
}

/// What a fetch delivered into its destination.
#[derive(Debug, Clone)]
pub(crate) struct Fetched {
    /// Bytes from the first requested byte that are proven.
    pub(crate) available: u64,
    /// Whether the object ended before the requested last byte.
    pub(crate) ends_early: bool,
    /// The object's strong ETag, if any.
    pub(crate) etag: Option<String>,
    /// The object's size, when a response stated it.
    pub(crate) total: Option<u64>,
}

/// Fetch `range` into `dst` with retries, resume and corrections, under one deadline.
pub(crate) async fn fetch(
    ctx: &LoopCtx,
    locator: &Locator,
    range: RangeSpec,
    if_match: Option<&str>,
    settings: &Settings,
    dst: &mut [u8],
    cancel: Option<&BatchShared>,
) -> Result<Fetched, Error> {
    let started = Instant::now();
    let mut retry = RetryState::new(RetryPolicy::from(&settings.retry), started);
    let mut rng = fastrand::Rng::new();
    let client = ctx.client(settings);
    let limits = Limits::from(&settings.http);
    let backend = locator.backend().as_ref();
    let exchange = Exchange {
        client: &client,
        backend,
        limits,
        deadline: retry.deadline(),
        cancel,
        stats: &ctx.shared.stats,
    };
    // Resume state: bytes already proven, and the tag that pins their version.
    let mut kept: u64 = 0;
    let mut pin: Option<String> = None;
    let mut region_hint: Option<String> = None;
    let mut total: Option<u64> = None;
    loop {
        let attempt = retry.start_attempt();
        if attempt > 1 {
            ctx.shared.stats.retries.fetch_add(1, Ordering::Relaxed);
        }
        let (range_now, condition) = match (range, kept) {
            (RangeSpec::Closed { first, last }, k) if k > 0 => (
                RangeSpec::Closed {
                    first: first + k,
                    last,
                },
                if_match.or(pin.as_deref()),
            ),
            _ => (range, if_match),
        };
        let prepared = backend.prepare(&PrepareContext {
            locator,
            range: range_now,
            if_match: condition,
            snapshot: &ctx.shared.snapshot,
            credential: None,
            region_hint: region_hint.as_deref(),
            attempt,
        })?;
        if prepared.range != range_now {
            return Err(Error::internal(format!(
                "the {} backend prepared a different range than asked",
                backend.name()
            )));
        }
        let expect = Expectation {
            range: range_now,
            if_match: condition,
            fallback_limit: limits.fallback_limit,
            accepts_stored_gzip: prepared.options.accept_stored_gzip,
        };
        let attempt_started = Instant::now();
        let dst_now = &mut dst[kept as usize..];
        let failure = match exchange.run(prepared, expect, dst_now).await {
            Ok(success) => {
                return Ok(Fetched {
                    available: kept + success.delivered.available,
                    ends_early: success.delivered.ends_early,
                    etag: success.etag.or(pin),
                    total: success.total.or(total),
                });
            }
            Err(failure) => failure,
        };
        if failure.error.status() == Status::Cancelled {
            return Err(failure.error);
        }
        // Resume bookkeeping: keep proven bytes only when a strong tag pins their version.
        let resumable = matches!(range, RangeSpec::Closed { .. });
        if failure.kept > 0 && resumable {
            let tag = failure
                .etag
                .clone()
                .filter(|t| is_single_strong(t))
                .or_else(|| if_match.filter(|c| is_single_strong(c)).map(str::to_string));
            match tag {
                Some(tag) if pin.as_deref().is_none_or(|p| p == tag) => {
                    kept += failure.kept;
                    pin = Some(tag);
                }
                _ => {
                    kept = 0;
                    pin = None;
                }
            }
        }
        if failure.error.status() == Status::PreconditionFailed && if_match.is_none() && kept > 0 {
            // Karu's own saved tag stopped matching: the object changed; start over.
            tracing::debug!(
                attempt,
                "saved ETag no longer matches; discarding partial data"
            );
            kept = 0;
            pin = None;
            total = None;
            let decision = retry.handle_failure(
                crate::retry::FailureClass::Transport,
                None,
                attempt_started.elapsed(),
                Instant::now(),
                &mut rng,
            );
            if !wait(decision, &retry, cancel).await {
                return Err(failure.error);
            }
            continue;
        }
        let decision = retry.handle_failure(
            failure.class,
            failure.retry_after,
            attempt_started.elapsed(),
            Instant::now(),
            &mut rng,
        );
        tracing::debug!(attempt, ?decision, status = ?failure.error.status(), "attempt failed");
        match decision {
            Decision::Reprepare => {
                if let Some(crate::http::request::Correction::Reprepare { region }) =
                    &failure.correction
                {
                    region_hint = Some(region.clone());
                }
            }
            Decision::Reauthenticate => {}
            Decision::RetryAfter(_) => {
                if !wait(decision, &retry, cancel).await {
                    return Err(Failure::cancelled().error);
                }
            }
            Decision::Fail(reason) => return Err(final_error(failure, reason, attempt)),
        }
    }
}

/// Sleep for a retry decision; false if the batch was cancelled meanwhile.
async fn wait(decision: Decision, retry: &RetryState, cancel: Option<&BatchShared>) -> bool {
    let Decision::RetryAfter(pause) = decision else {
        return matches!(decision, Decision::Reprepare | Decision::Reauthenticate);
    };
    let until = (Instant::now() + pause).min(retry.deadline());
    tokio::select! {
        biased;
        () = exchange::until_cancelled(cancel) => false,
        () = tokio::time::sleep_until(until.into()) => true,
    }
}

fn final_error(failure: Failure, reason: FailReason, attempts: u32) -> Error {
    let error = failure.error;
    let suffix = match reason {
        FailReason::Permanent => return error,
        FailReason::AttemptsExhausted => format!(" (gave up after {attempts} attempts)"),
        FailReason::DeadlineExhausted => {
            format!(
                " (the read's deadline left no time for attempt {})",
                attempts + 1
            )
        }
        FailReason::CorrectionRepeated => " (a one-time correction was needed again)".to_string(),
    };
    let mut out = Error::new(error.status(), format!("{}{suffix}", error.message()));
    if let Some(code) = error.http_status() {
        out = out.with_http_status(code);
    }
    out
}

/// Both ends of a remote object, as absolute answers.
#[derive(Debug)]
pub(crate) struct RemoteEnds {
    pub(crate) size: u64,
    pub(crate) etag: Option<String>,
    pub(crate) head: Vec<u8>,
    pub(crate) tail: Vec<u8>,
}

async fn read_ends(
    ctx: &LoopCtx,
    locator: &Locator,
    head_len: u64,
    tail_len: u64,
) -> Result<RemoteEnds, Error> {
    let whole = locator.whole();
    let settings = ctx.settings_for(&whole);
    let window = locator.window();
    let base = window.map_or(0, |w| w.start);
    let too_big = |n: u64| {
        usize::try_from(n).map_err(|_| {
            Error::new(
                Status::InvalidArgument,
                format!("cannot allocate {n} bytes"),
            )
        })
    };
    let mut head = vec![0u8; too_big(head_len)?];
    let mut tail = vec![0u8; too_big(tail_len)?];
    let suffix_ok = whole.backend().capabilities().suffix_ranges;

    // A bounded window knows its size: two closed ranges, in flight together.
    if let Some(len) = window.and_then(|w| w.len) {
        let h = head_len.min(len);
        let t = tail_len.min(len);
        let (hr, tr) = tokio::join!(
            fetch_closed(ctx, &whole, base, h, None, &settings, &mut head),
            fetch_closed(ctx, &whole, base + len - t, t, None, &settings, &mut tail),
        );
        let (hf, tf) = (hr?, tr?);
        let etag = agree_etag(&hf, &tf, &whole)?;
        exact(&hf, h, &whole)?;
        exact(&tf, t, &whole)?;
        head.truncate(h as usize);
        tail.truncate(t as usize);
        return Ok(RemoteEnds {
            size: len,
            etag,
            head,
            tail,
        });
    }

    let head_range = RangeSpec::closed(base, head_len.max(1));
    let (hf, tf) = if suffix_ok && tail_len > 0 {
        let mut probe = [0u8; 1];
        let head_dst: &mut [u8] = if head_len == 0 { &mut probe } else { &mut head };
        let (hr, tr) = tokio::join!(
            fetch_range(ctx, &whole, head_range, None, &settings, head_dst),
            fetch(
                ctx,
                &whole,
                RangeSpec::Suffix { len: tail_len },
                None,
                &settings,
                &mut tail,
                None
            ),
        );
        (hr?, Some(tr?))
    } else {
        let mut probe = [0u8; 1];
        let head_dst: &mut [u8] = if head_len == 0 { &mut probe } else { &mut head };
        (
            fetch_range(ctx, &whole, head_range, None, &settings, head_dst).await?,
            None,
        )
    };
    let size = hf.total.ok_or_else(|| {
        Error::new(
            Status::Protocol,
            format!("the server did not state the size of {}", whole.canonical()),
        )
    })?;
    let visible = size.saturating_sub(base);
    let h = head_len.min(visible);
    if hf.available < h {
        return Err(Error::new(
            Status::Protocol,
            format!("the head of {} arrived short", whole.canonical()),
        ));
    }
    head.truncate(h as usize);
    let t = tail_len.min(visible);
    let (etag, tail) = match tf {
        Some(tf) => {
            let etag = agree_etag(&hf, &tf, &whole)?;
            if tf.total != Some(size) {
                return Err(changed(&whole, "size"));
            }
            // The suffix may reach before the window's start: keep only the visible part.
            let got = tf.available;
            let skip = (got - t.min(got)) as usize;
            tail.truncate(got as usize);
            let tail = tail.split_off(skip);
            if tail.len() as u64 != t {
                return Err(Error::new(
                    Status::Protocol,
                    format!("the tail of {} arrived short", whole.canonical()),
                ));
            }
            (etag, tail)
        }
        None if t == 0 => (hf.etag.clone(), Vec::new()),
        None => {
            // No suffix ranges: the tail follows the head, pinned to the head's version.
            let condition = hf.etag.clone();
            let tf = fetch_closed(
                ctx,
                &whole,
                size - t,
                t,
                condition.as_deref(),
                &settings,
                &mut tail,
            )
            .await?;
            let etag = agree_etag(&hf, &tf, &whole)?;
            if tf.total.is_some_and(|s| s != size) {
                return Err(changed(&whole, "size"));
            }
            exact(&tf, t, &whole)?;
            tail.truncate(t as usize);
            (etag, tail)
        }
    };
    Ok(RemoteEnds {
        size: visible,
        etag,
        head,
        tail,
    })
}

async fn fetch_range(
    ctx: &LoopCtx,
    locator: &Locator,
    range: Option<RangeSpec>,
    if_match: Option<&str>,
    settings: &Settings,
    dst: &mut [u8],
) -> Result<Fetched, Error> {
    let range = range.ok_or_else(|| Error::new(Status::InvalidRange, "range overflows"))?;
    fetch(ctx, locator, range, if_match, settings, dst, None).await
}

async fn fetch_closed(
    ctx: &LoopCtx,
    locator: &Locator,
    offset: u64,
    length: u64,
    if_match: Option<&str>,
    settings: &Settings,
    dst: &mut [u8],
) -> Result<Fetched, Error> {
    if length == 0 {
        return Ok(Fetched {
            available: 0,
            ends_early: false,
            etag: None,
            total: None,
        });
    }
    let range = RangeSpec::closed(offset, length);
    fetch_range(
        ctx,
        locator,
        range,
        if_match,
        settings,
        &mut dst[..length as usize],
    )
    .await
}

fn exact(f: &Fetched, want: u64, locator: &Locator) -> Result<(), Error> {
    if want > 0 && f.available < want {
        return Err(Error::new(
            Status::RangeNotSatisfiable,
            format!(
                "{} ends before its window: {} of {want} bytes exist",
                locator.canonical(),
                f.available
            ),
        ));
    }
    Ok(())
}

fn agree_etag(a: &Fetched, b: &Fetched, locator: &Locator) -> Result<Option<String>, Error> {
    match (&a.etag, &b.etag) {
        (Some(x), Some(y)) if x != y => Err(changed(locator, "ETag")),
        (x, y) => Ok(x.clone().or_else(|| y.clone())),
    }
}

fn changed(locator: &Locator, what: &str) -> Error {
    Error::new(
        Status::PreconditionFailed,
        format!(
            "{} changed between the two answers of read_ends (their {what}s differ)",
            locator.canonical()
        ),
    )
}
