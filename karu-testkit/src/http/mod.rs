//! An HTTP(S) object server for tests and benchmarks, with a request log and a fault plan.
//!
//! [`MockServer`] serves objects (stored bytes, or [virtual](MockServer::insert_virtual) ones
//! generated from the offset) the way a real object store does: single byte ranges answered
//! with 206 and `Content-Range`, 416 past the end, `If-Match` against strong ETags, 404 for a
//! missing object. Every request lands in a [log](MockServer::requests) that tests assert on;
//! [`FaultRule`]s make chosen requests misbehave; a per-request latency and a shared bandwidth
//! cap model a link (see `xtask/bench/README.md`); a [`Gate`] can answer requests before the object
//! handler (the hook for signature-checking cloud mocks), and a [`Route`] can answer requests
//! the object store does not serve (the hook for fake metadata and token endpoints). Both see
//! the request body (up to [`MAX_REQUEST_BODY`] bytes), so they can answer `POST` and `PUT`.
//!
//! The server runs on its own thread with a two-worker tokio runtime, so blocking and async
//! tests alike can use it; dropping the [`MockServer`] stops it and closes every connection.
//!
//! Each request goes through these steps, in order:
//! 1. it is logged, and the fault rules are matched (their counters advance);
//! 2. the latency (server latency plus any [`Fault::Latency`]) passes, on a precise timer;
//! 3. [`Fault::NeverAnswer`] stops here; a request over a [`Fault::ThrottleAbove`] limit gets
//!    its throttled answer;
//! 4. the request body is read (more than [`MAX_REQUEST_BODY`] bytes get 413);
//! 5. the [`Gate`], if one is set, may answer;
//! 6. [`Fault::Status`] / [`Fault::OversizedErrorBody`] answer with an error;
//! 7. the [`Route`], if one is set, may answer (body faults apply to its answer too);
//! 8. methods other than GET and HEAD get 405;
//! 9. [`Fault::Barrier`] requests wait for their round and their turn; [`Fault::ChangeEtag`]
//!    gives the object a new ETag, [`Fault::ChangeContent`] new bytes and a new ETag; a
//!    missing object gets 404 (the object is looked up at [`Gate::object_path`] if the gate
//!    names one, else at the request path);
//! 10. `If-Match` is checked (412), then the `Range` (206, 200, or 416 with
//!     `Content-Range: bytes */SIZE` and, as S3 does, `<ActualObjectSize>` in its body);
//! 11. the body is streamed in 64 KiB frames, paced by the bandwidth cap and the body faults
//!     ([`Fault::CloseDelimited`] sends it without a length, ended by closing the connection).
//!
//! Connections can be held silent before any of this ([`MockServer::silence_connections`]):
//! accepted, read from, and never answered (a TLS handshake that never completes).
//!
//! Error answers of the server itself are small S3-style XML documents
//! (`<Error><Code>NoSuchKey</Code><Message>..</Message><Resource>..</Resource><RequestId>..</RequestId></Error>`,
//! `Content-Type: application/xml`, with the same id in an `x-amz-request-id` header).
//!
//! ```
//! use karu_testkit::{Fault, FaultRule, MockServer};
//!
//! let server = MockServer::start();
//! server.insert("/data/a.bin", vec![7u8; 1000]);
//! server.add_fault(FaultRule::new(Fault::Status { code: 503, retry_after: Some("1".into()) }).times(1));
//! let url = server.url("/data/a.bin");
//! assert!(url.starts_with("http://127.0.0.1:"));
//! // ... run the client against `url`, then assert on the evidence:
//! assert!(server.requests().iter().all(|r| r.path == "/data/a.bin"));
//! ```

mod barrier;
mod body;
mod conn;
mod fault;
mod handler;
mod pattern;
mod range;
mod server;
mod state;
pub(crate) mod timer;
pub(crate) mod tls;

