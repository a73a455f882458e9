//! The `karu` binary: exact bytes on stdout, JSON lines, exit statuses and error lines.

mod support;

use std::os::unix::fs::PermissionsExt;
use std::process::Command;

use serde_json::json;
use support::{base64, isolate, karu, pattern, pattern_file, run, running_as_root, sha256, which};

const LEN: u64 = 4096;

#[test]
fn read_writes_exactly_the_requested_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let file = pattern_file(dir.path(), "data.bin", LEN);

    let out = karu(dir.path(), ["read", &file, "10:5"]);
    assert_eq!((out.code, out.stderr.as_str()), (0, ""));
    assert_eq!(out.stdout, pattern(10, 5));

    // Hexadecimal numbers and units, and several ranges written in submission order.
    let out = karu(
        dir.path(),
        ["read", &file, "0x100:0x10", "3000:7", "0:2B", "--concat"],
    );
    assert_eq!((out.code, out.stderr.as_str()), (0, ""));
    let mut expected = pattern(0x100, 0x10);
    expected.extend(pattern(3000, 7));
    expected.extend(pattern(0, 2));
    assert_eq!(out.stdout, expected);

    // A file:// URI names the same file.
    let out = karu(dir.path(), ["read", &format!("file://{file}"), "4000:96"]);
    assert_eq!((out.code, out.stdout), (0, pattern(4000, 96)));
}

#[test]
fn json_lines_carry_each_read_and_the_batch_figures() {
    let dir = tempfile::tempdir().unwrap();
    let file = pattern_file(dir.path(), "data.bin", LEN);

    let out = karu(
        dir.path(),
        ["--json", "read", &file, "0:16", "1000:100", "4086:10"],
    );
    assert_eq!((out.code, out.stderr.as_str()), (0, ""));
    let lines = out.json_lines();
    assert_eq!(lines.len(), 4);
    // Lines come in completion order; each names its read.
    let mut reads = lines[..3].to_vec();
    reads.sort_by_key(|line| line["tag"].as_u64());
    for (line, (tag, offset, len)) in
        reads
            .iter_mut()
            .zip([(0, 0, 16), (1, 1000, 100), (2, 4086, 10)])
    {
        // A local read: no request carried it; only its completion time is known.
        let timing = line
            .as_object_mut()
            .and_then(|l| l.remove("timing"))
            .unwrap_or_default();
        assert!(
            timing["done_ms"].as_f64().is_some_and(|ms| ms >= 0.0),
            "{timing}"
        );
        for (key, value) in [
            ("first_byte_ms", json!(null)),
            ("attempts", json!(0)),
            ("transfer", json!(null)),
            ("transfer_bytes", json!(0)),
            ("pieces", json!(1)),
        ] {
            assert_eq!(timing[key], value, "{key} of {timing}");
        }
        assert_eq!(
            *line,
            json!({
                "tag": tag,
                "address": file,
                "range": format!("{offset}:{len}"),
                "offset": offset,
                "length": len,
                "status": "ok",
                "bytes_received": len,
                "error": null,
                "sha256": sha256(&pattern(offset, len)),
                "file": null,
                "earlier_file": null,
            })
        );
    }
    let batch = &lines[3]["batch"];
    assert_eq!(batch["reads"], 3);
    assert_eq!(batch["rejected"], 0);
    assert_eq!(batch["failed"], 0);
    assert_eq!(batch["transfers"], 3);
    assert_eq!(batch["requested_bytes"], 126);
    assert_eq!(batch["delivered_bytes"], 126);
    assert_eq!(batch["fetched_bytes"], 126);
    assert_eq!(
        batch["transport"],
        json!({"requests": 0, "body_bytes": 0, "retries": 0, "hedges": 0, "hedges_won": 0}),
        "local reads send no request"
    );
    assert!(
        batch["wall_ms"].as_f64().is_some_and(|ms| ms >= 0.0),
        "{batch}"
    );
    assert_eq!(batch["planned_bytes"], 126);
    assert_eq!(batch["timings"]["attempts"], 0);
    assert_eq!(batch["timings"]["first_byte_ms"], json!(null));
    assert!(
        batch["timings"]["done_ms"]["max"]
            .as_f64()
            .is_some_and(|ms| ms >= 0.0),
        "{batch}"
    );
    assert_eq!(
        batch["counters"]["transport"],
        json!({"requests": 0, "body_bytes": 0, "retries": 0, "hedges": 0, "hedges_won": 0})
    );
    assert_eq!(batch["counters"]["credentials"]["lookups"], 0);
}

