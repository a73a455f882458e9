//! Batches: submitting read descriptors, draining completions, releasing.
//!
//! # Caller destinations
//!
//! A read with a caller destination (`dst` not NULL) is submitted as a foreign destination
//! ([`karu::Read::from_raw_parts`]: the pointer as it is, never made a Rust reference before
//! the transfer that writes it) without a Rust scope ([`karu::Client::submit_unchecked`]):
//! the batch keeps a `ScopedBatch<'static>` whose drop cancels the pending reads and waits
//! until no transfer references a destination, exactly as the end of a scope does. `karu_batch_free` is that
//! drop. The C contract — every caller destination stays valid, and untouched by the caller,
//! until `karu_batch_free` returns (it may be read once its read's completion has been taken)
//! — is what the unchecked submission requires; this module keeps the rest of it: it never
//! leaks a batch in the process that submitted it, and refuses destinations that overlap
//! (two transfers would write the same bytes at once) or cannot exist.

use std::collections::VecDeque;
use std::ffi::c_char;
use std::time::Duration;

use karu::{BatchOptions, Completion, Next, ProcessStamp, Read, ScopedBatch};
use parking_lot::Mutex;

use crate::boundary::{Out, copy_text, entry, into_handle, object, optional_text};
use crate::client::karu_client;
use crate::completion::karu_completion;
use crate::last_error::Owner;
use crate::locator::karu_locator;
use crate::status::{karu_next, karu_status};

/// `karu_batch_options.fields`: `max_gap` is set (the largest gap between merged neighbours;
/// 0 disables merging).
pub const KARU_OPT_MAX_GAP: u32 = 1;
/// `karu_batch_options.fields`: `max_span` is set (the largest span of a merged transfer).
pub const KARU_OPT_MAX_SPAN: u32 = 1 << 1;
/// `karu_batch_options.fields`: `max_parts` is set (the most reads in one transfer).
pub const KARU_OPT_MAX_PARTS: u32 = 1 << 2;
/// `karu_batch_options.fields`: `max_amplification` is set (the most fetched bytes per useful
/// byte).
pub const KARU_OPT_MAX_AMPLIFICATION: u32 = 1 << 3;
/// `karu_batch_options.fields`: read one version of each remote object in this batch (the
/// first strong ETag an answer states pins it; a read seeing another version fails with
/// `KARU_ERR_PRECONDITION_FAILED`).
pub const KARU_OPT_ONE_VERSION: u32 = 1 << 4;

/// One read: where the bytes live, which range, where they go, and the tag its completion
/// carries.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct karu_read {
    /// The object (not NULL). Karu keeps what it needs: the locator may be freed after submit.
    pub locator: *const karu_locator,
    /// The first byte, relative to the locator's window.
    pub offset: u64,
    /// How many bytes; must be finite and nonzero (`KARU_ERR_INVALID_RANGE` for that read
    /// otherwise).
    pub length: u64,
    /// NULL: Karu allocates a buffer holding what arrives, handed back through the completion
    /// (`karu_completion_take_buffer`, released with `karu_free`). Otherwise `length` bytes of
    /// the caller's, written in place: they must stay valid, and must not be touched by the
    /// caller, until `karu_batch_free` returns, except that they may be read once this read's
    /// completion has been taken. Destinations of one batch must not overlap.
    pub dst: *mut u8,
    /// The tag the completion carries.
    pub tag: u64,
    /// NULL, or the ETag the object must have (sent as `If-Match` and checked on the answer;
    /// remote objects only). Copied at submit.
    pub if_match: *const c_char,
}

/// Per-batch planner overrides: the fields named in `fields` (`KARU_OPT_*` bits) replace the
/// client's configuration for this batch; the others are ignored. A zeroed struct overrides
/// nothing.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct karu_batch_options {
    /// Which overrides are set: `KARU_OPT_*` bits.
    pub fields: u32,
    /// The largest gap between merged neighbours, in bytes (0 disables merging).
    pub max_gap: u64,
    /// The largest span of a merged transfer, in bytes.
    pub max_span: u64,
    /// The most reads in one transfer.
    pub max_parts: u32,
    /// The most fetched bytes per useful byte.
    pub max_amplification: u32,
}

