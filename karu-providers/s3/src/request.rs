//! Address parsing, URL building, SigV4 signing and the error answers that ask for a
//! correction.

use std::time::SystemTime;

use aws_credential_types::Credentials;
use aws_sigv4::http_request::{
    PayloadChecksumKind, PercentEncodingMode, SignableBody, SignableRequest, SigningSettings,
    UriPathNormalizationMode, sign,
};
use aws_sigv4::sign::v4;
use aws_smithy_runtime_api::client::identity::Identity;
use http::HeaderMap;
use http::header::{HeaderName, HeaderValue};
use karu_engine::sdk::error_body::xml_element;
use karu_engine::sdk::{
    CanonicalPath, Correction, Error, Resolved, Status, encode_path, endpoint_problem, redact,
};
use percent_encoding::percent_decode_str;

use crate::config::Addressing;

/// What can go wrong here; converted into the engine's public error at the boundary.
#[derive(Debug, thiserror::Error)]
pub(crate) enum S3Error {
    #[error("invalid S3 address {address}: {why}")]
    InvalidAddress { address: String, why: &'static str },
    #[error("the S3 endpoint {0}")]
    InvalidEndpoint(&'static str),
    #[error("cannot sign the request: {0}")]
    Signing(String),
}

impl From<S3Error> for Error {
    fn from(e: S3Error) -> Self {
        let status = match e {
            S3Error::Signing(_) => Status::Credentials,
            S3Error::InvalidAddress { .. } | S3Error::InvalidEndpoint(_) => Status::InvalidArgument,
        };
        Error::new(status, e.to_string())
    }
}

/// A parsed S3 address: bucket, key, and the region the URL named, if any.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Address {
    pub(crate) bucket: String,
    pub(crate) key: String,
    pub(crate) region: Option<String>,
}

impl Address {
    /// The object, and the region the address named as a hint for preparing its requests.
    pub(crate) fn resolved(&self) -> Resolved {
        Resolved::remote(
            CanonicalPath::new(format!("s3://{}/{}", self.bucket, self.key)),
            Some(self.bucket.clone()),
            self.key.clone(),
        )
        .with_region(self.region.clone())
    }
}

/// Parse `s3://bucket/key` (the key as written) or an AWS S3 URL (virtual-hosted or path
/// style; the path percent-decoded).
pub(crate) fn parse(address: &str) -> Result<Address, S3Error> {
    let invalid = |why| S3Error::InvalidAddress {
        address: redact::address(address),
        why,
    };
    let s3_scheme = address
        .get(..5)
        .is_some_and(|scheme| scheme.eq_ignore_ascii_case("s3://"));
    if s3_scheme {
        let rest = &address[5..];
        let (bucket, key) = rest
            .split_once('/')
            .ok_or_else(|| invalid("no key after the bucket"))?;
        check_bucket(bucket).map_err(invalid)?;
        if key.is_empty() {
            return Err(invalid("the key is empty"));
        }
        return Ok(Address {
            bucket: bucket.to_string(),
            key: key.to_string(),
            region: None,
        });
    }
    let url = url::Url::parse(address).map_err(|_| invalid("not a URL"))?;
    let host = url
        .host_str()
        .ok_or_else(|| invalid("no host"))?
        .to_ascii_lowercase();
    let path = url.path();
    let decoded = |s: &str| percent_decode_str(s).decode_utf8().map(|c| c.into_owned());
    let stem = host
        .strip_suffix(".amazonaws.com")
        .ok_or_else(|| invalid("not an amazonaws.com host"))?;
    // Virtual-hosted: bucket.s3[.-]region[.dualstack], path-style: s3[.-]region.
    let (bucket, region, key_path) = match split_s3_host(stem) {
        Some((Some(bucket), region)) => (bucket, region, path.trim_start_matches('/')),
        Some((None, region)) => {
            let path = path.trim_start_matches('/');
            let (bucket, key) = path
                .split_once('/')
                .ok_or_else(|| invalid("no key after the bucket"))?;
            (
                decoded(bucket).map_err(|_| invalid("the bucket is not UTF-8"))?,
                region,
                key,
            )
        }
        None => return Err(invalid("not an S3 host")),
    };
    check_bucket(&bucket).map_err(invalid)?;
    let key = decoded(key_path).map_err(|_| invalid("the key is not UTF-8"))?;
    if key.is_empty() {
        return Err(invalid("the key is empty"));
    }
    Ok(Address {
        bucket,
        key,
        region,
    })
}

/// Split the part of an amazonaws.com host before the suffix into (bucket, region):
/// `b.s3`, `b.s3.eu-west-1`, `b.s3-eu-west-1`, `b.s3.dualstack.eu-west-1`, `s3`,
/// `s3.eu-west-1`, `s3-eu-west-1`. `None` if it is not S3.
fn split_s3_host(stem: &str) -> Option<(Option<String>, Option<String>)> {
    let labels: Vec<&str> = stem.split('.').collect();
    let s3_at = labels
        .iter()
        .rposition(|l| *l == "s3" || l.starts_with("s3-"))?;
    let bucket = (s3_at > 0).then(|| labels[..s3_at].join("."));
    let mut region = labels[s3_at].strip_prefix("s3-").map(str::to_string);
    for label in &labels[s3_at + 1..] {
        if *label != "dualstack" && *label != "s3-accelerate" {
            region = Some((*label).to_string());
        }
    }
    if region.as_deref() == Some("external-1") {
        region = Some("us-east-1".into());
    }
    Some((bucket, region))
}

/// Bucket names: 3–63 of lower-case letters, digits, dots and hyphens.
fn check_bucket(bucket: &str) -> Result<(), &'static str> {
    let ok = (3..=63).contains(&bucket.len())
        && bucket
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'.' || b == b'-')
        && !bucket.starts_with(['.', '-'])
        && !bucket.ends_with(['.', '-']);
    if ok {
        Ok(())
    } else {
        Err("not a valid bucket name (3–63 lower-case letters, digits, dots, hyphens)")
    }
}

