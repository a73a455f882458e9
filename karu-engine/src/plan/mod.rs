//! The planner: validates reads, converts window offsets, groups, sorts and merges neighbours.
//!
//! This module contains no input or output, no threads and no clock: [`plan`] is a function of
//! its arguments. It implements Karu's contract, `karu-engine/README.md`, "The planner":
//!
//! 1. Every read is validated on its own: a zero length, an unbounded length
//!    ([`crate::UNBOUNDED`]), `offset + length` overflowing `u64`, and a read leaving
//!    its bounded window are rejected with [`Status::InvalidRange`], as that read's own result.
//! 2. Window offsets become absolute object offsets.
//! 3. Valid reads are stably sorted by group (the caller ranks groups by backend, canonical
//!    resource and identity condition) and absolute offset.
//! 4. One linear sweep per group joins neighbours while all four [`Limits`] hold; a guard that
//!    fails closes the transfer and the candidate opens the next one.
//!
//! With the priced trade ([`plan_priced`], `planner.trade = "priced"`) a group may also carry a
//! price: the largest gap worth fetching instead of sending a request of its own, worked out by
//! [`price`] from what the client measured for the group's endpoint. A gap above it closes the
//! transfer as a guard would; the four guards stay the hard bounds. A plan is priced with the
//! measurements of its submission; the transport prices each merged transfer again as it
//! starts and cuts it where [`price::cuts`] says (`http::run::reprice`).
//!
//! [`check`] is the planner's oracle: whether a plan is a correct plan of its reads, property
//! by property. The property tests below and the `plan` fuzz target judge every plan with it.

mod oracle;
pub mod price;

use smallvec::{SmallVec, smallvec};

pub use oracle::{check, check_fitted, check_priced};

use crate::sdk::{Error, Status, UNBOUNDED, Window};

/// The four merge guards. A batch may override each; `max_gap == 0` disables merging.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Limits {
    /// Largest distance between the end of a transfer and the next read's start.
    pub max_gap: u64,
    /// Largest span of a merged transfer.
    pub max_span: u64,
    /// Most original reads in one transfer.
    pub max_parts: u32,
    /// Most fetched bytes per useful byte; overlapping reads count their useful bytes separately.
    pub max_amplification: u32,
}

impl Default for Limits {
    fn default() -> Self {
        Limits::from(&karu_config::PlannerSettings::default())
    }
}

impl From<&karu_config::PlannerSettings> for Limits {
    fn from(s: &karu_config::PlannerSettings) -> Self {
        Limits {
            max_gap: s.max_gap.0,
            max_span: s.max_span.0,
            max_parts: s.max_parts,
            max_amplification: s.max_amplification,
        }
    }
}

/// One read as the planner sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PlanRead {
    /// The rank of the read's group (backend, canonical resource, identity condition); reads
    /// merge only within one group, and groups are planned in rank order.
    pub group: u32,
    /// Whether reads of this group may merge (false for local files).
    pub mergeable: bool,
    /// Offset relative to the window (or the object, without one).
    pub offset: u64,
    /// Bytes wanted.
    pub length: u64,
    /// The locator's window, if any.
    pub window: Option<Window>,
}

/// One original read inside a transfer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PlannedPart {
    /// Index of the read in the planner's input.
    pub index: usize,
    /// Where the read's bytes start inside the transfer's span.
    pub offset_in_span: u64,
    /// Bytes of the read.
    pub length: u64,
}

/// One local read or one HTTP request: a contiguous span of one group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlannedTransfer {
    /// The group (resource) it reads.
    pub group: u32,
    /// Absolute offset of the span's first byte.
    pub start: u64,
    /// Length of the span (at least 1).
    pub length: u64,
    /// The reads it serves, in absolute-offset order (ties in input order); inline when it
    /// serves one.
    pub parts: SmallVec<[PlannedPart; 1]>,
}

impl PlannedTransfer {
    /// Sum of the parts' lengths (overlaps counted once per part).
    pub fn useful_bytes(&self) -> u128 {
        self.parts.iter().map(|p| u128::from(p.length)).sum()
    }
}

/// The result of planning: transfers in (group, offset) order, and rejected reads.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Plan {
    /// Transfers to run.
    pub transfers: Vec<PlannedTransfer>,
    /// Reads rejected before any input or output, with their errors, in input order.
    pub rejected: Vec<(usize, Error)>,
}

impl Plan {
    /// Bytes the transfers fetch.
    pub fn fetched_bytes(&self) -> u128 {
        self.transfers.iter().map(|t| u128::from(t.length)).sum()
    }

    /// Bytes the valid reads asked for.
    pub fn requested_bytes(&self) -> u128 {
        self.transfers
            .iter()
            .map(PlannedTransfer::useful_bytes)
            .sum()
    }
}

