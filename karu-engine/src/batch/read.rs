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

/// A mutable slice whose borrow is enforced by a scope rather than by the type system, so that
/// it can travel to a worker thread.
pub(crate) struct RawSlice<'d> {
    ptr: NonNull<u8>,
    len: usize,
    _borrow: PhantomData<&'d mut [u8]>,
}

// SAFETY: a RawSlice is created from a `&'d mut [u8]`, which is `Send`; it is only dereferenced
// by the one worker that owns the transfer holding it, while that transfer is active. The scope
// that submitted it waits until no transfer of its batches is active before `'d` ends.
unsafe impl Send for RawSlice<'_> {}

impl<'d> RawSlice<'d> {
    fn new(slice: &'d mut [u8]) -> Self {
        RawSlice {
            ptr: NonNull::from(&mut *slice).cast(),
            len: slice.len(),
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
                // SAFETY: the pointer came from a live `&mut [u8]` of `len` bytes (see
                // `RawSlice`) submitted through a scope, which waits until no transfer of its
                // batches is active; this one is, for as long as `active` is borrowed, and the
                // returned slice cannot outlive that borrow. `n <= len`; the transfer owns the
                // sink exclusively (`&'s mut self`), so the slice is not aliased.
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
