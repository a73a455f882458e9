//! Answers one request: logs it, applies the fault plan and the gate, then serves the object
//! like a real server (ranges, `If-Match`, ETags).

use std::convert::Infallible;
use std::io::Write as _;
use std::sync::Arc;
use std::sync::atomic::{AtomicU16, AtomicU64, Ordering};

use bytes::Bytes;
use http::header::{self, HeaderName, HeaderValue};
use http::{HeaderMap, Method, Request, Response, StatusCode};
use http_body_util::BodyExt;

use super::barrier::Ticket;
use super::body::{BodyPlan, MockBody, Source, Stop};
use super::conn::ConnShared;
use super::fault::Fault;
use super::pattern::pattern;
use super::range::{self, RangeSpec, Resolved};
use super::state::{Data, LiveRecord, RecordedHeaders, Shared};
use super::{GateResponse, MAX_REQUEST_BODY, RequestHead};

/// Source of the ids in error answers (`<RequestId>`, `x-amz-request-id`).
static REQUEST_IDS: AtomicU64 = AtomicU64::new(0);

/// A new request id for an error answer: 16 upper-case hex digits, unique in the process.
pub(crate) fn request_id() -> String {
    format!(
        "4B415255{:08X}",
        REQUEST_IDS.fetch_add(1, Ordering::Relaxed) + 1
    )
}

/// What every response of one request needs.
struct Ctx {
    shared: Arc<Shared>,
    conn: Arc<ConnShared>,
    record: Arc<LiveRecord>,
    head: bool,
    /// The request came over HTTP/1 (a close-delimited body is possible).
    http1: bool,
}

impl Ctx {
    /// Finishes a response: status and `Content-Length` set (none for a close-delimited body,
    /// which goes out as HTTP/1.0), status logged, body attached (none for HEAD).
    fn respond(
        &self,
        status: StatusCode,
        mut headers: HeaderMap,
        plan: BodyPlan,
    ) -> Response<MockBody> {
        let close_delimited = plan.close_delimited && !self.head && plan.len > 0;
        if !close_delimited {
            headers.insert(header::CONTENT_LENGTH, HeaderValue::from(plan.len));
        }
        self.record.status.store(status.as_u16(), Ordering::Release);
        let body = if self.head || plan.len == 0 {
            MockBody::empty(self.shared.clone(), self.conn.clone(), self.record.clone())
        } else {
            MockBody::new(
                plan,
                self.shared.clone(),
                self.conn.clone(),
                self.record.clone(),
            )
        };
        let mut response = Response::new(body);
        *response.status_mut() = status;
        *response.headers_mut() = headers;
        if close_delimited && self.http1 {
            // hyper frames an HTTP/1.0 response of unknown length by closing the connection.
            *response.version_mut() = http::Version::HTTP_10;
        }
        response
    }

    /// A small S3-style XML error.
    fn error(
        &self,
        status: StatusCode,
        code: &str,
        message: &str,
        headers: HeaderMap,
    ) -> Response<MockBody> {
        self.error_with(status, code, message, "", headers)
    }

    /// A small S3-style XML error with `extra` elements (already escaped) after the message.
    fn error_with(
        &self,
        status: StatusCode,
        code: &str,
        message: &str,
        extra: &str,
        mut headers: HeaderMap,
    ) -> Response<MockBody> {
        let id = request_id();
        let body = format!(
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>{code}</Code><Message>{message}</Message>{extra}<Resource>{}</Resource><RequestId>{id}</RequestId></Error>\n",
            quick_xml::escape::escape(self.record.path.as_str())
        );
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/xml"),
        );
        if let Ok(value) = HeaderValue::from_str(&id) {
            headers.insert(HeaderName::from_static("x-amz-request-id"), value);
        }
        self.respond(status, headers, BodyPlan::bytes(Bytes::from(body)))
    }
}

fn status_code(code: u16) -> StatusCode {
    StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR)
}

/// Moves a range bound by `shift`, clamped to `0..=u64::MAX`.
fn shifted(x: u64, shift: i64) -> u64 {
    if shift >= 0 {
        x.saturating_add(shift.unsigned_abs())
    } else {
        x.saturating_sub(shift.unsigned_abs())
    }
}

