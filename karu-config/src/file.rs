//! Reading a small file a user names (a configuration file, a CA bundle, a key or token
//! file): the one way Karu reads such a file, so that no path can hang a client or fill its
//! memory.

use std::fs::File;
use std::io::{self, Read as _};
use std::path::Path;

use rustix::fs::{Mode, OFlags};

/// The bytes of the regular file at `path`, at most `limit` of them.
///
/// The open does not wait on what the path names (it is non-blocking), so a FIFO without a
/// writer is refused at once instead of blocking forever; so are a directory, a socket and a
/// device (`/dev/zero` would be read until memory ran out). A file larger than `limit`, or one
/// that grows past it while it is read, is refused too. The errors say which, in words that
/// follow "cannot read file:".
///
/// ```
/// use karu_config::read_regular_file;
/// let dir = tempfile::tempdir()?;
/// let path = dir.path().join("token");
/// std::fs::write(&path, "hf_abc")?;
/// assert_eq!(read_regular_file(&path, 1 << 20)?, b"hf_abc");
/// let error = read_regular_file(std::path::Path::new("/dev/zero"), 1 << 20).unwrap_err();
/// assert!(error.to_string().starts_with("not a regular file"));
/// assert!(read_regular_file(&path, 3).unwrap_err().to_string().starts_with("larger than 3 bytes"));
/// # Ok::<(), std::io::Error>(())
/// ```
pub fn read_regular_file(path: &Path, limit: u64) -> io::Result<Vec<u8>> {
    let flags = OFlags::RDONLY | OFlags::NONBLOCK | OFlags::CLOEXEC;
    let file = File::from(rustix::fs::open(path, flags, Mode::empty())?);
    let meta = file.metadata()?;
    if !meta.is_file() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "not a regular file (a directory, FIFO, socket or device is never read here)",
        ));
    }
    let too_large = || {
        let size = if limit >= 1 << 20 && limit.is_multiple_of(1 << 20) {
            format!("{} MiB", limit >> 20)
        } else {
            format!("{limit} bytes")
        };
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("larger than {size}, more than such a file holds"),
        )
    };
    if meta.len() > limit {
        return Err(too_large());
    }
    let mut bytes = Vec::with_capacity(usize::try_from(meta.len()).unwrap_or(0));
    file.take(limit.saturating_add(1)).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > limit {
        return Err(too_large());
    }
    Ok(bytes)
}

/// [`read_regular_file`] of a text file: its bytes must be UTF-8.
pub fn read_regular_text(path: &Path, limit: u64) -> io::Result<String> {
    String::from_utf8(read_regular_file(path, limit)?)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidData, "not UTF-8 text"))
}
