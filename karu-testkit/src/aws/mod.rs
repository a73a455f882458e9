//! Loopback fakes of the places AWS credentials are discovered: the EC2 instance metadata
//! service (IMDSv2), the ECS/EKS container credentials endpoint, STS
//! `AssumeRoleWithWebIdentity`, and `credential_process` scripts; and [`MockCredentials`], the
//! key pairs they hand out and the [`S3Mock`](crate::S3Mock) accepts.
//!
//! [`CredentialFakes`] is one [`MockServer`](crate::MockServer) on `127.0.0.1` answering all
//! three HTTP protocols in the formats `aws-config` 1.x parses; its URLs go into the variables
//! the SDK reads (`AWS_EC2_METADATA_SERVICE_ENDPOINT`, `AWS_CONTAINER_CREDENTIALS_FULL_URI` with
//! `AWS_CONTAINER_AUTHORIZATION_TOKEN`, `AWS_ENDPOINT_URL_STS`), so no test reaches a real
//! metadata address. [`write_credential_process`] writes a script for the `credential_process`
//! path.
//!
//! ```
//! use std::time::{Duration, SystemTime};
//! use karu_testkit::{CredentialFakes, MockCredentials, S3Mock};
//!
//! let fakes = CredentialFakes::start();
//! let creds = MockCredentials::new("ASIAEXAMPLE", "secret").with_session_token("token");
//! fakes.issue(creds.clone(), SystemTime::now() + Duration::from_secs(3600));
//! let s3 = S3Mock::start();
//! s3.add_credentials(creds);
//! // AWS_EC2_METADATA_SERVICE_ENDPOINT = fakes.imds_endpoint(), ...
//! assert!(fakes.imds_endpoint().starts_with("http://127.0.0.1:"));
//! assert_eq!(fakes.calls().imds_credentials, 0);
//! ```

mod fakes;

use std::fmt;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::SystemTime;

pub use fakes::{CredentialCalls, CredentialFakes, StsRequest};

/// An AWS key pair, with a session token for temporary credentials.
///
/// `Debug` shows the access key id only.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct MockCredentials {
    /// The access key id (`AKIA...` for long-term keys, `ASIA...` for temporary ones).
    pub access_key_id: String,
    /// The secret access key.
    pub secret_access_key: String,
    /// The session token of temporary credentials.
    pub session_token: Option<String>,
}

impl MockCredentials {
    /// A long-term key pair (no session token).
    pub fn new(access_key_id: impl Into<String>, secret_access_key: impl Into<String>) -> Self {
        Self {
            access_key_id: access_key_id.into(),
            secret_access_key: secret_access_key.into(),
            session_token: None,
        }
    }

    /// The same key pair with a session token (temporary credentials).
    pub fn with_session_token(mut self, token: impl Into<String>) -> Self {
        self.session_token = Some(token.into());
        self
    }
}

impl fmt::Debug for MockCredentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MockCredentials")
            .field("access_key_id", &self.access_key_id)
            .field("secret_access_key", &"** redacted **")
            .field(
                "session_token",
                &self.session_token.as_ref().map(|_| "** redacted **"),
            )
            .finish_non_exhaustive()
    }
}

/// Numbers the scripts of [`write_credential_process`], so none overwrites another.
static SCRIPTS: AtomicU64 = AtomicU64::new(0);

/// The JSON a `credential_process` prints: `Version` 1, `AccessKeyId`, `SecretAccessKey`, and
/// `SessionToken` and `Expiration` (RFC 3339, UTC) when given.
pub fn credential_process_json(creds: &MockCredentials, expiration: Option<SystemTime>) -> String {
    let mut doc = serde_json::Map::new();
    doc.insert("Version".into(), 1.into());
    doc.insert("AccessKeyId".into(), creds.access_key_id.clone().into());
    doc.insert(
        "SecretAccessKey".into(),
        creds.secret_access_key.clone().into(),
    );
    if let Some(token) = &creds.session_token {
        doc.insert("SessionToken".into(), token.clone().into());
    }
    if let Some(expiration) = expiration {
        doc.insert(
            "Expiration".into(),
            crate::awstime::rfc3339(expiration).into(),
        );
    }
    serde_json::Value::Object(doc).to_string()
}

/// Writes an executable `sh` script into `dir` that prints [`credential_process_json`] and
/// exits 0, for `credential_process = /path/to/script` in an AWS config file; returns its path.
///
/// Each call writes a new file (`karu-credential-process-N.sh`), so a script another test may
/// be running is never rewritten.
///
/// # Panics
/// If the file cannot be written (this is a test helper).
///
/// ```
/// use karu_testkit::{MockCredentials, aws::write_credential_process};
///
/// let dir = tempfile::tempdir().unwrap();
/// let creds = MockCredentials::new("AKIDEXAMPLE", "secret");
/// let script = write_credential_process(dir.path(), &creds, None);
/// let out = std::process::Command::new(&script).output().unwrap();
/// assert!(out.status.success());
/// assert!(String::from_utf8(out.stdout).unwrap().contains("\"AccessKeyId\":\"AKIDEXAMPLE\""));
/// ```
pub fn write_credential_process(
    dir: &Path,
    creds: &MockCredentials,
    expiration: Option<SystemTime>,
) -> PathBuf {
    let n = SCRIPTS.fetch_add(1, Ordering::Relaxed) + 1;
    let path = dir.join(format!("karu-credential-process-{n}.sh"));
    let script = format!(
        "#!/bin/sh\n# Written by karu-testkit: prints credentials as a credential_process does.\ncat <<'KARU_CREDENTIALS_END'\n{}\nKARU_CREDENTIALS_END\n",
        credential_process_json(creds, expiration)
    );
    let write = || -> std::io::Result<()> {
        let mut options = std::fs::OpenOptions::new();
        options.write(true).create_new(true);
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o755);
        let mut file = options.open(&path)?;
        file.write_all(script.as_bytes())?;
        file.sync_all()
    };
    write().unwrap_or_else(|e| {
        panic!(
            "karu-testkit: cannot write the credential_process script {}: {e}",
            path.display()
        )
    });
    path
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, UNIX_EPOCH};

    #[test]
    fn debug_redacts_secrets() {
        let creds = MockCredentials::new("AKID", "s3cr3t").with_session_token("t0k3n");
        let text = format!("{creds:?}");
        assert!(text.contains("AKID"));
        assert!(
            !text.contains("s3cr3t") && !text.contains("t0k3n"),
            "{text}"
        );
    }

    #[test]
    fn credential_process_json_has_the_documented_fields() {
        let creds = MockCredentials::new("AKID", "secret").with_session_token("token");
        let json = credential_process_json(
            &creds,
            Some(UNIX_EPOCH + Duration::from_secs(1_440_938_160)),
        );
        let doc: serde_json::Value = serde_json::from_str(&json).unwrap();
        assert_eq!(doc["Version"], 1);
        assert_eq!(doc["AccessKeyId"], "AKID");
        assert_eq!(doc["SecretAccessKey"], "secret");
        assert_eq!(doc["SessionToken"], "token");
        assert_eq!(doc["Expiration"], "2015-08-30T12:36:00Z");
        let long_term = credential_process_json(&MockCredentials::new("A", "s"), None);
        let doc: serde_json::Value = serde_json::from_str(&long_term).unwrap();
        let keys: Vec<&String> = doc.as_object().unwrap().keys().collect();
        assert_eq!(keys.len(), 3, "{long_term}");
        assert_eq!(
            (&doc["AccessKeyId"], &doc["Version"]),
            (&"A".into(), &1.into())
        );
    }
}
