//! Transfers and parts: the planner's output, carrying destinations to the workers.

use std::fmt;
use std::sync::Arc;

use smallvec::SmallVec;

use crate::batch::BatchShared;
use crate::batch::read::{Completion, Sink};
use crate::batch::timing::Timing;
use crate::credentials::Authority;
use crate::sdk::{Credential, Error, Locator, Status};

/// One local read or one HTTP request, serving one or more original reads ([`Part`]s).
pub(crate) struct Transfer {
    /// The object (without its window: offsets here are absolute).
    pub(crate) locator: Locator,
    /// Absolute offset of the span's first byte.
    pub(crate) start: u64,
    /// Length of the span.
    pub(crate) length: u64,
    /// The identity condition shared by every part.
    pub(crate) if_match: Option<String>,
    /// The original reads, in offset order.
    pub(crate) parts: Parts,
    /// Where the parts' completions go.
    pub(crate) batch: Arc<BatchShared>,
    /// How the transfer is authenticated, and the credential a worker obtained for it. Boxed:
    /// most transfers (local, public) have none, and a transfer is written into its queue and
    /// read out of it once per read.
    pub(crate) auth: Option<Box<(Authority, Credential)>>,
    /// How long the read already spent obtaining its credential: its deadline, which covers
    /// the lookup too, counts from the lookup's start (not from its wait for a concurrency
    /// permit).
    pub(crate) credential_wait: std::time::Duration,
}

/// A transfer's parts: inline when it serves one read, as most do.
pub(crate) type Parts = SmallVec<[Part; 1]>;

/// One original read inside a transfer: its place in the span, its destination and its tag.
pub(crate) struct Part {
    pub(crate) tag: u64,
    pub(crate) index: usize,
    /// Where the read's bytes start inside the transfer's span.
    pub(crate) offset_in_span: u64,
    pub(crate) length: u64,
    pub(crate) sink: Sink,
}

impl Part {
    /// The completion of this part.
    pub(crate) fn into_completion(self, result: Result<(), Error>, received: u64) -> Completion {
        // Only a range error keeps a prefix; any other failure delivers nothing.
        let received = match &result {
            Ok(()) => self.length,
            Err(e) if e.status() == Status::RangeNotSatisfiable => received.min(self.length),
            Err(_) => 0,
        };
        Completion {
            tag: self.tag,
            index: self.index,
            result,
            bytes_received: received,
            buffer: self.sink.into_buffer(received),
            timing: Timing::new(),
        }
    }
}

impl Transfer {
    /// Complete every part with the same error, without touching destinations.
    pub(crate) fn fail(mut self, error: &Error) {
        self.fail_parts(error);
    }

    fn fail_parts(&mut self, error: &Error) {
        let completions: Vec<Completion> = std::mem::take(&mut self.parts)
            .into_iter()
            .map(|p| p.into_completion(Err(error.clone()), 0))
            .collect();
        if !completions.is_empty() {
            self.batch.complete(completions);
        }
    }

    /// Take the transfer apart before the parts at `cuts` (positions in `parts`, ascending,
    /// each in `1..parts.len()`; see [`crate::plan::price::cuts`]): this transfer keeps the
    /// first piece and the others are returned, each spanning exactly its parts' hull, with
    /// their offsets in the span rebased. Every piece keeps the object, the identity
    /// condition, the batch and the credential.
    pub(crate) fn split_off(&mut self, cuts: &[usize]) -> Vec<Transfer> {
        let origin = self.start;
        let mut parts = std::mem::take(&mut self.parts).into_iter();
        let mut pieces = Vec::with_capacity(cuts.len());
        let mut from = 0;
        for to in cuts.iter().copied().chain([usize::MAX]) {
            let piece: Parts = parts.by_ref().take(to.saturating_sub(from)).collect();
            from = to;
            let Some((start, length, piece)) = hull(piece) else {
                continue;
            };
            if self.parts.is_empty() {
                (self.start, self.length, self.parts) = (origin + start, length, piece);
                continue;
            }
            pieces.push(Transfer {
                locator: self.locator.clone(),
                start: origin + start,
                length,
                if_match: self.if_match.clone(),
                parts: piece,
                batch: Arc::clone(&self.batch),
                auth: self.auth.clone(),
                credential_wait: self.credential_wait,
            });
        }
        pieces
    }

