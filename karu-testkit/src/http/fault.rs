//! The fault plan: rules that make the mock server misbehave on chosen requests.

use std::time::Duration;

use http::HeaderMap;

use crate::Rng;

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
    /// A heavy-tailed extra delay before the response headers: each request it applies to
    /// waits a fresh draw from a Pareto distribution with this median and 99th percentile
    /// (drawn from the rule's seeded sequence, see [`FaultRule::seed`], and never longer
    /// than [`PARETO_CAP`] times `p99`). The draw is applied, and logged, as the
    /// [`Fault::Latency`] it came to, so [`RequestRecord::latency`](crate::RequestRecord::latency)
    /// and [`RequestRecord::fault`](crate::RequestRecord::fault) show each request's delay.
    ParetoLatency {
        /// Half of the delayed requests wait less than this.
        median: Duration,
        /// 99 % of the delayed requests wait less than this (more than `median`).
        p99: Duration,
    },
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
    /// Give the object its next version before answering this request, where
    /// [`Fault::ChangeEtag`] acts: every byte one more than before (wrapping), so that bytes of
    /// two versions mixed in one buffer show ([`version_of_pattern`] tells which version of a
    /// pattern object bytes are of), and a new ETag of the kind it had: none stays none, a weak
    /// tag stays as it is (it promises only equivalent content), a strong one becomes a new
    /// generated strong one. A virtual object becomes stored bytes of its size. On every
    /// request of a path (a rule without `times`), every answer is of another version.
    ///
    /// [`version_of_pattern`]: crate::version_of_pattern
    ChangeContent,
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
    /// Match only requests of one closed byte range that shares a byte with this one.
    overlapping: Option<std::ops::Range<u64>>,
    skip: u64,
    times: Option<u64>,
    /// Applies to a matching request with this probability, in millionths.
    share: u32,
    seed: u64,
}

/// The longest [`Fault::ParetoLatency`] delay, as a multiple of its `p99`.
pub const PARETO_CAP: u32 = 10;

