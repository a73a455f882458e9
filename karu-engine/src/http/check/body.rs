//! Error bodies: a short, redacted summary for messages, and the few facts Karu reads from
//! them (an S3-style `416` states the object's size).

use super::range::digits;

/// A human-readable summary of an error body (at most `limit` characters): the code and
/// message of an XML or JSON error when there is one, the title (and first paragraph) of an
/// HTML page, else the collapsed text; query strings and signature material are redacted.
pub fn summarize_body(body: &[u8], limit: usize) -> String {
    let text = String::from_utf8_lossy(body);
    let summary = xml_error(&text)
        .or_else(|| json_error(&text))
        .or_else(|| super::html::summary(&text))
        .unwrap_or_else(|| collapse(&strip_sensitive_elements(&text)));
    let redacted = redact(&summary);
    truncate_chars(&redacted, limit)
}

fn xml_error(text: &str) -> Option<String> {
    let code = xml_element(text, "Code");
    let message = xml_element(text, "Message");
    match (code, message) {
        (Some(c), Some(m)) => Some(collapse(&format!("{c}: {m}"))),
        (Some(c), None) => Some(collapse(c)),
        (None, Some(m)) => Some(collapse(m)),
        (None, None) => None,
    }
}

/// The text of the first `<name>…</name>` element of an XML error body (no parser: error
/// bodies are small and flat).
pub fn xml_element<'a>(text: &'a str, name: &str) -> Option<&'a str> {
    let open = format!("<{name}>");
    let close = format!("</{name}>");
    let start = text.find(&open)? + open.len();
    let end = start + text[start..].find(&close)?;
    Some(&text[start..end])
}

fn json_error(text: &str) -> Option<String> {
    let value: serde_json::Value = serde_json::from_str(text.trim()).ok()?;
    // Common shapes: {"message": ..}, {"error": ".."}, {"error": {"message": ..}}.
    let message = value
        .get("message")
        .or_else(|| value.get("error").and_then(|e| e.get("message")))
        .or_else(|| value.get("error"))
        .or_else(|| value.get("error_description"))?;
    let text = match message {
        serde_json::Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    Some(collapse(&text))
}

/// Elements of provider error bodies that echo what was signed or the signature itself.
const SENSITIVE_ELEMENTS: [&str; 7] = [
    "SignatureProvided",
    "StringToSign",
    "StringToSignBytes",
    "CanonicalRequest",
    "CanonicalRequestBytes",
    "AWSAccessKeyId",
    "Signature",
];

fn strip_sensitive_elements(text: &str) -> String {
    let mut out = text.to_string();
    for name in SENSITIVE_ELEMENTS {
        let open = format!("<{name}>");
        let close = format!("</{name}>");
        while let Some(start) = out.find(&open) {
            let end = match out[start..].find(&close) {
                Some(e) => start + e + close.len(),
                None => out.len(),
            };
            out.replace_range(start..end, "");
        }
    }
    out
}

/// Collapse runs of whitespace (and control characters) into single spaces.
pub fn collapse(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut space = false;
    for c in text.chars() {
        if c.is_whitespace() || c.is_control() {
            space = true;
        } else {
            if space && !out.is_empty() {
                out.push(' ');
            }
            space = false;
            out.push(c);
        }
    }
    out
}

/// Replace every query string in `text` (from `?` to the next whitespace or quote) with
/// `?<redacted>`.
pub fn redact(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '?' && chars.peek().is_some_and(|n| !n.is_whitespace()) {
            out.push_str("?<redacted>");
            while chars
                .peek()
                .is_some_and(|n| !n.is_whitespace() && !matches!(n, '"' | '\'' | '<' | '>'))
            {
                chars.next();
            }
        } else {
            out.push(c);
        }
    }
    out
}

fn truncate_chars(text: &str, limit: usize) -> String {
    if text.chars().count() <= limit {
        return text.to_string();
    }
    let mut cut: String = text.chars().take(limit.saturating_sub(1)).collect();
    cut.push('…');
    cut
}

/// The object size an S3-style `416` error body states (`<ActualObjectSize>N</ActualObjectSize>`),
/// for answers without `Content-Range: bytes */N`.
pub fn actual_object_size(body: &[u8]) -> Option<u64> {
    let text = std::str::from_utf8(body).ok()?;
    digits(xml_element(text, "ActualObjectSize")?.trim())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_bodies_are_summarised_and_redacted() {
        let xml = b"<?xml version=\"1.0\"?>\n<Error>\n  <Code>SignatureDoesNotMatch</Code>\n  <Message>The request signature we calculated does not match</Message>\n  <SignatureProvided>deadbeef</SignatureProvided><StringToSign>AWS4-HMAC-SHA256 secret</StringToSign>\n</Error>";
        let s = summarize_body(xml, 200);
        assert_eq!(
            s,
            "SignatureDoesNotMatch: The request signature we calculated does not match"
        );
        let json =
            br#"{"error": {"code": 403, "message": "Access   denied\n to https://x/y?sig=abc"}}"#;
        assert_eq!(
            summarize_body(json, 200),
            "Access denied to https://x/y?<redacted>"
        );
        let text = b"  Service\n\n Unavailable: see https://h/p?X-Amz-Signature=s3cr3t&a=b now ";
        assert_eq!(
            summarize_body(text, 200),
            "Service Unavailable: see https://h/p?<redacted> now"
        );
        let long = vec![b'x'; 10_000];
        assert_eq!(summarize_body(&long, 50).chars().count(), 50);
        let signed = b"<Error><SignatureProvided>abc</SignatureProvided>oops</Error>";
        assert!(!summarize_body(signed, 200).contains("abc"));
        let html = b"<html><head><title>404 Not Found</title></head><body><center>\
                     <h1>404 Not Found</h1></center><hr><center>nginx</center></body></html>";
        assert_eq!(summarize_body(html, 200), "404 Not Found");
    }

    #[test]
    fn the_size_in_an_s3_416_body() {
        let body = b"<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>InvalidRange</Code><Message>The requested range is not satisfiable</Message><RangeRequested>bytes=0-0</RangeRequested><ActualObjectSize>0</ActualObjectSize><RequestId>X</RequestId></Error>";
        assert_eq!(actual_object_size(body), Some(0));
        assert_eq!(
            actual_object_size(b"<Error><ActualObjectSize> 2000000 </ActualObjectSize></Error>"),
            Some(2_000_000)
        );
        for bad in [
            &b"<Error><Code>InvalidRange</Code></Error>"[..],
            b"<Error><ActualObjectSize>-1</ActualObjectSize></Error>",
            b"<Error><ActualObjectSize>1e3</ActualObjectSize></Error>",
            b"<Error><ActualObjectSize></ActualObjectSize></Error>",
            b"<Error><ActualObjectSize>99999999999999999999</ActualObjectSize></Error>",
            b"<Error><ActualObjectSize>12",
            b"\xff\xfe<ActualObjectSize>1</ActualObjectSize>",
        ] {
            assert_eq!(
                actual_object_size(bad),
                None,
                "{}",
                String::from_utf8_lossy(bad)
            );
        }
    }
}