    /// Complete every part as cancelled.
    pub(crate) fn cancel(self) {
        self.fail(&Error::new(
            Status::Cancelled,
            "the batch was released before this read started",
        ));
    }
}

/// The offset in the old span and the length of the hull of `parts` (in span order), and the
/// parts rebased to it; `None` without parts.
fn hull(mut parts: Parts) -> Option<(u64, u64, Parts)> {
    let first = parts.first()?.offset_in_span;
    let end = parts
        .iter()
        .map(|p| p.offset_in_span + p.length)
        .max()
        .unwrap_or(first);
    for part in &mut parts {
        part.offset_in_span -= first;
    }
    Some((first, end - first, parts))
}

impl Drop for Transfer {
    /// A transfer dropped with parts left (a panicking or aborted task) still completes every
    /// read: a batch never waits forever. Its place among the batch's transfers in flight
    /// goes to the next one waiting, if the batch bounds them.
    fn drop(&mut self) {
        if !self.parts.is_empty() {
            self.fail_parts(&Error::internal(
                "the transfer was abandoned before it completed",
            ));
        }
        self.batch.transfer_ended();
    }
}

impl fmt::Debug for Transfer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Transfer")
            .field("locator", &self.locator)
            .field("start", &self.start)
            .field("length", &self.length)
            .field("if_match", &self.if_match.is_some())
            .field("parts", &self.parts.len())
            .finish()
    }
}

impl fmt::Debug for Part {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Part")
            .field("tag", &self.tag)
            .field("index", &self.index)
            .field("offset_in_span", &self.offset_in_span)
            .field("length", &self.length)
            .field("sink", &self.sink)
            .finish()
    }
}

