//! How `karu read` paces its reads so that memory stays bounded: small reads go out together
//! in groups (one batch each, merged by Karu's planner), a long read is cut into pieces (one
//! batch each) that are written in order as they arrive, and no more bytes are submitted than
//! the in-flight bound allows.
//!
//! [`Pacer`] is the pure core: no batch, no clock. The driver asks it [`Pacer::poll_unit`]
//! for what to submit next, tells it [`Pacer::handle_piece`] what each piece turned out to be
//! (in the piece order of its read) and [`Pacer::handle_consumed`] when a unit's bytes have
//! been written (or dropped), which makes room for the next ones.
//!
//! Units leave strictly in the order of the reads (and of the pieces of a read), so the read
//! whose bytes are written next is always submitted before any later one: when the bound is
//! reached, what holds it is always work that will finish.

/// How one read is fetched.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Fetch {
    /// In one piece, with the small reads around it.
    Whole { length: u64 },
    /// In pieces of the pacer's piece size from `offset` to `offset + length`. Pieces below
    /// `size` (the object's visible size when the read was planned; `None`: unknown) may go
    /// ahead; a piece at or past it goes only once every earlier piece has delivered all its
    /// bytes, so a read past the end of an object asks for one piece past it, not many (and
    /// an object that grew meanwhile is still read to the end of the range).
    Split {
        offset: u64,
        length: u64,
        size: Option<u64>,
    },
    /// Needs no request: its outcome is already known (an empty range, a size that could not
    /// be learnt).
    Settled,
}

/// What to submit next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Unit {
    /// These reads, together in one batch.
    Group(Vec<usize>),
    /// Piece `index` of read `read`: `length` bytes at `offset`, alone in its batch.
    Piece {
        read: usize,
        index: u32,
        offset: u64,
        length: u64,
    },
    /// A read that needs no request.
    Settled(usize),
}

impl Unit {
    /// The bytes the unit may bring into memory.
    pub(crate) fn bytes(&self, reads: &[Fetch]) -> u64 {
        match self {
            Unit::Group(members) => members
                .iter()
                .map(|&read| match reads[read] {
                    Fetch::Whole { length } => length,
                    _ => 0,
                })
                .sum(),
            Unit::Piece { length, .. } => *length,
            Unit::Settled(_) => 0,
        }
    }
}

/// The pieces of one split read so far.
#[derive(Debug, Clone, Copy, Default)]
struct Pieces {
    /// Pieces submitted.
    submitted: u32,
    /// Pieces that delivered all their bytes, counted in order.
    whole: u32,
    /// No more pieces: the read ended (a piece failed or reached the end of the object).
    ended: bool,
}

/// Paces the reads of one `karu read`. See the module documentation for the call order.
#[derive(Debug)]
#[must_use]
pub(crate) struct Pacer {
    reads: Vec<Fetch>,
    pieces: Vec<Pieces>,
    /// The next read to submit units of.
    cursor: usize,
    /// Bytes submitted and not yet consumed.
    outstanding: u64,
    /// The most bytes outstanding at once (a single unit larger than it goes alone).
    bound: u64,
    /// The most bytes of small reads in one group.
    group: u64,
    /// The length of a piece.
    piece: u64,
}

impl Pacer {
    /// Paces `reads` with at most `bound` bytes in flight, cut into pieces of `piece` bytes,
    /// small reads grouped up to a quarter of the bound.
    pub(crate) fn new(reads: Vec<Fetch>, bound: u64, piece: u64) -> Pacer {
        let pieces = vec![Pieces::default(); reads.len()];
        Pacer {
            reads,
            pieces,
            cursor: 0,
            outstanding: 0,
            bound: bound.max(1),
            group: (bound / 4).max(1),
            piece: piece.max(1),
        }
    }

    /// The number of pieces of read `read` (1 unless it is split).
    pub(crate) fn pieces_of(&self, read: usize) -> u32 {
        match self.reads[read] {
            Fetch::Split { length, .. } => self.piece_count(length),
            _ => 1,
        }
    }

    fn piece_count(&self, length: u64) -> u32 {
        u32::try_from(length.div_ceil(self.piece).max(1)).unwrap_or(u32::MAX)
    }

    /// Bytes submitted and not yet consumed.
    #[cfg(test)]
    fn outstanding(&self) -> u64 {
        self.outstanding
    }

    /// Whether every unit has been handed out.
    pub(crate) fn is_done(&self) -> bool {
        self.cursor >= self.reads.len()
    }

