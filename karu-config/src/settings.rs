//! The typed settings every client snapshot resolves to, with their built-in defaults.

use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::error::Problem;
use crate::integer;
use crate::money::Prices;
use crate::units::{ByteSize, Seconds, Share};

/// Every setting Karu's engine reads, resolved for the whole client or for one canonical path.
///
/// Global-only fields (threads, workers, concurrency, planner defaults, TLS roots, HTTP version,
/// DNS TTL) are read once when the client is built; the rest may be overridden by path rules. A
/// path rule that sets a global-only field is a configuration error rather than being ignored.
/// [`Snapshot::global`](crate::Snapshot::global) holds the client-wide values and
/// [`Snapshot::for_path`](crate::Snapshot::for_path) the values for one canonical path.
///
/// Counts that size the engine (`io_threads`, `file_workers`, `credential_workers`,
/// `concurrency`, `planner.max_parts`, `planner.max_amplification`) must be at least 1, and
/// thread and worker counts at most [`MAX_IO_THREADS`](Self::MAX_IO_THREADS),
/// [`MAX_FILE_WORKERS`](Self::MAX_FILE_WORKERS) and
/// [`MAX_CREDENTIAL_WORKERS`](Self::MAX_CREDENTIAL_WORKERS); `concurrency` at most
/// [`MAX_CONCURRENCY`](Self::MAX_CONCURRENCY). Settings that would make every remote read fail
/// are refused too: `retry.deadline`, `retry.attempts`, `retry.connect_attempts` and
/// `http.connect_timeout` must be above zero.
///
/// Integer settings accept decimal or `0x` hexadecimal numbers, also written as strings
/// (`"0x10"`); sizes are [`ByteSize`] and durations [`Seconds`], with units.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
#[non_exhaustive]
pub struct Settings {
    /// HTTP event loops, each a thread with its own runtime and connection pool, started with
    /// the first remote read (`io_threads`, env `KARU_IO_THREADS`; default 4, at most 256).
    #[serde(deserialize_with = "integer::deserialize")]
    pub io_threads: usize,
    /// Threads doing positional reads of local files, started with the first local read
    /// (`file_workers`, env `KARU_FILE_WORKERS`; default 4, at most 1,024).
    #[serde(deserialize_with = "integer::deserialize")]
    pub file_workers: usize,
    /// Threads looking up credentials for cloud transfers, started with the first lookup
    /// (`credential_workers`, env `KARU_CREDENTIAL_WORKERS`; default 4, at most 256).
    #[serde(deserialize_with = "integer::deserialize")]
    pub credential_workers: usize,
    /// Remote transfers active at once across all event loops (`concurrency`, env
    /// `KARU_CONCURRENCY`; default 64, at most 65,536).
    #[serde(deserialize_with = "integer::deserialize")]
    pub concurrency: usize,
    /// Whether the requests in flight to each endpoint adapt to throttling
    /// (`adaptive_concurrency`, env `KARU_ADAPTIVE_CONCURRENCY`; default true; global only):
    /// a `429` or `503` answer cuts the endpoint's window to three quarters (at most once per
    /// round trip, never below 1), and every successful answer widens it by one request per
    /// window's worth of answers, up to `concurrency`. With false, every endpoint may have
    /// `concurrency` requests in flight, throttled or not.
    pub adaptive_concurrency: bool,
    /// Default merge guards; a batch may override each.
    pub planner: PlannerSettings,
    /// Transport and response-checking options.
    pub http: HttpSettings,
    /// Retry attempts and the shared deadline.
    pub retry: RetrySettings,
    /// Hedged requests: a duplicate of a request still waiting for its answer.
    pub hedge: HedgeSettings,
}

/// Dotted keys a path rule may not set: they configure the whole client, not one resource.
/// A key names a whole table (`planner`) or one field of a table (`http.version`).
pub(crate) const GLOBAL_ONLY: &[&str] = &[
    "io_threads",
    "file_workers",
    "credential_workers",
    "concurrency",
    "adaptive_concurrency",
    "planner",
    "http.version",
    "http.ca_file",
    "http.dns_ttl",
];

