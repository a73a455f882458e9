//! Credential discovery for S3, and the scope a credential may be reused in.
//!
//! Order: explicit keys from the configuration; an explicit `credential_process`; then, when
//! discovery is enabled, aws-config's default chain run on the environment Karu captured when
//! the client was built (never the live process environment): environment keys, profiles
//! (config and credentials files, including their `credential_process`), web identity,
//! container credentials, instance metadata.
//!
//! Lookups run on Karu's credential workers (they may block); aws-config's asynchronous
//! providers run through the SDK's [`bridge`], bounded by the read's deadline, and send their
//! requests with Karu's token client ([`transport`]), which tries them again under the
//! client's retry policy. One
//! [`Discovery`] serves each credential scope ([`PerScope`](karu_engine::sdk::PerScope)
//! in the backend), so aws-config's default chain is built once per scope.

mod transport;

use std::collections::HashMap;
use std::convert::Infallible;
use std::fmt;
use std::sync::Arc;
use std::time::SystemTime;

use aws_config::BehaviorVersion;
use aws_config::credential_process::CredentialProcessProvider;
use aws_credential_types::Credentials;
use aws_credential_types::provider::{ProvideCredentials, SharedCredentialsProvider};
use aws_types::os_shim_internal::Env;
use aws_types::region::Region;
use karu_engine::sdk::{Credential, CredentialProvider, Error, FetchContext, Status, bridge};
use parking_lot::Mutex;

use crate::config::Effective;
use transport::{Lookups, Transport};

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
/// [`CredentialCallback`](karu_engine::sdk::CredentialCallback) registered for the
/// [`FAMILY`](crate::FAMILY) `"aws"` (a vendor SDK, a secret manager). Requests are signed
/// with it exactly as with discovered credentials; `session_token` is sent as
/// `x-amz-security-token`, and `expires` is when Karu stops reusing it (it refreshes in the
/// final tenth of the lifetime). Its `Debug` shows neither the secret nor the token.
///
/// ```
/// use std::time::{Duration, SystemTime};
/// use karu_engine::sdk::CallbackCredential;
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

/// What the bridge calls an aws-config lookup in errors.
const LOOKUP: &str = "the AWS credential lookup";

/// Discovers credentials for one scope. Reused for every lookup of that scope, so the chain
/// is built once.
pub(crate) struct Discovery {
    options: Effective,
    env: HashMap<String, String>,
    chain: Mutex<Option<(SharedCredentialsProvider, Option<String>)>>,
    /// The lookup under way, whose token client and deadline the chain's requests use.
    lookups: Arc<Lookups>,
}

impl Discovery {
    pub(crate) fn new(options: Effective, env: HashMap<String, String>) -> Self {
        Discovery {
            options,
            env,
            chain: Mutex::new(None),
            lookups: Arc::default(),
        }
    }

    fn provide(
        &self,
        ctx: &FetchContext,
        provider: &SharedCredentialsProvider,
        region: Option<String>,
    ) -> Result<Credential, Error> {
        let credentials = bridge::block_on(ctx, LOOKUP, provider.provide_credentials())?;
        let expires = credentials.expiry();
        Ok(Credential::new(S3Secret {
            credentials,
            region,
        })
        .with_expiry(expires))
    }

    /// aws-config's default chain on the captured environment, built once.
    fn chain(
        &self,
        ctx: &FetchContext,
    ) -> Result<(SharedCredentialsProvider, Option<String>), Error> {
        let mut chain = self.chain.lock();
        if let Some(built) = chain.as_ref() {
            return Ok(built.clone());
        }
        let mut loader = aws_config::defaults(BehaviorVersion::latest())
            .env(Env::from(self.env.clone()))
            .http_client(Transport(self.lookups.clone()));
        if let Some(profile) = &self.options.profile {
            loader = loader.profile_name(profile);
        }
        if let Some(region) = &self.options.region {
            loader = loader.region(Region::new(region.clone()));
        }
        let config = bridge::block_on(ctx, "loading the AWS configuration", async {
            Ok::<_, Infallible>(loader.load().await)
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
    fn fetch(&self, ctx: &FetchContext) -> Result<Credential, Error> {
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
            return self.provide(ctx, &provider, None);
        }
        if !self.options.discovery {
            return Err(Error::new(
                Status::Credentials,
                "no S3 credentials: set s3.access_key_id and s3.secret_access_key, enable \
                 s3.discovery, or set s3.anonymous for public buckets",
            ));
        }
        let _lookup = self.lookups.enter(ctx);
        let (provider, region) = self.chain(ctx)?;
        self.provide(ctx, &provider, region)
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

/// Environment variables that would let aws-config's chain find credentials other than the
/// named profile's: a [`ProfileLookup`] runs without them.
const CHAIN_ONLY: [&str; 9] = [
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_PROFILE",
    "AWS_CONTAINER_CREDENTIALS_FULL_URI",
    "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
    "AWS_CONTAINER_AUTHORIZATION_TOKEN",
    "AWS_WEB_IDENTITY_TOKEN_FILE",
    "AWS_ROLE_ARN",
];

/// Credentials for another service that signs like S3 (Source Cooperative's data proxy), in
/// its own credential scope: explicit keys, else a `credential_process` command, else a named
/// `profile` of the AWS config and credentials files (its `credential_process` or keys), as
/// the service's own CLI sets it up. Never the AWS environment's keys, `AWS_PROFILE`,
/// container, web-identity or instance credentials: those belong to S3. Lookups run on a
/// credential worker, aws-config through the SDK's bridge; the credential it yields is the one
/// [`sign`](crate::sign) takes.
pub struct ProfileLookup(Discovery);

impl ProfileLookup {
    /// A lookup with these sources over the captured environment `env` (where the config
    /// files are: `HOME`, `AWS_CONFIG_FILE`, `AWS_SHARED_CREDENTIALS_FILE`).
    pub fn new(
        keys: Option<(String, String, Option<String>)>,
        credential_process: Option<String>,
        profile: Option<String>,
        env: impl IntoIterator<Item = (String, String)>,
    ) -> Self {
        let mut env: HashMap<String, String> = env
            .into_iter()
            .filter(|(k, _)| !CHAIN_ONLY.contains(&k.as_str()))
            .collect();
        env.insert("AWS_EC2_METADATA_DISABLED".into(), "true".into());
        let discovery = profile.is_some();
        ProfileLookup(Discovery::new(
            Effective {
                region: None,
                endpoint: None,
                addressing: None,
                anonymous: false,
                requester_pays: false,
                explicit_keys: keys,
                profile,
                credential_process,
                discovery,
            },
            env,
        ))
    }
}

impl fmt::Debug for ProfileLookup {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("ProfileLookup").field(&self.0).finish()
    }
}

impl CredentialProvider for ProfileLookup {
    fn fetch(&self, ctx: &FetchContext) -> Result<Credential, Error> {
        self.0.fetch(ctx)
    }
}
