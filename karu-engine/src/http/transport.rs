//! The transport: one rustls configuration for the client, a DNS cache and the connector (TCP
//! and TLS under one connect timeout). The pool of connections is [`client`](super::client).

use std::collections::HashMap;
use std::fmt;
use std::future::Future;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use http::Uri;
use hyper::rt::{Read, ReadBuf, ReadBufCursor, Write};
use hyper_rustls::{HttpsConnector, MaybeHttpsStream};
use hyper_util::client::legacy::connect::dns::Name;
use hyper_util::client::legacy::connect::{Connected, Connection, HttpConnector};
use hyper_util::rt::TokioIo;
use karu_config::read_regular_file;
use karu_config::{HttpSettings, HttpVersion};
use parking_lot::Mutex;
use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;
use tokio::sync::OwnedSemaphorePermit;
use tower_service::Service as _;

use crate::sdk::{Error, Status};

pub(crate) type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// The client's one TLS configuration: aws-lc-rs, platform roots plus an optional CA file,
/// ALPN by the HTTP version policy. Shared by every loop, so TLS sessions resume across loops.
///
/// Built at the first `https://` connection, not when the client starts: loading the platform's
/// roots reads the system bundle and every certificate file beside it and parses them, work
/// that the first read of a client that only speaks plain `http://` would pay for nothing. The CA
/// file (`http.ca_file`), the caller's own, is still read when the client is built, so a missing or
/// unusable one fails the build.
pub(crate) struct TlsConfig {
    /// The certificates of `http.ca_file`, if set.
    extra: Vec<CertificateDer<'static>>,
    version: HttpVersion,
    built: tokio::sync::OnceCell<Arc<rustls::ClientConfig>>,
}

impl TlsConfig {
    /// The configuration for `settings`: the CA file read and checked now, the rest at the
    /// first TLS connection.
    pub(crate) fn new(settings: &HttpSettings) -> Result<TlsConfig, Error> {
        let tls = TlsConfig {
            extra: ca_file(settings)?,
            version: settings.version,
            built: tokio::sync::OnceCell::new(),
        };
        // The builder's own checks, now, with no roots: building later cannot fail.
        tls.build(rustls::RootCertStore::empty())?;
        Ok(tls)
    }

    /// The configuration, built on the first call (on a blocking thread: it reads files);
    /// every caller gets the same one.
    pub(crate) async fn get(self: &Arc<Self>) -> Result<Arc<rustls::ClientConfig>, BoxError> {
        let config = self
            .built
            .get_or_try_init(|| {
                let this = Arc::clone(self);
                async move {
                    let built = tokio::task::spawn_blocking(move || this.with_platform_roots())
                        .await
                        .map_err(|e| BoxError::from(format!("loading the TLS roots: {e}")))?;
                    built.map_err(BoxError::from)
                }
            })
            .await?;
        Ok(Arc::clone(config))
    }

    /// The platform's roots and the CA file's certificates, and the configuration with them.
    fn with_platform_roots(&self) -> Result<Arc<rustls::ClientConfig>, Error> {
        let mut roots = rustls::RootCertStore::empty();
        for cert in rustls_native_certs::load_native_certs().certs {
            // A platform store may hold certificates rustls cannot use; skip those.
            let _ = roots.add(cert);
        }
        self.build(roots)
    }

    fn build(&self, mut roots: rustls::RootCertStore) -> Result<Arc<rustls::ClientConfig>, Error> {
        for cert in &self.extra {
            // Checked when the file was read.
            let _ = roots.add(cert.clone());
        }
        let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
        let mut config = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| Error::internal(format!("TLS configuration: {e}")))?
            .with_root_certificates(roots)
            .with_no_client_auth();
        config.alpn_protocols = match self.version {
            HttpVersion::Http2 => vec![b"h2".to_vec()],
            HttpVersion::Auto => vec![b"h2".to_vec(), b"http/1.1".to_vec()],
            _ => vec![b"http/1.1".to_vec()],
        };
        Ok(Arc::new(config))
    }
}

