//! The read-only suite: for stores the suite cannot upload to (the Hugging Face Hub, Source
//! Cooperative), the objects a user names are read through Karu and each answer is checked
//! against a reference taken WITHOUT Karu's range logic: the SHA-256 and size the Hub states for
//! an LFS file (`X-Linked-Etag`, `X-Linked-Size` of its resolve endpoint), or the bytes of one
//! whole-object `GET` made by a plain HTTP client.
//!
//! For each named object, in order (the cases after `whole` compare against the bytes `whole`
//! verified, and fail, saying so, without them):
//! - `reference`: the reference, from the plain client;
//! - `stat`: Karu's size equals the reference's;
//! - `whole`: one read of the whole object; its SHA-256 equals the stated one, or its bytes
//!   the plain `GET`'s;
//! - `ranges`: 24 scattered reads (overlapping, adjacent, one byte, both ends) in one batch,
//!   each exact;
//! - `read_ends`: head and tail, exact, sizes agreeing;
//! - `past_end`: a read reaching past the end is `RangeNotSatisfiable` with the valid prefix,
//!   exact; one starting past the end is `RangeNotSatisfiable` with nothing;
//! - `not_found`: a name derived from the object's (`….karu-missing`) is `NotFound`.
//!
//! And for each object named as access-controlled (a gated or private Hub repository), read
//! without a token: `PermissionDenied`.
//!
//! The objects are read whole into memory: name objects up to [`MAX_WHOLE`] bytes.

use std::fmt;
use std::time::Instant;

use bytes::Bytes;
use http_body_util::Full;
use karu::{BatchOptions, Client, ClientBuilder, Read, Status};
use sha2::{Digest, Sha256};

use super::targets::{isolated_builder, upload};
use super::{CaseResult, Options, Report, ensure};
use crate::s3::object_path;

/// The largest object the suite reads whole (1 GiB).
pub const MAX_WHOLE: u64 = 1 << 30;

/// Redirects within the Hub (a renamed repository) the plain client follows.
const MAX_HUB_HOPS: usize = 5;

/// What the read-only suite checks Karu's reads against, taken without Karu.
#[derive(Clone, PartialEq, Eq)]
pub enum Reference {
    /// The size and SHA-256 the store states for the object (the Hub's `X-Linked-Size` and
    /// `X-Linked-Etag` for an LFS file): Karu's whole read must hash to it.
    Sha256 {
        /// The object's size.
        size: u64,
        /// The SHA-256 of its bytes.
        digest: [u8; 32],
    },
    /// The object's bytes from one whole-object `GET` of a plain client.
    Bytes {
        /// The bytes.
        bytes: Bytes,
        /// How they were obtained, for the report.
        how: String,
    },
}

impl Reference {
    fn size(&self) -> u64 {
        match self {
            Reference::Sha256 { size, .. } => *size,
            Reference::Bytes { bytes, .. } => bytes.len() as u64,
        }
    }

    fn describe(&self) -> String {
        match self {
            Reference::Sha256 { size, digest } => format!(
                "{size} bytes, SHA-256 {}… stated by the store (an LFS file)",
                &hex::encode(digest)[..16]
            ),
            Reference::Bytes { bytes, how } => format!("{} bytes {how}", bytes.len()),
        }
    }
}

impl fmt::Debug for Reference {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.describe())
    }
}

/// A store the suite only reads: how Karu reaches it and how a plain client takes the
/// reference of an object.
pub trait ReadOnlyTarget: Send + Sync {
    /// A short name for reports (`"hf-endpoint"`).
    fn name(&self) -> String;

    /// A client builder that reaches the store with the user's credentials, reading no
    /// configuration or environment of the machine.
    fn builder(&self) -> ClientBuilder;

    /// The same without any credential (for the access-controlled objects).
    fn anonymous_builder(&self) -> ClientBuilder;

    /// The reference of the object at Karu's canonical address `canonical`, taken without
    /// Karu.
    ///
    /// # Errors
    /// The plain client's request failed or was refused.
    fn reference(&self, canonical: &str) -> Result<Reference, String>;
}

/// What to read: the objects and the access-controlled objects the user named.
#[derive(Debug, Clone, Default)]
pub struct Objects {
    /// Objects readable with the target's credentials.
    pub readable: Vec<String>,
    /// Objects that must be refused without a token (a gated or private repository).
    pub restricted: Vec<String>,
}

