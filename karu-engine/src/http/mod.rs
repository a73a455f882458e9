//! Remote reads: event loops, the shared concurrency limit, and the life of one transfer
//! (prepare late, send, check, resume or retry under one deadline, scatter to parts).
//!
//! `KARU_IO_THREADS` loops each run a current-thread tokio runtime with its own connection
//! pool (`client.rs`: hyper's connections in a pool of Karu's own) and its own queue of pending
//! transfers. A client-wide semaphore bounds the active transfers of all loops together; a
//! transfer waits in its loop's queue (as a plain description: no task, no buffer) until a
//! permit frees up, so a batch of any size holds at most the limit in flight.

pub(crate) mod client;
mod crew;
pub(crate) mod endpoint;
pub(crate) mod ends;
pub(crate) mod exchange;
pub(crate) mod failure;
pub(crate) mod fetch;
pub(crate) mod landing;
pub(crate) mod locations;
pub(crate) mod meter;
pub(crate) mod pieces;
pub(crate) mod speed;
pub(crate) mod transport;

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use karu_config::{Settings, Snapshot};
use parking_lot::{Mutex, RwLock};
use smallvec::SmallVec;
use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc};

use crate::batch::read::Completion;
use crate::credentials::workers::CredentialWorkers;
use crate::credentials::workers::Pending;
use crate::credentials::{Authority, Callbacks, CredentialCache};
use crate::http::client::HttpClient;
use crate::http::crew::{Crew, Handed};
use crate::http::endpoint::Endpoints;
use crate::http::ends::RemoteEnds;
use crate::http::fetch::{Fetch, Fetched};
use crate::http::landing::{Dest, Landing, Scatter};
use crate::http::locations::Locations;
use crate::http::meter::Metered;
use crate::http::transport::{DnsCache, Resolver, TlsConfig};
use crate::reply::{self, Reply};
use crate::sdk::time::instant_after;
use crate::sdk::{Credential, Error, Evidence, Locator, RangeSpec, Status};
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
    Transfer(Box<Transfer>),
    /// A transfer waiting for its credential: waits without a concurrency permit, then joins
    /// the queue as a `Transfer`.
    Credential(Box<Waiting>),
    Task(Box<dyn FnOnce(Arc<LoopCtx>) -> BoxFuture + Send>),
}

