//! The planner's oracle: whether a plan is a correct plan of its reads under the four guards
//! (and the priced trade's prices), checked property by property and independently of how the
//! planner builds one. Pure, like the planner.

use super::{Candidate, Limits, Open, Plan, PlanRead, gap_of, plan_priced};
use crate::sdk::{Status, UNBOUNDED};

/// Fail the check with a message when `cond` does not hold.
macro_rules! ensure {
    ($cond:expr, $($why:tt)+) => {
        if !$cond {
            return Err(format!($($why)+));
        }
    };
}

/// Check that `plan` is a correct plan of `reads` under `limits`: every read rejected (with
/// [`Status::InvalidRange`], and only if it is invalid) or in exactly one transfer at its
/// absolute position; every span the exact hull of its parts, parts in offset order; every
/// merged transfer within all four guards; a transfer closed only where adding the next read
/// of its group would break a guard; transfers in (group, offset) order; and planning again
/// gives the same plan. `Err` says which property failed.
///
/// The planner's property test and the `plan` fuzz target share it; a program that plans
/// reads itself (or changes the planner) can check its plans with it too.
///
/// ```
/// use karu_engine::plan::{Limits, PlanRead, check, plan};
///
/// let read = |offset| PlanRead { group: 0, mergeable: true, offset, length: 10, window: None };
/// let reads = [read(0), read(20), read(5_000_000)];
/// let limits = Limits::default();
/// let good = plan(&reads, &limits);
/// assert_eq!(good.transfers.len(), 2); // 0 and 20 merge; 5 MB away does not
/// assert_eq!(check(&reads, &limits, &good), Ok(()));
/// let mut bad = good.clone();
/// bad.transfers[0].length += 1;
/// assert!(check(&reads, &limits, &bad).is_err());
/// ```
pub fn check(reads: &[PlanRead], limits: &Limits, plan: &Plan) -> Result<(), String> {
    check_priced(reads, limits, &[], plan)
}

/// [`check`] of a plan made by [`plan_priced`] with `prices`: besides, no merged gap exceeds
/// its group's price, and a transfer closes only where a guard or the price stops the next
/// read.
pub fn check_priced(
    reads: &[PlanRead],
    limits: &Limits,
    prices: &[Option<u64>],
    plan: &Plan,
) -> Result<(), String> {
    check_parts(reads, limits, prices, plan)?;
    check_closed(reads, limits, prices, plan)?;
    if &plan_priced(reads, limits, prices) != plan {
        return Err("planning again differs".into());
    }
    Ok(())
}

/// Every read rejected (rightly) or in exactly one transfer at its position, every transfer
/// the hull of its parts and within the guards and prices.
fn check_parts(
    reads: &[PlanRead],
    limits: &Limits,
    prices: &[Option<u64>],
    plan: &Plan,
) -> Result<(), String> {
    // Every read is rejected or lands in exactly one transfer.
    let mut seen = vec![0u32; reads.len()];
    for (i, _) in &plan.rejected {
        ensure!(*i < reads.len(), "rejected index {i} out of range");
        seen[*i] += 1;
    }
    for t in &plan.transfers {
        for part in &t.parts {
            ensure!(
                part.index < reads.len(),
                "part index {} out of range",
                part.index
            );
            seen[part.index] += 1;
        }
    }
    ensure!(seen.iter().all(|&n| n == 1), "coverage {seen:?}");
    ensure!(
        plan.rejected.windows(2).all(|w| w[0].0 < w[1].0),
        "rejections out of input order"
    );

    // Rejections are exactly the invalid reads, with InvalidRange.
    for (i, e) in &plan.rejected {
        ensure!(
            e.status() == Status::InvalidRange,
            "read {i} rejected with {e}"
        );
        let read = &reads[*i];
        ensure!(!is_valid(read), "valid read {read:?} rejected: {e}");
    }

    for t in &plan.transfers {
        ensure!(!t.parts.is_empty(), "a transfer without parts");
        ensure!(t.length >= 1, "an empty transfer");
        ensure!(
            t.start.checked_add(t.length).is_some(),
            "transfer {}+{} overflows",
            t.start,
            t.length
        );
        // Every part is valid, at its right position, inside the span.
        for part in &t.parts {
            let read = &reads[part.index];
            ensure!(is_valid(read), "invalid read {read:?} planned");
            ensure!(
                read.group == t.group,
                "read {} in another group",
                part.index
            );
            let abs = read.window.map_or(0, |w| w.start) + read.offset;
            ensure!(
                t.start + part.offset_in_span == abs,
                "read {} placed at {} instead of {abs}",
                part.index,
                t.start + part.offset_in_span
            );
            ensure!(part.length == read.length, "read {} resized", part.index);
            ensure!(
                part.offset_in_span + part.length <= t.length,
                "read {} leaves its span",
                part.index
            );
        }
        // The span is exactly the hull of its parts, parts sorted by offset.
        let end = t
            .parts
            .iter()
            .map(|p| p.offset_in_span + p.length)
            .max()
            .unwrap_or(0);
        ensure!(end == t.length, "span {} is not the hull {end}", t.length);
        ensure!(
            t.parts[0].offset_in_span == 0,
            "the span starts before its first part"
        );
        ensure!(
            t.parts
                .windows(2)
                .all(|w| (w[0].offset_in_span, w[0].index) < (w[1].offset_in_span, w[1].index)),
            "parts out of (offset, input) order"
        );
        // Merged transfers obey every guard.
        if t.parts.len() > 1 {
            ensure!(limits.max_gap > 0, "merged with merging disabled");
            ensure!(
                t.parts.iter().all(|p| reads[p.index].mergeable),
                "an unmergeable read merged"
            );
            ensure!(
                t.length <= limits.max_span,
                "span {} over the limit",
                t.length
            );
            ensure!(
                t.parts.len() <= limits.max_parts as usize,
                "{} parts over the limit",
                t.parts.len()
            );
            ensure!(
                u128::from(t.length) <= u128::from(limits.max_amplification) * t.useful_bytes(),
                "amplification over the limit"
            );
            let mut hull_end = t.parts[0].length;
            let priced = gap_of(t.group, limits, prices);
            for part in &t.parts[1..] {
                let gap = part.offset_in_span.saturating_sub(hull_end);
                ensure!(gap <= limits.max_gap, "gap over the limit");
                ensure!(gap <= priced, "gap {gap} over the price {priced}");
                hull_end = hull_end.max(part.offset_in_span + part.length);
            }
        }
    }

    Ok(())
}

