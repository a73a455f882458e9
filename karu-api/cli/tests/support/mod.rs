//! Helpers for the CLI tests.
//!
//! Pattern files, and the built `karu` binary run with no user config, no project config and
//! no `KARU_*` variables.
//!
//! Each test binary uses a subset.
#![allow(dead_code)]

use std::ffi::OsStr;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use sha2::{Digest, Sha256};

/// The byte at `offset` of every pattern file: a hash of the offset, so bytes from the wrong
/// place are caught.
pub(crate) fn pattern_byte(offset: u64) -> u8 {
    let mut x = offset.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    (x ^ (x >> 31)) as u8
}

/// The pattern bytes of `[start, start + len)`.
pub(crate) fn pattern(start: u64, len: u64) -> Vec<u8> {
    (start..start + len).map(pattern_byte).collect()
}

/// Write a pattern file of `len` bytes; returns its path as a string for the command line.
pub(crate) fn pattern_file(dir: &Path, name: &str, len: u64) -> String {
    let path = dir.join(name);
    std::fs::write(&path, pattern(0, len)).expect("write a pattern file");
    path.to_str()
        .expect("temporary paths are UTF-8")
        .to_string()
}

/// Standard base64 with padding, as `karu ends --json` writes bytes.
pub(crate) fn base64(bytes: &[u8]) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// Lower-case hex SHA-256, as the CLI prints it.
pub(crate) fn sha256(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// What one run of the binary produced.
#[derive(Debug)]
pub(crate) struct Run {
    pub(crate) code: i32,
    pub(crate) stdout: Vec<u8>,
    pub(crate) stderr: String,
}

impl Run {
    /// Stdout parsed as JSON lines.
    pub(crate) fn json_lines(&self) -> Vec<serde_json::Value> {
        std::str::from_utf8(&self.stdout)
            .expect("JSON output is UTF-8")
            .lines()
            .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("{line:?}: {e}")))
            .collect()
    }

    /// Stderr, one entry per line.
    pub(crate) fn stderr_lines(&self) -> Vec<&str> {
        self.stderr.lines().collect()
    }
}

/// Run `command` (already isolated with [`isolate`]) to completion.
pub(crate) fn run(command: &mut Command) -> Run {
    let output = command.output().expect("run the karu binary");
    Run {
        code: output
            .status
            .code()
            .unwrap_or_else(|| panic!("killed by a signal: {:?}", output.status)),
        stdout: output.stdout,
        stderr: String::from_utf8(output.stderr).expect("stderr is UTF-8"),
    }
}

/// A clean environment: `HOME` and the working directory are `home` (which holds no
/// `.config/karu/config.toml` and no `karu.toml`), and no `KARU_*` (or any other) variable is
/// inherited.
pub(crate) fn isolate<'a>(command: &'a mut Command, home: &Path) -> &'a mut Command {
    command.env_clear().env("HOME", home).current_dir(home)
}

/// Run `karu ARGS...` isolated in `home`.
pub(crate) fn karu<I, S>(home: &Path, args: I) -> Run
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    let mut command = Command::new(env!("CARGO_BIN_EXE_karu"));
    command.args(args);
    run(isolate(&mut command, home))
}

/// Whether this process runs as root (`/proc/self` belongs to the effective user).
pub(crate) fn running_as_root() -> bool {
    std::fs::metadata("/proc/self")
        .map(|m| m.uid() == 0)
        .unwrap_or(false)
}

/// Find an executable on the test process's `PATH`.
pub(crate) fn which(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|candidate| {
            std::fs::metadata(candidate).is_ok_and(|m| m.is_file() && m.mode() & 0o111 != 0)
        })
}

/// The names in `dir`, sorted.
pub(crate) fn names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .expect("read the directory")
        .map(|e| {
            e.expect("a directory entry")
                .file_name()
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    names.sort();
    names
}
