//! `karu._native`: the Rust half of Karu's Python package. The Python half (`python/karu/`)
//! gives it its public shape: `karu.Client`, the exceptions, asyncio, fsspec and the readers.
//!
//! Every method that waits for Karu releases the GIL while it waits ([`Python::detach`]), so
//! many Python threads can share one client. Async methods run their Karu future on a small
//! runtime of this module ([`spawn`]) and hand the outcome to a Python callback, which the
//! Python half turns into the result of an asyncio future on its loop.
//!
//! Failures become the exceptions of `karu._errors` (one class per [`karu::Status`]), built
//! by [`error`] with the status's name, the HTTP status, and for a range past the end the
//! bytes that exist.

mod convert;
mod runtime;

use std::sync::Mutex;
use std::time::Duration;

use karu::{Completion, Locator, Next, Read, Status};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList, PyTuple};

use convert::{Outcome, completion_outcome, ends_tuple, error};

/// A Karu client: its configuration snapshot, engine and providers.
#[pyclass(module = "karu._native", name = "Client", frozen)]
struct Client {
    inner: karu::Client,
}

/// How long a blocking wait sleeps in Rust before it looks at Python's signals (Ctrl-C).
const SIGNAL_CHECK: Duration = Duration::from_millis(100);

#[pymethods]
impl Client {
    /// `config`: a TOML config file layered above the project file; `settings`: dotted keys
    /// with JSON values (`("planner.max_gap", "\"64KiB\"")`); `path_settings`: `(prefix, key,
    /// value)` the same way; `isolated`: read neither the user nor the project config file.
    #[new]
    #[pyo3(signature = (config=None, settings=Vec::new(), path_settings=Vec::new(), isolated=false))]
    fn new(
        py: Python<'_>,
        config: Option<std::path::PathBuf>,
        settings: Vec<(String, String)>,
        path_settings: Vec<(String, String, String)>,
        isolated: bool,
    ) -> PyResult<Self> {
        let mut builder = karu::Client::builder();
        if isolated {
            builder = builder.user_config_file(None).project_config_file(None);
        }
        if let Some(path) = config {
            builder = builder.config_file(path);
        }
        for (key, value) in settings {
            builder = builder.set(&key, convert::json(&key, &value)?);
        }
        for (prefix, key, value) in path_settings {
            builder = builder.path_set(&prefix, &key, convert::json(&key, &value)?);
        }
        let inner = py
            .detach(|| builder.build())
            .map_err(|e| error(py, &e, None))?;
        Ok(Client { inner })
    }

