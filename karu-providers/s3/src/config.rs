//! The `[s3]` section, and the `AWS_*` environment names it honours.

use std::fmt;

use karu_engine::sdk::{
    Discovered, InvalidKey, Key, SectionConfig, SectionKeys, Snapshot, check_endpoint,
    endpoint_problem,
};
use serde::Deserialize;

/// How bucket and key map to a URL.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase", expecting = "\"virtual\" or \"path\"")]
#[non_exhaustive]
pub enum Addressing {
    /// `https://bucket.host/key` (AWS default; buckets with dots fall back to path style).
    Virtual,
    /// `https://host/bucket/key` (default with a custom endpoint).
    Path,
}

/// Options of the S3 provider, globally (`[s3]`) or for a prefix
/// (`[paths."s3://bucket/prefix".s3]`). A key set here beats the `AWS_*` variable.
///
/// | key | aliases | environment | meaning |
/// | --- | --- | --- | --- |
/// | `region` | `aws_region` | `AWS_REGION`, `AWS_DEFAULT_REGION` | region to sign for (default `us-east-1`, corrected once by a wrong-region answer) |
/// | `endpoint` | `endpoint_url`, `aws_endpoint_url` | `AWS_ENDPOINT_URL_S3`, `AWS_ENDPOINT_URL` | an S3-compatible endpoint, e.g. `http://127.0.0.1:9000` |
/// | `addressing` | | | `"virtual"` or `"path"` |
/// | `force_path_style` | `aws_force_path_style` | | `true` = `addressing = "path"` |
/// | `anonymous` | `skip_signature`, `no_sign_request` | `AWS_SKIP_SIGNATURE` | unsigned requests (public buckets) |
/// | `requester_pays` | `request_payer` | `AWS_REQUEST_PAYER` (`requester`) | send `x-amz-request-payer: requester` |
/// | `access_key_id` | `aws_access_key_id` | | explicit key (before discovery) |
/// | `secret_access_key` | `aws_secret_access_key` | | explicit secret |
/// | `session_token` | `aws_session_token`, `token` | | explicit session token |
/// | `profile` | `aws_profile` | `AWS_PROFILE` | profile of the config and credentials files |
/// | `credential_process` | | | a command printing credentials (JSON) |
/// | `discovery` | | | `false` = only explicit keys (default `true`) |
///
/// Secrets never appear in `Debug`.
#[derive(Clone, Default, PartialEq, Eq, Deserialize, SectionKeys)]
#[serde(default, deny_unknown_fields)]
#[non_exhaustive]
pub struct S3Config {
    /// Region to sign for.
    #[serde(alias = "aws_region")]
    pub region: Option<String>,
    /// S3-compatible endpoint.
    #[serde(alias = "endpoint_url", alias = "aws_endpoint_url")]
    pub endpoint: Option<String>,
    /// Addressing style.
    pub addressing: Option<Addressing>,
    /// Path-style addressing.
    #[serde(alias = "aws_force_path_style")]
    pub force_path_style: Option<bool>,
    /// Unsigned requests.
    #[serde(alias = "skip_signature", alias = "no_sign_request")]
    #[karu(credential)]
    pub anonymous: Option<bool>,
    /// Requester pays.
    #[serde(alias = "request_payer")]
    pub requester_pays: Option<bool>,
    /// Explicit access key id.
    #[serde(alias = "aws_access_key_id")]
    #[karu(credential)]
    pub access_key_id: Option<String>,
    /// Explicit secret access key.
    #[serde(alias = "aws_secret_access_key")]
    #[karu(secret, credential)]
    pub secret_access_key: Option<String>,
    /// Explicit session token.
    #[serde(alias = "aws_session_token", alias = "token")]
    #[karu(secret, credential)]
    pub session_token: Option<String>,
    /// Profile name.
    #[serde(alias = "aws_profile")]
    #[karu(credential)]
    pub profile: Option<String>,
    /// `credential_process` command.
    #[karu(secret, credential)]
    pub credential_process: Option<String>,
    /// Whether to discover credentials beyond explicit keys.
    #[karu(credential)]
    pub discovery: Option<bool>,
}

impl SectionConfig for S3Config {
    /// The keys of the table above, with their aliases and environment variables.
    fn keys() -> Vec<Key> {
        Key::table(include_str!("config.rs"))
    }

    /// What serde cannot see: an endpoint that is not an http(s) URL, half a key pair.
    fn check(&self) -> Result<(), InvalidKey> {
        if let Some(endpoint) = &self.endpoint {
            check_endpoint("endpoint", endpoint, "http://127.0.0.1:9000")?;
        }
        InvalidKey::unless_together(
            (
                ("access_key_id", "an access key id"),
                self.access_key_id.is_some(),
            ),
            (
                ("secret_access_key", "a secret key"),
                self.secret_access_key.is_some(),
            ),
        )
    }

