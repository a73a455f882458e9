//! One remote transfer from its permits to its parts' completions: priced again as it starts,
//! its destinations opened under its batch's active guard, fetched, and each part completed
//! with its own status.

use std::sync::Arc;
use std::time::Instant;

use smallvec::SmallVec;

use crate::batch::read::Completion;
use crate::http::fetch::{Fetch, Fetched};
use crate::http::landing::{Dest, Landing, Scatter};
use crate::http::loops::{LoopCtx, catch_panic};
use crate::http::permits::ReleasablePermits;
use crate::http::pieces;
use crate::sdk::{Error, Evidence, RangeSpec, Status};
use crate::transfer::Transfer;

/// Price a merged transfer's gaps again as it starts, with what the client has measured for
/// its endpoint by now, and keep the first piece it comes apart into; the other pieces queue
/// again, as transfers of their own.
///
/// The plan was priced with the measurements of its submission, and the first batch of a
/// client, planned before anything was measured, has only the guards: on a slow link they
/// join 4 KiB reads up to 1 MiB apart (many times the bytes the reads asked for). The endpoint is
/// measured within the first round trips of that batch, and its transfers still waiting for
/// a permit then fetch only the gaps worth fetching. Cutting only removes gaps, so every
/// piece stays within the four guards, and no read's bytes or destination change.
pub(super) fn reprice(ctx: &LoopCtx, mut transfer: Box<Transfer>) -> Box<Transfer> {
    let Some(price) = ctx.shared.price(&transfer.locator, Instant::now()) else {
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
    // Each piece is a transfer of its own in flight: under the batch's bound, if it has one.
    for piece in rest
        .into_iter()
        .filter_map(|piece| transfer.batch.admit(piece))
    {
        ctx.queues.push_transfer(piece);
    }
    transfer
}

/// Run one remote transfer on the permits `held` (which its fetches hand back while they wait
/// for another request's redirect location) and complete each of its parts.
///
/// The transfer is active (its batch's release and scope wait for it) exactly while `active`
/// lives; destinations are reachable only through a borrow of it. A panic in a backend hook
/// (`prepare`, `correction`, `transformed`) is caught here, so every part still gets exactly
/// one completion ([`Status::Internal`]) before the transfer ends.
pub(super) async fn run_transfer(
    mut transfer: Transfer,
    held: Arc<ReleasablePermits>,
    ctx: Arc<LoopCtx>,
) {
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
        held: Some(held),
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
                let outcome = catch_panic(pieces::fetch(
                    &ctx,
                    fetch,
                    &mut scatter,
                    &settings,
                    Some(&batch),
                ))
                .await;
                meter = Some(scatter.meter);
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

/// Turn a fetch result into one completion per part (the bytes are already in place). Most
/// transfers carry one read: its completion needs no allocation.
fn complete_parts(
    transfer: &mut Transfer,
    result: Result<Fetched, Error>,
) -> SmallVec<[Completion; 1]> {
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
