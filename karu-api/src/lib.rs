//! Karu reads exact byte ranges from local files, HTTP servers and cloud object stores, and
//! returns one checked completion per read.
//!
//! # One read, end to end
//!
//! A format reader knows which bytes it needs. It builds a [`Client`] once, resolves an
//! address to a [`Locator`] (no network, no credentials), and submits [`Read`]s. Karu plans
//! them (validating each, merging neighbours of one object into fewer transfers under four
//! guards), runs the transfers, and hands back one [`Completion`] per read, with its own
//! [`Status`]:
//!
//! ```
//! use karu::{Client, Next, Read, Status};
//! use std::time::Duration;
//!
//! # let dir = tempfile::tempdir()?;
//! # let path = dir.path().join("frames.bin");
//! # std::fs::write(&path, vec![7u8; 10_000])?;
//! let client = Client::builder().user_config_file(None).project_config_file(None).build()?;
//! let object = client.locate(path.to_str().unwrap())?;
//!
//! let batch = client.submit([
//!     Read::new(&object, 0, 4096).tag(1),     // Karu allocates the buffer
//!     Read::new(&object, 8192, 4096).tag(2),  // reaches past the end: a valid prefix
//!     Read::new(&object, 100, 0).tag(3),      // zero length: rejected on its own
//! ]);
//! loop {
//!     match batch.next_timeout(Duration::from_secs(1)) {
//!         Next::Completion(done) => match done.tag() {
//!             1 => assert_eq!(done.bytes(), &[7u8; 4096][..]),
//!             2 => {
//!                 assert_eq!(done.status(), Status::RangeNotSatisfiable);
//!                 assert_eq!(done.bytes_received(), 10_000 - 8192);
//!             }
//!             _ => assert_eq!(done.status(), Status::InvalidRange),
//!         },
//!         Next::TimedOut => continue, // work goes on; nothing changed
//!         Next::Drained => break,     // every read has completed
//!     }
//! }
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Async Rust
//!
//! A [`Batch`] is a `Stream` of completions, and [`Client::read_async`],
//! [`Client::stat_async`] and [`Client::read_ends_async`] are futures. All of them are woken
//! by Karu's own threads, so they work on tokio, smol or `futures::executor::block_on` alike,
//! need no runtime of the caller's, and never block the thread that polls them. Dropping a
//! future or a batch cancels its work without waiting.
//!
//! ```
//! use futures::StreamExt;
//! # let dir = tempfile::tempdir()?;
//! # let path = dir.path().join("frames.bin");
//! # std::fs::write(&path, vec![7u8; 10_000])?;
//! # let client = karu::Client::builder().user_config_file(None).project_config_file(None).build()?;
//! let object = client.locate(path.to_str().unwrap())?;
//! futures::executor::block_on(async {
//!     let size = client.stat_async(&object).await?.size.unwrap_or(0); // None: a device or FIFO
//!     let mut batch = client.submit((0..size).step_by(4096).map(|at| karu::Read::new(&object, at, 16)));
//!     while let Some(done) = batch.next().await {
//!         assert!(done.is_ok(), "{done:?}");
//!     }
//!     Ok::<(), karu::Error>(())
//! })?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! Layers above Karu that want a `read_at` seam (chunk caches, format readers) use an
//! [`ObjectReader`]: one object, its size, positional reads from many threads at once, and
//! async counterparts.
//!
//! # Buffers
//!
//! A [`Batch`] owns its destinations: a buffer you give ([`Read::with_buffer`]) or one Karu
//! allocates travels with its transfer and comes back in the completion. Nothing borrowed is
//! referenced by a batch, so dropping one never waits, and even leaking one with
//! `mem::forget` is sound. To read into borrowed slices ([`Read::borrowed`]), use
//! [`Client::scope`] (or [`Client::read_into`], [`ObjectReader::read_at`]): the scope waits
//! until no transfer references a slice before it returns.
//!
//! Large reads that repeat (a training loop reading tensors, batch after batch) are fastest
//! into buffers you reuse ([`Read::with_buffer`] with the vector a completion gave back, or
//! slices in a scope): the memory is already mapped. A buffer Karu allocates is fresh memory
//! until glibc's `malloc` starts recycling freed ones (it hands the first freed buffers of a
//! few MiB back to the system and raises its threshold as it goes), and fresh memory pays the
//! page faults of mapping its bytes (on Linux Karu makes a response's fresh room present 2 MiB
//! ahead of its bytes, which makes those faults cheaper, not fewer; so it does for a slice of
//! yours that was allocated and never written). The `tensors` benchmark (`cargo xtask bench
//! tensors`, figures in `xtask/bench/README.md`) compares the three, and `large` fresh and
//! written buffers of one read.
//!
//! # Errors
//!
//! Each failed read has an [`Error`]: its [`Status`], the HTTP status if a server answered,
//! the [`Evidence`] of a refused response or of the object's end (what was asked against what
//! the server stated), [`Error::is_transient`], and its cause through `source()`.
//!
//! # Configuration
//!
//! A client captures an immutable configuration snapshot when built: built-in defaults <
//! config files (user, project `karu.toml`, `KARU_CONFIG`) < `KARU_*` environment variables <
//! options set on the [`ClientBuilder`]; path rules apply per canonical path, longest prefix
//! first. Changing a builder never changes a client already built.
//!
//! # Providers
//!
//! Karu's own providers (local files, plain HTTP(S), Amazon S3 and S3-compatible stores, Google
//! Cloud Storage, Azure Blob Storage and Data Lake Storage, the Hugging Face Hub, Source
//! Cooperative) are chosen by cargo features, one each (`local`, `http`, `s3`, `gcs`, `azure`,
//! `hf`, `source`), all on by default. A third-party provider crate is added in one line with
//! [`ClientBuilder::provider`]`(its_crate::register)`; provider crates are written against the
//! provider SDK, `karu_engine::sdk`, never against this crate. What an application calls of
//! Karu's own providers (their credential families and the credential values a callback
//! returns) is in [`providers`].
//!
//! # Credential callbacks
//!
//! An application that already holds credentials (a vendor SDK, a secret manager) hands them
//! to Karu with [`ClientBuilder::credential_callback`], per family: `"aws"` (S3; a key pair
//! from [`providers::s3::credential`]), and `"gcp"`, `"azure"` and `"hf"` (Google Cloud
//! Storage, Azure, Hugging Face), which take a [`BearerToken`]:
//!
//! ```
//! use std::time::{Duration, SystemTime};
//! use karu::{BearerToken, CallbackCredential, CanonicalPath, Credential};
//!
//! let client = karu::Client::builder()
//!     .user_config_file(None)
//!     .project_config_file(None)
//!     .credential_callback("gcp", |path: &CanonicalPath| {
//!         let token = BearerToken::new("ya29.from-my-sdk");
//!         let expires = SystemTime::now() + Duration::from_secs(3600);
//!         let bucket = path.as_str().split('/').take(3).collect::<Vec<_>>().join("/");
//!         // Reused for every object of the bucket until it nears its expiry.
//!         Ok(CallbackCredential::for_prefix(Credential::new(token).with_expiry(Some(expires)), bucket))
//!     })
//!     .build()?;
//! # let _ = client;
//! # Ok::<(), karu::Error>(())
//! ```

