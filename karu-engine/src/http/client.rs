//! The HTTP client of one event loop: hyper's connections (`conn::http1`, `conn::http2`) in a
//! pool of Karu's own.
//!
//! A request takes the most recently used idle connection to its host, under one lock. When
//! there is none, it opens one if the host has a free slot; else it waits for a connection to
//! come back or a slot to free, within the connect timeout. An HTTP/1 connection comes back
//! when the exchange is done with its response ([`Carrier`]) and hyper is ready to send
//! another request on it; one whose body was left unread is closed instead. An HTTP/2
//! connection is shared by every request to its host; a client that speaks only HTTP/2 opens
//! one at a time, and the requests that arrive meanwhile wait for it. Under `http.version =
//! "auto"` the requests to a TLS host wait the same way for its first connection, whose ALPN
//! says whether the host speaks HTTP/2 (as curl's `CURLOPT_PIPEWAIT` does): on HTTP/2 it then
//! carries them all, on HTTP/1.1 each opens its own. Without the wait a cold burst opened a
//! connection (and a TLS handshake) per request and kept only one.
//!
//! Slots bound the connections per host (scheme, host and port): the loop's share of the
//! concurrency limit, so the loops together never open more than the limit. A connection holds
//! its slot until it closes. The loop runs at most its share of requests at once and an HTTP/1
//! connection carries one of them, so while every slot is taken a waiting request's connection
//! is busy with a request that will end, idle, or closing: waiting is never the only way on.
//!
//! Why not hyper-util's pooled client: per request it races a pool checkout against a
//! connect, boxes the response future, and spawns a task to return the connection: work on
//! every request that a pool of Karu's own does not need.

use std::collections::VecDeque;
use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::header::HOST;
use http::uri::{Authority, PathAndQuery, Scheme};
use http::{HeaderValue, Request, Response, Uri};
use http_body_util::Empty;
use hyper::body::Incoming;
use hyper::client::conn::{http1, http2};
use hyper_util::rt::TokioExecutor;
use karu_config::HttpVersion;
use parking_lot::Mutex;
use tokio::sync::{OwnedSemaphorePermit, Semaphore, oneshot};
use tokio::time::timeout_at;

use crate::http::transport::{
    BoxError, ConnectTimedOut, Connector, Http2Refusal, NoConnectionSlot, Resolver, TlsConfig,
};
use crate::sdk::time::instant_after;

/// Karu's requests have no body.
type Body = Empty<Bytes>;

/// How long a connection may stay idle in the pool.
const IDLE_TIMEOUT: Duration = Duration::from_secs(90);

/// Hosts a pool keeps before it forgets those with nothing open.
const PRUNE_HOSTS_ABOVE: usize = 256;

/// Most times one request goes to another connection because a reused one closed before the
/// request could be sent on it.
const MAX_RESENDS: usize = 8;

/// One event loop's client: its pool of connections. Clones share the pool.
#[derive(Clone)]
pub(crate) struct HttpClient {
    pool: Arc<Pool>,
}

impl fmt::Debug for HttpClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HttpClient")
            .field("connector", &self.pool.connector)
            .field("per_host", &self.pool.per_host)
            .finish_non_exhaustive()
    }
}

impl HttpClient {
    /// A client that opens at most `connections_per_host` connections to any one host.
    pub(crate) fn new(
        tls: Arc<TlsConfig>,
        resolver: Resolver,
        connect_timeout: Duration,
        version: HttpVersion,
        connections_per_host: usize,
    ) -> Self {
        let connector = Connector::new(
            tls,
            resolver,
            connect_timeout,
            version == HttpVersion::Http2,
        );
        HttpClient {
            pool: Arc::new(Pool {
                connector,
                learns_protocol: version == HttpVersion::Auto,
                per_host: connections_per_host.max(1),
                hosts: Mutex::new(Vec::new()),
                next_id: AtomicU64::new(0),
            }),
        }
    }