use std::fmt;
use std::io;
use std::net::{Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;

pub use fault::{Fault, FaultRule, PARETO_CAP};
pub use pattern::{fill_pattern, pattern, pattern_byte, pattern_version, version_of_pattern};

use server::{Protocol, Running};
use state::{Data, Shared};

/// The request path of object `name` on a plain HTTP server: `/` and the name with every
/// byte but ASCII letters, digits, `-._~` and `/` percent-encoded (`a b+c` is `/a%20b%2Bc`),
/// the one form SigV4 signs. The mock matches the raw request path, so an object served
/// there is found by a client that encodes names so; the testkit's own encoder, not Karu's,
/// so that a wrong encoding in Karu does not agree with it.
pub fn url_path(name: &str) -> String {
    format!("/{}", crate::s3::sigv4::uri_encode(name.as_bytes(), true))
}

/// One request as the server saw it, and what it answered (see [`MockServer::requests`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestRecord {
    /// The method, as sent (`GET`, `HEAD`).
    pub method: String,
    /// The path of the request target, as sent (still percent-encoded).
    pub path: String,
    /// The query string without the `?`, if any.
    pub query: Option<String>,
    /// The request headers, names in lower case, in the order received (repeated names
    /// grouped at their first position).
    pub headers: Vec<(String, String)>,
    /// The raw `Range` header.
    pub range: Option<String>,
    /// The range if the header is one closed range `bytes=a-b` (both inclusive), else `None`.
    pub byte_range: Option<(u64, u64)>,
    /// The status sent; 0 while (or if) no response was sent, e.g. [`Fault::NeverAnswer`].
    pub status: u16,
    /// Body bytes handed to the connection for this response (0 for HEAD).
    pub body_bytes: u64,
    /// Id of the TCP connection that carried the request (1, 2, ... in accept order): equal
    /// ids mean the client reused a connection.
    pub connection: u64,
    /// The faults applied to this request, `Debug`-formatted and joined with `" + "`.
    pub fault: Option<String>,
    /// The wait added before the response head: the link latency in force when the request
    /// arrived plus every [`Fault::Latency`] applied to it (zero until the wait begins).
    pub latency: Duration,
    /// Body bytes of this response sent under the shared bandwidth cap
    /// ([`MockServer::set_bandwidth`]); those sent while no cap was set are not counted.
    pub paced_bytes: u64,
}

impl RequestRecord {
    /// The first value of a request header (name case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// One line for messages: method, path, range, status, body bytes, `If-Match`, connection and
/// faults.
impl fmt::Display for RequestRecord {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} {} range={} status={} body={} if-match={} conn={} fault={}",
            self.method,
            self.path,
            self.range.as_deref().unwrap_or("-"),
            self.status,
            self.body_bytes,
            self.header("if-match").unwrap_or("-"),
            self.connection,
            self.fault.as_deref().unwrap_or("-"),
        )
    }
}

/// The most request body bytes the server reads; a longer body is answered with 413.
pub const MAX_REQUEST_BODY: usize = 64 * 1024;

/// What a [`Gate`] or a [`Route`] sees of a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestHead {
    /// The method, as sent.
    pub method: String,
    /// The path of the request target, as sent.
    pub path: String,
    /// The query string without the `?`, if any.
    pub query: Option<String>,
    /// The request headers, names in lower case, in the order received.
    pub headers: Vec<(String, String)>,
    /// The request body (empty for most `GET`s; at most [`MAX_REQUEST_BODY`] bytes).
    pub body: Bytes,
}

impl RequestHead {
    /// The first value of a request header (name case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// The answer of a [`Gate`] that refuses a request, or of a [`Route`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GateResponse {
    /// The status code sent.
    pub status: u16,
    /// Extra response headers (`Content-Length` is always set by the server).
    pub headers: Vec<(String, String)>,
    /// The response body.
    pub body: Bytes,
}

impl GateResponse {
    /// A response with this status and body and no extra headers.
    pub fn new(status: u16, body: impl Into<Bytes>) -> Self {
        Self {
            status,
            headers: Vec::new(),
            body: body.into(),
        }
    }

    /// Adds a response header.
    pub fn header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.headers.push((name.into(), value.into()));
        self
    }
}

