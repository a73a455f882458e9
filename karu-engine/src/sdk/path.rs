//! Object names in URL paths: the one encoding the providers' request URLs share.

use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};

/// The bytes an object name keeps as they are in a URL path: the unreserved characters
/// (`A`–`Z`, `a`–`z`, `0`–`9`, `-`, `.`, `_`, `~`) and `/`. Every other byte of the name's
/// UTF-8 is percent-encoded, once: a space as `%20`, `+` as `%2B`, a literal `%` as `%25`, `ü`
/// as `%C3%BC`. That is S3's URI encoding (the path SigV4 signs), and what GCS, Azure Blob and
/// the Hugging Face Hub decode back to the same name; `a//b` keeps its empty segment.
pub const PATH_KEEPS: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~')
    .remove(b'/');

/// `name` (a key, a blob or file path) as it goes into a URL path: see [`PATH_KEEPS`].
///
/// ```
/// use karu_engine::sdk::encode_path;
/// assert_eq!(encode_path("dir/a b+c%d/ü.bin"), "dir/a%20b%2Bc%25d/%C3%BC.bin");
/// ```
pub fn encode_path(name: &str) -> String {
    utf8_percent_encode(name, PATH_KEEPS).to_string()
}

/// Whether `name` is a plain name of at most `max_len` bytes, as the Hugging Face Hub and
/// Source Cooperative spell accounts, repositories and products: ASCII letters, digits, `-`,
/// `_` and `.`, neither empty nor `.` or `..`.
pub fn is_plain_name(name: &str, max_len: usize) -> bool {
    !name.is_empty()
        && name.len() <= max_len
        && name != "."
        && name != ".."
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_unreserved_bytes_and_slashes_stay_as_they_are() {
        let kept = "AZaz09-._~/";
        assert_eq!(encode_path(kept), kept);
        assert_eq!(encode_path("a//b/"), "a//b/");
        for reserved in "!#$&'()*+,:;=?@[] \"%<>\\^`{|}".chars() {
            let encoded = encode_path(&reserved.to_string());
            assert_eq!(encoded, format!("%{:02X}", reserved as u8), "{reserved:?}");
        }
        assert_eq!(encode_path("ünï"), "%C3%BC%6E%C3%AF".replace("%6E", "n"));
        assert_eq!(encode_path("\u{7f}\n"), "%7F%0A");
    }

    #[test]
    fn a_percent_sign_is_encoded_not_taken_for_an_escape() {
        assert_eq!(encode_path("%41%2F"), "%2541%252F");
    }
}
