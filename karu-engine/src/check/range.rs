//! Byte ranges on the wire: the `Range` a request asks for and the `Content-Range` an answer
//! states, parsed strictly.

use std::fmt;

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
    /// digit at a time with a copy of the result was ~160 instructions a number.
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

/// Parse `Content-Range` (RFC 9110 §14.4), strictly: unit `bytes`, decimal digits only,
/// `first <= last`, `last < total` when the total is known, and a length that fits a `u64`
/// (`bytes 0-18446744073709551615/*` names 2^64 bytes, which no object holds). Optional
/// whitespace (spaces and tabs) may stand around the value, after the unit's space, and on
/// both sides of the `/`.
///
/// One pass over the bytes: this runs on every response, and trimming and splitting the
/// pieces first read each byte three or four times (~785 instructions a response).
pub fn parse_content_range(value: &str) -> Option<ContentRange> {
    let b = value.as_bytes();
    let at = after_unit(b)?;
    let (range, at) = match b.get(at) {
        Some(b'*') => (None, at + 1),
        _ => {
            let (first, at) = number(b, at)?;
            let at = (b.get(at) == Some(&b'-')).then_some(at + 1)?;
            let (last, at) = number(b, at)?;
            (Some((first, last)), at)
        }
    };
    let at = skip_ows(b, at);
    let at = skip_ows(b, (b.get(at) == Some(&b'/')).then_some(at + 1)?);
    let (total, at) = match b.get(at) {
        Some(b'*') => (None, at + 1),
        _ => number(b, at).map(|(n, at)| (Some(n), at))?,
    };
    if skip_ows(b, at) != b.len() {
        return None;
    }
    let Some((first, last)) = range else {
        return Some(ContentRange::Unsatisfied { total: total? });
    };
    if first > last || total.is_some_and(|t| last >= t) || (last - first).checked_add(1).is_none() {
        return None;
    }
    Some(ContentRange::Bytes { first, last, total })
}

/// The object's size, if `value` is `bytes SIZE-(SIZE-1)/SIZE` (whitespace as in
/// [`parse_content_range`]): no bytes, at the end of an object of `SIZE` bytes. RFC 9110 has no
/// such form (the unsatisfied `bytes */SIZE` says it), but Azurite states it, with a `206` and
/// no body, for a range at or past the end of a blob (`bytes 0--1/0` for an empty one, which
/// fake-gcs-server also states for a suffix of an empty object).
pub fn end_of_object_range(value: &str) -> Option<u64> {
    let b = value.as_bytes();
    let at = after_unit(b)?;
    let (size, at) = number(b, at)?;
    let at = (b.get(at) == Some(&b'-')).then_some(at + 1)?;
    let at = match b.get(at) {
        // `0--1`: the byte before byte 0.
        Some(b'-') if size == 0 => (number(b, at + 1)? == (1, at + 2)).then_some(at + 2)?,
        _ => {
            let (last, at) = number(b, at)?;
            (last.checked_add(1) == Some(size)).then_some(at)?
        }
    };
    let at = skip_ows(b, at);
    let at = skip_ows(b, (b.get(at) == Some(&b'/')).then_some(at + 1)?);
    let (total, at) = number(b, at)?;
    (total == size && skip_ows(b, at) == b.len()).then_some(size)
}

/// Where a `Content-Range` value `b` goes on after its unit: `bytes` and a space, with optional
/// whitespace around them.
fn after_unit(b: &[u8]) -> Option<usize> {
    const UNIT: &[u8] = b"bytes ";
    let at = skip_ows(b, 0);
    b[at..]
        .starts_with(UNIT)
        .then(|| skip_ows(b, at + UNIT.len()))
}

/// Where the optional whitespace (RFC 9110, 5.6.3: spaces and tabs) that starts at `at` in
/// `b` ends.
fn skip_ows(b: &[u8], at: usize) -> usize {
    at + b[at..]
        .iter()
        .take_while(|&&c| c == b' ' || c == b'\t')
        .count()
}

/// The decimal number that starts at `at` in `b` (at least one digit, fitting a `u64`), and
/// where it ends: the digits are read as they are found, in the same pass.
fn number(b: &[u8], at: usize) -> Option<(u64, usize)> {
    let mut n = 0u64;
    let mut end = at;
    while let Some(digit) = b.get(end).map(|c| c.wrapping_sub(b'0')).filter(|d| *d <= 9) {
        n = n.checked_mul(10)?.checked_add(u64::from(digit))?;
        end += 1;
    }
    (end > at).then_some((n, end))
}

/// A header value that is one decimal number (`Content-Length`), with optional whitespace
/// around it: the same digits as `Content-Range`'s, so no `+` sign and nothing that overflows.
pub(crate) fn header_number(value: &str) -> Option<u64> {
    let b = value.as_bytes();
    let (n, end) = number(b, skip_ows(b, 0))?;
    (skip_ows(b, end) == b.len()).then_some(n)
}