/// A transfer whose credential is being looked up (or whose lookup it joined).
struct Waiting {
    transfer: Transfer,
    authority: Authority,
    pending: Pending,
    /// When the lookup began for this transfer: the read's deadline counts from here.
    began: Instant,
    deadline: Instant,
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
struct Load {
    queues: Arc<Queues>,
    index: usize,
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
/// of it (the argument and the pinned local), which doubled every transfer's task (~14 KiB
/// instead of ~7 KiB), and every spawn copies the whole task.
fn catch_panic<F: Future>(future: F) -> impl Future<Output = Result<F::Output, ()>> {
    use futures_util::FutureExt as _;
    std::panic::AssertUnwindSafe(future)
        .catch_unwind()
        .map(|result| result.map_err(drop))
}

/// State every loop shares.
struct Shared {
    snapshot: Snapshot,
    limit: Arc<Semaphore>,
    stats: RemoteStats,
    tls: Arc<TlsConfig>,
    dns: Arc<DnsCache>,
    callbacks: Callbacks,
    workers: CredentialWorkers,
    /// Redirect locations backends allow reusing (never object bytes or sizes).
    locations: Mutex<Locations>,
    /// Woken whenever a first request's flight of a reusable location ends.
    location_flights: tokio::sync::Notify,
    /// Measurements and adaptive windows, per endpoint.
    endpoints: Endpoints,
    /// Whether a merged transfer's gaps are priced again as it starts (`planner.trade =
    /// "priced"`); see [`reprice`].
    reprice: bool,
}

/// The loops' pending queues. A job goes to the loop with the least work (queued plus
/// running), and each loop runs at most its share of the client's limit at once, so the loops
/// stay balanced and each pool needs about `concurrency / io_threads` connections.
struct Queues {
    senders: RwLock<Vec<mpsc::UnboundedSender<Job>>>,
    /// Jobs queued or running, per loop.
    load: Vec<AtomicUsize>,
}

impl Queues {
    fn push(&self, job: Job) -> Result<(), Job> {
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

    fn push_transfer(&self, transfer: Transfer) {
        if let Err(Job::Transfer(t)) = self.push(Job::Transfer(Box::new(transfer))) {
            t.fail(&Error::internal("the event loops have stopped"));
        }
    }
}

/// One loop's own state, shared by the tasks it runs.
pub(crate) struct LoopCtx {
    shared: Arc<Shared>,
    /// This loop's index in `queues.load`.
    index: usize,
    queues: Arc<Queues>,
    /// This loop's share of the client's concurrency limit.
    share: Arc<Semaphore>,
    /// The share's size: also the most connections its pools open to one host.
    share_size: usize,
    /// One client (connection pool) per connect timeout in use; usually one (a list: no
    /// hashing on every request).
    clients: Mutex<Vec<(Duration, HttpClient)>>,
}

/// A request's place under the limits: this loop's share, then the client's limit.
pub(crate) type Permits = (OwnedSemaphorePermit, OwnedSemaphorePermit);

tokio::task_local! {
    /// The permits the running task was started with (see [`Held`]).
    static TASK_PERMITS: Arc<Held>;
}

/// The permits of the running task (a transfer's or a probe's), for its fetches to hand back
/// while they wait without sending (see [`Held`]). `None` outside a loop's task.
pub(crate) fn task_permits() -> Option<Arc<Held>> {
    TASK_PERMITS.try_with(Arc::clone).ok()
}

/// Permits a request runs on, which it may hand back while it waits without sending: a
/// follower waiting for the location of a first request of its object
/// ([`locations`](crate::http::locations)) [releases](Held::release) them, so waiting
/// followers of one object never take the permits another object's first read needs, and
/// [takes them again](Held::reacquire), in the queue like any transfer, once it knows where
/// to send. Only the holder whose release took the permits takes them again, so the permits
/// held never exceed those given.
pub(crate) struct Held {
    permits: Mutex<Option<Permits>>,
    share: Arc<Semaphore>,
    limit: Arc<Semaphore>,
}

impl Held {
    /// Permits taken from `ctx`'s share and the client's limit.
    pub(crate) fn new(ctx: &LoopCtx, permits: Permits) -> Self {
        Held {
            permits: Mutex::new(Some(permits)),
            share: Arc::clone(&ctx.share),
            limit: Arc::clone(&ctx.shared.limit),
        }
    }

    /// Hand the permits back; `true` if this call did (the caller must then
    /// [`reacquire`](Held::reacquire) before it sends).
    pub(crate) fn release(&self) -> bool {
        self.permits.lock().take().is_some()
    }

    /// Take permits again (this loop's share first, then the client's limit, as the loop
    /// does); `false` if the limit was closed.
    pub(crate) async fn reacquire(&self) -> bool {
        let Ok(local) = Arc::clone(&self.share).acquire_owned().await else {
            return false;
        };
        let Ok(global) = Arc::clone(&self.limit).acquire_owned().await else {
            return false;
        };
        *self.permits.lock() = Some((local, global));
        true
    }

    /// The permits, if held.
    pub(crate) fn into_permits(self) -> Option<Permits> {
        self.permits.into_inner()
    }
}

impl fmt::Debug for Held {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Held")
            .field("held", &self.permits.lock().is_some())
            .finish_non_exhaustive()
    }
}

impl LoopCtx {
    /// Permits nobody waits for, if there are: room for one more request on this loop (its
    /// share bounds the connections of its pool) within the client's limit.
    pub(crate) fn idle_permits(&self) -> Option<Permits> {
        let local = Arc::clone(&self.share).try_acquire_owned().ok()?;
        let global = Arc::clone(&self.shared.limit).try_acquire_owned().ok()?;
        Some((local, global))
    }

