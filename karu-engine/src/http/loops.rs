//! The event loops: each runs a current-thread tokio runtime with its own queue of pending
//! jobs (transfers, transfers waiting for a credential, probes), starts them under its share
//! of the client's concurrency limit, and hands them to its task pool.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use karu_config::Settings;
use parking_lot::{Mutex, RwLock};
use tokio::sync::{Semaphore, mpsc};

use crate::credentials::Authority;
use crate::credentials::workers::Pending;
use crate::http::client::HttpClient;
use crate::http::permits::{Permits, ReleasablePermits, TASK_PERMITS};
use crate::http::remote::Shared;
use crate::http::run::{reprice, run_transfer};
use crate::http::task_pool::{Handed, TaskPool};
use crate::http::transport::Resolver;
use crate::sdk::time::instant_after;
use crate::sdk::{Credential, Error, Locator};
use crate::transfer::Transfer;

pub(super) type BoxFuture = Pin<Box<dyn Future<Output = ()> + Send>>;

pub(super) enum Job {
    Transfer(Box<Transfer>),
    /// A transfer waiting for its credential: waits without a concurrency permit, then joins
    /// the queue as a `Transfer`.
    Credential(Box<Waiting>),
    Task(Box<dyn FnOnce(Arc<LoopCtx>) -> BoxFuture + Send>),
}

/// A transfer whose credential is being looked up (or whose lookup it joined).
pub(super) struct Waiting {
    pub(super) transfer: Transfer,
    pub(super) authority: Authority,
    pub(super) pending: Pending,
    /// When the lookup began for this transfer: the read's deadline counts from here.
    pub(super) began: Instant,
    pub(super) deadline: Instant,
}

impl Waiting {
    /// Wait for the credential (until the read's deadline, or the batch's cancellation),
    /// then queue the transfer, or fail it.
    async fn run(self, ctx: &LoopCtx) {
        let Waiting {
            mut transfer,
            authority,
            pending,
            began,
            deadline,
        } = self;
        let workers = &ctx.shared.workers;
        let batch = Arc::clone(&transfer.batch);
        match workers
            .finish(&authority, pending, deadline, Some(&batch))
            .await
        {
            Ok(credential) => {
                transfer.auth = Some(Box::new((authority, credential)));
                transfer.credential_wait = began.elapsed();
                ctx.queues.push_transfer(transfer);
            }
            Err(error) => transfer.fail(&error),
        }
    }
}

/// One queued or running job of a loop, counted in its `load` until dropped (also when the
/// job's task unwinds).
pub(super) struct Load {
    pub(super) queues: Arc<Queues>,
    pub(super) index: usize,
}

impl Drop for Load {
    fn drop(&mut self) {
        self.queues.load[self.index].fetch_sub(1, Ordering::Relaxed);
    }
}

/// Poll `future`, turning a panic inside it into `Err` (the future is not polled again).
/// Third-party backend hooks run inside transfers; a panic in one must end that transfer
/// with a status, never the loop, and never leave a batch waiting.
///
/// A wrapper future, not an `async fn`: an `async fn` that pins its argument keeps two copies
/// of it (the argument and the pinned local), which would double every transfer's task, and
/// every spawn copies the whole task.
pub(super) fn catch_panic<F: Future>(future: F) -> impl Future<Output = Result<F::Output, ()>> {
    use futures_util::FutureExt as _;
    std::panic::AssertUnwindSafe(future)
        .catch_unwind()
        .map(|result| result.map_err(drop))
}

/// The loops' pending queues. A job goes to the loop with the least work (queued plus
/// running), and each loop runs at most its share of the client's limit at once, so the loops
/// stay balanced and each pool needs about `concurrency / io_threads` connections.
pub(super) struct Queues {
    pub(super) senders: RwLock<Vec<mpsc::UnboundedSender<Job>>>,
    /// Jobs queued or running, per loop.
    pub(super) load: Vec<AtomicUsize>,
    /// Each loop's share of the client's concurrency limit (its `LoopCtx::share`).
    pub(super) shares: Vec<Arc<Semaphore>>,
    /// Each loop's runtime and state, for work sent to run there at once
    /// ([`Queues::spawn_on`]); emptied with `senders` when the client shuts down.
    pub(super) loops: RwLock<Vec<(tokio::runtime::Handle, Weak<LoopCtx>)>>,
}

