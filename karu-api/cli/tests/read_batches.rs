//! `karu read` for real batches: ranges from a file or stdin (200,000 of them), many objects in
//! one batch, JSON streamed as reads complete, one file per read (under its name only when
//! whole), raw output that never runs ranges together by accident, grouped errors, HTML error
//! pages summarised, and a progress bar only when a person watches a terminal.

mod support;

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};

use karu_testkit::{Fault, FaultRule, GateResponse, MockServer, RequestHead, Route};
use serde_json::json;
use support::{isolate, karu, names, pattern, pattern_file, sha256};

/// `karu ARGS` with `input` on stdin.
fn karu_stdin(home: &std::path::Path, args: &[&str], input: &str) -> support::Run {
    let mut command = Command::new(env!("CARGO_BIN_EXE_karu"));
    isolate(&mut command, home)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = command.spawn().unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let input = input.to_owned();
    let writer = std::thread::spawn(move || {
        let _ = stdin.write_all(input.as_bytes());
    });
    let output = child.wait_with_output().unwrap();
    writer.join().unwrap();
    support::Run {
        code: output.status.code().expect("exited"),
        stdout: output.stdout,
        stderr: String::from_utf8(output.stderr).unwrap(),
    }
}

const READS: u64 = 200_000;
const LEN: u64 = 16;

#[test]
fn two_hundred_thousand_ranges_from_a_file() {
    let dir = tempfile::tempdir().unwrap();
    let file = pattern_file(dir.path(), "data.bin", READS * LEN);
    let list = dir.path().join("ranges.txt");
    let text: String = (0..READS).map(|i| format!("{}:{LEN}\n", i * LEN)).collect();
    std::fs::write(&list, &text).unwrap();
    let list = list.to_str().unwrap();

    let out = karu(
        dir.path(),
        ["read", &file, "--ranges-from", list, "--concat"],
    );
    assert_eq!((out.code, out.stderr.as_str()), (0, ""));
    assert_eq!(out.stdout.len() as u64, READS * LEN);
    assert!(
        out.stdout == pattern(0, READS * LEN),
        "exact bytes, in order"
    );

    // The same from stdin, as JSON: one line per read, then the summary.
    let out = karu_stdin(
        dir.path(),
        &["--json", "read", &file, "--ranges-from", "-"],
        &text,
    );
    assert_eq!((out.code, out.stderr.as_str()), (0, ""));
    let lines = out.json_lines();
    assert_eq!(lines.len() as u64, READS + 1);
    let mut tags: Vec<u64> = lines[..READS as usize]
        .iter()
        .map(|l| {
            assert_eq!(l["status"], "ok");
            l["tag"].as_u64().unwrap()
        })
        .collect();
    tags.sort_unstable();
    assert!(tags.iter().copied().eq(0..READS), "every read once");
    let batch = &lines[READS as usize]["batch"];
    assert_eq!(batch["reads"], json!(READS));
    assert_eq!(batch["delivered_bytes"], json!(READS * LEN));
    assert_eq!(batch["fetched_bytes"], json!(READS * LEN));
}

#[test]
fn one_batch_reads_many_objects_and_a_bad_address_is_a_usage_error() {
    let dir = tempfile::tempdir().unwrap();
    let a = pattern_file(dir.path(), "a.bin", 100);
    std::fs::create_dir(dir.path().join("with space")).unwrap();
    let b = pattern_file(&dir.path().join("with space"), "b.bin", 100);
    let input = format!("# two objects\n{a} 0:4\n{b} 8:4\n\n{a} 4:4\n");
    let out = karu_stdin(
        dir.path(),
        &["read", "--ranges-from", "-", "--concat"],
        &input,
    );
    assert_eq!((out.code, out.stderr.as_str()), (0, ""), "{out:?}");
    let mut expected = pattern(0, 4);
    expected.extend(pattern(8, 4));
    expected.extend(pattern(4, 4));
    assert_eq!(out.stdout, expected);

    // An address Karu cannot read is a usage error: nothing is read.
    let out = karu_stdin(
        dir.path(),
        &["read", "--ranges-from", "-", "--concat"],
        &format!("{input}nope://bucket/key 0:4\n"),
    );
    assert_eq!(out.code, 2, "{out:?}");
    assert!(out.stdout.is_empty(), "{out:?}");
    let errors = out.stderr_lines();
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert!(
        errors[0].starts_with("karu: nope://bucket/key: unknown scheme \"nope\""),
        "{errors:?}"
    );

    // Lines without an address use the one given as an argument.
    let out = karu_stdin(
        dir.path(),
        &["read", &a, "10:2", "--ranges-from", "-", "--concat"],
        &format!("0:2\n{b} 2:2\n"),
    );
    assert_eq!((out.code, out.stderr.as_str()), (0, ""), "{out:?}");
    let mut expected = pattern(10, 2);
    expected.extend(pattern(0, 2));
    expected.extend(pattern(2, 2));
    assert_eq!(out.stdout, expected);

    // A malformed line is a usage error naming its line.
    let out = karu_stdin(
        dir.path(),
        &["read", &a, "--ranges-from", "-"],
        "0:4\n4-8\n",
    );
    assert_eq!(out.code, 2, "{out:?}");
    assert_eq!(
        out.stderr_lines(),
        [
            "karu: standard input:2: range \"4-8\": expected OFFSET:LENGTH, OFFSET:end (to the \
          end) or -LENGTH (the last bytes)"
        ]
    );
}

