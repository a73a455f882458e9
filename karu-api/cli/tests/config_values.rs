//! Values are typed by their key (`--set s3.region=123` is the string "123"), sizes and
//! durations take units everywhere, hex is accepted where numbers are, and `karu config`
//! shows where each value came from, secrets redacted.

mod support;

use std::process::Command;

use serde_json::Value;
use support::{isolate, karu, pattern, pattern_file, run};

/// The value and origin `karu config` prints for `key` (JSON form).
fn explained(out: &support::Run, key: &str) -> (String, String) {
    let lines = out.json_lines();
    let line = lines
        .iter()
        .find(|line| line["key"] == key)
        .unwrap_or_else(|| panic!("{key} in {lines:?}"));
    (
        line["value"].as_str().unwrap().to_owned(),
        line["origin"].as_str().unwrap().to_owned(),
    )
}

#[test]
fn set_values_take_the_type_of_their_key() {
    let dir = tempfile::tempdir().unwrap();
    let out = karu(
        dir.path(),
        [
            "--set",
            "s3.region=123",
            "--set",
            "http_provider.token=12345",
            "--set",
            "s3.profile='\"quoted\"'",
            "--set",
            "planner.max_parts=0x10",
            "--set",
            "planner.max_gap=1 MiB",
            "--set",
            "retry.deadline=1m 30s",
            "--set",
            "s3.anonymous=true",
            "--json",
            "config",
            "s3://bucket/key",
        ],
    );
    assert_eq!((out.code, out.stderr.as_str()), (0, ""), "{out:?}");
    assert_eq!(
        explained(&out, "s3.region"),
        ("\"123\"".into(), "--set".into())
    );
    assert_eq!(
        explained(&out, "http_provider.token"),
        ("<redacted>".into(), "--set".into())
    );
    assert!(
        !String::from_utf8_lossy(&out.stdout).contains("12345"),
        "the token is a secret"
    );
    // A TOML literal string keeps the double quotes inside it.
    assert_eq!(explained(&out, "s3.profile").0, "'\"quoted\"'");
    assert_eq!(explained(&out, "planner.max_parts").0, "16");
    assert_eq!(explained(&out, "planner.max_gap").0, "\"1MiB\"");
    assert_eq!(explained(&out, "retry.deadline").0, "\"1m 30s\"");
    assert_eq!(explained(&out, "s3.anonymous").0, "\"true\"");

    // A quoted value is a TOML string: the quotes are not sent.
    let out = karu(
        dir.path(),
        [
            "--set",
            "s3.region=\"123\"",
            "--json",
            "config",
            "s3://bucket/key",
        ],
    );
    assert_eq!(explained(&out, "s3.region").0, "\"123\"");
}

#[test]
fn environment_values_take_units_and_hex() {
    let dir = tempfile::tempdir().unwrap();
    let mut command = Command::new(env!("CARGO_BIN_EXE_karu"));
    isolate(&mut command, dir.path())
        .env("KARU_PLANNER__MAX_GAP", "1 MiB")
        .env("KARU_FILE_WORKERS", "0x2")
        .env("KARU_S3__REGION", "0042")
        .args(["--json", "config"]);
    let out = run(&mut command);
    assert_eq!((out.code, out.stderr.as_str()), (0, ""), "{out:?}");
    assert_eq!(
        explained(&out, "planner.max_gap"),
        (
            "\"1MiB\"".into(),
            "environment variable KARU_PLANNER__MAX_GAP".into()
        )
    );
    assert_eq!(explained(&out, "file_workers").0, "2");
    assert_eq!(explained(&out, "s3.region").0, "\"0042\"");
}

#[test]
fn planner_flags_take_units() {
    let dir = tempfile::tempdir().unwrap();
    let file = pattern_file(dir.path(), "data.bin", 4096);
    let out = karu(
        dir.path(),
        [
            "read",
            &file,
            "0x10:1KiB",
            "--max-gap",
            "1MiB",
            "--max-span",
            "64 MiB",
            "--max-parts",
            "0x10",
        ],
    );
    assert_eq!((out.code, out.stderr.as_str()), (0, ""), "{out:?}");
    assert_eq!(out.stdout, pattern(16, 1024));
}

#[test]
fn karu_config_names_layer_rule_and_line_and_redacts_secrets() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("karu.toml");
    std::fs::write(
        &config,
        "[retry]\ndeadline = \"30s\"\n\n[paths.\"s3://bucket/logs\"]\nretry.deadline = \"5s\"\n\
         s3.secret_access_key = \"hunter2\"\ns3.access_key_id = \"AKID\"\n",
    )
    .unwrap();
    let path = config.display().to_string();
    let mut command = Command::new(env!("CARGO_BIN_EXE_karu"));
    isolate(&mut command, dir.path())
        .env("KARU_IO_THREADS", "2")
        .args(["config", "https://bucket.s3.amazonaws.com/logs/2024.json"]);
    let out = run(&mut command);
    assert_eq!((out.code, out.stderr.as_str()), (0, ""), "{out:?}");
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(!text.contains("hunter2"), "{text}");
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(
        lines[0],
        "# karu configuration for https://bucket.s3.amazonaws.com/logs/2024.json (canonical \
         s3://bucket/logs/2024.json)"
    );
    assert_eq!(
        lines[1],
        format!(
            "# layers read, lowest first: built-in defaults, {path}, environment variable \
             KARU_IO_THREADS"
        )
    );
    assert_eq!(
        lines[2],
        "# path rules that apply, weakest first: \"s3://bucket/logs\""
    );
    let line = |key: &str| {
        let found = lines
            .iter()
            .find(|line| line.starts_with(&format!("{key} = ")))
            .unwrap_or_else(|| panic!("{key} in {text}"));
        let (assignment, place) = found.split_once("  # ").unwrap();
        (assignment.trim_end().to_owned(), place.to_owned())
    };
    assert_eq!(
        line("retry.deadline"),
        (
            "retry.deadline = \"5s\"".into(),
            format!("path rule \"s3://bucket/logs\" in {path}:5")
        )
    );
    assert_eq!(
        line("io_threads"),
        (
            "io_threads = 2".into(),
            "environment variable KARU_IO_THREADS".into()
        )
    );
    assert_eq!(
        line("s3.secret_access_key").0,
        "s3.secret_access_key = <redacted>"
    );
    assert_eq!(line("retry.attempts").1, "built-in defaults");

    // Elsewhere the rule does not apply: the file's global deadline does.
    let out = karu(dir.path(), ["--json", "config", "s3://bucket/other"]);
    let lines = out.json_lines();
    assert_eq!(lines[0]["rules"], Value::Array(Vec::new()));
    let deadline = lines.iter().find(|l| l["key"] == "retry.deadline").unwrap();
    assert_eq!(deadline["value"], "\"30s\"");
    assert_eq!(deadline["line"], 2);
    assert_eq!(deadline["rule"], Value::Null);
}

