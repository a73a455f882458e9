//! Parsing and resolving the `Range` request header (RFC 9110 §14), as a server does.

/// One byte range as written in a `Range` header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RangeSpec {
    /// `bytes=a-b`, both ends inclusive.
    Closed(u64, u64),
    /// `bytes=a-`, from `a` to the end.
    From(u64),
    /// `bytes=-n`, the last `n` bytes.
    Suffix(u64),
}

/// What a range resolves to against an object of a given size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Resolved {
    /// Serve `start..=end` with 206.
    Partial { start: u64, end: u64 },
    /// Answer 416 with `Content-Range: bytes */size`.
    Unsatisfiable,
}

fn digits(s: &str) -> Option<u64> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

/// Parses a `Range` header holding exactly one byte range.
///
/// Returns `None` for several ranges, another unit, or anything malformed; a server then
/// ignores the header and answers 200 with the whole body (RFC 9110 §14.2 allows this).
pub(crate) fn parse(value: &str) -> Option<RangeSpec> {
    let value = value.trim();
    let (unit, set) = value.split_once('=')?;
    if !unit.trim().eq_ignore_ascii_case("bytes") {
        return None;
    }
    let mut specs = set.split(',').map(str::trim).filter(|s| !s.is_empty());
    let spec = specs.next()?;
    if specs.next().is_some() {
        return None;
    }
    let (first, last) = spec.split_once('-')?;
    if first.is_empty() {
        return digits(last).map(RangeSpec::Suffix);
    }
    let first = digits(first)?;
    if last.is_empty() {
        return Some(RangeSpec::From(first));
    }
    let last = digits(last)?;
    (first <= last).then_some(RangeSpec::Closed(first, last))
}

/// The `(first, last)` of a header that is one closed range `bytes=a-b`, for the request log.
pub(crate) fn closed(value: &str) -> Option<(u64, u64)> {
    match parse(value)? {
        RangeSpec::Closed(a, b) => Some((a, b)),
        _ => None,
    }
}

/// Resolves a parsed range against an object of `size` bytes.
pub(crate) fn resolve(spec: RangeSpec, size: u64) -> Resolved {
    match spec {
        RangeSpec::Closed(start, end) if start < size => Resolved::Partial {
            start,
            end: end.min(size - 1),
        },
        RangeSpec::From(start) if start < size => Resolved::Partial {
            start,
            end: size - 1,
        },
        RangeSpec::Suffix(n) if n > 0 && size > 0 => Resolved::Partial {
            start: size - n.min(size),
            end: size - 1,
        },
        _ => Resolved::Unsatisfiable,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_single_range_forms() {
        assert_eq!(parse("bytes=0-9"), Some(RangeSpec::Closed(0, 9)));
        assert_eq!(parse(" bytes=5- "), Some(RangeSpec::From(5)));
        assert_eq!(parse("bytes=-7"), Some(RangeSpec::Suffix(7)));
        assert_eq!(parse("Bytes=1-1"), Some(RangeSpec::Closed(1, 1)));
        assert_eq!(parse("bytes=0-1,"), Some(RangeSpec::Closed(0, 1)));
    }

    #[test]
    fn rejects_lists_and_garbage() {
        for bad in [
            "bytes=0-1,5-6",
            "bytes=5-2",
            "bytes=a-b",
            "bytes=-",
            "items=0-1",
            "bytes 0-1",
            "bytes=+1-2",
            "",
        ] {
            assert_eq!(parse(bad), None, "{bad}");
        }
    }

    #[test]
    fn resolves_like_a_server() {
        use Resolved::*;
        assert_eq!(
            resolve(RangeSpec::Closed(2, 100), 10),
            Partial { start: 2, end: 9 }
        );
        assert_eq!(resolve(RangeSpec::Closed(10, 12), 10), Unsatisfiable);
        assert_eq!(
            resolve(RangeSpec::From(9), 10),
            Partial { start: 9, end: 9 }
        );
        assert_eq!(
            resolve(RangeSpec::Suffix(3), 10),
            Partial { start: 7, end: 9 }
        );
        assert_eq!(
            resolve(RangeSpec::Suffix(30), 10),
            Partial { start: 0, end: 9 }
        );
        assert_eq!(resolve(RangeSpec::Suffix(0), 10), Unsatisfiable);
        assert_eq!(resolve(RangeSpec::Closed(0, 0), 0), Unsatisfiable);
        assert_eq!(resolve(RangeSpec::Suffix(4), 0), Unsatisfiable);
    }
}
