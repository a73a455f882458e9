//! One accepted TCP connection: its id, and the socket wrapper that lets body faults see when
//! bytes reached the socket and end the connection with a FIN or a reset.

use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::task::{Context, Poll, Waker};

use parking_lot::Mutex;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio::sync::Notify;

/// What the handler and bodies know about the connection carrying them.
#[derive(Debug)]
pub(crate) struct ConnShared {
    /// The connection id recorded in the request log.
    pub(crate) id: u64,
    /// Completed flushes of the socket: every byte handed to the HTTP layer before a flush
    /// started has reached the kernel once this count moves past it.
    flushes: AtomicU64,
    /// Bodies waiting for the next flush (h2 can have several at once).
    flush_waiters: Mutex<Vec<Waker>>,
    waiting: AtomicBool,
    /// Close with `SO_LINGER` 0 (an RST) instead of a FIN.
    reset: AtomicBool,
    /// Asks the connection task to drop the connection now.
    kill: Notify,
    /// Requests received on the connection.
    received: AtomicU64,
    /// Asks the connection task to end the connection gracefully.
    end: Notify,
}

impl ConnShared {
    pub(crate) fn new(id: u64) -> Self {
        Self {
            id,
            flushes: AtomicU64::new(0),
            flush_waiters: Mutex::new(Vec::new()),
            waiting: AtomicBool::new(false),
            reset: AtomicBool::new(false),
            kill: Notify::new(),
            received: AtomicU64::new(0),
            end: Notify::new(),
        }
    }

    pub(crate) fn flushes(&self) -> u64 {
        self.flushes.load(Ordering::SeqCst)
    }

    /// Wakes `waker` at the next completed flush.
    pub(crate) fn wake_on_flush(&self, waker: &Waker) {
        let mut waiters = self.flush_waiters.lock();
        if !waiters.iter().any(|w| w.will_wake(waker)) {
            waiters.push(waker.clone());
        }
        // SeqCst pairs this store and the caller's re-check of `flushes` with the flush's
        // increment and load of `waiting`, so one side always sees the other.
        self.waiting.store(true, Ordering::SeqCst);
    }

    /// Drops the connection: with an RST if `reset`, else with a FIN.
    pub(crate) fn kill(&self, reset: bool) {
        if reset {
            self.reset.store(true, Ordering::Release);
        }
        self.kill.notify_one();
    }

    /// Counts a request; at the `limit`th (0: no limit) the connection is to end gracefully
    /// once the requests it received are answered. `true` for that last request.
    pub(crate) fn count_request(&self, limit: u64) -> bool {
        let received = self.received.fetch_add(1, Ordering::AcqRel) + 1;
        let last = limit != 0 && received == limit;
        if last {
            self.end.notify_one();
        }
        last
    }

    /// Resolves when the connection reached its request limit ([`ConnShared::count_request`]).
    pub(crate) async fn ending(&self) {
        self.end.notified().await;
    }

    /// Resolves when [`ConnShared::kill`] was called.
    pub(crate) async fn killed(&self) {
        self.kill.notified().await;
    }

    fn flushed(&self) {
        self.flushes.fetch_add(1, Ordering::SeqCst);
        if self.waiting.load(Ordering::SeqCst) {
            let waiters = {
                let mut waiters = self.flush_waiters.lock();
                self.waiting.store(false, Ordering::SeqCst);
                std::mem::take(&mut *waiters)
            };
            waiters.into_iter().for_each(Waker::wake);
        }
    }
}

/// The accepted socket, counting flushes and resetting on drop when asked to.
#[derive(Debug)]
pub(crate) struct ConnIo {
    tcp: TcpStream,
    conn: std::sync::Arc<ConnShared>,
}

impl ConnIo {
    pub(crate) fn new(tcp: TcpStream, conn: std::sync::Arc<ConnShared>) -> Self {
        Self { tcp, conn }
    }
}

impl Drop for ConnIo {
    fn drop(&mut self) {
        if self.conn.reset.load(Ordering::Acquire) {
            // Closing a socket with a zero linger time sends an RST and discards unsent data.
            let _ = self.tcp.set_zero_linger();
        }
    }
}

impl AsyncRead for ConnIo {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.tcp).poll_read(cx, buf)
    }
}

impl AsyncWrite for ConnIo {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.tcp).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.tcp).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.tcp.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let result = Pin::new(&mut self.tcp).poll_flush(cx);
        if let Poll::Ready(Ok(())) = result {
            self.conn.flushed();
        }
        result
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.tcp).poll_shutdown(cx)
    }
}
