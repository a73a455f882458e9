//! `--output` never loses a file: a read that fails, ends short or is interrupted leaves what
//! was under its name before as it was, and says so; the file being written has a name of its
//! own, created new and never through a link; a whole read replaces the earlier file with one
//! rename; an output that is an input of the command is refused before anything is read.

mod support;

use std::io::Write as _;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, mpsc};
use std::time::Duration;

use karu_testkit::{Fault, FaultRule, GateResponse, MockServer, RequestHead, Route};
use serde_json::json;
use support::{isolate, karu, names, pattern, pattern_file};

/// What an earlier run left under the name.
const EARLIER: &[u8] = b"the whole read of an earlier run";

/// A directory `out` in `home` holding `0.bin` from an earlier run.
fn earlier_output(home: &Path) -> (std::path::PathBuf, String) {
    let out_dir = home.join("out");
    std::fs::create_dir(&out_dir).unwrap();
    std::fs::write(out_dir.join("0.bin"), EARLIER).unwrap();
    let text = out_dir.to_str().unwrap().to_owned();
    (out_dir, text)
}

#[test]
fn an_earlier_file_survives_a_failed_read() {
    let server = MockServer::start();
    let home = tempfile::tempdir().unwrap();
    let (out_dir, out_text) = earlier_output(home.path());
    let earlier = out_dir.join("0.bin");
    let earlier_text = earlier.to_str().unwrap();

    // A 404.
    let url = server.url("/missing.bin");
    let out = karu(home.path(), ["read", &url, "0:10", "--output", &out_text]);
    assert_eq!(out.code, 1, "{out:?}");
    assert_eq!(std::fs::read(&earlier).unwrap(), EARLIER, "{out:?}");
    assert_eq!(names(&out_dir), ["0.bin"], "nothing else left");
    let errors = out.stderr_lines();
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert!(
        errors[0].starts_with("karu: read 0 (0:10): not_found: ")
            && errors[0].ends_with(&format!(
                "; {earlier_text} is left as it was before this run"
            )),
        "{errors:?}"
    );
    // The JSON line names it too.
    let out = karu(
        home.path(),
        ["--json", "read", &url, "0:10", "--output", &out_text],
    );
    assert_eq!(out.code, 1, "{out:?}");
    let line = &out.json_lines()[0];
    assert_eq!(
        (&line["status"], &line["file"], &line["earlier_file"]),
        (&json!("not_found"), &json!(null), &json!(earlier_text)),
        "{line}"
    );
    assert_eq!(std::fs::read(&earlier).unwrap(), EARLIER);

    // A body cut short on every attempt.
    server.insert_virtual("/cut.bin", 1000);
    server.add_fault(FaultRule::new(Fault::CutBodyAfter(100)).path("/cut.bin"));
    let url = server.url("/cut.bin");
    let out = karu(
        home.path(),
        [
            "--set",
            "retry.attempts=2",
            "read",
            &url,
            "0:1000",
            "--output",
            &out_text,
        ],
    );
    assert_eq!(out.code, 1, "{out:?}");
    assert_eq!(std::fs::read(&earlier).unwrap(), EARLIER, "{out:?}");
    assert_eq!(names(&out_dir), ["0.bin"], "no temporary left");
    assert!(out.stderr.contains("is left as it was"), "{out:?}");

    // A local file that is not there.
    let missing = home.path().join("missing.bin");
    let out = karu(
        home.path(),
        [
            "read",
            missing.to_str().unwrap(),
            "0:4",
            "--output",
            &out_text,
        ],
    );
    assert_eq!(out.code, 1, "{out:?}");
    assert_eq!(std::fs::read(&earlier).unwrap(), EARLIER, "{out:?}");
    assert_eq!(names(&out_dir), ["0.bin"]);
}

