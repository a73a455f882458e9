//! Layering, path rules, sections, snapshot immutability and every error message, through the
//! public API only, with real files in a temporary directory.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use karu_config::{
    ByteSize, ConfigBuilder, ConfigError, ConfigErrorKind, Dollars, HedgeAfter, HttpVersion,
    InvalidKey, Origin, PriceList, Prices, Seconds, Section, SectionConfig, SectionKeys, Settings,
    Share, Snapshot, Trade,
};
use serde::Deserialize;
use tempfile::TempDir;

/// A builder that reads no default file, sees an empty environment and knows the sections a
/// client with providers would declare.
fn isolated() -> ConfigBuilder {
    ConfigBuilder::new()
        .user_file(None)
        .project_file(None)
        .environment(std::iter::empty::<(String, String)>())
        .section(Section::of::<S3Section>("s3"))
        .section(Section::of::<Open>("gcs"))
        .section(Section::of::<Open>("azure"))
        .section(Section::of::<Open>("http_provider"))
}

/// A section that takes any key.
#[derive(Debug, Default, Deserialize)]
#[serde(transparent)]
struct Open(#[allow(dead_code)] std::collections::BTreeMap<String, toml::Value>);

impl SectionConfig for Open {}
impl SectionKeys for Open {}

/// Writes `content` to `name` inside `dir` and returns its path.
fn write(dir: &TempDir, name: &str, content: &str) -> PathBuf {
    let path = dir.path().join(name);
    std::fs::write(&path, content).unwrap();
    path
}

fn build_error(builder: &ConfigBuilder) -> ConfigError {
    builder
        .build()
        .expect_err("the configuration should be rejected")
}

fn secs(n: u64) -> Seconds {
    Seconds(Duration::from_secs(n))
}

/// A provider section as a provider crate would declare it.
#[derive(Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(default, deny_unknown_fields)]
struct S3Section {
    region: Option<String>,
    endpoint: Option<String>,
    port: Option<u16>,
    secret_access_key: Option<String>,
}

impl SectionConfig for S3Section {
    fn check(&self) -> Result<(), InvalidKey> {
        match &self.endpoint {
            Some(endpoint) if !endpoint.starts_with("http") => {
                Err(InvalidKey::new("endpoint", "an http or https URL"))
            }
            _ => Ok(()),
        }
    }
}

impl SectionKeys for S3Section {
    const SECRET: &'static [&'static str] = &["secret_access_key"];
}

// ---------------------------------------------------------------------------------------------
// Layering
// ---------------------------------------------------------------------------------------------

/// Every layer, each setting `retry.attempts` to its own number.
struct AllLayers {
    _dir: TempDir,
    user: PathBuf,
    project: PathBuf,
    extra: PathBuf,
    karu_config: PathBuf,
}

impl AllLayers {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let user = write(
            &dir,
            "user.toml",
            "concurrency = 10\n[retry]\nattempts = 1\n",
        );
        let project = write(&dir, "karu.toml", "[retry]\nattempts = 2\n");
        let extra = write(&dir, "extra.toml", "[retry]\nattempts = 3\n");
        let karu_config = write(&dir, "env.toml", "[retry]\nattempts = 4\n");
        Self {
            _dir: dir,
            user,
            project,
            extra,
            karu_config,
        }
    }

    /// A builder with the top `layers` layers removed, from explicit options downwards.
    fn without_top(&self, layers: usize) -> ConfigBuilder {
        let present = |layer: usize| layer + layers < 7;
        let mut builder = ConfigBuilder::new()
            .user_file(present(0).then(|| self.user.clone()))
            .project_file(present(1).then(|| self.project.clone()));
        if present(2) {
            builder = builder.file(&self.extra);
        }
        let mut env = vec![("UNRELATED".to_owned(), "x".to_owned())];
        if present(3) {
            env.push(("KARU_CONFIG".into(), self.karu_config.display().to_string()));
        }
        if present(4) {
            env.push(("KARU_RETRY__ATTEMPTS".into(), "5".into()));
        }
        builder = builder.environment(env);
        if present(5) {
            builder = builder.set("retry.attempts", 6);
        }
        builder
    }
}

#[test]
fn each_layer_beats_the_one_below_it() {
    let layers = AllLayers::new();
    // defaults < user < project < extra file < KARU_CONFIG file < environment < explicit.
    let expected = [6, 5, 4, 3, 2, 1, 8];
    for (removed, attempts) in expected.into_iter().enumerate() {
        let snapshot = layers.without_top(removed + 1).build().unwrap();
        assert_eq!(
            snapshot.global().retry.attempts,
            attempts,
            "with the top {} layers removed",
            removed + 1
        );
    }
    // All layers present: the explicit option wins...
    let all = layers
        .without_top(0)
        .set("retry.attempts", 7)
        .build()
        .unwrap();
    assert_eq!(all.global().retry.attempts, 7);
    // ...and keys set by only a low layer survive the layers above.
    assert_eq!(all.global().concurrency, 10);
    assert_eq!(all.global().retry.deadline, RetryDefaults::deadline());
}

struct RetryDefaults;

impl RetryDefaults {
    fn deadline() -> Seconds {
        Settings::default().retry.deadline
    }
}

#[test]
fn later_extra_files_beat_earlier_ones() {
    let dir = tempfile::tempdir().unwrap();
    let first = write(&dir, "first.toml", "io_threads = 2\nfile_workers = 3\n");
    let second = write(&dir, "second.toml", "io_threads = 5\n");
    let snapshot = isolated().file(&first).file(&second).build().unwrap();
    assert_eq!(snapshot.global().io_threads, 5);
    assert_eq!(snapshot.global().file_workers, 3);
}

#[test]
fn toml_texts_layer_among_added_files_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let file = write(&dir, "extra.toml", "io_threads = 2\nfile_workers = 3\n");
    let text = "io_threads = 7\n[s3]\nregion = \"eu-west-1\"\n";
    let snapshot = isolated().file(&file).toml("inline", text).build().unwrap();
    assert_eq!(
        snapshot.global().io_threads,
        7,
        "the text, added later, wins"
    );
    assert_eq!(snapshot.global().file_workers, 3);
    let s3 = snapshot.section::<S3Section>("s3://b/k", "s3").unwrap();
    assert_eq!(s3.origins, [Origin::Text("inline".into())]);

    let snapshot = isolated().toml("inline", text).file(&file).build().unwrap();
    assert_eq!(
        snapshot.global().io_threads,
        2,
        "the file, added later, wins"
    );
    let snapshot = isolated()
        .toml("inline", text)
        .environment([("KARU_IO_THREADS", "9")])
        .build()
        .unwrap();
    assert_eq!(
        snapshot.global().io_threads,
        9,
        "the environment beats texts"
    );
}

#[test]
fn a_toml_text_is_named_in_errors_with_the_line() {
    let error = build_error(&isolated().toml(
        "the TOML given to karu_client_builder_config_toml",
        "io_threads = 2\n[planner]\nmax_gapp = 1\n",
    ));
    assert_eq!(
        error.source_name(),
        Some("the TOML given to karu_client_builder_config_toml")
    );
    assert_eq!(error.line(), Some(3));
    assert_eq!(error.kind(), ConfigErrorKind::UnknownKey);

    let error = build_error(&isolated().toml("inline", "io_threads = \n"));
    assert_eq!(error.source_name(), Some("inline"));
    assert_eq!(error.kind(), ConfigErrorKind::Syntax);

    // The builder's Debug names the text, never its content (it may hold secrets).
    let builder = isolated().toml("inline", "[s3]\nsecret_access_key = \"hunter2\"\n");
    let debug = format!("{builder:?}");
    assert!(
        debug.contains("inline") && !debug.contains("hunter2"),
        "{debug}"
    );
}

#[test]
fn missing_default_and_overridden_optional_files_are_skipped() {
    let dir = tempfile::tempdir().unwrap();
    let snapshot = isolated()
        .user_file(Some(dir.path().join("no-user.toml")))
        .project_file(Some(dir.path().join("no-project.toml")))
        .build()
        .unwrap();
    assert_eq!(snapshot.global(), &Settings::default());
}

