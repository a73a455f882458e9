//! What the caller asks (`Read`, `Destination`) and what it gets back (`Completion`).

use std::fmt;
use std::marker::PhantomData;
use std::ptr::NonNull;

use crate::batch::Active;
use crate::batch::timing::Timing;
use crate::sdk::{Error, Locator, Status};

/// One original read: where the bytes live, which range is wanted, where they go, and the tag
/// the completion will carry.
///
/// The lifetime `'d` is that of a borrowed destination; reads with owned or Karu-allocated
/// destinations are `Read<'static>`. Borrowed destinations can only be submitted inside a scope
/// (`Client::scope` in the `karu` crate), which waits for every transfer before the borrow ends.
#[derive(Debug)]
pub struct Read<'d> {
    pub(crate) locator: Locator,
    pub(crate) offset: u64,
    pub(crate) length: u64,
    pub(crate) destination: Destination<'d>,
    pub(crate) tag: Option<u64>,
    pub(crate) if_match: Option<String>,
}

impl Read<'static> {
    /// A read of `length` bytes at `offset` (relative to the locator's window, if any), into a
    /// buffer Karu allocates and hands back in the [`Completion`]. The buffer follows the data:
    /// it holds what the file or the response delivers, so a length far beyond the object's
    /// end costs only the bytes that exist. Its tag defaults to its index in the submission.
    pub fn new(locator: &Locator, offset: u64, length: u64) -> Self {
        Read {
            locator: locator.clone(),
            offset,
            length,
            destination: Destination::Allocate,
            tag: None,
            if_match: None,
        }
    }

    /// Deliver into this owned buffer instead (its capacity is reused; its contents replaced).
    /// The completion hands it back, truncated to the bytes received, whatever the read's
    /// status ([`Completion::into_buffer`]).
    ///
    /// ```
    /// # use karu_engine::{Locator, Read};
    /// # fn reads(object: &Locator, recycled: Vec<u8>) -> Read<'static> {
    /// Read::new(object, 4096, 512).with_buffer(recycled)
    /// # }
    /// ```
    pub fn with_buffer(mut self, buffer: Vec<u8>) -> Self {
        self.destination = Destination::Owned(buffer);
        self
    }

    /// A read of `length` bytes at `offset` straight into memory that Rust does not own: the
    /// `length` bytes at `destination`, lent by a foreign caller (a C program's buffer, a
    /// Python object's exported buffer) for the life of a batch.
    ///
    /// No Rust reference to that memory is made here, nor while the read waits: the pointer
    /// travels as it is to the one transfer that fills it, which makes a slice of it only
    /// while it writes (and only of the bytes the read asked for). So Karu claims the bytes
    /// only while it writes them, never for the whole life of the program, as a
    /// `&'static mut [u8]` made from the pointer would.
    ///
    /// ```
    /// # let registry = karu_engine::sdk::testing::registry();
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let path = dir.path().join("f");
    /// # std::fs::write(&path, b"abcdef").unwrap();
    /// # let object = registry.resolve(path.to_str().unwrap()).unwrap();
    /// # let engine = karu_engine::Engine::new(karu_config::Snapshot::defaults()).unwrap();
    /// let mut foreign = vec![0u8; 4]; // stands for a C caller's buffer
    /// let destination = foreign.as_mut_ptr();
    /// // SAFETY: `destination` is valid for 4 bytes, which nothing else touches until the
    /// // batch (which waits for its transfers when dropped) is dropped at the end of the block.
    /// let status = unsafe {
    ///     let read = karu_engine::Read::from_raw_parts(&object, 2, destination, 4);
    ///     let batch = engine.submit_unchecked([read], &karu_engine::BatchOptions::new());
    ///     batch.wait()[0].status()
    /// };
    /// assert_eq!((status, foreign.as_slice()), (karu_engine::Status::Ok, &b"cdef"[..]));
    /// ```
    ///
    /// # Safety
    ///
    /// - `destination` is valid for writes of `length` bytes (it may be dangling or null
    ///   only when `length` is 0), and these bytes overlap no other destination of the batch;
    /// - the read is submitted only in a batch that waits for its transfers when it is dropped
    ///   ([`Engine::submit_unchecked`](crate::Engine::submit_unchecked) or a
    ///   [`Scope`](crate::Scope)), never with [`Engine::submit`](crate::Engine::submit),
    ///   whose batch does not wait;
    /// - from the submission until that batch has been dropped, nobody else writes these
    ///   bytes, nobody reads them before the read's completion has been taken, and they are
    ///   neither freed nor reused: the batch's drop is what gives them back.
    ///
    /// A read that is never submitted writes nothing.
    pub unsafe fn from_raw_parts(
        locator: &Locator,
        offset: u64,
        destination: *mut u8,
        length: usize,
    ) -> Self {
        Read {
            locator: locator.clone(),
            offset,
            length: length as u64,
            destination: Destination::Borrowed(RawSlice::from_raw_parts(destination, length)),
            tag: None,
            if_match: None,
        }
    }
}

