//! Where a response's kept bytes land: straight into each part's destination (gaps dropped,
//! overlaps copied to every part that asked for them), so a merged span needs no temporary
//! copy of its own, and a destination Karu owns holds only what arrived.
//!
//! Memory follows the data, not the request: an owned destination is reserved when a
//! response head states how many bytes it delivers ([`Landing::expect`]) and otherwise grows
//! as bytes arrive, never beyond its read's length. A read of 8 GB of a 20 MiB object takes
//! 20 MiB.

use std::time::Instant;

use smallvec::{SmallVec, smallvec};

use crate::batch::read::Open;
use crate::batch::timing::TransferMeter;
use crate::sdk::{Error, Status};

/// Receives the bytes of a transfer's span as they arrive, in order.
///
/// Call order for one response: [`expect`](Landing::expect) once its head states the body's
/// length (skipped for a body of unknown length), then [`put`](Landing::put) for each chunk.
/// A destination that cannot grow records the failure ([`failure`](Landing::failure)) instead
/// of aborting; the transfer then fails with it.
pub(crate) trait Landing: Send {
    /// The span's length.
    fn span(&self) -> u64;

    /// The response states that span bytes up to `end` (exclusive) will arrive: make room
    /// for them now, in one allocation per destination.
    fn expect(&mut self, end: u64) -> Result<(), Error>;

    /// Store `bytes`, the span's bytes from offset `at` (`at + bytes.len() <= span()`).
    fn put(&mut self, at: u64, bytes: &[u8]);

    /// Why a [`put`](Landing::put) could not store its bytes, if one could not.
    fn failure(&mut self) -> Option<Error>;

    /// Attempt `n` (from 1) of the fetch starts (for the transfer's meter).
    fn attempt(&mut self, _n: u32) {}
}

/// One part's destination while its transfer is active.
pub(crate) enum Dest<'a> {
    /// A caller's slice of the read's length, filled in place.
    Slice(&'a mut [u8]),
    /// A vector holding the bytes received from the part's start, never longer than `limit`.
    Vec {
        buf: &'a mut Vec<u8>,
        limit: u64,
        /// Bytes written past `buf.len()` into its spare capacity (`[start, end)`, sorted,
        /// disjoint, not touching `buf.len()`): the pieces of a split transfer land out of
        /// order, and the vector's length covers only the prefix that has arrived.
        ahead: Ahead,
    },
}

/// Ranges of a vector's spare capacity that hold bytes (see [`Dest::Vec`]); as many as a
/// split transfer has pieces in flight.
type Ahead = SmallVec<[(usize, usize); 2]>;

impl<'a> Dest<'a> {
    /// The destination of a read of `length` bytes, as its sink was opened.
    pub(crate) fn new(open: Open<'a>, length: u64) -> Self {
        match open {
            Open::Slice(slice) => Dest::Slice(slice),
            Open::Vec(buf) => Dest::vec(buf, length),
        }
    }

    /// A vector that receives at most `limit` bytes.
    pub(crate) fn vec(buf: &'a mut Vec<u8>, limit: u64) -> Self {
        Dest::Vec {
            buf,
            limit,
            ahead: Ahead::new(),
        }
    }

    /// Bytes this destination takes.
    fn len(&self) -> u64 {
        match self {
            Dest::Slice(s) => s.len() as u64,
            Dest::Vec { limit, .. } => *limit,
        }
    }

    /// Room for the first `end` bytes (clamped to the destination's length), reserved exactly.
    fn reserve(&mut self, end: u64) -> Result<(), Error> {
        let Dest::Vec { buf, limit, ahead } = self else {
            return Ok(());
        };
        let want = end.min(*limit);
        let want = usize::try_from(want).map_err(|_| no_room(want))?;
        if want > buf.capacity() {
            settle(buf, ahead);
            buf.try_reserve_exact(want - buf.len())
                .map_err(|_| no_room(want as u64))?;
        }
        Ok(())
    }