impl Settings {
    /// The keys a path rule may not set, because they configure the whole client, not one
    /// resource (a key names a whole table, `planner`, or one field, `http.version`): a rule
    /// that sets one is a configuration error.
    ///
    /// ```
    /// assert!(karu_config::Settings::GLOBAL_ONLY.contains(&"concurrency"));
    /// assert!(karu_config::Settings::GLOBAL_ONLY.contains(&"planner"));
    /// ```
    pub const GLOBAL_ONLY: &'static [&'static str] = GLOBAL_ONLY;

    /// The most HTTP event loops (`io_threads`): each is a thread with its own runtime.
    pub const MAX_IO_THREADS: usize = 256;
    /// The most file worker threads (`file_workers`).
    pub const MAX_FILE_WORKERS: usize = 1024;
    /// The most credential worker threads (`credential_workers`).
    pub const MAX_CREDENTIAL_WORKERS: usize = 256;
    /// The most remote transfers active at once (`concurrency`).
    pub const MAX_CONCURRENCY: usize = 65_536;

    /// The dotted key of the first value out of its range, or that would make every read
    /// fail, with the problem.
    pub(crate) fn check(&self) -> Option<(&'static str, Problem)> {
        let counts = [
            ("io_threads", self.io_threads, Self::MAX_IO_THREADS),
            ("file_workers", self.file_workers, Self::MAX_FILE_WORKERS),
            (
                "credential_workers",
                self.credential_workers,
                Self::MAX_CREDENTIAL_WORKERS,
            ),
            ("concurrency", self.concurrency, Self::MAX_CONCURRENCY),
            (
                "planner.max_parts",
                self.planner.max_parts as usize,
                usize::MAX,
            ),
            (
                "planner.max_amplification",
                self.planner.max_amplification as usize,
                usize::MAX,
            ),
            ("retry.attempts", self.retry.attempts as usize, usize::MAX),
            (
                "retry.connect_attempts",
                self.retry.connect_attempts as usize,
                usize::MAX,
            ),
        ];
        for (key, value, max) in counts {
            if value == 0 {
                return Some((key, Problem::Zero));
            }
            if value > max {
                let problem = Problem::TooLarge {
                    max: max as u64,
                    found: value.to_string(),
                };
                return Some((key, problem));
            }
        }
        let part_size = self.http.part_size.0;
        if part_size != 0 && part_size < HttpSettings::MIN_PART_SIZE {
            let problem = Problem::InvalidValue(format!(
                "expected 0 (never split) or at least {} bytes (64 KiB), found {part_size}",
                HttpSettings::MIN_PART_SIZE
            ));
            return Some(("http.part_size", problem));
        }
        let never = [
            (
                "retry.deadline",
                self.retry.deadline,
                "a deadline of 0 fails every read before it starts",
            ),
            (
                "http.connect_timeout",
                self.http.connect_timeout,
                "a connect timeout of 0 fails every connection",
            ),
        ];
        never.into_iter().find_map(|(key, value, why)| {
            value.0.is_zero().then(|| {
                let problem =
                    Problem::AlwaysFails(format!("expected a duration above 0, found 0 ({why})"));
                (key, problem)
            })
        })
    }
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            io_threads: 4,
            file_workers: 4,
            credential_workers: 4,
            concurrency: 64,
            adaptive_concurrency: true,
            planner: PlannerSettings::default(),
            http: HttpSettings::default(),
            retry: RetrySettings::default(),
            hedge: HedgeSettings::default(),
        }
    }
}

