//! Byte ranges: the `Range` a request asks for ([`RangeSpec`], and how it is written), the
//! `Content-Range` an answer states ([`ContentRange`]; parsed by the response checks,
//! [`crate::check`]), and the length no read may have ([`UNBOUNDED`]).

use std::fmt;

/// The length that means "to the end of the object". Karu rejects it: every read needs a finite,
/// nonzero length ([`Status::InvalidRange`](crate::sdk::Status::InvalidRange)).
pub const UNBOUNDED: u64 = u64::MAX;

/// The byte range a request asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RangeSpec {
    /// `bytes=first-last` (inclusive), with `first <= last`.
    Closed {
        /// First byte.
        first: u64,
        /// Last byte (inclusive).
        last: u64,
    },
    /// `bytes=-len`: the last `len` bytes (`len >= 1`).
    Suffix {
        /// Bytes from the end.
        len: u64,
    },
}

impl RangeSpec {
    /// The closed range for `length` bytes at `offset`, computed after validation
    /// (`length >= 1` and `offset + length` does not overflow).
    pub fn closed(offset: u64, length: u64) -> Option<Self> {
        let last = offset.checked_add(length.checked_sub(1)?)?;
        Some(RangeSpec::Closed {
            first: offset,
            last,
        })
    }

    /// The `Range` header value.
    pub fn header_value(&self) -> String {
        let bytes = self.header_bytes();
        // Only ASCII digits, `bytes=` and `-` are ever written.
        String::from_utf8_lossy(bytes.as_ref()).into_owned()
    }

    /// The `Range` header value, written on the stack: the request path builds and compares it
    /// once per request without an allocation.
    pub(crate) fn header_bytes(&self) -> HeaderBytes {
        let mut out = HeaderBytes {
            buf: [0; HEADER_MAX],
            len: 0,
        };
        out.push(b"bytes=");
        match *self {
            RangeSpec::Closed { first, last } => {
                out.push_decimal(first);
                out.push(b"-");
                out.push_decimal(last);
            }
            RangeSpec::Suffix { len } => {
                out.push(b"-");
                out.push_decimal(len);
            }
        }
        out
    }

    /// Bytes asked for (for a suffix: at most this many).
    pub fn length(&self) -> u64 {
        match *self {
            RangeSpec::Closed { first, last } => last - first + 1,
            RangeSpec::Suffix { len } => len,
        }
    }
}

/// The longest `Range` value: `bytes=` and two 20-digit numbers around a `-`.
const HEADER_MAX: usize = 6 + 20 + 1 + 20;

/// A `Range` header value in a fixed buffer (see [`RangeSpec::header_bytes`]).
#[derive(Clone, Copy)]
pub(crate) struct HeaderBytes {
    buf: [u8; HEADER_MAX],
    len: usize,
}

impl HeaderBytes {
    fn push(&mut self, bytes: &[u8]) {
        self.buf[self.len..self.len + bytes.len()].copy_from_slice(bytes);
        self.len += bytes.len();
    }

    /// `n` in decimal, written from its last digit back, two digits per division (as itoa
    /// does): every request writes four of these (its `Range`, and again in `asks_for`), and a
    /// digit at a time with a copy of the result costs several times more.
    fn push_decimal(&mut self, mut n: u64) {
        let end = self.len + n.checked_ilog10().map_or(1, |log| log as usize + 1);
        let mut at = end;
        while n >= 100 {
            let pair = 2 * (n % 100) as usize;
            n /= 100;
            at -= 2;
            self.buf[at..at + 2].copy_from_slice(&DIGIT_PAIRS[pair..pair + 2]);
        }
        if n >= 10 {
            let pair = 2 * n as usize;
            self.buf[at - 2..at].copy_from_slice(&DIGIT_PAIRS[pair..pair + 2]);
        } else {
            self.buf[at - 1] = b'0' + n as u8;
        }
        self.len = end;
    }
}

/// `00` to `99`, in order.
const DIGIT_PAIRS: &[u8; 200] = b"\
    0001020304050607080910111213141516171819\
    2021222324252627282930313233343536373839\
    4041424344454647484950515253545556575859\
    6061626364656667686970717273747576777879\
    8081828384858687888990919293949596979899";

impl AsRef<[u8]> for HeaderBytes {
    fn as_ref(&self) -> &[u8] {
        &self.buf[..self.len]
    }
}

impl fmt::Debug for HeaderBytes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&String::from_utf8_lossy(self.as_ref()), f)
    }
}

impl fmt::Display for RangeSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RangeSpec::Closed { first, last } => write!(f, "bytes {first}-{last}"),
            RangeSpec::Suffix { len } => write!(f, "the last {len} bytes"),
        }
    }
}

/// A parsed `Content-Range` header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ContentRange {
    /// `bytes first-last/total` (total `*` = unknown).
    Bytes {
        /// First byte.
        first: u64,
        /// Last byte (inclusive).
        last: u64,
        /// Object size, if stated.
        total: Option<u64>,
    },
    /// `bytes */total`: the range could not be satisfied.
    Unsatisfied {
        /// Object size.
        total: u64,
    },
}

impl fmt::Display for ContentRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ContentRange::Bytes { first, last, total } => {
                write!(f, "bytes {first}-{last}/")?;
                match total {
                    Some(total) => write!(f, "{total}"),
                    None => f.write_str("*"),
                }
            }
            ContentRange::Unsatisfied { total } => write!(f, "bytes */{total}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn range_header_is_inclusive() {
        let r = RangeSpec::closed(1_048_576, 4096).unwrap();
        assert_eq!(r.header_value(), "bytes=1048576-1052671");
        assert_eq!(r.length(), 4096);
        assert_eq!(RangeSpec::closed(0, 0), None);
        assert_eq!(RangeSpec::closed(u64::MAX, 2), None);
        assert_eq!(
            RangeSpec::closed(u64::MAX, 1).unwrap().header_value(),
            format!("bytes={}-{}", u64::MAX, u64::MAX)
        );
        assert_eq!(RangeSpec::Suffix { len: 10 }.header_value(), "bytes=-10");
    }

    #[test]
    fn range_header_bytes_match_the_formatted_value_at_every_width() {
        let mut values = vec![0u64, 1, 9, 10, 99, 100, u64::MAX - 1, u64::MAX];
        values.extend((0..20).map(|p| 10u64.pow(p)));
        values.extend((1..20).map(|p| 10u64.pow(p) - 1));
        for &first in &values {
            for &last in &values {
                if first > last {
                    continue;
                }
                let spec = RangeSpec::Closed { first, last };
                let expected = format!("bytes={first}-{last}");
                assert_eq!(spec.header_bytes().as_ref(), expected.as_bytes());
                assert_eq!(spec.header_value(), expected);
            }
            let spec = RangeSpec::Suffix { len: first };
            assert_eq!(
                spec.header_bytes().as_ref(),
                format!("bytes=-{first}").as_bytes()
            );
        }
    }
}
