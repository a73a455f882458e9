//! `karu._native`: the Rust half of Karu's Python package. The Python half (`python/karu/`)
//! gives it its public shape: `karu.Client`, the exceptions, asyncio, fsspec and the readers.
//!
//! Every method that waits for Karu releases the GIL while it waits ([`Python::detach`]), so
//! many Python threads can share one client. Async methods run their Karu future on a small
//! runtime of this module (`runtime::spawn`) and hand the outcome to a Python callback, which
//! the Python half turns into the result of an asyncio future on its loop.
//!
//! Failures become the exceptions of `karu._errors` (one class per [`karu::Status`]), built
//! by `convert::error` with the status's name, the HTTP status, and for a range past the end
//! the bytes that exist.

mod batch;
mod buffer;
mod convert;
mod credentials;
mod runtime;

use std::sync::Mutex;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use batch::{Batch, Spec, submit_specs};
use buffer::Destinations;
use karu::{BatchOptions, Completion, Locator, Next, Read, Status};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList, PyTuple};

use convert::{Outcome, completion_outcome, ends_tuple, error};

/// A Karu client: its configuration snapshot, engine and providers.
#[pyclass(module = "karu._native", name = "Client", frozen)]
struct Client {
    inner: karu::Client,
    /// The config file given at construction, as `(its absolute path, its text)`.
    captured: Option<(String, String)>,
}

/// The most bytes a config file given to `karu.Client(config=...)` may hold (Karu's limit for
/// every configuration file).
const CONFIG_FILE_LIMIT: u64 = 4 << 20;

/// `(absolute path, text)` of a config file, read as Karu reads configuration files (a
/// regular file, UTF-8, at most [`CONFIG_FILE_LIMIT`] bytes), or `None` when it cannot be.
fn read_config_file(path: &std::path::Path) -> Option<(String, String)> {
    let path = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    let text = karu::config::read_regular_text(&path, CONFIG_FILE_LIMIT).ok()?;
    Some((path.display().to_string(), text))
}

/// Configuration errors in the words of `karu.Client`'s arguments, not the Rust API's.
fn python_wording() -> karu::config::Wording {
    karu::config::Wording::new(
        "given as karu.Client(config=...)",
        "karu.Client keyword",
        "path rules are given as karu.Client(paths={prefix: {key: value}})",
    )
}

/// How long a blocking wait sleeps in Rust before it looks at Python's signals (Ctrl-C).
pub(crate) const SIGNAL_CHECK: Duration = Duration::from_millis(100);

#[pymethods]
impl Client {
    /// `config`: a TOML config file layered above the project file; `settings`: dotted keys
    /// with JSON values (`("planner.max_gap", "\"64KiB\"")`); `path_settings`: `(prefix, key,
    /// value)` the same way; `isolated`: read neither the user nor the project config file;
    /// `config_text`: `(name, text)` of a config file captured by another client (an unpickled
    /// one), layered where the file was.
    ///
    /// The config file is read once, here, and its text kept ([`Client::captured_config`]):
    /// a pickled client carries it to processes where the file may not exist.
    /// `credentials`: `(family, callable)` credential callbacks (`credentials::PyCallback`),
    /// a family of `None` standing for every family that takes a key pair or a token.
    #[new]
    #[pyo3(signature = (config=None, settings=Vec::new(), path_settings=Vec::new(), isolated=false, config_text=None, credentials=Vec::new()))]
    fn new(
        py: Python<'_>,
        config: Option<std::path::PathBuf>,
        settings: Vec<(String, String)>,
        path_settings: Vec<(String, String, String)>,
        isolated: bool,
        config_text: Option<(String, String)>,
        credentials: Vec<(Option<String>, Py<PyAny>)>,
    ) -> PyResult<Self> {
        let mut builder = karu::Client::builder().wording(python_wording());
        if isolated {
            builder = builder.user_config_file(None).project_config_file(None);
        }
        let mut captured = config_text;
        if let Some(path) = config {
            match read_config_file(&path) {
                Some(named) => captured = Some(named),
                // Not readable as a config file: the build says why, in the words above.
                None => builder = builder.config_file(path),
            }
        }
        if let Some((name, text)) = &captured {
            builder = builder.config_toml(name.clone(), text.clone());
        }
        for (key, value) in settings {
            builder = builder.set(&key, convert::json(&key, &value)?);
        }
        for (prefix, key, value) in path_settings {
            builder = builder.path_set(&prefix, &key, convert::json(&key, &value)?);
        }
        for (family, callable) in credentials {
            let families = match family {
                Some(family) => vec![family],
                None => credentials::families(),
            };
            for family in families {
                let callback = credentials::PyCallback::new(family.clone(), callable.clone_ref(py));
                builder = builder.credential_callback(&family, callback);
            }
        }
        let inner = py
            .detach(|| builder.build())
            .map_err(|e| error(py, &e, None))?;
        Ok(Client { inner, captured })
    }

