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
//!    `~/.config/karu/config.toml`), if it exists (a file that cannot even be reached, such as
//!    one under a home directory this user may not enter, is skipped; one that exists but
//!    cannot be read is an error);
//! 3. the project file, `karu.toml` in the current directory, likewise optional;
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
//! Files are TOML. Top-level keys and the `[planner]`, `[http]`, `[retry]` and `[hedge]` tables
//! are [`Settings`]; an unknown key there is an error. Other top-level tables are providers'
//! sections (`[s3]`, `[http_provider]`, …): each provider declares its own with
//! [`ConfigBuilder::section`] (a [`Section`] of its [`SectionConfig`] type), the builder checks
//! it globally and under every path rule, and the provider reads it with
//! [`Snapshot::section`]. A table no provider declares (`[nonsense]`) is an unknown key.
//! `[paths."prefix"]` tables are path rules. Errors about a value from a file name the file,
//! the line and the key.
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
//! Values are typed by their key: sizes are [`ByteSize`] (`1048576`, `"64KiB"`, `"1 MiB"`,
//! `"0x100000"`), durations [`Seconds`] (`30`, `2.5`, `"250ms"`) and shares [`Share`] (`"5%"`,
//! `0.05`); integer settings take decimal or `0x` hexadecimal numbers; numbers and booleans may
//! also be written as strings (environment variables always are), and a string key takes digits as text
//! (`KARU_S3__REGION=123` is the region `"123"`). A number that does not fit its key is "out
//! of range (at most N)".
//!
//! # Path rules
//!
//! A rule applies to a canonical path when its prefix matches on whole segments:
//! `"s3://bucket/pre"` matches `s3://bucket/pre` and `s3://bucket/pre/x` but not
//! `s3://bucket/prefix`; a prefix ending in `/` matches everything below it. Prefixes are made
//! canonical like addresses: a client resolves them as it resolves addresses
//! ([`ConfigBuilder::canonical_prefixes`]), so `"HTTP://Host/data"` applies to
//! `http://host/data/x`; without one, the scheme and host are lower-cased. A malformed prefix
//! (empty, relative without a client, with a query or a fragment, or one no provider accepts)
//! is an error.
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
//! - `KARU_LOG` is the log filter of Karu's faces (the `karu` command's `-v`, in `tracing`'s
//!   filter syntax); it is not a setting.
//! - `KARU_IO_THREADS`, `KARU_FILE_WORKERS`, `KARU_CREDENTIAL_WORKERS`, `KARU_CONCURRENCY` set
//!   the top-level settings of the same name, and `KARU_CA_FILE` sets `http.ca_file`.
//! - `KARU_<TABLE>__<KEY>` sets a key of a settings table: `KARU_PLANNER__MAX_GAP=0`,
//!   `KARU_RETRY__DEADLINE=5s`, `KARU_HTTP__VERSION=auto`, `KARU_HEDGE__BUDGET=2%`. A key that
//!   is not in the table (`KARU_PLANNER__MAX_GAPP`) is an error, since it can only be a typo.
//!   A table inside a table is one more `__` down:
//!   `KARU_PLANNER__PRICES__S3__EGRESS_PER_GIB=0` is `planner.prices.s3.egress_per_gib`.
//! - `KARU_<SECTION>__<KEY>` sets a key of a declared provider section:
//!   `KARU_S3__REGION=eu-west-1` is `s3.region`.
//! - Every other `KARU_*` name is an error with a did-you-mean (`KARU_IO_THREAD`: did you mean
//!   `KARU_IO_THREADS`?), since the prefix is Karu's; only `KARU_CI_*` is left to Karu's own
//!   build scripts. Path rules cannot be set from the environment.
//!
//! Names after `KARU_` are case-insensitive keys (they are lower-cased). A malformed value,
//! such as `KARU_IO_THREADS=many`, is an error naming the variable.
//!
//! # Errors
//!
//! Every [`ConfigError`] names the layer (a file path and line, `environment variable KARU_X`,
//! or `explicit option`: an interface names its own options with [`Wording`]), the key, and
//! what was expected; a TOML syntax error names the file and line. Secret values are never
//! quoted.
//!
//! # Explaining
//!
//! [`Snapshot::explain`] lists the effective configuration of one canonical path, each value
//! with the layer, path rule and line that supplied it, secrets redacted (`karu config
//! ADDRESS` prints it).
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
mod explain;
mod file;
mod integer;
mod layers;
mod lines;
mod money;
mod prefix;
mod section;
mod settings;
mod snapshot;
mod units;
mod wording;

pub use builder::{ConfigBuilder, default_user_file};
pub use error::{ConfigError, ConfigErrorKind, closest};
pub use explain::{Explained, Explanation};
pub use file::{read_regular_file, read_regular_text};
pub use money::{Dollars, ParseDollarsError, PriceList, Prices};
pub use section::{Discovered, InvalidKey, Key, Section, SectionConfig, SectionKeys};
pub use settings::{
    HedgeAfter, HedgeSettings, HttpSettings, HttpVersion, PlannerSettings, RetrySettings, Settings,
    Trade,
};
pub use snapshot::{Origin, Scoped, Snapshot};
pub use units::{ByteSize, ParseUnitError, Seconds, Share};
pub use wording::Wording;

/// This crate's README, whose example runs as a documentation test.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct Readme;
