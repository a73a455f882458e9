//! The engine: plans submissions and routes transfers to file workers and event loops.

use std::collections::HashMap;
use std::fmt;
use std::future::Future;
use std::marker::PhantomData;
use std::ops::Deref;
use std::panic::{AssertUnwindSafe, catch_unwind, resume_unwind};
use std::pin::Pin;
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll};

use futures_core::{FusedStream, Stream};

use karu_config::{Snapshot, Trade};
use parking_lot::Mutex;

use crate::batch::{Batch, BatchShared, BatchStats};
use crate::credential::{Callbacks, CredentialCache, CredentialCallback, CredentialStats};
use crate::file::{self, FilePool};
use crate::http::ends::RemoteEnds;
use crate::http::{Remote, TransportStats};
use crate::locator::{Locator, Target, Window};
use crate::plan::{self, Limits, Plan, PlanRead, PlannedPart, PlannedTransfer};
use crate::process::PerProcess;
use crate::read::{Completion, Destination, Read, Sink};
use crate::reply::{self, Reply};
use crate::status::{Error, Status};
use crate::transfer::{Part, Parts, Transfer};

/// Per-batch overrides of the planner's merge guards (unset = the client's configuration).
///
/// ```
/// use karu_engine::BatchOptions;
/// let no_merging = BatchOptions::new().max_gap(0);
/// let tight = BatchOptions::new().max_span(8 << 20).max_parts(64).max_amplification(2);
/// # let _ = (no_merging, tight);
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct BatchOptions {
    max_gap: Option<u64>,
    max_span: Option<u64>,
    max_parts: Option<u32>,
    max_amplification: Option<u32>,
    one_version: bool,
}

impl BatchOptions {
    /// No overrides.
    pub fn new() -> Self {
        Self::default()
    }

    /// Largest gap between merged neighbours; 0 disables merging.
    pub fn max_gap(mut self, bytes: u64) -> Self {
        self.max_gap = Some(bytes);
        self
    }

    /// Largest span of a merged transfer.
    pub fn max_span(mut self, bytes: u64) -> Self {
        self.max_span = Some(bytes);
        self
    }

    /// Most reads in one transfer (0 behaves as 1).
    pub fn max_parts(mut self, parts: u32) -> Self {
        self.max_parts = Some(parts);
        self
    }

    /// Most fetched bytes per useful byte (0 behaves as 1 for a single read; merges need more).
    pub fn max_amplification(mut self, ratio: u32) -> Self {
        self.max_amplification = Some(ratio);
        self
    }

    /// Read one version of each remote object in this batch: the first strong ETag an answer
    /// states for an object pins it. Later requests for the object carry that tag as
    /// `If-Match`, answers already in flight are compared with it, and a read that sees
    /// another version fails with [`Status::PreconditionFailed`] (the others go on).
    ///
    /// Without it, a batch may mix versions of an object that changes while it runs; each
    /// response is still checked on its own. As with [`Read::if_match`], an answer without a
    /// strong ETag cannot be compared: enforcement is then the server's. Local files have no
    /// versions.
    ///
    /// ```
    /// use karu_engine::BatchOptions;
    /// let consistent = BatchOptions::new().one_version();
    /// # let _ = consistent;
    /// ```
    pub fn one_version(mut self) -> Self {
        self.one_version = true;
        self
    }

    /// These overrides applied to `defaults`.
    pub fn limits(&self, defaults: Limits) -> Limits {
        Limits {
            max_gap: self.max_gap.unwrap_or(defaults.max_gap),
            max_span: self.max_span.unwrap_or(defaults.max_span),
            max_parts: self.max_parts.unwrap_or(defaults.max_parts),
            max_amplification: self.max_amplification.unwrap_or(defaults.max_amplification),
        }
    }
}

/// What [`Engine::stat`] learns about an object.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ObjectInfo {
    /// Visible size in bytes, or `None` when the object states none: a local device or FIFO,
    /// whose metadata says nothing of what can be read (a bounded window of one shows its
    /// length). Remote objects and regular files always have one. For a windowed locator it
    /// is the window clipped to what exists: a window reaching past the end shows only the
    /// bytes that exist, and the object is probed like any other (a missing one fails).
    pub size: Option<u64>,
    /// The object's strong ETag, when the server sent one (never for local files).
    pub etag: Option<String>,
}

/// Both ends of an object, from [`Engine::read_ends`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Ends {
    /// Visible size in bytes.
    pub size: u64,
    /// The strong ETag both answers agreed on, if any.
    pub etag: Option<String>,
    /// The first `min(head_len, size)` bytes.
    pub head: Vec<u8>,
    /// The last `min(tail_len, size)` bytes.
    pub tail: Vec<u8>,
}

/// The engine: file workers (and, for remote objects, event loops), planning and routing.
/// Cheap to clone; every clone shares the same workers. Usually reached through
/// `karu::Client`.
///
/// # Fork safety
///
/// The workers belong to the process that started them. Used in a forked child (the
/// data-loader pattern: a parent builds the client, worker processes fork), an engine detects
/// the change on first use and starts fresh workers, event loops, connections, DNS and
/// credential caches for the child from the same configuration; the parent's are never
/// touched in the child (not used, locked, joined or dropped: their threads do not exist
/// there, and whatever those threads held stays held). A [`Batch`] belongs to the process
/// that submitted it: see its documentation for what it does in a forked child.
#[derive(Clone)]
pub struct Engine {
    slot: Arc<Slot>,
}

