//! Batches: the completion queue of one submission, drained blocking (`next_timeout`, `wait`)
//! or as a `Stream`.

pub(crate) mod in_flight;
pub(crate) mod read;
pub(crate) mod timing;
pub(crate) mod versions;

use std::collections::VecDeque;
use std::fmt;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use futures_core::{FusedStream, Stream};
use parking_lot::{Condvar, Mutex};

use crate::batch::in_flight::{Bound, InFlight, Start, Waiting};
use crate::batch::read::Completion;
use crate::batch::timing::{Timing, TransferMeter};
use crate::batch::versions::VersionPins;
use crate::sdk::{Error, ProcessStamp, Status};

/// What [`Batch::next_timeout`] and [`Batch::try_next`] return.
#[derive(Debug)]
#[must_use]
pub enum Next {
    /// One read finished; its own status says whether it succeeded.
    Completion(Completion),
    /// The timeout passed without a completion. Work continues; nothing changed.
    TimedOut,
    /// Every original read has completed and been taken: the batch is drained.
    Drained,
}

/// Figures of a submission: the plan's, known as soon as it is planned, and the bytes
/// received so far ([`fetched_bytes`](BatchStats::fetched_bytes), final once the batch is
/// drained).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct BatchStats {
    /// Original reads submitted.
    pub reads: usize,
    /// Reads rejected before any input or output.
    pub rejected: usize,
    /// Transfers planned (local reads and HTTP requests). With `planner.trade = "priced"` a
    /// merged request's gaps are priced again as it starts, with what the client has measured
    /// by then, and the pieces it comes apart into count here from that moment.
    pub transfers: usize,
    /// Bytes the valid reads asked for (overlaps counted once per read).
    pub requested_bytes: u64,
    /// Bytes received so far: the response body bytes of the transfers' spans over every
    /// attempt (a retried transfer counts each attempt's bytes), and the bytes local reads
    /// read. Final once the batch is drained.
    pub fetched_bytes: u64,
    /// Bytes the planned transfers span: what they fetch if every answer is whole and none
    /// is retried (less the gaps of merged requests that came apart as they started).
    pub planned_bytes: u64,
    /// Duplicates sent so far of the transfers' requests still waiting for their answers
    /// (`[hedge]`): requests beyond one per attempt. Final once the batch is drained.
    pub hedges: u64,
}

/// A submission's completions, arriving as work finishes.
///
/// Drain it in whichever way suits the caller, even several at once:
///
/// - blocking: [`Batch::next_timeout`], [`Batch::try_next`], [`Batch::next_blocking`],
///   [`Batch::wait`];
/// - async: `Batch` (and `&Batch`) is a [`Stream`] of [`Completion`]s, so
///   `while let Some(done) = batch.next().await` works with `futures::StreamExt` (or
///   `tokio_stream::StreamExt`) on any executor: the stream is woken by the Karu thread that
///   completes a read, never by the caller's runtime. It ends once every read has completed
///   and been taken, and its [`size_hint`](Stream::size_hint) is exact.
///
/// `Batch` is `Send + Sync`: several threads (or tasks, through `&Batch`) may take completions
/// from one batch at once, and each completion is returned exactly once.
///
/// Destinations are owned: a read's buffer (caller-supplied or Karu-allocated) travels with
/// its transfer and comes back in its [`Completion`]. Nothing the caller borrows is referenced
/// by a `Batch`, so dropping one never waits: its reads that had not started are cancelled,
/// and the transfers already running are told to stop and end in the background, each with
/// the buffers it owns (freed when it ends). (A batch keeps its engine alive; if it is the
/// last handle to it, the drop also shuts the engine down, which waits for its threads.)
/// Leaking a batch with [`std::mem::forget`] is safe too (it only leaks memory). Borrowed
/// destinations go through a [`Scope`](crate::Scope) instead, whose
/// [`ScopedBatch`](crate::ScopedBatch) does wait when dropped.
///
/// # In a forked child
///
/// A batch belongs to the process that submitted it: its transfers run on that process's
/// threads, which a forked child does not have. Used in a child, a batch submitted before the
/// fork never touches its shared state (a thread of the parent may have held its lock at the
/// instant of the fork, and then holds it forever in the child): each of its reads completes
/// there at once, with [`Status::InvalidArgument`] (its tag and index kept, whether or not
/// the parent had taken its completion), and then it is drained. Dropping it in the child
/// frees nothing: it stays allocated until the child exits. Submit the reads again in the
/// child, on the same client (which starts the child's own workers on first use).
#[must_use = "dropping a batch cancels its reads"]
pub struct Batch {
    pub(crate) shared: Arc<BatchShared>,
    pub(crate) stats: BatchStats,
    /// Keeps the engine (its workers and event loops) alive while the batch is.
    pub(crate) _engine: Arc<dyn Send + Sync>,
}

impl Batch {
    /// The next completion, waiting at most `timeout` for one (blocking the thread).
    pub fn next_timeout(&self, timeout: Duration) -> Next {
        self.shared.next(Some(timeout))
    }

    /// The next completion without waiting.
    pub fn try_next(&self) -> Next {
        self.shared.next(Some(Duration::ZERO))
    }

