//! Targets for Karu's own providers: the HTTP mock, nginx, the S3 mock, and any real
//! S3-compatible endpoint (SeaweedFS in the test run, or AWS).

use std::fmt;
use std::net::TcpListener;
use std::path::{Path, PathBuf};

use karu::{Client, ClientBuilder};

use super::{KnownLimit, MockControl, Target};
use crate::azure::{AzureMock, sharedkey};
use crate::azurite::Azurite;
use crate::fake_gcs::FakeGcs;
use crate::gcs::GcsMock;
use crate::hf::{HfMock, RepoAccess};
use crate::http::{MockServer, url_path};
use crate::nginx::Nginx;
use crate::s3::{S3Mock, object_path};
use crate::source::SourceMock;

/// A builder that reads no machine configuration and no process environment.
pub(crate) fn isolated_builder() -> ClientBuilder {
    Client::builder()
        .user_config_file(None)
        .project_config_file(None)
        .environment(Vec::<(String, String)>::new())
}

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

/// The plain HTTP provider against Karu's HTTP mock server.
pub struct HttpMockTarget {
    server: MockServer,
    dead_port: u16,
    /// The client settings the server needs (its CA, HTTP/2).
    transport: Vec<(&'static str, String)>,
}

impl HttpMockTarget {
    /// Start a mock server on 127.0.0.1.
    pub fn start() -> Self {
        HttpMockTarget {
            server: MockServer::start(),
            dead_port: dead_port(),
            transport: Vec::new(),
        }
    }

    /// Start a mock server on 127.0.0.1 that speaks HTTPS (its own CA, which the target's
    /// clients trust) and HTTP/2 only, which the target's clients use: many reads share few
    /// connections, so a fault that cuts or resets a connection ends every stream on it.
    pub fn start_https_http2() -> std::io::Result<Self> {
        let server = MockServer::builder().tls(true).http2(true).start()?;
        let ca = server
            .ca_file()
            .ok_or_else(|| std::io::Error::other("an HTTPS mock server has a CA file"))?;
        let transport = vec![
            ("http.ca_file", ca.to_string_lossy().into_owned()),
            ("http.version", "http2".to_string()),
        ];
        Ok(HttpMockTarget {
            server,
            dead_port: dead_port(),
            transport,
        })
    }

    fn builder_with_transport(&self) -> ClientBuilder {
        let mut builder = isolated_builder();
        for (key, value) in &self.transport {
            builder = builder.set(key, value.as_str());
        }
        builder
    }
}

impl fmt::Debug for HttpMockTarget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HttpMockTarget")
            .field("server", &self.server.base_url())
            .finish()
    }
}

impl Target for HttpMockTarget {
    fn name(&self) -> String {
        if self.transport.is_empty() {
            "http-mock".into()
        } else {
            "http-mock-https-http2".into()
        }
    }

    fn builder(&self) -> ClientBuilder {
        self.builder_with_transport()
    }

    fn address(&self, name: &str) -> String {
        self.server.url(&url_path(name))
    }

    fn put(&self, name: &str, bytes: &[u8]) -> Result<(), String> {
        self.server.insert(&url_path(name), bytes.to_vec());
        Ok(())
    }

    fn mock(&self) -> Option<&dyn MockControl> {
        Some(self)
    }
}

impl MockControl for HttpMockTarget {
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
        let scheme = if self.transport.is_empty() {
            "http"
        } else {
            "https"
        };
        (
            self.builder_with_transport(),
            format!("{scheme}://127.0.0.1:{}{}", self.dead_port, url_path(name)),
        )
    }
}

/// The plain HTTP provider against a real nginx serving a temporary directory.
pub struct NginxTarget {
    nginx: Nginx,
    root: tempfile::TempDir,
}

impl NginxTarget {
    /// Start nginx on 127.0.0.1 over a new temporary directory.
    pub fn start() -> std::io::Result<Self> {
        let root = tempfile::tempdir()?;
        let nginx = Nginx::start(root.path())?;
        Ok(NginxTarget { nginx, root })
    }

