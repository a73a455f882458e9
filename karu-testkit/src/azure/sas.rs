//! Shared access signatures (SAS) as the Blob service reads them: the account SAS and the
//! service SAS for a container or a blob, versions 2020-12-06 and later (the provider pins
//! [`SAS_VERSION`]), written from Microsoft's documentation ("Create an account SAS", "Create a
//! service SAS") and independently of the provider, which only passes a token through.
//!
//! [`Sas`] makes tokens for tests; `verify` is what the [`AzureMock`](super::AzureMock)'s
//! gate does with the query of a request: the fields must be well formed, the signature must be
//! the HMAC-SHA256 with the account key of the documented string to sign (for a service SAS,
//! its canonicalized resource is the requested container or blob, so a token for another
//! container fails here, as on Azure), the mock's clock within `st`..`se`, the protocol and
//! source address allowed, the service and resource type covered (an account SAS) and the
//! permission granted.
//!
//! ```
//! use std::time::{Duration, SystemTime};
//! use karu_testkit::azure::Sas;
//!
//! let expiry = SystemTime::UNIX_EPOCH + Duration::from_secs(1_440_938_160);
//! let sas = Sas::container("data", expiry);
//! assert_eq!(
//!     sas.string_to_sign("acct"),
//!     "r\n\n2015-08-30T12:36:00Z\n/blob/acct/data\n\n\n\n2023-11-03\nc\n\n\n\n\n\n\n"
//! );
//! assert!(sas.token("acct", b"key").starts_with("sv=2023-11-03&sr=c&sp=r&se=2015-08-30T12%3A36%3A00Z&sig="));
//! ```

use std::net::Ipv4Addr;
use std::time::SystemTime;

use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, percent_decode_str, utf8_percent_encode};

use super::sharedkey;
use crate::awstime;

/// The SAS version tokens are made for: the storage service version the Azure provider pins
/// with `x-ms-version` (`karu_provider_azure::VERSION`).
pub const SAS_VERSION: &str = "2023-11-03";

/// The oldest version whose string to sign `verify` knows (the one that added the
/// encryption scope, `ses`); older tokens are refused as unsupported.
pub const OLDEST_VERSION: &str = "2020-12-06";

/// Bytes of a query value kept as they are.
const QUERY: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

/// What a SAS grants access to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SasScope {
    /// An account SAS: the services (`ss`, `b` for blobs) and resource types (`srt`: `s`
    /// service, `c` container, `o` object) it covers.
    Account {
        /// `ss`.
        services: String,
        /// `srt`.
        resource_types: String,
    },
    /// A service SAS for one container and its blobs (`sr=c`).
    Container(String),
    /// A service SAS for one blob (`sr=b`).
    Blob {
        /// The container.
        container: String,
        /// The blob's name, not encoded.
        blob: String,
    },
}

/// The fields of a SAS made with the account key; [`Sas::token`] signs them into the query
/// string a client appends to a blob's URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sas {
    /// What it grants access to.
    pub scope: SasScope,
    /// `sp`: the permissions (`r` read, `w` write, `d` delete, `l` list, `c` create, ...).
    pub permissions: String,
    /// `st`: when it becomes valid (ISO 8601 UTC), if not at once.
    pub start: Option<String>,
    /// `se`: when it expires (ISO 8601 UTC).
    pub expiry: String,
    /// `sip`: the source address or range (`a.b.c.d` or `a.b.c.d-e.f.g.h`) it may be used from.
    pub ip: Option<String>,
    /// `spr`: `https` or `https,http`.
    pub protocol: Option<String>,
    /// `sv`: the version of the string to sign.
    pub version: String,
    /// `ses`: the encryption scope of writes.
    pub encryption_scope: Option<String>,
}

impl Sas {
    fn new(scope: SasScope, expiry: SystemTime) -> Sas {
        Sas {
            scope,
            permissions: "r".into(),
            start: None,
            expiry: awstime::rfc3339(expiry),
            ip: None,
            protocol: None,
            version: SAS_VERSION.into(),
            encryption_scope: None,
        }
    }

    /// An account SAS reading blobs (`ss=b`, `srt=sco`, `sp=r`) until `expiry`.
    pub fn account(expiry: SystemTime) -> Sas {
        Self::new(
            SasScope::Account {
                services: "b".into(),
                resource_types: "sco".into(),
            },
            expiry,
        )
    }