    /// The next completion, or `None` once drained; blocks the thread as long as it takes.
    pub fn next_blocking(&self) -> Option<Completion> {
        match self.shared.next(None) {
            Next::Completion(c) => Some(c),
            _ => None,
        }
    }

    /// Block until the batch is drained, returning the completions not yet taken, sorted by
    /// their index in the submission.
    pub fn wait(&self) -> Vec<Completion> {
        in_submission_order(self.shared.drain())
    }

    /// Cancel the reads that have not started; running transfers finish or abort, and every
    /// read still completes (cancelled ones with `Status::Cancelled`).
    pub fn cancel(&self) {
        self.shared.cancel();
    }

    /// Original reads not yet completed.
    pub fn pending(&self) -> usize {
        match self.shared.foreign() {
            Some(foreign) => foreign.left(),
            None => self.shared.state.lock().pending,
        }
    }

    /// Transfers of this batch running now: those whose destinations a worker may be
    /// writing. A snapshot, for progress displays and tests (0 in a forked child, where no
    /// transfer of a batch submitted before the fork runs).
    pub fn active_transfers(&self) -> usize {
        match self.shared.foreign() {
            Some(_) => 0,
            None => self.shared.state.lock().active,
        }
    }

    /// Block until at least `n` transfers of this batch are running (workers have begun
    /// them and may be writing their destinations), or until `timeout` passes; whether they
    /// are. Woken by the workers as transfers begin, without polling: a test waits here for a
    /// transfer to hold its destinations before it releases, drops or cancels the batch.
    pub fn wait_for_active(&self, n: usize, timeout: Duration) -> bool {
        self.shared.wait_for_active(n, timeout)
    }

    /// Figures of the plan, and the bytes received so far.
    pub fn stats(&self) -> BatchStats {
        let shared = &self.shared;
        BatchStats {
            fetched_bytes: shared.received.load(Ordering::Relaxed),
            hedges: shared.hedges.load(Ordering::Relaxed),
            transfers: self.stats.transfers + shared.came_apart.load(Ordering::Relaxed),
            planned_bytes: (self.stats.planned_bytes)
                .saturating_sub(shared.unplanned.load(Ordering::Relaxed)),
            ..self.stats
        }
    }
}

impl Stream for Batch {
    type Item = Completion;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Completion>> {
        self.shared.poll_next(cx)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.shared.size_hint()
    }
}

/// Several tasks may take completions from one batch through shared references.
impl Stream for &Batch {
    type Item = Completion;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Completion>> {
        self.shared.poll_next(cx)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.shared.size_hint()
    }
}

impl FusedStream for Batch {
    fn is_terminated(&self) -> bool {
        self.shared.is_drained()
    }
}

impl FusedStream for &Batch {
    fn is_terminated(&self) -> bool {
        self.shared.is_drained()
    }
}

impl Drop for Batch {
    /// Cancels the batch without waiting: nothing borrowed is at stake (a scope's batches
    /// wait in [`ScopedBatch`](crate::ScopedBatch)'s drop and at the end of their scope).
    fn drop(&mut self) {
        if self.shared.foreign().is_some() {
            // Submitted in another process (before a fork): its shared state and its engine
            // are left alone, allocated until exit. Dropping either here could lock what a
            // thread that is not here holds, or join threads that do not exist.
            std::mem::forget(Arc::clone(&self.shared));
            std::mem::forget(Arc::clone(&self._engine));
            return;
        }
        self.shared.cancel();
    }
}

impl fmt::Debug for Batch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(foreign) = self.shared.foreign() {
            return f
                .debug_struct("Batch")
                .field("stats", &self.stats)
                .field("submitted_in_process", &self.shared.process.pid())
                .field("left", &foreign.left())
                .finish_non_exhaustive();
        }
        let state = self.shared.state.lock();
        f.debug_struct("Batch")
            .field("stats", &self.stats)
            .field("pending", &state.pending)
            .field("queued_completions", &state.queue.len())
            .field("active_transfers", &state.active)
            .field("cancelled", &state.cancelled)
            .finish()
    }
}

/// The state shared by a batch and the workers running its transfers.
pub(crate) struct BatchShared {
    state: Mutex<State>,
    /// Signalled when a completion is queued and a thread waits in `next`, or the batch drains.
    ready: Condvar,
    /// Signalled when the last active transfer ends.
    idle: Condvar,
    /// Signalled when a transfer begins and a thread waits in `wait_for_active`.
    began: Condvar,
    /// Mirror of `State::cancelled` for cheap checks in transfer loops.
    cancelled: AtomicBool,
    /// Wakes remote transfers waiting on the network when the batch is cancelled.
    cancel_notify: tokio::sync::Notify,
    /// The version each object is pinned to, when the batch keeps to one version.
    versions: Option<VersionPins>,
    /// The process that submitted the batch.
    process: ProcessStamp,
    /// Each read's tag, by index (what a forked child reports its reads with).
    tags: Box<[u64]>,
    /// Reads reported in a forked child so far (only ever changed there).
    reported_elsewhere: AtomicUsize,
    /// When the batch was submitted: every read's timings count from here.
    queued: Instant,
    /// Bytes its transfers received so far.
    received: AtomicU64,
    /// Duplicates its transfers' requests were sent so far.
    hedges: AtomicU64,
    /// Transfers added, and planned bytes no longer fetched, by merged transfers that came
    /// apart as they started (see `http::reprice`).
    came_apart: AtomicUsize,
    unplanned: AtomicU64,
    /// The batch's own bound on its transfers in flight, when it has one.
    in_flight: OnceLock<Box<dyn Bound>>,
}

