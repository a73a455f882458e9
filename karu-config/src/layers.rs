//! Reading the layers of a configuration (built-in defaults, TOML files, the captured
//! environment, explicit options) and splitting each into settings keys, provider sections and
//! path rules.

use std::collections::BTreeMap;
use std::fs;
use std::io;
use std::path::Path;
use std::sync::{Arc, LazyLock};

use figment::value::{Dict, Value};

use crate::error::{ConfigError, Problem, actual_text, closest, unknown_key};
use crate::file::read_regular_text;
use crate::lines::KeyLines;
use crate::prefix::Prefixes;
use crate::section::Section;
use crate::settings::{GLOBAL_ONLY, Settings};
use crate::snapshot::Origin;
use crate::wording::Wording;

/// The top-level table that holds path rules.
pub(crate) const PATHS: &str = "paths";

/// The environment variable that names an extra config file.
pub(crate) const CONFIG_VAR: &str = "KARU_CONFIG";

/// The log filter of Karu's faces (the `karu` command's `-v`), in `tracing`'s filter syntax: not
/// a setting, and not an error.
pub(crate) const LOG_VAR: &str = "KARU_LOG";

/// The prefix of every environment variable this crate reads.
const ENV_PREFIX: &str = "KARU_";

/// Names after `KARU_` left to Karu's own build and CI scripts (such as `KARU_CI_TARGET_DIR`):
/// never read, never reported.
const RESERVED_ENV: &str = "CI_";

/// The built-in defaults as a figment dictionary. Its keys are exactly the keys [`Settings`]
/// accepts: top-level keys whose value is a dictionary are tables (`planner`, `http`, `retry`,
/// `hedge`), the others scalars.
pub(crate) static SCHEMA: LazyLock<Dict> =
    LazyLock::new(|| match Value::serialize(Settings::default()) {
        Ok(Value::Dict(_, dict)) => dict,
        _ => unreachable!("Settings serializes to a dictionary"),
    });

/// Whether `key` names one of the tables of [`Settings`].
pub(crate) fn is_settings_table(key: &str) -> bool {
    matches!(SCHEMA.get(key), Some(Value::Dict(..)))
}

/// What the layers are read against: the declared sections, how rule prefixes are made
/// canonical, and the words of the interface.
pub(crate) struct Context<'a> {
    pub(crate) sections: &'a [Section],
    pub(crate) prefixes: &'a Prefixes,
    pub(crate) wording: &'a Wording,
}

impl Context<'_> {
    /// The declared section called `name`.
    pub(crate) fn section(&self, name: &str) -> Option<&Section> {
        self.sections.iter().find(|section| section.name() == name)
    }

    /// Every name a top-level key may have: settings, `paths`, declared sections.
    fn top_level_keys(&self) -> Vec<&str> {
        let mut keys: Vec<&str> = SCHEMA.keys().map(String::as_str).collect();
        keys.push(PATHS);
        keys.extend(self.sections.iter().map(Section::name));
        keys.sort_unstable();
        keys
    }
}

/// One layer of configuration and where it came from.
pub(crate) struct Layer {
    /// The origin of the layer's global keys; its path rules get [`Origin::PathRule`] around it.
    pub(crate) origin: Origin,
    /// How error messages name this layer: a file path, `environment variable KARU_X`,
    /// `explicit option`.
    pub(crate) source_name: String,
    /// The lines of the keys, for a file.
    pub(crate) lines: Option<Arc<KeyLines>>,
    /// The layer's content.
    pub(crate) document: Document,
}

/// The content of a layer, split by who reads it.
#[derive(Default)]
pub(crate) struct Document {
    /// Keys of [`Settings`], at top level (`io_threads`) or in its tables (`[planner]`).
    pub(crate) settings: Dict,
    /// Every declared provider section, such as `[s3]`.
    pub(crate) sections: Dict,
    /// Path rules, in the order written. A rule's own document has no rules.
    pub(crate) rules: Vec<RuleDocument>,
}

/// One path rule of a layer.
pub(crate) struct RuleDocument {
    /// The prefix in canonical form: what the rule matches.
    pub(crate) canonical: String,
    /// The prefix as written: what errors quote, so the user finds it.
    pub(crate) written: String,
    /// The rule's keys.
    pub(crate) document: Document,
}

