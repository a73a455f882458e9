//! A Source Cooperative data-proxy mock: `GET /{account}/{product}/{path}` answered anonymously
//! for [public](SourceMock::set_public) accounts and with every SigV4 signature checked for the
//! others, as the data proxy's S3-compatible API does, on top of the [`S3Mock`] (an account is
//! a bucket, `product/path` its key), with the whole fault plan and the request log of its
//! [`MockServer`].
//!
//! ```
//! use karu_testkit::source::SourceMock;
//!
//! let source = SourceMock::start();
//! source.insert("cholmes", "admin-boundaries", "countries.parquet", vec![1u8; 10]);
//! assert_eq!(
//!     source.path_of("cholmes", "admin-boundaries", "countries.parquet"),
//!     "/cholmes/admin-boundaries/countries.parquet"
//! );
//! ```

use std::fmt;

use bytes::Bytes;

use crate::aws::MockCredentials;
use crate::http::MockServer;
use crate::s3::{S3Mock, object_path};

/// The data proxy on 127.0.0.1, running until dropped.
pub struct SourceMock {
    s3: S3Mock,
}

impl fmt::Debug for SourceMock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SourceMock")
            .field("endpoint", &self.s3.endpoint())
            .finish()
    }
}

impl SourceMock {
    /// Start the proxy (plain HTTP on 127.0.0.1, signing region `us-east-1`), accepting the
    /// key pair [`credentials`](SourceMock::credentials).
    pub fn start() -> SourceMock {
        SourceMock {
            s3: S3Mock::start(),
        }
    }

    /// The endpoint to configure (`source.endpoint`).
    pub fn endpoint(&self) -> String {
        self.s3.endpoint()
    }

    /// The server: request log and fault plan.
    pub fn server(&self) -> &MockServer {
        self.s3.server()
    }

    /// The S3 mock underneath (signature failures, more key pairs, revocations).
    pub fn s3(&self) -> &S3Mock {
        &self.s3
    }

    /// The key pair the proxy accepts.
    pub fn credentials(&self) -> MockCredentials {
        self.s3.default_credentials()
    }

    /// Whether an account's products are readable without a signature (default: not).
    pub fn set_public(&self, account: &str, public: bool) {
        self.s3.create_bucket(account);
        self.s3.set_public(account, public);
    }

    /// Put a file in a product.
    pub fn insert(&self, account: &str, product: &str, path: &str, bytes: impl Into<Bytes>) {
        self.s3.insert(account, &format!("{product}/{path}"), bytes);
    }

    /// Put a virtual file of `size` pattern bytes in a product.
    pub fn insert_virtual(&self, account: &str, product: &str, path: &str, size: u64) {
        self.s3
            .insert_virtual(account, &format!("{product}/{path}"), size);
    }

    /// Set the ETag of a file.
    pub fn set_etag(&self, account: &str, product: &str, path: &str, etag: Option<&str>) {
        self.s3
            .set_etag(account, &format!("{product}/{path}"), etag);
    }

    /// The request path of a file (for fault rules and the log).
    pub fn path_of(&self, account: &str, product: &str, path: &str) -> String {
        object_path(account, &format!("{product}/{path}"))
    }
}