/// The four merge guards of the planner (`[planner]`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
#[non_exhaustive]
pub struct PlannerSettings {
    /// Largest gap between neighbouring reads that may still merge; 0 disables merging
    /// (`planner.max_gap`; default 1 MiB).
    pub max_gap: ByteSize,
    /// Largest span of one merged transfer (`planner.max_span`; default 64 MiB).
    pub max_span: ByteSize,
    /// Most original reads one transfer may serve (`planner.max_parts`; default 1,024; at
    /// least 1).
    #[serde(deserialize_with = "integer::deserialize")]
    pub max_parts: u32,
    /// Most fetched bytes per useful byte (`planner.max_amplification`; default 16; at least
    /// 1).
    #[serde(deserialize_with = "integer::deserialize")]
    pub max_amplification: u32,
    /// How a gap is judged inside the four guards (`planner.trade`: `"priced"`, the
    /// default, `"frugal"` or `"guards"`). See [`Trade`].
    pub trade: Trade,
    /// What the object stores that bill reads charge per request and per byte
    /// (`planner.prices.s3`, `.gcs`, `.azure`, each `requests_per_1000` and
    /// `egress_per_gib` in US dollars); the priced trade weighs a gap in money with them. See
    /// [`Prices`].
    pub prices: Prices,
}

impl Default for PlannerSettings {
    fn default() -> Self {
        Self {
            max_gap: ByteSize(1 << 20),
            max_span: ByteSize(64 << 20),
            max_parts: 1024,
            max_amplification: 16,
            trade: Trade::default(),
            prices: Prices::default(),
        }
    }
}

/// How the planner judges joining a read to its neighbour's transfer (`planner.trade`).
///
/// Either way the four guards are hard bounds: no merge ever breaks one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(
    rename_all = "lowercase",
    expecting = "one of \"guards\", \"priced\", \"frugal\""
)]
#[non_exhaustive]
pub enum Trade {
    /// Join whenever the four guards allow it.
    Guards,
    /// Also price the gap against a request with what the client measured for the endpoint:
    /// a gap joins only when fetching it is expected to cost less time than the round trip
    /// of a request of its own (the round-trip latency times the throughput one of
    /// `concurrency` busy connections gets). Until the endpoint has been measured, as for
    /// the first batch of a client, the guards alone plan. A merged request is priced again
    /// as it starts, with what has been measured by then, and comes apart at the gaps no
    /// longer worth fetching: the first batch on a slow link stops over-fetching within its
    /// first round trips. A measurement is believed only while the endpoint's responses keep
    /// showing its bandwidth: when nearly all of the recent bytes arrived with their
    /// responses' heads, the bandwidth is not what limits the reads, and the guards plan
    /// again (a client slowed down for a while by other work on its machine does not go on
    /// pricing gaps with what it measured then).
    ///
    /// The default: in the benchmarks (`cargo xtask bench all`) it changes the plan only
    /// where bytes cost time, and plans every other workload exactly as `guards` does.
    ///
    /// Where the object store bills reads (`planner.prices`: S3, GCS, Azure), a gap is also
    /// weighed in money once the endpoint is measured: a gap whose egress costs less than a
    /// request of its own joins even where time alone would not fetch it (on an endpoint
    /// with almost no round trip, a few KB more save a request's fee: 4,772 bytes at S3's
    /// list prices). Money only ever adds joins the guards allow; it never splits what time
    /// joins.
    ///
    /// Besides, a plan of more than one round is fitted to its round trips: with
    /// `concurrency` requests in flight a plan of `T` transfers takes about ⌈T /
    /// concurrency⌉ rounds, and merged transfers are cut at their widest gaps (of 64 KiB or
    /// more) into as many more transfers as the last round has room for: the same rounds,
    /// fewer bytes.
    #[default]
    Priced,
    /// As `priced`, and no transfer fetches more than twice the bytes its reads ask for
    /// (`max_amplification` at most 2): for a store that bills or meters bytes, or a link
    /// shared with other work. It spends round trips to save bytes: nearly only the bytes
    /// asked, in a few more rounds than `priced`.
    Frugal,
}

