//! Standard output that reports write errors instead of panicking: a closed pipe stops the
//! command quietly, any other failure (a full disk) is an error with exit status 3.

use std::io::{self, BufWriter, StdoutLock, Write};

use crate::outcome::Stop;

/// Buffered standard output.
pub(crate) struct Stdout {
    inner: BufWriter<StdoutLock<'static>>,
}

impl Stdout {
    /// Standard output, locked for the life of the command.
    pub(crate) fn new() -> Self {
        Stdout {
            inner: BufWriter::with_capacity(64 << 10, io::stdout().lock()),
        }
    }

    /// Write all of `bytes`.
    pub(crate) fn write(&mut self, bytes: &[u8]) -> Result<(), Stop> {
        self.inner.write_all(bytes).map_err(|e| Stop::stdout(&e))
    }

    /// Write one line of text.
    pub(crate) fn line(&mut self, text: &str) -> Result<(), Stop> {
        self.write(text.as_bytes())?;
        self.write(b"\n")
    }

    /// Push what is buffered to the reader now.
    pub(crate) fn flush(&mut self) -> Result<(), Stop> {
        self.inner.flush().map_err(|e| Stop::stdout(&e))
    }
}