#[test]
fn the_example_file_resolves() {
    let dir = tempfile::tempdir().unwrap();
    let file = write(
        &dir,
        "karu.toml",
        r#"
io_threads = 4
[planner]
max_gap = "1MiB"
[retry]
deadline = "30s"
[s3]
region = "us-east-1"
[gcs]
project = "p"
[azure]
account = "a"
[http_provider]
user_agent = "karu"
[paths."s3://bucket/prefix"]
retry.deadline = "5s"
s3.region = "eu-west-1"
[paths."/data/local"]
http.fallback_limit = "1MiB"
"#,
    );
    let snapshot = isolated().project_file(Some(file.clone())).build().unwrap();
    let global = snapshot.global();
    assert_eq!(global.io_threads, 4);
    assert_eq!(global.planner.max_gap, ByteSize(1 << 20));
    assert_eq!(global.retry.deadline, secs(30));

    let prefixed = snapshot.for_path("s3://bucket/prefix/object").unwrap();
    assert_eq!(prefixed.retry.deadline, secs(5));
    let local = snapshot.for_path("/data/local/file.bin").unwrap();
    assert_eq!(local.http.fallback_limit, ByteSize(1 << 20));
    assert_eq!(local.retry.deadline, secs(30));

    let s3 = snapshot
        .section::<S3Section>("s3://bucket/prefix/object", "s3")
        .unwrap();
    assert_eq!(s3.value.region.as_deref(), Some("eu-west-1"));
    assert_eq!(
        s3.origins,
        [Origin::PathRule {
            prefix: "s3://bucket/prefix".into(),
            source: Box::new(Origin::File(file.clone())),
        }]
    );
    let elsewhere = snapshot
        .section::<S3Section>("s3://other/key", "s3")
        .unwrap();
    assert_eq!(elsewhere.value.region.as_deref(), Some("us-east-1"));
    assert_eq!(elsewhere.origins, [Origin::File(file)]);
}

#[test]
fn environment_variables_set_settings() {
    let snapshot = isolated()
        .environment([
            ("KARU_IO_THREADS", "3"),
            ("KARU_FILE_WORKERS", "5"),
            ("KARU_CREDENTIAL_WORKERS", "6"),
            ("KARU_CONCURRENCY", "7"),
            ("KARU_CA_FILE", "/etc/ssl/extra.pem"),
            ("KARU_PLANNER__MAX_GAP", "0"),
            ("KARU_PLANNER__MAX_SPAN", "18446744073709551615"),
            ("KARU_RETRY__DEADLINE", "5s"),
            ("KARU_RETRY__INITIAL_BACKOFF", "0.5"),
            ("KARU_HTTP__VERSION", "auto"),
            ("KARU_EMPTY_VALUE", ""),
            ("KARU_CI_TARGET_DIR", "/cache"),
            ("KARU_RETRY__ATTEMPTS", ""),
        ])
        .build()
        .unwrap();
    let global = snapshot.global();
    assert_eq!(
        (
            global.io_threads,
            global.file_workers,
            global.credential_workers,
            global.concurrency
        ),
        (3, 5, 6, 7)
    );
    assert_eq!(
        global.http.ca_file.as_deref(),
        Some(Path::new("/etc/ssl/extra.pem"))
    );
    assert_eq!(global.planner.max_gap, ByteSize(0));
    assert_eq!(global.planner.max_span, ByteSize(u64::MAX));
    assert_eq!(global.retry.deadline, secs(5));
    assert_eq!(
        global.retry.initial_backoff,
        Seconds(Duration::from_millis(500))
    );
    assert_eq!(
        global.retry.attempts, 8,
        "an empty variable counts as unset"
    );
    assert_eq!(global.http.version, HttpVersion::Auto);
}

#[test]
fn the_environment_is_captured_once() {
    let snapshot = isolated()
        .environment([("AWS_REGION", "eu-north-1"), ("KARU_IO_THREADS", "2")])
        .build()
        .unwrap();
    assert_eq!(snapshot.env("AWS_REGION"), Some("eu-north-1"));
    assert_eq!(snapshot.env("HOME"), None);
    let vars: Vec<(&str, &str)> = snapshot.env_vars().collect();
    assert_eq!(
        vars,
        [("AWS_REGION", "eu-north-1"), ("KARU_IO_THREADS", "2")]
    );
}

#[test]
fn explicit_options_accept_units_and_tables() {
    let snapshot = isolated()
        .set("planner.max_gap", 0)
        .set("planner.max_span", ByteSize(4 << 20))
        .set("retry.deadline", "5s")
        .set("retry.max_backoff", Seconds(Duration::from_millis(1500)))
        .set("http.dns_ttl", 2.5)
        .set("http", serde_json_like_table())
        .build()
        .unwrap();
    let global = snapshot.global();
    assert_eq!(global.planner.max_gap, ByteSize(0));
    assert_eq!(global.planner.max_span, ByteSize(4 << 20));
    assert_eq!(global.retry.deadline, secs(5));
    assert_eq!(
        global.retry.max_backoff,
        Seconds(Duration::from_millis(1500))
    );
    assert_eq!(global.http.dns_ttl, Seconds(Duration::from_millis(2500)));
    assert_eq!(global.http.drain_limit, ByteSize(1024));
}

/// `{ drain_limit = "1KiB" }`, set as a whole table.
fn serde_json_like_table() -> std::collections::BTreeMap<&'static str, &'static str> {
    [("drain_limit", "1KiB")].into_iter().collect()
}

// ---------------------------------------------------------------------------------------------
// Path rules
// ---------------------------------------------------------------------------------------------

#[test]
fn the_longest_matching_rule_wins_per_key() {
    let dir = tempfile::tempdir().unwrap();
    let file = write(
        &dir,
        "karu.toml",
        r#"
[retry]
deadline = "30s"
attempts = 4
[paths."s3://bucket"]
retry.deadline = "20s"
retry.attempts = 2
[paths."s3://bucket/deep"]
retry.deadline = "10s"
"#,
    );
    let snapshot = isolated().project_file(Some(file)).build().unwrap();

    let deep = snapshot.for_path("s3://bucket/deep/key").unwrap();
    assert_eq!(
        deep.retry.deadline,
        secs(10),
        "the deeper rule sets the deadline"
    );
    assert_eq!(
        deep.retry.attempts, 2,
        "attempts come from the shorter rule"
    );

    let bucket = snapshot.for_path("s3://bucket/other").unwrap();
    assert_eq!(
        (bucket.retry.deadline, bucket.retry.attempts),
        (secs(20), 2)
    );

    // Whole segments only.
    let sibling = snapshot.for_path("s3://bucket/deeper/key").unwrap();
    assert_eq!(sibling.retry.deadline, secs(20));
    let other_bucket = snapshot.for_path("s3://bucket2/key").unwrap();
    assert_eq!(other_bucket.retry.deadline, secs(30));
    assert_eq!(*other_bucket, *snapshot.global());

    // The rule's own path matches it.
    let exact = snapshot.for_path("s3://bucket/deep").unwrap();
    assert_eq!(exact.retry.deadline, secs(10));
}

#[test]
fn rules_match_on_whole_segments() {
    let snapshot = isolated()
        .path_set("s3://bucket/pre", "retry.attempts", 1)
        .path_set("s3://slash/dir/", "retry.attempts", 2)
        .build()
        .unwrap();
    let attempts = |path: &str| snapshot.for_path(path).unwrap().retry.attempts;
    assert_eq!(attempts("s3://bucket/pre"), 1);
    assert_eq!(attempts("s3://bucket/pre/x"), 1);
    assert_eq!(attempts("s3://bucket/prefix"), 8);
    assert_eq!(attempts("s3://slash/dir/x/y"), 2);
    assert_eq!(attempts("s3://slash/dir"), 8);
    assert_eq!(attempts("s3://slash/directory"), 8);
}

