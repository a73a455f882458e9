//! object_store 0.14.2 over its HTTP store: `get_ranges` per object (it merges ranges less
//! than 1 MiB apart, with no cap on span or over-fetch, and fetches up to 10 merged ranges at
//! once, in order). Where a workload has many objects, the caller decides how many objects are
//! read at once; here, as many as keep at most Karu's concurrency limit of requests in flight.
//! `ends` reads each object's head (a bounded range) and tail (a suffix range) concurrently.
//! The per-read mode (`each`) gets the range of every piece on its own instead (`get_opts`
//! with a range, what `get_range` does), as many at once as
//! Karu's concurrency limit: never merging, each piece's completion its own.

use std::ops::Range;
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use object_store::http::{HttpBuilder, HttpStore};
use object_store::path::Path;
use object_store::{Certificate, ClientOptions, GetOptions, GetRange, ObjectStore};
use tokio::sync::Semaphore;
use tokio::task::JoinSet;

use super::{Context, Outcome, Session};
use crate::workload::Kind;

/// Most ranges one `get_ranges` call fetches at once (object_store's
/// `OBJECT_STORE_COALESCE_PARALLEL`, which it does not export).
const GET_RANGES_PARALLEL: usize = 10;

pub(super) struct ObjectStoreSession<'a> {
    ctx: Context<'a>,
    store: Arc<HttpStore>,
    /// `get_range` per piece instead of `get_ranges` per object.
    each: bool,
}

impl<'a> ObjectStoreSession<'a> {
    pub(super) fn open(ctx: Context<'a>, each: bool) -> Result<Self, String> {
        let transport = crate::transport::current();
        let mut options = ClientOptions::new().with_allow_http(true);
        if let Some((pem, _)) = &transport.tls {
            let ca = Certificate::from_pem(pem.as_bytes())
                .map_err(|e| format!("cannot read the mock's CA: {e}"))?;
            options = options.with_root_certificate(ca);
        }
        if transport.http2 {
            options = options.with_allow_http2();
        }
        let store = HttpBuilder::new()
            .with_url(ctx.server.base_url())
            .with_client_options(options)
            .build()
            .map_err(|e| format!("cannot build object_store's HTTP store: {e}"))?;
        Ok(ObjectStoreSession {
            ctx,
            store: Arc::new(store),
            each,
        })
    }

    /// The store path of an object (its server path without the leading `/`).
    fn path(&self, object: usize) -> Path {
        Path::from(
            self.ctx.workload.objects[object]
                .path
                .trim_start_matches('/'),
        )
    }

    async fn reads(&self) -> Vec<Result<Bytes, String>> {
        let workload = self.ctx.workload;
        let groups = workload.by_object();
        let most_ranges = groups.iter().map(|(_, g)| g.len()).max().unwrap_or(1);
        let objects_at_once =
            (self.ctx.concurrency / most_ranges.clamp(1, GET_RANGES_PARALLEL)).max(1);
        let permits = Arc::new(Semaphore::new(objects_at_once));
        let mut tasks = JoinSet::new();
        for (object, indices) in groups {
            let store = Arc::clone(&self.store);
            let path = self.path(object);
            let ranges: Vec<Range<u64>> = indices
                .iter()
                .map(|&i| workload.pieces[i].range())
                .collect();
            let permits = Arc::clone(&permits);
            tasks.spawn(async move {
                let _permit = permits.acquire_owned().await;
                let result = store.get_ranges(&path, &ranges).await;
                (indices, result.map_err(|e| e.to_string()))
            });
        }
        let mut pieces: Vec<Result<Bytes, String>> =
            vec![Err("not read".to_string()); workload.pieces.len()];
        while let Some(joined) = tasks.join_next().await {
            match joined {
                Ok((indices, Ok(all))) => {
                    for (i, bytes) in indices.into_iter().zip(all) {
                        pieces[i] = Ok(bytes);
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
            let store = Arc::clone(&self.store);
            let piece = workload.pieces[i];
            let path = self.path(piece.object);
            async move {
                let options = GetOptions::new().with_range(Some(GetRange::Bounded(piece.range())));
                let got = async { store.get_opts(&path, options).await?.bytes().await };
                got.await.map_err(|e| e.to_string())
            }
        })
        .await
    }

    async fn ends(&self, head: u64, tail: u64) -> Vec<Result<Bytes, String>> {
        let objects = self.ctx.workload.objects.len();
        super::ends_per_object(objects, self.ctx.concurrency, |object| {
            let store = Arc::clone(&self.store);
            let path = self.path(object);
            async move {
                let get = |range: GetRange| {
                    let options = GetOptions::new().with_range(Some(range));
                    let (store, path) = (Arc::clone(&store), path.clone());
                    async move { store.get_opts(&path, options).await?.bytes().await }
                };
                let (h, t) =
                    tokio::join!(get(GetRange::Bounded(0..head)), get(GetRange::Suffix(tail)));
                (h.map_err(|e| e.to_string()), t.map_err(|e| e.to_string()))
            }
        })
        .await
    }
}

impl Session for ObjectStoreSession<'_> {
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
