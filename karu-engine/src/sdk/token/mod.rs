//! The credential-exchange kit: what a provider needs to turn a secret it found (a service
//! account's key, a client secret, a refresh token, a managed identity) into an access token.
//!
//! - [`TokenRequest`]: the request, a `GET` or a `POST` of a [`form`];
//! - [`TokenClient`]: the HTTP client it is sent with. The engine builds one per Karu client
//!   from the client's configuration, the same TLS setup as reads (the platform's roots plus
//!   `http.ca_file`, aws-lc-rs), the connect timeout and the DNS cache, with connections kept
//!   and reused, and hands it to every lookup in its [`FetchContext`];
//! - [`fetch_token`]: send a request with it on the credential runtime ([`bridge`]), bounded
//!   by the read's deadline and tried again under the client's retry policy after a failure
//!   another attempt may not meet ([`TokenClient::exchange`]: a `429`, a `5xx`, a reset), and
//!   read the answer with [`parse_answer`] (every form of lifetime Google and Entra ID send)
//!   into an [`AccessToken`]; a refusal's OAuth `error` and `error_description` are quoted,
//!   redacted;
//! - [`Rs256Key`]: the RS256 signer of JWT assertions.
//!
//! ```
//! use std::sync::Arc;
//! use karu_engine::sdk::token::{
//!     SendFuture, TokenClient, TokenReply, TokenRequest, fetch_token,
//! };
//! use karu_engine::sdk::FetchContext;
//!
//! /// A token endpoint that answers every request with one token (the engine's client sends
//! /// them over HTTP).
//! #[derive(Debug)]
//! struct Answers;
//! impl TokenClient for Answers {
//!     fn send(&self, _request: TokenRequest) -> SendFuture<'_> {
//!         Box::pin(async {
//!             Ok(TokenReply {
//!                 status: 200,
//!                 headers: Default::default(),
//!                 body: r#"{"access_token":"t0k","expires_in":60}"#.into(),
//!             })
//!         })
//!     }
//! }
//!
//! let ctx = FetchContext::new(None).with_token_client(Arc::new(Answers));
//! let request = TokenRequest::post_form(
//!     "https://login.example/tenant/oauth2/v2.0/token",
//!     &[("grant_type", "client_credentials"), ("client_secret", "s3cret")],
//! );
//! let token = fetch_token(&ctx, "the client-secret token request", request)?;
//! assert_eq!(token.token, "t0k");
//! assert!(token.expires.is_some());
//! # Ok::<(), karu_engine::Error>(())
//! ```
//!
//! [`bridge`]: crate::sdk::bridge
//! [`FetchContext`]: crate::sdk::FetchContext

mod answer;
mod client;
mod form;
mod jwt;

use std::convert::Infallible;
use std::time::{Instant, SystemTime};

pub use answer::{AccessToken, AnswerError, parse_answer};
pub use client::{BoxError, SendFuture, TOKEN_ANSWER_MAX, TokenClient, TokenReply, TokenRequest};
pub use form::form;
pub use jwt::{JwtError, Rs256Key};

use crate::sdk::credential::FetchContext;
use crate::sdk::status::{Error, Status};
use crate::sdk::{bridge, error_body, redact};

/// The most bytes of a refusal quoted in an error.
const QUOTED: usize = 512;

/// Why an exchange failed. Messages never hold a secret: addresses are shown without their
/// query, answers are summarised through [`redact::text`], and no request body is formatted.
#[derive(Debug, thiserror::Error)]
enum ExchangeError {
    #[error("no token client was given to this credential lookup")]
    NoClient,
    #[error("at {url}")]
    Transport {
        url: String,
        #[source]
        source: BoxError,
    },
    #[error("at {url} answered {status}: {message}")]
    Refused {
        url: String,
        status: u16,
        message: String,
    },
    #[error("at {url}")]
    Answer {
        url: String,
        #[source]
        source: AnswerError,
    },
}

