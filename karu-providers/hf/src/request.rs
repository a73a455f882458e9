//! Addresses, resolve URLs, the Hub's error answers and the lifetime of a signed CDN location:
//! plain functions, tested exhaustively.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use karu_engine::sdk::http::{HeaderMap, Uri};
use karu_engine::sdk::{CanonicalPath, Error, PATH_KEEPS, Resolved, Status, encode_path, redact};
use percent_encoding::{AsciiSet, percent_decode_str, utf8_percent_encode};

/// The Hub everyone means when no endpoint is configured.
pub(crate) const DEFAULT_ENDPOINT: &str = "https://huggingface.co";

/// The revision of an address that names none.
pub(crate) const DEFAULT_REVISION: &str = "main";

/// Longest organisation or repository name the Hub accepts.
const MAX_NAME_LEN: usize = 96;

/// What a revision keeps unencoded in a resolve URL (`quote(revision, safe="")`: `/` encoded,
/// so `refs/pr/1` is one path segment, `refs%2Fpr%2F1`). A file path keeps `/` as well
/// ([`encode_path`], Python's `quote(path)`).
const REVISION_ENCODE: &AsciiSet = &PATH_KEEPS.add(b'/');

/// What a revision encodes in a canonical `hf://` path: `%` and `/` only, so it stays one
/// segment and decodes back to itself.
const CANONICAL_REVISION: &AsciiSet = &percent_encoding::CONTROLS.add(b'%').add(b'/');

/// Why an address is not a Hugging Face file.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub(crate) enum AddressError {
    #[error("not an hf:// address or a Hub file URL")]
    Scheme,
    #[error("expected hf://[datasets/|spaces/]org/repo[@revision]/path/in/repo")]
    Shape,
    #[error("a Hub URL names a file as /[datasets/|spaces/]org/repo/resolve/REVISION/path")]
    NotAFile,
    #[error("the {what} name is not a Hub name (letters, digits, '-', '_', '.'; at most 96)")]
    Name { what: &'static str },
    #[error("the revision is empty or holds control characters")]
    Revision,
    #[error("the path in the repository has an empty, '.' or '..' segment or a control character")]
    Path,
    #[error("the address is not valid UTF-8 once percent-decoded")]
    Encoding,
}

/// The kind of a Hub repository: its URL prefix.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum RepoKind {
    Model,
    Dataset,
    Space,
}

impl RepoKind {
    /// The prefix of its repository ids in paths and URLs.
    pub(crate) fn prefix(self) -> &'static str {
        match self {
            RepoKind::Model => "",
            RepoKind::Dataset => "datasets/",
            RepoKind::Space => "spaces/",
        }
    }

    fn split(rest: &str) -> (RepoKind, &str) {
        if let Some(r) = rest.strip_prefix("datasets/") {
            (RepoKind::Dataset, r)
        } else if let Some(r) = rest.strip_prefix("spaces/") {
            (RepoKind::Space, r)
        } else {
            (RepoKind::Model, rest)
        }
    }
}

/// One file of one revision of one repository.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct Address {
    pub(crate) kind: RepoKind,
    pub(crate) org: String,
    pub(crate) repo: String,
    pub(crate) revision: String,
    pub(crate) path: String,
}

impl Address {
    /// `hf://[datasets/|spaces/]org/repo@revision/path`, the revision always named, with `%`
    /// and `/` in it encoded.
    pub(crate) fn canonical(&self) -> String {
        let revision = utf8_percent_encode(&self.revision, CANONICAL_REVISION);
        format!(
            "hf://{}{}/{}@{revision}/{}",
            self.kind.prefix(),
            self.org,
            self.repo,
            self.path
        )
    }

    /// The repository id with its kind's prefix: `datasets/org/repo`.
    pub(crate) fn repository(&self) -> String {
        format!("{}{}/{}", self.kind.prefix(), self.org, self.repo)
    }

    pub(crate) fn resolved(&self) -> Resolved {
        Resolved::remote(
            CanonicalPath::new(self.canonical()),
            Some(self.repository()),
            self.path.clone(),
        )
    }

