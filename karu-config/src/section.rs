//! Provider sections declared to the builder, so that every layer's and every path rule's
//! `[s3]`, `[http_provider]`, … is checked when the snapshot is built.

use std::fmt;
use std::sync::Arc;

use figment::Figment;
use serde::de::{self, DeserializeOwned, Deserializer, Visitor};

/// A provider's options type, checked when a client is built.
///
/// A provider implements it for the serde type of its section (with `#[serde(default,
/// deny_unknown_fields)]`, so unknown keys are reported with a did-you-mean) and declares the
/// section with [`Section::of`]. Deserialization checks the type of every key; [`check`]
/// adds what serde cannot see (a URL that does not parse, two keys that must be set together).
///
/// [`check`]: SectionConfig::check
///
/// ```
/// use karu_config::{ConfigBuilder, InvalidKey, Section, SectionConfig, SectionKeys};
/// use serde::Deserialize;
///
/// #[derive(Debug, Default, Deserialize)]
/// #[serde(default, deny_unknown_fields)]
/// struct Store {
///     endpoint: Option<String>,
///     token: Option<String>,
/// }
///
/// // A provider derives this (`#[derive(karu_engine::sdk::SectionKeys)]`, with `Debug`).
/// impl SectionKeys for Store {
///     const SECRET: &'static [&'static str] = &["token"];
/// }
///
/// impl SectionConfig for Store {
///     fn check(&self) -> Result<(), InvalidKey> {
///         match &self.endpoint {
///             Some(url) if !url.starts_with("https://") => {
///                 Err(InvalidKey::new("endpoint", "an https URL"))
///             }
///             _ => Ok(()),
///         }
///     }
/// }
///
/// let error = ConfigBuilder::new()
///     .user_file(None)
///     .project_file(None)
///     .environment([("KARU_STORE__ENDPOINT", "ftp://x")])
///     .section(Section::of::<Store>("store"))
///     .build()
///     .unwrap_err();
/// assert_eq!(
///     error.to_string(),
///     "invalid configuration: environment variable KARU_STORE__ENDPOINT: key \
///      \"store.endpoint\": expected an https URL, found string \"ftp://x\""
/// );
/// ```
pub trait SectionConfig: DeserializeOwned + SectionKeys + Send + Sync + 'static {
    /// Checks beyond the types of the keys. The default accepts every value that deserializes.
    fn check(&self) -> Result<(), InvalidKey> {
        Ok(())
    }

    /// The section's keys as its documentation lists them: name, aliases, the environment
    /// variables the provider reads for a key no layer sets, and meaning. `karu config --keys`
    /// prints them, and [`Snapshot::explain`](crate::Snapshot::explain) shows a value taken
    /// from one of the variables with the variable as its origin. A provider whose type
    /// documents its keys in the usual table returns [`Key::table`]`(include_str!("config.rs"))`,
    /// so the documentation stays the one list. The default: none documented.
    fn keys() -> Vec<Key> {
        Vec::new()
    }

    /// Values the provider finds outside Karu's configuration for keys that no layer and none
    /// of their documented variables set (the region of an AWS profile), with where it found
    /// them: [`Snapshot::explain`](crate::Snapshot::explain) shows them, so `karu config`
    /// names every value in effect. `self` is the section as the layers set it for the path
    /// explained; `env` reads the captured environment. It reads files, never the network.
    /// The default: none.
    fn discovered(&self, env: &dyn Fn(&str) -> Option<String>) -> Vec<Discovered> {
        let _ = env;
        Vec::new()
    }
}

/// A value a provider found outside Karu's configuration for one of its keys
/// ([`SectionConfig::discovered`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Discovered {
    /// The key inside the section (`region`).
    pub key: &'static str,
    /// The value, as TOML would write it.
    pub value: String,
    /// Where it was found, in words (`profile "dev" of the AWS config files`).
    pub source: String,
}

/// What a section's keys are, declared with its type: a provider derives it together with the
/// type's `Debug` (`#[derive(karu_engine::sdk::SectionKeys)]`, with `#[karu(secret)]` and
/// `#[karu(credential)]` on fields), so the secrets `Debug` hides and the secrets listed here are
/// one declaration. Both lists hold every name a key is read under (aliases too).
pub trait SectionKeys {
    /// Keys whose values are secrets: never quoted in an error, shown as `<redacted>` by
    /// [`Snapshot::explain`](crate::Snapshot::explain). A key names a value or a whole table
    /// (`"headers"` hides every header).
    const SECRET: &'static [&'static str] = &[];

    /// Keys that choose a credential: a provider keys its credential scopes on where they were
    /// set (`karu_engine::sdk::credential_scope`).
    const CREDENTIAL: &'static [&'static str] = &[];
}