#[test]
fn a_read_past_the_end_keeps_its_prefix_beside_the_earlier_file() {
    let home = tempfile::tempdir().unwrap();
    let data = pattern_file(home.path(), "data.bin", 100);
    let (out_dir, out_text) = earlier_output(home.path());
    let out = karu(home.path(), ["read", &data, "90:20", "--output", &out_text]);
    assert_eq!(out.code, 1, "{out:?}");
    assert_eq!(std::fs::read(out_dir.join("0.bin")).unwrap(), EARLIER);
    assert_eq!(
        std::fs::read(out_dir.join("0.bin.partial")).unwrap(),
        pattern(90, 10),
        "the bytes that exist"
    );
    assert_eq!(names(&out_dir), ["0.bin", "0.bin.partial"]);
    let partial = out_dir.join("0.bin.partial");
    assert!(
        out.stderr.trim_end().ends_with(&format!(
            "(10 bytes delivered); the bytes that exist are in {}; {} is left as it was before \
             this run",
            partial.display(),
            out_dir.join("0.bin").display()
        )),
        "{out:?}"
    );

    // A prefix from before is not replaced either.
    std::fs::write(&partial, b"an earlier prefix").unwrap();
    let out = karu(home.path(), ["read", &data, "95:20", "--output", &out_text]);
    assert_eq!(out.code, 1, "{out:?}");
    assert_eq!(std::fs::read(&partial).unwrap(), b"an earlier prefix");
    assert_eq!(std::fs::read(out_dir.join("0.bin")).unwrap(), EARLIER);
    assert_eq!(
        names(&out_dir),
        ["0.bin", "0.bin.partial"],
        "no temporary left"
    );
    assert!(
        out.stderr.contains(&format!(
            "the bytes that exist are not kept: {} is left as it was before this run",
            partial.display()
        )),
        "{out:?}"
    );
}

/// Sends the `Range` of every request to the test as it arrives, and answers none of them.
#[derive(Debug)]
struct Arrivals(mpsc::Sender<String>);

impl Route for Arrivals {
    fn respond(&self, request: &RequestHead) -> Option<GateResponse> {
        if let Some(range) = request.header("range") {
            let _ = self.0.send(range.to_owned());
        }
        None
    }
}

const PIECE: u64 = 64 << 10;