/// Which HTTP version the transport speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(
    rename_all = "lowercase",
    expecting = "one of \"http1\", \"auto\", \"http2\""
)]
#[non_exhaustive]
pub enum HttpVersion {
    /// HTTP/1.1 only (the default).
    #[default]
    Http1,
    /// Negotiate with ALPN: HTTP/2 where the server offers it, else HTTP/1.1. Until a
    /// host's first TLS connection has negotiated, the host's other requests wait for it
    /// rather than each opening a connection that HTTP/2 would not need.
    Auto,
    /// HTTP/2 only (prior knowledge over plain TCP, ALPN `h2` over TLS).
    Http2,
}

/// Transport and response-checking options (`[http]`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
#[non_exhaustive]
pub struct HttpSettings {
    /// HTTP version policy (`http.version`: `"http1"`, `"auto"`, `"http2"`; global only).
    pub version: HttpVersion,
    /// Extra PEM file of trusted roots, added to the platform store (`http.ca_file`, env
    /// `KARU_CA_FILE`; global only).
    pub ca_file: Option<PathBuf>,
    /// How long a DNS answer is reused (`http.dns_ttl`; default 60 s; global only).
    pub dns_ttl: Seconds,
    /// Largest prefix Karu discards when a server ignores the range and answers 200
    /// (`http.fallback_limit`; default 8 MiB). Such an answer counts as the whole object only
    /// where it cannot be the range's bytes alone (from a proxy that dropped the `206` and its
    /// `Content-Range`): it holds more bytes than the range, or the range starts at byte 0.
    /// Otherwise the read fails with a protocol error.
    pub fallback_limit: ByteSize,
    /// Largest unwanted remainder drained to keep a connection (`http.drain_limit`;
    /// default 256 KiB).
    pub drain_limit: ByteSize,
    /// Bytes of an error body kept for classification and messages (`http.error_body_limit`;
    /// default 4 KiB).
    pub error_body_limit: ByteSize,
    /// Bound on establishing a connection: name resolution, TCP and the TLS handshake
    /// together; a failure to connect in time counts as a connect failure
    /// (`http.connect_timeout`; default 30 s; above 0).
    pub connect_timeout: Seconds,
    /// An exchange that receives fewer than this many bytes per second over any sliding
    /// window of `low_speed_time` is aborted, waiting for the response included
    /// (`http.low_speed_limit`; 0 disables; default 1,024).
    #[serde(deserialize_with = "integer::deserialize")]
    pub low_speed_limit: u64,
    /// Window of the low-speed check (`http.low_speed_time`; default 60 s).
    pub low_speed_time: Seconds,
    /// A transfer whose span is longer than this is fetched in parts, in parallel on
    /// concurrency that is idle (of every event loop), each landing straight in its
    /// destinations and validated, retried and resumed on its own; every part must come from
    /// the same version of the object (`http.part_size`; default 8 MiB, as aws-c-s3's; 0
    /// never splits; else at least [`MIN_PART_SIZE`](Self::MIN_PART_SIZE)). The first part,
    /// of this size, runs alone and states the object's size; the others are of this size,
    /// as many at once as permits allow, unless the first part arrived at
    /// [`fast_connection`](Self::fast_connection) or faster: then the rest of the transfer
    /// goes in one part per event loop, each a multiple of this size (a 2 GiB read on four
    /// loops: 8 MiB, then four parts of up to 512 MiB).
    pub part_size: ByteSize,
    /// The rate, in bytes per second, from which one connection counts as fast: the rest of
    /// a split transfer whose first part arrived at least this fast (its request's round trip
    /// included, the time its bytes took to write into the destination left out: a fresh
    /// buffer's page faults say nothing of the connection) is fetched in one part per event
    /// loop, since one loop's thread, not the link, is what bounds such a connection, and more
    /// parts would deliver no faster (`http.fast_connection`; default 1,000,000,000, 1 GB/s:
    /// loopback or a store on the same network; 0: no connection is fast, and parts are always
    /// of `http.part_size`, as many at once as permits allow).
    #[serde(deserialize_with = "integer::deserialize")]
    pub fast_connection: u64,
}