/// A check run on every request after the latency and before faulty statuses and the object
/// handler: `Some` answers the request (e.g. 403 for a bad signature), `None` lets it through.
///
/// It runs on the server's runtime for every request, so it must be cheap and must not block.
///
/// ```
/// use karu_testkit::{Gate, GateResponse, RequestHead};
///
/// #[derive(Debug)]
/// struct NeedsAuth;
/// impl Gate for NeedsAuth {
///     fn check(&self, request: &RequestHead) -> Option<GateResponse> {
///         match request.header("authorization") {
///             Some(_) => None,
///             None => Some(GateResponse::new(403, "<Error><Code>AccessDenied</Code></Error>")),
///         }
///     }
/// }
/// ```
pub trait Gate: Send + Sync + fmt::Debug {
    /// Decides whether the server answers `request` here.
    fn check(&self, request: &RequestHead) -> Option<GateResponse>;

    /// Where the object handler looks up a request that [`check`](Gate::check) let through:
    /// `Some(path)` names the stored object (for example the S3 mock's canonical encoding of a
    /// key that a client percent-encoded differently); `None` (the default) uses the request
    /// path as sent. Fault rules and the request log always see the path as sent.
    fn object_path(&self, request: &RequestHead) -> Option<String> {
        let _ = request;
        None
    }

    /// Headers the object handler adds to its answer (200, 206 or 416) to a request that
    /// [`check`](Gate::check) let through, before the body faults apply: a service's own
    /// metadata (the GCS mock's `x-goog-stored-content-encoding`, `x-goog-generation`, and
    /// `Content-Encoding: gzip` for an object stored compressed). Default: none.
    fn object_headers(&self, request: &RequestHead) -> Vec<(String, String)> {
        let _ = request;
        Vec::new()
    }
}

/// A handler for requests the object store does not serve (token and metadata endpoints, form
/// `POST`s): run after the [`Gate`] and the status faults, before the object handler. `Some`
/// answers the request, `None` passes it on (to 405 for methods other than GET and HEAD, else to
/// the objects).
///
/// Body faults ([`Fault::CutBodyAfter`], [`Fault::ResetAfter`], [`Fault::Trickle`]) apply to
/// its answers too. Like a gate, it runs on the server's runtime and must not block.
///
/// ```
/// use karu_testkit::{GateResponse, RequestHead, Route};
///
/// #[derive(Debug)]
/// struct Echo;
/// impl Route for Echo {
///     fn respond(&self, request: &RequestHead) -> Option<GateResponse> {
///         (request.method == "POST" && request.path == "/echo")
///             .then(|| GateResponse::new(200, request.body.clone()))
///     }
/// }
/// ```
pub trait Route: Send + Sync + fmt::Debug {
    /// Answers `request`, or returns `None` to let the server go on.
    fn respond(&self, request: &RequestHead) -> Option<GateResponse>;
}

/// Options of a [`MockServer`], from [`MockServer::builder`].
#[derive(Debug, Clone, Default)]
pub struct MockServerBuilder {
    tls: bool,
    http2: bool,
    latency: Duration,
    bandwidth: Option<u64>,
}

impl MockServerBuilder {
    /// Serve HTTPS with a generated CA ([`MockServer::ca_pem`]); default off.
    pub fn tls(mut self, on: bool) -> Self {
        self.tls = on;
        self
    }

    /// Also serve HTTP/2: offered by ALPN over TLS, accepted with prior knowledge over plain
    /// TCP; default off (HTTP/1.1 only).
    pub fn http2(mut self, on: bool) -> Self {
        self.http2 = on;
        self
    }

    /// Delay before the response headers of every request; default none.
    pub fn latency(mut self, latency: Duration) -> Self {
        self.latency = latency;
        self
    }

    /// Cap on body bytes per second, shared by all connections; default none.
    pub fn bandwidth(mut self, bytes_per_sec: Option<u64>) -> Self {
        self.bandwidth = bytes_per_sec;
        self
    }

