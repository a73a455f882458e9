//! The verdict on one response: what its head proves about the requested range, and what its
//! body must then contain.
//!
//! The rules, each refusing rather than guessing:
//!
//! - A `206`, and a `200` that carries a `Content-Range`, are judged by that header: it must
//!   name the requested range, or a prefix of it that ends at the object's stated end, and the
//!   body must hold exactly its bytes.
//! - Only a `200` without `Content-Range` is the whole object; Karu then discards the prefix
//!   before the first requested byte, up to the fallback limit. Such an answer proves it is
//!   the whole object only by holding more bytes than the range asked for: until then it may
//!   be the range's bytes alone, sent by a server or proxy that dropped the `206` and its
//!   `Content-Range`. For a range past byte 0 none of its bytes is believed then (they would
//!   land at other offsets); for a suffix exactly as long as its body, neither (nor the size);
//!   from byte 0 its bytes are the object's first bytes either way, and only a body shorter
//!   than the range states the size.
//! - Only a stated size ends an object early: `Content-Range: bytes a-b/SIZE`, the
//!   `Content-Length` of a whole-object `200`, a `416` (for a range from byte 0, even without
//!   a size: nothing at byte 0 is an empty object), or Azurite's bodiless `206` with
//!   `bytes SIZE-(SIZE-1)/SIZE`. A body that merely stops (an interrupted transfer, or one
//!   delimited by closing the connection) is a truncation.
//! - A `416` whose stated size reaches past the first requested byte contradicts itself.

use super::condition::{if_match_satisfied, strong_etag};
use super::range::{end_of_object_range, parse_content_range};
use crate::sdk::{ContentRange, Mismatch, RangeSpec, Rejection};

/// What the engine expects of a response.
#[derive(Debug, Clone, Copy)]
pub struct Expectation<'a> {
    /// The range requested.
    pub range: RangeSpec,
    /// The caller's (or Karu's own resume) identity condition, sent as `If-Match`.
    pub if_match: Option<&'a str>,
    /// The largest prefix Karu may discard when a server ignores the range (200).
    pub fallback_limit: u64,
    /// Whether the request asked for stored gzip bytes (`Accept-Encoding: gzip`), so that a
    /// `Content-Encoding: gzip` answer is the stored representation, not a transformation.
    pub accepts_stored_gzip: bool,
}

/// The parts of a response head that matter, as plain values.
#[derive(Debug, Clone, Copy, Default)]
pub struct ResponseHead<'a> {
    /// HTTP status code.
    pub status: u16,
    /// `Content-Range`.
    pub content_range: Option<&'a str>,
    /// `Content-Length`, if present and numeric.
    pub content_length: Option<u64>,
    /// `Content-Encoding`.
    pub content_encoding: Option<&'a str>,
    /// `ETag`.
    pub etag: Option<&'a str>,
    /// A provider-specific sign that the server transformed the bytes (e.g. decompressed them).
    pub transformed: bool,
}

/// What a response head proves.
#[derive(Debug, Clone, PartialEq, Eq)]
#[must_use]
pub enum Verdict {
    /// Receive the body as the receipt says.
    Receive(Receipt),
    /// A 416, or a whole-object 200 that ends before the first byte: nothing exists at the
    /// first requested byte. `size` is the object size when the answer states it (already
    /// checked against the range; see [`check_unsatisfiable`] for a size found in the body).
    Unsatisfiable {
        /// Object size, when stated.
        size: Option<u64>,
        /// The response's strong ETag, if any.
        etag: Option<String>,
    },
    /// A status the engine classifies as an error (see
    /// [`classify_status`](crate::sdk::classify_status)).
    ErrorStatus(u16),
    /// The response cannot be used.
    Reject(Rejection),
}

/// How to receive a body the head accepted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Receipt {
    /// Absolute offset (in the object) of the first kept byte.
    pub first: u64,
    /// Body bytes to discard before keeping (a whole-object 200).
    pub skip: u64,
    /// Body bytes to keep after the skip: the requested bytes that exist.
    pub keep: u64,
    /// Exact body length the head promises, when it promises one.
    pub body_len: Option<u64>,
    /// Object size, when stated.
    pub total: Option<u64>,
    /// Whether the kept bytes end at the object's stated end before the requested last byte.
    pub ends_early: bool,
    /// The response's strong ETag, if any (weak tags are dropped).
    pub etag: Option<String>,
}

/// How many requested bytes a response delivered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[must_use]
pub struct Delivered {
    /// Bytes from the first requested byte that are proven.
    pub available: u64,
    /// Whether the object ended before the requested last byte (so bytes beyond `available`
    /// are a range error, not a failure).
    pub ends_early: bool,
}

