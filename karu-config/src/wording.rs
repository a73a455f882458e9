//! How configuration errors name what the user touched, in the words of the interface they
//! used: the Rust API says `ConfigBuilder::file`, the command line says `--config`.

/// The names an interface gives the things a [`ConfigBuilder`](crate::ConfigBuilder) records,
/// used in error messages and by [`Snapshot::explain`](crate::Snapshot::explain).
///
/// The default speaks of the Rust API. A command line says, for example:
///
/// ```
/// use karu_config::{ConfigBuilder, Wording};
///
/// let error = ConfigBuilder::new()
///     .user_file(None)
///     .project_file(None)
///     .environment(std::iter::empty::<(String, String)>())
///     .wording(Wording::new(
///         "given with --config",
///         "--set",
///         "write a [paths.\"PREFIX\"] table in a config file",
///     ))
///     .file("/nowhere/karu.toml")
///     .build()
///     .unwrap_err();
/// assert_eq!(
///     error.to_string(),
///     "invalid configuration: /nowhere/karu.toml: file not found (given with --config)"
/// );
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Wording {
    pub(crate) added_file: String,
    pub(crate) explicit: String,
    pub(crate) path_rules: String,
}

impl Wording {
    /// `added_file`: why a file added with [`file`](crate::ConfigBuilder::file) had to exist
    /// (`"added with ConfigBuilder::file"`); `explicit`: the name of options set with
    /// [`set`](crate::ConfigBuilder::set) and [`path_set`](crate::ConfigBuilder::path_set)
    /// (`"explicit option"`); `path_rules`: how to set a path rule instead of a key starting
    /// with `paths` (`"path rules are set with ConfigBuilder::path_set"`).
    pub fn new(
        added_file: impl Into<String>,
        explicit: impl Into<String>,
        path_rules: impl Into<String>,
    ) -> Self {
        Self {
            added_file: added_file.into(),
            explicit: explicit.into(),
            path_rules: path_rules.into(),
        }
    }

    /// The name of explicit options.
    pub fn explicit(&self) -> &str {
        &self.explicit
    }
}

impl Default for Wording {
    /// The words of the Rust API.
    fn default() -> Self {
        Self::new(
            "added with ConfigBuilder::file",
            "explicit option",
            "path rules are set with ConfigBuilder::path_set",
        )
    }
}