#[test]
fn a_rule_beats_every_global_layer_and_higher_layers_win_within_a_prefix() {
    let dir = tempfile::tempdir().unwrap();
    let file = write(
        &dir,
        "karu.toml",
        r#"
[paths."s3://bucket"]
retry.deadline = "20s"
retry.attempts = 2
http.fallback_limit = "1MiB"
"#,
    );
    let snapshot = isolated()
        .project_file(Some(file))
        .environment([("KARU_RETRY__ATTEMPTS", "5")])
        .set("retry.deadline", "1s")
        .path_set("s3://bucket", "retry.attempts", 3)
        .build()
        .unwrap();
    let rule = snapshot.for_path("s3://bucket/key").unwrap();
    // The file's rule beats the explicit global deadline.
    assert_eq!(rule.retry.deadline, secs(20));
    // The explicit rule beats the file's rule for the same prefix, key by key.
    assert_eq!(rule.retry.attempts, 3);
    assert_eq!(rule.http.fallback_limit, ByteSize(1 << 20));
    // Outside the rule, the global layers apply.
    let outside = snapshot.for_path("s3://elsewhere/key").unwrap();
    assert_eq!(
        (outside.retry.deadline, outside.retry.attempts),
        (secs(1), 5)
    );
}

#[test]
fn paths_matching_the_same_rules_share_their_settings() {
    let snapshot = isolated()
        .path_set("s3://bucket", "retry.attempts", 3)
        .build()
        .unwrap();
    let a = snapshot.for_path("s3://bucket/a").unwrap();
    let b = snapshot.for_path("s3://bucket/b/c").unwrap();
    assert!(Arc::ptr_eq(&a, &b));
    let outside = snapshot.for_path("/local/file").unwrap();
    assert_eq!(&*outside, snapshot.global());
}

// ---------------------------------------------------------------------------------------------
// Sections
// ---------------------------------------------------------------------------------------------

#[test]
fn sections_carry_the_origins_of_their_values() {
    let dir = tempfile::tempdir().unwrap();
    let file = write(
        &dir,
        "karu.toml",
        r#"
[s3]
region = "us-east-1"
[paths."s3://bucket/team-a"]
s3.region = "eu-west-1"
[paths."s3://bucket/team-b"]
s3.region = "eu-west-1"
[paths."s3://bucket/team-a/deep"]
retry.attempts = 1
"#,
    );
    let snapshot = isolated()
        .project_file(Some(file.clone()))
        .environment([("KARU_S3__PORT", "9000")])
        .build()
        .unwrap();
    let s3 = |path: &str| snapshot.section::<S3Section>(path, "s3").unwrap();

    let a1 = s3("s3://bucket/team-a/x");
    let a2 = s3("s3://bucket/team-a/deep/y");
    let b = s3("s3://bucket/team-b/x");
    let global = s3("s3://bucket/other");

    assert_eq!(a1.value.region.as_deref(), Some("eu-west-1"));
    assert_eq!(a1.value.port, Some(9000), "numbers may come from strings");
    let rule_a = Origin::PathRule {
        prefix: "s3://bucket/team-a".into(),
        source: Box::new(Origin::File(file.clone())),
    };
    assert_eq!(a1.origins, [Origin::Environment, rule_a]);
    // The deeper rule sets no s3 key, so the scope is the same.
    assert_eq!(a1.origins, a2.origins);
    // Same value, different rule: a different scope.
    assert_eq!(b.value, a1.value);
    assert_ne!(b.origins, a1.origins);
    assert_eq!(global.value.region.as_deref(), Some("us-east-1"));
    assert_eq!(global.origins, [Origin::File(file), Origin::Environment]);
}

#[test]
fn an_unset_section_is_the_providers_defaults_with_no_origins() {
    let snapshot = isolated().build().unwrap();
    let gcs = snapshot
        .section::<S3Section>("gs://bucket/key", "gcs")
        .unwrap();
    assert_eq!(gcs.value, S3Section::default());
    assert!(gcs.origins.is_empty());
}

#[test]
fn section_errors_name_the_file_line_and_key_at_build() {
    let dir = tempfile::tempdir().unwrap();
    let file = write(&dir, "karu.toml", "[s3]\nregoin = \"x\"\n");
    let error = build_error(&isolated().project_file(Some(file.clone())));
    assert_eq!(
        error.to_string(),
        format!(
            "invalid configuration: {}:2: key \"s3.regoin\": unknown key, did you mean \
             \"region\"?",
            file.display()
        )
    );
    assert_eq!(error.kind(), ConfigErrorKind::UnknownKey);
    assert_eq!(error.line(), Some(2));

    // A path rule's override is checked too, though no path was read.
    let file = write(
        &dir,
        "rule.toml",
        "[s3]\nregion = \"x\"\n\n[paths.\"s3://b\".s3]\nport = \"many\"\n",
    );
    let error = build_error(&isolated().project_file(Some(file.clone())));
    assert_eq!(
        error.to_string(),
        format!(
            "invalid configuration: {}:5: key \"paths.'s3://b'.s3.port\": expected a \
             non-negative integer, found string \"many\"",
            file.display()
        )
    );
    assert_eq!(error.kind(), ConfigErrorKind::InvalidValue);

    // What only the provider can check names the file, line, key and value.
    let file = write(&dir, "endpoint.toml", "[s3]\nendpoint = \"not a url\"\n");
    let error = build_error(&isolated().file(&file));
    assert_eq!(
        error.to_string(),
        format!(
            "invalid configuration: {}:2: key \"s3.endpoint\": expected an http or https URL, \
             found string \"not a url\"",
            file.display()
        )
    );

    // Numbers that do not fit say so.
    let error = build_error(&isolated().environment([("KARU_S3__PORT", "70000")]));
    assert_eq!(
        error.to_string(),
        "invalid configuration: environment variable KARU_S3__PORT: key \"s3.port\": out of \
         range (at most 65535), found 70000"
    );

    // A secret is never quoted.
    let error = build_error(&isolated().set("s3.secret_access_key", 12345));
    assert!(!error.to_string().contains("12345"), "{error}");
    assert!(error.to_string().contains("not shown"), "{error}");
}

#[test]
fn unknown_tables_are_unknown_keys() {
    let dir = tempfile::tempdir().unwrap();
    let file = write(&dir, "karu.toml", "io_threads = 2\n[nonsense]\nx = 1\n");
    let error = build_error(&isolated().project_file(Some(file.clone())));
    assert_eq!(error.kind(), ConfigErrorKind::UnknownKey);
    assert_eq!(error.key(), Some("nonsense"));
    assert_eq!(error.line(), Some(2));
    assert!(
        error.to_string().starts_with(&format!(
            "invalid configuration: {}:2: key \"nonsense\": unknown key, expected one of",
            file.display()
        )),
        "{error}"
    );
    let file = write(&dir, "typo.toml", "[paths.\"s3://b\".s4]\nregion = \"x\"\n");
    let error = build_error(&isolated().project_file(Some(file)));
    assert_eq!(error.key(), Some("paths.'s3://b'.s4"));
    assert!(
        error.to_string().ends_with("did you mean \"s3\"?"),
        "{error}"
    );

    // Without a declaration, a provider's table is unknown too.
    let error = build_error(
        &ConfigBuilder::new()
            .user_file(None)
            .project_file(None)
            .environment(std::iter::empty::<(String, String)>())
            .set("s3.region", "x"),
    );
    assert_eq!(error.kind(), ConfigErrorKind::UnknownKey);
}

// ---------------------------------------------------------------------------------------------
// Immutability
// ---------------------------------------------------------------------------------------------

#[test]
fn snapshots_do_not_change_after_build() {
    let dir = tempfile::tempdir().unwrap();
    let file = write(&dir, "karu.toml", "io_threads = 2\n");
    let builder = isolated().file(&file).set("concurrency", 16);
    let old = builder.build().unwrap();
    let old_clone = old.clone();

    // A modified builder and a modified file make a new snapshot, not a changed one.
    std::fs::write(&file, "io_threads = 3\n").unwrap();
    let new = builder
        .clone()
        .set("concurrency", 32)
        .path_set("s3://bucket", "retry.attempts", 1)
        .build()
        .unwrap();

    assert_eq!((old.global().io_threads, old.global().concurrency), (2, 16));
    assert_eq!((new.global().io_threads, new.global().concurrency), (3, 32));
    assert_eq!(old.for_path("s3://bucket/k").unwrap().retry.attempts, 8);
    assert_eq!(new.for_path("s3://bucket/k").unwrap().retry.attempts, 1);
    assert_eq!(old_clone.global(), old.global());

    // The snapshot can be shared between threads.
    let shared = old.clone();
    let from_thread = std::thread::spawn(move || shared.for_path("s3://x/y").unwrap())
        .join()
        .unwrap();
    assert_eq!(from_thread.io_threads, 2);
}