/// Send `request` with the token client of `ctx`, on the credential runtime and bounded by
/// the read's deadline ([`bridge::block_on`]), tried again as the client's retry policy allows
/// ([`TokenClient::exchange`]) within the same bound, and parse the answer; `what` names the
/// exchange in errors (`"the service-account token exchange"`).
///
/// Errors are [`Status::Credentials`] (or [`Status::TimedOut`] at the read's deadline): a
/// transport failure with its cause (its source chain is the error's, so an untrusted
/// certificate is there as rustls reported it, and the message names `http.ca_file`), a
/// status other than 2xx with the endpoint's OAuth `error: error_description` (or its JSON
/// message, or a summary), redacted, and an answer that holds no token. When the exchange
/// was tried again, the error is the last attempt's.
pub fn fetch_token(
    ctx: &FetchContext,
    what: &str,
    request: TokenRequest,
) -> Result<AccessToken, Error> {
    let client = ctx.token_client();
    let until = bridge::lookup_ends(ctx, Instant::now());
    // The exchange's own failure comes back as a value, so the error keeps it as its source.
    let outcome = bridge::block_on(ctx, what, async move {
        Ok::<_, Infallible>(exchange(client.as_deref(), request, until).await)
    })?;
    outcome.map_err(|e| {
        Error::new(
            Status::Credentials,
            format!("{what} failed: {}", redact::error_chain(&e)),
        )
        .with_source(e)
    })
}

async fn exchange(
    client: Option<&dyn TokenClient>,
    request: TokenRequest,
    until: Instant,
) -> Result<AccessToken, ExchangeError> {
    let client = client.ok_or(ExchangeError::NoClient)?;
    let url = redact::address(request.url());
    let reply = client
        .exchange(request, Some(until))
        .await
        .map_err(|source| ExchangeError::Transport {
            url: url.clone(),
            source,
        })?;
    if !(200..300).contains(&reply.status) {
        return Err(ExchangeError::Refused {
            url,
            status: reply.status,
            message: refusal(&reply.body),
        });
    }
    parse_answer(&reply.body, SystemTime::now())
        .map_err(|source| ExchangeError::Answer { url, source })
}

/// What a refusal says: OAuth's `error` and `error_description`, else a JSON error message,
/// else the start of the body; redacted.
fn refusal(body: &[u8]) -> String {
    let text = String::from_utf8_lossy(&body[..body.len().min(TOKEN_ANSWER_MAX)]);
    let oauth = serde_json::from_slice::<serde_json::Value>(body)
        .ok()
        .and_then(|v| {
            let code = v.get("error").and_then(|e| e.as_str());
            let description = v.get("error_description").and_then(|d| d.as_str());
            match (code, description) {
                (Some(code), Some(d)) => Some(format!("{code}: {d}")),
                (None, Some(d)) => Some(d.to_string()),
                (Some(code), None) => Some(code.to_string()),
                (None, None) => None,
            }
        });
    let message = oauth
        .or_else(|| error_body::json_message(&text))
        .unwrap_or_else(|| {
            let start: String = text.chars().take(QUOTED).collect();
            if start.trim().is_empty() {
                "an empty body".into()
            } else {
                start
            }
        });
    redact::text(&message)
}

