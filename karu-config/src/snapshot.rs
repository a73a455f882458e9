//! The immutable, resolved configuration of one client, and where each value came from.

use std::any::{Any, TypeId};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;

use figment::error::Actual;
use figment::value::{Dict, Map, Value};
use figment::{Figment, Metadata, Profile, Provider, Source};
use parking_lot::Mutex;
use rustc_hash::FxHashMap;
use serde::de::DeserializeOwned;

use crate::error::{ConfigError, Problem, actual_text, describe};
use crate::explain::{Explained, Explanation, REDACTED, render};
use crate::layers::{self, Layer, PATHS};
use crate::lines::KeyLines;
use crate::section::{Failure, InvalidKey, Section};
use crate::settings::Settings;

/// Most distinct sets of matching path rules whose resolution is kept. Every canonical path
/// that matches the same rules shares one entry, so in practice the cache holds one entry per
/// configured rule and never fills.
const CACHE_CAPACITY: usize = 4096;

/// Typed values cached under one set of matching rules and one type, by name (a section, or a
/// section and keys): usually one. Looked up on every request, so the name is compared, not
/// hashed or copied, and the map hashes with FxHash.
type Named = Vec<(Box<str>, Arc<dyn Any + Send + Sync>)>;

/// The key of [`Named`] values: the matching rules and the type.
type TypedKey = (Box<[usize]>, TypeId);

/// Where a value came from.
///
/// Two canonical paths have the same credential scope when their sections' origins are equal
/// (see [`Snapshot::section`]), so an origin identifies its layer precisely: the file by its
/// absolute path, and a path rule by its prefix and the layer that wrote it.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum Origin {
    /// The built-in defaults of [`Settings`].
    Default,
    /// A TOML file (user file, project file, a file added with
    /// [`ConfigBuilder::file`](crate::ConfigBuilder::file), or the one named by `KARU_CONFIG`),
    /// by its absolute path.
    File(PathBuf),
    /// A TOML document given as text ([`ConfigBuilder::toml`](crate::ConfigBuilder::toml)),
    /// by the name it was given.
    Text(String),
    /// The `KARU_*` environment captured when the snapshot was built.
    Environment,
    /// A variable of the captured environment that a provider reads itself for a key no
    /// layer sets (`AWS_REGION` for `s3.region`), as its section documents
    /// ([`SectionConfig::keys`](crate::SectionConfig::keys)); shown by
    /// [`Snapshot::explain`], never a layer.
    ProviderEnvironment(String),
    /// A value a provider found outside the configuration for a key that no layer and none of
    /// its variables set (an AWS profile's `region`), by where it was found
    /// ([`SectionConfig::discovered`](crate::SectionConfig::discovered)); shown by
    /// [`Snapshot::explain`], never a layer.
    Discovered(String),
    /// An option set on the builder with [`ConfigBuilder::set`](crate::ConfigBuilder::set).
    Explicit,
    /// A path rule: `[paths."prefix"]` in a file, or
    /// [`ConfigBuilder::path_set`](crate::ConfigBuilder::path_set) (`source` is then
    /// [`Origin::Explicit`]).
    PathRule {
        /// The canonical path prefix the rule applies to.
        prefix: String,
        /// The layer that wrote the rule.
        source: Box<Origin>,
    },
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Default => f.write_str("built-in defaults"),
            Self::File(path) => path.display().fmt(f),
            Self::Text(name) => f.write_str(name),
            Self::Environment => f.write_str("environment"),
            Self::ProviderEnvironment(name) => write!(f, "environment variable {name}"),
            Self::Discovered(place) => f.write_str(place),
            Self::Explicit => f.write_str("explicit option"),
            Self::PathRule { prefix, source } => write!(f, "path rule {prefix:?} in {source}"),
        }
    }
}

/// A provider section resolved for one canonical path, with the origins of its values.
///
/// `origins` lists, sorted and without duplicates, every layer that supplied a value the
/// section ended up with; it is empty when no layer sets any key of the section (the value is
/// then the provider type's own defaults).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Scoped<T> {
    /// The section, deserialized.
    pub value: T,
    /// Where its values came from.
    pub origins: Vec<Origin>,
}

/// The resolved configuration of one client: immutable, cheap to clone, `Send + Sync`.
///
/// A snapshot is made by [`ConfigBuilder::build`](crate::ConfigBuilder::build) (or
/// [`Snapshot::defaults`]). Everything it needs (files, environment) is read then; it never
/// reads a file or an environment variable again, and changing the builder afterwards does
/// not change it. Clones share the same data.
///
/// [`global`](Self::global) holds the client-wide settings; [`for_path`](Self::for_path) and
/// [`section`](Self::section) apply the path rules that match one canonical path.
#[derive(Clone)]
pub struct Snapshot {
    inner: Arc<Inner>,
}

