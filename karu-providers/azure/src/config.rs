//! The `[azure]` section, the connection string, and the `AZURE_STORAGE_*` environment names
//! they honour.

use std::fmt;

use karu_engine::sdk::{InvalidKey, Key, SectionConfig, SectionKeys, Snapshot, check_endpoint};
use serde::Deserialize;

use crate::request::require_endpoint;
use crate::shared_key::decode_key;
use crate::token::{self, TokenSource};

/// Options of the Azure provider, globally (`[azure]`) or for a prefix
/// (`[paths."az://container/prefix".azure]`). A key set here beats the environment.
///
/// | key | aliases | environment | meaning |
/// | --- | --- | --- | --- |
/// | `account` | `account_name`, `storage_account` | `AZURE_STORAGE_ACCOUNT_NAME`, `AZURE_STORAGE_ACCOUNT` | the storage account of `az://` addresses |
/// | `endpoint` | `blob_endpoint`, `endpoint_url` | | the blob service URL, for emulators and private endpoints (`http://127.0.0.1:10000/devstoreaccount1`) |
/// | `endpoint_suffix` | | | the cloud of `az://` addresses (default `core.windows.net`) |
/// | `connection_string` | | `AZURE_STORAGE_CONNECTION_STRING` | `AccountName`, `AccountKey`, `SharedAccessSignature`, `BlobEndpoint`, `EndpointSuffix`, `DefaultEndpointsProtocol`, `UseDevelopmentStorage` |
/// | `account_key` | `access_key`, `master_key` | `AZURE_STORAGE_ACCOUNT_KEY`, `AZURE_STORAGE_KEY` | Shared Key (base64) |
/// | `sas_token` | `sas_key`, `sas` | `AZURE_STORAGE_SAS_TOKEN` | a SAS query string |
/// | `bearer_token` | `token` | `AZURE_STORAGE_TOKEN` | an Entra ID access token |
/// | `anonymous` | `skip_signature` | `AZURE_SKIP_SIGNATURE` | no authentication (public containers) |
/// | `tenant_id` | `authority_id` | `AZURE_TENANT_ID` | Entra ID tenant of a service principal |
/// | `client_id` | | `AZURE_CLIENT_ID` | service principal, workload identity, or user-assigned managed identity |
/// | `client_secret` | | `AZURE_CLIENT_SECRET` | service principal secret |
/// | `client_certificate_path` | | `AZURE_CLIENT_CERTIFICATE_PATH` | service principal certificate: a PEM file with the certificate and its RSA key |
/// | `federated_token_file` | | `AZURE_FEDERATED_TOKEN_FILE` | workload identity's token file |
/// | `authority_host` | | `AZURE_AUTHORITY_HOST` | Entra ID authority (default `https://login.microsoftonline.com`) |
/// | `use_managed_identity` | `managed_identity` | `IDENTITY_ENDPOINT` + `IDENTITY_HEADER` (App Service) | managed identity (IMDS unless App Service's variables are set) |
/// | `msi_endpoint` | `imds_endpoint` | | the IMDS token endpoint (default `http://169.254.169.254/metadata/identity/oauth2/token`) |
///
/// Secrets never appear in `Debug`.
#[derive(Clone, Default, PartialEq, Eq, Deserialize, SectionKeys)]
#[serde(default, deny_unknown_fields)]
#[non_exhaustive]
pub struct AzureConfig {
    /// Storage account name.
    #[serde(alias = "account_name", alias = "storage_account")]
    #[karu(credential)]
    pub account: Option<String>,
    /// Blob service URL.
    #[serde(alias = "blob_endpoint", alias = "endpoint_url")]
    #[karu(credential)]
    pub endpoint: Option<String>,
    /// Host suffix of the cloud.
    pub endpoint_suffix: Option<String>,
    /// A storage connection string.
    #[karu(secret, credential)]
    pub connection_string: Option<String>,
    /// Shared Key account key (base64).
    #[serde(alias = "access_key", alias = "master_key")]
    #[karu(secret, credential)]
    pub account_key: Option<String>,
    /// SAS token (query string).
    #[serde(alias = "sas_key", alias = "sas")]
    #[karu(secret, credential)]
    pub sas_token: Option<String>,
    /// Bearer token.
    #[serde(alias = "token")]
    #[karu(secret, credential)]
    pub bearer_token: Option<String>,
    /// Unauthenticated requests.
    #[serde(alias = "skip_signature")]
    #[karu(credential)]
    pub anonymous: Option<bool>,
    /// Entra ID tenant.
    #[serde(alias = "authority_id")]
    #[karu(credential)]
    pub tenant_id: Option<String>,
    /// Client id.
    #[karu(credential)]
    pub client_id: Option<String>,
    /// Client secret.
    #[karu(secret, credential)]
    pub client_secret: Option<String>,
    /// Service principal certificate (PEM with the key).
    #[karu(credential)]
    pub client_certificate_path: Option<String>,
    /// Workload identity token file.
    #[karu(credential)]
    pub federated_token_file: Option<String>,
    /// Entra ID authority.
    #[karu(credential)]
    pub authority_host: Option<String>,
    /// Use a managed identity.
    #[serde(alias = "managed_identity")]
    #[karu(credential)]
    pub use_managed_identity: Option<bool>,
    /// IMDS token endpoint.
    #[serde(alias = "imds_endpoint")]
    #[karu(credential)]
    pub msi_endpoint: Option<String>,
}

