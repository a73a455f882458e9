//! Every configuration mistake is a clear error (status 2) before anything is read, in the
//! words of the command line, naming where the mistake was written.

mod support;

use std::os::unix::fs::PermissionsExt;
use std::process::Command;

use support::{isolate, karu, pattern_file, run, running_as_root, which};

/// `karu ARGS` with extra environment variables.
fn karu_env(home: &std::path::Path, env: &[(&str, &str)], args: &[&str]) -> support::Run {
    let mut command = Command::new(env!("CARGO_BIN_EXE_karu"));
    isolate(&mut command, home);
    command.args(args).envs(env.iter().copied());
    run(&mut command)
}

/// Asserts a usage or configuration error whose one stderr line is `expected`.
#[track_caller]
fn refused(out: &support::Run, expected: &str) {
    assert_eq!(out.code, 2, "{out:?}");
    assert!(out.stdout.is_empty(), "{out:?}");
    assert_eq!(out.stderr_lines(), [expected], "{out:?}");
}

#[test]
fn thread_and_worker_counts_have_upper_bounds() {
    let dir = tempfile::tempdir().unwrap();
    let file = pattern_file(dir.path(), "data.bin", 64);
    for (var, key, max) in [
        ("KARU_FILE_WORKERS", "file_workers", 1024),
        ("KARU_IO_THREADS", "io_threads", 256),
        ("KARU_CREDENTIAL_WORKERS", "credential_workers", 256),
        ("KARU_CONCURRENCY", "concurrency", 65536),
    ] {
        let out = karu_env(dir.path(), &[(var, "100000")], &["stat", &file]);
        refused(
            &out,
            &format!(
                "karu: invalid configuration: environment variable {var}: key \"{key}\": out of \
                 range (at most {max}), found 100000"
            ),
        );
    }
}

#[test]
fn settings_that_guarantee_failure_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let file = pattern_file(dir.path(), "data.bin", 64);
    let out = karu(dir.path(), ["--set", "retry.deadline=0", "stat", &file]);
    refused(
        &out,
        "karu: invalid configuration: --set: key \"retry.deadline\": expected a duration above \
         0, found 0 (a deadline of 0 fails every read before it starts)",
    );
    for flag in ["--max-parts", "--max-amplification"] {
        let out = karu(dir.path(), ["read", &file, "0:4", flag, "0"]);
        assert_eq!(out.code, 2, "{flag}: {out:?}");
        assert!(
            out.stderr.contains("expected at least 1, found 0"),
            "{flag}: {out:?}"
        );
    }
}

#[test]
fn misspelled_environment_variables_are_reported_with_a_did_you_mean() {
    let dir = tempfile::tempdir().unwrap();
    let file = pattern_file(dir.path(), "data.bin", 64);
    for (var, hint) in [
        ("KARU_IO_THREAD", "did you mean KARU_IO_THREADS?"),
        (
            "KARU_PLANNER",
            "did you mean KARU_PLANNER__<KEY> (such as KARU_PLANNER__MAX_GAP)?",
        ),
        (
            "KARU_FOO",
            "Karu reads KARU_CONFIG, KARU_CA_FILE, KARU_<SETTING> such as KARU_IO_THREADS, \
             KARU_<TABLE>__<KEY> such as KARU_PLANNER__MAX_GAP, and KARU_<SECTION>__<KEY> \
             such as KARU_S3__REGION",
        ),
        ("KARU_S3__REGIONN", "unknown key, did you mean \"region\"?"),
    ] {
        let out = karu_env(dir.path(), &[(var, "4")], &["stat", &file]);
        assert_eq!(out.code, 2, "{var}: {out:?}");
        let line = out.stderr_lines().join("\n");
        assert!(
            line.starts_with(&format!(
                "karu: invalid configuration: environment variable {var}: "
            )),
            "{line}"
        );
        assert!(line.ends_with(hint), "{var}: {line}");
    }
}

#[test]
fn unknown_tables_and_provider_keys_name_file_line_and_key() {
    let dir = tempfile::tempdir().unwrap();
    let file = pattern_file(dir.path(), "data.bin", 64);
    let config = dir.path().join("karu.toml");
    let path = config.display().to_string();

    std::fs::write(&config, "io_threads = 2\n[nonsense]\nx = 1\n").unwrap();
    let out = karu(dir.path(), ["--config", &path, "stat", &file]);
    assert_eq!(out.code, 2, "{out:?}");
    assert!(
        out.stderr.starts_with(&format!(
            "karu: invalid configuration: {path}:2: key \"nonsense\": unknown key, expected one of"
        )),
        "{out:?}"
    );

    std::fs::write(&config, "[s3]\nregionn = \"x\"\n").unwrap();
    let out = karu(dir.path(), ["--config", &path, "stat", &file]);
    refused(
        &out,
        &format!(
            "karu: invalid configuration: {path}:2: key \"s3.regionn\": unknown key, did you mean \
             \"region\"?"
        ),
    );

    std::fs::write(
        &config,
        "[s3]\nregion = \"eu-west-1\"\n\n[paths.\"s3://bucket/logs\".s3]\nendpoint = \"not a url\"\n",
    )
    .unwrap();
    let out = karu(dir.path(), ["--config", &path, "stat", &file]);
    refused(
        &out,
        &format!(
            "karu: invalid configuration: {path}:5: key \"paths.'s3://bucket/logs'.s3.endpoint\": \
             expected an http or https URL such as http://127.0.0.1:9000; this one is not a URL, \
             found string \"not a url\""
        ),
    );

    // The project file is read from the current directory: the same checks apply.
    std::fs::write(&config, "[planner]\nmax_parts = 5000000000\n").unwrap();
    let out = karu(dir.path(), ["stat", &file]);
    refused(
        &out,
        &format!(
            "karu: invalid configuration: {path}:2: key \"planner.max_parts\": out of range (at \
             most 4294967295), found 5000000000"
        ),
    );
}