impl Queues {
    pub(super) fn push(&self, job: Job) -> Result<(), Job> {
        let senders = self.senders.read();
        if senders.is_empty() {
            return Err(job);
        }
        let i = (0..senders.len())
            .min_by_key(|&i| self.load[i].load(Ordering::Relaxed))
            .unwrap_or(0);
        self.load[i].fetch_add(1, Ordering::Relaxed);
        senders[i].send(job).map_err(|e| {
            self.load[i].fetch_sub(1, Ordering::Relaxed);
            e.0
        })
    }

    /// Run `task` on loop `i` at once, on `permits` of that loop's share: a task of that
    /// loop's runtime, not a job in its queue, where it could wait behind a transfer that
    /// waits for the very permits it carries. `task` is given the loop's state and the
    /// permits (which it may hand back while it waits for a location, see
    /// `ReleasablePermits`), and is counted in the loop's load while it lives. `false` if the
    /// loops have stopped (the permits are given back).
    pub(super) fn spawn_on<F>(
        &self,
        i: usize,
        permits: Permits,
        task: impl FnOnce(Arc<LoopCtx>, Arc<ReleasablePermits>) -> F,
    ) -> bool
    where
        F: Future<Output = ()> + Send + 'static,
    {
        let loops = self.loops.read();
        let Some((runtime, ctx)) = loops.get(i) else {
            return false;
        };
        let Some(ctx) = ctx.upgrade() else {
            return false;
        };
        self.load[i].fetch_add(1, Ordering::Relaxed);
        let load = Load {
            queues: Arc::clone(&ctx.queues),
            index: i,
        };
        let held = Arc::new(ReleasablePermits::new(&ctx, permits));
        let future = task(ctx, held);
        drop(runtime.spawn(async move {
            let _load = load;
            future.await;
        }));
        true
    }

    /// Permits nobody waits for of loop `i`'s share, if it has some.
    pub(super) fn idle_permits_of(&self, i: usize) -> Option<Permits> {
        Arc::clone(self.shares.get(i)?).try_acquire_owned().ok()
    }

    /// How many loops there are.
    pub(super) fn loop_count(&self) -> usize {
        self.shares.len()
    }

    pub(super) fn push_transfer(&self, transfer: Transfer) {
        if let Err(Job::Transfer(t)) = self.push(Job::Transfer(Box::new(transfer))) {
            t.fail(&Error::internal("the event loops have stopped"));
        }
    }
}

/// One loop's own state, shared by the tasks it runs.
pub(crate) struct LoopCtx {
    pub(super) shared: Arc<Shared>,
    /// This loop's index in `queues.load`.
    pub(super) index: usize,
    pub(super) queues: Arc<Queues>,
    /// This loop's share of the client's concurrency limit.
    pub(super) share: Arc<Semaphore>,
    /// The share's size: also the most connections its pools open to one host.
    pub(super) share_size: usize,
    /// One client (connection pool) per connect timeout in use; usually one (a list: no
    /// hashing on every request).
    pub(super) clients: Mutex<Vec<(Duration, HttpClient)>>,
}

impl LoopCtx {
    /// Permits nobody waits for, if there are: room for one more request on this loop (its
    /// share of the client's limit bounds the connections of its pool).
    pub(crate) fn idle_permits(&self) -> Option<Permits> {
        Arc::clone(&self.share).try_acquire_owned().ok()
    }

    /// Permits for one more request, of this loop's share of the client's limit, as the loop
    /// takes them for a job; `None` once the share is closed.
    pub(super) async fn permits(&self) -> Option<Permits> {
        Arc::clone(&self.share).acquire_owned().await.ok()
    }

    pub(super) fn client(&self, settings: &Settings) -> HttpClient {
        let timeout = settings.http.connect_timeout.0;
        let mut clients = self.clients.lock();
        if let Some((_, client)) = clients.iter().find(|(t, _)| *t == timeout) {
            return client.clone();
        }
        let client = HttpClient::new(
            Arc::clone(&self.shared.tls),
            Resolver::new(Arc::clone(&self.shared.dns)),
            timeout,
            self.shared.snapshot.global().http.version,
            self.share_size,
        );
        clients.push((timeout, client.clone()));
        client
    }

    /// The authority and a credential for a read outside a batch (probes) that started at
    /// `started`: looked up on a credential worker, never on this loop, within the read's
    /// deadline.
    pub(super) async fn authenticate(
        &self,
        locator: &Locator,
        settings: &Settings,
        started: Instant,
    ) -> Result<Option<(Authority, Credential)>, Error> {
        let shared = &self.shared;
        match Authority::for_locator(locator, &shared.snapshot, &shared.callbacks)? {
            None => Ok(None),
            Some(authority) => {
                let deadline = deadline_of(started, settings);
                let credential = shared
                    .workers
                    .obtain(&authority, None, deadline, None)
                    .await?;
                Ok(Some((authority, credential)))
            }
        }
    }

