//! Output that cannot be written never crashes `karu`: a full device is an error with exit
//! status 3, a closed pipe ends it quietly like `cat` (status 0, or 1 when a read had failed),
//! and a standard output that is not open at all (`>&-`) fails like `cat` does (status 3).

mod support;

use std::fs::File;
use std::process::{Command, Stdio};

use support::{isolate, pattern_file, run};

const LEN: u64 = 1 << 20;

/// `karu ARGS` with stdout on `/dev/full`.
fn to_dev_full(home: &std::path::Path, args: &[&str]) -> support::Run {
    let full = File::options().write(true).open("/dev/full").unwrap();
    let mut command = Command::new(env!("CARGO_BIN_EXE_karu"));
    command.args(args).stdout(Stdio::from(full));
    run(isolate(&mut command, home))
}

/// `karu ARGS` with stdout on a pipe whose reading end is already closed.
fn to_closed_pipe(home: &std::path::Path, args: &[&str]) -> support::Run {
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    let mut command = Command::new(env!("CARGO_BIN_EXE_karu"));
    command.args(args).stdout(Stdio::from(writer));
    run(isolate(&mut command, home))
}

#[test]
fn a_full_device_is_an_output_error_with_status_3() {
    let dir = tempfile::tempdir().unwrap();
    let file = pattern_file(dir.path(), "data.bin", LEN);
    for args in [
        vec!["stat", file.as_str()],
        vec!["--json", "stat", file.as_str()],
        vec!["ends", file.as_str(), "4", "4"],
        vec!["read", file.as_str(), "0:1MiB"],
        vec!["--json", "read", file.as_str(), "0:4", "8:4"],
        vec!["read", file.as_str(), "0:4", "8:4", "--concat"],
        vec!["config", file.as_str()],
    ] {
        let out = to_dev_full(dir.path(), &args);
        assert_eq!(out.code, 3, "{args:?}: {out:?}");
        assert_eq!(
            out.stderr_lines(),
            ["karu: cannot write to standard output: No space left on device (os error 28)"],
            "{args:?}"
        );
    }
}

#[test]
fn a_closed_pipe_ends_quietly() {
    let dir = tempfile::tempdir().unwrap();
    let file = pattern_file(dir.path(), "data.bin", LEN);
    for args in [
        vec!["stat", file.as_str()],
        vec!["ends", file.as_str(), "4", "4"],
        vec!["read", file.as_str(), "0:1MiB"],
        vec!["--json", "read", file.as_str(), "0:4", "8:4"],
        vec!["config"],
    ] {
        let out = to_closed_pipe(dir.path(), &args);
        assert_eq!((out.code, out.stderr.as_str()), (0, ""), "{args:?}");
    }
    // A read that failed before the pipe closed still makes the status 1.
    let missing = dir.path().join("missing.bin");
    let missing = missing.to_str().unwrap();
    let out = to_closed_pipe(dir.path(), &["--json", "read", missing, "0:4"]);
    assert_eq!(out.code, 1, "{out:?}");
    assert!(out.stderr.contains("not_found"), "{out:?}");
}

/// `karu ARGS` with standard output closed, as `karu ARGS >&-` in a shell.
fn with_stdout_closed(home: &std::path::Path, args: &[&str]) -> support::Run {
    let mut command = Command::new("/bin/sh");
    command
        .args(["-c", "exec \"$0\" \"$@\" >&-", env!("CARGO_BIN_EXE_karu")])
        .args(args);
    run(isolate(&mut command, home))
}

#[test]
fn a_closed_stdout_fails_like_cat() {
    let dir = tempfile::tempdir().unwrap();
    let file = pattern_file(dir.path(), "data.bin", LEN);
    let cat = Command::new("/bin/sh")
        .args(["-c", "exec cat \"$0\" >&-", &file])
        .output()
        .unwrap();
    assert_ne!(cat.status.code(), Some(0), "cat fails: {cat:?}");
    for args in [
        vec!["read", file.as_str(), "0:4"],
        vec!["--json", "read", file.as_str(), "0:4", "8:4"],
        vec!["stat", file.as_str()],
        vec!["config"],
    ] {
        let out = with_stdout_closed(dir.path(), &args);
        assert_eq!(out.code, 3, "{args:?}: {out:?}");
        assert_eq!(
            out.stderr_lines(),
            ["karu: cannot write to standard output: it is not open (Bad file descriptor)"],
            "{args:?}"
        );
    }
    // Nothing to write to stdout: nothing fails.
    let out_dir = dir.path().join("out");
    let out = with_stdout_closed(
        dir.path(),
        &["read", &file, "0:4", "--output", out_dir.to_str().unwrap()],
    );
    assert_eq!((out.code, out.stderr.as_str()), (0, ""), "{out:?}");
    assert_eq!(
        std::fs::read(out_dir.join("0.bin")).unwrap(),
        support::pattern(0, 4)
    );
    // A stdout on /dev/null is open: what goes there is gone, as the user asked.
    let null = File::options().write(true).open("/dev/null").unwrap();
    let mut command = Command::new(env!("CARGO_BIN_EXE_karu"));
    command
        .args(["read", &file, "0:4"])
        .stdout(Stdio::from(null));
    let out = run(isolate(&mut command, dir.path()));
    assert_eq!((out.code, out.stderr.as_str()), (0, ""));
}