/// Validate one read and return its absolute offset.
pub fn absolute_offset(read: &PlanRead) -> Result<u64, Error> {
    let (offset, length) = (read.offset, read.length);
    if length == 0 {
        return Err(Error::new(
            Status::InvalidRange,
            format!("zero-length read at offset {offset}: every read needs a nonzero length"),
        ));
    }
    if length == UNBOUNDED {
        return Err(Error::new(
            Status::InvalidRange,
            format!("unbounded read at offset {offset}: every read needs a finite length"),
        ));
    }
    let overflow = || {
        Error::new(
            Status::InvalidRange,
            format!("read of {length} bytes at offset {offset} overflows a 64-bit offset"),
        )
    };
    let end = offset.checked_add(length).ok_or_else(overflow)?;
    let Some(window) = read.window else {
        return Ok(offset);
    };
    if let Some(window_len) = window.len
        && end > window_len
    {
        return Err(Error::new(
            Status::InvalidRange,
            format!(
                "read of {length} bytes at offset {offset} leaves its window of {window_len} bytes"
            ),
        ));
    }
    let absolute = window.start.checked_add(offset).ok_or_else(overflow)?;
    absolute.checked_add(length).ok_or_else(overflow)?;
    Ok(absolute)
}

/// Plan a submission. Pure and deterministic: the same input gives the same plan.
pub fn plan(reads: &[PlanRead], limits: &Limits) -> Plan {
    plan_priced(reads, limits, &[])
}

/// The largest gap group `group` joins across: its price from `prices` (indexed by group;
/// `None` or absent: unpriced), never above the gap guard.
fn gap_of(group: u32, limits: &Limits, prices: &[Option<u64>]) -> u64 {
    match prices.get(group as usize) {
        Some(Some(price)) => (*price).min(limits.max_gap),
        _ => limits.max_gap,
    }
}

/// Plan a submission with the priced trade: as [`plan`], and besides a read joins its
/// neighbour's transfer only across a gap of at most its group's price (`prices[group]`, see
/// [`price::break_even_gap`]). Adjacent and overlapping reads cost no extra byte and always
/// join while the guards hold; `max_gap == 0` still disables merging altogether. Pure and
/// deterministic.
pub fn plan_priced(reads: &[PlanRead], limits: &Limits, prices: &[Option<u64>]) -> Plan {
    plan_in(reads, limits, prices, &mut Scratch::default())
}

/// The room one plan leaves to the next: its sort keys' and its transfers'. A caller that
/// plans again and again (an engine, batch after batch) passes the same scratch to
/// [`plan_in`] and gives each plan's transfers back with [`Scratch::recycle`], so the next
/// plan writes to memory the process already has instead of fresh pages from the kernel,
/// each a page fault (the heap gives large freed blocks back to the kernel between batches).
#[derive(Debug, Default)]
pub struct Scratch {
    keys: Vec<u128>,
    transfers: Vec<PlannedTransfer>,
}

impl Scratch {
    /// Keep the room of a plan's `transfers` (emptied) for the next plan, if it holds more
    /// than the room kept already.
    pub fn recycle(&mut self, mut transfers: Vec<PlannedTransfer>) {
        if transfers.capacity() > self.transfers.capacity() {
            transfers.clear();
            self.transfers = transfers;
        }
    }

    /// The bytes of room it holds.
    pub fn bytes(&self) -> usize {
        self.keys.capacity() * size_of::<u128>()
            + self.transfers.capacity() * size_of::<PlannedTransfer>()
    }
}

/// [`plan_priced`], in the room of `scratch` (see [`Scratch`]): the plan's transfers are
/// the scratch's vector, and the sort keys live in the scratch. The same plan either way.
pub fn plan_in(
    reads: &[PlanRead],
    limits: &Limits,
    prices: &[Option<u64>],
    scratch: &mut Scratch,
) -> Plan {
    let mut rejected = Vec::new();
    // At most a transfer a read: reserved at once, so a large plan is never copied as it
    // grows (untouched room costs address space, not memory).
    let mut transfers = std::mem::take(&mut scratch.transfers);
    transfers.clear();
    transfers.reserve(reads.len());
    let mut current: Option<Open> = None;
    for (group, start, index) in sorted(reads, &mut rejected, &mut scratch.keys) {
        let read = &reads[index];
        let part = Candidate {
            group,
            start,
            length: read.length,
            index,
        };
        match current.as_mut() {
            Some(open)
                if read.mergeable && open.accepts(&part, limits, gap_of(group, limits, prices)) =>
            {
                open.add(part)
            }
            _ => {
                if let Some(done) = current.replace(Open::new(part)) {
                    transfers.push(done.close());
                }
            }
        }
    }
    if let Some(open) = current {
        transfers.push(open.close());
    }
    Plan {
        transfers,
        rejected,
    }
}