impl SectionConfig for AzureConfig {
    /// The keys of the table above, with their aliases and environment variables.
    fn keys() -> Vec<Key> {
        Key::table(include_str!("config.rs"))
    }

    /// What serde cannot see: an endpoint that is not an http(s) URL, a key that is not
    /// base64, a connection string that does not parse.
    fn check(&self) -> Result<(), InvalidKey> {
        if let Some(endpoint) = &self.endpoint {
            check_endpoint(
                "endpoint",
                endpoint,
                "http://127.0.0.1:10000/devstoreaccount1",
            )?;
        }
        if let Some(key) = &self.account_key
            && decode_key(key).is_none()
        {
            return Err(InvalidKey::new("account_key", "a base64 account key"));
        }
        for (key, url, example) in [
            (
                "authority_host",
                &self.authority_host,
                "https://login.microsoftonline.com",
            ),
            (
                "msi_endpoint",
                &self.msi_endpoint,
                "http://169.254.169.254/metadata/identity/oauth2/token",
            ),
        ] {
            if let Some(url) = url {
                check_endpoint(key, url, example)?;
            }
        }
        if let Some(text) = &self.connection_string
            && let Err(why) = ConnectionString::parse(text)
        {
            return Err(InvalidKey::new("connection_string", why));
        }
        Ok(())
    }
}

/// Azurite's (and the storage emulator's) published development account.
pub(crate) const DEV_ACCOUNT: &str = "devstoreaccount1";
/// Its published key.
pub(crate) const DEV_KEY: &str =
    "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==";
/// Its blob endpoint.
const DEV_ENDPOINT: &str = "http://127.0.0.1:10000/devstoreaccount1";

/// A parsed storage connection string (`Key=Value;…`, keys case-insensitive).
#[derive(Clone, Default, PartialEq, Eq)]
pub(crate) struct ConnectionString {
    pub(crate) account: Option<String>,
    pub(crate) key: Option<String>,
    pub(crate) sas: Option<String>,
    pub(crate) endpoint: Option<String>,
    pub(crate) suffix: Option<String>,
}

impl ConnectionString {
    pub(crate) fn parse(text: &str) -> Result<ConnectionString, &'static str> {
        let mut c = ConnectionString::default();
        let mut protocol = None;
        let mut development = false;
        for part in text.split(';').map(str::trim).filter(|p| !p.is_empty()) {
            let (name, value) = part
                .split_once('=')
                .ok_or("Key=Value pairs separated by `;`")?;
            let value = value.trim().to_string();
            match name.trim().to_ascii_lowercase().as_str() {
                "accountname" => c.account = Some(value),
                "accountkey" => {
                    decode_key(&value).ok_or("an AccountKey in base64")?;
                    c.key = Some(value);
                }
                "sharedaccesssignature" => c.sas = Some(value),
                "blobendpoint" => {
                    require_endpoint(&value)
                        .map_err(|_| "a BlobEndpoint that is an http(s) URL a path can follow")?;
                    c.endpoint = Some(value);
                }
                "endpointsuffix" => c.suffix = Some(value),
                "defaultendpointsprotocol" => {
                    if !matches!(value.as_str(), "http" | "https") {
                        return Err("DefaultEndpointsProtocol http or https");
                    }
                    protocol = Some(value);
                }
                "usedevelopmentstorage" => development = value.eq_ignore_ascii_case("true"),
                // Other services' endpoints, and names this provider does not need.
                _ => {}
            }
        }
        if development {
            c.account.get_or_insert_with(|| DEV_ACCOUNT.to_string());
            if c.sas.is_none() {
                c.key.get_or_insert_with(|| DEV_KEY.to_string());
            }
            c.endpoint.get_or_insert_with(|| DEV_ENDPOINT.to_string());
        }
        if c.endpoint.is_none()
            && protocol.as_deref() == Some("http")
            && let Some(account) = &c.account
        {
            let suffix = c.suffix.as_deref().unwrap_or(crate::request::PUBLIC_CLOUD);
            c.endpoint = Some(format!("http://{account}.blob.{suffix}"));
        }
        if c.key.is_some() && c.account.is_none() {
            return Err("an AccountName with the AccountKey");
        }
        Ok(c)
    }
}