/// One documented key of a provider section (see [`SectionConfig::keys`]).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Key {
    /// The key, within the section: `region`.
    pub name: &'static str,
    /// Other names it is read under: `aws_region`.
    pub aliases: Vec<&'static str>,
    /// The environment variables the provider reads for it when no layer sets it, first
    /// first: `AWS_REGION`, `AWS_DEFAULT_REGION`.
    pub environment: Vec<&'static str>,
    /// The environment column as written (it may say more: "`HF_TOKEN`, the token file").
    pub environment_text: &'static str,
    /// What it means, as documented.
    pub meaning: &'static str,
}

impl Key {
    /// The keys of the Markdown table that documents a section type, in `source` (the type's
    /// source file): rows of `| key | aliases | environment | meaning |` in `///` comments,
    /// each name in backticks. Environment variables are the backticked upper-case names of
    /// the third column.
    ///
    /// ```
    /// use karu_config::Key;
    /// let source = "/// | key | aliases | environment | meaning |\n\
    ///               /// | --- | --- | --- | --- |\n\
    ///               /// | `region` | `aws_region` | `AWS_REGION`, `AWS_DEFAULT_REGION` | region to sign for |\n\
    ///               /// | `anonymous` | | `AWS_SKIP_SIGNATURE` (`true`) | unsigned requests |\n";
    /// let keys = Key::table(source);
    /// assert_eq!(keys.len(), 2);
    /// assert_eq!((keys[0].name, keys[0].aliases.as_slice()), ("region", &["aws_region"][..]));
    /// assert_eq!(keys[0].environment, ["AWS_REGION", "AWS_DEFAULT_REGION"]);
    /// assert_eq!(keys[1].environment, ["AWS_SKIP_SIGNATURE"]);
    /// assert_eq!(keys[1].meaning, "unsigned requests");
    /// ```
    pub fn table(source: &'static str) -> Vec<Key> {
        let mut keys = Vec::new();
        let mut in_table = false;
        for line in source.lines() {
            let Some(row) = line.trim_start().strip_prefix("///") else {
                in_table = false;
                continue;
            };
            let row = row.trim();
            let cells: Vec<&'static str> =
                match row.strip_prefix('|').and_then(|r| r.strip_suffix('|')) {
                    Some(inner) => inner.split('|').map(str::trim).collect(),
                    None => {
                        in_table = false;
                        continue;
                    }
                };
            if cells.len() != 4 {
                in_table = false;
                continue;
            }
            if cells[0] == "key" && cells[1] == "aliases" {
                in_table = true;
                continue;
            }
            if !in_table || cells[0].starts_with("---") {
                continue;
            }
            let Some(name) = backticked(cells[0]).next() else {
                continue;
            };
            keys.push(Key {
                name,
                aliases: backticked(cells[1]).collect(),
                environment: backticked(cells[2])
                    .filter(|v| {
                        v.chars().next().is_some_and(|c| c.is_ascii_uppercase())
                            && v.chars()
                                .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
                    })
                    .collect(),
                environment_text: cells[2],
                meaning: cells[3],
            });
        }
        keys
    }
}

/// The `backticked` words of a table cell.
fn backticked(cell: &'static str) -> impl Iterator<Item = &'static str> {
    cell.split('`').skip(1).step_by(2)
}

/// A key of a section whose value [`SectionConfig::check`] refuses, and what it expects.
///
/// The configuration layer adds where the value came from (file and line, environment variable
/// or option), the full key and the value found (unless the key is secret; a value that may
/// hold a secret is quoted as the check [shows it](InvalidKey::shown_as)).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InvalidKey {
    key: String,
    expected: String,
    shown: Option<String>,
}

impl InvalidKey {
    /// The key within the section (`"endpoint"`, `"headers.x-api-key"`) and what it expects,
    /// worded to follow "expected": `"an http or https URL such as http://127.0.0.1:9000"`.
    pub fn new(key: impl Into<String>, expected: impl Into<String>) -> Self {
        Self {
            key: key.into(),
            expected: expected.into(),
            shown: None,
        }
    }

