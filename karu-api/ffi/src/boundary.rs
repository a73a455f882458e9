//! The boundary itself: the panic guard every entry point runs behind, and the checked
//! conversions of what C passes in (pointers, strings) and hands back (out-pointers, text).

use std::ffi::{CStr, CString, c_char};
use std::panic::{AssertUnwindSafe, catch_unwind};

use crate::status::karu_status;

/// What an entry point's body comes to: `Ok` is `KARU_OK`.
pub(crate) type Outcome = Result<(), karu_status>;

/// Run an entry point's body; a panic becomes `KARU_ERR_INTERNAL` instead of crossing into C.
pub(crate) fn entry(body: impl FnOnce() -> Outcome) -> karu_status {
    match catch_unwind(AssertUnwindSafe(body)) {
        Ok(Ok(())) => karu_status::KARU_OK,
        Ok(Err(status)) => status,
        Err(_) => karu_status::KARU_ERR_INTERNAL,
    }
}

/// The object a C pointer names, or `KARU_ERR_INVALID` for NULL.
///
/// # Safety
///
/// `ptr` is NULL or points to a live `T` that nothing mutates for `'a`.
pub(crate) unsafe fn object<'a, T>(ptr: *const T) -> Result<&'a T, karu_status> {
    // SAFETY: the caller's contract: NULL (answered) or a live, unaliased-for-writes `T`.
    unsafe { ptr.as_ref() }.ok_or(karu_status::KARU_ERR_INVALID)
}

/// The object a C pointer names, mutably, or `KARU_ERR_INVALID` for NULL.
///
/// # Safety
///
/// `ptr` is NULL or points to a live `T` that nothing else reads or writes for `'a`.
pub(crate) unsafe fn object_mut<'a, T>(ptr: *mut T) -> Result<&'a mut T, karu_status> {
    // SAFETY: the caller's contract: NULL (answered) or a live `T` used only through this.
    unsafe { ptr.as_mut() }.ok_or(karu_status::KARU_ERR_INVALID)
}

/// An out-pointer checked not to be NULL, to write a result through once the call succeeds.
pub(crate) struct Out<T>(*mut T);

impl<T> Out<T> {
    /// Check `ptr`; `KARU_ERR_INVALID` for NULL.
    ///
    /// # Safety
    ///
    /// `ptr` is NULL or valid for a write of one `T` (it need not be initialised) until
    /// [`Out::set`] is called.
    pub(crate) unsafe fn new(ptr: *mut T) -> Result<Self, karu_status> {
        if ptr.is_null() {
            return Err(karu_status::KARU_ERR_INVALID);
        }
        Ok(Out(ptr))
    }

    /// Write the result (whatever was there is overwritten, not dropped: C memory).
    pub(crate) fn set(self, value: T) {
        // SAFETY: `new`'s contract: non-null and valid for one write of `T`.
        unsafe { self.0.write(value) }
    }
}

/// Like [`Out`], but NULL means "not wanted".
pub(crate) struct OptionalOut<T>(*mut T);

impl<T> OptionalOut<T> {
    /// # Safety
    ///
    /// `ptr` is NULL or valid for a write of one `T`.
    pub(crate) unsafe fn new(ptr: *mut T) -> Self {
        OptionalOut(ptr)
    }

    /// Write the result if it was wanted.
    pub(crate) fn set(self, value: T) {
        if !self.0.is_null() {
            // SAFETY: `new`'s contract: NULL (skipped) or valid for one write of `T`.
            unsafe { self.0.write(value) }
        }
    }
}

/// A NUL-terminated UTF-8 string from C, or `KARU_ERR_INVALID` for NULL or invalid UTF-8.
///
/// # Safety
///
/// `ptr` is NULL or points to a NUL-terminated string that stays unchanged for `'a`.
pub(crate) unsafe fn text<'a>(ptr: *const c_char) -> Result<&'a str, karu_status> {
    if ptr.is_null() {
        return Err(karu_status::KARU_ERR_INVALID);
    }
    // SAFETY: the caller's contract: a NUL-terminated string, unchanged for `'a`.
    let text = unsafe { CStr::from_ptr(ptr) };
    text.to_str().map_err(|_| karu_status::KARU_ERR_INVALID)
}

