//! Reading the layers of a configuration (built-in defaults, TOML files, the captured
//! environment, explicit options) and splitting each into settings keys, provider sections and
//! path rules.

use std::collections::BTreeMap;
use std::fs;
use std::io;
use std::path::Path;
use std::sync::LazyLock;

use figment::value::{Dict, Value};

use crate::error::{ConfigError, Problem, actual_text, unknown_key};
use crate::settings::{GLOBAL_ONLY, Settings};
use crate::snapshot::Origin;

/// The top-level table that holds path rules.
pub(crate) const PATHS: &str = "paths";

/// The environment variable that names an extra config file.
pub(crate) const CONFIG_VAR: &str = "KARU_CONFIG";

/// The prefix of every environment variable this crate reads.
const ENV_PREFIX: &str = "KARU_";

/// The source name of explicit options in error messages.
pub(crate) const EXPLICIT: &str = "explicit option";

/// The built-in defaults as a figment dictionary. Its keys are exactly the keys [`Settings`]
/// accepts: top-level keys whose value is a dictionary are tables (`planner`, `http`, `retry`),
/// the others scalars.
pub(crate) static SCHEMA: LazyLock<Dict> =
    LazyLock::new(|| match Value::serialize(Settings::default()) {
        Ok(Value::Dict(_, dict)) => dict,
        _ => unreachable!("Settings serializes to a dictionary"),
    });

/// Whether `key` names one of the tables of [`Settings`].
pub(crate) fn is_settings_table(key: &str) -> bool {
    matches!(SCHEMA.get(key), Some(Value::Dict(..)))
}

/// One layer of configuration and where it came from.
pub(crate) struct Layer {
    /// The origin of the layer's global keys; its path rules get [`Origin::PathRule`] around it.
    pub(crate) origin: Origin,
    /// How error messages name this layer: a file path, `environment variable KARU_X`,
    /// `explicit option`.
    pub(crate) source_name: String,
    /// The layer's content.
    pub(crate) document: Document,
}

/// The content of a layer, split by who reads it.
#[derive(Default)]
pub(crate) struct Document {
    /// Keys of [`Settings`], at top level (`io_threads`) or in its tables (`[planner]`).
    pub(crate) settings: Dict,
    /// Every other top-level table: provider sections such as `[s3]`.
    pub(crate) sections: Dict,
    /// Path rules, by prefix, in the order written. A rule's own document has no rules.
    pub(crate) rules: Vec<(String, Document)>,
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
        document: Document {
            settings: SCHEMA.clone(),
            ..Document::default()
        },
    }
}