/// A batch used in another process than the one that submitted it (a forked child): its reads
/// complete there from the batch's immutable parts alone, never from its shared state.
pub(crate) struct Foreign<'b> {
    batch: &'b BatchShared,
}

impl Foreign<'_> {
    /// The next read not yet reported in this process, completed as invalid here.
    fn next(&self) -> Option<Completion> {
        let n = self.batch.tags.len();
        let index = self
            .batch
            .reported_elsewhere
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |i| {
                (i < n).then_some(i + 1)
            })
            .ok()?;
        let message = format!(
            "this batch was submitted by process {} before a fork; a batch belongs to the \
             process that submitted it (submit the read again in this process)",
            self.batch.process.pid()
        );
        Some(Completion {
            tag: self.batch.tags[index],
            index,
            result: Err(Error::new(Status::InvalidArgument, message)),
            bytes_received: 0,
            buffer: None,
            timing: Timing::new(),
        })
    }

    /// Reads not reported in this process yet.
    fn left(&self) -> usize {
        let reported = self.batch.reported_elsewhere.load(Ordering::Acquire);
        self.batch.tags.len().saturating_sub(reported)
    }

    /// Every read not reported yet.
    fn drain(&self) -> Vec<Completion> {
        std::iter::from_fn(|| self.next()).collect()
    }
}

/// Proof that one transfer of a batch is active: while it lives, the transfer may touch its
/// destinations, and releasing the batch (or ending its scope) waits. Dropping it ends the
/// transfer, also when a panic unwinds through the worker (the `std::sync::MutexGuard` shape).
#[must_use = "the transfer ends when the guard is dropped"]
pub(crate) struct Active<'b> {
    batch: &'b BatchShared,
}

impl Active<'_> {
    /// Queue the transfer's completions, then end it. Completions are queued while the
    /// transfer is still active, so a waiting release sees the destinations returned before
    /// it can finish.
    ///
    /// The transfer ends in the same critical section that queues its completions: one lock
    /// of the batch's state, which every loop shares, instead of two (no thread can see the
    /// one without the other).
    pub(crate) fn complete(self, completions: impl IntoIterator<Item = Completion>) {
        let batch = self.batch;
        // Ended by `queue` below instead of by the drop.
        std::mem::forget(self);
        batch.queue(completions, true);
    }
}

impl Drop for Active<'_> {
    fn drop(&mut self) {
        self.batch.end();
    }
}

impl fmt::Debug for Active<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Active").finish_non_exhaustive()
    }
}

struct State {
    queue: VecDeque<Completion>,
    /// Original reads whose completion has not been queued yet.
    pending: usize,
    /// Transfers a worker is running (and whose destinations it may touch).
    active: usize,
    /// Threads blocked in `next` (woken per completion); `wait` is woken only when drained.
    next_waiters: usize,
    /// Threads blocked in `wait_for_active` (woken as transfers begin).
    active_waiters: usize,
    cancelled: bool,
    wakers: Vec<Waker>,
}

impl State {
    /// One active transfer ended; `true` if it was the last (wake whoever waits for idle).
    fn end_one(&mut self) -> bool {
        self.active -= 1;
        self.active == 0
    }
}

impl BatchShared {
    /// The shared state of a batch of reads with these tags (by index), submitted by the
    /// running process; with `one_version`, each remote object is pinned to the first version
    /// an answer states.
    pub(crate) fn new(tags: Box<[u64]>, one_version: bool) -> Arc<Self> {
        Self::new_in(tags, one_version, ProcessStamp::current())
    }

    fn new_in(tags: Box<[u64]>, one_version: bool, process: ProcessStamp) -> Arc<Self> {
        Arc::new(BatchShared {
            state: Mutex::new(State {
                queue: VecDeque::new(),
                pending: tags.len(),
                active: 0,
                next_waiters: 0,
                active_waiters: 0,
                cancelled: false,
                wakers: Vec::new(),
            }),
            ready: Condvar::new(),
            idle: Condvar::new(),
            began: Condvar::new(),
            cancelled: AtomicBool::new(false),
            cancel_notify: tokio::sync::Notify::new(),
            versions: one_version.then(VersionPins::default),
            process,
            tags,
            reported_elsewhere: AtomicUsize::new(0),
            queued: Instant::now(),
            received: AtomicU64::new(0),
            hedges: AtomicU64::new(0),
            came_apart: AtomicUsize::new(0),
            unplanned: AtomicU64::new(0),
            in_flight: OnceLock::new(),
        })
    }

