//! Address parsing, request URLs and the error answers that ask for a correction.
//!
//! Every accepted spelling of an object parses into one [`Address`]; its canonical text parses
//! back into the same address, so [`prepare`](crate::AzureBackend) re-reads what it needs (the
//! account, the cloud, a SAS in the URL) from the canonical path alone.

use karu_engine::sdk::error_body::xml_element;
use karu_engine::sdk::{
    CanonicalPath, Correction, Error, Resolved, Status, encode_path, endpoint_problem, redact,
};
use percent_encoding::percent_decode_str;

/// The host suffix of the public Azure cloud.
pub(crate) const PUBLIC_CLOUD: &str = "core.windows.net";

/// The host suffixes of the Azure clouds whose URLs this provider recognises (public,
/// China, US Government).
pub(crate) const CLOUDS: [&str; 3] = [
    PUBLIC_CLOUD,
    "core.chinacloudapi.cn",
    "core.usgovcloudapi.net",
];

/// What can go wrong here; converted into the engine's public error at the boundary.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum AzureError {
    #[error("invalid Azure address {address}: {why}")]
    InvalidAddress { address: String, why: &'static str },
    #[error("the Azure endpoint {0}")]
    InvalidEndpoint(&'static str),
    #[error(
        "no storage account for {0}: set azure.account (or AZURE_STORAGE_ACCOUNT_NAME, a \
         connection string, azure.endpoint), or use an address that names one \
         (abfss://container@account.dfs.core.windows.net/path)"
    )]
    NoAccount(String),
}

impl From<AzureError> for Error {
    fn from(e: AzureError) -> Self {
        Error::new(Status::InvalidArgument, e.to_string())
    }
}

/// A parsed Azure address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Address {
    /// The storage account, when the address names one (URL and `abfs[s]://` forms).
    pub(crate) account: Option<String>,
    /// The cloud's host suffix (`core.windows.net`), with the account.
    pub(crate) cloud: Option<String>,
    pub(crate) container: String,
    /// The blob name, decoded.
    pub(crate) key: String,
    /// The query string of a URL (a SAS token), without the `?`.
    pub(crate) query: Option<String>,
}

impl Address {
    /// The canonical identity: `az://container/key` (the key as written) when the account comes
    /// from the configuration; else the blob URL `https://account.blob.cloud/container/key`
    /// (the key encoded once, a SAS query kept, and redacted wherever it is shown).
    pub(crate) fn canonical(&self) -> String {
        match (&self.account, &self.cloud) {
            (Some(account), Some(cloud)) => {
                let mut text = format!(
                    "https://{account}.blob.{cloud}/{}/{}",
                    self.container,
                    encode_path(&self.key)
                );
                if let Some(query) = &self.query {
                    text.push('?');
                    text.push_str(query);
                }
                text
            }
            _ => format!("az://{}/{}", self.container, self.key),
        }
    }

    /// The object, its container `account/container` when the address names the account.
    pub(crate) fn resolved(&self) -> Resolved {
        let container = match &self.account {
            Some(account) => format!("{account}/{}", self.container),
            None => self.container.clone(),
        };
        Resolved::remote(
            CanonicalPath::new(self.canonical()),
            Some(container),
            self.key.clone(),
        )
    }
}

/// Parse any accepted spelling:
///
/// - `az://container/key` and `azure://container/key` (the key as written; the account comes
///   from the configuration);
/// - `abfs://container@account.dfs.core.windows.net/key` and `abfss://…` (the key
///   percent-decoded);
/// - `https://account.blob.core.windows.net/container/key` and the `dfs` host (the key
///   percent-decoded, the query kept as a SAS token), in the public, China and US Government
///   clouds.
pub(crate) fn parse(address: &str) -> Result<Address, AzureError> {
    let invalid = |why| AzureError::InvalidAddress {
        address: redact::address(address),
        why,
    };
    let (scheme, rest) = address
        .split_once("://")
        .ok_or_else(|| invalid("not an Azure address"))?;
    let scheme = scheme.to_ascii_lowercase();
    match scheme.as_str() {
        "az" | "azure" => {
            let (container, key) = rest
                .split_once('/')
                .ok_or_else(|| invalid("no blob name after the container"))?;
            check_container(container).map_err(invalid)?;
            check_key(key).map_err(invalid)?;
            Ok(Address {
                account: None,
                cloud: None,
                container: container.to_string(),
                key: key.to_string(),
                query: None,
            })
        }
        "abfs" | "abfss" | "https" => parse_url(address, &scheme).map_err(invalid),
        _ => Err(invalid(
            "not an Azure scheme (az, azure, abfs, abfss, https)",
        )),
    }
}