/// Run the read-only suite against `target` over `objects`.
pub fn run_read_only(target: &dyn ReadOnlyTarget, objects: &Objects, options: &Options) -> Report {
    let mut report = Report {
        target: target.name(),
        cases: Vec::new(),
    };
    let wanted = |name: &str| options.wants(name);
    let client = target.builder().build();
    for address in &objects.readable {
        let mut state = ObjectState::default();
        let cases: [(&str, Step); 7] = [
            ("reference", reference),
            ("stat", stat),
            ("whole", whole),
            ("ranges", ranges),
            ("read_ends", read_ends),
            ("past_end", past_end),
            ("not_found", not_found),
        ];
        for (case, step) in cases {
            let name = format!("{address}/{case}");
            if !wanted(&name) {
                continue;
            }
            let started = Instant::now();
            let outcome = match &client {
                Ok(client) => {
                    let ctx = ObjectCtx {
                        target,
                        client,
                        address,
                    };
                    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                        step(&ctx, &mut state)
                    }))
                    .unwrap_or_else(|_| Err("panicked".to_string()))
                }
                Err(e) => Err(format!("cannot build a client: {e}")),
            };
            report.cases.push(CaseResult {
                name,
                outcome,
                requests: 0,
                elapsed: started.elapsed(),
                known_limit: None,
            });
        }
    }
    for address in &objects.restricted {
        let name = format!("{address}/without_token");
        if !wanted(&name) {
            continue;
        }
        let started = Instant::now();
        let outcome = restricted(target, address);
        report.cases.push(CaseResult {
            name,
            outcome,
            requests: 0,
            elapsed: started.elapsed(),
            known_limit: None,
        });
    }
    report
}

type Step = fn(&ObjectCtx<'_>, &mut ObjectState) -> Result<String, String>;

struct ObjectCtx<'a> {
    target: &'a dyn ReadOnlyTarget,
    client: &'a Client,
    address: &'a str,
}

impl ObjectCtx<'_> {
    fn locate(&self) -> Result<karu::Locator, String> {
        self.client
            .locate(self.address)
            .map_err(|e| format!("cannot locate {}: {e}", self.address))
    }
}

/// What the cases of one object learn in turn.
#[derive(Default)]
struct ObjectState {
    reference: Option<Result<Reference, String>>,
    /// The whole object's bytes, once checked against the reference.
    verified: Option<Result<Bytes, String>>,
}

impl ObjectState {
    fn reference(&self) -> Result<&Reference, String> {
        match &self.reference {
            Some(Ok(r)) => Ok(r),
            Some(Err(e)) => Err(format!("no reference: {e}")),
            None => Err("no reference: the reference case did not run".into()),
        }
    }

    fn verified(&self) -> Result<&Bytes, String> {
        match &self.verified {
            Some(Ok(b)) => Ok(b),
            Some(Err(e)) => Err(format!("no verified bytes to compare with: {e}")),
            None => Err("no verified bytes to compare with: the whole case did not run".into()),
        }
    }
}

fn reference(ctx: &ObjectCtx<'_>, state: &mut ObjectState) -> Result<String, String> {
    let object = ctx.locate()?;
    let result = ctx.target.reference(object.canonical().as_str());
    state.reference = Some(result.clone());
    let reference = result?;
    ensure!(
        reference.size() <= MAX_WHOLE,
        "{} bytes: larger than the suite reads whole ({MAX_WHOLE}); name a smaller object",
        reference.size()
    );
    Ok(reference.describe())
}

fn stat(ctx: &ObjectCtx<'_>, state: &mut ObjectState) -> Result<String, String> {
    let size = state.reference()?.size();
    let object = ctx.locate()?;
    let info = ctx.client.stat(&object).map_err(|e| e.to_string())?;
    ensure!(
        info.size == Some(size),
        "Karu's stat says {:?} bytes, the reference {size}",
        info.size
    );
    Ok(format!("size {size}, etag {}", info.etag.is_some()))
}

fn whole(ctx: &ObjectCtx<'_>, state: &mut ObjectState) -> Result<String, String> {
    let result = read_whole(ctx, state.reference()?);
    state.verified = Some(
        result
            .as_ref()
            .map(|(b, _)| b.clone())
            .map_err(Clone::clone),
    );
    result.map(|(_, evidence)| evidence)
}