#[test]
fn several_raw_ranges_need_concat() {
    let dir = tempfile::tempdir().unwrap();
    let file = pattern_file(dir.path(), "data.bin", 100);
    let out = karu(dir.path(), ["read", &file, "0:4", "8:4"]);
    assert_eq!(out.code, 2, "{out:?}");
    assert!(out.stdout.is_empty());
    assert_eq!(
        out.stderr_lines(),
        [
            "karu: 2 ranges would run together on stdout: give --concat to write their bytes \
             one after another in the order given, --output DIR for one file each, or --json"
        ]
    );
    let out = karu(dir.path(), ["--json", "read", &file, "0:4", "--concat"]);
    assert_eq!(out.code, 2, "--concat is for raw output: {out:?}");
}

#[test]
fn output_writes_one_file_per_read() {
    let dir = tempfile::tempdir().unwrap();
    let file = pattern_file(dir.path(), "data.bin", 100);
    let out_dir = dir.path().join("out");
    let out_dir_text = out_dir.to_str().unwrap();
    let out = karu(
        dir.path(),
        [
            "read",
            &file,
            "0:4",
            "8:4",
            "96:10",
            "--output",
            out_dir_text,
        ],
    );
    assert_eq!(out.code, 1, "the last read passes the end: {out:?}");
    assert!(out.stdout.is_empty());
    assert_eq!(std::fs::read(out_dir.join("0.bin")).unwrap(), pattern(0, 4));
    assert_eq!(std::fs::read(out_dir.join("1.bin")).unwrap(), pattern(8, 4));
    // A read that did not complete has no file under its name: the prefix that exists is
    // kept under a name that says so, and nothing else is left behind.
    assert_eq!(
        std::fs::read(out_dir.join("2.bin.partial")).unwrap(),
        pattern(96, 4),
        "the prefix that exists"
    );
    assert_eq!(
        names(&out_dir),
        ["0.bin", "1.bin", "2.bin.partial"],
        "no 2.bin, no temporary file"
    );
    // A missing object writes nothing, and leaves what an earlier run wrote under the name.
    std::fs::write(out_dir.join("0.bin"), "earlier").unwrap();
    let missing = dir.path().join("missing.bin");
    let out = karu(
        dir.path(),
        [
            "read",
            missing.to_str().unwrap(),
            "0:4",
            "--output",
            out_dir_text,
        ],
    );
    assert_eq!(out.code, 1, "{out:?}");
    assert_eq!(names(&out_dir), ["0.bin", "1.bin", "2.bin.partial"]);
    assert_eq!(std::fs::read(out_dir.join("0.bin")).unwrap(), b"earlier");
    // The same range, now within the object: the whole file takes the name (the prefix of
    // the earlier run stays).
    let out = karu(
        dir.path(),
        [
            "read",
            &file,
            "0:4",
            "8:4",
            "90:10",
            "--output",
            out_dir_text,
        ],
    );
    assert_eq!((out.code, out.stderr.as_str()), (0, ""), "{out:?}");
    assert_eq!(
        names(&out_dir),
        ["0.bin", "1.bin", "2.bin", "2.bin.partial"]
    );
    assert_eq!(
        std::fs::read(out_dir.join("2.bin")).unwrap(),
        pattern(90, 10)
    );

    let out = karu(
        dir.path(),
        [
            "--json",
            "read",
            &file,
            "0:4",
            "8:4",
            "--output",
            out_dir_text,
            "--out-template",
            "{name}/{offset}+{length}",
        ],
    );
    assert_eq!((out.code, out.stderr.as_str()), (0, ""), "{out:?}");
    let mut lines = out.json_lines();
    lines[..2].sort_by_key(|l| l["tag"].as_u64());
    let expected = out_dir.join("data.bin/8+4");
    assert_eq!(lines[1]["file"], expected.to_str().unwrap());
    assert_eq!(std::fs::read(&expected).unwrap(), pattern(8, 4));

    let out = karu(
        dir.path(),
        ["read", &file, "0:4", "0:4", "--out-template", "x-{offset}"],
    );
    assert_eq!(out.code, 2, "{out:?}");
    assert!(
        out.stderr.contains("reads 0 and 1 would both write x-0"),
        "{out:?}"
    );
}

