//! Keeping a batch to one version of an object: the first answer's strong ETag pins it, and
//! an answer from another version is refused.

use super::{Exchange, Failure};
use crate::check::Verdict;
use crate::retry::FailureClass;
use crate::sdk::{Error, Evidence, Rejection, Status};

impl Exchange<'_> {
    /// In a batch that keeps to one version, pin the object to this answer's strong ETag if
    /// none is pinned yet, or refuse an answer from another version (one already in flight
    /// when the pin was set, or from a server that ignored `If-Match`).
    pub(super) fn keep_to_one_version(&self, verdict: &Verdict, status: u16) -> Option<Failure> {
        let (versions, object) = self.versions?;
        let etag = match verdict {
            Verdict::Receive(receipt) => receipt.etag.as_deref(),
            Verdict::Unsatisfiable { etag, .. } => etag.as_deref(),
            Verdict::ErrorStatus(_) | Verdict::Reject(_) => None,
        }?;
        let pinned = versions.settle(object, etag).err()?;
        let error = Error::new(
            Status::PreconditionFailed,
            format!(
                "{object} changed during the batch: this answer's ETag {etag} is not the \
                 {pinned} of its first answer"
            ),
        )
        .with_evidence(Evidence::Response(Rejection::Changed {
            required: pinned.to_string(),
            actual: etag.to_string(),
        }));
        Some(Failure::new(
            error.with_http_status(status),
            FailureClass::Permanent,
        ))
    }
}