/// What an engine is made of, kept to start it again in a forked child.
struct Slot {
    snapshot: Snapshot,
    limits: Limits,
    /// How gaps are judged inside the guards (`planner.trade`).
    trade: Trade,
    callbacks: Callbacks,
    /// The workers of the running process (see [`PerProcess`]).
    running: PerProcess<Arc<Inner>>,
}

/// The workers, event loops and caches of one process.
struct Inner {
    snapshot: Snapshot,
    files: FilePool,
    /// The event loops, started on the first remote transfer.
    remote: OnceLock<Result<Remote, Error>>,
    callbacks: Callbacks,
    credentials: CredentialCache,
    /// The room the last submission's grouping and planning left (see [`Working`]).
    working: Mutex<Working>,
}

/// The working memory of a submission's grouping and planning, kept for the next one: the
/// planner's input and its [`plan::Scratch`]. A later submission writes to memory the process
/// already has instead of faulting in fresh pages, which the heap would otherwise return to
/// the kernel between batches. At most [`Working::KEPT`] bytes are kept (room for some
/// 130,000 reads); a larger submission's room is freed after it.
#[derive(Default)]
struct Working {
    reads: Vec<PlanRead>,
    plan: plan::Scratch,
}

impl Working {
    /// The most room kept between submissions.
    const KEPT: usize = 16 << 20;

    fn bytes(&self) -> usize {
        self.reads.capacity() * size_of::<PlanRead>() + self.plan.bytes()
    }
}

impl Inner {
    /// The workers of this process, none started yet: the file workers start with the first
    /// local read, the event loops with the first remote one.
    fn new(snapshot: &Snapshot, callbacks: &Callbacks) -> Arc<Inner> {
        Arc::new(Inner {
            snapshot: snapshot.clone(),
            files: FilePool::new(snapshot.global().file_workers),
            remote: OnceLock::new(),
            callbacks: callbacks.clone(),
            credentials: CredentialCache::new(),
            working: Mutex::default(),
        })
    }

    /// The room a submission plans in: the last one's, or none if another submission is
    /// planning in it now.
    fn take_working(&self) -> Working {
        std::mem::take(&mut *self.working.lock())
    }

    /// Keep `working` for the next submission, unless it is too large or less than the
    /// room kept already (a submission that planned at the same time).
    fn keep_working(&self, working: Working) {
        let bytes = working.bytes();
        if bytes > Working::KEPT {
            return;
        }
        let mut kept = self.working.lock();
        if bytes > kept.bytes() {
            // The room it replaces is freed after the lock.
            let _freed = std::mem::replace(&mut *kept, working);
            drop(kept);
        }
    }

    fn remote(&self) -> Result<&Remote, Error> {
        self.remote
            .get_or_init(|| {
                Remote::start(
                    &self.snapshot,
                    self.callbacks.clone(),
                    self.credentials.clone(),
                )
            })
            .as_ref()
            .map_err(Clone::clone)
    }
}

/// Options of an engine beyond its configuration snapshot.
///
/// ```
/// use std::sync::Arc;
/// use karu_engine::{CanonicalPath, EngineOptions, Error, Status};
///
/// let mut options = EngineOptions::new();
/// options.credential_callback(
///     "aws",
///     Arc::new(|_: &CanonicalPath| Err(Error::new(Status::Credentials, "the vault is sealed"))),
/// );
/// assert_eq!(options.callback_families(), ["aws"]);
/// ```
#[derive(Debug, Default, Clone)]
#[non_exhaustive]
pub struct EngineOptions {
    /// Application credential callbacks, by provider family.
    callbacks: Callbacks,
}

impl EngineOptions {
    /// No options.
    pub fn new() -> Self {
        Self::default()
    }

    /// Credentials of `family` come from `callback` instead of the provider's own discovery
    /// (replacing an earlier callback of the family).
    pub fn credential_callback(
        &mut self,
        family: impl Into<String>,
        callback: Arc<dyn CredentialCallback>,
    ) -> &mut Self {
        self.callbacks.insert(family, callback);
        self
    }

    /// The families that have a credential callback, sorted.
    pub fn callback_families(&self) -> Vec<&str> {
        self.callbacks.families()
    }
}

impl Engine {
    /// Start an engine with this configuration snapshot.
    pub fn new(snapshot: Snapshot) -> Result<Self, Error> {
        Self::with_options(snapshot, EngineOptions::default())
    }

    /// Start an engine with this configuration snapshot and these options.
    pub fn with_options(snapshot: Snapshot, options: EngineOptions) -> Result<Self, Error> {
        let global = snapshot.global();
        let limits = Limits::from(&global.planner);
        // The caller's CA file is checked now (the platform's roots only at the first TLS
        // connection): a client that cannot trust it never starts.
        crate::http::transport::ca_file(&global.http)?;
        let running = Inner::new(&snapshot, &options.callbacks);
        Ok(Engine {
            slot: Arc::new(Slot {
                trade: snapshot.global().planner.trade,
                snapshot,
                limits,
                callbacks: options.callbacks,
                running: PerProcess::new(running),
            }),
        })
    }

