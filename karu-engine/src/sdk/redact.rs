//! Redaction: what of an address, a URL, a text or an error chain may appear in a message, a
//! log or a `Debug` output. The one place Karu and its providers hide secrets from text.
//!
//! What is a secret here: the user information of a URL (`user:password@`), a query string
//! (it may hold a signature or a token: `?X-Amz-Signature=…`, `?sig=…`), and the elements of
//! a provider's error body that echo what was signed. Header values never reach text at all
//! (a `Debug` shows header names only).
//!
//! ```
//! use karu_engine::sdk::redact;
//!
//! assert_eq!(redact::address("https://u:p@h/a?sig=x"), "https://<redacted>@h/a?<redacted>");
//! assert_eq!(
//!     redact::text("GET https://h/a?X-Amz-Signature=abc failed"),
//!     "GET https://h/a?<redacted> failed"
//! );
//! ```

use std::fmt::Write as _;

/// What replaces a secret.
pub const REDACTED: &str = "<redacted>";

/// A secret as a `Debug` output shows it: `<redacted>`, keeping only what is not secret (whether
/// an `Option` holds a value, the keys of a map). What `#[derive(SectionKeys)]` prints for a
/// `#[karu(secret)]` field.
///
/// ```
/// use std::collections::BTreeMap;
/// use karu_engine::sdk::redact::Concealed;
///
/// let token = Some("s3cret".to_string());
/// assert_eq!(format!("{:?}", Concealed(&token)), "Some(<redacted>)");
/// assert_eq!(format!("{:?}", Concealed(&None::<String>)), "None");
/// let headers = BTreeMap::from([("X-Api-Key".to_string(), "s3cret".to_string())]);
/// assert_eq!(format!("{:?}", Concealed(&headers)), r#"{"X-Api-Key": <redacted>}"#);
/// ```
pub struct Concealed<'a, T: ?Sized>(pub &'a T);

/// How a secret's type is shown by [`Concealed`].
pub trait Conceal {
    /// Write the value with every secret part as `<redacted>`.
    fn fmt_concealed(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result;
}

impl<T: ?Sized + Conceal> std::fmt::Debug for Concealed<'_, T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt_concealed(f)
    }
}

/// Shown as `<redacted>` without quotes.
struct Hidden;

impl std::fmt::Debug for Hidden {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(REDACTED)
    }
}

impl Conceal for String {
    fn fmt_concealed(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(REDACTED)
    }
}

impl Conceal for std::path::PathBuf {
    fn fmt_concealed(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(REDACTED)
    }
}

impl<T: Conceal> Conceal for Option<T> {
    fn fmt_concealed(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Some(value) => f.debug_tuple("Some").field(&Concealed(value)).finish(),
            None => f.write_str("None"),
        }
    }
}

impl<K: std::fmt::Debug, V> Conceal for std::collections::BTreeMap<K, V> {
    fn fmt_concealed(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_map()
            .entries(self.keys().map(|k| (k, Hidden)))
            .finish()
    }
}

impl<K: std::fmt::Debug, V, S> Conceal for std::collections::HashMap<K, V, S> {
    fn fmt_concealed(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_map()
            .entries(self.keys().map(|k| (k, Hidden)))
            .finish()
    }
}

/// Elements of provider error bodies that echo what was signed, or the signature itself.
const SIGNING_ELEMENTS: [&str; 7] = [
    "SignatureProvided",
    "StringToSign",
    "StringToSignBytes",
    "CanonicalRequest",
    "CanonicalRequestBytes",
    "AWSAccessKeyId",
    "Signature",
];

/// An address (or a canonical identity) without its query string: everything before the first
/// `?`.
///
/// ```
/// use karu_engine::sdk::redact;
/// assert_eq!(redact::without_query("https://h/a?sig=x"), "https://h/a");
/// assert_eq!(redact::without_query("s3://b/k"), "s3://b/k");
/// ```
pub fn without_query(address: &str) -> &str {
    match address.find('?') {
        Some(i) => &address[..i],
        None => address,
    }
}

/// An address as it may appear in a message: user information (`user:password@`) and the
/// query string replaced by `<redacted>`. For an address a caller wrote, which may be
/// anything: a path, a URL, or neither.
///
/// ```
/// use karu_engine::sdk::redact;
/// assert_eq!(redact::address("https://u:p@h/a?sig=x"), "https://<redacted>@h/a?<redacted>");
/// assert_eq!(redact::address("/data/a.bin"), "/data/a.bin");
/// ```
pub fn address(address: &str) -> String {
    let without_query = without_query(address);
    let mut out = match without_query.find("://") {
        Some(i) => {
            let rest = &without_query[i + 3..];
            let authority_end = rest.find('/').unwrap_or(rest.len());
            let authority = &rest[..authority_end];
            let host = match authority.rfind('@') {
                Some(at) => format!("{REDACTED}@{}", &authority[at + 1..]),
                None => authority.to_string(),
            };
            format!("{}://{host}{}", &without_query[..i], &rest[authority_end..])
        }
        None => without_query.to_string(),
    };
    if out.len() > QUOTED_MAX {
        out = clipped(&out).into_owned();
    }
    if without_query.len() < address.len() {
        let _ = write!(out, "?{REDACTED}");
    }
    out
}

