//! The file of one read under `--output` (or `karu ends --output`): written under a temporary
//! name of its own beside it as the bytes arrive, and renamed to its name only when the read is
//! OK, so that a file under its final name is always a finished read, and a read that fails or
//! is interrupted leaves what was there before as it was (as curl, wget and rsync do).
//!
//! The temporary is hidden (`.NAME.` and a random part), created new (`O_CREAT | O_EXCL`: never
//! through a link, never over a file that exists) with the mode the umask gives, and synced
//! before its rename, so that after a crash the name holds the earlier file or the whole new
//! one. Every failure removes it, and so do SIGINT, SIGTERM and SIGHUP (see
//! [`interrupt`](crate::interrupt)): only a process killed outright leaves it behind, hidden.
//!
//! A read that reached the end of its object keeps the bytes that exist, a valid prefix of the
//! range, as `NAME.partial` when no file has that name. Nothing else is ever removed or
//! replaced: a file under `NAME` goes only when a whole read takes its place, and a
//! `NAME.partial` from before this run stays.

use std::ffi::OsString;
use std::fs::File;
use std::hash::{BuildHasher, RandomState};
use std::io::{self, Write};
use std::os::fd::AsFd;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard, PoisonError};

use crate::outcome::Stop;

/// The suffix of a kept prefix.
pub(crate) const PARTIAL: &str = ".partial";

/// The longest part of a file's name its temporary's name repeats, in bytes: with the dot, the
/// random part and the suffix, the name stays within the 255 bytes file systems allow.
const NAME_IN_TEMPORARY: usize = 200;

/// How a read ended, for its file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ending {
    /// Every byte of the range: the file takes its name.
    Whole,
    /// The object ended inside the range: the bytes that exist are kept as `NAME.partial`.
    Prefix,
    /// Any other failure: nothing is kept.
    Failed,
}

/// Where a finished read's bytes are, and which files from before this run it left as they
/// were.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Finished {
    /// Where the read's bytes are: its name, `NAME.partial`, or nowhere.
    pub(crate) file: Option<PathBuf>,
    /// The file under the read's name from before this run, left as it was (a read that was
    /// not whole).
    pub(crate) earlier: Option<PathBuf>,
    /// What the read's line on stderr adds about its files: empty, or `; ...` clauses.
    pub(crate) note: String,
}

/// One read's file, being written.
#[derive(Debug)]
pub(crate) struct OutputFile {
    path: PathBuf,
    /// Created with the first bytes (a read that fails before any leaves no trace).
    temporary: Option<Temporary>,
}

impl OutputFile {
    /// The file that will be `path`.
    pub(crate) fn new(path: PathBuf) -> OutputFile {
        OutputFile {
            path,
            temporary: None,
        }
    }

    /// Appends `bytes`.
    pub(crate) fn write(&mut self, bytes: &[u8]) -> Result<(), Stop> {
        if bytes.is_empty() {
            return Ok(());
        }
        let temporary = match &mut self.temporary {
            Some(temporary) => temporary,
            None => self.temporary.insert(Temporary::beside(&self.path)?),
        };
        temporary
            .file
            .write_all(bytes)
            .map_err(|e| cannot_write(&self.path, &e))
    }

    /// Ends the file as the read ended: says where its bytes are, and what it left alone.
    pub(crate) fn finish(mut self, ending: Ending) -> Result<Finished, Stop> {
        let mut finished = Finished::default();
        match (ending, self.temporary.take()) {
            (Ending::Whole, temporary) => {
                // An empty range makes an empty file.
                let temporary = match temporary {
                    Some(temporary) => temporary,
                    None => Temporary::beside(&self.path)?,
                };
                temporary
                    .replace(&self.path)
                    .map_err(|e| cannot_write(&self.path, &e))?;
                finished.file = Some(self.path.clone());
                return Ok(finished);
            }
            (Ending::Prefix, Some(temporary)) => {
                let partial = partial_name(&self.path);
                let kept = temporary
                    .create(&partial)
                    .map_err(|e| cannot_write(&partial, &e))?;
                finished.note = if kept {
                    format!("; the bytes that exist are in {}", partial.display())
                } else {
                    format!(
                        "; the bytes that exist are not kept: {} is left as it was before this run",
                        partial.display()
                    )
                };
                finished.file = kept.then_some(partial);
            }
            // A failure, or a prefix of nothing.
            (_, temporary) => {
                if let Some(temporary) = temporary {
                    temporary.remove();
                }
            }
        }
        if std::fs::symlink_metadata(&self.path).is_ok() {
            finished.note.push_str(&format!(
                "; {} is left as it was before this run",
                self.path.display()
            ));
            finished.earlier = Some(self.path.clone());
        }
        Ok(finished)
    }
}