/// What a [`Snapshot`] shares between its clones.
struct Inner {
    /// Every layer's global part and every path rule, each with its origin.
    contributions: Vec<Contribution>,
    /// Path rules, shortest prefix first, so the rules matching one path are applied in order.
    rules: Vec<Rule>,
    /// The resolution without any path rule.
    global: Arc<Resolved>,
    /// Resolutions by the set of matching rules (indices into `rules`, in order).
    cache: Mutex<FxHashMap<Box<[usize]>, Arc<Resolved>>>,
    /// Typed sections by the set of matching rules and type, then by name.
    typed: Mutex<FxHashMap<TypedKey, Named>>,
    /// The provider sections declared to the builder, checked under every rule.
    declared: Vec<Section>,
    /// The environment captured at build time.
    env: BTreeMap<String, String>,
}

/// One layer's global part, or one layer's rule for one prefix.
struct Contribution {
    origin: Origin,
    /// How errors name the layer.
    source_name: String,
    /// Written before keys in errors: empty, or `paths.'prefix'.` for a rule.
    key_prefix: String,
    /// The lines of the keys of the file, for a file's contribution.
    lines: Option<Arc<KeyLines>>,
    /// Where the contribution's keys sit in its file: nothing, or `paths` and the prefix as
    /// written for a rule.
    toml_path: Vec<String>,
    /// Keys of [`Settings`].
    settings: Dict,
    /// Provider sections.
    sections: Dict,
}

impl Contribution {
    /// The line in this contribution's file of the key at `path` (relative to the
    /// contribution), if it came from a file.
    fn line(&self, path: &[&str]) -> Option<usize> {
        let lines = self.lines.as_ref()?;
        let full: Vec<&str> = self
            .toml_path
            .iter()
            .map(String::as_str)
            .chain(path.iter().copied())
            .collect();
        lines.line(&full)
    }
}

/// All contributions that write a rule for one prefix, lowest layer first.
struct Rule {
    prefix: String,
    contributions: Vec<usize>,
}

/// The configuration for one set of matching rules.
struct Resolved {
    settings: Arc<Settings>,
    /// Defaults and every settings key of the layers and rules, for `for_path` and for
    /// sections named after a settings table.
    settings_figment: Figment,
    /// Every provider section of the layers and rules.
    sections_figment: Figment,
}

/// Which half of a [`Contribution`] a figment provider serves.
#[derive(Clone, Copy)]
enum Part {
    Settings,
    Sections,
}

/// Serves one half of a contribution to figment. The metadata's source carries the
/// contribution's index, which is how errors and origins are traced back to their layer.
struct Provide<'a> {
    index: usize,
    contribution: &'a Contribution,
    part: Part,
}

impl Provider for Provide<'_> {
    fn metadata(&self) -> Metadata {
        Metadata::named(self.contribution.source_name.clone())
            .source(Source::Custom(self.index.to_string()))
    }

    fn data(&self) -> figment::Result<Map<Profile, Dict>> {
        let dict = match self.part {
            Part::Settings => &self.contribution.settings,
            Part::Sections => &self.contribution.sections,
        };
        Ok(Map::from([(Profile::Default, dict.clone())]))
    }
}

/// Whether the rule for `prefix` applies to `canonical`: on whole segments only, so
/// `s3://bucket/pre` matches `s3://bucket/pre` and `s3://bucket/pre/x` but not
/// `s3://bucket/prefix`; a prefix ending in `/` matches everything below it.
fn rule_matches(prefix: &str, canonical: &str) -> bool {
    match canonical.strip_prefix(prefix) {
        None => false,
        Some(rest) => rest.is_empty() || rest.starts_with('/') || prefix.ends_with('/'),
    }
}

impl Snapshot {
    /// A snapshot of the built-in defaults alone: no files, no environment, no options.
    ///
    /// ```
    /// use karu_config::{Settings, Snapshot};
    ///
    /// let snapshot = Snapshot::defaults();
    /// assert_eq!(snapshot.global(), &Settings::default());
    /// assert_eq!(snapshot.env("HOME"), None);
    /// ```
    pub fn defaults() -> Snapshot {
        Self::assemble(vec![layers::defaults_layer()], BTreeMap::new(), Vec::new())
            .expect("the built-in defaults are valid")
    }

