//! Karu: one batch of reads (or `read_ends` on every object, from as many threads as Karu's
//! concurrency limit), on a client built with the defaults.

use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use bytes::Bytes;
use karu::{Client, ClientBuilder, Locator, Read, TransportStats};

use super::{Context, KaruFigures, Outcome, Session};
use crate::workload::Kind;

/// A client with Karu's defaults: no config files; `KARU_*` variables still apply.
pub(crate) fn client() -> Result<Client, String> {
    client_with(|b| b)
}

/// [`client`] with settings of a workload's own (`throttled` turns adaptation off).
pub(crate) fn client_with(
    configure: impl FnOnce(ClientBuilder) -> ClientBuilder,
) -> Result<Client, String> {
    let mut builder = Client::builder()
        .user_config_file(None)
        .project_config_file(None);
    let transport = crate::transport::current();
    if let Some((_, ca_file)) = &transport.tls {
        builder = builder.set("http.ca_file", ca_file.display().to_string());
    }
    if transport.http2 {
        // HTTP/2 where the server's ALPN offers it.
        builder = builder.set("http.version", "auto");
    }
    configure(builder)
        .build()
        .map_err(|e| format!("cannot build a Karu client: {e}"))
}

/// Each completion's bytes, or its status and message: the pieces of an [`Outcome`].
pub(crate) fn results_of(completions: Vec<karu::Completion>) -> Vec<Result<Bytes, String>> {
    completions
        .into_iter()
        .map(|c| {
            c.into_result()
                .map(Bytes::from)
                .map_err(|e| failure_text(&e))
        })
        .collect()
}

/// A failed read as a piece of an [`Outcome`]: its status and message.
fn failure_text(e: &karu::Error) -> String {
    format!("{}: {}", e.status().name(), e.message())
}

/// Karu's account of a batch from the transport counters around it.
fn figures(before: TransportStats, after: TransportStats, transfers: Option<usize>) -> KaruFigures {
    KaruFigures {
        transfers,
        requests: after.requests - before.requests,
        body_bytes: after.body_bytes - before.body_bytes,
        retries: after.retries - before.retries,
        hedges: after.hedges - before.hedges,
    }
}

pub(super) struct KaruSession<'a> {
    ctx: Context<'a>,
    client: Client,
    locators: Vec<Locator>,
}

impl<'a> KaruSession<'a> {
    pub(super) fn open(ctx: Context<'a>) -> Result<Self, String> {
        Self::open_with(ctx, |b| b)
    }

    /// A session on a client with settings of its own (see [`client_with`]).
    pub(super) fn open_with(
        ctx: Context<'a>,
        configure: impl FnOnce(ClientBuilder) -> ClientBuilder,
    ) -> Result<Self, String> {
        let client = client_with(configure)?;
        let locators = ctx
            .workload
            .objects
            .iter()
            .map(|o| client.locate(&ctx.server.url(&o.path)))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| e.to_string())?;
        Ok(KaruSession {
            ctx,
            client,
            locators,
        })
    }

    fn reads(&self) -> (Outcome, Option<usize>) {
        let pieces = &self.ctx.workload.pieces;
        let started = Instant::now();
        let batch = self.client.submit_with(
            pieces
                .iter()
                .map(|p| Read::new(&self.locators[p.object], p.offset, p.length)),
            &self.ctx.batch_options,
        );
        let completions = batch.wait();
        let wall = started.elapsed();
        let transfers = batch.stats().transfers;
        let done = completions.iter().map(|c| c.timing().done()).collect();
        let pieces = results_of(completions);
        let outcome = Outcome {
            wall,
            pieces,
            done,
            karu: None,
            child: None,
        };
        (outcome, Some(transfers))
    }

    fn ends(&self, head: u64, tail: u64) -> Outcome {
        let objects = self.locators.len();
        let next = AtomicUsize::new(0);
        let results = Mutex::new(vec![None; objects]);
        let threads = self.ctx.concurrency.clamp(1, objects.max(1));
        let started = Instant::now();
        std::thread::scope(|s| {
            for _ in 0..threads {
                s.spawn(|| {
                    loop {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        if i >= objects {
                            break;
                        }
                        let result = self.client.read_ends(&self.locators[i], head, tail);
                        if let Ok(mut all) = results.lock() {
                            all[i] = Some(result);
                        }
                    }
                });
            }
        });
        let wall = started.elapsed();
        let results = results.into_inner().unwrap_or_default();
        let mut pieces = Vec::with_capacity(objects * 2);
        for result in results {
            match result {
                Some(Ok(ends)) => {
                    pieces.push(Ok(Bytes::from(ends.head)));
                    pieces.push(Ok(Bytes::from(ends.tail)));
                }
                Some(Err(e)) => {
                    let message = failure_text(&e);
                    pieces.push(Err(message.clone()));
                    pieces.push(Err(message));
                }
                None => {
                    pieces.push(Err("no result".into()));
                    pieces.push(Err("no result".into()));
                }
            }
        }
        Outcome {
            wall,
            pieces,
            done: Vec::new(),
            karu: None,
            child: None,
        }
    }
}