    /// Binds `127.0.0.1` on a free port and starts serving.
    pub fn start(self) -> io::Result<MockServer> {
        let listener = bind()?;
        let addr = listener.local_addr()?;
        let (timer, timer_thread) = timer::Timer::start(format!("kmock-{}-t", addr.port()))?;
        let shared = Arc::new(Shared::new(timer));
        shared.set_latency(self.latency);
        shared.set_bandwidth(self.bandwidth);
        let (acceptor, ca) = match self.tls {
            true => {
                let tls = tls::generate(self.http2)?;
                let mut file = tempfile::Builder::new()
                    .prefix("karu-mock-ca-")
                    .suffix(".pem")
                    .tempfile()?;
                io::Write::write_all(&mut file, tls.ca_pem.as_bytes())?;
                (Some(tls.acceptor), Some((tls.ca_pem, file)))
            }
            false => (None, None),
        };
        let running = server::spawn(
            listener,
            shared.clone(),
            Protocol {
                tls: acceptor,
                http2: self.http2,
            },
            timer_thread,
        )?;
        Ok(MockServer {
            shared,
            addr,
            http2: self.http2,
            ca,
            running,
        })
    }
}

fn bind() -> io::Result<std::net::TcpListener> {
    use socket2::{Domain, Socket, Type};
    let socket = Socket::new(Domain::IPV4, Type::STREAM, None)?;
    socket.bind(&SocketAddr::from((Ipv4Addr::LOCALHOST, 0)).into())?;
    // A deep backlog: benchmarks open many connections at once.
    socket.listen(1024)?;
    Ok(socket.into())
}

/// A mock object server on `127.0.0.1`, running until dropped.
///
/// A test first starts one ([`MockServer::start`] or [`MockServer::builder`]), puts objects in
/// it ([`insert`](MockServer::insert), [`insert_virtual`](MockServer::insert_virtual)),
/// optionally adds [`FaultRule`]s, points the client at [`url`](MockServer::url), and then
/// asserts on [`requests`](MockServer::requests).
///
/// ```
/// use std::io::{Read, Write};
/// use karu_testkit::{MockServer, pattern};
///
/// let server = MockServer::start();
/// server.insert_virtual("/big.bin", 1 << 30);
///
/// let mut tcp = std::net::TcpStream::connect(server.addr()).unwrap();
/// tcp.write_all(b"GET /big.bin HTTP/1.1\r\nHost: x\r\nRange: bytes=10-19\r\nConnection: close\r\n\r\n")
///     .unwrap();
/// let mut response = Vec::new();
/// tcp.read_to_end(&mut response).unwrap();
/// assert!(response.starts_with(b"HTTP/1.1 206"));
/// assert!(response.ends_with(&pattern(10, 10)));
///
/// let log = server.requests();
/// assert_eq!(log.len(), 1);
/// assert_eq!((log[0].byte_range, log[0].status, log[0].body_bytes), (Some((10, 19)), 206, 10));
/// ```
pub struct MockServer {
    shared: Arc<Shared>,
    addr: SocketAddr,
    http2: bool,
    ca: Option<(String, tempfile::NamedTempFile)>,
    running: Running,
}

impl fmt::Debug for MockServer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MockServer")
            .field("base_url", &self.base_url())
            .field("http2", &self.http2)
            .field("requests", &self.request_count())
            .finish_non_exhaustive()
    }
}

impl MockServer {
    /// Starts a plain HTTP/1.1 server with no latency and no bandwidth cap.
    ///
    /// # Panics
    /// If no port can be bound on `127.0.0.1` (this is a test helper).
    pub fn start() -> MockServer {
        Self::builder().start().unwrap_or_else(|e| {
            panic!("karu-testkit: cannot start the mock server on 127.0.0.1: {e}")
        })
    }

    /// Options for a server: TLS, HTTP/2, latency, bandwidth.
    pub fn builder() -> MockServerBuilder {
        MockServerBuilder::default()
    }

    /// The address served (`127.0.0.1:PORT`).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://127.0.0.1:PORT`, or `https://...` with TLS.
    pub fn base_url(&self) -> String {
        let scheme = if self.ca.is_some() { "https" } else { "http" };
        format!("{scheme}://{}", self.addr)
    }