#[test]
fn path_rule_prefixes_are_canonical_and_malformed_ones_refused() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("rules.toml");
    let path = config.display().to_string();
    std::fs::write(
        &config,
        "[paths.\"HTTP://Host.Example/Data\"]\nretry.attempts = 2\n",
    )
    .unwrap();
    let out = karu(
        dir.path(),
        [
            "--config",
            &path,
            "config",
            "http://host.example/Data/x.bin",
        ],
    );
    assert_eq!(out.code, 0, "{out:?}");
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains("# path rules that apply, weakest first: \"http://host.example/Data\""),
        "{text}"
    );
    assert!(
        text.lines()
            .any(|line| line.starts_with("retry.attempts = 2 ")
                && line.ends_with(&format!(
                    "# path rule \"http://host.example/Data\" in {path}:2"
                ))),
        "{text}"
    );

    for (prefix, says) in [
        (
            "nope://bucket",
            "no backend is registered for scheme \"nope\"",
        ),
        ("s3://bucket/k?versionId=3", "query"),
    ] {
        std::fs::write(&config, format!("[paths.{prefix:?}]\nretry.attempts = 2\n")).unwrap();
        let out = karu(dir.path(), ["--config", &path, "config"]);
        assert_eq!(out.code, 2, "{prefix}: {out:?}");
        assert!(
            out.stderr.starts_with(&format!(
                "karu: invalid configuration: {path}:1: key \"paths.'{prefix}'\": "
            )),
            "{out:?}"
        );
        assert!(out.stderr.contains(says), "{prefix}: {out:?}");
    }
}

#[test]
fn messages_speak_the_words_of_the_command_line() {
    let dir = tempfile::tempdir().unwrap();
    let file = pattern_file(dir.path(), "data.bin", 64);
    let missing = dir.path().join("missing.toml");
    let missing = missing.display().to_string();
    let out = karu(dir.path(), ["--config", &missing, "stat", &file]);
    refused(
        &out,
        &format!("karu: invalid configuration: {missing}: file not found (given with --config)"),
    );
    let out = karu(dir.path(), ["--set", "paths.x=1", "stat", &file]);
    assert_eq!(out.code, 2, "{out:?}");
    assert!(!out.stderr.contains("ConfigBuilder"), "{out:?}");
    assert!(
        out.stderr.contains("write a [paths.\"PREFIX\"] table"),
        "{out:?}"
    );
    let out = karu(
        dir.path(),
        ["--set", "io_threads=99999999999999999999999", "stat", &file],
    );
    refused(
        &out,
        "karu: invalid configuration: --set: key \"io_threads\": out of range (at most \
         18446744073709551615), found 99999999999999999999999",
    );
}

/// Runs `karu` as `nobody` (when root) so that permissions apply.
fn as_nobody(dir: &std::path::Path, home: &std::path::Path, args: &[&str]) -> Option<support::Run> {
    let mut command = if running_as_root() {
        let Some(setpriv) = which("setpriv") else {
            eprintln!("skipped: running as root and setpriv (util-linux) is not installed");
            return None;
        };
        let binary = dir.join("karu");
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
    command.args(args);
    isolate(&mut command, dir).env("HOME", home);
    Some(run(&mut command))
}

#[test]
fn an_unreachable_user_file_is_skipped_and_an_unreadable_one_is_an_error() {
    // Under /tmp so that `nobody` can reach the directory and the binary.
    let dir = tempfile::Builder::new()
        .prefix("karu-cli-home-")
        .tempdir_in("/tmp")
        .unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let file = pattern_file(dir.path(), "data.bin", 64);
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();

    // A home directory nobody may enter: its config file cannot be reached, so it is absent.
    let home = dir.path().join("home");
    std::fs::create_dir_all(home.join(".config/karu")).unwrap();
    std::fs::write(home.join(".config/karu/config.toml"), "io_threads = 2\n").unwrap();
    std::fs::set_permissions(&home, std::fs::Permissions::from_mode(0o700)).unwrap();
    let Some(out) = as_nobody(dir.path(), &home, &["stat", &file]) else {
        return;
    };
    assert_eq!((out.code, out.stderr.as_str()), (0, ""), "{out:?}");

    // A user file that exists but cannot be read is an error.
    let readable_home = dir.path().join("home2");
    let user_file = readable_home.join(".config/karu/config.toml");
    std::fs::create_dir_all(user_file.parent().unwrap()).unwrap();
    for d in [
        &readable_home,
        &readable_home.join(".config"),
        &readable_home.join(".config/karu"),
    ] {
        std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    std::fs::write(&user_file, "io_threads = 2\n").unwrap();
    std::fs::set_permissions(&user_file, std::fs::Permissions::from_mode(0o000)).unwrap();
    let out = as_nobody(dir.path(), &readable_home, &["stat", &file]).unwrap();
    assert_eq!(out.code, 2, "{out:?}");
    assert!(
        out.stderr.starts_with(&format!(
            "karu: invalid configuration: {}: cannot read file: Permission denied",
            user_file.display()
        )),
        "{out:?}"
    );
}