    /// The next unit to submit now, if one may go.
    pub(crate) fn poll_unit(&mut self) -> Option<Unit> {
        // Reads whose pieces are all out (or that ended) are behind the cursor.
        while self.cursor < self.reads.len() {
            let read = self.cursor;
            let Fetch::Split { .. } = self.reads[read] else {
                break;
            };
            let pieces = self.pieces[read];
            if pieces.ended || pieces.submitted >= self.pieces_of(read) {
                self.cursor += 1;
            } else {
                break;
            }
        }
        let read = self.cursor;
        let unit = match *self.reads.get(read)? {
            Fetch::Settled => {
                self.cursor += 1;
                return Some(Unit::Settled(read));
            }
            Fetch::Whole { length } => {
                let mut members = vec![read];
                let mut bytes = length;
                while let Some(&Fetch::Whole { length }) = self.reads.get(read + members.len()) {
                    if bytes.saturating_add(length) > self.group {
                        break;
                    }
                    bytes += length;
                    members.push(read + members.len());
                }
                Unit::Group(members)
            }
            Fetch::Split {
                offset,
                length,
                size,
            } => {
                let pieces = self.pieces[read];
                let index = pieces.submitted;
                let start = u64::from(index) * self.piece;
                let known = size.is_none_or(|size| offset.saturating_add(start) < size);
                if !known && pieces.whole < index {
                    // Past the known end: only once the pieces before it are whole.
                    return None;
                }
                Unit::Piece {
                    read,
                    index,
                    offset: offset + start,
                    length: self.piece.min(length - start),
                }
            }
        };
        let bytes = unit.bytes(&self.reads);
        if self.outstanding > 0 && self.outstanding.saturating_add(bytes) > self.bound {
            return None;
        }
        self.outstanding = self.outstanding.saturating_add(bytes);
        match &unit {
            Unit::Group(members) => self.cursor += members.len(),
            Unit::Piece { read, .. } => self.pieces[*read].submitted += 1,
            Unit::Settled(_) => {}
        }
        Some(unit)
    }

    /// The next piece of split read `read`, in piece order: `whole` when it delivered every
    /// byte it asked for; otherwise the read has ended and no further piece of it goes out.
    pub(crate) fn handle_piece(&mut self, read: usize, whole: bool) {
        let pieces = &mut self.pieces[read];
        if whole && !pieces.ended {
            pieces.whole += 1;
        } else {
            pieces.ended = true;
        }
    }

