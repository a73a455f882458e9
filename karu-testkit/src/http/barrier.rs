//! The request barrier of [`Fault::Barrier`](super::Fault::Barrier): held requests wait until
//! enough of them arrived, then take turns, in arrival order (the order their faults were
//! chosen in: a request takes its ticket with its faults), to read the object and build their
//! answers.

use std::collections::BTreeSet;

use parking_lot::Mutex;
use tokio::sync::Notify;

/// Tickets handed out to held requests and the turn being served.
#[derive(Debug, Default)]
pub(crate) struct Barrier {
    state: Mutex<State>,
    changed: Notify,
}

#[derive(Debug, Default)]
struct State {
    /// Tickets handed out (the next ticket's number).
    arrived: u64,
    /// The ticket whose turn it is.
    serving: u64,
    /// Tickets whose requests went away before their turn ended (skipped when reached).
    gone: BTreeSet<u64>,
}

impl State {
    /// Ends the turn being served and skips the tickets already gone.
    fn advance(&mut self) {
        self.serving += 1;
        while self.gone.remove(&self.serving) {
            self.serving += 1;
        }
    }
}

/// A held request's place at the barrier; dropping it ends its turn (or gives it up).
#[derive(Debug)]
pub(crate) struct Ticket<'a> {
    barrier: &'a Barrier,
    number: u64,
    /// How many requests each round of the barrier waits for.
    round: u64,
}

impl Barrier {
    /// Takes a ticket in a barrier of `round` requests.
    pub(crate) fn arrive(&self, round: u64) -> Ticket<'_> {
        let number = {
            let mut state = self.state.lock();
            state.arrived += 1;
            state.arrived - 1
        };
        self.changed.notify_waiters();
        Ticket {
            barrier: self,
            number,
            round: round.max(1),
        }
    }
}

impl Ticket<'_> {
    /// Waits until every request of this ticket's round arrived and the earlier tickets had
    /// their turns.
    pub(crate) async fn turn(&self) {
        let released = (self.number / self.round + 1) * self.round;
        loop {
            let notified = self.barrier.changed.notified();
            let mut notified = std::pin::pin!(notified);
            notified.as_mut().enable();
            {
                let state = self.barrier.state.lock();
                if state.arrived >= released && state.serving == self.number {
                    return;
                }
            }
            notified.await;
        }
    }
}

impl Drop for Ticket<'_> {
    fn drop(&mut self) {
        {
            let mut state = self.barrier.state.lock();
            if state.serving == self.number {
                state.advance();
            } else if state.serving < self.number {
                state.gone.insert(self.number);
            }
        }
        self.barrier.changed.notify_waiters();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn poll_once(turn: std::pin::Pin<&mut impl std::future::Future<Output = ()>>) -> bool {
        let waker = std::task::Waker::noop();
        let mut cx = std::task::Context::from_waker(waker);
        turn.poll(&mut cx).is_ready()
    }

    #[test]
    fn turns_wait_for_the_round_then_go_in_arrival_order() {
        let barrier = Barrier::default();
        let first = barrier.arrive(2);
        let mut first_turn = Box::pin(first.turn());
        assert!(!poll_once(first_turn.as_mut()), "alone at the barrier");
        let second = barrier.arrive(2);
        let mut second_turn = Box::pin(second.turn());
        assert!(!poll_once(second_turn.as_mut()), "not its turn yet");
        assert!(poll_once(first_turn.as_mut()));
        drop(first_turn);
        drop(first);
        assert!(poll_once(second_turn.as_mut()));
    }

    #[test]
    fn a_ticket_given_up_before_its_turn_is_skipped() {
        let barrier = Barrier::default();
        let first = barrier.arrive(3);
        let second = barrier.arrive(3);
        let third = barrier.arrive(3);
        drop(second);
        drop(first);
        let mut turn = Box::pin(third.turn());
        assert!(poll_once(turn.as_mut()));
    }
}