    /// A service SAS reading the blobs of `container` (`sr=c`, `sp=r`) until `expiry`.
    pub fn container(container: &str, expiry: SystemTime) -> Sas {
        Self::new(SasScope::Container(container.into()), expiry)
    }

    /// A service SAS reading one blob (`sr=b`, `sp=r`) until `expiry`.
    pub fn blob(container: &str, blob: &str, expiry: SystemTime) -> Sas {
        Self::new(
            SasScope::Blob {
                container: container.into(),
                blob: blob.into(),
            },
            expiry,
        )
    }

    /// With these permissions (`sp`).
    pub fn permissions(mut self, permissions: &str) -> Sas {
        self.permissions = permissions.into();
        self
    }

    /// Valid from `start` (`st`).
    pub fn start(mut self, start: SystemTime) -> Sas {
        self.start = Some(awstime::rfc3339(start));
        self
    }

    /// Only over this protocol (`spr`: `https` or `https,http`).
    pub fn protocol(mut self, protocol: &str) -> Sas {
        self.protocol = Some(protocol.into());
        self
    }

    /// Only from this address or range (`sip`).
    pub fn ip(mut self, ip: &str) -> Sas {
        self.ip = Some(ip.into());
        self
    }

    /// For account SAS: these services and resource types (`ss`, `srt`); ignored otherwise.
    pub fn account_scope(mut self, services: &str, resource_types: &str) -> Sas {
        if let SasScope::Account { .. } = self.scope {
            self.scope = SasScope::Account {
                services: services.into(),
                resource_types: resource_types.into(),
            };
        }
        self
    }

    /// The documented string to sign of this SAS for `account`.
    pub fn string_to_sign(&self, account: &str) -> String {
        let fields = self.fields();
        match &self.scope {
            SasScope::Account { .. } => account_string_to_sign(&fields, account),
            SasScope::Container(container) => {
                service_string_to_sign(&fields, &canonical_resource(account, container, None))
            }
            SasScope::Blob { container, blob } => {
                service_string_to_sign(&fields, &canonical_resource(account, container, Some(blob)))
            }
        }
    }

    /// The token: the query string (without `?`) of the fields and their signature with
    /// `key` (the account key, decoded from base64).
    pub fn token(&self, account: &str, key: &[u8]) -> String {
        let sig = sharedkey::sign(key, &self.string_to_sign(account));
        let mut pairs: Vec<(&str, &str)> = vec![("sv", &self.version)];
        match &self.scope {
            SasScope::Account {
                services,
                resource_types,
            } => {
                pairs.push(("ss", services));
                pairs.push(("srt", resource_types));
            }
            SasScope::Container(_) => pairs.push(("sr", "c")),
            SasScope::Blob { .. } => pairs.push(("sr", "b")),
        }
        pairs.push(("sp", &self.permissions));
        if let Some(start) = &self.start {
            pairs.push(("st", start));
        }
        pairs.push(("se", &self.expiry));
        for (name, value) in [
            ("sip", &self.ip),
            ("spr", &self.protocol),
            ("ses", &self.encryption_scope),
        ] {
            if let Some(value) = value {
                pairs.push((name, value));
            }
        }
        pairs.push(("sig", &sig));
        pairs
            .iter()
            .map(|(n, v)| format!("{n}={}", utf8_percent_encode(v, QUERY)))
            .collect::<Vec<_>>()
            .join("&")
    }

    fn fields(&self) -> Fields {
        let (services, resource_types, resource) = match &self.scope {
            SasScope::Account {
                services,
                resource_types,
            } => (Some(services.clone()), Some(resource_types.clone()), None),
            SasScope::Container(_) => (None, None, Some("c".to_string())),
            SasScope::Blob { .. } => (None, None, Some("b".to_string())),
        };
        Fields {
            version: Some(self.version.clone()),
            permissions: Some(self.permissions.clone()),
            start: self.start.clone(),
            expiry: Some(self.expiry.clone()),
            ip: self.ip.clone(),
            protocol: self.protocol.clone(),
            encryption_scope: self.encryption_scope.clone(),
            services,
            resource_types,
            resource,
            ..Fields::default()
        }
    }
}