/// Figures of a submission, known as soon as it is planned.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct karu_stats {
    /// Reads submitted.
    pub reads: u64,
    /// Reads rejected before any I/O.
    pub rejected: u64,
    /// Transfers planned (local reads and HTTP requests).
    pub transfers: u64,
    /// Bytes the valid reads asked for.
    pub requested_bytes: u64,
    /// Bytes the transfers fetch.
    pub fetched_bytes: u64,
}

/// A submission's completions, arriving as work finishes. Released by `karu_batch_free`,
/// which cancels what has not started and waits until no transfer references a caller
/// destination.
///
/// Thread safety: `karu_batch_next`, `karu_batch_wait`, `karu_batch_stats` and
/// `karu_batch_cancel` may be called from any number of threads at once (each completion is
/// returned once); `karu_batch_free` must not run concurrently with any of them.
///
/// Fork safety: a batch belongs to the process that submitted it. In a forked child every
/// function on a batch submitted before the fork returns `KARU_ERR_INVALID` (and
/// `karu_batch_last_error` says so), and `karu_batch_free` leaves it allocated until the child
/// exits.
#[derive(Debug)]
pub struct karu_batch {
    batch: ScopedBatch<'static>,
    process: ProcessStamp,
    owner: Owner,
    /// Each read's caller destination, by index (0 when Karu allocates).
    destinations: Box<[usize]>,
    /// Completions `karu_batch_wait` took beyond its caller's capacity.
    leftover: Mutex<VecDeque<Completion>>,
}

impl karu_batch {
    /// The batch, if this process submitted it.
    fn here(&self) -> Result<&Self, karu_status> {
        if self.process.is_current() {
            Ok(self)
        } else {
            Err(self.owner.fail(
                karu_status::KARU_ERR_INVALID,
                format!(
                    "the batch was submitted by process {} before a fork: it cannot be used \
                     in process {} (submit it again here)",
                    self.process.pid(),
                    std::process::id()
                ),
            ))
        }
    }

    fn completion(&self, completion: Completion) -> *mut karu_completion {
        let dst = self
            .destinations
            .get(completion.index())
            .copied()
            .unwrap_or(0);
        into_handle(karu_completion::new(completion, dst as *mut u8))
    }
}

/// Submit `count` reads (an array of `karu_read`) with optional planner overrides (`options`
/// NULL for none); returns at once with `*out_batch`. Karu plans them (each read validated on
/// its own, neighbours of one remote object merged under the planner's guards) and runs them;
/// each read completes on its own, with its own status: an invalid range fails that read
/// alone, while the others go on.
///
/// The whole call is refused with `KARU_ERR_INVALID` (and `karu_client_last_error` naming the
/// read) when the array itself is malformed: `reads` NULL with `count` not 0, a read without a
/// locator, an `if_match` that is not UTF-8, a destination longer than memory can be, or two
/// destinations that overlap.
///
/// Thread safety: any threads at once.
///
/// # Safety
///
/// `client` is NULL or live; `reads` is NULL or points to `count` readable `karu_read`s whose
/// `locator` is NULL or live, `if_match` NULL or NUL-terminated, and `dst` NULL or valid for
/// writes of `length` bytes under the contract of `karu_read.dst`; `options` is NULL or
/// readable; `out_batch` is NULL or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn karu_client_submit(
    client: *const karu_client,
    reads: *const karu_read,
    count: usize,
    options: *const karu_batch_options,
    out_batch: *mut *mut karu_batch,
) -> karu_status {
    entry(|| {
        // SAFETY: the caller's contract.
        let c = unsafe { object(client) }?;
        // SAFETY: the caller's contract.
        let out = unsafe { Out::new(out_batch) }?;
        let invalid = |message: String| c.owner.fail(karu_status::KARU_ERR_INVALID, message);
        let descriptors: &[karu_read] = match (reads.is_null(), count) {
            (_, 0) => &[],
            (true, _) => return Err(invalid(format!("reads is NULL but count is {count}"))),
            // SAFETY: the caller's contract: `count` readable descriptors.
            (false, _) => unsafe { std::slice::from_raw_parts(reads, count) },
        };
        // SAFETY: the caller's contract.
        let options = match unsafe { options.as_ref() } {
            Some(o) => batch_options(o),
            None => BatchOptions::new(),
        };
        check_destinations(descriptors).map_err(invalid)?;
        let mut submitted = Vec::with_capacity(descriptors.len());
        for (index, read) in descriptors.iter().enumerate() {
            // SAFETY: the caller's contract for each descriptor's fields.
            submitted.push(unsafe { to_read(index, read) }.map_err(invalid)?);
        }
        let destinations = descriptors.iter().map(|r| r.dst as usize).collect();
        // SAFETY: each borrowed destination is the caller's, valid for writes of its length
        // and untouched by the caller until `karu_batch_free` returns (the ABI's contract,
        // `karu_read.dst`); `check_destinations` made sure they do not overlap, so no two
        // transfers write the same bytes. The batch is dropped only by `karu_batch_free`
        // (which waits for every transfer, as the end of a scope does), never leaked in this
        // process: `karu_batch_free` leaks it only in a forked child, where none of its
        // transfers runs.
        let batch = unsafe { c.client.submit_unchecked(submitted, &options) };
        out.set(into_handle(karu_batch {
            batch,
            process: ProcessStamp::current(),
            owner: Owner::new(),
            destinations,
            leftover: Mutex::new(VecDeque::new()),
        }));
        Ok(())
    })
}

