//! The plain HTTP provider: against Karu's HTTP mock (a [`MockTarget`](super::MockTarget)
//! with its defaults) and against a real nginx.

use std::fmt;

use karu::ClientBuilder;

use super::{MockTarget, isolated_builder, write_under};
use crate::conformance::Target;
use crate::http::{MockServer, url_path};
use crate::nginx::Nginx;

/// The plain HTTP provider against Karu's HTTP mock server: a [`MockTarget`] with its
/// defaults.
pub type HttpMockTarget = MockTarget;

impl MockTarget {
    /// The plain HTTP provider against a mock server started on 127.0.0.1.
    pub fn start() -> Self {
        MockTarget::new("http-mock", MockServer::start())
    }

    /// The plain HTTP provider against a mock server started on 127.0.0.1 that speaks HTTPS
    /// (its own CA, which the target's clients trust) and HTTP/2 only, which the target's
    /// clients use: many reads share few connections, so a fault that cuts or resets a
    /// connection ends every stream on it.
    pub fn start_https_http2() -> std::io::Result<Self> {
        let server = MockServer::builder().tls(true).http2(true).start()?;
        let ca = server
            .ca_file()
            .ok_or_else(|| std::io::Error::other("an HTTPS mock server has a CA file"))?
            .to_string_lossy()
            .into_owned();
        Ok(MockTarget::new("http-mock-https-http2", server)
            .set("http.ca_file", ca)
            .set("http.version", "http2")
            .with_address(|authority, name| format!("https://{authority}{}", url_path(name))))
    }
}

/// The plain HTTP provider against a real nginx serving a temporary directory.
pub struct NginxTarget {
    nginx: Nginx,
    root: tempfile::TempDir,
}

impl NginxTarget {
    /// Start nginx on 127.0.0.1 over a new temporary directory.
    pub fn start() -> std::io::Result<Self> {
        let root = tempfile::tempdir()?;
        let nginx = Nginx::start(root.path())?;
        Ok(NginxTarget { nginx, root })
    }

    /// Start nginx on 127.0.0.1 over a new temporary directory, serving HTTPS; the clients
    /// trust its CA and speak only HTTP/2 (`http.version = "http2"`).
    pub fn start_https_http2() -> std::io::Result<Self> {
        let root = tempfile::tempdir()?;
        let nginx = Nginx::start_https(root.path())?;
        Ok(NginxTarget { nginx, root })
    }

    /// The running nginx (its access log is the evidence of which ranges were requested).
    pub fn nginx(&self) -> &Nginx {
        &self.nginx
    }
}

impl fmt::Debug for NginxTarget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("NginxTarget")
            .field("url", &self.nginx.base_url())
            .finish()
    }
}

impl Target for NginxTarget {
    fn name(&self) -> String {
        match self.nginx.ca_file() {
            Some(_) => "nginx-https-http2".into(),
            None => "nginx".into(),
        }
    }

    fn builder(&self) -> ClientBuilder {
        match self.nginx.ca_file() {
            Some(ca) => isolated_builder()
                .set("http.ca_file", ca.to_string_lossy().into_owned())
                .set("http.version", "http2"),
            None => isolated_builder(),
        }
    }

    fn address(&self, name: &str) -> String {
        self.nginx.url(&url_path(name))
    }

    fn put(&self, name: &str, bytes: &[u8]) -> Result<(), String> {
        write_under(self.root.path(), name, bytes)
    }
}