fn parse_url(address: &str, scheme: &str) -> Result<Address, &'static str> {
    let url = url::Url::parse(address).map_err(|_| "not a URL")?;
    if url.fragment().is_some() {
        return Err("a fragment is not part of a blob address");
    }
    if url.port().is_some() {
        return Err("an Azure storage URL has no port (use azure.endpoint for emulators)");
    }
    let host = url.host_str().ok_or("no host")?.to_ascii_lowercase();
    let (account, service, cloud) = split_host(&host).ok_or("not an Azure storage host")?;
    check_account(account)?;
    let path = url.path().strip_prefix('/').unwrap_or(url.path());
    let (container, key) = if scheme == "https" {
        if !url.username().is_empty() || url.password().is_some() {
            return Err("user information is not part of a blob URL");
        }
        let (container, key) = path
            .split_once('/')
            .ok_or("no blob name after the container")?;
        (decode(container)?, key)
    } else {
        if service != "dfs" && service != "blob" {
            return Err("not an Azure storage host");
        }
        if url.password().is_some() {
            return Err("a password is not part of an abfs address");
        }
        if url.query().is_some() {
            return Err("an abfs address has no query");
        }
        (decode(url.username())?, path)
    };
    check_container(&container)?;
    let key = decode(key)?;
    check_key(&key)?;
    Ok(Address {
        account: Some(account.to_string()),
        cloud: Some(cloud.to_string()),
        container,
        key,
        query: url.query().filter(|q| !q.is_empty()).map(str::to_string),
    })
}

fn decode(text: &str) -> Result<String, &'static str> {
    percent_decode_str(text)
        .decode_utf8()
        .map(|c| c.into_owned())
        .map_err(|_| "a percent-encoded name is not UTF-8")
}

/// `account.blob.core.windows.net` into (`account`, `blob`, `core.windows.net`).
fn split_host(host: &str) -> Option<(&str, &str, &str)> {
    let cloud = CLOUDS.iter().find(|c| {
        host.strip_suffix(**c)
            .is_some_and(|stem| stem.ends_with('.'))
    })?;
    let stem = &host[..host.len() - cloud.len() - 1];
    let (account, service) = stem.split_once('.')?;
    matches!(service, "blob" | "dfs").then_some((account, service, *cloud))
}

/// Storage account names: 3–24 lower-case letters and digits.
fn check_account(account: &str) -> Result<(), &'static str> {
    let ok = (3..=24).contains(&account.len())
        && account
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit());
    if ok {
        Ok(())
    } else {
        Err("not a valid storage account name (3–24 lower-case letters and digits)")
    }
}

/// Container names: 3–63 lower-case letters, digits and single hyphens, starting and ending
/// with a letter or digit; or one of the special containers `$root`, `$web`, `$logs`.
fn check_container(container: &str) -> Result<(), &'static str> {
    if matches!(container, "$root" | "$web" | "$logs") {
        return Ok(());
    }
    let ok = (3..=63).contains(&container.len())
        && container
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !container.starts_with('-')
        && !container.ends_with('-')
        && !container.contains("--");
    if ok {
        Ok(())
    } else {
        Err("not a valid container name (3–63 lower-case letters, digits and single hyphens)")
    }
}

/// Blob names: 1 to 1,024 characters, without `.` or `..` segments (URLs resolve them away,
/// so no request could name such a blob).
fn check_key(key: &str) -> Result<(), &'static str> {
    match key.chars().count() {
        0 => return Err("the blob name is empty"),
        1..=1024 => {}
        _ => return Err("the blob name is longer than 1,024 characters"),
    }
    if key.split('/').any(|segment| matches!(segment, "." | "..")) {
        return Err("the blob name has a `.` or `..` segment");
    }
    Ok(())
}