    /// The workers of the running process: those built with the engine, or, in a process
    /// forked since, the child's own, built on its first use (each kind of worker starts when
    /// a read first needs it).
    fn running(&self) -> &Arc<Inner> {
        let slot = &*self.slot;
        slot.running
            .get_or_init(|| Inner::new(&slot.snapshot, &slot.callbacks))
    }

    /// The configuration snapshot captured when the engine was built.
    pub fn snapshot(&self) -> &Snapshot {
        &self.slot.snapshot
    }

    /// Counters of the remote path (all zero until the first remote read; in a forked child,
    /// the child's own).
    pub fn transport_stats(&self) -> TransportStats {
        match self.slot.running.get().map(|inner| inner.remote.get()) {
            Some(Some(Ok(remote))) => remote.stats(),
            _ => TransportStats::default(),
        }
    }

    /// Counters of the credential cache (lookups, callback calls, hits, failures; in a forked
    /// child, the child's own).
    pub fn credential_stats(&self) -> CredentialStats {
        match self.slot.running.get() {
            Some(inner) => inner.credentials.stats(),
            None => CredentialStats::default(),
        }
    }

    /// The planner limits of this engine before per-batch overrides.
    pub fn limits(&self) -> Limits {
        self.slot.limits
    }

    /// Submit reads with owned or Karu-allocated destinations. Returns at once; completions
    /// arrive in the batch as work finishes. Invalid reads complete immediately with their own
    /// status while the others go on.
    pub fn submit(
        &self,
        reads: impl IntoIterator<Item = Read<'static>>,
        options: &BatchOptions,
    ) -> Batch {
        self.submit_any(reads.into_iter().collect(), options, None)
    }