/// Reads one TOML file. A missing file is skipped when `required` is `None`, and otherwise is an
/// error whose message gives `required` as the reason the file had to exist.
pub(crate) fn file_layer(
    path: &Path,
    required: Option<&'static str>,
) -> Result<Option<Layer>, ConfigError> {
    let path = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    let source_name = path.display().to_string();
    let fail = |problem| ConfigError::new(problem).with_source(source_name.clone());
    let text = match fs::read_to_string(&path) {
        Ok(text) => text,
        Err(error) if error.kind() == io::ErrorKind::NotFound => {
            return match required {
                Some(why) => Err(fail(Problem::MissingFile(why))),
                None => Ok(None),
            };
        }
        Err(error) => return Err(fail(Problem::Unreadable(error))),
    };
    let dict: Dict = toml::from_str(&text).map_err(|error| fail(syntax(&text, &error)))?;
    let document = split(dict, None).map_err(|error| error.with_source(source_name.clone()))?;
    Ok(Some(Layer {
        origin: Origin::File(path),
        source_name,
        document,
    }))
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

/// One layer per `KARU_*` variable that configures something, in name order.
///
/// The mapping (documented for users on the crate root):
/// - `KARU_CONFIG` names a file and is handled by the builder, not here;
/// - `KARU_CA_FILE` is `http.ca_file`;
/// - `KARU_<KEY>` is a top-level setting such as `io_threads`;
/// - `KARU_<TABLE>__<KEY>` is a key of a settings table; an unknown key there (a typo such as
///   `KARU_PLANNER__MAX_GAPP`) is kept so that resolution reports it;
/// - `KARU_<SECTION>__<KEY>[__<KEY>…]` for any other section is a key of that provider section;
/// - anything else, and any variable set to the empty string, is ignored.
pub(crate) fn env_layers(env: &BTreeMap<String, String>) -> Vec<Layer> {
    let mut layers = Vec::new();
    for (name, raw) in env {
        let Some(rest) = name.strip_prefix(ENV_PREFIX) else {
            continue;
        };
        if raw.is_empty() || name == CONFIG_VAR {
            continue;
        }
        let path: Vec<String> = if rest == "CA_FILE" {
            vec!["http".to_owned(), "ca_file".to_owned()]
        } else {
            rest.split("__").map(str::to_ascii_lowercase).collect()
        };
        if path.iter().any(String::is_empty) {
            continue;
        }
        let value = Value::from(raw.clone());
        let Some((first, inner)) = path.split_first() else {
            continue;
        };
        let mut document = Document::default();
        match SCHEMA.get(first) {
            Some(Value::Dict(..)) if !inner.is_empty() => {
                let key = inner.join("__");
                document
                    .settings
                    .insert(first.clone(), Value::from(Dict::from([(key, value)])));
            }
            Some(Value::Dict(..)) => continue,
            Some(_) if inner.is_empty() => {
                document.settings.insert(first.clone(), value);
            }
            Some(_) => continue,
            None if first == PATHS || inner.is_empty() => continue,
            None => {
                document.sections.insert(first.clone(), nest(inner, value));
            }
        }
        layers.push(Layer {
            origin: Origin::Environment,
            source_name: format!("environment variable {name}"),
            document,
        });
    }
    layers
}

/// The layer of one explicit option.
pub(crate) fn explicit_layer(option: &ExplicitOption) -> Result<Layer, ConfigError> {
    let fail = |problem| {
        ConfigError::new(problem)
            .with_source(EXPLICIT)
            .with_key(option.display_key())
    };
    let segments: Vec<&str> = option.key.split('.').collect();
    if segments.iter().any(|segment| segment.is_empty()) {
        return Err(fail(Problem::Usage(
            "a key is one or more names separated by dots, such as \"planner.max_gap\"".into(),
        )));
    }
    if option.prefix.is_none() && segments[0] == PATHS {
        return Err(fail(Problem::Usage(
            "path rules are set with ConfigBuilder::path_set".into(),
        )));
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
    let document = match &option.prefix {
        None => split(dict, None),
        Some(prefix) => rule_document(prefix, dict).map(|rule| Document {
            rules: vec![(prefix.clone(), rule)],
            ..Document::default()
        }),
    }
    .map_err(|error| error.with_source(EXPLICIT))?;
    Ok(Layer {
        origin: Origin::Explicit,
        source_name: EXPLICIT.to_owned(),
        document,
    })
}

/// Wraps `value` in one dictionary per segment: `["a", "b"]` gives `{ a = { b = value } }`.
fn nest(segments: &[String], value: Value) -> Value {
    segments.iter().rev().fold(value, |inner, segment| {
        Value::from(Dict::from([(segment.clone(), inner)]))
    })
}

/// Splits the body of one path rule, whose keys are those of a file minus `paths`.
fn rule_document(prefix: &str, body: Dict) -> Result<Document, ConfigError> {
    if prefix.is_empty() {
        return Err(ConfigError::new(Problem::Usage(
            "a path rule prefix must not be empty".into(),
        ))
        .with_key(format!("{PATHS}.''")));
    }
    split(body, Some(prefix))
}

/// Splits a file's (or rule's) top level into settings keys, provider sections and rules.
///
/// Settings keys are checked here only for placement (global-only keys may not appear in a
/// rule); their values, and unknown keys inside settings tables, are checked when settings are
/// extracted. A top-level key that is neither a setting, `paths`, nor a table is unknown.
fn split(dict: Dict, rule: Option<&str>) -> Result<Document, ConfigError> {
    let full_key = |key: &str| match rule {
        Some(prefix) => rule_key(prefix, key),
        None => key.to_owned(),
    };
    let mut document = Document::default();
    for (key, value) in dict {
        if SCHEMA.contains_key(&key) {
            if rule.is_some()
                && let Some(global) = global_only_key(&key, &value)
            {
                return Err(ConfigError::new(Problem::GlobalOnly).with_key(full_key(&global)));
            }
            document.settings.insert(key, value);
        } else if key == PATHS {
            if rule.is_some() {
                return Err(ConfigError::new(Problem::Usage(
                    "path rules cannot be nested inside a path rule".into(),
                ))
                .with_key(full_key(&key)));
            }
            let Value::Dict(_, rules) = value else {
                return Err(ConfigError::new(Problem::InvalidValue(format!(
                    "expected a table of path rules such as [paths.\"s3://bucket\"], found {}",
                    actual_text(&value.to_actual())
                )))
                .with_key(key));
            };
            for (prefix, body) in rules {
                let Value::Dict(_, body) = body else {
                    return Err(ConfigError::new(Problem::InvalidValue(format!(
                        "expected a table of settings and sections, found {}",
                        actual_text(&body.to_actual())
                    )))
                    .with_key(rule_key(&prefix, "").trim_end_matches('.').to_owned()));
                };
                let document_of_rule = rule_document(&prefix, body)?;
                document.rules.push((prefix, document_of_rule));
            }
        } else if let Value::Dict(..) = value {
            document.sections.insert(key, value);
        } else {
            let known: Vec<&str> = SCHEMA.keys().map(String::as_str).collect();
            return Err(ConfigError::new(unknown_key(&key, &known)).with_key(full_key(&key)));
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

    fn env(vars: &[(&str, &str)]) -> BTreeMap<String, String> {
        vars.iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    fn env_keys(vars: &[(&str, &str)]) -> Vec<(String, String, String)> {
        env_layers(&env(vars))
            .into_iter()
            .map(|layer| {
                let settings = format!("{:?}", layer.document.settings.keys().collect::<Vec<_>>());
                let sections = format!("{:?}", layer.document.sections.keys().collect::<Vec<_>>());
                (layer.source_name, settings, sections)
            })
            .collect()
    }

    #[test]
    fn the_schema_knows_every_settings_key() {
        let keys: Vec<&str> = SCHEMA.keys().map(String::as_str).collect();
        assert_eq!(
            keys,
            [
                "concurrency",
                "credential_workers",
                "file_workers",
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
    fn environment_variables_map_to_keys_or_are_ignored() {
        let layers = env_keys(&[
            ("KARU_IO_THREADS", "8"),
            ("KARU_CA_FILE", "/etc/ca.pem"),
            ("KARU_PLANNER__MAX_GAP", "0"),
            ("KARU_PLANNER__MAX_GAPP", "0"),
            ("KARU_S3__REGION", "eu-west-1"),
            ("KARU_CONFIG", "/etc/karu.toml"),
            ("KARU_EMPTY", ""),
            ("KARU_IO_THREADS__X", "1"),
            ("KARU_PATHS__X", "1"),
            ("KARU_SOMETHING_ELSE", "1"),
            ("KARU___X", "1"),
            ("KARU_PLANNER", "1"),
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
    fn rules_may_not_set_global_only_keys() {
        let rule = |toml: &str| {
            let dict: Dict = toml::from_str(toml).unwrap();
            rule_document("s3://b", dict)
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

    #[test]
    fn top_level_scalars_must_be_settings() {
        let dict: Dict = toml::from_str("io_thread = 4").unwrap();
        let error = split(dict, None).map(|_| ()).unwrap_err();
        assert_eq!(
            error.to_string(),
            "invalid configuration: key \"io_thread\": unknown key, did you mean \"io_threads\"?"
        );
        let dict: Dict =
            toml::from_str("[s3]\nregion = \"x\"\n[azure]\n[http_provider]\nx = 1").unwrap();
        let document = split(dict, None).unwrap();
        assert_eq!(document.sections.len(), 3);
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
