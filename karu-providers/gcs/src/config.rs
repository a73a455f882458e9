//! The `[gcs]` section, and the environment names Google's own clients read.

use std::fmt;

use karu_engine::sdk::{InvalidKey, Key, SectionConfig, SectionKeys, Snapshot, check_endpoint};
use serde::Deserialize;

use crate::request::{self, DEFAULT_ENDPOINT, HmacKey};

/// Which of GCS's APIs reads go through.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase", expecting = "\"xml\" or \"json\"")]
#[non_exhaustive]
pub enum Api {
    /// `GET ENDPOINT/bucket/name` (the default): the API HMAC keys sign for.
    Xml,
    /// `GET ENDPOINT/download/storage/v1/b/bucket/o/name?alt=media`: the JSON API's media
    /// download, which Google's own clients use with `STORAGE_EMULATOR_HOST`, and which
    /// emulators serve at any host name (fake-gcs-server serves XML paths only at its
    /// `-public-host`).
    Json,
}

/// Options of the GCS provider, globally (`[gcs]`) or for a prefix
/// (`[paths."gs://bucket/prefix".gcs]`). A key set here beats the environment variable.
///
/// | key | aliases | environment | meaning |
/// | --- | --- | --- | --- |
/// | `endpoint` | `endpoint_url` | `STORAGE_EMULATOR_HOST` | another endpoint (an emulator: `http://127.0.0.1:4443`, or a bare `host:port`) |
/// | `api` | | | `"xml"` or `"json"`: the API reads use (default `"json"` with `STORAGE_EMULATOR_HOST`, else `"xml"`) |
/// | `user_project` | `billing_project` | | the project billed for requester-pays buckets (`x-goog-user-project`) |
/// | `anonymous` | `skip_signature` | | unauthenticated requests (public buckets) |
/// | `token` | `access_token`, `bearer_token` | `GOOGLE_OAUTH_ACCESS_TOKEN` | a static OAuth 2 access token |
/// | `hmac_access_id` | `access_key_id` | | an HMAC key's access id (XML API V4 signing) |
/// | `hmac_secret` | `secret_access_key` | | the HMAC key's secret |
/// | `credentials_file` | `application_credentials`, `service_account_path` | `GOOGLE_APPLICATION_CREDENTIALS` | a service-account or authorized-user JSON file |
/// | `discovery` | | | `false` = no Application Default Credentials, no metadata server (default `true`) |
/// | `metadata_host` | | `GCE_METADATA_HOST` | the compute metadata server (default `metadata.google.internal`) |
///
/// With `STORAGE_EMULATOR_HOST` set (and no `endpoint`), reads go to the emulator through the
/// JSON API's media downloads, as Google's clients send them; with no credential configured
/// (no token, no HMAC key, no credentials file), unauthenticated. HMAC keys sign XML API
/// requests only. Secrets never appear in `Debug`.
#[derive(Clone, Default, PartialEq, Eq, Deserialize, SectionKeys)]
#[serde(default, deny_unknown_fields)]
#[non_exhaustive]
pub struct GcsConfig {
    /// Another endpoint.
    #[serde(alias = "endpoint_url")]
    #[karu(credential)]
    pub endpoint: Option<String>,
    /// The API reads use.
    pub api: Option<Api>,
    /// Project billed for requester-pays buckets.
    #[serde(alias = "billing_project")]
    pub user_project: Option<String>,
    /// Unauthenticated requests.
    #[serde(alias = "skip_signature")]
    #[karu(credential)]
    pub anonymous: Option<bool>,
    /// A static access token.
    #[serde(alias = "access_token", alias = "bearer_token")]
    #[karu(secret, credential)]
    pub token: Option<String>,
    /// HMAC access id.
    #[serde(alias = "access_key_id")]
    #[karu(credential)]
    pub hmac_access_id: Option<String>,
    /// HMAC secret.
    #[serde(alias = "secret_access_key")]
    #[karu(secret, credential)]
    pub hmac_secret: Option<String>,
    /// A service-account or authorized-user JSON file.
    #[serde(alias = "application_credentials", alias = "service_account_path")]
    #[karu(credential)]
    pub credentials_file: Option<String>,
    /// Whether to look beyond configured credentials.
    #[karu(credential)]
    pub discovery: Option<bool>,
    /// The compute metadata server, `host[:port]`.
    pub metadata_host: Option<String>,
}

