//! How the benchmark's clients reach the mock server: cleartext HTTP/1.1 (the default), or
//! HTTPS (`--tls`, trusting the mock's generated rcgen CA) offering HTTP/1.1 only or, with
//! `--http2`, HTTP/2 by ALPN as real stores do. Set once per workload run, before any client
//! is built; every method reads it from here.
//!
//! Over TLS, Karu trusts the CA through `http.ca_file` (and asks for `http.version = auto`,
//! which takes HTTP/2 where ALPN offers it), object_store through
//! `ClientOptions::with_root_certificate` (allowing HTTP/2), and OpenDAL through its own
//! reqwest client with the CA added. The plain hyper client speaks cleartext HTTP/1.1 only: it
//! is left out of TLS runs.

use std::path::PathBuf;
use std::sync::Mutex;

/// The transport of the current workload run.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Transport {
    /// The mock's CA, in PEM, and the file it is written to, when the server speaks TLS.
    pub(crate) tls: Option<(String, PathBuf)>,
    /// Whether the server offers HTTP/2 (by ALPN over TLS).
    pub(crate) http2: bool,
}

impl Transport {
    /// The scenario suffix of `all`'s record: "", " tls" or " tls h2".
    pub(crate) fn tag(&self) -> &'static str {
        match (self.tls.is_some(), self.http2) {
            (false, false) => "",
            (false, true) => " h2c",
            (true, false) => " tls",
            (true, true) => " tls h2",
        }
    }

    /// A line for the workload's header.
    pub(crate) fn describe(&self) -> String {
        match (self.tls.is_some(), self.http2) {
            (false, false) => "cleartext HTTP/1.1".into(),
            (false, true) => "cleartext, HTTP/2 by prior knowledge".into(),
            (true, false) => "HTTPS (the mock's rcgen CA), HTTP/1.1 offered by ALPN".into(),
            (true, true) => "HTTPS (the mock's rcgen CA), HTTP/2 offered by ALPN".into(),
        }
    }
}

static CURRENT: Mutex<Option<Transport>> = Mutex::new(None);

/// Sets the transport of the workload about to run.
pub(crate) fn set(transport: Transport) {
    if let Ok(mut current) = CURRENT.lock() {
        *current = Some(transport);
    }
}

/// The transport of the current workload run (cleartext HTTP/1.1 if none was set).
pub(crate) fn current() -> Transport {
    CURRENT
        .lock()
        .ok()
        .and_then(|c| c.clone())
        .unwrap_or_default()
}

/// The file the mock's CA is written to for the clients that trust it by a file: one per
/// process, removed when `karu-bench` ends ([`remove_ca_file`]).
fn ca_file() -> std::path::PathBuf {
    std::env::temp_dir().join(format!("karu-bench-ca-{}.pem", std::process::id()))
}

/// Remove the CA file, if a TLS run wrote one.
pub(crate) fn remove_ca_file() {
    let _ = std::fs::remove_file(ca_file());
}

impl Transport {
    /// The transport of `server`: its CA written to a file when it speaks TLS.
    pub(crate) fn for_server(
        server: &karu_testkit::MockServer,
        http2: bool,
    ) -> Result<Transport, String> {
        let tls = match server.ca_pem() {
            None => None,
            Some(pem) => {
                let path = ca_file();
                std::fs::write(&path, &pem)
                    .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
                Some((pem, path))
            }
        };
        Ok(Transport { tls, http2 })
    }
}
