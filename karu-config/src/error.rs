//! The crate's one public error, [`ConfigError`], and the wording of every problem it reports.

use std::fmt;
use std::io;

use figment::error::{Actual, Kind};

/// Why a configuration could not be built or resolved.
///
/// The error names where the offending value came from ([`source_name`](Self::source_name): a
/// file path, `environment variable KARU_X` or `explicit option`), the dotted key
/// ([`key`](Self::key), such as `planner.max_gap` or `paths.'s3://bucket'.retry.deadline`) and
/// what was expected:
///
/// ```text
/// invalid configuration: /tmp/x/karu.toml:2: key "planner.max_gap": expected a byte size such as 1048576 or "1MiB", found string "lots"
/// ```
///
/// A value from a file also names its line ([`line`](Self::line)).
///
/// The `Display` text is for people; programs should use [`kind`](Self::kind),
/// [`key`](Self::key) and [`source_name`](Self::source_name).
#[derive(Debug, thiserror::Error)]
#[error("invalid configuration: {0}")]
#[non_exhaustive]
pub struct ConfigError(Box<Detail>);

/// What went wrong, in broad classes a program may act on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ConfigErrorKind {
    /// A file that had to exist does not: one added with
    /// [`ConfigBuilder::file`](crate::ConfigBuilder::file) or named by `KARU_CONFIG`.
    MissingFile,
    /// A file exists but could not be read (an optional file that cannot even be reached, such
    /// as one under an unreadable home directory, is skipped instead).
    Unreadable,
    /// A file is not valid TOML.
    Syntax,
    /// A key, table or environment variable that is not a setting, such as
    /// `planner.max_gapp`, `[nonsense]`, `KARU_PLANNER__MAX_GAPP` or `KARU_IO_THREAD`.
    UnknownKey,
    /// A value of the wrong type or out of range, such as `io_threads = 0`, or one that would
    /// make every read fail, such as `retry.deadline = 0`.
    InvalidValue,
    /// A value that is valid but not allowed where it is, such as `io_threads` in a path rule.
    Misplaced,
    /// A malformed request to this crate: an empty key or a malformed path prefix, a section
    /// name that is not a single key.
    InvalidUsage,
}

/// The parts of a [`ConfigError`], boxed to keep the error one pointer wide.
#[derive(Debug)]
struct Detail {
    source_name: Option<String>,
    /// The line of the key in the file named by `source_name`.
    line: Option<usize>,
    key: Option<String>,
    problem: Problem,
}

impl fmt::Display for Detail {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (&self.source_name, self.line) {
            (Some(source), Some(line)) => write!(f, "{source}:{line}: ")?,
            (Some(source), None) => write!(f, "{source}: ")?,
            (None, _) => {}
        }
        if let Some(key) = &self.key {
            write!(f, "key \"{key}\": ")?;
        }
        self.problem.fmt(f)
    }
}

/// One problem, worded for the end of a [`ConfigError`] message.
#[derive(Debug, thiserror::Error)]
pub(crate) enum Problem {
    /// A required file is missing; the text says why it was required.
    #[error("file not found ({0})")]
    MissingFile(String),
    /// Reading a file failed.
    #[error("cannot read file: {0}")]
    Unreadable(io::Error),
    /// A file is not valid TOML.
    #[error("line {line}, column {column}: invalid TOML: {message}")]
    Syntax {
        line: usize,
        column: usize,
        message: String,
    },
    /// The key is not known here.
    #[error("unknown key, {}", unknown_hint(.suggestion, .expected))]
    UnknownKey {
        suggestion: Option<String>,
        expected: Vec<String>,
    },
    /// The value does not fit the key; the text reads "expected …, found …".
    #[error("{0}")]
    InvalidValue(String),
    /// A count that must be positive is zero.
    #[error("expected at least 1, found 0")]
    Zero,
    /// A number above the largest the key accepts.
    #[error("out of range (at most {max}), found {found}")]
    TooLarge { max: u64, found: String },
    /// A value that would make reads fail every time; the text says why.
    #[error("{0}")]
    AlwaysFails(String),
    /// A `KARU_*` environment variable Karu does not read.
    #[error("unknown environment variable, {}", variable_hint(.suggestion))]
    UnknownVariable { suggestion: Option<String> },
    /// A global-only key in a path rule.
    #[error("applies to the whole client and cannot be set in a path rule")]
    GlobalOnly,
    /// Misuse of the builder or snapshot API.
    #[error("{0}")]
    Usage(String),
}

