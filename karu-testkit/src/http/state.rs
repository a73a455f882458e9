//! The state shared by the server's tasks and the [`MockServer`](crate::MockServer) handle:
//! objects, the request log, the fault plan and the link model.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU16, AtomicU64, Ordering};
use std::time::Duration;

use bytes::Bytes;
use parking_lot::{Mutex, RwLock};
use std::time::Instant;

use super::barrier::{Barrier, Ticket};
use super::fault::{Fault, FaultPlan, FaultRule};
use super::timer::Timer;
use super::{Gate, RequestRecord, Route};

/// The bytes of an object.
#[derive(Debug, Clone)]
pub(crate) enum Data {
    /// Stored bytes.
    Stored(Bytes),
    /// `size` bytes of [`pattern_byte`](crate::pattern_byte), generated when sent.
    Virtual(u64),
}

impl Data {
    pub(crate) fn len(&self) -> u64 {
        match self {
            Data::Stored(b) => b.len() as u64,
            Data::Virtual(n) => *n,
        }
    }
}

/// An object served at a path.
#[derive(Debug, Clone)]
pub(crate) struct Object {
    pub(crate) data: Data,
    /// The exact `ETag` header value, or `None` for no header.
    pub(crate) etag: Option<http::HeaderValue>,
    /// The `Last-Modified` header value: when it was inserted or last changed.
    pub(crate) last_modified: http::HeaderValue,
}

fn http_now() -> http::HeaderValue {
    http::HeaderValue::try_from(httpdate::fmt_http_date(std::time::SystemTime::now()))
        .unwrap_or_else(|_| http::HeaderValue::from_static("Thu, 01 Jan 1970 00:00:00 GMT"))
}

/// The shared bandwidth cap: one virtual clock for all connections (a leaky bucket).
#[derive(Debug)]
struct Pacer {
    bytes_per_sec: u64,
    /// When the link is next free.
    next: Instant,
}

/// A request's headers as received, names in lower case and in order, in one buffer of
/// `name:value` lines (a name holds no `:`, a value no line break): one allocation a request.
/// A pair of strings for each header would cost the mock two allocations for every header of
/// every request, so a client that sends more headers (Karu's `User-Agent` and
/// `Accept-Encoding: identity`) would pay for the mock's log in a benchmark sharing its cores.
#[derive(Debug)]
pub(crate) struct RecordedHeaders(String);

impl RecordedHeaders {
    pub(crate) fn of(headers: &http::HeaderMap) -> Self {
        let mut lines = String::with_capacity(
            headers
                .iter()
                .map(|(n, v)| n.as_str().len() + v.len() + 2)
                .sum(),
        );
        for (name, value) in headers {
            lines.push_str(name.as_str());
            lines.push(':');
            lines.push_str(&String::from_utf8_lossy(value.as_bytes()));
            lines.push('\n');
        }
        RecordedHeaders(lines)
    }

    /// The headers as pairs of strings, as [`RequestRecord::headers`] holds them.
    pub(crate) fn pairs(&self) -> Vec<(String, String)> {
        self.0
            .lines()
            .filter_map(|line| line.split_once(':'))
            .map(|(name, value)| (name.to_owned(), value.to_owned()))
            .collect()
    }
}

/// A request in the log; status and body bytes are filled in as the response goes out.
#[derive(Debug)]
pub(crate) struct LiveRecord {
    pub(crate) method: String,
    pub(crate) path: String,
    pub(crate) query: Option<String>,
    pub(crate) headers: RecordedHeaders,
    pub(crate) range: Option<String>,
    pub(crate) byte_range: Option<(u64, u64)>,
    pub(crate) connection: u64,
    pub(crate) fault: Option<String>,
    pub(crate) status: AtomicU16,
    pub(crate) body_bytes: AtomicU64,
    pub(crate) latency_nanos: AtomicU64,
    pub(crate) paced_bytes: AtomicU64,
}

