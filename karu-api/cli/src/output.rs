//! Standard output that reports write errors instead of panicking: a closed pipe stops the
//! command quietly, any other failure (a full disk, a standard output that is not open at all,
//! as with `>&-`) is an error with exit status 3.

use std::fs::File;
use std::io::{self, BufWriter, StdoutLock, Write};
use std::os::fd::{AsFd, BorrowedFd};

use crate::outcome::Stop;

/// Buffered standard output.
pub(crate) struct Stdout {
    inner: BufWriter<StdoutLock<'static>>,
    /// Whether standard output was not open when the command started (`>&-`). Rust's
    /// runtime then opens `/dev/null` on descriptor 1 before `main`, read-write, and what is
    /// written there vanishes without a word; `cat` says "Bad file descriptor" and fails, and so
    /// does karu.
    closed: bool,
}

impl Stdout {
    /// Standard output, locked for the life of the command.
    pub(crate) fn new() -> Self {
        let stdout = io::stdout();
        let closed = was_closed(stdout.as_fd());
        Stdout {
            inner: BufWriter::with_capacity(64 << 10, stdout.lock()),
            closed,
        }
    }

    /// Write all of `bytes`.
    pub(crate) fn write(&mut self, bytes: &[u8]) -> Result<(), Stop> {
        if self.closed {
            return Err(Stop::Output(
                "cannot write to standard output: it is not open (Bad file descriptor)".into(),
            ));
        }
        self.inner.write_all(bytes).map_err(|e| Stop::stdout(&e))
    }

    /// Write one line of text.
    pub(crate) fn line(&mut self, text: &str) -> Result<(), Stop> {
        self.write(text.as_bytes())?;
        self.write(b"\n")
    }

    /// Push what is buffered to the reader now.
    pub(crate) fn flush(&mut self) -> Result<(), Stop> {
        if self.closed {
            // Nothing was written, so nothing is lost.
            return Ok(());
        }
        self.inner.flush().map_err(|e| Stop::stdout(&e))
    }
}

/// Whether `fd` is the `/dev/null` that Rust's runtime opens (read-write) in place of a
/// standard descriptor that was closed: a shell's `>/dev/null` opens it write-only.
fn was_closed(fd: BorrowedFd<'_>) -> bool {
    use std::os::unix::fs::{FileTypeExt, MetadataExt};
    let Ok(flags) = rustix::fs::fcntl_getfl(fd) else {
        return true;
    };
    if flags & rustix::fs::OFlags::RWMODE != rustix::fs::OFlags::RDWR {
        return false;
    }
    let Ok(null) = std::fs::metadata("/dev/null") else {
        return false;
    };
    let Ok(stdout) = fd
        .try_clone_to_owned()
        .and_then(|fd| File::from(fd).metadata())
    else {
        return true;
    };
    stdout.file_type().is_char_device() && stdout.rdev() == null.rdev()
}
