//! Caller buffers taken through Python's buffer protocol: a writable, C-contiguous buffer
//! (`bytearray`, `memoryview`, a NumPy array...) is exported ([`Export`]) when its read is
//! submitted and released only after the read's batch has been dropped, which waits until no
//! transfer writes into it. While exported, its object can be neither resized nor freed, so
//! the pointer Karu's transfer writes through stays valid; that pointer travels to the
//! transfer as it is ([`karu::Read::from_raw_parts`]). No address is ever taken from Python
//! code: only objects, whose exporters say where their bytes are.
//!
//! # Why these declarations, and not pyo3's `PyBuffer`
//!
//! The wheel is built for CPython's stable ABI from 3.9 (pyo3's `abi3-py39`), and pyo3 offers
//! `PyBuffer` (and declares the functions below) only for 3.11 and later or for builds
//! outside the stable ABI, because `PyObject_GetBuffer`, `PyBuffer_Release` and `Py_buffer`
//! joined the limited API in 3.11. They are older than that: PEP 3118 defined them for
//! Python 3.0, CPython has exported both functions ever since, and 3.11 took them into the
//! stable ABI unchanged (the same symbols, the same `Py_buffer` layout). So this module
//! declares them itself, as they are on every CPython from 3.9 on, and keeps the one wheel
//! for all of them. On Unix an extension module's symbols resolve against the running
//! interpreter, which has them. On Windows an abi3 module links `python3.dll`, which
//! forwards them only from 3.11 on: such a build would need `abi3-py311` and pyo3's
//! `PyBuffer`, and this module refuses to compile there rather than build a wheel that
//! cannot load on 3.9 and 3.10.
//!
//! # What Python cannot promise
//!
//! Python has no way to lend a buffer to one writer alone: another Python thread could read
//! or write the bytes while Karu writes them, as it could while `io.FileIO.readinto` or
//! `socket.recv_into` (which also write without the GIL) fill a buffer. The Python API says
//! a buffer must not be touched until its read's completion arrives; Karu's part is to write
//! only inside the exported bytes, only while they are exported, and never two reads into
//! the same bytes (the checks of [`Destinations`]).

#[cfg(not(unix))]
compile_error!(
    "karu's Python module takes buffers through PyObject_GetBuffer, which python3.dll exports \
     only from CPython 3.11: build it for abi3-py311 with pyo3's PyBuffer on this platform"
);

use std::ffi::{c_char, c_int, c_void};

use pyo3::exceptions::{PyBufferError, PyTypeError, PyValueError};
use pyo3::ffi::{Py_ssize_t, PyObject};
use pyo3::prelude::*;

/// `Py_buffer` of `Include/pybuffer.h` (CPython 3.0 and later, unchanged; in the limited API
/// from 3.11).
#[repr(C)]
struct PyBufferView {
    buf: *mut c_void,
    obj: *mut PyObject,
    len: Py_ssize_t,
    itemsize: Py_ssize_t,
    readonly: c_int,
    ndim: c_int,
    format: *mut c_char,
    shape: *mut Py_ssize_t,
    strides: *mut Py_ssize_t,
    suboffsets: *mut Py_ssize_t,
    internal: *mut c_void,
}

/// `PyBUF_STRIDES` (`PyBUF_ND | 0x0010`): the exporter describes its memory with a shape and
/// strides (so a strided view is seen as such, not refused by the exporter with its own
/// words), without suboffsets and read-only allowed: this module checks contiguity and
/// writability itself, to refuse them with errors that name the method.
const PYBUF_STRIDES: c_int = 0x0018;

unsafe extern "C" {
    /// `int PyObject_GetBuffer(PyObject *exporter, Py_buffer *view, int flags)`.
    fn PyObject_GetBuffer(exporter: *mut PyObject, view: *mut PyBufferView, flags: c_int) -> c_int;
    /// `void PyBuffer_Release(Py_buffer *view)`.
    fn PyBuffer_Release(view: *mut PyBufferView);
}