impl LiveRecord {
    fn snapshot(&self) -> RequestRecord {
        RequestRecord {
            method: self.method.clone(),
            path: self.path.clone(),
            query: self.query.clone(),
            headers: self.headers.pairs(),
            range: self.range.clone(),
            byte_range: self.byte_range,
            status: self.status.load(Ordering::Acquire),
            body_bytes: self.body_bytes.load(Ordering::Acquire),
            connection: self.connection,
            fault: self.fault.clone(),
            latency: Duration::from_nanos(self.latency_nanos.load(Ordering::Acquire)),
            paced_bytes: self.paced_bytes.load(Ordering::Acquire),
        }
    }
}

/// Everything the server's tasks share with the handle.
#[derive(Debug)]
pub(crate) struct Shared {
    timer: Timer,
    objects: RwLock<HashMap<String, Object>>,
    /// Source of ETag versions; bumped on every insert, every [`Fault::ChangeEtag`] and every
    /// [`Fault::ChangeContent`].
    version: AtomicU64,
    log: Mutex<Vec<Arc<LiveRecord>>>,
    faults: Mutex<FaultPlan>,
    has_faults: AtomicBool,
    latency_nanos: AtomicU64,
    pacer: Mutex<Option<Pacer>>,
    paced: AtomicBool,
    gate: RwLock<Option<Arc<dyn Gate>>>,
    /// Answer suffix ranges (`bytes=-n`) with the whole object, as Azure does.
    ignore_suffix_ranges: AtomicBool,
    route: RwLock<Option<Arc<dyn Route>>>,
    connections: AtomicU64,
    /// Connections still to be accepted and never answered ([`MockServer::silence_connections`]).
    ///
    /// [`MockServer::silence_connections`]: crate::MockServer::silence_connections
    silent: AtomicU64,
    /// Requests after which each connection ends gracefully (0: never).
    requests_per_connection: AtomicU64,
    bytes_sent: AtomicU64,
    /// Requests between their head arriving and their last response byte going out.
    in_flight: AtomicU64,
    /// High-water mark of `in_flight` since the start or the last reset.
    max_in_flight: AtomicU64,
    /// Requests waiting out their latency ([`Shared::delay`]).
    in_latency: AtomicU64,
    /// Requests being served under [`Fault::ThrottleAbove`].
    throttle_served: AtomicU64,
    /// Where [`Fault::Barrier`] requests wait for each other.
    barrier: Barrier,
}

fn normalize(path: &str) -> String {
    if path.starts_with('/') {
        path.to_owned()
    } else {
        format!("/{path}")
    }
}

impl Shared {
    pub(crate) fn new(timer: Timer) -> Self {
        Self {
            timer,
            objects: RwLock::default(),
            version: AtomicU64::new(0),
            log: Mutex::default(),
            faults: Mutex::default(),
            has_faults: AtomicBool::new(false),
            latency_nanos: AtomicU64::new(0),
            pacer: Mutex::new(None),
            paced: AtomicBool::new(false),
            gate: RwLock::new(None),
            ignore_suffix_ranges: AtomicBool::new(false),
            route: RwLock::new(None),
            connections: AtomicU64::new(0),
            silent: AtomicU64::new(0),
            requests_per_connection: AtomicU64::new(0),
            bytes_sent: AtomicU64::new(0),
            in_flight: AtomicU64::new(0),
            max_in_flight: AtomicU64::new(0),
            in_latency: AtomicU64::new(0),
            throttle_served: AtomicU64::new(0),
            barrier: Barrier::default(),
        }
    }

    /// The server's precise timer, for every wait of the link model.
    pub(crate) fn timer(&self) -> &Timer {
        &self.timer
    }

    fn next_etag(&self, len: u64) -> http::HeaderValue {
        let version = self.version.fetch_add(1, Ordering::Relaxed) + 1;
        http::HeaderValue::try_from(format!("\"{version:x}-{len:x}\""))
            .unwrap_or_else(|_| unreachable!("hex digits are a valid header value"))
    }