impl HttpSettings {
    /// The smallest `http.part_size` other than 0: smaller parts would turn one read into
    /// thousands of requests.
    pub const MIN_PART_SIZE: u64 = 64 << 10;
}

impl Default for HttpSettings {
    fn default() -> Self {
        Self {
            version: HttpVersion::Http1,
            ca_file: None,
            dns_ttl: Seconds(Duration::from_secs(60)),
            fallback_limit: ByteSize(8 << 20),
            drain_limit: ByteSize(256 << 10),
            error_body_limit: ByteSize(4 << 10),
            connect_timeout: Seconds(Duration::from_secs(30)),
            low_speed_limit: 1024,
            low_speed_time: Seconds(Duration::from_secs(60)),
            part_size: ByteSize(8 << 20),
            fast_connection: 1_000_000_000,
        }
    }
}

/// Attempts and the one deadline that covers a logical read (`[retry]`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
#[non_exhaustive]
pub struct RetrySettings {
    /// Attempts per transfer for retryable results (`retry.attempts`; default 8; at least 1).
    #[serde(deserialize_with = "integer::deserialize")]
    pub attempts: u32,
    /// Attempts when name resolution or connecting fails (`retry.connect_attempts`; default 3;
    /// at least 1).
    #[serde(deserialize_with = "integer::deserialize")]
    pub connect_attempts: u32,
    /// Monotonic deadline of one logical read: credentials, requests and waits
    /// (`retry.deadline`; default 120 s; above 0).
    pub deadline: Seconds,
    /// First wait after a failure, before jitter (`retry.initial_backoff`; default 100 ms).
    pub initial_backoff: Seconds,
    /// Longest wait between attempts, before `Retry-After` (`retry.max_backoff`; default 15 s).
    pub max_backoff: Seconds,
}

impl Default for RetrySettings {
    fn default() -> Self {
        Self {
            attempts: 8,
            connect_attempts: 3,
            deadline: Seconds(Duration::from_secs(120)),
            initial_backoff: Seconds(Duration::from_millis(100)),
            max_backoff: Seconds(Duration::from_secs(15)),
        }
    }
}

/// Hedged requests (`[hedge]`): a request of a remote read still waiting for its answer's
/// head after `after` gets a duplicate, prepared and signed afresh and sent on another
/// connection; the first answer whose status and headers pass the response checks is
/// received, the other is cancelled before a byte of its body lands. Duplicates are paid for
/// from a budget that only ordinary requests refill, and none is sent to an endpoint that is
/// throttling or whose requests are failing. Karu's contract (`karu-engine/README.md`,
/// "Hedged requests") has every rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
#[non_exhaustive]
pub struct HedgeSettings {
    /// Whether requests are hedged at all (`hedge.enabled`, env `KARU_HEDGE__ENABLED`;
    /// default true).
    pub enabled: bool,
    /// How long a request waits for its answer's head before it is hedged (`hedge.after`, env
    /// `KARU_HEDGE__AFTER`: `"auto"`, the default, or a duration such as `"200ms"`). See
    /// [`HedgeAfter`].
    pub after: HedgeAfter,
    /// The most duplicates, as a share of the ordinary requests sent to an endpoint
    /// (`hedge.budget`, env `KARU_HEDGE__BUDGET`; default `"5%"`; `"0%"` sends none).
    pub budget: Share,
}

impl Default for HedgeSettings {
    fn default() -> Self {
        Self {
            enabled: true,
            after: HedgeAfter::Auto,
            budget: Share::from_percent(5),
        }
    }
}

/// When a request waiting for its answer is hedged (`hedge.after`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum HedgeAfter {
    /// From what the client measured of the endpoint: the 95th percentile of the time to the
    /// answer's head over its recent answers, at least 1.5 times their median and never below
    /// 50 ms; no hedge before 16 answers have been measured (written `"auto"`).
    #[default]
    Auto,
    /// After this long (written as a duration, such as `"200ms"` or `2`).
    After(Seconds),
}