impl fmt::Debug for TlsConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TlsConfig")
            .field("ca_file_certificates", &self.extra.len())
            .field("version", &self.version)
            .field("built", &self.built.initialized())
            .finish()
    }
}

/// The largest CA file Karu reads: a bundle of every public root is under 1 MiB.
const CA_FILE_MAX: u64 = 16 << 20;

/// The certificates of `http.ca_file`, if set: a file that cannot be read (or is no regular
/// file of at most [`CA_FILE_MAX`]: [`read_regular_file`]), holds none, or holds one rustls
/// cannot use is an error.
pub(crate) fn ca_file(settings: &HttpSettings) -> Result<Vec<CertificateDer<'static>>, Error> {
    let Some(path) = &settings.ca_file else {
        return Ok(Vec::new());
    };
    let unreadable = |e: &dyn std::fmt::Display| {
        Error::new(
            Status::InvalidArgument,
            format!(
                "cannot read the CA file {} (http.ca_file): {e}",
                path.display()
            ),
        )
    };
    let pem = read_regular_file(path, CA_FILE_MAX).map_err(|e| unreadable(&e).with_source(e))?;
    let certs = CertificateDer::pem_slice_iter(&pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| unreadable(&e).with_source(e))?;
    if certs.is_empty() {
        return Err(Error::new(
            Status::InvalidArgument,
            format!(
                "the CA file {} (http.ca_file) holds no certificate",
                path.display()
            ),
        ));
    }
    let mut check = rustls::RootCertStore::empty();
    for cert in &certs {
        check.add(cert.clone()).map_err(|e| {
            Error::new(
                Status::InvalidArgument,
                format!(
                    "the CA file {} (http.ca_file) holds an unusable certificate: {e}",
                    path.display()
                ),
            )
        })?;
    }
    Ok(certs)
}

/// Establishes connections: name resolution, TCP and the TLS handshake together within the
/// connect timeout (`http.connect_timeout`), so a server that accepts TCP and never answers
/// the ClientHello is a connect failure at that timeout, not a wait for the response.
#[derive(Clone)]
pub(crate) struct Connector {
    http: HttpConnector<Resolver>,
    tls: Arc<TlsConfig>,
    timeout: Duration,
    /// The client speaks only HTTP/2: its connections watch for a server that does not.
    http2_only: bool,
}

impl Connector {
    pub(crate) fn new(
        tls: Arc<TlsConfig>,
        resolver: Resolver,
        connect_timeout: Duration,
        http2_only: bool,
    ) -> Self {
        let mut http = HttpConnector::new_with_resolver(resolver);
        http.enforce_http(false);
        http.set_nodelay(true);
        // The TCP connect alone; `connect` bounds TCP and TLS together by the same time.
        http.set_connect_timeout(Some(connect_timeout));
        http.set_keepalive(Some(Duration::from_secs(60)));
        Connector {
            http,
            tls,
            timeout: connect_timeout,
            http2_only,
        }
    }

    /// Ready to connect to `dst`: for `https://`, the TLS configuration built.
    pub(crate) async fn ready(&self, dst: &Uri) -> Result<(), BoxError> {
        if is_https(dst) {
            self.tls.get().await?;
        }
        Ok(())
    }

    /// The connect timeout.
    pub(crate) fn timeout(&self) -> Duration {
        self.timeout
    }

    /// Whether the client speaks only HTTP/2.
    pub(crate) fn http2_only(&self) -> bool {
        self.http2_only
    }