impl FaultRule {
    /// A rule applying `fault` to every request, forever.
    pub fn new(fault: Fault) -> Self {
        Self {
            fault,
            path: None,
            method: None,
            header: None,
            overlapping: None,
            skip: 0,
            times: None,
            share: 1_000_000,
            seed: 0,
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

    /// Match only requests whose `Range` is one closed range (`bytes=a-b`) sharing a byte with
    /// `range` (`start..end`, end exclusive): the reads of one part of an object, whichever
    /// order they arrive in; default: any request.
    pub fn range_overlapping(mut self, range: std::ops::Range<u64>) -> Self {
        self.overlapping = Some(range);
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

    /// Apply to a random share of the matching requests (`0.02`: about one in fifty), drawn
    /// from the rule's seeded sequence ([`FaultRule::seed`]); `skip` and `times` count only
    /// the requests drawn. Default: every one (`1.0`). A share outside `0..=1` is clamped.
    ///
    /// ```
    /// use std::time::Duration;
    /// use karu_testkit::{Fault, FaultRule};
    /// // A heavy tail: 2 % of the requests wait one more second for their answer.
    /// let rule = FaultRule::new(Fault::Latency(Duration::from_secs(1))).share(0.02).seed(7);
    /// # let _ = rule;
    /// ```
    pub fn share(mut self, share: f64) -> Self {
        self.share = (share.clamp(0.0, 1.0) * 1e6).round() as u32;
        self
    }

    /// The seed of the rule's random sequence ([`FaultRule::share`]'s draws and
    /// [`Fault::ParetoLatency`]'s delays); default 0. The same seed and the same order of
    /// arrival give the same faults.
    pub fn seed(mut self, seed: u64) -> Self {
        self.seed = seed;
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
            && self.overlapping.as_ref().is_none_or(|range| {
                headers
                    .get(http::header::RANGE)
                    .and_then(|value| value.to_str().ok())
                    .and_then(closed_range)
                    .is_some_and(|(first, last)| first < range.end && range.start <= last)
            })
    }
}

/// The range of a `Range` header of one closed range, `bytes=a-b` (both inclusive).
fn closed_range(value: &str) -> Option<(u64, u64)> {
    let (first, last) = value.trim().strip_prefix("bytes=")?.split_once('-')?;
    let (first, last) = (first.trim().parse().ok()?, last.trim().parse().ok()?);
    (first <= last).then_some((first, last))
}

/// A rule with its counters.
#[derive(Debug)]
struct RuleState {
    rule: FaultRule,
    /// Matching requests seen so far.
    seen: u64,
    /// Requests the fault was applied to.
    applied: u64,
    /// The rule's seeded sequence.
    rng: Rng,
}

/// A draw from the Pareto distribution with this median and 99th percentile, from `unit`, a
/// uniform value in `(0, 1]`, clipped at [`PARETO_CAP`] × `p99`.
///
/// With shape `a` and scale `m`, `P(X > x) = (m / x)^a`: the median is `m · 2^(1/a)` and the
/// 99th percentile `m · 100^(1/a)`, so `a = ln 50 / ln(p99 / median)`.
pub(crate) fn pareto(median: Duration, p99: Duration, unit: f64) -> Duration {
    let (median_s, p99_s) = (median.as_secs_f64(), p99.as_secs_f64());
    let cap = p99.saturating_mul(PARETO_CAP);
    if median_s <= 0.0 || p99_s <= median_s {
        // No tail to speak of: every draw is the median.
        return median.min(cap);
    }
    let shape = 50f64.ln() / (p99_s / median_s).ln();
    let scale = median_s / 2f64.powf(1.0 / shape);
    let x = scale / unit.clamp(f64::MIN_POSITIVE, 1.0).powf(1.0 / shape);
    Duration::try_from_secs_f64(x).map_or(cap, |d| d.min(cap))
}

/// The server's ordered list of rules.
#[derive(Debug, Default)]
pub(crate) struct FaultPlan {
    rules: Vec<RuleState>,
}

impl FaultPlan {
    pub(crate) fn add(&mut self, rule: FaultRule) {
        let rng = Rng::new(rule.seed);
        self.rules.push(RuleState {
            rule,
            seen: 0,
            applied: 0,
            rng,
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
            if state.rule.share < 1_000_000
                && state.rng.range(0, 1_000_000) >= u64::from(state.rule.share)
            {
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
            out.push(match state.rule.fault {
                Fault::ParetoLatency { median, p99 } => {
                    // 53 random bits: a uniform value in (0, 1].
                    let unit = ((state.rng.next_u64() >> 11) + 1) as f64 / (1u64 << 53) as f64;
                    Fault::Latency(pareto(median, p99, unit))
                }
                ref fault => fault.clone(),
            });
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
    fn a_range_filter_matches_closed_ranges_sharing_a_byte() {
        let mut plan = FaultPlan::default();
        plan.add(FaultRule::new(Fault::Gzip).range_overlapping(100..200));
        let range = |value: &str| {
            let mut headers = HeaderMap::new();
            headers.insert(http::header::RANGE, value.parse().unwrap());
            headers
        };
        for hit in [
            "bytes=100-100",
            "bytes=199-300",
            "bytes=0-1000",
            "bytes=150-160",
        ] {
            assert_eq!(
                plan.select("GET", "/a", &range(hit)),
                vec![Fault::Gzip],
                "{hit}"
            );
        }
        for miss in [
            "bytes=0-99",
            "bytes=200-300",
            "bytes=-150",
            "bytes=150-",
            "bytes=0-1,150-160",
        ] {
            assert!(plan.select("GET", "/a", &range(miss)).is_empty(), "{miss}");
        }
        assert!(plan.select("GET", "/a", &HeaderMap::new()).is_empty());
    }

    #[test]
    fn a_share_applies_to_a_seeded_fraction_and_repeats_with_its_seed() {
        let draw = |seed| {
            let mut plan = FaultPlan::default();
            plan.add(FaultRule::new(Fault::Gzip).share(0.05).seed(seed));
            let none = HeaderMap::new();
            (0..20_000)
                .map(|_| !plan.select("GET", "/a", &none).is_empty())
                .collect::<Vec<_>>()
        };
        let first = draw(3);
        let hits = first.iter().filter(|&&hit| hit).count();
        // 5 % of 20,000 is 1,000; the binomial's standard deviation is about 31.
        assert!((850..1150).contains(&hits), "{hits} requests drawn");
        assert_eq!(first, draw(3), "the same seed draws the same requests");
        assert_ne!(first, draw(4));
    }

    #[test]
    fn skip_and_times_count_only_the_drawn_requests() {
        let mut plan = FaultPlan::default();
        plan.add(
            FaultRule::new(Fault::Gzip)
                .share(0.5)
                .seed(1)
                .skip(2)
                .times(3),
        );
        let none = HeaderMap::new();
        let applied = (0..1000)
            .filter(|_| !plan.select("GET", "/a", &none).is_empty())
            .count();
        assert_eq!(applied, 3);
    }

    #[test]
    fn pareto_draws_have_the_asked_median_and_p99() {
        let (median, p99) = (Duration::from_millis(20), Duration::from_millis(400));
        let mut plan = FaultPlan::default();
        plan.add(FaultRule::new(Fault::ParetoLatency { median, p99 }).seed(9));
        let none = HeaderMap::new();
        let mut delays: Vec<Duration> = (0..100_000)
            .map(|_| match plan.select("GET", "/a", &none).as_slice() {
                [Fault::Latency(d)] => *d,
                other => panic!("{other:?}"),
            })
            .collect();
        delays.sort();
        let at = |q: f64| delays[(q * delays.len() as f64) as usize].as_secs_f64();
        assert!((at(0.5) / 0.020 - 1.0).abs() < 0.05, "median {}", at(0.5));
        assert!((at(0.99) / 0.400 - 1.0).abs() < 0.15, "p99 {}", at(0.99));
        assert!(delays.iter().all(|d| *d <= p99 * PARETO_CAP));
        assert!(delays[0] > Duration::ZERO);
    }

    #[test]
    fn pareto_quantiles_are_exact_at_the_points_that_define_it() {
        let (median, p99) = (Duration::from_millis(50), Duration::from_secs(2));
        let at = |unit: f64| pareto(median, p99, unit).as_secs_f64();
        // P(X > x) = u: the median is u = 0.5, the p99 is u = 0.01.
        assert!((at(0.5) - 0.05).abs() < 1e-9);
        assert!((at(0.01) - 2.0).abs() < 1e-9);
        assert_eq!(pareto(median, p99, 1e-300), p99 * PARETO_CAP);
        // A degenerate tail is the median itself.
        assert_eq!(pareto(median, median, 0.001), median);
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