impl<'d> Read<'d> {
    /// A read of `destination.len()` bytes at `offset` straight into a borrowed slice. Submit it
    /// through a scope ([`Engine::scope`](crate::Engine::scope)), which keeps the slice
    /// borrowed until every transfer has finished.
    pub fn borrowed(locator: &Locator, offset: u64, destination: &'d mut [u8]) -> Self {
        let length = destination.len() as u64;
        Read {
            locator: locator.clone(),
            offset,
            length,
            destination: Destination::Borrowed(RawSlice::new(destination)),
            tag: None,
            if_match: None,
        }
    }

    /// Set the tag the completion carries.
    pub fn tag(mut self, tag: u64) -> Self {
        self.tag = Some(tag);
        self
    }

    /// Require the object's ETag to be exactly this value (sent as `If-Match`, and checked by
    /// Karu on the response). Applies to remote objects only.
    pub fn if_match(mut self, etag: impl Into<String>) -> Self {
        self.if_match = Some(etag.into());
        self
    }

    /// The locator read from.
    pub fn locator(&self) -> &Locator {
        &self.locator
    }

    /// The offset, relative to the locator's window.
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// The number of bytes wanted.
    pub fn length(&self) -> u64 {
        self.length
    }
}

/// Where a read's bytes go.
pub(crate) enum Destination<'d> {
    /// Karu allocates a buffer holding what arrives (never more than the read's length).
    Allocate,
    /// A caller's buffer, moved in and handed back through the completion.
    Owned(Vec<u8>),
    /// A caller's slice, only submitted through a scope.
    Borrowed(RawSlice<'d>),
}

impl fmt::Debug for Destination<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Destination::Allocate => f.write_str("Allocate"),
            Destination::Owned(v) => write!(f, "Owned(capacity {})", v.capacity()),
            Destination::Borrowed(s) => write!(f, "Borrowed(len {})", s.len),
        }
    }
}

/// A caller's destination as a pointer and a length, whose borrow is enforced by a scope (or
/// a batch that waits as a scope does) rather than by the type system, so that it can travel
/// to a worker thread. Made from a `&'d mut [u8]` ([`Read::borrowed`]) or from a foreign
/// caller's pointer ([`Read::from_raw_parts`]); it is turned into a slice only by
/// [`Sink::open`], for the transfer that writes it.
pub(crate) struct RawSlice<'d> {
    ptr: NonNull<u8>,
    len: usize,
    _borrow: PhantomData<&'d mut [u8]>,
}

// SAFETY: a RawSlice is made from a `&'d mut [u8]`, which is `Send`, or from a pointer whose
// bytes its caller lends to the batch alone (`Read::from_raw_parts`); it is only dereferenced
// by the one worker that owns the transfer holding it, while that transfer is active. The scope
// or waiting batch that submitted it waits until no transfer of its batches is active before
// `'d` ends (or the foreign caller takes its bytes back).
unsafe impl Send for RawSlice<'_> {}

impl<'d> RawSlice<'d> {
    fn new(slice: &'d mut [u8]) -> Self {
        RawSlice {
            ptr: NonNull::from(&mut *slice).cast(),
            len: slice.len(),
            _borrow: PhantomData,
        }
    }

