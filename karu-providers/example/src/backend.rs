//! The toy backend.

use karu_engine::sdk::{
    Backend, CredentialSource, Error, Locator, PerScope, PrepareContext, PreparedRequest, Resolved,
    SectionKeys, Snapshot, credential_scope, section,
};

use crate::config::ToyConfig;
use crate::credential::{Token, Tokens};
use crate::{FAMILY, SECTION, request};

/// Serves `toy://host:port/key`.
#[derive(Debug, Default)]
pub struct ToyBackend {
    /// One token provider per credential scope.
    tokens: PerScope<Tokens>,
}

impl Backend for ToyBackend {
    fn name(&self) -> &str {
        "toy"
    }

    fn resolve(&self, address: &str) -> Result<Resolved, Error> {
        request::resolve(address)
    }

    fn credential_source(
        &self,
        locator: &Locator,
        snapshot: &Snapshot,
    ) -> Result<Option<CredentialSource>, Error> {
        let config = section::<ToyConfig>(snapshot, locator, SECTION)?;
        let scope = credential_scope(FAMILY, snapshot, locator, SECTION, ToyConfig::CREDENTIAL)?;
        let token = config.value.token.clone().map(Token);
        Ok(Some(self.tokens.source(scope, || Tokens { token })))
    }

    fn prepare(&self, ctx: &PrepareContext<'_>) -> Result<PreparedRequest, Error> {
        request::prepare(ctx)
    }
}