    /// The URL of a path: `base_url() + path` (`path` starts with `/`).
    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base_url())
    }

    /// The PEM of the CA that signed the server certificate (HTTPS servers only).
    pub fn ca_pem(&self) -> Option<String> {
        self.ca.as_ref().map(|(pem, _)| pem.clone())
    }

    /// A file holding [`ca_pem`](MockServer::ca_pem), deleted when the server is dropped.
    pub fn ca_file(&self) -> Option<PathBuf> {
        self.ca.as_ref().map(|(_, file)| file.path().to_owned())
    }

    /// Serves `body` at `path` (matched against the raw request path), replacing any object
    /// there. The object gets a new strong ETag `"VERSION-LEN"` (both hex), different on every
    /// insert.
    pub fn insert(&self, path: &str, body: impl Into<Bytes>) {
        self.shared.insert(path, Data::Stored(body.into()));
    }

    /// Serves a `size`-byte object whose byte `i` is [`pattern_byte`]`(i)`, generated as it is
    /// sent and never held in memory (objects of many GiB are fine).
    pub fn insert_virtual(&self, path: &str, size: u64) {
        self.shared.insert(path, Data::Virtual(size));
    }

    /// Removes the object at `path` (requests then get 404).
    pub fn remove(&self, path: &str) {
        self.shared.remove(path);
    }

    /// Sets the exact `ETag` header value of an object (e.g. `"\"v1\""`, or `"W/\"x\""` for a
    /// weak one), or `None` to send no `ETag`. No effect if there is no object at `path`.
    ///
    /// # Panics
    /// If the value is not a valid header value.
    pub fn set_etag(&self, path: &str, etag: Option<&str>) {
        self.shared.set_etag(path, etag);
    }

    /// The request log, in arrival order.
    pub fn requests(&self) -> Vec<RequestRecord> {
        self.shared.requests()
    }

    /// The request log, in arrival order, clearing it.
    pub fn take_requests(&self) -> Vec<RequestRecord> {
        self.shared.take_requests()
    }

    /// How many requests the log holds.
    pub fn request_count(&self) -> usize {
        self.shared.request_count()
    }

    /// Adds a rule after the existing ones.
    pub fn add_fault(&self, rule: FaultRule) {
        self.shared.add_fault(rule);
    }

    /// Removes every fault rule.
    pub fn clear_faults(&self) {
        self.shared.clear_faults();
    }

    /// Sets the delay before the response headers of every request from now on.
    pub fn set_latency(&self, latency: Duration) {
        self.shared.set_latency(latency);
    }

    /// Sets (or with `None` removes) the bandwidth cap shared by all connections.
    pub fn set_bandwidth(&self, bytes_per_sec: Option<u64>) {
        self.shared.set_bandwidth(bytes_per_sec);
    }

    /// Installs (or with `None` removes) the [`Gate`] run on every request.
    pub fn set_gate(&self, gate: Option<Arc<dyn Gate>>) {
        self.shared.set_gate(gate);
    }

    /// The [`Gate`] run on every request, if any: a test that changes how a service mock serves
    /// one object wraps it (answering what the wrapped gate answers) and installs the wrapper
    /// with [`set_gate`](MockServer::set_gate).
    pub fn gate(&self) -> Option<Arc<dyn Gate>> {
        self.shared.gate()
    }

    /// Answers suffix ranges (`bytes=-n`) with `200` and the whole object, as Azure Blob
    /// Storage does (`on`), or as ranges (the default).
    pub fn set_ignore_suffix_ranges(&self, on: bool) {
        self.shared.set_ignore_suffix_ranges(on);
    }

    /// Installs (or with `None` removes) the [`Route`] run on every request the gate and the
    /// status faults let through.
    pub fn set_route(&self, route: Option<Arc<dyn Route>>) {
        self.shared.set_route(route);
    }

    /// Holds the next `n` connections the server accepts open and never answers them (`0`
    /// stops it; `u64::MAX` holds every later one): the server reads and discards whatever
    /// the client sends, so a TLS client waits forever for the answer to its ClientHello and
    /// a plain HTTP client for its response. They count in
    /// [`connections_accepted`](MockServer::connections_accepted); no request is read from
    /// them, so none is logged. The server closes them when it is dropped.
    ///
    /// ```
    /// use std::io::{Read, Write};
    /// use std::time::Duration;
    /// use karu_testkit::MockServer;
    ///
    /// let server = MockServer::start();
    /// server.insert("/a", vec![1u8; 10]);
    /// server.silence_connections(1);
    /// let mut silent = std::net::TcpStream::connect(server.addr()).unwrap();
    /// silent.write_all(b"GET /a HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
    /// silent.set_read_timeout(Some(Duration::from_millis(100))).unwrap();
    /// assert!(silent.read(&mut [0u8; 16]).is_err(), "no answer");
    /// // The next connection is served.
    /// let mut tcp = std::net::TcpStream::connect(server.addr()).unwrap();
    /// tcp.write_all(b"GET /a HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").unwrap();
    /// let mut answer = Vec::new();
    /// tcp.read_to_end(&mut answer).unwrap();
    /// assert!(answer.starts_with(b"HTTP/1.1 200"));
    /// assert_eq!((server.connections_accepted(), server.request_count()), (2, 1));
    /// ```
    pub fn silence_connections(&self, n: u64) {
        self.shared.set_silent(n);
    }

    /// Ends every connection gracefully once it has received `n` requests (`None`, the
    /// default: never), as a server with a per-connection request limit does (nginx's
    /// `keepalive_requests`): over HTTP/1.1 the `n`th answer is the connection's last
    /// (`Connection: close`); over HTTP/2 the server shuts down gracefully (RFC 9113, 6.8:
    /// GOAWAY, then after a PING's round trip GOAWAY with the last stream it accepted), so a
    /// request the client sent before it read the first GOAWAY is still served on that
    /// connection. Applies to requests received from now on; `Some(0)` is the same as `None`.
    pub fn set_requests_per_connection(&self, n: Option<u64>) {
        self.shared.set_requests_per_connection(n.unwrap_or(0));
    }

    /// TCP connections accepted so far.
    pub fn connections_accepted(&self) -> u64 {
        self.shared.connections_accepted()
    }

    /// Body bytes sent so far, all requests together.
    pub fn bytes_sent(&self) -> u64 {
        self.shared.bytes_sent()
    }

    /// The most requests that were in flight at once since the server started or since the
    /// last [`reset_max_in_flight`](MockServer::reset_max_in_flight): a request counts from
    /// the moment its head was read until the last byte of its response was handed to the
    /// connection (or the response was abandoned), so a client that waits for each response
    /// before sending another never raises it above its own number of requests in flight.
    ///
    /// ```
    /// use karu_testkit::MockServer;
    ///
    /// let server = MockServer::start();
    /// assert_eq!(server.max_in_flight(), 0);
    /// // ... run a client with at most 8 requests in flight ...
    /// assert!(server.max_in_flight() <= 8);
    /// ```
    pub fn max_in_flight(&self) -> u64 {
        self.shared.max_in_flight()
    }

    /// The requests in flight now (counted as for
    /// [`max_in_flight`](MockServer::max_in_flight)): a request held by a fault whose client
    /// went away stops counting once the server notices the closed connection.
    pub fn in_flight(&self) -> u64 {
        self.shared.in_flight()
    }

    /// Starts a new high-water mark for [`max_in_flight`](MockServer::max_in_flight) from
    /// the requests in flight now.
    pub fn reset_max_in_flight(&self) {
        self.shared.reset_max_in_flight();
    }

    /// The requests waiting out their latency now (the link latency and any
    /// [`Fault::Latency`]; see [`RequestRecord::latency`]): evidence that waits overlap,
    /// without timing them.
    pub fn in_latency(&self) -> u64 {
        self.shared.in_latency()
    }
}

impl Drop for MockServer {
    fn drop(&mut self) {
        self.running.stop();
    }
}
