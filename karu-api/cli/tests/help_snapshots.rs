//! `karu --help` and each subcommand's help, compared with the committed texts in
//! `tests/snapshots/`. After a deliberate change, `UPDATE_SNAPSHOTS=1 cargo test -p karu-cli
//! --test help_snapshots` rewrites them; review the diff before committing.

mod support;

use std::path::PathBuf;

use support::karu;

/// The help of `args`, compared with `tests/snapshots/{name}.txt`.
#[track_caller]
fn check(name: &str, args: &[&str]) {
    let home = tempfile::tempdir().unwrap();
    let out = karu(home.path(), args);
    assert_eq!((out.code, out.stderr.as_str()), (0, ""), "{args:?}");
    let actual = String::from_utf8(out.stdout).expect("help is UTF-8");
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/snapshots")
        .join(format!("{name}.txt"));
    if std::env::var_os("UPDATE_SNAPSHOTS").is_some() {
        std::fs::write(&path, &actual).unwrap();
        return;
    }
    let expected = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e} (run with UPDATE_SNAPSHOTS=1)", path.display()));
    assert!(
        actual == expected,
        "{args:?} differs from {}:\n--- expected\n{expected}\n--- actual\n{actual}",
        path.display()
    );
}

#[test]
fn top_level_help() {
    check("karu--help", &["--help"]);
    check("karu-h", &["-h"]);
}

#[test]
fn subcommand_help() {
    check("read--help", &["read", "--help"]);
    check("stat--help", &["stat", "--help"]);
    check("ends--help", &["ends", "--help"]);
    check("config--help", &["config", "--help"]);
    check("completions--help", &["completions", "--help"]);
}

#[test]
fn each_subcommand_points_to_the_main_help_instead_of_repeating_it() {
    let home = tempfile::tempdir().unwrap();
    let main = String::from_utf8(karu(home.path(), ["--help"]).stdout).unwrap();
    for block in [
        "Addresses:",
        "Configuration, lowest first",
        "Environment:",
        "Exit status:",
    ] {
        assert_eq!(main.matches(block).count(), 1, "{block} in karu --help");
        for sub in ["read", "stat", "ends", "config", "completions"] {
            let help = String::from_utf8(karu(home.path(), [sub, "--help"]).stdout).unwrap();
            assert!(!help.contains(block), "{block} in karu {sub} --help");
            assert!(help.contains("see `karu --help`"), "karu {sub} --help");
        }
    }
}

#[test]
fn completions_for_each_shell() {
    let home = tempfile::tempdir().unwrap();
    for (shell, marks) in [
        ("bash", ["_karu()", "complete -F _karu"]),
        ("zsh", ["#compdef karu", "_karu"]),
        ("fish", ["complete -c karu", "__fish_karu"]),
    ] {
        let out = karu(home.path(), ["completions", shell]);
        assert_eq!((out.code, out.stderr.as_str()), (0, ""), "{shell}");
        let script = String::from_utf8(out.stdout).unwrap();
        for mark in marks {
            assert!(script.contains(mark), "{shell}: no {mark:?}");
        }
        for word in [
            "read",
            "stat",
            "ends",
            "config",
            "completions",
            "ranges-from",
        ] {
            assert!(script.contains(word), "{shell}: no {word:?}");
        }
        // The shell itself reads it without a syntax error, where it is installed.
        if let Some(binary) = support::which(shell) {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("karu.completion");
            std::fs::write(&path, &script).unwrap();
            let check = std::process::Command::new(binary)
                .arg("-n")
                .arg(&path)
                .output()
                .unwrap();
            assert!(check.status.success(), "{shell} -n: {check:?}");
        }
    }
    let out = karu(home.path(), ["completions", "tcsh"]);
    assert_eq!(out.code, 2, "{out:?}");
}

#[test]
fn the_help_says_what_a_new_user_needs() {
    let home = tempfile::tempdir().unwrap();
    let help = String::from_utf8(karu(home.path(), ["--help"]).stdout).unwrap();
    for needed in [
        "s3://bucket/key",
        "https://bucket.s3.REGION.amazonaws.com/key",
        "http://host/path",
        "file:///path/file",
        "~/.config/karu/config.toml",
        "./karu.toml",
        "KARU_CONFIG",
        "KARU_IO_THREADS",
        "KARU_<SECTION>__<KEY>",
        "Exit status:",
        "3  the output could not be written",
        "broken pipe",
        "planner.*",
        "karu config --keys",
        "KARU_LOG",
    ] {
        assert!(help.contains(needed), "--help lacks {needed:?}:\n{help}");
    }
}