/// The SAS fields of a query, decoded.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Fields {
    version: Option<String>,
    permissions: Option<String>,
    start: Option<String>,
    expiry: Option<String>,
    ip: Option<String>,
    protocol: Option<String>,
    encryption_scope: Option<String>,
    services: Option<String>,
    resource_types: Option<String>,
    resource: Option<String>,
    identifier: Option<String>,
    snapshot: Option<String>,
    signature: Option<String>,
    /// `rscc`, `rscd`, `rsce`, `rscl`, `rsct`: response headers the service would override.
    overrides: [Option<String>; 5],
}

const OVERRIDES: [&str; 5] = ["rscc", "rscd", "rsce", "rscl", "rsct"];

impl Fields {
    fn parse(query: &str) -> Fields {
        let mut fields = Fields::default();
        for pair in query.split('&').filter(|p| !p.is_empty()) {
            let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
            let value = percent_decode_str(value).decode_utf8_lossy().into_owned();
            let slot = match name {
                "sv" => &mut fields.version,
                "sp" => &mut fields.permissions,
                "st" => &mut fields.start,
                "se" => &mut fields.expiry,
                "sip" => &mut fields.ip,
                "spr" => &mut fields.protocol,
                "ses" => &mut fields.encryption_scope,
                "ss" => &mut fields.services,
                "srt" => &mut fields.resource_types,
                "sr" => &mut fields.resource,
                "si" => &mut fields.identifier,
                "sst" => &mut fields.snapshot,
                "sig" => &mut fields.signature,
                other => match OVERRIDES.iter().position(|o| *o == other) {
                    Some(i) => &mut fields.overrides[i],
                    None => continue,
                },
            };
            // The first occurrence counts.
            slot.get_or_insert(value);
        }
        fields
    }
}

fn or_empty(value: &Option<String>) -> &str {
    value.as_deref().unwrap_or("")
}

/// `/blob/account/container[/blob]`, the blob name not encoded.
fn canonical_resource(account: &str, container: &str, blob: Option<&str>) -> String {
    match blob {
        Some(blob) => format!("/blob/{account}/{container}/{blob}"),
        None => format!("/blob/{account}/{container}"),
    }
}

/// The account SAS string to sign (2020-12-06 and later): account, `sp`, `ss`, `srt`, `st`,
/// `se`, `sip`, `spr`, `sv`, `ses`, each followed by a newline.
fn account_string_to_sign(f: &Fields, account: &str) -> String {
    let mut text = String::new();
    for value in [
        account,
        or_empty(&f.permissions),
        or_empty(&f.services),
        or_empty(&f.resource_types),
        or_empty(&f.start),
        or_empty(&f.expiry),
        or_empty(&f.ip),
        or_empty(&f.protocol),
        or_empty(&f.version),
        or_empty(&f.encryption_scope),
    ] {
        text.push_str(value);
        text.push('\n');
    }
    text
}

/// The service SAS string to sign for Blob storage (2020-12-06 and later): `sp`, `st`, `se`,
/// the canonicalized resource, `si`, `sip`, `spr`, `sv`, `sr`, the snapshot time, `ses`,
/// `rscc`, `rscd`, `rsce`, `rscl`, `rsct`, joined by newlines.
fn service_string_to_sign(f: &Fields, resource: &str) -> String {
    let mut lines = vec![
        or_empty(&f.permissions),
        or_empty(&f.start),
        or_empty(&f.expiry),
        resource,
        or_empty(&f.identifier),
        or_empty(&f.ip),
        or_empty(&f.protocol),
        or_empty(&f.version),
        or_empty(&f.resource),
        or_empty(&f.snapshot),
        or_empty(&f.encryption_scope),
    ];
    lines.extend(f.overrides.iter().map(or_empty));
    lines.join("\n")
}

/// What a request asks of a SAS.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Access<'a> {
    /// The account the service is.
    pub(crate) account: &'a str,
    /// The account key.
    pub(crate) key: &'a [u8],
    /// The container named by the path.
    pub(crate) container: &'a str,
    /// The blob named by the path, decoded; `None` for a request of the container.
    pub(crate) blob: Option<&'a str>,
    /// The service's clock.
    pub(crate) now: SystemTime,
    /// Whether the request came over TLS.
    pub(crate) tls: bool,
    /// The client's address.
    pub(crate) client: Ipv4Addr,
}