/// An error of a lookup that could not build its request (a key that does not sign, a file
/// that does not parse): [`Status::Credentials`] with `what` and the reason.
pub fn lookup_failed(what: &str, why: impl std::fmt::Display) -> Error {
    Error::new(Status::Credentials, format!("{what} failed: {why}"))
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use bytes::Bytes;
    use parking_lot::Mutex;

    use super::*;

    /// Answers with `reply`, or fails with `error`, and records what it was sent.
    #[derive(Debug, Default)]
    struct Scripted {
        reply: Option<(u16, &'static str)>,
        sent: Mutex<Vec<TokenRequest>>,
    }

    impl TokenClient for Scripted {
        fn send(&self, request: TokenRequest) -> SendFuture<'_> {
            self.sent.lock().push(request);
            let reply = self.reply;
            Box::pin(async move {
                match reply {
                    Some((status, body)) => Ok(TokenReply {
                        status,
                        headers: Default::default(),
                        body: Bytes::from_static(body.as_bytes()),
                    }),
                    None => Err(BoxError::from(std::io::Error::other(
                        "connection refused by https://h/t?sig=SECRET",
                    ))),
                }
            })
        }
    }

    fn run(client: Scripted) -> (Result<AccessToken, Error>, Arc<Scripted>) {
        let client = Arc::new(client);
        let ctx = FetchContext::new(None).with_token_client(client.clone());
        let request = TokenRequest::post_form("https://h/t?code=SECRET", &[("secret", "SECRET")]);
        (fetch_token(&ctx, "the test exchange", request), client)
    }

    #[test]
    fn a_token_comes_back() {
        let (token, client) = run(Scripted {
            reply: Some((200, r#"{"access_token":"t","expires_in":10}"#)),
            ..Scripted::default()
        });
        assert_eq!(token.unwrap().token, "t");
        let sent = client.sent.lock();
        assert_eq!(sent.len(), 1);
        assert_eq!(sent[0].body(), Some("secret=SECRET"));
    }

    #[test]
    fn failures_are_credentials_errors_without_secrets() {
        for (reply, quoted) in [
            (
                Some((
                    400,
                    r#"{"error":"invalid_client","error_description":"bad secret for https://h/?sig=SECRET"}"#,
                )),
                Some("invalid_client: bad secret"),
            ),
            (
                Some((403, r#"{"error":{"message":"denied"}}"#)),
                Some("denied"),
            ),
            (Some((500, "")), Some("an empty body")),
            (Some((200, r#"{"access_token":""}"#)), None),
            (None, None),
        ] {
            let (result, _) = run(Scripted {
                reply,
                ..Scripted::default()
            });
            let error = result.unwrap_err();
            assert_eq!(error.status(), Status::Credentials);
            assert!(!error.message().contains("SECRET"), "{error}");
            if let Some(quoted) = quoted {
                assert!(error.message().contains(quoted), "{error}");
            }
        }
    }

    /// Records the deadline each exchange is given, and answers with a token.
    #[derive(Debug, Default)]
    struct Deadlines(Mutex<Vec<Option<std::time::Instant>>>);

    impl TokenClient for Deadlines {
        fn send(&self, _request: TokenRequest) -> SendFuture<'_> {
            unreachable!("fetch_token sends through exchange")
        }

        fn exchange(
            &self,
            _request: TokenRequest,
            deadline: Option<std::time::Instant>,
        ) -> SendFuture<'_> {
            self.0.lock().push(deadline);
            Box::pin(async {
                Ok(TokenReply {
                    status: 200,
                    headers: Default::default(),
                    body: Bytes::from_static(br#"{"access_token":"t","expires_in":10}"#),
                })
            })
        }
    }

    #[test]
    fn an_exchange_is_told_when_its_lookup_must_end() {
        use std::time::{Duration, Instant};
        let client = Arc::new(Deadlines::default());
        let soon = Instant::now() + Duration::from_secs(5);
        let far = Instant::now() + Duration::from_secs(3600);
        for deadline in [Some(soon), Some(far), None] {
            let before = Instant::now();
            let ctx = FetchContext::new(deadline).with_token_client(client.clone());
            let token = fetch_token(&ctx, "x", TokenRequest::get("http://h/t")).unwrap();
            assert_eq!(token.token, "t");
            let told = client.0.lock().pop().flatten().expect("a deadline");
            match deadline {
                // The read's deadline when it comes first...
                Some(d) if d == soon => assert_eq!(told, soon),
                // ...else the bridge's limit on every lookup.
                _ => assert!(
                    (before + bridge::LOOKUP_LIMIT..=Instant::now() + bridge::LOOKUP_LIMIT)
                        .contains(&told)
                ),
            }
        }
    }

    #[test]
    fn a_lookup_without_a_client_fails() {
        let ctx = FetchContext::new(None);
        let error = fetch_token(&ctx, "x", TokenRequest::get("http://h/t")).unwrap_err();
        assert_eq!(error.status(), Status::Credentials);
    }
}
