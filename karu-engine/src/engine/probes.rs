//! What an engine learns about an object besides reads: its size and strong ETag
//! ([`Engine::stat`]) and both of its ends in one round trip ([`Engine::read_ends`]).

use std::future::Future;
use std::pin::Pin;
use std::time::SystemTime;

use futures_core::Stream;

use crate::batch::Batch;
use crate::batch::read::{Completion, Read};
use crate::file::{self};
use crate::http::RemoteStat;
use crate::http::ends::RemoteEnds;
use crate::reply::{self, Reply};
use crate::sdk::{Error, Locator, Status, Target, Window};

use super::{BatchOptions, Engine};

/// What [`Engine::stat`] learns about an object.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ObjectInfo {
    /// Visible size in bytes, or `None` when the object states none: a local device or FIFO,
    /// whose metadata says nothing of what can be read (a bounded window of one shows its
    /// length). Remote objects and regular files always have one. For a windowed locator it
    /// is the window clipped to what exists: a window reaching past the end shows only the
    /// bytes that exist, and the object is probed like any other (a missing one fails).
    pub size: Option<u64>,
    /// The object's strong ETag, when the server sent one (never for local files).
    pub etag: Option<String>,
    /// When the object was last modified: a remote answer's `Last-Modified` header, or a
    /// local file's modification time; `None` when the answer has no (valid) header or the
    /// platform keeps no time.
    pub last_modified: Option<SystemTime>,
}

/// Both ends of an object, from [`Engine::read_ends`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Ends {
    /// Visible size in bytes.
    pub size: u64,
    /// The strong ETag both answers agreed on, if any.
    pub etag: Option<String>,
    /// When the object was last modified, as [`ObjectInfo::last_modified`] says.
    pub last_modified: Option<SystemTime>,
    /// The first `min(head_len, size)` bytes.
    pub head: Vec<u8>,
    /// The last `min(tail_len, size)` bytes.
    pub tail: Vec<u8>,
}

impl Engine {
    /// The visible size of an object, and its strong ETag when it has one. Sizes are never
    /// cached. Blocks the calling thread; see [`Engine::stat_async`].
    pub fn stat(&self, locator: &Locator) -> Result<ObjectInfo, Error> {
        match locator.target() {
            // A local file's metadata is read right here: a blocking caller needs no hop.
            Target::File(path) => Ok(local_info(locator.window(), file::metadata(path)?)),
            _ => reply::block_on(self.stat_reply(locator)),
        }
    }

