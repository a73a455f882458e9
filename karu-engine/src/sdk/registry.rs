//! The registry: which backend serves an address (by scheme, or by the longest matching URL
//! prefix), and the credential families and configuration sections of a client's providers.

use std::fmt;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;

use karu_config::Section;

use crate::sdk::backend::Backend;
use crate::sdk::locator::Locator;
use crate::sdk::status::{Error, Status};

/// Collects the providers of a client: each one's backend, the addresses it serves, its
/// credential family and its configuration section. [`build`](RegistryBuilder::build) freezes
/// it into a [`Registry`].
///
/// A provider crate exports one `register` function that declares itself here; a client
/// builder calls it (`karu::ClientBuilder::provider(my_provider::register)`):
///
/// ```
/// use std::sync::Arc;
/// use karu_engine::sdk::{RegistryBuilder, Section, SectionConfig, SectionKeys};
/// # use karu_engine::sdk::{Backend, CanonicalPath, Error, Resolved};
/// # #[derive(Debug)]
/// # struct ToyBackend;
/// # impl Backend for ToyBackend {
/// #     fn name(&self) -> &str { "toy" }
/// #     fn resolve(&self, a: &str) -> Result<Resolved, Error> {
/// #         Ok(Resolved::remote(CanonicalPath::new(a), None, a.into()))
/// #     }
/// # }
///
/// #[derive(Default, serde::Deserialize, SectionKeys)]
/// #[serde(default, deny_unknown_fields)]
/// struct ToyConfig {
///     #[karu(secret)]
///     token: Option<String>,
/// }
///
/// impl SectionConfig for ToyConfig {}
///
/// pub fn register(registry: &mut RegistryBuilder) {
///     registry
///         .provider(Arc::new(ToyBackend))
///         .scheme("toy")
///         .prefix("https://*.toy.example/")
///         .credential_family("toy")
///         .config_section(Section::of::<ToyConfig>("toy"));
/// }
///
/// let mut registry = RegistryBuilder::new();
/// register(&mut registry);
/// let registry = registry.build()?;
/// assert_eq!(registry.resolve("toy://host/key")?.backend().name(), "toy");
/// assert_eq!(registry.resolve("https://a.toy.example/k")?.backend().name(), "toy");
/// assert_eq!(registry.credential_families(), ["toy"]);
/// assert_eq!(registry.config_sections()[0].name(), "toy");
/// # Ok::<(), karu_engine::Error>(())
/// ```
#[derive(Clone, Default)]
pub struct RegistryBuilder {
    routes: Vec<Route>,
    families: Vec<String>,
    /// Configuration sections, each name once (a later declaration replaces an earlier one).
    sections: Vec<Section>,
    /// Declarations that could not be accepted; [`RegistryBuilder::build`] reports them.
    problems: Vec<String>,
}

/// A pattern and the backend serving addresses that match it.
#[derive(Clone)]
struct Route {
    /// A lower-case scheme (`"s3"`) or a normalised address prefix containing `"://"`.
    pattern: String,
    backend: Arc<dyn Backend>,
}

impl RegistryBuilder {
    /// No provider yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Declare a provider served by `backend`; name the addresses it serves, its credential
    /// family and its configuration section on the returned [`Registration`].
    pub fn provider(&mut self, backend: Arc<dyn Backend>) -> Registration<'_> {
        Registration {
            registry: self,
            backend,
        }
    }

    /// The registry: immutable from now on. A declaration that was not valid (a scheme that
    /// is not one, a prefix without a host, an empty family or section name) is an
    /// [`Status::InvalidArgument`] error naming it.
    pub fn build(&self) -> Result<Registry, Error> {
        if !self.problems.is_empty() {
            return Err(Error::new(
                Status::InvalidArgument,
                format!(
                    "invalid provider registration: {}",
                    self.problems.join("; ")
                ),
            ));
        }
        let mut families = self.families.clone();
        families.sort();
        families.dedup();
        let mut sections = self.sections.clone();
        sections.sort_by(|a, b| a.name().cmp(b.name()));
        Ok(Registry {
            routes: self.routes.clone(),
            families,
            sections,
        })
    }

    fn route(&mut self, pattern: String, backend: &Arc<dyn Backend>) {
        // A later registration of a pattern replaces the earlier one.
        self.routes.retain(|r| r.pattern != pattern);
        self.routes.push(Route {
            pattern,
            backend: Arc::clone(backend),
        });
    }
}

