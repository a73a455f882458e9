//! The fault matrix: every fault of the mock server's plan against a single read, a merged
//! transfer with overlapping parts, and a 1,000-read batch.
//!
//! For each combination the suite asserts: the bytes are exact or the read failed with the
//! expected status; the number of requests the server saw is exactly (or at most) the bound;
//! the deadline held; after a successful resume nothing was fetched twice.

use std::time::{Duration, Instant, SystemTime};

use karu::{BatchOptions, Read, Status};

use super::cases::exact;
use super::{Ctx, MockControl, ensure};
use crate::http::{Fault, FaultRule, RequestRecord};

/// Size of the virtual objects the matrix reads.
const OBJECT_SIZE: u64 = 64 << 20;

/// Settings every matrix client uses: short waits and limits so the suite stays fast.
///
/// The low-speed window stays Karu's default (a minute) but in the cases about stalled
/// answers ([`STALLS`]): a one-second window elsewhere would turn a machine too loaded to
/// answer a thousand requests within a second into retries, in cases that count requests
/// exactly.
const SETTINGS: [(&str, &str); 4] = [
    ("retry.initial_backoff", "10ms"),
    ("retry.max_backoff", "100ms"),
    ("retry.deadline", "10s"),
    ("http.fallback_limit", "1MiB"),
];

/// The low-speed check of the cases about stalled answers: under 2 KiB/s for a second.
const STALLS: [(&str, &str); 2] = [
    ("http.low_speed_limit", "2048"),
    ("http.low_speed_time", "1s"),
];

/// The three shapes of work each fault meets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Scenario {
    /// One 64 KiB read.
    Single,
    /// Three reads, two of them overlapping, merged into one transfer.
    Merged,
    /// 1,000 reads of 1,000 bytes that never merge: 1,000 transfers.
    Batch,
}

impl Scenario {
    pub(crate) const ALL: [Scenario; 3] = [Scenario::Single, Scenario::Merged, Scenario::Batch];

    pub(crate) fn name(self) -> &'static str {
        match self {
            Scenario::Single => "single",
            Scenario::Merged => "merged",
            Scenario::Batch => "batch1000",
        }
    }

    fn reads(self) -> Vec<(u64, u64)> {
        match self {
            Scenario::Single => vec![(100_000, 64 << 10)],
            Scenario::Merged => vec![(100_000, 32 << 10), (110_000, 32 << 10), (150_000, 4096)],
            Scenario::Batch => (0..1000u64).map(|i| (i * 1024, 1000)).collect(),
        }
    }

    fn options(self) -> BatchOptions {
        match self {
            Scenario::Batch => BatchOptions::new().max_gap(0),
            _ => BatchOptions::new(),
        }
    }
}

/// What the reads should end with.
#[derive(Debug, Clone, Copy)]
enum Expect {
    /// Every read delivers exact bytes.
    Exact,
    /// Reads whose request met the fault fail with this status; the others are exact.
    Fails(Status),
    /// Every read fails with this status (the fault meets every request).
    AllFail(Status),
    /// Every read fails with the first status, or where the target knew a size the fault
    /// contradicts, with the second.
    AllFailOr(Status, Status),
    /// Reads pinned to the first version: exact, or a precondition failure once it changed.
    PinnedVersion,
}

/// How many requests the server may see beyond one per transfer.
#[derive(Debug, Clone, Copy)]
enum Extra {
    Exactly(usize),
    AtMost(usize),
    /// No request reaches the server.
    None,
}

/// One row of the matrix.
pub(crate) struct FaultCase {
    pub(crate) name: &'static str,
    rules: fn(&str) -> Vec<FaultRule>,
    expect: Expect,
    extra: Extra,
    /// The retry of a faulted transfer must ask only for what was missing.
    resumes: bool,
    /// Reads carry the object's ETag as if-match.
    pinned: bool,
    /// Read through an endpoint that refuses connections.
    refused: bool,
    /// The reads must end within this long (the deadline held).
    within: Option<Duration>,
    /// Extra settings for this row.
    settings: &'static [(&'static str, &'static str)],
    /// The row changes an answer that carries the object's bytes (its body or its range
    /// headers): it does not apply to a server that only redirects (see
    /// [`MockControl::serves_bytes`]).
    on_bytes: bool,
    /// Scenarios this row runs in.
    scenarios: &'static [Scenario],
}

