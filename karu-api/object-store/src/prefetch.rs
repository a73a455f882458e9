//! The row groups a `ParquetReader` reads ahead of parquet's stream, under one byte budget:
//! those [`ParquetReader::prefetch`](crate::ParquetReader::prefetch) was given, or, by
//! default, those its read-ahead chose (the columns the stream asked for in one row group, in
//! the row groups it will read next). They are started in the stream's order, handed to the
//! stream's reads, and released once the stream has taken them or moved past them. The
//! read-ahead learns each set of columns the stream reads in a row group (a row filter's
//! columns, then the rest of the projection): a set it had not read is read ahead too, in an
//! entry of its own beside each queued row group's (a row group may have several entries,
//! adjacent in the queue), and in every row group it queues after.
//!
//! A row group is *held* from the moment its reads start until it is released: its bytes are
//! in flight or have arrived, and no one else frees them. The bytes held stay within the
//! budget (a row group larger than the budget is read alone, when nothing else is held), and
//! a row group waits, unread, until enough of those before it are released. The row groups
//! that fit are started at once, each as a Karu batch of its own (the planner merges its column
//! chunks where it pays, never across row groups, which would read the row groups between
//! them), and each is served as soon as its own reads have arrived. A row group is released
//! when:
//!
//! - the stream has taken every column chunk of it (a row filter's first read takes the
//!   filter's columns, the second the rest: both are served by one prefetch);
//! - the stream reads inside a row group that comes after it (another projection than the
//!   prefetched one, a row group skipped by statistics or a row selection);
//! - the reader is dropped (with the stream that owns it: a limit reached, a stream dropped
//!   early); the reads in flight are cancelled, and waiting row groups never start.
//!
//! What is held is counted in a [`PrefetchedBytes`] gauge: a row group adds its bytes when its
//! reads start and takes them back when it is dropped (with its bytes), so the gauge shows what
//! the reader still holds, even after the reader has moved into a stream.

use std::collections::VecDeque;
use std::ops::Range;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use bytes::Bytes;
use futures_util::StreamExt;
use karu::{Batch, Completion, Status};

use crate::parquet_reader::FileLayout;

/// The default budget: the bytes a reader's prefetch and read-ahead hold at most.
pub(crate) const DEFAULT_BUDGET: u64 = 64 << 20;

/// The bytes a reader's prefetch and read-ahead hold: column chunks in flight or arrived that
/// the stream has not taken, of row groups it has not passed. A clone of the handle reads the
/// same count; it outlives the reader, so a test or a caller can see that a dropped stream
/// left nothing behind.
#[derive(Debug, Clone, Default)]
pub struct PrefetchedBytes(Arc<AtomicU64>);

impl PrefetchedBytes {
    /// The bytes held now.
    pub fn get(&self) -> u64 {
        self.0.load(Ordering::Acquire)
    }
}

/// The prefetched row groups of one reader, in the order the stream reads them.
#[derive(Default)]
pub(crate) struct Prefetched {
    groups: VecDeque<Group>,
    /// The batches of started row groups.
    flights: Vec<Flight>,
    next_flight: u64,
    gauge: PrefetchedBytes,
    /// What the read-ahead queues next; `None` for a plan given by `prefetch`.
    read_ahead: Option<ReadAhead>,
}

/// The read-ahead's choice: the columns the stream reads, and the row groups it will read
/// after those queued, in its order.
struct ReadAhead {
    columns: Vec<usize>,
    next: VecDeque<usize>,
}

/// The batch of reads of a started row group (a batch may serve several row groups: each
/// group's reads are tagged from its `first_tag`).
struct Flight {
    id: u64,
    batch: Batch,
}

/// One row group's column chunks to prefetch.
struct Group {
    /// The row group (its index in the file).
    row_group: usize,
    /// The bytes of the whole row group (every column's chunk): a read in there means the
    /// stream has reached this row group.
    extent: Range<u64>,
    /// The ranges prefetched (column chunks, or the pages the stream asked for), in order.
    ranges: Vec<Range<u64>>,
    /// Which of `ranges` the stream has taken.
    taken: Vec<bool>,
    /// The bytes of `ranges` together.
    bytes: u64,
    state: State,
    /// The gauge `bytes` were added to when the reads started (none while waiting).
    counted: Option<PrefetchedBytes>,
}

impl Group {
    /// Row group `row_group` (its whole `extent`), to read `ranges` of it; not started.
    fn new(row_group: usize, extent: Range<u64>, ranges: Vec<Range<u64>>) -> Group {
        Group {
            row_group,
            extent,
            taken: vec![false; ranges.len()],
            bytes: ranges.iter().map(|r| r.end - r.start).sum(),
            ranges,
            state: State::Waiting,
            counted: None,
        }
    }

