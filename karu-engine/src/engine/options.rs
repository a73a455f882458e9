//! What an engine and a batch are configured with beyond the snapshot: the credential
//! callbacks of an engine ([`EngineOptions`]) and the per-batch overrides of the planner's
//! guards and the one-version rule ([`BatchOptions`]).

use std::sync::Arc;

use crate::credentials::Callbacks;
use crate::plan::Limits;
use crate::sdk::{Clock, CredentialCallback};

/// Per-batch overrides of the planner's merge guards (unset = the client's configuration).
///
/// ```
/// use karu_engine::BatchOptions;
/// let no_merging = BatchOptions::new().max_gap(0);
/// let tight = BatchOptions::new().max_span(8 << 20).max_parts(64).max_amplification(2);
/// # let _ = (no_merging, tight);
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct BatchOptions {
    pub(super) max_gap: Option<u64>,
    pub(super) max_span: Option<u64>,
    pub(super) max_parts: Option<u32>,
    pub(super) max_amplification: Option<u32>,
    pub(super) one_version: bool,
    pub(super) max_in_flight: Option<usize>,
}

impl BatchOptions {
    /// No overrides.
    pub fn new() -> Self {
        Self::default()
    }

    /// Largest gap between merged neighbours; 0 disables merging.
    pub fn max_gap(mut self, bytes: u64) -> Self {
        self.max_gap = Some(bytes);
        self
    }

    /// Largest span of a merged transfer.
    pub fn max_span(mut self, bytes: u64) -> Self {
        self.max_span = Some(bytes);
        self
    }

    /// Most reads in one transfer (0 behaves as 1).
    pub fn max_parts(mut self, parts: u32) -> Self {
        self.max_parts = Some(parts);
        self
    }

    /// Most fetched bytes per useful byte (0 behaves as 1 for a single read; merges need more).
    pub fn max_amplification(mut self, ratio: u32) -> Self {
        self.max_amplification = Some(ratio);
        self
    }

    /// Read one version of each remote object in this batch: the first strong ETag an answer
    /// states for an object pins it. Later requests for the object carry that tag as
    /// `If-Match`, answers already in flight are compared with it, and a read that sees
    /// another version fails with [`Status::PreconditionFailed`](crate::sdk::Status::PreconditionFailed) (the others go on).
    ///
    /// Without it, a batch may mix versions of an object that changes while it runs; each
    /// response is still checked on its own. As with [`Read::if_match`](crate::Read::if_match), an answer without a
    /// strong ETag cannot be compared: enforcement is then the server's. Local files have no
    /// versions.
    ///
    /// ```
    /// use karu_engine::BatchOptions;
    /// let consistent = BatchOptions::new().one_version();
    /// # let _ = consistent;
    /// ```
    pub fn one_version(mut self) -> Self {
        self.one_version = true;
        self
    }

    /// Most transfers of this batch in flight at once (0 behaves as 1): the others wait in
    /// the batch, in plan order, and each transfer that ends starts the next. Unset, the
    /// batch's transfers are bounded only by the client's `concurrency`, which every batch
    /// shares (and which this bound never raises).
    ///
    /// A transfer is in flight from the moment it is handed to a file worker or to the
    /// network (its credential lookup and its wait for a concurrency permit included) until
    /// its reads have completed; its retries and redirects are one transfer, while hedged
    /// duplicates of its request (`[hedge]`) are not counted. A merged transfer that comes
    /// apart as it starts (`planner.trade = "priced"`) gives transfers that wait their turn
    /// too.
    ///
    /// ```
    /// use karu_engine::BatchOptions;
    /// let four_at_a_time = BatchOptions::new().max_in_flight(4);
    /// # let _ = four_at_a_time;
    /// ```
    pub fn max_in_flight(mut self, transfers: usize) -> Self {
        self.max_in_flight = Some(transfers);
        self
    }

    /// These overrides applied to `defaults` (the engine's, when it plans the batch).
    pub(crate) fn limits(&self, defaults: Limits) -> Limits {
        Limits {
            max_gap: self.max_gap.unwrap_or(defaults.max_gap),
            max_span: self.max_span.unwrap_or(defaults.max_span),
            max_parts: self.max_parts.unwrap_or(defaults.max_parts),
            max_amplification: self.max_amplification.unwrap_or(defaults.max_amplification),
        }
    }
}

/// Options of an engine beyond its configuration snapshot.
///
/// ```
/// use std::sync::Arc;
/// use karu_engine::{CanonicalPath, EngineOptions, Error, Status};
///
/// let mut options = EngineOptions::new();
/// options.credential_callback(
///     "aws",
///     Arc::new(|_: &CanonicalPath| Err(Error::new(Status::Credentials, "the vault is sealed"))),
/// );
/// assert_eq!(options.callback_families(), ["aws"]);
/// ```
#[derive(Debug, Default, Clone)]
#[non_exhaustive]
pub struct EngineOptions {
    /// Application credential callbacks, by provider family.
    pub(super) callbacks: Callbacks,
    /// The wall clock credential expiries are judged by (the system's when unset).
    pub(super) clock: Option<Arc<dyn Clock>>,
}

impl EngineOptions {
    /// No options.
    pub fn new() -> Self {
        Self::default()
    }

    /// Credentials of `family` come from `callback` instead of the provider's own discovery
    /// (replacing an earlier callback of the family).
    pub fn credential_callback(
        &mut self,
        family: impl Into<String>,
        callback: Arc<dyn CredentialCallback>,
    ) -> &mut Self {
        self.callbacks.insert(family, callback);
        self
    }

    /// Judge credential expiries (the refresh window, a callback value's lifetime) by `clock`
    /// instead of the system clock: a test moves a simulated clock to a moment inside a
    /// credential's refresh window instead of sleeping until it comes.
    pub fn clock(&mut self, clock: Arc<dyn Clock>) -> &mut Self {
        self.clock = Some(clock);
        self
    }

    /// The families that have a credential callback, sorted.
    pub fn callback_families(&self) -> Vec<&str> {
        self.callbacks.families()
    }
}
