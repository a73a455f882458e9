//! The methods a workload is measured with. Each opens a session (a new client: the cold
//! batch runs on it first) and runs batches on it; every run returns the bytes of every piece
//! of the workload, in order, for checking.

mod curl;
mod karu_batch;
mod object_store_http;
mod opendal_http;
mod plain;

pub(crate) use curl::version as curl_version;
pub(crate) use opendal_http::GAP as OPENDAL_GAP;
pub(crate) use opendal_http::operator as opendal_operator;

pub(crate) use karu_batch::client as karu_client;
pub(crate) use karu_batch::client_with as karu_client_with;
pub(crate) use karu_batch::results_of as karu_results;

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use karu::BatchOptions;
use karu_testkit::MockServer;

use crate::workload::Workload;

/// A way to read a workload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Method {
    /// Karu, default configuration (the batch may carry planner overrides, as `cpu` does).
    Karu,
    /// Karu with hedging off (`hedge.enabled = false`), beside the defaults in `tail`.
    KaruNoHedge,
    /// Karu, reading into the caller's buffer (`Read::borrowed` in a scope), as a tensor
    /// loader reads into storage it already holds: no destination is allocated per read.
    KaruCaller,
    /// object_store 0.14.2 `get_ranges` over its HTTP store.
    ObjectStore,
    /// object_store 0.14.2, the range of each piece on its own (`get_opts` with a range, as
    /// `get_range` does) over its HTTP store, as many at once as Karu's concurrency limit
    /// (never merging).
    ObjectStoreEach,
    /// OpenDAL 0.59.5 `Reader::fetch` over its HTTP service, merging ranges at most `gap`
    /// bytes apart (its documented 1 MiB, or 0 where a workload never merges).
    OpenDal { gap: usize },
    /// OpenDAL 0.59.5 `read_with(path).range(..)` of each piece over its HTTP service, as many
    /// at once as Karu's concurrency limit (never merging).
    OpenDalEach,
    /// A plain hyper HTTP/1.1 client with `n` connections, one request per piece, no merging.
    Plain { in_flight: usize },
    /// curl, one process per batch, every piece's range into `/dev/null`, `in_flight`
    /// transfers at once (`--parallel`): the reference a user knows (see [`curl`]).
    Curl { in_flight: usize },
}

impl Method {
    /// The label of the method's rows.
    pub(crate) fn label(&self) -> String {
        match self {
            Method::Karu => "Karu (defaults)".into(),
            Method::KaruNoHedge => "Karu, hedging off".into(),
            Method::KaruCaller => "Karu, caller buffers".into(),
            Method::ObjectStore => "object_store get_ranges".into(),
            Method::ObjectStoreEach => "object_store get_range per read".into(),
            Method::OpenDalEach => "OpenDAL read per range".into(),
            Method::OpenDal { gap } if *gap == opendal_http::GAP => "OpenDAL Reader::fetch".into(),
            Method::OpenDal { gap } => format!("OpenDAL Reader::fetch, gap {gap}"),
            Method::Plain { in_flight: 1 } => "one request per read, sequential".into(),
            Method::Plain { in_flight } => {
                format!("plain hyper, {in_flight} in flight, no merging")
            }
            Method::Curl { in_flight } => format!("{CURL} --parallel, {in_flight} in flight"),
        }
    }
}

/// How the label of curl's rows starts.
pub(crate) const CURL: &str = "curl";

/// Where the server a session reads from listens: the in-process mock of a workload, or
/// another process's (`karu-bench` under callgrind measures its client alone).
#[derive(Debug, Clone)]
pub(crate) struct Server {
    base: String,
    addr: SocketAddr,
}

impl Server {
    /// The in-process mock `server`.
    pub(crate) fn of(server: &MockServer) -> Server {
        Server {
            base: server.base_url(),
            addr: server.addr(),
        }
    }

    /// A cleartext server at `base` (`http://127.0.0.1:PORT`).
    pub(crate) fn at(base: &str) -> Result<Server, String> {
        let addr = base
            .strip_prefix("http://")
            .and_then(|rest| rest.trim_end_matches('/').parse().ok())
            .ok_or_else(|| format!("not an http://127.0.0.1:PORT address: {base:?}"))?;
        Ok(Server {
            base: base.trim_end_matches('/').to_string(),
            addr,
        })
    }

    /// `http://127.0.0.1:PORT`, or `https://...` with TLS.
    pub(crate) fn base_url(&self) -> String {
        self.base.clone()
    }

    /// The URL of a path (`path` starts with `/`).
    pub(crate) fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// The address served.
    pub(crate) fn addr(&self) -> SocketAddr {
        self.addr
    }
}

/// What a session needs: the server, the workload and the shared async runtime.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Context<'a> {
    pub(crate) server: &'a Server,
    pub(crate) workload: &'a Workload,
    pub(crate) runtime: &'a tokio::runtime::Runtime,
    /// Karu's client-wide concurrency limit: the budget of in-flight requests that the other
    /// methods are held to where they leave it to the caller.
    pub(crate) concurrency: usize,
    /// Planner overrides for Karu's batches.
    pub(crate) batch_options: BatchOptions,
}