    /// Submit reads that may borrow their destinations for `'d`, without a scope: the
    /// returned batch is what waits, when dropped, until no transfer references a borrowed
    /// destination (its pending reads cancelled first), as a scope's end would. For callers
    /// whose destinations outlive any Rust borrow, such as the C ABI (`karu_batch_submit` with
    /// caller buffers, released by `karu_batch_free`).
    ///
    /// # Safety
    ///
    /// The returned batch must be dropped before `'d` ends (never leaked with
    /// [`std::mem::forget`] or a reference cycle): until it has been dropped, transfers may
    /// write to the borrowed destinations from Karu's threads. With `'d = 'static` (slices
    /// made from raw pointers), the caller must ensure instead that each destination stays
    /// valid for writes, and is neither read nor written by anyone else, until the batch has
    /// been dropped or its read's completion has been taken, whichever comes first for
    /// reading it, and until the batch has been dropped for freeing it.
    pub unsafe fn submit_unchecked<'d>(
        &self,
        reads: impl IntoIterator<Item = Read<'d>>,
        options: &BatchOptions,
    ) -> ScopedBatch<'d> {
        ScopedBatch {
            batch: self.submit_any(reads.into_iter().collect(), options, None),
            _scope: PhantomData,
        }
    }

    /// Run `f` with a [`Scope`] in which reads may borrow their destinations. When `f`
    /// returns, every batch of the scope is released (pending reads cancelled) and the scope
    /// waits until no transfer references a borrowed buffer, even for batches leaked with
    /// [`std::mem::forget`].
    pub fn scope<'env, F, T>(&self, f: F) -> T
    where
        F: for<'scope> FnOnce(&'scope Scope<'env>) -> T,
    {
        let scope = Scope {
            engine: self.clone(),
            batches: PerProcess::new(Mutex::new(Vec::new())),
            _env: PhantomData,
        };
        let result = catch_unwind(AssertUnwindSafe(|| f(&scope)));
        // Only this process's batches: in a child forked inside `f`, the parent's batches
        // are another process's (no transfer of theirs runs here), and the list the parent
        // kept them in may be locked forever by a thread that is not here.
        if let Some(batches) = scope.batches.get() {
            for batch in batches.lock().drain(..) {
                batch.release();
            }
        }
        match result {
            Ok(value) => value,
            Err(panic) => resume_unwind(panic),
        }
    }

    /// The visible size of an object, and its strong ETag when it has one. Sizes are never
    /// cached. Blocks the calling thread; see [`Engine::stat_async`].
    pub fn stat(&self, locator: &Locator) -> Result<ObjectInfo, Error> {
        match locator.target() {
            // A local file's metadata is read right here: a blocking caller needs no hop.
            Target::File(path) => Ok(ObjectInfo {
                size: local_visible_size(locator.window(), file::size(path)?),
                etag: None,
            }),
            _ => reply::block_on(self.stat_reply(locator)),
        }
    }

    /// [`Engine::stat`] as a future that completes from Karu's own threads (a file worker
    /// reads a local file's metadata; an event loop sends the remote probe): any executor can
    /// poll it, and it never blocks the thread that does. It starts when first polled;
    /// dropping it cancels the probe.
    pub fn stat_async(
        &self,
        locator: &Locator,
    ) -> impl Future<Output = Result<ObjectInfo, Error>> + Send + 'static + use<> {
        let engine = self.clone();
        let locator = locator.clone();
        async move { engine.stat_reply(&locator).await }
    }

    /// Start the stat of `locator` on Karu's threads (now, not when first polled).
    fn stat_reply(
        &self,
        locator: &Locator,
    ) -> impl Future<Output = Result<ObjectInfo, Error>> + Send + 'static + use<> {
        /// Where the size comes from: the object itself, even under a bounded window (which
        /// states only the most that can be visible, not that the object exists).
        enum Probe {
            /// A file worker reads the metadata (no size for a device or FIFO).
            Local(Reply<Option<u64>>),
            /// An event loop sends the one-byte probe.
            Remote(Reply<(u64, Option<String>)>),
        }
        let window = locator.window();
        let probe = match locator.target() {
            Target::File(path) => {
                let path = path.clone();
                Probe::Local(self.running().files.run(move || file::size(&path)))
            }
            Target::Remote => Probe::Remote(match self.running().remote() {
                Ok(remote) => remote.stat(locator),
                Err(e) => Reply::ready(Err(e)),
            }),
        };
        async move {
            let (size, etag) = match probe {
                Probe::Local(reply) => (local_visible_size(window, reply.await?), None),
                Probe::Remote(reply) => {
                    let (size, etag) = reply.await?;
                    (Some(visible_size(window, size)), etag)
                }
            };
            Ok(ObjectInfo { size, etag })
        }
    }

    /// The first `head_len` and last `tail_len` bytes of an object (each clamped to its size),
    /// with its size and ETag. Blocks the calling thread; see [`Engine::read_ends_async`].
    pub fn read_ends(
        &self,
        locator: &Locator,
        head_len: u64,
        tail_len: u64,
    ) -> Result<Ends, Error> {
        if let Target::Remote = locator.target() {
            let remote = self.running().remote()?;
            return remote
                .read_ends(locator, head_len, tail_len)
                .wait()
                .map(Ends::from);
        }
        let info = self.stat(locator)?;
        let size = known_size(locator, &info)?;
        let batch = self.ends_batch(locator, size, head_len, tail_len);
        ends_of(size, info.etag, batch.wait())
    }

    /// [`Engine::read_ends`] as a future that completes from Karu's own threads; any executor
    /// can poll it, and it never blocks the thread that does. It starts when first polled;
    /// dropping it cancels its requests (or its batch).
    pub fn read_ends_async(
        &self,
        locator: &Locator,
        head_len: u64,
        tail_len: u64,
    ) -> impl Future<Output = Result<Ends, Error>> + Send + 'static + use<> {
        let engine = self.clone();
        let locator = locator.clone();
        async move {
            if let Target::Remote = locator.target() {
                let remote = engine.running().remote()?;
                return remote
                    .read_ends(&locator, head_len, tail_len)
                    .await
                    .map(Ends::from);
            }
            let info = engine.stat_reply(&locator).await?;
            let size = known_size(&locator, &info)?;
            let mut batch = engine.ends_batch(&locator, size, head_len, tail_len);
            let mut completions = Vec::with_capacity(2);
            while let Some(c) = std::future::poll_fn(|cx| Pin::new(&mut batch).poll_next(cx)).await
            {
                completions.push(c);
            }
            ends_of(size, info.etag, completions)
        }
    }

    /// The batch reading both ends of a local object of known size: the head tagged 0, the
    /// tail tagged 1, never merged.
    fn ends_batch(&self, locator: &Locator, size: u64, head: u64, tail: u64) -> Batch {
        let head = head.min(size);
        let tail = tail.min(size);
        let mut reads = Vec::new();
        if head > 0 {
            reads.push(Read::new(locator, 0, head).tag(0));
        }
        if tail > 0 {
            reads.push(Read::new(locator, size - tail, tail).tag(1));
        }
        self.submit(reads, &BatchOptions::new().max_gap(0))
    }

    /// Plan and route `reads`. A scope's batch is registered in `scope` before any transfer
    /// is routed, so the scope waits for it even if this call unwinds half way.
    fn submit_any(
        &self,
        reads: Vec<Read<'_>>,
        options: &BatchOptions,
        scope: Option<&Mutex<Vec<Arc<BatchShared>>>>,
    ) -> Batch {
        let tags = reads
            .iter()
            .enumerate()
            .map(|(index, read)| read.tag.unwrap_or(index as u64))
            .collect();
        let shared = BatchShared::new(tags, options.one_version);
        if let Some(batches) = scope {
            batches.lock().push(Arc::clone(&shared));
        }
        let limits = options.limits(self.slot.limits);
        let inner = Arc::clone(self.running());
        let mut working = inner.take_working();
        let (planned, mut early) = group(&reads, std::mem::take(&mut working.reads));
        let prices = match self.slot.trade {
            Trade::Priced => prices(&inner, &reads, &planned),
            _ => Vec::new(),
        };
        let mut plan = plan::plan_in(&planned.reads, &limits, &prices, &mut working.plan);
        planned.to_submission(&mut plan);
        working.reads = planned.reads;
        let stats = BatchStats {
            reads: reads.len(),
            rejected: plan.rejected.len() + early.len(),
            transfers: plan.transfers.len(),
            requested_bytes: saturate(plan.requested_bytes()),
            fetched_bytes: 0,
            planned_bytes: saturate(plan.fetched_bytes()),
        };
        early.extend(plan.rejected);

        let mut slots: Vec<Option<Read<'_>>> = reads.into_iter().map(Some).collect();
        let rejected: Vec<Completion> = early
            .into_iter()
            .filter_map(|(index, error)| {
                let read = slots[index].take()?;
                let part = into_part(index, read, 0);
                Some(part.into_completion(Err(error), 0))
            })
            .collect();
        shared.complete(rejected);

        // Local transfers go to the workers a chunk at a time while the rest are built.
        let mut local = inner.files.chunks(plan.transfers.len());
        let mut taken = Vec::new();
        for window in windows(&plan.transfers) {
            // The reads of a few transfers leave their slots first, in a loop that does nothing
            // else: the slots lie scattered (the plan is in offset order, the slots in
            // submission order), and in a tight loop the processor fetches many at once
            // instead of one after another.
            taken.extend(
                window
                    .iter()
                    .flat_map(|t| &t.parts)
                    .map(|p| slots[p.index].take()),
            );
            let mut gathered = taken.drain(..);
            for planned in window {
                let served = gathered.by_ref().take(planned.parts.len());
                let parts = planned.parts.iter().zip(served);
                let Some(transfer) = transfer_of(planned, parts, &shared) else {
                    continue;
                };
                match transfer.locator.target() {
                    Target::File(_) => local.push(transfer),
                    Target::Remote => match inner.remote() {
                        Ok(remote) => remote.submit(transfer),
                        Err(e) => transfer.fail(&e),
                    },
                }
            }
        }
        drop(local);
        working.plan.recycle(plan.transfers);
        inner.keep_working(working);
        Batch {
            shared,
            stats,
            _engine: inner,
        }
    }
}