/// Fits a plan to its round trips (`planner.trade = "priced"`, the default, and `"frugal"`).
///
/// With `concurrency` requests in flight, a plan of `T` transfers takes about ⌈T /
/// concurrency⌉ round trips, and the last round has room for the transfers that would fill
/// it at no cost in wall time. This cuts the plan's merged transfers at their widest gaps,
/// the widest first, into as many more transfers as that room holds: the same rounds, fewer
/// fetched bytes. For example, 1,000 scattered reads with 64 in flight would need 16 rounds
/// unmerged; when the guards' joins bring them into 14 rounds, those rounds hold 896
/// transfers, and the merged transfers are cut at their widest gaps until the plan has that
/// many.
///
/// Only a plan of more than one round is fitted, and only at gaps of at least
/// [`FIT_MIN_GAP`]: a request of its own costs the store and the client work (and, on most
/// stores, a fee) that fetching a few more bytes within a response under way does not. A
/// small batch (a format reader's footer and a few column chunks) keeps the guards' merges,
/// bounded by them; it is the batches of many rounds, where the guards' merges buy rounds
/// with bytes, that give back the bytes of the merges the rounds do not need.
///
/// A cut only removes a gap (the pieces are the runs of parts between the cuts, each the
/// hull of its parts), so the span, parts and gap guards hold for every piece; a transfer
/// whose pieces would not all keep the amplification guard (a piece left with a gap but
/// without the useful bytes that paid for it) stays whole. The order of the transfers is
/// kept. Pure and deterministic. [`check_fitted`] is its oracle.
pub fn fit_rounds(plan: &mut Plan, limits: &Limits, concurrency: usize) {
    fit_rounds_from(plan, limits, concurrency, FIT_MIN_GAP);
}

/// The smallest gap [`fit_rounds`] cuts at: 64 KiB, half a millisecond at 1 Gbit/s.
pub const FIT_MIN_GAP: u64 = 64 << 10;

/// [`fit_rounds`], cutting gaps of at least `min_gap`.
fn fit_rounds_from(plan: &mut Plan, limits: &Limits, concurrency: usize, min_gap: u64) {
    let per_round = concurrency.max(1);
    let transfers = plan.transfers.len();
    let room = transfers.div_ceil(per_round) * per_round - transfers;
    if room == 0 || transfers <= per_round {
        return;
    }
    // Every join across a gap: (gap, transfer, the position of the part after it).
    let mut joins: Vec<(u64, usize, usize)> = Vec::new();
    for (t, transfer) in plan.transfers.iter().enumerate() {
        let mut end = 0;
        for (position, part) in transfer.parts.iter().enumerate() {
            if position > 0
                && part.offset_in_span > end
                && part.offset_in_span - end >= min_gap.max(1)
            {
                joins.push((part.offset_in_span - end, t, position));
            }
            end = end.max(part.offset_in_span + part.length);
        }
    }
    if joins.is_empty() {
        return;
    }
    // The widest `room` gaps (ties: the earlier), then in plan order.
    let widest = |a: &(u64, usize, usize), b: &(u64, usize, usize)| {
        b.0.cmp(&a.0).then((a.1, a.2).cmp(&(b.1, b.2)))
    };
    if room < joins.len() {
        joins.select_nth_unstable_by(room - 1, widest);
        joins.truncate(room);
    }
    joins.sort_unstable_by_key(|&(_, t, position)| (t, position));
    let mut fitted = Vec::with_capacity(transfers + joins.len());
    let mut cuts = joins.iter().peekable();
    let mut positions: SmallVec<[usize; 4]> = SmallVec::new();
    for (t, transfer) in std::mem::take(&mut plan.transfers).into_iter().enumerate() {
        positions.clear();
        while let Some(&&(_, at, position)) = cuts.peek() {
            if at != t {
                break;
            }
            positions.push(position);
            cuts.next();
        }
        if positions.is_empty() {
            fitted.push(transfer);
            continue;
        }
        let before = fitted.len();
        let bounds = std::iter::once(0)
            .chain(positions.iter().copied())
            .zip(positions.iter().copied().chain([transfer.parts.len()]));
        for (from, to) in bounds {
            fitted.push(piece(&transfer, from..to));
        }
        let kept = fitted[before..].iter().all(|p| {
            u128::from(p.length) <= u128::from(limits.max_amplification) * p.useful_bytes()
        });
        if !kept {
            fitted.truncate(before);
            fitted.push(transfer);
        }
    }
    plan.transfers = fitted;
}

/// The transfer of `transfer`'s parts at `positions`: the hull of those parts.
fn piece(transfer: &PlannedTransfer, positions: std::ops::Range<usize>) -> PlannedTransfer {
    let parts = &transfer.parts[positions];
    let base = parts[0].offset_in_span;
    let end = parts
        .iter()
        .map(|p| p.offset_in_span + p.length)
        .max()
        .unwrap_or(base);
    PlannedTransfer {
        group: transfer.group,
        start: transfer.start + base,
        length: end - base,
        parts: parts
            .iter()
            .map(|p| PlannedPart {
                offset_in_span: p.offset_in_span - base,
                ..*p
            })
            .collect(),
    }
}

