//! [`ConfigBuilder`]: which files, environment and explicit options make up a snapshot.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use figment::value::Value;

use crate::error::{ConfigError, Problem};
use crate::layers::{self, CONFIG_VAR, Context, ExplicitOption};
use crate::prefix::Prefixes;
use crate::section::Section;
use crate::snapshot::Snapshot;
use crate::wording::Wording;

/// Builds an immutable [`Snapshot`]. Layering, lowest to highest:
/// built-in defaults < config files (user file in the platform config dir, then project
/// `karu.toml`, then the file named by the `KARU_CONFIG` environment variable) < environment
/// captured when `build` runs (`KARU_*`) < explicit options set on the builder.
///
/// Files added with [`file`](Self::file) sit between the project file and `KARU_CONFIG`'s
/// file, in the order added. Path rules from any layer sit above all global values for the paths
/// they match (see [`Snapshot::for_path`]).
///
/// The builder only records what to read; [`build`](Self::build) reads it, so building twice
/// can give two different snapshots, and a snapshot never changes once built.
///
/// ```
/// use std::time::Duration;
/// use karu_config::{ByteSize, ConfigBuilder, Seconds};
///
/// let dir = tempfile::tempdir()?;
/// let project = dir.path().join("karu.toml");
/// std::fs::write(&project, "io_threads = 2\n[planner]\nmax_gap = \"64KiB\"\n")?;
///
/// let snapshot = ConfigBuilder::new()
///     .user_file(None)
///     .project_file(Some(project))
///     .environment([("KARU_IO_THREADS", "6")])
///     .set("retry.deadline", "5s")
///     .build()?;
///
/// let settings = snapshot.global();
/// assert_eq!(settings.io_threads, 6); // the environment beats the file
/// assert_eq!(settings.planner.max_gap, ByteSize(64 << 10)); // the file beats the default
/// assert_eq!(settings.retry.deadline, Seconds(Duration::from_secs(5))); // explicit
/// assert_eq!(settings.concurrency, 64); // built-in default
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Default)]
pub struct ConfigBuilder {
    user_file: FileChoice,
    project_file: FileChoice,
    files: Vec<Added>,
    environment: Option<BTreeMap<String, String>>,
    explicit: Vec<ExplicitOption>,
    sections: Vec<Section>,
    prefixes: Prefixes,
    wording: Wording,
}

/// A document added with [`ConfigBuilder::file`] or [`ConfigBuilder::toml`].
#[derive(Clone)]
enum Added {
    File(PathBuf),
    Text { name: String, text: String },
}

impl fmt::Debug for Added {
    /// A file's path, or a text's name: never the text, which may hold secrets.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Added::File(path) => path.fmt(f),
            Added::Text { name, .. } => f.debug_tuple("Text").field(name).finish(),
        }
    }
}

/// Which user or project file to read.
#[derive(Debug, Clone, Default)]
enum FileChoice {
    /// The platform's default location, if the file exists.
    #[default]
    Default,
    /// This file, if it exists.
    Path(PathBuf),
    /// No file.
    Disabled,
}

impl FileChoice {
    fn from_option(path: Option<PathBuf>) -> Self {
        path.map_or(Self::Disabled, Self::Path)
    }

    fn resolve(&self, default: impl FnOnce() -> Option<PathBuf>) -> Option<PathBuf> {
        match self {
            Self::Default => default(),
            Self::Path(path) => Some(path.clone()),
            Self::Disabled => None,
        }
    }
}

impl ConfigBuilder {
    /// A builder with the default files, the process environment and no explicit options.
    pub fn new() -> Self {
        Self::default()
    }

    /// Override the user file path (default:
    /// `directories::ProjectDirs::from("", "", "karu")` `config_dir()/config.toml`, such as
    /// `~/.config/karu/config.toml` on Linux); `None` = no user file.
    ///
    /// The user file is optional: if it does not exist, or cannot even be reached (a home
    /// directory this user may not enter), it is skipped, whether it is the default or set
    /// here; one that exists but cannot be read is an error. The default location is found
    /// from the process environment (`HOME`, `XDG_CONFIG_HOME`), even when
    /// [`environment`](Self::environment) is used.
    pub fn user_file(mut self, path: Option<PathBuf>) -> Self {
        self.user_file = FileChoice::from_option(path);
        self
    }

    /// Override the project file (default: `karu.toml` in the current directory, if it
    /// exists); `None` = none.
    ///
    /// Like the user file, the project file is skipped if it does not exist or cannot be
    /// reached.
    pub fn project_file(mut self, path: Option<PathBuf>) -> Self {
        self.project_file = FileChoice::from_option(path);
        self
    }