    pub(crate) fn insert(&self, path: &str, data: Data) {
        let etag = Some(self.next_etag(data.len()));
        self.objects.write().insert(
            normalize(path),
            Object {
                data,
                etag,
                last_modified: http_now(),
            },
        );
    }

    pub(crate) fn remove(&self, path: &str) {
        self.objects.write().remove(&normalize(path));
    }

    pub(crate) fn set_etag(&self, path: &str, etag: Option<&str>) {
        let etag = etag.map(|value| {
            http::HeaderValue::from_str(value).unwrap_or_else(|_| {
                panic!("karu-testkit: {value:?} is not a valid ETag header value")
            })
        });
        if let Some(object) = self.objects.write().get_mut(&normalize(path)) {
            object.etag = etag;
        }
    }

    /// Gives the object a new generated ETag ([`Fault::ChangeEtag`]).
    pub(crate) fn change_etag(&self, path: &str) {
        let mut objects = self.objects.write();
        if let Some(object) = objects.get_mut(path) {
            object.etag = Some(self.next_etag(object.data.len()));
            object.last_modified = http_now();
        }
    }

    /// Gives the object its next version ([`Fault::ChangeContent`]): every byte one more, and
    /// a new ETag of the kind it had (none stays none, a weak one stays, a strong one is
    /// replaced).
    pub(crate) fn change_content(&self, path: &str) {
        let mut objects = self.objects.write();
        if let Some(object) = objects.get_mut(path) {
            let mut bytes = match &object.data {
                Data::Stored(bytes) => bytes.to_vec(),
                Data::Virtual(size) => crate::pattern(0, *size as usize),
            };
            for byte in &mut bytes {
                *byte = byte.wrapping_add(1);
            }
            let weak = object
                .etag
                .as_ref()
                .is_some_and(|tag| tag.as_bytes().starts_with(b"W/"));
            if object.etag.is_some() && !weak {
                object.etag = Some(self.next_etag(bytes.len() as u64));
            }
            object.data = Data::Stored(Bytes::from(bytes));
            object.last_modified = http_now();
        }
    }

    pub(crate) fn object(&self, path: &str) -> Option<Object> {
        self.objects.read().get(path).cloned()
    }

    pub(crate) fn log(&self, record: Arc<LiveRecord>) {
        self.log.lock().push(record);
    }

    pub(crate) fn requests(&self) -> Vec<RequestRecord> {
        self.log.lock().iter().map(|r| r.snapshot()).collect()
    }

    pub(crate) fn take_requests(&self) -> Vec<RequestRecord> {
        let taken = std::mem::take(&mut *self.log.lock());
        taken.iter().map(|r| r.snapshot()).collect()
    }

    pub(crate) fn request_count(&self) -> usize {
        self.log.lock().len()
    }

    pub(crate) fn add_fault(&self, rule: FaultRule) {
        let mut plan = self.faults.lock();
        plan.add(rule);
        self.has_faults.store(true, Ordering::Release);
    }

    pub(crate) fn clear_faults(&self) {
        let mut plan = self.faults.lock();
        plan.clear();
        self.has_faults.store(false, Ordering::Release);
    }

    /// The faults applying to this request, advancing the rules' counters, and its ticket at
    /// the barrier if a [`Fault::Barrier`] applies. The ticket is taken under the same lock as
    /// the faults: requests take their turns in the order their faults were chosen, so a fault
    /// chosen for the second request (a [`Fault::ChangeEtag`]) is never seen by the first.
    pub(crate) fn select_faults(
        &self,
        method: &str,
        path: &str,
        headers: &http::HeaderMap,
    ) -> (Vec<Fault>, Option<Ticket<'_>>) {
        if !self.has_faults.load(Ordering::Acquire) {
            return (Vec::new(), None);
        }
        let mut plan = self.faults.lock();
        if plan.is_empty() {
            return (Vec::new(), None);
        }
        let faults = plan.select(method, path, headers);
        let ticket = faults.iter().find_map(|f| match f {
            Fault::Barrier(round) => Some(self.barrier.arrive(*round)),
            _ => None,
        });
        drop(plan);
        (faults, ticket)
    }