    /// Builds a snapshot from its layers, lowest first, resolving and checking the global
    /// settings, the declared sections and every path rule now so that configuration errors
    /// surface at build time.
    pub(crate) fn assemble(
        layers: Vec<Layer>,
        env: BTreeMap<String, String>,
        declared: Vec<Section>,
    ) -> Result<Snapshot, ConfigError> {
        let mut contributions = Vec::new();
        let mut global = Vec::new();
        let mut rules: BTreeMap<String, Vec<usize>> = BTreeMap::new();
        for layer in layers {
            let document = layer.document;
            global.push(contributions.len());
            contributions.push(Contribution {
                origin: layer.origin.clone(),
                source_name: layer.source_name.clone(),
                key_prefix: String::new(),
                lines: layer.lines.clone(),
                toml_path: Vec::new(),
                settings: document.settings,
                sections: document.sections,
            });
            for rule in document.rules {
                rules
                    .entry(rule.canonical.clone())
                    .or_default()
                    .push(contributions.len());
                contributions.push(Contribution {
                    origin: Origin::PathRule {
                        prefix: rule.canonical,
                        source: Box::new(layer.origin.clone()),
                    },
                    source_name: layer.source_name.clone(),
                    key_prefix: layers::rule_key(&rule.written, ""),
                    lines: layer.lines.clone(),
                    toml_path: vec![PATHS.to_owned(), rule.written],
                    settings: rule.document.settings,
                    sections: rule.document.sections,
                });
            }
        }
        let mut rules: Vec<Rule> = rules
            .into_iter()
            .map(|(prefix, contributions)| Rule {
                prefix,
                contributions,
            })
            .collect();
        rules.sort_by_key(|rule| rule.prefix.len());

        let figment_of = |part| {
            global.iter().fold(Figment::new(), |figment, &index| {
                figment.merge(Provide {
                    index,
                    contribution: &contributions[index],
                    part,
                })
            })
        };
        let settings_figment = figment_of(Part::Settings);
        let sections_figment = figment_of(Part::Sections);
        let global = resolve(
            &contributions,
            &declared,
            settings_figment,
            sections_figment,
        )?;

        let inner = Inner {
            contributions,
            rules,
            global: Arc::new(global),
            cache: Mutex::new(FxHashMap::default()),
            typed: Mutex::new(FxHashMap::default()),
            declared,
            env,
        };
        for rule in &inner.rules {
            inner.resolve(&inner.matching(&rule.prefix))?;
        }
        Ok(Snapshot {
            inner: Arc::new(inner),
        })
    }

    /// The client-wide settings: defaults, then files, environment and explicit options, with
    /// no path rule applied.
    pub fn global(&self) -> &Settings {
        &self.inner.global.settings
    }

    /// The settings for one canonical path.
    ///
    /// For each key, the value comes from the longest matching path rule that sets it, then
    /// shorter matching rules, then the global value (files, environment and explicit options
    /// layered as on [`ConfigBuilder`](crate::ConfigBuilder)), then the built-in default. A rule
    /// matches on whole path segments (see the crate documentation).
    ///
    /// Results are cached: every path that matches the same rules shares one `Arc`, and a
    /// path that matches none gets the global settings. Every rule is checked when the snapshot
    /// is built, so an error here is not expected in practice.
    ///
    /// ```
    /// use std::time::Duration;
    /// use karu_config::{ConfigBuilder, Seconds};
    ///
    /// let snapshot = ConfigBuilder::new()
    ///     .user_file(None)
    ///     .project_file(None)
    ///     .environment([("KARU_RETRY__DEADLINE", "30s")])
    ///     .path_set("s3://bucket/logs", "retry.deadline", "5s")
    ///     .build()?;
    ///
    /// let logs = snapshot.for_path("s3://bucket/logs/2024/01.json")?;
    /// assert_eq!(logs.retry.deadline, Seconds(Duration::from_secs(5)));
    ///
    /// // Whole segments only: "logs-old" is not below "logs".
    /// let other = snapshot.for_path("s3://bucket/logs-old/x")?;
    /// assert_eq!(other.retry.deadline, Seconds(Duration::from_secs(30)));
    /// # Ok::<(), karu_config::ConfigError>(())
    /// ```
    pub fn for_path(&self, canonical: &str) -> Result<Arc<Settings>, ConfigError> {
        let rules = self.inner.matching(canonical);
        Ok(self.inner.resolve(&rules)?.settings.clone())
    }