#[test]
fn the_defaults_snapshot_has_only_defaults() {
    let snapshot = Snapshot::defaults();
    assert_eq!(snapshot.global(), &Settings::default());
    assert_eq!(snapshot.env_vars().count(), 0);
    let debug = format!("{snapshot:?}");
    assert!(debug.starts_with("Snapshot {"), "{debug}");
}

// ---------------------------------------------------------------------------------------------
// Errors
// ---------------------------------------------------------------------------------------------

#[test]
fn the_hedge_table_from_a_file_a_rule_the_environment_and_explicit_options() {
    let dir = tempfile::tempdir().unwrap();
    let file = write(
        &dir,
        "karu.toml",
        "[hedge]\nafter = \"200ms\"\nbudget = \"2%\"\n\
         [paths.\"s3://bucket/cold\"]\nhedge.enabled = false\nhedge.after = \"auto\"\n",
    );
    let snapshot = isolated().project_file(Some(file)).build().unwrap();
    let global = snapshot.global().hedge;
    assert!(global.enabled);
    assert_eq!(
        global.after,
        HedgeAfter::After(Seconds(Duration::from_millis(200)))
    );
    assert_eq!(global.budget, Share(20_000));
    let cold = snapshot.for_path("s3://bucket/cold/x").unwrap().hedge;
    assert!(!cold.enabled, "a path rule may turn hedging off");
    assert_eq!(cold.after, HedgeAfter::Auto);
    assert_eq!(cold.budget, Share(20_000));

    let from_env = isolated()
        .environment([
            ("KARU_HEDGE__ENABLED", "false"),
            ("KARU_HEDGE__AFTER", "1.5"),
            ("KARU_HEDGE__BUDGET", "0.1"),
        ])
        .build()
        .unwrap();
    let hedge = from_env.global().hedge;
    assert!(!hedge.enabled);
    assert_eq!(
        hedge.after,
        HedgeAfter::After(Seconds(Duration::from_millis(1500)))
    );
    assert_eq!(hedge.budget, Share(100_000));
    let explicit = isolated()
        .set("hedge.budget", "0.5 %")
        .set("hedge.after", 2)
        .build()
        .unwrap();
    assert_eq!(explicit.global().hedge.budget, Share(5_000));
    assert_eq!(explicit.global().hedge.after, HedgeAfter::After(secs(2)));
}

#[test]
fn bad_hedge_values_name_the_key_and_what_it_takes() {
    let error = build_error(&isolated().environment([("KARU_HEDGE__BUDGET", "5")]));
    assert_eq!(error.kind(), ConfigErrorKind::InvalidValue);
    assert_eq!(error.key(), Some("hedge.budget"));
    assert!(
        error
            .to_string()
            .contains("expected a share such as \"5%\" or 0.05 (from 0 to 100 %)"),
        "{error}"
    );
    let error = build_error(&isolated().set("hedge.after", "soon"));
    assert_eq!(error.key(), Some("hedge.after"));
    assert!(
        error
            .to_string()
            .contains("expected \"auto\" or a duration such as \"200ms\" or 2 (seconds)"),
        "{error}"
    );
    let error = build_error(&isolated().environment([("KARU_HEDGE__AFTERR", "1s")]));
    assert_eq!(error.kind(), ConfigErrorKind::UnknownKey);
}

#[test]
fn a_bad_value_in_a_file_names_the_file_key_and_expected_type() {
    let dir = tempfile::tempdir().unwrap();
    let file = write(&dir, "karu.toml", "[planner]\nmax_gap = \"lots\"\n");
    let error = build_error(&isolated().project_file(Some(file.clone())));
    assert_eq!(
        error.to_string(),
        format!(
            "invalid configuration: {}:2: key \"planner.max_gap\": expected a byte size such as \
             1048576 or \"1MiB\", found string \"lots\"",
            file.display()
        )
    );
    assert_eq!(error.kind(), ConfigErrorKind::InvalidValue);
    assert_eq!(error.key(), Some("planner.max_gap"));
    assert_eq!(
        error.source_name(),
        Some(file.display().to_string().as_str())
    );

    let file = write(&dir, "table.toml", "planner = 3\n");
    let error = build_error(&isolated().project_file(Some(file)));
    assert!(
        error
            .to_string()
            .ends_with("key \"planner\": expected a table, found integer 3"),
        "{error}"
    );
}

/// A key that takes one of a few words names them, whatever the wrong value is (never the
/// name of a Rust type).
#[test]
fn a_key_of_a_few_words_names_them_whatever_is_found() {
    let dir = tempfile::tempdir().unwrap();
    let cases = [
        ("http", "version", "one of \"http1\", \"auto\", \"http2\""),
        (
            "planner",
            "trade",
            "one of \"guards\", \"priced\", \"frugal\"",
        ),
    ];
    for (table, key, words) in cases {
        for (value, found) in [
            ("\"fast\"", "string \"fast\""),
            ("2", "integer 2"),
            ("true", "boolean true"),
            ("[1]", "an array"),
        ] {
            let file = write(&dir, "karu.toml", &format!("[{table}]\n{key} = {value}\n"));
            let error = build_error(&isolated().project_file(Some(file)));
            let expected = format!("key \"{table}.{key}\": expected {words}, found {found}");
            assert!(error.to_string().ends_with(&expected), "{error}");
        }
        let error = build_error(&isolated().set(&format!("{table}.{key}"), 1.5));
        let expected = format!("key \"{table}.{key}\": expected {words}, found float 1.5");
        assert!(error.to_string().ends_with(&expected), "{error}");
    }
}

#[test]
fn a_bad_environment_variable_names_the_variable() {
    let error = build_error(&isolated().environment([("KARU_IO_THREADS", "many")]));
    assert_eq!(
        error.to_string(),
        "invalid configuration: environment variable KARU_IO_THREADS: key \"io_threads\": \
         expected a non-negative integer (decimal, or hexadecimal such as 0x10), found string \
         \"many\""
    );
    assert_eq!(
        error.source_name(),
        Some("environment variable KARU_IO_THREADS")
    );

    let error = build_error(&isolated().environment([("KARU_HTTP__VERSION", "h3")]));
    assert_eq!(
        error.to_string(),
        "invalid configuration: environment variable KARU_HTTP__VERSION: key \"http.version\": \
         expected one of \"http1\", \"auto\", \"http2\", found string \"h3\""
    );
}

#[test]
fn a_bad_explicit_option_says_so() {
    let error = build_error(&isolated().set("retry.deadline", "soon"));
    assert_eq!(
        error.to_string(),
        "invalid configuration: explicit option: key \"retry.deadline\": expected a duration \
         such as 30 or 2.5 (seconds), or \"250ms\", found string \"soon\""
    );
    assert_eq!(error.source_name(), Some("explicit option"));

    let error = build_error(&isolated().path_set("s3://b", "retry.deadline", -1));
    assert_eq!(
        error.to_string(),
        "invalid configuration: explicit option: key \"paths.'s3://b'.retry.deadline\": \
         expected a duration such as 30 or 2.5 (seconds), or \"250ms\", found integer -1"
    );

    let error = build_error(&isolated().set("planner..max_gap", 1));
    assert_eq!(error.kind(), ConfigErrorKind::InvalidUsage);
    let error = build_error(&isolated().set("paths.x", 1));
    assert!(
        error.to_string().contains("ConfigBuilder::path_set"),
        "{error}"
    );
    let error = build_error(&isolated().path_set("", "retry.attempts", 1));
    assert_eq!(
        error.to_string(),
        "invalid configuration: explicit option: key \"paths.''\": a path rule prefix must not \
         be empty"
    );
    let error = build_error(&isolated().set("s3", "eu-west-1"));
    assert_eq!(error.kind(), ConfigErrorKind::InvalidValue);
    let error = build_error(&isolated().set("nonsense", "eu-west-1"));
    assert_eq!(error.kind(), ConfigErrorKind::UnknownKey);
}

