//! Large transfers fetched in parts: a transfer whose span is longer than `http.part_size`
//! is cut into pieces of that size or longer (called pieces here: a
//! [`Part`](crate::transfer::Part) is an original read) that run in parallel on concurrency
//! that is idle, each one an ordinary [`Fetch`] (validated like any response, retried and
//! resumed on its own, under the read's one deadline), landing straight in the transfer's
//! destinations.
//!
//! One version: the pieces share [`VersionPins`] (the batch's when it keeps to one version,
//! else the transfer's own), so the first strong ETag an answer states pins the object, every
//! later request carries it as `If-Match`, and an answer with another tag fails the read
//! before a byte of it lands. Pieces that deliver bytes without a strong tag cannot be
//! proven to be one version (unless the caller's own single strong `If-Match` binds every
//! piece): when the first piece's answer has none, no other piece is asked for and the span
//! is fetched in one request; when a later piece's answer has none, the span is fetched again
//! in one request.
//!
//! Size first: the first piece runs alone, and its answer states the object's size, so no
//! piece past the end is requested (as aws-c-s3 does; a read far beyond a small object stays
//! one request).
//!
//! Concurrency: the transfer's own permit carries one piece; each further piece runs only on
//! a permit nobody waits for, of any loop's share of the client's limit (the next loop with
//! one, in turn), taken when the transfer starts and whenever one of its pieces ends: on
//! this loop, or sent to the other loop to run there and land through a lock on the
//! transfer's destinations. So a split never delays another transfer, never exceeds the
//! limit, its memory is its destinations (no piece is buffered), and one large read is
//! received by every loop's thread, not one. How many run at once follows the first piece's
//! rate ([`width`]): parts in parallel where one connection is slower than a thread, one per
//! loop where it is not.
//!
//! Length: the first piece is of `http.part_size`; the rest of the span is cut once its
//! answer has come ([`pieces_after_first`]): in pieces of `http.part_size` on a slow
//! connection, and on a fast one in as many pieces as run at once, one per loop, each a
//! multiple of the part size, so that a large read on loopback or a store on the same network
//! pays a few requests, not one every few megabytes. A long piece is an ordinary fetch: cut
//! short, it resumes from its proven bytes under the same pin.

use std::future::Future;
use std::pin::pin;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::future::{Either, select};
use futures_util::stream::{FuturesUnordered, StreamExt};
use karu_config::Settings;
use tokio::sync::oneshot;

use crate::batch::BatchShared;
use crate::batch::versions::VersionPins;
use crate::check::is_single_strong;
use crate::credentials::Authority;
use crate::http::fetch::{Fetch, Fetched, agrees_with_size};
use crate::http::landing::Landing;
use crate::http::loops::catch_panic;
use crate::http::shared_landing::SharedLanding;
use crate::http::{LoopCtx, Permits, ReleasablePermits};
use crate::sdk::{Credential, Error, Locator, RangeSpec, Status};

/// The most parts one transfer is cut into (8 GiB in parts of 8 MiB).
const MAX_PIECES: u64 = 1024;

/// One piece of a span: where it starts in the span and how long it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Piece {
    pub(crate) offset: u64,
    pub(crate) len: u64,
}

/// The pieces of a span of `span` bytes (at least 1) cut in parts of `part_size` bytes, once
/// the first piece (its first `part_size` bytes) has answered, for at most `width` pieces at
/// once ([`width`]): the first piece, then pieces of one length up to the span's end, as long
/// as `width` of them take to cover the `reach` bytes of the span that can hold bytes (the
/// span, or less where the first answer stated the object's size): the bytes after the first
/// piece divided by `width`, rounded up to a multiple of `part_size`; the last piece may be
/// shorter. One piece when the span fits in one part or `part_size` is 0 (never split).
///
/// With no bound on the width (a connection slower than a thread, where parts in parallel add
/// up to the link) they are pieces of `part_size`; with one piece per loop (a fast
/// connection), each loop carries its share of the object in one request, and a span at most
/// `width + 1` parts long is still cut in parts of `part_size`.
pub(crate) fn pieces_after_first(
    span: u64,
    part_size: u64,
    reach: u64,
    width: usize,
) -> Vec<Piece> {
    if part_size == 0 || span <= part_size {
        return vec![Piece {
            offset: 0,
            len: span,
        }];
    }
    let head = Piece {
        offset: 0,
        len: part_size,
    };
    let rest = reach.min(span).saturating_sub(head.len);
    let width = u64::try_from(width.max(1)).unwrap_or(u64::MAX);
    let len = rest
        .div_ceil(width)
        .checked_next_multiple_of(part_size)
        .unwrap_or(u64::MAX)
        .max(part_size);
    let mut out = vec![head];
    let mut at = head.len;
    while at < span {
        let piece = Piece {
            offset: at,
            len: len.min(span - at),
        };
        at += piece.len;
        out.push(piece);
    }
    out
}

