//! The row groups [`ParquetReader::prefetch`](crate::ParquetReader::prefetch) reads ahead of
//! parquet's stream: started in the stream's order within a byte budget, handed to the
//! stream's reads, and released once the stream has taken them or moved past them.
//!
//! A row group is *held* from the moment its reads start until it is released: its bytes are
//! in flight or have arrived, and no one else frees them. The bytes held stay within the
//! budget (a row group larger than the budget is read alone, when nothing else is held), and
//! a row group waits, unread, until enough of those before it are released. A row group is
//! released when:
//!
//! - the stream has taken every column chunk of it (a row filter's first read takes the
//!   filter's columns, the second the rest: both are served by one prefetch);
//! - the stream reads inside a row group that comes after it (another projection than the
//!   prefetched one, a row group skipped by statistics or a row selection);
//! - the reader is dropped (with the stream that owns it: a limit reached, a stream dropped
//!   early); the reads of row groups in flight are cancelled, and waiting ones never start.

use std::collections::VecDeque;
use std::ops::Range;

use bytes::Bytes;
use karu::{Batch, Status};
use parquet::errors::Result;

use crate::parquet_reader::{external, tagged};

/// The default budget: the bytes a reader's prefetch holds at most.
pub(crate) const DEFAULT_BUDGET: u64 = 128 << 20;

/// The prefetched row groups of one reader, in the order the stream reads them.
#[derive(Default)]
pub(crate) struct Prefetched {
    groups: VecDeque<Group>,
    /// Bytes of the started row groups not yet released.
    held: u64,
}

/// One row group's column chunks to prefetch.
struct Group {
    /// The bytes of the whole row group (every column's chunk): a read in there means the
    /// stream has reached this row group.
    extent: Range<u64>,
    /// The column chunks prefetched, in tag order.
    ranges: Vec<Range<u64>>,
    /// Which of `ranges` the stream has taken.
    taken: Vec<bool>,
    /// The bytes of `ranges` together.
    bytes: u64,
    state: State,
}

enum State {
    /// Kept from starting by the budget.
    Waiting,
    /// Started: the batch of its reads, tagged by index into `ranges`.
    Reading(Batch),
    /// Arrived: the bytes of each of `ranges`.
    Arrived(Vec<Bytes>),
}

/// Whether two ranges share a byte.
fn overlaps(a: &Range<u64>, b: &Range<u64>) -> bool {
    a.start < b.end && b.start < a.end
}

impl Prefetched {
    /// The bytes held: in flight or arrived, not yet released.
    pub(crate) fn held(&self) -> u64 {
        self.held
    }

    /// Add a row group (its whole `extent` and the column chunks to read) after the others.
    pub(crate) fn push(&mut self, extent: Range<u64>, ranges: Vec<Range<u64>>) {
        let bytes = ranges.iter().map(|r| r.end - r.start).sum();
        self.groups.push_back(Group {
            extent,
            taken: vec![false; ranges.len()],
            ranges,
            bytes,
            state: State::Waiting,
        });
    }

    /// Start waiting row groups, in order, while what is held stays within `budget` (the
    /// first one whenever nothing is held); `start` submits a row group's reads.
    pub(crate) fn start_within(
        &mut self,
        budget: u64,
        mut start: impl FnMut(&[Range<u64>]) -> Batch,
    ) {
        for group in &mut self.groups {
            if !matches!(group.state, State::Waiting) {
                continue;
            }
            if self.held > 0 && self.held.saturating_add(group.bytes) > budget {
                break;
            }
            group.state = State::Reading(start(&group.ranges));
            self.held += group.bytes;
        }
    }

    /// Release the first `n` row groups (their reads cancelled if still in flight).
    fn release_first(&mut self, n: usize) {
        for group in self.groups.drain(..n) {
            if !matches!(group.state, State::Waiting) {
                self.held -= group.bytes;
            }
        }
    }

    /// The bytes of `ranges` (none empty) from a prefetched row group, when one holds them
    /// all; `None` when none does (the caller reads them). Row groups before the one the
    /// stream reads in are released, and so is a row group the stream has taken whole; then
    /// waiting row groups start within `budget`.
    pub(crate) async fn serve(
        &mut self,
        ranges: &[Range<u64>],
        budget: u64,
        start: impl FnMut(&[Range<u64>]) -> Batch,
    ) -> Option<Result<Vec<Bytes>>> {
        let at = self
            .groups
            .iter()
            .position(|g| ranges.iter().any(|r| overlaps(&g.extent, r)))?;
        self.release_first(at);
        let served = self.take(ranges).await;
        self.start_within(budget, start);
        served
    }

    /// `ranges` from the first row group, if it holds them all.
    async fn take(&mut self, ranges: &[Range<u64>]) -> Option<Result<Vec<Bytes>>> {
        let group = self.groups.front_mut()?;
        let holder = |r: &Range<u64>| {
            group
                .ranges
                .iter()
                .position(|held| held.start <= r.start && r.end <= held.end)
        };
        let holders: Vec<usize> = ranges.iter().map(holder).collect::<Option<_>>()?;
        if let State::Reading(batch) = &mut group.state {
            match tagged(batch, &group.ranges).await {
                Ok(bytes) => group.state = State::Arrived(bytes),
                Err(error) => {
                    self.release_first(1);
                    return Some(Err(error));
                }
            }
        }
        let State::Arrived(bytes) = &group.state else {
            return Some(Err(external(karu::Error::new(
                Status::Internal,
                "a prefetched row group was served before it was started",
            ))));
        };
        let mut out = Vec::with_capacity(ranges.len());
        for (range, &i) in ranges.iter().zip(&holders) {
            let from = (range.start - group.ranges[i].start) as usize;
            let to = (range.end - group.ranges[i].start) as usize;
            out.push(bytes[i].slice(from..to));
            group.taken[i] = true;
        }
        if group.taken.iter().all(|&t| t) {
            self.release_first(1);
        }
        Some(Ok(out))
    }
}
