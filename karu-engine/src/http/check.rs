//! Checked responses: what a response head proves, and what its body must then contain.
//!
//! Pure: this module sees status codes, header values and byte counts, never a socket. The
//! call order for one response is:
//!
//! 1. [`check_head`] with the [`Expectation`] and the [`ResponseHead`] → a [`Verdict`].
//! 2. For [`Verdict::Receive`], the driver discards `skip` body bytes, keeps up to `keep`,
//!    counts everything, then calls [`Receipt::finish`] with what arrived.
//! 3. [`Receipt::finish`] says how many bytes from the first requested byte are proven (all
//!    of them, or a prefix that ends exactly at the object's real end), or why the response
//!    fails.
//!
//! Never a wrong byte with an OK status: every rule below refuses rather than guesses.

use crate::status::{Error, Status};

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
        match self {
            RangeSpec::Closed { first, last } => format!("bytes={first}-{last}"),
            RangeSpec::Suffix { len } => format!("bytes=-{len}"),
        }
    }

    /// Bytes asked for (for a suffix: at most this many).
    pub fn length(&self) -> u64 {
        match *self {
            RangeSpec::Closed { first, last } => last - first + 1,
            RangeSpec::Suffix { len } => len,
        }
    }
}

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
    /// 416 (or a 200 for an object that ends before the first byte): nothing exists at the
    /// first requested byte. `size` is the object size when the answer states it.
    Unsatisfiable {
        /// Object size, when known.
        size: Option<u64>,
        /// The response's strong ETag, if any.
        etag: Option<String>,
    },
    /// A status the engine classifies as an error (see [`classify_status`]).
    ErrorStatus(u16),
    /// The response cannot be used.
    Reject(Error),
}

/// How to receive a body the head accepted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Receipt {
    /// Absolute offset (in the object) of the first kept byte.
    pub first: u64,
    /// Body bytes to discard before keeping (a 200 that ignored the range).
    pub skip: u64,
    /// Body bytes to keep after the skip: the requested bytes that exist.
    pub keep: u64,
    /// Exact body length the head promises, when it promises one.
    pub body_len: Option<u64>,
    /// Object size, when known.
    pub total: Option<u64>,
    /// Whether the kept bytes end at the object's real end before the requested last byte.
    pub ends_early: bool,
    /// The response's strong ETag, if any (weak tags are dropped).
    pub etag: Option<String>,
    /// Whether the server honoured the range (206).
    pub partial: bool,
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
    /// bytes arrived in all; `complete` is false when the body ended by an error.
    pub fn finish(&self, kept: u64, seen: u64, complete: bool) -> Result<Delivered, Error> {
        let truncated = |detail: String| {
            Err(Error::new(
                Status::Protocol,
                format!("truncated response body: {detail}"),
            ))
        };
        if !complete && kept < self.keep {
            return truncated(format!(
                "the connection ended after {seen} body bytes, before the {} bytes wanted",
                self.skip + self.keep
            ));
        }
        if let Some(body_len) = self.body_len {
            // Everything up to what we needed must have arrived; anything after it may be
            // abandoned by the driver (then `seen < body_len` with `kept == keep`).
            if kept < self.keep {
                return truncated(format!("{seen} of {body_len} promised bytes arrived"));
            }
            if seen > body_len {
                return Err(Error::new(
                    Status::Protocol,
                    format!("the body held {seen} bytes, more than the {body_len} promised"),
                ));
            }
            return Ok(Delivered {
                available: self.keep,
                ends_early: self.ends_early,
            });
        }
        // No promised length (chunked 200): a clean end is the object's end.
        if kept < self.keep {
            if !complete || self.partial {
                return truncated(format!("{kept} of {} bytes arrived", self.keep));
            }
            return Ok(Delivered {
                available: kept,
                ends_early: true,
            });
        }
        Ok(Delivered {
            available: self.keep,
            ends_early: self.ends_early,
        })
    }
}

/// Decide what a response head proves about the requested range.
pub fn check_head(expect: &Expectation<'_>, head: &ResponseHead<'_>) -> Verdict {
    if let Some(e) = transformation(expect, head) {
        return Verdict::Reject(e);
    }
    let etag = strong_etag(head.etag);
    if let (Some(condition), Some(actual)) = (expect.if_match, head.etag)
        && matches!(head.status, 200 | 206 | 416)
        && !if_match_satisfied(condition, actual)
    {
        return Verdict::Reject(Error::new(
            Status::PreconditionFailed,
            format!(
                "the object changed: its ETag {} does not match the required {}",
                actual, condition
            ),
        ));
    }
    match head.status {
        206 => partial(expect, head, etag),
        200 => whole(expect, head, etag),
        416 => Verdict::Unsatisfiable {
            size: head.content_range.and_then(unsatisfied_size),
            etag,
        },
        s => Verdict::ErrorStatus(s),
    }
}