#[test]
fn unknown_keys_in_settings_tables_are_errors() {
    let dir = tempfile::tempdir().unwrap();
    let file = write(&dir, "karu.toml", "[planner]\nmax_gapp = 1\n");
    let error = build_error(&isolated().project_file(Some(file.clone())));
    assert_eq!(
        error.to_string(),
        format!(
            "invalid configuration: {}:2: key \"planner.max_gapp\": unknown key, did you mean \
             \"max_gap\"?",
            file.display()
        )
    );
    assert_eq!(error.kind(), ConfigErrorKind::UnknownKey);

    let file = write(&dir, "top.toml", "io_thread = 4\n");
    let error = build_error(&isolated().file(&file));
    assert_eq!(
        error.to_string(),
        format!(
            "invalid configuration: {}:1: key \"io_thread\": unknown key, did you mean \
             \"io_threads\"?",
            file.display()
        )
    );

    let error = build_error(&isolated().set("retry.colour", "blue"));
    assert_eq!(
        error.to_string(),
        "invalid configuration: explicit option: key \"retry.colour\": unknown key, expected \
         one of \"attempts\", \"connect_attempts\", \"deadline\", \"initial_backoff\", \
         \"max_backoff\""
    );
}

#[test]
fn misspelled_environment_variables_are_errors_with_a_did_you_mean() {
    let error = build_error(&isolated().environment([("KARU_PLANNER__MAX_GAPP", "0")]));
    assert_eq!(
        error.to_string(),
        "invalid configuration: environment variable KARU_PLANNER__MAX_GAPP: key \
         \"planner.max_gapp\": unknown key, did you mean \"max_gap\"?"
    );
    for (name, hint) in [
        ("KARU_IO_THREAD", "did you mean KARU_IO_THREADS?"),
        ("KARU_S3__REGOIN", ""),
        ("KARU_S3_REGION", "did you mean KARU_S3__REGION?"),
        (
            "KARU_PLANNER",
            "did you mean KARU_PLANNER__<KEY> (such as KARU_PLANNER__MAX_GAP)?",
        ),
        ("KARU_FOO", "Karu reads KARU_CONFIG, KARU_CA_FILE"),
        ("KARU_IO_THREADS__X", "did you mean KARU_IO_THREADS?"),
    ] {
        let error = build_error(&isolated().environment([(name, "4")]));
        assert_eq!(error.kind(), ConfigErrorKind::UnknownKey, "{name}");
        assert_eq!(
            error.source_name(),
            Some(format!("environment variable {name}").as_str())
        );
        assert!(error.to_string().contains(hint), "{name}: {error}");
    }
    let error = build_error(&isolated().environment([("KARU_S3__REGOIN", "x")]));
    assert!(
        error
            .to_string()
            .ends_with("key \"s3.regoin\": unknown key, did you mean \"region\"?"),
        "{error}"
    );
    let error = build_error(&isolated().environment([("KARU_PATHS__X", "1")]));
    assert_eq!(error.kind(), ConfigErrorKind::InvalidUsage);

    // Empty values count as unset; KARU_CI_* belongs to Karu's scripts.
    isolated()
        .environment([("KARU_FOO", ""), ("KARU_CI_TARGET_DIR", "/cache")])
        .build()
        .unwrap();
}

#[test]
fn zero_counts_are_rejected() {
    let dir = tempfile::tempdir().unwrap();
    let file = write(&dir, "karu.toml", "io_threads = 0\n");
    let error = build_error(&isolated().project_file(Some(file.clone())));
    assert_eq!(
        error.to_string(),
        format!(
            "invalid configuration: {}:1: key \"io_threads\": expected at least 1, found 0",
            file.display()
        )
    );
    let cases = [
        ("KARU_FILE_WORKERS", "file_workers"),
        ("KARU_CREDENTIAL_WORKERS", "credential_workers"),
        ("KARU_CONCURRENCY", "concurrency"),
        ("KARU_PLANNER__MAX_PARTS", "planner.max_parts"),
        (
            "KARU_PLANNER__MAX_AMPLIFICATION",
            "planner.max_amplification",
        ),
    ];
    for (var, key) in cases {
        let error = build_error(&isolated().environment([(var, "0")]));
        assert_eq!(
            error.to_string(),
            format!(
                "invalid configuration: environment variable {var}: key \"{key}\": expected at \
                 least 1, found 0"
            )
        );
    }
    let error = build_error(&isolated().set("planner.max_parts", 0));
    assert_eq!(
        error.to_string(),
        "invalid configuration: explicit option: key \"planner.max_parts\": expected at least \
         1, found 0"
    );
    // A zero that a higher layer replaces is fine.
    isolated()
        .environment([("KARU_CONCURRENCY", "0")])
        .set("concurrency", 1)
        .build()
        .unwrap();
}

#[test]
fn explicitly_named_files_must_exist() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing.toml");
    let error = build_error(&isolated().file(&missing));
    assert_eq!(
        error.to_string(),
        format!(
            "invalid configuration: {}: file not found (added with ConfigBuilder::file)",
            missing.display()
        )
    );
    assert_eq!(error.kind(), ConfigErrorKind::MissingFile);

    let from_env = isolated().environment([("KARU_CONFIG", missing.display().to_string())]);
    let error = build_error(&from_env);
    assert_eq!(
        error.to_string(),
        format!(
            "invalid configuration: {}: file not found (named by environment variable \
             KARU_CONFIG)",
            missing.display()
        )
    );

    let error = build_error(&isolated().file(dir.path()));
    assert_eq!(error.kind(), ConfigErrorKind::Unreadable);
}

#[test]
fn syntax_errors_name_the_file_and_line() {
    let dir = tempfile::tempdir().unwrap();
    let file = write(
        &dir,
        "karu.toml",
        "io_threads = 4\n[planner]\nmax_gap = = 1\n",
    );
    let error = build_error(&isolated().project_file(Some(file.clone())));
    let prefix = format!(
        "invalid configuration: {}: line 3, column 11: invalid TOML: ",
        file.display()
    );
    assert!(error.to_string().starts_with(&prefix), "{error}");
    assert_eq!(error.line(), Some(3));
    assert_eq!(error.kind(), ConfigErrorKind::Syntax);
    assert_eq!(error.key(), None);
}

#[test]
fn rule_errors_name_the_rule() {
    let dir = tempfile::tempdir().unwrap();
    let file = write(
        &dir,
        "karu.toml",
        "[paths.\"s3://b\".retry]\ndeadline = \"soon\"\n",
    );
    let error = build_error(&isolated().project_file(Some(file.clone())));
    assert_eq!(
        error.to_string(),
        format!(
            "invalid configuration: {}:2: key \"paths.'s3://b'.retry.deadline\": expected a \
             duration such as 30 or 2.5 (seconds), or \"250ms\", found string \"soon\"",
            file.display()
        )
    );

    let file = write(&dir, "global.toml", "[paths.\"s3://b\"]\nio_threads = 2\n");
    let error = build_error(&isolated().project_file(Some(file.clone())));
    assert_eq!(
        error.to_string(),
        format!(
            "invalid configuration: {}:2: key \"paths.'s3://b'.io_threads\": applies to the whole \
             client and cannot be set in a path rule",
            file.display()
        )
    );
    assert_eq!(error.kind(), ConfigErrorKind::Misplaced);

    let file = write(&dir, "scalar.toml", "[paths]\n\"s3://b\" = 1\n");
    let error = build_error(&isolated().project_file(Some(file)));
    assert!(
        error.to_string().ends_with(
            "key \"paths.'s3://b'\": expected a table of settings and sections, found integer 1"
        ),
        "{error}"
    );
}

