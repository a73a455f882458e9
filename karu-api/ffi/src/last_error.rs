//! The last error of an object, per thread: what `karu_client_last_error` and its siblings
//! return.
//!
//! Each object that keeps messages has an [`Owner`] id; a failing call stores its message in
//! a table of the calling thread, under that id. Two threads sharing a client each see their
//! own last failure, and nothing is shared between threads (no lock: a forked child's thread
//! keeps its own table, whatever other threads were doing). Each thread keeps the messages of
//! its [`KEPT`] most recently failing objects.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::status::karu_status;

/// How many objects' messages one thread keeps (the oldest is forgotten first).
pub(crate) const KEPT: usize = 64;

static NEXT: AtomicU64 = AtomicU64::new(1);

thread_local! {
    static MESSAGES: RefCell<VecDeque<(u64, String)>> = const { RefCell::new(VecDeque::new()) };
}

/// The identity under which an object's messages are kept (never reused).
#[derive(Debug)]
pub(crate) struct Owner(u64);

impl Owner {
    /// A new identity.
    pub(crate) fn new() -> Self {
        Owner(NEXT.fetch_add(1, Ordering::Relaxed))
    }

    /// Keep `message` as this object's last error on this thread; returns `status` so that a
    /// failure reads `return Err(owner.fail(status, message))`.
    pub(crate) fn fail(&self, status: karu_status, message: impl Into<String>) -> karu_status {
        let message = message.into();
        // A thread being torn down has no table any more; the message is then dropped.
        let _ = MESSAGES.try_with(|messages| {
            let mut messages = messages.borrow_mut();
            messages.retain(|(owner, _)| *owner != self.0);
            if messages.len() >= KEPT {
                messages.pop_front();
            }
            messages.push_back((self.0, message));
        });
        status
    }

    /// Keep a Karu error's message; returns its status.
    pub(crate) fn error(&self, error: &karu::Error) -> karu_status {
        self.fail(error.status().into(), error.message())
    }

    /// This object's last error on this thread ("" if it has none).
    pub(crate) fn last(&self) -> String {
        MESSAGES
            .try_with(|messages| {
                messages
                    .borrow()
                    .iter()
                    .find(|(owner, _)| *owner == self.0)
                    .map(|(_, message)| message.clone())
            })
            .ok()
            .flatten()
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_object_and_each_thread_has_its_own_last_error() {
        let (a, b) = (Owner::new(), Owner::new());
        assert_eq!(a.last(), "");
        assert_eq!(
            a.fail(karu_status::KARU_ERR_NOT_FOUND, "first"),
            karu_status::KARU_ERR_NOT_FOUND
        );
        a.fail(karu_status::KARU_ERR_NOT_FOUND, "second");
        b.fail(karu_status::KARU_ERR_INVALID, "other object");
        assert_eq!(
            (a.last().as_str(), b.last().as_str()),
            ("second", "other object")
        );
        std::thread::scope(|s| {
            s.spawn(|| {
                assert_eq!(a.last(), "", "another thread sees none of this one's");
                a.fail(karu_status::KARU_ERR_IO, "on the other thread");
                assert_eq!(a.last(), "on the other thread");
            });
        });
        assert_eq!(a.last(), "second");
    }

    #[test]
    fn a_thread_keeps_the_most_recent_objects() {
        let owners: Vec<Owner> = (0..KEPT + 1).map(|_| Owner::new()).collect();
        for (i, owner) in owners.iter().enumerate() {
            owner.fail(karu_status::KARU_ERR_IO, format!("{i}"));
        }
        assert_eq!(owners[0].last(), "", "the oldest is forgotten");
        assert_eq!(owners[KEPT].last(), KEPT.to_string());
        assert_eq!(owners[1].last(), "1");
    }
}
