//! Credential workers: the threads where lookups block, so event loops never do.
//!
//! A remote read that needs a credential asks the scoped cache first ([`CredentialWorkers::begin`],
//! non-blocking). A fresh cached value sends it straight on to an event loop. Otherwise the
//! read waits, as a task without a concurrency permit, for the flight that will bring its
//! credential ([`CredentialWorkers::finish`]): one it joined, or one it started, whose
//! lookup (provider or application callback) runs here on a worker thread. Waiting is bounded
//! by the read's deadline and ended by its batch's cancellation, so a lookup that hangs fails
//! its reads with [`Status::TimedOut`] instead of holding them, and a lookup that panics
//! fails them with [`Status::Credentials`]. A read that must re-authenticate mid-transfer goes
//! the same way.
//!
//! [`Status::TimedOut`]: crate::sdk::status::Status::TimedOut
//! [`Status::Credentials`]: crate::sdk::status::Status::Credentials

use std::sync::Arc;
use std::time::Instant;

use crossbeam_channel::{Receiver, Sender};

use crate::batch::{BatchShared, released, until_cancelled};
use crate::credentials::{
    Authority, CredentialCache, Flight, FlightOwner, Step, as_credentials_error, waited_too_long,
};
use crate::sdk::token::TokenClient;
use crate::sdk::{Credential, Error, FetchContext};
use crate::workers::Workers;

/// A lookup to run: the flight's owner, how to look up, and what the provider is told: the
/// deadline of the read that started it (so it can bound its own input and output) and the
/// client's token client.
struct Job {
    owner: FlightOwner,
    authority: Authority,
    ctx: FetchContext,
}

/// Where a request for a credential stands after [`CredentialWorkers::begin`].
#[must_use]
pub(crate) enum Pending {
    /// The credential, from the cache.
    Ready(Credential),
    /// Wait for this flight, then do as `then` says.
    Wait { flight: Arc<Flight>, then: Then },
}

/// What a request does once the flight it waits for lands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Then {
    /// Take its result: the request started this lookup.
    Own,
    /// Take its result: another request of the same native scope started it.
    Share,
    /// Look again: it was another path's callback call, whose prefix may or may not cover
    /// this path.
    LookAgain,
}

/// The lookups' worker threads, started with the first lookup (see [`Workers`]).
pub(crate) struct CredentialWorkers {
    cache: CredentialCache,
    /// The client's token client, handed to every lookup.
    tokens: Arc<dyn TokenClient>,
    sender: Option<Sender<Job>>,
    workers: Workers<Job>,
}

impl CredentialWorkers {
    /// Workers for `count` lookups at once, started when the first lookup needs one; their
    /// lookups send token exchanges with `tokens`.
    pub(crate) fn new(count: usize, cache: CredentialCache, tokens: Arc<dyn TokenClient>) -> Self {
        let (sender, receiver) = crossbeam_channel::unbounded::<Job>();
        CredentialWorkers {
            cache,
            tokens,
            sender: Some(sender),
            workers: Workers::new("karu-cred", count, receiver, work),
        }
    }

    /// Where a request for `authority`'s credential stands, without blocking: cached, or
    /// waiting for a flight (joined, or started now on a worker, for a read that must end by
    /// `deadline`). `may_join` is false for a callback request that already waited for
    /// another path's call.
    pub(crate) fn begin(
        &self,
        authority: &Authority,
        may_join: bool,
        deadline: Instant,
    ) -> Pending {
        match authority.begin(&self.cache, may_join) {
            Step::Ready(credential) => Pending::Ready(credential),
            Step::Join(flight) => Pending::Wait {
                flight,
                then: if authority.shares_flights() {
                    Then::Share
                } else {
                    Then::LookAgain
                },
            },
            Step::Fly(owner) => {
                let flight = owner.flight();
                let job = Job {
                    owner,
                    authority: authority.clone(),
                    ctx: FetchContext::new(Some(deadline))
                        .with_token_client(Arc::clone(&self.tokens)),
                };
                // If the workers have stopped, the job drops its owner, which lands the flight
                // as a failure; if none could start, the flight fails with why.
                if let Some(sender) = &self.sender {
                    match self.workers.start() {
                        Ok(()) => {
                            let _ = sender.send(job);
                        }
                        Err(e) => job.owner.fail(e),
                    }
                }
                Pending::Wait {
                    flight,
                    then: Then::Own,
                }
            }
        }
    }

