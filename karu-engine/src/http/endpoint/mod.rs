//! Per-endpoint state the transport keeps: measurements for the priced planner ([`Measurements`]),
//! the adaptive concurrency window ([`Window`]) with the gate that holds an exchange until the
//! window has room, and the hedging policy's state ([`Hedger`]: the times to the head, the
//! budget, the recent failures).
//!
//! An endpoint is the scheme and authority of a canonical path (`http://host:port`,
//! `s3://bucket`): known when a batch is planned, before any request is prepared, and the
//! same for every read of one server or container.
//!
//! The gate counts requests in flight, not transfers: a transfer waiting out a retry's back-off
//! holds no room in the window. Waiting exchanges are woken one at a time as room frees up.
//!
//! Every request admitted reports once how it ended ([`Admission::finish`], an [`Outcome`]),
//! duplicates and the requests a race cancelled included: one observation per request, and
//! each part of the state takes what it measures (the measurements and the window answers, the
//! hedger times to the head and failures, and the waits of the requests that lost a race).

mod measurements;
mod window;

use std::sync::Arc;
use std::time::Instant;

use parking_lot::Mutex;
use rustc_hash::FxHashMap;
use tokio::sync::Notify;

use crate::hedge::{HedgePolicy, Hedger, Refusal, Verdict, Wait};
use crate::plan::price::Measured;

pub(crate) use measurements::Measurements;
pub(crate) use window::Window;

/// The endpoint of a canonical path: everything before the path's first `/` after `://`
/// (the whole string when there is none).
pub(crate) fn endpoint_of(canonical: &str) -> &str {
    // Byte searches: `str::find` with a string pattern sets up a two-way searcher, on every
    // request here.
    let bytes = canonical.as_bytes();
    let after_scheme = bytes
        .windows(3)
        .position(|w| w == b"://")
        .map_or(0, |i| i + 3);
    match bytes[after_scheme..].iter().position(|&b| b == b'/') {
        Some(i) => &canonical[..after_scheme + i],
        None => canonical,
    }
}

/// The endpoints a client has talked to.
#[derive(Debug)]
pub(crate) struct Endpoints {
    /// The configured concurrency: each window's start and ceiling.
    concurrency: usize,
    /// Whether windows adapt (`adaptive_concurrency`); if not, the gate never waits.
    adaptive: bool,
    /// Bucket numbers of all measurements count from here.
    origin: Instant,
    /// By endpoint (FxHash: looked up on every request).
    table: Mutex<FxHashMap<String, Arc<Endpoint>>>,
}

impl Endpoints {
    pub(crate) fn new(concurrency: usize, adaptive: bool, origin: Instant) -> Self {
        Endpoints {
            concurrency,
            adaptive,
            origin,
            table: Mutex::new(FxHashMap::default()),
        }
    }

    /// The endpoint of `canonical`, created on first use.
    pub(crate) fn get(&self, canonical: &str) -> Arc<Endpoint> {
        let key = endpoint_of(canonical);
        let mut table = self.table.lock();
        if let Some(endpoint) = table.get(key) {
            return Arc::clone(endpoint);
        }
        let endpoint = Arc::new(Endpoint {
            adaptive: self.adaptive,
            state: Mutex::new(State {
                measurements: Measurements::new(self.origin),
                window: Window::new(self.concurrency),
                hedger: Hedger::new(),
                in_flight: 0,
                throttled: 0,
            }),
            room: Notify::new(),
        });
        table.insert(key.to_string(), Arc::clone(&endpoint));
        endpoint
    }

    /// Record one exchange with `canonical`'s endpoint as if it had run: sent, head and last
    /// byte at `at` after the measurements' origin (tests inject measurements with it).
    #[cfg(test)]
    pub(crate) fn record(&self, canonical: &str, at: [std::time::Duration; 3], bytes: u64) {
        let [sent, head, done] = at.map(|d| self.origin + d);
        let endpoint = self.get(canonical);
        endpoint
            .state
            .lock()
            .measurements
            .record(sent, head, done, bytes);
    }

    /// What the planner prices gaps of `canonical` with at `now`, if its endpoint has been
    /// measured: the round trip, and the capacity shared by the connections its window allows.
    pub(crate) fn measured(&self, canonical: &str, now: Instant) -> Option<Measured> {
        let endpoint = {
            let table = self.table.lock();
            Arc::clone(table.get(endpoint_of(canonical))?)
        };
        let state = endpoint.state.lock();
        let connections = if self.adaptive {
            state.window.allowed()
        } else {
            self.concurrency
        };
        state.measurements.measured(now, connections)
    }