/// The result of one batch.
#[derive(Debug)]
pub(crate) struct Outcome {
    /// From submitting the batch to its last byte.
    pub(crate) wall: Duration,
    /// Every piece of the workload, in order: its bytes, or why it failed.
    pub(crate) pieces: Vec<Result<Bytes, String>>,
    /// When each piece completed, from the batch's start, in workload order, where the
    /// method tells them apart (empty: every piece at the wall, as one call returns them all).
    pub(crate) done: Vec<Duration>,
    /// Karu's own figures, for Karu.
    pub(crate) karu: Option<KaruFigures>,
    /// A batch made by a child process (curl): its bytes went elsewhere (`pieces` is empty),
    /// and the server's log counts them instead.
    pub(crate) child: Option<ChildRun>,
}

/// A batch made by a child process, as its parent saw it end.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ChildRun {
    /// The child's CPU time, user + system (`wait4`).
    pub(crate) cpu: Duration,
    /// Why it failed, if it exited with a failure.
    pub(crate) error: Option<String>,
}

/// Karu's own account of a batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct KaruFigures {
    /// Transfers the planner made (`None` for `read_ends`, which does not report them).
    pub(crate) transfers: Option<usize>,
    /// `transport_stats()` deltas over the batch.
    pub(crate) requests: u64,
    pub(crate) body_bytes: u64,
    pub(crate) retries: u64,
    pub(crate) hedges: u64,
}

/// A client of one method; dropping it closes its connections.
pub(crate) trait Session {
    /// Runs one batch of the workload.
    fn run(&mut self) -> Result<Outcome, String>;

    /// Gets the next batch ready outside its measurement (a caller's buffers are allocated and
    /// written before the clock starts, as storage a caller keeps would be).
    fn prepare(&mut self) {}
}

/// A new client of `method` (nothing is sent until [`Session::run`]).
pub(crate) fn open<'a>(method: Method, ctx: Context<'a>) -> Result<Box<dyn Session + 'a>, String> {
    Ok(match method {
        Method::Karu => Box::new(karu_batch::KaruSession::open(ctx)?),
        Method::KaruNoHedge => Box::new(karu_batch::KaruSession::open_with(ctx, |b| {
            b.set("hedge.enabled", false)
        })?),
        Method::KaruCaller => Box::new(karu_batch::KaruCallerSession::open(ctx)?),
        Method::ObjectStore => Box::new(object_store_http::ObjectStoreSession::open(ctx, false)?),
        Method::ObjectStoreEach => {
            Box::new(object_store_http::ObjectStoreSession::open(ctx, true)?)
        }
        Method::OpenDal { gap } => Box::new(opendal_http::OpenDalSession::open(ctx, gap, false)?),
        Method::OpenDalEach => Box::new(opendal_http::OpenDalSession::open(ctx, 0, true)?),
        Method::Plain { in_flight } => Box::new(plain::PlainSession::open(ctx, in_flight)),
        Method::Curl { in_flight } => Box::new(curl::CurlSession::open(ctx, in_flight)?),
    })
}

/// Every piece of a `Reads` workload read on its own, `concurrency` at once, by `read(piece)`:
/// the pieces and when each completed, from the start, in workload order (the never-merging
/// way to use a peer's single-range API).
pub(crate) async fn each_piece<F, Fut>(
    pieces: usize,
    concurrency: usize,
    read: F,
) -> (Vec<Result<Bytes, String>>, Vec<Duration>)
where
    F: Fn(usize) -> Fut,
    Fut: Future<Output = Result<Bytes, String>> + Send + 'static,
{
    let started = std::time::Instant::now();
    let permits = Arc::new(tokio::sync::Semaphore::new(concurrency.max(1)));
    let mut tasks = tokio::task::JoinSet::new();
    for piece in 0..pieces {
        let permits = Arc::clone(&permits);
        let read = read(piece);
        tasks.spawn(async move {
            let _permit = permits.acquire_owned().await;
            let result = read.await;
            (piece, result, started.elapsed())
        });
    }
    let mut out: Vec<Result<Bytes, String>> = vec![Err("not read".to_string()); pieces];
    let mut done = vec![Duration::ZERO; pieces];
    while let Some(joined) = tasks.join_next().await {
        match joined {
            Ok((piece, result, at)) => {
                out[piece] = result;
                done[piece] = at;
            }
            Err(e) => return (vec![Err(format!("task failed: {e}")); pieces], Vec::new()),
        }
    }
    (out, done)
}

/// The `ends` workload for a peer client: each object's head and tail read together, objects
/// `concurrency / 2` at a time (two requests each); `pair(object)` makes the future reading
/// one object's head and tail. The pieces in workload order (head, tail per object).
pub(crate) async fn ends_per_object<F, Fut>(
    objects: usize,
    concurrency: usize,
    pair: F,
) -> Vec<Result<Bytes, String>>
where
    F: Fn(usize) -> Fut,
    Fut: Future<Output = (Result<Bytes, String>, Result<Bytes, String>)> + Send + 'static,
{
    let permits = Arc::new(tokio::sync::Semaphore::new((concurrency / 2).max(1)));
    let mut tasks = tokio::task::JoinSet::new();
    for object in 0..objects {
        let permits = Arc::clone(&permits);
        let read = pair(object);
        tasks.spawn(async move {
            let _permit = permits.acquire_owned().await;
            (object, read.await)
        });
    }
    let mut pieces: Vec<Result<Bytes, String>> = vec![Err("not read".to_string()); objects * 2];
    while let Some(joined) = tasks.join_next().await {
        match joined {
            Ok((object, (head, tail))) => {
                pieces[2 * object] = head;
                pieces[2 * object + 1] = tail;
            }
            Err(e) => return vec![Err(format!("task failed: {e}")); pieces.len()],
        }
    }
    pieces
}
