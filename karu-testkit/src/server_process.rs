//! What the harnesses of real servers (SeaweedFS, fake-gcs-server, Azurite) share: one raw
//! HTTP/1.1 exchange for readiness checks and uploads, and stopping a server with every
//! process it started.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// One HTTP/1.1 request on a new connection (`Connection: close`): the status and the body as
/// text. `target` is the path with its query; `headers` are sent as given (a body needs its
/// `Content-Length` among them).
pub(crate) fn exchange(
    addr: SocketAddr,
    method: &str,
    target: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> io::Result<(u16, String)> {
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_millis(500))?;
    stream.set_read_timeout(Some(Duration::from_secs(10)))?;
    stream.set_write_timeout(Some(Duration::from_secs(10)))?;
    let mut head = format!("{method} {target} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n");
    for (name, value) in headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str("\r\n");
    stream.write_all(head.as_bytes())?;
    stream.write_all(body)?;
    let mut response = Vec::new();
    stream.read_to_end(&mut response)?;
    let text = String::from_utf8_lossy(&response);
    let status = text
        .strip_prefix("HTTP/1.1 ")
        .and_then(|rest| rest.get(..3))
        .and_then(|code| code.parse().ok())
        .ok_or_else(|| io::Error::other(format!("not an HTTP response: {text:.200}")))?;
    let body = text
        .split_once("\r\n\r\n")
        .map_or("", |(_, body)| body)
        .to_owned();
    Ok((status, body))
}

/// Kill a server started as the leader of its own process group (`process_group(0)`), with
/// every process it started, and reap the leader. The group id is still ours: the leader
/// stays an unreaped child until `wait`, and Linux hands out no pid still used as a group id.
pub(crate) fn kill_group(child: &mut Child) {
    let _ = Command::new("kill")
        .args(["-KILL", "--", &format!("-{}", child.id())])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
    // If `kill` is not installed, at least the leader dies.
    let _ = child.kill();
    let _ = child.wait();
}
