//! AWS Signature Version 4 as the S3 mock checks it, written from the AWS documentation and
//! independent of any client-side signer: the `Authorization` header's parts, the canonical
//! request, the string to sign, the signing key and the signature.
//!
//! S3's variant: the canonical URI is the path exactly as sent (S3 neither normalises it nor
//! encodes it a second time); the query is decoded, re-encoded with the strict SigV4 set and
//! sorted; headers are lower-cased, trimmed, inner runs of spaces collapsed.

use hmac::{Hmac, KeyInit, Mac};
use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, percent_decode_str, percent_encode};
use sha2::{Digest, Sha256};

/// The only algorithm the mock accepts.
pub(crate) const ALGORITHM: &str = "AWS4-HMAC-SHA256";

/// The hex SHA-256 of an empty payload.
#[cfg(test)]
pub(crate) const EMPTY_SHA256: &str =
    "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

/// Characters SigV4 leaves unencoded: `A-Z a-z 0-9 - . _ ~`.
const UNRESERVED: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

/// The unreserved characters and `/`, for object paths.
const PATH: &AsciiSet = &UNRESERVED.remove(b'/');

/// SigV4's `UriEncode`: every byte but `A-Z a-z 0-9 - . _ ~` (and `/` when `keep_slash`)
/// becomes `%XY` with upper-case hex.
pub(crate) fn uri_encode(bytes: &[u8], keep_slash: bool) -> String {
    let set = if keep_slash { PATH } else { UNRESERVED };
    percent_encode(bytes, set).to_string()
}

/// Percent-decodes to bytes (`+` stays `+`).
pub(crate) fn decode(s: &str) -> Vec<u8> {
    percent_decode_str(s).collect()
}

/// The parts of an `Authorization: AWS4-HMAC-SHA256 Credential=..., SignedHeaders=...,
/// Signature=...` header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Authorization {
    pub(crate) access_key_id: String,
    /// The scope's date, `YYYYMMDD`.
    pub(crate) date: String,
    pub(crate) region: String,
    pub(crate) service: String,
    /// The scope's last part, `aws4_request` when well formed.
    pub(crate) terminal: String,
    /// As listed, in the order given.
    pub(crate) signed_headers: Vec<String>,
    pub(crate) signature: String,
}

impl Authorization {
    /// `DATE/REGION/SERVICE/aws4_request`.
    pub(crate) fn scope(&self) -> String {
        format!(
            "{}/{}/{}/{}",
            self.date, self.region, self.service, self.terminal
        )
    }
}

/// Why an `Authorization` header could not be parsed (the text goes into the error message).
pub(crate) type ParseError = &'static str;

/// Parses a SigV4 `Authorization` header value.
pub(crate) fn parse_authorization(value: &str) -> Result<Authorization, ParseError> {
    parse_authorization_for(ALGORITHM, value)
}

/// Parses a V4 `Authorization` header value of `algorithm` (`AWS4-HMAC-SHA256`, or GCS's
/// `GOOG4-HMAC-SHA256`: the same algorithm under other names).
pub(crate) fn parse_authorization_for(
    algorithm: &str,
    value: &str,
) -> Result<Authorization, ParseError> {
    let value = value.trim();
    let rest = match value.split_once(|c: char| c.is_ascii_whitespace()) {
        Some((name, rest)) if name == algorithm => rest,
        _ if value.starts_with("AWS ") => {
            return Err("AWS Signature Version 2 is not supported; use AWS4-HMAC-SHA256");
        }
        _ => return Err("the authorization header must start with AWS4-HMAC-SHA256"),
    };
    let (mut credential, mut signed, mut signature) = (None, None, None);
    for part in rest.split(',') {
        let Some((name, value)) = part.trim().split_once('=') else {
            return Err("the authorization header has a part that is not NAME=VALUE");
        };
        let slot = match name.trim() {
            "Credential" => &mut credential,
            "SignedHeaders" => &mut signed,
            "Signature" => &mut signature,
            _ => return Err("the authorization header has an unknown part"),
        };
        if slot.replace(value.trim()).is_some() {
            return Err("the authorization header repeats a part");
        }
    }
    let credential = credential.ok_or("the authorization header has no Credential")?;
    let signed = signed.ok_or("the authorization header has no SignedHeaders")?;
    let signature = signature.ok_or("the authorization header has no Signature")?;
    let scope: Vec<&str> = credential.split('/').collect();
    let [access_key_id, date, region, service, terminal] = scope[..] else {
        return Err("the Credential must be AKID/DATE/REGION/SERVICE/aws4_request");
    };
    if access_key_id.is_empty() {
        return Err("the Credential has no access key id");
    }
    if signed.is_empty() || signed.split(';').any(str::is_empty) {
        return Err("SignedHeaders must be a ;-separated list of header names");
    }
    if signature.len() != 64 || !signature.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err("the Signature must be 64 hex digits");
    }
    Ok(Authorization {
        access_key_id: access_key_id.to_owned(),
        date: date.to_owned(),
        region: region.to_owned(),
        service: service.to_owned(),
        terminal: terminal.to_owned(),
        signed_headers: signed.split(';').map(str::to_owned).collect(),
        signature: signature.to_ascii_lowercase(),
    })
}

