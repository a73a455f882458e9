//! The provider-agnostic conformance suite: the same cases for every provider, against its
//! mock server (with the fault matrix) or against a real endpoint.
//!
//! A provider crate (Karu's own or a third party's) describes how to reach its store with a
//! [`Target`] and calls [`run`]; the [`Report`] says which case failed and why:
//!
//! ```no_run
//! use karu_testkit::conformance::{self, HttpMockTarget, Options};
//! let target = HttpMockTarget::start();
//! let report = conformance::run(&target, &Options::default());
//! report.assert_passed();
//! ```
//!
//! Every case asserts evidence: the exact bytes delivered, each read's status and, for mock
//! targets, the requests the server saw (which ranges, how many, nothing fetched twice).
//!
//! The basic cases run everywhere: single, merged, overlapping, windowed and end-of-object
//! reads, stat, read_ends, if-match, missing and empty objects. The fault matrix runs where the
//! target is a mock ([`Target::mock`]): every fault of the mock server's plan against a single
//! read, a merged transfer with overlapping parts, and a 1,000-read batch. The random cases
//! (`random/...`) run on every target: random batches with random settings, on a mock against
//! random faults while an object is replaced by another version, each read checked for exact
//! bytes of one version, no false end of object, and nothing delivered by a failure
//! ([`Options::seeds`] says which).
//!
//! Stores the suite cannot upload to (the Hugging Face Hub, Source Cooperative) get the
//! read-only suite instead ([`run_read_only`]): objects the user names, each read through Karu
//! and checked against a reference taken without Karu (a stated SHA-256, or a plain `GET`).

mod cases;
mod faults;
mod random;
mod readonly;
mod targets;

use std::cell::Cell;
use std::fmt;
use std::time::{Duration, Instant};

use karu::{Client, ClientBuilder};

use crate::http::MockServer;

pub use readonly::{
    HfEndpointTarget, MAX_WHOLE, Objects, ReadOnlyTarget, Reference, SourceEndpointTarget,
    run_read_only,
};
pub use targets::{
    AzureAuth, AzureEndpointTarget, AzureMockTarget, AzuriteTarget, GcsMockTarget, GcsTarget,
    HfHubTarget, HfMockTarget, HttpMockTarget, LocalTarget, MockTarget, NginxTarget, S3MockTarget,
    S3Target, SourceMockTarget, isolated_builder,
};

/// A store under test: how to reach it and how to put objects in it.
pub trait Target: Send + Sync {
    /// A short name for reports (`"http-mock"`, `"s3-mock"`, `"seaweedfs"`).
    fn name(&self) -> String;

    /// A client builder that reaches the target (endpoint, credentials, trusted CA) and reads
    /// no configuration or environment of the machine; the suite adds its own options.
    fn builder(&self) -> ClientBuilder;

    /// The address of the object `name` (e.g. `s3://bucket/name`; in an HTTP URL, the name
    /// percent-encoded). Names may hold spaces, reserved and non-ASCII characters.
    fn address(&self, name: &str) -> String;

    /// Store an object under `name` (a real endpoint uploads it).
    fn put(&self, name: &str, bytes: &[u8]) -> Result<(), String>;

    /// The fault plan and request log, for mock targets.
    fn mock(&self) -> Option<&dyn MockControl> {
        None
    }

    /// Cases this server cannot pass, and why: a listed case that fails with an error
    /// containing [`KnownLimit::failure`] is reported as the server's limit, not Karu's
    /// ([`CaseResult::known_limit`]); failing any other way still fails. Default: none.
    fn known_limits(&self) -> Vec<KnownLimit> {
        Vec::new()
    }
}

/// A case a real server cannot pass (see [`Target::known_limits`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KnownLimit {
    /// The case's name (`basic/empty_object`).
    pub case: &'static str,
    /// What the server does.
    pub why: &'static str,
    /// Text of the one failure this limit explains.
    pub failure: &'static str,
}

/// What a mock target adds: faults, the request log, free virtual objects.
pub trait MockControl: Send + Sync {
    /// The server with the fault plan and the request log.
    fn server(&self) -> &MockServer;

    /// The request path the server sees for object `name` (for fault rules and the log).
    fn path_of(&self, name: &str) -> String;

    /// Store a virtual object of `size` bytes (`pattern` bytes, never allocated).
    fn put_virtual(&self, name: &str, size: u64);

    /// Set the ETag the server sends for `name` (`None` = no ETag header).
    fn set_etag(&self, name: &str, etag: Option<&str>);

    /// A builder whose endpoint refuses connections, and the address of `name` through it.
    fn refusing(&self, name: &str) -> (ClientBuilder, String);

