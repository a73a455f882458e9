//! The S3 backend.

use std::collections::HashMap;
use std::time::SystemTime;

use http::HeaderValue;
use karu_engine::sdk::{
    Backend, Correction, CredentialSource, Error, ErrorResponse, Locator, PerProcess, PerScope,
    PrepareContext, PreparedRequest, Resolved, SectionKeys, Snapshot, Status, credential_scope,
};
use parking_lot::Mutex;

use crate::config::{Effective, S3Config};
use crate::credential::{Discovery, S3Secret};
use crate::request;
use crate::{FAMILY, SECTION};

/// The region S3 requests are signed for when nothing else names one.
const DEFAULT_REGION: &str = "us-east-1";

/// Where a learned region applies: one bucket at one service. The same bucket name at two
/// endpoints (two S3-compatible stores, or one of them and AWS) is two buckets.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct RegionKey {
    /// The configured endpoint without a trailing `/`; `None` for AWS.
    endpoint: Option<String>,
    bucket: String,
}

impl RegionKey {
    fn new(endpoint: Option<&str>, bucket: &str) -> Self {
        RegionKey {
            endpoint: endpoint.map(|e| e.trim_end_matches('/').to_string()),
            bucket: bucket.to_string(),
        }
    }
}

/// Serves `s3://bucket/key` and AWS S3 URLs.
///
/// Its state belongs to one process: in a forked child, the discovery chains are the child's
/// own ([`PerScope`] makes them per process: the parent's hold the parent's connections), and
/// the regions learned by the parent are copied when their lock is free (a thread that is not
/// in the child may hold it forever).
#[derive(Debug)]
pub struct S3Backend {
    /// Regions learned from wrong-region answers, by endpoint and bucket, so later requests
    /// are signed right the first time.
    regions: PerProcess<Mutex<HashMap<RegionKey, String>>>,
    /// One discovery per credential scope, so each chain is built once.
    discoveries: PerScope<Discovery>,
}

impl Default for S3Backend {
    fn default() -> Self {
        S3Backend {
            regions: PerProcess::new(Mutex::new(HashMap::new())),
            discoveries: PerScope::new(),
        }
    }
}

impl S3Backend {
    /// An S3 backend.
    pub fn new() -> Self {
        Self::default()
    }

    /// The regions learned in the running process (in a forked child, a copy of the parent's
    /// made on first use, if their lock was free).
    fn regions(&self) -> &Mutex<HashMap<RegionKey, String>> {
        let built = self.regions.get_or_build_from(|parent| {
            let learned = parent
                .and_then(|parent| parent.try_lock().map(|regions| regions.clone()))
                .unwrap_or_default();
            Ok::<_, std::convert::Infallible>(Mutex::new(learned))
        });
        match built {
            Ok(regions) => regions,
            Err(never) => match never {},
        }
    }

    fn effective(&self, locator: &Locator, snapshot: &Snapshot) -> Result<Effective, Error> {
        karu_engine::sdk::resolved_section(snapshot, locator, SECTION, "S3", Effective::resolve)
    }
}

impl Backend for S3Backend {
    fn name(&self) -> &str {
        "s3"
    }

    /// Pure: a region the address names travels in the [`Resolved`], it is not remembered.
    fn resolve(&self, address: &str) -> Result<Resolved, Error> {
        Ok(request::parse(address)?.resolved())
    }

    fn credential_source(
        &self,
        locator: &Locator,
        snapshot: &Snapshot,
    ) -> Result<Option<CredentialSource>, Error> {
        let options = self.effective(locator, snapshot)?;
        if options.anonymous {
            return Ok(None);
        }
        let scope = credential_scope(FAMILY, snapshot, locator, SECTION, S3Config::CREDENTIAL)?;
        Ok(Some(self.discoveries.source(scope, || {
            let env = snapshot
                .env_vars()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
            Discovery::new(options, env)
        })))
    }

    fn prepare(&self, ctx: &PrepareContext<'_>) -> Result<PreparedRequest, Error> {
        let locator = ctx.locator;
        let options = self.effective(locator, ctx.snapshot)?;
        let bucket = locator.container().unwrap_or_default();
        let secret = ctx.credential.and_then(|c| c.get::<S3Secret>());
        // A correction for this read, else what this service said of the bucket before, else
        // the region the address named, the configured one, the credential's, the default.
        let key = RegionKey::new(options.endpoint.as_deref(), bucket);
        let region = {
            let mut regions = self.regions().lock();
            match ctx.region_hint {
                Some(hint) => {
                    regions.insert(key, hint.to_string());
                    hint.to_string()
                }
                None => regions
                    .get(&key)
                    .cloned()
                    .or_else(|| locator.region().map(str::to_string))
                    .or_else(|| options.region.clone())
                    .or_else(|| secret.and_then(|s| s.region.clone()))
                    .unwrap_or_else(|| DEFAULT_REGION.to_string()),
            }
        };
        let url = request::object_url(
            bucket,
            locator.key(),
            &region,
            options.endpoint.as_deref(),
            options.addressing,
        )?;
        let mut prepared = PreparedRequest::get(&url, ctx)?;
        if options.requester_pays {
            prepared
                .headers
                .insert("x-amz-request-payer", HeaderValue::from_static("requester"));
        }
        // Signed requests are rebuilt, never redirected.
        prepared.options.follow_redirects = false;
        if !options.anonymous {
            let secret = secret.ok_or_else(|| {
                Error::new(
                    Status::Credentials,
                    format!("no credential was obtained for {}", locator.canonical()),
                )
            })?;
            request::sign_request(
                &prepared.url,
                &mut prepared.headers,
                &secret.credentials,
                &region,
                SystemTime::now(),
            )
            .map_err(Error::from)?;
        }
        Ok(prepared)
    }

    fn correction(&self, response: &ErrorResponse<'_>) -> Option<Correction> {
        request::correction(response.status, response.headers, response.body)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resolve_has_no_side_effects() {
        let backend = S3Backend::new();
        let url = "https://bucket.s3.eu-west-1.amazonaws.com/a/b.bin";
        let first = backend.resolve(url).unwrap();
        assert_eq!(first.region.as_deref(), Some("eu-west-1"));
        assert_eq!(first.canonical.as_str(), "s3://bucket/a/b.bin");
        assert!(
            backend.regions().lock().is_empty(),
            "resolve remembered a region"
        );
        assert_eq!(backend.resolve(url).unwrap(), first);
        let plain = backend.resolve("s3://bucket/a/b.bin").unwrap();
        assert_eq!((plain.canonical, plain.region), (first.canonical, None));
        assert!(backend.regions().lock().is_empty());
    }

    #[test]
    fn one_bucket_at_two_endpoints_is_two_keys() {
        let aws = RegionKey::new(None, "b");
        let minio = RegionKey::new(Some("http://127.0.0.1:9000/"), "b");
        assert_ne!(aws, minio);
        assert_eq!(minio, RegionKey::new(Some("http://127.0.0.1:9000"), "b"));
        assert_ne!(minio, RegionKey::new(Some("http://127.0.0.1:9001"), "b"));
        assert_ne!(minio, RegionKey::new(Some("http://127.0.0.1:9000"), "c"));
    }
}