    /// Send `request` (its URL absolute) and wait for the response's head. The response comes
    /// with the connection that carries it. `fresh` (a duplicate of a request still waiting):
    /// on a new connection where the host has a free slot, else an idle HTTP/1 one, else the
    /// first of the two to come; never the host's shared HTTP/2 connection, which carries the
    /// request it duplicates.
    ///
    /// `dispatched` runs once, when the request is handed to a connection: a request given up
    /// before it had one (a duplicate whose original answered while its connection was being
    /// opened) was never sent, and a request sent again because a reused connection had closed
    /// before it was written counts once.
    pub(crate) async fn request(
        &self,
        mut request: Request<Body>,
        fresh: bool,
        dispatched: impl FnOnce(),
    ) -> Result<(Response<Incoming>, Carrier), RequestFailed> {
        let mut dispatched = Some(dispatched);
        let uri = request.uri().clone();
        let key = HostKey::of(&uri).ok_or_else(|| RequestFailed {
            connecting: false,
            refused_http2: false,
            cause: "the request's URL has no scheme or host".into(),
        })?;
        let origin = Uri::from(
            uri.path_and_query()
                .cloned()
                .unwrap_or_else(|| PathAndQuery::from_static("/")),
        );
        let mut host_set = false;
        let mut resends = 0;
        loop {
            // A request sent again after a reused connection closed takes any.
            let fresh = fresh && resends == 0;
            let (mut conn, reused) = match self.pool.take(&key, fresh) {
                Ok(conn) => (conn, true),
                // Rare, and its future is large: boxed, so the common path stays small.
                Err(step) => Box::pin(self.pool.checkout(&key, &uri, step, fresh)).await?,
            };
            if let Some(dispatched) = dispatched.take() {
                dispatched();
            }
            let sent = match &mut conn.sender {
                Sender::Http1(tx) => {
                    if !request.headers().contains_key(HOST) {
                        request.headers_mut().insert(HOST, conn.host.clone());
                        host_set = true;
                    }
                    *request.uri_mut() = origin.clone();
                    tx.try_send_request(request).await
                }
                Sender::Http2(tx) => {
                    if host_set {
                        request.headers_mut().remove(HOST);
                        host_set = false;
                    }
                    *request.uri_mut() = uri.clone();
                    tx.try_send_request(request).await
                }
            };
            match sent {
                Ok(response) => {
                    let carrier = Carrier {
                        pool: Arc::clone(&self.pool),
                        key,
                        conn: Some(conn),
                        closed: false,
                    };
                    return Ok((response, carrier));
                }
                Err(mut failed) => {
                    let refused_http2 = conn.refused_http2();
                    match failed.take_message() {
                        // Never sent: a reused connection closed in the meantime (or, over
                        // HTTP/2, stopped taking requests: no later request is sent on it).
                        Some(unsent) if reused && !refused_http2 && resends < MAX_RESENDS => {
                            self.pool.forget_shared(&key, conn.id);
                            request = unsent;
                            resends += 1;
                        }
                        _ => {
                            return Err(RequestFailed {
                                connecting: false,
                                refused_http2,
                                cause: Box::new(failed.into_error()),
                            });
                        }
                    }
                }
            }
        }
    }
}

/// The pool of one loop: the connections and slots of each host.
struct Pool {
    connector: Connector,
    /// `http.version = "auto"`: a TLS connection learns from ALPN whether its host speaks
    /// HTTP/2, so until one has, a host's requests wait for its first connection instead of
    /// opening one each (one HTTP/2 connection then carries them all).
    learns_protocol: bool,
    /// The most connections open to one host at once.
    per_host: usize,
    /// The hosts, the one used last first (a loop usually talks to one or a few).
    hosts: Mutex<Vec<Host>>,
    /// The id of the next connection opened.
    next_id: AtomicU64,
}

