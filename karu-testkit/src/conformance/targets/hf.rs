//! The Hugging Face provider against Karu's Hub mock: the CDN's faults, or the Hub's.

use std::fmt;

use karu::ClientBuilder;

use super::{dead_port, isolated_builder};
use crate::conformance::{MockControl, Target};
use crate::hf::{HfMock, RepoAccess};
use crate::http::MockServer;

/// The repository the Hugging Face target uses: gated, so every case also proves the token
/// reached the Hub (and, from the CDN's refusals, never the CDN).
const HF_REPO: &str = "datasets/karu/conformance";

/// The Hugging Face provider against Karu's Hub mock: the fault plan and the request log are
/// the CDN's (where the bytes come from); every read resolves through the Hub's redirect, or
/// reuses its signed location.
pub struct HfMockTarget {
    mock: HfMock,
    dead_port: u16,
}

impl HfMockTarget {
    /// Start a Hub mock with the conformance repository, gated to the mock's default token.
    pub fn start() -> Self {
        let mock = HfMock::start();
        mock.create_repo(
            HF_REPO,
            RepoAccess::Gated(vec![mock.default_token().to_string()]),
        );
        HfMockTarget {
            mock,
            dead_port: dead_port(),
        }
    }

    /// The mock (the Hub's log, URL lifetimes, revocations, rate limits).
    pub fn mock_hf(&self) -> &HfMock {
        &self.mock
    }

    fn builder_for(&self, endpoint: &str) -> ClientBuilder {
        isolated_builder()
            .set("hf.endpoint", endpoint)
            .set("hf.token", self.mock.default_token())
    }
}

impl fmt::Debug for HfMockTarget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HfMockTarget")
            .field("mock", &self.mock)
            .finish()
    }
}

impl Target for HfMockTarget {
    fn name(&self) -> String {
        "hf-mock".into()
    }

    fn builder(&self) -> ClientBuilder {
        self.builder_for(&self.mock.endpoint())
    }

    fn address(&self, name: &str) -> String {
        format!("hf://{HF_REPO}/{name}")
    }

    fn put(&self, name: &str, bytes: &[u8]) -> Result<(), String> {
        self.mock.insert(HF_REPO, "main", name, bytes.to_vec());
        Ok(())
    }

    fn mock(&self) -> Option<&dyn MockControl> {
        Some(self)
    }
}

impl MockControl for HfMockTarget {
    fn server(&self) -> &MockServer {
        self.mock.cdn()
    }

    fn path_of(&self, name: &str) -> String {
        self.mock.cdn_path(HF_REPO, "main", name)
    }

    fn put_virtual(&self, name: &str, size: u64) {
        self.mock.insert_virtual(HF_REPO, "main", name, size);
    }

    fn set_etag(&self, name: &str, etag: Option<&str>) {
        self.mock.cdn().set_etag(&self.path_of(name), etag);
    }

    fn refusing(&self, name: &str) -> (ClientBuilder, String) {
        (
            self.builder_for(&format!("http://127.0.0.1:{}", self.dead_port)),
            self.address(name),
        )
    }
}

/// The Hugging Face provider against Karu's Hub mock with the fault plan on the Hub's resolve
/// endpoint (the origin that answers with redirects), not on the CDN: every read asks the Hub
/// (`hf.reuse_locations = false`), so each transfer meets the Hub's faults and the rows about
/// an answer's bytes, which a redirect does not carry, are left out
/// ([`MockControl::serves_bytes`]).
pub struct HfHubTarget {
    inner: HfMockTarget,
}

impl HfHubTarget {
    /// Start a Hub mock with the conformance repository, gated to the mock's default token.
    pub fn start() -> Self {
        HfHubTarget {
            inner: HfMockTarget::start(),
        }
    }

    /// The mock (the Hub's and the CDN's logs).
    pub fn mock_hf(&self) -> &HfMock {
        &self.inner.mock
    }
}

impl fmt::Debug for HfHubTarget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HfHubTarget")
            .field("mock", &self.inner.mock)
            .finish()
    }
}

impl Target for HfHubTarget {
    fn name(&self) -> String {
        "hf-hub-mock".into()
    }

    fn builder(&self) -> ClientBuilder {
        self.inner.builder().set("hf.reuse_locations", "false")
    }

    fn address(&self, name: &str) -> String {
        self.inner.address(name)
    }

    fn put(&self, name: &str, bytes: &[u8]) -> Result<(), String> {
        self.inner.put(name, bytes)
    }

    fn mock(&self) -> Option<&dyn MockControl> {
        Some(self)
    }
}

impl MockControl for HfHubTarget {
    fn server(&self) -> &MockServer {
        self.inner.mock.hub()
    }

    fn path_of(&self, name: &str) -> String {
        self.inner.mock.resolve_path(HF_REPO, "main", name)
    }

    fn put_virtual(&self, name: &str, size: u64) {
        self.inner.put_virtual(name, size);
    }

    fn set_etag(&self, name: &str, etag: Option<&str>) {
        self.inner.set_etag(name, etag);
    }

    fn refusing(&self, name: &str) -> (ClientBuilder, String) {
        let (builder, address) = self.inner.refusing(name);
        (builder.set("hf.reuse_locations", "false"), address)
    }

    fn serves_bytes(&self) -> bool {
        false
    }
}
