//! How a command ends: the exit statuses `karu` documents, and the failures that end a command
//! early.

use std::io::{self, Write};
use std::process::ExitCode;

/// Every read (or the operation) succeeded.
pub(crate) const OK: u8 = 0;
/// A read or the operation failed; each failure was reported on stderr.
pub(crate) const FAILED: u8 = 1;
/// A usage or configuration error: nothing was read.
pub(crate) const USAGE: u8 = 2;
/// The output could not be written (a full disk, an unwritable `--output` file).
pub(crate) const OUTPUT: u8 = 3;

/// Why a command stopped before finishing its work.
#[derive(Debug)]
pub(crate) enum Stop {
    /// A usage or configuration error (exit 2).
    Usage(String),
    /// Writing the output failed (exit 3).
    Output(String),
    /// Standard output was closed by its reader: end quietly, like `cat`.
    BrokenPipe,
}

impl Stop {
    /// A failed write to standard output.
    pub(crate) fn stdout(error: &io::Error) -> Stop {
        if error.kind() == io::ErrorKind::BrokenPipe {
            Stop::BrokenPipe
        } else {
            Stop::Output(format!("cannot write to standard output: {error}"))
        }
    }
}

/// Ends the process's work: prints what a stop says and gives its status. After a broken pipe
/// the status is that of the reads so far (`so_far`).
pub(crate) fn finish(result: Result<u8, Stop>, so_far: u8) -> ExitCode {
    let status = match result {
        Ok(status) => status,
        Err(Stop::Usage(message)) => {
            say(&format!("karu: {message}"));
            USAGE
        }
        Err(Stop::Output(message)) => {
            say(&format!("karu: {message}"));
            OUTPUT
        }
        Err(Stop::BrokenPipe) => so_far,
    };
    ExitCode::from(status)
}

/// One line on stderr. A stderr that cannot be written is ignored: there is nowhere left to
/// report to, and the exit status still tells.
pub(crate) fn say(line: &str) {
    let mut stderr = io::stderr().lock();
    let _ = writeln!(stderr, "{line}");
}
