//! A plain blocking HTTP/1.1 client written by hand over `std::net::TcpStream` (optionally
//! wrapped in rustls), so the tests see exactly what went over the wire: status, headers,
//! how many body bytes arrived, and how the body ended (complete, EOF, reset).

#![allow(dead_code)]

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};

pub(crate) mod sigv4;
pub(crate) mod xml;

/// How a response body ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum BodyEnd {
    /// All `Content-Length` bytes arrived.
    Complete,
    /// The connection ended (EOF) before `Content-Length` bytes.
    Eof,
    /// Reading failed with this error before `Content-Length` bytes.
    Error(io::ErrorKind),
}

/// A response as read from the wire.
#[derive(Debug)]
pub(crate) struct Response {
    pub(crate) status: u16,
    /// Header names in lower case, in order.
    pub(crate) headers: Vec<(String, String)>,
    pub(crate) body: Vec<u8>,
    /// Body bytes received (equals `body.len()` unless the body was discarded).
    pub(crate) received: u64,
    pub(crate) end: BodyEnd,
}

impl Response {
    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    pub(crate) fn content_length(&self) -> Option<u64> {
        self.header("content-length").and_then(|v| v.parse().ok())
    }
}

trait Stream: Read + Write + Send {}
impl<T: Read + Write + Send> Stream for T {}

/// One HTTP/1.1 connection.
pub(crate) struct Client {
    stream: Box<dyn Stream>,
    tcp: TcpStream,
    buf: Vec<u8>,
}

pub(crate) fn client_tls_config(ca_pem: &str) -> Arc<rustls::ClientConfig> {
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(ca_pem.as_bytes()) {
        roots
            .add(cert.expect("CA PEM parses"))
            .expect("CA is accepted");
    }
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("TLS versions")
        .with_root_certificates(roots)
        .with_no_client_auth();
    Arc::new(config)
}

impl Client {
    pub(crate) fn connect(addr: SocketAddr) -> Client {
        let tcp = TcpStream::connect(addr).expect("connect to the server");
        tcp.set_nodelay(true).unwrap();
        tcp.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        Client {
            stream: Box::new(tcp.try_clone().unwrap()),
            tcp,
            buf: Vec::new(),
        }
    }

    /// Connects with TLS, trusting only `ca_pem`, checking the name `server_name`.
    pub(crate) fn connect_tls(
        addr: SocketAddr,
        ca_pem: &str,
        server_name: &str,
    ) -> io::Result<Client> {
        Self::connect_tls_with(addr, client_tls_config(ca_pem), server_name)
    }

    pub(crate) fn connect_tls_with(
        addr: SocketAddr,
        config: Arc<rustls::ClientConfig>,
        server_name: &str,
    ) -> io::Result<Client> {
        let tcp = TcpStream::connect(addr)?;
        tcp.set_nodelay(true)?;
        tcp.set_read_timeout(Some(Duration::from_secs(20)))?;
        let name = ServerName::try_from(server_name.to_owned()).map_err(io::Error::other)?;
        let mut conn = rustls::ClientConnection::new(config, name).map_err(io::Error::other)?;
        let mut sock = tcp.try_clone()?;
        while conn.is_handshaking() {
            conn.complete_io(&mut sock)?;
        }
        Ok(Client {
            stream: Box::new(rustls::StreamOwned::new(conn, sock)),
            tcp,
            buf: Vec::new(),
        })
    }

    pub(crate) fn set_read_timeout(&self, timeout: Option<Duration>) {
        self.tcp.set_read_timeout(timeout).unwrap();
    }

    pub(crate) fn send(
        &mut self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
    ) -> io::Result<()> {
        let mut text = format!("{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n");
        for (name, value) in headers {
            text.push_str(&format!("{name}: {value}\r\n"));
        }
        text.push_str("\r\n");
        self.stream.write_all(text.as_bytes())?;
        self.stream.flush()
    }

    /// Sends a request with a body (`Content-Length` is added).
    pub(crate) fn send_with_body(
        &mut self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: &[u8],
    ) -> io::Result<()> {
        let mut text = format!(
            "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: {}\r\n",
            body.len()
        );
        for (name, value) in headers {
            text.push_str(&format!("{name}: {value}\r\n"));
        }
        text.push_str("\r\n");
        self.stream.write_all(text.as_bytes())?;
        self.stream.write_all(body)?;
        self.stream.flush()
    }