/// One option set on the builder with `set` or `path_set`.
#[derive(Clone)]
pub(crate) struct ExplicitOption {
    /// The path rule prefix, for `path_set`.
    pub(crate) prefix: Option<String>,
    /// The dotted key.
    pub(crate) key: String,
    /// The serialized value, or why it could not be serialized.
    pub(crate) value: Result<Value, String>,
}

impl ExplicitOption {
    /// The key as an error message writes it: `planner.max_gap`, `paths."s3://b".retry.deadline`.
    pub(crate) fn display_key(&self) -> String {
        match &self.prefix {
            Some(prefix) => rule_key(prefix, &self.key),
            None => self.key.clone(),
        }
    }
}

/// A key inside a path rule, written as a TOML dotted key: `paths.'s3://bucket'.retry.deadline`.
///
/// The prefix is a literal (single-quoted) string so that the key reads cleanly inside the
/// double quotes of an error message; a prefix holding a single quote is double-quoted instead.
/// An empty `key` gives the form written before keys of the rule: `paths.'s3://bucket'.`.
pub(crate) fn rule_key(prefix: &str, key: &str) -> String {
    if prefix.contains('\'') || prefix.chars().any(char::is_control) {
        format!("{PATHS}.{prefix:?}.{key}")
    } else {
        format!("{PATHS}.'{prefix}'.{key}")
    }
}

/// The built-in defaults.
pub(crate) fn defaults_layer() -> Layer {
    Layer {
        origin: Origin::Default,
        source_name: "built-in defaults".to_owned(),
        lines: None,
        document: Document {
            settings: SCHEMA.clone(),
            ..Document::default()
        },
    }
}

/// Reads one TOML file.
///
/// An optional file (`required` is `None`) is skipped when it does not exist or cannot even be
/// reached (a user file under an unreadable home directory); one that exists but cannot be read
/// is an error. A required file that is missing is an error whose message gives `required` as
/// the reason it had to exist.
pub(crate) fn file_layer(
    path: &Path,
    required: Option<&str>,
    context: &Context<'_>,
) -> Result<Option<Layer>, ConfigError> {
    let path = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    let source_name = path.display().to_string();
    let fail = |problem| ConfigError::new(problem).with_source(source_name.clone());
    // A FIFO without a writer is refused at once instead of hanging every client's build,
    // `/dev/zero` instead of being read until memory runs out.
    let text = match read_regular_text(&path, MAX_FILE_BYTES) {
        Ok(text) => text,
        Err(error) if error.kind() == io::ErrorKind::NotFound => {
            return match required {
                Some(why) => Err(fail(Problem::MissingFile(why.to_owned()))),
                None => Ok(None),
            };
        }
        // An optional file whose metadata cannot be had is out of reach, not unreadable.
        Err(_) if required.is_none() && fs::metadata(&path).is_err() => return Ok(None),
        Err(error) => return Err(fail(Problem::Unreadable(error))),
    };
    toml_layer(&text, Origin::File(path), source_name, context).map(Some)
}

/// The most bytes a configuration file may hold: far more than any has, far less than a
/// mistaken path (a disk image, a log) could make Karu read into memory.
pub(crate) const MAX_FILE_BYTES: u64 = 4 << 20;

/// A layer of TOML given as text (see [`ConfigBuilder::toml`](crate::ConfigBuilder::toml)),
/// named `name` in error messages.
pub(crate) fn text_layer(
    name: &str,
    text: &str,
    context: &Context<'_>,
) -> Result<Layer, ConfigError> {
    toml_layer(
        text,
        Origin::Text(name.to_owned()),
        name.to_owned(),
        context,
    )
}

/// A layer of TOML `text` from `origin`, named `source_name` in error messages.
fn toml_layer(
    text: &str,
    origin: Origin,
    source_name: String,
    context: &Context<'_>,
) -> Result<Layer, ConfigError> {
    let fail = |problem| ConfigError::new(problem).with_source(source_name.clone());
    let dict: Dict = toml::from_str(text).map_err(|error| fail(syntax(text, &error)))?;
    let lines = KeyLines::of(text);
    let place = Place {
        rule: None,
        lines: Some(&lines),
    };
    let document =
        split(dict, &place, context).map_err(|error| error.with_source(source_name.clone()))?;
    Ok(Layer {
        origin,
        source_name,
        lines: Some(Arc::new(lines)),
        document,
    })
}

