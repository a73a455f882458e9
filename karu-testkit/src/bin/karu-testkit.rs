//! `karu-testkit nginx DIR`: a real nginx (the testkit's harness) serving `DIR` on 127.0.0.1;
//! it prints its base URL, answers each `log` line on stdin with its access log as one line
//! of JSON (`["METHOD URI \"RANGE\" STATUS BYTES CONNECTION", ...]`), and stops when stdin
//! closes.
//!
//! `karu-testkit seaweedfs`: a real SeaweedFS S3 server (the testkit's harness) on 127.0.0.1,
//! with a bucket `karu-python`; it prints one line of JSON (`endpoint`, `region`,
//! `access_key_id`, `secret_access_key`, `prefix`: the `s3://` address objects are put
//! under), answers each `put NAME LOCAL_FILE` line on stdin by uploading the file's bytes as
//! `<prefix>/NAME` (a line `ok`, or `error: ...`), and stops (killing SeaweedFS) when stdin
//! closes. The keys are the harness's fixed test keys of a loopback server.
//!
//! `karu-testkit credentials`: the mocks that check credentials (GCS, Azure, the Hugging Face
//! Hub and S3), each holding objects `a` and `b` (64 KiB: byte `i` is `(i * 41 + i / 97) % 256`) at
//! `gs://bkt/`, `az://data/`, `hf://org/model/` (a gated repository) and `s3://bucket/`, readable
//! only with the credentials it prints as one line of JSON (`gcs`: `endpoint`, `token`;
//! `azure`: `endpoint`, `account`, `token`; `hf`: `endpoint`, `token`; `s3`: `endpoint`,
//! `access_key_id`, `secret_access_key`); it answers each `log` line on stdin with what the
//! mocks saw so far, as one line of JSON (`gcs`: the identity of each request;
//! `azure`: `[identity, failure]` of each; `hf`: the `Authorization` of each Hub request and
//! `hf_leaks`, those the CDN got; `s3`: the access key id each request was signed with and
//! `s3_signature_failures`), and stops when stdin closes.
//!
//! `karu-testkit serve`: the testkit's mock object server as a process, for tests in other
//! languages (the Python binding's pytest suite). It listens on 127.0.0.1 (an ephemeral
//! port), prints its base URL on the first line of stdout, and stops when its stdin closes
//! (so it never outlives the test process that started it).
//!
//! Tests drive it over HTTP, under `/_testkit/` (requests there are not in the log it serves):
//! - `PUT /_testkit/objects/<path>`: store the request body (at most 64 KiB) as the object at
//!   `/<path>`; with `?file=<local path>`, the file's bytes instead; with `?virtual=<size>`,
//!   a virtual object of that size (the testkit's byte pattern);
//! - `DELETE /_testkit/objects/<path>`: remove it;
//! - `GET /_testkit/requests`: the request log as JSON, `[{"method", "path", "range",
//!   "status"}]` (`range` as `[first, last]`, inclusive, or null);
//! - `DELETE /_testkit/requests`: clear the log and the peak;
//! - `GET /_testkit/peak`: `{"peak": n}`, the most requests in flight at once since the log
//!   was last cleared (control requests included, so at least 1);
//! - `PUT /_testkit/latency?ms=<n>`: set the per-request latency (control requests wait it
//!   too);
//! - `PUT /_testkit/never-answer?path=<path>`: requests for `<path>` get no answer (the
//!   connection stays open), until `DELETE /_testkit/faults`; with `&times=<n>`, only the
//!   next `n` of them;
//! - `PUT /_testkit/tail?ms=<n>&share=<fraction>&seed=<s>`: a heavy tail, `n` ms more before
//!   the answer of a seeded random share of the requests (`share=0.02`: about one in fifty);
//!   with `median_ms=<m>&p99_ms=<p>` instead of `ms`, a Pareto-distributed delay with that
//!   median and 99th percentile ([`Fault::ParetoLatency`]); until `DELETE /_testkit/faults`;
//! - `PUT /_testkit/barrier?path=<path>&round=<n>`: requests for `<path>` are held until `n`
//!   of them have arrived, then answered one at a time ([`Fault::Barrier`]), round after
//!   round, until `DELETE /_testkit/faults`;
//! - `PUT /_testkit/etag?path=<path>[&value=<tag>]`: serve the object at `<path>` with the
//!   ETag `<tag>` (percent-encoded: `W%2F%22x%22` is `W/"x"`), or with none;
//! - `PUT /_testkit/change-content?path=<path>`: give the object a new version before each
//!   answer ([`Fault::ChangeContent`]: every byte one more, the ETag of the same kind), until
//!   `DELETE /_testkit/faults`; with `&times=<n>`, before the next `n` answers only.

