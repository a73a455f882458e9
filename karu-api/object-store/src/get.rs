//! `get_opts`: one request for the first answer (its `Content-Range` states the size, its
//! ETag the version), then, for what that answer did not hold, reads of that same version,
//! delivered in order as a stream of chunks.
//!
//! The first request is [`Client::read_ends`](karu::Client::read_ends) of a window starting
//! where the range does: the head of that window for a bounded range, an offset or the whole
//! object, the tail of the object for a suffix. So no request asks for the size on its own (no
//! HEAD, no probe before the read): a range of up to one chunk is one request. A longer range
//! continues with chunks of `http.part_size` (8 MiB by default), a few in flight at once, kept
//! to the first answer's version:
//!
//! - an object with a strong ETag: each chunk carries it as `If-Match`, so a replaced object
//!   fails the stream instead of mixing two versions;
//! - a local file (no ETag): what identifies its version to Karu, its size and modification
//!   time, is read again once the last chunk has arrived and must equal what the first answer
//!   stated, else the stream ends with [`PreconditionFailed`](karu::Status::PreconditionFailed)
//!   instead of its last chunk;
//! - a remote object without a strong ETag cannot be pinned: the store reads its range again
//!   in one request instead (see `KaruStore`), never through this stream.

use std::collections::VecDeque;
use std::ops::Range;
use std::time::SystemTime;

use bytes::Bytes;
use futures_util::StreamExt;
use futures_util::stream::{self, BoxStream};
use karu::{Batch, Client, Completion, Locator, Read};

use crate::error::{StoreError, from_karu};

/// Chunks of a long range in flight at once: the memory a stream holds is at most this many
/// chunks (64 MiB with the default part size).
pub(crate) const CHUNKS_IN_FLIGHT: usize = 8;

/// The chunk size when `http.part_size` is 0 (never split): Karu's default part size.
pub(crate) const DEFAULT_CHUNK: u64 = 8 << 20;

/// The range a get asks for, as object_store's `GetRange` states it (each major's trait
/// implementation converts its major's `GetRange` into this).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ByteRange {
    /// These bytes (a range reaching past the end returns what exists).
    Bounded(Range<u64>),
    /// From this offset to the end.
    Offset(u64),
    /// The last this many bytes.
    Suffix(u64),
}

impl ByteRange {
    /// Whether object_store accepts the range at all: a bounded range must not be empty or
    /// end before it starts (object_store's `GetRange::is_valid`, with its message).
    pub(crate) fn is_valid(&self) -> Result<(), RangeError> {
        if let ByteRange::Bounded(r) = self {
            if r.end <= r.start {
                return Err(format!("Range started at {} and ended at {}", r.start, r.end).into());
            }
            if r.end - r.start > usize::MAX as u64 {
                return Err(format!(
                    "Range {} is larger than system memory limit {}",
                    r.start,
                    usize::MAX
                )
                .into());
            }
        }
        Ok(())
    }

    /// The bytes of an object of `len` bytes the range stands for, as object_store's
    /// `ByteRange::as_range` says (a start at or past the end is an error; a bounded range
    /// past the end is cut to it; a suffix longer than the object is all of it).
    pub(crate) fn as_range(&self, len: u64) -> Result<Range<u64>, RangeError> {
        self.is_valid()?;
        let start_too_large = |requested: u64| -> RangeError {
            format!("Wanted range starting at {requested}, but object was only {len} bytes long")
                .into()
        };
        match self {
            ByteRange::Bounded(r) if r.start >= len => Err(start_too_large(r.start)),
            ByteRange::Bounded(r) => Ok(r.start..r.end.min(len)),
            ByteRange::Offset(o) if *o >= len => Err(start_too_large(*o)),
            ByteRange::Offset(o) => Ok(*o..len),
            ByteRange::Suffix(n) => Ok(len.saturating_sub(*n)..len),
        }
    }
}

