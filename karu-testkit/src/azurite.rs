//! A real Azurite blob service (Microsoft's Azure Storage emulator) on loopback, for proving the
//! Azure provider against an independently written Azure server.
//!
//! [`Azurite::start`] runs `azurite-blob` 3.35.0 (Node) with its data in its own temporary
//! directory, bound to `127.0.0.1` on a free port, telemetry off, `--skipApiVersionCheck`, and
//! waits until it answers. Requests need the development account's Shared Key
//! ([`Azurite::account`], [`Azurite::account_key`]) or a SAS ([`Azurite::account_sas`]);
//! dropping an [`Azurite`] kills its process group.
//!
//! It is installed with npm into a cache directory ([`install_dir`], [`install`]); tests that
//! need it fail, never skip, when it is missing.

use std::fmt;
use std::io;
use std::net::{Ipv4Addr, SocketAddr, TcpListener};
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime};

use base64::Engine;
use base64::engine::general_purpose::STANDARD;

use crate::azure::{DEV_ACCOUNT, DEV_KEY, Sas, blob_path, sharedkey};
use crate::http::RequestHead;
use crate::server_process;

/// The Azurite version Karu's tests are run with.
pub const VERSION: &str = "3.35.0";

/// The storage service version the harness's own requests (uploads) use.
const SERVICE_VERSION: &str = "2023-11-03";

/// How long [`Azurite::start`] waits for the endpoint to answer.
const START_TIMEOUT: Duration = Duration::from_secs(60);

/// Where Azurite is installed: `$KARU_CACHE_DIR/azurite-3.35.0`, else
/// `$XDG_CACHE_HOME/karu/azurite-3.35.0`, else `~/.cache/karu/azurite-3.35.0`.
pub fn install_dir() -> PathBuf {
    let base = std::env::var_os("KARU_CACHE_DIR")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("XDG_CACHE_HOME").map(|d| PathBuf::from(d).join("karu")))
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache/karu")))
        .unwrap_or_else(|| std::env::temp_dir().join("karu-cache"));
    base.join(format!("azurite-{VERSION}"))
}

/// The command that installs it: `npm install --prefix <install_dir> azurite@3.35.0`.
pub fn install_hint() -> String {
    format!(
        "npm install --no-audit --no-fund --prefix {} azurite@{VERSION}",
        install_dir().display()
    )
}

/// Installs Azurite into [`install_dir`] unless it is already there (idempotent).
pub fn install() -> io::Result<()> {
    if Azurite::available() {
        return Ok(());
    }
    let dir = install_dir();
    std::fs::create_dir_all(&dir)?;
    let status = Command::new("npm")
        .args(["install", "--no-audit", "--no-fund", "--prefix"])
        .arg(&dir)
        .arg(format!("azurite@{VERSION}"))
        .stdin(Stdio::null())
        .status()?;
    if status.success() && Azurite::available() {
        Ok(())
    } else {
        Err(io::Error::other(format!(
            "`{}` failed ({status})",
            install_hint()
        )))
    }
}

/// A running `azurite-blob` on `127.0.0.1`; its process group is killed on drop.
pub struct Azurite {
    child: Child,
    dir: tempfile::TempDir,
    port: u16,
}

impl fmt::Debug for Azurite {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Azurite")
            .field("endpoint", &self.endpoint())
            .field("pid", &self.child.id())
            .finish_non_exhaustive()
    }
}

impl Azurite {
    /// The `azurite-blob` script in [`install_dir`].
    pub fn binary() -> Option<PathBuf> {
        let path = install_dir().join("node_modules/.bin/azurite-blob");
        path.is_file().then_some(path)
    }

    /// Whether Azurite is installed.
    pub fn available() -> bool {
        Self::binary().is_some()
    }