impl crate::batch::in_flight::Waiting for Transfer {
    fn cancel(self) {
        Transfer::cancel(self);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::batch::read::Sink;
    use proptest::prelude::*;

    fn part(index: usize, offset_in_span: u64, length: u64) -> Part {
        Part {
            tag: 100 + index as u64,
            index,
            offset_in_span,
            length,
            sink: Sink::Allocate,
        }
    }

    #[test]
    fn a_transfer_stays_small() {
        // Every read of a submission is written into a transfer and read back out by its
        // worker: the smaller the transfer, the faster a large submission is built (the
        // credential is not inline).
        let size = std::mem::size_of::<Transfer>();
        assert!(size <= 152, "a transfer takes {size} bytes");
    }

    #[test]
    fn a_split_transfer_keeps_every_part_at_its_object_offset() {
        let locator = crate::sdk::testing::registry()
            .resolve("/karu/split")
            .unwrap();
        let batch = BatchShared::new((0..4).collect(), false);
        let transfer = Transfer {
            locator,
            start: 1000,
            length: 60_000,
            if_match: Some("\"e1\"".into()),
            parts: [
                part(0, 0, 4096),
                part(1, 4000, 200),
                part(2, 30_000, 4096),
                part(3, 55_904, 4096),
            ]
            .into_iter()
            .collect(),
            batch: Arc::clone(&batch),
            auth: None,
            credential_wait: std::time::Duration::from_millis(3),
        };
        let mut first = transfer;
        let rest = first.split_off(&[2, 3]);
        let pieces: Vec<&Transfer> = std::iter::once(&first).chain(&rest).collect();
        let spans: Vec<(u64, u64)> = pieces.iter().map(|t| (t.start, t.length)).collect();
        assert_eq!(spans, vec![(1000, 4200), (31_000, 4096), (56_904, 4096)]);
        let parts: Vec<Vec<(usize, u64, u64, u64)>> = pieces
            .iter()
            .map(|t| {
                t.parts
                    .iter()
                    .map(|p| (p.index, p.tag, p.offset_in_span, p.length))
                    .collect()
            })
            .collect();
        assert_eq!(
            parts,
            vec![
                vec![(0, 100, 0, 4096), (1, 101, 4000, 200)],
                vec![(2, 102, 0, 4096)],
                vec![(3, 103, 0, 4096)],
            ]
        );
        for piece in &pieces {
            assert_eq!(piece.if_match.as_deref(), Some("\"e1\""));
            assert!(Arc::ptr_eq(&piece.batch, &batch));
            assert_eq!(piece.credential_wait, std::time::Duration::from_millis(3));
            assert_eq!(piece.locator.canonical(), first.locator.canonical());
        }
        // No cut: the same span and parts.
        assert!(first.split_off(&[]).is_empty());
        assert_eq!(
            (first.start, first.length, first.parts.len()),
            (1000, 4200, 2)
        );
        // A first piece that starts inside the span moves the span's start.
        let mut later = Transfer {
            locator: first.locator.clone(),
            start: 0,
            length: 300,
            if_match: None,
            parts: [part(0, 100, 50), part(1, 250, 50)].into_iter().collect(),
            batch: BatchShared::new((0..2).collect(), false),
            auth: None,
            credential_wait: std::time::Duration::ZERO,
        };
        let rest = later.split_off(&[1]);
        assert_eq!((later.start, later.length), (100, 50));
        assert_eq!((rest[0].start, rest[0].length), (250, 50));
    }

    proptest! {
        /// Cutting a merged transfer where [`crate::plan::price::cuts`] says, at any price,
        /// keeps every read exactly once at its object offset, each piece the exact hull of its
        /// reads with no gap above the price inside it, and a gap above the price between
        /// pieces.
        #[test]
        fn pieces_keep_every_read_in_place(
            start in 0u64..1 << 40,
            reads in proptest::collection::vec((0u64..100_000, 1u64..50_000), 1..40),
            price in 0u64..120_000,
        ) {
            // Parts in span order: each starts some way after the previous one's start.
            let mut offset = 0;
            let mut parts = Parts::new();
            for (i, &(step, length)) in reads.iter().enumerate() {
                if i > 0 {
                    offset += step;
                }
                parts.push(part(i, offset, length));
            }
            let length = parts.iter().map(|p| p.offset_in_span + p.length).max().unwrap();
            let expected: Vec<(usize, u64, u64)> = parts
                .iter()
                .map(|p| (p.index, start + p.offset_in_span, p.length))
                .collect();
            let mut first = Transfer {
                locator: crate::sdk::testing::registry().resolve("/karu/prop").unwrap(),
                start,
                length,
                if_match: None,
                parts,
                batch: BatchShared::new((0..reads.len() as u64).collect(), false),
                auth: None,
                credential_wait: std::time::Duration::ZERO,
            };
            let positions = crate::plan::price::cuts(
                first.parts.iter().map(|p| (p.offset_in_span, p.length)),
                price,
            );
            let rest = first.split_off(&positions);
            prop_assert_eq!(rest.len(), positions.len());
            let pieces: Vec<&Transfer> = std::iter::once(&first).chain(&rest).collect();
            let mut seen = Vec::new();
            let mut previous_end: Option<u64> = None;
            for piece in &pieces {
                prop_assert!(!piece.parts.is_empty());
                prop_assert_eq!(piece.parts[0].offset_in_span, 0, "a piece starts at a read");
                let mut end = 0;
                for p in &piece.parts {
                    prop_assert!(
                        p.offset_in_span.saturating_sub(end) <= price,
                        "a gap above the price inside a piece"
                    );
                    end = end.max(p.offset_in_span + p.length);
                    seen.push((p.index, piece.start + p.offset_in_span, p.length));
                }
                prop_assert_eq!(piece.length, end, "a piece is the hull of its reads");
                if let Some(before) = previous_end {
                    prop_assert!(piece.start > before + price, "pieces closer than the price");
                }
                previous_end = Some(piece.start + piece.length);
            }
            prop_assert_eq!(seen, expected);
        }
    }
}