    /// A provider's own section (such as `s3`, `gcs`, `azure`), resolved for one canonical path
    /// the same way as [`for_path`](Self::for_path) and deserialized into the provider's serde
    /// type, with the origins that supplied its values.
    ///
    /// A provider [declares](crate::ConfigBuilder::section) its section so that the builder
    /// checks it; keys come from the top-level table (`[s3] region = "x"`), from
    /// `KARU_<SECTION>__<KEY>` environment variables, from explicit options
    /// (`set("s3.region", "x")`) and from path rules (`[paths."s3://bucket".s3] region = "y"`,
    /// `path_set("s3://bucket", "s3.region", "y")`). A section nobody sets deserializes from an
    /// empty table, so the provider type should use `#[serde(default)]`. Numbers and booleans
    /// may be written as strings (environment variables always are).
    ///
    /// Two paths may share a credential when their `origins` are equal: same layers, same rules.
    ///
    /// The names of settings tables (`planner`, `http`, `retry`) resolve to those tables,
    /// defaults included; they accept only settings keys, so a provider keeps its own options in
    /// a table of its own (such as `http_provider`).
    ///
    /// ```
    /// use karu_config::{ConfigBuilder, Origin, Section, SectionConfig, SectionKeys};
    /// use serde::Deserialize;
    ///
    /// #[derive(Debug, Default, Deserialize, PartialEq)]
    /// #[serde(default)]
    /// struct S3Config {
    ///     region: Option<String>,
    ///     endpoint: Option<String>,
    /// }
    ///
    /// impl SectionConfig for S3Config {}
    /// impl SectionKeys for S3Config {}
    ///
    /// let snapshot = ConfigBuilder::new()
    ///     .user_file(None)
    ///     .project_file(None)
    ///     .section(Section::of::<S3Config>("s3"))
    ///     .environment([("KARU_S3__ENDPOINT", "http://127.0.0.1:9000")])
    ///     .set("s3.region", "us-east-1")
    ///     .path_set("s3://eu-bucket", "s3.region", "eu-west-1")
    ///     .build()?;
    ///
    /// let eu = snapshot.section::<S3Config>("s3://eu-bucket/key", "s3")?;
    /// assert_eq!(eu.value.region.as_deref(), Some("eu-west-1"));
    /// assert_eq!(eu.value.endpoint.as_deref(), Some("http://127.0.0.1:9000"));
    /// assert_eq!(
    ///     eu.origins,
    ///     [
    ///         Origin::Environment,
    ///         Origin::PathRule { prefix: "s3://eu-bucket".into(), source: Box::new(Origin::Explicit) },
    ///     ]
    /// );
    ///
    /// // Another bucket has another scope.
    /// let us = snapshot.section::<S3Config>("s3://us-bucket/key", "s3")?;
    /// assert_eq!(us.value.region.as_deref(), Some("us-east-1"));
    /// assert_ne!(us.origins, eu.origins);
    /// # Ok::<(), karu_config::ConfigError>(())
    /// ```
    pub fn section<T: DeserializeOwned>(
        &self,
        canonical: &str,
        section: &str,
    ) -> Result<Scoped<T>, ConfigError> {
        check_section_name(section)?;
        let resolved = self.inner.resolve(&self.inner.matching(canonical))?;
        let figment = if layers::is_settings_table(section) {
            &resolved.settings_figment
        } else {
            &resolved.sections_figment
        };
        let value = figment
            .focus(section)
            .extract_lossy::<T>()
            .map_err(|error| {
                let declared = self.inner.declared.iter().find(|d| d.name() == section);
                figment_error(&self.inner.contributions, error, section, declared)
            })?;
        let mut origins = BTreeSet::new();
        if let Ok(table) = figment.find_value(section) {
            collect_origins(&table, figment, &self.inner.contributions, &mut origins);
        }
        Ok(Scoped {
            value,
            origins: origins.into_iter().collect(),
        })
    }

    /// The origins that supplied any of `keys` of a provider section for a path, sorted and
    /// without duplicates (empty when none is set). Providers key their credential scope on
    /// this: two paths share a credential only when the credential options came from the same
    /// places, whatever other options of the section differ.
    pub fn key_origins(
        &self,
        canonical: &str,
        section: &str,
        keys: &[&str],
    ) -> Result<Arc<Vec<Origin>>, ConfigError> {
        check_section_name(section)?;
        // Cached like sections: providers ask on every transfer.
        let name = format!("{section}\0{}", keys.join("\0"));
        self.cached(canonical, &name, || {
            let resolved = self.inner.resolve(&self.inner.matching(canonical))?;
            let figment = &resolved.sections_figment;
            let mut origins = BTreeSet::new();
            if let Ok(Value::Dict(_, table)) = figment.find_value(section) {
                for key in keys {
                    if let Some(value) = table.get(*key) {
                        collect_origins(value, figment, &self.inner.contributions, &mut origins);
                    }
                }
            }
            Ok(origins.into_iter().collect::<Vec<Origin>>())
        })
    }

    /// Like [`Snapshot::section`], but cached: every canonical path matching the same path
    /// rules shares one deserialized value. Providers call this on every request, so the
    /// cost is one lookup once the section has been read.
    pub fn section_shared<T>(
        &self,
        canonical: &str,
        section: &str,
    ) -> Result<Arc<Scoped<T>>, ConfigError>
    where
        T: DeserializeOwned + Send + Sync + 'static,
    {
        self.cached(canonical, section, || self.section::<T>(canonical, section))
    }