    /// The text the message quotes as the value found, instead of the value set: a URL with
    /// its user information and query redacted.
    #[must_use]
    pub fn shown_as(mut self, text: impl Into<String>) -> Self {
        self.shown = Some(text.into());
        self
    }

    /// The text quoted as the value found, if the check gave one.
    pub fn shown(&self) -> Option<&str> {
        self.shown.as_deref()
    }

    /// The key within the section.
    pub fn key(&self) -> &str {
        &self.key
    }

    /// What the key expects.
    pub fn expected(&self) -> &str {
        &self.expected
    }

    /// Two keys that are set together (a key id and its secret): `Ok` when both or neither
    /// are set, else the missing one, worded with what it is.
    ///
    /// ```
    /// use karu_config::InvalidKey;
    /// let id = ("access_key_id", "an access key id");
    /// let secret = ("secret_access_key", "a secret key");
    /// assert!(InvalidKey::unless_together((id, true), (secret, true)).is_ok());
    /// assert!(InvalidKey::unless_together((id, false), (secret, false)).is_ok());
    /// let missing = InvalidKey::unless_together((id, true), (secret, false)).unwrap_err();
    /// assert_eq!(missing.key(), "secret_access_key");
    /// assert_eq!(
    ///     missing.expected(),
    ///     "a secret key too, since access_key_id is set (they are set together)"
    /// );
    /// ```
    pub fn unless_together(
        (first, first_set): ((&str, &str), bool),
        (second, second_set): ((&str, &str), bool),
    ) -> Result<(), InvalidKey> {
        let missing = |(key, what): (&str, &str), (set, _): (&str, &str)| {
            InvalidKey::new(
                key,
                format!("{what} too, since {set} is set (they are set together)"),
            )
        };
        match (first_set, second_set) {
            (true, false) => Err(missing(second, first)),
            (false, true) => Err(missing(first, second)),
            _ => Ok(()),
        }
    }
}

/// Why a declared section did not validate.
pub(crate) enum Failure {
    /// Deserialization failed (an unknown key, a wrong type).
    Figment(Box<figment::Error>),
    /// [`SectionConfig::check`] refused a value.
    Invalid(InvalidKey),
}

/// The checker of one section: extracts it from a figment and checks it.
type Validate = dyn Fn(&Figment, &str) -> Result<(), Failure> + Send + Sync;
/// What [`Section::discovered`] runs: the section's type extracted, then asked.
type Discover =
    dyn Fn(&Figment, &str, &dyn Fn(&str) -> Option<String>) -> Vec<Discovered> + Send + Sync;

/// A provider's configuration section, declared to
/// [`ConfigBuilder::section`](crate::ConfigBuilder::section) so that it is known (an unknown
/// table such as `[nonsense]` is an error) and checked when the snapshot is built, globally and
/// under every path rule.
///
/// Each provider declares its own section when a client is built (for Karu's providers,
/// `karu::Client::builder()` does it); the configuration layer knows no provider.
#[derive(Clone)]
pub struct Section {
    name: String,
    fields: Vec<&'static str>,
    secrets: &'static [&'static str],
    keys: fn() -> Vec<Key>,
    validate: Arc<Validate>,
    discover: Arc<Discover>,
}

impl Section {
    /// The section `name` (`"s3"`), holding a `T`.
    ///
    /// `name` must be a single key other than a setting or `paths`;
    /// [`ConfigBuilder::build`](crate::ConfigBuilder::build) refuses another.
    pub fn of<T: SectionConfig>(name: &str) -> Self {
        Section {
            name: name.to_owned(),
            fields: fields_of::<T>(),
            secrets: T::SECRET,
            keys: T::keys,
            validate: Arc::new(|figment: &Figment, name: &str| {
                let value: T = figment
                    .focus(name)
                    .extract_lossy()
                    .map_err(|error| Failure::Figment(Box::new(error)))?;
                value.check().map_err(Failure::Invalid)
            }),
            discover: Arc::new(
                |figment: &Figment, name: &str, env: &dyn Fn(&str) -> Option<String>| {
                    figment
                        .focus(name)
                        .extract_lossy::<T>()
                        .map(|value| value.discovered(env))
                        .unwrap_or_default()
                },
            ),
        }
    }