    /// The resolve URL at `endpoint`: `{endpoint}/{repository}/resolve/{revision}/{path}`,
    /// the revision one encoded segment and the path encoded as the Hub's clients do.
    pub(crate) fn resolve_url(&self, endpoint: &str) -> String {
        format!(
            "{}/{}/resolve/{}/{}",
            endpoint.trim_end_matches('/'),
            self.repository(),
            utf8_percent_encode(&self.revision, REVISION_ENCODE),
            encode_path(&self.path)
        )
    }
}

/// Parse an `hf://` address or a pasted Hub file URL (`https://huggingface.co/…/resolve/…`).
pub(crate) fn parse(address: &str) -> Result<Address, AddressError> {
    if let Some(rest) = strip_prefix_ci(address, "hf://") {
        return parse_hf(rest);
    }
    for host in ["https://huggingface.co/", "https://hf.co/"] {
        if let Some(rest) = strip_prefix_ci(address, host) {
            return parse_url_path(rest);
        }
    }
    Err(AddressError::Scheme)
}

/// The error of an address that does not parse, for this read alone.
pub(crate) fn invalid(address: &str, why: &AddressError) -> Error {
    Error::new(
        Status::InvalidArgument,
        format!(
            "invalid Hugging Face address {}: {why}",
            redact::address(address)
        ),
    )
}

fn strip_prefix_ci<'a>(text: &'a str, prefix: &str) -> Option<&'a str> {
    let (head, rest) = text.split_at_checked(prefix.len())?;
    head.eq_ignore_ascii_case(prefix).then_some(rest)
}

/// `[datasets/|spaces/]org/repo[@revision]/path`; the path is literal, the revision may be
/// percent-encoded (`refs%2Fpr%2F1`) or one of the Hub's special references written out
/// (`refs/pr/1`, `refs/convert/parquet`).
fn parse_hf(rest: &str) -> Result<Address, AddressError> {
    let (kind, rest) = RepoKind::split(rest);
    let (org, rest) = rest.split_once('/').ok_or(AddressError::Shape)?;
    let (repo_part, after) = match rest.find(['/', '@']) {
        Some(i) => rest.split_at(i),
        None => return Err(AddressError::Shape),
    };
    let (revision, path) = match after.strip_prefix('@') {
        Some(at) => {
            let (revision, path) = split_revision(at).ok_or(AddressError::Shape)?;
            (decode(revision)?, path)
        }
        None => (DEFAULT_REVISION.to_string(), &after[1..]),
    };
    build(kind, org, repo_part, revision, path.to_string())
}

/// A pasted URL's path after the host: `[datasets/|spaces/]org/repo/resolve/REV/path` (or
/// `blob/`, the same file's page); the query and fragment are dropped, and the revision and
/// path percent-decoded.
fn parse_url_path(rest: &str) -> Result<Address, AddressError> {
    let rest = rest.split(['?', '#']).next().unwrap_or("");
    let (kind, rest) = RepoKind::split(rest);
    let mut parts = rest.splitn(4, '/');
    let (Some(org), Some(repo), Some(verb), Some(tail)) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(AddressError::NotAFile);
    };
    if !matches!(verb, "resolve" | "blob") {
        return Err(AddressError::NotAFile);
    }
    let (revision, path) = split_revision(tail).ok_or(AddressError::NotAFile)?;
    build(kind, org, repo, decode(revision)?, decode(path)?)
}

/// Split `revision/path`: the Hub's special references (`refs/pr/N`, `refs/convert/NAME`)
/// take three segments, any other revision one.
fn split_revision(text: &str) -> Option<(&str, &str)> {
    let segments = if text.starts_with("refs/pr/") || text.starts_with("refs/convert/") {
        3
    } else {
        1
    };
    let mut end = 0;
    for _ in 0..segments {
        end += text[end..].find('/')? + 1;
    }
    Some((&text[..end - 1], &text[end..]))
}

fn decode(text: &str) -> Result<String, AddressError> {
    percent_decode_str(text)
        .decode_utf8()
        .map(|s| s.into_owned())
        .map_err(|_| AddressError::Encoding)
}

fn build(
    kind: RepoKind,
    org: &str,
    repo: &str,
    revision: String,
    path: String,
) -> Result<Address, AddressError> {
    check_name("organisation", org)?;
    check_name("repository", repo)?;
    if revision.is_empty() || revision.chars().any(char::is_control) {
        return Err(AddressError::Revision);
    }
    let bad_segment = |s: &str| s.is_empty() || s == "." || s == "..";
    if path.split('/').any(bad_segment) || path.chars().any(char::is_control) {
        return Err(AddressError::Path);
    }
    Ok(Address {
        kind,
        org: org.to_string(),
        repo: repo.to_string(),
        revision,
        path,
    })
}

