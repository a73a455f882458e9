//! `read_ends`: the head and the tail of an object together, in one round trip where the
//! service honours suffix ranges, and agreeing on size and ETag; a tail alone is one request.
//! A caller's `If-Match` condition goes out with every request (and is checked on every
//! answer), so a read that does not match fails on its first answer.

use std::future::Future;
use std::time::{Instant, SystemTime};

use karu_config::Settings;

use crate::credentials::Authority;
use crate::http::LoopCtx;
use crate::http::exchange::LastModified;
use crate::http::fetch::{Fetch, Fetched};
use crate::http::landing::{Dest, Landing, Scatter};
use crate::sdk::{Credential, Error, Evidence, Locator, RangeSpec, Status};

/// Both ends of a remote object, as absolute answers.
#[derive(Debug)]
pub(crate) struct RemoteEnds {
    pub(crate) size: u64,
    pub(crate) etag: Option<String>,
    /// The head's answer's `Last-Modified`, when it had a valid one.
    pub(crate) last_modified: Option<SystemTime>,
    pub(crate) head: Vec<u8>,
    pub(crate) tail: Vec<u8>,
}

pub(crate) async fn read_ends(
    ctx: &LoopCtx,
    locator: &Locator,
    head_len: u64,
    tail_len: u64,
    if_match: Option<&str>,
) -> Result<RemoteEnds, Error> {
    let whole = locator.whole();
    let settings = ctx.settings_for(&whole);
    let started = Instant::now();
    let auth = ctx.authenticate(&whole, &settings, started).await?;
    let probe = Probe {
        ctx,
        locator: &whole,
        settings: &settings,
        auth: &auth,
        started,
    };
    let window = locator.window();
    let base = window.map_or(0, |w| w.start);
    // Both ends hold what the answers deliver, never the lengths asked for: they are clamped
    // to the size the first answer states (a 1 TiB head of a 20 MiB object takes 20 MiB).
    let mut head = Vec::new();
    let mut tail = Vec::new();
    let suffix_ok = whole.backend().capabilities().suffix_ranges;

    // A bounded window knows its size: two closed ranges, in flight together (the second
    // holds a permit of its own, so the pair stays within the concurrency limit).
    if let Some(len) = window.and_then(|w| w.len) {
        let h = head_len.min(len);
        let t = tail_len.min(len);
        let (hr, tr) = both(
            ctx,
            probe.closed(base, h, if_match, &mut head),
            probe.closed(base + len - t, t, if_match, &mut tail),
        )
        .await;
        let (hf, tf) = (hr?, tr?);
        let etag = agree_etag(&hf, &tf, &whole)?;
        exact(&hf, base, h, &whole)?;
        exact(&tf, base + len - t, t, &whole)?;
        head.truncate(h as usize);
        tail.truncate(t as usize);
        return Ok(RemoteEnds {
            size: len,
            etag,
            last_modified: hf.last_modified.time(),
            head,
            tail,
        });
    }

    // No head to read: the suffix's answer alone states the size and the version, in one
    // request.
    if head_len == 0 && suffix_ok && tail_len > 0 {
        let tail_dst = Dest::vec(&mut tail, tail_len);
        let suffix = RangeSpec::Suffix { len: tail_len };
        let tf = probe.range(Some(suffix), if_match, tail_dst).await?;
        let size = stated_size(&tf, &whole)?;
        let visible = size.saturating_sub(base);
        let tail = visible_tail(tail, &tf, tail_len.min(visible), &whole)?;
        return Ok(RemoteEnds {
            size: visible,
            etag: tf.etag,
            last_modified: tf.last_modified.time(),
            head,
            tail,
        });
    }

    let head_range = RangeSpec::closed(base, head_len.max(1));
    let mut one = [0u8; 1];
    let head_dst = if head_len == 0 {
        Dest::Slice(&mut one[..])
    } else {
        Dest::vec(&mut head, head_len)
    };
    let (hf, tf) = if suffix_ok && tail_len > 0 {
        let tail_dst = Dest::vec(&mut tail, tail_len);
        let (hr, tr) = both(
            ctx,
            probe.range(head_range, if_match, head_dst),
            probe.range(
                Some(RangeSpec::Suffix { len: tail_len }),
                if_match,
                tail_dst,
            ),
        )
        .await;
        (hr?, Some(tr?))
    } else {
        (probe.range(head_range, if_match, head_dst).await?, None)
    };
    let size = stated_size(&hf, &whole)?;
    let visible = size.saturating_sub(base);
    let h = head_len.min(visible);
    if hf.available < h || (h > 0 && (head.len() as u64) < h) {
        return Err(Error::new(
            Status::Protocol,
            format!("the head of {} arrived short", whole.canonical()),
        ));
    }
    head.truncate(h as usize);
    let t = tail_len.min(visible);
    let (etag, tail) = match tf {
        Some(tf) => {
            let etag = agree_etag(&hf, &tf, &whole)?;
            if tf.total != Some(size) {
                return Err(changed(&whole, "size"));
            }
            (etag, visible_tail(tail, &tf, t, &whole)?)
        }
        None if t == 0 => (hf.etag.clone(), Vec::new()),
        None => {
            // No suffix ranges: the tail follows the head, pinned to the head's version (or,
            // when the head stated no strong ETag, under the caller's condition).
            let condition = hf.etag.clone().or_else(|| if_match.map(str::to_owned));
            let tf = probe
                .closed(size - t, t, condition.as_deref(), &mut tail)
                .await?;
            let etag = agree_etag(&hf, &tf, &whole)?;
            if tf.total.is_some_and(|s| s != size) {
                return Err(changed(&whole, "size"));
            }
            exact(&tf, size - t, t, &whole)?;
            tail.truncate(t as usize);
            (etag, tail)
        }
    };
    Ok(RemoteEnds {
        size: visible,
        etag,
        last_modified: hf.last_modified.time(),
        head,
        tail,
    })
}