#[test]
fn a_failing_read_fails_alone_with_one_stderr_line() {
    let dir = tempfile::tempdir().unwrap();
    let file = pattern_file(dir.path(), "data.bin", LEN);

    // An invalid range among valid ones: the others are delivered, the exit status is 1.
    let out = karu(dir.path(), ["read", &file, "0:4", "5:0", "8:4", "--concat"]);
    assert_eq!(out.code, 1, "{out:?}");
    let mut expected = pattern(0, 4);
    expected.extend(pattern(8, 4));
    assert_eq!(out.stdout, expected);
    let errors = out.stderr_lines();
    assert_eq!(errors.len(), 2, "{errors:?}");
    assert!(
        errors[0].starts_with("karu: read 1 (5:0): invalid_range: "),
        "{errors:?}"
    );
    assert!(
        errors[1].starts_with("karu: 1 of 3 reads failed; 8B delivered in "),
        "{errors:?}"
    );

    // A read reaching the end of the file delivers its prefix and says so.
    let out = karu(dir.path(), ["read", &file, "4090:10", "0:1", "--concat"]);
    assert_eq!(out.code, 1, "{out:?}");
    let mut expected = pattern(4090, 6);
    expected.extend(pattern(0, 1));
    assert_eq!(out.stdout, expected);
    let errors = out.stderr_lines();
    assert_eq!(errors.len(), 2, "{errors:?}");
    assert!(
        errors[0].starts_with("karu: read 0 (4090:10): range_not_satisfiable: "),
        "{errors:?}"
    );
    assert!(errors[0].ends_with("(6 bytes delivered)"), "{errors:?}");

    // The same in JSON: one line per read with its own status, then the batch.
    let out = karu(
        dir.path(),
        ["--json", "read", &file, "0:4", "5:0", "4090:10", "1:1"],
    );
    assert_eq!(out.code, 1, "{out:?}");
    assert_eq!(
        out.stderr_lines().len(),
        3,
        "two errors and the summary: {out:?}"
    );
    let mut lines = out.json_lines();
    lines[..4].sort_by_key(|line| line["tag"].as_u64());
    let statuses: Vec<(&str, u64, &str)> = lines[..4]
        .iter()
        .map(|l| {
            (
                l["status"].as_str().unwrap(),
                l["bytes_received"].as_u64().unwrap(),
                l["sha256"].as_str().unwrap(),
            )
        })
        .collect();
    let digests = [
        sha256(&pattern(0, 4)),
        sha256(&[]),
        sha256(&pattern(4090, 6)),
        sha256(&pattern(1, 1)),
    ];
    assert_eq!(
        statuses,
        vec![
            ("ok", 4, digests[0].as_str()),
            ("invalid_range", 0, digests[1].as_str()),
            ("range_not_satisfiable", 6, digests[2].as_str()),
            ("ok", 1, digests[3].as_str()),
        ]
    );
    assert_eq!(lines[4]["batch"]["reads"], 4);
    assert_eq!(lines[4]["batch"]["rejected"], 1);
    assert_eq!(lines[4]["batch"]["transfers"], 3);
    assert_eq!(lines[4]["batch"]["requested_bytes"], 15);
}

#[test]
fn window_offsets_are_relative_to_the_window() {
    let dir = tempfile::tempdir().unwrap();
    let file = pattern_file(dir.path(), "data.bin", LEN);

    let out = karu(
        dir.path(),
        [
            "--window", "100:50", "read", &file, "0:10", "40:10", "--concat",
        ],
    );
    assert_eq!((out.code, out.stderr.as_str()), (0, ""));
    let mut expected = pattern(100, 10);
    expected.extend(pattern(140, 10));
    assert_eq!(out.stdout, expected);

    // Leaving the window is an invalid range; the global flag may follow the subcommand.
    let out = karu(dir.path(), ["read", &file, "45:10", "--window", "100:50"]);
    assert_eq!(out.code, 1, "{out:?}");
    assert!(out.stdout.is_empty());
    assert!(out.stderr.contains("invalid_range"), "{out:?}");

    let out = karu(dir.path(), ["--window", "4000:end", "read", &file, "90:6"]);
    assert_eq!((out.code, out.stdout), (0, pattern(4090, 6)));

    let out = karu(dir.path(), ["--window", "100:50", "stat", &file]);
    assert_eq!(out.code, 0, "{out:?}");
    assert_eq!(
        String::from_utf8(out.stdout).unwrap(),
        "size\t50\netag\t-\n"
    );
}

