//! A real nginx serving a directory, for checking clients against a real server.
//!
//! [`Nginx::start`] writes a minimal configuration into its own temporary directory (listen on
//! `127.0.0.1` and a free port, no daemon, pid, logs and temp files inside that directory,
//! static files with ETags), starts nginx and waits until the port accepts connections;
//! [`Nginx::start_https`] serves HTTPS with HTTP/2 (and HTTP/1.1, by ALPN) under a certificate
//! of a CA it generates. Dropping the [`Nginx`] kills it. Tests that need it should check
//! [`Nginx::available`] first and skip with a printed note when nginx is not installed.

use std::fmt;
use std::io;
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The fields of each [`Nginx::access_log`] line, in order, separated by spaces:
/// method, request URI, the `Range` request header in double quotes (`"-"` when absent),
/// status, body bytes sent, connection serial number (equal numbers: a reused connection).
pub const ACCESS_LOG_FORMAT: &str =
    r#"$request_method $request_uri "$http_range" $status $body_bytes_sent $connection"#;

/// How long [`Nginx::start`] waits for the port to accept connections.
const START_TIMEOUT: Duration = Duration::from_secs(10);

/// A running nginx serving a directory on `127.0.0.1`; killed on drop.
pub struct Nginx {
    child: Child,
    dir: tempfile::TempDir,
    addr: SocketAddr,
    https: bool,
}

impl fmt::Debug for Nginx {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Nginx")
            .field("addr", &self.addr)
            .field("https", &self.https)
            .field("pid", &self.child.id())
            .field("dir", &self.dir.path())
            .finish()
    }
}

/// Temp-path directives and the module each belongs to (absent modules reject them).
const TEMP_PATHS: [(&str, &str); 5] = [
    ("client_body_temp_path", ""),
    ("proxy_temp_path", "http_proxy_module"),
    ("fastcgi_temp_path", "http_fastcgi_module"),
    ("uwsgi_temp_path", "http_uwsgi_module"),
    ("scgi_temp_path", "http_scgi_module"),
];

impl Nginx {
    /// The nginx binary: `/usr/sbin/nginx`, else `nginx` on `PATH`.
    pub fn binary() -> Option<PathBuf> {
        let standard = Path::new("/usr/sbin/nginx");
        if standard.is_file() {
            return Some(standard.to_owned());
        }
        std::env::var_os("PATH").and_then(|paths| {
            std::env::split_paths(&paths)
                .map(|dir| dir.join("nginx"))
                .find(|candidate| candidate.is_file())
        })
    }

    /// Whether an nginx binary is installed.
    pub fn available() -> bool {
        Self::binary().is_some()
    }

    /// Starts nginx serving the files under `root` as static files.
    ///
    /// # Errors
    /// `NotFound` if nginx is not installed; otherwise any failure to write the configuration,
    /// start nginx, or see it accept connections within 10 seconds (the error then quotes
    /// nginx's error log).
    pub fn start(root: &Path) -> io::Result<Nginx> {
        Self::start_with(root, false)
    }

    /// Starts nginx serving the files under `root` over HTTPS, HTTP/2 or HTTP/1.1 as the
    /// client's ALPN asks, with a certificate for `127.0.0.1` of a CA it generates
    /// ([`Nginx::ca_file`]).
    ///
    /// # Errors
    /// As [`Nginx::start`].
    pub fn start_https(root: &Path) -> io::Result<Nginx> {
        Self::start_with(root, true)
    }

