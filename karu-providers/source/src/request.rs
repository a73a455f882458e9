//! Addresses and request URLs: plain functions, tested exhaustively.

use karu_engine::sdk::{CanonicalPath, Error, Resolved, Status, encode_path, redact};
use percent_encoding::percent_decode_str;

/// Source Cooperative's data proxy.
pub(crate) const DEFAULT_ENDPOINT: &str = "https://data.source.coop";

/// Longest account or product name.
const MAX_NAME_LEN: usize = 128;

/// Why an address is not a Source Cooperative file.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub(crate) enum AddressError {
    #[error("not a source:// address or a data.source.coop URL")]
    Scheme,
    #[error("expected source://account/product/path")]
    Shape,
    #[error("the {what} name is not a Source name (letters, digits, '-', '_', '.')")]
    Name { what: &'static str },
    #[error("the path has an empty, '.' or '..' segment or a control character")]
    Path,
    #[error("a data proxy URL with a query is a listing, not a file")]
    Query,
    #[error("the address is not valid UTF-8 once percent-decoded")]
    Encoding,
}

/// One file of one data product.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Address {
    pub(crate) account: String,
    pub(crate) product: String,
    pub(crate) path: String,
}

impl Address {
    pub(crate) fn canonical(&self) -> String {
        format!("source://{}/{}/{}", self.account, self.product, self.path)
    }

    pub(crate) fn resolved(&self) -> Resolved {
        Resolved::remote(
            CanonicalPath::new(self.canonical()),
            Some(format!("{}/{}", self.account, self.product)),
            self.path.clone(),
        )
    }

    /// `{endpoint}/{account}/{product}/{path}`, the path encoded as S3 requests are.
    pub(crate) fn url(&self, endpoint: &str) -> String {
        format!(
            "{}/{}/{}/{}",
            endpoint.trim_end_matches('/'),
            self.account,
            self.product,
            encode_path(&self.path)
        )
    }
}

fn strip_prefix_ci<'a>(text: &'a str, prefix: &str) -> Option<&'a str> {
    let (head, rest) = text.split_at_checked(prefix.len())?;
    head.eq_ignore_ascii_case(prefix).then_some(rest)
}

/// Parse `source://account/product/path` (the path literal) or
/// `https://data.source.coop/account/product/path` (the path percent-decoded, the fragment
/// dropped).
pub(crate) fn parse(address: &str) -> Result<Address, AddressError> {
    if let Some(rest) = strip_prefix_ci(address, "source://") {
        return build(rest.to_string());
    }
    let rest = strip_prefix_ci(address, "https://data.source.coop/").ok_or(AddressError::Scheme)?;
    let rest = rest.split('#').next().unwrap_or("");
    if rest.contains('?') {
        return Err(AddressError::Query);
    }
    let decoded = percent_decode_str(rest)
        .decode_utf8()
        .map_err(|_| AddressError::Encoding)?;
    build(decoded.into_owned())
}

fn build(rest: String) -> Result<Address, AddressError> {
    let mut parts = rest.splitn(3, '/');
    let (Some(account), Some(product), Some(path)) = (parts.next(), parts.next(), parts.next())
    else {
        return Err(AddressError::Shape);
    };
    for (what, name) in [("account", account), ("product", product)] {
        let fine = karu_engine::sdk::is_plain_name(name, MAX_NAME_LEN);
        if !fine {
            // Not the name itself: it may hold what looked like user information.
            return Err(AddressError::Name { what });
        }
    }
    let bad = |s: &str| s.is_empty() || s == "." || s == "..";
    if path.split('/').any(bad) || path.chars().any(char::is_control) {
        return Err(AddressError::Path);
    }
    Ok(Address {
        account: account.to_string(),
        product: product.to_string(),
        path: path.to_string(),
    })
}

/// The error of an address that does not parse, for this read alone.
pub(crate) fn invalid(address: &str, why: &AddressError) -> Error {
    Error::new(
        Status::InvalidArgument,
        format!(
            "invalid Source Cooperative address {}: {why}",
            redact::address(address)
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn both_forms_have_one_canonical_path() {
        let want = "source://cholmes/admin-boundaries/dir/countries 1.parquet";
        for spelling in [
            "source://cholmes/admin-boundaries/dir/countries 1.parquet",
            "SOURCE://cholmes/admin-boundaries/dir/countries 1.parquet",
            "https://data.source.coop/cholmes/admin-boundaries/dir/countries%201.parquet",
            "HTTPS://data.source.coop/cholmes/admin-boundaries/dir/countries%201.parquet#x",
        ] {
            assert_eq!(parse(spelling).unwrap().canonical(), want, "{spelling}");
        }
        let a = parse(want).unwrap();
        assert_eq!(
            a.url("http://127.0.0.1:9/"),
            "http://127.0.0.1:9/cholmes/admin-boundaries/dir/countries%201.parquet"
        );
        let r = a.resolved();
        assert_eq!(r.container.as_deref(), Some("cholmes/admin-boundaries"));
        assert_eq!(r.key, "dir/countries 1.parquet");
    }

    #[test]
    fn bad_addresses_are_specific_errors() {
        use AddressError::*;
        for (address, want) in [
            ("s3://b/k", Scheme),
            ("source://acct", Shape),
            ("source://acct/product", Shape),
            ("source://acct/product/", Path),
            ("source://acct/product/a//b", Path),
            ("source://acct/product/../b", Path),
            ("https://data.source.coop/acct?list-type=2", Query),
            ("https://data.source.coop/a/p/%ff", Encoding),
        ] {
            assert_eq!(parse(address).unwrap_err(), want, "{address}");
        }
        assert_eq!(
            parse("source://a b/p/x").unwrap_err(),
            Name { what: "account" }
        );
        let secret = "source://user:SECRET@a/p/x";
        let e = invalid(secret, &parse(secret).unwrap_err());
        assert!(!e.message().contains("SECRET"), "{e}");
        let e = invalid("https://data.source.coop/a?token=SECRET", &Query);
        assert_eq!(e.status(), Status::InvalidArgument);
        assert!(!e.message().contains("SECRET"), "{e}");
    }

    proptest! {
        /// The canonical path and the data proxy URL of a file parse back to it.
        #[test]
        fn forms_round_trip(
            account in "[a-z0-9][a-z0-9-]{0,15}",
            product in "[a-z0-9][a-z0-9._-]{0,15}",
            segments in proptest::collection::vec("[A-Za-z0-9 ._%@#?+=-]{1,8}", 1..4),
        ) {
            prop_assume!(product != "." && product != "..");
            prop_assume!(segments.iter().all(|s| s != "." && s != ".."));
            let a = Address { account, product, path: segments.join("/") };
            prop_assert_eq!(&parse(&a.canonical()).unwrap(), &a);
            prop_assert_eq!(&parse(&a.url(DEFAULT_ENDPOINT)).unwrap(), &a);
        }
    }
}