    /// The credential for `authority`, from where [`begin`](CredentialWorkers::begin) left the
    /// request: waits for its flight until `deadline` ([`Status::TimedOut`](crate::sdk::Status::TimedOut)) or until `cancel`
    /// is cancelled. Errors are [`Status::Credentials`](crate::sdk::Status::Credentials) (or the timeout, or the cancellation).
    pub(crate) async fn finish(
        &self,
        authority: &Authority,
        mut pending: Pending,
        deadline: Instant,
        cancel: Option<&BatchShared>,
    ) -> Result<Credential, Error> {
        loop {
            let (flight, then) = match pending {
                Pending::Ready(credential) => return Ok(credential),
                Pending::Wait { flight, then } => (flight, then),
            };
            let landed = tokio::select! {
                biased;
                () = until_cancelled(cancel) => return Err(released()),
                result = flight.landed() => result,
                () = tokio::time::sleep_until(deadline.into()) => {
                    return Err(waited_too_long(authority.family()));
                }
            };
            match then {
                Then::Own => return landed.map_err(as_credentials_error),
                Then::Share => {
                    let credential = landed.map_err(as_credentials_error)?;
                    self.cache.served_by_flight();
                    return Ok(credential);
                }
                // Another path's call landed: its prefix may now cover this path; if not,
                // this request calls for itself (it waits for another call at most once).
                Then::LookAgain => pending = self.begin(authority, false, deadline),
            }
        }
    }

    /// Forget `stale`, then obtain a fresh credential as [`finish`](CredentialWorkers::finish)
    /// does (re-authentication after an expired-credential answer, or a probe's first lookup).
    pub(crate) async fn obtain(
        &self,
        authority: &Authority,
        stale: Option<&Credential>,
        deadline: Instant,
        cancel: Option<&BatchShared>,
    ) -> Result<Credential, Error> {
        if let Some(stale) = stale {
            authority.invalidate(&self.cache, stale);
        }
        let pending = self.begin(authority, true, deadline);
        self.finish(authority, pending, deadline, cancel).await
    }
}

impl Drop for CredentialWorkers {
    fn drop(&mut self) {
        // Closing the queue lets each worker exit after its current lookup. They are not
        // joined: a lookup that never returns must not hang the client's drop (a worker owns
        // nothing but its lookup).
        self.sender = None;
        self.workers.take();
    }
}

fn work(receiver: &Receiver<Job>) {
    while let Ok(Job {
        owner,
        authority,
        ctx,
    }) = receiver.recv()
    {
        // `fly` turns a panicking provider into a failure; anything else that unwinds drops
        // the owner, which lands the flight as a failure too. Either way the worker goes on.
        let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            owner.fly(authority.call(), &ctx)
        }));
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use parking_lot::Mutex;

    use super::*;
    use crate::sdk::token::{SendFuture, TokenRequest};
    use crate::sdk::{CredentialProvider, CredentialScope, CredentialSource};

    /// A provider that records the deadline each lookup is told, and whether it was given a
    /// token client.
    #[derive(Debug, Default)]
    struct Records(Mutex<Vec<(Option<Instant>, bool)>>);
    impl CredentialProvider for Records {
        fn fetch(&self, ctx: &FetchContext) -> Result<Credential, Error> {
            self.0
                .lock()
                .push((ctx.deadline(), ctx.token_client().is_some()));
            Ok(Credential::new(()))
        }
    }

    /// A token client that is never used.
    #[derive(Debug)]
    struct Unused;
    impl TokenClient for Unused {
        fn send(&self, _request: TokenRequest) -> SendFuture<'_> {
            Box::pin(async { Err("unused".into()) })
        }
    }

    #[test]
    fn a_lookup_is_told_the_deadline_of_the_read_that_started_it() {
        let provider = Arc::new(Records::default());
        let authority = Authority::Native(CredentialSource {
            scope: CredentialScope::new("test", Vec::new()),
            provider: Arc::clone(&provider) as Arc<dyn CredentialProvider>,
        });
        let workers = CredentialWorkers::new(2, CredentialCache::new(), Arc::new(Unused));
        assert_eq!(workers.workers.running(), 0, "no worker before a lookup");
        let deadline = Instant::now() + Duration::from_secs(7);
        let Pending::Wait { flight, then } = workers.begin(&authority, true, deadline) else {
            panic!("a cold scope is looked up");
        };
        assert_eq!(then, Then::Own);
        assert_eq!(workers.workers.running(), 2, "the first lookup starts them");
        assert!(flight.wait_until(None).expect("landed").is_ok());
        assert_eq!(*provider.0.lock(), vec![(Some(deadline), true)]);
        // A second request finds it cached: no lookup, whatever its deadline.
        let later = deadline + Duration::from_secs(1);
        assert!(matches!(
            workers.begin(&authority, true, later),
            Pending::Ready(_)
        ));
        assert_eq!(provider.0.lock().len(), 1);
    }
}
