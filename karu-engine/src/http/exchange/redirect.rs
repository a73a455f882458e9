//! Sending a request and following its redirects to the checked head of the final answer: a
//! location kept for the object replaces the prepared URL (and a failed one falls back to
//! it), each redirect's location is asked with freshly prepared headers, and credentials stay
//! behind once a request leaves its origin.

use std::time::Instant;

use http::header::{LOCATION, USER_AGENT};
use http::{HeaderMap, HeaderValue, Uri};

use super::origin::{host_of, origin_of, strip_credentials};
use super::{Exchange, Failure, HeadReceived, Prepare, Route};
use crate::check::Expectation;
use crate::http::redirects::{Replaced, location_failed};
use crate::retry::FailureClass;
use crate::sdk::{Error, PreparedRequest, Status};

/// Most redirects followed in one attempt.
const MAX_REDIRECTS: usize = 10;

/// The `User-Agent` of a request whose backend set none.
const USER_AGENT_VALUE: &str = concat!("karu/", env!("CARGO_PKG_VERSION"));

impl<'a> Exchange<'a> {
    /// Send a prepared request, follow its redirects and check the head of the final answer
    /// (its status and headers, the batch's version pin, what a redirect said of the object):
    /// an answer whose head passed the checks, its body not yet read, or the failure. Nothing
    /// lands anywhere yet, so of several requests for one range only the one
    /// [landed](Self::land) writes the destination. A redirect asks its location with the
    /// headers of the request prepared `again` (nothing of a request is kept for a redirect
    /// that seldom comes: a copy of its headers would cost every request).
    ///
    /// A caller whose own timer wakes its task `polled_by` some instant (a request that may be
    /// hedged, see [`hedging`](crate::http::hedging)) polls this exchange again by then: until then
    /// the exchange registers no timer of its own that is due later.
    pub(crate) async fn head(
        &self,
        request: PreparedRequest,
        again: &Prepare<'_>,
        expect: &Expectation<'_>,
        route: Route,
        polled_by: Option<Instant>,
    ) -> Result<HeadReceived<'a>, Failure> {
        // A location kept for this object replaces the prepared URL. Its key is built here
        // only if there may be one to find; otherwise at the first redirect, to keep it.
        let mut key = self.location_key_if_kept(&request);
        let PreparedRequest {
            mut url,
            mut headers,
            options,
            ..
        } = request;
        // The prepared URL's origin, built when a request leaves it.
        let mut origin: Option<String> = None;
        let mut replaced = None;
        // Ends this request's flight, if it leads one, when the exchange ends however it ends.
        let mut leading = None;
        // Whether the request left the prepared origin: its credentials stay behind from then
        // on, wherever a redirect goes next.
        let mut stripped = false;
        if let (Some(reuse), Some(key)) = (self.reuse, &key) {
            let mut kept = reuse.locations.lock().poll_location(key, Instant::now());
            // A duplicate never joins a flight: it may be its own original's.
            if kept.is_none() && options.resolve_once && route == Route::Any {
                let (location, lead) = Box::pin(self.join_flight(reuse, key)).await?;
                kept = location;
                leading = lead;
            }
            if let Some(location) = kept {
                tracing::debug!(host = %host_of(&location), "reusing a redirect location");
                let prepared = std::mem::replace(&mut url, location);
                let prepared_origin = origin.insert(origin_of(&prepared));
                replaced = Some(Replaced {
                    url: prepared,
                    headers: headers.clone(),
                });
                if origin_of(&url) != *prepared_origin {
                    strip_credentials(&mut headers, &options.sensitive_headers);
                    stripped = true;
                }
            }
        }
        let mut redirected = false;
        // The last redirect's headers: what it said about the object, checked against the end.
        let mut linked: Option<HeaderMap> = None;
        // A duplicate (hedging) is counted as one at its first request, not at each hop.
        let mut duplicate = route == Route::Fresh;
        for _hop in 0..=MAX_REDIRECTS {
            let host = host_of(&url);
            // Karu's own `User-Agent` unless the backend set one (or a redirect to another
            // origin stripped it as a configured header).
            if !headers.contains_key(USER_AGENT) {
                headers.insert(USER_AGENT, HeaderValue::from_static(USER_AGENT_VALUE));
            }
            let sent = std::mem::take(&mut headers);
            // Low-speed protection counts from the request: waiting for the head counts.
            let sent_at = Instant::now();
            let speed = self.low_speed(sent_at);
            let answer = self
                .send(
                    url.clone(),
                    sent,
                    host,
                    &speed,
                    route,
                    std::mem::take(&mut duplicate),
                    polled_by,
                )
                .await?;
            let status = answer.response.status().as_u16();
            tracing::debug!(
                target: "karu::http",
                status,
                ms = sent_at.elapsed().as_micros() as f64 / 1000.0,
                "response"
            );
            if location_failed(status)
                && let Some(back) = replaced.take()
            {
                // The reused location expired or was revoked: back to the prepared URL, once.
                tracing::debug!(status, "a reused location failed; asking the prepared URL");
                Box::pin(self.discard(answer, 0)).await;
                if let (Some(reuse), Some(key)) = (self.reuse, &key) {
                    reuse.locations.lock().forget(key);
                }
                url = back.url;
                headers = back.headers;
                continue;
            }
            if options.follow_redirects && is_redirect(status) {
                let Some(next) = redirect_target(&url, answer.response.headers()) else {
                    return Err(Failure::new(
                        Error::new(
                            Status::Protocol,
                            format!("a {status} redirect without a usable Location ({host})"),
                        ),
                        FailureClass::Permanent,
                    ));
                };
                headers = again()
                    .map_err(|error| Failure::new(error, FailureClass::Permanent))?
                    .headers;
                if !redirected && key.is_none() {
                    // Still the prepared URL and headers: the key to keep the location under.
                    key = self.location_key(&url, &headers, &options);
                }
                linked = Some(answer.response.headers().clone());
                Box::pin(self.discard(answer, 0)).await;
                let prepared_origin = origin.get_or_insert_with(|| origin_of(&url));
                stripped |= origin_of(&next) != *prepared_origin;
                if stripped {
                    // Credentials never follow a redirect to another origin.
                    strip_credentials(&mut headers, &options.sensitive_headers);
                }
                url = next;
                redirected = true;
                continue;
            }
            let outcome = self.check(answer, expect, host, linked.as_ref()).await?;
            let keep = match (self.reuse, key) {
                (Some(reuse), Some(key)) if redirected => Some((reuse, key)),
                _ => None,
            };
            return Ok(HeadReceived {
                outcome,
                url,
                speed,
                keep,
                _leading: leading,
            });
        }
        Err(Failure::new(
            Error::new(
                Status::Protocol,
                format!("more than {MAX_REDIRECTS} redirects ({})", host_of(&url)),
            ),
            FailureClass::Permanent,
        ))
    }
}

fn is_redirect(status: u16) -> bool {
    matches!(status, 301 | 302 | 303 | 307 | 308)
}

fn redirect_target(base: &Uri, headers: &HeaderMap) -> Option<Uri> {
    let location = headers.get(LOCATION)?.to_str().ok()?;
    let base = url::Url::parse(&base.to_string()).ok()?;
    let next = base.join(location).ok()?;
    if !matches!(next.scheme(), "http" | "https") {
        return None;
    }
    next.as_str().parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redirect_targets() {
        let base: Uri = "http://h/a/b?sig=1".parse().unwrap();
        let mut headers = HeaderMap::new();
        headers.insert(LOCATION, "../c".parse().unwrap());
        assert_eq!(
            redirect_target(&base, &headers).unwrap().to_string(),
            "http://h/c"
        );
        headers.insert(LOCATION, "https://other/x".parse().unwrap());
        assert_eq!(
            redirect_target(&base, &headers).unwrap().to_string(),
            "https://other/x"
        );
        headers.insert(LOCATION, "ftp://other/x".parse().unwrap());
        assert!(redirect_target(&base, &headers).is_none());
    }
}