    pub(crate) fn settings_for(&self, locator: &Locator) -> Arc<Settings> {
        self.shared.settings_for(locator)
    }
}

impl Shared {
    pub(super) fn settings_for(&self, locator: &Locator) -> Arc<Settings> {
        self.snapshot
            .for_path(locator.canonical().as_str())
            .unwrap_or_else(|_| Arc::new(self.snapshot.global().clone()))
    }
}

/// The deadline of a read that started at `started`.
pub(super) fn deadline_of(started: Instant, settings: &Settings) -> Instant {
    instant_after(started, settings.retry.deadline.0)
}

pub(super) async fn run_loop(mut receiver: mpsc::UnboundedReceiver<Job>, ctx: Arc<LoopCtx>) {
    // Every task the loop spawns (its task pool's tasks, and transfers waiting for a credential)
    // holds a clone of `running`; once the queue is closed, the loop finishes when the last of
    // them is dropped. (A `JoinSet` did this with an allocation, a lock and a list entry per
    // task.)
    let (running, mut finished) = mpsc::channel::<()>(1);
    let pool = Arc::new(TaskPool::new(ctx.share_size));
    while let Some(job) = receiver.recv().await {
        // Counted since `Queues::push`; uncounted when this guard drops, on every path.
        let load = Load {
            queues: Arc::clone(&ctx.queues),
            index: ctx.index,
        };
        let job = match job {
            Job::Transfer(t) if t.batch.is_cancelled() => {
                t.cancel();
                continue;
            }
            Job::Credential(w) if w.transfer.batch.is_cancelled() => {
                w.transfer.cancel();
                continue;
            }
            Job::Credential(w) => {
                // Waiting for a credential holds no permit, nor a task of the pool.
                let ctx = Arc::clone(&ctx);
                let running = running.clone();
                tokio::spawn(async move {
                    let _running = running;
                    let _load = load;
                    w.run(&ctx).await;
                });
                continue;
            }
            job => job,
        };
        // A permit of this loop's share of the client's limit.
        let Some(permits) = ctx.permits().await else {
            if let Job::Transfer(t) = job {
                t.fail(&Error::internal("the concurrency limit was closed"));
            }
            continue;
        };
        let job = match job {
            Job::Transfer(t) if t.parts.len() > 1 && ctx.shared.reprice => {
                Job::Transfer(reprice(&ctx, t))
            }
            job => job,
        };
        if pool.hand((job, permits, load)) == Handed::NeedsTask {
            let task = Arc::clone(&pool).serve(running.clone(), None, {
                let ctx = Arc::clone(&ctx);
                move |(job, permits, load), spare| {
                    run_job(job, permits, spare, load, Arc::clone(&ctx))
                }
            });
            // Boxed: a task's future holds a job's, which is large, and tokio moves an unboxed
            // future by value several times as it spawns it.
            tokio::spawn(Box::pin(task));
        }
    }
    pool.close();
    drop(running);
    let _ = finished.recv().await;
}

/// Run one job under its `permits`, held in a [`ReleasablePermits`] its fetches hand back while
/// they wait for another request's redirect location: a transfer's own, a task's the task-local
/// [`task_permits`](super::task_permits) (a scope is entered and left on every poll: transfers, a
/// request each, do without). The permits and the job's place in the loop's load are given back
/// when it ends; the `ReleasablePermits` (the task's `spare`, if it kept one) is handed back for
/// the task's next job unless a clone of it outlives this one (an allocation less a request).
async fn run_job(
    job: Job,
    permits: Permits,
    spare: Option<Arc<ReleasablePermits>>,
    load: Load,
    ctx: Arc<LoopCtx>,
) -> Option<Arc<ReleasablePermits>> {
    let _load = load;
    let held = match spare {
        Some(held) => {
            held.hold(permits);
            held
        }
        None => Arc::new(ReleasablePermits::new(&ctx, permits)),
    };
    match job {
        Job::Transfer(t) => run_transfer(*t, Arc::clone(&held), ctx).await,
        Job::Task(f) => TASK_PERMITS.scope(Arc::clone(&held), f(ctx)).await,
        Job::Credential(w) => {
            TASK_PERMITS
                .scope(Arc::clone(&held), async move { w.run(&ctx).await })
                .await
        }
    }
    (Arc::strong_count(&held) == 1).then(|| {
        held.release();
        held
    })
}
