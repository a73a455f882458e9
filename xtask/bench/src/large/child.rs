//! `karu-bench large-client`: one read of the `large` workload by a Rust method, in a process
//! of its own: Karu's `Client::read_into` a caller buffer, `Client::read` into Karu's own, or a
//! plain hyper client copying one response into a caller buffer. The read alone is timed;
//! every byte is checked after it.

use std::time::Instant;

use clap::{Args, ValueEnum};
use karu_testkit::fill_pattern;

use super::process::{REPORT, own_usage};

/// Options of `karu-bench large-client` (run by `large`, one read per process).
#[derive(Debug, Clone, Args)]
pub(crate) struct LargeClientArgs {
    /// The object's URL (`http://127.0.0.1:PORT/large-…`).
    #[arg(long)]
    url: String,
    /// Its size in bytes.
    #[arg(long)]
    size: u64,
    /// `karu-into` (`Client::read_into` a caller buffer), `karu-read` (`Client::read`) or
    /// `plain` (one hyper request, its body copied into a caller buffer).
    #[arg(long)]
    method: String,
    /// The caller's buffer (`karu-into` and `plain`): `fresh`, allocated and never written
    /// (its pages fault in as the bytes land), or `touched`, every page written before the
    /// timing starts.
    #[arg(long, value_enum, default_value_t = Buffer::Fresh)]
    buffer: Buffer,
}

/// The state of a caller's buffer when its read starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum Buffer {
    /// Allocated and never written: fresh pages from the kernel, faulted in by the read.
    Fresh,
    /// Every page written before the read.
    Touched,
}

impl Buffer {
    pub(super) fn name(self) -> &'static str {
        match self {
            Buffer::Fresh => "fresh",
            Buffer::Touched => "touched",
        }
    }

    /// A buffer of `size` bytes in this state. A fresh one is `calloc`ed (large ones are
    /// fresh mappings, whose pages the kernel zeroes on their first write); a touched one has
    /// had every page written.
    fn allocate(self, size: usize) -> Vec<u8> {
        match self {
            Buffer::Fresh => vec![0u8; size],
            Buffer::Touched => vec![1u8; size],
        }
    }
}

/// `karu-bench large-client`: one read of the whole object, timed, then every byte checked.
pub(crate) fn client(args: &LargeClientArgs) -> Result<(), String> {
    let size = usize::try_from(args.size).map_err(|_| "the object does not fit in memory")?;
    let (held, wall, cpu, rss) = match args.method.as_str() {
        "karu-into" | "karu-read" => {
            let client = crate::methods::karu_client()?;
            let locator = client.locate(&args.url).map_err(|e| e.to_string())?;
            let mut buffer = (args.method == "karu-into").then(|| args.buffer.allocate(size));
            let cpu_before = own_usage().0;
            let started = Instant::now();
            let held = match buffer.take() {
                Some(mut buffer) => {
                    client
                        .read_into(&locator, 0, &mut buffer)
                        .map_err(|e| e.to_string())?;
                    buffer
                }
                None => client
                    .read(&locator, 0, args.size)
                    .map_err(|e| e.to_string())?,
            };
            let wall = started.elapsed();
            let (cpu_after, rss) = own_usage();
            (held, wall, cpu_after - cpu_before, rss)
        }
        "plain" => {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .map_err(|e| format!("cannot start a tokio runtime: {e}"))?;
            let mut buffer = args.buffer.allocate(size);
            let cpu_before = own_usage().0;
            let started = Instant::now();
            runtime.block_on(plain_read_into(&args.url, &mut buffer))?;
            let wall = started.elapsed();
            let (cpu_after, rss) = own_usage();
            (buffer, wall, cpu_after - cpu_before, rss)
        }
        other => {
            return Err(format!(
                "unknown method {other:?} (karu-into, karu-read or plain)"
            ));
        }
    };
    check(&held, size)?;
    println!("{REPORT} {} {} {rss}", wall.as_nanos(), cpu.as_nanos());
    Ok(())
}

/// Every byte of `held` against the pattern of a virtual object of `size` bytes.
fn check(held: &[u8], size: usize) -> Result<(), String> {
    if held.len() != size {
        return Err(format!("{} bytes read of {size}", held.len()));
    }
    let mut expected = vec![0u8; 1 << 20];
    let mut offset = 0u64;
    for chunk in held.chunks(expected.len()) {
        let expected = &mut expected[..chunk.len()];
        fill_pattern(offset, expected);
        if expected != chunk {
            return Err(format!("wrong bytes in the MiB at {offset}"));
        }
        offset += chunk.len() as u64;
    }
    Ok(())
}

/// One GET of the whole object over a new HTTP/1.1 connection, its body copied into
/// `buffer` frame by frame (hyper's `Bytes` into the caller's memory: the one copy a plain
/// client makes).
async fn plain_read_into(url: &str, buffer: &mut [u8]) -> Result<(), String> {
    use bytes::Bytes;
    use http_body_util::{BodyExt, Empty};
    let rest = url
        .strip_prefix("http://")
        .ok_or_else(|| format!("not an http URL: {url}"))?;
    let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    let stream = tokio::net::TcpStream::connect(authority)
        .await
        .map_err(|e| format!("connect {authority}: {e}"))?;
    stream
        .set_nodelay(true)
        .map_err(|e| format!("TCP_NODELAY: {e}"))?;
    let (mut sender, connection) =
        hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream))
            .await
            .map_err(|e| format!("handshake: {e}"))?;
    tokio::spawn(async move {
        let _ = connection.await;
    });
    let request = http::Request::get(path)
        .header(http::header::HOST, authority)
        .body(Empty::<Bytes>::new())
        .map_err(|e| e.to_string())?;
    let response = sender
        .send_request(request)
        .await
        .map_err(|e| format!("request: {e}"))?;
    if response.status() != http::StatusCode::OK {
        return Err(format!("status {}", response.status()));
    }
    let mut body = response.into_body();
    let mut filled = 0usize;
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|e| format!("body: {e}"))?;
        if let Ok(data) = frame.into_data() {
            let end = filled + data.len();
            let Some(into) = buffer.get_mut(filled..end) else {
                return Err("more bytes than the object".into());
            };
            into.copy_from_slice(&data);
            filled = end;
        }
    }
    if filled != buffer.len() {
        return Err(format!("{filled} bytes of {}", buffer.len()));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_check_finds_a_wrong_byte() {
        let mut held = vec![0u8; 3 << 20];
        fill_pattern(0, &mut held);
        assert_eq!(check(&held, 3 << 20), Ok(()));
        held[(2 << 20) + 5] ^= 1;
        assert_eq!(
            check(&held, 3 << 20),
            Err(format!("wrong bytes in the MiB at {}", 2 << 20))
        );
        assert!(check(&held[..10], 3 << 20).is_err());
    }
}