use std::io::{BufRead, Write};
use std::sync::{Arc, Weak};
use std::time::Duration;

use karu_testkit::{Fault, FaultRule, GateResponse, MockServer, RequestHead, Route};

const CONTROL: &str = "/_testkit/";

#[derive(Debug)]
struct Control {
    server: Weak<MockServer>,
}

impl Route for Control {
    fn respond(&self, request: &RequestHead) -> Option<GateResponse> {
        let rest = request.path.strip_prefix(CONTROL)?;
        let server = self.server.upgrade()?;
        Some(control(&server, request, rest).unwrap_or_else(|why| GateResponse::new(400, why)))
    }
}

fn query<'a>(request: &'a RequestHead, name: &str) -> Option<&'a str> {
    request
        .query
        .as_deref()?
        .split('&')
        .find_map(|pair| pair.strip_prefix(name)?.strip_prefix('='))
}

fn control(server: &MockServer, request: &RequestHead, rest: &str) -> Result<GateResponse, String> {
    let method = request.method.as_str();
    if let Some(path) = rest.strip_prefix("objects/") {
        let path = format!("/{path}");
        return match method {
            "PUT" => {
                if let Some(file) = query(request, "file") {
                    let file = percent_decode(file);
                    let bytes = std::fs::read(&file).map_err(|e| format!("{file}: {e}"))?;
                    server.insert(&path, bytes);
                } else if let Some(size) = query(request, "virtual") {
                    let size = size.parse().map_err(|_| format!("bad size {size:?}"))?;
                    server.insert_virtual(&path, size);
                } else {
                    server.insert(&path, request.body.clone());
                }
                Ok(GateResponse::new(204, ""))
            }
            "DELETE" => {
                server.remove(&path);
                Ok(GateResponse::new(204, ""))
            }
            _ => Err(format!("{method} is not a control method for objects")),
        };
    }
    match (method, rest) {
        ("GET", "requests") => {
            let log: Vec<serde_json::Value> = server
                .requests()
                .into_iter()
                .filter(|r| !r.path.starts_with(CONTROL))
                .map(|r| {
                    serde_json::json!({
                        "method": r.method,
                        "path": r.path,
                        "range": r.byte_range.map(|(a, b)| [a, b]),
                        "status": r.status,
                    })
                })
                .collect();
            Ok(
                GateResponse::new(200, serde_json::Value::from(log).to_string())
                    .header("content-type", "application/json"),
            )
        }
        ("DELETE", "requests") => {
            server.take_requests();
            server.reset_max_in_flight();
            Ok(GateResponse::new(204, ""))
        }
        ("GET", "peak") => Ok(GateResponse::new(
            200,
            serde_json::json!({ "peak": server.max_in_flight() }).to_string(),
        )
        .header("content-type", "application/json")),
        ("PUT", "latency") => {
            let ms: u64 = query(request, "ms")
                .and_then(|ms| ms.parse().ok())
                .ok_or("latency needs ?ms=<n>")?;
            server.set_latency(Duration::from_millis(ms));
            Ok(GateResponse::new(204, ""))
        }
        ("PUT", "bandwidth") => {
            // `?bytes_per_sec=<n>` caps the bytes sent per second across all connections
            // (a link); `0` removes the cap.
            let rate: u64 = query(request, "bytes_per_sec")
                .and_then(|rate| rate.parse().ok())
                .ok_or("bandwidth needs ?bytes_per_sec=<n>")?;
            server.set_bandwidth((rate > 0).then_some(rate));
            Ok(GateResponse::new(204, ""))
        }
        ("PUT", "never-answer") => {
            let path = query(request, "path").ok_or("never-answer needs ?path=<path>")?;
            let mut rule = FaultRule::new(Fault::NeverAnswer).path(percent_decode(path));
            if let Some(times) = query(request, "times") {
                rule = rule.times(times.parse().map_err(|_| format!("bad times {times:?}"))?);
            }
            server.add_fault(rule);
            Ok(GateResponse::new(204, ""))
        }
        ("PUT", "barrier") => {
            let path = query(request, "path").ok_or("barrier needs ?path=<path>")?;
            let round: u64 = query(request, "round")
                .and_then(|n| n.parse().ok())
                .ok_or("barrier needs &round=<n>")?;
            server.add_fault(FaultRule::new(Fault::Barrier(round)).path(percent_decode(path)));
            Ok(GateResponse::new(204, ""))
        }
        ("PUT", "etag") => {
            let path = query(request, "path").ok_or("etag needs ?path=<path>")?;
            let value = query(request, "value").map(percent_decode);
            if let Some(tag) = &value
                && !tag.bytes().all(|b| (0x20..0x7f).contains(&b))
            {
                return Err(format!("{tag:?} is not an ETag header value"));
            }
            server.set_etag(&percent_decode(path), value.as_deref());
            Ok(GateResponse::new(204, ""))
        }
        ("PUT", "change-content") => {
            let path = query(request, "path").ok_or("change-content needs ?path=<path>")?;
            let mut rule = FaultRule::new(Fault::ChangeContent).path(percent_decode(path));
            if let Some(times) = query(request, "times") {
                rule = rule.times(times.parse().map_err(|_| format!("bad times {times:?}"))?);
            }
            server.add_fault(rule);
            Ok(GateResponse::new(204, ""))
        }
        ("PUT", "tail") => {
            server.add_fault(tail_rule(request)?);
            Ok(GateResponse::new(204, ""))
        }
        ("DELETE", "faults") => {
            server.clear_faults();
            Ok(GateResponse::new(204, ""))
        }
        _ => Err(format!("no control {method} {CONTROL}{rest}")),
    }
}

