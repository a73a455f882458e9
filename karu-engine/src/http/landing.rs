//! Where a response's kept bytes land: one contiguous destination, or, for a merged transfer,
//! straight into each part's destination (gaps dropped, overlaps copied to every part that
//! asked for them), so a merged span needs no temporary copy of its own.

/// Receives the bytes of a transfer's span as they arrive, in order.
pub(crate) trait Landing: Send {
    /// The span's length.
    fn span(&self) -> u64;

    /// Store `bytes`, the span's bytes from offset `at` (`at + bytes.len() <= span()`).
    fn put(&mut self, at: u64, bytes: &[u8]);
}

/// One contiguous destination.
pub(crate) struct Slice<'a>(pub(crate) &'a mut [u8]);

impl Landing for Slice<'_> {
    fn span(&self) -> u64 {
        self.0.len() as u64
    }

    fn put(&mut self, at: u64, bytes: &[u8]) {
        let at = at as usize;
        self.0[at..at + bytes.len()].copy_from_slice(bytes);
    }
}

/// The destinations of a merged transfer's parts, by their offset in the span.
pub(crate) struct Scatter<'a> {
    /// `(offset in the span, destination)`, sorted by offset (the planner's order).
    parts: Vec<(u64, &'a mut [u8])>,
    span: u64,
}

impl<'a> Scatter<'a> {
    pub(crate) fn new(span: u64, mut parts: Vec<(u64, &'a mut [u8])>) -> Self {
        parts.sort_by_key(|(offset, _)| *offset);
        Scatter { parts, span }
    }
}

impl Landing for Scatter<'_> {
    fn span(&self) -> u64 {
        self.span
    }

    fn put(&mut self, at: u64, bytes: &[u8]) {
        let end = at + bytes.len() as u64;
        for (start, dst) in &mut self.parts {
            if *start >= end {
                break;
            }
            let lo = at.max(*start);
            let hi = end.min(*start + dst.len() as u64);
            if lo < hi {
                dst[(lo - *start) as usize..(hi - *start) as usize]
                    .copy_from_slice(&bytes[(lo - at) as usize..(hi - at) as usize]);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scatter_fills_overlapping_and_gapped_parts_from_chunks() {
        let span: Vec<u8> = (0..100u8).collect();
        let (mut a, mut b, mut c) = (vec![0u8; 10], vec![0u8; 20], vec![0u8; 5]);
        {
            // a = [0, 10), b = [5, 25) overlaps a, c = [90, 95) after a gap.
            let mut s = Scatter::new(
                100,
                vec![(90, &mut c[..]), (0, &mut a[..]), (5, &mut b[..])],
            );
            for (i, chunk) in span.chunks(7).enumerate() {
                s.put(i as u64 * 7, chunk);
            }
        }
        assert_eq!(a, span[0..10]);
        assert_eq!(b, span[5..25]);
        assert_eq!(c, span[90..95]);
    }

    #[test]
    fn a_slice_lands_in_place() {
        let mut dst = [0u8; 6];
        let mut slice = Slice(&mut dst);
        let landing: &mut dyn Landing = &mut slice;
        landing.put(2, b"abc");
        assert_eq!(landing.span(), 6);
        assert_eq!(&dst, b"\0\0abc\0");
    }
}