/// The entity tags of an `If-Match` value: `*`, `"x"` or `W/"x"`, comma separated.
fn entity_tags(value: &str) -> Vec<&str> {
    let mut tags = Vec::new();
    let mut rest = value;
    loop {
        rest = rest.trim_start_matches(|c: char| c == ',' || c.is_ascii_whitespace());
        if rest.is_empty() {
            return tags;
        }
        let quoted_from = if rest.starts_with("W/\"") {
            2
        } else if rest.starts_with('"') {
            0
        } else {
            // `*` or a malformed token: up to the next comma.
            let end = rest.find(',').unwrap_or(rest.len());
            tags.push(rest[..end].trim());
            rest = &rest[end..];
            continue;
        };
        let end = rest[quoted_from + 1..]
            .find('"')
            .map_or(rest.len(), |i| quoted_from + 1 + i + 1);
        tags.push(&rest[..end]);
        rest = &rest[end..];
    }
}

/// RFC 9110 §13.1.1: `If-Match` passes on `*` for an existing object, or on a strong match.
fn if_match_passes(values: &[&str], etag: Option<&str>) -> bool {
    let strong = |t: &str| t.starts_with('"') && t.len() >= 2 && t.ends_with('"');
    values
        .iter()
        .flat_map(|v| entity_tags(v))
        .any(|tag| tag == "*" || etag.is_some_and(|e| strong(e) && strong(tag) && e == tag))
}

fn gzip(data: &[u8]) -> Bytes {
    let mut encoder = flate2::write::GzEncoder::new(
        Vec::with_capacity(data.len() / 2 + 64),
        flate2::Compression::fast(),
    );
    encoder
        .write_all(data)
        .and_then(|()| encoder.finish())
        .map(Bytes::from)
        .unwrap_or_else(|e| panic!("karu-testkit: gzip into memory failed: {e}"))
}

/// Sets the stop and trickle of a body plan from the body faults of a request.
fn apply_body_faults(plan: &mut BodyPlan, faults: &[Fault]) {
    for fault in faults {
        match fault {
            Fault::CutBodyAfter(n) if plan.stop.is_none() => plan.stop = Some((*n, Stop::Cut)),
            Fault::ResetAfter(n) if plan.stop.is_none() => plan.stop = Some((*n, Stop::Reset)),
            Fault::Trickle { chunk, interval } if plan.trickle.is_none() => {
                plan.trickle = Some((*chunk, *interval));
            }
            Fault::CloseDelimited => plan.close_delimited = true,
            _ => {}
        }
    }
}

/// Why a request body could not be read.
enum BodyError {
    /// Longer than [`MAX_REQUEST_BODY`].
    TooLarge,
    /// The client sent a broken body or went away.
    Failed,
}

/// How much of an oversized body is read and dropped before answering 413, so the client
/// is not reset while it is still sending (closing a socket with unread data sends an RST).
const DRAIN_LIMIT: usize = 16 << 20;

/// Reads the whole request body, up to [`MAX_REQUEST_BODY`] bytes.
async fn read_body<B>(body: B) -> Result<Bytes, BodyError>
where
    B: hyper::body::Body<Data = Bytes>,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let mut body = std::pin::pin!(body);
    let mut kept = bytes::BytesMut::new();
    let mut seen = 0usize;
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|_| BodyError::Failed)?;
        let Ok(data) = frame.into_data() else {
            continue; // trailers
        };
        seen = seen.saturating_add(data.len());
        if seen <= MAX_REQUEST_BODY {
            kept.extend_from_slice(&data);
        } else if seen > DRAIN_LIMIT {
            break;
        }
    }
    if seen > MAX_REQUEST_BODY {
        return Err(BodyError::TooLarge);
    }
    Ok(kept.freeze())
}

fn gate_response(ctx: &Ctx, reply: GateResponse) -> Response<MockBody> {
    gate_response_with(ctx, reply, &[])
}

/// Sends a gate's or route's answer, with the body faults in `faults` applied.
fn gate_response_with(ctx: &Ctx, reply: GateResponse, faults: &[Fault]) -> Response<MockBody> {
    let mut headers = HeaderMap::new();
    for (name, value) in &reply.headers {
        match (
            HeaderName::from_bytes(name.as_bytes()),
            HeaderValue::from_str(value),
        ) {
            (Ok(name), Ok(value)) if name != header::CONTENT_LENGTH => {
                headers.append(name, value);
            }
            _ => tracing::warn!(%name, "karu-testkit: gate header skipped"),
        }
    }
    let mut plan = BodyPlan::bytes(reply.body);
    apply_body_faults(&mut plan, faults);
    ctx.respond(status_code(reply.status), headers, plan)
}

