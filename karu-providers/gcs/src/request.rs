//! Address parsing, URL building (XML API paths, JSON API media downloads), HMAC (V4)
//! signing, the headers that show a transformed answer, and the error answers that ask for a
//! correction. Pure functions, no input or output.

use hmac::{Hmac, KeyInit, Mac};
use karu_engine::sdk::http::HeaderMap;
use karu_engine::sdk::http::header::{CONTENT_ENCODING, CONTENT_RANGE, HeaderValue, WARNING};
use karu_engine::sdk::{
    CanonicalPath, Correction, Error, Resolved, Status, encode_path, endpoint_problem, redact,
    shown_endpoint,
};
use percent_encoding::percent_decode_str;
use sha2::{Digest, Sha256};

/// Google's public endpoint of the XML API.
pub(crate) const DEFAULT_ENDPOINT: &str = "https://storage.googleapis.com";

/// The longest object name GCS accepts, in bytes of UTF-8.
const MAX_KEY_BYTES: usize = 1024;

/// What can go wrong here; converted into the engine's public error at the boundary.
#[derive(Debug, thiserror::Error)]
pub(crate) enum GcsError {
    #[error("invalid GCS address {address}: {why}")]
    InvalidAddress { address: String, why: &'static str },
    #[error("the GCS endpoint {endpoint} {why}")]
    InvalidEndpoint { endpoint: String, why: &'static str },
    #[error("cannot sign the GCS request: {0}")]
    Signing(&'static str),
}

impl From<GcsError> for Error {
    fn from(e: GcsError) -> Self {
        let status = match e {
            GcsError::Signing(_) => Status::Credentials,
            _ => Status::InvalidArgument,
        };
        Error::new(status, e.to_string())
    }
}

/// A parsed GCS address: bucket and object name (decoded, exactly as stored).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Address {
    pub(crate) bucket: String,
    pub(crate) key: String,
}

impl Address {
    /// The object: canonical `gs://bucket/key`, the bucket as container.
    pub(crate) fn resolved(&self) -> Resolved {
        Resolved::remote(
            CanonicalPath::new(format!("gs://{}/{}", self.bucket, self.key)),
            Some(self.bucket.clone()),
            self.key.clone(),
        )
    }
}

/// Parse `gs://bucket/key` (the key as written, never decoded) or a GCS URL users paste:
/// `https://storage.googleapis.com/bucket/key`, `https://storage.cloud.google.com/bucket/key`,
/// `https://bucket.storage.googleapis.com/key` (the path percent-decoded once).
pub(crate) fn parse(address: &str) -> Result<Address, GcsError> {
    let invalid = |why| GcsError::InvalidAddress {
        address: redact::address(address),
        why,
    };
    let gs = address
        .get(..5)
        .is_some_and(|scheme| scheme.eq_ignore_ascii_case("gs://"));
    let (bucket, key) = if gs {
        let rest = &address[5..];
        let (bucket, key) = rest
            .split_once('/')
            .ok_or_else(|| invalid("no object name after the bucket"))?;
        (bucket.to_string(), key.to_string())
    } else {
        let url = url::Url::parse(address).map_err(|_| invalid("not a gs:// address or URL"))?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(invalid("not a gs:// address or an http(s) URL"));
        }
        if !url.username().is_empty() || url.password().is_some() {
            return Err(invalid("user information in a GCS URL"));
        }
        if let Some(query) = url.query()
            && query
                .split('&')
                .any(|pair| !pair.is_empty() && pair.split('=').next() != Some("authuser"))
        {
            // `generation=`, `X-Goog-Signature=`, ... would change what is read.
            return Err(invalid(
                "a query string (a generation or a signed URL) is not supported; use gs://",
            ));
        }
        let host = url.host_str().ok_or_else(|| invalid("no host"))?;
        let host = host.to_ascii_lowercase();
        // The raw path, decoded once here (the url crate keeps it encoded as sent).
        let path = url.path().strip_prefix('/').unwrap_or(url.path());
        let decode = |s: &str| {
            percent_decode_str(s)
                .decode_utf8()
                .map(|c| c.into_owned())
                .map_err(|_| invalid("the path is not UTF-8 once decoded"))
        };
        if host == "storage.googleapis.com" || host == "storage.cloud.google.com" {
            let (bucket, key) = path
                .split_once('/')
                .ok_or_else(|| invalid("no object name after the bucket"))?;
            (decode(bucket)?, decode(key)?)
        } else if let Some(bucket) = host.strip_suffix(".storage.googleapis.com") {
            (bucket.to_string(), decode(path)?)
        } else {
            return Err(invalid("not a Google Cloud Storage host"));
        }
    };
    check_bucket(&bucket).map_err(invalid)?;
    check_key(&key).map_err(invalid)?;
    Ok(Address { bucket, key })
}

/// Bucket names: 3–63 characters (up to 222 with dots, each part at most 63) of lower-case
/// letters, digits, `-`, `_` and `.`, starting and ending with a letter or digit.
fn check_bucket(bucket: &str) -> Result<(), &'static str> {
    let bytes = bucket.as_bytes();
    let allowed = bytes
        .iter()
        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || matches!(b, b'-' | b'_' | b'.'));
    let edges = |b: Option<&u8>| b.is_some_and(|b| b.is_ascii_lowercase() || b.is_ascii_digit());
    let limit = if bucket.contains('.') { 222 } else { 63 };
    let ok = allowed
        && (3..=limit).contains(&bytes.len())
        && edges(bytes.first())
        && edges(bytes.last())
        && bucket
            .split('.')
            .all(|part| !part.is_empty() && part.len() <= 63);
    if ok {
        Ok(())
    } else {
        Err("not a valid bucket name (3–63 lower-case letters, digits, -, _ and dots)")
    }
}