    /// `bytes` of submitted units are no longer held.
    pub(crate) fn handle_consumed(&mut self, bytes: u64) {
        self.outstanding = self.outstanding.saturating_sub(bytes);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1 << 20;

    /// Every unit that may go now.
    fn drain(pacer: &mut Pacer) -> Vec<Unit> {
        std::iter::from_fn(|| pacer.poll_unit()).collect()
    }

    fn piece(read: usize, index: u32, offset: u64, length: u64) -> Unit {
        Unit::Piece {
            read,
            index,
            offset,
            length,
        }
    }

    #[test]
    fn small_reads_go_together() {
        let reads = vec![Fetch::Whole { length: 16 }; 1000];
        let mut pacer = Pacer::new(reads, 64 * MIB, 8 * MIB);
        assert_eq!(drain(&mut pacer), [Unit::Group((0..1000).collect())]);
        assert!(pacer.is_done());
        assert_eq!(pacer.outstanding(), 16_000);
    }

    #[test]
    fn groups_stay_under_a_quarter_of_the_bound_and_wait_for_room() {
        let reads = vec![Fetch::Whole { length: MIB }; 40];
        let mut pacer = Pacer::new(reads, 16 * MIB, 8 * MIB);
        let units = drain(&mut pacer);
        assert_eq!(
            units,
            [
                Unit::Group((0..4).collect()),
                Unit::Group((4..8).collect()),
                Unit::Group((8..12).collect()),
                Unit::Group((12..16).collect()),
            ]
        );
        assert_eq!(pacer.outstanding(), 16 * MIB);
        pacer.handle_consumed(MIB);
        assert_eq!(
            drain(&mut pacer),
            [],
            "room for one read is not room for a group"
        );
        pacer.handle_consumed(3 * MIB);
        assert_eq!(drain(&mut pacer), [Unit::Group((16..20).collect())]);
    }

    #[test]
    fn a_long_read_goes_in_pieces_within_the_bound() {
        let reads = vec![
            Fetch::Whole { length: 10 },
            Fetch::Split {
                offset: 100,
                length: 5 * MIB + 1,
                size: Some(100 + 5 * MIB + 1),
            },
            Fetch::Whole { length: 10 },
        ];
        let mut pacer = Pacer::new(reads, 3 * MIB, MIB);
        assert_eq!(pacer.pieces_of(1), 6);
        assert_eq!(
            drain(&mut pacer),
            [
                Unit::Group(vec![0]),
                piece(1, 0, 100, MIB),
                piece(1, 1, 100 + MIB, MIB),
            ],
            "the bound holds: a third piece would pass it"
        );
        pacer.handle_consumed(10);
        assert_eq!(drain(&mut pacer), [piece(1, 2, 100 + 2 * MIB, MIB)]);
        pacer.handle_piece(1, true);
        pacer.handle_consumed(MIB);
        assert_eq!(drain(&mut pacer), [piece(1, 3, 100 + 3 * MIB, MIB)]);
        for _ in 0..2 {
            pacer.handle_piece(1, true);
            pacer.handle_consumed(MIB);
        }
        // The last piece is what is left; then the read after it.
        assert_eq!(
            drain(&mut pacer),
            [
                piece(1, 4, 100 + 4 * MIB, MIB),
                piece(1, 5, 100 + 5 * MIB, 1),
                Unit::Group(vec![2])
            ]
        );
        assert!(pacer.is_done());
    }

    #[test]
    fn past_the_known_end_one_piece_goes_after_the_whole_ones() {
        // 10 MiB asked of an object of 2.5 MiB: three pieces hold what exists.
        let reads = vec![
            Fetch::Split {
                offset: 0,
                length: 10 * MIB,
                size: Some(5 * MIB / 2),
            },
            Fetch::Whole { length: 1 },
        ];
        let mut pacer = Pacer::new(reads, 64 * MIB, MIB);
        assert_eq!(
            drain(&mut pacer),
            [
                piece(0, 0, 0, MIB),
                piece(0, 1, MIB, MIB),
                piece(0, 2, 2 * MIB, MIB)
            ]
        );
        // The third piece reaches the end: the read ends, the next read goes.
        pacer.handle_piece(0, true);
        pacer.handle_piece(0, true);
        assert_eq!(drain(&mut pacer), []);
        pacer.handle_piece(0, false);
        assert_eq!(drain(&mut pacer), [Unit::Group(vec![1])]);
        assert!(pacer.is_done());
    }

    #[test]
    fn an_object_that_grew_is_read_on_one_piece_at_a_time() {
        // The size said 2 MiB, but the pieces keep coming back whole.
        let reads = vec![Fetch::Split {
            offset: 0,
            length: 4 * MIB,
            size: Some(2 * MIB),
        }];
        let mut pacer = Pacer::new(reads, 64 * MIB, MIB);
        assert_eq!(
            drain(&mut pacer),
            [piece(0, 0, 0, MIB), piece(0, 1, MIB, MIB)]
        );
        pacer.handle_piece(0, true);
        assert_eq!(drain(&mut pacer), []);
        pacer.handle_piece(0, true);
        assert_eq!(drain(&mut pacer), [piece(0, 2, 2 * MIB, MIB)]);
        pacer.handle_piece(0, true);
        assert_eq!(drain(&mut pacer), [piece(0, 3, 3 * MIB, MIB)]);
        pacer.handle_piece(0, true);
        assert!(pacer.is_done());
    }

    #[test]
    fn a_failed_piece_ends_its_read() {
        let reads = vec![
            Fetch::Split {
                offset: 0,
                length: 8 * MIB,
                size: None,
            },
            Fetch::Settled,
        ];
        let mut pacer = Pacer::new(reads, 2 * MIB, MIB);
        assert_eq!(
            drain(&mut pacer),
            [piece(0, 0, 0, MIB), piece(0, 1, MIB, MIB)]
        );
        pacer.handle_piece(0, false);
        pacer.handle_consumed(2 * MIB);
        assert_eq!(drain(&mut pacer), [Unit::Settled(1)]);
        assert!(pacer.is_done());
    }

    #[test]
    fn a_unit_larger_than_the_bound_goes_alone() {
        let reads = vec![
            Fetch::Whole { length: 1 },
            Fetch::Whole { length: 100 * MIB },
            Fetch::Whole { length: 1 },
        ];
        let mut pacer = Pacer::new(reads, 64 * MIB, 8 * MIB);
        assert_eq!(drain(&mut pacer), [Unit::Group(vec![0])]);
        pacer.handle_consumed(1);
        assert_eq!(drain(&mut pacer), [Unit::Group(vec![1])]);
        pacer.handle_consumed(100 * MIB);
        assert_eq!(drain(&mut pacer), [Unit::Group(vec![2])]);
    }
}
