//! The methods a workload is measured with. Each opens a session (a new client: the cold
//! batch runs on it first) and runs batches on it; every run returns the bytes of every piece
//! of the workload, in order, for checking.

mod karu_batch;
mod object_store_http;
mod opendal_http;
mod plain;

pub(crate) use opendal_http::GAP as OPENDAL_GAP;

pub(crate) use karu_batch::client as karu_client;
pub(crate) use karu_batch::client_with as karu_client_with;
pub(crate) use karu_batch::results_of as karu_results;

use std::future::Future;
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
    /// Karu, reading into the caller's buffer (`Read::borrowed` in a scope), as a tensor
    /// loader reads into storage it already holds: no destination is allocated per read.
    KaruCaller,
    /// object_store 0.14.2 `get_ranges` over its HTTP store.
    ObjectStore,
    /// OpenDAL 0.59.5 `Reader::fetch` over its HTTP service, merging ranges at most `gap`
    /// bytes apart (its documented 1 MiB, or 0 where a workload never merges).
    OpenDal { gap: usize },
    /// A plain hyper HTTP/1.1 client with `n` connections, one request per piece, no merging.
    Plain { in_flight: usize },
}

impl Method {
    /// The label of the method's rows.
    pub(crate) fn label(&self) -> String {
        match self {
            Method::Karu => "Karu (defaults)".into(),
            Method::KaruCaller => "Karu, caller buffers".into(),
            Method::ObjectStore => "object_store get_ranges".into(),
            Method::OpenDal { gap } if *gap == opendal_http::GAP => "OpenDAL Reader::fetch".into(),
            Method::OpenDal { gap } => format!("OpenDAL Reader::fetch, gap {gap}"),
            Method::Plain { in_flight: 1 } => "one request per read, sequential".into(),
            Method::Plain { in_flight } => {
                format!("plain hyper, {in_flight} in flight, no merging")
            }
        }
    }
}

/// What a session needs: the server, the workload and the shared async runtime.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Context<'a> {
    pub(crate) server: &'a MockServer,
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
    /// Karu's own figures, for Karu.
    pub(crate) karu: Option<KaruFigures>,
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
        Method::KaruCaller => Box::new(karu_batch::KaruCallerSession::open(ctx)?),
        Method::ObjectStore => Box::new(object_store_http::ObjectStoreSession::open(ctx)?),
        Method::OpenDal { gap } => Box::new(opendal_http::OpenDalSession::open(ctx, gap)?),
        Method::Plain { in_flight } => Box::new(plain::PlainSession::open(ctx, in_flight)),
    })
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