    /// The batch as seen from a process that did not submit it (a forked child), if this is
    /// one. Every entry point of the caller's side asks first, and leaves the shared state
    /// alone when it is.
    pub(crate) fn foreign(&self) -> Option<Foreign<'_>> {
        (!self.process.is_current()).then_some(Foreign { batch: self })
    }

    /// The versions pinned so far, when the batch keeps to one version per object.
    pub(crate) fn versions(&self) -> Option<&VersionPins> {
        self.versions.as_ref()
    }

    /// A merged transfer came apart into `added + 1` transfers as it started, which no longer
    /// fetch `unplanned` of its planned bytes.
    pub(crate) fn came_apart(&self, added: usize, unplanned: u64) {
        self.came_apart.fetch_add(added, Ordering::Relaxed);
        self.unplanned.fetch_add(unplanned, Ordering::Relaxed);
    }

    /// Bound the batch's transfers in flight to `limit` (before any is handed to the
    /// engine); `start` hands a transfer that waited to the engine.
    pub(crate) fn limit_in_flight<T: Waiting>(&self, limit: usize, start: Start<T>) {
        let _ = self.in_flight.set(Box::new(InFlight::new(limit, start)));
    }

    /// `transfer` back if it may be handed to the engine now; otherwise it waits for a
    /// transfer of the batch to end (see [`InFlight`]).
    pub(crate) fn admit<T: Waiting>(&self, transfer: T) -> Option<T> {
        let bound = self
            .in_flight
            .get()
            .and_then(|bound| bound.as_any().downcast_ref::<InFlight<T>>());
        match bound {
            Some(in_flight) => in_flight.admit(transfer, self.is_cancelled()),
            None => Some(transfer),
        }
    }

    /// A transfer of this batch was dropped (see [`InFlight::ended`]).
    pub(crate) fn transfer_ended(&self) {
        if let Some(in_flight) = self.in_flight.get() {
            in_flight.ended();
        }
    }

    /// `n` more bytes received by the batch's transfers.
    pub(crate) fn add_received(&self, n: u64) {
        self.received.fetch_add(n, Ordering::Relaxed);
    }

    /// A duplicate of one of the batch's requests was sent.
    pub(crate) fn add_hedge(&self) {
        self.hedges.fetch_add(1, Ordering::Relaxed);
    }

    /// Stamp the completions of a transfer with what it did (see [`Timing`]).
    pub(crate) fn carried_by(&self, completions: &mut [Completion], meter: &TransferMeter) {
        self.add_received(meter.bytes);
        #[cfg(feature = "metrics")]
        crate::batch::timing::publish_transfer(meter);
        for c in completions {
            c.timing.carried_by(meter, self.queued);
        }
    }

    /// Queue completions; each original read must be completed exactly once.
    pub(crate) fn complete(&self, completions: impl IntoIterator<Item = Completion>) {
        self.queue(completions, false);
    }

    /// Queue completions and, if `ending`, end an active transfer (see [`Active::complete`]).
    fn queue(&self, completions: impl IntoIterator<Item = Completion>, ending: bool) {
        // One clock reading for the completions queued together.
        let now = Instant::now();
        let (wakers, notify, idle) = {
            let mut state = self.state.lock();
            // First: a read completed twice (a panic below, in a debug build) must not leave
            // the transfer active forever.
            let idle = ending && state.end_one();
            for mut c in completions {
                c.timing.stamp_done(self.queued, now);
                #[cfg(feature = "metrics")]
                crate::batch::timing::publish(&c);
                debug_assert!(state.pending > 0, "a read completed twice");
                state.pending = state.pending.saturating_sub(1);
                state.queue.push_back(c);
            }
            // A thread draining the whole batch only needs the last completion.
            let notify = state.next_waiters > 0 || state.pending == 0;
            (std::mem::take(&mut state.wakers), notify, idle)
        };
        if idle {
            self.idle.notify_all();
        }
        if notify {
            self.ready.notify_all();
        }
        for w in wakers {
            w.wake();
        }
    }

    /// A worker is about to run a transfer of this batch: the guard proves the transfer is
    /// active (so that [`release`](BatchShared::release) and a scope wait for it) until it is
    /// dropped, on every path including unwinding. `None` if the batch was cancelled; then the
    /// transfer must not touch its destinations.
    ///
    /// Destinations are only reachable through a borrow of the guard
    /// ([`Sink::open`](crate::batch::read::Sink::open)), so no slice outlives the transfer's activity.
    pub(crate) fn begin(&self) -> Option<Active<'_>> {
        let mut state = self.state.lock();
        if state.cancelled {
            return None;
        }
        state.active += 1;
        if state.active_waiters > 0 {
            self.began.notify_all();
        }
        Some(Active { batch: self })
    }

    /// See [`Batch::wait_for_active`].
    fn wait_for_active(&self, n: usize, timeout: Duration) -> bool {
        if self.foreign().is_some() {
            return n == 0;
        }
        let deadline = Instant::now().checked_add(timeout);
        let mut state = self.state.lock();
        while state.active < n {
            state.active_waiters += 1;
            let timed_out = match deadline {
                Some(deadline) => self.began.wait_until(&mut state, deadline).timed_out(),
                None => {
                    self.began.wait(&mut state);
                    false
                }
            };
            state.active_waiters -= 1;
            if timed_out {
                return state.active >= n;
            }
        }
        true
    }

    /// The worker no longer references the transfer's destinations (called by [`Active`]'s
    /// drop only).
    fn end(&self) {
        let mut state = self.state.lock();
        if state.end_one() {
            self.idle.notify_all();
        }
    }

    pub(crate) fn is_cancelled(&self) -> bool {
        self.cancelled.load(Ordering::Relaxed)
    }

    pub(crate) fn cancel(&self) {
        if self.foreign().is_some() {
            return; // nothing of this batch runs in this process
        }
        {
            let mut state = self.state.lock();
            state.cancelled = true;
            self.cancelled.store(true, Ordering::Relaxed);
            self.cancel_notify.notify_waiters();
        }
        // After the flag: a transfer admitted from now on no longer waits.
        if let Some(in_flight) = self.in_flight.get() {
            in_flight.cancel_waiting();
        }
    }

    /// Resolves once the batch is cancelled.
    pub(crate) async fn cancelled(&self) {
        loop {
            let notified = self.cancel_notify.notified();
            let mut notified = std::pin::pin!(notified);
            notified.as_mut().enable();
            if self.is_cancelled() {
                return;
            }
            notified.await;
        }
    }

    /// Cancel, then wait until no transfer of this batch is active. In a process that did
    /// not submit the batch (a forked child) no transfer of it runs: nothing to wait for, and
    /// the state is not touched.
    pub(crate) fn release(&self) {
        if self.foreign().is_some() {
            return;
        }
        self.cancel();
        let mut state = self.state.lock();
        while state.active > 0 {
            self.idle.wait(&mut state);
        }
    }

    /// Take a queued completion, or register the task's waker to be woken by the next one.
    fn poll_next(&self, cx: &mut Context<'_>) -> Poll<Option<Completion>> {
        if let Some(foreign) = self.foreign() {
            return Poll::Ready(foreign.next());
        }
        let mut state = self.state.lock();
        if let Some(c) = state.queue.pop_front() {
            return Poll::Ready(Some(c));
        }
        if state.pending == 0 {
            return Poll::Ready(None);
        }
        if !state.wakers.iter().any(|w| w.will_wake(cx.waker())) {
            state.wakers.push(cx.waker().clone());
        }
        Poll::Pending
    }

    /// Completions still to be taken: queued ones and those of reads not completed yet.
    fn size_hint(&self) -> (usize, Option<usize>) {
        if let Some(foreign) = self.foreign() {
            let left = foreign.left();
            return (left, Some(left));
        }
        let state = self.state.lock();
        let left = state.queue.len() + state.pending;
        (left, Some(left))
    }

    /// Whether every completion has been taken.
    fn is_drained(&self) -> bool {
        if let Some(foreign) = self.foreign() {
            return foreign.left() == 0;
        }
        let state = self.state.lock();
        state.pending == 0 && state.queue.is_empty()
    }

    fn next(&self, timeout: Option<Duration>) -> Next {
        if let Some(foreign) = self.foreign() {
            return foreign.next().map_or(Next::Drained, Next::Completion);
        }
        let deadline = timeout.and_then(|t| Instant::now().checked_add(t));
        let mut state = self.state.lock();
        loop {
            if let Some(c) = state.queue.pop_front() {
                return Next::Completion(c);
            }
            if state.pending == 0 {
                return Next::Drained;
            }
            state.next_waiters += 1;
            let timed_out = match (timeout, deadline) {
                (None, _) | (Some(_), None) => {
                    self.ready.wait(&mut state);
                    false
                }
                (Some(_), Some(deadline)) => {
                    self.ready.wait_until(&mut state, deadline).timed_out()
                }
            };
            state.next_waiters -= 1;
            if timed_out && state.queue.is_empty() {
                return if state.pending == 0 {
                    Next::Drained
                } else {
                    Next::TimedOut
                };
            }
        }
    }

    /// Block until every read has completed; take every queued completion.
    fn drain(&self) -> Vec<Completion> {
        if let Some(foreign) = self.foreign() {
            return foreign.drain();
        }
        let mut state = self.state.lock();
        // Every read's completion will be queued at once: room for all of them now, instead
        // of the queue doubling as they arrive (each time a copy into fresh memory, made by a
        // worker under the lock every worker of the batch needs).
        let pending = state.pending;
        state.queue.reserve_exact(pending);
        while state.pending > 0 {
            self.ready.wait(&mut state);
        }
        // Taken whole, not copied into a new buffer: a queue only pushed to since it was last
        // taken starts at its buffer's start and becomes a vector as it is (one whose front
        // was taken by `next` is moved within its own buffer first).
        Vec::from(std::mem::take(&mut state.queue))
    }
}

