//! `karu_reader_*`: one object read by position, in the two-callback shape of a sans-io
//! core's transport (`read_at(ctx, offset, dst, len, &filled)`, `size(ctx, &size)`), so a C
//! format reader can be driven over Karu by passing these two functions, with the reader as
//! `ctx`, as its vtable.

use std::ffi::{c_char, c_void};

use karu::{Evidence, ObjectReader, Status};

use crate::boundary::{Out, copy_text, entry, into_handle, object};
use crate::client::karu_client;
use crate::last_error::Owner;
use crate::locator::karu_locator;
use crate::status::karu_status;

/// One object, read by position (`karu_reader_read_at`, `karu_reader_size`). Opened with
/// `karu_reader_open`, released with `karu_reader_free`.
///
/// Thread safety: `karu_reader_read_at`, `karu_reader_size` and `karu_reader_last_error` may
/// be called from any number of threads at once (there is no cursor); `karu_reader_free` must
/// not run concurrently with any of them.
#[derive(Debug)]
pub struct karu_reader {
    reader: ObjectReader,
    owner: Owner,
}

/// Open `locator` for positional reads: one probe for its size and strong ETag (as
/// `karu_client_stat`), to which every later read is pinned (sent as `If-Match`): if the
/// object is replaced, reads fail with `KARU_ERR_PRECONDITION_FAILED` instead of mixing two
/// versions. The size is the one probed; Karu caches no sizes, so a new reader asks again.
/// On failure, `karu_client_last_error` says why.
///
/// Blocks the calling thread. Thread safety: any threads at once.
///
/// # Safety
///
/// `client` and `locator` are NULL or live; `out_reader` is NULL or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn karu_reader_open(
    client: *const karu_client,
    locator: *const karu_locator,
    out_reader: *mut *mut karu_reader,
) -> karu_status {
    entry(|| {
        // SAFETY: the caller's contract.
        let c = unsafe { object(client) }?;
        // SAFETY: the caller's contract.
        let l = unsafe { object(locator) }?;
        // SAFETY: the caller's contract.
        let out = unsafe { Out::new(out_reader) }?;
        let reader = ObjectReader::open(&c.client, &l.locator).map_err(|e| c.owner.error(&e))?;
        out.set(into_handle(karu_reader {
            reader,
            owner: Owner::new(),
        }));
        Ok(())
    })
}

/// Read up to `len` bytes at `offset` into `dst`, blocking, and store how many arrived in
/// `*out_filled`: `len` unless the object ends first (a short count then; 0 at or past its
/// end), like `pread`. `ctx` is the `karu_reader *`. On failure, `*out_filled` is 0 and
/// `karu_reader_last_error` says why.
///
/// Its signature is the transport shape of a sans-io core (`read_at(ctx, offset, dst, len,
/// &filled)`), so it can be passed as one, with the reader as `ctx`.
///
/// Thread safety: any threads at once.
///
/// # Safety
///
/// `ctx` is NULL or a live `karu_reader *`; `dst` is valid for writes of `len` bytes (NULL only
/// with `len` 0) and not touched by anyone else during the call; `out_filled` is NULL or valid
/// for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn karu_reader_read_at(
    ctx: *mut c_void,
    offset: u64,
    dst: *mut u8,
    len: usize,
    out_filled: *mut usize,
) -> karu_status {
    entry(|| {
        // SAFETY: the caller's contract: `ctx` is NULL or a live reader.
        let r = unsafe { object(ctx.cast_const().cast::<karu_reader>()) }?;
        // SAFETY: the caller's contract.
        let filled = unsafe { Out::new(out_filled) }?;
        if dst.is_null() && len > 0 {
            filled.set(0);
            return Err(r.owner.fail(
                karu_status::KARU_ERR_INVALID,
                "dst is NULL but len is not 0",
            ));
        }
        let available = r.reader.size().saturating_sub(offset);
        let n = usize::try_from(available).map_or(len, |available| available.min(len));
        if n == 0 {
            filled.set(0);
            return Ok(());
        }
        // SAFETY: the caller's contract: `dst` is valid for writes of `len >= n` bytes and
        // used by no one else during this call, which is as long as the slice lives.
        let destination = unsafe { std::slice::from_raw_parts_mut(dst, n) };
        match r.reader.read_at(offset, destination) {
            Ok(()) => filled.set(n),
            // The object is shorter than when it was opened (a local file, which has no
            // version to pin): the bytes that exist were delivered.
            Err(e) if e.status() == Status::RangeNotSatisfiable => match e.evidence() {
                Some(Evidence::EndOfObject { received, .. }) => {
                    filled.set(usize::try_from(*received).unwrap_or(0).min(n));
                }
                _ => {
                    filled.set(0);
                    return Err(r.owner.error(&e));
                }
            },
            Err(e) => {
                filled.set(0);
                return Err(r.owner.error(&e));
            }
        }
        Ok(())
    })
}

/// The object's size, as probed when the reader was opened. `ctx` is the `karu_reader *`; the
/// signature is the transport shape of a sans-io core (`size(ctx, &size)`).
///
/// Thread safety: any threads at once.
///
/// # Safety
///
/// `ctx` is NULL or a live `karu_reader *`; `out_size` is NULL or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn karu_reader_size(ctx: *mut c_void, out_size: *mut u64) -> karu_status {
    entry(|| {
        // SAFETY: the caller's contract: `ctx` is NULL or a live reader.
        let r = unsafe { object(ctx.cast_const().cast::<karu_reader>()) }?;
        // SAFETY: the caller's contract.
        unsafe { Out::new(out_size) }?.set(r.reader.size());
        Ok(())
    })
}

/// The message of the last `karu_reader_read_at` on `reader` that failed on this thread (`""`
/// if none), copied as `karu_client_last_error` does.
///
/// # Safety
///
/// `reader` is NULL or live; `buffer` is valid for `capacity` bytes (NULL only with `capacity`
/// 0); `out_len` is NULL or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn karu_reader_last_error(
    reader: *const karu_reader,
    buffer: *mut c_char,
    capacity: usize,
    out_len: *mut usize,
) -> karu_status {
    entry(|| {
        // SAFETY: the caller's contract.
        let r = unsafe { object(reader) }?;
        // SAFETY: the caller's contract.
        unsafe { copy_text(&r.owner.last(), buffer, capacity, out_len) }
    })
}

/// Release a reader (NULL is ignored).
///
/// # Safety
///
/// `reader` is NULL or from `karu_reader_open`, not used afterwards and in use by no other
/// thread.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn karu_reader_free(reader: *mut karu_reader) -> karu_status {
    entry(|| {
        if !reader.is_null() {
            // SAFETY: the caller's contract: from `karu_reader_open`, freed once.
            drop(unsafe { Box::from_raw(reader) });
        }
        Ok(())
    })
}
