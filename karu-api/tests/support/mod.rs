//! Helpers shared by the integration tests.
//!
//! Isolated clients, files whose bytes are a function of their offset and checks of what was
//! read from them (from `karu_testkit::reads`, re-exported), leased files that hold a file
//! worker until the test lets it go, and a tiny executor. Each test binary uses a subset.
// Each binary uses a subset, of the re-exports too.
#![allow(dead_code, unused_imports)]

pub(crate) use karu_testkit::pattern;
pub(crate) use karu_testkit::reads::{
    PATIENCE, assert_pattern, client, drain, isolated, locate_file, pattern_file,
};

use std::future::Future;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Context, Poll, Wake, Waker};

use karu::{Batch, Completion, Next};

/// The next completion, failing the test on `TimedOut` or `Drained`.
pub(crate) fn expect_completion(batch: &Batch) -> Completion {
    match batch.next_timeout(PATIENCE) {
        Next::Completion(c) => c,
        other => panic!("expected a completion, got {other:?}; {batch:?}"),
    }
}

/// Wait until a worker has begun `transfers` transfers of `batch` (it then references the
/// batch's destinations, and releasing the batch must wait for it): woken as they begin
/// ([`Batch::wait_for_active`]), failing after [`PATIENCE`].
pub(crate) fn wait_until_active(batch: &Batch, transfers: usize) {
    assert!(
        batch.wait_for_active(transfers, PATIENCE),
        "no worker began within {PATIENCE:?}: {batch:?}"
    );
}

/// A pattern file of `len` bytes whose reads wait in `open` until the test lets them go:
/// the test holds a write lease on it (`fcntl(F_SETLEASE, F_WRLCK)`), and an open for
/// reading waits until the holder releases the lease ([`Lease::release`]), exactly as it
/// does for `cat` (or until `fs.lease-break-time` passes, 45 s by default). The read then
/// delivers the file's bytes. Tests use it to hold a file worker exactly as long as they want.
pub(crate) fn held_file(dir: &Path, name: &str, len: u64) -> (PathBuf, Lease) {
    use std::os::fd::AsRawFd;
    let path = pattern_file(dir, name, len);
    let file = std::fs::File::open(&path).expect("open the file to lease");
    let fd = file.as_raw_fd();
    // The holder is told of a waiting reader by a signal, SIGIO (which ends the process) unless
    // another is set: SIGURG, which is ignored unless handled. (`F_SETSIG` from Linux's
    // <fcntl.h>; the libc crate does not export it.)
    const F_SETSIG: libc::c_int = 10;
    // SAFETY: fcntl with integer arguments on a descriptor this function owns and keeps open.
    let set_signal = unsafe { libc::fcntl(fd, F_SETSIG, libc::SIGURG) };
    assert_eq!(
        set_signal,
        0,
        "F_SETSIG: {}",
        std::io::Error::last_os_error()
    );
    // SAFETY: as above.
    let leased = unsafe { libc::fcntl(fd, libc::F_SETLEASE, libc::F_WRLCK) };
    assert_eq!(
        leased,
        0,
        "cannot take a write lease on {} ({}): these tests hold file workers with file \
         leases, which need fs.leases-enable = 1 and a filesystem that supports them",
        path.display(),
        std::io::Error::last_os_error()
    );
    (path, Lease(Arc::new(std::sync::Mutex::new(Some(file)))))
}

/// The write lease of a [`held_file`]; clones share it.
#[derive(Debug, Clone)]
pub(crate) struct Lease(Arc<std::sync::Mutex<Option<std::fs::File>>>);

impl Lease {
    /// Let every reader waiting to open the file go on (closing the leased descriptor ends
    /// the lease). Idempotent.
    pub(crate) fn release(&self) {
        let file = self.0.lock().unwrap_or_else(|e| e.into_inner()).take();
        drop(file);
    }

    /// Wait until a reader waits in `open` for the lease: the kernel then reports the lease
    /// as being broken (`F_GETLEASE` answers the type it is broken to, no longer `F_WRLCK`).
    /// A transfer is active from the moment its worker takes it, a little before it opens
    /// the file, and a batch cancelled in between completes without opening it; a test that
    /// means to hold a worker *inside* a read waits here too. Fails after [`PATIENCE`].
    pub(crate) fn wait_for_reader(&self) {
        use std::os::fd::AsRawFd;
        let deadline = std::time::Instant::now() + PATIENCE;
        loop {
            let state = {
                let file = self.0.lock().unwrap_or_else(|e| e.into_inner());
                let file = file.as_ref().expect("the lease is still held");
                // SAFETY: fcntl with an integer command on a descriptor the lease keeps open.
                unsafe { libc::fcntl(file.as_raw_fd(), libc::F_GETLEASE) }
            };
            if state != libc::F_WRLCK {
                return;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "no reader opened the held file within {PATIENCE:?}"
            );
            // The kernel has no event for a lease break but a signal: look again shortly.
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
    }
}

/// Wait until a worker of `batch` is inside the read of the [`held_file`] under `lease`:
/// it has begun the transfer ([`wait_until_active`]) and waits in `open`
/// ([`Lease::wait_for_reader`]).
pub(crate) fn wait_until_held(batch: &Batch, lease: &Lease) {
    wait_until_active(batch, 1);
    lease.wait_for_reader();
}

/// Releases the lease when dropped, so that a failing test fails instead of waiting in
/// `Batch::drop` or the client's drop for the lease to be broken.
///
/// Declare it *after* the batch that reads the file: locals drop in reverse order, and the
/// batch's drop waits for the held worker.
#[derive(Debug)]
pub(crate) struct LeaseGuard(pub(crate) Lease);

impl Drop for LeaseGuard {
    fn drop(&mut self) {
        self.0.release();
    }
}

/// A waker that unparks the executor's thread and counts its wakes.
#[derive(Debug)]
struct ThreadWaker {
    thread: std::thread::Thread,
    wakes: AtomicUsize,
}

impl Wake for ThreadWaker {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.wakes.fetch_add(1, Ordering::SeqCst);
        self.thread.unpark();
    }
}

/// A minimal single-future executor for the current thread: poll, park until woken, poll
/// again. No runtime, no reactor: a future that is never woken parks the thread forever.
#[derive(Debug)]
pub(crate) struct TinyExecutor {
    state: Arc<ThreadWaker>,
    waker: Waker,
}

impl TinyExecutor {
    pub(crate) fn new() -> Self {
        let state = Arc::new(ThreadWaker {
            thread: std::thread::current(),
            wakes: AtomicUsize::new(0),
        });
        let waker = Waker::from(Arc::clone(&state));
        TinyExecutor { state, waker }
    }

    /// Poll `future` once.
    pub(crate) fn poll<F: Future + Unpin>(&self, future: &mut F) -> Poll<F::Output> {
        Pin::new(future).poll(&mut Context::from_waker(&self.waker))
    }

    /// Poll `future` until it is ready, parking between polls.
    pub(crate) fn block_on<F: Future + Unpin>(&self, future: &mut F) -> F::Output {
        loop {
            if let Poll::Ready(output) = self.poll(future) {
                return output;
            }
            std::thread::park();
        }
    }

    /// How many times a waker of this executor was woken.
    pub(crate) fn wakes(&self) -> usize {
        self.state.wakes.load(Ordering::SeqCst)
    }
}
