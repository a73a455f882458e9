//! The whole response check: `check_head`, then the driver's receive, then `Receipt::finish`.
//!
//! Input: any bytes, read as one request (a closed or suffix range, a fallback limit, an
//! identity condition), one response head (status, `Content-Range`, `Content-Length`,
//! `Content-Encoding`, `ETag`) whose numbers are drawn near the request's so that the
//! interesting cases (one byte off, a total at the range's end) come up often, and a body of
//! some length that ends cleanly or by an error. Invariants, from Karu's contract (`karu-engine/README.md`, "Response rules"):
//!
//! - a kept byte is at its stated position: body byte `skip + i` is delivered as object byte
//!   `first + i`, and the response states that position (its `Content-Range` first byte,
//!   whatever the status, or 0 for a `200` without one);
//! - a closed range is delivered from its first byte; no more bytes are delivered than were
//!   asked for or kept, and never fewer without an end of object;
//! - an end of object only where the response states a total at or below the range's end,
//!   and the delivered bytes end exactly there;
//! - an unsatisfiable answer never states a size beyond the first requested byte, in its head
//!   or in an S3-style error body;
//! - a transformed or unasked-for encoded body, or a failed strong `If-Match`, is never kept.
use arbitrary::{Result, Unstructured};
use karu_engine::check::{
    Expectation, ResponseHead, Verdict, actual_object_size, check_head, check_unsatisfiable,
    end_of_object_range, parse_content_range,
};
use karu_engine::sdk::{ContentRange, RangeSpec};

/// Check one input (any bytes); panics on a broken invariant.
pub fn run(data: &[u8]) {
    let mut u = Unstructured::new(data);
    if let Ok(case) = Case::generate(&mut u) {
        case.check();
    }
}

#[derive(Debug)]
struct Case {
    range: RangeSpec,
    fallback_limit: u64,
    if_match: Option<String>,
    accepts_stored_gzip: bool,
    status: u16,
    content_range: Option<String>,
    content_length: Option<u64>,
    content_encoding: Option<String>,
    etag: Option<String>,
    transformed: bool,
    /// Body bytes that arrived.
    arrived: u64,
    /// Whether the body ended cleanly (false: by a connection error).
    complete: bool,
    /// The error body of an unsatisfiable answer (S3 states the size in it).
    error_body: String,
}

/// A number near `base`: equal, one off, a few off, or anything.
fn near(u: &mut Unstructured<'_>, base: u64) -> Result<u64> {
    Ok(match u.int_in_range(0u8..=5)? {
        0 | 1 => base,
        2 => base.wrapping_add(1),
        3 => base.wrapping_sub(1),
        4 => base.wrapping_add(u.int_in_range(0u64..=16)?),
        _ => u.arbitrary()?,
    })
}

fn small_or_any(u: &mut Unstructured<'_>) -> Result<u64> {
    Ok(match u.int_in_range(0u8..=3)? {
        0 => u.int_in_range(0u64..=64)?,
        1 => u.int_in_range(0u64..=1 << 24)?,
        2 => u64::MAX - u.int_in_range(0u64..=64)?,
        _ => u.arbitrary()?,
    })
}

const TAGS: [&str; 6] = ["\"a\"", "\"b\"", "W/\"a\"", "*", "\"a\", \"b\"", "a"];

