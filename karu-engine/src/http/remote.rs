//! The HTTP engine of a client ([`Remote`]): its event loops and the state they share, the
//! credential workers in front, and what the engine asks of it (submit a transfer, a size
//! probe, both ends of an object).

use std::fmt;
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::thread::JoinHandle;
use std::time::{Instant, SystemTime};

use karu_config::Snapshot;
use parking_lot::{Mutex, RwLock};
use tokio::sync::{Semaphore, mpsc};

use crate::credentials::workers::CredentialWorkers;
use crate::credentials::workers::Pending;
use crate::credentials::{Authority, Callbacks, CredentialCache};
use crate::http::endpoint::Endpoints;
use crate::http::ends;
use crate::http::ends::RemoteEnds;
use crate::http::fetch::Fetch;
use crate::http::landing::{Dest, Scatter};
use crate::http::locations::Locations;
use crate::http::loops::{Job, LoopCtx, Queues, Waiting, catch_panic, deadline_of, run_loop};
use crate::http::permits::task_permits;
use crate::http::stats::{RemoteStats, TransportStats};
use crate::http::token_client::HttpTokenClient;
use crate::http::transport::{DnsCache, TlsConfig};
use crate::reply::{self, Reply};
use crate::retry::RetryPolicy;
use crate::sdk::{Error, Locator, RangeSpec, Status};
use crate::transfer::Transfer;

/// State every loop shares.
pub(super) struct Shared {
    pub(super) snapshot: Snapshot,
    pub(super) stats: RemoteStats,
    pub(super) tls: Arc<TlsConfig>,
    pub(super) dns: Arc<DnsCache>,
    pub(super) callbacks: Callbacks,
    pub(super) workers: CredentialWorkers,
    /// Redirect locations backends allow reusing (never object bytes or sizes).
    pub(super) locations: Mutex<Locations>,
    /// Woken whenever a first request's flight of a reusable location ends.
    pub(super) location_flights: tokio::sync::Notify,
    /// Measurements and adaptive windows, per endpoint.
    pub(super) endpoints: Endpoints,
    /// Whether a merged transfer's gaps are priced again as it starts (`planner.trade =
    /// "priced"`); see [`reprice`](super::run::reprice).
    pub(super) reprice: bool,
}