#[test]
fn a_window_stat_probes_the_object() {
    let dir = tempfile::tempdir().unwrap();
    let file = pattern_file(dir.path(), "data.bin", 24);
    let missing = dir.path().join("missing.bin");
    let missing = missing.to_str().unwrap();

    // The window clipped to what exists.
    let out = karu(dir.path(), ["--window", "2:100", "stat", &file]);
    assert_eq!((out.code, out.stderr.as_str()), (0, ""));
    assert_eq!(
        String::from_utf8(out.stdout).unwrap(),
        "size\t22\netag\t-\n"
    );
    // A missing object fails, windowed or not.
    let out = karu(dir.path(), ["--window", "0:4", "stat", missing]);
    assert_eq!(out.code, 1, "{out:?}");
    assert!(out.stdout.is_empty(), "{out:?}");
    assert!(out.stderr.starts_with("karu: not_found: "), "{out:?}");

    // A remote object: one probe, its ETag kept.
    let server = karu_testkit::MockServer::start();
    server.insert_virtual("/24.bin", 24);
    server.set_etag("/24.bin", Some("\"v1\""));
    let url = server.url("/24.bin");
    let out = karu(dir.path(), ["--json", "--window", "2:100", "stat", &url]);
    assert_eq!((out.code, out.stderr.as_str()), (0, ""));
    assert_eq!(
        out.json_lines(),
        vec![json!({"size": 22, "etag": "\"v1\""})]
    );
    let out = karu(
        dir.path(),
        ["--window", "0:4", "stat", &server.url("/does-not-exist")],
    );
    assert_eq!(out.code, 1, "{out:?}");
    assert!(out.stderr.starts_with("karu: not_found: "), "{out:?}");
    let probes: Vec<_> = server
        .requests()
        .iter()
        .map(|r| (r.path.clone(), r.byte_range, r.status))
        .collect();
    assert_eq!(
        probes,
        [
            ("/24.bin".to_owned(), Some((0, 0)), 206),
            ("/does-not-exist".to_owned(), Some((0, 0)), 404),
        ]
    );
}

#[test]
fn planner_and_config_flags_are_accepted() {
    let dir = tempfile::tempdir().unwrap();
    let file = pattern_file(dir.path(), "data.bin", LEN);
    let ranges = ["0:10", "10:10", "20:10"];

    for flags in [
        vec!["--max-gap", "0"],
        vec![
            "--max-gap",
            "1048576",
            "--max-span",
            "1024",
            "--max-parts",
            "4",
            "--max-amplification",
            "2",
        ],
        vec!["--set", "planner.max_gap=0", "--set", "file_workers=1"],
    ] {
        let mut args = vec!["--json", "read", file.as_str()];
        args.extend(ranges);
        args.extend(&flags);
        let out = karu(dir.path(), &args);
        assert_eq!((out.code, out.stderr.as_str()), (0, ""), "{flags:?}");
        let mut lines = out.json_lines();
        assert_eq!(lines.len(), 4, "{flags:?}");
        lines[..3].sort_by_key(|line| line["tag"].as_u64());
        for (i, line) in lines[..3].iter().enumerate() {
            let expected = sha256(&pattern(10 * i as u64, 10));
            assert_eq!(
                line["sha256"].as_str(),
                Some(expected.as_str()),
                "{flags:?}"
            );
        }
        // Local reads are never merged, whatever the planner allows.
        let batch = &lines[3]["batch"];
        assert_eq!(batch["transfers"], 3, "{flags:?}");
        assert_eq!(batch["fetched_bytes"], 30, "{flags:?}");
    }

    let out = karu(dir.path(), ["--set", "io_threads=many", "stat", &file]);
    assert_eq!(out.code, 2, "{out:?}");
    for part in [
        "karu: invalid configuration: --set: key \"io_threads\"",
        "expected a non-negative integer",
    ] {
        assert!(out.stderr.contains(part), "{out:?}");
    }
}

