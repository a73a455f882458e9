//! Where each read of `karu read` lies in its object, and how it is fetched: ranges written
//! against the end (`7:end`, `-500`) are placed with the object's size, and reads longer than
//! a piece are split, pinned to one version of a remote object, with the ETag of one stat of
//! each object that needs it (all stats at once). A local file has no ETag: the pieces of its
//! read are checked against its [`FileVersion`] instead.

use std::collections::HashMap;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

use karu::{Client, Error, Locator, ObjectInfo, Status};

use crate::numbers::Range;
use crate::plan::Fetch;
use crate::requests::{Request, Requests};
use crate::wait;

/// How a read ended, or ends without a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Outcome {
    pub(crate) status: Status,
    pub(crate) message: Option<String>,
}

impl Outcome {
    pub(crate) fn ok() -> Outcome {
        Outcome {
            status: Status::Ok,
            message: None,
        }
    }

    pub(crate) fn failed(status: Status, message: impl Into<String>) -> Outcome {
        Outcome {
            status,
            message: Some(message.into()),
        }
    }
}

/// A read placed in its object: where it starts, how long it is, how it is fetched.
#[derive(Debug, Clone)]
pub(crate) struct Placed {
    /// `None` where the range could not be placed (a suffix of an object whose size is not
    /// known).
    pub(crate) offset: Option<u64>,
    pub(crate) length: u64,
    pub(crate) fetch: Fetch,
    /// The ETag its requests carry: the caller's `--if-match`, or the stat's for a read that
    /// the stat placed or that goes in pieces.
    pub(crate) if_match: Option<String>,
    /// The outcome of a read that needs no request.
    pub(crate) settled: Option<Outcome>,
    /// For a local file read in pieces: the file's version when the read was placed, which
    /// each piece is checked against as it arrives.
    pub(crate) version: Option<FileVersion>,
}

impl Placed {
    /// A read whose outcome is known without a request.
    fn settled(offset: Option<u64>, outcome: Outcome) -> Placed {
        Placed {
            offset,
            length: 0,
            fetch: Fetch::Settled,
            if_match: None,
            settled: Some(outcome),
            version: None,
        }
    }

    /// A read in one piece.
    fn whole(offset: u64, length: u64, if_match: Option<String>) -> Placed {
        Placed {
            offset: Some(offset),
            length,
            fetch: Fetch::Whole { length },
            if_match,
            settled: None,
            version: None,
        }
    }
}

/// Places every read of `requests`, whose addresses resolved to `locators`; `if_match` is the
/// caller's, and reads longer than `piece` bytes are split where they can be pinned.
pub(crate) fn place(
    client: &Client,
    requests: &Requests,
    locators: &[Locator],
    if_match: Option<&str>,
    piece: u64,
) -> Vec<Placed> {
    let infos = probe(client, requests, locators, piece);
    requests
        .reads
        .iter()
        .map(|request| {
            let locator = &locators[request.address];
            let info = infos.get(&request.address);
            place_one(request, locator, info, if_match, piece)
        })
        .collect()
}

/// One stat of each object that a read needs the size (or the version) of, all at once.
fn probe(
    client: &Client,
    requests: &Requests,
    locators: &[Locator],
    piece: u64,
) -> HashMap<usize, Result<ObjectInfo, Error>> {
    let needs = |request: &Request| match request.range {
        Range::Span { length, .. } => length > piece,
        _ => true,
    };
    let mut wanted: Vec<usize> = requests
        .reads
        .iter()
        .filter(|r| needs(r))
        .map(|r| r.address)
        .collect();
    wanted.sort_unstable();
    wanted.dedup();
    let probes: Vec<wait::Boxed<Result<ObjectInfo, Error>>> = wanted
        .iter()
        .map(|&at| Box::pin(client.stat_async(&locators[at])) as wait::Boxed<_>)
        .collect();
    wanted.into_iter().zip(wait::all(probes)).collect()
}