impl fmt::Debug for RegistryBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RegistryBuilder")
            .field("patterns", &patterns(&self.routes))
            .field("credential_families", &self.families)
            .field("config_sections", &section_names(&self.sections))
            .field("problems", &self.problems)
            .finish()
    }
}

/// One provider being declared to a [`RegistryBuilder`]: each call adds to the registry at
/// once, so the calls may come in any order and any number.
#[must_use = "a provider serves no address until a scheme or prefix is declared"]
pub struct Registration<'a> {
    registry: &'a mut RegistryBuilder,
    backend: Arc<dyn Backend>,
}

impl Registration<'_> {
    /// Serve addresses with this scheme (`"s3"` for `s3://bucket/key`; `"file"` also serves
    /// plain paths). Schemes compare case-insensitively.
    pub fn scheme(&mut self, scheme: &str) -> &mut Self {
        match scheme_of(&format!("{scheme}:")) {
            Some(lower) if lower.len() == scheme.len() => {
                self.registry.route(lower, &self.backend);
            }
            _ => self.problem(format!("{scheme:?} is not a URI scheme")),
        }
        self
    }

    /// Serve addresses that start with `prefix`, a URL prefix with a host
    /// (`"https://huggingface.co/"`). The host may start with `*.` to match any subdomain
    /// (`"https://*.amazonaws.com/"` matches `https://b.s3.amazonaws.com/k`). Scheme and host
    /// compare case-insensitively. A prefix wins over a scheme, and the longest matching
    /// prefix wins.
    pub fn prefix(&mut self, prefix: &str) -> &mut Self {
        match normalise_prefix(prefix) {
            Some(pattern) => self.registry.route(pattern, &self.backend),
            None => self.problem(format!(
                "{prefix:?} is not an address prefix (scheme://host/...)"
            )),
        }
        self
    }

    /// The credential family of this provider (`"aws"`): the family of the
    /// [`CredentialScope`](crate::sdk::CredentialScope)s its backend returns, and the
    /// name an application's credential callback is registered under.
    pub fn credential_family(&mut self, family: &str) -> &mut Self {
        if is_name(family) {
            self.registry.families.push(family.to_string());
        } else {
            self.problem(format!("{family:?} is not a credential family name"));
        }
        self
    }

    /// The configuration section this provider reads (`[s3]` and `[paths."…".s3]` for
    /// `Section::of::<S3Config>("s3")`), through
    /// [`PrepareContext::section`](crate::sdk::PrepareContext::section) or
    /// [`section`](crate::sdk::section). A client checks it when it is built (every
    /// layer, every path rule: unknown keys, wrong types, what its
    /// [`SectionConfig::check`](karu_config::SectionConfig::check) refuses), and never quotes
    /// its secret keys. A later declaration of the same name replaces an earlier one.
    pub fn config_section(&mut self, section: Section) -> &mut Self {
        let name = section.name();
        if is_name(name) && !name.contains('.') {
            let sections = &mut self.registry.sections;
            sections.retain(|known| known.name() != name);
            sections.push(section);
        } else {
            self.problem(format!("{name:?} is not a configuration section name"));
        }
        self
    }

    fn problem(&mut self, what: String) {
        let problem = format!("{} provider: {what}", self.backend.name());
        self.registry.problems.push(problem);
    }
}

impl fmt::Debug for Registration<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Registration")
            .field("backend", &self.backend.name())
            .finish_non_exhaustive()
    }
}

/// A non-empty name of letters, digits, `-`, `_` and `.`.
fn is_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
}