/// The longest address (or identity) a message quotes whole, in bytes.
pub const QUOTED_MAX: usize = 512;

/// `text` as a message quotes it: whole up to [`QUOTED_MAX`] bytes, else its first 384 and
/// last 64 bytes (at character boundaries) around how many it leaves out, so that a read of
/// a megabyte-long address fails with a message of a few hundred bytes, not a megabyte.
///
/// ```
/// use karu_engine::sdk::redact;
/// assert_eq!(redact::clipped("/data/a.bin"), "/data/a.bin");
/// let long = format!("/{}", "a".repeat(1000));
/// assert_eq!(redact::clipped(&long).len(), 384 + 64 + "…(553 bytes)…".len());
/// ```
pub fn clipped(text: &str) -> std::borrow::Cow<'_, str> {
    if text.len() <= QUOTED_MAX {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut head = 384;
    while !text.is_char_boundary(head) {
        head -= 1;
    }
    let mut tail = text.len() - 64;
    while !text.is_char_boundary(tail) {
        tail += 1;
    }
    let left_out = tail - head;
    std::borrow::Cow::Owned(format!(
        "{}…({left_out} bytes)…{}",
        &text[..head],
        &text[tail..]
    ))
}

/// A request URL as it may appear in a `Debug` output or a log: [`address`] of its text.
///
/// ```
/// use karu_engine::sdk::redact;
/// let url: http::Uri = "https://user:pw@h:8443/a/b?X-Amz-Signature=s".parse().unwrap();
/// assert_eq!(redact::uri(&url), "https://<redacted>@h:8443/a/b?<redacted>");
/// ```
pub fn uri(uri: &http::Uri) -> String {
    address(&uri.to_string())
}

/// Free text (an error message, a body summary) with every query string (from `?` to the
/// next whitespace, quote or angle bracket) and the user information of every URL in it
/// replaced by `<redacted>`.
///
/// ```
/// use karu_engine::sdk::redact;
/// assert_eq!(
///     redact::text("see https://u:pw@h/p?token=t and \"x?y\""),
///     "see https://<redacted>@h/p?<redacted> and \"x?<redacted>\""
/// );
/// ```
pub fn text(text: &str) -> String {
    userinfo(&query_strings(text))
}