    /// Starts `azurite-blob` and waits until it answers.
    ///
    /// # Errors
    /// `NotFound` if it is not installed (the message gives [`install_hint`]); a failure to
    /// start it; it exiting or not answering within 60 seconds (the error quotes its output).
    pub fn start() -> io::Result<Azurite> {
        let binary = Self::binary().ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::NotFound,
                format!(
                    "Azurite is not installed: run `cargo xtask test`, which runs `{}`",
                    install_hint()
                ),
            )
        })?;
        let dir = tempfile::Builder::new().prefix("karu-azurite-").tempdir()?;
        let port = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))?
            .local_addr()?
            .port();
        let log = std::fs::File::create(dir.path().join("azurite.log"))?;
        let child = Command::new(binary)
            .args(["--blobHost", "127.0.0.1", "--blobPort"])
            .arg(port.to_string())
            .arg("--location")
            .arg(dir.path().join("data"))
            .args([
                "--skipApiVersionCheck",
                "--disableTelemetry",
                "--disableProductStyleUrl",
                "--silent",
            ])
            .current_dir(dir.path())
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .process_group(0)
            .spawn()?;
        let mut azurite = Azurite { child, dir, port };
        azurite.wait_ready()?;
        Ok(azurite)
    }

    fn wait_ready(&mut self) -> io::Result<()> {
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            if let Some(status) = self.child.try_wait()? {
                return Err(io::Error::other(format!(
                    "azurite-blob exited with {status}: {}",
                    self.log()
                )));
            }
            if let Ok((status, _)) = self.request("GET", "/", None, &[], &[]) {
                // Unauthenticated: refused, but answered.
                if status >= 400 {
                    return Ok(());
                }
            }
            if Instant::now() > deadline {
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!(
                        "Azurite did not answer within {START_TIMEOUT:?}: {}",
                        self.log()
                    ),
                ));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// What Azurite printed.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("azurite.log")).unwrap_or_default()
    }

    /// `127.0.0.1:PORT`.
    pub fn addr(&self) -> SocketAddr {
        SocketAddr::from((Ipv4Addr::LOCALHOST, self.port))
    }

    /// The blob service URL, `http://127.0.0.1:PORT/devstoreaccount1` (for `azure.endpoint`).
    pub fn endpoint(&self) -> String {
        format!("http://{}/{DEV_ACCOUNT}", self.addr())
    }

    /// The development account, `devstoreaccount1`.
    pub fn account(&self) -> &str {
        DEV_ACCOUNT
    }

    /// The development account's published key (base64).
    pub fn account_key(&self) -> &str {
        DEV_KEY
    }

    /// An account SAS (read, blob service, every resource type) valid for `lifetime`, signed
    /// with the development key ([`Sas::account`]).
    pub fn account_sas(&self, lifetime: Duration) -> String {
        self.sas(&Sas::account(SystemTime::now() + lifetime))
    }

    /// `sas` signed with the development account's key: the token (without `?`).
    pub fn sas(&self, sas: &Sas) -> String {
        let key = STANDARD.decode(DEV_KEY).unwrap_or_default();
        sas.token(DEV_ACCOUNT, &key)
    }

    /// Creates a container (an existing one is fine).
    pub fn create_container(&self, container: &str) -> io::Result<()> {
        let path = format!("/{DEV_ACCOUNT}/{container}");
        let (status, body) = self.signed("PUT", &path, Some("restype=container"), &[], &[])?;
        match status {
            201 | 409 => Ok(()),
            _ => Err(io::Error::other(format!(
                "creating container {container}: {status} {body}"
            ))),
        }
    }

    /// The names of the blobs in a container.
    pub fn list(&self, container: &str) -> io::Result<Vec<String>> {
        let path = format!("/{DEV_ACCOUNT}/{container}");
        let (status, body) =
            self.signed("GET", &path, Some("comp=list&restype=container"), &[], &[])?;
        if status != 200 {
            return Err(io::Error::other(format!(
                "listing container {container}: {status} {body}"
            )));
        }
        Ok(body
            .split("<Name>")
            .skip(1)
            .filter_map(|rest| rest.split_once("</Name>").map(|(name, _)| name.to_string()))
            .collect())
    }

    /// Uploads a block blob.
    pub fn put(&self, container: &str, blob: &str, bytes: &[u8]) -> io::Result<()> {
        let path = blob_path(DEV_ACCOUNT, container, blob);
        let (status, body) = self.signed(
            "PUT",
            &path,
            None,
            &[("x-ms-blob-type", "BlockBlob")],
            bytes,
        )?;
        if status == 201 {
            Ok(())
        } else {
            Err(io::Error::other(format!(
                "uploading {container}/{blob}: {status} {body}"
            )))
        }
    }

    /// A request signed with the development account's Shared Key.
    fn signed(
        &self,
        method: &str,
        path: &str,
        query: Option<&str>,
        extra: &[(&str, &str)],
        body: &[u8],
    ) -> io::Result<(u16, String)> {
        let date = httpdate::fmt_http_date(SystemTime::now());
        let length = body.len().to_string();
        let mut headers: Vec<(String, String)> = vec![
            ("x-ms-date".into(), date),
            ("x-ms-version".into(), SERVICE_VERSION.into()),
            ("content-length".into(), length),
        ];
        headers.extend(extra.iter().map(|(n, v)| (n.to_string(), v.to_string())));
        let head = RequestHead {
            method: method.into(),
            path: path.into(),
            query: query.map(str::to_string),
            headers: headers.clone(),
            body: Default::default(),
        };
        let key = STANDARD.decode(DEV_KEY).unwrap_or_default();
        let signature = sharedkey::sign(&key, &sharedkey::string_to_sign(&head, DEV_ACCOUNT));
        headers.push((
            "authorization".into(),
            format!("SharedKey {DEV_ACCOUNT}:{signature}"),
        ));
        let pairs: Vec<(&str, &str)> = headers
            .iter()
            .map(|(n, v)| (n.as_str(), v.as_str()))
            .collect();
        self.request(method, path, query, &pairs, body)
    }

    fn request(
        &self,
        method: &str,
        path: &str,
        query: Option<&str>,
        headers: &[(&str, &str)],
        body: &[u8],
    ) -> io::Result<(u16, String)> {
        let target = match query {
            Some(q) => format!("{path}?{q}"),
            None => path.to_string(),
        };
        server_process::exchange(self.addr(), method, &target, headers, body)
    }
}

impl Drop for Azurite {
    fn drop(&mut self) {
        // Node may have spawned workers: the whole process group goes.
        server_process::kill_group(&mut self.child);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_install_pins_the_version() {
        assert!(install_hint().ends_with(&format!("azurite@{VERSION}")));
        assert!(install_dir().ends_with(format!("azurite-{VERSION}")));
    }
}