/// `NAME.partial` beside `NAME`.
pub(crate) fn partial_name(path: &Path) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(PARTIAL);
    PathBuf::from(name)
}

fn cannot_write(path: &Path, error: &io::Error) -> Stop {
    Stop::Output(format!("cannot write {}: {error}", path.display()))
}

/// The temporary files of this process that exist now. Creating one, and renaming or removing
/// it, happen under this lock, which the interrupt handler takes and keeps while it removes them
/// and ends the process: no temporary is created or renamed after it looked.
static UNFINISHED: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

fn unfinished() -> MutexGuard<'static, Vec<PathBuf>> {
    UNFINISHED.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Removes every temporary file of this process, and returns the lock that keeps new ones
/// from being made (held until the process ends).
pub(crate) fn remove_unfinished() -> MutexGuard<'static, Vec<PathBuf>> {
    let mut unfinished = unfinished();
    for path in unfinished.drain(..) {
        let _ = std::fs::remove_file(path);
    }
    unfinished
}

/// A temporary file of this process, removed when dropped unless it was renamed.
#[derive(Debug)]
struct Temporary {
    file: File,
    path: PathBuf,
}

impl Temporary {
    /// A new file with a hidden, unguessable name in `path`'s directory (made if missing).
    fn beside(path: &Path) -> Result<Temporary, Stop> {
        let parent = match path.parent() {
            Some(parent) if !parent.as_os_str().is_empty() => parent,
            _ => Path::new("."),
        };
        std::fs::create_dir_all(parent).map_err(|e| cannot_write(path, &e))?;
        let name = path.file_name().map_or(&[][..], |n| n.as_bytes());
        let name = &name[..name.len().min(NAME_IN_TEMPORARY)];
        let mut unfinished = unfinished();
        // Another file under a name drawn at random is unlikely; a few more draws settle it.
        let mut error = None;
        for _ in 0..16 {
            let mut candidate = OsString::from(".").into_vec();
            candidate.extend_from_slice(name);
            let random = RandomState::new().hash_one(std::process::id());
            candidate.extend_from_slice(format!(".{random:016x}.karu-tmp").as_bytes());
            let candidate = parent.join(OsString::from_vec(candidate));
            // `create_new` is O_CREAT | O_EXCL: it fails on any existing name, a link
            // included, and never opens what a link points to. Mode 0666, less the umask.
            match File::options()
                .write(true)
                .create_new(true)
                .mode(0o666)
                .open(&candidate)
            {
                Ok(file) => {
                    unfinished.push(candidate.clone());
                    return Ok(Temporary {
                        file,
                        path: candidate,
                    });
                }
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => error = Some(e),
                Err(e) => return Err(cannot_write(path, &e)),
            }
        }
        let error = error.unwrap_or_else(|| io::Error::from(io::ErrorKind::AlreadyExists));
        Err(cannot_write(path, &error))
    }

    /// Renames the file over `path` (replacing what is there) once its bytes are on disk.
    fn replace(self, path: &Path) -> io::Result<()> {
        self.end(|temporary| {
            temporary.file.sync_all()?;
            std::fs::rename(&temporary.path, path)
        })
    }

    /// Gives the file the name `path` if no file has it: `false` (and the file removed) if
    /// one does.
    fn create(self, path: &Path) -> io::Result<bool> {
        self.end(|temporary| {
            temporary.file.sync_all()?;
            // A hard link is made only where nothing is: the name is taken or not, at once.
            let kept = match std::fs::hard_link(&temporary.path, path) {
                Ok(()) => true,
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => false,
                // A file system without hard links: the name is checked, then taken.
                Err(e) => match std::fs::symlink_metadata(path) {
                    Ok(_) => false,
                    Err(missing) if missing.kind() == io::ErrorKind::NotFound => {
                        return std::fs::rename(&temporary.path, path).map(|()| true);
                    }
                    Err(_) => return Err(e),
                },
            };
            std::fs::remove_file(&temporary.path)?;
            Ok(kept)
        })
    }