/// The planner overrides a C options struct names.
fn batch_options(o: &karu_batch_options) -> BatchOptions {
    let mut options = BatchOptions::new();
    if o.fields & KARU_OPT_MAX_GAP != 0 {
        options = options.max_gap(o.max_gap);
    }
    if o.fields & KARU_OPT_MAX_SPAN != 0 {
        options = options.max_span(o.max_span);
    }
    if o.fields & KARU_OPT_MAX_PARTS != 0 {
        options = options.max_parts(o.max_parts);
    }
    if o.fields & KARU_OPT_MAX_AMPLIFICATION != 0 {
        options = options.max_amplification(o.max_amplification);
    }
    if o.fields & KARU_OPT_ONE_VERSION != 0 {
        options = options.one_version();
    }
    options
}

/// Refuse caller destinations that cannot exist or that overlap each other.
fn check_destinations(reads: &[karu_read]) -> Result<(), String> {
    let mut spans = Vec::new();
    for (index, read) in reads.iter().enumerate() {
        if read.dst.is_null() || read.length == 0 {
            continue;
        }
        let start = read.dst as usize;
        let end = usize::try_from(read.length)
            .ok()
            .filter(|&len| isize::try_from(len).is_ok())
            .and_then(|len| start.checked_add(len))
            .ok_or_else(|| {
                format!(
                    "read {index}: a destination of {} bytes cannot exist",
                    read.length
                )
            })?;
        spans.push((start, end, index));
    }
    spans.sort_unstable();
    for pair in spans.windows(2) {
        let ((_, end, a), (start, _, b)) = (pair[0], pair[1]);
        if start < end {
            let (a, b) = (a.min(b), a.max(b));
            return Err(format!("reads {a} and {b} have overlapping destinations"));
        }
    }
    Ok(())
}

