//! Submission: a batch's reads grouped (backend, canonical resource, identity condition),
//! planned in the room the last submission left, and routed transfer by transfer to the file
//! workers or the event loops.

use std::collections::HashMap;
use std::sync::Arc;

use karu_config::Trade;
use parking_lot::Mutex;

use crate::batch::read::{Completion, Destination, Read, Sink};
use crate::batch::{Batch, BatchShared, BatchStats};
use crate::plan::{self, Plan, PlanRead, PlannedPart, PlannedTransfer};
use crate::sdk::{Error, Status, Target};
use crate::transfer::{Part, Parts, Transfer};

use super::{BatchOptions, Engine, Inner};

impl Engine {
    /// Plan and route `reads`. A scope's batch is registered in `scope` before any transfer
    /// is routed, so the scope waits for it even if this call unwinds half way.
    pub(super) fn submit_any(
        &self,
        reads: Vec<Read<'_>>,
        options: &BatchOptions,
        scope: Option<&Mutex<Vec<Arc<BatchShared>>>>,
    ) -> Batch {
        let tags = reads
            .iter()
            .enumerate()
            .map(|(index, read)| read.tag.unwrap_or(index as u64))
            .collect();
        let shared = BatchShared::new(tags, options.one_version);
        let inner = Arc::clone(self.running());
        if let Some(limit) = options.max_in_flight {
            // A transfer that waited is started by the one whose end made room for it, on a
            // worker's thread. The batch holds its engine weakly: an engine whose every
            // handle is gone has nothing left to start it on.
            let engine = Arc::downgrade(&inner);
            shared.limit_in_flight(
                limit,
                Box::new(move |transfer| match engine.upgrade() {
                    Some(inner) => inner.start(transfer),
                    None => transfer.cancel(),
                }),
            );
        }
        if let Some(batches) = scope {
            batches.lock().push(Arc::clone(&shared));
        }
        let mut limits = options.limits(self.slot.limits);
        let trade = self.slot.trade;
        if trade == Trade::Frugal {
            limits.max_amplification = limits.max_amplification.min(FRUGAL_AMPLIFICATION);
        }
        let mut working = inner.take_working();
        let (planned, mut early) = group(&reads, std::mem::take(&mut working.reads));
        let prices = match trade {
            Trade::Guards => Vec::new(),
            _ => prices(&inner, &reads, &planned),
        };
        let mut plan = plan::plan_in(&planned.reads, &limits, &prices, &mut working.plan);
        if trade != Trade::Guards {
            plan::fit_rounds(&mut plan, &limits, self.slot.snapshot.global().concurrency);
        }
        planned.to_submission(&mut plan);
        working.reads = planned.reads;
        let stats = BatchStats {
            reads: reads.len(),
            rejected: plan.rejected.len() + early.len(),
            transfers: plan.transfers.len(),
            requested_bytes: saturate(plan.requested_bytes()),
            fetched_bytes: 0,
            planned_bytes: saturate(plan.fetched_bytes()),
            hedges: 0,
        };
        early.extend(plan.rejected);

        let mut slots: Vec<Option<Read<'_>>> = reads.into_iter().map(Some).collect();
        let rejected: Vec<Completion> = early
            .into_iter()
            .filter_map(|(index, error)| {
                let read = slots[index].take()?;
                let part = into_part(index, read, 0);
                Some(part.into_completion(Err(error), 0))
            })
            .collect();
        shared.complete(rejected);

        // Local transfers go to the workers a chunk at a time while the rest are built.
        let mut local = inner.files.chunks(plan.transfers.len());
        let mut taken = Vec::new();
        for window in windows(&plan.transfers) {
            // The reads of a few transfers leave their slots first, in a loop that does nothing
            // else: the slots lie scattered (the plan is in offset order, the slots in
            // submission order), and in a tight loop the processor fetches many at once
            // instead of one after another.
            taken.extend(
                window
                    .iter()
                    .flat_map(|t| &t.parts)
                    .map(|p| slots[p.index].take()),
            );
            let mut gathered = taken.drain(..);
            for planned in window {
                let served = gathered.by_ref().take(planned.parts.len());
                let parts = planned.parts.iter().zip(served);
                let Some(transfer) = transfer_of(planned, parts, &shared) else {
                    continue;
                };
                let Some(transfer) = shared.admit(transfer) else {
                    continue; // waits for a transfer of the batch to end
                };
                match transfer.locator.target() {
                    Target::File(_) => local.push(transfer),
                    Target::Remote => match inner.remote() {
                        Ok(remote) => remote.submit(transfer),
                        Err(e) => transfer.fail(&e),
                    },
                }
            }
        }
        drop(local);
        working.plan.recycle(plan.transfers);
        inner.keep_working(working);
        Batch {
            shared,
            stats,
            _engine: inner,
        }
    }
}

