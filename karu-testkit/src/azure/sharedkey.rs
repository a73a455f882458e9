//! The Azure mock's own reading of Shared Key, written from the service documentation and
//! independently of the provider's signer: it works on the request as received (header pairs
//! and the raw target), as the service does.

use std::collections::BTreeMap;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use hmac::{Hmac, KeyInit, Mac};
use percent_encoding::percent_decode_str;
use sha2::Sha256;

use crate::http::RequestHead;

/// The fixed headers of the string to sign, in the documented order.
const FIXED: [&str; 11] = [
    "Content-Encoding",
    "Content-Language",
    "Content-Length",
    "Content-MD5",
    "Content-Type",
    "Date",
    "If-Modified-Since",
    "If-Match",
    "If-None-Match",
    "If-Unmodified-Since",
    "Range",
];

/// The string the service signs for `request` to `account`.
pub(crate) fn string_to_sign(request: &RequestHead, account: &str) -> String {
    let mut lines: Vec<String> = vec![request.method.clone()];
    for name in FIXED {
        let value = request.header(name).unwrap_or("");
        lines.push(if name == "Content-Length" && value == "0" {
            String::new()
        } else {
            value.to_owned()
        });
    }
    let mut ms: BTreeMap<String, String> = BTreeMap::new();
    for (name, value) in &request.headers {
        let name = name.to_ascii_lowercase();
        if name.starts_with("x-ms-") {
            let folded: Vec<&str> = value.split_whitespace().collect();
            ms.entry(name).or_insert_with(|| folded.join(" "));
        }
    }
    let mut out = lines.join("\n");
    out.push('\n');
    for (name, value) in ms {
        out += &format!("{name}:{value}\n");
    }
    out += &format!("/{account}{}", request.path);
    let mut params: BTreeMap<String, Vec<String>> = BTreeMap::new();
    if let Some(query) = &request.query {
        for pair in query.split('&').filter(|p| !p.is_empty()) {
            let mut it = pair.splitn(2, '=');
            let name = it.next().unwrap_or("");
            let value = it.next().unwrap_or("");
            let name = percent_decode_str(name).decode_utf8_lossy().to_lowercase();
            let value = percent_decode_str(value).decode_utf8_lossy().into_owned();
            params.entry(name).or_default().push(value);
        }
    }
    for (name, mut values) in params {
        values.sort();
        out += &format!("\n{name}:{}", values.join(","));
    }
    out
}

/// `base64(HMAC-SHA256(key, text))`.
pub(crate) fn sign(key: &[u8], text: &str) -> String {
    let mut mac = <Hmac<Sha256> as KeyInit>::new_from_slice(key).expect("HMAC takes any key");
    mac.update(text.as_bytes());
    STANDARD.encode(mac.finalize().into_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_documented_example() {
        let request = RequestHead {
            method: "GET".into(),
            path: "/myaccount/mycontainer".into(),
            query: Some("restype=container&comp=metadata&timeout=20".into()),
            headers: vec![
                ("x-ms-version".into(), "2009-09-19".into()),
                ("x-ms-date".into(), "Sun, 11 Oct 2009 21:49:13 GMT".into()),
            ],
            body: Default::default(),
        };
        assert_eq!(
            string_to_sign(&request, "myaccount"),
            "GET\n\n\n\n\n\n\n\n\n\n\n\nx-ms-date:Sun, 11 Oct 2009 21:49:13 GMT\n\
             x-ms-version:2009-09-19\n/myaccount/myaccount/mycontainer\ncomp:metadata\n\
             restype:container\ntimeout:20"
        );
    }
}