/// The Rust read of one C descriptor; a caller destination is carried as the pointer it is
/// ([`Read::from_raw_parts`]), never as a Rust reference.
///
/// # Safety
///
/// As for `karu_client_submit`, for this descriptor; `check_destinations` accepted it; the
/// read is submitted only with `submit_unchecked`, in a batch dropped before `dst` is the
/// caller's again (`karu_batch_free`).
unsafe fn to_read(index: usize, read: &karu_read) -> Result<Read<'static>, String> {
    // SAFETY: the caller's contract: NULL or a live locator.
    let Some(locator) = (unsafe { read.locator.as_ref() }) else {
        return Err(format!("read {index} has no locator"));
    };
    // SAFETY: the caller's contract: NULL or NUL-terminated.
    let if_match = unsafe { optional_text(read.if_match) }
        .map_err(|_| format!("read {index}: if_match is not UTF-8"))?;
    let read_of = if read.dst.is_null() {
        Read::new(&locator.locator, read.offset, read.length)
    } else {
        // `check_destinations` proved the length fits in memory (a zero length, refused by
        // the planner, writes nothing).
        let len = usize::try_from(read.length).map_err(|_| {
            format!(
                "read {index}: a destination of {} bytes cannot exist",
                read.length
            )
        })?;
        // SAFETY: `dst` is the caller's, valid for writes of `len` bytes, untouched by the
        // caller until its read's completion is taken and lent until `karu_batch_free`
        // returns (`karu_read.dst`), and no other destination of the batch overlaps it
        // (`check_destinations`): `from_raw_parts`'s contract. Our caller submits it with
        // `submit_unchecked`, whose batch `karu_batch_free` drops (waiting for its transfers).
        unsafe { Read::from_raw_parts(&locator.locator, read.offset, read.dst, len) }
    };
    let read_of = read_of.tag(read.tag);
    Ok(match if_match {
        Some(etag) => read_of.if_match(etag),
        None => read_of,
    })
}

/// Take the next completion, waiting at most `timeout_ms` milliseconds for one (0: do not
/// wait; `UINT64_MAX`: as long as it takes — every read has a deadline, so a batch never
/// waits forever). `*out_next` says what happened: `KARU_NEXT_COMPLETION` with
/// `*out_completion` set (release it with `karu_completion_free`; its own status says how the
/// read went), `KARU_NEXT_TIMED_OUT` (nothing changed), or `KARU_NEXT_DRAINED` (every read
/// has completed and been taken); `*out_completion` is NULL for the last two.
///
/// Thread safety: any threads at once; each completion goes to one of them.
///
/// # Safety
///
/// `batch` is NULL or live; `out_next` and `out_completion` are NULL or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn karu_batch_next(
    batch: *const karu_batch,
    timeout_ms: u64,
    out_next: *mut karu_next,
    out_completion: *mut *mut karu_completion,
) -> karu_status {
    entry(|| {
        // SAFETY: the caller's contract.
        let b = unsafe { object(batch) }?.here()?;
        // SAFETY: the caller's contract.
        let next_out = unsafe { Out::new(out_next) }?;
        // SAFETY: the caller's contract.
        let completion_out = unsafe { Out::new(out_completion) }?;
        let left = b.leftover.lock().pop_front();
        let next = match left {
            Some(completion) => Next::Completion(completion),
            None => b.batch.next_timeout(Duration::from_millis(timeout_ms)),
        };
        let (what, completion) = match next {
            Next::Completion(completion) => {
                (karu_next::KARU_NEXT_COMPLETION, b.completion(completion))
            }
            Next::TimedOut => (karu_next::KARU_NEXT_TIMED_OUT, std::ptr::null_mut()),
            Next::Drained => (karu_next::KARU_NEXT_DRAINED, std::ptr::null_mut()),
        };
        next_out.set(what);
        completion_out.set(completion);
        Ok(())
    })
}

/// Wait until every read has completed, then hand over the completions not taken yet, in
/// submission order, up to `capacity` of them, into `out` (`*out_count` says how many; each is
/// released with `karu_completion_free`). Any beyond `capacity` stay in the batch for
/// `karu_batch_next` or another `karu_batch_wait`. `capacity` 0 (with `out` NULL) only waits.
///
/// Blocks the calling thread. Thread safety: any threads at once.
///
/// # Safety
///
/// `batch` is NULL or live; `out` is valid for `capacity` writes (NULL only with `capacity`
/// 0); `out_count` is NULL or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn karu_batch_wait(
    batch: *const karu_batch,
    out: *mut *mut karu_completion,
    capacity: usize,
    out_count: *mut usize,
) -> karu_status {
    entry(|| {
        // SAFETY: the caller's contract.
        let b = unsafe { object(batch) }?.here()?;
        // SAFETY: the caller's contract.
        let count = unsafe { Out::new(out_count) }?;
        if out.is_null() && capacity > 0 {
            return Err(b.owner.fail(
                karu_status::KARU_ERR_INVALID,
                "out is NULL but capacity is not 0",
            ));
        }
        let drained = b.batch.wait();
        let mut leftover = b.leftover.lock();
        leftover.extend(drained);
        leftover.make_contiguous().sort_by_key(Completion::index);
        let n = capacity.min(leftover.len());
        for (i, completion) in leftover.drain(..n).enumerate() {
            // SAFETY: `out` holds `capacity > i` writable slots (the caller's contract).
            unsafe { out.add(i).write(b.completion(completion)) };
        }
        count.set(n);
        Ok(())
    })
}