fn check_name(what: &'static str, name: &str) -> Result<(), AddressError> {
    let fine = karu_engine::sdk::is_plain_name(name, MAX_NAME_LEN);
    if fine {
        Ok(())
    } else {
        // Not the name itself: it may hold what looked like user information.
        Err(AddressError::Name { what })
    }
}

/// How long a signed location may still be used at `now`: until the expiry its signature
/// states (`X-Amz-Date` + `X-Amz-Expires` for presigned S3 URLs, `Expires` in seconds since
/// the epoch for CloudFront's). `None` when the URL states no expiry or is already expired:
/// such a location is not reused.
pub(crate) fn signed_lifetime(location: &Uri, now: SystemTime) -> Option<Duration> {
    let query = location.query()?;
    let mut amz_date = None;
    let mut amz_expires = None;
    let mut expires = None;
    for pair in query.split('&') {
        let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
        if name.eq_ignore_ascii_case("X-Amz-Date") {
            amz_date = Some(value);
        } else if name.eq_ignore_ascii_case("X-Amz-Expires") {
            amz_expires = value.parse::<u64>().ok();
        } else if name == "Expires" {
            expires = value.parse::<u64>().ok();
        }
    }
    let until = match (amz_date.and_then(parse_amz_date), amz_expires, expires) {
        (Some(signed), Some(valid), _) => signed.checked_add(valid)?,
        (_, _, Some(epoch)) => epoch,
        _ => return None,
    };
    let until = UNIX_EPOCH.checked_add(Duration::from_secs(until))?;
    until.duration_since(now).ok().filter(|d| !d.is_zero())
}

/// `YYYYMMDDTHHMMSSZ` in seconds since the epoch.
fn parse_amz_date(text: &str) -> Option<u64> {
    let b = text.as_bytes();
    if b.len() != 16 || b[8] != b'T' || b[15] != b'Z' {
        return None;
    }
    let num = |from: usize, to: usize| -> Option<u64> {
        let s = text.get(from..to)?;
        s.bytes()
            .all(|c| c.is_ascii_digit())
            .then(|| s.parse().ok())?
    };
    let (year, month, day) = (num(0, 4)?, num(4, 6)?, num(6, 8)?);
    let (hour, minute, second) = (num(9, 11)?, num(11, 13)?, num(13, 15)?);
    if !(1..=12).contains(&month) || !(1..=31).contains(&day) || hour > 23 || minute > 59 {
        return None;
    }
    if second > 60 || year < 1970 {
        return None;
    }
    let days = days_from_civil(year, month, day);
    Some(days * 86_400 + hour * 3600 + minute * 60 + second)
}

/// Days from 1970-01-01 to a date of the proleptic Gregorian calendar (year ≥ 1970).
fn days_from_civil(year: u64, month: u64, day: u64) -> u64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y / 400;
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// What to add to the Hub's own message of an error answer: what a user does about a gated or
/// private repository. The Hub answers 401 when no token was sent to a gated or private
/// repository (with `X-Error-Code: GatedRepo` or `RepoNotFound`), and 403 when the token has
/// no access to a gated one.
pub(crate) fn hint(status: u16, headers: &HeaderMap) -> Option<String> {
    let code = headers
        .get("x-error-code")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    match (status, code) {
        (401, _) => Some(
            "this repository is gated or private, or the token was refused: a Hugging Face \
             token is needed (set HF_TOKEN or hf.token, or log in with `hf auth login`)"
                .to_string(),
        ),
        (403, "GatedRepo") => Some(
            "the token has no access to this gated repository: request access on its page"
                .to_string(),
        ),
        _ => None,
    }
}

