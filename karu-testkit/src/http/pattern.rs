//! The deterministic byte pattern of virtual objects.
//!
//! Byte `i` of a virtual object is [`pattern_byte`]`(i)`: eight bytes at a time come from a
//! 64-bit mix (splitmix64) of the word index, so neighbouring bytes look random and a range
//! shifted by a few bytes does not compare equal to the one that was asked for.

/// The splitmix64 finaliser: a cheap bijective mix of a 64-bit word.
#[inline]
fn mix(word: u64) -> u64 {
    let mut z = word.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The byte at `offset` of every virtual object (see [`MockServer::insert_virtual`]).
///
/// A cheap function of the offset that does not repeat with a short period: for a small shift
/// `k`, `pattern_byte(i) != pattern_byte(i + k)` holds for about 255 offsets in 256, so a
/// response holding the wrong range is detected by comparing it with [`pattern`].
///
/// ```
/// use karu_testkit::{pattern, pattern_byte};
/// assert_eq!(pattern(1000, 3), vec![pattern_byte(1000), pattern_byte(1001), pattern_byte(1002)]);
/// ```
///
/// [`MockServer::insert_virtual`]: crate::MockServer::insert_virtual
#[inline]
pub fn pattern_byte(offset: u64) -> u8 {
    (mix(offset >> 3) >> ((offset & 7) * 8)) as u8
}

/// Fills `out` with the pattern bytes starting at `offset` (`out[j] = pattern_byte(offset + j)`).
///
/// Works a 64-bit word at a time; this is what the server uses to stream virtual objects.
pub fn fill_pattern(offset: u64, out: &mut [u8]) {
    // Unaligned head, byte by byte, up to the next multiple of 8.
    let head = (((8 - (offset & 7)) & 7) as usize).min(out.len());
    for (j, b) in out[..head].iter_mut().enumerate() {
        *b = pattern_byte(offset + j as u64);
    }
    let aligned = offset + head as u64;
    let rest = &mut out[head..];
    let mut words = rest.chunks_exact_mut(8);
    let mut word = aligned >> 3;
    for chunk in &mut words {
        chunk.copy_from_slice(&mix(word).to_le_bytes());
        word += 1;
    }
    let tail = words.into_remainder();
    let tail_offset = word << 3;
    for (j, b) in tail.iter_mut().enumerate() {
        *b = pattern_byte(tail_offset + j as u64);
    }
}

/// The `len` pattern bytes starting at `offset`, as a new vector (what a correct response to
/// `bytes=offset-(offset+len-1)` of a virtual object holds).
pub fn pattern(offset: u64, len: usize) -> Vec<u8> {
    let mut out = vec![0; len];
    fill_pattern(offset, &mut out);
    out
}

/// The `len` bytes at `offset` of version `version` of a pattern object: what an object
/// inserted as [`pattern`] holds after `version` [`Fault::ChangeContent`]s, each adding one to
/// every byte. The first 256 versions differ from each other at every offset.
///
/// ```
/// use karu_testkit::{pattern, pattern_version, version_of_pattern};
/// assert_eq!(pattern_version(0, 100, 10), pattern(100, 10));
/// assert_eq!(version_of_pattern(&pattern_version(3, 100, 10), 100), Some(3));
/// let mut mixed = pattern_version(0, 0, 8);
/// mixed.extend(pattern_version(1, 8, 8));
/// assert_eq!(version_of_pattern(&mixed, 0), None);
/// ```
///
/// [`Fault::ChangeContent`]: crate::Fault::ChangeContent
pub fn pattern_version(version: u64, offset: u64, len: usize) -> Vec<u8> {
    let mut out = pattern(offset, len);
    for byte in &mut out {
        *byte = byte.wrapping_add(version as u8);
    }
    out
}

/// The one version (below 256) of a pattern object that `bytes`, read at `offset`, are all of
/// ([`pattern_version`]); `None` when they mix versions, hold other bytes, or are empty.
pub fn version_of_pattern(bytes: &[u8], offset: u64) -> Option<u64> {
    let first = *bytes.first()?;
    let version = first.wrapping_sub(pattern_byte(offset));
    bytes
        .iter()
        .zip(offset..)
        .all(|(&b, i)| b == pattern_byte(i).wrapping_add(version))
        .then_some(u64::from(version))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fill_matches_byte_function_at_every_alignment() {
        for start in 0..20u64 {
            for len in 0..40usize {
                let got = pattern(start, len);
                let want: Vec<u8> = (start..start + len as u64).map(pattern_byte).collect();
                assert_eq!(got, want, "start {start} len {len}");
            }
        }
        let far = (1u64 << 30) - 13;
        let got = pattern(far, 29);
        let want: Vec<u8> = (far..far + 29).map(pattern_byte).collect();
        assert_eq!(got, want);
    }

    #[test]
    fn shifted_ranges_differ() {
        let base = pattern(4096, 4096);
        for k in 1..16u64 {
            let shifted = pattern(4096 + k, 4096);
            let same = base.iter().zip(&shifted).filter(|(a, b)| a == b).count();
            assert!(same < 64, "shift {k}: {same} equal bytes");
        }
    }
}
