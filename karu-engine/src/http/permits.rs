//! Permits: a request's place under its loop's share and the client's concurrency limit,
//! which a request waiting without sending hands back and takes again ([`Held`]).

use std::fmt;
use std::sync::Arc;

use crate::http::loops::LoopCtx;
use parking_lot::Mutex;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// A request's place under the limits: this loop's share, then the client's limit.
pub(crate) type Permits = (OwnedSemaphorePermit, OwnedSemaphorePermit);

tokio::task_local! {
    /// The permits the running task was started with (see [`Held`]).
    pub(super) static TASK_PERMITS: Arc<Held>;
}

/// The permits of the running task (a transfer's or a probe's), for its fetches to hand back
/// while they wait without sending (see [`Held`]). `None` outside a loop's task.
pub(crate) fn task_permits() -> Option<Arc<Held>> {
    TASK_PERMITS.try_with(Arc::clone).ok()
}

/// Permits a request runs on, which it may hand back while it waits without sending: a
/// follower waiting for the location of a first request of its object
/// ([`locations`](crate::http::locations)) [releases](Held::release) them, so waiting
/// followers of one object never take the permits another object's first read needs, and
/// [takes them again](Held::reacquire), in the queue like any transfer, once it knows where
/// to send. Only the holder whose release took the permits takes them again, so the permits
/// held never exceed those given.
pub(crate) struct Held {
    permits: Mutex<Option<Permits>>,
    share: Arc<Semaphore>,
    limit: Arc<Semaphore>,
}

impl Held {
    /// Permits taken from `ctx`'s share and the client's limit.
    pub(crate) fn new(ctx: &LoopCtx, permits: Permits) -> Self {
        Held {
            permits: Mutex::new(Some(permits)),
            share: Arc::clone(&ctx.share),
            limit: Arc::clone(&ctx.shared.limit),
        }
    }

    /// Hand the permits back; `true` if this call did (the caller must then
    /// [`reacquire`](Held::reacquire) before it sends).
    pub(crate) fn release(&self) -> bool {
        self.permits.lock().take().is_some()
    }

    /// Take permits again (this loop's share first, then the client's limit, as the loop
    /// does); `false` if the limit was closed.
    pub(crate) async fn reacquire(&self) -> bool {
        let Ok(local) = Arc::clone(&self.share).acquire_owned().await else {
            return false;
        };
        let Ok(global) = Arc::clone(&self.limit).acquire_owned().await else {
            return false;
        };
        *self.permits.lock() = Some((local, global));
        true
    }

    /// The permits, if held.
    pub(crate) fn into_permits(self) -> Option<Permits> {
        self.permits.into_inner()
    }
}

impl fmt::Debug for Held {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Held")
            .field("held", &self.permits.lock().is_some())
            .finish_non_exhaustive()
    }
}