/// Parts taken from their slots together (see [`Engine::submit_any`]).
const GATHER: usize = 64;

/// `transfers` in runs of at least [`GATHER`] parts (the last run may have fewer).
fn windows(transfers: &[PlannedTransfer]) -> impl Iterator<Item = &[PlannedTransfer]> {
    let mut rest = transfers;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        let mut parts = 0;
        let n = rest
            .iter()
            .take_while(|t| {
                let more = parts < GATHER;
                parts += t.parts.len();
                more
            })
            .count();
        let (window, after) = rest.split_at(n);
        rest = after;
        Some(window)
    })
}

/// The transfer of `planned` for `batch`, from each of its parts with the read it serves (a
/// part whose read is gone has already completed); `None` when none is left.
fn transfer_of<'p, 'r>(
    planned: &PlannedTransfer,
    parts: impl Iterator<Item = (&'p PlannedPart, Option<Read<'r>>)>,
    batch: &Arc<BatchShared>,
) -> Option<Transfer> {
    let mut locator = None;
    let mut if_match = None;
    let parts: Parts = parts
        .filter_map(|(p, read)| {
            let Read {
                locator: object,
                length,
                destination,
                tag,
                if_match: condition,
                ..
            } = read?;
            if locator.is_none() {
                // The first part's locator and condition become the transfer's (all its parts
                // share them): taken, not copied.
                locator = Some(object.into_whole());
                if_match = condition;
            }
            Some(part(p.index, tag, length, destination, p.offset_in_span))
        })
        .collect();
    Some(Transfer {
        locator: locator?,
        start: planned.start,
        length: planned.length,
        if_match,
        parts,
        batch: Arc::clone(batch),
        auth: None,
        credential_wait: std::time::Duration::ZERO,
    })
}

/// What a window shows of an object of `object_size` bytes: the bytes from its start to the
/// object's end, at most its length.
fn visible_size(window: Option<Window>, object_size: u64) -> u64 {
    match window {
        None => object_size,
        Some(Window { start, len }) => {
            let exists = object_size.saturating_sub(start);
            len.map_or(exists, |len| len.min(exists))
        }
    }
}

/// What a window shows of a local file of `size` bytes, or of a device or FIFO (`None`), whose
/// metadata states no size: only a bounded window then says how much is visible.
fn local_visible_size(window: Option<Window>, size: Option<u64>) -> Option<u64> {
    match size {
        Some(size) => Some(visible_size(window, size)),
        None => window.and_then(|w| w.len),
    }
}

/// Both ends of a local object from the completions of its [`Engine::ends_batch`].
/// The size `read_ends` needs: a device or FIFO has none, so it has no last bytes.
fn known_size(locator: &Locator, info: &ObjectInfo) -> Result<u64, Error> {
    info.size.ok_or_else(|| {
        Error::new(
            Status::Unsupported,
            format!("{locator} has no size (it is not a regular file), so it has no last bytes"),
        )
    })
}

fn ends_of(size: u64, etag: Option<String>, completions: Vec<Completion>) -> Result<Ends, Error> {
    let mut ends = Ends {
        size,
        etag,
        head: Vec::new(),
        tail: Vec::new(),
    };
    for completion in completions {
        let tag = completion.tag();
        let bytes = completion.into_result()?;
        if tag == 0 {
            ends.head = bytes;
        } else {
            ends.tail = bytes;
        }
    }
    Ok(ends)
}

