//! File workers: positional reads (`pread`, no shared cursor) straight into destinations.

mod reads;

use std::fs::File;
use std::io;
use std::os::unix::fs::FileTypeExt;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::Path;
use std::sync::Arc;
use std::thread;
use std::time::SystemTime;

use crossbeam_channel::{Receiver, SendError, Sender};

use self::reads::Dest;
#[cfg(test)]
use self::reads::{UNSIZED_FIRST, read_at_most, read_owned};
use crate::batch::Active;
use crate::batch::read::Completion;
use crate::reply::{self, Reply};
use crate::sdk::{Error, Evidence, Status};
use crate::transfer::Transfer;
use crate::workers::Workers;

/// Most transfers in one chunk of [`FilePool::chunks`].
const CHUNK_READS: usize = 512;
/// A chunk closes once its transfers span this many bytes, so large reads spread over the
/// workers.
const CHUNK_BYTES: u64 = 4 << 20;
/// Chunks per worker a submission aims for (smaller chunks, for a small submission, keep
/// every worker busy).
const CHUNKS_PER_WORKER: usize = 4;

/// Local transfers on their way to the workers, a chunk at a time (from
/// [`FilePool::chunks`]).
pub(crate) struct Chunks<'p> {
    pool: &'p FilePool,
    /// Most transfers in a chunk.
    reads: usize,
    chunk: Vec<Transfer>,
    /// Bytes the chunk's transfers span.
    bytes: u64,
}

impl Chunks<'_> {
    /// Add a transfer; hand the chunk off first if the transfer does not join it.
    pub(crate) fn push(&mut self, transfer: Transfer) {
        let joins = self.chunk.last().is_some_and(|last| {
            self.chunk.len() < self.reads
                && self.bytes < CHUNK_BYTES
                && Arc::ptr_eq(&last.batch, &transfer.batch)
        });
        if !joins && !self.chunk.is_empty() {
            let next = Vec::with_capacity(self.reads);
            self.pool.send(std::mem::replace(&mut self.chunk, next));
            self.bytes = 0;
        }
        if self.chunk.capacity() == 0 {
            self.chunk.reserve_exact(self.reads);
        }
        self.bytes = self.bytes.saturating_add(transfer.length);
        self.chunk.push(transfer);
    }
}

impl Drop for Chunks<'_> {
    /// Hand off the last chunk: no transfer pushed is ever left unsent.
    fn drop(&mut self) {
        if !self.chunk.is_empty() {
            self.pool.send(std::mem::take(&mut self.chunk));
        }
    }
}

/// A pool of threads running local transfers (and small filesystem tasks, such as the stat
/// of an async caller, that must not run on the caller's thread).
///
/// The workers start with the first local read or task (see [`Workers`]).
pub(crate) struct FilePool {
    sender: Option<Sender<Job>>,
    workers: Workers<Job>,
}

/// What a file worker runs.
enum Job {
    /// Transfers of one batch, run in order by one worker.
    Transfers(Vec<Transfer>),
    Task(Box<dyn FnOnce() + Send>),
}

impl FilePool {
    /// A pool of `workers` threads, started by its first job.
    pub(crate) fn new(workers: usize) -> Self {
        let (sender, receiver) = crossbeam_channel::unbounded::<Job>();
        FilePool {
            sender: Some(sender),
            workers: Workers::new("karu-file", workers, receiver, worker),
        }
    }

    /// The queue of running workers: none when the pool has stopped, or when no worker could
    /// start (the error says why).
    fn queue(&self) -> Result<&Sender<Job>, Error> {
        let sender = self
            .sender
            .as_ref()
            .ok_or_else(|| Error::internal("the file workers have stopped"))?;
        self.workers.start()?;
        Ok(sender)
    }

