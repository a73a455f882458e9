//! The price of a gap (`planner.trade = "priced"`): a gap is worth fetching when moving its
//! bytes costs less time than the request it saves.
//!
//! Pure: a function of what the client measured for an endpoint, passed in as [`Measured`]
//! (the transport keeps it, see `http::endpoint`); no clock and no input or output here.
//!
//! The model. With `concurrency` requests in flight, a request occupies one of them for a
//! round trip, so each request costs the batch `rtt / concurrency` of wall time, and each byte
//! costs `1 / capacity`, where `capacity` is what the endpoint delivers to all connections
//! together. Joining a read across a gap of `g` bytes saves one request and fetches `g` more
//! bytes: it pays when `g / capacity < rtt / concurrency`, that is when `g` is below
//! `rtt × (capacity / concurrency)`: the round trip times the throughput one of `concurrency`
//! busy connections gets. On loopback (about 1 GB/s, 20 ms, 64 connections) that is ~300 KB,
//! above what the amplification guard lets 4 KiB reads join across anyway; on a 1 Gbit/s
//! link it is ~39 KB, and merging 4 KiB reads up to 1 MiB apart (many times the useful bytes)
//! stops.

use std::time::Duration;

/// What the client measured for one endpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Measured {
    /// Round-trip latency: from sending a request to the head of its response.
    pub rtt: Duration,
    /// Bytes per second one connection receives when all of the client's concurrency is busy
    /// on the endpoint (its observed capacity shared by the connections).
    pub throughput: u64,
}

/// The largest gap worth fetching instead of a request of its own: the bytes one busy
/// connection receives in one round trip (`rtt × throughput`), saturating at `u64::MAX`.
pub fn break_even_gap(measured: &Measured) -> u64 {
    let bytes = measured
        .rtt
        .as_nanos()
        .saturating_mul(u128::from(measured.throughput))
        / 1_000_000_000;
    u64::try_from(bytes).unwrap_or(u64::MAX)
}

/// The largest gap worth fetching, from its price in time (`time`, [`break_even_gap`]) and in
/// money (`money`, the bytes whose egress costs one request's fee, where the store bills
/// reads): a gap worth either a request's time or its fee is worth fetching. Money only
/// widens what time allows; the four guards still bound every join.
pub fn worth_fetching(time: u64, money: Option<u64>) -> u64 {
    money.map_or(time, |money| time.max(money))
}

/// The throughput one of `connections` busy connections gets from an endpoint that delivers
/// `capacity` bytes per second to all of them together (`connections` of 0 counts as 1).
pub fn share(capacity: u64, connections: usize) -> u64 {
    capacity / (connections.max(1) as u64)
}

