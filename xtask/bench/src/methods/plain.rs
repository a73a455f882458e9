//! A plain HTTP/1.1 client (hyper's connection API, keep-alive, `TCP_NODELAY`): one request
//! per piece, no merging, `in_flight` connections each sending its next request when the
//! previous response has arrived. With one connection it is the naive sequential floor; with
//! Karu's concurrency limit, the reference for Karu's own overhead. For `ends` it reads each
//! object's tail by absolute range (it knows the sizes).

use std::net::SocketAddr;
use std::ops::Range;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use bytes::Bytes;
use http::header::{HOST, RANGE};
use http::{Request, StatusCode};
use http_body_util::{BodyExt, Empty};
use hyper::client::conn::http1::{SendRequest, handshake};
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;

use super::{Context, Outcome, Session};

type Sender = SendRequest<Empty<Bytes>>;

pub(super) struct PlainSession<'a> {
    ctx: Context<'a>,
    in_flight: usize,
    /// Open connections, kept between batches (none before the cold one).
    senders: Vec<Sender>,
}

impl<'a> PlainSession<'a> {
    pub(super) fn open(ctx: Context<'a>, in_flight: usize) -> Self {
        PlainSession {
            ctx,
            in_flight: in_flight.max(1),
            senders: Vec::new(),
        }
    }
}

/// One GET: the request for one piece.
#[derive(Debug, Clone)]
struct Get {
    path: String,
    range: Range<u64>,
}

impl Session for PlainSession<'_> {
    fn run(&mut self) -> Result<Outcome, String> {
        let workload = self.ctx.workload;
        let gets: Arc<Vec<Get>> = Arc::new(
            workload
                .pieces
                .iter()
                .map(|p| Get {
                    path: workload.objects[p.object].path.clone(),
                    range: p.range(),
                })
                .collect(),
        );
        let addr = self.ctx.server.addr();
        let workers = self.in_flight.min(gets.len()).max(1);
        let mut senders = std::mem::take(&mut self.senders);
        let (wall, results, senders) = self.ctx.runtime.block_on(async {
            let next = Arc::new(AtomicUsize::new(0));
            let started = Instant::now();
            let mut tasks = Vec::with_capacity(workers);
            for _ in 0..workers {
                let sender = senders.pop();
                let gets = Arc::clone(&gets);
                let next = Arc::clone(&next);
                tasks.push(tokio::spawn(worker(addr, sender, gets, next)));
            }
            let mut results = Vec::with_capacity(gets.len());
            let mut kept = Vec::with_capacity(workers);
            for task in tasks {
                match task.await {
                    Ok((sender, done)) => {
                        results.extend(done);
                        kept.extend(sender);
                    }
                    Err(e) => return Err(format!("a plain client task failed: {e}")),
                }
            }
            Ok((started.elapsed(), results, kept))
        })?;
        self.senders = senders;
        let mut pieces: Vec<Result<Bytes, String>> = vec![Err("not read".into()); gets.len()];
        for (i, result) in results {
            pieces[i] = result;
        }
        Ok(Outcome {
            done: Vec::new(),
            wall,
            pieces,
            karu: None,
            child: None,
        })
    }
}

/// Sends the next unclaimed GET on one connection until none is left; returns the
/// connection (if still open) and the results by piece index.
async fn worker(
    addr: SocketAddr,
    mut sender: Option<Sender>,
    gets: Arc<Vec<Get>>,
    next: Arc<AtomicUsize>,
) -> (Option<Sender>, Vec<(usize, Result<Bytes, String>)>) {
    let mut done = Vec::new();
    let authority = addr.to_string();
    loop {
        let i = next.fetch_add(1, Ordering::Relaxed);
        let Some(get) = gets.get(i) else { break };
        let result = match ready(addr, &mut sender).await {
            Ok(s) => fetch(s, &authority, get).await,
            Err(e) => Err(e),
        };
        if result.is_err() {
            sender = None;
        }
        done.push((i, result));
    }
    (sender, done)
}

/// A connection ready for a request: the kept one, or a new one if it closed.
async fn ready(addr: SocketAddr, sender: &mut Option<Sender>) -> Result<&mut Sender, String> {
    if let Some(s) = sender.as_mut()
        && s.ready().await.is_err()
    {
        *sender = None;
    }
    if sender.is_none() {
        *sender = Some(connect(addr).await?);
    }
    sender.as_mut().ok_or_else(|| "no connection".to_string())
}

async fn connect(addr: SocketAddr) -> Result<Sender, String> {
    let stream = TcpStream::connect(addr)
        .await
        .map_err(|e| format!("connect {addr}: {e}"))?;
    stream
        .set_nodelay(true)
        .map_err(|e| format!("TCP_NODELAY: {e}"))?;
    let (sender, connection) = handshake(TokioIo::new(stream))
        .await
        .map_err(|e| format!("handshake: {e}"))?;
    tokio::spawn(async move {
        let _ = connection.await;
    });
    Ok(sender)
}

async fn fetch(sender: &mut Sender, authority: &str, get: &Get) -> Result<Bytes, String> {
    let request = Request::get(get.path.as_str())
        .header(HOST, authority)
        .header(
            RANGE,
            format!("bytes={}-{}", get.range.start, get.range.end - 1),
        )
        .body(Empty::<Bytes>::new())
        .map_err(|e| e.to_string())?;
    let response = sender
        .send_request(request)
        .await
        .map_err(|e| format!("request: {e}"))?;
    let status = response.status();
    let body = response
        .into_body()
        .collect()
        .await
        .map_err(|e| format!("body: {e}"))?
        .to_bytes();
    if status != StatusCode::PARTIAL_CONTENT {
        return Err(format!("status {status}"));
    }
    Ok(body)
}