/// Describes a TOML syntax error with its 1-based line and column.
fn syntax(text: &str, error: &toml::de::Error) -> Problem {
    let offset = error.span().map_or(0, |span| span.start).min(text.len());
    let before = text.get(..offset).unwrap_or(text);
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |newline| newline + 1);
    let column = before[line_start..].chars().count() + 1;
    Problem::Syntax {
        line,
        column,
        message: error.message().trim_end().to_owned(),
    }
}

/// One layer per `KARU_*` variable, in name order.
///
/// The mapping (documented for users on the crate root):
/// - `KARU_CONFIG` names a file and is handled by the builder, not here;
/// - `KARU_LOG` is the log filter of Karu's faces, not a setting;
/// - `KARU_CA_FILE` is `http.ca_file`;
/// - `KARU_<KEY>` is a top-level setting such as `io_threads`;
/// - `KARU_<TABLE>__<KEY>` is a key of a settings table; an unknown key there (a typo such as
///   `KARU_PLANNER__MAX_GAPP`) is kept so that resolution reports it with a did-you-mean;
///   `KARU_<TABLE>__<TABLE>__…__<KEY>` a key of a table inside it
///   (`KARU_PLANNER__PRICES__S3__EGRESS_PER_GIB`);
/// - `KARU_<SECTION>__<KEY>[__<KEY>…]` is a key of a declared provider section;
/// - `KARU_CI_*` is left to Karu's own scripts, and a variable set to the empty string counts as
///   unset;
/// - any other name is an error, with a did-you-mean when one is close.
pub(crate) fn env_layers(
    env: &BTreeMap<String, String>,
    context: &Context<'_>,
) -> Result<Vec<Layer>, ConfigError> {
    let mut layers = Vec::new();
    for (name, raw) in env {
        let Some(rest) = name.strip_prefix(ENV_PREFIX) else {
            continue;
        };
        if raw.is_empty() || name == CONFIG_VAR || name == LOG_VAR || rest.starts_with(RESERVED_ENV)
        {
            continue;
        }
        let source_name = format!("environment variable {name}");
        let unknown = |suggestion: Option<String>| {
            Err(ConfigError::new(Problem::UnknownVariable { suggestion })
                .with_source(source_name.clone()))
        };
        let path: Vec<String> = if rest == "CA_FILE" {
            vec!["http".to_owned(), "ca_file".to_owned()]
        } else {
            rest.split("__").map(str::to_ascii_lowercase).collect()
        };
        let Some((first, inner)) = path.split_first() else {
            continue;
        };
        if path.iter().any(String::is_empty) {
            return unknown(None);
        }
        let value = Value::from(raw.clone());
        let mut document = Document::default();
        match SCHEMA.get(first) {
            Some(Value::Dict(_, table)) if !inner.is_empty() => {
                // A table inside the table (`KARU_PLANNER__PRICES__S3__EGRESS_PER_GIB`) is
                // nested; any other key is kept whole, to be reported with a did-you-mean.
                let entry =
                    if inner.len() > 1 && matches!(table.get(&inner[0]), Some(Value::Dict(..))) {
                        nest(inner, value)
                    } else {
                        Value::from(Dict::from([(inner.join("__"), value)]))
                    };
                document.settings.insert(first.clone(), entry);
            }
            Some(Value::Dict(..)) => return unknown(Some(table_variable(first))),
            Some(_) if inner.is_empty() => {
                document.settings.insert(first.clone(), value);
            }
            Some(_) => return unknown(Some(format!("KARU_{}", first.to_ascii_uppercase()))),
            None if first == PATHS => {
                return Err(ConfigError::new(Problem::Usage(
                    "path rules cannot be set from the environment; write them in a config file"
                        .into(),
                ))
                .with_source(source_name));
            }
            None if !inner.is_empty() && context.section(first).is_some() => {
                document.sections.insert(first.clone(), nest(inner, value));
            }
            None if context.section(first).is_some() => {
                return unknown(Some(table_variable(first)));
            }
            None => return unknown(suggest_variable(rest, context)),
        }
        layers.push(Layer {
            origin: Origin::Environment,
            source_name,
            lines: None,
            document,
        });
    }
    Ok(layers)
}

/// `KARU_PLANNER__<KEY> (such as KARU_PLANNER__MAX_GAP)`: how to set a key of a table.
fn table_variable(table: &str) -> String {
    let upper = table.to_ascii_uppercase();
    let example = match table {
        "planner" => "MAX_GAP",
        "http" => "VERSION",
        "retry" => "DEADLINE",
        "hedge" => "BUDGET",
        _ => return format!("KARU_{upper}__<KEY>"),
    };
    format!("KARU_{upper}__<KEY> (such as KARU_{upper}__{example})")
}