/// Where a merged span comes apart when its gaps are priced again as it starts (a plan made
/// before the endpoint was measured, or with an older measurement): the positions of the parts
/// that open a new piece. `parts` are the span's parts as (offset in the span, length), in span
/// order; a part opens a piece when the gap from the end of every part before it to its start
/// is above `price`, the rule [`plan_priced`](super::plan_priced) joins by. Empty when the
/// span stays whole. Cutting only ever removes gaps, so every piece stays within the guards.
pub fn cuts(parts: impl IntoIterator<Item = (u64, u64)>, price: u64) -> Vec<usize> {
    let mut cuts = Vec::new();
    let mut end: Option<u64> = None;
    for (position, (offset, length)) in parts.into_iter().enumerate() {
        if let Some(end) = end
            && offset.saturating_sub(end) > price
        {
            cuts.push(position);
        }
        let part_end = offset.saturating_add(length);
        end = Some(end.map_or(part_end, |e| e.max(part_end)));
    }
    cuts
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::{Limits, PlanRead, check_priced, plan, plan_priced};

    const MS: Duration = Duration::from_millis(1);

    /// The benchmarks' link model: 20 ms, 1 Gbit/s shared by 64 connections.
    fn link() -> Measured {
        Measured {
            rtt: 20 * MS,
            throughput: share(125_000_000, 64),
        }
    }

    /// Loopback as measured here: 20 ms of server latency, about 1.6 GB/s in all.
    fn loopback() -> Measured {
        Measured {
            rtt: 20 * MS,
            throughput: share(1_600_000_000, 64),
        }
    }

    #[test]
    fn the_break_even_gap_is_a_round_trip_of_one_connections_share() {
        assert_eq!(share(125_000_000, 64), 1_953_125);
        assert_eq!(break_even_gap(&link()), 39_062);
        assert_eq!(break_even_gap(&loopback()), 500_000);
        // No latency: a request costs nothing, so only free joins (adjacent, overlapping).
        let instant = Measured {
            rtt: Duration::ZERO,
            throughput: u64::MAX,
        };
        assert_eq!(break_even_gap(&instant), 0);
        // Saturates instead of wrapping.
        let huge = Measured {
            rtt: Duration::from_secs(u64::MAX),
            throughput: u64::MAX,
        };
        assert_eq!(break_even_gap(&huge), u64::MAX);
        assert_eq!(share(1000, 0), 1000, "no connections counts as one");
    }

    #[test]
    fn a_gap_worth_a_requests_time_or_its_fee_is_worth_fetching() {
        // No latency: time fetches no gap; S3's fee makes 4,772 bytes worth a request.
        assert_eq!(worth_fetching(0, Some(4_772)), 4_772);
        // On the link, time's 39 KB is the wider.
        assert_eq!(worth_fetching(39_062, Some(4_772)), 39_062);
        // A store that bills nothing, or no price list: time alone.
        assert_eq!(worth_fetching(39_062, None), 39_062);
        // Free egress: every gap the guards allow.
        assert_eq!(worth_fetching(0, Some(u64::MAX)), u64::MAX);
    }

    fn r(offset: u64) -> PlanRead {
        PlanRead {
            group: 0,
            mergeable: true,
            offset,
            length: 4096,
            window: None,
        }
    }

    #[test]
    fn a_gap_joins_up_to_its_price_and_not_one_byte_more() {
        let limits = Limits::default();
        let price = break_even_gap(&link());
        let at = |gap: u64| [r(0), r(4096 + gap)];
        let joined = plan_priced(&at(price), &limits, &[Some(price)]);
        assert_eq!(joined.transfers.len(), 1);
        assert_eq!(joined.fetched_bytes(), u128::from(2 * 4096 + price));
        let apart = plan_priced(&at(price + 1), &limits, &[Some(price)]);
        assert_eq!(apart.transfers.len(), 2);
        assert_eq!(apart.fetched_bytes(), 2 * 4096);
        // The guards alone join both.
        assert_eq!(plan(&at(price + 1), &limits).transfers.len(), 1);
    }

    #[test]
    fn a_price_never_widens_the_gap_guard_nor_overrides_disabled_merging() {
        let limits = Limits {
            max_gap: 1000,
            ..Limits::default()
        };
        let reads = [r(0), r(4096 + 1001)];
        assert_eq!(
            plan_priced(&reads, &limits, &[Some(u64::MAX)])
                .transfers
                .len(),
            2
        );
        let off = Limits {
            max_gap: 0,
            ..Limits::default()
        };
        let adjacent = [r(0), r(4096)];
        assert_eq!(
            plan_priced(&adjacent, &off, &[Some(1 << 20)])
                .transfers
                .len(),
            2
        );
    }

    #[test]
    fn a_price_of_zero_still_joins_adjacent_and_overlapping_reads() {
        let reads = [r(0), r(4096), r(6000), r(10_193)];
        let p = plan_priced(&reads, &Limits::default(), &[Some(0)]);
        // 0..4096, 4096..8192, 6000..10096 overlap or touch; 10193 is 97 bytes past.
        let spans: Vec<(u64, u64)> = p.transfers.iter().map(|t| (t.start, t.length)).collect();
        assert_eq!(spans, vec![(0, 10_096), (10_193, 4096)]);
        check_priced(&reads, &Limits::default(), &[Some(0)], &p).unwrap();
    }

    #[test]
    fn each_group_has_its_own_price_and_unpriced_groups_follow_the_guards() {
        let mut other = r(0);
        other.group = 1;
        let mut other_far = r(4096 + 100_000);
        other_far.group = 1;
        let mut third = r(0);
        third.group = 2;
        let mut third_far = r(4096 + 100_000);
        third_far.group = 2;
        let reads = [r(0), r(4096 + 100_000), other, other_far, third, third_far];
        // Group 0 priced as the link, group 1 as loopback, group 2 unmeasured.
        let prices = [
            Some(break_even_gap(&link())),
            Some(break_even_gap(&loopback())),
        ];
        let p = plan_priced(&reads, &Limits::default(), &prices);
        let per_group: Vec<(u32, usize)> = p
            .transfers
            .iter()
            .map(|t| (t.group, t.parts.len()))
            .collect();
        assert_eq!(per_group, vec![(0, 1), (0, 1), (1, 2), (2, 2)]);
        check_priced(&reads, &Limits::default(), &prices, &p).unwrap();
    }

    /// 10,000 reads of 4 KiB at uniform offsets of 1 GiB (the `scattered-10k` workload).
    fn scattered(seed: u64) -> Vec<PlanRead> {
        let mut rng = fastrand::Rng::with_seed(seed);
        (0..10_000)
            .map(|_| r(rng.u64(0..=(1 << 30) - 4096)))
            .collect()
    }

    /// The wall time the model predicts for a plan: the longer of the round trips
    /// (`⌈transfers / concurrency⌉ × rtt`) and the bytes over the link's capacity.
    fn modelled_wall(p: &crate::plan::Plan, rtt: Duration, capacity: u64) -> Duration {
        let rounds = p.transfers.len().div_ceil(64) as u32;
        let bytes = Duration::from_secs_f64(p.fetched_bytes() as f64 / capacity as f64);
        (rtt * rounds).max(bytes)
    }

    #[test]
    fn on_the_link_model_the_priced_plan_beats_both_merging_all_and_never_merging() {
        let reads = scattered(42);
        let limits = Limits::default();
        let prices = [Some(break_even_gap(&link()))];
        let guards = plan(&reads, &limits);
        let never = plan(
            &reads,
            &Limits {
                max_gap: 0,
                ..limits
            },
        );
        let priced = plan_priced(&reads, &limits, &prices);
        check_priced(&reads, &limits, &prices, &priced).unwrap();
        let ratio = |p: &crate::plan::Plan| p.fetched_bytes() as f64 / p.requested_bytes() as f64;
        // The guards fetch several times the useful bytes (11.7× measured); priced, the gaps
        // fetched are those cheaper than a request.
        assert!(ratio(&guards) > 8.0, "guards {}", ratio(&guards));
        assert!(ratio(&priced) < 2.5, "priced {}", ratio(&priced));
        assert_eq!(never.transfers.len(), reads.len());
        assert!(priced.transfers.len() < reads.len() * 3 / 4);
        let wall = |p| modelled_wall(p, 20 * MS, 125_000_000);
        assert!(
            wall(&priced) * 10 < wall(&guards) * 7,
            "{:?} {:?}",
            wall(&priced),
            wall(&guards)
        );
        assert!(
            wall(&priced) * 10 < wall(&never) * 8,
            "{:?} {:?}",
            wall(&priced),
            wall(&never)
        );
        // Every gap the priced plan fetched costs less than the request it saved.
        let price = break_even_gap(&link());
        for t in &priced.transfers {
            let mut end = 0;
            for part in &t.parts {
                assert!(part.offset_in_span.saturating_sub(end) <= price);
                end = end.max(part.offset_in_span + part.length);
            }
        }
    }

    #[test]
    fn on_loopback_the_priced_plan_is_almost_the_guards_plan_for_small_reads() {
        // ~500 KB of price: above almost every gap the amplification guard lets 4 KiB reads
        // join (only a run of eight or more may join across more).
        let reads = scattered(7);
        let limits = Limits::default();
        let priced = plan_priced(&reads, &limits, &[Some(break_even_gap(&loopback()))]);
        let guards = plan(&reads, &limits);
        assert!(priced.transfers.len() * 100 <= guards.transfers.len() * 101);
        assert!(priced.fetched_bytes() * 100 >= guards.fetched_bytes() * 98);
    }

    #[test]
    fn a_span_comes_apart_only_at_gaps_above_the_price() {
        // Parts of one span: 0..4096, a 100-byte gap, 4196..8292, overlapping 8000..9000,
        // then 10,000 bytes past the end (9000) and 50,000 past the next one.
        let parts = [
            (0, 4096),
            (4196, 4096),
            (8000, 1000),
            (19_000, 4096),
            (73_096, 4096),
        ];
        assert_eq!(cuts(parts, 50_000), Vec::<usize>::new());
        assert_eq!(cuts(parts, 49_999), vec![4]);
        assert_eq!(cuts(parts, 10_000), vec![4]);
        assert_eq!(cuts(parts, 9_999), vec![3, 4]);
        assert_eq!(cuts(parts, 100), vec![3, 4]);
        assert_eq!(cuts(parts, 99), vec![1, 3, 4]);
        // Overlapping and adjacent parts never come apart, whatever the price.
        assert_eq!(
            cuts([(0, 4096), (100, 5000), (4096, 10)], 0),
            Vec::<usize>::new()
        );
        // The gap counts from the furthest end so far, not the previous part's.
        assert_eq!(cuts([(0, 10_000), (10, 10), (10_050, 1)], 49), vec![2]);
        assert_eq!(
            cuts([(0, 10_000), (10, 10), (10_050, 1)], 50),
            Vec::<usize>::new()
        );
    }

    #[test]
    fn pricing_a_guards_plan_again_gives_the_priced_plan() {
        // Reads 4 KiB long at gaps that straddle the link's price: cutting the plan the guards
        // made at the price gives exactly the spans `plan_priced` makes with it.
        let gaps = [10, 39_062, 39_063, 500, 200_000, 0, 39_000, 120_000, 1];
        let mut offset = 0;
        let mut reads = vec![r(0)];
        for gap in gaps {
            offset += 4096 + gap;
            reads.push(r(offset));
        }
        let limits = Limits::default();
        let price = break_even_gap(&link());
        let guards = plan(&reads, &limits);
        let priced = plan_priced(&reads, &limits, &[Some(price)]);
        let mut pieces = Vec::new();
        for t in &guards.transfers {
            let positions = cuts(t.parts.iter().map(|p| (p.offset_in_span, p.length)), price);
            let mut from = 0;
            for to in positions.into_iter().chain([t.parts.len()]) {
                let first = t.parts[from].offset_in_span;
                let end = t.parts[from..to]
                    .iter()
                    .map(|p| p.offset_in_span + p.length)
                    .max()
                    .unwrap();
                pieces.push((t.start + first, end - first, to - from));
                from = to;
            }
        }
        let expected: Vec<(u64, u64, usize)> = priced
            .transfers
            .iter()
            .map(|t| (t.start, t.length, t.parts.len()))
            .collect();
        assert!(guards.transfers.len() < expected.len());
        assert_eq!(pieces, expected);
    }
}
