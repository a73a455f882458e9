//! The fault plan: rules that make the mock server misbehave on chosen requests.

use std::time::Duration;

use http::HeaderMap;

/// One way for the server to misbehave on a request (see [`FaultRule`]).
///
/// Several faults may apply to one request (for example [`Fault::Latency`] and
/// [`Fault::Status`]); the request log names each one that did in
/// [`RequestRecord::fault`](crate::RequestRecord::fault).
///
/// Faults that shape a range response ([`Fault::IgnoreRange`], [`Fault::WrongContentRange`],
/// [`Fault::MissingContentRange`], [`Fault::OkWithContentRange`]) act only on requests that
/// would otherwise get a 206 (the two `Content-Range` faults also on a 416); body faults
/// ([`Fault::CutBodyAfter`], [`Fault::ResetAfter`], [`Fault::Trickle`], [`Fault::Gzip`],
/// [`Fault::CloseDelimited`]) act on any GET answered with the object's bytes (200 or 206).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Fault {
    /// Extra delay before the response headers, added to the server's latency.
    Latency(Duration),
    /// Answer with this status and a small text body instead of the object, with a
    /// `Retry-After` header holding the given value (seconds or an HTTP date) if any.
    Status {
        /// The status code sent (for example 500, 503 or 429).
        code: u16,
        /// The exact `Retry-After` value, if one is sent.
        retry_after: Option<String>,
    },
    /// Ignore the `Range` header: 200 with the whole body and no `Content-Range`.
    IgnoreRange,
    /// Answer 206 with the bytes that were asked for, but with a `Content-Range` whose start
    /// and end are moved by `shift` (clamped at 0). On a 416 the size it states
    /// (`bytes */SIZE`, and `<ActualObjectSize>` in the body) is moved instead.
    WrongContentRange {
        /// How far the advertised range is moved from the real one.
        shift: i64,
    },
    /// Answer 206 (or 416) with no `Content-Range` header; the body is unchanged (a 416 body
    /// still states `<ActualObjectSize>`, as S3's does).
    MissingContentRange,
    /// Answer a satisfiable range with `200 OK` instead of 206, keeping the `Content-Range` and
    /// sending only the range's bytes, as some S3-compatible servers and proxies do.
    OkWithContentRange,
    /// Send correct headers (the full `Content-Length`), then only this many body bytes, then
    /// close the connection (FIN).
    CutBodyAfter(u64),
    /// Send the body without `Content-Length`, delimited by closing the connection (an
    /// HTTP/1.0 response, so no chunked framing either): a client cannot tell a body cut by
    /// [`Fault::CutBodyAfter`] from a complete one. Over HTTP/2 the body is merely sent
    /// without `Content-Length`.
    CloseDelimited,
    /// Send this many body bytes, then reset the connection (`SO_LINGER` 0, then close: RST).
    ResetAfter(u64),
    /// Send the body `chunk` bytes at a time, waiting `interval` before each chunk after the
    /// first.
    Trickle {
        /// Bytes per write.
        chunk: usize,
        /// Pause between writes.
        interval: Duration,
    },
    /// Send the body gzip-compressed with `Content-Encoding: gzip`; `Content-Range` still
    /// describes the identity bytes, `Content-Length` the compressed ones.
    Gzip,
    /// Give the object a new ETag (a new generated strong one) before answering this request.
    ChangeEtag,
    /// Hold the request until this many requests with a `Barrier` fault have arrived (a
    /// round), then let them read the object and build their answers one at a time, in
    /// arrival order (the order their faults were chosen in): requests that overlap for
    /// certain, with a fixed order of the object's states (a [`Fault::ChangeEtag`] on the
    /// second one is seen by it and not by the first, even if a [`Fault::Latency`] holds the
    /// first longer). A request answered before its turn (a status fault) gives its turn up.
    Barrier(u64),
    /// Serve the object even when `If-Match` does not match its ETag.
    IgnoreIfMatch,
    /// Answer with an error status and a body of `size` bytes.
    OversizedErrorBody {
        /// The status code sent.
        code: u16,
        /// The body length in bytes.
        size: usize,
    },
    /// Read the request and never answer it, until the client gives up or the server is
    /// dropped.
    NeverAnswer,
    /// Throttle: serve at most `limit` requests with this fault at once and answer the others,
    /// after the latency, with `code`: `503` gets S3's `SlowDown` error document, any other
    /// code (such as `429`, as GCS and Hugging Face answer) a short text. A request counts
    /// from its arrival until the last byte of its answer; throttled answers do not count.
    ThrottleAbove {
        /// Requests served at once.
        limit: u64,
        /// The status of a throttled answer (503 or 429).
        code: u16,
    },
}