impl Inner {
    /// Hand one transfer to the file workers or the event loops.
    fn start(&self, transfer: Transfer) {
        match transfer.locator.target() {
            Target::File(_) => self.files.chunks(1).push(transfer),
            Target::Remote => match self.remote() {
                Ok(remote) => remote.submit(transfer),
                Err(e) => transfer.fail(&e),
            },
        }
    }
}

/// The most fetched bytes per requested byte of a transfer under `planner.trade = "frugal"`
/// (the `max_amplification` guard, if lower, still holds).
pub(super) const FRUGAL_AMPLIFICATION: u32 = 2;

/// Parts taken from their slots together (see [`Engine::submit_any`]).
pub(super) const GATHER: usize = 64;

/// `transfers` in runs of at least [`GATHER`] parts (the last run may have fewer).
pub(super) fn windows(transfers: &[PlannedTransfer]) -> impl Iterator<Item = &[PlannedTransfer]> {
    let mut rest = transfers;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        let mut parts = 0;
        let n = rest
            .iter()
            .take_while(|t| {
                let more = parts < GATHER;
                parts += t.parts.len();
                more
            })
            .count();
        let (window, after) = rest.split_at(n);
        rest = after;
        Some(window)
    })
}

/// The transfer of `planned` for `batch`, from each of its parts with the read it serves (a
/// part whose read is gone has already completed); `None` when none is left.
fn transfer_of<'p, 'r>(
    planned: &PlannedTransfer,
    parts: impl Iterator<Item = (&'p PlannedPart, Option<Read<'r>>)>,
    batch: &Arc<BatchShared>,
) -> Option<Transfer> {
    let mut locator = None;
    let mut if_match = None;
    let parts: Parts = parts
        .filter_map(|(p, read)| {
            let Read {
                locator: object,
                length,
                destination,
                tag,
                if_match: condition,
                ..
            } = read?;
            if locator.is_none() {
                // The first part's locator and condition become the transfer's (all its parts
                // share them): taken, not copied.
                locator = Some(object.into_whole());
                if_match = condition;
            }
            Some(part(p.index, tag, length, destination, p.offset_in_span))
        })
        .collect();
    Some(Transfer {
        locator: locator?,
        start: planned.start,
        length: planned.length,
        if_match,
        parts,
        batch: Arc::clone(batch),
        auth: None,
        credential_wait: std::time::Duration::ZERO,
    })
}

fn saturate(n: u128) -> u64 {
    u64::try_from(n).unwrap_or(u64::MAX)
}

fn into_part(index: usize, read: Read<'_>, offset_in_span: u64) -> Part {
    part(
        index,
        read.tag,
        read.length,
        read.destination,
        offset_in_span,
    )
}

/// The part of the read at `index` in the submission, from the pieces of it a part keeps.
fn part(
    index: usize,
    tag: Option<u64>,
    length: u64,
    destination: Destination<'_>,
    offset_in_span: u64,
) -> Part {
    Part {
        tag: tag.unwrap_or(index as u64),
        index,
        offset_in_span,
        length,
        sink: Sink::from_destination(destination),
    }
}

