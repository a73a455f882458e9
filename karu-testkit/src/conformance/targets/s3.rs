//! The S3 provider: against Karu's S3 mock, and against a real S3-compatible endpoint.

use std::fmt;

use karu::ClientBuilder;

use super::{dead_port, isolated_builder, upload};
use crate::conformance::{MockControl, Target};
use crate::http::MockServer;
use crate::s3::{S3Mock, object_path};
use crate::seaweedfs::SeaweedFs;

/// The bucket the S3 targets use.
const BUCKET: &str = "karu-conformance";

/// The S3 provider against Karu's S3 mock (SigV4 checked on every request).
pub struct S3MockTarget {
    mock: S3Mock,
    dead_port: u16,
}

impl S3MockTarget {
    /// Start an S3 mock with the conformance bucket.
    pub fn start() -> Self {
        let mock = S3Mock::start();
        mock.create_bucket(BUCKET);
        S3MockTarget {
            mock,
            dead_port: dead_port(),
        }
    }

    /// The mock (signature failures, credential controls).
    pub fn mock_s3(&self) -> &S3Mock {
        &self.mock
    }

    fn builder_for(&self, endpoint: &str) -> ClientBuilder {
        let creds = self.mock.default_credentials();
        let mut builder = isolated_builder()
            .set("s3.endpoint", endpoint)
            .set("s3.region", self.mock.region())
            .set("s3.access_key_id", creds.access_key_id.clone())
            .set("s3.secret_access_key", creds.secret_access_key.clone());
        if let Some(token) = &creds.session_token {
            builder = builder.set("s3.session_token", token.clone());
        }
        builder
    }
}

impl fmt::Debug for S3MockTarget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("S3MockTarget")
            .field("endpoint", &self.mock.endpoint())
            .finish()
    }
}

impl Target for S3MockTarget {
    fn name(&self) -> String {
        "s3-mock".into()
    }

    fn builder(&self) -> ClientBuilder {
        self.builder_for(&self.mock.endpoint())
    }

    fn address(&self, name: &str) -> String {
        format!("s3://{BUCKET}/{name}")
    }

    fn put(&self, name: &str, bytes: &[u8]) -> Result<(), String> {
        self.mock.insert(BUCKET, name, bytes.to_vec());
        Ok(())
    }

    fn mock(&self) -> Option<&dyn MockControl> {
        Some(self)
    }
}

impl MockControl for S3MockTarget {
    fn server(&self) -> &MockServer {
        self.mock.server()
    }

    fn path_of(&self, name: &str) -> String {
        object_path(BUCKET, name)
    }

    fn put_virtual(&self, name: &str, size: u64) {
        self.mock.insert_virtual(BUCKET, name, size);
    }

    fn set_etag(&self, name: &str, etag: Option<&str>) {
        self.mock.set_etag(BUCKET, name, etag);
    }

    fn refusing(&self, name: &str) -> (ClientBuilder, String) {
        (
            self.builder_for(&format!("http://127.0.0.1:{}", self.dead_port)),
            self.address(name),
        )
    }
}

/// The S3 provider against a real S3-compatible endpoint (SeaweedFS, MinIO, AWS). Objects are
/// uploaded with signed `PUT`s into `bucket` (created if missing).
pub struct S3Target {
    name: String,
    endpoint: Option<String>,
    region: String,
    access_key_id: String,
    secret_access_key: String,
    bucket: String,
    prefix: String,
}

impl S3Target {
    /// A target for `bucket` behind `endpoint` (`None` = AWS for `region`), with these keys.
    pub fn new(
        name: impl Into<String>,
        endpoint: Option<String>,
        region: impl Into<String>,
        access_key_id: impl Into<String>,
        secret_access_key: impl Into<String>,
        bucket: impl Into<String>,
    ) -> Self {
        S3Target {
            name: name.into(),
            endpoint,
            region: region.into(),
            access_key_id: access_key_id.into(),
            secret_access_key: secret_access_key.into(),
            bucket: bucket.into(),
            prefix: format!("karu-conformance-{}", std::process::id()),
        }
    }

    /// A target for `bucket` on a running SeaweedFS, named `seaweedfs`, the bucket created.
    ///
    /// # Errors
    /// If the bucket cannot be created.
    pub fn on_seaweedfs(weed: &SeaweedFs, bucket: impl Into<String>) -> Result<Self, String> {
        let target = S3Target::new(
            "seaweedfs",
            Some(weed.endpoint()),
            weed.region(),
            weed.access_key_id(),
            weed.secret_access_key(),
            bucket,
        );
        target.ensure_bucket()?;
        Ok(target)
    }

    fn object_url(&self, key: &str) -> String {
        let path = object_path(&self.bucket, key);
        match &self.endpoint {
            Some(e) => format!("{}{path}", e.trim_end_matches('/')),
            None => format!("https://s3.{}.amazonaws.com{path}", self.region),
        }
    }

    /// Create the bucket if it does not exist (an error answer for an existing bucket is
    /// fine).
    pub fn ensure_bucket(&self) -> Result<(), String> {
        let url = match &self.endpoint {
            Some(e) => format!("{}/{}", e.trim_end_matches('/'), self.bucket),
            None => format!("https://s3.{}.amazonaws.com/{}", self.region, self.bucket),
        };
        let status = upload::put(&url, &[], &self.signer())?;
        if status < 300 || status == 409 {
            Ok(())
        } else {
            Err(format!("creating bucket {} answered {status}", self.bucket))
        }
    }

    fn signer(&self) -> upload::Signer<'_> {
        upload::Signer {
            access_key_id: &self.access_key_id,
            secret_access_key: &self.secret_access_key,
            region: &self.region,
        }
    }
}

impl fmt::Debug for S3Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("S3Target")
            .field("name", &self.name)
            .field("endpoint", &self.endpoint)
            .field("region", &self.region)
            .field("access_key_id", &self.access_key_id)
            .field("bucket", &self.bucket)
            .finish_non_exhaustive()
    }
}

impl Target for S3Target {
    fn name(&self) -> String {
        self.name.clone()
    }

    fn builder(&self) -> ClientBuilder {
        let mut builder = isolated_builder()
            .set("s3.region", self.region.clone())
            .set("s3.access_key_id", self.access_key_id.clone())
            .set("s3.secret_access_key", self.secret_access_key.clone());
        if let Some(endpoint) = &self.endpoint {
            builder = builder.set("s3.endpoint", endpoint.clone());
        }
        builder
    }

    fn address(&self, name: &str) -> String {
        format!("s3://{}/{}/{name}", self.bucket, self.prefix)
    }

    fn put(&self, name: &str, bytes: &[u8]) -> Result<(), String> {
        let url = self.object_url(&format!("{}/{name}", self.prefix));
        let status = upload::put(&url, bytes, &self.signer())?;
        if status < 300 {
            Ok(())
        } else {
            Err(format!("uploading {name} answered {status}"))
        }
    }
}