/// Run two requests in flight together when a second permit is idle (the task holds one for
/// the first), else one after the other: the pair never exceeds the limit, nor this loop's
/// share of it (which bounds the connections of its pool), and never waits on itself.
///
/// Combinators, not an `async fn`: an `async fn` keeps its argument futures beside the ones it
/// awaits, twice the size of the pair, and `read_ends` spawns this as its task.
fn both<A, B>(
    ctx: &LoopCtx,
    first: impl Future<Output = A>,
    second: impl Future<Output = B>,
) -> impl Future<Output = (A, B)> {
    use futures_util::FutureExt as _;
    use futures_util::future::{Either, join};
    match ctx.idle_permits() {
        Some(permit) => Either::Left(join(first, second).map(move |pair| {
            drop(permit);
            pair
        })),
        None => Either::Right(first.then(|a| second.map(|b| (a, b)))),
    }
}

/// The shared arguments of the requests of one `read_ends`.
struct Probe<'a> {
    ctx: &'a LoopCtx,
    locator: &'a Locator,
    settings: &'a Settings,
    auth: &'a Option<(Authority, Credential)>,
    started: Instant,
}

impl Probe<'_> {
    async fn range(
        &self,
        range: Option<RangeSpec>,
        if_match: Option<&str>,
        dst: Dest<'_>,
    ) -> Result<Fetched, Error> {
        let range = range.ok_or_else(|| Error::new(Status::InvalidRange, "range overflows"))?;
        let mut landing = Scatter::one(dst);
        let fetched = Fetch {
            locator: self.locator,
            range,
            if_match,
            settings: self.settings,
            cancel: None,
            auth: self.auth.clone(),
            started: self.started,
            pins: None,
            // Both ends of a pair may wait for a location: only one hands the task's permits
            // back, the other keeps waiting on the pair's idle permit.
            held: crate::http::task_permits(),
        }
        .run(self.ctx, &mut landing)
        .await?;
        match landing.failure() {
            Some(error) => Err(error),
            None => Ok(fetched),
        }
    }

    /// `length` bytes at `offset` into `buf`, which then holds what arrived.
    async fn closed(
        &self,
        offset: u64,
        length: u64,
        if_match: Option<&str>,
        buf: &mut Vec<u8>,
    ) -> Result<Fetched, Error> {
        if length == 0 {
            return Ok(Fetched {
                available: 0,
                ends_early: false,
                etag: None,
                total: None,
                last_modified: LastModified::default(),
            });
        }
        let dst = Dest::vec(buf, length);
        self.range(RangeSpec::closed(offset, length), if_match, dst)
            .await
    }
}

/// The object's size, as the answer `f` stated it.
fn stated_size(f: &Fetched, locator: &Locator) -> Result<u64, Error> {
    f.total.ok_or_else(|| {
        Error::new(
            Status::Protocol,
            format!(
                "the server did not state the size of {}",
                locator.canonical()
            ),
        )
    })
}

/// The last `t` bytes of what a suffix answer `f` delivered into `tail`: the suffix may reach
/// before the window's start, and only the visible part is kept.
fn visible_tail(
    mut tail: Vec<u8>,
    f: &Fetched,
    t: u64,
    locator: &Locator,
) -> Result<Vec<u8>, Error> {
    let got = f.available.min(tail.len() as u64);
    let skip = (got - t.min(got)) as usize;
    tail.truncate(got as usize);
    let tail = tail.split_off(skip);
    if tail.len() as u64 != t {
        return Err(Error::new(
            Status::Protocol,
            format!("the tail of {} arrived short", locator.canonical()),
        ));
    }
    Ok(tail)
}

fn exact(f: &Fetched, offset: u64, want: u64, locator: &Locator) -> Result<(), Error> {
    if want > 0 && f.available < want {
        return Err(Error::new(
            Status::RangeNotSatisfiable,
            format!(
                "{} ends before its window: {} of {want} bytes exist",
                locator.canonical(),
                f.available
            ),
        )
        .with_evidence(Evidence::EndOfObject {
            offset,
            requested: want,
            received: f.available,
            size: f.total,
        }));
    }
    Ok(())
}

fn agree_etag(a: &Fetched, b: &Fetched, locator: &Locator) -> Result<Option<String>, Error> {
    match (&a.etag, &b.etag) {
        (Some(x), Some(y)) if x != y => Err(changed(locator, "ETag")),
        (x, y) => Ok(x.clone().or_else(|| y.clone())),
    }
}

fn changed(locator: &Locator, what: &str) -> Error {
    Error::new(
        Status::PreconditionFailed,
        format!(
            "{} changed between the two answers of read_ends (their {what}s differ)",
            locator.canonical()
        ),
    )
}
