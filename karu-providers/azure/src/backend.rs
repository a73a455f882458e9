//! The Azure backend.

use std::time::SystemTime;

use karu_engine::sdk::BearerToken;
use karu_engine::sdk::http::header::{AUTHORIZATION, HeaderName, HeaderValue};
use karu_engine::sdk::http::{HeaderMap, Uri};
use karu_engine::sdk::{
    Backend, Capabilities, Correction, CredentialSource, Error, ErrorResponse, Locator, PerScope,
    PrepareContext, PreparedRequest, Resolved, SectionKeys, Snapshot, credential_scope,
};

use crate::config::{AzureConfig, Effective};
use crate::credential::{AzureSecret, Configured};
use crate::{FAMILY, SECTION, VERSION, request, shared_key};

/// Serves `az://`, `azure://`, `abfs[s]://` and Azure blob and dfs URLs.
#[derive(Debug, Default)]
pub struct AzureBackend {
    /// One credential provider per credential scope.
    providers: PerScope<Configured>,
}

impl AzureBackend {
    /// An Azure backend.
    pub fn new() -> Self {
        Self::default()
    }

    fn effective(&self, locator: &Locator, snapshot: &Snapshot) -> Result<Effective, Error> {
        karu_engine::sdk::resolved_section(snapshot, locator, SECTION, "Azure", Effective::resolve)
    }
}

/// The address a locator was resolved from (its canonical path parses back to it).
fn address_of(locator: &Locator) -> Result<request::Address, Error> {
    Ok(request::parse(locator.canonical().as_str())?)
}

impl Backend for AzureBackend {
    fn name(&self) -> &str {
        "azure"
    }

    fn resolve(&self, address: &str) -> Result<Resolved, Error> {
        Ok(request::parse(address)?.resolved())
    }

    /// None for a SAS in the address and for anonymous access; else the configured
    /// credential of the object's scope.
    fn credential_source(
        &self,
        locator: &Locator,
        snapshot: &Snapshot,
    ) -> Result<Option<CredentialSource>, Error> {
        if address_of(locator)?.query.is_some() {
            return Ok(None);
        }
        let options = self.effective(locator, snapshot)?;
        if options.auth == crate::config::Auth::Anonymous {
            return Ok(None);
        }
        let scope = credential_scope(FAMILY, snapshot, locator, SECTION, AzureConfig::CREDENTIAL)?;
        Ok(Some(
            self.providers
                .source(scope, || Configured::new(options.auth)),
        ))
    }

    fn prepare(&self, ctx: &PrepareContext<'_>) -> Result<PreparedRequest, Error> {
        let address = address_of(ctx.locator)?;
        let options = self.effective(ctx.locator, ctx.snapshot)?;
        // An application callback's bearer token, or Karu's own lookup's value.
        let bearer = ctx
            .credential
            .and_then(|c| c.get::<BearerToken>())
            .map(|token| AzureSecret::Bearer(token.secret().to_owned()));
        let secret = bearer
            .as_ref()
            .or_else(|| ctx.credential.and_then(|c| c.get::<AzureSecret>()));
        let sas = match secret {
            Some(AzureSecret::Sas(token)) => Some(token.as_str()),
            _ => None,
        };
        let service = request::service_url(
            &address,
            options.account.as_deref(),
            options.endpoint.as_deref(),
            options.suffix.as_deref(),
        )?;
        let url = request::blob_url(&service, &address, sas);
        let mut prepared = PreparedRequest::get(&url, ctx)?;
        // Authenticated requests are rebuilt, never redirected.
        prepared.options.follow_redirects = false;
        authenticate(
            &prepared.url,
            &mut prepared.headers,
            secret,
            SystemTime::now(),
        );
        Ok(prepared)
    }

    fn capabilities(&self) -> Capabilities {
        // Azure ignores `bytes=-n`: read_ends reads the head, then the tail pinned to its ETag.
        Capabilities::without_suffix_ranges()
    }

    fn correction(&self, response: &ErrorResponse<'_>) -> Option<Correction> {
        request::correction(response.status, response.headers, response.body)
    }
}

const MS_VERSION: HeaderName = HeaderName::from_static("x-ms-version");
const MS_DATE: HeaderName = HeaderName::from_static("x-ms-date");

/// Pin the service version and authenticate at `now`: Shared Key signs (after `x-ms-date`),
/// a bearer token is sent as `Authorization`, a SAS is already in the URL.
pub(crate) fn authenticate(
    url: &Uri,
    headers: &mut HeaderMap,
    secret: Option<&AzureSecret>,
    now: SystemTime,
) {
    headers.insert(MS_VERSION, HeaderValue::from_static(VERSION));
    match secret {
        Some(AzureSecret::SharedKey { account, key }) => {
            if let Ok(date) = HeaderValue::from_str(&httpdate::fmt_http_date(now)) {
                headers.insert(MS_DATE, date);
            }
            shared_key::sign(url, headers, account, key);
        }
        Some(AzureSecret::Bearer(token)) => {
            if let Ok(mut value) = HeaderValue::from_str(&format!("Bearer {token}")) {
                value.set_sensitive(true);
                headers.insert(AUTHORIZATION, value);
            }
        }
        Some(AzureSecret::Sas(_)) | None => {}
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn shared_key_requests_carry_date_version_and_signature() {
        let url: Uri = "http://127.0.0.1:10000/devstoreaccount1/c01/k"
            .parse()
            .unwrap();
        let key = shared_key::decode_key(crate::config::DEV_KEY).unwrap();
        let secret = AzureSecret::SharedKey {
            account: "devstoreaccount1".into(),
            key: key.clone(),
        };
        let mut headers = HeaderMap::new();
        headers.insert("range", HeaderValue::from_static("bytes=0-9"));
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_764_550_800);
        authenticate(&url, &mut headers, Some(&secret), now);
        assert_eq!(headers[MS_VERSION], VERSION);
        assert_eq!(headers[MS_DATE], "Mon, 01 Dec 2025 01:00:00 GMT");
        let text = shared_key::string_to_sign("GET", &url, &headers, "devstoreaccount1");
        assert!(text.contains("\nbytes=0-9\n"), "{text}");
        assert_eq!(
            headers[AUTHORIZATION].to_str().unwrap(),
            format!(
                "SharedKey devstoreaccount1:{}",
                shared_key::signature(&key, &text)
            )
        );
    }

    #[test]
    fn bearer_and_sas_requests() {
        let url: Uri = "https://a.blob.core.windows.net/c01/k".parse().unwrap();
        let mut headers = HeaderMap::new();
        let bearer = AzureSecret::Bearer("tok".into());
        authenticate(&url, &mut headers, Some(&bearer), SystemTime::now());
        assert_eq!(headers[AUTHORIZATION], "Bearer tok");
        assert!(headers[AUTHORIZATION].is_sensitive());
        let mut headers = HeaderMap::new();
        authenticate(
            &url,
            &mut headers,
            Some(&AzureSecret::Sas("sv=1".into())),
            SystemTime::now(),
        );
        assert_eq!(headers.get(AUTHORIZATION), None);
        assert_eq!(headers[MS_VERSION], VERSION);
    }
}