const ALL: &[Scenario] = &Scenario::ALL;
const ONE_TRANSFER: &[Scenario] = &[Scenario::Single, Scenario::Merged];

fn status(code: u16, retry_after: Option<String>) -> Fault {
    Fault::Status { code, retry_after }
}

fn on(path: &str, fault: Fault) -> FaultRule {
    FaultRule::new(fault).path(path).method("GET")
}

/// Every row of the matrix.
pub(crate) const FAULTS: &[FaultCase] = &[
    FaultCase {
        name: "latency",
        rules: |p| vec![on(p, Fault::Latency(Duration::from_millis(30)))],
        expect: Expect::Exact,
        extra: Extra::Exactly(0),
        ..BASE
    },
    FaultCase {
        name: "status_500",
        rules: |p| vec![on(p, status(500, None)).times(2)],
        expect: Expect::Exact,
        extra: Extra::Exactly(2),
        ..BASE
    },
    FaultCase {
        name: "status_503",
        rules: |p| vec![on(p, status(503, None)).times(2)],
        expect: Expect::Exact,
        extra: Extra::Exactly(2),
        ..BASE
    },
    FaultCase {
        name: "status_429_retry_after_seconds",
        rules: |p| vec![on(p, status(429, Some("1".into()))).times(1)],
        expect: Expect::Exact,
        extra: Extra::Exactly(1),
        within: Some(Duration::from_secs(8)),
        ..BASE
    },
    FaultCase {
        name: "status_503_retry_after_date",
        rules: |p| {
            let at = httpdate::fmt_http_date(SystemTime::now() + Duration::from_secs(1));
            vec![on(p, status(503, Some(at))).times(1)]
        },
        expect: Expect::Exact,
        extra: Extra::Exactly(1),
        ..BASE
    },
    FaultCase {
        name: "status_408",
        rules: |p| vec![on(p, status(408, None)).times(1)],
        expect: Expect::Exact,
        extra: Extra::Exactly(1),
        ..BASE
    },
    FaultCase {
        name: "status_425",
        rules: |p| vec![on(p, status(425, None)).times(1)],
        expect: Expect::Exact,
        extra: Extra::Exactly(1),
        ..BASE
    },
    FaultCase {
        name: "reset_mid_body",
        rules: |p| vec![on(p, Fault::ResetAfter(500)).times(1)],
        expect: Expect::Exact,
        extra: Extra::Exactly(1),
        resumes: true,
        on_bytes: true,
        ..BASE
    },
    FaultCase {
        name: "truncated_body",
        rules: |p| vec![on(p, Fault::CutBodyAfter(500)).times(1)],
        expect: Expect::Exact,
        extra: Extra::Exactly(1),
        resumes: true,
        on_bytes: true,
        ..BASE
    },
    FaultCase {
        name: "wrong_content_range",
        rules: |p| vec![on(p, Fault::WrongContentRange { shift: 1 }).times(1)],
        expect: Expect::Fails(Status::Protocol),
        extra: Extra::Exactly(0),
        on_bytes: true,
        ..BASE
    },
    FaultCase {
        name: "missing_content_range",
        rules: |p| vec![on(p, Fault::MissingContentRange).times(1)],
        expect: Expect::Fails(Status::Protocol),
        extra: Extra::Exactly(0),
        on_bytes: true,
        ..BASE
    },
    FaultCase {
        name: "ignored_range_under_fallback_limit",
        rules: |p| vec![on(p, Fault::IgnoreRange).times(1)],
        expect: Expect::Exact,
        extra: Extra::Exactly(0),
        on_bytes: true,
        ..BASE
    },
    FaultCase {
        name: "ignored_range_over_fallback_limit",
        rules: |p| vec![on(p, Fault::IgnoreRange)],
        expect: Expect::AllFail(Status::Protocol),
        extra: Extra::Exactly(0),
        settings: &[("http.fallback_limit", "64KiB")],
        scenarios: ONE_TRANSFER,
        on_bytes: true,
        ..BASE
    },
    FaultCase {
        name: "ok_with_content_range",
        rules: |p| vec![on(p, Fault::OkWithContentRange)],
        expect: Expect::Exact,
        extra: Extra::Exactly(0),
        on_bytes: true,
        ..BASE
    },
    FaultCase {
        name: "ok_with_wrong_content_range",
        rules: |p| {
            vec![
                on(p, Fault::OkWithContentRange).times(1),
                on(p, Fault::WrongContentRange { shift: 1 }).times(1),
            ]
        },
        expect: Expect::Fails(Status::Protocol),
        extra: Extra::Exactly(0),
        on_bytes: true,
        ..BASE
    },
    FaultCase {
        name: "close_delimited_truncated_body",
        rules: |p| {
            vec![
                on(p, Fault::CloseDelimited).times(1),
                on(p, Fault::CutBodyAfter(500)).times(1),
            ]
        },
        expect: Expect::Exact,
        extra: Extra::Exactly(1),
        resumes: true,
        on_bytes: true,
        ..BASE
    },
    FaultCase {
        // The whole object without a length, cut after 120,000 bytes: a clean end to the
        // client, yet not the end of the object (the reads start at 100,000).
        name: "ignored_range_close_delimited_cut",
        rules: |p| {
            vec![
                on(p, Fault::IgnoreRange).times(1),
                on(p, Fault::CloseDelimited).times(1),
                on(p, Fault::CutBodyAfter(120_000)).times(1),
            ]
        },
        expect: Expect::Exact,
        extra: Extra::Exactly(1),
        resumes: true,
        scenarios: ONE_TRANSFER,
        on_bytes: true,
        ..BASE
    },
    FaultCase {
        name: "status_416",
        rules: |p| vec![on(p, status(416, None))],
        // A 416 for a range from byte 0 says the object is empty: a target that learnt its
        // size first refuses the contradiction (the Hub's redirect states `X-Linked-Size`).
        expect: Expect::AllFailOr(Status::RangeNotSatisfiable, Status::Protocol),
        extra: Extra::Exactly(0),
        on_bytes: true,
        ..BASE
    },
    FaultCase {
        name: "gzip_transformation",
        rules: |p| vec![on(p, Fault::Gzip).times(1)],
        expect: Expect::Fails(Status::Protocol),
        extra: Extra::Exactly(0),
        on_bytes: true,
        ..BASE
    },
    FaultCase {
        name: "etag_change_during_resume",
        // The object changes as the cut transfer resumes: the resume is the one request that
        // carries `If-Match` (Karu's saved tag), whatever else of the batch is in flight.
        rules: |p| {
            vec![
                on(p, Fault::CutBodyAfter(500)).times(1),
                on(p, Fault::ChangeEtag).header("if-match").times(1),
            ]
        },
        expect: Expect::Exact,
        extra: Extra::Exactly(2),
        on_bytes: true,
        ..BASE
    },
    FaultCase {
        name: "etag_change_mid_batch",
        rules: |p| vec![on(p, Fault::ChangeEtag).times(1)],
        expect: Expect::PinnedVersion,
        extra: Extra::Exactly(0),
        pinned: true,
        on_bytes: true,
        ..BASE
    },
    FaultCase {
        name: "slow_trickle_below_low_speed_limit",
        rules: |p| {
            vec![
                on(
                    p,
                    Fault::Trickle {
                        chunk: 100,
                        interval: Duration::from_millis(200),
                    },
                )
                .times(1),
            ]
        },
        expect: Expect::Exact,
        extra: Extra::Exactly(1),
        on_bytes: true,
        settings: &STALLS,
        ..BASE
    },
    FaultCase {
        name: "oversized_error_body_retried",
        rules: |p| {
            vec![
                on(
                    p,
                    Fault::OversizedErrorBody {
                        code: 500,
                        size: 1 << 20,
                    },
                )
                .times(2),
            ]
        },
        expect: Expect::Exact,
        extra: Extra::Exactly(2),
        ..BASE
    },
    FaultCase {
        name: "oversized_error_body_permanent",
        rules: |p| {
            vec![on(
                p,
                Fault::OversizedErrorBody {
                    code: 403,
                    size: 1 << 20,
                },
            )]
        },
        expect: Expect::AllFail(Status::PermissionDenied),
        extra: Extra::Exactly(0),
        ..BASE
    },
    FaultCase {
        name: "connection_refused",
        rules: |_| Vec::new(),
        expect: Expect::AllFail(Status::Network),
        extra: Extra::None,
        refused: true,
        ..BASE
    },
    FaultCase {
        name: "never_answers",
        rules: |p| vec![on(p, Fault::NeverAnswer)],
        expect: Expect::AllFail(Status::TimedOut),
        extra: Extra::AtMost(4),
        settings: &[STALLS[0], STALLS[1], ("retry.deadline", "3s")],
        within: Some(Duration::from_secs(5)),
        scenarios: ONE_TRANSFER,
        ..BASE
    },
    FaultCase {
        name: "never_answers_then_recovers",
        rules: |p| vec![on(p, Fault::NeverAnswer).times(3)],
        expect: Expect::Exact,
        extra: Extra::Exactly(3),
        settings: &STALLS,
        ..BASE
    },
];

