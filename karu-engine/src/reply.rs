//! Replies: one result computed on Karu's own threads, awaited from any executor or waited for
//! by a blocking caller.
//!
//! A [`Reply`] is a future woken by the Karu thread that sends its result, so it needs no
//! runtime of the caller's: tokio, smol, `futures::executor::block_on` and a blocking thread
//! ([`Reply::wait`]) all wait the same way. Dropping it tells the sender that no one waits any
//! more ([`Sender::closed`]), which is how the work it stands for is cancelled.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};

use tokio::sync::oneshot;

use crate::sdk::Error;

/// A pair: the [`Sender`] goes with the work, the [`Reply`] to whoever waits for it.
pub(crate) fn channel<T>() -> (Sender<T>, Reply<T>) {
    let (tx, rx) = oneshot::channel();
    (Sender(tx), Reply(State::Waiting(rx)))
}

/// Where the work sends its one result.
pub(crate) struct Sender<T>(oneshot::Sender<Result<T, Error>>);

impl<T> Sender<T> {
    /// Deliver the result (dropped if no one waits any more).
    pub(crate) fn send(self, result: Result<T, Error>) {
        let _ = self.0.send(result);
    }

    /// Whether the [`Reply`] was dropped: the work is no longer wanted.
    pub(crate) fn is_closed(&self) -> bool {
        self.0.is_closed()
    }

    /// Resolves once the [`Reply`] is dropped.
    pub(crate) async fn closed(&mut self) {
        self.0.closed().await;
    }
}

/// The result of work running on Karu's threads; see the [module](self) docs.
#[must_use = "dropping a reply cancels the work it waits for"]
pub(crate) struct Reply<T>(State<T>);

enum State<T> {
    Ready(Option<Result<T, Error>>),
    Waiting(oneshot::Receiver<Result<T, Error>>),
}

impl<T> Reply<T> {
    /// A reply that is already known.
    pub(crate) fn ready(result: Result<T, Error>) -> Self {
        Reply(State::Ready(Some(result)))
    }

    /// Block the calling thread until the result arrives.
    pub(crate) fn wait(self) -> Result<T, Error> {
        block_on(self)
    }
}

// Nothing is ever pinned inside a reply: its result is moved out, never polled.
impl<T> Unpin for Reply<T> {}

impl<T> Future for Reply<T> {
    type Output = Result<T, Error>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match &mut self.0 {
            State::Ready(result) => {
                Poll::Ready(result.take().unwrap_or_else(|| {
                    Err(Error::internal("a reply was polled after it completed"))
                }))
            }
            State::Waiting(rx) => Pin::new(rx).poll(cx).map(|received| {
                received.unwrap_or_else(|_| {
                    Err(Error::internal(
                        "the work for this request ended without a result",
                    ))
                })
            }),
        }
    }
}

impl<T> fmt::Debug for Reply<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = match self.0 {
            State::Ready(_) => "ready",
            State::Waiting(_) => "waiting",
        };
        f.debug_tuple("Reply").field(&state).finish()
    }
}

impl<T> fmt::Debug for Sender<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Sender")
            .field("closed", &self.is_closed())
            .finish()
    }
}

/// Wakes a thread parked in [`block_on`].
struct Unpark(std::thread::Thread);

impl Wake for Unpark {
    fn wake(self: Arc<Self>) {
        self.0.unpark();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.0.unpark();
    }
}

/// Run `future` on the calling thread, parking it between polls. For futures woken by Karu's
/// threads only (they need no reactor); a blocking caller's thread, never an executor's.
pub(crate) fn block_on<F: Future>(future: F) -> F::Output {
    let waker = Waker::from(Arc::new(Unpark(std::thread::current())));
    let mut cx = Context::from_waker(&waker);
    let mut future = std::pin::pin!(future);
    loop {
        if let Poll::Ready(output) = future.as_mut().poll(&mut cx) {
            return output;
        }
        std::thread::park();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sdk::Status;

    #[test]
    fn a_reply_is_woken_by_the_sending_thread() {
        let (tx, reply) = channel::<u32>();
        let sender = std::thread::spawn(move || tx.send(Ok(7)));
        assert_eq!(reply.wait(), Ok(7));
        sender.join().unwrap();
    }

    #[test]
    fn a_sender_dropped_without_a_result_ends_the_wait_with_an_error() {
        let (tx, reply) = channel::<u32>();
        std::thread::spawn(move || drop(tx)).join().unwrap();
        assert_eq!(reply.wait().unwrap_err().status(), Status::Internal);
    }

    #[test]
    fn dropping_the_reply_closes_the_sender() {
        let (mut tx, reply) = channel::<u32>();
        assert!(!tx.is_closed());
        drop(reply);
        assert!(tx.is_closed());
        futures::executor::block_on(tx.closed());
    }

    #[test]
    fn a_ready_reply_needs_no_sender() {
        assert_eq!(Reply::ready(Ok(3)).wait(), Ok(3));
    }
}