impl SectionConfig for GcsConfig {
    /// The keys of the table above, with their aliases and environment variables.
    fn keys() -> Vec<Key> {
        Key::table(include_str!("config.rs"))
    }

    /// What serde cannot see: an endpoint that is not an http(s) URL, half an HMAC key.
    fn check(&self) -> Result<(), InvalidKey> {
        if let Some(endpoint) = &self.endpoint {
            let endpoint = request::with_scheme(endpoint);
            check_endpoint("endpoint", &endpoint, "http://127.0.0.1:4443")?;
        }
        InvalidKey::unless_together(
            (
                ("hmac_access_id", "an HMAC access id"),
                self.hmac_access_id.is_some(),
            ),
            (
                ("hmac_secret", "an HMAC secret"),
                self.hmac_secret.is_some(),
            ),
        )
    }
}

/// Where a credential comes from, in the contract's order (`karu-engine/README.md`).
#[derive(Clone, PartialEq, Eq)]
pub(crate) enum Configured {
    /// Unauthenticated requests.
    Anonymous,
    /// A static access token.
    Token(String),
    /// HMAC interoperability keys.
    Hmac(HmacKey),
    /// Application Default Credentials (a configured file, else the gcloud well-known file),
    /// then the metadata server.
    Discover {
        /// `credentials_file` or `GOOGLE_APPLICATION_CREDENTIALS`.
        file: Option<String>,
        /// `$CLOUDSDK_CONFIG/application_default_credentials.json`, else
        /// `$HOME/.config/gcloud/application_default_credentials.json`.
        well_known: Option<String>,
        /// `host[:port]` of the metadata server.
        metadata_host: String,
    },
    /// Nothing configured and discovery off.
    Nothing,
}

impl fmt::Debug for Configured {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Configured::Anonymous => f.write_str("Anonymous"),
            Configured::Token(_) => f.write_str("Token(<redacted>)"),
            Configured::Hmac(key) => write!(f, "Hmac({})", key.access_id),
            Configured::Discover {
                file,
                well_known,
                metadata_host,
            } => f
                .debug_struct("Discover")
                .field("file", file)
                .field("well_known", well_known)
                .field("metadata_host", metadata_host)
                .finish(),
            Configured::Nothing => f.write_str("Nothing"),
        }
    }
}

/// The options of one object after layering the section over the environment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Effective {
    /// Normalised, without a trailing `/`.
    pub(crate) endpoint: String,
    pub(crate) api: Api,
    pub(crate) user_project: Option<String>,
    pub(crate) credential: Configured,
}