    /// The hand-off of a batch's local transfers (about `expected` of them, pushed in the
    /// planner's order: by file, then offset) to the workers in chunks, so that a worker takes
    /// many small reads of a file at once (one queue hand-off, one open, one completion
    /// hand-off for the chunk) while every worker still gets a share, and a large read is a
    /// chunk of its own. A chunk goes as soon as it is full, so the workers start on the first
    /// while the caller still builds the rest; dropping the hand-off sends the last one.
    pub(crate) fn chunks(&self, expected: usize) -> Chunks<'_> {
        Chunks {
            pool: self,
            reads: (expected / (self.workers.count() * CHUNKS_PER_WORKER)).clamp(1, CHUNK_READS),
            chunk: Vec::new(),
            bytes: 0,
        }
    }

    fn send(&self, chunk: Vec<Transfer>) {
        let (chunk, error) = match self.queue() {
            Ok(sender) => match sender.send(Job::Transfers(chunk)) {
                Err(SendError(Job::Transfers(chunk))) => {
                    (chunk, Error::internal("the file workers have stopped"))
                }
                _ => return,
            },
            Err(e) => (chunk, e),
        };
        chunk.into_iter().for_each(|t| t.fail(&error));
    }

    /// Run `f` on a worker; its result arrives in the returned [`Reply`]. A task whose reply
    /// was dropped before a worker took it does not run.
    pub(crate) fn run<T, F>(&self, f: F) -> Reply<T>
    where
        T: Send + 'static,
        F: FnOnce() -> Result<T, Error> + Send + 'static,
    {
        let (tx, reply) = reply::channel();
        let task = Box::new(move || {
            if tx.is_closed() {
                return;
            }
            let result = catch_unwind(AssertUnwindSafe(f))
                .unwrap_or_else(|_| Err(Error::internal("a file worker panicked")));
            tx.send(result);
        });
        match self.queue() {
            Ok(sender) if sender.send(Job::Task(task)).is_ok() => reply,
            Ok(_) => Reply::ready(Err(Error::internal("the file workers have stopped"))),
            Err(e) => Reply::ready(Err(e)),
        }
    }
}

impl Drop for FilePool {
    fn drop(&mut self) {
        // Closing the channel lets each worker finish the queue and exit.
        self.sender = None;
        let threads = self.workers.take();
        let me = thread::current().id();
        if threads.iter().any(|t| t.thread().id() == me) {
            return; // never join ourselves
        }
        for t in threads {
            let _ = t.join();
        }
    }
}

fn worker(receiver: &Receiver<Job>) {
    while let Ok(job) = receiver.recv() {
        match job {
            Job::Transfers(transfers) => run(transfers),
            Job::Task(task) => task(),
        }
    }
}

/// Run a chunk of local transfers of one batch (see [`FilePool::chunks`]): each file is
/// opened once for the transfers reading it in a row, adjacent reads share vectored reads,
/// and the chunk's completions are queued together. A batch cancelled meanwhile cancels the
/// transfers not read yet.
fn run(mut transfers: Vec<Transfer>) {
    let Some(batch) = transfers.first().map(|t| Arc::clone(&t.batch)) else {
        return;
    };
    let Some(active) = batch.begin() else {
        transfers.into_iter().for_each(Transfer::cancel);
        return;
    };
    let mut completions = Vec::with_capacity(transfers.len());
    let mut i = 0;
    while i < transfers.len() && !batch.is_cancelled() {
        let path = transfers[i].locator.file_path().map(Path::to_path_buf);
        let end = transfers[i + 1..]
            .iter()
            .position(|t| t.locator.file_path() != path.as_deref())
            .map_or(transfers.len(), |n| i + 1 + n);
        let group = &mut transfers[i..end];
        let outcome = catch_unwind(AssertUnwindSafe(|| match &path {
            Some(path) => read_group(path, group, &active),
            None => {
                let err = Error::internal("a remote object reached the file workers");
                let parts = group.iter().map(|t| t.parts.len()).sum();
                vec![(Err(err), 0); parts]
            }
        }));
        let mut results = outcome.unwrap_or_default().into_iter();
        for transfer in group {
            for part in std::mem::take(&mut transfer.parts) {
                let (result, received) = results.next().unwrap_or_else(|| {
                    (
                        Err(Error::internal("a file worker panicked while reading")),
                        0,
                    )
                });
                completions.push(part.into_completion(result, received));
            }
        }
        i = end;
    }
    batch.add_received(completions.iter().map(Completion::bytes_received).sum());
    active.complete(completions);
    // Not read before the batch was cancelled: they complete as cancelled.
    for transfer in transfers.into_iter().filter(|t| !t.parts.is_empty()) {
        transfer.cancel();
    }
}