    /// Removes the file.
    fn remove(self) {
        let _ = self.end(|temporary| std::fs::remove_file(&temporary.path));
    }

    /// Runs `finish` (which renames or removes the file) under the lock of the unfinished
    /// files, removes the file if `finish` failed, and forgets it.
    fn end<T>(mut self, finish: impl FnOnce(&Temporary) -> io::Result<T>) -> io::Result<T> {
        let mut unfinished = unfinished();
        let result = finish(&self);
        if result.is_err() {
            let _ = std::fs::remove_file(&self.path);
        }
        unfinished.retain(|p| *p != self.path);
        // Ended: nothing left for `drop` to do.
        self.path = PathBuf::new();
        result
    }
}

impl Drop for Temporary {
    /// A file not finished (the command stopped early): its temporary name goes.
    fn drop(&mut self) {
        if !self.path.as_os_str().is_empty() {
            let mut unfinished = unfinished();
            let _ = std::fs::remove_file(&self.path);
            unfinished.retain(|p| *p != self.path);
        }
    }
}

/// A file by what it is (device and inode), whatever name or link reaches it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Identity {
    device: u64,
    inode: u64,
}

impl Identity {
    fn of(metadata: &std::fs::Metadata) -> Identity {
        Identity {
            device: metadata.dev(),
            inode: metadata.ino(),
        }
    }
}

/// Refuses outputs a finished read must not be renamed over: a name that holds something
/// other than a file or a link (a directory, a device such as `/dev/null`, a FIFO), and a
/// file in `outputs` (or standard output, when `stdout` says the command writes there) that
/// is, through any link or name, one of the local files in `inputs`: the command would replace
/// (or grow) what it reads.
pub(crate) fn check_outputs(
    inputs: &[&Path],
    outputs: &[PathBuf],
    stdout: bool,
) -> Result<(), Stop> {
    let inputs: Vec<(Identity, &Path)> = inputs
        .iter()
        .filter_map(|path| {
            let metadata = std::fs::metadata(path).ok()?;
            Some((Identity::of(&metadata), *path))
        })
        .collect();
    let input = |identity: Identity| {
        inputs
            .iter()
            .find(|(i, _)| *i == identity)
            .map(|(_, path)| *path)
    };
    for output in outputs {
        refuse_other_than_a_file(output)?;
    }
    for output in outputs {
        if let Ok(metadata) = std::fs::metadata(output)
            && let Some(input) = input(Identity::of(&metadata))
        {
            return Err(Stop::Usage(format!(
                "{} is an input of this command ({}): writing it would replace what is read; \
                 give another output",
                output.display(),
                input.display()
            )));
        }
    }
    if stdout
        && let Ok(metadata) = io::stdout()
            .as_fd()
            .try_clone_to_owned()
            .and_then(|fd| File::from(fd).metadata())
        && metadata.is_file()
        && let Some(input) = input(Identity::of(&metadata))
    {
        return Err(Stop::Usage(format!(
            "standard output is an input of this command ({}): redirect it to another file",
            input.display()
        )));
    }
    Ok(())
}