impl From<RemoteEnds> for Ends {
    fn from(ends: RemoteEnds) -> Self {
        Ends {
            size: ends.size,
            etag: ends.etag,
            head: ends.head,
            tail: ends.tail,
        }
    }
}

fn saturate(n: u128) -> u64 {
    u64::try_from(n).unwrap_or(u64::MAX)
}

fn into_part(index: usize, read: Read<'_>, offset_in_span: u64) -> Part {
    part(
        index,
        read.tag,
        read.length,
        read.destination,
        offset_in_span,
    )
}

/// The part of the read at `index` in the submission, from the pieces of it a part keeps.
fn part(
    index: usize,
    tag: Option<u64>,
    length: u64,
    destination: Destination<'_>,
    offset_in_span: u64,
) -> Part {
    Part {
        tag: tag.unwrap_or(index as u64),
        index,
        offset_in_span,
        length,
        sink: Sink::from_destination(destination),
    }
}

/// Rank every read's group (backend, canonical resource, identity condition) and check what
/// the planner cannot (conditions on local files). Returns the planner's input and the reads
/// rejected here.
///
/// The planner's input is built in `room` (emptied first).
fn group(reads: &[Read<'_>], mut room: Vec<PlanRead>) -> (Grouped, Vec<(usize, Error)>) {
    type Key<'a> = (&'a str, &'a str, Option<&'a str>);
    let mut ids: HashMap<Key<'_>, u32> = HashMap::new();
    let mut keys: Vec<Key<'_>> = Vec::new();
    let mut early = Vec::new();
    room.clear();
    room.reserve(reads.len());
    let mut planned = room;
    let mut indices: Option<Vec<usize>> = None;
    // Reads of one object usually come together, sharing its locator's strings: such a read
    // takes the previous read's group without hashing its path again.
    let mut last: Option<(Key<'_>, u32)> = None;
    for (index, read) in reads.iter().enumerate() {
        let remote = matches!(read.locator.target(), Target::Remote);
        if !remote && read.if_match.is_some() {
            early.push((
                index,
                Error::new(
                    Status::InvalidArgument,
                    format!(
                        "an if-match condition applies only to remote objects, not to {}",
                        read.locator.canonical()
                    ),
                ),
            ));
            // From here on the planner's indices are not the submission's.
            indices.get_or_insert_with(|| (0..index).collect());
            continue;
        }
        let key = (
            read.locator.backend().name(),
            read.locator.canonical().as_str(),
            read.if_match.as_deref(),
        );
        let id = match last {
            Some((previous, id)) if same_key(previous, key) => id,
            _ => *ids.entry(key).or_insert_with(|| {
                keys.push(key);
                (keys.len() - 1) as u32
            }),
        };
        last = Some((key, id));
        if let Some(indices) = &mut indices {
            indices.push(index);
        }
        planned.push(PlanRead {
            group: id, // ranked below
            mergeable: remote,
            offset: read.offset,
            length: read.length,
            window: read.locator.window(),
        });
    }
    // Rank groups by their keys so the plan's order does not depend on submission order.
    let mut order: Vec<u32> = (0..keys.len() as u32).collect();
    order.sort_by_key(|&id| keys[id as usize]);
    let mut rank = vec![0u32; keys.len()];
    for (r, &id) in order.iter().enumerate() {
        rank[id as usize] = r as u32;
    }
    for read in &mut planned {
        read.group = rank[read.group as usize];
    }
    let grouped = Grouped {
        reads: planned,
        indices,
    };
    (grouped, early)
}

/// Whether two grouping keys name the same strings, by address (one locator's strings, or
/// the same `if_match`): equal keys, found without comparing their bytes.
fn same_key(a: (&str, &str, Option<&str>), b: (&str, &str, Option<&str>)) -> bool {
    let same = |x: &str, y: &str| std::ptr::eq(x, y);
    same(a.0, b.0)
        && same(a.1, b.1)
        && match (a.2, b.2) {
            (None, None) => true,
            (Some(x), Some(y)) => same(x, y),
            _ => false,
        }
}

/// The priced trade's largest gap for each group (indexed by rank), from what the transport
/// measured for the group's endpoint; `None` for local groups and unmeasured endpoints (the
/// guards alone decide there). Empty until the event loops have started.
fn prices(inner: &Inner, reads: &[Read<'_>], planned: &Grouped) -> Vec<Option<u64>> {
    let Some(Ok(remote)) = inner.remote.get() else {
        return Vec::new();
    };
    let groups = planned.reads.iter().map(|r| r.group + 1).max().unwrap_or(0);
    let mut prices = vec![None; groups as usize];
    let mut seen = vec![false; groups as usize];
    for (i, read) in planned.reads.iter().enumerate() {
        let group = read.group as usize;
        if std::mem::replace(&mut seen[group], true) || !read.mergeable {
            continue;
        }
        prices[group] = remote.price(&reads[planned.index(i)].locator);
    }
    prices
}

/// The planner's input: the reads not rejected before planning, and where each came from in
/// the submission.
struct Grouped {
    reads: Vec<PlanRead>,
    /// The submission's index of each of `reads`, once a read has been rejected before
    /// planning; `None` while the two are the same (most submissions), so no index is stored.
    indices: Option<Vec<usize>>,
}

impl Grouped {
    /// The submission's index of the planner's read `i`.
    fn index(&self, i: usize) -> usize {
        self.indices.as_ref().map_or(i, |indices| indices[i])
    }

    /// Turn the indices of `plan` (the planner's) into the submission's.
    fn to_submission(&self, plan: &mut Plan) {
        let Some(indices) = &self.indices else {
            return; // the same
        };
        for (index, _) in &mut plan.rejected {
            *index = indices[*index];
        }
        for part in plan.transfers.iter_mut().flat_map(|t| t.parts.iter_mut()) {
            part.index = indices[part.index];
        }
    }
}

/// A region in which reads may borrow their destinations; see [`Engine::scope`].
///
/// Leaking is harmless: a batch leaked with [`std::mem::forget`] is still waited for (the
/// scope registered it before any of its transfers started), and the scope itself is only
/// ever lent to the closure, so it cannot be moved out, leaked, or kept:
///
/// ```compile_fail,E0507
/// # let engine = karu_engine::Engine::new(karu_config::Snapshot::defaults()).unwrap();
/// engine.scope(|scope| std::mem::forget(*scope)); // cannot move out of `*scope`
/// ```
///
/// ```compile_fail
/// # let engine = karu_engine::Engine::new(karu_config::Snapshot::defaults()).unwrap();
/// let kept = engine.scope(|scope| scope); // the scope cannot outlive the closure
/// ```
///
/// A slice lent to a scope's read stays borrowed until the scope has returned, so it cannot be
/// touched while a transfer may write to it:
///
/// ```compile_fail,E0506
/// # use karu_engine::{BatchOptions, Read};
/// # let registry = karu_engine::testing::registry();
/// # let object = registry.resolve("/etc/hostname").unwrap();
/// # let engine = karu_engine::Engine::new(karu_config::Snapshot::defaults()).unwrap();
/// let mut buf = [0u8; 4];
/// engine.scope(|scope| {
///     let batch = scope.submit([Read::borrowed(&object, 0, &mut buf)], &BatchOptions::new());
///     std::mem::forget(batch);
///     buf[0] = 1; // `buf` is still lent to the scope
/// });
/// ```
///
/// The same code reads `buf` once the scope has returned:
///
/// ```
/// # use karu_engine::{BatchOptions, Read};
/// # let registry = karu_engine::testing::registry();
/// # let dir = tempfile::tempdir().unwrap();
/// # let path = dir.path().join("f");
/// # std::fs::write(&path, b"abcd").unwrap();
/// # let object = registry.resolve(path.to_str().unwrap()).unwrap();
/// # let engine = karu_engine::Engine::new(karu_config::Snapshot::defaults()).unwrap();
/// let mut buf = [0u8; 4];
/// engine.scope(|scope| {
///     let batch = scope.submit([Read::borrowed(&object, 0, &mut buf)], &BatchOptions::new());
///     assert!(batch.wait()[0].is_ok());
///     std::mem::forget(batch); // leaked: harmless
/// });
/// buf[0] = buf[0].to_ascii_uppercase();
/// assert_eq!(&buf, b"Abcd");
/// ```
pub struct Scope<'env> {
    engine: Engine,
    /// The batches submitted in this scope by the running process.
    batches: PerProcess<Mutex<Vec<Arc<BatchShared>>>>,
    /// Invariant in `'env`, so borrows cannot be shortened to the closure's own lifetime.
    _env: PhantomData<&'env mut &'env ()>,
}

impl<'env> Scope<'env> {
    /// Submit reads whose destinations may be borrowed for `'env`.
    pub fn submit<'scope>(
        &'scope self,
        reads: impl IntoIterator<Item = Read<'env>>,
        options: &BatchOptions,
    ) -> ScopedBatch<'scope> {
        let batches = self.batches.get_or_init(|| Mutex::new(Vec::new()));
        let batch = self
            .engine
            .submit_any(reads.into_iter().collect(), options, Some(batches));
        ScopedBatch {
            batch,
            _scope: PhantomData,
        }
    }
}