/// What the pool keys hosts by: scheme, host and port, compared byte for byte (the URLs
/// Karu builds spell a host one way; `Authority`'s own comparison ignores case byte by byte,
/// on every request).
#[derive(Debug, Clone)]
struct HostKey {
    scheme: Scheme,
    authority: Authority,
}

impl PartialEq for HostKey {
    fn eq(&self, other: &Self) -> bool {
        self.authority.as_str() == other.authority.as_str() && self.scheme == other.scheme
    }
}

impl HostKey {
    fn of(uri: &Uri) -> Option<HostKey> {
        Some(HostKey {
            scheme: uri.scheme()?.clone(),
            authority: uri.authority()?.clone(),
        })
    }
}

/// One host's connections.
struct Host {
    key: HostKey,
    /// Room for connections: an open connection holds one permit.
    slots: Arc<Semaphore>,
    /// HTTP/1 connections ready for a request, the most recently used last.
    idle: VecDeque<Idle>,
    /// Requests waiting for a connection to come back, or for the one being opened when it
    /// is a first one (see `opening_first`). Some may have stopped waiting.
    waiting: VecDeque<oneshot::Sender<Conn>>,
    /// The host's HTTP/2 connection, shared by every request.
    shared: Option<Conn>,
    /// A connection the host's next requests wait for is being opened: the one connection of
    /// an HTTP/2-only client, or under `auto` the first TLS connection, which learns the
    /// host's protocol.
    opening_first: bool,
    /// A connection to the host has learned its protocol (under `auto`).
    knows_protocol: bool,
}

/// An idle HTTP/1 connection and since when.
struct Idle {
    conn: Conn,
    since: Instant,
}

/// A connection a request may use.
struct Conn {
    /// Which connection it is, among the pool's.
    id: u64,
    sender: Sender,
    /// The `Host` header of its host (HTTP/1).
    host: HeaderValue,
    /// Where the connection records that its server does not speak HTTP/2.
    refusal: Option<Http2Refusal>,
}

enum Sender {
    Http1(http1::SendRequest<Body>),
    Http2(http2::SendRequest<Body>),
}

impl Conn {
    /// Another handle on a shared (HTTP/2) connection; `None` for HTTP/1.
    fn share(&self) -> Option<Conn> {
        match &self.sender {
            Sender::Http1(_) => None,
            Sender::Http2(tx) => Some(Conn {
                id: self.id,
                sender: Sender::Http2(tx.clone()),
                host: self.host.clone(),
                refusal: self.refusal.clone(),
            }),
        }
    }

    fn is_closed(&self) -> bool {
        match &self.sender {
            Sender::Http1(tx) => tx.is_closed(),
            Sender::Http2(tx) => tx.is_closed(),
        }
    }

    fn refused_http2(&self) -> bool {
        self.refusal.as_ref().is_some_and(Http2Refusal::refused)
    }
}

/// What a request does when no connection is at hand.
enum Step<'a> {
    /// Open a connection in this slot; with the duty to open the host's first connection,
    /// which others wait for, if it is that one.
    Open(OwnedSemaphorePermit, Option<Opening<'a>>),
    /// Wait for the first connection being opened (see `Host::opening_first`).
    Wait(oneshot::Receiver<Conn>),
    /// Wait for a connection to come back or a slot to free, whichever is first.
    WaitOrOpen(oneshot::Receiver<Conn>, Arc<Semaphore>),
}