    /// `len` bytes at `ptr`, valid for writes as [`Read::from_raw_parts`] requires (a null
    /// pointer, allowed only for 0 bytes, becomes a dangling one, which a slice of 0 bytes
    /// may have).
    fn from_raw_parts(ptr: *mut u8, len: usize) -> Self {
        RawSlice {
            ptr: NonNull::new(ptr).unwrap_or(NonNull::dangling()),
            len,
            _borrow: PhantomData,
        }
    }
}

/// A destination opened by an active transfer (see [`Sink::open`]).
pub(crate) enum Open<'s> {
    /// A caller's slice of exactly the read's length.
    Slice(&'s mut [u8]),
    /// An owned vector, empty, to be grown to at most the read's length.
    Vec(&'s mut Vec<u8>),
}

/// The bytes of a destination while a transfer fills it, erased of the caller's lifetime.
///
/// The engine moves a `Sink` into the worker that runs the transfer and back out into the
/// completion; it is never shared between threads.
pub(crate) enum Sink {
    /// Not yet allocated (Karu allocates as bytes arrive).
    Allocate,
    /// An owned buffer, holding the bytes received so far while filling.
    Owned(Vec<u8>),
    /// A borrowed slice (see [`RawSlice`]).
    Borrowed { ptr: NonNull<u8>, len: usize },
}

// SAFETY: see `RawSlice`: the borrowed variant is only dereferenced through `Sink::open`, by the
// worker owning the transfer while it holds the transfer's `Active` guard, and its scope waits
// for every active transfer.
unsafe impl Send for Sink {}

impl Sink {
    pub(crate) fn from_destination(destination: Destination<'_>) -> Sink {
        match destination {
            Destination::Allocate => Sink::Allocate,
            Destination::Owned(v) => Sink::Owned(v),
            Destination::Borrowed(raw) => Sink::Borrowed {
                ptr: raw.ptr,
                len: raw.len,
            },
        }
    }

    /// The destination of a read of `length` bytes while its transfer is active: a caller's
    /// slice, filled in place, or an owned vector (Karu's own, allocated empty now), emptied
    /// and grown by the transfer as bytes arrive, never beyond `length`. Nothing is allocated
    /// here: memory follows the data.
    ///
    /// The borrow of `active` is what makes the borrowed slice sound: the slice cannot outlive
    /// the guard, and while the guard lives, the batch's release and its scope wait.
    pub(crate) fn open<'s>(
        &'s mut self,
        _active: &'s Active<'_>,
        length: u64,
    ) -> Result<Open<'s>, Error> {
        match self {
            Sink::Allocate => {
                *self = Sink::Owned(Vec::new());
                match self {
                    Sink::Owned(v) => Ok(Open::Vec(v)),
                    _ => Err(Error::internal("destination was not allocated")),
                }
            }
            Sink::Owned(v) => {
                v.clear();
                Ok(Open::Vec(v))
            }
            Sink::Borrowed { ptr, len } => {
                let n = usize::try_from(length)
                    .ok()
                    .filter(|&n| n <= *len)
                    .ok_or_else(|| {
                        Error::new(
                            Status::InvalidArgument,
                            format!(
                                "destination of {len} bytes is too small for a read of {length} bytes"
                            ),
                        )
                    })?;
                // SAFETY: the pointer came from a live `&mut [u8]` of `len` bytes, or from a
                // foreign caller's `len` bytes lent to this batch alone (see `RawSlice`),
                // submitted through a scope or a batch that waits as one does, until no
                // transfer of its batches is active; this one is, for as long as `active` is
                // borrowed, and the returned slice cannot outlive that borrow. `n <= len`;
                // the transfer owns the sink exclusively (`&'s mut self`), and the caller
                // neither reads nor writes these bytes before the read's completion, so the
                // slice is not aliased while it lives.
                Ok(Open::Slice(unsafe {
                    std::slice::from_raw_parts_mut(ptr.as_ptr(), n)
                }))
            }
        }
    }

    /// Hand the buffer back: owned buffers are truncated to the bytes received.
    pub(crate) fn into_buffer(self, received: u64) -> Option<Vec<u8>> {
        match self {
            Sink::Allocate => Some(Vec::new()),
            Sink::Owned(mut v) => {
                v.truncate(received as usize);
                Some(v)
            }
            Sink::Borrowed { .. } => None,
        }
    }
}

