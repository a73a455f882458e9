//! The answer of a token endpoint or a metadata server: an OAuth 2 access token and how long
//! it lives, in every form the services Karu reads from send it.
//!
//! `access_token` is a non-empty string. The lifetime is `expires_on` (seconds since the Unix
//! epoch: Azure's managed identities) if present, else `expires_in` (seconds from the answer:
//! OAuth 2, Google, Entra ID), each a JSON number or a string of digits (Azure sends both as
//! strings). Neither: the token has no stated expiry (OAuth 2 only recommends `expires_in`),
//! and Karu uses it until a `401` asks for another. A lifetime the clock cannot hold is 100
//! years ([`system_time_after`]); one that is present but not a whole number of seconds makes
//! the answer unusable.

use std::fmt;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::sdk::time::system_time_after;

/// An access token and when it expires. Its `Debug` shows the expiry only.
#[derive(Clone, PartialEq, Eq)]
pub struct AccessToken {
    /// The token, sent as `Authorization: Bearer …`.
    pub token: String,
    /// When it stops being valid, if the answer said.
    pub expires: Option<SystemTime>,
}

impl fmt::Debug for AccessToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AccessToken")
            .field("expires", &self.expires)
            .finish_non_exhaustive()
    }
}

/// Why an answer holds no usable token.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum AnswerError {
    /// The body is not a JSON object.
    #[error("the answer is not a JSON object")]
    NotJson,
    /// No `access_token`, or an empty one.
    #[error("the answer holds no access_token")]
    NoToken,
    /// `expires_on` or `expires_in` is not a whole number of seconds.
    #[error("the answer's {0} is not a whole number of seconds")]
    Lifetime(&'static str),
}

/// The token in `body`, an answer received at `received`.
///
/// ```
/// use std::time::{Duration, SystemTime};
/// use karu_engine::sdk::token::parse_answer;
///
/// let at = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000);
/// let a = parse_answer(br#"{"access_token":"ya29.x","expires_in":3599}"#, at)?;
/// assert_eq!(a.expires, Some(at + Duration::from_secs(3599)));
/// let b = parse_answer(br#"{"access_token":"t","expires_in":"60","expires_on":"5000"}"#, at)?;
/// assert_eq!(b.expires, Some(SystemTime::UNIX_EPOCH + Duration::from_secs(5000)));
/// # Ok::<(), karu_engine::sdk::token::AnswerError>(())
/// ```
pub fn parse_answer(body: &[u8], received: SystemTime) -> Result<AccessToken, AnswerError> {
    let value: serde_json::Value =
        serde_json::from_slice(body).map_err(|_| AnswerError::NotJson)?;
    let object = value.as_object().ok_or(AnswerError::NotJson)?;
    let token = object
        .get("access_token")
        .and_then(|t| t.as_str())
        .filter(|t| !t.is_empty())
        .ok_or(AnswerError::NoToken)?;
    let seconds = |name: &'static str| -> Result<Option<u64>, AnswerError> {
        match object.get(name) {
            None | Some(serde_json::Value::Null) => Ok(None),
            Some(v) => v
                .as_u64()
                .or_else(|| {
                    let text = v.as_str()?.trim();
                    // Digits only: `u64::from_str` would take a leading `+`.
                    text.bytes()
                        .all(|b| b.is_ascii_digit())
                        .then(|| text.parse().ok())
                        .flatten()
                })
                .map(Some)
                .ok_or(AnswerError::Lifetime(name)),
        }
    };
    let expires = match (seconds("expires_on")?, seconds("expires_in")?) {
        (Some(on), _) => Some(system_time_after(UNIX_EPOCH, Duration::from_secs(on))),
        (None, Some(secs)) => Some(system_time_after(received, Duration::from_secs(secs))),
        (None, None) => None,
    };
    Ok(AccessToken {
        token: token.to_string(),
        expires,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sdk::FOREVER;

    fn at() -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(1_000)
    }

    #[test]
    fn every_form_of_the_lifetime() {
        let t = at();
        let cases: [(&[u8], Option<SystemTime>); 6] = [
            (
                br#"{"access_token":"t","expires_in":3599,"token_type":"Bearer"}"#,
                Some(t + Duration::from_secs(3599)),
            ),
            (
                br#"{"access_token":"t","expires_in":"3599"}"#,
                Some(t + Duration::from_secs(3599)),
            ),
            (
                br#"{"access_token":"t","expires_on":5000}"#,
                Some(UNIX_EPOCH + Duration::from_secs(5000)),
            ),
            // expires_on wins over expires_in.
            (
                br#"{"access_token":"t","expires_in":"60","expires_on":"5000"}"#,
                Some(UNIX_EPOCH + Duration::from_secs(5000)),
            ),
            (br#"{"access_token":"t"}"#, None),
            (br#"{"access_token":"t","expires_in":null}"#, None),
        ];
        for (body, expires) in cases {
            let answer = parse_answer(body, t).unwrap();
            assert_eq!(answer.token, "t");
            assert_eq!(answer.expires, expires, "{}", String::from_utf8_lossy(body));
        }
    }

    #[test]
    fn unusable_answers() {
        let cases: [(&[u8], AnswerError); 8] = [
            (b"<html>", AnswerError::NotJson),
            (b"[1]", AnswerError::NotJson),
            (br#"{"expires_in":1}"#, AnswerError::NoToken),
            (
                br#"{"access_token":"","expires_in":1}"#,
                AnswerError::NoToken,
            ),
            (br#"{"access_token":7}"#, AnswerError::NoToken),
            (
                br#"{"access_token":"t","expires_in":"NaN"}"#,
                AnswerError::Lifetime("expires_in"),
            ),
            (
                br#"{"access_token":"t","expires_in":-5}"#,
                AnswerError::Lifetime("expires_in"),
            ),
            (
                br#"{"access_token":"t","expires_on":"+5"}"#,
                AnswerError::Lifetime("expires_on"),
            ),
        ];
        for (body, error) in cases {
            assert_eq!(parse_answer(body, at()), Err(error));
        }
    }

    /// A lifetime past what the clock holds is 100 years, not a panic on the worker.
    #[test]
    fn a_lifetime_past_the_clock_is_a_hundred_years() {
        let now = SystemTime::now();
        let max = u64::MAX;
        for (body, expires) in [
            (
                format!(r#"{{"access_token":"t","expires_in":{max}}}"#),
                now + FOREVER,
            ),
            (
                format!(r#"{{"access_token":"t","expires_in":"{max}"}}"#),
                now + FOREVER,
            ),
            (
                format!(r#"{{"access_token":"t","expires_on":{max}}}"#),
                UNIX_EPOCH + FOREVER,
            ),
        ] {
            let answer = parse_answer(body.as_bytes(), now).unwrap();
            assert_eq!(answer.expires, Some(expires), "{body}");
        }
    }

    #[test]
    fn debug_hides_the_token() {
        let a = parse_answer(br#"{"access_token":"ya29.SECRET"}"#, at()).unwrap();
        assert!(!format!("{a:?}").contains("SECRET"));
    }
}