fn read_whole(ctx: &ObjectCtx<'_>, reference: &Reference) -> Result<(Bytes, String), String> {
    let size = reference.size();
    let bytes = if size == 0 {
        Bytes::new()
    } else {
        let object = ctx.locate()?;
        let done = ctx.client.submit([Read::new(&object, 0, size)]).wait();
        let c = &done[0];
        ensure!(
            c.is_ok(),
            "the whole read failed: {}",
            c.error().map(|e| e.to_string()).unwrap_or_default()
        );
        ensure!(
            c.bytes_received() == size,
            "the whole read delivered {} of {size} bytes",
            c.bytes_received()
        );
        Bytes::copy_from_slice(c.bytes())
    };
    match reference {
        Reference::Sha256 { digest, .. } => {
            let got: [u8; 32] = Sha256::digest(&bytes).into();
            ensure!(
                &got == digest,
                "the whole read's SHA-256 is {}, the store states {}",
                hex::encode(got),
                hex::encode(digest)
            );
            Ok((
                bytes,
                format!("{size} bytes whose SHA-256 is the stated one"),
            ))
        }
        Reference::Bytes {
            bytes: expected, ..
        } => {
            if let Some(at) = first_difference(&bytes, expected) {
                return Err(format!(
                    "the whole read differs from the plain GET's bytes at byte {at}"
                ));
            }
            Ok((bytes, format!("{size} bytes equal to the plain GET's")))
        }
    }
}

fn first_difference(a: &[u8], b: &[u8]) -> Option<usize> {
    if a.len() != b.len() {
        return Some(a.len().min(b.len()));
    }
    a.iter().zip(b).position(|(x, y)| x != y)
}

/// Scattered ranges over an object of `size` bytes: both ends, single bytes, overlapping
/// and adjacent neighbours, and pseudo-random ones (a fixed seed: the same run every time).
fn scattered(size: u64) -> Vec<(u64, u64)> {
    let mut ranges = vec![(0, size.min(100)), (size - size.min(100), size.min(100))];
    ranges.push((size / 2, 1));
    ranges.push((size - 1, 1));
    let a = size / 3;
    let len = (size / 10).clamp(1, 65_536);
    ranges.push((a, len.min(size - a)));
    let b = a + len / 2;
    ranges.push((b.min(size - 1), len.min(size - b.min(size - 1))));
    let c = (a + len).min(size - 1);
    ranges.push((c, 10.min(size - c)));
    let mut seed: u64 = 0x9E37_79B9_7F4A_7C15;
    while ranges.len() < 24 {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        let offset = seed % size;
        let length = (seed >> 32) % 50_000 + 1;
        ranges.push((offset, length.min(size - offset)));
    }
    ranges
}

fn ranges(ctx: &ObjectCtx<'_>, state: &mut ObjectState) -> Result<String, String> {
    let bytes = state.verified()?;
    let size = bytes.len() as u64;
    ensure!(size > 0, "an empty object has no range to read");
    let object = ctx.locate()?;
    let ranges = scattered(size);
    // No gap filled (`max_gap(0)`): the scattered reads are not all served from one request
    // of their hull.
    let batch = ctx.client.submit_with(
        ranges
            .iter()
            .enumerate()
            .map(|(i, &(o, l))| Read::new(&object, o, l).tag(i as u64)),
        &BatchOptions::new().max_gap(0),
    );
    let done = batch.wait();
    for c in &done {
        let (o, l) = ranges[c.tag() as usize];
        ensure!(
            c.is_ok(),
            "read {o}+{l} failed: {}",
            c.error().map(|e| e.to_string()).unwrap_or_default()
        );
        ensure!(
            c.bytes() == &bytes[o as usize..(o + l) as usize],
            "read {o}+{l} delivered {} bytes that differ from the verified ones",
            c.bytes_received()
        );
    }
    Ok(format!(
        "{} reads exact in {} transfers",
        ranges.len(),
        batch.stats().transfers
    ))
}

