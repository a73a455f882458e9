//! The transport: one rustls configuration for the client, a DNS cache, and hyper clients.

use std::collections::HashMap;
use std::fmt;
use std::future::Future;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::Empty;
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::connect::dns::Name;
use hyper_util::rt::TokioExecutor;
use karu_config::{HttpSettings, HttpVersion};
use parking_lot::Mutex;
use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;

use crate::status::{Error, Status};

/// The hyper client of one event loop.
pub(crate) type HttpClient = Client<HttpsConnector<HttpConnector<Resolver>>, Empty<Bytes>>;

/// The client's one TLS configuration: aws-lc-rs, platform roots plus an optional CA file,
/// ALPN by the HTTP version policy. Shared by every loop, so TLS sessions resume across loops.
pub(crate) fn tls_config(settings: &HttpSettings) -> Result<Arc<rustls::ClientConfig>, Error> {
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let mut roots = rustls::RootCertStore::empty();
    let native = rustls_native_certs::load_native_certs();
    for cert in native.certs {
        // A platform store may hold certificates rustls cannot use; skip those.
        let _ = roots.add(cert);
    }
    if let Some(path) = &settings.ca_file {
        let certs = CertificateDer::pem_file_iter(path)
            .and_then(|iter| iter.collect::<Result<Vec<_>, _>>())
            .map_err(|e| {
                Error::new(
                    Status::InvalidArgument,
                    format!("cannot read CA file {}: {e}", path.display()),
                )
            })?;
        if certs.is_empty() {
            return Err(Error::new(
                Status::InvalidArgument,
                format!("CA file {} holds no certificate", path.display()),
            ));
        }
        for cert in certs {
            roots.add(cert).map_err(|e| {
                Error::new(
                    Status::InvalidArgument,
                    format!(
                        "CA file {} holds an unusable certificate: {e}",
                        path.display()
                    ),
                )
            })?;
        }
    }
    let mut config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| Error::internal(format!("TLS configuration: {e}")))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = match settings.version {
        HttpVersion::Http2 => vec![b"h2".to_vec()],
        HttpVersion::Auto => vec![b"h2".to_vec(), b"http/1.1".to_vec()],
        _ => vec![b"http/1.1".to_vec()],
    };
    Ok(Arc::new(config))
}

/// Build one event loop's hyper client (its own connection pool).
pub(crate) fn client(
    tls: Arc<rustls::ClientConfig>,
    resolver: Resolver,
    connect_timeout: Duration,
    version: HttpVersion,
) -> HttpClient {
    let mut http = HttpConnector::new_with_resolver(resolver);
    http.enforce_http(false);
    http.set_nodelay(true);
    http.set_connect_timeout(Some(connect_timeout));
    http.set_keepalive(Some(Duration::from_secs(60)));
    let https = HttpsConnector::from((http, tls));
    Client::builder(TokioExecutor::new())
        .pool_idle_timeout(Duration::from_secs(90))
        .pool_max_idle_per_host(usize::MAX)
        .http2_only(version == HttpVersion::Http2)
        .build(https)
}

/// A DNS answer and when it was obtained.
type Answer = (Instant, Arc<[IpAddr]>);

/// Answers kept for `ttl`, shared by every loop of a client.
pub(crate) struct DnsCache {
    ttl: Duration,
    entries: Mutex<HashMap<String, Answer>>,
}

impl DnsCache {
    pub(crate) fn new(ttl: Duration) -> Self {
        DnsCache {
            ttl,
            entries: Mutex::new(HashMap::new()),
        }
    }

    /// A cached answer still fresh at `now`.
    fn get(&self, host: &str, now: Instant) -> Option<Arc<[IpAddr]>> {
        let entries = self.entries.lock();
        let (at, addrs) = entries.get(host)?;
        (now.duration_since(*at) < self.ttl).then(|| Arc::clone(addrs))
    }

    fn insert(&self, host: &str, addrs: Arc<[IpAddr]>, now: Instant) {
        let mut entries = self.entries.lock();
        if entries.len() > 4096 {
            let ttl = self.ttl;
            entries.retain(|_, (at, _)| now.duration_since(*at) < ttl);
        }
        entries.insert(host.to_string(), (now, addrs));
    }
}

/// A name-resolution failure, recognisable in an error's source chain.
#[derive(Debug)]
pub(crate) struct DnsFailure {
    host: String,
    source: io::Error,
}

#[cfg(test)]
impl DnsFailure {
    pub(crate) fn for_tests(host: &str) -> Self {
        DnsFailure {
            host: host.to_string(),
            source: io::Error::new(io::ErrorKind::NotFound, "test"),
        }
    }
}

