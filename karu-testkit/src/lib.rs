//! Mock servers and harnesses that Karu's tests and benchmarks read through.
//!
//! A test author first starts a [`MockServer`] (`MockServer::start()`), inserts the objects the
//! test reads, optionally adds [`FaultRule`]s, runs the client against
//! [`MockServer::url`], and asserts on the evidence in [`MockServer::requests`]: which ranges
//! were requested, how often, on which connection, with what status. The [`nginx`] module runs
//! a real nginx over a directory (plain HTTP, or HTTPS with HTTP/2) for checks against a real
//! server, and the [`seaweedfs`]
//! module a real SeaweedFS S3 gateway (SigV4 enforced) for checks against an independently
//! written S3 server, and the [`fake_gcs`] module a real fake-gcs-server for the GCS provider.
//!
//! The [`reads`] module holds the helpers a provider's integration tests read with: isolated
//! clients, batches drained without hanging, and checks of each completion's status and bytes
//! against the pattern.
//!
//! The [`conformance`] module is the provider-agnostic suite: the same cases, the fault matrix
//! and random cases (drawn from seeds with [`Rng`]) against any provider's mock server, or
//! against a real endpoint.
//!
//! For cloud providers: the [`s3`] module's [`S3Mock`] checks every SigV4 signature
//! independently and answers like S3 (wrong region, expired token, skewed clock), on the same
//! server and fault plan; the [`aws`] module's [`CredentialFakes`] serve IMDSv2, container and
//! STS web-identity credentials on loopback, and [`aws::write_credential_process`] writes a
//! `credential_process` script. The [`azure`] module's [`AzureMock`] verifies Shared Key
//! signatures independently, and SAS and bearer tokens it issued, recording which identity
//! each request carried. The [`gcs`] module's [`GcsMock`] checks bearer tokens and GOOG4
//! HMAC signatures, serves objects stored gzip-compressed both ways, and its [`GcsAuthFakes`]
//! serve the OAuth token endpoint and the metadata server.

pub mod aws;
mod awstime;
pub mod azure;
pub mod azurite;
pub mod c_source;
pub mod conformance;
pub mod fake_gcs;
pub mod gcs;
pub mod hf;
pub mod http;
pub mod nginx;
pub mod reads;
mod rng;
pub mod s3;
pub mod seaweedfs;
mod server_process;
pub mod source;

pub use aws::{CredentialCalls, CredentialFakes, MockCredentials, StsRequest};
pub use azure::{AuthFailure, AuthRecord, AzureMock, Identity};
pub use gcs::{GcsAuthFakes, GcsMock};
pub use hf::{HfMock, RepoAccess};
pub use http::{
    Fault, FaultRule, Gate, GateResponse, MAX_REQUEST_BODY, MockServer, MockServerBuilder,
    PARETO_CAP, RequestHead, RequestRecord, Route, fill_pattern, pattern, pattern_byte,
    pattern_version, url_path, version_of_pattern,
};
pub use rng::Rng;
pub use s3::{S3Mock, S3MockBuilder, SignatureFailure, SignatureFailureKind};

/// Makes a FIFO (a named pipe) at `path` with `mkfifo`, for tests of paths that must never be
/// read as files: with no writer, a blocking open of it waits forever.
///
/// # Panics
///
/// If `mkfifo` cannot be run or fails.
pub fn make_fifo(path: &std::path::Path) {
    let status = std::process::Command::new("mkfifo")
        .arg(path)
        .status()
        .expect("mkfifo runs");
    assert!(status.success(), "mkfifo {} failed", path.display());
}

/// This crate's README, whose example runs as a documentation test.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct Readme;