#[test]
fn byte_size_limits_through_a_file() {
    let dir = tempfile::tempdir().unwrap();
    let file = write(
        &dir,
        "karu.toml",
        "[planner]\nmax_gap = \"18446744073709551615\"\nmax_span = \"0\"\n",
    );
    let snapshot = isolated().project_file(Some(file)).build().unwrap();
    assert_eq!(snapshot.global().planner.max_gap, ByteSize(u64::MAX));
    assert_eq!(snapshot.global().planner.max_span, ByteSize(0));

    let file = write(&dir, "big.toml", "[planner]\nmax_gap = \"20000000PiB\"\n");
    let error = build_error(&isolated().project_file(Some(file.clone())));
    assert_eq!(
        error.to_string(),
        format!(
            "invalid configuration: {}:2: key \"planner.max_gap\": expected a byte size of at most \
             18446744073709551615 bytes (16EiB), found string \"20000000PiB\"",
            file.display()
        )
    );

    let file = write(&dir, "negative.toml", "[http]\nfallback_limit = -1\n");
    let error = build_error(&isolated().project_file(Some(file)));
    assert!(
        error
            .to_string()
            .ends_with("expected a byte size such as 1048576 or \"1MiB\", found integer -1"),
        "{error}"
    );
}

#[test]
fn durations_accept_numbers_and_humantime() {
    let dir = tempfile::tempdir().unwrap();
    let file = write(
        &dir,
        "karu.toml",
        "[retry]\ndeadline = 2.5\nmax_backoff = 15\ninitial_backoff = \"250ms\"\n[http]\nconnect_timeout = \"2m\"\n",
    );
    let snapshot = isolated().project_file(Some(file)).build().unwrap();
    let global = snapshot.global();
    assert_eq!(global.retry.deadline, Seconds(Duration::from_millis(2500)));
    assert_eq!(global.retry.max_backoff, secs(15));
    assert_eq!(
        global.retry.initial_backoff,
        Seconds(Duration::from_millis(250))
    );
    assert_eq!(global.http.connect_timeout, secs(120));
}

/// Every default of Karu's contract (`karu-engine/README.md`), each against its literal number: what a client gets
/// when nothing is configured (through the whole layering, defaults serialized and read back).
#[test]
fn every_default_of_the_contract_is_its_number() {
    for global in [
        isolated().build().unwrap().global().clone(),
        Snapshot::defaults().global().clone(),
    ] {
        // Threads: 4 event loops, 4 file workers, 4 credential workers; 64 transfers at once.
        assert_eq!(global.io_threads, 4);
        assert_eq!(global.file_workers, 4);
        assert_eq!(global.credential_workers, 4);
        assert_eq!(global.concurrency, 64);
        // Planner: a 1 MiB gap, a 64 MiB span, 1,024 parts, 16 fetched bytes per useful byte.
        assert_eq!(global.planner.max_gap, ByteSize(1_048_576));
        assert_eq!(global.planner.max_span, ByteSize(67_108_864));
        assert_eq!(global.planner.max_parts, 1024);
        assert_eq!(global.planner.max_amplification, 16);
        assert_eq!(global.planner.trade, Trade::Priced);
        // HTTP: 1.1, a fallback of 8 MiB, a drain of 256 KiB, 4 KiB of an error body, a 30 s
        // connect timeout, 1,024 B/s for 60 s, parts of 8 MiB (a part per loop from 1 GB/s),
        // DNS answers kept for a minute.
        assert_eq!(global.http.version, HttpVersion::Http1);
        assert_eq!(global.http.ca_file, None);
        assert_eq!(global.http.fallback_limit, ByteSize(8_388_608));
        assert_eq!(global.http.drain_limit, ByteSize(262_144));
        assert_eq!(global.http.error_body_limit, ByteSize(4_096));
        assert_eq!(global.http.connect_timeout, secs(30));
        assert_eq!(global.http.low_speed_limit, 1_024);
        assert_eq!(global.http.low_speed_time, secs(60));
        assert_eq!(global.http.part_size, ByteSize(8 << 20));
        assert_eq!(global.http.fast_connection, 1_000_000_000);
        assert_eq!(global.http.dns_ttl, secs(60));
        // Retries: 8 attempts, 3 for connection failures, one 120 s deadline.
        assert_eq!(global.retry.attempts, 8);
        assert_eq!(global.retry.connect_attempts, 3);
        assert_eq!(global.retry.deadline, secs(120));
    }
}

// ---------------------------------------------------------------------------------------------
// Bounds, numbers and values typed by their key
// ---------------------------------------------------------------------------------------------

#[test]
fn thread_and_worker_counts_have_upper_bounds() {
    for (var, key, max) in [
        ("KARU_IO_THREADS", "io_threads", Settings::MAX_IO_THREADS),
        (
            "KARU_FILE_WORKERS",
            "file_workers",
            Settings::MAX_FILE_WORKERS,
        ),
        (
            "KARU_CREDENTIAL_WORKERS",
            "credential_workers",
            Settings::MAX_CREDENTIAL_WORKERS,
        ),
        ("KARU_CONCURRENCY", "concurrency", Settings::MAX_CONCURRENCY),
    ] {
        let error = build_error(&isolated().environment([(var, "100000")]));
        assert_eq!(
            error.to_string(),
            format!(
                "invalid configuration: environment variable {var}: key \"{key}\": out of range \
                 (at most {max}), found 100000"
            )
        );
        assert_eq!(error.kind(), ConfigErrorKind::InvalidValue);
        let at_most = isolated()
            .environment([(var, max.to_string())])
            .build()
            .unwrap();
        let global = at_most.global();
        let value = [
            global.io_threads,
            global.file_workers,
            global.credential_workers,
            global.concurrency,
        ];
        assert!(value.contains(&max), "{var}");
    }
}

#[test]
fn settings_that_guarantee_failure_are_errors() {
    let dir = tempfile::tempdir().unwrap();
    let file = write(&dir, "karu.toml", "[retry]\nattempts = 3\ndeadline = 0\n");
    let error = build_error(&isolated().project_file(Some(file.clone())));
    assert_eq!(
        error.to_string(),
        format!(
            "invalid configuration: {}:3: key \"retry.deadline\": expected a duration above 0, \
             found 0 (a deadline of 0 fails every read before it starts)",
            file.display()
        )
    );
    assert_eq!(error.kind(), ConfigErrorKind::InvalidValue);
    // In a path rule too, naming the rule.
    let error = build_error(&isolated().path_set("s3://b", "retry.deadline", "0s"));
    assert_eq!(error.key(), Some("paths.'s3://b'.retry.deadline"));
    for key in ["retry.attempts", "retry.connect_attempts"] {
        let error = build_error(&isolated().set(key, 0));
        assert!(
            error.to_string().ends_with("expected at least 1, found 0"),
            "{error}"
        );
    }
    let error = build_error(&isolated().set("http.connect_timeout", "0ms"));
    assert_eq!(error.key(), Some("http.connect_timeout"));
    // Zero is meaningful where it switches something off.
    isolated()
        .set("planner.max_gap", 0)
        .set("http.low_speed_limit", 0)
        .set("http.part_size", 0)
        .build()
        .unwrap();
}

#[test]
fn a_part_size_is_zero_or_at_least_64_kib() {
    let error = build_error(&isolated().set("http.part_size", "1KiB"));
    assert_eq!(error.key(), Some("http.part_size"));
    assert!(
        error
            .to_string()
            .ends_with("expected 0 (never split) or at least 65536 bytes (64 KiB), found 1024"),
        "{error}"
    );
    let client = isolated().set("http.part_size", "64KiB").build().unwrap();
    assert_eq!(client.global().http.part_size, ByteSize(64 << 10));
    // A path rule may set it: a store that throttles ranged GETs may want larger parts.
    let snapshot = isolated()
        .path_set("s3://b", "http.part_size", "32MiB")
        .build()
        .unwrap();
    let settings = snapshot.for_path("s3://b/key").unwrap();
    assert_eq!(settings.http.part_size, ByteSize(32 << 20));
    let error = build_error(&isolated().path_set("s3://b", "http.part_size", 100));
    assert_eq!(error.key(), Some("paths.'s3://b'.http.part_size"));
}