/// Like [`text`], but NULL is `None`.
///
/// # Safety
///
/// As for [`text`].
pub(crate) unsafe fn optional_text<'a>(ptr: *const c_char) -> Result<Option<&'a str>, karu_status> {
    if ptr.is_null() {
        return Ok(None);
    }
    // SAFETY: the caller's contract, as for `text`.
    unsafe { text(ptr) }.map(Some)
}

/// Copy `value` into the caller's buffer of `capacity` bytes, NUL-terminated and truncated to
/// fit (nothing is written when `capacity` is 0), and store its whole length (without the NUL)
/// in `*out_len` when `out_len` is not NULL, so a caller whose buffer was too small can ask
/// again with `*out_len + 1` bytes.
///
/// # Safety
///
/// `buffer` is valid for writes of `capacity` bytes (it may be NULL only when `capacity` is 0);
/// `out_len` is NULL or valid for one write.
pub(crate) unsafe fn copy_text(
    value: &str,
    buffer: *mut c_char,
    capacity: usize,
    out_len: *mut usize,
) -> Outcome {
    if buffer.is_null() && capacity > 0 {
        return Err(karu_status::KARU_ERR_INVALID);
    }
    if capacity > 0 {
        let n = value.len().min(capacity - 1);
        // SAFETY: `buffer` holds `capacity > n` writable bytes (the caller's contract), and
        // `value` is `n` readable bytes or more; a Rust string and a C buffer never overlap.
        unsafe {
            std::ptr::copy_nonoverlapping(value.as_ptr(), buffer.cast::<u8>(), n);
            buffer.add(n).write(0);
        }
    }
    // SAFETY: the caller's contract for `out_len`.
    unsafe { OptionalOut::new(out_len) }.set(value.len());
    Ok(())
}

/// A C string of `value`; a NUL inside it (never expected in Karu's messages) is shown as `\0`.
pub(crate) fn c_string(value: &str) -> CString {
    CString::new(value.replace('\0', "\\0")).unwrap_or_default()
}

/// Move `value` to the heap and hand C the pointer (released by the matching `*_free`).
pub(crate) fn into_handle<T>(value: T) -> *mut T {
    Box::into_raw(Box::new(value))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_panic_becomes_internal() {
        let status = entry(|| panic!("a bug"));
        assert_eq!(status, karu_status::KARU_ERR_INTERNAL);
        assert_eq!(entry(|| Ok(())), karu_status::KARU_OK);
        assert_eq!(
            entry(|| Err(karu_status::KARU_ERR_NOT_FOUND)),
            karu_status::KARU_ERR_NOT_FOUND
        );
    }

    #[test]
    fn text_is_copied_truncated_and_terminated_with_its_whole_length() {
        let mut buffer = [0x7f as c_char; 8];
        let mut len = 0;
        // SAFETY: a buffer of 8 bytes and a length to write.
        let done = unsafe { copy_text("hello, world", buffer.as_mut_ptr(), 8, &mut len) };
        assert_eq!(done, Ok(()));
        assert_eq!(len, 12);
        // SAFETY: NUL-terminated by `copy_text`.
        let copied = unsafe { CStr::from_ptr(buffer.as_ptr()) };
        assert_eq!(copied.to_str(), Ok("hello, "));
        // Asking for the length only.
        // SAFETY: no buffer, capacity 0.
        let done = unsafe { copy_text("abc", std::ptr::null_mut(), 0, &mut len) };
        assert_eq!((done, len), (Ok(()), 3));
        // A NULL buffer with a capacity is refused.
        // SAFETY: refused before any write.
        let done = unsafe { copy_text("abc", std::ptr::null_mut(), 4, &mut len) };
        assert_eq!(done, Err(karu_status::KARU_ERR_INVALID));
    }

    #[test]
    fn null_and_invalid_strings_are_invalid_arguments() {
        // SAFETY: NULL is allowed.
        let null = unsafe { text(std::ptr::null()) };
        assert_eq!(null, Err(karu_status::KARU_ERR_INVALID));
        // SAFETY: as above.
        assert_eq!(unsafe { optional_text(std::ptr::null()) }, Ok(None));
        let invalid = [0xffu8 as c_char, 0];
        // SAFETY: a NUL-terminated buffer.
        let not_utf8 = unsafe { text(invalid.as_ptr()) };
        assert_eq!(not_utf8, Err(karu_status::KARU_ERR_INVALID));
        assert_eq!(c_string("a\0b").to_str(), Ok("a\\0b"));
    }
}