    /// Whether the faulted server answers reads with the object's bytes. A resolve endpoint
    /// that answers with redirects (the Hugging Face Hub) does not: the rows that change an
    /// answer's bytes or range headers do not apply to it, every other row does.
    fn serves_bytes(&self) -> bool {
        true
    }
}

/// Which random cases run: those of the seeds `first..first + count` (a case is a function of
/// its seed; a failure names it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Seeds {
    /// The first seed.
    pub first: u64,
    /// How many cases (0: none).
    pub count: u64,
}

impl Default for Seeds {
    /// Seeds 1 to 200.
    fn default() -> Self {
        Seeds {
            first: 1,
            count: 200,
        }
    }
}

/// What to run.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct Options {
    /// Run only cases whose name contains this.
    pub filter: Option<String>,
    /// Skip the fault matrix even on a mock target.
    pub skip_faults: bool,
    /// Skip cases whose name contains one of these (a real server's documented deviation, such
    /// as a store without empty objects).
    pub skip: Vec<String>,
    /// The random cases: on a mock target with its faults and a replaced object, on any other
    /// without them (not with [`skip_faults`](Options::skip_faults)).
    pub seeds: Seeds,
}

impl Options {
    /// Whether the case named `name` runs: it matches the filter, if any, and no skip.
    pub(crate) fn wants(&self, name: &str) -> bool {
        self.filter
            .as_ref()
            .is_none_or(|f| name.contains(f.as_str()))
            && !self.skip.iter().any(|s| name.contains(s.as_str()))
    }

    /// Only cases whose name contains `filter`.
    pub fn filter(mut self, filter: impl Into<String>) -> Self {
        self.filter = Some(filter.into());
        self
    }

    /// Skip cases whose name contains `name`.
    pub fn skip(mut self, name: impl Into<String>) -> Self {
        self.skip.push(name.into());
        self
    }

    /// Skip the fault matrix (and the random cases).
    pub fn skip_faults(mut self) -> Self {
        self.skip_faults = true;
        self
    }

    /// The random cases of seeds `first..first + count`.
    pub fn seeds(mut self, first: u64, count: u64) -> Self {
        self.seeds = Seeds { first, count };
        self
    }

    /// The random cases `CHAOS_SEED` (the first seed) and `CHAOS_CASES` (how many) name in the
    /// process environment, where set: a test run explores further with them, e.g.
    /// `CHAOS_SEED=5000 CHAOS_CASES=2000 cargo test -p karu-provider-s3 --test conformance`.
    ///
    /// # Panics
    ///
    /// If either is set to something other than a number.
    pub fn seeds_from_env(mut self) -> Self {
        let number = |name: &str| {
            std::env::var(name).ok().map(|v| {
                v.parse::<u64>()
                    .unwrap_or_else(|_| panic!("{name} must be a number, found {v:?}"))
            })
        };
        if let Some(first) = number("CHAOS_SEED") {
            self.seeds.first = first;
        }
        if let Some(count) = number("CHAOS_CASES") {
            self.seeds.count = count;
        }
        self
    }
}

/// The outcome of one case.
#[derive(Debug, Clone)]
pub struct CaseResult {
    /// The case's name (`basic/merged`, `fault/reset_mid_body/batch1000`).
    pub name: String,
    /// `Ok(evidence)` or `Err(what went wrong)`.
    pub outcome: Result<String, String>,
    /// Requests the mock server saw (0 for real endpoints).
    pub requests: usize,
    /// How long the case took.
    pub elapsed: Duration,
    /// Set when the case failed only by a [known limit](Target::known_limits) of the server:
    /// what the server does (the outcome is then `Ok` with the failure as evidence).
    pub known_limit: Option<String>,
}

/// The outcome of a run.
#[derive(Debug, Clone)]
pub struct Report {
    /// The target's name.
    pub target: String,
    /// Every case run, in order.
    pub cases: Vec<CaseResult>,
}

impl Report {
    /// Whether every case passed.
    pub fn passed(&self) -> bool {
        self.cases.iter().all(|c| c.outcome.is_ok())
    }

    /// The failed cases.
    pub fn failures(&self) -> Vec<&CaseResult> {
        self.cases.iter().filter(|c| c.outcome.is_err()).collect()
    }