    /// The largest gap worth fetching for a read of `canonical` at `now` instead of a request
    /// of its own ([`break_even_gap`](crate::plan::price::break_even_gap) of what was
    /// measured), if its endpoint has been measured: the planner's price of a group, and the
    /// price a merged request is cut at as it starts.
    pub(crate) fn price(&self, canonical: &str, now: Instant) -> Option<u64> {
        self.measured(canonical, now)
            .map(|m| crate::plan::price::break_even_gap(&m))
    }
}

/// One endpoint.
#[derive(Debug)]
pub(crate) struct Endpoint {
    adaptive: bool,
    state: Mutex<State>,
    /// Woken (one waiter at a time) when the window may have room.
    room: Notify,
}

#[derive(Debug)]
struct State {
    measurements: Measurements,
    window: Window,
    hedger: Hedger,
    /// Exchanges admitted and not finished.
    in_flight: usize,
    /// Throttled answers seen.
    throttled: u64,
}

/// How an admitted exchange ended.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Outcome {
    /// Answered and received: its response head arrived at `head`, the last body byte at
    /// `done`, with `bytes` body bytes.
    Received {
        head: Instant,
        done: Instant,
        bytes: u64,
    },
    /// Answered `429` or `503`, at `at`.
    Throttled { at: Instant },
    /// Failed in transport (connecting, sending or receiving) or with another server error
    /// (`5xx`).
    Failed,
    /// Cancelled at `at`, before its answer's head, because another request of its race won
    /// (or failed for good): it waited that long at least. Not an answer: the window and the
    /// measurements are unchanged.
    Lost { at: Instant },
    /// Anything else (another error status, a refused answer, a cancellation).
    Other,
}

impl Outcome {
    /// Whether an HTTP status is a throttling answer: `429 Too Many Requests` or
    /// `503 Service Unavailable` (S3's `SlowDown`).
    pub(crate) fn is_throttle(status: u16) -> bool {
        matches!(status, 429 | 503)
    }
}

impl Endpoint {
    /// Wait until the window has room for one more exchange, and take it. Never waits when
    /// adaptation is off. The exchange is an ordinary request sent under `hedging` (it adds to
    /// the budget).
    pub(crate) async fn admit(self: &Arc<Self>, hedging: &HedgePolicy) -> Admission {
        loop {
            let notified = self.room.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if let Some(admission) = self.try_admit(hedging) {
                return admission;
            }
            notified.await;
        }
    }

    /// Room for one more exchange now, if the window has it (always, when adaptation is off):
    /// the usual case, taken without registering as a waiter on the endpoint every loop
    /// shares. The exchange is an ordinary request sent under `hedging`.
    pub(crate) fn try_admit(self: &Arc<Self>, hedging: &HedgePolicy) -> Option<Admission> {
        {
            let mut state = self.state.lock();
            if self.adaptive && state.in_flight >= state.window.allowed() {
                return None;
            }
            state.in_flight += 1;
            state.hedger.handle_sent(hedging);
        }
        Some(Admission {
            endpoint: Some(Arc::clone(self)),
            sent: Instant::now(),
        })
    }

    /// How long a request of this endpoint may wait for its answer before a duplicate is due
    /// under `hedging`.
    pub(crate) fn hedge_wait(&self, hedging: &HedgePolicy) -> Wait {
        self.state.lock().hedger.poll_wait(hedging)
    }

    /// Room for a duplicate now, if the window has it and the hedging policy allows one (its
    /// budget, no throttling, no recent failure): the duplicate's token is taken. Refused: why.
    pub(crate) fn try_admit_hedge(
        self: &Arc<Self>,
        hedging: &HedgePolicy,
    ) -> Result<Admission, Refusal> {
        {
            let mut state = self.state.lock();
            if self.adaptive && state.in_flight >= state.window.allowed() {
                return Err(Refusal::Window);
            }
            let throttling = state.window.is_throttling();
            if let Verdict::Refused(why) = state.hedger.poll_hedge(hedging, throttling) {
                tracing::trace!(target: "karu::http", ?why, "no duplicate");
                return Err(why);
            }
            state.in_flight += 1;
        }
        Ok(Admission {
            endpoint: Some(Arc::clone(self)),
            sent: Instant::now(),
        })
    }