/// The URL of an object.
pub(crate) fn object_url(
    bucket: &str,
    key: &str,
    region: &str,
    endpoint: Option<&str>,
    addressing: Option<Addressing>,
) -> Result<String, S3Error> {
    let key = encode_path(key);
    match endpoint {
        Some(endpoint) => {
            // `Effective::resolve` checked it already; this keeps the function whole.
            if let Some(why) = endpoint_problem(endpoint) {
                return Err(S3Error::InvalidEndpoint(why));
            }
            let url =
                url::Url::parse(endpoint).map_err(|_| S3Error::InvalidEndpoint("is not a URL"))?;
            let base = endpoint.trim_end_matches('/');
            match addressing.unwrap_or(Addressing::Path) {
                Addressing::Path => Ok(format!("{base}/{bucket}/{key}")),
                Addressing::Virtual => {
                    let host = url.host_str().unwrap_or_default();
                    let port = url.port().map(|p| format!(":{p}")).unwrap_or_default();
                    Ok(format!("{}://{bucket}.{host}{port}/{key}", url.scheme()))
                }
            }
        }
        None => {
            let host = format!("s3.{region}.amazonaws.com");
            let virtual_ok = !bucket.contains('.');
            match addressing.unwrap_or(Addressing::Virtual) {
                Addressing::Virtual if virtual_ok => Ok(format!("https://{bucket}.{host}/{key}")),
                _ => Ok(format!("https://{host}/{bucket}/{key}")),
            }
        }
    }
}

/// Sign the request in place with SigV4 for S3 (`x-amz-content-sha256: UNSIGNED-PAYLOAD`,
/// no double encoding, no path normalisation), at `time`.
pub(crate) fn sign_request(
    url: &http::Uri,
    headers: &mut HeaderMap,
    credentials: &Credentials,
    region: &str,
    time: SystemTime,
) -> Result<(), S3Error> {
    let identity: Identity = credentials.clone().into();
    let mut settings = SigningSettings::default();
    settings.payload_checksum_kind = PayloadChecksumKind::XAmzSha256;
    settings.percent_encoding_mode = PercentEncodingMode::Single;
    settings.uri_path_normalization_mode = UriPathNormalizationMode::Disabled;
    let params = v4::SigningParams::builder()
        .identity(&identity)
        .region(region)
        .name("s3")
        .time(time)
        .settings(settings)
        .build()
        .map_err(|e| S3Error::Signing(e.to_string()))?
        .into();
    let url_text = url.to_string();
    let pairs: Vec<(&str, &str)> = headers
        .iter()
        .filter_map(|(name, value)| Some((name.as_str(), value.to_str().ok()?)))
        .collect();
    let signable = SignableRequest::new(
        "GET",
        &url_text,
        pairs.into_iter(),
        SignableBody::UnsignedPayload,
    )
    .map_err(|e| S3Error::Signing(e.to_string()))?;
    let (instructions, _signature) = sign(signable, &params)
        .map_err(|e| S3Error::Signing(e.to_string()))?
        .into_parts();
    let (signing_headers, _params) = instructions.into_parts();
    for header in signing_headers {
        let name = HeaderName::from_static(header.name());
        let mut value = HeaderValue::from_str(header.value())
            .map_err(|_| S3Error::Signing("a signing header is not a valid value".into()))?;
        value.set_sensitive(header.sensitive() || name == http::header::AUTHORIZATION);
        headers.insert(name, value);
    }
    Ok(())
}