fn transformation(expect: &Expectation<'_>, head: &ResponseHead<'_>) -> Option<Error> {
    if head.transformed {
        return Some(Error::new(
            Status::Protocol,
            "the server transformed the object (for example decompressed it), so byte offsets \
             may have changed",
        ));
    }
    let encoding = head.content_encoding?.trim();
    if encoding.is_empty() || encoding.eq_ignore_ascii_case("identity") {
        return None;
    }
    if expect.accepts_stored_gzip && encoding.eq_ignore_ascii_case("gzip") {
        return None;
    }
    Some(Error::new(
        Status::Protocol,
        format!(
            "the response is encoded ({encoding}) though Karu did not ask for it; its bytes are \
             not the object's bytes"
        ),
    ))
}

fn partial(expect: &Expectation<'_>, head: &ResponseHead<'_>, etag: Option<String>) -> Verdict {
    let Some(raw) = head.content_range else {
        return reject("a 206 response without Content-Range");
    };
    let Some(cr) = parse_content_range(raw) else {
        return reject(&format!(
            "a 206 response with an unparseable Content-Range {raw:?}"
        ));
    };
    let ContentRange::Bytes { first, last, total } = cr else {
        return reject(&format!(
            "a 206 response with an unsatisfied Content-Range {raw:?}"
        ));
    };
    let body_len = last - first + 1;
    if let Some(cl) = head.content_length
        && cl != body_len
    {
        return reject(&format!(
            "Content-Length {cl} disagrees with Content-Range {raw:?}"
        ));
    }
    let (want_first, ends_early) = match expect.range {
        RangeSpec::Closed {
            first: want_first,
            last: want_last,
        } => {
            if first != want_first {
                return reject(&format!(
                    "Content-Range {raw:?} starts at byte {first}, not at the requested {want_first}"
                ));
            }
            if last > want_last {
                return reject(&format!(
                    "Content-Range {raw:?} extends beyond the requested last byte {want_last}"
                ));
            }
            let ends_early = last < want_last;
            if ends_early && total != Some(last + 1) {
                return reject(&format!(
                    "Content-Range {raw:?} stops before the requested last byte {want_last} \
                     without ending at the object's end"
                ));
            }
            (want_first, ends_early)
        }
        RangeSpec::Suffix { len } => {
            let Some(total) = total else {
                return reject(&format!(
                    "a suffix range answered with Content-Range {raw:?} of unknown size"
                ));
            };
            let want = len.min(total);
            if last + 1 != total || body_len != want {
                return reject(&format!(
                    "Content-Range {raw:?} is not the last {want} bytes of a {total}-byte object"
                ));
            }
            (first, false)
        }
    };
    if total.is_some_and(|t| last >= t) {
        return reject(&format!("Content-Range {raw:?} ends beyond its own total"));
    }
    Verdict::Receive(Receipt {
        first: want_first,
        skip: 0,
        keep: body_len,
        body_len: Some(body_len),
        total,
        ends_early,
        etag,
        partial: true,
    })
}

fn whole(expect: &Expectation<'_>, head: &ResponseHead<'_>, etag: Option<String>) -> Verdict {
    let total = head.content_length;
    let (first, want) = match (expect.range, total) {
        (RangeSpec::Closed { first, last }, _) => (first, last - first + 1),
        (RangeSpec::Suffix { len }, Some(total)) => {
            let want = len.min(total);
            (total - want, want)
        }
        (RangeSpec::Suffix { .. }, None) => {
            return reject("a suffix range answered with a whole body of unknown length");
        }
    };
    if let Some(total) = total
        && first >= total
        && !(total == 0 && matches!(expect.range, RangeSpec::Suffix { .. }))
    {
        return Verdict::Unsatisfiable {
            size: Some(total),
            etag,
        };
    }
    if first > expect.fallback_limit {
        return Verdict::Reject(Error::new(
            Status::Protocol,
            format!(
                "the server ignored the range and sent the whole object; reaching byte {first} \
                 would discard more than the fallback limit of {} bytes",
                expect.fallback_limit
            ),
        ));
    }
    let (keep, ends_early) = match total {
        Some(total) => {
            let exists = total - first;
            (want.min(exists), exists < want)
        }
        None => (want, false),
    };
    Verdict::Receive(Receipt {
        first,
        skip: first,
        keep,
        body_len: total,
        total,
        ends_early,
        etag,
        partial: false,
    })
}

