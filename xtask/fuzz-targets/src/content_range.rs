//! `Content-Range` parsing and `Range` header building.
//!
//! Input: any bytes. As text, they are a `Content-Range` value: whatever it parses to must be
//! a range the header can state (first <= last < total), the canonical spelling of the result
//! must parse back to it, and the parse must agree with an independent reading of RFC 9110
//! §14.4. As sixteen bytes, they are an offset and a length: a closed range exists exactly
//! when the read is valid, and its header names exactly those bytes.
use karu_engine::check::parse_content_range;
use karu_engine::sdk::{ContentRange, RangeSpec};

/// Check one input (any bytes); panics on a broken invariant.
pub fn run(data: &[u8]) {
    if let Ok(text) = std::str::from_utf8(data) {
        check_content_range(text);
    }
    check_range_header(data);
}

fn check_content_range(text: &str) {
    let parsed = parse_content_range(text);
    assert_eq!(parsed, reference(text), "{text:?}");
    let Some(parsed) = parsed else { return };
    let canonical = match parsed {
        ContentRange::Bytes { first, last, total } => {
            assert!(first <= last, "{text:?}: {parsed:?}");
            assert!(
                (last - first).checked_add(1).is_some(),
                "{text:?}: {parsed:?}"
            );
            if let Some(total) = total {
                assert!(last < total, "{text:?}: {parsed:?}");
                format!("bytes {first}-{last}/{total}")
            } else {
                format!("bytes {first}-{last}/*")
            }
        }
        ContentRange::Unsatisfied { total } => format!("bytes */{total}"),
    };
    assert_eq!(
        parse_content_range(&canonical),
        Some(parsed),
        "{canonical:?}"
    );
}

/// RFC 9110 §14.4, read independently: `bytes` SP (`first-last` | `*`) `/` (`total` | `*`),
/// decimal digits, `first <= last`, `last < total`; `*/*` means nothing. Karu also accepts
/// optional whitespace (spaces and tabs, RFC 9110 §5.6.3) around the value, the range, the
/// slash and the total.
fn reference(text: &str) -> Option<ContentRange> {
    let ows: &[char] = &[' ', '\t'];
    let text = text.trim_matches(ows);
    let rest = text.strip_prefix("bytes ")?;
    let (range, total) = rest.split_once('/')?;
    let number = |s: &str| -> Option<u64> {
        let s = s.trim_matches(ows);
        if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        s.parse().ok()
    };
    let total = if total.trim_matches(ows) == "*" {
        None
    } else {
        Some(number(total)?)
    };
    if range.trim_matches(ows) == "*" {
        return total.map(|total| ContentRange::Unsatisfied { total });
    }
    // Whitespace around the range as a whole, not around the dash.
    let (first, last) = range.trim_matches(ows).split_once('-')?;
    if first.trim_matches(ows) != first || last.trim_matches(ows) != last {
        return None;
    }
    let (first, last) = (number(first)?, number(last)?);
    // A length of 2^64 (`0-18446744073709551615/*`) is no object's.
    if first > last || total.is_some_and(|t| last >= t) || (first, last) == (0, u64::MAX) {
        return None;
    }
    Some(ContentRange::Bytes { first, last, total })
}

fn check_range_header(data: &[u8]) {
    let Some(bytes) = data.get(..16) else { return };
    let offset = u64::from_le_bytes(bytes[..8].try_into().unwrap());
    let length = u64::from_le_bytes(bytes[8..].try_into().unwrap());
    let valid = length >= 1 && offset.checked_add(length - 1).is_some();
    let spec = RangeSpec::closed(offset, length);
    assert_eq!(spec.is_some(), valid, "{offset} + {length}");
    let Some(spec) = spec else { return };
    assert_eq!(spec.length(), length);
    let header = spec.header_value();
    let last = offset + (length - 1);
    assert_eq!(header, format!("bytes={offset}-{last}"));
    // What a server reads from it: one closed range, first..=last.
    let (a, b) = header
        .strip_prefix("bytes=")
        .and_then(|r| r.split_once('-'))
        .unwrap();
    assert_eq!((a.parse::<u64>(), b.parse::<u64>()), (Ok(offset), Ok(last)));
}