/// Maps addresses to the backends of a client's providers, and knows their credential
/// families and configuration sections. Made by [`RegistryBuilder::build`] and immutable: the
/// backends of a client never change underneath it.
///
/// Addresses without a scheme are plain local paths and use the `file` scheme.
///
/// ```
/// # use std::sync::Arc;
/// use karu_engine::sdk::RegistryBuilder;
/// let mut builder = RegistryBuilder::new();
/// builder
///     .provider(Arc::new(karu_engine::sdk::testing::FileBackend))
///     .scheme("file");
/// let registry = builder.build()?;
/// let locator = registry.resolve("/tmp/example.bin")?;
/// assert_eq!(locator.backend().name(), "local");
/// assert!(registry.resolve("gs://bucket/key").is_err());
/// # Ok::<(), karu_engine::Error>(())
/// ```
pub struct Registry {
    routes: Vec<Route>,
    families: Vec<String>,
    sections: Vec<Section>,
}

impl Registry {
    /// A builder ([`RegistryBuilder::new`]).
    pub fn builder() -> RegistryBuilder {
        RegistryBuilder::new()
    }

    /// The patterns registered (schemes and prefixes), sorted.
    pub fn patterns(&self) -> Vec<String> {
        patterns(&self.routes)
    }

    /// The credential families the providers declared, sorted.
    pub fn credential_families(&self) -> Vec<&str> {
        self.families.iter().map(String::as_str).collect()
    }

    /// The configuration sections the providers declared, sorted by name: what a client
    /// declares to its configuration builder, so they are checked when it is built.
    pub fn config_sections(&self) -> &[Section] {
        &self.sections
    }

    /// The backend for an address: the longest registered prefix it starts with, else its
    /// scheme's backend (plain paths use `file`).
    pub fn backend_for(&self, address: &str) -> Result<Arc<dyn Backend>, Error> {
        let scheme = scheme_of(address);
        // Prefixes are matched against the URL as a URL parser reads it (the form the
        // backends resolve, and canonical paths spell): `https:/h`, `https://h:443` and
        // `HTTPS:\\h` are all `https://h/`, so no spelling reaches another backend than the
        // canonical path does.
        let normalised = scheme
            .as_ref()
            .and_then(|_| url::Url::parse(address).ok())
            .filter(url::Url::has_host)
            .map(String::from);
        let matched = normalised.as_deref().unwrap_or(address);
        let scheme = scheme.unwrap_or_else(|| "file".to_string());
        let by_prefix = self
            .routes
            .iter()
            .filter(|r| r.pattern.contains("://") && prefix_matches(matched, &r.pattern))
            .max_by_key(|r| r.pattern.len());
        if let Some(route) = by_prefix {
            return Ok(Arc::clone(&route.backend));
        }
        self.routes
            .iter()
            .find(|r| r.pattern == scheme)
            .map(|r| Arc::clone(&r.backend))
            .ok_or_else(|| {
                Error::new(
                    Status::Unsupported,
                    format!(
                        "no backend is registered for scheme \"{scheme}\" (registered: {})",
                        self.patterns().join(", ")
                    ),
                )
            })
    }

    /// Resolve an address to a [`Locator`]. Never touches the network or credentials.
    ///
    /// A backend that panics resolving fails this address alone with `Internal`; the panic
    /// does not reach the caller.
    pub fn resolve(&self, address: &str) -> Result<Locator, Error> {
        self.refuse_padded_url(address)?;
        let backend = self.backend_for(address)?;
        let resolved =
            catch_unwind(AssertUnwindSafe(|| backend.resolve(address))).unwrap_or_else(|_| {
                Err(Error::internal(format!(
                    "the {} backend panicked resolving this address",
                    backend.name()
                )))
            })?;
        Ok(Locator::new(backend, resolved))
    }