/// The valid reads as (group, absolute offset, input index) in that order, the others added to
/// `rejected`. The keys are unique, so an unstable sort is stable.
///
/// Each key is packed into one `u128` (group, offset, index in 32, 64 and 32 bits), so a
/// comparison is one integer comparison instead of three: sorting is most of planning's work.
/// A submission of 2^32 reads or
/// more (some 200 GB of reads) sorts the tuples instead.
///
/// The packed keys are sorted in `keys` (emptied first, and emptied again as they are taken).
fn sorted<'k>(
    reads: &[PlanRead],
    rejected: &mut Vec<(usize, Error)>,
    keys: &'k mut Vec<u128>,
) -> impl Iterator<Item = (u32, u64, usize)> + use<'k> {
    sorted_by(reads, rejected, u32::try_from(reads.len()).is_ok(), keys)
}

/// [`sorted`], packing the keys or not (`pack` requires fewer than 2^32 reads).
fn sorted_by<'k>(
    reads: &[PlanRead],
    rejected: &mut Vec<(usize, Error)>,
    pack: bool,
    keys: &'k mut Vec<u128>,
) -> impl Iterator<Item = (u32, u64, usize)> + use<'k> {
    let absolute = |(index, read): (usize, &PlanRead)| match absolute_offset(read) {
        Ok(abs) => Some((read.group, abs, index)),
        Err(e) => {
            rejected.push((index, e));
            None
        }
    };
    let key = |(group, offset, index): (u32, u64, usize)| {
        (u128::from(group) << 96) | (u128::from(offset) << 32) | index as u128
    };
    keys.clear();
    let wide = if pack {
        // Reserved at once: most reads are valid, and a vector grown by doubling is copied.
        keys.reserve(reads.len());
        keys.extend(reads.iter().enumerate().filter_map(absolute).map(key));
        keys.sort_unstable();
        Vec::new()
    } else {
        let mut order: Vec<(u32, u64, usize)> =
            reads.iter().enumerate().filter_map(absolute).collect();
        order.sort_unstable();
        order
    };
    let unpacked = keys
        .drain(..)
        .map(|k| ((k >> 96) as u32, (k >> 32) as u64, (k as u32) as usize));
    unpacked.chain(wide)
}

struct Candidate {
    group: u32,
    start: u64,
    length: u64,
    index: usize,
}

/// A transfer being built by the sweep.
struct Open {
    group: u32,
    start: u64,
    /// Exclusive end of the span so far.
    end: u64,
    useful: u128,
    parts: SmallVec<[PlannedPart; 1]>,
}

impl Open {
    fn new(c: Candidate) -> Self {
        Open {
            group: c.group,
            start: c.start,
            end: c.start + c.length,
            useful: u128::from(c.length),
            parts: smallvec![PlannedPart {
                index: c.index,
                offset_in_span: 0,
                length: c.length,
            }],
        }
    }

    /// Whether all four guards hold with `c` added, and its gap is at most `max_gap` (the
    /// gap guard, or the group's price below it).
    fn accepts(&self, c: &Candidate, limits: &Limits, max_gap: u64) -> bool {
        if c.group != self.group || limits.max_gap == 0 {
            return false;
        }
        let gap = c.start.saturating_sub(self.end);
        if gap > limits.max_gap || gap > max_gap {
            return false;
        }
        let new_end = self.end.max(c.start + c.length);
        let span = new_end - self.start;
        if span > limits.max_span {
            return false;
        }
        if self.parts.len() >= limits.max_parts as usize {
            return false;
        }
        let useful = self.useful + u128::from(c.length);
        u128::from(span) <= u128::from(limits.max_amplification) * useful
    }

    fn add(&mut self, c: Candidate) {
        self.parts.push(PlannedPart {
            index: c.index,
            offset_in_span: c.start - self.start,
            length: c.length,
        });
        self.end = self.end.max(c.start + c.length);
        self.useful += u128::from(c.length);
    }