#[test]
fn stat_prints_the_size() {
    let dir = tempfile::tempdir().unwrap();
    let file = pattern_file(dir.path(), "data.bin", LEN);

    let out = karu(dir.path(), ["stat", &file]);
    assert_eq!((out.code, out.stderr.as_str()), (0, ""));
    assert_eq!(
        String::from_utf8(out.stdout).unwrap(),
        "size\t4096\netag\t-\n"
    );

    let out = karu(dir.path(), ["--json", "stat", &file]);
    assert_eq!(out.code, 0, "{out:?}");
    assert_eq!(out.json_lines(), vec![json!({"size": 4096, "etag": null})]);
}

#[test]
fn ends_reports_both_ends() {
    let dir = tempfile::tempdir().unwrap();
    let file = pattern_file(dir.path(), "data.bin", LEN);

    let out = karu(dir.path(), ["--json", "ends", &file, "4", "4"]);
    assert_eq!((out.code, out.stderr.as_str()), (0, ""));
    assert_eq!(
        out.json_lines(),
        vec![json!({
            "size": LEN,
            "etag": null,
            "head_bytes": 4,
            "head_sha256": sha256(&pattern(0, 4)),
            "tail_bytes": 4,
            "tail_sha256": sha256(&pattern(LEN - 4, 4)),
            "encoding": "base64",
            "head": base64(&pattern(0, 4)),
            "tail": base64(&pattern(LEN - 4, 4)),
        })]
    );

    // The bytes themselves: raw on stdout, in hex, or in files.
    let out = karu(dir.path(), ["ends", &file, "16", "8", "--head-only"]);
    assert_eq!((out.code, out.stdout), (0, pattern(0, 16)));
    let out = karu(dir.path(), ["ends", &file, "16", "8", "--tail-only"]);
    assert_eq!((out.code, out.stdout), (0, pattern(LEN - 8, 8)));
    let out = karu(
        dir.path(),
        ["--json", "ends", &file, "2", "3", "--encoding", "hex"],
    );
    assert_eq!(out.code, 0, "{out:?}");
    let line = &out.json_lines()[0];
    assert_eq!(
        (&line["encoding"], &line["head"], &line["tail"]),
        (
            &json!("hex"),
            &json!(hex::encode(pattern(0, 2))),
            &json!(hex::encode(pattern(LEN - 3, 3)))
        )
    );
    let ends_dir = dir.path().join("ends");
    let out = karu(
        dir.path(),
        [
            "ends",
            &file,
            "5",
            "6",
            "--output",
            ends_dir.to_str().unwrap(),
        ],
    );
    assert_eq!(out.code, 0, "{out:?}");
    assert_eq!(
        std::fs::read(ends_dir.join("head.bin")).unwrap(),
        pattern(0, 5)
    );
    assert_eq!(
        std::fs::read(ends_dir.join("tail.bin")).unwrap(),
        pattern(LEN - 6, 6)
    );
    let out = karu(
        dir.path(),
        ["ends", &file, "1", "1", "--head-only", "--json"],
    );
    assert_eq!(out.code, 2, "raw bytes or JSON: {out:?}");

    // Each end is clamped to the size.
    let out = karu(dir.path(), ["ends", &file, "10000", "1"]);
    assert_eq!(out.code, 0, "{out:?}");
    assert_eq!(
        String::from_utf8(out.stdout).unwrap(),
        format!(
            "size\t4096\netag\t-\nhead\t4096 bytes\tsha256 {}\ntail\t1 bytes\tsha256 {}\n",
            sha256(&pattern(0, LEN)),
            sha256(&pattern(LEN - 1, 1)),
        )
    );
}

