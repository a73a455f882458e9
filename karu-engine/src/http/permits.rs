//! Permits: a request's place under its loop's share of the client's concurrency limit,
//! which a request waiting without sending hands back and takes again ([`ReleasablePermits`]).

use std::fmt;
use std::sync::Arc;

use crate::http::loops::LoopCtx;
use parking_lot::Mutex;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// A request's place under the client's concurrency limit: a permit of its loop's share. The
/// loops' shares add up to the limit exactly (`remote::shares`), so the requests in flight
/// never exceed it; a semaphore of the whole limit besides, which no request could ever wait
/// for, cost every request a lock shared by all the loops' threads to give its permit back.
pub(crate) type Permits = OwnedSemaphorePermit;

tokio::task_local! {
    /// The permits the running task was started with (see [`ReleasablePermits`]).
    pub(super) static TASK_PERMITS: Arc<ReleasablePermits>;
}

/// The permits of the running task (a transfer's or a probe's), for its fetches to hand back
/// while they wait without sending (see [`ReleasablePermits`]). `None` outside a loop's task.
pub(crate) fn task_permits() -> Option<Arc<ReleasablePermits>> {
    TASK_PERMITS.try_with(Arc::clone).ok()
}

/// Permits a request runs on, which it may hand back while it waits without sending: a
/// follower waiting for the location of a first request of its object
/// ([`locations`](crate::http::locations)) [releases](ReleasablePermits::release) them, so waiting
/// followers of one object never take the permits another object's first read needs, and
/// [takes them again](ReleasablePermits::reacquire), in the queue like any transfer, once it knows
/// where to send. Only the holder whose release took the permits takes them again, so the permits
/// held never exceed those given.
pub(crate) struct ReleasablePermits {
    permits: Mutex<Option<Permits>>,
    share: Arc<Semaphore>,
}

impl ReleasablePermits {
    /// Permits taken from `ctx`'s share.
    pub(crate) fn new(ctx: &LoopCtx, permits: Permits) -> Self {
        ReleasablePermits {
            permits: Mutex::new(Some(permits)),
            share: Arc::clone(&ctx.share),
        }
    }

    /// Hold `permits` again, for another job: a [`ReleasablePermits`] whose permits were handed
    /// back (a pool task keeps one from job to job, see `loops::run_job`).
    pub(crate) fn hold(&self, permits: Permits) {
        *self.permits.lock() = Some(permits);
    }

    /// Hand the permits back; `true` if this call did (the caller must then
    /// [`reacquire`](ReleasablePermits::reacquire) before it sends).
    pub(crate) fn release(&self) -> bool {
        self.permits.lock().take().is_some()
    }

    /// Take permits again (of this loop's share, in its queue as the loop takes them);
    /// `false` if the share was closed.
    pub(crate) async fn reacquire(&self) -> bool {
        let Ok(permits) = Arc::clone(&self.share).acquire_owned().await else {
            return false;
        };
        *self.permits.lock() = Some(permits);
        true
    }

    /// The permits, if held.
    pub(crate) fn into_permits(self) -> Option<Permits> {
        self.permits.into_inner()
    }
}

impl fmt::Debug for ReleasablePermits {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ReleasablePermits")
            .field("held", &self.permits.lock().is_some())
            .finish_non_exhaustive()
    }
}