#[test]
fn provider_variables_show_as_the_values_they_give() {
    let dir = tempfile::tempdir().unwrap();
    let mut command = Command::new(env!("CARGO_BIN_EXE_karu"));
    isolate(&mut command, dir.path())
        .env("AWS_REGION", "eu-west-1")
        .env("AWS_DEFAULT_REGION", "us-west-2")
        .env("AWS_ENDPOINT_URL", "http://127.0.0.1:9000")
        .env("AWS_PROFILE", "analytics")
        .env("AZURE_STORAGE_ACCOUNT_KEY", "c2VjcmV0LWtleQ==")
        .env("HF_TOKEN", "hf_secret_token")
        .env("KARU_LOG", "karu::http=debug")
        .args([
            "--set",
            "s3.aws_profile=explicit",
            "--json",
            "config",
            "s3://bucket/key",
        ]);
    let out = run(&mut command);
    assert_eq!((out.code, out.stderr.as_str()), (0, ""), "{out:?}");
    assert_eq!(
        explained(&out, "s3.region"),
        (
            "\"eu-west-1\"".into(),
            "environment variable AWS_REGION".into()
        ),
        "the first of the variables the provider reads"
    );
    assert_eq!(
        explained(&out, "s3.endpoint"),
        (
            "\"http://127.0.0.1:9000\"".into(),
            "environment variable AWS_ENDPOINT_URL".into()
        )
    );
    // A key set by a layer (here under an alias) beats the variable.
    assert_eq!(
        explained(&out, "s3.aws_profile"),
        ("\"explicit\"".into(), "--set".into())
    );
    let lines = out.json_lines();
    assert!(!lines.iter().any(|l| l["key"] == "s3.profile"), "{lines:?}");
    // Secrets from the environment are redacted like any others.
    assert_eq!(explained(&out, "azure.account_key").0, "<redacted>");
    assert_eq!(
        explained(&out, "hf.token"),
        ("<redacted>".into(), "environment variable HF_TOKEN".into())
    );
    let text = String::from_utf8_lossy(&out.stdout);
    for secret in ["c2VjcmV0LWtleQ==", "hf_secret_token"] {
        assert!(!text.contains(secret), "{text}");
    }
}

#[test]
fn config_keys_lists_every_key_of_every_provider() {
    let dir = tempfile::tempdir().unwrap();
    let out = karu(dir.path(), ["--json", "config", "--keys"]);
    assert_eq!((out.code, out.stderr.as_str()), (0, ""), "{out:?}");
    let lines = out.json_lines();
    let find = |key: &str| {
        lines
            .iter()
            .find(|l| l["key"] == key)
            .unwrap_or_else(|| panic!("{key} in {lines:?}"))
    };
    let region = find("s3.region");
    assert_eq!(region["aliases"], serde_json::json!(["s3.aws_region"]));
    assert_eq!(
        region["environment"],
        serde_json::json!(["KARU_S3__REGION", "AWS_REGION, AWS_DEFAULT_REGION"])
    );
    assert!(region["meaning"].as_str().unwrap().contains("region"));
    assert_eq!(
        find("concurrency")["meaning"],
        "global: a path rule may not set it"
    );
    assert_eq!(
        find("planner.max_gap")["meaning"],
        "global: a path rule may not set it"
    );
    assert_eq!(find("retry.deadline")["meaning"], "");
    assert_eq!(
        find("http.ca_file")["environment"],
        serde_json::json!(["KARU_CA_FILE", "KARU_HTTP__CA_FILE"])
    );
    for key in [
        "gcs.token",
        "azure.sas_token",
        "hf.token",
        "http_provider.headers",
        "source.profile",
    ] {
        assert!(!find(key)["meaning"].as_str().unwrap().is_empty(), "{key}");
    }
    // Every key a provider reads is documented: none is listed without its meaning.
    let undocumented: Vec<_> = lines
        .iter()
        .filter(|l| l["meaning"] == "(not documented by its provider)")
        .collect();
    assert_eq!(undocumented, Vec::<&Value>::new());
    // Every section of this build is there.
    for section in ["s3", "gcs", "azure", "hf", "http_provider", "source"] {
        assert!(lines.iter().any(|l| l["section"] == section), "{section}");
    }
    let text = karu(dir.path(), ["config", "--keys"]);
    assert_eq!(text.code, 0);
    let text = String::from_utf8(text.stdout).unwrap();
    assert!(
        text.contains("# [s3]\ns3.region (also s3.aws_region)\n"),
        "{text}"
    );
}