/// The first request of a get: `read_ends(locator.with_window(start, None), head, tail)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct First {
    /// Where the window starts (0: the whole object).
    pub(crate) start: u64,
    /// Bytes asked for at the start of the window.
    pub(crate) head: u64,
    /// Bytes asked for at the end of the object.
    pub(crate) tail: u64,
}

impl First {
    /// The first request for `range` (`None`: the whole object), reading at most `chunk` bytes.
    pub(crate) fn of(range: Option<&ByteRange>, chunk: u64) -> First {
        match range {
            None => First {
                start: 0,
                head: chunk,
                tail: 0,
            },
            Some(ByteRange::Bounded(r)) => First {
                start: r.start,
                head: (r.end.saturating_sub(r.start)).min(chunk),
                tail: 0,
            },
            Some(ByteRange::Offset(o)) => First {
                start: *o,
                head: chunk,
                tail: 0,
            },
            Some(ByteRange::Suffix(n)) => First {
                start: 0,
                head: 0,
                tail: (*n).min(chunk),
            },
        }
    }
}

/// object_store's error for a range the object cannot serve (its message).
pub(crate) type RangeError = Box<dyn std::error::Error + Send + Sync>;

/// What a get delivers once the first answer is in: the range of the object it returns, and
/// where in it the bytes already in hand sit (`known`); the rest is read around them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Layout {
    /// The object's size.
    pub(crate) size: u64,
    /// The range returned (absolute), as object_store defines it for the request.
    pub(crate) range: Range<u64>,
    /// The bytes in hand (absolute), inside `range`.
    pub(crate) known: Range<u64>,
}

impl Layout {
    /// The layout of `range` once `first` was answered with `visible` bytes from its window's
    /// start, `head` bytes at the window's start and `tail` bytes at the object's end.
    pub(crate) fn of(
        range: Option<&ByteRange>,
        first: First,
        visible: u64,
        head: u64,
        tail: u64,
    ) -> Result<Layout, RangeError> {
        let size = first.start.saturating_add(visible);
        let range = match range {
            None => 0..size,
            Some(r) => r.as_range(size)?,
        };
        let known = if first.tail > 0 {
            size - tail..size
        } else {
            first.start..first.start + head
        };
        // What the first answer holds beyond the range (never, by construction) is not
        // delivered; an empty `known` sits at the range's start.
        let known = if known.is_empty() {
            range.start..range.start
        } else {
            known.start.max(range.start)..known.end.min(range.end)
        };
        Ok(Layout { size, range, known })
    }

    /// The part of the range before the bytes in hand.
    pub(crate) fn before(&self) -> Range<u64> {
        self.range.start..self.known.start
    }

    /// The part of the range after the bytes in hand.
    pub(crate) fn after(&self) -> Range<u64> {
        self.known.end.max(self.range.start)..self.range.end
    }
}

/// `range` cut into reads of at most `chunk` bytes, in order.
pub(crate) fn chunks(range: Range<u64>, chunk: u64) -> impl Iterator<Item = Range<u64>> {
    let chunk = chunk.max(1);
    let mut at = range.start;
    std::iter::from_fn(move || {
        (at < range.end).then(|| {
            let end = at.saturating_add(chunk).min(range.end);
            let piece = at..end;
            at = end;
            piece
        })
    })
}

/// One piece of a get's stream, in order.
#[derive(Debug)]
pub(crate) enum Piece {
    /// Bytes the first answer already holds.
    Known(Bytes),
    /// A range still to read.
    Read(Range<u64>),
}

/// The pieces of the range in the order of the stream, `held` being the bytes the first
/// answer delivered (the window's head, or the object's tail for a suffix).
pub(crate) fn pieces(layout: &Layout, first: First, held: Vec<u8>, chunk: u64) -> Vec<Piece> {
    let held_start = if first.tail > 0 {
        layout.size - held.len() as u64
    } else {
        first.start
    };
    let from = (layout.known.start - held_start) as usize;
    let to = (layout.known.end - held_start) as usize;
    let known = Bytes::from(held).slice(from..to);
    let mut pieces: Vec<Piece> = chunks(layout.before(), chunk).map(Piece::Read).collect();
    if !known.is_empty() {
        pieces.push(Piece::Known(known));
    }
    pieces.extend(chunks(layout.after(), chunk).map(Piece::Read));
    pieces
}

