//! The plain HTTP backend.

use karu_engine::sdk::{Backend, Error, PrepareContext, PreparedRequest, Resolved};

use crate::config::HttpProviderConfig;
use crate::request;

/// Serves `http://` and `https://` URLs.
#[derive(Debug, Clone, Default)]
pub struct HttpBackend {
    _private: (),
}

impl HttpBackend {
    /// A plain HTTP backend.
    pub fn new() -> Self {
        Self::default()
    }
}

impl Backend for HttpBackend {
    fn name(&self) -> &str {
        "http"
    }

    fn resolve(&self, address: &str) -> Result<Resolved, Error> {
        request::resolve(address)
    }

    fn prepare(&self, ctx: &PrepareContext<'_>) -> Result<PreparedRequest, Error> {
        let config = ctx.section::<HttpProviderConfig>(crate::SECTION)?;
        request::prepare(ctx, &config.value)
    }
}