/// The canonical query string: each `name=value` pair decoded, re-encoded with
/// [`uri_encode`], sorted by name then value, joined with `&` (a pair without `=` gets an
/// empty value).
pub(crate) fn canonical_query(query: Option<&str>) -> String {
    let mut pairs: Vec<(String, String)> = query
        .unwrap_or("")
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|pair| {
            let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
            (
                uri_encode(&decode(name), false),
                uri_encode(&decode(value), false),
            )
        })
        .collect();
    pairs.sort();
    pairs
        .iter()
        .map(|(n, v)| format!("{n}={v}"))
        .collect::<Vec<_>>()
        .join("&")
}

/// A header value as SigV4 canonicalises it: trimmed, inner runs of spaces made one.
pub(crate) fn trim_all(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for word in value.split(' ').filter(|w| !w.is_empty()) {
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(word);
    }
    out.trim_matches(|c: char| c.is_ascii_whitespace())
        .to_owned()
}

/// What a request contributes to its canonical form.
#[derive(Debug)]
pub(crate) struct CanonicalInput<'a> {
    pub(crate) method: &'a str,
    /// The path as sent.
    pub(crate) path: &'a str,
    pub(crate) query: Option<&'a str>,
    /// Names in lower case.
    pub(crate) headers: &'a [(String, String)],
    pub(crate) signed_headers: &'a [String],
    /// The `x-amz-content-sha256` value.
    pub(crate) payload_hash: &'a str,
}

/// The canonical request, and the signed headers the request lacks (their value counts as
/// empty, as a server that never received them would compute it).
pub(crate) fn canonical_request(input: &CanonicalInput<'_>) -> (String, Vec<String>) {
    let mut missing = Vec::new();
    let mut headers = String::new();
    for name in input.signed_headers {
        let values: Vec<String> = input
            .headers
            .iter()
            .filter(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| trim_all(v))
            .collect();
        if values.is_empty() {
            missing.push(name.clone());
        }
        headers.push_str(&name.to_ascii_lowercase());
        headers.push(':');
        headers.push_str(&values.join(","));
        headers.push('\n');
    }
    let path = if input.path.is_empty() {
        "/"
    } else {
        input.path
    };
    let request = format!(
        "{}\n{}\n{}\n{}\n{}\n{}",
        input.method,
        path,
        canonical_query(input.query),
        headers,
        input.signed_headers.join(";"),
        input.payload_hash
    );
    (request, missing)
}

/// The hex SHA-256 of `data`.
pub(crate) fn sha256_hex(data: &[u8]) -> String {
    hex::encode(Sha256::digest(data))
}

/// `AWS4-HMAC-SHA256 \n x-amz-date \n scope \n hex(SHA-256(canonical request))`.
pub(crate) fn string_to_sign(amz_date: &str, scope: &str, canonical_request: &str) -> String {
    string_to_sign_for(ALGORITHM, amz_date, scope, canonical_request)
}

/// [`string_to_sign`] for another algorithm name (`GOOG4-HMAC-SHA256`).
pub(crate) fn string_to_sign_for(
    algorithm: &str,
    amz_date: &str,
    scope: &str,
    canonical_request: &str,
) -> String {
    format!(
        "{algorithm}\n{amz_date}\n{scope}\n{}",
        sha256_hex(canonical_request.as_bytes())
    )
}

fn hmac(key: &[u8], data: &[u8]) -> Vec<u8> {
    let mut mac = <Hmac<Sha256> as KeyInit>::new_from_slice(key)
        .unwrap_or_else(|_| unreachable!("HMAC takes keys of any length"));
    mac.update(data);
    mac.finalize().into_bytes().to_vec()
}

/// The signing key: HMAC chain of `"AWS4" + secret`, date, region, service, `aws4_request`.
pub(crate) fn signing_key(secret: &str, date: &str, region: &str, service: &str) -> Vec<u8> {
    signing_key_for("AWS4", "aws4_request", secret, date, region, service)
}

/// [`signing_key`] with another key prefix and terminal (`GOOG4`, `goog4_request`).
pub(crate) fn signing_key_for(
    prefix: &str,
    terminal: &str,
    secret: &str,
    date: &str,
    region: &str,
    service: &str,
) -> Vec<u8> {
    let k_date = hmac(format!("{prefix}{secret}").as_bytes(), date.as_bytes());
    let k_region = hmac(&k_date, region.as_bytes());
    let k_service = hmac(&k_region, service.as_bytes());
    hmac(&k_service, terminal.as_bytes())
}