/// What the answers of a span's pieces add up to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Joined {
    /// What the whole span delivered, as one fetch would say it.
    Span(Fetched),
    /// Several pieces delivered bytes and not every one stated a strong ETag: nothing proves
    /// they come from one version of the object.
    Unproven,
}

/// Join the answers `fetched[i]` of `pieces[i]` (in span order) of a span starting at byte
/// `first` of the object. `caller_pins`: every piece was sent with the caller's single strong
/// `If-Match`.
///
/// The object may end inside the span: the piece it ends in delivers a prefix, every later
/// piece nothing, and the end is where any size stated puts it. Anything else (bytes after a
/// piece that ended early, two sizes, two tags, an end inside a stated size) is refused.
pub(crate) fn join(
    first: u64,
    pieces: &[Piece],
    fetched: &[Fetched],
    caller_pins: bool,
) -> Result<Joined, Error> {
    if pieces.len() != fetched.len() {
        return Err(Error::internal(
            "a split transfer lost the answer of a piece",
        ));
    }
    let mut available = 0u64;
    let mut ended = false;
    // Where the object ends, by the piece that ended early.
    let mut end: Option<u64> = None;
    let mut total: Option<u64> = None;
    let mut etag: Option<&str> = None;
    let mut delivering = 0usize;
    let mut untagged = false;
    for (piece, f) in pieces.iter().zip(fetched) {
        if let Some(size) = f.total {
            match total {
                Some(seen) if seen != size => {
                    return Err(Error::new(
                        Status::PreconditionFailed,
                        format!(
                            "the parts of one read state two object sizes ({seen} and {size} \
                             bytes): the object changed during the read"
                        ),
                    ));
                }
                _ => total = Some(size),
            }
        }
        if let Some(tag) = f.etag.as_deref() {
            match etag {
                Some(seen) if seen != tag => {
                    return Err(Error::new(
                        Status::PreconditionFailed,
                        format!(
                            "the parts of one read state two ETags ({seen} and {tag}): the \
                             object changed during the read"
                        ),
                    ));
                }
                _ => etag = Some(tag),
            }
        }
        let got = f.available.min(piece.len);
        if got > 0 {
            delivering += 1;
            untagged |= f.etag.is_none();
        }
        if ended {
            if got > 0 {
                return Err(Error::new(
                    Status::Protocol,
                    format!(
                        "the server sent bytes at span offset {} after stating the object ends \
                         before them",
                        piece.offset
                    ),
                ));
            }
            continue;
        }
        available += got;
        if got < piece.len {
            if !f.ends_early {
                return Err(Error::internal("a piece delivered fewer bytes than proven"));
            }
            ended = true;
            end = Some(first + piece.offset + got);
        }
    }
    if let Some(end) = end {
        agrees_with_size(total, end, available > 0)?;
    }
    if delivering > 1 && untagged && !caller_pins {
        return Ok(Joined::Unproven);
    }
    Ok(Joined::Span(Fetched {
        available,
        ends_early: ended,
        etag: etag.map(str::to_string),
        total,
        last_modified: fetched
            .iter()
            .map(|f| &f.last_modified)
            .find(|m| m.is_sent())
            .cloned()
            .unwrap_or_default(),
    }))
}

/// A piece's window on the transfer's destinations: offsets from the piece's first byte.
struct Window {
    landing: Arc<SharedLanding>,
    piece: Piece,
    /// The time spent writing the piece's bytes into the destinations, where it is timed (the
    /// first piece's, whose rate [`width`] judges).
    writing: Option<Duration>,
}

impl Landing for Window {
    fn span(&self) -> u64 {
        self.piece.len
    }

    fn expect(&mut self, end: u64) -> Result<(), Error> {
        let at = self.piece.offset + end;
        self.landing
            .with(|l| l.expect(at))
            .unwrap_or_else(|| Err(let_go()))
    }

    fn put(&mut self, at: u64, bytes: &[u8]) {
        let began = self.writing.is_some().then(Instant::now);
        // Nothing to write into once the transfer let go: it no longer waits for this piece.
        self.landing.with(|l| l.put(self.piece.offset + at, bytes));
        if let (Some(writing), Some(began)) = (&mut self.writing, began) {
            *writing += began.elapsed();
        }
    }

    fn failure(&mut self) -> Option<Error> {
        // Kept by the transfer's landing, which its owner asks once every piece ended.
        None
    }

    fn attempt(&mut self, n: u32) {
        // The transfer's meter keeps the most attempts any piece needed.
        self.landing.with(|l| l.attempt(n));
    }
}

/// Why a piece could not land its bytes: its transfer no longer waits for it.
fn let_go() -> Error {
    Error::new(
        Status::Cancelled,
        "the read this part belonged to has ended",
    )
}