    /// Add another config file, layered above the project file and below `KARU_CONFIG`'s file
    /// (missing = error). Files added later override files added earlier.
    pub fn file(mut self, path: impl Into<PathBuf>) -> Self {
        self.files.push(Added::File(path.into()));
        self
    }

    /// Add a TOML document given as text, layered as a file added with [`file`](Self::file)
    /// would be (in the order added among them). `name` is how errors and
    /// [`Origin`](crate::Origin) name it (for example `"the TOML given to karu_client_builder"`),
    /// with the line of the offending key.
    ///
    /// ```
    /// let snapshot = karu_config::ConfigBuilder::new()
    ///     .user_file(None)
    ///     .project_file(None)
    ///     .environment([("KARU_IO_THREADS", "3")])
    ///     .toml("inline settings", "io_threads = 2\nfile_workers = 5\n")
    ///     .build()?;
    /// assert_eq!(snapshot.global().file_workers, 5);
    /// assert_eq!(snapshot.global().io_threads, 3); // the environment beats files and texts
    /// # Ok::<(), karu_config::ConfigError>(())
    /// ```
    pub fn toml(mut self, name: impl Into<String>, text: impl Into<String>) -> Self {
        self.files.push(Added::Text {
            name: name.into(),
            text: text.into(),
        });
        self
    }

    /// Use these variables instead of capturing `std::env::vars()` at build time (tests use
    /// this). They are also what [`Snapshot::env`] returns. A name given twice keeps its last
    /// value.
    pub fn environment<I, K, V>(mut self, vars: I) -> Self
    where
        I: IntoIterator<Item = (K, V)>,
        K: Into<String>,
        V: Into<String>,
    {
        self.environment = Some(
            vars.into_iter()
                .map(|(name, value)| (name.into(), value.into()))
                .collect(),
        );
        self
    }

    /// Explicit global option by dotted key, e.g. `set("planner.max_gap", 0)` or
    /// `set("retry.deadline", "5s")` or `set("s3.region", "eu-west-1")`.
    ///
    /// The value may be anything serde can serialize: numbers, strings (`"1MiB"`, `"250ms"`),
    /// [`ByteSize`](crate::ByteSize), [`Seconds`](crate::Seconds), or a whole table. Later calls
    /// override earlier ones. Mistakes (unknown keys, wrong types) are reported by
    /// [`build`](Self::build), naming the source `explicit option`.
    pub fn set(mut self, key: &str, value: impl serde::Serialize) -> Self {
        self.explicit.push(ExplicitOption {
            prefix: None,
            key: key.to_owned(),
            value: serialize(value),
        });
        self
    }

    /// Explicit path rule option: applies to canonical paths under `prefix`, matched on whole
    /// segments like a `[paths."prefix"]` table in a file. It beats file rules for the same
    /// prefix, and every global value, for the paths it matches.
    pub fn path_set(mut self, prefix: &str, key: &str, value: impl serde::Serialize) -> Self {
        self.explicit.push(ExplicitOption {
            prefix: Some(prefix.to_owned()),
            key: key.to_owned(),
            value: serialize(value),
        });
        self
    }

    /// Declare a provider's section (`[s3]`, `[http_provider]`, …): its keys may then appear
    /// at top level, in path rules, as `KARU_<SECTION>__<KEY>` and as explicit options, and
    /// [`build`](Self::build) checks it, globally and under every path rule. A table that no
    /// declaration names (`[nonsense]`) is an unknown key. Declaring a name again replaces the
    /// earlier declaration.
    pub fn section(mut self, section: Section) -> Self {
        self.sections.retain(|known| known.name() != section.name());
        self.sections.push(section);
        self
    }

    /// Declare several sections, as [`section`](Self::section) does.
    pub fn sections(self, sections: impl IntoIterator<Item = Section>) -> Self {
        sections.into_iter().fold(self, Self::section)
    }

    /// Make path rule prefixes canonical the way addresses are (a client passes its address
    /// resolution, so `[paths."HTTP://Host/data"]` applies to `http://host/data/x` and
    /// `[paths."https://b.s3.amazonaws.com/"]` to `s3://b/…`). `canonical` receives the prefix
    /// as written, after the checks every prefix passes (not empty, no control characters, no
    /// query or fragment), and returns its canonical form or why it is not a prefix of any
    /// address. Without it, the scheme and host of a URL prefix are lower-cased and a path
    /// prefix must be absolute.
    pub fn canonical_prefixes(
        mut self,
        canonical: impl Fn(&str) -> Result<String, String> + Send + Sync + 'static,
    ) -> Self {
        self.prefixes = Prefixes::resolved_by(Arc::new(canonical));
        self
    }