    pub(crate) fn set_latency(&self, latency: Duration) {
        let nanos = u64::try_from(latency.as_nanos()).unwrap_or(u64::MAX);
        self.latency_nanos.store(nanos, Ordering::Relaxed);
    }

    pub(crate) fn latency(&self) -> Duration {
        Duration::from_nanos(self.latency_nanos.load(Ordering::Relaxed))
    }

    pub(crate) fn set_bandwidth(&self, bytes_per_sec: Option<u64>) {
        let mut pacer = self.pacer.lock();
        *pacer = bytes_per_sec.map(|rate| Pacer {
            bytes_per_sec: rate.max(1),
            next: Instant::now(),
        });
        self.paced.store(pacer.is_some(), Ordering::Release);
    }

    pub(crate) fn is_paced(&self) -> bool {
        self.paced.load(Ordering::Acquire)
    }

    /// Reserves the link for `n` bytes: returns when they may be sent (`None`: no cap).
    pub(crate) fn reserve(&self, n: usize) -> Option<Instant> {
        if !self.is_paced() {
            return None;
        }
        let mut guard = self.pacer.lock();
        let pacer = guard.as_mut()?;
        let now = Instant::now();
        let start = pacer.next.max(now);
        pacer.next = start + Duration::from_secs_f64(n as f64 / pacer.bytes_per_sec as f64);
        Some(start)
    }

    pub(crate) fn set_gate(&self, gate: Option<Arc<dyn Gate>>) {
        *self.gate.write() = gate;
    }

    pub(crate) fn set_ignore_suffix_ranges(&self, on: bool) {
        self.ignore_suffix_ranges.store(on, Ordering::Release);
    }

    pub(crate) fn ignores_suffix_ranges(&self) -> bool {
        self.ignore_suffix_ranges.load(Ordering::Acquire)
    }

    pub(crate) fn gate(&self) -> Option<Arc<dyn Gate>> {
        self.gate.read().clone()
    }

    pub(crate) fn set_route(&self, route: Option<Arc<dyn Route>>) {
        *self.route.write() = route;
    }

    pub(crate) fn route(&self) -> Option<Arc<dyn Route>> {
        self.route.read().clone()
    }

    /// Counts a new connection and returns its id (1, 2, ...).
    pub(crate) fn next_connection(&self) -> u64 {
        self.connections.fetch_add(1, Ordering::Relaxed) + 1
    }

    pub(crate) fn set_requests_per_connection(&self, n: u64) {
        self.requests_per_connection.store(n, Ordering::Release);
    }

    /// Requests after which each connection ends gracefully (0: never).
    pub(crate) fn requests_per_connection(&self) -> u64 {
        self.requests_per_connection.load(Ordering::Acquire)
    }

    pub(crate) fn set_silent(&self, n: u64) {
        self.silent.store(n, Ordering::Release);
    }