impl Pool {
    /// A connection to `key`'s host at hand, or what to do for one; `fresh`: one other than
    /// those a waiting request may be on (see [`HttpClient::request`]).
    fn take<'a>(&'a self, key: &'a HostKey, fresh: bool) -> Result<Conn, Step<'a>> {
        let mut hosts = self.hosts.lock();
        let host = self.host(&mut hosts, key);
        if fresh {
            // A new connection of its own where there is room: it opens no first connection
            // others wait for, and an HTTP/2 one is shared only if the host has none. Else an
            // idle HTTP/1 connection (the original's is busy with it), or the first to come
            // back or to free a slot.
            if let Ok(slot) = Arc::clone(&host.slots).try_acquire_owned() {
                return Err(Step::Open(slot, None));
            }
            if let Some(conn) = host.take_idle(Instant::now()) {
                return Ok(conn);
            }
            let (tx, rx) = oneshot::channel();
            host.waiting.push_back(tx);
            return Err(Step::WaitOrOpen(rx, Arc::clone(&host.slots)));
        }
        if let Some(shared) = host.shared.as_ref() {
            if !shared.is_closed()
                && let Some(conn) = shared.share()
            {
                return Ok(conn);
            }
            host.shared = None;
        }
        // The first connection decides (HTTP/2-only: always; `auto` over TLS: until one
        // has learned the host's protocol).
        let first = self.connector.http2_only()
            || (self.learns_protocol && key.scheme == Scheme::HTTPS && !host.knows_protocol);
        if let Some(conn) = host.take_idle(Instant::now()) {
            return Ok(conn);
        }
        if first && host.opening_first {
            let (tx, rx) = oneshot::channel();
            host.waiting.push_back(tx);
            Err(Step::Wait(rx))
        } else if let Ok(slot) = Arc::clone(&host.slots).try_acquire_owned() {
            host.opening_first = first;
            // From now on others wait for this request's connection: whatever ends its way
            // there (giving up, failing) first lets them go.
            let opening = first.then(|| Opening {
                pool: self,
                key,
                done: false,
            });
            Err(Step::Open(slot, opening))
        } else {
            let (tx, rx) = oneshot::channel();
            host.waiting.push_back(tx);
            Err(Step::WaitOrOpen(rx, Arc::clone(&host.slots)))
        }
    }