/// The read a split transfer fetches, owned, so that its pieces can run on other loops: what
/// a [`Fetch`] borrows, shared.
struct Whole {
    locator: Locator,
    if_match: Option<String>,
    settings: Arc<Settings>,
    batch: Option<Arc<BatchShared>>,
    auth: Option<(Authority, Credential)>,
    started: Instant,
    /// The transfer's own pins, used when the batch keeps none.
    own_pins: VersionPins,
}

impl Whole {
    /// The pins every piece shares: the batch's when it keeps to one version, else the
    /// transfer's own.
    fn pins(&self) -> &VersionPins {
        self.batch
            .as_deref()
            .and_then(BatchShared::versions)
            .unwrap_or(&self.own_pins)
    }

    /// The fetch of `piece` of the span starting at `first`, on permits `held`.
    fn piece(&self, first: u64, piece: Piece, held: Option<Arc<ReleasablePermits>>) -> Fetch<'_> {
        Fetch {
            locator: &self.locator,
            range: RangeSpec::Closed {
                first: first + piece.offset,
                last: first + piece.offset + (piece.len - 1),
            },
            if_match: self.if_match.as_deref(),
            settings: &self.settings,
            cancel: self.batch.as_deref(),
            auth: self.auth.clone(),
            started: self.started,
            pins: Some(self.pins()),
            held,
        }
    }
}

/// Fetch `fetch`'s closed range into `dst`, in parts of `settings.http.part_size` bytes when
/// it is longer (see the module's documentation); a range that fits in one part is one fetch.
/// `fetch` is of `batch` (if it is of one) with `settings`, which pieces on other loops share.
pub(crate) async fn fetch(
    ctx: &LoopCtx,
    fetch: Fetch<'_>,
    dst: &mut dyn Landing,
    settings: &Arc<Settings>,
    batch: Option<&Arc<BatchShared>>,
) -> Result<Fetched, Error> {
    let part_size = settings.http.part_size.0;
    let RangeSpec::Closed { first, last } = fetch.range else {
        return fetch.run(ctx, dst).await;
    };
    let span = last - first + 1;
    // A read far larger than any object (2^62 bytes of a small one) is not cut into millions
    // of parts: past MAX_PIECES it is one request, which holds only what exists.
    if part_size == 0 || span <= part_size || span.div_ceil(part_size) > MAX_PIECES {
        return fetch.run(ctx, dst).await;
    }
    let caller_pins = fetch.if_match.is_some_and(is_single_strong);
    let whole = Arc::new(Whole {
        locator: fetch.locator.clone(),
        if_match: fetch.if_match.map(str::to_string),
        settings: Arc::clone(settings),
        batch: batch.cloned(),
        auth: fetch.auth.clone(),
        started: fetch.started,
        own_pins: VersionPins::default(),
    });
    let fetched = {
        let lent = SharedLanding::lend(&mut *dst);
        // Boxed, as the fallback below: a read split into parts is large, and the future
        // of every other read stays the size of one fetch.
        Box::pin(run_pieces(
            ctx,
            &whole,
            fetch.held.clone(),
            Span {
                first,
                len: span,
                part_size,
            },
            lent.shared(),
            caller_pins,
        ))
        .await?
    };
    let joined = match &fetched {
        Some((pieces, fetched)) => join(first, pieces, fetched, caller_pins)?,
        None => Joined::Unproven,
    };
    match joined {
        Joined::Span(fetched) => Ok(fetched),
        Joined::Unproven => {
            tracing::debug!(
                pieces = fetched.map_or(1, |(pieces, _)| pieces.len()),
                "parts without a strong ETag cannot be proven one version: one request"
            );
            Box::pin(fetch.run(ctx, dst)).await
        }
    }
}

/// How many pieces of a split transfer run at once, from the first piece's answer
/// (`delivered` bytes in `took`, the request's round trip included, of which `writing` went
/// into writing them into the destination: a fresh buffer's page faults, or a slow copy, say
/// nothing of the connection, so that time is left out), the rate `fast` (bytes
/// per second, `http.fast_connection`; 0: none) from which one connection counts as fast,
/// and the number of event loops: as many as permits allow when one connection is slower
/// (a connection to an object store delivers a fraction of the link; parts in parallel add
/// up to it), else one per loop (one loop's thread receives, checks and copies a body at a
/// few GB/s, so a connection that alone delivers this much is bound by the thread, not by the
/// link: more connections would only share the same threads, each costing CPU, and the
/// transfer would be no faster).
fn width(delivered: u64, took: Duration, writing: Duration, loops: usize, fast: u64) -> usize {
    let rate = delivered as f64 / took.saturating_sub(writing).as_secs_f64().max(1e-9);
    if fast > 0 && rate >= fast as f64 {
        loops.max(1)
    } else {
        usize::MAX
    }
}

/// Where a split transfer's span is and how it is cut: its first byte in the object, its
/// length, and the part size (not 0, shorter than the span).
#[derive(Debug, Clone, Copy)]
struct Span {
    first: u64,
    len: u64,
    part_size: u64,
}