    fn close(self) -> PlannedTransfer {
        PlannedTransfer {
            group: self.group,
            start: self.start,
            length: self.end - self.start,
            parts: self.parts,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_guards_are_the_contracts() {
        assert_eq!(
            Limits::default(),
            Limits {
                max_gap: 1_048_576,
                max_span: 67_108_864,
                max_parts: 1024,
                max_amplification: 16,
            }
        );
    }

    fn r(offset: u64, length: u64) -> PlanRead {
        PlanRead {
            group: 0,
            mergeable: true,
            offset,
            length,
            window: None,
        }
    }

    const MIB: u64 = 1 << 20;

    fn spans(p: &Plan) -> Vec<(u64, u64, usize)> {
        p.transfers
            .iter()
            .map(|t| (t.start, t.length, t.parts.len()))
            .collect()
    }

    #[test]
    fn gap_guard_boundary() {
        // Isolate the gap guard: amplification would otherwise refuse a 1 MiB gap.
        let limits = Limits {
            max_amplification: u32::MAX,
            ..Limits::default()
        };
        // Exactly at the limit merges.
        let p = plan(&[r(0, 4096), r(4096 + MIB, 4096)], &limits);
        assert_eq!(spans(&p), vec![(0, 2 * 4096 + MIB, 2)]);
        // One past does not.
        let p = plan(&[r(0, 4096), r(4096 + MIB + 1, 4096)], &limits);
        assert_eq!(spans(&p), vec![(0, 4096, 1), (4097 + MIB, 4096, 1)]);
    }

    #[test]
    fn zero_gap_disables_merging_even_for_adjacent_and_overlapping_reads() {
        let limits = Limits {
            max_gap: 0,
            ..Limits::default()
        };
        let p = plan(&[r(0, 10), r(10, 10), r(5, 10)], &limits);
        assert_eq!(spans(&p), vec![(0, 10, 1), (5, 10, 1), (10, 10, 1)]);
    }

    #[test]
    fn span_guard_boundary() {
        let limits = Limits {
            max_span: 100,
            ..Limits::default()
        };
        let p = plan(&[r(0, 50), r(60, 40)], &limits);
        assert_eq!(spans(&p), vec![(0, 100, 2)]);
        let p = plan(&[r(0, 50), r(60, 41)], &limits);
        assert_eq!(spans(&p), vec![(0, 50, 1), (60, 41, 1)]);
    }

    #[test]
    fn a_single_read_larger_than_the_span_stands_alone() {
        let limits = Limits {
            max_span: 100,
            ..Limits::default()
        };
        let p = plan(&[r(0, 1000), r(10, 5)], &limits);
        assert_eq!(spans(&p), vec![(0, 1000, 1), (10, 5, 1)]);
    }

    #[test]
    fn parts_guard_boundary() {
        let limits = Limits {
            max_parts: 3,
            ..Limits::default()
        };
        let p = plan(&[r(0, 1), r(1, 1), r(2, 1)], &limits);
        assert_eq!(spans(&p), vec![(0, 3, 3)]);
        let p = plan(&[r(0, 1), r(1, 1), r(2, 1), r(3, 1)], &limits);
        assert_eq!(spans(&p), vec![(0, 3, 3), (3, 1, 1)]);
    }

    #[test]
    fn amplification_guard_boundary() {
        let limits = Limits {
            max_amplification: 4,
            ..Limits::default()
        };
        // Useful 2, span 8: exactly 4x.
        let p = plan(&[r(0, 1), r(7, 1)], &limits);
        assert_eq!(spans(&p), vec![(0, 8, 2)]);
        // Span 9: one past.
        let p = plan(&[r(0, 1), r(8, 1)], &limits);
        assert_eq!(spans(&p), vec![(0, 1, 1), (8, 1, 1)]);
    }

    #[test]
    fn overlapping_reads_count_useful_bytes_separately() {
        let limits = Limits {
            max_amplification: 1,
            ..Limits::default()
        };
        // Two identical reads: span 10, useful 20 → merge allowed even at amplification 1.
        let p = plan(&[r(0, 10), r(0, 10)], &limits);
        assert_eq!(spans(&p), vec![(0, 10, 2)]);
        assert_eq!(p.requested_bytes(), 20);
        assert_eq!(p.fetched_bytes(), 10);
    }

    #[test]
    fn groups_never_merge_and_come_out_in_rank_order() {
        let mut b = r(0, 10);
        b.group = 1;
        let mut a = r(10, 10);
        a.group = 0;
        let p = plan(&[b, a], &Limits::default());
        assert_eq!(
            p.transfers
                .iter()
                .map(|t| (t.group, t.start))
                .collect::<Vec<_>>(),
            vec![(0, 10), (1, 0)]
        );
    }

    #[test]
    fn unmergeable_groups_give_one_transfer_per_read() {
        let mut a = r(0, 10);
        a.mergeable = false;
        let p = plan(&[a, a, a], &Limits::default());
        assert_eq!(p.transfers.len(), 3);
        let indices: Vec<usize> = p.transfers.iter().map(|t| t.parts[0].index).collect();
        assert_eq!(indices, vec![0, 1, 2], "ties keep input order");
    }

    #[test]
    fn invalid_reads_get_their_own_status_and_others_go_on() {
        let window = Some(Window {
            start: 100,
            len: Some(50),
        });
        let reads = [
            r(0, 0),
            r(0, UNBOUNDED),
            r(u64::MAX - 5, 10),
            PlanRead {
                window,
                ..r(40, 11)
            },
            PlanRead {
                window,
                ..r(40, 10)
            },
            PlanRead {
                window: Some(Window {
                    start: u64::MAX - 5,
                    len: None,
                }),
                ..r(3, 3)
            },
            r(7, 1),
        ];
        let p = plan(&reads, &Limits::default());
        let rejected: Vec<(usize, Status)> =
            p.rejected.iter().map(|(i, e)| (*i, e.status())).collect();
        assert_eq!(
            rejected,
            vec![
                (0, Status::InvalidRange),
                (1, Status::InvalidRange),
                (2, Status::InvalidRange),
                (3, Status::InvalidRange),
                (5, Status::InvalidRange),
            ]
        );
        // Each rejection is its read's own, before any I/O: none of them is in a transfer.
        let planned: Vec<usize> = p
            .transfers
            .iter()
            .flat_map(|t| &t.parts)
            .map(|x| x.index)
            .collect();
        assert!(p.rejected.iter().all(|(i, _)| !planned.contains(i)));
        // The windowed read is converted to absolute offset 140 and merges with read 6 at 7.
        assert_eq!(spans(&p), vec![(7, 143, 2)]);
        assert_eq!(p.transfers[0].parts[1].offset_in_span, 133);
    }

    #[test]
    fn the_plan_check_refuses_wrong_plans() {
        let reads = [r(0, 10), r(20, 10), r(0, 0), r(100, 5)];
        let limits = Limits {
            max_gap: 50,
            ..Limits::default()
        };
        let good = plan(&reads, &limits);
        assert_eq!(spans(&good), vec![(0, 30, 2), (100, 5, 1)]);
        check(&reads, &limits, &good).unwrap();

        let mut wrong = Vec::new();
        let mut p = good.clone();
        p.transfers[0].parts[1].offset_in_span += 1; // a byte off
        wrong.push(p);
        let mut p = good.clone();
        p.transfers[0].parts.pop(); // a read lost
        p.transfers[0].length = 10;
        wrong.push(p);
        let mut p = good.clone();
        p.rejected.clear(); // an invalid read neither rejected nor planned
        wrong.push(p);
        let mut p = good.clone();
        p.transfers[0].length += 1; // more than the hull
        wrong.push(p);
        let mut p = good.clone();
        p.transfers.swap(0, 1); // out of order
        wrong.push(p);
        let mut p = good.clone(); // closed though the next read could join
        let second = p.transfers[0].parts.pop().unwrap();
        p.transfers[0].length = 10;
        p.transfers.insert(
            1,
            PlannedTransfer {
                group: 0,
                start: 20,
                length: 10,
                parts: smallvec![PlannedPart {
                    offset_in_span: 0,
                    ..second
                }],
            },
        );
        wrong.push(p);
        for (i, p) in wrong.iter().enumerate() {
            assert!(check(&reads, &limits, p).is_err(), "wrong plan {i} passed");
        }
        // Merged past a guard.
        let tight = Limits {
            max_span: 29,
            ..limits
        };
        assert!(check(&reads, &tight, &good).is_err());
    }

    #[test]
    fn read_ending_exactly_at_u64_max_is_valid() {
        let p = plan(&[r(u64::MAX - 10, 10)], &Limits::default());
        assert!(p.rejected.is_empty());
        assert_eq!(spans(&p), vec![(u64::MAX - 10, 10, 1)]);
    }

    /// `scattered`: `n` × 4 KiB at uniform offsets of 1 GiB (xorshift, seeded).
    fn scattered(n: usize, seed: u64) -> Vec<PlanRead> {
        let mut x = seed.max(1);
        (0..n)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                r(x % ((1 << 30) - 4096), 4096)
            })
            .collect()
    }