/// A writable, C-contiguous buffer of a Python object, exported (held) until dropped: while
/// this lives, the object's bytes neither move nor are freed.
pub(crate) struct Export {
    /// Boxed, so its address stays what the exporter saw: exporters may point into the view
    /// itself (`bytearray`'s `shape` and `strides` point at its `len` and `itemsize`), and
    /// `PyBuffer_Release` must get the view `PyObject_GetBuffer` filled.
    view: Box<PyBufferView>,
}

// SAFETY: another thread only reads the pointer and length copied out of the view (the bytes
// are written through the pointer by the transfer that owns the read, see the module
// documentation); the view itself is touched again only by `Drop`, with the GIL.
unsafe impl Send for Export {}

impl Export {
    /// Export `object`'s buffer for writing, for the method `what` (named in the errors): a
    /// `TypeError` for an object without a buffer or with a read-only one, a `BufferError` for
    /// one that is not C-contiguous.
    pub(crate) fn new(object: &Bound<'_, PyAny>, what: &str) -> PyResult<Export> {
        let py = object.py();
        let mut view = Box::new(PyBufferView {
            buf: std::ptr::null_mut(),
            obj: std::ptr::null_mut(),
            len: 0,
            itemsize: 0,
            readonly: 0,
            ndim: 0,
            format: std::ptr::null_mut(),
            shape: std::ptr::null_mut(),
            strides: std::ptr::null_mut(),
            suboffsets: std::ptr::null_mut(),
            internal: std::ptr::null_mut(),
        });
        let kind = type_name(object);
        // SAFETY: `object` is a live object and the GIL is held (`Bound`); `view` is a
        // writable `Py_buffer` the call fills, at an address that stays put (boxed).
        let rc = unsafe { PyObject_GetBuffer(object.as_ptr(), &mut *view, PYBUF_STRIDES) };
        if rc != 0 {
            let cause = PyErr::take(py);
            let err = PyTypeError::new_err(format!(
                "{what} needs a writable buffer (a bytearray, memoryview or NumPy array), \
                 found {kind}"
            ));
            err.set_cause(py, cause);
            return Err(err);
        }
        // Released by the drop from here on, whatever happens below.
        let export = Export { view };
        if export.view.readonly != 0 {
            return Err(PyTypeError::new_err(format!(
                "{what} needs a writable buffer, found a read-only {kind}"
            )));
        }
        if !export.c_contiguous() {
            return Err(PyBufferError::new_err(format!(
                "{what} needs a C-contiguous buffer, found a non-contiguous {kind}"
            )));
        }
        Ok(export)
    }

    /// Where the exported bytes start.
    pub(crate) fn pointer(&self) -> *mut u8 {
        self.view.buf.cast()
    }

    /// How many bytes are exported.
    pub(crate) fn len(&self) -> usize {
        usize::try_from(self.view.len).unwrap_or(0)
    }

    /// Whether the exported memory is one C-contiguous run of `len` bytes (the rule of
    /// CPython's `PyBuffer_IsContiguous(view, 'C')`, written here because that function joined
    /// the stable ABI in 3.11 too): no suboffsets, and each dimension's stride, from the
    /// last, is the size of the dimensions after it (a dimension of 1 may have any stride).
    fn c_contiguous(&self) -> bool {
        let view = &self.view;
        if !view.suboffsets.is_null() {
            return false;
        }
        if view.len == 0 || view.strides.is_null() {
            return true;
        }
        let Ok(ndim) = usize::try_from(view.ndim) else {
            return false;
        };
        if view.shape.is_null() {
            return ndim == 0;
        }
        // SAFETY: with `PyBUF_STRIDES`, a successful export's `shape` and `strides` hold
        // `ndim` values each, valid while the buffer is exported.
        let (shape, strides) = unsafe {
            (
                std::slice::from_raw_parts(view.shape, ndim),
                std::slice::from_raw_parts(view.strides, ndim),
            )
        };
        let mut expected = view.itemsize;
        for (&n, &stride) in shape.iter().zip(strides).rev() {
            if n != 1 && stride != expected {
                return false;
            }
            expected = expected.saturating_mul(n);
        }
        true
    }
}