impl Shared {
    /// The priced trade's largest gap in `locator`'s object at `now`: what the endpoint's
    /// measurements make worth a request's time ([`Endpoints::price`]), widened to what its
    /// store's price list (`planner.prices`) makes worth a request's fee. `None` until the
    /// endpoint has been measured: the guards alone plan.
    pub(super) fn price(&self, locator: &Locator, now: Instant) -> Option<u64> {
        let time = self.endpoints.price(locator.canonical().as_str(), now)?;
        let money = self
            .snapshot
            .global()
            .planner
            .prices
            .of(locator.backend().name())
            .and_then(karu_config::PriceList::break_even_gap);
        Some(crate::plan::price::worth_fetching(time, money))
    }
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

/// `future` run as a task of the current (single-threaded) runtime, to its end: what an event
/// loop's thread blocks on. A task woken on its own thread is queued there; the future a
/// runtime blocks on is woken through its driver instead (a write to its eventfd, then
/// `epoll_wait` returns): the loop's future, woken as every few requests end and give back
/// their permits, cost a pair of system calls each time. A panic goes on from here, as it
/// would have from the future itself.
async fn spawned(future: impl Future<Output = ()> + Send + 'static) {
    if let Err(error) = tokio::spawn(future).await
        && error.is_panic()
    {
        std::panic::resume_unwind(error.into_panic());
    }
}

/// What a remote stat learned of an object.
pub(crate) struct RemoteStat {
    pub(crate) size: u64,
    /// The strong ETag, when the answer had one.
    pub(crate) etag: Option<String>,
    /// The answer's `Last-Modified`, when it had a valid one.
    pub(crate) last_modified: Option<SystemTime>,
}

/// The HTTP engine: event loops, their shared limit, and the credential workers in front.
pub(crate) struct Remote {
    pub(super) queues: Arc<Queues>,
    pub(super) threads: Vec<JoinHandle<()>>,
    pub(super) shared: Arc<Shared>,
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
            shares: shares
                .iter()
                .map(|&s| Arc::new(Semaphore::new(s)))
                .collect(),
            loops: RwLock::new(Vec::new()),
        });
        let tls = Arc::new(TlsConfig::new(&global.http)?);
        let dns = Arc::new(DnsCache::new(global.http.dns_ttl.0));
        // Token exchanges go with the reads' TLS setup, DNS cache and connect timeout.
        let tokens = HttpTokenClient::new(
            Arc::clone(&tls),
            Arc::clone(&dns),
            global.http.connect_timeout.0,
            RetryPolicy::from(&global.retry),
        );
        let workers =
            CredentialWorkers::new(global.credential_workers, credentials, Arc::new(tokens));
        let shared = Arc::new(Shared {
            snapshot: snapshot.clone(),
            stats: RemoteStats::default(),
            tls,
            dns,
            callbacks,
            workers,
            locations: Mutex::new(Locations::default()),
            location_flights: tokio::sync::Notify::new(),
            reprice: global.planner.trade != karu_config::Trade::Guards,
            endpoints: Endpoints::new(
                global.concurrency.max(1),
                global.adaptive_concurrency,
                Instant::now(),
            ),
        });
        let mut threads = Vec::new();
        let mut senders = Vec::new();
        let mut handles = Vec::new();
        for (i, &share) in shares.iter().enumerate() {
            let (sender, receiver) = mpsc::unbounded_channel();
            let ctx = Arc::new(LoopCtx {
                shared: Arc::clone(&shared),
                index: i,
                queues: Arc::clone(&queues),
                share: Arc::clone(&queues.shares[i]),
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
            handles.push((runtime.handle().clone(), Arc::downgrade(&ctx)));
            let thread = std::thread::Builder::new()
                .name(format!("karu-io-{i}"))
                .spawn(move || runtime.block_on(spawned(run_loop(receiver, ctx))))
                .map_err(|e| {
                    Error::new(Status::Io, format!("cannot start an event loop: {e}"))
                        .with_source(e)
                })?;
            senders.push(sender);
            threads.push(thread);
        }
        *queues.senders.write() = senders;
        *queues.loops.write() = handles;
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
    /// measured its endpoint enough (see [`Measurements`](super::endpoint::Measurements) and
    /// [`Endpoints::price`]).
    pub(crate) fn price(&self, locator: &Locator) -> Option<u64> {
        self.shared.price(locator, Instant::now())
    }

    pub(crate) fn stats(&self) -> TransportStats {
        let s = &self.shared.stats;
        TransportStats {
            requests: s.requests.load(Ordering::Relaxed),
            body_bytes: s.body_bytes.load(Ordering::Relaxed),
            retries: s.retries.load(Ordering::Relaxed),
            hedges: s.hedges.load(Ordering::Relaxed),
            hedges_won: s.hedges_won.load(Ordering::Relaxed),
        }
    }

    /// Size, strong ETag and `Last-Modified` from a one-byte read of byte 0 (same
    /// authorisation and range path as a real read). The empty-object answer (416 `bytes */0`)
    /// means size 0.
    pub(crate) fn stat(&self, locator: &Locator) -> Reply<RemoteStat> {
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
            Ok(RemoteStat {
                size,
                etag: fetched.etag,
                last_modified: fetched.last_modified.time(),
            })
        })
    }

    /// The absolute ranges `head` and `tail` of an object together: both requests in flight at
    /// once when the backend honours suffix ranges, else the tail after the head with
    /// `If-Match` on its ETag. Both answers must agree on size and ETag. A caller's `if_match`
    /// goes out with every request.
    pub(crate) fn read_ends(
        &self,
        locator: &Locator,
        head_len: u64,
        tail_len: u64,
        if_match: Option<String>,
    ) -> Reply<RemoteEnds> {
        let locator = locator.clone();
        self.spawn(move |ctx| async move {
            ends::read_ends(&ctx, &locator, head_len, tail_len, if_match.as_deref()).await
        })
    }
}

impl Drop for Remote {
    fn drop(&mut self) {
        // Closing the queues lets each loop finish its queue and running tasks, then exit.
        self.queues.senders.write().clear();
        self.queues.loops.write().clear();
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

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::batch::read::{Completion, Sink};
    use crate::batch::{Batch, BatchShared, BatchStats};
    use crate::http::pieces;
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
        // Every read in flight is polled from the future of the pool task that runs it,
        // and the loop keeps one such task for each. The rare paths (a read split into
        // parts, a redirect, an error body, a wait for another request's redirect, a race of
        // duplicates) are boxed, so that they take no room in every other read's future. The
        // bound leaves room for waiting for the head beside the timer of a duplicate (hedging,
        // on by default) in the debug build, and no more.
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
                let future = pieces::fetch(&ctx, fetch, &mut landing, &settings, None);
                Ok(std::mem::size_of_val(&future))
            })
            .wait()
            .expect("measured on a loop");
        assert!(size <= 8 * 1024 + 256, "a read's future takes {size} bytes");
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
        assert_eq!(batch.active_transfers(), 0, "no transfer stayed active");
        drop(std::mem::ManuallyDrop::into_inner(batch));
    }
}