mod client;
#[cfg(any(feature = "azure-core", feature = "gcp-auth"))]
mod credential_adapters;
#[cfg(feature = "metrics")]
pub mod metrics;
pub mod providers;
mod reader;

/// What of an address, a URL or a text may appear in a message or a log: user information and
/// query strings replaced by `<redacted>` (the one place Karu hides secrets from text), for
/// faces that echo what a user wrote, as the `karu` command does.
pub use karu_engine::sdk::redact;

/// The layered configuration a client captures: [`ConfigBuilder`], the [`Snapshot`] and what
/// it answers ([`config::Settings`], [`config::Explanation`], [`config::Origin`],
/// [`config::Scoped`] sections), [`config::ConfigError`], the units (`ByteSize`, `Seconds`),
/// and [`config::Wording`], which names the options of another interface in configuration
/// errors (the `karu` command's `--set`, Python's `karu.Client` keywords).
pub use karu_config as config;

/// The provider SDK (`karu_engine::sdk`): what a provider implements and declares
/// ([`sdk::Backend`], [`sdk::RegistryBuilder`], [`sdk::Resolved`], configuration
/// [`sdk::Section`]s, ...), named here because [`ClientBuilder::provider`], [`Registry`] and
/// [`Locator`] hand it out. A provider crate is written against `karu_engine::sdk` itself,
/// never against this crate.
pub use karu_engine::sdk;

pub use client::{Client, ClientBuilder};
pub use karu_config::{ConfigBuilder, Snapshot};
/// Which process made something: for bindings that keep state of their own beside a client's
/// and must tell, after a fork, what belongs to another process (see [`Client`]'s fork safety).
pub use karu_engine::ProcessStamp;
pub use karu_engine::sdk::BearerToken;
pub use karu_engine::{
    Batch, BatchOptions, BatchStats, CanonicalPath, Completion, ContentRange, Ends, Error,
    Evidence, Locator, Mismatch, Next, ObjectInfo, RangeSpec, Read, Registry, Rejection, Scope,
    ScopedBatch, Status, Target, Timing, TransportStats, UNBOUNDED, Window,
};
pub use karu_engine::{
    CallbackCredential, Clock, Credential, CredentialCallback, CredentialStats, SystemClock,
};
pub use reader::ObjectReader;

/// The repository README's Rust examples, compiled as this crate's documentation tests (with
/// karu-object-store's `ParquetReader`, a dev-dependency, for the Rust data stack's example).
#[cfg(doctest)]
#[doc = include_str!("../../README.md")]
pub struct Readme;