    /// Read `ranges` too (a group not started).
    fn extend(&mut self, ranges: Vec<Range<u64>>) {
        debug_assert!(matches!(self.state, State::Waiting));
        self.bytes += ranges.iter().map(|r| r.end - r.start).sum::<u64>();
        self.taken.extend(ranges.iter().map(|_| false));
        self.ranges.extend(ranges);
    }
}

impl Drop for Group {
    fn drop(&mut self) {
        if let Some(gauge) = &self.counted {
            gauge.0.fetch_sub(self.bytes, Ordering::AcqRel);
        }
    }
}

enum State {
    /// Kept from starting by the budget.
    Waiting,
    /// Started in a flight: its reads are tagged `first_tag..first_tag + ranges.len()`; what
    /// has arrived of each range (or its read's error).
    Reading {
        flight: u64,
        first_tag: u64,
        arrived: Vec<Option<Result<Bytes, karu::Error>>>,
    },
    /// Arrived: the bytes of each of `ranges`.
    Arrived(Vec<Bytes>),
}

/// What the prefetched row groups say about a read of the stream.
pub(crate) enum Served {
    /// Served from a prefetched row group: the bytes of each range, or the error of a read.
    Bytes(Result<Vec<Bytes>, karu::Error>),
    /// A row group the read is in is queued, but does not hold every range.
    NotHeld,
    /// No queued row group holds bytes of the read.
    NotQueued,
}

/// Whether two ranges share a byte.
fn overlaps(a: &Range<u64>, b: &Range<u64>) -> bool {
    a.start < b.end && b.start < a.end
}

impl Prefetched {
    /// The bytes held: in flight or arrived, not yet released.
    pub(crate) fn held(&self) -> u64 {
        self.gauge.get()
    }

    /// The gauge of the bytes held.
    pub(crate) fn gauge(&self) -> PrefetchedBytes {
        self.gauge.clone()
    }

    /// Whether the read-ahead (not a plan given by `prefetch`) chose what is queued.
    pub(crate) fn reading_ahead(&self) -> bool {
        self.read_ahead.is_some()
    }

    /// The first queued row group, if any.
    pub(crate) fn front(&self) -> Option<usize> {
        self.groups.front().map(|g| g.row_group)
    }

    /// Forget every queued row group (released: reads in flight cancelled) and the read-ahead.
    pub(crate) fn clear(&mut self) {
        self.groups.clear();
        self.flights.clear();
        self.read_ahead = None;
    }

    /// Add row group `row_group` (its whole `extent` and the ranges to read) after the others.
    pub(crate) fn push(&mut self, row_group: usize, extent: Range<u64>, ranges: Vec<Range<u64>>) {
        self.groups.push_back(Group::new(row_group, extent, ranges));
    }

    /// The stream reads `columns` in `row_group` (a row group it has reached, or passed and
    /// reads again): where the read-ahead did not read some of them, it learns them and reads
    /// them ahead too, in the row groups queued after `row_group` (added to a row group's
    /// entry that has not started, else in an entry of their own right after that row
    /// group's others) and in those it queues later; what fits in `budget` starts now. A
    /// plan given by `prefetch` learns nothing.
    pub(crate) fn learn(
        &mut self,
        layout: &FileLayout,
        row_group: usize,
        columns: &[usize],
        budget: u64,
        start: impl FnMut(&[Range<u64>]) -> Batch,
    ) {
        let Some(read_ahead) = &mut self.read_ahead else {
            return;
        };
        let new: Vec<usize> = columns
            .iter()
            .copied()
            .filter(|c| !read_ahead.columns.contains(c))
            .collect();
        if new.is_empty() {
            return;
        }
        read_ahead.columns.extend(&new);
        read_ahead.columns.sort_unstable();
        let mut i = 0;
        while i < self.groups.len() {
            let g = self.groups[i].row_group;
            let mut end = i + 1;
            while end < self.groups.len() && self.groups[end].row_group == g {
                end += 1;
            }
            let ranges: Vec<Range<u64>> = new
                .iter()
                .filter_map(|&c| layout.chunk(g, c))
                .filter(|r| !r.is_empty())
                .collect();
            if g != row_group && !ranges.is_empty() {
                let last = &mut self.groups[end - 1];
                if matches!(last.state, State::Waiting) {
                    last.extend(ranges);
                } else {
                    self.groups
                        .insert(end, Group::new(g, layout.extent(g), ranges));
                    end += 1;
                }
            }
            i = end;
        }
        self.start_within(budget, start);
    }