/// Check that `fitted` is `plan` (a plan [`check_priced`] accepts) fitted to its round trips
/// with `concurrency` in flight ([`fit_rounds`](super::fit_rounds)): every read in exactly one
/// transfer at its position, every transfer the hull of its parts and within the four
/// guards, in (group, offset) order; no more round trips than `plan` takes, no more fetched
/// bytes, and every transfer of `fitted` either one of `plan`'s or a run of one of `plan`'s
/// transfers cut only where a gap lies.
pub fn check_fitted(
    reads: &[PlanRead],
    limits: &Limits,
    prices: &[Option<u64>],
    plan: &Plan,
    concurrency: usize,
    fitted: &Plan,
) -> Result<(), String> {
    check_parts(reads, limits, prices, fitted)?;
    ensure!(fitted.rejected == plan.rejected, "other rejections");
    ensure!(
        fitted
            .transfers
            .windows(2)
            .all(|w| (w[0].group, w[0].start) <= (w[1].group, w[1].start)),
        "transfers out of order"
    );
    let per_round = concurrency.max(1);
    ensure!(
        fitted.transfers.len().div_ceil(per_round) <= plan.transfers.len().div_ceil(per_round),
        "{} transfers take more rounds than {}",
        fitted.transfers.len(),
        plan.transfers.len()
    );
    ensure!(
        fitted.fetched_bytes() <= plan.fetched_bytes(),
        "more bytes fetched"
    );
    let mut pieces = fitted.transfers.iter();
    for t in &plan.transfers {
        let mut position = 0;
        while position < t.parts.len() {
            let Some(p) = pieces.next() else {
                return Err("a transfer's parts missing".into());
            };
            let run = &t.parts[position..position + p.parts.len().min(t.parts.len() - position)];
            ensure!(
                run.len() == p.parts.len()
                    && run.iter().zip(&p.parts).all(|(a, b)| a.index == b.index),
                "transfer at {} is not a run of the plan's transfer at {}",
                p.start,
                t.start
            );
            if position > 0 {
                let end = t.parts[..position]
                    .iter()
                    .map(|q| q.offset_in_span + q.length)
                    .max()
                    .unwrap_or(0);
                ensure!(
                    run[0].offset_in_span > end,
                    "transfer at {} cut where no gap lies",
                    t.start
                );
            }
            position += run.len();
        }
    }
    ensure!(pieces.next().is_none(), "transfers beyond the plan's");
    Ok(())
}

/// Transfers come out in (group, start) order, and one closes only where a guard (or an
/// unmergeable read) stops the next read of its group from joining it.
fn check_closed(
    reads: &[PlanRead],
    limits: &Limits,
    prices: &[Option<u64>],
    plan: &Plan,
) -> Result<(), String> {
    for w in plan.transfers.windows(2) {
        let (a, b) = (&w[0], &w[1]);
        ensure!(
            (a.group, a.start) <= (b.group, b.start),
            "transfers out of order"
        );
        if a.group == b.group {
            let next = &reads[b.parts[0].index];
            let last = &reads[a.parts[a.parts.len() - 1].index];
            let open = Open {
                group: a.group,
                start: a.start,
                end: a.start + a.length,
                useful: a.useful_bytes(),
                parts: a.parts.clone(),
            };
            let candidate = Candidate {
                group: b.group,
                start: b.start,
                length: next.length,
                index: b.parts[0].index,
            };
            let gap = gap_of(a.group, limits, prices);
            ensure!(
                !(next.mergeable && last.mergeable && open.accepts(&candidate, limits, gap)),
                "transfer at {} closed though read {} could join it",
                a.start,
                b.parts[0].index
            );
        }
    }

    Ok(())
}

/// Whether a read passes validation (the contract's rules, written independently of
/// [`absolute_offset`](super::absolute_offset)).
fn is_valid(read: &PlanRead) -> bool {
    read.length != 0
        && read.length != UNBOUNDED
        && read.offset.checked_add(read.length).is_some_and(|end| {
            read.window.is_none_or(|w| {
                w.len.is_none_or(|l| end <= l) && w.start.checked_add(end).is_some()
            })
        })
}
