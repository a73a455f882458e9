//! The GCS provider: against Karu's GCS mock, and against fake-gcs-server or a real endpoint.

use std::fmt;

use karu::ClientBuilder;

use super::{dead_port, isolated_builder, upload};
use crate::conformance::{MockControl, Target};
use crate::fake_gcs::FakeGcs;
use crate::gcs::GcsMock;
use crate::http::MockServer;

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