/// Whether the Hub's redirect (`X-Linked-Size`, `X-Linked-Etag`) contradicts the final
/// answer's object size and strong ETag. The size must match whenever both are known (a
/// claim that is not a number is itself a contradiction). ETags are compared only when the
/// final one has the linked one's form, a quoted 64-digit SHA-256 (the Hub's ETag of an LFS
/// file): a CDN answering with its own kind of ETag (an S3 MD5) says nothing either way.
pub(crate) fn linked_contradiction(
    redirect: &HeaderMap,
    total: Option<u64>,
    etag: Option<&str>,
) -> Option<String> {
    let text = |name: &str| {
        redirect
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::trim)
    };
    if let Some(claim) = text("x-linked-size") {
        match claim.parse::<u64>() {
            Err(_) => return Some("X-Linked-Size is not a size".to_string()),
            Ok(size) if total.is_some_and(|t| t != size) => {
                return Some(format!(
                    "X-Linked-Size says {size} bytes, the answer {} bytes",
                    total.unwrap_or_default()
                ));
            }
            Ok(_) => {}
        }
    }
    let sha256 = |tag: &str| {
        let inner = tag.strip_prefix('"')?.strip_suffix('"')?;
        (inner.len() == 64 && inner.bytes().all(|b| b.is_ascii_hexdigit()))
            .then(|| inner.to_ascii_lowercase())
    };
    if let (Some(linked), Some(answer)) = (
        text("x-linked-etag").and_then(sha256),
        etag.and_then(sha256),
    ) && linked != answer
    {
        return Some(format!(
            "X-Linked-Etag says \"{linked}\", the answer's ETag is \"{answer}\""
        ));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn addr(kind: RepoKind, org: &str, repo: &str, revision: &str, path: &str) -> Address {
        Address {
            kind,
            org: org.into(),
            repo: repo.into(),
            revision: revision.into(),
            path: path.into(),
        }
    }

    fn canonical(address: &str) -> String {
        parse(address).unwrap().canonical()
    }

    #[test]
    fn every_spelling_of_a_file_has_one_canonical_path() {
        let model = "hf://openai-community/gpt2@main/config.json";
        for spelling in [
            "hf://openai-community/gpt2/config.json",
            "HF://openai-community/gpt2@main/config.json",
            "https://huggingface.co/openai-community/gpt2/resolve/main/config.json",
            "https://huggingface.co/openai-community/gpt2/resolve/main/config.json?download=true",
            "https://huggingface.co/openai-community/gpt2/blob/main/config.json",
            "https://hf.co/openai-community/gpt2/resolve/main/config.json#x",
        ] {
            assert_eq!(canonical(spelling), model, "{spelling}");
        }
        let dataset = "hf://datasets/org/data@refs%2Fconvert%2Fparquet/default/train/0.parquet";
        for spelling in [
            "hf://datasets/org/data@refs/convert/parquet/default/train/0.parquet",
            "hf://datasets/org/data@refs%2Fconvert%2Fparquet/default/train/0.parquet",
            "https://huggingface.co/datasets/org/data/resolve/refs%2Fconvert%2Fparquet/default/train/0.parquet",
            "https://huggingface.co/datasets/org/data/resolve/refs/convert/parquet/default/train/0.parquet",
        ] {
            assert_eq!(canonical(spelling), dataset, "{spelling}");
        }
        assert_eq!(
            canonical("hf://spaces/o/s@refs/pr/1/app.py"),
            "hf://spaces/o/s@refs%2Fpr%2F1/app.py"
        );
        assert_eq!(
            canonical("https://huggingface.co/o/m/resolve/v1.0/dir/a%20b.bin"),
            "hf://o/m@v1.0/dir/a b.bin"
        );
    }

    #[test]
    fn parts_kinds_and_revisions() {
        assert_eq!(
            parse("hf://datasets/o/d@refs/pr/12/x/y.csv").unwrap(),
            addr(RepoKind::Dataset, "o", "d", "refs/pr/12", "x/y.csv")
        );
        assert_eq!(
            parse("hf://o/m@0123abcd/w.safetensors").unwrap(),
            addr(RepoKind::Model, "o", "m", "0123abcd", "w.safetensors")
        );
        let r = parse("hf://spaces/o/s/app.py").unwrap().resolved();
        assert_eq!(r.container.as_deref(), Some("spaces/o/s"));
        assert_eq!(r.key, "app.py");
        assert_eq!(r.canonical.as_str(), "hf://spaces/o/s@main/app.py");
    }

    #[test]
    fn resolve_urls_encode_as_the_hub_clients_do() {
        let a = addr(RepoKind::Dataset, "o", "d", "refs/pr/1", "dir/a b#c?.bin");
        assert_eq!(
            a.resolve_url("https://huggingface.co/"),
            "https://huggingface.co/datasets/o/d/resolve/refs%2Fpr%2F1/dir/a%20b%23c%3F.bin"
        );
        let m = addr(RepoKind::Model, "o", "m", "main", "w-1_a.~b");
        assert_eq!(
            m.resolve_url("http://127.0.0.1:8080/mirror"),
            "http://127.0.0.1:8080/mirror/o/m/resolve/main/w-1_a.~b"
        );
    }

    #[test]
    fn bad_addresses_are_specific_errors() {
        use AddressError::*;
        let cases: [(&str, AddressError); 12] = [
            ("s3://b/k", Scheme),
            ("hf://org", Shape),
            ("hf://org/repo", Shape),
            ("hf://org/repo@main", Shape),
            ("hf://org/repo@refs/pr/1", Shape),
            ("hf://org/repo/", Path),
            ("hf://org/repo/a//b", Path),
            ("hf://org/repo/a/../b", Path),
            ("hf://org/repo@/a", Revision),
            ("https://huggingface.co/api/models/o/m", NotAFile),
            ("https://huggingface.co/o/m/tree/main/a", NotAFile),
            ("hf://org/repo@%ff/a", Encoding),
        ];
        for (address, want) in cases {
            assert_eq!(parse(address).unwrap_err(), want, "{address}");
        }
        assert_eq!(
            parse("hf://o r/m/a").unwrap_err(),
            Name {
                what: "organisation"
            }
        );
        let e = invalid(
            "hf://user:SECRET@o/m/a",
            &parse("hf://user:SECRET@o/m/a").unwrap_err(),
        );
        assert!(!e.message().contains("SECRET"), "{e}");
        let long = format!("hf://o/{}/a", "m".repeat(97));
        assert_eq!(parse(&long).unwrap_err(), Name { what: "repository" });
        let e = invalid(
            "https://huggingface.co/x?token=SECRET",
            &AddressError::NotAFile,
        );
        assert_eq!(e.status(), Status::InvalidArgument);
        assert!(!e.message().contains("SECRET"), "{e}");
    }

    #[test]
    fn signed_lifetimes() {
        let now = UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        let uri = |q: &str| format!("https://cdn.example/b?{q}").parse::<Uri>().unwrap();
        // 2023-11-14T22:13:20Z is 1_700_000_000.
        let amz = uri("X-Amz-Date=20231114T221320Z&X-Amz-Expires=3600&X-Amz-Signature=s");
        assert_eq!(signed_lifetime(&amz, now), Some(Duration::from_secs(3600)));
        let cloudfront = uri("Expires=1700000600&Policy=p&Signature=s&Key-Pair-Id=k");
        assert_eq!(
            signed_lifetime(&cloudfront, now),
            Some(Duration::from_secs(600))
        );
        for stale in [
            "Expires=1700000000",
            "Expires=1",
            "X-Amz-Date=20231114T211320Z&X-Amz-Expires=3600",
        ] {
            assert_eq!(signed_lifetime(&uri(stale), now), None, "{stale}");
        }
        for unknown in [
            "sig=1",
            "X-Amz-Expires=60",
            "X-Amz-Date=2023&X-Amz-Expires=60",
        ] {
            assert_eq!(signed_lifetime(&uri(unknown), now), None, "{unknown}");
        }
        let bare: Uri = "https://cdn.example/b".parse().unwrap();
        assert_eq!(signed_lifetime(&bare, now), None);
    }

    #[test]
    fn amz_dates() {
        assert_eq!(parse_amz_date("19700101T000000Z"), Some(0));
        assert_eq!(parse_amz_date("20000301T000000Z"), Some(951_868_800));
        assert_eq!(parse_amz_date("20240229T120000Z"), Some(1_709_208_000));
        for bad in [
            "20241301T000000Z",
            "20240100T000000Z",
            "20240101T240000Z",
            "2024-01-01T00:00Z",
            "20240101 000000Z",
            "19690101T000000Z",
        ] {
            assert_eq!(parse_amz_date(bad), None, "{bad}");
        }
    }

    #[test]
    fn hints_for_gated_and_private_repositories() {
        let mut headers = HeaderMap::new();
        assert!(hint(401, &headers).unwrap().contains("token is needed"));
        assert_eq!(hint(403, &headers), None);
        assert_eq!(hint(404, &headers), None);
        headers.insert("x-error-code", "GatedRepo".parse().unwrap());
        assert!(hint(403, &headers).unwrap().contains("request access"));
    }

    fn name() -> impl Strategy<Value = String> {
        "[A-Za-z0-9][A-Za-z0-9._-]{0,20}"
    }

    fn kind() -> impl Strategy<Value = RepoKind> {
        prop_oneof![
            Just(RepoKind::Model),
            Just(RepoKind::Dataset),
            Just(RepoKind::Space)
        ]
    }

    fn revision() -> impl Strategy<Value = String> {
        prop_oneof![
            "[A-Za-z0-9._%-]{1,12}",
            "refs/pr/[0-9]{1,3}",
            "refs/convert/[a-z]{1,8}",
            "[a-z]{1,5}/[a-z0-9%]{1,5}",
        ]
    }

    fn path() -> impl Strategy<Value = String> {
        proptest::collection::vec("[A-Za-z0-9 ._%@#?+=-]{1,8}", 1..4)
            .prop_filter("no dot segments", |segs| {
                segs.iter().all(|s| s != "." && s != "..")
            })
            .prop_map(|segs| segs.join("/"))
    }

    proptest! {
        /// The canonical path parses back to the same file, and so does the resolve URL of
        /// that file at huggingface.co (the form users paste).
        #[test]
        fn canonical_and_pasted_forms_round_trip(
            kind in kind(), org in name(), repo in name(), revision in revision(), path in path()
        ) {
            prop_assume!(org != "." && org != ".." && repo != "." && repo != "..");
            let a = addr(kind, &org, &repo, &revision, &path);
            prop_assert_eq!(&parse(&a.canonical()).unwrap(), &a);
            let pasted = a.resolve_url(DEFAULT_ENDPOINT);
            prop_assert_eq!(&parse(&pasted).unwrap(), &a);
            prop_assert!(pasted.parse::<Uri>().is_ok(), "{}", pasted);
        }

        /// No input panics, and whatever parses has a canonical path that parses to itself.
        #[test]
        fn any_input_parses_or_fails_cleanly(tail in "[ -~]{0,40}") {
            for prefix in ["hf://", "https://huggingface.co/"] {
                if let Ok(a) = parse(&format!("{prefix}{tail}")) {
                    prop_assert_eq!(&parse(&a.canonical()).unwrap(), &a);
                }
            }
        }
    }

    #[test]
    fn linked_size_and_etag_are_checked_against_the_answer() {
        let sha = |c: char| format!("\"{}\"", c.to_string().repeat(64));
        let redirect = |size: Option<&str>, etag: Option<&str>| {
            let mut h = HeaderMap::new();
            if let Some(s) = size {
                h.insert("x-linked-size", s.parse().unwrap());
            }
            if let Some(e) = etag {
                h.insert("x-linked-etag", e.parse().unwrap());
            }
            h
        };
        let a = sha('a');
        let agreed = redirect(Some("100"), Some(&a));
        assert_eq!(linked_contradiction(&agreed, Some(100), Some(&a)), None);
        assert_eq!(linked_contradiction(&agreed, None, None), None);
        // The CDN's own kind of ETag says nothing either way.
        assert_eq!(
            linked_contradiction(&agreed, Some(100), Some("\"d41d8cd9-2\"")),
            None
        );
        assert_eq!(
            linked_contradiction(&redirect(None, None), Some(7), Some(&a)),
            None
        );
        assert_eq!(
            linked_contradiction(&agreed, Some(101), Some(&a)).as_deref(),
            Some("X-Linked-Size says 100 bytes, the answer 101 bytes")
        );
        assert!(linked_contradiction(&agreed, Some(100), Some(&sha('b'))).is_some());
        assert_eq!(
            linked_contradiction(&agreed, Some(100), Some(&a.to_uppercase())),
            None,
            "hex digits in either case"
        );
        assert_eq!(
            linked_contradiction(&redirect(Some("NaN"), None), Some(100), None).as_deref(),
            Some("X-Linked-Size is not a size")
        );
        // A weak or unquoted linked tag is not compared.
        let weak = format!("W/{a}");
        assert_eq!(
            linked_contradiction(&redirect(None, Some(&weak)), None, Some(&sha('b'))),
            None
        );
    }
}
