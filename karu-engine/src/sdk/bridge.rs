//! Running an asynchronous credential SDK (aws-config, gcp_auth, azure_identity) inside a
//! blocking [`CredentialProvider::fetch`](super::CredentialProvider::fetch).
//!
//! Credential lookups run on Karu's credential workers, plain threads where blocking is
//! allowed. An SDK whose lookups are futures runs them here, on one small runtime that every
//! provider shares (one worker thread, started on the first use), so no provider starts its
//! own, and none ever runs on an HTTP event loop. Each lookup is bounded by the deadline of the
//! read that asked for it ([`FetchContext::deadline`]) and, in any case, by [`LOOKUP_LIMIT`];
//! its error chain is formatted without secrets ([`redact::error_chain`]).
//!
//! ```
//! use std::time::{Duration, Instant};
//! use karu_engine::sdk::{FetchContext, Status, bridge};
//!
//! // What a provider's `fetch` does with the context the engine hands it.
//! let ctx = FetchContext::new(Some(Instant::now() + Duration::from_secs(5)));
//! let token = bridge::block_on(&ctx, "the token lookup", async {
//!     Ok::<_, std::io::Error>("t0ken".to_string()) // an SDK's `provide_credentials().await`
//! })?;
//! assert_eq!(token, "t0ken");
//!
//! let failed = bridge::block_on(&ctx, "the token lookup", async {
//!     Err::<(), _>(std::io::Error::other("no profile named x"))
//! });
//! assert_eq!(failed.unwrap_err().status(), Status::Credentials);
//! # Ok::<(), karu_engine::Error>(())
//! ```

use std::future::Future;
use std::time::{Duration, Instant};

use super::redact;
use crate::sdk::credential::FetchContext;
use crate::sdk::process::PerProcess;
use crate::sdk::status::{Error, Status};

/// The longest one lookup may take, whatever the read's deadline (metadata services, STS and
/// token endpoints answer in far less).
pub const LOOKUP_LIMIT: Duration = Duration::from_secs(60);

/// The runtime every bridged lookup runs on, started on the first one in each process (a
/// forked child starts its own: the parent's worker thread is not there, and its I/O driver may
/// be held forever by it).
static RUNTIME: PerProcess<Result<tokio::runtime::Runtime, String>> = PerProcess::empty();

fn runtime() -> Result<&'static tokio::runtime::Runtime, Error> {
    let built = RUNTIME.get_or_build(|| {
        Ok::<_, std::convert::Infallible>(
            tokio::runtime::Builder::new_multi_thread()
                .worker_threads(1)
                .thread_name("karu-credentials")
                .enable_all()
                .build()
                .map_err(|e| e.to_string()),
        )
    });
    let runtime = match built {
        Ok(runtime) => runtime,
        Err(never) => match never {},
    };
    runtime.as_ref().map_err(|e| {
        Error::new(
            Status::Io,
            format!("cannot start the credential runtime: {e}"),
        )
    })
}

/// Run `future`, an SDK's lookup, to its end on the shared credential runtime and return its
/// value; `what` names the lookup in errors (`"the AWS credential lookup"`).
///
/// Errors: the future's own error is [`Status::Credentials`] with its chain, redacted; a
/// lookup still running at the read's deadline is [`Status::TimedOut`] (it is dropped, which
/// cancels it), and one running past [`LOOKUP_LIMIT`] is [`Status::Credentials`]. Called on a
/// thread that is itself running an async runtime, where blocking is not allowed, it refuses
/// with [`Status::Internal`] instead of panicking.
pub fn block_on<T, E, F>(ctx: &FetchContext, what: &str, future: F) -> Result<T, Error>
where
    F: Future<Output = Result<T, E>>,
    E: std::error::Error,
{
    block_on_within(ctx, LOOKUP_LIMIT, what, future)
}

/// When a lookup that starts `now` for `ctx` must end: the read's deadline, or
/// [`LOOKUP_LIMIT`] from now if that is sooner ([`block_on`]'s bound). What a vendor SDK's
/// requests, sent with [`TokenClient::exchange`](crate::sdk::token::TokenClient::exchange),
/// are tried again within.
pub fn lookup_ends(ctx: &FetchContext, now: Instant) -> Instant {
    let limit = crate::sdk::time::instant_after(now, LOOKUP_LIMIT);
    ctx.deadline().map_or(limit, |deadline| deadline.min(limit))
}