    /// Write `bytes` at offset `at` of the destination (`at + bytes.len() <= len()`).
    fn write(&mut self, at: u64, bytes: &[u8]) -> Result<(), Error> {
        match self {
            Dest::Slice(s) => {
                let at = at as usize;
                let to = at + bytes.len();
                crate::pages::before_slice_write(s, at, to);
                s[at..to].copy_from_slice(bytes);
                Ok(())
            }
            Dest::Vec { buf, limit, ahead } => {
                let end = at + bytes.len() as u64;
                if end > buf.capacity() as u64 {
                    // Amortised growth for a body of unknown length, capped at the limit. A
                    // reallocation keeps only `buf[..len]`: bytes ahead of it are made part
                    // of it first.
                    settle(buf, ahead);
                    let doubled = (buf.capacity() as u64).saturating_mul(2);
                    let target = end.max(doubled).min(*limit);
                    let target = usize::try_from(target).map_err(|_| no_room(target))?;
                    buf.try_reserve_exact(target - buf.len())
                        .map_err(|_| no_room(target as u64))?;
                }
                let at = at as usize;
                let end = at + bytes.len();
                crate::pages::before_write_at(buf, at, end);
                if at > buf.len() {
                    // A piece of a split transfer ahead of the bytes before it: into the spare
                    // capacity, without writing the gap.
                    write_ahead(buf, ahead, at, bytes);
                } else {
                    let overlap = (buf.len() - at).min(bytes.len());
                    buf[at..at + overlap].copy_from_slice(&bytes[..overlap]);
                    buf.extend_from_slice(&bytes[overlap..]);
                }
                absorb(buf, ahead);
                Ok(())
            }
        }
    }
}

/// Copy `bytes` to offset `at` (past `buf.len()`, within its capacity) of `buf`'s spare
/// capacity, and record the range in `ahead`.
fn write_ahead(buf: &mut Vec<u8>, ahead: &mut Ahead, at: usize, bytes: &[u8]) {
    let end = at + bytes.len();
    debug_assert!(at > buf.len() && end <= buf.capacity());
    let len = buf.len();
    let spare = &mut buf.spare_capacity_mut()[at - len..end - len];
    // SAFETY: `spare` is `bytes.len()` writable bytes of the vector's own allocation, which
    // `bytes` (a response's chunk) cannot overlap.
    unsafe {
        std::ptr::copy_nonoverlapping(bytes.as_ptr(), spare.as_mut_ptr().cast::<u8>(), bytes.len());
    }
    // Merge with every recorded range it overlaps or touches.
    let (mut lo, mut hi) = (at, end);
    ahead.retain(|&mut (s, e)| {
        let apart = e < lo || s > hi;
        if !apart {
            lo = lo.min(s);
            hi = hi.max(e);
        }
        apart
    });
    let i = ahead.partition_point(|&(s, _)| s < lo);
    ahead.insert(i, (lo, hi));
}

/// Extend `buf`'s length over the ranges of `ahead` that its end now reaches.
fn absorb(buf: &mut Vec<u8>, ahead: &mut Ahead) {
    while let Some(&(start, end)) = ahead.first() {
        if start > buf.len() {
            break;
        }
        ahead.remove(0);
        if end > buf.len() {
            // SAFETY: `buf[..len]` is initialised, and so is `[start, end)` (written by
            // `write_ahead`, within the capacity, which has not changed since: `settle` runs
            // before any reallocation); `start <= len`, so `buf[..end]` is.
            unsafe { buf.set_len(end) };
        }
    }
}

/// Make every byte ahead of `buf`'s length part of it, the gaps between them zeroed (before a
/// reallocation, which keeps only `buf[..len]`; not reached while a split transfer's room was
/// reserved whole).
fn settle(buf: &mut Vec<u8>, ahead: &mut Ahead) {
    for (start, end) in std::mem::take(ahead) {
        if start > buf.len() {
            buf.resize(start, 0);
        }
        if end > buf.len() {
            // SAFETY: as in `absorb`: `[start, end)` was written within the capacity, which
            // has not changed since, and `buf[..start]` is initialised.
            unsafe { buf.set_len(end) };
        }
    }
}

fn no_room(bytes: u64) -> Error {
    Error::new(
        Status::InvalidArgument,
        format!(
            "cannot allocate {bytes} bytes for a destination; read into a buffer of your own or \
             in smaller pieces"
        ),
    )
}