impl ConfigError {
    /// Creates an error for `problem`, with no source and no key yet.
    pub(crate) fn new(problem: Problem) -> Self {
        Self(Box::new(Detail {
            source_name: None,
            line: None,
            key: None,
            problem,
        }))
    }

    /// Names the line of the offending key in the file named by the source.
    pub(crate) fn with_line(mut self, line: Option<usize>) -> Self {
        self.0.line = line.or(self.0.line);
        self
    }

    /// Names where the offending value came from.
    pub(crate) fn with_source(mut self, source_name: impl Into<String>) -> Self {
        self.0.source_name = Some(source_name.into());
        self
    }

    /// Names the dotted key of the offending value.
    pub(crate) fn with_key(mut self, key: impl Into<String>) -> Self {
        self.0.key = Some(key.into());
        self
    }

    /// The broad class of the problem.
    ///
    /// ```
    /// use karu_config::{ConfigBuilder, ConfigErrorKind};
    ///
    /// let error = ConfigBuilder::new()
    ///     .user_file(None)
    ///     .project_file(None)
    ///     .environment([("KARU_IO_THREADS", "0")])
    ///     .build()
    ///     .unwrap_err();
    /// assert_eq!(error.kind(), ConfigErrorKind::InvalidValue);
    /// assert_eq!(error.key(), Some("io_threads"));
    /// assert_eq!(error.source_name(), Some("environment variable KARU_IO_THREADS"));
    /// ```
    pub fn kind(&self) -> ConfigErrorKind {
        match self.0.problem {
            Problem::MissingFile(_) => ConfigErrorKind::MissingFile,
            Problem::Unreadable(_) => ConfigErrorKind::Unreadable,
            Problem::Syntax { .. } => ConfigErrorKind::Syntax,
            Problem::UnknownKey { .. } | Problem::UnknownVariable { .. } => {
                ConfigErrorKind::UnknownKey
            }
            Problem::InvalidValue(_)
            | Problem::Zero
            | Problem::TooLarge { .. }
            | Problem::AlwaysFails(_) => ConfigErrorKind::InvalidValue,
            Problem::GlobalOnly => ConfigErrorKind::Misplaced,
            Problem::Usage(_) => ConfigErrorKind::InvalidUsage,
        }
    }

    /// The dotted key of the offending value, such as `planner.max_gap`, when there is one.
    ///
    /// Keys inside path rules are written as TOML dotted keys, with the prefix in single quotes:
    /// `paths.'s3://bucket'.retry.deadline`.
    pub fn key(&self) -> Option<&str> {
        self.0.key.as_deref()
    }

    /// Where the offending value came from, when known: a file path, `environment variable
    /// KARU_X` or `explicit option`.
    pub fn source_name(&self) -> Option<&str> {
        self.0.source_name.as_deref()
    }

    /// The line (1-based) of the offending key in the file named by
    /// [`source_name`](Self::source_name), or of a TOML syntax error, when the value came from
    /// a file.
    pub fn line(&self) -> Option<usize> {
        match self.0.problem {
            Problem::Syntax { line, .. } => Some(line),
            _ => self.0.line,
        }
    }
}

/// Turns a figment deserialization error into a [`Problem`], returning also the name of a
/// missing field so the caller can add it to the key. A `secret` value is never quoted.
pub(crate) fn describe(kind: &Kind, secret: bool) -> (Problem, Option<String>) {
    let found = |actual: &Actual| {
        if secret {
            "a value that is not shown (the key holds a secret)".to_owned()
        } else {
            actual_text(actual)
        }
    };
    let problem = match kind {
        Kind::InvalidType(actual, expected) | Kind::InvalidValue(actual, expected) => {
            match integer_range(actual, expected) {
                Some(problem) if !secret => problem,
                _ => Problem::InvalidValue(format!(
                    "expected {}, found {}",
                    expected_text(expected),
                    found(actual)
                )),
            }
        }
        Kind::UnknownVariant(variant, expected) => Problem::InvalidValue(format!(
            "expected {}, found {}",
            one_of(expected),
            found(&Actual::Str(variant.clone()))
        )),
        Kind::UnknownField(field, expected) => unknown_key(field, expected),
        Kind::MissingField(field) => {
            let problem = Problem::InvalidValue("required, but no configuration sets it".into());
            return (problem, Some(field.to_string()));
        }
        Kind::Message(_) if secret => {
            Problem::InvalidValue("invalid value (not shown: the key holds a secret)".into())
        }
        Kind::Message(message) => Problem::InvalidValue(message.clone()),
        other => Problem::InvalidValue(other.to_string()),
    };
    (problem, None)
}

