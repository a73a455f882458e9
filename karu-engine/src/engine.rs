//! The engine: plans submissions and routes transfers to file workers and event loops.

use std::collections::HashMap;
use std::fmt;
use std::marker::PhantomData;
use std::ops::Deref;
use std::panic::{AssertUnwindSafe, catch_unwind, resume_unwind};
use std::sync::{Arc, OnceLock};

use karu_config::Snapshot;
use parking_lot::Mutex;

use crate::batch::{Batch, BatchShared, BatchStats};
use crate::credential::{Callbacks, CredentialCache, CredentialStats};
use crate::file::{self, FilePool};
use crate::http::{Remote, TransportStats};
use crate::locator::{Locator, Target, Window};
use crate::plan::{self, Limits, PlanRead};
use crate::read::{Completion, Read, Sink};
use crate::status::{Error, Status};
use crate::transfer::{Part, Transfer};

/// Per-batch overrides of the planner's merge guards (unset = the client's configuration).
///
/// ```
/// use karu_engine::BatchOptions;
/// let no_merging = BatchOptions::new().max_gap(0);
/// let tight = BatchOptions::new().max_span(8 << 20).max_parts(64).max_amplification(2);
/// # let _ = (no_merging, tight);
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
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
    /// Visible size in bytes (a window's length for a windowed locator), or `None` when the
    /// object states none: a local device or FIFO, whose metadata says nothing of what can
    /// be read. Remote objects and regular files always have one.
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
#[derive(Clone)]
pub struct Engine {
    inner: Arc<Inner>,
}

struct Inner {
    snapshot: Snapshot,
    limits: Limits,
    files: FilePool,
    /// The event loops, started on the first remote transfer.
    remote: OnceLock<Result<Remote, Error>>,
    callbacks: Callbacks,
    credentials: CredentialCache,
}

impl Inner {
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
#[derive(Debug, Default, Clone)]
pub struct EngineOptions {
    /// Application credential callbacks, by provider family.
    pub callbacks: Callbacks,
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
        if let Some(path) = &global.http.ca_file
            && let Err(e) = std::fs::metadata(path)
        {
            return Err(Error::new(
                Status::InvalidArgument,
                format!("cannot read CA file {}: {e}", path.display()),
            ));
        }
        let files = FilePool::new(global.file_workers)?;
        Ok(Engine {
            inner: Arc::new(Inner {
                snapshot,
                limits,
                files,
                remote: OnceLock::new(),
                callbacks: options.callbacks,
                credentials: CredentialCache::new(),
            }),
        })
    }

    /// The configuration snapshot captured when the engine was built.
    pub fn snapshot(&self) -> &Snapshot {
        &self.inner.snapshot
    }

    /// Counters of the remote path (all zero until the first remote read).
    pub fn transport_stats(&self) -> TransportStats {
        match self.inner.remote.get() {
            Some(Ok(remote)) => remote.stats(),
            _ => TransportStats::default(),
        }
    }

    /// Counters of the credential cache (lookups, callback calls, hits, failures).
    pub fn credential_stats(&self) -> CredentialStats {
        self.inner.credentials.stats()
    }

