//! Hedged attempts: a request still waiting for its answer's head when a duplicate is due
//! races its duplicates (the driver around the pure [`crate::hedge`] policy).
//!
//! When the endpoint's policy says a duplicate is due ([`Endpoint::hedge_wait`]), the attempt
//! takes permits like any request (of this loop's share of the client's limit), room in the
//! endpoint's window and a token of its budget ([`Endpoint::try_admit_hedge`]), prepares the
//! request afresh through the backend (signed again) and sends it on another connection
//! ([`Route::Fresh`]); a second duplicate may follow when the first has waited as long
//! ([`MAX_HEDGES`]); a duplicate the endpoint refused (no token, no room, throttling) is
//! asked for again a little later while the request waits. The first answer whose head passes
//! the checks wins: every other request is dropped (cancelled) before a byte of the winner's
//! body lands, and only the winner's body is received, so a destination is written by one
//! answer only. A failure that trying again could fix (a broken connection, a `5xx`) leaves
//! the others racing; any other failure (a refused answer, another version of the object, a
//! missing object) ends the attempt, as it would without duplicates. Everything stays inside
//! the exchange's deadline.
//!
//! Every request of a race tells the endpoint how it ended, as it ends: a failure at once
//! (a `503` cuts the endpoint's window even if another request then wins), a request cancelled
//! because another won as [`Outcome::Lost`] (its wait is a bound of its time to the head that
//! the automatic delay learns from), the winner through the caller.

use std::future::Future;
use std::pin::{Pin, pin};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Instant;

use futures_util::stream::{FuturesUnordered, StreamExt};
use smallvec::SmallVec;
use tokio::time::sleep_until;

use crate::check::Expectation;
use crate::hedge::{HedgePolicy, MAX_HEDGES, Wait};
use crate::http::endpoint::{Admission, Endpoint, Outcome};
use crate::http::exchange::{Exchange, Failure, HeadReceived, Prepare, Route, Success};
use crate::http::landing::Landing;
use crate::http::{LoopCtx, Permits};
use crate::retry::FailureClass;
use crate::sdk::{Error, PreparedRequest};

