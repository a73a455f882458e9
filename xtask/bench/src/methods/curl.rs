//! curl, the reference a user knows: one `curl` process per batch, fetching every piece's range
//! into `/dev/null` with `--parallel`, as many transfers at once as Karu's concurrency limit.
//! Its transfers come from a config file written on its stdin (`-K -`: a `url`, `range` and
//! `output` per transfer, separated by `next`). Its wall is the process's, from its start to
//! its exit, and its CPU time (user + system) comes from `wait4`. Its bytes go to `/dev/null`:
//! they are counted from the server's request log (every piece's range answered in full), not
//! checked. Over TLS it trusts the mock's CA from a file of its own, removed when the session
//! ends, and speaks HTTP/1.1 unless the server offers HTTP/2.

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Instant;

use super::{ChildRun, Context, Outcome, Session};
use crate::workload::{Kind, Workload};

/// How curl speaks to the server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct CurlTransport {
    /// The CA file curl trusts (HTTPS only).
    pub(crate) ca_file: Option<PathBuf>,
    /// Whether the server offers HTTP/2 (by ALPN over TLS, by prior knowledge in cleartext).
    pub(crate) http2: bool,
}

impl CurlTransport {
    /// The option that picks curl's HTTP version.
    fn version_option(&self) -> &'static str {
        match (self.http2, self.ca_file.is_some()) {
            (false, _) => "http1.1",
            (true, true) => "http2",
            (true, false) => "http2-prior-knowledge",
        }
    }
}

/// curl's config for one batch: every piece of `workload` (on the server at `base`,
/// `http://127.0.0.1:PORT`) as a transfer of its own, in the workload's order, each with its
/// options (curl's per-transfer options do not carry over `next`).
pub(crate) fn config(workload: &Workload, base: &str, transport: &CurlTransport) -> String {
    let mut out = String::new();
    for (i, piece) in workload.pieces.iter().enumerate() {
        if i > 0 {
            out.push_str("next\n");
        }
        let path = &workload.objects[piece.object].path;
        out.push_str(&format!("url = \"{base}{path}\"\n"));
        out.push_str(&format!(
            "range = \"{}-{}\"\n",
            piece.offset,
            piece.offset + piece.length - 1
        ));
        out.push_str("output = \"/dev/null\"\n");
        out.push_str("fail\n");
        out.push_str("noproxy = \"*\"\n");
        out.push_str(transport.version_option());
        out.push('\n');
        if let Some(ca) = &transport.ca_file {
            out.push_str(&format!("cacert = \"{}\"\n", ca.display()));
        }
    }
    out
}

/// The arguments of the `curl` command (the transfers come on its stdin). `-q` (first: no
/// `.curlrc`), `--parallel` with `in_flight` transfers at once, opening connections at once
/// rather than waiting to multiplex on one.
pub(crate) fn arguments(in_flight: usize) -> Vec<String> {
    [
        "-q",
        "--silent",
        "--show-error",
        "--parallel",
        "--parallel-immediate",
        "--parallel-max",
        &in_flight.to_string(),
        "--config",
        "-",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

/// `curl --version`'s first line, shortened ([`short_version`]), or why curl cannot be run
/// here.
pub(crate) fn version() -> Result<String, String> {
    let out = Command::new("curl")
        .arg("--version")
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("curl cannot be run: {e}"))?;
    if !out.status.success() {
        return Err(format!("`curl --version` failed: {}", out.status));
    }
    let text = String::from_utf8_lossy(&out.stdout);
    Ok(short_version(text.lines().next().unwrap_or("curl")))
}

/// The program, its version, libcurl's and the TLS library after it, of the first line of
/// `curl --version` (the other libraries left out).
fn short_version(line: &str) -> String {
    let words: Vec<&str> = line.split_whitespace().collect();
    let mut kept: Vec<&str> = words.iter().take(2).copied().collect();
    if let Some(at) = words.iter().position(|w| w.starts_with("libcurl/")) {
        kept.extend(words.iter().skip(at).take(2));
    }
    kept.join(" ")
}

/// A CA file written for curl, removed when dropped.
struct CaFile(PathBuf);

impl Drop for CaFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

pub(super) struct CurlSession<'a> {
    ctx: Context<'a>,
    in_flight: usize,
    transport: CurlTransport,
    /// The next batch's config, written before the clock starts.
    config: Option<String>,
    _ca: Option<CaFile>,
}

