//! OpenDAL 0.59.5 over its HTTP service: one `Reader` per object and `Reader::fetch` of all its
//! ranges. `fetch` merges ranges at most `gap` apart (no cap on span or over-fetch), splits the
//! merged ranges into `chunk`-sized reads and runs up to `concurrent` of them at once.
//!
//! The options are those OpenDAL's documentation of `reader_with` gives for range reads: `gap`
//! 1 MiB (also its default; 0 in `cpu`, which never merges) and `chunk` 4 MiB; `concurrent` is Karu's concurrency limit (the
//! documentation's example says 8; the limit is the budget every method here is held to). As
//! for object_store, where a workload has many objects the caller decides how many are read at
//! once: as many as keep at most Karu's concurrency limit of requests in flight. `ends` reads
//! each object's head (a bounded range) and tail (a suffix range) concurrently. The per-read
//! mode (`each`) reads every piece with `read_with(path).range(..)` instead, as many at once as
//! Karu's concurrency limit: never merging, each piece's completion its own.

use std::ops::Range;
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use opendal::services::Http;
use opendal::{BytesRange, HttpTransporter, OperationContext, Operator};
use opendal_http_transport_reqwest::ReqwestTransport;
use tokio::sync::Semaphore;
use tokio::task::JoinSet;

use super::{Context, Outcome, Session};
use crate::workload::Kind;

/// `gap` of `Reader::fetch`: ranges at most this far apart are fetched as one.
pub(crate) const GAP: usize = 1 << 20;
/// `chunk`: merged ranges are split into reads of at most this size.
pub(crate) const CHUNK: usize = 4 << 20;

pub(super) struct OpenDalSession<'a> {
    ctx: Context<'a>,
    operator: Operator,
    gap: usize,
    /// A read per piece instead of `Reader::fetch` per object.
    each: bool,
}

/// OpenDAL's HTTP operator for `base_url`, with a reqwest client of its own, as each other
/// method's client has: the process-wide one would carry its connections from one operator to
/// the next, and a new operator's first batch would not be cold. In cleartext the client is the
/// default transport's (`reqwest::Client::new()`); over TLS it trusts the mock's CA (and takes
/// HTTP/2 where ALPN offers it).
pub(crate) fn operator(base_url: &str) -> Result<Operator, String> {
    // The registry of services (and the process-wide transport, not used here); idempotent.
    opendal::install_default();
    let client = match &crate::transport::current().tls {
        None => reqwest::Client::new(),
        Some((pem, _)) => {
            let ca = reqwest::Certificate::from_pem(pem.as_bytes())
                .map_err(|e| format!("cannot read the mock's CA: {e}"))?;
            reqwest::Client::builder()
                .tls_certs_merge([ca])
                .build()
                .map_err(|e| format!("cannot build a reqwest client: {e}"))?
        }
    };
    let transport = HttpTransporter::new(ReqwestTransport::new(client));
    Ok(Operator::new(Http::default().endpoint(base_url))
        .map_err(|e| format!("cannot build OpenDAL's HTTP operator: {e}"))?
        .with_context(OperationContext::new().with_http_transport(transport)))
}

impl<'a> OpenDalSession<'a> {
    pub(super) fn open(ctx: Context<'a>, gap: usize, each: bool) -> Result<Self, String> {
        let operator = operator(&ctx.server.base_url())?;
        Ok(OpenDalSession {
            ctx,
            operator,
            gap,
            each,
        })
    }

    /// The operator path of an object (its server path without the leading `/`).
    fn path(&self, object: usize) -> String {
        self.ctx.workload.objects[object]
            .path
            .trim_start_matches('/')
            .to_string()
    }

    async fn reads(&self) -> Vec<Result<Bytes, String>> {
        let workload = self.ctx.workload;
        let concurrent = self.ctx.concurrency.max(1);
        let groups = workload.by_object();
        let most_ranges = groups.iter().map(|(_, g)| g.len()).max().unwrap_or(1);
        let objects_at_once = (concurrent / most_ranges.clamp(1, concurrent)).max(1);
        let permits = Arc::new(Semaphore::new(objects_at_once));
        let gap = self.gap;
        let mut tasks = JoinSet::new();
        for (object, indices) in groups {
            let operator = self.operator.clone();
            let path = self.path(object);
            let ranges: Vec<Range<u64>> = indices
                .iter()
                .map(|&i| workload.pieces[i].range())
                .collect();
            let permits = Arc::clone(&permits);
            tasks.spawn(async move {
                let _permit = permits.acquire_owned().await;
                let result = async {
                    let reader = operator
                        .reader_with(&path)
                        .concurrent(concurrent)
                        .chunk(CHUNK)
                        .gap(gap)
                        .await?;
                    reader.fetch(ranges).await
                }
                .await;
                (indices, result.map_err(|e| e.to_string()))
            });
        }
        let mut pieces: Vec<Result<Bytes, String>> =
            vec![Err("not read".to_string()); workload.pieces.len()];
        while let Some(joined) = tasks.join_next().await {
            match joined {
                Ok((indices, Ok(all))) => {
                    for (i, buffer) in indices.into_iter().zip(all) {
                        pieces[i] = Ok(buffer.to_bytes());
                    }
                }
                Ok((indices, Err(message))) => {
                    for i in indices {
                        pieces[i] = Err(message.clone());
                    }
                }
                Err(e) => return vec![Err(format!("task failed: {e}")); pieces.len()],
            }
        }
        pieces
    }

    async fn each(&self) -> (Vec<Result<Bytes, String>>, Vec<std::time::Duration>) {
        let workload = self.ctx.workload;
        super::each_piece(workload.pieces.len(), self.ctx.concurrency, |i| {
            let operator = self.operator.clone();
            let piece = workload.pieces[i];
            let path = self.path(piece.object);
            async move {
                operator
                    .read_with(&path)
                    .range(piece.range())
                    .await
                    .map(|b| b.to_bytes())
                    .map_err(|e| e.to_string())
            }
        })
        .await
    }

    async fn ends(&self, head: u64, tail: u64) -> Vec<Result<Bytes, String>> {
        let objects = self.ctx.workload.objects.len();
        super::ends_per_object(objects, self.ctx.concurrency, |object| {
            let operator = self.operator.clone();
            let path = self.path(object);
            async move {
                let get = |range: BytesRange| {
                    let (operator, path) = (operator.clone(), path.clone());
                    async move {
                        operator
                            .read_with(&path)
                            .range(range)
                            .await
                            .map(|b| b.to_bytes())
                    }
                };
                let (h, t) = tokio::join!(
                    get(BytesRange::new(0, Some(head))),
                    get(BytesRange::suffix(tail))
                );
                (h.map_err(|e| e.to_string()), t.map_err(|e| e.to_string()))
            }
        })
        .await
    }
}

impl Session for OpenDalSession<'_> {
    fn run(&mut self) -> Result<Outcome, String> {
        let kind = self.ctx.workload.kind;
        let (wall, (pieces, done)) = self.ctx.runtime.block_on(async {
            let started = Instant::now();
            let pieces = match kind {
                Kind::Reads if self.each => self.each().await,
                Kind::Reads => (self.reads().await, Vec::new()),
                Kind::Ends { head, tail } => (self.ends(head, tail).await, Vec::new()),
            };
            (started.elapsed(), pieces)
        });
        Ok(Outcome {
            wall,
            pieces,
            done,
            karu: None,
            child: None,
        })
    }
}