/// How the chunks of a stream are kept to the first answer's version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Version {
    /// Every read carries this strong ETag as `If-Match`.
    Etag(String),
    /// A local file: its size and modification time, as the first answer stated them, checked
    /// again once every chunk has been read.
    File {
        size: u64,
        modified: Option<SystemTime>,
    },
}

/// The bytes of `pieces` when none is still to be read (the first answer held the whole
/// range), else the pieces back.
pub(crate) fn all_known(pieces: Vec<Piece>) -> Result<Bytes, Vec<Piece>> {
    match pieces.as_slice() {
        [] => Ok(Bytes::new()),
        [Piece::Known(bytes)] => Ok(bytes.clone()),
        _ => Err(pieces),
    }
}

/// The stream of bytes the first answer holds: the whole range of a get.
pub(crate) fn in_hand(bytes: Bytes) -> BoxStream<'static, Result<Bytes, StoreError>> {
    if bytes.is_empty() {
        return stream::empty().boxed();
    }
    stream::once(async move { Ok(bytes) }).boxed()
}

/// The stream of a get's pieces: known bytes as they are, ranges read as single-read batches
/// (so the planner never merges them into one giant transfer), [`CHUNKS_IN_FLIGHT`] at once,
/// kept to `version`, yielded in order.
pub(crate) fn stream(
    client: Client,
    locator: Locator,
    path: String,
    version: Version,
    pieces: Vec<Piece>,
) -> BoxStream<'static, Result<Bytes, StoreError>> {
    let state = Chunks {
        client,
        locator,
        path,
        version,
        pending: pieces.into(),
        in_flight: VecDeque::new(),
        failed: false,
    };
    stream::unfold(state, |mut state| async move {
        let next = state.next().await?;
        Some((next, state))
    })
    .fuse()
    .boxed()
}

/// The state of a chunked stream.
struct Chunks {
    client: Client,
    locator: Locator,
    path: String,
    version: Version,
    /// Pieces not started yet, in order.
    pending: VecDeque<Piece>,
    /// Pieces started, in order: known bytes, or the batch of a read and its range.
    in_flight: VecDeque<Started>,
    /// An error was yielded: the stream ends.
    failed: bool,
}

enum Started {
    Known(Bytes),
    Read(Batch, Range<u64>),
}

impl Chunks {
    async fn next(&mut self) -> Option<Result<Bytes, StoreError>> {
        if self.failed {
            return None;
        }
        self.start_more();
        let mut result = match self.in_flight.pop_front()? {
            Started::Known(bytes) => Ok(bytes),
            Started::Read(mut batch, range) => {
                let completion = batch.next().await;
                self.exact(completion, range)
            }
        };
        // The last piece: every read has completed.
        if result.is_ok()
            && self.pending.is_empty()
            && self.in_flight.is_empty()
            && let Err(error) = self.same_file().await
        {
            result = Err(error);
        }
        if result.is_err() {
            self.failed = true;
            self.in_flight.clear();
            self.pending.clear();
        }
        Some(result)
    }

    /// Start pieces until [`CHUNKS_IN_FLIGHT`] reads are in flight.
    fn start_more(&mut self) {
        while self
            .in_flight
            .iter()
            .filter(|s| matches!(s, Started::Read(..)))
            .count()
            < CHUNKS_IN_FLIGHT
        {
            let Some(piece) = self.pending.pop_front() else {
                break;
            };
            self.in_flight.push_back(match piece {
                Piece::Known(bytes) => Started::Known(bytes),
                Piece::Read(range) => {
                    let mut read = Read::new(&self.locator, range.start, range.end - range.start);
                    if let Version::Etag(etag) = &self.version {
                        read = read.if_match(etag.clone());
                    }
                    Started::Read(self.client.submit([read]), range)
                }
            });
        }
    }