/// Where requests go: the blob service URL without a trailing `/` (`https://account.blob.
/// core.windows.net`, or an override such as Azurite's `http://127.0.0.1:10000/devstoreaccount1`).
pub(crate) fn service_url(
    address: &Address,
    account: Option<&str>,
    endpoint: Option<&str>,
    suffix: Option<&str>,
) -> Result<String, AzureError> {
    if let Some(endpoint) = endpoint {
        require_endpoint(endpoint)?;
        return Ok(endpoint.trim_end_matches('/').to_string());
    }
    let account = address
        .account
        .as_deref()
        .or(account)
        .ok_or_else(|| AzureError::NoAccount(redact::address(&address.canonical())))?;
    let cloud = address.cloud.as_deref().or(suffix).unwrap_or(PUBLIC_CLOUD);
    Ok(format!("https://{account}.blob.{cloud}"))
}

/// An endpoint must be an `http(s)` URL a path can follow ([`endpoint_problem`]).
pub(crate) fn require_endpoint(endpoint: &str) -> Result<(), AzureError> {
    endpoint_problem(endpoint).map_or(Ok(()), |why| Err(AzureError::InvalidEndpoint(why)))
}

/// The URL of a blob under a service URL, the blob name encoded once, and the SAS query (the
/// URL's own, else the configured token) appended.
pub(crate) fn blob_url(service: &str, address: &Address, sas: Option<&str>) -> String {
    let mut url = format!(
        "{service}/{}/{}",
        address.container,
        encode_path(&address.key)
    );
    let query = address
        .query
        .as_deref()
        .or(sas.map(|s| s.trim_start_matches('?')));
    if let Some(query) = query.filter(|q| !q.is_empty()) {
        url.push('?');
        url.push_str(query);
    }
    url
}

/// The correction an Azure error answer asks for: an expired bearer token (`401`/`403` whose
/// `AuthenticationErrorDetail` or `WWW-Authenticate` says the token expired) authenticates
/// once more.
pub(crate) fn correction(
    status: u16,
    headers: &karu_engine::sdk::http::HeaderMap,
    body: &[u8],
) -> Option<Correction> {
    if !matches!(status, 401 | 403) {
        return None;
    }
    let text = String::from_utf8_lossy(body);
    let detail = xml_element(&text, "AuthenticationErrorDetail").unwrap_or_default();
    let challenge = headers
        .get("www-authenticate")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    let expired = detail.contains("Lifetime validation failed")
        || detail.contains("token is expired")
        || challenge.contains("invalid_token");
    expired.then_some(Correction::Reauthenticate)
}

#[cfg(test)]
mod tests {
    use karu_engine::sdk::http::{HeaderMap, HeaderValue};
    use proptest::prelude::*;

    use super::*;

    fn with_account(account: &str, container: &str, key: &str) -> Address {
        Address {
            account: Some(account.into()),
            cloud: Some(PUBLIC_CLOUD.into()),
            container: container.into(),
            key: key.into(),
            query: None,
        }
    }

    #[test]
    fn every_spelling_with_an_account_is_one_address() {
        let expected = with_account("acct", "data", "dir/a b.bin");
        for spelling in [
            "https://acct.blob.core.windows.net/data/dir/a%20b.bin",
            "https://acct.dfs.core.windows.net/data/dir/a%20b.bin",
            "HTTPS://ACCT.Blob.Core.Windows.Net/data/dir/a%20b.bin",
            "https://acct.blob.core.windows.net/data/dir/a b.bin",
            "abfss://data@acct.dfs.core.windows.net/dir/a%20b.bin",
            "abfs://data@acct.dfs.core.windows.net/dir/a%20b.bin",
            "ABFSS://data@acct.dfs.core.windows.net/dir/a b.bin",
        ] {
            let address = parse(spelling).unwrap();
            assert_eq!(address, expected, "{spelling}");
            assert_eq!(
                address.canonical(),
                "https://acct.blob.core.windows.net/data/dir/a%20b.bin"
            );
        }
    }

    #[test]
    fn scheme_forms_keep_the_name_as_written() {
        let expected = Address {
            account: None,
            cloud: None,
            container: "data".into(),
            key: "dir/a b%41.bin".into(),
            query: None,
        };
        assert_eq!(parse("az://data/dir/a b%41.bin").unwrap(), expected);
        assert_eq!(parse("azure://data/dir/a b%41.bin").unwrap(), expected);
        assert_eq!(parse("AZ://data/dir/a b%41.bin").unwrap(), expected);
        assert_eq!(expected.canonical(), "az://data/dir/a b%41.bin");
        let resolved = expected.resolved();
        assert_eq!(resolved.container.as_deref(), Some("data"));
        assert_eq!(resolved.key, "dir/a b%41.bin");
        let named = parse("abfss://data@acct.dfs.core.windows.net/k").unwrap();
        assert_eq!(named.resolved().container.as_deref(), Some("acct/data"));
    }