impl Case {
    fn generate(u: &mut Unstructured<'_>) -> Result<Case> {
        let size = small_or_any(u)?;
        let range = if u.ratio(1u8, 6)? {
            RangeSpec::Suffix {
                len: u.int_in_range(1u64..=u64::MAX)?.min(near(u, size)?.max(1)),
            }
        } else {
            let first = match u.int_in_range(0u8..=2)? {
                0 => near(u, size)?,
                1 => u.int_in_range(0u64..=64)?,
                _ => small_or_any(u)?,
            };
            let length = near(u, size.saturating_sub(first))?.max(1);
            match RangeSpec::closed(first, length) {
                Some(range) => range,
                None => RangeSpec::closed(first, 1).unwrap_or(RangeSpec::Closed {
                    first: u64::MAX,
                    last: u64::MAX,
                }),
            }
        };
        let (want_first, want_last) = match range {
            RangeSpec::Closed { first, last } => (first, last),
            RangeSpec::Suffix { len } => (size.saturating_sub(len), size.saturating_sub(1)),
        };
        let status = *u.choose(&[206u16, 206, 200, 200, 416, 404, 500, 304, 204])?;
        let content_range = match u.int_in_range(0u8..=4)? {
            0 => None,
            1 => {
                let total = if u.ratio(1u8, 4)? {
                    "*".to_string()
                } else {
                    near(u, size)?.to_string()
                };
                Some(format!("bytes */{total}"))
            }
            2 => Some(u.arbitrary::<String>()?),
            _ => {
                let first = near(u, want_first)?;
                let last = near(u, want_last)?;
                let total = if u.ratio(1u8, 5)? {
                    "*".to_string()
                } else {
                    near(u, size)?.to_string()
                };
                Some(format!("bytes {first}-{last}/{total}"))
            }
        };
        let stated_len = match content_range.as_deref().and_then(parse_content_range) {
            Some(ContentRange::Bytes { first, last, .. }) => (last - first).saturating_add(1),
            _ => size,
        };
        let content_length = match u.int_in_range(0u8..=3)? {
            0 => None,
            1 => Some(stated_len),
            2 => Some(size),
            _ => Some(near(u, stated_len)?),
        };
        let content_encoding = match u.int_in_range(0u8..=5)? {
            0 => Some(
                u.choose(&["gzip", "identity", "br", "", " GZIP "])?
                    .to_string(),
            ),
            _ => None,
        };
        let if_match = match u.int_in_range(0u8..=3)? {
            0 => Some(u.choose(&TAGS)?.to_string()),
            _ => None,
        };
        let etag = match u.int_in_range(0u8..=2)? {
            0 => None,
            _ => Some(u.choose(&TAGS)?.to_string()),
        };
        let promised = content_length.unwrap_or(stated_len);
        let arrived = match u.int_in_range(0u8..=3)? {
            0 | 1 => promised,
            _ => near(u, promised)?,
        }
        // Bodies of more than 2^48 bytes do not arrive.
        .min(1 << 48);
        Ok(Case {
            range,
            fallback_limit: *u.choose(&[8u64 << 20, 0, 1, u64::MAX])?,
            if_match,
            accepts_stored_gzip: u.arbitrary()?,
            status,
            content_range,
            content_length,
            content_encoding,
            etag,
            transformed: u.ratio(1u8, 16)?,
            arrived,
            complete: !u.ratio(1u8, 5)?,
            error_body: match u.int_in_range(0u8..=2)? {
                0 => format!(
                    "<Error><Code>InvalidRange</Code><ActualObjectSize>{}</ActualObjectSize></Error>",
                    near(u, size)?
                ),
                1 => u.arbitrary()?,
                _ => String::new(),
            },
        })
    }

