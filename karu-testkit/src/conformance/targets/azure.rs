//! The Azure provider: against Karu's Azure mock, Azurite, and a real endpoint.

use std::fmt;

use karu::ClientBuilder;

use super::{dead_port, isolated_builder, upload};
use crate::azure::{AzureMock, sharedkey};
use crate::azurite::Azurite;
use crate::conformance::{MockControl, Target};
use crate::http::MockServer;

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
