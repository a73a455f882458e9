//! Provider sections and path rule prefixes are checked when a client is built: a misspelled
//! `[s3]` key or a bad endpoint is one build error naming file, line and key, not an
//! `invalid_argument` repeated for every read; rule prefixes are canonical like addresses.

mod support;

use std::sync::Arc;

use karu::Status;
use karu_engine::sdk::{
    Backend, CanonicalPath, Error, InvalidKey, RegistryBuilder, Resolved, Section, SectionConfig,
    SectionKeys,
};
use serde::Deserialize;
use support::isolated;

/// Build, expecting an error; returns its message after checking its status.
#[track_caller]
fn build_error(builder: &karu::ClientBuilder) -> String {
    let err = builder.build().expect_err("the configuration is malformed");
    assert_eq!(err.status(), Status::InvalidArgument, "{err}");
    err.message().to_string()
}

fn write(dir: &tempfile::TempDir, text: &str) -> std::path::PathBuf {
    let file = dir.path().join("karu.toml");
    std::fs::write(&file, text).unwrap();
    file
}

#[test]
fn a_misspelled_s3_key_fails_the_build_with_file_line_and_key() {
    let dir = tempfile::tempdir().unwrap();
    let file = write(&dir, "io_threads = 2\n[s3]\nregionn = \"x\"\n");
    let message = build_error(&isolated().config_file(&file));
    assert_eq!(
        message,
        format!(
            "invalid configuration: {}:3: key \"s3.regionn\": unknown key, did you mean \
             \"region\"?",
            file.display()
        )
    );

    // In a path rule override, with no read of that path.
    let file = write(
        &dir,
        "[paths.\"s3://bucket/logs\".s3]\nendpoint = \"not a url\"\n",
    );
    let message = build_error(&isolated().config_file(&file));
    assert_eq!(
        message,
        format!(
            "invalid configuration: {}:2: key \"paths.'s3://bucket/logs'.s3.endpoint\": \
             expected an http or https URL such as http://127.0.0.1:9000; this one is not a URL, \
             found string \"not a url\"",
            file.display()
        )
    );

    // The plain HTTP provider's section too; its header values are secrets.
    let message = build_error(&isolated().set("http_provider.headers.X-Key", "a\nhunter2"));
    assert!(message.contains("http_provider.headers.X-Key"), "{message}");
    assert!(!message.contains("hunter2"), "{message}");

    // An unknown table.
    let message = build_error(&isolated().set("nonsense.x", 1));
    assert!(
        message.contains("key \"nonsense\": unknown key"),
        "{message}"
    );
}

#[test]
fn path_rule_prefixes_are_canonical_like_addresses() {
    let dir = tempfile::tempdir().unwrap();
    let file = write(
        &dir,
        "[paths.\"HTTP://Host.Example:80/Data\"]\nretry.attempts = 2\n\
         [paths.\"https://bucket.s3.eu-west-1.amazonaws.com/logs/\"]\nretry.attempts = 3\n\
         [paths.\"S3://\"]\nretry.connect_attempts = 1\n",
    );
    let client = isolated().config_file(&file).build().unwrap();
    let settings = |address: &str| {
        let locator = client.locate(address).unwrap();
        client
            .snapshot()
            .for_path(locator.canonical().as_str())
            .unwrap()
    };
    assert_eq!(settings("http://host.example/Data/x.bin").retry.attempts, 2);
    assert_eq!(settings("HTTP://HOST.EXAMPLE/Data/x.bin").retry.attempts, 2);
    assert_eq!(settings("http://host.example/data/x.bin").retry.attempts, 8);
    let logs = settings("s3://bucket/logs/2024.json");
    assert_eq!(
        (logs.retry.attempts, logs.retry.connect_attempts),
        (3, 1),
        "the S3 URL prefix is the s3:// prefix; s3:// covers every object"
    );
    assert_eq!(settings("s3://other/k").retry.connect_attempts, 1);

    // A prefix no provider accepts is refused.
    let message = build_error(&isolated().path_set("nope://bucket", "retry.attempts", 1));
    assert!(
        message
            .starts_with("invalid configuration: explicit option: key \"paths.'nope://bucket'\""),
        "{message}"
    );
    assert!(message.contains("no backend is registered"), "{message}");
    let message = build_error(&isolated().path_set("s3://b/k?versionId=1", "retry.attempts", 1));
    assert!(message.contains("query"), "{message}");
}

/// A third-party provider's section.
#[derive(Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
struct Vendor {
    bucket_url: Option<String>,
    api_key: Option<String>,
}

impl SectionConfig for Vendor {
    fn check(&self) -> Result<(), InvalidKey> {
        match &self.bucket_url {
            Some(url) if !url.starts_with("vendor://") => {
                Err(InvalidKey::new("bucket_url", "a vendor:// URL"))
            }
            _ => Ok(()),
        }
    }
}

impl SectionKeys for Vendor {
    const SECRET: &'static [&'static str] = &["api_key"];
}

/// The vendor's provider: `vendor://` addresses (never read here).
#[derive(Debug)]
struct VendorBackend;

impl Backend for VendorBackend {
    fn name(&self) -> &str {
        "vendor"
    }

    fn resolve(&self, address: &str) -> Result<Resolved, Error> {
        Ok(Resolved::remote(
            CanonicalPath::new(address),
            None,
            address.into(),
        ))
    }
}

/// The vendor's `register`, declaring its section.
fn register_vendor(registry: &mut RegistryBuilder) {
    registry
        .provider(Arc::new(VendorBackend))
        .scheme("vendor")
        .config_section(Section::of::<Vendor>("vendor"));
}

#[test]
fn a_third_party_section_gets_the_same_checks() {
    let vendor = || isolated().provider(register_vendor);
    let message = build_error(&vendor().environment([("KARU_VENDOR__BUCKET_URLL", "x")]));
    assert!(
        message.ends_with("did you mean \"bucket_url\"?"),
        "{message}"
    );
    let message = build_error(&vendor().set("vendor.bucket_url", "https://x"));
    assert!(
        message.ends_with(
            "key \"vendor.bucket_url\": expected a vendor:// URL, found string \"https://x\""
        ),
        "{message}"
    );
    let message = build_error(&vendor().set("vendor.api_key", 42));
    assert!(!message.contains("42"), "{message}");
    let client = vendor()
        .set("vendor.api_key", "k")
        .set("vendor.bucket_url", "vendor://b")
        .build()
        .unwrap();
    let explained = client.snapshot().explain("vendor://b/x").unwrap();
    let key = explained.values.iter().find(|v| v.key == "vendor.api_key");
    assert_eq!(key.map(|v| v.value.as_str()), Some("<redacted>"));
    // Without the declaration the table is unknown.
    let message = build_error(&isolated().set("vendor.api_key", "k"));
    assert!(message.contains("unknown key"), "{message}");
}