    fn check(&self) {
        let expect = Expectation {
            range: self.range,
            if_match: self.if_match.as_deref(),
            fallback_limit: self.fallback_limit,
            accepts_stored_gzip: self.accepts_stored_gzip,
        };
        let head = ResponseHead {
            status: self.status,
            content_range: self.content_range.as_deref(),
            content_length: self.content_length,
            content_encoding: self.content_encoding.as_deref(),
            etag: self.etag.as_deref(),
            transformed: self.transformed,
        };
        let stated = self.content_range.as_deref().map(parse_content_range);
        match check_head(&expect, &head) {
            Verdict::Receive(receipt) => {
                assert!(!self.transformed, "a transformed body kept: {self:?}");
                if let Some(encoding) = self.content_encoding.as_deref().map(str::trim) {
                    assert!(
                        encoding.is_empty()
                            || encoding.eq_ignore_ascii_case("identity")
                            || (self.accepts_stored_gzip && encoding.eq_ignore_ascii_case("gzip")),
                        "an encoded body kept: {self:?}"
                    );
                }
                if let (Some(condition), Some(actual)) = (&self.if_match, &self.etag)
                    && condition.starts_with('"')
                    && !condition.contains(',')
                {
                    assert_eq!(condition, actual, "a failed If-Match kept: {self:?}");
                }
                assert!(
                    matches!(self.status, 200 | 206),
                    "status {} received: {self:?}",
                    self.status
                );
                // Where does the response say body byte 0 is?
                let (stated_start, stated_total) = match stated {
                    Some(Some(ContentRange::Bytes { first, total, .. })) => (first, total),
                    Some(_) => panic!("kept a body under an unusable Content-Range: {self:?}"),
                    None if self.status == 200 => (0, self.content_length),
                    None => panic!("kept a 206 body without Content-Range: {self:?}"),
                };
                assert_eq!(
                    stated_start.checked_add(receipt.skip),
                    Some(receipt.first),
                    "kept bytes are not at their stated position: {self:?} -> {receipt:?}"
                );
                let (want_first, want_len) = match self.range {
                    RangeSpec::Closed { first, last } => (Some(first), last - first + 1),
                    RangeSpec::Suffix { len } => {
                        let total = stated_total
                            .unwrap_or_else(|| panic!("a suffix without a total: {self:?}"));
                        (None, len.min(total))
                    }
                };
                if let Some(want_first) = want_first {
                    assert_eq!(receipt.first, want_first, "{self:?} -> {receipt:?}");
                }
                assert!(receipt.keep <= want_len, "{self:?} -> {receipt:?}");

                // The driver: discard `skip`, keep up to `keep`, count everything.
                let kept = receipt.keep.min(self.arrived.saturating_sub(receipt.skip));
                let Ok(delivered) = receipt.finish(kept, self.arrived, self.complete) else {
                    return;
                };
                assert!(delivered.available <= kept, "{self:?} -> {delivered:?}");
                assert!(delivered.available <= want_len, "{self:?} -> {delivered:?}");
                if delivered.available < want_len {
                    assert!(
                        delivered.ends_early,
                        "fewer bytes than asked without an end: {self:?} -> {delivered:?}"
                    );
                }
                if delivered.ends_early {
                    let total = stated_total.unwrap_or_else(|| {
                        panic!("an end of object no total states: {self:?} -> {delivered:?}")
                    });
                    assert_eq!(
                        receipt.first.checked_add(delivered.available),
                        Some(total),
                        "the delivered bytes do not end at the stated end: {self:?} -> {delivered:?}"
                    );
                    if let RangeSpec::Closed { last, .. } = self.range {
                        assert!(total <= last, "{self:?} -> {delivered:?}");
                    }
                }
            }
            Verdict::Unsatisfiable { size, .. } => {
                // Azurite's no bytes at the end of an object, from a 206 (or 200) without a body.
                let at_the_end = self.content_range.as_deref().and_then(end_of_object_range);
                assert!(
                    matches!(self.status, 200 | 416) || at_the_end.is_some(),
                    "status {} unsatisfiable: {self:?}",
                    self.status
                );
                if at_the_end.is_some() {
                    assert_eq!(size, at_the_end, "{self:?}");
                }
                // Without a size in the head, the driver may take one from an S3-style body.
                let size = match size {
                    Some(size) => Some(size),
                    None => match actual_object_size(self.error_body.as_bytes()) {
                        Some(stated) => match check_unsatisfiable(self.range, Some(stated)) {
                            Ok(size) => size,
                            Err(rejection) => {
                                assert!(!rejection.status().is_ok());
                                None
                            }
                        },
                        None => None,
                    },
                };
                let Some(size) = size else { return };
                match self.range {
                    RangeSpec::Closed { first, .. } => assert!(
                        size <= first,
                        "unsatisfiable though the stated size {size} reaches past byte {first}: {self:?}"
                    ),
                    RangeSpec::Suffix { .. } => {
                        assert_eq!(size, 0, "a suffix of a non-empty object is satisfiable")
                    }
                }
            }
            Verdict::ErrorStatus(code) => assert_eq!(code, self.status),
            Verdict::Reject(rejection) => assert!(!rejection.status().is_ok()),
        }
    }
}