    /// A connection for a request to `key` that found none at hand and was told to `step`
    /// (`fresh`: as [`take`](Pool::take) says), and whether it carried requests before.
    async fn checkout<'a>(
        &'a self,
        key: &'a HostKey,
        uri: &Uri,
        mut step: Step<'a>,
        fresh: bool,
    ) -> Result<(Conn, bool), RequestFailed> {
        // The client's TLS configuration is built at its first TLS connection (it reads the
        // platform's roots): before the connect timeout starts, which is the server's.
        self.connector
            .ready(uri)
            .await
            .map_err(|e| RequestFailed::connecting(e, None))?;
        loop {
            let deadline = instant_after(Instant::now(), self.connector.timeout());
            let deadline = tokio::time::Instant::from_std(deadline);
            match step {
                Step::Open(slot, opening) => {
                    return self.open(key, uri, slot, opening, deadline).await;
                }
                Step::Wait(rx) => match timeout_at(deadline, rx).await {
                    Ok(Ok(conn)) => return Ok((conn, true)),
                    // The connection being opened failed: try again.
                    Ok(Err(_)) => {}
                    Err(_) => {
                        return Err(RequestFailed::connecting(
                            Box::new(ConnectTimedOut::new(self.connector.timeout())),
                            None,
                        ));
                    }
                },
                Step::WaitOrOpen(rx, slots) => tokio::select! {
                    biased;
                    back = rx => if let Ok(conn) = back {
                        return Ok((conn, true));
                    },
                    slot = timeout_at(deadline, slots.acquire_owned()) => match slot {
                        Ok(Ok(slot)) => return self.open(key, uri, slot, None, deadline).await,
                        // The semaphore is never closed.
                        Ok(Err(_)) | Err(_) => {
                            let full = NoConnectionSlot {
                                after: self.connector.timeout(),
                                per_host: self.per_host,
                            };
                            return Err(RequestFailed::connecting(Box::new(full), None));
                        }
                    },
                },
            }
            step = match self.take(key, fresh) {
                Ok(conn) => return Ok((conn, true)),
                Err(step) => step,
            };
        }
    }

    /// `key`'s host, added if new, now first in `hosts`.
    fn host<'h>(&self, hosts: &'h mut Vec<Host>, key: &HostKey) -> &'h mut Host {
        match hosts.iter().position(|host| host.key == *key) {
            Some(at) => hosts.swap(0, at),
            None => {
                if hosts.len() >= PRUNE_HOSTS_ABOVE {
                    // Forget hosts with nothing open and nobody waiting: a long-lived client
                    // that meets many hosts keeps only those it is using.
                    let (now, per_host) = (Instant::now(), self.per_host);
                    hosts.retain_mut(|host| {
                        host.drop_expired(now);
                        host.slots.available_permits() < per_host || !host.waiting.is_empty()
                    });
                }
                hosts.push(Host {
                    key: key.clone(),
                    slots: Arc::new(Semaphore::new(self.per_host)),
                    idle: VecDeque::new(),
                    waiting: VecDeque::new(),
                    shared: None,
                    opening_first: false,
                    knows_protocol: false,
                });
                let last = hosts.len() - 1;
                hosts.swap(0, last);
            }
        }
        &mut hosts[0]
    }

    /// `key`'s host if the pool has it.
    fn find<'h>(hosts: &'h mut [Host], key: &HostKey) -> Option<&'h mut Host> {
        hosts.iter_mut().find(|host| host.key == *key)
    }

    /// Open a connection in `slot` (the host's first, which others wait for, with `opening`);
    /// hand an HTTP/2 one to the requests waiting for it.
    async fn open(
        &self,
        key: &HostKey,
        uri: &Uri,
        slot: OwnedSemaphorePermit,
        opening: Option<Opening<'_>>,
        deadline: tokio::time::Instant,
    ) -> Result<(Conn, bool), RequestFailed> {
        let opened = self.handshake(uri, slot, deadline).await;
        // Opened or failed: the waiting are handed the connection, or let go, below.
        let opener = opening.is_some();
        if let Some(opening) = opening {
            opening.finish();
        }
        let mut hosts = self.hosts.lock();
        let Some(host) = Pool::find(&mut hosts, key) else {
            return opened.map(|conn| (conn, false));
        };
        // The first connection is the opener's to finish (another request's, a duplicate's
        // own, may come first).
        let first = opener && std::mem::take(&mut host.opening_first);
        match &opened {
            Ok(conn) => {
                host.knows_protocol = true;
                match conn.sender {
                    Sender::Http2(_) => {
                        if host.shared.as_ref().is_none_or(Conn::is_closed) {
                            host.shared = conn.share();
                        }
                        for waiter in host.waiting.drain(..) {
                            if let Some(shared) = conn.share() {
                                let _ = waiter.send(shared);
                            }
                        }
                    }
                    // An HTTP/1 server: those waiting for this first connection open their own.
                    Sender::Http1(_) if first => host.waiting.clear(),
                    Sender::Http1(_) => {}
                }
            }
            // Those waiting for this first connection try for themselves.
            Err(_) if first => host.waiting.clear(),
            Err(_) => {}
        }
        opened.map(|conn| (conn, false))
    }

    /// Connect (TCP and TLS within the connect timeout) and start HTTP on the connection.
    async fn handshake(
        &self,
        uri: &Uri,
        slot: OwnedSemaphorePermit,
        deadline: tokio::time::Instant,
    ) -> Result<Conn, RequestFailed> {
        let stream = self
            .connector
            .connect(uri.clone(), slot, deadline)
            .await
            .map_err(|cause| RequestFailed::connecting(cause, None))?;
        let refusal = stream.refusal();
        let failed = |e: hyper::Error| RequestFailed::connecting(Box::new(e), refusal.as_ref());
        let host = host_header(uri);
        if self.connector.http2_only() || stream.negotiated_h2() {
            let (mut tx, connection) = http2::Builder::new(TokioExecutor::new())
                .handshake(stream)
                .await
                .map_err(failed)?;
            // Its errors reach the requests on it.
            tokio::spawn(async move {
                let _ = connection.await;
            });
            tx.ready().await.map_err(failed)?;
            Ok(Conn {
                id: self.next_id.fetch_add(1, Ordering::Relaxed),
                sender: Sender::Http2(tx),
                host,
                refusal,
            })
        } else {
            let (mut tx, connection) = http1::handshake(stream).await.map_err(failed)?;
            let (ended_tx, ended) = oneshot::channel();
            tokio::spawn(async move {
                if let Err(e) = connection.await {
                    let _ = ended_tx.send(e);
                }
            });
            if let Err(e) = tx.ready().await {
                // The connection's own error says more than "closed".
                return Err(failed(ended.await.unwrap_or(e)));
            }
            Ok(Conn {
                id: self.next_id.fetch_add(1, Ordering::Relaxed),
                sender: Sender::Http1(tx),
                host,
                refusal,
            })
        }
    }

    /// Stop sharing connection `id` of `key`'s host (an HTTP/2 connection that gave a request
    /// back unsent).
    fn forget_shared(&self, key: &HostKey, id: u64) {
        if let Some(host) = Pool::find(&mut self.hosts.lock(), key)
            && host.shared.as_ref().is_some_and(|shared| shared.id == id)
        {
            host.shared = None;
        }
    }

    /// An HTTP/1 connection ready for another request: to a waiting request, else idle.
    fn put(&self, key: &HostKey, mut conn: Conn) {
        let mut hosts = self.hosts.lock();
        let Some(host) = Pool::find(&mut hosts, key) else {
            return;
        };
        while let Some(waiter) = host.waiting.pop_front() {
            match waiter.send(conn) {
                Ok(()) => return,
                Err(back) => conn = back,
            }
        }
        let now = Instant::now();
        host.drop_expired(now);
        host.idle.push_back(Idle { conn, since: now });
    }
}

