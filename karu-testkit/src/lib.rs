//! Mock servers and harnesses that Karu's tests and benchmarks read through.
//!
//! A test author first starts a [`MockServer`] (`MockServer::start()`), inserts the objects the
//! test reads, optionally adds [`FaultRule`]s, runs the client against
//! [`MockServer::url`], and asserts on the evidence in [`MockServer::requests`]: which ranges
//! were requested, how often, on which connection, with what status. The [`nginx`] module runs
//! a real nginx over a directory for checks against a real server.

pub mod http;
pub mod nginx;

pub use http::{
    Fault, FaultRule, Gate, GateResponse, MockServer, MockServerBuilder, RequestHead,
    RequestRecord, fill_pattern, pattern, pattern_byte,
};