    /// A value computed once per set of matching rules, name and type.
    fn cached<V: Send + Sync + 'static>(
        &self,
        canonical: &str,
        name: &str,
        compute: impl FnOnce() -> Result<V, ConfigError>,
    ) -> Result<Arc<V>, ConfigError> {
        let key: TypedKey = (self.inner.matching(canonical).into(), TypeId::of::<V>());
        let found = self.inner.typed.lock().get(&key).and_then(|named| {
            let (_, value) = named.iter().find(|(n, _)| **n == *name)?;
            Arc::clone(value).downcast::<V>().ok()
        });
        if let Some(typed) = found {
            return Ok(typed);
        }
        let value = Arc::new(compute()?);
        let mut typed = self.inner.typed.lock();
        if typed.len() >= CACHE_CAPACITY
            && !typed.contains_key(&key)
            && let Some(evicted) = typed.keys().next().cloned()
        {
            typed.remove(&evicted);
        }
        let named = typed.entry(key).or_default();
        named.retain(|(n, _)| **n != *name);
        named.push((
            name.into(),
            Arc::clone(&value) as Arc<dyn Any + Send + Sync>,
        ));
        Ok(value)
    }

    /// The effective configuration for one canonical path: every setting, then every key set
    /// in a declared provider section, each with the layer and path rule that supplied it, and
    /// the path rules that apply. Secret values (the keys a section names in
    /// [`SectionKeys::SECRET`](crate::SectionKeys::SECRET)) read `<redacted>`.
    ///
    /// ```
    /// use karu_config::{ConfigBuilder, Origin};
    ///
    /// let snapshot = ConfigBuilder::new()
    ///     .user_file(None)
    ///     .project_file(None)
    ///     .environment([("KARU_RETRY__DEADLINE", "30s")])
    ///     .path_set("s3://bucket/logs", "retry.deadline", "5s")
    ///     .build()?;
    ///
    /// let explanation = snapshot.explain("s3://bucket/logs/2024.json")?;
    /// assert_eq!(explanation.rules, ["s3://bucket/logs"]);
    /// let deadline = explanation.values.iter().find(|v| v.key == "retry.deadline").unwrap();
    /// assert_eq!(deadline.value, "\"5s\"");
    /// assert_eq!(deadline.place(), "path rule \"s3://bucket/logs\" in explicit option");
    ///
    /// let other = snapshot.explain("s3://bucket/other")?;
    /// let deadline = other.values.iter().find(|v| v.key == "retry.deadline").unwrap();
    /// assert_eq!((deadline.value.as_str(), deadline.origin.clone()), ("\"30s\"", Origin::Environment));
    /// assert_eq!(deadline.place(), "environment variable KARU_RETRY__DEADLINE");
    /// # Ok::<(), karu_config::ConfigError>(())
    /// ```
    pub fn explain(&self, canonical: &str) -> Result<Explanation, ConfigError> {
        let inner = &self.inner;
        let matching = inner.matching(canonical);
        let resolved = inner.resolve(&matching)?;
        let rules = matching
            .iter()
            .map(|&rule| inner.rules[rule].prefix.clone())
            .collect();
        let typed = Value::serialize(&*resolved.settings).map_err(|error| {
            ConfigError::new(Problem::InvalidValue(format!(
                "the settings cannot be shown: {error}"
            )))
        })?;
        let mut values = Vec::new();
        for key in layers::SCHEMA.keys() {
            let Ok(found) = resolved.settings_figment.find_value(key) else {
                continue;
            };
            let mut path = vec![key.clone()];
            inner.explain_leaves(
                &found,
                &mut path,
                &resolved.settings_figment,
                &mut |path, _| {
                    let segments: Vec<&str> = path.iter().map(String::as_str).collect();
                    lookup(&typed, &segments).map(render)
                },
                &mut values,
            );
        }
        let first_section = values.len();
        for section in &inner.declared {
            let Ok(found) = resolved.sections_figment.find_value(section.name()) else {
                continue;
            };
            let mut path = vec![section.name().to_owned()];
            inner.explain_leaves(
                &found,
                &mut path,
                &resolved.sections_figment,
                &mut |path, value| {
                    let inside: Vec<&str> = path[1..].iter().map(String::as_str).collect();
                    Some(if section.is_secret(&inside) {
                        REDACTED.to_owned()
                    } else {
                        render(value)
                    })
                },
                &mut values,
            );
        }
        let from_environment = inner.provider_environment(&values[first_section..]);
        values.extend(from_environment);
        let discovered = inner.discovered(&resolved.sections_figment, &values[first_section..]);
        values.extend(discovered);
        values[first_section..].sort_by(|a, b| a.key.cmp(&b.key));
        Ok(Explanation {
            canonical: canonical.to_owned(),
            rules,
            values,
        })
    }

    /// The names of the layers this snapshot was built from, lowest first: `built-in
    /// defaults`, each file read, each environment variable, the explicit options.
    pub fn layer_names(&self) -> Vec<&str> {
        let mut names: Vec<&str> = Vec::new();
        for contribution in &self.inner.contributions {
            if !names.contains(&contribution.source_name.as_str()) {
                names.push(&contribution.source_name);
            }
        }
        names
    }

    /// The value of one environment variable as captured when the snapshot was built, for
    /// providers that honour their own variables (such as `AWS_REGION`). The process
    /// environment is never read again.
    pub fn env(&self, name: &str) -> Option<&str> {
        self.inner.env.get(name).map(String::as_str)
    }

    /// Every environment variable captured when the snapshot was built, sorted by name.
    pub fn env_vars(&self) -> impl Iterator<Item = (&str, &str)> {
        self.inner
            .env
            .iter()
            .map(|(name, value)| (name.as_str(), value.as_str()))
    }
}