/// The rule of `PUT /_testkit/tail`: a fixed or Pareto-distributed extra delay on a seeded
/// share of the requests.
fn tail_rule(request: &RequestHead) -> Result<FaultRule, String> {
    let number = |name: &str| -> Result<Option<f64>, String> {
        query(request, name)
            .map(|v| v.parse::<f64>().map_err(|_| format!("bad {name} {v:?}")))
            .transpose()
    };
    let ms = |v: f64| Duration::from_secs_f64(v.max(0.0) / 1000.0);
    let fault = match (number("ms")?, number("median_ms")?, number("p99_ms")?) {
        (Some(n), None, None) => Fault::Latency(ms(n)),
        (None, Some(median), Some(p99)) => Fault::ParetoLatency {
            median: ms(median),
            p99: ms(p99),
        },
        _ => return Err("tail needs ?ms=<n>, or ?median_ms=<m>&p99_ms=<p>".into()),
    };
    let share = number("share")?.unwrap_or(1.0);
    let seed = query(request, "seed")
        .map(|s| s.parse::<u64>().map_err(|_| format!("bad seed {s:?}")))
        .transpose()?
        .unwrap_or(0);
    Ok(FaultRule::new(fault).share(share).seed(seed))
}

/// `%XX` escapes decoded (a local path given in a query).
fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes
            .get(i + 1..i + 3)
            .and_then(|h| std::str::from_utf8(h).ok())
            .and_then(|h| u8::from_str_radix(h, 16).ok());
        match (bytes[i], hex) {
            (b'%', Some(byte)) => {
                out.push(byte);
                i += 3;
            }
            (byte, _) => {
                out.push(byte);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn nginx(root: &str) -> std::process::ExitCode {
    let nginx = match karu_testkit::nginx::Nginx::start(std::path::Path::new(root)) {
        Ok(nginx) => nginx,
        Err(e) => {
            eprintln!("karu-testkit: cannot start nginx: {e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    let mut stdout = std::io::stdout();
    if writeln!(stdout, "{}", nginx.base_url())
        .and_then(|()| stdout.flush())
        .is_err()
    {
        return std::process::ExitCode::FAILURE;
    }
    for line in std::io::stdin().lock().lines() {
        match line {
            Ok(line) if line.trim() == "log" => {
                let log = serde_json::Value::from(nginx.access_log()).to_string();
                if writeln!(stdout, "{log}")
                    .and_then(|()| stdout.flush())
                    .is_err()
                {
                    break;
                }
            }
            Ok(_) => {}
            Err(_) => break,
        }
    }
    drop(nginx);
    std::process::ExitCode::SUCCESS
}

fn seaweedfs() -> std::process::ExitCode {
    use karu_testkit::conformance::{S3Target, Target};
    use karu_testkit::seaweedfs::{self, SeaweedFs};
    if !SeaweedFs::available() {
        eprintln!(
            "karu-testkit: SeaweedFS is not installed ({})",
            seaweedfs::install_hint()
        );
        return std::process::ExitCode::FAILURE;
    }
    let weed = match SeaweedFs::start() {
        Ok(weed) => weed,
        Err(e) => {
            eprintln!("karu-testkit: cannot start SeaweedFS: {e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    let target = match S3Target::on_seaweedfs(&weed, "karu-python") {
        Ok(target) => target,
        Err(e) => {
            eprintln!("karu-testkit: {e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    let hello = serde_json::json!({
        "endpoint": weed.endpoint(),
        "region": weed.region(),
        "access_key_id": weed.access_key_id(),
        "secret_access_key": weed.secret_access_key(),
        "prefix": target.address("").trim_end_matches('/'),
    });
    let mut stdout = std::io::stdout();
    if writeln!(stdout, "{hello}")
        .and_then(|()| stdout.flush())
        .is_err()
    {
        return std::process::ExitCode::FAILURE;
    }
    for line in std::io::stdin().lock().lines() {
        let Ok(line) = line else { break };
        let answer = match line.trim().split_once(' ') {
            Some(("put", rest)) => match rest.split_once(' ') {
                Some((name, file)) => std::fs::read(file)
                    .map_err(|e| format!("{file}: {e}"))
                    .and_then(|bytes| target.put(name, &bytes))
                    .map_or_else(|e| format!("error: {e}"), |()| "ok".to_owned()),
                None => "error: put needs NAME LOCAL_FILE".to_owned(),
            },
            _ => format!("error: unknown command {line:?}"),
        };
        if writeln!(stdout, "{answer}")
            .and_then(|()| stdout.flush())
            .is_err()
        {
            break;
        }
    }
    drop(weed);
    std::process::ExitCode::SUCCESS
}

fn credentials() -> std::process::ExitCode {
    use karu_testkit::azure::AzureMock;
    use karu_testkit::gcs::GcsMock;
    use karu_testkit::hf::{HfMock, RepoAccess};
    use karu_testkit::{MockCredentials, S3Mock};

    let gcs = GcsMock::start();
    gcs.add_token("ya29.python", "user:python");
    let azure = AzureMock::start();
    let azure_token = azure.issue_token("python", Duration::from_secs(24 * 3600));
    let hf = HfMock::start();
    hf.add_token("hf_python");
    hf.create_repo("org/model", RepoAccess::Gated(vec!["hf_python".into()]));
    let s3 = S3Mock::start();
    s3.create_bucket("bucket");
    s3.add_credentials(MockCredentials::new("AKIDPYTHON", "python-secret"));
    let bytes: Vec<u8> = (0..64usize << 10)
        .map(|i| ((i * 41 + i / 97) % 256) as u8)
        .collect();
    for name in ["a", "b"] {
        gcs.insert("bkt", name, bytes.clone());
        azure.insert("data", name, bytes.clone());
        hf.insert("org/model", "main", name, bytes.clone());
        s3.insert("bucket", name, bytes.clone());
    }
    let hello = serde_json::json!({
        "gcs": {"endpoint": gcs.endpoint(), "token": "ya29.python"},
        "azure": {"endpoint": azure.endpoint(), "account": azure.account(), "token": azure_token},
        "hf": {"endpoint": hf.endpoint(), "token": "hf_python"},
        "s3": {"endpoint": s3.endpoint(), "access_key_id": "AKIDPYTHON", "secret_access_key": "python-secret"},
    });
    let mut stdout = std::io::stdout();
    if writeln!(stdout, "{hello}")
        .and_then(|()| stdout.flush())
        .is_err()
    {
        return std::process::ExitCode::FAILURE;
    }
    for line in std::io::stdin().lock().lines() {
        let Ok(line) = line else { break };
        if line.trim() != "log" {
            continue;
        }
        let signed_by = |authorization: Option<&str>| {
            authorization
                .and_then(|a| a.split("Credential=").nth(1))
                .and_then(|c| c.split('/').next())
                .map(str::to_owned)
        };
        let log = serde_json::json!({
            "gcs": gcs.authenticated().into_iter().map(|a| a.identity).collect::<Vec<_>>(),
            "azure": azure
                .auth_log()
                .into_iter()
                .map(|r| (format!("{:?}", r.identity), r.failure.map(|f| format!("{f:?}"))))
                .collect::<Vec<_>>(),
            "hf": hf
                .hub()
                .requests()
                .iter()
                .map(|r| r.header("authorization").map(str::to_owned))
                .collect::<Vec<_>>(),
            "hf_leaks": hf.authorization_leaks(),
            "s3": s3
                .server()
                .requests()
                .iter()
                .map(|r| signed_by(r.header("authorization")))
                .collect::<Vec<_>>(),
            "s3_signature_failures": s3.signature_failures().len(),
        });
        if writeln!(stdout, "{log}")
            .and_then(|()| stdout.flush())
            .is_err()
        {
            break;
        }
    }
    std::process::ExitCode::SUCCESS
}

fn main() -> std::process::ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("serve") => {}
        Some("nginx") if args.len() == 2 => return nginx(&args[1]),
        Some("seaweedfs") => return seaweedfs(),
        Some("credentials") => return credentials(),
        _ => {
            eprintln!(
                "usage: karu-testkit serve | karu-testkit nginx DIR | karu-testkit seaweedfs | karu-testkit credentials\n  serves the testkit's mock object server (or nginx serving DIR, SeaweedFS, or the mocks that check credentials) on 127.0.0.1 until stdin closes"
            );
            return std::process::ExitCode::from(2);
        }
    }
    let server = Arc::new(MockServer::start());
    server.set_route(Some(Arc::new(Control {
        server: Arc::downgrade(&server),
    })));
    let mut stdout = std::io::stdout();
    if writeln!(stdout, "{}", server.base_url())
        .and_then(|()| stdout.flush())
        .is_err()
    {
        return std::process::ExitCode::FAILURE;
    }
    // Serve until stdin closes (or anything is written to it).
    let mut line = String::new();
    let _ = std::io::stdin().lock().read_line(&mut line);
    drop(server);
    std::process::ExitCode::SUCCESS
}