    /// A connection to `dst`'s host, which holds `slot` (its place among the host's
    /// connections) for as long as it is open. Fails at `deadline`.
    pub(crate) async fn connect(
        &self,
        dst: Uri,
        slot: OwnedSemaphorePermit,
        deadline: tokio::time::Instant,
    ) -> Result<Stream, BoxError> {
        let mut http = self.http.clone();
        let tls = Arc::clone(&self.tls);
        let connecting = async move {
            if is_https(&dst) {
                let mut https = HttpsConnector::from((ReadingAhead(http), tls.get().await?));
                std::future::poll_fn(|cx| https.poll_ready(cx)).await?;
                https.call(dst).await
            } else {
                std::future::poll_fn(|cx| http.poll_ready(cx)).await?;
                Ok(MaybeHttpsStream::Http(Tcp::Plain(http.call(dst).await?)))
            }
        };
        match tokio::time::timeout_at(deadline, connecting).await {
            Ok(Ok(io)) => Ok(Stream {
                inner: io,
                first: self.http2_only.then(FirstBytes::default),
                refusal: self.http2_only.then(Http2Refusal::default),
                _slot: slot,
            }),
            Ok(Err(e)) => Err(e),
            Err(_) => Err(Box::new(ConnectTimedOut {
                after: self.timeout,
            })),
        }
    }
}

/// How much a TLS connection reads from its socket at once. rustls asks its transport for at
/// most 4 KiB at a time (a quarter of a record), each a system call if it went to the socket;
/// read ahead, one call fills this and rustls's reads are served from memory.
const TLS_READ_AHEAD: usize = 256 << 10;

/// A TCP connection: plain HTTP's as it is (its reader, hyper, already reads large), TLS's
/// read ahead by [`TLS_READ_AHEAD`].
pub(crate) enum Tcp {
    Plain(TokioIo<tokio::net::TcpStream>),
    ReadAhead(TokioIo<tokio::io::BufReader<tokio::net::TcpStream>>),
}

impl Tcp {
    fn read_ahead(tcp: TokioIo<tokio::net::TcpStream>) -> Tcp {
        Tcp::ReadAhead(TokioIo::new(tokio::io::BufReader::with_capacity(
            TLS_READ_AHEAD,
            tcp.into_inner(),
        )))
    }
}

impl Connection for Tcp {
    fn connected(&self) -> Connected {
        match self {
            Tcp::Plain(tcp) => tcp.connected(),
            Tcp::ReadAhead(tcp) => tcp.inner().get_ref().connected(),
        }
    }
}

impl Read for Tcp {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: ReadBufCursor<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Tcp::Plain(tcp) => Pin::new(tcp).poll_read(cx, buf),
            Tcp::ReadAhead(tcp) => Pin::new(tcp).poll_read(cx, buf),
        }
    }
}

impl Write for Tcp {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Tcp::Plain(tcp) => Pin::new(tcp).poll_write(cx, buf),
            Tcp::ReadAhead(tcp) => Pin::new(tcp).poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Tcp::Plain(tcp) => Pin::new(tcp).poll_flush(cx),
            Tcp::ReadAhead(tcp) => Pin::new(tcp).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Tcp::Plain(tcp) => Pin::new(tcp).poll_shutdown(cx),
            Tcp::ReadAhead(tcp) => Pin::new(tcp).poll_shutdown(cx),
        }
    }

    fn is_write_vectored(&self) -> bool {
        match self {
            Tcp::Plain(tcp) => tcp.is_write_vectored(),
            Tcp::ReadAhead(tcp) => tcp.is_write_vectored(),
        }
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Tcp::Plain(tcp) => Pin::new(tcp).poll_write_vectored(cx, bufs),
            Tcp::ReadAhead(tcp) => Pin::new(tcp).poll_write_vectored(cx, bufs),
        }
    }
}

/// The TCP connector under TLS: its connections read ahead by [`TLS_READ_AHEAD`].
#[derive(Clone)]
struct ReadingAhead(HttpConnector<Resolver>);

impl tower_service::Service<Uri> for ReadingAhead {
    type Response = Tcp;
    type Error = <HttpConnector<Resolver> as tower_service::Service<Uri>>::Error;
    type Future = Pin<Box<dyn Future<Output = Result<Tcp, Self::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.0.poll_ready(cx)
    }

    fn call(&mut self, dst: Uri) -> Self::Future {
        let connecting = self.0.call(dst);
        Box::pin(async move { Ok(Tcp::read_ahead(connecting.await?)) })
    }
}

