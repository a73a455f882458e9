//! The bottom layer of the engine: Karu's model and the provider SDK. Everything a provider
//! crate needs, and the helpers every cloud provider shares. A provider crate depends on
//! `karu-engine` and imports from this module only (not from the rest of the engine, not from
//! `karu-config`, never from the `karu` facade); so do the faces, fuzz targets and benchmarks
//! where they name the model.
//!
//! Nothing here imports the rest of the engine: the pure cores above it (the planner
//! [`plan`](crate::plan), the response checks [`check`](crate::check), the retry policy, the
//! credential refresh timing) import only this module, and the runtime (batches, file workers,
//! the HTTP event loops, the credential cache, the engine) sits on top. `cargo xtask layers`
//! prints the graph and fails on a cycle or an import that points up.
//!
//! The model: addresses ([`Locator`], [`CanonicalPath`], [`Window`], [`Resolved`]), byte
//! ranges ([`RangeSpec`], [`ContentRange`], [`UNBOUNDED`]), outcomes ([`Status`], [`Error`],
//! [`Evidence`], [`Rejection`]), credentials ([`Credential`], [`CredentialScope`],
//! [`CredentialProvider`], an application callback's [`BearerToken`]), time ([`Clock`]) and
//! process identity ([`ProcessStamp`]).
//!
//! A provider is a [`Backend`]: it [resolves](Backend::resolve) addresses into
//! [`Resolved`] objects (no network, no credentials) and, for remote objects,
//! [prepares](Backend::prepare) the request of each attempt from a [`PrepareContext`] (the
//! object, the [`RangeSpec`], the configuration [`Snapshot`], the [`Credential`]) into a
//! [`PreparedRequest`], which the engine sends, checks, retries and resumes. Optional hooks:
//! [`credential_source`](Backend::credential_source) (a [`CredentialScope`] and the
//! [`CredentialProvider`] that looks credentials up on a credential worker),
//! [`capabilities`](Backend::capabilities) ([`Capabilities`]),
//! [`correction`](Backend::correction) (an [`ErrorResponse`] asking for a [`Correction`]) and
//! [`transformed`](Backend::transformed).
//!
//! A provider crate exports one `register` function that declares the provider to a
//! [`RegistryBuilder`]: its backend, the schemes and prefixes it serves, its credential family
//! and its configuration section. An application adds it in one line,
//! `karu::Client::builder().provider(my_provider::register)`; Karu's own providers are
//! registered the same way, by cargo feature.
//!
//! The shared helpers:
//!
//! - [`bridge`]: run an asynchronous credential SDK (aws-config, gcp_auth, azure_identity) from
//!   a credential lookup, on one shared small runtime, bounded by the read's deadline, its
//!   errors formatted without secrets;
//! - [`PerScope`]: one credential provider per credential scope (an SDK chain built once per
//!   scope, in each process);
//! - [`PerProcess`]: a value of the process that made it, made again in a forked child (what a
//!   backend keeps that a fork must not share: learned state behind a lock, clients holding
//!   connections);
//! - [`encode_path`]: an object name as it goes into a request URL's path, encoded as every
//!   provider's requests encode it;
//! - [`check_endpoint`]: what a configured endpoint may be, the same for every provider, and
//!   how a refused one is quoted (redacted);
//! - [`system_time_after`]: an expiry a server announces, however far away, without overflow;
//! - [`read_regular_file`]: a key, token or certificate file a user names, read so that no
//!   path (a FIFO, `/dev/zero`) can hang a credential worker or fill memory;
//! - [`token`]: the credential-exchange kit: token requests sent with the client's own HTTP
//!   client (the TLS setup of reads, `http.ca_file` included), one parser of token answers,
//!   form bodies, the RS256 signer of JWT assertions;
//! - [`redact`]: what of an address, URL, text or error chain may be shown;
//! - [`error_body`]: the code and message of XML and JSON error answers, and summaries.
//!
//! - [`testing`]: a minimal local-file backend for tests and examples.
//!
//! `karu-providers/README.md` is the guide to writing a provider crate; the toy provider in
//! `karu-providers/example` is a complete one in under 150 lines. The behaviour every provider
//! gets from the engine is Karu's contract, `karu-engine/README.md`.

mod backend;
mod bearer;
pub mod bridge;
mod config;
pub(crate) mod credential;
mod endpoint;
pub mod error_body;
pub(crate) mod evidence;
mod html;
pub(crate) mod locator;
mod path;
pub(crate) mod process;
pub(crate) mod range;
pub mod redact;
mod registry;
pub(crate) mod request;
mod scopes;
pub(crate) mod status;
pub mod testing;
pub(crate) mod time;
pub mod token;

// The model.
pub use bearer::BearerToken;
pub use credential::{
    CallbackCredential, Credential, CredentialCallback, CredentialProvider, CredentialScope,
    CredentialSource, FetchContext,
};
pub use evidence::{Evidence, Mismatch, Rejection};
pub use locator::{CanonicalPath, Locator, Resolved, Target, Window};
pub use process::{PerProcess, ProcessStamp};
pub use range::{ContentRange, RangeSpec, UNBOUNDED};
pub use status::{Error, Status, StatusClass, classify_status};
pub use time::{Clock, FOREVER, SystemClock, system_time_after};

// What a provider implements and declares.
pub use backend::Backend;
pub use registry::{Registration, Registry, RegistryBuilder, scheme_of};
pub use request::{
    Capabilities, Correction, ErrorResponse, HttpOptions, PrepareContext, PreparedRequest,
};

// Configuration.
pub use config::{
    CREDENTIAL_FILE_MAX, credential_scope, read_credential_file, resolved_section, section,
};
pub use karu_config::{
    ConfigBuilder, ConfigError, ConfigErrorKind, Discovered, InvalidKey, Key, Origin, Scoped,
    Section, SectionConfig, SectionKeys, Snapshot, read_regular_file, read_regular_text,
};
/// `#[derive(SectionKeys)]`: a section type's secret and credential keys (`#[karu(secret)]`,
/// `#[karu(credential)]` on fields, aliases included) and its `Debug`, which shows secrets as
/// `<redacted>`, from one declaration. See [`SectionKeys`](trait@SectionKeys) and
/// [`redact::Concealed`].
///
/// ```
/// use karu_engine::sdk::SectionKeys;
///
/// #[derive(Default, serde::Deserialize, SectionKeys)]
/// #[serde(default)]
/// struct StoreConfig {
///     endpoint: Option<String>,
///     #[karu(secret, credential)]
///     #[serde(alias = "bearer_token")]
///     token: Option<String>,
///     #[karu(credential)]
///     profile: Option<String>,
/// }
///
/// assert_eq!(StoreConfig::SECRET, ["token", "bearer_token"]);
/// assert_eq!(StoreConfig::CREDENTIAL, ["token", "bearer_token", "profile"]);
/// let config = StoreConfig { token: Some("s3cret".into()), ..StoreConfig::default() };
/// assert_eq!(
///     format!("{config:?}"),
///     r#"StoreConfig { endpoint: None, token: Some(<redacted>), profile: None, .. }"#
/// );
/// ```
pub use karu_derive::SectionKeys;

// The shared helpers.
pub use endpoint::{check_endpoint, endpoint_problem, shown_endpoint};
pub use path::{PATH_KEEPS, encode_path, is_plain_name};
pub use scopes::PerScope;

/// The `http` crate of [`PreparedRequest`]'s URL and headers, so a provider names the same
/// version the engine sends.
pub use ::http;
