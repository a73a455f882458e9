//! The file of one read under `--output` (or `karu ends --output`): written under a hidden
//! temporary name beside it as the bytes arrive, and given its name only when the read is OK,
//! so that a file under its final name is always a finished read.
//!
//! A read that reached the end of its object keeps the bytes that exist, a valid prefix of
//! the range, as `NAME.partial`; any other failure keeps nothing. Either way a file left under
//! `NAME` by an earlier run is removed, so the name never holds bytes this run did not prove.

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};

use crate::outcome::Stop;

/// The suffix of a kept prefix.
pub(crate) const PARTIAL: &str = ".partial";

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

/// One read's file, being written.
#[derive(Debug)]
pub(crate) struct OutputFile {
    path: PathBuf,
    temporary: PathBuf,
    /// Opened with the first bytes (a read that fails before any leaves no trace).
    file: Option<File>,
    written: u64,
}

impl OutputFile {
    /// The file that will be `path`.
    pub(crate) fn new(path: PathBuf) -> OutputFile {
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let temporary = path.with_file_name(format!(".{name}.karu-{}.tmp", std::process::id()));
        OutputFile {
            path,
            temporary,
            file: None,
            written: 0,
        }
    }

    /// Appends `bytes`.
    pub(crate) fn write(&mut self, bytes: &[u8]) -> Result<(), Stop> {
        if bytes.is_empty() {
            return Ok(());
        }
        let file = match &mut self.file {
            Some(file) => file,
            None => self.file.insert(self.create()?),
        };
        file.write_all(bytes)
            .map_err(|e| cannot_write(&self.path, &e))?;
        self.written += bytes.len() as u64;
        Ok(())
    }

    fn create(&self) -> Result<File, Stop> {
        if let Some(parent) = self.path.parent()
            && !parent.as_os_str().is_empty()
        {
            std::fs::create_dir_all(parent).map_err(|e| cannot_write(&self.path, &e))?;
        }
        File::create(&self.temporary).map_err(|e| cannot_write(&self.path, &e))
    }

    /// Ends the file as the read ended; returns where its bytes are, if anywhere.
    pub(crate) fn finish(mut self, ending: Ending) -> Result<Option<PathBuf>, Stop> {
        let partial = partial_name(&self.path);
        let kept = match ending {
            Ending::Whole => {
                if self.file.is_none() {
                    // An empty range: an empty file.
                    self.file = Some(self.create()?);
                }
                Some(self.path.clone())
            }
            Ending::Prefix if self.written > 0 => Some(partial.clone()),
            Ending::Prefix | Ending::Failed => None,
        };
        if let Some(file) = self.file.take() {
            file.sync_all()
                .and_then(|()| match &kept {
                    Some(place) => std::fs::rename(&self.temporary, place),
                    None => std::fs::remove_file(&self.temporary),
                })
                .map_err(|e| cannot_write(&self.path, &e))?;
        }
        // What an earlier run left that this one did not prove.
        let stale: &[&Path] = match &kept {
            Some(place) if *place == self.path => &[&partial],
            Some(_) => &[&self.path],
            None => &[&self.path, &partial],
        };
        for path in stale {
            match std::fs::remove_file(path) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(cannot_write(path, &e)),
            }
        }
        Ok(kept)
    }
}

impl Drop for OutputFile {
    /// A file not finished (the command stopped early): its temporary name goes.
    fn drop(&mut self) {
        if self.file.take().is_some() {
            let _ = std::fs::remove_file(&self.temporary);
        }
    }
}

/// `NAME.partial` beside `NAME`.
pub(crate) fn partial_name(path: &Path) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(PARTIAL);
    PathBuf::from(name)
}

fn cannot_write(path: &Path, error: &std::io::Error) -> Stop {
    Stop::Output(format!("cannot write {}: {error}", path.display()))
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
        let path = dir.path().join("sub/1.bin");
        let mut file = OutputFile::new(path.clone());
        file.write(b"abc").unwrap();
        file.write(b"d").unwrap();
        assert_eq!(
            names(&dir.path().join("sub")),
            [format!(".1.bin.karu-{}.tmp", std::process::id())],
            "a file being written has a hidden name"
        );
        assert_eq!(file.finish(Ending::Whole).unwrap(), Some(path.clone()));
        assert_eq!(std::fs::read(&path).unwrap(), b"abcd");
        assert_eq!(names(&dir.path().join("sub")), ["1.bin"]);

        // The same read, now past the end: the prefix is kept under a name that says so,
        // and the older whole file goes.
        let mut file = OutputFile::new(path.clone());
        file.write(b"ab").unwrap();
        let partial = dir.path().join("sub/1.bin.partial");
        assert_eq!(file.finish(Ending::Prefix).unwrap(), Some(partial.clone()));
        assert_eq!(std::fs::read(&partial).unwrap(), b"ab");
        assert_eq!(names(&dir.path().join("sub")), ["1.bin.partial"]);

        // A failure keeps nothing, and a whole read removes an older partial.
        let mut file = OutputFile::new(path.clone());
        file.write(b"x").unwrap();
        assert_eq!(file.finish(Ending::Failed).unwrap(), None);
        assert_eq!(names(&dir.path().join("sub")), Vec::<String>::new());
        std::fs::write(&partial, b"old").unwrap();
        assert_eq!(
            OutputFile::new(path.clone()).finish(Ending::Whole).unwrap(),
            Some(path.clone())
        );
        assert_eq!(std::fs::read(&path).unwrap(), b"", "an empty range");
        assert_eq!(names(&dir.path().join("sub")), ["1.bin"]);
        // A prefix of nothing is nothing.
        assert_eq!(
            OutputFile::new(path.clone())
                .finish(Ending::Prefix)
                .unwrap(),
            None
        );
        assert_eq!(names(&dir.path().join("sub")), Vec::<String>::new());
    }

    #[test]
    fn a_file_dropped_unfinished_leaves_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let mut file = OutputFile::new(dir.path().join("a"));
        file.write(b"abc").unwrap();
        drop(file);
        assert_eq!(names(dir.path()), Vec::<String>::new());
    }
}