impl Receipt {
    /// Judge the body once it ended: `kept` bytes were kept (after the skip) and `seen` body
    /// bytes arrived in all; `complete` is false when the body ended by an error (or was
    /// abandoned by the driver once it held everything wanted).
    ///
    /// Every wanted byte must have arrived, whatever the framing: a body that stops early is a
    /// truncation, never an end of the object (only the head can state that, in
    /// [`Receipt::ends_early`]).
    pub fn finish(&self, kept: u64, seen: u64, complete: bool) -> Result<Delivered, Rejection> {
        // Nothing is proven beyond what arrived after the skip; and nothing at all of a whole
        // body of unknown length that skipped a prefix and ended within the range's length (it
        // may be the range's bytes alone: see the module's rules).
        let kept = if self.skip > 0 && self.body_len.is_none() && seen <= self.keep {
            0
        } else {
            kept.min(seen.saturating_sub(self.skip))
        };
        if kept < self.keep {
            return Err(Rejection::Truncated {
                kept,
                wanted: self.keep,
                seen,
                promised: self.body_len,
                interrupted: !complete,
            });
        }
        // The driver may abandon the rest of a body once it has the bytes (then
        // `seen < body_len`); it never holds more than the head promised.
        if let Some(promised) = self.body_len
            && seen > promised
        {
            return Err(Rejection::Overlong { seen, promised });
        }
        Ok(Delivered {
            available: self.keep,
            ends_early: self.ends_early,
        })
    }
}

/// Decide what a response head proves about the requested range.
pub fn check_head(expect: &Expectation<'_>, head: &ResponseHead<'_>) -> Verdict {
    judge(expect, head).unwrap_or_else(Verdict::Reject)
}

fn judge(expect: &Expectation<'_>, head: &ResponseHead<'_>) -> Result<Verdict, Rejection> {
    let etag = strong_etag(head.etag);
    if let (Some(required), Some(actual)) = (expect.if_match, head.etag)
        && matches!(head.status, 200 | 206 | 416)
        && !if_match_satisfied(required, actual)
    {
        return Err(Rejection::Changed {
            required: required.to_string(),
            actual: actual.to_string(),
        });
    }
    // Azurite's (and for an empty object fake-gcs-server's) answer at or past the end of an
    // object: no bytes, at the end of an object of the size it states.
    // (A body, as every other 206 has, skips the parse.)
    let bodiless = matches!(head.status, 200 | 206) && head.content_length.is_none_or(|n| n == 0);
    if bodiless && let Some(size) = head.content_range.and_then(end_of_object_range) {
        return Ok(Verdict::Unsatisfiable {
            size: check_unsatisfiable(expect.range, Some(size))?,
            etag,
        });
    }
    Ok(match head.status {
        206 | 200 => {
            transformation(expect, head)?;
            if head.status == 206 || head.content_range.is_some() {
                Verdict::Receive(ranged(expect, head, etag)?)
            } else {
                whole(expect, head, etag)?
            }
        }
        416 => {
            let size = match head.content_range {
                None => None,
                Some(value) => match parse_content_range(value) {
                    Some(ContentRange::Unsatisfied { total }) => Some(total),
                    _ => {
                        return Err(Rejection::BadUnsatisfied {
                            value: value.to_string(),
                        });
                    }
                },
            };
            Verdict::Unsatisfiable {
                size: check_unsatisfiable(expect.range, size)?,
                etag,
            }
        }
        s => Verdict::ErrorStatus(s),
    })
}

/// Check the size a `416` states (from `Content-Range: bytes */SIZE`, or an S3-style error
/// body) against the requested range: the answer says nothing exists at the first requested
/// byte, so the size must not reach past it. A `416` that states no size for a range from
/// byte 0 still proves one: nothing exists at byte 0, so the object is empty (fake-gcs-server
/// answers so; without it, `stat` of an empty object there had no size).
pub fn check_unsatisfiable(range: RangeSpec, size: Option<u64>) -> Result<Option<u64>, Rejection> {
    let Some(size) = size else {
        return Ok(matches!(range, RangeSpec::Closed { first: 0, .. }).then_some(0));
    };
    let exists = match range {
        RangeSpec::Closed { first, .. } => size > first,
        RangeSpec::Suffix { .. } => size > 0,
    };
    if exists {
        return Err(Rejection::UnsatisfiableContradicted {
            expected: range,
            size,
        });
    }
    Ok(Some(size))
}