fn read_ends(ctx: &ObjectCtx<'_>, state: &mut ObjectState) -> Result<String, String> {
    let bytes = state.verified()?;
    let size = bytes.len() as u64;
    let object = ctx.locate()?;
    let (head, tail) = (1000.min(size), 2000.min(size));
    let ends = ctx
        .client
        .read_ends(&object, head, tail)
        .map_err(|e| e.to_string())?;
    ensure!(ends.size == size, "read_ends says {} bytes", ends.size);
    ensure!(
        ends.head == bytes[..head as usize],
        "the head differs from the verified bytes"
    );
    ensure!(
        ends.tail == bytes[(size - tail) as usize..],
        "the tail differs from the verified bytes"
    );
    Ok(format!("head {head} and tail {tail} exact"))
}

fn past_end(ctx: &ObjectCtx<'_>, state: &mut ObjectState) -> Result<String, String> {
    let bytes = state.verified()?;
    let size = bytes.len() as u64;
    let object = ctx.locate()?;
    let k = size.min(100);
    let done = ctx
        .client
        .submit_with(
            [
                Read::new(&object, size - k, 2 * k + 10),
                Read::new(&object, size + 10, 10),
            ],
            &BatchOptions::new().max_gap(0),
        )
        .wait();
    let prefix = &done[0];
    ensure!(
        prefix.status() == Status::RangeNotSatisfiable && prefix.bytes_received() == k,
        "a read reaching past the end: {} with {} bytes (expected RangeNotSatisfiable with \
         {k})",
        prefix.status(),
        prefix.bytes_received()
    );
    ensure!(
        prefix.bytes() == &bytes[(size - k) as usize..],
        "the valid prefix differs from the verified bytes"
    );
    let beyond = &done[1];
    ensure!(
        beyond.status() == Status::RangeNotSatisfiable && beyond.bytes_received() == 0,
        "a read past the end: {} with {} bytes",
        beyond.status(),
        beyond.bytes_received()
    );
    Ok(format!(
        "valid prefix of {k} bytes exact, then a range error"
    ))
}

fn not_found(ctx: &ObjectCtx<'_>, _: &mut ObjectState) -> Result<String, String> {
    let object = ctx.locate()?;
    let missing = format!("{}.karu-missing", object.canonical().as_str());
    let object = ctx
        .client
        .locate(&missing)
        .map_err(|e| format!("cannot locate {missing}: {e}"))?;
    let done = ctx.client.submit([Read::new(&object, 0, 10)]).wait();
    ensure!(
        done[0].status() == Status::NotFound,
        "{missing} got {}: {}",
        done[0].status(),
        done[0].error().map(|e| e.to_string()).unwrap_or_default()
    );
    Ok(format!("{missing}: NotFound"))
}

fn restricted(target: &dyn ReadOnlyTarget, address: &str) -> Result<String, String> {
    let client = target
        .anonymous_builder()
        .build()
        .map_err(|e| format!("cannot build a client: {e}"))?;
    let object = client
        .locate(address)
        .map_err(|e| format!("cannot locate {address}: {e}"))?;
    let done = client.submit([Read::new(&object, 0, 10)]).wait();
    let message = done[0].error().map(|e| e.to_string()).unwrap_or_default();
    ensure!(
        done[0].status() == Status::PermissionDenied,
        "read without a token: {} ({message})",
        done[0].status()
    );
    Ok(format!("PermissionDenied: {message}"))
}

/// The Hugging Face Hub (or a mirror, or the testkit's mock) at `endpoint`, read with an
/// optional token: what `cargo xtask conformance --provider hf --endpoint URL` runs. The
/// reference of a file is its resolve endpoint's answer, asked by a plain client that follows
/// no redirect off the Hub: an LFS file's `X-Linked-Size` and `X-Linked-Etag` (its SHA-256);
/// a file stored in git (no `X-Linked-Etag`) answers with its bytes, which are then the
/// reference (a plain `GET`, no hash).
pub struct HfEndpointTarget {
    endpoint: String,
    token: Option<String>,
}

impl HfEndpointTarget {
    /// The Hub at `endpoint` (`https://huggingface.co`), with `token` if given.
    ///
    /// # Errors
    /// An endpoint that is not an `http(s)` URL with a host.
    pub fn new(endpoint: &str, token: Option<String>) -> Result<Self, String> {
        Ok(HfEndpointTarget {
            endpoint: checked_endpoint(endpoint)?,
            token,
        })
    }

    fn request(&self, url: &str, token: bool) -> Result<http::Request<Full<Bytes>>, String> {
        let mut request = http::Request::builder().method("GET").uri(url);
        if let (true, Some(t)) = (token, &self.token) {
            request = request.header("authorization", format!("Bearer {t}"));
        }
        request
            .body(Full::new(Bytes::new()))
            .map_err(|e| e.to_string())
    }
}

