//! Between Karu's values and Python's: completions, errors (as `karu._errors` exceptions),
//! settings.

use karu::{Completion, Evidence, Status};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyMemoryView, PyTuple};

/// A completion as what Python gets: the bytes, or the error and the valid prefix (the bytes
/// that exist, for a range past the end; empty otherwise).
pub(crate) enum Outcome {
    Ok(Vec<u8>),
    Err(karu::Error, Vec<u8>),
}

pub(crate) fn completion_outcome(completion: Completion) -> Outcome {
    match completion.error().cloned() {
        None => Outcome::Ok(completion.into_buffer().unwrap_or_default()),
        Some(error) => {
            let prefix = if error.status() == Status::RangeNotSatisfiable {
                completion.into_buffer().unwrap_or_default()
            } else {
                Vec::new()
            };
            Outcome::Err(error, prefix)
        }
    }
}

/// `(status name, data, exception or None, index, bytes received)`: `index` is the read's
/// position among those submitted (Karu's tag of it; the Python half maps it to the caller's
/// tag and buffer); data is a `memoryview` of the bytes (of the valid prefix for
/// `range_not_satisfiable`, empty for other failures; empty for a read into a caller's
/// buffer, whose bytes are there).
pub(crate) fn completion_tuple<'py>(
    py: Python<'py>,
    completion: Completion,
) -> PyResult<Bound<'py, PyTuple>> {
    let index = completion.tag();
    let status = completion.status().name();
    let received = completion.bytes_received();
    let (data, exception) = match completion_outcome(completion) {
        Outcome::Ok(bytes) => (bytes, None),
        Outcome::Err(e, prefix) => {
            let exception = error(py, &e, Some(&prefix)).into_value(py);
            (prefix, Some(exception))
        }
    };
    let view = PyMemoryView::from(&PyBytes::new(py, &data))?;
    (status, view, exception, index, received).into_pyobject(py)
}

/// `e` with the end-of-object evidence of a read of `length` bytes at `offset` that received
/// `received`, when it is a range past the end that does not carry it yet (as
/// `karu::Client::read_into` adds it).
pub(crate) fn with_end_evidence(
    e: karu::Error,
    offset: u64,
    length: u64,
    received: u64,
) -> karu::Error {
    if e.status() == Status::RangeNotSatisfiable
        && !matches!(e.evidence(), Some(Evidence::EndOfObject { .. }))
    {
        e.with_evidence(Evidence::EndOfObject {
            offset,
            requested: length,
            received,
            size: None,
        })
    } else {
        e
    }
}

pub(crate) fn ends_tuple(py: Python<'_>, ends: karu::Ends) -> PyResult<Bound<'_, PyTuple>> {
    (
        PyBytes::new(py, &ends.head),
        PyBytes::new(py, &ends.tail),
        ends.size,
        ends.etag,
    )
        .into_pyobject(py)
}

/// The Python exception for `e`: `karu._errors.make(...)` picks the class of its status.
/// `prefix` is the valid prefix a range past the end delivered.
pub(crate) fn error(py: Python<'_>, e: &karu::Error, prefix: Option<&[u8]>) -> PyErr {
    let (offset, requested, received, size) = match e.evidence() {
        Some(Evidence::EndOfObject {
            offset,
            requested,
            received,
            size,
        }) => (Some(*offset), Some(*requested), Some(*received), *size),
        _ => (None, None, None, None),
    };
    let made = (|| -> PyResult<Bound<'_, PyAny>> {
        let make = py.import("karu._errors")?.getattr("make")?;
        let prefix = prefix.map(|p| PyBytes::new(py, p));
        make.call1((
            e.status().name(),
            e.to_string(),
            e.http_status(),
            e.is_transient(),
            prefix,
            (offset, requested, received, size),
        ))
    })();
    match made {
        Ok(exception) => PyErr::from_value(exception),
        Err(failure) => failure,
    }
}

/// A setting's value, given as JSON text by the Python half.
pub(crate) fn json(key: &str, text: &str) -> PyResult<serde_json::Value> {
    serde_json::from_str(text)
        .map_err(|e| PyValueError::new_err(format!("the setting {key:?} is not a JSON value: {e}")))
}