/// The destinations of a transfer's parts, by their offset in the span (one part at offset 0
/// for a transfer that is not merged), and the transfer's meter: the attempts of its fetch
/// and the bytes that land, the first one stamped (see [`Timing`](crate::Timing)). One
/// layer between a response and its destinations, so a chunk of body costs one call.
pub(crate) struct Scatter<'a> {
    /// `(offset in the span, destination)`, sorted by offset (the planner's order).
    parts: SmallVec<[(u64, Dest<'a>); 1]>,
    span: u64,
    failed: Option<Error>,
    pub(crate) meter: TransferMeter,
}

impl<'a> Scatter<'a> {
    pub(crate) fn new(span: u64, mut parts: SmallVec<[(u64, Dest<'a>); 1]>) -> Self {
        parts.sort_by_key(|(offset, _)| *offset);
        Scatter {
            parts,
            span,
            failed: None,
            meter: TransferMeter::start(),
        }
    }

    /// One destination covering the whole span.
    pub(crate) fn one(dest: Dest<'a>) -> Self {
        let span = dest.len();
        Scatter::new(span, smallvec![(0, dest)])
    }
}

impl Landing for Scatter<'_> {
    fn span(&self) -> u64 {
        self.span
    }

    fn expect(&mut self, end: u64) -> Result<(), Error> {
        for (start, dst) in &mut self.parts {
            if *start >= end {
                break;
            }
            dst.reserve(end - *start)?;
        }
        Ok(())
    }

    fn put(&mut self, at: u64, bytes: &[u8]) {
        self.meter.received(bytes.len() as u64, Instant::now);
        if self.failed.is_some() {
            return;
        }
        let end = at + bytes.len() as u64;
        for (start, dst) in &mut self.parts {
            if *start >= end {
                break;
            }
            let lo = at.max(*start);
            let hi = end.min(start.saturating_add(dst.len()));
            if lo < hi {
                let written =
                    dst.write(lo - *start, &bytes[(lo - at) as usize..(hi - at) as usize]);
                if let Err(e) = written {
                    self.failed = Some(e);
                    return;
                }
            }
        }
    }

    fn failure(&mut self) -> Option<Error> {
        self.failed.take()
    }

    fn attempt(&mut self, n: u32) {
        self.meter.attempt(n);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scatter_fills_overlapping_and_gapped_parts_from_chunks() {
        let span: Vec<u8> = (0..100u8).collect();
        let (mut a, mut b, mut c) = (vec![0u8; 10], Vec::new(), Vec::with_capacity(64));
        {
            // a = [0, 10) a slice, b = [5, 25) overlaps a, c = [90, 95) after a gap.
            let mut s = Scatter::new(
                100,
                smallvec![
                    (90, Dest::vec(&mut c, 5),),
                    (0, Dest::Slice(&mut a[..])),
                    (5, Dest::vec(&mut b, 20),),
                ],
            );
            for (i, chunk) in span.chunks(7).enumerate() {
                s.put(i as u64 * 7, chunk);
            }
            assert!(s.failure().is_none());
        }
        assert_eq!(a, span[0..10]);
        assert_eq!(b, span[5..25]);
        assert_eq!(c, span[90..95]);
        assert_eq!(
            b.capacity(),
            20,
            "grown by doubling, capped at the read's length"
        );
    }

    #[test]
    fn the_meter_counts_what_lands_and_the_attempts() {
        let mut dst = [0u8; 6];
        let mut one = Scatter::one(Dest::Slice(&mut dst));
        assert_eq!(one.meter.first_byte, None);
        one.attempt(1);
        one.put(0, b"");
        assert_eq!(one.meter.first_byte, None, "no byte yet");
        one.put(0, b"abc");
        let first = one.meter.first_byte.expect("stamped");
        one.attempt(2);
        one.put(3, b"def");
        assert_eq!(one.meter.first_byte, Some(first), "stamped once");
        assert_eq!((one.meter.bytes, one.meter.attempts), (6, 2));
    }

    #[test]
    fn a_slice_lands_in_place() {
        let mut dst = [0u8; 6];
        let mut one = Scatter::one(Dest::Slice(&mut dst));
        let landing: &mut dyn Landing = &mut one;
        landing.expect(6).unwrap();
        landing.put(2, b"abc");
        assert_eq!(landing.span(), 6);
        drop(one);
        assert_eq!(&dst, b"\0\0abc\0");
    }

    #[test]
    fn owned_destinations_hold_what_the_response_states_not_what_was_asked() {
        // A read of 2^62 bytes whose response states 1,000: one exact reservation.
        let mut buf = Vec::new();
        let mut one = Scatter::one(Dest::vec(&mut buf, 1 << 62));
        one.expect(1000).unwrap();
        for at in (0..1000).step_by(100) {
            one.put(at, &[at as u8; 100]);
        }
        assert!(one.failure().is_none());
        drop(one);
        assert_eq!(buf.len(), 1000);
        assert_eq!(buf.capacity(), 1000, "reserved once, exactly");
        assert_eq!(buf[999], 900u64 as u8);
    }

    #[test]
    fn a_body_of_unknown_length_grows_as_it_arrives() {
        let mut buf = Vec::new();
        let mut one = Scatter::one(Dest::vec(&mut buf, u64::MAX));
        let chunk = [7u8; 4096];
        for i in 0..100 {
            one.put(i * 4096, &chunk);
        }
        assert!(one.failure().is_none());
        drop(one);
        assert_eq!(buf.len(), 409_600);
        assert!(buf.capacity() < 2 * 409_600, "{}", buf.capacity());
    }

    /// The vector of a destination, its bytes ahead of its length, and its length.
    fn vec_state(dest: &Dest<'_>) -> (usize, Vec<(usize, usize)>) {
        match dest {
            Dest::Vec { buf, ahead, .. } => (buf.len(), ahead.to_vec()),
            Dest::Slice(_) => unreachable!("a vector"),
        }
    }

    #[test]
    fn pieces_land_out_of_order_in_a_vector_without_writing_the_gaps() {
        // Four pieces of 10 bytes of a 40-byte span, as a split transfer delivers them: the
        // first, then the third and fourth before the second, each in two chunks.
        let span: Vec<u8> = (100..140u8).collect();
        let mut buf = Vec::new();
        {
            let mut dest = Dest::vec(&mut buf, 40);
            dest.reserve(40).unwrap();
            dest.write(0, &span[0..10]).unwrap();
            dest.write(20, &span[20..25]).unwrap();
            // Before the spare capacity was used, the gap was zero-filled here: the length
            // went to 25 with ten zeros the second piece then overwrote.
            assert_eq!(vec_state(&dest), (10, vec![(20, 25)]));
            dest.write(30, &span[30..35]).unwrap();
            assert_eq!(vec_state(&dest), (10, vec![(20, 25), (30, 35)]));
            dest.write(25, &span[25..30]).unwrap();
            assert_eq!(
                vec_state(&dest),
                (10, vec![(20, 35)]),
                "ranges that touch merge"
            );
            dest.write(35, &span[35..40]).unwrap();
            dest.write(10, &span[10..15]).unwrap();
            assert_eq!(vec_state(&dest), (15, vec![(20, 40)]));
            // A piece that restarts rewrites what it had sent.
            dest.write(10, &span[10..15]).unwrap();
            dest.write(15, &span[15..20]).unwrap();
            assert_eq!(vec_state(&dest), (40, vec![]));
        }
        assert_eq!(buf, span);
        assert_eq!(buf.capacity(), 40, "reserved once");
    }

    #[test]
    fn a_vector_that_must_grow_keeps_the_bytes_ahead_of_its_length() {
        // No size stated: no room reserved, and pieces ahead of the prefix make it grow.
        let span: Vec<u8> = (0..24u8).collect();
        let mut buf = Vec::new();
        {
            let mut dest = Dest::vec(&mut buf, 100);
            dest.write(8, &span[8..12]).unwrap();
            assert_eq!(vec_state(&dest), (0, vec![(8, 12)]));
            // Growing past the capacity first makes the bytes ahead part of the vector (the
            // gap before them zeroed): a reallocation keeps only the vector's length.
            dest.write(20, &span[20..24]).unwrap();
            assert_eq!(vec_state(&dest), (12, vec![(20, 24)]));
            dest.write(0, &span[0..8]).unwrap();
            dest.write(12, &span[12..20]).unwrap();
            assert_eq!(vec_state(&dest), (24, vec![]));
        }
        assert_eq!(buf, span);
    }

    #[test]
    fn a_restarted_response_overwrites_from_its_first_byte() {
        let mut buf = Vec::new();
        let mut one = Scatter::one(Dest::vec(&mut buf, 10));
        one.put(0, b"oldold");
        one.put(0, b"0123456789");
        drop(one);
        assert_eq!(buf, b"0123456789");
    }

    #[test]
    fn a_destination_that_cannot_be_allocated_fails_instead_of_aborting() {
        let mut buf = Vec::new();
        let mut one = Scatter::one(Dest::vec(&mut buf, u64::MAX));
        let error = one.expect(u64::MAX).unwrap_err();
        assert_eq!(error.status(), Status::InvalidArgument);
        // The same for growth while bytes arrive (a chunk claiming a far offset).
        let mut buf = vec![0u8; 1];
        let mut one = Scatter::one(Dest::vec(&mut buf, u64::MAX));
        one.put(u64::MAX / 2, b"x");
        assert_eq!(
            one.failure().map(|e| e.status()),
            Some(Status::InvalidArgument)
        );
    }
}