/// When a [`Fault`] applies: to which requests, and how many times.
///
/// Rules are checked in the order they were added, for every request; each keeps its own
/// counters, so a request can consume several rules at once.
///
/// ```
/// use karu_testkit::{Fault, FaultRule};
/// // The second and third GETs of /a.bin get a 503.
/// let rule = FaultRule::new(Fault::Status { code: 503, retry_after: None })
///     .path("/a.bin")
///     .method("GET")
///     .skip(1)
///     .times(2);
/// # let _ = rule;
/// ```
#[derive(Debug, Clone)]
pub struct FaultRule {
    fault: Fault,
    path: Option<String>,
    method: Option<String>,
    header: Option<String>,
    skip: u64,
    times: Option<u64>,
}

impl FaultRule {
    /// A rule applying `fault` to every request, forever.
    pub fn new(fault: Fault) -> Self {
        Self {
            fault,
            path: None,
            method: None,
            header: None,
            skip: 0,
            times: None,
        }
    }

    /// Match only requests for this exact path (without the query); default: any path.
    pub fn path(mut self, path: impl Into<String>) -> Self {
        self.path = Some(path.into());
        self
    }

    /// Match only requests with this method (case-insensitive); default: any method.
    pub fn method(mut self, method: impl Into<String>) -> Self {
        self.method = Some(method.into());
        self
    }

    /// Match only requests that carry this header, with any value (`if-match`: a resume or
    /// a conditional read); default: with or without it.
    pub fn header(mut self, name: impl Into<String>) -> Self {
        self.header = Some(name.into());
        self
    }

    /// Apply to the first `n` matching requests (after those skipped); default: forever.
    pub fn times(mut self, n: u64) -> Self {
        self.times = Some(n);
        self
    }

    /// Let the first `k` matching requests through untouched before applying.
    pub fn skip(mut self, k: u64) -> Self {
        self.skip = k;
        self
    }

    /// The fault this rule applies.
    pub fn fault(&self) -> &Fault {
        &self.fault
    }

    fn matches(&self, method: &str, path: &str, headers: &HeaderMap) -> bool {
        self.path.as_deref().is_none_or(|p| p == path)
            && self
                .method
                .as_deref()
                .is_none_or(|m| m.eq_ignore_ascii_case(method))
            && self
                .header
                .as_deref()
                .is_none_or(|name| headers.contains_key(name))
    }
}

/// A rule with its counters.
#[derive(Debug)]
struct RuleState {
    rule: FaultRule,
    /// Matching requests seen so far.
    seen: u64,
    /// Requests the fault was applied to.
    applied: u64,
}

/// The server's ordered list of rules.
#[derive(Debug, Default)]
pub(crate) struct FaultPlan {
    rules: Vec<RuleState>,
}

impl FaultPlan {
    pub(crate) fn add(&mut self, rule: FaultRule) {
        self.rules.push(RuleState {
            rule,
            seen: 0,
            applied: 0,
        });
    }

    pub(crate) fn clear(&mut self) {
        self.rules.clear();
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    /// The faults applying to a request, in rule order; advances the counters.
    pub(crate) fn select(&mut self, method: &str, path: &str, headers: &HeaderMap) -> Vec<Fault> {
        let mut out = Vec::new();
        for state in &mut self.rules {
            if !state.rule.matches(method, path, headers) {
                continue;
            }
            state.seen += 1;
            if state.seen <= state.rule.skip {
                continue;
            }
            if state.rule.times.is_some_and(|t| state.applied >= t) {
                continue;
            }
            state.applied += 1;
            out.push(state.rule.fault.clone());
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn skip_and_times_count_matching_requests_only() {
        let mut plan = FaultPlan::default();
        plan.add(
            FaultRule::new(Fault::IgnoreRange)
                .path("/a")
                .method("get")
                .skip(1)
                .times(2),
        );
        plan.add(FaultRule::new(Fault::Gzip).times(1));
        let none = HeaderMap::new();
        assert_eq!(plan.select("GET", "/b", &none), vec![Fault::Gzip]);
        assert!(plan.select("GET", "/a", &none).is_empty());
        assert!(plan.select("HEAD", "/a", &none).is_empty());
        assert_eq!(plan.select("GET", "/a", &none), vec![Fault::IgnoreRange]);
        assert_eq!(plan.select("GET", "/a", &none), vec![Fault::IgnoreRange]);
        assert!(plan.select("GET", "/a", &none).is_empty());
    }

    #[test]
    fn a_header_rule_counts_only_requests_carrying_the_header() {
        let mut plan = FaultPlan::default();
        plan.add(
            FaultRule::new(Fault::ChangeEtag)
                .header("if-match")
                .skip(1)
                .times(1),
        );
        let mut conditional = HeaderMap::new();
        conditional.insert("If-Match", "\"v1\"".parse().unwrap());
        let plain = HeaderMap::new();
        // Requests without the header neither get the fault nor count towards the skip.
        assert!(plan.select("GET", "/a", &plain).is_empty());
        assert!(plan.select("GET", "/a", &plain).is_empty());
        assert!(plan.select("GET", "/a", &conditional).is_empty(), "skipped");
        assert_eq!(
            plan.select("GET", "/a", &conditional),
            vec![Fault::ChangeEtag]
        );
        assert!(plan.select("GET", "/a", &conditional).is_empty());
    }
}