impl fmt::Debug for HfEndpointTarget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HfEndpointTarget")
            .field("endpoint", &self.endpoint)
            .field("token", &self.token.as_ref().map(|_| "…"))
            .finish()
    }
}

fn checked_endpoint(endpoint: &str) -> Result<String, String> {
    let url = url::Url::parse(endpoint).map_err(|e| format!("--endpoint {endpoint}: {e}"))?;
    if !matches!(url.scheme(), "http" | "https") || url.host_str().is_none() {
        return Err(format!(
            "--endpoint {endpoint}: not an http(s) URL with a host"
        ));
    }
    Ok(endpoint.trim_end_matches('/').to_string())
}

/// `(repository, revision, path)` of Karu's canonical `hf://[kind/]org/repo@REVISION/path`
/// (the revision percent-encoded, the path literal).
fn split_hf(canonical: &str) -> Result<(String, String, String), String> {
    let bad = || format!("not a canonical hf:// address: {canonical}");
    let rest = canonical.strip_prefix("hf://").ok_or_else(bad)?;
    let (repo, rest) = rest.split_once('@').ok_or_else(bad)?;
    let (revision, path) = rest.split_once('/').ok_or_else(bad)?;
    let revision = percent_encoding::percent_decode_str(revision)
        .decode_utf8()
        .map_err(|_| bad())?
        .into_owned();
    Ok((repo.to_string(), revision, path.to_string()))
}

/// The `"…"`-quoted 64-digit SHA-256 of an `X-Linked-Etag`.
fn linked_sha256(headers: &http::HeaderMap) -> Option<[u8; 32]> {
    let value = headers.get("x-linked-etag")?.to_str().ok()?;
    let hexed = value.trim_start_matches("W/").trim_matches('"');
    let bytes = hex::decode(hexed).ok()?;
    bytes.try_into().ok()
}

fn header_text(headers: &http::HeaderMap, name: &str) -> String {
    headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string()
}

impl ReadOnlyTarget for HfEndpointTarget {
    fn name(&self) -> String {
        "hf-endpoint".into()
    }

    fn builder(&self) -> ClientBuilder {
        let builder = self.anonymous_builder();
        match &self.token {
            Some(token) => builder.set("hf.token", token.clone()),
            None => builder,
        }
    }

    fn anonymous_builder(&self) -> ClientBuilder {
        isolated_builder().set("hf.endpoint", self.endpoint.clone())
    }

    fn reference(&self, canonical: &str) -> Result<Reference, String> {
        let (repo, revision, path) = split_hf(canonical)?;
        let mut url = format!(
            "{}{}",
            self.endpoint,
            crate::hf::resolve_path(&repo, &revision, &path)
        );
        let hub = url::Url::parse(&self.endpoint).map_err(|e| e.to_string())?;
        for _ in 0..MAX_HUB_HOPS {
            let (status, headers, body) = upload::fetch(self.request(&url, true)?)?;
            if let Some(digest) = linked_sha256(&headers) {
                let size = header_text(&headers, "x-linked-size")
                    .parse::<u64>()
                    .map_err(|_| {
                        format!("{url}: X-Linked-Etag without a usable X-Linked-Size ({status})")
                    })?;
                return Ok(Reference::Sha256 { size, digest });
            }
            match status {
                200 => {
                    return Ok(Reference::Bytes {
                        bytes: body,
                        how: "from a plain GET of the resolve URL (no X-Linked-Etag: a file \
                              stored in git, checked against these bytes, not a hash)"
                            .into(),
                    });
                }
                301 | 302 | 303 | 307 | 308 => {
                    let location = header_text(&headers, "location");
                    let next = url::Url::parse(&url)
                        .and_then(|u| u.join(&location))
                        .map_err(|e| format!("{url}: a {status} to {location:?}: {e}"))?;
                    if next.origin() == hub.origin() {
                        url = next.to_string();
                        continue;
                    }
                    // Off the Hub without a stated hash: the bytes from there, no token.
                    let (status, _, body) = upload::fetch(self.request(next.as_str(), false)?)?;
                    ensure!(
                        status == 200,
                        "{url}: the redirect's target answered {status} to a plain GET"
                    );
                    return Ok(Reference::Bytes {
                        bytes: body,
                        how: "from a plain GET of the resolve URL's redirect (no \
                              X-Linked-Etag: checked against these bytes, not a hash)"
                            .into(),
                    });
                }
                _ => {
                    return Err(format!(
                        "{url} answered {status} {} {}",
                        header_text(&headers, "x-error-code"),
                        header_text(&headers, "x-error-message")
                    ));
                }
            }
        }
        Err(format!(
            "{url}: more than {MAX_HUB_HOPS} redirects on the Hub"
        ))
    }
}

