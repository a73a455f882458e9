//! Transfers and parts: the planner's output, carrying destinations to the workers.

use std::fmt;
use std::sync::Arc;

use smallvec::SmallVec;

use crate::batch::BatchShared;
use crate::credential::{Authority, Credential};
use crate::locator::Locator;
use crate::read::{Completion, Sink};
use crate::status::{Error, Status};
use crate::timing::Timing;

/// One local read or one HTTP request, serving one or more original reads ([`Part`]s).
pub(crate) struct Transfer {
    /// The object (without its window: offsets here are absolute).
    pub(crate) locator: Locator,
    /// Absolute offset of the span's first byte.
    pub(crate) start: u64,
    /// Length of the span.
    pub(crate) length: u64,
    /// The identity condition shared by every part.
    pub(crate) if_match: Option<String>,
    /// The original reads, in offset order.
    pub(crate) parts: Parts,
    /// Where the parts' completions go.
    pub(crate) batch: Arc<BatchShared>,
    /// How the transfer is authenticated, and the credential a worker obtained for it.
    pub(crate) auth: Option<(Authority, Credential)>,
    /// How long the read already spent obtaining its credential: its deadline, which covers
    /// the lookup too, counts from the lookup's start (not from its wait for a concurrency
    /// permit).
    pub(crate) credential_wait: std::time::Duration,
}

/// A transfer's parts: inline when it serves one read, as most do.
pub(crate) type Parts = SmallVec<[Part; 1]>;

/// One original read inside a transfer: its place in the span, its destination and its tag.
pub(crate) struct Part {
    pub(crate) tag: u64,
    pub(crate) index: usize,
    /// Where the read's bytes start inside the transfer's span.
    pub(crate) offset_in_span: u64,
    pub(crate) length: u64,
    pub(crate) sink: Sink,
}

impl Part {
    /// The completion of this part.
    pub(crate) fn into_completion(self, result: Result<(), Error>, received: u64) -> Completion {
        // Only a range error keeps a prefix; any other failure delivers nothing.
        let received = match &result {
            Ok(()) => self.length,
            Err(e) if e.status() == Status::RangeNotSatisfiable => received.min(self.length),
            Err(_) => 0,
        };
        Completion {
            tag: self.tag,
            index: self.index,
            result,
            bytes_received: received,
            buffer: self.sink.into_buffer(received),
            timing: Timing::new(),
        }
    }
}

impl Transfer {
    /// Complete every part with the same error, without touching destinations.
    pub(crate) fn fail(mut self, error: &Error) {
        self.fail_parts(error);
    }

    fn fail_parts(&mut self, error: &Error) {
        let completions: Vec<Completion> = std::mem::take(&mut self.parts)
            .into_iter()
            .map(|p| p.into_completion(Err(error.clone()), 0))
            .collect();
        if !completions.is_empty() {
            self.batch.complete(completions);
        }
    }

    /// Complete every part as cancelled.
    pub(crate) fn cancel(self) {
        self.fail(&Error::new(
            Status::Cancelled,
            "the batch was released before this read started",
        ));
    }
}

impl Drop for Transfer {
    /// A transfer dropped with parts left (a panicking or aborted task) still completes every
    /// read: a batch never waits forever.
    fn drop(&mut self) {
        if !self.parts.is_empty() {
            self.fail_parts(&Error::internal(
                "the transfer was abandoned before it completed",
            ));
        }
    }
}

impl fmt::Debug for Transfer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Transfer")
            .field("locator", &self.locator)
            .field("start", &self.start)
            .field("length", &self.length)
            .field("if_match", &self.if_match.is_some())
            .field("parts", &self.parts.len())
            .finish()
    }
}

impl fmt::Debug for Part {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Part")
            .field("tag", &self.tag)
            .field("index", &self.index)
            .field("offset_in_span", &self.offset_in_span)
            .field("length", &self.length)
            .field("sink", &self.sink)
            .finish()
    }
}