/// Resolves when `batch` is cancelled; never, without a batch.
pub(crate) async fn until_cancelled(batch: Option<&BatchShared>) {
    match batch {
        Some(batch) => batch.cancelled().await,
        None => std::future::pending().await,
    }
}

/// The error of a read whose batch was released while it ran (or waited).
pub(crate) fn released() -> Error {
    Error::new(Status::Cancelled, "the batch was released during the read")
}

/// `completions` in the order of their index in the submission. A whole batch's (each index
/// below their count once) are put in place by swaps, with no second buffer of completions
/// (a table of their places instead, 8 bytes each): a large batch's completions take
/// megabytes, and the fresh pages of a copy cost more than the swaps. When their indices are
/// dense otherwise (most of a batch) each is placed at its index in one pass; when sparse they
/// are sorted. None is ever dropped, even two with one index.
fn in_submission_order(mut completions: Vec<Completion>) -> Vec<Completion> {
    let Some(end) = completions.iter().map(|c| c.index.saturating_add(1)).max() else {
        return completions;
    };
    if end == completions.len() && permute_in_place(&mut completions) {
        return completions;
    }
    let sorted = |mut all: Vec<Completion>| {
        all.sort_by_key(Completion::index);
        all
    };
    if end > completions.len().saturating_mul(2) {
        return sorted(completions);
    }
    let mut slots: Vec<Option<Completion>> = Vec::with_capacity(end);
    slots.resize_with(end, || None);
    let mut doubled = Vec::new();
    for completion in completions {
        let index = completion.index;
        if let Some(earlier) = slots[index].replace(completion) {
            doubled.push(earlier);
        }
    }
    let placed = slots.into_iter().flatten();
    if doubled.is_empty() {
        placed.collect()
    } else {
        sorted(placed.chain(doubled).collect())
    }
}