fn reject(detail: &str) -> Verdict {
    Verdict::Reject(Error::new(Status::Protocol, detail.to_string()))
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

/// Parse `Content-Range` (RFC 9110 §14.4), strictly: unit `bytes`, decimal digits only,
/// `first <= last`, and `last < total` when the total is known.
pub fn parse_content_range(value: &str) -> Option<ContentRange> {
    let rest = value.trim().strip_prefix("bytes")?;
    let rest = rest.strip_prefix(' ')?.trim_start();
    let (range, total) = rest.split_once('/')?;
    let total = match total.trim() {
        "*" => None,
        t => Some(digits(t)?),
    };
    if range.trim() == "*" {
        return Some(ContentRange::Unsatisfied { total: total? });
    }
    let (first, last) = range.trim().split_once('-')?;
    let (first, last) = (digits(first)?, digits(last)?);
    if first > last || total.is_some_and(|t| last >= t) {
        return None;
    }
    Some(ContentRange::Bytes { first, last, total })
}

fn digits(s: &str) -> Option<u64> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

fn unsatisfied_size(value: &str) -> Option<u64> {
    match parse_content_range(value)? {
        ContentRange::Unsatisfied { total } => Some(total),
        ContentRange::Bytes { .. } => None,
    }
}

/// The tag if it is strong (`"x"`), `None` for weak (`W/"x"`) or malformed tags.
pub fn strong_etag(etag: Option<&str>) -> Option<String> {
    let tag = etag?.trim();
    (tag.len() >= 2 && tag.starts_with('"') && tag.ends_with('"')).then(|| tag.to_string())
}

/// Whether a strong ETag can pin a resume: one strong tag, not a wildcard or a list.
pub fn is_single_strong(condition: &str) -> bool {
    let c = condition.trim();
    c.len() >= 2 && c.starts_with('"') && c.ends_with('"') && !c[1..c.len() - 1].contains('"')
}

/// RFC 9110 `If-Match` evaluation with strong comparison: `*` matches anything; a list
/// matches if any member is strongly equal to the response's tag. Weak tags never match.
pub fn if_match_satisfied(condition: &str, actual: &str) -> bool {
    let condition = condition.trim();
    if condition == "*" {
        return true;
    }
    let Some(actual) = strong_etag(Some(actual)) else {
        return false;
    };
    condition
        .split(',')
        .map(str::trim)
        .any(|candidate| !candidate.starts_with("W/") && candidate == actual)
}

/// How the engine treats an error status.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StatusClass {
    /// The status the read fails with if nothing changes.
    pub status: Status,
    /// Whether another attempt may succeed.
    pub retryable: bool,
}

/// Classify an HTTP status that is not a successful range answer.
pub fn classify_status(code: u16) -> StatusClass {
    let (status, retryable) = match code {
        // The object (or its container) does not exist: permanent.
        404 | 410 => (Status::NotFound, false),
        // Denied: permanent for this credential (credential corrections are separate).
        401 | 403 => (Status::PermissionDenied, false),
        // The caller's version condition failed: permanent.
        412 => (Status::PreconditionFailed, false),
        416 => (Status::RangeNotSatisfiable, false),
        // Request Timeout, Too Early, Too Many Requests: the server asks us to come back.
        408 | 425 | 429 => (Status::Http, true),
        // Server errors are temporary by nature (RFC 9110 §15.6).
        500..=599 => (Status::Http, true),
        _ => (Status::Http, false),
    };
    StatusClass { status, retryable }
}

/// A human-readable summary of an error body (at most `limit` characters): the code and
/// message of an XML or JSON error when there is one, else the collapsed text; query strings
/// and signature material are redacted.
pub fn summarize_body(body: &[u8], limit: usize) -> String {
    let text = String::from_utf8_lossy(body);
    let summary = xml_error(&text)
        .or_else(|| json_error(&text))
        .unwrap_or_else(|| collapse(&strip_sensitive_elements(&text)));
    let redacted = redact(&summary);
    truncate_chars(&redacted, limit)
}