#[test]
fn repeated_errors_are_grouped() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing.bin");
    let missing = missing.to_str().unwrap();
    let input: String = (0..5000).map(|i| format!("{i}:1\n")).collect();
    let out = karu_stdin(
        dir.path(),
        &["--json", "read", missing, "--ranges-from", "-"],
        &input,
    );
    assert_eq!(out.code, 1);
    assert_eq!(out.json_lines().len(), 5001, "every read has its JSON line");
    let errors = out.stderr_lines();
    assert_eq!(errors.len(), 3, "{errors:?}");
    assert!(
        errors[0].starts_with("karu: read ") && errors[0].contains(": not_found: "),
        "{errors:?}"
    );
    assert!(
        errors[1].starts_with("karu: 4999 more reads failed the same way (not_found: "),
        "{errors:?}"
    );
    assert!(
        errors[2].starts_with("karu: 5000 of 5000 reads failed; 0B delivered in "),
        "{errors:?}"
    );
}

#[test]
fn json_lines_stream_as_reads_complete() {
    let server = MockServer::start();
    server.insert_virtual("/slow.bin", 1000);
    server.insert_virtual("/fast.bin", 1000);
    server.add_fault(FaultRule::new(Fault::NeverAnswer).path("/slow.bin"));
    let (slow, fast) = (server.url("/slow.bin"), server.url("/fast.bin"));
    let home = tempfile::tempdir().unwrap();

    let mut command = Command::new(env!("CARGO_BIN_EXE_karu"));
    isolate(&mut command, home.path())
        .args([
            "--set",
            "retry.deadline=30s",
            "--json",
            "read",
            "--ranges-from",
            "-",
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = command.spawn().unwrap();
    // The read that hangs comes first: its line cannot be first unless lines stream.
    let input = format!("{slow} 0:10\n{fast} 10:10\n");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut first = String::new();
    stdout.read_line(&mut first).unwrap();
    let first: serde_json::Value = serde_json::from_str(&first).unwrap();
    assert_eq!(first["tag"], 1, "{first}");
    assert_eq!(first["address"], fast.as_str());
    assert_eq!(first["status"], "ok");
    assert_eq!(
        first["sha256"],
        sha256(&karu_testkit::pattern(10, 10)).as_str()
    );
    assert_eq!(
        child.try_wait().unwrap(),
        None,
        "the hung read is still pending"
    );

    // Stopping the server ends the hung read; the rest follows.
    drop(server);
    let rest: Vec<serde_json::Value> = stdout
        .lines()
        .map(|line| serde_json::from_str(&line.unwrap()).unwrap())
        .collect();
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(1));
    assert_eq!(rest.len(), 2, "{rest:?}");
    assert_eq!(rest[0]["tag"], 0);
    assert_ne!(rest[0]["status"], "ok");
    assert!(rest[0]["error"].is_string(), "{}", rest[0]);
    assert_eq!(rest[1]["batch"]["reads"], 2);
    assert_eq!(rest[1]["batch"]["failed"], 1);
}

/// Serves an HTML 404 page for `/page.bin`.
#[derive(Debug)]
struct HtmlNotFound;

impl Route for HtmlNotFound {
    fn respond(&self, request: &RequestHead) -> Option<GateResponse> {
        (request.path == "/page.bin").then(|| {
            GateResponse::new(
                404,
                "<html>\r\n<head><title>404 Not Found</title></head>\r\n<body>\r\n<center>\
                 <h1>404 Not Found</h1></center>\r\n<hr><center>nginx/1.22.1</center>\r\n\
                 </body>\r\n</html>\r\n",
            )
            .header("Content-Type", "text/html")
        })
    }
}

#[test]
fn html_error_pages_are_summarised() {
    let server = MockServer::start();
    server.set_route(Some(std::sync::Arc::new(HtmlNotFound)));
    let url = server.url("/page.bin");
    let home = tempfile::tempdir().unwrap();
    let out = karu(home.path(), ["read", &url, "0:10"]);
    assert_eq!(out.code, 1, "{out:?}");
    let errors = out.stderr_lines();
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert!(
        errors[0].starts_with("karu: read 0 (0:10): not_found: "),
        "{errors:?}"
    );
    assert!(errors[0].contains("404 Not Found"), "{errors:?}");
    assert!(!errors[0].contains('<'), "no markup: {errors:?}");
    assert_eq!(server.request_count(), 1, "a 404 is not retried");
}

#[test]
fn a_progress_bar_only_on_a_terminal() {
    // stderr is a pipe here: no bar, no summary, nothing on a successful batch.
    let dir = tempfile::tempdir().unwrap();
    let file = pattern_file(dir.path(), "data.bin", 4096);
    let input: String = (0..1000).map(|i| format!("{i}:4\n")).collect();
    let out = karu_stdin(
        dir.path(),
        &["--json", "read", &file, "--ranges-from", "-"],
        &input,
    );
    assert_eq!((out.code, out.stderr.as_str()), (0, ""));
}

#[test]
fn a_progress_bar_and_a_summary_on_a_terminal() {
    use rustix::pty::{OpenptFlags, grantpt, openpt, ptsname, unlockpt};
    use rustix::termios::{Winsize, tcsetwinsize};
    use std::io::Read;

    // stderr is the far side of a pseudo-terminal: a person is watching.
    let master = openpt(OpenptFlags::RDWR | OpenptFlags::NOCTTY).expect("openpt");
    grantpt(&master).unwrap();
    unlockpt(&master).unwrap();
    let size = Winsize {
        ws_row: 24,
        ws_col: 120,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    tcsetwinsize(&master, size).unwrap();
    let name = ptsname(&master, Vec::new()).unwrap();
    let terminal = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(name.to_str().unwrap())
        .expect("open the terminal side");

    let dir = tempfile::tempdir().unwrap();
    let file = pattern_file(dir.path(), "data.bin", 4096);
    let input: String = (0..1000).map(|i| format!("{i}:4\n")).collect();
    let mut command = Command::new(env!("CARGO_BIN_EXE_karu"));
    isolate(&mut command, dir.path())
        // A terminal that says what it is (without TERM, a terminal counts as dumb: no bar).
        .env("TERM", "xterm-256color")
        .args(["--json", "read", &file, "--ranges-from", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::from(terminal));
    let mut child = command.spawn().unwrap();
    // Only the child holds the terminal side now: reading the master ends when it exits.
    drop(command);
    let mut master = std::fs::File::from(master);
    let screen = std::thread::spawn(move || {
        let mut screen = Vec::new();
        // Linux answers EIO once every terminal-side descriptor is closed.
        let _ = master.read_to_end(&mut screen);
        String::from_utf8_lossy(&screen).into_owned()
    });
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(input.as_bytes()).unwrap();
    drop(stdin);
    let output = child.wait_with_output().unwrap();
    let screen = screen.join().unwrap();

    assert_eq!(output.status.code(), Some(0), "{screen}");
    let lines = output
        .stdout
        .split(|&b| b == b'\n')
        .filter(|l| !l.is_empty());
    assert_eq!(
        lines.count(),
        1001,
        "one JSON line per read and the summary"
    );
    // The bar was drawn (reads done out of the total), then cleared for the summary line.
    assert!(
        screen.contains("/1000 reads"),
        "no progress bar: {screen:?}"
    );
    let summary = screen
        .lines()
        .map(|line| line.rsplit('\r').next().unwrap_or(line))
        .find(|line| line.contains("karu: 1000 reads succeeded"));
    let summary = summary.unwrap_or_else(|| panic!("no summary line: {screen:?}"));
    assert!(summary.contains("3.9KiB delivered in"), "{summary:?}");
}