/// A duplicate's head: its index among the attempt's requests and its result.
type Racer<'x, 'e> =
    Pin<Box<dyn Future<Output = (usize, Result<HeadReceived<'e>, Failure>)> + Send + 'x>>;

/// One attempt that may be hedged.
pub(crate) struct Race<'x, 'e> {
    pub(crate) ctx: &'x LoopCtx,
    pub(crate) exchange: &'x Exchange<'e>,
    pub(crate) endpoint: &'x Arc<Endpoint>,
    pub(crate) policy: HedgePolicy,
    pub(crate) expect: &'x Expectation<'x>,
    /// Prepares the request again for a duplicate (signed again, checked as the original).
    pub(crate) prepare: &'x Prepare<'x>,
}

/// What happened next in a race.
// Handled at once where it is made: boxing a head would cost an allocation per answer.
#[allow(clippy::large_enum_variant)]
enum Event<'e> {
    /// Request `i`'s head was checked (0: the original).
    HeadReceived(usize, Result<HeadReceived<'e>, Failure>),
    /// A duplicate may be due.
    Due,
    /// Permits for a duplicate (`None`: the limit was closed).
    Permits(Option<Permits>),
}

impl<'x, 'e> Race<'x, 'e> {
    /// Run the attempt: `request`, admitted under `admission`, raced by its duplicates when
    /// they are due; the winner's kept bytes land in `dst` from span offset `base`. Returns the
    /// result and the admission of the request it came from (the winner's, or the one whose
    /// failure ended the attempt), for the caller to finish with its outcome; every other
    /// request's admission is finished here.
    pub(crate) async fn run(
        self,
        request: PreparedRequest,
        admission: Admission,
        dst: &mut dyn Landing,
        base: u64,
    ) -> (Result<Success, Failure>, Admission) {
        let exchange = self.exchange;
        // Two steps, so that the heads' futures are gone (and take no room) while the
        // winner's body is received.
        match self.heads(request, admission).await {
            (Ok(head_received), admission) => {
                (exchange.land(head_received, dst, base).await, admission)
            }
            (Err(failure), admission) => (Err(failure), admission),
        }
    }

    /// Race `request`, admitted under `admission`, and its duplicates to the first head that
    /// passes the checks: that head and its admission, or the failure that ended the attempt
    /// and its request's admission. Every other request is cancelled and its admission
    /// finished here.
    async fn heads(
        self,
        request: PreparedRequest,
        admission: Admission,
    ) -> (Result<HeadReceived<'e>, Failure>, Admission) {
        let sent = admission.sent();
        let mut due = next_due(self.endpoint, &self.policy, sent, Instant::now());
        // The timer for the first duplicate polls the original again when it is due: the
        // original needs no timer of its own before then.
        let polled_by = match due {
            Due::At(at) => Some(at),
            Due::Now | Due::Never => None,
        };
        let mut original = pin!(Some(self.exchange.head(
            request,
            self.prepare,
            self.expect,
            Route::Any,
            polled_by,
        )));
        // Most answers come before a duplicate is due: a timer is all they cost.
        loop {
            let at = match due {
                // Due: the race, boxed (rare, and its state is large).
                Due::Now => return Box::pin(self.race(original, admission)).await,
                Due::At(at) => at,
                Due::Never => break,
            };
            let Some(head) = original.as_mut().as_pin_mut() else {
                break;
            };
            tokio::select! {
                biased;
                result = head => return (result, admission),
                () = sleep_until(at.into()) => {}
            }
            due = next_due(self.endpoint, &self.policy, sent, Instant::now());
        }
        match original.as_mut().as_pin_mut() {
            Some(head) => (head.await, admission),
            None => (Err(lost()), admission),
        }
    }

    /// The race of `original` (admitted under `admission`, its first duplicate due now) and
    /// its duplicates (see [`heads`](Self::heads)).
    async fn race<F>(
        self,
        mut original: Pin<&mut Option<F>>,
        admission: Admission,
    ) -> (Result<HeadReceived<'e>, Failure>, Admission)
    where
        F: Future<Output = Result<HeadReceived<'e>, Failure>> + Send,
    {
        let Race {
            ctx,
            exchange,
            endpoint,
            policy,
            expect,
            prepare,
        } = self;
        let mut last_sent = admission.sent();
        let mut admissions: SmallVec<[Option<Admission>; 3]> = SmallVec::new();
        admissions.push(Some(admission));
        let mut racers: FuturesUnordered<Racer<'x, 'e>> = FuturesUnordered::new();
        let mut permits: Option<Pin<Box<dyn Future<Output = Option<Permits>> + Send + 'x>>> =
            Some(Box::pin(ctx.permits()));
        let mut due: Option<Instant> = None;
        // The first failure a retry could fix, kept while the others race on: it speaks for
        // the attempt if they all fail so (its request's admission is already finished).
        let mut failed: Option<Failure> = None;
        loop {
            let event = tokio::select! {
                biased;
                Some(result) = async {
                    match original.as_mut().as_pin_mut() {
                        Some(head) => Some(head.await),
                        None => None,
                    }
                }, if original.is_some() => {
                    original.set(None);
                    Event::HeadReceived(0, result)
                }
                Some((i, result)) = racers.next(), if !racers.is_empty() => Event::HeadReceived(i, result),
                Some(got) = async {
                    match permits.as_mut() {
                        Some(acquiring) => Some(acquiring.await),
                        None => None,
                    }
                }, if permits.is_some() => {
                    permits = None;
                    Event::Permits(got)
                }
                () = async {
                    match due {
                        Some(at) => sleep_until(at.into()).await,
                        None => std::future::pending().await,
                    }
                }, if due.is_some() && permits.is_none() => Event::Due,
            };
            match event {
                Event::HeadReceived(i, Ok(head_received)) => {
                    // The others are cancelled before a byte of the winner lands (the caller
                    // receives its body): they lost.
                    original.set(None);
                    racers.clear();
                    drop(permits.take());
                    let winner = admissions[i].take();
                    lose_the_rest(&mut admissions);
                    if i > 0 {
                        exchange.stats.hedges_won.fetch_add(1, Ordering::Relaxed);
                        tracing::debug!(target: "karu::http", duplicate = i, "a duplicate won");
                    }
                    return (
                        Ok(head_received),
                        winner.unwrap_or_else(Admission::detached),
                    );
                }
                Event::HeadReceived(i, Err(failure)) => {
                    let racing = usize::from(original.is_some()) + racers.len();
                    if racing > 0 && retryable(&failure) {
                        // This request is over, and what it showed of the endpoint counts
                        // now, whoever wins; the others race on.
                        finish(&mut admissions, i, &failure);
                        failed.get_or_insert(failure);
                        continue;
                    }
                    original.set(None);
                    racers.clear();
                    let admission = admissions[i].take();
                    lose_the_rest(&mut admissions);
                    // A failure no retry could fix speaks for the attempt; when every request
                    // failed as a retry could fix, the first one does.
                    return match failed.take() {
                        Some(first) if retryable(&failure) => {
                            if let Some(admission) = admission {
                                admission.finish(outcome_of(&failure));
                            }
                            (Err(first), Admission::detached())
                        }
                        _ => (Err(failure), admission.unwrap_or_else(Admission::detached)),
                    };
                }
                Event::Due => match next_due(endpoint, &policy, last_sent, Instant::now()) {
                    Due::Now => {
                        due = None;
                        permits = Some(Box::pin(ctx.permits()));
                    }
                    Due::At(at) => due = Some(at),
                    Due::Never => due = None,
                },
                Event::Permits(None) => due = None,
                Event::Permits(Some(held)) => {
                    due = None;
                    let admission = match endpoint.try_admit_hedge(&policy) {
                        Ok(admission) => admission,
                        Err(refusal) => {
                            tracing::debug!(
                                target: "karu::http",
                                ?refusal,
                                "a duplicate was refused"
                            );
                            // Asked again while the request waits: a token or room comes
                            // back within a few requests, an endpoint's health later.
                            due = refusal.again().map(|again| Instant::now() + again);
                            continue;
                        }
                    };
                    let request = match prepare() {
                        Ok(request) => request,
                        Err(error) => {
                            tracing::debug!(target: "karu::http", status = %error.status(), "a duplicate could not be prepared");
                            continue;
                        }
                    };
                    last_sent = admission.sent();
                    let i = admissions.len();
                    admissions.push(Some(admission));
                    tracing::debug!(target: "karu::http", duplicate = i, "hedging a waiting request");
                    racers.push(Box::pin(async move {
                        // Held while the duplicate is in flight; the winner lands on the
                        // transfer's own.
                        let _held = held;
                        (
                            i,
                            exchange
                                .head(request, prepare, expect, Route::Fresh, None)
                                .await,
                        )
                    }));
                    // The original's admission and one per duplicate sent.
                    if admissions.len() <= MAX_HEDGES as usize {
                        let now = Instant::now();
                        due = next_due(endpoint, &policy, last_sent, now).timer(now);
                    }
                }
            }
        }
    }
}

/// The failure of an attempt whose original request went missing (a broken invariant).
#[cold]
fn lost() -> Failure {
    Failure::new(
        Error::internal("a hedged attempt lost its original request"),
        FailureClass::Permanent,
    )
}

/// When the next duplicate of a request sent at `sent` is due.
enum Due {
    /// Now (asked at or after the time).
    Now,
    /// At this instant (or, while the delay is unknown, when to ask again).
    At(Instant),
    /// Never: hedging is off.
    Never,
}

impl Due {
    /// When a timer for it fires, set at `now`; `None`: no timer.
    fn timer(self, now: Instant) -> Option<Instant> {
        match self {
            Due::Now => Some(now),
            Due::At(at) => Some(at),
            Due::Never => None,
        }
    }
}

/// When the next duplicate of a request sent at `sent` is due, asked at `now`.
fn next_due(endpoint: &Endpoint, policy: &HedgePolicy, sent: Instant, now: Instant) -> Due {
    match endpoint.hedge_wait(policy) {
        Wait::For(wait) if now >= sent + wait => Due::Now,
        Wait::For(wait) => Due::At(sent + wait),
        Wait::Unknown(again) => Due::At(now + again),
        Wait::Never => Due::Never,
    }
}

/// Finish request `i`'s admission with what its `failure` tells the endpoint.
fn finish(admissions: &mut [Option<Admission>], i: usize, failure: &Failure) {
    if let Some(admission) = admissions[i].take() {
        admission.finish(outcome_of(failure));
    }
}

/// Finish the admissions of the requests still racing, cancelled now: they lost.
fn lose_the_rest(admissions: &mut SmallVec<[Option<Admission>; 3]>) {
    let at = Instant::now();
    for admission in admissions.drain(..).flatten() {
        admission.finish(Outcome::Lost { at });
    }
}

/// Whether trying again could fix what failed a request: then the others race on.
fn retryable(failure: &Failure) -> bool {
    matches!(
        failure.class,
        FailureClass::Connect | FailureClass::Transport | FailureClass::RetryableStatus(_)
    ) && failure.error.status() != crate::sdk::Status::Cancelled
}

/// What an exchange that failed with `failure` tells the endpoint.
pub(crate) fn outcome_of(failure: &Failure) -> Outcome {
    match failure.error.http_status() {
        Some(status) if Outcome::is_throttle(status) => Outcome::Throttled { at: Instant::now() },
        Some(status) if status >= 500 => Outcome::Failed,
        Some(_) => Outcome::Other,
        None if retryable(failure) => Outcome::Failed,
        None => Outcome::Other,
    }
}