    fn client(&self, settings: &Settings) -> HttpClient {
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
    async fn authenticate(
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

    fn settings_for(&self, locator: &Locator) -> Arc<Settings> {
        self.shared.settings_for(locator)
    }
}

impl Shared {
    fn settings_for(&self, locator: &Locator) -> Arc<Settings> {
        self.snapshot
            .for_path(locator.canonical().as_str())
            .unwrap_or_else(|_| Arc::new(self.snapshot.global().clone()))
    }
}

/// The deadline of a read that started at `started`.
fn deadline_of(started: Instant, settings: &Settings) -> Instant {
    instant_after(started, settings.retry.deadline.0)
}

/// Each event loop's share of the client's concurrency limit: shares that add up to the limit
/// exactly, one loop per share (never more loops than the limit). A loop's pool needs at most
/// its share of connections, so HTTP/1.1 never opens more connections than the limit.
fn shares(concurrency: usize, io_threads: usize) -> Vec<usize> {
    let concurrency = concurrency.max(1);
    let loops = io_threads.clamp(1, concurrency);
    (0..loops)
        .map(|i| concurrency / loops + usize::from(i < concurrency % loops))
        .collect()
}

/// The HTTP engine: event loops, their shared limit, and the credential workers in front.
pub(crate) struct Remote {
    queues: Arc<Queues>,
    threads: Vec<JoinHandle<()>>,
    shared: Arc<Shared>,
}

impl Remote {
    pub(crate) fn start(
        snapshot: &Snapshot,
        callbacks: Callbacks,
        credentials: CredentialCache,
    ) -> Result<Remote, Error> {
        let global = snapshot.global();
        let shares = shares(global.concurrency, global.io_threads);
        let loops = shares.len();
        let queues = Arc::new(Queues {
            senders: RwLock::new(Vec::new()),
            load: (0..loops).map(|_| AtomicUsize::new(0)).collect(),
        });
        let workers = CredentialWorkers::new(global.credential_workers, credentials);
        let shared = Arc::new(Shared {
            snapshot: snapshot.clone(),
            limit: Arc::new(Semaphore::new(global.concurrency.max(1))),
            stats: RemoteStats::default(),
            tls: Arc::new(TlsConfig::new(&global.http)?),
            dns: Arc::new(DnsCache::new(global.http.dns_ttl.0)),
            callbacks,
            workers,
            locations: Mutex::new(Locations::default()),
            location_flights: tokio::sync::Notify::new(),
            reprice: global.planner.trade == karu_config::Trade::Priced,
            endpoints: Endpoints::new(
                global.concurrency.max(1),
                global.adaptive_concurrency,
                Instant::now(),
            ),
        });
        let mut threads = Vec::new();
        let mut senders = Vec::new();
        for (i, share) in shares.into_iter().enumerate() {
            let (sender, receiver) = mpsc::unbounded_channel();
            let ctx = Arc::new(LoopCtx {
                shared: Arc::clone(&shared),
                index: i,
                queues: Arc::clone(&queues),
                share: Arc::new(Semaphore::new(share)),
                share_size: share,
                clients: Mutex::new(Vec::new()),
            });
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .map_err(|e| {
                    Error::new(Status::Io, format!("cannot start an event loop: {e}"))
                        .with_source(e)
                })?;
            let thread = std::thread::Builder::new()
                .name(format!("karu-io-{i}"))
                .spawn(move || runtime.block_on(run_loop(receiver, ctx)))
                .map_err(|e| {
                    Error::new(Status::Io, format!("cannot start an event loop: {e}"))
                        .with_source(e)
                })?;
            senders.push(sender);
            threads.push(thread);
        }
        *queues.senders.write() = senders;
        Ok(Remote {
            queues,
            threads,
            shared,
        })
    }

    /// Queue a transfer on an event loop: at once when its backend needs no credential or
    /// its credential is cached; else it first waits (without a concurrency permit) for the
    /// lookup that brings its credential, under the read's deadline.
    pub(crate) fn submit(&self, mut transfer: Transfer) {
        let shared = &self.shared;
        let authority =
            match Authority::for_locator(&transfer.locator, &shared.snapshot, &shared.callbacks) {
                Ok(None) => return self.queues.push_transfer(transfer),
                Ok(Some(authority)) => authority,
                Err(e) => return transfer.fail(&e),
            };
        let began = Instant::now();
        let deadline = deadline_of(began, &shared.settings_for(&transfer.locator));
        match shared.workers.begin(&authority, true, deadline) {
            Pending::Ready(credential) => {
                transfer.auth = Some(Box::new((authority, credential)));
                self.queues.push_transfer(transfer);
            }
            pending => {
                let waiting = Waiting {
                    transfer,
                    authority,
                    pending,
                    began,
                    deadline,
                };
                if let Err(Job::Credential(w)) =
                    self.queues.push(Job::Credential(Box::new(waiting)))
                {
                    w.transfer
                        .fail(&Error::internal("the event loops have stopped"));
                }
            }
        }
    }

    /// Run `f` on a loop (under the concurrency limit); its result arrives in the returned
    /// [`Reply`], woken from the loop (a blocking caller waits with [`Reply::wait`]). Used for
    /// size probes and `read_ends`, which are not batch reads. Dropping the reply cancels the
    /// work: the loop is woken and drops `f`'s future (its requests with it), or never starts
    /// it.
    fn spawn<T, F, Fut>(&self, f: F) -> Reply<T>
    where
        T: Send + 'static,
        F: FnOnce(Arc<LoopCtx>) -> Fut + Send + 'static,
        Fut: Future<Output = Result<T, Error>> + Send + 'static,
    {
        let (mut tx, reply) = reply::channel();
        let job = Job::Task(Box::new(move |ctx| {
            Box::pin(async move {
                let work = catch_panic(f(ctx));
                let result = tokio::select! {
                    biased;
                    () = tx.closed() => return,
                    result = work => result.unwrap_or_else(|()| {
                        Err(Error::internal(
                            "a panic (in a backend hook or in Karu) ended this request",
                        ))
                    }),
                };
                tx.send(result);
            })
        }));
        if self.queues.push(job).is_err() {
            return Reply::ready(Err(Error::internal("the event loops have stopped")));
        }
        reply
    }

    /// The priced planner's price of a gap in `locator`'s object now, if the client has
    /// measured its endpoint enough (see [`endpoint::Meter`] and [`Endpoints::price`]).
    pub(crate) fn price(&self, locator: &Locator) -> Option<u64> {
        self.shared
            .endpoints
            .price(locator.canonical().as_str(), Instant::now())
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
    pub(crate) fn stat(&self, locator: &Locator) -> Reply<(u64, Option<String>)> {
        let locator = locator.whole();
        self.spawn(move |ctx| async move {
            let settings = ctx.settings_for(&locator);
            let started = Instant::now();
            let auth = ctx.authenticate(&locator, &settings, started).await?;
            let mut byte = [0u8; 1];
            let fetched = Fetch {
                locator: &locator,
                range: RangeSpec::Closed { first: 0, last: 0 },
                if_match: None,
                settings: &settings,
                cancel: None,
                auth,
                started,
                pins: None,
                held: task_permits(),
            }
            .run(&ctx, &mut Scatter::one(Dest::Slice(&mut byte)))
            .await?;
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
    ) -> Reply<RemoteEnds> {
        let locator = locator.clone();
        self.spawn(
            move |ctx| async move { ends::read_ends(&ctx, &locator, head_len, tail_len).await },
        )
    }
}

impl Drop for Remote {
    fn drop(&mut self) {
        // Closing the queues lets each loop finish its queue and running tasks, then exit.
        self.queues.senders.write().clear();
        let me = std::thread::current().id();
        for t in self.threads.drain(..) {
            if t.thread().id() != me {
                let _ = t.join();
            }
        }
    }
}

impl fmt::Debug for Remote {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Remote")
            .field("loops", &self.threads.len())
            .field("stats", &self.stats())
            .finish_non_exhaustive()
    }
}

async fn run_loop(mut receiver: mpsc::UnboundedReceiver<Job>, ctx: Arc<LoopCtx>) {
    // Every task the loop spawns (its crew's members, and transfers waiting for a credential)
    // holds a clone of `running`; once the queue is closed, the loop finishes when the last of
    // them is dropped. (A `JoinSet` did this with an allocation, a lock and a list entry per
    // task.)
    let (running, mut finished) = mpsc::channel::<()>(1);
    let crew = Arc::new(Crew::new(ctx.share_size));
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
                // Waiting for a credential holds no permit, nor a member of the crew.
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
        // This loop's share first, then the client-wide limit.
        let permits = match Arc::clone(&ctx.share).acquire_owned().await {
            Ok(local) => match Arc::clone(&ctx.shared.limit).acquire_owned().await {
                Ok(global) => Some((local, global)),
                Err(_) => None,
            },
            Err(_) => None,
        };
        let Some(permits) = permits else {
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
        // The job's permits, which a waiting follower hands back (see `Held`).
        let held = Arc::new(Held::new(&ctx, permits));
        if crew.hand((job, held, load)) == Handed::NeedsMember {
            let member = Arc::clone(&crew).serve(running.clone(), {
                let ctx = Arc::clone(&ctx);
                move |(job, held, load)| run_job(job, held, load, Arc::clone(&ctx))
            });
            // Boxed: a member's future holds a job's (~7.5 KiB), and tokio moves an unboxed
            // future by value several times as it spawns it.
            tokio::spawn(Box::pin(member));
        }
    }
    crew.close();
    drop(running);
    let _ = finished.recv().await;
}

/// Run one job under its permits (the task-local [`task_permits`] its fetches hand back while
/// they wait); the permits and the job's place in the loop's load are given back when it ends.
async fn run_job(job: Job, held: Arc<Held>, load: Load, ctx: Arc<LoopCtx>) {
    let _load = load;
    TASK_PERMITS
        .scope(held, async move {
            match job {
                Job::Transfer(t) => run_transfer(*t, ctx).await,
                Job::Task(f) => f(ctx).await,
                Job::Credential(w) => w.run(&ctx).await,
            }
        })
        .await;
}

/// Price a merged transfer's gaps again as it starts, with what the client has measured for
/// its endpoint by now, and keep the first piece it comes apart into; the other pieces queue
/// again, as transfers of their own.
///
/// The plan was priced with the measurements of its submission, and the first batch of a
/// client, planned before anything was measured, has only the guards: on a slow link they
/// join 4 KiB reads up to 1 MiB apart (11.7× the bytes the reads asked for). The endpoint is
/// measured within the first round trips of that batch, and its transfers still waiting for
/// a permit then fetch only the gaps worth fetching. Cutting only removes gaps, so every
/// piece stays within the four guards, and no read's bytes or destination change.
fn reprice(ctx: &LoopCtx, mut transfer: Box<Transfer>) -> Box<Transfer> {
    let canonical = transfer.locator.canonical().as_str();
    let Some(price) = ctx.shared.endpoints.price(canonical, Instant::now()) else {
        return transfer;
    };
    let parts = transfer.parts.iter().map(|p| (p.offset_in_span, p.length));
    let cuts = crate::plan::price::cuts(parts, price);
    if cuts.is_empty() {
        return transfer;
    }
    let planned = transfer.length;
    let rest = transfer.split_off(&cuts);
    let kept = transfer.length + rest.iter().map(|t| t.length).sum::<u64>();
    transfer.batch.came_apart(rest.len(), planned - kept);
    for piece in rest {
        ctx.queues.push_transfer(piece);
    }
    transfer
}

/// Run one remote transfer and complete each of its parts.
///
/// The transfer is active (its batch's release and scope wait for it) exactly while `active`
/// lives; destinations are reachable only through a borrow of it. A panic in a backend hook
/// (`prepare`, `correction`, `transformed`) is caught here, so every part still gets exactly
/// one completion ([`Status::Internal`]) before the transfer ends.
async fn run_transfer(mut transfer: Transfer, ctx: Arc<LoopCtx>) {
    let batch = Arc::clone(&transfer.batch);
    let Some(active) = batch.begin() else {
        transfer.cancel();
        return;
    };
    let settings = ctx.settings_for(&transfer.locator);
    let locator = transfer.locator.clone();
    let if_match = transfer.if_match.clone();
    // The deadline counts from the start of the credential lookup, if there was one.
    let now = Instant::now();
    let started = now.checked_sub(transfer.credential_wait).unwrap_or(now);
    let fetch = Fetch {
        locator: &locator,
        range: RangeSpec::Closed {
            first: transfer.start,
            last: transfer.start + (transfer.length - 1),
        },
        if_match: if_match.as_deref(),
        settings: &settings,
        cancel: Some(&batch),
        auth: transfer.auth.take().map(|auth| *auth),
        started,
        pins: None,
        held: task_permits(),
    };
    let mut meter = None;
    let result = {
        // Every part's bytes land straight in its destination, scattered by offset for a
        // merged transfer (overlaps copied to each part that asked for them). Karu-owned
        // destinations grow with what the response delivers, never to the length asked.
        let mut dests = SmallVec::with_capacity(transfer.parts.len());
        let mut unopened = None;
        for part in transfer.parts.iter_mut() {
            match part.sink.open(&active, part.length) {
                Ok(open) => dests.push((part.offset_in_span, Dest::new(open, part.length))),
                Err(e) => {
                    unopened = Some(e);
                    break;
                }
            }
        }
        match unopened {
            Some(e) => Err(e),
            None => {
                let mut scatter = Scatter::new(transfer.length, dests);
                let mut landing = Metered::new(&mut scatter);
                let part_size = settings.http.part_size.0;
                let outcome =
                    catch_panic(pieces::fetch(&ctx, fetch, &mut landing, part_size)).await;
                meter = Some(landing.meter);
                match outcome {
                    Ok(fetched) => match scatter.failure() {
                        Some(e) => Err(e),
                        None => fetched,
                    },
                    Err(()) => Err(Error::internal(format!(
                        "a panic (in the {} backend's hooks or in Karu) ended this transfer",
                        locator.backend().name()
                    ))),
                }
            }
        }
    };
    let mut completions = complete_parts(&mut transfer, result);
    if let Some(meter) = &meter {
        batch.carried_by(&mut completions, meter);
    }
    active.complete(completions);
}

/// Turn a fetch result into one completion per part (the bytes are already in place).
fn complete_parts(transfer: &mut Transfer, result: Result<Fetched, Error>) -> Vec<Completion> {
    let parts = std::mem::take(&mut transfer.parts);
    let first = transfer.start;
    match result {
        Err(error) => parts
            .into_iter()
            .map(|p| p.into_completion(Err(error.clone()), 0))
            .collect(),
        Ok(fetched) => parts
            .into_iter()
            .map(|part| {
                let start = part.offset_in_span;
                let end = start + part.length;
                let available = fetched.available;
                let have = available.saturating_sub(start).min(part.length);
                if end <= available {
                    let length = part.length;
                    part.into_completion(Ok(()), length)
                } else if fetched.ends_early {
                    let offset = first + start;
                    let error = past_the_end(fetched.total, offset, part.length, have);
                    part.into_completion(Err(error), have)
                } else {
                    let error = Error::internal("a response delivered fewer bytes than proven");
                    part.into_completion(Err(error), 0)
                }
            })
            .collect(),
    }
}

/// The range error of a part that reaches past the object's end, saying where the object
/// really ends: its stated size, or (a 416 that stated none) no later than the first byte
/// nothing was delivered for.
fn past_the_end(size: Option<u64>, offset: u64, length: u64, have: u64) -> Error {
    let end = match size {
        Some(size) => format!("the object is {size} bytes long"),
        None => format!("the server has no bytes at {}", offset + have),
    };
    Error::new(
        Status::RangeNotSatisfiable,
        format!("{end}: {have} of the {length} bytes requested at offset {offset} exist"),
    )
    .with_evidence(Evidence::EndOfObject {
        offset,
        requested: length,
        received: have,
        size,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::batch::read::Sink;
    use crate::batch::{Batch, BatchShared, BatchStats};
    use crate::sdk::{Backend, CanonicalPath, PrepareContext, PreparedRequest, Registry, Resolved};
    use crate::transfer::Part;

    /// A remote object at a port nothing listens on (the test backends never send).
    fn nowhere(name: &str) -> Resolved {
        let canonical = format!("http://127.0.0.1:9/{name}");
        Resolved::remote(CanonicalPath::new(canonical), None, String::new())
    }

    /// A remote backend whose `prepare` always panics (nothing is ever sent).
    #[derive(Debug)]
    struct PanicsInPrepare;

    impl Backend for PanicsInPrepare {
        fn name(&self) -> &str {
            "panics"
        }

        fn resolve(&self, _address: &str) -> Result<Resolved, Error> {
            Ok(nowhere("never"))
        }

        fn prepare(&self, _ctx: &PrepareContext<'_>) -> Result<PreparedRequest, Error> {
            panic!("prepare panics")
        }
    }

    /// A remote backend that records the range of every request it is asked to prepare, and
    /// refuses to prepare it (nothing is ever sent).
    #[derive(Debug, Default)]
    struct RecordsRanges {
        ranges: Mutex<Vec<RangeSpec>>,
    }

    impl Backend for RecordsRanges {
        fn name(&self) -> &str {
            "records"
        }

        fn resolve(&self, _address: &str) -> Result<Resolved, Error> {
            Ok(nowhere("recorded"))
        }

        fn prepare(&self, ctx: &PrepareContext<'_>) -> Result<PreparedRequest, Error> {
            self.ranges.lock().push(ctx.range);
            Err(Error::new(Status::Unsupported, "recorded, not sent"))
        }
    }

    /// A [`RecordsRanges`] backend, an object of it, and loops of a client with the defaults.
    fn records() -> (Arc<RecordsRanges>, Locator, Remote) {
        let backend = Arc::new(RecordsRanges::default());
        let mut registry = Registry::builder();
        registry.provider(backend.clone()).scheme("records");
        let locator = registry.build().unwrap().resolve("records://x").unwrap();
        let remote = Remote::start(
            &Snapshot::defaults(),
            Callbacks::default(),
            CredentialCache::new(),
        )
        .expect("the loops start");
        (backend, locator, remote)
    }

    /// What [`run_merged`] saw.
    struct Merged {
        /// The ranges requested, as (first, last) in offset order.
        ranges: Vec<(u64, u64)>,
        /// The price the endpoint had.
        price: Option<u64>,
        stats: BatchStats,
        /// The parts' statuses, by index.
        statuses: Vec<Status>,
    }

    /// Submit one transfer of 4 KiB parts at `offsets` (merged, as the guards plan them) to
    /// a client whose endpoint measured `measured` (an exchange as [`Endpoints::record`]
    /// takes it).
    fn run_merged(offsets: &[u64], measured: Option<([Duration; 3], u64)>) -> Merged {
        let (backend, locator, remote) = records();
        if let Some((at, bytes)) = measured {
            remote
                .shared
                .endpoints
                .record(locator.canonical().as_str(), at, bytes);
        }
        let price = remote.price(&locator);
        let n = offsets.len();
        let shared = BatchShared::new((0..n as u64).collect(), false);
        let start = offsets[0];
        remote.submit(Transfer {
            locator: locator.clone(),
            start,
            length: offsets[n - 1] + 4096 - start,
            if_match: None,
            parts: offsets
                .iter()
                .enumerate()
                .map(|(i, &offset)| Part {
                    tag: i as u64,
                    index: i,
                    offset_in_span: offset - start,
                    length: 4096,
                    sink: Sink::Allocate,
                })
                .collect(),
            batch: Arc::clone(&shared),
            auth: None,
            credential_wait: Duration::ZERO,
        });
        let batch = Batch {
            shared,
            stats: BatchStats {
                reads: n,
                transfers: 1,
                requested_bytes: 4096 * n as u64,
                planned_bytes: offsets[n - 1] + 4096 - start,
                ..BatchStats::default()
            },
            _engine: Arc::new(()),
        };
        let statuses = batch.wait().iter().map(Completion::status).collect();
        let stats = batch.stats();
        drop(batch);
        let mut ranges: Vec<(u64, u64)> = backend
            .ranges
            .lock()
            .iter()
            .map(|r| match *r {
                RangeSpec::Closed { first, last } => (first, last),
                other => panic!("an unexpected range {other:?}"),
            })
            .collect();
        ranges.sort_unstable();
        Merged {
            ranges,
            price,
            stats,
            statuses,
        }
    }

    const MS: Duration = Duration::from_millis(1);

    /// A 20 ms round trip and 64 MiB received over one second: a measured endpoint.
    fn slow_link() -> Option<([Duration; 3], u64)> {
        Some(([MS, 21 * MS, 1021 * MS], 64 << 20))
    }

    #[test]
    fn the_future_of_a_read_in_flight_stays_small() {
        // Every read in flight is polled from the future of the crew member that runs it,
        // and the loop keeps one such member for each. The rare paths (a read split into
        // parts, a redirect, an error body, a wait for another request's redirect) are boxed,
        // so that they take no room in every other read's future: this one took 7,440 bytes
        // before they were, 6,448 after.
        let (_, locator, remote) = records();
        let size = remote
            .spawn(move |ctx| async move {
                let settings = ctx.settings_for(&locator);
                let mut buffer = [0u8; 16];
                let mut landing = Scatter::one(Dest::Slice(&mut buffer));
                let fetch = Fetch {
                    locator: &locator,
                    range: RangeSpec::Closed { first: 0, last: 15 },
                    if_match: None,
                    settings: &settings,
                    cancel: None,
                    auth: None,
                    started: Instant::now(),
                    pins: None,
                    held: None,
                };
                let future = pieces::fetch(&ctx, fetch, &mut landing, settings.http.part_size.0);
                Ok(std::mem::size_of_val(&future))
            })
            .wait()
            .expect("measured on a loop");
        assert!(size <= 7 * 1024, "a read's future takes {size} bytes");
    }

    #[test]
    fn a_merged_transfer_comes_apart_at_gaps_its_measured_endpoint_prices_above_a_request() {
        // Measured: a gap is worth fetching up to the price, here about 20 KB.
        let price = run_merged(&[0, 4096], slow_link()).price.expect("measured");
        assert!((10_000..100_000).contains(&price), "{price}");
        // Parts 4 KiB long: a small gap, a large one, a small one, a large one.
        let small = price / 4;
        let large = price * 4;
        let mut offsets = vec![1000];
        for gap in [small, large, small, large] {
            let last = offsets[offsets.len() - 1];
            offsets.push(last + 4096 + gap);
        }
        let Merged {
            ranges,
            price: again,
            stats,
            statuses,
        } = run_merged(&offsets, slow_link());
        assert_eq!(again, Some(price));
        let o = &offsets;
        assert_eq!(
            ranges,
            vec![
                (o[0], o[1] + 4095),
                (o[2], o[3] + 4095),
                (o[4], o[4] + 4095)
            ],
            "each piece asked once, exactly its parts' hull"
        );
        assert_eq!(statuses, vec![Status::Unsupported; 5], "every read once");
        assert_eq!(stats.transfers, 3);
        assert_eq!(stats.planned_bytes, 3 * 4096 + 2 * (4096 + small));

        // Not measured (the first batch of a client): the guards' plan stands.
        let whole = run_merged(&offsets, None);
        assert_eq!(whole.price, None);
        assert_eq!(whole.ranges, vec![(o[0], o[4] + 4095)]);
        assert_eq!(whole.stats.transfers, 1);
        assert_eq!(whole.statuses, vec![Status::Unsupported; 5]);
    }

    #[test]
    fn loop_shares_add_up_to_the_limit() {
        assert_eq!(shares(64, 4), [16, 16, 16, 16]);
        assert_eq!(shares(10, 4), [3, 3, 2, 2]);
        assert_eq!(shares(2, 4), [1, 1], "never a loop without a share");
        assert_eq!(shares(0, 0), [1]);
        for concurrency in 1..200 {
            for threads in 1..20 {
                let s = shares(concurrency, threads);
                assert_eq!(s.iter().sum::<usize>(), concurrency);
                assert_eq!(s.len(), threads.min(concurrency));
                assert!(s.iter().all(|&n| n >= 1));
            }
        }
    }

    #[test]
    fn a_panicking_transfer_ends_completes_and_leaves_no_load_on_its_loop() {
        let mut registry = Registry::builder();
        registry
            .provider(Arc::new(PanicsInPrepare))
            .scheme("panics");
        let locator = registry.build().unwrap().resolve("panics://x").unwrap();
        let snapshot = Snapshot::defaults();
        let remote = Remote::start(&snapshot, Callbacks::default(), CredentialCache::new())
            .expect("the loops start");
        const N: usize = 16;
        let shared = BatchShared::new((0..N as u64).collect(), false);
        for i in 0..N {
            remote.submit(Transfer {
                locator: locator.clone(),
                start: i as u64 * 10,
                length: 5,
                if_match: None,
                parts: smallvec::smallvec![Part {
                    tag: i as u64,
                    index: i,
                    offset_in_span: 0,
                    length: 5,
                    sink: Sink::Allocate,
                }],
                batch: Arc::clone(&shared),
                auth: None,
                credential_wait: Duration::ZERO,
            });
        }
        // Not dropped on a failed assertion: a transfer left active would hang the drop.
        let batch = std::mem::ManuallyDrop::new(Batch {
            shared,
            stats: BatchStats::default(),
            _engine: Arc::new(()),
        });
        let done = batch.wait();
        assert_eq!(done.len(), N);
        assert!(
            done.iter().all(|c| c.status() == Status::Internal),
            "{done:?}"
        );
        // Each task uncounts its job when it ends, also when it unwound.
        let give_up = Instant::now() + Duration::from_secs(20);
        while remote
            .queues
            .load
            .iter()
            .any(|l| l.load(Ordering::Relaxed) > 0)
        {
            assert!(Instant::now() < give_up, "load stayed raised");
            std::thread::sleep(Duration::from_millis(1));
        }
        assert_eq!(batch.shared.state_active(), 0, "no transfer stayed active");
        drop(std::mem::ManuallyDrop::into_inner(batch));
    }
}