/// Figures of the plan: reads, rejected reads, transfers, requested and fetched bytes.
///
/// # Safety
///
/// `batch` is NULL or live; `out_stats` is NULL or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn karu_batch_stats(
    batch: *const karu_batch,
    out_stats: *mut karu_stats,
) -> karu_status {
    entry(|| {
        // SAFETY: the caller's contract.
        let b = unsafe { object(batch) }?.here()?;
        // SAFETY: the caller's contract.
        let out = unsafe { Out::new(out_stats) }?;
        let stats = b.batch.stats();
        out.set(karu_stats {
            reads: stats.reads as u64,
            rejected: stats.rejected as u64,
            transfers: stats.transfers as u64,
            requested_bytes: stats.requested_bytes,
            fetched_bytes: stats.fetched_bytes,
        });
        Ok(())
    })
}

/// Cancel the reads that have not started; running transfers finish or abort. Every read still
/// completes (cancelled ones with `KARU_ERR_CANCELLED`).
///
/// # Safety
///
/// `batch` is NULL or live.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn karu_batch_cancel(batch: *const karu_batch) -> karu_status {
    entry(|| {
        // SAFETY: the caller's contract.
        let b = unsafe { object(batch) }?.here()?;
        b.batch.cancel();
        Ok(())
    })
}

/// The message of the last call on `batch` that failed on this thread (`""` if none), copied
/// as `karu_client_last_error` does: a batch of another process (after a fork), an invalid
/// argument. (A read's own failure is its completion's: `karu_completion_message`.) Works on a
/// batch inherited through a fork too.
///
/// Thread safety: any threads at once; each thread sees its own calls' messages.
///
/// # Safety
///
/// `batch` is NULL or live; `buffer` is valid for `capacity` bytes (NULL only with `capacity`
/// 0); `out_len` is NULL or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn karu_batch_last_error(
    batch: *const karu_batch,
    buffer: *mut c_char,
    capacity: usize,
    out_len: *mut usize,
) -> karu_status {
    entry(|| {
        // SAFETY: the caller's contract.
        let b = unsafe { object(batch) }?;
        // SAFETY: the caller's contract.
        unsafe { copy_text(&b.owner.last(), buffer, capacity, out_len) }
    })
}