    /// Speak in the words of another interface (a command line: `--config`, `--set`) in error
    /// messages and in [`Snapshot::explain`].
    pub fn wording(mut self, wording: Wording) -> Self {
        self.wording = wording;
        self
    }

    /// Resolve everything now. Errors name the file and line (or "environment variable
    /// KARU_X" / "explicit option"), the key and the expected type.
    ///
    /// Reads the files, captures the environment (unless [`environment`](Self::environment)
    /// was given), and checks the global settings, the declared [`section`](Self::section)s
    /// and every path rule, so a snapshot that builds resolves without errors.
    pub fn build(&self) -> Result<Snapshot, ConfigError> {
        if let Some(problem) = self.sections.iter().find_map(Section::name_problem) {
            return Err(ConfigError::new(Problem::Usage(problem)));
        }
        let env = match &self.environment {
            Some(vars) => vars.clone(),
            None => capture_environment(),
        };
        let context = Context {
            sections: &self.sections,
            prefixes: &self.prefixes,
            wording: &self.wording,
        };

        let mut layers = vec![layers::defaults_layer()];
        if let Some(path) = self.user_file.resolve(default_user_file) {
            layers.extend(layers::file_layer(&path, None, &context)?);
        }
        if let Some(path) = self.project_file.resolve(default_project_file) {
            layers.extend(layers::file_layer(&path, None, &context)?);
        }
        for added in &self.files {
            match added {
                Added::File(path) => layers.extend(layers::file_layer(
                    path,
                    Some(&self.wording.added_file),
                    &context,
                )?),
                Added::Text { name, text } => {
                    layers.push(layers::text_layer(name, text, &context)?);
                }
            }
        }
        if let Some(path) = env.get(CONFIG_VAR).filter(|path| !path.is_empty()) {
            layers.extend(layers::file_layer(
                Path::new(path),
                Some("named by environment variable KARU_CONFIG"),
                &context,
            )?);
        }
        layers.extend(layers::env_layers(&env, &context)?);
        for option in &self.explicit {
            layers.push(layers::explicit_layer(option, &context)?);
        }
        Snapshot::assemble(layers, env, self.sections.clone())
    }
}

impl fmt::Debug for ConfigBuilder {
    /// Shows files and the keys of explicit options; never values or the environment, which
    /// may hold secrets.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let explicit: Vec<String> = self
            .explicit
            .iter()
            .map(ExplicitOption::display_key)
            .collect();
        f.debug_struct("ConfigBuilder")
            .field("user_file", &self.user_file)
            .field("project_file", &self.project_file)
            .field("files", &self.files)
            .field(
                "environment",
                &self.environment.as_ref().map(|vars| vars.len()),
            )
            .field("explicit", &explicit)
            .field(
                "sections",
                &self.sections.iter().map(Section::name).collect::<Vec<_>>(),
            )
            .field("prefixes", &self.prefixes)
            .field("wording", &self.wording)
            .finish_non_exhaustive()
    }
}

/// Serializes an explicit value, keeping a failure for `build` to report.
fn serialize(value: impl serde::Serialize) -> Result<Value, String> {
    Value::serialize(value).map_err(|error| error.to_string())
}

/// The process environment, skipping variables whose name or value is not UTF-8.
fn capture_environment() -> BTreeMap<String, String> {
    std::env::vars_os()
        .filter_map(|(name, value)| Some((name.into_string().ok()?, value.into_string().ok()?)))
        .collect()
}

/// `config.toml` in the platform's configuration directory for Karu (such as
/// `~/.config/karu/config.toml` on Linux), if there is a home directory to find it in.
pub fn default_user_file() -> Option<PathBuf> {
    directories::ProjectDirs::from("", "", "karu").map(|dirs| dirs.config_dir().join("config.toml"))
}

/// `karu.toml` in the current directory.
fn default_project_file() -> Option<PathBuf> {
    std::env::current_dir()
        .ok()
        .map(|dir| dir.join("karu.toml"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_output_hides_values() {
        let builder = ConfigBuilder::new()
            .environment([("AWS_SECRET_ACCESS_KEY", "hunter2")])
            .set("s3.secret_access_key", "hunter2")
            .path_set("s3://b", "s3.session_token", "hunter2");
        let debug = format!("{builder:?}");
        assert!(!debug.contains("hunter2"), "{debug}");
        assert!(debug.contains("s3.secret_access_key"), "{debug}");
        assert!(debug.contains("paths.'s3://b'.s3.session_token"), "{debug}");
    }

    #[test]
    fn the_default_user_file_is_config_toml_in_the_karu_config_dir() {
        if let Some(path) = default_user_file() {
            assert!(path.ends_with("config.toml"));
            assert!(path.parent().unwrap().to_string_lossy().contains("karu"));
        }
    }
}
