//! The body of a token request: `application/x-www-form-urlencoded`.

/// `pairs` as a form body: each name and value percent-encoded as the URL standard's form
/// serializer does (a space is `+`), joined by `&`.
///
/// ```
/// use karu_engine::sdk::token::form;
/// assert_eq!(
///     form(&[("grant_type", "refresh_token"), ("refresh_token", "1//a+b=c d")]),
///     "grant_type=refresh_token&refresh_token=1%2F%2Fa%2Bb%3Dc+d"
/// );
/// ```
pub fn form(pairs: &[(&str, &str)]) -> String {
    let mut serializer = url::form_urlencoded::Serializer::new(String::new());
    for (name, value) in pairs {
        serializer.append_pair(name, value);
    }
    serializer.finish()
}
