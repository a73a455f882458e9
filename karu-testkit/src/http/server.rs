//! The server's own runtime: a background thread running a two-worker tokio runtime that
//! accepts connections and serves them with hyper (HTTP/1.1, and h2 when enabled).

use std::io;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use hyper_util::server::graceful::GracefulConnection;
use tokio::io::AsyncReadExt;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::oneshot;
use tokio_rustls::TlsAcceptor;

use super::conn::{ConnIo, ConnShared};
use super::handler;
use super::state::Shared;
use super::timer::TimerThread;

/// How connections are served.
#[derive(Clone)]
pub(crate) struct Protocol {
    pub(crate) tls: Option<TlsAcceptor>,
    pub(crate) http2: bool,
}

/// The running server thread.
#[derive(Debug)]
pub(crate) struct Running {
    shutdown: Option<oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
    timer: TimerThread,
}

impl Running {
    /// Stops accepting, drops every connection and joins the thread.
    pub(crate) fn stop(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        if let Some(thread) = self.thread.take()
            && thread.join().is_err()
            && !std::thread::panicking()
        {
            panic!("karu-testkit: the mock server thread panicked");
        }
        self.timer.stop();
    }
}

/// Starts serving `listener` on a new thread (named `kmock-PORT`, its workers `kmock-PORT-w`);
/// `timer` (`kmock-PORT-t`) is stopped after it.
pub(crate) fn spawn(
    listener: std::net::TcpListener,
    shared: Arc<Shared>,
    protocol: Protocol,
    timer: TimerThread,
) -> io::Result<Running> {
    let (shutdown, thread) = start_runtime(listener, shared, protocol)?;
    Ok(Running {
        shutdown: Some(shutdown),
        thread: Some(thread),
        timer,
    })
}

type Started = (oneshot::Sender<()>, JoinHandle<()>);

fn start_runtime(
    listener: std::net::TcpListener,
    shared: Arc<Shared>,
    protocol: Protocol,
) -> io::Result<Started> {
    let port = listener.local_addr()?.port();
    listener.set_nonblocking(true)?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name(format!("kmock-{port}-w"))
        .enable_all()
        .build()?;
    let (tx, rx) = oneshot::channel();
    let thread = std::thread::Builder::new()
        .name(format!("kmock-{port}"))
        .spawn(move || {
            runtime.block_on(accept_loop(listener, shared, protocol, rx));
            // Dropping the runtime drops every connection task, answered or not.
            runtime.shutdown_timeout(Duration::from_secs(5));
        })?;
    Ok((tx, thread))
}

async fn accept_loop(
    listener: std::net::TcpListener,
    shared: Arc<Shared>,
    protocol: Protocol,
    mut shutdown: oneshot::Receiver<()>,
) {
    let listener = match TcpListener::from_std(listener) {
        Ok(listener) => listener,
        Err(error) => {
            tracing::error!(%error, "karu-testkit: cannot register the listener");
            return;
        }
    };
    loop {
        tokio::select! {
            _ = &mut shutdown => return,
            accepted = listener.accept() => match accepted {
                Ok((tcp, _peer)) => {
                    let _ = tcp.set_nodelay(true);
                    let id = shared.next_connection();
                    if shared.take_silent() {
                        tokio::spawn(hold_silent(tcp));
                    } else {
                        tokio::spawn(serve(tcp, id, shared.clone(), protocol.clone()));
                    }
                }
                Err(error) => {
                    // Out of file descriptors and the like: back off instead of spinning.
                    tracing::warn!(%error, "karu-testkit: accept failed");
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
            },
        }
    }
}

async fn serve(tcp: TcpStream, id: u64, shared: Arc<Shared>, protocol: Protocol) {
    let conn = Arc::new(ConnShared::new(id));
    let io = ConnIo::new(tcp, conn.clone());
    match protocol.tls {
        Some(acceptor) => match acceptor.accept(io).await {
            Ok(stream) => serve_http(TokioIo::new(stream), shared, conn, protocol.http2).await,
            Err(error) => tracing::debug!(%error, "karu-testkit: TLS handshake failed"),
        },
        None => serve_http(TokioIo::new(io), shared, conn, protocol.http2).await,
    }
}

/// Reads and discards whatever the client sends (a TLS ClientHello, a request) and never
/// answers, until the client closes the connection or the server stops.
async fn hold_silent(mut tcp: TcpStream) {
    let mut sink = [0u8; 4096];
    while let Ok(n) = tcp.read(&mut sink).await {
        if n == 0 {
            return;
        }
    }
}

async fn serve_http<I>(io: I, shared: Arc<Shared>, conn: Arc<ConnShared>, http2: bool)
where
    I: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
{
    let service_conn = conn.clone();
    let service =
        service_fn(move |request| handler::handle(shared.clone(), service_conn.clone(), request));
    if http2 {
        let builder = auto::Builder::new(TokioExecutor::new());
        run_connection(builder.serve_connection(io, service), &conn).await;
    } else {
        let connection = http1::Builder::new().serve_connection(io, service);
        run_connection(connection, &conn).await;
    }
}

/// Serves `connection` until it ends or is killed. At the request limit it asks the connection
/// to end gracefully: HTTP/1.1 keeps no connection alive past the answers in hand; HTTP/2 sends
/// GOAWAY, then finishes the streams it accepted (also those the client opened before it read
/// the GOAWAY).
async fn run_connection<C: GracefulConnection>(connection: C, conn: &ConnShared) {
    tokio::pin!(connection);
    let mut ending = false;
    loop {
        tokio::select! {
            _ = connection.as_mut() => break,
            () = conn.killed() => break,
            () = conn.ending(), if !ending => {
                ending = true;
                connection.as_mut().graceful_shutdown();
            }
        }
    }
}