/// `text` with every query string replaced.
fn query_strings(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '?' && chars.peek().is_some_and(|n| !n.is_whitespace()) {
            let _ = write!(out, "?{REDACTED}");
            while chars.peek().is_some_and(|n| !ends_a_url(*n)) {
                chars.next();
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// `text` with the user information of every `scheme://user@host` in it replaced.
fn userinfo(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(i) = rest.find("://") {
        let (before, after) = rest.split_at(i + 3);
        out.push_str(before);
        let authority_end = after
            .find(|c: char| c == '/' || ends_a_url(c))
            .unwrap_or(after.len());
        let authority = &after[..authority_end];
        match authority.rfind('@') {
            Some(at) => {
                out.push_str(REDACTED);
                out.push_str(&authority[at..]);
            }
            None => out.push_str(authority),
        }
        rest = &after[authority_end..];
    }
    out.push_str(rest);
    out
}

/// Whether `c` ends a URL inside free text.
fn ends_a_url(c: char) -> bool {
    c.is_whitespace() || matches!(c, '"' | '\'' | '<' | '>')
}

/// An XML error body without the elements that echo signing material (`<StringToSign>`,
/// `<SignatureProvided>`, `<CanonicalRequest>`, …), for a body shown as text.
///
/// ```
/// use karu_engine::sdk::redact;
/// assert_eq!(
///     redact::signing_elements("<Error><StringToSign>AWS4 x</StringToSign>oops</Error>"),
///     "<Error>oops</Error>"
/// );
/// ```
pub fn signing_elements(text: &str) -> String {
    let mut out = text.to_string();
    for name in SIGNING_ELEMENTS {
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

/// An error's message followed by those of its sources (each once), on one line, with
/// [`text`] applied: for the error of an SDK a provider calls (aws-config, gcp_auth,
/// azure_identity), whose chain says why a lookup failed.
///
/// ```
/// use karu_engine::sdk::redact;
///
/// #[derive(Debug)]
/// struct Outer(std::io::Error);
/// impl std::fmt::Display for Outer {
///     fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
///         f.write_str("the token endpoint failed")
///     }
/// }
/// impl std::error::Error for Outer {
///     fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
///         Some(&self.0)
///     }
/// }
///
/// let cause = std::io::Error::other("GET http://169.254.169.254/t?sig=abc:\n refused");
/// assert_eq!(
///     redact::error_chain(&Outer(cause)),
///     "the token endpoint failed: GET http://169.254.169.254/t?<redacted> refused"
/// );
/// ```
pub fn error_chain(error: &dyn std::error::Error) -> String {
    let mut chain = error.to_string();
    let mut source = error.source();
    while let Some(e) = source {
        let message = e.to_string();
        if !chain.contains(&message) {
            chain.push_str(": ");
            chain.push_str(&message);
        }
        source = e.source();
    }
    text(&collapse(&chain))
}

/// Runs of whitespace and control characters as single spaces, trimmed.
pub(crate) fn collapse(text: &str) -> String {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_texts_are_clipped_at_character_boundaries() {
        let short = "é".repeat(QUOTED_MAX / 2);
        assert_eq!(clipped(&short), short.as_str());
        for pad in 0..4 {
            let long = format!("{}{}", "x".repeat(pad), "é".repeat(QUOTED_MAX));
            let shown = clipped(&long);
            let (head, rest) = shown.split_once('…').unwrap();
            let (count, tail) = rest.split_once('…').unwrap();
            assert!(
                head.len() <= 384 && head.len() >= 383,
                "{pad}: {}",
                head.len()
            );
            assert!(
                tail.len() <= 64 && tail.len() >= 63,
                "{pad}: {}",
                tail.len()
            );
            let left_out = long.len() - head.len() - tail.len();
            assert_eq!(count, format!("({left_out} bytes)"));
            assert!(long.starts_with(head) && long.ends_with(tail));
        }
        let written = format!("https://u:p@h/{}?sig=x", "a".repeat(1000));
        let shown = address(&written);
        assert!(shown.starts_with("https://<redacted>@h/aaa") && shown.ends_with("aaa?<redacted>"));
        assert!(shown.len() < QUOTED_MAX, "{shown}");
    }

    #[test]
    fn addresses_lose_user_information_and_queries() {
        for (written, shown) in [
            ("https://u:p@h/a?sig=x", "https://<redacted>@h/a?<redacted>"),
            ("https://h/a?sig=x", "https://h/a?<redacted>"),
            ("https://u@h", "https://<redacted>@h"),
            ("https://h/p@q", "https://h/p@q"),
            ("s3://b/k", "s3://b/k"),
            ("/data/a?b", "/data/a?<redacted>"),
            ("", ""),
        ] {
            assert_eq!(super::address(written), shown, "{written}");
        }
    }

    #[test]
    fn a_uri_shows_neither_user_information_nor_query() {
        let url: http::Uri = "http://user:SECRET@127.0.0.1:9/x?sig=SECRET"
            .parse()
            .unwrap();
        let shown = uri(&url);
        assert!(!shown.contains("SECRET"), "{shown}");
        assert_eq!(shown, "http://<redacted>@127.0.0.1:9/x?<redacted>");
    }

    #[test]
    fn text_loses_every_query_and_user_information() {
        assert_eq!(
            text("Service Unavailable: see https://h/p?X-Amz-Signature=s3cr3t&a=b now"),
            "Service Unavailable: see https://h/p?<redacted> now"
        );
        assert_eq!(
            text("<a href='https://h/x?t=1'>https://me:pw@h/</a>"),
            "<a href='https://h/x?<redacted>'>https://<redacted>@h/</a>"
        );
        assert_eq!(text("is it? yes"), "is it? yes");
        assert_eq!(text("a://@"), "a://<redacted>@");
    }

    #[test]
    fn signing_elements_go_even_unclosed() {
        let body = "<Error><Code>SignatureDoesNotMatch</Code><SignatureProvided>abc</SignatureProvided>\
                    <StringToSign>AWS4-HMAC-SHA256 secret";
        let kept = signing_elements(body);
        assert_eq!(kept, "<Error><Code>SignatureDoesNotMatch</Code>");
    }

    #[test]
    fn error_chains_are_collapsed_deduplicated_and_redacted() {
        #[derive(Debug)]
        struct Chain(&'static str, Option<Box<Chain>>);
        impl std::fmt::Display for Chain {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.0)
            }
        }
        impl std::error::Error for Chain {
            fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
                self.1.as_deref().map(|c| c as _)
            }
        }
        let error = Chain(
            "failed to load: dispatch failure",
            Some(Box::new(Chain(
                "dispatch failure",
                Some(Box::new(Chain(
                    "connect to\n  http://u:pw@169.254.169.254/latest?token=T",
                    None,
                ))),
            ))),
        );
        assert_eq!(
            error_chain(&error),
            "failed to load: dispatch failure: connect to http://<redacted>@169.254.169.254/latest?<redacted>"
        );
    }

    #[test]
    fn collapse_joins_whitespace_runs() {
        assert_eq!(collapse("  a\n\t b\u{7}c  "), "a b c");
    }
}