/// Read every part of `group` (transfers of the file at `path`, in order) into its
/// destination: each part's status and the bytes it received, in order.
fn read_group(
    path: &Path,
    group: &mut [Transfer],
    active: &Active<'_>,
) -> Vec<(Result<(), Error>, u64)> {
    let parts: usize = group.iter().map(|t| t.parts.len()).sum();
    let (file, size) = match open(path) {
        Ok(opened) => opened,
        Err(e) => return vec![(Err(e), 0); parts],
    };
    // Destinations that cannot be opened (a caller's slice too small) fail alone.
    let mut opened: Vec<Result<Dest<'_>, Error>> = Vec::with_capacity(parts);
    for transfer in group.iter_mut() {
        let start = transfer.start;
        for part in &mut transfer.parts {
            let offset = start + part.offset_in_span;
            let length = part.length;
            opened.push(part.sink.open(active, length).map(|dst| Dest {
                offset,
                length,
                dst,
            }));
        }
    }
    let mut dests: Vec<Dest<'_>> = Vec::with_capacity(parts);
    let mut which: Vec<Result<usize, Error>> = Vec::with_capacity(parts);
    for o in opened {
        which.push(o.map(|d| {
            dests.push(d);
            dests.len() - 1
        }));
    }
    let filled = reads::read_all(&file, size, &mut dests);
    let mut out = Vec::with_capacity(parts);
    for w in which {
        let (d, result) = match w {
            Ok(k) => (&dests[k], &filled[k]),
            Err(e) => {
                out.push((Err(e), 0));
                continue;
            }
        };
        let (offset, length) = (d.offset, d.length);
        out.push(match result {
            Ok(n) if *n == length => (Ok(()), *n),
            Ok(n) => (Err(past_the_end(path, &file, offset, length, *n)), *n),
            Err(e) if e.kind() == io::ErrorKind::OutOfMemory => (
                Err(Error::new(
                    Status::InvalidArgument,
                    format!(
                        "cannot allocate a destination for {length} bytes of {}",
                        path.display()
                    ),
                )),
                0,
            ),
            Err(e) => (Err(classify(path, e)), 0),
        });
    }
    out
}

/// The range error of a read that met the end of the file after `filled` bytes, saying where
/// the file really ends: where the read met its end, or (nothing read) the size it has now.
fn past_the_end(path: &Path, file: &File, offset: u64, length: u64, filled: u64) -> Error {
    let size = if filled > 0 {
        Some(offset + filled)
    } else {
        file.metadata()
            .ok()
            .filter(std::fs::Metadata::is_file)
            .map(|m| m.len())
            .filter(|&size| size <= offset)
    };
    let end = match size {
        Some(size) => format!("{} is {size} bytes long", path.display()),
        None => format!("{} has no bytes at {offset}", path.display()),
    };
    Error::new(
        Status::RangeNotSatisfiable,
        format!("{end}: {filled} of the {length} bytes requested at offset {offset} exist"),
    )
    .with_evidence(Evidence::EndOfObject {
        offset,
        requested: length,
        received: filled,
        size,
    })
}

/// Open a file for positional reads, classifying failures; with its size when opened (`None`
/// for a device, whose metadata says nothing of what can be read).
///
/// The open does not wait on what the path names: it is non-blocking, so a FIFO with no
/// writer (which a blocking open waits on forever, past every deadline) is opened and refused
/// at once, as is anything else that cannot be read at an offset (a terminal, a pipe), with
/// [`Status::Unsupported`]. A regular file then reads as it always does (the flag is
/// cleared); a seekable device (`/dev/zero`) keeps it, so a read with nothing to give fails
/// instead of waiting.
pub(crate) fn open(path: &Path) -> Result<(File, Option<u64>), Error> {
    use rustix::fs::{Mode, OFlags};
    let flags = OFlags::RDONLY | OFlags::NONBLOCK | OFlags::CLOEXEC;
    let file = match rustix::fs::open(path, flags, Mode::empty()) {
        Ok(fd) => File::from(fd),
        Err(e) if e == rustix::io::Errno::WOULDBLOCK => {
            open_leased(path).map_err(|e| classify(path, &e))?
        }
        Err(e) => return Err(classify(path, &io::Error::from(e))),
    };
    let meta = file.metadata().map_err(|e| classify(path, &e))?;
    let kind = meta.file_type();
    if kind.is_dir() {
        return Err(Error::new(
            Status::IsDirectory,
            format!("{} is a directory, not a file", path.display()),
        ));
    }
    if kind.is_file() {
        let flags = rustix::fs::fcntl_getfl(&file).map_err(|e| classify(path, &e.into()))?;
        rustix::fs::fcntl_setfl(&file, flags - OFlags::NONBLOCK)
            .map_err(|e| classify(path, &e.into()))?;
        return Ok((file, Some(meta.len())));
    }
    if kind.is_fifo() || rustix::fs::seek(&file, rustix::fs::SeekFrom::Current(0)).is_err() {
        return Err(not_addressable(path, &kind));
    }
    Ok((file, None))
}