impl fmt::Debug for Sink {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Sink::Allocate => f.write_str("Allocate"),
            Sink::Owned(v) => write!(f, "Owned(capacity {})", v.capacity()),
            Sink::Borrowed { len, .. } => write!(f, "Borrowed(len {len})"),
        }
    }
}

/// The result of one original read: its tag, status, how many bytes arrived, and its buffer.
///
/// On [`Status::Ok`] the buffer holds exactly the requested bytes. On
/// [`Status::RangeNotSatisfiable`] the first [`bytes_received`](Completion::bytes_received)
/// bytes are a valid prefix (the object ended there). On any other error the contents are
/// unspecified and `bytes_received` is 0.
pub struct Completion {
    pub(crate) tag: u64,
    pub(crate) index: usize,
    pub(crate) result: Result<(), Error>,
    pub(crate) bytes_received: u64,
    pub(crate) buffer: Option<Vec<u8>>,
    /// When it was queued, received its first byte and completed; what carried it.
    pub(crate) timing: Timing,
}

impl Completion {
    /// The read's tag (its index in the submission unless set with [`Read::tag`]).
    pub fn tag(&self) -> u64 {
        self.tag
    }

    /// The read's index in its submission.
    pub fn index(&self) -> usize {
        self.index
    }

    /// The read's timings (from its batch's submission to its first byte and its completion)
    /// and the counts of the transfer that carried it.
    pub fn timing(&self) -> &Timing {
        &self.timing
    }

    /// The read's status.
    pub fn status(&self) -> Status {
        match &self.result {
            Ok(()) => Status::Ok,
            Err(e) => e.status(),
        }
    }

    /// Whether the read succeeded.
    pub fn is_ok(&self) -> bool {
        self.result.is_ok()
    }

    /// The error, when the read failed.
    pub fn error(&self) -> Option<&Error> {
        self.result.as_ref().err()
    }

    /// The result as a `Result`.
    pub fn result(&self) -> Result<(), &Error> {
        self.result.as_ref().map(|_| ())
    }

    /// How many bytes were delivered (the full length on success; a valid prefix on
    /// [`Status::RangeNotSatisfiable`]; 0 otherwise).
    pub fn bytes_received(&self) -> u64 {
        self.bytes_received
    }

    /// The delivered bytes of an owned or Karu-allocated destination (empty for a borrowed one).
    pub fn bytes(&self) -> &[u8] {
        self.buffer.as_deref().unwrap_or(&[])
    }

    /// Take the buffer (owned or Karu-allocated destinations), truncated to
    /// [`bytes_received`](Completion::bytes_received).
    pub fn into_buffer(self) -> Option<Vec<u8>> {
        self.buffer
    }

    /// The bytes, or the error for this read.
    pub fn into_result(self) -> Result<Vec<u8>, Error> {
        match self.result {
            Ok(()) => Ok(self.buffer.unwrap_or_default()),
            Err(e) => Err(e),
        }
    }
}