/// The variable closest to `KARU_<rest>`, if one is close enough to be a typo of it.
fn suggest_variable(rest: &str, context: &Context<'_>) -> Option<String> {
    let mut known = vec!["CONFIG".to_owned(), "CA_FILE".to_owned(), "LOG".to_owned()];
    for (key, value) in SCHEMA.iter() {
        match value {
            Value::Dict(_, table) => {
                known.extend(table.keys().map(|field| format!("{key}__{field}")));
            }
            _ => known.push(key.clone()),
        }
    }
    for section in context.sections {
        let name = section.name();
        known.extend(
            section
                .fields()
                .iter()
                .map(|field| format!("{name}__{field}")),
        );
    }
    let known: Vec<String> = known.iter().map(|k| k.to_ascii_uppercase()).collect();
    if let Some(found) = closest(rest, &known) {
        return Some(format!("KARU_{found}"));
    }
    // A table or section named alone, or with a typo: say how to set its keys.
    let mut tables: Vec<&str> = SCHEMA
        .iter()
        .filter(|(_, value)| matches!(value, Value::Dict(..)))
        .map(|(key, _)| key.as_str())
        .collect();
    tables.extend(context.sections.iter().map(Section::name));
    let lower = rest.to_ascii_lowercase();
    let first = lower.split("__").next().unwrap_or_default();
    closest(first, &tables).map(table_variable)
}

/// The layer of one explicit option.
pub(crate) fn explicit_layer(
    option: &ExplicitOption,
    context: &Context<'_>,
) -> Result<Layer, ConfigError> {
    let source = context.wording.explicit.clone();
    let fail = |problem| {
        ConfigError::new(problem)
            .with_source(source.clone())
            .with_key(option.display_key())
    };
    let segments: Vec<&str> = option.key.split('.').collect();
    if segments.iter().any(|segment| segment.is_empty()) {
        return Err(fail(Problem::Usage(
            "a key is one or more names separated by dots, such as \"planner.max_gap\"".into(),
        )));
    }
    if option.prefix.is_none() && segments[0] == PATHS {
        return Err(fail(Problem::Usage(context.wording.path_rules.clone())));
    }
    let value = option.value.clone().map_err(|message| {
        fail(Problem::InvalidValue(format!(
            "cannot be turned into a configuration value: {message}"
        )))
    })?;
    let segments: Vec<String> = segments.into_iter().map(str::to_owned).collect();
    let Value::Dict(_, dict) = nest(&segments, value) else {
        unreachable!("a key has at least one segment");
    };
    let top = Place {
        rule: None,
        lines: None,
    };
    let document = match &option.prefix {
        None => split(dict, &top, context),
        Some(prefix) => rule_document(prefix, dict, &top, context).map(|rule| Document {
            rules: vec![rule],
            ..Document::default()
        }),
    }
    .map_err(|error| error.with_source(source.clone()))?;
    Ok(Layer {
        origin: Origin::Explicit,
        source_name: source,
        lines: None,
        document,
    })
}

/// Wraps `value` in one dictionary per segment: `["a", "b"]` gives `{ a = { b = value } }`.
fn nest(segments: &[String], value: Value) -> Value {
    segments.iter().rev().fold(value, |inner, segment| {
        Value::from(Dict::from([(segment.clone(), inner)]))
    })
}

/// Where keys being split sit: at the top of a layer or inside a rule, and the lines of the
/// file they come from.
struct Place<'a> {
    /// The rule's prefix as written, inside a rule.
    rule: Option<&'a str>,
    lines: Option<&'a KeyLines>,
}

impl Place<'_> {
    /// The key as errors write it.
    fn full_key(&self, key: &str) -> String {
        match self.rule {
            Some(prefix) => rule_key(prefix, key),
            None => key.to_owned(),
        }
    }

    /// The line of `key` (dotted inside this place) in the file, if known.
    fn line(&self, key: &str) -> Option<usize> {
        let lines = self.lines?;
        let mut path: Vec<&str> = match self.rule {
            Some(prefix) => vec![PATHS, prefix],
            None => Vec::new(),
        };
        path.extend(key.split('.').filter(|segment| !segment.is_empty()));
        lines.line(&path)
    }

    /// An error about `key` here.
    fn error(&self, problem: Problem, key: &str) -> ConfigError {
        ConfigError::new(problem)
            .with_key(self.full_key(key))
            .with_line(self.line(key))
    }
}