impl Session for KaruSession<'_> {
    fn run(&mut self) -> Result<Outcome, String> {
        let before = self.client.transport_stats();
        let (mut outcome, transfers) = match self.ctx.workload.kind {
            Kind::Reads => self.reads(),
            Kind::Ends { head, tail } => (self.ends(head, tail), None),
        };
        outcome.karu = Some(figures(before, self.client.transport_stats(), transfers));
        Ok(outcome)
    }
}

/// Karu reading every piece of a `Reads` workload into one caller buffer, back to back.
pub(super) struct KaruCallerSession<'a> {
    inner: KaruSession<'a>,
    /// The next batch's buffer, written before the clock starts.
    buffer: Option<Vec<u8>>,
}

impl<'a> KaruCallerSession<'a> {
    pub(super) fn open(ctx: Context<'a>) -> Result<Self, String> {
        Ok(KaruCallerSession {
            inner: KaruSession::open(ctx)?,
            buffer: None,
        })
    }
}

impl Session for KaruCallerSession<'_> {
    fn prepare(&mut self) {
        let total = self.inner.ctx.workload.requested_bytes();
        self.buffer = Some(vec![0xA5; total as usize]);
    }

    fn run(&mut self) -> Result<Outcome, String> {
        let KaruSession {
            ctx,
            client,
            locators,
        } = &self.inner;
        if !matches!(ctx.workload.kind, Kind::Reads) {
            return Err("caller buffers are measured on batches of reads only".into());
        }
        let mut buffer = self.buffer.take().ok_or("no buffer was prepared")?;
        let pieces = &ctx.workload.pieces;
        let before = client.transport_stats();
        let started = Instant::now();
        let (completions, transfers) = {
            let slices = crate::local::split_lengths(&mut buffer, pieces.iter().map(|p| p.length));
            client.scope(|scope| {
                let batch = scope.submit(
                    pieces
                        .iter()
                        .zip(slices)
                        .map(|(p, dst)| Read::borrowed(&locators[p.object], p.offset, dst)),
                    &ctx.batch_options,
                );
                let completions = batch.wait();
                (completions, batch.stats().transfers)
            })
        };
        let wall = started.elapsed();
        let after = client.transport_stats();
        // Each piece is a view of the buffer (no copy); a failed read keeps its message.
        let buffer = Bytes::from(buffer);
        let mut at = 0usize;
        let mut results = Vec::with_capacity(pieces.len());
        for (p, c) in pieces.iter().zip(completions) {
            let end = at + p.length as usize;
            results.push(match c.into_result() {
                Ok(_) => Ok(buffer.slice(at..end)),
                Err(e) => Err(failure_text(&e)),
            });
            at = end;
        }
        Ok(Outcome {
            wall,
            pieces: results,
            done: Vec::new(),
            karu: Some(figures(before, after, Some(transfers))),
            child: None,
        })
    }
}
