//! Completions, and `karu_free` for the buffers Karu allocates.

use std::ffi::{CString, c_char};

use karu::Completion;

use crate::boundary::{Out, c_string, entry, object, object_mut};
use crate::client::bytes_out;
use crate::status::karu_status;

/// The result of one read: its tag, index, status, how many bytes arrived, and where they are.
/// From `karu_batch_next` / `karu_batch_wait`; released by `karu_completion_free`.
///
/// On `KARU_OK` the destination holds exactly the requested bytes. On
/// `KARU_ERR_RANGE_NOT_SATISFIABLE` its first `bytes_received` bytes are a valid prefix (the
/// object ended there). On any other status its contents are unspecified and
/// `bytes_received` is 0.
///
/// Thread safety: one thread at a time (`karu_completion_take_buffer` changes it).
#[derive(Debug)]
pub struct karu_completion {
    tag: u64,
    index: usize,
    status: karu_status,
    http_status: u16,
    bytes_received: u64,
    message: Option<CString>,
    /// The bytes of a read Karu allocated for (`None` once taken, or for a caller's).
    buffer: Option<Vec<u8>>,
    /// The caller's destination, when the read had one.
    dst: *mut u8,
}

impl karu_completion {
    pub(crate) fn new(completion: Completion, dst: *mut u8) -> Self {
        let error = completion.error();
        let message = error.map(|e| c_string(e.message()));
        let http_status = error.and_then(|e| e.http_status()).unwrap_or(0);
        karu_completion {
            tag: completion.tag(),
            index: completion.index(),
            status: completion.status().into(),
            http_status,
            bytes_received: completion.bytes_received(),
            message,
            dst,
            buffer: completion.into_buffer(),
        }
    }
}

/// The tag of the read (`karu_read.tag`).
///
/// # Safety
///
/// `completion` is NULL or live; `out_tag` is NULL or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn karu_completion_tag(
    completion: *const karu_completion,
    out_tag: *mut u64,
) -> karu_status {
    entry(|| {
        // SAFETY: the caller's contract.
        let c = unsafe { object(completion) }?;
        // SAFETY: the caller's contract.
        unsafe { Out::new(out_tag) }?.set(c.tag);
        Ok(())
    })
}

/// The read's index in the array it was submitted in.
///
/// # Safety
///
/// `completion` is NULL or live; `out_index` is NULL or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn karu_completion_index(
    completion: *const karu_completion,
    out_index: *mut usize,
) -> karu_status {
    entry(|| {
        // SAFETY: the caller's contract.
        let c = unsafe { object(completion) }?;
        // SAFETY: the caller's contract.
        unsafe { Out::new(out_index) }?.set(c.index);
        Ok(())
    })
}

/// The read's own status (the function's return value says whether this call worked).
///
/// # Safety
///
/// `completion` is NULL or live; `out_status` is NULL or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn karu_completion_status(
    completion: *const karu_completion,
    out_status: *mut karu_status,
) -> karu_status {
    entry(|| {
        // SAFETY: the caller's contract.
        let c = unsafe { object(completion) }?;
        // SAFETY: the caller's contract.
        unsafe { Out::new(out_status) }?.set(c.status);
        Ok(())
    })
}

/// How many bytes were delivered: the whole length on `KARU_OK`, the valid prefix on
/// `KARU_ERR_RANGE_NOT_SATISFIABLE`, 0 otherwise.
///
/// # Safety
///
/// `completion` is NULL or live; `out_bytes` is NULL or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn karu_completion_bytes_received(
    completion: *const karu_completion,
    out_bytes: *mut u64,
) -> karu_status {
    entry(|| {
        // SAFETY: the caller's contract.
        let c = unsafe { object(completion) }?;
        // SAFETY: the caller's contract.
        unsafe { Out::new(out_bytes) }?.set(c.bytes_received);
        Ok(())
    })
}

/// The HTTP status the server answered a failed read with, or 0 when none did.
///
/// # Safety
///
/// `completion` is NULL or live; `out_http_status` is NULL or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn karu_completion_http_status(
    completion: *const karu_completion,
    out_http_status: *mut u16,
) -> karu_status {
    entry(|| {
        // SAFETY: the caller's contract.
        let c = unsafe { object(completion) }?;
        // SAFETY: the caller's contract.
        unsafe { Out::new(out_http_status) }?.set(c.http_status);
        Ok(())
    })
}

/// Why the read failed, NUL-terminated and borrowed (valid until `karu_completion_free`;
/// redacted: no credential, signature or query string), or NULL when it succeeded.
///
/// # Safety
///
/// `completion` is NULL or live; `out_message` is NULL or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn karu_completion_message(
    completion: *const karu_completion,
    out_message: *mut *const c_char,
) -> karu_status {
    entry(|| {
        // SAFETY: the caller's contract.
        let c = unsafe { object(completion) }?;
        // SAFETY: the caller's contract.
        let out = unsafe { Out::new(out_message) }?;
        out.set(c.message.as_ref().map_or(std::ptr::null(), |m| m.as_ptr()));
        Ok(())
    })
}

