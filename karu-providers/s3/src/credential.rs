//! Credential discovery for S3, and the scope a credential may be reused in.
//!
//! Order: explicit keys from the configuration; an explicit `credential_process`; then, when
//! discovery is enabled, aws-config's default chain run on the environment Karu captured when
//! the client was built (never the live process environment): environment keys, profiles
//! (config and credentials files, including their `credential_process`), web identity,
//! container credentials, instance metadata.
//!
//! Lookups run on Karu's credential workers (they may block); aws-config's asynchronous
//! providers run on one small runtime owned by the backend.

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, SystemTime};

use aws_config::BehaviorVersion;
use aws_config::credential_process::CredentialProcessProvider;
use aws_credential_types::Credentials;
use aws_credential_types::provider::{ProvideCredentials, SharedCredentialsProvider};
use aws_types::os_shim_internal::Env;
use aws_types::region::Region;
use karu_engine::{Credential, CredentialProvider, Error, Status};
use parking_lot::Mutex;

use crate::config::Effective;

/// The secret the engine carries for S3 requests.
#[derive(Clone)]
pub(crate) struct S3Secret {
    pub(crate) credentials: Credentials,
    /// The region discovery found (a profile's `region`), if any.
    pub(crate) region: Option<String>,
}

impl fmt::Debug for S3Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("S3Secret")
            .field("access_key_id", &self.credentials.access_key_id())
            .field("region", &self.region)
            .finish_non_exhaustive()
    }
}

/// A [`Credential`] for S3 requests from key material the application already holds, for a
/// [`CredentialCallback`](karu_engine::CredentialCallback) registered for the
/// [`FAMILY`](crate::FAMILY) `"aws"` (a vendor SDK, a secret manager). Requests are signed
/// with it exactly as with discovered credentials; `session_token` is sent as
/// `x-amz-security-token`, and `expires` is when Karu stops reusing it (it refreshes in the
/// final tenth of the lifetime). Its `Debug` shows neither the secret nor the token.
///
/// ```
/// use std::time::{Duration, SystemTime};
/// use karu_engine::CallbackCredential;
///
/// let expires = SystemTime::now() + Duration::from_secs(3600);
/// let credential = karu_provider_s3::credential(
///     "ASIAEXAMPLE",
///     "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
///     Some("session-token".to_string()),
///     Some(expires),
/// );
/// assert_eq!(credential.expires(), Some(expires));
/// assert!(!format!("{credential:?}").contains("EXAMPLEKEY"));
/// // What a callback returns for every object of one bucket:
/// let answer = CallbackCredential::for_prefix(credential, "s3://bucket");
/// # let _ = answer;
/// ```
pub fn credential(
    access_key_id: impl Into<String>,
    secret_access_key: impl Into<String>,
    session_token: Option<String>,
    expires: Option<SystemTime>,
) -> Credential {
    let credentials = Credentials::new(
        access_key_id,
        secret_access_key,
        session_token,
        expires,
        "karu-callback",
    );
    Credential::new(S3Secret {
        credentials,
        region: None,
    })
    .with_expiry(expires)
}

/// The runtime aws-config's providers run on, created on the first lookup.
#[derive(Default)]
pub(crate) struct Runtime(OnceLock<Result<tokio::runtime::Runtime, String>>);

impl Runtime {
    fn get(&self) -> Result<&tokio::runtime::Runtime, Error> {
        self.0
            .get_or_init(|| {
                tokio::runtime::Builder::new_multi_thread()
                    .worker_threads(1)
                    .thread_name("karu-aws-credentials")
                    .enable_all()
                    .build()
                    .map_err(|e| e.to_string())
            })
            .as_ref()
            .map_err(|e| {
                Error::new(
                    Status::Io,
                    format!("cannot start the credential runtime: {e}"),
                )
            })
    }
}

impl fmt::Debug for Runtime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Runtime").finish_non_exhaustive()
    }
}

/// The longest a lookup may take (metadata services and STS answer in far less).
const LOOKUP_TIMEOUT: Duration = Duration::from_secs(60);