impl Effective {
    /// Layer `config` over the environment captured in `snapshot`.
    pub(crate) fn resolve(config: &GcsConfig, snapshot: &Snapshot) -> Result<Effective, String> {
        let env = |name: &str| {
            snapshot
                .env(name)
                .filter(|v| !v.trim().is_empty())
                .map(str::to_string)
        };
        let emulator = env("STORAGE_EMULATOR_HOST");
        let endpoint = match config.endpoint.clone().or_else(|| emulator.clone()) {
            Some(e) => request::endpoint(&e).map_err(|e| e.to_string())?,
            None => DEFAULT_ENDPOINT.to_string(),
        };
        // An emulator is read as Google's clients read it: through the JSON API.
        let api = match config.api {
            Some(api) => api,
            None if config.endpoint.is_none() && emulator.is_some() => Api::Json,
            None => Api::Xml,
        };
        let token = config
            .token
            .clone()
            .or_else(|| env("GOOGLE_OAUTH_ACCESS_TOKEN"));
        let hmac = match (&config.hmac_access_id, &config.hmac_secret) {
            (Some(access_id), Some(secret)) => Some(HmacKey {
                access_id: access_id.clone(),
                secret: secret.clone(),
            }),
            (None, None) => None,
            _ => return Err("gcs.hmac_access_id and gcs.hmac_secret are set together".into()),
        };
        let file = config
            .credentials_file
            .clone()
            .or_else(|| env("GOOGLE_APPLICATION_CREDENTIALS"));
        let configured = token.is_some() || hmac.is_some() || file.is_some();
        let credential = if config.anonymous == Some(true)
            || (config.anonymous.is_none() && emulator.is_some() && !configured)
        {
            Configured::Anonymous
        } else if let Some(token) = token {
            Configured::Token(token)
        } else if let Some(key) = hmac {
            Configured::Hmac(key)
        } else if file.is_some() || config.discovery.unwrap_or(true) {
            let well_known = env("CLOUDSDK_CONFIG")
                .or_else(|| env("HOME").map(|home| format!("{home}/.config/gcloud")))
                .map(|dir| format!("{dir}/application_default_credentials.json"));
            Configured::Discover {
                file,
                well_known: if config.discovery == Some(false) {
                    None
                } else {
                    well_known
                },
                metadata_host: config
                    .metadata_host
                    .clone()
                    .or_else(|| env("GCE_METADATA_HOST"))
                    .unwrap_or_else(|| "metadata.google.internal".to_string()),
            }
        } else {
            Configured::Nothing
        };
        if api == Api::Json && matches!(credential, Configured::Hmac(_)) {
            return Err(
                "HMAC keys sign XML API requests only, and reads use the JSON API (gcs.api = \"json\", \
                 the default with STORAGE_EMULATOR_HOST): set gcs.api = \"xml\", or use a token"
                    .into(),
            );
        }
        Ok(Effective {
            endpoint,
            api,
            user_project: config.user_project.clone(),
            credential,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use karu_engine::sdk::ConfigBuilder;

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

    fn effective(env: &[(&str, &str)], sets: &[(&str, &str)]) -> Effective {
        let s = snapshot(env, sets);
        let c = s.section::<GcsConfig>("gs://b/k", "gcs").unwrap().value;
        Effective::resolve(&c, &s).unwrap()
    }

    #[test]
    fn defaults_discover_against_google() {
        let e = effective(&[("HOME", "/home/u")], &[]);
        assert_eq!(e.endpoint, "https://storage.googleapis.com");
        assert_eq!(
            e.credential,
            Configured::Discover {
                file: None,
                well_known: Some(
                    "/home/u/.config/gcloud/application_default_credentials.json".into()
                ),
                metadata_host: "metadata.google.internal".into(),
            }
        );
        let e = effective(
            &[
                ("CLOUDSDK_CONFIG", "/cfg"),
                ("GOOGLE_APPLICATION_CREDENTIALS", "/sa.json"),
                ("GCE_METADATA_HOST", "127.0.0.1:9"),
            ],
            &[],
        );
        assert_eq!(
            e.credential,
            Configured::Discover {
                file: Some("/sa.json".into()),
                well_known: Some("/cfg/application_default_credentials.json".into()),
                metadata_host: "127.0.0.1:9".into(),
            }
        );
    }

    #[test]
    fn the_specification_order_static_token_then_hmac_then_adc() {
        let hmac = [("gcs.hmac_access_id", "GOOG1"), ("gcs.hmac_secret", "s")];
        let e = effective(&[("GOOGLE_APPLICATION_CREDENTIALS", "/sa.json")], &hmac);
        assert_eq!(
            e.credential,
            Configured::Hmac(HmacKey {
                access_id: "GOOG1".into(),
                secret: "s".into()
            })
        );
        let e = effective(&[("GOOGLE_OAUTH_ACCESS_TOKEN", "env-token")], &hmac);
        assert_eq!(e.credential, Configured::Token("env-token".into()));
        let e = effective(
            &[("GOOGLE_OAUTH_ACCESS_TOKEN", "env-token")],
            &[("gcs.token", "cfg-token")],
        );
        assert_eq!(e.credential, Configured::Token("cfg-token".into()));
        let e = effective(&[], &[("gcs.discovery", "false")]);
        assert_eq!(e.credential, Configured::Nothing);
        let e = effective(&[], &[("gcs.anonymous", "true"), ("gcs.token", "t")]);
        assert_eq!(e.credential, Configured::Anonymous);
    }

    #[test]
    fn the_emulator_host_goes_unauthenticated_unless_a_credential_is_configured() {
        let emulator = [("STORAGE_EMULATOR_HOST", "localhost:4443")];
        let e = effective(&emulator, &[]);
        assert_eq!(e.endpoint, "http://localhost:4443");
        assert_eq!(e.credential, Configured::Anonymous);
        assert_eq!(e.api, Api::Json);
        let e = effective(&emulator, &[("gcs.token", "t")]);
        assert_eq!(e.credential, Configured::Token("t".into()));
        let e = effective(&emulator, &[("gcs.anonymous", "false")]);
        assert!(matches!(e.credential, Configured::Discover { .. }));
        let e = effective(&emulator, &[("gcs.endpoint", "https://gcs.example/")]);
        assert_eq!(e.endpoint, "https://gcs.example");
        assert_eq!(e.api, Api::Xml);
        let e = effective(&[], &[("gcs.user_project", "payer")]);
        assert_eq!(e.user_project.as_deref(), Some("payer"));
    }

    #[test]
    fn the_api_is_xml_unless_chosen_or_read_from_an_emulator_host() {
        assert_eq!(effective(&[], &[]).api, Api::Xml);
        let endpoint = [("gcs.endpoint", "http://127.0.0.1:4443")];
        assert_eq!(effective(&[], &endpoint).api, Api::Xml);
        let json = [
            ("gcs.endpoint", "http://127.0.0.1:4443"),
            ("gcs.api", "json"),
        ];
        assert_eq!(effective(&[], &json).api, Api::Json);
        let emulator = [("STORAGE_EMULATOR_HOST", "127.0.0.1:4443")];
        assert_eq!(effective(&emulator, &[("gcs.api", "xml")]).api, Api::Xml);
        // HMAC keys sign the XML API only: with the JSON API they are refused, not sent.
        let hmac = [("gcs.hmac_access_id", "GOOG1"), ("gcs.hmac_secret", "s")];
        let s = snapshot(&emulator, &hmac);
        let c = s.section::<GcsConfig>("gs://b/k", "gcs").unwrap().value;
        assert!(Effective::resolve(&c, &s).is_err());
        let xml = [hmac[0], hmac[1], ("gcs.api", "xml")];
        assert!(matches!(
            effective(&emulator, &xml).credential,
            Configured::Hmac(_)
        ));
    }

    #[test]
    fn the_api_names_its_two_words_whatever_is_found() {
        for (value, found) in [("\"grpc\"", "string \"grpc\""), ("1", "integer 1")] {
            let error = ConfigBuilder::new()
                .user_file(None)
                .project_file(None)
                .environment(std::iter::empty::<(String, String)>())
                .toml("test", format!("[gcs]\napi = {value}\n"))
                .section(crate::config_section())
                .build()
                .unwrap_err();
            let expected = format!("expected \"xml\" or \"json\", found {found}");
            assert!(error.to_string().ends_with(&expected), "{error}");
        }
    }

    #[test]
    fn checks_and_debug() {
        let c = GcsConfig {
            hmac_access_id: Some("GOOG1".into()),
            ..GcsConfig::default()
        };
        assert_eq!(c.check().unwrap_err().key(), "hmac_secret");
        let c = GcsConfig {
            endpoint: Some("ftp://x".into()),
            ..GcsConfig::default()
        };
        assert_eq!(c.check().unwrap_err().key(), "endpoint");
        let c = GcsConfig {
            token: Some("TOKEN".into()),
            hmac_access_id: Some("GOOG1".into()),
            hmac_secret: Some("SECRET".into()),
            ..GcsConfig::default()
        };
        let d = format!("{c:?}");
        assert!(
            d.contains("GOOG1") && !d.contains("SECRET") && !d.contains("TOKEN"),
            "{d}"
        );
        let d = format!("{:?}", Configured::Token("TOKEN".into()));
        assert!(!d.contains("TOKEN"), "{d}");
    }
}