fn is_https(uri: &Uri) -> bool {
    uri.scheme() == Some(&http::uri::Scheme::HTTPS)
}

/// Every connection slot of the host stayed taken for the whole connect timeout.
#[derive(Debug, thiserror::Error)]
#[error("no connection slot freed within {after:?} ({per_host} connections to this host are open)")]
pub(crate) struct NoConnectionSlot {
    pub(crate) after: Duration,
    pub(crate) per_host: usize,
}

impl fmt::Debug for Connector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Connector")
            .field("timeout", &self.timeout)
            .field("http2_only", &self.http2_only)
            .finish_non_exhaustive()
    }
}

/// The connection was not established within the connect timeout: recognisable in an
/// error's source chain.
#[derive(Debug, thiserror::Error)]
#[error("no connection within {after:?}")]
pub(crate) struct ConnectTimedOut {
    after: Duration,
}

impl ConnectTimedOut {
    pub(crate) fn new(after: Duration) -> Self {
        ConnectTimedOut { after }
    }

    #[cfg(test)]
    pub(crate) fn for_tests() -> Self {
        ConnectTimedOut::new(Duration::from_secs(30))
    }
}

/// One connection. On a client that speaks only HTTP/2 it watches the server's first bytes:
/// an HTTP/2 server's first frame is SETTINGS, so an HTTP/1 status line (`HTTP/`), or the
/// connection ending before the server sent a byte, means the server does not speak HTTP/2.
/// The connection then records an [`Http2Refusal`], where the client finds it when a request
/// fails, and the exchange fails the read permanently naming `http.version`, instead of
/// retrying a broken pipe eight times. (Which error the HTTP/2 layer reports for the request
/// depends on whether it noticed a failed write or the end of the connection first, so the
/// evidence is kept beside it.)
pub(crate) struct Stream {
    inner: MaybeHttpsStream<Tcp>,
    /// The server's first bytes, while they are being judged (HTTP/2-only clients).
    first: Option<FirstBytes>,
    /// Where the judgement is recorded (HTTP/2-only clients).
    refusal: Option<Http2Refusal>,
    /// The connection's place among its host's connections (see [`client`](super::client)).
    _slot: OwnedSemaphorePermit,
}

/// The mark of a connection whose server does not speak HTTP/2.
#[derive(Debug, Clone, Default)]
pub(crate) struct Http2Refusal(Arc<AtomicBool>);

impl Http2Refusal {
    /// Whether the connection showed that its server does not speak HTTP/2 (see [`Stream`]).
    pub(crate) fn refused(&self) -> bool {
        self.0.load(Ordering::Acquire)
    }
}

impl fmt::Debug for Stream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Stream")
            .field("judging_first_bytes", &self.first.is_some())
            .finish_non_exhaustive()
    }
}

/// What the first bytes of a server say about its protocol.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Judgement {
    /// They are not an HTTP/1 answer: from here on, bytes pass unwatched.
    Http2,
    /// An HTTP/1 status line, or the end of the connection before any answer.
    NotHttp2,
    /// Too few bytes to tell yet.
    Undecided,
}

/// The start of an HTTP/1 status line.
const HTTP1: &[u8] = b"HTTP/";

/// The first bytes a server sent, up to the length of [`HTTP1`].
#[derive(Debug, Default)]
struct FirstBytes {
    seen: [u8; HTTP1.len()],
    len: usize,
}

impl FirstBytes {
    /// Add bytes that arrived and judge everything seen so far.
    fn handle_bytes(&mut self, bytes: &[u8]) -> Judgement {
        let take = bytes.len().min(self.seen.len() - self.len);
        self.seen[self.len..self.len + take].copy_from_slice(&bytes[..take]);
        self.len += take;
        if self.seen[..self.len] != HTTP1[..self.len] {
            Judgement::Http2
        } else if self.len == HTTP1.len() {
            Judgement::NotHttp2
        } else {
            Judgement::Undecided
        }
    }