impl std::fmt::Display for HedgeAfter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            HedgeAfter::Auto => f.write_str("auto"),
            HedgeAfter::After(after) => after.fmt(f),
        }
    }
}

impl Serialize for HedgeAfter {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for HedgeAfter {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(HedgeAfterVisitor)
    }
}

/// Accepts `"auto"` and the forms of [`Seconds`].
struct HedgeAfterVisitor;

impl HedgeAfterVisitor {
    fn seconds<E: serde::de::Error>(
        seconds: Result<Seconds, E>,
        found: serde::de::Unexpected<'_>,
    ) -> Result<HedgeAfter, E> {
        seconds
            .map(HedgeAfter::After)
            .map_err(|_| E::invalid_value(found, &HedgeAfterVisitor))
    }
}

impl serde::de::Visitor<'_> for HedgeAfterVisitor {
    type Value = HedgeAfter;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("\"auto\" or a duration such as \"200ms\" or 2 (seconds)")
    }

    fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<HedgeAfter, E> {
        Ok(HedgeAfter::After(Seconds(Duration::from_secs(v))))
    }

    fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<HedgeAfter, E> {
        let found = serde::de::Unexpected::Signed(v);
        Self::seconds(
            Seconds::deserialize(serde::de::value::I64Deserializer::new(v)),
            found,
        )
    }

    fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<HedgeAfter, E> {
        let found = serde::de::Unexpected::Float(v);
        Self::seconds(
            Seconds::deserialize(serde::de::value::F64Deserializer::new(v)),
            found,
        )
    }

    fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<HedgeAfter, E> {
        if v.trim().eq_ignore_ascii_case("auto") {
            return Ok(HedgeAfter::Auto);
        }
        let found = serde::de::Unexpected::Str(v);
        Self::seconds(
            Seconds::deserialize(serde::de::value::StrDeserializer::new(v)),
            found,
        )
    }
}

#[cfg(test)]
mod tests {
    use serde::de::IntoDeserializer;
    use serde::de::value::Error as PlainError;

    use super::*;

    fn after(text: &str) -> Result<HedgeAfter, String> {
        let de: serde::de::value::StrDeserializer<'_, PlainError> = text.into_deserializer();
        HedgeAfter::deserialize(de).map_err(|e| e.to_string())
    }

    #[test]
    fn hedge_after_is_auto_or_a_duration() {
        assert_eq!(after("auto"), Ok(HedgeAfter::Auto));
        assert_eq!(after(" AUTO "), Ok(HedgeAfter::Auto));
        let ms = |n| Ok(HedgeAfter::After(Seconds(Duration::from_millis(n))));
        assert_eq!(after("200ms"), ms(200));
        assert_eq!(after("2"), ms(2000));
        assert_eq!(after("0.05"), ms(50));
        assert_eq!(
            after("soon"),
            Err(
                "invalid value: string \"soon\", expected \"auto\" or a duration such as \
                 \"200ms\" or 2 (seconds)"
                    .into()
            )
        );
        use serde::de::value::{F64Deserializer, I64Deserializer};
        let from_f64 = |v: f64| HedgeAfter::deserialize(F64Deserializer::<PlainError>::new(v));
        assert_eq!(
            from_f64(0.25),
            Ok(HedgeAfter::After(Seconds(Duration::from_millis(250))))
        );
        assert!(from_f64(-1.0).is_err());
        assert!(HedgeAfter::deserialize(I64Deserializer::<PlainError>::new(-1)).is_err());
        for value in [
            HedgeAfter::Auto,
            HedgeAfter::After(Seconds(Duration::from_millis(250))),
        ] {
            assert_eq!(after(&value.to_string()), Ok(value));
        }
    }

    #[test]
    fn hedging_is_on_by_default_with_a_budget_of_five_percent() {
        let hedge = Settings::default().hedge;
        assert!(hedge.enabled);
        assert_eq!(hedge.after, HedgeAfter::Auto);
        assert_eq!(hedge.budget, Share(50_000));
    }
}
