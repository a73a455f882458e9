//! Karu's configuration: layered settings resolved once into an immutable per-client
//! [`Snapshot`], with path rules chosen by the longest matching canonical path.
//!
//! # Layers
//!
//! [`ConfigBuilder::build`] reads every layer once and merges them key by key, each layer
//! overriding the ones before it:
//!
//! 1. the built-in defaults of [`Settings`];
//! 2. the user file, `config.toml` in the platform config directory (such as
//!    `~/.config/karu/config.toml`), if it exists;
//! 3. the project file, `karu.toml` in the current directory, if it exists;
//! 4. files added with [`ConfigBuilder::file`], which must exist;
//! 5. the file named by the `KARU_CONFIG` environment variable, which must exist;
//! 6. the `KARU_*` environment variables, captured when `build` runs;
//! 7. explicit options set with [`ConfigBuilder::set`].
//!
//! The snapshot never reads a file or the environment again; a client built from it keeps the
//! same configuration for its whole life, and building again makes a new snapshot.
//!
//! # Files
//!
//! Files are TOML. Top-level keys and the `[planner]`, `[http]` and `[retry]` tables are
//! [`Settings`]; an unknown key there is an error. Any other top-level table is a provider's
//! section (`[s3]`, `[gcs]`, `[azure]`, `[http_provider]`), read by that provider with
//! [`Snapshot::section`]. `[paths."prefix"]` tables are path rules.
//!
//! ```toml
//! io_threads = 4
//! [planner]
//! max_gap = "1MiB"
//! [retry]
//! deadline = "30s"
//! [s3]
//! region = "us-east-1"
//! [paths."s3://bucket/prefix"]
//! retry.deadline = "5s"
//! s3.region = "eu-west-1"
//! [paths."/data/local"]
//! http.fallback_limit = "1MiB"
//! ```
//!
//! Sizes are [`ByteSize`] (`1048576`, `"64KiB"`, `"16KB"`) and durations [`Seconds`] (`30`,
//! `2.5`, `"250ms"`). Numbers and booleans may also be written as strings.
//!
//! # Path rules
//!
//! A rule applies to a canonical path when its prefix matches on whole segments:
//! `"s3://bucket/pre"` matches `s3://bucket/pre` and `s3://bucket/pre/x` but not
//! `s3://bucket/prefix`; a prefix ending in `/` matches everything below it. Prefixes are
//! compared as written with canonical paths, so write them in canonical form.
//!
//! For each key, the longest matching rule that sets it wins, then shorter ones, then the
//! global value from the layers above. Rules come from any file and from
//! [`ConfigBuilder::path_set`]; when two layers write a rule for the same prefix, the higher
//! layer wins key by key. A rule may not set a global-only key (threads, workers, concurrency,
//! `planner`, `http.version`, `http.ca_file`, `http.dns_ttl`): that is an error, since the
//! engine reads those once for the whole client.
//!
//! # Environment
//!
//! Only variables whose name starts with `KARU_` configure anything; an empty value counts as
//! unset.
//!
//! - `KARU_CONFIG` names a file (layer 5); it is not a setting.
//! - `KARU_IO_THREADS`, `KARU_FILE_WORKERS`, `KARU_CREDENTIAL_WORKERS`, `KARU_CONCURRENCY` set
//!   the top-level settings of the same name, and `KARU_CA_FILE` sets `http.ca_file`.
//! - `KARU_<TABLE>__<KEY>` sets a key of a settings table: `KARU_PLANNER__MAX_GAP=0`,
//!   `KARU_RETRY__DEADLINE=5s`, `KARU_HTTP__VERSION=auto`. A key that is not in the table
//!   (`KARU_PLANNER__MAX_GAPP`) is an error, since it can only be a typo.
//! - `KARU_<SECTION>__<KEY>` for any other section sets a provider section key:
//!   `KARU_S3__REGION=eu-west-1` is `s3.region`.
//! - Every other `KARU_*` name is ignored, since other tools may use the prefix; path rules
//!   cannot be set from the environment.
//!
//! Names after `KARU_` are case-insensitive keys (they are lower-cased). A malformed value,
//! such as `KARU_IO_THREADS=many`, is an error naming the variable.
//!
//! # Errors
//!
//! Every [`ConfigError`] names the layer (a file path, `environment variable KARU_X`, or
//! `explicit option`), the key, and what was expected; a TOML syntax error names the file and
//! line.
//!
//! # Example
//!
//! ```
//! use std::time::Duration;
//! use karu_config::{ByteSize, ConfigBuilder, Seconds};
//!
//! let dir = tempfile::tempdir()?;
//! let file = dir.path().join("karu.toml");
//! std::fs::write(
//!     &file,
//!     r#"
//!     [retry]
//!     deadline = "30s"
//!     [paths."s3://bucket/prefix"]
//!     retry.deadline = "5s"
//!     "#,
//! )?;
//!
//! let snapshot = ConfigBuilder::new()
//!     .user_file(None)
//!     .project_file(Some(file))
//!     .environment([("KARU_PLANNER__MAX_GAP", "0")])
//!     .build()?;
//!
//! assert_eq!(snapshot.global().planner.max_gap, ByteSize(0));
//! assert_eq!(snapshot.global().retry.deadline, Seconds(Duration::from_secs(30)));
//! let rule = snapshot.for_path("s3://bucket/prefix/object")?;
//! assert_eq!(rule.retry.deadline, Seconds(Duration::from_secs(5)));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod builder;
mod error;
mod layers;
mod settings;
mod snapshot;
mod units;

pub use builder::ConfigBuilder;
pub use error::{ConfigError, ConfigErrorKind};
pub use settings::{HttpSettings, HttpVersion, PlannerSettings, RetrySettings, Settings};
pub use snapshot::{Origin, Scoped, Snapshot};
pub use units::{ByteSize, Seconds};
