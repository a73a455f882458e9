//! A flight: one credential lookup in progress, shared by the request that started it and every
//! request that joined it, which lands exactly once. Threads wait for it blocking (the cache's
//! tests), tasks asynchronously (the event loops), each bounded by its own deadline.

use std::sync::Arc;
#[cfg(test)]
use std::time::Instant;

use parking_lot::{Condvar, Mutex};

use crate::sdk::{Credential, Error, Status};

/// One lookup in progress, shared by the request that started it and every request that
/// joined it. It lands exactly once.
pub(crate) struct Flight {
    result: Mutex<Option<Result<Credential, Error>>>,
    /// For threads waiting in `Flight::wait_until` (the cache's tests).
    landed: Condvar,
    /// For tasks waiting in [`Flight::landed`].
    notify: tokio::sync::Notify,
}

impl Flight {
    pub(super) fn new() -> Arc<Self> {
        Arc::new(Flight {
            result: Mutex::new(None),
            landed: Condvar::new(),
            notify: tokio::sync::Notify::new(),
        })
    }

    pub(super) fn publish(&self, result: Result<Credential, Error>) {
        *self.result.lock() = Some(result);
        self.landed.notify_all();
        self.notify.notify_waiters();
    }

    #[cfg(test)]
    /// The result once landed, blocking the thread until then or until `deadline`
    /// (`None` if the deadline came first).
    pub(crate) fn wait_until(
        &self,
        deadline: Option<Instant>,
    ) -> Option<Result<Credential, Error>> {
        let mut result = self.result.lock();
        loop {
            if let Some(r) = &*result {
                return Some(r.clone());
            }
            match deadline {
                None => self.landed.wait(&mut result),
                Some(deadline) => {
                    if self.landed.wait_until(&mut result, deadline).timed_out() {
                        return result.clone();
                    }
                }
            }
        }
    }

    /// The result once landed (for tasks: bound it with the read's deadline).
    pub(crate) async fn landed(&self) -> Result<Credential, Error> {
        loop {
            let notified = self.notify.notified();
            let mut notified = std::pin::pin!(notified);
            notified.as_mut().enable();
            if let Some(r) = &*self.result.lock() {
                return r.clone();
            }
            notified.await;
        }
    }
}

/// The error of a request that stopped waiting for a lookup at its deadline.
pub(crate) fn waited_too_long(family: &str) -> Error {
    Error::new(
        Status::TimedOut,
        format!(
            "the read's deadline passed while its credential was being looked up ({family}); \
             the lookup goes on and later reads use its result"
        ),
    )
}