/// A `karu read` of three pieces of 64 KiB into `out_dir` (two pieces in flight at most),
/// stopped while it waits for its third piece: the first piece has been written by then (the
/// third is asked for only once the first was consumed). Returns the child and the server,
/// which holds the third piece at a barrier whose round never fills. The command starts with
/// the `ignored` signals (names, such as `HUP INT`) ignored, as a shell's `trap '' …` leaves them.
fn read_held_at_the_third_piece(home: &Path, out_dir: &str, ignored: &str) -> (Child, MockServer) {
    let server = MockServer::start();
    server.insert_virtual("/big.bin", 3 * PIECE);
    let (arrived, arrivals) = mpsc::channel();
    server.set_route(Some(Arc::new(Arrivals(arrived))));
    // The stat and the first two pieces pass; the third is held.
    server.add_fault(
        FaultRule::new(Fault::Barrier(2))
            .path("/big.bin")
            .method("GET")
            .skip(3)
            .times(1),
    );
    let url = server.url("/big.bin");
    let trap = match ignored {
        "" => String::new(),
        ignored => format!("trap '' {ignored}; "),
    };
    let mut command = Command::new("/bin/sh");
    isolate(&mut command, home)
        .args([
            "-c",
            &format!("{trap}exec \"$0\" \"$@\""),
            env!("CARGO_BIN_EXE_karu"),
            "--set",
            "http.part_size=64KiB",
            "--set",
            "planner.max_span=128KiB",
            "--set",
            "hedge.enabled=false",
            "read",
            &url,
            "0:192KiB",
            "--output",
            out_dir,
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = command.spawn().unwrap();
    let third = format!("bytes={}-{}", 2 * PIECE, 3 * PIECE - 1);
    loop {
        match arrivals.recv_timeout(Duration::from_millis(100)) {
            Ok(range) if range == third => break,
            Ok(_) => {}
            Err(mpsc::RecvTimeoutError::Timeout) => {
                if child.try_wait().unwrap().is_some() {
                    panic!("karu ended early: {:?}", child.wait_with_output());
                }
            }
            Err(e) => panic!("{e}"),
        }
    }
    (child, server)
}

/// Sends `signal` (a name such as `INT`) to `child`.
fn kill(child: &Child, signal: &str) {
    let status = Command::new("kill")
        .arg(format!("-{signal}"))
        .arg(child.id().to_string())
        .status()
        .unwrap();
    assert!(status.success());
}

#[test]
fn an_interrupted_read_leaves_the_earlier_file_and_no_temporary() {
    for (signal, number) in [("INT", 2), ("TERM", 15), ("HUP", 1)] {
        let home = tempfile::tempdir().unwrap();
        let (out_dir, out_text) = earlier_output(home.path());
        let (child, server) = read_held_at_the_third_piece(home.path(), &out_text, "");
        let during = names(&out_dir);
        assert_eq!(during.len(), 2, "{signal}: {during:?}");
        assert!(
            during[0].starts_with(".0.bin.") && during[1] == "0.bin",
            "{signal}: the first piece is being written under a hidden name: {during:?}"
        );
        kill(&child, signal);
        let output = child.wait_with_output().unwrap();
        drop(server);
        assert_eq!(
            output.status.signal(),
            Some(number),
            "{signal}: ended by the signal, as without a handler: {output:?}"
        );
        assert_eq!(std::fs::read(out_dir.join("0.bin")).unwrap(), EARLIER);
        assert_eq!(names(&out_dir), ["0.bin"], "{signal}: no temporary left");
        let stderr = String::from_utf8(output.stderr).unwrap();
        assert_eq!(
            stderr,
            format!(
                "karu: interrupted by SIG{signal}: the reads not finished wrote nothing; files \
                 from before this run are left as they were\n"
            )
        );
    }
}

#[test]
fn a_signal_ignored_when_the_command_started_stays_ignored() {
    // As under `nohup` (SIGHUP), or for a command a script started in the background (SIGINT).
    let home = tempfile::tempdir().unwrap();
    let (out_dir, out_text) = earlier_output(home.path());
    let (child, server) = read_held_at_the_third_piece(home.path(), &out_text, "HUP INT");
    kill(&child, "HUP");
    kill(&child, "INT");
    kill(&child, "TERM");
    let output = child.wait_with_output().unwrap();
    drop(server);
    assert_eq!(output.status.signal(), Some(15), "{output:?}");
    assert!(
        String::from_utf8(output.stderr)
            .unwrap()
            .starts_with("karu: interrupted by SIGTERM: ")
    );
    assert_eq!(std::fs::read(out_dir.join("0.bin")).unwrap(), EARLIER);
    assert_eq!(names(&out_dir), ["0.bin"]);
}

#[test]
fn a_crash_between_write_and_rename_leaves_the_earlier_file() {
    let home = tempfile::tempdir().unwrap();
    let (out_dir, out_text) = earlier_output(home.path());
    let (child, server) = read_held_at_the_third_piece(home.path(), &out_text, "");
    kill(&child, "KILL");
    let output = child.wait_with_output().unwrap();
    drop(server);
    assert_eq!(output.status.signal(), Some(9));
    assert_eq!(std::fs::read(out_dir.join("0.bin")).unwrap(), EARLIER);
    // A process killed outright cannot remove its temporary: it stays, hidden, and the name
    // still holds the earlier file.
    let left = names(&out_dir);
    assert_eq!(left.len(), 2, "{left:?}");
    assert!(left[0].starts_with(".0.bin."), "{left:?}");
}

#[test]
fn a_link_at_the_temporary_name_is_not_followed() {
    let home = tempfile::tempdir().unwrap();
    let data = pattern_file(home.path(), "data.bin", 100);
    let victim = home.path().join("victim.txt");
    std::fs::write(&victim, b"a file the user owns").unwrap();
    let out_dir = home.path().join("out");
    std::fs::create_dir(&out_dir).unwrap();
    // The ranges come from stdin: the command waits for them before it writes anything, so
    // the links are in place first.
    let mut command = Command::new(env!("CARGO_BIN_EXE_karu"));
    isolate(&mut command, home.path())
        .args([
            "read",
            &data,
            "--ranges-from",
            "-",
            "--output",
            out_dir.to_str().unwrap(),
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = command.spawn().unwrap();
    // The temporary names the command could pick that another user can guess: its process id.
    let planted = out_dir.join(format!(".0.bin.karu-{}.tmp", child.id()));
    std::os::unix::fs::symlink(&victim, &planted).unwrap();
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(b"0:10\n").unwrap();
    drop(stdin);
    let output = child.wait_with_output().unwrap();
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    assert_eq!(
        std::fs::read(&victim).unwrap(),
        b"a file the user owns",
        "the link's target is untouched"
    );
    let written = out_dir.join("0.bin");
    assert!(
        std::fs::symlink_metadata(&written).unwrap().is_file(),
        "0.bin is a file of its own"
    );
    assert_eq!(std::fs::read(&written).unwrap(), pattern(0, 10));
    assert_eq!(std::fs::read_link(&planted).unwrap(), victim, "left alone");
}

#[test]
fn a_link_at_the_output_name_is_replaced_never_written_through() {
    let server = MockServer::start();
    let home = tempfile::tempdir().unwrap();
    let data = pattern_file(home.path(), "data.bin", 100);
    let victim = home.path().join("victim.txt");
    std::fs::write(&victim, b"a file the user owns").unwrap();
    let out_dir = home.path().join("out");
    std::fs::create_dir(&out_dir).unwrap();
    let link = out_dir.join("0.bin");
    std::os::unix::fs::symlink(&victim, &link).unwrap();
    let out_text = out_dir.to_str().unwrap();

    // A failed read leaves the link as it is.
    let url = server.url("/missing.bin");
    let out = karu(home.path(), ["read", &url, "0:10", "--output", out_text]);
    assert_eq!(out.code, 1, "{out:?}");
    assert_eq!(std::fs::read_link(&link).unwrap(), victim);
    assert_eq!(std::fs::read(&victim).unwrap(), b"a file the user owns");

    // A whole read takes the name: the link goes, its target stays as it was.
    let out = karu(home.path(), ["read", &data, "0:10", "--output", out_text]);
    assert_eq!((out.code, out.stderr.as_str()), (0, ""), "{out:?}");
    assert!(std::fs::symlink_metadata(&link).unwrap().is_file());
    assert_eq!(std::fs::read(&link).unwrap(), pattern(0, 10));
    assert_eq!(std::fs::read(&victim).unwrap(), b"a file the user owns");
}

#[test]
fn a_whole_read_replaces_the_earlier_file_in_one_rename() {
    let home = tempfile::tempdir().unwrap();
    let data = pattern_file(home.path(), "data.bin", 100);
    let (out_dir, out_text) = earlier_output(home.path());
    let earlier = out_dir.join("0.bin");
    // Another name for the earlier file, and a reader holding it open: a file replaced by a
    // rename keeps its bytes for both; one truncated and rewritten in place would not.
    let other_name = home.path().join("earlier-link.bin");
    std::fs::hard_link(&earlier, &other_name).unwrap();
    let held = std::fs::File::open(&earlier).unwrap();
    let before = std::fs::metadata(&earlier).unwrap().ino();

    // With a umask of 027 a new file is rw-r----- (0640), as any file the user creates.
    let mut command = Command::new("/bin/sh");
    command
        .args([
            "-c",
            "umask 027; exec \"$0\" \"$@\"",
            env!("CARGO_BIN_EXE_karu"),
        ])
        .args(["read", &data, "0:10", "--output", &out_text]);
    let out = support::run(isolate(&mut command, home.path()));
    assert_eq!((out.code, out.stderr.as_str()), (0, ""), "{out:?}");
    assert_eq!(std::fs::read(&earlier).unwrap(), pattern(0, 10));
    assert_eq!(names(&out_dir), ["0.bin"]);
    let after = std::fs::metadata(&earlier).unwrap();
    assert_ne!(after.ino(), before, "a new file took the name");
    assert_eq!(after.permissions().mode() & 0o777, 0o640);
    assert_eq!(std::fs::read(&other_name).unwrap(), EARLIER);
    assert_eq!(
        std::io::read_to_string(&held).unwrap().as_bytes(),
        EARLIER,
        "the open reader still reads the earlier file"
    );
}

#[test]
fn an_output_that_is_an_input_is_refused() {
    let home = tempfile::tempdir().unwrap();
    let dir = home.path();
    let data = pattern_file(dir, "data.bin", 100);
    let link = dir.join("link.bin");
    std::os::unix::fs::symlink(&data, &link).unwrap();
    let hard = dir.join("hard.bin");
    std::fs::hard_link(&data, &hard).unwrap();
    let ranges = dir.join("ranges.txt");
    std::fs::write(&ranges, "0:10\n").unwrap();
    let (link, hard, ranges) = (
        link.to_str().unwrap(),
        hard.to_str().unwrap(),
        ranges.to_str().unwrap(),
    );
    let uri = format!("file://{data}");
    let dir_text = dir.to_str().unwrap();
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (vec!["read", &data, "0:10", "--out-template", &data], &data),
        (vec!["read", &uri, "0:10", "--out-template", &data], &data),
        (
            vec![
                "read",
                &data,
                "0:10",
                "--output",
                dir_text,
                "--out-template",
                "data.bin",
            ],
            &data,
        ),
        (vec!["read", &data, "0:10", "--out-template", link], link),
        (vec!["read", link, "0:10", "--out-template", &data], &data),
        (vec!["read", &data, "0:10", "--out-template", hard], hard),
        (
            vec![
                "read",
                &data,
                "--ranges-from",
                ranges,
                "--out-template",
                ranges,
            ],
            ranges,
        ),
    ];
    for (args, output) in &cases {
        let out = karu(dir, args);
        assert_eq!(out.code, 2, "{args:?}: {out:?}");
        assert!(
            out.stderr
                .starts_with(&format!("karu: {output} is an input of this command")),
            "{args:?}: {out:?}"
        );
        assert_eq!(std::fs::read(&data).unwrap(), pattern(0, 100), "{args:?}");
    }
    assert_eq!(std::fs::read_to_string(ranges).unwrap(), "0:10\n");

    // `karu ends --output DIR` of a file named head.bin in DIR.
    let head = pattern_file(dir, "head.bin", 100);
    let out = karu(dir, ["ends", &head, "4", "4", "--output", dir_text]);
    assert_eq!(out.code, 2, "{out:?}");
    assert!(
        out.stderr
            .starts_with(&format!("karu: {head} is an input of this command")),
        "{out:?}"
    );
    assert_eq!(std::fs::read(&head).unwrap(), pattern(0, 100));

    // Standard output appended to the input, as `karu read data.bin 0:10 >> data.bin`.
    let mut command = Command::new("/bin/sh");
    command.args([
        "-c",
        "exec \"$1\" read \"$2\" 0:10 >> \"$2\"",
        "sh",
        env!("CARGO_BIN_EXE_karu"),
        &data,
    ]);
    let out = support::run(isolate(&mut command, dir));
    assert_eq!(out.code, 2, "{out:?}");
    assert!(
        out.stderr
            .starts_with("karu: standard output is an input of this command"),
        "{out:?}"
    );
    assert_eq!(std::fs::read(&data).unwrap(), pattern(0, 100));
}

#[test]
fn an_output_name_holding_a_directory_or_a_fifo_is_refused() {
    let home = tempfile::tempdir().unwrap();
    let data = pattern_file(home.path(), "data.bin", 100);
    let out_dir = home.path().join("out");
    std::fs::create_dir(&out_dir).unwrap();
    std::fs::create_dir(out_dir.join("0.bin")).unwrap();
    karu_testkit::make_fifo(&out_dir.join("1.bin"));
    let out_text = out_dir.to_str().unwrap();
    for (template, what) in [("0.bin", "a directory"), ("1.bin", "a FIFO")] {
        let out = karu(
            home.path(),
            [
                "read",
                &data,
                "0:10",
                "--output",
                out_text,
                "--out-template",
                template,
            ],
        );
        assert_eq!(out.code, 2, "{template}: {out:?}");
        assert!(
            out.stderr.starts_with(&format!(
                "karu: {} is {what}: ",
                out_dir.join(template).display()
            )),
            "{out:?}"
        );
        assert_eq!(
            names(&out_dir),
            ["0.bin", "1.bin"],
            "{template}: nothing left"
        );
    }
    assert!(std::fs::metadata(out_dir.join("0.bin")).unwrap().is_dir());
    use std::os::unix::fs::FileTypeExt;
    assert!(
        std::fs::symlink_metadata(out_dir.join("1.bin"))
            .unwrap()
            .file_type()
            .is_fifo()
    );
}
