//! The Source Cooperative backend.

use std::time::SystemTime;

use karu_engine::sdk::{
    Backend, CredentialSource, Error, Locator, PerScope, PrepareContext, PreparedRequest, Resolved,
    SectionKeys, Snapshot, Status, credential_scope, section,
};
use karu_provider_s3::ProfileLookup;

use crate::config::SourceConfig;
use crate::credential::{Anonymous, SourceCredentials};
use crate::request;
use crate::{FAMILY, SECTION};

/// Serves `source://account/product/path` and data proxy URLs.
#[derive(Debug, Default)]
pub struct SourceBackend {
    /// One lookup per credential scope.
    credentials: PerScope<SourceCredentials>,
}

impl SourceBackend {
    /// A Source Cooperative backend.
    pub fn new() -> Self {
        Self::default()
    }
}

impl Backend for SourceBackend {
    fn name(&self) -> &str {
        "source"
    }

    fn resolve(&self, address: &str) -> Result<Resolved, Error> {
        request::parse(address)
            .map(|a| a.resolved())
            .map_err(|why| request::invalid(address, &why))
    }

    /// Always a lookup (so an application's callback for `source` can answer), which yields
    /// an anonymous credential when nothing is configured; `None` with `anonymous = true`.
    fn credential_source(
        &self,
        locator: &Locator,
        snapshot: &Snapshot,
    ) -> Result<Option<CredentialSource>, Error> {
        let config = section::<SourceConfig>(snapshot, locator, SECTION)?;
        if config.value.anonymous.unwrap_or(false) {
            return Ok(None);
        }
        let scope = credential_scope(FAMILY, snapshot, locator, SECTION, SourceConfig::CREDENTIAL)?;
        Ok(Some(self.credentials.source(scope, || {
            let c = &config.value;
            let lookup = c.signs().then(|| {
                let env = snapshot
                    .env_vars()
                    .map(|(k, v)| (k.to_string(), v.to_string()));
                ProfileLookup::new(
                    c.keys(),
                    c.credential_process.clone(),
                    c.profile.clone(),
                    env.collect::<Vec<_>>(),
                )
            });
            SourceCredentials::new(lookup)
        })))
    }

    /// A `GET` of `{endpoint}/{account}/{product}/{path}`, signed with the S3 provider's SigV4
    /// unless the credential is anonymous.
    fn prepare(&self, ctx: &PrepareContext<'_>) -> Result<PreparedRequest, Error> {
        let locator = ctx.locator;
        let config = ctx.section::<SourceConfig>(SECTION)?;
        let address = request::parse(locator.canonical().as_str())
            .map_err(|why| request::invalid(locator.canonical().as_str(), &why))?;
        let mut prepared = PreparedRequest::get(&address.url(config.value.endpoint()), ctx)?;
        match ctx.credential {
            None => Ok(prepared),
            Some(c) if c.get::<Anonymous>().is_some() => Ok(prepared),
            Some(credential) => {
                karu_provider_s3::sign(
                    &mut prepared,
                    credential,
                    config.value.region(),
                    SystemTime::now(),
                )?;
                Ok(prepared)
            }
        }
        .map_err(|e: Error| {
            if e.status() == Status::Credentials {
                Error::new(
                    Status::Credentials,
                    format!("{} ({})", e.message(), locator.canonical()),
                )
            } else {
                e
            }
        })
    }
}