    /// Whether the connection just accepted is to be held silent (and counts it if so).
    pub(crate) fn take_silent(&self) -> bool {
        self.silent
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| n.checked_sub(1))
            .is_ok()
    }

    pub(crate) fn connections_accepted(&self) -> u64 {
        self.connections.load(Ordering::Relaxed)
    }

    pub(crate) fn add_bytes_sent(&self, n: u64) {
        self.bytes_sent.fetch_add(n, Ordering::Relaxed);
    }

    pub(crate) fn bytes_sent(&self) -> u64 {
        self.bytes_sent.load(Ordering::Relaxed)
    }

    /// Counts a request as in flight until the returned guard is dropped.
    pub(crate) fn begin_request(self: &Arc<Self>) -> InFlight {
        let now = self.in_flight.fetch_add(1, Ordering::AcqRel) + 1;
        self.max_in_flight.fetch_max(now, Ordering::AcqRel);
        InFlight {
            shared: Arc::clone(self),
            served: false,
        }
    }

    pub(crate) fn max_in_flight(&self) -> u64 {
        self.max_in_flight.load(Ordering::Acquire)
    }

    pub(crate) fn in_flight(&self) -> u64 {
        self.in_flight.load(Ordering::Acquire)
    }

    /// Waits `delay` on the precise timer, recorded in `record` and counted in
    /// [`Shared::in_latency`] while it lasts (also when the wait is abandoned).
    pub(crate) async fn delay(&self, record: &LiveRecord, delay: Duration) {
        let nanos = u64::try_from(delay.as_nanos()).unwrap_or(u64::MAX);
        record.latency_nanos.store(nanos, Ordering::Release);
        if delay.is_zero() {
            return;
        }
        struct Waiting<'a>(&'a AtomicU64);
        impl Drop for Waiting<'_> {
            fn drop(&mut self) {
                self.0.fetch_sub(1, Ordering::AcqRel);
            }
        }
        self.in_latency.fetch_add(1, Ordering::AcqRel);
        let _waiting = Waiting(&self.in_latency);
        self.timer.sleep_until(Instant::now() + delay).await;
    }

    pub(crate) fn in_latency(&self) -> u64 {
        self.in_latency.load(Ordering::Acquire)
    }

    pub(crate) fn reset_max_in_flight(&self) {
        // Requests still in flight count towards the new mark; the second look catches one
        // that began between the load and the store.
        let now = self.in_flight.load(Ordering::Acquire);
        self.max_in_flight.store(now, Ordering::Release);
        let again = self.in_flight.load(Ordering::Acquire);
        self.max_in_flight.fetch_max(again, Ordering::AcqRel);
    }
}

/// One request in flight (see [`Shared::begin_request`]): held by the handler, then by the
/// response body until its last byte is handed to the connection, or it is dropped.
#[derive(Debug)]
pub(crate) struct InFlight {
    shared: Arc<Shared>,
    /// Holds a place among the requests served under [`Fault::ThrottleAbove`].
    served: bool,
}

impl InFlight {
    /// [`Fault::ThrottleAbove`]: take one of `limit` places
    /// among the requests served under throttling, held until this guard drops; false (and
    /// nothing held) when all are taken.
    pub(crate) fn serve_within(&mut self, limit: u64) -> bool {
        if self.served {
            return true;
        }
        let taken =
            self.shared
                .throttle_served
                .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                    (n < limit).then_some(n + 1)
                });
        self.served = taken.is_ok();
        self.served
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.shared.in_flight.fetch_sub(1, Ordering::AcqRel);
        if self.served {
            self.shared.throttle_served.fetch_sub(1, Ordering::AcqRel);
        }
    }
}

#[cfg(test)]
mod tests {
    use http::{HeaderMap, HeaderName, HeaderValue};

    use super::RecordedHeaders;

    #[test]
    fn recorded_headers_come_back_as_received_in_order() {
        let mut headers = HeaderMap::new();
        headers.append("host", HeaderValue::from_static("127.0.0.1:80"));
        headers.append("authorization", HeaderValue::from_static("Bearer a:b:c"));
        headers.append("x-empty", HeaderValue::from_static(""));
        headers.append("x-twice", HeaderValue::from_static("1"));
        headers.append("x-twice", HeaderValue::from_static("2"));
        headers.append(
            HeaderName::from_static("x-bytes"),
            HeaderValue::from_bytes(b"caf\xe9").unwrap(),
        );
        let pairs = RecordedHeaders::of(&headers).pairs();
        let expected = [
            ("host", "127.0.0.1:80"),
            ("authorization", "Bearer a:b:c"),
            ("x-empty", ""),
            ("x-twice", "1"),
            ("x-twice", "2"),
            ("x-bytes", "caf\u{fffd}"),
        ];
        assert_eq!(pairs, expected.map(|(n, v)| (n.to_string(), v.to_string())));
        assert!(RecordedHeaders::of(&HeaderMap::new()).pairs().is_empty());
    }
}