impl fmt::Debug for Snapshot {
    /// Shows settings, rule prefixes and sources; never section values or the environment,
    /// which may hold secrets.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let inner = &self.inner;
        let rules: Vec<&str> = inner
            .rules
            .iter()
            .map(|rule| rule.prefix.as_str())
            .collect();
        let sources: BTreeSet<&str> = inner
            .contributions
            .iter()
            .map(|c| c.source_name.as_str())
            .collect();
        f.debug_struct("Snapshot")
            .field("global", self.global())
            .field("rules", &rules)
            .field("sources", &sources)
            .field("env_vars", &inner.env.len())
            .finish_non_exhaustive()
    }
}

impl Inner {
    /// Adds one [`Explained`] per leaf under `value` (found at `path` in `figment`), written
    /// by `show`; a leaf `show` does not know is skipped.
    /// The documented keys of the declared sections that no layer sets (none of `set`) and
    /// that a variable of the captured environment gives a value, as their providers read it.
    fn provider_environment(&self, set: &[Explained]) -> Vec<Explained> {
        let mut found = Vec::new();
        for section in &self.declared {
            let name = section.name();
            let is_set = |key: &str| {
                let dotted = format!("{name}.{key}");
                set.iter().any(|v| {
                    v.key == dotted
                        || v.key
                            .strip_prefix(&dotted)
                            .is_some_and(|rest| rest.starts_with('.'))
                })
            };
            for key in section.keys() {
                if is_set(key.name) || key.aliases.iter().any(|alias| is_set(alias)) {
                    continue;
                }
                let variable = key.environment.iter().find_map(|variable| {
                    self.env
                        .get(*variable)
                        .filter(|value| !value.is_empty())
                        .map(|value| (*variable, value))
                });
                let Some((variable, value)) = variable else {
                    continue;
                };
                found.push(Explained {
                    key: format!("{name}.{}", key.name),
                    value: if section.is_secret(&[key.name]) {
                        REDACTED.to_owned()
                    } else {
                        render(&Value::from(value.clone()))
                    },
                    origin: Origin::ProviderEnvironment(variable.to_owned()),
                    source: format!("environment variable {variable}"),
                    line: None,
                });
            }
        }
        found
    }

    /// What the declared sections' providers find outside the configuration for keys that
    /// nothing in `set` sets ([`SectionConfig::discovered`](crate::SectionConfig::discovered)).
    fn discovered(&self, figment: &Figment, set: &[Explained]) -> Vec<Explained> {
        let env = |name: &str| self.env.get(name).filter(|v| !v.is_empty()).cloned();
        let mut found = Vec::new();
        for section in &self.declared {
            let name = section.name();
            for discovered in section.discovered(figment, &env) {
                let key = format!("{name}.{}", discovered.key);
                if set.iter().any(|v| v.key == key) {
                    continue;
                }
                found.push(Explained {
                    key,
                    value: if section.is_secret(&[discovered.key]) {
                        REDACTED.to_owned()
                    } else {
                        discovered.value
                    },
                    origin: Origin::Discovered(discovered.source.clone()),
                    source: discovered.source,
                    line: None,
                });
            }
        }
        found
    }

    fn explain_leaves(
        &self,
        value: &Value,
        path: &mut Vec<String>,
        figment: &Figment,
        show: &mut dyn FnMut(&[String], &Value) -> Option<String>,
        out: &mut Vec<Explained>,
    ) {
        if let Value::Dict(_, dict) = value
            && !dict.is_empty()
        {
            for (key, inner) in dict {
                path.push(key.clone());
                self.explain_leaves(inner, path, figment, show, out);
                path.pop();
            }
            return;
        }
        let Some(shown) = show(path, value) else {
            return;
        };
        let contribution = contribution_of(&self.contributions, figment.get_metadata(value.tag()));
        let segments: Vec<&str> = path.iter().map(String::as_str).collect();
        let (origin, source, line) = match contribution {
            Some(c) => (c.origin.clone(), c.source_name.clone(), c.line(&segments)),
            None => (Origin::Default, "built-in defaults".to_owned(), None),
        };
        out.push(Explained {
            key: path.join("."),
            value: shown,
            origin,
            source,
            line,
        });
    }

    /// Indices of the rules that match `canonical`, shortest prefix first.
    fn matching(&self, canonical: &str) -> Vec<usize> {
        self.rules
            .iter()
            .enumerate()
            .filter(|(_, rule)| rule_matches(&rule.prefix, canonical))
            .map(|(index, _)| index)
            .collect()
    }