    fn fill(&mut self) -> io::Result<usize> {
        let mut chunk = [0u8; 64 * 1024];
        let n = self.stream.read(&mut chunk)?;
        self.buf.extend_from_slice(&chunk[..n]);
        Ok(n)
    }

    /// Reads a status line and headers.
    pub(crate) fn read_head(&mut self) -> io::Result<(u16, Vec<(String, String)>)> {
        let end = loop {
            if let Some(i) = self.buf.windows(4).position(|w| w == b"\r\n\r\n") {
                break i;
            }
            if self.fill()? == 0 {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "connection closed before a response head",
                ));
            }
        };
        let head = String::from_utf8(self.buf[..end].to_vec()).expect("ASCII head");
        self.buf.drain(..end + 4);
        let mut lines = head.split("\r\n");
        let status_line = lines.next().unwrap();
        let status = status_line
            .split(' ')
            .nth(1)
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| panic!("bad status line {status_line:?}"));
        let headers = lines
            .map(|line| {
                let (n, v) = line.split_once(':').expect("header line");
                (n.trim().to_ascii_lowercase(), v.trim().to_owned())
            })
            .collect();
        Ok((status, headers))
    }

    /// Reads a response, handing body bytes to `sink` as they arrive.
    pub(crate) fn read_response_with(
        &mut self,
        head_request: bool,
        sink: &mut dyn FnMut(&[u8]),
    ) -> io::Result<Response> {
        let (status, headers) = self.read_head()?;
        let mut response = Response {
            status,
            headers,
            body: Vec::new(),
            received: 0,
            end: BodyEnd::Complete,
        };
        let want = if head_request {
            0
        } else {
            response.content_length().expect("Content-Length")
        };
        while response.received < want {
            if self.buf.is_empty() {
                match self.fill() {
                    Ok(0) => {
                        response.end = BodyEnd::Eof;
                        break;
                    }
                    Ok(_) => {}
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    Err(e) => {
                        response.end = BodyEnd::Error(e.kind());
                        break;
                    }
                }
            }
            let take = self.buf.len().min((want - response.received) as usize);
            sink(&self.buf[..take]);
            self.buf.drain(..take);
            response.received += take as u64;
        }
        Ok(response)
    }

    pub(crate) fn read_response(&mut self, head_request: bool) -> io::Result<Response> {
        let mut body = Vec::new();
        let mut response =
            self.read_response_with(head_request, &mut |b| body.extend_from_slice(b))?;
        response.body = body;
        Ok(response)
    }

    pub(crate) fn request(
        &mut self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
    ) -> io::Result<Response> {
        self.send(method, path, headers)?;
        self.read_response(method == "HEAD")
    }

    pub(crate) fn get(&mut self, path: &str) -> Response {
        self.request("GET", path, &[]).expect("GET")
    }

    pub(crate) fn get_range(&mut self, path: &str, range: &str) -> Response {
        self.request("GET", path, &[("Range", range)])
            .expect("GET with Range")
    }

    /// Reads until EOF or an error, returning the bytes read and how reading ended.
    pub(crate) fn read_to_end(&mut self) -> (Vec<u8>, BodyEnd) {
        let mut out = std::mem::take(&mut self.buf);
        let mut chunk = [0u8; 16 * 1024];
        loop {
            match self.stream.read(&mut chunk) {
                Ok(0) => return (out, BodyEnd::Eof),
                Ok(n) => out.extend_from_slice(&chunk[..n]),
                Err(e) => return (out, BodyEnd::Error(e.kind())),
            }
        }
    }
}

/// One request on a new connection.
pub(crate) fn request(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
) -> Response {
    Client::connect(addr)
        .request(method, path, headers)
        .expect("request")
}

/// Polls `done` until it holds; panics after a minute, which only a hang reaches.
pub(crate) fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let give_up = Instant::now() + Duration::from_secs(60);
    while !done() {
        assert!(Instant::now() < give_up, "never happened: {what}");
        std::thread::sleep(Duration::from_millis(1));
    }
}