/// Release a batch (NULL is ignored): reads that have not started are cancelled, and the call
/// waits until no transfer references a caller destination; then those destinations are the
/// caller's again. Completions already taken stay valid. Must not run concurrently with any
/// other call on the batch.
///
/// In a forked child, a batch submitted before the fork is not freed (nothing of it runs
/// there; it stays allocated until the child exits) and `KARU_ERR_INVALID` says so.
///
/// # Safety
///
/// `batch` is NULL or from `karu_client_submit`, not used afterwards, in use by no other
/// thread.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn karu_batch_free(batch: *mut karu_batch) -> karu_status {
    entry(|| {
        // SAFETY: the caller's contract: NULL or a live batch, in use by no other thread.
        let Some(b) = (unsafe { batch.as_ref() }) else {
            return Ok(());
        };
        // In another process (a forked child), the batch is left alone: its memory may hold
        // locks of threads that are not here, and none of its transfers runs here.
        b.here()?;
        // SAFETY: from `karu_client_submit`, freed once; dropping it waits for its transfers.
        drop(unsafe { Box::from_raw(batch) });
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(dst: usize, length: u64) -> karu_read {
        karu_read {
            locator: std::ptr::null(),
            offset: 0,
            length,
            dst: dst as *mut u8,
            tag: 0,
            if_match: std::ptr::null(),
        }
    }

    #[test]
    fn destinations_must_not_overlap() {
        assert_eq!(
            check_destinations(&[read(1000, 10), read(1010, 10)]),
            Ok(())
        );
        assert_eq!(
            check_destinations(&[read(1000, 10), read(0, 5), read(1009, 1)]),
            Err("reads 0 and 2 have overlapping destinations".into())
        );
        // Karu-allocated and empty ones never overlap anything.
        assert_eq!(
            check_destinations(&[read(0, 10), read(1000, 0), read(1000, 4)]),
            Ok(())
        );
    }

    /// A caller's destination reaches Karu as its pointer and length (no Rust reference is
    /// made of it), for exactly the read's bytes; the caller's memory is its own again once
    /// the read is dropped. Run under Miri, which checks the caller's later use.
    #[test]
    fn a_caller_destination_is_carried_as_its_pointer() {
        let registry = karu::sdk::testing::registry();
        let object = registry.resolve("/karu-test/object").unwrap();
        let locator = crate::locator::karu_locator::new(object);
        let mut foreign = vec![0u8; 16];
        let base = foreign.as_mut_ptr();
        let mut descriptor = karu_read {
            locator: &locator,
            offset: 3,
            length: 8,
            // SAFETY: 8 of `foreign`'s 16 bytes.
            dst: unsafe { base.add(4) },
            tag: 9,
            if_match: std::ptr::null(),
        };
        assert_eq!(check_destinations(&[descriptor]), Ok(()));
        // SAFETY: a live locator, a destination valid for its length, never submitted.
        let read = unsafe { to_read(0, &descriptor) }.unwrap();
        assert_eq!((read.offset(), read.length()), (3, 8));
        // The caller may use its buffer around the destination meanwhile.
        // SAFETY: bytes 0..4 of `foreign`, outside the destination.
        unsafe { base.write_bytes(0xCC, 4) };
        drop(read);
        // A zero length at any address, and a Karu-allocated destination, are read as such.
        descriptor.length = 0;
        // SAFETY: as above; 0 bytes.
        assert_eq!(unsafe { to_read(1, &descriptor) }.unwrap().length(), 0);
        descriptor.dst = std::ptr::null_mut();
        descriptor.length = 5;
        // SAFETY: as above; no destination.
        assert_eq!(unsafe { to_read(2, &descriptor) }.unwrap().length(), 5);
        descriptor.locator = std::ptr::null();
        // SAFETY: no locator: refused before anything is read.
        let refused = unsafe { to_read(3, &descriptor) }.unwrap_err();
        assert_eq!(refused, "read 3 has no locator");
        foreign[15] = 1;
        assert_eq!(foreign[..5], [0xCC, 0xCC, 0xCC, 0xCC, 0]);
    }

    #[test]
    fn destinations_must_fit_in_memory() {
        assert!(check_destinations(&[read(1000, u64::MAX)]).is_err());
        assert!(check_destinations(&[read(usize::MAX - 4, 10)]).is_err());
        assert!(check_destinations(&[read(8, isize::MAX as u64 + 1)]).is_err());
    }

    /// `karu_batch_free` is a scope's end for the caller's destinations: while a transfer
    /// that may write to one is active, it does not return, and when it returns the transfer
    /// has written what it read.
    #[test]
    #[cfg_attr(
        miri,
        ignore = "file leases and Karu's worker threads: Miri has no shims for them"
    )]
    fn freeing_a_batch_waits_for_its_active_transfers() {
        use std::os::fd::AsRawFd;
        use std::sync::mpsc;
        use std::time::Duration;

        // A file whose open for reading waits while this test holds a write lease on it: the
        // file worker's transfer is then active, with the caller's buffer, until the lease
        // ends. (`F_SETSIG` from Linux's <fcntl.h>: the holder is told by SIGURG, ignored,
        // instead of SIGIO, which would end the process.)
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("held");
        let content: Vec<u8> = (0..64u8).collect();
        std::fs::write(&path, &content).unwrap();
        let lease = std::fs::File::open(&path).unwrap();
        const F_SETSIG: libc::c_int = 10;
        // SAFETY: fcntl with integer arguments on a descriptor this test owns.
        let signal = unsafe { libc::fcntl(lease.as_raw_fd(), F_SETSIG, libc::SIGURG) };
        assert_eq!(signal, 0);
        // SAFETY: as above.
        let leased = unsafe { libc::fcntl(lease.as_raw_fd(), libc::F_SETLEASE, libc::F_WRLCK) };
        assert_eq!(
            leased,
            0,
            "a write lease: {}",
            std::io::Error::last_os_error()
        );
        // SAFETY: as above.
        let held = unsafe { libc::fcntl(lease.as_raw_fd(), libc::F_GETLEASE) };
        assert_eq!(held, libc::F_WRLCK, "the lease reads as held");

        let client = crate::client::karu_client {
            client: karu::Client::builder()
                .user_config_file(None)
                .project_config_file(None)
                .environment(Vec::<(String, String)>::new())
                .build()
                .unwrap(),
            owner: crate::last_error::Owner::new(),
        };
        let locator = crate::locator::karu_locator::new(
            client.client.locate(path.to_str().unwrap()).unwrap(),
        );
        let mut destination = vec![0u8; 64];
        let read = karu_read {
            locator: &locator,
            offset: 0,
            length: 64,
            dst: destination.as_mut_ptr(),
            tag: 1,
            if_match: std::ptr::null(),
        };
        let mut batch: *mut karu_batch = std::ptr::null_mut();
        // SAFETY: live client, one descriptor, a destination valid until the batch is freed.
        let submitted =
            unsafe { karu_client_submit(&client, &read, 1, std::ptr::null(), &mut batch) };
        assert_eq!(submitted, karu_status::KARU_OK);
        // SAFETY: the batch is live until freed below.
        let began = unsafe { &*batch }
            .batch
            .wait_for_active(1, Duration::from_secs(20));
        assert!(began, "no worker began the read");
        // Begun is not yet reading: a cancel between the two ends the transfer before it opens
        // the file (nothing is written, and freeing returns at once). The worker's open of the
        // file starts the lease's break, and from then on the lease reads as the type it will
        // be downgraded to: the worker is inside its read, waiting for the lease.
        let breaking = std::time::Instant::now() + Duration::from_secs(20);
        // SAFETY: fcntl with integer arguments on a descriptor this test owns.
        while unsafe { libc::fcntl(lease.as_raw_fd(), libc::F_GETLEASE) } == libc::F_WRLCK {
            assert!(
                std::time::Instant::now() < breaking,
                "the worker never opened the file"
            );
            std::thread::sleep(Duration::from_millis(1));
        }

        let (freed, has_freed) = mpsc::channel();
        let (batch, dst) = (batch as usize, destination.as_ptr() as usize);
        let freeing = std::thread::spawn(move || {
            // SAFETY: the batch, used by no other thread from now on.
            let status = unsafe { karu_batch_free(batch as *mut karu_batch) };
            // SAFETY: the destination lives until the test has joined this thread; nothing
            // writes to it once `karu_batch_free` has returned.
            let seen = unsafe { std::slice::from_raw_parts(dst as *const u8, 64) }.to_vec();
            freed.send((status, seen)).unwrap();
        });
        // The worker is inside its transfer, waiting for the lease: freeing must not have
        // returned. (A free that did not wait would have returned at once.)
        assert!(
            matches!(
                has_freed.recv_timeout(Duration::from_millis(300)),
                Err(mpsc::RecvTimeoutError::Timeout)
            ),
            "karu_batch_free returned while a transfer could write to the caller's buffer"
        );
        drop(lease);
        let (status, seen) = has_freed.recv_timeout(Duration::from_secs(20)).unwrap();
        assert_eq!(status, karu_status::KARU_OK);
        assert_eq!(
            seen, content,
            "the read was written before the free returned"
        );
        freeing.join().unwrap();
        drop(destination); // the caller's again
    }

    #[test]
    fn options_override_only_the_fields_named() {
        let none = batch_options(&karu_batch_options::default());
        assert_eq!(none, BatchOptions::new());
        let o = karu_batch_options {
            fields: KARU_OPT_MAX_GAP | KARU_OPT_ONE_VERSION,
            max_gap: 0,
            max_span: 7,
            ..Default::default()
        };
        assert_eq!(
            batch_options(&o),
            BatchOptions::new().max_gap(0).one_version()
        );
    }
}