    #[test]
    fn sovereign_clouds_and_special_containers() {
        let a = parse("https://acct.blob.core.chinacloudapi.cn/$web/index.html").unwrap();
        assert_eq!(a.cloud.as_deref(), Some("core.chinacloudapi.cn"));
        assert_eq!(a.container, "$web");
        assert_eq!(
            a.canonical(),
            "https://acct.blob.core.chinacloudapi.cn/$web/index.html"
        );
        let b = parse("abfss://c01@acct.dfs.core.usgovcloudapi.net/k").unwrap();
        assert_eq!(b.cloud.as_deref(), Some("core.usgovcloudapi.net"));
    }

    #[test]
    fn a_sas_in_the_url_travels_with_the_canonical_path_and_is_redacted() {
        let url = "https://acct.blob.core.windows.net/data/k.bin?sv=2022-11-02&sig=SECRET%2Bx";
        let a = parse(url).unwrap();
        assert_eq!(a.query.as_deref(), Some("sv=2022-11-02&sig=SECRET%2Bx"));
        assert_eq!(a.canonical(), url);
        let resolved = a.resolved();
        assert_eq!(
            resolved.canonical.to_string(),
            "https://acct.blob.core.windows.net/data/k.bin?<redacted>"
        );
        assert!(!format!("{resolved:?}").contains("SECRET"));
        let again = parse(resolved.canonical.as_str()).unwrap();
        assert_eq!(again, a);
        assert_eq!(
            blob_url("https://acct.blob.core.windows.net", &a, Some("sv=other")),
            url,
            "the URL's own SAS wins"
        );
    }

    #[test]
    fn bad_addresses_are_refused_without_secrets_or_panics() {
        for bad in [
            "az://data",
            "az://data/",
            "az://DATA/k",
            "az://ab/k",
            "az://a--b/k",
            "az://-ab/k",
            "azure://ü/k",
            "az:/ü",
            "gs://data/k",
            "https://acct.queue.core.windows.net/data/k",
            "https://acct.blob.core.windows.net/data",
            "https://acct.blob.core.windows.net/data/",
            "https://acct.blob.core.windows.net:444/data/k",
            "https://ACCOUNT-x.blob.core.windows.net/data/k",
            "https://acct.blob.example.net/data/k",
            "https://blob.core.windows.net/data/k",
            "https://acct.blob.core.windows.net/data/k#frag",
            "abfss://acct.dfs.core.windows.net/k",
            "abfss://data@acct.dfs.core.windows.net/",
            "abfss://data:pw@acct.dfs.core.windows.net/k",
            "abfss://data@acct.dfs.core.windows.net/k?sig=x",
            "https://acct.blob.core.windows.net/data/%FF",
            "az://data/a/../b",
            "az://data/./b",
        ] {
            assert!(parse(bad).is_err(), "{bad}");
        }
        // URLs resolve dot segments, as the service does.
        assert_eq!(
            parse("https://acct.blob.core.windows.net/data/a/%2E%2E/b").unwrap(),
            with_account("acct", "data", "b")
        );
        let long = format!("az://data/{}", "x".repeat(1025));
        assert!(parse(&long).is_err());
        assert!(parse(&format!("az://data/{}", "ü".repeat(1024))).is_ok());
        let e: Error = parse("https://acct.blob.core.windows.net/data?sig=SECRET")
            .unwrap_err()
            .into();
        assert_eq!(e.status(), Status::InvalidArgument);
        assert!(!e.message().contains("SECRET"), "{e}");
        let e: Error = parse("https://u:SECRET@acct.blob.core.windows.net/data/k")
            .unwrap_err()
            .into();
        assert!(!e.message().contains("SECRET"), "{e}");
    }