impl<'a> CurlSession<'a> {
    pub(super) fn open(ctx: Context<'a>, in_flight: usize) -> Result<Self, String> {
        if !matches!(ctx.workload.kind, Kind::Reads) {
            return Err("curl is measured on batches of reads only".into());
        }
        let current = crate::transport::current();
        let ca = match &current.tls {
            None => None,
            Some((pem, _)) => {
                let path = std::env::temp_dir()
                    .join(format!("karu-bench-curl-ca-{}.pem", std::process::id()));
                std::fs::write(&path, pem)
                    .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
                Some(CaFile(path))
            }
        };
        Ok(CurlSession {
            ctx,
            in_flight: in_flight.max(1),
            transport: CurlTransport {
                ca_file: ca.as_ref().map(|c| c.0.clone()),
                http2: current.http2,
            },
            config: None,
            _ca: ca,
        })
    }
}

impl Session for CurlSession<'_> {
    fn prepare(&mut self) {
        self.config = Some(config(
            self.ctx.workload,
            &self.ctx.server.base_url(),
            &self.transport,
        ));
    }

    fn run(&mut self) -> Result<Outcome, String> {
        let config = self.config.take().ok_or("no curl config was prepared")?;
        let mut command = Command::new("curl");
        command
            .args(arguments(self.in_flight))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let started = Instant::now();
        let mut child = command
            .spawn()
            .map_err(|e| format!("cannot start curl: {e}"))?;
        // curl reads its whole config before the first transfer; closing stdin ends it.
        if let Some(mut stdin) = child.stdin.take() {
            stdin
                .write_all(config.as_bytes())
                .map_err(|e| format!("cannot give curl its config: {e}"))?;
        }
        let ended = crate::large::wait_with_usage(child)?;
        let wall = started.elapsed();
        // A failed transfer shows in the count of the server's log; curl's words go with it.
        let error = (!ended.success).then(|| format!("curl failed: {}", ended.stderr.trim()));
        Ok(Outcome {
            wall,
            pieces: Vec::new(),
            done: Vec::new(),
            karu: None,
            child: Some(ChildRun {
                cpu: ended.cpu,
                error,
            }),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::{Object, Piece};

    fn two_pieces() -> Workload {
        Workload {
            name: "tensors",
            description: String::new(),
            objects: vec![Object {
                path: "/tensors.bin".into(),
                size: 1 << 30,
            }],
            kind: Kind::Reads,
            pieces: vec![
                Piece {
                    object: 0,
                    offset: 0,
                    length: 1 << 20,
                },
                Piece {
                    object: 0,
                    offset: 5_000_000,
                    length: 10,
                },
            ],
        }
    }

    #[test]
    fn the_config_has_one_transfer_per_piece_with_its_inclusive_range() {
        let cleartext = CurlTransport {
            ca_file: None,
            http2: false,
        };
        assert_eq!(
            config(&two_pieces(), "http://127.0.0.1:8080", &cleartext),
            "url = \"http://127.0.0.1:8080/tensors.bin\"\n\
             range = \"0-1048575\"\n\
             output = \"/dev/null\"\n\
             fail\n\
             noproxy = \"*\"\n\
             http1.1\n\
             next\n\
             url = \"http://127.0.0.1:8080/tensors.bin\"\n\
             range = \"5000000-5000009\"\n\
             output = \"/dev/null\"\n\
             fail\n\
             noproxy = \"*\"\n\
             http1.1\n"
        );
        let tls = CurlTransport {
            ca_file: Some(PathBuf::from("/tmp/ca.pem")),
            http2: false,
        };
        let text = config(&two_pieces(), "https://127.0.0.1:8443", &tls);
        assert_eq!(
            text.matches("http1.1\ncacert = \"/tmp/ca.pem\"\n").count(),
            2
        );
        let h2 = CurlTransport {
            ca_file: Some(PathBuf::from("/tmp/ca.pem")),
            http2: true,
        };
        let text = config(&two_pieces(), "https://127.0.0.1:8443", &h2);
        assert_eq!(text.matches("\nhttp2\n").count(), 2);
        assert!(!text.contains("http1.1"));
    }

    #[test]
    fn the_version_keeps_curl_and_its_tls_library() {
        assert_eq!(
            short_version(
                "curl 7.88.1 (x86_64-pc-linux-gnu) libcurl/7.88.1 OpenSSL/3.0.19 zlib/1.2.13 \
                 brotli/1.0.9"
            ),
            "curl 7.88.1 libcurl/7.88.1 OpenSSL/3.0.19"
        );
        assert_eq!(short_version("curl 8.0"), "curl 8.0");
        assert_eq!(short_version(""), "");
    }

    #[test]
    fn curl_runs_in_parallel_from_its_stdin() {
        assert_eq!(
            arguments(64).join(" "),
            "-q --silent --show-error --parallel --parallel-immediate --parallel-max 64 \
             --config -"
        );
    }
}