/// The hyper service of the mock server.
pub(crate) async fn handle<B>(
    shared: Arc<Shared>,
    conn: Arc<ConnShared>,
    request: Request<B>,
) -> Result<Response<MockBody>, Infallible>
where
    B: hyper::body::Body<Data = Bytes>,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let last = conn.count_request(shared.requests_per_connection());
    let (parts, body) = request.into_parts();
    let method = parts.method.as_str().to_owned();
    let path = parts.uri.path().to_owned();
    // In flight from here: before the request's barrier ticket is taken, so a round's last
    // arrival counts while the others are still held.
    let mut in_flight = shared.begin_request();
    let (faults, ticket) = shared.select_faults(&method, &path, &parts.headers);
    let fault = (!faults.is_empty()).then(|| {
        faults
            .iter()
            .map(|f| format!("{f:?}"))
            .collect::<Vec<_>>()
            .join(" + ")
    });
    let range = parts
        .headers
        .get(header::RANGE)
        .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned());
    let record = Arc::new(LiveRecord {
        byte_range: range.as_deref().and_then(range::closed),
        range,
        method,
        path,
        query: parts.uri.query().map(str::to_owned),
        headers: RecordedHeaders::of(&parts.headers),
        connection: conn.id,
        fault,
        status: AtomicU16::new(0),
        body_bytes: AtomicU64::new(0),
        latency_nanos: AtomicU64::new(0),
        paced_bytes: AtomicU64::new(0),
    });
    let throttled = faults.iter().find_map(|f| match f {
        Fault::ThrottleAbove { limit, code } if !in_flight.serve_within(*limit) => Some(*code),
        _ => None,
    });
    shared.log(record.clone());
    let ctx = Ctx {
        head: parts.method == Method::HEAD,
        http1: parts.version <= http::Version::HTTP_11,
        shared: Arc::clone(&shared),
        conn,
        record,
    };
    let mut response = answer(&ctx, &parts.headers, body, &faults, throttled, ticket).await;
    if last && ctx.http1 {
        // The connection's last answer says so (HTTP/2 sends GOAWAY instead).
        response
            .headers_mut()
            .insert(header::CONNECTION, HeaderValue::from_static("close"));
    }
    response.body_mut().hold(in_flight);
    Ok(response)
}