/// How requests of one object are authenticated, as the configuration chose.
#[derive(Clone, PartialEq, Eq)]
pub(crate) enum Auth {
    /// No credential configured: a lookup fails with `Credentials`.
    Missing,
    /// Unauthenticated (public containers).
    Anonymous,
    SharedKey {
        account: String,
        key: Vec<u8>,
    },
    Sas(String),
    Bearer(String),
    /// A token from Entra ID or a managed-identity endpoint.
    Token(TokenSource),
}

impl fmt::Debug for Auth {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Auth::Missing => f.write_str("Missing"),
            Auth::Anonymous => f.write_str("Anonymous"),
            Auth::SharedKey { account, .. } => write!(f, "SharedKey({account})"),
            Auth::Sas(_) => f.write_str("Sas(<redacted>)"),
            Auth::Bearer(_) => f.write_str("Bearer(<redacted>)"),
            Auth::Token(source) => write!(f, "Token({source:?})"),
        }
    }
}

/// The options of one object after layering the section over the connection string and the
/// environment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Effective {
    pub(crate) account: Option<String>,
    pub(crate) endpoint: Option<String>,
    pub(crate) suffix: Option<String>,
    pub(crate) auth: Auth,
}

impl Effective {
    /// Layer `config` over the captured environment of `snapshot`. Credentials, first found
    /// wins: `anonymous`; the section's `bearer_token`, `sas_token`, `account_key`,
    /// `connection_string`; then `AZURE_STORAGE_CONNECTION_STRING`,
    /// `AZURE_STORAGE_ACCOUNT_KEY` (or `AZURE_STORAGE_KEY`), `AZURE_STORAGE_SAS_TOKEN`,
    /// `AZURE_STORAGE_TOKEN`.
    pub(crate) fn resolve(config: &AzureConfig, snapshot: &Snapshot) -> Result<Effective, String> {
        let env = |name: &str| {
            snapshot
                .env(name)
                .filter(|v| !v.is_empty())
                .map(str::to_string)
        };
        let connection = match config
            .connection_string
            .clone()
            .or_else(|| env("AZURE_STORAGE_CONNECTION_STRING"))
        {
            Some(text) => ConnectionString::parse(&text)
                .map_err(|why| format!("the connection string needs {why}"))?,
            None => ConnectionString::default(),
        };
        let account = config
            .account
            .clone()
            .or_else(|| connection.account.clone())
            .or_else(|| env("AZURE_STORAGE_ACCOUNT_NAME"))
            .or_else(|| env("AZURE_STORAGE_ACCOUNT"));
        let endpoint = config
            .endpoint
            .clone()
            .or_else(|| connection.endpoint.clone());
        let suffix = config
            .endpoint_suffix
            .clone()
            .or_else(|| connection.suffix.clone());
        let shared_key = |key: &str| -> Result<Auth, String> {
            let account = account.clone().ok_or(
                "an account key needs an account name (azure.account or AZURE_STORAGE_ACCOUNT_NAME)",
            )?;
            let key = decode_key(key).ok_or("the account key is not base64")?;
            Ok(Auth::SharedKey { account, key })
        };
        let anonymous = config.anonymous.unwrap_or_else(|| {
            env("AZURE_SKIP_SIGNATURE").is_some_and(|v| v.eq_ignore_ascii_case("true") || v == "1")
        });
        let auth = if anonymous {
            Auth::Anonymous
        } else if let Some(token) = &config.bearer_token {
            Auth::Bearer(token.clone())
        } else if let Some(sas) = &config.sas_token {
            Auth::Sas(sas.clone())
        } else if let Some(key) = &config.account_key {
            shared_key(key)?
        } else if let Some(key) = &connection.key {
            shared_key(key)?
        } else if let Some(sas) = &connection.sas {
            Auth::Sas(sas.clone())
        } else if let Some(source) = token_source(config, &env)? {
            Auth::Token(source)
        } else if let Some(key) =
            env("AZURE_STORAGE_ACCOUNT_KEY").or_else(|| env("AZURE_STORAGE_KEY"))
        {
            shared_key(&key)?
        } else if let Some(sas) = env("AZURE_STORAGE_SAS_TOKEN") {
            Auth::Sas(sas)
        } else if let Some(token) = env("AZURE_STORAGE_TOKEN") {
            Auth::Bearer(token)
        } else {
            Auth::Missing
        };
        Ok(Effective {
            account,
            endpoint,
            suffix,
            auth,
        })
    }
}