/// Splits the body of one path rule, whose keys are those of a file minus `paths`.
fn rule_document(
    written: &str,
    body: Dict,
    place: &Place<'_>,
    context: &Context<'_>,
) -> Result<RuleDocument, ConfigError> {
    let rule_place = Place {
        rule: Some(written),
        lines: place.lines,
    };
    let canonical = context.prefixes.canonical(written).map_err(|why| {
        let key = rule_key(written, "");
        let key = key.trim_end_matches('.');
        ConfigError::new(Problem::Usage(why))
            .with_key(key)
            .with_line(rule_place.line(""))
    })?;
    let document = split(body, &rule_place, context)?;
    Ok(RuleDocument {
        canonical,
        written: written.to_owned(),
        document,
    })
}

/// Splits a file's (or rule's) top level into settings keys, provider sections and rules.
///
/// Settings keys are checked here only for placement (global-only keys may not appear in a
/// rule); their values, and unknown keys inside settings tables and sections, are checked when
/// the snapshot resolves them. A top-level key that is neither a setting, `paths`, nor a
/// declared section is unknown.
fn split(dict: Dict, place: &Place<'_>, context: &Context<'_>) -> Result<Document, ConfigError> {
    let mut document = Document::default();
    for (key, value) in dict {
        if SCHEMA.contains_key(&key) {
            if place.rule.is_some()
                && let Some(global) = global_only_key(&key, &value)
            {
                return Err(place.error(Problem::GlobalOnly, &global));
            }
            document.settings.insert(key, value);
        } else if key == PATHS {
            if place.rule.is_some() {
                return Err(place.error(
                    Problem::Usage("path rules cannot be nested inside a path rule".into()),
                    &key,
                ));
            }
            let Value::Dict(_, rules) = value else {
                return Err(place.error(
                    Problem::InvalidValue(format!(
                        "expected a table of path rules such as [paths.\"s3://bucket\"], found {}",
                        actual_text(&value.to_actual())
                    )),
                    &key,
                ));
            };
            for (prefix, body) in rules {
                let Value::Dict(_, body) = body else {
                    let key = rule_key(&prefix, "");
                    return Err(ConfigError::new(Problem::InvalidValue(format!(
                        "expected a table of settings and sections, found {}",
                        actual_text(&body.to_actual())
                    )))
                    .with_key(key.trim_end_matches('.'))
                    .with_line(place.lines.and_then(|lines| lines.line(&[PATHS, &prefix]))));
                };
                document
                    .rules
                    .push(rule_document(&prefix, body, place, context)?);
            }
        } else if context.section(&key).is_some() {
            if !matches!(value, Value::Dict(..)) {
                return Err(place.error(
                    Problem::InvalidValue(format!(
                        "expected a table of {key} options such as [{key}], found {}",
                        actual_text(&value.to_actual())
                    )),
                    &key,
                ));
            }
            document.sections.insert(key, value);
        } else {
            let known = context.top_level_keys();
            return Err(place.error(unknown_key(&key, &known), &key));
        }
    }
    Ok(document)
}

