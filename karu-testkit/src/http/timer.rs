//! A precise timer for the link model: one thread per server sleeping on a condition variable
//! (microsecond resolution), instead of tokio's millisecond timer wheel, which rounds every
//! deadline up to the next millisecond and would add ~1 ms to each 20 ms of latency.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll, Waker};
use std::thread::JoinHandle;
use std::time::Instant;

use parking_lot::{Condvar, Mutex};

/// One pending wake-up.
#[derive(Debug, Default)]
struct Entry {
    done: AtomicBool,
    waker: Mutex<Option<Waker>>,
}

#[derive(Debug)]
struct Queued {
    deadline: Instant,
    seq: u64,
    entry: Arc<Entry>,
}

impl PartialEq for Queued {
    fn eq(&self, other: &Self) -> bool {
        (self.deadline, self.seq) == (other.deadline, other.seq)
    }
}
impl Eq for Queued {}
impl PartialOrd for Queued {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Queued {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        (self.deadline, self.seq).cmp(&(other.deadline, other.seq))
    }
}

#[derive(Debug, Default)]
struct Queue {
    heap: BinaryHeap<Reverse<Queued>>,
    seq: u64,
    stop: bool,
}

#[derive(Debug, Default)]
struct Inner {
    queue: Mutex<Queue>,
    changed: Condvar,
}

/// A handle to a server's timer thread.
#[derive(Debug, Clone)]
pub(crate) struct Timer {
    inner: Arc<Inner>,
}

/// The timer thread, stopped and joined by [`TimerThread::stop`].
#[derive(Debug)]
pub(crate) struct TimerThread {
    inner: Arc<Inner>,
    thread: Option<JoinHandle<()>>,
}

impl Timer {
    /// Starts the timer thread (named `name`).
    pub(crate) fn start(name: String) -> std::io::Result<(Timer, TimerThread)> {
        let inner = Arc::new(Inner::default());
        let worker = inner.clone();
        let thread = std::thread::Builder::new()
            .name(name)
            .spawn(move || run(&worker))?;
        Ok((
            Timer {
                inner: inner.clone(),
            },
            TimerThread {
                inner,
                thread: Some(thread),
            },
        ))
    }

    /// A future resolving at `deadline` (at once if it has passed).
    pub(crate) fn sleep_until(&self, deadline: Instant) -> Delay {
        Delay {
            deadline,
            entry: None,
            inner: self.inner.clone(),
        }
    }
}

impl TimerThread {
    /// Stops the thread (pending delays never fire) and joins it.
    pub(crate) fn stop(&mut self) {
        self.inner.queue.lock().stop = true;
        self.inner.changed.notify_one();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl Drop for TimerThread {
    fn drop(&mut self) {
        self.stop();
    }
}

fn run(inner: &Inner) {
    let mut queue = inner.queue.lock();
    loop {
        if queue.stop {
            return;
        }
        let now = Instant::now();
        match queue.heap.peek() {
            None => inner.changed.wait(&mut queue),
            Some(Reverse(next)) if next.deadline > now => {
                let deadline = next.deadline;
                let _ = inner.changed.wait_until(&mut queue, deadline);
            }
            Some(_) => {
                let mut due = Vec::new();
                while let Some(Reverse(next)) = queue.heap.peek() {
                    if next.deadline > now {
                        break;
                    }
                    if let Some(Reverse(next)) = queue.heap.pop() {
                        due.push(next.entry);
                    }
                }
                // Wake outside the lock.
                parking_lot::MutexGuard::unlocked(&mut queue, || {
                    for entry in due {
                        entry.done.store(true, Ordering::Release);
                        if let Some(waker) = entry.waker.lock().take() {
                            waker.wake();
                        }
                    }
                });
            }
        }
    }
}

/// A wait on the precise timer (see [`Timer::sleep_until`]).
#[derive(Debug)]
pub(crate) struct Delay {
    deadline: Instant,
    entry: Option<Arc<Entry>>,
    inner: Arc<Inner>,
}

impl Future for Delay {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        match &self.entry {
            Some(entry) => {
                if entry.done.load(Ordering::Acquire) {
                    return Poll::Ready(());
                }
                let mut slot = entry.waker.lock();
                // Re-check under the lock: the timer sets `done` before taking the waker.
                if entry.done.load(Ordering::Acquire) {
                    return Poll::Ready(());
                }
                match slot.as_ref() {
                    Some(w) if w.will_wake(cx.waker()) => {}
                    _ => *slot = Some(cx.waker().clone()),
                }
                Poll::Pending
            }
            None => {
                if Instant::now() >= self.deadline {
                    return Poll::Ready(());
                }
                let entry = Arc::new(Entry {
                    done: AtomicBool::new(false),
                    waker: Mutex::new(Some(cx.waker().clone())),
                });
                let earliest = {
                    let mut queue = self.inner.queue.lock();
                    queue.seq += 1;
                    let seq = queue.seq;
                    let earliest = queue
                        .heap
                        .peek()
                        .is_none_or(|Reverse(next)| self.deadline < next.deadline);
                    queue.heap.push(Reverse(Queued {
                        deadline: self.deadline,
                        seq,
                        entry: entry.clone(),
                    }));
                    earliest
                };
                if earliest {
                    self.inner.changed.notify_one();
                }
                self.entry = Some(entry);
                Poll::Pending
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn delays_fire_in_order_and_an_earlier_deadline_wakes_the_thread() {
        let (timer, mut thread) = Timer::start("kmock-test-t".into()).unwrap();
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap();
        let started = Instant::now();
        rt.block_on(async {
            // The thread first sleeps towards an hour away; a short delay queued after it must
            // wake it. Were it missed, the short delay would wait the hour: the guard (tokio's
            // own timer, a minute) turns that hang into a failure.
            let mut far = timer.sleep_until(started + Duration::from_secs(3600));
            assert!(poll_once(&mut far).await.is_pending());
            let long = timer.sleep_until(started + Duration::from_millis(30));
            let short = timer.sleep_until(started + Duration::from_millis(10));
            let guard = Duration::from_secs(60);
            tokio::time::timeout(guard, short)
                .await
                .expect("the 10 ms delay fired");
            let at_short = started.elapsed();
            assert!(at_short >= Duration::from_millis(10), "{at_short:?}");
            tokio::time::timeout(guard, long)
                .await
                .expect("the 30 ms delay fired");
            let at_long = started.elapsed();
            assert!(at_long >= Duration::from_millis(30), "{at_long:?}");
            // A passed deadline resolves at once; the far one is still pending.
            timer.sleep_until(started).await;
            assert!(poll_once(&mut far).await.is_pending());
        });
        thread.stop();
    }

    /// Polls `delay` once, registering it with the timer.
    async fn poll_once(delay: &mut Delay) -> Poll<()> {
        std::future::poll_fn(|cx| Poll::Ready(Pin::new(&mut *delay).poll(cx))).await
    }
}