#[test]
fn a_malformed_argument_is_a_usage_error() {
    let dir = tempfile::tempdir().unwrap();
    let file = pattern_file(dir.path(), "data.bin", LEN);

    for (args, says) in [
        (
            vec!["read", &file, "10-5"],
            "range \"10-5\": expected OFFSET:LENGTH",
        ),
        (
            vec!["read", &file, "0:4", "x:5"],
            "range \"x:5\": \"x\" is not a number of bytes",
        ),
        (
            vec!["--window", "100", "read", &file, "0:1"],
            "--window \"100\": expected START:LEN",
        ),
        (
            vec!["--set", "novalue", "stat", &file],
            "expected KEY=VALUE",
        ),
        (vec!["read", &file], "no ranges"),
        (vec!["ends", &file, "4"], "required"),
    ] {
        let out = karu(dir.path(), &args);
        assert_eq!(out.code, 2, "{args:?}: {out:?}");
        assert!(out.stdout.is_empty(), "{args:?}: {out:?}");
        assert!(out.stderr.contains(says), "{args:?}: {out:?}");
    }
}

#[test]
fn a_missing_file_fails_its_read() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing.bin");
    let missing = missing.to_str().unwrap();

    let out = karu(dir.path(), ["read", missing, "0:4"]);
    assert_eq!(out.code, 1, "{out:?}");
    assert!(out.stdout.is_empty());
    let errors = out.stderr_lines();
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert!(
        errors[0].starts_with("karu: read 0 (0:4): not_found: "),
        "{errors:?}"
    );
    assert!(errors[0].contains(missing), "{errors:?}");

    let out = karu(dir.path(), ["--json", "read", missing, "0:4"]);
    assert_eq!(out.code, 1, "{out:?}");
    assert_eq!(out.json_lines()[0]["status"], "not_found");

    // A directory is not a file.
    let out = karu(dir.path(), ["read", dir.path().to_str().unwrap(), "0:4"]);
    assert_eq!(out.code, 1, "{out:?}");
    assert!(out.stderr.contains("is_directory"), "{out:?}");
}

#[test]
fn stat_and_ends_of_a_missing_file_exit_1() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing.bin");
    let missing = missing.to_str().unwrap();
    for args in [vec!["stat", missing], vec!["ends", missing, "4", "4"]] {
        let out = karu(dir.path(), &args);
        assert_eq!(out.code, 1, "{args:?}: {out:?}");
        assert!(out.stderr.contains("not_found"), "{args:?}: {out:?}");
    }
}

#[test]
fn if_match_on_a_local_file_is_an_invalid_argument() {
    let dir = tempfile::tempdir().unwrap();
    let file = pattern_file(dir.path(), "data.bin", LEN);
    let out = karu(dir.path(), ["read", &file, "0:4", "--if-match", "\"abc\""]);
    assert_eq!(out.code, 1, "{out:?}");
    assert!(out.stdout.is_empty());
    assert!(out.stderr.contains("invalid_argument"), "{out:?}");
}

#[test]
fn an_unreadable_file_is_permission_denied() {
    // uid 65534 must be able to reach the directory, so it lives under /tmp, not $HOME.
    let dir = tempfile::Builder::new()
        .prefix("karu-cli-")
        .tempdir_in("/tmp")
        .unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let file = pattern_file(dir.path(), "secret.bin", LEN);
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o000)).unwrap();

    let mut command = if running_as_root() {
        // Root reads any file, so drop to `nobody`. The binary is copied next to the file so
        // that `nobody` can execute it wherever the target directory is.
        let Some(setpriv) = which("setpriv") else {
            eprintln!("skipped: running as root and setpriv (util-linux) is not installed");
            return;
        };
        let binary = dir.path().join("karu");
        std::fs::copy(env!("CARGO_BIN_EXE_karu"), &binary).unwrap();
        std::fs::set_permissions(&binary, std::fs::Permissions::from_mode(0o755)).unwrap();
        let mut command = Command::new(setpriv);
        command
            .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
            .arg(binary);
        command
    } else {
        Command::new(env!("CARGO_BIN_EXE_karu"))
    };
    command.args(["read", &file, "0:4"]);
    let out = run(isolate(&mut command, dir.path()));
    assert_eq!(out.code, 1, "{out:?}");
    assert!(out.stdout.is_empty(), "{out:?}");
    let errors = out.stderr_lines();
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert!(
        errors[0].starts_with("karu: read 0 (0:4): permission_denied: "),
        "{errors:?}"
    );
    assert!(errors[0].contains(&file), "{errors:?}");
}