fn xml_error(text: &str) -> Option<String> {
    let code = xml_element(text, "Code");
    let message = xml_element(text, "Message");
    match (code, message) {
        (Some(c), Some(m)) => Some(collapse(&format!("{c}: {m}"))),
        (Some(c), None) => Some(collapse(c)),
        (None, Some(m)) => Some(collapse(m)),
        (None, None) => None,
    }
}

/// The text of the first `<name>…</name>` element of an XML error body (no parser: error
/// bodies are small and flat).
pub fn xml_element<'a>(text: &'a str, name: &str) -> Option<&'a str> {
    let open = format!("<{name}>");
    let close = format!("</{name}>");
    let start = text.find(&open)? + open.len();
    let end = start + text[start..].find(&close)?;
    Some(&text[start..end])
}

fn json_error(text: &str) -> Option<String> {
    let value: serde_json::Value = serde_json::from_str(text.trim()).ok()?;
    // Common shapes: {"message": ..}, {"error": ".."}, {"error": {"message": ..}}.
    let message = value
        .get("message")
        .or_else(|| value.get("error").and_then(|e| e.get("message")))
        .or_else(|| value.get("error"))
        .or_else(|| value.get("error_description"))?;
    let text = match message {
        serde_json::Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    Some(collapse(&text))
}

/// Elements of provider error bodies that echo what was signed or the signature itself.
const SENSITIVE_ELEMENTS: [&str; 7] = [
    "SignatureProvided",
    "StringToSign",
    "StringToSignBytes",
    "CanonicalRequest",
    "CanonicalRequestBytes",
    "AWSAccessKeyId",
    "Signature",
];

fn strip_sensitive_elements(text: &str) -> String {
    let mut out = text.to_string();
    for name in SENSITIVE_ELEMENTS {
        let open = format!("<{name}>");
        let close = format!("</{name}>");
        while let Some(start) = out.find(&open) {
            let end = match out[start..].find(&close) {
                Some(e) => start + e + close.len(),
                None => out.len(),
            };
            out.replace_range(start..end, "");
        }
    }
    out
}

/// Collapse runs of whitespace (and control characters) into single spaces.
pub fn collapse(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut space = false;
    for c in text.chars() {
        if c.is_whitespace() || c.is_control() {
            space = true;
        } else {
            if space && !out.is_empty() {
                out.push(' ');
            }
            space = false;
            out.push(c);
        }
    }
    out
}

/// Replace every query string in `text` (from `?` to the next whitespace or quote) with
/// `?<redacted>`.
pub fn redact(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '?' && chars.peek().is_some_and(|n| !n.is_whitespace()) {
            out.push_str("?<redacted>");
            while chars
                .peek()
                .is_some_and(|n| !n.is_whitespace() && !matches!(n, '"' | '\'' | '<' | '>'))
            {
                chars.next();
            }
        } else {
            out.push(c);
        }
    }
    out
}

