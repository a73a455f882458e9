//! Helpers of the S3 integration tests: a captured AWS environment that can only reach
//! loopback, clients configured for the S3 mock, and the evidence of the mock's request log
//! (which key signed each request, for which region, which headers were signed).
//!
//! Each test binary of the S3 provider declares this module (`mod support;`) and uses a
//! subset of it; the reads and their checks are `karu_testkit::reads`.
//!
//! Every client is built with `.user_config_file(None).project_config_file(None)` and an
//! explicit [`AwsEnv`]: the provider sees that environment only, never the process's. An
//! [`AwsEnv`] starts with `HOME`, `AWS_CONFIG_FILE` and `AWS_SHARED_CREDENTIALS_FILE` inside a
//! temporary directory (the machine's `~/.aws` is never read), `AWS_REGION=us-east-1` (no
//! region lookup) and `AWS_EC2_METADATA_DISABLED=true` (no instance metadata); a test that
//! wants instance metadata removes the last and points `AWS_EC2_METADATA_SERVICE_ENDPOINT` at
//! the loopback fake.
#![allow(dead_code)]

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use karu::{Client, ClientBuilder, Locator};
use karu_testkit::reads::quick;
use karu_testkit::{CredentialFakes, MockCredentials, RequestRecord, S3Mock};

/// The bucket most tests read from.
pub(crate) const BUCKET: &str = "karu-bucket";

/// The environment a client captures: loopback-only AWS settings in a temporary home.
#[derive(Debug)]
pub(crate) struct AwsEnv {
    home: tempfile::TempDir,
    vars: Vec<(String, String)>,
}

impl AwsEnv {
    /// `HOME`, `AWS_CONFIG_FILE`, `AWS_SHARED_CREDENTIALS_FILE` in a new temporary directory
    /// (the files do not exist until [`write_config`](AwsEnv::write_config) /
    /// [`write_credentials`](AwsEnv::write_credentials)), `AWS_REGION=us-east-1`,
    /// `AWS_EC2_METADATA_DISABLED=true`.
    pub(crate) fn new() -> Self {
        let home = tempfile::tempdir().expect("a temporary home");
        let aws = home.path().join(".aws");
        std::fs::create_dir_all(&aws).expect("create ~/.aws in the temporary home");
        let path = |p: &Path| p.to_str().expect("temporary paths are UTF-8").to_string();
        let vars = vec![
            ("HOME".to_string(), path(home.path())),
            ("AWS_CONFIG_FILE".to_string(), path(&aws.join("config"))),
            (
                "AWS_SHARED_CREDENTIALS_FILE".to_string(),
                path(&aws.join("credentials")),
            ),
            ("AWS_REGION".to_string(), "us-east-1".to_string()),
            ("AWS_EC2_METADATA_DISABLED".to_string(), "true".to_string()),
        ];
        AwsEnv { home, vars }
    }

    /// The container credential endpoint of `fakes`, asked with the authorization `token`
    /// (the fakes' own is [`CredentialFakes::container_token`]).
    pub(crate) fn container(self, fakes: &CredentialFakes, token: &str) -> Self {
        self.set(
            "AWS_CONTAINER_CREDENTIALS_FULL_URI",
            fakes.container_full_uri(),
        )
        .set("AWS_CONTAINER_AUTHORIZATION_TOKEN", token)
    }

    /// `creds` as keys in the environment (`AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, and
    /// `AWS_SESSION_TOKEN` when they have one).
    pub(crate) fn keys(self, creds: &MockCredentials) -> Self {
        let env = self
            .set("AWS_ACCESS_KEY_ID", creds.access_key_id.clone())
            .set("AWS_SECRET_ACCESS_KEY", creds.secret_access_key.clone());
        match &creds.session_token {
            Some(token) => env.set("AWS_SESSION_TOKEN", token.clone()),
            None => env,
        }
    }

