//! Credential workers: the threads where lookups block, so event loops never do.
//!
//! A cloud transfer enters this queue first; a worker obtains its credential (from the
//! scoped cache, or by one shared lookup) and hands the transfer on to an event loop. A
//! transfer that must re-authenticate mid-read asks a worker too and awaits the answer.

use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Instant;

use crossbeam_channel::{Receiver, Sender};
use tokio::sync::oneshot;

use crate::credential::{Authority, Credential, CredentialCache};
use crate::status::{Error, Status};
use crate::transfer::Transfer;

/// Where a worker hands a transfer once it has its credential.
pub(crate) type Handoff = Arc<dyn Fn(Transfer) + Send + Sync>;

enum Job {
    /// Obtain the transfer's credential, then hand it to an event loop.
    Route {
        transfer: Box<Transfer>,
        authority: Box<Authority>,
    },
    /// Obtain a credential (after forgetting `stale`) and reply.
    Lookup {
        authority: Box<Authority>,
        stale: Option<Credential>,
        reply: oneshot::Sender<Result<Credential, Error>>,
    },
}

pub(crate) struct CredentialWorkers {
    sender: Option<Sender<Job>>,
    threads: Vec<JoinHandle<()>>,
}

impl CredentialWorkers {
    pub(crate) fn start(
        count: usize,
        cache: Arc<CredentialCache>,
        handoff: Handoff,
    ) -> Result<Self, Error> {
        let (sender, receiver) = crossbeam_channel::unbounded::<Job>();
        let threads = (0..count.max(1))
            .map(|i| {
                let receiver = receiver.clone();
                let cache = Arc::clone(&cache);
                let handoff = Arc::clone(&handoff);
                std::thread::Builder::new()
                    .name(format!("karu-cred-{i}"))
                    .spawn(move || work(&receiver, &cache, &handoff))
                    .map_err(|e| {
                        Error::new(
                            Status::Io,
                            format!("cannot start a credential worker thread: {e}"),
                        )
                    })
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(CredentialWorkers {
            sender: Some(sender),
            threads,
        })
    }

    /// Queue a transfer for its credential.
    pub(crate) fn route(&self, transfer: Transfer, authority: Authority) {
        let job = Job::Route {
            transfer: Box::new(transfer),
            authority: Box::new(authority),
        };
        if let Some(Err(returned)) = self.sender.as_ref().map(|s| s.send(job))
            && let Job::Route { transfer, .. } = returned.0
        {
            transfer.fail(&Error::internal("the credential workers have stopped"));
        }
    }

    /// Obtain a credential on a worker, forgetting `stale` first; awaitable from an event
    /// loop without blocking it.
    pub(crate) async fn lookup(
        &self,
        authority: Authority,
        stale: Option<Credential>,
    ) -> Result<Credential, Error> {
        let (reply, answer) = oneshot::channel();
        let job = Job::Lookup {
            authority: Box::new(authority),
            stale,
            reply,
        };
        let sent = self.sender.as_ref().is_some_and(|s| s.send(job).is_ok());
        if !sent {
            return Err(Error::internal("the credential workers have stopped"));
        }
        answer
            .await
            .unwrap_or_else(|_| Err(Error::internal("a credential worker dropped a lookup")))
    }
}

impl Drop for CredentialWorkers {
    fn drop(&mut self) {
        self.sender = None;
        let me = std::thread::current().id();
        for t in self.threads.drain(..) {
            if t.thread().id() != me {
                let _ = t.join();
            }
        }
    }
}

fn work(receiver: &Receiver<Job>, cache: &CredentialCache, handoff: &Handoff) {
    while let Ok(job) = receiver.recv() {
        match job {
            Job::Route {
                mut transfer,
                authority,
            } => {
                if transfer.batch.is_cancelled() {
                    transfer.cancel();
                    continue;
                }
                // The read's deadline covers its credential lookup.
                transfer.started = Some(Instant::now());
                let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    authority.obtain(cache)
                }))
                .unwrap_or_else(|_| Err(Error::internal("a credential provider panicked")));
                match result {
                    Ok(credential) => {
                        transfer.auth = Some((*authority, credential));
                        handoff(*transfer);
                    }
                    Err(e) => transfer.fail(&e),
                }
            }
            Job::Lookup {
                authority,
                stale,
                reply,
            } => {
                if let Some(stale) = &stale {
                    authority.invalidate(cache, stale);
                }
                let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    authority.obtain(cache)
                }))
                .unwrap_or_else(|_| Err(Error::internal("a credential provider panicked")));
                let _ = reply.send(result);
            }
        }
    }
}