/// How many of `pieces` (of a span starting at `first`) can hold bytes, from the first
/// piece's answer: one when the object ended inside it, those that start before the size it
/// stated, or all of them when it stated none.
fn holding(pieces: &[Piece], first: u64, head: &Fetched) -> usize {
    if head.ends_early {
        return 1;
    }
    match head.total {
        Some(total) => pieces
            .iter()
            .take_while(|p| first.saturating_add(p.offset) < total)
            .count()
            .max(1),
        None => pieces.len(),
    }
}

/// The answer of a piece that starts past the end of the object the first piece's answer
/// stated: nothing, and the end of the object.
fn past_the_end(head: &Fetched) -> Fetched {
    Fetched {
        available: 0,
        ends_early: true,
        etag: None,
        total: head.total,
        last_modified: head.last_modified.clone(),
    }
}

/// What a piece ran on, for the piece after it.
enum Carrier {
    /// The transfer's own permits: the next piece runs on them, on this loop.
    Own,
    /// Permits of this loop's share nobody waited for: the next piece runs on them here.
    Idle(Permits),
    /// Another loop's permits, given back there as the piece ended (or permits this loop's
    /// piece no longer held): the next piece goes where idle permits are.
    Released,
}

/// A piece's end: its index, its answer, and what it ran on.
type PieceEnd = (usize, Result<Fetched, Error>, Carrier);

/// Run every piece of `span`, on the transfer's permit and on idle ones of every loop: the
/// pieces (cut once the first piece has answered, [`pieces_after_first`]) and their answers,
/// in span order, or the first failure (the other pieces are dropped with their requests).
/// `None` when the first piece's answer delivered bytes without a strong ETag (and
/// `caller_pins` is false): no other piece could be proven to be of its version, so none is
/// asked for.
///
/// On a fast connection ([`width`]) the pieces after the first are as few as the loops that
/// carry them, each as long as its share of the object: a request's round trip, its checks
/// and its socket are paid a few times, not once for every part. Each is still an ordinary
/// fetch, pinned to the first piece's version, resumed from its proven bytes when cut.
///
/// The pieces after the first go round the loops, each to the next one with a permit nobody
/// waits for: one loop's thread cannot receive, check and copy a large object at the link's
/// speed, and the loops' shares add up to the client's limit, so a split still never takes a
/// permit another transfer waits for. `held`: the transfer's own permits.
async fn run_pieces(
    ctx: &LoopCtx,
    whole: &Arc<Whole>,
    held: Option<Arc<ReleasablePermits>>,
    span: Span,
    landing: &Arc<SharedLanding>,
    caller_pins: bool,
) -> Result<Option<(Vec<Piece>, Vec<Fetched>)>, Error> {
    let first = span.first;
    // A piece on this loop, on the transfer's permits (`None`) or on idle ones of its own.
    let here = |i: usize, piece: Piece, permits: Option<Permits>| {
        let mut window = Window {
            landing: Arc::clone(landing),
            piece,
            writing: None,
        };
        let held = held.clone();
        async move {
            // A piece on permits of its own hands back those (not the transfer's) while it
            // waits for a location (see `ReleasablePermits`).
            let own = permits.map(|p| Arc::new(ReleasablePermits::new(ctx, p)));
            let fetch = whole.piece(first, piece, own.clone().or(held));
            let on_idle_permits = own.is_some();
            let result = fetch.run(ctx, &mut window).await;
            let carrier = match own
                .and_then(Arc::into_inner)
                .and_then(ReleasablePermits::into_permits)
            {
                Some(permits) => Carrier::Idle(permits),
                None if on_idle_permits => Carrier::Released,
                None => Carrier::Own,
            };
            (i, result, carrier)
        }
    };
    // The first piece runs alone (as aws-c-s3 discovers a size): its answer states the
    // object's size, so no piece past the end is ever requested (a read far beyond a small
    // object stays one request). The pieces past the end deliver nothing.
    // It runs on the transfer's permits, here, in a window of its own: how long its bytes took
    // to write is part of what its rate is judged by ([`width`]).
    let began = Instant::now();
    let mut window = Window {
        landing: Arc::clone(landing),
        piece: Piece {
            offset: 0,
            len: span.part_size,
        },
        writing: Some(Duration::ZERO),
    };
    let head = whole
        .piece(first, window.piece, held.clone())
        .run(ctx, &mut window)
        .await?;
    let width = width(
        head.available,
        began.elapsed(),
        window.writing.unwrap_or_default(),
        ctx.queues.loop_count(),
        whole.settings.http.fast_connection,
    );
    // The bytes of the span that can hold bytes, as the first answer told.
    let reach = head
        .total
        .map_or(span.len, |total| total.saturating_sub(first).min(span.len));
    let pieces = pieces_after_first(span.len, span.part_size, reach, width);
    let pieces = pieces.as_slice();
    let mut answers: Vec<Option<Fetched>> = vec![None; pieces.len()];
    let size = head.total;
    let holding = holding(pieces, first, &head);
    if holding > 1 && head.available > 0 && head.etag.is_none() && !caller_pins {
        return Ok(None);
    }
    for answer in &mut answers[holding..] {
        *answer = Some(past_the_end(&head));
    }
    // Every piece before the stated size is asked for: room for all their bytes now, one
    // allocation per destination. Grown piece by piece as answers land, a destination was
    // reallocated (and copied) up to once per piece it spans.
    if holding > 1
        && let Some(total) = head.total
    {
        let last = pieces[holding - 1];
        let end = (last.offset + last.len).min(total.saturating_sub(first));
        landing
            .with(|l| l.expect(end))
            .unwrap_or_else(|| Err(let_go()))?;
    }
    answers[0] = Some(head);
    let mut running = FuturesUnordered::new();
    let mut next = 1;
    if next < holding {
        // The transfer's own permit carries the next piece.
        running.push(Either::Left(here(next, pieces[next], None)));
        next += 1;
    }
    // The loop the next piece is offered to first.
    let loops = ctx.queues.loop_count();
    let mut offer = (ctx.index + 1) % loops.max(1);
    loop {
        'start: while next < holding && running.len() < width {
            for _ in 0..loops {
                let to = offer;
                offer = (offer + 1) % loops;
                if to == ctx.index {
                    if let Some(permits) = ctx.idle_permits() {
                        running.push(Either::Left(here(next, pieces[next], Some(permits))));
                        next += 1;
                        continue 'start;
                    }
                } else if let Some(permits) = ctx.queues.idle_permits_of(to) {
                    let piece = Window {
                        landing: Arc::clone(landing),
                        piece: pieces[next],
                        writing: None,
                    };
                    match elsewhere(ctx, to, permits, whole, first, next, piece) {
                        Some(answer) => {
                            running.push(Either::Right(answer));
                            next += 1;
                            continue 'start;
                        }
                        None => break 'start,
                    }
                }
            }
            break;
        }
        let Some((i, result, carrier)) = running.next().await else {
            break;
        };
        let answer = result?;
        if answer.ends_early {
            // An end other than the size the first piece stated (which delivered bytes) fails
            // the read at once: no later piece is worth asking for.
            let piece = pieces[i];
            let end = first + piece.offset + answer.available.min(piece.len);
            agrees_with_size(size, end, true)?;
        }
        answers[i] = Some(answer);
        if next < holding {
            // A piece that ran here goes on with its permits; another loop's went back there,
            // and the round above offers the next piece to whichever loop has one idle.
            match carrier {
                Carrier::Own => running.push(Either::Left(here(next, pieces[next], None))),
                Carrier::Idle(permits) => {
                    running.push(Either::Left(here(next, pieces[next], Some(permits))));
                }
                Carrier::Released => continue,
            }
            next += 1;
        }
    }
    let answers = answers
        .into_iter()
        .map(|a| a.ok_or_else(|| Error::internal("a piece of a split transfer never ran")))
        .collect::<Result<_, _>>()?;
    Ok(Some((pieces.to_vec(), answers)))
}