    /// Set (or replace) a variable.
    pub(crate) fn set(mut self, name: &str, value: impl Into<String>) -> Self {
        self.vars.retain(|(n, _)| n != name);
        self.vars.push((name.to_string(), value.into()));
        self
    }

    /// Remove a variable.
    pub(crate) fn unset(mut self, name: &str) -> Self {
        self.vars.retain(|(n, _)| n != name);
        self
    }

    /// The temporary home directory.
    pub(crate) fn home(&self) -> &Path {
        self.home.path()
    }

    /// Write the AWS config file (`AWS_CONFIG_FILE`).
    pub(crate) fn write_config(&self, text: &str) {
        std::fs::write(self.home.path().join(".aws/config"), text).expect("write the config");
    }

    /// Write the AWS credentials file (`AWS_SHARED_CREDENTIALS_FILE`).
    pub(crate) fn write_credentials(&self, text: &str) {
        std::fs::write(self.home.path().join(".aws/credentials"), text)
            .expect("write the credentials file");
    }

    /// Write a file into the home directory and return its path.
    pub(crate) fn write_file(&self, name: &str, text: &str) -> PathBuf {
        let path = self.home.path().join(name);
        std::fs::write(&path, text).expect("write a file into the temporary home");
        path
    }

    /// The variables, for [`ClientBuilder::environment`].
    pub(crate) fn vars(&self) -> Vec<(String, String)> {
        self.vars.clone()
    }
}

/// Credential fakes started for `s3`, the first credentials they hand out accepted by it.
pub(crate) fn accepted_fakes(s3: &S3Mock) -> (CredentialFakes, MockCredentials) {
    let fakes = CredentialFakes::start();
    let (issued, _) = fakes.issued();
    s3.add_credentials(issued.clone());
    (fakes, issued)
}

/// A builder that reads no config file, sees exactly `env`, and waits briefly between
/// attempts (10–50 ms).
pub(crate) fn builder(env: &AwsEnv) -> ClientBuilder {
    quick().environment(env.vars())
}

/// [`builder`] pointed at the mock (path style), signing for `us-east-1`, with no keys:
/// credentials come from discovery (or a callback).
pub(crate) fn discovering(s3: &S3Mock, env: &AwsEnv) -> ClientBuilder {
    builder(env)
        .set("s3.endpoint", s3.endpoint())
        .set("s3.region", "us-east-1")
}

/// [`discovering`] with explicit keys in the configuration.
pub(crate) fn with_keys(s3: &S3Mock, env: &AwsEnv, creds: &MockCredentials) -> ClientBuilder {
    let mut b = discovering(s3, env)
        .set("s3.access_key_id", creds.access_key_id.clone())
        .set("s3.secret_access_key", creds.secret_access_key.clone());
    if let Some(token) = &creds.session_token {
        b = b.set("s3.session_token", token.clone());
    }
    b
}

/// [`with_keys`] with the mock's default key pair.
pub(crate) fn explicit(s3: &S3Mock, env: &AwsEnv) -> ClientBuilder {
    with_keys(s3, env, &s3.default_credentials())
}

/// A client built from `builder`.
pub(crate) fn build(builder: ClientBuilder) -> Client {
    builder.build().expect("the test client builds")
}

/// Resolve `s3://bucket/key`.
pub(crate) fn locate(client: &Client, bucket: &str, key: &str) -> Locator {
    client
        .locate(&format!("s3://{bucket}/{key}"))
        .expect("an s3:// address resolves")
}

/// The parts of a request's SigV4 `Authorization` header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Signed {
    /// The access key id of `Credential=`.
    pub(crate) key_id: String,
    /// The scope's region.
    pub(crate) region: String,
    /// The scope's service.
    pub(crate) service: String,
    /// `SignedHeaders=`, as listed.
    pub(crate) headers: Vec<String>,
}