    /// How many bytes to read next while judging (at least one: once an HTTP/1 status line
    /// was seen, every read fails again).
    fn wanted(&self) -> usize {
        (self.seen.len() - self.len).max(1)
    }
}

/// The error a [`Stream`] reports for a server that does not speak HTTP/2.
fn not_http2(what: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!("the server {what} instead of speaking HTTP/2"),
    )
}

/// Whether an I/O error is the connection ending (so, before any byte, a refusal).
fn is_closed(error: &io::Error) -> bool {
    matches!(
        error.kind(),
        io::ErrorKind::ConnectionReset
            | io::ErrorKind::ConnectionAborted
            | io::ErrorKind::BrokenPipe
            | io::ErrorKind::UnexpectedEof
    )
}

impl Stream {
    fn judge_error(&self, error: io::Error) -> io::Error {
        match Stream::judge_error_of(self.first.as_ref(), error) {
            Ok(error) => error,
            Err(refused) => {
                self.refuse();
                refused
            }
        }
    }

    /// Record that the server does not speak HTTP/2.
    fn refuse(&self) {
        if let Some(refusal) = &self.refusal {
            refusal.0.store(true, Ordering::Release);
        }
    }

    /// While the first bytes are judged and none arrived yet, a closed connection means the
    /// server refused HTTP/2: `Err` with the error to report instead; else `Ok(error)`.
    fn judge_error_of(
        first: Option<&FirstBytes>,
        error: io::Error,
    ) -> Result<io::Error, io::Error> {
        match first {
            Some(first) if first.len == 0 && is_closed(&error) => {
                Err(not_http2("closed the connection"))
            }
            _ => Ok(error),
        }
    }
}

impl Read for Stream {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        mut buf: ReadBufCursor<'_>,
    ) -> Poll<io::Result<()>> {
        let this = &mut *self;
        let want = match &this.first {
            Some(first) => first.wanted().min(buf.remaining()),
            None => 0,
        };
        if want == 0 {
            return Pin::new(&mut this.inner).poll_read(cx, buf);
        }
        // Read at most the bytes still to judge, into a small buffer of our own, then hand
        // them on: no byte reaches HTTP/2 before it is judged.
        let mut small = [0u8; HTTP1.len()];
        let mut read = ReadBuf::new(&mut small[..want]);
        match Pin::new(&mut this.inner).poll_read(cx, read.unfilled()) {
            Poll::Pending => Poll::Pending,
            Poll::Ready(Err(e)) => Poll::Ready(Err(this.judge_error(e))),
            Poll::Ready(Ok(())) => {
                let got = read.filled();
                if got.is_empty() {
                    // The end of the connection before an HTTP/2 answer.
                    this.refuse();
                    return Poll::Ready(Err(not_http2("closed the connection")));
                }
                let judgement = match this.first.as_mut() {
                    Some(first) => first.handle_bytes(got),
                    None => Judgement::Http2,
                };
                match judgement {
                    // Keep judging: every later read fails the same way.
                    Judgement::NotHttp2 => {
                        this.refuse();
                        return Poll::Ready(Err(not_http2("answered with HTTP/1")));
                    }
                    Judgement::Http2 => this.first = None,
                    Judgement::Undecided => {}
                }
                buf.put_slice(got);
                Poll::Ready(Ok(()))
            }
        }
    }
}

impl Write for Stream {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = &mut *self;
        match Pin::new(&mut this.inner).poll_write(cx, buf) {
            Poll::Ready(Err(e)) => Poll::Ready(Err(this.judge_error(e))),
            other => other,
        }
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = &mut *self;
        match Pin::new(&mut this.inner).poll_flush(cx) {
            Poll::Ready(Err(e)) => Poll::Ready(Err(this.judge_error(e))),
            other => other,
        }
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = &mut *self;
        match Pin::new(&mut this.inner).poll_write_vectored(cx, bufs) {
            Poll::Ready(Err(e)) => Poll::Ready(Err(this.judge_error(e))),
            other => other,
        }
    }
}