#[test]
fn numbers_out_of_range_say_so() {
    let dir = tempfile::tempdir().unwrap();
    let file = write(&dir, "karu.toml", "[planner]\nmax_parts = 5000000000\n");
    let error = build_error(&isolated().project_file(Some(file.clone())));
    assert_eq!(
        error.to_string(),
        format!(
            "invalid configuration: {}:2: key \"planner.max_parts\": out of range (at most \
             4294967295), found 5000000000",
            file.display()
        )
    );
    let error =
        build_error(&isolated().environment([("KARU_IO_THREADS", "99999999999999999999999")]));
    assert!(
        error.to_string().ends_with(
            "out of range (at most 18446744073709551615), found 99999999999999999999999"
        ),
        "{error}"
    );
    let error = build_error(&isolated().set("retry.attempts", -1));
    assert!(
        error
            .to_string()
            .ends_with("out of range (at least 0), found -1"),
        "{error}"
    );
}

#[test]
fn integers_and_sizes_accept_hexadecimal() {
    let snapshot = isolated()
        .environment([("KARU_PLANNER__MAX_PARTS", "0x10")])
        .set("planner.max_gap", "0x100000")
        .set("retry.attempts", "0X3")
        .build()
        .unwrap();
    let global = snapshot.global();
    assert_eq!(global.planner.max_parts, 16);
    assert_eq!(global.planner.max_gap, ByteSize(1 << 20));
    assert_eq!(global.retry.attempts, 3);
}

#[test]
fn string_keys_take_digits_as_text() {
    let snapshot = isolated()
        .environment([("KARU_S3__REGION", "123")])
        .set("s3.endpoint", "http://127.0.0.1:9000")
        .path_set("s3://b", "s3.region", "0x10")
        .build()
        .unwrap();
    let global = snapshot.section::<S3Section>("s3://a/k", "s3").unwrap();
    assert_eq!(global.value.region.as_deref(), Some("123"));
    let rule = snapshot.section::<S3Section>("s3://b/k", "s3").unwrap();
    assert_eq!(rule.value.region.as_deref(), Some("0x10"));
}

// ---------------------------------------------------------------------------------------------
// Path rule prefixes
// ---------------------------------------------------------------------------------------------

#[test]
fn rule_prefixes_are_canonical_like_addresses() {
    let dir = tempfile::tempdir().unwrap();
    let file = write(
        &dir,
        "karu.toml",
        "[paths.\"HTTP://Host.Example/Data\"]\nretry.attempts = 2\n",
    );
    let snapshot = isolated().project_file(Some(file)).build().unwrap();
    let attempts = |path: &str| snapshot.for_path(path).unwrap().retry.attempts;
    assert_eq!(attempts("http://host.example/Data/x"), 2);
    assert_eq!(
        attempts("http://host.example/data/x"),
        8,
        "paths keep their case"
    );

    // Two spellings of one prefix are one rule: the higher layer wins key by key.
    let snapshot = isolated()
        .path_set("S3://bucket", "retry.attempts", 3)
        .path_set("s3://bucket", "retry.connect_attempts", 1)
        .build()
        .unwrap();
    let rule = snapshot.for_path("s3://bucket/k").unwrap();
    assert_eq!((rule.retry.attempts, rule.retry.connect_attempts), (3, 1));
    assert_eq!(
        snapshot.explain("s3://bucket/k").unwrap().rules,
        ["s3://bucket"]
    );

    // A client passes its address resolution.
    let snapshot = isolated()
        .canonical_prefixes(|prefix| Ok(prefix.replace("https://b.s3.amazonaws.com", "s3://b")))
        .path_set("https://b.s3.amazonaws.com/logs", "retry.attempts", 4)
        .build()
        .unwrap();
    assert_eq!(
        snapshot.for_path("s3://b/logs/x").unwrap().retry.attempts,
        4
    );
    let error = build_error(
        &isolated()
            .canonical_prefixes(|_| Err("no backend is registered for scheme \"gs\"".into()))
            .path_set("gs://b", "retry.attempts", 4),
    );
    assert_eq!(
        error.to_string(),
        "invalid configuration: explicit option: key \"paths.'gs://b'\": no backend is \
         registered for scheme \"gs\""
    );
}

#[test]
fn malformed_rule_prefixes_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    for (prefix, says) in [
        ("data/relative", "expected an absolute path"),
        ("s3://b/k?versionId=1", "query"),
        ("9s3://b", "not a URL scheme"),
        ("", "must not be empty"),
    ] {
        let file = write(
            &dir,
            "karu.toml",
            &format!("io_threads = 2\n[paths.{prefix:?}]\nretry.attempts = 2\n"),
        );
        let error = build_error(&isolated().project_file(Some(file)));
        assert_eq!(error.kind(), ConfigErrorKind::InvalidUsage, "{prefix:?}");
        assert_eq!(error.line(), Some(2), "{prefix:?}");
        assert!(error.to_string().contains(says), "{prefix:?}: {error}");
    }
}

// ---------------------------------------------------------------------------------------------
// Files that cannot be read
// ---------------------------------------------------------------------------------------------

#[test]
fn an_optional_file_out_of_reach_is_skipped_but_an_unreadable_one_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    // A "home directory" that is a plain file: the user file under it cannot be reached.
    let not_a_dir = write(&dir, "home", "");
    let snapshot = isolated()
        .user_file(Some(not_a_dir.join(".config/karu/config.toml")))
        .build()
        .unwrap();
    assert_eq!(snapshot.global(), &Settings::default());

    // A file that exists (here a directory) but cannot be read is an error.
    let error = build_error(&isolated().user_file(Some(dir.path().to_path_buf())));
    assert_eq!(error.kind(), ConfigErrorKind::Unreadable);

    // A required file out of reach is an error.
    let error = build_error(&isolated().file(not_a_dir.join("karu.toml")));
    assert_eq!(error.kind(), ConfigErrorKind::Unreadable);
}

/// A configuration file is a regular file of at most 4 MiB: a FIFO without a writer is refused
/// at once (it hung the build), `/dev/zero` too (it was read until memory ran out), and so is
/// a file past the bound; each error names the file. A file of just under the bound is read.
#[test]
fn only_a_regular_file_of_sensible_size_is_read_as_configuration() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("config.fifo");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(made.success());
    let big = write(&dir, "big.toml", &format!("# {}\n", "x".repeat(4 << 20)));
    let cases = [
        (fifo.clone(), "not a regular file"),
        (PathBuf::from("/dev/zero"), "not a regular file"),
        (dir.path().to_path_buf(), "not a regular file"),
        (
            big.clone(),
            "larger than 4 MiB, more than such a file holds",
        ),
    ];
    for (path, problem) in &cases {
        for builder in [
            isolated().file(path),
            isolated().user_file(Some(path.clone())),
            isolated().environment([("KARU_CONFIG", path.display().to_string())]),
        ] {
            let error = build_error(&builder);
            assert_eq!(error.kind(), ConfigErrorKind::Unreadable, "{error}");
            let expected = format!("{}: cannot read file: {problem}", path.display());
            assert!(error.to_string().contains(&expected), "{error}");
        }
    }
    let just_under = write(
        &dir,
        "under.toml",
        &format!("# {}\nfile_workers = 3\n", "x".repeat((4 << 20) - 100)),
    );
    let snapshot = isolated().file(&just_under).build().unwrap();
    assert_eq!(snapshot.global().file_workers, 3);
}

// ---------------------------------------------------------------------------------------------
// Wording and explanations
// ---------------------------------------------------------------------------------------------

#[test]
fn errors_speak_the_words_of_the_interface() {
    let dir = tempfile::tempdir().unwrap();
    let cli = || {
        isolated().wording(karu_config::Wording::new(
            "given with --config",
            "--set",
            "path rules are written in a config file",
        ))
    };
    let missing = dir.path().join("missing.toml");
    let error = build_error(&cli().file(&missing));
    assert_eq!(
        error.to_string(),
        format!(
            "invalid configuration: {}: file not found (given with --config)",
            missing.display()
        )
    );
    let error = build_error(&cli().set("io_threads", "many"));
    assert!(
        error
            .to_string()
            .starts_with("invalid configuration: --set: key \"io_threads\": "),
        "{error}"
    );
    let error = build_error(&cli().set("paths.x", 1));
    assert!(
        error
            .to_string()
            .ends_with("path rules are written in a config file"),
        "{error}"
    );
}

