//! The toy credential: a bearer token, from the configuration of one scope.

use std::fmt;

use karu_engine::sdk::{Credential, CredentialProvider, Error, FetchContext, Status};

/// The secret a toy credential carries. Its `Debug` hides it.
#[derive(Clone)]
pub(crate) struct Token(pub(crate) String);

impl fmt::Debug for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Token(<redacted>)")
    }
}

/// A toy credential holding `token`, for an application's credential callback of the `toy`
/// family (a token from a vault, say).
pub fn credential(token: impl Into<String>) -> Credential {
    Credential::new(Token(token.into()))
}

/// Looks up the token of one credential scope. A real provider would read a file or call a
/// token endpoint here (on a credential worker; an async SDK through `sdk::bridge`).
#[derive(Debug)]
pub(crate) struct Tokens {
    pub(crate) token: Option<Token>,
}

impl CredentialProvider for Tokens {
    fn fetch(&self, _ctx: &FetchContext) -> Result<Credential, Error> {
        let token = self
            .token
            .clone()
            .ok_or_else(|| Error::new(Status::Credentials, "no toy token: set toy.token"))?;
        Ok(Credential::new(token))
    }
}