    /// `length` bytes at `offset`.
    fn read<'py>(
        &self,
        py: Python<'py>,
        address: &str,
        offset: u64,
        length: u64,
    ) -> PyResult<Bound<'py, PyBytes>> {
        let locator = self.locate(py, address)?;
        let batch = self.inner.submit([Read::new(&locator, offset, length)]);
        let completion = wait_one(py, &batch)?;
        match completion_outcome(completion) {
            Outcome::Ok(bytes) => Ok(PyBytes::new(py, &bytes)),
            Outcome::Err(e, prefix) => Err(error(py, &e, Some(&prefix))),
        }
    }

    /// Fill `length` bytes at `address` (a writable, C-contiguous buffer the Python half has
    /// exported and keeps exported for the whole call) from `offset`, in place.
    ///
    /// The Python half passes the address of a buffer it holds exported (a `ctypes` array made
    /// `from_buffer` of the caller's object) until this call returns; the call returns only
    /// when no Karu thread references the buffer any more ([`karu::Client::read_into`] waits
    /// for that).
    fn read_into_address(
        &self,
        py: Python<'_>,
        address: &str,
        offset: u64,
        buffer: usize,
        length: usize,
    ) -> PyResult<()> {
        if buffer == 0 && length != 0 {
            return Err(PyValueError::new_err("a null buffer"));
        }
        let locator = self.locate(py, address)?;
        let pointer = convert::SendPtr(buffer as *mut u8);
        let result = py.detach(move || {
            let pointer = pointer;
            let destination: &mut [u8] = if length == 0 {
                &mut []
            } else {
                // SAFETY: `buffer` is the address of a writable, contiguous buffer of `length`
                // bytes that the Python half keeps exported (so it neither moves nor is freed)
                // until this call returns, and to which nothing else writes meanwhile (the
                // caller handed it to this read); `read_into` returns only when no transfer
                // references the slice.
                unsafe { std::slice::from_raw_parts_mut(pointer.0, length) }
            };
            self.inner.read_into(&locator, offset, destination)
        });
        result.map_err(|e| error(py, &e, None))
    }

    /// One batch of `(address, offset, length)` reads, across objects; each read's bytes, or
    /// its exception when it failed (raised at once instead if `strict`).
    fn read_many<'py>(
        &self,
        py: Python<'py>,
        reads: Vec<(String, u64, u64)>,
        strict: bool,
    ) -> PyResult<Bound<'py, PyList>> {
        // An address that does not resolve fails its read alone (or the call, if strict).
        let mut failures: Vec<Option<karu::Error>> = Vec::with_capacity(reads.len());
        let mut reads_to_submit = Vec::with_capacity(reads.len());
        for (index, (address, offset, length)) in reads.iter().enumerate() {
            match self.inner.locate(address) {
                Ok(locator) => {
                    reads_to_submit.push(Read::new(&locator, *offset, *length).tag(index as u64));
                    failures.push(None);
                }
                Err(e) if strict => return Err(error(py, &e, None)),
                Err(e) => failures.push(Some(e)),
            }
        }
        let batch = self.inner.submit(reads_to_submit);
        let completions = py.detach(|| batch.wait());
        let mut out: Vec<Option<Py<PyAny>>> = (0..reads.len()).map(|_| None).collect();
        for completion in completions {
            let slot = completion.tag() as usize;
            let value = match completion_outcome(completion) {
                Outcome::Ok(bytes) => PyBytes::new(py, &bytes).into_any().unbind(),
                Outcome::Err(e, prefix) => {
                    let err = error(py, &e, Some(&prefix));
                    if strict {
                        return Err(err);
                    }
                    err.into_value(py).into_any()
                }
            };
            if let Some(place) = out.get_mut(slot) {
                *place = Some(value);
            }
        }
        let mut items = Vec::with_capacity(out.len());
        for (slot, value) in out.into_iter().enumerate() {
            match (value, failures.get_mut(slot).and_then(Option::take)) {
                (Some(value), _) => items.push(value),
                (None, Some(e)) => items.push(error(py, &e, None).into_value(py).into_any()),
                (None, None) => {
                    let e = karu::Error::new(Status::Internal, "a read produced no completion");
                    return Err(error(py, &e, None));
                }
            }
        }
        PyList::new(py, items)
    }

    /// `(size, etag)`; the size is `None` for a device or FIFO.
    fn stat(&self, py: Python<'_>, address: &str) -> PyResult<(Option<u64>, Option<String>)> {
        let locator = self.locate(py, address)?;
        let info = py
            .detach(|| self.inner.stat(&locator))
            .map_err(|e| error(py, &e, None))?;
        Ok((info.size, info.etag))
    }

    /// `(head, tail, size, etag)`.
    fn read_ends<'py>(
        &self,
        py: Python<'py>,
        address: &str,
        head: u64,
        tail: u64,
    ) -> PyResult<Bound<'py, PyTuple>> {
        let locator = self.locate(py, address)?;
        let ends = py
            .detach(|| self.inner.read_ends(&locator, head, tail))
            .map_err(|e| error(py, &e, None))?;
        ends_tuple(py, ends)
    }

    /// Submit `(address, offset, length, tag)` reads; a batch yielding completions as they
    /// arrive. An address that does not resolve makes this raise (nothing is submitted).
    fn submit(&self, py: Python<'_>, reads: Vec<(String, u64, u64, u64)>) -> PyResult<Batch> {
        let mut batch_reads = Vec::with_capacity(reads.len());
        for (address, offset, length, tag) in reads {
            let locator = self.locate(py, &address)?;
            batch_reads.push(Read::new(&locator, offset, length).tag(tag));
        }
        let batch = self.inner.submit(batch_reads);
        let transfers = batch.stats().transfers;
        Ok(Batch {
            inner: Mutex::new(Some(batch)),
            transfers,
        })
    }

    /// [`Client::read`] on asyncio: `done(ok, value)` is called from a Karu thread (with the
    /// GIL) with the bytes or the exception. Returns a handle whose `cancel()` drops the read.
    fn read_async(
        &self,
        py: Python<'_>,
        address: &str,
        offset: u64,
        length: u64,
        done: Py<PyAny>,
    ) -> PyResult<runtime::Task> {
        let locator = self.locate(py, address)?;
        let client = self.inner.clone();
        runtime::spawn(py, done, async move {
            let mut batch = client.submit([Read::new(&locator, offset, length)]);
            let completion = runtime::next_completion(&mut batch).await;
            Box::new(
                move |py: Python<'_>| match completion.map(completion_outcome) {
                    Some(Outcome::Ok(bytes)) => Ok(PyBytes::new(py, &bytes).into_any().unbind()),
                    Some(Outcome::Err(e, prefix)) => Err(error(py, &e, Some(&prefix))),
                    None => Err(error(py, &no_completion(), None)),
                },
            ) as runtime::Settle
        })
    }

    /// [`Client::read_many`] on asyncio (one batch); `done` as for `read_async`.
    fn read_many_async(
        &self,
        py: Python<'_>,
        reads: Vec<(String, u64, u64)>,
        strict: bool,
        done: Py<PyAny>,
    ) -> PyResult<runtime::Task> {
        let mut batch_reads = Vec::with_capacity(reads.len());
        for (index, (address, offset, length)) in reads.iter().enumerate() {
            let locator = self.locate(py, address)?;
            batch_reads.push(Read::new(&locator, *offset, *length).tag(index as u64));
        }
        let count = reads.len();
        let client = self.inner.clone();
        runtime::spawn(py, done, async move {
            let mut batch = client.submit(batch_reads);
            let mut completions: Vec<Option<Completion>> = (0..count).map(|_| None).collect();
            while let Some(completion) = runtime::next_completion(&mut batch).await {
                let slot = completion.tag() as usize;
                if let Some(place) = completions.get_mut(slot) {
                    *place = Some(completion);
                }
            }
            Box::new(move |py: Python<'_>| {
                let mut items = Vec::with_capacity(count);
                for completion in completions {
                    match completion.map(completion_outcome) {
                        Some(Outcome::Ok(bytes)) => {
                            items.push(PyBytes::new(py, &bytes).into_any().unbind())
                        }
                        Some(Outcome::Err(e, prefix)) => {
                            let err = error(py, &e, Some(&prefix));
                            if strict {
                                return Err(err);
                            }
                            items.push(err.into_value(py).into_any());
                        }
                        None => return Err(error(py, &no_completion(), None)),
                    }
                }
                Ok(PyList::new(py, items)?.into_any().unbind())
            }) as runtime::Settle
        })
    }

    /// [`Client::stat`] on asyncio; `done` as for `read_async`.
    fn stat_async(
        &self,
        py: Python<'_>,
        address: &str,
        done: Py<PyAny>,
    ) -> PyResult<runtime::Task> {
        let locator = self.locate(py, address)?;
        let stat = self.inner.stat_async(&locator);
        runtime::spawn(py, done, async move {
            let result = stat.await;
            Box::new(move |py: Python<'_>| match result {
                Ok(info) => Ok((info.size, info.etag)
                    .into_pyobject(py)?
                    .into_any()
                    .unbind()),
                Err(e) => Err(error(py, &e, None)),
            }) as runtime::Settle
        })
    }

    /// [`Client::read_ends`] on asyncio; `done` as for `read_async`.
    fn read_ends_async(
        &self,
        py: Python<'_>,
        address: &str,
        head: u64,
        tail: u64,
        done: Py<PyAny>,
    ) -> PyResult<runtime::Task> {
        let locator = self.locate(py, address)?;
        let ends = self.inner.read_ends_async(&locator, head, tail);
        runtime::spawn(py, done, async move {
            let result = ends.await;
            Box::new(move |py: Python<'_>| match result {
                Ok(ends) => Ok(ends_tuple(py, ends)?.into_any().unbind()),
                Err(e) => Err(error(py, &e, None)),
            }) as runtime::Settle
        })
    }

    /// Remote requests sent since the client started (every attempt), body bytes received,
    /// retries.
    fn transport_stats(&self) -> (u64, u64, u64) {
        let stats = self.inner.transport_stats();
        (stats.requests, stats.body_bytes, stats.retries)
    }

    fn __repr__(&self) -> String {
        "karu.Client(..)".to_owned()
    }
}

