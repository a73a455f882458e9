//! Locators: resolved addresses, and windows on them.

use std::ffi::c_char;

use karu::Locator;

use crate::boundary::{Out, copy_text, entry, into_handle, object, text};
use crate::client::karu_client;
use crate::last_error::Owner;
use crate::status::karu_status;

/// `length` of `karu_locator_with_window` for a window that runs to the end of the object.
pub const KARU_TO_END: u64 = u64::MAX;

/// A resolved address: backend, canonical path and optional window. Resolution never touches
/// the network or credentials. Released by `karu_locator_free`; a batch, reader or ends made
/// with it keep what they need, so it may be freed right after use.
///
/// Thread safety: immutable; any threads, except concurrently with `karu_locator_free`.
#[derive(Debug)]
pub struct karu_locator {
    pub(crate) locator: Locator,
    owner: Owner,
}

impl karu_locator {
    pub(crate) fn new(locator: Locator) -> Self {
        karu_locator {
            locator,
            owner: Owner::new(),
        }
    }
}

/// Resolve an address (a local path, `file://`, `http(s)://`, `s3://`, ...) to a locator. On
/// failure (`KARU_ERR_INVALID` for a malformed address, `KARU_ERR_UNSUPPORTED` when no
/// backend serves it), `karu_client_last_error` says why.
///
/// Thread safety: any threads at once.
///
/// # Safety
///
/// `client` is NULL or live; `address` is NULL or NUL-terminated; `out_locator` is NULL or
/// valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn karu_client_locate(
    client: *const karu_client,
    address: *const c_char,
    out_locator: *mut *mut karu_locator,
) -> karu_status {
    entry(|| {
        // SAFETY: the caller's contract.
        let c = unsafe { object(client) }?;
        // SAFETY: the caller's contract.
        let out = unsafe { Out::new(out_locator) }?;
        // SAFETY: the caller's contract.
        let address = unsafe { text(address) }
            .map_err(|s| c.owner.fail(s, "the address is NULL or not UTF-8"))?;
        let locator = c.client.locate(address).map_err(|e| c.owner.error(&e))?;
        out.set(into_handle(karu_locator::new(locator)));
        Ok(())
    })
}

/// A new locator exposing `[start, start + length)` of `locator`'s own view (`length`
/// `KARU_TO_END` for everything from `start` on). Offsets of reads through it are relative to
/// `start`, and reads leaving a bounded window fail with `KARU_ERR_INVALID_RANGE` before any
/// I/O. Windows nest; a window must fit inside a bounded one (`KARU_ERR_INVALID_RANGE`
/// otherwise, as for an overflowing one); `karu_locator_last_error` then says why.
///
/// Thread safety: any threads at once.
///
/// # Safety
///
/// `locator` is NULL or live; `out_locator` is NULL or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn karu_locator_with_window(
    locator: *const karu_locator,
    start: u64,
    length: u64,
    out_locator: *mut *mut karu_locator,
) -> karu_status {
    entry(|| {
        // SAFETY: the caller's contract.
        let l = unsafe { object(locator) }?;
        // SAFETY: the caller's contract.
        let out = unsafe { Out::new(out_locator) }?;
        let length = (length != KARU_TO_END).then_some(length);
        let windowed = l
            .locator
            .with_window(start, length)
            .map_err(|e| l.owner.fail(e.status().into(), e.message()))?;
        out.set(into_handle(karu_locator::new(windowed)));
        Ok(())
    })
}

/// The locator as it may be shown to people: its canonical path (a query string redacted)
/// and window, copied as `karu_client_last_error` copies text.
///
/// # Safety
///
/// `locator` is NULL or live; `buffer` is valid for `capacity` bytes (NULL only with
/// `capacity` 0); `out_len` is NULL or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn karu_locator_name(
    locator: *const karu_locator,
    buffer: *mut c_char,
    capacity: usize,
    out_len: *mut usize,
) -> karu_status {
    entry(|| {
        // SAFETY: the caller's contract.
        let l = unsafe { object(locator) }?;
        // SAFETY: the caller's contract.
        unsafe { copy_text(&l.locator.to_string(), buffer, capacity, out_len) }
    })
}

/// The message of the last `karu_locator_with_window` on `locator` that failed on this thread
/// (`""` if none), copied as `karu_client_last_error` does.
///
/// Thread safety: any threads at once; each thread sees its own calls' messages.
///
/// # Safety
///
/// `locator` is NULL or live; `buffer` is valid for `capacity` bytes (NULL only with
/// `capacity` 0); `out_len` is NULL or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn karu_locator_last_error(
    locator: *const karu_locator,
    buffer: *mut c_char,
    capacity: usize,
    out_len: *mut usize,
) -> karu_status {
    entry(|| {
        // SAFETY: the caller's contract.
        let l = unsafe { object(locator) }?;
        // SAFETY: the caller's contract.
        unsafe { copy_text(&l.owner.last(), buffer, capacity, out_len) }
    })
}

/// Release a locator (NULL is ignored).
///
/// # Safety
///
/// `locator` is NULL or from `karu_client_locate` / `karu_locator_with_window`, not used afterwards.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn karu_locator_free(locator: *mut karu_locator) -> karu_status {
    entry(|| {
        if !locator.is_null() {
            // SAFETY: the caller's contract: made by this library, freed once.
            drop(unsafe { Box::from_raw(locator) });
        }
        Ok(())
    })
}