impl Stream {
    /// Whether TLS chose HTTP/2 (ALPN).
    pub(crate) fn negotiated_h2(&self) -> bool {
        matches!(&self.inner, MaybeHttpsStream::Https(tls)
            if tls.inner().get_ref().1.alpn_protocol() == Some(b"h2"))
    }

    /// Where the connection records that its server does not speak HTTP/2 (HTTP/2-only
    /// clients).
    pub(crate) fn refusal(&self) -> Option<Http2Refusal> {
        self.refusal.clone()
    }
}

/// A DNS answer and when it was obtained.
type Answer = (Instant, Arc<[IpAddr]>);

/// Answers kept for `ttl`, shared by every loop of a client.
pub(crate) struct DnsCache {
    ttl: Duration,
    entries: Mutex<HashMap<String, Answer>>,
}

impl DnsCache {
    pub(crate) fn new(ttl: Duration) -> Self {
        DnsCache {
            ttl,
            entries: Mutex::new(HashMap::new()),
        }
    }

    /// A cached answer still fresh at `now`.
    fn get(&self, host: &str, now: Instant) -> Option<Arc<[IpAddr]>> {
        let entries = self.entries.lock();
        let (at, addrs) = entries.get(host)?;
        (now.duration_since(*at) < self.ttl).then(|| Arc::clone(addrs))
    }

    fn insert(&self, host: &str, addrs: Arc<[IpAddr]>, now: Instant) {
        let mut entries = self.entries.lock();
        if entries.len() > 4096 {
            let ttl = self.ttl;
            entries.retain(|_, (at, _)| now.duration_since(*at) < ttl);
        }
        entries.insert(host.to_string(), (now, addrs));
    }
}

/// A name-resolution failure, recognisable in an error's source chain.
#[derive(Debug)]
pub(crate) struct DnsFailure {
    host: String,
    source: io::Error,
}

#[cfg(test)]
impl DnsFailure {
    pub(crate) fn for_tests(host: &str) -> Self {
        DnsFailure {
            host: host.to_string(),
            source: io::Error::new(io::ErrorKind::NotFound, "test"),
        }
    }
}

impl fmt::Display for DnsFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "cannot resolve {}: {}", self.host, self.source)
    }
}

impl std::error::Error for DnsFailure {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.source)
    }
}

/// The resolver hyper's connector calls for each new connection: cached answers, shuffled
/// so connections spread over the addresses.
#[derive(Clone)]
pub(crate) struct Resolver {
    cache: Arc<DnsCache>,
}

impl Resolver {
    pub(crate) fn new(cache: Arc<DnsCache>) -> Self {
        Resolver { cache }
    }
}

impl fmt::Debug for Resolver {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Resolver").finish_non_exhaustive()
    }
}