/// A non-blocking open fails with `EWOULDBLOCK` when another process holds a write lease on a
/// regular file (a file server's oplock). The holder has been asked to let go, and the
/// operating system's own open would wait for it (at most `fs.lease-break-time`): wait the
/// same way, for that same file. The path is opened without access (`O_PATH` never waits and
/// breaks no lease), checked to be a regular file, and that very file is opened for reading
/// through `/proc/self/fd`, so a path swapped for a FIFO in between cannot block.
#[cfg(target_os = "linux")]
fn open_leased(path: &Path) -> io::Result<File> {
    use std::os::fd::AsRawFd;

    use rustix::fs::{FileType, Mode, OFlags};
    let leased = || io::Error::from(rustix::io::Errno::WOULDBLOCK);
    let handle = rustix::fs::open(path, OFlags::PATH | OFlags::CLOEXEC, Mode::empty())?;
    let stat = rustix::fs::fstat(&handle)?;
    if FileType::from_raw_mode(stat.st_mode) != FileType::RegularFile {
        return Err(leased());
    }
    File::open(format!("/proc/self/fd/{}", handle.as_raw_fd())).map_err(|e| {
        if e.kind() == io::ErrorKind::NotFound {
            leased() // no /proc: report the lease, not a missing file
        } else {
            e
        }
    })
}

/// Leases are Linux's: elsewhere the error stands.
#[cfg(not(target_os = "linux"))]
fn open_leased(_path: &Path) -> io::Result<File> {
    Err(io::Error::from(rustix::io::Errno::WOULDBLOCK))
}

/// The error for a file that cannot be read at an offset.
fn not_addressable(path: &Path, kind: &std::fs::FileType) -> Error {
    let what = if kind.is_fifo() {
        "a FIFO (named pipe)"
    } else if kind.is_socket() {
        "a socket"
    } else if kind.is_char_device() {
        "a character device that cannot seek"
    } else {
        "a file that cannot seek"
    };
    Error::new(
        Status::Unsupported,
        format!(
            "{} is {what}: Karu reads files at offsets, and this one has none",
            path.display()
        ),
    )
}

/// What a local file's metadata states, read without opening it (so a FIFO cannot block).
pub(crate) struct Metadata {
    /// The size; `None` for what is not a regular file (a device, a FIFO), whose metadata
    /// says nothing of what can be read.
    pub(crate) size: Option<u64>,
    /// The modification time, where the platform keeps one.
    pub(crate) modified: Option<SystemTime>,
}

/// The metadata of the local file at `path` (a directory is an error).
pub(crate) fn metadata(path: &Path) -> Result<Metadata, Error> {
    let meta = std::fs::metadata(path).map_err(|e| classify(path, &e))?;
    if meta.is_dir() {
        return Err(Error::new(
            Status::IsDirectory,
            format!("{} is a directory, not a file", path.display()),
        ));
    }
    Ok(Metadata {
        size: meta.is_file().then_some(meta.len()),
        modified: meta.modified().ok(),
    })
}