#[test]
fn explain_names_the_layer_rule_and_line_of_every_value() {
    let dir = tempfile::tempdir().unwrap();
    let file = write(
        &dir,
        "karu.toml",
        "[s3]\nregion = \"us-east-1\"\nsecret_access_key = \"hunter2\"\n\n\
         [paths.\"s3://bucket\"]\nretry.deadline = \"5s\"\n",
    );
    let snapshot = isolated()
        .project_file(Some(file.clone()))
        .environment([("KARU_IO_THREADS", "2")])
        .set("planner.max_gap", "64KiB")
        .build()
        .unwrap();
    let explanation = snapshot.explain("s3://bucket/key").unwrap();
    assert_eq!(explanation.canonical, "s3://bucket/key");
    assert_eq!(explanation.rules, ["s3://bucket"]);
    let find = |key: &str| {
        explanation
            .values
            .iter()
            .find(|v| v.key == key)
            .unwrap_or_else(|| panic!("{key} is explained"))
    };
    let io = find("io_threads");
    assert_eq!((io.value.as_str(), &io.origin), ("2", &Origin::Environment));
    assert_eq!(io.place(), "environment variable KARU_IO_THREADS");
    let gap = find("planner.max_gap");
    assert_eq!(
        (gap.value.as_str(), gap.place().as_str()),
        ("\"64KiB\"", "explicit option")
    );
    let deadline = find("retry.deadline");
    assert_eq!(deadline.value, "\"5s\"");
    assert_eq!(
        deadline.place(),
        format!("path rule \"s3://bucket\" in {}:6", file.display())
    );
    assert_eq!(find("retry.attempts").place(), "built-in defaults");
    assert_eq!(find("http.ca_file").value, "(unset)");
    let region = find("s3.region");
    assert_eq!(region.value, "\"us-east-1\"");
    assert_eq!(region.place(), format!("{}:2", file.display()));
    let secret = find("s3.secret_access_key");
    assert_eq!(secret.value, "<redacted>");
    assert!(!format!("{explanation:?}").contains("hunter2"));

    // Outside the rule, the global deadline.
    let other = snapshot.explain("s3://other/key").unwrap();
    assert!(other.rules.is_empty());
    let deadline = other
        .values
        .iter()
        .find(|v| v.key == "retry.deadline")
        .unwrap();
    assert_eq!(deadline.place(), "built-in defaults");

    let layers = snapshot.layer_names();
    assert_eq!(layers[0], "built-in defaults");
    assert!(layers.contains(&file.display().to_string().as_str()));
    assert!(layers.contains(&"environment variable KARU_IO_THREADS"));
}

#[test]
fn shared_sections_of_one_type_are_kept_apart_by_name_and_rules() {
    let snapshot = isolated()
        .set("gcs.project", "p")
        .set("azure.account", "a")
        .path_set("s3://bucket", "gcs.project", "q")
        .build()
        .unwrap();
    let value = |path: &str, name: &str, key: &str| {
        let section = snapshot.section_shared::<Open>(path, name).unwrap();
        let again = snapshot.section_shared::<Open>(path, name).unwrap();
        assert!(
            Arc::ptr_eq(&section, &again),
            "{name} for {path} read twice"
        );
        section.value.0.get(key).map(|v| v.to_string())
    };
    // One type under two names, then the first again: each its own value.
    for _ in 0..2 {
        assert_eq!(
            value("gs://b/k", "gcs", "project").as_deref(),
            Some("\"p\"")
        );
        assert_eq!(
            value("gs://b/k", "azure", "account").as_deref(),
            Some("\"a\"")
        );
        assert_eq!(value("gs://b/k", "azure", "project"), None);
        // A path rule: another entry.
        assert_eq!(
            value("s3://bucket/k", "gcs", "project").as_deref(),
            Some("\"q\"")
        );
    }
    // Key origins share the cache and its type differs: never mistaken for a section.
    let origins = snapshot
        .key_origins("gs://b/k", "gcs", &["project"])
        .unwrap();
    assert_eq!(origins.len(), 1);
    assert_eq!(
        value("gs://b/k", "gcs", "project").as_deref(),
        Some("\"p\"")
    );
}

/// Each of the planner's trades is named by its word, from a file or an explicit option.
#[test]
fn the_planner_trades_are_named_by_their_words() {
    let dir = tempfile::tempdir().unwrap();
    for (word, trade) in [
        ("guards", Trade::Guards),
        ("priced", Trade::Priced),
        ("frugal", Trade::Frugal),
    ] {
        let file = write(
            &dir,
            "karu.toml",
            &format!("[planner]\ntrade = \"{word}\"\n"),
        );
        let from_file = isolated().project_file(Some(file)).build().unwrap();
        assert_eq!(from_file.global().planner.trade, trade);
        let explicit = isolated().set("planner.trade", word).build().unwrap();
        assert_eq!(explicit.global().planner.trade, trade);
    }
}

/// The price lists of the priced trade and the benchmark's bill: the published list prices by
/// default, each overridable from a file, the environment and an explicit option, key by key.
#[test]
fn the_price_lists_default_to_list_prices_and_are_overridden_key_by_key() {
    let defaults = isolated().build().unwrap();
    let prices = defaults.global().planner.prices;
    assert_eq!(prices, Prices::default());
    assert_eq!(prices.s3.requests_per_1000, Dollars(400_000), "$0.0004");
    assert_eq!(prices.s3.egress_per_gib, Dollars(90_000_000), "$0.09");
    assert_eq!(prices.gcs.egress_per_gib, Dollars(120_000_000), "$0.12");
    assert_eq!(prices.azure.requests_per_1000, Dollars(440_000), "$0.00044");

    let dir = tempfile::tempdir().unwrap();
    let file = write(
        &dir,
        "karu.toml",
        "[planner.prices.s3]\negress_per_gib = 0\n\n[planner.prices.gcs]\nrequests_per_1000 = \"$0.001\"\n",
    );
    let snapshot = isolated()
        .project_file(Some(file))
        .environment([("KARU_PLANNER__PRICES__AZURE__EGRESS_PER_GIB", "0.05")])
        .set("planner.prices.gcs.egress_per_gib", 0.08)
        .build()
        .unwrap();
    let prices = snapshot.global().planner.prices;
    // In the store's region: free egress, the request's fee as listed.
    assert_eq!(
        prices.s3,
        PriceList::new(Dollars(400_000), Dollars(0)),
        "the file sets one key; the other keeps its default"
    );
    assert_eq!(
        prices.gcs,
        PriceList::new(Dollars(1_000_000), Dollars(80_000_000)),
        "the file and an explicit option set one key each"
    );
    assert_eq!(
        prices.azure,
        PriceList::new(Dollars(440_000), Dollars(50_000_000))
    );

    // A malformed price, and a provider that is not priced, are errors naming the key.
    let negative = isolated().set("planner.prices.s3.egress_per_gib", -0.09);
    let error = build_error(&negative);
    assert!(
        error
            .to_string()
            .contains("planner.prices.s3.egress_per_gib"),
        "{error}"
    );
    assert!(error.to_string().contains("US dollars"), "{error}");
    let file = write(
        &dir,
        "karu.toml",
        "[planner.prices.r2]\negress_per_gib = 0\n",
    );
    let error = build_error(&isolated().project_file(Some(file)));
    assert!(error.to_string().contains("r2"), "{error}");
    // A path rule may not price one prefix: the planner is global.
    let file = write(
        &dir,
        "karu.toml",
        "[paths.\"s3://b/\".planner.prices.s3]\negress_per_gib = 0\n",
    );
    assert_eq!(
        build_error(&isolated().project_file(Some(file))).kind(),
        ConfigErrorKind::Misplaced
    );
}