    /// Panic with every failure if any case failed (for tests).
    #[track_caller]
    pub fn assert_passed(&self) {
        if !self.passed() {
            panic!("conformance failures:\n{self}");
        }
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "conformance of {}: {} of {} cases passed",
            self.target,
            self.cases.iter().filter(|c| c.outcome.is_ok()).count(),
            self.cases.len()
        )?;
        for c in &self.cases {
            let (mark, text) = match &c.outcome {
                Ok(evidence) if c.known_limit.is_some() => ("lim ", evidence.as_str()),
                Ok(evidence) => ("ok  ", evidence.as_str()),
                Err(why) => ("FAIL", why.as_str()),
            };
            writeln!(
                f,
                "{mark} {:<44} {:>5} req {:>7.0} ms  {text}",
                c.name,
                c.requests,
                c.elapsed.as_secs_f64() * 1000.0
            )?;
        }
        Ok(())
    }
}

/// Run the suite against `target`.
pub fn run(target: &dyn Target, options: &Options) -> Report {
    let mut report = Report {
        target: target.name(),
        cases: Vec::new(),
    };
    let ctx = Ctx {
        target,
        requests: Cell::new(0),
    };
    let wanted = |name: &str| options.wants(name);
    for (name, case) in cases::CASES {
        let name = format!("basic/{name}");
        if wanted(&name) {
            report.cases.push(ctx.run_case(name, case));
        }
    }
    if let (Some(mock), false) = (target.mock(), options.skip_faults) {
        for fault in faults::FAULTS.iter().filter(|f| f.applies_to(mock)) {
            for scenario in faults::Scenario::ALL
                .into_iter()
                .filter(|&s| fault.applies(s))
            {
                let name = format!("fault/{}/{}", fault.name, scenario.name());
                if wanted(&name) {
                    report
                        .cases
                        .push(ctx.run_case(name, |ctx| faults::run(ctx, fault, scenario)));
                }
            }
        }
    }
    // The random cases: on a mock with its faults, on any other target without (on a mock that
    // does not serve the bytes, a redirect, not at all).
    let Seeds { first, count } = options.seeds;
    let last = first.saturating_add(count.saturating_sub(1));
    let name = format!("random/seeds_{first}_to_{last}");
    let serves = target.mock().is_none_or(|m| m.serves_bytes());
    if serves && !options.skip_faults && count > 0 && wanted(&name) {
        report
            .cases
            .push(ctx.run_case(name, |ctx| random::run(ctx, options.seeds)));
    }
    report
}

/// What a case sees.
pub(crate) struct Ctx<'a> {
    pub(crate) target: &'a dyn Target,
    /// Requests of the mock's log a case took itself (the random cases take a log per case).
    requests: Cell<usize>,
}

impl Ctx<'_> {
    fn run_case(
        &self,
        name: String,
        case: impl FnOnce(&Ctx<'_>) -> Result<String, String>,
    ) -> CaseResult {
        if let Some(mock) = self.target.mock() {
            mock.server().clear_faults();
            mock.server().take_requests();
        }
        self.requests.set(0);
        let started = Instant::now();
        let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| case(self)))
            .unwrap_or_else(|panic| {
                let text = panic
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_else(|| "panic".to_string());
                Err(format!("panicked: {text}"))
            });
        let elapsed = started.elapsed();
        let requests = self.requests.get()
            + self
                .target
                .mock()
                .map_or(0, |m| m.server().take_requests().len());
        if let Some(mock) = self.target.mock() {
            mock.server().clear_faults();
        }
        let limit = self
            .target
            .known_limits()
            .into_iter()
            .find(|l| l.case == name && outcome.as_ref().is_err_and(|e| e.contains(l.failure)));
        let (outcome, known_limit) = match limit {
            Some(limit) => (
                Ok(format!(
                    "known limit of {}: {} ({})",
                    self.target.name(),
                    limit.why,
                    outcome.err().unwrap_or_default()
                )),
                Some(limit.why.to_string()),
            ),
            None => (outcome, None),
        };
        CaseResult {
            name,
            outcome,
            requests,
            elapsed,
            known_limit,
        }
    }

    /// Count `n` requests the case took from the mock's log itself towards its own.
    pub(crate) fn took_requests(&self, n: usize) {
        self.requests.set(self.requests.get() + n);
    }

    /// A client reaching the target with the suite's settings on top.
    pub(crate) fn client(&self, settings: &[(&str, &str)]) -> Result<Client, String> {
        let mut builder = self.target.builder();
        for (key, value) in settings {
            builder = builder.set(key, *value);
        }
        builder
            .build()
            .map_err(|e| format!("cannot build a client: {e}"))
    }
}

/// Fail a case with a formatted message unless `cond` holds.
macro_rules! ensure {
    ($cond:expr, $($arg:tt)+) => {
        if !$cond {
            return Err(format!($($arg)+));
        }
    };
}
pub(crate) use ensure;