/// The hex signature of `string_to_sign`.
pub(crate) fn signature(signing_key: &[u8], string_to_sign: &str) -> String {
    hex::encode(hmac(signing_key, string_to_sign.as_bytes()))
}

/// Compares two strings in time independent of where they differ.
pub(crate) fn constant_time_eq(a: &str, b: &str) -> bool {
    a.len() == b.len()
        && a.bytes()
            .zip(b.bytes())
            .fold(0u8, |acc, (x, y)| acc | (x ^ y))
            == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The "GET object" example of the S3 SigV4 documentation ("Signature Calculations for the
    /// Authorization Header: Transferring Payload in a Single Chunk").
    #[test]
    fn reproduces_the_documented_s3_get_example() {
        let headers = vec![
            (
                "host".to_owned(),
                "examplebucket.s3.amazonaws.com".to_owned(),
            ),
            ("range".to_owned(), "bytes=0-9".to_owned()),
            ("x-amz-content-sha256".to_owned(), EMPTY_SHA256.to_owned()),
            ("x-amz-date".to_owned(), "20130524T000000Z".to_owned()),
        ];
        let signed: Vec<String> = ["host", "range", "x-amz-content-sha256", "x-amz-date"]
            .map(str::to_owned)
            .to_vec();
        let (canonical, missing) = canonical_request(&CanonicalInput {
            method: "GET",
            path: "/test.txt",
            query: None,
            headers: &headers,
            signed_headers: &signed,
            payload_hash: EMPTY_SHA256,
        });
        assert!(missing.is_empty());
        assert_eq!(
            canonical,
            "GET\n/test.txt\n\nhost:examplebucket.s3.amazonaws.com\nrange:bytes=0-9\n\
             x-amz-content-sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855\n\
             x-amz-date:20130524T000000Z\n\nhost;range;x-amz-content-sha256;x-amz-date\n\
             e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
        let sts = string_to_sign(
            "20130524T000000Z",
            "20130524/us-east-1/s3/aws4_request",
            &canonical,
        );
        assert_eq!(
            sts.lines().last(),
            Some("7344ae5b7ee6c3e7e6b0fe0640412a37625d1fbfff95c48bbb2dc43964946972")
        );
        let key = signing_key(
            "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
            "20130524",
            "us-east-1",
            "s3",
        );
        assert_eq!(
            signature(&key, &sts),
            "f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41"
        );
    }

    #[test]
    fn parses_the_authorization_header() {
        let a = parse_authorization(
            "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request,SignedHeaders=host;range;x-amz-date, Signature=fe5f80f77d5fa3beca038a248ff027d0445342fe2855ddc963176630326f1024",
        )
        .unwrap();
        assert_eq!(a.access_key_id, "AKIAIOSFODNN7EXAMPLE");
        assert_eq!(a.scope(), "20130524/us-east-1/s3/aws4_request");
        assert_eq!(a.signed_headers, ["host", "range", "x-amz-date"]);
        for bad in [
            "AWS AKIA:sig",
            "AWS4-HMAC-SHA256 Credential=A/1/r/s3/aws4_request, SignedHeaders=host",
            "AWS4-HMAC-SHA256 Credential=A/1/r/s3, SignedHeaders=host, Signature=00",
            "AWS4-HMAC-SHA256 Credential=A/1/r/s3/aws4_request, SignedHeaders=host;;x, Signature=0000000000000000000000000000000000000000000000000000000000000000",
            "Bearer x",
        ] {
            assert!(parse_authorization(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn canonical_query_sorts_and_encodes_strictly() {
        assert_eq!(canonical_query(None), "");
        assert_eq!(canonical_query(Some("location")), "location=");
        assert_eq!(
            canonical_query(Some("x-id=GetObject&a=b%20c&a=a&sp=a b+c/~")),
            "a=a&a=b%20c&sp=a%20b%2Bc%2F~&x-id=GetObject"
        );
    }

    #[test]
    fn header_values_are_trimmed_and_collapsed() {
        assert_eq!(trim_all("  a   b  c "), "a b c");
        assert_eq!(trim_all("bytes=0-9"), "bytes=0-9");
    }

    #[test]
    fn encodes_like_sigv4() {
        assert_eq!(
            uri_encode("a b/c+d~é".as_bytes(), true),
            "a%20b/c%2Bd~%C3%A9"
        );
        assert_eq!(uri_encode(b"a/b", false), "a%2Fb");
        assert!(constant_time_eq("abc", "abc"));
        assert!(!constant_time_eq("abc", "abd"));
        assert!(!constant_time_eq("abc", "ab"));
    }
}