fn transformation(expect: &Expectation<'_>, head: &ResponseHead<'_>) -> Result<(), Rejection> {
    if head.transformed {
        return Err(Rejection::Transformed);
    }
    let Some(encoding) = head.content_encoding.map(str::trim) else {
        return Ok(());
    };
    if encoding.is_empty()
        || encoding.eq_ignore_ascii_case("identity")
        || (expect.accepts_stored_gzip && encoding.eq_ignore_ascii_case("gzip"))
    {
        return Ok(());
    }
    Err(Rejection::Encoded {
        encoding: encoding.to_string(),
    })
}

/// A 206, or a 200 with `Content-Range`: the header says where the body's bytes are.
fn ranged(
    expect: &Expectation<'_>,
    head: &ResponseHead<'_>,
    etag: Option<String>,
) -> Result<Receipt, Rejection> {
    let status = head.status;
    let Some(value) = head.content_range else {
        return Err(Rejection::NoContentRange { status });
    };
    let Some(actual) = parse_content_range(value) else {
        return Err(Rejection::BadContentRange {
            status,
            value: value.to_string(),
        });
    };
    let mismatch = |mismatch| Rejection::UnexpectedRange {
        expected: expect.range,
        actual,
        mismatch,
    };
    let ContentRange::Bytes { first, last, total } = actual else {
        return Err(mismatch(Mismatch::NoBytes));
    };
    let body_len = last - first + 1;
    if let Some(content_length) = head.content_length
        && content_length != body_len
    {
        return Err(Rejection::LengthDisagrees {
            content_length,
            range: actual,
        });
    }
    let ends_early = match expect.range {
        RangeSpec::Closed {
            first: want_first,
            last: want_last,
        } => {
            if first != want_first {
                return Err(mismatch(Mismatch::StartsElsewhere));
            }
            if last > want_last {
                return Err(mismatch(Mismatch::ExtendsBeyond));
            }
            // Short only where the object ends, as the same header states.
            let ends_early = last < want_last;
            if ends_early && total != Some(last + 1) {
                return Err(mismatch(Mismatch::StopsShort));
            }
            ends_early
        }
        RangeSpec::Suffix { len } => {
            let Some(total) = total else {
                return Err(mismatch(Mismatch::SizeUnknown));
            };
            // The last `len` bytes, or the whole of a shorter object.
            if last + 1 != total || body_len != len.min(total) {
                return Err(mismatch(Mismatch::NotTheSuffix));
            }
            false
        }
    };
    Ok(Receipt {
        first,
        skip: 0,
        keep: body_len,
        body_len: Some(body_len),
        total,
        ends_early,
        etag,
    })
}