/// Places one read, with what the stat of its object said (`None`: no stat was needed).
fn place_one(
    request: &Request,
    locator: &Locator,
    info: Option<&Result<ObjectInfo, Error>>,
    if_match: Option<&str>,
    piece: u64,
) -> Placed {
    let range = request.range;
    match (range, info) {
        (Range::Span { offset, length }, Some(Ok(info))) => {
            fetched(offset, length, locator, info, if_match, piece, false)
        }
        // Without a stat (or when it failed) a span is read as it is: its own answer says
        // what the stat would have.
        (Range::Span { offset, length }, _) => {
            Placed::whole(offset, length, if_match.map(str::to_owned))
        }
        (_, Some(Ok(info))) => {
            let Some(size) = info.size else {
                let why = format!(
                    "{locator} states no size (it is not a regular file), so {range} cannot be \
                     placed: give OFFSET:LENGTH"
                );
                return Placed::settled(range.offset(), Outcome::failed(Status::Unsupported, why));
            };
            match range.place(size) {
                Some((offset, 0)) => Placed::settled(Some(offset), Outcome::ok()),
                Some((offset, length)) => {
                    fetched(offset, length, locator, info, if_match, piece, true)
                }
                None => {
                    let why = format!("{range} starts past the end of {locator} ({size} bytes)");
                    let outcome = Outcome::failed(Status::RangeNotSatisfiable, why);
                    Placed::settled(range.offset(), outcome)
                }
            }
        }
        (_, Some(Err(error))) => Placed::settled(
            range.offset(),
            Outcome::failed(error.status(), error.message()),
        ),
        (_, None) => Placed::settled(
            range.offset(),
            Outcome::failed(Status::Internal, "the object was not probed"),
        ),
    }
}

/// `length` bytes at `offset` of an object the stat described: in pieces when the read is
/// longer than a piece and its object has no versions (a local file) or one to pin it to; the
/// requests of a read `placed_by_size` carry the version its place was computed from.
fn fetched(
    offset: u64,
    length: u64,
    locator: &Locator,
    info: &ObjectInfo,
    if_match: Option<&str>,
    piece: u64,
    placed_by_size: bool,
) -> Placed {
    let pin = if_match.map(str::to_owned).or_else(|| info.etag.clone());
    // The pieces of a local file are checked against its version, which must be the one the
    // stat saw (a file that cannot be looked at now fails its read as it will).
    let version = locator.file_path().and_then(FileVersion::of);
    if let (Some(version), Some(size), None) = (&version, info.size, locator.window())
        && version.size != size
    {
        return Placed::settled(Some(offset), version.changed(locator));
    }
    let pinned = locator.file_path().is_some() || pin.is_some();
    if length > piece && pinned {
        return Placed {
            offset: Some(offset),
            length,
            fetch: Fetch::Split {
                offset,
                length,
                size: info.size,
            },
            if_match: pin,
            settled: None,
            version,
        };
    }
    let condition = if placed_by_size {
        pin
    } else {
        if_match.map(str::to_owned)
    };
    Placed::whole(offset, length, condition)
}

/// What tells two versions of a local file apart: the file itself (device and inode: a file
/// replaced by a rename is another one), its size, and when its contents and its inode last
/// changed. A file rewritten in place within one tick of the clock that stamps it keeps its
/// times, and is not told apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct FileVersion {
    device: u64,
    inode: u64,
    size: u64,
    modified: (i64, i64),
    changed: (i64, i64),
}

impl FileVersion {
    /// The version of the regular file at `path` now; `None` for anything else (a device or
    /// a FIFO has no versions) or a path that cannot be looked at.
    pub(crate) fn of(path: &Path) -> Option<FileVersion> {
        let metadata = std::fs::metadata(path).ok().filter(|m| m.is_file())?;
        Some(FileVersion {
            device: metadata.dev(),
            inode: metadata.ino(),
            size: metadata.size(),
            modified: (metadata.mtime(), metadata.mtime_nsec()),
            changed: (metadata.ctime(), metadata.ctime_nsec()),
        })
    }

    /// The outcome of a read of `locator`'s file, which is no longer at this version.
    pub(crate) fn changed(&self, locator: &Locator) -> Outcome {
        Outcome::failed(
            Status::PreconditionFailed,
            format!(
                "{locator} changed while it was read (it is another file, or its size or \
                 modification time changed): its pieces would not be of one version"
            ),
        )
    }
}
