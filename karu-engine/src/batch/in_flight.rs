//! A batch's bound on its own transfers in flight
//! ([`BatchOptions::max_in_flight`](crate::BatchOptions::max_in_flight)): transfers beyond it
//! wait in the batch, in plan order, and each transfer of the batch that ends starts the next
//! one waiting.
//!
//! A transfer is in flight from the moment it is handed to the engine (a file worker's
//! queue, a credential lookup, an event loop's queue) until it is dropped, after its parts
//! completed: every transfer ends in its drop, however it ended (run, failed, cancelled,
//! abandoned by a panic), so the count never leaks a place.

use std::any::Any;
use std::collections::VecDeque;
use std::fmt;

use parking_lot::Mutex;

/// What a batch bounds in flight: the engine's transfers (the batch does not know their type;
/// its module sits below the transfers').
pub(crate) trait Waiting: Send + 'static {
    /// The batch was cancelled while it waited: complete its reads as cancelled.
    fn cancel(self);
}

/// What starts a transfer that waited: routes it to the file workers or the event loops.
pub(crate) type Start<T> = Box<dyn Fn(T) + Send + Sync>;

/// The transfers of one batch in flight, bounded; the others waiting their turn.
pub(crate) struct InFlight<T> {
    limit: usize,
    start: Start<T>,
    state: Mutex<Queue<T>>,
}

struct Queue<T> {
    /// Transfers handed to the engine and not dropped yet.
    running: usize,
    /// Transfers not handed to the engine yet, in plan order.
    waiting: VecDeque<T>,
    /// Whether a thread is starting waiting transfers now (see [`InFlight::ended`]).
    starting: bool,
}

/// A batch's bound, as the batch keeps it: without the type of what it holds.
pub(crate) trait Bound: Send + Sync + fmt::Debug {
    /// A transfer of the batch was dropped (see [`InFlight::ended`]).
    fn ended(&self);
    /// Cancel every transfer still waiting.
    fn cancel_waiting(&self);
    /// The bound itself, for [`InFlight::admit`] with the type of what it holds.
    fn as_any(&self) -> &dyn Any;
}

impl<T: Waiting> Bound for InFlight<T> {
    fn ended(&self) {
        InFlight::ended(self);
    }

    fn cancel_waiting(&self) {
        InFlight::cancel_waiting(self);
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

impl<T: Waiting> InFlight<T> {
    /// At most `limit` transfers in flight (0 behaves as 1); `start` hands a waiting one to
    /// the engine when its turn comes.
    pub(crate) fn new(limit: usize, start: Start<T>) -> Self {
        InFlight {
            limit: limit.max(1),
            start,
            state: Mutex::new(Queue {
                running: 0,
                waiting: VecDeque::new(),
                starting: false,
            }),
        }
    }

    /// `transfer` back if it may be handed to the engine now (it then counts as in flight
    /// until dropped); otherwise it waits here for a place. A batch already `cancelled`
    /// keeps nothing waiting: its transfer goes on, to be cancelled where it starts.
    pub(crate) fn admit(&self, transfer: T, cancelled: bool) -> Option<T> {
        let mut state = self.state.lock();
        if cancelled || state.running < self.limit {
            state.running += 1;
            return Some(transfer);
        }
        state.waiting.push_back(transfer);
        None
    }

    /// A transfer of the batch was dropped: its place goes to the next one waiting.
    ///
    /// One thread at a time starts waiting transfers, in a loop: a transfer that fails at
    /// once (an engine that cannot start) is dropped inside `start` and comes back here,
    /// where it only gives its place back, instead of recursing once per waiting transfer.
    pub(crate) fn ended(&self) {
        let mut state = self.state.lock();
        state.running = state.running.saturating_sub(1);
        if state.starting {
            return; // the starting thread sees the place free
        }
        state.starting = true;
        while state.running < self.limit
            && let Some(next) = state.waiting.pop_front()
        {
            state.running += 1;
            drop(state);
            (self.start)(next);
            state = self.state.lock();
        }
        state.starting = false;
    }

    /// Cancel every transfer still waiting (each completes its reads as cancelled).
    pub(crate) fn cancel_waiting(&self) {
        let waiting = {
            let mut state = self.state.lock();
            let waiting = std::mem::take(&mut state.waiting);
            // Each is dropped below, which gives its place back.
            state.running += waiting.len();
            waiting
        };
        waiting.into_iter().for_each(T::cancel);
    }
}

impl<T> fmt::Debug for InFlight<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = self.state.lock();
        f.debug_struct("InFlight")
            .field("limit", &self.limit)
            .field("running", &state.running)
            .field("waiting", &state.waiting.len())
            .finish_non_exhaustive()
    }
}