    /// `(name, text)` of the config file this client was given (as read when it was built),
    /// or `None`.
    fn captured_config(&self) -> Option<(String, String)> {
        self.captured.clone()
    }

    /// `length` bytes at `offset` (of the object whose ETag is `if_match`, if given).
    #[pyo3(signature = (address, offset, length, if_match=None))]
    fn read<'py>(
        &self,
        py: Python<'py>,
        address: &str,
        offset: u64,
        length: u64,
        if_match: Option<String>,
    ) -> PyResult<Bound<'py, PyBytes>> {
        let locator = self.locate(py, address)?;
        let batch = self
            .inner
            .submit([with_if_match(Read::new(&locator, offset, length), if_match)]);
        let completion = wait_one(py, &batch)?;
        match completion_outcome(completion) {
            Outcome::Ok(bytes) => Ok(PyBytes::new(py, &bytes)),
            Outcome::Err(e, prefix) => Err(error(py, &e, Some(&prefix))),
        }
    }

    /// Fill `buffer` (any object exporting a writable, C-contiguous buffer) from `offset`,
    /// in place; the bytes received, or the exception (for a range past the end, its
    /// `received` bytes are at the buffer's start).
    ///
    /// The buffer stays exported (it can be neither resized nor freed) until the read's batch
    /// has been dropped, which waits until no Karu thread writes into it, on success, failure
    /// and interruption alike: only then does this call return.
    #[pyo3(signature = (address, offset, buffer, if_match=None))]
    fn read_into(
        &self,
        py: Python<'_>,
        address: &str,
        offset: u64,
        buffer: &Bound<'_, PyAny>,
        if_match: Option<String>,
    ) -> PyResult<u64> {
        let locator = self.locate(py, address)?;
        let mut destinations = Destinations::default();
        let window = destinations.window(buffer, 0, None, "read_into")?;
        let length = window.length as u64;
        let spec = Spec {
            index: 0,
            locator,
            offset,
            length,
            destination: Some(window),
            if_match,
        };
        let batch = submit_specs(&self.inner, vec![spec], destinations, &BatchOptions::new())?;
        let completion = wait_one(py, &batch.batch);
        batch.release(py);
        let completion = completion?;
        let received = completion.bytes_received();
        match completion.error() {
            None => Ok(received),
            Some(e) => {
                let e = convert::with_end_evidence(e.clone(), offset, length, received);
                Err(error(py, &e, None))
            }
        }
    }

    /// One batch of `(address, offset, length)` reads, across objects; each read's bytes, or
    /// its exception when it failed (raised at once instead if `strict`). `max_gap`: the
    /// planner's merge gap for this batch (the client's setting when `None`).
    #[pyo3(signature = (reads, strict, max_gap=None))]
    fn read_many<'py>(
        &self,
        py: Python<'py>,
        reads: Vec<ManyRead>,
        strict: bool,
        max_gap: Option<u64>,
    ) -> PyResult<Bound<'py, PyList>> {
        let (reads_to_submit, mut failures) = self.locate_many(py, &reads, strict)?;
        let batch = self
            .inner
            .submit_with(reads_to_submit, &batch_options(max_gap, None));
        let completions = wait_all(py, &batch)?;
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

    /// `(size, etag, last_modified)` ([`Stat`]); the size is `None` for a device or FIFO.
    fn stat(&self, py: Python<'_>, address: &str) -> PyResult<Stat> {
        let locator = self.locate(py, address)?;
        let info = runtime::block_on(py, self.inner.stat_async(&locator))?
            .map_err(|e| error(py, &e, None))?;
        Ok(stat_tuple(info))
    }

    /// `(head, tail, size, etag)`; from `offset` on, the object seen from there (its size
    /// is what lies past `offset`).
    #[pyo3(signature = (address, head, tail, offset=0))]
    fn read_ends<'py>(
        &self,
        py: Python<'py>,
        address: &str,
        head: u64,
        tail: u64,
        offset: u64,
    ) -> PyResult<Bound<'py, PyTuple>> {
        let locator = self.locate_from(py, address, offset)?;
        let ends = runtime::block_on(py, self.inner.read_ends_async(&locator, head, tail))?
            .map_err(|e| error(py, &e, None))?;
        ends_tuple(py, ends)
    }

    /// Submit `(address, offset, length, buffer, at, if_match)` reads ([`SubmittedRead`]); a
    /// batch yielding completions as they arrive, and `(position, exception)` of each read
    /// whose address does not resolve (which fails alone: it is not submitted). A read with a
    /// buffer is written there in place, and the batch keeps the buffer exported until no
    /// Karu thread writes into it. A buffer that is read-only, not C-contiguous or too short,
    /// or two reads' bytes that overlap, make this raise (nothing is submitted). `max_gap`
    /// and `max_span`: the planner's merge gap and largest merged span for this batch (the
    /// client's when `None`); `max_in_flight`: the most transfers of the batch in flight at
    /// once (unbounded but by the client's concurrency when `None`).
    #[pyo3(signature = (reads, max_gap=None, max_span=None, max_in_flight=None))]
    fn submit(
        &self,
        py: Python<'_>,
        reads: Vec<SubmittedRead>,
        max_gap: Option<u64>,
        max_span: Option<u64>,
        max_in_flight: Option<usize>,
    ) -> PyResult<(Batch, Vec<Unresolved>)> {
        let Located {
            specs,
            destinations,
            failures: unresolved,
        } = self.locate_specs(py, reads, "submit")?;
        let failures: Vec<Unresolved> = unresolved
            .into_iter()
            .map(|(index, e)| (index, error(py, &e, None).into_value(py).into_any()))
            .collect();
        let mut options = batch_options(max_gap, max_span);
        if let Some(limit) = max_in_flight {
            options = options.max_in_flight(limit);
        }
        let batch = submit_specs(&self.inner, specs, destinations, &options)?;
        let transfers = batch.batch.stats().transfers;
        let batch = Batch {
            inner: Mutex::new(Some(batch)),
            transfers,
        };
        Ok((batch, failures))
    }

    /// [`Client::read`] on asyncio: `done(ok, value)` is called from a Karu thread (with the
    /// GIL) with the bytes or the exception. Returns a handle whose `cancel()` drops the read.
    #[pyo3(signature = (address, offset, length, done, if_match=None))]
    fn read_async(
        &self,
        py: Python<'_>,
        address: &str,
        offset: u64,
        length: u64,
        done: Py<PyAny>,
        if_match: Option<String>,
    ) -> PyResult<runtime::Task> {
        let locator = self.locate(py, address)?;
        let client = self.inner.clone();
        runtime::spawn(py, done, async move {
            let read = with_if_match(Read::new(&locator, offset, length), if_match);
            let mut batch = client.submit([read]);
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
    #[pyo3(signature = (reads, strict, done, max_gap=None))]
    fn read_many_async(
        &self,
        py: Python<'_>,
        reads: Vec<ManyRead>,
        strict: bool,
        done: Py<PyAny>,
        max_gap: Option<u64>,
    ) -> PyResult<runtime::Task> {
        let (batch_reads, mut failures) = self.locate_many(py, &reads, strict)?;
        let count = reads.len();
        let client = self.inner.clone();
        let options = batch_options(max_gap, None);
        runtime::spawn(py, done, async move {
            let mut batch = client.submit_with(batch_reads, &options);
            let mut completions: Vec<Option<Completion>> = (0..count).map(|_| None).collect();
            while let Some(completion) = runtime::next_completion(&mut batch).await {
                let slot = completion.tag() as usize;
                if let Some(place) = completions.get_mut(slot) {
                    *place = Some(completion);
                }
            }
            Box::new(move |py: Python<'_>| {
                let mut items = Vec::with_capacity(count);
                for (slot, completion) in completions.into_iter().enumerate() {
                    if completion.is_none()
                        && let Some(e) = failures.get_mut(slot).and_then(Option::take)
                    {
                        items.push(error(py, &e, None).into_value(py).into_any());
                        continue;
                    }
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

    /// [`Client::read_into`] on asyncio, in place: `done(True, received)` or
    /// `done(False, exception)`. The buffer's export is held by the running future and
    /// released only after its batch was dropped, which waits until no transfer writes into
    /// the buffer: whether the read completes or the task is cancelled.
    #[pyo3(signature = (address, offset, buffer, done, if_match=None))]
    fn read_into_async(
        &self,
        py: Python<'_>,
        address: &str,
        offset: u64,
        buffer: &Bound<'_, PyAny>,
        done: Py<PyAny>,
        if_match: Option<String>,
    ) -> PyResult<runtime::Task> {
        let locator = self.locate(py, address)?;
        let mut destinations = Destinations::default();
        let window = destinations.window(buffer, 0, None, "read_into_async")?;
        let length = window.length as u64;
        let spec = Spec {
            index: 0,
            locator,
            offset,
            length,
            destination: Some(window),
            if_match,
        };
        let mut batch = submit_specs(&self.inner, vec![spec], destinations, &BatchOptions::new())?;
        runtime::spawn(py, done, async move {
            let completion = runtime::next_completion(&mut batch.batch).await;
            drop(batch);
            Box::new(move |py: Python<'_>| {
                let Some(completion) = completion else {
                    return Err(error(py, &no_completion(), None));
                };
                let received = completion.bytes_received();
                match completion.error() {
                    None => Ok(received.into_pyobject(py)?.into_any().unbind()),
                    Some(e) => {
                        let e = convert::with_end_evidence(e.clone(), offset, length, received);
                        Err(error(py, &e, None))
                    }
                }
            }) as runtime::Settle
        })
    }

    /// Submit [`SubmittedRead`]s into caller buffers (as [`Client::submit`] takes them) and
    /// call `done(True, results)` once, when every read has completed: `results` holds
    /// `(index, bytes received, exception or None)` per read (a read whose address does not
    /// resolve: its exception, nothing received). One callback for the whole batch, however
    /// many reads it has; one export per buffer, however many reads land in it.
    fn read_many_into_async(
        &self,
        py: Python<'_>,
        reads: Vec<SubmittedRead>,
        done: Py<PyAny>,
    ) -> PyResult<runtime::Task> {
        let count = reads.len();
        let Located {
            specs,
            destinations,
            failures,
        } = self.locate_specs(py, reads, "read_batch_into_async")?;
        // Each submitted read's extent by index, for the evidence of a read that ends early.
        let mut extents = vec![(0, 0); count];
        for spec in &specs {
            extents[spec.index] = (spec.offset, spec.length);
        }
        let mut batch = submit_specs(&self.inner, specs, destinations, &BatchOptions::new())?;
        runtime::spawn(py, done, async move {
            let mut outcomes = Vec::new();
            while let Some(completion) = runtime::next_completion(&mut batch.batch).await {
                let index = completion.tag() as usize;
                let received = completion.bytes_received();
                outcomes.push((index, received, completion.error().cloned()));
            }
            drop(batch);
            Box::new(move |py: Python<'_>| {
                let mut items = Vec::with_capacity(outcomes.len() + failures.len());
                for (index, e) in failures {
                    let exception = error(py, &e, None).into_value(py).into_any();
                    items.push((index, 0u64, Some(exception)).into_pyobject(py)?);
                }
                for (index, received, e) in outcomes {
                    let exception = e.map(|e| {
                        let (offset, length) = extents.get(index).copied().unwrap_or((0, 0));
                        let e = convert::with_end_evidence(e, offset, length, received);
                        error(py, &e, None).into_value(py).into_any()
                    });
                    items.push((index, received, exception).into_pyobject(py)?);
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
                Ok(info) => Ok(stat_tuple(info).into_pyobject(py)?.into_any().unbind()),
                Err(e) => Err(error(py, &e, None)),
            }) as runtime::Settle
        })
    }

    /// [`Client::read_ends`] on asyncio; `done` as for `read_async`.
    #[pyo3(signature = (address, head, tail, done, offset=0))]
    fn read_ends_async(
        &self,
        py: Python<'_>,
        address: &str,
        head: u64,
        tail: u64,
        done: Py<PyAny>,
        offset: u64,
    ) -> PyResult<runtime::Task> {
        let locator = self.locate_from(py, address, offset)?;
        let ends = self.inner.read_ends_async(&locator, head, tail);
        runtime::spawn(py, done, async move {
            let result = ends.await;
            Box::new(move |py: Python<'_>| match result {
                Ok(ends) => Ok(ends_tuple(py, ends)?.into_any().unbind()),
                Err(e) => Err(error(py, &e, None)),
            }) as runtime::Settle
        })
    }

    /// Remote requests sent since the client started (every attempt and duplicate), body
    /// bytes received, retries, duplicates of waiting requests sent and won.
    fn transport_stats(&self) -> (u64, u64, u64, u64, u64) {
        let stats = self.inner.transport_stats();
        (
            stats.requests,
            stats.body_bytes,
            stats.retries,
            stats.hedges,
            stats.hedges_won,
        )
    }

    fn __repr__(&self) -> String {
        "karu.Client(..)".to_owned()
    }
}

impl Client {
    fn locate(&self, py: Python<'_>, address: &str) -> PyResult<Locator> {
        self.inner.locate(address).map_err(|e| error(py, &e, None))
    }

    /// The reads of `submit` and `read_many_into_async` located, each tagged with its position,
    /// with their buffers exported (for the method `what`, named in errors); by position, the
    /// error of each whose address does not resolve (that read fails alone, and its buffer is
    /// not exported).
    fn locate_specs(
        &self,
        py: Python<'_>,
        reads: Vec<SubmittedRead>,
        what: &str,
    ) -> PyResult<Located> {
        let mut specs = Vec::with_capacity(reads.len());
        let mut destinations = Destinations::default();
        let mut failures = Vec::new();
        for (index, (address, offset, length, buffer, at, if_match)) in
            reads.into_iter().enumerate()
        {
            let locator = match self.inner.locate(&address) {
                Ok(locator) => locator,
                Err(e) => {
                    failures.push((index, e));
                    continue;
                }
            };
            let (length, destination) = match (buffer, length) {
                (Some(buffer), length) => {
                    let what = format!("{what}: read {index}");
                    let window = destinations.window(buffer.bind(py), at, length, &what)?;
                    (window.length as u64, Some(window))
                }
                (None, Some(length)) => (length, None),
                (None, None) => {
                    return Err(PyValueError::new_err(format!(
                        "{what}: read {index} has neither a length nor a buffer"
                    )));
                }
            };
            specs.push(Spec {
                index,
                locator,
                offset,
                length,
                destination,
                if_match,
            });
        }
        Ok(Located {
            specs,
            destinations,
            failures,
        })
    }

    /// The object at `address` as seen from `offset` on (a window to its end).
    fn locate_from(&self, py: Python<'_>, address: &str, offset: u64) -> PyResult<Locator> {
        let locator = self.locate(py, address)?;
        if offset == 0 {
            return Ok(locator);
        }
        locator
            .with_window(offset, None)
            .map_err(|e| error(py, &e, None))
    }

    /// The reads of `read_many` (each tagged with its position), and by position the error
    /// of each whose address does not resolve: that read fails alone, or the call, if
    /// `strict`.
    fn locate_many(
        &self,
        py: Python<'_>,
        reads: &[ManyRead],
        strict: bool,
    ) -> PyResult<(Vec<Read<'static>>, Vec<Option<karu::Error>>)> {
        let mut failures = Vec::with_capacity(reads.len());
        let mut located = Vec::with_capacity(reads.len());
        for (index, (address, offset, length, if_match)) in reads.iter().enumerate() {
            match self.inner.locate(address) {
                Ok(locator) => {
                    let read = Read::new(&locator, *offset, *length).tag(index as u64);
                    located.push(with_if_match(read, if_match.clone()));
                    failures.push(None);
                }
                Err(e) if strict => return Err(error(py, &e, None)),
                Err(e) => failures.push(Some(e)),
            }
        }
        Ok((located, failures))
    }
}

/// What `stat` gives Python: the size, the strong ETag and the modification time in seconds
/// since the Unix epoch (negative before it), which `karu.ObjectInfo` turns into a `datetime`.
type Stat = (Option<u64>, Option<String>, Option<f64>);

fn stat_tuple(info: karu::ObjectInfo) -> Stat {
    (info.size, info.etag, info.last_modified.map(epoch_seconds))
}

/// `time` in seconds since the Unix epoch, negative before it.
fn epoch_seconds(time: SystemTime) -> f64 {
    match time.duration_since(UNIX_EPOCH) {
        Ok(after) => after.as_secs_f64(),
        Err(before) => -before.duration().as_secs_f64(),
    }
}

/// A batch's options: the client's, with `max_gap` as the planner's merge gap and `max_span`
/// as its largest merged span when given.
fn batch_options(max_gap: Option<u64>, max_span: Option<u64>) -> BatchOptions {
    let options = match max_gap {
        Some(gap) => BatchOptions::new().max_gap(gap),
        None => BatchOptions::new(),
    };
    match max_span {
        Some(span) => options.max_span(span),
        None => options,
    }
}

fn no_completion() -> karu::Error {
    karu::Error::new(Status::Internal, "a read produced no completion")
}

fn with_if_match(read: Read<'static>, if_match: Option<String>) -> Read<'static> {
    match if_match {
        Some(etag) => read.if_match(etag),
        None => read,
    }
}

/// The one completion of a one-read batch, waited for without the GIL; Python's signal
/// handlers run every [`SIGNAL_CHECK`] (a `KeyboardInterrupt` raises here; the caller's drop
/// of the batch cancels the read).
fn wait_one(py: Python<'_>, batch: &karu::Batch) -> PyResult<Completion> {
    loop {
        match py.detach(|| batch.next_timeout(SIGNAL_CHECK)) {
            Next::Completion(completion) => return Ok(completion),
            Next::TimedOut => py.check_signals()?,
            Next::Drained => return Err(error(py, &no_completion(), None)),
        }
    }
}

/// Every completion of `batch`, waited for without the GIL, looking at Python's signals as
/// [`wait_one`] does.
fn wait_all(py: Python<'_>, batch: &karu::Batch) -> PyResult<Vec<Completion>> {
    let mut completions = Vec::new();
    loop {
        match py.detach(|| batch.next_timeout(SIGNAL_CHECK)) {
            Next::Completion(completion) => completions.push(completion),
            Next::TimedOut => py.check_signals()?,
            Next::Drained => return Ok(completions),
        }
    }
}

/// `(position, exception)` of a submitted read whose address does not resolve.
type Unresolved = (usize, Py<PyAny>);

/// `(address, offset, length, if_match)`: a read of `read_many`.
type ManyRead = (String, u64, u64, Option<String>);

/// `(address, offset, length, buffer, at, if_match)`, as the Python half submits a read:
/// `buffer` is `None` (Karu allocates `length` bytes) or an object exporting a writable,
/// C-contiguous buffer, into which the read lands from byte `at`, for `length` bytes (`None`:
/// to the buffer's end).
type SubmittedRead = (
    String,
    u64,
    Option<u64>,
    Option<Py<PyAny>>,
    usize,
    Option<String>,
);

/// The reads of one submission located ([`Client::locate_specs`]).
struct Located {
    specs: Vec<Spec>,
    /// The buffers the specs land in, exported.
    destinations: Destinations,
    /// By position, the error of each read whose address does not resolve.
    failures: Vec<(usize, karu::Error)>,
}

/// The extension module.
#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<Client>()?;
    m.add_class::<Batch>()?;
    m.add_class::<runtime::Task>()?;
    m.add_function(wrap_pyfunction!(runtime::close, m)?)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add(
        "STATUSES",
        Status::ALL.iter().map(|s| s.name()).collect::<Vec<_>>(),
    )?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, UNIX_EPOCH};

    use super::{batch_options, epoch_seconds};

    #[test]
    fn times_reach_python_as_seconds_since_the_epoch_on_either_side_of_it() {
        let after = UNIX_EPOCH + Duration::from_millis(1_234_567_890_250);
        assert_eq!(epoch_seconds(after), 1_234_567_890.25);
        assert_eq!(
            epoch_seconds(UNIX_EPOCH - Duration::from_millis(1500)),
            -1.5
        );
        assert_eq!(epoch_seconds(UNIX_EPOCH), 0.0);
    }

    #[test]
    fn batch_options_take_only_what_is_given() {
        assert_eq!(batch_options(None, None), karu::BatchOptions::new());
        assert_eq!(
            batch_options(Some(0), Some(4096)),
            karu::BatchOptions::new().max_gap(0).max_span(4096)
        );
    }
}