/// Rank every read's group (backend, canonical resource, identity condition) and check what
/// the planner cannot (conditions on local files). Returns the planner's input and the reads
/// rejected here.
///
/// The planner's input is built in `room` (emptied first).
fn group(reads: &[Read<'_>], mut room: Vec<PlanRead>) -> (Grouped, Vec<(usize, Error)>) {
    type Key<'a> = (&'a str, &'a str, Option<&'a str>);
    let mut ids: HashMap<Key<'_>, u32> = HashMap::new();
    let mut keys: Vec<Key<'_>> = Vec::new();
    let mut early = Vec::new();
    room.clear();
    room.reserve(reads.len());
    let mut planned = room;
    let mut indices: Option<Vec<usize>> = None;
    // Reads of one object usually come together, sharing its locator's strings: such a read
    // takes the previous read's group without hashing its path again.
    let mut last: Option<(Key<'_>, u32)> = None;
    for (index, read) in reads.iter().enumerate() {
        let remote = matches!(read.locator.target(), Target::Remote);
        if !remote && read.if_match.is_some() {
            early.push((
                index,
                Error::new(
                    Status::InvalidArgument,
                    format!(
                        "an if-match condition applies only to remote objects, not to {}",
                        read.locator.canonical()
                    ),
                ),
            ));
            // From here on the planner's indices are not the submission's.
            indices.get_or_insert_with(|| (0..index).collect());
            continue;
        }
        let key = (
            read.locator.backend().name(),
            read.locator.canonical().as_str(),
            read.if_match.as_deref(),
        );
        let id = match last {
            Some((previous, id)) if same_key(previous, key) => id,
            _ => *ids.entry(key).or_insert_with(|| {
                keys.push(key);
                (keys.len() - 1) as u32
            }),
        };
        last = Some((key, id));
        if let Some(indices) = &mut indices {
            indices.push(index);
        }
        planned.push(PlanRead {
            group: id, // ranked below
            mergeable: remote,
            offset: read.offset,
            length: read.length,
            window: read.locator.window(),
        });
    }
    // Rank groups by their keys so the plan's order does not depend on submission order.
    let mut order: Vec<u32> = (0..keys.len() as u32).collect();
    order.sort_by_key(|&id| keys[id as usize]);
    let mut rank = vec![0u32; keys.len()];
    for (r, &id) in order.iter().enumerate() {
        rank[id as usize] = r as u32;
    }
    for read in &mut planned {
        read.group = rank[read.group as usize];
    }
    let grouped = Grouped {
        reads: planned,
        indices,
    };
    (grouped, early)
}

/// Whether two grouping keys name the same strings, by address (one locator's strings, or
/// the same `if_match`): equal keys, found without comparing their bytes.
fn same_key(a: (&str, &str, Option<&str>), b: (&str, &str, Option<&str>)) -> bool {
    let same = |x: &str, y: &str| std::ptr::eq(x, y);
    same(a.0, b.0)
        && same(a.1, b.1)
        && match (a.2, b.2) {
            (None, None) => true,
            (Some(x), Some(y)) => same(x, y),
            _ => false,
        }
}

/// The priced trade's largest gap for each group (indexed by rank), from what the transport
/// measured for the group's endpoint; `None` for local groups and unmeasured endpoints (the
/// guards alone decide there). Empty until the event loops have started.
fn prices(inner: &Inner, reads: &[Read<'_>], planned: &Grouped) -> Vec<Option<u64>> {
    let Some(Ok(remote)) = inner.remote.get() else {
        return Vec::new();
    };
    let groups = planned.reads.iter().map(|r| r.group + 1).max().unwrap_or(0);
    let mut prices = vec![None; groups as usize];
    let mut seen = vec![false; groups as usize];
    for (i, read) in planned.reads.iter().enumerate() {
        let group = read.group as usize;
        if std::mem::replace(&mut seen[group], true) || !read.mergeable {
            continue;
        }
        prices[group] = remote.price(&reads[planned.index(i)].locator);
    }
    prices
}

/// The planner's input: the reads not rejected before planning, and where each came from in
/// the submission.
struct Grouped {
    reads: Vec<PlanRead>,
    /// The submission's index of each of `reads`, once a read has been rejected before
    /// planning; `None` while the two are the same (most submissions), so no index is stored.
    indices: Option<Vec<usize>>,
}

impl Grouped {
    /// The submission's index of the planner's read `i`.
    fn index(&self, i: usize) -> usize {
        self.indices.as_ref().map_or(i, |indices| indices[i])
    }

    /// Turn the indices of `plan` (the planner's) into the submission's.
    fn to_submission(&self, plan: &mut Plan) {
        let Some(indices) = &self.indices else {
            return; // the same
        };
        for (index, _) in &mut plan.rejected {
            *index = indices[*index];
        }
        for part in plan.transfers.iter_mut().flat_map(|t| t.parts.iter_mut()) {
            part.index = indices[part.index];
        }
    }
}