    /// Start nginx on 127.0.0.1 over a new temporary directory, serving HTTPS; the clients
    /// trust its CA and speak only HTTP/2 (`http.version = "http2"`).
    pub fn start_https_http2() -> std::io::Result<Self> {
        let root = tempfile::tempdir()?;
        let nginx = Nginx::start_https(root.path())?;
        Ok(NginxTarget { nginx, root })
    }

    /// The running nginx (its access log is the evidence of which ranges were requested).
    pub fn nginx(&self) -> &Nginx {
        &self.nginx
    }
}

impl fmt::Debug for NginxTarget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("NginxTarget")
            .field("url", &self.nginx.base_url())
            .finish()
    }
}

impl Target for NginxTarget {
    fn name(&self) -> String {
        match self.nginx.ca_file() {
            Some(_) => "nginx-https-http2".into(),
            None => "nginx".into(),
        }
    }

    fn builder(&self) -> ClientBuilder {
        match self.nginx.ca_file() {
            Some(ca) => isolated_builder()
                .set("http.ca_file", ca.to_string_lossy().into_owned())
                .set("http.version", "http2"),
            None => isolated_builder(),
        }
    }

    fn address(&self, name: &str) -> String {
        self.nginx.url(&url_path(name))
    }

    fn put(&self, name: &str, bytes: &[u8]) -> Result<(), String> {
        write_under(self.root.path(), name, bytes)
    }
}

/// The local provider on files in a temporary directory. Two cases expect what a file does
/// not do, its known limits: `merged` (the specification: local reads are never coalesced) and
/// `if_match` (a file has no versions, so `stat` gives no ETag to require).
pub struct LocalTarget {
    root: tempfile::TempDir,
}

impl LocalTarget {
    /// A new, empty temporary directory.
    pub fn start() -> std::io::Result<Self> {
        Ok(LocalTarget {
            root: tempfile::tempdir()?,
        })
    }
}

impl fmt::Debug for LocalTarget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LocalTarget")
            .field("root", &self.root.path())
            .finish()
    }
}

impl Target for LocalTarget {
    fn name(&self) -> String {
        "local".into()
    }

    fn builder(&self) -> ClientBuilder {
        isolated_builder()
    }

    fn address(&self, name: &str) -> String {
        self.root.path().join(name).to_string_lossy().into_owned()
    }

    fn put(&self, name: &str, bytes: &[u8]) -> Result<(), String> {
        write_under(self.root.path(), name, bytes)
    }

    fn known_limits(&self) -> Vec<KnownLimit> {
        vec![
            KnownLimit {
                case: "basic/merged",
                why: "local reads are never coalesced (the specification): each goes straight \
                      to its destination",
                failure: "expected the three neighbours to merge into one transfer, planned 3",
            },
            KnownLimit {
                case: "basic/if_match",
                why: "a local file has no versions, so no ETag to require",
                failure: "the target sends no strong ETag",
            },
        ]
    }
}

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

/// The bucket the GCS targets use.
const GCS_BUCKET: &str = "karu-conformance";

/// The access token the GCS mock target authenticates with.
const GCS_TOKEN: &str = "ya29.karu-conformance";

/// The GCS provider against Karu's GCS mock (every request's bearer token checked), through
/// the XML API ([`start`](GcsMockTarget::start): `gcs.endpoint`) or the JSON API's media
/// downloads ([`start_emulator`](GcsMockTarget::start_emulator): `STORAGE_EMULATOR_HOST`).
pub struct GcsMockTarget {
    mock: GcsMock,
    dead_port: u16,
    emulator: bool,
}

impl GcsMockTarget {
    /// Start a GCS mock with the conformance bucket and a token for it; the client reaches it
    /// as `gcs.endpoint` (the XML API).
    pub fn start() -> Self {
        let mock = GcsMock::start();
        mock.create_bucket(GCS_BUCKET);
        mock.add_token(GCS_TOKEN, "conformance");
        GcsMockTarget {
            mock,
            dead_port: dead_port(),
            emulator: false,
        }
    }

    /// [`start`](GcsMockTarget::start), but the client reaches the mock as an emulator, through
    /// `STORAGE_EMULATOR_HOST` (the JSON API's media downloads), still with the token.
    pub fn start_emulator() -> Self {
        GcsMockTarget {
            emulator: true,
            ..Self::start()
        }
    }

    /// The mock (identities, rejections, stored-gzip objects).
    pub fn mock_gcs(&self) -> &GcsMock {
        &self.mock
    }