async fn answer<B>(
    ctx: &Ctx,
    request_headers: &HeaderMap,
    body: B,
    faults: &[Fault],
    throttled: Option<u16>,
    ticket: Option<Ticket<'_>>,
) -> Response<MockBody>
where
    B: hyper::body::Body<Data = Bytes>,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let has = |wanted: &Fault| faults.contains(wanted);
    let record = &ctx.record;

    let mut delay = ctx.shared.latency();
    for fault in faults {
        if let Fault::Latency(extra) = fault {
            delay += *extra;
        }
    }
    ctx.shared.delay(record, delay).await;
    if has(&Fault::NeverAnswer) {
        std::future::pending::<()>().await;
    }
    match throttled {
        Some(503) => {
            return ctx.error(
                StatusCode::SERVICE_UNAVAILABLE,
                "SlowDown",
                "Please reduce your request rate.",
                HeaderMap::new(),
            );
        }
        Some(code) => {
            let mut headers = HeaderMap::new();
            headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("text/plain"));
            let body = format!("karu-testkit: too many requests in flight ({code})\n");
            return ctx.respond(status_code(code), headers, BodyPlan::bytes(body.into()));
        }
        None => {}
    }

    let body = match read_body(body).await {
        Ok(body) => body,
        Err(BodyError::TooLarge) => {
            return ctx.error(
                StatusCode::PAYLOAD_TOO_LARGE,
                "EntityTooLarge",
                "Your proposed upload exceeds the maximum allowed size.",
                HeaderMap::new(),
            );
        }
        Err(BodyError::Failed) => {
            return ctx.error(
                StatusCode::BAD_REQUEST,
                "IncompleteBody",
                "You did not provide the number of bytes specified by the Content-Length HTTP header.",
                HeaderMap::new(),
            );
        }
    };
    let gate = ctx.shared.gate();
    let route = ctx.shared.route();
    let head = (gate.is_some() || route.is_some()).then(|| RequestHead {
        method: record.method.clone(),
        path: record.path.clone(),
        query: record.query.clone(),
        headers: record.headers.pairs(),
        body,
    });
    let mut object_path = None;
    let mut object_headers = Vec::new();
    if let (Some(gate), Some(head)) = (&gate, &head) {
        if let Some(reply) = gate.check(head) {
            return gate_response(ctx, reply);
        }
        object_path = gate.object_path(head);
        object_headers = gate.object_headers(head);
    }
    let add_object_headers = |headers: &mut HeaderMap| {
        for (name, value) in &object_headers {
            if let (Ok(name), Ok(value)) = (
                HeaderName::from_bytes(name.as_bytes()),
                HeaderValue::from_str(value),
            ) {
                headers.insert(name, value);
            }
        }
    };

    for fault in faults {
        match fault {
            Fault::Status { code, retry_after } => {
                let mut headers = HeaderMap::new();
                headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("text/plain"));
                if let Some(value) = retry_after
                    .as_deref()
                    .and_then(|v| HeaderValue::from_str(v).ok())
                {
                    headers.insert(header::RETRY_AFTER, value);
                }
                let body = format!("karu-testkit: injected status {code}\n");
                return ctx.respond(status_code(*code), headers, BodyPlan::bytes(body.into()));
            }
            Fault::OversizedErrorBody { code, size } => {
                let unit = b"<Error><Code>InternalError</Code><Message>oversized error body</Message></Error>\n";
                // Whole copies of the unit (a memcpy each, fast even unoptimised: a batch of
                // a thousand such answers must not make the server itself slow), cut to size.
                let mut body = unit.repeat(size.div_ceil(unit.len()));
                body.truncate(*size);
                let mut headers = HeaderMap::new();
                headers.insert(
                    header::CONTENT_TYPE,
                    HeaderValue::from_static("application/xml"),
                );
                return ctx.respond(status_code(*code), headers, BodyPlan::bytes(body.into()));
            }
            _ => {}
        }
    }

    if let (Some(route), Some(head)) = (&route, &head)
        && let Some(reply) = route.respond(head)
    {
        return gate_response_with(ctx, reply, faults);
    }

    if !(ctx.head || record.method == "GET") {
        let mut headers = HeaderMap::new();
        headers.insert(header::ALLOW, HeaderValue::from_static("GET, HEAD"));
        return ctx.error(
            StatusCode::METHOD_NOT_ALLOWED,
            "MethodNotAllowed",
            "Only GET and HEAD are supported.",
            headers,
        );
    }

    // Held requests wait for their round, then read the object in turn; the ticket (taken
    // with the faults) ends its turn when the answer is built (at the end of this function),
    // or gives it up if the request is answered before it gets here.
    if let Some(ticket) = &ticket {
        ticket.turn().await;
    }

    let object_path = object_path.as_deref().unwrap_or(&record.path);
    if has(&Fault::ChangeEtag) {
        ctx.shared.change_etag(object_path);
    }
    if has(&Fault::ChangeContent) {
        ctx.shared.change_content(object_path);
    }
    let Some(object) = ctx.shared.object(object_path) else {
        return ctx.error(
            StatusCode::NOT_FOUND,
            "NoSuchKey",
            "The specified key does not exist.",
            HeaderMap::new(),
        );
    };

    let if_match: Vec<&str> = request_headers
        .get_all(header::IF_MATCH)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .collect();
    if request_headers.contains_key(header::IF_MATCH)
        && !has(&Fault::IgnoreIfMatch)
        && !if_match_passes(
            &if_match,
            object.etag.as_ref().and_then(|e| e.to_str().ok()),
        )
    {
        return ctx.error(
            StatusCode::PRECONDITION_FAILED,
            "PreconditionFailed",
            "At least one of the pre-conditions you specified did not hold.",
            HeaderMap::new(),
        );
    }

    let size = object.data.len();
    let mut headers = HeaderMap::new();
    headers.insert(header::ACCEPT_RANGES, HeaderValue::from_static("bytes"));
    if let Some(value) = &object.etag {
        headers.insert(header::ETAG, value.clone());
    }
    headers.insert(header::LAST_MODIFIED, object.last_modified.clone());

    let spec =
        if has(&Fault::IgnoreRange) {
            None
        } else {
            record.range.as_deref().and_then(range::parse).filter(|s| {
                !(ctx.shared.ignores_suffix_ranges() && matches!(s, RangeSpec::Suffix(_)))
            })
        };
    let shift = faults.iter().find_map(|f| match f {
        Fault::WrongContentRange { shift } => Some(*shift),
        _ => None,
    });
    let (status, start, len) = match spec.map(|s| range::resolve(s, size)) {
        None => (StatusCode::OK, 0, size),
        Some(Resolved::Unsatisfiable) => {
            // The size this answer states: moved by a wrong-range fault, like a range is.
            let stated = shift.map_or(size, |shift| shifted(size, shift));
            if !has(&Fault::MissingContentRange) {
                headers.insert(
                    header::CONTENT_RANGE,
                    HeaderValue::try_from(format!("bytes */{stated}"))
                        .unwrap_or_else(|_| HeaderValue::from_static("bytes */0")),
                );
            }
            // S3 names the range asked for and the object's size in the body.
            let requested = quick_xml::escape::escape(record.range.as_deref().unwrap_or(""));
            let extra = format!(
                "<RangeRequested>{requested}</RangeRequested><ActualObjectSize>{stated}</ActualObjectSize>"
            );
            add_object_headers(&mut headers);
            return ctx.error_with(
                StatusCode::RANGE_NOT_SATISFIABLE,
                "InvalidRange",
                "The requested range is not satisfiable.",
                &extra,
                headers,
            );
        }
        Some(Resolved::Partial { start, end }) => {
            if !has(&Fault::MissingContentRange) {
                let (a, b) = match shift {
                    Some(shift) => (shifted(start, shift), shifted(end, shift)),
                    None => (start, end),
                };
                let value = format!("bytes {a}-{b}/{size}");
                if let Ok(value) = HeaderValue::from_str(&value) {
                    headers.insert(header::CONTENT_RANGE, value);
                }
            }
            let status = if has(&Fault::OkWithContentRange) {
                StatusCode::OK
            } else {
                StatusCode::PARTIAL_CONTENT
            };
            (status, start, end - start + 1)
        }
    };
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/octet-stream"),
    );
    add_object_headers(&mut headers);

    let mut plan = if has(&Fault::Gzip) && !ctx.head {
        let identity = match &object.data {
            Data::Stored(bytes) => bytes.slice(start as usize..(start + len) as usize),
            Data::Virtual(_) => Bytes::from(pattern(start, len as usize)),
        };
        headers.insert(header::CONTENT_ENCODING, HeaderValue::from_static("gzip"));
        BodyPlan::bytes(gzip(&identity))
    } else {
        let source = match &object.data {
            Data::Stored(bytes) => {
                Source::Bytes(bytes.slice(start as usize..(start + len) as usize))
            }
            Data::Virtual(_) => Source::Pattern(start),
        };
        BodyPlan {
            source,
            len,
            stop: None,
            trickle: None,
            close_delimited: false,
        }
    };
    apply_body_faults(&mut plan, faults);
    ctx.respond(status, headers, plan)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn if_match_lists() {
        assert_eq!(
            entity_tags(r#""a", W/"b" ,"c,d", *"#),
            vec![r#""a""#, r#"W/"b""#, r#""c,d""#, "*"]
        );
        assert!(if_match_passes(&[r#""x", "y""#], Some(r#""y""#)));
        assert!(!if_match_passes(&[r#"W/"y""#], Some(r#""y""#)));
        assert!(!if_match_passes(&[r#""y""#], Some(r#"W/"y""#)));
        assert!(if_match_passes(&["*"], None));
        assert!(!if_match_passes(&[r#""y""#], None));
        assert!(if_match_passes(&[r#""a""#, r#""y""#], Some(r#""y""#)));
    }

    #[test]
    fn shifts_clamp() {
        assert_eq!(shifted(5, -10), 0);
        assert_eq!(shifted(5, 3), 8);
    }
}
