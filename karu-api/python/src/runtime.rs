//! The async half: Karu's futures run on a one-thread tokio runtime of this module (Karu's
//! own threads wake them; the runtime only polls), and their outcome is handed to a Python
//! callback with the GIL. The runtime belongs to the process that started it: after a fork
//! the child starts its own (the parent's thread does not exist there) and leaves the
//! parent's allocated, as Karu's engine does.
//!
//! The runtime's thread is not Python's: once the interpreter finalizes, taking the GIL there
//! aborts or crashes the process. So it enters Python only through [`with_python`], which an
//! `atexit` hook ([`close`]) shuts before finalization begins, after the calls already inside
//! have returned; later outcomes are dropped unseen (nobody is left to await them).

use std::future::Future;
use std::pin::Pin;
use std::sync::mpsc;
use std::sync::{Condvar, Mutex};

use futures_core::Stream;
use karu::{Completion, Next, ProcessStamp};
use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use pyo3::types::PyList;

/// What a finished future hands back: run with the GIL, it makes the value or the exception.
pub(crate) type Settle = Box<dyn FnOnce(Python<'_>) -> PyResult<Py<PyAny>> + Send>;

/// The runtime of the current process.
static RUNTIME: Mutex<Option<(ProcessStamp, tokio::runtime::Handle)>> = Mutex::new(None);

fn handle() -> PyResult<tokio::runtime::Handle> {
    let mut slot = RUNTIME
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    if let Some((stamp, handle)) = slot.as_ref()
        && stamp.is_current()
    {
        return Ok(handle.clone());
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .thread_name("karu-python-async")
        .build()
        .map_err(|e| PyRuntimeError::new_err(format!("cannot start Karu's async runtime: {e}")))?;
    let handle = runtime.handle().clone();
    // The runtime lives as long as the process: its worker keeps running when the Runtime
    // value is forgotten, and dropping it would block on its thread (in a forked child, on a
    // thread that does not exist).
    std::mem::forget(runtime);
    *slot = Some((ProcessStamp::current(), handle.clone()));
    Ok(handle)
}

/// Whether the runtime's thread may still enter Python, and how many of its calls are inside.
struct Gate {
    /// The process these counts belong to: a forked child starts with none inside.
    stamp: Option<ProcessStamp>,
    closed: bool,
    inside: usize,
}

impl Gate {
    /// The gate of the current process.
    fn current(&mut self) -> &mut Gate {
        if !self.stamp.as_ref().is_some_and(ProcessStamp::is_current) {
            *self = Gate {
                stamp: Some(ProcessStamp::current()),
                closed: false,
                inside: 0,
            };
        }
        self
    }
}

static GATE: Mutex<Gate> = Mutex::new(Gate {
    stamp: None,
    closed: false,
    inside: 0,
});
static LEFT: Condvar = Condvar::new();

fn gate() -> std::sync::MutexGuard<'static, Gate> {
    GATE.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Run `f` with the GIL from the runtime's thread, unless the interpreter is exiting: then
/// `None`, and `f` never runs.
pub(crate) fn with_python<R>(f: impl for<'py> FnOnce(Python<'py>) -> R) -> Option<R> {
    {
        let mut gate = gate();
        let gate = gate.current();
        if gate.closed {
            return None;
        }
        gate.inside += 1;
    }
    /// Counts the call out, even if `f` panics.
    struct Leave;
    impl Drop for Leave {
        fn drop(&mut self) {
            gate().current().inside -= 1;
            LEFT.notify_all();
        }
    }
    let _leave = Leave;
    Some(Python::attach(f))
}

/// The `atexit` hook: no call of the runtime's thread enters Python from now on, and the
/// ones inside have returned (waited for without the GIL, which they need to finish).
#[pyfunction]
pub(crate) fn close(py: Python<'_>) {
    py.detach(|| {
        let mut guard = gate();
        guard.current().closed = true;
        while guard.current().inside > 0 {
            guard = LEFT
                .wait(guard)
                .unwrap_or_else(|poisoned| poisoned.into_inner());
        }
    });
}

/// An async operation in flight; `cancel()` drops its future (cancelling its reads).
#[pyclass(module = "karu._native", name = "Task", frozen)]
pub(crate) struct Task {
    abort: tokio::task::AbortHandle,
}

#[pymethods]
impl Task {
    fn cancel(&self) {
        self.abort.abort();
    }
}

/// Run `work` and call `done(True, value)` or `done(False, exception)` with its outcome.
pub(crate) fn spawn(
    _py: Python<'_>,
    done: Py<PyAny>,
    work: impl Future<Output = Settle> + Send + 'static,
) -> PyResult<Task> {
    let handle = handle()?;
    let task = handle.spawn(async move {
        let settle = work.await;
        with_python(|py| {
            let call = match settle(py) {
                Ok(value) => done.call1(py, (true, value)),
                Err(e) => done.call1(py, (false, e.into_value(py))),
            };
            if let Err(e) = call {
                e.write_unraisable(py, None);
            }
        });
    });
    Ok(Task {
        abort: task.abort_handle(),
    })
}

/// Feed the completions of `batch` to `each`, as lists of tuples, the last list ending with
/// `None`. Each list holds a completion and every one queued with it (the reads of one merged
/// transfer complete together): one acquisition of the GIL and one call for them all, not
/// one per read, each of which could wait for the GIL a whole switch interval while Python
/// runs. The batch (and its pinned caller buffers) is dropped when the stream ends or the
/// task is cancelled.
pub(crate) fn stream(each: Py<PyAny>, batch: crate::batch::Pinned) -> PyResult<Task> {
    let task = handle()?.spawn(async move {
        let mut batch = batch;
        loop {
            let mut ready = Vec::new();
            let mut last = true;
            if let Some(first) = next_completion(&mut batch.batch).await {
                ready.push(first);
                last = loop {
                    match batch.batch.try_next() {
                        Next::Completion(c) => ready.push(c),
                        Next::TimedOut => break false,
                        Next::Drained => break true,
                    }
                };
            }
            let stop = with_python(|py| {
                let call = ready
                    .into_iter()
                    .map(|c| crate::convert::completion_tuple(py, c).map(Bound::into_any))
                    .chain(last.then(|| Ok(py.None().into_bound(py))))
                    .collect::<PyResult<Vec<_>>>()
                    .and_then(|items| PyList::new(py, items))
                    .and_then(|list| each.call1(py, (list,)));
                call.map_err(|e| e.write_unraisable(py, None)).is_err()
            })
            .unwrap_or(true);
            if last || stop {
                break;
            }
        }
    });
    Ok(Task {
        abort: task.abort_handle(),
    })
}

/// The next completion of `batch`, woken by the Karu thread that completes it.
pub(crate) async fn next_completion<S>(batch: &mut S) -> Option<Completion>
where
    S: Stream<Item = Completion> + Unpin,
{
    std::future::poll_fn(|cx| Stream::poll_next(Pin::new(&mut *batch), cx)).await
}

/// Wait for `work` (run on this module's runtime) without the GIL, running Python's signal
/// handlers every [`crate::SIGNAL_CHECK`]: a `KeyboardInterrupt` raises here and drops `work`
/// (cancelling what it started).
pub(crate) fn block_on<T: Send + 'static>(
    py: Python<'_>,
    work: impl Future<Output = T> + Send + 'static,
) -> PyResult<T> {
    let (sender, receiver) = mpsc::sync_channel(1);
    let task = handle()?.spawn(async move {
        let _ = sender.send(work.await);
    });
    let mut receiver = receiver;
    loop {
        // The receiver moves into the closure and back: it is `Send` but not `Sync`.
        let (back, next) = py.detach(move || {
            let next = receiver.recv_timeout(crate::SIGNAL_CHECK);
            (receiver, next)
        });
        receiver = back;
        match next {
            Ok(value) => return Ok(value),
            Err(mpsc::RecvTimeoutError::Timeout) => {
                if let Err(interrupt) = py.check_signals() {
                    task.abort();
                    return Err(interrupt);
                }
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                return Err(PyRuntimeError::new_err(
                    "Karu's async runtime dropped an operation",
                ));
            }
        }
    }
}