    fn builder_for(&self, endpoint: &str) -> ClientBuilder {
        let builder = if self.emulator {
            isolated_builder().environment([("STORAGE_EMULATOR_HOST", endpoint)])
        } else {
            isolated_builder().set("gcs.endpoint", endpoint)
        };
        builder.set("gcs.token", GCS_TOKEN)
    }
}

impl fmt::Debug for GcsMockTarget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GcsMockTarget")
            .field("endpoint", &self.mock.endpoint())
            .field("emulator", &self.emulator)
            .finish()
    }
}

impl Target for GcsMockTarget {
    fn name(&self) -> String {
        if self.emulator {
            "gcs-mock-json".into()
        } else {
            "gcs-mock".into()
        }
    }

    fn builder(&self) -> ClientBuilder {
        self.builder_for(&self.mock.endpoint())
    }

    fn address(&self, name: &str) -> String {
        format!("gs://{GCS_BUCKET}/{name}")
    }

    fn put(&self, name: &str, bytes: &[u8]) -> Result<(), String> {
        self.mock.insert(GCS_BUCKET, name, bytes.to_vec());
        Ok(())
    }

    fn mock(&self) -> Option<&dyn MockControl> {
        Some(self)
    }
}

impl MockControl for GcsMockTarget {
    fn server(&self) -> &MockServer {
        self.mock.server()
    }

    fn path_of(&self, name: &str) -> String {
        if self.emulator {
            crate::gcs::media_path(GCS_BUCKET, name)
        } else {
            crate::gcs::object_path(GCS_BUCKET, name)
        }
    }

    fn put_virtual(&self, name: &str, size: u64) {
        self.mock.insert_virtual(GCS_BUCKET, name, size);
    }

    fn set_etag(&self, name: &str, etag: Option<&str>) {
        self.mock.set_etag(GCS_BUCKET, name, etag);
    }

    fn refusing(&self, name: &str) -> (ClientBuilder, String) {
        (
            self.builder_for(&format!("http://127.0.0.1:{}", self.dead_port)),
            self.address(name),
        )
    }
}

/// Where a [`GcsTarget`]'s objects are uploaded.
enum GcsStore {
    /// A fake-gcs-server started here (no authentication).
    Fake(FakeGcs),
    /// A real GCS bucket: JSON API uploads with a bearer token.
    Remote { upload_base: String, token: String },
}

/// The GCS provider against a real GCS-compatible endpoint: fake-gcs-server started here, or
/// a real bucket with an access token. Objects go under a unique prefix.
pub struct GcsTarget {
    name: String,
    endpoint: String,
    /// Reached through `STORAGE_EMULATOR_HOST` (the JSON API), not `gcs.endpoint`.
    emulator: bool,
    token: Option<String>,
    bucket: String,
    prefix: String,
    store: GcsStore,
}

impl GcsTarget {
    /// fake-gcs-server on 127.0.0.1 with the conformance bucket, started as its documentation
    /// shows (no `-public-host`) and reached as Google's clients reach it, through
    /// `STORAGE_EMULATOR_HOST` (the JSON API's media downloads); read unauthenticated.
    pub fn fake_gcs_server() -> Result<Self, String> {
        let server = FakeGcs::start().map_err(|e| format!("cannot start fake-gcs-server: {e}"))?;
        Self::started(server, "fake-gcs-server", true)
    }

    /// fake-gcs-server with `-public-host` set to its own address, which makes it serve XML
    /// API paths (`/bucket/object`) too, reached as `gcs.endpoint` (the XML API).
    pub fn fake_gcs_server_xml() -> Result<Self, String> {
        let server = FakeGcs::start_with_public_host()
            .map_err(|e| format!("cannot start fake-gcs-server: {e}"))?;
        Self::started(server, "fake-gcs-server-xml", false)
    }

    fn started(server: FakeGcs, name: &str, emulator: bool) -> Result<Self, String> {
        server
            .create_bucket(GCS_BUCKET)
            .map_err(|e| e.to_string())?;
        Ok(GcsTarget {
            name: name.into(),
            endpoint: server.endpoint(),
            emulator,
            token: None,
            bucket: GCS_BUCKET.into(),
            prefix: format!("karu-conformance-{}", std::process::id()),
            store: GcsStore::Fake(server),
        })
    }