/// Object names: 1–1024 bytes of UTF-8 without carriage return or line feed.
fn check_key(key: &str) -> Result<(), &'static str> {
    if key.is_empty() {
        return Err("the object name is empty");
    }
    if key.len() > MAX_KEY_BYTES {
        return Err("the object name is longer than 1024 bytes");
    }
    if key.contains(['\r', '\n']) {
        return Err("the object name holds a carriage return or line feed");
    }
    // GCS refuses the names `.` and `..`; a `.` or `..` segment inside a name would be folded
    // away by any URL parser between Karu and the object (`a/./b` becomes `a/b`, another
    // object), so such a name cannot be addressed safely by URL and is refused here.
    if key
        .split('/')
        .any(|segment| segment == "." || segment == "..")
    {
        return Err("the object name has a . or .. segment, which a URL cannot carry safely");
    }
    Ok(())
}

/// Normalise an endpoint override: an `http(s)` URL with a host, or a bare `host:port` as
/// `STORAGE_EMULATOR_HOST` is often set (taken as `http://`, as Google's clients do). A
/// trailing `/` is dropped; a path is kept as a prefix.
pub(crate) fn endpoint(value: &str) -> Result<String, GcsError> {
    let invalid = |why| GcsError::InvalidEndpoint {
        endpoint: shown_endpoint(value),
        why,
    };
    let with_scheme = with_scheme(value);
    match endpoint_problem(&with_scheme) {
        Some(why) => Err(invalid(why)),
        None => Ok(with_scheme.trim_end_matches('/').to_string()),
    }
}

/// An endpoint override with its scheme: a bare `host:port` is taken as `http://`.
pub(crate) fn with_scheme(value: &str) -> String {
    let value = value.trim();
    if value.contains("://") {
        value.to_string()
    } else {
        format!("http://{value}")
    }
}

/// The XML API URL of an object: `ENDPOINT/bucket/encoded-key` (path style, which works for
/// every bucket name, dotted ones too, and for emulators).
pub(crate) fn object_url(endpoint: &str, bucket: &str, key: &str) -> String {
    format!(
        "{}/{bucket}/{}",
        endpoint.trim_end_matches('/'),
        encode_path(key)
    )
}