/// A token source the section or the environment chose: a client secret, a client
/// certificate, then a federated token file (both with a tenant and a client id), then a managed identity (App Service when
/// `IDENTITY_ENDPOINT` and `IDENTITY_HEADER` are set, else IMDS) when asked for or when
/// `IDENTITY_ENDPOINT` is set.
fn token_source(
    config: &AzureConfig,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Option<TokenSource>, String> {
    let pick = |value: &Option<String>, name: &str| value.clone().or_else(|| env(name));
    let tenant = pick(&config.tenant_id, "AZURE_TENANT_ID");
    let client_id = pick(&config.client_id, "AZURE_CLIENT_ID");
    let authority = pick(&config.authority_host, "AZURE_AUTHORITY_HOST")
        .unwrap_or_else(|| token::AUTHORITY.to_string());
    let secret = pick(&config.client_secret, "AZURE_CLIENT_SECRET");
    let token_file = pick(&config.federated_token_file, "AZURE_FEDERATED_TOKEN_FILE");
    let cert_path = pick(
        &config.client_certificate_path,
        "AZURE_CLIENT_CERTIFICATE_PATH",
    );
    if secret.is_some() || token_file.is_some() || cert_path.is_some() {
        let (Some(tenant), Some(client_id)) = (tenant, client_id) else {
            return Err(
                "a service principal needs a tenant id and a client id (azure.tenant_id and \
                 azure.client_id, or AZURE_TENANT_ID and AZURE_CLIENT_ID)"
                    .to_string(),
            );
        };
        return Ok(Some(match (secret, cert_path, token_file) {
            (Some(secret), _, _) => TokenSource::ClientSecret {
                authority,
                tenant,
                client_id,
                secret,
            },
            (None, Some(cert_path), _) => TokenSource::Certificate {
                authority,
                tenant,
                client_id,
                cert_path,
            },
            (None, None, Some(token_file)) => TokenSource::Workload {
                authority,
                tenant,
                client_id,
                token_file,
            },
            (None, None, None) => unreachable!("one of them is set"),
        }));
    }
    let app_service = env("IDENTITY_ENDPOINT").zip(env("IDENTITY_HEADER"));
    if config.use_managed_identity == Some(false) {
        return Ok(None);
    }
    match app_service {
        Some((endpoint, header)) => Ok(Some(TokenSource::AppService {
            endpoint,
            header,
            client_id,
        })),
        None if config.use_managed_identity == Some(true) => Ok(Some(TokenSource::Imds {
            endpoint: config
                .msi_endpoint
                .clone()
                .unwrap_or_else(|| token::IMDS.to_string()),
            client_id,
        })),
        None => Ok(None),
    }
}

#[cfg(test)]
mod tests {
    use karu_engine::sdk::ConfigBuilder;

    use super::*;

    fn snapshot(env: &[(&str, &str)], sets: &[(&str, &str)]) -> Snapshot {
        let mut b = ConfigBuilder::new()
            .user_file(None)
            .project_file(None)
            .section(crate::config_section())
            .environment(env.iter().map(|(k, v)| (k.to_string(), v.to_string())));
        for (k, v) in sets {
            b = b.set(k, *v);
        }
        b.build().unwrap()
    }

    fn effective(s: &Snapshot) -> Result<Effective, String> {
        let c = s
            .section::<AzureConfig>("az://c01/k", "azure")
            .unwrap()
            .value;
        Effective::resolve(&c, s)
    }

    fn dev_key() -> Vec<u8> {
        decode_key(DEV_KEY).unwrap()
    }

    #[test]
    fn connection_strings() {
        let c = ConnectionString::parse(
            "DefaultEndpointsProtocol=https;AccountName=acct;AccountKey=Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==;EndpointSuffix=core.chinacloudapi.cn",
        )
        .unwrap();
        assert_eq!(c.account.as_deref(), Some("acct"));
        assert_eq!(
            c.key.as_deref(),
            Some(DEV_KEY),
            "a key keeps its `=` padding"
        );
        assert_eq!(c.suffix.as_deref(), Some("core.chinacloudapi.cn"));
        assert_eq!(c.endpoint, None);
        let dev = ConnectionString::parse("UseDevelopmentStorage=true").unwrap();
        assert_eq!(dev.account.as_deref(), Some(DEV_ACCOUNT));
        assert_eq!(dev.endpoint.as_deref(), Some(DEV_ENDPOINT));
        assert_eq!(dev.key.as_deref(), Some(DEV_KEY));
        let sas = ConnectionString::parse(
            "BlobEndpoint=http://127.0.0.1:9/acct;SharedAccessSignature=sv=2022-11-02&sig=x%2B",
        )
        .unwrap();
        assert_eq!(sas.sas.as_deref(), Some("sv=2022-11-02&sig=x%2B"));
        assert_eq!(sas.endpoint.as_deref(), Some("http://127.0.0.1:9/acct"));
        let http =
            ConnectionString::parse("DefaultEndpointsProtocol=http;AccountName=acct").unwrap();
        assert_eq!(
            http.endpoint.as_deref(),
            Some("http://acct.blob.core.windows.net")
        );
        for bad in [
            "AccountName",
            "AccountKey=abc!",
            "AccountKey=Zm9v",
            "BlobEndpoint=ftp://x",
            "DefaultEndpointsProtocol=ftp",
        ] {
            assert!(ConnectionString::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn the_first_configured_credential_wins() {
        let env = [
            ("AZURE_STORAGE_ACCOUNT_NAME", "envacct"),
            ("AZURE_STORAGE_ACCOUNT_KEY", DEV_KEY),
            ("AZURE_STORAGE_SAS_TOKEN", "sv=env"),
        ];
        let e = effective(&snapshot(&env, &[])).unwrap();
        assert_eq!(e.account.as_deref(), Some("envacct"));
        assert_eq!(
            e.auth,
            Auth::SharedKey {
                account: "envacct".into(),
                key: dev_key()
            }
        );
        let e = effective(&snapshot(&env, &[("azure.sas_token", "sv=cfg")])).unwrap();
        assert_eq!(e.auth, Auth::Sas("sv=cfg".into()));
        let e = effective(&snapshot(
            &env,
            &[("azure.sas", "sv=cfg"), ("azure.token", "tok")],
        ))
        .unwrap();
        assert_eq!(e.auth, Auth::Bearer("tok".into()));
        let e = effective(&snapshot(&env, &[("azure.skip_signature", "true")])).unwrap();
        assert_eq!(e.auth, Auth::Anonymous);
        let e = effective(&snapshot(&[("AZURE_STORAGE_SAS_TOKEN", "sv=env")], &[])).unwrap();
        assert_eq!(e.auth, Auth::Sas("sv=env".into()));
        let e = effective(&snapshot(&[], &[])).unwrap();
        assert_eq!(e.auth, Auth::Missing);
    }

    #[test]
    fn a_connection_string_names_account_endpoint_and_key() {
        let env = [(
            "AZURE_STORAGE_CONNECTION_STRING",
            "UseDevelopmentStorage=true",
        )];
        let e = effective(&snapshot(&env, &[])).unwrap();
        assert_eq!(e.account.as_deref(), Some(DEV_ACCOUNT));
        assert_eq!(e.endpoint.as_deref(), Some(DEV_ENDPOINT));
        assert_eq!(
            e.auth,
            Auth::SharedKey {
                account: DEV_ACCOUNT.into(),
                key: dev_key()
            }
        );
        // The section beats the environment's connection string, key by key.
        let e = effective(&snapshot(
            &env,
            &[
                ("azure.endpoint", "http://127.0.0.1:1/other"),
                ("azure.account", "other"),
            ],
        ))
        .unwrap();
        assert_eq!(e.endpoint.as_deref(), Some("http://127.0.0.1:1/other"));
        assert_eq!(
            e.auth,
            Auth::SharedKey {
                account: "other".into(),
                key: dev_key()
            }
        );
    }

    #[test]
    fn token_sources_are_chosen_by_section_and_environment() {
        let sp = [
            ("AZURE_TENANT_ID", "t"),
            ("AZURE_CLIENT_ID", "c"),
            ("AZURE_CLIENT_SECRET", "s"),
        ];
        let e = effective(&snapshot(&sp, &[])).unwrap();
        assert_eq!(
            e.auth,
            Auth::Token(TokenSource::ClientSecret {
                authority: token::AUTHORITY.into(),
                tenant: "t".into(),
                client_id: "c".into(),
                secret: "s".into()
            })
        );
        // A key in the section wins over a service principal of the environment.
        let e = effective(&snapshot(
            &sp,
            &[("azure.account", "a"), ("azure.account_key", DEV_KEY)],
        ))
        .unwrap();
        assert!(matches!(e.auth, Auth::SharedKey { .. }));
        let error = effective(&snapshot(&[("AZURE_CLIENT_SECRET", "s")], &[])).unwrap_err();
        assert!(error.contains("tenant id"), "{error}");
        let e = effective(&snapshot(
            &[("AZURE_FEDERATED_TOKEN_FILE", "/f")],
            &[("azure.tenant_id", "t"), ("azure.client_id", "c")],
        ))
        .unwrap();
        assert!(matches!(e.auth, Auth::Token(TokenSource::Workload { .. })));
        // Managed identity: App Service when its variables are set, IMDS only when asked.
        let app = [
            ("IDENTITY_ENDPOINT", "http://127.0.0.1:1/msi"),
            ("IDENTITY_HEADER", "h"),
        ];
        let e = effective(&snapshot(&app, &[])).unwrap();
        assert!(matches!(
            e.auth,
            Auth::Token(TokenSource::AppService { .. })
        ));
        let e = effective(&snapshot(&app, &[("azure.use_managed_identity", "false")])).unwrap();
        assert_eq!(e.auth, Auth::Missing);
        let e = effective(&snapshot(&[], &[("azure.managed_identity", "true")])).unwrap();
        assert_eq!(
            e.auth,
            Auth::Token(TokenSource::Imds {
                endpoint: token::IMDS.into(),
                client_id: None
            })
        );
        assert_eq!(effective(&snapshot(&[], &[])).unwrap().auth, Auth::Missing);
    }

    #[test]
    fn a_key_without_an_account_is_an_error() {
        let error = effective(&snapshot(&[], &[("azure.account_key", DEV_KEY)])).unwrap_err();
        assert!(error.contains("account name"), "{error}");
    }

    #[test]
    fn the_section_is_checked_when_the_snapshot_is_built() {
        let build = |key: &str, value: &str| {
            ConfigBuilder::new()
                .user_file(None)
                .project_file(None)
                .section(crate::config_section())
                .set(key, value)
                .build()
        };
        for (key, bad) in [
            ("azure.endpoint", "ftp://x"),
            ("azure.account_key", "not base64!"),
            ("azure.connection_string", "AccountKey=Zm9v"),
        ] {
            let error = build(key, bad).unwrap_err();
            assert_eq!(
                error.kind(),
                karu_engine::sdk::ConfigErrorKind::InvalidValue,
                "{key}"
            );
            if key != "azure.endpoint" {
                assert!(
                    !error.to_string().contains(bad),
                    "a secret is quoted: {error}"
                );
            }
        }
        let error = build("azure.acount", "x").unwrap_err();
        assert!(
            error.to_string().ends_with("did you mean \"account\"?"),
            "{error}"
        );
    }

    #[test]
    fn debug_hides_secrets() {
        let c = AzureConfig {
            account: Some("acct".into()),
            connection_string: Some("AccountKey=SECRET1".into()),
            account_key: Some("SECRET2".into()),
            sas_token: Some("sig=SECRET3".into()),
            bearer_token: Some("SECRET4".into()),
            ..AzureConfig::default()
        };
        let d = format!("{c:?}");
        assert!(d.contains("acct") && !d.contains("SECRET"), "{d}");
        let e = Effective {
            account: None,
            endpoint: None,
            suffix: None,
            auth: Auth::Sas("sig=SECRET".into()),
        };
        assert!(!format!("{e:?}").contains("SECRET"));
        let k = Auth::SharedKey {
            account: "a".into(),
            key: b"SECRET".to_vec(),
        };
        assert!(!format!("{k:?}").contains("83, 69"));
    }
}