    fn amplification(p: &Plan) -> f64 {
        p.fetched_bytes() as f64 / p.requested_bytes() as f64
    }

    #[test]
    fn a_plan_fitted_to_its_rounds_keeps_them_and_fetches_less() {
        let limits = Limits::default();
        for seed in [1, 42, 1234] {
            let reads = scattered(1_000, seed);
            let guards = plan(&reads, &limits);
            let mut fitted = guards.clone();
            fit_rounds(&mut fitted, &limits, 64);
            assert_eq!(
                check_fitted(&reads, &limits, &[], &guards, 64, &fitted),
                Ok(())
            );
            let rounds = |p: &Plan| p.transfers.len().div_ceil(64);
            assert_eq!(rounds(&fitted), rounds(&guards), "seed {seed}");
            // The guards fetch 2.6-3.2 × the bytes asked here; the same rounds need < 2.5.
            assert!(
                amplification(&guards) > 2.5,
                "seed {seed}: {}",
                amplification(&guards)
            );
            assert!(
                amplification(&fitted) <= 2.5,
                "seed {seed}: {}",
                amplification(&fitted)
            );
            // Every place of the last round filled.
            assert_eq!(fitted.transfers.len(), rounds(&guards) * 64, "seed {seed}");
        }
    }

    #[test]
    fn small_gaps_and_one_round_plans_stay_joined() {
        let limits = Limits::default();
        // Three 100 B reads 1 KiB apart, two 64 KiB apart, one far: two rounds of two with
        // room for one more transfer, which only the 64 KiB gap is worth.
        let reads = [
            r(0, 100),
            r(1100, 100),
            r(2200, 100),
            r(MIB, 100),
            r(MIB + 100 + FIT_MIN_GAP, 100),
            r(100 * MIB, 100),
        ];
        let guards = plan(&reads, &limits);
        let mut p = guards.clone();
        fit_rounds(&mut p, &limits, 2);
        assert_eq!(
            spans(&p),
            vec![
                (0, 2300, 3),
                (MIB, 100, 1),
                (MIB + 100 + FIT_MIN_GAP, 100, 1),
                (100 * MIB, 100, 1)
            ]
        );
        assert_eq!(check_fitted(&reads, &limits, &[], &guards, 2, &p), Ok(()));
        // All in one round of 64: the guards' merges stay.
        let mut p = guards.clone();
        fit_rounds(&mut p, &limits, 64);
        assert_eq!(p, guards);
    }