/// Refuses `output` if its name holds something other than a file or a link.
fn refuse_other_than_a_file(output: &Path) -> Result<(), Stop> {
    use std::os::unix::fs::FileTypeExt;
    let Ok(metadata) = std::fs::symlink_metadata(output) else {
        return Ok(());
    };
    let kind = metadata.file_type();
    let what = if kind.is_file() || kind.is_symlink() {
        return Ok(());
    } else if kind.is_dir() {
        "a directory"
    } else if kind.is_char_device() || kind.is_block_device() {
        "a device"
    } else if kind.is_fifo() {
        "a FIFO"
    } else {
        "not a file"
    };
    Err(Stop::Usage(format!(
        "{} is {what}: a read's file takes its name by a rename, which would replace it; give \
         another output (or write to standard output)",
        output.display()
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    #[test]
    fn only_a_whole_read_takes_its_name() {
        let dir = tempfile::tempdir().unwrap();
        let sub = dir.path().join("sub");
        let path = sub.join("1.bin");
        let mut file = OutputFile::new(path.clone());
        file.write(b"abc").unwrap();
        file.write(b"d").unwrap();
        let during = names(&sub);
        assert_eq!(during.len(), 1, "{during:?}");
        assert!(
            during[0].starts_with(".1.bin.") && during[0].ends_with(".karu-tmp"),
            "a file being written has a hidden name: {during:?}"
        );
        assert!(
            unfinished().iter().any(|p| p.parent() == Some(&sub)),
            "known to the interrupt handler"
        );
        let finished = file.finish(Ending::Whole).unwrap();
        assert_eq!(finished.file, Some(path.clone()));
        assert_eq!(finished.note, "");
        assert_eq!(std::fs::read(&path).unwrap(), b"abcd");
        assert_eq!(names(&sub), ["1.bin"]);

        // The same read, now past the end: the prefix is kept under a name that says so,
        // and the whole file from before stays.
        let mut file = OutputFile::new(path.clone());
        file.write(b"ab").unwrap();
        let partial = sub.join("1.bin.partial");
        let finished = file.finish(Ending::Prefix).unwrap();
        assert_eq!(
            finished,
            Finished {
                file: Some(partial.clone()),
                earlier: Some(path.clone()),
                note: format!(
                    "; the bytes that exist are in {}; {} is left as it was before this run",
                    partial.display(),
                    path.display()
                ),
            }
        );
        assert_eq!(std::fs::read(&partial).unwrap(), b"ab");
        assert_eq!(std::fs::read(&path).unwrap(), b"abcd");
        assert_eq!(names(&sub), ["1.bin", "1.bin.partial"]);

        // Again: the prefix from before is not replaced.
        let mut file = OutputFile::new(path.clone());
        file.write(b"xy").unwrap();
        let finished = file.finish(Ending::Prefix).unwrap();
        assert_eq!(finished.file, None);
        assert_eq!(
            finished.note,
            format!(
                "; the bytes that exist are not kept: {} is left as it was before this run; {} \
                 is left as it was before this run",
                partial.display(),
                path.display()
            )
        );
        assert_eq!(std::fs::read(&partial).unwrap(), b"ab");

        // A failure keeps nothing and removes nothing.
        let mut file = OutputFile::new(path.clone());
        file.write(b"x").unwrap();
        let finished = file.finish(Ending::Failed).unwrap();
        assert_eq!(
            (&finished.file, &finished.earlier),
            (&None, &Some(path.clone()))
        );
        assert_eq!(names(&sub), ["1.bin", "1.bin.partial"]);
        assert_eq!(std::fs::read(&path).unwrap(), b"abcd");
        // An empty range is an empty file.
        let finished = OutputFile::new(path.clone()).finish(Ending::Whole).unwrap();
        assert_eq!(finished.file, Some(path.clone()));
        assert_eq!(std::fs::read(&path).unwrap(), b"");
        // A prefix of nothing is nothing.
        let finished = OutputFile::new(sub.join("2.bin"))
            .finish(Ending::Prefix)
            .unwrap();
        assert_eq!(finished, Finished::default());
        assert_eq!(names(&sub), ["1.bin", "1.bin.partial"]);
        assert!(!unfinished().iter().any(|p| p.parent() == Some(&sub)));
    }

    #[test]
    fn a_file_dropped_unfinished_leaves_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let mut file = OutputFile::new(dir.path().join("a"));
        file.write(b"abc").unwrap();
        drop(file);
        assert_eq!(names(dir.path()), Vec::<String>::new());
    }

    #[test]
    fn a_rename_that_fails_removes_its_temporary() {
        let dir = tempfile::tempdir().unwrap();
        // A directory under the name: a file cannot be renamed over it.
        let path = dir.path().join("taken");
        std::fs::create_dir(&path).unwrap();
        let mut file = OutputFile::new(path.clone());
        file.write(b"abc").unwrap();
        assert!(matches!(file.finish(Ending::Whole), Err(Stop::Output(_))));
        assert_eq!(names(dir.path()), ["taken"]);
    }

    #[test]
    fn a_long_name_gets_a_temporary_within_the_limit() {
        let dir = tempfile::tempdir().unwrap();
        let name = "n".repeat(255);
        let mut file = OutputFile::new(dir.path().join(&name));
        file.write(b"abc").unwrap();
        assert_eq!(
            file.finish(Ending::Whole).unwrap().file,
            Some(dir.path().join(&name))
        );
    }
}