    /// A URL of a registered scheme written after whitespace (` https://u:p@h/x`, pasted) is
    /// not a URL but, to the operating system, a relative path: reading it as a file would
    /// fail with a message that repeats its user information. It is refused instead, naming
    /// the cause; a local path that really starts with whitespace is written `./ name`.
    fn refuse_padded_url(&self, address: &str) -> Result<(), Error> {
        let trimmed = address.trim_start();
        let padded_url = trimmed.len() < address.len()
            && scheme_of(address).is_none()
            && trimmed.contains("://")
            && scheme_of(trimmed)
                .is_some_and(|scheme| self.routes.iter().any(|r| r.pattern == scheme));
        if !padded_url {
            return Ok(());
        }
        Err(Error::new(
            Status::InvalidArgument,
            format!(
                "the address \"{}\" starts with whitespace before its scheme: remove it (a local \
                 path that starts with whitespace is written ./ in front)",
                crate::sdk::redact::address(trimmed)
            ),
        ))
    }
}

impl fmt::Debug for Registry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Registry")
            .field("patterns", &self.patterns())
            .field("credential_families", &self.families)
            .field("config_sections", &section_names(&self.sections))
            .finish()
    }
}

fn section_names(sections: &[Section]) -> Vec<&str> {
    sections.iter().map(Section::name).collect()
}

/// The patterns of `routes`, sorted.
fn patterns(routes: &[Route]) -> Vec<String> {
    let mut patterns: Vec<String> = routes.iter().map(|r| r.pattern.clone()).collect();
    patterns.sort();
    patterns
}

/// The scheme of an address (RFC 3986: a letter, then letters, digits, `+`, `-`, `.`, then
/// `:`), lower-cased; `None` for a plain path.
pub fn scheme_of(address: &str) -> Option<String> {
    let colon = address.find(':')?;
    let scheme = &address[..colon];
    let mut chars = scheme.chars();
    let first = chars.next()?;
    if !first.is_ascii_alphabetic()
        || !chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
    {
        return None;
    }
    Some(scheme.to_ascii_lowercase())
}

/// A prefix with its scheme and host lower-cased, so matching is case-insensitive there;
/// `None` unless it is `scheme://host…` with a valid scheme and a non-empty host.
fn normalise_prefix(prefix: &str) -> Option<String> {
    let i = prefix.find("://")?;
    let scheme = scheme_of(&prefix[..=i])?;
    let rest = &prefix[i + 3..];
    let host_end = rest.find('/').unwrap_or(rest.len());
    let host = &rest[..host_end];
    let bare = host.strip_prefix("*.").unwrap_or(host);
    if bare.is_empty() || bare.contains(['*', '?', '#', '@']) || rest.contains(['?', '#']) {
        return None;
    }
    Some(format!(
        "{scheme}://{}{}",
        host.to_ascii_lowercase(),
        &rest[host_end..]
    ))
}

