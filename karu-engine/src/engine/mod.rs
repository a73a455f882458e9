//! The engine: plans submissions and routes transfers to file workers and event loops.
//!
//! The modules: this file (the engine a client owns, and the workers of each process),
//! [`options`] (engine and batch options), [`submit`] (grouping, planning and routing a
//! submission), [`scope`] (borrowed destinations) and [`probes`] (`stat` and `read_ends`).

mod options;
mod probes;
mod scope;
mod submit;

pub use options::{BatchOptions, EngineOptions};
pub use probes::{Ends, ObjectInfo};
pub use scope::{Scope, ScopedBatch};

use std::fmt;
use std::sync::{Arc, OnceLock};

use karu_config::{Snapshot, Trade};
use parking_lot::Mutex;

use crate::batch::Batch;
use crate::batch::read::Read;
use crate::credentials::{Callbacks, CredentialCache, CredentialStats};
use crate::file::FilePool;
use crate::http::{Remote, TransportStats};
use crate::plan::{self, Limits, PlanRead};
use crate::sdk::{Clock, Error, PerProcess, SystemClock};

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
    /// The wall clock of the credential cache.
    clock: Arc<dyn Clock>,
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
    fn new(snapshot: &Snapshot, callbacks: &Callbacks, clock: &Arc<dyn Clock>) -> Arc<Inner> {
        Arc::new(Inner {
            snapshot: snapshot.clone(),
            files: FilePool::new(snapshot.global().file_workers),
            remote: OnceLock::new(),
            callbacks: callbacks.clone(),
            credentials: CredentialCache::with_clock(Arc::clone(clock)),
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
        let clock = options.clock.unwrap_or_else(|| Arc::new(SystemClock));
        let running = Inner::new(&snapshot, &options.callbacks, &clock);
        Ok(Engine {
            slot: Arc::new(Slot {
                trade: snapshot.global().planner.trade,
                snapshot,
                limits,
                callbacks: options.callbacks,
                clock,
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
            .get_or_init(|| Inner::new(&slot.snapshot, &slot.callbacks, &slot.clock))
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

    use super::submit::{GATHER, windows};
    use super::*;
    use crate::plan::{PlannedPart, PlannedTransfer};
    use crate::sdk::Status;

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
        let registry = crate::sdk::testing::registry();
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
            assert_eq!(c.timing().attempts(), 0, "refused before any I/O");
        }
        assert_eq!(kept(&engine).1, 0, "the room of {too_many} reads was kept");
        read_all(&engine, 1_000);
        assert!(kept(&engine).1 >= 1_000 * per_read);
    }
}