/// The delivered bytes, borrowed: for a read with a caller destination, that destination
/// (`dst`) and `bytes_received`; for one Karu allocated for, its buffer (valid until
/// `karu_completion_free`, or NULL, 0 once taken with `karu_completion_take_buffer`). Nothing
/// delivered gives NULL, 0 (Karu-allocated) or `dst`, 0.
///
/// # Safety
///
/// `completion` is NULL or live; `out_data` and `out_len` are NULL or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn karu_completion_data(
    completion: *const karu_completion,
    out_data: *mut *const u8,
    out_len: *mut usize,
) -> karu_status {
    entry(|| {
        // SAFETY: the caller's contract.
        let c = unsafe { object(completion) }?;
        if c.dst.is_null() {
            // SAFETY: the caller's contract.
            return unsafe { bytes_out(c.buffer.as_deref().unwrap_or(&[]), out_data, out_len) };
        }
        // SAFETY: the caller's contract.
        let data = unsafe { Out::new(out_data) }?;
        // SAFETY: the caller's contract.
        let len = unsafe { Out::new(out_len) }?;
        data.set(c.dst);
        // A caller destination holds the read's length, which `bytes_received` never exceeds.
        len.set(usize::try_from(c.bytes_received).unwrap_or(usize::MAX));
        Ok(())
    })
}

/// Take the buffer Karu allocated for the read: `*out_data` (NULL when nothing was delivered)
/// and `*out_len` (`bytes_received`) become the caller's, to release with
/// `karu_free(data, len)`; the completion no longer holds them. `KARU_ERR_INVALID` for a read
/// with a caller destination, or when the buffer was already taken.
///
/// # Safety
///
/// `completion` is NULL or live, used by no other thread; `out_data` and `out_len` are NULL or
/// valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn karu_completion_take_buffer(
    completion: *mut karu_completion,
    out_data: *mut *mut u8,
    out_len: *mut usize,
) -> karu_status {
    entry(|| {
        // SAFETY: the caller's contract.
        let c = unsafe { object_mut(completion) }?;
        // SAFETY: the caller's contract.
        let data = unsafe { Out::new(out_data) }?;
        // SAFETY: the caller's contract.
        let len = unsafe { Out::new(out_len) }?;
        let buffer = c.buffer.take().ok_or(karu_status::KARU_ERR_INVALID)?;
        let (ptr, n) = into_raw_bytes(buffer);
        data.set(ptr);
        len.set(n);
        Ok(())
    })
}

/// Release a completion (NULL is ignored), with its buffer unless it was taken. A caller
/// destination is not touched.
///
/// # Safety
///
/// `completion` is NULL or from `karu_batch_next` / `karu_batch_wait`, not used afterwards.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn karu_completion_free(completion: *mut karu_completion) -> karu_status {
    entry(|| {
        if !completion.is_null() {
            // SAFETY: the caller's contract: made by this library, freed once.
            drop(unsafe { Box::from_raw(completion) });
        }
        Ok(())
    })
}

/// Release a buffer Karu allocated (from `karu_completion_take_buffer`), with the length it
/// was handed out with. `karu_free(NULL, 0)` does nothing; a NULL `data` with another length is
/// `KARU_ERR_INVALID`.
///
/// Thread safety: any thread.
///
/// # Safety
///
/// `data` is NULL or a buffer from `karu_completion_take_buffer` with exactly this `len`, not
/// used afterwards.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn karu_free(data: *mut u8, len: usize) -> karu_status {
    entry(|| {
        if data.is_null() {
            return if len == 0 {
                Ok(())
            } else {
                Err(karu_status::KARU_ERR_INVALID)
            };
        }
        // SAFETY: the caller's contract: `data`, `len` came from `into_raw_bytes`, once.
        drop(unsafe { from_raw_bytes(data, len) });
        Ok(())
    })
}

/// A buffer as a pointer and a length for C (`NULL`, 0 when empty), freed by
/// [`from_raw_bytes`].
fn into_raw_bytes(buffer: Vec<u8>) -> (*mut u8, usize) {
    if buffer.is_empty() {
        return (std::ptr::null_mut(), 0);
    }
    let boxed = buffer.into_boxed_slice();
    let len = boxed.len();
    (Box::into_raw(boxed).cast::<u8>(), len)
}

/// The buffer [`into_raw_bytes`] handed out.
///
/// # Safety
///
/// `data` and `len` came from `into_raw_bytes` (non-empty), and are used once.
unsafe fn from_raw_bytes(data: *mut u8, len: usize) -> Box<[u8]> {
    // SAFETY: the caller's contract: a `Box<[u8]>` of exactly `len` bytes at `data`.
    unsafe { Box::from_raw(std::ptr::slice_from_raw_parts_mut(data, len)) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buffers_go_to_c_and_come_back() {
        let (ptr, len) = into_raw_bytes(vec![1, 2, 3]);
        assert_eq!(len, 3);
        // SAFETY: just handed out.
        assert_eq!(unsafe { karu_free(ptr, len) }, karu_status::KARU_OK);
        assert_eq!(into_raw_bytes(Vec::new()), (std::ptr::null_mut(), 0));
        // SAFETY: NULL is answered.
        let empty = unsafe { karu_free(std::ptr::null_mut(), 0) };
        assert_eq!(empty, karu_status::KARU_OK);
        // SAFETY: as above.
        let null_with_length = unsafe { karu_free(std::ptr::null_mut(), 4) };
        assert_eq!(null_with_length, karu_status::KARU_ERR_INVALID);
    }
}
