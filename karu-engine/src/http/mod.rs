//! Remote reads: event loops, the shared concurrency limit, and the life of one transfer
//! (prepare late, send, check, resume or retry under one deadline, scatter to parts).
//!
//! `KARU_IO_THREADS` loops each run a current-thread tokio runtime with its own connection
//! pool (`client.rs`: hyper's connections in a pool of Karu's own) and its own queue of pending
//! transfers. A client-wide semaphore bounds the active transfers of all loops together; a
//! transfer waits in its loop's queue (as a plain description: no task, no buffer) until a
//! permit frees up, so a batch of any size holds at most the limit in flight.
//!
//! The modules, from the engine's side down: [`remote`] (the HTTP engine a client owns),
//! [`loops`] (the event loops and their queues), [`permits`] (a request's place under the
//! limits), [`run`] (one transfer to its completions), [`pieces`] (large transfers in parts),
//! [`fetch`] (one logical read: prepare late, retry, resume, correct, under one deadline),
//! [`hedging`] (an attempt raced by its duplicates), [`exchange`] (one request: send, check
//! the head, receive), [`redirects`] (reusable redirect locations, single flight) over
//! the pure [`locations`], [`landing`] (where kept bytes land, metered) and
//! [`shared_landing`] (lent to a split transfer's pieces on other loops), [`client`] and
//! [`transport`] (connections, TLS, DNS), [`endpoint`] (per-endpoint measurements and adaptive
//! windows), [`speed`] (low-speed protection), [`failure`] (transport failures by kind),
//! [`ends`] (`read_ends`) and [`stats`] (counts).

pub(crate) mod client;
pub(crate) mod endpoint;
pub(crate) mod ends;
pub(crate) mod exchange;
pub(crate) mod failure;
pub(crate) mod fetch;
mod hedging;
pub(crate) mod landing;
pub(crate) mod locations;
mod loops;
mod permits;
pub(crate) mod pieces;
pub(crate) mod redirects;
mod remote;
mod run;
mod shared_landing;
pub(crate) mod speed;
mod stats;
mod task_pool;
mod token_client;
pub(crate) mod transport;

pub(crate) use loops::LoopCtx;
pub(crate) use permits::{Permits, ReleasablePermits, task_permits};
pub(crate) use remote::{Remote, RemoteStat};
pub(crate) use stats::RemoteStats;
pub use stats::TransportStats;