/// The largest and smallest values of serde's integer types, by the names serde gives them.
fn integer_bounds(expected: &str) -> Option<(i128, u128)> {
    Some(match expected {
        "u8" => (0, u8::MAX.into()),
        "u16" => (0, u16::MAX.into()),
        "u32" => (0, u32::MAX.into()),
        "u64" | "usize" => (0, u64::MAX.into()),
        "u128" => (0, u128::MAX),
        "i8" => (i8::MIN.into(), i8::MAX as u128),
        "i16" => (i16::MIN.into(), i16::MAX as u128),
        "i32" => (i32::MIN.into(), i32::MAX as u128),
        "i64" | "isize" => (i64::MIN.into(), i64::MAX as u128),
        _ => return None,
    })
}

/// "out of range (at most N)" for an integer that does not fit the integer type a key expects,
/// instead of serde's "expected u32" or "integer `…` as u128".
fn integer_range(actual: &Actual, expected: &str) -> Option<Problem> {
    let (min, max) = integer_bounds(expected)?;
    let found: i128 = match actual {
        Actual::Unsigned(v) => i128::try_from(*v).unwrap_or(i128::MAX),
        Actual::Signed(v) => *v,
        // serde describes 128-bit integers as "integer `N` as u128" (or i128).
        Actual::Other(text) => {
            let number = text.strip_prefix("integer `")?.split('`').next()?;
            return Some(match number.parse::<i128>() {
                Ok(n) if n < min => out_of_range_low(min, number),
                _ => Problem::TooLarge {
                    max: u64::try_from(max).unwrap_or(u64::MAX),
                    found: number.to_owned(),
                },
            });
        }
        _ => return None,
    };
    Some(if found < min {
        out_of_range_low(min, &found.to_string())
    } else {
        Problem::TooLarge {
            max: u64::try_from(max).unwrap_or(u64::MAX),
            found: found.to_string(),
        }
    })
}

/// The problem of an integer below the smallest a key accepts.
fn out_of_range_low(min: i128, found: &str) -> Problem {
    Problem::InvalidValue(format!("out of range (at least {min}), found {found}"))
}

/// An [`Problem::UnknownKey`] for `found`, suggesting the closest of `known` when one is close.
pub(crate) fn unknown_key<S: AsRef<str>>(found: &str, known: &[S]) -> Problem {
    Problem::UnknownKey {
        suggestion: closest(found, known).map(str::to_owned),
        expected: known.iter().map(|k| k.as_ref().to_owned()).collect(),
    }
}

/// The entry of `known` closest to `found`, if one is close enough to be a typo of it: the
/// did-you-mean of configuration errors, for the faces' own (the `karu` command's schemes).
///
/// ```
/// assert_eq!(karu_config::closest("htp", &["file", "http", "s3"]), Some("http"));
/// assert_eq!(karu_config::closest("gopher", &["file", "http", "s3"]), None);
/// ```
pub fn closest<'k, S: AsRef<str>>(found: &str, known: &'k [S]) -> Option<&'k str> {
    known
        .iter()
        .map(|k| (edit_distance(found, k.as_ref()), k.as_ref()))
        .filter(|&(distance, _)| {
            distance <= (found.len() / 3).clamp(1, 3) && distance < found.len()
        })
        .min_by_key(|&(distance, _)| distance)
        .map(|(_, known)| known)
}

/// The end of an unknown-variable message: a suggestion, or else what Karu reads.
fn variable_hint(suggestion: &Option<String>) -> String {
    match suggestion {
        Some(known) => format!("did you mean {known}?"),
        None => "Karu reads KARU_CONFIG, KARU_CA_FILE, KARU_<SETTING> such as KARU_IO_THREADS, \
                 KARU_<TABLE>__<KEY> such as KARU_PLANNER__MAX_GAP, and \
                 KARU_<SECTION>__<KEY> such as KARU_S3__REGION"
            .to_owned(),
    }
}

