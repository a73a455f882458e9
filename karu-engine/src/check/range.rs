//! Parsing what an answer states about ranges, strictly: `Content-Range` (RFC 9110 §14.4),
//! Azurite's end-of-object form, and the decimal numbers of headers.

use crate::sdk::ContentRange;

/// Parse `Content-Range` (RFC 9110 §14.4), strictly: unit `bytes`, decimal digits only,
/// `first <= last`, `last < total` when the total is known, and a length that fits a `u64`
/// (`bytes 0-18446744073709551615/*` names 2^64 bytes, which no object holds). Optional
/// whitespace (spaces and tabs) may stand around the value, after the unit's space, and on
/// both sides of the `/`.
///
/// One pass over the bytes: this runs on every response, and trimming and splitting the
/// pieces first would read each byte three or four times.
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