    /// A real bucket behind `endpoint` (`https://storage.googleapis.com`), read and written
    /// with `token`.
    pub fn remote(
        endpoint: impl Into<String>,
        token: impl Into<String>,
        bucket: impl Into<String>,
    ) -> Self {
        let endpoint = endpoint.into().trim_end_matches('/').to_string();
        let token = token.into();
        GcsTarget {
            name: "gcs-endpoint".into(),
            endpoint: endpoint.clone(),
            emulator: false,
            token: Some(token.clone()),
            bucket: bucket.into(),
            prefix: format!("karu-conformance-{}", std::process::id()),
            store: GcsStore::Remote {
                upload_base: endpoint,
                token,
            },
        }
    }

    /// The fake-gcs-server, when this target runs one.
    pub fn fake(&self) -> Option<&FakeGcs> {
        match &self.store {
            GcsStore::Fake(server) => Some(server),
            GcsStore::Remote { .. } => None,
        }
    }
}

impl fmt::Debug for GcsTarget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GcsTarget")
            .field("name", &self.name)
            .field("endpoint", &self.endpoint)
            .field("bucket", &self.bucket)
            .finish_non_exhaustive()
    }
}

impl Target for GcsTarget {
    fn name(&self) -> String {
        self.name.clone()
    }

    fn builder(&self) -> ClientBuilder {
        let builder = if self.emulator {
            isolated_builder().environment([("STORAGE_EMULATOR_HOST", self.endpoint.clone())])
        } else {
            isolated_builder().set("gcs.endpoint", self.endpoint.clone())
        };
        match &self.token {
            Some(token) => builder.set("gcs.token", token.clone()),
            None => builder.set("gcs.anonymous", true),
        }
    }

    fn address(&self, name: &str) -> String {
        format!("gs://{}/{}/{name}", self.bucket, self.prefix)
    }