    #[test]
    fn a_full_last_round_or_no_gap_leaves_the_plan_as_it_is() {
        let limits = Limits::default();
        // 128 transfers fill two rounds of 64.
        let apart: Vec<PlanRead> = (0..128).map(|i| r(i * 2 * MIB, 10)).collect();
        let mut p = plan(&apart, &limits);
        let before = p.clone();
        fit_rounds(&mut p, &limits, 64);
        assert_eq!(p, before);
        // Adjacent reads: one transfer with room for 63 more, but no gap to cut at.
        let adjacent: Vec<PlanRead> = (0..8).map(|i| r(i * 100, 100)).collect();
        let mut p = plan(&adjacent, &limits);
        let before = p.clone();
        fit_rounds(&mut p, &limits, 64);
        assert_eq!(p, before);
    }

    #[test]
    fn a_cut_that_would_break_the_amplification_guard_is_not_made() {
        let limits = Limits::default();
        // 1 MiB, 600 KB apart a 4 KiB read, 500 KB apart another: the 1 MiB read pays for
        // both gaps. Cut at the widest (600 KB), the two small reads would fetch 63 × their
        // bytes. `far` reads far apart make the plan longer than a round.
        let reads = |far: u64| {
            let mut reads = vec![
                r(0, MIB),
                r(MIB + 600_000, 4096),
                r(MIB + 604_096 + 500_000, 4096),
            ];
            reads.extend((1..=far).map(|i| r(i * 100 * MIB, 10)));
            reads
        };
        // Five transfers in two rounds of three: room for one cut, at the widest gap, which
        // is not made.
        let five = reads(4);
        let guards = plan(&five, &limits);
        assert_eq!(guards.transfers.len(), 5);
        let mut fitted = guards.clone();
        fit_rounds(&mut fitted, &limits, 3);
        assert_eq!(fitted, guards);
        // Four transfers in two rounds of three: room for both cuts; each piece stands alone.
        let four = reads(3);
        let guards = plan(&four, &limits);
        let mut fitted = guards.clone();
        fit_rounds(&mut fitted, &limits, 3);
        assert_eq!(spans(&fitted).len(), 6);
        assert_eq!(
            check_fitted(&four, &limits, &[], &guards, 3, &fitted),
            Ok(())
        );
    }
}

#[cfg(test)]
mod properties {
    use super::*;
    use proptest::prelude::*;

    fn arb_offset() -> impl Strategy<Value = u64> {
        prop_oneof![
            0u64..4096,
            0u64..(64 << 20),
            (u64::MAX - 4096)..=u64::MAX,
            any::<u64>(),
        ]
    }

    fn arb_length() -> impl Strategy<Value = u64> {
        prop_oneof![
            Just(0u64),
            Just(UNBOUNDED),
            1u64..64,
            1u64..(2 << 20),
            any::<u64>(),
        ]
    }

    fn arb_window() -> impl Strategy<Value = Option<Window>> {
        prop_oneof![
            Just(None),
            (0u64..1 << 20, proptest::option::of(0u64..1 << 20))
                .prop_map(|(start, len)| Some(Window { start, len })),
            (any::<u64>(), proptest::option::of(any::<u64>()))
                .prop_map(|(start, len)| Some(Window { start, len })),
        ]
    }

    fn arb_read() -> impl Strategy<Value = PlanRead> {
        (0u32..3, arb_offset(), arb_length(), arb_window()).prop_map(
            |(group, offset, length, window)| PlanRead {
                group,
                mergeable: group != 2,
                offset,
                length,
                window,
            },
        )
    }

