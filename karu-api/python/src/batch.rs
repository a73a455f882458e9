//! Submitted reads: a batch whose reads may land in caller buffers ([`Pinned`]), how the
//! Python half's reads are submitted ([`submit_specs`]), and the `Batch` class that yields
//! their completions.

use std::sync::Mutex;
use std::time::Duration;

use karu::{BatchOptions, Locator, Next, Read, ScopedBatch};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyTuple;

use crate::buffer::{Destinations, Export, Window};
use crate::{SIGNAL_CHECK, convert, runtime, with_if_match};

/// One read as the Python half describes it, located: `destination` is its window in an
/// exported caller buffer, or `None` for a buffer Karu allocates.
pub(crate) struct Spec {
    /// The read's position among the reads the Python half submitted: Karu's tag for it.
    pub(crate) index: usize,
    pub(crate) locator: Locator,
    pub(crate) offset: u64,
    pub(crate) length: u64,
    pub(crate) destination: Option<Window>,
    pub(crate) if_match: Option<String>,
}

/// A batch whose reads may write into caller buffers, and the exports of those buffers. The
/// fields drop in order: the batch first (its drop cancels what has not completed and waits
/// until no transfer writes into a buffer), then the exports (whose release lets Python move
/// or free the buffers). Leaking one leaks its exports too: the buffers then stay valid.
pub(crate) struct Pinned {
    pub(crate) batch: ScopedBatch<'static>,
    _exports: Vec<Export>,
}

impl Pinned {
    /// Drop the batch without the GIL (its drop may wait for transfers, and Karu's threads
    /// need the GIL for nothing), then release the exports with it.
    pub(crate) fn release(self, py: Python<'_>) {
        let Pinned { batch, _exports } = self;
        py.detach(|| drop(batch));
        drop(_exports);
    }
}

/// Submit `specs`, the reads with a destination written in place, into the exported buffers
/// of `destinations`; refuses (submitting nothing) reads whose bytes overlap.
pub(crate) fn submit_specs(
    client: &karu::Client,
    specs: Vec<Spec>,
    destinations: Destinations,
    options: &BatchOptions,
) -> PyResult<Pinned> {
    destinations.check_disjoint(specs.iter().filter_map(|s| s.destination.as_ref()))?;
    let reads: Vec<Read<'static>> = specs
        .into_iter()
        .map(|spec| {
            let read = match &spec.destination {
                None => Read::new(&spec.locator, spec.offset, spec.length),
                Some(window) => {
                    let pointer = destinations.pointer(window);
                    // SAFETY: `window.length` bytes at `pointer` lie inside a writable,
                    // C-contiguous buffer exported by `destinations` (checked there), whose
                    // export the returned `Pinned` releases only after dropping the batch;
                    // no two reads' bytes overlap (checked above); the batch is submitted
                    // with `submit_unchecked` below. That the caller leaves the bytes alone
                    // until the read completes is the Python API's rule (see `buffer`).
                    unsafe {
                        Read::from_raw_parts(&spec.locator, spec.offset, pointer, window.length)
                    }
                }
            };
            with_if_match(read.tag(spec.index as u64), spec.if_match)
        })
        .collect();
    // SAFETY: `from_raw_parts`'s contract, kept above; the batch is dropped before the
    // exports (`Pinned`'s field order), and a leaked `Pinned` keeps them exported forever.
    let batch = unsafe { client.submit_unchecked(reads, options) };
    Ok(Pinned {
        batch,
        _exports: destinations.into_exports(),
    })
}

/// Submitted reads: iterating yields `(status name, data, exception or None, index, bytes
/// received)` as each read completes (`index`: its position among the reads submitted;
/// `data` is empty for a read into a caller's buffer); dropping (or `cancel()`) cancels what
/// has not completed.
#[pyclass(module = "karu._native", name = "Batch", frozen)]
pub(crate) struct Batch {
    pub(crate) inner: Mutex<Option<Pinned>>,
    pub(crate) transfers: usize,
}

impl Drop for Batch {
    /// Dropping the batch waits until no transfer references a caller buffer: without the
    /// GIL, so Karu's threads (and other Python threads) are never blocked on it.
    fn drop(&mut self) {
        let pinned = self
            .inner
            .get_mut()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        if let Some(pinned) = pinned {
            Python::attach(|py| pinned.release(py));
        }
    }
}

#[pymethods]
impl Batch {
    /// The next completion, or `None` when every read has completed. `timeout` in seconds
    /// (`None`, infinity or one too long for the clock: wait until one arrives); raises
    /// `TimeoutError` when it passes first.
    #[pyo3(signature = (timeout=None))]
    fn next<'py>(
        &self,
        py: Python<'py>,
        timeout: Option<f64>,
    ) -> PyResult<Option<Bound<'py, PyTuple>>> {
        let limit = match timeout {
            Some(t) if t.is_nan() || t < 0.0 => {
                return Err(PyValueError::new_err(format!(
                    "timeout must be a number >= 0 or None, found {t}"
                )));
            }
            Some(t) => Duration::try_from_secs_f64(t).ok(),
            None => None,
        };
        let mut waited = Duration::ZERO;
        loop {
            let step = limit.map_or(SIGNAL_CHECK, |l| (l - waited).min(SIGNAL_CHECK));
            // The lock is taken without the GIL (and released before it is taken again), so
            // threads sharing a batch never wait for each other while holding the GIL.
            let next = py.detach(|| {
                let guard = self.inner.lock().unwrap_or_else(|p| p.into_inner());
                guard.as_ref().map(|pinned| pinned.batch.next_timeout(step))
            });
            let Some(next) = next else {
                return Ok(None);
            };
            match next {
                Next::Completion(completion) => {
                    return convert::completion_tuple(py, completion).map(Some);
                }
                Next::Drained => return Ok(None),
                Next::TimedOut => {
                    py.check_signals()?;
                    waited += step;
                    if limit.is_some_and(|l| waited >= l) {
                        return Err(pyo3::exceptions::PyTimeoutError::new_err(
                            "no read completed within the timeout",
                        ));
                    }
                }
            }
        }
    }

    /// Feed every remaining completion to `each(tuple)` from Karu's side, then `each(None)`
    /// (for asyncio: the Python half queues them on its loop). The batch is moved out.
    fn stream(&self, each: Py<PyAny>) -> PyResult<runtime::Task> {
        let batch = self
            .inner
            .lock()
            .map_err(|_| PyValueError::new_err("a batch's lock was poisoned"))?
            .take()
            .ok_or_else(|| PyValueError::new_err("this batch was already consumed"))?;
        runtime::stream(each, batch)
    }

    /// Cancel the reads that have not completed and release the batch, waiting (without the
    /// GIL) until no transfer references a caller buffer.
    fn cancel(&self, py: Python<'_>) {
        let pinned = self.inner.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(pinned) = pinned {
            pinned.release(py);
        }
    }

    /// The transfers the planner made for this batch.
    #[getter]
    fn transfers(&self) -> usize {
        self.transfers
    }
}