    /// The configuration with the given rules applied over the global one, from the cache
    /// when possible.
    fn resolve(&self, rules: &[usize]) -> Result<Arc<Resolved>, ConfigError> {
        if rules.is_empty() {
            return Ok(self.global.clone());
        }
        if let Some(resolved) = self.cache.lock().get(rules) {
            return Ok(resolved.clone());
        }
        let mut settings_figment = self.global.settings_figment.clone();
        let mut sections_figment = self.global.sections_figment.clone();
        for &index in rules
            .iter()
            .flat_map(|&rule| &self.rules[rule].contributions)
        {
            let contribution = &self.contributions[index];
            settings_figment = settings_figment.merge(Provide {
                index,
                contribution,
                part: Part::Settings,
            });
            sections_figment = sections_figment.merge(Provide {
                index,
                contribution,
                part: Part::Sections,
            });
        }
        let resolved = Arc::new(resolve(
            &self.contributions,
            &self.declared,
            settings_figment,
            sections_figment,
        )?);
        let mut cache = self.cache.lock();
        if cache.len() >= CACHE_CAPACITY
            && let Some(evicted) = cache.keys().next().cloned()
        {
            cache.remove(&evicted);
        }
        cache.insert(rules.into(), resolved.clone());
        Ok(resolved)
    }
}

/// Extracts and checks the settings and the declared sections of merged figments.
fn resolve(
    contributions: &[Contribution],
    declared: &[Section],
    settings_figment: Figment,
    sections_figment: Figment,
) -> Result<Resolved, ConfigError> {
    let settings: Settings = settings_figment
        .extract_lossy()
        .map_err(|error| figment_error(contributions, error, "", None))?;
    if let Some((key, problem)) = settings.check() {
        let mut error = ConfigError::new(problem);
        let mut full_key = key.to_owned();
        if let Some(contribution) =
            contribution_of(contributions, settings_figment.find_metadata(key))
        {
            let path: Vec<&str> = key.split('.').collect();
            error = error
                .with_source(contribution.source_name.clone())
                .with_line(contribution.line(&path));
            full_key = format!("{}{key}", contribution.key_prefix);
        }
        return Err(error.with_key(full_key));
    }
    for section in declared {
        match section.validate(&sections_figment) {
            Ok(()) => {}
            Err(Failure::Figment(error)) => {
                return Err(figment_error(
                    contributions,
                    *error,
                    section.name(),
                    Some(section),
                ));
            }
            Err(Failure::Invalid(invalid)) => {
                return Err(invalid_key_error(
                    contributions,
                    &sections_figment,
                    section,
                    &invalid,
                ));
            }
        }
    }
    Ok(Resolved {
        settings: Arc::new(settings),
        settings_figment,
        sections_figment,
    })
}

/// The contribution a figment value came from, by the index its provider's metadata carries.
fn contribution_of<'c>(
    contributions: &'c [Contribution],
    metadata: Option<&Metadata>,
) -> Option<&'c Contribution> {
    let index = metadata?.source.as_ref()?.custom()?.parse::<usize>().ok()?;
    contributions.get(index)
}

/// Turns a figment error into a [`ConfigError`] naming the layer, the line and the full key.
/// `section` is the table the figment was focused on, if any, and `declared` its declaration,
/// which says whether the value is a secret (and so not quoted).
fn figment_error(
    contributions: &[Contribution],
    error: figment::Error,
    section: &str,
    declared: Option<&Section>,
) -> ConfigError {
    let inner: Vec<&str> = error.path.iter().map(String::as_str).collect();
    let secret = declared.is_some_and(|declared| declared.is_secret(&inner));
    let (problem, missing) = describe(&error.kind, secret);
    let path: Vec<&str> = std::iter::once(section)
        .filter(|section| !section.is_empty())
        .chain(inner.iter().copied())
        .chain(missing.as_deref())
        .collect();
    let mut key = path.join(".");
    let mut result = ConfigError::new(problem);
    if let Some(contribution) = contribution_of(contributions, error.metadata.as_ref()) {
        result = result
            .with_source(contribution.source_name.clone())
            .with_line(contribution.line(&path));
        key = format!("{}{key}", contribution.key_prefix);
    }
    if key.is_empty() {
        result
    } else {
        result.with_key(key)
    }
}

/// The error of a value a section's [`check`](crate::SectionConfig::check) refused: where it
/// came from, the full key, what was expected and what was found (unless it is a secret).
fn invalid_key_error(
    contributions: &[Contribution],
    figment: &Figment,
    section: &Section,
    invalid: &InvalidKey,
) -> ConfigError {
    let inner: Vec<&str> = invalid.key().split('.').collect();
    let dotted = format!("{}.{}", section.name(), invalid.key());
    let found = match figment.find_value(&dotted) {
        Ok(_) if section.is_secret(&inner) => {
            ", found a value that is not shown (the key holds a secret)".to_owned()
        }
        Ok(_) if let Some(shown) = invalid.shown() => {
            format!(", found {}", actual_text(&Actual::Str(shown.to_owned())))
        }
        Ok(value) => format!(", found {}", actual_text(&value.to_actual())),
        Err(_) => String::new(),
    };
    let problem = Problem::InvalidValue(format!("expected {}{found}", invalid.expected()));
    let mut error = ConfigError::new(problem);
    let mut key = dotted.clone();
    if let Some(contribution) = contribution_of(contributions, figment.find_metadata(&dotted)) {
        let path: Vec<&str> = std::iter::once(section.name()).chain(inner).collect();
        error = error
            .with_source(contribution.source_name.clone())
            .with_line(contribution.line(&path));
        key = format!("{}{dotted}", contribution.key_prefix);
    }
    error.with_key(key)
}

