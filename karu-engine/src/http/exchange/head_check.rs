//! The checks of an answer's head: the verdict on its status and headers, the batch's version
//! pin, and what the last redirect said of the object.

use http::HeaderMap;
use http::header::{CONTENT_ENCODING, CONTENT_LENGTH, CONTENT_RANGE, ETAG};

use super::outcome::rejected;
use super::{Answer, Exchange, Failure, HeadOutcome, LastModified, Success};
use crate::check::{self, Delivered, Expectation, ResponseHead, Verdict};
use crate::http::endpoint::Arrival;
use crate::retry::FailureClass;
use crate::sdk::{Error, Status};

impl Exchange<'_> {
    /// The checks of an answer's head: the verdict on its status and headers, the batch's
    /// version pin, what the last redirect said of the object. A 416 is read to its end here
    /// (no byte of it lands anywhere); an error status's body is read for the failure.
    pub(super) async fn check(
        &self,
        answer: Answer,
        expect: &Expectation<'_>,
        host: &str,
        linked: Option<&HeaderMap>,
    ) -> Result<HeadOutcome, Failure> {
        let status = answer.response.status().as_u16();
        let headers = answer.response.headers();
        let text = |name| {
            headers
                .get(name)
                .and_then(|v: &http::HeaderValue| v.to_str().ok())
        };
        let head = ResponseHead {
            status,
            content_range: text(CONTENT_RANGE),
            content_length: text(CONTENT_LENGTH).and_then(check::header_number),
            content_encoding: text(CONTENT_ENCODING),
            etag: text(ETAG),
            transformed: self.backend.transformed(headers),
        };
        let last_modified = LastModified::of(headers);
        let verdict = check::check_head(expect, &head);
        if let Some(failure) = self.keep_to_one_version(&verdict, status) {
            answer.abandon();
            return Err(failure);
        }
        if let Some(redirect) = linked {
            let (total, etag) = match &verdict {
                Verdict::Receive(receipt) => (receipt.total, receipt.etag.as_deref()),
                Verdict::Unsatisfiable { size, etag } => (*size, etag.as_deref()),
                Verdict::ErrorStatus(_) | Verdict::Reject(_) => (None, None),
            };
            let contradiction = (total.is_some() || etag.is_some())
                .then(|| self.backend.redirect_contradiction(redirect, total, etag))
                .flatten();
            if let Some(why) = contradiction {
                answer.abandon();
                return Err(Failure::new(
                    Error::new(
                        Status::Protocol,
                        format!("the redirect and the answer disagree: {why} ({host})"),
                    ),
                    FailureClass::Permanent,
                ));
            }
        }
        match verdict {
            Verdict::Receive(receipt) => Ok(HeadOutcome::Body {
                answer,
                receipt,
                last_modified,
            }),
            Verdict::Unsatisfiable { size, etag } => {
                let size = match size {
                    Some(size) => {
                        Box::pin(self.discard(answer, 0)).await;
                        Some(size)
                    }
                    // An S3-style error body may state the size the header did not.
                    None => {
                        let body =
                            Box::pin(self.discard(answer, self.limits.error_body_limit)).await;
                        check::check_unsatisfiable(expect.range, check::actual_object_size(&body))
                            .map_err(|rejection| rejected(rejection, status))?
                    }
                };
                Ok(HeadOutcome::Done(Success {
                    delivered: Delivered {
                        available: 0,
                        ends_early: true,
                    },
                    etag,
                    total: size,
                    last_modified,
                    arrival: Arrival::default(),
                }))
            }
            Verdict::ErrorStatus(code) => {
                Err(Box::pin(self.error_status(code, answer, host)).await)
            }
            Verdict::Reject(rejection) => {
                // Never download what cannot be used: the connection is closed.
                answer.abandon();
                Err(rejected(rejection, status))
            }
        }
    }
}