    /// Batches with duplicates, adjacent and overlapping reads derived from earlier ones.
    fn arb_batch() -> impl Strategy<Value = Vec<PlanRead>> {
        proptest::collection::vec(arb_read(), 0..60).prop_flat_map(|base| {
            let n = base.len();
            let derived = proptest::collection::vec((0..n.max(1), 0u8..4, 0u64..5000), 0..40);
            (Just(base), derived).prop_map(|(mut reads, derived)| {
                if reads.is_empty() {
                    return reads;
                }
                for (from, how, delta) in derived {
                    let mut d = reads[from];
                    match how {
                        0 => {}                                          // duplicate
                        1 => d.offset = d.offset.wrapping_add(d.length), // adjacent
                        2 => d.offset = d.offset.wrapping_add(delta),    // overlapping or near
                        _ => d.length = delta,
                    }
                    reads.push(d);
                }
                reads
            })
        })
    }

    fn arb_limits() -> impl Strategy<Value = Limits> {
        (
            prop_oneof![Just(0u64), 1u64..100, Just(1 << 20), any::<u64>()],
            prop_oneof![1u64..200, Just(64 << 20), any::<u64>()],
            1u32..8,
            1u32..20,
        )
            .prop_map(|(max_gap, max_span, max_parts, max_amplification)| Limits {
                max_gap,
                max_span,
                max_parts,
                max_amplification,
            })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]

        #[test]
        fn plans_are_correct(reads in arb_batch(), limits in prop_oneof![Just(Limits::default()), arb_limits()]) {
            let p = plan(&reads, &limits);
            if let Err(why) = check(&reads, &limits, &p) {
                return Err(TestCaseError::fail(why));
            }
        }

        /// A plan fitted to its rounds keeps every read, the guards and the rounds.
        #[test]
        fn fitted_plans_are_correct(
            reads in arb_batch(),
            limits in prop_oneof![Just(Limits::default()), arb_limits()],
            concurrency in 1usize..12,
            min_gap in prop_oneof![Just(1u64), Just(FIT_MIN_GAP), 1u64..5000],
        ) {
            let p = plan(&reads, &limits);
            let mut fitted = p.clone();
            fit_rounds_from(&mut fitted, &limits, concurrency, min_gap);
            if let Err(why) = check_fitted(&reads, &limits, &[], &p, concurrency, &fitted) {
                return Err(TestCaseError::fail(why));
            }
        }

        /// The packed sort keys (every submission of fewer than 2^32 reads) and the tuples
        /// (larger ones) put the reads in the same order and reject the same ones.
        #[test]
        fn packed_and_tuple_orders_agree(reads in arb_batch(), high in any::<u32>()) {
            let reads: Vec<PlanRead> = reads
                .into_iter()
                .map(|r| PlanRead { group: r.group.wrapping_mul(high), ..r })
                .collect();
            let (mut packed_rejected, mut wide_rejected) = (Vec::new(), Vec::new());
            // Keys left from an earlier plan are not this one's.
            let mut stale = vec![u128::MAX; 3];
            let packed: Vec<_> = sorted_by(&reads, &mut packed_rejected, true, &mut stale).collect();
            let wide: Vec<_> = sorted_by(&reads, &mut wide_rejected, false, &mut stale).collect();
            prop_assert_eq!(&packed, &wide);
            prop_assert!(packed.windows(2).all(|w| w[0] < w[1]));
            let rejected = |r: &[(usize, Error)]| r.iter().map(|(i, _)| *i).collect::<Vec<_>>();
            prop_assert_eq!(rejected(&packed_rejected), rejected(&wide_rejected));
            prop_assert_eq!(packed.len() + packed_rejected.len(), reads.len());
        }

        /// Planning batch after batch in one scratch, each plan's transfers given back to it,
        /// makes the plans planning each batch afresh makes.
        #[test]
        fn plans_in_a_reused_scratch_are_the_same(
            batches in proptest::collection::vec(arb_batch(), 1..5),
            limits in prop_oneof![Just(Limits::default()), arb_limits()],
        ) {
            let mut scratch = Scratch::default();
            for reads in &batches {
                let reused = plan_in(reads, &limits, &[], &mut scratch);
                prop_assert_eq!(&reused, &plan(reads, &limits));
                let room = reused.transfers.capacity();
                scratch.recycle(reused.transfers);
                prop_assert!(scratch.bytes() >= room * size_of::<PlannedTransfer>());
            }
        }

        /// Every priced plan covers every read exactly once, stays inside all four guards and
        /// its groups' prices, and closes a transfer only where a guard or a price says so.
        #[test]
        fn priced_plans_are_correct(
            reads in arb_batch(),
            limits in prop_oneof![Just(Limits::default()), arb_limits()],
            prices in proptest::collection::vec(
                proptest::option::of(prop_oneof![Just(0u64), 0u64..10_000, any::<u64>()]),
                0..4,
            ),
        ) {
            let p = plan_priced(&reads, &limits, &prices);
            if let Err(why) = check_priced(&reads, &limits, &prices, &p) {
                return Err(TestCaseError::fail(why));
            }
        }
    }
}