/// Map an I/O error on `path` to a status with a clear message.
pub(crate) fn classify(path: &Path, e: &io::Error) -> Error {
    let p = path.display();
    // The cause, for `source()`: the same OS error (or kind and text) as `e`.
    let source = e.raw_os_error().map_or_else(
        || io::Error::new(e.kind(), e.to_string()),
        io::Error::from_raw_os_error,
    );
    let error = match e.kind() {
        io::ErrorKind::NotFound => Error::new(Status::NotFound, format!("no such file: {p}")),
        io::ErrorKind::NotADirectory => Error::new(
            Status::NotFound,
            format!("no such file: {p} (a parent component is not a directory)"),
        ),
        io::ErrorKind::PermissionDenied => Error::new(
            Status::PermissionDenied,
            format!("permission denied reading {p}"),
        ),
        io::ErrorKind::IsADirectory => Error::new(
            Status::IsDirectory,
            format!("{p} is a directory, not a file"),
        ),
        _ => Error::new(Status::Io, format!("cannot read {p}: {e}")),
    };
    error.with_source(source)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_workers_start_with_the_first_job() {
        let pool = FilePool::new(2);
        assert_eq!(pool.workers.running(), 0, "no worker before a job");
        let name = pool
            .run(|| Ok(thread::current().name().map(str::to_string)))
            .wait();
        assert_eq!(pool.workers.running(), 2);
        assert!(name.unwrap().unwrap().starts_with("karu-file-"));
    }

    #[test]
    fn classification_is_distinct() {
        let p = Path::new("/x/y");
        let kinds = [
            (io::ErrorKind::NotFound, Status::NotFound),
            (io::ErrorKind::NotADirectory, Status::NotFound),
            (io::ErrorKind::PermissionDenied, Status::PermissionDenied),
            (io::ErrorKind::IsADirectory, Status::IsDirectory),
            (io::ErrorKind::Other, Status::Io),
        ];
        for (kind, status) in kinds {
            let err = classify(p, &io::Error::from(kind));
            assert_eq!(err.status(), status, "{kind:?}");
            assert!(err.message().contains("/x/y"), "{err}");
        }
    }

    #[test]
    fn short_file_gives_a_valid_prefix() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        std::fs::write(&path, b"0123456789").unwrap();
        let (file, _) = open(&path).unwrap();
        let mut dst = [0u8; 8];
        assert_eq!(read_at_most(&file, 6, &mut dst).unwrap(), 4);
        assert_eq!(&dst[..4], b"6789");
        assert_eq!(read_at_most(&file, u64::MAX - 8, &mut dst).unwrap(), 0);
        assert_eq!(
            read_at_most(&file, i64::MAX as u64 - 3, &mut dst).unwrap(),
            0
        );
        assert_eq!(read_at_most(&file, 2, &mut dst).unwrap(), 8);
        assert_eq!(&dst, b"23456789");
    }

    #[test]
    fn owned_buffers_hold_only_what_exists() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        std::fs::write(&path, b"0123456789").unwrap();
        let (file, _) = open(&path).unwrap();
        let mut buffer = Vec::new();
        assert_eq!(
            read_owned(&file, 2, 1 << 62, Some(10), &mut buffer).unwrap(),
            8
        );
        assert_eq!(
            (buffer.as_slice(), buffer.capacity()),
            (&b"23456789"[..], 8)
        );
        // A file that grew after its size was read (a stale size of 10 bytes) is followed up
        // to the length asked for.
        let grown = dir.path().join("g");
        let content: Vec<u8> = (0..200_000u32).map(|i| (i % 251) as u8).collect();
        std::fs::write(&grown, &content).unwrap();
        let (file, _) = open(&grown).unwrap();
        let mut buffer = Vec::with_capacity(4);
        assert_eq!(
            read_owned(&file, 5, 150_000, Some(10), &mut buffer).unwrap(),
            150_000
        );
        assert_eq!(buffer.as_slice(), &content[5..150_005]);
        // And it stops at the real end when the file is shorter than asked.
        let mut buffer = Vec::new();
        assert_eq!(
            read_owned(&file, 190_000, 50_000, Some(10), &mut buffer).unwrap(),
            10_000
        );
        // Without a size (as for a device), the buffer doubles while reads fill it: a length
        // of 2^62 bytes is never allocated for 2.5 MiB of data.
        let big = dir.path().join("big");
        let content: Vec<u8> = (0..5 << 19).map(|i: u32| (i % 241) as u8).collect();
        std::fs::write(&big, &content).unwrap();
        let (file, _) = open(&big).unwrap();
        let mut buffer = Vec::new();
        assert_eq!(
            read_owned(&file, 7, 1 << 62, None, &mut buffer).unwrap(),
            content.len() as u64 - 7
        );
        assert_eq!(buffer.as_slice(), &content[7..]);
        assert_eq!(
            buffer.capacity(),
            4 * UNSIZED_FIRST as usize,
            "1, 2, then 4 MiB"
        );
    }

    #[test]
    fn a_read_past_the_end_names_the_real_size() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        std::fs::write(&path, b"0123456789abcd").unwrap();
        let (file, _) = open(&path).unwrap();
        // Today's "ends at byte 15" for a 14-byte file read at 15.
        for (offset, filled) in [(15, 0), (100, 0), (14, 0), (10, 4)] {
            let e = past_the_end(&path, &file, offset, 5, filled);
            assert_eq!(e.status(), Status::RangeNotSatisfiable);
            assert_eq!(
                e.message(),
                format!(
                    "{} is 14 bytes long: {filled} of the 5 bytes requested at offset {offset} \
                     exist",
                    path.display()
                )
            );
        }
    }

    #[test]
    fn directories_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(open(dir.path()).unwrap_err().status(), Status::IsDirectory);
        assert_eq!(
            metadata(dir.path()).map(|m| m.size).unwrap_err().status(),
            Status::IsDirectory
        );
    }

    /// Opens the FIFO for writing if `open` has not returned within 20 s (only when the code
    /// is broken), so that a failing test fails instead of hanging; says whether it had to.
    struct Unblock {
        done: std::sync::mpsc::Sender<()>,
        thread: thread::JoinHandle<bool>,
    }

    impl Unblock {
        fn new(fifo: &Path) -> Self {
            let (done, finished) = std::sync::mpsc::channel::<()>();
            let fifo = fifo.to_path_buf();
            let thread = thread::spawn(move || {
                let timed_out = finished
                    .recv_timeout(std::time::Duration::from_secs(20))
                    .is_err();
                if timed_out {
                    let _ = std::fs::OpenOptions::new().write(true).open(&fifo);
                }
                timed_out
            });
            Unblock { done, thread }
        }

        fn had_to_unblock(self) -> bool {
            let _ = self.done.send(());
            self.thread.join().unwrap()
        }
    }

    fn mkfifo(path: &Path) {
        let made = std::process::Command::new("mkfifo")
            .arg(path)
            .status()
            .unwrap();
        assert!(made.success(), "mkfifo {}", path.display());
    }

    #[test]
    fn a_fifo_without_a_writer_is_refused_at_once() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("pipe");
        mkfifo(&fifo);
        let unblock = Unblock::new(&fifo);
        let opened = open(&fifo);
        assert!(!unblock.had_to_unblock(), "open waited for a writer");
        let err = opened.unwrap_err();
        assert_eq!(err.status(), Status::Unsupported, "{err}");
        assert!(err.message().contains("FIFO"), "{err}");
        assert!(err.message().contains(fifo.to_str().unwrap()), "{err}");
        assert_eq!(metadata(&fifo).unwrap().size, None, "a FIFO states no size");
    }

    #[test]
    fn seekable_devices_read_and_state_no_size() {
        for device in ["/dev/zero", "/dev/null"] {
            let path = Path::new(device);
            assert_eq!(metadata(path).unwrap().size, None, "{device}");
            let (file, size) = open(path).unwrap();
            assert_eq!(size, None, "{device}");
            let mut dst = [0xAAu8; 16];
            let filled = read_at_most(&file, 1 << 40, &mut dst).unwrap();
            if device == "/dev/zero" {
                assert_eq!((filled, dst), (16, [0; 16]));
            } else {
                assert_eq!(filled, 0);
            }
        }
    }

    #[test]
    fn a_device_that_cannot_seek_is_refused() {
        // Opening the pseudo-terminal multiplexer makes a terminal, which has no offsets.
        let ptmx = Path::new("/dev/ptmx");
        if std::fs::metadata(ptmx).is_err() {
            eprintln!("skipped: no /dev/ptmx");
            return;
        }
        let err = open(ptmx).unwrap_err();
        assert_eq!(err.status(), Status::Unsupported, "{err}");
        assert!(err.message().contains("cannot seek"), "{err}");
    }

    #[test]
    fn a_regular_file_is_read_blocking() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        std::fs::write(&path, b"0123456789").unwrap();
        let (file, size) = open(&path).unwrap();
        assert_eq!(size, Some(10));
        let flags = rustix::fs::fcntl_getfl(&file).unwrap();
        assert!(!flags.contains(rustix::fs::OFlags::NONBLOCK), "{flags:?}");
        assert_eq!(self::metadata(&path).unwrap().size, Some(10));
    }
}