impl Host {
    /// The most recently used idle connection that is still open.
    fn take_idle(&mut self, now: Instant) -> Option<Conn> {
        self.drop_expired(now);
        while let Some(idle) = self.idle.pop_back() {
            if !idle.conn.is_closed() {
                return Some(idle.conn);
            }
        }
        None
    }

    /// Close the connections idle for longer than the idle timeout.
    fn drop_expired(&mut self, now: Instant) {
        while self
            .idle
            .front()
            .is_some_and(|idle| now.duration_since(idle.since) >= IDLE_TIMEOUT)
        {
            self.idle.pop_front();
        }
    }
}

/// The duty to open a host's first connection (see `Host::opening_first`), from the moment a
/// request is told to until the connection is open or failed: dropped before (the request gave
/// up, or failed before it connected), it marks the connection as no longer being opened and
/// lets those waiting for it try for themselves.
struct Opening<'a> {
    pool: &'a Pool,
    key: &'a HostKey,
    done: bool,
}

impl Opening<'_> {
    /// The connection is open or failed to open: the opener deals with the waiting itself.
    fn finish(mut self) {
        self.done = true;
    }
}

impl Drop for Opening<'_> {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        if let Some(host) = Pool::find(&mut self.pool.hosts.lock(), self.key)
            && host.opening_first
        {
            host.opening_first = false;
            host.waiting.clear();
        }
    }
}

/// The `Host` header for `uri`: its host, and its port unless the scheme's default.
fn host_header(uri: &Uri) -> HeaderValue {
    let host = uri.host().unwrap_or_default();
    let default = if uri.scheme() == Some(&Scheme::HTTPS) {
        443
    } else {
        80
    };
    let value = match uri.port_u16() {
        Some(port) if port != default => {
            HeaderValue::from_maybe_shared(Bytes::from(format!("{host}:{port}")))
        }
        _ => HeaderValue::from_str(host),
    };
    // An authority that parsed is a valid header value.
    value.unwrap_or_else(|_| HeaderValue::from_static(""))
}