    /// For a local file: whether it still has the size and modification time the first answer
    /// stated, now that every chunk has been read (a file rewritten meanwhile has another).
    async fn same_file(&self) -> Result<(), StoreError> {
        let Version::File { size, modified } = &self.version else {
            return Ok(());
        };
        let now = self
            .client
            .stat_async(&self.locator)
            .await
            .map_err(|e| from_karu(e, &self.path))?;
        if now.size == Some(*size) && now.last_modified == *modified {
            return Ok(());
        }
        Err(from_karu(
            karu::Error::new(
                karu::Status::PreconditionFailed,
                format!(
                    "{} changed while it was read in parts: it had {size} bytes, modified {}; \
                     it now has {}, modified {}",
                    self.locator,
                    describe_time(*modified),
                    now.size
                        .map_or("no size".to_string(), |n| format!("{n} bytes")),
                    describe_time(now.last_modified),
                ),
            ),
            &self.path,
        ))
    }

    /// The bytes of a chunk: all of them, or the error (a chunk past the end means the object
    /// shrank under an unpinned read: an error, never a short chunk).
    fn exact(
        &self,
        completion: Option<Completion>,
        range: Range<u64>,
    ) -> Result<Bytes, StoreError> {
        let Some(completion) = completion else {
            return Err(from_karu(
                karu::Error::new(
                    karu::Status::Internal,
                    "a chunk's read produced no completion",
                ),
                &self.path,
            ));
        };
        let bytes = completion
            .into_result()
            .map_err(|e| from_karu(e, &self.path))?;
        if bytes.len() as u64 != range.end - range.start {
            return Err(from_karu(
                karu::Error::new(
                    karu::Status::Internal,
                    format!(
                        "a read of {} bytes at {} delivered {}",
                        range.end - range.start,
                        range.start,
                        bytes.len()
                    ),
                ),
                &self.path,
            ));
        }
        Ok(Bytes::from(bytes))
    }
}