impl fmt::Debug for Scope<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Scope")
            .field("batches", &self.batches.get().map(|b| b.lock().len()))
            .finish_non_exhaustive()
    }
}

/// A [`Batch`] whose reads may borrow destinations; it cannot outlive its [`Scope`] (or, from
/// [`Engine::submit_unchecked`], the borrow of its destinations).
///
/// Unlike an owned [`Batch`], dropping it waits until no transfer references its borrowed
/// destinations (its pending reads are cancelled first), as the end of its scope would. In a
/// forked child, a scoped batch submitted before the fork has no transfer running there, and
/// dropping it does not wait (see [`Batch`]).
#[derive(Debug)]
#[must_use = "dropping a scoped batch cancels its reads and waits for its transfers"]
pub struct ScopedBatch<'scope> {
    batch: Batch,
    _scope: PhantomData<&'scope ()>,
}

impl Deref for ScopedBatch<'_> {
    type Target = Batch;
    fn deref(&self) -> &Batch {
        &self.batch
    }
}

impl Drop for ScopedBatch<'_> {
    fn drop(&mut self) {
        self.batch.shared.release();
    }
}

impl Stream for ScopedBatch<'_> {
    type Item = Completion;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Completion>> {
        Pin::new(&mut self.batch).poll_next(cx)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.batch.size_hint()
    }
}

