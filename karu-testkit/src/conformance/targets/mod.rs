//! The conformance suite's targets, one file per provider (`http.rs`, `local.rs`, `s3.rs`,
//! `gcs.rs`, `azure.rs`, `hf.rs`, `source.rs`), the signed uploads that populate a real
//! endpoint (`upload.rs`), and [`MockTarget`]: a provider's objects on Karu's HTTP mock, the
//! target a third-party provider's conformance test configures instead of writing its own.

use std::fmt;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use karu::ClientBuilder;

use super::{MockControl, Target};
use crate::http::{MockServer, url_path};

mod azure;
mod gcs;
mod hf;
mod http;
mod local;
mod s3;
mod source;
pub(crate) mod upload;

pub use azure::{AzureAuth, AzureEndpointTarget, AzureMockTarget, AzuriteTarget};
pub use gcs::{GcsMockTarget, GcsTarget};
pub use hf::{HfHubTarget, HfMockTarget};
pub use http::{HttpMockTarget, NginxTarget};
pub use local::LocalTarget;
pub use s3::{S3MockTarget, S3Target};
pub use source::SourceMockTarget;

/// A client builder that reads no machine configuration and no process environment: what a
/// target's [`Target::builder`] starts from ([`crate::reads::isolated`]).
pub use crate::reads::isolated as isolated_builder;

/// Write the file `name` under `root`, making the directories it names.
fn write_under(root: &Path, name: &str, bytes: &[u8]) -> Result<(), String> {
    let path: PathBuf = root.join(name);
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(|e| e.to_string())?;
    }
    std::fs::write(&path, bytes).map_err(|e| e.to_string())
}

/// A loopback port nothing listens on.
fn dead_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .unwrap_or(9)
}

/// How a [`MockTarget`] makes its clients' builders.
type MakeBuilder = dyn Fn() -> ClientBuilder + Send + Sync;

/// How a [`MockTarget`] spells an object's address, from the server's authority
/// (`127.0.0.1:PORT`) and the object's name (as the suite names it: `dir/a b.bin`).
type MakeAddress = dyn Fn(&str, &str) -> String + Send + Sync;

/// A provider whose objects Karu's HTTP mock serves at [`url_path`]`(name)`: the whole suite
/// (the fault matrix and the random cases included) through the provider's own addresses,
/// with the mock's request log as evidence. Configured, not written: a third-party provider's
/// test names its scheme and its settings (and may put a [`Gate`](crate::Gate) on the server
/// to check its authentication). With the defaults it is the plain HTTP provider
/// ([`HttpMockTarget`]).
///
/// ```no_run
/// use karu_testkit::conformance::{self, MockTarget, Options, isolated_builder};
/// use karu_testkit::MockServer;
///
/// # mod toy { pub fn register<R>(_: R) {} }
/// let target = MockTarget::new("toy-on-http-mock", MockServer::start())
///     .with_builder(|| {
///         isolated_builder()
///             .provider(|registry| toy::register(registry))
///             .set("toy.token", "t0ken")
///     })
///     .with_address(|authority, name| format!("toy://{authority}/{name}"));
/// conformance::run(&target, &Options::default()).assert_passed();
/// ```
pub struct MockTarget {
    name: String,
    server: MockServer,
    dead_port: u16,
    builder: Arc<MakeBuilder>,
    settings: Vec<(String, String)>,
    address: Arc<MakeAddress>,
}

impl MockTarget {
    /// A target named `name` over `server`: objects at `http://AUTHORITY/PATH`, read by
    /// clients of [`isolated_builder`] (the plain HTTP provider) until
    /// [`with_builder`](MockTarget::with_builder) and
    /// [`with_address`](MockTarget::with_address) say otherwise.
    pub fn new(name: impl Into<String>, server: MockServer) -> Self {
        MockTarget {
            name: name.into(),
            server,
            dead_port: dead_port(),
            builder: Arc::new(isolated_builder),
            settings: Vec::new(),
            address: Arc::new(|authority: &str, name: &str| {
                format!("http://{authority}{}", url_path(name))
            }),
        }
    }

    /// Clients start from `builder` (which should read no machine configuration: start from
    /// [`isolated_builder`]), for example to register the provider and configure it.
    pub fn with_builder(
        mut self,
        builder: impl Fn() -> ClientBuilder + Send + Sync + 'static,
    ) -> Self {
        self.builder = Arc::new(builder);
        self
    }

    /// Set `key` to `value` on every client, after the builder (a CA file, an HTTP version).
    pub fn set(mut self, key: &str, value: impl Into<String>) -> Self {
        self.settings.push((key.to_string(), value.into()));
        self
    }

    /// Spell the address of an object from the server's authority (`127.0.0.1:PORT`, or a
    /// port nothing listens on for the refused-connection cases) and its name (which may
    /// hold spaces, reserved and non-ASCII characters). The provider must request the object
    /// at [`url_path`]`(name)` on the server.
    pub fn with_address(
        mut self,
        address: impl Fn(&str, &str) -> String + Send + Sync + 'static,
    ) -> Self {
        self.address = Arc::new(address);
        self
    }

    /// The mock server (its fault plan, its request log, its gate).
    pub fn server(&self) -> &MockServer {
        &self.server
    }

    fn client_builder(&self) -> ClientBuilder {
        let mut builder = (self.builder)();
        for (key, value) in &self.settings {
            builder = builder.set(key, value.as_str());
        }
        builder
    }
}

impl fmt::Debug for MockTarget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MockTarget")
            .field("name", &self.name)
            .field("server", &self.server.base_url())
            .finish_non_exhaustive()
    }
}

impl Target for MockTarget {
    fn name(&self) -> String {
        self.name.clone()
    }

    fn builder(&self) -> ClientBuilder {
        self.client_builder()
    }

    fn address(&self, name: &str) -> String {
        (self.address)(&self.server.addr().to_string(), name)
    }

    fn put(&self, name: &str, bytes: &[u8]) -> Result<(), String> {
        self.server.insert(&url_path(name), bytes.to_vec());
        Ok(())
    }

    fn mock(&self) -> Option<&dyn MockControl> {
        Some(self)
    }
}

impl MockControl for MockTarget {
    fn server(&self) -> &MockServer {
        &self.server
    }

    fn path_of(&self, name: &str) -> String {
        url_path(name)
    }

    fn put_virtual(&self, name: &str, size: u64) {
        self.server.insert_virtual(&url_path(name), size);
    }

    fn set_etag(&self, name: &str, etag: Option<&str>) {
        self.server.set_etag(&url_path(name), etag);
    }

    fn refusing(&self, name: &str) -> (ClientBuilder, String) {
        let authority = format!("127.0.0.1:{}", self.dead_port);
        (self.client_builder(), (self.address)(&authority, name))
    }
}