/// A modification time for messages: seconds and nanoseconds since the Unix epoch.
fn describe_time(time: Option<SystemTime>) -> String {
    match time.map(|t| t.duration_since(SystemTime::UNIX_EPOCH)) {
        Some(Ok(since)) => format!("at {}.{:09} s", since.as_secs(), since.subsec_nanos()),
        Some(Err(_)) => "before 1970".to_string(),
        None => "at no recorded time".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CHUNK: u64 = 100;

    fn layout(range: Option<ByteRange>, size: u64) -> Result<Layout, String> {
        let first = First::of(range.as_ref(), CHUNK);
        let visible = size.saturating_sub(first.start);
        let head = first.head.min(visible);
        let tail = first.tail.min(size);
        Layout::of(range.as_ref(), first, visible, head, tail).map_err(|e| e.to_string())
    }

    #[test]
    fn first_requests_read_at_most_a_chunk_where_the_range_starts_or_ends() {
        let of = |r: Option<ByteRange>| First::of(r.as_ref(), CHUNK);
        assert_eq!(
            of(None),
            First {
                start: 0,
                head: CHUNK,
                tail: 0
            }
        );
        assert_eq!(
            of(Some(ByteRange::Bounded(10..30))),
            First {
                start: 10,
                head: 20,
                tail: 0
            }
        );
        assert_eq!(
            of(Some(ByteRange::Bounded(10..1000))),
            First {
                start: 10,
                head: CHUNK,
                tail: 0
            }
        );
        assert_eq!(
            of(Some(ByteRange::Offset(7))),
            First {
                start: 7,
                head: CHUNK,
                tail: 0
            }
        );
        assert_eq!(
            of(Some(ByteRange::Suffix(5))),
            First {
                start: 0,
                head: 0,
                tail: 5
            }
        );
        assert_eq!(
            of(Some(ByteRange::Suffix(500))),
            First {
                start: 0,
                head: 0,
                tail: CHUNK
            }
        );
    }

    #[test]
    fn layouts_follow_object_stores_range_rules() {
        // A bounded range inside the object: all of it in the first answer.
        let l = layout(Some(ByteRange::Bounded(2..5)), 14).unwrap();
        assert_eq!((l.size, l.range.clone(), l.known.clone()), (14, 2..5, 2..5));
        assert!(l.before().is_empty() && l.after().is_empty());
        // Past the end: clamped to the object.
        let l = layout(Some(ByteRange::Bounded(2..100)), 14).unwrap();
        assert_eq!((l.range.clone(), l.known.clone()), (2..14, 2..14));
        // Starting at or past the end: object_store's error.
        assert!(layout(Some(ByteRange::Bounded(14..20)), 14).is_err());
        assert!(layout(Some(ByteRange::Offset(14)), 14).is_err());
        assert!(layout(Some(ByteRange::Bounded(0..1)), 0).is_err());
        // Suffixes, longer than the object too; the empty object's whole is empty.
        let l = layout(Some(ByteRange::Suffix(2)), 14).unwrap();
        assert_eq!((l.range.clone(), l.known.clone()), (12..14, 12..14));
        let l = layout(Some(ByteRange::Suffix(100)), 14).unwrap();
        assert_eq!((l.range.clone(), l.known.clone()), (0..14, 0..14));
        let l = layout(None, 0).unwrap();
        assert_eq!((l.range.clone(), l.known.clone()), (0..0, 0..0));
        let l = layout(Some(ByteRange::Suffix(0)), 14).unwrap();
        assert_eq!((l.range.clone(), l.known.clone()), (14..14, 14..14));
    }

    #[test]
    fn long_ranges_continue_after_or_before_the_first_answer() {
        let l = layout(None, 250).unwrap();
        assert_eq!(
            (l.known.clone(), l.before(), l.after()),
            (0..100, 0..0, 100..250)
        );
        let l = layout(Some(ByteRange::Offset(30)), 250).unwrap();
        assert_eq!((l.known.clone(), l.after()), (30..130, 130..250));
        let l = layout(Some(ByteRange::Suffix(230)), 250).unwrap();
        assert_eq!(
            (l.known.clone(), l.before(), l.after()),
            (150..250, 20..150, 250..250)
        );
        assert_eq!(
            chunks(l.before(), CHUNK).collect::<Vec<_>>(),
            vec![20..120, 120..150]
        );
    }

    #[test]
    fn pieces_put_the_known_bytes_in_their_place() {
        let object: Vec<u8> = (0..250u32).map(|i| i as u8).collect();
        let check = |range: Option<ByteRange>| {
            let first = First::of(range.as_ref(), CHUNK);
            let l = layout(range.clone(), 250).unwrap();
            let head_end = (first.start + first.head).min(250) as usize;
            let held = if first.tail > 0 {
                object[250 - first.tail.min(250) as usize..].to_vec()
            } else {
                object[first.start as usize..head_end].to_vec()
            };
            let mut delivered = Vec::new();
            for piece in pieces(&l, first, held, CHUNK) {
                match piece {
                    Piece::Known(b) => delivered.extend_from_slice(&b),
                    Piece::Read(r) => {
                        delivered.extend_from_slice(&object[r.start as usize..r.end as usize])
                    }
                }
            }
            assert_eq!(
                delivered,
                &object[l.range.start as usize..l.range.end as usize],
                "{range:?}"
            );
        };
        for range in [
            None,
            Some(ByteRange::Bounded(3..7)),
            Some(ByteRange::Bounded(3..240)),
            Some(ByteRange::Offset(120)),
            Some(ByteRange::Suffix(7)),
            Some(ByteRange::Suffix(230)),
            Some(ByteRange::Suffix(1000)),
        ] {
            check(range);
        }
    }
}