    fn put(&self, name: &str, bytes: &[u8]) -> Result<(), String> {
        let object = format!("{}/{name}", self.prefix);
        match &self.store {
            GcsStore::Fake(server) => server
                .upload(&self.bucket, &object, bytes)
                .map_err(|e| e.to_string()),
            GcsStore::Remote { upload_base, token } => {
                let url = format!(
                    "{upload_base}/upload/storage/v1/b/{}/o?uploadType=media&name={}",
                    self.bucket,
                    percent_encoding::utf8_percent_encode(
                        &object,
                        percent_encoding::NON_ALPHANUMERIC
                    )
                );
                let status = upload::post_bearer(&url, token, bytes)?;
                if status < 300 {
                    Ok(())
                } else {
                    Err(format!("uploading {name} answered {status}"))
                }
            }
        }
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

/// Signed `PUT`s for populating a real endpoint (the conformance suite's only writes), and
/// the plain client the read-only suite takes its references with.
pub(crate) mod upload {
    use std::time::SystemTime;

    use aws_credential_types::Credentials;
    use aws_sigv4::http_request::{
        PayloadChecksumKind, PercentEncodingMode, SignableBody, SignableRequest, SigningSettings,
        UriPathNormalizationMode, sign,
    };
    use aws_sigv4::sign::v4;
    use aws_smithy_runtime_api::client::identity::Identity;
    use bytes::Bytes;
    use http_body_util::{BodyExt, Full};
    use hyper_util::client::legacy::Client;
    use hyper_util::rt::TokioExecutor;

    pub(crate) struct Signer<'a> {
        pub(crate) access_key_id: &'a str,
        pub(crate) secret_access_key: &'a str,
        pub(crate) region: &'a str,
    }

    /// PUT `body` at `url`, signed; returns the status.
    pub(super) fn put(url: &str, body: &[u8], signer: &Signer<'_>) -> Result<u16, String> {
        send(signed("PUT", url, body, signer)?)
    }

    /// A `method` request for `url` with `body`, signed with SigV4 for S3.
    pub(crate) fn signed(
        method: &str,
        url: &str,
        body: &[u8],
        signer: &Signer<'_>,
    ) -> Result<http::Request<Full<Bytes>>, String> {
        let credentials = Credentials::new(
            signer.access_key_id,
            signer.secret_access_key,
            None,
            None,
            "karu-conformance",
        );
        let identity: Identity = credentials.into();
        let mut settings = SigningSettings::default();
        settings.payload_checksum_kind = PayloadChecksumKind::XAmzSha256;
        settings.percent_encoding_mode = PercentEncodingMode::Single;
        settings.uri_path_normalization_mode = UriPathNormalizationMode::Disabled;
        let params = v4::SigningParams::builder()
            .identity(&identity)
            .region(signer.region)
            .name("s3")
            .time(SystemTime::now())
            .settings(settings)
            .build()
            .map_err(|e| e.to_string())?
            .into();
        let length = body.len().to_string();
        let signable = SignableRequest::new(
            method,
            url,
            [("content-length", length.as_str())].into_iter(),
            SignableBody::Bytes(body),
        )
        .map_err(|e| e.to_string())?;
        let (instructions, _) = sign(signable, &params)
            .map_err(|e| e.to_string())?
            .into_parts();
        let mut request = http::Request::builder()
            .method(method)
            .uri(url)
            .header("content-length", length)
            .body(Full::new(Bytes::copy_from_slice(body)))
            .map_err(|e| e.to_string())?;
        instructions.apply_to_request_http1x(&mut request);
        Ok(request)
    }

    /// `POST` `body` to `url` with a bearer token (GCS's JSON API upload); returns the status.
    pub(super) fn post_bearer(url: &str, token: &str, body: &[u8]) -> Result<u16, String> {
        let request = http::Request::builder()
            .method("POST")
            .uri(url)
            .header("authorization", format!("Bearer {token}"))
            .header("content-type", "application/octet-stream")
            .header("content-length", body.len().to_string())
            .body(Full::new(Bytes::copy_from_slice(body)))
            .map_err(|e| e.to_string())?;
        send(request)
    }

    /// Send `request` over HTTP(S) (rustls, the platform's roots); returns the status.
    fn send(request: http::Request<Full<Bytes>>) -> Result<u16, String> {
        exchange(request).map(|(status, _)| status)
    }

    /// Send `request` over HTTP(S) (rustls, the platform's roots); returns the status and
    /// the first 4 KiB of the body, as text.
    pub(super) fn exchange(request: http::Request<Full<Bytes>>) -> Result<(u16, String), String> {
        let (status, _, body) = fetch(request)?;
        let text = String::from_utf8_lossy(&body[..body.len().min(4096)]).into_owned();
        Ok((status, text))
    }

    /// Send `request` over HTTP(S) (rustls, the platform's roots), following no redirect;
    /// returns the status, the headers and the whole body.
    pub(crate) fn fetch(
        request: http::Request<Full<Bytes>>,
    ) -> Result<(u16, http::HeaderMap, Bytes), String> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| e.to_string())?;
        runtime.block_on(async move {
            let mut tls = rustls::ClientConfig::builder_with_provider(std::sync::Arc::new(
                rustls::crypto::aws_lc_rs::default_provider(),
            ))
            .with_safe_default_protocol_versions()
            .map_err(|e| e.to_string())?
            .with_root_certificates({
                let mut roots = rustls::RootCertStore::empty();
                for cert in rustls_native_certs::load_native_certs().certs {
                    let _ = roots.add(cert);
                }
                roots
            })
            .with_no_client_auth();
            tls.alpn_protocols = vec![b"http/1.1".to_vec()];
            let mut http = hyper_util::client::legacy::connect::HttpConnector::new();
            http.enforce_http(false);
            let connector = hyper_rustls::HttpsConnector::from((http, tls));
            let client: Client<_, Full<Bytes>> =
                Client::builder(TokioExecutor::new()).build(connector);
            let response = client.request(request).await.map_err(|e| e.to_string())?;
            let status = response.status().as_u16();
            let headers = response.headers().clone();
            let body = response
                .into_body()
                .collect()
                .await
                .map_err(|e| format!("the body of a {status} answer broke off: {e}"))?
                .to_bytes();
            Ok((status, headers, body))
        })
    }
}

/// The Azure provider against the testkit's [`AzureMock`] (Shared Key checked on every
/// request), through `az://` addresses and `azure.endpoint`.
pub struct AzureMockTarget {
    mock: AzureMock,
    dead_port: u16,
}