impl fmt::Debug for Completion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Completion")
            .field("tag", &self.tag)
            .field("index", &self.index)
            .field("status", &self.status())
            .field("bytes_received", &self.bytes_received)
            .field("error", &self.error().map(|e| e.message()))
            .field("timing", &self.timing)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    //! Run under Miri too (a stage of `cargo xtask test`): the pointer of a foreign
    //! destination must reach the transfer that writes it with the caller's permission intact.

    use super::*;
    use crate::batch::BatchShared;

    fn locator() -> Locator {
        crate::sdk::testing::registry()
            .resolve("/karu-test/object")
            .unwrap()
    }

    /// The transfer's write through the opened slice of `sink` of `length` bytes: `fill`.
    fn write(batch: &BatchShared, sink: &mut Sink, length: u64, fill: u8) -> Result<(), Error> {
        let active = batch.begin().expect("not cancelled");
        match sink.open(&active, length)? {
            Open::Slice(slice) => slice.fill(fill),
            Open::Vec(_) => panic!("a foreign destination opened as a vector"),
        }
        active.complete([]);
        Ok(())
    }

    /// Two reads into one foreign buffer (as the Python face reads a zarr chunk batch, back to
    /// back): the first is written and then read by its caller through the caller's own
    /// pointer while the second still waits; then the second is written. Each write goes
    /// through the pointer the caller lent, and nothing but the transfer claims the bytes.
    #[test]
    fn foreign_destinations_are_written_in_place_by_their_transfers_alone() {
        let object = locator();
        let mut foreign = vec![0u8; 12];
        let base = foreign.as_mut_ptr();
        // SAFETY: bytes 0..4 and 4..10 of `foreign`, disjoint, written only by the transfers
        // below; `foreign` is read through `base` only after the first one's write.
        let (first, second) = unsafe {
            (
                Read::from_raw_parts(&object, 0, base, 4),
                Read::from_raw_parts(&object, 100, base.add(4), 6),
            )
        };
        assert_eq!((first.length(), second.length()), (4, 6));
        let mut first = Sink::from_destination(first.destination);
        let mut second = Sink::from_destination(second.destination);
        let batch = BatchShared::new(Box::new([0, 1]), false);
        write(&batch, &mut first, 4, 0xA1).unwrap();
        // The first read's completion was taken: its caller may read its bytes.
        // SAFETY: `base` is `foreign`'s, 12 bytes; no transfer is active.
        let seen = unsafe { std::slice::from_raw_parts(base, 4) }.to_vec();
        assert_eq!(seen, [0xA1; 4]);
        write(&batch, &mut second, 6, 0xB2).unwrap();
        assert!(first.into_buffer(4).is_none() && second.into_buffer(6).is_none());
        assert_eq!(
            foreign,
            [[0xA1; 4].as_slice(), &[0xB2; 6], &[0; 2]].concat()
        );
    }

    #[test]
    fn a_foreign_destination_is_never_written_past_its_length() {
        let object = locator();
        let mut foreign = [7u8; 8];
        // SAFETY: the first 4 bytes of `foreign`, written only by the transfer below.
        let read = unsafe { Read::from_raw_parts(&object, 0, foreign.as_mut_ptr(), 4) };
        let mut sink = Sink::from_destination(read.destination);
        let batch = BatchShared::new(Box::new([0]), false);
        let refused = write(&batch, &mut sink, 5, 0xFF).unwrap_err();
        assert_eq!(refused.status(), Status::InvalidArgument);
        assert_eq!(foreign, [7; 8], "nothing written");
        // A transfer that delivers less than the length writes only what arrived.
        write(&batch, &mut sink, 3, 0xFF).unwrap();
        assert_eq!(foreign, [0xFF, 0xFF, 0xFF, 7, 7, 7, 7, 7]);
    }

    #[test]
    fn an_empty_foreign_destination_may_be_null() {
        // SAFETY: 0 bytes: nothing is written.
        let read = unsafe { Read::from_raw_parts(&locator(), 0, std::ptr::null_mut(), 0) };
        assert_eq!(read.length(), 0);
        let mut sink = Sink::from_destination(read.destination);
        let batch = BatchShared::new(Box::new([0]), false);
        write(&batch, &mut sink, 0, 0xFF).unwrap();
        assert_eq!(format!("{sink:?}"), "Borrowed(len 0)");
    }

    /// A scope's borrowed slice takes the same road.
    #[test]
    fn a_borrowed_slice_is_written_in_place() {
        let mut buffer = [0u8; 5];
        let read = Read::borrowed(&locator(), 0, &mut buffer);
        let mut sink = Sink::from_destination(read.destination);
        let batch = BatchShared::new(Box::new([0]), false);
        write(&batch, &mut sink, 5, 3).unwrap();
        drop(sink);
        assert_eq!(buffer, [3; 5]);
    }
}