    /// The planner limits of this engine before per-batch overrides.
    pub fn limits(&self) -> Limits {
        self.inner.limits
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
            batches: Mutex::new(Vec::new()),
            _env: PhantomData,
        };
        let result = catch_unwind(AssertUnwindSafe(|| f(&scope)));
        for batch in scope.batches.lock().drain(..) {
            batch.release();
        }
        match result {
            Ok(value) => value,
            Err(panic) => resume_unwind(panic),
        }
    }

    /// The visible size of an object, and its strong ETag when it has one. Sizes are never
    /// cached.
    pub fn stat(&self, locator: &Locator) -> Result<ObjectInfo, Error> {
        if let Some(Window { len: Some(len), .. }) = locator.window() {
            return Ok(ObjectInfo {
                size: Some(len),
                etag: None,
            });
        }
        let (size, etag) = match locator.target() {
            Target::File(path) => (file::size(path)?, None),
            Target::Remote => {
                let (size, etag) = self.inner.remote()?.stat(locator)?;
                (Some(size), etag)
            }
        };
        Ok(ObjectInfo {
            size: size.map(|size| visible_size(locator.window(), size)),
            etag,
        })
    }

    /// The first `head_len` and last `tail_len` bytes of an object (each clamped to its size),
    /// with its size and ETag.
    pub fn read_ends(
        &self,
        locator: &Locator,
        head_len: u64,
        tail_len: u64,
    ) -> Result<Ends, Error> {
        if let Target::Remote = locator.target() {
            let ends = self
                .inner
                .remote()?
                .read_ends(locator, head_len, tail_len)?;
            return Ok(Ends {
                size: ends.size,
                etag: ends.etag,
                head: ends.head,
                tail: ends.tail,
            });
        }
        let info = self.stat(locator)?;
        let Some(size) = info.size else {
            return Err(Error::new(
                Status::Unsupported,
                format!(
                    "{locator} has no size (it is not a regular file), so it has no last bytes"
                ),
            ));
        };
        let head_len = head_len.min(size);
        let tail_len = tail_len.min(size);
        let mut reads = Vec::new();
        if head_len > 0 {
            reads.push(Read::new(locator, 0, head_len).tag(0));
        }
        if tail_len > 0 {
            reads.push(Read::new(locator, size - tail_len, tail_len).tag(1));
        }
        let batch = self.submit(reads, &BatchOptions::new().max_gap(0));
        let mut ends = Ends {
            size,
            etag: info.etag,
            head: Vec::new(),
            tail: Vec::new(),
        };
        for completion in batch.wait() {
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

    /// Plan and route `reads`. A scope's batch is registered in `scope` before any transfer
    /// is routed, so the scope waits for it even if this call unwinds half way.
    fn submit_any(
        &self,
        reads: Vec<Read<'_>>,
        options: &BatchOptions,
        scope: Option<&Mutex<Vec<Arc<BatchShared>>>>,
    ) -> Batch {
        let shared = BatchShared::new(reads.len(), options.one_version);
        if let Some(batches) = scope {
            batches.lock().push(Arc::clone(&shared));
        }
        let limits = options.limits(self.inner.limits);
        let (planned, mut early) = group(&reads);
        let plan_reads: Vec<PlanRead> = planned.iter().map(|p| p.read).collect();
        let mut plan = plan::plan(&plan_reads, &limits);
        // Back from the planner's indices to the submission's.
        for (index, _) in &mut plan.rejected {
            *index = planned[*index].index;
        }
        for transfer in &mut plan.transfers {
            for part in &mut transfer.parts {
                part.index = planned[part.index].index;
            }
        }
        let stats = BatchStats {
            reads: reads.len(),
            rejected: plan.rejected.len() + early.len(),
            transfers: plan.transfers.len(),
            requested_bytes: saturate(plan.requested_bytes()),
            fetched_bytes: saturate(plan.fetched_bytes()),
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

        for planned in plan.transfers {
            let mut locator = None;
            let mut if_match = None;
            let parts: Vec<Part> = planned
                .parts
                .iter()
                .filter_map(|p| {
                    let read = slots[p.index].take()?;
                    if locator.is_none() {
                        locator = Some(read.locator.whole());
                        if_match.clone_from(&read.if_match);
                    }
                    Some(into_part(p.index, read, p.offset_in_span))
                })
                .collect();
            let Some(locator) = locator else { continue };
            let transfer = Transfer {
                locator,
                start: planned.start,
                length: planned.length,
                if_match,
                parts,
                batch: Arc::clone(&shared),
                auth: None,
                credential_wait: std::time::Duration::ZERO,
            };
            self.route(transfer);
        }
        Batch {
            shared,
            stats,
            _engine: self.inner.clone(),
        }
    }

    fn route(&self, transfer: Transfer) {
        match transfer.locator.target() {
            Target::File(_) => self.inner.files.submit(transfer),
            Target::Remote => match self.inner.remote() {
                Ok(remote) => remote.submit(transfer),
                Err(e) => transfer.fail(&e),
            },
        }
    }
}

fn visible_size(window: Option<Window>, object_size: u64) -> u64 {
    match window {
        None => object_size,
        Some(Window { len: Some(len), .. }) => len,
        Some(Window { start, len: None }) => object_size.saturating_sub(start),
    }
}

fn saturate(n: u128) -> u64 {
    u64::try_from(n).unwrap_or(u64::MAX)
}

fn into_part(index: usize, read: Read<'_>, offset_in_span: u64) -> Part {
    Part {
        tag: read.tag.unwrap_or(index as u64),
        index,
        offset_in_span,
        length: read.length,
        sink: Sink::from_destination(read.destination),
    }
}

/// Rank every read's group (backend, canonical resource, identity condition) and check what
/// the planner cannot (conditions on local files). Returns the planner's input and the reads
/// rejected here.
fn group(reads: &[Read<'_>]) -> (Vec<Planned>, Vec<(usize, Error)>) {
    type Key<'a> = (&'a str, &'a str, Option<&'a str>);
    let mut ids: HashMap<Key<'_>, u32> = HashMap::new();
    let mut keys: Vec<Key<'_>> = Vec::new();
    let mut raw_groups = Vec::with_capacity(reads.len());
    for read in reads {
        let key = (
            read.locator.backend().name(),
            read.locator.canonical().as_str(),
            read.if_match.as_deref(),
        );
        let id = *ids.entry(key).or_insert_with(|| {
            keys.push(key);
            (keys.len() - 1) as u32
        });
        raw_groups.push(id);
    }
    // Rank groups by their keys so the plan's order does not depend on submission order.
    let mut order: Vec<u32> = (0..keys.len() as u32).collect();
    order.sort_by_key(|&id| keys[id as usize]);
    let mut rank = vec![0u32; keys.len()];
    for (r, &id) in order.iter().enumerate() {
        rank[id as usize] = r as u32;
    }

    let mut early = Vec::new();
    let mut planned = Vec::with_capacity(reads.len());
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
            continue;
        }
        planned.push(Planned {
            index,
            read: PlanRead {
                group: rank[raw_groups[index] as usize],
                mergeable: remote,
                offset: read.offset,
                length: read.length,
                window: read.locator.window(),
            },
        });
    }
    (planned, early)
}