    /// Throttled answers this endpoint has given.
    #[cfg(test)]
    pub(crate) fn throttled(&self) -> u64 {
        self.state.lock().throttled
    }

    fn finish(&self, sent: Instant, outcome: Outcome) {
        let room = {
            let mut state = self.state.lock();
            state.in_flight = state.in_flight.saturating_sub(1);
            match outcome {
                Outcome::Received { head, done, bytes } => {
                    state.measurements.record(sent, head, done, bytes);
                    state.window.handle_success();
                    state
                        .hedger
                        .handle_answer(head.saturating_duration_since(sent));
                }
                Outcome::Throttled { at } => {
                    state.throttled += 1;
                    state.window.handle_throttled(sent, at);
                }
                Outcome::Failed => state.hedger.handle_failure(),
                Outcome::Lost { at } => {
                    state.hedger.handle_lost(at.saturating_duration_since(sent))
                }
                Outcome::Other => {}
            }
            state.window.allowed().saturating_sub(state.in_flight)
        };
        // One waiter per free place (the window may have grown by one).
        for _ in 0..room.min(2) {
            self.room.notify_one();
        }
    }
}

/// Room for one exchange in an endpoint's window, from [`Endpoint::admit`]; given back by
/// [`Admission::finish`], or when dropped (as [`Outcome::Other`]).
#[derive(Debug)]
pub(crate) struct Admission {
    endpoint: Option<Arc<Endpoint>>,
    /// When the exchange was admitted: its request goes out now.
    sent: Instant,
}

impl Admission {
    /// An admission to no endpoint (finishing it records nothing).
    pub(crate) fn detached() -> Self {
        Admission {
            endpoint: None,
            sent: Instant::now(),
        }
    }

    /// When the exchange was admitted.
    pub(crate) fn sent(&self) -> Instant {
        self.sent
    }

    /// The exchange ended with `outcome`.
    pub(crate) fn finish(mut self, outcome: Outcome) {
        if let Some(endpoint) = self.endpoint.take() {
            endpoint.finish(self.sent, outcome);
        }
    }
}

impl Drop for Admission {
    fn drop(&mut self) {
        if let Some(endpoint) = self.endpoint.take() {
            endpoint.finish(self.sent, Outcome::Other);
        }
    }
}

/// When an answer's body arrived, for the endpoint's measurements: one record per answer,
/// kept by the exchange that receives the body (no layer between the body and its
/// destinations).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Arrival {
    /// When the head said how much will arrive, or (without a length) the first byte came.
    head: Option<Instant>,
    /// When the last byte came.
    last: Option<Instant>,
    bytes: u64,
}

impl Arrival {
    /// The head stated the body's length at `now`.
    pub(crate) fn head_arrived(&mut self, now: Instant) {
        self.head.get_or_insert(now);
    }

    /// `bytes` landed at `now`.
    pub(crate) fn landed(&mut self, bytes: u64, now: Instant) {
        self.head.get_or_insert(now);
        self.last = Some(now);
        self.bytes += bytes;
    }