/// [`block_on`] with another limit than [`LOOKUP_LIMIT`].
fn block_on_within<T, E, F>(
    ctx: &FetchContext,
    limit: Duration,
    what: &str,
    future: F,
) -> Result<T, Error>
where
    F: Future<Output = Result<T, E>>,
    E: std::error::Error,
{
    if tokio::runtime::Handle::try_current().is_ok() {
        return Err(Error::new(
            Status::Internal,
            format!("{what} was started on an async runtime's thread, where it cannot block"),
        ));
    }
    let now = Instant::now();
    let (budget, by_deadline) = match ctx.deadline() {
        Some(deadline) if deadline.saturating_duration_since(now) < limit => {
            (deadline.saturating_duration_since(now), true)
        }
        _ => (limit, false),
    };
    let result = runtime()?.block_on(async { tokio::time::timeout(budget, future).await });
    match result {
        Ok(Ok(value)) => Ok(value),
        Ok(Err(e)) => Err(Error::new(
            Status::Credentials,
            format!("{what} failed: {}", redact::error_chain(&e)),
        )),
        Err(_) if by_deadline => Err(Error::new(
            Status::TimedOut,
            format!("{what} had not finished at the read's deadline"),
        )),
        Err(_) => Err(Error::new(
            Status::Credentials,
            format!("{what} took longer than {limit:?}"),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug)]
    struct Failed(String);
    impl std::fmt::Display for Failed {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str(&self.0)
        }
    }
    impl std::error::Error for Failed {}

    fn never() -> impl Future<Output = Result<(), Failed>> {
        std::future::pending()
    }

    #[test]
    fn a_value_comes_back_and_the_runtime_is_shared() {
        let ctx = FetchContext::new(None);
        let first = block_on(&ctx, "lookup", async {
            Ok::<_, Failed>(std::thread::current().name().map(str::to_string))
        })
        .unwrap();
        // The future runs on the calling thread; timers and I/O come from the shared runtime.
        assert_eq!(first, std::thread::current().name().map(str::to_string));
        let a = runtime().unwrap() as *const _;
        let b = runtime().unwrap() as *const _;
        assert_eq!(a, b);
    }

    #[test]
    fn an_sdk_error_is_a_redacted_credentials_error() {
        let ctx = FetchContext::new(None);
        let error = block_on(&ctx, "the AWS credential lookup", async {
            Err::<(), _>(Failed(
                "GET http://169.254.169.254/x?X-Amz-Signature=SECRET failed".into(),
            ))
        })
        .unwrap_err();
        assert_eq!(error.status(), Status::Credentials);
        assert!(!error.message().contains("SECRET"), "{error}");
        assert!(
            error
                .message()
                .starts_with("the AWS credential lookup failed")
        );
    }

    #[test]
    fn a_lookup_past_the_reads_deadline_times_out() {
        let ctx = FetchContext::new(Some(Instant::now() + Duration::from_millis(20)));
        let error = block_on(&ctx, "lookup", never()).unwrap_err();
        assert_eq!(error.status(), Status::TimedOut);
        // A deadline already past ends the lookup at once.
        let ctx = FetchContext::new(Some(Instant::now() - Duration::from_secs(1)));
        assert_eq!(
            block_on(&ctx, "lookup", never()).unwrap_err().status(),
            Status::TimedOut
        );
    }

    #[test]
    fn a_lookup_past_the_limit_is_a_credentials_error() {
        let far = FetchContext::new(Some(Instant::now() + Duration::from_secs(3600)));
        for ctx in [FetchContext::new(None), far] {
            let error =
                block_on_within(&ctx, Duration::from_millis(20), "lookup", never()).unwrap_err();
            assert_eq!(error.status(), Status::Credentials, "{error}");
        }
    }

    #[test]
    fn on_an_async_runtime_it_refuses_instead_of_panicking() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let error = rt.block_on(async {
            block_on(&FetchContext::new(None), "lookup", async {
                Ok::<_, Failed>(())
            })
        });
        assert_eq!(error.unwrap_err().status(), Status::Internal);
    }
}