impl FusedStream for ScopedBatch<'_> {
    fn is_terminated(&self) -> bool {
        self.batch.is_terminated()
    }
}

impl fmt::Debug for Engine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Engine")
            .field("limits", &self.slot.limits)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use smallvec::smallvec;

    use super::*;

    /// A planned transfer serving `parts` reads.
    fn serving(parts: usize) -> PlannedTransfer {
        let part = PlannedPart {
            index: 0,
            offset_in_span: 0,
            length: 1,
        };
        PlannedTransfer {
            group: 0,
            start: 0,
            length: 1,
            parts: smallvec![part; parts],
        }
    }

    #[test]
    fn reads_are_gathered_in_runs_of_whole_transfers() {
        let runs = |parts: &[usize]| {
            let transfers: Vec<PlannedTransfer> = parts.iter().map(|&n| serving(n)).collect();
            windows(&transfers)
                .map(|w| w.iter().map(|t| t.parts.len()).collect::<Vec<_>>())
                .collect::<Vec<_>>()
        };
        // One part each: runs of GATHER, the last one shorter.
        let ones = runs(&[1; 2 * GATHER + 3]);
        assert_eq!(
            ones.iter().map(Vec::len).collect::<Vec<_>>(),
            [GATHER, GATHER, 3]
        );
        // A transfer is never split; a run closes once it holds GATHER parts.
        assert_eq!(
            runs(&[GATHER + 5, 1, GATHER - 1, 2, 3]),
            [vec![GATHER + 5], vec![1, GATHER - 1], vec![2, 3]]
        );
        assert!(runs(&[]).is_empty());
    }

    /// A submission plans in the room the last one left; the room of a submission too large
    /// to keep is freed after it.
    #[test]
    fn submissions_plan_in_the_room_the_last_one_left() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        let data: Vec<u8> = (0..4096u32).map(|i| (i % 251) as u8).collect();
        std::fs::write(&path, &data).unwrap();
        let registry = crate::testing::registry();
        let object = registry.resolve(path.to_str().unwrap()).unwrap();
        let engine = Engine::new(Snapshot::defaults()).unwrap();
        let kept = |engine: &Engine| {
            let working = engine.running().working.lock();
            (working.reads.as_ptr(), working.bytes())
        };
        // Read `i`'s offset and length.
        let range = |i: usize| ((i * 7) % 4000, 1 + i % 90);
        let read_all = |engine: &Engine, n: usize| {
            let reads = (0..n).map(|i| {
                let (offset, length) = range(i);
                Read::new(&object, offset as u64, length as u64)
            });
            for (i, c) in engine
                .submit(reads, &BatchOptions::new())
                .wait()
                .into_iter()
                .enumerate()
            {
                let (offset, length) = range(i);
                let want = &data[offset..offset + length];
                assert_eq!(c.index(), i);
                assert_eq!(c.status(), Status::Ok);
                assert_eq!(c.into_buffer().unwrap(), want);
            }
        };

        read_all(&engine, 1_000);
        // Room for the planner's input, the sort keys and the transfers of 1,000 reads.
        let per_read = size_of::<PlanRead>() + size_of::<u128>() + size_of::<PlannedTransfer>();
        let (_, bytes) = kept(&engine);
        assert!(bytes >= 1_000 * per_read, "{bytes} bytes kept");

        // Room for the input of 1,500 reads, and none else: less than a submission of 1,000
        // reads needs in all, so a submission that planned elsewhere would replace it.
        let planted = Vec::with_capacity(1_500);
        let room = planted.as_ptr();
        *engine.running().working.lock() = Working {
            reads: planted,
            plan: plan::Scratch::default(),
        };
        read_all(&engine, 1_000);
        let (kept_room, bytes) = kept(&engine);
        assert_eq!(kept_room, room, "the submission planned elsewhere");
        assert!(
            bytes >= 1_500 * size_of::<PlanRead>() + 1_000 * (per_read - size_of::<PlanRead>())
        );

        // Too many reads to keep their room (all of zero length: rejected, no I/O).
        let too_many = Working::KEPT / per_read + 1;
        let reads = (0..too_many).map(|_| Read::new(&object, 0, 0));
        let done = engine.submit(reads, &BatchOptions::new()).wait();
        assert_eq!(done.len(), too_many);
        for (i, c) in done.iter().enumerate() {
            assert_eq!((c.index(), c.status()), (i, Status::InvalidRange));
            assert!(c.error().unwrap().message().contains("zero-length"));
        }
        assert_eq!(kept(&engine).1, 0, "the room of {too_many} reads was kept");
        read_all(&engine, 1_000);
        assert!(kept(&engine).1 >= 1_000 * per_read);
    }
}