/// The connection that carries a response. When it is dropped, an HTTP/1 connection goes
/// back to the pool once hyper is ready to send another request on it (its response's body
/// read to the end), unless it was [closed](Carrier::close).
pub(crate) struct Carrier {
    pool: Arc<Pool>,
    key: HostKey,
    conn: Option<Conn>,
    closed: bool,
}

impl Carrier {
    /// Close the connection if it is HTTP/1: it never carries another request. (Dropping an
    /// unfinished HTTP/1 body is not enough: hyper then reads on for what is already buffered
    /// and keeps the connection if that happens to finish the body, so whether a large
    /// remainder costs its download would depend on timing. An HTTP/2 body is one stream of
    /// a shared connection; dropping it resets the stream alone.)
    pub(crate) fn close(&mut self) {
        self.closed = true;
    }
}

impl fmt::Debug for Carrier {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Carrier")
            .field("host", &self.key.authority)
            .field("closed", &self.closed)
            .finish_non_exhaustive()
    }
}

impl Drop for Carrier {
    fn drop(&mut self) {
        let Some(mut conn) = self.conn.take() else {
            return;
        };
        let Sender::Http1(tx) = &conn.sender else {
            return;
        };
        if self.closed || tx.is_closed() {
            // Dropping the last sender closes the connection.
            return;
        }
        if tx.is_ready() {
            self.pool.put(&self.key, conn);
            return;
        }
        // Not ready yet: the rest of the body is still arriving, or hyper has not yet seen
        // its end. Return it when it is ready, if it ever is.
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let (pool, key) = (Arc::clone(&self.pool), self.key.clone());
        runtime.spawn(async move {
            let ready = std::future::poll_fn(|cx: &mut Context<'_>| match &mut conn.sender {
                Sender::Http1(tx) => tx.poll_ready(cx),
                Sender::Http2(_) => Poll::Ready(Ok(())),
            })
            .await;
            if ready.is_ok() {
                pool.put(&key, conn);
            }
        });
    }
}

/// A request that got no response head: its connection could not be opened (`connecting`),
/// or failed while the request was sent or its answer awaited.
#[derive(Debug)]
pub(crate) struct RequestFailed {
    connecting: bool,
    refused_http2: bool,
    cause: BoxError,
}

impl RequestFailed {
    fn connecting(cause: BoxError, refusal: Option<&Http2Refusal>) -> Self {
        RequestFailed {
            connecting: true,
            refused_http2: refusal.is_some_and(Http2Refusal::refused),
            cause,
        }
    }

    /// The connection could not be opened.
    pub(crate) fn is_connect(&self) -> bool {
        self.connecting
    }

    /// The connection showed that its server does not speak HTTP/2 (an HTTP/2-only client).
    pub(crate) fn refused_http2(&self) -> bool {
        self.refused_http2
    }
}

impl fmt::Display for RequestFailed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(if self.connecting {
            "cannot connect"
        } else {
            "the request failed"
        })
    }
}