impl Client {
    fn locate(&self, py: Python<'_>, address: &str) -> PyResult<Locator> {
        self.inner.locate(address).map_err(|e| error(py, &e, None))
    }
}

fn no_completion() -> karu::Error {
    karu::Error::new(Status::Internal, "a read produced no completion")
}

/// The one completion of a one-read batch, waited for without the GIL.
fn wait_one(py: Python<'_>, batch: &karu::Batch) -> PyResult<Completion> {
    loop {
        match py.detach(|| batch.next_timeout(SIGNAL_CHECK)) {
            Next::Completion(completion) => return Ok(completion),
            Next::TimedOut => py.check_signals()?,
            Next::Drained => return Err(error(py, &no_completion(), None)),
        }
    }
}

/// Submitted reads: iterating yields `(tag, status name, data, exception or None)` as each
/// read completes; dropping (or `cancel()`) cancels what has not completed.
#[pyclass(module = "karu._native", name = "Batch", frozen)]
struct Batch {
    inner: Mutex<Option<karu::Batch>>,
    transfers: usize,
}

#[pymethods]
impl Batch {
    /// The next completion, or `None` when every read has completed. `timeout` in seconds
    /// (`None`: wait until one arrives); raises `TimeoutError` when it passes first.
    #[pyo3(signature = (timeout=None))]
    fn next<'py>(
        &self,
        py: Python<'py>,
        timeout: Option<f64>,
    ) -> PyResult<Option<Bound<'py, PyTuple>>> {
        let limit = match timeout {
            Some(t) if !(t >= 0.0 && t.is_finite()) => {
                return Err(PyValueError::new_err(
                    "timeout must be a finite number >= 0",
                ));
            }
            Some(t) => Some(Duration::from_secs_f64(t)),
            None => None,
        };
        let mut waited = Duration::ZERO;
        loop {
            let step = limit.map_or(SIGNAL_CHECK, |l| (l - waited).min(SIGNAL_CHECK));
            // The lock is taken without the GIL (and released before it is taken again), so
            // threads sharing a batch never wait for each other while holding the GIL.
            let next = py.detach(|| {
                let guard = self.inner.lock().unwrap_or_else(|p| p.into_inner());
                guard.as_ref().map(|batch| batch.next_timeout(step))
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

    /// Cancel the reads that have not completed (they complete as `cancelled`... once the
    /// batch is dropped: here the batch is released at once).
    fn cancel(&self) {
        if let Ok(mut guard) = self.inner.lock() {
            guard.take();
        }
    }

    /// The transfers the planner made for this batch.
    #[getter]
    fn transfers(&self) -> usize {
        self.transfers
    }
}

/// The extension module.
#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<Client>()?;
    m.add_class::<Batch>()?;
    m.add_class::<runtime::Task>()?;
    m.add(
        "STATUSES",
        Status::ALL.iter().map(|s| s.name()).collect::<Vec<_>>(),
    )?;
    Ok(())
}