/// The end of an unknown-key message: a suggestion, or else the keys that are known.
fn unknown_hint(suggestion: &Option<String>, expected: &[String]) -> String {
    match suggestion {
        Some(known) => format!("did you mean \"{known}\"?"),
        None => format!("expected {}", one_of(expected)),
    }
}

/// `"a"`, `"a" or "b"`, `one of "a", "b", "c"`.
fn one_of<S: AsRef<str>>(items: &[S]) -> String {
    let quoted: Vec<String> = items
        .iter()
        .map(|s| format!("\"{}\"", s.as_ref()))
        .collect();
    match quoted.as_slice() {
        [] => "nothing".to_owned(),
        [one] => one.clone(),
        [a, b] => format!("{a} or {b}"),
        many => format!("one of {}", many.join(", ")),
    }
}

/// Rewords serde's names of primitive types for people.
fn expected_text(expected: &str) -> &str {
    match expected {
        "usize" | "u64" | "u32" | "u16" | "u8" | "u128" => "a non-negative integer",
        "isize" | "i64" | "i32" | "i16" | "i8" | "i128" => "an integer",
        "f64" | "f32" => "a number",
        "path string" => "a path",
        other if other.starts_with("struct ") || other == "a map" => "a table",
        other => other,
    }
}

/// Describes a value found where another was expected.
pub(crate) fn actual_text(actual: &Actual) -> String {
    match actual {
        Actual::Unsigned(v) => format!("integer {v}"),
        Actual::Signed(v) => format!("integer {v}"),
        Actual::Float(v) => format!("float {v}"),
        Actual::Bool(v) => format!("boolean {v}"),
        Actual::Str(v) => format!("string {v:?}"),
        Actual::Map => "a table".to_owned(),
        Actual::Seq => "an array".to_owned(),
        Actual::Unit | Actual::Option => "no value".to_owned(),
        other => other.to_string(),
    }
}

/// Levenshtein distance between two short keys.
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let substitute = diagonal + usize::from(ca != *cb);
            diagonal = row[j + 1];
            row[j + 1] = substitute.min(row[j] + 1).min(diagonal + 1);
        }
    }
    row[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_error_is_one_pointer_wide() {
        assert_eq!(
            std::mem::size_of::<ConfigError>(),
            std::mem::size_of::<usize>()
        );
    }

    #[test]
    fn display_names_source_key_and_problem() {
        let error = ConfigError::new(Problem::Zero)
            .with_source("explicit option")
            .with_key("io_threads");
        assert_eq!(
            error.to_string(),
            "invalid configuration: explicit option: key \"io_threads\": expected at least 1, \
             found 0"
        );
        let error = ConfigError::new(Problem::MissingFile(
            "added with ConfigBuilder::file".into(),
        ))
        .with_source("/nowhere/karu.toml");
        assert_eq!(
            error.to_string(),
            "invalid configuration: /nowhere/karu.toml: file not found (added with \
             ConfigBuilder::file)"
        );
        assert_eq!(error.kind(), ConfigErrorKind::MissingFile);
        assert_eq!(error.key(), None);
    }

    #[test]
    fn unknown_keys_suggest_a_close_one() {
        let known = ["max_gap", "max_span", "max_parts", "max_amplification"];
        assert_eq!(
            unknown_key("max_gapp", &known).to_string(),
            "unknown key, did you mean \"max_gap\"?"
        );
        assert_eq!(
            unknown_key("colour", &known).to_string(),
            "unknown key, expected one of \"max_gap\", \"max_span\", \"max_parts\", \
             \"max_amplification\""
        );
        assert_eq!(
            unknown_key("x", &["a", "b"]).to_string(),
            "unknown key, expected \"a\" or \"b\""
        );
        assert_eq!(
            unknown_key("xyz", &["a", "b"]).to_string(),
            "unknown key, expected \"a\" or \"b\""
        );
    }

    #[test]
    fn edit_distances() {
        assert_eq!(edit_distance("", "abc"), 3);
        assert_eq!(edit_distance("kitten", "sitting"), 3);
        assert_eq!(edit_distance("max_gapp", "max_gap"), 1);
        assert_eq!(edit_distance("same", "same"), 0);
    }
}