const BASE: FaultCase = FaultCase {
    name: "",
    rules: |_| Vec::new(),
    expect: Expect::Exact,
    extra: Extra::Exactly(0),
    resumes: false,
    pinned: false,
    refused: false,
    within: None,
    settings: &[],
    on_bytes: false,
    scenarios: ALL,
};

impl FaultCase {
    pub(crate) fn applies(&self, scenario: Scenario) -> bool {
        self.scenarios.contains(&scenario)
    }

    /// Whether the row applies to a target's faulted server.
    pub(crate) fn applies_to(&self, mock: &dyn MockControl) -> bool {
        mock.serves_bytes() || !self.on_bytes
    }
}

/// Run one row in one scenario.
pub(crate) fn run(ctx: &Ctx<'_>, fault: &FaultCase, scenario: Scenario) -> Result<String, String> {
    let mock = ctx
        .target
        .mock()
        .ok_or("the fault matrix needs a mock target")?;
    let name = format!("fault-{}-{}.bin", fault.name, scenario.name());
    mock.put_virtual(&name, OBJECT_SIZE);
    let path = mock.path_of(&name);
    let mut settings: Vec<(&str, &str)> = SETTINGS.to_vec();
    settings.extend_from_slice(fault.settings);
    let (client, address) = if fault.refused {
        let (mut builder, address) = mock.refusing(&name);
        for (k, v) in &settings {
            builder = builder.set(k, *v);
        }
        (builder.build().map_err(|e| e.to_string())?, address)
    } else {
        (ctx.client(&settings)?, ctx.target.address(&name))
    };
    let object = client.locate(&address).map_err(|e| e.to_string())?;
    let etag = if fault.pinned {
        let info = client.stat(&object).map_err(|e| e.to_string())?;
        Some(info.etag.ok_or("the mock sends no strong ETag")?)
    } else {
        None
    };
    mock.server().take_requests();
    for rule in (fault.rules)(&path) {
        mock.server().add_fault(rule);
    }

    let reads = scenario.reads();
    let started = Instant::now();
    let batch = client.submit_with(
        reads.iter().map(|&(offset, length)| {
            let read = Read::new(&object, offset, length);
            match &etag {
                Some(tag) => read.if_match(tag.clone()),
                None => read,
            }
        }),
        &scenario.options(),
    );
    let done = batch.wait();
    let elapsed = started.elapsed();
    let transfers = batch.stats().transfers;
    let log: Vec<RequestRecord> = mock
        .server()
        .requests()
        .into_iter()
        .filter(|r| r.method == "GET" && r.path == path)
        .collect();

    // Outcomes.
    let faulted = |offset: u64, length: u64| {
        log.iter().any(|r| {
            r.fault.is_some()
                && r.byte_range
                    .is_some_and(|(a, b)| a <= offset && offset + length - 1 <= b)
        })
    };
    let mut failed = 0usize;
    for (c, &(offset, length)) in done.iter().zip(&reads) {
        match fault.expect {
            Expect::Exact => exact(c, offset, length)?,
            Expect::AllFail(status) => {
                ensure!(
                    c.status() == status && c.bytes_received() == 0,
                    "read at {offset} got {} ({} bytes), expected {status}",
                    c.status(),
                    c.bytes_received()
                );
                failed += 1;
            }
            Expect::AllFailOr(status, or) => {
                ensure!(
                    (c.status() == status || c.status() == or) && c.bytes_received() == 0,
                    "read at {offset} got {} ({} bytes), expected {status} or {or}",
                    c.status(),
                    c.bytes_received()
                );
                failed += 1;
            }
            Expect::Fails(status) if faulted(offset, length) => {
                ensure!(
                    c.status() == status,
                    "faulted read at {offset} got {}, expected {status}",
                    c.status()
                );
                failed += 1;
            }
            Expect::Fails(_) => exact(c, offset, length)?,
            Expect::PinnedVersion => {
                if c.status() == Status::PreconditionFailed {
                    failed += 1;
                } else {
                    exact(c, offset, length)?;
                }
            }
        }
        if let Some(error) = c.error() {
            ensure!(
                error.message().len() <= 600,
                "an error message is {} bytes long; messages must stay short",
                error.message().len()
            );
        }
    }
    if matches!(fault.expect, Expect::Fails(_) | Expect::PinnedVersion) {
        ensure!(failed >= 1, "no read met the fault");
    }

    // Requests: one per transfer plus the bound, and the duplicates hedging sent of requests
    // still waiting (a loaded machine can keep a request waiting past the automatic delay); a
    // duplicate cancelled before it was written never reached the server.
    let hedges = usize::try_from(batch.stats().hedges).unwrap_or(usize::MAX);
    let sent = |n: usize| {
        if hedges == 0 {
            format!("{}", transfers + n)
        } else {
            format!("{}, and up to {hedges} duplicates", transfers + n)
        }
    };
    match fault.extra {
        Extra::Exactly(n) => ensure!(
            (transfers + n..=transfers + n + hedges).contains(&log.len()),
            "the server saw {} requests for {transfers} transfers; expected {}",
            log.len(),
            sent(n)
        ),
        Extra::AtMost(n) => ensure!(
            log.len() <= transfers + n + hedges && log.len() >= transfers,
            "the server saw {} requests for {transfers} transfers; expected at most {}",
            log.len(),
            sent(n)
        ),
        Extra::None => ensure!(log.is_empty(), "requests reached a refusing endpoint"),
    }

    // After a successful resume, nothing was fetched twice.
    if fault.resumes {
        check_resumes(&log)?;
    }
    if let Some(within) = fault.within {
        ensure!(
            elapsed <= within,
            "the reads took {elapsed:?}, beyond the {within:?} the deadline allows"
        );
    }
    let duplicates = if hedges == 0 {
        String::new()
    } else {
        format!(" ({hedges} duplicates sent)")
    };
    Ok(format!(
        "{} reads, {transfers} transfers, {} requests{duplicates}, {failed} failed as expected",
        reads.len(),
        log.len()
    ))
}

/// Every retry of a faulted request asks only for the bytes after those already received:
/// same last byte, a later first byte, and the saved ETag as `If-Match`.
fn check_resumes(log: &[RequestRecord]) -> Result<(), String> {
    let mut resumed = 0;
    for faulted in log.iter().filter(|r| r.fault.is_some()) {
        let Some((first, last)) = faulted.byte_range else {
            continue;
        };
        let retry = log.iter().find(|r| {
            r.fault.is_none()
                && r.byte_range
                    .is_some_and(|(a, b)| b == last && a > first && a <= last)
        });
        let Some(retry) = retry else {
            return Err(format!(
                "the retry of bytes={first}-{last} did not resume from the bytes already received"
            ));
        };
        ensure!(
            retry.header("if-match").is_some(),
            "the resumed request for bytes={first}-{last} carried no If-Match"
        );
        ensure!(
            !log.iter()
                .any(|r| r.fault.is_none() && r.byte_range == Some((first, last))),
            "bytes={first}-{last} was fetched again in full after a resume"
        );
        resumed += 1;
    }
    ensure!(resumed >= 1, "no request was resumed");
    Ok(())
}