/// Run piece `i` (landing through `window`) on loop `to`, on its `permits`; its end, as this
/// loop receives it. `None` if the loops have stopped.
///
/// The piece stops as soon as nobody waits for its answer (the transfer failed or was
/// dropped); until then it writes through the transfer's [`SharedLanding`], which no longer
/// lends anything once the transfer lets go.
fn elsewhere(
    ctx: &LoopCtx,
    to: usize,
    permits: Permits,
    whole: &Arc<Whole>,
    first: u64,
    i: usize,
    mut window: Window,
) -> Option<impl Future<Output = PieceEnd> + use<>> {
    let (mut sender, receiver) = oneshot::channel::<Result<Fetched, Error>>();
    let whole = Arc::clone(whole);
    let spawned = ctx
        .queues
        .spawn_on(to, permits, move |there, held| async move {
            let fetch = whole.piece(first, window.piece, Some(held));
            let outcome = {
                let run = pin!(catch_panic(fetch.run(&there, &mut window)));
                let abandoned = pin!(sender.closed());
                match select(run, abandoned).await {
                    Either::Left((outcome, _)) => Some(outcome),
                    Either::Right(_) => None,
                }
            };
            if let Some(outcome) = outcome {
                let _ = sender.send(outcome.unwrap_or_else(|()| {
                    Err(Error::internal("a panic in Karu ended a part of this read"))
                }));
            }
        });
    spawned.then_some(async move {
        let result = receiver.await.unwrap_or_else(|_| {
            Err(Error::internal(
                "a part of this read ended on another event loop without an answer",
            ))
        });
        (i, result, Carrier::Released)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::exchange::LastModified;
    use proptest::prelude::*;

    const MIB: u64 = 1 << 20;

    /// The pieces of a span on a slow connection (no bound on the width): parts of `part`.
    fn pieces(span: u64, part: u64) -> Vec<Piece> {
        pieces_after_first(span, part, span, usize::MAX)
    }

    fn full(len: u64, etag: Option<&str>, total: Option<u64>) -> Fetched {
        Fetched {
            available: len,
            ends_early: false,
            etag: etag.map(str::to_string),
            total,
            last_modified: LastModified::default(),
        }
    }

    fn short(len: u64, etag: Option<&str>, total: Option<u64>) -> Fetched {
        Fetched {
            ends_early: true,
            ..full(len, etag, total)
        }
    }

    #[test]
    fn only_pieces_before_the_stated_size_are_requested() {
        let ps = pieces(40, 10);
        // The object ended inside the first piece.
        assert_eq!(holding(&ps, 0, &short(5, None, Some(5))), 1);
        // A size stated: the pieces starting before it (reads start at byte 100 here).
        assert_eq!(holding(&ps, 100, &full(10, None, Some(125))), 3);
        assert_eq!(holding(&ps, 100, &full(10, None, Some(130))), 3);
        assert_eq!(holding(&ps, 100, &full(10, None, Some(131))), 4);
        assert_eq!(holding(&ps, 100, &full(10, None, Some(1 << 40))), 4);
        // No size stated: every piece.
        assert_eq!(holding(&ps, 100, &full(10, None, None)), 4);
        // The pieces past the end join as the end of the object.
        let answers = [
            full(10, Some("\"a\""), Some(125)),
            full(10, Some("\"a\""), Some(125)),
            short(5, Some("\"a\""), Some(125)),
            past_the_end(&full(10, None, Some(125))),
        ];
        let joined = join(100, &ps, &answers, false).unwrap();
        assert_eq!(
            joined,
            Joined::Span(Fetched {
                available: 25,
                ends_early: true,
                etag: Some("\"a\"".into()),
                total: Some(125),
                last_modified: LastModified::default(),
            })
        );
    }

    #[test]
    fn a_connection_slower_than_a_loop_gets_parts_in_parallel_a_fast_one_a_part_per_loop() {
        let ms = Duration::from_millis;
        const GB: u64 = 1_000_000_000;
        const ZERO: Duration = Duration::ZERO;
        // 8 MiB in 100 ms (84 MB/s, an object store's connection): as many as permits allow.
        assert_eq!(width(8 << 20, ms(100), ZERO, 4, GB), usize::MAX);
        // Just below the rate where the thread binds.
        assert_eq!(
            width(999_000_000, Duration::from_secs(1), ZERO, 4, GB),
            usize::MAX
        );
        // 8 MiB in 3 ms (2.8 GB/s, loopback): one part per loop.
        assert_eq!(width(8 << 20, ms(3), ZERO, 4, GB), 4);
        assert_eq!(width(1_000_000_000, Duration::from_secs(1), ZERO, 2, GB), 2);
        // Nothing measurable (an instant answer) is fast; no loop count is less than one.
        assert_eq!(width(8 << 20, ZERO, ZERO, 0, GB), 1);
        // A first piece that delivered nothing (the object ended) is not fast.
        assert_eq!(width(0, ms(1), ZERO, 4, GB), usize::MAX);
        // The rate is a setting: 84 MB/s is fast from 80 MB/s on; with 0 nothing is.
        assert_eq!(width(8 << 20, ms(100), ZERO, 4, 80_000_000), 4);
        assert_eq!(width(8 << 20, ZERO, ZERO, 4, 0), usize::MAX);
        // 8 MiB in 12 ms, 9 of them spent writing into fresh memory (its pages faulting in):
        // the connection delivered them in 3 ms, and is fast.
        assert_eq!(width(8 << 20, ms(12), ms(9), 4, GB), 4);
        assert_eq!(width(8 << 20, ms(12), ZERO, 4, GB), usize::MAX);
    }

    #[test]
    fn after_a_fast_first_piece_the_rest_is_one_piece_per_loop() {
        let p = |offset, len| Piece { offset, len };
        // 2 GiB in parts of 8 MiB on 4 loops: the 2,040 MiB after the first part in four
        // pieces of 510 MiB, rounded up to 512 (a multiple of the part size); the last shorter.
        assert_eq!(
            pieces_after_first(2048 * MIB, 8 * MIB, 2048 * MIB, 4),
            [
                p(0, 8 * MIB),
                p(8 * MIB, 512 * MIB),
                p(520 * MIB, 512 * MIB),
                p(1032 * MIB, 512 * MIB),
                p(1544 * MIB, 504 * MIB),
            ]
        );
        // One loop: the rest in one request.
        assert_eq!(
            pieces_after_first(2048 * MIB, 8 * MIB, 2048 * MIB, 1),
            [p(0, 8 * MIB), p(8 * MIB, 2040 * MIB)]
        );
        // Two loops, 5 MiB + 5 bytes in parts of 1 MiB: 2 MiB + 3 bytes each, rounded up.
        assert_eq!(
            pieces_after_first(5 * MIB + 5, MIB, 5 * MIB + 5, 2),
            [p(0, MIB), p(MIB, 3 * MIB), p(4 * MIB, MIB + 5)]
        );
        // The object ends at byte 45 of the span: the 35 bytes after the first piece in two
        // pieces (20 each, rounded up from 18), the rest of the span in pieces as long, which
        // start past the end and are never asked for.
        let ps = pieces_after_first(100, 10, 45, 2);
        assert_eq!(
            ps,
            [
                p(0, 10),
                p(10, 20),
                p(30, 20),
                p(50, 20),
                p(70, 20),
                p(90, 10)
            ]
        );
        assert_eq!(holding(&ps, 1000, &full(10, None, Some(1045))), 3);
        // A span no longer than a part per loop after the first: parts of the part size.
        assert_eq!(pieces_after_first(25, 10, 25, 4), pieces(25, 10));
        assert_eq!(pieces_after_first(50, 10, 50, 4), pieces(50, 10));
        assert_eq!(
            pieces_after_first(51, 10, 51, 4),
            [p(0, 10), p(10, 20), p(30, 20), p(50, 1)]
        );
        // The object ended inside the first piece: nothing after it holds bytes.
        assert_eq!(pieces_after_first(40, 10, 5, 4), pieces(40, 10));
        // A slow connection (no bound on the width): the parts of the part size.
        assert_eq!(
            pieces_after_first(2048 * MIB, 8 * MIB, 2048 * MIB, usize::MAX),
            pieces(2048 * MIB, 8 * MIB)
        );
        // No width is less than one piece at a time.
        assert_eq!(
            pieces_after_first(30, 10, 30, 0),
            pieces_after_first(30, 10, 30, 1)
        );
    }

    #[test]
    fn a_span_is_cut_in_parts_of_the_part_size() {
        let p = |offset, len| Piece { offset, len };
        assert_eq!(pieces(10, 0), [p(0, 10)], "0 never splits");
        assert_eq!(pieces(10, 10), [p(0, 10)]);
        assert_eq!(pieces(10, 20), [p(0, 10)]);
        assert_eq!(pieces(10, 4), [p(0, 4), p(4, 4), p(8, 2)]);
        assert_eq!(pieces(12, 4), [p(0, 4), p(4, 4), p(8, 4)]);
        assert_eq!(pieces(u64::MAX, u64::MAX / 2 + 1).len(), 2);
    }

    /// Whether `ps` cover a span of `span` bytes in order, each at least a byte, none twice.
    fn tiles(ps: &[Piece], span: u64) -> Result<(), TestCaseError> {
        let mut at = 0;
        for p in ps {
            prop_assert_eq!(p.offset, at);
            prop_assert!(p.len >= 1);
            at += p.len;
        }
        prop_assert_eq!(at, span);
        Ok(())
    }

    proptest! {
        #[test]
        fn pieces_tile_the_span_exactly(span in 1u64..1 << 40, part in 0u64..1 << 30) {
            let ps = pieces(span, part);
            tiles(&ps, span)?;
            if part == 0 || span <= part {
                prop_assert_eq!(ps.len(), 1);
            } else {
                prop_assert_eq!(ps.len() as u64, span.div_ceil(part));
                prop_assert!(ps.iter().all(|p| p.len <= part));
            }
        }
    }

    proptest! {
        #[test]
        fn pieces_after_the_first_tile_the_span_in_at_most_width_holding_pieces(
            span in 2u64..1 << 40,
            part in 1u64..1 << 30,
            reach in 0u64..1 << 41,
            width in prop_oneof![1usize..16, Just(usize::MAX)],
        ) {
            prop_assume!(part < span);
            let ps = pieces_after_first(span, part, reach, width);
            tiles(&ps, span)?;
            prop_assert_eq!(ps[0], Piece { offset: 0, len: part });
            // Every piece but the last is a multiple of the part size.
            for p in &ps[..ps.len() - 1] {
                prop_assert_eq!(p.len % part, 0);
            }
            // Never more pieces than in parts of the part size.
            prop_assert!(ps.len() <= pieces(span, part).len());
            // The pieces after the first that start before the reach: at most `width`.
            let holding = ps[1..].iter().filter(|p| p.offset < reach).count();
            prop_assert!(holding <= width);
            if width == usize::MAX {
                prop_assert_eq!(&ps, &pieces(span, part));
            }
        }
    }

    #[test]
    fn full_pieces_join_into_the_span() {
        let ps = pieces(10, 4);
        let t = Some("\"v1\"");
        let fetched = [
            full(4, t, Some(100)),
            full(4, t, Some(100)),
            full(2, t, None),
        ];
        assert_eq!(
            join(0, &ps, &fetched, false),
            Ok(Joined::Span(full(10, t, Some(100))))
        );
    }

    #[test]
    fn the_object_may_end_inside_the_span() {
        let ps = pieces(12, 4);
        let t = Some("\"v1\"");
        // The object is 6 bytes from the span's start: 4, then 2 and the end, then a 416.
        let fetched = [
            full(4, t, Some(6)),
            short(2, t, Some(6)),
            short(0, None, Some(6)),
        ];
        assert_eq!(
            join(0, &ps, &fetched, false),
            Ok(Joined::Span(short(6, t, Some(6))))
        );
        // Ending exactly at a piece's end.
        let fetched = [
            full(4, t, Some(4)),
            short(0, None, Some(4)),
            short(0, t, None),
        ];
        assert_eq!(
            join(0, &ps, &fetched, false),
            Ok(Joined::Span(short(4, t, Some(4))))
        );
    }

    #[test]
    fn parts_of_two_versions_are_refused() {
        let ps = pieces(8, 4);
        let fetched = [full(4, Some("\"a\""), None), full(4, Some("\"b\""), None)];
        let e = join(0, &ps, &fetched, false).unwrap_err();
        assert_eq!(e.status(), Status::PreconditionFailed);
        let fetched = [
            full(4, Some("\"a\""), Some(8)),
            short(0, Some("\"a\""), Some(4)),
        ];
        let e = join(0, &ps, &fetched, false).unwrap_err();
        assert_eq!(e.status(), Status::PreconditionFailed, "two sizes");
    }

    #[test]
    fn an_end_inside_a_stated_size_is_refused() {
        let ps = pieces(12, 4);
        let t = Some("\"v1\"");
        // The first piece stated 12 bytes; the second ends the object at byte 4 (a bare 416).
        // Joined as an object of 4 bytes, it would be a false end.
        let fetched = [
            full(4, t, Some(12)),
            short(0, None, None),
            short(0, None, None),
        ];
        let e = join(0, &ps, &fetched, false).unwrap_err();
        assert_eq!(e.status(), Status::Protocol);
        assert!(!e.is_transient(), "{e}");
        // From byte 100 of the object, a size of 106 puts the end inside the second piece.
        let fetched = [
            full(4, t, Some(106)),
            short(1, t, None),
            short(0, None, None),
        ];
        let e = join(100, &ps, &fetched, false).unwrap_err();
        assert_eq!(e.status(), Status::Protocol, "{e}");
        let fetched = [
            full(4, t, Some(106)),
            short(2, t, None),
            short(0, None, None),
        ];
        assert_eq!(
            join(100, &ps, &fetched, false),
            Ok(Joined::Span(short(6, t, Some(106))))
        );
        // A read that starts past the end: no bytes, and an object ending before the span.
        let fetched = [
            short(0, None, Some(7)),
            short(0, None, Some(7)),
            short(0, None, None),
        ];
        assert_eq!(
            join(100, &ps, &fetched, false),
            Ok(Joined::Span(short(0, None, Some(7))))
        );
        // But not after bytes of the span were delivered: they prove the object reaches them.
        let fetched = [
            full(4, t, None),
            short(0, None, Some(7)),
            short(0, None, None),
        ];
        assert!(join(100, &ps, &fetched, false).is_err());
        // A size stated only by a later piece binds the end as well.
        let fetched = [
            full(4, t, None),
            short(1, t, None),
            short(0, None, Some(107)),
        ];
        assert_eq!(
            join(100, &ps, &fetched, false).unwrap_err().status(),
            Status::Protocol
        );
    }

    #[test]
    fn bytes_after_the_end_are_refused() {
        let ps = pieces(8, 4);
        let t = Some("\"a\"");
        let fetched = [short(2, t, None), full(4, t, None)];
        let e = join(0, &ps, &fetched, false).unwrap_err();
        assert_eq!(e.status(), Status::Protocol);
    }

    #[test]
    fn untagged_parts_are_unproven_unless_the_caller_pins_them() {
        let ps = pieces(8, 4);
        let fetched = [full(4, Some("\"a\""), None), full(4, None, None)];
        assert_eq!(join(0, &ps, &fetched, false), Ok(Joined::Unproven));
        let fetched = [full(4, None, None), full(4, None, None)];
        assert_eq!(join(0, &ps, &fetched, false), Ok(Joined::Unproven));
        // The caller's own strong If-Match was sent with every piece.
        assert_eq!(
            join(0, &ps, &fetched, true),
            Ok(Joined::Span(full(8, None, None)))
        );
        // One piece with bytes cannot mix versions.
        let fetched = [short(3, None, Some(3)), short(0, None, Some(3))];
        assert_eq!(
            join(0, &ps, &fetched, false),
            Ok(Joined::Span(short(3, None, Some(3))))
        );
    }
}