/// The container the Azure targets read from.
const AZURE_CONTAINER: &str = "conformance";

impl AzureMockTarget {
    /// Start an Azure mock on 127.0.0.1 for Azurite's development account.
    pub fn start() -> Self {
        let mock = AzureMock::start();
        mock.create_container(AZURE_CONTAINER);
        AzureMockTarget {
            mock,
            dead_port: dead_port(),
        }
    }

    /// The mock (its authentication log, tokens, SAS).
    pub fn mock_azure(&self) -> &AzureMock {
        &self.mock
    }

    fn builder_for(&self, endpoint: &str) -> ClientBuilder {
        isolated_builder()
            .set("azure.endpoint", endpoint)
            .set("azure.account", self.mock.account())
            .set("azure.account_key", self.mock.account_key())
    }
}

impl fmt::Debug for AzureMockTarget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AzureMockTarget")
            .field("endpoint", &self.mock.endpoint())
            .finish()
    }
}

impl Target for AzureMockTarget {
    fn name(&self) -> String {
        "azure-mock".into()
    }

    fn builder(&self) -> ClientBuilder {
        self.builder_for(&self.mock.endpoint())
    }

    fn address(&self, name: &str) -> String {
        format!("az://{AZURE_CONTAINER}/{name}")
    }

    fn put(&self, name: &str, bytes: &[u8]) -> Result<(), String> {
        self.mock.insert(AZURE_CONTAINER, name, bytes.to_vec());
        Ok(())
    }

    fn mock(&self) -> Option<&dyn MockControl> {
        Some(self)
    }
}

impl MockControl for AzureMockTarget {
    fn server(&self) -> &MockServer {
        self.mock.server()
    }

    fn path_of(&self, name: &str) -> String {
        self.mock.path(AZURE_CONTAINER, name)
    }

    fn put_virtual(&self, name: &str, size: u64) {
        self.mock.insert_virtual(AZURE_CONTAINER, name, size);
    }

    fn set_etag(&self, name: &str, etag: Option<&str>) {
        self.mock.set_etag(AZURE_CONTAINER, name, etag);
    }

    fn refusing(&self, name: &str) -> (ClientBuilder, String) {
        let endpoint = format!(
            "http://127.0.0.1:{}/{}",
            self.dead_port,
            self.mock.account()
        );
        (self.builder_for(&endpoint), self.address(name))
    }
}

/// The Azure provider against a real Azurite (Shared Key with the development account, or a
/// SAS), through `az://` addresses and `azure.endpoint`.
pub struct AzuriteTarget {
    azurite: Azurite,
    sas: Option<String>,
}

impl AzuriteTarget {
    /// Start Azurite on 127.0.0.1 and create the container; with `sas`, the client
    /// authenticates with an account SAS instead of Shared Key.
    pub fn start(sas: bool) -> std::io::Result<Self> {
        let azurite = Azurite::start()?;
        azurite.create_container(AZURE_CONTAINER)?;
        let sas = sas.then(|| azurite.account_sas(std::time::Duration::from_secs(3600)));
        Ok(AzuriteTarget { azurite, sas })
    }

    /// The running Azurite.
    pub fn azurite(&self) -> &Azurite {
        &self.azurite
    }
}

impl fmt::Debug for AzuriteTarget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AzuriteTarget")
            .field("azurite", &self.azurite)
            .field("sas", &self.sas.is_some())
            .finish()
    }
}

impl Target for AzuriteTarget {
    fn name(&self) -> String {
        match self.sas {
            Some(_) => "azurite-sas".into(),
            None => "azurite".into(),
        }
    }

    fn builder(&self) -> ClientBuilder {
        let builder = isolated_builder()
            .set("azure.endpoint", self.azurite.endpoint())
            .set("azure.account", self.azurite.account());
        match &self.sas {
            Some(sas) => builder.set("azure.sas_token", sas.as_str()),
            None => builder.set("azure.account_key", self.azurite.account_key()),
        }
    }

    fn address(&self, name: &str) -> String {
        format!("az://{AZURE_CONTAINER}/{name}")
    }