/// Adds the origin of every leaf value under `value` to `origins`.
fn collect_origins(
    value: &Value,
    figment: &Figment,
    contributions: &[Contribution],
    origins: &mut BTreeSet<Origin>,
) {
    match value {
        Value::Dict(_, dict) => {
            for inner in dict.values() {
                collect_origins(inner, figment, contributions, origins);
            }
        }
        leaf => {
            if let Some(contribution) =
                contribution_of(contributions, figment.get_metadata(leaf.tag()))
            {
                origins.insert(contribution.origin.clone());
            }
        }
    }
}

/// The value at `path` inside `value`.
fn lookup<'v>(value: &'v Value, path: &[&str]) -> Option<&'v Value> {
    path.iter().try_fold(value, |value, key| match value {
        Value::Dict(_, dict) => dict.get(*key),
        _ => None,
    })
}

/// Rejects names that cannot be a provider section.
fn check_section_name(section: &str) -> Result<(), ConfigError> {
    let problem = if section.is_empty() || section.contains('.') {
        "a section name is one key, such as \"s3\"".to_owned()
    } else if section == PATHS {
        "\"paths\" holds path rules, not a section".to_owned()
    } else if layers::SCHEMA.contains_key(section) && !layers::is_settings_table(section) {
        format!("\"{section}\" is a setting, not a section; use Snapshot::for_path")
    } else {
        return Ok(());
    };
    Err(ConfigError::new(Problem::Usage(problem)).with_key(section))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rules_match_whole_segments() {
        assert!(rule_matches("s3://bucket/pre", "s3://bucket/pre"));
        assert!(rule_matches("s3://bucket/pre", "s3://bucket/pre/x"));
        assert!(!rule_matches("s3://bucket/pre", "s3://bucket/prefix"));
        assert!(rule_matches("s3://bucket", "s3://bucket/key"));
        assert!(rule_matches("s3://bucket/pre/", "s3://bucket/pre/x"));
        assert!(rule_matches("s3://bucket/pre/", "s3://bucket/pre/"));
        assert!(!rule_matches("s3://bucket/pre/", "s3://bucket/pre"));
        assert!(rule_matches("s3://", "s3://any/key"));
        assert!(!rule_matches("s3://bucket/pre/x", "s3://bucket/pre"));
        assert!(rule_matches("/data/local", "/data/local/file.bin"));
        assert!(!rule_matches("/data/local", "/data/localfile"));
    }

    #[test]
    fn snapshots_are_send_sync_and_small() {
        fn send_sync<T: Send + Sync>() {}
        send_sync::<Snapshot>();
        assert_eq!(
            std::mem::size_of::<Snapshot>(),
            std::mem::size_of::<usize>()
        );
    }

    #[test]
    fn defaults_have_no_rules_and_share_the_global_settings() {
        let snapshot = Snapshot::defaults();
        let a = snapshot.for_path("s3://a/b").unwrap();
        let b = snapshot.for_path("/local/file").unwrap();
        assert!(Arc::ptr_eq(&a, &b));
        assert_eq!(*a, Settings::default());
    }

    #[test]
    fn section_names_are_checked() {
        let snapshot = Snapshot::defaults();
        let error = |name: &str| {
            snapshot
                .section::<Dict>("s3://b/k", name)
                .unwrap_err()
                .to_string()
        };
        assert_eq!(
            error("paths"),
            "invalid configuration: key \"paths\": \"paths\" holds path rules, not a section"
        );
        assert!(error("io_threads").contains("is a setting, not a section"));
        assert!(error("s3.x").contains("a section name is one key"));
        assert!(error("").contains("a section name is one key"));
    }

    #[test]
    fn settings_tables_resolve_as_sections_with_default_origins() {
        let snapshot = Snapshot::defaults();
        let retry = snapshot
            .section::<crate::RetrySettings>("s3://b/k", "retry")
            .unwrap();
        assert_eq!(retry.value, crate::RetrySettings::default());
        assert_eq!(retry.origins, [Origin::Default]);
        let empty = snapshot.section::<Dict>("s3://b/k", "s3").unwrap();
        assert!(empty.value.is_empty());
        assert!(empty.origins.is_empty());
    }

    #[test]
    fn origins_display() {
        let rule = Origin::PathRule {
            prefix: "s3://b".into(),
            source: Box::new(Origin::File("/etc/karu.toml".into())),
        };
        assert_eq!(rule.to_string(), "path rule \"s3://b\" in /etc/karu.toml");
        assert_eq!(Origin::Explicit.to_string(), "explicit option");
    }
}