/// Source Cooperative's data proxy (or the testkit's mock) at `endpoint`, read anonymously or
/// with an API key (SigV4): what `cargo xtask conformance --provider source --endpoint URL`
/// runs. The reference of a file is one whole-object `GET` by a plain client (signed by the
/// testkit's own SigV4 signer when keys are given).
pub struct SourceEndpointTarget {
    endpoint: String,
    region: String,
    keys: Option<(String, String)>,
}

impl SourceEndpointTarget {
    /// The data proxy at `endpoint` (`https://data.source.coop`), signing for `region` with
    /// `keys` (access key id, secret) if given.
    ///
    /// # Errors
    /// An endpoint that is not an `http(s)` URL with a host.
    pub fn new(
        endpoint: &str,
        region: &str,
        keys: Option<(String, String)>,
    ) -> Result<Self, String> {
        Ok(SourceEndpointTarget {
            endpoint: checked_endpoint(endpoint)?,
            region: region.to_string(),
            keys,
        })
    }
}

impl fmt::Debug for SourceEndpointTarget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SourceEndpointTarget")
            .field("endpoint", &self.endpoint)
            .field("region", &self.region)
            .field("access_key_id", &self.keys.as_ref().map(|(k, _)| k))
            .finish_non_exhaustive()
    }
}

impl ReadOnlyTarget for SourceEndpointTarget {
    fn name(&self) -> String {
        "source-endpoint".into()
    }

    fn builder(&self) -> ClientBuilder {
        let builder = self.anonymous_builder();
        match &self.keys {
            Some((key, secret)) => builder
                .set("source.access_key_id", key.clone())
                .set("source.secret_access_key", secret.clone()),
            None => builder,
        }
    }

    fn anonymous_builder(&self) -> ClientBuilder {
        isolated_builder()
            .set("source.endpoint", self.endpoint.clone())
            .set("source.region", self.region.clone())
    }

    fn reference(&self, canonical: &str) -> Result<Reference, String> {
        let bad = || format!("not a canonical source:// address: {canonical}");
        let rest = canonical.strip_prefix("source://").ok_or_else(bad)?;
        let (account, key) = rest.split_once('/').ok_or_else(bad)?;
        let url = format!("{}{}", self.endpoint, object_path(account, key));
        let request = match &self.keys {
            Some((key, secret)) => upload::signed(
                "GET",
                &url,
                &[],
                &upload::Signer {
                    access_key_id: key,
                    secret_access_key: secret,
                    region: &self.region,
                },
            )?,
            None => http::Request::builder()
                .method("GET")
                .uri(&url)
                .body(Full::new(Bytes::new()))
                .map_err(|e| e.to_string())?,
        };
        let (status, headers, body) = upload::fetch(request)?;
        ensure!(
            status == 200,
            "{url} answered {status} to a plain GET {}",
            header_text(&headers, "x-amz-error-code")
        );
        Ok(Reference::Bytes {
            bytes: body,
            how: "from one whole-object GET by a plain client".into(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn canonical_hf_addresses_split_into_repository_revision_and_path() {
        assert_eq!(
            split_hf("hf://datasets/o/d@refs%2Fpr%2F1/a/b c.csv").unwrap(),
            (
                "datasets/o/d".into(),
                "refs/pr/1".into(),
                "a/b c.csv".into()
            )
        );
        assert!(split_hf("source://a/b/c").is_err());
    }

    #[test]
    fn scattered_ranges_stay_inside_the_object() {
        for size in [1u64, 2, 7, 100, 101, 4096, 300_000, 10_000_000] {
            let ranges = scattered(size);
            assert_eq!(ranges.len(), 24);
            for (o, l) in ranges {
                assert!(l >= 1 && o + l <= size, "{o}+{l} in {size}");
            }
        }
    }
}