/// The JSON API's media download URL of an object:
/// `ENDPOINT/download/storage/v1/b/bucket/o/encoded-name?alt=media`, the name percent-encoded
/// as one path segment (`/` as `%2F`), as Google's clients download from an emulator.
pub(crate) fn media_url(endpoint: &str, bucket: &str, key: &str) -> String {
    format!(
        "{}/download/storage/v1/b/{bucket}/o/{}?alt=media",
        endpoint.trim_end_matches('/'),
        // `encode_path` leaves only unreserved bytes, escapes and `/`: one segment needs `/`
        // escaped too.
        encode_path(key).replace('/', "%2F")
    )
}

/// An HMAC key pair (interoperability keys of a service account or user).
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct HmacKey {
    pub(crate) access_id: String,
    pub(crate) secret: String,
}

/// The parameters of a V4 signature: Google's own (`GOOG4-HMAC-SHA256`, `x-goog-*`) or, for
/// tests against AWS's published examples, AWS's (`AWS4-HMAC-SHA256`, `x-amz-*`): the same
/// algorithm under other names.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Flavor {
    pub(crate) algorithm: &'static str,
    pub(crate) key_prefix: &'static str,
    pub(crate) terminal: &'static str,
    pub(crate) date_header: &'static str,
    pub(crate) content_header: &'static str,
}

/// Google's V4 signature for HMAC keys.
pub(crate) const GOOG4: Flavor = Flavor {
    algorithm: "GOOG4-HMAC-SHA256",
    key_prefix: "GOOG4",
    terminal: "goog4_request",
    date_header: "x-goog-date",
    content_header: "x-goog-content-sha256",
};

/// The hex SHA-256 of an empty payload.
#[cfg(test)]
const EMPTY_SHA256: &str = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

fn hmac(key: &[u8], data: &[u8]) -> Vec<u8> {
    // HMAC accepts keys of every length; the error arm cannot happen.
    let Ok(mut mac) = <Hmac<Sha256> as KeyInit>::new_from_slice(key) else {
        return Vec::new();
    };
    mac.update(data);
    mac.finalize().into_bytes().to_vec()
}

/// `YYYYMMDD'T'HHMMSS'Z'` of `secs` since the Unix epoch (UTC).
pub(crate) fn amz_date(secs: u64) -> String {
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}{month:02}{day:02}T{:02}{:02}{:02}Z",
        rem / 3600,
        rem / 60 % 60,
        rem % 60
    )
}