/// A 200 without `Content-Range`: the whole object from byte 0, `Content-Length` its size.
fn whole(
    expect: &Expectation<'_>,
    head: &ResponseHead<'_>,
    etag: Option<String>,
) -> Result<Verdict, Rejection> {
    let total = head.content_length;
    let (first, want) = match (expect.range, total) {
        (RangeSpec::Closed { first, last }, _) => (first, last - first + 1),
        (RangeSpec::Suffix { len }, Some(total)) => {
            let want = len.min(total);
            (total - want, want)
        }
        (RangeSpec::Suffix { .. }, None) => return Err(Rejection::SuffixOfUnknownSize),
    };
    // Only the range's bytes, without their `206` and `Content-Range`, would be no longer
    // than the range; from byte 0 they are the object's first bytes either way.
    let unproven = match (expect.range, total) {
        (RangeSpec::Closed { .. }, Some(body)) => first > 0 && body <= want,
        // Shorter, it is the whole object either way.
        (RangeSpec::Suffix { len }, Some(body)) => body == len,
        (_, None) => false,
    };
    if let (true, Some(body)) = (unproven, total) {
        return Err(Rejection::UnprovenWhole {
            expected: expect.range,
            body,
        });
    }
    if let Some(total) = total
        && first >= total
        // The suffix of an empty object is empty, not missing.
        && !(total == 0 && matches!(expect.range, RangeSpec::Suffix { .. }))
    {
        return Ok(Verdict::Unsatisfiable {
            size: Some(total),
            etag,
        });
    }
    if first > expect.fallback_limit {
        return Err(Rejection::BeyondFallback {
            first,
            limit: expect.fallback_limit,
        });
    }
    // Without a stated size, every requested byte must arrive: a body that stops early is
    // not known to stop where the object does.
    let (keep, ends_early) = match total {
        Some(total) => {
            let exists = total - first;
            (want.min(exists), exists < want)
        }
        None => (want, false),
    };
    // From byte 0, a body exactly as long as the range holds the object's first bytes either
    // way, but it states the object's size only if it is not the range alone.
    let states_size =
        !(matches!(expect.range, RangeSpec::Closed { first: 0, .. }) && total == Some(want));
    Ok(Verdict::Receive(Receipt {
        first,
        skip: first,
        keep,
        body_len: total,
        total: total.filter(|_| states_size),
        ends_early,
        etag,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sdk::{Error, Status};

    const MIB: u64 = 1 << 20;

    fn expect(first: u64, last: u64) -> Expectation<'static> {
        Expectation {
            range: RangeSpec::Closed { first, last },
            if_match: None,
            fallback_limit: 8 * MIB,
            accepts_stored_gzip: false,
        }
    }

    fn suffix(len: u64) -> Expectation<'static> {
        Expectation {
            range: RangeSpec::Suffix { len },
            ..expect(0, 0)
        }
    }

    fn head(status: u16, cr: Option<&'static str>, cl: Option<u64>) -> ResponseHead<'static> {
        ResponseHead {
            status,
            content_range: cr,
            content_length: cl,
            ..ResponseHead::default()
        }
    }

    fn receipt(v: Verdict) -> Receipt {
        match v {
            Verdict::Receive(r) => r,
            other => panic!("expected a receipt, got {other:?}"),
        }
    }

    fn rejected(v: Verdict) -> Rejection {
        match v {
            Verdict::Reject(e) => e,
            other => panic!("expected a rejection, got {other:?}"),
        }
    }

    fn cr(text: &str) -> ContentRange {
        parse_content_range(text).unwrap()
    }

    fn unexpected(first: u64, last: u64, actual: &str, mismatch: Mismatch) -> Rejection {
        Rejection::UnexpectedRange {
            expected: RangeSpec::Closed { first, last },
            actual: cr(actual),
            mismatch,
        }
    }

    fn delivered(available: u64, ends_early: bool) -> Result<Delivered, Rejection> {
        Ok(Delivered {
            available,
            ends_early,
        })
    }

    #[test]
    fn partial_exact() {
        let r = receipt(check_head(
            &expect(100, 199),
            &head(206, Some("bytes 100-199/1000"), Some(100)),
        ));
        assert_eq!(
            (r.first, r.skip, r.keep, r.body_len, r.total, r.ends_early),
            (100, 0, 100, Some(100), Some(1000), false)
        );
        assert_eq!(r.finish(100, 100, true), delivered(100, false));
    }

    #[test]
    fn a_200_with_content_range_is_judged_by_it_like_a_206() {
        // A merged `bytes=5-19` answered 200 + Content-Range + 15 bytes is not a 15-byte
        // object from byte 0.
        for status in [200, 206] {
            let r = receipt(check_head(
                &expect(5, 19),
                &head(status, Some("bytes 5-19/2000000"), Some(15)),
            ));
            assert_eq!(
                (r.first, r.skip, r.keep, r.total, r.ends_early),
                (5, 0, 15, Some(2_000_000), false),
                "{status}"
            );
            // Far into the object, where a prefix rule would answer "ends at byte 1000000".
            let r = receipt(check_head(
                &expect(1_000_000, 1_000_099),
                &head(status, Some("bytes 1000000-1000099/2000000"), Some(100)),
            ));
            assert_eq!((r.first, r.skip, r.keep), (1_000_000, 0, 100), "{status}");
            // The size probe: byte 0 of a 2,000,000-byte object, not a 1-byte one.
            let r = receipt(check_head(
                &expect(0, 0),
                &head(status, Some("bytes 0-0/2000000"), Some(1)),
            ));
            assert_eq!((r.keep, r.total), (1, Some(2_000_000)), "{status}");
            // Every rule of a 206 holds for the 200 too.
            assert_eq!(
                rejected(check_head(
                    &expect(5, 19),
                    &head(status, Some("bytes 10-24/2000000"), Some(15))
                )),
                unexpected(5, 19, "bytes 10-24/2000000", Mismatch::StartsElsewhere)
            );
            assert_eq!(
                rejected(check_head(
                    &expect(5, 19),
                    &head(status, Some("bytes 5-9/*"), Some(5))
                )),
                unexpected(5, 19, "bytes 5-9/*", Mismatch::StopsShort)
            );
            assert_eq!(
                rejected(check_head(
                    &expect(5, 19),
                    &head(status, Some("bytes 5-19"), None)
                )),
                Rejection::BadContentRange {
                    status,
                    value: "bytes 5-19".into()
                }
            );
            assert_eq!(
                rejected(check_head(
                    &expect(5, 19),
                    &head(status, Some("bytes */4"), None)
                )),
                unexpected(5, 19, "bytes */4", Mismatch::NoBytes)
            );
        }
    }

    #[test]
    fn partial_first_byte_must_match() {
        for text in ["bytes 99-198/1000", "bytes 101-199/1000"] {
            let e = rejected(check_head(&expect(100, 199), &head(206, Some(text), None)));
            assert_eq!(
                e,
                unexpected(100, 199, text, Mismatch::StartsElsewhere),
                "{text}"
            );
            assert_eq!(Error::from(e).status(), Status::Protocol);
        }
    }

    #[test]
    fn partial_never_extends_beyond_the_request() {
        let text = "bytes 100-200/1000";
        assert_eq!(
            rejected(check_head(&expect(100, 199), &head(206, Some(text), None))),
            unexpected(100, 199, text, Mismatch::ExtendsBeyond)
        );
    }

    #[test]
    fn partial_may_end_at_the_known_end_of_a_shorter_object() {
        let r = receipt(check_head(
            &expect(100, 199),
            &head(206, Some("bytes 100-149/150"), Some(50)),
        ));
        assert!(r.ends_early);
        assert_eq!(r.finish(50, 50, true), delivered(50, true));
    }

    #[test]
    fn partial_short_without_proof_of_the_end_is_refused() {
        for text in ["bytes 100-149/*", "bytes 100-149/1000"] {
            assert_eq!(
                rejected(check_head(&expect(100, 199), &head(206, Some(text), None))),
                unexpected(100, 199, text, Mismatch::StopsShort),
                "{text}"
            );
        }
    }

    #[test]
    fn partial_needs_a_parseable_content_range() {
        assert_eq!(
            rejected(check_head(&expect(0, 9), &head(206, None, Some(10)))),
            Rejection::NoContentRange { status: 206 }
        );
        assert_eq!(
            rejected(check_head(
                &expect(0, 9),
                &head(206, Some("bytes 0-9"), None)
            )),
            Rejection::BadContentRange {
                status: 206,
                value: "bytes 0-9".into()
            }
        );
        assert_eq!(
            rejected(check_head(
                &expect(0, 9),
                &head(206, Some("bytes */10"), None)
            )),
            unexpected(0, 9, "bytes */10", Mismatch::NoBytes)
        );
    }

    #[test]
    fn content_length_must_agree_with_content_range() {
        assert_eq!(
            rejected(check_head(
                &expect(0, 9),
                &head(206, Some("bytes 0-9/100"), Some(11)),
            )),
            Rejection::LengthDisagrees {
                content_length: 11,
                range: cr("bytes 0-9/100")
            }
        );
    }

    #[test]
    fn a_correct_header_with_a_truncated_body_fails() {
        let r = receipt(check_head(
            &expect(0, 99),
            &head(206, Some("bytes 0-99/1000"), Some(100)),
        ));
        let truncated = |interrupted| Rejection::Truncated {
            kept: 60,
            wanted: 100,
            seen: 60,
            promised: Some(100),
            interrupted,
        };
        assert_eq!(r.finish(60, 60, true), Err(truncated(false)));
        assert_eq!(r.finish(60, 60, false), Err(truncated(true)));
        assert!(truncated(false).retryable());
        assert_eq!(Error::from(truncated(false)).status(), Status::Protocol);
        assert_eq!(
            r.finish(100, 101, true),
            Err(Rejection::Overlong {
                seen: 101,
                promised: 100
            })
        );
        assert!(
            !Rejection::Overlong {
                seen: 1,
                promised: 0
            }
            .retryable()
        );
        // Abandoned once every wanted byte arrived: fine.
        assert_eq!(r.finish(100, 100, false), delivered(100, false));
    }

    #[test]
    fn nothing_is_proven_beyond_what_arrived() {
        let r = receipt(check_head(&expect(100, 199), &head(200, None, Some(1000))));
        // A driver claiming 100 kept bytes out of 150 seen (of which 100 were skipped) is
        // believed only for the 50 that can have arrived.
        assert_eq!(
            r.finish(100, 150, true),
            Err(Rejection::Truncated {
                kept: 50,
                wanted: 100,
                seen: 150,
                promised: Some(1000),
                interrupted: false,
            })
        );
    }

    #[test]
    fn whole_body_within_the_fallback_limit_is_used() {
        let r = receipt(check_head(&expect(100, 199), &head(200, None, Some(1000))));
        assert_eq!((r.skip, r.keep), (100, 100));
        // The driver may abandon the rest of the body once it has the bytes.
        assert_eq!(r.finish(100, 200, true), delivered(100, false));
    }

    #[test]
    fn whole_body_fallback_limit_boundary() {
        let limit = 8 * MIB;
        let at = check_head(&expect(limit, limit + 9), &head(200, None, Some(100 * MIB)));
        assert!(matches!(at, Verdict::Receive(_)));
        let past = check_head(
            &expect(limit + 1, limit + 10),
            &head(200, None, Some(100 * MIB)),
        );
        assert_eq!(
            rejected(past),
            Rejection::BeyondFallback {
                first: limit + 1,
                limit
            }
        );
    }

    #[test]
    fn whole_body_of_a_shorter_object() {
        let r = receipt(check_head(&expect(100, 199), &head(200, None, Some(150))));
        assert_eq!((r.skip, r.keep, r.ends_early), (100, 50, true));
        assert_eq!(r.finish(50, 150, true), delivered(50, true));
        // A whole body that ends before the first byte: nothing exists there. (It is longer
        // than the range, so it cannot be the range's bytes alone.)
        assert_eq!(
            check_head(&expect(300, 399), &head(200, None, Some(150))),
            Verdict::Unsatisfiable {
                size: Some(150),
                etag: None
            }
        );
    }

    #[test]
    fn a_whole_body_no_longer_than_a_range_past_byte_0_proves_nothing() {
        // `bytes=100-199` answered `200` with 100 bytes: an object of 100 bytes (nothing at
        // byte 100), or bytes 100-199 without their `206` and `Content-Range`. Believed, the
        // one was a false end of the object and, in a merged span, the other put bytes at the
        // wrong offsets with an OK status (found by the conformance suite's random cases).
        for body in [1, 50, 100] {
            assert_eq!(
                rejected(check_head(&expect(100, 199), &head(200, None, Some(body)))),
                Rejection::UnprovenWhole {
                    expected: RangeSpec::Closed {
                        first: 100,
                        last: 199
                    },
                    body
                },
                "{body}"
            );
        }
        // One byte more than the range is not the range alone.
        let r = receipt(check_head(&expect(100, 199), &head(200, None, Some(101))));
        assert_eq!((r.skip, r.keep, r.ends_early), (100, 1, true));
        // From byte 0 the body's bytes are the object's first bytes either way, and a shorter
        // body ends the object where it ends either way...
        let r = receipt(check_head(&expect(0, 99), &head(200, None, Some(60))));
        assert_eq!(
            (r.skip, r.keep, r.ends_early, r.total),
            (0, 60, true, Some(60))
        );
        // ... but one exactly as long as the range states no size (stating 100 would end the
        // first part of a read in parts there: a false end), while a longer one is the whole
        // object.
        let r = receipt(check_head(&expect(0, 99), &head(200, None, Some(100))));
        assert_eq!(
            (r.skip, r.keep, r.ends_early, r.total),
            (0, 100, false, None)
        );
        let r = receipt(check_head(&expect(0, 99), &head(200, None, Some(101))));
        assert_eq!(r.total, Some(101));
        // A suffix answered with exactly its length: the whole object, or its last bytes alone
        // (then at other offsets, of a larger object). Shorter, it is the whole object either
        // way; longer, it cannot be the suffix alone.
        assert_eq!(
            rejected(check_head(&suffix(10), &head(200, None, Some(10)))),
            Rejection::UnprovenWhole {
                expected: RangeSpec::Suffix { len: 10 },
                body: 10
            }
        );
        let r = receipt(check_head(&suffix(10), &head(200, None, Some(7))));
        assert_eq!((r.first, r.keep, r.total), (0, 7, Some(7)));
        let r = receipt(check_head(&suffix(10), &head(200, None, Some(11))));
        assert_eq!((r.first, r.keep, r.total), (1, 10, Some(11)));
        // Without a length, nothing is kept of a body that ended within the range's length...
        let r = receipt(check_head(&expect(10, 109), &head(200, None, None)));
        for complete in [true, false] {
            assert_eq!(
                r.finish(50, 60, complete),
                Err(Rejection::Truncated {
                    kept: 0,
                    wanted: 100,
                    seen: 60,
                    promised: None,
                    interrupted: !complete,
                })
            );
        }
        // ... and what arrived after the skip is kept once the body holds more than the range.
        assert_eq!(
            r.finish(91, 101, false),
            Err(Rejection::Truncated {
                kept: 91,
                wanted: 100,
                seen: 101,
                promised: None,
                interrupted: true,
            })
        );
        assert_eq!(r.finish(100, 110, true), delivered(100, false));
    }

    #[test]
    fn a_whole_body_without_a_length_that_stops_early_is_a_truncation() {
        // Chunked or delimited by closing the connection: a clean end proves nothing about the
        // object's size, so it is not an end of the object.
        let r = receipt(check_head(&expect(10, 19), &head(200, None, None)));
        assert_eq!(
            (r.skip, r.keep, r.ends_early, r.total),
            (10, 10, false, None)
        );
        for complete in [true, false] {
            assert_eq!(
                r.finish(4, 14, complete),
                Err(Rejection::Truncated {
                    kept: 4,
                    wanted: 10,
                    seen: 14,
                    promised: None,
                    interrupted: !complete,
                })
            );
        }
        assert_eq!(r.finish(10, 20, true), delivered(10, false));
    }

    #[test]
    fn unsatisfiable_states_a_size_at_or_before_the_first_byte() {
        assert_eq!(
            check_head(&expect(0, 0), &head(416, Some("bytes */0"), None)),
            Verdict::Unsatisfiable {
                size: Some(0),
                etag: None
            }
        );
        assert_eq!(
            check_head(&expect(500, 600), &head(416, Some("bytes */500"), None)),
            Verdict::Unsatisfiable {
                size: Some(500),
                etag: None
            }
        );
        assert_eq!(
            check_head(&expect(500, 600), &head(416, None, None)),
            Verdict::Unsatisfiable {
                size: None,
                etag: None
            }
        );
        // Nothing at byte 0 without a stated size: the object is empty all the same.
        assert_eq!(
            check_head(&expect(0, 0), &head(416, None, None)),
            Verdict::Unsatisfiable {
                size: Some(0),
                etag: None
            }
        );
        assert_eq!(
            check_head(&suffix(10), &head(416, None, None)),
            Verdict::Unsatisfiable {
                size: None,
                etag: None
            }
        );
        // One byte more and byte 500 exists: the answer contradicts itself.
        assert_eq!(
            rejected(check_head(
                &expect(500, 600),
                &head(416, Some("bytes */501"), None)
            )),
            Rejection::UnsatisfiableContradicted {
                expected: RangeSpec::Closed {
                    first: 500,
                    last: 600
                },
                size: 501
            }
        );
        // Only an empty object has no suffix.
        assert_eq!(
            check_head(&suffix(10), &head(416, Some("bytes */0"), None)),
            Verdict::Unsatisfiable {
                size: Some(0),
                etag: None
            }
        );
        assert!(matches!(
            rejected(check_head(&suffix(10), &head(416, Some("bytes */1"), None))),
            Rejection::UnsatisfiableContradicted { size: 1, .. }
        ));
        for value in ["bytes 0-9/100", "bytes */*", "garbage"] {
            assert_eq!(
                rejected(check_head(&expect(500, 600), &head(416, Some(value), None))),
                Rejection::BadUnsatisfied {
                    value: value.into()
                }
            );
        }
    }

    #[test]
    fn no_bytes_at_the_end_of_an_object_is_the_end_of_the_object() {
        // Azurite (and fake-gcs-server for an empty object): `206` with `bytes SIZE-(SIZE-1)/SIZE`
        // and no body, for a range at or past the end.
        let cases = [
            (expect(0, 0), 206, "bytes 0--1/0", 0),
            (suffix(10), 206, "bytes 0--1/0", 0),
            (expect(0, 9), 200, "bytes 0--1/0", 0),
            (expect(7, 100), 206, "bytes 7-6/7", 7),
            (expect(26, 100), 206, "bytes 7-6/7", 7),
        ];
        for (expect, status, cr, size) in cases {
            for length in [None, Some(0)] {
                assert_eq!(
                    check_head(&expect, &head(status, Some(cr), length)),
                    Verdict::Unsatisfiable {
                        size: Some(size),
                        etag: None
                    }
                );
            }
        }
        // A size past the first requested byte contradicts it; with a body, or of another
        // total, it is no such answer.
        assert!(matches!(
            rejected(check_head(
                &expect(5, 9),
                &head(206, Some("bytes 7-6/7"), None)
            )),
            Rejection::UnsatisfiableContradicted { size: 7, .. }
        ));
        assert!(matches!(
            rejected(check_head(
                &expect(0, 0),
                &head(206, Some("bytes 0--1/0"), Some(1))
            )),
            Rejection::BadContentRange { .. }
        ));
        assert!(matches!(
            rejected(check_head(
                &expect(0, 0),
                &head(206, Some("bytes 0--1/5"), None)
            )),
            Rejection::BadContentRange { .. }
        ));
    }

    #[test]
    fn a_size_found_in_a_416_body_is_checked_the_same_way() {
        let range = RangeSpec::Closed { first: 0, last: 0 };
        assert_eq!(check_unsatisfiable(range, Some(0)), Ok(Some(0)));
        // Nothing at byte 0 is an empty object, stated or not.
        assert_eq!(check_unsatisfiable(range, None), Ok(Some(0)));
        assert!(check_unsatisfiable(range, Some(1)).is_err());
        let past = RangeSpec::Closed {
            first: 10,
            last: 19,
        };
        assert_eq!(check_unsatisfiable(past, None), Ok(None));
    }

    #[test]
    fn suffix_ranges() {
        let r = receipt(check_head(
            &suffix(10),
            &head(206, Some("bytes 90-99/100"), Some(10)),
        ));
        assert_eq!((r.first, r.keep), (90, 10));
        // Shorter object: the whole of it.
        let r = receipt(check_head(
            &suffix(10),
            &head(206, Some("bytes 0-4/5"), Some(5)),
        ));
        assert_eq!((r.first, r.keep), (0, 5));
        for (bad, mismatch) in [
            ("bytes 89-98/100", Mismatch::NotTheSuffix),
            ("bytes 90-99/*", Mismatch::SizeUnknown),
            ("bytes 91-99/100", Mismatch::NotTheSuffix),
        ] {
            assert_eq!(
                rejected(check_head(&suffix(10), &head(206, Some(bad), None))),
                Rejection::UnexpectedRange {
                    expected: RangeSpec::Suffix { len: 10 },
                    actual: cr(bad),
                    mismatch
                },
                "{bad}"
            );
        }
        let r = receipt(check_head(&suffix(10), &head(200, None, Some(100))));
        assert_eq!((r.first, r.skip, r.keep), (90, 90, 10));
        assert_eq!(
            rejected(check_head(&suffix(10), &head(200, None, None))),
            Rejection::SuffixOfUnknownSize
        );
        let r = receipt(check_head(&suffix(10), &head(200, None, Some(0))));
        assert_eq!((r.first, r.keep), (0, 0));
    }

    #[test]
    fn transformed_responses_are_rejected() {
        let mut h = head(206, Some("bytes 0-9/100"), Some(10));
        h.content_encoding = Some("gzip");
        assert_eq!(
            rejected(check_head(&expect(0, 9), &h)),
            Rejection::Encoded {
                encoding: "gzip".into()
            }
        );
        h.content_encoding = Some("identity");
        assert!(matches!(check_head(&expect(0, 9), &h), Verdict::Receive(_)));
        h.content_encoding = Some("gzip");
        let stored = Expectation {
            accepts_stored_gzip: true,
            ..expect(0, 9)
        };
        assert!(matches!(check_head(&stored, &h), Verdict::Receive(_)));
        h.transformed = true;
        assert_eq!(rejected(check_head(&stored, &h)), Rejection::Transformed);
        // An error answer's body is not the object: its encoding does not matter.
        let mut h = head(503, None, None);
        h.content_encoding = Some("gzip");
        assert_eq!(check_head(&expect(0, 9), &h), Verdict::ErrorStatus(503));
    }

    #[test]
    fn etag_checked_even_if_the_server_ignores_if_match() {
        let pinned = Expectation {
            if_match: Some("\"v1\""),
            ..expect(0, 9)
        };
        let mut h = head(206, Some("bytes 0-9/100"), Some(10));
        h.etag = Some("\"v2\"");
        let e = rejected(check_head(&pinned, &h));
        assert_eq!(
            e,
            Rejection::Changed {
                required: "\"v1\"".into(),
                actual: "\"v2\"".into()
            }
        );
        assert_eq!(Error::from(e).status(), Status::PreconditionFailed);
        h.etag = Some("\"v1\"");
        let r = receipt(check_head(&pinned, &h));
        assert_eq!(r.etag.as_deref(), Some("\"v1\""));
        // Without a response tag, enforcement is the server's.
        h.etag = None;
        assert!(matches!(check_head(&pinned, &h), Verdict::Receive(_)));
        // A weak response tag never satisfies a strong condition.
        h.etag = Some("W/\"v1\"");
        assert!(matches!(check_head(&pinned, &h), Verdict::Reject(_)));
        // An error status is classified, not compared.
        let mut h = head(412, None, None);
        h.etag = Some("\"v2\"");
        assert_eq!(check_head(&pinned, &h), Verdict::ErrorStatus(412));
    }

    #[test]
    fn rejections_read_as_messages() {
        let e = Error::from(unexpected(
            5,
            19,
            "bytes 10-24/2000000",
            Mismatch::StartsElsewhere,
        ));
        assert_eq!(
            e.message(),
            "Content-Range bytes 10-24/2000000 starts at another byte (requested bytes 5-19)"
        );
        let e = Error::from(Rejection::Truncated {
            kept: 4,
            wanted: 10,
            seen: 14,
            promised: None,
            interrupted: false,
        });
        assert_eq!(
            e.message(),
            "truncated response body: 4 of the 10 wanted bytes arrived before the body ended \
             after 14 bytes"
        );
    }
}