impl std::error::Error for RequestFailed {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&*self.cause)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::transport::DnsCache;
    use karu_config::HttpSettings;

    /// A client of `version` with at most `per_host` connections to a host.
    fn client_of(version: HttpVersion, per_host: usize) -> HttpClient {
        let settings = HttpSettings::default();
        HttpClient::new(
            Arc::new(TlsConfig::new(&settings).unwrap()),
            Resolver::new(Arc::new(DnsCache::new(Duration::from_secs(60)))),
            Duration::from_secs(30),
            version,
            per_host,
        )
    }

    /// A pool of an HTTP/2-only client: one connection per host, opened by one request while
    /// the others wait for it.
    fn http2_pool() -> HttpClient {
        client_of(HttpVersion::Http2, 2)
    }

    #[test]
    fn a_request_that_gives_up_before_it_opens_the_first_connection_lets_the_waiting_go() {
        let client = http2_pool();
        let pool = &client.pool;
        let key = HostKey::of(&"https://127.0.0.1:9/a".parse().unwrap()).unwrap();
        // The first request is told to open the host's connection; the next waits for it.
        let opener = pool.take(&key, false).err().unwrap();
        assert!(matches!(opener, Step::Open(_, Some(_))));
        let Err(Step::Wait(mut waiting)) = pool.take(&key, false) else {
            panic!("a second request waits for the first connection");
        };
        assert!(matches!(
            waiting.try_recv(),
            Err(oneshot::error::TryRecvError::Empty)
        ));
        // The opener gives up before it connects (cancelled while the TLS roots load): the
        // waiting request is let go, and the next one opens the connection itself instead of
        // waiting for one nobody opens.
        drop(opener);
        assert!(matches!(
            waiting.try_recv(),
            Err(oneshot::error::TryRecvError::Closed)
        ));
        assert!(matches!(
            pool.take(&key, false),
            Err(Step::Open(_, Some(_)))
        ));
    }

    fn get(url: &str) -> Request<Body> {
        let mut request = Request::new(Body::new());
        *request.uri_mut() = url.parse().unwrap();
        request
    }

    #[test]
    fn a_request_counts_as_sent_once_a_connection_takes_it_and_not_while_it_waits_for_one() {
        use std::io::{Read as _, Write as _};
        use std::sync::atomic::AtomicUsize;

        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let client = client_of(HttpVersion::Http1, 1);
        let dispatched = AtomicUsize::new(0);
        let count = || {
            dispatched.fetch_add(1, Ordering::Relaxed);
        };

        // A server that accepts and never answers the TLS handshake: the request waits for its
        // connection, and is given up (as a duplicate is when its original answers) there.
        let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let silent_addr = silent.local_addr().unwrap();
        let (accepted_tx, accepted_rx) = tokio::sync::oneshot::channel();
        let holder = std::thread::spawn(move || {
            let (stream, _) = silent.accept().unwrap();
            accepted_tx.send(()).unwrap();
            stream
        });
        runtime.block_on(async {
            let request = client.request(get(&format!("https://{silent_addr}/o")), true, count);
            tokio::select! {
                _ = request => panic!("the request finished without a TLS handshake"),
                accepted = accepted_rx => accepted.unwrap(),
            }
        });
        assert_eq!(
            dispatched.load(Ordering::Relaxed),
            0,
            "counted without a connection"
        );
        drop(holder.join().unwrap());

        // A server that answers: the request is counted once.
        let server = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = server.local_addr().unwrap();
        let answering = std::thread::spawn(move || {
            let (mut stream, _) = server.accept().unwrap();
            let mut head = Vec::new();
            let mut byte = [0u8; 1];
            while !head.ends_with(b"\r\n\r\n") {
                stream.read_exact(&mut byte).unwrap();
                head.push(byte[0]);
            }
            stream
                .write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok")
                .unwrap();
            String::from_utf8(head).unwrap()
        });
        let status = runtime.block_on(async {
            let (response, _carrier) = client
                .request(get(&format!("http://{addr}/o")), false, count)
                .await
                .unwrap();
            response.status()
        });
        assert_eq!(status, 200);
        assert!(answering.join().unwrap().starts_with("GET /o HTTP/1.1\r\n"));
        assert_eq!(dispatched.load(Ordering::Relaxed), 1);
    }

    #[test]
    fn the_host_header_names_the_port_only_when_it_is_not_the_schemes_default() {
        let header = |uri: &str| host_header(&uri.parse().unwrap());
        assert_eq!(header("http://example.com/a"), "example.com");
        assert_eq!(header("http://example.com:80/a"), "example.com");
        assert_eq!(header("http://example.com:443/a"), "example.com:443");
        assert_eq!(header("https://example.com:443/a"), "example.com");
        assert_eq!(header("https://example.com:80/a"), "example.com:80");
        assert_eq!(header("http://127.0.0.1:8080/a?b"), "127.0.0.1:8080");
        assert_eq!(header("http://[::1]:9000/"), "[::1]:9000");
    }
}