#[test]
fn dot_dot_means_what_the_operating_system_means() {
    // hello.txt, a/hello.txt, a/b/, and blink -> a/b: `blink/..` is `a`, not `.`.
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    std::fs::create_dir_all(root.join("a/b")).unwrap();
    std::fs::write(root.join("hello.txt"), "the top hello\n").unwrap();
    std::fs::write(root.join("a/hello.txt"), "hello from a\n").unwrap();
    std::os::unix::fs::symlink("a/b", root.join("blink")).unwrap();

    let cat = Command::new("cat")
        .arg("blink/../hello.txt")
        .current_dir(root)
        .output()
        .unwrap();
    assert!(cat.status.success(), "{cat:?}");
    assert_eq!(cat.stdout, b"hello from a\n");

    // Relative, absolute and as a file URI, Karu reads what cat reads.
    let absolute = root.join("blink/../hello.txt");
    let absolute = absolute.to_str().unwrap();
    for address in [
        "blink/../hello.txt".to_string(),
        "./blink//../hello.txt".to_string(),
        absolute.to_string(),
        format!("file://{absolute}"),
    ] {
        let out = karu(root, ["read", &address, "0:13"]);
        assert_eq!((out.code, out.stderr.as_str()), (0, ""), "{address}");
        assert_eq!(out.stdout, cat.stdout, "{address}");
    }

    // Where the OS says ENOENT, the read is not_found.
    let cat = Command::new("cat")
        .arg("relative/../hello.txt")
        .current_dir(root)
        .output()
        .unwrap();
    assert!(!cat.status.success(), "{cat:?}");
    let out = karu(root, ["read", "relative/../hello.txt", "0:1"]);
    assert_eq!(out.code, 1, "{out:?}");
    assert!(out.stdout.is_empty(), "{out:?}");
    let errors = out.stderr_lines();
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert!(
        errors[0].starts_with("karu: read 0 (0:1): not_found: "),
        "{errors:?}"
    );
    assert!(errors[0].contains("relative/../hello.txt"), "{errors:?}");
}

#[test]
fn a_device_or_fifo_has_an_unknown_size_and_a_fifo_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let out = karu(dir.path(), ["stat", "/dev/zero"]);
    assert_eq!((out.code, out.stderr.as_str()), (0, ""));
    assert_eq!(
        String::from_utf8(out.stdout).unwrap(),
        "size\tunknown\netag\t-\n"
    );
    let out = karu(dir.path(), ["--json", "stat", "/dev/null"]);
    assert_eq!(out.code, 0, "{out:?}");
    assert_eq!(out.json_lines(), vec![json!({"size": null, "etag": null})]);
    let out = karu(dir.path(), ["read", "/dev/zero", "4096:8"]);
    assert_eq!((out.code, out.stdout), (0, vec![0u8; 8]));

    let fifo = dir.path().join("pipe");
    let made = Command::new("mkfifo").arg(&fifo).status().unwrap();
    assert!(made.success());
    let fifo = fifo.to_str().unwrap();
    let out = karu(dir.path(), ["stat", fifo]);
    assert_eq!(out.code, 0, "{out:?}");
    assert_eq!(
        String::from_utf8(out.stdout).unwrap(),
        "size\tunknown\netag\t-\n"
    );

    // No writer ever comes. If the read waited for one, a watchdog lets it go after 20 s
    // (so the test fails instead of hanging) and says so.
    let (finished, watch) = std::sync::mpsc::channel::<()>();
    let watchdog = {
        let fifo = fifo.to_string();
        std::thread::spawn(move || {
            let timed_out = watch
                .recv_timeout(std::time::Duration::from_secs(20))
                .is_err();
            if timed_out {
                let _ = std::fs::OpenOptions::new().write(true).open(&fifo);
            }
            timed_out
        })
    };
    let out = karu(dir.path(), ["read", fifo, "0:4"]);
    let _ = finished.send(());
    assert!(!watchdog.join().unwrap(), "the read waited for a writer");
    assert_eq!(out.code, 1, "{out:?}");
    let errors = out.stderr_lines();
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert!(
        errors[0].starts_with("karu: read 0 (0:4): unsupported: "),
        "{errors:?}"
    );
    assert!(errors[0].contains(fifo), "{errors:?}");
    let out = karu(dir.path(), ["ends", fifo, "4", "4"]);
    assert_eq!(out.code, 1, "{out:?}");
    assert!(out.stderr.starts_with("karu: unsupported: "), "{out:?}");
}