/// How `record` was signed, or `None` for an unsigned request.
///
/// # Panics
/// If the `Authorization` header is not SigV4 for one scope (the mock would have said so).
pub(crate) fn signed(record: &RequestRecord) -> Option<Signed> {
    let value = record.header("authorization")?;
    let rest = value
        .strip_prefix("AWS4-HMAC-SHA256 ")
        .unwrap_or_else(|| panic!("not SigV4: {}", record.path));
    let mut credential = None;
    let mut headers = None;
    for part in rest.split(',') {
        let part = part.trim();
        if let Some(c) = part.strip_prefix("Credential=") {
            credential = Some(c.to_string());
        } else if let Some(h) = part.strip_prefix("SignedHeaders=") {
            headers = Some(h.split(';').map(str::to_string).collect());
        }
    }
    let credential = credential.expect("Credential= in the Authorization header");
    let scope: Vec<&str> = credential.split('/').collect();
    assert_eq!(scope.len(), 5, "scope of {credential}");
    assert_eq!(scope[4], "aws4_request", "scope of {credential}");
    Some(Signed {
        key_id: scope[0].to_string(),
        region: scope[2].to_string(),
        service: scope[3].to_string(),
        headers: headers.expect("SignedHeaders= in the Authorization header"),
    })
}

/// The access key id of each request in the log (`-` for an unsigned one).
pub(crate) fn key_ids(log: &[RequestRecord]) -> Vec<String> {
    log.iter()
        .map(|r| signed(r).map_or_else(|| "-".to_string(), |s| s.key_id))
        .collect()
}

/// The signing region of each request in the log (`-` for an unsigned one).
pub(crate) fn regions(log: &[RequestRecord]) -> Vec<String> {
    log.iter()
        .map(|r| signed(r).map_or_else(|| "-".to_string(), |s| s.region))
        .collect()
}

/// The status of each request in the log.
pub(crate) fn statuses(log: &[RequestRecord]) -> Vec<u16> {
    log.iter().map(|r| r.status).collect()
}

/// Assert that the mock rejected nothing.
#[track_caller]
pub(crate) fn assert_no_rejections(s3: &S3Mock) {
    let failures = s3.signature_failures();
    assert!(
        failures.is_empty(),
        "the mock rejected requests: {failures:#?}\n{}",
        describe(&s3.server().requests())
    );
}

/// A one-line summary of each request (path, range, status, key id, region), for messages.
pub(crate) fn describe(log: &[RequestRecord]) -> String {
    let mut out = String::new();
    for r in log {
        let sig = signed(r);
        let _ = writeln!(
            out,
            "{} {} range={} status={} key={} region={}",
            r.method,
            r.path,
            r.range.as_deref().unwrap_or("-"),
            r.status,
            sig.as_ref().map_or("-", |s| s.key_id.as_str()),
            sig.as_ref().map_or("-", |s| s.region.as_str()),
        );
    }
    out
}

/// Assert that `text` contains none of `secrets` (each named in the message by its label,
/// never by its value).
#[track_caller]
pub(crate) fn assert_free_of(what: &str, text: &str, secrets: &[(&str, &str)]) {
    for (label, secret) in secrets {
        assert!(
            !secret.is_empty(),
            "an empty secret ({label}) proves nothing"
        );
        assert!(
            !text.contains(secret),
            "{what} contains the {label} (at byte {})",
            text.find(secret).unwrap_or_default()
        );
    }
}

/// A `credential_process` command that appends a line to a counter file, then runs the
/// testkit's script printing `creds`; returns the command and the counter file.
pub(crate) fn counting_process(dir: &Path, creds: &MockCredentials) -> (String, PathBuf) {
    let script = karu_testkit::aws::write_credential_process(dir, creds, None);
    let counter = dir.join(format!(
        "{}.runs",
        script
            .file_name()
            .and_then(|n| n.to_str())
            .expect("a script name")
    ));
    let command = format!(
        "echo run >> '{}' && '{}'",
        counter.display(),
        script.display()
    );
    (command, counter)
}

/// How many times a [`counting_process`] command ran.
pub(crate) fn runs(counter: &Path) -> usize {
    std::fs::read_to_string(counter).map_or(0, |s| s.lines().count())
}