fn truncate_chars(text: &str, limit: usize) -> String {
    if text.chars().count() <= limit {
        return text.to_string();
    }
    let mut cut: String = text.chars().take(limit.saturating_sub(1)).collect();
    cut.push('…');
    cut
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1 << 20;

    fn expect(first: u64, last: u64) -> Expectation<'static> {
        Expectation {
            range: RangeSpec::Closed { first, last },
            if_match: None,
            fallback_limit: 8 * MIB,
            accepts_stored_gzip: false,
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

    fn rejected(v: Verdict) -> Error {
        match v {
            Verdict::Reject(e) => e,
            other => panic!("expected a rejection, got {other:?}"),
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
        ] {
            assert_eq!(parse_content_range(bad), None, "{bad:?}");
        }
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
        assert_eq!(
            r.finish(100, 100, true),
            Ok(Delivered {
                available: 100,
                ends_early: false
            })
        );
    }

    #[test]
    fn partial_first_byte_must_match() {
        for cr in ["bytes 99-198/1000", "bytes 101-199/1000"] {
            let e = rejected(check_head(&expect(100, 199), &head(206, Some(cr), None)));
            assert_eq!(e.status(), Status::Protocol);
            assert!(e.message().contains("not at the requested 100"), "{e}");
        }
    }

    #[test]
    fn partial_never_extends_beyond_the_request() {
        let e = rejected(check_head(
            &expect(100, 199),
            &head(206, Some("bytes 100-200/1000"), None),
        ));
        assert!(e.message().contains("extends beyond"), "{e}");
    }

    #[test]
    fn partial_may_end_at_the_known_end_of_a_shorter_object() {
        let r = receipt(check_head(
            &expect(100, 199),
            &head(206, Some("bytes 100-149/150"), Some(50)),
        ));
        assert!(r.ends_early);
        assert_eq!(
            r.finish(50, 50, true),
            Ok(Delivered {
                available: 50,
                ends_early: true
            })
        );
    }

    #[test]
    fn partial_short_without_proof_of_the_end_is_refused() {
        for cr in ["bytes 100-149/*", "bytes 100-149/1000"] {
            let e = rejected(check_head(&expect(100, 199), &head(206, Some(cr), None)));
            assert!(e.message().contains("without ending"), "{cr}: {e}");
        }
    }

    #[test]
    fn partial_needs_a_parseable_content_range() {
        let e = rejected(check_head(&expect(0, 9), &head(206, None, Some(10))));
        assert!(e.message().contains("without Content-Range"), "{e}");
        let e = rejected(check_head(
            &expect(0, 9),
            &head(206, Some("bytes 0-9"), None),
        ));
        assert!(e.message().contains("unparseable"), "{e}");
        let e = rejected(check_head(
            &expect(0, 9),
            &head(206, Some("bytes */10"), None),
        ));
        assert!(e.message().contains("unsatisfied"), "{e}");
    }

    #[test]
    fn content_length_must_agree_with_content_range() {
        let e = rejected(check_head(
            &expect(0, 9),
            &head(206, Some("bytes 0-9/100"), Some(11)),
        ));
        assert!(e.message().contains("disagrees"), "{e}");
    }

    #[test]
    fn a_correct_header_with_a_truncated_body_fails() {
        let r = receipt(check_head(
            &expect(0, 99),
            &head(206, Some("bytes 0-99/1000"), Some(100)),
        ));
        let e = r.finish(60, 60, true).unwrap_err();
        assert_eq!(e.status(), Status::Protocol);
        assert!(e.message().contains("truncated"), "{e}");
        let e = r.finish(60, 60, false).unwrap_err();
        assert!(e.message().contains("truncated"), "{e}");
        let e = r.finish(100, 101, true).unwrap_err();
        assert!(e.message().contains("more than"), "{e}");
    }

    #[test]
    fn whole_body_within_the_fallback_limit_is_used() {
        let r = receipt(check_head(&expect(100, 199), &head(200, None, Some(1000))));
        assert_eq!((r.skip, r.keep, r.partial), (100, 100, false));
        // The driver may abandon the rest of the body once it has the bytes.
        assert_eq!(
            r.finish(100, 200, true),
            Ok(Delivered {
                available: 100,
                ends_early: false
            })
        );
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
        let e = rejected(past);
        assert_eq!(e.status(), Status::Protocol);
        assert!(e.message().contains("fallback limit"), "{e}");
    }

    #[test]
    fn whole_body_of_a_shorter_object() {
        let r = receipt(check_head(&expect(100, 199), &head(200, None, Some(150))));
        assert_eq!((r.skip, r.keep, r.ends_early), (100, 50, true));
        assert_eq!(
            r.finish(50, 150, true),
            Ok(Delivered {
                available: 50,
                ends_early: true
            })
        );
        // A whole body that ends before the first byte: nothing exists there.
        assert_eq!(
            check_head(&expect(100, 199), &head(200, None, Some(100))),
            Verdict::Unsatisfiable {
                size: Some(100),
                etag: None
            }
        );
    }

    #[test]
    fn whole_body_without_length_ends_at_the_object_end() {
        let r = receipt(check_head(&expect(10, 19), &head(200, None, None)));
        assert_eq!(
            r.finish(4, 14, true),
            Ok(Delivered {
                available: 4,
                ends_early: true
            })
        );
        assert!(r.finish(4, 14, false).is_err(), "an error is not an end");
    }

    #[test]
    fn unsatisfiable_reports_the_size() {
        assert_eq!(
            check_head(&expect(0, 0), &head(416, Some("bytes */0"), None)),
            Verdict::Unsatisfiable {
                size: Some(0),
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
    }

    #[test]
    fn suffix_ranges() {
        let suffix = Expectation {
            range: RangeSpec::Suffix { len: 10 },
            ..expect(0, 0)
        };
        let r = receipt(check_head(
            &suffix,
            &head(206, Some("bytes 90-99/100"), Some(10)),
        ));
        assert_eq!((r.first, r.keep), (90, 10));
        // Shorter object: the whole of it.
        let r = receipt(check_head(
            &suffix,
            &head(206, Some("bytes 0-4/5"), Some(5)),
        ));
        assert_eq!((r.first, r.keep), (0, 5));
        for bad in ["bytes 89-98/100", "bytes 90-99/*", "bytes 91-99/100"] {
            assert!(
                matches!(
                    check_head(&suffix, &head(206, Some(bad), None)),
                    Verdict::Reject(_)
                ),
                "{bad}"
            );
        }
        let r = receipt(check_head(&suffix, &head(200, None, Some(100))));
        assert_eq!((r.first, r.skip, r.keep), (90, 90, 10));
        assert!(matches!(
            check_head(&suffix, &head(200, None, None)),
            Verdict::Reject(_)
        ));
        let r = receipt(check_head(&suffix, &head(200, None, Some(0))));
        assert_eq!((r.first, r.keep), (0, 0));
    }

    #[test]
    fn transformed_responses_are_rejected() {
        let mut h = head(206, Some("bytes 0-9/100"), Some(10));
        h.content_encoding = Some("gzip");
        let e = rejected(check_head(&expect(0, 9), &h));
        assert!(e.message().contains("encoded (gzip)"), "{e}");
        h.content_encoding = Some("identity");
        assert!(matches!(check_head(&expect(0, 9), &h), Verdict::Receive(_)));
        h.content_encoding = Some("gzip");
        let stored = Expectation {
            accepts_stored_gzip: true,
            ..expect(0, 9)
        };
        assert!(matches!(check_head(&stored, &h), Verdict::Receive(_)));
        h.transformed = true;
        assert!(matches!(check_head(&stored, &h), Verdict::Reject(_)));
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
        assert_eq!(e.status(), Status::PreconditionFailed);
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
    fn if_match_semantics() {
        assert!(if_match_satisfied("*", "\"a\""));
        assert!(if_match_satisfied("\"a\", \"b\"", "\"b\""));
        assert!(!if_match_satisfied("\"a\"", "\"b\""));
        assert!(!if_match_satisfied("W/\"a\"", "\"a\""));
        assert!(!if_match_satisfied("\"a\"", "W/\"a\""));
        assert!(is_single_strong("\"abc\""));
        assert!(!is_single_strong("W/\"abc\""));
        assert!(!is_single_strong("*"));
        assert!(!is_single_strong("\"a\", \"b\""));
        assert_eq!(strong_etag(Some("W/\"x\"")), None);
        assert_eq!(strong_etag(Some(" \"x\" ")).as_deref(), Some("\"x\""));
    }

    #[test]
    fn status_classes() {
        let c = |code| classify_status(code);
        assert_eq!(c(404).status, Status::NotFound);
        assert_eq!(c(403).status, Status::PermissionDenied);
        assert_eq!(c(401).status, Status::PermissionDenied);
        assert_eq!(c(412).status, Status::PreconditionFailed);
        for code in [408, 425, 429, 500, 502, 503, 504, 599] {
            assert!(c(code).retryable, "{code}");
        }
        for code in [400, 401, 403, 404, 405, 409, 410, 412, 416, 418, 451, 301] {
            assert!(!c(code).retryable, "{code}");
        }
    }

    #[test]
    fn error_bodies_are_summarised_and_redacted() {
        let xml = b"<?xml version=\"1.0\"?>\n<Error>\n  <Code>SignatureDoesNotMatch</Code>\n  <Message>The request signature we calculated does not match</Message>\n  <SignatureProvided>deadbeef</SignatureProvided><StringToSign>AWS4-HMAC-SHA256 secret</StringToSign>\n</Error>";
        let s = summarize_body(xml, 200);
        assert_eq!(
            s,
            "SignatureDoesNotMatch: The request signature we calculated does not match"
        );
        let json =
            br#"{"error": {"code": 403, "message": "Access   denied\n to https://x/y?sig=abc"}}"#;
        assert_eq!(
            summarize_body(json, 200),
            "Access denied to https://x/y?<redacted>"
        );
        let text = b"  Service\n\n Unavailable: see https://h/p?X-Amz-Signature=s3cr3t&a=b now ";
        assert_eq!(
            summarize_body(text, 200),
            "Service Unavailable: see https://h/p?<redacted> now"
        );
        let long = vec![b'x'; 10_000];
        assert_eq!(summarize_body(&long, 50).chars().count(), 50);
        let signed = b"<Error><SignatureProvided>abc</SignatureProvided>oops</Error>";
        assert!(!summarize_body(signed, 200).contains("abc"));
    }
}