    fn start_with(root: &Path, https: bool) -> io::Result<Nginx> {
        let binary = Self::binary()
            .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, "nginx is not installed"))?;
        let root = root.canonicalize()?;
        let version = Command::new(&binary).arg("-V").output()?;
        let build = String::from_utf8_lossy(&version.stderr).into_owned()
            + &String::from_utf8_lossy(&version.stdout);
        let mut last_error = None;
        // The free port is found by binding and releasing it; retry if another process takes
        // it in between.
        for _ in 0..5 {
            let dir = tempfile::Builder::new().prefix("karu-nginx-").tempdir()?;
            let port = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))?
                .local_addr()?
                .port();
            let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
            let config = dir.path().join("nginx.conf");
            if https {
                let pki = crate::http::tls::pki()?;
                std::fs::write(dir.path().join("ca.pem"), &pki.ca_pem)?;
                std::fs::write(dir.path().join("cert.pem"), pki.cert.pem())?;
                std::fs::write(dir.path().join("key.pem"), pki.key.serialize_pem())?;
            }
            let text = config_text(dir.path(), &root, port, &build, https);
            std::fs::write(&config, text)?;
            let child = Command::new(&binary)
                .arg("-p")
                .arg(dir.path())
                .arg("-c")
                .arg(&config)
                .arg("-e")
                .arg(dir.path().join("error.log"))
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()?;
            let mut nginx = Nginx {
                child,
                dir,
                addr,
                https,
            };
            match nginx.wait_ready() {
                Ok(()) => return Ok(nginx),
                Err(error) => {
                    last_error = Some(error);
                    let _ = nginx.child.kill();
                    let _ = nginx.child.wait();
                    if !nginx.error_log().contains("Address already in use") {
                        break;
                    }
                }
            }
        }
        Err(last_error.unwrap_or_else(|| io::Error::other("nginx did not start")))
    }

    fn wait_ready(&mut self) -> io::Result<()> {
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            if let Some(status) = self.child.try_wait()? {
                return Err(io::Error::other(format!(
                    "nginx exited with {status}: {}",
                    self.error_log().trim()
                )));
            }
            if TcpStream::connect_timeout(&self.addr, Duration::from_millis(200)).is_ok() {
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!(
                        "nginx did not accept on {} within {START_TIMEOUT:?}: {}",
                        self.addr,
                        self.error_log().trim()
                    ),
                ));
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// The address served (`127.0.0.1:PORT`).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://127.0.0.1:PORT` (`https://` from [`Nginx::start_https`]).
    pub fn base_url(&self) -> String {
        let scheme = if self.https { "https" } else { "http" };
        format!("{scheme}://{}", self.addr)
    }

    /// The PEM file of the CA that signed the certificate of an nginx from
    /// [`Nginx::start_https`] (`None` for plain HTTP).
    pub fn ca_file(&self) -> Option<PathBuf> {
        self.https.then(|| self.dir.path().join("ca.pem"))
    }

    /// The URL of a path under the root: `base_url() + path` (`path` starts with `/`).
    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base_url())
    }

    /// The lines of the access log so far, one per finished request, in the
    /// [`ACCESS_LOG_FORMAT`]. nginx writes a line when it finishes a request, which can be a
    /// moment after the client has read the response.
    pub fn access_log(&self) -> Vec<String> {
        std::fs::read_to_string(self.dir.path().join("access.log"))
            .map(|text| text.lines().map(str::to_owned).collect())
            .unwrap_or_default()
    }

    /// The text of nginx's error log so far.
    pub fn error_log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("error.log")).unwrap_or_default()
    }
}

impl Drop for Nginx {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A path as an nginx string literal.
fn quoted(path: &Path) -> String {
    let text = path.to_string_lossy();
    format!("\"{}\"", text.replace('\\', "\\\\").replace('"', "\\\""))
}

fn config_text(dir: &Path, root: &Path, port: u16, build: &str, https: bool) -> String {
    let mut temp_paths = String::new();
    for (directive, module) in TEMP_PATHS {
        if module.is_empty() || !build.contains(&format!("--without-{module}")) {
            let name = directive.trim_end_matches("_path");
            temp_paths.push_str(&format!("    {directive} {};\n", quoted(&dir.join(name))));
        }
    }
    // nginx 1.22 (Debian 12) names HTTP/2 on the `listen` line; `http2 on;` came in 1.25.
    let listen = if https {
        format!(
            "listen 127.0.0.1:{port} ssl http2;
        ssl_certificate {};
        ssl_certificate_key {};",
            quoted(&dir.join("cert.pem")),
            quoted(&dir.join("key.pem"))
        )
    } else {
        format!("listen 127.0.0.1:{port};")
    };
    format!(
        "daemon off;
master_process off;
worker_processes 1;
pid {pid};
error_log {error_log} warn;
events {{
    worker_connections 256;
}}
http {{
    log_format karu '{ACCESS_LOG_FORMAT}';
    access_log {access_log} karu;
{temp_paths}    default_type application/octet-stream;
    etag on;
    keepalive_requests 10000;
    server {{
        {listen}
        server_name localhost;
        root {root};
        location / {{
        }}
    }}
}}
",
        pid = quoted(&dir.join("nginx.pid")),
        error_log = quoted(&dir.join("error.log")),
        access_log = quoted(&dir.join("access.log")),
        root = quoted(root),
    )
}