/// Whether `address` starts with the normalised prefix pattern (scheme and host compared
/// case-insensitively; a host of `*.suffix` matches any subdomain of `suffix`).
fn prefix_matches(address: &str, pattern: &str) -> bool {
    let (Some(p), Some(a)) = (pattern.find("://"), address.find("://")) else {
        return false;
    };
    if !pattern[..p].eq_ignore_ascii_case(&address[..a]) {
        return false;
    }
    let (p_rest, a_rest) = (&pattern[p + 3..], &address[a + 3..]);
    let p_host_end = p_rest.find('/').unwrap_or(p_rest.len());
    let a_host_end = a_rest.find(['/', '?', '#']).unwrap_or(a_rest.len());
    let (p_host, a_host) = (&p_rest[..p_host_end], &a_rest[..a_host_end]);
    let host_ok = match p_host.strip_prefix("*.") {
        Some(suffix) => {
            let a_host = a_host.to_ascii_lowercase();
            a_host.len() > suffix.len() + 1
                && a_host.ends_with(suffix)
                && a_host.as_bytes()[a_host.len() - suffix.len() - 1] == b'.'
        }
        None => p_host.eq_ignore_ascii_case(a_host),
    };
    host_ok && a_rest[a_host_end..].starts_with(&p_rest[p_host_end..])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sdk::locator::Resolved;
    use crate::sdk::testing::FileBackend;

    #[derive(Debug)]
    struct Named(&'static str);
    impl Backend for Named {
        fn name(&self) -> &str {
            self.0
        }
        fn resolve(&self, address: &str) -> Result<Resolved, Error> {
            Ok(Resolved::remote(
                crate::CanonicalPath::new(address),
                None,
                address.to_string(),
            ))
        }
    }

    #[test]
    fn schemes() {
        assert_eq!(scheme_of("s3://b/k").as_deref(), Some("s3"));
        assert_eq!(scheme_of("HTTPS://x").as_deref(), Some("https"));
        assert_eq!(scheme_of("/abs/path").as_deref(), None);
        assert_eq!(scheme_of("rel/pa:th").as_deref(), None);
        assert_eq!(scheme_of("1x:y").as_deref(), None);
        assert_eq!(scheme_of(":y").as_deref(), None);
    }

    fn named(name: &'static str) -> Arc<dyn Backend> {
        Arc::new(Named(name))
    }

    #[test]
    fn longest_prefix_wins_over_scheme() {
        let mut b = RegistryBuilder::new();
        b.provider(named("http")).scheme("https").scheme("http");
        b.provider(named("hf")).prefix("https://huggingface.co/");
        b.provider(named("hf-datasets"))
            .prefix("https://huggingface.co/datasets/");
        b.provider(Arc::new(FileBackend)).scheme("file");
        b.provider(named("s3")).prefix("https://*.amazonaws.com/");
        let r = b.build().unwrap();
        let name = |a: &str| r.backend_for(a).unwrap().name().to_string();
        assert_eq!(name("https://example.com/x"), "http");
        assert_eq!(name("https://b.s3.us-east-1.amazonaws.com/k"), "s3");
        assert_eq!(name("https://B.S3.AMAZONAWS.COM/k"), "s3");
        assert_eq!(name("https://amazonaws.com/k"), "http");
        assert_eq!(name("https://evilamazonaws.com/k"), "http");
        assert_eq!(name("http://b.s3.amazonaws.com/k"), "http");
        assert_eq!(name("https://HuggingFace.co/m/resolve/main/x"), "hf");
        assert_eq!(name("https://huggingface.co/datasets/d/x"), "hf-datasets");
        assert_eq!(name("/tmp/x"), "local");
        // Found by the `resolve` fuzz target: spellings a URL parser reads as the same URL
        // reached the plain HTTP backend, whose canonical path then resolved through S3.
        for spelling in [
            "https:/b.s3.amazonaws.com/k",
            "https://b.s3.amazonaws.com:443/k",
            "HTTPS:\\\\b.s3.amazonaws.com\\k",
            "https://b.s3.amazonaws%2Ecom/k",
        ] {
            assert_eq!(name(spelling), "s3", "{spelling}");
        }
        assert_eq!(name("https://b.s3.amazonaws.com:8443/k"), "http");
        assert_eq!(name(" https://b.s3.amazonaws.com/k"), "local", "not a URL");
        // ... and resolving it is refused without repeating its user information.
        let err = r
            .resolve(" \thttps://u:secret@b.s3.amazonaws.com/k")
            .unwrap_err();
        assert_eq!(err.status(), Status::InvalidArgument);
        assert!(!err.message().contains("secret"), "{err}");
        // A path of no registered scheme, or one without "://", is still a local path.
        assert_eq!(r.resolve(" ./x").unwrap().backend().name(), "local");
        assert_eq!(r.resolve(" gs://b/k").unwrap().backend().name(), "local");
        assert_eq!(r.resolve(" http:x").unwrap().backend().name(), "local");
        let err = r.backend_for("gs://b/k").unwrap_err();
        assert_eq!(err.status(), Status::Unsupported);
    }

    #[test]
    fn re_registration_replaces() {
        let mut b = RegistryBuilder::new();
        b.provider(named("one")).scheme("s3");
        b.provider(named("two")).scheme("S3");
        let r = b.build().unwrap();
        assert_eq!(r.patterns(), vec!["s3".to_string()]);
        assert_eq!(r.backend_for("s3://b/k").unwrap().name(), "two");
    }

    #[derive(Debug, Default, serde::Deserialize)]
    struct Empty {}
    impl karu_config::SectionConfig for Empty {}
    impl karu_config::SectionKeys for Empty {}

    #[derive(Debug, Default, serde::Deserialize)]
    #[allow(dead_code)]
    struct Other {
        key: Option<String>,
    }
    impl karu_config::SectionConfig for Other {}
    impl karu_config::SectionKeys for Other {}

    fn section(name: &str) -> Section {
        Section::of::<Empty>(name)
    }

    #[test]
    fn families_and_sections_are_declared_once_each() {
        let mut b = RegistryBuilder::new();
        b.provider(named("s3"))
            .scheme("s3")
            .credential_family("aws")
            .config_section(section("s3"));
        b.provider(named("s3-again"))
            .scheme("s3a")
            .credential_family("aws")
            .config_section(Section::of::<Other>("s3"));
        b.provider(named("toy"))
            .credential_family("toy")
            .config_section(section("a_toy"));
        let r = b.build().unwrap();
        assert_eq!(r.credential_families(), ["aws", "toy"]);
        assert_eq!(section_names(r.config_sections()), ["a_toy", "s3"]);
        // The later declaration of a name is the one kept (its type's fields).
        let debug = format!("{:?}", r.config_sections()[1]);
        assert!(debug.contains("\"key\""), "{debug}");
    }

    #[test]
    fn invalid_declarations_fail_the_build_naming_each() {
        for (declare, named_in_error) in [
            (
                (|r: &mut Registration<'_>| {
                    r.scheme("s 3");
                }) as fn(&mut Registration<'_>),
                "\"s 3\" is not a URI scheme",
            ),
            (
                |r| {
                    r.scheme("s3:x");
                },
                "\"s3:x\" is not a URI scheme",
            ),
            (
                |r| {
                    r.scheme("");
                },
                "\"\" is not a URI scheme",
            ),
            (
                |r| {
                    r.prefix("huggingface.co/");
                },
                "is not an address prefix",
            ),
            (
                |r| {
                    r.prefix("https:///x");
                },
                "is not an address prefix",
            ),
            (
                |r| {
                    r.prefix("https://*./x");
                },
                "is not an address prefix",
            ),
            (
                |r| {
                    r.prefix("https://h/x?sig=1");
                },
                "is not an address prefix",
            ),
            (
                |r| {
                    r.credential_family("");
                },
                "is not a credential family name",
            ),
            (
                |r| {
                    r.config_section(section("a.b"));
                },
                "is not a configuration section name",
            ),
        ] {
            let mut b = RegistryBuilder::new();
            declare(&mut b.provider(named("bad")));
            let err = b.build().unwrap_err();
            assert_eq!(err.status(), Status::InvalidArgument);
            assert!(err.message().contains("bad provider"), "{err}");
            assert!(err.message().contains(named_in_error), "{err}");
        }
    }

    #[test]
    fn prefixes_are_normalised() {
        assert_eq!(
            normalise_prefix("HTTPS://*.AmazonAWS.com/Path/").as_deref(),
            Some("https://*.amazonaws.com/Path/")
        );
        assert_eq!(normalise_prefix("https://h").as_deref(), Some("https://h"));
        assert_eq!(normalise_prefix("1x://h/"), None);
    }

    #[test]
    fn a_built_registry_does_not_change_with_its_builder() {
        let mut b = RegistryBuilder::new();
        b.provider(named("one")).scheme("s3");
        let first = b.build().unwrap();
        b.provider(named("two")).scheme("s3").scheme("gs");
        assert_eq!(first.backend_for("s3://b/k").unwrap().name(), "one");
        assert!(first.backend_for("gs://b/k").is_err());
        assert_eq!(
            b.build().unwrap().backend_for("s3://b/k").unwrap().name(),
            "two"
        );
    }
}