    /// The exchange succeeded at `now`: what it showed of the endpoint.
    pub(crate) fn received(&self, now: Instant) -> Outcome {
        Outcome::Received {
            head: self.head.unwrap_or(now),
            done: self.last.unwrap_or(now),
            bytes: self.bytes,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    /// Hedging off (these tests are of the window).
    fn off() -> HedgePolicy {
        let mut settings = karu_config::HedgeSettings::default();
        settings.enabled = false;
        HedgePolicy::from(&settings)
    }

    #[test]
    fn endpoints_are_scheme_and_authority() {
        assert_eq!(
            endpoint_of("http://127.0.0.1:8080/a/b.bin"),
            "http://127.0.0.1:8080"
        );
        assert_eq!(endpoint_of("s3://bucket/key/x"), "s3://bucket");
        assert_eq!(endpoint_of("s3://bucket"), "s3://bucket");
        assert_eq!(endpoint_of("no-scheme/x"), "no-scheme");
        assert_eq!(endpoint_of("x://"), "x://");
        assert_eq!(endpoint_of(""), "");
        assert_eq!(endpoint_of("a://b://c/d"), "a://b:");
    }

    #[test]
    fn reads_of_one_server_share_an_endpoint_and_its_measurements() {
        let t0 = Instant::now();
        let endpoints = Endpoints::new(64, true, t0);
        let a = endpoints.get("http://h:1/a.bin");
        let b = endpoints.get("http://h:1/b.bin");
        assert!(Arc::ptr_eq(&a, &b));
        assert!(!Arc::ptr_eq(&a, &endpoints.get("http://h:2/a.bin")));
        assert_eq!(endpoints.measured("http://h:1/x", t0), None);
        assert_eq!(endpoints.measured("http://never:1/x", t0), None);
        // 16 MiB after a 20 ms round trip, arriving over 10 ms: 1,677,721,600 B/s.
        let sent = t0;
        let head = t0 + Duration::from_millis(20);
        let done = head + Duration::from_millis(10);
        a.finish(
            sent,
            Outcome::Received {
                head,
                done,
                bytes: 16 << 20,
            },
        );
        let measured = endpoints.measured("http://h:1/other.bin", done).unwrap();
        assert_eq!(measured.rtt, Duration::from_millis(20));
        assert_eq!(measured.throughput, 1_677_721_600 / 64);
    }

    #[tokio::test]
    async fn the_gate_holds_exchanges_beyond_the_window_and_frees_them_one_by_one() {
        let endpoints = Endpoints::new(4, true, Instant::now());
        let e = endpoints.get("http://h:1/a");
        let mut held = Vec::new();
        for _ in 0..4 {
            held.push(e.admit(&off()).await);
        }
        // The first throttled answer halves the window, from 4 to 2: with 3 in flight, two
        // more must end before there is room.
        let first = held.pop().unwrap();
        let sent = first.sent();
        first.finish(Outcome::Throttled { at: sent });
        assert_eq!(e.throttled(), 1);
        let waiting = tokio::spawn({
            let e = Arc::clone(&e);
            async move { e.admit(&off()).await }
        });
        tokio::task::yield_now().await;
        assert!(!waiting.is_finished());
        drop(held.pop());
        tokio::task::yield_now().await;
        // 2 in flight, window 2: still no room.
        assert!(!waiting.is_finished());
        drop(held.pop());
        // 1 in flight, window 2: the waiter gets in.
        let admitted = waiting.await.unwrap();
        assert_eq!(e.state.lock().in_flight, 2);
        drop(admitted);
        drop(held);
        assert_eq!(e.state.lock().in_flight, 0);
    }

    /// Hedging on, with a budget of a whole token per ordinary request.
    fn hedged() -> HedgePolicy {
        let mut settings = karu_config::HedgeSettings::default();
        settings.budget = karu_config::Share::from_percent(100);
        HedgePolicy::from(&settings)
    }

    #[test]
    fn one_throttled_answer_stops_duplicates_for_about_one_window_of_answers() {
        // 64 requests in flight at the default concurrency, one answered `503`: the window is
        // cut to 32. Duplicates are refused while the endpoint throttles, and that must end
        // once the requests in flight at the cut have been answered without throttling: not
        // after the ~1,500 answers the window takes to grow back to 64.
        let t0 = Instant::now();
        let endpoints = Endpoints::new(64, true, t0);
        let e = endpoints.get("http://h:1/a");
        let policy = hedged();
        let mut held: Vec<Admission> = (0..64).map(|_| e.try_admit(&policy).unwrap()).collect();
        let throttled = held.pop().unwrap();
        let at = throttled.sent() + Duration::from_millis(20);
        throttled.finish(Outcome::Throttled { at });
        let answer = |admission: Admission| {
            let head = admission.sent() + Duration::from_millis(20);
            admission.finish(Outcome::Received {
                head,
                done: head,
                bytes: 100,
            });
        };
        let mut answers = 0;
        let resumed = loop {
            assert!(answers < 10_000, "still refused after {answers} answers");
            // The requests in flight are answered, and new ones sent as the window allows.
            let next = held.pop().unwrap_or_else(|| e.try_admit(&policy).unwrap());
            answer(next);
            answers += 1;
            match e.try_admit_hedge(&policy) {
                Ok(duplicate) => {
                    drop(duplicate);
                    break answers;
                }
                Err(Refusal::Throttling | Refusal::Window) => {}
                Err(other) => panic!("refused for {other:?}"),
            }
        };
        assert!(
            (32..=64).contains(&resumed),
            "duplicates resumed after {resumed} answers"
        );
    }

    #[tokio::test]
    async fn without_adaptation_the_gate_never_waits() {
        let endpoints = Endpoints::new(2, false, Instant::now());
        let e = endpoints.get("http://h:1/a");
        let mut held = Vec::new();
        for _ in 0..10 {
            held.push(e.admit(&off()).await);
        }
        assert_eq!(e.state.lock().in_flight, 10);
    }
}