    /// The section's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Why the name cannot be a section's, if it cannot.
    pub(crate) fn name_problem(&self) -> Option<String> {
        let name = &self.name;
        let bad = name.is_empty()
            || name.contains('.')
            || name == crate::layers::PATHS
            || crate::layers::SCHEMA.contains_key(name);
        bad.then(|| {
            format!("a provider section is one key other than a setting or \"paths\", not {name:?}")
        })
    }

    /// The names serde reads the section's type under (its fields), sorted: what its
    /// documented [`keys`](Section::keys) must cover, and what suggestions come from.
    pub fn fields(&self) -> &[&'static str] {
        &self.fields
    }

    /// The keys its type documents ([`SectionConfig::keys`]).
    pub fn keys(&self) -> Vec<Key> {
        (self.keys)()
    }

    /// Whether the key at `path` (inside the section) holds a secret: it, or a table above
    /// it, is one of the secret keys.
    pub(crate) fn is_secret(&self, path: &[&str]) -> bool {
        path.iter()
            .any(|segment| self.secrets.iter().any(|secret| secret == segment))
    }

    /// What the provider finds outside the configuration for the section as `figment` sets it
    /// ([`SectionConfig::discovered`]).
    pub(crate) fn discovered(
        &self,
        figment: &Figment,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Vec<Discovered> {
        (self.discover)(figment, &self.name, env)
    }

    /// Extracts and checks the section from a merged figment.
    pub(crate) fn validate(&self, figment: &Figment) -> Result<(), Failure> {
        (self.validate)(figment, &self.name)
    }
}

impl fmt::Debug for Section {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Section")
            .field("name", &self.name)
            .field("fields", &self.fields)
            .field("secrets", &self.secrets)
            .finish_non_exhaustive()
    }
}

/// The field names of a struct deserialized by serde's derive, or none for another shape.
fn fields_of<T: DeserializeOwned>() -> Vec<&'static str> {
    let mut fields = Vec::new();
    let _ = T::deserialize(FieldNames(&mut fields));
    fields.sort_unstable();
    fields
}

/// A deserializer that only records the field names a struct asks for, then stops.
struct FieldNames<'a>(&'a mut Vec<&'static str>);

/// The error [`FieldNames`] stops with.
#[derive(Debug)]
struct Stop;

impl fmt::Display for Stop {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("field names recorded")
    }
}

impl std::error::Error for Stop {}

impl de::Error for Stop {
    fn custom<T: fmt::Display>(_: T) -> Self {
        Stop
    }
}

impl<'de> Deserializer<'de> for FieldNames<'_> {
    type Error = Stop;

    fn deserialize_any<V: Visitor<'de>>(self, _: V) -> Result<V::Value, Stop> {
        Err(Stop)
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _: &'static str,
        fields: &'static [&'static str],
        _: V,
    ) -> Result<V::Value, Stop> {
        self.0.extend_from_slice(fields);
        Err(Stop)
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf
        option unit unit_struct newtype_struct seq tuple tuple_struct map enum identifier
        ignored_any
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;

    #[derive(Debug, Default, Deserialize)]
    #[serde(default, deny_unknown_fields)]
    #[allow(dead_code)]
    struct Example {
        region: Option<String>,
        #[serde(alias = "url")]
        endpoint: Option<String>,
        token: Option<String>,
    }

    impl SectionConfig for Example {}

    impl SectionKeys for Example {
        const SECRET: &'static [&'static str] = &["token", "headers"];
    }

    #[test]
    fn a_section_knows_its_fields_and_secrets() {
        let section = Section::of::<Example>("example");
        assert_eq!(section.name(), "example");
        assert!(section.fields().contains(&"region"));
        assert!(section.fields().contains(&"endpoint"));
        assert!(section.is_secret(&["token"]));
        assert!(section.is_secret(&["headers", "x-api-key"]));
        assert!(!section.is_secret(&["region"]));
        let debug = format!("{section:?}");
        assert!(debug.contains("example"), "{debug}");
    }

    #[test]
    fn a_section_may_not_be_named_after_a_setting() {
        assert_eq!(Section::of::<Example>("example").name_problem(), None);
        for name in ["planner", "io_threads", "paths", "", "a.b"] {
            let problem = Section::of::<Example>(name).name_problem();
            assert!(problem.is_some_and(|p| p.contains("one key")), "{name:?}");
        }
    }
}
