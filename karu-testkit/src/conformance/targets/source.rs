//! The Source Cooperative provider against Karu's data-proxy mock.

use std::fmt;

use karu::ClientBuilder;

use super::{dead_port, isolated_builder};
use crate::conformance::{MockControl, Target};
use crate::http::MockServer;
use crate::source::SourceMock;

/// The account and product the Source target uses: a private account, so every case also
/// proves the request was signed.
const SOURCE_ACCOUNT: &str = "karu";
const SOURCE_PRODUCT: &str = "conformance";

/// The Source Cooperative provider against Karu's data-proxy mock, signed with an API key
/// (every SigV4 signature checked).
pub struct SourceMockTarget {
    mock: SourceMock,
    dead_port: u16,
}

impl SourceMockTarget {
    /// Start a data-proxy mock with the conformance account (not public).
    pub fn start() -> Self {
        let mock = SourceMock::start();
        mock.set_public(SOURCE_ACCOUNT, false);
        SourceMockTarget {
            mock,
            dead_port: dead_port(),
        }
    }

    /// The mock.
    pub fn mock_source(&self) -> &SourceMock {
        &self.mock
    }

    fn builder_for(&self, endpoint: &str) -> ClientBuilder {
        let creds = self.mock.credentials();
        isolated_builder()
            .set("source.endpoint", endpoint)
            .set("source.access_key_id", creds.access_key_id)
            .set("source.secret_access_key", creds.secret_access_key)
    }
}

impl fmt::Debug for SourceMockTarget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SourceMockTarget")
            .field("mock", &self.mock)
            .finish()
    }
}

impl Target for SourceMockTarget {
    fn name(&self) -> String {
        "source-mock".into()
    }

    fn builder(&self) -> ClientBuilder {
        self.builder_for(&self.mock.endpoint())
    }

    fn address(&self, name: &str) -> String {
        format!("source://{SOURCE_ACCOUNT}/{SOURCE_PRODUCT}/{name}")
    }

    fn put(&self, name: &str, bytes: &[u8]) -> Result<(), String> {
        self.mock
            .insert(SOURCE_ACCOUNT, SOURCE_PRODUCT, name, bytes.to_vec());
        Ok(())
    }

    fn mock(&self) -> Option<&dyn MockControl> {
        Some(self)
    }
}

impl MockControl for SourceMockTarget {
    fn server(&self) -> &MockServer {
        self.mock.server()
    }

    fn path_of(&self, name: &str) -> String {
        self.mock.path_of(SOURCE_ACCOUNT, SOURCE_PRODUCT, name)
    }

    fn put_virtual(&self, name: &str, size: u64) {
        self.mock
            .insert_virtual(SOURCE_ACCOUNT, SOURCE_PRODUCT, name, size);
    }

    fn set_etag(&self, name: &str, etag: Option<&str>) {
        self.mock
            .set_etag(SOURCE_ACCOUNT, SOURCE_PRODUCT, name, etag);
    }

    fn refusing(&self, name: &str) -> (ClientBuilder, String) {
        (
            self.builder_for(&format!("http://127.0.0.1:{}", self.dead_port)),
            self.address(name),
        )
    }
}