    /// The region of the AWS profile in effect (`s3.profile`, `AWS_PROFILE` or `default`), as
    /// the credential chain will find it, when neither `s3.region` nor `AWS_REGION` /
    /// `AWS_DEFAULT_REGION` names one: `karu config` then shows where the region comes from.
    fn discovered(&self, env: &dyn Fn(&str) -> Option<String>) -> Vec<Discovered> {
        if self.region.is_some()
            || env("AWS_REGION").is_some()
            || env("AWS_DEFAULT_REGION").is_some()
        {
            return Vec::new();
        }
        let profile = self
            .profile
            .clone()
            .or_else(|| env("AWS_PROFILE"))
            .unwrap_or_else(|| "default".to_owned());
        profile_region(&profile, env)
            .map(|region| Discovered {
                key: "region",
                value: format!("{region:?}"),
                source: format!("profile {profile:?} of the AWS config files"),
            })
            .into_iter()
            .collect()
    }
}

/// The options of one object after layering the section over the `AWS_*` environment.
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct Effective {
    pub(crate) region: Option<String>,
    pub(crate) endpoint: Option<String>,
    pub(crate) addressing: Option<Addressing>,
    pub(crate) anonymous: bool,
    pub(crate) requester_pays: bool,
    pub(crate) explicit_keys: Option<(String, String, Option<String>)>,
    pub(crate) profile: Option<String>,
    pub(crate) credential_process: Option<String>,
    pub(crate) discovery: bool,
}

impl fmt::Debug for Effective {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Effective")
            .field("region", &self.region)
            .field("endpoint", &self.endpoint)
            .field("addressing", &self.addressing)
            .field("anonymous", &self.anonymous)
            .field("requester_pays", &self.requester_pays)
            .field("explicit_keys", &self.explicit_keys.as_ref().map(|k| &k.0))
            .field("profile", &self.profile)
            .field("credential_process", &self.credential_process.is_some())
            .field("discovery", &self.discovery)
            .finish()
    }
}

impl Effective {
    /// Layer `config` over the captured environment of `snapshot`.
    pub(crate) fn resolve(config: &S3Config, snapshot: &Snapshot) -> Result<Effective, String> {
        let env = |name: &str| snapshot.env(name).filter(|v| !v.is_empty());
        let truthy = |name: &str| env(name).map(|v| v.eq_ignore_ascii_case("true") || v == "1");
        let addressing = match (config.addressing, config.force_path_style) {
            (Some(a), _) => Some(a),
            (None, Some(true)) => Some(Addressing::Path),
            (None, Some(false)) => Some(Addressing::Virtual),
            (None, None) => None,
        };
        let explicit_keys = match (&config.access_key_id, &config.secret_access_key) {
            (Some(id), Some(secret)) => {
                Some((id.clone(), secret.clone(), config.session_token.clone()))
            }
            (None, None) => None,
            _ => {
                return Err(
                    "s3.access_key_id and s3.secret_access_key must be set together".to_string(),
                );
            }
        };
        let endpoint = config
            .endpoint
            .clone()
            .or_else(|| env("AWS_ENDPOINT_URL_S3").map(str::to_string))
            .or_else(|| env("AWS_ENDPOINT_URL").map(str::to_string));
        // The section's check saw `endpoint`; the environment's are checked here, before any
        // credential lookup reads them (aws-config traces the variables it reads).
        if let Some(why) = endpoint.as_deref().and_then(endpoint_problem) {
            return Err(format!(
                "the S3 endpoint {why} (s3.endpoint, AWS_ENDPOINT_URL_S3 or AWS_ENDPOINT_URL)"
            ));
        }
        Ok(Effective {
            region: config
                .region
                .clone()
                .or_else(|| env("AWS_REGION").map(str::to_string))
                .or_else(|| env("AWS_DEFAULT_REGION").map(str::to_string)),
            endpoint,
            addressing,
            anonymous: config
                .anonymous
                .or_else(|| truthy("AWS_SKIP_SIGNATURE"))
                .unwrap_or(false),
            requester_pays: config.requester_pays.unwrap_or_else(|| {
                env("AWS_REQUEST_PAYER").is_some_and(|v| v.eq_ignore_ascii_case("requester"))
            }),
            explicit_keys,
            profile: config
                .profile
                .clone()
                .or_else(|| env("AWS_PROFILE").map(str::to_string)),
            credential_process: config.credential_process.clone(),
            discovery: config.discovery.unwrap_or(true),
        })
    }
}

