//! The effective configuration of one canonical path, value by value, with the layer and path
//! rule that supplied each: what a user needs when a rule does not apply.

use std::fmt;

use figment::value::{Num, Value};

use crate::snapshot::Origin;

/// What [`Snapshot::explain`](crate::Snapshot::explain) returns: the path rules that match a
/// canonical path and every value in effect for it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Explanation {
    /// The canonical path explained.
    pub canonical: String,
    /// The prefixes of the path rules that apply, shortest (weakest) first.
    pub rules: Vec<String>,
    /// Every setting, then every key set in a declared provider section, in key order.
    pub values: Vec<Explained>,
}

/// One value in effect, and where it came from.
#[derive(Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Explained {
    /// The dotted key: `planner.max_gap`, `s3.region`.
    pub key: String,
    /// The value written as TOML (`"1MiB"`, `4`, `true`), `(unset)` for an optional setting
    /// nobody sets, or `<redacted>` for a secret.
    pub value: String,
    /// The layer, and the path rule, that supplied it.
    pub origin: Origin,
    /// How that layer is named: a file path, `environment variable KARU_X`, the name of
    /// explicit options, `built-in defaults`.
    pub source: String,
    /// The line in the file, when the value was written in one.
    pub line: Option<usize>,
}

impl fmt::Debug for Explained {
    /// The same as the fields; secrets are already redacted in `value`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Explained")
            .field("key", &self.key)
            .field("value", &self.value)
            .field("origin", &self.origin)
            .field("source", &self.source)
            .field("line", &self.line)
            .finish()
    }
}

impl Explained {
    /// Where the value came from, for people: `built-in defaults`,
    /// `/home/u/.config/karu/config.toml:4`, `path rule "s3://b" in ./karu.toml:9`,
    /// `environment variable KARU_IO_THREADS`.
    pub fn place(&self) -> String {
        let at = match self.line {
            Some(line) => format!("{}:{line}", self.source),
            None => self.source.clone(),
        };
        match &self.origin {
            Origin::PathRule { prefix, .. } => format!("path rule {prefix:?} in {at}"),
            _ => at,
        }
    }
}

/// What a secret value is shown as.
pub(crate) const REDACTED: &str = "<redacted>";

/// A figment value written as TOML: strings quoted, tables inline.
pub(crate) fn render(value: &Value) -> String {
    match value {
        Value::String(_, text) => toml::Value::String(text.clone()).to_string(),
        Value::Char(_, c) => toml::Value::String(c.to_string()).to_string(),
        Value::Bool(_, b) => b.to_string(),
        Value::Num(_, number) => render_number(*number),
        Value::Empty(..) => "(unset)".to_owned(),
        Value::Array(_, items) => {
            let items: Vec<String> = items.iter().map(render).collect();
            format!("[{}]", items.join(", "))
        }
        Value::Dict(_, dict) => {
            let entries: Vec<String> = dict
                .iter()
                .map(|(key, value)| format!("{key} = {}", render(value)))
                .collect();
            format!("{{ {} }}", entries.join(", "))
        }
    }
}

fn render_number(number: Num) -> String {
    if let Some(unsigned) = number.to_u128() {
        unsigned.to_string()
    } else if let Some(signed) = number.to_i128() {
        signed.to_string()
    } else {
        number.to_f64().map_or_else(String::new, |f| f.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use figment::value::Dict;

    #[test]
    fn values_render_as_toml() {
        assert_eq!(render(&Value::from("1MiB")), "\"1MiB\"");
        assert_eq!(render(&Value::from("a \"b\"")), "'a \"b\"'");
        assert_eq!(render(&Value::from(4u32)), "4");
        assert_eq!(render(&Value::from(-4i64)), "-4");
        assert_eq!(render(&Value::from(2.5f64)), "2.5");
        assert_eq!(render(&Value::from(true)), "true");
        assert_eq!(render(&Value::from(vec![1u8, 2])), "[1, 2]");
        let dict = Dict::from([("a".to_owned(), Value::from("x"))]);
        assert_eq!(render(&Value::from(dict)), "{ a = \"x\" }");
    }

    #[test]
    fn places_name_the_rule_and_the_line() {
        let explained = Explained {
            key: "retry.deadline".into(),
            value: "\"5s\"".into(),
            origin: Origin::PathRule {
                prefix: "s3://b".into(),
                source: Box::new(Origin::File("/k.toml".into())),
            },
            source: "/k.toml".into(),
            line: Some(9),
        };
        assert_eq!(explained.place(), "path rule \"s3://b\" in /k.toml:9");
        let explained = Explained {
            origin: Origin::Default,
            source: "built-in defaults".into(),
            line: None,
            ..explained
        };
        assert_eq!(explained.place(), "built-in defaults");
    }
}
