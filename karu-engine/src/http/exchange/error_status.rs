//! An error answer made into a failure: its first bytes kept for the message and for the
//! backend's correction hook, its `Retry-After` honoured.

use super::{Answer, Exchange, Failure};
use crate::retry::{FailureClass, RetryAfter};
use crate::sdk::{Correction, Error, ErrorResponse, classify_status, error_body};

/// Longest body summary in a message.
const SUMMARY_CHARS: usize = 300;

impl Exchange<'_> {
    /// Read an error answer: keep the first bytes for the message and for the backend's
    /// correction hook, drain a small rest.
    pub(super) async fn error_status(&self, code: u16, answer: Answer, host: &str) -> Failure {
        let headers = answer.response.headers().clone();
        let body = self.discard(answer, self.limits.error_body_limit).await;
        let class = classify_status(code);
        let correction = self.backend.correction(&ErrorResponse {
            status: code,
            headers: &headers,
            body: &body,
        });
        let retry_after = headers
            .get(http::header::RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .and_then(RetryAfter::parse)
            .map(|r| r.wait(std::time::SystemTime::now()));
        let summary = error_body::summary(&body, SUMMARY_CHARS);
        let mut message = if summary.is_empty() {
            format!("the server answered {code} ({host})")
        } else {
            format!("the server answered {code}: {summary} ({host})")
        };
        let hint = self.backend.error_hint(&ErrorResponse {
            status: code,
            headers: &headers,
            body: &body,
        });
        if let Some(hint) = hint {
            message = format!(
                "{message}: {}",
                error_body::summary(hint.as_bytes(), SUMMARY_CHARS)
            );
        }
        let failure_class = match &correction {
            Some(Correction::Reprepare { .. }) => FailureClass::Reprepare,
            Some(Correction::Reauthenticate) => FailureClass::Reauthenticate,
            None if class.retryable => FailureClass::RetryableStatus(code),
            None => FailureClass::Permanent,
        };
        Failure {
            retry_after,
            correction,
            ..Failure::new(
                Error::new(class.status, message).with_http_status(code),
                failure_class,
            )
        }
    }
}