    #[test]
    fn request_urls_encode_once() {
        let a = with_account("acct", "data", "dir/a b+c%41ü.bin");
        let url = blob_url(&service_url(&a, None, None, None).unwrap(), &a, None);
        assert_eq!(
            url,
            "https://acct.blob.core.windows.net/data/dir/a%20b%2Bc%2541%C3%BC.bin"
        );
        assert_eq!(parse(&url).unwrap(), a, "the request URL parses back");
        let named = parse("az://data/k").unwrap();
        assert_eq!(
            service_url(&named, Some("cfg"), None, Some("core.chinacloudapi.cn")).unwrap(),
            "https://cfg.blob.core.chinacloudapi.cn"
        );
        assert_eq!(
            service_url(
                &named,
                Some("cfg"),
                Some("http://127.0.0.1:10000/devstoreaccount1/"),
                None
            )
            .unwrap(),
            "http://127.0.0.1:10000/devstoreaccount1"
        );
        assert!(matches!(
            service_url(&named, None, None, None),
            Err(AzureError::NoAccount(_))
        ));
        assert_eq!(
            blob_url("http://h:1/acct", &named, Some("?sv=1&sig=2")),
            "http://h:1/acct/data/k?sv=1&sig=2"
        );
        for bad in ["ftp://x", "not a url", "http://h/?q=1", "http://u:p@h/"] {
            assert!(require_endpoint(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn expired_tokens_ask_to_authenticate_again() {
        let none = HeaderMap::new();
        let body = b"<?xml version=\"1.0\"?><Error><Code>InvalidAuthenticationInfo</Code>\
            <Message>Server failed to authenticate the request.</Message>\
            <AuthenticationErrorDetail>Lifetime validation failed. The token is expired.\
            </AuthenticationErrorDetail></Error>";
        assert_eq!(
            correction(401, &none, body),
            Some(Correction::Reauthenticate)
        );
        let mut challenge = HeaderMap::new();
        challenge.insert(
            "www-authenticate",
            HeaderValue::from_static("Bearer error=\"invalid_token\""),
        );
        assert_eq!(
            correction(401, &challenge, b""),
            Some(Correction::Reauthenticate)
        );
        let denied = b"<Error><Code>AuthorizationPermissionMismatch</Code></Error>";
        assert_eq!(correction(403, &none, denied), None);
        assert_eq!(correction(500, &none, body), None);
    }

    fn key_strategy() -> impl Strategy<Value = String> {
        prop::collection::vec(
            prop_oneof![
                Just('/'),
                Just(' '),
                Just('%'),
                Just('+'),
                Just('?'),
                Just('#'),
                Just('ü'),
                Just('~'),
                Just('.'),
                prop::char::range('a', 'z'),
                prop::char::range('0', '9'),
            ],
            1..40,
        )
        .prop_map(|chars| chars.into_iter().collect())
    }

    proptest! {
        /// Every spelling built from one blob name (encoded once, as a client would) parses to
        /// one address, whose canonical path parses back to it.
        #[test]
        fn spellings_share_one_canonical_path(key in key_strategy()) {
            prop_assume!(check_key(&key).is_ok());
            let encoded = encode_path(&key);
            let expected = with_account("acct", "data", &key);
            for spelling in [
                format!("https://acct.blob.core.windows.net/data/{encoded}"),
                format!("https://acct.dfs.core.windows.net/data/{encoded}"),
                format!("abfss://data@acct.dfs.core.windows.net/{encoded}"),
            ] {
                let parsed = parse(&spelling).unwrap();
                prop_assert_eq!(&parsed, &expected);
                prop_assert_eq!(parse(&parsed.canonical()).unwrap(), parsed);
            }
            let scheme = parse(&format!("az://data/{key}")).unwrap();
            prop_assert_eq!(&scheme.key, &key);
            prop_assert_eq!(parse(&scheme.canonical()).unwrap(), scheme);
        }

        /// Nothing panics, and what parses has a canonical path that parses back to it.
        #[test]
        fn any_text_parses_or_is_refused(text in ".{0,60}", prefix in prop_oneof![
            Just(""), Just("az://"), Just("abfss://c01@acct.dfs.core.windows.net/"),
            Just("https://acct.blob.core.windows.net/"),
        ]) {
            if let Ok(address) = parse(&format!("{prefix}{text}")) {
                prop_assert_eq!(parse(&address.canonical()).unwrap(), address);
            }
        }
    }
}