    /// Read ahead from row group `row_group`, where the stream asks for `ranges` (none empty)
    /// in `columns`: forget what is queued, queue `ranges`, then the same columns of the row
    /// groups in `next` (the stream's order) within `budget`, and start what fits, at once.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn read_ahead_from(
        &mut self,
        layout: &FileLayout,
        row_group: usize,
        ranges: Vec<Range<u64>>,
        columns: Vec<usize>,
        next: VecDeque<usize>,
        budget: u64,
        start: impl FnMut(&[Range<u64>]) -> Batch,
    ) {
        // The column sets learned so far stay: the stream reads the same ones in every row
        // group.
        let mut columns = columns;
        if let Some(previous) = &self.read_ahead {
            columns.extend(&previous.columns);
        }
        columns.sort_unstable();
        columns.dedup();
        self.clear();
        self.push(row_group, layout.extent(row_group), ranges);
        self.read_ahead = Some(ReadAhead { columns, next });
        self.top_up(layout, budget);
        self.start_within(budget, start);
    }

    /// Queue the read-ahead's next row groups while the bytes queued stay under `budget`.
    fn top_up(&mut self, layout: &FileLayout, budget: u64) {
        let Some(read_ahead) = &mut self.read_ahead else {
            return;
        };
        let mut queued: u64 = self.groups.iter().map(|g| g.bytes).sum();
        while queued < budget {
            let Some(g) = read_ahead.next.pop_front() else {
                break;
            };
            let ranges: Vec<Range<u64>> = read_ahead
                .columns
                .iter()
                .filter_map(|&c| layout.chunk(g, c))
                .filter(|r| !r.is_empty())
                .collect();
            if ranges.is_empty() {
                continue;
            }
            let group = Group::new(g, layout.extent(g), ranges);
            queued = queued.saturating_add(group.bytes);
            self.groups.push_back(group);
        }
    }

    /// Start waiting row groups, in order, while what is held stays within `budget` (the
    /// first one whenever nothing is held), each in a batch that `start` submits (its reads
    /// tagged in order).
    pub(crate) fn start_within(
        &mut self,
        budget: u64,
        mut start: impl FnMut(&[Range<u64>]) -> Batch,
    ) {
        let mut held = self.held();
        let mut starting = Vec::new();
        for (i, group) in self.groups.iter().enumerate() {
            if !matches!(group.state, State::Waiting) {
                continue;
            }
            if held > 0 && held.saturating_add(group.bytes) > budget {
                break;
            }
            held = held.saturating_add(group.bytes);
            starting.push(i);
        }
        for i in starting {
            let id = self.next_flight;
            self.next_flight += 1;
            let group = &mut self.groups[i];
            group.state = State::Reading {
                flight: id,
                first_tag: 0,
                arrived: vec![None; group.ranges.len()],
            };
            self.gauge.0.fetch_add(group.bytes, Ordering::AcqRel);
            group.counted = Some(self.gauge.clone());
            let batch = start(&group.ranges);
            self.flights.push(Flight { id, batch });
        }
    }

    /// Release the first `n` row groups, and the flights no queued row group waits on (their
    /// reads still in flight are cancelled).
    fn release_first(&mut self, n: usize) {
        self.groups.drain(..n);
        self.drop_idle_flights();
    }

    /// Release the queued entry at `i`.
    fn release_at(&mut self, i: usize) {
        self.groups.remove(i);
        self.drop_idle_flights();
    }

    /// Drop the flights no queued row group waits on (their reads still in flight are
    /// cancelled).
    fn drop_idle_flights(&mut self) {
        let groups = &self.groups;
        self.flights.retain(|flight| {
            groups
                .iter()
                .any(|g| matches!(g.state, State::Reading { flight: id, .. } if id == flight.id))
        });
    }

    /// The bytes of `ranges` (none empty) from a prefetched row group, when one holds them
    /// all. Row groups before the one the stream reads in are released, and so is a row group
    /// the stream has taken whole; then the read-ahead queues its next row groups and waiting
    /// ones start within `budget`.
    pub(crate) async fn serve(
        &mut self,
        ranges: &[Range<u64>],
        layout: Option<&FileLayout>,
        budget: u64,
        start: impl FnMut(&[Range<u64>]) -> Batch,
    ) -> Served {
        let Some(at) = self
            .groups
            .iter()
            .position(|g| ranges.iter().any(|r| overlaps(&g.extent, r)))
        else {
            return Served::NotQueued;
        };
        self.release_first(at);
        let mut start = start;
        // What the release made room for starts before the stream waits.
        self.start_within(budget, &mut start);
        let served = self.take(ranges).await;
        if let Some(layout) = layout {
            self.top_up(layout, budget);
        }
        self.start_within(budget, start);
        served
    }

    /// `ranges` from the first row group's entries (one per column set the read-ahead
    /// learned, or one), if they hold them all and have started. An entry the budget still
    /// keeps waiting is released unread, and the read goes out on its own (the budget is a
    /// bound on what is held).
    async fn take(&mut self, ranges: &[Range<u64>]) -> Served {
        let Some(front) = self.groups.front() else {
            return Served::NotQueued;
        };
        let row_group = front.row_group;
        let entries = self
            .groups
            .iter()
            .take_while(|g| g.row_group == row_group)
            .count();
        let groups = &self.groups;
        let holder = |r: &Range<u64>| {
            (0..entries).find_map(|e| {
                groups[e]
                    .ranges
                    .iter()
                    .position(|held| held.start <= r.start && r.end <= held.end)
                    .map(|i| (e, i))
            })
        };
        let Some(holders) = ranges
            .iter()
            .map(holder)
            .collect::<Option<Vec<(usize, usize)>>>()
        else {
            return Served::NotHeld;
        };
        let mut needed: Vec<usize> = holders.iter().map(|&(e, _)| e).collect();
        needed.sort_unstable();
        needed.dedup();
        if let Some(&waiting) = needed
            .iter()
            .find(|&&e| matches!(self.groups[e].state, State::Waiting))
        {
            self.release_at(waiting);
            return Served::NotHeld;
        }
        for &e in &needed {
            if let Err(error) = self.arrive(e).await {
                self.release_at(e);
                return Served::Bytes(Err(error));
            }
        }
        let mut out = Vec::with_capacity(ranges.len());
        for (range, &(e, i)) in ranges.iter().zip(&holders) {
            let group = &mut self.groups[e];
            let State::Arrived(bytes) = &group.state else {
                return Served::Bytes(Err(karu::Error::new(
                    Status::Internal,
                    "a prefetched row group was served before it arrived",
                )));
            };
            let from = (range.start - group.ranges[i].start) as usize;
            let to = (range.end - group.ranges[i].start) as usize;
            out.push(bytes[i].slice(from..to));
            group.taken[i] = true;
        }
        // A row group is released once every entry of it was taken whole (a stream that
        // reads a column again in the row group, with the rest of the projection, is served).
        if self
            .groups
            .iter()
            .take(entries)
            .all(|g| g.taken.iter().all(|&t| t))
        {
            self.release_first(entries);
        }
        Served::Bytes(Ok(out))
    }

    /// Wait until every read of queued entry `e` has arrived (completions of other entries
    /// are kept for them), and mark it arrived.
    async fn arrive(&mut self, e: usize) -> Result<(), karu::Error> {
        loop {
            let Some(group) = self.groups.get_mut(e) else {
                return Ok(());
            };
            let flight_id = match &mut group.state {
                State::Waiting | State::Arrived(_) => return Ok(()),
                State::Reading {
                    flight, arrived, ..
                } => {
                    if arrived.iter().all(Option::is_some) {
                        let mut bytes = Vec::with_capacity(arrived.len());
                        for piece in arrived.drain(..) {
                            bytes.push(piece.expect("every piece arrived")?);
                        }
                        group.state = State::Arrived(bytes);
                        return Ok(());
                    }
                    *flight
                }
            };
            let Some(flight) = self.flights.iter_mut().find(|f| f.id == flight_id) else {
                return Err(karu::Error::new(
                    Status::Internal,
                    "a prefetched row group's batch is gone",
                ));
            };
            let Some(completion) = flight.batch.next().await else {
                return Err(karu::Error::new(
                    Status::Internal,
                    "a prefetched row group's batch ended before all its reads completed",
                ));
            };
            self.route(flight_id, completion);
        }
    }

    /// Hand a completion of flight `flight_id` to the row group it reads for (dropped when that
    /// row group was released).
    fn route(&mut self, flight_id: u64, completion: Completion) {
        let tag = completion.tag();
        for group in &mut self.groups {
            let State::Reading {
                flight,
                first_tag,
                arrived,
            } = &mut group.state
            else {
                continue;
            };
            if *flight != flight_id || tag < *first_tag {
                continue;
            }
            let i = (tag - *first_tag) as usize;
            if let Some(slot) = arrived.get_mut(i) {
                let range = &group.ranges[i];
                *slot = Some(crate::parquet_reader::exact(
                    Some(completion),
                    range.end - range.start,
                ));
                return;
            }
        }
    }
}