    /// [`Engine::stat`] as a future that completes from Karu's own threads (a file worker
    /// reads a local file's metadata; an event loop sends the remote probe): any executor can
    /// poll it, and it never blocks the thread that does. It starts when first polled;
    /// dropping it cancels the probe.
    pub fn stat_async(
        &self,
        locator: &Locator,
    ) -> impl Future<Output = Result<ObjectInfo, Error>> + Send + 'static + use<> {
        let engine = self.clone();
        let locator = locator.clone();
        async move { engine.stat_reply(&locator).await }
    }

    /// Start the stat of `locator` on Karu's threads (now, not when first polled).
    fn stat_reply(
        &self,
        locator: &Locator,
    ) -> impl Future<Output = Result<ObjectInfo, Error>> + Send + 'static + use<> {
        /// Where the size comes from: the object itself, even under a bounded window (which
        /// states only the most that can be visible, not that the object exists).
        enum Probe {
            /// A file worker reads the metadata (no size for a device or FIFO).
            Local(Reply<file::Metadata>),
            /// An event loop sends the one-byte probe.
            Remote(Reply<RemoteStat>),
        }
        let window = locator.window();
        let probe = match locator.target() {
            Target::File(path) => {
                let path = path.clone();
                Probe::Local(self.running().files.run(move || file::metadata(&path)))
            }
            Target::Remote => Probe::Remote(match self.running().remote() {
                Ok(remote) => remote.stat(locator),
                Err(e) => Reply::ready(Err(e)),
            }),
        };
        async move {
            Ok(match probe {
                Probe::Local(reply) => local_info(window, reply.await?),
                Probe::Remote(reply) => {
                    let stat = reply.await?;
                    ObjectInfo {
                        size: Some(visible_size(window, stat.size)),
                        etag: stat.etag,
                        last_modified: stat.last_modified,
                    }
                }
            })
        }
    }

    /// The first `head_len` and last `tail_len` bytes of an object (each clamped to its size),
    /// with its size and ETag. Blocks the calling thread; see [`Engine::read_ends_async`].
    pub fn read_ends(
        &self,
        locator: &Locator,
        head_len: u64,
        tail_len: u64,
    ) -> Result<Ends, Error> {
        if let Target::Remote = locator.target() {
            let remote = self.running().remote()?;
            return remote
                .read_ends(locator, head_len, tail_len, None)
                .wait()
                .map(Ends::from);
        }
        let info = self.stat(locator)?;
        let size = known_size(locator, &info)?;
        let batch = self.ends_batch(locator, size, head_len, tail_len);
        ends_of(size, info, batch.wait())
    }

    /// [`Engine::read_ends`] as a future that completes from Karu's own threads; any executor
    /// can poll it, and it never blocks the thread that does. It starts when first polled;
    /// dropping it cancels its requests (or its batch).
    pub fn read_ends_async(
        &self,
        locator: &Locator,
        head_len: u64,
        tail_len: u64,
    ) -> impl Future<Output = Result<Ends, Error>> + Send + 'static + use<> {
        self.read_ends_if_match_async(locator, head_len, tail_len, None)
    }

    /// [`Engine::read_ends_async`] under a caller's `If-Match` condition (one strong ETag, a
    /// list of them, or `*`, as [`Read::if_match`] takes): every request carries it and every
    /// answer is checked against it, so an object that does not match fails with
    /// [`Status::PreconditionFailed`] on the first answer. Remote objects only: a local file
    /// has no versions, and the condition is then [`Status::InvalidArgument`].
    pub fn read_ends_if_match_async(
        &self,
        locator: &Locator,
        head_len: u64,
        tail_len: u64,
        if_match: Option<&str>,
    ) -> impl Future<Output = Result<Ends, Error>> + Send + 'static + use<> {
        let engine = self.clone();
        let locator = locator.clone();
        let if_match = if_match.map(str::to_owned);
        async move {
            if let Target::Remote = locator.target() {
                let remote = engine.running().remote()?;
                return remote
                    .read_ends(&locator, head_len, tail_len, if_match)
                    .await
                    .map(Ends::from);
            }
            if if_match.is_some() {
                return Err(Error::new(
                    Status::InvalidArgument,
                    format!(
                        "an if-match condition applies only to remote objects, not to {}",
                        locator.canonical()
                    ),
                ));
            }
            let info = engine.stat_reply(&locator).await?;
            let size = known_size(&locator, &info)?;
            let mut batch = engine.ends_batch(&locator, size, head_len, tail_len);
            let mut completions = Vec::with_capacity(2);
            while let Some(c) = std::future::poll_fn(|cx| Pin::new(&mut batch).poll_next(cx)).await
            {
                completions.push(c);
            }
            ends_of(size, info, completions)
        }
    }

    /// The batch reading both ends of a local object of known size: the head tagged 0, the
    /// tail tagged 1, never merged.
    fn ends_batch(&self, locator: &Locator, size: u64, head: u64, tail: u64) -> Batch {
        let head = head.min(size);
        let tail = tail.min(size);
        let mut reads = Vec::new();
        if head > 0 {
            reads.push(Read::new(locator, 0, head).tag(0));
        }
        if tail > 0 {
            reads.push(Read::new(locator, size - tail, tail).tag(1));
        }
        self.submit(reads, &BatchOptions::new().max_gap(0))
    }
}

/// What a window shows of an object of `object_size` bytes: the bytes from its start to the
/// object's end, at most its length.
fn visible_size(window: Option<Window>, object_size: u64) -> u64 {
    match window {
        None => object_size,
        Some(Window { start, len }) => {
            let exists = object_size.saturating_sub(start);
            len.map_or(exists, |len| len.min(exists))
        }
    }
}

/// What a stat of a local file under `window` reports, from its metadata.
fn local_info(window: Option<Window>, meta: file::Metadata) -> ObjectInfo {
    ObjectInfo {
        size: local_visible_size(window, meta.size),
        etag: None,
        last_modified: meta.modified,
    }
}

/// What a window shows of a local file of `size` bytes, or of a device or FIFO (`None`), whose
/// metadata states no size: only a bounded window then says how much is visible.
fn local_visible_size(window: Option<Window>, size: Option<u64>) -> Option<u64> {
    match size {
        Some(size) => Some(visible_size(window, size)),
        None => window.and_then(|w| w.len),
    }
}

/// Both ends of a local object from the completions of its [`Engine::ends_batch`].
/// The size `read_ends` needs: a device or FIFO has none, so it has no last bytes.
fn known_size(locator: &Locator, info: &ObjectInfo) -> Result<u64, Error> {
    info.size.ok_or_else(|| {
        Error::new(
            Status::Unsupported,
            format!("{locator} has no size (it is not a regular file), so it has no last bytes"),
        )
    })
}

fn ends_of(size: u64, info: ObjectInfo, completions: Vec<Completion>) -> Result<Ends, Error> {
    let mut ends = Ends {
        size,
        etag: info.etag,
        last_modified: info.last_modified,
        head: Vec::new(),
        tail: Vec::new(),
    };
    for completion in completions {
        let tag = completion.tag();
        let bytes = completion.into_result()?;
        if tag == 0 {
            ends.head = bytes;
        } else {
            ends.tail = bytes;
        }
    }
    Ok(ends)
}

impl From<RemoteEnds> for Ends {
    fn from(ends: RemoteEnds) -> Self {
        Ends {
            size: ends.size,
            etag: ends.etag,
            last_modified: ends.last_modified,
            head: ends.head,
            tail: ends.tail,
        }
    }
}