/// The first global-only key that `value`, found at top-level `key`, would set.
fn global_only_key(key: &str, value: &Value) -> Option<String> {
    if GLOBAL_ONLY.contains(&key) {
        return Some(key.to_owned());
    }
    let Value::Dict(_, table) = value else {
        return None;
    };
    table
        .keys()
        .map(|field| format!("{key}.{field}"))
        .find(|dotted| GLOBAL_ONLY.contains(&dotted.as_str()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::section::SectionConfig;

    #[derive(Debug, Default, serde::Deserialize)]
    #[serde(default, deny_unknown_fields)]
    #[allow(dead_code)]
    struct S3 {
        region: Option<String>,
        endpoint: Option<String>,
    }

    impl SectionConfig for S3 {}
    impl crate::SectionKeys for S3 {}

    fn with_context<T>(f: impl FnOnce(&Context<'_>) -> T) -> T {
        let sections = [
            Section::of::<S3>("s3"),
            Section::of::<S3>("azure"),
            Section::of::<S3>("http_provider"),
        ];
        let prefixes = Prefixes::default();
        let wording = Wording::default();
        f(&Context {
            sections: &sections,
            prefixes: &prefixes,
            wording: &wording,
        })
    }

    fn env(vars: &[(&str, &str)]) -> BTreeMap<String, String> {
        vars.iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    fn env_keys(vars: &[(&str, &str)]) -> Vec<(String, String, String)> {
        with_context(|context| env_layers(&env(vars), context))
            .unwrap()
            .into_iter()
            .map(|layer| {
                let settings = format!("{:?}", layer.document.settings.keys().collect::<Vec<_>>());
                let sections = format!("{:?}", layer.document.sections.keys().collect::<Vec<_>>());
                (layer.source_name, settings, sections)
            })
            .collect()
    }

    fn env_error(name: &str) -> String {
        with_context(|context| env_layers(&env(&[(name, "1")]), context))
            .map(|_| ())
            .unwrap_err()
            .to_string()
    }

    #[test]
    fn the_schema_knows_every_settings_key() {
        let keys: Vec<&str> = SCHEMA.keys().map(String::as_str).collect();
        assert_eq!(
            keys,
            [
                "adaptive_concurrency",
                "concurrency",
                "credential_workers",
                "file_workers",
                "hedge",
                "http",
                "io_threads",
                "planner",
                "retry"
            ]
        );
        assert!(is_settings_table("planner"));
        assert!(!is_settings_table("io_threads"));
        assert!(!is_settings_table("s3"));
    }

    #[test]
    fn environment_variables_map_to_keys() {
        let layers = env_keys(&[
            ("KARU_IO_THREADS", "8"),
            ("KARU_CA_FILE", "/etc/ca.pem"),
            ("KARU_PLANNER__MAX_GAP", "0"),
            ("KARU_PLANNER__MAX_GAPP", "0"),
            ("KARU_S3__REGION", "eu-west-1"),
            ("KARU_CONFIG", "/etc/karu.toml"),
            ("KARU_LOG", "karu::http=debug"),
            ("KARU_EMPTY", ""),
            ("KARU_CI_TARGET_DIR", "/cache"),
            ("AWS_REGION", "us-east-1"),
        ]);
        let expected = [
            ("environment variable KARU_CA_FILE", "[\"http\"]", "[]"),
            (
                "environment variable KARU_IO_THREADS",
                "[\"io_threads\"]",
                "[]",
            ),
            (
                "environment variable KARU_PLANNER__MAX_GAP",
                "[\"planner\"]",
                "[]",
            ),
            (
                "environment variable KARU_PLANNER__MAX_GAPP",
                "[\"planner\"]",
                "[]",
            ),
            ("environment variable KARU_S3__REGION", "[]", "[\"s3\"]"),
        ];
        let expected: Vec<(String, String, String)> = expected
            .iter()
            .map(|(a, b, c)| ((*a).to_owned(), (*b).to_owned(), (*c).to_owned()))
            .collect();
        assert_eq!(layers, expected);
    }

    #[test]
    fn unknown_environment_variables_are_errors_with_a_did_you_mean() {
        let unknown = |name: &str, hint: &str| {
            format!(
                "invalid configuration: environment variable {name}: unknown environment \
                 variable, {hint}"
            )
        };
        assert_eq!(
            env_error("KARU_IO_THREAD"),
            unknown("KARU_IO_THREAD", "did you mean KARU_IO_THREADS?")
        );
        assert_eq!(
            env_error("KARU_S3_REGION"),
            unknown("KARU_S3_REGION", "did you mean KARU_S3__REGION?")
        );
        assert_eq!(
            env_error("KARU_PLANNER"),
            unknown(
                "KARU_PLANNER",
                "did you mean KARU_PLANNER__<KEY> (such as KARU_PLANNER__MAX_GAP)?"
            )
        );
        assert_eq!(
            env_error("KARU_S3"),
            unknown("KARU_S3", "did you mean KARU_S3__<KEY>?")
        );
        assert_eq!(
            env_error("KARU_IO_THREADS__X"),
            unknown("KARU_IO_THREADS__X", "did you mean KARU_IO_THREADS?")
        );
        let generic = "Karu reads KARU_CONFIG, KARU_CA_FILE, KARU_<SETTING> such as \
                       KARU_IO_THREADS, KARU_<TABLE>__<KEY> such as KARU_PLANNER__MAX_GAP, and \
                       KARU_<SECTION>__<KEY> such as KARU_S3__REGION";
        for name in [
            "KARU_FOO",
            "KARU___X",
            "KARU_GCS__BUCKET",
            "KARU_SOMETHING_ELSE",
        ] {
            assert_eq!(env_error(name), unknown(name, generic), "{name}");
        }
        assert!(env_error("KARU_PATHS__X").contains("cannot be set from the environment"));
    }

    #[test]
    fn rules_may_not_set_global_only_keys() {
        let rule = |toml: &str| {
            let dict: Dict = toml::from_str(toml).unwrap();
            let top = Place {
                rule: None,
                lines: None,
            };
            with_context(|context| rule_document("s3://b", dict, &top, context))
                .map(|_| ())
                .map_err(|e| e.to_string())
        };
        assert_eq!(
            rule("io_threads = 2"),
            Err(
                "invalid configuration: key \"paths.'s3://b'.io_threads\": applies to the whole \
                 client and cannot be set in a path rule"
                    .to_owned()
            )
        );
        assert!(
            rule("http.version = \"auto\"")
                .unwrap_err()
                .contains("http.version")
        );
        assert!(rule("planner.max_gap = 0").unwrap_err().contains("planner"));
        assert_eq!(
            rule("http.fallback_limit = 0\nretry.deadline = \"1s\"\ns3.region = \"x\""),
            Ok(())
        );
        assert!(
            rule("paths.\"x\".retry.attempts = 1")
                .unwrap_err()
                .contains("cannot be nested")
        );
    }

    fn split_text(text: &str) -> Result<Document, ConfigError> {
        let dict: Dict = toml::from_str(text).unwrap();
        let lines = KeyLines::of(text);
        let place = Place {
            rule: None,
            lines: Some(&lines),
        };
        with_context(|context| split(dict, &place, context))
    }

    #[test]
    fn top_level_keys_must_be_settings_or_declared_sections() {
        let error = split_text("io_thread = 4").map(|_| ()).unwrap_err();
        assert_eq!(
            error.to_string(),
            "invalid configuration: key \"io_thread\": unknown key, did you mean \"io_threads\"?"
        );
        assert_eq!(error.line(), Some(1));
        let document = split_text("[s3]\nregion = \"x\"\n[azure]\n[http_provider]\nx = 1").unwrap();
        assert_eq!(document.sections.len(), 3);

        let error = split_text("io_threads = 2\n\n[nonsense]\nx = 1\n")
            .map(|_| ())
            .unwrap_err();
        assert_eq!(error.kind(), crate::ConfigErrorKind::UnknownKey);
        assert_eq!(error.line(), Some(3));
        assert!(
            error.to_string().starts_with(
                "invalid configuration: key \"nonsense\": unknown key, expected one of"
            ),
            "{error}"
        );
        let error = split_text("[s4]\nregion = \"x\"").map(|_| ()).unwrap_err();
        assert!(
            error.to_string().ends_with("did you mean \"s3\"?"),
            "{error}"
        );
        let error = split_text("s3 = \"eu-west-1\"").map(|_| ()).unwrap_err();
        assert!(
            error.to_string().ends_with(
                "expected a table of s3 options such as [s3], found string \"eu-west-1\""
            ),
            "{error}"
        );
    }

    #[test]
    fn rule_prefixes_are_canonical_and_malformed_ones_refused() {
        let document =
            split_text("[paths.\"HTTP://Host/Data\"]\nretry.deadline = \"1s\"\n").unwrap();
        assert_eq!(document.rules[0].canonical, "http://host/Data");
        assert_eq!(document.rules[0].written, "HTTP://Host/Data");

        let error = split_text("io_threads = 1\n[paths.\"relative/dir\"]\nretry.attempts = 1\n")
            .map(|_| ())
            .unwrap_err();
        assert_eq!(error.kind(), crate::ConfigErrorKind::InvalidUsage);
        assert_eq!(error.key(), Some("paths.'relative/dir'"));
        assert_eq!(error.line(), Some(2));
    }

    #[test]
    fn syntax_errors_have_a_line_and_column() {
        let text = "io_threads = 4\n[planner]\nmax_gap = = 1\n";
        let error = toml::from_str::<Dict>(text).unwrap_err();
        let Problem::Syntax { line, column, .. } = syntax(text, &error) else {
            panic!("not a syntax problem");
        };
        assert_eq!((line, column), (3, 11));
    }
}
