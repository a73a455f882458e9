//! Waiting on several of Karu's batches and futures from the command's one thread: each is
//! polled with a waker that unparks the thread, which parks while none is ready.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::thread::{self, Thread};
use std::time::Duration;

/// Unparks the waiting thread.
struct Unpark(Thread);

impl Wake for Unpark {
    fn wake(self: Arc<Self>) {
        self.0.unpark();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.0.unpark();
    }
}

/// A waker for the current thread.
pub(crate) fn waker() -> Waker {
    Waker::from(Arc::new(Unpark(thread::current())))
}

/// Waits until a waker of this thread is woken (or `timeout` passes): a wake that came since
/// the last poll returns at once.
pub(crate) fn park(timeout: Duration) {
    thread::park_timeout(timeout);
}

/// A future that one thread polls.
pub(crate) type Boxed<T> = Pin<Box<dyn Future<Output = T> + Send>>;

/// The outputs of all of `futures`, in their order, polled together.
pub(crate) fn all<T>(futures: Vec<Boxed<T>>) -> Vec<T> {
    let waker = waker();
    let mut cx = Context::from_waker(&waker);
    let mut pending: Vec<Option<Boxed<T>>> = futures.into_iter().map(Some).collect();
    let mut done: Vec<Option<T>> = pending.iter().map(|_| None).collect();
    loop {
        let mut left = 0;
        for (slot, out) in pending.iter_mut().zip(done.iter_mut()) {
            if let Some(future) = slot {
                match future.as_mut().poll(&mut cx) {
                    Poll::Ready(value) => {
                        *out = Some(value);
                        *slot = None;
                    }
                    Poll::Pending => left += 1,
                }
            }
        }
        if left == 0 {
            return done.into_iter().flatten().collect();
        }
        park(Duration::from_secs(1));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn futures_woken_from_other_threads_complete_in_order() {
        let (tx_a, rx_a) = std::sync::mpsc::channel::<u32>();
        let (tx_b, rx_b) = std::sync::mpsc::channel::<u32>();
        let from = |rx: std::sync::mpsc::Receiver<u32>| -> Boxed<u32> {
            let rx = std::sync::Mutex::new(rx);
            Box::pin(std::future::poll_fn(move |cx| {
                match rx.lock().unwrap().try_recv() {
                    Ok(v) => Poll::Ready(v),
                    Err(_) => {
                        // Woken by the sender's thread below.
                        let waker = cx.waker().clone();
                        thread::spawn(move || waker.wake());
                        Poll::Pending
                    }
                }
            }))
        };
        let sender = thread::spawn(move || {
            tx_b.send(2).unwrap();
            tx_a.send(1).unwrap();
        });
        assert_eq!(all(vec![from(rx_a), from(rx_b)]), [1, 2]);
        sender.join().unwrap();
    }
}