/// The correction an S3 error answer asks for, if any.
pub(crate) fn correction(status: u16, headers: &HeaderMap, body: &[u8]) -> Option<Correction> {
    let text = String::from_utf8_lossy(body);
    let code = xml_element(&text, "Code").map(str::trim);
    if matches!(
        code,
        Some("ExpiredToken" | "ExpiredTokenException" | "TokenRefreshRequired")
    ) {
        return Some(Correction::Reauthenticate);
    }
    let wrong_region = matches!(status, 301 | 307 | 400)
        || code == Some("AuthorizationHeaderMalformed")
        || code == Some("PermanentRedirect");
    if !wrong_region {
        return None;
    }
    let region = headers
        .get("x-amz-bucket-region")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string)
        .or_else(|| {
            xml_element(&text, "Region")
                .map(str::trim)
                .map(str::to_string)
        })?;
    let valid = !region.is_empty()
        && region
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
    valid.then_some(Correction::Reprepare { region })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addr(bucket: &str, key: &str, region: Option<&str>) -> Address {
        Address {
            bucket: bucket.into(),
            key: key.into(),
            region: region.map(Into::into),
        }
    }

    #[test]
    fn address_forms() {
        assert_eq!(
            parse("s3://bucket/a/b.bin").unwrap(),
            addr("bucket", "a/b.bin", None)
        );
        assert_eq!(
            parse("s3://bucket/with space/%41").unwrap(),
            addr("bucket", "with space/%41", None),
            "s3:// keys are literal"
        );
        assert_eq!(
            parse("https://bucket.s3.eu-west-1.amazonaws.com/a/b%20c").unwrap(),
            addr("bucket", "a/b c", Some("eu-west-1"))
        );
        assert_eq!(
            parse("https://bucket.s3.amazonaws.com/k").unwrap(),
            addr("bucket", "k", None)
        );
        assert_eq!(
            parse("https://bucket.s3-us-west-2.amazonaws.com/k").unwrap(),
            addr("bucket", "k", Some("us-west-2"))
        );
        assert_eq!(
            parse("https://s3.eu-central-1.amazonaws.com/my.bucket/k/x").unwrap(),
            addr("my.bucket", "k/x", Some("eu-central-1"))
        );
        assert_eq!(
            parse("https://my.dotted.bucket.s3.dualstack.ap-south-1.amazonaws.com/k").unwrap(),
            addr("my.dotted.bucket", "k", Some("ap-south-1"))
        );
        assert_eq!(
            parse("https://s3-external-1.amazonaws.com/b12/k").unwrap(),
            addr("b12", "k", Some("us-east-1"))
        );
    }

    #[test]
    fn non_ascii_addresses_are_refused_without_a_panic() {
        // Byte 5 inside a character once panicked.
        for bad in ["s3:/ü/k", "s3:ü", "s3://ü/k", "s3:/\u{7d3}"] {
            assert!(parse(bad).is_err(), "{bad}");
        }
        assert_eq!(
            parse("s3://bucket/ü/k").unwrap(),
            addr("bucket", "ü/k", None)
        );
    }

    #[test]
    fn bad_addresses() {
        for bad in [
            "s3://bucket",
            "s3://bucket/",
            "s3://BUCKET/k",
            "s3://ab/k",
            "https://ec2.amazonaws.com/b/k",
            "https://s3.amazonaws.com/bucket",
            "https://bucket.s3.amazonaws.com/",
        ] {
            assert!(parse(bad).is_err(), "{bad}");
        }
        let e: Error = parse("https://ec2.amazonaws.com/x?sig=SECRET")
            .unwrap_err()
            .into();
        assert!(!e.message().contains("SECRET"), "{e}");
    }

    #[test]
    fn urls() {
        assert_eq!(
            object_url("b", "a b/c+d", "eu-west-1", None, None).unwrap(),
            "https://b.s3.eu-west-1.amazonaws.com/a%20b/c%2Bd"
        );
        assert_eq!(
            object_url("my.b", "k", "eu-west-1", None, None).unwrap(),
            "https://s3.eu-west-1.amazonaws.com/my.b/k"
        );
        assert_eq!(
            object_url("b", "k", "r", None, Some(Addressing::Path)).unwrap(),
            "https://s3.r.amazonaws.com/b/k"
        );
        assert_eq!(
            object_url("b", "k/ü", "r", Some("http://127.0.0.1:9000/"), None).unwrap(),
            "http://127.0.0.1:9000/b/k/%C3%BC"
        );
        assert_eq!(
            object_url(
                "b",
                "k",
                "r",
                Some("https://minio.lan:9000"),
                Some(Addressing::Virtual)
            )
            .unwrap(),
            "https://b.minio.lan:9000/k"
        );
        assert!(object_url("b", "k", "r", Some("ftp://x"), None).is_err());
    }

    #[test]
    fn signing_binds_range_region_and_time() {
        let creds = Credentials::new("AKIDEXAMPLE", "secret", Some("tok".into()), None, "test");
        let url: http::Uri = "http://127.0.0.1:9000/b/k".parse().unwrap();
        let mut headers = HeaderMap::new();
        headers.insert(http::header::RANGE, HeaderValue::from_static("bytes=0-9"));
        let t = SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1_700_000_000);
        sign_request(&url, &mut headers, &creds, "us-east-1", t).unwrap();
        let auth = headers
            .get("authorization")
            .unwrap()
            .to_str()
            .unwrap()
            .to_string();
        assert!(
            auth.starts_with(
                "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20231114/us-east-1/s3/aws4_request"
            ),
            "{auth}"
        );
        assert!(auth.contains("range"), "the range is signed: {auth}");
        assert!(auth.contains("x-amz-security-token"), "{auth}");
        assert_eq!(
            headers.get("x-amz-content-sha256").unwrap(),
            "UNSIGNED-PAYLOAD"
        );
        assert_eq!(headers.get("x-amz-security-token").unwrap(), "tok");
        assert!(headers.get("authorization").unwrap().is_sensitive());
        // Another region or another range gives another signature.
        let mut other = HeaderMap::new();
        other.insert(http::header::RANGE, HeaderValue::from_static("bytes=0-9"));
        sign_request(&url, &mut other, &creds, "eu-west-1", t).unwrap();
        assert_ne!(other.get("authorization"), headers.get("authorization"));
    }

    #[test]
    fn corrections() {
        let mut h = HeaderMap::new();
        h.insert("x-amz-bucket-region", HeaderValue::from_static("eu-west-1"));
        assert_eq!(
            correction(301, &h, b"<Error><Code>PermanentRedirect</Code></Error>"),
            Some(Correction::Reprepare {
                region: "eu-west-1".into()
            })
        );
        let body =
            b"<Error><Code>AuthorizationHeaderMalformed</Code><Region>ap-south-1</Region></Error>";
        assert_eq!(
            correction(400, &HeaderMap::new(), body),
            Some(Correction::Reprepare {
                region: "ap-south-1".into()
            })
        );
        assert_eq!(
            correction(
                400,
                &HeaderMap::new(),
                b"<Error><Code>ExpiredToken</Code></Error>"
            ),
            Some(Correction::Reauthenticate)
        );
        assert_eq!(
            correction(
                403,
                &HeaderMap::new(),
                b"<Error><Code>AccessDenied</Code></Error>"
            ),
            None
        );
        assert_eq!(
            correction(
                400,
                &HeaderMap::new(),
                b"<Error><Code>InvalidArgument</Code></Error>"
            ),
            None
        );
        let mut evil = HeaderMap::new();
        evil.insert("x-amz-bucket-region", HeaderValue::from_static("../../x"));
        assert_eq!(correction(301, &evil, b""), None);
    }
}