/// Why [`verify`] refused a SAS.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// A mandatory field is missing or a field cannot be read.
    Malformed(String),
    /// A form of SAS the mock does not verify (older versions, stored access policies,
    /// snapshot, version and directory scopes).
    Unsupported(String),
    /// The signature differs from the one of the string to sign.
    Signature { string_to_sign: String },
    /// The mock's clock is past `se`.
    Expired { expiry: SystemTime, now: SystemTime },
    /// The mock's clock is before `st`.
    NotYetValid { start: SystemTime, now: SystemTime },
    /// `spr=https` over plain HTTP.
    Protocol,
    /// The client's address is outside `sip`.
    SourceIp,
    /// An account SAS without the blob service.
    Service,
    /// An account SAS without the resource type of the request.
    ResourceType,
    /// The permission the request needs is not granted.
    Permission,
}

/// Whether the SAS in `query` lets `access` read.
pub(crate) fn verify(query: &str, access: &Access<'_>) -> Result<(), Refusal> {
    let f = Fields::parse(query);
    let malformed = |what: &str| Err(Refusal::Malformed(what.to_string()));
    let time = |value: &str, what: &str| {
        awstime::parse_iso8601_utc(value).ok_or_else(|| Refusal::Malformed(what.to_string()))
    };
    let (Some(version), Some(signature)) = (&f.version, &f.signature) else {
        return malformed("sv and sig are mandatory.");
    };
    if f.identifier.is_some() {
        return Err(Refusal::Unsupported(
            "the mock has no stored access policies (si)".into(),
        ));
    }
    let Some(permissions) = f.permissions.as_deref().filter(|p| !p.is_empty()) else {
        return malformed("sp is mandatory. Cannot be empty");
    };
    let Some(expiry) = &f.expiry else {
        return malformed("se is mandatory. Cannot be empty");
    };
    if awstime::parse_iso8601_utc(version).is_none() || version.len() != 10 {
        return malformed("sv is not a service version (YYYY-MM-DD).");
    }
    if version.as_str() < OLDEST_VERSION {
        return Err(Refusal::Unsupported(format!(
            "the mock verifies SAS versions {OLDEST_VERSION} and later, not {version}"
        )));
    }
    let account_sas = f.services.is_some() || f.resource_types.is_some();
    let string_to_sign = if account_sas {
        if f.resource.is_some() {
            return malformed("sr is not a field of an account SAS.");
        }
        if f.services.is_none() || f.resource_types.is_none() {
            return malformed("ss and srt are mandatory in an account SAS.");
        }
        account_string_to_sign(&f, access.account)
    } else {
        let resource = match f.resource.as_deref() {
            Some("c") => canonical_resource(access.account, access.container, None),
            // A blob SAS signs the requested blob: for another blob the signature differs.
            Some("b") => canonical_resource(
                access.account,
                access.container,
                Some(access.blob.unwrap_or("")),
            ),
            Some(other @ ("bs" | "bv" | "d")) => {
                return Err(Refusal::Unsupported(format!(
                    "the mock serves no snapshots, versions or directories (sr={other})"
                )));
            }
            Some(_) => return malformed("sr is not a Blob storage resource."),
            None => return malformed("sr is mandatory in a service SAS."),
        };
        service_string_to_sign(&f, &resource)
    };
    if sharedkey::sign(access.key, &string_to_sign) != *signature {
        return Err(Refusal::Signature { string_to_sign });
    }

    let expiry = time(expiry, "se is not an ISO 8601 UTC time.")?;
    let start = match &f.start {
        Some(start) => Some(time(start, "st is not an ISO 8601 UTC time.")?),
        None => None,
    };
    if access.now > expiry {
        return Err(Refusal::Expired {
            expiry,
            now: access.now,
        });
    }
    if let Some(start) = start.filter(|start| *start > access.now) {
        return Err(Refusal::NotYetValid {
            start,
            now: access.now,
        });
    }
    if let Some(ip) = &f.ip {
        let (low, high) = ip.split_once('-').unwrap_or((ip, ip));
        let (Ok(low), Ok(high)) = (low.parse::<Ipv4Addr>(), high.parse::<Ipv4Addr>()) else {
            return malformed("sip is not an address or a range of addresses.");
        };
        if !(low..=high).contains(&access.client) {
            return Err(Refusal::SourceIp);
        }
    }
    match f.protocol.as_deref() {
        None | Some("https,http") => {}
        Some("https") if access.tls => {}
        Some("https") => return Err(Refusal::Protocol),
        Some(_) => return malformed("spr is https or https,http."),
    }
    // A blob is read with `r` (an object for an account SAS); a container is listed with `l`.
    let (resource_type, permission) = match access.blob {
        Some(_) => ('o', 'r'),
        None => ('c', 'l'),
    };
    if account_sas {
        if !or_empty(&f.services).contains('b') {
            return Err(Refusal::Service);
        }
        if !or_empty(&f.resource_types).contains(resource_type) {
            return Err(Refusal::ResourceType);
        }
    }
    if !permissions.contains(permission) {
        return Err(Refusal::Permission);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use base64::Engine;
    use base64::engine::general_purpose::STANDARD;
    use hmac::{Hmac, KeyInit, Mac};
    use sha2::Sha256;

    use super::*;
    use crate::azure::{DEV_ACCOUNT, DEV_KEY};

    fn key() -> Vec<u8> {
        STANDARD.decode(DEV_KEY).unwrap()
    }

    /// 2026-12-01T06:00:00Z.
    fn noon() -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(1_796_104_800)
    }

    fn access<'a>(key: &'a [u8], container: &'a str, blob: Option<&'a str>) -> Access<'a> {
        Access {
            account: DEV_ACCOUNT,
            key,
            container,
            blob,
            now: noon(),
            tls: false,
            client: Ipv4Addr::LOCALHOST,
        }
    }

    /// HMAC-SHA256 of `text`, computed here without the module's signer.
    fn hmac(text: &str) -> String {
        let mut mac = <Hmac<Sha256> as KeyInit>::new_from_slice(&key()).unwrap();
        mac.update(text.as_bytes());
        STANDARD.encode(mac.finalize().into_bytes())
    }

    fn enc(s: &str) -> String {
        utf8_percent_encode(s, NON_ALPHANUMERIC).to_string()
    }

    #[test]
    fn a_service_sas_written_out_by_hand_from_the_documentation_is_accepted() {
        // The documented fields in order: sp, st, se, canonicalizedResource, si, sip, spr, sv,
        // sr, snapshot time, ses, rscc, rscd, rsce, rscl, rsct.
        let text = "r\n2026-12-01T05:00:00Z\n2026-12-01T07:00:00Z\n\
                    /blob/devstoreaccount1/data/dir/a b.bin\n\n127.0.0.1\nhttps,http\n\
                    2023-11-03\nb\n\n\n\n\n\n\ntext/plain";
        let query = format!(
            "sv=2023-11-03&sr=b&sp=r&st=2026-12-01T05%3A00%3A00Z&se=2026-12-01T07%3A00%3A00Z\
             &sip=127.0.0.1&spr=https,http&rsct=text%2Fplain&sig={}",
            enc(&hmac(text))
        );
        let key = key();
        assert_eq!(
            verify(&query, &access(&key, "data", Some("dir/a b.bin"))),
            Ok(())
        );
        // The same token for another blob or another container: the signature differs.
        for (container, blob) in [("data", "dir/b.bin"), ("other", "dir/a b.bin")] {
            assert!(matches!(
                verify(&query, &access(&key, container, Some(blob))),
                Err(Refusal::Signature { .. })
            ));
        }
    }

    #[test]
    fn an_account_sas_written_out_by_hand_from_the_documentation_is_accepted() {
        // account, sp, ss, srt, st, se, sip, spr, sv, ses, each followed by a newline.
        let text = "devstoreaccount1\nrl\nb\nco\n\n2026-12-01T07:00:00Z\n\n\n2023-11-03\n\n";
        let query = format!(
            "sv=2023-11-03&ss=b&srt=co&sp=rl&se=2026-12-01T07:00:00Z&sig={}",
            enc(&hmac(text))
        );
        let key = key();
        assert_eq!(verify(&query, &access(&key, "data", Some("a.bin"))), Ok(()));
        assert_eq!(verify(&query, &access(&key, "other", None)), Ok(()));
        // The account is signed: another account's service refuses it.
        let mut other = access(&key, "data", Some("a.bin"));
        other.account = "otheraccount";
        assert!(matches!(
            verify(&query, &other),
            Err(Refusal::Signature { .. })
        ));
    }

    #[test]
    fn tokens_made_here_match_the_hand_written_strings() {
        let expiry = noon() + Duration::from_secs(3600);
        let sas = Sas::account(expiry)
            .permissions("rl")
            .account_scope("b", "co");
        assert_eq!(
            sas.string_to_sign(DEV_ACCOUNT),
            "devstoreaccount1\nrl\nb\nco\n\n2026-12-01T07:00:00Z\n\n\n2023-11-03\n\n"
        );
        let token = sas.token(DEV_ACCOUNT, &key());
        let sig = hmac(&sas.string_to_sign(DEV_ACCOUNT));
        assert!(token.ends_with(&format!("&sig={}", enc(&sig))), "{token}");
        let sas = Sas::blob("data", "dir/a b.bin", expiry)
            .start(noon() - Duration::from_secs(3600))
            .ip("127.0.0.1")
            .protocol("https,http");
        assert_eq!(
            sas.string_to_sign(DEV_ACCOUNT),
            "r\n2026-12-01T05:00:00Z\n2026-12-01T07:00:00Z\n\
             /blob/devstoreaccount1/data/dir/a b.bin\n\n127.0.0.1\nhttps,http\n\
             2023-11-03\nb\n\n\n\n\n\n\n"
        );
    }

    #[test]
    fn every_check_refuses_what_it_guards() {
        let key = key();
        let blob = access(&key, "data", Some("a.bin"));
        let later = noon() + Duration::from_secs(3600);
        let token = |sas: Sas| sas.token(DEV_ACCOUNT, &key);
        let refusal = |sas: Sas| verify(&token(sas), &blob);

        assert_eq!(refusal(Sas::container("data", later)), Ok(()));
        assert_eq!(refusal(Sas::blob("data", "a.bin", later)), Ok(()));
        assert_eq!(refusal(Sas::account(later)), Ok(()));
        assert_eq!(
            refusal(Sas::container("data", noon() - Duration::from_secs(1))),
            Err(Refusal::Expired {
                expiry: noon() - Duration::from_secs(1),
                now: noon()
            })
        );
        assert_eq!(
            refusal(Sas::container("data", later).start(noon() + Duration::from_secs(60))),
            Err(Refusal::NotYetValid {
                start: noon() + Duration::from_secs(60),
                now: noon()
            })
        );
        assert_eq!(
            refusal(Sas::container("data", later).permissions("wl")),
            Err(Refusal::Permission)
        );
        assert_eq!(
            refusal(Sas::account(later).account_scope("b", "sc")),
            Err(Refusal::ResourceType)
        );
        assert_eq!(
            refusal(Sas::account(later).account_scope("qf", "sco")),
            Err(Refusal::Service)
        );
        assert_eq!(
            refusal(Sas::container("data", later).protocol("https")),
            Err(Refusal::Protocol)
        );
        let mut tls = blob;
        tls.tls = true;
        let https_only = token(Sas::container("data", later).protocol("https"));
        assert_eq!(verify(&https_only, &tls), Ok(()));
        assert_eq!(
            refusal(Sas::container("data", later).ip("10.0.0.1-10.0.0.9")),
            Err(Refusal::SourceIp)
        );
        assert_eq!(
            refusal(Sas::container("data", later).ip("127.0.0.0-127.0.0.255")),
            Ok(())
        );
        assert!(matches!(
            refusal(Sas::container("other", later)),
            Err(Refusal::Signature { .. })
        ));
        let mut old = Sas::container("data", later);
        old.version = "2019-12-12".into();
        assert!(matches!(refusal(old), Err(Refusal::Unsupported(_))));

        // A field changed after signing breaks the signature.
        let good = token(Sas::container("data", later));
        let widened = good.replace("sp=r", "sp=rw");
        assert!(matches!(
            verify(&widened, &blob),
            Err(Refusal::Signature { .. })
        ));
        let extended = good.replace("se=2026", "se=2027");
        assert!(matches!(
            verify(&extended, &blob),
            Err(Refusal::Signature { .. })
        ));
        // Missing fields.
        for (from, to) in [("sp=r&", ""), ("&sr=c", ""), ("sv=2023-11-03&", "")] {
            let broken = good.replace(from, to);
            assert!(
                matches!(verify(&broken, &blob), Err(Refusal::Malformed(_))),
                "{broken}"
            );
        }
        assert!(matches!(
            verify(&format!("{good}&si=policy"), &blob),
            Err(Refusal::Unsupported(_))
        ));
    }
}