    fn put(&self, name: &str, bytes: &[u8]) -> Result<(), String> {
        self.azurite
            .put(AZURE_CONTAINER, name, bytes)
            .map_err(|e| e.to_string())
    }
}

/// How an [`AzureEndpointTarget`] authenticates, to the provider and to its own uploads.
#[derive(Clone)]
pub enum AzureAuth {
    /// Shared Key: the account and its key (base64).
    SharedKey {
        /// The account name.
        account: String,
        /// The account key, base64.
        key: String,
    },
    /// A SAS token (the query string, without `?`): reads need `r`; the uploads `c`/`w` and
    /// their deletion `d`.
    Sas(String),
}

impl fmt::Debug for AzureAuth {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AzureAuth::SharedKey { account, .. } => f
                .debug_struct("SharedKey")
                .field("account", account)
                .finish_non_exhaustive(),
            AzureAuth::Sas(_) => f.write_str("Sas(..)"),
        }
    }
}

/// The Azure provider against a real Blob endpoint (`https://ACCOUNT.blob.core.windows.net`,
/// or Azurite's `http://127.0.0.1:10000/devstoreaccount1`), what `cargo xtask conformance
/// --provider azure --endpoint URL` runs. Fixtures are uploaded with Put Blob under a unique
/// prefix of `container`, signed with the testkit's own Shared Key signer or carrying the SAS,
/// over HTTP or HTTPS, and deleted by [`cleanup`](AzureEndpointTarget::cleanup) (or when the
/// target is dropped).
pub struct AzureEndpointTarget {
    endpoint: String,
    auth: AzureAuth,
    container: String,
    prefix: String,
    /// Blob names uploaded and not yet deleted.
    uploaded: parking_lot::Mutex<Vec<String>>,
}

impl AzureEndpointTarget {
    /// A target for `container` behind `endpoint`.
    ///
    /// # Errors
    /// An endpoint that is not an `http(s)` URL with a host, and no query.
    pub fn new(endpoint: &str, auth: AzureAuth, container: &str) -> Result<Self, String> {
        let url = url::Url::parse(endpoint).map_err(|e| format!("--endpoint {endpoint}: {e}"))?;
        if !matches!(url.scheme(), "http" | "https") || url.host_str().is_none() {
            return Err(format!(
                "--endpoint {endpoint}: not an http(s) URL with a host"
            ));
        }
        if url.query().is_some() {
            return Err(format!(
                "--endpoint {endpoint}: the endpoint has no query (give a SAS with --sas)"
            ));
        }
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default()
            .as_nanos();
        Ok(AzureEndpointTarget {
            endpoint: endpoint.trim_end_matches('/').to_string(),
            auth,
            container: container.to_string(),
            prefix: format!("karu-conformance-{}-{nanos}", std::process::id()),
            uploaded: parking_lot::Mutex::default(),
        })
    }

    /// The prefix the fixtures are uploaded under.
    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    /// Creates the container if it is missing. A SAS that may not create containers is fine
    /// when the container exists (the first upload says if it does not).
    ///
    /// # Errors
    /// The endpoint cannot be reached, or refuses the creation otherwise.
    pub fn ensure_container(&self) -> Result<(), String> {
        let (status, body) = self.send("PUT", "", Some("restype=container"), &[], &[])?;
        match (status, &self.auth) {
            (201 | 409, _) | (403, AzureAuth::Sas(_)) => Ok(()),
            _ => Err(format!(
                "creating container {} answered {status}: {}",
                self.container,
                crate::azure::error_summary(&body)
            )),
        }
    }

    /// Deletes every fixture uploaded so far; returns how many.
    ///
    /// # Errors
    /// The first deletion that failed (the others are still tried).
    pub fn cleanup(&self) -> Result<usize, String> {
        let names = std::mem::take(&mut *self.uploaded.lock());
        let mut first_error = None;
        let mut deleted = 0;
        for name in names {
            match self.send("DELETE", &name, None, &[], &[]) {
                Ok((202 | 404, _)) => deleted += 1,
                Ok((status, body)) => {
                    first_error.get_or_insert(format!(
                        "deleting {name} answered {status}: {}",
                        crate::azure::error_summary(&body)
                    ));
                }
                Err(e) => {
                    first_error.get_or_insert(format!("deleting {name}: {e}"));
                }
            }
        }
        first_error.map_or(Ok(deleted), Err)
    }