impl tower_service::Service<Name> for Resolver {
    type Response = std::vec::IntoIter<SocketAddr>;
    type Error = DnsFailure;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, DnsFailure>> + Send>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), DnsFailure>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, name: Name) -> Self::Future {
        let cache = Arc::clone(&self.cache);
        Box::pin(async move {
            let host = name.as_str().to_string();
            let now = Instant::now();
            let addrs = match cache.get(&host, now) {
                Some(addrs) => addrs,
                None => {
                    let found: Vec<IpAddr> = tokio::net::lookup_host((host.as_str(), 0))
                        .await
                        .map_err(|source| DnsFailure {
                            host: host.clone(),
                            source,
                        })?
                        .map(|a| a.ip())
                        .collect();
                    if found.is_empty() {
                        return Err(DnsFailure {
                            host,
                            source: io::Error::new(io::ErrorKind::NotFound, "no addresses"),
                        });
                    }
                    let found: Arc<[IpAddr]> = found.into();
                    cache.insert(&host, Arc::clone(&found), now);
                    found
                }
            };
            let mut shuffled: Vec<SocketAddr> =
                addrs.iter().map(|ip| SocketAddr::new(*ip, 0)).collect();
            fastrand::shuffle(&mut shuffled);
            Ok(shuffled.into_iter())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dns_answers_expire_after_the_ttl() {
        let cache = DnsCache::new(Duration::from_secs(60));
        let t0 = Instant::now();
        let addrs: Arc<[IpAddr]> = vec![IpAddr::from([127, 0, 0, 1])].into();
        cache.insert("h", Arc::clone(&addrs), t0);
        assert!(cache.get("h", t0 + Duration::from_secs(59)).is_some());
        assert!(cache.get("h", t0 + Duration::from_secs(60)).is_none());
        assert!(cache.get("other", t0).is_none());
    }

    #[test]
    fn localhost_resolves_through_the_cache_and_is_shuffled() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let cache = Arc::new(DnsCache::new(Duration::from_secs(60)));
        let mut resolver = Resolver::new(Arc::clone(&cache));
        let addrs: Vec<SocketAddr> = rt
            .block_on(tower_service::Service::call(
                &mut resolver,
                "localhost".parse().unwrap(),
            ))
            .unwrap()
            .collect();
        assert!(addrs.iter().all(|a| a.ip().is_loopback()), "{addrs:?}");
        assert!(cache.get("localhost", Instant::now()).is_some());
        // Many shuffles of a multi-address answer produce more than one order.
        let many: Arc<[IpAddr]> = (1..=8).map(|i| IpAddr::from([127, 0, 0, i])).collect();
        cache.insert("many", many, Instant::now());
        let mut orders = std::collections::HashSet::new();
        for _ in 0..20 {
            let order: Vec<SocketAddr> = rt
                .block_on(tower_service::Service::call(
                    &mut resolver,
                    "many".parse().unwrap(),
                ))
                .unwrap()
                .collect();
            assert_eq!(order.len(), 8);
            orders.insert(order);
        }
        assert!(orders.len() > 1);
    }

    /// Judges `chunks` arriving one after the other; the judgements made.
    fn judge(chunks: &[&[u8]]) -> Vec<Judgement> {
        let mut first = FirstBytes::default();
        chunks.iter().map(|c| first.handle_bytes(c)).collect()
    }

    #[test]
    fn first_bytes_tell_an_http1_answer_from_http2() {
        // An HTTP/2 server's first frame: SETTINGS (length, type 4, flags, stream 0).
        assert_eq!(judge(&[b"\0\0\x12\x04\0\0\0\0\0"]), [Judgement::Http2]);
        assert_eq!(judge(&[b"\0"]), [Judgement::Http2]);
        // An HTTP/1 server's answer to the HTTP/2 preface, whole or in pieces.
        assert_eq!(
            judge(&[b"HTTP/1.1 400 Bad Request\r\n"]),
            [Judgement::NotHttp2]
        );
        assert_eq!(
            judge(&[b"H", b"TT", b"P/1.1"]),
            [
                Judgement::Undecided,
                Judgement::Undecided,
                Judgement::NotHttp2
            ]
        );
        // Once an HTTP/1 status line was seen, it stays seen.
        assert_eq!(
            judge(&[b"HTTP/", b"1.1"]),
            [Judgement::NotHttp2, Judgement::NotHttp2]
        );
        assert_eq!(
            judge(&[b"HT", b"X"]),
            [Judgement::Undecided, Judgement::Http2]
        );
        let mut first = FirstBytes::default();
        assert_eq!(first.wanted(), 5);
        let _ = first.handle_bytes(b"HTT");
        assert_eq!(first.wanted(), 2);
        let _ = first.handle_bytes(b"P/");
        assert_eq!(
            first.wanted(),
            1,
            "a judged stream still reads to fail again"
        );
    }

    #[test]
    fn a_closed_connection_before_any_byte_is_a_refusal_of_http2_while_judging() {
        let judging = |first: Option<FirstBytes>, kind: io::ErrorKind| {
            Stream::judge_error_of(first.as_ref(), io::Error::from(kind)).map_err(|e| e.kind())
        };
        use io::ErrorKind::*;
        for closed in [
            ConnectionReset,
            ConnectionAborted,
            BrokenPipe,
            UnexpectedEof,
        ] {
            assert_eq!(
                judging(Some(FirstBytes::default()), closed).map(|e| e.kind()),
                Err(InvalidData)
            );
            // Not judging (not an HTTP/2-only client, or judged already): left alone.
            assert_eq!(judging(None, closed).map(|e| e.kind()), Ok(closed));
            // A byte arrived: something spoke; the end of the connection is just that.
            let mut some = FirstBytes::default();
            let _ = some.handle_bytes(b"H");
            assert_eq!(judging(Some(some), closed).map(|e| e.kind()), Ok(closed));
        }
        assert_eq!(
            judging(Some(FirstBytes::default()), PermissionDenied).map(|e| e.kind()),
            Ok(PermissionDenied)
        );
    }

    #[test]
    fn the_tls_configuration_is_built_once_with_alpn_by_version() {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let built = |s: &HttpSettings| {
            let tls = Arc::new(TlsConfig::new(s).unwrap());
            assert!(
                !tls.built.initialized(),
                "nothing loaded before a TLS connection"
            );
            let config = runtime.block_on(tls.get()).unwrap();
            let again = runtime.block_on(tls.get()).unwrap();
            assert!(
                Arc::ptr_eq(&config, &again),
                "one configuration for every connection"
            );
            config
        };
        let mut s = HttpSettings::default();
        assert_eq!(built(&s).alpn_protocols, vec![b"http/1.1".to_vec()]);
        s.version = HttpVersion::Auto;
        assert_eq!(
            built(&s).alpn_protocols,
            vec![b"h2".to_vec(), b"http/1.1".to_vec()]
        );
        s.version = HttpVersion::Http2;
        assert_eq!(built(&s).alpn_protocols, vec![b"h2".to_vec()]);
    }

    #[test]
    fn a_plain_http_connection_never_builds_the_tls_configuration_and_an_https_one_does() {
        let tls = Arc::new(TlsConfig::new(&HttpSettings::default()).unwrap());
        let connector = Connector::new(
            Arc::clone(&tls),
            Resolver::new(Arc::new(DnsCache::new(Duration::from_secs(60)))),
            Duration::from_secs(10),
            false,
        );
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let dst: Uri = format!("http://{addr}/o").parse().unwrap();
        let slot = Arc::new(tokio::sync::Semaphore::new(1))
            .try_acquire_owned()
            .unwrap();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async {
            connector.ready(&dst).await.unwrap();
            let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
            let stream = connector.connect(dst, slot, deadline).await.unwrap();
            assert!(matches!(stream.inner, MaybeHttpsStream::Http(_)));
        });
        assert!(!tls.built.initialized(), "built for an http:// connection");
        // Getting ready for an https:// one builds it, before any connect timeout starts.
        let https: Uri = format!("https://{addr}/o").parse().unwrap();
        runtime.block_on(connector.ready(&https)).unwrap();
        assert!(
            tls.built.initialized(),
            "not built for an https:// connection"
        );
    }

    #[test]
    fn a_bad_ca_file_fails_the_start() {
        // The caller's CA file is read when the client starts, not at the first connection.
        let mut s = HttpSettings::default();
        s.ca_file = Some("/nonexistent/ca.pem".into());
        let e = TlsConfig::new(&s).unwrap_err();
        assert_eq!(e.status(), Status::InvalidArgument);
        assert!(e.message().contains("/nonexistent/ca.pem"));
    }
}