impl Drop for Export {
    /// Release the export with the GIL. On Karu's async thread once the interpreter is
    /// exiting ([`crate::runtime::with_python`] refuses), the export is left held: nobody is
    /// left to use the object, and taking the GIL then would crash the process.
    fn drop(&mut self) {
        let view: *mut PyBufferView = &mut *self.view;
        crate::runtime::with_python(|_py| {
            // SAFETY: the view `PyObject_GetBuffer` filled (at the same address), released
            // once, with the GIL held.
            unsafe { PyBuffer_Release(view) }
        });
    }
}

/// The name of `object`'s type, for errors.
fn type_name(object: &Bound<'_, PyAny>) -> String {
    object
        .get_type()
        .name()
        .map(|n| n.to_string())
        .unwrap_or_else(|_| "an object".to_owned())
}

/// One read's bytes in an exported buffer: `length` bytes from `at`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Window {
    /// Which export of its [`Destinations`].
    pub(crate) export: usize,
    pub(crate) at: usize,
    pub(crate) length: usize,
}

/// The exported buffers of one submission (one export per object, however many reads land in
/// it) and each read's window in them, checked: every window lies inside its buffer, and no
/// two windows share a byte (two transfers must never write the same bytes).
#[derive(Default)]
pub(crate) struct Destinations {
    /// Each export with the object it was taken from, compared by identity only (never
    /// dereferenced): the export keeps the object alive, so its address names it.
    exports: Vec<(*mut PyObject, Export)>,
}

impl Destinations {
    /// The window of the read at `position` (named in errors) into `object` from byte `at`,
    /// of `length` bytes (`None`: to the buffer's end), exporting the buffer if this
    /// submission has not yet.
    pub(crate) fn window(
        &mut self,
        object: &Bound<'_, PyAny>,
        at: usize,
        length: Option<u64>,
        what: &str,
    ) -> PyResult<Window> {
        let export = match self.exports.iter().position(|(o, _)| *o == object.as_ptr()) {
            Some(known) => known,
            None => {
                let export = Export::new(object, what)?;
                self.exports.push((object.as_ptr(), export));
                self.exports.len() - 1
            }
        };
        let size = self.exports[export].1.len();
        let length = match length {
            None => size.checked_sub(at),
            Some(n) => usize::try_from(n)
                .ok()
                .filter(|&n| at.checked_add(n).is_some_and(|end| end <= size)),
        };
        let Some(length) = length else {
            return Err(PyValueError::new_err(format!(
                "{what}: the buffer of {size} bytes ends before the read's bytes"
            )));
        };
        Ok(Window { export, at, length })
    }

    /// Refuse windows that share bytes.
    pub(crate) fn check_disjoint<'w>(
        &self,
        windows: impl IntoIterator<Item = &'w Window>,
    ) -> PyResult<()> {
        let mut spans: Vec<(usize, usize)> = windows
            .into_iter()
            .filter(|w| w.length > 0)
            .map(|w| {
                let start = self.exports[w.export].1.pointer() as usize + w.at;
                (start, start + w.length)
            })
            .collect();
        spans.sort_unstable();
        if spans.windows(2).any(|pair| pair[1].0 < pair[0].1) {
            return Err(PyValueError::new_err(
                "two reads' buffers overlap: each read needs its own bytes",
            ));
        }
        Ok(())
    }

    /// Where `window`'s bytes start.
    pub(crate) fn pointer(&self, window: &Window) -> *mut u8 {
        // `window` lies inside its export (`Destinations::window`): the offset stays in it.
        self.exports[window.export]
            .1
            .pointer()
            .wrapping_add(window.at)
    }

    /// The exports, to keep until the batch that writes into them has been dropped.
    pub(crate) fn into_exports(self) -> Vec<Export> {
        self.exports.into_iter().map(|(_, e)| e).collect()
    }
}
