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
//!     match batch.next(Duration::from_secs(1)) {
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
//! # Buffers
//!
//! A [`Batch`] owns its destinations: a buffer you give ([`Read::into_buffer`]) or one Karu
//! allocates travels with its transfer and comes back in the completion. Nothing borrowed is
//! referenced by a batch, so even leaking one with `mem::forget` is sound. To read into
//! borrowed slices, use [`Client::scope`] (or [`Client::read_into`]): the scope waits until
//! no transfer references a slice before it returns.
//!
//! # Configuration
//!
//! A client captures an immutable configuration snapshot when built: built-in defaults <
//! config files (user, project `karu.toml`, `KARU_CONFIG`) < `KARU_*` environment variables <
//! options set on the [`ClientBuilder`]; path rules apply per canonical path, longest prefix
//! first. Changing a builder never changes a client already built.

mod client;

/// The providers of this build, for their configuration types and helpers (for example
/// `karu::providers::s3::credential` to build an S3 credential in a credential callback).
pub use karu_providers as providers;

pub use client::{Client, ClientBuilder};
pub use karu_config::{ConfigBuilder, Snapshot};
pub use karu_engine::{
    Backend, Batch, BatchOptions, BatchStats, CanonicalPath, Completion, Ends, Error, Locator,
    Next, NextFuture, ObjectInfo, Read, Registry, Resolved, Scope, ScopedBatch, Status, Target,
    TransportStats, UNBOUNDED, Window,
};
pub use karu_engine::{CallbackCredential, Credential, CredentialCallback, CredentialStats};
/// What a third-party [`Backend`] builds requests with.
pub use karu_engine::{Capabilities, Correction, ErrorResponse, PrepareContext, PreparedRequest};
/// What a third-party [`Backend`] that authenticates names its credentials with.
pub use karu_engine::{CredentialProvider, CredentialScope, CredentialSource};