/// Collapse inner runs of spaces and trim, as canonical header values are written.
fn trim_all(value: &str) -> String {
    value.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Sign a `GET` in place with a V4 HMAC signature at `secs` (Unix time): adds the date and
/// payload headers (`UNSIGNED-PAYLOAD`, no body) and `Authorization`, marked sensitive. Every
/// header present is signed (the `Range`, `If-Match`, `Accept-Encoding`, `x-goog-user-project`
/// among them) besides `host`. `path` is the URL path exactly as sent (encoded once); `query`
/// its query, if any (already canonical: the provider sends none).
#[allow(clippy::too_many_arguments)]
pub(crate) fn sign(
    flavor: Flavor,
    host: &str,
    path: &str,
    query: &str,
    headers: &mut HeaderMap,
    key: &HmacKey,
    region: &str,
    secs: u64,
    payload: &str,
) -> Result<(), GcsError> {
    let date_time = amz_date(secs);
    let date = &date_time[..8];
    let header = |v: &str| HeaderValue::from_str(v).map_err(|_| GcsError::Signing("header value"));
    headers.insert(flavor.date_header, header(&date_time)?);
    headers.insert(flavor.content_header, header(payload)?);
    let mut pairs: Vec<(String, String)> = vec![("host".into(), host.to_string())];
    for (name, value) in headers.iter() {
        let value = value
            .to_str()
            .map_err(|_| GcsError::Signing("a header value is not visible ASCII"))?;
        let name = name.as_str().to_ascii_lowercase();
        if name == "authorization" {
            continue;
        }
        match pairs.iter_mut().find(|(n, _)| *n == name) {
            Some((_, v)) => {
                v.push(',');
                v.push_str(&trim_all(value));
            }
            None => pairs.push((name, trim_all(value))),
        }
    }
    pairs.sort();
    let signed: Vec<&str> = pairs.iter().map(|(n, _)| n.as_str()).collect();
    let signed = signed.join(";");
    let canonical_headers: String = pairs.iter().map(|(n, v)| format!("{n}:{v}\n")).collect();
    let canonical = format!(
        "GET\n{}\n{query}\n{canonical_headers}\n{signed}\n{payload}",
        if path.is_empty() { "/" } else { path }
    );
    let scope = format!("{date}/{region}/storage/{}", flavor.terminal);
    let scope = if flavor.key_prefix == "AWS4" {
        scope.replace("/storage/", "/s3/")
    } else {
        scope
    };
    let string_to_sign = format!(
        "{}\n{date_time}\n{scope}\n{}",
        flavor.algorithm,
        hex::encode(Sha256::digest(canonical.as_bytes()))
    );
    let service = if flavor.key_prefix == "AWS4" {
        "s3"
    } else {
        "storage"
    };
    let k_date = hmac(
        format!("{}{}", flavor.key_prefix, key.secret).as_bytes(),
        date.as_bytes(),
    );
    let k_region = hmac(&k_date, region.as_bytes());
    let k_service = hmac(&k_region, service.as_bytes());
    let k_signing = hmac(&k_service, flavor.terminal.as_bytes());
    let signature = hex::encode(hmac(&k_signing, string_to_sign.as_bytes()));
    let mut value = header(&format!(
        "{} Credential={}/{scope}, SignedHeaders={signed}, Signature={signature}",
        flavor.algorithm, key.access_id
    ))?;
    value.set_sensitive(true);
    headers.insert("authorization", value);
    Ok(())
}

/// Whether a successful answer's headers show that GCS changed the bytes, so their offsets
/// are not the stored object's:
///
/// - `x-guploader-response-body-transformations` (GCS names what it did, e.g. `gunzipped`);
/// - a `Warning: 214` (Transformation Applied);
/// - a stored-gzip object (`x-goog-stored-content-encoding: gzip`) answered without
///   `Content-Encoding: gzip` (decompressed), or without `Content-Range` (GCS ignores the range
///   when it decompresses);
/// - `Content-Encoding: gzip` on an object not stored as gzip (compressed on the way, so the
///   body is not the stored bytes the `Content-Range` describes).
pub(crate) fn transformed(headers: &HeaderMap) -> bool {
    let text = |name| {
        headers
            .get(name)
            .and_then(|v: &HeaderValue| v.to_str().ok())
    };
    if headers.contains_key("x-guploader-response-body-transformations") {
        return true;
    }
    let warned = headers.get_all(WARNING).iter().any(|v| {
        v.to_str()
            .is_ok_and(|v| v.split(',').any(|w| w.trim_start().starts_with("214")))
    });
    if warned {
        return true;
    }
    let is_gzip = |v: Option<&str>| v.is_some_and(|v| v.trim().eq_ignore_ascii_case("gzip"));
    let stored_gzip = is_gzip(text("x-goog-stored-content-encoding"));
    let sent_gzip = is_gzip(text(CONTENT_ENCODING.as_str()));
    if stored_gzip {
        !sent_gzip || !headers.contains_key(CONTENT_RANGE)
    } else {
        sent_gzip
    }
}

/// The correction a GCS error answer asks for: a `401` (an expired or revoked token) asks to
/// authenticate once more.
pub(crate) fn correction(status: u16) -> Option<Correction> {
    (status == 401).then_some(Correction::Reauthenticate)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn addr(bucket: &str, key: &str) -> Address {
        Address {
            bucket: bucket.into(),
            key: key.into(),
        }
    }

    #[test]
    fn address_forms_name_one_object() {
        let want = addr("my-bucket", "dir/a b+c%d/ü//x");
        for address in [
            "gs://my-bucket/dir/a b+c%d/ü//x",
            "https://storage.googleapis.com/my-bucket/dir/a%20b%2Bc%25d/%C3%BC//x",
            "https://storage.cloud.google.com/my-bucket/dir/a%20b%2Bc%25d/%C3%BC//x?authuser=0",
            "https://my-bucket.storage.googleapis.com/dir/a%20b%2Bc%25d/%C3%BC//x",
            "HTTPS://STORAGE.googleapis.com/my-bucket/dir/a%20b+c%25d/%C3%BC//x",
            "GS://my-bucket/dir/a b+c%d/ü//x",
        ] {
            assert_eq!(parse(address).unwrap(), want, "{address}");
        }
        assert_eq!(
            parse("gs://b.with.dots/k")
                .unwrap()
                .resolved()
                .canonical
                .as_str(),
            "gs://b.with.dots/k"
        );
        // gs:// names are literal: `%41` is three characters of the name.
        assert_eq!(parse("gs://bkt/%41").unwrap(), addr("bkt", "%41"));
    }

    #[test]
    fn bad_addresses_are_refused_without_secrets() {
        for bad in [
            "gs://bucket",
            "gs://bucket/",
            "gs://BUCKET/k",
            "gs://bucket/.",
            "gs://bucket/a/../b",
            "gs://ab/k",
            "gs://-ab/k",
            "gs:/ü/k",
            "gs:ü",
            "https://example.com/b/k",
            "https://storage.googleapis.com/bucket",
            "https://storage.googleapis.com/bucket/",
            "https://bucket.storage.googleapis.com/",
            "https://storage.googleapis.com/b/k%FF",
            "https://storage.googleapis.com/bkt/k?generation=12",
            "ftp://storage.googleapis.com/bkt/k",
            "gs://bkt/a\nb",
        ] {
            assert!(parse(bad).is_err(), "{bad}");
        }
        let long = format!("gs://bkt/{}", "k".repeat(1025));
        assert!(parse(&long).is_err());
        assert!(parse(&format!("gs://bkt/{}", "k".repeat(1024))).is_ok());
        let e: Error = parse("https://storage.googleapis.com/bkt/k?X-Goog-Signature=SECRET")
            .unwrap_err()
            .into();
        assert_eq!(e.status(), Status::InvalidArgument);
        assert!(!e.message().contains("SECRET"), "{e}");
    }

    #[test]
    fn urls_encode_the_name_once() {
        assert_eq!(
            object_url(DEFAULT_ENDPOINT, "b", "a b/c+d%e/ü//f~g"),
            "https://storage.googleapis.com/b/a%20b/c%2Bd%25e/%C3%BC//f~g"
        );
        assert_eq!(
            object_url("http://127.0.0.1:4443/", "b", "k"),
            "http://127.0.0.1:4443/b/k"
        );
    }

    #[test]
    fn media_urls_encode_the_name_once_as_one_segment() {
        assert_eq!(
            media_url("http://127.0.0.1:4443/", "b", "a b/c+d%e/ü//f~g"),
            "http://127.0.0.1:4443/download/storage/v1/b/b/o/a%20b%2Fc%2Bd%25e%2F%C3%BC%2F%2Ff~g?alt=media"
        );
        assert_eq!(
            media_url("https://gcs.example/prefix", "b.c", "k"),
            "https://gcs.example/prefix/download/storage/v1/b/b.c/o/k?alt=media"
        );
    }

    #[test]
    fn endpoints() {
        assert_eq!(endpoint("127.0.0.1:4443").unwrap(), "http://127.0.0.1:4443");
        assert_eq!(
            endpoint("https://gcs.example/prefix/").unwrap(),
            "https://gcs.example/prefix"
        );
        for bad in [
            "ftp://x",
            "http://",
            "http://u:p@h",
            "http://h/?q=1",
            "http://h/#f",
            "::",
        ] {
            assert!(endpoint(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn dates() {
        assert_eq!(amz_date(0), "19700101T000000Z");
        assert_eq!(amz_date(1_369_353_600), "20130524T000000Z");
        assert_eq!(amz_date(951_782_400 + 3_723), "20000229T010203Z");
    }

    /// The "GET Object" example of the AWS SigV4 documentation (header-based authentication,
    /// `Range: bytes=0-9`): GOOG4 is the same algorithm under Google's names, so the one
    /// implementation is checked against AWS's published signature.
    #[test]
    fn signature_matches_the_published_example() {
        const AWS4: Flavor = Flavor {
            algorithm: "AWS4-HMAC-SHA256",
            key_prefix: "AWS4",
            terminal: "aws4_request",
            date_header: "x-amz-date",
            content_header: "x-amz-content-sha256",
        };
        let key = HmacKey {
            access_id: "AKIAIOSFODNN7EXAMPLE".into(),
            secret: "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY".into(),
        };
        let mut headers = HeaderMap::new();
        headers.insert("range", HeaderValue::from_static("bytes=0-9"));
        sign(
            AWS4,
            "examplebucket.s3.amazonaws.com",
            "/test.txt",
            "",
            &mut headers,
            &key,
            "us-east-1",
            1_369_353_600,
            EMPTY_SHA256,
        )
        .unwrap();
        let auth = headers.get("authorization").unwrap();
        assert!(auth.is_sensitive());
        assert_eq!(
            auth.to_str().unwrap(),
            "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request, \
             SignedHeaders=host;range;x-amz-content-sha256;x-amz-date, \
             Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41"
        );
    }

    #[test]
    fn goog4_signs_the_range_and_the_google_headers() {
        let key = HmacKey {
            access_id: "GOOGTS7C7FUP3AIRVJTE2BCD".into(),
            secret: "bGoa+V7g/yqDXvKRqq+JTFn4uQZbPiQJo4pf9RzJ".into(),
        };
        let sign_range = |range: &'static str| {
            let mut headers = HeaderMap::new();
            headers.insert("range", HeaderValue::from_static(range));
            headers.insert("x-goog-user-project", HeaderValue::from_static("payer"));
            sign(
                GOOG4,
                "storage.googleapis.com",
                "/b/k",
                "",
                &mut headers,
                &key,
                "auto",
                1_700_000_000,
                "UNSIGNED-PAYLOAD",
            )
            .unwrap();
            headers
        };
        let a = sign_range("bytes=0-9");
        let auth = a.get("authorization").unwrap().to_str().unwrap();
        assert!(auth.starts_with(
            "GOOG4-HMAC-SHA256 Credential=GOOGTS7C7FUP3AIRVJTE2BCD/20231114/auto/storage/goog4_request, \
             SignedHeaders=host;range;x-goog-content-sha256;x-goog-date;x-goog-user-project, Signature="
        ), "{auth}");
        assert_eq!(a.get("x-goog-date").unwrap(), "20231114T221320Z");
        assert_eq!(a.get("x-goog-content-sha256").unwrap(), "UNSIGNED-PAYLOAD");
        let b = sign_range("bytes=0-10");
        assert_ne!(a.get("authorization"), b.get("authorization"));
    }

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.append(*name, HeaderValue::from_static(value));
        }
        map
    }

    #[test]
    fn transformations_are_seen() {
        let range = ("content-range", "bytes 0-9/100");
        let stored_gzip = ("x-goog-stored-content-encoding", "gzip");
        let stored_identity = ("x-goog-stored-content-encoding", "identity");
        let gzip = ("content-encoding", "gzip");
        // The stored bytes, as asked for.
        assert!(!transformed(&headers(&[range, stored_identity])));
        assert!(!transformed(&headers(&[range, stored_gzip, gzip])));
        assert!(!transformed(&headers(&[range])));
        // Decompressed, or ranges ignored on a stored-gzip object.
        assert!(transformed(&headers(&[range, stored_gzip])));
        assert!(transformed(&headers(&[stored_gzip, gzip])));
        assert!(transformed(&headers(&[
            range,
            stored_gzip,
            ("content-encoding", "identity")
        ])));
        // Compressed on the way.
        assert!(transformed(&headers(&[range, stored_identity, gzip])));
        assert!(transformed(&headers(&[range, gzip])));
        // GCS says so.
        assert!(transformed(&headers(&[
            range,
            stored_gzip,
            gzip,
            ("x-guploader-response-body-transformations", "gunzipped")
        ])));
        assert!(transformed(&headers(&[
            range,
            ("warning", "214 UploadServer gunzipped")
        ])));
        assert!(transformed(&headers(&[
            range,
            ("warning", "199 misc, 214 proxy \"Transformation applied\"")
        ])));
        assert!(!transformed(&headers(&[range, ("warning", "110 stale")])));
    }

    #[test]
    fn a_401_asks_to_authenticate_again() {
        assert_eq!(correction(401), Some(Correction::Reauthenticate));
        for status in [400, 403, 404, 412, 500] {
            assert_eq!(correction(status), None);
        }
    }

    fn key_strategy() -> impl Strategy<Value = String> {
        proptest::collection::vec(
            prop_oneof![
                Just("/".to_string()),
                Just("//".to_string()),
                Just(" ".to_string()),
                Just("+".to_string()),
                Just("%".to_string()),
                Just("%20".to_string()),
                Just("?".to_string()),
                Just("#".to_string()),
                Just("ü".to_string()),
                Just("日本".to_string()),
                "[a-zA-Z0-9._~-]{1,4}",
            ],
            1..12,
        )
        .prop_map(|parts| parts.concat())
    }

    proptest! {
        /// Every spelling of one object resolves to one canonical path, and the URL Karu
        /// builds names that object again: the name is encoded exactly once.
        #[test]
        fn names_round_trip(key in key_strategy()) {
            if key.split('/').any(|segment| segment == "." || segment == "..") {
                // Found by this property: `.` came back from its URL as an empty name.
                let refused = parse(&format!("gs://bkt/{key}")).is_err();
                prop_assert!(refused);
                return Ok(());
            }
            let gs = parse(&format!("gs://bkt/{key}")).unwrap();
            prop_assert_eq!(&gs, &addr("bkt", &key));
            let url = object_url(DEFAULT_ENDPOINT, "bkt", &key);
            prop_assert_eq!(parse(&url).unwrap(), gs.clone());
            let hosted = format!("https://bkt.storage.googleapis.com/{}", encode_path(&key));
            prop_assert_eq!(parse(&hosted).unwrap(), gs.clone());
            let path = url.strip_prefix(DEFAULT_ENDPOINT).unwrap();
            prop_assert!(path.bytes().all(|b| b.is_ascii_alphanumeric() || b"-._~/%".contains(&b)));
            let decoded = percent_decode_str(path).decode_utf8().unwrap();
            prop_assert_eq!(decoded.as_ref(), format!("/bkt/{key}"));
            // The media URL's last segment is the whole name, encoded once.
            let media = media_url(DEFAULT_ENDPOINT, "bkt", &key);
            let segment = media
                .strip_prefix("https://storage.googleapis.com/download/storage/v1/b/bkt/o/")
                .and_then(|rest| rest.strip_suffix("?alt=media"))
                .unwrap();
            prop_assert!(segment.bytes().all(|b| b.is_ascii_alphanumeric() || b"-._~%".contains(&b)));
            let name = percent_decode_str(segment).decode_utf8().unwrap();
            prop_assert_eq!(name.as_ref(), key.as_str());
        }

        /// Parsing never panics, and what it accepts resolves to a `gs://` path that parses
        /// back to the same object.
        #[test]
        fn parsing_is_total(address in "\\PC{0,40}") {
            if let Ok(parsed) = parse(&address) {
                let canonical = parsed.resolved().canonical;
                prop_assert_eq!(parse(canonical.as_str()).unwrap(), parsed);
            }
        }
    }
}