    /// One request to `container[/blob]`, authenticated as the target is.
    fn send(
        &self,
        method: &str,
        blob: &str,
        query: Option<&str>,
        extra: &[(&str, &str)],
        body: &[u8],
    ) -> Result<(u16, String), String> {
        let url = url::Url::parse(&self.endpoint).map_err(|e| e.to_string())?;
        let mut path = format!("{}/{}", url.path().trim_end_matches('/'), self.container);
        if !blob.is_empty() {
            path.push('/');
            path.push_str(&crate::azure::encode_blob(blob));
        }
        let mut query: Vec<String> = query.map(str::to_string).into_iter().collect();
        let mut headers: Vec<(String, String)> = vec![
            (
                "x-ms-date".into(),
                httpdate::fmt_http_date(std::time::SystemTime::now()),
            ),
            ("x-ms-version".into(), crate::azure::SAS_VERSION.into()),
            ("content-length".into(), body.len().to_string()),
        ];
        headers.extend(extra.iter().map(|(n, v)| (n.to_string(), v.to_string())));
        match &self.auth {
            AzureAuth::SharedKey { account, key } => {
                use base64::Engine;
                let key = base64::engine::general_purpose::STANDARD
                    .decode(key)
                    .map_err(|_| "the account key is not base64".to_string())?;
                let head = crate::http::RequestHead {
                    method: method.into(),
                    path: path.clone(),
                    query: (!query.is_empty()).then(|| query.join("&")),
                    headers: headers.clone(),
                    body: Default::default(),
                };
                let signature = sharedkey::sign(&key, &sharedkey::string_to_sign(&head, account));
                headers.push((
                    "authorization".into(),
                    format!("SharedKey {account}:{signature}"),
                ));
            }
            AzureAuth::Sas(sas) => query.push(sas.trim_start_matches('?').to_string()),
        }
        let origin = &self.endpoint[..self.endpoint.len() - url.path().trim_end_matches('/').len()];
        let mut target = format!("{origin}{path}");
        if !query.is_empty() {
            target.push('?');
            target.push_str(&query.join("&"));
        }
        let mut request = http::Request::builder().method(method).uri(&target);
        for (name, value) in &headers {
            request = request.header(name.as_str(), value.as_str());
        }
        let request = request
            .body(http_body_util::Full::new(bytes::Bytes::copy_from_slice(
                body,
            )))
            .map_err(|e| e.to_string())?;
        upload::exchange(request)
    }
}

impl Drop for AzureEndpointTarget {
    fn drop(&mut self) {
        if let Err(e) = self.cleanup() {
            eprintln!(
                "azure-endpoint: fixtures under {} left behind: {e}",
                self.prefix
            );
        }
    }
}

impl fmt::Debug for AzureEndpointTarget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AzureEndpointTarget")
            .field("endpoint", &self.endpoint)
            .field("auth", &self.auth)
            .field("container", &self.container)
            .field("prefix", &self.prefix)
            .finish_non_exhaustive()
    }
}

impl Target for AzureEndpointTarget {
    fn name(&self) -> String {
        "azure-endpoint".into()
    }

    fn builder(&self) -> ClientBuilder {
        let builder = isolated_builder().set("azure.endpoint", self.endpoint.clone());
        match &self.auth {
            AzureAuth::SharedKey { account, key } => builder
                .set("azure.account", account.clone())
                .set("azure.account_key", key.clone()),
            AzureAuth::Sas(sas) => builder.set("azure.sas_token", sas.clone()),
        }
    }

    fn address(&self, name: &str) -> String {
        format!("az://{}/{}/{name}", self.container, self.prefix)
    }

    fn put(&self, name: &str, bytes: &[u8]) -> Result<(), String> {
        let blob = format!("{}/{name}", self.prefix);
        let (status, body) = self.send(
            "PUT",
            &blob,
            None,
            &[("x-ms-blob-type", "BlockBlob")],
            bytes,
        )?;
        if status == 201 {
            self.uploaded.lock().push(blob);
            Ok(())
        } else {
            Err(format!(
                "uploading {name} answered {status}: {}",
                crate::azure::error_summary(&body)
            ))
        }
    }
}