/// Discovers credentials for one scope. Reused for every lookup of that scope, so the chain
/// is built once.
pub(crate) struct Discovery {
    options: Effective,
    env: HashMap<String, String>,
    runtime: Arc<Runtime>,
    chain: Mutex<Option<(SharedCredentialsProvider, Option<String>)>>,
}

impl Discovery {
    pub(crate) fn new(
        options: Effective,
        env: HashMap<String, String>,
        runtime: Arc<Runtime>,
    ) -> Self {
        Discovery {
            options,
            env,
            runtime,
            chain: Mutex::new(None),
        }
    }

    fn provide(
        &self,
        provider: &SharedCredentialsProvider,
        region: Option<String>,
    ) -> Result<Credential, Error> {
        let runtime = self.runtime.get()?;
        let result = runtime.block_on(async {
            tokio::time::timeout(LOOKUP_TIMEOUT, provider.provide_credentials()).await
        });
        let credentials = match result {
            Ok(Ok(credentials)) => credentials,
            Ok(Err(e)) => {
                return Err(Error::new(
                    Status::Credentials,
                    format!("no AWS credentials found: {}", describe(&e)),
                ));
            }
            Err(_) => {
                return Err(Error::new(
                    Status::Credentials,
                    format!("AWS credential lookup took longer than {LOOKUP_TIMEOUT:?}"),
                ));
            }
        };
        let expires = credentials.expiry();
        Ok(Credential::new(S3Secret {
            credentials,
            region,
        })
        .with_expiry(expires))
    }

    /// aws-config's default chain on the captured environment, built once.
    fn chain(&self) -> Result<(SharedCredentialsProvider, Option<String>), Error> {
        let mut chain = self.chain.lock();
        if let Some(built) = chain.as_ref() {
            return Ok(built.clone());
        }
        let runtime = self.runtime.get()?;
        let mut loader =
            aws_config::defaults(BehaviorVersion::latest()).env(Env::from(self.env.clone()));
        if let Some(profile) = &self.options.profile {
            loader = loader.profile_name(profile);
        }
        if let Some(region) = &self.options.region {
            loader = loader.region(Region::new(region.clone()));
        }
        let config =
            runtime.block_on(async { tokio::time::timeout(LOOKUP_TIMEOUT, loader.load()).await });
        let config = config.map_err(|_| {
            Error::new(
                Status::Credentials,
                format!("loading the AWS configuration took longer than {LOOKUP_TIMEOUT:?}"),
            )
        })?;
        let provider = config.credentials_provider().ok_or_else(|| {
            Error::new(
                Status::Credentials,
                "the AWS default chain offers no credential provider",
            )
        })?;
        let built = (provider, config.region().map(|r| r.to_string()));
        *chain = Some(built.clone());
        Ok(built)
    }
}

impl CredentialProvider for Discovery {
    fn fetch(&self) -> Result<Credential, Error> {
        if let Some((id, secret, token)) = &self.options.explicit_keys {
            let credentials = Credentials::new(id, secret, token.clone(), None, "karu-config");
            return Ok(Credential::new(S3Secret {
                credentials,
                region: None,
            }));
        }
        if let Some(command) = &self.options.credential_process {
            let provider =
                SharedCredentialsProvider::new(CredentialProcessProvider::new(command.clone()));
            return self.provide(&provider, None);
        }
        if !self.options.discovery {
            return Err(Error::new(
                Status::Credentials,
                "no S3 credentials: set s3.access_key_id and s3.secret_access_key, enable \
                 s3.discovery, or set s3.anonymous for public buckets",
            ));
        }
        let (provider, region) = self.chain()?;
        self.provide(&provider, region)
    }
}

impl fmt::Debug for Discovery {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Discovery")
            .field("options", &self.options)
            .field("env_vars", &self.env.len())
            .finish_non_exhaustive()
    }
}

/// A credential error's message with its sources, which aws-config keeps free of secrets.
fn describe(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(e) = source {
        let s = e.to_string();
        if !text.contains(&s) {
            text.push_str(": ");
            text.push_str(&s);
        }
        source = e.source();
    }
    karu_engine::http::check::redact(&karu_engine::http::check::collapse(&text))
}