/// A read the planner will see, and its index in the submission.
struct Planned {
    index: usize,
    read: PlanRead,
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
/// # use karu_engine::{BatchOptions, Read, Registry};
/// # let registry = Registry::new();
/// # registry.register("file", std::sync::Arc::new(karu_engine::testing::FileBackend));
/// # let object = registry.resolve("/etc/hostname").unwrap();
/// # let engine = karu_engine::Engine::new(karu_config::Snapshot::defaults()).unwrap();
/// let mut buf = [0u8; 4];
/// engine.scope(|scope| {
///     let batch = scope.submit([Read::into_slice(&object, 0, &mut buf)], &BatchOptions::new());
///     std::mem::forget(batch);
///     buf[0] = 1; // `buf` is still lent to the scope
/// });
/// ```
///
/// The same code reads `buf` once the scope has returned:
///
/// ```
/// # use karu_engine::{BatchOptions, Read, Registry};
/// # let registry = Registry::new();
/// # registry.register("file", std::sync::Arc::new(karu_engine::testing::FileBackend));
/// # let dir = tempfile::tempdir().unwrap();
/// # let path = dir.path().join("f");
/// # std::fs::write(&path, b"abcd").unwrap();
/// # let object = registry.resolve(path.to_str().unwrap()).unwrap();
/// # let engine = karu_engine::Engine::new(karu_config::Snapshot::defaults()).unwrap();
/// let mut buf = [0u8; 4];
/// engine.scope(|scope| {
///     let batch = scope.submit([Read::into_slice(&object, 0, &mut buf)], &BatchOptions::new());
///     assert!(batch.wait()[0].is_ok());
///     std::mem::forget(batch); // leaked: harmless
/// });
/// buf[0] = buf[0].to_ascii_uppercase();
/// assert_eq!(&buf, b"Abcd");
/// ```
pub struct Scope<'env> {
    engine: Engine,
    batches: Mutex<Vec<Arc<BatchShared>>>,
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
        let batch =
            self.engine
                .submit_any(reads.into_iter().collect(), options, Some(&self.batches));
        ScopedBatch {
            batch,
            _scope: PhantomData,
        }
    }
}

impl fmt::Debug for Scope<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Scope")
            .field("batches", &self.batches.lock().len())
            .finish_non_exhaustive()
    }
}

/// A [`Batch`] whose reads may borrow destinations; it cannot outlive its [`Scope`].
#[derive(Debug)]
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

impl fmt::Debug for Engine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Engine")
            .field("limits", &self.inner.limits)
            .finish_non_exhaustive()
    }
}
