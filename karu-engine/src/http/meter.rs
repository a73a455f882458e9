//! A transfer's meter around its landing: counts the attempts of the fetch and the bytes that
//! land, and stamps the first one (see [`Timing`](crate::Timing)).

use std::time::Instant;

use crate::batch::timing::TransferMeter;
use crate::http::landing::Landing;
use crate::sdk::Error;

/// A landing that meters what passes through it to `inner`.
pub(crate) struct Metered<'l> {
    inner: &'l mut dyn Landing,
    pub(crate) meter: TransferMeter,
}

impl<'l> Metered<'l> {
    pub(crate) fn new(inner: &'l mut dyn Landing) -> Self {
        Metered {
            inner,
            meter: TransferMeter::start(),
        }
    }
}

impl Landing for Metered<'_> {
    fn span(&self) -> u64 {
        self.inner.span()
    }

    fn expect(&mut self, end: u64) -> Result<(), Error> {
        self.inner.expect(end)
    }

    fn put(&mut self, at: u64, bytes: &[u8]) {
        self.meter.received(bytes.len() as u64, Instant::now);
        self.inner.put(at, bytes);
    }

    fn failure(&mut self) -> Option<Error> {
        self.inner.failure()
    }

    fn attempt(&mut self, n: u32) {
        self.meter.attempt(n);
        self.inner.attempt(n);
    }
}
