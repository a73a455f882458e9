//! A small SigV4 header signer for driving the S3 mock, written for the tests on their own
//! (from the AWS documentation's S3 rules), so the mock's verifier is checked against a
//! second implementation.

use std::time::SystemTime;

use hmac::{Hmac, KeyInit, Mac};
use karu_testkit::MockCredentials;
use sha2::{Digest, Sha256};

/// The hex SHA-256 of the empty string.
pub(crate) const EMPTY_SHA256: &str =
    "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

/// The host name the support client sends (`Host: 127.0.0.1`).
pub(crate) const HOST: &str = "127.0.0.1";

/// `20150830T123600Z`, derived from the IMF-fixdate httpdate writes.
pub(crate) fn amz_date(t: SystemTime) -> String {
    // "Sun, 30 Aug 2015 12:36:00 GMT"
    let http = httpdate::fmt_http_date(t);
    let parts: Vec<&str> = http.split(' ').collect();
    let month = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ]
    .iter()
    .position(|m| *m == parts[2])
    .expect("a month name")
        + 1;
    format!(
        "{}{month:02}{}T{}Z",
        parts[3],
        parts[1],
        parts[4].replace(':', "")
    )
}

fn mac(key: &[u8], msg: &str) -> Vec<u8> {
    let mut m = <Hmac<Sha256> as KeyInit>::new_from_slice(key).unwrap();
    m.update(msg.as_bytes());
    m.finalize().into_bytes().to_vec()
}

/// How to sign: with which key pair, for which region, at what time, with what payload hash.
#[derive(Debug, Clone)]
pub(crate) struct Signer {
    pub(crate) creds: MockCredentials,
    pub(crate) region: String,
    pub(crate) service: String,
    pub(crate) time: SystemTime,
    /// The `x-amz-content-sha256` value.
    pub(crate) payload_hash: String,
    /// Overrides the scope date (normally the day of `time`).
    pub(crate) scope_date: Option<String>,
    /// Leave `host` out of SignedHeaders (to provoke a rejection).
    pub(crate) skip_host: bool,
}

impl Signer {
    pub(crate) fn new(creds: MockCredentials, region: &str) -> Self {
        Self {
            creds,
            region: region.to_owned(),
            service: "s3".to_owned(),
            time: SystemTime::now(),
            payload_hash: "UNSIGNED-PAYLOAD".to_owned(),
            scope_date: None,
            skip_host: false,
        }
    }

    /// The headers to send with a request (all but `Host`, which the client adds): `extra`,
    /// `x-amz-date`, `x-amz-content-sha256`, `x-amz-security-token` if any, and
    /// `Authorization` signing all of them and `host`.
    pub(crate) fn sign(
        &self,
        method: &str,
        path: &str,
        query: Option<&str>,
        extra: &[(&str, &str)],
    ) -> Vec<(String, String)> {
        let date = amz_date(self.time);
        let mut headers: Vec<(String, String)> = extra
            .iter()
            .map(|(n, v)| (n.to_ascii_lowercase(), v.to_string()))
            .collect();
        headers.push(("x-amz-date".into(), date.clone()));
        headers.push(("x-amz-content-sha256".into(), self.payload_hash.clone()));
        if let Some(token) = &self.creds.session_token {
            headers.push(("x-amz-security-token".into(), token.clone()));
        }
        let mut signed: Vec<(String, String)> = headers.clone();
        if !self.skip_host {
            signed.push(("host".into(), HOST.into()));
        }
        signed.sort();
        let canonical_headers: String = signed
            .iter()
            .map(|(n, v)| {
                let v = v.split_whitespace().collect::<Vec<_>>().join(" ");
                format!("{n}:{v}\n")
            })
            .collect();
        let signed_names = signed
            .iter()
            .map(|(n, _)| n.as_str())
            .collect::<Vec<_>>()
            .join(";");
        let mut query_pairs: Vec<String> = query
            .unwrap_or("")
            .split('&')
            .filter(|s| !s.is_empty())
            .map(|p| {
                if p.contains('=') {
                    p.to_owned()
                } else {
                    format!("{p}=")
                }
            })
            .collect();
        query_pairs.sort();
        let canonical = format!(
            "{method}\n{path}\n{}\n{canonical_headers}\n{signed_names}\n{}",
            query_pairs.join("&"),
            self.payload_hash
        );
        let day = self
            .scope_date
            .clone()
            .unwrap_or_else(|| date[..8].to_owned());
        let scope = format!("{day}/{}/{}/aws4_request", self.region, self.service);
        let to_sign = format!(
            "AWS4-HMAC-SHA256\n{date}\n{scope}\n{}",
            hex::encode(Sha256::digest(canonical.as_bytes()))
        );
        let mut key = format!("AWS4{}", self.creds.secret_access_key).into_bytes();
        for part in [
            day.as_str(),
            self.region.as_str(),
            self.service.as_str(),
            "aws4_request",
        ] {
            key = mac(&key, part);
        }
        let signature = hex::encode(mac(&key, &to_sign));
        headers.push((
            "authorization".into(),
            format!(
                "AWS4-HMAC-SHA256 Credential={}/{scope}, SignedHeaders={signed_names}, Signature={signature}",
                self.creds.access_key_id
            ),
        ));
        headers
    }
}

/// Borrows a header list for [`Client::request`](super::Client::request).
pub(crate) fn borrowed(headers: &[(String, String)]) -> Vec<(&str, &str)> {
    headers
        .iter()
        .map(|(n, v)| (n.as_str(), v.as_str()))
        .collect()
}

/// Replaces the value of a header in a signed list (to tamper after signing).
pub(crate) fn replace(headers: &mut [(String, String)], name: &str, value: &str) {
    let slot = headers
        .iter_mut()
        .find(|(n, _)| n.eq_ignore_ascii_case(name))
        .unwrap_or_else(|| panic!("no {name} header to replace"));
    slot.1 = value.to_owned();
}

/// Removes a header from a signed list.
pub(crate) fn remove(headers: &mut Vec<(String, String)>, name: &str) {
    headers.retain(|(n, _)| !n.eq_ignore_ascii_case(name));
}
