//! Karu's engine: the model, the pure planner, batches and their completion queue, file
//! workers, and the transport for remote objects.
//!
//! Most programs use the `karu` crate (`karu-api/`), which wires this engine to the providers
//! and the layered configuration. This crate is also what a provider crate builds on: the
//! [`sdk`] module (the provider SDK) is everything a provider needs, and the engine owns
//! everything that is the same for every provider. What Karu promises about every read is its
//! contract, `karu-engine/README.md`.
//!
//! The modules are layers that point one way (`cargo xtask layers` prints and checks them):
//!
//! - [`sdk`], at the bottom: the model (locators, ranges, statuses and evidence, credentials,
//!   time, process identity) and the provider SDK. It imports nothing of the engine.
//! - The pure cores, which import only [`sdk`]: the planner [`plan`], the response checks
//!   [`check`], the retry policy, the hedging policy and the credential refresh timing. No sockets, threads or
//!   clock reads: time is a parameter.
//! - The runtime on top: batches and their reads, the credential cache and its workers,
//!   transfers, file workers, the HTTP event loops, and the [`Engine`].
//!
//! The life of a read:
//!
//! 1. An address is resolved by the [`Registry`] into a [`Locator`] (no network, no
//!    credentials).
//! 2. [`Engine::submit`] copies the [`Read`]s, plans them (validation, window conversion,
//!    grouping, sorting and merging under four guards) and returns a [`Batch`].
//! 3. Transfers go to file workers (positional reads straight into destinations) or to the
//!    remote path.
//! 4. Each original read completes on its own: a [`Batch`] yields [`Completion`]s, blocking
//!    ([`Batch::next_timeout`], [`Batch::wait`]) or as a `Stream` on any executor.
//!
//! ```
//! use std::sync::Arc;
//! use karu_engine::{BatchOptions, Engine, Read, Registry, Status};
//!
//! let dir = tempfile::tempdir()?;
//! let path = dir.path().join("object.bin");
//! std::fs::write(&path, (0..=255u8).collect::<Vec<_>>())?;
//!
//! let mut registry = Registry::builder();
//! registry
//!     .provider(Arc::new(karu_engine::sdk::testing::FileBackend))
//!     .scheme("file");
//! let object = registry.build()?.resolve(path.to_str().unwrap())?;
//!
//! let engine = Engine::new(karu_config::Snapshot::defaults())?;
//! let batch = engine.submit(
//!     [Read::new(&object, 10, 4).tag(7), Read::new(&object, 250, 10).tag(8)],
//!     &BatchOptions::new(),
//! );
//! let done = batch.wait();
//! assert_eq!(done[0].bytes(), &[10, 11, 12, 13]);
//! assert_eq!(done[1].status(), Status::RangeNotSatisfiable); // only 6 bytes exist
//! assert_eq!(done[1].bytes(), &[250, 251, 252, 253, 254, 255]);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

// The bottom layer: the model and the provider SDK.
pub mod sdk;

// The pure cores.
pub mod check;
mod freshness;
mod hedge;
pub mod plan;
mod retry;

// The runtime.
mod batch;
mod credentials;
mod engine;
mod file;
mod http;
mod pages;
mod reply;
mod transfer;
mod workers;

pub use batch::read::{Completion, Read};
pub use batch::timing::{Timing, names as metric_names};
pub use batch::{Batch, BatchStats, Next};
pub use credentials::CredentialStats;
pub use engine::{BatchOptions, Ends, Engine, EngineOptions, ObjectInfo, Scope, ScopedBatch};
pub use http::TransportStats;
pub use sdk::{
    CallbackCredential, CanonicalPath, Clock, ContentRange, Credential, CredentialCallback, Error,
    Evidence, Locator, Mismatch, PerProcess, ProcessStamp, RangeSpec, Registry, Rejection, Status,
    SystemClock, Target, UNBOUNDED, Window, scheme_of,
};