impl fmt::Display for DnsFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "cannot resolve {}: {}", self.host, self.source)
    }
}

impl std::error::Error for DnsFailure {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.source)
    }
}

/// The resolver hyper's connector calls for each new connection: cached answers, shuffled
/// so connections spread over the addresses.
#[derive(Clone)]
pub(crate) struct Resolver {
    cache: Arc<DnsCache>,
}

impl Resolver {
    pub(crate) fn new(cache: Arc<DnsCache>) -> Self {
        Resolver { cache }
    }
}

impl fmt::Debug for Resolver {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Resolver").finish_non_exhaustive()
    }
}

impl tower_service::Service<Name> for Resolver {
    type Response = std::vec::IntoIter<SocketAddr>;
    type Error = DnsFailure;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, DnsFailure>> + Send>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), DnsFailure>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, name: Name) -> Self::Future {
        let cache = Arc::clone(&self.cache);
        Box::pin(async move {
            let host = name.as_str().to_string();
            let now = Instant::now();
            let addrs = match cache.get(&host, now) {
                Some(addrs) => addrs,
                None => {
                    let found: Vec<IpAddr> = tokio::net::lookup_host((host.as_str(), 0))
                        .await
                        .map_err(|source| DnsFailure {
                            host: host.clone(),
                            source,
                        })?
                        .map(|a| a.ip())
                        .collect();
                    if found.is_empty() {
                        return Err(DnsFailure {
                            host,
                            source: io::Error::new(io::ErrorKind::NotFound, "no addresses"),
                        });
                    }
                    let found: Arc<[IpAddr]> = found.into();
                    cache.insert(&host, Arc::clone(&found), now);
                    found
                }
            };
            let mut shuffled: Vec<SocketAddr> =
                addrs.iter().map(|ip| SocketAddr::new(*ip, 0)).collect();
            fastrand::shuffle(&mut shuffled);
            Ok(shuffled.into_iter())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dns_answers_expire_after_the_ttl() {
        let cache = DnsCache::new(Duration::from_secs(60));
        let t0 = Instant::now();
        let addrs: Arc<[IpAddr]> = vec![IpAddr::from([127, 0, 0, 1])].into();
        cache.insert("h", Arc::clone(&addrs), t0);
        assert!(cache.get("h", t0 + Duration::from_secs(59)).is_some());
        assert!(cache.get("h", t0 + Duration::from_secs(60)).is_none());
        assert!(cache.get("other", t0).is_none());
    }

    #[test]
    fn localhost_resolves_through_the_cache_and_is_shuffled() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let cache = Arc::new(DnsCache::new(Duration::from_secs(60)));
        let mut resolver = Resolver::new(Arc::clone(&cache));
        let addrs: Vec<SocketAddr> = rt
            .block_on(tower_service::Service::call(
                &mut resolver,
                "localhost".parse().unwrap(),
            ))
            .unwrap()
            .collect();
        assert!(addrs.iter().all(|a| a.ip().is_loopback()), "{addrs:?}");
        assert!(cache.get("localhost", Instant::now()).is_some());
        // Many shuffles of a multi-address answer produce more than one order.
        let many: Arc<[IpAddr]> = (1..=8).map(|i| IpAddr::from([127, 0, 0, i])).collect();
        cache.insert("many", many, Instant::now());
        let mut orders = std::collections::HashSet::new();
        for _ in 0..20 {
            let order: Vec<SocketAddr> = rt
                .block_on(tower_service::Service::call(
                    &mut resolver,
                    "many".parse().unwrap(),
                ))
                .unwrap()
                .collect();
            assert_eq!(order.len(), 8);
            orders.insert(order);
        }
        assert!(orders.len() > 1);
    }

    #[test]
    fn tls_config_offers_alpn_by_version() {
        let mut s = HttpSettings::default();
        assert_eq!(
            tls_config(&s).unwrap().alpn_protocols,
            vec![b"http/1.1".to_vec()]
        );
        s.version = HttpVersion::Auto;
        assert_eq!(
            tls_config(&s).unwrap().alpn_protocols,
            vec![b"h2".to_vec(), b"http/1.1".to_vec()]
        );
        s.ca_file = Some("/nonexistent/ca.pem".into());
        let e = tls_config(&s).unwrap_err();
        assert_eq!(e.status(), Status::InvalidArgument);
        assert!(e.message().contains("/nonexistent/ca.pem"));
    }
}