/// Put every completion at its index, in place, when their indices are exactly those below
/// their count. Where each one lies is noted first in a small table, so the swaps along each
/// cycle find their next place there instead of in the completion just fetched: the processor
/// fetches many of the scattered completions at once instead of one after another. False, with
/// nothing changed, when an index is out of that range or two share one.
fn permute_in_place(completions: &mut [Completion]) -> bool {
    const FREE: usize = usize::MAX;
    // `from[i]`: where the completion with index `i` lies.
    let mut from = vec![FREE; completions.len()];
    for (at, c) in completions.iter().enumerate() {
        match from.get_mut(c.index) {
            Some(place) if *place == FREE => *place = at,
            _ => return false, // beyond the count, or two with this index
        }
    }
    for start in 0..completions.len() {
        // Along the cycle through `start`: each swap brings the completion that belongs at `at`
        // and carries the one from `start` on, until it reaches its own place.
        let mut at = start;
        while from[at] != start {
            let next = from[at];
            completions.swap(at, next);
            from[at] = at;
            at = next;
        }
        from[at] = at;
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::StreamExt;

    #[test]
    fn completions_come_back_in_submission_order_dense_sparse_or_doubled() {
        let indices = |all: &[Completion]| all.iter().map(Completion::index).collect::<Vec<_>>();
        // Dense, in the order four workers might finish.
        let dense: Vec<Completion> = [4, 0, 5, 1, 6, 2, 7, 3].map(completion).into();
        assert_eq!(
            indices(&in_submission_order(dense)),
            (0..8).collect::<Vec<_>>()
        );
        // Sparse (most were taken earlier): sorted.
        let sparse: Vec<Completion> = [900, 3, 41].map(completion).into();
        assert_eq!(indices(&in_submission_order(sparse)), [3, 41, 900]);
        // Two with one index: both kept.
        let doubled: Vec<Completion> = [2, 1, 2, 0].map(completion).into();
        assert_eq!(indices(&in_submission_order(doubled)), [0, 1, 2, 2]);
        // Two with one index, as many as there are indices (so one is missing): both kept.
        let mut doubled: Vec<Completion> = [2, 2, 0].map(completion).into();
        assert!(!permute_in_place(&mut doubled));
        assert_eq!(indices(&doubled), [2, 2, 0], "nothing moved");
        assert_eq!(indices(&in_submission_order(doubled)), [0, 2, 2]);
        // An index beyond the count: refused by the permutation, which moves nothing; sorted.
        let mut beyond: Vec<Completion> = [1, 5, 0].map(completion).into();
        assert!(!permute_in_place(&mut beyond));
        assert_eq!(indices(&beyond), [1, 5, 0], "nothing moved");
        assert_eq!(indices(&in_submission_order(beyond)), [0, 1, 5]);
        // A whole batch in a scattered order, put in place.
        let n = 1000;
        let scattered: Vec<Completion> = (0..n).map(|i| completion(i * 7919 % n)).collect();
        let ordered = in_submission_order(scattered);
        assert_eq!(indices(&ordered), (0..n).collect::<Vec<_>>());
        assert!(ordered.iter().all(|c| c.tag == c.index as u64));
        assert!(in_submission_order(Vec::new()).is_empty());
    }

    /// Waiting for a whole batch makes room for all its completions at once: the queue is
    /// not grown by doubling as they arrive (no copy, and no room beyond the batch's).
    #[test]
    fn waiting_for_a_batch_makes_room_for_all_its_completions() {
        let n = 1_000;
        let b = batch(n);
        b.shared.complete((0..3).map(completion));
        let room = b.shared.state.lock().queue.capacity();
        assert!(room < n);
        std::thread::scope(|s| {
            let waiting = s.spawn(|| b.wait());
            // Until `wait` has made its room (it holds the lock while it does).
            while b.shared.state.lock().queue.capacity() == room {
                std::thread::yield_now();
            }
            assert_eq!(b.shared.state.lock().queue.capacity(), n);
            b.shared.complete((3..n).map(completion));
            let all = waiting.join().unwrap();
            assert_eq!(all.len(), n);
            assert_eq!(all.capacity(), n);
            assert!(all.iter().enumerate().all(|(i, c)| c.index() == i));
        });
    }

    fn completion(index: usize) -> Completion {
        Completion {
            tag: index as u64,
            index,
            result: Err(Error::new(Status::Io, "x")),
            bytes_received: 0,
            buffer: None,
            timing: Timing::new(),
        }
    }

    fn batch(n: usize) -> Batch {
        Batch {
            shared: BatchShared::new((0..n as u64).collect(), false),
            stats: BatchStats::default(),
            _engine: Arc::new(()),
        }
    }

    /// A batch of reads tagged `tags`, submitted by another process than this one (as a
    /// forked child sees a batch its parent submitted), whose state lock is held by a thread
    /// that no longer exists (what a child inherits when a parent's worker held the lock at
    /// the instant of the fork), with a completion queued and a transfer active.
    fn inherited_batch(tags: &[u64]) -> (Batch, Arc<BatchShared>, Arc<AtomicUsize>) {
        let parent = ProcessStamp::simulated(u32::MAX, u64::MAX);
        let shared = BatchShared::new_in(tags.into(), false, parent);
        {
            let mut state = shared.state.lock();
            state.queue.push_back(completion(0));
            state.pending -= 1;
            state.active = 1;
        }
        std::mem::forget(shared.state.lock());
        let engine = Arc::new(AtomicUsize::new(0));
        let batch = Batch {
            shared: Arc::clone(&shared),
            stats: BatchStats::default(),
            _engine: Arc::clone(&engine) as Arc<dyn Send + Sync>,
        };
        (batch, shared, engine)
    }

    #[test]
    fn an_inherited_batch_completes_every_read_as_invalid_without_its_lock() {
        let (b, shared, _engine) = inherited_batch(&[70, 71, 72]);
        assert!(shared.foreign().is_some());
        assert_eq!(b.pending(), 3);
        assert_eq!(Stream::size_hint(&b), (3, Some(3)));
        let first = match b.next_timeout(Duration::from_secs(3600)) {
            Next::Completion(c) => c,
            other => panic!("{other:?}"),
        };
        assert_eq!((first.index(), first.tag()), (0, 70));
        assert_eq!(first.status(), Status::InvalidArgument);
        assert_eq!(first.bytes_received(), 0);
        let second = match b.try_next() {
            Next::Completion(c) => c,
            other => panic!("{other:?}"),
        };
        assert_eq!((second.index(), second.tag()), (1, 71));
        let rest = b.wait();
        assert_eq!(rest.len(), 1);
        assert_eq!((rest[0].index(), rest[0].tag()), (2, 72));
        assert_eq!(rest[0].status(), Status::InvalidArgument);
        assert!(matches!(
            b.next_timeout(Duration::from_secs(3600)),
            Next::Drained
        ));
        assert!(b.next_blocking().is_none());
        assert!(b.is_terminated());
        assert_eq!(b.pending(), 0);
        assert_eq!(b.active_transfers(), 0, "none runs in this process");
        assert!(
            !b.wait_for_active(1, Duration::from_secs(3600)),
            "returns at once"
        );
        b.cancel(); // returns: the lock is not taken
        shared.release(); // returns: no transfer of the batch runs in this process
    }

    #[test]
    fn an_inherited_batch_is_a_stream_that_ends() {
        let (mut b, _shared, _engine) = inherited_batch(&[5, 6]);
        let tags: Vec<u64> =
            futures::executor::block_on((&mut b).map(|c| c.tag()).collect::<Vec<_>>());
        assert_eq!(tags, vec![5, 6]);
        assert!(futures::executor::block_on(b.next()).is_none());
    }

    #[test]
    fn dropping_an_inherited_batch_frees_nothing() {
        let (b, shared, engine) = inherited_batch(&[1]);
        let (before, engine_before) = (Arc::strong_count(&shared), Arc::strong_count(&engine));
        assert!(format!("{b:?}").contains("submitted_in_process"));
        drop(b); // returns: neither the lock nor the engine is touched
        assert_eq!(
            Arc::strong_count(&shared),
            before,
            "the state stays allocated"
        );
        assert_eq!(
            Arc::strong_count(&engine),
            engine_before,
            "so does the engine"
        );
    }

    #[test]
    fn next_times_out_then_delivers_then_drains() {
        let b = batch(2);
        assert!(matches!(
            b.next_timeout(Duration::from_millis(10)),
            Next::TimedOut
        ));
        b.shared.complete([completion(1)]);
        match b.next_timeout(Duration::from_millis(10)) {
            Next::Completion(c) => assert_eq!(c.index(), 1),
            other => panic!("{other:?}"),
        }
        b.shared.complete([completion(0)]);
        assert!(matches!(b.try_next(), Next::Completion(_)));
        assert!(matches!(b.try_next(), Next::Drained));
        assert!(matches!(
            b.next_timeout(Duration::from_secs(5)),
            Next::Drained
        ));
    }

    #[test]
    fn several_threads_share_one_batch() {
        let b = Arc::new(batch(1000));
        let consumers: Vec<_> = (0..4)
            .map(|_| {
                let b = Arc::clone(&b);
                std::thread::spawn(move || {
                    let mut got = Vec::new();
                    loop {
                        match b.next_timeout(Duration::from_secs(10)) {
                            Next::Completion(c) => got.push(c.index()),
                            Next::Drained => return got,
                            Next::TimedOut => panic!("timed out"),
                        }
                    }
                })
            })
            .collect();
        for i in 0..1000 {
            b.shared.complete([completion(i)]);
        }
        let mut all: Vec<usize> = consumers
            .into_iter()
            .flat_map(|t| t.join().unwrap())
            .collect();
        all.sort_unstable();
        assert_eq!(all, (0..1000).collect::<Vec<_>>());
    }

    #[test]
    fn release_waits_for_active_transfers() {
        let b = batch(1);
        let shared = Arc::clone(&b.shared);
        let (begun, has_begun) = std::sync::mpsc::channel();
        let ended = Arc::new(AtomicBool::new(false));
        let worker_ended = Arc::clone(&ended);
        let worker = std::thread::spawn(move || {
            {
                let active = shared.begin().expect("not cancelled");
                begun.send(()).unwrap();
                // Until the release has begun (it cancels the batch first): a release that
                // did not wait would return now, before the transfer ends.
                futures::executor::block_on(shared.cancelled());
                worker_ended.store(true, Ordering::SeqCst);
                active.complete([completion(0)]);
            }
            shared
        });
        has_begun.recv().unwrap();
        b.shared.release(); // blocks until the guard is dropped
        assert!(
            ended.load(Ordering::SeqCst),
            "release returned while a worker still held the batch's buffers"
        );
        {
            let state = b.shared.state.lock();
            assert_eq!(
                (state.queue.len(), state.pending),
                (1, 0),
                "the transfer ended without its completion queued"
            );
        }
        let shared = worker.join().unwrap();
        assert!(
            shared.begin().is_none(),
            "a released batch accepts no new transfers"
        );
        assert_eq!(shared.state.lock().active, 0);
    }

    #[test]
    fn waiting_for_active_transfers_is_woken_as_one_begins() {
        let b = batch(1);
        assert_eq!(b.active_transfers(), 0);
        assert!(!b.wait_for_active(1, Duration::ZERO), "none has begun");
        assert!(b.wait_for_active(0, Duration::ZERO));
        let shared = Arc::clone(&b.shared);
        let (go, may_go) = std::sync::mpsc::channel::<()>();
        let worker = std::thread::spawn(move || {
            let active = shared.begin().expect("not cancelled");
            may_go.recv().unwrap();
            active.complete([completion(0)]);
        });
        // Woken by the worker's `begin`, however long it takes to start.
        assert!(b.wait_for_active(1, Duration::from_secs(3600)));
        assert_eq!(b.active_transfers(), 1);
        go.send(()).unwrap();
        worker.join().unwrap();
        assert_eq!(b.active_transfers(), 0);
        assert_eq!(b.wait().len(), 1);
    }

    #[test]
    fn dropping_a_batch_cancels_without_waiting_for_active_transfers() {
        let b = batch(2);
        let shared = Arc::clone(&b.shared);
        let (begun, has_begun) = std::sync::mpsc::channel();
        let (go, may_go) = std::sync::mpsc::channel::<()>();
        let worker = std::thread::spawn(move || {
            let active = shared.begin().expect("not cancelled");
            begun.send(()).unwrap();
            may_go.recv().unwrap();
            active.complete([completion(0)]);
            shared
        });
        has_begun.recv().unwrap();
        // The worker holds its transfer active until told to go, which happens only after
        // the drop: a drop that waited would never return.
        drop(b);
        go.send(()).unwrap();
        let shared = worker.join().unwrap();
        assert!(shared.is_cancelled(), "the drop cancelled the batch");
        assert!(shared.begin().is_none(), "no new transfer starts");
        assert_eq!(shared.state.lock().active, 0);
        assert_eq!(shared.state.lock().pending, 1, "the other read never ran");
    }

    #[test]
    fn a_panicking_worker_still_ends_its_transfer() {
        let b = batch(1);
        let shared = Arc::clone(&b.shared);
        let worker = std::thread::spawn(move || {
            let _active = shared.begin().expect("not cancelled");
            panic!("a worker panics while its transfer is active");
        });
        assert!(worker.join().is_err());
        assert_eq!(b.shared.state.lock().active, 0, "the guard's drop ran");
        b.shared.release(); // returns: nothing is active
    }

    #[test]
    fn the_stream_is_woken_by_the_completing_thread() {
        let mut b = batch(2);
        assert_eq!(b.size_hint(), (2, Some(2)));
        let shared = Arc::clone(&b.shared);
        let (go, may_go) = std::sync::mpsc::channel::<()>();
        let worker = std::thread::spawn(move || {
            may_go.recv().unwrap();
            shared.complete([completion(1)]);
            may_go.recv().unwrap();
            shared.complete([completion(0)]);
        });
        let mut next = b.next();
        let waker = futures::task::noop_waker();
        assert!(
            std::pin::Pin::new(&mut next)
                .poll(&mut Context::from_waker(&waker))
                .is_pending(),
            "nothing completed yet"
        );
        go.send(()).unwrap();
        let got = futures::executor::block_on(next);
        assert_eq!(got.map(|c| c.index()), Some(1));
        assert_eq!(b.size_hint(), (1, Some(1)));
        go.send(()).unwrap();
        let got = futures::executor::block_on((&b).next());
        assert_eq!(got.map(|c| c.index()), Some(0));
        assert!(b.is_terminated());
        assert!(futures::executor::block_on(b.next()).is_none());
        assert_eq!(b.size_hint(), (0, Some(0)));
        worker.join().unwrap();
    }
}
