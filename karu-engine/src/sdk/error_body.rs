//! Error bodies: the code and message of a service's error answer (an XML `<Code>` and
//! `<Message>`, a JSON `message` or `error.message`), and the short, redacted summary Karu puts
//! in an error's message.
//!
//! Error bodies are small (the engine reads at most the error-body limit) and flat, so these
//! helpers search text rather than parse documents; they never fail, they find nothing.
//!
//! ```
//! use karu_engine::sdk::error_body;
//!
//! let s3 = "<Error><Code>ExpiredToken</Code><Message>The token expired</Message></Error>";
//! assert_eq!(error_body::xml_element(s3, "Code"), Some("ExpiredToken"));
//! let gcs = r#"{"error": {"code": 401, "message": "Invalid Credentials"}}"#;
//! assert_eq!(error_body::json_message(gcs).as_deref(), Some("Invalid Credentials"));
//! assert_eq!(error_body::summary(s3.as_bytes(), 200), "ExpiredToken: The token expired");
//! ```

use super::redact;

/// The text of the first `<name>…</name>` element of an XML body (S3's `<Code>`, `<Region>`,
/// `<ActualObjectSize>`), as written (not trimmed, entities not decoded).
pub fn xml_element<'a>(text: &'a str, name: &str) -> Option<&'a str> {
    let open = format!("<{name}>");
    let close = format!("</{name}>");
    let start = text.find(&open)? + open.len();
    let end = start + text[start..].find(&close)?;
    Some(&text[start..end])
}

/// `Code: Message` of an XML error body (either alone when the other is missing).
pub fn xml_error(text: &str) -> Option<String> {
    let code = xml_element(text, "Code");
    let message = xml_element(text, "Message");
    let joined = match (code, message) {
        (Some(c), Some(m)) => format!("{c}: {m}"),
        (Some(one), None) | (None, Some(one)) => one.to_string(),
        (None, None) => return None,
    };
    Some(redact::collapse(&joined))
}

/// The message of a JSON error body, in the shapes services use: `{"message": …}`,
/// `{"error": {"message": …}}` (Google), `{"error": "…"}`, `{"error_description": …}` (OAuth).
pub fn json_message(text: &str) -> Option<String> {
    let value: serde_json::Value = serde_json::from_str(text.trim()).ok()?;
    let message = value
        .get("message")
        .or_else(|| value.get("error").and_then(|e| e.get("message")))
        .or_else(|| value.get("error"))
        .or_else(|| value.get("error_description"))?;
    let text = match message {
        serde_json::Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    Some(redact::collapse(&text))
}

/// A human-readable summary of an error body, at most `limit` characters: the code and
/// message of an XML or JSON error when there is one, the title (and first paragraph) of an
/// HTML page, else the collapsed text without signing elements; query strings and user
/// information are redacted.
pub fn summary(body: &[u8], limit: usize) -> String {
    let text = String::from_utf8_lossy(body);
    let summary = xml_error(&text)
        .or_else(|| json_message(&text))
        .or_else(|| super::html::summary(&text))
        .unwrap_or_else(|| redact::collapse(&redact::signing_elements(&text)));
    truncate_chars(&redact::text(&summary), limit)
}

/// At most `limit` characters, the last an ellipsis when cut.
fn truncate_chars(text: &str, limit: usize) -> String {
    if text.chars().count() <= limit {
        return text.to_string();
    }
    let mut cut: String = text.chars().take(limit.saturating_sub(1)).collect();
    cut.push('…');
    cut
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_bodies_are_summarised_and_redacted() {
        let xml = b"<?xml version=\"1.0\"?>\n<Error>\n  <Code>SignatureDoesNotMatch</Code>\n  <Message>The request signature we calculated does not match</Message>\n  <SignatureProvided>deadbeef</SignatureProvided><StringToSign>AWS4-HMAC-SHA256 secret</StringToSign>\n</Error>";
        let s = summary(xml, 200);
        assert_eq!(
            s,
            "SignatureDoesNotMatch: The request signature we calculated does not match"
        );
        let json =
            br#"{"error": {"code": 403, "message": "Access   denied\n to https://x/y?sig=abc"}}"#;
        assert_eq!(
            summary(json, 200),
            "Access denied to https://x/y?<redacted>"
        );
        let text = b"  Service\n\n Unavailable: see https://h/p?X-Amz-Signature=s3cr3t&a=b now ";
        assert_eq!(
            summary(text, 200),
            "Service Unavailable: see https://h/p?<redacted> now"
        );
        let long = vec![b'x'; 10_000];
        assert_eq!(summary(&long, 50).chars().count(), 50);
        let signed = b"<Error><SignatureProvided>abc</SignatureProvided>oops</Error>";
        assert!(!summary(signed, 200).contains("abc"));
        let html = b"<html><head><title>404 Not Found</title></head><body><center>\
                     <h1>404 Not Found</h1></center><hr><center>nginx</center></body></html>";
        assert_eq!(summary(html, 200), "404 Not Found");
        let userinfo = b"redirected to https://user:pw@h/x";
        assert_eq!(
            summary(userinfo, 200),
            "redirected to https://<redacted>@h/x"
        );
    }

    #[test]
    fn xml_elements_and_errors() {
        let body = "<Error><Code> NoSuchKey </Code><Region>eu-west-1</Region></Error>";
        assert_eq!(xml_element(body, "Code"), Some(" NoSuchKey "));
        assert_eq!(xml_element(body, "Region"), Some("eu-west-1"));
        assert_eq!(xml_element(body, "Message"), None);
        assert_eq!(xml_element("<Code>unclosed", "Code"), None);
        assert_eq!(xml_error(body).as_deref(), Some("NoSuchKey"));
        assert_eq!(
            xml_error("<Error><Message>only\n a message</Message></Error>").as_deref(),
            Some("only a message")
        );
        assert_eq!(xml_error("<Error/>"), None);
    }

    #[test]
    fn json_messages_in_every_shape() {
        for (body, message) in [
            (r#"{"message": "m1"}"#, Some("m1")),
            (r#"{"error": {"code": 401, "message": "m2"}}"#, Some("m2")),
            (r#"{"error": "invalid_grant"}"#, Some("invalid_grant")),
            (r#"{"error_description": "m4"}"#, Some("m4")),
            (r#"{"error": {"code": 7}}"#, Some(r#"{"code":7}"#)),
            (r#"{"other": 1}"#, None),
            ("not json", None),
        ] {
            assert_eq!(json_message(body).as_deref(), message, "{body}");
        }
    }
}