/// The `region` of `profile` in the AWS config files (`AWS_CONFIG_FILE`, else
/// `~/.aws/config`, with the credentials file), read with aws-config's own parser and the
/// captured environment, as the credential chain reads them. `None` when a file names
/// something other than a regular file (a FIFO would block the reader).
fn profile_region(profile: &str, env: &dyn Fn(&str) -> Option<String>) -> Option<String> {
    use std::future::Future;
    use std::task::{Context, Poll, Waker};
    let home = env("HOME").map(std::path::PathBuf::from);
    let files = [
        ("AWS_CONFIG_FILE", "config"),
        ("AWS_SHARED_CREDENTIALS_FILE", "credentials"),
    ];
    for (variable, name) in files {
        let path = env(variable)
            .map(std::path::PathBuf::from)
            .or_else(|| home.as_ref().map(|home| home.join(".aws").join(name)));
        if path
            .and_then(|p| std::fs::metadata(p).ok())
            .is_some_and(|m| !m.is_file())
        {
            return None;
        }
    }
    let vars: std::collections::HashMap<String, String> =
        ["HOME", "AWS_CONFIG_FILE", "AWS_SHARED_CREDENTIALS_FILE"]
            .into_iter()
            .filter_map(|name| Some((name.to_owned(), env(name)?)))
            .collect();
    let env = aws_types::os_shim_internal::Env::from(vars);
    let fs = aws_types::os_shim_internal::Fs::real();
    // The default files (the two above).
    let files = Default::default();
    let load = aws_config::profile::load(&fs, &env, &files, Some(profile.to_owned().into()));
    // aws-config reads the files with blocking calls: the future is ready when first polled.
    let mut load = std::pin::pin!(load);
    let Poll::Ready(Ok(profiles)) = load.as_mut().poll(&mut Context::from_waker(Waker::noop()))
    else {
        return None;
    };
    profiles
        .get_profile(profile)
        .and_then(|p| p.get("region"))
        .filter(|region| !region.is_empty())
        .map(str::to_owned)
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

    fn effective(s: &Snapshot) -> Effective {
        let c = s.section::<S3Config>("s3://b/k", "s3").unwrap().value;
        Effective::resolve(&c, s).unwrap()
    }

    #[test]
    fn configuration_beats_the_aws_environment() {
        let env = [
            ("AWS_REGION", "eu-west-1"),
            ("AWS_ENDPOINT_URL", "http://env:9000"),
            ("AWS_PROFILE", "envprofile"),
        ];
        let e = effective(&snapshot(&env, &[]));
        assert_eq!(e.region.as_deref(), Some("eu-west-1"));
        assert_eq!(e.endpoint.as_deref(), Some("http://env:9000"));
        assert_eq!(e.profile.as_deref(), Some("envprofile"));
        let e = effective(&snapshot(
            &env,
            &[
                ("s3.region", "us-west-2"),
                ("s3.endpoint_url", "http://cfg:9000"),
            ],
        ));
        assert_eq!(e.region.as_deref(), Some("us-west-2"));
        assert_eq!(e.endpoint.as_deref(), Some("http://cfg:9000"));
    }

    #[test]
    fn aliases_and_environment_names() {
        let e = effective(&snapshot(
            &[
                ("AWS_ENDPOINT_URL_S3", "http://s3only:1"),
                ("AWS_ENDPOINT_URL", "http://all:1"),
            ],
            &[
                ("s3.skip_signature", "true"),
                ("s3.aws_force_path_style", "true"),
            ],
        ));
        assert_eq!(e.endpoint.as_deref(), Some("http://s3only:1"));
        assert!(e.anonymous);
        assert_eq!(e.addressing, Some(Addressing::Path));
        let e = effective(&snapshot(&[("AWS_REQUEST_PAYER", "requester")], &[]));
        assert!(e.requester_pays);
    }

    /// `karu config` names where the region in effect comes from: a key, a variable, or the
    /// AWS profile the credential chain will read (`s3.profile`, `AWS_PROFILE`, `default`).
    #[test]
    fn the_profiles_region_is_explained_where_nothing_else_sets_one() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("config");
        std::fs::write(
            &file,
            "[default]\nregion = ap-south-1\n\n[profile dev]\nregion = eu-north-1\n",
        )
        .unwrap();
        let file = file.to_str().unwrap();
        let region = |env: &[(&str, &str)], sets: &[(&str, &str)]| {
            let explained = snapshot(env, sets).explain("s3://b/k").unwrap();
            explained
                .values
                .into_iter()
                .filter(|v| v.key == "s3.region")
                .map(|v| (v.value, v.origin.to_string()))
                .collect::<Vec<_>>()
        };
        let from_profile = |value: &str, profile: &str| {
            vec![(
                format!("\"{value}\""),
                format!("profile \"{profile}\" of the AWS config files"),
            )]
        };
        assert_eq!(
            region(&[("AWS_CONFIG_FILE", file)], &[]),
            from_profile("ap-south-1", "default")
        );
        assert_eq!(
            region(&[("AWS_CONFIG_FILE", file), ("AWS_PROFILE", "dev")], &[]),
            from_profile("eu-north-1", "dev")
        );
        assert_eq!(
            region(&[("AWS_CONFIG_FILE", file)], &[("s3.profile", "dev")]),
            from_profile("eu-north-1", "dev")
        );
        // A variable or a key wins, and is what is shown.
        let env = region(
            &[("AWS_CONFIG_FILE", file), ("AWS_REGION", "us-west-2")],
            &[],
        );
        assert_eq!(
            env,
            vec![(
                "\"us-west-2\"".to_owned(),
                "environment variable AWS_REGION".to_owned()
            )]
        );
        let set = region(&[("AWS_CONFIG_FILE", file)], &[("s3.region", "us-east-2")]);
        assert_eq!(set.len(), 1);
        assert_eq!(set[0].0, "\"us-east-2\"");
        // No such profile, or no file: nothing is invented.
        assert!(region(&[("AWS_CONFIG_FILE", file), ("AWS_PROFILE", "nope")], &[]).is_empty());
        let missing = dir.path().join("missing");
        assert!(region(&[("AWS_CONFIG_FILE", missing.to_str().unwrap())], &[]).is_empty());
    }

    #[test]
    fn half_a_key_pair_is_an_error() {
        let c = S3Config {
            access_key_id: Some("AKID".into()),
            ..S3Config::default()
        };
        let s = snapshot(&[], &[]);
        assert!(Effective::resolve(&c, &s).unwrap_err().contains("together"));
        assert_eq!(c.check().unwrap_err().key(), "secret_access_key");
        let c = S3Config {
            secret_access_key: Some("SECRET".into()),
            ..S3Config::default()
        };
        assert_eq!(c.check().unwrap_err().key(), "access_key_id");
    }

    #[test]
    fn endpoints_must_be_http_urls() {
        let with = |endpoint: &str| S3Config {
            endpoint: Some(endpoint.into()),
            ..S3Config::default()
        };
        assert_eq!(with("http://127.0.0.1:9000").check(), Ok(()));
        assert_eq!(with("https://s3.example").check(), Ok(()));
        for bad in [
            "not a url",
            "ftp://x",
            "127.0.0.1:9000",
            "http://",
            "http://k:s@127.0.0.1:9000",
            "http://127.0.0.1:9000/?x=1",
        ] {
            assert_eq!(with(bad).check().unwrap_err().key(), "endpoint", "{bad}");
        }
    }

    #[test]
    fn the_section_is_checked_when_the_snapshot_is_built() {
        let error = ConfigBuilder::new()
            .user_file(None)
            .project_file(None)
            .environment([("KARU_S3__REGIONN", "x")])
            .section(crate::config_section())
            .build()
            .unwrap_err();
        assert_eq!(error.kind(), karu_engine::sdk::ConfigErrorKind::UnknownKey);
        assert!(
            error.to_string().ends_with("did you mean \"region\"?"),
            "{error}"
        );
    }

    #[test]
    fn addressing_names_its_two_words_whatever_is_found() {
        for (value, found) in [("\"both\"", "string \"both\""), ("1", "integer 1")] {
            let error = ConfigBuilder::new()
                .user_file(None)
                .project_file(None)
                .environment(std::iter::empty::<(String, String)>())
                .toml("test", format!("[s3]\naddressing = {value}\n"))
                .section(crate::config_section())
                .build()
                .unwrap_err();
            let expected = format!("expected \"virtual\" or \"path\", found {found}");
            assert!(error.to_string().ends_with(&expected), "{error}");
        }
    }

    #[test]
    fn debug_hides_secrets() {
        let c = S3Config {
            access_key_id: Some("AKID".into()),
            secret_access_key: Some("SECRET".into()),
            session_token: Some("TOKEN".into()),
            ..S3Config::default()
        };
        let d = format!("{c:?}");
        assert!(
            d.contains("AKID") && !d.contains("SECRET") && !d.contains("TOKEN"),
            "{d}"
        );
    }
}