/// A non-empty run of ASCII digits that fits a `u64`.
pub(crate) fn digits(s: &str) -> Option<u64> {
    number(s.as_bytes(), 0)
        .filter(|&(_, end)| end == s.len())
        .map(|(n, _)| n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_end_of_object_range_of_azurite_and_fake_gcs_server() {
        for (value, size) in [
            ("bytes 0--1/0", 0),
            (" bytes  0--1 / 0 ", 0),
            ("bytes 0--1/\t0", 0),
            ("bytes 7-6/7", 7),
            ("bytes 1300000-1299999/1300000", 1_300_000),
        ] {
            assert_eq!(end_of_object_range(value), Some(size), "{value:?}");
            assert_eq!(parse_content_range(value), None, "{value:?}");
        }
        for value in [
            "bytes 0--1/1",
            "bytes 0--1/*",
            "bytes 0-0/0",
            "bytes */0",
            "bytes 0--2/0",
            "bytes 0--1/0x",
            "bytes 0 --1/0",
            "bytes 7-6/8",
            "bytes 7-5/7",
            "bytes 8-6/7",
            "bytes 7--1/7",
            "",
        ] {
            assert_eq!(end_of_object_range(value), None, "{value:?}");
        }
    }

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

    #[test]
    fn content_range_parsing() {
        use ContentRange::*;
        let ok = |s| parse_content_range(s);
        assert_eq!(
            ok("bytes 0-9/100"),
            Some(Bytes {
                first: 0,
                last: 9,
                total: Some(100)
            })
        );
        assert_eq!(
            ok("bytes 5-5/*"),
            Some(Bytes {
                first: 5,
                last: 5,
                total: None
            })
        );
        assert_eq!(ok("bytes */0"), Some(Unsatisfied { total: 0 }));
        assert_eq!(ok("bytes */1234"), Some(Unsatisfied { total: 1234 }));
        assert_eq!(
            ok(&format!("bytes 0-{}/{}", u64::MAX - 1, u64::MAX)),
            Some(Bytes {
                first: 0,
                last: u64::MAX - 1,
                total: Some(u64::MAX)
            })
        );
        for bad in [
            "",
            "bytes",
            "bytes 0-9",
            "bytes 9-0/100",
            "bytes 0-100/100",
            "bytes -1-9/100",
            "bytes +1-9/100",
            "bytes 0-9/abc",
            "bytes */*",
            "items 0-9/100",
            "bytes=0-9/100",
            "bytes 0x1-9/100",
            "bytes 0-99999999999999999999/*",
            // Found by the `response_check` fuzz target: 2^64 bytes overflowed the body
            // length computed from it (a panic in a debug build).
            "bytes 0-18446744073709551615/*",
            "bytes 0-9/18446744073709551616",
            // Whitespace inside a number, or other than spaces and tabs around the value.
            "bytes 0 -9/100",
            "bytes 0-9/1 00",
            "bytes\t0-9/100",
            "\u{a0}bytes 0-9/100",
            "bytes 0-9/100\u{3000}",
            "bytes \u{b}0-9/100",
            "bytes 0-9/100\r\n",
        ] {
            assert_eq!(parse_content_range(bad), None, "{bad:?}");
        }
        // Spaces and tabs around the value and its parts are optional whitespace.
        for spaced in [
            "  bytes 0-9/100\t",
            "bytes   0-9 / 100 ",
            "\tbytes 0-9\t/\t100",
        ] {
            assert_eq!(
                parse_content_range(spaced),
                Some(Bytes {
                    first: 0,
                    last: 9,
                    total: Some(100)
                }),
                "{spaced:?}"
            );
        }
        assert_eq!(
            parse_content_range("bytes  * /7"),
            Some(Unsatisfied { total: 7 })
        );
        assert_eq!(
            parse_content_range("bytes 007-0009/0100"),
            Some(Bytes {
                first: 7,
                last: 9,
                total: Some(100)
            })
        );
    }

    #[test]
    fn a_header_number_is_digits_with_optional_whitespace() {
        assert_eq!(header_number("4096"), Some(4096));
        assert_eq!(header_number(" \t4096 "), Some(4096));
        assert_eq!(header_number("18446744073709551615"), Some(u64::MAX));
        for bad in [
            "",
            " ",
            "+4096",
            "-1",
            "40 96",
            "4096\u{a0}",
            "18446744073709551616",
        ] {
            assert_eq!(header_number(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn the_largest_ranges_have_a_length() {
        let largest = format!("bytes 1-{}/*", u64::MAX);
        assert_eq!(
            parse_content_range(&largest),
            Some(ContentRange::Bytes {
                first: 1,
                last: u64::MAX,
                total: None
            })
        );
        assert_eq!(
            parse_content_range(&format!("bytes 0-{}/*", u64::MAX - 1)),
            Some(ContentRange::Bytes {
                first: 0,
                last: u64::MAX - 1,
                total: None
            })
        );
    }

    #[test]
    fn content_ranges_print_as_headers() {
        for text in ["bytes 0-9/100", "bytes 5-5/*", "bytes */0"] {
            assert_eq!(parse_content_range(text).unwrap().to_string(), text);
        }
    }
}
